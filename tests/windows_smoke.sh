#!/bin/sh
# Part of make test-windows (tests/windows.sh): rsd-ensure.exe against rsd-sim.exe, both
# under wine, on a loopback port the simulator chose; the state directory is the
# default one, %LOCALAPPDATA%\residency inside the run's private wine prefix.
# Prints one line per failed check and "N passed, N failed".
WINE=$1; B=$2
pass=0; fail=0
ok() { if [ "$1" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $2"; fi; }
out=$B/tests/smoke; rm -rf "$out"; mkdir -p "$out" || exit 1
rm -rf "$WINEPREFIX"/drive_c/users/*/AppData/Local/residency
"$WINE" "$B/bin/rsd-sim.exe" --port 0 --model tiny-a,size=1G --model tiny-b,size=1G \
  >"$out/sim.log" 2>&1 </dev/null &
sim=$!
i=0; port=""
while [ $i -lt 600 ] && [ -z "$port" ]; do  # bounded wait for the listening line (60 s)
  port=$(tr -d '\r' <"$out/sim.log" | sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p')
  [ -n "$port" ] || sleep 0.1; i=$((i + 1))
done
[ -n "$port" ]; ok $? "rsd-sim.exe prints its listening line"
ens() { "$WINE" "$B/bin/rsd-ensure.exe" --url "http://127.0.0.1:$port" "$@" >"$out/ens.log" 2>&1 </dev/null; rc=$?
        tr -d '\r' <"$out/ens.log" >"$out/ens.txt"; cat "$out/ens.txt" >>"$out/all.txt"; return $rc; }
if [ -n "$port" ]; then
  ens --model tiny-a; ok $? "rsd-ensure.exe --model tiny-a exits 0"
  grep -q "^resident: 'tiny-a'" "$out/ens.txt"; ok $? "rsd-ensure.exe says tiny-a is resident"
  ens --model tiny-b --json; ok $? "rsd-ensure.exe --model tiny-b --json exits 0"
  grep -q '"outcome":"resident"' "$out/ens.txt"; ok $? "the JSON says resident"
  ens --list; ok $? "rsd-ensure.exe --list exits 0"
  grep -q 'tiny-a' "$out/ens.txt" && grep -q 'tiny-b' "$out/ens.txt"; ok $? "--list shows tiny-a and tiny-b"
  ls "$WINEPREFIX"/drive_c/users/*/AppData/Local/residency/locks/*.lock >/dev/null 2>&1
  ok $? "the lock file is under %LOCALAPPDATA%\\residency\\locks"
  ls "$WINEPREFIX"/drive_c/users/*/AppData/Local/residency/attr/*.attr >/dev/null 2>&1
  ok $? "the attribution file is under %LOCALAPPDATA%\\residency\\attr"
fi
kill "$sim" 2>/dev/null; wait "$sim" 2>/dev/null
[ "$fail" = 0 ] || { echo "--- rsd-sim.exe:"; tr -d '\r' <"$out/sim.log"; echo "--- rsd-ensure.exe:"; cat "$out/all.txt" 2>/dev/null; }
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
