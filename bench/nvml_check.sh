#!/bin/sh
# The device memory probe's NVML path on a real NVIDIA GPU: builds a tiny program that
# prints rsd_devmem_read's figures for every nvmlN entry, and sets them beside
#   nvidia-smi --query-gpu=index,memory.total,memory.used,memory.reserved --format=csv
# Fails (exit 1) when a GPU's total or used differ by more than MARGIN_MIB (default 128)
# or MARGIN_PCT percent of its total (default 0), whichever is larger, or when the probe
# and nvidia-smi see a different number of GPUs. Run on an idle GPU (used moves between
# the two reads otherwise): sh bench/nvml_check.sh [CC]
# The probe's "used" is nvmlDeviceGetMemoryInfo's (total - free), which counts the
# driver's reserved memory; nvidia-smi's memory.used leaves it out on drivers that
# report memory.reserved, so that is added back before comparing.
# Not run by make test or make bench (no GPU on the build machine). It has not run yet:
# no NVIDIA GPU was available where it was written.
CC=${1:-cc}
MARGIN_MIB=${MARGIN_MIB:-128}
MARGIN_PCT=${MARGIN_PCT:-0}
OUT=${OUT:-build/bench}
set -e
command -v nvidia-smi >/dev/null 2>&1 || { echo "nvml_check: no nvidia-smi here (no NVIDIA driver): skipped"; exit 0; }
mkdir -p "$OUT"
cat > "$OUT/nvml_check.c" <<'PROG'
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"
#include <stdio.h>
int main(void) {
    rsd_devmem_dev d[RSD_DEVMEM_MAX_DEVICES];
    rsd_devmem_desc dd;
    rsd_devmem *dm;
    int i, n;
    memset(&dd, 0, sizeof dd);
    dm = rsd_devmem_create(&dd);
    if (!dm) return 2;
    if (rsd_devmem_nvml_status(dm)[0]) fprintf(stderr, "nvml_check: %s\n", rsd_devmem_nvml_status(dm));
    n = rsd_devmem_read(dm, NULL, 0, d, RSD_DEVMEM_MAX_DEVICES);
    for (i = 0; i < n; i++)
        if (d[i].source == RSD_DEVMEM_NVML)
            printf("%s %llu %llu\n", d[i].name + 4, (unsigned long long)d[i].total_bytes,
                   (unsigned long long)d[i].used_bytes);
    rsd_devmem_destroy(dm);
    return 0;
}
PROG
# glibc before 2.34 keeps dlopen in libdl
$CC -std=c99 -O1 -I. "$OUT/nvml_check.c" -o "$OUT/nvml_check" 2>/dev/null ||
  $CC -std=c99 -O1 -I. "$OUT/nvml_check.c" -o "$OUT/nvml_check" -ldl
"$OUT/nvml_check" > "$OUT/nvml_check.probe"
nvidia-smi --query-gpu=index,memory.total,memory.used,memory.reserved --format=csv,noheader,nounits \
  > "$OUT/nvml_check.smi" 2>/dev/null ||
  nvidia-smi --query-gpu=index,memory.total,memory.used --format=csv,noheader,nounits > "$OUT/nvml_check.smi"
awk -v mm="$MARGIN_MIB" -v mp="$MARGIN_PCT" '
  FNR == NR { total[$1] = $2; used[$1] = $3; np++; next }
  {
    gsub(/ /, ""); split($0, f, ",")
    i = f[1]; t = f[2] * 1048576; u = f[3] * 1048576
    if (f[4] ~ /^[0-9]+$/) u += f[4] * 1048576           # memory.reserved, where reported
    ns++
    if (!(i in total)) { printf "gpu %s: nvidia-smi sees it, the probe does not\n", i; bad = 1; next }
    tol = mm * 1048576; if (t * mp / 100 > tol) tol = t * mp / 100
    dt = total[i] - t; if (dt < 0) dt = -dt
    du = used[i] - u; if (du < 0) du = -du
    ok = dt <= tol && du <= tol
    printf "gpu %s: total probe %.0f MiB smi %.0f MiB, used probe %.0f MiB smi(+reserved) %.0f MiB, tolerance %.0f MiB: %s\n",
           i, total[i] / 1048576, t / 1048576, used[i] / 1048576, u / 1048576, tol / 1048576, ok ? "ok" : "DISAGREE"
    if (!ok) bad = 1
  }
  END {
    if (np != ns) { printf "the probe sees %d GPUs, nvidia-smi %d\n", np, ns; bad = 1 }
    if (ns == 0) { print "no GPU listed"; bad = 1 }
    exit bad
  }' "$OUT/nvml_check.probe" "$OUT/nvml_check.smi" && echo "nvml_check: ok" || { echo "nvml_check: FAILED"; exit 1; }
