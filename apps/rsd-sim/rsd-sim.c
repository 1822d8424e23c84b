/* rsd-sim -- a faithful fake llama.cpp router, llama-server, Ollama or LM Studio server
   (spec/wire.md), for tests, `make demo` and benches. The behaviour lives in rsd_sim.h
   (pure, sans-I/O); this file only wires options, the HTTP server of residency_http.h
   and a poll() loop. Options: see the top of rsd_sim.h, e.g.

       rsd-sim --runtime router --port 0 --models-max 2 --load-ms 300 \
               --model id=a,size=4G,tags=pinned --model id=b --model id=c

   It prints "rsd-sim: <runtime> listening on http://HOST:PORT" once the socket is bound
   (server mode: llama-server's own line, only after the model has loaded, W22), flushes
   stdout, and exits 0 on SIGINT/SIGTERM (server mode: 1 when the load fails, W21).
   `rsd-sim --help` lists every option. Router and server mode close idle keep-alive
   sockets after --idle-close-ms (5000, as llama.cpp) and send the headers rsim_resp
   asks for; an answer the router proxied is written chunked over the server's
   close-delimited mode, so the socket closes after it as the real router's does.
   Server mode with LLAMA_SERVER_ROUTER_PORT in the environment acts as a router child
   (W29): it prints cmd_child_to_router:state:{...} lines, exits 0 on the line
   cmd_router_to_child:exit and 1 when stdin reaches EOF.
   Fault flags of this program (not of rsd_sim.h), for process-supervision tests:
       --ignore-sigterm   SIGTERM is ignored (only SIGKILL or SIGINT ends it)
       --print-ready-ms   server mode: when /health turns 200, also print
                          "rsd-sim: ready at monotonic ms N" (CLOCK_MONOTONIC, for benches)
       --big-body BYTES   a non-streamed completion (a 200 answer to a POST whose path
                          contains "/completion") becomes a Content-Length JSON body of
                          about BYTES bytes, written as the socket takes it (memory stays
                          bounded): {"id":"chatcmpl-big",...,"message":{"role":"assistant",
                          "content":"RECORDS"},"finish_reason":"length"}]} where RECORDS is
                          max(1, BYTES / 16) records of 16 bytes, record k = printf("%015llu ",
                          k). For backpressure tests: every byte can be checked.
       -lv N, --verbosity N, --log-verbosity N
                          llama-server's log verbosity (default 3): at 4 or more, server
                          mode prints the --buffers lines before "model loaded"
       --buffers M,K,C    server mode: the model, KV and compute buffer sizes (bytes) it
                          reports as llama-server does at -lv 4 ("load_tensors:   CPU_Mapped
                          model buffer size =   X MiB", "llama_kv_cache:   CPU KV buffer
                          size = ...", "sched_reserve:   CPU compute buffer size = ...", X
                          to 0.01 MiB); the process takes no such memory
       --buffer-device NAME  the device those lines name (default CPU, the model's
                          buffer then CPU_Mapped): CUDA0 makes them a GPU's
   (--idle-close-ms is an rsd_sim.h option: router and server mode default to 5000.) */
#define RESIDENCY_IMPLEMENTATION
#include "../../residency_http.h"
#include "rsd_sim.h"

#include <errno.h>
#include <fcntl.h>
#if !defined(_WIN32)
#include <unistd.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifndef O_BINARY
#define O_BINARY 0 /* Windows: the slot files are bytes, never text */
#endif

enum { SIM_BODY_BYTES = 1 << 20, SIM_MAX_FDS = 256 };

static volatile sig_atomic_t g_stop; /* the only global: set by the signal handler */

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static uint64_t mono_ms(void) { return rsd_now_ms(); }

/* rsim ticket <-> server request handle. */
typedef struct sim_link {
    uint32_t ticket;
    rsd_http_sreq_h h;
    bool big;          /* --big-body applies to its answer */
    bool framed;       /* a close_after stream: this program writes the chunk framing */
} sim_link;

