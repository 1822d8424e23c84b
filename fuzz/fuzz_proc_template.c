/* Fuzz rsd_procs_expand (argv templates of the process supervisor). The input is
   split at '\n' into: template elements up to an empty line, then extra args up to
   the next empty line, then values for model, alias, ngl and var "v". Invariants:
   only the documented results; on success every argv entry lies inside buf, argv
   is NULL-terminated, argv[0] is the exe; the same input expands identically into
   a larger buffer; a smaller buffer or argv cap gives RSD_ERR_CAPACITY or the same
   answer, never a crash; no placeholder braces survive unless escaped. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

enum { FZ_MAX = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text, *parts[3 * FZ_MAX], *q;
    const char *tmpl[FZ_MAX + 1], *extra[FZ_MAX + 1], *argv[FZ_MAX + 2], *argv2[FZ_MAX + 2];
    char buf[512], big[4096], small[64];
    int np = 0, i, k, nt = 0, ne = 0, r, r2;
    rsd_proc_spec s;
    rsd_proc_var var;
    if (size > 2048) return 0;
    text = (char *)malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = '\0';
    for (q = text; np < 3 * FZ_MAX;) {  /* NULs inside the input end an element early */
        parts[np++] = q;
        q = strchr(q, '\n');
        if (!q) break;
        *q++ = '\0';
    }
    i = 0;
    while (i < np && parts[i][0] && nt < FZ_MAX) tmpl[nt++] = parts[i++];
    tmpl[nt] = NULL;
    i++;
    while (i < np && parts[i][0] && ne < FZ_MAX) extra[ne++] = parts[i++];
    extra[ne] = NULL;
    i++;
    memset(&s, 0, sizeof s);
    s.exe = "srv";
    s.args = tmpl;
    s.extra = extra;
    s.model = i < np ? parts[i++] : NULL;
    s.alias = i < np ? parts[i++] : NULL;
    s.ngl = i < np ? parts[i++] : NULL;
    var.name = "v";
    var.value = i < np ? parts[i++] : NULL;
    s.vars = &var;
    s.num_vars = 1;
    s.port = (uint16_t)(size * 7919u);
    s.ctx = (int64_t)size - 100;
    s.parallel = (int)(size % 5) - 1;
    r = rsd_procs_expand(&s, buf, sizeof buf, argv, FZ_MAX + 2);
    FZ_CHECK(r == RSD_ERR_PROC_TEMPLATE || r == RSD_ERR_CAPACITY || r >= 1);
    r2 = rsd_procs_expand(&s, big, sizeof big, argv2, FZ_MAX + 2);
    if (r >= 1) {
        FZ_CHECK(r2 == r);
        FZ_CHECK(argv[r] == NULL);
        FZ_CHECK(strcmp(argv[0], "srv") == 0);
        for (k = 0; k < r; k++) {
            FZ_CHECK(argv[k] >= buf && argv[k] + strlen(argv[k]) < buf + sizeof buf);
            FZ_CHECK(strcmp(argv[k], argv2[k]) == 0);
        }
    } else if (r == RSD_ERR_PROC_TEMPLATE) {
        FZ_CHECK(r2 == RSD_ERR_PROC_TEMPLATE || r2 == RSD_ERR_CAPACITY);
    }
    r2 = rsd_procs_expand(&s, small, sizeof small, argv2, 4);
    FZ_CHECK(r2 == RSD_ERR_PROC_TEMPLATE || r2 == RSD_ERR_CAPACITY || (r2 >= 1 && r2 <= 3));
    if (r2 >= 1) FZ_CHECK(r2 == r);
    free(text);
    return 0;
}
