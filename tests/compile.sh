#!/bin/sh
# Compile matrix: both headers as C99, C11 and C++11 with gcc and clang (when present),
# with and without RSD_HTTP_MBEDTLS; a declaration-only TU linked with the implementation;
# RSD_STATIC in two TUs; residency.h alone; the feature macros in every combination
# (RSD_NO_DEVMEM alone and with all the others).
CC=$1; CXX=$2; CLANG=$3; CLANGXX=$4; TLS=$5; CWARN=$6; CXXWARN=$7
# Each configuration is one job (build, link, run); the jobs are listed first, then run
# JOBS (default 2) at a time: any failure fails the matrix.
B=build/compile; set -e
ALLNO="-DRSD_NO_OLLAMA -DRSD_NO_LMSTUDIO -DRSD_NO_ETCD -DRSD_NO_HTTP_SERVER -DRSD_NO_PROC -DRSD_NO_DETECT -DRSD_NO_DEVMEM -DRSD_NO_GGUF -DRSD_NO_SERVE_LEASE -DRSD_NO_ENSURE_KV"
n=0
jobs=$B/jobs; : >$jobs
job() { printf '%s\n' "$*" >>$jobs; }
one() { # compiler lang std extra...
  c=$1; l=$2; s=$3; shift 3
  tag=$(basename "$c")-$s$(printf '%s' "$*" | tr -c 'A-Za-z0-9' '_')
  if [ "$l" = c ]; then w=$CWARN; x="-x c"; else w=$CXXWARN; x="-x c++"; fi
  job "$c $x -std=$s $w $* -c tests/compile/impl.c -o $B/impl-$tag.o &&" \
      "$c $x -std=$s $w $* -c tests/compile/decl_only.c -o $B/decl-$tag.o &&" \
      "$c $B/impl-$tag.o $B/decl-$tag.o -o $B/link-$tag $LIBS && ./$B/link-$tag"
  n=$((n + 1))
}
for tls in 0 1; do
  if [ $tls = 1 ]; then [ "$TLS" = 1 ] || continue; EXTRA=-DRSD_HTTP_MBEDTLS; LIBS="-lmbedtls -lmbedx509 -lmbedcrypto"
  else EXTRA=; LIBS=; fi
  for c in "$CC" "$CLANG"; do
    [ -n "$c" ] || continue
    one "$c" c c99 $EXTRA
    one "$c" c c11 $EXTRA
  done
  for c in "$CXX" "$CLANGXX"; do
    [ -n "$c" ] || continue
    LIBS="$LIBS -lstdc++" one "$c" c++ c++11 $EXTRA
  done
done
# feature macros: every combination builds, links and runs (gcc C99; the full set also C++11)
nf=0
for o in 0 1; do for l in 0 1; do for e in 0 1; do for h in 0 1; do for p in 0 1; do for d in 0 1; do
  f=; [ $o = 1 ] && f="$f -DRSD_NO_OLLAMA"; [ $l = 1 ] && f="$f -DRSD_NO_LMSTUDIO"; [ $e = 1 ] && f="$f -DRSD_NO_ETCD"
  [ $h = 1 ] && f="$f -DRSD_NO_HTTP_SERVER"; [ $p = 1 ] && f="$f -DRSD_NO_PROC"; [ $d = 1 ] && f="$f -DRSD_NO_DETECT"
  job "$CC -std=c99 $CWARN $f tests/compile/features.c -o $B/features-$o$l$e$h$p$d && ./$B/features-$o$l$e$h$p$d"
  nf=$((nf + 1))
done; done; done; done; done; done
job "$CXX -x c++ -std=c++11 $CXXWARN -DRSD_NO_OLLAMA -DRSD_NO_LMSTUDIO -DRSD_NO_ETCD -DRSD_NO_HTTP_SERVER -DRSD_NO_PROC" \
    "-DRSD_NO_DETECT -DRSD_NO_DEVMEM -DRSD_NO_GGUF -DRSD_NO_SERVE_LEASE -DRSD_NO_ENSURE_KV tests/compile/features.c -o $B/features-cxx && ./$B/features-cxx"
