# bench/lru.mk -- reloads a request trace costs: least recently used vs id order (included by the Makefile)
.PHONY: bench-lru
BENCH_RUNS += bench-lru
bench-lru: | $(B)/bench
	$(CC) -std=c99 -O2 -DNDEBUG -Wall -Wextra -Werror -I. bench/lru.c -o $(B)/bench/lru
	$(B)/bench/lru
