/* rsd_serve.h -- the testable core of apps/rsd-serve/rsd-serve.c: its configuration (INI file
   and command-line flags), argument splitting, and the scan of a request body for its
   "model". Pure: no I/O, no clock, no allocation (the caller owns the rsrv_config,
   about 470 KB: calloc it). Not part of the library: everything is `static`, prefixed
   rsrv_, C99. Include residency.h (or residency_http.h) first: the body scan decodes
   strings with rsd_json_parse.

   CONFIG FILE (INI; rsrv_parse_ini)
       # a comment: a line starting with '#' or ';', or " #" (blank, '#') to the line's
       # end; a '#' not after a blank is kept (paths, args)
       listen = 127.0.0.1:8080          keys before any section are global; HOST:PORT,
                                        [V6]:PORT or PORT; a host name (localhost:8080)
                                        is resolved once at start
       [global]                         ... and so are keys in [global]
       max_models = 2                   resident processes, 1..16 (default 1)
       vram_budget = 24G                byte budget of all reservations (0 = count only)
       vram_budget = auto               the device's memory minus vram_margin, read at start
                                        and on each reload (rsd_devmem: NVML, amdgpu sysfs,
                                        else /proc/meminfo; the vram devices summed, else
                                        host memory); what other programs hold there is
                                        read again each time a start is admitted and counts
                                        against it. A reading never stops a model by itself
       vram_margin = 1G                 with auto: bytes left free for the driver, the
                                        desktop and the compute buffers nobody reserved
                                        (default 1G)
       llama_server = /opt/llama/llama-server   the binary (default "llama-server", PATH);
                                        words as in command: `llama serve` (the unified
                                        binary; the router's children get the subcommand the
                                        same way) or `env LLAMA_ARG_X=1 llama-server` run
                                        the first word with the rest right after argv[0],
                                        before -m ...; a path with blanks is quoted:
                                        "/opt/my llama/llama-server"
       args = --no-webui                extra arguments for every llama_server model (before
                                        its own); never given to `command` models
       start_timeout = 300              seconds until a start counts as failed (default 300)
       stop_grace = 10                  seconds from SIGTERM to SIGKILL (default 10)
       max_wait = 30                    seconds a request may wait for a slot (0 = default 30)
       start_backoff = 1                a model whose start failed is not started again for
                                        this long (default 1 s; doubled per failure in a
                                        row, up to 60 s): its requests get 503 at once
       send_timeout = 30                seconds a client may read nothing of its answer before
                                        it is disconnected and its request cancelled (0 =
                                        default 30); 1 s while its model must make room
       max_queue = 32                   requests waiting for a process in all (1..4096;
                                        default 4096, which no load reaches: rsd-serve
                                        holds at most 64 client connections, so by default
                                        nothing is refused); past it 429 with Retry-After
       watchdog = 10s                   poll each ready child's /health this often (default 0
                                        = off); a child that fails watchdog_failures polls in
                                        a row (default 3; each poll bounded by the interval,
                                        at most 2 s), or answers watchdog_errors requests in
                                        a row with 5xx (default 5; 503 aside), is killed and
                                        started again after 1 s, doubling to 60 s; after
                                        watchdog_restarts restarts in a row (default 5) it is
                                        left stopped until a request asks for it
       lock_models = chat-8b, coder     a locked host: only these models (ids or aliases)
                                        are served and listed; a request naming none gets
                                        the first, one naming another gets 409, and when
                                        none of them is configured every request gets 503
       api_key = sk-...                 every endpoint but /health and the page at / needs
                                        "Authorization: Bearer KEY" or "X-Api-Key: KEY"
                                        (1..255 printable bytes, no blanks; default none;
                                        rsd-serve also reads RSD_API_KEY)
       admin_key = adm-...              management (/models/load, /models/unload, /status,
                                        /_rsd/...) needs this one instead; it opens the rest
                                        too (default: api_key guards management;
                                        RSD_ADMIN_KEY)
       cors = *                         CORS: * or origins separated by commas
                                        (https://app.example, http://localhost:3000);
                                        default off
       event_history = 512              events kept for GET /_rsd/events?since=ID replay,
                                        1..16384 (default 512; 4 KB each). A reload
                                        applies new keys and cors at once; the history
                                        keeps its size until a restart
       kv_cache_dir = /var/cache/rsd-kv a swap keeps the conversation: before a
                                        llama_server model's ready process stops (evict,
                                        ttl, lease, unload, reload, shutdown) each of its
                                        slots that holds a prompt is saved there (POST
                                        /slots/N?action=save; every such child gets
                                        --slot-save-path DIR/slots, made 0700, files
                                        0600; on Windows both get an owner-only DACL),
                                        and restored into the same slot when it
                                        starts again, before its first request (its
                                        requests wait in its queue meanwhile).
                                        Each file is keyed by the model file (path, size,
                                        mtime, a hash of its first 64 KiB), ctx, parallel,
                                        args and the llama_server path, and the child's
                                        build (/props build_info): anything else, a
                                        truncated file or a refused restore deletes it and
                                        the model starts cold (one log line, one kv_miss
                                        event). A restore that gets no answer (the file
                                        ended the child, or it hangs) within
                                        kv_save_timeout deletes that file too, and the
                                        child is killed and started again without it:
                                        the requests waiting are served by the new one.
                                        Default off (also: off)
       kv_cache_bytes = 8G              disk budget of those files (default 8G; oldest
                                        deleted first; off = no saves)
       kv_save_timeout = 5s             one stop's saves at most (default 5 s), and at
                                        most half of stop_grace: the saves are part of
                                        the stop's grace, which they never lengthen; a
                                        save that is slower or fails costs its cache,
                                        not the stop
       state_dir = /var/lib/residency   each model's learned memory figure is kept here
                                        (mem-KEY.txt, 0600; the directory is made 0700):
                                        keyed by the model file (path, size, mtime), the
                                        start's parameters and the server binary (path,
                                        size, mtime), so the next start of the same model
                                        is counted right from the first byte. A missing or
                                        bad file is ignored. Default: not kept (learned
                                        figures last as long as the process; also: off)

       [model chat-8b]                  one section per model; the id routes requests
       model = /models/chat-8b.gguf     the GGUF (run as: llama_server -m MODEL --host
                                        127.0.0.1 --port P [-c CTX] [-np N] [-ngl X]
                                        --alias ID -lv 4 ARGS...; -lv 4 prints the
                                        buffer sizes rsd-serve learns the model's
                                        bytes from, an -lv in ARGS wins)
       command = /opt/bin/srv --port {port} --weights {model}
                                        or a whole command line run instead of llama_server;
                                        {model} {alias} {host} {port} {ctx} {parallel}
                                        {ngl} {name} are expanded; it must listen on {port}
                                        and answer GET /health with 200 once ready
       args = --jinja -fa on            extra arguments (appended)
       ctx = 8192                       context size (-c)
       parallel = 4                     slots (-np); also the most requests sent at once
       ngl = 99                         GPU layers (-ngl): a number, auto or all
       reserve = 6G                     bytes reserved against vram_budget (K/M/G/T, binary);
                                        without it, with a byte budget, the model counts
                                        what rsd-serve learned it takes (its child's own
                                        report of its buffers, else the OS's figure), else
                                        what its GGUF header and start parameters make it
                                        (rsd_gguf_estimate_start), else 0. On a discrete
                                        GPU's budget (vram_budget = auto on NVML or amdgpu)
                                        the GPU part of those figures counts, else all
       ttl = 300                        unload after this many seconds idle (0 = never)
       pinned = true                    never evicted (true/false/yes/no/on/off/1/0)
       aliases = chat, default          other names that route to this model
       env = CUDA_VISIBLE_DEVICES=0, LLAMA_ARG_X=1
                                        the child's environment: NAME=VALUE entries, comma
                                        separated (a value cannot hold a comma), set on top
                                        of rsd-serve's own (at most 16)
       preload = true                   started at boot, not pinned (evicted like any other)
       max_queue = 4                    requests waiting for this model (default: the global
                                        max_queue, which also bounds it)
       session_affinity = true          a session's requests go to the slot holding its
                                        KV cache (see rsd_serve_affinity.h; default false)
       session_erase = true             with session_affinity: erase a slot before handing
                                        it to another session, for KV isolation between
                                        sessions (default false: the child's own prompt
                                        cache keeps what the slot held)

   Placeholders in `command` are {model} {alias} {host} {port} {ctx} {parallel} {ngl}
   {name} and {extra} (the model's args); {{ is a brace. rsrv_check finds what parses
   but cannot work (an unknown placeholder, a command without {port}, `model` and
   `command` in one section when the command has no {model}, more pinned models than
   max_models, a reserve above vram_budget), each "FILE:LINE: message".
   Values run to the end of the line, trimmed; "quotes" and backslashes in args,
   command and llama_server group words as in a shell (no expansion; on Windows a
   backslash escapes only a double quote, so paths keep theirs). Durations are seconds, or a
   number with ms/s/m/h ("1.5s", "1h30m" too); sizes may have a fraction ("1.5G"); both as
   apps/rsd_app.h reads them. Every model needs `model` or `command`. Ids and aliases are
   unique across all models. Any other line, key, section, duplicate key or bad value
   is an error "FILE:LINE: message".

   FLAGS (rsrv_parse_args; applied after the file)
       --config FILE  --listen HOST:PORT  --max-models N  --vram-budget SIZE|auto  --vram-margin SIZE
       --llama-server PATH  --args "A B"  --start-timeout DUR  --stop-grace DUR
       --max-wait DUR  --send-timeout DUR  --max-queue N  --watchdog DUR  --lock-models A,B
       --api-key K  --admin-key K  --cors ORIGINS  --event-history N  --state-dir DIR  --model ID=PATH
       --command ID="CMD LINE"
       after --model/--command, for that model: --ctx N --parallel N --ngl X
       --reserve SIZE --ttl DUR --pinned --preload --aliases A,B --model-args "A B"
       --env "A=1,B=2" --model-max-queue N --session-affinity --session-erase (--no-session-erase)
       --verbose --quiet --help (flags without effect on the config, returned in opts) */
#ifndef RSD_SERVE_H_INCLUDED
#define RSD_SERVE_H_INCLUDED

#ifndef RESIDENCY_H_INCLUDED
#error "include residency.h (or residency_http.h) before rsd_serve.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../rsd_app.h"

#if defined(__GNUC__) || defined(__clang__)
#define RSRV_FN static __attribute__((unused))
#else
#define RSRV_FN static
#endif

enum {
    RSRV_MAX_MODELS = 64,     /* [model] sections (= RSD_FLEET_MAX_MODELS) */
    RSRV_ID_MAX = 128,        /* a model id or alias, with the NUL (= RSD_POOL_MAX_MODEL_ID) */
    RSRV_MAX_ALIASES = 8,     /* aliases per model */
    RSRV_PATH_MAX = 1024,     /* model path, llama_server path (with the NUL) */
    RSRV_CMD_MAX = 2048,      /* command / args value (with the NUL) */
    RSRV_MAX_ARGS = 64,       /* words of one command / args value */
    RSRV_LINE_MAX = 4096,     /* one config line */
    RSRV_HOST_MAX = 256,      /* listen host (numeric, or a name resolved once at start) */
    RSRV_NGL_MAX = 16,        /* ngl value */
    RSRV_ERR_MAX = 768,       /* error message ("file:line: ...") */
    RSRV_MSG_MAX = 640,       /* the message part of it (an unknown key lists every key) */
    RSRV_MAX_SLOTS = 16,      /* max_models upper bound (= RSD_POOL_MAX_SLOTS) */
    RSRV_SEND_TIMEOUT_DEFAULT_MS = 30000, /* send_timeout when 0 */
    RSRV_MAX_WAIT_DEFAULT_MS = 30000,     /* max_wait when 0 (= RSD_POOL_DEFAULT_MAX_WAIT_MS) */
    RSRV_START_BACKOFF_DEFAULT_MS = 1000, /* start_backoff when 0 (the pool's start_backoff_ms) */
    RSRV_MAX_QUEUE_DEFAULT = 4096,        /* max_queue (in all) when 0: no limit below the connections */
    RSRV_MAX_QUEUE_MAX = 4096,            /* max_queue upper bound */
    RSRV_MAX_ENV = 16,                    /* env entries per model */
    RSRV_KEYS_MAX = 32,                   /* keys per section (key_line) */
    RSRV_TEXT_MAX = 24,                   /* a size or duration as written */
    RSRV_KEY_MAX = 256,                   /* api_key / admin_key (with the NUL) */
    RSRV_EVENT_HISTORY_DEFAULT = 512,     /* event_history when 0 */
    RSRV_EVENT_HISTORY_MAX = 16384,
    RSRV_KV_SAVE_TIMEOUT_DEFAULT_MS = 5000, /* a stop's slot saves at most (kv_save_timeout) */
    RSRV_WD_FAILURES_DEFAULT = 3,         /* watchdog_failures when 0 */
    RSRV_WD_ERRORS_DEFAULT = 5,           /* watchdog_errors when 0 */
    RSRV_WD_RESTARTS_DEFAULT = 5          /* watchdog_restarts when 0 */
};
#define RSRV_KV_BYTES_DEFAULT ((uint64_t)8 << 30) /* kv_cache_bytes */
#define RSRV_VRAM_MARGIN_DEFAULT ((uint64_t)1 << 30) /* vram_margin when not set: 1 GiB */

