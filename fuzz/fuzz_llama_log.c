/* Fuzz the llama-server log reader (rsd_llama_log_line): the input is split into lines
   at '\n' and each is read. Invariants: a line gives 1, 0 or RSD_ERR_CAPACITY; the sums
   are the devices' sums (plus what a device past the limit reported); device names are
   NUL-terminated and never empty; a line that gave nothing changes nothing. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rsd_llama_log lg, before;
    size_t at = 0;
    uint64_t lost = 0;
    rsd_llama_log_init(&lg);
    while (at <= size) {
        const char *s = (const char *)data + at;
        size_t n = 0, d;
        char *line;
        int r;
        uint64_t m = 0, k = 0, c = 0, o = 0;
        while (at + n < size && s[n] != '\n') n++;
        line = (char *)malloc(n ? n : 1); /* exact size: ASan sees a read past the line */
        if (!line) abort();
        memcpy(line, s, n);
        before = lg;
        r = rsd_llama_log_line(&lg, line, n);
        free(line);
        FZ_CHECK(r == 0 || r == 1 || r == RSD_ERR_CAPACITY);
        if (r == 0) FZ_CHECK(memcmp(&before, &lg, sizeof lg) == 0);
        if (r == RSD_ERR_CAPACITY) lost += (lg.model - before.model) + (lg.kv - before.kv) + (lg.compute - before.compute) + (lg.output - before.output);
        FZ_CHECK(lg.n_devices <= RSD_GGUF_MAX_DEVICES);
        for (d = 0; d < lg.n_devices; d++) {
            FZ_CHECK(lg.dev[d].name[0] && memchr(lg.dev[d].name, 0, sizeof lg.dev[d].name));
            m += lg.dev[d].model;
            k += lg.dev[d].kv;
            c += lg.dev[d].compute;
            o += lg.dev[d].output;
        }
        FZ_CHECK(m + k + c + o + lost == lg.model + lg.kv + lg.compute + lg.output);
        at += n + 1;
    }
    return 0;
}
