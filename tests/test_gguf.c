/* test_gguf.c -- residency.h >>gguf: the sans-I/O GGUF reader (any split, every
   truncation, hostile files), the ggml type table, the start estimate's parameter rules
   and the llama-server log reader; residency_http.h's rsd_gguf_read_file. */
#define _POSIX_C_SOURCE 200809L
#include "../residency_http.h"
#include "rsd_test.h"
#include <stdint.h>
#include "state_dir.h"
#include "tiny_gguf.h"

#define g_dir g_state_dir

/* The whole file at path into a malloc'd buffer. */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    long sz;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = (unsigned char *)malloc((size_t)sz)) != NULL && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    if (b) *n = (size_t)sz;
    fclose(f);
    return b;
}

/* Feeds b[0..n) in pieces of `piece` bytes (0: one piece), then ends. */
static int feed_all(rsd_gguf *g, const rsd_gguf_desc *d, const void *b, size_t n, size_t piece) {
    size_t at = 0;
    int r = RSD_PENDING;
    rsd_gguf_init(g, d);
    if (!piece) piece = n ? n : 1;
    while (r == RSD_PENDING && at < n) {
        size_t k = n - at < piece ? n - at : piece;
        r = rsd_gguf_feed(g, (const unsigned char *)b + at, k);
        at += k;
    }
    return r == RSD_PENDING ? rsd_gguf_end(g) : r;
}

static rsd_gguf g_a, g_b, g_c;
static rsd_gguf_tensor g_ta[64], g_tb[64];

static void test_tiny_file(void) {
    char path[400];
    rsd_gguf_desc d;
    size_t n = 0, i, hb;
    unsigned char *b;
    snprintf(path, sizeof path, "%s/t.gguf", g_dir);
    REQUIRE(tiny_gguf_write(path, "tiny-t", 7, 4096, 0) == 0);
    memset(&d, 0, sizeof d);
    d.tensors = g_ta;
    d.max_tensors = 64;
    rsd_gguf_init(&g_a, &d);
    CHECK_EQ_INT(rsd_gguf_read_file(&g_a, path), RSD_OK);
    CHECK_EQ_STR(rsd_gguf_error(&g_a), "");
    CHECK_EQ_INT(g_a.info.version, 3);
    CHECK_EQ_STR(g_a.info.architecture, "llama");
    CHECK_EQ_INT(g_a.info.block_count, 1);
    CHECK_EQ_INT(g_a.info.embedding_length, 64);
    CHECK_EQ_INT(g_a.info.feed_forward_length, 128);
    CHECK_EQ_INT(g_a.info.head_count, 4);
    CHECK_EQ_INT(g_a.info.head_count_kv, 4);
    CHECK_EQ_INT(g_a.info.head_count_kv_layer[0], 4);
    CHECK_EQ_INT(g_a.info.context_length, 4096);
    CHECK_EQ_INT(g_a.info.vocab_size, 3 + 256 + TG_NPIECES);
    CHECK_EQ_INT(g_a.info.file_type, 0);
    CHECK_EQ_INT(g_a.info.alignment, 32);
    CHECK_EQ_INT(g_a.info.n_tensors, 11);
    CHECK_EQ_INT(g_a.info.n_kv, 24);
    CHECK_EQ_INT(g_a.info.sliding_window, 0);
    CHECK_EQ_STR(g_ta[0].name, "token_embd.weight");
    CHECK_EQ_INT(g_ta[0].n_dims, 2);
    CHECK_EQ_INT(g_ta[0].ne[0], 64);
    CHECK_EQ_INT(g_ta[0].ne[1], 3 + 256 + TG_NPIECES);
    CHECK_EQ_INT(g_ta[0].type, 0);
    CHECK_EQ_INT(g_ta[0].layer, -1);
    CHECK_EQ_INT(g_ta[0].bytes, 64 * 4 * (3 + 256 + TG_NPIECES));
    CHECK_EQ_INT(g_a.info.token_embd_bytes, g_ta[0].bytes);
    CHECK_EQ_STR(g_ta[10].name, "blk.0.ffn_down.weight");
    CHECK_EQ_INT(g_ta[10].layer, 0);
    CHECK_EQ_INT(g_ta[10].ne[0], 128);
    CHECK_EQ_INT(g_a.info.data_offset % 32, 0);
    CHECK(g_a.info.data_offset >= g_a.info.header_bytes && g_a.info.data_offset < g_a.info.header_bytes + 32);
    b = slurp(path, &n);
    REQUIRE(b != NULL);
    /* the weight area reaches the end of the file, less the last tensor's padding */
    CHECK(g_a.info.data_offset + g_a.info.data_bytes <= n && n - (g_a.info.data_offset + g_a.info.data_bytes) < 32);
    for (i = 0; i < 11; i++) CHECK(g_ta[i].offset % 32 == 0);
    CHECK_EQ_INT(g_a.info.layer_bytes[0] + g_a.info.token_embd_bytes + 64 * 4, g_a.info.tensor_bytes);
    /* any split gives the same answer */
    {
        size_t pieces[] = {1, 2, 3, 5, 7, 8, 13, 64, 1000, 4096};
        for (i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
            d.tensors = g_tb;
            CHECK_EQ_INT(feed_all(&g_b, &d, b, n, pieces[i]), RSD_OK);
            CHECK(memcmp(&g_a.info, &g_b.info, sizeof g_a.info) == 0);
            CHECK(memcmp(g_ta, g_tb, 11 * sizeof g_ta[0]) == 0);
        }
    }
    /* two pieces, split at every byte of the header */
    for (i = 0; i <= g_a.info.header_bytes; i++) {
        int r;
        rsd_gguf_init(&g_b, NULL);
        r = rsd_gguf_feed(&g_b, b, i);
        if (r == RSD_PENDING) r = rsd_gguf_feed(&g_b, b + i, n - i);
        if (r != RSD_OK || g_b.info.data_bytes != g_a.info.data_bytes || g_b.info.vocab_size != g_a.info.vocab_size) {
            CHECK_EQ_INT(i, -1);
            break;
        }
    }
    /* truncated at every byte: the end says so, with the offset; never OK early */
    for (i = 0; i < g_a.info.header_bytes; i++) {
        int r = feed_all(&g_b, NULL, b, i, 0);
        if (r != RSD_ERR_TRUNCATED || !strstr(rsd_gguf_error(&g_b), "GGUF byte ")) {
            CHECK_EQ_INT(i, -1);
            CHECK_EQ_INT(r, RSD_ERR_TRUNCATED);
            break;
        }
    }
    CHECK_EQ_INT(feed_all(&g_b, NULL, b, (size_t)g_a.info.header_bytes, 0), RSD_OK);
    /* the reader never needs the weights: the header alone is enough */
    CHECK_EQ_INT(rsd_gguf_feed(&g_b, "x", 1), RSD_OK);
    /* a header limit at every byte: the same verdict and message in one piece as byte by
       byte (a number is taken whole when it is all there, up to the limit) */
    hb = (size_t)g_a.info.header_bytes;
    for (i = 1; i <= hb; i++) {
        rsd_gguf_desc lim;
        int r1, r2;
        memset(&lim, 0, sizeof lim);
        lim.max_header_bytes = i;
        r1 = feed_all(&g_b, &lim, b, n, 0);
        r2 = feed_all(&g_c, &lim, b, n, 1);
        if (r1 != r2 || strcmp(rsd_gguf_error(&g_c), rsd_gguf_error(&g_b)) != 0 ||
            (i < hb) != (r1 == RSD_ERR_TOO_LARGE)) {
            printf("  limit %u: %d \"%s\" against %d \"%s\"\n", (unsigned)i, r1, rsd_gguf_error(&g_b), r2, rsd_gguf_error(&g_c));
            CHECK_EQ_INT(i, -1);
            break;
        }
    }
    free(b);
    /* a missing file */
    snprintf(path, sizeof path, "%s/none.gguf", g_dir);
    rsd_gguf_init(&g_b, NULL);
    CHECK_EQ_INT(rsd_gguf_read_file(&g_b, path), RSD_ERR_NOT_FOUND);
    CHECK(strstr(rsd_gguf_error(&g_b), "none.gguf") != NULL);
}

