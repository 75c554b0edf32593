# Every third-party dependency comes from a Debian package; scripts/install-deps.sh installs them.
# Each check fails early and names the package that provides what is missing.

find_package(Threads REQUIRED)

find_path(INGRID_ASIO_INCLUDE_DIR asio.hpp)
if(NOT INGRID_ASIO_INCLUDE_DIR)
  message(FATAL_ERROR "ingrid: standalone Asio (asio.hpp) not found. "
                      "Install the Debian package libasio-dev (or run scripts/install-deps.sh).")
endif()

find_package(cereal QUIET CONFIG)
if(NOT cereal_FOUND)
  message(FATAL_ERROR "ingrid: Cereal not found. "
                      "Install the Debian package libcereal-dev (or run scripts/install-deps.sh).")
endif()

find_path(INGRID_XXHASH_INCLUDE_DIR xxhash.h)
if(NOT INGRID_XXHASH_INCLUDE_DIR)
  message(FATAL_ERROR "ingrid: xxhash.h not found. "
                      "Install the Debian package libxxhash-dev (or run scripts/install-deps.sh).")
endif()

# Canonical's raft (libraft-dev 0.15): the consensus under the control plane. Only its I/O-agnostic
# core is used (cluster/control/raft_io.*), on our transport and Asio timers, not its libuv I/O.
find_path(INGRID_RAFT_INCLUDE_DIR raft.h)
find_library(INGRID_RAFT_LIBRARY raft)
if(NOT INGRID_RAFT_INCLUDE_DIR OR NOT INGRID_RAFT_LIBRARY)
  message(FATAL_ERROR "ingrid: raft (Canonical's C library, raft.h and libraft) not found. "
                      "Install the Debian package libraft-dev (or run scripts/install-deps.sh).")
endif()

# Abseil (libabsl-dev): flat_hash_set indexes each partition's compact entry store (grid/).
find_package(absl QUIET CONFIG)
if(NOT absl_FOUND)
  message(FATAL_ERROR "ingrid: Abseil not found. "
                      "Install the Debian package libabsl-dev (or run scripts/install-deps.sh).")
endif()

# OpenSSL (libssl-dev): HMAC-SHA256 and random nonces for member and client authentication, and
# TLS (libssl, through Asio's asio/ssl) for member and client connections (cluster/).
find_package(OpenSSL QUIET)
if(NOT OpenSSL_FOUND)
  message(FATAL_ERROR "ingrid: OpenSSL not found. "
                      "Install the Debian package libssl-dev (or run scripts/install-deps.sh).")
endif()

# prometheus-cpp (prometheus-cpp-dev 1.0.1): its core's metric families and text serializer write
# a member's /metrics (cluster/node_metrics.cpp); the request path counts in cells of its own.
find_package(prometheus-cpp QUIET CONFIG)
if(NOT prometheus-cpp_FOUND)
  message(FATAL_ERROR "ingrid: prometheus-cpp not found. "
                      "Install the Debian package prometheus-cpp-dev (or run scripts/install-deps.sh).")
endif()

# cpp-httplib (libcpp-httplib-dev 0.11): the HTTP server of `ingrid-node --metrics` (its probes
# and /metrics; cluster/probe_server.cpp), through pkg-config: Debian builds it as a library, with
# the compile definitions its header must see.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(INGRID_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(NOT INGRID_HTTPLIB_FOUND)
  message(FATAL_ERROR "ingrid: cpp-httplib not found (pkg-config cpp-httplib). "
                      "Install the Debian packages libcpp-httplib-dev and pkg-config "
                      "(or run scripts/install-deps.sh).")
endif()

# CLI11 (libcli11-dev 2.1, header-only): the option parsing of ingrid-node and ingrid-cli only;
# the libraries do not use it.
find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND)
  message(FATAL_ERROR "ingrid: CLI11 not found. "
                      "Install the Debian package libcli11-dev (or run scripts/install-deps.sh).")
endif()

# The commit a build reports (ingrid_build_info); "unknown" outside a git checkout.
if(NOT DEFINED INGRID_COMMIT)
  execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE INGRID_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE INGRID_COMMIT_RESULT)
  if(NOT INGRID_COMMIT_RESULT EQUAL 0 OR INGRID_COMMIT STREQUAL "")
    set(INGRID_COMMIT "unknown")
  endif()
endif()

if(INGRID_BUILD_TESTS)
  find_package(Catch2 2.13 QUIET CONFIG)
  if(NOT Catch2_FOUND)
    message(FATAL_ERROR "ingrid: Catch2 v2.13 not found. Install the Debian package catch2, "
                        "or configure with -DINGRID_BUILD_TESTS=OFF.")
  endif()
endif()

# Asio is header-only; this target carries its include path and the definitions we rely on.
if(NOT TARGET ingrid_asio)
  add_library(ingrid_asio INTERFACE)
  target_include_directories(ingrid_asio SYSTEM INTERFACE ${INGRID_ASIO_INCLUDE_DIR})
  # ASIO_DISABLE_STD_ALIGNED_ALLOC: Asio 1.22 decides between aligned_alloc/free and
  # operator new/delete from whether a libstdc++ header came before its config, so translation
  # units that include Asio first disagree with the others about its inline aligned_new and
  # aligned_delete (an ODR violation ASan reports as alloc-dealloc-mismatch). One choice for all.
  target_compile_definitions(ingrid_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED
                                                   ASIO_DISABLE_STD_ALIGNED_ALLOC)
  target_link_libraries(ingrid_asio INTERFACE Threads::Threads)
endif()

# The raft library, linked by the control plane (cluster/control/).
if(NOT TARGET ingrid_raft)
  add_library(ingrid_raft INTERFACE)
  target_include_directories(ingrid_raft SYSTEM INTERFACE ${INGRID_RAFT_INCLUDE_DIR})
  target_link_libraries(ingrid_raft INTERFACE ${INGRID_RAFT_LIBRARY})
endif()
