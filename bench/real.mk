# bench/real.mk -- the library against a real llama.cpp llama-server (tiny models made on the
# spot): requests and wall time per ensure on the router's common paths and SSE-loaded-to-return
# latency, ours vs upstream's replayed sequence; rsd-serve beside the router itself (added
# latency, cold-swap time to first byte, 64 concurrent streams, front RSS). About 1-2 minutes;
# one "skipped" line when no llama-server is found ($LLAMA_SERVER, ../shared/llama.cpp/bin, PATH).
# `build/bench/real 3` runs figure 3 only.
BENCH_RUNS += bench-real
.PHONY: bench-real

$(B)/bench/real: bench/real.c bench/upstream.h bench/bench_util.h tests/http_req.h tests/real_server.h tests/tiny_gguf.h tests/listen_proc.h $(HEADERS) | $(B)/bench
	$(CC) -std=c99 -O2 -I. $(CWARN) bench/real.c -o $@

bench-real: $(B)/bench/real $(B)/bin/rsd-serve
	@$(B)/bench/real