/* ---- hostile files, built by hand -------------------------------------- */
static tg_buf g_h;
static void h_begin(uint32_t version, uint64_t nt, uint64_t nkv) {
    free(g_h.p);
    memset(&g_h, 0, sizeof g_h);
    tg_put(&g_h, "GGUF", 4);
    tg_u32(&g_h, version);
    tg_u64(&g_h, nt);
    tg_u64(&g_h, nkv);
}
static void h_tensor(const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off) {
    uint32_t i;
    tg_str(&g_h, name);
    tg_u32(&g_h, nd);
    for (i = 0; i < nd; i++) tg_u64(&g_h, ne[i]);
    tg_u32(&g_h, type);
    tg_u64(&g_h, off);
}
static int h_read(rsd_gguf *g, const rsd_gguf_desc *d) {
    int r = feed_all(g, d, g_h.p, g_h.len, 0), r1;
    rsd_gguf g1;
    /* byte by byte gives the same verdict */
    r1 = feed_all(&g1, d, g_h.p, g_h.len, 1);
    CHECK_EQ_INT(r1, r);
    if (r < 0) CHECK(strstr(rsd_gguf_error(g), "GGUF byte ") == rsd_gguf_error(g));
    return r;
}
static bool h_msg(const rsd_gguf *g, const char *part) {
    if (strstr(rsd_gguf_error(g), part)) return true;
    printf("  message: %s\n", rsd_gguf_error(g));
    return false;
}

