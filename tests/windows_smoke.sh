#!/bin/sh
# Part of make test-windows (tests/windows.sh): rsd-ensure.exe against rsd-sim.exe, both
# under wine, on a loopback port the simulator chose; the state directory is the
# default one, %LOCALAPPDATA%\residency inside the run's private wine prefix.
# Then rsd-ensure.exe through rsd-serve.exe, whose children are rsd-sim.exe servers.
# Prints one line per failed check and "N passed, N failed".
WINE=$1; B=$2
pass=0; fail=0
ok() { if [ "$1" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $2"; fi; }
out=$B/tests/smoke; rm -rf "$out"; mkdir -p "$out" || exit 1
rm -rf "$WINEPREFIX"/drive_c/users/*/AppData/Local/residency
: >"$out/sim.log" # before the background start: the wait below reads it at once
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

# rsd-serve.exe running rsd-sim.exe children (single-model server mode) as its
# llama-server, one resident at a time; rsd-ensure.exe ensures models through it.
# With kv_cache_dir: alpha's slot is saved when beta evicts it and restored when it
# comes back. The directory and files get an owner-only DACL; wine shows one as the unix
# mode 770 (it maps the user's own SID to owner and group, full access to rwx), so what
# is checked here is that nobody else gets a bit; wine enforces no DACL itself.
# Then rsd-serve.exe is killed without a chance to clean up: its children die with it
# (each is in a job object that is killed when its last handle closes).
win() { "$WINE" winepath -w "$1" 2>/dev/null | tr -d '\r'; }
mkdir -p "$out/m"; : >"$out/m/alpha.gguf"; : >"$out/m/beta.gguf"
cat >"$out/serve.ini" <<EOF
listen = 127.0.0.1:0
max_models = 1
llama_server = $(win "$B/bin/rsd-sim.exe")
args = --runtime server --load-ms 20
stop_grace = 2
kv_cache_dir = $(win "$out/kv")
[model alpha]
model = $(win "$out/m/alpha.gguf")
[model beta]
model = $(win "$out/m/beta.gguf")
EOF
# kv_cache_dir exists already, open to all, with a slot file whose save was cut short (no
# sidecar: deleted at start) and a file that is not rsd-serve's (kept)
mkdir -p "$out/kv"; chmod 755 "$out/kv"; : >"$out/kv/0123456789abcdef-0.bin"; : >"$out/kv/keep.txt"
: >"$out/serve.out"
"$WINE" "$B/bin/rsd-serve.exe" --config "$(win "$out/serve.ini")" >"$out/serve.out" 2>"$out/serve.log" </dev/null &
srv=$!
i=0; sport=""
while [ $i -lt 600 ] && [ -z "$sport" ]; do  # bounded wait for the listening line (60 s)
  sport=$(tr -d '\r' <"$out/serve.out" | sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p')
  [ -n "$sport" ] || sleep 0.1; i=$((i + 1))
done
[ -n "$sport" ]; ok $? "rsd-serve.exe prints its listening line"
if [ -n "$sport" ]; then
  port=$sport
  [ ! -e "$out/kv/0123456789abcdef-0.bin" ] && [ -e "$out/kv/keep.txt" ]
  ok $? "kv_cache_dir's scan (FindFirstFile) deleted the cut-short save and kept the other file"
  ens --model alpha; ok $? "rsd-ensure.exe --model alpha through rsd-serve.exe exits 0"
  grep -q "^resident: 'alpha'" "$out/ens.txt"; ok $? "alpha is resident (an rsd-sim.exe child)"
  chat() { "$WINE" "$B/bin/rsd-http.exe" -s -d "{\"model\":\"alpha\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"a first question long enough to hold a few tokens of prompt\"}$1]}" \
             "http://127.0.0.1:$sport/v1/chat/completions" >"$out/chat.log" 2>&1 </dev/null; }
  chat ""; ok $? "a first turn on alpha answers 200"
  logwait() { i=0; while [ $i -lt 300 ]; do tr -d '\r' <"$out/serve.log" | grep -q "$1" && return 0; sleep 0.1; i=$((i + 1)); done; return 1; }
  ens --model beta --json; ok $? "rsd-ensure.exe --model beta through rsd-serve.exe exits 0"
  grep -q '"outcome":"resident"' "$out/ens.txt" && grep -q '"evicted":\["alpha"\]' "$out/ens.txt"
  ok $? "beta is resident and alpha was evicted for it (one slot)"
  logwait "alpha: kv cache: 1 slot(s) saved"; ok $? "alpha's slot was saved before its stop (kv_cache_dir)"
  [ -d "$out/kv" ] && [ "$(stat -c %a "$out/kv")" = 770 ]; ok $? "the existing kv_cache_dir (755) was given the owner-only DACL (770 under wine)"
  n=0; for f in "$out"/kv/*-0.bin "$out"/kv/*-0.meta; do [ -f "$f" ] && [ "$(stat -c %a "$f")" = 770 ] && n=$((n + 1)); done
  [ "$n" = 2 ]; ok $? "the slot file and its sidecar are there with the owner-only DACL (770 under wine)"
  tr -d '\r' <"$out/serve.log" | grep -q "alpha: exited pid"; ok $? "alpha's child exited after its stop"
  ens --model alpha; ok $? "rsd-ensure.exe --model alpha again exits 0"
  logwait "alpha: kv cache: 1 slot(s) restored"; ok $? "alpha's slot was restored at its start"
  chat ",{\"role\":\"assistant\",\"content\":\"This is a simulated reply.\"},{\"role\":\"user\",\"content\":\"and more\"}"
  ok $? "the next turn on alpha answers 200"
  grep -q '"cache_n":[1-9]' "$out/chat.log"; ok $? "the next turn reused the restored cache (cache_n > 0)"
  ens --model beta; ok $? "rsd-ensure.exe --model beta again exits 0"
  cport=$(tr -d '\r' <"$out/serve.log" | sed -n 's|.*beta: ready pid [0-9]* port \([0-9]*\).*|\1|p' | tail -n 1)
  [ -n "$cport" ]; ok $? "rsd-serve.exe says on which port beta's child serves"
  health() { "$WINE" "$B/bin/rsd-http.exe" -s "http://127.0.0.1:$cport/health" >"$out/health.log" 2>&1 </dev/null; }
  health; ok $? "beta's rsd-sim.exe child answers GET /health 200 on its own port"
  kill -9 "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
  i=0; gone=1
  while [ $i -lt 100 ]; do  # bounded wait (10 s) for the child to be gone with its parent
    health; rc=$?
    [ "$rc" = 2 ] && { gone=0; break; }  # 2 = no answer (refused)
    sleep 0.1; i=$((i + 1))
  done
  ok $gone "beta's child died with rsd-serve.exe (kill -9: the job object's kill-on-close)"
fi
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
[ "$fail" = 0 ] || { echo "--- rsd-sim.exe:"; tr -d '\r' <"$out/sim.log"; echo "--- rsd-serve.exe:"; tr -d '\r' <"$out/serve.log" 2>/dev/null
                     echo "--- rsd-ensure.exe:"; cat "$out/all.txt" 2>/dev/null; }
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
