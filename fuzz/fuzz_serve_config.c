/* libFuzzer target for rsd-serve's configuration parser and request-body scan
   (apps/rsd-serve/rsd_serve.h).
   Build: make fuzz T=serve_config FUZZ_SECS=60
   Input: the whole input is an INI config file, and also a request body.
   Invariants (abort on violation):
   - rsrv_parse_ini either succeeds or writes "config:LINE: message" with LINE in
     1..(number of lines + 1);
   - a parsed config has 1..16 max_models, every model an id and a model or command,
     ids and aliases unique across models, every args/command/llama_server splittable;
   - round trip: rsrv_write_ini of a parsed config parses again to an equal config;
   - rsrv_body_model never reads out of bounds, and on valid JSON agrees with
     rsd_json_parse and the root's last "model" member. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
#include "../apps/rsd-serve/rsd_serve.h"
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(c) do { if (!(c)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

enum { FZ_INI = 1 << 20, FZ_TOKS = 1 << 16 };

static void fz_check_config(const rsrv_config *c) {
    int i, j, k;
    char buf[RSRV_CMD_MAX];
    const char *argv[RSRV_MAX_ARGS + 1];
    FZ_CHECK(c->max_models >= 1 && c->max_models <= RSRV_MAX_SLOTS);
    FZ_CHECK(c->nmodels >= 0 && c->nmodels <= RSRV_MAX_MODELS);
    FZ_CHECK(c->listen_port >= 0 && c->listen_port <= 65535);
    FZ_CHECK(rsrv_split(c->args, buf, sizeof buf, argv, RSRV_MAX_ARGS + 1) >= 0);
    FZ_CHECK(rsrv_split(c->llama_server, buf, sizeof buf, argv, RSRV_MAX_ARGS + 1) > 0); /* a program, words after it */
    for (i = 0; i < c->nmodels; i++) {
        const rsrv_model *m = &c->models[i];
        FZ_CHECK(rsrv_name_ok(m->id, strlen(m->id)));
        FZ_CHECK(m->model[0] || m->command[0]);
        FZ_CHECK(rsrv_find(c, m->id, strlen(m->id)) == i);
        for (k = 0; k < m->naliases; k++) FZ_CHECK(rsrv_find(c, m->aliases[k], strlen(m->aliases[k])) == i);
        FZ_CHECK(rsrv_split(m->args, buf, sizeof buf, argv, RSRV_MAX_ARGS + 1) >= 0);
        if (m->command[0]) FZ_CHECK(rsrv_split(m->command, buf, sizeof buf, argv, RSRV_MAX_ARGS + 1) > 0);
        for (j = 0; j < i; j++) FZ_CHECK(strcmp(m->id, c->models[j].id) != 0);
    }
}

static void fz_body(const char *s, size_t n) {
    static rsd_json_tok toks[FZ_TOKS];
    char out[256], want[256];
    size_t len = 0, wlen = 0;
    rsd_json_doc doc;
    int r = rsrv_body_model(s, n, out, sizeof out, &len), t;
    FZ_CHECK(r >= -2 && r <= 1);
    if (r == 1) FZ_CHECK(len < sizeof out && out[len] == 0);
    t = rsd_json_parse(&doc, s, n, toks, FZ_TOKS);
    if (t > 0 && rsd_json_type_of(&doc, 0) == RSD_JSON_OBJECT) {
        int v = -1, k; /* the last "model" member counts (as llama.cpp) */
        for (k = rsd_json_child(&doc, 0); k >= 0; k = rsd_json_next(&doc, k))
            if (rsd_json_str_eq(&doc, k, "model")) v = k + 1;
        if (v < 0 || rsd_json_type_of(&doc, v) != RSD_JSON_STRING) {
            FZ_CHECK(r == 0);
        } else {
            int e = rsd_json_str(&doc, v, want, sizeof want, &wlen);
            if (e == RSD_OK) {
                FZ_CHECK(r == 1 && len == wlen && !memcmp(out, want, len));
            } else {
                FZ_CHECK(r == -2);
            }
        }
    } else if (t > 0) {
        FZ_CHECK(r == -1); /* valid JSON, not an object */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static rsrv_config a, b;
    static char ini[FZ_INI];
    char err[RSRV_ERR_MAX];
    const char *s = (const char *)data;
    int r, lines = 1, line;
    size_t i;
    fz_body(s, size);
    for (i = 0; i < size; i++)
        if (s[i] == '\n') lines++;
    rsrv_config_init(&a);
    err[0] = 0;
    r = rsrv_parse_ini(&a, s, size, "config", err, sizeof err);
    if (r != 0) {
        FZ_CHECK(r == -1);
        FZ_CHECK(!strncmp(err, "config:", 7));
        line = atoi(err + 7);
        FZ_CHECK(line >= 1 && line <= lines);
        FZ_CHECK(strstr(err + 7, ": ") != NULL);
        return 0;
    }
    fz_check_config(&a);
    r = rsrv_write_ini(&a, ini, sizeof ini);
    FZ_CHECK(r > 0 && (size_t)r < sizeof ini);
    rsrv_config_init(&b);
    if (rsrv_parse_ini(&b, ini, (size_t)r, "rt", err, sizeof err) != 0) {
        fprintf(stderr, "round trip failed: %s\n%s\n", err, ini);
        abort();
    }
    FZ_CHECK(rsrv_config_equal(&a, &b));
    return 0;
}
