/* fake_nvml.c -- a stand-in for libnvidia-ml.so.1 that tests/test_devmem.c loads through
   the probe's desc.nvml_path (the Makefile builds it as build/tests/libfake_nvml.so with
   -shared -fPIC). It exports the few entry points the probe calls, with NVML's own
   signatures and record layouts, and answers from the environment at each call, so a
   test re-scripts it between reads:
     FAKE_NVML          devices separated by ';'. A device is "TOTAL,USED" followed by
                        ",PID=BYTES" per compute process (BYTES "na": NVML's
                        NVML_VALUE_NOT_AVAILABLE), ",procfail" (the process list call
                        fails), ",many" (more processes than any buffer: INSUFFICIENT_SIZE),
                        or the word "nomem" (the memory call answers NOT_SUPPORTED).
     FAKE_NVML_FILE     a file holding that script, read at each call (it wins over
                        FAKE_NVML): a test re-scripts a child process that loaded us
     FAKE_NVML_INIT_RC  what nvmlInit_v2 returns (default 0, success)
     FAKE_NVML_LOG      a file that gets one line per nvmlInit_v2 / nvmlShutdown
   Device handles are the device index + 1 cast to a pointer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned long long total, free_, used; } fake_memory;
typedef struct { unsigned int pid; unsigned long long used; } fake_proc;

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned int *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h);
int nvmlDeviceGetMemoryInfo(void *h, fake_memory *m);
int nvmlDeviceGetComputeRunningProcesses(void *h, unsigned int *n, fake_proc *p);

enum { OK = 0, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, INSUFFICIENT_SIZE = 7 };

static void fake_log(const char *what) {
    const char *p = getenv("FAKE_NVML_LOG");
    FILE *f;
    if (!p || !(f = fopen(p, "a"))) return;
    fprintf(f, "%s\n", what);
    fclose(f);
}

/* The text of device i (up to ';' or the end) in out; 0 when there is no such device. */
static int fake_dev(unsigned int i, char *out, size_t cap) {
    static char file[4096];
    const char *s = getenv("FAKE_NVML"), *e, *fp = getenv("FAKE_NVML_FILE");
    size_t n;
    if (fp) {
        FILE *f = fopen(fp, "rb");
        size_t k = f ? fread(file, 1, sizeof file - 1, f) : 0;
        if (f) fclose(f);
        while (k && (file[k - 1] == '\n' || file[k - 1] == ' ')) k--;
        file[k] = 0;
        s = file;
    }
    if (!s || !*s) return 0;
    while (i--) {
        s = strchr(s, ';');
        if (!s) return 0;
        s++;
    }
    e = strchr(s, ';');
    n = e ? (size_t)(e - s) : strlen(s);
    if (n >= cap) n = cap - 1;
    memcpy(out, s, n);
    out[n] = 0;
    return 1;
}

int nvmlInit_v2(void) {
    const char *rc = getenv("FAKE_NVML_INIT_RC");
    fake_log("init");
    return rc ? atoi(rc) : OK;
}

int nvmlShutdown(void) {
    fake_log("shutdown");
    return OK;
}

int nvmlDeviceGetCount_v2(unsigned int *n) {
    char d[512];
    unsigned int k = 0;
    while (fake_dev(k, d, sizeof d)) k++;
    *n = k;
    return OK;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) {
    char d[512];
    if (!fake_dev(i, d, sizeof d)) return INVALID_ARGUMENT;
    *h = (void *)(size_t)(i + 1);
    return OK;
}

int nvmlDeviceGetMemoryInfo(void *h, fake_memory *m) {
    char d[512];
    if (!fake_dev((unsigned int)((size_t)h - 1), d, sizeof d)) return INVALID_ARGUMENT;
    if (!strcmp(d, "nomem")) return NOT_SUPPORTED;
    m->total = strtoull(d, NULL, 10);
    m->used = strtoull(strchr(d, ',') + 1, NULL, 10);
    m->free_ = m->total > m->used ? m->total - m->used : 0;
    return OK;
}

int nvmlDeviceGetComputeRunningProcesses(void *h, unsigned int *n, fake_proc *p) {
    char d[512], *s;
    unsigned int k = 0;
    if (!fake_dev((unsigned int)((size_t)h - 1), d, sizeof d)) return INVALID_ARGUMENT;
    if (strstr(d, "procfail")) return NOT_SUPPORTED;
    if (strstr(d, "many")) {
        *n = 100000;
        return INSUFFICIENT_SIZE;
    }
    s = strchr(d, ',');
    s = s ? strchr(s + 1, ',') : NULL; /* past TOTAL,USED */
    while (s) {
        char *eq;
        s++;
        eq = strchr(s, '=');
        if (!eq) break;
        if (k >= *n) {
            *n = k + 1;
            return INSUFFICIENT_SIZE;
        }
        p[k].pid = (unsigned int)strtoul(s, NULL, 10);
        p[k].used = !strncmp(eq + 1, "na", 2) ? ~0ull : strtoull(eq + 1, NULL, 10);
        k++;
        s = strchr(eq, ',');
    }
    *n = k;
    return OK;
}
