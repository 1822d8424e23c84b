# bench/pressure.mk -- evictions under another program's moving memory use: the pool vs poll-and-evict-at-90 % (included by the Makefile)
.PHONY: bench-pressure
BENCH_RUNS += bench-pressure
bench-pressure: | $(B)/bench
	$(CC) -std=c99 -Wall -Wextra -Werror -O2 -DNDEBUG -I. bench/pressure.c -o $(B)/bench/pressure
	$(B)/bench/pressure