/* A --big-body answer being written. */
typedef struct sim_big {
    rsd_http_sreq_h h; /* 0 = unused */
    uint64_t off, total;
} sim_big;

typedef struct sim_app {
    rsim *sim;
    rsd_http_server *srv;
    sim_link links[RSIM_MAX_TICKETS];
    char *body;
    uint64_t big_body; /* --big-body BYTES, 0 = off */
    sim_big bigs[RSIM_MAX_TICKETS];
    const char *slot_dir;  /* --slot-save-path DIR (server mode: slot saves live there), NULL = none */
    char file[RSIM_KV_FILE_MAX + 1]; /* a restore's file */
} sim_app;

static const char big_prefix[] = "{\"id\":\"chatcmpl-big\",\"object\":\"chat.completion\",\"created\":0,"
                                 "\"model\":\"big\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                                 "\"assistant\",\"content\":\"";
static const char big_suffix[] = "\"},\"finish_reason\":\"length\"}]}";

/* Bytes [off, off + n) of a big answer of `records` records into out. */
static void big_fill(char *out, uint64_t off, size_t n, uint64_t records) {
    const uint64_t plen = sizeof big_prefix - 1, rend = plen + records * 16;
    char rec[24];
    uint64_t cur = (uint64_t)-1;
    size_t i;
    for (i = 0; i < n; i++, off++) {
        if (off < plen) out[i] = big_prefix[off];
        else if (off >= rend) out[i] = big_suffix[off - rend];
        else {
            uint64_t k = (off - plen) / 16;
            if (k != cur) {
                snprintf(rec, sizeof rec, "%015llu ", (unsigned long long)k);
                cur = k;
            }
            out[i] = rec[(off - plen) % 16];
        }
    }
}

/* Starts a big answer on h. */
static void big_start(sim_app *a, rsd_http_sreq_h h) {
    uint64_t records = a->big_body / 16 ? a->big_body / 16 : 1;
    rsd_http_header hd;
    int i;
    hd.name = rsd_str_c("Content-Type");
    hd.value = rsd_str_c("application/json; charset=utf-8");
    for (i = 0; i < RSIM_MAX_TICKETS; i++)
        if (!a->bigs[i].h.id) {
            a->bigs[i].total = sizeof big_prefix - 1 + records * 16 + sizeof big_suffix - 1;
            if (rsd_http_stream_begin_raw(a->srv, h, 200, &hd, 1, (int64_t)a->bigs[i].total) != RSD_OK) return;
            a->bigs[i].h = h;
            a->bigs[i].off = 0;
            return;
        }
    (void)rsd_http_respond(a->srv, h, 503, NULL, 0, "", 0);
}

/* Writes what the sockets take of every big answer; ends the finished ones. */
static void big_pump(sim_app *a) {
    int i;
    for (i = 0; i < RSIM_MAX_TICKETS; i++) {
        sim_big *b = &a->bigs[i];
        uint64_t records = a->big_body / 16 ? a->big_body / 16 : 1;
        while (b->h.id && b->off < b->total) {
            size_t room = rsd_http_stream_room(a->srv, b->h), n;
            if (room == 0) break;
            n = room < SIM_BODY_BYTES ? room : SIM_BODY_BYTES;
            if ((uint64_t)n > b->total - b->off) n = (size_t)(b->total - b->off);
            big_fill(a->body, b->off, n, records);
            if (rsd_http_stream_write(a->srv, b->h, a->body, n) != RSD_OK) { b->h.id = 0; break; }
            b->off += n;
        }
        if (b->h.id && b->off == b->total) {
            (void)rsd_http_stream_end(a->srv, b->h);
            b->h.id = 0;
        }
    }
}

static sim_link *link_by_ticket(sim_app *a, uint32_t ticket) {
    int i;
    for (i = 0; i < RSIM_MAX_TICKETS; i++)
        if (a->links[i].ticket == ticket && ticket) return &a->links[i];
    return NULL;
}

static sim_link *link_by_handle(sim_app *a, rsd_http_sreq_h h) {
    int i;
    for (i = 0; i < RSIM_MAX_TICKETS; i++)
        if (a->links[i].ticket && a->links[i].h.id == h.id) return &a->links[i];
    return NULL;
}

