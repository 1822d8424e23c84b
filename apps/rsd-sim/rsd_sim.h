/* rsd_sim.h -- sans-I/O models of a llama.cpp router, a single-model llama-server, an
   Ollama server and an LM Studio server, faithful to spec/wire.md (section 5 checklist
   W1-W47) so the same client code works against them and against the real servers.
   Used by apps/rsd-sim/rsd-sim.c (the program), by tests and by benches. Not part of the
   library: everything here is `static`, prefixed rsim_, C99 that also compiles as C++11.

   No sockets, no clock reads, no sleeps, no globals, no allocation: the caller owns
   the `rsim` (about 600 KB: calloc it or make it static) and passes the time.
   Include residency.h (or residency_http.h) first: bodies are parsed with rsd_json_parse
   and every answer is written with rsd_json_writer. All time is simulated: rsim_tick
   replays due transitions one by one in time order, so a test may jump hours at once.

   USE (what an HTTP adapter does)
       rsim *s = calloc(1, sizeof *s);
       rsim_init(s, RSIM_RT_ROUTER);                    (or rsim_configure(s, argc, argv))
       rsim_start(s, now_ms);                           (startup loads, server-mode load)
       per request:   rsim_req q = {0}; q.method = "POST"; q.target = "/models/load?x=1";
                      q.body = body; q.body_len = n; q.authorization = hdr_or_NULL;
                      resp.body = buf; resp.body_cap = cap;
                      rsim_handle(s, &q, now_ms, &resp);
           resp.action RSIM_RESPOND  send status/content_type/body now (header `Server:
                                     <resp.server>` when non-NULL, `Keep-Alive:
                                     <resp.keep_alive>` when non-NULL, `Connection:
                                     close` when resp.connection_close, the socket
                                     staying open; resp.close_after: chunked, then
                                     close the socket, also for RSIM_STREAM). If resp.truncate:
                                     announce the full Content-Length, send only the first
                                     resp.truncate_at body bytes, then close (mid-body drop).
                       RSIM_DEFER    keep the connection; the answer comes from rsim_pull
                                     under resp.ticket.
                       RSIM_STREAM   send the head now (status, content_type, chunked or
                                     close-delimited); chunks come from rsim_pull.
                       RSIM_HANG     never answer (keep the socket until the client goes).
       every loop:    rsim_tick(s, now_ms);
                      while (rsim_pull(s, now_ms, &resp) > 0) act on resp.ticket:
                        RSIM_RESPOND (complete answer to a deferred request),
                        RSIM_STREAM (head of a deferred stream), RSIM_CHUNK (append
                        resp.body to the stream), RSIM_END (finish the stream),
                        RSIM_DROP (close the connection now).
                      sleep until rsim_next_wake_ms(s) or socket activity.
       idle sockets:  close a kept-alive socket idle for s->o.idle_close_ms (0 = never).
       client gone:   rsim_cancel(s, ticket, now_ms)   (leaves the router's queue, W11)
       server mode:   rsim_ready(s) true -> print "... srv  llama_server: listening on
                      http://127.0.0.1:<port>" (W22); rsim_exit_code(s) >= 0 -> exit with it.

   Every request is appended to s->log (method, path without query, model, status, time);
   rsim_log_count(s, method, path, model, status) counts matching entries (NULL/0 = any,
   RSIM_LOG_PENDING = not answered yet, -1 = hung or cancelled).
   Control routes under /_sim/ (not logged): GET /_sim/log (the log as JSON: "total",
   "entries" [{method, path, model, status, t_ms}], "models" [{id, state, loads,
   loaded_ms}]: loaded_ms = the time the model last became loaded, -1 never), POST
   /_sim/crash {"model","exit_code"}, POST /_sim/fail-loads {"count"}, POST /_sim/limit-loads
   {"count"} and /_sim/refuse-loads {"count"} (--limit-loads, --refuse-loads), POST /_sim/evict
   {"model"} (another client unloads it), POST /_sim/remove {"model"} (gone from the
   catalog), POST /_sim/busy {"model","count"} (pin in-flight requests, W6/W11).

   OPTIONS: rsim_print_usage below (rsd-sim --help prints it, with the program's own flags).

   MODEL OF EACH RUNTIME (what is simulated, beyond wire.md's own words)
     router   children are states with timers: loading -> loaded after load_ms (or
              unloaded failed exit 1 after fail_ms), graceful stop unload_ms, wake
              wake_ms, sleep after --sleep-idle-seconds without a task. Capacity counts
              loading+loaded+sleeping (stopping ones too: they are listed loaded until
              they exit). Victims by last_used (set at load start and on proxied POSTs):
              --router-gen july (default) takes the LRU running model whatever it does;
              later never a loading, busy or awaited one (see --router-gen). Inference
              answers a canned "This is a simulated reply." after gen_ms (or streamed,
              one chunk per token_ms). A model with child_download=MS is one whose child
              downloads it first (wire.md 1.12: its state line says "downloading"): a load
              lists it downloading for MS, then loading. Connections as llama.cpp's HTTP layer: see
              --idle-close-ms and rsim_resp (keep_alive, connection_close, close_after).
              Each child has 4 slots; a proxied chat leaves 6 prompt tokens in slot 0
              (GET /slots?model= lists them). POST /slots/ID?action=save|restore goes to
              the child its JSON body's "model" names, as b10116's router (no "model"
              in the body: 400 "model name is missing from the request"), with the
              server mode's files and answers (rsim_router_slot_file; 501 without
              --slot-save-path); a stop loses the slots. A model that is not loaded is
              loaded first, as for any POST the router proxies (?autoload=false: 400
              "model is not loaded"), and then its child answers, its own checks
              included (an empty slot saves 0 tokens): as b10116's router does.
     server   one model; slots = --parallel; inference waits for a free slot. Each slot
              keeps a KV cache of its last prompt and answer (by message: a message is
              4 + bytes/4 tokens); a task takes its body's id_slot (in range: it waits
              for that slot; out of range: ignored), else the idle slot sharing more
              than 10 % of the prompt, else the least recently used idle one; chat
              answers carry timings {cache_n, prompt_n} from that cache. GET /slots
              lists is_processing and n_prompt_tokens; POST /slots/ID?action=erase
              (501 without --slot-save-path, 400 "Invalid slot ID" / "Invalid action",
              out of range 200 n_erased 0) waits until the slot is idle, then answers
              {"id_slot":ID,"n_erased":N}: as llama-server b10116 does.
              action=save / action=restore {"filename": NAME} (rsim_slot_file)
              write and read the slot's KV through the adapter (rsim_resp.file_*,
              rsim_req.file_*), with the real server's answers; a restored slot's next
              prompt reuses it (cache_n) as a warm one does. A restore that fails (no
              such file, not a save, cut short) answers 400 and leaves the slot empty,
              as the real one does; a file cut inside its data aborts the real server
              (GGML_ASSERT, measured on b10116), and rsd-sim's server ends with
              nothing answered (exit 134; rsim_slot_file).
     ollama   runners: loading then loaded; one load at a time; expiry keep_alive after
              the last request (a request without keep_alive leaves the runner's
              alone); eviction shortest keep_alive first, then name. Final generate /
              chat objects carry api.Metrics (total, load, prompt eval and eval
              durations in ns on the sim's clock, the counts) and generate's context;
              /api/show has modified_at; /api/embed (unit vectors, one per input, with
              durations) and /api/embeddings ({"embedding":[..]}) load like generate.
     lmstudio REST loads block load_ms then add an instance (key, key:2, ...); JIT loads
              on the OpenAI routes and /api/v1/chat; TTL per JIT instance.
   Where the real server is uncertain (wire.md UNCONFIRMED) the documented behaviour is
   taken and the choice is fixed here: LM Studio 401 is {"error":{"type":
   "invalid_request","message":"Invalid or missing API token"}}, an over-budget load is
   507 "insufficient VRAM", unknown unload ids are 404 model_not_found; LM Link peer
   entries (host=) are listed but never loaded or unloaded here; Ollama time stamps are
   UTC ("Z"); the router's /models/sse has no download events.
   Not simulated: router model downloads (POST/DELETE /models), ?reload=1 preset changes
   (it clears failed flags and sends models_reload only), router-child mode (W29), the
   LM Studio /api/v1/chat SSE event stream, Ollama's /v1 OpenAI routes.
*/
#ifndef RSD_SIM_H_INCLUDED
#define RSD_SIM_H_INCLUDED

#ifndef RESIDENCY_H_INCLUDED
#error "include residency.h (or residency_http.h) before rsd_sim.h: it uses the JSON module"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include "../rsd_app.h"

#if defined(__GNUC__) || defined(__clang__)
#define RSIM_FN static __attribute__((unused))
#else
#define RSIM_FN static
#endif

/* Fixed limits. */
enum {
    RSIM_MAX_MODELS = 32,     /* catalog entries */
    RSIM_NAME_MAX = 96,       /* model ids, aliases, instance ids (with NUL) */
    RSIM_TAG_MAX = 32,        /* one tag, one LM Link host name */
    RSIM_MAX_TAGS = 4,
    RSIM_MAX_ALIASES = 4,
    RSIM_MAX_INST = 8,        /* LM Studio instances per model */
    RSIM_MAX_TICKETS = 128,   /* requests pending at once (deferred, streaming, SSE) */
    RSIM_LOG_MAX = 2048,      /* request log ring */
    RSIM_EVENTS_MAX = 256,    /* /models/sse event ring */
    RSIM_MAX_KEYS = 4,        /* API keys */
    RSIM_MAX_FAULTS = 16,     /* path faults */
    RSIM_MAX_SLOTS = 16,      /* server mode slots */
    RSIM_MSG_MAX = 256,       /* error message text */
    RSIM_TARGET_MAX = 1024,   /* longest request target an adapter should pass (path 255, query 511 kept) */
    RSIM_BODY_MIN = 65536,    /* recommended minimum response buffer (256 KB for big catalogs) */
    RSIM_MAX_TOKENS = 4096    /* JSON tokens of one request body (bigger bodies: members unread) */
};

typedef enum rsim_runtime {
    RSIM_RT_ROUTER = 0, RSIM_RT_SERVER, RSIM_RT_OLLAMA, RSIM_RT_LMSTUDIO, RSIM_RT_NUM
} rsim_runtime;

/* Which llama.cpp router generation the router runtime follows (--router-gen). */
typedef enum rsim_gen {
    RSIM_GEN_JULY = 0,   /* build 10116 (2026-07-23): evicts its own LRU at once, any state */
    RSIM_GEN_LATER,      /* after the LRU wait queue: waits for stopping models, queues loads */
    RSIM_GEN_NUM
} rsim_gen;

/* What the adapter does with an rsim_resp. */
typedef enum rsim_action {
    RSIM_RESPOND = 0, RSIM_DEFER, RSIM_STREAM, RSIM_HANG, RSIM_CHUNK, RSIM_END, RSIM_DROP
} rsim_action;

/* Router/server model states (wire.md 1.4). */
typedef enum rsim_state {
    RSIM_UNLOADED = 0, RSIM_LOADING, RSIM_LOADED, RSIM_SLEEPING, RSIM_DOWNLOADING
} rsim_state;

/* One HTTP request as the adapter saw it. Lengths of 0 mean strlen (body: 0 = empty). */
typedef struct rsim_req {
    const char *method;        /* "GET", "POST", "DELETE", "HEAD" */
    size_t method_len;
    const char *target;        /* "/path?query" */
    size_t target_len;
    const char *body;
    size_t body_len;
    const char *authorization; /* Authorization header value, or NULL */
    size_t authorization_len;
    const char *x_api_key;     /* X-Api-Key header value, or NULL */
    size_t x_api_key_len;
    const char *file_data;     /* POST /slots/N?action=restore: the named file's bytes, read by */
    size_t file_len;           /* the adapter from --slot-save-path (file_found false: none) */
    bool file_found;
} rsim_req;

/* An answer or a stream instruction. The caller sets body/body_cap. */
typedef struct rsim_resp {
    int action;                /* rsim_action */
    int status;
    const char *content_type;  /* static string */
    const char *server;        /* value of a Server: header, or NULL for none */
    char *body;                /* caller buffer */
    size_t body_cap;
    size_t body_len;
    bool truncate;             /* send head with the full length, then body[0..truncate_at), close */
    size_t truncate_at;
    uint32_t ticket;           /* DEFER/STREAM/HANG from rsim_handle; every rsim_pull output */
    const char *keep_alive;    /* value of a Keep-Alive: header, or NULL for none */
    bool connection_close;     /* send "Connection: close" (the socket stays usable, as llama.cpp's) */
    bool close_after;          /* RESPOND/STREAM: chunked body, "Connection: close", then close
                                  the socket (what the router does with every proxied answer) */
    const char *file_name;     /* POST /slots/N?action=save answered (from rsim_handle, or
                                  from rsim_pull when a router loaded the model first): the
                                  adapter writes file_data[0..file_len) to
                                  --slot-save-path/file_name (with the process umask, as
                                  llama-server) and answers 500 when it cannot; NULL = no file */
    const char *file_data;
    size_t file_len;
} rsim_resp;

typedef struct rsim_inst {      /* LM Studio loaded instance */
    char id[RSIM_NAME_MAX];
    uint32_t ctx;
    bool jit;
    uint64_t ttl_ms;           /* 0 = none */
    uint64_t last_ms;
    int inflight;
    bool echo_cfg;
} rsim_inst;

typedef struct rsim_model {
    char id[RSIM_NAME_MAX];
    char aliases[RSIM_MAX_ALIASES][RSIM_NAME_MAX];
    int naliases;
    char tags[RSIM_MAX_TAGS][RSIM_TAG_MAX];
    int ntags;
    char host[RSIM_TAG_MAX];   /* LM Studio LM Link host of this entry; "" = this server */
    char publisher[RSIM_TAG_MAX];
    uint64_t size_bytes;
    uint32_t ctx, ctx_train;
    uint32_t load_ms;          /* 0 = the global --load-ms */
    uint32_t download_ms;      /* router: "downloading" for this long after start */
    uint32_t child_download_ms; /* router: a load's child downloads its model first, this long */
    bool child_downloading;    /* that download is running (the load goes on after it) */
    bool broken, startup, preloaded, embedding, removed;
    int64_t keep_cfg_ms;       /* Ollama keep=, -2 = unset, -1 = forever */
    /* router, server and Ollama runner state */
    int state;                 /* rsim_state */
    bool failed;
    int exit_code;
    bool ever_ready;
    int port;
    uint64_t due_ms;           /* end of the current transition (load, stop, wake) */
    bool stopping, waking, will_fail, oom_retried;
    int stop_exit;
    uint64_t last_used_ms, last_task_ms;
    uint64_t loaded_at_ms;     /* s->now when it last became loaded (valid when loads_done > 0) */
    uint32_t loads_done;       /* transitions to loaded: finished loads, wakes, Ollama preloads */
    int inflight;
    uint32_t queue_seq;        /* >0: waiting for capacity, FIFO by this number */
    /* Ollama */
    bool forever;
    uint64_t keep_ms, expires_ms;
    uint32_t num_ctx;
    /* LM Studio */
    rsim_inst inst[RSIM_MAX_INST];
    int ninst;
    uint32_t slot_kv[4];       /* router: the prompt tokens each of the child's slots holds */
    int jit_loading;           /* JIT loads in flight (more than 1 only with --jit-race) */
    int loads_pending;         /* explicit REST loads in flight (VRAM reservation) */
    uint64_t jit_ttl_ms;
} rsim_model;

/* A piece of a prompt as the server mode's KV cache sees it: one chat message (or the
   whole prompt string), by hash, worth n tokens (4 + bytes / 4). */
typedef struct rsim_chunk { uint64_t h; uint32_t n; } rsim_chunk;
enum { RSIM_PROMPT_MAX = 40, RSIM_KV_MAX = 48, RSIM_KV_FILE_MAX = 32 + 32 * RSIM_KV_MAX };

typedef struct rsim_reply {     /* what a request will answer, rendered at send time */
    int out;                   /* rsim_out_kind */
    int status;
    int model, inst, slot;
    bool stream, flag;
    int sub;                   /* variant of `out` (Ollama: 0 generate, 1 chat, 2 embed, 3 embeddings) */
    uint64_t n;
    int64_t keep;              /* Ollama keep_alive ms for this request (-1 forever, -2 default) */
    uint32_t ctx;
    char msg[RSIM_MSG_MAX];
    char aux[RSIM_NAME_MAX];
    int want_slot;             /* server: the body's id_slot (or the erase's slot), -1 none */
    bool erase;                /* server: POST /slots/N?action=erase waiting for slot N */
    int nprompt;               /* server: the prompt's chunks (0 = not a chat/completion) */
    rsim_chunk prompt[RSIM_PROMPT_MAX];
    uint32_t cache_n, prompt_n; /* server: timings of the answer (tokens reused / processed);
                                  Ollama: prompt_eval_count */
    uint64_t t0_ms, loaded_ms; /* Ollama: when it came and when its model was ready (durations) */
    uint64_t in_hash;          /* Ollama: its prompt or input, hashed (context, embeddings) */
    uint32_t ninput;           /* Ollama /api/embed: how many inputs */
    uint32_t ping_ms;          /* later generation: a keep-alive comment frame this often in a stream (0 = none) */
    int slot_act;              /* router: a slot request its child answers when it is up (rsim_sa) */
    int slot_res;              /* router restore: its file's verdict (rsim_slot_parse) */
    uint32_t slot_len;         /* router restore: its file's bytes */
} rsim_reply;

enum rsim_sa { RSIM_SA_NONE, RSIM_SA_ERR, RSIM_SA_SAVE, RSIM_SA_RESTORE };

typedef struct rsim_ticket {
    uint32_t id;               /* 0 = free */
    int op;                    /* rsim_op */
    int phase;
    uint64_t at_ms;            /* timer of the current phase */
    uint64_t end_ms;           /* stream: when the model is released */
    int log;                   /* log index, -1 none */
    int step, nsteps;
    uint32_t cursor;           /* SSE */
    uint64_t ping_at;          /* stream: when the next keep-alive comment frame goes out (r.ping_ms) */
    bool holds, task, drop, chat, post;
    uint32_t delay_ms;         /* --delay/--delay-ms still to add before the answer goes out */
    int victim;                /* July router load: the model it waits for to exit, -1 none */
    bool stalled;              /* its child was told to exit while serving it: nothing more comes */
    bool cut;                  /* July: its child died mid-stream: the proxy error chunk, then the end */
    bool proxied;              /* answered by a router child: chunked and closed (close_after) */
    rsim_reply r;
} rsim_ticket;

typedef struct rsim_log_entry {
    char method[8];
    char path[64];
    char model[RSIM_NAME_MAX];
    int status;                /* 0 while pending; -1 hang/cancelled; the status sent */
    uint64_t t_ms;
} rsim_log_entry;

typedef struct rsim_event {     /* router SSE event */
    int model;                 /* -1 = "*" */
    int kind;                  /* rsim_ev_kind */
    int status;                /* rsim_state for status events */
    int progress_pct;
    int exit_code;
    bool info;
} rsim_event;

typedef struct rsim_fault {
    char path[64];
    int kind;                  /* 1 error, 2 hang, 3 drop, 4 delay */
    int status;                /* error status, delay ms */
    int count;                 /* remaining, -1 = always */
} rsim_fault;

typedef struct rsim_opts {
    int runtime;
    int router_gen;            /* rsim_gen: 0 = July (build 10116) */
    uint32_t idle_close_ms;    /* idle keep-alive sockets closed after this; 0 = never */
    char keep_alive_hdr[40];   /* "timeout=5, max=100" (llama.cpp runtimes with idle_close_ms) */
    char host[64];
    int port;
    int models_max;            /* router: 4 by default, 0 unlimited */
    bool no_autoload, stop_hang, proxy_error, metrics, no_slots, slot_save;
    int sleep_idle_s;          /* -1 off */
    uint32_t load_ms, unload_ms, wake_ms, fail_ms, gen_ms, token_ms, stop_timeout_ms;
    uint32_t delay_ms;
    char keys[RSIM_MAX_KEYS][64];
    int nkeys;
    int fail_loads;
    int limit_loads;           /* later router: the next N loads answer 500 model limit reached (#28774) */
    int refuse_loads;          /* later router: the next N loads or proxied requests after an eviction
                                  answer 500 "proxy error: Could not establish connection" (#28698) */
    char remove_after_list[RSIM_NAME_MAX], evict_after_list[RSIM_NAME_MAX];
    uint64_t epoch_s;
    int parallel;              /* server */
    uint32_t ctx;              /* server */
    int max_loaded;            /* ollama */
    uint64_t mem_budget, vram_budget;
    int64_t keep_alive_ms;     /* ollama default, -1 forever */
    uint32_t linger_ms;
    char version[32];
    int queue_max;
    bool lms_v03, idempotent, legacy_shape, error_string, unknown_404, no_jit, no_auto_evict,
         jit_race, no_greeting;
    uint32_t jit_ttl_s;
    int fail_load_status;
    char pending_alias[RSIM_NAME_MAX]; /* -a given before -m */
} rsim_opts;

typedef struct rsim_slot {
    bool busy, used;
    int id_task;
    uint64_t last;             /* task counter when last used (llama.cpp's LRU pick) */
    int nkv;                   /* what its KV cache holds: the last prompt and its answer */
    rsim_chunk kv[RSIM_KV_MAX];
} rsim_slot;

typedef struct rsim {
    rsim_opts o;
    rsim_model m[RSIM_MAX_MODELS];
    int nmodels;
    rsim_fault faults[RSIM_MAX_FAULTS];
    int nfaults;
    rsim_ticket t[RSIM_MAX_TICKETS];
    uint32_t next_ticket;
    rsim_log_entry log[RSIM_LOG_MAX];
    uint32_t log_total;        /* entries ever written; the ring keeps the last RSIM_LOG_MAX */
    rsim_event ev[RSIM_EVENTS_MAX];
    uint32_t ev_seq;           /* events ever emitted */
    rsim_slot slots[RSIM_MAX_SLOTS];
    int task_seq;
    uint64_t now;
    uint32_t queue_seq, port_seq;
    bool file_write;           /* a slot was saved: file_name, file_data, for ticket file_ticket's answer */
    uint32_t file_ticket;
    char file_name[RSIM_NAME_MAX];
    char file_data[RSIM_KV_FILE_MAX];
    size_t file_len;
    bool started;
    bool evicted;              /* a running model was stopped since the last load or proxied request */
    uint64_t cold_at;          /* later: 1 + the time an explicit load last took a free place (0 = never) */
    int exit_code;             /* server mode: -1 running, else the exit status */
    uint64_t ready_ms;         /* server mode: when the model loaded */
    char err[160];             /* rsim_configure error text */
    rsd_json_tok toks[RSIM_MAX_TOKENS]; /* the current request body */
} rsim;

#define RSIM_FOREVER_MS ((uint64_t)9223372036854ull)

/* Prints the options of rsim_configure (what `rsd-sim --help` shows). */
RSIM_FN void rsim_print_usage(FILE *f) {
    static const char *const lines[] = {
        "  common\n",
        "    --runtime router|server|ollama|lmstudio   (default router)\n",
        "    --host H --port N           stored for the adapter (s->o.host, s->o.port)\n",
        "    --model SPEC                add a model; SPEC is comma-separated key=value:\n",
        "                                id=NAME (required; bare first field also works),\n",
        "                                size=4G (bytes, K/M/G/T suffixes, binary),\n",
        "                                tags=pinned|role (| or + separated; tag=x repeats),\n",
        "                                alias=x (repeats), ctx=N (load context), ctx_train=N,\n",
        "                                load=MS (load latency override), fail=1 (every load\n",
        "                                fails), download=MS (router: \"downloading\" that long), startup=1 (load-on-startup), loaded=1 (resident\n",
        "                                at start: Ollama/LM Studio), embedding=1, host=NAME (LM\n",
        "                                Link peer entry), publisher=P, keep=DUR (Ollama),\n",
        "                                child_download=MS (router: a load's child downloads first:\n",
        "                                listed \"downloading\" that long, then \"loading\")\n",
        "    --load-ms N                 load latency (300)\n",
        "    --unload-ms N               graceful stop / Ollama unload latency (10)\n",
        "    --wake-ms N                 reload latency when waking from sleep (100)\n",
        "    --fail-ms N                 time until a failing load is reported (10)\n",
        "    --gen-ms N                  non-streamed inference time (20)\n",
        "    --token-ms N                time between streamed chunks (5)\n",
        "    --api-key KEY               router/server: Bearer or X-Api-Key; LM Studio: Bearer\n",
        "    --fail-loads N              the next N loads fail\n",
        "    --delay-ms N                add N ms to every immediate answer\n",
        "    --delay PATH=MS             add MS to answers on PATH\n",
        "    --error PATH=STATUS[xN]     answer STATUS (server error body) on PATH [N times]\n",
        "    --hang PATH[xN]             never answer PATH [N times]; PATH?Q: with a query\n"
        "                                that begins with Q (/slots/0?action=restore)\n",
        "    --drop PATH[xN]             drop the connection mid-body on PATH [N times]\n",
        "    --remove-after-list ID      after the next listing, ID leaves the catalog\n",
        "    --evict-after-list ID       after the next listing, ID is unloaded by \"someone else\"\n",
        "    --epoch S                   wall clock (unix seconds) at now_ms == 0 (1795993600)\n",
        "  --idle-close-ms N           router/server: idle keep-alive sockets are closed after N ms and\n",
        "                              answers say \"Keep-Alive: timeout=ceil(N/1000), max=100\" (5000,\n",
        "                              as llama.cpp; 0 = never, no header). Both modes also say\n",
        "                              \"Connection: close\" on every 4xx/5xx (the socket stays usable),\n",
        "                              and the router closes the socket after every proxied answer\n",
        "                              (chunked, \"Connection: close\"). Ollama/LM Studio: 0\n",
        "  router (llama.cpp, wire.md 1, W1-W20)\n",
        "    --router-gen july|later   which router generation (default july: build 10116, the one\n",
        "                                measured in spec/wire.md 6). july: at --models-max a load (or an\n",
        "                                autoload) stops the LRU running model at once, whatever it does\n",
        "                                (loading: killed; busy: its requests stall, it is killed at the\n",
        "                                stop timeout, streams end with \"proxy error: Failed to read\n",
        "                                connection\"; stopping: still counts; tags ignored), answers when\n",
        "                                it has exited, then checks the limit again (500 when a concurrent\n",
        "                                load took the place); listing sorted by id, data first;\n",
        "                                vocab_type 1; build b10116-7e743c3a3; timings in chat answers.\n",
        "                                later: a load waits for a stopping model, else stops the LRU idle\n",
        "                                one, else waits (queued) until one is idle; busy and loading\n",
        "                                models are never victims; listing in catalog order, object first;\n",
        "                                vocab_type true; build_info \"0.4.0-dev (build 11037, commit\n",
        "                                0000000)\" (the new version form); /models/sse loading progress\n",
        "                                {\"stage\":\"fit_params\"|\"text_model\",\"value\":V}; streams carry comment-only\n",
        "                                keep-alive frames (\":\" and a blank line): one first, then one\n",
        "                                every second, or every sse_ping_interval seconds of the body\n",
        "    --models-max N (4; 0 unlimited)  --no-models-autoload (--models-autoload: on again)\n",
        "    --sleep-idle-seconds N\n",
        "    --stop-timeout-ms N (10000)  --stop-hang (graceful stops hang until the timeout,\n",
        "    then force-kill with exit 1)  --proxy-error (loading child answers 500 plain text)\n",
        "    --metrics\n",
        "    --limit-loads N  later: the next N loads answer 500 {\"message\":\"model limit reached, try\n",
        "                     again later\"} (concurrent cold loads, build 11037, llama.cpp #28774); so\n",
        "                     does, without the option, a load that finds no room in the same\n",
        "                     millisecond as another load took the last free place\n",
        "    --refuse-loads N later: the next N loads or proxied requests that come right after an\n",
        "                     eviction answer 500 text/plain \"proxy error: Could not establish\n",
        "                     connection\" (before PR #29217, #28698)\n",
        "  server (single-model llama-server, wire.md 2, W21-W28)\n",
        "    first --model is the model (id = path or alias)  --parallel N (4)  --ctx N\n",
        "    --no-slots  --metrics  --sleep-idle-seconds N  (fail=1 on the model: exit 1)\n",
        "    llama-server spellings work too: -m PATH, -c/--ctx-size N, -np N, -a/--alias A,B,\n",
        "    --slots; tuning flags (-ngl, -t, -fa, --jinja, --fit, ...) are accepted and ignored\n",
        "    --slot-save-path DIR (POST /slots/ID?action=erase|save|restore; saves are files in DIR)\n",
        "  ollama (wire.md 3, W30-W37)\n",
        "    --max-loaded N (3)  --mem-budget SIZE (0 = none)  --keep-alive DUR (5m)\n",
        "    --linger-ms N (50)  --version V (0.12.6)  --queue-max N (512)\n",
        "  lmstudio (wire.md 4, W38-W47)\n",
        "    --tier 0.4|0.3  --vram SIZE (0 = none; over it a load is 507)  --idempotent-load\n",
        "    --legacy-load-shape  --error-string (errors as {\"error\":\"text\"})\n",
        "    --unknown-route-404  --no-jit  --no-auto-evict  --jit-ttl-s N (3600)  --jit-race\n",
        "    --fail-load-status N (500)  --no-greeting (/lmstudio-greeting says not-lmstudio)\n"};
    size_t k;
    for (k = 0; k < sizeof lines / sizeof lines[0]; k++) fputs(lines[k], f);
}

