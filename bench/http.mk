# HTTP client/server: keep-alive req/s vs libcurl and a bare socket loop (same-core and
# cross-core), allocations per request, -Os code size. Needs libcurl4-openssl-dev.
BENCH_RUNS += bench-http
.PHONY: bench-http
bench-http: | $(B)/bench
	$(CC) -std=c99 -O2 -I. $(CWARN) bench/bench_http.c -o $(B)/bench/bench_http -lcurl
	@sh bench/http_size.sh "$(CC)" $(B)/bench > $(B)/bench/http_size.txt
	$(B)/bench/bench_http $$(cat $(B)/bench/http_size.txt)