static void test_hostile_header(void) {
    static rsd_gguf g;
    uint64_t ne[4] = {64, 4, 1, 1};
    h_begin(3, 0, 0);
    g_h.p[0] = 'X';
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF_MAGIC);
    CHECK(h_msg(&g, "not a GGUF file"));
    h_begin(1, 0, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF_MAGIC);
    CHECK(h_msg(&g, "version 1"));
    h_begin(0x03000000u, 0, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF_MAGIC);
    CHECK(h_msg(&g, "big-endian"));
    h_begin(3, (uint64_t)1 << 40, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "tensors: over the limit"));
    h_begin(3, 0, UINT64_MAX);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "GGUF byte 16: "));
    /* an empty model is a complete header */
    h_begin(2, 0, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_OK);
    CHECK_EQ_INT(g.info.header_bytes, 24);
    CHECK_EQ_INT(g.info.data_offset, 32);
    /* a key whose length runs past any limit, or past the end */
    h_begin(3, 0, 1);
    tg_u64(&g_h, (uint64_t)1 << 62);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "a key is 4611686018427387904 bytes"));
    h_begin(3, 0, 1);
    tg_u64(&g_h, 1000);
    tg_put(&g_h, "abc", 3);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_TRUNCATED);
    CHECK(h_msg(&g, "ends inside a key"));
    /* a string value past the end */
    h_begin(3, 0, 1);
    tg_str(&g_h, "general.name");
    tg_u32(&g_h, TG_T_STRING);
    tg_u64(&g_h, UINT64_MAX);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    /* nested arrays, huge arrays, unknown value types */
    h_begin(3, 0, 1);
    tg_arr_head(&g_h, "x.nested", TG_T_ARRAY, 1);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "array of arrays"));
    h_begin(3, 0, 1);
    tg_arr_head(&g_h, "tokenizer.ggml.tokens", TG_T_STRING, (uint64_t)1 << 40);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "elements: over the limit"));
    h_begin(3, 0, 1);
    tg_arr_head(&g_h, "x.big", TG_T_UINT32, (uint64_t)1 << 27); /* 512 MiB of elements */
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_TOO_LARGE);
    h_begin(3, 0, 1);
    tg_str(&g_h, "x.y");
    tg_u32(&g_h, 13);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "unknown value type 13"));
    /* known keys with the wrong type or value */
    h_begin(3, 0, 2);
    tg_kv_str(&g_h, "general.architecture", "llama");
    tg_kv_f32(&g_h, "llama.block_count", 2.0f);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "llama.block_count has value type 6"));
    h_begin(3, 0, 1);
    tg_str(&g_h, "llama.context_length");
    tg_u32(&g_h, TG_T_INT32);
    tg_u32(&g_h, 0xffffffffu);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "out of range"));
    h_begin(3, 0, 1);
    tg_kv_u32(&g_h, "general.alignment", 48);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "not a power of 2"));
    h_begin(3, 0, 2);
    tg_kv_str(&g_h, "general.architecture", "llama");
    tg_kv_u32(&g_h, "llama.block_count", 513);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    h_begin(3, 0, 1);
    tg_arr_head(&g_h, "llama.attention.head_count_kv", TG_T_UINT32, 513);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "per-layer values"));
    /* limits from the desc */
    {
        rsd_gguf_desc d;
        memset(&d, 0, sizeof d);
        d.tensors = g_tb;
        d.max_tensors = 2;
        h_begin(3, 3, 0);
        CHECK_EQ_INT(h_read(&g, &d), RSD_ERR_CAPACITY);
        CHECK(h_msg(&g, "3 tensors; the desc holds 2"));
        memset(&d, 0, sizeof d);
        d.max_header_bytes = 100;
        h_begin(3, 0, 1);
        tg_kv_str(&g_h, "general.name", "0123456789012345678901234567890123456789012345678901234567890123456789");
        CHECK_EQ_INT(h_read(&g, &d), RSD_ERR_TOO_LARGE);
    }
    (void)ne;
}

static void test_hostile_tensors(void) {
    static rsd_gguf g;
    uint64_t ne[5] = {64, 4, 1, 1, 1};
    char name[80];
    h_begin(3, 1, 0);
    h_tensor("a", 5, ne, 0, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "tensor a has 5 dims"));
    memset(name, 'n', 64);
    name[64] = '\0';
    h_begin(3, 1, 0);
    h_tensor(name, 2, ne, 0, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "name is 64 bytes"));
    name[63] = '\0'; /* 63 bytes: the longest */
    h_begin(3, 1, 0);
    h_tensor(name, 2, ne, 0, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_OK);
    /* sizes that overflow */
    ne[0] = (uint64_t)1 << 40;
    ne[1] = (uint64_t)1 << 40;
    h_begin(3, 1, 0);
    h_tensor("big", 2, ne, 0, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_OVERFLOW);
    CHECK(h_msg(&g, "tensor big's size overflows"));
    ne[0] = UINT64_MAX;
    h_begin(3, 1, 0);
    h_tensor("neg", 1, ne, 0, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "negative dim"));
    ne[0] = (uint64_t)INT64_MAX - 31; /* a multiple of 32: 2^58 blocks of 34 bytes overflow */
    h_begin(3, 1, 0);
    h_tensor("q", 1, ne, 8, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_OVERFLOW);
    /* two tensors whose padded sizes overflow the weight area */
    ne[0] = (uint64_t)1 << 62;
    h_begin(3, 3, 0);
    h_tensor("t0", 1, ne, 0 + 24, 0); /* i8: 2^62 bytes */
    h_tensor("t1", 1, ne, 24, (uint64_t)1 << 62);
    h_tensor("t2", 1, ne, 24, (uint64_t)1 << 63);
    h_tensor("t3", 1, ne, 24, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_OVERFLOW);
    /* unknown type, removed type, partial block, wrong offset */
    ne[0] = 64;
    h_begin(3, 1, 0);
    h_tensor("u", 2, ne, 99, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF_TYPE);
    CHECK(h_msg(&g, "unknown ggml type 99"));
    h_begin(3, 1, 0);
    h_tensor("u", 2, ne, 4, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF_TYPE);
    ne[0] = 33;
    h_begin(3, 1, 0);
    h_tensor("p", 2, ne, 8, 0);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "not a multiple of its block"));
    ne[0] = 64;
    ne[1] = 4;
    h_begin(3, 2, 0);
    h_tensor("a", 2, ne, 0, 0);
    h_tensor("b", 2, ne, 0, 1000);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_ERR_GGUF);
    CHECK(h_msg(&g, "tensor b has offset 1000, expected 1024"));
    /* q8_0 and q4_K sizes, offsets aligned to 32 */
    ne[0] = 256;
    ne[1] = 3;
    h_begin(3, 3, 0);
    h_tensor("blk.7.x", 2, ne, 8, 0);   /* 8 blocks x 34 x 3 = 816 */
    h_tensor("blk.7.y", 2, ne, 12, 832); /* 1 x 144 x 3 = 432 */
    h_tensor("output.weight", 1, ne, 30, 1280); /* bf16: 512 */
    CHECK_EQ_INT(h_read(&g, NULL), RSD_OK);
    CHECK_EQ_INT(g.info.layer_bytes[7], 816 + 432);
    CHECK_EQ_INT(g.info.output_bytes, 512);
    CHECK_EQ_INT(g.info.data_bytes, 1280 + 512);
    CHECK_EQ_INT(g.info.tensor_bytes, 816 + 432 + 512);
}

