/* rsd-serve -- several llama-server models behind one port, kept resident by rsd_fleet.

       rsd-serve --config serve.ini
       rsd-serve --listen 127.0.0.1:8080 --max-models 2 \
                 --model chat=/models/chat.gguf --ctx 8192 --pinned \
                 --model coder=/models/coder.gguf --ttl 300

   Configuration: see apps/rsd-serve/rsd_serve.h (INI file, flags). What parses but cannot
   work (rsrv_check: an unknown {placeholder}, a command without {port}, ...) is
   refused at start with FILE:LINE each. `--check` also checks the files (each model's
   binary and model file, as a start would) and prints the effective configuration as
   INI (api_key and admin_key as ***, defaults instead of 0, sizes and durations as
   written or in the largest exact unit), then one comment line per model with its
   memory figures ("# memory ID: estimate model N kv N compute N total N; measured
   ... (SOURCE)" or "none: why"; see Memory) and exits
   0; 64 with every problem on its own FILE:LINE line; 66 when the config file cannot
   be read or is a directory. `--version` prints the library's version (RSD_VERSION_STRING);
   `--example-config` prints every key with its default and a line of help (rsrv_write_example;
   `make install` installs it as share/residency/serve.ini.example).

   Endpoints
     OpenAI:  GET /v1/models; POST /v1/chat/completions, /v1/completions,
              /v1/embeddings (and every other POST, as the llama.cpp router does; and
              GETs with ?model=X such as /props?model=X, /slots?model=X) are
              routed by the body's "model" (id or alias) to that model's llama-server,
              started on demand; the least-recently-used idle one is stopped to make
              room (by count and by bytes), a busy one never. The client's
              Authorization header goes along (a model run with --api-key checks
              it). Streaming (SSE) answers
              are passed through as they arrive, chunk by chunk, never buffered whole.
              A child that fails mid-stream: the stream ends with an `event: error`
              frame, data {"error":{"code":502,"message":..,"type":"server_error"}},
              and then its proper end (no [DONE]) and the connection's close, which
              the OpenAI SDKs raise as an API error; before the answer began it is
              a plain 502.
              Unknown model: 404 {"error":{"message":..,"type":"invalid_request_error",
              "param":"model","code":"model_not_found"}}; no "model": 400.
              ?autoload=false (anything but true or 1), as the llama.cpp router: only a
              ready model serves it; 400 "model is not loaded" when it is not running,
              503 "Loading model" while it starts; nothing is started for it.
     Router (llama.cpp router mode, so rsd-ensure and router clients can manage it):
              GET /models (= /v1/models: data[] with id, aliases, status.value
              loaded|loading|unloaded, status.args with the values of secret flags
              such as --api-key as ***; after a failed start failed:true and the
              child's own exit_code: 128+N when signal N ended it, 127 when it never
              ran; while loaded, "meta" as the router's: what the child's own
              /v1/models says, n_ctx, n_ctx_train, n_params, size, n_embd, n_vocab,
              vocab_type, ftype; a listing waits until each ready process has said
              it, as the router's does), POST /models/load
              and /models/unload {"model": id}, GET /props {"role":"router",
              "max_instances": max_models, ...}.
     Other:   GET /health (200 {"status":"ok"}), GET /status (= /_rsd/status): every
              model with state, pid, port, in-flight, waiting, reservation, last use,
              ttl, pin, last error, retry_in_ms (backoff), max_queue and the queue in
              order (position, waited_ms, method, path), and with kv_cache_dir its
              kv_cache {saved_slots, saved_bytes, saves, save_failures, restores,
              misses}; pool counters (evictions, backoffs, restores, ...), max_queue,
              queue_full (429s); with vram_budget = auto, device_memory {device, pool
              ("vram" or "host/unified"), total_bytes, used_bytes, others_bytes (what
              the last reading counted against the budget), margin_bytes, reads,
              held_starts (models whose start waits only for that memory)}:
              the device is read when a start may be admitted, and every 250 ms
              while a start waits only for memory other programs hold (it fits the
              budget, not beside them): the reading that finds the memory starts it,
              with no other request needed; at the same pace while a lease waits for
              the device to show its memory free (Leases); nothing is read while
              neither waits so, and a reading never stops a model;
              "memory" {budget_bytes, reserved_bytes, leased_bytes, others_bytes}, and
              per model "memory" {"estimate": {model, kv, compute, total, device} or
              null (then "estimate_error" says why when there is a model file),
              "measured": the same keys or null, "source": of the measured figure
              (log, nvml, amdgpu, rss), else "estimate", else "none", "bytes": what
              admission and eviction count for it, "bytes_from": reserve, measured,
              estimate or none} (see Memory).
              POST /_rsd/reload: reload the configuration (below); 200 with what
              changed, 400 with FILE:LINE when the file is bad.
              None of these (nor /metrics, /props, the watchdog's polls) counts as
              use of a model: they start nothing and never reset its idle timer.
              GET /v1/models/ID (percent-encoded id or
              alias): one listing entry, or the 404 an unknown model gets on a
              completion (same body); GET
              /api/v0/models: the listing again. Entries carry created (the process's
              start, seconds), owned_by, max_context_length (ctx or null),
              loaded_context_length while loaded (ctx / parallel) and status.last_used
              (ms since the epoch, null = never).
     Leases:  POST /_rsd/lease {"bytes": N|"6G", "ttl_ms": T, "restore": B}: idle,
              unpinned processes stop (LRU first) until reservations plus leases fit
              vram_budget; 200 {"id","granted","requested","ready","restore",
              "expires_in_ms","stopped":[ids]}, 409 declined (nothing can be stopped),
              503 no vram_budget or too many leases, 400 a bad body. "ready" turns
              true once the memory is really free: the processes stopped for it have
              exited (not when they are asked to stop) and, with vram_budget = auto, a
              device reading taken after those exits shows the memory gone (the
              device's free bytes cover "granted" and, where it counts bytes per
              process, the stopped pids hold nothing). Until then "waiting" says why:
              "processes" with "exiting": [ids still running], or "device" with
              "device" {name, reads, free_bytes, needed_bytes, stopped_bytes (null
              where not counted per process)} (null before a reading could be
              taken), read again every 250 ms; a lease event tells it ready. A device
              that never shows the memory keeps the lease not ready, saying so: the
              holder's deadline decides (the ttl or a release still give the bytes
              back). Once ready it stays ready ("waiting": null). With a fixed
              vram_budget nothing is read: ready comes with the exits.
              GET /_rsd/lease/ID its state, DELETE /_rsd/lease/ID
              releases it (restore: what it stopped starts again) and answers its last
              state with "released":true first; past ttl_ms it is released by itself.
              The ensurer's free request (residency_http.h, rsd_ensure_req.free_bytes)
              takes, polls and releases these leases.
     Locked host (lock_models): only the listed models are served and listed; a
              request naming none gets the first, another model 409 "model switching
              is disabled on this host; served models: ...", none configured 503 "no
              models are selected on this locked host".
     Sessions (session_affinity on a model; rsd_serve_affinity.h has the policy): a
              completion request's session (prompt_cache_key, or X-Session-Id) goes to
              its warm slot, else a fresh one, else the LRU idle slot; with
              session_erase = true that slot is erased first (POST
              /slots/ID?action=erase, awaited) when another session owns it, and the
              child gets --slot-save-path DIR (a temporary directory) so it may erase
              (default: no erase, the child's prompt cache keeps what it held);
              "id_slot" is added to the body.
              GET /_rsd/affinity: slot owners and counters.
     Exclusive: X-Residency-Exclusive: 1 runs the request alone on its model's
              process (it drains first; other models keep flowing).
     Events:  GET /models/sse: the llama.cpp router's stream (text/event-stream, one
              `data: {"model":ID,"event":KIND,"data":{...}}` per event, no id: lines):
              model_status {"status":"loading"} when a process starts, status_change
              {"status":"loading","progress":{"stages":["text_model"],"current":
              "text_model","value":0.0}} then, and value 1.0 when it is ready, then
              {"status":"loaded","info":{id, aliases (the child's own), tags, object,
              created, owned_by, meta}} once the child has said what it is (GET
              /v1/models on it, at most 5 s; the router streams wait for it; a process
              that starts stopping first is not asked, and "loaded" has no meta), and
              status_change {"status":"unloaded","exit_code":N} when it is gone (N > 0:
              it failed or crashed). It starts with what happens next.
              GET /_rsd/events: every residency event as `id: N`, `event: KIND`,
              `data: {"id","time_ms" (unix ms),"event","model",...}`: queued (a request
              waits), grant (it got its place; waited_ms), start (pid, port), ready
              (time_to_ready_ms), evict (the LRU idle victim: "for" = the models it
              makes room for, "considered" = every other resident model with its state,
              in-flight, pin, idle time and why it was kept: busy, pinned, starting,
              used more recently, ...; "memory": {"victim": {model, bytes, bytes_from,
              estimate, measured, source}, "for": [the same for each model it makes
              room for], budget_bytes, reserved_bytes, leased_bytes, others_bytes}), stop (reason: ttl, unload, shutdown, starve,
              trim), exit (exit_code, signal), crash (died while serving, or during a
              slot restore: then it starts again), kv_save
              (slots, bytes; reason when it was cut short), kv_restore (slots, tokens;
              reason), kv_miss (slot, reason: a saved slot deleted instead of
              restored), memory (a model's figure was learned: its "memory" as in
              /status and the pool's bytes), lease (at the take, and again when a
              lease not ready then turns ready) and lease_release (lease, requested,
              granted, ready, waiting and its figures as in GET /_rsd/lease/ID,
              "memory" {"stopped": [{model, bytes, bytes_from,
              estimate, measured, source}], budget_bytes, reserved_bytes, leased_bytes,
              others_bytes}), failed_start
              (exit, timeout or spawn error with the child's last lines; before_start:
              true when the checks refused it), load, unload (asked through the API),
              no_fit (a model whose bytes exceed the whole budget was refused: bytes,
              budget_bytes, others_bytes, message; once per model and figures).
              The last event_history events (default 512) are kept: ?since=ID (or a
              Last-Event-ID header) replays those after ID first; without it the
              stream starts with what happens next.
              Both are non-blocking: at most 16 streams are open (503 past that); a
              stream whose client reads too slowly falls behind, and once its next
              event has left the history it gets `event: skipped` with data
              {"skipped":N,"next":ID} and goes on from the oldest kept. A quiet stream
              gets a `: keepalive` comment every 15 s.
     Metrics: GET /metrics: Prometheus text format (version 0.0.4): per model
              rsd_serve_model_state{model,state} (1 for its state: unloaded,
              starting, ready, draining, stopping, failed), requests_total, in_flight,
              queued, starts_total, readies_total, failed_starts_total,
              evictions_total, crashes_total, time_to_ready_seconds (its last start),
              last_use_timestamp_seconds, process_resident_bytes{model,pid} (from
              /proc/PID/statm; omitted where there is none),
              memory_bytes{model,figure="estimate|measured",part="model|kv|compute|total"},
              admit_bytes{model} (see Memory); the pool's gauges
              (pool_live, pool_max_models, pool_running, pool_waiting,
              pool_reserved_bytes) and counters (pool_*_total, as in /status); with
              kv_cache_dir per model kv_saved_slots, kv_saved_bytes,
              kv_saves_total, kv_save_failures_total, kv_restores_total,
              kv_misses_total.
     Page:    GET / (and /index.html): one self-contained HTML page (inline CSS and
              script, nothing fetched from elsewhere) with each model's state, pid,
              port, in-flight, queue, last use, ttl and memory (its bytes and where
              they come from, the estimate, what it took), the pool's budget,
              reserved, leased and others' bytes, load and unload buttons, and
              the live /_rsd/events stream. It holds no data itself: its own requests
              carry the key typed into its field (or given as /#key=KEY; kept in the
              tab's sessionStorage), so it reads the stream with fetch (EventSource
              cannot send a key).
   Memory (what each model costs; rsd_serve_mem.h has the pure parts)
     Estimate: at start, on a reload and for --check, each model's GGUF header (its
              first bytes, never the weights; a large vocabulary makes it a few MB,
              read in the loop) and its start's parameters (ctx, parallel, ngl, then
              the child's -c, -np, -ngl, -ctk, -ctv, -b, -ub, -kvu, --swa-full, -fa in
              its args, the last winning) give rsd_gguf_estimate_start's model, KV,
              compute and total bytes, and the part on a GPU by -ngl. Read again only
              when the file (path, size, mtime) or the parameters change. A command
              model with a model file is estimated from its args the same way.
     Learned: llama_server children get -lv 4 first in their arguments until the
              model's own report is known for its start (learned, or kept in
              state_dir; then it is not learned again, and the child starts without
              it: the verbose output makes a load about 2 ms slower) (llama-server
              prints its buffer sizes only at that verbosity; at the default 3 they are
              hidden. Measured on b10116, tiny model, chat completions: -lv 4 prints
              12 KB at load against 0.8 KB, and 22 lines, 2.3 KB, per completion
              against 8 lines, 1.0 KB: slot, timing and prompt-cache lines, never the
              prompt; rsd-serve reads that output anyway. An -lv in args comes later
              and wins). Once a child is ready its output (the last
              16 KiB rsd-serve keeps) is read for "<device> model|KV|compute|output
              buffer size = X MiB" (rsd_llama_log_line) for up to 3 s: its own report,
              source "log" (compute counts the output buffer too; devices named CPU...
              or ..._Host are host memory, the rest the GPU part). Without those lines:
              the OS's figure for the process, the device probe's per-process bytes
              on a vram budget (source nvml or amdgpu), else its RSS (source rss;
              pages not touched yet, such as an unused KV cache, are not in it). One
              log line ("chat: took 1.20 GiB (model ..., KV ..., compute ...; its own
              report); estimated 1.10 GiB") and a memory event. The figure replaces
              the estimate for that file, those parameters and that server binary
              (path, size, mtime): with state_dir it is kept there (mem-KEY.txt, 0600,
              written whole then renamed) and read back at start, so the next start is
              counted right from the first byte; a missing, unreadable or corrupt
              file is ignored.
     Bytes:   with a byte budget (vram_budget, or auto) each model's bytes for
              admission and LRU eviction are its reserve when typed, else the learned
              figure, else the estimate, else 0 (the pool's default); on a discrete
              GPU's budget (auto on NVML or amdgpu) the GPU part of a figure counts,
              else all of it. A figure learned while the model runs replaces its
              running process's reservation at once and counts for its next start.
              Without a byte budget models are counted, not weighed. Every eviction
              and every lease names the bytes in its log line ("chat: stopping pid N
              (evict: it holds 1.20 GiB (measured, log; estimated ..., measured ...);
              budget 8.00 GiB, reserved ..., leased ..., others ...; room for coder
              2.00 GiB (estimate; ...))", "lease N: B bytes asked, G granted, ...;
              stopping [...]") and its event, and /status shows them.
     Swaps:   a model stopped to make room for another (max_models, bytes) is
              stopped and the other started at once, side by side, where the
              memory is known to hold both (rsd_pool_desc.overlap): with a byte
              budget, when the stopping child's bytes plus the new one's fit (they
              count until the old child has exited; a start that needs them waits
              for the exit); without one, when no GPU shows to the device probe at
              start (NVML, amdgpu): the children then hold host memory, their
              weights mapped from the model files. Where a GPU is there and no
              budget is set, nothing tells whether two models fit, so a start
              waits for the exit (set vram_budget = auto to overlap there). A
              model never starts beside its own stopping child: its kv save in
              the stop grace ends first. The old child keeps its port until it
              exits; the new one gets its own.
   Auth: with api_key set (--api-key, or RSD_API_KEY in the environment when neither
   the file nor a flag sets one) every endpoint but /health, /v1/health and the page
   needs `Authorization: Bearer KEY` or `X-Api-Key: KEY`; with admin_key set
   (RSD_ADMIN_KEY), /models/load, /models/unload, /status and /_rsd/... need it instead,
   and it opens the rest too. Otherwise: 401 {"error":{"message":"Invalid API
   Key","type":"authentication_error","code":401}} (llama-server's own body) with
   WWW-Authenticate: Bearer. Keys are compared in constant time. A model whose
   arguments (global args, its args, or its command) hold --api-key K (or
   --api-key=K) is sent `Authorization: Bearer K` with every request, and with the
   readiness probes (so its GET /props still tells its slot count); other models get
   the client's Authorization header.
   CORS (cors = * or a list of origins; off by default): OPTIONS answers 204 with
   Access-Control-Allow-Origin, -Methods (GET, POST, OPTIONS), -Headers
   (Authorization, Content-Type, X-Api-Key, Last-Event-ID) and -Max-Age 600 for an
   allowed Origin (204 without them otherwise); every answer to an allowed Origin,
   proxied or ours, carries Access-Control-Allow-Origin (the origin, or * for cors =
   *), and with a list every answer carries Vary: Origin. While cors is off OPTIONS
   gets 404 and no answer carries CORS headers.
   Context fit (a byte budget, a model with ctx, bytes and a GGUF model file): a model
   whose bytes (its footprint at its ctx: reserve, else learned, else estimated) do not fit beside the models running, while
   a slot is free, starts with the largest ctx whose KV fits what is left (whole blocks
   of 256 tokens per sequence, as llama-server rounds; the KV per token from its file
   and its cache types) and bytes shrunk by the KV it gives up, instead of stopping another model (what
   such a start takes is not learned):
   "b: ctx 32768 clamped to 28672 tokens to start beside 1 running model: its KV fits the
   7M left"; the listing's args and loaded_context_length show it. Only when that ctx is
   at least 4096 tokens (the floor): below it, with every slot taken, or without the
   figure, it starts with its ctx and the least recently used idle model is stopped as
   always. A start that fits gets its configured ctx back. Decided when a request or a
   load asks for a start.
   Failures: a client that disconnects releases its place at once; a client that reads
   nothing of its answer for send_timeout (default 30 s; 1 s once its model must make
   room for a request waiting past max_wait, or is unloaded) is disconnected and its
   request cancelled, so it cannot hold a model busy; an upstream hang-up
   or connect failure fails only that request (502, error JSON; after the answer began:
   the connection is cut); a model whose process cannot start fails its waiting
   requests at once with the reason (503, the fleet's message: errno, exit status and
   the last output lines). A model whose bytes exceed the whole byte budget (vram_budget
   = auto on a smaller device; a fixed budget below a reserve is refused at start) can
   never start: its requests get 503 at once, "cannot serve 'big': it needs 6G
   (6442450944 bytes) and can never fit: the byte budget is 4G (4294967296 bytes; other
   programs hold 0 now)" (a load: 500, the same words); nothing is stopped for it and
   nothing retries it, and the log line and the no_fit event come once, again only when
   its bytes or the budget change. What can be checked before a start (the binary, the model
   file, the command template) is checked before another model is stopped for it; a
   model evicted for a start that then fails is started again; after a failed start the
   model is not tried again for 1 s, doubling to 60 s per failure in a row: requests
   meanwhile get 503 with the last reason and Retry-After (POST /models/load tries at
   once). An idle upstream connection is dropped before the child's own keep-alive
   timeout, and a request the child closed the socket on before answering is resent
   once. A child is sent at most its own slot count of requests at once (`parallel`,
   or what its GET /props says: llama-server's total_slots); the rest wait here, in
   order, not in the child's accept queue, at most max_queue of them per model and in
   all (by default every request a client connection brings may wait: the connection
   table, 64, bounds them): a request that would wait past it gets 429 with Retry-After: 1 (503
   while its model's start is backed off); one that waited answers with
   X-Queue-Position: N, where it stood when it joined (1 = first).
   Watchdog (watchdog = DUR, off by default; rsd_fleet's watchdog options): every ready
   child's /health is polled each DUR; watchdog_failures failed polls in a row (3), or
   watchdog_errors proxied answers in a row with 5xx (5; 503 aside; a failed connection
   counts), and it is killed and started again after 1 s, doubling to 60 s; after
   watchdog_restarts restarts in a row (5) it is left stopped until a request asks for
   it. The log line ("failed pid N: model X: restarted by the watchdog (1 of at most 5
   in a row, in 1000 ms): GET /health did not answer (timed out), 3 polls in a row")
   says why.
   Reload (SIGHUP or POST /_rsd/reload): the --config file is read again and the
   command line's flags applied over it. New models are added (started when pinned or
   preload); removed ones take no new requests (their waiting ones get 503), finish
   what runs and stop; a model whose process would differ (model, command, args, ctx,
   parallel, ngl, env, reserve; llama_server, global args or start_timeout for
   llama_server models) is drained and, if it was running, started again with the new
   settings; ttl, pinned, aliases, preload and max_queue change in place; the rest
   keeps its process. Every change forgets the model's start backoff. listen,
   stop_grace, vram_budget, max_wait, start_backoff, the watchdog's, the kv cache's keys
   and event_history apply only at the next start (the answer lists each changed one in
   restart_needed); vram_budget = auto (kept auto) reads
   the device again, with the new vram_margin. A bad file, or one that cannot work,
   changes nothing: "FILE:LINE: message" is logged (and answered, 400). A model id
   keeps its index for the life of the process: at most 64 different ids over all
   reloads.
   Log (stderr): one line per process event ("rsd-serve: chat: starting pid 123 port
   40211", "... ready", "... stopping (evict)", "... exited"), requests with --verbose.
   Every line is one line: control bytes in it (a child's output quoted in a failure,
   newlines included) are written as \n, \x1b, ... (rsd_text_escape).
   Signals: SIGINT, SIGTERM and SIGQUIT stop every process gracefully (SIGTERM, then
   SIGKILL after stop_grace) and exit 0; a second one kills them at once and exits 1.
   Each model's process leads its own process group, and every signal goes to the
   group, so a wrapper (command = /bin/sh -c "...") takes its children with it; a
   model counts as stopped only once its whole group is gone. On Linux rsd-serve is a
   child subreaper: a wrapper's orphaned children are re-parented to it and reaped.
   After kill -9 of rsd-serve (nothing runs then) the kernel kills only the direct
   children (PR_SET_PDEATHSIG): llama-server itself, or a wrapper, whose own children
   survive. So write wrappers as `/bin/sh -c "exec llama-server ..."`: exec makes the
   server the direct child and it dies with rsd-serve.
   SIGHUP reloads the configuration (above; with an unchanged file nothing moves, so a
   closed terminal or an ssh logout costs nothing). The handlers only count the signal
   and write a byte to a self-pipe the loop polls; the work is done in the loop.
   SIGPIPE is ignored.
   Windows (rsd-serve.exe): Ctrl+C, Ctrl+Break or closing the console stop every process
   as SIGINT does (a second one kills them); each child is in a job object that the
   system kills when rsd-serve.exe ends in any way, its own children included; no
   SIGHUP (POST /_rsd/reload reloads); the slot directory is made under %TEMP%.
   Exit codes: 0 stopped by a signal, 1 cannot listen or start (a listen host name that
   does not resolve included), 64 bad flags or configuration (the message names
   file:line), 66 the config file cannot be read or is a directory. */
#define RESIDENCY_IMPLEMENTATION
#include "../../residency_http.h"
#include "rsd_serve.h"
#include "rsd_serve_affinity.h"
#include "rsd_serve_kv.h"
#include "rsd_serve_mem.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#if !defined(_WIN32)
#include <dirent.h>
#endif
#if defined(_WIN32) /* windows.h, winsock2.h and ws2tcpip.h come with residency_http.h */
#include <aclapi.h> /* the kv cache directory's owner-only DACL (advapi32) */
#include <sddl.h>
#if defined(_MSC_VER)
#pragma comment(lib, "advapi32.lib")
#endif
#define strsignal(sig) ((sig) == 9 ? "Killed" : "Terminated") /* no strsignal: the two we report */
#else
#include <poll.h>
#include <unistd.h>
#include <netdb.h>
#include <sys/socket.h>
#endif
#if defined(__linux__)
#include <sys/prctl.h>
#endif

enum {
    EX_OK = 0, EX_FAIL = 1, EX_USAGE = 64, EX_NOINPUT = 66,
    SRV_MAX_CONNS = 64,                  /* downstream connections (= jobs) */
    SRV_MAX_BODY = 1 << 20,              /* request body limit (413 over it) */
    SRV_RESPONSE_BYTES = 256 << 10,      /* per-connection send buffer */
    SRV_UP_READ = 64 << 10,              /* upstream client slot buffer: at most this many
                                            body bytes per on_body call */
    SRV_STASH = SRV_UP_READ,             /* the part of one upstream piece the client's send
                                            buffer could not take; the upstream is paused
                                            until it is out (rsd_http_pause stops the read
                                            loop at once, so one piece is the most) */
    SRV_OUT = 256 << 10,                 /* JSON answers we write ourselves */
    SRV_MAX_FDS = 2 * SRV_MAX_CONNS + 3 * RSD_PROCS_MAX + 64,
    SRV_UPSTREAM_TIMEOUT_MS = 3600000,   /* a proxied request (llama-server's -to default) */
    SRV_STALL_DRAIN_MS = 1000,           /* a stalled client of a model that must make room */
    SRV_CONFIG_MAX = 4 << 20,            /* config file size */
    SRV_MAX_SUBS = 16,                   /* open event streams (/_rsd/events, /models/sse) */
    SRV_EVENT_BYTES = 4096,              /* one event's JSON and its router form */
    SRV_ROUTER_EVENT_BYTES = 1536,       /* ... of which the router form may take this much */
    SRV_SSE_KEEPALIVE_MS = 15000         /* a comment on a quiet event stream */
};

/* The only globals: counted by the signal handlers, which also write a byte to the
   self-pipe so the loop's poll wakes at once (the work is done in the loop). */
static volatile sig_atomic_t g_signals; /* SIGINT, SIGTERM, SIGQUIT: stop */
static volatile sig_atomic_t g_hangups; /* SIGHUP: reload the configuration */
static int g_wake_fd = -1;              /* the self-pipe's write end */

#if defined(_WIN32)
/* Windows: Ctrl+C, Ctrl+Break and closing the console stop us as SIGINT does (the
   handler runs on a thread of its own; the loop polls at most 100 ms, so no wake-up). */
static BOOL WINAPI on_console(DWORD ev) {
    if (ev == CTRL_C_EVENT || ev == CTRL_BREAK_EVENT || ev == CTRL_CLOSE_EVENT) {
        g_signals++;
        return TRUE;
    }
    return FALSE;
}
#else
static void on_signal(int sig) {
    int e = errno;
    if (sig == SIGHUP) g_hangups++;
    else g_signals++;
    if (g_wake_fd >= 0) { ssize_t w = write(g_wake_fd, "", 1); (void)w; }
    errno = e;
}
#endif

/* ---- per-model command ------------------------------------------------------------ */
typedef struct srv_model {
    char cmd_buf[RSRV_CMD_MAX];
    const char *cmd_argv[RSRV_MAX_ARGS + 1];
    char env_buf[RSRV_CMD_MAX];
    const char *env[RSRV_MAX_ENV + 2];   /* the model's NAME=VALUE, then the hygiene entry */
    char extra_buf[2 * RSRV_CMD_MAX];
    const char *extra_argv[2 * RSRV_MAX_ARGS + 5]; /* -lv 4, global args, its args, --slot-save-path D */
    rsd_proc_spec spec;
    rsd_fleet_model_desc desc;
    char child_auth[RSRV_KEY_MAX + 8]; /* "Bearer K" from its --api-key K, "" = none */
} srv_model;

/* Per-model counters for /metrics (what the fleet's events tell). */
typedef struct srv_mstat {
    uint64_t requests, starts, readies, failed_starts, evictions, crashes;
    uint64_t started_at, ready_ms_last, ready_ms_sum;
} srv_mstat;

/* What a ready child says of itself (its GET /v1/models data[0], wire.md 1.4): the
   router's "meta" and the child's "aliases", as JSON text, for the process on port. */
enum { SRV_META_BYTES = 768, SRV_META_TIMEOUT_MS = 5000 };
typedef struct srv_meta {
    rsd_http_req_h req;    /* its GET /v1/models in flight (0 = none) */
    uint64_t ev_id;        /* the ready event whose router "loaded" waits for it (0 = none) */
    uint16_t port;         /* the process they describe (0 = none) */
    bool deferred;         /* ready, not asked yet: a request's answer goes first (meta_service) */
    uint64_t ready_ms;     /* when it became ready */
    char meta[SRV_META_BYTES];    /* {"vocab_type":..} or "" (it gave none) */
    char aliases[SRV_META_BYTES]; /* ["id"] or "" */
} srv_meta;

/* One residency event of the history: its JSON (text[0..len)) and, for the events the
   llama.cpp router also sends, the router's form (text[router_off..+router_len)). */
typedef struct srv_event srv_event;
struct srv_event {
    uint64_t id;
    char kind[16];
    int model;             /* -1 = none */
    uint16_t len, router_off, router_len;
    bool router_wait;      /* its router form is not complete yet (meta_done completes it) */
    char text[SRV_EVENT_BYTES];
};

/* An open event stream: the next event id it is to get. */
typedef struct srv_sub {
    bool used, router;
    rsd_http_sreq_h h;
    uint64_t next, last_write, skipped;
} srv_sub;

/* ---- one downstream request ------------------------------------------------------ */
typedef enum job_state { JOB_FREE = 0, JOB_WAIT, JOB_PROXY, JOB_DRAIN } job_state;

typedef struct job {
    job_state state;
    struct srv *srv;
    rsd_http_sreq_h sreq;
    int model;
    rsd_pool_req_h preq;
    bool granted;          /* holds an in-flight place: release or cancel once */
    rsd_http_req_h up;
    bool up_active;        /* the upstream request's event is still to come */
    uint16_t port;
    bool begun;            /* the answer's head went out */
    bool client_gone;
    bool broken;           /* the answer cannot be completed: cut the connection */
    bool up_done;          /* upstream finished OK; end the answer once the stash is out */
    bool paused;           /* upstream reading paused until the stash is out */
    bool sse;              /* the answer is a chunked text/event-stream (a cut one ends with an error event) */
    bool end_close;        /* it ended in an error: close the connection after the last chunk */
    char tail[2];          /* the last two upstream body bytes (is the stream at a frame's end?) */
    char *stash;
    size_t stash_len;
    uint64_t t0;
    uint64_t stall_since;  /* the stash waits and the client has taken nothing since (0 = not) */
    uint64_t seq;          /* arrival order (queue positions) */
    int queue_pos;         /* its place in its model's queue when it joined (1 = first); 0 = never waited */
    char method[8];
    char path[96];
    int aff_phase;         /* session affinity: AFF_* (0 = none for this request) */
    int aff_slot;          /* the child slot it holds in the model's rsrv_aff (-1 = none) */
    char *body2;           /* the body with "id_slot" added (NULL = the client's) */
    size_t body2_len;
    bool aff_has;          /* it has a session (prompt_cache_key or X-Session-Id) */
    uint64_t aff_session;  /* its hash */
    bool queued;           /* waited for its place (a grant event when it gets it) */
} job;

enum { AFF_NONE = 0, AFF_SAMPLE, AFF_ERASE, AFF_READY };

/* Per model: session affinity counters (GET /_rsd/affinity). */
typedef struct srv_aff_stats {
    uint64_t warm, fresh, handoffs, erased, erase_failed, unpinned, samples_failed;
} srv_aff_stats;

/* Per model: the kv cache steps of its process (the "kv cache" section). */
typedef struct srv_kv {
    int phase;             /* KV_*: the step whose answer is awaited */
    uint16_t port;
    int64_t pid;
    uint64_t key, deadline;
    uint64_t run_key;      /* the key taken when its process got ready */
    int64_t run_pid;
    bool run_key_ok;
    rsd_http_req_h up;
    bool up_active;
    char build[RSRV_KV_BUILD_MAX];
    int nids, cur;         /* the slots to save or restore, the one in flight */
    int ids[RSRV_KV_MAX_SLOTS];
    int64_t want[RSRV_KV_MAX_SLOTS]; /* restore: the tokens its save held */
    int done_slots;
    int64_t done_bytes;    /* saved bytes, or restored tokens */
    uint64_t restored;     /* slots restored (bit per slot) */
    bool aff_kept;         /* aff_saved holds the session table at the stop */
    rsrv_aff aff_saved;
    uint64_t saves, save_failures, restores, misses;
} srv_kv;

/* A lease as rsd-serve tells it (the pool holds its bytes): ready only once the memory is
   really free (see "leases" below). */
typedef struct srv_lease {
    uint32_t id;                       /* the pool's lease id; 0 = none */
    int n;                             /* the children stopped for it, as they were at the take */
    int model[RSD_POOL_MAX_SLOTS];
    int64_t pid[RSD_POOL_MAX_SLOTS];
    bool exited;                       /* every one of them has exited */
    bool ready;                        /* told ready (once: the memory was seen free) */
    uint32_t tries;                    /* device readings tried since the exits */
    bool dev_ok;                       /* dev holds the last of them */
    rsd_devmem_dev dev;                /* free bytes; own = what the stopped pids still hold */
} srv_lease;

typedef struct srv {
    rsrv_config *cfg;
    rsrv_opts opts;
    srv_model *models;
    rsd_http_server *hs;
    rsd_http_client *hc;
    rsd_fleet *fleet;
    job jobs[SRV_MAX_CONNS];
    rsrv_aff *aff;         /* per model: who owns its process's slots */
    srv_aff_stats *aff_stats;
    rsd_json_tok *aff_toks;
    char slot_dir[RSRV_PATH_MAX]; /* --slot-save-path given to affinity models and with
                                     kv_cache_dir to every llama_server model ("" = none) */
    srv_kv *kv;            /* per model */
    rsd_json_tok *kv_toks;
    char kv_dir[RSRV_PATH_MAX]; /* kv_cache_dir in use ("" = off) */
    uint64_t kv_bytes, kv_evicted;
    uint32_t kv_timeout_ms;
    uint64_t boot_unix_ms; /* wall clock at the loop's clock 0 (listing times) */
    char *out;
    bool stopping;
    uint64_t now;          /* the loop's clock (for the client's callbacks) */
    uint64_t stop_at;
    srv_mstat mstat[RSRV_MAX_MODELS];
    srv_meta meta[RSRV_MAX_MODELS];
    struct { rsd_http_sreq_h h; int only; bool used; } list_wait[SRV_MAX_CONNS]; /* listings held for a meta */
    int n_list_wait;
    srv_event *events;     /* the history ring: event id e at events[e % ev_cap] */
    uint32_t ev_cap;
    uint64_t ev_last;      /* id of the newest event (0 = none yet) */
    srv_sub subs[SRV_MAX_SUBS];
    uint64_t epoch_ms, epoch_loop_ms; /* wall clock at loop time epoch_loop_ms */
    char listen_addr[RSRV_HOST_MAX]; /* the listen host, resolved (numeric) */
    uint64_t job_seq;
    uint64_t queue_full;   /* requests refused with 429 (max_queue) */
    int argc;              /* the command line (flags are applied again on a reload) */
    char **argv;
    bool restart[RSRV_MAX_MODELS]; /* changed by a reload while running: load once it stopped */
    uint64_t reloads, reload_failures;
    rsd_devmem *devmem;    /* vram_budget = auto: the device memory probe (else NULL) */
    rsd_devmem_dev dm_last;/* its last reading (rsd_devmem_pick), for /status */
    uint64_t dm_foreign;   /* what it counted against the budget for others */
    uint64_t dm_reads;
    uint64_t dm_try_ms;    /* loop time of the last reading tried (devmem_service's pace) */
    uint64_t dm_lease_ms;  /* the same for the readings leases wait on (lease_service) */
    uint64_t nofit_bytes[RSRV_MAX_MODELS], nofit_budget[RSRV_MAX_MODELS]; /* last refusal told (no_fit) */
    struct srv_mem *mem;   /* per model: what it costs (the "memory" section) */
    rsd_gguf *gguf;        /* the header reader the estimates use */
    char *mem_tail;        /* a child's output, read for its buffer figures */
    uint32_t fit_ctx[RSRV_MAX_MODELS];  /* the clamped ctx its fleet spec holds (0 = as configured) */
    srv_lease leases[RSD_POOL_MAX_LEASES];
} srv;

static void status_queue(srv *s, rsd_json_writer *w, int m, uint64_t now);
static void kv_status(srv *s, rsd_json_writer *w, int m);
static void answer_reload(srv *s, const rsd_http_server_event *ev, uint64_t now);
static bool model_running(srv *s, int m);
static void devmem_admit(srv *s, uint64_t now);
static void mem_status(srv *s, rsd_json_writer *w, int m);
static void mem_w_pool(srv *s, rsd_json_writer *w);
static void mem_w_model(srv *s, rsd_json_writer *w, const char *key, int m);
static int64_t proc_rss(int64_t pid);
static srv_event *ev_begin(srv *s, rsd_json_writer *w, const char *kind, int m, uint64_t now);
static void ev_commit(srv *s, srv_event *e, rsd_json_writer *w);
static void start_fit(srv *s, int m, uint64_t now);

