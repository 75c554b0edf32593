#include "cluster/data_dir.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/temp_dir.h"

using ingrid::DataDir;
using ingrid::Errc;
using ingrid::testing::TempDir;

TEST_CASE("DataDir: the identity survives a reopen, forget removes it and the Raft files only",
          "[data_dir]") {
  TempDir tmp("ingrid-data-dir-unit");
  REQUIRE_FALSE(tmp.path.empty());
  const std::string dir = tmp.sub("node");  // made by open, with its parent
  {
    auto opened = DataDir::open(dir);
    REQUIRE(opened.ok());
    DataDir& d = **opened;
    auto none = d.identity();
    REQUIRE(none.ok());
    CHECK_FALSE(none->has_value());
    REQUIRE(d.setIdentity({7, "10.0.0.7:7400"}).ok());
    REQUIRE(d.setIdentity({8, "10.0.0.8:7400"}).ok());  // replaces
  }
  auto reopened = DataDir::open(dir);
  REQUIRE(reopened.ok());
  DataDir& d = **reopened;
  auto id = d.identity();
  REQUIRE(id.ok());
  REQUIRE(id->has_value());
  CHECK((*id)->memberId == 8);
  CHECK((*id)->address == "10.0.0.8:7400");

  std::filesystem::create_directories(d.raftDir());
  std::ofstream(d.raftDir() + "/raft-meta") << "state";
  std::ofstream(d.raftDir() + "/keep") << "not ours";
  REQUIRE(d.forget().ok());
  auto forgotten = d.identity();
  REQUIRE(forgotten.ok());
  CHECK_FALSE(forgotten->has_value());
  CHECK_FALSE(std::filesystem::exists(d.raftDir() + "/raft-meta"));
  CHECK(std::filesystem::exists(d.raftDir() + "/keep"));
}

TEST_CASE("DataDir: a second open of a directory in use is refused, naming it", "[data_dir]") {
  TempDir tmp("ingrid-data-dir-unit");
  REQUIRE_FALSE(tmp.path.empty());
  auto first = DataDir::open(tmp.path);
  REQUIRE(first.ok());
  auto second = DataDir::open(tmp.path);  // another open file description: flock conflicts
  REQUIRE_FALSE(second.ok());
  CHECK(second.error() == Errc::invalid_configuration);
  CHECK_THAT(second.error().message(),
             Catch::Contains(tmp.path) && Catch::Contains("in use by another process"));
  first->reset();  // released: the next process gets it
  CHECK(DataDir::open(tmp.path).ok());
}

TEST_CASE("DataDir: an identity file that does not parse is an error naming it", "[data_dir]") {
  TempDir tmp("ingrid-data-dir-unit");
  REQUIRE_FALSE(tmp.path.empty());
  std::ofstream(tmp.sub("member")) << "ingrid-member 1\nid zero\n";
  auto opened = DataDir::open(tmp.path);
  REQUIRE(opened.ok());
  auto id = (*opened)->identity();
  REQUIRE_FALSE(id.ok());
  CHECK(id.error() == Errc::invalid_configuration);
  CHECK_THAT(id.error().message(),
             Catch::Contains(tmp.sub("member")) && Catch::Contains("not an identity file"));
}
