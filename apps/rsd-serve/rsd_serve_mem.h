/* rsd_serve_mem.h -- rsd-serve's pure parts of "what a model costs": a start's
   parameters read from the child's arguments (for rsd_gguf_estimate_start), the key a
   learned figure is kept under, and that record's text in the state directory. Pure: no
   I/O, no clock, no allocation (rsd-serve.c's "memory" section reads the model file's
   header, the child's output and the files). Not part of the library: everything is
   `static`, prefixed rsrv_mem_, C99. Include rsd_serve.h and rsd_serve_kv.h first.

   PARAMETERS (rsrv_mem_params_*)
       The configuration's ctx, parallel and ngl (st.n_gpu_layers stays 0 when none is
       given: rsd-serve makes that all layers on a GPU's budget, llama-server's default
       where it has a GPU, and none otherwise, so a CPU host's estimate has no second
       copy of a tied embedding), then every argument the child gets
       after them (the global args, then the model's), the last one winning as in
       llama.cpp: -c/--ctx-size, -np/--parallel, -ngl/--gpu-layers/--n-gpu-layers
       (a number, auto, all), -ctk/--cache-type-k, -ctv/--cache-type-v, -b/--batch-size,
       -ub/--ubatch-size, -kvu/--kv-unified, --no-kv-unified, --swa-full and
       -fa/--flash-attn (kept in the key; the estimate does not model it). "--flag=value"
       is read as well. Anything else is not read.
   RECORD (STATE_DIR/mem-KEY.txt, 0600; KEY is 16 hex digits, FNV-1a 64 over the model
   file's path, size and mtime, the parameters' text and the server's build)
       rsd-mem 1
       model ID
       params c=8192 np=4 ngl=all ctk=f16 ctv=f16 b=0 ub=0 kvu=0 swa=0 fa=
       build /opt/llama/llama-server 12345678 1733400000
       model_bytes N        kv_bytes N        compute_bytes N
       total_bytes N        device_bytes N    (the part on a GPU, not in host memory)
       source log|nvml|amdgpu|rss
   A record whose params or build differ from the start's (a hash collision), or that
   does not read, is ignored. */
#ifndef RSD_SERVE_MEM_H_INCLUDED
#define RSD_SERVE_MEM_H_INCLUDED

#ifndef RSD_SERVE_KV_H_INCLUDED
#error "include rsd_serve.h and rsd_serve_kv.h before rsd_serve_mem.h"
#endif

enum {
    RSRV_MEM_PARAMS_MAX = 160,  /* the parameters' text (with the NUL) */
    RSRV_MEM_BUILD_MAX = 1100,  /* the build's text: path, size, mtime (with the NUL) */
    RSRV_MEM_SOURCE_MAX = 8,    /* "log", "nvml", "amdgpu", "rss" (with the NUL) */
    RSRV_MEM_TYPE_MAX = 12,     /* a cache type name (with the NUL) */
    RSRV_MEM_NAME_MAX = 28      /* "mem-KEY.txt" with the NUL */
};

/* One figure, in bytes. */
typedef struct rsrv_mem_fig {
    uint64_t model, kv, compute, total; /* all devices; total = model + kv + compute (or the
                                           OS's figure alone, the parts 0) */
    uint64_t device;                    /* the part on a GPU */
} rsrv_mem_fig;

/* A start's parameters. */
typedef struct rsrv_mem_params {
    rsd_gguf_start st;                  /* its cache types point into ctk, ctv */
    char ctk[RSRV_MEM_TYPE_MAX], ctv[RSRV_MEM_TYPE_MAX], fa[RSRV_MEM_TYPE_MAX];
} rsrv_mem_params;

/* A learned figure as kept. */
typedef struct rsrv_mem_rec {
    char model[RSRV_ID_MAX];
    char params[RSRV_MEM_PARAMS_MAX];
    char build[RSRV_MEM_BUILD_MAX];
    char source[RSRV_MEM_SOURCE_MAX];
    rsrv_mem_fig fig;
} rsrv_mem_rec;

/* "99", "auto", "all", "-1" -> n_gpu_layers (0 layers: RSD_GGUF_NGL_NONE); false when
   it is none of these. */
RSRV_FN bool rsrv_mem_ngl(const char *v, int32_t *out) {
    uint64_t x;
    if (!strcmp(v, "auto") || !strcmp(v, "all") || !strcmp(v, "-1")) { *out = -1; return true; }
    if (!rsrv_parse_u64(v, strlen(v), 100000, &x)) return false;
    *out = x ? (int32_t)x : RSD_GGUF_NGL_NONE;
    return true;
}