/* One model section. */
typedef struct rsrv_model {
    char id[RSRV_ID_MAX];
    char model[RSRV_PATH_MAX];   /* "" = none (then command is set) */
    char command[RSRV_CMD_MAX];  /* "" = llama_server with the llama-server template */
    char args[RSRV_CMD_MAX];     /* extra arguments */
    int64_t ctx;                 /* 0 = not passed */
    int parallel;                /* 0 = not passed */
    char ngl[RSRV_NGL_MAX];      /* "" = not passed */
    uint64_t reserve_bytes;
    uint32_t ttl_ms;             /* 0 = never */
    bool pinned;
    bool session_affinity;       /* requests of one session go to the slot holding its KV */
    bool session_erase;          /* session_erase = true: a slot handed to another session
                                    is erased first (default: not) */
    int naliases;
    char aliases[RSRV_MAX_ALIASES][RSRV_ID_MAX];
    char env[RSRV_CMD_MAX];      /* "NAME=VALUE, NAME2=VALUE2" for the child ("" = none) */
    bool preload;                /* started at boot (not pinned: may be evicted) */
    int max_queue;               /* requests waiting for it at most; 0 = the global max_queue */
    int line;                    /* where its section starts (0 = from flags) */
    uint32_t seen;               /* keys set (bit per key), for duplicate detection */
    int key_line[RSRV_KEYS_MAX]; /* the line of each key set (0 = not in the file) */
    bool retired;                /* removed by a reload (rsd-serve keeps its index); never
                                    found by rsrv_find; the parser never sets it */
    char text[RSRV_KEYS_MAX][RSRV_TEXT_MAX]; /* sizes and durations as written ("" = not) */
} rsrv_model;

/* The whole configuration. */
typedef struct rsrv_config {
    int max_models;              /* 1..16 */
    uint64_t vram_budget_bytes;  /* 0 = count only (with auto: what the device gave) */
    bool vram_budget_auto;       /* vram_budget = auto: rsd-serve reads the device */
    uint64_t vram_margin_bytes;  /* with auto: left free (when vram_margin_set) */
    bool vram_margin_set;        /* else RSRV_VRAM_MARGIN_DEFAULT */
    char llama_server[RSRV_PATH_MAX];
    char args[RSRV_CMD_MAX];     /* extra arguments for every model */
    char listen_host[RSRV_HOST_MAX];
    int listen_port;             /* 0..65535 (0 = ephemeral) */
    uint32_t start_timeout_ms;
    uint32_t stop_grace_ms;
    uint32_t max_wait_ms;        /* 0 = the pool's default */
    uint32_t start_backoff_ms;   /* first backoff after a failed start; 0 = the pool's (1 s) */
    uint32_t send_timeout_ms;    /* 0 = RSRV_SEND_TIMEOUT_DEFAULT_MS */
    int max_queue;               /* requests waiting in all at most; 0 = RSRV_MAX_QUEUE_DEFAULT */
    uint32_t watchdog_ms;        /* health poll interval of ready children; 0 = no watchdog */
    int watchdog_failures;       /* failed polls in a row before a restart; 0 = 3 */
    int watchdog_errors;         /* 5xx answers in a row before a restart; 0 = 5 */
    int watchdog_restarts;       /* restarts in a row before it gives up; 0 = 5 */
    char api_key[RSRV_KEY_MAX];  /* "" = none: every endpoint but /health and / needs it */
    char admin_key[RSRV_KEY_MAX];/* "" = api_key guards management too */
    char cors[RSRV_CMD_MAX];     /* "" = off, "*", or origins separated by commas */
    uint32_t event_history;      /* events kept for replay; 0 = RSRV_EVENT_HISTORY_DEFAULT */
    char kv_cache_dir[RSRV_PATH_MAX]; /* slot saves across stops ("" = off) */
    uint64_t kv_cache_bytes;     /* their disk budget; 0 = RSRV_KV_BYTES_DEFAULT */
    bool kv_off;                 /* kv_cache_bytes = off */
    uint32_t kv_save_timeout_ms; /* one stop's saves at most; 0 = RSRV_KV_SAVE_TIMEOUT_DEFAULT_MS */
    char state_dir[RSRV_PATH_MAX]; /* learned memory figures kept across restarts ("" = not kept) */
    uint32_t seen;               /* global keys set */
    int key_line[RSRV_KEYS_MAX]; /* the line of each global key set (0 = not in the file) */
    char text[RSRV_KEYS_MAX][RSRV_TEXT_MAX]; /* sizes and durations as written ("" = not) */
    int nlock;                   /* lock_models: only these are served (0 = any) */
    char lock_models[RSRV_MAX_MODELS][RSRV_ID_MAX];
    int nmodels;
    rsrv_model models[RSRV_MAX_MODELS];
} rsrv_config;

/* Flags that are not configuration. */
typedef struct rsrv_opts {
    const char *config_path;     /* --config FILE, NULL = none */
    bool verbose, quiet, help;
} rsrv_opts;

/* ---- small helpers ---------------------------------------------------------------- */
RSRV_FN void rsrv_cpy(char *dst, size_t cap, const char *s, size_t n) {
    if (!cap) return;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, s, n);
    dst[n] = 0;
}

RSRV_FN bool rsrv_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* Trims s[0..*n) in place (returns the new start). */
RSRV_FN const char *rsrv_trim(const char *s, size_t *n) {
    while (*n && rsrv_space(*s)) { s++; (*n)--; }
    while (*n && rsrv_space(s[*n - 1])) (*n)--;
    return s;
}

/* Unsigned decimal of s[0..n) into *out (<= max); false on anything else. */
RSRV_FN bool rsrv_parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out) {
    uint64_t v = 0;
    size_t i;
    if (!n || n > 20) return false;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        if (v > (max - (uint64_t)(s[i] - '0')) / 10) return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* Bytes as rapp_parse_size reads them ("512", "4K", "3MiB", "1.5G"), up to
   RSD_POOL_MAX_BYTES. */
RSRV_FN bool rsrv_parse_size(const char *s, size_t n, uint64_t *out) {
    return rapp_parse_size(s, n, RSD_POOL_MAX_BYTES, out);
}

/* Duration as rapp_parse_duration reads it, a number alone in seconds ("30", "250ms",
   "2h", "1h30m"), up to 0xFFFFFFFE ms. */
RSRV_FN bool rsrv_parse_duration(const char *s, size_t n, uint32_t *ms) {
    uint64_t v;
    if (!rapp_parse_duration(s, n, true, 0xFFFFFFFEu, &v)) return false;
    *ms = (uint32_t)v;
    return true;
}

RSRV_FN bool rsrv_parse_bool(const char *s, size_t n, bool *out) {
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    size_t i;
    for (i = 0; i < 4; i++) {
        if (strlen(yes[i]) == n && !memcmp(s, yes[i], n)) { *out = true; return true; }
        if (strlen(no[i]) == n && !memcmp(s, no[i], n)) { *out = false; return true; }
    }
    return false;
}

/* HOST:PORT, [V6]:PORT, :PORT or PORT. HOST is a numeric IPv4 address or a host name
   (letters, digits, '.', '-', '_'; rsd-serve resolves it once at start); [V6] is numeric. */
RSRV_FN bool rsrv_parse_listen(const char *s, size_t n, char *host, size_t host_cap, int *port) {
    const char *colon = NULL;
    size_t i, hn;
    uint64_t p;
    if (!n) return false;
    for (i = n; i > 0; i--)
        if (s[i - 1] == ':') { colon = s + i - 1; break; }
    if (s[0] == '[') {
        const char *close = (const char *)memchr(s, ']', n);
        if (!close || close + 1 != colon) return false;
        hn = (size_t)(close - s - 1);
        if (!hn || hn >= host_cap) return false;
        rsrv_cpy(host, host_cap, s + 1, hn);
    } else if (!colon) {
        if (!rsrv_parse_u64(s, n, 65535, &p)) return false;
        rsrv_cpy(host, host_cap, "127.0.0.1", 9);
        *port = (int)p;
        return true;
    } else {
        hn = (size_t)(colon - s);
        if (hn >= host_cap || memchr(s, ':', hn)) return false; /* bare IPv6 needs brackets */
        if (hn) rsrv_cpy(host, host_cap, s, hn);
        else rsrv_cpy(host, host_cap, "127.0.0.1", 9);
    }
    for (i = 0; host[i]; i++) {
        char h = host[i];
        bool hex = (h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F');
        bool name = (h >= '0' && h <= '9') || (h >= 'a' && h <= 'z') || (h >= 'A' && h <= 'Z') || h == '.' ||
                    h == '-' || h == '_';
        if (s[0] == '[' ? !(hex || h == '.' || h == ':') : !name) return false;
    }
    if (!rsrv_parse_u64(colon + 1, (size_t)(s + n - colon - 1), 65535, &p)) return false;
    *port = (int)p;
    return true;
}

/* Splits s into words as a shell would group them ('single', "double" with \" \\ \$
   \` escapes, backslash outside quotes; on Windows a backslash escapes only a '"' and is
   otherwise kept, so C:\path\llama-server.exe is one word), without any expansion. Words go into buf
   (NUL-separated), pointers into argv[0..cap-1] followed by NULL. Returns the count or
   -1 (unterminated quote, trailing backslash, too many words, buf too small). */
RSRV_FN int rsrv_split(const char *s, char *buf, size_t buf_cap, const char **argv, int cap) {
    size_t o = 0;
    int n = 0;
    if (!buf_cap || cap < 1) return -1;
    for (;;) {
        bool word = false;
        char q = 0;
        while (*s && (rsrv_space(*s) || *s == '\n')) s++;
        if (!*s) break;
        if (n + 1 >= cap) return -1;
        argv[n] = buf + o;
        for (; *s; s++) {
            char c = *s;
            if (!q && (rsrv_space(c) || c == '\n')) break;
            if (!q && (c == '\'' || c == '"')) { q = c; word = true; continue; }
            if (q && c == q) { q = 0; continue; }
            if (c == '\\' && q != '\'') {
                char d = s[1];
#if defined(_WIN32)
                /* Windows: a backslash is a path's separator, kept, unless it escapes a quote */
                if (d == '"') {
                    c = d;
                    s++;
                }
#else
                if (!d) return -1;
                if (q == '"' && d != '"' && d != '\\' && d != '$' && d != '`') {
                    /* backslash kept literally inside double quotes */
                } else {
                    c = d;
                    s++;
                }
#endif
            }
            if (o + 1 >= buf_cap) return -1;
            buf[o++] = c;
            word = true;
        }
        if (q) return -1;
        if (o + 1 > buf_cap) return -1;
        buf[o++] = 0;
        (void)word;
        n++;
    }
    argv[n] = NULL;
    return n;
}

/* ---- lookups ---------------------------------------------------------------------- */
/* Index of the model whose id or alias is name[0..n), or -1. */
RSRV_FN int rsrv_find(const rsrv_config *c, const char *name, size_t n) {
    int i, k;
    if (!n) return -1;
    for (i = 0; i < c->nmodels; i++) {
        const rsrv_model *m = &c->models[i];
        if (m->retired) continue;
        if (strlen(m->id) == n && !memcmp(m->id, name, n)) return i;
        for (k = 0; k < m->naliases; k++)
            if (strlen(m->aliases[k]) == n && !memcmp(m->aliases[k], name, n)) return i;
    }
    return -1;
}

/* A model id or alias: 1..RSRV_ID_MAX-1 printable bytes, no blanks, ',', '[', ']', '"',
   '\\' or '#'. */
RSRV_FN bool rsrv_name_ok(const char *s, size_t n) {
    size_t i;
    if (!n || n >= RSRV_ID_MAX) return false;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == 0x7f || c == ',' || c == '[' || c == ']' || c == '"' || c == '\\' || c == '#') return false;
    }
    return true;
}