static void link_add(sim_app *a, uint32_t ticket, rsd_http_sreq_h h, bool big) {
    sim_link *l = link_by_ticket(a, 0);
    int i;
    for (i = 0; !l && i < RSIM_MAX_TICKETS; i++)
        if (!a->links[i].ticket) l = &a->links[i];
    if (l) { l->ticket = ticket; l->h = h; l->big = big; l->framed = false; }
}

/* One chunk of a body this program frames itself (close_after answers: the server's
   close-delimited mode carries the chunked framing, so the socket closes after it). */
static void raw_chunk(sim_app *a, rsd_http_sreq_h h, const char *data, size_t n) {
    char len[24];
    int k;
    if (!n) return;
    k = snprintf(len, sizeof len, "%zx\r\n", n);
    (void)rsd_http_stream_write(a->srv, h, len, (size_t)k);
    (void)rsd_http_stream_write(a->srv, h, data, n);
    (void)rsd_http_stream_write(a->srv, h, "\r\n", 2);
}

/* Sends what rsim produced for request h (one rsim_handle or rsim_pull result). */
static void deliver(sim_app *a, rsd_http_sreq_h h, const rsim_resp *r, bool big, bool *framed) {
    rsd_http_header hd[6];
    size_t nh = 0;
    hd[nh].name = rsd_str_c("Content-Type");
    hd[nh++].value = rsd_str_c(r->content_type);
    if (r->server) {
        hd[nh].name = rsd_str_c("Server");
        hd[nh++].value = rsd_str_c(r->server);
    }
    if (r->keep_alive) {
        hd[nh].name = rsd_str_c("Keep-Alive");
        hd[nh++].value = rsd_str_c(r->keep_alive);
    }
    if (r->connection_close && !r->close_after) { /* said, but the socket stays usable */
        rsd_http_server_event q;
        if (rsd_http_server_query_req(a->srv, h, &q) != RSD_OK || !q.head->framing.close) {
            hd[nh].name = rsd_str_c("Connection");
            hd[nh++].value = rsd_str_c("close");
        }
    }
    if ((r->action == RSIM_RESPOND || r->action == RSIM_STREAM) && r->close_after && !r->truncate && !big) {
        /* a proxied answer: chunked, "Connection: close", then the socket is closed */
        hd[nh].name = rsd_str_c("Transfer-Encoding");
        hd[nh++].value = rsd_str_c("chunked");
        if (rsd_http_stream_begin_raw(a->srv, h, r->status, hd, nh, -1) != RSD_OK) return;
        if (r->action == RSIM_STREAM) { *framed = true; return; }
        raw_chunk(a, h, r->body, r->body_len);
        (void)rsd_http_stream_write(a->srv, h, "0\r\n\r\n", 5);
        (void)rsd_http_stream_end(a->srv, h);
        return;
    }
    if (*framed && (r->action == RSIM_CHUNK || r->action == RSIM_END)) {
        if (r->action == RSIM_CHUNK) raw_chunk(a, h, r->body, r->body_len);
        else {
            (void)rsd_http_stream_write(a->srv, h, "0\r\n\r\n", 5);
            (void)rsd_http_stream_end(a->srv, h);
        }
        return;
    }
    switch (r->action) {
    case RSIM_RESPOND:
        if (r->truncate) {
            /* Mid-body drop: the server API has no "close now", so the closest thing is a
               chunked body that stops half-way and never ends (the client times out). */
            if (rsd_http_stream_begin(a->srv, h, r->status, hd, nh) == RSD_OK)
                (void)rsd_http_stream_write(a->srv, h, r->body, r->truncate_at);
            return;
        }
        if (big && r->status == 200) {
            big_start(a, h);
            break;
        }
        (void)rsd_http_respond(a->srv, h, r->status, hd, nh, r->body, r->body_len);
        break;
    case RSIM_STREAM: (void)rsd_http_stream_begin(a->srv, h, r->status, hd, nh); break;
    case RSIM_CHUNK:
        if (r->body_len) (void)rsd_http_stream_write(a->srv, h, r->body, r->body_len);
        break;
    case RSIM_END: (void)rsd_http_stream_end(a->srv, h); break;
    default: break; /* DEFER, HANG, DROP: nothing to send now */
    }
}

