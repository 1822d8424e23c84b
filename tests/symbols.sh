#!/bin/sh
# Every global symbol the implementation defines starts with rsd_.
CC=$1; CWARN=$2; B=build/compile
printf '#define RESIDENCY_IMPLEMENTATION\n#include "../../residency_http.h"\n' > $B/symbols.c
$CC -std=c99 $CWARN -I. -c $B/symbols.c -o $B/symbols.o || exit 1
bad=$(nm -g --defined-only $B/symbols.o | awk '{print $3}' | grep -v '^rsd_')
if [ -n "$bad" ]; then echo "exported symbols without the rsd_ prefix:"; echo "$bad"; exit 1; fi
echo "symbols: $(nm -g --defined-only $B/symbols.o | wc -l) exported, all rsd_"