/* The configuration's part: ctx (0 = not passed), parallel (0 = not passed), ngl ("" =
   not passed). */
RSRV_FN void rsrv_mem_params_init(rsrv_mem_params *p, int64_t ctx, int parallel, const char *ngl) {
    memset(p, 0, sizeof *p);
    p->st.n_ctx = ctx > 0 && ctx <= 0x7fffffff ? (uint32_t)ctx : 0;
    p->st.n_parallel = parallel > 0 ? parallel : 0;
    if (ngl && ngl[0]) (void)rsrv_mem_ngl(ngl, &p->st.n_gpu_layers);
}

/* Reads the arguments argv[0..] (NULL-ends it) over p. */
RSRV_FN void rsrv_mem_params_args(rsrv_mem_params *p, const char *const *argv) {
    int i;
    for (i = 0; argv && argv[i]; i++) {
        char name[32];
        const char *a = argv[i], *v = NULL, *eq = a[0] == '-' && a[1] == '-' ? strchr(a, '=') : NULL;
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        uint64_t x;
        if (n >= sizeof name || a[0] != '-') continue;
        memcpy(name, a, n);
        name[n] = 0;
#define RSRV_MEM_IS(s1, s2) (!strcmp(name, s1) || !strcmp(name, s2))
        if (RSRV_MEM_IS("-kvu", "--kv-unified")) { p->st.kv_unified = 1; continue; }
        if (!strcmp(name, "--no-kv-unified")) { p->st.kv_unified = -1; continue; }
        if (!strcmp(name, "--swa-full")) { p->st.swa_full = true; continue; }
        if (!(RSRV_MEM_IS("-c", "--ctx-size") || RSRV_MEM_IS("-np", "--parallel") || RSRV_MEM_IS("-ngl", "--gpu-layers") ||
              !strcmp(name, "--n-gpu-layers") || RSRV_MEM_IS("-ctk", "--cache-type-k") ||
              RSRV_MEM_IS("-ctv", "--cache-type-v") || RSRV_MEM_IS("-b", "--batch-size") ||
              RSRV_MEM_IS("-ub", "--ubatch-size") || RSRV_MEM_IS("-fa", "--flash-attn")))
            continue;
        v = eq ? eq + 1 : argv[i + 1];
        if (!v) break;
        if (!eq) i++;
        if (RSRV_MEM_IS("-ngl", "--gpu-layers") || !strcmp(name, "--n-gpu-layers")) (void)rsrv_mem_ngl(v, &p->st.n_gpu_layers);
        else if (RSRV_MEM_IS("-ctk", "--cache-type-k")) rsrv_cpy(p->ctk, sizeof p->ctk, v, strlen(v) < sizeof p->ctk ? strlen(v) : 0);
        else if (RSRV_MEM_IS("-ctv", "--cache-type-v")) rsrv_cpy(p->ctv, sizeof p->ctv, v, strlen(v) < sizeof p->ctv ? strlen(v) : 0);
        else if (RSRV_MEM_IS("-fa", "--flash-attn")) rsrv_cpy(p->fa, sizeof p->fa, v, strlen(v) < sizeof p->fa ? strlen(v) : 0);
        else if (!rsrv_parse_u64(v, strlen(v), 0x7fffffff, &x)) continue;
        else if (RSRV_MEM_IS("-c", "--ctx-size")) p->st.n_ctx = (uint32_t)x;
        else if (RSRV_MEM_IS("-np", "--parallel")) p->st.n_parallel = (int32_t)x;
        else if (RSRV_MEM_IS("-b", "--batch-size")) p->st.n_batch = (uint32_t)x;
        else p->st.n_ubatch = (uint32_t)x;
#undef RSRV_MEM_IS
    }
    p->st.cache_type_k = p->ctk[0] ? p->ctk : NULL;
    p->st.cache_type_v = p->ctv[0] ? p->ctv : NULL;
}

/* The parameters as one line of text (the key's part and the record's "params"): its
   length, or -1 when it does not fit cap. */