/* ---- configuration ------------------------------------------------------------------ */
RSRV_FN void rsrv_config_init(rsrv_config *c) {
    memset(c, 0, sizeof *c);
    c->max_models = 1;
    rsrv_cpy(c->llama_server, sizeof c->llama_server, "llama-server", 12);
    rsrv_cpy(c->listen_host, sizeof c->listen_host, "127.0.0.1", 9);
    c->listen_port = 8080;
    c->start_timeout_ms = 300000;
    c->stop_grace_ms = 10000;
}

/* Adds model id (checked: valid, unique); returns it or NULL with err set. */
RSRV_FN rsrv_model *rsrv_add_model(rsrv_config *c, const char *id, size_t n, int line, char *err, size_t ecap) {
    rsrv_model *m;
    int dup;
    if (!rsrv_name_ok(id, n)) {
        snprintf(err, ecap, "bad model id '%.*s' (1..%d bytes, no blanks, commas, quotes or brackets)",
                 (int)(n > 200 ? 200 : n), id, RSRV_ID_MAX - 1);
        return NULL;
    }
    if ((dup = rsrv_find(c, id, n)) >= 0) {
        if (c->models[dup].line) snprintf(err, ecap, "model '%.*s' is already defined (line %d)", (int)n, id, c->models[dup].line);
        else snprintf(err, ecap, "model '%.*s' is already defined", (int)n, id);
        return NULL;
    }
    if (c->nmodels >= RSRV_MAX_MODELS) {
        snprintf(err, ecap, "too many models (at most %d)", RSRV_MAX_MODELS);
        return NULL;
    }
    m = &c->models[c->nmodels++];
    memset(m, 0, sizeof *m);
    rsrv_cpy(m->id, sizeof m->id, id, n);
    m->line = line;
    return m;
}

/* Copies a string value (checked length); false with err set. */
RSRV_FN bool rsrv_set_str(char *dst, size_t cap, const char *v, size_t n, const char *key, char *err, size_t ecap) {
    if (n >= cap) {
        snprintf(err, ecap, "%s is too long (at most %d bytes)", key, (int)cap - 1);
        return false;
    }
    rsrv_cpy(dst, cap, v, n);
    return true;
}

/* An API key: 1..RSRV_KEY_MAX-1 printable ASCII bytes, no blanks (it goes in a header). */
RSRV_FN bool rsrv_key_ok(const char *s, size_t n) {
    size_t i;
    if (!n || n >= RSRV_KEY_MAX) return false;
    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f) return false;
    return true;
}

/* A cors value: "*", or origins (scheme://host[:port], no path) separated by commas. */
RSRV_FN bool rsrv_cors_ok(const char *s, size_t n) {
    size_t i = 0;
    if (n == 1 && s[0] == '*') return true;
    if (!n) return false;
    while (i <= n) {
        size_t j = i, on, k;
        const char *o;
        while (j < n && s[j] != ',') j++;
        on = j - i;
        o = rsrv_trim(s + i, &on);
        if (on < 8 || !(memcmp(o, "http://", 7) == 0 || (on > 8 && memcmp(o, "https://", 8) == 0))) return false;
        for (k = (o[4] == 's' ? 8 : 7); k < on; k++)
            if ((unsigned char)o[k] <= ' ' || (unsigned char)o[k] >= 0x7f || o[k] == '/' || o[k] == '"' ||
                o[k] == '*')
                return false;
        if (k == (size_t)(o[4] == 's' ? 8 : 7)) return false;
        i = j + 1;
    }
    return true;
}

/* Whether origin[0..n) is allowed by the cors value (exact match of one entry, or "*"). */
RSRV_FN bool rsrv_cors_allows(const char *cors, const char *origin, size_t n) {
    size_t i = 0, len = strlen(cors);
    if (!len || !n) return false;
    if (len == 1 && cors[0] == '*') return true;
    while (i <= len) {
        size_t j = i, on;
        const char *o;
        while (j < len && cors[j] != ',') j++;
        on = j - i;
        o = rsrv_trim(cors + i, &on);
        if (on == n && !memcmp(o, origin, n)) return true;
        i = j + 1;
    }
    return false;
}

/* ---- the key tables -----------------------------------------------------------------
   One row per configuration key, one table per scope (rsrv_global_keys, rsrv_model_keys):
   its name, kind, field, bounds, default, flag and help. The row's index is its bit in
   `seen` and its slot in key_line and text. The parser (rsrv_set_key: one function per
   kind, each writing its message from the row), the flags (rsrv_parse_args), the writer
   (rsrv_write_ini: --check's output), the example (rsrv_write_example), the comparisons
   (rsrv_config_equal, rsrv_model_process_differs: the reload's diff) and the unknown-key
   messages all walk these tables. A new key is a new row at the end of its table. */
typedef enum rsrv_kind {
    /* numbers (rsrv_key_value) */
    RSRV_KIND_INT,      /* a decimal from lo to hi */
    RSRV_KIND_QUEUE,    /* a model's max_queue: an INT the global max_queue caps */
    RSRV_KIND_SIZE,     /* bytes with K/M/G/T (rsrv_parse_size), at least lo */
    RSRV_KIND_DURATION, /* milliseconds (rsrv_parse_duration), at least lo; 0 too when `zero` says what it means */
    RSRV_KIND_BOOL,     /* true/false/yes/no/on/off/1/0 */
    RSRV_KIND_BUDGET,   /* vram_budget: a SIZE, or auto */
    RSRV_KIND_MARGIN,   /* vram_margin: a SIZE, in effect (and written) with vram_budget = auto */
    RSRV_KIND_SIZE_OFF, /* kv_cache_bytes: a SIZE, or off */
    /* strings (the field is a char array) */
    RSRV_KIND_PATH,     /* not empty */
    RSRV_KIND_PATH_OFF, /* off (or nothing) = "" */
    RSRV_KIND_WORDS,    /* splits as a shell would (rsrv_split): lo to hi words */
    RSRV_KIND_PROGRAM,  /* llama_server: WORDS, the first one the program */
    RSRV_KIND_SECRET,   /* an API key (rsrv_key_ok) */
    RSRV_KIND_CORS,     /* rsrv_cors_ok */
    RSRV_KIND_NGL,      /* a number up to hi, auto or all */
    RSRV_KIND_ENV,      /* NAME=VALUE entries separated by commas, at most hi */
    /* fields of their own */
    RSRV_KIND_LISTEN,   /* HOST:PORT into listen_host and listen_port */
    RSRV_KIND_NAMES,    /* lock_models: names separated by commas, at most hi */
    RSRV_KIND_ALIASES   /* a model's other names, unique across models, at most hi */
} rsrv_kind;

enum {
    RSRV_KF_ZERO = 1,    /* a 0 field stands for dv (the default) */
    RSRV_KF_RESTART = 2, /* a reload keeps the old value until a restart (rsd-serve's do_reload) */
    RSRV_KF_PROCESS = 4, /* a change runs a different process (model keys; global: for every model) */
    RSRV_KF_LLAMA = 8,   /* global: a change runs a different process for llama_server models */
    RSRV_KF_KV = 16      /* written only with kv_cache_dir set */
};

typedef struct rsrv_key {
    const char *name;
    int kind;              /* rsrv_kind */
    int flags;             /* RSRV_KF_* */
    size_t off, size;      /* the field: its offset and size in rsrv_config or rsrv_model */
    uint64_t lo, hi;       /* bounds: of the value (INT, QUEUE, NGL), at least lo (SIZE, DURATION), of the
                              word count (WORDS), at most hi entries (ENV, NAMES, ALIASES); hi 0 = the type's */
    uint64_t dv;           /* RSRV_KF_ZERO, MARGIN: the value that stands for 0 (unset) */
    const char *def;       /* the default as written; NULL = none: the key is written only when set */
    const char *zero;      /* what 0 means, in messages and as a comment after it (NULL = nothing special) */
    const char *flag;      /* the command-line flag that sets it (NULL = none); a BOOL's takes no value */
    const char *help;      /* one line, above the key in the example configuration */
    const char *example;   /* a value for the example configuration where the key is not written */
} rsrv_key;

