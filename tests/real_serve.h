/* real_serve.h -- rsd-serve with REAL llama-server children, shared by test_real_serve
   and test_real_affinity: main's setup (rsd-serve built, tiny models, LLAMA_CACHE), an
   INI over those models, and the cleanup. Include after real_server.h and
   serve_harness.h. Not part of the library. */
#ifndef RSD_TESTS_REAL_SERVE_H
#define RSD_TESTS_REAL_SERVE_H

static char g_bin[1024];   /* the real llama-server */
static char g_models[600]; /* tiny-a..tiny-e.gguf, broken.gguf */

/* Writes DIR/name.ini -- the global lines, then the [model] sections in models ("@" =
   the models directory) -- for children of the real server, and starts rsd-serve on it. */
static int real_serve_start(serve_proc *s, const char *name, const char *global, const char *models) {
    char path[700], text[8192], body[4096];
    const char *args[] = {"--config", path, NULL};
    const char *p;
    size_t n = 0;
    for (p = models; *p && n + sizeof g_models < sizeof body; p++) {
        if (*p == '@') n += (size_t)snprintf(body + n, sizeof body - n, "%s", g_models);
        else body[n++] = *p;
    }
    body[n] = 0;
    snprintf(path, sizeof path, "%s/%s.ini", g_models, name);
    snprintf(text, sizeof text,
             "listen = 127.0.0.1:0\nllama_server = %s\nargs = -t 1\nstart_timeout = 60\nstop_grace = 5\n%s\n%s", g_bin,
             global, body);
    if (write_file(path, text) != 0) return -1;
    return serve_start(s, args);
}

/* In main, after RSD_TEST_BEGIN and REAL_SKIP_OR_FIND(g_bin): rsd-serve must be built,
   the tiny models are written and LLAMA_CACHE points beside them (rsd-serve's children
   inherit it). 0, or -1 after saying why (counted as a failure). */
static int real_serve_setup(void) {
    char cache[700];
    signal(SIGPIPE, SIG_IGN);
    (void)real_start; /* the router starter: not used by these tests */
    if (access(SERVE_BIN, X_OK) != 0) {
        printf("  %s missing: run `make apps` first\n", SERVE_BIN);
        rsdt_failed++;
        return -1;
    }
    if (real_models(g_models, sizeof g_models) != 0) {
        printf("  cannot write the tiny models\n");
        rsdt_failed++;
        return -1;
    }
    snprintf(cache, sizeof cache, "%s/cache", g_models);
    setenv("LLAMA_CACHE", cache, 1);
    return 0;
}

/* At the end of main: the models and the logs go when everything passed (kept to look
   at otherwise). */
static void real_serve_cleanup(void) {
    if (rsdt_failed) return;
    rmtree(g_models);
    serve_cleanup();
}
#endif