static void logf_(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* One log line: "rsd-serve: " and the text with its control bytes made visible
   (rsd_text_escape), so a child's output lines (quoted in failure messages), a
   client's path or an odd id stay on one line and send nothing to a terminal. */
static void log_line(const char *text) {
    static char esc[4 * 4096 + 1];
    (void)rsd_text_escape(rsd_str_c(text), esc, sizeof esc);
    fprintf(stderr, "rsd-serve: %s\n", esc);
    fflush(stderr);
}

static void logf_(const char *fmt, ...) {
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log_line(text);
}

static void lib_log(void *user, int level, uint32_t item, const char *msg, const char *where) {
    (void)user;
    (void)where;
    logf_("log %d [%s] %s", level, rsd_log_item_name(item), msg ? msg : "");
}

/* ---- answers we write ourselves ----------------------------------------------------- */
/* retry_after_s > 0 adds "Retry-After: N". */
static size_t cors_headers(srv *s, rsd_http_sreq_h h, rsd_http_header *hd, size_t n);
static void ev_request(srv *s, const char *kind, int m, uint64_t now, int64_t waited_ms);
static void ev_check_failed(srv *s, int m, uint64_t now);
static void no_fit(srv *s, int m, uint64_t now, char *text, size_t cap);
static void respond_json_retry(srv *s, rsd_http_sreq_h h, int status, const char *body, size_t n,
                               uint32_t retry_after_s) {
    rsd_http_header hd[4];
    size_t nh = 1;
    char ra[16];
    hd[0].name = rsd_str_c("Content-Type");
    hd[0].value = rsd_str_c("application/json; charset=utf-8");
    snprintf(ra, sizeof ra, "%u", (unsigned)retry_after_s);
    if (retry_after_s) {
        hd[nh].name = rsd_str_c("Retry-After");
        hd[nh++].value = rsd_str_c(ra);
    }
    nh = cors_headers(s, h, hd, nh);
    (void)rsd_http_respond(s->hs, h, status, hd, nh, body, n);
}

static void respond_json(srv *s, rsd_http_sreq_h h, int status, const char *body, size_t n) {
    respond_json_retry(s, h, status, body, n, 0);
}

/* The error envelope: {"error":{"code":C,"message":M,"type":T}} (llama.cpp's, wire.md
   1.13), or with code_str {"error":{"message":M,"type":T,"param":P,"code":"S"}} (OpenAI's);
   Retry-After when retry_after_s > 0. A message that is not UTF-8 (child output) says less. */
static void respond_error_obj(srv *s, rsd_http_sreq_h h, int status, const char *type, const char *msg,
                              const char *param, const char *code_str, uint32_t retry_after_s) {
    rsd_json_writer w;
    int n;
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "error");
    rsd_json_w_begin_object(&w);
    if (!code_str) {
        rsd_json_w_key(&w, "code");
        rsd_json_w_int(&w, status);
    }
    rsd_json_w_key(&w, "message");
    rsd_json_w_str(&w, msg);
    rsd_json_w_key(&w, "type");
    rsd_json_w_str(&w, type);
    if (param) {
        rsd_json_w_key(&w, "param");
        rsd_json_w_str(&w, param);
    }
    if (code_str) {
        rsd_json_w_key(&w, "code");
        rsd_json_w_str(&w, code_str);
    }
    rsd_json_w_end_object(&w);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n < 0) {
        respond_error_obj(s, h, status, type, "error (message not printable)", param, code_str, retry_after_s);
        return;
    }
    respond_json_retry(s, h, status, s->out, (size_t)n, retry_after_s);
}

static void respond_error_retry(srv *s, rsd_http_sreq_h h, int status, const char *type, const char *msg,
                                uint32_t retry_after_s) {
    respond_error_obj(s, h, status, type, msg, NULL, NULL, retry_after_s);
}

static void respond_error(srv *s, rsd_http_sreq_h h, int status, const char *type, const char *msg) {
    respond_error_obj(s, h, status, type, msg, NULL, NULL, 0);
}

/* 503 for model m that cannot start now: why (the fleet's last reason when NULL), and
   Retry-After while its next start is backed off. */
static void respond_unavailable(srv *s, rsd_http_sreq_h h, int m, uint64_t now, const char *why) {
    rsd_fleet_model_info mi;
    char msg[RSD_FLEET_MESSAGE_MAX + 192];
    uint32_t retry = 0;
    memset(&mi, 0, sizeof mi);
    (void)rsd_fleet_query_model(s->fleet, m, &mi);
    if (mi.retry_at_ms > now) retry = (uint32_t)((mi.retry_at_ms - now + 999) / 1000);
    if (!why) why = mi.last_error ? mi.last_error : "model process failed to start";
    if (retry)
        snprintf(msg, sizeof msg, "cannot serve '%s': %s (its start failed; not retried for %u s)",
                 s->cfg->models[m].id, why, (unsigned)retry);
    else
        snprintf(msg, sizeof msg, "cannot serve '%s': %s", s->cfg->models[m].id, why);
    respond_error_retry(s, h, 503, "unavailable_error", msg, retry);
}

static void respond_404(srv *s, rsd_http_sreq_h h) {
    static const char body[] = "{\"error\":{\"message\":\"File Not Found\",\"type\":\"not_found_error\",\"code\":404}}";
    respond_json(s, h, 404, body, sizeof body - 1);
}

/* The view of n bytes at p (a NUL among them stays in it). */
static rsd_str str_n(const char *p, size_t n) {
    rsd_str v;
    v.ptr = p;
    v.len = n;
    return v;
}

/* 404 for a model name that names no model; the name as the client sent it, escaped
   (rsd_text_escape: a \u0000 in it shows as \x00, not as a shorter name). */
static void respond_unknown_model(srv *s, rsd_http_sreq_h h, rsd_str name) {
    char esc[RSRV_ID_MAX * 4], msg[sizeof esc + 32];
    (void)rsd_text_escape(name, esc, sizeof esc);
    snprintf(msg, sizeof msg, "The model '%s' does not exist", esc);
    respond_error_obj(s, h, 404, "invalid_request_error", msg, "model", "model_not_found", 0);
}

/* Router-style state of a model (wire.md 1.4). */
static const char *router_state(const rsd_fleet_model_info *mi) {
    switch (mi->pool.state) {
    case RSD_POOL_SLOT_STARTING: return "loading";
    case RSD_POOL_SLOT_READY:
    case RSD_POOL_SLOT_DRAINING: return "loaded";
    case RSD_POOL_SLOT_EMPTY: return mi->pool.waiting || mi->pool.preloads ? "loading" : "unloaded";
    default: return "unloaded"; /* STOPPING, FAILED */
    }
}

/* Wall-clock seconds / ms of a loop-clock time (rsd_now_ms is monotonic). */
/* A model's "id" and "aliases" members, as the router writes them in a listing entry and
   in an event's info. */
static void w_model_names(rsd_json_writer *w, const rsrv_model *m) {
    int k;
    rsd_json_w_key(w, "id");
    rsd_json_w_str(w, m->id);
    rsd_json_w_key(w, "aliases");
    rsd_json_w_begin_array(w);
    for (k = 0; k < m->naliases; k++) rsd_json_w_str(w, m->aliases[k]);
    rsd_json_w_end_array(w);
}

/* Its "tags" member (sorted, as the router's std::set gives them). */
static void w_model_tags(rsd_json_writer *w, const rsrv_model *m) {
    rsd_json_w_key(w, "tags");
    rsd_json_w_begin_array(w);
    if (m->pinned) rsd_json_w_str(w, "pinned:true"); /* protected for rsd-ensure (R8) */
    rsd_json_w_end_array(w);
}

static uint64_t unix_ms_of(const srv *s, uint64_t t) { return s->boot_unix_ms + t; }

/* GET /models, /v1/models, /api/v0/models: the router's listing; only >= 0: that
   model's entry alone (GET /v1/models/ID). A locked host lists its locked set. */
static void answer_models(srv *s, rsd_http_sreq_h h, uint64_t now, int only) {
    rsd_json_writer w;
    int i, k, n;
    rsd_json_w_init(&w, s->out, SRV_OUT);
    if (only < 0) {
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "object");
        rsd_json_w_str(&w, "list");
        rsd_json_w_key(&w, "data");
        rsd_json_w_begin_array(&w);
    }
    for (i = 0; i < s->cfg->nmodels; i++) {
        const rsrv_model *m = &s->cfg->models[i];
        rsd_fleet_model_info mi;
        char buf[RSD_PROC_ARG_BYTES_DEFAULT], arg[RSD_PROC_ARG_BYTES_DEFAULT + 64];
        if (m->retired) continue; /* removed by a reload */
        const char *argv[RSD_PROC_MAX_ARGS];
        rsd_proc_spec spec;
        int argc;
        bool loaded;
        if ((only >= 0 && i != only) || !rsrv_lock_allows(s->cfg, i)) continue;
        memset(&mi, 0, sizeof mi);
        (void)rsd_fleet_query_model(s->fleet, i, &mi);
        loaded = !strcmp(router_state(&mi), "loaded");
        rsd_json_w_begin_object(&w);
        w_model_names(&w, m);
        w_model_tags(&w, m);
        rsd_json_w_key(&w, "object");
        rsd_json_w_str(&w, "model");
        rsd_json_w_key(&w, "owned_by");
        rsd_json_w_str(&w, "llamacpp");
        rsd_json_w_key(&w, "created"); /* the process's start, else now (seconds) */
        rsd_json_w_int(&w, (int64_t)(unix_ms_of(s, mi.started_ms ? mi.started_ms : now) / 1000));
        rsd_json_w_key(&w, "max_context_length"); /* ctx as configured (null: the model's own) */
        if (m->ctx) rsd_json_w_int(&w, m->ctx);
        else rsd_json_w_null(&w);
        if (loaded && m->ctx) { /* what one request gets: ctx (clamped: start_fit) / slots */
            rsd_json_w_key(&w, "loaded_context_length");
            rsd_json_w_int(&w, (s->fit_ctx[i] ? s->fit_ctx[i] : m->ctx) / (m->parallel > 1 ? m->parallel : 1));
        }
        rsd_json_w_key(&w, "status");
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "value");
        rsd_json_w_str(&w, router_state(&mi));
        rsd_json_w_key(&w, "last_used"); /* ms since the epoch, null = never */
        if (mi.last_used_ms) rsd_json_w_int(&w, (int64_t)unix_ms_of(s, mi.last_used_ms));
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "args");
        rsd_json_w_begin_array(&w);
        spec = s->models[i].spec;
        spec.port = mi.port;
        if (s->fit_ctx[i]) spec.ctx = s->fit_ctx[i]; /* its next (or current) start's */
        argc = rsd_procs_expand(&spec, buf, sizeof buf, argv, RSD_PROC_MAX_ARGS);
        for (k = 0; k < argc; k++) { /* secret values as *** */
            (void)rsd_arg_redact(k ? argv[k - 1] : NULL, argv[k], arg, sizeof arg);
            rsd_json_w_str(&w, arg);
        }
        rsd_json_w_end_array(&w);
        if (mi.last_result < 0 && !strcmp(router_state(&mi), "unloaded")) {
            rsd_json_w_key(&w, "failed");
            rsd_json_w_bool(&w, true);
            rsd_json_w_key(&w, "exit_code"); /* its own; 128+N for signal N; 127 never ran */
            rsd_json_w_int(&w, mi.exit_code);
        }
        rsd_json_w_end_object(&w);
        if (loaded && s->meta[i].port == mi.port && s->meta[i].meta[0]) { /* what the child says (wire.md 1.4) */
            rsd_json_w_key(&w, "meta");
            rsd_json_w_raw(&w, s->meta[i].meta, strlen(s->meta[i].meta));
        }
        rsd_json_w_end_object(&w);
    }
    if (only < 0) {
        rsd_json_w_end_array(&w);
        rsd_json_w_end_object(&w);
    }
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_error(s, h, 500, "server_error", "listing too large");
    else respond_json(s, h, 200, s->out, (size_t)n);
}

/* GET /props: the router's properties (wire.md 1.9). */
static void answer_props(srv *s, rsd_http_sreq_h h) {
    char body[512];
    int n = snprintf(body, sizeof body,
                     "{\"role\":\"router\",\"max_instances\":%d,\"models_autoload\":true,\"model_alias\":\"rsd-serve\","
                     "\"model_path\":\"none\",\"default_generation_settings\":{\"params\":null,\"n_ctx\":0},"
                     "\"ui_settings\":{},\"build_info\":\"rsd-serve\",\"cors_proxy_enabled\":false}",
                     s->cfg->max_models);
    respond_json(s, h, 200, body, (size_t)n);
}

/* GET /status: every model and the pool's counters. */
static void answer_status(srv *s, rsd_http_sreq_h h, uint64_t now) {
    rsd_json_writer w;
    rsd_pool_info *st = (rsd_pool_info *)calloc(1, sizeof *st);
    int i, n;
    if (!st) { respond_error(s, h, 500, "server_error", "out of memory"); return; }
    rsd_pool_query(rsd_fleet_pool(s->fleet), st);
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "max_models");
    rsd_json_w_int(&w, s->cfg->max_models);
    rsd_json_w_key(&w, "vram_budget_bytes");
    rsd_json_w_int(&w, (int64_t)s->cfg->vram_budget_bytes);
    rsd_json_w_key(&w, "reserved_bytes");
    rsd_json_w_int(&w, (int64_t)st->reserved_bytes);
    if (s->devmem) { /* vram_budget = auto: the last reading */
        rsd_json_w_key(&w, "device_memory");
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "device");
        rsd_json_w_str(&w, s->dm_last.name);
        rsd_json_w_key(&w, "pool");
        rsd_json_w_str(&w, rsd_devmem_pool_str(s->dm_last.pool));
        rsd_json_w_key(&w, "total_bytes");
        rsd_json_w_int(&w, (int64_t)(s->dm_last.total_bytes > INT64_MAX ? INT64_MAX : s->dm_last.total_bytes));
        rsd_json_w_key(&w, "used_bytes");
        rsd_json_w_int(&w, (int64_t)(s->dm_last.used_bytes > INT64_MAX ? INT64_MAX : s->dm_last.used_bytes));
        rsd_json_w_key(&w, "others_bytes");
        rsd_json_w_int(&w, (int64_t)s->dm_foreign);
        rsd_json_w_key(&w, "margin_bytes");
        rsd_json_w_int(&w, (int64_t)rsrv_eff_vram_margin(s->cfg));
        rsd_json_w_key(&w, "reads");
        rsd_json_w_int(&w, (int64_t)s->dm_reads);
        rsd_json_w_key(&w, "held_starts"); /* models waiting only for memory others hold */
        rsd_json_w_int(&w, st->models_foreign_held);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_key(&w, "memory"); /* the pool's bytes */
    rsd_json_w_begin_object(&w);
    mem_w_pool(s, &w);
    rsd_json_w_end_object(&w);
    rsd_json_w_key(&w, "live");
    rsd_json_w_int(&w, st->live_slots);
    rsd_json_w_key(&w, "running");
    rsd_json_w_int(&w, st->running);
    rsd_json_w_key(&w, "waiting");
    rsd_json_w_int(&w, st->waiting);
    rsd_json_w_key(&w, "stopping");
    rsd_json_w_bool(&w, s->stopping);
    rsd_json_w_key(&w, "max_queue");
    rsd_json_w_int(&w, rsrv_eff_max_queue(s->cfg));
    rsd_json_w_key(&w, "queue_full"); /* requests refused with 429 */
    rsd_json_w_int(&w, (int64_t)s->queue_full);
    rsd_json_w_key(&w, "counters");
    rsd_json_w_begin_object(&w);
#define SRV_COUNTER(name) rsd_json_w_key(&w, #name); rsd_json_w_int(&w, (int64_t)st->name);
    SRV_COUNTER(acquires) SRV_COUNTER(grants_immediate) SRV_COUNTER(grants_queued) SRV_COUNTER(cancels)
    SRV_COUNTER(releases) SRV_COUNTER(spawns) SRV_COUNTER(readies) SRV_COUNTER(load_failures)
    SRV_COUNTER(crashes) SRV_COUNTER(exits) SRV_COUNTER(evictions) SRV_COUNTER(ttl_expiries)
    SRV_COUNTER(unloads) SRV_COUNTER(fails) SRV_COUNTER(starve_drains) SRV_COUNTER(no_fit)
    SRV_COUNTER(backoffs) SRV_COUNTER(restores)
#undef SRV_COUNTER
    rsd_json_w_end_object(&w);
    rsd_json_w_key(&w, "models");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels; i++) {
        const rsrv_model *m = &s->cfg->models[i];
        rsd_fleet_model_info mi;
        if (m->retired && !model_running(s, i)) continue; /* removed by a reload, gone */
        memset(&mi, 0, sizeof mi);
        (void)rsd_fleet_query_model(s->fleet, i, &mi);
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "id");
        rsd_json_w_str(&w, m->id);
        if (m->retired) { /* still draining after a reload removed it */
            rsd_json_w_key(&w, "removed");
            rsd_json_w_bool(&w, true);
        }
        rsd_json_w_key(&w, "state");
        rsd_json_w_str(&w, mi.pool.slot >= 0 ? rsd_pool_slot_state_str(mi.pool.state) : "unloaded");
        rsd_json_w_key(&w, "pid");
        rsd_json_w_int(&w, mi.pid);
        rsd_json_w_key(&w, "port");
        rsd_json_w_int(&w, mi.port);
        rsd_json_w_key(&w, "in_flight");
        rsd_json_w_int(&w, mi.pool.running);
        rsd_json_w_key(&w, "waiting");
        rsd_json_w_int(&w, mi.pool.waiting);
        rsd_json_w_key(&w, "reserve_bytes");
        rsd_json_w_int(&w, (int64_t)mi.pool.reserve_bytes);
        rsd_json_w_key(&w, "pinned");
        rsd_json_w_bool(&w, mi.pool.pinned);
        rsd_json_w_key(&w, "ttl_s");
        rsd_json_w_double(&w, mi.pool.ttl_ms / 1000.0);
        rsd_json_w_key(&w, "last_used_ms_ago");
        if (mi.last_used_ms) rsd_json_w_int(&w, (int64_t)(now - mi.last_used_ms));
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "idle_unload_in_ms");
        if (mi.idle_deadline_ms != RSD_NO_DEADLINE && mi.idle_deadline_ms > 0)
            rsd_json_w_int(&w, mi.idle_deadline_ms > now ? (int64_t)(mi.idle_deadline_ms - now) : 0);
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "uptime_ms");
        if (mi.started_ms) rsd_json_w_int(&w, (int64_t)(now - mi.started_ms));
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "last_error");
        if (mi.last_result < 0) rsd_json_w_str(&w, rsd_result_str(mi.last_result));
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "retry_in_ms"); /* its start failed: no new one before then */
        if (mi.retry_at_ms > now) rsd_json_w_int(&w, (int64_t)(mi.retry_at_ms - now));
        else rsd_json_w_null(&w);
        status_queue(s, &w, i, now);
        kv_status(s, &w, i);
        mem_status(s, &w, i);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    free(st);
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_error(s, h, 500, "server_error", "status too large");
    else respond_json(s, h, 200, s->out, (size_t)n);
}

/* The "model" of a management body, as a model index; answers and returns -1 when
   there is none (404 for load as the router, 400 for unload). */
static int body_model_index(srv *s, const rsd_http_server_event *ev, bool load, char *name, size_t cap) {
    size_t len = 0;
    int r = rsrv_body_model(ev->body.ptr, ev->body.len, name, cap, &len), m;
    if (r == -1) {
        respond_error(s, ev->req, 500, "server_error", "request body is not a JSON object");
        return -1;
    }
    m = r == 1 ? rsrv_find(s->cfg, name, len) : -1;
    if (m < 0) {
        if (load) respond_404(s, ev->req);
        else respond_error(s, ev->req, 400, "invalid_request_error", "model is not found");
    }
    return m;
}

static bool model_running(srv *s, int m) {
    rsd_fleet_model_info mi;
    memset(&mi, 0, sizeof mi);
    if (rsd_fleet_query_model(s->fleet, m, &mi) != RSD_OK) return false;
    return mi.pool.slot >= 0 && (mi.pool.state == RSD_POOL_SLOT_STARTING || mi.pool.state == RSD_POOL_SLOT_READY ||
                                 mi.pool.state == RSD_POOL_SLOT_DRAINING);
}

static void answer_load(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    char name[RSRV_ID_MAX];
    static const char ok[] = "{\"success\":true}";
    int m = body_model_index(s, ev, true, name, sizeof name), r;
    if (m < 0) return;
    if (!rsrv_lock_allows(s->cfg, m)) { /* a locked host loads nothing else */
        char msg[RSRV_MAX_MODELS * (RSRV_ID_MAX + 4) + 96];
        int g = rsrv_lock_gate(s->cfg, true, name, strlen(name), &r, msg, sizeof msg);
        respond_error(s, ev->req, g ? g : 409, "invalid_request_error", msg);
        return;
    }
    if (model_running(s, m)) {
        respond_error(s, ev->req, 400, "invalid_request_error", "model is already running");
        return;
    }
    devmem_admit(s, now);
    start_fit(s, m, now);
    r = rsd_fleet_load(s->fleet, m, now);
    if (r < 0) {
        char msg[RSD_FLEET_MESSAGE_MAX + 160];
        rsd_fleet_model_info mi;
        memset(&mi, 0, sizeof mi);
        (void)rsd_fleet_query_model(s->fleet, m, &mi);
        snprintf(msg, sizeof msg, "cannot load '%s': %s", s->cfg->models[m].id,
                 r == RSD_ERR_FLEET_START && mi.last_error ? mi.last_error : rsd_result_str(r));
        if (r == RSD_ERR_FLEET_START) ev_check_failed(s, m, now);
        if (r == RSD_ERR_POOL_NO_FIT) no_fit(s, m, now, msg, sizeof msg);
        respond_error(s, ev->req, 500, "server_error", msg);
        return;
    }
    logf_("%s: load requested", s->cfg->models[m].id);
    ev_request(s, "load", m, now, -1);
    respond_json(s, ev->req, 200, ok, sizeof ok - 1);
}

static void answer_unload(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    char name[RSRV_ID_MAX];
    static const char ok[] = "{\"success\":true}";
    int m = body_model_index(s, ev, false, name, sizeof name), r;
    if (m < 0) return;
    if (!model_running(s, m)) {
        respond_error(s, ev->req, 400, "invalid_request_error", "model is not running");
        return;
    }
    r = rsd_pool_unload(rsd_fleet_pool(s->fleet), m, RSD_POOL_UNLOAD_DRAIN, now);
    if (r < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot unload '%s': %s", s->cfg->models[m].id, rsd_result_str(r));
        respond_error(s, ev->req, 500, "server_error", msg);
        return;
    }
    logf_("%s: unload requested", s->cfg->models[m].id);
    ev_request(s, "unload", m, now, -1);
    respond_json(s, ev->req, 200, ok, sizeof ok - 1);
}

/* ---- jobs ------------------------------------------------------------------------ */
static job *job_by_sreq(srv *s, rsd_http_sreq_h h) {
    int i;
    for (i = 0; i < SRV_MAX_CONNS; i++)
        if (s->jobs[i].state != JOB_FREE && s->jobs[i].sreq.id == h.id) return &s->jobs[i];
    return NULL;
}

static job *job_new(srv *s) {
    int i;
    for (i = 0; i < SRV_MAX_CONNS; i++)
        if (s->jobs[i].state == JOB_FREE) {
            job *j = &s->jobs[i];
            memset(j, 0, sizeof *j);
            j->srv = s;
            j->aff_slot = -1;
            return j;
        }
    return NULL;
}

/* Gives the in-flight place back (once). */
static void job_release(srv *s, job *j, uint64_t now, bool cancel) {
    if (j->aff_slot >= 0) { /* finishing never erases: the slot keeps its session's KV */
        rsrv_aff_put(&s->aff[j->model], j->aff_slot);
        j->aff_slot = -1;
    }
    if (j->granted) {
        if (cancel) (void)rsd_fleet_cancel(s->fleet, j->preq, now);
        else (void)rsd_fleet_release(s->fleet, j->preq, now);
        j->granted = false;
    }
}

static void job_free(srv *s, job *j, uint64_t now) {
    job_release(s, j, now, true);
    if (j->paused && j->up_active) (void)rsd_http_pause(s->hc, j->up, false);
    j->state = JOB_FREE;
    free(j->stash); /* rare (a slow client): give the pages back */
    j->stash = NULL;
    free(j->body2);
    j->body2 = NULL;
    j->stash_len = 0;
    j->sreq.id = 0;
}

static void job_log(srv *s, job *j, int status, uint64_t now) {
    if (s->opts.verbose)
        logf_("%s %s %s %d %.1f ms", j->method, j->path, s->cfg->models[j->model].id, status, (double)(now - j->t0));
}

/* "X-Queue-Position: N" on the answer of a request that waited (its place when it
   joined its model's queue, 1 = first); 1 header written or 0. */
static size_t job_queue_header(const job *j, rsd_http_header *h, char *buf, size_t cap) {
    if (!j->queue_pos) return 0;
    snprintf(buf, cap, "%d", j->queue_pos);
    h->name = rsd_str_c("X-Queue-Position");
    h->value = rsd_str_c(buf);
    return 1;
}

/* Starts the downstream answer with the upstream's status, type and framing (the
   upstream head, read while its body streams). */
static bool job_begin(srv *s, job *j) {
    rsd_http_req_info hd;
    rsd_http_header out[4];
    rsd_str ct;
    size_t nh = 0;
    int r;
    char qp[16];
    if (rsd_http_client_query_req(s->hc, j->up, &hd) != RSD_OK) return false;
    ct = rsd_http_header_get(hd.headers, hd.num_headers, "Content-Type");
    if (ct.ptr) {
        out[nh].name = rsd_str_c("Content-Type");
        out[nh++].value = ct;
    }
    nh += job_queue_header(j, out + nh, qp, sizeof qp);
    nh = cors_headers(s, j->sreq, out, nh);
    if (hd.framing.chunked) r = rsd_http_stream_begin(s->hs, j->sreq, hd.status, out, nh);
    else r = rsd_http_stream_begin_raw(s->hs, j->sreq, hd.status, out, nh, hd.framing.content_length);
    if (r != RSD_OK) return false;
    j->begun = true;
    j->sse = hd.framing.chunked && ct.len >= 17 && !strncmp(ct.ptr, "text/event-stream", 17);
    return true;
}

/* Upstream body bytes (from inside rsd_http_client_step): forwarded as far as the
   client's send buffer takes them; the rest (at most one piece, SRV_UP_READ) goes to
   the stash and the upstream is paused until jobs_service has sent it. */
static void on_up_body(void *user, const char *data, size_t len) {
    job *j = (job *)user;
    srv *s = j->srv;
    size_t room;
    if (j->broken || j->client_gone || !len) return;
    if (!j->begun && !job_begin(s, j)) { j->broken = true; return; }
    if (j->stash_len) { j->broken = true; return; } /* cannot happen: paused while stashed */
    if (len >= 2) j->tail[0] = data[len - 2];
    else j->tail[0] = j->tail[1];
    j->tail[1] = data[len - 1];
    room = rsd_http_stream_room(s->hs, j->sreq);
    if (room) {
        size_t n = room < len ? room : len;
        if (rsd_http_stream_write(s->hs, j->sreq, data, n) != RSD_OK) { j->broken = true; return; }
        data += n;
        len -= n;
        if (!len) return;
    }
    if (!j->stash) j->stash = (char *)malloc(SRV_STASH);
    if (!j->stash || len > SRV_STASH) { j->broken = true; return; }
    memcpy(j->stash, data, len);
    j->stash_len = len;
    if (!j->stall_since) j->stall_since = s->now;
    if (!j->paused) {
        (void)rsd_http_pause(s->hc, j->up, true);
        j->paused = true;
    }
}

/* A streamed (SSE) answer whose child failed mid-stream ends with an OpenAI error object
   as an `event: error` frame (after a blank line when the cut left a frame open), then
   the stream's proper end: the OpenAI SDKs raise it as an API error, not a network one,
   and plain SSE readers see why. What the client's buffer does not take is stashed and
   sent by jobs_service (JOB_DRAIN) before the end. False: it could not be (cut it). */
static bool job_sse_error(srv *s, job *j, const char *msg) {
    rsd_json_writer w;
    char text[1024];
    size_t k = 0, n, room;
    int len;
    if (!(j->tail[0] == '\n' && j->tail[1] == '\n')) {
        memcpy(text, "\n\n", 2);
        k = 2;
    }
    memcpy(text + k, "event: error\ndata: ", 19);
    k += 19;
    rsd_json_w_init(&w, text + k, sizeof text - k - 2);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "error");
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "code");
    rsd_json_w_int(&w, 502);
    rsd_json_w_key(&w, "message");
    rsd_json_w_str(&w, msg);
    rsd_json_w_key(&w, "type");
    rsd_json_w_str(&w, "server_error");
    rsd_json_w_end_object(&w);
    rsd_json_w_end_object(&w);
    len = rsd_json_w_finish(&w);
    if (len < 0) return false;
    k += (size_t)len;
    memcpy(text + k, "\n\n", 2);
    n = k + 2;
    k = 0;
    room = j->stash_len ? 0 : rsd_http_stream_room(s->hs, j->sreq);
    if (room) {
        k = room < n ? room : n;
        if (rsd_http_stream_write(s->hs, j->sreq, text, k) != RSD_OK) return false;
    }
    if (k < n) { /* behind what is stashed already, or what did not fit */
        char *st = (char *)realloc(j->stash, j->stash_len + (n - k) > SRV_STASH ? j->stash_len + (n - k) : SRV_STASH);
        if (!st) return false;
        j->stash = st;
        memcpy(j->stash + j->stash_len, text + k, n - k);
        j->stash_len += n - k;
    }
    return true;
}

/* Sends a granted job to its model's process. */
static bool aff_begin(srv *s, job *j, const rsd_http_server_event *ev, uint64_t now);

static void job_send(srv *s, job *j, uint64_t now) {
    rsd_http_server_event ev;
    rsd_http_request q;
    char url[64 + sizeof j->path + RSD_HTTP_SERVER_DEFAULT_MAX_HEADER_BYTES];
    rsd_str ct, auth;
    rsd_http_header fwd[1];
    char ctype[128];
    int r;
    if (rsd_http_server_query_req(s->hs, j->sreq, &ev) != RSD_OK) { /* the client went away */
        job_free(s, j, now);
        return;
    }
    if (aff_begin(s, j, &ev, now)) return; /* it samples the child's slots first */
    snprintf(url, sizeof url, "http://127.0.0.1:%u%.*s", (unsigned)j->port, (int)ev.head->target.len,
             ev.head->target.ptr);
    ct = rsd_http_header_get(ev.head->headers, ev.head->num_headers, "Content-Type");
    memset(&q, 0, sizeof q);
    q.method = j->method;
    q.url = url;
    if (ct.ptr && ct.len > 0 && ct.len < sizeof ctype) rsrv_cpy(ctype, sizeof ctype, ct.ptr, ct.len);
    else rsrv_cpy(ctype, sizeof ctype, "application/json", 16);
    if (ev.body.len) q.content_type = ctype;
    auth = rsd_http_header_get(ev.head->headers, ev.head->num_headers, "Authorization");
    if (s->models[j->model].child_auth[0]) auth = rsd_str_c(s->models[j->model].child_auth); /* its own --api-key */
    if (auth.ptr) { /* else the client's own key goes along (a model may check it) */
        fwd[0].name = rsd_str_c("Authorization");
        fwd[0].value = auth;
        q.headers = fwd;
        q.num_headers = 1;
    }
    if (j->body2) {
        q.body = j->body2;
        q.body_len = j->body2_len;
    } else if (ev.body.len) {
        q.body = ev.body.ptr;
        q.body_len = ev.body.len;
    }
    q.total_timeout_ms = SRV_UPSTREAM_TIMEOUT_MS;
    q.retry_any_method = true; /* the child closed an idle socket: it never read it */
    q.on_body = on_up_body;
    q.user = j;
    r = rsd_http_send(s->hc, &q, now, &j->up);
    if (r != RSD_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "cannot reach '%s': %s", s->cfg->models[j->model].id, rsd_result_str(r));
        respond_error(s, j->sreq, 503, "unavailable_error", msg);
        job_log(s, j, 503, now);
        job_free(s, j, now);
        return;
    }
    j->up_active = true;
    j->state = JOB_PROXY;
}

/* ---- session affinity (the policy is rsd_serve_affinity.h's) ---------------------- */
enum { SRV_AFF_TOKS = 8192, SRV_AFF_TIMEOUT_MS = 10000 };

/* A side request to j's child (GET /slots, the erase) whose event comes back to j. */
static bool aff_send(srv *s, job *j, const char *method, const char *target, const rsd_http_server_event *ev,
                     uint64_t now) {
    rsd_http_request q;
    rsd_http_header fwd[1];
    rsd_str auth = rsd_http_header_get(ev->head->headers, ev->head->num_headers, "Authorization");
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)j->port, target);
    memset(&q, 0, sizeof q);
    q.method = method;
    q.url = url;
    if (auth.ptr) { /* a child run with --api-key wants it on /slots too */
        fwd[0].name = rsd_str_c("Authorization");
        fwd[0].value = auth;
        q.headers = fwd;
        q.num_headers = 1;
    }
    q.total_timeout_ms = SRV_AFF_TIMEOUT_MS;
    q.user = j;
    if (rsd_http_send(s->hc, &q, now, &j->up) != RSD_OK) return false;
    j->up_active = true;
    j->state = JOB_PROXY;
    return true;
}

/* Before a granted completion request of a session_affinity model goes out: sample the
   child's /slots (its answer continues in aff_on_upstream). False: send it as it is. */
static bool aff_begin(srv *s, job *j, const rsd_http_server_event *ev, uint64_t now) {
    rsrv_aff *a;
    rsd_fleet_model_info mi;
    char key[4096];
    size_t kl = 0;
    rsd_str hv;
    int r;
    if (j->aff_phase != AFF_NONE || !s->cfg->models[j->model].session_affinity || strcmp(j->method, "POST") ||
        !(strstr(j->path, "completion") || strstr(j->path, "infill")))
        return false;
    j->aff_phase = AFF_READY;
    a = &s->aff[j->model];
    memset(&mi, 0, sizeof mi);
    (void)rsd_fleet_query_model(s->fleet, j->model, &mi);
    if (a->pid != mi.pid) rsrv_aff_reset(a, mi.pid); /* a new process: its slots are empty */
    hv = rsd_http_header_get(ev->head->headers, ev->head->num_headers, "X-Session-Id");
    r = rsrv_body_member(ev->body.ptr, ev->body.len, "prompt_cache_key", key, sizeof key, &kl);
    if (r == -1) return false; /* not a JSON object: nothing to pin */
    if (r == 1 && kl) {
        j->aff_has = true;
        j->aff_session = rsrv_aff_hash(key, kl);
    } else if (hv.ptr && hv.len) {
        j->aff_has = true;
        j->aff_session = rsrv_aff_hash(hv.ptr, hv.len);
    }
    j->aff_phase = AFF_SAMPLE;
    if (aff_send(s, j, "GET", "/slots", ev, now)) return true;
    j->aff_phase = AFF_READY;
    s->aff_stats[j->model].samples_failed++;
    return false;
}

/* The sample or the erase answered: pick the slot (erasing it first when another
   session owns it), then send the request with "id_slot". */
static void aff_on_upstream(srv *s, job *j, const rsd_http_event *ev, uint64_t now) {
    rsrv_aff *a = &s->aff[j->model];
    srv_aff_stats *st = &s->aff_stats[j->model];
    rsd_http_server_event sev;
    int k;
    if (rsd_http_server_query_req(s->hs, j->sreq, &sev) != RSD_OK) { job_free(s, j, now); return; }
    if (j->aff_phase == AFF_SAMPLE) {
        bool erase = false;
        j->aff_phase = AFF_READY;
        if (ev->result != RSD_OK || ev->status != 200 ||
            rsrv_aff_sample(a, ev->body.ptr, ev->body.len, s->aff_toks, SRV_AFF_TOKS) <= 0) {
            st->samples_failed++;
        } else if ((k = rsrv_aff_choose(a, j->aff_has, j->aff_session, &erase)) < 0) {
            st->unpinned++; /* no idle slot: the child picks */
        } else {
            if (!a->slot[k].owned) st->fresh++;
            else if (!erase) st->warm++;
            else st->handoffs++;
            rsrv_aff_take(a, k, j->aff_has, j->aff_session);
            j->aff_slot = k;
            if (erase && !s->cfg->models[j->model].session_erase) {
                /* session_erase off (the default): the child's own prompt cache keeps what it held */
            } else if (erase && !a->no_erase) {
                char target[48];
                snprintf(target, sizeof target, "/slots/%d?action=erase", k);
                j->aff_phase = AFF_ERASE;
                if (aff_send(s, j, "POST", target, &sev, now)) return;
                j->aff_phase = AFF_READY;
                st->erase_failed++;
            } else if (erase) {
                st->erase_failed++;
            }
        }
    } else { /* AFF_ERASE */
        j->aff_phase = AFF_READY;
        if (ev->result == RSD_OK && ev->status == 200) {
            st->erased++;
        } else {
            st->erase_failed++; /* swallowed: the request goes on */
            if (ev->status == 501 && !a->no_erase) {
                a->no_erase = true;
                logf_("%s: the child cannot erase slots (start it with --slot-save-path); sessions may share a slot's KV",
                      s->cfg->models[j->model].id);
            }
        }
    }
    if (j->aff_slot >= 0) {
        j->body2 = (char *)malloc(sev.body.len + 32);
        if (j->body2) {
            int n = rsrv_body_with_slot(sev.body.ptr, sev.body.len, j->aff_slot, j->body2, sev.body.len + 32);
            if (n < 0) {
                free(j->body2);
                j->body2 = NULL;
            } else {
                j->body2_len = (size_t)n;
            }
        }
    }
    job_send(s, j, now);
}

/* GET /_rsd/affinity: per session_affinity model, its slots as rsd-serve sees them and
   the counters (warm, fresh, handoffs: slots given over from another session, erased,
   erase_failed, unpinned, samples_failed). */
static void answer_affinity(srv *s, rsd_http_sreq_h h) {
    rsd_json_writer w;
    int i, k, n;
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "models");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels; i++) {
        const rsrv_aff *a = &s->aff[i];
        const srv_aff_stats *st = &s->aff_stats[i];
        if (!s->cfg->models[i].session_affinity) continue;
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "id");
        rsd_json_w_str(&w, s->cfg->models[i].id);
        rsd_json_w_key(&w, "pid");
        rsd_json_w_int(&w, a->pid);
#define SRV_AFF_COUNTER(name) rsd_json_w_key(&w, #name); rsd_json_w_int(&w, (int64_t)st->name);
        SRV_AFF_COUNTER(warm) SRV_AFF_COUNTER(fresh) SRV_AFF_COUNTER(handoffs) SRV_AFF_COUNTER(erased)
        SRV_AFF_COUNTER(erase_failed)
        SRV_AFF_COUNTER(unpinned) SRV_AFF_COUNTER(samples_failed)
#undef SRV_AFF_COUNTER
        rsd_json_w_key(&w, "slots");
        rsd_json_w_begin_array(&w);
        for (k = 0; k < a->nslots; k++) {
            char hex[24];
            rsd_json_w_begin_object(&w);
            rsd_json_w_key(&w, "id");
            rsd_json_w_int(&w, k);
            rsd_json_w_key(&w, "owner"); /* the session's hash; null = fresh, "" = keyless */
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)a->slot[k].owner);
            if (!a->slot[k].owned) rsd_json_w_null(&w);
            else rsd_json_w_str(&w, a->slot[k].keyless ? "" : hex);
            rsd_json_w_key(&w, "held");
            rsd_json_w_bool(&w, a->slot[k].held);
            rsd_json_w_end_object(&w);
        }
        rsd_json_w_end_array(&w);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_error(s, h, 500, "server_error", "too large");
    else respond_json(s, h, 200, s->out, (size_t)n);
}

/* Query parameter `name` (percent-decoded) as rsrv_body_model reports it: 1 found,
   0 absent, -2 too long or badly encoded. */