static void test_metadata_fields(void) {
    static rsd_gguf g;
    uint32_t i;
    /* per-layer KV heads, keys of another prefix ignored, MoE and SWA fields, a pattern */
    h_begin(3, 0, 12);
    tg_kv_u32(&g_h, "gemma3.block_count", 7);          /* before the architecture */
    tg_kv_str(&g_h, "general.architecture", "gemma3");
    tg_kv_u32(&g_h, "clip.block_count", 99);           /* another prefix: not this model's */
    tg_kv_u32(&g_h, "gemma3.embedding_length", 640);
    tg_arr_head(&g_h, "gemma3.attention.head_count_kv", TG_T_INT32, 7);
    for (i = 0; i < 7; i++) tg_u32(&g_h, i == 3 ? 0 : 2);
    tg_kv_u32(&g_h, "gemma3.attention.head_count", 4);
    tg_kv_u32(&g_h, "gemma3.attention.key_length", 256);
    tg_kv_u32(&g_h, "gemma3.attention.sliding_window", 512);
    tg_kv_u32(&g_h, "gemma3.expert_count", 8);
    tg_kv_u32(&g_h, "gemma3.expert_used_count", 2);
    tg_kv_u32(&g_h, "gemma3.vocab_size", 1000);
    tg_arr_head(&g_h, "tokenizer.ggml.tokens", TG_T_STRING, 3);
    tg_str(&g_h, "a");
    tg_str(&g_h, "");
    tg_str(&g_h, "ccc");
    CHECK_EQ_INT(h_read(&g, NULL), RSD_OK);
    CHECK_EQ_STR(g.info.architecture, "gemma3");
    CHECK_EQ_INT(g.info.block_count, 7);
    CHECK_EQ_INT(g.info.embedding_length, 640);
    CHECK_EQ_INT(g.info.head_count_kv, 2);
    CHECK_EQ_INT(g.info.head_count_kv_layer[3], 0);
    CHECK_EQ_INT(g.info.head_count_kv_layer[6], 2);
    CHECK_EQ_INT(g.info.head_count_layer[6], 4);
    CHECK_EQ_INT(g.info.key_length, 256);
    CHECK_EQ_INT(g.info.expert_count, 8);
    CHECK_EQ_INT(g.info.expert_used_count, 2);
    CHECK_EQ_INT(g.info.vocab_size, 3); /* the tokens array wins */
    CHECK_EQ_INT(g.info.sliding_window, 512);
    /* gemma3's default period 6: layers 5 (and 11...) are global */
    for (i = 0; i < 7; i++) CHECK_EQ_INT(g.info.swa_layer[i], i % 6 < 5);
    CHECK_EQ_INT(g.info.file_type, UINT32_MAX);
    /* a pattern given as a period, and as a bool array; without sliding_window none */
    h_begin(3, 0, 4);
    tg_kv_str(&g_h, "general.architecture", "x");
    tg_kv_u32(&g_h, "x.block_count", 4);
    tg_kv_u32(&g_h, "x.attention.sliding_window", 128);
    tg_kv_u32(&g_h, "x.attention.sliding_window_pattern", 2);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_OK);
    CHECK(g.info.swa_layer[0] == 1 && g.info.swa_layer[1] == 0 && g.info.swa_layer[2] == 1 && g.info.swa_layer[3] == 0);
    h_begin(3, 0, 4);
    tg_kv_str(&g_h, "general.architecture", "x");
    tg_kv_u32(&g_h, "x.block_count", 3);
    tg_kv_u32(&g_h, "x.attention.sliding_window", 128);
    tg_arr_head(&g_h, "x.attention.sliding_window_pattern", TG_T_BOOL, 3);
    tg_put(&g_h, "\0\1\1", 3);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_OK);
    CHECK(g.info.swa_layer[0] == 0 && g.info.swa_layer[1] == 1 && g.info.swa_layer[2] == 1);
    h_begin(3, 0, 3);
    tg_kv_str(&g_h, "general.architecture", "x");
    tg_kv_u32(&g_h, "x.block_count", 3);
    tg_kv_u32(&g_h, "x.attention.sliding_window_pattern", 2);
    CHECK_EQ_INT(h_read(&g, NULL), RSD_OK);
    CHECK(g.info.swa_layer[0] == 0);
}

