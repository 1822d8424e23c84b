# residency.h -- build, test, fuzz, bench.  `make test` is the single entry point.
CC      ?= cc
CXX     ?= c++
B       := build
CLANG   := $(shell command -v clang 2>/dev/null)
CLANGXX := $(shell command -v clang++ 2>/dev/null)

CWARN   := -Wall -Wextra -Werror -pedantic -Wshadow -Wundef -Wstrict-prototypes -Wmissing-prototypes
CXXWARN := -Wall -Wextra -Werror -pedantic -Wshadow -Wundef
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

# mbedTLS is optional: tests and the compile matrix use it when it is installed.
HAVE_MBEDTLS := $(shell test -f /usr/include/mbedtls/ssl.h && echo 1)
ifeq ($(HAVE_MBEDTLS),1)
TLS_CFLAGS := -DRSD_HTTP_MBEDTLS
TLS_LIBS   := -lmbedtls -lmbedx509 -lmbedcrypto
endif

TEST_CFLAGS := -std=c99 $(CWARN) -g -O0 $(SAN) -I. $(TLS_CFLAGS)
TEST_LIBS   := $(TLS_LIBS)
EX_CFLAGS   := -std=c99 $(CWARN) -O2 -g -I.

TEST_SRCS  := $(wildcard tests/test_*.c)
TESTS      := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRCS))
FUZZ_NAMES := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
REPLAYS    := $(patsubst %,$(B)/fuzz/replay_%,$(FUZZ_NAMES))
EXAMPLES   := $(patsubst examples/%.c,$(B)/examples/%,$(wildcard examples/*.c))
# The programs users run (apps/NAME/NAME.c) and the tools (tools/NAME.c), built into build/bin.
APPS       := $(patsubst apps/%/,$(B)/bin/%,$(dir $(wildcard apps/*/*.c)))
TOOLS      := $(patsubst tools/%.c,$(B)/bin/%,$(wildcard tools/*.c))
HEADERS    := residency.h residency_http.h
# Project-only helper headers (tests, examples and the programs include them).
AUXH       := $(wildcard tests/*.h apps/*.h apps/*/*.h fuzz/*.h)

FUZZ_SECS ?= 60
T ?= $(FUZZ_NAMES)

.PHONY: test unit compile-matrix symbols manual replay readme examples apps fuzz bench clean demo install uninstall install-test
.DEFAULT_GOAL := test

# unit first: with -j its builds are asked for first, so that its suites (which mostly
# wait on loopback servers) can run beside the compile matrix (CPU-bound, JOBS at once).
test: unit replay compile-matrix symbols manual readme examples install-test
	@echo "make test: all green"
	@cat $(B)/tests/summary

# ---- unit tests under ASan+UBSan -------------------------------------------------
# A test that defines RESIDENCY_IMPLEMENTATION itself (it reads the internals, or sets a
# configuration macro) builds the implementation in its own TU; the others use only the
# public API and are linked with the implementation built once (tests/impl.sh says which,
# for the cross builds too).
IMPL_OF    := $(shell . tests/impl.sh; for f in $(TEST_SRCS); do echo "$$(impl_of $$f):$$f"; done)
OWN_IMPL   := $(patsubst own:%,%,$(filter own:%,$(IMPL_OF)))
HTTP_LINK  := $(patsubst http:%,%,$(filter http:%,$(IMPL_OF)))
CORE_LINK  := $(patsubst core:%,%,$(filter core:%,$(IMPL_OF)))
test_bin    = $(patsubst tests/%.c,$(B)/tests/%,$(1))

$(B)/tests/impl_%.o: tests/impl_%.c $(HEADERS) | $(B)/tests
	$(CC) $(TEST_CFLAGS) -c $< -o $@

$(call test_bin,$(OWN_IMPL)): $(B)/tests/%: tests/%.c $(AUXH) $(HEADERS) | $(B)/tests
	$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LIBS)
$(call test_bin,$(HTTP_LINK)): $(B)/tests/%: tests/%.c $(B)/tests/impl_http.o $(AUXH) $(HEADERS)
	$(CC) $(TEST_CFLAGS) $< $(B)/tests/impl_http.o -o $@ $(TEST_LIBS)
$(call test_bin,$(CORE_LINK)): $(B)/tests/%: tests/%.c $(B)/tests/impl_core.o $(AUXH) $(HEADERS)
	$(CC) $(TEST_CFLAGS) $< $(B)/tests/impl_core.o -o $@ $(TEST_LIBS)

# test_devmem and test_serve_devmem load a fake NVML (tests/fake_nvml.c), built here as a shared library.
$(B)/tests/libfake_nvml.so: tests/fake_nvml.c | $(B)/tests
	$(CC) -std=c99 $(CWARN) -g -shared -fPIC $< -o $@
$(B)/tests/test_devmem $(B)/tests/test_serve_devmem: $(B)/tests/libfake_nvml.so

# Tests may spawn the programs (rsd-sim, rsd-serve, rsd-ensure, rsd-http) and the examples,
# so those are built first. TEST_JOBS suites run at once (tests/run.sh): they mostly wait on
# loopback servers and children.
TEST_JOBS ?= 4
unit: $(TESTS) $(EXAMPLES) $(APPS) $(TOOLS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  RSD_TEST_JOBS=$(TEST_JOBS) sh tests/run.sh $(TESTS)

# ---- compile matrix: C99/C11/C++11, gcc/clang, with and without TLS ------------
compile-matrix: | $(B)/compile
	@sh tests/compile.sh "$(CC)" "$(CXX)" "$(CLANG)" "$(CLANGXX)" "$(HAVE_MBEDTLS)" "$(CWARN)" "$(CXXWARN)"

# ---- only rsd_ symbols are exported ---------------------------------------------
symbols: | $(B)/compile
	@sh tests/symbols.sh "$(CC)" "$(CWARN)"

# ---- the headers are a map: grep tags once, no requirement ids -----------------
manual:
	@sh tests/manual.sh

# ---- README snippets compile ----------------------------------------------------
readme: | $(B)/readme
	@sh tests/readme.sh "$(CC)" "$(CWARN)"

# ---- fuzz corpora replayed under the sanitizers ---------------------------------
$(B)/fuzz/replay_%: fuzz/fuzz_%.c fuzz/replay_main.c $(AUXH) $(HEADERS) | $(B)/fuzz
	$(CC) -std=c99 -g -O0 $(SAN) -I. $(filter-out -Wmissing-prototypes,$(CWARN)) fuzz/fuzz_$*.c fuzz/replay_main.c -o $@

replay: $(REPLAYS)
	@for t in $(FUZZ_NAMES); do \
	  printf 'replay %-16s ' $$t; \
	  UBSAN_OPTIONS=halt_on_error=1 $(B)/fuzz/replay_$$t fuzz/corpus/$$t || exit 1; \
	done

# ---- libFuzzer (clang): make fuzz [T=json] [FUZZ_SECS=60] -----------------------
# fuzz/NAME.options, when present, holds extra libFuzzer flags for that target (one
# line, e.g. -max_len=1024); FUZZ_ARGS come after them and win.
fuzz: | $(B)/fuzz
	@test -n "$(CLANG)" || { echo "make fuzz needs clang (apt-get install clang libclang-rt-14-dev)"; exit 1; }
	@for t in $(T); do \
	  $(CLANG) -std=c99 -g -O1 -fsanitize=fuzzer,address,undefined -I. fuzz/fuzz_$$t.c -o $(B)/fuzz/fuzz_$$t || exit 1; \
	  mkdir -p $(B)/fuzz/work_$$t; \
	  dict=""; [ -f fuzz/$$t.dict ] && dict="-dict=fuzz/$$t.dict"; \
	  opts=""; [ -f fuzz/$$t.options ] && opts="$$(cat fuzz/$$t.options)"; \
	  echo "fuzz $$t for $(FUZZ_SECS)s $$opts"; \
	  $(B)/fuzz/fuzz_$$t $$dict $$opts -max_total_time=$(FUZZ_SECS) -print_final_stats=1 \
	    -artifact_prefix=$(B)/fuzz/ $(FUZZ_ARGS) $(B)/fuzz/work_$$t fuzz/corpus/$$t > $(B)/fuzz/log_$$t.txt 2>&1; \
	  grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec|ERROR|SUMMARY|crash-|Test unit written' $(B)/fuzz/log_$$t.txt | sed "s/^/  $$t: /"; \
	  test -z "$$(ls $(B)/fuzz/crash-* $(B)/fuzz/leak-* $(B)/fuzz/timeout-* 2>/dev/null)" || exit 1; \
	done

# ---- examples, programs and tools (https:// through mbedTLS when its header is installed) --
# make apps: the programs and tools (build/bin); make examples: those and the examples.
$(B)/examples/%: examples/%.c $(AUXH) $(HEADERS) | $(B)/examples
	$(CC) $(EX_CFLAGS) $(TLS_CFLAGS) $< -o $@ $(TLS_LIBS)
$(foreach a,$(notdir $(APPS)),$(eval $(B)/bin/$(a): apps/$(a)/$(a).c))
$(TOOLS): $(B)/bin/%: tools/%.c
$(APPS) $(TOOLS): $(AUXH) $(HEADERS) | $(B)/bin
	$(CC) $(EX_CFLAGS) $(TLS_CFLAGS) $(filter %.c,$^) -o $@ $(TLS_LIBS)

apps: $(APPS) $(TOOLS)
examples: $(EXAMPLES) apps

# ---- benchmarks: each bench/*.mk adds its runs to BENCH_RUNS --------------------
BENCH_RUNS :=
-include $(wildcard bench/*.mk)
bench: $(BENCH_RUNS)
	@echo "bench: done"

# ---- cross-compiled tests under qemu-user: make test-arm64 | test-armhf | test-s390x --
# (tests/cross.sh: static -O1 builds, no sanitizers; skipped with one line without the
# cross compiler or qemu-user-static)
.PHONY: test-arm64 test-armhf test-s390x
test-arm64 test-armhf test-s390x: examples
	@sh tests/cross.sh $(@:test-%=%) "$(CWARN)"

# ---- Windows x86-64: mingw-w64 builds, run under wine: make test-windows -----------
# (tests/windows.sh: static -O1 .exe builds with -Werror, no sanitizers; what is not
# built for Windows is listed there with the reason; skipped with one line without
# x86_64-w64-mingw32-gcc or wine)
.PHONY: test-windows
test-windows:
	@sh tests/windows.sh "$(CWARN)"

# ---- install: make install [PREFIX=/usr/local] [DESTDIR=] ---------------------------
# The three programs, the two headers (include/residency/), residency.pc, a CMake package
# (find_package(residency)), the example configuration (rsd-serve --example-config: every
# key with its default) and the systemd unit, all under DESTDIR/PREFIX. `make uninstall`
# (same PREFIX and DESTDIR) removes exactly these. tests/install.sh checks both.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
DATADIR    ?= $(PREFIX)/share
PKGCONFIGDIR ?= $(DATADIR)/pkgconfig
CMAKEDIR   ?= $(DATADIR)/cmake/residency
VERSION    := $(shell sed -n 's/^\#define RSD_VERSION_STRING "\(.*\)"$$/\1/p' residency.h)
V_MAJOR    := $(word 1,$(subst ., ,$(VERSION)))
V_MINOR    := $(word 2,$(subst ., ,$(VERSION)))
PROGRAMS   := rsd-serve rsd-sim rsd-ensure
INSTALLED  := $(PROGRAMS:%=$(BINDIR)/%) $(HEADERS:%=$(INCLUDEDIR)/residency/%) \
              $(PKGCONFIGDIR)/residency.pc $(CMAKEDIR)/residency-config.cmake \
              $(CMAKEDIR)/residency-config-version.cmake \
              $(DATADIR)/residency/serve.ini.example $(DATADIR)/residency/rsd-serve.service \
              $(DATADIR)/residency/LICENSE
SUBST       = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@DATADIR@|$(DATADIR)|g' \
                  -e 's|@VERSION@|$(VERSION)|g' -e 's|@MAJOR@|$(V_MAJOR)|g' -e 's|@MINOR@|$(V_MINOR)|g'
install: $(PROGRAMS:%=$(B)/bin/%) | $(B)/dist
	@test -n "$(VERSION)" || { echo "install: no RSD_VERSION_STRING in residency.h"; exit 1; }
	$(SUBST) dist/residency.pc.in > $(B)/dist/residency.pc
	$(SUBST) dist/residency-config-version.cmake.in > $(B)/dist/residency-config-version.cmake
	$(SUBST) dist/rsd-serve.service.in > $(B)/dist/rsd-serve.service
	$(B)/bin/rsd-serve --example-config > $(B)/dist/serve.ini.example
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(INCLUDEDIR)/residency $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(DATADIR)/residency
	install -m 755 $(PROGRAMS:%=$(B)/bin/%) $(DESTDIR)$(BINDIR)/
	install -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/residency/
	install -m 644 $(B)/dist/residency.pc $(DESTDIR)$(PKGCONFIGDIR)/
	install -m 644 dist/residency-config.cmake $(B)/dist/residency-config-version.cmake $(DESTDIR)$(CMAKEDIR)/
	install -m 644 $(B)/dist/serve.ini.example $(B)/dist/rsd-serve.service LICENSE $(DESTDIR)$(DATADIR)/residency/

# Removes the files install wrote, then the directories of ours that are left empty.
uninstall:
	rm -f $(INSTALLED:%=$(DESTDIR)%)
	rmdir $(DESTDIR)$(INCLUDEDIR)/residency $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(DATADIR)/residency 2>/dev/null || true

# Installs into a temporary DESTDIR, builds examples/minimal.c against it (pkg-config,
# find_package, add_subdirectory), runs the installed programs, uninstalls.
install-test: $(PROGRAMS:%=$(B)/bin/%)
	@sh tests/install.sh "$(CC)" "$(CWARN)" "$(MAKE)"

$(B) $(B)/tests $(B)/fuzz $(B)/examples $(B)/bin $(B)/compile $(B)/readme $(B)/bench $(B)/dist:
	@mkdir -p $@

clean:
	rm -rf $(B)

# ---- demo: the main job on a real llama-server when one is found, else on the simulators ---
# Builds only the programs the demo runs, in parallel (DEMO_JOBS at once, default: the
# number of CPUs) unless make itself was given -j.
DEMO_BINS := $(patsubst %,$(B)/bin/%,rsd-sim rsd-ensure rsd-serve rsd-http tiny-gguf)
DEMO_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
demo:
	@$(MAKE) --no-print-directory $(if $(findstring -j,$(MAKEFLAGS)),,-j$(DEMO_JOBS)) $(DEMO_BINS)
	@sh tools/demo.sh
