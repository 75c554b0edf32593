// TempDir: a fresh directory under the system's temporary one (mkdtemp), removed with everything
// in it when the TempDir is destroyed. path is empty if it could not be made.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace ingrid::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "ingrid-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) != nullptr) path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // `name` inside it.
  std::string sub(const std::string& name) const { return path + "/" + name; }

  std::string path;
};

}  // namespace ingrid::testing
