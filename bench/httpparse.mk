# Parse throughput of the pure HTTP parsers (no peer library available: see bench/httpparse.c).
BENCH_RUNS += bench-httpparse
.PHONY: bench-httpparse
bench-httpparse: | $(B)/bench
	$(CC) -std=c99 -O2 -I. bench/httpparse.c -o $(B)/bench/httpparse
	@$(B)/bench/httpparse
