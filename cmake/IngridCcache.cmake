# Compiles through ccache (Debian's ccache) when INGRID_CCACHE is on and ccache is installed; an
# explicit CMAKE_CXX_COMPILER_LAUNCHER wins. The cache is keyed on paths relative to the source
# root (the launcher sets CCACHE_BASEDIR), so a fresh clone in another folder hits it too.
# Precompiled headers need ccache's pch_defines and time_macros sloppiness (set here, for every
# compile this build runs).
if(INGRID_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(INGRID_CCACHE_PROGRAM ccache)
  if(INGRID_CCACHE_PROGRAM)
    set(CMAKE_CXX_COMPILER_LAUNCHER
        ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
        CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1 ${INGRID_CCACHE_PROGRAM})
    message(STATUS "ingrid: compiling through ${INGRID_CCACHE_PROGRAM}")
  endif()
endif()
