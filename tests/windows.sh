#!/bin/sh
# make test-windows: every tests/test_*.c, examples/*.c, apps/*/*.c and tools/*.c
# cross-compiled for Windows x86-64 with mingw-w64 (-O1, warnings are errors, static so
# no DLL is needed) and the tests run under wine, then one total line "N passed, N failed"
# (tests/run.sh).
# No sanitizers (mingw has none). Tests that start a program (rsd-sim, rsd-ensure)
# start the .exe built here (RSD_TEST_EXE_DIR). Without the compiler or wine: one line
# saying so, and "0 passed, 0 failed".
#   x86_64-w64-mingw32-gcc   Debian gcc-mingw-w64-x86-64
#   wine (or wine64)         Debian wine64
CWARN=$1
CC=${WIN_CC:-x86_64-w64-mingw32-gcc}
WINE=$(command -v wine 2>/dev/null || command -v wine64 2>/dev/null ||
       { [ -x /usr/lib/wine/wine64 ] && echo /usr/lib/wine/wine64; })
if ! command -v "$CC" >/dev/null 2>&1 || [ -z "$WINE" ]; then
  echo "test-windows skipped: ${CC} or wine not found (apt-get install gcc-mingw-w64-x86-64 wine64)"
  echo "0 passed, 0 failed"
  exit 0
fi
B=build/win
mkdir -p "$B/bin" "$B/tests" || exit 1
# Not built for Windows (said, not hidden): they test POSIX-only machinery.
#   test_proc the POSIX machinery in depth (fork/vfork/posix_spawn, PR_SET_PDEATHSIG,
#             /bin/sh wrappers, process groups, descriptor leaks); the supervisor on
#             Windows is tested by test_proc_portable (built here)
#   test_serve, test_serve_cut, test_serve_ops, test_serve_api, test_serve_affinity,
#   test_serve_kv, test_serve_memory
#             drive rsd-serve through tests/serve_harness.h (fork/exec, pipes, signals);
#             rsd-serve.exe itself runs in tests/windows_smoke.sh (its kv cache too:
#             a save, the owner-only DACL, a restore)
#   test_real_serve, test_real_affinity, test_real_clients, test_real_kv, test_real_memory
#             start the real Linux llama-server binary, which wine cannot run
#   test_etcd starts the Linux etcd binary, which wine cannot run
#   test_ensure_cli
#             runs rsd-ensure through its own fork/exec harness with separate stdout and
#             stderr pipes (rsd-ensure.exe runs in tests/windows_smoke.sh and, through
#             popen, in test_ensure_lms)
#   test_real_router, test_real_harness, test_real_estimate
#             start the real Linux llama-server binary, which wine cannot run
#   test_sim_net, test_hostile
#             start rsd-sim / rsd-serve with posix_spawn or fork and check the exit
#             status a SIGTERM gives (Windows has no SIGTERM; under wine a stop is a
#             terminate); the same routes run through test_ensure, test_fleet and
#             tests/windows_smoke.sh
#   test_tls  mbedTLS is not built for Windows, and its test server is a fork()ed child
#   test_devmem, test_serve_devmem  the fake NVML is a Linux shared object, and the host
#             entry is read from procfs (Windows reads GlobalMemoryStatusEx: built, not
#             tested); test_serve_devmem drives rsd-serve as test_serve does
skip="test_etcd test_ensure_cli test_serve_cut test_serve_ops test_serve_api test_serve_affinity test_serve_kv test_serve_memory test_proc test_serve test_real_serve test_real_affinity test_real_clients test_real_kv test_real_memory test_real_router test_real_harness test_real_estimate test_hostile test_sim_net test_tls test_devmem test_serve_devmem"
srcs=""
for src in tests/test_*.c; do
  t=$(basename "$src" .c)
  case " $skip " in *" $t "*) echo "test-windows: $t not built for Windows (see tests/windows.sh)"; continue ;; esac
  srcs="$srcs $src"
