/* rsd_serve.h -- the testable core of examples/rsd-serve.c: its configuration (INI file
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
                                        starts again, before that slot's first request.
                                        Each file is keyed by the model file (path, size,
                                        mtime, a hash of its first 64 KiB), ctx, parallel,
                                        args and the llama_server path, and the child's
                                        build (/props build_info): anything else, a
                                        truncated file or a refused restore deletes it and
                                        the model starts cold (one log line, one kv_miss
                                        event). Default off (also: off)
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
   number with ms/s/m/h. Every model needs `model` or `command`. Ids and aliases are
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    RSRV_KV_SAVE_TIMEOUT_DEFAULT_MS = 5000 /* a stop's slot saves at most (kv_save_timeout) */
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

/* Bytes: digits with an optional K/M/G/T suffix (binary; "KB", "KiB", "k" all work)
   and an optional trailing B. Up to RSD_POOL_MAX_BYTES. */
RSRV_FN bool rsrv_parse_size(const char *s, size_t n, uint64_t *out) {
    size_t k = 0;
    uint64_t v, mul = 1;
    while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    if (!rsrv_parse_u64(s, k, RSD_POOL_MAX_BYTES, &v)) return false;
    if (k < n) {
        switch (s[k]) {
        case 'k': case 'K': mul = (uint64_t)1 << 10; k++; break;
        case 'm': case 'M': mul = (uint64_t)1 << 20; k++; break;
        case 'g': case 'G': mul = (uint64_t)1 << 30; k++; break;
        case 't': case 'T': mul = (uint64_t)1 << 40; k++; break;
        default: break;
        }
        if (mul > 1 && k < n && s[k] == 'i') k++;
        if (k < n && (s[k] == 'B' || s[k] == 'b')) k++;
        if (k != n) return false;
    }
    if (v && mul > RSD_POOL_MAX_BYTES / v) return false;
    *out = v * mul;
    return true;
}