/* --slot-save-path DIR/name (false when the name is not a plain file name). */
static bool slot_path(const sim_app *a, const char *name, char *out, size_t cap) {
    int n;
    if (!a->slot_dir || !rsim_filename_ok(name)) return false; /* llama.cpp's rule, as the sim checks it */
    n = snprintf(out, cap, "%s/%s", a->slot_dir, name);
    return n > 0 && (size_t)n < cap;
}

/* POST /slots/N?action=restore: the named file's bytes for rsim (q->file_*). */
static void slot_read(sim_app *a, const rsd_http_server_event *ev, rsim_req *q) {
    rsd_json_tok toks[16];
    rsd_json_doc d;
    char name[RSIM_NAME_MAX], path[1200];
    int fd;
    ssize_t n;
    if (!a->slot_dir || strncmp(q->target, "/slots/", 7) || !strstr(q->target, "action=restore")) return;
    if (rsd_json_parse(&d, ev->body.ptr, ev->body.len, toks, 16) < 1 ||
        rsd_json_str(&d, rsd_json_find(&d, 0, "filename"), name, sizeof name, NULL) != RSD_OK ||
        !slot_path(a, name, path, sizeof path))
        return;
    fd = open(path, O_RDONLY | O_BINARY);
    if (fd < 0) return;
    n = read(fd, a->file, RSIM_KV_FILE_MAX);
    close(fd);
    if (n < 0) return;
    a->file[n] = 0;
    q->file_data = a->file;
    q->file_len = (size_t)n;
    q->file_found = true;
}

/* A save rsim answered: its file written (0666 less the umask, as llama-server's);
   the answer becomes 500 when it cannot be. */
static void slot_write(sim_app *a, rsim_resp *r) {
    char path[1200];
    int fd;
    bool ok;
    if (!r->file_name) return;
    fd = slot_path(a, r->file_name, path, sizeof path) ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_BINARY, 0666) : -1;
    ok = fd >= 0 && write(fd, r->file_data, r->file_len) == (ssize_t)r->file_len;
    if (fd >= 0) ok = close(fd) == 0 && ok;
    if (ok) return;
    r->status = 500;
    r->body_len = (size_t)snprintf(r->body, r->body_cap,
                                   "{\"error\":{\"code\":500,\"message\":\"failed to write slot file: %s\","
                                   "\"type\":\"server_error\"}}", strerror(errno));
}

static void on_request(sim_app *a, const rsd_http_server_event *ev, uint64_t now) {
    rsim_req q;
    rsim_resp r;
    rsd_str auth = rsd_http_header_get(ev->head->headers, ev->head->num_headers, "Authorization");
    rsd_str xkey = rsd_http_header_get(ev->head->headers, ev->head->num_headers, "X-Api-Key");
    char method[16], target[RSIM_TARGET_MAX];
    bool big;
    memset(&q, 0, sizeof q);
    memset(&r, 0, sizeof r);
    if (ev->head->method.len >= sizeof method || ev->head->target.len >= sizeof target) {
        (void)rsd_http_respond(a->srv, ev->req, 414, NULL, 0, "", 0);
        return;
    }
    memcpy(method, ev->head->method.ptr, ev->head->method.len);
    method[ev->head->method.len] = 0;
    memcpy(target, ev->head->target.ptr, ev->head->target.len);
    target[ev->head->target.len] = 0;
    q.method = method;
    q.target = target;
    q.body = ev->body.ptr;
    q.body_len = ev->body.len;
    if (auth.ptr && auth.len) { q.authorization = auth.ptr; q.authorization_len = auth.len; }
    if (xkey.ptr && xkey.len) { q.x_api_key = xkey.ptr; q.x_api_key_len = xkey.len; }
    r.body = a->body;
    r.body_cap = SIM_BODY_BYTES;
    slot_read(a, ev, &q);
    (void)rsim_handle(a->sim, &q, now, &r);
    slot_write(a, &r);
    big = a->big_body && !strcmp(method, "POST") && strstr(target, "/completion") != NULL;
    if (r.action == RSIM_DEFER || r.action == RSIM_HANG || r.action == RSIM_STREAM)
        link_add(a, r.ticket, ev->req, big);
    {
        sim_link *l = r.action == RSIM_STREAM ? link_by_ticket(a, r.ticket) : NULL;
        bool framed = false;
        deliver(a, ev->req, &r, big, l ? &l->framed : &framed);
    }
}

