# Benchmarks of the >>state module: lock round trip and attribution update.
BENCH_RUNS += bench-state
.PHONY: bench-state
bench-state: | $(B)/bench
	$(CC) -std=c99 -O2 -I. $(CWARN) bench/state.c -o $(B)/bench/state
	$(B)/bench/state
