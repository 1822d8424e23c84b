# Code size: .text of the whole implementation (-Os, no TLS) and of a program that only
# ensures on a llama.cpp router (gc-sections, the feature macros it does not need).
BENCH_RUNS += bench-size
.PHONY: bench-size
bench-size: | $(B)/bench
	@sh bench/size.sh "$(CC)" $(B)/bench