#define RSRV_G(f) offsetof(rsrv_config, f), sizeof(((rsrv_config *)0)->f)
#define RSRV_M(f) offsetof(rsrv_model, f), sizeof(((rsrv_model *)0)->f)
static const rsrv_key rsrv_global_keys[] = {
    {"max_models", RSRV_KIND_INT, 0, RSRV_G(max_models), 1, RSRV_MAX_SLOTS, 0, "1", NULL, "--max-models",
     "processes resident at once, 1..16", NULL},
    {"vram_budget", RSRV_KIND_BUDGET, 0, RSRV_G(vram_budget_bytes), 0, 0, 0, "0", "none: models are counted only",
     "--vram-budget", "byte budget of all reservations (K/M/G/T), or auto (the device's memory less vram_margin); "
     "0 = models are counted only", NULL},
    {"llama_server", RSRV_KIND_PROGRAM, RSRV_KF_LLAMA, RSRV_G(llama_server), 1, RSRV_MAX_ARGS, 0, "llama-server", NULL,
     "--llama-server", "the llama-server binary (a name is looked up in PATH)", NULL},
    {"listen", RSRV_KIND_LISTEN, RSRV_KF_RESTART, RSRV_G(listen_host), 0, 0, 0, "127.0.0.1:8080", NULL, "--listen",
     "HOST:PORT, [V6]:PORT or PORT to listen on (port 0 = any free port, printed)", NULL},
    {"start_timeout", RSRV_KIND_DURATION, RSRV_KF_PROCESS, RSRV_G(start_timeout_ms), 1, 0, 0, "5m", NULL,
     "--start-timeout", "until a start counts as failed (durations: seconds, or ms/s/m/h)", NULL},
    {"stop_grace", RSRV_KIND_DURATION, RSRV_KF_RESTART, RSRV_G(stop_grace_ms), 0, 0, 0, "10s", NULL, "--stop-grace",
     "from SIGTERM to SIGKILL when a process is stopped", NULL},
    {"args", RSRV_KIND_WORDS, RSRV_KF_LLAMA, RSRV_G(args), 0, RSRV_MAX_ARGS, 0, NULL, NULL, "--args",
     "extra arguments for every llama_server model, before its own (default none)", "--no-webui"},
    {"max_wait", RSRV_KIND_DURATION, RSRV_KF_ZERO | RSRV_KF_RESTART, RSRV_G(max_wait_ms), 0, 0,
     RSRV_MAX_WAIT_DEFAULT_MS, "30s", NULL, "--max-wait",
     "a request waiting this long for a process makes a busy model drain", NULL},
    {"send_timeout", RSRV_KIND_DURATION, RSRV_KF_ZERO, RSRV_G(send_timeout_ms), 0, 0, RSRV_SEND_TIMEOUT_DEFAULT_MS,
     "30s", NULL, "--send-timeout", "a client that reads nothing of its answer this long is cut, its request cancelled",
     NULL},
    {"max_queue", RSRV_KIND_INT, RSRV_KF_ZERO, RSRV_G(max_queue), 1, RSRV_MAX_QUEUE_MAX, RSRV_MAX_QUEUE_DEFAULT, "4096",
     NULL, "--max-queue", "requests waiting for a process in all, 1..4096; past it 429 with Retry-After", NULL},
    {"watchdog", RSRV_KIND_DURATION, RSRV_KF_RESTART, RSRV_G(watchdog_ms), 10, 0, 0, "0", "off", "--watchdog",
     "poll each ready child's /health this often; 0 = off", NULL},
    {"watchdog_failures", RSRV_KIND_INT, RSRV_KF_ZERO | RSRV_KF_RESTART, RSRV_G(watchdog_failures), 1, 1000,
     RSRV_WD_FAILURES_DEFAULT, "3", NULL, NULL, "failed watchdog polls in a row that restart a child", NULL},
    {"watchdog_errors", RSRV_KIND_INT, RSRV_KF_ZERO | RSRV_KF_RESTART, RSRV_G(watchdog_errors), 1, 1000,
     RSRV_WD_ERRORS_DEFAULT, "5", NULL, NULL, "5xx answers in a row (503 aside) that restart a child", NULL},
    {"watchdog_restarts", RSRV_KIND_INT, RSRV_KF_ZERO | RSRV_KF_RESTART, RSRV_G(watchdog_restarts), 1, 1000,
     RSRV_WD_RESTARTS_DEFAULT, "5", NULL, NULL, "restarts in a row (1 s doubling to 60 s apart), then it is left stopped",
     NULL},
    {"lock_models", RSRV_KIND_NAMES, 0, RSRV_G(lock_models), 0, RSRV_MAX_MODELS, 0, NULL, NULL, "--lock-models",
     "a locked host: only these models (ids or aliases) are served and listed (default: any)", "chat-8b, coder"},
    {"api_key", RSRV_KIND_SECRET, 0, RSRV_G(api_key), 0, 0, 0, NULL, NULL, "--api-key",
     "every endpoint but /health and / needs \"Authorization: Bearer KEY\" (default none; or $RSD_API_KEY)",
     "sk-change-me"},
    {"admin_key", RSRV_KIND_SECRET, 0, RSRV_G(admin_key), 0, 0, 0, NULL, NULL, "--admin-key",
     "management (/models/load, /models/unload, /status, /_rsd/...) needs this one instead (default: api_key)",
     "adm-change-me"},
    {"cors", RSRV_KIND_CORS, 0, RSRV_G(cors), 0, 0, 0, NULL, NULL, "--cors",
     "CORS: * or origins separated by commas (default off)", "https://app.example, http://localhost:3000"},
    {"event_history", RSRV_KIND_INT, RSRV_KF_ZERO | RSRV_KF_RESTART, RSRV_G(event_history), 1, RSRV_EVENT_HISTORY_MAX,
     RSRV_EVENT_HISTORY_DEFAULT, "512", NULL, "--event-history",
     "events kept for GET /_rsd/events?since=ID, 1..16384 (4 KB each)", NULL},
    {"kv_cache_dir", RSRV_KIND_PATH_OFF, RSRV_KF_RESTART, RSRV_G(kv_cache_dir), 0, 0, 0, NULL, NULL, NULL,
     "save each slot's prompt cache here before a child stops, restore it when it returns (default off)",
     "/var/lib/residency/kv"},
    {"kv_cache_bytes", RSRV_KIND_SIZE_OFF, RSRV_KF_ZERO | RSRV_KF_RESTART | RSRV_KF_KV, RSRV_G(kv_cache_bytes), 1, 0,
     RSRV_KV_BYTES_DEFAULT, "8G", NULL, NULL,
     "disk budget of the saved prompt caches, oldest deleted first (default 8G; off = no saving)", NULL},
    {"kv_save_timeout", RSRV_KIND_DURATION, RSRV_KF_ZERO | RSRV_KF_RESTART | RSRV_KF_KV, RSRV_G(kv_save_timeout_ms), 1,
     0, RSRV_KV_SAVE_TIMEOUT_DEFAULT_MS, "5s", NULL, NULL, "how long a stop waits for its slots' saves (default 5 s)",
     NULL},
    {"vram_margin", RSRV_KIND_MARGIN, 0, RSRV_G(vram_margin_bytes), 0, 0, RSRV_VRAM_MARGIN_DEFAULT, "1G", NULL,
     "--vram-margin", "with vram_budget = auto: bytes left free below the device's total (default 1G)", NULL},
    {"state_dir", RSRV_KIND_PATH_OFF, 0, RSRV_G(state_dir), 0, 0, 0, NULL, NULL, "--state-dir",
     "keep each model's learned memory figure here across restarts (default: not kept)", "/var/lib/residency"},
    {"start_backoff", RSRV_KIND_DURATION, RSRV_KF_ZERO | RSRV_KF_RESTART, RSRV_G(start_backoff_ms), 0, 0,
     RSRV_START_BACKOFF_DEFAULT_MS, "1s", NULL, NULL,
     "a model whose start failed is refused this long (doubled per failure in a row, up to 60 s)", NULL}};
/* Global keys read by index (test_serve_devmem and test_serve_memory check the names). */
enum { RSRV_GK_VRAM_MARGIN = 22, RSRV_GK_STATE_DIR = 23, RSRV_GK_START_BACKOFF = 24 };
static const rsrv_key rsrv_model_keys[] = {
    {"model", RSRV_KIND_PATH, RSRV_KF_PROCESS, RSRV_M(model), 0, 0, 0, NULL, NULL, NULL,
     "the GGUF file, run as: llama_server -m MODEL --host 127.0.0.1 --port P [-c] [-np] [-ngl] --alias ID -lv 4 ARGS",
     "/models/chat-8b.gguf"},
    {"command", RSRV_KIND_WORDS, RSRV_KF_PROCESS, RSRV_M(command), 1, RSRV_MAX_ARGS, 0, NULL, NULL, NULL,
     "or a whole command line instead of llama_server; it listens on {port} and answers GET /health",
     "/opt/bin/srv --port {port} --weights {model}"},
    {"args", RSRV_KIND_WORDS, RSRV_KF_PROCESS, RSRV_M(args), 0, RSRV_MAX_ARGS, 0, NULL, NULL, "--model-args",
     "extra arguments for this model, after the global args (default none)", "--jinja -fa on"},
    {"ctx", RSRV_KIND_INT, RSRV_KF_PROCESS, RSRV_M(ctx), 1, (uint64_t)1 << 40, 0, NULL, NULL, "--ctx",
     "context size, passed as -c (default: not passed)", "8192"},
    {"parallel", RSRV_KIND_INT, RSRV_KF_PROCESS, RSRV_M(parallel), 1, 256, 0, NULL, NULL, "--parallel",
     "slots, passed as -np; also the most requests sent to it at once (default: not passed)", "4"},
    {"ngl", RSRV_KIND_NGL, RSRV_KF_PROCESS, RSRV_M(ngl), 0, 100000, 0, NULL, NULL, "--ngl",
     "GPU layers, passed as -ngl: a number, auto or all (default: not passed)", "99"},
    {"reserve", RSRV_KIND_SIZE, RSRV_KF_PROCESS, RSRV_M(reserve_bytes), 0, 0, 0, "0", NULL, "--reserve",
     "bytes counted against vram_budget while it runs", NULL},
    {"ttl", RSRV_KIND_DURATION, 0, RSRV_M(ttl_ms), 0, 0, 0, "0", "never unloaded for idleness", "--ttl",
     "stopped after this long idle; 0 = never", NULL},
    {"pinned", RSRV_KIND_BOOL, 0, RSRV_M(pinned), 0, 0, 0, "false", NULL, "--pinned",
     "never evicted, started at boot, listed with the tag pinned:true", NULL},
    {"aliases", RSRV_KIND_ALIASES, 0, RSRV_M(aliases), 0, RSRV_MAX_ALIASES, 0, NULL, NULL, "--aliases",
     "other names that route to this model (default none)", "chat, default"},
    {"env", RSRV_KIND_ENV, RSRV_KF_PROCESS, RSRV_M(env), 0, RSRV_MAX_ENV, 0, NULL, NULL, "--env",
     "the child's environment on top of rsd-serve's: NAME=VALUE, comma separated (default none)",
     "CUDA_VISIBLE_DEVICES=0"},
    {"preload", RSRV_KIND_BOOL, 0, RSRV_M(preload), 0, 0, 0, "false", NULL, "--preload",
     "started at boot, but evicted like any other", NULL},
    {"max_queue", RSRV_KIND_QUEUE, 0, RSRV_M(max_queue), 1, RSRV_MAX_QUEUE_MAX, 0, "4096", NULL, "--model-max-queue",
     "requests waiting for this model (at most the global max_queue)", NULL},
    {"session_affinity", RSRV_KIND_BOOL, 0, RSRV_M(session_affinity), 0, 0, 0, NULL, NULL, "--session-affinity",
     "a session's requests go to the slot holding its KV cache (default false)", "true"},
    {"session_erase", RSRV_KIND_BOOL, 0, RSRV_M(session_erase), 0, 0, 0, NULL, NULL, "--session-erase",
     "with session_affinity: erase a slot before another session gets it (default false)", "true"}};
#undef RSRV_G
#undef RSRV_M
/* Model keys read by index (rsrv_check's messages point at their lines). */
enum { RSRV_MK_MODEL = 0, RSRV_MK_COMMAND = 1, RSRV_MK_RESERVE = 6, RSRV_MK_PINNED = 8 };
#define RSRV_NGLOBAL_KEYS ((int)(sizeof rsrv_global_keys / sizeof rsrv_global_keys[0]))
#define RSRV_NMODEL_KEYS ((int)(sizeof rsrv_model_keys / sizeof rsrv_model_keys[0]))
typedef char rsrv_keys_fit_seen[RSRV_NGLOBAL_KEYS <= (int)RSRV_KEYS_MAX && RSRV_NMODEL_KEYS <= (int)RSRV_KEYS_MAX ? 1 : -1];