static int query_param(rsd_str target, const char *name, char *out, size_t cap, size_t *out_len) {
    const char *q = (const char *)memchr(target.ptr, '?', target.len), *end = target.ptr + target.len;
    size_t nl = strlen(name);
    if (!q) return 0;
    for (q++; q < end;) {
        const char *amp = (const char *)memchr(q, '&', (size_t)(end - q)), *e = amp ? amp : end;
        if ((size_t)(e - q) > nl && !memcmp(q, name, nl) && q[nl] == '=') {
            int n = rapp_pct_decode(q + nl + 1, (size_t)(e - q - nl - 1), true, out, cap);
            if (n < 0) return -2;
            *out_len = (size_t)n;
            return 1;
        }
        q = e + 1;
    }
    return 0;
}

static int query_model(rsd_str target, char *out, size_t cap, size_t *out_len) {
    return query_param(target, "model", out, cap, out_len);
}

/* ?autoload=: absent = on (rsd-serve starts models on demand); "true" or "1" = on,
   anything else = off, as the llama.cpp router. */
static bool query_autoload(rsd_str target) {
    char v[16];
    size_t n = 0;
    int r = query_param(target, "autoload", v, sizeof v, &n);
    if (r == 0) return true;
    return r == 1 && (!strcmp(v, "true") || !strcmp(v, "1"));
}

/* With ?autoload=false a request is served only by a model that is ready now: 400
   "model is not loaded" when it is not resident, 503 "Loading model" while it starts
   (what the router and its child answer). true when it answered. */
static bool refuse_no_autoload(srv *s, const rsd_http_server_event *ev, int m) {
    rsd_fleet_model_info mi;
    memset(&mi, 0, sizeof mi);
    if (query_autoload(ev->head->target)) return false;
    (void)rsd_fleet_query_model(s->fleet, m, &mi);
    if (mi.pool.slot >= 0 && mi.pool.state == RSD_POOL_SLOT_READY) return false;
    if (mi.pool.slot >= 0 && mi.pool.state == RSD_POOL_SLOT_STARTING) {
        static const char body[] = "{\"error\":{\"message\":\"Loading model\",\"type\":\"unavailable_error\",\"code\":503}}";
        respond_json(s, ev->req, 503, body, sizeof body - 1);
    } else {
        static const char body[] = "{\"error\":{\"code\":400,\"message\":\"model is not loaded\",\"type\":\"invalid_request_error\"}}";
        respond_json(s, ev->req, 400, body, sizeof body - 1);
    }
    return true;
}

/* ---- bounded queues ------------------------------------------------------------------ */
/* Requests waiting for a process, as the pool counts them: for model m (-1 = all). */
static int queue_count(const srv *s, int m) {
    rsd_fleet_model_info mi;
    rsd_pool_info st;
    if (m >= 0) return rsd_fleet_query_model(s->fleet, m, &mi) == RSD_OK ? (int)mi.pool.waiting : 0;
    rsd_pool_query(rsd_fleet_pool(s->fleet), &st);
    return (int)st.waiting;
}

/* 429 with Retry-After when a request for m would wait past max_queue: its model's
   own queue is full, or the queue in all is and m cannot take it now. A model whose
   start is backed off is left to the acquire (503 with the reason). true = answered. */
static bool queue_refuse(srv *s, const rsd_http_server_event *ev, int m, uint64_t now, bool waiting_now) {
    const rsrv_model *md = &s->cfg->models[m];
    int mine = queue_count(s, m) - (waiting_now ? 1 : 0), all = queue_count(s, -1) - (waiting_now ? 1 : 0);
    int lim_m = rsrv_eff_model_queue(s->cfg, md), lim_all = rsrv_eff_max_queue(s->cfg);
    rsd_fleet_model_info mi;
    char msg[RSRV_ID_MAX + 160];
    memset(&mi, 0, sizeof mi);
    (void)rsd_fleet_query_model(s->fleet, m, &mi);
    if (mi.retry_at_ms > now) return false;
    if (mine < lim_m && (all < lim_all || (!waiting_now && mi.pool.slot >= 0 && mi.pool.state == RSD_POOL_SLOT_READY)))
        return false;
    if (mine >= lim_m)
        snprintf(msg, sizeof msg, "too many requests waiting for '%s' (max_queue %d); retry later", md->id, lim_m);
    else
        snprintf(msg, sizeof msg, "too many requests waiting (max_queue %d in all); retry later", lim_all);
    s->queue_full++;
    respond_error_retry(s, ev->req, 429, "rate_limit_error", msg, 1);
    if (s->opts.verbose) logf_("%.*s: 429 (%s)", (int)ev->head->target.len, ev->head->target.ptr, msg);
    return true;
}

/* Per-model queue detail for /status: the waiting requests in order. */
static void status_queue(srv *s, rsd_json_writer *w, int m, uint64_t now) {
    int i, k, n = 0, idx[SRV_MAX_CONNS];
    rsd_json_w_key(w, "max_queue");
    rsd_json_w_int(w, rsrv_eff_model_queue(s->cfg, &s->cfg->models[m]));
    for (i = 0; i < SRV_MAX_CONNS; i++)
        if (s->jobs[i].state == JOB_WAIT && s->jobs[i].model == m) idx[n++] = i;
    for (i = 1; i < n; i++) /* by arrival */
        for (k = i; k > 0 && s->jobs[idx[k]].seq < s->jobs[idx[k - 1]].seq; k--) {
            int t = idx[k];
            idx[k] = idx[k - 1];
            idx[k - 1] = t;
        }
    rsd_json_w_key(w, "queue");
    rsd_json_w_begin_array(w);
    for (i = 0; i < n; i++) {
        const job *j = &s->jobs[idx[i]];
        rsd_json_w_begin_object(w);
        rsd_json_w_key(w, "position");
        rsd_json_w_int(w, i + 1);
        rsd_json_w_key(w, "waited_ms");
        rsd_json_w_int(w, (int64_t)(now - j->t0));
        rsd_json_w_key(w, "method");
        rsd_json_w_str(w, j->method);
        rsd_json_w_key(w, "path");
        rsd_json_w_str(w, j->path);
        rsd_json_w_end_object(w);
    }
    rsd_json_w_end_array(w);
}

/* A request for a model (POST: the body's "model"; GET: ?model=): acquire a place, then
   send it to the model's process. */
static void on_inference(srv *s, const rsd_http_server_event *ev, uint64_t now, bool from_query) {
    char name[RSRV_ID_MAX];
    size_t len = 0;
    int r = from_query ? query_model(ev->head->target, name, sizeof name, &len)
                       : rsrv_body_model(ev->body.ptr, ev->body.len, name, sizeof name, &len), m;
    job *j;
    uint16_t port = 0;
    rsd_str xh;
    int flags = 0;
    if (r == -1 || (r == 0 && !s->cfg->nlock)) {
        respond_error(s, ev->req, 400, "invalid_request_error", "model name is missing from the request");
        return;
    }
    if (s->cfg->nlock) { /* a locked host: its gate answers */
        char msg[RSRV_MAX_MODELS * (RSRV_ID_MAX + 4) + 96];
        int g = rsrv_lock_gate(s->cfg, r != 0, name, r == 1 ? len : 0, &m, msg, sizeof msg);
        if (g) {
            respond_error(s, ev->req, g, g == RSRV_GATE_CONFLICT ? "invalid_request_error" : "unavailable_error", msg);
            return;
        }
    } else {
        m = r == 1 ? rsrv_find(s->cfg, name, len) : -1;
    }
    if (m < 0) {
        respond_unknown_model(s, ev->req, r == 1 ? str_n(name, len) : rsd_str_c("(too long)"));
        return;
    }
    if (refuse_no_autoload(s, ev, m)) return;
    if (queue_refuse(s, ev, m, now, false)) return;
    /* X-Residency-Exclusive: 1 runs alone on its model's process (benchmarks) */
    xh = rsd_http_header_get(ev->head->headers, ev->head->num_headers, "X-Residency-Exclusive");
    if (xh.ptr && (rsd_str_eq_c(xh, "1") || rsd_str_eq_c(xh, "true"))) flags = RSD_POOL_ACQUIRE_EXCLUSIVE;
    j = job_new(s);
    if (!j) {
        respond_error(s, ev->req, 503, "unavailable_error", "too many requests in progress");
        return;
    }
    j->sreq = ev->req;
    j->model = m;
    j->t0 = now;
    s->mstat[m].requests++;
    j->seq = ++s->job_seq;
    rsrv_cpy(j->method, sizeof j->method, ev->head->method.ptr, ev->head->method.len);
    rsrv_cpy(j->path, sizeof j->path, ev->head->target.ptr, ev->head->target.len);
    if (!model_running(s, m)) { /* a start may be admitted */
        devmem_admit(s, now);
        start_fit(s, m, now);
    }
    r = rsd_fleet_acquire_ex(s->fleet, m, flags, now, j, &j->preq, &port);
    if (r == RSD_OK) {
        j->granted = true;
        j->port = port;
        job_send(s, j, now);
    } else if (r == RSD_PENDING) {
        j->state = JOB_WAIT;
        if (queue_refuse(s, ev, m, now, true)) { /* it would wait past max_queue */
            j->state = JOB_FREE;
            (void)rsd_fleet_cancel(s->fleet, j->preq, now);
            return;
        }
        j->queue_pos = queue_count(s, m); /* the last of its model's queue */
        j->queued = true;
        ev_request(s, "queued", m, now, -1);
    } else if (r == RSD_ERR_POOL_BACKOFF || r == RSD_ERR_FLEET_START) {
        if (r == RSD_ERR_FLEET_START) ev_check_failed(s, m, now);
        respond_unavailable(s, ev->req, m, now, NULL);
        job_log(s, j, 503, now);
        j->state = JOB_FREE;
    } else {
        char msg[512];
        if (r == RSD_ERR_POOL_NO_FIT) no_fit(s, m, now, msg, sizeof msg);
        else snprintf(msg, sizeof msg, "cannot serve '%s': %s", s->cfg->models[m].id, rsd_result_str(r));
        respond_error(s, ev->req, 503, "unavailable_error", msg);
        job_log(s, j, 503, now);
        j->state = JOB_FREE;
    }
}

/* ---- vram_budget = auto: the device's memory (rsd_devmem) ---------------------------
   Read at start and on each reload (the budget: the device's total less vram_margin),
   and each time a start may be admitted (a request for a model that is not running, a
   load, a lease, and every SRV_DEVMEM_RETRY_MS while a start waits only for others'
   memory: devmem_service): what other programs hold then counts against the budget
   through rsd_pool_set_vram. A lease waiting for the device to show its memory free
   reads it at the same pace (lease_service). Nothing samples it otherwise, and a reading
   never stops a model: the pool only admits or holds back starts with it. */
static int devmem_read(srv *s, uint64_t now, rsd_devmem_dev *pk) {
    rsd_devmem_dev d[RSD_DEVMEM_MAX_DEVICES];
    int64_t pids[RSD_DEVMEM_MAX_PIDS];
    int i, n, np = 0;
    for (i = 0; s->fleet && i < s->cfg->nmodels && np < RSD_DEVMEM_MAX_PIDS; i++) {
        rsd_fleet_model_info mi;
        if (rsd_fleet_query_model(s->fleet, i, &mi) == RSD_OK && mi.pid > 0) pids[np++] = mi.pid;
    }
    s->dm_try_ms = now;
    n = rsd_devmem_read(s->devmem, pids, np, d, RSD_DEVMEM_MAX_DEVICES);
    if (n < 0 || rsd_devmem_pick(d, n, pk) != RSD_OK) return -1;
    s->dm_last = *pk;
    s->dm_reads++;
    return 0;
}

/* c->vram_budget_bytes from a reading; false with err set when there is none, or the
   margin leaves nothing. */
static bool devmem_budget(srv *s, rsrv_config *c, uint64_t now, char *err, size_t cap) {
    rsd_devmem_dev pk;
    char t1[32], t2[32];
    if (devmem_read(s, now, &pk) != 0) {
        const char *why = rsd_devmem_nvml_status(s->devmem);
        snprintf(err, cap, "vram_budget = auto: no device memory could be read%s%s", why[0] ? "; NVML: " : "", why);
        return false;
    }
    c->vram_budget_bytes = rsrv_auto_budget(c, pk.total_bytes);
    if (!c->vram_budget_bytes) {
        snprintf(err, cap, "vram_budget = auto: %s has %s, and vram_margin %s leaves nothing", pk.name,
                 rsrv_fmt_size(pk.total_bytes, t1, sizeof t1), rsrv_fmt_size(rsrv_eff_vram_margin(c), t2, sizeof t2));
        return false;
    }
    return true;
}

/* Before a start may be admitted: what others hold now counts against the budget. Where
   the device cannot say what our children hold (amdgpu sysfs), the bytes reserved for
   them stand in for it. */
static void devmem_admit(srv *s, uint64_t now) {
    rsd_devmem_dev pk;
    uint64_t foreign;
    if (!s->devmem) return;
    if (devmem_read(s, now, &pk) != 0) { /* no reading now: the budget stands, others as last read */
        (void)rsd_pool_set_vram(rsd_fleet_pool(s->fleet), s->cfg->vram_budget_bytes, s->dm_foreign, now);
        return;
    }
    foreign = pk.others_bytes;
    if (!pk.own_known) {
        rsd_pool_info st;
        rsd_pool_query(rsd_fleet_pool(s->fleet), &st);
        foreign = pk.used_bytes - (st.reserved_bytes < pk.used_bytes ? st.reserved_bytes : pk.used_bytes);
    }
    if (foreign > RSD_POOL_MAX_BYTES) foreign = RSD_POOL_MAX_BYTES;
    s->dm_foreign = foreign;
    (void)rsd_pool_set_vram(rsd_fleet_pool(s->fleet), s->cfg->vram_budget_bytes, foreign, now);
}

/* ---- memory: what each model costs (rsd_serve_mem.h has the pure parts) -------------
   The estimate: read from the model file's GGUF header (rsd_gguf_read_file; the file's
   first bytes only, never its weights) and the start's parameters, once per (file
   path, size, mtime, parameters): at start, on a reload and for --check, in the loop
   itself (a local file read; a multi-GB model's header is a few MB, its vocabulary).
   The measured figure: once a child is ready, its own report of its buffers (llama-server
   prints "... model|KV|compute|output buffer size = X MiB" at -lv 4, which rsd-serve
   gives llama_server models: rsd_llama_log_line over the output rsd-serve already
   reads), read for at most SRV_MEM_LEARN_MS after ready; else the OS's figure for the
   process (the device probe's per-process bytes on a vram budget, else its RSS). It is
   kept in state_dir (mem-KEY.txt, rsd_serve_mem.h), so the next start of the same file
   with the same parameters and server binary has it from the first byte. */
enum { SRV_MEM_LEARN_MS = 3000, SRV_MEM_FILE_MAX = 4096 };

typedef struct srv_mem {
    uint64_t est_key;        /* file and parameters the estimate is of (0 = none read) */
    bool est_ok;
    rsrv_mem_fig est;
    uint64_t kv_tok;         /* the same read's KV bytes per token (start_fit; 0 = no figure) */
    uint32_t kv_seq;         /* and its KV streams */
    char est_err[256];       /* why there is no estimate ("" = there is one, or no file) */
    uint64_t key;            /* the learned figure's key (file, parameters, build); 0 = none */
    rsrv_mem_rec rec;        /* its params and build; its figure and source once learned */
    bool meas_ok;
    int64_t learn_pid;       /* a ready child whose figure is awaited (0 = none) */
    uint64_t learn_until, learn_out;
} srv_mem;

/* The budget is a discrete GPU's memory: figures count their GPU part (else all of it). */
static bool mem_vram(const srv *s) { return s->devmem && s->dm_last.pool == RSD_DEVMEM_VRAM; }

static uint64_t mem_fig_bytes(const srv *s, const rsrv_mem_fig *f) { return mem_vram(s) ? f->device : f->total; }

/* Model m's bytes for admission and eviction: reserve when typed, else the learned figure,
   else the estimate, else 0 (the pool's default); *from says which. Without a byte budget
   only a typed reserve counts (the pool counts models). */
static uint64_t mem_bytes(const srv *s, int m, const char **from) {
    const rsrv_model *md = &s->cfg->models[m];
    const srv_mem *mm = &s->mem[m];
    uint64_t b;
    const char *f = "none";
    if (md->reserve_bytes) { b = md->reserve_bytes; f = "reserve"; }
    else if (!s->cfg->vram_budget_bytes && !s->cfg->vram_budget_auto) b = 0;
    else if (mm->meas_ok && (b = mem_fig_bytes(s, &mm->rec.fig)) > 0) f = "measured";
    else if (mm->est_ok && (b = mem_fig_bytes(s, &mm->est)) > 0) f = "estimate";
    else b = 0;
    if (from) *from = f;
    return b > RSD_POOL_MAX_BYTES ? RSD_POOL_MAX_BYTES : b;
}

/* Gives the pool model m's bytes for its next start (when they changed), and with
   running, to its running process too. */
/* A figure learned from the child's own report. */
static bool mem_log_known(const srv *s, int m) {
    return s->mem[m].meas_ok && !strcmp(s->mem[m].rec.source, "log");
}

/* Model m's children get -lv 4 (extra_argv[0..1], build_model) only until its own buffer
   report is known for this start (learned, or kept in state_dir): after that the figure
   is not learned again, and the verbose output, which makes a load about 2 ms slower
   (bench-real figure 3), is left out. */
static void mem_verbosity(srv *s, int m, uint64_t now) {
    srv_model *sm = &s->models[m];
    const char *const *want;
    if (s->cfg->models[m].command[0] || !sm->extra_argv[0] || strcmp(sm->extra_argv[0], "-lv")) return;
    want = mem_log_known(s, m) ? sm->extra_argv + 2 : sm->extra_argv;
    if (sm->desc.spec.extra == want) return;
    sm->spec.extra = sm->desc.spec.extra = want;
    (void)rsd_fleet_set_model(s->fleet, m, &sm->desc, now);
}

static void mem_apply(srv *s, int m, bool running, uint64_t now) {
    rsd_pool *pool = rsd_fleet_pool(s->fleet);
    rsd_fleet_model_info mi;
    rsd_pool_model_desc pd;
    uint64_t b = mem_bytes(s, m, NULL);
    if (!s->fleet || s->cfg->models[m].retired) return;
    mem_verbosity(s, m, now); /* first: it sets the configured desc, the bytes follow */
    memset(&mi, 0, sizeof mi);
    if (rsd_fleet_query_model(s->fleet, m, &mi) != RSD_OK) return;
    if (mi.pool.reserve_bytes != b) {
        pd = s->models[m].desc.pool;
        pd.id = NULL;
        pd.reserve_bytes = b;
        (void)rsd_pool_set_model(pool, m, &pd, now);
    }
    if (running && mi.pool.slot >= 0 && (mi.pool.state == RSD_POOL_SLOT_READY || mi.pool.state == RSD_POOL_SLOT_DRAINING)) {
        rsd_pool_info *st = (rsd_pool_info *)calloc(1, sizeof *st);
        if (!st) return;
        rsd_pool_query(pool, st);
        if (st->slots[mi.pool.slot].reserve_bytes != b) (void)rsd_pool_set_reserved(pool, st->slots[mi.pool.slot].proc, b, now);
        free(st);
    }
}

/* "PATH SIZE MTIME" of a file ("PATH" alone when it cannot be read); its stat. */
static bool mem_ident(const char *path, char *out, size_t cap, struct stat *sb) {
    if (stat(path, sb) != 0) { snprintf(out, cap, "%s", path); return false; }
    snprintf(out, cap, "%s %llu %lld", path, (unsigned long long)sb->st_size, (long long)sb->st_mtime);
    return true;
}

/* The server binary's identity (the build a figure is of): its path as found in PATH. */
static void mem_build(const char *exe, char *out, size_t cap) {
    struct stat sb;
    const char *path = getenv("PATH"), *p;
    char cand[RSRV_PATH_MAX + 64];
    if (strchr(exe, '/') || strchr(exe, '\\') || !path) { (void)mem_ident(exe, out, cap, &sb); return; }
    for (p = path; *p;) {
#if defined(_WIN32)
        const char *e = strchr(p, ';');
#else
        const char *e = strchr(p, ':');
#endif
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && (size_t)snprintf(cand, sizeof cand, "%.*s/%s", (int)n, p, exe) < sizeof cand &&
            mem_ident(cand, out, cap, &sb) && S_ISREG(sb.st_mode))
            return;
        if (!e) break;
        p = e + 1;
    }
    snprintf(out, cap, "%s", exe);
}

static void mem_path(const srv *s, uint64_t key, char *out, size_t cap, bool tmp) {
    char name[RSRV_MEM_NAME_MAX];
    rsrv_mem_name(name, key);
    snprintf(out, cap, "%s/%s%s", s->cfg->state_dir, name, tmp ? ".tmp" : "");
}

/* The estimate and the learned figure of model m for its configuration now: the header
   is read again only when the file or the parameters changed, the state directory only
   when the key did. */
static void mem_prepare(srv *s, int m) {
    const rsrv_model *md = &s->cfg->models[m];
    const srv_model *sm = &s->models[m];
    srv_mem *mm = &s->mem[m];
    rsrv_mem_params p;
    char ptext[RSRV_MEM_PARAMS_MAX], ident[RSRV_PATH_MAX + 48], build[RSRV_MEM_BUILD_MAX];
    struct stat sb;
    uint64_t ek, lk;
    bool have;
    ident[0] = 0;
    rsrv_mem_params_init(&p, md->ctx, md->parallel, md->ngl);
    if (md->command[0]) rsrv_mem_params_args(&p, sm->cmd_argv + 1); /* {ctx} and the like are not read */
    rsrv_mem_params_args(&p, sm->extra_argv);
    if (!p.st.n_gpu_layers) p.st.n_gpu_layers = mem_vram(s) ? -1 : RSD_GGUF_NGL_NONE; /* no -ngl given */
    if (rsrv_mem_params_text(&p, ptext, sizeof ptext) < 0) ptext[0] = 0;
    if (!md->model[0]) { /* a command without a model file: nothing to estimate */
        mm->est_ok = false;
        mm->est_err[0] = 0;
        mm->est_key = 0;
    }
    have = md->model[0] && mem_ident(md->model, ident, sizeof ident, &sb);
    ek = rsrv_kv_key_feed(rsrv_kv_key_feed(14695981039346656037ull, ident, strlen(ident)), ptext, strlen(ptext));
    if (md->model[0] && ek != mm->est_key) {
        rsd_gguf_estimate e;
        int r;
        mm->est_key = ek;
        mm->est_ok = false;
        mm->kv_tok = 0;
        mm->kv_seq = 0;
        rsd_gguf_init(s->gguf, NULL);
        if (!have) snprintf(mm->est_err, sizeof mm->est_err, "cannot read %s: %s", md->model, strerror(errno));
        else if ((r = rsd_gguf_read_file(s->gguf, md->model)) < 0)
            snprintf(mm->est_err, sizeof mm->est_err, "%.200s", rsd_gguf_error(s->gguf)[0] ? rsd_gguf_error(s->gguf) : rsd_result_str(r));
        else {
            if (rsd_gguf_kv_per_token(&s->gguf->info, &p.st, &mm->kv_tok, &mm->kv_seq) != RSD_OK) mm->kv_tok = 0;
            if ((r = rsd_gguf_estimate_start(&s->gguf->info, &p.st, &e)) < 0) {
                snprintf(mm->est_err, sizeof mm->est_err, "no estimate for these parameters: %s", rsd_result_str(r));
            } else {
                mm->est_ok = true;
                mm->est_err[0] = 0;
                mm->est.model = e.model;
                mm->est.kv = e.kv;
                mm->est.compute = e.compute;
                mm->est.total = e.total;
                mm->est.device = e.model_device + e.kv_device + (e.model_device || e.kv_device ? e.compute : 0);
            }
        }
    }
    mem_build(sm->spec.exe ? sm->spec.exe : s->cfg->llama_server, build, sizeof build);
    lk = rsrv_kv_key_feed(ek, build, strlen(build)); /* not the id: another id for the same start shares it */
    if (lk == mm->key) return;
    mm->key = lk; /* another file, parameters or build: what was learned is of another start */
    mm->meas_ok = false;
    memset(&mm->rec, 0, sizeof mm->rec);
    rsrv_cpy(mm->rec.model, sizeof mm->rec.model, md->id, strlen(md->id));
    rsrv_cpy(mm->rec.params, sizeof mm->rec.params, ptext, strlen(ptext));
    rsrv_cpy(mm->rec.build, sizeof mm->rec.build, build, strlen(build) < sizeof mm->rec.build ? strlen(build) : 0);
    if (s->cfg->state_dir[0]) { /* kept by an earlier run? (a bad or missing file is ignored) */
        char path[RSRV_PATH_MAX + 64], text[SRV_MEM_FILE_MAX];
        rsrv_mem_rec r;
        FILE *f;
        size_t n;
        mem_path(s, lk, path, sizeof path, false);
        f = fopen(path, "rb");
        if (!f) return;
        n = fread(text, 1, sizeof text, f);
        fclose(f);
        if (n < sizeof text && rsrv_mem_read(text, n, &r) && !strcmp(r.params, mm->rec.params) &&
            !strcmp(r.build, mm->rec.build)) {
            mm->rec.fig = r.fig;
            rsrv_cpy(mm->rec.source, sizeof mm->rec.source, r.source, strlen(r.source));
            mm->meas_ok = true;
        }
    }
}

/* The figures' tables (once). false when out of memory. */
static bool mem_alloc(srv *s) {
    if (!s->mem) s->mem = (srv_mem *)calloc(RSRV_MAX_MODELS, sizeof *s->mem);
    if (!s->gguf) s->gguf = (rsd_gguf *)calloc(1, sizeof *s->gguf);
    if (!s->mem_tail) s->mem_tail = (char *)malloc(RSD_PROC_RING_DEFAULT + 1);
    return s->mem && s->gguf && s->mem_tail;
}

/* Every model's figures again (start, reload), and their bytes to the pool. */
static void mem_prepare_all(srv *s, uint64_t now) {
    int m;
    for (m = 0; m < s->cfg->nmodels; m++) {
        if (s->cfg->models[m].retired) continue;
        mem_prepare(s, m);
        if (s->fleet) mem_apply(s, m, false, now);
    }
}

/* Writes model m's learned figure to state_dir (made 0700 when missing); a failure is
   logged and costs only the figure's persistence. */
static void mem_store(srv *s, int m) {
    srv_mem *mm = &s->mem[m];
    char path[RSRV_PATH_MAX + 64], tmp[RSRV_PATH_MAX + 64], text[SRV_MEM_FILE_MAX];
    int n = rsrv_mem_write(&mm->rec, text, sizeof text);
    bool ok;
    if (!s->cfg->state_dir[0] || n < 0) return;
    mem_path(s, mm->key, path, sizeof path, false);
    mem_path(s, mm->key, tmp, sizeof tmp, true);
#if defined(_WIN32)
    {
        FILE *f;
        (void)CreateDirectoryA(s->cfg->state_dir, NULL);
        f = fopen(tmp, "wb");
        ok = f && fwrite(text, 1, (size_t)n, f) == (size_t)n;
        if (f && fclose(f) != 0) ok = false;
        if (ok) (void)remove(path); /* rename does not replace a file there */
    }
#else
    {
        int fd;
        (void)mkdir(s->cfg->state_dir, 0700);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ok = fd >= 0 && write(fd, text, (size_t)n) == n;
        if (fd >= 0 && close(fd) != 0) ok = false;
    }
#endif
    if (!ok || rename(tmp, path) != 0) {
        logf_("%s: cannot keep its memory figure in %s: %s", s->cfg->models[m].id, s->cfg->state_dir, strerror(errno));
        (void)remove(tmp);
    }
}

/* "1.2 GiB" for logs. */
static const char *mem_fmt(uint64_t b, char *out, size_t cap) {
    if (b >= (uint64_t)1 << 30) snprintf(out, cap, "%.2f GiB", (double)b / (double)((uint64_t)1 << 30));
    else if (b >= (uint64_t)1 << 20) snprintf(out, cap, "%.1f MiB", (double)b / (double)((uint64_t)1 << 20));
    else snprintf(out, cap, "%llu KiB", (unsigned long long)((b + 1023) / 1024));
    return out;
}

static void mem_event(srv *s, int m, uint64_t now);

/* Model m's figure is learned (source src): kept, logged, an event, and its bytes to the pool. */
static void mem_learned(srv *s, int m, const rsrv_mem_fig *f, const char *src, uint64_t now) {
    srv_mem *mm = &s->mem[m];
    char t1[24], t2[24], t3[24], t4[24], t5[32];
    mm->rec.fig = *f;
    rsrv_cpy(mm->rec.source, sizeof mm->rec.source, src, strlen(src));
    mm->meas_ok = true;
    mm->learn_pid = 0;
    if (!strcmp(src, "log"))
        logf_("%s: took %s (model %s, KV %s, compute %s; its own report)%s%s", s->cfg->models[m].id,
              mem_fmt(f->total, t1, sizeof t1), mem_fmt(f->model, t2, sizeof t2), mem_fmt(f->kv, t3, sizeof t3),
              mem_fmt(f->compute, t4, sizeof t4), mm->est_ok ? "; estimated " : "",
              mm->est_ok ? mem_fmt(mm->est.total, t5, sizeof t5) : "");
    else
        logf_("%s: took %s (%s, the process's figure)%s%s", s->cfg->models[m].id, mem_fmt(f->total, t1, sizeof t1),
              src, mm->est_ok ? "; estimated " : "", mm->est_ok ? mem_fmt(mm->est.total, t5, sizeof t5) : "");
    mem_store(s, m);
    mem_apply(s, m, true, now);
    mem_event(s, m, now);
}

/* The OS's figure for process pid: its bytes on the budget's GPU (the device probe's
   per-process reading) or, for host memory, its RSS. false when there is none. */
static bool mem_os_figure(srv *s, int64_t pid, rsrv_mem_fig *f, const char **src) {
    memset(f, 0, sizeof *f);
    if (mem_vram(s)) {
        rsd_devmem_dev d[RSD_DEVMEM_MAX_DEVICES], pk;
        int n = rsd_devmem_read(s->devmem, &pid, 1, d, RSD_DEVMEM_MAX_DEVICES);
        if (n < 0 || rsd_devmem_pick(d, n, &pk) != RSD_OK || !pk.own_known || !pk.own_bytes) return false;
        f->total = f->device = pk.own_bytes;
        *src = pk.source == RSD_DEVMEM_NVML ? "nvml" : "amdgpu";
        return true;
    } else {
        int64_t rss = proc_rss(pid);
        if (rss <= 0) return false;
        f->total = (uint64_t)rss;
        *src = "rss";
        return true;
    }
}

/* Looks for model m's ready child's buffer lines; past its time, the OS's figure. */
static void mem_learn(srv *s, int m, uint64_t now) {
    srv_mem *mm = &s->mem[m];
    rsd_procs *p = rsd_fleet_procs(s->fleet);
    rsd_proc_h hs[RSD_PROCS_MAX];
    rsd_proc_info pi;
    rsrv_mem_fig f;
    const char *src = NULL;
    int i, n = rsd_procs_live(p, hs, RSD_PROCS_MAX);
    for (i = 0; i < n; i++)
        if (rsd_procs_query_proc(p, hs[i], &pi) == RSD_OK && pi.pid == mm->learn_pid) break;
    if (i >= n) { mm->learn_pid = 0; return; } /* gone before it said */
    if (pi.out_bytes != mm->learn_out) {
        rsd_llama_log lg;
        int len = rsd_procs_tail(p, hs[i], 0, s->mem_tail, RSD_PROC_RING_DEFAULT + 1), at = 0, k;
        mm->learn_out = pi.out_bytes;
        rsd_llama_log_init(&lg);
        while (len > 0 && at < len) {
            const char *nl = (const char *)memchr(s->mem_tail + at, '\n', (size_t)(len - at));
            int e = nl ? (int)(nl - s->mem_tail) : len;
            (void)rsd_llama_log_line(&lg, s->mem_tail + at, (size_t)(e - at));
            at = e + 1;
        }
        if (lg.model && lg.compute) { /* the compute buffer is the last one it prints */
            memset(&f, 0, sizeof f);
            f.model = lg.model;
            f.kv = lg.kv;
            f.compute = lg.compute + lg.output;
            f.total = f.model + f.kv + f.compute;
            for (k = 0; k < (int)lg.n_devices && k < RSD_GGUF_MAX_DEVICES; k++) /* CPU, CPU_Mapped, CUDA_Host: host memory */
                if (strncmp(lg.dev[k].name, "CPU", 3) && !strstr(lg.dev[k].name, "_Host"))
                    f.device += lg.dev[k].model + lg.dev[k].kv + lg.dev[k].compute + lg.dev[k].output;
            mem_learned(s, m, &f, "log", now);
            return;
        }
    }
    if (now < mm->learn_until) return;
    mm->learn_pid = 0;
    if (mem_os_figure(s, pi.pid, &f, &src)) mem_learned(s, m, &f, src, now);
    else logf_("%s: no memory figure (no buffer lines in its output; the OS gave none)", s->cfg->models[m].id);
}

static void mem_on_ready(srv *s, const rsd_fleet_event *ev, uint64_t now) {
    srv_mem *mm;
    if (ev->model < 0 || ev->model >= s->cfg->nmodels || !ev->pid) return;
    if (s->fit_ctx[ev->model]) return; /* a clamped start: its figure is not its configured ctx's */
    if (mem_log_known(s, ev->model)) return; /* its own report is known: started without -lv 4 */
    mm = &s->mem[ev->model];
    mm->learn_pid = ev->pid;
    mm->learn_until = now + SRV_MEM_LEARN_MS;
    mm->learn_out = (uint64_t)-1;
    mem_learn(s, ev->model, now);
}

static void mem_service(srv *s, uint64_t now) {
    int m;
    for (m = 0; m < s->cfg->nmodels; m++)
        if (s->mem[m].learn_pid) mem_learn(s, m, now);
}

static uint64_t mem_deadline(const srv *s) {
    uint64_t dl = RSD_NO_DEADLINE;
    int m;
    for (m = 0; m < s->cfg->nmodels; m++)
        if (s->mem[m].learn_pid && s->mem[m].learn_until < dl) dl = s->mem[m].learn_until;
    return dl;
}

static void mem_w_fig(rsd_json_writer *w, const char *key, const rsrv_mem_fig *f, bool ok) {
    rsd_json_w_key(w, key);
    if (!ok) { rsd_json_w_null(w); return; }
    rsd_json_w_begin_object(w);
    rsd_json_w_key(w, "model");
    rsd_json_w_int(w, (int64_t)f->model);
    rsd_json_w_key(w, "kv");
    rsd_json_w_int(w, (int64_t)f->kv);
    rsd_json_w_key(w, "compute");
    rsd_json_w_int(w, (int64_t)f->compute);
    rsd_json_w_key(w, "total");
    rsd_json_w_int(w, (int64_t)f->total);
    rsd_json_w_key(w, "device");
    rsd_json_w_int(w, (int64_t)f->device);
    rsd_json_w_end_object(w);
}

/* Model m's "memory": {"estimate", "measured", "source", "bytes", "bytes_from"}. */
static void mem_status(srv *s, rsd_json_writer *w, int m) {
    const srv_mem *mm = &s->mem[m];
    const char *from;
    uint64_t b = mem_bytes(s, m, &from);
    rsd_json_w_key(w, "memory");
    rsd_json_w_begin_object(w);
    mem_w_fig(w, "estimate", &mm->est, mm->est_ok);
    if (!mm->est_ok && mm->est_err[0]) {
        rsd_json_w_key(w, "estimate_error");
        rsd_json_w_str(w, mm->est_err);
    }
    mem_w_fig(w, "measured", &mm->rec.fig, mm->meas_ok);
    rsd_json_w_key(w, "source"); /* of the measured figure, else "estimate", else "none" */
    rsd_json_w_str(w, mm->meas_ok ? mm->rec.source : mm->est_ok ? "estimate" : "none");
    rsd_json_w_key(w, "bytes"); /* what admission and eviction count for it */
    rsd_json_w_int(w, (int64_t)b);
    rsd_json_w_key(w, "bytes_from");
    rsd_json_w_str(w, from);
    rsd_json_w_end_object(w);
}

/* The pool's bytes: {"budget", "reserved", "leased", "others"} (others: what the last
   device reading counted for other programs; 0 without vram_budget = auto). */
static void mem_w_pool(srv *s, rsd_json_writer *w) {
    rsd_pool_info *st = (rsd_pool_info *)calloc(1, sizeof *st);
    if (!st) return;
    rsd_pool_query(rsd_fleet_pool(s->fleet), st);
    rsd_json_w_key(w, "budget_bytes");
    rsd_json_w_int(w, (int64_t)s->cfg->vram_budget_bytes);
    rsd_json_w_key(w, "reserved_bytes");
    rsd_json_w_int(w, (int64_t)st->reserved_bytes);
    rsd_json_w_key(w, "leased_bytes");
    rsd_json_w_int(w, (int64_t)st->leased_bytes);
    rsd_json_w_key(w, "others_bytes");
    rsd_json_w_int(w, (int64_t)s->dm_foreign);
    free(st);
}

/* "budget 8 GiB, reserved 6 GiB, leased 0 KiB, others 1 GiB" for notices. */
static const char *mem_pool_text(srv *s, char *out, size_t cap) {
    rsd_pool_info *st = (rsd_pool_info *)calloc(1, sizeof *st);
    char t1[24], t2[24], t3[24], t4[24];
    if (!st) { snprintf(out, cap, "?"); return out; }
    rsd_pool_query(rsd_fleet_pool(s->fleet), st);
    snprintf(out, cap, "budget %s, reserved %s, leased %s, others %s", mem_fmt(s->cfg->vram_budget_bytes, t1, sizeof t1),
             mem_fmt(st->reserved_bytes, t2, sizeof t2), mem_fmt(st->leased_bytes, t3, sizeof t3),
             mem_fmt(s->dm_foreign, t4, sizeof t4));
    free(st);
    return out;
}

