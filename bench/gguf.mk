# bench/gguf.mk -- the start estimate (residency.h >>gguf) against the real llama-server's own
# report: a model of the shape of a real 0.5B one (about 530 MB, written and removed) and a tiny
# one; BENCH gguf_estimate_* error in %, the file's size alone as the peer; BENCH gguf_header_read_*
# the time to read that file's header, llama.cpp's own reader (from its log) as the peer. About a minute; one
# "skipped" line when no llama-server is found ($LLAMA_SERVER, ../shared/llama.cpp/bin, PATH).
BENCH_RUNS += bench-gguf
.PHONY: bench-gguf

$(B)/bench/gguf_estimate: bench/gguf_estimate.c bench/bench_util.h tests/real_server.h tests/tiny_gguf.h $(HEADERS) | $(B)/bench
	$(CC) -std=c99 -O2 -I. $(CWARN) bench/gguf_estimate.c -o $@

bench-gguf: $(B)/bench/gguf_estimate
	@$(B)/bench/gguf_estimate