/* One env entry NAME=VALUE: NAME is [A-Za-z_][A-Za-z0-9_]*. */
RSRV_FN bool rsrv_env_entry_ok(const char *s, size_t n) {
    size_t i;
    const char *eq = (const char *)memchr(s, '=', n);
    if (!eq || eq == s) return false;
    for (i = 0; s + i < eq; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || (i && c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* Splits an env value ("A=1, B=x y") at commas into "NAME=VALUE" strings (trimmed) in
   buf, pointers in out[0..cap-1] then NULL. The count, or -1 (a bad entry, too many). */
RSRV_FN int rsrv_env_split(const char *v, char *buf, size_t buf_cap, const char **out, int cap) {
    size_t i = 0, n = strlen(v), o = 0;
    int k = 0;
    while (i <= n) {
        size_t j = i, en;
        const char *e;
        while (j < n && v[j] != ',') j++;
        en = j - i;
        e = rsrv_trim(v + i, &en);
        if (en) {
            if (!rsrv_env_entry_ok(e, en) || k + 1 >= cap || o + en + 1 > buf_cap) return -1;
            memcpy(buf + o, e, en);
            buf[o + en] = 0;
            out[k++] = buf + o;
            o += en + 1;
        }
        i = j + 1;
    }
    if (cap > 0) out[k] = NULL;
    return k;
}

/* "a, b, c": the names of keys, for an error message (cut short at cap). */
RSRV_FN const char *rsrv_key_list(const rsrv_key *keys, int nkeys, char *out, size_t cap) {
    size_t n = 0;
    int i;
    out[0] = 0;
    for (i = 0; i < nkeys && n < cap; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", keys[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
    return out;
}

RSRV_FN int rsrv_key_index(const rsrv_key *keys, int nkeys, const char *k, size_t n) {
    int i;
    for (i = 0; i < nkeys; i++)
        if (strlen(keys[i].name) == n && !memcmp(keys[i].name, k, n)) return i;
    return -1;
}

/* Keeps a size or duration as written (for rsrv_write_ini). */
RSRV_FN void rsrv_keep_text(char *dst, const char *v, size_t n) {
    if (n < RSRV_TEXT_MAX) rsrv_cpy(dst, RSRV_TEXT_MAX, v, n);
    else dst[0] = 0;
}

/* Row k's field, of model m (a model key) or of c (m NULL, a global key). */
RSRV_FN char *rsrv_field(rsrv_config *c, rsrv_model *m, const rsrv_key *k) {
    return (m ? (char *)m : (char *)c) + k->off;
}
RSRV_FN const char *rsrv_cfield(const rsrv_config *c, const rsrv_model *m, const rsrv_key *k) {
    return (m ? (const char *)m : (const char *)c) + k->off;
}

/* Where row k keeps its value as written (a size or duration; "" = not kept). */
RSRV_FN char *rsrv_text(rsrv_config *c, rsrv_model *m, const rsrv_key *k) {
    return m ? m->text[k - rsrv_model_keys] : c->text[k - rsrv_global_keys];
}

/* A number field (bool, 32 or 64 bits), read and written. */
RSRV_FN uint64_t rsrv_field_get(const char *f, size_t size) {
    uint32_t v32;
    uint64_t v64;
    bool b;
    if (size == sizeof b) { memcpy(&b, f, sizeof b); return b; }
    if (size == sizeof v32) { memcpy(&v32, f, sizeof v32); return v32; }
    memcpy(&v64, f, sizeof v64);
    return v64;
}
RSRV_FN void rsrv_field_put(char *f, size_t size, uint64_t v) {
    uint32_t v32 = (uint32_t)v;
    bool b = v != 0;
    if (size == sizeof b) memcpy(f, &b, sizeof b);
    else if (size == sizeof v32) memcpy(f, &v32, sizeof v32);
    else memcpy(f, &v, sizeof v);
}

RSRV_FN const char *rsrv_fmt_size(uint64_t v, char *buf, size_t cap);
RSRV_FN const char *rsrv_fmt_duration(uint32_t ms, char *buf, size_t cap);
#define RSRV_SHOWN(n) (int)((n) > 64 ? 64 : (n)) /* a bad value, quoted in a message */

/* ---- one parser per kind: value v[0..n) into row k's field, false with err set ------- */
/* INT, QUEUE: a decimal from lo to hi. */
RSRV_FN bool rsrv_kind_int(rsrv_config *c, rsrv_model *m, const rsrv_key *k, const char *v, size_t n, char *err,
                           size_t ecap) {
    uint64_t x;
    if (!rsrv_parse_u64(v, n, k->hi, &x) || x < k->lo) {
        snprintf(err, ecap, "%s must be an integer from %llu to %llu", k->name, (unsigned long long)k->lo,
                 (unsigned long long)k->hi);
        return false;
    }
    rsrv_field_put(rsrv_field(c, m, k), k->size, x);
    return true;
}

/* SIZE, BUDGET (or auto), MARGIN (sets vram_margin_set), SIZE_OFF (or off): bytes, at least lo. */
RSRV_FN bool rsrv_kind_size(rsrv_config *c, rsrv_model *m, const rsrv_key *k, const char *v, size_t n, char *err,
                            size_t ecap) {
    bool word = (k->kind == RSRV_KIND_BUDGET && n == 4 && !memcmp(v, "auto", 4)) ||
                (k->kind == RSRV_KIND_SIZE_OFF && n == 3 && !memcmp(v, "off", 3));
    uint64_t x = 0;
    char lo[32], hi[32];
    rsrv_keep_text(rsrv_text(c, m, k), v, n);
    if (!word && (!rsrv_parse_size(v, n, &x) || x < k->lo)) {
        snprintf(err, ecap, "%s: bad size '%.*s' (bytes, with K/M/G/T, %s to %s%s)", k->name, RSRV_SHOWN(n), v,
                 rsrv_fmt_size(k->lo, lo, sizeof lo), rsrv_fmt_size(RSD_POOL_MAX_BYTES, hi, sizeof hi),
                 k->kind == RSRV_KIND_BUDGET ? ", or auto" : k->kind == RSRV_KIND_SIZE_OFF ? ", or off" : "");
        return false;
    }
    if (k->kind == RSRV_KIND_BUDGET) c->vram_budget_auto = word; /* auto: rsd-serve reads the device */
    if (k->kind == RSRV_KIND_SIZE_OFF) c->kv_off = word;
    if (k->kind == RSRV_KIND_MARGIN) c->vram_margin_set = true;
    rsrv_field_put(rsrv_field(c, m, k), k->size, x);
    return true;
}

/* DURATION: at least lo milliseconds, or 0 where the row says what 0 means. */
RSRV_FN bool rsrv_kind_duration(rsrv_config *c, rsrv_model *m, const rsrv_key *k, const char *v, size_t n, char *err,
                                size_t ecap) {
    uint32_t ms;
    char lo[32];
    rsrv_keep_text(rsrv_text(c, m, k), v, n);
    if (!rsrv_parse_duration(v, n, &ms) || (ms < k->lo && !(ms == 0 && k->zero))) {
        snprintf(err, ecap, "%s: bad duration '%.*s' (seconds, or a number with ms/s/m/h%s%s%s%s)", k->name,
                 RSRV_SHOWN(n), v, k->zero ? "; 0 = " : "", k->zero ? k->zero : "",
                 !k->lo ? "" : k->zero ? ", at least " : "; at least ",
                 k->lo ? rsrv_fmt_duration((uint32_t)k->lo, lo, sizeof lo) : "");
        return false;
    }
    rsrv_field_put(rsrv_field(c, m, k), k->size, ms);
    return true;
}

RSRV_FN bool rsrv_kind_bool(rsrv_config *c, rsrv_model *m, const rsrv_key *k, const char *v, size_t n, char *err,
                            size_t ecap) {
    bool b;
    if (!rsrv_parse_bool(v, n, &b)) {
        snprintf(err, ecap, "%s must be true or false", k->name);
        return false;
    }
    rsrv_field_put(rsrv_field(c, m, k), k->size, b);
    return true;
}

/* The string kinds: PATH (not empty), PATH_OFF (off = ""), WORDS (lo..hi words), PROGRAM
   (words, a program first), SECRET, CORS, NGL (a number up to hi, auto or all), ENV. */
RSRV_FN bool rsrv_kind_string(rsrv_config *c, rsrv_model *m, const rsrv_key *k, const char *v, size_t n, char *err,
                              size_t ecap) {
    char *dst = rsrv_field(c, m, k), buf[RSRV_CMD_MAX];
    const char *argv[RSRV_MAX_ARGS + 1];
    uint64_t x;
    int argc;
    if (k->kind == RSRV_KIND_PATH_OFF && n == 3 && !memcmp(v, "off", 3)) n = 0;
    if ((k->kind == RSRV_KIND_PATH || k->kind == RSRV_KIND_PROGRAM) && !n) {
        snprintf(err, ecap, "%s needs a path", k->name);
        return false;
    }
    if (k->kind == RSRV_KIND_SECRET && !rsrv_key_ok(v, n)) {
        snprintf(err, ecap, "%s must be 1 to %d printable bytes without blanks", k->name, (int)k->size - 1);
        return false;
    }
    if (k->kind == RSRV_KIND_CORS && !rsrv_cors_ok(v, n)) {
        snprintf(err, ecap, "%s: '%.*s' is neither * nor a list of origins such as "
                 "https://app.example, http://localhost:3000", k->name, RSRV_SHOWN(n), v);
        return false;
    }
    if (k->kind == RSRV_KIND_NGL && !((n == 4 && !memcmp(v, "auto", 4)) || (n == 3 && !memcmp(v, "all", 3)) ||
                                      rsrv_parse_u64(v, n, k->hi, &x))) {
        snprintf(err, ecap, "%s must be a number, auto or all (a number from 0 to %llu)", k->name, (unsigned long long)k->hi);
        return false;
    }
    if (!rsrv_set_str(dst, k->size, v, n, k->name, err, ecap)) return false;
    if (k->kind == RSRV_KIND_WORDS || k->kind == RSRV_KIND_PROGRAM) {
        argc = rsrv_split(dst, buf, sizeof buf, argv, (int)k->hi + 1);
        if (argc < 0 || (uint64_t)argc < k->lo) {
            if (k->kind == RSRV_KIND_PROGRAM)
                snprintf(err, ecap, "%s: '%.*s' is no program (an unterminated quote, a trailing backslash, nothing "
                         "but blanks, or more than %d words)", k->name, RSRV_SHOWN(n), v, (int)k->hi);
            else if (argc < 0)
                snprintf(err, ecap, "%s: unbalanced quotes, a trailing backslash or more than %d words", k->name,
                         (int)k->hi);
            else snprintf(err, ecap, "%s: empty command", k->name);
            return false;
        }
    }
    if (k->kind == RSRV_KIND_ENV && rsrv_env_split(dst, buf, sizeof buf, argv, (int)k->hi + 1) < 0) {
        snprintf(err, ecap, "%s: expected NAME=VALUE, NAME2=VALUE2 (at most %d; NAME is letters, digits, _)", k->name,
                 (int)k->hi);
        dst[0] = 0;
        return false;
    }
    return true;
}

/* LISTEN: HOST:PORT, [V6]:PORT or PORT. */
RSRV_FN bool rsrv_kind_listen(rsrv_config *c, rsrv_model *m, const rsrv_key *k, const char *v, size_t n, char *err,
                              size_t ecap) {
    (void)m;
    if (!rsrv_parse_listen(v, n, c->listen_host, sizeof c->listen_host, &c->listen_port)) {
        snprintf(err, ecap, "%s: bad address '%.*s' (HOST:PORT, [V6]:PORT or PORT; HOST an IPv4 address or a host "
                 "name)", k->name, RSRV_SHOWN(n), v);
        return false;
    }
    return true;
}

/* NAMES (lock_models: at least one), ALIASES (unique across models): names separated by
   commas, at most hi. */
RSRV_FN bool rsrv_kind_names(rsrv_config *c, rsrv_model *m, const rsrv_key *k, const char *v, size_t n, char *err,
                             size_t ecap) {
    bool alias = k->kind == RSRV_KIND_ALIASES;
    char(*list)[RSRV_ID_MAX] = alias ? m->aliases : c->lock_models;
    int *count = alias ? &m->naliases : &c->nlock;
    size_t i = 0;
    *count = 0;
    while (i <= n) {
        size_t j = i, an;
        const char *a;
        int other, d;
        while (j < n && v[j] != ',') j++;
        an = j - i;
        a = rsrv_trim(v + i, &an);
        i = j + 1;
        if (!an) continue;
        if (!rsrv_name_ok(a, an)) {
            if (alias) snprintf(err, ecap, "bad alias '%.*s'", RSRV_SHOWN(an), a);
            else snprintf(err, ecap, "%s: bad model name '%.*s'", k->name, RSRV_SHOWN(an), a);
            return false;
        }
        for (d = 0; d < *count; d++)
            if (strlen(list[d]) == an && !memcmp(list[d], a, an)) break;
        other = alias ? rsrv_find(c, a, an) : -1;
        if (alias && (other >= 0 || d < *count || (strlen(m->id) == an && !memcmp(m->id, a, an)))) {
            snprintf(err, ecap, "alias '%.*s' is already a model id or alias%s%s", (int)an, a, other >= 0 ? " of " : "",
                     other >= 0 ? c->models[other].id : "");
            return false;
        }
        if (d < *count) {
            snprintf(err, ecap, "%s: '%.*s' is listed twice", k->name, (int)an, a);
            return false;
        }
        if ((uint64_t)*count >= k->hi) {
            snprintf(err, ecap, "%s: too many names (at most %d)", k->name, (int)k->hi);
            return false;
        }
        rsrv_cpy(list[(*count)++], RSRV_ID_MAX, a, an);
    }
    if (!alias && !*count) { snprintf(err, ecap, "%s needs at least one model name", k->name); return false; }
    return true;
}

/* Sets row k (of m, or of c when m is NULL) to v[0..n). false with err set ("KEY ..."). */
RSRV_FN bool rsrv_set_key(rsrv_config *c, rsrv_model *m, const rsrv_key *k, const char *v, size_t n, char *err,
                          size_t ecap) {
    switch (k->kind) {
    case RSRV_KIND_INT:
    case RSRV_KIND_QUEUE: return rsrv_kind_int(c, m, k, v, n, err, ecap);
    case RSRV_KIND_SIZE:
    case RSRV_KIND_BUDGET:
    case RSRV_KIND_MARGIN:
    case RSRV_KIND_SIZE_OFF: return rsrv_kind_size(c, m, k, v, n, err, ecap);
    case RSRV_KIND_DURATION: return rsrv_kind_duration(c, m, k, v, n, err, ecap);
    case RSRV_KIND_BOOL: return rsrv_kind_bool(c, m, k, v, n, err, ecap);
    case RSRV_KIND_LISTEN: return rsrv_kind_listen(c, m, k, v, n, err, ecap);
    case RSRV_KIND_NAMES:
    case RSRV_KIND_ALIASES: return rsrv_kind_names(c, m, k, v, n, err, ecap);
    default: return rsrv_kind_string(c, m, k, v, n, err, ecap);
    }
}
/* A model section is complete: it needs model or command. */
RSRV_FN bool rsrv_model_done(const rsrv_model *m, char *err, size_t ecap) {
    if (!m->model[0] && !m->command[0]) {
        snprintf(err, ecap, "model '%s' needs `model = PATH` or `command = ...`", m->id);
        return false;
    }
    return true;
}

/* Parses an INI text into c (on top of what c holds: call rsrv_config_init first).
   0, or -1 with err = "file:line: message". */
RSRV_FN int rsrv_parse_ini(rsrv_config *c, const char *text, size_t len, const char *file, char *err,
                           size_t ecap) {
    char msg[RSRV_MSG_MAX];
    size_t pos = 0;
    int line = 0, section_line = 0;
    rsrv_model *cur = NULL;
    bool global_seen_section = false;
    if (!file) file = "config";
    if (!text && len) { snprintf(err, ecap, "%s: no text", file); return -1; }
    while (pos < len) {
        size_t end = pos, n, kn, vn;
        const char *s, *eq, *k, *v;
        while (end < len && text[end] != '\n') end++;
        line++;
        s = text + pos;
        n = end - pos;
        pos = end + 1;
        if (n >= RSRV_LINE_MAX) { snprintf(msg, sizeof msg, "line too long (at most %d bytes)", RSRV_LINE_MAX - 1); goto fail; }
        if (memchr(s, 0, n)) { snprintf(msg, sizeof msg, "NUL byte in the line"); goto fail; }
        s = rsrv_trim(s, &n);
        if (line == 1 && n >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB && (unsigned char)s[2] == 0xBF) {
            s += 3;
            n -= 3;
            s = rsrv_trim(s, &n);
        }
        if (!n || s[0] == '#' || s[0] == ';') continue;
        for (kn = 1; kn < n; kn++) /* " # comment" after a blank ends the line */
            if (s[kn] == '#' && (s[kn - 1] == ' ' || s[kn - 1] == '\t')) {
                n = kn;
                s = rsrv_trim(s, &n);
                break;
            }
        if (s[0] == '[') {
            const char *name;
            size_t nn;
            if (s[n - 1] != ']') { snprintf(msg, sizeof msg, "a section header ends with ']'"); goto fail; }
            name = s + 1;
            nn = n - 2;
            name = rsrv_trim(name, &nn);
            if (cur && !rsrv_model_done(cur, msg, sizeof msg)) { line = section_line; goto fail; }
            cur = NULL;
            if (nn == 6 && !memcmp(name, "global", 6)) {
                if (global_seen_section) { snprintf(msg, sizeof msg, "a second [global] section"); goto fail; }
                global_seen_section = true;
            } else if (nn > 5 && !memcmp(name, "model", 5) && rsrv_space(name[5])) {
                size_t idn = nn - 5;
                const char *id = rsrv_trim(name + 5, &idn);
                cur = rsrv_add_model(c, id, idn, line, msg, sizeof msg);
                if (!cur) goto fail;
                section_line = line;
            } else {
                snprintf(msg, sizeof msg, "unknown section [%.*s] (use [global] or [model ID])", (int)(nn > 64 ? 64 : nn), name);
                goto fail;
            }
            continue;
        }
        eq = (const char *)memchr(s, '=', n);
        if (!eq) { snprintf(msg, sizeof msg, "expected `key = value`, '[global]' or '[model ID]'"); goto fail; }
        kn = (size_t)(eq - s);
        k = rsrv_trim(s, &kn);
        vn = n - (size_t)(eq - s) - 1;
        v = rsrv_trim(eq + 1, &vn);
        if (!kn) { snprintf(msg, sizeof msg, "missing key before '='"); goto fail; }
        {
            const rsrv_key *keys = cur ? rsrv_model_keys : rsrv_global_keys;
            int nkeys = cur ? RSRV_NMODEL_KEYS : RSRV_NGLOBAL_KEYS, key = rsrv_key_index(keys, nkeys, k, kn);
            uint32_t *seen = cur ? &cur->seen : &c->seen;
            if (key < 0) {
                char known[1024];
                /* cut at sizeof msg when the key list is long (the return value is looked
                   at, so gcc's -O1 format-truncation check does not fire on the cross builds) */
                if (snprintf(msg, sizeof msg, "unknown %skey '%.*s'%s%s%s (%s)", cur ? "" : "global ",
                             RSRV_SHOWN(kn), k, cur ? " in [model " : "", cur ? cur->id : "", cur ? "]" : "",
                             rsrv_key_list(keys, nkeys, known, sizeof known)) < 0)
                    msg[0] = '\0';
                goto fail;
            }
            if (*seen & (1u << key)) { snprintf(msg, sizeof msg, "duplicate key '%s'", keys[key].name); goto fail; }
            *seen |= 1u << key;
            (cur ? cur->key_line : c->key_line)[key] = line;
            if (!rsrv_set_key(c, cur, &keys[key], v, vn, msg, sizeof msg)) goto fail;
        }
    }
    if (cur && !rsrv_model_done(cur, msg, sizeof msg)) { line = section_line; goto fail; }
    return 0;
fail:
    snprintf(err, ecap, "%s:%d: %s", file, line, msg);
    return -1;
}

/* Parses command-line flags (argv[0] skipped) on top of c. 0, or -1 with err set
   ("--flag: message"). Non-config flags land in *o. */
RSRV_FN int rsrv_parse_args(rsrv_config *c, rsrv_opts *o, int argc, char **argv, char *err, size_t ecap) {
    char msg[RSRV_MSG_MAX];
    rsrv_model *cur = NULL;
    int i, k;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const rsrv_key *row = NULL;
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) { o->verbose = true; continue; }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) { o->quiet = true; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { o->help = true; continue; }
        for (k = 0; k < RSRV_NGLOBAL_KEYS + RSRV_NMODEL_KEYS && !row; k++) { /* k ends one past the row */
            const rsrv_key *r = k < RSRV_NGLOBAL_KEYS ? &rsrv_global_keys[k] : &rsrv_model_keys[k - RSRV_NGLOBAL_KEYS];
            if (r->flag && !strcmp(a, r->flag)) row = r;
        }
        if ((row && k > RSRV_NGLOBAL_KEYS && !cur) || (!cur && !strcmp(a, "--no-session-erase"))) {
            snprintf(err, ecap, "%s: comes after --model or --command", a);
            return -1;
        }
        if (!strcmp(a, "--no-session-erase")) { cur->session_erase = false; continue; }
        if (row && row->kind == RSRV_KIND_BOOL) { /* a flag without a value: true */
            (void)rsrv_set_key(c, cur, row, "true", 4, msg, sizeof msg);
            continue;
        }
        if (!v) { snprintf(err, ecap, "%s: needs a value (or is unknown; see --help)", a); return -1; }
        if (!strcmp(a, "--config")) { o->config_path = v; i++; continue; }
        if (!strcmp(a, "--model") || !strcmp(a, "--command")) {
            const char *eq = strchr(v, '=');
            if (!eq) { snprintf(err, ecap, "%s: expected ID=%s", a, a[2] == 'm' ? "PATH" : "COMMAND"); return -1; }
            cur = rsrv_add_model(c, v, (size_t)(eq - v), 0, msg, sizeof msg);
            if (!cur || !rsrv_set_key(c, cur, &rsrv_model_keys[a[2] == 'm' ? RSRV_MK_MODEL : RSRV_MK_COMMAND], eq + 1,
                                      strlen(eq + 1), msg, sizeof msg)) {
                snprintf(err, ecap, "%s: %s", a, msg);
                return -1;
            }
            i++;
            continue;
        }
        if (!row) { snprintf(err, ecap, "%s: unknown flag (see --help)", a); return -1; }
        if (!rsrv_set_key(c, k > RSRV_NGLOBAL_KEYS ? cur : NULL, row, v, strlen(v), msg, sizeof msg)) {
            snprintf(err, ecap, "%s: %s", a, msg);
            return -1;
        }
        i++;
    }
    return 0;
}

/* Effective values: what a 0 (unset) means. */
RSRV_FN uint32_t rsrv_eff_start_backoff(const rsrv_config *c) {
    return c->start_backoff_ms ? c->start_backoff_ms : (uint32_t)RSRV_START_BACKOFF_DEFAULT_MS;
}

RSRV_FN uint32_t rsrv_eff_max_wait(const rsrv_config *c) {
    return c->max_wait_ms ? c->max_wait_ms : (uint32_t)RSRV_MAX_WAIT_DEFAULT_MS;
}
RSRV_FN uint32_t rsrv_eff_send_timeout(const rsrv_config *c) {
    return c->send_timeout_ms ? c->send_timeout_ms : (uint32_t)RSRV_SEND_TIMEOUT_DEFAULT_MS;
}
RSRV_FN uint64_t rsrv_eff_vram_margin(const rsrv_config *c) {
    return c->vram_margin_set ? c->vram_margin_bytes : RSRV_VRAM_MARGIN_DEFAULT;
}
/* vram_budget = auto: the budget a device reading gives (total less the margin); 0 when
   the margin leaves nothing (rsd-serve refuses that rather than count models only). */
RSRV_FN uint64_t rsrv_auto_budget(const rsrv_config *c, uint64_t device_total) {
    uint64_t m = rsrv_eff_vram_margin(c), b = device_total > m ? device_total - m : 0;
    return b > RSD_POOL_MAX_BYTES ? RSD_POOL_MAX_BYTES : b;
}
RSRV_FN int rsrv_eff_max_queue(const rsrv_config *c) { return c->max_queue ? c->max_queue : RSRV_MAX_QUEUE_DEFAULT; }
RSRV_FN int rsrv_eff_wd_failures(const rsrv_config *c) {
    return c->watchdog_failures ? c->watchdog_failures : RSRV_WD_FAILURES_DEFAULT;
}
RSRV_FN int rsrv_eff_wd_errors(const rsrv_config *c) { return c->watchdog_errors ? c->watchdog_errors : RSRV_WD_ERRORS_DEFAULT; }
RSRV_FN int rsrv_eff_wd_restarts(const rsrv_config *c) {
    return c->watchdog_restarts ? c->watchdog_restarts : RSRV_WD_RESTARTS_DEFAULT;
}
RSRV_FN int rsrv_eff_model_queue(const rsrv_config *c, const rsrv_model *m) {
    int all = rsrv_eff_max_queue(c);
    return m->max_queue && m->max_queue < all ? m->max_queue : all;
}

/* A size in the largest binary unit that divides it exactly ("24G", "512M", "100"). */
RSRV_FN const char *rsrv_fmt_size(uint64_t v, char *buf, size_t cap) {
    static const char units[] = "TGMK";
    int i;
    for (i = 0; v && i < 4; i++) {
        int sh = 40 - 10 * i;
        if (!(v & (((uint64_t)1 << sh) - 1))) {
            snprintf(buf, cap, "%llu%c", (unsigned long long)(v >> sh), units[i]);
            return buf;
        }
    }
    snprintf(buf, cap, "%llu", (unsigned long long)v);
    return buf;
}

/* A duration in the largest unit that divides it exactly ("5m", "30s", "250ms", "0"). */
RSRV_FN const char *rsrv_fmt_duration(uint32_t ms, char *buf, size_t cap) {
    if (ms && ms % 3600000u == 0) snprintf(buf, cap, "%luh", (unsigned long)(ms / 3600000u));
    else if (ms && ms % 60000u == 0) snprintf(buf, cap, "%lum", (unsigned long)(ms / 60000u));
    else if (ms && ms % 1000u == 0) snprintf(buf, cap, "%lus", (unsigned long)(ms / 1000u));
    else if (ms) snprintf(buf, cap, "%lums", (unsigned long)ms);
    else snprintf(buf, cap, "0");
    return buf;
}

/* text when it reads as the size (or duration) v, else v in the largest exact unit. */
RSRV_FN const char *rsrv_written_size(const char *text, uint64_t v, char *buf, size_t cap) {
    uint64_t t;
    if (text[0] && rsrv_parse_size(text, strlen(text), &t) && t == v) return text;
    return rsrv_fmt_size(v, buf, cap);
}
RSRV_FN const char *rsrv_written_duration(const char *text, uint32_t v, char *buf, size_t cap) {
    uint32_t t;
    if (text[0] && rsrv_parse_duration(text, strlen(text), &t) && t == v) return text;
    return rsrv_fmt_duration(v, buf, cap);
}

/* Row k's effective value, for a number kind: what a 0 stands for (RSRV_KF_ZERO), the
   model's queue as the global max_queue caps it, the margin in effect. */
RSRV_FN uint64_t rsrv_key_value(const rsrv_config *c, const rsrv_model *m, const rsrv_key *k) {
    uint64_t v;
    if (k->kind == RSRV_KIND_QUEUE) return (uint64_t)rsrv_eff_model_queue(c, m);
    if (k->kind == RSRV_KIND_MARGIN) return rsrv_eff_vram_margin(c);
    v = rsrv_field_get(rsrv_cfield(c, m, k), k->size);
    return !v && (k->flags & RSRV_KF_ZERO) ? k->dv : v;
}

/* Whether rsrv_write_ini writes row k: a key with a default always (vram_margin with
   vram_budget = auto, the kv keys with kv_cache_dir), one without only when set. */
RSRV_FN bool rsrv_key_shown(const rsrv_config *c, const rsrv_model *m, const rsrv_key *k) {
    const char *f = rsrv_cfield(c, m, k);
    if (k->kind == RSRV_KIND_MARGIN) return c->vram_budget_auto;
    if ((k->flags & RSRV_KF_KV) && !c->kv_cache_dir[0]) return false;
    if (k->def) return true;
    if (k->kind == RSRV_KIND_NAMES) return c->nlock > 0;
    if (k->kind == RSRV_KIND_ALIASES) return m->naliases > 0;
    if (k->kind < RSRV_KIND_PATH) return rsrv_field_get(f, k->size) != 0;
    return f[0] != 0;
}

/* Appends printf's output at *o; false when it does not fit cap. */
RSRV_FN bool rsrv_put(char *buf, size_t cap, size_t *o, const char *fmt, ...) {
    size_t room = *o < cap ? cap - *o : 0;
    va_list ap;
    int w;
    va_start(ap, fmt);
    w = vsnprintf(buf + *o, room, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= room) return false;
    *o += (size_t)w;
    return true;
}

/* Writes "key = value\n" for row k (when rsrv_key_shown): the effective value, a size or
   duration as it was written, and what a 0 means as a comment ("watchdog = 0 # off").
   false when it does not fit. */
RSRV_FN bool rsrv_write_key(const rsrv_config *c, const rsrv_model *m, const rsrv_key *k, char *buf, size_t cap,
                            size_t *o) {
    const char *f = rsrv_cfield(c, m, k), *text = m ? m->text[k - rsrv_model_keys] : c->text[k - rsrv_global_keys];
    uint64_t v = k->kind < RSRV_KIND_PATH ? rsrv_key_value(c, m, k) : 0;
    char t[32];
    bool ok;
    int i, n;
    if (!rsrv_key_shown(c, m, k)) return true;
    if (!rsrv_put(buf, cap, o, "%s =", k->name)) return false;
    switch (k->kind) {
    case RSRV_KIND_INT:
    case RSRV_KIND_QUEUE: ok = rsrv_put(buf, cap, o, " %llu", (unsigned long long)v); break;
    case RSRV_KIND_DURATION: ok = rsrv_put(buf, cap, o, " %s", rsrv_written_duration(text, (uint32_t)v, t, sizeof t)); break;
    case RSRV_KIND_BOOL: ok = rsrv_put(buf, cap, o, v ? " true" : " false"); break;
    case RSRV_KIND_SIZE:
    case RSRV_KIND_BUDGET:
    case RSRV_KIND_MARGIN:
    case RSRV_KIND_SIZE_OFF:
        if (k->kind == RSRV_KIND_BUDGET && c->vram_budget_auto) ok = rsrv_put(buf, cap, o, " auto");
        else if (k->kind == RSRV_KIND_SIZE_OFF && c->kv_off) ok = rsrv_put(buf, cap, o, " off");
        else ok = rsrv_put(buf, cap, o, " %s", rsrv_written_size(text, v, t, sizeof t));
        break;
    case RSRV_KIND_LISTEN: ok = rsrv_put(buf, cap, o, strchr(c->listen_host, ':') ? " [%s]:%d" : " %s:%d",
                                         c->listen_host, c->listen_port); break;
    case RSRV_KIND_NAMES:
    case RSRV_KIND_ALIASES:
        n = k->kind == RSRV_KIND_NAMES ? c->nlock : m->naliases;
        for (i = 0, ok = true; i < n && ok; i++)
            ok = rsrv_put(buf, cap, o, "%s%s", i ? ", " : " ", f + (size_t)i * RSRV_ID_MAX);
        break;
    default: /* a value that starts with '#' must not follow a blank (it would be a comment) */
        ok = rsrv_put(buf, cap, o, "%s%s", f[0] == '#' ? "" : " ", f);
        break;
    }
    if (ok && k->zero && !v && !(k->kind == RSRV_KIND_BUDGET && c->vram_budget_auto))
        ok = rsrv_put(buf, cap, o, " # %s", k->zero);
    return ok && rsrv_put(buf, cap, o, "\n");
}

/* Writes c back as an INI text that rsrv_parse_ini reads into the same configuration
   (rsrv_config_equal): each key of the tables, in their order, that has a default or is
   set (rsrv_write_key). Returns the length, or -1 when cap is too small. */
RSRV_FN int rsrv_write_ini(const rsrv_config *c, char *buf, size_t cap) {
    size_t o = 0;
    int i, k;
    if (!rsrv_put(buf, cap, &o, "[global]\n")) return -1;
    for (k = 0; k < RSRV_NGLOBAL_KEYS; k++)
        if (!rsrv_write_key(c, NULL, &rsrv_global_keys[k], buf, cap, &o)) return -1;
    for (i = 0; i < c->nmodels; i++) {
        if (!rsrv_put(buf, cap, &o, "\n[model %s]\n", c->models[i].id)) return -1;
        for (k = 0; k < RSRV_NMODEL_KEYS; k++)
            if (!rsrv_write_key(c, &c->models[i], &rsrv_model_keys[k], buf, cap, &o)) return -1;
    }
    return (int)o;
}

/* Row k for the example: its help line, then the key as rsrv_write_ini writes it, or,
   where it writes nothing, commented out with the row's example (or default). */
RSRV_FN bool rsrv_write_doc(const rsrv_config *c, const rsrv_model *m, const rsrv_key *k, char *buf, size_t cap,
                            size_t *o) {
    if (!rsrv_put(buf, cap, o, "# %s\n", k->help)) return false;
    if (rsrv_key_shown(c, m, k)) return rsrv_write_key(c, m, k, buf, cap, o);
    return rsrv_put(buf, cap, o, "# %s = %s\n", k->name, k->example ? k->example : k->def ? k->def : "");
}

/* Writes the example configuration (rsd-serve --example-config; installed as
   share/residency/serve.ini.example): what --check prints (rsrv_write_ini) for the default
   configuration with one model, every row of the key tables with its help line above it,
   and each key rsrv_write_ini leaves out commented out with an example value. c is scratch
   (rsrv_config_init'ed here). Returns the length, or -1 when cap is too small. */
RSRV_FN int rsrv_write_example(rsrv_config *c, const char *version, char *buf, size_t cap) {
    size_t o = 0;
    int k;
    char err[RSRV_ERR_MAX];
    rsrv_model *m;
    rsrv_config_init(c);
    m = rsrv_add_model(c, "example", 7, 0, err, sizeof err);
    if (!m) return -1;
    rsrv_cpy(m->model, sizeof m->model, "/models/example.gguf", 20);
    if (!rsrv_put(buf, cap, &o, "# rsd-serve %s: every configuration key with its default, as `rsd-serve --check` prints\n"
                  "# the configuration in effect (this file is `rsd-serve --example-config`). A key without a\n"
                  "# default is commented out with an example value. Sizes take K/M/G/T; durations are\n"
                  "# seconds or take ms/s/m/h. The flags of the command line apply on top of this file.\n"
                  "\n[global]\n", version))
        return -1;
    for (k = 0; k < RSRV_NGLOBAL_KEYS; k++)
        if (!rsrv_write_doc(c, NULL, &rsrv_global_keys[k], buf, cap, &o)) return -1;
    if (!rsrv_put(buf, cap, &o, "\n[model %s]\n", m->id)) return -1;
    for (k = 0; k < RSRV_NMODEL_KEYS; k++)
        if (!rsrv_write_doc(c, m, &rsrv_model_keys[k], buf, cap, &o)) return -1;
    return (int)o;
}

/* Whether row k has the same effective value in x of ca as in y of cb (x, y NULL for a
   global key). */
RSRV_FN bool rsrv_key_equal(const rsrv_config *ca, const rsrv_model *x, const rsrv_config *cb, const rsrv_model *y,
                            const rsrv_key *k) {
    const char *fa = rsrv_cfield(ca, x, k), *fb = rsrv_cfield(cb, y, k);
    int i, n;
    if ((k->flags & RSRV_KF_KV) && !ca->kv_cache_dir[0] && !cb->kv_cache_dir[0])
        return true; /* no kv cache in either: the key does nothing (and is not written) */
    switch (k->kind) {
    case RSRV_KIND_BUDGET:
        return ca->vram_budget_auto == cb->vram_budget_auto && (ca->vram_budget_auto || rsrv_key_value(ca, x, k) ==
                                                                                             rsrv_key_value(cb, y, k));
    case RSRV_KIND_MARGIN: return !ca->vram_budget_auto || rsrv_key_value(ca, x, k) == rsrv_key_value(cb, y, k);
    case RSRV_KIND_SIZE_OFF:
        return ca->kv_off == cb->kv_off && (ca->kv_off || rsrv_key_value(ca, x, k) == rsrv_key_value(cb, y, k));
    case RSRV_KIND_LISTEN: return !strcmp(ca->listen_host, cb->listen_host) && ca->listen_port == cb->listen_port;
    case RSRV_KIND_NAMES:
    case RSRV_KIND_ALIASES:
        n = k->kind == RSRV_KIND_NAMES ? ca->nlock : x->naliases;
        if (n != (k->kind == RSRV_KIND_NAMES ? cb->nlock : y->naliases)) return false;
        for (i = 0; i < n; i++)
            if (strcmp(fa + (size_t)i * RSRV_ID_MAX, fb + (size_t)i * RSRV_ID_MAX)) return false;
        return true;
    default:
        if (k->kind < RSRV_KIND_PATH) return rsrv_key_value(ca, x, k) == rsrv_key_value(cb, y, k);
        return !strcmp(fa, fb);
    }
}

/* Global row k of dst takes src's value (a reload keeping a key until a restart). */
RSRV_FN void rsrv_key_copy(rsrv_config *dst, const rsrv_config *src, const rsrv_key *k) {
    memcpy(rsrv_field(dst, NULL, k), rsrv_cfield(src, NULL, k), k->size);
    memcpy(dst->text[k - rsrv_global_keys], src->text[k - rsrv_global_keys], RSRV_TEXT_MAX);
    if (k->kind == RSRV_KIND_LISTEN) dst->listen_port = src->listen_port;
    if (k->kind == RSRV_KIND_NAMES) dst->nlock = src->nlock;
    if (k->kind == RSRV_KIND_BUDGET) dst->vram_budget_auto = src->vram_budget_auto;
    if (k->kind == RSRV_KIND_MARGIN) dst->vram_margin_set = src->vram_margin_set;
    if (k->kind == RSRV_KIND_SIZE_OFF) dst->kv_off = src->kv_off;
}

/* Would model x of ca run a different process than y of cb: a model key marked
   RSRV_KF_PROCESS (command line, model file, args, ctx, parallel, ngl, env, reservation),
   start_timeout, or for llama_server models the binary, the global args or whether its
   slots are erased (--slot-save-path)? (ttl, pin, aliases, preload and max_queue change
   nothing in the process.) */
RSRV_FN bool rsrv_model_process_differs(const rsrv_config *ca, const rsrv_model *x, const rsrv_config *cb,
                                        const rsrv_model *y) {
    int k;
    for (k = 0; k < RSRV_NMODEL_KEYS; k++)
        if ((rsrv_model_keys[k].flags & RSRV_KF_PROCESS) && !rsrv_key_equal(ca, x, cb, y, &rsrv_model_keys[k]))
            return true;
    for (k = 0; k < RSRV_NGLOBAL_KEYS; k++)
        if ((rsrv_global_keys[k].flags & (x->command[0] ? RSRV_KF_PROCESS : RSRV_KF_PROCESS | RSRV_KF_LLAMA)) &&
            !rsrv_key_equal(ca, NULL, cb, NULL, &rsrv_global_keys[k]))
            return true;
    return !x->command[0] && (x->session_affinity && x->session_erase) != (y->session_affinity && y->session_erase);
}

/* Same model configuration (effective values; `seen`, `line` aside)? */
RSRV_FN bool rsrv_model_equal(const rsrv_config *ca, const rsrv_model *x, const rsrv_config *cb, const rsrv_model *y) {
    int k;
    if (strcmp(x->id, y->id)) return false;
    for (k = 0; k < RSRV_NMODEL_KEYS; k++)
        if (!rsrv_key_equal(ca, x, cb, y, &rsrv_model_keys[k])) return false;
    return true;
}

/* Same configuration (effective values; the `seen` and `line` bookkeeping aside)? */
RSRV_FN bool rsrv_config_equal(const rsrv_config *a, const rsrv_config *b) {
    int i;
    if (a->nmodels != b->nmodels) return false;
    for (i = 0; i < RSRV_NGLOBAL_KEYS; i++)
        if (!rsrv_key_equal(a, NULL, b, NULL, &rsrv_global_keys[i])) return false;
    for (i = 0; i < a->nmodels; i++)
        if (!rsrv_model_equal(a, &a->models[i], b, &b->models[i])) return false;
    return true;
}

/* Where a model key was set, for messages: "FILE:LINE" from the file, "--model ID"
   from the flags. */
RSRV_FN void rsrv_where(const char *file, const rsrv_model *m, int key, char *out, size_t cap) {
    int line = m ? (key >= 0 && m->key_line[key] ? m->key_line[key] : m->line) : 0;
    if (line) snprintf(out, cap, "%s:%d", file ? file : "config", line);
    else if (m) snprintf(out, cap, "--%s %s", m->command[0] ? "command" : "model", m->id);
    else snprintf(out, cap, "flags");
}

/* The placeholders a command may use (rsd_procs_expand's; {extra} = the model's args). */
RSRV_FN bool rsrv_placeholder_known(const char *s, size_t n) {
    static const char *const names[] = {"model", "alias", "host", "port", "ctx", "parallel", "ngl", "name", "extra"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], s, n)) return true;
    return false;
}