/* Model m's bytes for a notice: "1.2 GiB (measured, log; estimated 1.1 GiB)". */
static const char *mem_model_text(srv *s, int m, char *out, size_t cap) {
    const srv_mem *mm = &s->mem[m];
    const char *from;
    char t1[24], t2[24], t3[24];
    uint64_t b = mem_bytes(s, m, &from);
    snprintf(out, cap, "%s (%s%s%s; estimated %s, measured %s)", mem_fmt(b, t1, sizeof t1), from,
             !strcmp(from, "measured") ? ", " : "", !strcmp(from, "measured") ? mm->rec.source : "",
             mm->est_ok ? mem_fmt(mm->est.total, t2, sizeof t2) : "-",
             mm->meas_ok ? mem_fmt(mm->rec.fig.total, t3, sizeof t3) : "-");
    return out;
}

/* The "memory" event: model m's figures changed (learned). */
static void mem_event(srv *s, int m, uint64_t now) {
    rsd_json_writer w;
    srv_event *e = ev_begin(s, &w, "memory", m, now);
    mem_status(s, &w, m);
    mem_w_pool(s, &w);
    ev_commit(s, e, &w);
}

/* --check: each model's figures, as comment lines after the configuration. */
static void mem_check_print(srv *s) {
    int m;
    for (m = 0; m < s->cfg->nmodels; m++) {
        const srv_mem *mm = &s->mem[m];
        mem_prepare(s, m);
        printf("# memory %s: estimate ", s->cfg->models[m].id);
        if (mm->est_ok)
            printf("model %llu kv %llu compute %llu total %llu", (unsigned long long)mm->est.model,
                   (unsigned long long)mm->est.kv, (unsigned long long)mm->est.compute, (unsigned long long)mm->est.total);
        else printf("none%s%s", mm->est_err[0] ? ": " : "", mm->est_err);
        printf("; measured ");
        if (mm->meas_ok)
            printf("model %llu kv %llu compute %llu total %llu (%s)\n", (unsigned long long)mm->rec.fig.model,
                   (unsigned long long)mm->rec.fig.kv, (unsigned long long)mm->rec.fig.compute,
                   (unsigned long long)mm->rec.fig.total, mm->rec.source);
        else printf("none\n");
    }
}

/* ---- the context-fit clamp by bytes (residency.h "Context fit") -----------------------
   Before model m starts beside others, with a byte budget: when its reserve (its
   footprint at its ctx) does not fit what is left (the budget less what others hold, the
   leases and the reservations of what runs) but a slot is free, its start takes the
   largest ctx whose KV fits what is left (rsd_fit_context_bytes: whole 256-cell blocks
   per sequence) and a reservation shrunk by the KV it gives up, so nothing is evicted for
   it; only when that ctx stays at or above the floor (4096 tokens). Below the floor, with
   every slot taken, or without a figure, it starts with its ctx and the pool evicts as
   it always did. The figure is the KV bytes per token its model file gives
   (rsd_gguf_kv_per_token with the start's parameters, its cache types included), taken
   from the header mem_prepare reads for the estimate (at start and on a reload, never
   while a request waits); a model without a readable GGUF file, a ctx, or bytes (mem_bytes: its
   reserve, learned figure or estimate) is never clamped. A start that fits gets its
   configured ctx back. What a clamped start takes is not learned (it is not the figure of
   the configured ctx). */
static void start_fit_set(srv *s, int m, uint32_t ctx, uint64_t reserve, uint64_t now) {
    rsd_fleet_model_desc d = s->models[m].desc;
    d.spec.ctx = ctx;
    d.pool.reserve_bytes = reserve;
    if (rsd_fleet_set_model(s->fleet, m, &d, now) == RSD_OK)
        s->fit_ctx[m] = ctx == s->cfg->models[m].ctx ? 0 : ctx;
}

static void start_fit(srv *s, int m, uint64_t now) {
    const rsrv_model *mc = &s->cfg->models[m];
    const srv_mem *mm = &s->mem[m];
    rsd_fleet_model_info mi;
    rsd_pool_info st;
    rsd_fit_bytes_desc d;
    rsd_fit_bytes fb;
    uint64_t held, kv, full = mem_bytes(s, m, NULL); /* its footprint at ctx: typed, learned or estimated */
    int i, others = 0;
    char t1[32];
    if (!mc->ctx || !full || mc->command[0] || !mc->model[0]) return;
    memset(&mi, 0, sizeof mi);
    if (rsd_fleet_query_model(s->fleet, m, &mi) != RSD_OK || mi.retry_at_ms > now) return; /* backed off */
    rsd_pool_query(rsd_fleet_pool(s->fleet), &st);
    if (!st.budget_bytes) return;
    if (!mm->kv_tok) return; /* the file gave no KV figure (mem_prepare): never clamped */
    for (i = 0; i < s->cfg->nmodels; i++) others += i != m && model_running(s, i);
    held = st.reserved_bytes + st.leased_bytes + (st.foreign_bytes < st.budget_bytes ? st.foreign_bytes : st.budget_bytes);
    memset(&d, 0, sizeof d);
    d.requested = mc->ctx;
    d.kv_bytes_per_token = mm->kv_tok;
    d.n_seq = mm->kv_seq;
    (void)rsd_fit_context_bytes(&d, &fb); /* alone: the KV of its whole ctx */
    kv = fb.kv_bytes;
    d.n_other_residents = others;
    d.free_bytes = st.budget_bytes > held ? st.budget_bytes - held : 0;
    d.load_bytes = full > kv ? full - kv : 0;
    (void)rsd_fit_context_bytes(&d, &fb);
    if (others >= s->cfg->max_models || !fb.clamped || fb.floored) { /* fits, or evict as always */
        if (s->fit_ctx[m]) start_fit_set(s, m, mc->ctx, full, now);
        return;
    }
    if (fb.context == s->fit_ctx[m]) return; /* the same clamp as last time: set already */
    start_fit_set(s, m, fb.context, d.load_bytes + fb.kv_bytes, now);
    logf_("%s: ctx %u clamped to %u tokens to start beside %d running model%s: its KV fits the %s left",
          mc->id, (unsigned)mc->ctx, (unsigned)fb.context, others, others == 1 ? "" : "s",
          rsrv_fmt_size(d.free_bytes > d.load_bytes ? d.free_bytes - d.load_bytes : 0, t1, sizeof t1));
}

/* A start held back only by what others hold (it fits the budget, not beside them now)
   waits for the memory, not for the next request: while the pool holds one that way, the
   device is read again every SRV_DEVMEM_RETRY_MS, and the reading admits it once the
   memory is there. Nothing is read while no start waits so; a reading never stops a model. */
#define SRV_DEVMEM_RETRY_MS 250
static bool devmem_held(srv *s) {
    rsd_pool_info st;
    if (!s->devmem) return false;
    rsd_pool_query(rsd_fleet_pool(s->fleet), &st);
    return st.models_foreign_held > 0;
}

static void devmem_service(srv *s, uint64_t now) {
    if (devmem_held(s) && now >= s->dm_try_ms + SRV_DEVMEM_RETRY_MS) devmem_admit(s, now);
}

static uint64_t devmem_deadline(srv *s) {
    return devmem_held(s) ? s->dm_try_ms + SRV_DEVMEM_RETRY_MS : RSD_NO_DEADLINE;
}

/* ---- leases: bytes of the budget for a workload outside rsd-serve ------------------
   A lease is ready only when its memory is really free: every child stopped for it has
   exited (the pool frees a child's bytes when its exit is reaped, not when it is asked to
   stop) and, on vram_budget = auto, a device reading taken after those exits shows the
   memory gone: the device's free bytes cover the granted bytes and, where the device
   counts bytes per process (NVML, a host's RSS), the stopped pids hold nothing. A driver
   can hand the memory back after the process is gone: until a reading shows it, the
   lease says "waiting": "device" with the last reading's figures, and the device is read
   again every SRV_DEVMEM_RETRY_MS (devmem_service's pace, on a clock of its own so that a
   start waiting for others' memory never starves it), only while a lease waits so. A reading never stops anything. A device that never shows the memory
   (another program took it, the driver keeps it, no reading can be taken) leaves the
   lease not ready, saying so: the holder's own deadline decides (the ensurer's free
   request times out with the lease id kept), and its ttl or a release gives the bytes
   back. Once ready a lease stays ready: the bytes are its holder's, and what the holder
   then allocates is no reason to take that back. With a fixed vram_budget nothing is
   read: ready comes with the exits. */
static srv_lease *lease_find(srv *s, uint32_t id) {
    int k;
    for (k = 0; id && k < RSD_POOL_MAX_LEASES; k++)
        if (s->leases[k].id == id) return &s->leases[k];
    return NULL;
}

/* A slot for a lease just taken: one the pool no longer knows is free again. */
static srv_lease *lease_slot_new(srv *s) {
    int k;
    for (k = 0; k < RSD_POOL_MAX_LEASES; k++) {
        rsd_pool_lease_h l;
        rsd_pool_lease_info li;
        l.id = s->leases[k].id;
        if (!l.id || rsd_pool_query_lease(rsd_fleet_pool(s->fleet), l, &li) != RSD_OK) {
            memset(&s->leases[k], 0, sizeof s->leases[k]);
            return &s->leases[k];
        }
    }
    return NULL;
}

/* Child i of sl still runs (the fleet still has that pid for its model). */
static bool lease_pid_alive(srv *s, const srv_lease *sl, int i) {
    rsd_fleet_model_info mi;
    return rsd_fleet_query_model(s->fleet, sl->model[i], &mi) == RSD_OK && mi.pid == sl->pid[i];
}

/* The device as a reading after the exits shows it: free bytes cover the grant and the
   stopped pids hold nothing (where it counts per process). */
static bool lease_dev_free(const srv_lease *sl, uint64_t granted) {
    return sl->dev_ok && sl->dev.free_bytes >= granted && (!sl->dev.own_known || sl->dev.own_bytes == 0);
}

/* Moves sl on; true when it turns ready now. read: a device reading may be taken now
   (the first after the exits always may). */
static bool lease_update(srv *s, srv_lease *sl, const rsd_pool_lease_info *li, bool read, uint64_t now) {
    rsd_devmem_dev d[RSD_DEVMEM_MAX_DEVICES];
    int i, n;
    if (sl->ready) return false;
    if (!sl->exited) {
        for (i = 0; i < sl->n; i++)
            if (lease_pid_alive(s, sl, i)) return false;
        if (!s->devmem && !li->ready) return false; /* the pool's bytes: other stops still exiting */
        sl->exited = true;
    }
    if (s->devmem) {
        char t1[32], t2[32], t3[32];
        if (sl->tries && !read) return false;
        s->dm_lease_ms = now;
        sl->tries++;
        n = rsd_devmem_read(s->devmem, sl->pid, sl->n, d, RSD_DEVMEM_MAX_DEVICES);
        sl->dev_ok = n >= 0 && rsd_devmem_pick(d, n, &sl->dev) == RSD_OK;
        if (sl->dev_ok) s->dm_reads++;
        if (!lease_dev_free(sl, li->granted)) {
            if (sl->tries == 1 && !sl->dev_ok)
                logf_("lease %u: the stopped processes have exited; no device reading: not ready", (unsigned)sl->id);
            else if (sl->tries == 1)
                logf_("lease %u: the stopped processes have exited, but %s shows %s free (%s needed), the stopped "
                      "pids %s: not ready until a reading shows the memory gone", (unsigned)sl->id, sl->dev.name,
                      mem_fmt(sl->dev.free_bytes, t1, sizeof t1), mem_fmt(li->granted, t2, sizeof t2),
                      sl->dev.own_known ? mem_fmt(sl->dev.own_bytes, t3, sizeof t3) : "not counted per process");
            return false;
        }
    }
    sl->ready = true;
    return true;
}

/* "ready", "waiting" (null, "processes" or "device") and its figures: "exiting" [ids
   whose stopped process runs still], or "device" {name, reads, free_bytes,
   needed_bytes, stopped_bytes (null where not counted per process)} (null before a
   reading could be taken). */
static void lease_w_state(srv *s, rsd_json_writer *w, const srv_lease *sl, const rsd_pool_lease_info *li) {
    int i;
    rsd_json_w_key(w, "ready");
    rsd_json_w_bool(w, sl ? sl->ready : li->ready);
    rsd_json_w_key(w, "waiting");
    if (!sl || sl->ready) {
        rsd_json_w_null(w);
    } else if (!sl->exited) {
        rsd_json_w_str(w, "processes");
        rsd_json_w_key(w, "exiting");
        rsd_json_w_begin_array(w);
        for (i = 0; i < sl->n; i++)
            if (lease_pid_alive(s, sl, i)) rsd_json_w_str(w, s->cfg->models[sl->model[i]].id);
        rsd_json_w_end_array(w);
    } else {
        rsd_json_w_str(w, "device");
        rsd_json_w_key(w, "device");
        if (!sl->dev_ok) {
            rsd_json_w_null(w);
        } else {
            rsd_json_w_begin_object(w);
            rsd_json_w_key(w, "name");
            rsd_json_w_str(w, sl->dev.name);
            rsd_json_w_key(w, "reads");
            rsd_json_w_int(w, sl->tries);
            rsd_json_w_key(w, "free_bytes");
            rsd_json_w_int(w, (int64_t)sl->dev.free_bytes);
            rsd_json_w_key(w, "needed_bytes");
            rsd_json_w_int(w, (int64_t)li->granted);
            rsd_json_w_key(w, "stopped_bytes");
            if (sl->dev.own_known) rsd_json_w_int(w, (int64_t)sl->dev.own_bytes);
            else rsd_json_w_null(w);
            rsd_json_w_end_object(w);
        }
    }
}

/* The lease and lease_release events: {"lease", "requested", "granted", "ready",
   "waiting" (and its figures), "memory": {"stopped": [{model, bytes, bytes_from,
   estimate, measured, source}], budget, reserved, leased, others}}. A lease that is not
   ready when taken gets a second lease event when it turns ready. */
static void lease_event(srv *s, const char *kind, rsd_pool_lease_h l, const rsd_pool_lease_info *li, uint64_t now) {
    rsd_json_writer w;
    srv_event *e = ev_begin(s, &w, kind, -1, now);
    int i;
    rsd_json_w_key(&w, "lease");
    rsd_json_w_int(&w, l.id);
    rsd_json_w_key(&w, "requested");
    rsd_json_w_int(&w, (int64_t)li->requested);
    rsd_json_w_key(&w, "granted");
    rsd_json_w_int(&w, (int64_t)li->granted);
    lease_w_state(s, &w, lease_find(s, l.id), li);
    rsd_json_w_key(&w, "memory");
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "stopped");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels && i < 64; i++)
        if (li->stopped & ((uint64_t)1 << i)) {
            rsd_json_w_begin_object(&w);
            mem_w_model(s, &w, "model", i);
            rsd_json_w_end_object(&w);
        }
    rsd_json_w_end_array(&w);
    mem_w_pool(s, &w);
    rsd_json_w_end_object(&w);
    ev_commit(s, e, &w);
}

/* Every tracked lease: forgotten once the pool no longer knows it (released, ttl), and
   told ready (log line, lease event) when it turns so. Device readings for those waiting
   on the device go at devmem_service's pace. */
static void lease_service(srv *s, uint64_t now) {
    bool due = now >= s->dm_lease_ms + SRV_DEVMEM_RETRY_MS;
    int k;
    for (k = 0; k < RSD_POOL_MAX_LEASES; k++) {
        srv_lease *sl = &s->leases[k];
        rsd_pool_lease_h l;
        rsd_pool_lease_info li;
        if (!sl->id) continue;
        l.id = sl->id;
        if (rsd_pool_query_lease(rsd_fleet_pool(s->fleet), l, &li) != RSD_OK) {
            memset(sl, 0, sizeof *sl);
            continue;
        }
        if (lease_update(s, sl, &li, due, now)) {
            char t1[32];
            if (s->devmem)
                logf_("lease %u: ready: %s shows %s free after %u reading%s since the stopped processes exited",
                      (unsigned)sl->id, sl->dev.name, mem_fmt(sl->dev.free_bytes, t1, sizeof t1),
                      (unsigned)sl->tries, sl->tries == 1 ? "" : "s");
            else logf_("lease %u: ready: the stopped processes have exited", (unsigned)sl->id);
            lease_event(s, "lease", l, &li, now);
        }
    }
}

/* The next reading a lease waits for: 0 when the first after the exits is still to
   come, else devmem_service's pace; RSD_NO_DEADLINE when none waits on the device. */
static uint64_t lease_deadline(srv *s) {
    uint64_t dl = RSD_NO_DEADLINE;
    int k;
    for (k = 0; s->devmem && k < RSD_POOL_MAX_LEASES; k++) {
        const srv_lease *sl = &s->leases[k];
        uint64_t d;
        if (!sl->id || sl->ready || !sl->exited) continue;
        d = sl->tries ? s->dm_lease_ms + SRV_DEVMEM_RETRY_MS : 0;
        if (d < dl) dl = d;
    }
    return dl;
}

/* {"id", "granted", "requested", "ready", "waiting" (and its figures), "restore",
   "expires_in_ms", "stopped": [ids]}; released: the lease is released now (DELETE), the
   answer leads with "released":true. */
static void lease_answer(srv *s, rsd_http_sreq_h h, rsd_pool_lease_h l, bool released, uint64_t now) {
    rsd_pool_lease_info li;
    rsd_json_writer w;
    srv_lease *sl;
    int i, n;
    memset(&li, 0, sizeof li);
    if (rsd_pool_query_lease(rsd_fleet_pool(s->fleet), l, &li) != RSD_OK ||
        (released && rsd_pool_lease_return(rsd_fleet_pool(s->fleet), l, now) != RSD_OK)) {
        respond_error(s, h, 404, "not_found_error", "lease not found (released, expired or never taken)");
        return;
    }
    sl = lease_find(s, l.id);
    if (released) {
        char pool[160];
        lease_event(s, "lease_release", l, &li, now);
        logf_("lease %u: released (%llu bytes; %s)", (unsigned)l.id, (unsigned long long)li.granted,
              mem_pool_text(s, pool, sizeof pool));
    }
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    if (released) {
        rsd_json_w_key(&w, "released");
        rsd_json_w_bool(&w, true);
    }
    rsd_json_w_key(&w, "id");
    rsd_json_w_int(&w, l.id);
    rsd_json_w_key(&w, "granted");
    rsd_json_w_int(&w, (int64_t)li.granted);
    rsd_json_w_key(&w, "requested");
    rsd_json_w_int(&w, (int64_t)li.requested);
    lease_w_state(s, &w, sl, &li);
    rsd_json_w_key(&w, "restore");
    rsd_json_w_bool(&w, li.restore);
    rsd_json_w_key(&w, "expires_in_ms");
    if (li.expires_ms == RSD_NO_DEADLINE) rsd_json_w_null(&w);
    else rsd_json_w_int(&w, li.expires_ms > now ? (int64_t)(li.expires_ms - now) : 0);
    rsd_json_w_key(&w, "stopped");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels && i < 64; i++)
        if (li.stopped & ((uint64_t)1 << i)) rsd_json_w_str(&w, s->cfg->models[i].id);
    rsd_json_w_end_array(&w);
    rsd_json_w_end_object(&w);
    if (released && sl) memset(sl, 0, sizeof *sl);
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_error(s, h, 500, "server_error", "too large");
    else respond_json(s, h, 200, s->out, (size_t)n);
}

/* POST /_rsd/lease {"bytes": N, "ttl_ms": T, "restore": B}: 200 granted (in full or in
   part: "granted" < "requested"), 409 declined (nothing idle and unpinned to stop), 503
   no byte budget or too many leases, 400 a bad body. */
static void answer_lease_take(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    rsd_pool_lease_desc d;
    rsd_pool_lease_h l;
    char err[256];
    int r;
    if (!rsrv_lease_body(ev->body.ptr, ev->body.len, &d, err, sizeof err)) {
        respond_error(s, ev->req, 400, "invalid_request_error", err);
        return;
    }
    if (!s->cfg->vram_budget_bytes) {
        respond_error(s, ev->req, 503, "unavailable_error", "this host has no byte budget to lease (set vram_budget)");
        return;
    }
    devmem_admit(s, now);
    r = rsd_pool_lease_take(rsd_fleet_pool(s->fleet), &d, now, &l);
    if (r == RSD_OK || r == RSD_PENDING) {
        rsd_pool_lease_info li;
        char pool[160], stopped[RSRV_MAX_MODELS * 48 + 8];
        size_t o = 0;
        int i;
        srv_lease *sl = lease_slot_new(s);
        memset(&li, 0, sizeof li);
        (void)rsd_pool_query_lease(rsd_fleet_pool(s->fleet), l, &li);
        stopped[0] = 0;
        if (sl) sl->id = l.id;
        for (i = 0; i < s->cfg->nmodels && i < 64; i++)
            if (li.stopped & ((uint64_t)1 << i)) {
                char t[160];
                rsd_fleet_model_info mi;
                if (sl && sl->n < RSD_POOL_MAX_SLOTS && rsd_fleet_query_model(s->fleet, i, &mi) == RSD_OK &&
                    mi.pid > 0) {
                    sl->model[sl->n] = i;
                    sl->pid[sl->n++] = mi.pid;
                }
                int k = snprintf(stopped + o, sizeof stopped - o, "%s%s %s", o ? ", " : "", s->cfg->models[i].id,
                                 mem_model_text(s, i, t, sizeof t));
                if (k < 0 || (size_t)k >= sizeof stopped - o) break;
                o += (size_t)k;
            }
        logf_("lease %u: %llu bytes asked, %llu granted, ttl %lu ms; %s; stopping [%s]", (unsigned)l.id,
              (unsigned long long)d.bytes, (unsigned long long)li.granted, (unsigned long)d.ttl_ms,
              mem_pool_text(s, pool, sizeof pool), stopped);
        if (sl) (void)lease_update(s, sl, &li, true, now); /* ready at once when nothing must exit */
        lease_event(s, "lease", l, &li, now);
        lease_answer(s, ev->req, l, false, now);
    } else if (r == RSD_ERR_POOL_NO_FIT) {
        respond_error(s, ev->req, 409, "invalid_request_error",
                      "lease declined: every process that holds the budget is busy or pinned");
    } else {
        char msg[160];
        snprintf(msg, sizeof msg, "lease not taken: %s", rsd_result_str(r));
        respond_error(s, ev->req, 503, "unavailable_error", msg);
    }
}

/* GET and DELETE /_rsd/lease/ID. */
static void answer_lease(srv *s, const rsd_http_server_event *ev, bool del, uint64_t now) {
    const char *p = ev->head->target.ptr + 12, *e = ev->head->target.ptr + ev->head->target.len;
    const char *q = (const char *)memchr(p, '?', (size_t)(e - p));
    rsd_pool_lease_h l;
    uint64_t id = 0;
    if (q) e = q;
    if (!rsrv_parse_u64(p, (size_t)(e - p), 0xFFFFFFFFu, &id) || !id) {
        respond_error(s, ev->req, 404, "not_found_error", "lease not found (released, expired or never taken)");
        return;
    }
    l.id = (uint32_t)id;
    lease_answer(s, ev->req, l, del, now); /* DELETE: what it stopped, released (restore: they start again) */
}

static bool path_is(const rsd_http_server_event *ev, const char *p) {
    size_t n = strlen(p), t = ev->head->target.len;
    const char *q = (const char *)memchr(ev->head->target.ptr, '?', t);
    if (q) t = (size_t)(q - ev->head->target.ptr);
    return t == n && !memcmp(ev->head->target.ptr, p, n);
}

static bool path_starts(const rsd_http_server_event *ev, const char *p) {
    size_t n = strlen(p);
    return ev->head->target.len > n && !memcmp(ev->head->target.ptr, p, n);
}

/* ---- auth, CORS ------------------------------------------------------------------- */
/* Equal without an early exit: the time depends on the key's length only. */
static bool key_equal(const char *key, rsd_str got) {
    size_t n = strlen(key), i;
    unsigned d = got.len == n ? 0u : 1u;
    for (i = 0; i < n; i++) d |= (unsigned)(unsigned char)key[i] ^ (unsigned)(unsigned char)(i < got.len ? got.ptr[i] : 0);
    return d == 0;
}

/* The key a request carries: "Authorization: Bearer K" or "X-Api-Key: K" (as llama-server). */
static rsd_str request_key(const rsd_http_server_event *ev) {
    rsd_str a = rsd_http_header_get(ev->head->headers, ev->head->num_headers, "Authorization"), none = {NULL, 0};
    if (a.ptr && a.len > 7 && (a.ptr[0] == 'B' || a.ptr[0] == 'b') && !memcmp(a.ptr + 1, "earer ", 6)) {
        a.ptr += 7;
        a.len -= 7;
        while (a.len && a.ptr[0] == ' ') { a.ptr++; a.len--; }
        return a;
    }
    a = rsd_http_header_get(ev->head->headers, ev->head->num_headers, "X-Api-Key");
    return a.ptr ? a : none;
}

/* Management: /models/load, /models/unload, /status and everything under /_rsd/. */
static bool admin_path(const rsd_http_server_event *ev) {
    rsd_str t = ev->head->target;
    return path_is(ev, "/models/load") || path_is(ev, "/models/unload") || path_is(ev, "/status") ||
           (t.len >= 6 && !memcmp(t.ptr, "/_rsd/", 6));
}

/* Whether the request may go on (api_key for everything, admin_key for management when
   set; the admin key opens everything). /health and the status page need no key. */
static bool auth_ok(const srv *s, const rsd_http_server_event *ev, bool admin) {
    rsd_str k = request_key(ev);
    const char *api = s->cfg->api_key, *adm = s->cfg->admin_key;
    bool has = k.ptr != NULL;
    if (admin) {
        if (adm[0]) return has && key_equal(adm, k);
        return !api[0] || (has && key_equal(api, k));
    }
    if (!api[0]) return true;
    return has && (key_equal(api, k) || (adm[0] && key_equal(adm, k)));
}

/* CORS headers for the answer to request h (appended at hd[n]; the new count). */
static size_t cors_headers(srv *s, rsd_http_sreq_h h, rsd_http_header *hd, size_t n) {
    rsd_http_server_event ev;
    rsd_str origin;
    bool star;
    if (!s->cfg->cors[0] || rsd_http_server_query_req(s->hs, h, &ev) != RSD_OK) return n;
    origin = rsd_http_header_get(ev.head->headers, ev.head->num_headers, "Origin");
    star = !strcmp(s->cfg->cors, "*");
    if (!star) {
        hd[n].name = rsd_str_c("Vary");
        hd[n++].value = rsd_str_c("Origin");
    }
    if (!origin.ptr || !rsrv_cors_allows(s->cfg->cors, origin.ptr, origin.len)) return n;
    hd[n].name = rsd_str_c("Access-Control-Allow-Origin");
    hd[n++].value = star ? rsd_str_c("*") : origin;
    return n;
}

/* OPTIONS: the CORS preflight. 204 with the allow headers for an allowed origin; 204
   without them otherwise (the browser then refuses); 404 while cors is off. */
static void answer_preflight(srv *s, const rsd_http_server_event *ev) {
    rsd_http_header hd[8];
    size_t n = cors_headers(s, ev->req, hd, 0), i;
    bool allowed = false;
    if (!s->cfg->cors[0]) { respond_404(s, ev->req); return; }
    for (i = 0; i < n; i++) allowed |= rsd_str_eq_c(hd[i].name, "Access-Control-Allow-Origin");
    if (allowed) {
        hd[n].name = rsd_str_c("Access-Control-Allow-Methods");
        hd[n++].value = rsd_str_c("GET, POST, OPTIONS");
        hd[n].name = rsd_str_c("Access-Control-Allow-Headers");
        hd[n++].value = rsd_str_c("Authorization, Content-Type, X-Api-Key, Last-Event-ID");
        hd[n].name = rsd_str_c("Access-Control-Max-Age");
        hd[n++].value = rsd_str_c("600");
    }
    (void)rsd_http_respond(s->hs, ev->req, 204, hd, n, "", 0);
}

/* 401 as llama-server words it, with WWW-Authenticate: Bearer. */
static void respond_unauthorized(srv *s, rsd_http_sreq_h h, bool admin) {
    static const char api[] = "{\"error\":{\"message\":\"Invalid API Key\",\"type\":\"authentication_error\",\"code\":401}}";
    static const char adm[] =
        "{\"error\":{\"message\":\"Invalid API Key (this endpoint needs the admin key)\",\"type\":\"authentication_error\",\"code\":401}}";
    rsd_http_header hd[4];
    size_t n = 0;
    hd[n].name = rsd_str_c("Content-Type");
    hd[n++].value = rsd_str_c("application/json; charset=utf-8");
    hd[n].name = rsd_str_c("WWW-Authenticate");
    hd[n++].value = rsd_str_c("Bearer");
    n = cors_headers(s, h, hd, n);
    if (admin && s->cfg->admin_key[0]) (void)rsd_http_respond(s->hs, h, 401, hd, n, adm, sizeof adm - 1);
    else (void)rsd_http_respond(s->hs, h, 401, hd, n, api, sizeof api - 1);
}

/* The key a model's own arguments give it (--api-key K or --api-key=K; the last wins):
   rsd-serve sends it to that model as "Authorization: Bearer K". */
static void child_key(srv_model *sm) {
    const char *const *lists[2];
    int l, k;
    lists[0] = sm->cmd_argv[0] ? sm->cmd_argv : NULL;
    lists[1] = sm->extra_argv;
    sm->child_auth[0] = 0;
    for (l = 0; l < 2; l++) {
        const char *const *a = lists[l];
        if (!a) continue;
        for (k = 0; a[k]; k++) {
            const char *v = NULL;
            if (!strcmp(a[k], "--api-key") && a[k + 1]) v = a[k + 1];
            else if (!strncmp(a[k], "--api-key=", 10)) v = a[k] + 10;
            if (v && rsrv_key_ok(v, strlen(v))) snprintf(sm->child_auth, sizeof sm->child_auth, "Bearer %s", v);
        }
    }
}

/* ---- events: the history ring, /_rsd/events and /models/sse ---------------------- */
/* Wall-clock milliseconds of loop time t. */
static int64_t wall_ms(const srv *s, uint64_t t) {
    return (int64_t)s->epoch_ms + (int64_t)(t - s->epoch_loop_ms);
}

/* Starts event number s->ev_last + 1 of kind for model m (-1 = none): its writer is
   left inside the object for the caller's fields; ev_commit ends it. */
static srv_event *ev_begin(srv *s, rsd_json_writer *w, const char *kind, int m, uint64_t now) {
    srv_event *e = &s->events[(s->ev_last + 1) % s->ev_cap];
    memset(e, 0, offsetof(srv_event, text));
    e->id = s->ev_last + 1;
    e->model = m;
    rsrv_cpy(e->kind, sizeof e->kind, kind, strlen(kind));
    rsd_json_w_init(w, e->text, SRV_EVENT_BYTES - SRV_ROUTER_EVENT_BYTES);
    rsd_json_w_begin_object(w);
    rsd_json_w_key(w, "id");
    rsd_json_w_int(w, (int64_t)e->id);
    rsd_json_w_key(w, "time_ms");
    rsd_json_w_int(w, wall_ms(s, now));
    rsd_json_w_key(w, "event");
    rsd_json_w_str(w, kind);
    if (m >= 0) {
        rsd_json_w_key(w, "model");
        rsd_json_w_str(w, s->cfg->models[m].id);
    }
    return e;
}

/* Ends the event and publishes it (a router-format text may follow via ev_router). */
static void ev_commit(srv *s, srv_event *e, rsd_json_writer *w) {
    int n;
    rsd_json_w_end_object(w);
    n = rsd_json_w_finish(w);
    if (n < 0) { /* too long or not UTF-8 (child output): the event without its details */
        rsd_json_w_init(w, e->text, SRV_EVENT_BYTES - SRV_ROUTER_EVENT_BYTES);
        rsd_json_w_begin_object(w);
        rsd_json_w_key(w, "id");
        rsd_json_w_int(w, (int64_t)e->id);
        rsd_json_w_key(w, "event");
        rsd_json_w_str(w, e->kind);
        if (e->model >= 0) {
            rsd_json_w_key(w, "model");
            rsd_json_w_str(w, s->cfg->models[e->model].id);
        }
        rsd_json_w_key(w, "truncated");
        rsd_json_w_bool(w, true);
        rsd_json_w_end_object(w);
        n = rsd_json_w_finish(w);
    }
    e->len = n > 0 ? (uint16_t)n : 0;
    e->router_off = e->len + 1;
    e->router_len = 0;
    s->ev_last = e->id;
}

/* What a router event's data carries beside its status (ev_router). */
enum { ROUTER_PLAIN = 0, ROUTER_INFO, ROUTER_PROGRESS_0, ROUTER_PROGRESS_1, ROUTER_INFO_SHORT };

/* The llama.cpp router's /models/sse event for the event just committed:
   {"model":ID,"event":KIND,"data":{"status":STATUS,...}}, after the one it has already
   when it has one (subs_pump then sends both, each its own data: frame; a router event
   whose residency event has none of its own goes along that way). exit_code < 0 = none; what:
   ROUTER_INFO adds the loaded model's "info" as the router sends it (the child's
   /v1/models data[0]: id, the child's aliases, tags, object, created, owned_by, meta),
   ROUTER_PROGRESS_0/1 the router's load "progress" at 0.0 / 1.0 (wire.md 1.11). */
static void ev_router(srv *s, srv_event *e, int m, const char *kind, const char *status, int exit_code, int what) {
    rsd_json_writer w;
    int n;
    const rsrv_model *md = &s->cfg->models[m];
    const srv_meta *mt = &s->meta[m];
    size_t at = (size_t)e->router_off + e->router_len;
    if (e->router_len) {
        if (at + 8 >= SRV_EVENT_BYTES) return;
        memcpy(e->text + at, "\n\ndata: ", 8);
        at += 8;
    }
    rsd_json_w_init(&w, e->text + at, SRV_EVENT_BYTES - at);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "model");
    rsd_json_w_str(&w, md->id);
    rsd_json_w_key(&w, "event");
    rsd_json_w_str(&w, kind);
    rsd_json_w_key(&w, "data");
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "status");
    rsd_json_w_str(&w, status);
    if (exit_code >= 0) {
        rsd_json_w_key(&w, "exit_code");
        rsd_json_w_int(&w, exit_code);
    }
    if (what == ROUTER_PROGRESS_0 || what == ROUTER_PROGRESS_1) {
        rsd_json_w_key(&w, "progress");
        rsd_json_w_raw(&w, what == ROUTER_PROGRESS_0
                               ? "{\"stages\":[\"text_model\"],\"current\":\"text_model\",\"value\":0.0}"
                               : "{\"stages\":[\"text_model\"],\"current\":\"text_model\",\"value\":1.0}",
                       strlen("{\"stages\":[\"text_model\"],\"current\":\"text_model\",\"value\":0.0}"));
    }
    if (what == ROUTER_INFO || what == ROUTER_INFO_SHORT) {
        rsd_fleet_model_info mi;
        memset(&mi, 0, sizeof mi);
        (void)rsd_fleet_query_model(s->fleet, m, &mi);
        rsd_json_w_key(&w, "info");
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "id");
        rsd_json_w_str(&w, md->id);
        rsd_json_w_key(&w, "aliases"); /* the child's own (its --alias), as the router passes them on */
        if (mt->aliases[0] && what == ROUTER_INFO) {
            rsd_json_w_raw(&w, mt->aliases, strlen(mt->aliases));
        } else {
            rsd_json_w_begin_array(&w);
            rsd_json_w_str(&w, md->id);
            rsd_json_w_end_array(&w);
        }
        w_model_tags(&w, md);
        rsd_json_w_key(&w, "object");
        rsd_json_w_str(&w, "model");
        rsd_json_w_key(&w, "created");
        rsd_json_w_int(&w, (int64_t)(unix_ms_of(s, mi.started_ms ? mi.started_ms : s->now) / 1000));
        rsd_json_w_key(&w, "owned_by");
        rsd_json_w_str(&w, "llamacpp");
        if (mt->meta[0] && what == ROUTER_INFO) {
            rsd_json_w_key(&w, "meta");
            rsd_json_w_raw(&w, mt->meta, strlen(mt->meta));
        }
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_object(&w);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n > 0) e->router_len = (uint16_t)(at + (size_t)n - e->router_off);
    else if (what == ROUTER_INFO) { /* no room for what the child said: "loaded" all the same */
        ev_router(s, e, m, kind, status, exit_code, ROUTER_INFO_SHORT);
    }
}

/* ---- what a ready child says of itself (its GET /v1/models data[0]) ----------------- */
/* The router's "loaded" with what model m's child said (or without it), behind its
   ready event's "loading" progress; the router streams go on past it. */
static void meta_done(srv *s, int m) {
    srv_meta *mt = &s->meta[m];
    srv_event *e = &s->events[mt->ev_id % s->ev_cap];
    if (mt->ev_id && e->id == mt->ev_id) { /* not yet overwritten in the history */
        ev_router(s, e, m, "status_change", "loaded", -1, ROUTER_INFO);
        e->router_wait = false;
    }
    mt->ev_id = 0;
}

/* Forgets what model m's process said (it is gone), and the question still open. */
static void meta_drop(srv *s, int m) {
    srv_meta *mt = &s->meta[m];
    meta_done(s, m); /* it was ready: "loaded" comes before its "unloaded" */
    if (mt->req.id) (void)rsd_http_cancel(s->hc, mt->req); /* its event matches nothing now */
    mt->req.id = 0;
    mt->port = 0;
    mt->deferred = false;
    mt->meta[0] = mt->aliases[0] = '\0';
}

/* Model m's process is stopping: a question not yet sent is not sent, and the router's
   "loaded" goes out without what it would have said. One in flight may still be answered
   (it is quiet: a failure as the process ends is expected). */
static void meta_stopping(srv *s, int m) {
    if (!s->meta[m].deferred) return;
    s->meta[m].deferred = false;
    meta_done(s, m);
}

/* Token i (meta: an object of scalars; aliases: an array of strings), rewritten as JSON
   into out ("" when it is not that, or too large): a child's odd member is left out. */
