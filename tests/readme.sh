#!/bin/sh
# Every ```c block in README.md compiles (and links, when it has a main).
CC=$1; CWARN=$2; B=build/readme; n=0
awk -v dir="$B" '/^```c$/ {n++; f=sprintf("%s/snippet_%d.c", dir, n); inb=1; next}
                 /^```/ {inb=0; next} inb {print > f}' README.md
for f in $B/snippet_*.c; do
  [ -f "$f" ] || continue
  if grep -q 'int main' "$f"; then
    $CC -std=c99 $CWARN -I. "$f" -o "${f%.c}" || { echo "README snippet $f fails to build"; exit 1; }
  else
    $CC -std=c99 $CWARN -I. -c "$f" -o "${f%.c}.o" || { echo "README snippet $f fails to compile"; exit 1; }
  fi
  n=$((n + 1))
done
# The packages the README tells a newcomer to install are the ones .ci/run installs, word
# for word (a package added to CI must be added to the README too).
ci=$(sed -n 's/^pkgs="\(.*\)"$/\1/p' .ci/run)
rd=$(sed -n 's/^sudo apt-get install \(.*\)$/\1/p' README.md)
if [ -z "$ci" ] || [ "$ci" != "$rd" ]; then
  echo "README's package list is not .ci/run's:"
  echo "  README:  $rd"
  echo "  .ci/run: $ci"
  exit 1
fi
# LICENSE is the text at the end of residency.h, word for word.
if ! sed -n '/^MIT License$/,/^\*\/$/p' residency.h | sed '$d' | cmp -s - LICENSE; then
  echo "LICENSE differs from the license at the end of residency.h"
  exit 1
fi
echo "readme: $n snippets compile; the package list is .ci/run's; LICENSE is residency.h's"
