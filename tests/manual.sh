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
# Sections follow their dependencies: each header's manual (its "---- name:" parts), its
# declarations ("/* ==== name") and its implementation ("/* ==== >>name") name them in the
# order below (a name a part does not have is skipped).
order_of() { # file, kind (manual | decl | impl): the section names in file order
  case $2 in
    manual) grep -oE '^   ---- [a-z][a-z _]*:' "$1" | sed -E 's/^   ---- //; s/:$//' ;;
    decl) grep -oE '^/\* ==== [a-z][a-z _]* =' "$1" | sed -E 's/^\/\* ==== //; s/ =$//' | grep -v ' end$' ;;
    impl) grep -oE '^/\* ==== >>[a-z_]+' "$1" | sed -E 's/^\/\* ==== >>//' ;;
  esac | sed -E 's/^http //; s/ /_/g'
}
check_order() { # file, the names in dependency order
  f=$1; shift
  for kind in manual decl impl; do
    got=$(order_of "$f" $kind | while read -r n; do
      case " $* " in *" $n "*) echo "$n" ;; esac; done | tr '\n' ' ')
    want=$(for n in "$@"; do order_of "$f" $kind | grep -qx "$n" && echo "$n"; done | tr '\n' ' ')
    [ "$got" = "$want" ] || { echo "$f: $kind sections in the order '$got'; dependencies say '$want'"; bad=1; }
  done
}
check_order residency.h results util alloc log types text json reconcile payload driver pool gguf
check_order residency_http.h url httpparse net tls client server proc state etcd ensure fleet devmem gguf_file
# The shell calls only the core's public API and the internals the core's manual lists
# (INTERNALS THE SHELL SHARES).
shared=$(awk '/^   INTERNALS THE SHELL SHARES/{f=1;next} f&&/^   [A-Z]/{exit} f' residency.h | grep -oE 'rsdi_[a-z0-9_]+' | sort -u)
for f in $(grep -oE '\brsdi_[a-z0-9_]+\(' residency.h | tr -d '(' | sort -u); do
  grep -qE "\b$f\(" residency_http.h || continue
  echo "$shared" | grep -qx "$f" || { echo "residency_http.h calls the core's $f, which INTERNALS THE SHELL SHARES does not list"; bad=1; }
done
notag=$(grep -nE '^/\* ==== >>' $H | wc -l)
[ $bad -eq 0 ] && echo "manual: $(tags $H | wc -l) grep tags, each once ($notag sections); no requirement ids"
exit $bad