static void meta_copy(const rsd_json_doc *d, int i, char *out, size_t cap, bool names) {
    rsd_json_writer w;
    char key[128], val[256];
    size_t len;
    int c;
    out[0] = '\0';
    if (rsd_json_type_of(d, i) != (names ? RSD_JSON_ARRAY : RSD_JSON_OBJECT)) return;
    rsd_json_w_init(&w, out, cap);
    if (names) rsd_json_w_begin_array(&w);
    else rsd_json_w_begin_object(&w);
    for (c = rsd_json_child(d, i); c >= 0; c = rsd_json_next(d, c)) {
        int v = names ? c : rsd_json_child(d, c);
        rsd_json_type t = rsd_json_type_of(d, v);
        if (names ? t != RSD_JSON_STRING : t != RSD_JSON_STRING && t != RSD_JSON_NUMBER && t != RSD_JSON_BOOL)
            continue;
        if (!names) {
            if (rsd_json_str(d, c, key, sizeof key, &len) != RSD_OK) continue;
            rsd_json_w_key(&w, key);
        }
        if (t == RSD_JSON_STRING) {
            if (rsd_json_str(d, v, val, sizeof val, &len) != RSD_OK) rsd_json_w_str(&w, "");
            else rsd_json_w_str(&w, val);
        } else {
            rsd_str raw = rsd_json_view(d, v);
            rsd_json_w_raw(&w, raw.ptr, raw.len);
        }
    }
    if (names) rsd_json_w_end_array(&w);
    else rsd_json_w_end_object(&w);
    if (rsd_json_w_finish(&w) < 0) out[0] = '\0';
}

/* Its answer: meta and aliases kept, then the router's "loaded" with that info (also
   when it said nothing useful: a child that is not llama-server). */
static void meta_answer(srv *s, int m, const rsd_http_event *ev) {
    static rsd_json_tok toks[1024];
    srv_meta *mt = &s->meta[m];
    rsd_json_doc d;
    mt->req.id = 0;
    if (ev->result == RSD_OK && ev->status == 200 && rsd_json_parse(&d, ev->body.ptr, ev->body.len, toks, 1024) > 0) {
        int e0 = rsd_json_at(&d, rsd_json_find(&d, 0, "data"), 0);
        if (e0 >= 0) {
            meta_copy(&d, rsd_json_find(&d, e0, "meta"), mt->meta, sizeof mt->meta, false);
            meta_copy(&d, rsd_json_find(&d, e0, "aliases"), mt->aliases, sizeof mt->aliases, true);
        }
    }
    meta_done(s, m);
}

/* Model m's process on port is ready (event e): its GET /v1/models is due (meta_service
   sends it), and the router's "loaded" event waits for the answer. */
static void meta_hold(srv *s, int m, srv_event *e, uint16_t port, uint64_t now) {
    srv_meta *mt = &s->meta[m];
    meta_drop(s, m);
    mt->port = port;
    mt->ev_id = e->id;
    mt->deferred = true;
    mt->ready_ms = now;
    e->router_wait = true;
}

/* GET /v1/models from model m's ready process (with its own key; SRV_META_TIMEOUT_MS at
   most); its answer ends the hold of the router's "loaded" event. */
static void meta_ask(srv *s, int m, uint64_t now) {
    srv_meta *mt = &s->meta[m];
    rsd_http_request q;
    rsd_http_header h[1];
    char url[64];
    mt->deferred = false;
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/models", (unsigned)mt->port);
    memset(&q, 0, sizeof q);
    q.method = "GET";
    q.url = url;
    q.total_timeout_ms = SRV_META_TIMEOUT_MS;
    q.quiet = true; /* without an answer, "loaded" goes out without its meta */
    if (s->models[m].child_auth[0]) {
        h[0].name = rsd_str_c("Authorization");
        h[0].value = rsd_str_c(s->models[m].child_auth);
        q.headers = h;
        q.num_headers = 1;
    }
    if (rsd_http_send(s->hc, &q, now, &mt->req) != RSD_OK) {
        mt->req.id = 0;
        meta_done(s, m);
    }
}

/* Sends the due GET /v1/models of each ready process once no request waits on that
   process for its answer's head (a child's HTTP threads are few: the first request after a
   cold start goes first), or 1 s after it became ready at the latest. */
static void meta_service(srv *s, uint64_t now) {
    int m, i;
    for (m = 0; m < s->cfg->nmodels; m++) {
        srv_meta *mt = &s->meta[m];
        bool first = false;
        if (!mt->deferred) continue;
        for (i = 0; i < SRV_MAX_CONNS && now < mt->ready_ms + 1000; i++) {
            const job *j = &s->jobs[i];
            if (j->model == m && (j->state == JOB_WAIT || (j->state == JOB_PROXY && !j->begun))) first = true;
        }
        if (!first) meta_ask(s, m, now);
    }
}

/* Whether the listing of model only (-1: all) waits for a ready process's own word (its
   GET /v1/models held or in flight): the router lists a loaded model with its meta. */
static bool meta_pending(const srv *s, int only) {
    int m;
    for (m = only < 0 ? 0 : only; m < (only < 0 ? s->cfg->nmodels : only + 1); m++)
        if (s->meta[m].deferred || s->meta[m].req.id) return true;
    return false;
}

/* A listing (answer_models) once every listed ready process has said its meta: asked now
   when it was held (a listing right after a cold start waits for it, bounded by the
   question's own timeout), and the listing is answered when the answer comes
   (list_wait_service). */
static void answer_models_known(srv *s, rsd_http_sreq_h h, uint64_t now, int only) {
    int m, i;
    if (!meta_pending(s, only)) { answer_models(s, h, now, only); return; }
    for (m = only < 0 ? 0 : only; m < (only < 0 ? s->cfg->nmodels : only + 1); m++)
        if (s->meta[m].deferred) meta_ask(s, m, now);
    for (i = 0; i < SRV_MAX_CONNS && s->list_wait[i].used; i++) {}
    if (i >= SRV_MAX_CONNS || !meta_pending(s, only)) { answer_models(s, h, now, only); return; }
    s->list_wait[i].h = h;
    s->list_wait[i].only = only;
    s->list_wait[i].used = true;
    s->n_list_wait++;
}

/* Answers the held listings whose metas have come. */
static void list_wait_service(srv *s, uint64_t now) {
    int i;
    for (i = 0; s->n_list_wait && i < SRV_MAX_CONNS; i++)
        if (s->list_wait[i].used && !meta_pending(s, s->list_wait[i].only)) {
            s->list_wait[i].used = false;
            s->n_list_wait--;
            answer_models(s, s->list_wait[i].h, now, s->list_wait[i].only);
        }
}

/* GET /v1/models/ID (percent-encoded id or alias): that entry, or 404. */
static void answer_model_one(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    const char *p = ev->head->target.ptr + 11, *e = ev->head->target.ptr + ev->head->target.len;
    const char *q = (const char *)memchr(p, '?', (size_t)(e - p));
    char id[RSRV_ID_MAX * 3];
    int n = rapp_pct_decode(p, (size_t)((q ? q : e) - p), false, id, sizeof id), m = n > 0 ? rsrv_find(s->cfg, id, (size_t)n) : -1;
    if (m >= 0 && rsrv_lock_allows(s->cfg, m)) { answer_models_known(s, ev->req, now, m); return; }
    /* the body a completion for that name gets (one shape for one meaning) */
    respond_unknown_model(s, ev->req, n < 0 ? rsd_str_c("(bad id)") : n >= RSRV_ID_MAX ? rsd_str_c("(too long)")
                                                                                      : str_n(id, (size_t)n));
}

static const char *state_name(const rsd_fleet_model_info *mi) {
    return mi->pool.slot >= 0 ? rsd_pool_slot_state_str(mi->pool.state) : "unloaded";
}

/* Model i is one an eviction makes room for: not resident (or starting) and wanted. */
static bool evict_wants(srv *s, int i) {
    rsd_fleet_model_info mi;
    memset(&mi, 0, sizeof mi);
    if (rsd_fleet_query_model(s->fleet, i, &mi) != RSD_OK) return false;
    return (mi.pool.waiting || mi.pool.preloads) && (mi.pool.slot < 0 || mi.pool.state == RSD_POOL_SLOT_STARTING);
}

/* "coder 2.00 GiB (estimate; ...)" for every model an eviction of victim makes room for. */
static void evict_wanted_text(srv *s, int victim, char *out, size_t cap) {
    size_t o = 0;
    int i;
    out[0] = 0;
    for (i = 0; i < s->cfg->nmodels; i++)
        if (i != victim && evict_wants(s, i)) {
            char t[160];
            int n = snprintf(out + o, cap - o, "%s%s %s", o ? ", " : "", s->cfg->models[i].id, mem_model_text(s, i, t, sizeof t));
            if (n < 0 || (size_t)n >= cap - o) break;
            o += (size_t)n;
        }
    if (!o) snprintf(out, cap, "(none waiting)");
}

/* "KEY": {"model": ID, "bytes", "bytes_from", "estimate" (total|null), "measured"
   (total|null), "source"}: model m's bytes in an event. */
static void mem_w_model(srv *s, rsd_json_writer *w, const char *key, int m) {
    const srv_mem *mm = &s->mem[m];
    const char *from;
    uint64_t b = mem_bytes(s, m, &from);
    if (strcmp(key, "model")) {
        rsd_json_w_key(w, key);
        rsd_json_w_begin_object(w);
    }
    rsd_json_w_key(w, "model");
    rsd_json_w_str(w, s->cfg->models[m].id);
    rsd_json_w_key(w, "bytes");
    rsd_json_w_int(w, (int64_t)b);
    rsd_json_w_key(w, "bytes_from");
    rsd_json_w_str(w, from);
    rsd_json_w_key(w, "estimate");
    if (mm->est_ok) rsd_json_w_int(w, (int64_t)mm->est.total);
    else rsd_json_w_null(w);
    rsd_json_w_key(w, "measured");
    if (mm->meas_ok) rsd_json_w_int(w, (int64_t)mm->rec.fig.total);
    else rsd_json_w_null(w);
    rsd_json_w_key(w, "source");
    rsd_json_w_str(w, mm->meas_ok ? mm->rec.source : mm->est_ok ? "estimate" : "none");
    if (strcmp(key, "model")) rsd_json_w_end_object(w);
}

/* The evict event: victim m, the models it made room for (resident no more, requests
   waiting), and every other resident model with why it was not chosen. */
static void ev_evict(srv *s, const rsd_fleet_event *fe, uint64_t now) {
    rsd_json_writer w;
    srv_event *e = ev_begin(s, &w, "evict", fe->model, now);
    rsd_fleet_model_info vi, mi;
    int i;
    memset(&vi, 0, sizeof vi);
    (void)rsd_fleet_query_model(s->fleet, fe->model, &vi);
    rsd_json_w_key(&w, "pid");
    rsd_json_w_int(&w, fe->pid);
    rsd_json_w_key(&w, "reason");
    rsd_json_w_str(&w, s->cfg->vram_budget_bytes ? "least recently used idle model, stopped to make room (count or bytes)"
                                                   : "least recently used idle model, stopped to make room");
    rsd_json_w_key(&w, "idle_ms");
    if (vi.last_used_ms) rsd_json_w_int(&w, (int64_t)(now - vi.last_used_ms));
    else rsd_json_w_null(&w);
    rsd_json_w_key(&w, "for");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels; i++)
        if (i != fe->model && evict_wants(s, i)) rsd_json_w_str(&w, s->cfg->models[i].id);
    rsd_json_w_end_array(&w);
    rsd_json_w_key(&w, "memory"); /* the bytes: the victim's, those it makes room for, the pool's */
    rsd_json_w_begin_object(&w);
    mem_w_model(s, &w, "victim", fe->model);
    rsd_json_w_key(&w, "for");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels; i++)
        if (i != fe->model && evict_wants(s, i)) {
            rsd_json_w_begin_object(&w);
            mem_w_model(s, &w, "model", i);
            rsd_json_w_end_object(&w);
        }
    rsd_json_w_end_array(&w);
    mem_w_pool(s, &w);
    rsd_json_w_end_object(&w);
    rsd_json_w_key(&w, "considered");
    rsd_json_w_begin_array(&w);
    for (i = 0; i < s->cfg->nmodels; i++) {
        const char *why;
        memset(&mi, 0, sizeof mi);
        if (i == fe->model || rsd_fleet_query_model(s->fleet, i, &mi) != RSD_OK || mi.pool.slot < 0) continue;
        if (mi.pool.state == RSD_POOL_SLOT_STARTING) why = mi.pool.waiting || mi.pool.preloads ? "the model room is made for" : "starting";
        else if (mi.pool.state == RSD_POOL_SLOT_STOPPING) why = "already stopping";
        else if (mi.pool.pinned) why = "pinned";
        else if (mi.pool.running) why = "busy";
        else if (mi.pool.state == RSD_POOL_SLOT_DRAINING) why = "draining";
        else why = "used more recently";
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "model");
        rsd_json_w_str(&w, s->cfg->models[i].id);
        rsd_json_w_key(&w, "state");
        rsd_json_w_str(&w, state_name(&mi));
        rsd_json_w_key(&w, "in_flight");
        rsd_json_w_int(&w, mi.pool.running);
        rsd_json_w_key(&w, "pinned");
        rsd_json_w_bool(&w, mi.pool.pinned);
        rsd_json_w_key(&w, "idle_ms");
        if (mi.last_used_ms && !mi.pool.running) rsd_json_w_int(&w, (int64_t)(now - mi.last_used_ms));
        else rsd_json_w_null(&w);
        rsd_json_w_key(&w, "kept_because");
        rsd_json_w_str(&w, why);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_array(&w);
    ev_commit(s, e, &w);
}

/* Records one fleet event in the history (and its router form) and in the counters. */
static void ev_fleet(srv *s, const rsd_fleet_event *fe, uint64_t now) {
    rsd_json_writer w;
    srv_event *e;
    srv_mstat *st;
    int m = fe->model;
    if (m < 0 || m >= s->cfg->nmodels) return;
    st = &s->mstat[m];
    switch (fe->kind) {
    case RSD_FLEET_EV_STARTING:
        st->starts++;
        st->started_at = now;
        e = ev_begin(s, &w, "start", m, now);
        rsd_json_w_key(&w, "pid");
        rsd_json_w_int(&w, fe->pid);
        rsd_json_w_key(&w, "port");
        rsd_json_w_int(&w, fe->port);
        ev_commit(s, e, &w);
        ev_router(s, e, m, "model_status", "loading", -1, ROUTER_PLAIN);
        ev_router(s, e, m, "status_change", "loading", -1, ROUTER_PROGRESS_0);
        break;
    case RSD_FLEET_EV_READY:
        st->readies++;
        st->ready_ms_last = st->started_at && now >= st->started_at ? now - st->started_at : 0;
        st->ready_ms_sum += st->ready_ms_last;
        e = ev_begin(s, &w, "ready", m, now);
        rsd_json_w_key(&w, "pid");
        rsd_json_w_int(&w, fe->pid);
        rsd_json_w_key(&w, "port");
        rsd_json_w_int(&w, fe->port);
        rsd_json_w_key(&w, "time_to_ready_ms");
        rsd_json_w_int(&w, (int64_t)st->ready_ms_last);
        ev_commit(s, e, &w);
        ev_router(s, e, m, "status_change", "loading", -1, ROUTER_PROGRESS_1);
        meta_hold(s, m, e, fe->port, now); /* "loaded" follows with what it says of itself */
        break;
    case RSD_FLEET_EV_STOPPING:
        meta_stopping(s, m);
        if (fe->why == RSD_POOL_WHY_EVICT) {
            st->evictions++;
            ev_evict(s, fe, now);
            break;
        }
        e = ev_begin(s, &w, "stop", m, now);
        rsd_json_w_key(&w, "pid");
        rsd_json_w_int(&w, fe->pid);
        rsd_json_w_key(&w, "reason");
        rsd_json_w_str(&w, rsd_pool_why_str(fe->why));
        ev_commit(s, e, &w);
        break;
    case RSD_FLEET_EV_EXITED:
        e = ev_begin(s, &w, "exit", m, now);
        rsd_json_w_key(&w, "pid");
        rsd_json_w_int(&w, fe->pid);
        rsd_json_w_key(&w, "exit_code");
        rsd_json_w_int(&w, fe->exit_code);
        rsd_json_w_key(&w, "signal");
        rsd_json_w_int(&w, fe->term_signal);
        ev_commit(s, e, &w);
        meta_drop(s, m);
        ev_router(s, e, m, "status_change", "unloaded", fe->exit_code >= 0 ? fe->exit_code : 0, ROUTER_PLAIN);
        break;
    case RSD_FLEET_EV_CRASHED: {
        bool start = fe->result == RSD_ERR_FLEET_START;
        if (start) st->failed_starts++;
        else st->crashes++;
        e = ev_begin(s, &w, start ? "failed_start" : "crash", m, now);
        rsd_json_w_key(&w, "pid");
        rsd_json_w_int(&w, fe->pid);
        rsd_json_w_key(&w, "exit_code");
        rsd_json_w_int(&w, fe->exit_code);
        rsd_json_w_key(&w, "signal");
        rsd_json_w_int(&w, fe->term_signal);
        rsd_json_w_key(&w, "message");
        rsd_json_w_str(&w, fe->message && fe->message[0] ? fe->message : rsd_result_str(fe->result));
        ev_commit(s, e, &w);
        meta_drop(s, m);
        ev_router(s, e, m, "status_change", "unloaded", fe->exit_code > 0 ? fe->exit_code : 1, ROUTER_PLAIN);
        break;
    }
    default: break;
    }
}

/* A start refused by the checks before it (binary, model file, template): failed_start
   with "before_start": true and the reason; nothing was stopped or spawned. */
static void ev_check_failed(srv *s, int m, uint64_t now) {
    rsd_json_writer w;
    srv_event *e = ev_begin(s, &w, "failed_start", m, now);
    rsd_fleet_model_info mi;
    memset(&mi, 0, sizeof mi);
    (void)rsd_fleet_query_model(s->fleet, m, &mi);
    s->mstat[m].failed_starts++;
    rsd_json_w_key(&w, "before_start");
    rsd_json_w_bool(&w, true);
    rsd_json_w_key(&w, "message");
    rsd_json_w_str(&w, mi.last_error ? mi.last_error : "the check before its start failed");
    ev_commit(s, e, &w);
}

/* A model whose bytes exceed the whole budget can never start: the pool refuses it at once
   (RSD_ERR_POOL_NO_FIT; nothing is stopped for it and nothing retries it). text gets the
   answer, with the numbers: its bytes, the budget and what other programs hold. The log
   line and the /_rsd/events "no_fit" event come once per model and figures: a client
   that asks again is answered each time, the log is not flooded. */
static void no_fit(srv *s, int m, uint64_t now, char *text, size_t cap) {
    rsd_fleet_model_info mi;
    rsd_pool_info st;
    rsd_json_writer w;
    srv_event *e;
    char a[32], b[32], c[32];
    uint64_t need;
    memset(&mi, 0, sizeof mi);
    (void)rsd_fleet_query_model(s->fleet, m, &mi);
    rsd_pool_query(rsd_fleet_pool(s->fleet), &st);
    need = mi.pool.reserve_bytes;
    snprintf(text, cap, "cannot serve '%s': it needs %s (%llu bytes) and can never fit: the byte budget is %s "
             "(%llu bytes; other programs hold %s now)", s->cfg->models[m].id, rsrv_fmt_size(need, a, sizeof a),
             (unsigned long long)need, rsrv_fmt_size(st.budget_bytes, b, sizeof b), (unsigned long long)st.budget_bytes,
             rsrv_fmt_size(st.foreign_bytes, c, sizeof c));
    if (s->nofit_bytes[m] == need && s->nofit_budget[m] == st.budget_bytes) return; /* told already */
    s->nofit_bytes[m] = need;
    s->nofit_budget[m] = st.budget_bytes;
    logf_("%s: refused: %s", s->cfg->models[m].id, text);
    e = ev_begin(s, &w, "no_fit", m, now);
    rsd_json_w_key(&w, "bytes");
    rsd_json_w_int(&w, (int64_t)need);
    rsd_json_w_key(&w, "budget_bytes");
    rsd_json_w_int(&w, (int64_t)st.budget_bytes);
    rsd_json_w_key(&w, "others_bytes");
    rsd_json_w_int(&w, (int64_t)st.foreign_bytes);
    rsd_json_w_key(&w, "message");
    rsd_json_w_str(&w, text);
    ev_commit(s, e, &w);
}

/* A request event (queued, grant after a wait, load, unload). */
static void ev_request(srv *s, const char *kind, int m, uint64_t now, int64_t waited_ms) {
    rsd_json_writer w;
    srv_event *e = ev_begin(s, &w, kind, m, now);
    rsd_fleet_model_info mi;
    memset(&mi, 0, sizeof mi);
    (void)rsd_fleet_query_model(s->fleet, m, &mi);
    rsd_json_w_key(&w, "state");
    rsd_json_w_str(&w, state_name(&mi));
    rsd_json_w_key(&w, "waiting");
    rsd_json_w_int(&w, mi.pool.waiting);
    rsd_json_w_key(&w, "in_flight");
    rsd_json_w_int(&w, mi.pool.running);
    if (waited_ms >= 0) {
        rsd_json_w_key(&w, "waited_ms");
        rsd_json_w_int(&w, waited_ms);
    }
    ev_commit(s, e, &w);
}

static srv_sub *sub_by_sreq(srv *s, rsd_http_sreq_h h) {
    int i;
    for (i = 0; i < SRV_MAX_SUBS; i++)
        if (s->subs[i].used && s->subs[i].h.id == h.id) return &s->subs[i];
    return NULL;
}

/* The number in "since=N" of the target, or of a Last-Event-ID header; -1 = none. */
static int64_t since_id(const rsd_http_server_event *ev) {
    rsd_str t = ev->head->target, le;
    const char *q = (const char *)memchr(t.ptr, '?', t.len), *end = t.ptr + t.len;
    uint64_t v;
    for (q = q ? q + 1 : end; q < end;) {
        const char *amp = (const char *)memchr(q, '&', (size_t)(end - q)), *e = amp ? amp : end;
        if (e - q > 6 && !memcmp(q, "since=", 6) && rsrv_parse_u64(q + 6, (size_t)(e - q - 6), (uint64_t)INT64_MAX, &v))
            return (int64_t)v;
        q = e + 1;
    }
    le = rsd_http_header_get(ev->head->headers, ev->head->num_headers, "Last-Event-ID");
    if (le.ptr && rsrv_parse_u64(le.ptr, le.len, (uint64_t)INT64_MAX, &v)) return (int64_t)v;
    return -1;
}

/* GET /_rsd/events (router = false) and /models/sse (router = true): an SSE stream that
   stays open. The events stream replays the history after ?since=ID (or Last-Event-ID);
   /models/sse starts with what happens next, as the router's. */
static void answer_sse(srv *s, const rsd_http_server_event *ev, bool router, uint64_t now) {
    rsd_http_header hd[6];
    size_t n = 0;
    int i;
    srv_sub *sub = NULL;
    int64_t since = router ? -1 : since_id(ev);
    for (i = 0; i < SRV_MAX_SUBS && !sub; i++)
        if (!s->subs[i].used) sub = &s->subs[i];
    if (!sub) {
        respond_error_retry(s, ev->req, 503, "unavailable_error", "too many event streams open", 1);
        return;
    }
    hd[n].name = rsd_str_c("Content-Type");
    hd[n++].value = rsd_str_c("text/event-stream");
    hd[n].name = rsd_str_c("Cache-Control");
    hd[n++].value = rsd_str_c("no-cache");
    hd[n].name = rsd_str_c("X-Accel-Buffering");
    hd[n++].value = rsd_str_c("no");
    n = cors_headers(s, ev->req, hd, n);
    if (rsd_http_stream_begin(s->hs, ev->req, 200, hd, n) != RSD_OK) return;
    memset(sub, 0, sizeof *sub);
    sub->used = true;
    sub->router = router;
    sub->h = ev->req;
    sub->next = since >= 0 ? (uint64_t)since + 1 : s->ev_last + 1;
    if (sub->next > s->ev_last + 1) sub->next = s->ev_last + 1;
    sub->last_write = now;
    if (!router) { /* one comment at once, so a client sees the stream is open */
        (void)rsd_http_stream_write(s->hs, sub->h, ": rsd-serve events\n\n", 20);
    }
}

/* Writes what each subscriber has not seen yet, as far as its send buffer takes it; one
   that fell behind the history skips to its oldest event with an "event: skipped"
   marker (its data: how many were lost). Never waits for a subscriber. */
static void subs_pump(srv *s, uint64_t now) {
    static char frame[SRV_EVENT_BYTES + 128];
    uint64_t oldest = s->ev_last >= s->ev_cap ? s->ev_last - s->ev_cap + 1 : 1;
    int i;
    for (i = 0; i < SRV_MAX_SUBS; i++) {
        srv_sub *b = &s->subs[i];
        if (!b->used) continue;
        if (b->next < oldest) {
            int fl = snprintf(frame, sizeof frame, "event: skipped\ndata: {\"skipped\":%llu,\"next\":%llu}\n\n",
                              (unsigned long long)(oldest - b->next), (unsigned long long)oldest);
            if (!b->router) {
                if (rsd_http_stream_room(s->hs, b->h) < (size_t)fl + 32) continue;
                if (rsd_http_stream_write(s->hs, b->h, frame, (size_t)fl) != RSD_OK) continue;
            }
            b->skipped += oldest - b->next;
            b->next = oldest;
        }
        while (b->next <= s->ev_last) {
            const srv_event *e = &s->events[b->next % s->ev_cap];
            int fl;
            if (b->router) {
                if (e->router_wait) break; /* its "loaded" waits for what the child says */
                if (!e->router_len) { b->next++; continue; }
                fl = snprintf(frame, sizeof frame, "data: %.*s\n\n", (int)e->router_len, e->text + e->router_off);
            } else {
                fl = snprintf(frame, sizeof frame, "id: %llu\nevent: %s\ndata: %.*s\n\n", (unsigned long long)e->id,
                              e->kind, (int)e->len, e->text);
            }
            if (fl <= 0 || (size_t)fl >= sizeof frame) { b->next++; continue; }
            if (rsd_http_stream_room(s->hs, b->h) < (size_t)fl + 32) break; /* later, or skipped */
            if (rsd_http_stream_write(s->hs, b->h, frame, (size_t)fl) != RSD_OK) break;
            b->next++;
            b->last_write = now;
        }
        if (now - b->last_write >= SRV_SSE_KEEPALIVE_MS && rsd_http_stream_room(s->hs, b->h) > 64) {
            if (rsd_http_stream_write(s->hs, b->h, ": keepalive\n\n", 13) == RSD_OK) b->last_write = now;
        }
    }
}

/* The next keep-alive comment due (UINT64_MAX = no subscriber). */
static uint64_t subs_deadline(const srv *s) {
    uint64_t d = UINT64_MAX;
    int i;
    for (i = 0; i < SRV_MAX_SUBS; i++)
        if (s->subs[i].used && s->subs[i].last_write + SRV_SSE_KEEPALIVE_MS < d)
            d = s->subs[i].last_write + SRV_SSE_KEEPALIVE_MS;
    return d;
}

/* ---- GET /metrics -------------------------------------------------------------------- */
typedef struct mbuf {
    char *p;
    size_t n, cap;
    bool full;
} mbuf;

/* The kv cache section's entries (defined after on_fleet). */
static void kv_metrics(srv *s, mbuf *b);
static void kv_on_stopping(srv *s, const rsd_fleet_event *ev, uint64_t now);
static void kv_on_ready(srv *s, const rsd_fleet_event *ev, uint64_t now);
static void kv_on_gone(srv *s, const rsd_fleet_event *ev, uint64_t now);
static bool kv_owns(const srv *s, const void *user);
static void kv_on_upstream(srv *s, srv_kv *k, const rsd_http_event *ev, uint64_t now);

static void mput(mbuf *b, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void mput(mbuf *b, const char *fmt, ...) {
    va_list ap;
    int w;
    if (b->full) return;
    va_start(ap, fmt);
    w = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= b->cap - b->n) { b->full = true; return; }
    b->n += (size_t)w;
}

/* A label value in the text format: \\, \" and \n escaped. */
static const char *mlabel(const char *v, char *out, size_t cap) {
    size_t o = 0;
    for (; *v && o + 3 < cap; v++) {
        if (*v == '\\' || *v == '"') { out[o++] = '\\'; out[o++] = *v; }
        else if (*v == '\n') { out[o++] = '\\'; out[o++] = 'n'; }
        else out[o++] = *v;
    }
    out[o] = 0;
    return out;
}

/* Resident bytes of process pid from /proc/PID/statm (Linux); -1 where unknown. */
static int64_t proc_rss(int64_t pid) {
#if defined(__linux__)
    char path[64];
    unsigned long long size = 0, res = 0;
    FILE *f;
    long page = sysconf(_SC_PAGESIZE);
    int got;
    if (pid <= 0 || page <= 0) return -1;
    snprintf(path, sizeof path, "/proc/%lld/statm", (long long)pid);
    f = fopen(path, "r");
    if (!f) return -1;
    got = fscanf(f, "%llu %llu", &size, &res);
    fclose(f);
    return got == 2 ? (int64_t)(res * (unsigned long long)page) : -1;
#else
    (void)pid;
    return -1;
#endif
}

/* Model m's rsd_serve_memory_bytes lines (label lab). */
static void mem_metrics(srv *s, mbuf *b, const char *lab, int m) {
    static const char *const parts[4] = {"model", "kv", "compute", "total"};
    const srv_mem *mm = &s->mem[m];
    int f, k;
    for (f = 0; f < 2; f++) {
        const rsrv_mem_fig *fg = f ? &mm->rec.fig : &mm->est;
        uint64_t v[4];
        if (!(f ? mm->meas_ok : mm->est_ok)) continue;
        v[0] = fg->model;
        v[1] = fg->kv;
        v[2] = fg->compute;
        v[3] = fg->total;
        for (k = 0; k < 4; k++)
            mput(b, "rsd_serve_memory_bytes{model=\"%s\",figure=\"%s\",part=\"%s\"} %llu\n", lab,
                 f ? "measured" : "estimate", parts[k], (unsigned long long)v[k]);
    }
}

static void answer_metrics(srv *s, rsd_http_sreq_h h) {
    static const char *const states[] = {"unloaded", "starting", "ready", "draining", "stopping", "failed"};
    rsd_pool_info *st = (rsd_pool_info *)calloc(1, sizeof *st);
    rsd_fleet_model_info *mi = (rsd_fleet_model_info *)calloc((size_t)s->cfg->nmodels + 1, sizeof *mi);
    char lab[2 * RSRV_ID_MAX + 8];
    rsd_http_header hd[3];
    size_t nh = 0;
    mbuf b;
    int i, k;
    if (!st || !mi) {
        free(st);
        free(mi);
        respond_error(s, h, 500, "server_error", "out of memory");
        return;
    }
    b.p = s->out;
    b.n = 0;
    b.cap = SRV_OUT;
    b.full = false;
    rsd_pool_query(rsd_fleet_pool(s->fleet), st);
    for (i = 0; i < s->cfg->nmodels; i++) (void)rsd_fleet_query_model(s->fleet, i, &mi[i]);
#define SRV_FAMILY(name, type, help) mput(&b, "# HELP rsd_serve_" name " " help "\n# TYPE rsd_serve_" name " " type "\n")
#define SRV_EACH(body) for (i = 0; i < s->cfg->nmodels; i++) { \
        if (s->cfg->models[i].retired && !model_running(s, i)) continue; /* removed by a reload */ \
        mlabel(s->cfg->models[i].id, lab, sizeof lab); body; }
    SRV_FAMILY("model_state", "gauge", "1 for the state each model is in (unloaded, starting, ready, draining, stopping, failed).");
    SRV_EACH(for (k = 0; k < 6; k++) {
        const char *cur = state_name(&mi[i]);
        bool failed = !strcmp(cur, "unloaded") && mi[i].last_result < 0;
        bool on = k == 5 ? failed : (!strcmp(cur, states[k]) && !(k == 0 && failed));
        mput(&b, "rsd_serve_model_state{model=\"%s\",state=\"%s\"} %d\n", lab, states[k], on ? 1 : 0);
    })
    SRV_FAMILY("requests_total", "counter", "Requests routed to the model.");
    SRV_EACH(mput(&b, "rsd_serve_requests_total{model=\"%s\"} %llu\n", lab, (unsigned long long)s->mstat[i].requests))
    SRV_FAMILY("in_flight", "gauge", "Requests the model's process is answering now.");
    SRV_EACH(mput(&b, "rsd_serve_in_flight{model=\"%s\"} %u\n", lab, (unsigned)mi[i].pool.running))
    SRV_FAMILY("queued", "gauge", "Requests waiting for the model.");
    SRV_EACH(mput(&b, "rsd_serve_queued{model=\"%s\"} %u\n", lab, (unsigned)mi[i].pool.waiting))
    SRV_FAMILY("starts_total", "counter", "Processes started for the model.");
    SRV_EACH(mput(&b, "rsd_serve_starts_total{model=\"%s\"} %llu\n", lab, (unsigned long long)s->mstat[i].starts))
    SRV_FAMILY("failed_starts_total", "counter", "Starts that failed (spawn error, exit or timeout before ready).");
    SRV_EACH(mput(&b, "rsd_serve_failed_starts_total{model=\"%s\"} %llu\n", lab, (unsigned long long)s->mstat[i].failed_starts))
    SRV_FAMILY("evictions_total", "counter", "Times the model was stopped to make room for another.");
    SRV_EACH(mput(&b, "rsd_serve_evictions_total{model=\"%s\"} %llu\n", lab, (unsigned long long)s->mstat[i].evictions))
    SRV_FAMILY("crashes_total", "counter", "Times the model's process died while serving.");
    SRV_EACH(mput(&b, "rsd_serve_crashes_total{model=\"%s\"} %llu\n", lab, (unsigned long long)s->mstat[i].crashes))
    SRV_FAMILY("time_to_ready_seconds", "gauge", "Start to ready of the model's last start.");
    SRV_EACH(if (s->mstat[i].readies) mput(&b, "rsd_serve_time_to_ready_seconds{model=\"%s\"} %.3f\n", lab,
                                          (double)s->mstat[i].ready_ms_last / 1000.0))
    SRV_FAMILY("readies_total", "counter", "Starts that became ready.");
    SRV_EACH(mput(&b, "rsd_serve_readies_total{model=\"%s\"} %llu\n", lab, (unsigned long long)s->mstat[i].readies))
    SRV_FAMILY("last_use_timestamp_seconds", "gauge", "Unix time of the model's last use.");
    SRV_EACH(if (mi[i].last_used_ms) mput(&b, "rsd_serve_last_use_timestamp_seconds{model=\"%s\"} %.3f\n", lab,
                                         (double)wall_ms(s, mi[i].last_used_ms) / 1000.0))
    SRV_FAMILY("process_resident_bytes", "gauge", "Resident memory of the model's process (Linux /proc/PID/statm).");
    SRV_EACH({
        int64_t rss = mi[i].pid > 0 ? proc_rss(mi[i].pid) : -1;
        if (rss >= 0) mput(&b, "rsd_serve_process_resident_bytes{model=\"%s\",pid=\"%lld\"} %lld\n", lab,
                           (long long)mi[i].pid, (long long)rss);
    })
    SRV_FAMILY("memory_bytes", "gauge", "What the model takes (figure: estimate from its GGUF header and start parameters, or measured once it ran; part: model, kv, compute, total).");
    SRV_EACH(mem_metrics(s, &b, lab, i))
    SRV_FAMILY("admit_bytes", "gauge", "Bytes admission and eviction count for the model (reserve, else measured, else estimate; 0 without a byte budget).");
    SRV_EACH(mput(&b, "rsd_serve_admit_bytes{model=\"%s\"} %llu\n", lab, (unsigned long long)mem_bytes(s, i, NULL)))
    SRV_FAMILY("pool_live", "gauge", "Processes starting, ready or draining.");
    mput(&b, "rsd_serve_pool_live %d\n", st->live_slots);
    SRV_FAMILY("pool_max_models", "gauge", "Most processes resident at once.");
    mput(&b, "rsd_serve_pool_max_models %d\n", s->cfg->max_models);
    SRV_FAMILY("pool_running", "gauge", "Requests in flight in all.");
    mput(&b, "rsd_serve_pool_running %u\n", (unsigned)st->running);
    SRV_FAMILY("pool_waiting", "gauge", "Requests waiting in all.");
    mput(&b, "rsd_serve_pool_waiting %u\n", (unsigned)st->waiting);
    SRV_FAMILY("pool_reserved_bytes", "gauge", "Bytes reserved against vram_budget.");
    mput(&b, "rsd_serve_pool_reserved_bytes %llu\n", (unsigned long long)st->reserved_bytes);
#define SRV_PC(name, help) SRV_FAMILY("pool_" #name "_total", "counter", help); \
    mput(&b, "rsd_serve_pool_" #name "_total %llu\n", (unsigned long long)st->name);
    SRV_PC(acquires, "Requests that asked for a place.")
    SRV_PC(grants_immediate, "Requests granted at once.")
    SRV_PC(grants_queued, "Requests granted after a wait.")
    SRV_PC(cancels, "Requests cancelled (client gone).")
    SRV_PC(releases, "Requests finished.")
    SRV_PC(spawns, "Processes spawned.")
    SRV_PC(readies, "Processes that became ready.")
    SRV_PC(load_failures, "Starts that failed.")
    SRV_PC(crashes, "Processes that died unasked.")
    SRV_PC(exits, "Processes gone after a stop.")
    SRV_PC(evictions, "Idle models stopped to make room.")
    SRV_PC(ttl_expiries, "Models stopped after their ttl.")
    SRV_PC(unloads, "Models unloaded on request.")
    SRV_PC(fails, "Requests failed by the pool.")
    SRV_PC(starve_drains, "Models drained for a request waiting past max_wait.")
    SRV_PC(no_fit, "Requests whose model cannot fit the budget.")
    SRV_PC(backoffs, "Requests refused while a failed model backs off.")
    SRV_PC(restores, "Models started again after the start they made room for failed.")
#undef SRV_PC
    kv_metrics(s, &b);
#undef SRV_EACH
#undef SRV_FAMILY
    free(st);
    free(mi);
    if (b.full) { respond_error(s, h, 500, "server_error", "metrics too large"); return; }
    hd[nh].name = rsd_str_c("Content-Type");
    hd[nh++].value = rsd_str_c("text/plain; version=0.0.4; charset=utf-8");
    nh = cors_headers(s, h, hd, nh);
    (void)rsd_http_respond(s->hs, h, 200, hd, nh, b.p, b.n);
}

/* GET /: the status page, self-contained (no external assets); in parts under the 4095
   bytes a C99 string literal may have. */
