# bench/proc.mk -- spawn+reap through the supervisor vs plain fork+exec / posix_spawn (included by the Makefile)
.PHONY: bench-proc
BENCH_RUNS += bench-proc
bench-proc: | $(B)/bench
	$(CC) -std=c99 -O2 -DNDEBUG -I. bench/bench_proc.c -o $(B)/bench/bench_proc
	$(B)/bench/bench_proc