static void test_types(void) {
    uint32_t bb = 0;
    CHECK_EQ_INT(rsd_ggml_type_block(8, &bb), 32);
    CHECK_EQ_INT(bb, 34);
    CHECK_EQ_INT(rsd_ggml_type_block(12, &bb), 256);
    CHECK_EQ_INT(bb, 144);
    CHECK_EQ_INT(rsd_ggml_type_block(14, &bb), 256);
    CHECK_EQ_INT(bb, 210);
    CHECK_EQ_INT(rsd_ggml_type_block(2, &bb), 32);
    CHECK_EQ_INT(bb, 18);
    CHECK_EQ_INT(rsd_ggml_type_block(30, &bb), 1);
    CHECK_EQ_INT(bb, 2);
    CHECK_EQ_INT(rsd_ggml_type_block(39, &bb), 32);
    CHECK_EQ_INT(bb, 17);
    CHECK_EQ_INT(rsd_ggml_type_block(4, &bb), 0);
    CHECK_EQ_INT(bb, 0);
    CHECK_EQ_INT(rsd_ggml_type_block(1000, NULL), 0);
    CHECK_EQ_STR(rsd_ggml_type_name(23), "iq4_xs");
    CHECK_EQ_STR(rsd_ggml_type_name(33), "unknown");
    CHECK_EQ_INT(rsd_ggml_type_from_name("q8_0"), 8);
    CHECK_EQ_INT(rsd_ggml_type_from_name("f16"), 1);
    CHECK_EQ_INT(rsd_ggml_type_from_name("iq4_nl"), 20);
    CHECK_EQ_INT(rsd_ggml_type_from_name("unknown"), -1);
    CHECK_EQ_INT(rsd_ggml_type_from_name("q9"), -1);
    CHECK_EQ_INT(rsd_ggml_type_from_name(NULL), -1);
    CHECK_EQ_STR(rsd_result_name(RSD_ERR_GGUF_TYPE), "ERR_GGUF_TYPE");
}

/* The lines a real llama-server printed with -lv 4 (build 10116), and one with devices. */
static void test_log_lines(void) {
    static const char *const cpu[] = {
        "0.00.006.026 I load_tensors:   CPU_Mapped model buffer size =     0.23 MiB",
        "0.00.006.151 I llama_context: n_seq_max     = 4",
        "0.00.006.156 I llama_context: n_ctx         = 1024",
        "0.00.006.161 I llama_context: n_ctx_seq     = 256",
        "0.00.006.166 I llama_context: n_batch       = 1000",
        "0.00.006.170 I llama_context: n_ubatch      = 512",
        "0.00.006.185 I llama_context: kv_unified    = false",
        "0.00.006.219 I llama_context:        CPU  output buffer size =     0.00 MiB",
        "0.00.006.250 I llama_kv_cache:        CPU KV buffer size =     0.25 MiB",
        "0.00.006.352 I llama_kv_cache: size =    0.25 MiB (   256 cells,   1 layers,  4/4 seqs), K (f16):    0.12 MiB",
        "0.00.007.371 I sched_reserve:        CPU compute buffer size =     1.01 MiB",
        "0.00.005.355 I print_info: file size   = 0.23 MiB (32.00 BPW) ",
        "srv    load_model: initializing, n_slots = 4, n_ctx_slot = 256, kv_unified = 'false'"};
    rsd_llama_log lg;
    size_t i;
    int got = 0;
    rsd_llama_log_init(&lg);
    CHECK_EQ_INT(lg.kv_unified, -1);
    for (i = 0; i < sizeof cpu / sizeof cpu[0]; i++) got += rsd_llama_log_line(&lg, cpu[i], strlen(cpu[i]));
    CHECK_EQ_INT(got, 10);
    CHECK_EQ_INT(lg.model, 241172);   /* 0.23 MiB, rounded */
    CHECK_EQ_INT(lg.kv, 262144);
    CHECK_EQ_INT(lg.compute, 1059062);
    CHECK_EQ_INT(lg.output, 0);
    CHECK_EQ_INT(lg.n_ctx, 1024);
    CHECK_EQ_INT(lg.n_ctx_seq, 256);
    CHECK_EQ_INT(lg.n_seq_max, 4);
    CHECK_EQ_INT(lg.n_batch, 1000);
    CHECK_EQ_INT(lg.n_ubatch, 512);
    CHECK_EQ_INT(lg.kv_unified, 0);
    CHECK_EQ_INT(lg.n_devices, 2);
    CHECK_EQ_STR(lg.dev[0].name, "CPU_Mapped");
    CHECK_EQ_STR(lg.dev[1].name, "CPU");
    CHECK_EQ_INT(lg.dev[1].kv, 262144);
    CHECK_EQ_INT(lg.dev[1].compute, 1059062);
    /* a GPU start: a device each; not a figure: no MiB, no '=', a number cut short */
    rsd_llama_log_init(&lg);
    CHECK_EQ_INT(rsd_llama_log_line(&lg, "load_tensors:        CUDA0 model buffer size =  1024.00 MiB", 59), 1);
    CHECK_EQ_INT(rsd_llama_log_line(&lg, "load_tensors:        CUDA0 model buffer size =  2.5 GiB", 55), 0);
    CHECK_EQ_INT(rsd_llama_log_line(&lg, "sched_reserve:  CUDA_Host compute buffer size =    11.76 MiB", 60), 1);
    CHECK_EQ_INT(rsd_llama_log_line(&lg, "x KV buffer size 5 MiB", 22), 0);
    CHECK_EQ_INT(rsd_llama_log_line(&lg, "llama_kv_cache: CUDA0 KV buffer size =", 38), 0);
    CHECK_EQ_INT(rsd_llama_log_line(&lg, "llama_context: kv_unified    = true", 35), 1);
    CHECK_EQ_INT(lg.model, 1024ull << 20);
    CHECK_EQ_INT(lg.dev[0].model, 1024ull << 20);
    CHECK_EQ_STR(lg.dev[1].name, "CUDA_Host");
    CHECK_EQ_INT(lg.kv_unified, 1);
    /* more devices than the limit: the sums still count them */
    for (i = 0; i < RSD_GGUF_MAX_DEVICES + 2; i++) {
        char l[80];
        int n = snprintf(l, sizeof l, "x: D%u model buffer size = 1.00 MiB", (unsigned)i);
        (void)rsd_llama_log_line(&lg, l, (size_t)n);
    }
    CHECK_EQ_INT(lg.n_devices, RSD_GGUF_MAX_DEVICES);
    CHECK_EQ_INT(lg.model, (1024ull << 20) + (RSD_GGUF_MAX_DEVICES + 2) * (1ull << 20));
}

