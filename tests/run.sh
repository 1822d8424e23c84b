#!/bin/sh
# Runs each test binary, prints its output, then one total line "N passed, N failed".
pass=0; fail=0; broken=0
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  printf '%s\n' "$out" | grep -v '^[0-9]* passed, [0-9]* failed$' | sed "s|^|$(basename "$t"): |"
  line=$(printf '%s\n' "$out" | grep '^[0-9]* passed, [0-9]* failed$' | tail -n 1)
  if [ -z "$line" ]; then
    echo "$(basename "$t"): no result line (exit $rc)"; broken=$((broken + 1)); continue
  fi
  p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
  echo "$(basename "$t"): $line"
  pass=$((pass + p)); fail=$((fail + f))
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { echo "$(basename "$t"): exit $rc"; broken=$((broken + 1)); }
done
fail=$((fail + broken))
echo "$pass passed, $fail failed" | tee "${RSD_TEST_SUMMARY:-build/tests/summary}"
[ "$fail" -eq 0 ]
