// The version and commit this build of ingrid was made from (the project's version and
// `git rev-parse --short=12 HEAD` at configure time, "unknown" outside a git checkout).
// Only build_info.cpp sees the INGRID_COMMIT definition (set when CMake configures), so a build
// configured at another commit recompiles that file alone, not every file of the target that
// reports it.
#pragma once

namespace ingrid {

const char* buildVersion() noexcept;
const char* buildCommit() noexcept;

}  // namespace ingrid