/* f16 bits -> float */
static float half_f(uint16_t h) {
    uint32_t e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? (float)m / 1024.0f / 16384.0f : (1.0f + (float)m / 1024.0f) * (e >= 15 ? (float)(1u << (e - 15)) : 1.0f / (float)(1u << (15 - e)));
    return h & 0x8000 ? -v : v;
}

/* Row r of a [n, rows] tensor of type t at p, as floats. */
static void dequant_row(const unsigned char *p, uint32_t t, uint64_t n, uint64_t r, float *out) {
    uint64_t i, j;
    if (t == TG_F32) { /* little-endian in the file, whatever the host */
        for (i = 0; i < n; i++) {
            const unsigned char *q = p + (r * n + i) * 4;
            uint32_t u = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
            memcpy(&out[i], &u, 4);
        }
        return;
    }
    if (t == TG_F16) { for (i = 0; i < n; i++) out[i] = half_f((uint16_t)(p[(r * n + i) * 2] | p[(r * n + i) * 2 + 1] << 8)); return; }
    for (i = 0; i < n / 32; i++) {
        const unsigned char *b = p + r * (n / 32) * (t == TG_Q8_0 ? 34 : 18) + i * (t == TG_Q8_0 ? 34 : 18);
        float d = half_f((uint16_t)(b[0] | b[1] << 8));
        for (j = 0; j < 32; j++)
            out[i * 32 + j] = t == TG_Q8_0 ? d * (float)(int8_t)b[2 + j]
                                           : d * (float)((j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4)) - 8);
    }
}

/* The written rows (no server): the byte tokens <0x80>..<0xFF> (ids 131..258) have
   all-zero embedding and output rows, so their logit is exactly 0; every other row is
   paired with its negation, so for any hidden state at least half of the other tokens
   have a logit above 0 and the default top_k of 40 never reaches a zero logit. Checked
   for each weight type, tied and untied, and on random hidden states. */
