#!/bin/sh
# Runs each test binary, prints its output, then one total line "N passed, N failed".
# The whole output of every suite that failed, or gave no result line, is also kept in
# "<summary>.failures" (empty when all passed), so a long log can end with it. Each test
# prints "ok   name" after each passed case (RSD_TEST_PROGRESS): those lines go only to
# the failures file, where they show how far a suite that died got.
pass=0; fail=0; broken=0
summary=${RSD_TEST_SUMMARY:-build/tests/summary}
failures=$summary.failures
: >"$failures"
keep() { # name, exit status, reason, output
  { echo "==== $1 (exit $2): $3"; printf '%s\n' "$4" | tail -n 60; } >>"$failures"
}
for t in "$@"; do
  out=$(RSD_TEST_PROGRESS=1 "$t" 2>&1); rc=$?
  name=$(basename "$t")
  printf '%s\n' "$out" | grep -v -e '^[0-9]* passed, [0-9]* failed$' -e '^ok   [a-z_0-9]*$' | sed "s|^|$name: |"
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
fail=$((fail + broken))
echo "$pass passed, $fail failed" | tee "$summary"
[ "$fail" -eq 0 ]