/* Duration: seconds, or digits with ms/s/m/h. Up to 0xFFFFFFFE ms. */
RSRV_FN bool rsrv_parse_duration(const char *s, size_t n, uint32_t *ms) {
    size_t k = 0;
    uint64_t v, mul = 1000;
    while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    if (!rsrv_parse_u64(s, k, 0xFFFFFFFEu, &v)) return false;
    if (k < n) {
        size_t rest = n - k;
        if (rest == 2 && s[k] == 'm' && s[k + 1] == 's') mul = 1;
        else if (rest == 1 && s[k] == 's') mul = 1000;
        else if (rest == 1 && s[k] == 'm') mul = 60000;
        else if (rest == 1 && s[k] == 'h') mul = 3600000;
        else return false;
    }
    if (v && mul > 0xFFFFFFFEu / v) return false;
    *ms = (uint32_t)(v * mul);
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

/* Checks a command/args value splits. */
RSRV_FN bool rsrv_args_ok(const char *v) {
    char buf[RSRV_CMD_MAX];
    const char *argv[RSRV_MAX_ARGS + 1];
    return rsrv_split(v, buf, sizeof buf, argv, RSRV_MAX_ARGS + 1) >= 0;
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

/* Global keys, their bit in rsrv_config.seen. */
static const char *const rsrv_global_keys[] = {"max_models", "vram_budget", "llama_server", "listen",
                                               "start_timeout", "stop_grace", "args", "max_wait",
                                               "send_timeout", "max_queue", "watchdog",
                                               "watchdog_failures", "watchdog_errors",
                                               "watchdog_restarts", "lock_models", "api_key", "admin_key",
                                               "cors", "event_history", "kv_cache_dir", "kv_cache_bytes",
                                               "kv_save_timeout", "vram_margin", "state_dir",
                                               "start_backoff"};
/* Global keys read by index outside rsrv_set_global's switch (test_serve_devmem checks it). */
enum { RSRV_GK_VRAM_MARGIN = 22, RSRV_GK_STATE_DIR = 23, RSRV_GK_START_BACKOFF = 24 };
static const char *const rsrv_model_keys[] = {"model", "command", "args", "ctx", "parallel", "ngl",
                                              "reserve", "ttl", "pinned", "aliases", "env", "preload",
                                              "max_queue", "session_affinity", "session_erase"};

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
RSRV_FN const char *rsrv_key_list(const char *const *keys, int nkeys, char *out, size_t cap) {
    size_t n = 0;
    int i;
    out[0] = 0;
    for (i = 0; i < nkeys && n < cap; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", keys[i]);
        if (w < 0) break;
        n += (size_t)w;
    }
    return out;
}

RSRV_FN int rsrv_key_index(const char *const *keys, int nkeys, const char *k, size_t n) {
    int i;
    for (i = 0; i < nkeys; i++)
        if (strlen(keys[i]) == n && !memcmp(keys[i], k, n)) return i;
    return -1;
}

/* Keeps a size or duration as written (for rsrv_write_ini). */
RSRV_FN void rsrv_keep_text(char *dst, const char *v, size_t n) {
    if (n < RSRV_TEXT_MAX) rsrv_cpy(dst, RSRV_TEXT_MAX, v, n);
    else dst[0] = 0;
}

/* kv_cache_dir (a path, or off), kv_cache_bytes (a size, or off: no saves),
   kv_save_timeout (a duration, 1 ms at least). */
RSRV_FN bool rsrv_set_kv(rsrv_config *c, int key, const char *v, size_t n, char *err, size_t ecap) {
    bool off = n == 3 && !memcmp(v, "off", 3);
    uint32_t ms;
    if (key == 19) {
        if (off || !n) { c->kv_cache_dir[0] = 0; return true; }
        return rsrv_set_str(c->kv_cache_dir, sizeof c->kv_cache_dir, v, n, "kv_cache_dir", err, ecap);
    }
    if (key == 20) {
        c->kv_off = off;
        if (off) return true;
        if (!rsrv_parse_size(v, n, &c->kv_cache_bytes) || !c->kv_cache_bytes) {
            snprintf(err, ecap, "kv_cache_bytes: bad size '%.*s' (bytes, with K/M/G/T; or off)", (int)(n > 64 ? 64 : n), v);
            return false;
        }
        return true;
    }
    if (!rsrv_parse_duration(v, n, &ms) || !ms) {
        snprintf(err, ecap, "kv_save_timeout: bad duration '%.*s' (seconds, or a number with ms/s/m/h; not 0)",
                 (int)(n > 64 ? 64 : n), v);
        return false;
    }
    c->kv_save_timeout_ms = ms;
    return true;
}

/* Sets global key k to v. false with err set. */
RSRV_FN bool rsrv_set_global(rsrv_config *c, int key, const char *v, size_t n, char *err, size_t ecap) {
    uint64_t x;
    if (key == 1 || key == 4 || key == 5 || key == 7 || key == 8 || key == 10 || key == RSRV_GK_VRAM_MARGIN ||
        key == RSRV_GK_START_BACKOFF)
        rsrv_keep_text(c->text[key], v, n);
    switch (key) {
    case 0:
        if (!rsrv_parse_u64(v, n, RSRV_MAX_SLOTS, &x) || x < 1) {
            snprintf(err, ecap, "max_models must be an integer from 1 to %d", RSRV_MAX_SLOTS);
            return false;
        }
        c->max_models = (int)x;
        return true;
    case 1:
        c->vram_budget_auto = n == 4 && !memcmp(v, "auto", 4);
        if (c->vram_budget_auto) {
            c->vram_budget_bytes = 0; /* rsd-serve reads the device */
            return true;
        }
        if (!rsrv_parse_size(v, n, &c->vram_budget_bytes)) {
            snprintf(err, ecap, "vram_budget: bad size '%.*s' (bytes, with K/M/G/T, or auto)", (int)(n > 64 ? 64 : n), v);
            return false;
        }
        return true;
    case 2:
        if (!n) { snprintf(err, ecap, "llama_server needs a path"); return false; }
        if (!rsrv_set_str(c->llama_server, sizeof c->llama_server, v, n, "llama_server", err, ecap)) return false;
        { /* words, as command's: a program and the arguments that always follow it */
            char buf[RSRV_CMD_MAX];
            const char *argv[RSRV_MAX_ARGS + 1];
            if (rsrv_split(c->llama_server, buf, sizeof buf, argv, RSRV_MAX_ARGS + 1) < 1) {
                snprintf(err, ecap, "llama_server: '%.*s' is no program (an unterminated quote, a trailing "
                         "backslash, or nothing but blanks)", (int)(n > 64 ? 64 : n), v);
                return false;
            }
        }
        return true;
    case 3:
        if (!rsrv_parse_listen(v, n, c->listen_host, sizeof c->listen_host, &c->listen_port)) {
            snprintf(err, ecap, "listen: bad address '%.*s' (HOST:PORT, [V6]:PORT or PORT; HOST an IPv4 address or a host name)", (int)(n > 64 ? 64 : n), v);
            return false;
        }
        return true;
    case 4:
    case 5:
    case 7:
    case 8:
    case RSRV_GK_START_BACKOFF: {
        uint32_t ms;
        if (!rsrv_parse_duration(v, n, &ms) || (key == 4 && ms == 0)) {
            snprintf(err, ecap, "%s: bad duration '%.*s' (seconds, or a number with ms/s/m/h%s)",
                     rsrv_global_keys[key], (int)(n > 64 ? 64 : n), v, key == 4 ? "; not 0" : "");
            return false;
        }
        if (key == 4) c->start_timeout_ms = ms;
        else if (key == 5) c->stop_grace_ms = ms;
        else if (key == 7) c->max_wait_ms = ms;
        else if (key == 8) c->send_timeout_ms = ms;
        else c->start_backoff_ms = ms;
        return true;
    }
    case 14: {
        size_t i = 0;
        c->nlock = 0;
        while (i <= n) {
            size_t j = i, an;
            const char *a;
            while (j < n && v[j] != ',') j++;
            an = j - i;
            a = rsrv_trim(v + i, &an);
            if (an) {
                int k;
                if (!rsrv_name_ok(a, an)) {
                    snprintf(err, ecap, "lock_models: bad model name '%.*s'", (int)(an > 64 ? 64 : an), a);
                    return false;
                }
                for (k = 0; k < c->nlock; k++)
                    if (strlen(c->lock_models[k]) == an && !memcmp(c->lock_models[k], a, an)) break;
                if (k < c->nlock) {
                    snprintf(err, ecap, "lock_models: '%.*s' is listed twice", (int)an, a);
                    return false;
                }
                if (c->nlock >= RSRV_MAX_MODELS) {
                    snprintf(err, ecap, "lock_models: too many names (at most %d)", RSRV_MAX_MODELS);
                    return false;
                }
                rsrv_cpy(c->lock_models[c->nlock++], RSRV_ID_MAX, a, an);
            }
            i = j + 1;
        }
        if (!c->nlock) { snprintf(err, ecap, "lock_models needs at least one model name"); return false; }
        return true;
    }
    case 6:
        if (!rsrv_set_str(c->args, sizeof c->args, v, n, "args", err, ecap)) return false;
        if (!rsrv_args_ok(c->args)) {
            snprintf(err, ecap, "args: unbalanced quotes or more than %d words", RSRV_MAX_ARGS);
            return false;
        }
        return true;
    case 9:
        if (!rsrv_parse_u64(v, n, RSRV_MAX_QUEUE_MAX, &x) || x < 1) {
            snprintf(err, ecap, "max_queue must be an integer from 1 to %d", RSRV_MAX_QUEUE_MAX);
            return false;
        }
        c->max_queue = (int)x;
        return true;
    case 10: {
        uint32_t ms;
        if (!rsrv_parse_duration(v, n, &ms) || (ms && ms < 10)) {
            snprintf(err, ecap, "watchdog: bad duration '%.*s' (the health poll interval: 0 = off, at least 10ms)",
                     (int)(n > 64 ? 64 : n), v);
            return false;
        }
        c->watchdog_ms = ms;
        return true;
    }
    case 11:
    case 12:
    case 13:
        if (!rsrv_parse_u64(v, n, 1000, &x) || x < 1) {
            snprintf(err, ecap, "%s must be an integer from 1 to 1000", rsrv_global_keys[key]);
            return false;
        }
        if (key == 11) c->watchdog_failures = (int)x;
        else if (key == 12) c->watchdog_errors = (int)x;
        else c->watchdog_restarts = (int)x;
        return true;
    case 15:
    case 16:
        if (!rsrv_key_ok(v, n)) {
            snprintf(err, ecap, "%s must be 1 to %d printable bytes without blanks", rsrv_global_keys[key],
                     RSRV_KEY_MAX - 1);
            return false;
        }
        rsrv_cpy(key == 15 ? c->api_key : c->admin_key, RSRV_KEY_MAX, v, n);
        return true;
    case 17:
        if (!rsrv_cors_ok(v, n)) {
            snprintf(err, ecap, "cors: '%.*s' is neither * nor a list of origins such as "
                     "https://app.example, http://localhost:3000", (int)(n > 64 ? 64 : n), v);
            return false;
        }
        return rsrv_set_str(c->cors, sizeof c->cors, v, n, "cors", err, ecap);
    case 18:
        if (!rsrv_parse_u64(v, n, RSRV_EVENT_HISTORY_MAX, &x) || x < 1) {
            snprintf(err, ecap, "event_history must be an integer from 1 to %d", RSRV_EVENT_HISTORY_MAX);
            return false;
        }
        c->event_history = (uint32_t)x;
        return true;
    case 19:
    case 20:
    case 21:
        return rsrv_set_kv(c, key, v, n, err, ecap);
    case RSRV_GK_VRAM_MARGIN:
        if (!rsrv_parse_size(v, n, &c->vram_margin_bytes)) {
            snprintf(err, ecap, "vram_margin: bad size '%.*s' (bytes, with K/M/G/T)", (int)(n > 64 ? 64 : n), v);
            return false;
        }
        c->vram_margin_set = true;
        return true;
    case RSRV_GK_STATE_DIR:
        if (n == 3 && !memcmp(v, "off", 3)) { c->state_dir[0] = 0; return true; }
        return rsrv_set_str(c->state_dir, sizeof c->state_dir, v, n, "state_dir", err, ecap);
    default: break;
    }
    snprintf(err, ecap, "unknown key");
    return false;
}

/* Sets model key k to v. false with err set. */
RSRV_FN bool rsrv_set_model(rsrv_config *c, rsrv_model *m, int key, const char *v, size_t n, char *err,
                            size_t ecap) {
    uint64_t x;
    bool b;
    if (key == 6 || key == 7) rsrv_keep_text(m->text[key], v, n);
    switch (key) {
    case 0:
        if (!n) { snprintf(err, ecap, "model needs a path"); return false; }
        return rsrv_set_str(m->model, sizeof m->model, v, n, "model", err, ecap);
    case 1:
    case 2: {
        char *dst = key == 1 ? m->command : m->args;
        char buf[RSRV_CMD_MAX];
        const char *argv[RSRV_MAX_ARGS + 1];
        int argc;
        if (!rsrv_set_str(dst, RSRV_CMD_MAX, v, n, rsrv_model_keys[key], err, ecap)) return false;
        argc = rsrv_split(dst, buf, sizeof buf, argv, RSRV_MAX_ARGS + 1);
        if (argc < 0 || (key == 1 && argc == 0)) {
            snprintf(err, ecap, "%s: %s", rsrv_model_keys[key],
                     argc == 0 ? "empty command" : "unbalanced quotes, a trailing backslash or too many words");
            return false;
        }
        return true;
    }
    case 3:
        if (!rsrv_parse_u64(v, n, (uint64_t)1 << 40, &x) || x < 1) {
            snprintf(err, ecap, "ctx must be a positive integer");
            return false;
        }
        m->ctx = (int64_t)x;
        return true;
    case 4:
        if (!rsrv_parse_u64(v, n, 256, &x) || x < 1) {
            snprintf(err, ecap, "parallel must be an integer from 1 to 256");
            return false;
        }
        m->parallel = (int)x;
        return true;
    case 5:
        if (!((n == 4 && !memcmp(v, "auto", 4)) || (n == 3 && !memcmp(v, "all", 3)) ||
              (rsrv_parse_u64(v, n, 100000, &x)))) {
            snprintf(err, ecap, "ngl must be a number, auto or all");
            return false;
        }
        rsrv_cpy(m->ngl, sizeof m->ngl, v, n);
        return true;
    case 6:
        if (!rsrv_parse_size(v, n, &m->reserve_bytes)) {
            snprintf(err, ecap, "reserve: bad size '%.*s' (bytes, with K/M/G/T)", (int)(n > 64 ? 64 : n), v);
            return false;
        }
        return true;
    case 7:
        if (!rsrv_parse_duration(v, n, &m->ttl_ms)) {
            snprintf(err, ecap, "ttl: bad duration '%.*s' (seconds, or a number with ms/s/m/h; 0 = never)",
                     (int)(n > 64 ? 64 : n), v);
            return false;
        }
        return true;
    case 8:
    case 13:
    case 14:
        if (!rsrv_parse_bool(v, n, &b)) {
            snprintf(err, ecap, "%s must be true or false", rsrv_model_keys[key]);
            return false;
        }
        if (key == 8) m->pinned = b;
        else if (key == 13) m->session_affinity = b;
        else m->session_erase = b;
        return true;
    case 9: {
        size_t i = 0;
        m->naliases = 0;
        while (i <= n) {
            size_t j = i, an;
            const char *a;
            int other;
            while (j < n && v[j] != ',') j++;
            an = j - i;
            a = rsrv_trim(v + i, &an);
            if (an) {
                if (!rsrv_name_ok(a, an)) {
                    snprintf(err, ecap, "bad alias '%.*s'", (int)(an > 64 ? 64 : an), a);
                    return false;
                }
                other = rsrv_find(c, a, an);
                if (other >= 0 || (strlen(m->id) == an && !memcmp(m->id, a, an))) {
                    snprintf(err, ecap, "alias '%.*s' is already a model id or alias%s%s", (int)an, a,
                             other >= 0 ? " of " : "", other >= 0 ? c->models[other].id : "");
                    return false;
                }
                if (m->naliases >= RSRV_MAX_ALIASES) {
                    snprintf(err, ecap, "too many aliases (at most %d)", RSRV_MAX_ALIASES);
                    return false;
                }
                rsrv_cpy(m->aliases[m->naliases++], RSRV_ID_MAX, a, an);
            }
            i = j + 1;
        }
        return true;
    }
    case 10: {
        char buf[RSRV_CMD_MAX];
        const char *e[RSRV_MAX_ENV + 1];
        if (!rsrv_set_str(m->env, sizeof m->env, v, n, "env", err, ecap)) return false;
        if (rsrv_env_split(m->env, buf, sizeof buf, e, RSRV_MAX_ENV + 1) < 0) {
            snprintf(err, ecap, "env: expected NAME=VALUE, NAME2=VALUE2 (at most %d; NAME is letters, digits, _)",
                     RSRV_MAX_ENV);
            m->env[0] = 0;
            return false;
        }
        return true;
    }
    case 11:
        if (!rsrv_parse_bool(v, n, &b)) {
            snprintf(err, ecap, "preload must be true or false");
            return false;
        }
        m->preload = b;
        return true;
    case 12:
        if (!rsrv_parse_u64(v, n, RSRV_MAX_QUEUE_MAX, &x) || x < 1) {
            snprintf(err, ecap, "max_queue must be an integer from 1 to %d", RSRV_MAX_QUEUE_MAX);
            return false;
        }
        m->max_queue = (int)x;
        return true;
    default: break;
    }
    snprintf(err, ecap, "unknown key");
    return false;
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
        if (cur) {
            int key = rsrv_key_index(rsrv_model_keys, (int)(sizeof rsrv_model_keys / sizeof rsrv_model_keys[0]), k, kn);
            if (key < 0) {
                char known[1024];
                snprintf(msg, sizeof msg, "unknown key '%.*s' in [model %s] (%s)", (int)(kn > 64 ? 64 : kn), k, cur->id,
                         rsrv_key_list(rsrv_model_keys, (int)(sizeof rsrv_model_keys / sizeof rsrv_model_keys[0]),
                                       known, sizeof known));
                goto fail;
            }
            if (cur->seen & (1u << key)) { snprintf(msg, sizeof msg, "duplicate key '%s'", rsrv_model_keys[key]); goto fail; }
            cur->seen |= 1u << key;
            cur->key_line[key] = line;
            if (!rsrv_set_model(c, cur, key, v, vn, msg, sizeof msg)) goto fail;
        } else {
            int key = rsrv_key_index(rsrv_global_keys, (int)(sizeof rsrv_global_keys / sizeof rsrv_global_keys[0]), k, kn);
            if (key < 0) {
                char known[1024];
                snprintf(msg, sizeof msg, "unknown global key '%.*s' (%s)", (int)(kn > 64 ? 64 : kn), k,
                         rsrv_key_list(rsrv_global_keys, (int)(sizeof rsrv_global_keys / sizeof rsrv_global_keys[0]),
                                       known, sizeof known));
                goto fail;
            }
            if (c->seen & (1u << key)) { snprintf(msg, sizeof msg, "duplicate key '%s'", rsrv_global_keys[key]); goto fail; }
            c->seen |= 1u << key;
            c->key_line[key] = line;
            if (!rsrv_set_global(c, key, v, vn, msg, sizeof msg)) goto fail;
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
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int gk = -1, mk = -1;
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) { o->verbose = true; continue; }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) { o->quiet = true; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { o->help = true; continue; }
        if (!strcmp(a, "--pinned") || !strcmp(a, "--preload")) {
            if (!cur) { snprintf(err, ecap, "%s: comes after --model or --command", a); return -1; }
            if (a[3] == 'i') cur->pinned = true;
            else cur->preload = true;
            continue;
        }
        if (!strcmp(a, "--session-affinity")) {
            if (!cur) { snprintf(err, ecap, "--session-affinity: comes after --model or --command"); return -1; }
            cur->session_affinity = true;
            continue;
        }
        if (!strcmp(a, "--session-erase") || !strcmp(a, "--no-session-erase")) {
            if (!cur) { snprintf(err, ecap, "%s: comes after --model or --command", a); return -1; }
            cur->session_erase = a[2] == 's';
            continue;
        }
        if (!v) { snprintf(err, ecap, "%s: needs a value (or is unknown; see --help)", a); return -1; }
        if (!strcmp(a, "--config")) { o->config_path = v; i++; continue; }
        if (!strcmp(a, "--model") || !strcmp(a, "--command")) {
            const char *eq = strchr(v, '=');
            if (!eq) { snprintf(err, ecap, "%s: expected ID=%s", a, a[2] == 'm' ? "PATH" : "COMMAND"); return -1; }
            cur = rsrv_add_model(c, v, (size_t)(eq - v), 0, msg, sizeof msg);
            if (!cur || !rsrv_set_model(c, cur, a[2] == 'm' ? 0 : 1, eq + 1, strlen(eq + 1), msg, sizeof msg)) {
                snprintf(err, ecap, "%s: %s", a, msg);
                return -1;
            }
            i++;
            continue;
        }
        if (!strcmp(a, "--max-models")) gk = 0;
        else if (!strcmp(a, "--vram-budget")) gk = 1;
        else if (!strcmp(a, "--llama-server")) gk = 2;
        else if (!strcmp(a, "--listen")) gk = 3;
        else if (!strcmp(a, "--start-timeout")) gk = 4;
        else if (!strcmp(a, "--stop-grace")) gk = 5;
        else if (!strcmp(a, "--args")) gk = 6;
        else if (!strcmp(a, "--max-wait")) gk = 7;
        else if (!strcmp(a, "--send-timeout")) gk = 8;
        else if (!strcmp(a, "--max-queue")) gk = 9;
        else if (!strcmp(a, "--watchdog")) gk = 10;
        else if (!strcmp(a, "--lock-models")) gk = 14;
        else if (!strcmp(a, "--api-key")) gk = 15;
        else if (!strcmp(a, "--admin-key")) gk = 16;
        else if (!strcmp(a, "--cors")) gk = 17;
        else if (!strcmp(a, "--event-history")) gk = 18;
        else if (!strcmp(a, "--vram-margin")) gk = RSRV_GK_VRAM_MARGIN;
        else if (!strcmp(a, "--state-dir")) gk = RSRV_GK_STATE_DIR;
        else if (!strcmp(a, "--ctx")) mk = 3;
        else if (!strcmp(a, "--parallel")) mk = 4;
        else if (!strcmp(a, "--ngl")) mk = 5;
        else if (!strcmp(a, "--reserve")) mk = 6;
        else if (!strcmp(a, "--ttl")) mk = 7;
        else if (!strcmp(a, "--aliases")) mk = 9;
        else if (!strcmp(a, "--model-args")) mk = 2;
        else if (!strcmp(a, "--env")) mk = 10;
        else if (!strcmp(a, "--model-max-queue")) mk = 12;
        else { snprintf(err, ecap, "%s: unknown flag (see --help)", a); return -1; }
        if (gk >= 0 && !rsrv_set_global(c, gk, v, strlen(v), msg, sizeof msg)) {
            snprintf(err, ecap, "%s: %s", a, msg);
            return -1;
        }
        if (mk >= 0) {
            if (!cur) { snprintf(err, ecap, "%s: comes after --model or --command", a); return -1; }
            if (!rsrv_set_model(c, cur, mk, v, strlen(v), msg, sizeof msg)) {
                snprintf(err, ecap, "%s: %s", a, msg);
                return -1;
            }
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
RSRV_FN int rsrv_eff_wd_failures(const rsrv_config *c) { return c->watchdog_failures ? c->watchdog_failures : 3; }
RSRV_FN int rsrv_eff_wd_errors(const rsrv_config *c) { return c->watchdog_errors ? c->watchdog_errors : 5; }
RSRV_FN int rsrv_eff_wd_restarts(const rsrv_config *c) { return c->watchdog_restarts ? c->watchdog_restarts : 5; }
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

/* Writes c back as an INI text that rsrv_parse_ini reads into the same configuration
   (rsrv_config_equal): every key with its effective value (defaults instead of 0),
   sizes and durations as they were written (the largest exact unit for defaults), and
   a comment where a value means something special ("0 # count only"). Returns the length, or -1 when cap is too small. */
RSRV_FN int rsrv_write_ini(const rsrv_config *c, char *buf, size_t cap) {
    size_t o = 0;
    int i, k, w;
    char t1[32], t2[32], t3[32], t4[32];
#define RSRV_PUT(...) do { w = snprintf(buf + o, o < cap ? cap - o : 0, __VA_ARGS__); \
        if (w < 0 || (size_t)w >= (o < cap ? cap - o : 0)) { return -1; } \
        o += (size_t)w; } while (0)
    /* "key =#v": a value that starts with '#' must not follow a blank (it would be a comment) */
#define RSRV_KV(key, v) RSRV_PUT("%s =%s%s\n", key, (v)[0] == '#' ? "" : " ", v)
    if (c->vram_budget_auto)
        RSRV_PUT("[global]\nmax_models = %d\nvram_budget = auto\nvram_margin = %s\n", c->max_models,
                 rsrv_written_size(c->text[RSRV_GK_VRAM_MARGIN], rsrv_eff_vram_margin(c), t1, sizeof t1));
    else
        RSRV_PUT("[global]\nmax_models = %d\nvram_budget = %s%s\n", c->max_models,
                 rsrv_written_size(c->text[1], c->vram_budget_bytes, t1, sizeof t1),
                 c->vram_budget_bytes ? "" : " # none: models are counted only");
    RSRV_KV("llama_server", c->llama_server);
    if (strchr(c->listen_host, ':')) RSRV_PUT("listen = [%s]:%d\n", c->listen_host, c->listen_port);
    else RSRV_PUT("listen = %s:%d\n", c->listen_host, c->listen_port);
    RSRV_PUT("start_timeout = %s\nstop_grace = %s\nmax_wait = %s\nsend_timeout = %s\nmax_queue = %d\n",
             rsrv_written_duration(c->text[4], c->start_timeout_ms, t1, sizeof t1),
             rsrv_written_duration(c->text[5], c->stop_grace_ms, t2, sizeof t2),
             rsrv_written_duration(c->text[7], rsrv_eff_max_wait(c), t3, sizeof t3),
             rsrv_written_duration(c->text[8], rsrv_eff_send_timeout(c), t4, sizeof t4), rsrv_eff_max_queue(c));
    RSRV_PUT("start_backoff = %s\n", rsrv_written_duration(c->text[RSRV_GK_START_BACKOFF], rsrv_eff_start_backoff(c), t1, sizeof t1));
    RSRV_PUT("watchdog = %s%s\nwatchdog_failures = %d\nwatchdog_errors = %d\nwatchdog_restarts = %d\n",
             rsrv_written_duration(c->text[10], c->watchdog_ms, t1, sizeof t1), c->watchdog_ms ? "" : " # off", rsrv_eff_wd_failures(c),
             rsrv_eff_wd_errors(c), rsrv_eff_wd_restarts(c));
    if (c->args[0]) RSRV_KV("args", c->args);
    if (c->nlock) {
        RSRV_PUT("lock_models = ");
        for (k = 0; k < c->nlock; k++) RSRV_PUT("%s%s", k ? ", " : "", c->lock_models[k]);
        RSRV_PUT("\n");
    }
    if (c->api_key[0]) RSRV_KV("api_key", c->api_key);
    if (c->admin_key[0]) RSRV_KV("admin_key", c->admin_key);
    if (c->cors[0]) RSRV_KV("cors", c->cors);
    if (c->kv_cache_dir[0] && !c->kv_off) {
        RSRV_KV("kv_cache_dir", c->kv_cache_dir);
        RSRV_PUT("kv_cache_bytes = %llu\nkv_save_timeout = %lums\n",
                 (unsigned long long)(c->kv_cache_bytes ? c->kv_cache_bytes : RSRV_KV_BYTES_DEFAULT),
                 (unsigned long)(c->kv_save_timeout_ms ? c->kv_save_timeout_ms : RSRV_KV_SAVE_TIMEOUT_DEFAULT_MS));
    }
    if (c->state_dir[0]) RSRV_KV("state_dir", c->state_dir);
    RSRV_PUT("event_history = %lu\n",
             (unsigned long)(c->event_history ? c->event_history : RSRV_EVENT_HISTORY_DEFAULT));
    for (i = 0; i < c->nmodels; i++) {
        const rsrv_model *m = &c->models[i];
        RSRV_PUT("\n[model %s]\n", m->id);
        if (m->model[0]) RSRV_KV("model", m->model);
        if (m->command[0]) RSRV_KV("command", m->command);
        if (m->args[0]) RSRV_KV("args", m->args);
        if (m->env[0]) RSRV_KV("env", m->env);
        if (m->ctx) RSRV_PUT("ctx = %lld\n", (long long)m->ctx);
        if (m->parallel) RSRV_PUT("parallel = %d\n", m->parallel);
        if (m->ngl[0]) RSRV_PUT("ngl = %s\n", m->ngl);
        RSRV_PUT("reserve = %s\nttl = %s%s\npinned = %s\npreload = %s\nmax_queue = %d\n",
                 rsrv_written_size(m->text[6], m->reserve_bytes, t1, sizeof t1),
                 rsrv_written_duration(m->text[7], m->ttl_ms, t2, sizeof t2),
                 m->ttl_ms ? "" : " # never unloaded for idleness", m->pinned ? "true" : "false",
                 m->preload ? "true" : "false", rsrv_eff_model_queue(c, m));
        if (m->session_affinity) RSRV_PUT("session_affinity = true\n");
        if (m->session_erase) RSRV_PUT("session_erase = true\n");
        if (m->naliases) {
            RSRV_PUT("aliases = ");
            for (k = 0; k < m->naliases; k++) RSRV_PUT("%s%s", k ? ", " : "", m->aliases[k]);
            RSRV_PUT("\n");
        }
    }
#undef RSRV_KV
#undef RSRV_PUT
    return (int)o;
}

/* What rsrv_write_example says of each key, in rsrv_global_keys / rsrv_model_keys order:
   one line of help, and for a key that has no default (rsrv_write_ini leaves it out), an
   example value, written commented out. */
typedef struct rsrv_key_doc {
    const char *help;
    const char *example; /* NULL: the key has a default, which rsrv_write_ini writes */
} rsrv_key_doc;
static const rsrv_key_doc rsrv_global_docs[] = {
    {"processes resident at once, 1..16", NULL},
    {"byte budget of all reservations (K/M/G/T), or auto (the device's memory less vram_margin); 0 = models are counted only", NULL},
    {"the llama-server binary (a name is looked up in PATH)", NULL},
    {"HOST:PORT, [V6]:PORT or PORT to listen on (port 0 = any free port, printed)", NULL},
    {"until a start counts as failed (durations: seconds, or ms/s/m/h)", NULL},
    {"from SIGTERM to SIGKILL when a process is stopped", NULL},
    {"extra arguments for every llama_server model, before its own (default none)", "--no-webui"},
    {"a request waiting this long for a process makes a busy model drain", NULL},
    {"a client that reads nothing of its answer this long is cut, its request cancelled", NULL},
    {"requests waiting for a process in all, 1..4096; past it 429 with Retry-After", NULL},
    {"poll each ready child's /health this often; 0 = off", NULL},
    {"failed watchdog polls in a row that restart a child", NULL},
    {"5xx answers in a row (503 aside) that restart a child", NULL},
    {"restarts in a row (1 s doubling to 60 s apart), then it is left stopped", NULL},
    {"a locked host: only these models (ids or aliases) are served and listed (default: any)",
     "chat-8b, coder"},
    {"every endpoint but /health and / needs \"Authorization: Bearer KEY\" (default none; or $RSD_API_KEY)",
     "sk-change-me"},
    {"management (/models/load, /models/unload, /status, /_rsd/...) needs this one instead (default: api_key)",
     "adm-change-me"},
    {"CORS: * or origins separated by commas (default off)", "https://app.example, http://localhost:3000"},
    {"events kept for GET /_rsd/events?since=ID, 1..16384 (4 KB each)", NULL},
    {"save each slot's prompt cache here before a child stops, restore it when it returns (default off)",
     "/var/lib/residency/kv"},
    {"disk budget of the saved prompt caches, oldest deleted first (default 8G; off = no saving)", "8G"},
    {"how long a stop waits for its slots' saves (default 5 s)", "5"},
    {"with vram_budget = auto: bytes left free below the device's total (default 1G)", "1G"},
    {"keep each model's learned memory figure here across restarts (default: not kept)", "/var/lib/residency"},
    {"a model whose start failed is refused this long (doubled per failure in a row, up to 60 s)", NULL}};
static const rsrv_key_doc rsrv_model_docs[] = {
    {"the GGUF file, run as: llama_server -m MODEL --host 127.0.0.1 --port P [-c] [-np] [-ngl] --alias ID -lv 4 ARGS",
     NULL},
    {"or a whole command line instead of llama_server; it listens on {port} and answers GET /health",
     "/opt/bin/srv --port {port} --weights {model}"},
    {"extra arguments for this model, after the global args (default none)", "--jinja -fa on"},
    {"context size, passed as -c (default: not passed)", "8192"},
    {"slots, passed as -np; also the most requests sent to it at once (default: not passed)", "4"},
    {"GPU layers, passed as -ngl: a number, auto or all (default: not passed)", "99"},
    {"bytes counted against vram_budget while it runs", NULL},
    {"stopped after this long idle; 0 = never", NULL},
    {"never evicted, started at boot, listed with the tag pinned:true", NULL},
    {"other names that route to this model (default none)", "chat, default"},
    {"the child's environment on top of rsd-serve's: NAME=VALUE, comma separated (default none)",
     "CUDA_VISIBLE_DEVICES=0"},
    {"started at boot, but evicted like any other", NULL},
    {"requests waiting for this model (at most the global max_queue)", NULL},
    {"a session's requests go to the slot holding its KV cache (default false)", "true"},
    {"with session_affinity: erase a slot before another session gets it (default false)", "true"}};
typedef char rsrv_global_docs_cover_every_key[sizeof rsrv_global_docs / sizeof rsrv_global_docs[0] ==
                                                      sizeof rsrv_global_keys / sizeof rsrv_global_keys[0] ? 1 : -1];
typedef char rsrv_model_docs_cover_every_key[sizeof rsrv_model_docs / sizeof rsrv_model_docs[0] ==
                                                     sizeof rsrv_model_keys / sizeof rsrv_model_keys[0] ? 1 : -1];

/* Writes the example configuration (rsd-serve --example-config; installed as
   share/residency/serve.ini.example): what --check prints (rsrv_write_ini) for the default
   configuration with one model, a help line above every key, and each key without a default
   commented out with an example value. c is scratch (rsrv_config_init'ed here). Returns the
   length, or -1 when cap is too small. */
RSRV_FN int rsrv_write_example(rsrv_config *c, const char *version, char *buf, size_t cap) {
    const size_t half = cap / 2; /* rsrv_write_ini's text goes to the upper half, read from there */
    const char *src = buf + half, *end;
    const char *const *keys = rsrv_global_keys;
    const rsrv_key_doc *docs = rsrv_global_docs;
    int nkeys = (int)(sizeof rsrv_global_keys / sizeof rsrv_global_keys[0]);
    uint32_t written = 0;
    size_t o = 0;
    int n, k, w;
    char err[RSRV_ERR_MAX];
    rsrv_model *m;
    rsrv_config_init(c);
    m = rsrv_add_model(c, "example", 7, 0, err, sizeof err);
    if (!m) return -1;
    rsrv_cpy(m->model, sizeof m->model, "/models/example.gguf", 20);
    n = rsrv_write_ini(c, buf + half, cap - half);
    if (n < 0) return -1;
    end = src + n;
#define RSRV_PUT(...) do { w = snprintf(buf + o, o < half ? half - o : 0, __VA_ARGS__); \
        if (w < 0 || (size_t)w >= (o < half ? half - o : 0)) { return -1; } \
        o += (size_t)w; } while (0)
    RSRV_PUT("# rsd-serve %s: every configuration key with its default, as `rsd-serve --check` prints\n"
             "# the configuration in effect (this file is `rsd-serve --example-config`). A key without a\n"
             "# default is commented out with an example value. Sizes take K/M/G/T; durations are\n"
             "# seconds or take ms/s/m/h. The flags of the command line apply on top of this file.\n",
             version);
    while (src < end) {
        const char *nl = (const char *)memchr(src, '\n', (size_t)(end - src));
        size_t len = nl ? (size_t)(nl - src) : (size_t)(end - src), kn;
        bool section = len && src[0] == '[';
        if (section || !len) { /* a section ends: the keys it left out, commented */
            for (k = 0; k < nkeys && written; k++)
                if (!(written & (1u << k)) && docs[k].example)
                    RSRV_PUT("# %s\n# %s = %s\n", docs[k].help, keys[k], docs[k].example);
            written = 0;
        }
        if (section) {
            RSRV_PUT("\n%.*s\n", (int)len, src);
            if (len > 6 && !memcmp(src, "[model", 6)) {
                keys = rsrv_model_keys;
                docs = rsrv_model_docs;
                nkeys = (int)(sizeof rsrv_model_keys / sizeof rsrv_model_keys[0]);
            }
        } else if (len) {
            for (kn = 0; kn < len && src[kn] != ' ' && src[kn] != '='; kn++) {}
            for (k = 0; k < nkeys; k++)
                if (strlen(keys[k]) == kn && !memcmp(keys[k], src, kn)) break;
            if (k == nkeys) return -1; /* rsrv_write_ini wrote a key these tables do not know */
            written |= 1u << k;
            RSRV_PUT("# %s\n%.*s\n", docs[k].help, (int)len, src);
        }
        src += len + (nl ? 1 : 0);
    }
    for (k = 0; k < nkeys && written; k++)
        if (!(written & (1u << k)) && docs[k].example)
            RSRV_PUT("# %s\n# %s = %s\n", docs[k].help, keys[k], docs[k].example);
#undef RSRV_PUT
    return (int)o;
}

/* Would model x of ca run a different process than y of cb: its command line, model
   file, args, ctx, parallel, ngl, env, reservation, or (for llama_server models) the
   binary, the global args or the start timeout? (ttl, pin, aliases, preload and
   max_queue change nothing in the process.) */
RSRV_FN bool rsrv_model_process_differs(const rsrv_config *ca, const rsrv_model *x, const rsrv_config *cb,
                                        const rsrv_model *y) {
    if (strcmp(x->model, y->model) || strcmp(x->command, y->command) || strcmp(x->args, y->args) ||
        x->ctx != y->ctx || x->parallel != y->parallel || strcmp(x->ngl, y->ngl) || strcmp(x->env, y->env) ||
        x->reserve_bytes != y->reserve_bytes || ca->start_timeout_ms != cb->start_timeout_ms ||
        (!x->command[0] && (x->session_affinity && x->session_erase) != (y->session_affinity && y->session_erase)))
        /* --slot-save-path */
        return true;
    return !x->command[0] && (strcmp(ca->llama_server, cb->llama_server) || strcmp(ca->args, cb->args));
}

/* Same model configuration (effective values; `seen`, `line` aside)? */
RSRV_FN bool rsrv_model_equal(const rsrv_config *ca, const rsrv_model *x, const rsrv_config *cb, const rsrv_model *y) {
    int k;
    if (strcmp(x->id, y->id) || strcmp(x->model, y->model) || strcmp(x->command, y->command) ||
        strcmp(x->args, y->args) || x->ctx != y->ctx || x->parallel != y->parallel || strcmp(x->ngl, y->ngl) ||
        x->reserve_bytes != y->reserve_bytes || x->ttl_ms != y->ttl_ms || x->pinned != y->pinned ||
        strcmp(x->env, y->env) || x->preload != y->preload || x->session_affinity != y->session_affinity ||
        x->session_erase != y->session_erase ||
        rsrv_eff_model_queue(ca, x) != rsrv_eff_model_queue(cb, y) || x->naliases != y->naliases)
        return false;
    for (k = 0; k < x->naliases; k++)
        if (strcmp(x->aliases[k], y->aliases[k])) return false;
    return true;
}

/* Same configuration (effective values; the `seen` and `line` bookkeeping aside)? */
RSRV_FN bool rsrv_config_equal(const rsrv_config *a, const rsrv_config *b) {
    int i;
    if (a->max_models != b->max_models || a->vram_budget_auto != b->vram_budget_auto ||
        (!a->vram_budget_auto && a->vram_budget_bytes != b->vram_budget_bytes) ||
        (a->vram_budget_auto && rsrv_eff_vram_margin(a) != rsrv_eff_vram_margin(b)) ||
        strcmp(a->llama_server, b->llama_server) || strcmp(a->args, b->args) ||
        strcmp(a->listen_host, b->listen_host) || a->listen_port != b->listen_port ||
        a->start_timeout_ms != b->start_timeout_ms || a->stop_grace_ms != b->stop_grace_ms ||
        rsrv_eff_max_wait(a) != rsrv_eff_max_wait(b) || rsrv_eff_send_timeout(a) != rsrv_eff_send_timeout(b) ||
        rsrv_eff_start_backoff(a) != rsrv_eff_start_backoff(b) ||
        rsrv_eff_max_queue(a) != rsrv_eff_max_queue(b) || a->watchdog_ms != b->watchdog_ms ||
        rsrv_eff_wd_failures(a) != rsrv_eff_wd_failures(b) || rsrv_eff_wd_errors(a) != rsrv_eff_wd_errors(b) ||
        rsrv_eff_wd_restarts(a) != rsrv_eff_wd_restarts(b) || a->nmodels != b->nmodels ||
        a->nlock != b->nlock ||
        strcmp(a->api_key, b->api_key) || strcmp(a->admin_key, b->admin_key) || strcmp(a->cors, b->cors) ||
        strcmp(a->kv_cache_dir, b->kv_cache_dir) || a->kv_cache_bytes != b->kv_cache_bytes || a->kv_off != b->kv_off ||
        a->kv_save_timeout_ms != b->kv_save_timeout_ms || strcmp(a->state_dir, b->state_dir) ||
        (a->event_history ? a->event_history : RSRV_EVENT_HISTORY_DEFAULT) !=
            (b->event_history ? b->event_history : RSRV_EVENT_HISTORY_DEFAULT))
        return false;
    for (i = 0; i < a->nlock; i++)
        if (strcmp(a->lock_models[i], b->lock_models[i])) return false;
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
            rsrv_where(file, m, 1, where, sizeof where);
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
                rsrv_where(file, m, 0, where, sizeof where);
                RSRV_PROBLEM("%s: both `model` and `command` in [model %s]: the command runs instead of llama_server "
                             "and has no {model}, so the model file is never used\n", where, m->id);
            }
        }
        if (c->vram_budget_bytes && m->reserve_bytes > c->vram_budget_bytes) {
            char t1[32], t2[32];
            rsrv_where(file, m, 6, where, sizeof where);
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
        rsrv_where(file, &c->models[last_pin], 8, where, sizeof where);
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
