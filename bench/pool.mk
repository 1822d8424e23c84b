# bench/pool.mk -- pool policy vs a C model of the upstream pool's dispatch (included by the Makefile)
.PHONY: bench-pool
BENCH_RUNS += bench-pool
bench-pool: | $(B)/bench
	$(CC) -std=c99 -O2 -DNDEBUG -I. bench/bench_pool.c -o $(B)/bench/bench_pool
	$(B)/bench/bench_pool
