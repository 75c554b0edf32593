# ingrid_set_warnings(target): the warning set every ingrid target is built with.
function(ingrid_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wold-style-cast -Wcast-align -Woverloaded-virtual)
  if(INGRID_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(INGRID_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # With the sanitizers' instrumentation, GCC 12 reports false maybe-uninitialized warnings in
  # Catch2's and Asio's headers (std::regex, use_future); they are not ours and not real.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
elseif(INGRID_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  # GCC warns that TSan does not model atomic_thread_fence, which Asio's fenced blocks use; the
  # happens-before edges Asio relies on come from its mutexes and atomics, which TSan does see.
  # GCC 12 also reports false maybe-uninitialized warnings with TSan's instrumentation (the
  # destructor of an Error held in a Result passed by value), as with ASan above.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-tsan -Wno-maybe-uninitialized)
  endif()
  add_link_options(-fsanitize=thread)
elseif(NOT INGRID_SANITIZE STREQUAL "")
  message(FATAL_ERROR "INGRID_SANITIZE must be '', 'address' or 'thread', not '${INGRID_SANITIZE}'")
endif()
if(NOT INGRID_SANITIZE STREQUAL "")
  # The sanitizer builds are the checked ones: assertions on (the thread-ownership checks among
  # them; RelWithDebInfo's -DNDEBUG is undone), and line tables only for the debug information
  # (what a sanitizer's stack trace needs; full -g costs about a quarter more compile time), at
  # -O1 (after the build type's -O2, so it wins), as the sanitizers' own docs advise: under ASan
  # node_lifecycle.cpp compiled in 12.6 s instead of 23, simulation_test.cpp in 10 instead of 16,
  # node_join.cpp in 17-24 instead of 27 (two runs each, 2026-11-28).
  add_compile_options(-UNDEBUG -g1 -O1)
endif()
