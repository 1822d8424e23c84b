/* fuzz_oracle.h -- FZ_ORACLE_BEGIN ... FZ_ORACLE_END bracket the checking code of a
   harness (invariant oracles, reference copies, the fake host's bookkeeping). Under
   clang every function defined between them carries no_sanitize("coverage"): no edge
   counters and no compare tracing, so libFuzzer steers by the code under test only and
   spends no time per run on features of the checker's own loops (libFuzzer's per-run
   cost grows with the number of features a run touches). ASan and UBSan still
   instrument that code, and every check still runs. Library functions the checker
   calls stay instrumented. Other compilers (the gcc replay build) ignore the brackets. */
#ifndef FZ_ORACLE_H
#define FZ_ORACLE_H
#if defined(__clang__)
#define FZ_ORACLE_BEGIN \
    _Pragma("clang attribute push(__attribute__((no_sanitize(\"coverage\"))), apply_to = function)")
#define FZ_ORACLE_END _Pragma("clang attribute pop")
#else
#define FZ_ORACLE_BEGIN
#define FZ_ORACLE_END
#endif
#endif
