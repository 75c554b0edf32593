#include "cluster/data_dir.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "cluster/control/raft_io.h"

namespace ingrid {
namespace {

// The identity file: "ingrid-member 1\nid <decimal>\naddress <host:port>\n".
constexpr const char* kMagic = "ingrid-member 1";

Error ioError(const std::string& what, const std::string& path, int err) {
  return Error(Errc::invalid_configuration,
               "data directory: " + what + " " + path + ": " + std::strerror(err));
}

// Writes `bytes` to `path` durably: a temporary file, fsync, rename, fsync of its directory.
Result<bool> writeDurably(const std::string& dir, const std::string& path,
                          const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ioError("cannot create", tmp, errno);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return ioError("cannot write", tmp, err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return ioError("cannot fsync", tmp, err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ioError("cannot rename", tmp, errno);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ioError("cannot open", dir, errno);
  const int rv = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rv != 0) return ioError("cannot fsync", dir, err);
  return true;
}

}  // namespace

Result<std::unique_ptr<DataDir>> DataDir::open(std::string dir) {
  if (dir.empty()) return Error(Errc::invalid_argument, "data directory: the path is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return Error(Errc::invalid_configuration,
                 "data directory " + dir + ": cannot be made: " + ec.message());
  }
  const std::string lock = dir + "/lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ioError("cannot open", lock, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return Error(Errc::invalid_configuration,
                   "data directory " + dir + " is in use by another process (it holds " + lock +
                       "): each node needs a directory of its own");
    }
    return ioError("cannot lock", lock, err);
  }
  return std::unique_ptr<DataDir>(new DataDir(std::move(dir), fd));
}

DataDir::~DataDir() {
  if (lockFd_ >= 0) ::close(lockFd_);  // releases the lock
}

Result<std::optional<DataDir::Identity>> DataDir::identity() const {
  const std::string path = dir_ + "/member";
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT || !std::filesystem::exists(path)) return std::optional<Identity>{};
    return ioError("cannot read", path, errno);
  }
  std::string magic, idKey, addressKey;
  Identity id;
  std::getline(in, magic);
  in >> idKey >> id.memberId >> addressKey >> id.address;
  if (magic != kMagic || idKey != "id" || addressKey != "address" || !in || id.memberId == 0 ||
      id.address.empty()) {
    return Error(Errc::invalid_configuration,
                 "data directory: " + path + " is not an identity file (expected '" + kMagic +
                     "', then 'id N' and 'address HOST:PORT'); remove the directory's contents "
                     "to start this node afresh");
  }
  return std::optional<Identity>(std::move(id));
}

Result<bool> DataDir::setIdentity(const Identity& id) {
  std::ostringstream out;
  out << kMagic << "\nid " << id.memberId << "\naddress " << id.address << "\n";
  return writeDurably(dir_, dir_ + "/member", out.str());
}

Result<bool> DataDir::forget() {
  const std::string path = dir_ + "/member";
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ioError("cannot remove", path, errno);
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return RaftIo::wipe(raftDir());
}

}  // namespace ingrid