/* Router-child control line (W29): state loading|ready|sleeping, ready carries data[0]. */
static void child_state(sim_app *a, const char *state) {
    rsim_w w;
    int n = 0;
    if (!strcmp(state, "ready")) {
        rsd_json_w_init(&w, a->body, SIM_BODY_BYTES);
        rsim_w_child_entry(&w, a->sim, &a->sim->m[0]);
        n = rsd_json_w_finish(&w);
    }
    printf("cmd_child_to_router:state:{\"state\":\"%s\",\"payload\":%s}\n", state, n > 0 ? a->body : "null");
    fflush(stdout);
}

static const char *runtime_name(int rt) {
    static const char *const names[] = {"router", "server", "ollama", "lmstudio"};
    return rt >= 0 && rt < RSIM_RT_NUM ? names[rt] : "?";
}

int main(int argc, char **argv) {
    sim_app a;
    rsd_http_server_desc d;
    rsd_pollfd fds[SIM_MAX_FDS];
    uint64_t t0 = mono_ms();
    unsigned long long big_body = 0;
    bool printed = false, own_epoch = true, child = false, ignore_term = false, print_ready = false;
    int verbosity = 3;
    unsigned long long buffers[3] = {0, 0, 0};
    const char *buf_dev = "CPU";
    int i, j, child_state_seen = -1, child_exit = -1;
    memset(&a, 0, sizeof a);
    for (i = 1, j = 1; i < argc; i++) { /* this program's own flags, removed before rsim_configure */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: rsd-sim [--runtime router|server|ollama|lmstudio] [OPTION]...\n"
                   "A simulated llama.cpp router, llama-server, Ollama or LM Studio server on one port.\n"
                   "Prints \"rsd-sim: <runtime> listening on http://HOST:PORT\" once bound (server mode:\n"
                   "llama-server's own line, after the model has loaded); SIGINT/SIGTERM exit 0.\n"
                   "Control routes (not logged): GET /_sim/log; POST /_sim/crash {\"model\",\"exit_code\"},\n"
                   "/_sim/fail-loads {\"count\"}, /_sim/evict {\"model\"}, /_sim/remove {\"model\"},\n"
                   "/_sim/busy {\"model\",\"count\"}.\n\n");
            rsim_print_usage(stdout);
            printf("  this program\n"
                   "    --help, -h                  this text\n"
                   "    --ignore-sigterm            SIGTERM is ignored (only SIGKILL or SIGINT ends it)\n"
                   "    --print-ready-ms            server mode: when /health turns 200, also print\n"
                   "                                \"rsd-sim: ready at monotonic ms N\"\n"
                   "    --big-body BYTES            a 200 answer to a POST whose path contains \"/completion\"\n"
                   "                                becomes a JSON body of about BYTES bytes (backpressure tests)\n"
                   "    -lv, --verbosity N          llama-server's log verbosity (default 3); 4: --buffers are printed\n"
                   "    --buffers M,K,C             server mode: model, KV, compute buffer bytes it reports at -lv 4\n"
                   "    --buffer-device NAME        the device those lines name (default CPU)\n");
            return 0;
        }
        if (!strcmp(argv[i], "--ignore-sigterm")) ignore_term = true;
        else if (!strcmp(argv[i], "--print-ready-ms")) print_ready = true;
        else if (!strcmp(argv[i], "--big-body") && i + 1 < argc) big_body = strtoull(argv[++i], NULL, 10);
        else if ((!strcmp(argv[i], "-lv") || !strcmp(argv[i], "--verbosity") || !strcmp(argv[i], "--log-verbosity")) &&
                 i + 1 < argc)
            verbosity = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--buffer-device") && i + 1 < argc) buf_dev = argv[++i];
        else if (!strcmp(argv[i], "--buffers") && i + 1 < argc) {
            char *e = argv[++i];
            int k;
            for (k = 0; k < 3; k++) {
                buffers[k] = strtoull(e, &e, 10);
                if (*e == ',') e++;
            }
        }
        else argv[j++] = argv[i];
    }
    argc = j;
    argv[argc] = NULL;
    a.big_body = big_body;
    a.sim = (rsim *)calloc(1, sizeof *a.sim);
    a.body = (char *)malloc(SIM_BODY_BYTES);
    if (!a.sim || !a.body) return 2;
    if (rsim_configure(a.sim, argc, argv) != 0) {
        fprintf(stderr, "rsd-sim: %s (see --help)\n", a.sim->err);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--epoch")) own_epoch = false;
        if (!strcmp(argv[i], "--slot-save-path") && i + 1 < argc) a.slot_dir = argv[i + 1];
    }
    if (own_epoch) a.sim->o.epoch_s = (uint64_t)time(NULL) - t0 / 1000;
    memset(&d, 0, sizeof d);
    d.bind_host = a.sim->o.host;
    d.port = (uint16_t)a.sim->o.port;
    d.max_body_bytes = SIM_BODY_BYTES;
    d.max_response_bytes = SIM_BODY_BYTES + 4096;
    d.idle_timeout_ms = a.sim->o.idle_close_ms ? a.sim->o.idle_close_ms : RSD_TIMEOUT_NONE;
    a.srv = rsd_http_server_create(&d);
    if (!a.srv) {
        /* llama-server's message and exit status for a busy port (W21) */
        fprintf(stderr, "E srv         start: couldn't bind HTTP server socket, hostname: %s, port: %d\n",
                a.sim->o.host, a.sim->o.port);
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, ignore_term ? SIG_IGN : on_signal);
#if defined(_WIN32) /* no SIGPIPE; a router's child (stdin commands) is POSIX-only */
    child = false;
