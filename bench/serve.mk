# bench/serve.mk -- rsd-serve's added latency per request: a non-streaming completion
# through rsd-serve vs calling its llama-server child (rsd-sim) directly, same run.
.PHONY: bench-serve
BENCH_RUNS += bench-serve
bench-serve: $(B)/bin/rsd-serve $(B)/bin/rsd-sim | $(B)/bench
	$(CC) -std=c99 -O2 -DNDEBUG -I. $(CWARN) bench/serve.c -o $(B)/bench/bench_serve
	$(B)/bench/bench_serve $(B)/bin/rsd-serve $(B)/bin/rsd-sim