/* Checks what parses but cannot work, each problem on its own line "WHERE: message\n"
   appended to out (WHERE = FILE:LINE, or the flag): an unknown {placeholder} in a
   command, a command without {port}, `model` and `command` in one section when the
   command has no {model}, more pinned models than max_models, a reserve above a
   vram_budget, a vram_margin without vram_budget = auto. Returns the number of problems. (Files are checked by the program.) */
RSRV_FN int rsrv_check(const rsrv_config *c, const char *file, char *out, size_t cap) {
    size_t o = strlen(out);
    int i, bad = 0, pinned = 0, last_pin = -1;
    char where[RSRV_PATH_MAX + 32];
#define RSRV_PROBLEM(...) do { int w_ = snprintf(out + o, o < cap ? cap - o : 0, __VA_ARGS__); \
        if (w_ > 0) { o = o + (size_t)w_ < cap ? o + (size_t)w_ : (cap ? cap - 1 : 0); } \
        bad++; } while (0)
    for (i = 0; i < c->nmodels; i++) {
        const rsrv_model *m = &c->models[i];
        if (m->pinned) { pinned++; last_pin = i; }
        if (m->command[0]) {
            const char *p = m->command, *e;
            bool port = false, model = false;
            rsrv_where(file, m, RSRV_MK_COMMAND, where, sizeof where);
            while ((p = strchr(p, '{')) != NULL) {
                if (p[1] == '{') { p += 2; continue; }
                e = strchr(p + 1, '}');
                if (!e) { RSRV_PROBLEM("%s: command: a '{' without its '}' (write {{ for a brace)\n", where); break; }
                if (!rsrv_placeholder_known(p + 1, (size_t)(e - p - 1)))
                    RSRV_PROBLEM("%s: command: unknown placeholder {%.*s} (known: {model} {alias} {host} {port} {ctx} "
                                 "{parallel} {ngl} {name} {extra})\n", where, (int)(e - p - 1 > 64 ? 64 : e - p - 1), p + 1);
                if (e - p - 1 == 4 && !memcmp(p + 1, "port", 4)) port = true;
                if (e - p - 1 == 5 && !memcmp(p + 1, "model", 5)) model = true;
                p = e + 1;
            }
            if (!port) RSRV_PROBLEM("%s: command has no {port}: it must listen on the port rsd-serve gives it\n", where);
            if (m->model[0] && !model) {
                rsrv_where(file, m, RSRV_MK_MODEL, where, sizeof where);
                RSRV_PROBLEM("%s: both `model` and `command` in [model %s]: the command runs instead of llama_server "
                             "and has no {model}, so the model file is never used\n", where, m->id);
            }
        }
        if (c->vram_budget_bytes && m->reserve_bytes > c->vram_budget_bytes) {
            char t1[32], t2[32];
            rsrv_where(file, m, RSRV_MK_RESERVE, where, sizeof where);
            RSRV_PROBLEM("%s: reserve %s is above vram_budget %s: model '%s' can never start\n", where,
                         rsrv_fmt_size(m->reserve_bytes, t1, sizeof t1), rsrv_fmt_size(c->vram_budget_bytes, t2, sizeof t2),
                         m->id);
        }
    }
    if (c->vram_margin_set && !c->vram_budget_auto) {
        if (c->key_line[RSRV_GK_VRAM_MARGIN])
            snprintf(where, sizeof where, "%s:%d", file ? file : "config", c->key_line[RSRV_GK_VRAM_MARGIN]);
        else snprintf(where, sizeof where, "flags");
        RSRV_PROBLEM("%s: vram_margin applies only with vram_budget = auto\n", where);
    }
    if (pinned > c->max_models) {
        rsrv_where(file, &c->models[last_pin], RSRV_MK_PINNED, where, sizeof where);
        RSRV_PROBLEM("%s: %d pinned models but max_models = %d: they cannot all be resident\n", where, pinned,
                     c->max_models);
    }