# RSD_NO_DEVMEM (the device memory probe), RSD_NO_GGUF (the GGUF reader), RSD_NO_SERVE_LEASE
# (a free request's rsd-serve lease) and RSD_NO_ENSURE_KV (the ensurer's slot saves) depend on no other
# section: each alone, and all three with every other macro (the router-only program's set), rather
# than in every combination
job "$CC -std=c99 $CWARN -DRSD_NO_DEVMEM tests/compile/features.c -o $B/features-devmem && ./$B/features-devmem"
job "$CC -std=c99 $CWARN -DRSD_NO_GGUF tests/compile/features.c -o $B/features-nogguf && ./$B/features-nogguf"
job "$CC -std=c99 $CWARN -DRSD_NO_SERVE_LEASE tests/compile/features.c -o $B/features-nolease && ./$B/features-nolease"
job "$CC -std=c99 $CWARN -DRSD_NO_ENSURE_KV tests/compile/features.c -o $B/features-nokv && ./$B/features-nokv"
job "$CC -std=c99 $CWARN -DRSD_NO_OLLAMA -DRSD_NO_LMSTUDIO -DRSD_NO_ETCD -DRSD_NO_HTTP_SERVER -DRSD_NO_PROC" \
    "-DRSD_NO_DETECT -DRSD_NO_DEVMEM -DRSD_NO_GGUF -DRSD_NO_SERVE_LEASE -DRSD_NO_ENSURE_KV tests/compile/features.c -o $B/features-all && ./$B/features-all"
nf=$((nf + 5))
# macOS's paths on this Linux build (RSDI_FORCE_BSD: no MSG_NOSIGNAL, SOCK_NONBLOCK,
# pipe2, posix_spawn chdir/closefrom, PR_SET_PDEATHSIG; SO_NOSIGPIPE given Darwin's
# value): built, linked and started, never run against a macOS kernel
LIBS= one "$CC" c c99 -DRSDI_FORCE_BSD -DSO_NOSIGPIPE=0x1022
LIBS=-lstdc++ one "$CXX" c++ c++11 -DRSDI_FORCE_BSD -DSO_NOSIGPIPE=0x1022
# Windows x86-64 (mingw-w64, when installed): both headers as C99 and C++11, compiled
# and linked (not run here: make test-windows runs the tests under wine)
for mc in x86_64-w64-mingw32-gcc x86_64-w64-mingw32-g++; do
  command -v $mc >/dev/null 2>&1 || { echo "compile matrix: $mc not found, Windows rows skipped"; continue; }
  case $mc in *g++) l=c++; s=c++11; w=$CXXWARN; x="-x c++" ;; *) l=c; s=c99; w=$CWARN; x="-x c" ;; esac
  job "$mc $x -std=$s $w -c tests/compile/impl.c -o $B/impl-win-$s.o &&" \
      "$mc $x -std=$s $w -c tests/compile/decl_only.c -o $B/decl-win-$s.o &&" \
      "$mc -static $B/impl-win-$s.o $B/decl-win-$s.o -o $B/link-win-$s.exe -lws2_32"
  n=$((n + 1))
done
job "$CC -std=c99 $CWARN tests/compile/static_a.c tests/compile/static_b.c -o $B/static && ./$B/static"
# RSD_STATIC with features compiled out: their declarations go too (a static declaration
# never defined is a warning)
i=0
for f in -DRSD_NO_OLLAMA -DRSD_NO_LMSTUDIO -DRSD_NO_HTTP_SERVER "$ALLNO"; do
  i=$((i + 1))
  job "$CC -std=c99 $CWARN $f tests/compile/static_a.c tests/compile/static_b.c -o $B/static-no$i && ./$B/static-no$i"
done
job "$CC -std=c99 $CWARN tests/compile/core_only.c -o $B/core_only && ./$B/core_only"
job "$CC -std=c99 $CWARN -DRSD_NO_GGUF tests/compile/core_only.c -o $B/core_only_nogguf && ./$B/core_only_nogguf"
tr '\n' '\0' <$jobs | xargs -0 -P "${JOBS:-2}" -n 1 sh -c
# a libc without O_CLOEXEC: the implementation refuses to build, with a message saying why
if $CC -std=c99 $CWARN -isystem tests/compile/no_cloexec -c tests/compile/impl.c -o $B/no_cloexec.o \
     2>$B/no_cloexec.err; then
  echo "compile matrix: built without O_CLOEXEC (descriptors would leak into children)"; exit 1
fi
grep -q 'O_CLOEXEC' $B/no_cloexec.err || { cat $B/no_cloexec.err; exit 1; }
echo "compile matrix: $n configurations + $nf feature-macro combinations (+ C++11) + static pair (also with features compiled out) + core-only + no-O_CLOEXEC refusal: ok"
