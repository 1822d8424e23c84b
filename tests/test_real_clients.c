/* test_real_clients.c -- the official OpenAI Node SDK and the official Ollama JS client,
   as a new user would use them (tests/clients/real_clients.cjs), against rsd-serve with
   REAL llama-server children and against rsd-sim playing Ollama: list models, chat
   (whole and streamed), completions, responses, embeddings (a third model, run with
   --embeddings, swapped in under max_models 2), a child SIGKILLed mid-stream (the SDK must raise an API error,
   not a connection error), an unknown model (the same 404 on a completion and on
   models.retrieve), Ollama's metrics, keep_alive, show and embed. Needs node on PATH and
   $RSD_NODE_CLIENTS naming a node_modules directory that holds openai and ollama
   (`npm install openai ollama` somewhere outside the repository); skipped with one line
   ("0 passed, 0 failed") without them or without llama-server. Nothing leaves loopback:
   the script is given only the two local URLs. */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency_http.h"
#include "rsd_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "real_server.h"
#include "serve_harness.h"
#include "real_serve.h"
#include "listen_proc.h"

#define SIM_BIN "build/bin/rsd-sim"

static char g_node[1024];        /* node, found on PATH */
static char g_node_modules[900]; /* $RSD_NODE_CLIENTS */

/* node on PATH and $RSD_NODE_CLIENTS with openai/ and ollama/ in it; else why not. */
static const char *clients_missing(void) {
    const char *nm = getenv("RSD_NODE_CLIENTS"), *path = getenv("PATH"), *p;
    char probe[1024];
    if (!nm || !nm[0]) return "RSD_NODE_CLIENTS is not set (a node_modules dir with openai and ollama)";
    snprintf(g_node_modules, sizeof g_node_modules, "%s", nm);
    snprintf(probe, sizeof probe, "%s/openai/package.json", nm);
    if (access(probe, R_OK) != 0) return "no openai package under $RSD_NODE_CLIENTS";
    snprintf(probe, sizeof probe, "%s/ollama/package.json", nm);
    if (access(probe, R_OK) != 0) return "no ollama package under $RSD_NODE_CLIENTS";
    for (p = path; p && *p;) {
        size_t n = strcspn(p, ":");
        snprintf(g_node, sizeof g_node, "%.*s/node", (int)n, p);
        if (n && access(g_node, X_OK) == 0) return NULL;
        p += n;
        if (*p) p++;
    }
    g_node[0] = 0;
    return "node is not on PATH";
}

static void test_real_clients(void) {
    static char out[1 << 16];
    serve_proc s;
    listen_proc ol;
    const char *sim_argv[] = {SIM_BIN, "--runtime", "ollama", "--port", "0", "--load-ms", "100",
                              "--model", "id=llama3.2,size=2G", NULL};
    const char *argv[6];
    int rc;
    REQUIRE(real_serve_start(&s, "clients", "max_models = 2\n",
                             "[model tiny-a]\nmodel = @/tiny-a.gguf\nctx = 256\n"
                             "[model tiny-b]\nmodel = @/tiny-b.gguf\nctx = 2048\nargs = -np 1\n"
                             "[model tiny-emb]\nmodel = @/tiny-c.gguf\nctx = 256\nargs = --embeddings --pooling mean\n") == 0);
    REQUIRE(listen_proc_start(&ol, sim_argv, -1) == 0);
    argv[0] = g_node;
    argv[1] = "tests/clients/real_clients.cjs";
    argv[2] = g_node_modules;
    argv[3] = s.url;
    argv[4] = ol.url;
    argv[5] = NULL;
    rc = run_prog(argv, out, sizeof out);
    printf("%s", out); /* what each client did, one line per check */
    CHECK_EQ_INT(rc, 0);
    CHECK(strstr(out, "ok openai child killed mid-stream: ") != NULL);
    CHECK(strstr(out, "ok ollama embed: ") != NULL);
    CHECK(strstr(out, "ok openai embeddings: ") != NULL);
    (void)listen_proc_stop(&ol);
    CHECK_EQ_INT(serve_stop(&s), 0);
}

int main(int argc, char **argv) {
    const char *why;
    RSD_TEST_BEGIN(argc, argv);
    if ((why = clients_missing()) != NULL) {
        printf("real-client tests skipped: %s\n", why);
        return RSD_TEST_END();
    }
    REAL_SKIP_OR_FIND(g_bin);
    if (access(SIM_BIN, X_OK) != 0) {
        printf("  %s missing: run `make apps` first\n", SIM_BIN);
        rsdt_failed++;
        return RSD_TEST_END();
    }
    if (real_serve_setup() != 0) return RSD_TEST_END();
    RUN(test_real_clients);
    real_serve_cleanup();
    return RSD_TEST_END();
}