#undef RSRV_PROBLEM
    return bad;
}

/* ---- request body ------------------------------------------------------------------- */
/* End of the JSON string starting at s[i] == '"': index one past its closing quote, or 0. */
RSRV_FN size_t rsrv_str_end(const char *s, size_t n, size_t i) {
    for (i++; i < n; i++) {
        if (s[i] == '\\') { i++; continue; }
        if (s[i] == '"') return i + 1;
    }
    return 0;
}

/* Finds the top-level "model" member of a JSON object body without tokenizing the
   whole body (chat bodies can hold thousands of tokens): a linear scan of the top
   level, skipping nested values by bracket depth. When "model" appears more than once
   the last one counts, as in llama.cpp (its JSON library keeps the last duplicate).
   Returns 1 with the decoded string in out (NUL-terminated, *out_len its length), 0
   when there is no "model" member or the last one is not a string, -1 when the body
   is not a JSON object as far as the scan goes, -2 when the name does not fit cap.
   For valid JSON it agrees with rsd_json_parse and the last "model" member of the
   root (fuzzed). */
RSRV_FN int rsrv_body_member(const char *s, size_t n, const char *key, char *out, size_t cap, size_t *out_len);
RSRV_FN int rsrv_body_model(const char *s, size_t n, char *out, size_t cap, size_t *out_len) {
    return rsrv_body_member(s, n, "model", out, cap, out_len);
}

