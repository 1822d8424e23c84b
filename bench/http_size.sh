#!/bin/sh
# .text bytes (-Os, no TLS) of the HTTP client+server sections of residency_http.h (the
# sections >>net to >>server), and the same plus the URL and HTTP parsers they use (>>url,
# >>httpparse). Prints "<ours> <with_parsers>"; exits non-zero, printing nothing on stdout,
# when a section marker is missing or a sum is 0 (a renamed section must not read as 0 bytes).
# Method: -ffunction-sections, then sum the .text.<fn> sections of the functions defined
# between the section markers (static helpers that got inlined are inside their callers).
CC=$1; OUT=$2
set -e
printf '#define RESIDENCY_IMPLEMENTATION\n#include "residency_http.h"\n' > "$OUT/http_size.c"
$CC -std=c99 -Os -ffunction-sections -I. -c "$OUT/http_size.c" -o "$OUT/http_size.o"
# the functions defined from the banner "==== >>$1" up to the banner "==== >>$2"
names() {
    for t in "$1" "$2"; do
        grep -q "==== >>$t[ :]" residency_http.h || { echo "http_size.sh: no section >>$t in residency_http.h" >&2; exit 1; }
    done
    sed -n "/==== >>$1[ :]/,/==== >>$2[ :]/p" residency_http.h |
        grep -E '^(RSD_API|RSDI_PRIVATE) ' | sed -E 's/^[^(]*[ *]([A-Za-z_0-9]+)\(.*/\1/' | sort -u; }
names net ensure > "$OUT/http_size.names"
names url net > "$OUT/http_size.parser_names"
sum() { size -A "$OUT/http_size.o" | awk -v f="$1" 'BEGIN { while ((getline l < f) > 0) want[".text." l] = 1 }
        ($1 in want) { s += $2 } END { print s + 0 }'; }
ours=$(sum "$OUT/http_size.names")
cat "$OUT/http_size.names" "$OUT/http_size.parser_names" > "$OUT/http_size.all_names"
all=$(sum "$OUT/http_size.all_names")
if [ "$ours" -le 0 ] || [ "$all" -le "$ours" ]; then
    echo "http_size.sh: measured $ours and $all bytes: the section markers no longer match" >&2; exit 1
fi
echo "$ours $all"
