# bench/kv.mk -- a swap keeps the conversation (kv_cache_dir) against a real llama-server: the
# prompt tokens and the time of the turn after a swap back, rsd-serve with and without the kv
# cache and the llama.cpp router (tiny models, about 4,000-token turns; 7 rounds, each front
# once per round). About a minute and a half; one "skipped" line when no llama-server is
# found. `build/bench/kv 9` runs 9 rounds.
BENCH_RUNS += bench-kv
.PHONY: bench-kv

$(B)/bench/kv: bench/kv.c bench/bench_util.h tests/http_req.h tests/real_server.h tests/tiny_gguf.h tests/listen_proc.h $(HEADERS) | $(B)/bench
	$(CC) -std=c99 -O2 -I. $(CWARN) bench/kv.c -o $@

bench-kv: $(B)/bench/kv $(B)/bin/rsd-serve
	@$(B)/bench/kv

# The same with two models of the shape of a real 0.5B one (about 530 MB each, written and
# removed): BENCH kv_0p5b_* with the issue's targets. Each 3,900-token prefill takes minutes
# on a CPU without AVX (three of them: the first turns on kv and the router, and the router's
# re-prefill), so not part of `make bench`; `build/bench/kv 0p5b 5` runs 5 rounds on kv and plain.
.PHONY: bench-kv-0p5b
bench-kv-0p5b: $(B)/bench/kv $(B)/bin/rsd-serve
	@$(B)/bench/kv 0p5b
