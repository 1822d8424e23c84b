# bench/share.mk -- swaps a request trace costs: the pool's collation vs arrival order (included by the Makefile)
.PHONY: bench-share
BENCH_RUNS += bench-share
bench-share: | $(B)/bench
	$(CC) -std=c99 -O2 -DNDEBUG -Wall -Wextra -Werror -I. bench/bench_share.c -o $(B)/bench/bench_share
	$(B)/bench/bench_share