/* rsrv_body_model for any top-level string member `key` (e.g. "prompt_cache_key"). */
RSRV_FN int rsrv_body_member(const char *s, size_t n, const char *key, char *out, size_t cap, size_t *out_len) {
    size_t i = 0, len = 0;
    rsd_json_tok toks[2];
    rsd_json_doc doc;
    int found = 0; /* what the last "model" member so far gives: 1, 0 or -2 */
    if (out_len) *out_len = 0;
    if (cap) out[0] = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
    if (i >= n || s[i] != '{') return -1;
    i++;
    for (;;) {
        size_t ke, vs;
        bool is_model;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        if (i >= n) return -1;
        if (s[i] == '}') {
            if (found == 1 && out_len) *out_len = len;
            if (found != 1 && cap) out[0] = 0;
            return found;
        }
        if (s[i] == ',') { i++; continue; }
        if (s[i] != '"') return -1;
        ke = rsrv_str_end(s, n, i);
        if (!ke) return -1;
        if (rsd_json_parse(&doc, s + i, ke - i, toks, 2) != 1) return -1;
        is_model = rsd_json_str_eq(&doc, 0, key);
        i = ke;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        if (i >= n || s[i] != ':') return -1;
        i++;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        if (i >= n) return -1;
        vs = i;
        if (s[i] == '"') {
            size_t ve = rsrv_str_end(s, n, i);
            if (!ve) return -1;
            if (is_model) {
                if (rsd_json_parse(&doc, s + vs, ve - vs, toks, 2) != 1) return -1;
                found = rsd_json_str(&doc, 0, out, cap, &len) == RSD_OK ? 1 : -2;
            }
            i = ve;
        } else if (s[i] == '{' || s[i] == '[') {
            int depth = 0;
            for (; i < n; i++) {
                if (s[i] == '"') {
                    size_t e = rsrv_str_end(s, n, i);
                    if (!e) return -1;
                    i = e - 1;
                } else if (s[i] == '{' || s[i] == '[') depth++;
                else if (s[i] == '}' || s[i] == ']') {
                    if (--depth == 0) { i++; break; }
                }
            }
            if (depth) return -1;
            if (is_model) found = 0;
        } else {
            while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') i++;
            if (i == vs) return -1;
            if (is_model) found = 0;
        }
    }
}

#endif /* RSD_SERVE_H_INCLUDED */
