/* tiny_gguf.h -- tiny random-weight llama GGUF v3 files for the real-server tests, so
   they need nothing but a C compiler (the same model shape as
   ../shared/tools/make_tiny_gguf.py, other random values).

   Model: architecture llama, 1 block, n_embd 64, 4 heads (head dim 16), n_ff 128, all
   F32, tied output (no output.weight). Vocab: SPM ("llama"): <unk> <s> </s> (control),
   the 256 byte tokens <0x00>..<0xFF>, then a few normal pieces; a plain chat template.
   About 240 KB; llama-server loads one in milliseconds and answers chat with garbage.

       tiny_gguf_write(path, "tiny-a", seed, ctx, 0)   a model that loads
       tiny_gguf_write(path, "broken", seed, ctx, 1)   a valid header whose tensor data
                                                        stops half-way: the load fails
                                                        ("data is not within the file
                                                        bounds")
       tiny_gguf_write_set(dir)                         tiny-a..tiny-e.gguf (ctx 2048) and
                                                        broken.gguf into an existing dir
   Returns 0, or -1 (errno set by stdio). Needs <stdio.h> <stdint.h> <string.h>
   <stdlib.h>. The files are the same bytes on every host (GGUF is little-endian; a
   big-endian host writes them so too). */
#ifndef RSD_TESTS_TINY_GGUF_H
#define RSD_TESTS_TINY_GGUF_H

enum { TG_EMBD = 64, TG_HEAD = 4, TG_FF = 128, TG_ALIGN = 32, TG_NPIECES = 30 };
enum { TG_T_UINT32 = 4, TG_T_INT32 = 5, TG_T_FLOAT32 = 6, TG_T_BOOL = 7, TG_T_STRING = 8,
       TG_T_ARRAY = 9 };

static const char *const tg_pieces[TG_NPIECES] = {
    "\xe2\x96\x81", "\xe2\x96\x81the", "\xe2\x96\x81" "a", "\xe2\x96\x81hello",
    "\xe2\x96\x81world", "\xe2\x96\x81is", "\xe2\x96\x81of", "\xe2\x96\x81" "and", "e", "t", "a",
    "o", "i", "n", "s", "r", "h", "l", "d", "u", "\xe2\x96\x81I", "\xe2\x96\x81you", "ing", "er",
    "\xe2\x96\x81to", "\xe2\x96\x81in", "!", ".", ",", "?"};

/* A growable byte buffer; tg_buf.bad sticks once an allocation fails. */
typedef struct tg_buf { unsigned char *p; size_t len, cap; int bad; } tg_buf;