static const char *const srv_page[] = {
    "<!doctype html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rsd-serve</title>\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<style>\n"
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}\n"
    "h1{font-size:1.3em;margin:0 0 .5em}\n"
    "table{border-collapse:collapse;background:#fff;margin:.5em 0 1em}\n"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;white-space:nowrap}\n"
    "th{background:#eee}\n"
    "td.state{font-weight:600}\n"
    "tr.ready td.state{color:#070}tr.starting td.state{color:#a60}tr.unloaded td.state{color:#777}\n"
    "tr.stopping td.state,tr.draining td.state{color:#a60}tr.failed td.state{color:#b00}\n"
    "#events{font:12px/1.35 ui-monospace,monospace;background:#fff;border:1px solid #ccc;padding:.4em;\n"
    "max-height:22em;overflow:auto;white-space:pre-wrap;margin:0}\n"
    "#msg{color:#b00}\n"
    "button{font-size:12px}\n"
    "</style></head>\n"
    "<body>\n"
    "<h1>rsd-serve</h1>\n"
    "<p><label>Key <input id=\"key\" type=\"password\" size=\"24\" placeholder=\"api or admin key, if set\"></label>\n"
    "<button id=\"savekey\">use</button> <span id=\"pool\"></span> <span id=\"msg\"></span></p>\n"
    "<table id=\"models\"><thead><tr><th>model</th><th>state</th><th>pid</th><th>port</th><th>in flight</th>\n"
    "<th>queue</th><th>last use</th><th>ttl</th><th>memory</th><th>kv cache</th><th></th></tr></thead><tbody></tbody></table>\n"
    "<h2 style=\"font-size:1.1em\">Events</h2>\n"
    "<pre id=\"events\"></pre>\n"
    "<script>\n"
    "\"use strict\";\n"
    "var key = sessionStorage.getItem(\"rsd-key\") || \"\", lastId = 0, timer = 0;\n"
    "function $(id) { return document.getElementById(id); }\n"
    "function hdrs(json) {\n"
    "  var h = {};\n"
    "  if (key) h[\"Authorization\"] = \"Bearer \" + key;\n"
    "  if (json) h[\"Content-Type\"] = \"application/json\";\n"
    "  return h;\n"
    "}\n"
    "function ago(ms) {\n"
    "  if (ms === null || ms === undefined) return \"never\";\n"
    "  if (ms < 1000) return ms + \" ms ago\";\n"
    "  if (ms < 120000) return Math.round(ms / 1000) + \" s ago\";\n"
    "  return Math.round(ms / 60000) + \" min ago\";\n"
    "}\n"
    "",
    "function mib(b) { return b >= 1073741824 ? (b / 1073741824).toFixed(2) + \" GiB\" : (b / 1048576).toFixed(1) + \" MiB\"; }\n"
    "function mem(x) {\n"
    "  if (!x) return \"\";\n"
    "  var t = x.bytes ? mib(x.bytes) + \" (\" + x.bytes_from + \")\" : \"\";\n"
    "  if (x.estimate) t += (t ? \", \" : \"\") + \"est. \" + mib(x.estimate.total);\n"
    "  if (x.measured) t += (t ? \", \" : \"\") + \"took \" + mib(x.measured.total) + \" (\" + x.source + \")\";\n"
    "  return t;\n"
    "}\n"
    "function cell(tr, cls, text) {\n"
    "  var td = document.createElement(\"td\");\n"
    "  td.className = cls;\n"
    "  td.textContent = text;\n"
    "  tr.appendChild(td);\n"
    "  return td;\n"
    "}\n"
    "function act(what, id) {\n"
    "  fetch(\"/models/\" + what, {method: \"POST\", headers: hdrs(true), body: JSON.stringify({model: id})})\n"
    "    .then(function (r) { return r.json().then(function (j) {\n"
    "      $(\"msg\").textContent = r.ok ? \"\" : what + \" \" + id + \": \" + ((j.error && j.error.message) || r.status);\n"
    "      refresh();\n"
    "    }); })\n"
    "    .catch(function (e) { $(\"msg\").textContent = String(e); });\n"
    "}\n"
    "function render(j) {\n"
    "  var tb = $(\"models\").tBodies[0];\n"
    "  tb.textContent = \"\";\n"
    "  j.models.forEach(function (m) {\n"
    "    var tr = document.createElement(\"tr\"), st = m.state, b;\n"
    "    if (st === \"unloaded\" && m.last_error) st = \"failed\";\n"
    "    tr.dataset.model = m.id;\n"
    "    tr.className = st;\n"
    "    cell(tr, \"id\", m.id);\n"
    "    cell(tr, \"state\", m.state).title = m.last_error || \"\";\n"
    "    cell(tr, \"pid\", m.pid ? String(m.pid) : \"\");\n"
    "    cell(tr, \"port\", m.port ? String(m.port) : \"\");\n"
    "    cell(tr, \"in_flight\", String(m.in_flight));\n"
    "    cell(tr, \"waiting\", String(m.waiting));\n"
    "    cell(tr, \"last_use\", ago(m.last_used_ms_ago));\n"
    "    cell(tr, \"ttl\", m.ttl_s ? m.ttl_s + \" s\" : \"never\");\n"
    "    cell(tr, \"memory\", mem(m.memory));\n"
    "    var kv = m.kv_cache;\n"
    "    cell(tr, \"kv\", kv ? kv.saved_slots + \" saved (\" + kv.saved_bytes + \" B), \" + kv.restores + \" restored, \" +\n"
    "      kv.misses + \" missed\" : \"\");\n"
    "    var td = cell(tr, \"actions\", \"\");\n"
    "    b = document.createElement(\"button\"); b.textContent = \"load\"; b.className = \"load\";\n"
    "    b.onclick = function () { act(\"load\", m.id); }; td.appendChild(b);\n"
    "    b = document.createElement(\"button\"); b.textContent = \"unload\"; b.className = \"unload\";\n"
    "    b.onclick = function () { act(\"unload\", m.id); }; td.appendChild(b);\n"
    "    tb.appendChild(tr);\n"
    "  });\n",
    "  $(\"pool\").textContent = j.live + \" of \" + j.max_models + \" resident, \" + j.running + \" in flight, \" +\n"
    "    j.waiting + \" waiting\" + (j.memory && j.memory.budget_bytes ? \"; budget \" + mib(j.memory.budget_bytes) +\n"
    "    \", reserved \" + mib(j.memory.reserved_bytes) + \", leased \" + mib(j.memory.leased_bytes) + \", others \" +\n"
    "    mib(j.memory.others_bytes) : \"\");\n"
    "  document.body.dataset.rendered = String(j.models.length);\n"
    "}\n"
    "function refresh() {\n"
    "  return fetch(\"/status\", {headers: hdrs(false)}).then(function (r) {\n"
    "    if (r.status === 401) { $(\"msg\").textContent = \"this server needs a key: enter it above\"; return; }\n"
    "    return r.json().then(render);\n"
    "  }).catch(function (e) { $(\"msg\").textContent = String(e); });\n"
    "}\n"
    "function soon() { if (!timer) timer = setTimeout(function () { timer = 0; refresh(); }, 150); }\n"
    "function show(id, kind, data) {\n"
    "  var pre = $(\"events\"), line = document.createElement(\"div\"), d;\n"
    "  try { d = JSON.parse(data); } catch (e) { d = {}; }\n"
    "  line.className = \"ev ev-\" + kind;\n"
    "  var t = d.time_ms, m = d.model, rest;\n"
    "  delete d.id; delete d.time_ms; delete d.event; delete d.model;\n"
    "  rest = JSON.stringify(d);\n"
    "  line.textContent = (t ? new Date(t).toLocaleTimeString() + \" \" : \"\") + \"#\" + id + \" \" + kind +\n"
    "    (m ? \" \" + m : \"\") + (rest === \"{}\" ? \"\" : \" \" + rest);\n"
    "  pre.appendChild(line);\n"
    "  while (pre.childNodes.length > 500) pre.removeChild(pre.firstChild);\n"
    "  pre.scrollTop = pre.scrollHeight;\n"
    "}\n"
    "/* EventSource cannot send a key, so the stream is read with fetch. */\n"
    "function events() {\n"
    "  fetch(\"/_rsd/events?since=\" + lastId, {headers: hdrs(false)}).then(function (r) {\n"
    "    if (!r.ok || !r.body) { setTimeout(events, 2000); return; }\n"
    "    var rd = r.body.getReader(), dec = new TextDecoder(), buf = \"\";\n"
    "    function pump() {\n"
    "      return rd.read().then(function (x) {\n"
    "        if (x.done) { setTimeout(events, 1000); return; }\n"
    "        buf += dec.decode(x.value, {stream: true});\n"
    "        var at;\n"
    "        while ((at = buf.indexOf(\"\\n\\n\")) >= 0) {\n"
    "          var block = buf.slice(0, at), id = \"\", kind = \"message\", data = \"\";\n"
    "          buf = buf.slice(at + 2);\n"
    "          block.split(\"\\n\").forEach(function (l) {\n"
    "            if (l.indexOf(\"id: \") === 0) id = l.slice(4);\n"
    "            else if (l.indexOf(\"event: \") === 0) kind = l.slice(7);\n"
    "            else if (l.indexOf(\"data: \") === 0) data += l.slice(6);\n"
    "          });\n"
    "          if (!data) continue;\n"
    "          if (id) lastId = +id;\n"
    "          show(id, kind, data);\n"
    "          soon();\n"
    "        }\n"
    "        return pump();\n"
    "      });\n"
    "    }\n"
    "    return pump();\n"
    "  }).catch(function () { setTimeout(events, 2000); });\n"
    "}\n"
    "if (location.hash.indexOf(\"#key=\") === 0) { /* a key given in the URL's fragment (never sent) */\n"
    "  key = decodeURIComponent(location.hash.slice(5));\n"
    "  sessionStorage.setItem(\"rsd-key\", key);\n"
    "  history.replaceState(null, \"\", location.pathname);\n"
    "}\n"
    "$(\"key\").value = key;\n"
    "$(\"savekey\").onclick = function () {\n"
    "  key = $(\"key\").value;\n"
    "  sessionStorage.setItem(\"rsd-key\", key);\n"
    "  $(\"msg\").textContent = \"\";\n"
    "  refresh();\n"
    "};\n"
    "refresh();\n"
    "events();\n"
    "setInterval(refresh, 5000);\n"
    "</script>\n"
    "</body></html>\n",
    NULL};

/* GET /: the status page. */
static void answer_page(srv *s, rsd_http_sreq_h h) {
    rsd_http_header hd[4];
    size_t n = 0, k;
    for (k = 0; srv_page[k]; k++) {
        size_t l = strlen(srv_page[k]);
        memcpy(s->out + n, srv_page[k], l);
        n += l;
    }
    hd[0].name = rsd_str_c("Content-Type");
    hd[0].value = rsd_str_c("text/html; charset=utf-8");
    hd[1].name = rsd_str_c("Cache-Control");
    hd[1].value = rsd_str_c("no-cache");
    k = cors_headers(s, h, hd, 2);
    (void)rsd_http_respond(s->hs, h, 200, hd, k, s->out, n);
}

static void on_request(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    bool get = rsd_str_eq_c(ev->head->method, "GET"), post = rsd_str_eq_c(ev->head->method, "POST");
    char name[RSRV_ID_MAX];
    size_t len = 0;
    if (rsd_str_eq_c(ev->head->method, "OPTIONS")) {
        answer_preflight(s, ev);
        return;
    }
    if (get && (path_is(ev, "/health") || path_is(ev, "/v1/health"))) {
        static const char ok[] = "{\"status\":\"ok\"}";
        respond_json(s, ev->req, 200, ok, sizeof ok - 1);
        return;
    }
    if (get && (path_is(ev, "/") || path_is(ev, "/index.html"))) { /* no data in it: every fetch is checked */
        answer_page(s, ev->req);
        return;
    }
    if (!auth_ok(s, ev, admin_path(ev))) {
        respond_unauthorized(s, ev->req, admin_path(ev));
        return;
    }
    if (get && path_is(ev, "/metrics")) {
        answer_metrics(s, ev->req);
    } else if (get && path_is(ev, "/_rsd/events")) {
        answer_sse(s, ev, false, now);
    } else if (get && path_is(ev, "/models/sse")) {
        answer_sse(s, ev, true, now);
    } else if (get && (path_is(ev, "/v1/models") || path_is(ev, "/models") || path_is(ev, "/api/v0/models"))) {
        answer_models_known(s, ev->req, now, -1);
    } else if (get && path_starts(ev, "/v1/models/")) {
        answer_model_one(s, ev, now);
    } else if (get && path_is(ev, "/_rsd/affinity")) {
        answer_affinity(s, ev->req);
    } else if (post && path_is(ev, "/_rsd/lease")) {
        answer_lease_take(s, ev, now);
    } else if ((get || rsd_str_eq_c(ev->head->method, "DELETE")) && path_starts(ev, "/_rsd/lease/")) {
        answer_lease(s, ev, !get, now);
    } else if (get && path_is(ev, "/props") && query_model(ev->head->target, name, sizeof name, &len) == 0) {
        answer_props(s, ev->req);
    } else if (get && (path_is(ev, "/status") || path_is(ev, "/_rsd/status"))) {
        answer_status(s, ev->req, now);
    } else if (post && path_is(ev, "/models/load")) {
        answer_load(s, ev, now);
    } else if (post && path_is(ev, "/models/unload")) {
        answer_unload(s, ev, now);
    } else if (post && path_is(ev, "/_rsd/reload")) {
        answer_reload(s, ev, now);
    } else if (post && !path_is(ev, "/models")) {
        on_inference(s, ev, now, false);
    } else if (get && memchr(ev->head->target.ptr, '?', ev->head->target.len) &&
               query_model(ev->head->target, name, sizeof name, &len) != 0) {
        on_inference(s, ev, now, true); /* GET /props?model=X, /slots?model=X, ... */
    } else {
        respond_404(s, ev->req);
    }
}

/* The client of a waiting or streaming request went away. */
static void on_closed(srv *s, rsd_http_sreq_h h, uint64_t now) {
    job *j = job_by_sreq(s, h);
    srv_sub *b = sub_by_sreq(s, h);
    int i;
    if (b) b->used = false;
    for (i = 0; s->n_list_wait && i < SRV_MAX_CONNS; i++)
        if (s->list_wait[i].used && s->list_wait[i].h.id == h.id) {
            s->list_wait[i].used = false;
            s->n_list_wait--;
        }
    if (!j) return;
    j->client_gone = true;
    if (s->opts.verbose) logf_("%s %s %s: client went away", j->method, j->path, s->cfg->models[j->model].id);
    if (j->state == JOB_WAIT) { /* leaves the queue */
        (void)rsd_fleet_cancel(s->fleet, j->preq, now);
        job_free(s, j, now);
        return;
    }
    job_release(s, j, now, true);
    if (j->up_active) (void)rsd_http_cancel(s->hc, j->up); /* its event frees the job */
    else job_free(s, j, now);
}

/* Ends a proxied answer whose upstream completed and whose stash is out. */
static void job_finish(srv *s, job *j, uint64_t now) {
    if (j->begun && j->end_close) (void)rsd_http_stream_end_close(s->hs, j->sreq);
    else if (j->begun) (void)rsd_http_stream_end(s->hs, j->sreq);
    job_free(s, j, now);
}

static void on_upstream(srv *s, const rsd_http_event *ev, uint64_t now) {
    job *j = (job *)ev->user;
    int m;
    if (kv_owns(s, ev->user)) { kv_on_upstream(s, (srv_kv *)ev->user, ev, now); return; }
    for (m = 0; m < s->cfg->nmodels && ev->req.id; m++)
        if (s->meta[m].req.id == ev->req.id) { meta_answer(s, m, ev); return; }
    if (!j || j->state == JOB_FREE) return;
    j->up_active = false;
    j->paused = false;
    if (j->client_gone) { job_free(s, j, now); return; }
    if (j->aff_phase == AFF_SAMPLE || j->aff_phase == AFF_ERASE) { aff_on_upstream(s, j, ev, now); return; }
    if (ev->result != RSD_OK || j->broken) {
        char msg[512];
        bool drain = false;
        snprintf(msg, sizeof msg, "upstream '%s' (127.0.0.1:%u) failed%s: %s%s%s", s->cfg->models[j->model].id,
                 (unsigned)j->port, j->begun ? " mid-stream" : "",
                 rsd_result_str(ev->result != RSD_OK ? ev->result : RSD_ERR_IO), ev->sys_errno ? " - " : "",
                 ev->sys_errno ? strerror(ev->sys_errno) : "");
        if (!j->begun) respond_error(s, j->sreq, 502, "server_error", msg);
        else if (!j->broken && j->sse && job_sse_error(s, j, msg)) drain = j->end_close = true; /* the event, the end, the close */
        else (void)rsd_http_abort(s->hs, j->sreq);
        logf_("%s %s %s: upstream failed: %s", j->method, j->path, s->cfg->models[j->model].id,
              rsd_result_str(ev->result));
        if (!j->broken) (void)rsd_fleet_report(s->fleet, j->model, j->port, 502, now); /* the watchdog counts it */
        job_release(s, j, now, false);
        if (drain && j->stash_len) {
            if (!j->stall_since) j->stall_since = now;
            j->up_done = true;
            j->state = JOB_DRAIN;
        } else if (drain) {
            job_finish(s, j, now);
        } else {
            job_free(s, j, now);
        }
        return;
    }
    job_release(s, j, now, false);
    job_log(s, j, ev->status, now);
    (void)rsd_fleet_report(s->fleet, j->model, j->port, ev->status, now); /* 5xx in a row: the watchdog */
    if (!j->begun) { /* no body bytes came: answer with the head alone */
        rsd_http_header out[4];
        rsd_str ct = rsd_http_header_get(ev->headers, ev->num_headers, "Content-Type");
        size_t nh = 0;
        char qp[16];
        if (ct.ptr) {
            out[0].name = rsd_str_c("Content-Type");
            out[0].value = ct;
            nh = 1;
        }
        nh += job_queue_header(j, out + nh, qp, sizeof qp);
        nh = cors_headers(s, j->sreq, out, nh);
        (void)rsd_http_respond(s->hs, j->sreq, ev->status, out, nh, "", 0);
        job_free(s, j, now);
        return;
    }
    if (j->stash_len) {
        j->up_done = true;
        j->state = JOB_DRAIN;
        return;
    }
    job_finish(s, j, now);
}

/* A client that stopped reading holds its model's place (the upstream is paused for
   it): it is cut after send_timeout without progress, or after SRV_STALL_DRAIN_MS when
   its model must make room (drained for a request waiting past max_wait, or an
   unload), and its request is cancelled. Returns true when it was cut. */
static bool job_stalled(srv *s, job *j, uint64_t now) {
    uint32_t limit = s->cfg->send_timeout_ms ? s->cfg->send_timeout_ms : RSRV_SEND_TIMEOUT_DEFAULT_MS;
    uint64_t idle = now - j->stall_since;
    bool drain = false;
    if (!j->stall_since || idle < SRV_STALL_DRAIN_MS) return false;
    if (idle < limit) {
        rsd_fleet_model_info mi;
        memset(&mi, 0, sizeof mi);
        drain = rsd_fleet_query_model(s->fleet, j->model, &mi) == RSD_OK &&
                mi.pool.state == RSD_POOL_SLOT_DRAINING;
        if (!drain) return false;
    }
    logf_("%s %s %s: the client read nothing for %llu ms%s; disconnected, request cancelled", j->method, j->path,
          s->cfg->models[j->model].id, (unsigned long long)idle, drain ? " while its model must make room" : "");
    (void)rsd_http_abort(s->hs, j->sreq);
    j->client_gone = true;
    job_release(s, j, now, true);
    if (j->up_active) (void)rsd_http_cancel(s->hc, j->up); /* its event frees the job */
    else job_free(s, j, now);
    return true;
}

/* The next time jobs_service has a stalled client to look at (UINT64_MAX = none). */
static uint64_t jobs_deadline(const srv *s) {
    uint32_t limit = s->cfg->send_timeout_ms ? s->cfg->send_timeout_ms : RSRV_SEND_TIMEOUT_DEFAULT_MS;
    uint64_t d = UINT64_MAX;
    int i;
    for (i = 0; i < SRV_MAX_CONNS; i++) {
        const job *j = &s->jobs[i];
        uint64_t t;
        if ((j->state != JOB_PROXY && j->state != JOB_DRAIN) || !j->stall_since || j->client_gone) continue;
        t = j->stall_since + (s->now - j->stall_since < SRV_STALL_DRAIN_MS ? SRV_STALL_DRAIN_MS : limit);
        if (t < d) d = t;
    }
    return d;
}

/* After each client step: stash flushing, broken answers, stalled clients. */
static void jobs_service(srv *s, uint64_t now) {
    int i;
    for (i = 0; i < SRV_MAX_CONNS; i++) {
        job *j = &s->jobs[i];
        if (j->state != JOB_PROXY && j->state != JOB_DRAIN) continue;
        if (j->broken && j->up_active) {
            (void)rsd_http_cancel(s->hc, j->up); /* the event answers (or cuts) */
            continue;
        }
        if (j->stash_len && !j->client_gone) {
            size_t room = rsd_http_stream_room(s->hs, j->sreq), n = j->stash_len;
            if (room == 0) {
                (void)job_stalled(s, j, now);
                continue;
            }
            if (n > room) n = room;
            if (rsd_http_stream_write(s->hs, j->sreq, j->stash, n) != RSD_OK) continue;
            memmove(j->stash, j->stash + n, j->stash_len - n);
            j->stash_len -= n;
            j->stall_since = j->stash_len ? now : 0; /* progress */
            if (!j->stash_len) {
                if (j->state == JOB_DRAIN) job_finish(s, j, now);
                else if (j->paused) {
                    (void)rsd_http_pause(s->hc, j->up, false);
                    j->paused = false;
                }
            }
        }
    }
}

/* ---- fleet events ------------------------------------------------------------------ */
static void on_fleet(srv *s, const rsd_fleet_event *ev, uint64_t now) {
    const char *id = ev->model_id ? ev->model_id : "?";
    ev_fleet(s, ev, now);
    switch (ev->kind) {
    case RSD_FLEET_EV_GRANT: {
        job *j = (job *)ev->user;
        if (!j || j->state != JOB_WAIT || j->preq.id != ev->req.id) {
            (void)rsd_fleet_release(s->fleet, ev->req, now);
            return;
        }
        j->granted = true;
        j->port = ev->port;
        if (j->queued) ev_request(s, "grant", j->model, now, (int64_t)(now - j->t0));
        job_send(s, j, now);
        break;
    }
    case RSD_FLEET_EV_FAIL: {
        job *j = (job *)ev->user;
        char msg[RSD_FLEET_MESSAGE_MAX + 128];
        bool told = ev->result == RSD_ERR_POOL_NO_FIT && ev->model >= 0; /* no_fit logs it, once */
        if (told) {
            no_fit(s, ev->model, now, msg, sizeof msg);
        } else {
            snprintf(msg, sizeof msg, "cannot serve '%s': %s", id,
                     ev->message && ev->message[0] ? ev->message : rsd_result_str(ev->result));
        }
        if (j && j->state == JOB_WAIT && j->preq.id == ev->req.id) {
            if (ev->result == RSD_ERR_FLEET_START && ev->model >= 0)
                respond_unavailable(s, j->sreq, ev->model, now, ev->message);
            else
                respond_error(s, j->sreq, 503, "unavailable_error", msg);
            job_log(s, j, 503, now);
            j->granted = false;
            job_free(s, j, now);
        }
        if (!s->stopping && !told) logf_("%s", msg);
        break;
    }
    case RSD_FLEET_EV_STARTING:
        logf_("%s: starting pid %lld port %u", id, (long long)ev->pid, (unsigned)ev->port);
        break;
    case RSD_FLEET_EV_READY:
        logf_("%s: ready pid %lld port %u", id, (long long)ev->pid, (unsigned)ev->port);
        kv_on_ready(s, ev, now);
        mem_on_ready(s, ev, now);
        break;
    case RSD_FLEET_EV_STOPPING:
        if (ev->why == RSD_POOL_WHY_EVICT && ev->model >= 0 && (s->cfg->vram_budget_bytes || s->cfg->vram_budget_auto)) {
            char held[160], pool[160], wanted[RSRV_MAX_MODELS * 40 + 8];
            evict_wanted_text(s, ev->model, wanted, sizeof wanted);
            logf_("%s: stopping pid %lld (evict: it holds %s; %s; room for %s)", id, (long long)ev->pid,
                  mem_model_text(s, ev->model, held, sizeof held), mem_pool_text(s, pool, sizeof pool), wanted);
        } else
            logf_("%s: stopping pid %lld (%s)", id, (long long)ev->pid, rsd_pool_why_str(ev->why));
        kv_on_stopping(s, ev, now);
        /* our kept-alive sockets to it go now (a held stop's save connects anew): llama-server's
           HTTP threads look at an idle connection every 10 ms, and its exit waits for them (a
           cold swap waits for that exit) */
        if (ev->port) (void)rsd_http_client_close_idle(s->hc, "127.0.0.1", ev->port);
        break;
    case RSD_FLEET_EV_EXITED:
        kv_on_gone(s, ev, now);
        logf_("%s: exited pid %lld (code %d%s%s)", id, (long long)ev->pid, ev->exit_code,
              ev->term_signal ? ", signal " : "", ev->term_signal ? strsignal(ev->term_signal) : "");
        if (ev->model >= 0 && ev->model < RSRV_MAX_MODELS && s->restart[ev->model]) {
            s->restart[ev->model] = false; /* changed by a reload while it ran: start it anew */
            if (!s->stopping && !model_running(s, ev->model)) {
                logf_("%s: starting again with its new configuration", id);
                (void)rsd_fleet_load(s->fleet, ev->model, now);
            }
        }
        break;
    case RSD_FLEET_EV_CRASHED:
        kv_on_gone(s, ev, now);
        if (ev->pid)
            logf_("%s: failed pid %lld: %s", id, (long long)ev->pid,
                  ev->message && ev->message[0] ? ev->message : rsd_result_str(ev->result));
        else
            logf_("%s: failed: %s", id, ev->message && ev->message[0] ? ev->message : rsd_result_str(ev->result));
        break;
    default: break;
    }
}

/* ---- kv cache: a swap keeps the conversation (rsd_serve_kv.h has the pure parts) ---- */
/* With kv_cache_dir, every llama_server model's child gets --slot-save-path DIR. Before
   a ready child stops (the fleet holds its SIGTERM: desc.stop_hold_ms) its slots that
   hold a prompt are saved (GET /props for the build, GET /slots, then one POST
   /slots/N?action=save at a time), the files are made 0600 and a sidecar is written;
   then the stop goes on (rsd_fleet_stop_go), at the latest after kv_save_timeout or
   half of stop_grace, whichever is shorter: the save is part of the stop's grace (the
   SIGKILL is due stop_grace after the stop began, saved or not). When
   the model is ready again (the fleet holds its first grants: desc.ready_hold_ms) its
   requests wait in the pool until the files whose key and build match are restored (POST /slots/N?action=restore); every
   other file of that model is deleted (kv_miss). The steps are answers to requests
   of the shared client: nothing here waits. */
enum { KV_IDLE = 0, KV_SAVE_PROPS, KV_SAVE_SLOTS, KV_SAVE, KV_REST_PROPS, KV_REST };
enum { SRV_KV_TOKS = 16384, SRV_KV_MAX_FILES = 256 };

/* The files: the few calls that differ on Windows. Private means: POSIX, the directory
   0700 and ours, the files 0600; Windows, the directory owned by our user and both it
   and the files with a protected DACL (nothing inherited from above) that grants that
   user alone full access, which the files llama-server writes inherit (OICI). */
#if defined(_WIN32)
/* The process token's user (owner: its default owner, which is the Administrators group
   in an elevated administrator's token) as a string SID (S-1-5-...) into out; false when
   unread. */
static bool kvfs_token_sid(bool owner, char *out, size_t cap) {
    HANDLE tok;
    union { TOKEN_USER tu; TOKEN_OWNER to; char raw[256]; } u;
    DWORD n = 0;
    char *str = NULL;
    bool ok;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &tok)) return false;
    ok = GetTokenInformation(tok, owner ? TokenOwner : TokenUser, &u, (DWORD)sizeof u, &n) &&
         ConvertSidToStringSidA(owner ? u.to.Owner : u.tu.User.Sid, &str);
    (void)CloseHandle(tok);
    if (!ok) return false;
    ok = strlen(str) < cap;
    if (ok) memcpy(out, str, strlen(str) + 1);
    (void)LocalFree(str);
    return ok;
}

/* The owner-only security descriptor (a directory's inheritable), LocalAlloc'd; NULL
   when the token cannot be read. */
static PSECURITY_DESCRIPTOR kvfs_sd(bool dir) {
    char sid[192], sddl[256];
    PSECURITY_DESCRIPTOR sd = NULL;
    if (!kvfs_token_sid(false, sid, sizeof sid)) return NULL;
    snprintf(sddl, sizeof sddl, "D:P(A;%s;FA;;;%s)", dir ? "OICI" : "", sid);
    return ConvertStringSecurityDescriptorToSecurityDescriptorA(sddl, SDDL_REVISION_1, &sd, NULL) ? sd : NULL;
}

/* path given to our user alone (its DACL replaced); with dir, false also when it is
   owned by neither our user nor our token's default owner (POSIX: the uid check).
   SetFileSecurityA, not SetNamedSecurityInfoA: wine 8 maps the latter's DACL to mode
   0777. */
static bool kvfs_private(const char *path, bool dir) {
    PSECURITY_DESCRIPTOR sd, osd = NULL;
    PSID owner = NULL;
    char sid[192], dflt[192], *os = NULL;
    bool ok = true;
    if (dir) {
        ok = kvfs_token_sid(false, sid, sizeof sid) && kvfs_token_sid(true, dflt, sizeof dflt) &&
             GetNamedSecurityInfoA(path, SE_FILE_OBJECT, OWNER_SECURITY_INFORMATION, &owner, NULL, NULL, NULL, &osd) ==
                 ERROR_SUCCESS &&
             ConvertSidToStringSidA(owner, &os) && (!strcmp(os, sid) || !strcmp(os, dflt));
        if (os) (void)LocalFree(os);
        if (osd) (void)LocalFree(osd);
        if (!ok) return false;
    }
    if (!(sd = kvfs_sd(dir))) return false;
    ok = SetFileSecurityA(path, DACL_SECURITY_INFORMATION, sd) != 0; /* "D:P": SE_DACL_PROTECTED */
    (void)LocalFree(sd);
    return ok;
}

/* The directory made private (an existing one of ours made private again); false
   with why when it cannot be. */
static bool kvfs_private_dir(const char *dir, const char **why) {
    SECURITY_ATTRIBUTES sa;
    DWORD at;
    memset(&sa, 0, sizeof sa);
    sa.nLength = sizeof sa;
    sa.lpSecurityDescriptor = kvfs_sd(true);
    *why = "cannot make it";
    if (!sa.lpSecurityDescriptor) return false;
    if (!CreateDirectoryA(dir, &sa) && GetLastError() != ERROR_ALREADY_EXISTS) {
        (void)LocalFree(sa.lpSecurityDescriptor);
        return false;
    }
    (void)LocalFree(sa.lpSecurityDescriptor);
    at = GetFileAttributesA(dir);
    *why = "not a directory of ours";
    return at != INVALID_FILE_ATTRIBUTES && (at & FILE_ATTRIBUTE_DIRECTORY) && !(at & FILE_ATTRIBUTE_REPARSE_POINT) &&
           kvfs_private(dir, true);
}

/* A file's size and mtime (seconds since 1970); false when it is not there. */
static bool kvfs_stat(const char *path, int64_t *size, int64_t *mtime) {
    WIN32_FILE_ATTRIBUTE_DATA a;
    uint64_t t;
    if (!GetFileAttributesExA(path, GetFileExInfoStandard, &a) || (a.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY))
        return false;
    t = (uint64_t)a.ftLastWriteTime.dwHighDateTime << 32 | a.ftLastWriteTime.dwLowDateTime;
    *size = (int64_t)((uint64_t)a.nFileSizeHigh << 32 | a.nFileSizeLow);
    *mtime = (int64_t)(t / 10000000u) - 11644473600ll; /* 100 ns since 1601 */
    return true;
}

static void kvfs_unlink(const char *path) { (void)DeleteFileA(path); }

/* A directory's entries: kvfs_open, kvfs_next until NULL, kvfs_close. */
typedef struct kvfs_dir {
    HANDLE h;
    WIN32_FIND_DATAA fd;
    bool first;
} kvfs_dir;
static bool kvfs_open(kvfs_dir *d, const char *dir) {
    char pat[RSRV_PATH_MAX + 4];
    int n = snprintf(pat, sizeof pat, "%s\\*", dir);
    if (n < 0 || (size_t)n >= sizeof pat) return false;
    d->h = FindFirstFileA(pat, &d->fd);
    d->first = true;
    return d->h != INVALID_HANDLE_VALUE;
}
static const char *kvfs_next(kvfs_dir *d) {
    if (!d->first && !FindNextFileA(d->h, &d->fd)) return NULL;
    d->first = false;
    return d->fd.cFileName;
}
static void kvfs_close(kvfs_dir *d) { (void)FindClose(d->h); }
#else
static bool kvfs_private(const char *path, bool dir) { return chmod(path, dir ? 0700 : 0600) == 0; }

static bool kvfs_private_dir(const char *dir, const char **why) {
    struct stat st;
    *why = NULL;
    if ((mkdir(dir, 0700) != 0 && errno != EEXIST) || stat(dir, &st) != 0) return false;
    *why = "not a directory of ours";
    return S_ISDIR(st.st_mode) && st.st_uid == geteuid() && kvfs_private(dir, true);
}

static bool kvfs_stat(const char *path, int64_t *size, int64_t *mtime) {
    struct stat st;
    if (stat(path, &st) != 0) return false;
    *size = (int64_t)st.st_size;
    *mtime = (int64_t)st.st_mtime;
    return true;
}

static void kvfs_unlink(const char *path) { (void)unlink(path); }

typedef struct kvfs_dir {
    DIR *d;
} kvfs_dir;
static bool kvfs_open(kvfs_dir *d, const char *dir) { return (d->d = opendir(dir)) != NULL; }
static const char *kvfs_next(kvfs_dir *d) {
    struct dirent *de = readdir(d->d);
    return de ? de->d_name : NULL;
}
static void kvfs_close(kvfs_dir *d) { (void)closedir(d->d); }
#endif

/* Up to cap bytes of a file from its start: how many, or -1. */
static long kvfs_read(const char *path, void *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n;
    if (!f) return -1;
    n = fread(buf, 1, cap, f);
    (void)fclose(f);
    return (long)n;
}

