# bench/reconcile.mk -- the reconciler vs a replay of upstream's call sequences on rsd-sim:
# requests and wall time per path (fails if ours makes more requests), loaded-to-return
# latency, decisions/s with 64 residents, TTL-hit cost. -O2, no sanitizers; bench and
# simulator pinned to CPU 1 together when taskset exists (same vCPU). Runs about 50 s.
# `build/bench/reconcile 34` runs figures 3 and 4 only; `build/bench/reconcile 1234 later` runs
# them on rsd-sim's later router generation (default july, the measured build 10116).
BENCH_RUNS += bench-reconcile
.PHONY: bench-reconcile

$(B)/bench/reconcile: bench/reconcile.c bench/upstream.h bench/bench_util.h tests/http_req.h $(HEADERS) | $(B)/bench
	$(CC) -std=c99 -O2 -I. $(CWARN) bench/reconcile.c -o $@

bench-reconcile: $(B)/bench/reconcile $(B)/bin/rsd-sim
	@if command -v taskset >/dev/null 2>&1; then taskset -c 1 $(B)/bench/reconcile; else $(B)/bench/reconcile; fi