static void tg_put(tg_buf *b, const void *src, size_t n) {
    if (b->bad) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        unsigned char *np;
        while (cap < b->len + n) cap *= 2;
        np = (unsigned char *)realloc(b->p, cap);
        if (!np) { b->bad = 1; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}
/* GGUF is little-endian: integers go out byte by byte, whatever the host's order. */
static void tg_le(tg_buf *b, uint64_t v, size_t n) {
    unsigned char le[8];
    size_t i;
    for (i = 0; i < n; i++) le[i] = (unsigned char)(v >> (8 * i));
    tg_put(b, le, n);
}
static void tg_u32(tg_buf *b, uint32_t v) { tg_le(b, v, 4); }
static void tg_u64(tg_buf *b, uint64_t v) { tg_le(b, v, 8); }
static void tg_f32(tg_buf *b, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    tg_le(b, u, 4);
}
static void tg_str(tg_buf *b, const char *s) { tg_u64(b, strlen(s)); tg_put(b, s, strlen(s)); }
static void tg_pad(tg_buf *b) {
    static const unsigned char zero[TG_ALIGN] = {0};
    tg_put(b, zero, (TG_ALIGN - b->len % TG_ALIGN) % TG_ALIGN);
}
static void tg_kv_str(tg_buf *b, const char *k, const char *v) { tg_str(b, k); tg_u32(b, TG_T_STRING); tg_str(b, v); }
static void tg_kv_u32(tg_buf *b, const char *k, uint32_t v) { tg_str(b, k); tg_u32(b, TG_T_UINT32); tg_u32(b, v); }
static void tg_kv_f32(tg_buf *b, const char *k, float v) { tg_str(b, k); tg_u32(b, TG_T_FLOAT32); tg_f32(b, v); }
static void tg_kv_bool(tg_buf *b, const char *k, int v) {
    unsigned char c = (unsigned char)(v != 0);
    tg_str(b, k); tg_u32(b, TG_T_BOOL); tg_put(b, &c, 1);
}
static void tg_arr_head(tg_buf *b, const char *k, uint32_t etype, uint64_t n) {
    tg_str(b, k); tg_u32(b, TG_T_ARRAY); tg_u32(b, etype); tg_u64(b, n);
}

/* xorshift64*: uniform in [-scale, scale]; the values only have to be finite. */
static float tg_rand(uint64_t *s, float scale) {
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return scale * (2.0f * (float)((x * 2685821657736338717ull) >> 40) / 16777216.0f - 1.0f);
}

typedef struct tg_tensor { const char *name; uint32_t nd; uint64_t ne[2]; float fill; float scale; } tg_tensor;

static int tiny_gguf_write(const char *path, const char *name, uint64_t seed, uint32_t ctx, int broken) {
    enum { NV = 3 + 256 + TG_NPIECES };
    tg_tensor t[11];
    tg_buf head = {0, 0, 0, 0}, data = {0, 0, 0, 0};
    char nm[64];
    uint64_t off = 0, rs = seed * 0x9E3779B97F4A7C15ull + 1;
    size_t i, j, keep;
    int nt = 0, rc = -1;
    FILE *f;
#define TG_T(nm_, nd_, a_, b_, fill_, scale_) \
    (t[nt].name = (nm_), t[nt].nd = (nd_), t[nt].ne[0] = (a_), t[nt].ne[1] = (b_), \
     t[nt].fill = (fill_), t[nt].scale = (scale_), nt++)
    TG_T("token_embd.weight", 2, TG_EMBD, NV, 0, 0.5f);
    TG_T("output_norm.weight", 1, TG_EMBD, 1, 1, 0);
    TG_T("blk.0.attn_norm.weight", 1, TG_EMBD, 1, 1, 0);
    TG_T("blk.0.attn_q.weight", 2, TG_EMBD, TG_EMBD, 0, 0.08f);
    TG_T("blk.0.attn_k.weight", 2, TG_EMBD, TG_EMBD, 0, 0.08f);
    TG_T("blk.0.attn_v.weight", 2, TG_EMBD, TG_EMBD, 0, 0.08f);
    TG_T("blk.0.attn_output.weight", 2, TG_EMBD, TG_EMBD, 0, 0.08f);
    TG_T("blk.0.ffn_norm.weight", 1, TG_EMBD, 1, 1, 0);
    TG_T("blk.0.ffn_gate.weight", 2, TG_EMBD, TG_FF, 0, 0.08f);
    TG_T("blk.0.ffn_up.weight", 2, TG_EMBD, TG_FF, 0, 0.08f);
    TG_T("blk.0.ffn_down.weight", 2, TG_FF, TG_EMBD, 0, 0.08f);
#undef TG_T

    tg_put(&head, "GGUF", 4);
    tg_u32(&head, 3);
    tg_u64(&head, (uint64_t)nt);
    tg_u64(&head, 24); /* key-value pairs below */
    tg_kv_str(&head, "general.architecture", "llama");
    tg_kv_str(&head, "general.name", name);
    tg_kv_u32(&head, "general.file_type", 0);
    tg_kv_u32(&head, "general.alignment", TG_ALIGN);
    tg_kv_u32(&head, "llama.context_length", ctx);
    tg_kv_u32(&head, "llama.embedding_length", TG_EMBD);
    tg_kv_u32(&head, "llama.block_count", 1);
    tg_kv_u32(&head, "llama.feed_forward_length", TG_FF);
    tg_kv_u32(&head, "llama.attention.head_count", TG_HEAD);
    tg_kv_u32(&head, "llama.attention.head_count_kv", TG_HEAD);
    tg_kv_f32(&head, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    tg_kv_u32(&head, "llama.rope.dimension_count", TG_EMBD / TG_HEAD);
    tg_kv_f32(&head, "llama.rope.freq_base", 10000.0f);
    tg_kv_u32(&head, "llama.vocab_size", NV);
    tg_kv_str(&head, "tokenizer.ggml.model", "llama");
    tg_arr_head(&head, "tokenizer.ggml.tokens", TG_T_STRING, NV);
    tg_str(&head, "<unk>");
    tg_str(&head, "<s>");
    tg_str(&head, "</s>");
    for (i = 0; i < 256; i++) { snprintf(nm, sizeof nm, "<0x%02X>", (unsigned)i); tg_str(&head, nm); }
    for (i = 0; i < TG_NPIECES; i++) tg_str(&head, tg_pieces[i]);
    tg_arr_head(&head, "tokenizer.ggml.scores", TG_T_FLOAT32, NV);
    for (i = 0; i < 3 + 256; i++) tg_f32(&head, 0.0f);
    for (i = 0; i < TG_NPIECES; i++) tg_f32(&head, -1.0f - (float)i * 0.01f); /* SPM prefers higher */
    tg_arr_head(&head, "tokenizer.ggml.token_type", TG_T_INT32, NV);
    tg_u32(&head, 2); /* unknown */
    tg_u32(&head, 3); /* control */
    tg_u32(&head, 3);
    for (i = 0; i < 256; i++) tg_u32(&head, 6); /* byte */
    for (i = 0; i < TG_NPIECES; i++) tg_u32(&head, 1); /* normal */
    tg_kv_u32(&head, "tokenizer.ggml.bos_token_id", 1);
    tg_kv_u32(&head, "tokenizer.ggml.eos_token_id", 2);
    tg_kv_u32(&head, "tokenizer.ggml.unknown_token_id", 0);
    tg_kv_bool(&head, "tokenizer.ggml.add_bos_token", 1);
    tg_kv_bool(&head, "tokenizer.ggml.add_eos_token", 0);
    tg_kv_str(&head, "tokenizer.chat_template",
              "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
              "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}");

    for (i = 0; i < (size_t)nt; i++) {
        uint64_t n = t[i].ne[0] * (t[i].nd > 1 ? t[i].ne[1] : 1);
        tg_str(&head, t[i].name);
        tg_u32(&head, t[i].nd);
        for (j = 0; j < t[i].nd; j++) tg_u64(&head, t[i].ne[j]);
        tg_u32(&head, 0); /* GGML_TYPE_F32 */
        tg_u64(&head, off);
        for (j = 0; j < n; j++) tg_f32(&data, t[i].scale > 0 ? tg_rand(&rs, t[i].scale) : t[i].fill);
        tg_pad(&data);
        off = data.len;
    }
    tg_pad(&head);
    keep = broken ? data.len / 2 : data.len;
    if (!head.bad && !data.bad && (f = fopen(path, "wb")) != NULL) {
        if (fwrite(head.p, 1, head.len, f) == head.len && fwrite(data.p, 1, keep, f) == keep) rc = 0;
        if (fclose(f) != 0) rc = -1;
    }
    free(head.p);
    free(data.p);
    return rc;
}

/* The standard set: tiny-a..tiny-e.gguf (ctx 2048, each its own seed) and broken.gguf,
   written into the existing directory dir. 0, or -1. */
static int tiny_gguf_write_set(const char *dir) {
    static const char *const names[] = {"tiny-a", "tiny-b", "tiny-c", "tiny-d", "tiny-e", "broken"};
    char path[1200];
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s.gguf", dir, names[i]) >= sizeof path) return -1;
        if (tiny_gguf_write(path, names[i], 1000 + i * 7919, 2048, i == 5) != 0) return -1;
    }
    return 0;
}
#endif