/* A new private file with text[0..n) (POSIX: made 0600, never readable by others). */
static bool kvfs_write_private(const char *path, const char *text, size_t n) {
#if defined(_WIN32)
    FILE *f = fopen(path, "wb");
    bool ok;
    if (!f) return false;
    ok = fwrite(text, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    return ok && kvfs_private(path, false);
#else
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    bool ok;
    if (fd < 0) return false;
    ok = fchmod(fd, 0600) == 0 && write(fd, text, n) == (ssize_t)n;
    ok = close(fd) == 0 && ok;
    return ok;
#endif
}

static void kv_timed_out(srv *s, int m, uint64_t now);

/* Model m's slots are saved: a llama_server model (not a command) that does not set its
   own --slot-save-path. */
static bool kv_model_on(const srv *s, int m) {
    return s->kv_dir[0] && m >= 0 && m < s->cfg->nmodels && !s->cfg->models[m].command[0] &&
           s->cfg->models[m].model[0] && !strstr(s->cfg->args, "--slot-save-path") &&
           !strstr(s->cfg->models[m].args, "--slot-save-path");
}

/* DIR/name into out ("" when it does not fit: no file has that name). */
static void kv_path(const srv *s, char *out, size_t cap, const char *name) {
    int n = snprintf(out, cap, "%s/%s", s->kv_dir, name);
    if (n < 0 || (size_t)n >= cap) out[0] = 0;
}

/* Deletes KEY-SLOT.bin and its sidecar. */
static void kv_unlink(const srv *s, uint64_t key, int slot) {
    char name[RSRV_KV_NAME_MAX], path[RSRV_PATH_MAX + RSRV_KV_NAME_MAX];
    rsrv_kv_name(name, key, slot, false);
    kv_path(s, path, sizeof path, name);
    kvfs_unlink(path);
    rsrv_kv_name(name, key, slot, true);
    kv_path(s, path, sizeof path, name);
    kvfs_unlink(path);
}

/* Model m's key now (its file's path, size, mtime and first 64 KiB, ctx, parallel, args,
   the llama_server path); false when the file cannot be read. */
static bool kv_key(const srv *s, int m, uint64_t *key) {
    const rsrv_model *md = &s->cfg->models[m];
    char num[64];
    static unsigned char head[RSRV_KV_HEAD_BYTES];
    long got;
    int64_t size, mtime;
    uint64_t h = 14695981039346656037ull;
    if (!kvfs_stat(md->model, &size, &mtime) || (got = kvfs_read(md->model, head, sizeof head)) < 0) return false;
    h = rsrv_kv_key_feed(h, md->id, strlen(md->id));
    h = rsrv_kv_key_feed(h, md->model, strlen(md->model));
    snprintf(num, sizeof num, "%lld %lld %lld %d", (long long)size, (long long)mtime, (long long)md->ctx,
             md->parallel);
    h = rsrv_kv_key_feed(h, num, strlen(num));
    h = rsrv_kv_key_feed(h, head, (size_t)got);
    h = rsrv_kv_key_feed(h, s->cfg->args, strlen(s->cfg->args));
    h = rsrv_kv_key_feed(h, md->args, strlen(md->args));
    h = rsrv_kv_key_feed(h, s->cfg->llama_server, strlen(s->cfg->llama_server));
    *key = h;
    return true;
}

/* One sidecar file read (false when it is missing, too big or not a sidecar). */
static bool kv_meta_load(const srv *s, const char *name, rsrv_kv_meta *meta) {
    char path[RSRV_PATH_MAX + RSRV_KV_NAME_MAX], text[512];
    long n;
    kv_path(s, path, sizeof path, name);
    n = path[0] ? kvfs_read(path, text, sizeof text) : -1;
    return n > 0 && (size_t)n < sizeof text && rsrv_kv_meta_read(text, (size_t)n, meta);
}

/* A file of the directory (for the scans). */
typedef struct kv_file {
    uint64_t key;
    int slot;
    int64_t bytes;      /* the .bin's size (-1 = missing) */
    int64_t mtime;
    bool meta_ok;
    rsrv_kv_meta meta;
} kv_file;

/* Every KEY-SLOT.meta of the directory into out (at most cap); their count. */
static int kv_scan(const srv *s, kv_file *out, int cap) {
    kvfs_dir d;
    const char *de;
    int n = 0;
    if (!kvfs_open(&d, s->kv_dir)) return 0;
    while ((de = kvfs_next(&d)) != NULL && n < cap) {
        char name[RSRV_KV_NAME_MAX], path[RSRV_PATH_MAX + RSRV_KV_NAME_MAX];
        kv_file *f = &out[n];
        if (!rsrv_kv_parse_name(de, &f->key, &f->slot)) continue;
        f->meta_ok = kv_meta_load(s, de, &f->meta);
        rsrv_kv_name(name, f->key, f->slot, false);
        kv_path(s, path, sizeof path, name);
        if (!path[0] || !kvfs_stat(path, &f->bytes, &f->mtime)) {
            f->bytes = -1;
            f->mtime = 0;
        }
        n++;
    }
    kvfs_close(&d);
    return n;
}

/* kv_cache_bytes: the oldest saves go first until the rest fits (one bigger than the
   whole budget goes too); sidecars without their file go. */
static void kv_budget(srv *s) {
    static kv_file fl[SRV_KV_MAX_FILES];
    int n = kv_scan(s, fl, SRV_KV_MAX_FILES), i;
    int64_t total = 0;
    for (i = 0; i < n; i++) {
        if (fl[i].bytes < 0 || !fl[i].meta_ok) {
            kv_unlink(s, fl[i].key, fl[i].slot);
            fl[i].bytes = -1;
        } else {
            total += fl[i].bytes;
        }
    }
    while (total > (int64_t)s->kv_bytes) {
        int old = -1;
        for (i = 0; i < n; i++)
            if (fl[i].bytes >= 0 && (old < 0 || fl[i].mtime < fl[old].mtime)) old = i;
        if (old < 0) break;
        logf_("%s: kv cache: slot %d's save (%lld bytes) deleted: kv_cache_bytes is %llu", fl[old].meta.model,
              fl[old].slot, (long long)fl[old].bytes, (unsigned long long)s->kv_bytes);
        kv_unlink(s, fl[old].key, fl[old].slot);
        total -= fl[old].bytes;
        fl[old].bytes = -1;
        s->kv_evicted++;
    }
}

/* One kv event (kv_save, kv_restore, kv_miss) on /_rsd/events. */
static void kv_event(srv *s, const char *kind, int m, uint64_t now, int slot, const char *why, int64_t n1,
                     int64_t n2) {
    rsd_json_writer w;
    srv_event *e = ev_begin(s, &w, kind, m, now);
    if (slot >= 0) {
        rsd_json_w_key(&w, "slot");
        rsd_json_w_int(&w, slot);
    }
    if (why) {
        rsd_json_w_key(&w, "reason");
        rsd_json_w_str(&w, why);
    }
    if (n1 >= 0) {
        rsd_json_w_key(&w, strcmp(kind, "kv_miss") ? "slots" : "tokens");
        rsd_json_w_int(&w, n1);
    }
    if (n2 >= 0) {
        rsd_json_w_key(&w, strcmp(kind, "kv_restore") ? "bytes" : "tokens");
        rsd_json_w_int(&w, n2);
    }
    ev_commit(s, e, &w);
}

/* A file of model m that cannot be restored: deleted, one line, one event. */
static void kv_miss(srv *s, int m, uint64_t key, int slot, const char *why, uint64_t now) {
    kv_unlink(s, key, slot);
    s->kv[m].misses++;
    logf_("%s: kv cache: slot %d's save not restored (%s); deleted, the slot starts cold", s->cfg->models[m].id, slot,
          why);
    kv_event(s, "kv_miss", m, now, slot, why, -1, -1);
}

/* A request of model m's kv steps to its child (body NULL = GET). */
static bool kv_send(srv *s, int m, const char *method, const char *target, const char *body, uint64_t now) {
    srv_kv *k = &s->kv[m];
    rsd_http_request q;
    rsd_http_header fwd[1];
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", (unsigned)k->port, target);
    memset(&q, 0, sizeof q);
    q.method = method;
    q.url = url;
    if (s->models[m].child_auth[0]) {
        fwd[0].name = rsd_str_c("Authorization");
        fwd[0].value = rsd_str_c(s->models[m].child_auth);
        q.headers = fwd;
        q.num_headers = 1;
    }
    if (body) {
        q.content_type = "application/json";
        q.body = body;
        q.body_len = strlen(body);
    }
    q.total_timeout_ms = k->deadline > now ? (uint32_t)(k->deadline - now) : 1;
    q.user = k;
    if (rsd_http_send(s->hc, &q, now, &k->up) != RSD_OK) return false;
    k->up_active = true;
    return true;
}

/* POST /slots/N?action=save|restore {"filename": "KEY-N.bin"} for k->ids[k->cur]. */
static bool kv_send_slot(srv *s, int m, bool save, uint64_t now) {
    srv_kv *k = &s->kv[m];
    char target[64], body[96], name[RSRV_KV_NAME_MAX];
    rsrv_kv_name(name, k->key, k->ids[k->cur], false);
    snprintf(target, sizeof target, "/slots/%d?action=%s", k->ids[k->cur], save ? "save" : "restore");
    snprintf(body, sizeof body, "{\"filename\":\"%s\"}", name);
    return kv_send(s, m, "POST", target, body, now);
}

/* The saves are over (or given up): the stop goes on. */
static void kv_save_done(srv *s, int m, uint64_t now, const char *why) {
    srv_kv *k = &s->kv[m];
    if (k->up_active) (void)rsd_http_cancel(s->hc, k->up);
    k->up_active = false;
    k->phase = KV_IDLE;
    if (k->done_slots || why) {
        logf_("%s: kv cache: %d slot(s) saved (%lld bytes)%s%s", s->cfg->models[m].id, k->done_slots,
              (long long)k->done_bytes, why ? "; " : "", why ? why : "");
        kv_event(s, "kv_save", m, now, -1, why, k->done_slots, k->done_bytes);
    }
    kv_budget(s);
    if (k->port) (void)rsd_http_client_close_idle(s->hc, "127.0.0.1", k->port); /* as at STOPPING */
    (void)rsd_fleet_stop_go(s->fleet, m, now);
}

/* One stop's saves at most: kv_save_timeout, and half of stop_grace (the fleet holds the
   SIGTERM that long at most; the rest of the grace is the SIGTERM's). */
static uint64_t kv_save_bound(const srv *s) {
    uint32_t half = (s->cfg->stop_grace_ms ? s->cfg->stop_grace_ms : 1) / 2;
    return s->kv_timeout_ms < half ? s->kv_timeout_ms : half;
}

/* A held stop (STOPPING with .held): save, or let it go on at once. */
static void kv_on_stopping(srv *s, const rsd_fleet_event *ev, uint64_t now) {
    int m = ev->model;
    srv_kv *k;
    if (!ev->held) return;
    if (!kv_model_on(s, m) || !ev->port) { (void)rsd_fleet_stop_go(s->fleet, m, now); return; }
    k = &s->kv[m];
    if (k->up_active) (void)rsd_http_cancel(s->hc, k->up); /* a restore still running: given up */
    k->up_active = false;
    k->aff_kept = s->cfg->models[m].session_affinity && s->aff[m].pid == ev->pid;
    if (k->aff_kept) k->aff_saved = s->aff[m];
    k->port = ev->port;
    k->pid = ev->pid;
    k->done_slots = 0;
    k->done_bytes = 0;
    k->deadline = now + kv_save_bound(s);
    if (!k->run_key_ok || k->run_pid != ev->pid) { /* its key was not taken at its start */
        kv_save_done(s, m, now, "the model file could not be read at its start");
        return;
    }
    k->key = k->run_key;
    k->phase = KV_SAVE_PROPS;
    if (!kv_send(s, m, "GET", "/props", NULL, now)) kv_save_done(s, m, now, "cannot reach the child");
}

/* The save answered (200 with n_saved and n_written): the file made 0600, checked
   against n_written, and its sidecar written; false when any of that fails. */
static bool kv_saved(srv *s, int m, const rsd_http_event *ev, int64_t *bytes) {
    srv_kv *k = &s->kv[m];
    rsrv_kv_meta meta;
    char name[RSRV_KV_NAME_MAX], path[RSRV_PATH_MAX + RSRV_KV_NAME_MAX], text[512];
    int64_t size, mtime;
    int n;
    memset(&meta, 0, sizeof meta);
    if (ev->result != RSD_OK || ev->status != 200 ||
        rsrv_kv_member_int(ev->body.ptr, ev->body.len, "n_saved", s->kv_toks, SRV_KV_TOKS, &meta.tokens) != RSD_OK ||
        rsrv_kv_member_int(ev->body.ptr, ev->body.len, "n_written", s->kv_toks, SRV_KV_TOKS, &meta.bytes) != RSD_OK ||
        meta.tokens <= 0 || meta.bytes <= 0)
        return false;
    rsrv_kv_name(name, k->key, k->ids[k->cur], false);
    kv_path(s, path, sizeof path, name);
    if (!path[0] || !kvfs_private(path, false) || !kvfs_stat(path, &size, &mtime) || size != meta.bytes) return false;
    rsrv_cpy(meta.model, sizeof meta.model, s->cfg->models[m].id, strlen(s->cfg->models[m].id));
    rsrv_cpy(meta.build, sizeof meta.build, k->build, strlen(k->build));
    n = rsrv_kv_meta_write(&meta, text, sizeof text);
    rsrv_kv_name(name, k->key, k->ids[k->cur], true);
    kv_path(s, path, sizeof path, name);
    *bytes = meta.bytes;
    return n > 0 && path[0] && kvfs_write_private(path, text, (size_t)n);
}

/* Model m's files: the ones to restore into k->ids/want (key, build, slot count and
   size all match); the others are misses. */
static void kv_pick(srv *s, int m, int64_t total_slots, uint64_t now) {
    static kv_file fl[SRV_KV_MAX_FILES];
    srv_kv *k = &s->kv[m];
    const char *id = s->cfg->models[m].id;
    int n = kv_scan(s, fl, SRV_KV_MAX_FILES), i;
    k->nids = 0;
    for (i = 0; i < n; i++) {
        const kv_file *f = &fl[i];
        if (!f->meta_ok) {
            if (f->key == k->key) kv_miss(s, m, f->key, f->slot, "corrupt sidecar", now);
            continue;
        }
        if (strcmp(f->meta.model, id)) continue;
        if (f->key != k->key) kv_miss(s, m, f->key, f->slot, "mismatch: model file, ctx, parallel or args changed", now);
        else if (strcmp(f->meta.build, k->build)) kv_miss(s, m, f->key, f->slot, "mismatch: another llama-server build", now);
        else if (total_slots > 0 && f->slot >= total_slots) kv_miss(s, m, f->key, f->slot, "mismatch: fewer slots", now);
        else if (f->bytes != f->meta.bytes) kv_miss(s, m, f->key, f->slot, f->bytes < 0 ? "file missing" : "truncated", now);
        else if (k->nids < RSRV_KV_MAX_SLOTS) {
            k->ids[k->nids] = f->slot;
            k->want[k->nids++] = f->meta.tokens;
        }
    }
}

/* The restores are over (or given up): the table of session owners comes back for the
   slots restored, and the held ready goes on (the pool grants the requests waiting); with
   lost, the child did not answer (it ended or hangs): it is killed instead and the model
   starts again, without the file that was restoring, for the requests waiting. */
static void kv_restore_done(srv *s, int m, uint64_t now, const char *why, bool lost) {
    srv_kv *k = &s->kv[m];
    if (k->up_active) (void)rsd_http_cancel(s->hc, k->up);
    k->up_active = false;
    k->phase = KV_IDLE;
    if (k->aff_kept && k->done_slots) {
        rsrv_aff *a = &s->aff[m];
        int i;
        *a = k->aff_saved;
        a->pid = k->pid;
        for (i = 0; i < RSRV_AFF_MAX_SLOTS; i++) {
            a->slot[i].held = false;
            a->slot[i].busy = false;
            if (i >= 64 || !(k->restored >> i & 1)) memset(&a->slot[i], 0, sizeof a->slot[i]);
        }
    }
    k->aff_kept = false;
    if (k->done_slots || why) {
        logf_("%s: kv cache: %d slot(s) restored (%lld tokens)%s%s", s->cfg->models[m].id, k->done_slots,
              (long long)k->done_bytes, why ? "; " : "", why ? why : "");
        kv_event(s, "kv_restore", m, now, -1, why, k->done_slots, k->done_bytes);
    }
    if (lost) {
        char w[160];
        snprintf(w, sizeof w, "kv cache: its restore %s", why ? why : "failed");
        (void)rsd_fleet_ready_restart(s->fleet, m, w, now);
    } else {
        (void)rsd_fleet_ready_go(s->fleet, m, now);
    }
}

/* Ready (held by the fleet: desc.ready_hold_ms): restore model m's saves, if it has any,
   before its first request; with none the ready goes on at once. */
static void kv_on_ready(srv *s, const rsd_fleet_event *ev, uint64_t now) {
    static kv_file fl[SRV_KV_MAX_FILES];
    int m = ev->model, n, i;
    srv_kv *k;
    bool any = false;
    if (!kv_model_on(s, m)) {
        if (ev->held) (void)rsd_fleet_ready_go(s->fleet, m, now);
        return;
    }
    k = &s->kv[m];
    k->run_pid = ev->pid; /* the key of the configuration this process runs (a reload may change it) */
    k->run_key_ok = kv_key(s, m, &k->run_key);
    n = kv_scan(s, fl, SRV_KV_MAX_FILES);
    for (i = 0; i < n && !any; i++) any = fl[i].meta_ok && !strcmp(fl[i].meta.model, s->cfg->models[m].id);
    if (!any) {
        k->aff_kept = false;
        if (ev->held) (void)rsd_fleet_ready_go(s->fleet, m, now);
        return;
    }
    k->port = ev->port;
    k->pid = ev->pid;
    k->done_slots = 0;
    k->done_bytes = 0;
    k->restored = 0;
    k->deadline = now + s->kv_timeout_ms;
    if (!k->run_key_ok) { kv_restore_done(s, m, now, "the model file cannot be read", false); return; }
    k->key = k->run_key;
    k->phase = KV_REST_PROPS;
    if (!kv_send(s, m, "GET", "/props", NULL, now)) kv_restore_done(s, m, now, "cannot reach the child", false);
}

/* The next slot's restore, or the end. */
static void kv_next_restore(srv *s, int m, uint64_t now) {
    srv_kv *k = &s->kv[m];
    for (; k->cur < k->nids; k->cur++)
        if (kv_send_slot(s, m, false, now)) return;
    kv_restore_done(s, m, now, NULL, false);
}

/* The next slot's save, or the end. */
static void kv_next_save(srv *s, int m, uint64_t now) {
    srv_kv *k = &s->kv[m];
    for (; k->cur < k->nids; k->cur++)
        if (kv_send_slot(s, m, true, now)) return;
    kv_save_done(s, m, now, NULL);
}

/* An answer to one of the kv steps' requests. */
static void kv_on_upstream(srv *s, srv_kv *k, const rsd_http_event *ev, uint64_t now) {
    int m = (int)(k - s->kv), i;
    int64_t x = 0;
    char name[RSRV_KV_NAME_MAX];
    k->up_active = false;
    if (k->phase != KV_IDLE && (ev->result == RSD_ERR_TIMEOUT || now >= k->deadline)) { /* its bound is ours */
        kv_timed_out(s, m, now);
        return;
    }
    switch (k->phase) {
    case KV_SAVE_PROPS:
    case KV_REST_PROPS:
        if (ev->result != RSD_OK || ev->status != 200) {
            if (k->phase == KV_SAVE_PROPS) kv_save_done(s, m, now, "the child's /props did not answer");
            else kv_restore_done(s, m, now, "did not start: the child's /props did not answer", ev->result != RSD_OK);
            return;
        }
        rsrv_kv_build(ev->body.ptr, ev->body.len, s->kv_toks, SRV_KV_TOKS, k->build, sizeof k->build);
        if (k->phase == KV_SAVE_PROPS) {
            static kv_file fl[SRV_KV_MAX_FILES];
            int n = kv_scan(s, fl, SRV_KV_MAX_FILES);
            for (i = 0; i < n; i++) /* the saves this stop replaces */
                if (fl[i].key == k->key || (fl[i].meta_ok && !strcmp(fl[i].meta.model, s->cfg->models[m].id)))
                    kv_unlink(s, fl[i].key, fl[i].slot);
            k->phase = KV_SAVE_SLOTS;
            if (!kv_send(s, m, "GET", "/slots", NULL, now)) kv_save_done(s, m, now, "cannot reach the child");
            return;
        }
        if (rsrv_kv_member_int(ev->body.ptr, ev->body.len, "total_slots", s->kv_toks, SRV_KV_TOKS, &x) != RSD_OK) x = 0;
        kv_pick(s, m, x, now);
        k->phase = KV_REST;
        k->cur = 0;
        kv_next_restore(s, m, now);
        return;
    case KV_SAVE_SLOTS:
        if (ev->result != RSD_OK || ev->status != 200 ||
            (k->nids = rsrv_kv_cached_slots(ev->body.ptr, ev->body.len, s->kv_toks, SRV_KV_TOKS, k->ids,
                                            RSRV_KV_MAX_SLOTS)) < 0) {
            k->nids = 0;
            kv_save_done(s, m, now, ev->status == 501 ? "the child has no --slot-save-path" : "the child's /slots did not answer");
            return;
        }
        k->phase = KV_SAVE;
        k->cur = 0;
        kv_next_save(s, m, now);
        return;
    case KV_SAVE:
        if (kv_saved(s, m, ev, &x)) {
            k->done_slots++;
            k->done_bytes += x;
            k->saves++;
        } else {
            k->save_failures++;
            logf_("%s: kv cache: slot %d not saved (%s %d); its cache is lost", s->cfg->models[m].id, k->ids[k->cur],
                  ev->result != RSD_OK ? rsd_result_str(ev->result) : "status", ev->status);
            kv_unlink(s, k->key, k->ids[k->cur]);
        }
        k->cur++;
        kv_next_save(s, m, now);
        return;
    case KV_REST:
        rsrv_kv_name(name, k->key, k->ids[k->cur], false);
        if (ev->result != RSD_OK) { /* no answer: the restore ended the child, or it hangs */
            char why[96];
            snprintf(why, sizeof why, "the child did not answer (%s)", rsd_result_str(ev->result));
            kv_miss(s, m, k->key, k->ids[k->cur], why, now);
            kv_restore_done(s, m, now, "got no answer", true);
            return;
        }
        if (ev->status == 200 &&
            rsrv_kv_member_int(ev->body.ptr, ev->body.len, "n_restored", s->kv_toks, SRV_KV_TOKS, &x) == RSD_OK &&
            x == k->want[k->cur]) {
            k->done_slots++;
            k->done_bytes += x;
            k->restores++;
            if (k->ids[k->cur] < 64) k->restored |= (uint64_t)1 << k->ids[k->cur];
            kv_unlink(s, k->key, k->ids[k->cur]); /* in the child now; the next stop saves anew */
        } else {
            char why[96];
            snprintf(why, sizeof why, "refused by the child (status %d, %lld of %lld tokens)", ev->status, (long long)x,
                     (long long)k->want[k->cur]);
            kv_miss(s, m, k->key, k->ids[k->cur], why, now);
        }
        k->cur++;
        kv_next_restore(s, m, now);
        return;
    default: break;
    }
}

/* Past kv_save_timeout (a save: or half of stop_grace): a save costs its cache, a restore
   its slot; the stop or the ready goes on. */
static void kv_timed_out(srv *s, int m, uint64_t now) {
    srv_kv *k = &s->kv[m];
    if (k->phase <= KV_SAVE) {
        if (k->phase == KV_SAVE && k->cur < k->nids) kv_unlink(s, k->key, k->ids[k->cur]);
        k->save_failures++;
        kv_save_done(s, m, now, kv_save_bound(s) < s->kv_timeout_ms ? "timed out (half of stop_grace)"
                                                                    : "timed out (kv_save_timeout)");
    } else {
        if (k->phase == KV_REST && k->cur < k->nids) kv_miss(s, m, k->key, k->ids[k->cur], "restore timed out", now);
        kv_restore_done(s, m, now, "timed out (kv_save_timeout)", true);
    }
}

static void kv_service(srv *s, uint64_t now) {
    int m;
    if (!s->kv) return;
    for (m = 0; m < s->cfg->nmodels; m++)
        if (s->kv[m].phase != KV_IDLE && now >= s->kv[m].deadline) kv_timed_out(s, m, now);
}

static uint64_t kv_deadline(const srv *s) {
    uint64_t d = RSD_NO_DEADLINE;
    int m;
    for (m = 0; s->kv && m < s->cfg->nmodels; m++)
        if (s->kv[m].phase != KV_IDLE && s->kv[m].deadline < d) d = s->kv[m].deadline;
    return d;
}

/* The process is gone (exit or crash): whatever step ran for it ends. */
static void kv_on_gone(srv *s, const rsd_fleet_event *ev, uint64_t now) {
    srv_kv *k;
    if (!s->kv || ev->model < 0 || ev->model >= s->cfg->nmodels) return;
    k = &s->kv[ev->model];
    if (k->phase == KV_IDLE || k->pid != ev->pid) return;
    if (k->phase <= KV_SAVE) {
        if (k->phase == KV_SAVE && k->cur < k->nids) kv_unlink(s, k->key, k->ids[k->cur]);
        kv_save_done(s, ev->model, now, "the child exited");
    } else { /* the fleet starts the model again (a held ready that exits) */
        if (k->phase == KV_REST && k->cur < k->nids) kv_miss(s, ev->model, k->key, k->ids[k->cur], "the child exited", now);
        kv_restore_done(s, ev->model, now, "the child exited", false);
    }
}

/* Is ev's request one of the kv steps'? */
static bool kv_owns(const srv *s, const void *user) {
    uintptr_t u = (uintptr_t)user, b = (uintptr_t)s->kv;
    return s->kv && u >= b && u < b + RSRV_MAX_MODELS * sizeof *s->kv && (u - b) % sizeof *s->kv == 0;
}

/* Per model in /status: "kv_cache": {"saved_slots", "saved_bytes", "saves",
   "save_failures", "restores", "misses"} (absent without kv_cache_dir). */
static void kv_status(srv *s, rsd_json_writer *w, int m) {
    static kv_file fl[SRV_KV_MAX_FILES];
    int n, i, slots = 0;
    int64_t bytes = 0;
    if (!kv_model_on(s, m)) return;
    n = kv_scan(s, fl, SRV_KV_MAX_FILES);
    for (i = 0; i < n; i++)
        if (fl[i].meta_ok && fl[i].bytes >= 0 && !strcmp(fl[i].meta.model, s->cfg->models[m].id)) {
            slots++;
            bytes += fl[i].bytes;
        }
    rsd_json_w_key(w, "kv_cache");
    rsd_json_w_begin_object(w);
    rsd_json_w_key(w, "saved_slots");
    rsd_json_w_int(w, slots);
    rsd_json_w_key(w, "saved_bytes");
    rsd_json_w_int(w, bytes);
    rsd_json_w_key(w, "saves");
    rsd_json_w_int(w, (int64_t)s->kv[m].saves);
    rsd_json_w_key(w, "save_failures");
    rsd_json_w_int(w, (int64_t)s->kv[m].save_failures);
    rsd_json_w_key(w, "restores");
    rsd_json_w_int(w, (int64_t)s->kv[m].restores);
    rsd_json_w_key(w, "misses");
    rsd_json_w_int(w, (int64_t)s->kv[m].misses);
    rsd_json_w_end_object(w);
}

/* /metrics: rsd_serve_kv_saved_slots, _saved_bytes, _saves_total, _restores_total,
   _misses_total per model. */
static void kv_metrics(srv *s, mbuf *b) {
    static kv_file fl[SRV_KV_MAX_FILES];
    char lab[2 * RSRV_ID_MAX + 8];
    int n, i, m;
    if (!s->kv_dir[0]) return;
    n = kv_scan(s, fl, SRV_KV_MAX_FILES);
    mput(b, "# HELP rsd_serve_kv_saved_slots Slots saved on disk for the model's next start.\n"
            "# TYPE rsd_serve_kv_saved_slots gauge\n");
    for (m = 0; m < s->cfg->nmodels; m++) {
        int slots = 0;
        if (!kv_model_on(s, m)) continue;
        for (i = 0; i < n; i++) slots += fl[i].meta_ok && fl[i].bytes >= 0 && !strcmp(fl[i].meta.model, s->cfg->models[m].id);
        mput(b, "rsd_serve_kv_saved_slots{model=\"%s\"} %d\n", mlabel(s->cfg->models[m].id, lab, sizeof lab), slots);
    }
    mput(b, "# HELP rsd_serve_kv_saved_bytes Bytes of those saves.\n# TYPE rsd_serve_kv_saved_bytes gauge\n");
    for (m = 0; m < s->cfg->nmodels; m++) {
        int64_t bytes = 0;
        if (!kv_model_on(s, m)) continue;
        for (i = 0; i < n; i++)
            if (fl[i].meta_ok && fl[i].bytes >= 0 && !strcmp(fl[i].meta.model, s->cfg->models[m].id)) bytes += fl[i].bytes;
        mput(b, "rsd_serve_kv_saved_bytes{model=\"%s\"} %lld\n", mlabel(s->cfg->models[m].id, lab, sizeof lab), (long long)bytes);
    }
#define SRV_KVC(name, field, help) \
    mput(b, "# HELP rsd_serve_kv_" name " " help "\n# TYPE rsd_serve_kv_" name " counter\n"); \
    for (m = 0; m < s->cfg->nmodels; m++) \
        if (kv_model_on(s, m)) mput(b, "rsd_serve_kv_" name "{model=\"%s\"} %llu\n", \
                                    mlabel(s->cfg->models[m].id, lab, sizeof lab), (unsigned long long)s->kv[m].field);
    SRV_KVC("saves_total", saves, "Slots saved before a stop.")
    SRV_KVC("save_failures_total", save_failures, "Saves that failed or timed out (their cache is lost).")
    SRV_KVC("restores_total", restores, "Slots restored after a start.")
    SRV_KVC("misses_total", misses, "Saved slots deleted instead of restored (mismatch, truncated, refused).")
#undef SRV_KVC
}

/* KEY-SLOT.bin files without their sidecar (a save cut short: rsd-serve killed, or the
   child finishing a save that had timed out) are deleted. */
static void kv_orphans(const srv *s) {
    kvfs_dir d;
    const char *de;
    if (!kvfs_open(&d, s->kv_dir)) return;
    while ((de = kvfs_next(&d)) != NULL) {
        char meta[RSRV_KV_NAME_MAX + 8], path[RSRV_PATH_MAX + RSRV_KV_NAME_MAX + 8];
        size_t n = strlen(de);
        uint64_t key;
        int slot;
        int64_t size, mtime;
        if (n < 5 || n >= RSRV_KV_NAME_MAX || strcmp(de + n - 4, ".bin")) continue;
        memcpy(meta, de, n - 4);
        memcpy(meta + n - 4, ".meta", 6);
        if (!rsrv_kv_parse_name(meta, &key, &slot)) continue; /* not one of ours */
        kv_path(s, path, sizeof path, meta);
        if (path[0] && kvfs_stat(path, &size, &mtime)) continue;
        kv_path(s, path, sizeof path, de);
        if (path[0]) kvfs_unlink(path);
    }
    kvfs_close(&d);
}

/* At start: kv_cache_dir made private (an existing one of ours made private again) and
   left-overs of a save cut short deleted. false (logged) when it cannot be: the feature
   is off. */
static bool kv_prepare(srv *s) {
    const rsrv_config *c = s->cfg;
    const char *why = NULL;
    if (!c->kv_cache_dir[0] || c->kv_off) return false;
    rsrv_cpy(s->kv_dir, sizeof s->kv_dir, c->kv_cache_dir, strlen(c->kv_cache_dir));
    s->kv_bytes = c->kv_cache_bytes ? c->kv_cache_bytes : RSRV_KV_BYTES_DEFAULT;
    s->kv_timeout_ms = c->kv_save_timeout_ms ? c->kv_save_timeout_ms : RSRV_KV_SAVE_TIMEOUT_DEFAULT_MS;
    errno = 0;
    if (!kvfs_private_dir(s->kv_dir, &why)) {
        logf_("kv_cache_dir %s: cannot use it (%s); slots are not saved", s->kv_dir,
              why ? why : errno ? strerror(errno) : "cannot make it");
        s->kv_dir[0] = 0;
        return false;
    }
    kv_orphans(s);
    kv_budget(s);
    return true;
}

/* ---- setup -------------------------------------------------------------------------- */
static int read_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    size_t n = 0, got, cap = 4096;
    char *b;
    if (!f) return -1;
    /* The buffer grows with the file (a config is a few KiB). One of SRV_CONFIG_MAX at
       once was an mmap glibc unmapped on free, which raised its mmap threshold to 4 MiB:
       every later large calloc (the event history, the model tables) then came from the
       heap, zeroed by hand and resident, about 3.5 MiB of the idle RSS. */
    b = (char *)malloc(cap);
    if (!b) { fclose(f); return -1; }
    while ((got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n > SRV_CONFIG_MAX) break;
        if (n == cap) {
            char *nb = (char *)realloc(b, cap * 2 > SRV_CONFIG_MAX + 1 ? SRV_CONFIG_MAX + 1 : cap * 2);
            if (!nb) { free(b); fclose(f); return -1; }
            b = nb;
            cap = cap * 2 > SRV_CONFIG_MAX + 1 ? SRV_CONFIG_MAX + 1 : cap * 2;
        }
    }
    fclose(f);
    if (n > SRV_CONFIG_MAX) { free(b); errno = EFBIG; return -1; }
    *out = b;
    *len = n;
    return 0;
}

/* The configuration: the --config file first, then the flags over it (at start and
   on every reload). 0, EX_NOINPUT (the file cannot be read, or is a directory),
   EX_USAGE (a bad line: err is FILE:LINE: message) or -1 (a bad flag), err set. */
static int load_config(rsrv_config *c, rsrv_opts *o, int argc, char **argv, char *err, size_t ecap) {
    int i;
    for (i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--config")) {
            char *text = NULL;
            size_t len = 0;
            struct stat sb;
            if (stat(argv[i + 1], &sb) == 0 && S_ISDIR(sb.st_mode)) {
                snprintf(err, ecap, "%s: is a directory (give the config file)", argv[i + 1]);
                return EX_NOINPUT;
            }
            if (read_file(argv[i + 1], &text, &len) != 0) {
                snprintf(err, ecap, "%s: %s", argv[i + 1], strerror(errno));
                return EX_NOINPUT;
            }
            if (rsrv_parse_ini(c, text, len, argv[i + 1], err, ecap) != 0) {
                free(text);
                return EX_USAGE;
            }
            free(text);
        }
    return rsrv_parse_args(c, o, argc, argv, err, ecap) != 0 ? -1 : 0;
}

/* A directory for the children's --slot-save-path once a model wants session affinity
   with session_erase (llama-server erases a slot only with one): made the first time one does. */
static void need_slot_dir(srv *s, const rsrv_config *c) {
    int i;
    for (i = 0; i < c->nmodels && !s->slot_dir[0]; i++)
        if (c->models[i].session_affinity && c->models[i].session_erase && !c->models[i].command[0]) {
#if defined(_WIN32) /* no mkdtemp: %TEMP%\rsd-serve-slots.<pid>.<n>, made new */
            char tmp[MAX_PATH], tmpl[MAX_PATH + 64];
            DWORD tl = GetTempPathA((DWORD)sizeof tmp, tmp);
            unsigned k;
            bool made = false;
            for (k = 0; tl && tl < sizeof tmp && k < 100 && !made; k++) {
                snprintf(tmpl, sizeof tmpl, "%srsd-serve-slots.%lu.%u", tmp, (unsigned long)GetCurrentProcessId(), k);
                made = CreateDirectoryA(tmpl, NULL) != 0;
            }
            if (!made) errno = EEXIST;
            if (made) snprintf(s->slot_dir, sizeof s->slot_dir, "%s", tmpl);
#else
            char tmpl[] = "/tmp/rsd-serve-slots.XXXXXX";
            if (mkdtemp(tmpl)) snprintf(s->slot_dir, sizeof s->slot_dir, "%s", tmpl);
#endif
            else logf_("cannot make a directory for --slot-save-path: %s (slots cannot be erased)", strerror(errno));
            break;
        }
}

/* Builds model m's process spec from configuration c into sm (slot_dir: the
   --slot-save-path for session affinity, "" = none). */
static int build_model(const rsrv_config *c, const rsrv_model *m, srv_model *sm, const char *slot_dir) {
    int n, k;
    size_t used;
    memset(sm, 0, sizeof *sm);
    {
        /* extra = -lv 4 (llama-server prints its buffer sizes only at that verbosity: the
           "memory" section reads them; an -lv in the args comes later and wins), the global
           args (llama_server models only: a command is a whole command line), then the model's */
        int lv = m->command[0] ? 0 : 2;
        if (lv) {
            sm->extra_argv[0] = "-lv";
            sm->extra_argv[1] = "4";
        }
        n = m->command[0] ? 0 : rsrv_split(c->args, sm->extra_buf, sizeof sm->extra_buf, sm->extra_argv + lv, RSRV_MAX_ARGS + 1);
        if (n < 0) return -1;
        n += lv;
        sm->extra_argv[n] = NULL;
        for (used = 0, k = lv; k < n; k++) used += strlen(sm->extra_argv[k]) + 1;
        k = rsrv_split(m->args, sm->extra_buf + used, sizeof sm->extra_buf - used, sm->extra_argv + n, RSRV_MAX_ARGS + 1);
        if (k < 0) return -1;
        /* session_erase erases slots: llama-server allows that only with a slot save path */
        if (((m->session_affinity && m->session_erase) || (c->kv_cache_dir[0] && !c->kv_off)) && !m->command[0] &&
            slot_dir[0] && n + k + 2 < 2 * RSRV_MAX_ARGS + 5 &&
            !strstr(c->args, "--slot-save-path") && !strstr(m->args, "--slot-save-path")) {
            sm->extra_argv[n + k] = "--slot-save-path";
            sm->extra_argv[n + k + 1] = slot_dir;
            sm->extra_argv[n + k + 2] = NULL;
        }
        sm->spec.extra = sm->extra_argv;
        if (m->command[0]) {
            if (rsrv_split(m->command, sm->cmd_buf, sizeof sm->cmd_buf, sm->cmd_argv, RSRV_MAX_ARGS + 1) < 1) return -1;
            sm->spec.exe = sm->cmd_argv[0];
            sm->spec.args = sm->cmd_argv + 1;
        } else { /* llama_server: its first word is the program, the rest comes right after
                    argv[0] ("llama serve", "env X=1 llama-server"), then the template */
            if (rsrv_split(c->llama_server, sm->cmd_buf, sizeof sm->cmd_buf, sm->cmd_argv, RSRV_MAX_ARGS + 1) < 1)
                return -1;
            sm->spec.exe = sm->cmd_argv[0];
            sm->spec.exe_args = sm->cmd_argv[1] ? sm->cmd_argv + 1 : NULL;
            sm->spec.args = NULL; /* the llama-server template */
        }
        sm->spec.model = m->model[0] ? m->model : NULL;
        sm->spec.alias = m->id;
        sm->spec.ctx = m->ctx;
        sm->spec.parallel = m->parallel;
        sm->spec.ngl = m->ngl[0] ? m->ngl : NULL;
        k = rsrv_env_split(m->env, sm->env_buf, sizeof sm->env_buf, sm->env, RSRV_MAX_ENV + 1);
        if (k < 0) return -1;
        sm->env[k] = "LLAMA_SERVER_ROUTER_PORT"; /* wire.md 1.12 hygiene: never inherited */
        sm->env[k + 1] = NULL;
        sm->spec.env = sm->env;
        sm->spec.name = m->id;
        sm->spec.start_deadline_ms = c->start_timeout_ms;
        sm->desc.pool.id = m->id;
        sm->desc.pool.reserve_bytes = m->reserve_bytes;
        sm->desc.pool.ttl_ms = m->ttl_ms;
        sm->desc.pool.max_in_flight = m->parallel > 0 ? (uint32_t)m->parallel : 0;
        sm->desc.pool.pinned = m->pinned;
        sm->desc.spec = sm->spec;
        child_key(sm);
        sm->desc.probe_bearer = sm->child_auth[0] ? sm->child_auth + 7 : NULL; /* its /props wants the key */
    }
    return 0;
}

/* RSD_API_KEY / RSD_ADMIN_KEY when the file and the flags set no key. */
static int env_keys(rsrv_config *c) {
    static const char *const names[2] = {"RSD_API_KEY", "RSD_ADMIN_KEY"};
    int i;
    for (i = 0; i < 2; i++) {
        const char *v = getenv(names[i]);
        char *dst = i ? c->admin_key : c->api_key;
        if (!v || !v[0] || dst[0]) continue;
        if (!rsrv_key_ok(v, strlen(v))) {
            fprintf(stderr, "rsd-serve: %s must be 1 to %d printable bytes without blanks\n", names[i], RSRV_KEY_MAX - 1);
            return -1;
        }
        rsrv_cpy(dst, RSRV_KEY_MAX, v, strlen(v));
    }
    return 0;
}

static int build_models(srv *s) {
    int i;
    for (i = 0; i < s->cfg->nmodels; i++)
        if (build_model(s->cfg, &s->cfg->models[i], &s->models[i], s->slot_dir) != 0) return -1;
    return 0;
}

/* --check's look at the files: each model's program (llama_server or the command's)
   and, for llama_server models, the model file, as a start would check them
   (rsd_procs_check). Problems appended to out as "WHERE: why\n"; their count. */
static int check_files(srv *s, const char *file, char *out, size_t cap) {
    rsd_procs_desc pd;
    rsd_procs *p;
    int i, bad = 0;
    memset(&pd, 0, sizeof pd);
    pd.max_procs = 1;
    p = rsd_procs_create(&pd);
    if (!p) return 0;
    for (i = 0; i < s->cfg->nmodels; i++) {
        const rsrv_model *m = &s->cfg->models[i];
        char why[512], where[RSRV_PATH_MAX + 32];
        size_t o = strlen(out);
        if (rsd_procs_check(p, &s->models[i].spec, why, sizeof why) == RSD_OK) continue;
        if (m->command[0]) rsrv_where(file, m, 1, where, sizeof where);
        else if (strstr(why, "model file")) rsrv_where(file, m, 0, where, sizeof where);
        else if (s->cfg->key_line[2]) snprintf(where, sizeof where, "%s:%d", file ? file : "config", s->cfg->key_line[2]);
        else snprintf(where, sizeof where, "%s",
                      strcmp(s->cfg->llama_server, "llama-server") ? "--llama-server" : "llama_server (the default, from PATH)");
        snprintf(out + o, o < cap ? cap - o : 0, "%s: model '%s': %s\n", where, m->id, why);
        bad++;
    }
    rsd_procs_destroy(p);
    return bad;
}

