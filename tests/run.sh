#!/bin/sh
# Runs each test binary, prints its output, then one total line "N passed, N failed".
# The whole output of every suite that failed, or gave no result line, is also kept in
# "<summary>.failures" (empty when all passed), so a long log can end with it. Each test
# prints "ok   name" after each passed case (RSD_TEST_PROGRESS): those lines go only to
# the failures file, where they show how far a suite that died got.
# RSD_TEST_JOBS (default 1) tests run at once: most of a suite's time is spent waiting on
# loopback servers and child processes, not on a core. Each test's lines are printed once
# all have ended, in the order given, whatever order they ended in.
# A test's output goes to a file, never a pipe, so a child it leaves running cannot hang
# the run. A process still holding that file once the test has exited (and has had
# RSD_TEST_LEAK_GRACE_S, default 10 s, to go) is a leaked child: it is named, killed, and
# the suite counts as failed.
if [ "$1" = --one ]; then # --one DIR INDEX TEST: one test; its report in DIR/INDEX.*
  d=$2; i=$3; t=$4
  name=$(basename "$t")
  outf=$d/$i.out
  keep() { # exit status, reason, output
    { echo "==== $name (exit $1): $2"; printf '%s\n' "$3" | tail -n 60; } >>"$d/$i.fail"
  }
  holders() { # the processes that still have the output file open
    find /proc/[0-9]*/fd -maxdepth 1 -lname "$outf" 2>/dev/null | cut -d/ -f3 | sort -u
  }
  RSD_TEST_PROGRESS=1 "$t" >"$outf" 2>&1 </dev/null; rc=$?
  left=""
  if [ -d /proc/self/fd ]; then
    n=0; left=$(holders)
    while [ -n "$left" ] && [ "$n" -lt "$(( ${RSD_TEST_LEAK_GRACE_S:-10} * 10 ))" ]; do
      sleep 0.1; n=$((n + 1)); left=$(holders)
    done
  fi
  out=$(cat "$outf")
  broken=0
  {
    printf '%s\n' "$out" | grep -v -e '^[0-9]* passed, [0-9]* failed$' -e '^ok   [a-z_0-9]*$' | sed "s|^|$name: |"
    if [ -n "$left" ]; then
      for p in $left; do
        echo "$name: left a child running: pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
        kill -9 "$p" 2>/dev/null
      done
      broken=$((broken + 1)); keep "$rc" "left a child running" "$out"
    fi
    line=$(printf '%s\n' "$out" | grep '^[0-9]* passed, [0-9]* failed$' | tail -n 1)
    if [ -z "$line" ]; then
      echo "$name: no result line (exit $rc)"; broken=$((broken + 1))
      keep "$rc" "no result line" "$out"; p=0; f=0
    else
      p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
      echo "$name: $line"
      if [ "$f" -ne 0 ]; then keep "$rc" "$f failed" "$out"
      elif [ "$rc" -ne 0 ]; then
        echo "$name: exit $rc"; broken=$((broken + 1)); keep "$rc" "exit $rc" "$out"
      fi
    fi
    echo "$p $f $broken" >"$d/$i.res"
  } >"$d/$i.log"
  rm -f "$outf"
  exit 0
fi
summary=${RSD_TEST_SUMMARY:-build/tests/summary}
failures=$summary.failures
d=$(cd "$(dirname "$summary")" && pwd)/$(basename "$summary").d
rm -rf "$d"; mkdir -p "$d" || exit 1
: >"$failures"
i=0
for t in "$@"; do i=$((i + 1)); echo "$i $t"; done |
  xargs -P "${RSD_TEST_JOBS:-1}" -n 2 sh "$0" --one "$d"
pass=0; fail=0; i=0
for t in "$@"; do
  i=$((i + 1))
  if [ -f "$d/$i.res" ]; then
    cat "$d/$i.log"
    read -r p f b <"$d/$i.res"
    pass=$((pass + p)); fail=$((fail + f + b))
  else
    echo "$(basename "$t"): not run"; fail=$((fail + 1))
    echo "==== $(basename "$t"): not run" >>"$d/$i.fail"
  fi
  [ -f "$d/$i.fail" ] && cat "$d/$i.fail" >>"$failures"
done
rm -rf "$d"
echo "$pass passed, $fail failed" | tee "$summary"
[ "$fail" -eq 0 ]
