/* Fuzz the GGUF reader (rsd_gguf_feed/_end) and the start estimate on what it reads.
   The first input byte picks the piece size (1..64) the rest is fed in. Invariants: the
   verdict and the info are the same in one piece and in pieces; an error is sticky and
   its message starts with "GGUF byte "; a complete header lies inside the input, its
   data offset is aligned, its tensors' offsets follow one another (aligned), names are
   NUL-terminated and the sums add up; the estimate never crashes and its total is
   model + kv + compute; for short inputs every prefix ends in RSD_ERR_TRUNCATED or the
   same verdict. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static rsd_gguf g1, g2;
static rsd_gguf_tensor t1[256], t2[256];

static int fz_read(rsd_gguf *g, rsd_gguf_tensor *t, const uint8_t *d, size_t n, size_t piece) {
    rsd_gguf_desc desc;
    size_t at = 0;
    int r = RSD_PENDING;
    memset(&desc, 0, sizeof desc);
    desc.tensors = t;
    desc.max_tensors = 256;
    desc.max_header_bytes = 1 << 20;
    rsd_gguf_init(g, &desc);
    while (r == RSD_PENDING && at < n) {
        size_t k = n - at < piece ? n - at : piece;
        r = rsd_gguf_feed(g, d + at, k);
        at += k;
    }
    if (r == RSD_PENDING) r = rsd_gguf_end(g);
    if (r < 0) {
        FZ_CHECK(strncmp(rsd_gguf_error(g), "GGUF byte ", 10) == 0);
        FZ_CHECK(rsd_gguf_feed(g, d, n) == r && rsd_gguf_end(g) == r);
    }
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t piece, i;
    int r, r2;
    uint64_t run = 0;
    if (size < 1) return 0;
    piece = 1 + data[0] % 64;
    data++;
    size--;
    r = fz_read(&g1, t1, data, size, size ? size : 1);
    r2 = fz_read(&g2, t2, data, size, piece);
    FZ_CHECK(r == r2);
    FZ_CHECK(r == RSD_OK || r == RSD_ERR_TRUNCATED || r == RSD_ERR_GGUF || r == RSD_ERR_GGUF_MAGIC ||
             r == RSD_ERR_GGUF_TYPE || r == RSD_ERR_OVERFLOW || r == RSD_ERR_CAPACITY || r == RSD_ERR_TOO_LARGE);
    FZ_CHECK(memcmp(&g1.info, &g2.info, sizeof g1.info) == 0);
    if (r == RSD_OK) {
        const rsd_gguf_info *in = &g1.info;
        uint64_t sum = 0;
        FZ_CHECK(in->header_bytes <= size && in->data_offset >= in->header_bytes);
        FZ_CHECK(in->alignment && in->data_offset % in->alignment == 0);
        FZ_CHECK(in->n_tensors <= 256 && in->block_count <= RSD_GGUF_MAX_LAYERS);
        FZ_CHECK(memcmp(t1, t2, (size_t)in->n_tensors * sizeof t1[0]) == 0);
        for (i = 0; i < in->n_tensors; i++) {
            FZ_CHECK(t1[i].offset == run && t1[i].n_dims <= 4 && memchr(t1[i].name, 0, RSD_GGUF_NAME_MAX));
            FZ_CHECK(t1[i].layer < RSD_GGUF_MAX_LAYERS);
            run = t1[i].offset + t1[i].bytes;
            FZ_CHECK(in->data_bytes >= run);
            run = (run + in->alignment - 1) / in->alignment * in->alignment;
            sum += t1[i].bytes;
        }
        FZ_CHECK(sum == in->tensor_bytes && strlen(in->architecture) < RSD_GGUF_ARCH_MAX);
        {
            static const int32_t np[3] = {0, 1, 4};
            static const char *const ct[3] = {NULL, "q8_0", "q4_0"};
            rsd_gguf_start st;
            rsd_gguf_estimate e;
            for (i = 0; i < 3; i++) {
                memset(&st, 0, sizeof st);
                st.n_parallel = np[i];
                st.cache_type_k = st.cache_type_v = ct[i];
                st.n_ctx = i == 2 ? 0 : 1000;
                st.n_gpu_layers = i == 1 ? -1 : 0;
                st.swa_full = i == 2;
                if (rsd_gguf_estimate_start(in, &st, &e) == RSD_OK) {
                    FZ_CHECK(e.total == e.model + e.kv + e.compute);
                    FZ_CHECK(e.n_ctx % 256 == 0 && e.n_ctx_seq % 256 == 0 && e.kv_cells_swa <= e.kv_cells);
                    FZ_CHECK(e.model_device <= e.model && e.kv_device <= e.kv);
                }
            }
        }
    }
    /* every prefix of a short input: truncated, or already the whole verdict */
    if (size <= 256)
        for (i = 0; i < size; i++) {
            int rp = fz_read(&g2, t2, data, i, piece);
            FZ_CHECK(rp == RSD_ERR_TRUNCATED || rp == r || (r != RSD_OK && rp < 0));
        }
    return 0;
}
