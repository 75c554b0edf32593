// The sanitizer settings every harness runs with, also when started by hand: every UBSan report
// is fatal and has a stack, and the known findings listed in fuzz/ubsan.supp are suppressed.
// UBSAN_OPTIONS in the environment overrides these one by one.

// The sanitizer runtime calls this (a name it reserves) before main.
extern "C" const char* __ubsan_default_options() {
  return "halt_on_error=1:print_stacktrace=1:suppressions=" INGRID_FUZZ_UBSAN_SUPPRESSIONS;
}
