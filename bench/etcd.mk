# bench/etcd.mk -- the etcd coordinator next to the flock path: lock round trip and a whole
# swap on rsd-sim, on a real etcd started on loopback (one "skipped" line without etcd).
BENCH_RUNS += bench-etcd
.PHONY: bench-etcd

$(B)/bench/etcd: bench/etcd.c bench/bench_util.h tests/http_req.h tests/etcd_harness.h tests/listen_proc.h $(HEADERS) | $(B)/bench
	$(CC) -std=c99 -O2 -I. $(CWARN) bench/etcd.c -o $@

bench-etcd: $(B)/bench/etcd $(B)/bin/rsd-sim
	@$(B)/bench/etcd
