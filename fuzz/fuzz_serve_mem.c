/* libFuzzer target for rsd-serve's memory figures (apps/rsd-serve/rsd_serve_mem.h): the record
   kept in state_dir (rsrv_mem_read) and a start's parameters read from its arguments
   (rsrv_mem_params_args over the input split at NUL bytes and blanks).
   Build: make fuzz T=serve_mem FUZZ_SECS=60
   Invariants checked (abort on violation):
   - a record read back is written again and reads the same (round trip); its total is
     above 0, the parts and the device part within it, model and source non-empty;
   - the parameters' text always fits RSRV_MEM_PARAMS_MAX, the cache types are NULL or
     NUL-terminated inside their buffers. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "../apps/rsd-serve/rsd_serve.h"
#include "../apps/rsd-serve/rsd_serve_kv.h"
#include "../apps/rsd-serve/rsd_serve_mem.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsrv_mem_rec r, back;
static char text[4096], words[4096];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *argv[65];
    rsrv_mem_params p;
    char t[RSRV_MEM_PARAMS_MAX];
    size_t i, n;
    int k = 0, w;
    if (rsrv_mem_read((const char *)data, size, &r)) {
        FZ_CHECK(r.model[0] && r.source[0] && r.fig.total > 0 && r.fig.device <= r.fig.total);
        FZ_CHECK(r.fig.model + r.fig.kv + r.fig.compute <= r.fig.total);
        w = rsrv_mem_write(&r, text, sizeof text);
        FZ_CHECK(w > 0);
        FZ_CHECK(rsrv_mem_read(text, (size_t)w, &back));
        FZ_CHECK(!strcmp(back.model, r.model) && !strcmp(back.params, r.params) && !strcmp(back.build, r.build));
        FZ_CHECK(!strcmp(back.source, r.source) && !memcmp(&back.fig, &r.fig, sizeof r.fig));
    }
    n = size < sizeof words - 1 ? size : sizeof words - 1;
    memcpy(words, data, n);
    words[n] = 0;
    for (i = 0; i <= n && k < 64; i++) { /* words at NUL, blank or newline */
        if (i == n || words[i] == 0 || words[i] == ' ' || words[i] == '\n') {
            words[i] = 0;
            continue;
        }
        if (i == 0 || words[i - 1] == 0) argv[k++] = words + i;
    }
    argv[k] = NULL;
    rsrv_mem_params_init(&p, 4096, 2, "99");
    rsrv_mem_params_args(&p, argv);
    FZ_CHECK(rsrv_mem_params_text(&p, t, sizeof t) > 0);
    FZ_CHECK(!p.st.cache_type_k || memchr(p.ctk, 0, sizeof p.ctk));
    FZ_CHECK(!p.st.cache_type_v || memchr(p.ctv, 0, sizeof p.ctv));
    return 0;
}
