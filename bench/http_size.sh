#!/bin/sh
# .text bytes (-Os, no TLS) of the HTTP client+server sections of residency_http.h, and the
# same plus the URL and HTTP parsers they use. Prints "<ours> <with_parsers>".
# Method: -ffunction-sections, then sum the .text.<fn> sections of the functions defined
# between the section markers (static helpers that got inlined are inside their callers).
CC=$1; OUT=$2
set -e
printf '#define RESIDENCY_IMPLEMENTATION\n#include "residency_http.h"\n' > "$OUT/http_size.c"
$CC -std=c99 -Os -ffunction-sections -I. -c "$OUT/http_size.c" -o "$OUT/http_size.o"
names() { sed -n "/$1 (implementation)/,/$2 end/p" residency_http.h |
          grep -E '^(RSD_API|RSDI_PRIVATE) ' | sed -E 's/^[^(]*[ *]([A-Za-z_0-9]+)\(.*/\1/' | sort -u; }
names '>>http client' '>>http server' > "$OUT/http_size.names"
names '>>url' '>>httpparse' > "$OUT/http_size.parser_names"
sum() { size -A "$OUT/http_size.o" | awk -v f="$1" 'BEGIN { while ((getline l < f) > 0) want[".text." l] = 1 }
        ($1 in want) { s += $2 } END { print s + 0 }'; }
ours=$(sum "$OUT/http_size.names")
cat "$OUT/http_size.names" "$OUT/http_size.parser_names" > "$OUT/http_size.all_names"
all=$(sum "$OUT/http_size.all_names")
echo "$ours $all"
