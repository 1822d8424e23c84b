#!/bin/sh
# make test-arm64 | test-armhf | test-s390x: every tests/test_*.c cross-compiled for ARCH
# (static, -O1: the optimiser's warnings are errors too; -D_FILE_OFFSET_BITS=64, as the
# manual tells 32-bit builds: without it readdir and stat answer EOVERFLOW for 64-bit
# directory offsets and inodes) and run under qemu-user, then
# one total line "N passed, N failed" (tests/run.sh).
#   arm64  aarch64-linux-gnu-gcc     qemu-aarch64-static   64-bit, little-endian
#   armhf  arm-linux-gnueabihf-gcc   qemu-arm-static       32-bit size_t and long, strict alignment
#   s390x  s390x-linux-gnu-gcc       qemu-s390x-static     big-endian: the portable byte loops
# No sanitizers (qemu-user runs neither runtime). The programs a test starts (rsd-sim,
# rsd-serve, rsd-ensure, llama-server) are the host's own build/bin and binaries:
# the code under test is the cross-built library inside the test, talking to them over
# loopback. Without the compiler or qemu: one line saying so, and "0 passed, 0 failed".
ARCH=$1; CWARN=$2
case $ARCH in
  arm64) CC=aarch64-linux-gnu-gcc; QEMU=qemu-aarch64-static ;;
  armhf) CC=arm-linux-gnueabihf-gcc; QEMU=qemu-arm-static ;;
  s390x) CC=s390x-linux-gnu-gcc; QEMU=qemu-s390x-static ;;
  *) echo "usage: tests/cross.sh arm64|armhf|s390x CWARN" >&2; exit 64 ;;
esac
for tool in "$CC" "$QEMU"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "test-$ARCH skipped: $tool not found (apt-get install gcc-${CC%-gcc} qemu-user-static)"
    echo "0 passed, 0 failed"
    exit 0
  fi
done
B=build/$ARCH
mkdir -p "$B/bin" "$B/tests" || exit 1
# build in parallel (JOBS, default 2); each failure prints its errors. The implementation
# is built once for the tests that only use the public API (tests/impl.sh), first.
export CC CWARN B
build() { # sources...: each built alone (impl_*.c: to an object; a test: linked as impl.sh says)
  printf '%s\n' "$@" | xargs -P "${JOBS:-2}" -n 1 sh -c '
    . tests/impl.sh
    t=$(basename "$0" .c); link=""
    case $t in
      impl_*) out="-c -o $B/bin/$t.o" ;;
      *) out="-o $B/bin/$t"; i=$(impl_of "$0"); [ "$i" = own ] || link=$B/bin/impl_$i.o ;;
    esac
    $CC -std=c99 $CWARN -O1 -g -static -D_FILE_OFFSET_BITS=64 -I. "$0" $link $out 2>"$B/bin/$t.err" ||
      { grep -v "getaddrinfo\|in function" "$B/bin/$t.err"; echo "test-'"$ARCH"': $t does not build"; exit 255; }'
}
build tests/impl_core.c tests/impl_http.c || exit 1
build tests/test_*.c || exit 1
# Each test runs through a wrapper script (absolute paths): RSD_TEST_QEMU names the
# emulator, so the few cases qemu-user cannot run say so and stop (test_proc: the
# subreaper cases, where qemu's prctl answers EINVAL, and posix_spawn's exec error,
# which glibc reports through CLONE_VM memory that qemu's emulated vfork does not
# share); RSD_TEST_SELF_EXE is the wrapper itself, which test_proc execs for its
# children, since the host kernel cannot exec the foreign binary without binfmt_misc.
ROOT=$(pwd)
tests=""
for src in tests/test_*.c; do
  t=$(basename "$src" .c)
  w=$ROOT/$B/tests/$t
  printf '#!/bin/sh\nexport RSD_TEST_QEMU=%s RSD_TEST_SELF_EXE=%s\nexec %s %s "$@"\n' \
    "$QEMU" "$w" "$QEMU" "$ROOT/$B/bin/$t" >"$w"
  chmod +x "$w"
  tests="$tests $w"
done
echo "test-$ARCH: $($CC --version | head -n 1), run under $($QEMU --version | head -n 1)"
RSD_TEST_SUMMARY=$B/summary sh tests/run.sh $tests