RSRV_FN int rsrv_mem_params_text(const rsrv_mem_params *p, char *out, size_t cap) {
    char ngl[16];
    int n;
    if (p->st.n_gpu_layers == RSD_GGUF_NGL_NONE) snprintf(ngl, sizeof ngl, "0");
    else if (!p->st.n_gpu_layers) snprintf(ngl, sizeof ngl, "-"); /* not given */
    else if (p->st.n_gpu_layers < 0) snprintf(ngl, sizeof ngl, "all");
    else snprintf(ngl, sizeof ngl, "%ld", (long)p->st.n_gpu_layers);
    n = snprintf(out, cap, "c=%lu np=%ld ngl=%s ctk=%s ctv=%s b=%lu ub=%lu kvu=%d swa=%d fa=%s",
                 (unsigned long)p->st.n_ctx, (long)p->st.n_parallel, ngl, p->ctk[0] ? p->ctk : "f16",
                 p->ctv[0] ? p->ctv : "f16", (unsigned long)p->st.n_batch, (unsigned long)p->st.n_ubatch,
                 (int)p->st.kv_unified, p->st.swa_full ? 1 : 0, p->fa);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* "mem-KEY.txt" into out (RSRV_MEM_NAME_MAX bytes). */
RSRV_FN void rsrv_mem_name(char *out, uint64_t key) {
    snprintf(out, RSRV_MEM_NAME_MAX, "mem-%016llx.txt", (unsigned long long)key);
}

/* The record's text into out: its length, or -1 (it does not fit, a field holds a
   control byte, or the source is empty). */
RSRV_FN int rsrv_mem_write(const rsrv_mem_rec *r, char *out, size_t cap) {
    int n;
    if (!r->model[0] || !r->source[0] || !rsrv_kv_field_ok(r->model, strlen(r->model)) ||
        !rsrv_kv_field_ok(r->params, strlen(r->params)) || !rsrv_kv_field_ok(r->build, strlen(r->build)) ||
        !rsrv_kv_field_ok(r->source, strlen(r->source)))
        return -1;
    n = snprintf(out, cap,
                 "rsd-mem 1\nmodel %s\nparams %s\nbuild %s\nmodel_bytes %llu\nkv_bytes %llu\ncompute_bytes %llu\n"
                 "total_bytes %llu\ndevice_bytes %llu\nsource %s\n",
                 r->model, r->params, r->build, (unsigned long long)r->fig.model, (unsigned long long)r->fig.kv,
                 (unsigned long long)r->fig.compute, (unsigned long long)r->fig.total,
                 (unsigned long long)r->fig.device, r->source);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* Reads a record (text[0..n)): true with *r when every line is there once and sane (a
   total above 0 and below 2^60, the parts and the device part within it). */
RSRV_FN bool rsrv_mem_read(const char *text, size_t n, rsrv_mem_rec *r) {
    static const char *const keys[10] = {"rsd-mem", "model", "params", "build", "model_bytes", "kv_bytes",
                                         "compute_bytes", "total_bytes", "device_bytes", "source"};
    size_t i = 0;
    int seen = 0;
    memset(r, 0, sizeof *r);
    while (i < n) {
        size_t j = i, ln, kl, vl;
        const char *line = text + i, *v;
        int k;
        uint64_t x = 0;
        while (j < n && text[j] != '\n') j++;
        ln = j - i;
        i = j + 1;
        v = (const char *)memchr(line, ' ', ln);
        if (!v) return false;
        kl = (size_t)(v - line);
        vl = ln - kl - 1;
        v++;
        for (k = 0; k < 10; k++)
            if (strlen(keys[k]) == kl && !memcmp(line, keys[k], kl)) break;
        if (k == 10 || (seen & (1 << k)) || !rsrv_kv_field_ok(v, vl)) return false;
        seen |= 1 << k;
        if (k >= 4 && k <= 8 && !rsrv_parse_u64(v, vl, (uint64_t)1 << 60, &x)) return false;
        switch (k) {
        case 0: if (vl != 1 || v[0] != '1') return false; break;
        case 1: if (!vl || vl >= sizeof r->model) return false; rsrv_cpy(r->model, sizeof r->model, v, vl); break;
        case 2: if (vl >= sizeof r->params) return false; rsrv_cpy(r->params, sizeof r->params, v, vl); break;
        case 3: if (vl >= sizeof r->build) return false; rsrv_cpy(r->build, sizeof r->build, v, vl); break;
        case 4: r->fig.model = x; break;
        case 5: r->fig.kv = x; break;
        case 6: r->fig.compute = x; break;
        case 7: r->fig.total = x; break;
        case 8: r->fig.device = x; break;
        default: if (!vl || vl >= sizeof r->source) return false; rsrv_cpy(r->source, sizeof r->source, v, vl); break;
        }
    }
    return seen == (1 << 10) - 1 && r->fig.total > 0 && r->fig.device <= r->fig.total &&
           r->fig.model + r->fig.kv + r->fig.compute <= r->fig.total;
}
#endif
