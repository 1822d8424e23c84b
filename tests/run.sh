#!/bin/sh
# Runs each test binary, prints its output, then one total line "N passed, N failed".
# The whole output of every suite that failed, or gave no result line, is also kept in
# "<summary>.failures" (empty when all passed), so a long log can end with it. Each test
# prints "ok   name" after each passed case (RSD_TEST_PROGRESS): those lines go only to
# the failures file, where they show how far a suite that died got.
# A test's output goes to a file, never a pipe, so a child it leaves running cannot hang
# the run. A process still holding that file once the test has exited (and has had
# RSD_TEST_LEAK_GRACE_S, default 10 s, to go) is a leaked child: it is named, killed, and
# the suite counts as failed.
pass=0; fail=0; broken=0
summary=${RSD_TEST_SUMMARY:-build/tests/summary}
failures=$summary.failures
outf=$(cd "$(dirname "$summary")" && pwd)/$(basename "$summary").out
: >"$failures"
keep() { # name, exit status, reason, output
  { echo "==== $1 (exit $2): $3"; printf '%s\n' "$4" | tail -n 60; } >>"$failures"
}
holders() { # the processes that still have the output file open
  find /proc/[0-9]*/fd -maxdepth 1 -lname "$outf" 2>/dev/null | cut -d/ -f3 | sort -u
}
for t in "$@"; do
  RSD_TEST_PROGRESS=1 "$t" >"$outf" 2>&1 </dev/null; rc=$?
  name=$(basename "$t")
  left=""
  if [ -d /proc/self/fd ]; then
    n=0; left=$(holders)
    while [ -n "$left" ] && [ "$n" -lt "$(( ${RSD_TEST_LEAK_GRACE_S:-10} * 10 ))" ]; do
      sleep 0.1; n=$((n + 1)); left=$(holders)
    done
  fi
  out=$(cat "$outf")
  printf '%s\n' "$out" | grep -v -e '^[0-9]* passed, [0-9]* failed$' -e '^ok   [a-z_0-9]*$' | sed "s|^|$name: |"
  if [ -n "$left" ]; then
    for p in $left; do
      echo "$name: left a child running: pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
      kill -9 "$p" 2>/dev/null
    done
    broken=$((broken + 1)); keep "$name" "$rc" "left a child running" "$out"
  fi
  line=$(printf '%s\n' "$out" | grep '^[0-9]* passed, [0-9]* failed$' | tail -n 1)
  if [ -z "$line" ]; then
    echo "$name: no result line (exit $rc)"; broken=$((broken + 1))
    keep "$name" "$rc" "no result line" "$out"; continue
  fi
  p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
  echo "$name: $line"
  pass=$((pass + p)); fail=$((fail + f))
  if [ "$f" -ne 0 ]; then keep "$name" "$rc" "$f failed" "$out"
  elif [ "$rc" -ne 0 ]; then
    echo "$name: exit $rc"; broken=$((broken + 1)); keep "$name" "$rc" "exit $rc" "$out"
  fi
done
rm -f "$outf"
fail=$((fail + broken))
echo "$pass passed, $fail failed" | tee "$summary"
[ "$fail" -eq 0 ]
