# bench/fleet.mk -- readiness overshoot of rsd_fleet vs a fixed 1 s /health poll (included by the Makefile)
.PHONY: bench-fleet
BENCH_RUNS += bench-fleet
bench-fleet: $(B)/bin/rsd-sim | $(B)/bench
	$(CC) -std=c99 -O2 -DNDEBUG -I. bench/fleet.c -o $(B)/bench/fleet
	$(B)/bench/fleet