static void test_byte_token_rows(void) {
    static const uint32_t types[4] = {TG_F32, TG_F16, TG_Q8_0, TG_Q4_0};
    char path[400];
    int k;
    for (k = 0; k < 5; k++) {
        tg_shape sh;
        rsd_gguf_desc d;
        size_t n = 0;
        unsigned char *b;
        uint32_t ti, wt = k < 4 ? types[k] : TG_F32;
        memset(&sh, 0, sizeof sh);
        sh.name = "rows";
        sh.layers = 2;
        sh.embd = 64;
        sh.heads = 4;
        sh.heads_kv = 2;
        sh.ff = 96;
        sh.vocab = k == 4 ? 0 : 400;
        sh.wtype = wt;
        sh.ctx = 256;
        sh.untied = k == 1 || k == 3;
        snprintf(path, sizeof path, "%s/rows%d.gguf", g_dir, k);
        if (k == 4) REQUIRE(tiny_gguf_write(path, "tiny-r", 3, 2048, 0) == 0); /* the default model */
        else REQUIRE(tiny_gguf_write_shape(path, &sh, 11 + (uint64_t)k) == 0);
        memset(&d, 0, sizeof d);
        d.tensors = g_ta;
        d.max_tensors = 64;
        rsd_gguf_init(&g_a, &d);
        REQUIRE(rsd_gguf_read_file(&g_a, path) == RSD_OK);
        b = slurp(path, &n);
        REQUIRE(b != NULL);
        CHECK_EQ_INT(g_a.info.data_offset + g_a.info.data_bytes + (32 - g_a.info.data_bytes % 32) % 32, n);
        for (ti = 0; ti < g_a.info.n_tensors; ti++) {
            const rsd_gguf_tensor *t = &g_ta[ti];
            uint64_t r, nv = t->ne[1], pos = 0, zero = 0, pairs_bad = 0, probe, nz = 0, few = 0;
            static float rows[1200][64];
            if (strcmp(t->name, "token_embd.weight") != 0 && strcmp(t->name, "output.weight") != 0) continue;
            REQUIRE(t->ne[0] == 64 && nv <= 1200 && t->type == wt);
            for (r = 0; r < nv; r++) dequant_row(b + g_a.info.data_offset + t->offset, wt, 64, r, rows[r]);
            for (r = 3 + 0x80; r < 3 + 0x100; r++) {
                int j;
                for (j = 0; j < 64; j++) zero += rows[r][j] != 0.0f;
            }
            CHECK_EQ_INT(zero, 0);
            { /* the other rows in pairs: (0,1) .. (128,129), (130,259), (260,261) ... */
                uint64_t prev = 0, rank = 0;
                for (r = 0; r < nv; r++) {
                    int j;
                    if (r >= 3 + 0x80 && r < 3 + 0x100) continue;
                    if (rank % 2 == 1)
                        for (j = 0; j < 64; j++) pairs_bad += rows[r][j] != -rows[prev][j];
                    else
                        for (j = 0; j < 64; j++) nz += rows[r][j] != 0.0f;
                    prev = r;
                    rank++;
                }
            }
            CHECK_EQ_INT(pairs_bad, 0);
            CHECK(nz > 0);
            /* random hidden states: zero logits stay 0, at least 40 logits are above it */
            {
                uint64_t rs = 99;
                for (probe = 0; probe < 500; probe++) {
                    float h[64];
                    int j;
                    for (j = 0; j < 64; j++) h[j] = tg_rand(&rs, 3.0f);
                    pos = 0;
                    for (r = 0; r < nv; r++) {
                        float l = 0;
                        for (j = 0; j < 64; j++) l += h[j] * rows[r][j];
                        pos += l > 0.0f;
                    }
                    few += pos < 40;
                }
                CHECK_EQ_INT(few, 0);
            }
        }
        free(b);
    }
}

/* The estimate's rules, on a hand-made info (no server; test_real_estimate checks them
   against one): padding, slots, unified cache, no cap at the training context, GQA,
   cache types, sliding-window cells, -ngl, the refusals. */