/* The listen host as a numeric address: a host name is resolved once, here (the first
   IPv4 or IPv6 address getaddrinfo gives). false with err set. */
static bool resolve_listen(const char *host, char *out, size_t cap, char *err, size_t ecap) {
    struct addrinfo hints, *res = NULL, *ai;
    int r;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    r = getaddrinfo(host, NULL, &hints, &res);
    if (r != 0) {
        snprintf(err, ecap, "listen: cannot resolve '%s': %s", host, gai_strerror(r));
        return false;
    }
    for (ai = res; ai; ai = ai->ai_next)
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
            getnameinfo(ai->ai_addr, ai->ai_addrlen, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST) == 0)
            break;
    freeaddrinfo(res);
    if (!ai) {
        snprintf(err, ecap, "listen: '%s' has no IPv4 or IPv6 address", host);
        return false;
    }
    return true;
}


/* ---- reload (SIGHUP, POST /_rsd/reload) ------------------------------------------- */
typedef struct reload_out {
    char added[2048], removed[2048], changed[2048], updated[2048], unchanged[2048];
    char kept[512];          /* global keys that take effect only at a restart */
    char err[RSRV_ERR_MAX * 8];
} reload_out;

static void list_add(char *list, size_t cap, const char *word) {
    size_t n = strlen(list);
    if (n < cap) snprintf(list + n, cap - n, "%s%s", n ? " " : "", word);
}

/* Index of the model whose id (not alias, retired or not) is id, or -1. */
static int find_id(const rsrv_config *c, const char *id) {
    int i;
    for (i = 0; i < c->nmodels; i++)
        if (!strcmp(c->models[i].id, id)) return i;
    return -1;
}

/* Fails the requests waiting for model m (removed by a reload) with a 503. */
static void fail_waiting(srv *s, int m, uint64_t now) {
    int i;
    char msg[RSRV_ID_MAX + 96];
    snprintf(msg, sizeof msg, "model '%s' was removed from the configuration (reload)", s->cfg->models[m].id);
    for (i = 0; i < SRV_MAX_CONNS; i++) {
        job *j = &s->jobs[i];
        if (j->state != JOB_WAIT || j->model != m) continue;
        (void)rsd_fleet_cancel(s->fleet, j->preq, now);
        respond_error(s, j->sreq, 503, "unavailable_error", msg);
        job_log(s, j, 503, now);
        job_free(s, j, now);
    }
}

/* Reads the configuration again (file, then the command line's flags) and applies the
   difference: new models are added (started when pinned or preload), removed ones
   take no new requests (waiting ones get 503), drain and stop; a model whose process
   would differ is restarted once idle (drained, then started again if it was running);
   one whose ttl, pin, aliases, preload or max_queue changed is updated in place; the
   rest is untouched (same process). A bad file changes nothing: 0, or -1 with ro->err
   ("FILE:LINE: message"). vram_budget and the global keys marked RSRV_KF_RESTART (listen,
   stop_grace, max_wait, start_backoff, the watchdog's, the kv cache's, event_history) take
   effect only at a restart (named in ro->kept). Every change forgets the model's backoff. */
static int do_reload(srv *s, uint64_t now, reload_out *ro) {
    rsrv_config *nc = (rsrv_config *)calloc(1, sizeof *nc), *mc = (rsrv_config *)calloc(1, sizeof *mc), *oc = s->cfg;
    rsrv_opts o;
    int rc, i, j, bad;
    memset(ro, 0, sizeof *ro);
    if (!nc || !mc) {
        snprintf(ro->err, sizeof ro->err, "out of memory");
        goto fail;
    }
    if (!s->opts.config_path) {
        snprintf(ro->err, sizeof ro->err, "started without --config: there is no file to reload");
        goto fail;
    }
    rsrv_config_init(nc);
    memset(&o, 0, sizeof o);
    rc = load_config(nc, &o, s->argc, s->argv, ro->err, sizeof ro->err);
    if (rc) goto fail;
    if (env_keys(nc) != 0) {
        snprintf(ro->err, sizeof ro->err, "RSD_API_KEY or RSD_ADMIN_KEY is not a valid key");
        goto fail;
    }
    if (nc->nmodels == 0) {
        snprintf(ro->err, sizeof ro->err, "%s: no [model ID] sections", s->opts.config_path);
        goto fail;
    }
    bad = rsrv_check(nc, s->opts.config_path, ro->err, sizeof ro->err);
    if (bad) {
        size_t n = strlen(ro->err);
        while (n && ro->err[n - 1] == '\n') ro->err[--n] = 0;
        goto fail;
    }
    /* the merged table: every old index keeps its model (fleet indices are stable) */
    *mc = *nc;
    for (i = 0; i < oc->nmodels; i++) {
        j = find_id(nc, oc->models[i].id);
        mc->models[i] = j >= 0 ? nc->models[j] : oc->models[i];
        mc->models[i].retired = j < 0;
    }
    mc->nmodels = oc->nmodels;
    for (j = 0; j < nc->nmodels; j++) {
        if (find_id(oc, nc->models[j].id) >= 0) continue;
        if (mc->nmodels >= RSRV_MAX_MODELS) {
            snprintf(ro->err, sizeof ro->err, "more than %d different models over reloads: restart rsd-serve",
                     RSRV_MAX_MODELS);
            goto fail;
        }
        mc->models[mc->nmodels++] = nc->models[j];
    }
    if (mc->vram_budget_auto != oc->vram_budget_auto || !s->devmem ||
        (!mc->vram_budget_auto && mc->vram_budget_bytes != oc->vram_budget_bytes)) {
        if (mc->vram_budget_auto != oc->vram_budget_auto || mc->vram_budget_bytes != oc->vram_budget_bytes)
            list_add(ro->kept, sizeof ro->kept, "vram_budget");
        mc->vram_budget_auto = oc->vram_budget_auto;
        mc->vram_budget_bytes = oc->vram_budget_bytes;
        mc->vram_margin_bytes = oc->vram_margin_bytes;
        mc->vram_margin_set = oc->vram_margin_set;
    } else if (mc->vram_budget_auto && !devmem_budget(s, mc, now, ro->err, sizeof ro->err)) {
        goto fail; /* auto, read again: a reading that gives no budget changes nothing */
    }
    for (i = 0; i < RSRV_NGLOBAL_KEYS; i++) { /* listen, stop_grace, the watchdog, the kv cache, the event ring ... */
        const rsrv_key *k = &rsrv_global_keys[i];
        if (!(k->flags & RSRV_KF_RESTART) || rsrv_key_equal(mc, NULL, oc, NULL, k)) continue;
        list_add(ro->kept, sizeof ro->kept, k->name);
        rsrv_key_copy(mc, oc, k);
    }
    /* apply */
    s->cfg = mc;
    if (s->devmem) devmem_admit(s, now); /* the budget read again above */
    need_slot_dir(s, mc);
    for (i = 0; i < mc->nmodels; i++) {
        rsrv_model *m = &mc->models[i];
        const rsrv_model *om = i < oc->nmodels ? &oc->models[i] : NULL;
        srv_model *sm = &s->models[i];
        bool start = false, fresh = true;
        if (build_model(mc, m, sm, s->slot_dir) != 0) { /* cannot happen: the parser checked the splits */
            m->retired = true;
            continue;
        }
        if (!om) {
            if (rsd_fleet_add_model(s->fleet, &sm->desc) != i) { m->retired = true; continue; }
            list_add(ro->added, sizeof ro->added, m->id);
            start = m->pinned || m->preload;
        } else if (m->retired) {
            if (!om->retired) {
                list_add(ro->removed, sizeof ro->removed, m->id);
                fail_waiting(s, i, now);
                sm->desc.pool.pinned = false;
                (void)rsd_fleet_set_model(s->fleet, i, &sm->desc, now);
                if (model_running(s, i))
                    (void)rsd_pool_unload(rsd_fleet_pool(s->fleet), i, RSD_POOL_UNLOAD_DRAIN, now);
            }
            s->restart[i] = false;
            continue;
        } else if (om->retired) {
            (void)rsd_fleet_set_model(s->fleet, i, &sm->desc, now);
            list_add(ro->added, sizeof ro->added, m->id);
            start = m->pinned || m->preload;
        } else if (rsrv_model_process_differs(oc, om, mc, m)) {
            (void)rsd_fleet_set_model(s->fleet, i, &sm->desc, now);
            list_add(ro->changed, sizeof ro->changed, m->id);
            if (model_running(s, i)) {
                (void)rsd_pool_unload(rsd_fleet_pool(s->fleet), i, RSD_POOL_UNLOAD_DRAIN, now);
                s->restart[i] = true;
            } else {
                start = m->pinned || m->preload;
            }
        } else if (!rsrv_model_equal(oc, om, mc, m)) {
            (void)rsd_fleet_set_model(s->fleet, i, &sm->desc, now);
            list_add(ro->updated, sizeof ro->updated, m->id);
            start = m->pinned && !om->pinned;
        } else {
            list_add(ro->unchanged, sizeof ro->unchanged, m->id);
            fresh = false;
        }
        mem_prepare(s, i); /* its figures for the new configuration, before it starts again */
        mem_apply(s, i, false, now);
        if (fresh) s->fit_ctx[i] = 0; /* its fleet desc is the new one */
        if (start && !model_running(s, i)) (void)rsd_fleet_load(s->fleet, i, now);
    }
    if (mc->max_models != oc->max_models)
        (void)rsd_pool_configure(rsd_fleet_pool(s->fleet), mc->max_models, now);
    free(oc);
    free(nc);
    s->reloads++;
    return 0;
fail:
    free(nc);
    free(mc);
    s->reload_failures++;
    return -1;
}

/* The reload's outcome as one log line. */
static void reload_log(const reload_out *ro, int r, const char *why) {
    if (r != 0) {
        logf_("%s: the configuration was not reloaded (the old one stays): %s", why, ro->err);
        return;
    }
    logf_("%s: configuration reloaded: added [%s] removed [%s] changed [%s] (restarted once idle) updated [%s] "
          "unchanged [%s]%s%s%s", why, ro->added, ro->removed, ro->changed, ro->updated, ro->unchanged,
          ro->kept[0] ? "; at the next restart only: [" : "", ro->kept, ro->kept[0] ? "]" : "");
}

static void json_list(rsd_json_writer *w, const char *key, const char *list) {
    const char *p = list;
    rsd_json_w_key(w, key);
    rsd_json_w_begin_array(w);
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char word[RSRV_ID_MAX + 16];
        rsrv_cpy(word, sizeof word, p, n);
        rsd_json_w_str(w, word);
        p += n;
        while (*p == ' ') p++;
    }
    rsd_json_w_end_array(w);
}

/* POST /_rsd/reload: 200 {"success":true,"added":[..],"removed":[..],"changed":[..],
   "updated":[..],"unchanged":[..],"restart_needed":[global keys]}, or 400 with the
   FILE:LINE message (the old configuration stays). */
static void answer_reload(srv *s, const rsd_http_server_event *ev, uint64_t now) {
    static reload_out ro;
    rsd_json_writer w;
    int r, n;
    if (s->stopping) {
        respond_error(s, ev->req, 503, "unavailable_error", "rsd-serve is stopping");
        return;
    }
    r = do_reload(s, now, &ro);
    reload_log(&ro, r, "POST /_rsd/reload");
    if (r != 0) {
        char msg[sizeof ro.err + 64];
        snprintf(msg, sizeof msg, "%s (the old configuration stays)", ro.err);
        respond_error(s, ev->req, 400, "invalid_request_error", msg);
        return;
    }
    rsd_json_w_init(&w, s->out, SRV_OUT);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "success");
    rsd_json_w_bool(&w, true);
    json_list(&w, "added", ro.added);
    json_list(&w, "removed", ro.removed);
    json_list(&w, "changed", ro.changed);
    json_list(&w, "updated", ro.updated);
    json_list(&w, "unchanged", ro.unchanged);
    json_list(&w, "restart_needed", ro.kept);
    rsd_json_w_end_object(&w);
    n = rsd_json_w_finish(&w);
    if (n < 0) respond_error(s, ev->req, 500, "server_error", "answer too large");
    else respond_json(s, ev->req, 200, s->out, (size_t)n);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: rsd-serve [--config FILE] [--listen HOST:PORT] [--max-models N] [--vram-budget SIZE|auto]\n"
            "                 [--vram-margin SIZE]\n"
            "                 [--llama-server PATH] [--args \"A B\"] [--start-timeout DUR] [--stop-grace DUR]\n"
            "                 [--max-wait DUR] [--send-timeout DUR] [--max-queue N] [--watchdog DUR]\n"
            "                 [--lock-models A,B] [--api-key K] [--admin-key K] [--cors '*'|ORIGINS]\n"
            "                 [--event-history N] [--check] [--verbose] [--quiet] [--version] [--example-config]\n"
            "                 [--model ID=PATH | --command ID=\"CMD\" [--ctx N] [--parallel N] [--ngl X]\n"
            "                  [--reserve SIZE] [--ttl DUR] [--pinned] [--preload] [--aliases A,B]\n"
            "                  [--model-args \"A B\"] [--env \"A=1,B=2\"] [--model-max-queue N]]...\n"
            "The INI format is described at the top of apps/rsd-serve/rsd_serve.h and in README.md.\n"
            "--check: report what cannot work (FILE:LINE each), else print the effective configuration.\n"
            "--example-config: print every configuration key with its default and one line of help.\n"
            "SIGHUP or POST /_rsd/reload reloads the --config file.\n"
            "Exit codes: 0 stopped by SIGINT/SIGTERM/SIGQUIT, 1 cannot listen or start,\n"
            "64 bad flags or config, 66 config file unreadable or a directory.\n");
}

/* ---- main, in phases ------------------------------------------------------------ */

/* Read the command line and the configuration, build the model commands and refuse what
   cannot work. Returns -1 to go on, else the exit status (--help, --check, an error). */
static int main_configure(srv *s, int argc, char **argv, char **argv2, rsd_fleet_model_desc **mdesc) {
    char err[RSRV_ERR_MAX];
    bool check = false;
    int i, rc, argc2 = 0;
    rsrv_config_init(s->cfg);
    /* --check, --version and --example-config are ours; the rest is rsrv_parse_args' */
    for (i = 0; i < argc; i++) {
        if (i && !strcmp(argv[i], "--check")) check = true;
        else if (i && !strcmp(argv[i], "--version")) {
            printf("rsd-serve (residency.h) %s\n", RSD_VERSION_STRING);
            return EX_OK;
        } else if (i && !strcmp(argv[i], "--example-config")) {
            rc = rsrv_write_example(s->cfg, RSD_VERSION_STRING, s->out, SRV_OUT);
            if (rc < 0) return EX_FAIL;
            fwrite(s->out, 1, (size_t)rc, stdout);
            return EX_OK;
        } else argv2[argc2++] = argv[i];
    }
    s->argc = argc2;
    s->argv = argv2;
    rc = load_config(s->cfg, &s->opts, argc2, argv2, err, sizeof err);
    if (rc) {
        fprintf(stderr, "rsd-serve: %s\n", err);
        if (rc < 0) usage(stderr);
        return rc < 0 ? EX_USAGE : rc;
    }
    if (s->opts.help) { usage(stdout); return EX_OK; }
    if (env_keys(s->cfg) != 0) return EX_USAGE;
    if (s->cfg->nmodels == 0) {
        fprintf(stderr, "rsd-serve: no models (give --config FILE with [model ID] sections, or --model ID=PATH)\n");
        usage(stderr);
        return EX_USAGE;
    }
    s->models = (srv_model *)calloc(RSRV_MAX_MODELS, sizeof *s->models);
    *mdesc = (rsd_fleet_model_desc *)calloc(RSRV_MAX_MODELS, sizeof **mdesc);
    if (!s->models || !*mdesc || build_models(s) != 0) {
        fprintf(stderr, "rsd-serve: cannot prepare the model commands\n");
        return EX_USAGE;
    }
    {
        /* What parses but cannot work: refused at start; --check also looks at the files. */
        char *probs = s->out; /* the answer buffer, not yet in use (no free that would
                                 raise glibc's mmap threshold; see read_file) */
        int bad;
        probs[0] = '\0';
        bad = rsrv_check(s->cfg, s->opts.config_path, probs, SRV_OUT);
        if (check) bad += check_files(s, s->opts.config_path, probs, SRV_OUT);
        if (bad) {
            fprintf(stderr, "%s", probs);
            fprintf(stderr, "rsd-serve: %d problem%s in the configuration\n", bad, bad == 1 ? "" : "s");
            return EX_USAGE;
        }
    }
    if (check) {
        int n;
        if (s->cfg->api_key[0]) rsrv_cpy(s->cfg->api_key, sizeof s->cfg->api_key, "***", 3); /* never printed */
        if (s->cfg->admin_key[0]) rsrv_cpy(s->cfg->admin_key, sizeof s->cfg->admin_key, "***", 3);
        n = rsrv_write_ini(s->cfg, s->out, SRV_OUT);
        if (n < 0) return EX_FAIL;
        fwrite(s->out, 1, (size_t)n, stdout);
        if (mem_alloc(s)) {
            if (s->cfg->vram_budget_auto) { /* a GPU's budget: the figures' keys say so */
                rsd_devmem_desc dd;
                rsd_devmem_dev pk;
                memset(&dd, 0, sizeof dd);
                s->devmem = rsd_devmem_create(&dd);
                if (s->devmem && devmem_read(s, 0, &pk) != 0) memset(&s->dm_last, 0, sizeof s->dm_last);
            }
            mem_check_print(s);
            fflush(stdout);
            rsd_devmem_destroy(s->devmem);
            s->devmem = NULL;
        }
        return EX_OK;
    }
    return -1;
}

/* The tables a running server needs beside the configuration, and its clocks. Returns -1
   to go on, else the exit status. */
static int main_prepare(srv *s, rsd_fleet_model_desc *mdesc) {
    int i;
    s->aff = (rsrv_aff *)calloc(RSRV_MAX_MODELS, sizeof *s->aff);
    s->aff_stats = (srv_aff_stats *)calloc(RSRV_MAX_MODELS, sizeof *s->aff_stats);
    s->aff_toks = (rsd_json_tok *)calloc(SRV_AFF_TOKS, sizeof *s->aff_toks);
    s->kv = (srv_kv *)calloc(RSRV_MAX_MODELS, sizeof *s->kv);
    s->kv_toks = (rsd_json_tok *)calloc(SRV_KV_TOKS, sizeof *s->kv_toks);
    if (!s->aff || !s->aff_stats || !s->aff_toks || !s->kv || !s->kv_toks || !mem_alloc(s)) return EX_FAIL;
    if (kv_prepare(s)) rsrv_cpy(s->slot_dir, sizeof s->slot_dir, s->kv_dir, strlen(s->kv_dir));
    {
        struct timeval tv;
        (void)gettimeofday(&tv, NULL);
        s->boot_unix_ms = (uint64_t)tv.tv_sec * 1000u + (uint64_t)tv.tv_usec / 1000u - rsd_now_ms();
    }
    need_slot_dir(s, s->cfg);
    if (s->slot_dir[0] && build_models(s) != 0) return EX_USAGE; /* again, with --slot-save-path */
    for (i = 0; i < s->cfg->nlock; i++)
        if (rsrv_lock_model(s->cfg, i) < 0)
            fprintf(stderr, "rsd-serve: lock_models: '%s' is not a configured model; skipped\n", s->cfg->lock_models[i]);
    s->ev_cap = s->cfg->event_history ? s->cfg->event_history : RSRV_EVENT_HISTORY_DEFAULT;
    s->events = (srv_event *)calloc(s->ev_cap, sizeof *s->events);
    if (!s->events) {
        fprintf(stderr, "rsd-serve: cannot allocate the event history (%u events)\n", (unsigned)s->ev_cap);
        return EX_FAIL;
    }
    s->epoch_loop_ms = rsd_now_ms();
    s->epoch_ms = (uint64_t)time(NULL) * 1000u;
#if defined(_WIN32)
    s->epoch_ms = rsdi_wall_ms(); /* GetSystemTimeAsFileTime */
#else
    {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
            s->epoch_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)(ts.tv_nsec / 1000000);
    }
#endif
    for (i = 0; i < s->cfg->nmodels; i++) mdesc[i] = s->models[i].desc;
    return -1;
}

/* rsd_pool_desc.overlap ("Swaps" in the manual): with a byte budget (fixed or auto) the
   pool weighs each start beside a stopping child (BYTES); count only, a GPU that shows to
   the device probe keeps a start waiting for the exit (its memory is unknown and two
   models may not fit), and host-only children overlap (COUNT). */
static int swap_overlap_mode(const srv *s) {
    rsd_devmem_desc dd;
    rsd_devmem *dm;
    rsd_devmem_dev d[RSD_DEVMEM_MAX_DEVICES];
    int i, n;
    if (s->cfg->vram_budget_auto || s->cfg->vram_budget_bytes) return RSD_POOL_OVERLAP_BYTES;
    memset(&dd, 0, sizeof dd);
    if (!(dm = rsd_devmem_create(&dd))) return RSD_POOL_OVERLAP_BYTES;
    n = rsd_devmem_read(dm, NULL, 0, d, RSD_DEVMEM_MAX_DEVICES);
    rsd_devmem_destroy(dm);
    for (i = 0; i < n; i++)
        if (d[i].pool == RSD_DEVMEM_VRAM || d[i].unified) return RSD_POOL_OVERLAP_BYTES;
    return n > 0 ? RSD_POOL_OVERLAP_COUNT : RSD_POOL_OVERLAP_BYTES;
}

/* The fleet, the listening server and the upstream client; on failure what was created
   is destroyed again. Returns -1 to go on, else the exit status. */
static int main_create(srv *s, rsd_fleet_model_desc *mdesc, rsd_fleet_desc *fd) {
    rsd_http_server_desc hd;
    rsd_http_client_desc cd;
    char err[RSRV_ERR_MAX];
    memset(fd, 0, sizeof *fd);
    fd->pool.max_slots = s->cfg->max_models;
    /* auto: no fixed cap; the device's figure comes through rsd_pool_set_vram (main_boot) */
    fd->pool.vram_budget_bytes = s->cfg->vram_budget_auto ? 0 : s->cfg->vram_budget_bytes;
    fd->pool.max_wait_ms = rsrv_eff_max_wait(s->cfg);
    fd->pool.start_backoff_ms = rsrv_eff_start_backoff(s->cfg);
    fd->pool.overlap = swap_overlap_mode(s);
    fd->pool.max_requests = 4096;
    fd->procs.max_procs = 2 * s->cfg->max_models + 2 > RSD_PROCS_MAX ? RSD_PROCS_MAX : 2 * s->cfg->max_models + 2;
    fd->procs.term_grace_ms = s->cfg->stop_grace_ms ? s->cfg->stop_grace_ms : 1;
    fd->procs.start_deadline_ms = s->cfg->start_timeout_ms;
    fd->models = mdesc;
    fd->num_models = s->cfg->nmodels;
    fd->watchdog_interval_ms = s->cfg->watchdog_ms;
    fd->watchdog_failures = (uint32_t)rsrv_eff_wd_failures(s->cfg);
    fd->watchdog_errors = s->cfg->watchdog_ms ? (uint32_t)rsrv_eff_wd_errors(s->cfg) : 0;
    fd->watchdog_restarts = (uint32_t)rsrv_eff_wd_restarts(s->cfg);
    fd->stop_hold_ms = s->kv_dir[0] ? s->kv_timeout_ms + 1000 : 0; /* the slot saves (kv cache); the fleet
                                                                      keeps it inside half the grace */
    fd->ready_hold_ms = s->kv_dir[0] ? s->kv_timeout_ms + 1000 : 0; /* the slot restores */
    if (s->opts.verbose) fd->logger.fn = lib_log;
    s->fleet = rsd_fleet_create(fd);
    if (!s->fleet) {
        fprintf(stderr, "rsd-serve: cannot create the process pool (see the messages above; --verbose for more)\n");
        return EX_FAIL;
    }

    memset(&hd, 0, sizeof hd);
    if (!resolve_listen(s->cfg->listen_host, s->listen_addr, sizeof s->listen_addr, err, sizeof err)) {
        fprintf(stderr, "rsd-serve: %s\n", err);
        rsd_fleet_destroy(s->fleet);
        return EX_FAIL;
    }
    hd.bind_host = s->listen_addr;
    hd.port = (uint16_t)s->cfg->listen_port;
    hd.max_conns = SRV_MAX_CONNS;
    hd.max_body_bytes = SRV_MAX_BODY;
    hd.max_response_bytes = SRV_RESPONSE_BYTES;
    hd.request_timeout_ms = 60000;
    if (s->opts.verbose) hd.logger.fn = lib_log;
    s->hs = rsd_http_server_create(&hd);
    if (!s->hs) {
        fprintf(stderr, "rsd-serve: cannot listen on %s:%d: %s\n", s->cfg->listen_host, s->cfg->listen_port,
                strerror(errno));
        rsd_fleet_destroy(s->fleet);
        return EX_FAIL;
    }
    memset(&cd, 0, sizeof cd);
    cd.max_requests = SRV_MAX_CONNS;
    cd.max_conns = SRV_MAX_CONNS;
    cd.max_request_bytes = SRV_MAX_BODY + 16384;
    cd.max_body_bytes = SRV_UP_READ;
    cd.total_timeout_ms = SRV_UPSTREAM_TIMEOUT_MS;
    cd.tls_off = true; /* children listen on loopback, plain http: no CA bundle parsed, and
                          no 2 x 16.7 KiB of mbedTLS record buffers per socket (2.1 MiB) */
    if (s->opts.verbose) cd.logger.fn = lib_log;
    s->hc = rsd_http_client_create(&cd);
    if (!s->hc) {
        fprintf(stderr, "rsd-serve: cannot create the HTTP client\n");
        rsd_http_server_destroy(s->hs);
        rsd_fleet_destroy(s->fleet);
        return EX_FAIL;
    }
    return -1;
}

/* Nothing a terminal or an ssh logout sends ends us ungracefully: SIGINT, SIGTERM and
   SIGQUIT stop every process first; SIGHUP reloads the configuration; SIGPIPE is ignored
   (a write to a closed socket or stderr fails with EPIPE instead). The handlers only count
   and write a byte to the self-pipe wake[] the loop polls. false when the pipe fails.
   Windows: Ctrl+C, Ctrl+Break and closing the console stop us (on_console); no pipe. */
static bool main_signals(int wake[2]) {
#if defined(_WIN32)
    (void)wake;
    (void)SetConsoleCtrlHandler(on_console, TRUE);
    return true;
#else
    struct sigaction sa;
    if (pipe(wake) != 0 || fcntl(wake[0], F_SETFL, O_NONBLOCK) != 0 || fcntl(wake[1], F_SETFL, O_NONBLOCK) != 0 ||
        fcntl(wake[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(wake[1], F_SETFD, FD_CLOEXEC) != 0) {
        fprintf(stderr, "rsd-serve: cannot create the self-pipe: %s\n", strerror(errno));
        return false;
    }
    g_wake_fd = wake[1];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGINT, &sa, NULL);
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGQUIT, &sa, NULL);
    (void)sigaction(SIGHUP, &sa, NULL);
    return true;
#endif
}

/* The listening line, then the boot policy: pinned models are loaded at once, then
   preload ones (not pinned: evicted like any other when room is needed). */
static void main_boot(srv *s) {
    int i;
    printf("rsd-serve: listening on http://%s%s%s:%u\n", strchr(s->listen_addr, ':') ? "[" : "",
           s->listen_addr, strchr(s->listen_addr, ':') ? "]" : "", (unsigned)rsd_http_server_port(s->hs));
    fflush(stdout);
    if (!s->opts.quiet)
        logf_("%d model%s, at most %d resident, llama-server: %s", s->cfg->nmodels, s->cfg->nmodels == 1 ? "" : "s",
              s->cfg->max_models, s->cfg->llama_server);
    if (s->devmem) {
        char t1[32], t2[32], t3[32];
        devmem_admit(s, rsd_now_ms());
        if (!s->opts.quiet)
            logf_("vram_budget = auto: %s (%s) has %s, others hold %s: budget %s", s->dm_last.name,
                  rsd_devmem_pool_str(s->dm_last.pool), rsrv_fmt_size(s->dm_last.total_bytes, t1, sizeof t1),
                  rsrv_fmt_size(s->dm_foreign, t2, sizeof t2), rsrv_fmt_size(s->cfg->vram_budget_bytes, t3, sizeof t3));
    }
    mem_prepare_all(s, rsd_now_ms()); /* each model's bytes before the first start */
    for (i = 0; i < 2 * s->cfg->nmodels; i++) { /* the pinned models first, then the preloads */
        const rsrv_model *mc = &s->cfg->models[i % s->cfg->nmodels];
        char msg[512];
        if ((i < s->cfg->nmodels ? mc->pinned : mc->preload && !mc->pinned) &&
            rsd_fleet_load(s->fleet, i % s->cfg->nmodels, rsd_now_ms()) == RSD_ERR_POOL_NO_FIT)
            no_fit(s, i % s->cfg->nmodels, rsd_now_ms(), msg, sizeof msg);
    }
}

/* One pass over everything that can move: signals, the server, the fleet, the upstream
   client, the jobs and the event subscribers. */
static void loop_work(srv *s, uint64_t now, int wake0, uint32_t term_grace_ms) {
    rsd_http_server_event sev;
    rsd_http_event cev;
    rsd_fleet_event fev;
#if defined(_WIN32)
    (void)wake0;
#else
    char drain[64]; /* the self-pipe's bytes: they only woke the poll */
    while (read(wake0, drain, sizeof drain) > 0) {}
#endif
    if (g_hangups) {
        static reload_out ro;
        g_hangups = 0;
        if (!s->stopping) reload_log(&ro, do_reload(s, now, &ro), "SIGHUP");
    }
    if (g_signals && !s->stopping) {
        s->stopping = true;
        s->stop_at = now;
        logf_("stopping: every process gets SIGTERM (SIGKILL after %u ms)", (unsigned)term_grace_ms);
        (void)rsd_fleet_stop(s->fleet, now);
    }
    if (g_signals > 1) return;
    (void)rsd_http_server_step(s->hs, now);
    while (rsd_http_server_next_event(s->hs, &sev)) {
        if (sev.type == RSD_HTTP_SEV_REQUEST) on_request(s, &sev, now);
        else if (sev.type == RSD_HTTP_SEV_CLOSED) on_closed(s, sev.req, now);
    }
    (void)rsd_fleet_step(s->fleet, now);
    while (rsd_fleet_next_event(s->fleet, &fev)) on_fleet(s, &fev, now);
    (void)rsd_http_client_step(s->hc, now);
    while (rsd_http_next_event(s->hc, &cev)) on_upstream(s, &cev, now);
    jobs_service(s, now);
    kv_service(s, now);
    devmem_service(s, now);
    meta_service(s, now);
    list_wait_service(s, now);
    mem_service(s, now);
    /* releases above may have granted waiting requests: pick them up at once */
    (void)rsd_fleet_step(s->fleet, now);
    while (rsd_fleet_next_event(s->fleet, &fev)) on_fleet(s, &fev, now);
    lease_service(s, now); /* after every exit this pass reaped */
    subs_pump(s, now);
    (void)rsd_http_server_step(s->hs, now); /* flush what was written */
}

/* The earliest deadline of everything the loop steps. */
static uint64_t loop_deadline(srv *s) {
    uint64_t dl = rsd_http_server_next_deadline(s->hs), d2;
    int k;
    d2 = rsd_http_client_next_deadline(s->hc);
    if (d2 < dl) dl = d2;
    d2 = rsd_fleet_next_deadline(s->fleet);
    if (d2 < dl) dl = d2;
    d2 = jobs_deadline(s);
    if (d2 < dl) dl = d2;
    d2 = subs_deadline(s);
    if (d2 < dl) dl = d2;
    d2 = kv_deadline(s);
    if (d2 < dl) dl = d2;
    d2 = devmem_deadline(s);
    if (d2 < dl) dl = d2;
    d2 = lease_deadline(s);
    if (d2 < dl) dl = d2;
    d2 = mem_deadline(s);
    if (d2 < dl) dl = d2;
    for (k = 0; k < s->cfg->nmodels; k++) /* a held GET /v1/models goes 1 s after ready at the latest */
        if (s->meta[k].deferred && s->meta[k].ready_ms + 1000 < dl) dl = s->meta[k].ready_ms + 1000;
    return dl;
}

/* The descriptors of the server, the client and the fleet, then the self-pipe. */
static int loop_pollfds(srv *s, rsd_pollfd *fds, int wake0) {
    int n = 0, k;
    k = rsd_http_server_pollfds(s->hs, fds, SRV_MAX_FDS);
    if (k > 0) n += k > SRV_MAX_FDS ? SRV_MAX_FDS : k;
    k = rsd_http_client_pollfds(s->hc, fds + n, SRV_MAX_FDS - n);
    if (k > 0) n += k > SRV_MAX_FDS - n ? SRV_MAX_FDS - n : k;
    k = rsd_fleet_pollfds(s->fleet, fds + n, SRV_MAX_FDS - n);
    if (k > 0) n += k > SRV_MAX_FDS - n ? SRV_MAX_FDS - n : k;
#if defined(_WIN32)
    (void)wake0; /* no self-pipe: the loop's poll cap bounds how late a console event is seen */
#else
    if (n < SRV_MAX_FDS) {
        fds[n].fd = wake0;
        fds[n].events = RSD_POLLIN;
        fds[n++].revents = 0;
    }
#endif
    return n;
}

/* Serve until stopped: work, then sleep in poll until the next deadline (at most 1 s;
   on Windows 100 ms, as there is no self-pipe: a console event is seen within that).
   Returns the exit status. */
#if defined(_WIN32)
#define SRV_POLL_CAP_MS 100
#else
#define SRV_POLL_CAP_MS 1000
#endif
static int main_loop(srv *s, rsd_pollfd *fds, int wake0, uint32_t term_grace_ms) {
    for (;;) {
        uint64_t now = rsd_now_ms(), dl;
        int n, timeout;
        s->now = now;
        loop_work(s, now, wake0, term_grace_ms);
        if (g_signals > 1) {
            logf_("second signal: killing every process now");
            return EX_FAIL;
        }
        if (s->stopping && rsd_fleet_idle(s->fleet)) {
            logf_("stopped");
            return EX_OK;
        }
        if (s->stopping && now - s->stop_at > (uint64_t)term_grace_ms + 10000) { /* a save is inside the grace */
            logf_("processes did not exit in time; killing them");
            return EX_OK;
        }
        dl = loop_deadline(s);
        n = loop_pollfds(s, fds, wake0);
        now = rsd_now_ms();
        if (dl == RSD_NO_DEADLINE || dl == UINT64_MAX) timeout = SRV_POLL_CAP_MS;
        else if (dl <= now) timeout = 0;
        else timeout = dl - now > SRV_POLL_CAP_MS ? SRV_POLL_CAP_MS : (int)(dl - now);
        if (rsd_poll(fds, n, timeout) < 0 && errno != EINTR) {
            logf_("poll: %s", strerror(errno));
            return EX_FAIL;
        }
    }
}

int main(int argc, char **argv) {
    static srv s;
    rsd_fleet_desc fd;
    rsd_fleet_model_desc *mdesc = NULL;
    rsd_pollfd *fds;
    int i, rc, wake[2] = {-1, -1};
    char **argv2;
#if !defined(_WIN32)
    signal(SIGPIPE, SIG_IGN);
#endif
#if defined(__linux__) && defined(PR_SET_CHILD_SUBREAPER)
    /* Orphans of a wrapper command (its children, once it exits) come back to us, so the
       supervisor reaps them and a model's process group cannot vanish unseen. */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
    s.cfg = (rsrv_config *)calloc(1, sizeof *s.cfg);
    s.out = (char *)malloc(SRV_OUT);
    fds = (rsd_pollfd *)calloc(SRV_MAX_FDS, sizeof *fds);
    argv2 = (char **)calloc((size_t)argc + 1, sizeof *argv2);
    if (!s.cfg || !s.out || !fds || !argv2) return EX_FAIL;
    if ((rc = main_configure(&s, argc, argv, argv2, &mdesc)) >= 0) return rc;
    if ((rc = main_prepare(&s, mdesc)) >= 0) return rc;
    if (s.cfg->vram_budget_auto) { /* the device's memory: the budget, before anything starts */
        char err[RSRV_ERR_MAX];
        rsd_devmem_desc dd;
        memset(&dd, 0, sizeof dd);
        s.devmem = rsd_devmem_create(&dd);
        if (!s.devmem || !devmem_budget(&s, s.cfg, 0, err, sizeof err)) {
            fprintf(stderr, "rsd-serve: %s\n", s.devmem ? err : "vram_budget = auto: out of memory");
            rsd_devmem_destroy(s.devmem);
            return EX_FAIL;
        }
    }
    if ((rc = main_create(&s, mdesc, &fd)) >= 0) return rc;
    if (!main_signals(wake)) {
        rsd_http_client_destroy(s.hc);
        rsd_http_server_destroy(s.hs);
        rsd_fleet_destroy(s.fleet);
        return EX_FAIL;
    }
    main_boot(&s);
    rc = main_loop(&s, fds, wake[0], fd.procs.term_grace_ms);
    g_wake_fd = -1;
#if !defined(_WIN32)
    close(wake[0]);
    close(wake[1]);
#endif
    for (i = 0; i < SRV_MAX_CONNS; i++) free(s.jobs[i].stash);
    rsd_http_client_destroy(s.hc);
    rsd_http_server_destroy(s.hs);
    rsd_fleet_destroy(s.fleet);
    rsd_devmem_destroy(s.devmem);
    free(mdesc);
    free(s.events);
    free(s.models);
    free(s.aff);
    free(s.aff_stats);
    free(s.aff_toks);
    free(s.kv);
    free(s.kv_toks);
    free(s.mem);
    free(s.gguf);
    free(s.mem_tail);
    if (s.slot_dir[0] && strcmp(s.slot_dir, s.kv_dir)) (void)rmdir(s.slot_dir); /* empty unless a client saved a slot there */
    free(s.out);
    free(s.cfg);
    free(fds);
    free(argv2);
    return rc;
}
