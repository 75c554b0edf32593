// See build_info.h. INGRID_VERSION and INGRID_COMMIT are set on this file alone (CMakeLists.txt).
#include "cluster/build_info.h"

#ifndef INGRID_VERSION
#define INGRID_VERSION "unknown"
#endif
#ifndef INGRID_COMMIT
#define INGRID_COMMIT "unknown"
#endif

namespace ingrid {

const char* buildVersion() noexcept { return INGRID_VERSION; }
const char* buildCommit() noexcept { return INGRID_COMMIT; }

}  // namespace ingrid