static void test_estimate_rules(void) {
    rsd_gguf_info in;
    rsd_gguf_start st;
    rsd_gguf_estimate e;
    uint32_t il;
    memset(&in, 0, sizeof in);
    in.block_count = 4;
    in.embedding_length = 256;
    in.head_count = 8;          /* head dim 32 */
    in.head_count_kv = 2;       /* GQA 4: K and V rows of 64 */
    in.feed_forward_length = 512;
    in.context_length = 2048;
    in.vocab_size = 1000;
    in.data_bytes = 5000000;
    in.token_embd_bytes = 1000000;
    for (il = 0; il < 4; il++) {
        in.head_count_layer[il] = 8;
        in.head_count_kv_layer[il] = 2;
        in.feed_forward_layer[il] = 512;
        in.layer_bytes[il] = 1000000;
    }
    memset(&st, 0, sizeof st);
    st.n_ctx = 1000;
    st.n_parallel = 4;          /* -c 1000 -np 4: 4 streams of 256 cells */
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK_EQ_INT(e.n_ctx, 1024);
    CHECK_EQ_INT(e.n_ctx_seq, 256);
    CHECK_EQ_INT(e.n_stream, 4);
    CHECK(!e.kv_unified);
    CHECK_EQ_INT(e.n_batch, 1000);
    CHECK_EQ_INT(e.n_ubatch, 512);
    CHECK_EQ_INT(e.kv, 4ull * (64 * 2 + 64 * 2) * 256 * 4); /* layers x (K + V row) x cells x streams */
    CHECK_EQ_INT(e.model, 5000000);
    CHECK_EQ_INT(e.model_device, 0);
    CHECK_EQ_INT(e.total, e.model + e.kv + e.compute);
    st.n_ctx = 1300;            /* 1536 / 4 = 384, padded to 512: 2048 in all */
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK_EQ_INT(e.n_ctx_seq, 512);
    CHECK_EQ_INT(e.n_ctx, 2048);
    st.n_parallel = 0;          /* auto: 4 slots on one cache, each may use all of it */
    st.n_ctx = 32768;           /* past the training context: not capped */
    st.cache_type_k = "q8_0";
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK(e.kv_unified);
    CHECK_EQ_INT(e.n_seq, 4);
    CHECK_EQ_INT(e.n_ctx_seq, 32768);
    CHECK_EQ_INT(e.n_stream, 1);
    CHECK_EQ_INT(e.kv, 4ull * (68 + 128) * 32768); /* K in q8_0: 2 blocks of 34 */
    st.n_ctx = 0;               /* -c 0: the training context */
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK_EQ_INT(e.n_ctx, 2048);
    st.n_parallel = 2;
    st.kv_unified = 1;          /* -np 2 -kvu */
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK(e.kv_unified && e.n_stream == 1 && e.n_ctx_seq == 2048);
    /* sliding-window layers keep pad256(window x seqs + ubatch) cells, unless --swa-full */
    in.sliding_window = 100;
    in.swa_layer[0] = in.swa_layer[1] = in.swa_layer[2] = 1;
    st.n_parallel = 0;
    st.kv_unified = 0;
    st.cache_type_k = NULL;
    st.n_ctx = 8192;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK_EQ_INT(e.kv_cells_swa, 1024); /* 100 x 4 + 512 = 912 -> 1024 */
    CHECK_EQ_INT(e.kv, 3ull * 256 * 1024 + 256ull * 8192);
    st.swa_full = true;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK_EQ_INT(e.kv, 4ull * 256 * 8192);
    st.swa_full = false;
    { /* the clamp's figure: a token's KV with every layer at every cell (an upper bound
         for the sliding-window ones), and one stream for a unified cache, 3 for -np 3 */
        uint64_t per = 0;
        uint32_t ns = 0;
        CHECK_EQ_INT(rsd_gguf_kv_per_token(&in, &st, &per, &ns), RSD_OK);
        CHECK_EQ_INT(per, 4ull * 256);
        CHECK_EQ_INT(ns, 1);
        st.n_parallel = 3;
        st.cache_type_v = "q8_0"; /* V rows of 64 in q8_0: 2 blocks of 34 */
        CHECK_EQ_INT(rsd_gguf_kv_per_token(&in, &st, &per, &ns), RSD_OK);
        CHECK_EQ_INT(per, 4ull * (128 + 68));
        CHECK_EQ_INT(ns, 3);
        CHECK_EQ_INT(rsd_gguf_kv_per_token(&in, &st, &per, NULL), RSD_OK);
        CHECK_EQ_INT(rsd_gguf_kv_per_token(NULL, &st, &per, NULL), RSD_ERR_ARG);
        st.cache_type_v = "q9";
        CHECK_EQ_INT(rsd_gguf_kv_per_token(&in, &st, &per, NULL), RSD_ERR_ARG);
        st.cache_type_v = NULL;
        st.n_parallel = 0;
    }
    in.sliding_window = 0;
    memset(in.swa_layer, 0, sizeof in.swa_layer);
    /* -ngl: the last layers on the device; all of them and the tied output's copy */
    st.n_gpu_layers = 2;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK_EQ_INT(e.model_device, 2000000);
    CHECK_EQ_INT(e.kv_device, e.kv / 2);
    st.n_gpu_layers = -1;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK_EQ_INT(e.model_device, 5000000);
    CHECK_EQ_INT(e.model, 6000000);
    CHECK_EQ_INT(e.kv_device, e.kv);
    /* 0 and RSD_GGUF_NGL_NONE: none on the device */
    st.n_gpu_layers = RSD_GGUF_NGL_NONE;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK(e.model_device == 0 && e.kv_device == 0);
    st.n_gpu_layers = 0;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_OK);
    CHECK(e.model_device == 0 && e.kv_device == 0);
    /* refusals: a cache type whose block does not divide a head, unknown names, no shape */
    in.head_count = in.head_count_layer[0] = in.head_count_layer[1] = in.head_count_layer[2] = in.head_count_layer[3] = 16;
    st.cache_type_v = "q8_0";   /* heads of 16 */
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_ERR_ARG);
    st.cache_type_v = "q9";
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_ERR_ARG);
    st.cache_type_v = NULL;
    st.n_parallel = 257;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_ERR_ARG);
    st.n_parallel = 1;
    in.block_count = 0;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_ERR_ARG);
    /* figures past 2^64 stop at an error */
    in.block_count = 4;
    in.head_count_kv_layer[0] = 0xffffffffu;
    in.key_length = in.value_length = 0xffffffe0u;
    st.n_ctx = 0xffffff00u;
    CHECK_EQ_INT(rsd_gguf_estimate_start(&in, &st, &e), RSD_ERR_OVERFLOW);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    make_state_dir("gguf");
    (void)tiny_gguf_write_set; /* the real-server tests use it */
    RUN(test_types);
    RUN(test_tiny_file);
    RUN(test_hostile_header);
    RUN(test_hostile_tensors);
    RUN(test_metadata_fields);
    RUN(test_log_lines);
    RUN(test_estimate_rules);
    RUN(test_byte_token_rows);
    free(g_h.p);
    remove_state_dir();
    return RSD_TEST_END();
}