#else
    signal(SIGPIPE, SIG_IGN);
    child = a.sim->o.runtime == RSIM_RT_SERVER && getenv("LLAMA_SERVER_ROUTER_PORT") != NULL;
#endif
    rsim_start(a.sim, mono_ms());
    while (!g_stop) {
        rsd_http_server_event ev;
        rsim_resp r;
        uint64_t now = mono_ms(), wake, dl;
        int nfds, timeout;
        rsim_tick(a.sim, now);
        if (!printed && (a.sim->o.runtime != RSIM_RT_SERVER || rsim_ready(a.sim))) {
            if (a.sim->o.runtime == RSIM_RT_SERVER) {
                if (verbosity >= 4 && (buffers[0] || buffers[1] || buffers[2]))
                    printf("I load_tensors: %12s model buffer size = %8.2f MiB\n"
                           "I llama_kv_cache: %12s KV buffer size = %8.2f MiB\n"
                           "I sched_reserve: %12s compute buffer size = %8.2f MiB\n",
                           strcmp(buf_dev, "CPU") ? buf_dev : "CPU_Mapped", (double)buffers[0] / 1048576.0, buf_dev,
                           (double)buffers[1] / 1048576.0, buf_dev, (double)buffers[2] / 1048576.0);
                printf("srv  llama_server: model loaded\nsrv  llama_server: listening on http://%s:%u\n",
                       a.sim->o.host, (unsigned)rsd_http_server_port(a.srv));
                if (print_ready) printf("rsd-sim: ready at monotonic ms %llu\n", (unsigned long long)now);
            }
            else
                printf("rsd-sim: %s listening on http://%s:%u\n", runtime_name(a.sim->o.runtime), a.sim->o.host,
                       (unsigned)rsd_http_server_port(a.srv));
            fflush(stdout);
            printed = true;
        }
        if (rsim_exit_code(a.sim) >= 0) {
            if (rsim_exit_code(a.sim) == 134) /* a slot file cut inside its data (rsim_slot_file) */
                fprintf(stderr, "llama.cpp/src/llama-context.cpp:3099: GGML_ASSERT(nread <= state_size) failed\n");
            else
                fprintf(stderr, "E srv  llama_server: exiting due to model loading error\n");
            break;
        }
        if (child && a.sim->m[0].state != child_state_seen) {
            int st = a.sim->m[0].state;
            child_state_seen = st;
            if (st == RSIM_LOADING) child_state(&a, "loading");
            else if (st == RSIM_LOADED) child_state(&a, "ready");
            else if (st == RSIM_SLEEPING) child_state(&a, "sleeping");
        }
        (void)rsd_http_server_step(a.srv, now);
        /* A server that has exited (a crash, an abort) answers nothing more, not even a request
           that arrived beside the one that ended it: the top of the loop leaves. */
        while (rsim_exit_code(a.sim) < 0 && rsd_http_server_next_event(a.srv, &ev)) {
            if (ev.type == RSD_HTTP_SEV_REQUEST) on_request(&a, &ev, now);
            else if (ev.type == RSD_HTTP_SEV_CLOSED) {
                sim_link *l = link_by_handle(&a, ev.req);
                int k;
                if (l) { rsim_cancel(a.sim, l->ticket, now); l->ticket = 0; }
                for (k = 0; k < RSIM_MAX_TICKETS; k++)
                    if (a.bigs[k].h.id == ev.req.id) a.bigs[k].h.id = 0;
            }
        }
        if (rsim_exit_code(a.sim) >= 0) continue;
        memset(&r, 0, sizeof r);
        r.body = a.body;
        r.body_cap = SIM_BODY_BYTES;
        while (rsim_pull(a.sim, now, &r) > 0) {
            sim_link *l = link_by_ticket(&a, r.ticket);
            slot_write(&a, &r); /* a save answered later (a router that loaded its model first) */
            if (!l) continue;
            deliver(&a, l->h, &r, l->big, &l->framed);
            if (r.action == RSIM_RESPOND || r.action == RSIM_END || r.action == RSIM_DROP) l->ticket = 0;
        }
        big_pump(&a);
        (void)rsd_http_server_step(a.srv, now); /* flush what was just written */
        wake = rsim_next_wake_ms(a.sim);
        dl = rsd_http_server_next_deadline(a.srv);
        if (dl < wake) wake = dl;
        now = mono_ms();
        timeout = wake == (uint64_t)-1 ? 1000 : wake <= now ? 0 : wake - now > 1000 ? 1000 : (int)(wake - now);
        for (i = 0; i < RSIM_MAX_TICKETS && timeout; i++) /* a big answer can write more now */
            if (a.bigs[i].h.id && rsd_http_stream_room(a.srv, a.bigs[i].h) > 0) timeout = 0;
        nfds = rsd_http_server_pollfds(a.srv, fds, SIM_MAX_FDS - 1);
        if (nfds < 0) nfds = 0;
        if (child) { fds[nfds].fd = 0; fds[nfds].events = RSD_POLLIN; fds[nfds].revents = 0; nfds++; }
        if (rsd_poll(fds, nfds, timeout) < 0 && errno != EINTR) break;
#if !defined(_WIN32)
        if (child && fds[nfds - 1].revents) {
            char line[256];
            ssize_t got = read(0, line, sizeof line - 1);
            if (got <= 0) { child_exit = 1; break; }       /* the router died: exit 1 */
            line[got] = 0;
            if (strstr(line, "cmd_router_to_child:exit")) { child_exit = 0; break; }
        }
#endif
    }
    i = child_exit >= 0 ? child_exit : rsim_exit_code(a.sim);
    rsd_http_server_destroy(a.srv);
    free(a.body);
    free(a.sim);
    return i >= 0 ? i : 0;
}