done
for src in examples/*.c apps/*/*.c tools/*.c; do srcs="$srcs $src"; done
# The implementation is built once for the tests that only use the public API
# (tests/impl.sh), first; the examples and programs each build their own.
export CC CWARN B
build() { # sources...: each built alone unless up to date
  printf '%s\n' "$@" | xargs -P "${JOBS:-2}" -n 1 sh -c '
    . tests/impl.sh
    t=$(basename "$0" .c); link=""
    case $0 in
      tests/impl_*) out=$B/bin/$t.o; how="-c"; libs="" ;;
      tests/*) out=$B/bin/$t.exe; how=""; libs="-lws2_32 -lshell32"
               i=$(impl_of "$0"); [ "$i" = own ] || link=$B/bin/impl_$i.o ;;
      *) out=$B/bin/$t.exe; how=""; libs="-lws2_32 -lshell32" ;;
    esac
    [ -f "$out" ] && [ -z "$(find "$0" $link residency.h residency_http.h tests/*.h apps/*.h apps/*/*.h \
        -newer "$out" 2>/dev/null)" ] && exit 0  # up to date
    $CC -std=c99 $CWARN -O1 -g -static -I. $how "$0" $link -o "$out" $libs 2>"$B/bin/$t.err" ||
      { cat "$B/bin/$t.err"; echo "test-windows: $t does not build"; exit 255; }'
}
build tests/impl_core.c tests/impl_http.c || exit 1
build $srcs || exit 1
# A private wine prefix, and one wineserver kept up for the whole run (each program
# would otherwise start and stop its own). Output goes to files, never a pipe: wine's
# service processes inherit the descriptors and would hold a pipe open.
WINEPREFIX=$(cd "$B" && pwd)/prefix; WINEDEBUG=-all; export WINEPREFIX WINEDEBUG
WINESERVER=$(command -v wineserver 2>/dev/null || echo "$(dirname "$WINE")/wineserver")
"$WINE" cmd /c exit >"$B/prefix.log" 2>&1 </dev/null
"$WINESERVER" -p >/dev/null 2>&1 </dev/null
tests=""
for src in $srcs; do
  case $src in tests/*) ;; *) continue ;; esac
  t=$(basename "$src" .c)
  # wine writes CRLF line ends: the wrapper hands tests/run.sh plain lines
  # A program that wine itself could not start (its client lost the wineserver before
  # main: "wine client error:0: recvmsg: Connection reset by peer", the only output;
  # seen once in a CI run under the cross targets' load) runs once more, and says so.
  cat >"$B/tests/$t" <<EOF
#!/bin/sh
"$WINE" "$B/bin/$t.exe" "\$@" >"$B/tests/$t.out" 2>&1 </dev/null
rc=\$?
if [ \$rc -ne 0 ] && [ "\$(grep -c . "$B/tests/$t.out")" = 1 ] && grep -q '^wine client error' "$B/tests/$t.out"; then
  echo "wine did not start $t.exe (\$(tr -d '\\r' <"$B/tests/$t.out")); running it again"
  "$WINE" "$B/bin/$t.exe" "\$@" >"$B/tests/$t.out" 2>&1 </dev/null
  rc=\$?
fi
tr -d '\\r' <"$B/tests/$t.out"
exit \$rc
EOF
  chmod +x "$B/tests/$t"
  tests="$tests $B/tests/$t"
done
# the example programs against each other: rsd-ensure.exe -> rsd-sim.exe, and
# rsd-ensure.exe -> rsd-serve.exe -> rsd-sim.exe children (tests/windows_smoke.sh)
printf '#!/bin/sh\nexec sh tests/windows_smoke.sh "%s" "%s"\n' "$WINE" "$B" >"$B/tests/rsd-ensure.exe_rsd-serve.exe_vs_rsd-sim.exe"
chmod +x "$B/tests/rsd-ensure.exe_rsd-serve.exe_vs_rsd-sim.exe"
tests="$tests $B/tests/rsd-ensure.exe_rsd-serve.exe_vs_rsd-sim.exe"
echo "test-windows: $($CC --version | head -n 1), run under $("$WINE" --version 2>/dev/null)"
RSD_TEST_EXE_DIR=$B/bin RSD_TEST_SUMMARY=$B/summary sh tests/run.sh $tests; rc=$?
"$WINESERVER" -k >/dev/null 2>&1
"$WINESERVER" -w >/dev/null 2>&1  # gone before we return: a run right after cannot meet a dying server
exit $rc