/* ==== small utilities ==================================================== */
RSIM_FN size_t rsim_len(const char *p, size_t n) { return p ? (n ? n : strlen(p)) : 0; }

/* Replaces every byte that is not part of a well-formed UTF-8 sequence (overlongs,
   surrogates, > U+10FFFF, cut sequences) with '?', in place: echoed request bytes must
   stay writable as JSON strings. */
RSIM_FN void rsim_utf8_fix(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        unsigned c = p[0], need, k, cp;
        if (c < 0x80) { p++; continue; }
        need = c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : 0;
        cp = need == 1 ? (c & 0x1F) : need == 2 ? (c & 0x0F) : (c & 0x07);
        for (k = 1; need && k <= need; k++) {
            if ((p[k] & 0xC0) != 0x80) { need = 0; break; }
            cp = (cp << 6) | (p[k] & 0x3F);
        }
        if (need == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) need = 0;
        if (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)) need = 0;
        if (!need) { *p++ = '?'; continue; }
        p += need + 1;
    }
}

/* Bounded copy, NUL-terminated, made valid UTF-8. */
RSIM_FN void rsim_cpy(char *dst, size_t cap, const char *src, size_t n) {
    if (!cap) return;
    if (!src) n = 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = 0;
    rsim_utf8_fix(dst);
}

RSIM_FN bool rsim_eqn(const char *a, size_t an, const char *b) {
    size_t bn = strlen(b);
    return an == bn && memcmp(a, b, an) == 0;
}

RSIM_FN bool rsim_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* A byte size as rapp_parse_size reads it ("123", "4G", "1.5GB", "512M", "2KiB"). 0 on error. */
RSIM_FN uint64_t rsim_parse_size(const char *s) {
    uint64_t v;
    return rapp_parse_size(s, strlen(s), UINT64_MAX, &v) ? v : 0;
}

/* Go duration as rapp_parse_duration reads it ("5m", "1h30m", "300ms", "0"), or a bare
   JSON number of seconds when `bare_seconds`, after an optional sign: a negative one is
   forever ("-1s", "-5m": *ms = -1; "-0" is 0). False on a bad string. */
RSIM_FN bool rsim_parse_duration(const char *s, size_t n, bool bare_seconds, int64_t *ms) {
    bool neg = n && s[0] == '-';
    uint64_t v;
    if (n && (s[0] == '-' || s[0] == '+')) { s++; n--; }
    if (!rapp_parse_duration(s, n, bare_seconds, (uint64_t)INT64_MAX, &v)) return false;
    *ms = neg && v ? -1 : (int64_t)v;
    return true;
}

/* Unix seconds + ms to "YYYY-MM-DDTHH:MM:SS.mmm000000Z" (Go RFC3339Nano, UTC). */
RSIM_FN void rsim_rfc3339(uint64_t unix_ms, char *out, size_t cap) {
    int64_t secs = (int64_t)(unix_ms / 1000), days = secs / 86400, rem = secs % 86400;
    int64_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400, doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1, mo = mp < 10 ? mp + 3 : mp - 9;
    if (mo <= 2) y++;
    snprintf(out, cap, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03u000000Z", (long long)y,
             (long long)mo, (long long)d, (long long)(rem / 3600), (long long)(rem / 60 % 60),
             (long long)(rem % 60), (unsigned)(unix_ms % 1000));
}

/* ==== JSON through residency.h (rsd_json_writer, rsd_json_parse) ============ */
typedef rsd_json_writer rsim_w;

RSIM_FN void rsim_w_obj(rsim_w *w) { (void)rsd_json_w_begin_object(w); }
RSIM_FN void rsim_w_obj_end(rsim_w *w) { (void)rsd_json_w_end_object(w); }
RSIM_FN void rsim_w_arr(rsim_w *w) { (void)rsd_json_w_begin_array(w); }
RSIM_FN void rsim_w_arr_end(rsim_w *w) { (void)rsd_json_w_end_array(w); }
RSIM_FN void rsim_w_key(rsim_w *w, const char *k) { (void)rsd_json_w_key(w, k); }
RSIM_FN void rsim_w_str(rsim_w *w, const char *v) { (void)rsd_json_w_str(w, v); }
RSIM_FN void rsim_w_int(rsim_w *w, int64_t v) { (void)rsd_json_w_int(w, v); }
RSIM_FN void rsim_w_num(rsim_w *w, double v) { (void)rsd_json_w_double(w, v); }
RSIM_FN void rsim_w_bool(rsim_w *w, bool v) { (void)rsd_json_w_bool(w, v); }
RSIM_FN void rsim_w_null(rsim_w *w) { (void)rsd_json_w_null(w); }
/* A JSON value written in this file (or built by the writer). */
RSIM_FN void rsim_w_json(rsim_w *w, const char *json) { (void)rsd_json_w_raw(w, json, strlen(json)); }
RSIM_FN void rsim_w_kstr(rsim_w *w, const char *k, const char *v) { rsim_w_key(w, k); rsim_w_str(w, v); }
RSIM_FN void rsim_w_kint(rsim_w *w, const char *k, int64_t v) { rsim_w_key(w, k); rsim_w_int(w, v); }
RSIM_FN void rsim_w_kbool(rsim_w *w, const char *k, bool v) { rsim_w_key(w, k); rsim_w_bool(w, v); }
RSIM_FN void rsim_w_kjson(rsim_w *w, const char *k, const char *v) { rsim_w_key(w, k); rsim_w_json(w, v); }

/* Appends plain bytes (text bodies, SSE framing) to resp->body; false when full. */
RSIM_FN bool rsim_put(rsim_resp *resp, const char *text) {
    size_t n = strlen(text);
    if (!resp->body || resp->body_len + n + 1 > resp->body_cap) return false;
    memcpy(resp->body + resp->body_len, text, n + 1);
    resp->body_len += n;
    return true;
}

/* ==== internal enums ====================================================== */
enum rsim_op {
    RSIM_OP_FREE = 0,
    RSIM_OP_DONE,      /* reply ready: the next rsim_pull sends it */
    RSIM_OP_TIMER,     /* reply ready at at_ms (added delays) */
    RSIM_OP_HANG,      /* never answers */
    RSIM_OP_R_LOAD,    /* router POST /models/load waiting for a victim to stop */
    RSIM_OP_WAIT,      /* waiting for r.model to be ready, then served */
    RSIM_OP_GEN,       /* served; the reply is sent at at_ms */
    RSIM_OP_STREAM,    /* served as a stream: head, chunks every token_ms, end */
    RSIM_OP_SSE,       /* /models/sse subscriber */
    RSIM_OP_L_LOAD     /* LM Studio REST load finishing at at_ms */
};

enum rsim_out_kind {
    RSIM_O_NONE = 0, RSIM_O_RAW, RSIM_O_TEXT, RSIM_O_PLAIN_JSON, RSIM_O_LERR, RSIM_O_LERR_MW,
    RSIM_O_FLAT, RSIM_O_LMS_ERR, RSIM_O_R_MODELS, RSIM_O_R_PROPS, RSIM_O_CHAT, RSIM_O_OAI_COMPL,
    RSIM_O_COMPLETION, RSIM_O_TOKENIZE, RSIM_O_EMBED, RSIM_O_C_PROPS, RSIM_O_C_SLOTS,
    RSIM_O_C_MODELS, RSIM_O_METRICS, RSIM_O_O_TAGS, RSIM_O_O_PS, RSIM_O_O_GEN, RSIM_O_O_SHOW,
    RSIM_O_L_MODELS, RSIM_O_L_V0, RSIM_O_L_OAI_MODELS, RSIM_O_L_LOAD, RSIM_O_L_CHAT,
    RSIM_O_SIM_LOG, RSIM_O_SSE_HEAD
};

enum rsim_ev_kind { RSIM_EV_MODEL_STATUS = 1, RSIM_EV_STATUS_CHANGE, RSIM_EV_RELOAD };

enum rsim_fault_kind { RSIM_F_ERROR = 1, RSIM_F_HANG, RSIM_F_DROP, RSIM_F_DELAY };

#define RSIM_CT_JSON "application/json; charset=utf-8"
#define RSIM_CT_TEXT "text/plain; charset=utf-8"
#define RSIM_CT_SSE "text/event-stream"
#define RSIM_CT_NDJSON "application/x-ndjson"
#define RSIM_CT_METRICS "text/plain; version=0.0.4"

static const char *const rsim_state_names[] = {"unloaded", "loading", "loaded", "sleeping",
                                               "downloading"};
static const char *const rsim_tokens[] = {"This", " is", " a", " simulated", " reply."};
enum { RSIM_NTOK = 5, RSIM_EMBED_DIM = 8 };

/* ==== configuration ======================================================= */
/* Sets the idle close time and the Keep-Alive header that announces it (llama.cpp's
   HTTP layer: "timeout=5, max=100"; none for the other runtimes or 0 = never). */
RSIM_FN void rsim_set_idle_close(rsim *s, uint32_t ms) {
    s->o.idle_close_ms = ms;
    s->o.keep_alive_hdr[0] = 0;
    if (ms && (s->o.runtime == RSIM_RT_ROUTER || s->o.runtime == RSIM_RT_SERVER))
        snprintf(s->o.keep_alive_hdr, sizeof s->o.keep_alive_hdr, "timeout=%u, max=100", (unsigned)((ms + 999) / 1000));
}

/* Zeroes s and sets the defaults of `runtime`. */
RSIM_FN void rsim_init(rsim *s, int runtime) {
    memset(s, 0, sizeof *s);
    s->o.runtime = runtime;
    snprintf(s->o.host, sizeof s->o.host, "127.0.0.1");
    s->o.port = runtime == RSIM_RT_OLLAMA ? 11434 : runtime == RSIM_RT_LMSTUDIO ? 1234 : 8080;
    s->o.models_max = 4;
    s->o.router_gen = RSIM_GEN_JULY;
    s->o.idle_close_ms = runtime == RSIM_RT_ROUTER || runtime == RSIM_RT_SERVER ? 5000 : 0;
    s->o.sleep_idle_s = -1;
    s->o.load_ms = 300;
    s->o.unload_ms = 10;
    s->o.wake_ms = 100;
    s->o.fail_ms = 10;
    s->o.gen_ms = 20;
    s->o.token_ms = 5;
    s->o.stop_timeout_ms = 10000;
    s->o.epoch_s = 1795993600ull;
    s->o.parallel = 4;
    s->o.max_loaded = 3;
    s->o.keep_alive_ms = 5 * 60 * 1000;
    s->o.linger_ms = 50;
    snprintf(s->o.version, sizeof s->o.version, "0.12.6");
    s->o.queue_max = 512;
    s->o.jit_ttl_s = 3600;
    s->o.fail_load_status = 500;
    s->exit_code = -1;
    s->next_ticket = 1;
    rsim_set_idle_close(s, s->o.idle_close_ms);
}

