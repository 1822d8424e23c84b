#!/bin/sh
# The headers are a map: every grep tag (>>name, >>name:sub) marks one implementation
# section, so it appears exactly once in the two headers together; and the manual speaks
# in words, so no requirement id of the spec (R45, W12, L24, P57, S29, O3, K5, D1 ...) appears;
# and the stack figures it gives hold.
H="residency.h residency_http.h"; bad=0
tags() { grep -ohE '>>[a-z][a-z0-9_:]*' "$@" | sed 's/:$//'; }
dup=$(tags $H | sort | uniq -d)
if [ -n "$dup" ]; then
  echo "grep tags that appear more than once:"
  for t in $dup; do grep -nE "$t([^a-z0-9_:]|\$)" $H | sed 's/^/  /'; done
  bad=1
fi
ids=$(grep -nE '(^|[^-[:alnum:]_])[RWLPDSOK][0-9]{1,3}\b' $H)
if [ -n "$ids" ]; then
  echo "requirement ids in the headers (say it in words):"
  echo "$ids" | sed 's/^/  /' | head -40
  bad=1
fi
# Every tag the README names is a section of a header.
for t in $(grep -ohE '`>>[a-z][a-z0-9_:]*`' README.md | tr -d '`' | sort -u); do
  grep -qE "^/\* (====|----) $t(:? |\$)" $H || { echo "README names $t, which no header section opens"; bad=1; }
done
# The documented way to add a runtime (examples/custom_runtime.c) uses public API only.
for f in $(grep -ohE '\brsdi?_[a-z0-9_]+\(' examples/custom_runtime.c | tr -d '(' | sort -u); do
  grep -qE "^RSD_API [^(]*\b$f\(" residency.h residency_http.h || {
    echo "examples/custom_runtime.c calls $f, which is not public API"; bad=1; }
done
# The stack figures the manual gives (x86-64, gcc -O2 -fstack-usage): function, limit.
if command -v gcc >/dev/null 2>&1 && [ "$(uname -m)" = x86_64 ]; then
  d=$(mktemp -d); printf '#define RESIDENCY_IMPLEMENTATION\n#include "residency.h"\n' >"$d/su.c"
  if (cd "$d" && gcc -std=c99 -O2 -I"$OLDPWD" -fstack-usage -c su.c -o su.o); then
    for fl in rsd_decide:9216 rsd_notice_format:1024 rsd_json_parse_ex:200 rsdi_json_num_to_double:1024; do
      f=${fl%%:*}; lim=${fl#*:}
      got=$(awk -F'\t' -v f="$f" '{ n = $1; sub(/.*:/, "", n); sub(/\..*/, "", n) } n == f { print $2; exit }' "$d/su.su")
      if [ -z "$got" ]; then echo "stack: no frame for $f (renamed or inlined? update tests/manual.sh and the manual)"; bad=1
      elif [ "$got" -ge "$lim" ]; then echo "stack: $f's frame is $got bytes; the manual says under $lim"; bad=1; fi
    done
  else echo "stack: gcc -fstack-usage failed"; bad=1; fi
  rm -rf "$d"
fi
notag=$(grep -nE '^/\* ==== >>' $H | wc -l)
[ $bad -eq 0 ] && echo "manual: $(tags $H | wc -l) grep tags, each once ($notag sections); no requirement ids"
exit $bad
