# bench/affinity.mk -- rsd-serve's session affinity (prompt tokens the child re-processes over a
# multi-turn chat, with and without) on a real llama-server, and the time from a lease request to
# granted+ready against the real router's unload (included by the Makefile). About a minute;
# "skipped" lines without llama-server. `build/bench/affinity 1` runs figure 1 only.
BENCH_RUNS += bench-affinity
.PHONY: bench-affinity

$(B)/bench/affinity: bench/affinity.c bench/bench_util.h tests/http_req.h tests/real_server.h tests/tiny_gguf.h tests/listen_proc.h $(HEADERS) | $(B)/bench
	$(CC) -std=c99 -O2 -I. $(CWARN) bench/affinity.c -o $@

bench-affinity: $(B)/bench/affinity $(B)/bin/rsd-serve $(B)/bin/rsd-sim
	@$(B)/bench/affinity