RSIM_FN int rsim_cmp_str(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* Adds a model from "id=a,size=4G,tags=pinned|role,alias=x,ctx=8192,..."; index or -1. */
RSIM_FN int rsim_add_model(rsim *s, const char *spec) {
    rsim_model *m;
    const char *p = spec;
    if (s->nmodels >= RSIM_MAX_MODELS) { snprintf(s->err, sizeof s->err, "too many models"); return -1; }
    m = &s->m[s->nmodels];
    memset(m, 0, sizeof *m);
    m->size_bytes = 4ull << 30;
    m->ctx = 0;
    m->ctx_train = 131072;
    m->keep_cfg_ms = -2;
    while (*p) {
        char key[32], val[RSIM_NAME_MAX];
        const char *e = strchr(p, ','), *eq;
        size_t n = e ? (size_t)(e - p) : strlen(p);
        eq = (const char *)memchr(p, '=', n);
        if (eq) {
            rsim_cpy(key, sizeof key, p, (size_t)(eq - p));
            rsim_cpy(val, sizeof val, eq + 1, n - (size_t)(eq - p) - 1);
        } else {
            rsim_cpy(key, sizeof key, "id", 2);
            rsim_cpy(val, sizeof val, p, n);
        }
        if (!strcmp(key, "id")) rsim_cpy(m->id, sizeof m->id, val, strlen(val));
        else if (!strcmp(key, "size")) m->size_bytes = rsim_parse_size(val);
        else if (!strcmp(key, "tags") || !strcmp(key, "tag")) {
            char *q = val;
            while (*q && m->ntags < RSIM_MAX_TAGS) {
                size_t k = strcspn(q, "|+");
                if (k) rsim_cpy(m->tags[m->ntags++], RSIM_TAG_MAX, q, k);
                q += k;
                if (*q) q++;
            }
        } else if (!strcmp(key, "alias")) {
            if (m->naliases < RSIM_MAX_ALIASES) rsim_cpy(m->aliases[m->naliases++], RSIM_NAME_MAX, val, strlen(val));
        } else if (!strcmp(key, "ctx")) m->ctx = (uint32_t)strtoul(val, NULL, 10);
        else if (!strcmp(key, "ctx_train")) m->ctx_train = (uint32_t)strtoul(val, NULL, 10);
        else if (!strcmp(key, "load")) m->load_ms = (uint32_t)strtoul(val, NULL, 10);
        else if (!strcmp(key, "download")) m->download_ms = (uint32_t)strtoul(val, NULL, 10);
        else if (!strcmp(key, "child_download")) m->child_download_ms = (uint32_t)strtoul(val, NULL, 10);
        else if (!strcmp(key, "fail")) m->broken = atoi(val) != 0;
        else if (!strcmp(key, "startup")) m->startup = atoi(val) != 0;
        else if (!strcmp(key, "loaded")) m->preloaded = atoi(val) != 0;
        else if (!strcmp(key, "embedding")) m->embedding = atoi(val) != 0;
        else if (!strcmp(key, "host")) rsim_cpy(m->host, sizeof m->host, val, strlen(val));
        else if (!strcmp(key, "publisher")) rsim_cpy(m->publisher, sizeof m->publisher, val, strlen(val));
        else if (!strcmp(key, "keep")) {
            int64_t ms;
            if (!rsim_parse_duration(val, strlen(val), true, &ms)) { snprintf(s->err, sizeof s->err, "bad keep= in %s", spec); return -1; }
            m->keep_cfg_ms = ms;
        } else { snprintf(s->err, sizeof s->err, "unknown model key '%s'", key); return -1; }
        p += n;
        if (*p) p++;
    }
    if (!m->id[0]) { snprintf(s->err, sizeof s->err, "model spec without id: %s", spec); return -1; }
    if (!m->ctx) m->ctx = m->ctx_train < 4096 ? m->ctx_train : 4096;
    if (!m->publisher[0]) {
        const char *sl = strchr(m->id, '/');
        if (sl) rsim_cpy(m->publisher, sizeof m->publisher, m->id, (size_t)(sl - m->id));
        else snprintf(m->publisher, sizeof m->publisher, "lmstudio-community");
    }
    qsort(m->tags, (size_t)m->ntags, RSIM_TAG_MAX, rsim_cmp_str);
    qsort(m->aliases, (size_t)m->naliases, RSIM_NAME_MAX, rsim_cmp_str);
    return s->nmodels++;
}

/* "PATH[=V][xN]" into a fault. */
RSIM_FN int rsim_add_fault(rsim *s, int kind, const char *spec) {
    rsim_fault *f;
    const char *x, *eq;
    size_t pl;
    if (s->nfaults >= RSIM_MAX_FAULTS) { snprintf(s->err, sizeof s->err, "too many faults"); return -1; }
    f = &s->faults[s->nfaults];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->count = -1;
    eq = kind == RSIM_F_ERROR || kind == RSIM_F_DELAY ? strrchr(spec, '=') : NULL; /* PATH may hold a query */
    x = strrchr(spec, 'x');
    if (x && !(x[1] >= '0' && x[1] <= '9')) x = NULL;
    if (x && eq && x < eq) x = NULL;
    pl = eq ? (size_t)(eq - spec) : x ? (size_t)(x - spec) : strlen(spec);
    rsim_cpy(f->path, sizeof f->path, spec, pl);
    if (eq) f->status = atoi(eq + 1);
    if (x) f->count = atoi(x + 1);
    if ((kind == RSIM_F_ERROR || kind == RSIM_F_DELAY) && !eq) {
        snprintf(s->err, sizeof s->err, "fault needs PATH=VALUE: %s", spec);
        return -1;
    }
    s->nfaults++;
    return 0;
}

/* "-a x,y" (llama-server): aliases of the last model. */
RSIM_FN int rsim_add_alias(rsim *s, const char *list) {
    rsim_model *m;
    if (!s->nmodels) { /* llama-server takes flags in any order: keep it for the model */
        rsim_cpy(s->o.pending_alias, sizeof s->o.pending_alias, list, strlen(list));
        return 0;
    }
    m = &s->m[s->nmodels - 1];
    while (*list && m->naliases < RSIM_MAX_ALIASES) {
        size_t k = strcspn(list, ",");
        if (k) rsim_cpy(m->aliases[m->naliases++], RSIM_NAME_MAX, list, k);
        list += k;
        if (*list) list++;
    }
    qsort(m->aliases, (size_t)m->naliases, RSIM_NAME_MAX, rsim_cmp_str);
    return 0;
}

/* llama-server flags accepted and ignored; *takes_value says whether one follows. */
RSIM_FN bool rsim_ignored_flag(const char *a, bool *takes_value) {
    static const char *const with_value[] = {"-ngl", "--n-gpu-layers", "-t", "--threads", "-to", "--timeout",
                                             "-fit", "--fit", "-b", "--batch-size", "-ub", "--ubatch-size",
                                             "--mmproj", "-fa", "--flash-attn", "--cache-type-k", "--cache-type-v",
                                             "-ctk", "-ctv", "--tags", "--chat-template", "--reasoning-format"};
    static const char *const no_value[] = {"--jinja", "--no-mmap", "--mlock", "--cont-batching", "--no-webui",
                                           "--verbose", "-v", "--log-disable", "--props", "--no-warmup"};
    size_t k;
    for (k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
        if (!strcmp(a, with_value[k])) { *takes_value = true; return true; }
    for (k = 0; k < sizeof no_value / sizeof no_value[0]; k++)
        if (!strcmp(a, no_value[k])) { *takes_value = false; return true; }
    return false;
}

/* Parses command-line options (argv[0] is skipped); 0 ok, -1 with s->err set. Call
   rsim_init first or not at all (then the runtime comes from --runtime). */
RSIM_FN int rsim_configure(rsim *s, int argc, char **argv) {
    int i, rt = RSIM_RT_ROUTER;
    for (i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--runtime")) {
            const char *v = argv[i + 1];
            if (!strcmp(v, "router")) rt = RSIM_RT_ROUTER;
            else if (!strcmp(v, "server")) rt = RSIM_RT_SERVER;
            else if (!strcmp(v, "ollama")) rt = RSIM_RT_OLLAMA;
            else if (!strcmp(v, "lmstudio")) rt = RSIM_RT_LMSTUDIO;
            else { rsim_init(s, rt); snprintf(s->err, sizeof s->err, "unknown runtime '%s'", v); return -1; }
        }
    rsim_init(s, rt);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool used = true;
#define RSIM_FLAG(name, stmt) if (!strcmp(a, name)) { stmt; continue; }
#define RSIM_OPT(name, stmt) if (!strcmp(a, name)) { if (!v) { snprintf(s->err, sizeof s->err, "%s needs a value", a); return -1; } stmt; i++; continue; }
        RSIM_OPT("--runtime", (void)0)
        RSIM_OPT("--host", rsim_cpy(s->o.host, sizeof s->o.host, v, strlen(v)))
        RSIM_OPT("--port", s->o.port = atoi(v))
        RSIM_OPT("--model", if (rsim_add_model(s, v) < 0) return -1)
        RSIM_OPT("--models-max", s->o.models_max = atoi(v))
        RSIM_OPT("--router-gen", if (!strcmp(v, "july")) s->o.router_gen = RSIM_GEN_JULY;
                 else if (!strcmp(v, "later")) s->o.router_gen = RSIM_GEN_LATER;
                 else { snprintf(s->err, sizeof s->err, "unknown router generation '%s' (july|later)", v); return -1; })
        RSIM_OPT("--idle-close-ms", s->o.idle_close_ms = (uint32_t)strtoul(v, NULL, 10))
        RSIM_FLAG("--no-models-autoload", s->o.no_autoload = true)
        RSIM_FLAG("--models-autoload", s->o.no_autoload = false)
        RSIM_OPT("--sleep-idle-seconds", s->o.sleep_idle_s = atoi(v))
        RSIM_OPT("--load-ms", s->o.load_ms = (uint32_t)atoi(v))
        RSIM_OPT("--unload-ms", s->o.unload_ms = (uint32_t)atoi(v))
        RSIM_OPT("--wake-ms", s->o.wake_ms = (uint32_t)atoi(v))
        RSIM_OPT("--fail-ms", s->o.fail_ms = (uint32_t)atoi(v))
        RSIM_OPT("--gen-ms", s->o.gen_ms = (uint32_t)atoi(v))
        RSIM_OPT("--token-ms", s->o.token_ms = (uint32_t)atoi(v))
        RSIM_OPT("--stop-timeout-ms", s->o.stop_timeout_ms = (uint32_t)atoi(v))
        RSIM_FLAG("--stop-hang", s->o.stop_hang = true)
        RSIM_FLAG("--proxy-error", s->o.proxy_error = true)
        RSIM_FLAG("--metrics", s->o.metrics = true)
        RSIM_FLAG("--no-slots", s->o.no_slots = true)
        RSIM_OPT("--api-key", if (s->o.nkeys < RSIM_MAX_KEYS) rsim_cpy(s->o.keys[s->o.nkeys++], 64, v, strlen(v)))
        RSIM_OPT("--fail-loads", s->o.fail_loads = atoi(v))
        RSIM_OPT("--limit-loads", s->o.limit_loads = atoi(v))
        RSIM_OPT("--refuse-loads", s->o.refuse_loads = atoi(v))
        RSIM_OPT("--delay-ms", s->o.delay_ms = (uint32_t)atoi(v))
        RSIM_OPT("--delay", if (rsim_add_fault(s, RSIM_F_DELAY, v) < 0) return -1)
        RSIM_OPT("--error", if (rsim_add_fault(s, RSIM_F_ERROR, v) < 0) return -1)
        RSIM_OPT("--hang", if (rsim_add_fault(s, RSIM_F_HANG, v) < 0) return -1)
        RSIM_OPT("--drop", if (rsim_add_fault(s, RSIM_F_DROP, v) < 0) return -1)
        RSIM_OPT("--remove-after-list", rsim_cpy(s->o.remove_after_list, RSIM_NAME_MAX, v, strlen(v)))
        RSIM_OPT("--evict-after-list", rsim_cpy(s->o.evict_after_list, RSIM_NAME_MAX, v, strlen(v)))
        RSIM_OPT("--epoch", s->o.epoch_s = strtoull(v, NULL, 10))
        RSIM_OPT("--parallel", s->o.parallel = atoi(v))
        RSIM_OPT("--ctx", s->o.ctx = (uint32_t)atoi(v))
        /* llama-server's own spellings, so rsd-sim can stand in for it (pool tests) */
        RSIM_OPT("-m", if (rsim_add_model(s, v) < 0) return -1)
        RSIM_OPT("-c", s->o.ctx = (uint32_t)atoi(v))
        RSIM_OPT("--ctx-size", s->o.ctx = (uint32_t)atoi(v))
        RSIM_OPT("-np", s->o.parallel = atoi(v))
        RSIM_OPT("-a", if (rsim_add_alias(s, v) < 0) return -1)
        RSIM_OPT("--alias", if (rsim_add_alias(s, v) < 0) return -1)
        RSIM_FLAG("--slots", s->o.no_slots = false)
        RSIM_OPT("--slot-save-path", s->o.slot_save = true)
        if (rsim_ignored_flag(a, &used)) { if (used) { if (!v) { snprintf(s->err, sizeof s->err, "%s needs a value", a); return -1; } i++; } continue; }
        RSIM_OPT("--max-loaded", s->o.max_loaded = atoi(v))
        RSIM_OPT("--mem-budget", s->o.mem_budget = rsim_parse_size(v))
        RSIM_OPT("--vram", s->o.vram_budget = rsim_parse_size(v))
        RSIM_OPT("--keep-alive", if (!rsim_parse_duration(v, strlen(v), true, &s->o.keep_alive_ms)) { snprintf(s->err, sizeof s->err, "bad --keep-alive"); return -1; })
        RSIM_OPT("--linger-ms", s->o.linger_ms = (uint32_t)atoi(v))
        RSIM_OPT("--version", rsim_cpy(s->o.version, sizeof s->o.version, v, strlen(v)))
        RSIM_OPT("--queue-max", s->o.queue_max = atoi(v))
        RSIM_OPT("--tier", s->o.lms_v03 = !strcmp(v, "0.3"))
        RSIM_FLAG("--idempotent-load", s->o.idempotent = true)
        RSIM_FLAG("--legacy-load-shape", s->o.legacy_shape = true)
        RSIM_FLAG("--error-string", s->o.error_string = true)
        RSIM_FLAG("--unknown-route-404", s->o.unknown_404 = true)
        RSIM_FLAG("--no-jit", s->o.no_jit = true)
        RSIM_FLAG("--no-auto-evict", s->o.no_auto_evict = true)
        RSIM_FLAG("--jit-race", s->o.jit_race = true)
        RSIM_FLAG("--no-greeting", s->o.no_greeting = true)
        RSIM_OPT("--jit-ttl-s", s->o.jit_ttl_s = (uint32_t)atoi(v))
        RSIM_OPT("--fail-load-status", s->o.fail_load_status = atoi(v))
#undef RSIM_FLAG
#undef RSIM_OPT
        used = false;
        if (!used) { snprintf(s->err, sizeof s->err, "unknown option '%s'", a); return -1; }
    }
    if (s->o.parallel < 1 || s->o.parallel > RSIM_MAX_SLOTS) s->o.parallel = 4;
    rsim_set_idle_close(s, s->o.idle_close_ms);
    if (s->o.models_max < 0) s->o.models_max = 0;
    if (rt == RSIM_RT_SERVER && s->nmodels == 0) rsim_add_model(s, "id=/models/model.gguf");
    if (s->o.pending_alias[0] && s->nmodels) {
        char a[RSIM_NAME_MAX];
        memcpy(a, s->o.pending_alias, sizeof a);
        s->o.pending_alias[0] = 0;
        rsim_add_alias(s, a);
    }
    return 0;
}

/* ==== lookup ============================================================== */
/* Router/server: canonical id or alias. LM Studio: local entry by key. Ollama: tag-normalised. */
RSIM_FN int rsim_find(const rsim *s, const char *name) {
    int i, k;
    char a[RSIM_NAME_MAX + 8], b[RSIM_NAME_MAX + 8];
    if (!name || !name[0]) return -1;
    if (s->o.runtime == RSIM_RT_OLLAMA) {
        const char *sl = strrchr(name, '/');
        snprintf(a, sizeof a, "%s%s", name, strchr(sl ? sl : name, ':') ? "" : ":latest");
        for (i = 0; i < s->nmodels; i++) {
            const char *id = s->m[i].id;
            sl = strrchr(id, '/');
            snprintf(b, sizeof b, "%s%s", id, strchr(sl ? sl : id, ':') ? "" : ":latest");
            if (!s->m[i].removed && !strcmp(a, b)) return i;
        }
        return -1;
    }
    for (i = 0; i < s->nmodels; i++) {
        if (s->m[i].removed || s->m[i].host[0]) continue;
        if (!strcmp(s->m[i].id, name)) return i;
        for (k = 0; k < s->m[i].naliases; k++)
            if (!strcmp(s->m[i].aliases[k], name)) return i;
    }
    return -1;
}

/* Ollama display name: always with a tag. */
RSIM_FN void rsim_o_name(const rsim_model *m, char *out, size_t cap) {
    const char *sl = strrchr(m->id, '/');
    snprintf(out, cap, "%s%s", m->id, strchr(sl ? sl : m->id, ':') ? "" : ":latest");
}

/* ==== request log and SSE events ========================================== */
RSIM_FN int rsim_log_add(rsim *s, const char *method, const char *path) {
    int i = (int)(s->log_total % RSIM_LOG_MAX);
    rsim_log_entry *e = &s->log[i];
    memset(e, 0, sizeof *e);
    rsim_cpy(e->method, sizeof e->method, method, strlen(method));
    rsim_cpy(e->path, sizeof e->path, path, strlen(path));
    e->t_ms = s->now;
    s->log_total++;
    return i;
}

RSIM_FN void rsim_log_model(rsim *s, int li, const char *model) {
    if (li >= 0) rsim_cpy(s->log[li].model, RSIM_NAME_MAX, model, strlen(model));
}

/* Records the instant a model became loaded (GET /_sim/log "models": loaded_ms). */
RSIM_FN void rsim_mark_loaded(rsim *s, rsim_model *m) {
    m->loaded_at_ms = s->now;
    m->loads_done++;
}

#define RSIM_LOG_PENDING (-2) /* rsim_log_count: requests not answered yet */
/* Counts log entries matching every non-NULL field and `status` (0 = any; RSIM_LOG_PENDING =
   not answered yet; -1 = hung or cancelled by the client). */
RSIM_FN int rsim_log_count(const rsim *s, const char *method, const char *path, const char *model,
                           int status) {
    uint32_t n = s->log_total < (uint32_t)RSIM_LOG_MAX ? s->log_total : (uint32_t)RSIM_LOG_MAX, i;
    int c = 0;
    for (i = 0; i < n; i++) {
        const rsim_log_entry *e = &s->log[i];
        if (method && strcmp(e->method, method)) continue;
        if (path && strcmp(e->path, path)) continue;
        if (model && strcmp(e->model, model)) continue;
        if (status && e->status != (status == RSIM_LOG_PENDING ? 0 : status)) continue;
        c++;
    }
    return c;
}

RSIM_FN void rsim_ev(rsim *s, int model, int kind, int status, int pct, int exit_code, bool info) {
    rsim_event *e = &s->ev[s->ev_seq % RSIM_EVENTS_MAX];
    e->model = model;
    e->kind = kind;
    e->status = status;
    e->progress_pct = pct;
    e->exit_code = exit_code;
    e->info = info;
    s->ev_seq++;
}

/* ==== tickets ============================================================= */
RSIM_FN rsim_ticket *rsim_tk_get(rsim *s, uint32_t id) {
    int i;
    if (!id) return NULL;
    for (i = 0; i < RSIM_MAX_TICKETS; i++)
        if (s->t[i].id == id) return &s->t[i];
    return NULL;
}

RSIM_FN rsim_ticket *rsim_tk_new(rsim *s) {
    int i;
    for (i = 0; i < RSIM_MAX_TICKETS; i++)
        if (!s->t[i].id) {
            rsim_ticket *t = &s->t[i];
            memset(t, 0, sizeof *t);
            t->id = s->next_ticket++;
            if (!s->next_ticket) s->next_ticket = 1;
            t->log = -1;
            t->r.model = -1;
            t->r.inst = -1;
            t->r.slot = -1;
            t->r.want_slot = -1;
            t->r.keep = -2;
            t->victim = -1;
            t->op = RSIM_OP_DONE;
            return t;
        }
    return NULL;
}

RSIM_FN void rsim_tk_free(rsim_ticket *t) { t->id = 0; t->op = RSIM_OP_FREE; }

/* Sets a finished reply on t. */
RSIM_FN void rsim_reply_set(rsim_ticket *t, int out, int status, const char *msg) {
    t->op = RSIM_OP_DONE;
    t->r.out = out;
    t->r.status = status;
    rsim_cpy(t->r.msg, sizeof t->r.msg, msg, msg ? strlen(msg) : 0);
}

/* llama.cpp error envelope (code first, as handlers send it). */
RSIM_FN void rsim_lerr(rsim_ticket *t, int status, const char *msg) { rsim_reply_set(t, RSIM_O_LERR, status, msg); }
/* llama.cpp middleware error (message, type, code): 401, 404, 503 Loading model. */
RSIM_FN void rsim_lerr_mw(rsim_ticket *t, int status, const char *msg) { rsim_reply_set(t, RSIM_O_LERR_MW, status, msg); }
RSIM_FN void rsim_404(rsim_ticket *t) { rsim_lerr_mw(t, 404, "File Not Found"); }
/* LM Studio error: type in aux, object or string form by option. */
RSIM_FN void rsim_lms_err(rsim_ticket *t, int status, const char *type, const char *msg) {
    rsim_reply_set(t, RSIM_O_LMS_ERR, status, msg);
    rsim_cpy(t->r.aux, sizeof t->r.aux, type, strlen(type));
}

/* ==== model timing helpers ================================================ */
RSIM_FN uint32_t rsim_load_ms(const rsim *s, const rsim_model *m) { return m->load_ms ? m->load_ms : s->o.load_ms; }

RSIM_FN bool rsim_running(const rsim_model *m) {
    return m->state == RSIM_LOADING || m->state == RSIM_LOADED || m->state == RSIM_SLEEPING;
}

RSIM_FN int rsim_count_running(const rsim *s) {
    int i, n = 0;
    for (i = 0; i < s->nmodels; i++) n += rsim_running(&s->m[i]) ? 1 : 0;
    return n;
}

RSIM_FN bool rsim_any_stopping(const rsim *s) {
    int i;
    for (i = 0; i < s->nmodels; i++)
        if (s->m[i].stopping) return true;
    return false;
}

/* Decides whether the next load fails (per-model broken flag, then --fail-loads). */
RSIM_FN bool rsim_take_failure(rsim *s, const rsim_model *m) {
    if (m->broken) return true;
    if (s->o.fail_loads > 0) { s->o.fail_loads--; return true; }
    return false;
}

/* ==== llama.cpp router model state machine (wire.md 1.5-1.8) =============== */
RSIM_FN void rsim_r_start_load(rsim *s, int i) {
    rsim_model *m = &s->m[i];
    m->state = RSIM_LOADING;
    m->failed = false;
    m->exit_code = 0;
    m->queue_seq = 0;
    m->waking = m->stopping = false;
    m->will_fail = rsim_take_failure(s, m);
    m->due_ms = s->now + (m->will_fail ? s->o.fail_ms : rsim_load_ms(s, m));
    m->port = 40001 + (int)(s->port_seq++ % 20000);
    m->last_used_ms = s->now;
    rsim_ev(s, i, RSIM_EV_MODEL_STATUS, RSIM_LOADING, -1, 0, false);
    rsim_ev(s, i, RSIM_EV_STATUS_CHANGE, RSIM_LOADING, 0, 0, false);
    if (m->child_download_ms) { /* its state line says "downloading" first (wire.md 1.12) */
        m->state = RSIM_DOWNLOADING;
        m->child_downloading = true;
        m->due_ms = s->now + m->child_download_ms;
        rsim_ev(s, i, RSIM_EV_STATUS_CHANGE, RSIM_DOWNLOADING, -1, 0, false);
    }
}

RSIM_FN bool rsim_july(const rsim *s) { return s->o.runtime == RSIM_RT_ROUTER && s->o.router_gen == RSIM_GEN_JULY; }

RSIM_FN void rsim_release(rsim *s, rsim_ticket *t);
RSIM_FN void rsim_router_slot_do(rsim *s, rsim_ticket *t);

/* The child exits: unloaded, failed when exit_code != 0. July: what it was serving is
   cut (a stream gets "proxy error: Failed to read connection" and ends without [DONE];
   a plain answer becomes a 500 with that text). */
RSIM_FN void rsim_r_exited(rsim *s, int i, int exit_code) {
    rsim_model *m = &s->m[i];
    int k;
    m->state = RSIM_UNLOADED;
    m->stopping = m->waking = m->will_fail = false;
    m->failed = exit_code != 0;
    m->exit_code = exit_code;
    rsim_ev(s, i, RSIM_EV_STATUS_CHANGE, RSIM_UNLOADED, -1, exit_code, false);
    for (k = 0; rsim_july(s) && k < RSIM_MAX_TICKETS; k++) {
        rsim_ticket *t = &s->t[k];
        if (!t->holds || t->r.model != i || (t->op != RSIM_OP_STREAM && t->op != RSIM_OP_GEN)) continue;
        rsim_release(s, t);
        t->stalled = false;
        if (t->op == RSIM_OP_GEN) rsim_reply_set(t, RSIM_O_PLAIN_JSON, 500, "proxy error: Failed to read connection");
        else { t->cut = true; t->at_ms = s->now; }
    }
}

/* Unload: graceful for loaded/sleeping (unload_ms, or the stop timeout then exit 1 with
   --stop-hang); a loading child is SIGKILLed at once and shows failed, exit 1 (1.6).
   July: a child told to exit while it serves requests stops answering them and is
   killed at the stop timeout (exit 1, failed), which cuts those requests. */
RSIM_FN void rsim_r_stop(rsim *s, int i) {
    rsim_model *m = &s->m[i];
    bool hang;
    int k;
    memset(m->slot_kv, 0, sizeof m->slot_kv); /* the child's cache goes with it */
    if (m->state == RSIM_LOADING) { rsim_r_exited(s, i, 1); return; }
    if (m->stopping || !rsim_running(m)) return;
    s->evicted = true;
    hang = s->o.stop_hang || (rsim_july(s) && m->inflight > 0);
    m->stopping = true;
    m->waking = false;
    m->stop_exit = hang ? 1 : 0;
    m->due_ms = s->now + (hang ? s->o.stop_timeout_ms : s->o.unload_ms);
    for (k = 0; rsim_july(s) && k < RSIM_MAX_TICKETS; k++)
        if (s->t[k].holds && s->t[k].r.model == i && (s->t[k].op == RSIM_OP_STREAM || s->t[k].op == RSIM_OP_GEN))
            s->t[k].stalled = true;
}

/* True when a request waits for model i: it counts as in flight (never evict it under
   the request that is about to use it). */
RSIM_FN bool rsim_has_waiters(const rsim *s, int i) {
    int k;
    for (k = 0; k < RSIM_MAX_TICKETS; k++)
        if (s->t[k].op == RSIM_OP_WAIT && s->t[k].r.model == i) return true;
    return false;
}

/* Later routers (pick_victim): the LRU loaded/sleeping instance with nothing in flight.
   July: the LRU running instance whatever it does (loading, busy, stopping; tags are
   never looked at). -1 when none. */
RSIM_FN int rsim_r_victim(const rsim *s) {
    int i, v = -1;
    for (i = 0; i < s->nmodels; i++) {
        const rsim_model *m = &s->m[i];
        if (rsim_july(s) ? !rsim_running(m)
                         : (m->state != RSIM_LOADED && m->state != RSIM_SLEEPING) || m->stopping || m->waking ||
                               m->inflight > 0 || rsim_has_waiters(s, i))
            continue;
        if (v < 0 || m->last_used_ms < s->m[v].last_used_ms) v = i;
    }
    return v;
}

RSIM_FN bool rsim_r_has_room(const rsim *s) {
    return s->o.models_max == 0 || rsim_count_running(s) < s->o.models_max;
}

/* Transitions due at s->now (router and server runtimes). */
RSIM_FN void rsim_r_step_models(rsim *s) {
    int i, v;
    for (i = 0; i < s->nmodels; i++) {
        rsim_model *m = &s->m[i];
        if (m->state == RSIM_LOADING && m->due_ms <= s->now) {
            if (m->will_fail) {
                rsim_r_exited(s, i, 1);
                if (s->o.runtime == RSIM_RT_SERVER) s->exit_code = 1;
            } else {
                m->state = RSIM_LOADED;
                rsim_mark_loaded(s, m);
                m->ever_ready = true;
                m->last_task_ms = s->now;
                if (s->o.runtime == RSIM_RT_SERVER && !s->ready_ms) s->ready_ms = s->now ? s->now : 1;
                rsim_ev(s, i, RSIM_EV_STATUS_CHANGE, RSIM_LOADING, 100, 0, false);
                rsim_ev(s, i, RSIM_EV_STATUS_CHANGE, RSIM_LOADED, -1, 0, true);
            }
        }
        if (m->state == RSIM_DOWNLOADING && m->due_ms <= s->now) {
            if (m->child_downloading) { /* downloaded: the child loads it now */
                m->child_downloading = false;
                m->state = RSIM_LOADING;
                m->due_ms = s->now + (m->will_fail ? s->o.fail_ms : rsim_load_ms(s, m));
                rsim_ev(s, i, RSIM_EV_STATUS_CHANGE, RSIM_LOADING, 0, 0, false);
            } else m->state = RSIM_UNLOADED;
        }
        if (m->stopping && m->due_ms <= s->now) rsim_r_exited(s, i, m->stop_exit);
        if (m->waking && m->due_ms <= s->now) {
            m->waking = false;
            m->state = RSIM_LOADED;
            rsim_mark_loaded(s, m);
            m->last_task_ms = s->now;
            rsim_ev(s, i, RSIM_EV_STATUS_CHANGE, RSIM_LOADED, -1, 0, false);
        }
        if (m->state == RSIM_LOADED && !m->stopping && !m->waking && m->inflight == 0 &&
            s->o.sleep_idle_s > 0 && m->last_task_ms + (uint64_t)s->o.sleep_idle_s * 1000 <= s->now) {
            m->state = RSIM_SLEEPING;
            rsim_ev(s, i, RSIM_EV_STATUS_CHANGE, RSIM_SLEEPING, -1, 0, false);
        }
    }
    if (s->o.runtime != RSIM_RT_ROUTER) return;
    /* explicit loads waiting for their victim (1.5). July: for the one it stopped, then
       the limit is checked once more (a concurrent load may have taken the place: 500).
       Later: until there is room, stopping the LRU idle model when none is stopping. */
    for (i = 0; i < RSIM_MAX_TICKETS; i++) {
        rsim_ticket *t = &s->t[i];
        if (t->op != RSIM_OP_R_LOAD) continue;
        if (t->victim >= 0 && s->m[t->victim].stopping) continue;
        if (rsim_running(&s->m[t->r.model])) rsim_lerr(t, 400, "model is already running");
        else if (rsim_r_has_room(s)) {
            rsim_r_start_load(s, t->r.model);
            rsim_reply_set(t, RSIM_O_RAW, 200, "{\"success\":true}");
        } else if (rsim_july(s)) rsim_lerr(t, 500, "model limit reached, try again later");
        else if (!rsim_any_stopping(s) && (v = rsim_r_victim(s)) >= 0) rsim_r_stop(s, v);
    }
    /* the autoload queue (1.7): FIFO, one entry per model */
    for (;;) {
        int head = -1;
        for (i = 0; i < s->nmodels; i++)
            if (s->m[i].queue_seq && s->m[i].state != RSIM_DOWNLOADING &&
                (head < 0 || s->m[i].queue_seq < s->m[head].queue_seq))
                head = i;
        if (head < 0) break;
        if (rsim_r_has_room(s)) { rsim_r_start_load(s, head); continue; }
        if (rsim_any_stopping(s)) break;
        v = rsim_r_victim(s); /* July: the LRU whatever it does; later: an idle one or wait */
        if (v >= 0) rsim_r_stop(s, v);
        break;
    }
}

/* ==== Ollama scheduler (wire.md 3.4, 3.6) ================================== */
RSIM_FN uint64_t rsim_o_keep_sort(const rsim_model *m) { return m->forever ? (uint64_t)-1 : m->keep_ms; }

RSIM_FN void rsim_o_unload(rsim *s, int i) {
    rsim_model *m = &s->m[i];
    (void)s;
    m->state = RSIM_UNLOADED;
    m->stopping = false;
}

RSIM_FN void rsim_o_apply_keep(rsim *s, rsim_model *m, int64_t keep) {
    if (keep == -2) keep = m->keep_cfg_ms != -2 ? m->keep_cfg_ms : s->o.keep_alive_ms;
    m->forever = keep < 0;
    m->keep_ms = keep < 0 ? 0 : (uint64_t)keep;
}

RSIM_FN void rsim_o_step_models(rsim *s) {
    int i, loading = -1, head = -1, nloaded = 0;
    uint64_t mem = 0;
    for (i = 0; i < s->nmodels; i++) {
        rsim_model *m = &s->m[i];
        if (m->state == RSIM_LOADING && m->due_ms <= s->now) {
            int j, others = 0;
            for (j = 0; j < s->nmodels; j++) others += j != i && s->m[j].state == RSIM_LOADED ? 1 : 0;
            if (m->will_fail && others && !m->oom_retried) {
                /* OOM with others resident: evict them all (idle ones) and retry once (3.6) */
                for (j = 0; j < s->nmodels; j++)
                    if (j != i && s->m[j].state == RSIM_LOADED && s->m[j].inflight == 0) rsim_o_unload(s, j);
                m->oom_retried = true;
                m->will_fail = rsim_take_failure(s, m);
                m->due_ms = s->now + (m->will_fail ? s->o.fail_ms : rsim_load_ms(s, m));
                continue;
            }
            m->oom_retried = false;
            if (m->will_fail) { m->state = RSIM_UNLOADED; m->failed = true; }
            else {
                m->state = RSIM_LOADED;
                rsim_mark_loaded(s, m);
                m->failed = false;
                m->expires_ms = s->now + m->keep_ms;
            }
        }
        if (m->state == RSIM_LOADED && m->inflight == 0 && !m->forever && !rsim_has_waiters(s, i) &&
            m->expires_ms + (m->stopping ? s->o.linger_ms : 0) <= s->now)
            rsim_o_unload(s, i); /* a runner that requests wait for is not expired: they are served first */
        if (m->state == RSIM_LOADING) loading = i;
        if (m->state == RSIM_LOADED || m->state == RSIM_LOADING) { nloaded++; mem += m->size_bytes; }
        if (m->queue_seq && (head < 0 || m->queue_seq < s->m[head].queue_seq)) head = i;
    }
    while (loading < 0 && head >= 0) {
        rsim_model *h = &s->m[head];
        bool full = (s->o.max_loaded > 0 && nloaded >= s->o.max_loaded) ||
                    (s->o.mem_budget && nloaded > 0 && mem + h->size_bytes > s->o.mem_budget);
        if (full) {
            int v = -1;
            for (i = 0; i < s->nmodels; i++) {
                const rsim_model *m = &s->m[i];
                if (m->state != RSIM_LOADED || m->inflight > 0 || rsim_has_waiters(s, i)) continue;
                if (v < 0 || rsim_o_keep_sort(m) < rsim_o_keep_sort(&s->m[v]) ||
                    (rsim_o_keep_sort(m) == rsim_o_keep_sort(&s->m[v]) && strcmp(m->id, s->m[v].id) < 0))
                    v = i;
            }
            if (v < 0) break; /* every runner busy: wait for the first to finish */
            rsim_o_unload(s, v);
            nloaded--;
            mem -= s->m[v].size_bytes;
            continue;
        }
        h->state = RSIM_LOADING;
        h->queue_seq = 0;
        h->failed = false;
        h->will_fail = rsim_take_failure(s, h);
        h->due_ms = s->now + (h->will_fail ? s->o.fail_ms : rsim_load_ms(s, h));
        h->expires_ms = s->now + h->keep_ms;
        h->stopping = false;
        loading = head;
    }
}

/* ==== LM Studio instances (wire.md 4.1, 4.3) =============================== */
RSIM_FN bool rsim_l_has_inst(const rsim *s, const char *id) {
    int i, k;
    for (i = 0; i < s->nmodels; i++)
        for (k = 0; k < s->m[i].ninst; k++)
            if (!s->m[i].host[0] && !strcmp(s->m[i].inst[k].id, id)) return true;
    return false;
}

/* New instance of model i: id = key, or key:2, key:3, ... when taken. Index or -1. */
RSIM_FN int rsim_l_add_inst(rsim *s, int i, uint32_t ctx, bool jit, uint64_t ttl_ms) {
    rsim_model *m = &s->m[i];
    rsim_inst *in;
    int n = 2;
    if (m->ninst >= RSIM_MAX_INST) return -1;
    in = &m->inst[m->ninst];
    memset(in, 0, sizeof *in);
    {
    char id[RSIM_NAME_MAX];
    snprintf(id, sizeof id, "%s", m->id);
    while (rsim_l_has_inst(s, id)) {
        char key[RSIM_NAME_MAX];
        memcpy(key, m->id, sizeof key);
        snprintf(id, sizeof id, "%.80s:%d", key, n++);
        rsim_utf8_fix(id);
    }
    memcpy(in->id, id, sizeof id);
    }
    in->ctx = ctx ? ctx : m->ctx;
    in->jit = jit;
    in->ttl_ms = ttl_ms;
    in->last_ms = s->now;
    return m->ninst++;
}

RSIM_FN void rsim_l_del_inst(rsim_model *m, int k) {
    memmove(&m->inst[k], &m->inst[k + 1], (size_t)(m->ninst - k - 1) * sizeof m->inst[0]);
    m->ninst--;
}

RSIM_FN uint64_t rsim_l_vram_used(const rsim *s) {
    uint64_t u = 0;
    int i;
    for (i = 0; i < s->nmodels; i++)
        if (!s->m[i].host[0])
            u += s->m[i].size_bytes * (uint64_t)(s->m[i].ninst + s->m[i].jit_loading + s->m[i].loads_pending);
    return u;
}

RSIM_FN void rsim_l_step_models(rsim *s) {
    int i, k;
    for (i = 0; i < s->nmodels; i++) {
        rsim_model *m = &s->m[i];
        if (m->jit_loading && m->due_ms <= s->now) {
            bool fail = rsim_take_failure(s, m);
            for (k = 0; k < m->jit_loading; k++)
                if (!fail) rsim_l_add_inst(s, i, 0, true, m->jit_ttl_ms);
            m->failed = fail;
            m->jit_loading = 0;
        }
        for (k = 0; k < m->ninst; k++) {
            rsim_inst *in = &m->inst[k];
            if (in->ttl_ms && in->inflight == 0 && in->last_ms + in->ttl_ms <= s->now) rsim_l_del_inst(m, k--);
        }
    }
}

/* ==== serving ============================================================= */
RSIM_FN rsim_inst *rsim_l_inst_of(rsim *s, rsim_ticket *t) {
    rsim_model *m;
    int k;
    if (t->r.model < 0) return NULL;
    m = &s->m[t->r.model];
    for (k = 0; k < m->ninst; k++)
        if (!strcmp(m->inst[k].id, t->r.aux)) return &m->inst[k];
    return NULL;
}

/* A served task ends: the model (and slot, instance) is free again. */
RSIM_FN void rsim_release(rsim *s, rsim_ticket *t) {
    rsim_model *m;
    if (!t->holds || t->r.model < 0) return;
    t->holds = false;
    m = &s->m[t->r.model];
    if (m->inflight > 0) m->inflight--;
    m->last_task_ms = s->now;
    if (s->o.runtime == RSIM_RT_ROUTER && t->chat && m->slot_kv[0] < 6) m->slot_kv[0] = 6;
    if (s->o.runtime == RSIM_RT_OLLAMA && m->inflight == 0) m->expires_ms = s->now + (m->stopping ? 0 : m->keep_ms);
    if (s->o.runtime == RSIM_RT_LMSTUDIO) {
        rsim_inst *in = rsim_l_inst_of(s, t);
        if (in) { if (in->inflight > 0) in->inflight--; in->last_ms = s->now; }
    }
    if (t->r.slot >= 0 && t->r.slot < RSIM_MAX_SLOTS) s->slots[t->r.slot].busy = false;
}

RSIM_FN void rsim_hold(rsim *s, rsim_ticket *t) {
    rsim_model *m = &s->m[t->r.model];
    if (t->holds) return;
    t->holds = true;
    m->inflight++;
    if (s->o.runtime == RSIM_RT_LMSTUDIO) {
        rsim_inst *in = rsim_l_inst_of(s, t);
        if (in) { in->inflight++; in->last_ms = s->now; }
    }
}

RSIM_FN int rsim_free_slot(const rsim *s) {
    int k;
    for (k = 0; k < s->o.parallel && k < RSIM_MAX_SLOTS; k++)
        if (!s->slots[k].busy) return k;
    return -1;
}

/* A message's chunk: role and content (as sent, escapes and all). */
RSIM_FN rsim_chunk rsim_chunk_of(const char *role, size_t rn, const char *text, size_t n) {
    rsim_chunk c;
    uint64_t h = 14695981039346656037ull;
    size_t i;
    for (i = 0; i < rn; i++) { h ^= (unsigned char)role[i]; h *= 1099511628211ull; }
    h ^= 0x1f;
    h *= 1099511628211ull;
    for (i = 0; i < n; i++) { h ^= (unsigned char)text[i]; h *= 1099511628211ull; }
    c.h = h;
    c.n = 4 + (uint32_t)(n / 4);
    return c;
}

/* Tokens of the prompt that slot k's KV cache holds already (common prefix). */
RSIM_FN uint32_t rsim_slot_lcp(const rsim *s, int k, const rsim_reply *r) {
    const rsim_slot *sl = &s->slots[k];
    uint32_t n = 0;
    int i;
    for (i = 0; i < r->nprompt && i < sl->nkv && sl->kv[i].h == r->prompt[i].h; i++) n += r->prompt[i].n;
    return n;
}

/* Server mode's slot for a task, as llama.cpp picks it: the id_slot asked for (when
   in range; the task waits for it), else the idle slot whose cache shares the largest
   part of the prompt (more than 10 %, slot_prompt_similarity), else the least
   recently used idle slot. -1 while none is free. */
RSIM_FN int rsim_pick_slot(const rsim *s, const rsim_reply *r) {
    int k, best = -1, lru = -1, n = s->o.parallel < RSIM_MAX_SLOTS ? s->o.parallel : RSIM_MAX_SLOTS;
    uint32_t total = 0, best_n = 0;
    if (r->want_slot >= 0 && r->want_slot < n) return s->slots[r->want_slot].busy ? -1 : r->want_slot;
    for (k = 0; k < r->nprompt; k++) total += r->prompt[k].n;
    for (k = 0; k < n; k++) {
        uint32_t l;
        if (s->slots[k].busy) continue;
        l = rsim_slot_lcp(s, k, r);
        if (total && l * 10 > total && l > best_n) { best = k; best_n = l; }
        if (lru < 0 || s->slots[k].last < s->slots[lru].last) lru = k;
    }
    return best >= 0 ? best : lru;
}

/* The task runs on slot k: timings from what its cache holds, then the cache holds
   the prompt and the answer (a chunk for the assistant message the client sends back). */
RSIM_FN void rsim_slot_run(rsim *s, int k, rsim_reply *r) {
    rsim_slot *sl = &s->slots[k];
    uint32_t total = 0, lcp = rsim_slot_lcp(s, k, r);
    int i;
    for (i = 0; i < r->nprompt; i++) total += r->prompt[i].n;
    if (!r->nprompt) total = 6;
    if (lcp >= total) lcp = total ? total - 1 : 0; /* the last token is always evaluated */
    r->cache_n = lcp;
    r->prompt_n = total - lcp;
    sl->nkv = 0;
    for (i = 0; i < r->nprompt && sl->nkv < RSIM_KV_MAX; i++) sl->kv[sl->nkv++] = r->prompt[i];
    if (r->nprompt && sl->nkv < RSIM_KV_MAX) {
        char text[64];
        text[0] = 0;
        for (i = 0; i < RSIM_NTOK; i++) strcat(text, rsim_tokens[i]);
        sl->kv[sl->nkv++] = rsim_chunk_of("assistant", 9, text, strlen(text));
    }
    sl->last = (uint64_t)++s->task_seq;
}

RSIM_FN int rsim_stream_steps(int out) {
    return out == RSIM_O_CHAT ? RSIM_NTOK + 3 : out == RSIM_O_OAI_COMPL ? RSIM_NTOK + 2 : RSIM_NTOK + 1;
}

/* t's model is ready: answer at once (GETs), or run the task (gen_ms, or a stream). */
RSIM_FN void rsim_serve(rsim *s, rsim_ticket *t) {
    rsim_model *m = &s->m[t->r.model];
    if (s->o.runtime == RSIM_RT_OLLAMA) {
        /* a request without keep_alive leaves the loaded runner's alone (sched.go
           useLoadedRunner); a fresh load took the default when it was queued */
        if (t->r.keep != -2) rsim_o_apply_keep(s, m, t->r.keep);
        t->r.loaded_ms = s->now;
        m->stopping = false;
        if (t->r.flag) { /* load-only request */
            if (m->inflight == 0) m->expires_ms = s->now + m->keep_ms;
            t->r.n = 0;
            t->op = RSIM_OP_DONE;
            t->r.status = 200;
            return;
        }
    }
    if (t->task) m->last_task_ms = s->now;
    if (t->post && s->o.runtime == RSIM_RT_ROUTER) m->last_used_ms = s->now;
    t->proxied = s->o.runtime == RSIM_RT_ROUTER;
    if (t->r.slot_act) { /* a router's slot request: its child answers it now */
        if (t->holds) rsim_release(s, t);
        rsim_router_slot_do(s, t);
        return;
    }
    if (!t->chat) {
        if (t->holds) rsim_release(s, t);
        t->op = RSIM_OP_DONE;
        if (!t->r.status) t->r.status = 200;
        return;
    }
    rsim_hold(s, t);
    if (s->o.runtime == RSIM_RT_SERVER) {
        int k = rsim_pick_slot(s, &t->r);
        if (k >= 0) {
            rsim_slot_run(s, k, &t->r);
            s->slots[k].busy = s->slots[k].used = true;
            s->slots[k].id_task = ++s->task_seq;
            t->r.slot = k;
        }
    }
    t->r.status = 200;
    if (t->r.stream) {
        t->op = RSIM_OP_STREAM;
        t->phase = 0;
        t->step = 0;
        t->nsteps = rsim_stream_steps(t->r.out);
        t->at_ms = s->now;
        t->ping_at = s->now; /* later: a keep-alive frame opens the stream, before any data */
        t->end_ms = s->now + (uint64_t)t->nsteps * s->o.token_ms;
    } else {
        t->op = RSIM_OP_GEN;
        t->at_ms = s->now + s->o.gen_ms;
    }
}

/* Waiting tickets whose model became ready (or failed). */
RSIM_FN void rsim_progress(rsim *s) {
    int i;
    char msg[RSIM_MSG_MAX];
    for (i = 0; i < RSIM_MAX_TICKETS; i++) {
        rsim_ticket *t = &s->t[i];
        rsim_model *m;
        if (t->op != RSIM_OP_WAIT || t->r.model < 0) continue;
        m = &s->m[t->r.model];
        switch (s->o.runtime) {
        case RSIM_RT_ROUTER:
            if (t->r.slot_act == RSIM_SA_SAVE && s->file_write) break; /* after the save whose file is not out yet */
            if (m->state == RSIM_LOADED && !m->waking && !m->stopping) rsim_serve(s, t);
            else if (m->state == RSIM_UNLOADED && !m->queue_seq) {
                rsim_release(s, t);
                snprintf(msg, sizeof msg, "model name=%s failed to load", m->id);
                rsim_lerr(t, 500, msg);
            }
            break;
        case RSIM_RT_SERVER:
            if (t->r.erase) { /* POST /slots/N?action=erase: once slot N is idle */
                if (!s->slots[t->r.want_slot].busy) {
                    rsim_slot *sl = &s->slots[t->r.want_slot];
                    uint32_t n = 0;
                    int k;
                    for (k = 0; k < sl->nkv; k++) n += sl->kv[k].n;
                    sl->nkv = 0;
                    sl->used = true;
                    sl->id_task = ++s->task_seq;
                    snprintf(msg, sizeof msg, "{\"id_slot\":%d,\"n_erased\":%u}", t->r.want_slot, (unsigned)n);
                    rsim_reply_set(t, RSIM_O_RAW, 200, msg);
                }
                break;
            }
            if (m->state == RSIM_LOADED && !m->waking && (!t->chat || rsim_pick_slot(s, &t->r) >= 0)) rsim_serve(s, t);
            break;
        case RSIM_RT_OLLAMA:
            if (m->state == RSIM_LOADED && (!t->r.ctx || t->r.ctx == m->num_ctx)) rsim_serve(s, t);
            else if (m->state == RSIM_LOADED && m->inflight == 0) { /* options changed: reload */
                rsim_o_unload(s, t->r.model);
                m->num_ctx = t->r.ctx;
                m->queue_seq = ++s->queue_seq;
            } else if (m->state == RSIM_UNLOADED && !m->queue_seq) {
                if (m->failed) {
                    snprintf(msg, sizeof msg, "model requires more system memory (%.1f GiB) than is available",
                             (double)m->size_bytes / (1024.0 * 1024 * 1024));
                    rsim_reply_set(t, RSIM_O_FLAT, 500, msg);
                } else {
                    if (t->r.ctx) m->num_ctx = t->r.ctx;
                    m->queue_seq = ++s->queue_seq;
                }
            }
            break;
        case RSIM_RT_LMSTUDIO:
            if (m->ninst > 0) {
                if (!t->r.aux[0] || !rsim_l_inst_of(s, t)) rsim_cpy(t->r.aux, sizeof t->r.aux, m->inst[0].id, strlen(m->inst[0].id));
                rsim_serve(s, t);
            } else if (!m->jit_loading) rsim_lms_err(t, 500, "internal_error", "Failed to load model");
            break;
        default: break;
        }
    }
}

RSIM_FN void rsim_l_finish_load(rsim *s, rsim_ticket *t) {
    rsim_model *m = &s->m[t->r.model];
    int k;
    if (m->loads_pending > 0) m->loads_pending--;
    k = rsim_l_add_inst(s, t->r.model, t->r.ctx, false, 0);
    if (k < 0) { rsim_lms_err(t, 500, "internal_error", "Failed to load model"); return; }
    rsim_reply_set(t, RSIM_O_L_LOAD, 200, NULL);
    rsim_cpy(t->r.aux, sizeof t->r.aux, m->inst[k].id, strlen(m->inst[k].id));
}

/* Everything due at s->now. */
RSIM_FN void rsim_step(rsim *s) {
    int i;
    for (i = 0; i < RSIM_MAX_TICKETS; i++) {
        rsim_ticket *t = &s->t[i];
        if (t->stalled) continue;
        if (t->op == RSIM_OP_TIMER && t->at_ms <= s->now) t->op = RSIM_OP_DONE;
        else if (t->op == RSIM_OP_GEN && t->at_ms <= s->now) { rsim_release(s, t); t->op = RSIM_OP_DONE; }
        else if (t->op == RSIM_OP_STREAM && t->holds && t->end_ms <= s->now) rsim_release(s, t);
        else if (t->op == RSIM_OP_L_LOAD && t->at_ms <= s->now) rsim_l_finish_load(s, t);
    }
    switch (s->o.runtime) {
    case RSIM_RT_OLLAMA: rsim_o_step_models(s); break;
    case RSIM_RT_LMSTUDIO: rsim_l_step_models(s); break;
    default: rsim_r_step_models(s); break;
    }
    rsim_progress(s);
    if (s->o.runtime == RSIM_RT_OLLAMA) rsim_o_step_models(s); /* re-queued reloads start now */
}

RSIM_FN uint64_t rsim_min(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Earliest time at which the simulated state changes by itself. */
RSIM_FN uint64_t rsim_next_state_ms(const rsim *s) {
    uint64_t w = (uint64_t)-1;
    int i, k;
    for (i = 0; i < s->nmodels; i++) {
        const rsim_model *m = &s->m[i];
        switch (s->o.runtime) {
        case RSIM_RT_OLLAMA:
            if (m->state == RSIM_LOADING) w = rsim_min(w, m->due_ms);
            if (m->state == RSIM_LOADED && m->inflight == 0 && !m->forever)
                w = rsim_min(w, m->expires_ms + (m->stopping ? s->o.linger_ms : 0));
            break;
        case RSIM_RT_LMSTUDIO:
            if (m->jit_loading) w = rsim_min(w, m->due_ms);
            for (k = 0; k < m->ninst; k++)
                if (m->inst[k].ttl_ms && m->inst[k].inflight == 0) w = rsim_min(w, m->inst[k].last_ms + m->inst[k].ttl_ms);
            break;
        default:
            if (m->state == RSIM_LOADING || m->state == RSIM_DOWNLOADING || m->stopping || m->waking)
                w = rsim_min(w, m->due_ms);
            if (m->state == RSIM_LOADED && !m->stopping && !m->waking && m->inflight == 0 && s->o.sleep_idle_s > 0)
                w = rsim_min(w, m->last_task_ms + (uint64_t)s->o.sleep_idle_s * 1000);
            break;
        }
    }
    for (i = 0; i < RSIM_MAX_TICKETS; i++) {
        const rsim_ticket *t = &s->t[i];
        if (t->stalled) continue;
        if (t->op == RSIM_OP_TIMER || t->op == RSIM_OP_GEN || t->op == RSIM_OP_L_LOAD) w = rsim_min(w, t->at_ms);
        if (t->op == RSIM_OP_STREAM && t->holds) w = rsim_min(w, t->end_ms);
    }
    return w;
}

/* Advances the simulation to now_ms, one due transition at a time, in time order. */
RSIM_FN void rsim_tick(rsim *s, uint64_t now_ms) {
    int guard;
    if (now_ms < s->now) now_ms = s->now;
    for (guard = 0; guard < 100000; guard++) {
        uint64_t w = rsim_next_state_ms(s);
        if (w > now_ms) break;
        if (w > s->now) s->now = w;
        rsim_step(s);
    }
    s->now = now_ms;
    rsim_step(s);
}

/* Earliest time rsim_tick/rsim_pull has something to do (UINT64_MAX: nothing pending). */
RSIM_FN uint64_t rsim_next_wake_ms(const rsim *s) {
    uint64_t w = rsim_next_state_ms(s);
    int i;
    for (i = 0; i < RSIM_MAX_TICKETS; i++) {
        const rsim_ticket *t = &s->t[i];
        if (t->op == RSIM_OP_DONE) w = rsim_min(w, s->now);
        if (t->op == RSIM_OP_STREAM && (t->phase == 0 || t->cut)) w = rsim_min(w, s->now);
        else if (t->op == RSIM_OP_STREAM && !t->stalled) w = rsim_min(w, t->at_ms);
        if (t->op == RSIM_OP_STREAM && !t->stalled && t->phase && t->r.ping_ms && t->step < t->nsteps)
            w = rsim_min(w, t->ping_at);
        if (t->op == RSIM_OP_SSE && t->cursor != s->ev_seq) w = rsim_min(w, s->now);
    }
    return w;
}

/* Starts what exists at start-up: router load-on-startup presets, the server's model,
   Ollama/LM Studio models marked loaded=1. */
RSIM_FN void rsim_start(rsim *s, uint64_t now_ms) {
    int i;
    s->now = now_ms;
    s->started = true;
    for (i = 0; i < s->nmodels; i++) {
        rsim_model *m = &s->m[i];
        if (s->o.runtime == RSIM_RT_ROUTER && m->download_ms) {
            m->state = RSIM_DOWNLOADING;
            m->due_ms = s->now + m->download_ms;
        } else if (s->o.runtime == RSIM_RT_ROUTER && m->startup) rsim_r_start_load(s, i);
        if (s->o.runtime == RSIM_RT_OLLAMA && m->preloaded) {
            rsim_o_apply_keep(s, m, -2);
            m->state = RSIM_LOADED;
            rsim_mark_loaded(s, m);
            m->num_ctx = m->ctx;
            m->expires_ms = s->now + m->keep_ms;
        }
        if (s->o.runtime == RSIM_RT_LMSTUDIO && m->preloaded) {
            if (m->host[0]) {
                char id[RSIM_NAME_MAX], key[RSIM_NAME_MAX], host[RSIM_TAG_MAX];
                memcpy(key, m->id, sizeof key);
                memcpy(host, m->host, sizeof host);
                snprintf(id, sizeof id, "%.60s-%.30s", key, host);
                rsim_utf8_fix(id);
                memcpy(m->inst[0].id, id, sizeof id);
                m->inst[0].ctx = m->ctx;
                m->ninst = 1;
            } else rsim_l_add_inst(s, i, 0, false, 0);
        }
    }
    if (s->o.runtime == RSIM_RT_ROUTER && s->o.models_max == 0)
        for (i = 0; i < s->nmodels; i++)
            if (s->m[i].startup) s->exit_code = 1; /* "exceeds models_max (0)": the real router exits 1 (1.1) */
    if (s->o.runtime == RSIM_RT_SERVER && s->nmodels > 0) {
        rsim_model *m = &s->m[0];
        m->state = RSIM_LOADING;
        m->will_fail = rsim_take_failure(s, m);
        m->due_ms = s->now + (m->will_fail ? s->o.fail_ms + rsim_load_ms(s, m) : rsim_load_ms(s, m));
    }
    rsim_step(s);
}

/* Server mode: true once the model has loaded (print the "listening on" line then). */
RSIM_FN bool rsim_ready(const rsim *s) { return s->ready_ms != 0; }
/* Server mode: -1 while running, else the status the process should exit with. */
RSIM_FN int rsim_exit_code(const rsim *s) { return s->exit_code; }

/* The client of `ticket` went away: its request is forgotten; a queued autoload for a
   model nobody else waits for leaves the queue without evicting anything (W11). */
RSIM_FN void rsim_cancel(rsim *s, uint32_t ticket, uint64_t now_ms) {
    rsim_ticket *t;
    int i;
    rsim_tick(s, now_ms);
    t = rsim_tk_get(s, ticket);
    if (!t) return;
    rsim_release(s, t);
    if (t->log >= 0 && s->log[t->log].status == 0) s->log[t->log].status = -1;
    if (t->op == RSIM_OP_WAIT && t->r.model >= 0 && s->m[t->r.model].queue_seq) {
        bool others = false;
        for (i = 0; i < RSIM_MAX_TICKETS; i++)
            if (&s->t[i] != t && s->t[i].op == RSIM_OP_WAIT && s->t[i].r.model == t->r.model) others = true;
        if (!others) s->m[t->r.model].queue_seq = 0;
    }
    if (s->file_write && s->file_ticket == t->id) s->file_write = false; /* its save goes with it (not written) */
    rsim_tk_free(t);
    rsim_step(s);
}

/* ==== test/control hooks (also reachable over HTTP under /_sim/) ========== */
/* The model's child dies with exit_code (router/server), or its runner vanishes. */
RSIM_FN int rsim_crash(rsim *s, const char *id, int exit_code, uint64_t now_ms) {
    int i;
    rsim_tick(s, now_ms);
    i = rsim_find(s, id);
    if (i < 0) return -1;
    if (s->o.runtime == RSIM_RT_OLLAMA) rsim_o_unload(s, i);
    else if (s->o.runtime == RSIM_RT_LMSTUDIO) s->m[i].ninst = 0;
    else if (rsim_running(&s->m[i])) rsim_r_exited(s, i, exit_code);
    if (s->o.runtime == RSIM_RT_SERVER) s->exit_code = exit_code;
    rsim_step(s);
    return 0;
}

/* Another client unloads the model (exit 0, no failure). */
RSIM_FN int rsim_evict(rsim *s, const char *id, uint64_t now_ms) {
    int i;
    rsim_tick(s, now_ms);
    i = rsim_find(s, id);
    if (i < 0) return -1;
    if (s->o.runtime == RSIM_RT_OLLAMA) rsim_o_unload(s, i);
    else if (s->o.runtime == RSIM_RT_LMSTUDIO) s->m[i].ninst = 0;
    else if (rsim_running(&s->m[i])) rsim_r_exited(s, i, 0);
    rsim_step(s);
    return 0;
}

/* The model leaves the catalog (deleted on disk, preset removed). */
RSIM_FN int rsim_remove(rsim *s, const char *id, uint64_t now_ms) {
    int i;
    rsim_evict(s, id, now_ms);
    i = rsim_find(s, id);
    if (i < 0) return -1;
    s->m[i].removed = true;
    return 0;
}

/* Adds delta to the model's in-flight count (a busy model is never an LRU victim). */
RSIM_FN int rsim_busy(rsim *s, const char *id, int delta, uint64_t now_ms) {
    int i;
    rsim_tick(s, now_ms);
    i = rsim_find(s, id);
    if (i < 0) return -1;
    s->m[i].inflight += delta;
    if (s->m[i].inflight < 0) s->m[i].inflight = 0;
    if (delta < 0) s->m[i].last_task_ms = s->now;
    rsim_step(s);
    return 0;
}

/* ==== rendering ============================================================ */
/* build_info / system_fingerprint of the router generation (or the single server). */
RSIM_FN const char *rsim_build(const rsim *s) {
    /* later: semantic versions (PR #27498), the form `--version` prints; the build number
       is #28774's, the commit a placeholder */
    return s->o.router_gen == RSIM_GEN_JULY ? "b10116-7e743c3a3" : "0.4.0-dev (build 11037, commit 0000000)";
}

RSIM_FN uint64_t rsim_unix_s(const rsim *s) { return s->o.epoch_s + s->now / 1000; }

RSIM_FN const char *rsim_err_type(int status) {
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return "server_error";
    }
}

/* Single-model server id: first alias in sorted order, else the -m path as given. */
RSIM_FN const char *rsim_child_id(const rsim *s, const rsim_model *m) {
    if (s->o.runtime == RSIM_RT_SERVER && m->naliases) return m->aliases[0];
    return m->id;
}

RSIM_FN uint32_t rsim_child_ctx(const rsim *s, const rsim_model *m) {
    return s->o.runtime == RSIM_RT_SERVER && s->o.ctx ? s->o.ctx : m->ctx;
}

RSIM_FN void rsim_w_meta(rsim_w *w, const rsim *s, const rsim_model *m) {
    rsim_w_key(w, "meta");
    rsim_w_obj(w);
    if (rsim_july(s)) rsim_w_kint(w, "vocab_type", 1); /* build 10116 writes the enum; the Aug tree a bool */
    else rsim_w_kbool(w, "vocab_type", true);
    rsim_w_kint(w, "n_vocab", 32000);
    rsim_w_kint(w, "n_ctx", rsim_child_ctx(s, m));
    rsim_w_kint(w, "n_ctx_train", m->ctx_train);
    rsim_w_kint(w, "n_embd", 4096);
    rsim_w_kint(w, "n_params", (int64_t)(m->size_bytes / 2));
    rsim_w_kint(w, "size", (int64_t)m->size_bytes);
    rsim_w_kstr(w, "ftype", "Q4_K - Medium");
    rsim_w_obj_end(w);
}

/* The child's /v1/models data[0] (also the router's SSE "info"). */
RSIM_FN void rsim_w_child_entry(rsim_w *w, const rsim *s, const rsim_model *m) {
    int k;
    rsim_w_obj(w);
    rsim_w_kstr(w, "id", rsim_child_id(s, m));
    rsim_w_key(w, "aliases");
    rsim_w_arr(w);
    if (s->o.runtime == RSIM_RT_SERVER && m->naliases)
        for (k = 0; k < m->naliases; k++) rsim_w_str(w, m->aliases[k]);
    else rsim_w_str(w, m->id);
    rsim_w_arr_end(w);
    rsim_w_key(w, "tags");
    rsim_w_arr(w);
    for (k = 0; k < m->ntags; k++) rsim_w_str(w, m->tags[k]); /* the router passes --tags on */
    rsim_w_arr_end(w);
    rsim_w_kstr(w, "object", "model");
    rsim_w_kint(w, "created", (int64_t)rsim_unix_s(s));
    rsim_w_kstr(w, "owned_by", "llamacpp");
    rsim_w_meta(w, s, m);
    rsim_w_obj_end(w);
}

RSIM_FN void rsim_w_router_entry(rsim_w *w, const rsim *s, const rsim_model *m) {
    char b[RSIM_NAME_MAX * 2 + 160];
    int k;
    rsim_w_obj(w);
    rsim_w_kstr(w, "id", m->id);
    rsim_w_key(w, "aliases");
    rsim_w_arr(w);
    for (k = 0; k < m->naliases; k++) rsim_w_str(w, m->aliases[k]);
    rsim_w_arr_end(w);
    rsim_w_key(w, "tags");
    rsim_w_arr(w);
    for (k = 0; k < m->ntags; k++) rsim_w_str(w, m->tags[k]);
    rsim_w_arr_end(w);
    rsim_w_kstr(w, "object", "model");
    rsim_w_kstr(w, "owned_by", "llamacpp");
    rsim_w_kint(w, "created", (int64_t)rsim_unix_s(s));
    rsim_w_key(w, "status");
    rsim_w_obj(w);
    rsim_w_kstr(w, "value", rsim_state_names[m->state]);
    rsim_w_key(w, "args");
    rsim_w_arr(w);
    rsim_w_str(w, "/usr/local/bin/llama-server");
    rsim_w_str(w, "--host");
    rsim_w_str(w, "127.0.0.1");
    rsim_w_str(w, "--port");
    snprintf(b, sizeof b, "%d", m->port);
    rsim_w_str(w, b);
    if (s->o.sleep_idle_s > 0) {
        rsim_w_str(w, "--sleep-idle-seconds");
        snprintf(b, sizeof b, "%d", s->o.sleep_idle_s);
        rsim_w_str(w, b);
    }
    if (m->ntags) { /* the router's option order: ..., --tags a,b, --alias, --ctx-size, --model */
        size_t o = 0;
        rsim_w_str(w, "--tags");
        b[0] = 0;
        for (k = 0; k < m->ntags; k++)
            o += (size_t)snprintf(b + o, o < sizeof b ? sizeof b - o : 0, "%s%s", k ? "," : "", m->tags[k]);
        rsim_w_str(w, b);
    }
    rsim_w_str(w, "--alias");
    rsim_w_str(w, m->id);
    rsim_w_str(w, "--ctx-size");
    snprintf(b, sizeof b, "%u", (unsigned)m->ctx);
    rsim_w_str(w, b);
    rsim_w_str(w, "--model");
    snprintf(b, sizeof b, "/models/%s.gguf", m->id);
    rsim_w_str(w, b);
    rsim_w_arr_end(w);
    if (s->o.sleep_idle_s > 0)
        snprintf(b, sizeof b, "[%s]\nsleep-idle-seconds = %d\nctx-size = %u\nmodel = /models/%s.gguf\n\n", m->id,
                 s->o.sleep_idle_s, (unsigned)m->ctx, m->id);
    else
        snprintf(b, sizeof b, "[%s]\nctx-size = %u\nmodel = /models/%s.gguf\n\n", m->id, (unsigned)m->ctx, m->id);
    rsim_w_kstr(w, "preset", b);
    if (m->state == RSIM_UNLOADED && m->failed && m->exit_code != 0) {
        rsim_w_kint(w, "exit_code", m->exit_code);
        rsim_w_kbool(w, "failed", true);
    }
    rsim_w_obj_end(w);
    rsim_w_kjson(w, "architecture", "{\"input_modalities\":[\"text\"],\"output_modalities\":[\"text\"]}");
    rsim_w_kstr(w, "source", "preset");
    rsim_w_kbool(w, "can_remove", false);
    if (m->ever_ready && (m->state == RSIM_LOADING || m->state == RSIM_LOADED || m->state == RSIM_SLEEPING))
        rsim_w_meta(w, s, m);
    rsim_w_obj_end(w);
}

RSIM_FN void rsim_w_child_props(rsim_w *w, const rsim *s, const rsim_model *m) {
    char path[RSIM_NAME_MAX + 16];
    if (s->o.runtime == RSIM_RT_SERVER) snprintf(path, sizeof path, "%s", m->id);
    else snprintf(path, sizeof path, "/models/%s.gguf", m->id);
    rsim_w_obj(w);
    rsim_w_key(w, "default_generation_settings");
    rsim_w_obj(w);
    rsim_w_kjson(w, "params", "{\"n_predict\":-1,\"seed\":4294967295,\"temperature\":0.8,\"top_k\":40,\"top_p\":0.95,\"min_p\":0.05,\"stream\":false}");
    rsim_w_kint(w, "n_ctx", rsim_child_ctx(s, m));
    rsim_w_obj_end(w);
    rsim_w_kint(w, "total_slots", s->o.runtime == RSIM_RT_SERVER ? s->o.parallel : 4);
    rsim_w_kstr(w, "model_alias", rsim_child_id(s, m));
    rsim_w_kstr(w, "model_ftype", "Q4_K - Medium");
    rsim_w_kstr(w, "model_path", path);
    rsim_w_kjson(w, "modalities", "{\"vision\":false,\"video\":false,\"audio\":false}");
    rsim_w_kstr(w, "media_marker", "<__media__>");
    rsim_w_kbool(w, "endpoint_slots", !s->o.no_slots);
    rsim_w_kbool(w, "endpoint_props", false);
    rsim_w_kbool(w, "endpoint_metrics", s->o.metrics);
    rsim_w_kbool(w, "ui", true);
    rsim_w_kjson(w, "ui_settings", "{}");
    rsim_w_kstr(w, "chat_template", "{% for message in messages %}{{ message['content'] }}{% endfor %}");
    rsim_w_kjson(w, "chat_template_caps", "{\"supports_tools\":false,\"supports_system_role\":true}");
    rsim_w_kstr(w, "bos_token", "<s>");
    rsim_w_kstr(w, "eos_token", "</s>");
    rsim_w_kstr(w, "build_info", rsim_build(s));
    rsim_w_kbool(w, "is_sleeping", m->state == RSIM_SLEEPING);
    rsim_w_kbool(w, "cors_proxy_enabled", false);
    rsim_w_obj_end(w);
}

RSIM_FN void rsim_w_slots(rsim_w *w, const rsim *s, const rsim_model *m) {
    int k, n = s->o.runtime == RSIM_RT_SERVER ? s->o.parallel : 4;
    rsim_w_arr(w);
    for (k = 0; k < n; k++) {
        bool busy = s->o.runtime == RSIM_RT_SERVER ? s->slots[k].busy : k < m->inflight;
        bool used = s->o.runtime == RSIM_RT_SERVER ? s->slots[k].used : busy || (k < 4 && m->slot_kv[k]);
        rsim_w_obj(w);
        rsim_w_kint(w, "id", k);
        rsim_w_kint(w, "n_ctx", rsim_child_ctx(s, m));
        rsim_w_kbool(w, "speculative", false);
        rsim_w_kbool(w, "is_processing", busy);
        if (used) {
            rsim_w_kint(w, "id_task", s->o.runtime == RSIM_RT_SERVER ? s->slots[k].id_task : 1);
            if (s->o.runtime == RSIM_RT_SERVER) {
                uint32_t nt = 0;
                int q;
                for (q = 0; q < s->slots[k].nkv; q++) nt += s->slots[k].kv[q].n;
                rsim_w_kint(w, "n_prompt_tokens", nt);
            } else {
                rsim_w_kint(w, "n_prompt_tokens", k < 4 && m->slot_kv[k] ? m->slot_kv[k] : 6);
            }
            rsim_w_kint(w, "n_prompt_tokens_processed", 6);
            rsim_w_kint(w, "n_prompt_tokens_cache", 0);
            rsim_w_kjson(w, "params", "{\"n_predict\":-1,\"temperature\":0.8}");
            rsim_w_kjson(w, "next_token", "[{\"has_next_token\":false,\"has_new_line\":false,\"n_remain\":-1,\"n_decoded\":5}]");
        }
        rsim_w_obj_end(w);
    }
    rsim_w_arr_end(w);
}

RSIM_FN void rsim_w_text(rsim_w *w) {
    char b[64];
    int k;
    b[0] = 0;
    for (k = 0; k < RSIM_NTOK; k++) strcat(b, rsim_tokens[k]);
    rsim_w_str(w, b);
}

RSIM_FN void rsim_w_usage(rsim_w *w) {
    rsim_w_kjson(w, "usage", "{\"completion_tokens\":5,\"prompt_tokens\":6,\"total_tokens\":11}");
}

/* OpenAI chat.completion (non-streamed). */
/* llama.cpp's "timings" object (July answers and last stream chunks carry it). */
RSIM_FN void rsim_w_timings(rsim_w *w, const rsim *s) {
    if (!rsim_july(s)) return;
    rsim_w_kjson(w, "timings", "{\"cache_n\":0,\"prompt_n\":6,\"prompt_ms\":1.5,\"prompt_per_token_ms\":0.25,"
                               "\"prompt_per_second\":4000.0,\"predicted_n\":5,\"predicted_ms\":20.0,"
                               "\"predicted_per_token_ms\":4.0,\"predicted_per_second\":250.0}");
}

RSIM_FN void rsim_w_chat(rsim_w *w, const rsim *s, const rsim_reply *r, const char *model, bool text_completion) {
    rsim_w_obj(w);
    rsim_w_key(w, "choices");
    rsim_w_arr(w);
    rsim_w_obj(w);
    rsim_w_kstr(w, "finish_reason", "stop");
    rsim_w_kint(w, "index", 0);
    if (text_completion) { rsim_w_key(w, "text"); rsim_w_text(w); }
    else {
        rsim_w_key(w, "message");
        rsim_w_obj(w);
        rsim_w_kstr(w, "role", "assistant");
        rsim_w_key(w, "content");
        rsim_w_text(w);
        rsim_w_obj_end(w);
    }
    rsim_w_obj_end(w);
    rsim_w_arr_end(w);
    rsim_w_kint(w, "created", (int64_t)rsim_unix_s(s));
    rsim_w_kstr(w, "model", model);
    rsim_w_kstr(w, "system_fingerprint", rsim_build(s));
    rsim_w_kstr(w, "object", text_completion ? "text_completion" : "chat.completion");
    rsim_w_usage(w);
    rsim_w_kstr(w, "id", "chatcmpl-rsdsim");
    if (s->o.runtime == RSIM_RT_ROUTER) rsim_w_timings(w, s);
    if (s->o.runtime == RSIM_RT_SERVER && r) { /* what the slot's cache saved */
        char b[256];
        snprintf(b, sizeof b, "{\"cache_n\":%u,\"prompt_n\":%u,\"prompt_ms\":1.5,\"prompt_per_token_ms\":0.25,"
                 "\"prompt_per_second\":4000.0,\"predicted_n\":5,\"predicted_ms\":20.0,"
                 "\"predicted_per_token_ms\":4.0,\"predicted_per_second\":250.0}", (unsigned)r->cache_n,
                 (unsigned)r->prompt_n);
        rsim_w_kjson(w, "timings", b);
    }
    rsim_w_obj_end(w);
}

RSIM_FN void rsim_w_l_model(rsim_w *w, const rsim_model *m) {
    int k;
    rsim_w_obj(w);
    rsim_w_kstr(w, "type", m->embedding ? "embedding" : "llm");
    rsim_w_kstr(w, "publisher", m->publisher);
    rsim_w_kstr(w, "key", m->id);
    rsim_w_kstr(w, "display_name", m->id);
    if (!m->embedding) rsim_w_kstr(w, "architecture", "llama");
    rsim_w_kjson(w, "quantization", "{\"name\":\"Q4_K_M\",\"bits_per_weight\":4}");
    rsim_w_kint(w, "size_bytes", (int64_t)m->size_bytes);
    rsim_w_key(w, "params_string");
    rsim_w_null(w);
    rsim_w_key(w, "loaded_instances");
    rsim_w_arr(w);
    for (k = 0; k < m->ninst; k++) {
        rsim_w_obj(w);
        rsim_w_kstr(w, "id", m->inst[k].id);
        rsim_w_key(w, "config");
        rsim_w_obj(w);
        rsim_w_kint(w, "context_length", m->inst[k].ctx);
        if (!m->embedding) {
            rsim_w_kint(w, "eval_batch_size", 512);
            rsim_w_kint(w, "parallel", 4);
            rsim_w_kbool(w, "flash_attention", true);
            rsim_w_kbool(w, "offload_kv_cache_to_gpu", true);
        }
        rsim_w_obj_end(w);
        rsim_w_obj_end(w);
    }
    rsim_w_arr_end(w);
    rsim_w_kint(w, "max_context_length", m->ctx_train);
    rsim_w_kstr(w, "format", "gguf");
    if (!m->embedding) rsim_w_kjson(w, "capabilities", "{\"vision\":false,\"trained_for_tool_use\":true}");
    rsim_w_obj_end(w);
}

RSIM_FN void rsim_w_l_v0(rsim_w *w, const rsim_model *m) {
    rsim_w_obj(w);
    rsim_w_kstr(w, "id", m->id);
    rsim_w_kstr(w, "object", "model");
    rsim_w_kstr(w, "type", m->embedding ? "embeddings" : "llm");
    rsim_w_kstr(w, "publisher", m->publisher);
    rsim_w_kstr(w, "arch", "llama");
    rsim_w_kstr(w, "compatibility_type", "gguf");
    rsim_w_kstr(w, "quantization", "Q4_K_M");
    rsim_w_kstr(w, "state", m->ninst ? "loaded" : "not-loaded");
    rsim_w_kint(w, "max_context_length", m->ctx_train);
    if (m->ninst) rsim_w_kint(w, "loaded_context_length", m->inst[0].ctx);
    if (!m->embedding) rsim_w_kjson(w, "capabilities", "[\"tool_use\"]");
    rsim_w_obj_end(w);
}

RSIM_FN void rsim_w_o_details(rsim_w *w) {
    rsim_w_kjson(w, "details", "{\"parent_model\":\"\",\"format\":\"gguf\",\"family\":\"llama\",\"families\":[\"llama\"],\"parameter_size\":\"8.0B\",\"quantization_level\":\"Q4_K_M\"}");
}

RSIM_FN void rsim_w_o_digest(rsim_w *w, const char *id) {
    uint64_t h = 1469598103934665603ull;
    char b[72];
    int k;
    for (; *id; id++) h = (h ^ (unsigned char)*id) * 1099511628211ull;
    for (k = 0; k < 4; k++) snprintf(b + k * 16, sizeof b - (size_t)k * 16, "%016llx", (unsigned long long)(h * (uint64_t)(k + 1)));
    rsim_w_kstr(w, "digest", b);
}

/* Ollama expires_at (unix ms) of a runner. */
RSIM_FN uint64_t rsim_o_expires_unix_ms(const rsim *s, const rsim_model *m) {
    uint64_t base = s->o.epoch_s * 1000;
    if (m->forever) return base + s->now + RSIM_FOREVER_MS;
    return base + (m->state == RSIM_LOADING || m->inflight > 0 ? s->now + m->keep_ms : m->expires_ms);
}

RSIM_FN void rsim_w_o_ps(rsim_w *w, const rsim *s) {
    int order[RSIM_MAX_MODELS], n = 0, i, j;
    char b[48], name[RSIM_NAME_MAX + 8];
    for (i = 0; i < s->nmodels; i++)
        if (s->m[i].state == RSIM_LOADED || s->m[i].state == RSIM_LOADING) order[n++] = i;
    for (i = 1; i < n; i++) /* latest expiry first */
        for (j = i; j > 0 && rsim_o_expires_unix_ms(s, &s->m[order[j]]) > rsim_o_expires_unix_ms(s, &s->m[order[j - 1]]); j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    rsim_w_obj(w);
    rsim_w_key(w, "models");
    rsim_w_arr(w);
    for (i = 0; i < n; i++) {
        const rsim_model *m = &s->m[order[i]];
        rsim_o_name(m, name, sizeof name);
        rsim_w_obj(w);
        rsim_w_kstr(w, "name", name);
        rsim_w_kstr(w, "model", name);
        rsim_w_kint(w, "size", (int64_t)m->size_bytes);
        rsim_w_o_digest(w, m->id);
        rsim_w_o_details(w);
        rsim_rfc3339(rsim_o_expires_unix_ms(s, m), b, sizeof b);
        rsim_w_kstr(w, "expires_at", b);
        rsim_w_kint(w, "size_vram", (int64_t)m->size_bytes);
        rsim_w_kint(w, "context_length", m->num_ctx ? m->num_ctx : m->ctx);
        rsim_w_obj_end(w);
    }
    rsim_w_arr_end(w);
    rsim_w_obj_end(w);
}

RSIM_FN void rsim_w_sim_log(rsim_w *w, const rsim *s) {
    uint32_t n = s->log_total < (uint32_t)RSIM_LOG_MAX ? s->log_total : (uint32_t)RSIM_LOG_MAX, i,
             first = s->log_total < RSIM_LOG_MAX ? 0 : s->log_total % RSIM_LOG_MAX;
    rsim_w_obj(w);
    rsim_w_kint(w, "total", s->log_total);
    rsim_w_key(w, "entries");
    rsim_w_arr(w);
    for (i = 0; i < n; i++) {
        const rsim_log_entry *e = &s->log[(first + i) % RSIM_LOG_MAX];
        rsim_w_obj(w);
        rsim_w_kstr(w, "method", e->method);
        rsim_w_kstr(w, "path", e->path);
        rsim_w_kstr(w, "model", e->model);
        rsim_w_kint(w, "status", e->status);
        rsim_w_kint(w, "t_ms", (int64_t)e->t_ms);
        rsim_w_obj_end(w);
    }
    rsim_w_arr_end(w);
    /* per model: state and the instant it last became loaded (-1 = never), on the clock
       the adapter passes (rsd-sim: CLOCK_MONOTONIC ms), so a bench can time load->return */
    rsim_w_key(w, "models");
    rsim_w_arr(w);
    for (i = 0; i < (uint32_t)s->nmodels; i++) {
        const rsim_model *m = &s->m[i];
        rsim_w_obj(w);
        rsim_w_kstr(w, "id", m->id);
        rsim_w_kstr(w, "state", rsim_state_names[m->state]);
        rsim_w_kint(w, "loads", (int64_t)m->loads_done);
        rsim_w_kint(w, "loaded_ms", m->loads_done ? (int64_t)m->loaded_at_ms : -1);
        rsim_w_obj_end(w);
    }
    rsim_w_arr_end(w);
    rsim_w_obj_end(w);
}

/* An answer's api.Metrics durations (ns) on the sim's clock: load = queued until its
   model was ready, prompt eval 0.25 ms a token, eval the rest; none is 0 (Go leaves a
   zero out: omitempty), so at least 1 us each. */
RSIM_FN void rsim_o_durations(const rsim *s, const rsim_reply *r, int64_t *load, int64_t *pe, int64_t *ev,
                              int64_t *total) {
    uint64_t ready = r->loaded_ms ? r->loaded_ms : s->now;
    int64_t run = ready <= s->now ? (int64_t)(s->now - ready) * 1000000 : 0;
    *load = ready >= r->t0_ms ? (int64_t)(ready - r->t0_ms) * 1000000 : 0;
    if (*load < 1000) *load = 1000;
    *pe = (int64_t)r->prompt_n * 250000;
    if (*pe < 1000) *pe = 1000;
    *ev = run - *pe;
    if (*ev < 1000) *ev = 1000;
    *total = *load + *pe + *ev;
}

/* One Ollama /api/generate or /api/chat object: `piece` is a streamed token (done false),
   NULL for the whole answer (done true, with done_reason load/unload/stop). */
RSIM_FN void rsim_w_o_gen(rsim_w *w, const rsim *s, const rsim_reply *r, const char *piece, bool done) {
    char b[48];
    rsim_w_obj(w);
    rsim_w_kstr(w, "model", r->aux);
    rsim_rfc3339(s->o.epoch_s * 1000 + s->now, b, sizeof b);
    rsim_w_kstr(w, "created_at", b);
    if (r->sub == 1) {
        rsim_w_key(w, "message");
        rsim_w_obj(w);
        rsim_w_kstr(w, "role", "assistant");
        rsim_w_key(w, "content");
        if (piece) rsim_w_str(w, piece); else if (r->n == 2 && !r->stream) rsim_w_text(w); else rsim_w_str(w, "");
        rsim_w_obj_end(w);
    } else {
        rsim_w_key(w, "response");
        if (piece) rsim_w_str(w, piece); else if (r->n == 2 && !r->stream) rsim_w_text(w); else rsim_w_str(w, "");
    }
    rsim_w_kbool(w, "done", done);
    if (done) {
        rsim_w_kstr(w, "done_reason", r->n == 0 ? "load" : r->n == 1 ? "unload" : "stop");
        if (r->n == 2) { /* api.Metrics after the context, as GenerateResponse and ChatResponse order them */
            int64_t load, pe, ev, total;
            uint32_t k;
            if (r->sub == 0) {
                rsim_w_key(w, "context"); /* the prompt's and the answer's tokens */
                rsim_w_arr(w);
                for (k = 0; k < r->prompt_n + RSIM_NTOK; k++)
                    rsim_w_int(w, (int64_t)((r->in_hash >> (k % 32)) + k * 2654435761u) % 32000);
                rsim_w_arr_end(w);
            }
            rsim_o_durations(s, r, &load, &pe, &ev, &total);
            rsim_w_kint(w, "total_duration", total);
            rsim_w_kint(w, "load_duration", load);
            rsim_w_kint(w, "prompt_eval_count", r->prompt_n);
            rsim_w_kint(w, "prompt_eval_duration", pe);
            rsim_w_kint(w, "eval_count", RSIM_NTOK);
            rsim_w_kint(w, "eval_duration", ev);
        }
    }
    rsim_w_obj_end(w);
}

/* /api/embed ({"model","embeddings":[[..]..],"total_duration","load_duration",
   "prompt_eval_count"}, each vector of unit length) and /api/embeddings
   ({"embedding":[..]}, as the runner gives it); empty input: only loaded. */
RSIM_FN void rsim_w_o_embed(rsim_w *w, const rsim *s, const rsim_reply *r) {
    uint32_t i, j;
    rsim_w_obj(w);
    if (r->sub == 2) {
        rsim_w_kstr(w, "model", r->aux);
        rsim_w_key(w, "embeddings");
    } else {
        rsim_w_key(w, "embedding");
    }
    rsim_w_arr(w);
    for (i = 0; r->n == 2 && i < (r->sub == 2 ? r->ninput : 1); i++) {
        uint64_t h = r->in_hash + i * 0x9e3779b97f4a7c15ull;
        if (r->sub == 2) rsim_w_arr(w);
        for (j = 0; j < RSIM_EMBED_DIM; j++) { /* signs from the hash; 1/sqrt(8) is unit length */
            bool neg = (h >> j) & 1;
            if (r->sub == 2) rsim_w_num(w, neg ? -0.35355339059327373 : 0.35355339059327373);
            else rsim_w_num(w, (neg ? -0.25 : 0.25) * (double)(1 + ((h >> (8 + 2 * j)) & 3)));
        }
        if (r->sub == 2) rsim_w_arr_end(w);
    }
    rsim_w_arr_end(w);
    if (r->sub == 2 && r->n == 2) {
        int64_t load, pe, ev, total;
        rsim_o_durations(s, r, &load, &pe, &ev, &total);
        rsim_w_kint(w, "total_duration", total);
        rsim_w_kint(w, "load_duration", load);
        rsim_w_kint(w, "prompt_eval_count", r->prompt_n);
    }
    rsim_w_obj_end(w);
}

/* The error envelopes: llama.cpp's, its middleware's, the flat one and LM Studio's. Returns false for any other kind of reply. */
RSIM_FN bool rsim_render_error(rsim *s, const rsim_reply *r, const rsim_model *m, rsim_w *w,
                                rsim_resp *resp) {
    (void)m;
    switch (r->out) {
    case RSIM_O_LERR:
        rsim_w_obj(w); rsim_w_key(w, "error"); rsim_w_obj(w);
        rsim_w_kint(w, "code", resp->status);
        rsim_w_kstr(w, "message", r->msg);
        rsim_w_kstr(w, "type", rsim_err_type(resp->status));
        rsim_w_obj_end(w); rsim_w_obj_end(w);
        break;
    case RSIM_O_LERR_MW:
        rsim_w_obj(w); rsim_w_key(w, "error"); rsim_w_obj(w);
        rsim_w_kstr(w, "message", r->msg);
        rsim_w_kstr(w, "type", rsim_err_type(resp->status));
        rsim_w_kint(w, "code", resp->status);
        rsim_w_obj_end(w); rsim_w_obj_end(w);
        break;
    case RSIM_O_FLAT: rsim_w_obj(w); rsim_w_kstr(w, "error", r->msg); rsim_w_obj_end(w); break;
    case RSIM_O_LMS_ERR:
        rsim_w_obj(w);
        if (s->o.error_string) rsim_w_kstr(w, "error", r->msg);
        else {
            rsim_w_key(w, "error"); rsim_w_obj(w);
            rsim_w_kstr(w, "type", r->aux);
            rsim_w_kstr(w, "message", r->msg);
            if (!strcmp(r->aux, "invalid_request") && strstr(r->msg, "\"model\" is required")) {
                rsim_w_kstr(w, "code", "missing_required_parameter");
                rsim_w_kstr(w, "param", "model");
            }
            rsim_w_obj_end(w);
        }
        rsim_w_obj_end(w);
        break;
    default: return false;
    }
    return true;
}

/* The router's own answers: the model listing and /props. Returns false for any other kind of reply. */
RSIM_FN bool rsim_render_router(rsim *s, const rsim_reply *r, const rsim_model *m, rsim_w *w,
                                rsim_resp *resp) {
    int i;
    (void)m;
    (void)r;
    (void)resp;
    switch (r->out) {
    case RSIM_O_R_MODELS: { /* July: sorted by id, "data" first; later (Aug tree): catalog order */
        int order[RSIM_MAX_MODELS], n = 0, j;
        for (i = 0; i < s->nmodels; i++)
            if (!s->m[i].removed) order[n++] = i;
        for (i = 1; rsim_july(s) && i < n; i++)
            for (j = i; j > 0 && strcmp(s->m[order[j]].id, s->m[order[j - 1]].id) < 0; j--) {
                int x = order[j];
                order[j] = order[j - 1];
                order[j - 1] = x;
            }
        rsim_w_obj(w);
        if (!rsim_july(s)) rsim_w_kstr(w, "object", "list");
        rsim_w_key(w, "data");
        rsim_w_arr(w);
        for (i = 0; i < n; i++) rsim_w_router_entry(w, s, &s->m[order[i]]);
        rsim_w_arr_end(w);
        if (rsim_july(s)) rsim_w_kstr(w, "object", "list");
        rsim_w_obj_end(w);
        break;
    }
    case RSIM_O_R_PROPS:
        rsim_w_obj(w);
        rsim_w_kstr(w, "role", "router");
        rsim_w_kint(w, "max_instances", s->o.models_max);
        rsim_w_kbool(w, "models_autoload", !s->o.no_autoload);
        rsim_w_kstr(w, "model_alias", "llama-server");
        rsim_w_kstr(w, "model_path", "none");
        rsim_w_kjson(w, "default_generation_settings", "{\"params\":null,\"n_ctx\":0}");
        rsim_w_kjson(w, "ui_settings", "{}");
        rsim_w_kstr(w, "build_info", rsim_build(s));
        rsim_w_kbool(w, "cors_proxy_enabled", false);
        rsim_w_obj_end(w);
        break;
    default: return false;
    }
    return true;
}

/* Generation answers of llama.cpp children (and LM Studio's OpenAI routes). Returns false for any other kind of reply. */
RSIM_FN bool rsim_render_gen(rsim *s, const rsim_reply *r, const rsim_model *m, rsim_w *w,
                                rsim_resp *resp) {
    (void)resp;
    switch (r->out) {
    case RSIM_O_CHAT: case RSIM_O_OAI_COMPL:
        rsim_w_chat(w, s, r, s->o.runtime == RSIM_RT_LMSTUDIO ? r->aux : m ? rsim_child_id(s, m) : "", r->out == RSIM_O_OAI_COMPL);
        break;
    case RSIM_O_COMPLETION:
        rsim_w_obj(w);
        rsim_w_kint(w, "index", 0);
        rsim_w_key(w, "content"); rsim_w_text(w);
        rsim_w_kint(w, "id_slot", r->slot >= 0 ? r->slot : 0);
        rsim_w_kbool(w, "stop", true);
        rsim_w_kstr(w, "model", m ? rsim_child_id(s, m) : "");
        rsim_w_kint(w, "tokens_predicted", RSIM_NTOK);
        rsim_w_kint(w, "tokens_evaluated", 6);
        rsim_w_kstr(w, "stop_type", "eos");
        rsim_w_obj_end(w);
        break;
    case RSIM_O_TOKENIZE: rsim_w_json(w, "{\"tokens\":[1,910,338,263]}"); break;
    case RSIM_O_EMBED:
        rsim_w_obj(w);
        rsim_w_kstr(w, "object", "list");
        rsim_w_kjson(w, "data", "[{\"object\":\"embedding\",\"index\":0,\"embedding\":[0.1,-0.2,0.3,0.4]}]");
        rsim_w_kstr(w, "model", s->o.runtime == RSIM_RT_LMSTUDIO ? r->aux : m ? rsim_child_id(s, m) : "");
        rsim_w_kjson(w, "usage", "{\"prompt_tokens\":4,\"total_tokens\":4}");
        rsim_w_obj_end(w);
        break;
    default: return false;
    }
    return true;
}

/* A llama.cpp child's own /props, /slots and /models. Returns false for any other kind of reply. */
RSIM_FN bool rsim_render_child(rsim *s, const rsim_reply *r, const rsim_model *m, rsim_w *w,
                                rsim_resp *resp) {
    (void)r;
    (void)resp;
    switch (r->out) {
    case RSIM_O_C_PROPS: if (m) rsim_w_child_props(w, s, m); break;
    case RSIM_O_C_SLOTS: if (m) rsim_w_slots(w, s, m); break;
    case RSIM_O_C_MODELS:
        if (!m) break;
        rsim_w_obj(w);
        rsim_w_key(w, "models");
        rsim_w_arr(w);
        rsim_w_obj(w);
        rsim_w_kstr(w, "name", rsim_child_id(s, m));
        rsim_w_kstr(w, "model", rsim_child_id(s, m));
        rsim_w_kstr(w, "modified_at", "");
        rsim_w_kstr(w, "size", "");
        rsim_w_kstr(w, "digest", "");
        rsim_w_kstr(w, "type", "model");
        rsim_w_kstr(w, "description", "");
        rsim_w_kjson(w, "tags", "[\"\"]");
        rsim_w_kjson(w, "capabilities", "[\"completion\"]");
        rsim_w_kstr(w, "parameters", "");
        rsim_w_kjson(w, "details", "{\"parent_model\":\"\",\"format\":\"gguf\",\"family\":\"\",\"families\":[\"\"],\"parameter_size\":\"\",\"quantization_level\":\"\"}");
        rsim_w_obj_end(w);
        rsim_w_arr_end(w);
        rsim_w_kstr(w, "object", "list");
        rsim_w_key(w, "data");
        rsim_w_arr(w);
        rsim_w_child_entry(w, s, m);
        rsim_w_arr_end(w);
        rsim_w_obj_end(w);
        break;
    default: return false;
    }
    return true;
}

/* Ollama's /api/tags, /api/ps and /api/show. Returns false for any other kind of reply. */
RSIM_FN bool rsim_render_ollama(rsim *s, const rsim_reply *r, const rsim_model *m, rsim_w *w,
                                rsim_resp *resp) {
    char b[64];
    int i;
    (void)r;
    (void)resp;
    switch (r->out) {
    case RSIM_O_O_TAGS:
        rsim_w_obj(w);
        rsim_w_key(w, "models");
        rsim_w_arr(w);
        for (i = 0; i < s->nmodels; i++) {
            char name[RSIM_NAME_MAX + 8];
            if (s->m[i].removed) continue;
            rsim_o_name(&s->m[i], name, sizeof name);
            rsim_w_obj(w);
            rsim_w_kstr(w, "name", name);
            rsim_w_kstr(w, "model", name);
            rsim_rfc3339(s->o.epoch_s * 1000 - 86400000ull, b, sizeof b);
            rsim_w_kstr(w, "modified_at", b);
            rsim_w_kint(w, "size", (int64_t)s->m[i].size_bytes);
            rsim_w_o_digest(w, s->m[i].id);
            rsim_w_o_details(w);
            rsim_w_obj_end(w);
        }
        rsim_w_arr_end(w);
        rsim_w_obj_end(w);
        break;
    case RSIM_O_O_PS: rsim_w_o_ps(w, s); break;
    case RSIM_O_O_SHOW:
        if (!m) break;
        rsim_w_obj(w);
        rsim_w_kstr(w, "modelfile", "FROM /models/blob\n");
        rsim_w_kstr(w, "parameters", "");
        rsim_w_kstr(w, "template", "{{ .Prompt }}");
        rsim_w_o_details(w);
        rsim_w_key(w, "model_info");
        rsim_w_obj(w);
        rsim_w_kstr(w, "general.architecture", "llama");
        rsim_w_kint(w, "llama.context_length", m->ctx_train);
        rsim_w_obj_end(w);
        rsim_w_kjson(w, "capabilities", m->embedding ? "[\"embedding\"]" : "[\"completion\"]");
        rsim_rfc3339(s->o.epoch_s * 1000 - 86400000ull, b, sizeof b); /* the manifest's time, as /api/tags */
        rsim_w_kstr(w, "modified_at", b);
        rsim_w_obj_end(w);
        break;
    default: return false;
    }
    return true;
}

/* LM Studio's catalogs (v1, v0, OpenAI), load reply and native chat. Returns false for any other kind of reply. */
RSIM_FN bool rsim_render_lmstudio(rsim *s, const rsim_reply *r, const rsim_model *m, rsim_w *w,
                                rsim_resp *resp) {
    int i;
    (void)resp;
    switch (r->out) {
    case RSIM_O_L_MODELS:
        rsim_w_obj(w);
        rsim_w_key(w, "models");
        rsim_w_arr(w);
        for (i = 0; i < s->nmodels; i++)
            if (!s->m[i].removed) rsim_w_l_model(w, &s->m[i]);
        rsim_w_arr_end(w);
        rsim_w_obj_end(w);
        break;
    case RSIM_O_L_V0:
        if (m) { rsim_w_l_v0(w, m); break; }
        rsim_w_obj(w);
        rsim_w_kstr(w, "object", "list");
        rsim_w_key(w, "data");
        rsim_w_arr(w);
        for (i = 0; i < s->nmodels; i++)
            if (!s->m[i].removed) rsim_w_l_v0(w, &s->m[i]);
        rsim_w_arr_end(w);
        rsim_w_obj_end(w);
        break;
    case RSIM_O_L_OAI_MODELS:
        rsim_w_obj(w);
        rsim_w_key(w, "data");
        rsim_w_arr(w);
        for (i = 0; i < s->nmodels; i++) {
            const rsim_model *x = &s->m[i];
            int k, j;
            bool dup = false;
            if (x->removed) continue;
            for (j = 0; j < i; j++)
                if (!s->m[j].removed && !strcmp(s->m[j].id, x->id)) dup = true;
            if (!dup) {
                rsim_w_obj(w);
                rsim_w_kstr(w, "id", x->id);
                rsim_w_kstr(w, "object", "model");
                rsim_w_kstr(w, "owned_by", x->publisher);
                rsim_w_obj_end(w);
            }
            for (k = 0; k < x->ninst; k++)
                if (strcmp(x->inst[k].id, x->id)) {
                    rsim_w_obj(w);
                    rsim_w_kstr(w, "id", x->inst[k].id);
                    rsim_w_kstr(w, "object", "model");
                    rsim_w_kstr(w, "owned_by", x->publisher);
                    rsim_w_obj_end(w);
                }
        }
        rsim_w_arr_end(w);
        rsim_w_kstr(w, "object", "list");
        rsim_w_obj_end(w);
        break;
    case RSIM_O_L_LOAD: {
        uint32_t ctx = r->ctx ? r->ctx : m ? m->ctx : 4096;
        rsim_w_obj(w);
        if (!s->o.legacy_shape) {
            rsim_w_kstr(w, "type", m && m->embedding ? "embedding" : "llm");
            rsim_w_kstr(w, "instance_id", r->aux);
        } else rsim_w_kstr(w, "model_instance_id", r->aux);
        rsim_w_key(w, "load_time_seconds");
        rsim_w_num(w, (double)r->n / 1000.0);
        if (!s->o.legacy_shape) rsim_w_kstr(w, "status", "loaded");
        if (r->flag || s->o.legacy_shape) {
            rsim_w_key(w, s->o.legacy_shape ? "config" : "load_config");
            rsim_w_obj(w);
            rsim_w_kint(w, "context_length", ctx);
            if (m && !m->embedding) {
                rsim_w_kint(w, "eval_batch_size", 512);
                rsim_w_kbool(w, "flash_attention", true);
                rsim_w_kbool(w, "offload_kv_cache_to_gpu", true);
            }
            rsim_w_obj_end(w);
        }
        rsim_w_obj_end(w);
        break;
    }
    case RSIM_O_L_CHAT:
        rsim_w_obj(w);
        rsim_w_kstr(w, "model_instance_id", r->aux);
        rsim_w_key(w, "output");
        rsim_w_arr(w);
        rsim_w_obj(w);
        rsim_w_kstr(w, "type", "message");
        rsim_w_key(w, "content");
        rsim_w_text(w);
        rsim_w_obj_end(w);
        rsim_w_arr_end(w);
        rsim_w_kjson(w, "stats", "{\"input_tokens\":6,\"total_output_tokens\":5,\"tokens_per_second\":100,\"time_to_first_token_seconds\":0.01}");
        rsim_w_kstr(w, "response_id", "resp_rsdsim");
        rsim_w_obj_end(w);
        break;
    default: return false;
    }
    return true;
}

/* Renders a finished reply into resp (status, content type, body). */
RSIM_FN int rsim_render(rsim *s, rsim_ticket *t, rsim_resp *resp) {
    rsim_w w;
    const rsim_reply *r = &t->r;
    const rsim_model *m = r->model >= 0 ? &s->m[r->model] : NULL;
    char b[64];
    bool text = false, nl = false, ok = true;
    rsd_json_w_init(&w, resp->body, resp->body_cap);
    resp->body_len = 0;
    resp->status = r->status ? r->status : 200;
    resp->content_type = RSIM_CT_JSON;
    switch (r->out) {
    case RSIM_O_RAW: rsim_w_json(&w, r->msg); break;
    case RSIM_O_TEXT: resp->content_type = RSIM_CT_TEXT; text = true; ok = rsim_put(resp, r->msg); break;
    case RSIM_O_PLAIN_JSON: text = true; ok = rsim_put(resp, r->msg); break;
    case RSIM_O_METRICS:
        resp->content_type = RSIM_CT_METRICS;
        text = true;
        ok = rsim_put(resp, "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
                       "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 0\n"
                       "# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n"
                       "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 0\n"
                       "# HELP llamacpp:requests_processing Number of requests processing.\n"
                       "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing ");
        snprintf(b, sizeof b, "%d\n", m ? m->inflight : 0);
        ok = ok && rsim_put(resp, b);
        break;
    case RSIM_O_O_GEN:
        resp->content_type = r->stream ? RSIM_CT_NDJSON : RSIM_CT_JSON;
        if (r->sub >= 2) rsim_w_o_embed(&w, s, r);
        else rsim_w_o_gen(&w, s, r, NULL, true);
        nl = r->stream;
        break;
    case RSIM_O_SIM_LOG: rsim_w_sim_log(&w, s); break;
    default:
        (void)(rsim_render_error(s, r, m, &w, resp) ||
               rsim_render_router(s, r, m, &w, resp) ||
               rsim_render_gen(s, r, m, &w, resp) ||
               rsim_render_child(s, r, m, &w, resp) ||
               rsim_render_ollama(s, r, m, &w, resp) ||
               rsim_render_lmstudio(s, r, m, &w, resp));
        break;
    }
    if (!text) {
        int n = rsd_json_w_finish(&w);
        if (n >= 0) resp->body_len = (size_t)n;
        ok = n >= 0 && (!nl || rsim_put(resp, "\n"));
    }
    if (!ok) {
        resp->status = 500;
        resp->content_type = RSIM_CT_TEXT;
        resp->body_len = 0;
        rsim_put(resp, "rsd-sim: response buffer too small");
        return -1;
    }
    return 0;
}

/* One SSE event (router /models/sse) as "data: {...}\n\n". */
RSIM_FN void rsim_render_event(rsim *s, const rsim_event *e, rsim_resp *resp) {
    rsim_w w;
    static const char *const kinds[] = {"", "model_status", "status_change", "models_reload"};
    int n;
    resp->body_len = 0;
    if (!rsim_put(resp, "data: ")) return;
    rsd_json_w_init(&w, resp->body + 6, resp->body_cap - 6);
    rsim_w_obj(&w);
    rsim_w_kstr(&w, "model", e->model >= 0 ? s->m[e->model].id : "*");
    rsim_w_kstr(&w, "event", kinds[e->kind]);
    if (e->kind != RSIM_EV_RELOAD) {
        rsim_w_key(&w, "data");
        rsim_w_obj(&w);
        rsim_w_kstr(&w, "status", rsim_state_names[e->status]);
        if (e->progress_pct >= 0) {
            rsim_w_key(&w, "progress");
            rsim_w_obj(&w);
            if (s->o.router_gen == RSIM_GEN_JULY) {
                rsim_w_kjson(&w, "stages", "[\"text_model\"]");
                rsim_w_kstr(&w, "current", "text_model");
            } else rsim_w_kstr(&w, "stage", e->progress_pct ? "text_model" : "fit_params"); /* PR #24828 */
            rsim_w_key(&w, "value"); /* 0.0 and 1.0, as nlohmann writes them */
            if (e->progress_pct % 100 == 0) rsim_w_json(&w, e->progress_pct ? "1.0" : "0.0");
            else rsim_w_num(&w, e->progress_pct / 100.0);
            rsim_w_obj_end(&w);
        }
        if (e->status == RSIM_UNLOADED) rsim_w_kint(&w, "exit_code", e->exit_code);
        if (e->info && e->model >= 0) { rsim_w_key(&w, "info"); rsim_w_child_entry(&w, s, &s->m[e->model]); }
        rsim_w_obj_end(&w);
    }
    rsim_w_obj_end(&w);
    n = rsd_json_w_finish(&w);
    resp->body_len = n < 0 ? 0 : 6 + (size_t)n;
    if (n < 0 || !rsim_put(resp, "\n\n")) resp->body_len = 0;
}

/* Chunk `step` of a streamed answer. */
RSIM_FN void rsim_render_chunk(rsim *s, rsim_ticket *t, rsim_resp *resp) {
    rsim_w w;
    const rsim_model *m = t->r.model >= 0 ? &s->m[t->r.model] : NULL;
    const char *model = s->o.runtime == RSIM_RT_LMSTUDIO ? t->r.aux : m ? rsim_child_id(s, m) : "";
    int k = t->step, last = t->nsteps - 1, n;
    resp->body_len = 0;
    if (t->r.out == RSIM_O_O_GEN) { /* Ollama: NDJSON lines, the last one done */
        resp->content_type = RSIM_CT_NDJSON;
        rsd_json_w_init(&w, resp->body, resp->body_cap);
        rsim_w_o_gen(&w, s, &t->r, k < last ? rsim_tokens[k] : NULL, k == last);
        n = rsd_json_w_finish(&w);
        resp->body_len = n < 0 ? 0 : (size_t)n;
        if (n < 0 || !rsim_put(resp, "\n")) resp->body_len = 0;
        return;
    }
    if (t->r.out != RSIM_O_COMPLETION && k == last) {
        rsim_put(resp, "data: [DONE]\n\n");
        return;
    }
    if (!rsim_put(resp, "data: ")) return;
    rsd_json_w_init(&w, resp->body + 6, resp->body_cap - 6);
    rsim_w_obj(&w);
    if (t->r.out == RSIM_O_COMPLETION) {
        rsim_w_kint(&w, "index", 0);
        rsim_w_kstr(&w, "content", k < RSIM_NTOK ? rsim_tokens[k] : "");
        rsim_w_kint(&w, "id_slot", t->r.slot >= 0 ? t->r.slot : 0);
        rsim_w_kbool(&w, "stop", k == last);
        if (k == last) {
            rsim_w_kstr(&w, "model", model);
            rsim_w_kint(&w, "tokens_predicted", RSIM_NTOK);
            rsim_w_kstr(&w, "stop_type", "eos");
        }
    } else {
        bool chat = t->r.out == RSIM_O_CHAT;
        int tok = chat ? k - 1 : k;
        rsim_w_key(&w, "choices");
        rsim_w_arr(&w);
        rsim_w_obj(&w);
        rsim_w_key(&w, "finish_reason");
        if (tok >= RSIM_NTOK) rsim_w_str(&w, "stop"); else rsim_w_null(&w);
        rsim_w_kint(&w, "index", 0);
        if (chat) {
            rsim_w_key(&w, "delta");
            rsim_w_obj(&w);
            if (k == 0) { rsim_w_kstr(&w, "role", "assistant"); rsim_w_key(&w, "content"); rsim_w_null(&w); }
            else if (tok < RSIM_NTOK) rsim_w_kstr(&w, "content", rsim_tokens[tok]);
            rsim_w_obj_end(&w);
        } else rsim_w_kstr(&w, "text", tok < RSIM_NTOK ? rsim_tokens[tok] : "");
        rsim_w_obj_end(&w);
        rsim_w_arr_end(&w);
        rsim_w_kint(&w, "created", (int64_t)rsim_unix_s(s));
        rsim_w_kstr(&w, "id", "chatcmpl-rsdsim");
        rsim_w_kstr(&w, "model", model);
        rsim_w_kstr(&w, "system_fingerprint", rsim_build(s));
        rsim_w_kstr(&w, "object", chat ? "chat.completion.chunk" : "text_completion");
        if (tok >= RSIM_NTOK) rsim_w_usage(&w);
        if (tok >= RSIM_NTOK && s->o.runtime == RSIM_RT_ROUTER) rsim_w_timings(&w, s);
    }
    rsim_w_obj_end(&w);
    n = rsd_json_w_finish(&w);
    resp->body_len = n < 0 ? 0 : 6 + (size_t)n;
    if (n < 0 || !rsim_put(resp, "\n\n")) resp->body_len = 0;
}

RSIM_FN const char *rsim_server_hdr(const rsim *s) {
    return s->o.runtime == RSIM_RT_ROUTER || s->o.runtime == RSIM_RT_SERVER ? "llama.cpp" : NULL;
}

RSIM_FN void rsim_resp_reset(const rsim *s, rsim_resp *resp) {
    resp->action = RSIM_RESPOND;
    resp->status = 200;
    resp->content_type = RSIM_CT_JSON;
    resp->server = rsim_server_hdr(s);
    resp->body_len = 0;
    resp->truncate = false;
    resp->truncate_at = 0;
    resp->ticket = 0;
    resp->keep_alive = NULL;
    resp->connection_close = resp->close_after = false;
    resp->file_name = resp->file_data = NULL;
    resp->file_len = 0;
    if (resp->body && resp->body_cap) resp->body[0] = 0;
}

/* The connection headers of llama.cpp's HTTP layer (both router generations and the
   single-model server, measured on build 10116): every answer below 400 says
   "Keep-Alive: timeout=5, max=100"; every 4xx/5xx says "Connection: close" (and the
   socket stays usable); an answer the router proxied from a child is chunked, says
   both, and the socket is closed after it. */
RSIM_FN void rsim_resp_conn(const rsim *s, const rsim_ticket *t, rsim_resp *resp) {
    if (s->o.runtime != RSIM_RT_ROUTER && s->o.runtime != RSIM_RT_SERVER) return;
    resp->keep_alive = NULL;
    resp->connection_close = false;
    resp->close_after = t->proxied && resp->status < 400;
    if (resp->status >= 400) resp->connection_close = true;
    else if (s->o.keep_alive_hdr[0]) resp->keep_alive = s->o.keep_alive_hdr;
}

/* Ticket t's saved slot file, when one waits, goes to the adapter with its answer. */
RSIM_FN void rsim_file_out(rsim *s, const rsim_ticket *t, rsim_resp *resp) {
    if (!s->file_write || s->file_ticket != t->id) return;
    s->file_write = false;
    resp->file_name = s->file_name;
    resp->file_data = s->file_data;
    resp->file_len = s->file_len;
}

/* A finished reply goes out: render, truncate on a drop fault, log, free the ticket. */
RSIM_FN int rsim_emit(rsim *s, rsim_ticket *t, rsim_resp *resp) {
    int r = rsim_render(s, t, resp);
    resp->action = RSIM_RESPOND;
    resp->ticket = t->id;
    rsim_resp_conn(s, t, resp);
    if (t->drop) { resp->truncate = true; resp->truncate_at = resp->body_len / 2; }
    if (t->log >= 0) s->log[t->log].status = resp->status;
    rsim_tk_free(t);
    return r;
}

/* Next output for a deferred request or stream: returns 1 with resp filled (see the top
   comment for the actions), 0 when there is nothing to send now. */
RSIM_FN int rsim_pull(rsim *s, uint64_t now_ms, rsim_resp *resp) {
    int i;
    rsim_tick(s, now_ms);
    rsim_resp_reset(s, resp);
    for (i = 0; i < RSIM_MAX_TICKETS; i++) {
        rsim_ticket *t = &s->t[i];
        if (t->op == RSIM_OP_DONE && t->delay_ms) { /* added delay, also for deferred answers */
            t->op = RSIM_OP_TIMER;
            t->at_ms = s->now + t->delay_ms;
            t->delay_ms = 0;
            continue;
        }
        if (t->op == RSIM_OP_DONE) {
            rsim_file_out(s, t, resp); /* a save answered later (a router's autoload) */
            rsim_emit(s, t, resp);
            return 1;
        }
        if (t->op == RSIM_OP_STREAM && t->phase == 0) {
            resp->action = RSIM_STREAM;
            resp->ticket = t->id;
            resp->content_type = t->r.out == RSIM_O_O_GEN ? RSIM_CT_NDJSON : RSIM_CT_SSE;
            rsim_resp_conn(s, t, resp);
            if (t->log >= 0) s->log[t->log].status = 200;
            t->phase = 1;
            return 1;
        }
        if (t->op == RSIM_OP_STREAM && t->cut) { /* July: the child died mid-stream */
            resp->ticket = t->id;
            resp->action = RSIM_CHUNK;
            resp->content_type = RSIM_CT_TEXT;
            rsim_put(resp, "proxy error: Failed to read connection");
            t->cut = false;
            t->step = t->nsteps;
            return 1;
        }
        if (t->op == RSIM_OP_STREAM && !t->stalled && t->r.ping_ms && t->ping_at <= s->now && t->step < t->nsteps) {
            resp->ticket = t->id; /* later generation: a comment-only keep-alive frame (PR #25241) */
            resp->action = RSIM_CHUNK;
            resp->content_type = RSIM_CT_SSE;
            rsim_put(resp, ":\n\n");
            t->ping_at += t->r.ping_ms;
            if (t->ping_at <= s->now) t->ping_at = s->now + t->r.ping_ms;
            return 1;
        }
        if (t->op == RSIM_OP_STREAM && !t->stalled && t->at_ms <= s->now) {
            resp->ticket = t->id;
            if (t->step >= t->nsteps) {
                resp->action = t->drop ? RSIM_DROP : RSIM_END;
                rsim_release(s, t);
                rsim_tk_free(t);
                rsim_step(s);
                return 1;
            }
            resp->action = RSIM_CHUNK;
            resp->content_type = RSIM_CT_SSE;
            rsim_render_chunk(s, t, resp);
            t->step++;
            if (t->step < t->nsteps) t->at_ms += s->o.token_ms;
            return 1;
        }
        if (t->op == RSIM_OP_SSE && t->cursor != s->ev_seq) {
            if (s->ev_seq - t->cursor > RSIM_EVENTS_MAX) t->cursor = s->ev_seq - RSIM_EVENTS_MAX;
            resp->action = RSIM_CHUNK;
            resp->ticket = t->id;
            resp->content_type = RSIM_CT_SSE;
            rsim_render_event(s, &s->ev[t->cursor % RSIM_EVENTS_MAX], resp);
            t->cursor++;
            return 1;
        }
    }
    return 0;
}

/* ==== requests ============================================================= */
typedef struct rsim_ctx {
    char method[8];
    char path[256];
    char query[512];
    rsd_json_doc doc;          /* the body, tokens in s->toks */
    int ntok;                  /* tokens available (0: none, or too many to keep) */
    bool has_body, valid;      /* valid: the body is one JSON value */
    bool post, get;
    char model[RSIM_NAME_MAX]; /* body "model" (POST) or ?model= (GET) */
    bool has_model;
    const rsim_req *q;
} rsim_ctx;

/* Query parameter `key`, percent-decoded (a value that does not decode or fit: as sent, cut
   to cap); false when absent. */
RSIM_FN bool rsim_query(const rsim_ctx *c, const char *key, char *out, size_t cap) {
    const char *p = c->query;
    size_t kl = strlen(key);
    while (*p) {
        size_t n = strcspn(p, "&");
        if (n >= kl && !strncmp(p, key, kl) && (p[kl] == '=' || n == kl)) {
            const char *v = p + kl + (p[kl] == '=' ? 1 : 0);
            size_t vn = (size_t)(p + n - v);
            if (rapp_pct_decode(v, vn, true, out, cap) < 0) rsim_cpy(out, cap, v, vn); /* kept as sent */
            rsim_utf8_fix(out);
            return true;
        }
        p += n;
        if (*p) p++;
    }
    return false;
}

/* Member `key` of object token obj (0 = the body's root), or -1. */
RSIM_FN int rsim_t_get(const rsim_ctx *c, int obj, const char *key) {
    if (obj < 0 || obj >= c->ntok || rsd_json_type_of(&c->doc, obj) != RSD_JSON_OBJECT) return -1;
    return rsd_json_find(&c->doc, obj, key);
}
/* A string token into dst: a decoded NUL byte becomes '?' (a name with \u0000 in it names
   no model, as on the real servers, where the whole string is compared), then lone
   surrogate escapes and other invalid UTF-8 too. */
RSIM_FN bool rsim_t_str(const rsim_ctx *c, int i, char *dst, size_t cap) {
    size_t n, k;
    if (i < 0 || rsd_json_type_of(&c->doc, i) != RSD_JSON_STRING || rsd_json_str(&c->doc, i, dst, cap, &n) != RSD_OK)
        return false;
    for (k = 0; k < n; k++)
        if (!dst[k]) dst[k] = '?';
    rsim_utf8_fix(dst);
    return true;
}
RSIM_FN bool rsim_t_num(const rsim_ctx *c, int i, double *out) {
    return i >= 0 && rsd_json_type_of(&c->doc, i) == RSD_JSON_NUMBER && rsd_json_double(&c->doc, i, out) == RSD_OK;
}
RSIM_FN bool rsim_t_bool(const rsim_ctx *c, int i, bool want) {
    bool v;
    return i >= 0 && rsd_json_bool(&c->doc, i, &v) == RSD_OK && v == want;
}
/* Body member `key` as a string; false when absent or not a string. */
RSIM_FN bool rsim_b_str(const rsim_ctx *c, const char *key, char *dst, size_t cap) {
    return rsim_t_str(c, rsim_t_get(c, 0, key), dst, cap);
}
/* Body member `key` as a number. */
RSIM_FN bool rsim_b_num(const rsim_ctx *c, const char *key, double *out) {
    return rsim_t_num(c, rsim_t_get(c, 0, key), out);
}

/* Later generations' keep-alive frames in a streamed answer (PR #25241): every second,
   or the body's sse_ping_interval (seconds, UNCONFIRMED unit; <= 0 = none). July: none. */
RSIM_FN uint32_t rsim_ping_ms(const rsim *s, const rsim_ctx *c) {
    double d;
    if (s->o.router_gen == RSIM_GEN_JULY) return 0;
    if (!rsim_b_num(c, "sse_ping_interval", &d)) return 1000;
    return d <= 0 || d > 86400 ? 0 : d * 1000 < 1 ? 1 : (uint32_t)(d * 1000);
}

RSIM_FN bool rsim_route(const rsim_ctx *c, const char *method, const char *path) {
    return !strcmp(c->method, method) && !strcmp(c->path, path);
}

/* nlohmann-style parse error text for 500 answers (wire.md 1.5). */
RSIM_FN void rsim_parse_error(const rsim_ctx *c, rsim_ticket *t) {
    char msg[RSIM_MSG_MAX];
    if (!c->has_body)
        snprintf(msg, sizeof msg, "[json.exception.parse_error.101] parse error at line 1, column 1: attempting to parse an empty input; check that your input string or stream contains the expected JSON");
    else {
        size_t o = c->doc.err.offset < c->doc.len ? c->doc.err.offset : 0;
        char ch = c->doc.src[o];
        snprintf(msg, sizeof msg, "[json.exception.parse_error.101] parse error at line %u, column %u: syntax error while parsing value - %s; last read: '%c'",
                 (unsigned)c->doc.err.line, (unsigned)c->doc.err.col, c->doc.err.what, ch >= 0x20 && ch < 0x7f ? ch : '?');
    }
    rsim_lerr(t, 500, msg);
}

/* API key: "Authorization: Bearer K" or (llama.cpp) "X-Api-Key: K". */
RSIM_FN bool rsim_auth_ok(const rsim *s, const rsim_req *q, bool allow_x_api_key) {
    size_t al = rsim_len(q->authorization, q->authorization_len), xl = rsim_len(q->x_api_key, q->x_api_key_len);
    int k;
    if (!s->o.nkeys) return true;
    for (k = 0; k < s->o.nkeys; k++) {
        size_t kl = strlen(s->o.keys[k]);
        if (al == kl + 7 && !strncmp(q->authorization, "Bearer ", 7) && !memcmp(q->authorization + 7, s->o.keys[k], kl)) return true;
        if (allow_x_api_key && xl == kl && !memcmp(q->x_api_key, s->o.keys[k], kl)) return true;
    }
    return false;
}

/* Listing side effects of --remove-after-list / --evict-after-list. */
RSIM_FN void rsim_after_list(rsim *s) {
    if (s->o.evict_after_list[0]) {
        int i = rsim_find(s, s->o.evict_after_list);
        if (i >= 0) {
            if (s->o.runtime == RSIM_RT_OLLAMA) rsim_o_unload(s, i);
            else if (s->o.runtime == RSIM_RT_LMSTUDIO) s->m[i].ninst = 0;
            else if (rsim_running(&s->m[i])) rsim_r_exited(s, i, 0);
        }
        s->o.evict_after_list[0] = 0;
    }
    if (s->o.remove_after_list[0]) {
        int i = rsim_find(s, s->o.remove_after_list);
        if (i >= 0) s->m[i].removed = true;
        s->o.remove_after_list[0] = 0;
    }
}

/* Proxied inference routes (router and server) and what they answer. 0 = not one. */
RSIM_FN int rsim_infer_out(const char *path, bool *chat) {
    static const char *const chat_paths[] = {"/v1/chat/completions", "/chat/completions", "/v1/messages"};
    static const char *const other[] = {"/detokenize", "/infill", "/apply-template", "/rerank",
                                        "/v1/rerank", "/reranking", "/props", "/embedding"};
    size_t k;
    *chat = true;
    for (k = 0; k < sizeof chat_paths / sizeof chat_paths[0]; k++)
        if (!strcmp(path, chat_paths[k])) return RSIM_O_CHAT;
    if (!strcmp(path, "/v1/completions") || !strcmp(path, "/completions")) return RSIM_O_OAI_COMPL;
    if (!strcmp(path, "/completion")) return RSIM_O_COMPLETION;
    *chat = false;
    if (!strcmp(path, "/tokenize")) return RSIM_O_TOKENIZE;
    if (!strcmp(path, "/v1/embeddings") || !strcmp(path, "/embeddings")) return RSIM_O_EMBED;
    for (k = 0; k < sizeof other / sizeof other[0]; k++)
        if (!strcmp(path, other[k])) return RSIM_O_RAW;
    return 0;
}

RSIM_FN bool rsim_body_stream(const rsim_ctx *c) {
    return rsim_t_bool(c, rsim_t_get(c, 0, "stream"), true);
}

/* ---- llama.cpp router (wire.md 1, W1-W20) ---- */
/* Later routers' transient refusals (--limit-loads for a load, --refuse-loads for a load
   or a proxied request right after an eviction): true when t got one. */
RSIM_FN bool rsim_later_refusal(rsim *s, rsim_ticket *t, bool load) {
    bool evicted = s->evicted;
    if (s->o.router_gen == RSIM_GEN_JULY) return false;
    if (load && s->o.limit_loads > 0) {
        s->o.limit_loads--;
        rsim_reply_set(t, RSIM_O_RAW, 500, "{\"message\":\"model limit reached, try again later\"}");
        return true;
    }
    s->evicted = false; /* this request comes after the eviction: the next one no longer "right after" */
    if (evicted && s->o.refuse_loads > 0) {
        s->o.refuse_loads--;
        rsim_reply_set(t, RSIM_O_PLAIN_JSON, 500, "proxy error: Could not establish connection");
        return true;
    }
    return false;
}

/* POST /models/load. At --models-max, July stops its LRU model at once (whatever it is
   doing, a stopping one included, so an unload just before does not free the place)
   and answers when that one has exited; later routers wait for a stopping model, else
   stop the LRU idle one, else wait until one goes idle. */
RSIM_FN void rsim_router_load(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    int i;
    if (!c->valid) { rsim_parse_error(c, t); return; }
    i = rsim_find(s, c->model);
    if (i < 0) { rsim_404(t); return; }
    rsim_log_model(s, t->log, s->m[i].id);
    if (rsim_running(&s->m[i])) { rsim_lerr(t, 400, "model is already running"); return; }
    if (s->m[i].state == RSIM_DOWNLOADING) { rsim_lerr(t, 400, "model is downloading"); return; } /* UNCONFIRMED */
    if (rsim_later_refusal(s, t, true)) return;
    t->r.model = i;
    if (rsim_r_has_room(s)) {
        rsim_r_start_load(s, i);
        s->cold_at = s->now + 1;
        rsim_reply_set(t, RSIM_O_RAW, 200, "{\"success\":true}");
        return;
    }
    if (!rsim_july(s) && s->cold_at == s->now + 1) { /* cold loads at once: this one lost the place (#28774) */
        rsim_reply_set(t, RSIM_O_RAW, 500, "{\"message\":\"model limit reached, try again later\"}");
        return;
    }
    if (rsim_july(s)) {
        t->victim = rsim_r_victim(s);
        if (t->victim >= 0) rsim_r_stop(s, t->victim);
    } else if (!rsim_any_stopping(s) && (i = rsim_r_victim(s)) >= 0) rsim_r_stop(s, i);
    t->op = RSIM_OP_R_LOAD;
}

RSIM_FN void rsim_router_unload(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    int i;
    if (!c->valid) { rsim_parse_error(c, t); return; }
    i = rsim_find(s, c->model);
    if (i < 0) { rsim_lerr(t, 400, "model is not found"); return; }
    rsim_log_model(s, t->log, s->m[i].id);
    if (s->m[i].state == RSIM_UNLOADED) { rsim_lerr(t, 400, "model is not running"); return; }
    if (s->m[i].state == RSIM_DOWNLOADING) {
        s->m[i].state = RSIM_UNLOADED;
        s->m[i].child_downloading = false;
    }
    else rsim_r_stop(s, i);
    rsim_reply_set(t, RSIM_O_RAW, 200, "{\"success\":true}");
}

/* A request the router proxies to model X's child (1.7). */
RSIM_FN void rsim_router_proxy(rsim *s, rsim_ctx *c, rsim_ticket *t, int out) {
    char msg[RSIM_MSG_MAX], a[16];
    bool autoload = !s->o.no_autoload;
    int i;
    rsim_model *m;
    if (c->post && !c->valid) { rsim_parse_error(c, t); return; }
    if (!c->has_model) { rsim_lerr(t, 400, "model name is missing from the request"); return; }
    i = rsim_find(s, c->model);
    if (i < 0) {
        snprintf(msg, sizeof msg, "model '%.200s' not found", c->model);
        rsim_lerr(t, 400, msg);
        return;
    }
    m = &s->m[i];
    rsim_log_model(s, t->log, m->id);
    if (c->post && rsim_later_refusal(s, t, false)) return;
    if (rsim_query(c, "autoload", a, sizeof a)) autoload = !strcmp(a, "true") || !strcmp(a, "1");
    t->r.model = i;
    t->r.out = out;
    t->r.stream = rsim_body_stream(c) && out != RSIM_O_RAW;
    if (t->r.stream && c->post) t->r.ping_ms = rsim_ping_ms(s, c);
    t->post = c->post;
    t->task = c->post || !strcmp(c->path, "/slots");
    if (out == RSIM_O_METRICS && !s->o.metrics) {
        rsim_lerr(t, 501, "This server does not support metrics endpoint. Start it with `--metrics`");
        return;
    }
    switch (m->state) {
    case RSIM_LOADED:
        t->op = RSIM_OP_WAIT; /* served by rsim_progress at once */
        break;
    case RSIM_SLEEPING:
        if (!t->task) { rsim_serve(s, t); break; } /* cached answer, no wake (1.8) */
        if (!m->waking) { m->waking = true; m->due_ms = s->now + s->o.wake_ms; }
        rsim_hold(s, t); /* proxied: in flight, not a victim */
        t->op = RSIM_OP_WAIT;
        break;
    case RSIM_LOADING:
        if (autoload) { t->op = RSIM_OP_WAIT; break; }
        if (s->o.proxy_error) rsim_reply_set(t, RSIM_O_PLAIN_JSON, 500, "proxy error: Could not establish connection");
        else rsim_lerr_mw(t, 503, "Loading model");
        break;
    default:
        if (!autoload) { rsim_lerr(t, 400, "model is not loaded"); break; }
        if (rsim_r_has_room(s) && m->state != RSIM_DOWNLOADING) rsim_r_start_load(s, i);
        else if (!m->queue_seq) m->queue_seq = ++s->queue_seq;
        t->op = RSIM_OP_WAIT;
        break;
    }
}

/* POST /slots/ID?action=save|restore {"filename": NAME}, as llama-server b10116: a name
   rsim_filename_ok refuses is 400 "Invalid filename", no name 500; the
   save is the slot's KV as text ("rsim-kv 1 N", then N lines "HASH TOKENS"), answered
   {"id_slot","filename","n_saved","n_written","timings":{"save_ms"}} (an empty slot
   saves 0 tokens); the restore of a missing file or one whose first line is not that is
   400 "Unable to restore slot, no available space in KV cache or invalid slot save
   file", and the slot is left empty (as the real one's); a file whose first line is
   whole but whose lines are cut short returns RSIM_SLOT_ABORT with nothing answered:
   the real server aborts on a file cut inside its data (GGML_ASSERT(nread <=
   state_size)), and the caller ends the child; else the slot holds that KV:
   {"id_slot","filename","n_restored","n_read",
   "timings":{"restore_ms"}}. The slot's KV is kv[0..*nkv): 1 when a restore replaced
   it (the caller then marks the slot used), 0 otherwise. */
enum { RSIM_SLOT_ABORT = -1 };

/* llama.cpp's fs_validate_filename (common.cpp, subdirectories not allowed) on a name
   rsim_t_str made valid UTF-8 (a NUL or a bad byte is '?' by then, refused below, as the
   real one refuses those): 1..255 bytes; no C0/C1 control, DEL, / \ : * ? " < > |, nor
   U+FF0E, U+2215, U+2216, U+FFFD, U+FEFF; no leading or trailing space, no trailing dot,
   no "..", not ".". A leading dot is allowed (".x.bin" saves on b10116). */
RSIM_FN bool rsim_filename_ok(const char *name) {
    const unsigned char *p = (const unsigned char *)name;
    size_t n = strlen(name);
    if (!n || n > 255 || name[0] == ' ' || name[n - 1] == ' ' || name[n - 1] == '.' || strstr(name, "..")) return false;
    while (*p) {
        unsigned c = *p, k = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3, j;
        if (k) c &= 0x3Fu >> k;
        for (j = 1; j <= k; j++) c = (c << 6) | (p[j] & 0x3F);
        if (c <= 0x1F || (c >= 0x7F && c <= 0x9F) || c == 0xFF0E || c == 0x2215 || c == 0x2216 || c == 0xFFFD ||
            c == 0xFEFF || (c < 0x80 && strchr("/\\:*?\"<>|", (int)c) != NULL))
            return false;
        p += k + 1;
    }
    return true;
}

/* The request's file name into name (cap RSIM_NAME_MAX), or false with the answer set. */
RSIM_FN bool rsim_slot_name(rsim_ctx *c, rsim_ticket *t, char *name) {
    if (!rsim_t_str(c, rsim_t_get(c, 0, "filename"), name, RSIM_NAME_MAX)) {
        rsim_lerr(t, 500, "[json.exception.out_of_range.403] key 'filename' not found");
        return false;
    }
    if (!rsim_filename_ok(name)) { rsim_lerr(t, 400, "Invalid filename"); return false; }
    return true;
}

/* Slot k's KV kv[0..nkv) saved as file `name` (the adapter writes it with ticket t's
   answer), and that answer. */
RSIM_FN void rsim_slot_save(rsim *s, rsim_ticket *t, int k, const char *name, const rsim_chunk *kv, int nkv) {
    char msg[RSIM_MSG_MAX];
    uint32_t n = 0;
    int i;
    size_t o = (size_t)snprintf(s->file_data, sizeof s->file_data, "rsim-kv 1 %d\n", nkv);
    for (i = 0; i < nkv && o < sizeof s->file_data; i++) {
        o += (size_t)snprintf(s->file_data + o, sizeof s->file_data - o, "%016llx %u\n",
                              (unsigned long long)kv[i].h, (unsigned)kv[i].n);
        n += kv[i].n;
    }
    s->file_len = o < sizeof s->file_data ? o : sizeof s->file_data - 1;
    rsim_cpy(s->file_name, sizeof s->file_name, name, strlen(name));
    s->file_write = true;
    s->file_ticket = t->id;
    snprintf(msg, sizeof msg, "{\"id_slot\":%d,\"filename\":\"%s\",\"n_saved\":%u,\"n_written\":%u,"
             "\"timings\":{\"save_ms\":0.2}}", k, name, (unsigned)n, (unsigned)s->file_len);
    rsim_reply_set(t, RSIM_O_RAW, 200, msg);
}

/* The restore's file (as the adapter read it with the request) as KV in[0..*got) of
   *ntok tokens: 1, or 0 when it is not a save (missing, or its first line is not one),
   or RSIM_SLOT_ABORT when its first line is whole and its lines are cut short. */
RSIM_FN int rsim_slot_parse(const rsim_req *q, rsim_chunk *in, int *got, uint32_t *ntok) {
    const char *d = q->file_data, *e = d ? d + q->file_len : NULL;
    int want = -1;
    *got = 0;
    *ntok = 0;
    if (!q->file_found || !d || sscanf(d, "rsim-kv 1 %d", &want) != 1 || want < 0 || want > RSIM_KV_MAX ||
        !memchr(d, '\n', q->file_len))
        return 0;
    d = (const char *)memchr(d, '\n', q->file_len) + 1;
    while (*got < want && d < e) {
        const char *nl = (const char *)memchr(d, '\n', (size_t)(e - d));
        unsigned long long h;
        unsigned tn;
        char line[64];
        if (!nl || (size_t)(nl - d) >= sizeof line) break;
        memcpy(line, d, (size_t)(nl - d));
        line[nl - d] = 0;
        if (sscanf(line, "%llx %u", &h, &tn) != 2) break;
        in[*got].h = (uint64_t)h;
        in[(*got)++].n = tn;
        *ntok += tn;
        d = nl + 1;
    }
    return *got < want ? RSIM_SLOT_ABORT : 1;
}

/* The answer to a restore: n tokens from a file of len bytes, or (n_ok false) the real
   one's 400, the slot left empty. */
RSIM_FN void rsim_slot_restored(rsim_ticket *t, int k, const char *name, bool n_ok, uint32_t n, size_t len) {
    char msg[RSIM_MSG_MAX];
    if (!n_ok) {
        rsim_lerr(t, 400, "Unable to restore slot, no available space in KV cache or invalid slot save file");
        return;
    }
    snprintf(msg, sizeof msg, "{\"id_slot\":%d,\"filename\":\"%s\",\"n_restored\":%u,\"n_read\":%u,"
             "\"timings\":{\"restore_ms\":0.1}}", k, name, (unsigned)n, (unsigned)len);
    rsim_reply_set(t, RSIM_O_RAW, 200, msg);
}

RSIM_FN int rsim_slot_file(rsim *s, rsim_ctx *c, rsim_ticket *t, int k, bool save, rsim_chunk *kv, int *nkv) {
    char name[RSIM_NAME_MAX];
    rsim_chunk in[RSIM_KV_MAX];
    uint32_t n;
    int got, r;
    if (!rsim_slot_name(c, t, name)) return 0;
    if (save) {
        rsim_slot_save(s, t, k, name, kv, *nkv);
        return 0;
    }
    r = rsim_slot_parse(c->q, in, &got, &n);
    *nkv = r == 1 ? got : 0; /* a restore that fails leaves the slot empty, as the real one */
    if (r == RSIM_SLOT_ABORT) return r; /* the real server aborts (GGML_ASSERT(nread <= state_size)); the caller ends the child */
    if (*nkv) memcpy(kv, in, (size_t)*nkv * sizeof in[0]);
    rsim_slot_restored(t, k, name, r == 1, n, c->q->file_len);
    return r;
}

/* Router POST /slots/ID?action=save|restore {"model": M, "filename": NAME}: the router
   loads M when it is not (autoload, as for any POST it proxies; 400 "model is not loaded"
   with ?autoload=false), then M's child answers as the server mode does (rsim_slot_file;
   its KV is one chunk: the model's hash, the tokens its slot holds). The child's checks
   are made now on the request (its file too, read by the adapter with it) and told when
   the child answers (rsim_router_slot_do). */
RSIM_FN void rsim_router_slot_file(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    char a[32], *end = NULL;
    const char *id = c->path + 7;
    long k = strtol(id, &end, 10);
    t->r.slot_act = RSIM_SA_ERR;
    if (!s->o.slot_save)
        rsim_lerr(t, 501, "This server does not support slots action. Start it with `--slot-save-path`");
    else if (!rsim_query(c, "action", a, sizeof a) || (strcmp(a, "save") && strcmp(a, "restore")))
        rsim_lerr(t, 400, "Invalid action");
    else if (!*id || !end || *end || k < 0 || k >= 4)
        rsim_lerr(t, 400, "Invalid slot ID");
    else if (c->valid && rsim_slot_name(c, t, t->r.aux)) {
        t->r.want_slot = (int)k;
        t->r.slot_act = strcmp(a, "save") ? RSIM_SA_RESTORE : RSIM_SA_SAVE;
        if (t->r.slot_act == RSIM_SA_RESTORE) {
            rsim_chunk in[RSIM_KV_MAX];
            int got;
            uint32_t n;
            t->r.slot_res = rsim_slot_parse(c->q, in, &got, &n);
            t->r.slot_len = (uint32_t)c->q->file_len;
            t->r.n = n;
        }
    }
    rsim_router_proxy(s, c, t, RSIM_O_RAW);
}

/* The child of a router answers a slot request (rsim_router_slot_file) now. */
RSIM_FN void rsim_router_slot_do(rsim *s, rsim_ticket *t) {
    rsim_model *m = &s->m[t->r.model];
    int k = t->r.want_slot;
    if (t->r.slot_act == RSIM_SA_ERR) { /* its own check failed: that answer (status, msg), now */
        t->r.out = RSIM_O_LERR;
        t->op = RSIM_OP_DONE;
    } else if (t->r.slot_act == RSIM_SA_SAVE) {
        rsim_chunk kv[1];
        kv[0] = rsim_chunk_of("", 0, m->id, strlen(m->id));
        kv[0].n = m->slot_kv[k];
        rsim_slot_save(s, t, k, t->r.aux, kv, m->slot_kv[k] ? 1 : 0);
    } else if (t->r.slot_res == RSIM_SLOT_ABORT) {
        /* its child aborted: the real router answers this and shows it unloaded, failed */
        rsim_r_exited(s, t->r.model, 134);
        rsim_reply_set(t, RSIM_O_PLAIN_JSON, 500, "proxy error: Failed to read connection");
    } else {
        m->slot_kv[k] = t->r.slot_res == 1 ? (uint32_t)t->r.n : 0; /* a failed restore empties it too */
        rsim_slot_restored(t, k, t->r.aux, t->r.slot_res == 1, (uint32_t)t->r.n, t->r.slot_len);
    }
    t->r.slot_act = RSIM_SA_NONE;
}

RSIM_FN void rsim_router_req(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    int out;
    bool chat;
    char v[16];
    if (c->get && (!strcmp(c->path, "/health") || !strcmp(c->path, "/v1/health"))) {
        rsim_reply_set(t, RSIM_O_RAW, 200, "{\"status\":\"ok\"}");
        return;
    }
    if (!rsim_auth_ok(s, c->q, true)) { rsim_lerr_mw(t, 401, "Invalid API Key"); return; }
    if (c->get && !strcmp(c->path, "/props") && !c->has_model) { rsim_reply_set(t, RSIM_O_R_PROPS, 200, NULL); return; }
    if (c->get && (!strcmp(c->path, "/models") || !strcmp(c->path, "/v1/models"))) {
        if (rsim_query(c, "reload", v, sizeof v) && (!strcmp(v, "1") || !strcmp(v, "true"))) {
            int i;
            for (i = 0; i < s->nmodels; i++)
                if (!rsim_running(&s->m[i])) s->m[i].failed = false;
            rsim_ev(s, -1, RSIM_EV_RELOAD, 0, -1, 0, false);
        }
        rsim_reply_set(t, RSIM_O_R_MODELS, 200, NULL);
        return;
    }
    if (rsim_route(c, "GET", "/models/sse")) { t->op = RSIM_OP_SSE; t->cursor = s->ev_seq; return; }
    if (rsim_route(c, "POST", "/models/load")) { rsim_router_load(s, c, t); return; }
    if (rsim_route(c, "POST", "/models/unload")) { rsim_router_unload(s, c, t); return; }
    if (c->get && (!strcmp(c->path, "/props") || !strcmp(c->path, "/slots") || !strcmp(c->path, "/metrics") ||
                   !strcmp(c->path, "/lora-adapters"))) {
        out = !strcmp(c->path, "/props") ? RSIM_O_C_PROPS : !strcmp(c->path, "/slots") ? RSIM_O_C_SLOTS
            : !strcmp(c->path, "/metrics") ? RSIM_O_METRICS : RSIM_O_RAW;
        if (out == RSIM_O_RAW) rsim_cpy(t->r.msg, sizeof t->r.msg, "[]", 2);
        rsim_router_proxy(s, c, t, out);
        return;
    }
    if (c->post && !strncmp(c->path, "/slots/", 7)) { rsim_router_slot_file(s, c, t); return; }
    if (c->post && (out = rsim_infer_out(c->path, &chat)) != 0) {
        if (out == RSIM_O_RAW) rsim_cpy(t->r.msg, sizeof t->r.msg, "{}", 2);
        t->chat = chat;
        rsim_router_proxy(s, c, t, out);
        return;
    }
    rsim_404(t);
}

/* ---- single-model llama-server (wire.md 2, W21-W28) ---- */
/* The body's prompt as KV chunks (messages[], or "prompt") and its id_slot. */
RSIM_FN void rsim_server_prompt(rsim *s, const rsim_ctx *c, rsim_reply *r) {
    int msgs = rsim_t_get(c, 0, "messages"), p = rsim_t_get(c, 0, "prompt"), e;
    double d;
    if (rsim_t_num(c, rsim_t_get(c, 0, "id_slot"), &d) && d >= 0 && d < s->o.parallel && d < RSIM_MAX_SLOTS)
        r->want_slot = (int)d; /* out of range: ignored, as llama.cpp does */
    r->nprompt = 0;
    if (msgs >= 0 && rsd_json_type_of(&c->doc, msgs) == RSD_JSON_ARRAY) {
        for (e = rsd_json_child(&c->doc, msgs); e >= 0 && r->nprompt < RSIM_PROMPT_MAX; e = rsd_json_next(&c->doc, e)) {
            rsd_str role = rsd_json_view(&c->doc, rsim_t_get(c, e, "role"));
            rsd_str text = rsd_json_view(&c->doc, rsim_t_get(c, e, "content"));
            r->prompt[r->nprompt++] = rsim_chunk_of(role.ptr ? role.ptr : "", role.len, text.ptr ? text.ptr : "", text.len);
        }
    } else if (p >= 0) {
        rsd_str text = rsd_json_view(&c->doc, p);
        r->prompt[r->nprompt++] = rsim_chunk_of("", 0, text.ptr ? text.ptr : "", text.len);
    }
}

/* POST /slots/ID?action=erase|save|restore (needs --slot-save-path, as llama.cpp: 501
   without). */
RSIM_FN void rsim_server_slot_action(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    char a[32], *end = NULL, msg[96];
    const char *id = c->path + 7;
    long k;
    if (!s->o.slot_save) {
        rsim_lerr(t, 501, "This server does not support slots action. Start it with `--slot-save-path`");
        return;
    }
    if (!rsim_query(c, "action", a, sizeof a) || (strcmp(a, "erase") && strcmp(a, "save") && strcmp(a, "restore"))) {
        rsim_lerr(t, 400, "Invalid action");
        return;
    }
    k = strtol(id, &end, 10);
    if (!*id || !end || *end) { rsim_lerr(t, 400, "Invalid slot ID"); return; }
    if (strcmp(a, "erase")) {
        int r;
        if (k < 0 || k >= s->o.parallel || k >= RSIM_MAX_SLOTS) { rsim_lerr(t, 400, "Invalid slot ID"); return; }
        r = rsim_slot_file(s, c, t, (int)k, !strcmp(a, "save"), s->slots[k].kv, &s->slots[k].nkv);
        if (r == RSIM_SLOT_ABORT) { /* the server aborts: no answer, the process ends (rsim_exit_code 134) */
            t->op = RSIM_OP_HANG;
            s->exit_code = 134;
        } else if (r > 0) {
            s->slots[k].used = true;
            s->slots[k].id_task = ++s->task_seq;
        }
        return;
    }
    if (k < 0 || k >= s->o.parallel || k >= RSIM_MAX_SLOTS) { /* llama.cpp: nothing to erase */
        snprintf(msg, sizeof msg, "{\"id_slot\":%ld,\"n_erased\":0}", k);
        rsim_reply_set(t, RSIM_O_RAW, 200, msg);
        return;
    }
    t->r.erase = true; /* waits for the slot to be idle (rsim_progress) */
    t->r.want_slot = (int)k;
    t->task = true;
    t->op = RSIM_OP_WAIT;
}

RSIM_FN void rsim_server_req(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    rsim_model *m = &s->m[0];
    int out;
    bool chat;
    char v[16];
    t->r.model = 0;
    if (m->state == RSIM_LOADING || m->state == RSIM_UNLOADED) { rsim_lerr_mw(t, 503, "Loading model"); return; }
    if (c->get && (!strcmp(c->path, "/health") || !strcmp(c->path, "/v1/health"))) {
        rsim_reply_set(t, RSIM_O_RAW, 200, "{\"status\":\"ok\"}");
        return;
    }
    if (!rsim_auth_ok(s, c->q, true)) { rsim_lerr_mw(t, 401, "Invalid API Key"); return; }
    if (c->get && (!strcmp(c->path, "/v1/models") || !strcmp(c->path, "/models"))) { rsim_reply_set(t, RSIM_O_C_MODELS, 200, NULL); return; }
    if (rsim_route(c, "GET", "/props")) { rsim_reply_set(t, RSIM_O_C_PROPS, 200, NULL); return; }
    if (rsim_route(c, "GET", "/metrics")) {
        if (!s->o.metrics) rsim_lerr(t, 501, "This server does not support metrics endpoint. Start it with `--metrics`");
        else rsim_reply_set(t, RSIM_O_METRICS, 200, NULL);
        return;
    }
    if (rsim_route(c, "GET", "/slots")) {
        if (s->o.no_slots) { rsim_lerr(t, 501, "This server does not support slots endpoint. Start it with `--slots`"); return; }
        if (rsim_query(c, "fail_on_no_slot", v, sizeof v) && strcmp(v, "0") && rsim_free_slot(s) < 0) {
            rsim_lerr(t, 503, "no slot available");
            return;
        }
        t->r.out = RSIM_O_C_SLOTS;
        t->task = true;
    } else if (c->post && !strncmp(c->path, "/slots/", 7)) {
        rsim_server_slot_action(s, c, t);
        return;
    } else if (c->post && (out = rsim_infer_out(c->path, &chat)) != 0 && strcmp(c->path, "/props")) {
        if (!c->valid) { rsim_parse_error(c, t); return; }
        rsim_server_prompt(s, c, &t->r);
        if (out == RSIM_O_RAW) rsim_cpy(t->r.msg, sizeof t->r.msg, "{}", 2);
        t->r.out = out;
        t->chat = chat;
        t->task = true;
        t->r.stream = rsim_body_stream(c) && out != RSIM_O_RAW;
        if (t->r.stream) t->r.ping_ms = rsim_ping_ms(s, c);
    } else { rsim_404(t); return; }
    if (m->state == RSIM_SLEEPING && !m->waking) { m->waking = true; m->due_ms = s->now + s->o.wake_ms; }
    t->op = RSIM_OP_WAIT;
}

/* ---- Ollama (wire.md 3, W30-W37) ---- */
/* The prompt, messages or input (token i, as sent): its hash and token count (4 + bytes/4,
   as the server mode's chunks), for prompt_eval_count, context and embeddings. */
RSIM_FN void rsim_o_hash_input(rsim_ticket *t, const rsim_ctx *c, int i) {
    rsd_str v = i >= 0 ? rsd_json_view(&c->doc, i) : rsd_str_c("");
    rsim_chunk ch = rsim_chunk_of("", 0, v.ptr ? v.ptr : "", v.len);
    t->r.in_hash = ch.h;
    t->r.prompt_n = ch.n;
}

RSIM_FN void rsim_ollama_req(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    char msg[RSIM_MSG_MAX];
    int i, v, waiting = 0;
    double d;
    bool is_chat, load_only;
    int embed;
    rsim_model *m;
    t->r.t0_ms = s->now;
    if ((rsim_route(c, "GET", "/") || rsim_route(c, "HEAD", "/"))) { rsim_reply_set(t, RSIM_O_TEXT, 200, "Ollama is running"); return; }
    if (rsim_route(c, "GET", "/api/version")) {
        snprintf(msg, sizeof msg, "{\"version\":\"%s\"}", s->o.version);
        rsim_reply_set(t, RSIM_O_RAW, 200, msg);
        return;
    }
    if (rsim_route(c, "GET", "/api/tags")) { rsim_reply_set(t, RSIM_O_O_TAGS, 200, NULL); return; }
    if (rsim_route(c, "GET", "/api/ps")) { rsim_reply_set(t, RSIM_O_O_PS, 200, NULL); return; }
    is_chat = rsim_route(c, "POST", "/api/chat");
    embed = rsim_route(c, "POST", "/api/embed") ? 2 : rsim_route(c, "POST", "/api/embeddings") ? 3 : 0;
    if (!is_chat && !embed && !rsim_route(c, "POST", "/api/generate") && !rsim_route(c, "POST", "/api/show")) {
        rsim_reply_set(t, RSIM_O_TEXT, 404, "404 page not found");
        return;
    }
    if (!c->has_body) { rsim_reply_set(t, RSIM_O_FLAT, 400, "missing request body"); return; }
    if (!c->valid) {
        size_t k = c->doc.err.offset;
        if (c->doc.err.code != RSD_ERR_TRUNCATED && k < c->doc.len)
            snprintf(msg, sizeof msg, "invalid character '%c' looking for beginning of value", c->doc.src[k]);
        else snprintf(msg, sizeof msg, "unexpected EOF");
        rsim_reply_set(t, RSIM_O_FLAT, 400, msg);
        return;
    }
    if (!c->model[0]) { rsim_reply_set(t, RSIM_O_FLAT, 400, "model is required"); return; }
    i = rsim_find(s, c->model);
    if (i < 0) { /* /api/embeddings: its scheduler's words (handleScheduleError) */
        if (embed == 3) snprintf(msg, sizeof msg, "model \"%.200s\" not found, try pulling it first", c->model);
        else snprintf(msg, sizeof msg, "model '%.200s' not found", c->model);
        rsim_reply_set(t, RSIM_O_FLAT, 404, msg);
        return;
    }
    m = &s->m[i];
    t->r.model = i;
    if (rsim_route(c, "POST", "/api/show")) { rsim_reply_set(t, RSIM_O_O_SHOW, 200, NULL); return; }
    rsim_cpy(t->r.aux, sizeof t->r.aux, c->model, strlen(c->model));
    t->r.sub = embed ? embed : is_chat ? 1 : 0;
    t->r.out = RSIM_O_O_GEN;
    if ((v = rsim_t_get(c, 0, "keep_alive")) >= 0) {
        int64_t ms = 0;
        char b[64];
        if (rsim_t_num(c, v, &d)) ms = d < 0 ? -1 : d > 9e15 ? (int64_t)9e18 : (int64_t)(d * 1000.0);
        else if (rsd_json_type_of(&c->doc, v) == RSD_JSON_STRING) {
            if (!rsim_t_str(c, v, b, sizeof b) || !rsim_parse_duration(b, strlen(b), false, &ms)) {
                snprintf(msg, sizeof msg, "time: invalid duration \"%.60s\"", b);
                rsim_reply_set(t, RSIM_O_FLAT, 400, msg);
                return;
            }
        } else if (rsd_json_type_of(&c->doc, v) != RSD_JSON_NULL) {
            rsim_reply_set(t, RSIM_O_FLAT, 400, "json: cannot unmarshal keep_alive: unsupported type");
            return;
        } else ms = -2;
        t->r.keep = ms;
    }
    if (rsim_t_num(c, rsim_t_get(c, rsim_t_get(c, 0, "options"), "num_ctx"), &d) && d > 0 && d < 1e9)
        t->r.ctx = (uint32_t)d;
    if (embed == 2) { /* input: a string or an array of strings (EmbedHandler) */
        int in = rsim_t_get(c, 0, "input"), k;
        rsd_json_type ty = rsd_json_type_of(&c->doc, in);
        if (ty == RSD_JSON_ARRAY) {
            for (k = rsd_json_child(&c->doc, in); k >= 0; k = rsd_json_next(&c->doc, k)) {
                if (rsd_json_type_of(&c->doc, k) != RSD_JSON_STRING) break;
                t->r.ninput++;
            }
            if (k >= 0) { rsim_reply_set(t, RSIM_O_FLAT, 400, "invalid input type"); return; }
        } else if (ty == RSD_JSON_STRING) {
            t->r.ninput = rsd_json_view(&c->doc, in).len > 0 ? 1 : 0;
        } else if (in >= 0 && ty != RSD_JSON_NULL) {
            rsim_reply_set(t, RSIM_O_FLAT, 400, "invalid input type");
            return;
        }
        load_only = t->r.ninput == 0;
        rsim_o_hash_input(t, c, in);
    } else if (embed == 3) {
        int pr = rsim_t_get(c, 0, "prompt");
        if (pr >= 0 && rsd_json_type_of(&c->doc, pr) != RSD_JSON_STRING && rsd_json_type_of(&c->doc, pr) != RSD_JSON_NULL) {
            rsim_reply_set(t, RSIM_O_FLAT, 400,
                           "json: cannot unmarshal number into Go struct field EmbeddingRequest.prompt of type string");
            return;
        }
        load_only = pr < 0 || rsd_json_view(&c->doc, pr).len == 0;
        rsim_o_hash_input(t, c, pr);
    } else if (is_chat) {
        load_only = rsd_json_size(&c->doc, rsim_t_get(c, 0, "messages")) == 0;
        rsim_o_hash_input(t, c, rsim_t_get(c, 0, "messages"));
    } else {
        load_only = rsd_json_size(&c->doc, rsim_t_get(c, 0, "prompt")) == 0 &&
                    rsd_json_view(&c->doc, rsim_t_get(c, 0, "prompt")).len == 0;
        rsim_o_hash_input(t, c, rsim_t_get(c, 0, "prompt"));
    }
    t->r.flag = load_only;
    t->r.stream = !embed && !rsim_t_bool(c, rsim_t_get(c, 0, "stream"), false) && !load_only;
    if (load_only && t->r.keep == 0) { /* unload: answer now, unload when idle (linger) */
        if (m->state == RSIM_LOADED || m->state == RSIM_LOADING) {
            m->forever = false;
            m->keep_ms = 0;
            m->stopping = true;
            if (m->inflight == 0) m->expires_ms = s->now;
        }
        m->queue_seq = 0;
        t->r.n = 1;
        rsim_reply_set(t, RSIM_O_O_GEN, 200, NULL);
        return;
    }
    for (i = 0; i < RSIM_MAX_TICKETS; i++) waiting += s->t[i].op == RSIM_OP_WAIT ? 1 : 0;
    if (waiting >= s->o.queue_max) {
        rsim_reply_set(t, RSIM_O_FLAT, 503, "server busy, please try again.  maximum pending requests exceeded");
        return;
    }
    t->task = true;
    t->chat = !load_only;
    t->r.n = load_only ? 0 : 2;
    if (m->state == RSIM_UNLOADED && !m->queue_seq) {
        m->num_ctx = t->r.ctx ? t->r.ctx : m->ctx;
        m->queue_seq = ++s->queue_seq;
        rsim_o_apply_keep(s, m, t->r.keep);
    }
    t->op = RSIM_OP_WAIT;
}

/* ---- LM Studio (wire.md 4, W38-W47) ---- */
RSIM_FN void rsim_lms_unknown(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    char msg[RSIM_MSG_MAX];
    snprintf(msg, sizeof msg, "Unexpected endpoint or method. (%s %.200s)", c->method, c->path);
    rsim_reply_set(t, RSIM_O_FLAT, s->o.unknown_404 ? 404 : 200, msg);
}

/* Local model owning instance id or key `name`; *inst = instance index or -1. */
RSIM_FN int rsim_l_resolve(const rsim *s, const char *name, int *inst) {
    int i, k;
    *inst = -1;
    for (i = 0; i < s->nmodels; i++) {
        if (s->m[i].host[0] || s->m[i].removed) continue;
        for (k = 0; k < s->m[i].ninst; k++)
            if (!strcmp(s->m[i].inst[k].id, name)) { *inst = k; return i; }
    }
    return rsim_find(s, name);
}

RSIM_FN void rsim_lms_req(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    char msg[RSIM_MSG_MAX], id[RSIM_NAME_MAX];
    double d;
    int i, k, out = 0;
    bool v1 = !s->o.lms_v03;
    rsim_model *m;
    if (rsim_route(c, "GET", "/lmstudio-greeting")) {
        rsim_reply_set(t, RSIM_O_RAW, 200, s->o.no_greeting ? "{\"service\":\"not-lmstudio\"}" : "{\"lmstudio\":true}");
        return;
    }
    if (!rsim_auth_ok(s, c->q, false)) { rsim_lms_err(t, 401, "invalid_request", "Invalid or missing API token"); return; }
    if (v1 && rsim_route(c, "GET", "/api/v1/models")) { rsim_reply_set(t, RSIM_O_L_MODELS, 200, NULL); return; }
    if (rsim_route(c, "GET", "/api/v0/models")) { rsim_reply_set(t, RSIM_O_L_V0, 200, NULL); return; }
    if (c->get && rsim_prefix(c->path, "/api/v0/models/")) {
        i = rsim_find(s, c->path + 15);
        if (i < 0) {
            snprintf(msg, sizeof msg, "Model '%.200s' not found", c->path + 15);
            rsim_lms_err(t, 404, "model_not_found", msg);
        } else { t->r.model = i; rsim_reply_set(t, RSIM_O_L_V0, 200, NULL); }
        return;
    }
    if (rsim_route(c, "GET", "/v1/models")) { rsim_reply_set(t, RSIM_O_L_OAI_MODELS, 200, NULL); return; }
    if (v1 && rsim_route(c, "POST", "/api/v1/models/load")) {
        if (!c->valid) { rsim_lms_err(t, 400, "invalid_request", "Invalid JSON in request body"); return; }
        if (!c->model[0]) { rsim_lms_err(t, 400, "invalid_request", "\"model\" is required"); return; }
        i = rsim_find(s, c->model);
        if (i < 0) {
            snprintf(msg, sizeof msg, "Model '%.200s' not found", c->model);
            rsim_lms_err(t, 404, "model_not_found", msg);
            return;
        }
        m = &s->m[i];
        t->r.model = i;
        if (s->o.fail_loads > 0) {
            s->o.fail_loads--;
            if (s->o.fail_load_status == 507) rsim_lms_err(t, 507, "internal_error", "insufficient VRAM");
            else rsim_lms_err(t, s->o.fail_load_status, "internal_error", "Failed to load model");
            return;
        }
        if (m->broken) { rsim_lms_err(t, 500, "internal_error", "Failed to load model"); return; }
        if (s->o.vram_budget && rsim_l_vram_used(s) + m->size_bytes > s->o.vram_budget) {
            rsim_lms_err(t, 507, "internal_error", "insufficient VRAM");
            return;
        }
        t->r.flag = rsim_t_bool(c, rsim_t_get(c, 0, "echo_load_config"), true);
        if (rsim_b_num(c, "context_length", &d) && d > 0 && d < 1e9) t->r.ctx = (uint32_t)d;
        if (s->o.idempotent && m->ninst > 0) {
            rsim_reply_set(t, RSIM_O_L_LOAD, 200, NULL);
            rsim_cpy(t->r.aux, sizeof t->r.aux, m->inst[0].id, strlen(m->inst[0].id));
            return;
        }
        m->loads_pending++;
        t->r.n = rsim_load_ms(s, m);
        t->op = RSIM_OP_L_LOAD;
        t->at_ms = s->now + t->r.n;
        return;
    }
    if (v1 && rsim_route(c, "POST", "/api/v1/models/unload")) {
        if (!c->valid) { rsim_lms_err(t, 400, "invalid_request", "Invalid JSON in request body"); return; }
        if (!rsim_b_str(c, "instance_id", id, sizeof id) || !id[0]) {
            rsim_lms_err(t, 400, "invalid_request", "\"instance_id\" is required");
            return;
        }
        rsim_log_model(s, t->log, id);
        i = rsim_l_resolve(s, id, &k);
        if (i < 0 || k < 0) {
            snprintf(msg, sizeof msg, "Model instance '%.200s' not found", id);
            rsim_lms_err(t, 404, "model_not_found", msg);
            return;
        }
        rsim_l_del_inst(&s->m[i], k);
        {
            rsim_w w;
            rsd_json_w_init(&w, t->r.msg, sizeof t->r.msg);
            rsim_w_obj(&w);
            rsim_w_kstr(&w, "instance_id", id);
            rsim_w_obj_end(&w);
            t->op = RSIM_OP_DONE;
            t->r.out = RSIM_O_RAW;
            t->r.status = 200;
            if (rsd_json_w_finish(&w) < 0) rsim_lms_err(t, 500, "internal_error", "instance id not renderable");
        }
        return;
    }
    if (c->post) {
        if (!strcmp(c->path, "/v1/chat/completions") || !strcmp(c->path, "/api/v0/chat/completions")) out = RSIM_O_CHAT;
        else if (!strcmp(c->path, "/v1/completions") || !strcmp(c->path, "/api/v0/completions")) out = RSIM_O_OAI_COMPL;
        else if (!strcmp(c->path, "/v1/embeddings") || !strcmp(c->path, "/api/v0/embeddings")) out = RSIM_O_EMBED;
        else if (v1 && !strcmp(c->path, "/api/v1/chat")) out = RSIM_O_L_CHAT;
    }
    if (!out) { rsim_lms_unknown(s, c, t); return; }
    if (!c->valid) { rsim_lms_err(t, 400, "invalid_request", "Invalid JSON in request body"); return; }
    if (!c->model[0]) { rsim_lms_err(t, 400, "invalid_request", "\"model\" is required"); return; }
    i = rsim_l_resolve(s, c->model, &k);
    if (i < 0) {
        snprintf(msg, sizeof msg, "Model '%.200s' not found", c->model);
        rsim_lms_err(t, 404, "model_not_found", msg);
        return;
    }
    m = &s->m[i];
    t->r.model = i;
    t->r.out = out;
    t->r.stream = out != RSIM_O_L_CHAT && out != RSIM_O_EMBED && rsim_body_stream(c);
    t->task = t->chat = true;
    if (k >= 0) rsim_cpy(t->r.aux, sizeof t->r.aux, m->inst[k].id, strlen(m->inst[k].id));
    if (m->ninst == 0 && (!m->jit_loading || s->o.jit_race)) {
        int j, x;
        if (s->o.no_jit) {
            snprintf(msg, sizeof msg, "Model '%.200s' is not loaded", c->model);
            rsim_lms_err(t, 404, "model_not_found", msg);
            return;
        }
        if (!s->o.no_auto_evict) /* only the last JIT model stays */
            for (j = 0; j < s->nmodels; j++)
                for (x = 0; !s->m[j].host[0] && x < s->m[j].ninst; x++)
                    if (s->m[j].inst[x].jit && s->m[j].inst[x].inflight == 0 && j != i) rsim_l_del_inst(&s->m[j], x--);
        m->jit_ttl_ms = (uint64_t)s->o.jit_ttl_s * 1000;
        if (rsim_b_num(c, "ttl", &d) && d >= 0 && d < 1e12) m->jit_ttl_ms = (uint64_t)(d * 1000.0);
        if (!m->jit_loading) m->due_ms = s->now + rsim_load_ms(s, m);
        m->jit_loading++;
    }
    t->op = RSIM_OP_WAIT;
}

/* ---- control routes under /_sim/ ---- */
RSIM_FN void rsim_control(rsim *s, rsim_ctx *c, rsim_ticket *t) {
    double d;
    int n = 0, r = -1;
    if (rsim_route(c, "GET", "/_sim/log")) { rsim_reply_set(t, RSIM_O_SIM_LOG, 200, NULL); return; }
    if (!c->post || !c->valid) { rsim_reply_set(t, RSIM_O_FLAT, 400, "bad control request"); return; }
    if (rsim_b_num(c, "count", &d) && d > -1e6 && d < 1e6) n = (int)d;
    if (!strcmp(c->path, "/_sim/fail-loads")) { s->o.fail_loads += n ? n : 1; r = 0; }
    else if (!strcmp(c->path, "/_sim/limit-loads")) { s->o.limit_loads += n ? n : 1; r = 0; }
    else if (!strcmp(c->path, "/_sim/refuse-loads")) { s->o.refuse_loads += n ? n : 1; r = 0; }
    else if (!strcmp(c->path, "/_sim/crash")) {
        int code = 1;
        if (rsim_b_num(c, "exit_code", &d) && d > -1e6 && d < 1e6) code = (int)d;
        r = rsim_crash(s, c->model, code, s->now);
    } else if (!strcmp(c->path, "/_sim/evict")) r = rsim_evict(s, c->model, s->now);
    else if (!strcmp(c->path, "/_sim/remove")) r = rsim_remove(s, c->model, s->now);
    else if (!strcmp(c->path, "/_sim/busy")) r = rsim_busy(s, c->model, n ? n : 1, s->now);
    if (r < 0) rsim_reply_set(t, RSIM_O_FLAT, 404, "no such control or model");
    else rsim_reply_set(t, RSIM_O_RAW, 200, "{\"ok\":true}");
}

/* Is fault f's PATH this request's? "PATH" is the path; "PATH?Q" also wants a query that
   begins with Q ("/slots/0?action=restore"). */
RSIM_FN bool rsim_fault_on(const rsim_fault *f, const rsim_ctx *c) {
    const char *q = strchr(f->path, '?');
    size_t pl = q ? (size_t)(q - f->path) : strlen(f->path);
    if (strlen(c->path) != pl || strncmp(f->path, c->path, pl)) return false;
    return !q || !strncmp(c->query, q + 1, strlen(q + 1));
}

/* Handles one request at now_ms (see the top comment). Returns resp->action, or -1 when
   the answer did not fit resp->body (resp then holds a short 500). */
RSIM_FN int rsim_handle(rsim *s, const rsim_req *q, uint64_t now_ms, rsim_resp *resp) {
    rsim_ctx c;
    rsim_ticket *t;
    size_t ml = rsim_len(q->method, q->method_len), tl = rsim_len(q->target, q->target_len), pl;
    const char *qm;
    bool control;
    int f, delay;
    rsim_tick(s, now_ms);
    rsim_resp_reset(s, resp);
    memset(&c, 0, sizeof c);
    c.q = q;
    rsim_cpy(c.method, sizeof c.method, q->method, ml);
    qm = q->target ? (const char *)memchr(q->target, '?', tl) : NULL;
    pl = qm ? (size_t)(qm - q->target) : tl;
    rsim_cpy(c.path, sizeof c.path, q->target, pl);
    if (qm) rsim_cpy(c.query, sizeof c.query, qm + 1, tl - pl - 1);
    c.post = !strcmp(c.method, "POST");
    c.get = !strcmp(c.method, "GET") || !strcmp(c.method, "HEAD");
    {
        const char *b = q->body ? q->body : "";
        size_t bl = q->body ? q->body_len : 0, k;
        int n;
        for (k = 0; k < bl && (b[k] == ' ' || b[k] == '\t' || b[k] == '\r' || b[k] == '\n'); k++) {}
        c.has_body = k < bl;
        n = rsd_json_parse(&c.doc, b, bl, s->toks, RSIM_MAX_TOKENS);
        if (n == RSD_ERR_JSON_TOKENS) { /* valid but too big to keep: members unread */
            rsd_json_doc d2;
            c.valid = rsd_json_parse(&d2, b, bl, NULL, 0) > 0;
        } else {
            c.valid = n > 0;
            c.ntok = n > 0 ? n : 0;
        }
    }
    if (c.post && c.valid && rsim_b_str(&c, "model", c.model, sizeof c.model)) c.has_model = c.model[0] != 0;
    if (!c.post && rsim_query(&c, "model", c.model, sizeof c.model)) c.has_model = c.model[0] != 0;
    control = rsim_prefix(c.path, "/_sim/");
    t = rsim_tk_new(s);
    if (!t) {
        resp->status = 503;
        rsim_put(resp, "{\"error\":\"rsd-sim: too many pending requests\"}");
        return RSIM_RESPOND;
    }
    if (!control) {
        t->log = rsim_log_add(s, c.method, c.path);
        rsim_log_model(s, t->log, c.model);
    }
    delay = (int)s->o.delay_ms;
    for (f = 0; !control && f < s->nfaults; f++) {
        rsim_fault *x = &s->faults[f];
        if (!rsim_fault_on(x, &c) || x->count == 0) continue;
        if (x->count > 0) x->count--;
        if (x->kind == RSIM_F_HANG) t->op = RSIM_OP_HANG;
        else if (x->kind == RSIM_F_ERROR) {
            if (s->o.runtime == RSIM_RT_OLLAMA || s->o.runtime == RSIM_RT_LMSTUDIO)
                rsim_reply_set(t, RSIM_O_FLAT, x->status, "injected failure");
            else rsim_lerr(t, x->status, "injected failure");
        } else if (x->kind == RSIM_F_DROP) t->drop = true;
        else if (x->kind == RSIM_F_DELAY) delay += x->status;
        if (x->kind == RSIM_F_HANG || x->kind == RSIM_F_ERROR) break;
    }
    if (t->op == RSIM_OP_HANG) {
        if (t->log >= 0) s->log[t->log].status = -1;
        resp->action = RSIM_HANG;
        resp->ticket = t->id;
        return RSIM_HANG;
    }
    if (!(t->op == RSIM_OP_DONE && t->r.out)) {
        if (control) rsim_control(s, &c, t);
        else switch (s->o.runtime) {
        case RSIM_RT_SERVER: rsim_server_req(s, &c, t); break;
        case RSIM_RT_OLLAMA: rsim_ollama_req(s, &c, t); break;
        case RSIM_RT_LMSTUDIO: rsim_lms_req(s, &c, t); break;
        default: rsim_router_req(s, &c, t); break;
        }
        if (!control && (c.get && (!strcmp(c.path, "/models") || !strcmp(c.path, "/v1/models") ||
                                   !strcmp(c.path, "/api/tags") || !strcmp(c.path, "/api/ps") ||
                                   !strcmp(c.path, "/api/v1/models") || !strcmp(c.path, "/api/v0/models"))) &&
            t->op == RSIM_OP_DONE && (s->o.remove_after_list[0] || s->o.evict_after_list[0])) {
            /* the listing is rendered now, then the model goes */
            int r = rsim_emit(s, t, resp);
            rsim_after_list(s);
            rsim_step(s);
            return r < 0 ? -1 : RSIM_RESPOND;
        }
    }
    rsim_step(s);
    rsim_file_out(s, t, resp); /* a slot's save: the adapter writes it now (a --delay holds the answer only) */
    if (t->op == RSIM_OP_SSE) {
        resp->action = RSIM_STREAM;
        resp->content_type = RSIM_CT_SSE;
        resp->ticket = t->id;
        rsim_resp_conn(s, t, resp);
        if (t->log >= 0) s->log[t->log].status = 200;
        return RSIM_STREAM;
    }
    if (t->op == RSIM_OP_DONE && delay > 0) { t->op = RSIM_OP_TIMER; t->at_ms = s->now + (uint64_t)delay; }
    else if (delay > 0) t->delay_ms = (uint32_t)delay;
    if (t->op == RSIM_OP_DONE) {
        return rsim_emit(s, t, resp) < 0 ? -1 : RSIM_RESPOND;
    }
    resp->action = RSIM_DEFER;
    resp->ticket = t->id;
    return RSIM_DEFER;
}

#endif /* RSD_SIM_H_INCLUDED */
