#!/bin/sh
# Code size (.text bytes, -Os, no TLS, the host compiler; x86-64 on the CI machine):
#   text_full         the whole implementation: both headers, one TU, every feature
#   text_router_only  a program that only ensures on a llama.cpp router (rsd_ensurer_sync: JSON,
#                     decision, router driver, HTTP client, state), linked with
#                     --gc-sections and the feature macros it does not need (its
#                     request names the runtime, so RSD_NO_DETECT too), less the
#                     .text of an empty program built the same way (the C runtime's start)
#   size_reconcile    sizeof(rsd_reconcile) with the defaults (its tables are allocated by
#                     rsd_reconcile_init; their sum is printed beside it, footprint=)
#   size_ensurer      rsd_ensurer_footprint(NULL): what rsd_ensurer_create allocates with the
#                     defaults (the ensurer, its reconcile's tables, its HTTP client, its
#                     state directory's block)
#   size_ensurer_router  the same for an ensurer whose desc says runtime LLAMACPP (no LM
#                     Studio state)
# Peers: the figures the issue measured before the consolidation (text_full 142188) and
# this router-only program built from main before this branch (119223); the sizes as
# main had them before tables were sized at create time (sizeof(rsd_reconcile) 1039536,
# sizeof the ensurer 1203464, which did not count its client's 8 x 1.08 MiB); the ensurer's
# footprint as main had it before its tables were sized by its desc (1412200).
CC=$1; OUT=$2
set -e
printf '#define RESIDENCY_IMPLEMENTATION\n#include "residency_http.h"\n' > "$OUT/size_full.c"
$CC -std=c99 -Os -I. -c "$OUT/size_full.c" -o "$OUT/size_full.o"
full=$(size -A "$OUT/size_full.o" | awk '$1 == ".text" { print $2 }')
cat > "$OUT/size_router.c" <<'PROG'
#define RSD_NO_LMSTUDIO
#define RSD_NO_ETCD
#define RSD_NO_OLLAMA
#define RSD_NO_HTTP_SERVER
#define RSD_NO_PROC
#define RSD_NO_DETECT
#define RSD_NO_DEVMEM
#define RSD_NO_SERVE_LEASE
#define RSD_NO_ENSURE_KV
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
int main(int argc, char **argv) {
    rsd_ensurer *e = rsd_ensurer_create(NULL);
    rsd_ensure_req q;
    rsd_ensure_result r;
    int rc;
    if (!e || argc < 3) return 2;
    memset(&q, 0, sizeof q);
    q.url = argv[1];
    q.model = argv[2];
    q.runtime = RSD_RUNTIME_LLAMACPP;
    rc = rsd_ensurer_sync(e, &q, &r);
    rsd_ensurer_destroy(e);
    return rc < 0;
}
PROG
printf 'int main(void) { return 0; }\n' > "$OUT/size_empty.c"
LD="-Os -ffunction-sections -fdata-sections -Wl,--gc-sections"
$CC -std=c99 $LD -I. "$OUT/size_router.c" -o "$OUT/size_router"
$CC -std=c99 $LD "$OUT/size_empty.c" -o "$OUT/size_empty"
t() { size -A "$1" | awk '$1 == ".text" { print $2 }'; }
router=$(( $(t "$OUT/size_router") - $(t "$OUT/size_empty") ))
cat > "$OUT/size_structs.c" <<'PROG'
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
#include <stdio.h>
int main(void) {
    printf("BENCH size_reconcile ours=%lu peer=1039536 unit=bytes ratio=%.3f target=131072 footprint=%lu\n",
           (unsigned long)sizeof(rsd_reconcile), (double)sizeof(rsd_reconcile) / 1039536.0,
           (unsigned long)rsd_reconcile_footprint(NULL));
    rsd_ensurer_desc d;
    printf("BENCH size_ensurer ours=%lu peer=1412200 unit=bytes ratio=%.3f target=262144\n",
           (unsigned long)rsd_ensurer_footprint(NULL), (double)rsd_ensurer_footprint(NULL) / 1412200.0);
    memset(&d, 0, sizeof d);
    d.runtime = RSD_RUNTIME_LLAMACPP;
    printf("BENCH size_ensurer_router ours=%lu peer=1412200 unit=bytes ratio=%.3f target=262144\n",
           (unsigned long)rsd_ensurer_footprint(&d), (double)rsd_ensurer_footprint(&d) / 1412200.0);
    return 0;
}
PROG
$CC -std=c99 -I. "$OUT/size_structs.c" -o "$OUT/size_structs"
awk -v o="$full" -v p=142188 -v t=98304 'BEGIN { printf "BENCH text_full ours=%d peer=%d unit=bytes ratio=%.3f target=%d\n", o, p, o / p, t }'
awk -v o="$router" -v p=119223 -v t=49152 'BEGIN { printf "BENCH text_router_only ours=%d peer=%d unit=bytes ratio=%.3f target=%d\n", o, p, o / p, t }'
"$OUT/size_structs" || exit 1
# The embedder's promise: a program that only ensures on a llama.cpp router stays under
# 100 KiB of .text. Past it, this bench fails.
if [ "$router" -ge 102400 ]; then
  echo "bench/size.sh: text_router_only is $router bytes, over the 100 KiB (102400) a router-only program may take"
  exit 1
fi
