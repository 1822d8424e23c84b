#!/bin/sh
# make install into a temporary DESTDIR (PREFIX=/opt/residency), then:
#   - every file is there, the versions agree (RSD_VERSION_STRING, --version, the .pc);
#   - serve.ini.example is rsd-serve --example-config, and a config made from it runs;
#   - the unit file has what the service needs and passes `systemd-analyze verify`;
#   - examples/minimal.c builds against the install through pkg-config and through CMake's
#     find_package, and against this checkout through add_subdirectory and FetchContent
#     (skipped with one line without pkg-config / cmake), and each build makes a model
#     resident through the installed rsd-serve, whose children are the installed rsd-sim;
#   - rsd-serve reloads on SIGHUP and stops on SIGTERM (exit 0); nothing the programs
#     write to a file (not a terminal) holds an ANSI escape or a carriage return;
#   - make uninstall leaves no file and none of our directories behind.
# usage: sh tests/install.sh CC CWARN [MAKE]
CC=$1; CWARN=$2; MAKE=${3:-make}
REPO=$(pwd)
PREFIX=/opt/residency
T=$(mktemp -d "${TMPDIR:-/tmp}/rsd-install.XXXXXX") || exit 1
D=$T/dest; BIN=$D$PREFIX/bin
VERSION=$(sed -n 's/^#define RSD_VERSION_STRING "\(.*\)"$/\1/p' residency.h)
SERVE_PID=
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "install: FAIL: $*"; }
cleanup() {
    [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- install ----------------------------------------------------------------------
if ! "$MAKE" --no-print-directory -s install DESTDIR="$D" PREFIX="$PREFIX" >"$T/install.log" 2>&1; then
    cat "$T/install.log"; echo "install: FAIL: make install"; exit 1
fi
FILES="bin/rsd-serve bin/rsd-sim bin/rsd-ensure include/residency/residency.h include/residency/residency_http.h
share/pkgconfig/residency.pc share/cmake/residency/residency-config.cmake
share/cmake/residency/residency-config-version.cmake share/residency/serve.ini.example
share/residency/rsd-serve.service share/residency/LICENSE"
for f in $FILES; do
    if [ -f "$D$PREFIX/$f" ]; then ok; else bad "make install did not write $PREFIX/$f"; fi
done
for f in include/residency/residency.h include/residency/residency_http.h; do
    if cmp -s "$D$PREFIX/$f" "${f#include/residency/}"; then ok; else bad "$PREFIX/$f is not ${f#include/residency/}"; fi
done
n=$(find "$D" -type f | wc -l)
want=$(echo $FILES | wc -w)
if [ "$n" -eq "$want" ]; then ok; else bad "make install wrote $n files, expected $want:"; find "$D" -type f; fi
for p in rsd-serve rsd-sim rsd-ensure; do
    if [ -x "$BIN/$p" ]; then ok; else bad "$BIN/$p is not executable"; fi
done

# ---- one version ------------------------------------------------------------------
[ -n "$VERSION" ] || bad "no RSD_VERSION_STRING in residency.h"
for p in rsd-serve rsd-ensure; do
    got=$("$BIN/$p" --version 2>&1)
    if [ "$got" = "$p (residency.h) $VERSION" ]; then ok; else bad "$p --version says '$got', expected '$p (residency.h) $VERSION'"; fi
done
if grep -qx "Version: $VERSION" "$D$PREFIX/share/pkgconfig/residency.pc"; then ok; else bad "residency.pc does not say Version: $VERSION"; fi
if sed -n 2p residency.h | grep -q "^   v$VERSION -- " && grep -q "RSD_VERSION_STRING \"$VERSION\" (RSD_VERSION_MAJOR" residency.h; then ok
else bad "residency.h's first lines or its manual do not say version $VERSION"; fi

# ---- the example configuration is the program's own -----------------------------------
EX=$D$PREFIX/share/residency/serve.ini.example
if "$BIN/rsd-serve" --example-config | cmp -s - "$EX"; then ok; else bad "serve.ini.example is not rsd-serve --example-config"; fi
if head -n 1 "$EX" | grep -q "^# rsd-serve $VERSION: "; then ok; else bad "serve.ini.example does not name version $VERSION"; fi

# ---- the systemd unit ----------------------------------------------------------------
U=$D$PREFIX/share/residency/rsd-serve.service
for want in "ExecStart=$PREFIX/bin/rsd-serve --config /etc/residency/serve.ini" 'ExecReload=/bin/kill -HUP $MAINPID' \
    KillMode=mixed DynamicUser=yes StateDirectory=residency; do
    if grep -qxF "$want" "$U"; then ok; else bad "the unit has no line '$want'"; fi
done
if command -v systemd-analyze >/dev/null 2>&1; then
    # ExecStart must name an executable that exists: the installed one, under DESTDIR
    mkdir -p "$T/unit" && sed "s|^ExecStart=$PREFIX/bin/|ExecStart=$BIN/|" "$U" >"$T/unit/rsd-serve.service"
    if systemd-analyze verify "$T/unit/rsd-serve.service" >"$T/verify.log" 2>&1 && [ ! -s "$T/verify.log" ]; then ok
    else bad "systemd-analyze verify:"; cat "$T/verify.log"; fi
else
    echo "install: systemd-analyze verify skipped (no systemd-analyze; apt-get install systemd)"
fi

# ---- the installed rsd-serve, from the example, with installed rsd-sim children ------
mkdir -p "$T/models" && : >"$T/models/example.gguf"
sed -e "s|^model = /models/example.gguf$|model = $T/models/example.gguf|" \
    -e "s|^llama_server = llama-server$|llama_server = $BIN/rsd-sim|" \
    -e "s|^listen = 127.0.0.1:8080$|listen = 127.0.0.1:0|" \
    -e "s|^# args = --no-webui$|args = --runtime server --load-ms 50|" "$EX" >"$T/serve.ini"
if "$BIN/rsd-serve" --check --config "$T/serve.ini" >"$T/check.out" 2>&1; then ok
else bad "rsd-serve --check on the example (paths filled in):"; cat "$T/check.out"; fi
mkfifo "$T/serve.fifo" || exit 1
"$BIN/rsd-serve" --config "$T/serve.ini" >"$T/serve.fifo" 2>"$T/serve.err" &
SERVE_PID=$!
exec 3<"$T/serve.fifo"
URL=
while read -r line <&3; do
    echo "$line" >>"$T/serve.out"
    case $line in *"listening on http://127.0.0.1:"*) URL=$(echo "$line" | sed 's/.*listening on \(http:[^ ]*\).*/\1/'); break ;; esac
done
cat <&3 >>"$T/serve.out" &
exec 3<&-
if [ -z "$URL" ]; then
    bad "the installed rsd-serve did not start:"; cat "$T/serve.out" "$T/serve.err"; exit 1
fi

# run_minimal HOW BINARY: it makes "example" resident through rsd-serve
run_minimal() {
    if "$2" "$URL" example >"$T/run.out" 2>&1 && grep -q '^resident: example' "$T/run.out"; then ok
    else bad "minimal built through $1 did not make the model resident:"; cat "$T/run.out"; fi
}
# Outside the checkout, so that only the installed headers can be found.
mkdir -p "$T/src" && cp examples/minimal.c "$T/src/minimal.c"
if command -v pkg-config >/dev/null 2>&1; then
    cflags=$(PKG_CONFIG_PATH=$D$PREFIX/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D pkg-config --cflags residency | sed 's/ *$//')
    if [ "$cflags" = "-I$D$PREFIX/include/residency" ]; then ok; else bad "pkg-config --cflags residency: '$cflags'"; fi
    # shellcheck disable=SC2086
    if (cd "$T/src" && $CC -std=c99 $CWARN $cflags minimal.c -o "$T/minimal-pc") 2>"$T/cc.log"; then
        ok; run_minimal pkg-config "$T/minimal-pc"
    else bad "minimal.c does not build through pkg-config:"; cat "$T/cc.log"; fi
else
    echo "install: the pkg-config build skipped (no pkg-config; apt-get install pkgconf)"
fi
if command -v cmake >/dev/null 2>&1; then
    cmake_build() { # NAME CMAKE-LINES...: configure and build $T/NAME with minimal.c (log: $T/NAME.log)
        name=$1; shift
        mkdir -p "$T/$name" && cp "$T/src/minimal.c" "$T/$name/" &&
            { printf 'cmake_minimum_required(VERSION 3.10)\nproject(consumer C)\n'; printf '%s\n' "$@"
              printf 'add_executable(minimal minimal.c)\ntarget_link_libraries(minimal PRIVATE residency::residency)\n'; } \
                >"$T/$name/CMakeLists.txt" &&
            cmake -S "$T/$name" -B "$T/$name/build" -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="-std=c99 $CWARN" \
                -DCMAKE_PREFIX_PATH="$D$PREFIX" >"$T/$name.log" 2>&1 &&
            cmake --build "$T/$name/build" >>"$T/$name.log" 2>&1
    }
    if cmake_build find "find_package(residency $VERSION REQUIRED)"; then
        ok; run_minimal "find_package" "$T/find/build/minimal"
        # (an imported target's include directory is given as -isystem)
        if grep -qE -- "-(I|isystem ?)$D$PREFIX/include/residency( |\$)" "$T/find/build/CMakeFiles/minimal.dir/flags.make"; then ok
        else bad "find_package(residency) does not point at $D$PREFIX/include/residency"; fi
    else bad "minimal.c does not build through find_package(residency):"; cat "$T/find.log"; fi
    # a version the install cannot satisfy is refused
    if cmake_build toonew "find_package(residency 99 REQUIRED)"; then bad "find_package(residency 99) accepted $VERSION"
    elif grep -q "residency-config.cmake, version: $VERSION" "$T/toonew.log"; then ok
    else bad "find_package(residency 99) failed, but not on the version:"; cat "$T/toonew.log"; fi
    if cmake_build subdir "add_subdirectory(\"$REPO\" residency)"; then
        ok; run_minimal "add_subdirectory" "$T/subdir/build/minimal"
        # the subdirectory builds nothing of its own
        built=$(find "$T/subdir/build/residency" -type f \( -name '*.o' -o -perm -u+x \) | head -n 3)
        if [ -z "$built" ]; then ok; else bad "add_subdirectory built: $built"; fi
    else bad "minimal.c does not build through add_subdirectory:"; cat "$T/subdir.log"; fi
    # RESIDENCY_MBEDTLS=ON: https built in, mbedTLS linked (where its headers are installed)
    if [ -f /usr/include/mbedtls/ssl.h ]; then
        if cmake_build tls "set(RESIDENCY_MBEDTLS ON)" "add_subdirectory(\"$REPO\" residency)"; then
            ok; run_minimal "add_subdirectory with RESIDENCY_MBEDTLS" "$T/tls/build/minimal"
            if grep -q -- '-DRSD_HTTP_MBEDTLS' "$T/tls/build/CMakeFiles/minimal.dir/flags.make" &&
                grep -q -- '-lmbedtls' "$T/tls/build/CMakeFiles/minimal.dir/link.txt"; then ok
            else bad "RESIDENCY_MBEDTLS=ON did not define RSD_HTTP_MBEDTLS and link mbedtls"; fi
        else bad "minimal.c does not build with RESIDENCY_MBEDTLS=ON:"; cat "$T/tls.log"; fi
    fi
    # FetchContent (CMake 3.14+), as a game engine's build pulls it in: add_subdirectory underneath
    if cmake_build fetch "include(FetchContent)" "FetchContent_Declare(residency SOURCE_DIR \"$REPO\")" \
            "FetchContent_MakeAvailable(residency)"; then
        ok; run_minimal "FetchContent" "$T/fetch/build/minimal"
    else bad "minimal.c does not build through FetchContent:"; cat "$T/fetch.log"; fi
else
    echo "install: the CMake builds skipped (no cmake; apt-get install cmake)"
fi
# rsd-ensure from the install (it loads the model when no build above did) lists it through
# rsd-serve (its output going to files)
if "$BIN/rsd-ensure" --url "$URL" --model example >"$T/ensure.out" 2>"$T/ensure.err" &&
    "$BIN/rsd-ensure" --url "$URL" --list >>"$T/ensure.out" 2>>"$T/ensure.err" &&
    grep -q '^resident: example (loaded' "$T/ensure.out"; then ok
else bad "rsd-ensure --list through rsd-serve:"; cat "$T/ensure.out" "$T/ensure.err"; fi

# SIGHUP (the unit's ExecReload) reloads; rsd-serve logs the reload once the loop ran it
# (the signal is taken before the request that follows, which the loop serves after it)
kill -HUP "$SERVE_PID"
if "$BIN/rsd-ensure" --url "$URL" --list >/dev/null 2>&1 &&
    grep -q 'SIGHUP: configuration reloaded: .* unchanged \[example\]' "$T/serve.err"; then ok
else bad "no reload in rsd-serve's log after SIGHUP:"; cat "$T/serve.err"; fi
# SIGTERM (systemctl stop, KillMode=mixed) stops it and its children: exit 0
kill -TERM "$SERVE_PID"
wait "$SERVE_PID"; rc=$?; SERVE_PID=
if [ "$rc" -eq 0 ]; then ok; else bad "rsd-serve exited $rc on SIGTERM, expected 0"; fi
# nothing listens there now: minimal fails cleanly, saying why
for m in "$T/minimal-pc" "$T/find/build/minimal" "$T/subdir/build/minimal"; do
    [ -x "$m" ] || continue
    "$m" "$URL" example >"$T/run.out" 2>&1; rc=$?
    if [ "$rc" -eq 1 ] && grep -q 'server unreachable: connection refused' "$T/run.out"; then ok
    else bad "$m against nothing listening: exit $rc:"; cat "$T/run.out"; fi
    break
done
# what went to files (not a terminal): no ANSI escape, no carriage return
ESC=$(printf '\033'); CR=$(printf '\r')
for f in "$T/serve.err" "$T/serve.out" "$T/ensure.out" "$T/ensure.err" "$T/check.out"; do
    if grep -q "[$ESC$CR]" "$f"; then bad "$f holds an ANSI escape or a carriage return"; else ok; fi
done
if grep -q 'example' "$T/serve.err"; then ok; else bad "rsd-serve logged nothing about the model"; fi

# ---- uninstall ----------------------------------------------------------------------
if "$MAKE" --no-print-directory -s uninstall DESTDIR="$D" PREFIX="$PREFIX" >"$T/uninstall.log" 2>&1; then ok
else bad "make uninstall:"; cat "$T/uninstall.log"; fi
left=$(find "$D" -type f)
if [ -z "$left" ]; then ok; else bad "make uninstall left: $left"; fi
for d in include/residency share/residency share/cmake/residency; do
    if [ -e "$D$PREFIX/$d" ]; then bad "make uninstall left $PREFIX/$d"; else ok; fi
done

echo "install: $pass passed, $fail failed (make install/uninstall PREFIX=$PREFIX into a temporary DESTDIR)"
[ "$fail" -eq 0 ]
