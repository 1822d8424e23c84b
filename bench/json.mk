# JSON parse throughput vs cJSON, jsmn (strict + parent links) and simdjson (DOM).
# -O2, no sanitizers, no -march; pinned to CPU 1 when taskset exists. Peers are linked here only.
BENCH_RUNS += bench-json
BENCH_JSON_ARGS ?= -r 5 -t 0.2

$(B)/bench/bench_json_simd.o: bench/bench_json_simd.cpp | $(B)/bench
	$(CXX) -std=c++17 -O2 -g -c $< -o $@

$(B)/bench/bench_json: bench/bench_json.c $(B)/bench/bench_json_simd.o residency.h | $(B)/bench
	$(CC) -std=c99 -O2 -g -I. -Wall -Wextra -Werror -c bench/bench_json.c -o $(B)/bench/bench_json.o
	$(CXX) $(B)/bench/bench_json.o $(B)/bench/bench_json_simd.o -o $@ -lcjson -lsimdjson

.PHONY: bench-json
bench-json: $(B)/bench/bench_json
	@if command -v taskset >/dev/null 2>&1; then taskset -c 1 $(B)/bench/bench_json $(BENCH_JSON_ARGS) bench/data/models64.json; \
	 else $(B)/bench/bench_json $(BENCH_JSON_ARGS) bench/data/models64.json; fi
