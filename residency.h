/* residency.h -- keep the right LLM models resident on local inference servers.
   v0.1.0 -- MIT license (see end of file).

   Do this:
       #define RESIDENCY_IMPLEMENTATION
       #include "residency.h"        (or "residency_http.h", which includes this one)
   in *one* C or C++ file, before any system header, to create the implementation.
   Every other file includes the header(s) without the define.

   residency.h is the core: platform-free, libc only, no I/O. residency_http.h is
   the I/O shell (POSIX sockets, optional mbedTLS) that drives the core.

   CONFIGURATION MACROS (define before including, in the implementation file)
       RESIDENCY_IMPLEMENTATION  instantiate the implementation(s) in this TU
       RSD_STATIC                make every function static (private copy per TU)
       RSD_DLL                   __declspec(dllexport/dllimport) on Windows
       RSD_API                   override the declaration prefix entirely
       RSD_ASSERT(c)             default: assert(c); only for programmer errors
       RSD_DEFAULT_ALLOC(sz,u)   default allocator (default: malloc(sz))
       RSD_DEFAULT_FREE(p,u)     default free (default: free(p)); both or neither
       RSD_NO_MALLOC             no libc defaults: a user allocator is mandatory
       RSD_NO_ERROR_STRINGS      rsd_result_str() returns bare names only
       RSD_SNPRINTF              default: snprintf

   FEATURE OVERVIEW
       json      strict RFC 8259 tokenizer into caller-owned tokens (zero-copy,
                 bounded depth and size, no allocation) and a bounds-checked writer
                 that escapes any byte sequence.
       (reconciler, context-fit clamp and process-pool policy: see their sections)

   TL;DR (JSON)
       rsd_json_tok toks[256];
       rsd_json_doc doc;
       int r = rsd_json_parse(&doc, text, len, toks, 256);
       if (r < 0) printf("%s at %u:%u\n", rsd_result_str(r), doc.err.line, doc.err.col);

   API REFERENCE
       [doc:json]
       [doc:reconcile]
       [doc:fit]
   POOL (process-pool policy; pure, sans-I/O)
       Keeps up to max_slots model-server processes resident, one model per
       slot, and decides which request runs where. It never forks, never
       touches a socket and never reads a clock: the host (a supervisor in
       residency_http.h, or your own) feeds events with now_ms and pulls
       actions. Same snapshot + same events = same actions.

       Host loop (one pool, any thread, one at a time):
           rsd_pool_desc pd = {0};           pd.max_slots = 2;
           pd.vram_budget_bytes = 24ull << 30;
           rsd_pool *pool = rsd_pool_create(&pd);
           int m = rsd_pool_add_model(pool, &(rsd_pool_model_desc){
                       .id = "qwen3-8b", .reserve_bytes = 9ull << 30,
                       .ttl_ms = 300000, .max_in_flight = 4 });
           r = rsd_pool_acquire(pool, m, now, my_conn, &req, &slot);
               RSD_OK: proxy to slot now | RSD_PENDING: wait for GRANT/FAIL
           each frame / on wake:
               rsd_pool_on_started / rsd_pool_on_exited for process news;
               rsd_pool_release(pool, req, now) when a request finishes;
               while (rsd_pool_next_action(pool, &a)) switch (a.kind) {
                   SPAWN: start a.model_id in a.slot (port = base + a.slot),
                          within a.reserve_bytes; later on_started(a.proc, ok)
                   STOP:  SIGTERM/SIGKILL a.slot, reap; then on_exited(a.proc)
                   GRANT: send a.req (a.user) to a.slot; release it when done
                   FAIL:  answer a.user with rsd_result_str(a.result); done
               }
               wake = rsd_pool_step(pool, now);   (idle TTL, W26 timer)

       rsd_pool_create(desc) / rsd_pool_destroy(pool)
           The only allocation: one block of about 14 KiB + 40 bytes per
           max_requests + 48 bytes per event_log entry. destroy does not stop
           processes (they are the host's): call rsd_pool_stop and reap first.
           Zeroed desc = 1 slot, 1024 requests, no byte budget, 30 s W26 bound.
       rsd_pool_add_model(pool, &model_desc) -> index | RSD_ERR_ARG/CAPACITY
           id 1..127 bytes (copied, unique); reserve_bytes (0 = the desc's
           default_reserve_bytes) is reserved when a slot is claimed, before
           the load; ttl_ms: unload after that long idle since the last
           request *finished* (0 = never; llama-swap ttl, Ollama keep_alive);
           max_in_flight: concurrency per process (0 = unlimited; set it to
           llama-server --parallel so requests beyond it queue here, FIFO);
           pinned: never evicted, trimmed or TTL-unloaded.
       rsd_pool_find_model(pool, id), rsd_pool_set_pinned(pool, m, on, now)
       rsd_pool_acquire(pool, m, now, user, &req, &slot)
           RSD_OK: granted now, in-flight counted now (at admission, not at
           dispatch: a slot holding a granted request is never idle, the
           llama.cpp router's #28698 race). RSD_PENDING: queued; *req is the
           handle to wait on. Errors (no handle): RSD_ERR_POOL_STOPPED,
           RSD_ERR_POOL_NO_FIT (reservation > whole budget), RSD_ERR_POOL_PINNED
           (pinned residents leave no slot or bytes), RSD_ERR_POOL_QUEUE_FULL,
           RSD_ERR_CAPACITY (request table full), RSD_ERR_ARG.
       rsd_pool_preload(pool, m, now)
           Load m and leave it resident with no request (P9; boot policy P37,
           e.g. preload the pinned models). RSD_OK when READY or STARTING
           already, RSD_PENDING when queued; no GRANT or FAIL ever comes for a
           preload (a failed load is only logged and counted). st.preloads
           counts those still queued.
       rsd_pool_release(pool, req, now)   a granted request finished
       rsd_pool_cancel(pool, req, now)    the client went away (waiting or granted)
           Both free the handle. release on a waiting request is RSD_ERR_STATE;
           a stale handle is RSD_ERR_POOL_STALE. A request whose FAIL was
           pulled is already gone.
       rsd_pool_on_started(pool, proc, ok, now)
           ok: READY, the model's waiters are granted (up to max_in_flight).
           !ok: only this model's waiters FAIL (RSD_ERR_POOL_LOAD_FAILED), the
           slot stops routing at once (FAILED) and a STOP is emitted; slot and
           reservation are freed by on_exited (the process may still hold VRAM).
       rsd_pool_on_exited(pool, proc, now)
           After a STOP, or unasked (a crash): the slot is EMPTY and its
           reservation freed at once (W27). A crash orphans the requests that
           were running there (release/cancel them as usual; bookkeeping only;
           a GRANT not pulled yet becomes FAIL(RSD_ERR_POOL_CRASHED) instead);
           a crash while STARTING fails the model's waiters (ERR_POOL_CRASHED).
       rsd_pool_set_reserved(pool, proc, bytes, now)
           Replace the claim-time estimate with the measured figure (after
           READY, from the child's log or nvidia-smi; P20, W23). Shrinking it
           may admit waiters at once.
       rsd_pool_set_vram(pool, total, foreign, now)   measured VRAM (W23)
       rsd_pool_set_pid(pool, proc, pid)              shown in stats only
       rsd_pool_next_action(pool, &a) -> bool
           STOPs and SPAWNs first (in decision order), then GRANT/FAIL in order.
       rsd_pool_step(pool, now) -> next deadline | RSD_POOL_NO_DEADLINE
           Stops idle slots whose TTL expired, runs admission (W26 starvation).
       rsd_pool_configure(pool, max, now)
           max clamped to 1..16 (P4). Idle excess slots stop at once, LRU
           first; busy excess stops when it goes idle (P19).
       rsd_pool_unload(pool, m or -1, flags, now)
           Default: RSD_ERR_POOL_BUSY and no change if any target is busy or
           loading. RSD_POOL_UNLOAD_DRAIN: busy targets take no new work and
           stop when drained (returns RSD_PENDING); idle ones stop now (RSD_OK).
           Explicit unload stops pinned models too. Later requests reload.
       rsd_pool_stop(pool, now)
           Every waiting and running request gets FAIL(RSD_ERR_POOL_STOPPED),
           every process a STOP; later acquire/unload return ERR_POOL_STOPPED.
       rsd_pool_query_stats(pool, &st), rsd_pool_query_model(pool, m, &info)
           Every slot (state, model, proc, in-flight, reservation, last use,
           idle deadline, ttl, pin, pid) and lifetime counters (acquires,
           grants, waits, max wait, spawns, readies, load failures, crashes,
           evictions, TTL expiries, trims, W26 drains, unloads, fails...).
       rsd_pool_next_event(pool, &ev)
           Optional audit ring (desc.event_log entries; oldest dropped first):
           CLAIM, READY, LOAD_FAILED, DRAIN, STOP (why), EXITED, CRASHED, each
           with the slot's in-flight count and pin at decision time.

       Admission (P31-P35, W21-W26). Requests for a READY model with room go
       straight through. Otherwise the request joins its model's FIFO; a model
       with no slot joins the list of models waiting for a slot (FIFO by its
       oldest request). Each admission pass visits those models in order and,
       for each: (1) claims an EMPTY slot if the count and the bytes fit
       (reserved + reservation + foreign <= budget); (2) else counts capacity
       already on its way out (STOPPING, DRAINING) and evicts idle, unpinned
       READY slots in LRU order until count and bytes fit (only if that is
       enough); (3) if its oldest request has waited max_wait_ms, busy LRU
       slots are put in DRAINING (no new admissions) until it would fit (W26;
       lifted again when no model waits for a slot any more, and by a pin);
       (4) holds what it needs, so later models cannot take capacity being
       freed for it. A busy slot is never evicted or trimmed; requests for
       residents keep flowing while others wait. Work per event is
       O(models x slots), independent of the number of waiting requests (W25);
       a load that completes grants its waiters in O(granted).

       Slot states (who may call what):
           EMPTY    --claim-->  STARTING (SPAWN emitted, reservation taken)
           STARTING --on_started(ok)--> READY | --on_started(!ok)--> FAILED
                    --on_exited--> EMPTY (crash while loading)
                    stop/unload before the SPAWN was pulled: back to EMPTY
           READY    --idle LRU victim, TTL, trim, unload, stop--> STOPPING
                    --W26 or unload(DRAIN) while busy--> DRAINING
                    --on_exited (crash)--> EMPTY
           DRAINING --last release--> STOPPING;  --on_exited--> EMPTY
           STOPPING, FAILED --on_exited--> EMPTY (reservation freed)
       on_started is valid only in STARTING (else RSD_ERR_STATE); on_exited in
       any non-EMPTY state; a proc from an earlier process in the same slot is
       RSD_ERR_POOL_STALE. Requests: WAITING --GRANT--> RUNNING --release-->
       gone; WAITING/RUNNING --FAIL (pulled)--> gone; cancel from either.

       Bytes. Budget = min(desc.vram_budget_bytes, measured total), either
       may be 0 = unknown; both 0 = count-only admission. Foreign use is
       subtracted for admission but not for "can never fit" (it may go away;
       a request that fits the budget but not beside foreign use waits for
       the host's next rsd_pool_set_vram). A measurement below what is already
       reserved stops new admissions; nothing running is stopped for it.

       LIMITS: RSD_POOL_MAX_SLOTS 16, RSD_POOL_MAX_MODELS 64,
       RSD_POOL_MAX_MODEL_ID 128, RSD_POOL_MAX_REQUESTS 1048575 (handles carry
       a 12-bit generation: a stale handle is detected unless its entry was
       reused 4096 times since; entries are reused FIFO), RSD_POOL_MAX_BYTES
       2^58, RSD_POOL_DEFAULT_MAX_WAIT_MS 30000 (RSD_POOL_WAIT_FOREVER = off).
       ERRORS: RSD_ERR_POOL_* (-60..-68) as above, plus RSD_ERR_ARG,
       RSD_ERR_STATE, RSD_ERR_CAPACITY. Crash-recovery and stop paths that
       orphan or fail running requests scan the request table once (O(max_
       requests)); every other operation is O(models x slots) or better.

   RESULTS
       Every fallible function returns an int from RSD_RESULTS: 0 = RSD_OK,
       >0 = pending / progress (never an error), <0 = error. rsd_result_str(r)
       always exists. `if (r < 0)` is always the error test.

   MEMORY
       Nothing in residency.h allocates except the *_create functions, which use
       the allocator in their desc (or RSD_DEFAULT_ALLOC/FREE when it is zeroed).
       Allocator hooks are both-or-neither: giving only one is RSD_ERR_ARG.

   LOGGING
       Every top-level desc embeds an rsd_logger. It is silent when unset, is called
       only from inside API calls on the caller's thread, and never allocates.
       Items come from the RSD_LOG_ITEMS X-macro so hosts can filter by id.

   THREADING
       No threads, no globals, no thread-local storage. An object is not
       thread-safe; use one per thread or lock outside.

   LIMITS
       See the enum of RSD_* constants below; every cap is named there.
*/
#if defined(RESIDENCY_IMPLEMENTATION) && !defined(RESIDENCY_IMPL_INCLUDED) && \
    !defined(RSDI_FEATURES_SET)
#define RSDI_FEATURES_SET 1
#if defined(_FEATURES_H) && !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && \
    !defined(_DEFAULT_SOURCE)
#error "residency.h: include residency.h (with RESIDENCY_IMPLEMENTATION) before any system header in the implementation file"
#endif
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1
#endif
#endif

#ifndef RESIDENCY_H_INCLUDED
#define RESIDENCY_H_INCLUDED

#define RSD_VERSION_MAJOR 0
#define RSD_VERSION_MINOR 1
#define RSD_VERSION_PATCH 0
#define RSD_VERSION_STRING "0.1.0"

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifndef RSD_API
#if defined(RSD_STATIC)
#if defined(__GNUC__) || defined(__clang__)
#define RSD_API static __attribute__((unused))
#else
#define RSD_API static
#endif
#elif defined(_WIN32) && defined(RSD_DLL) && defined(RESIDENCY_IMPLEMENTATION)
#define RSD_API __declspec(dllexport)
#elif defined(_WIN32) && defined(RSD_DLL)
#define RSD_API __declspec(dllimport)
#else
#define RSD_API extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>results: one X-macro, 0 ok, >0 pending, <0 error ================== */
/* Each module owns a sub-list and a numeric range:
     general -1..-9, json -10..-19, http -20..-39, tls -40..-49,
     reconcile -50..-59, pool/process -60..-79, state/lock -80..-89 */
#define RSDI_RESULTS_CORE(X) \
    X(OK, 0, "ok") \
    X(PENDING, 1, "in progress; call again") \
    X(ERR_ARG, -1, "invalid argument") \
    X(ERR_NOMEM, -2, "allocation failed") \
    X(ERR_CAPACITY, -3, "fixed capacity exhausted (raise it in the desc)") \
    X(ERR_OVERFLOW, -4, "size computation overflowed") \
    X(ERR_STATE, -5, "call not valid in the current state") \
    X(ERR_NOT_FOUND, -6, "not found") \
    X(ERR_BUFFER, -7, "caller buffer too small")
/* >>results:json */
#define RSDI_RESULTS_JSON(X) \
    X(ERR_JSON, -10, "malformed JSON") \
    X(ERR_JSON_DEPTH, -11, "JSON nesting too deep") \
    X(ERR_TRUNCATED, -12, "input ended early") \
    X(ERR_JSON_TOKENS, -13, "not enough JSON tokens (size the array with a count pass)") \
    X(ERR_JSON_TYPE, -14, "JSON value has the wrong type") \
    X(ERR_JSON_RANGE, -15, "JSON number out of range") \
    X(ERR_TOO_LARGE, -16, "input larger than the configured limit")
/* >>results:http */
#define RSDI_RESULTS_HTTP(X) \
    X(ERR_URL, -20, "malformed or unsupported URL") \
    X(ERR_CONNECT, -21, "connect failed") \
    X(ERR_TIMEOUT, -22, "timed out") \
    X(ERR_PROTOCOL, -23, "malformed HTTP") \
    X(ERR_HTTP_STATUS, -24, "server returned an error status") \
    X(ERR_CLOSED, -25, "connection closed by peer") \
    X(ERR_IO, -26, "socket I/O error") \
    X(ERR_RESOLVE, -27, "name resolution failed") \
    X(ERR_HEADERS_TOO_LARGE, -28, "response headers over the limit") \
    X(ERR_BODY_TOO_LARGE, -29, "response body over the limit") \
    X(ERR_CANCELLED, -30, "request cancelled")
/* >>results:tls */
#define RSDI_RESULTS_TLS(X) \
    X(ERR_TLS, -40, "TLS failure") \
    X(ERR_TLS_VERIFY, -41, "TLS certificate verification failed") \
    X(ERR_TLS_UNAVAILABLE, -42, "https URL but built without RSD_HTTP_MBEDTLS")
/* >>results:reconcile */
#define RSDI_RESULTS_RECONCILE(X)
/* >>results:pool */
#define RSDI_RESULTS_POOL(X) \
    X(ERR_POOL_STOPPED, -60, "pool stopped; no new work accepted") \
    X(ERR_POOL_NO_FIT, -61, "model can never fit in the VRAM budget") \
    X(ERR_POOL_QUEUE_FULL, -62, "pool waiting queue full") \
    X(ERR_POOL_LOAD_FAILED, -63, "model failed to load") \
    X(ERR_POOL_CRASHED, -64, "model process exited unexpectedly") \
    X(ERR_POOL_BUSY, -65, "model is still serving requests") \
    X(ERR_POOL_STALE, -66, "stale or invalid pool handle") \
    X(ERR_POOL_UNLOADED, -67, "model unloaded before it was ready") \
    X(ERR_POOL_PINNED, -68, "no room beside the pinned models")
/* >>results:state */
#define RSDI_RESULTS_STATE(X)

#define RSD_RESULTS(X) \
    RSDI_RESULTS_CORE(X) RSDI_RESULTS_JSON(X) RSDI_RESULTS_HTTP(X) RSDI_RESULTS_TLS(X) \
    RSDI_RESULTS_RECONCILE(X) RSDI_RESULTS_POOL(X) RSDI_RESULTS_STATE(X)

typedef enum rsd_result {
#define RSDI_X(name, val, str) RSD_##name = val,
    RSD_RESULTS(RSDI_X)
#undef RSDI_X
    RSD_RESULT_FORCE_INT = 0x7fffffff
} rsd_result;

/* Human-readable text for a result code; never NULL (unknown codes too). */
RSD_API const char *rsd_result_str(int result);
/* The bare name, e.g. "ERR_TIMEOUT"; never NULL. */
RSD_API const char *rsd_result_name(int result);

/* ==== >>log: levels and X-macro items ===================================== */
enum { RSD_LOG_ERROR = 1, RSD_LOG_WARN = 2, RSD_LOG_INFO = 3, RSD_LOG_DEBUG = 4 };

#define RSDI_LOG_ITEMS_CORE(X) \
    X(OK, "no error") \
    X(ALLOCATOR_HALF, "allocator: alloc_fn and free_fn must be given together") \
    X(ALLOC_FAILED, "allocation failed")
/* >>log:json */
#define RSDI_LOG_ITEMS_JSON(X)
/* >>log:http */
#define RSDI_LOG_ITEMS_HTTP(X)
/* >>log:reconcile */
#define RSDI_LOG_ITEMS_RECONCILE(X)
/* >>log:pool */
#define RSDI_LOG_ITEMS_POOL(X) \
    X(POOL_BAD_DESC, "pool: desc value out of range") \
    X(POOL_BAD_MODEL, "pool: bad model (id length, reserve bytes, duplicate)") \
    X(POOL_MODEL_TABLE_FULL, "pool: model table full (RSD_POOL_MAX_MODELS)") \
    X(POOL_STOP, "pool: stopping a slot's process") \
    X(POOL_EVICT, "pool: evicting the LRU idle slot") \
    X(POOL_DRAIN, "pool: draining a busy slot for a starving request (W26)") \
    X(POOL_NO_FIT, "pool: model can never fit in the byte budget") \
    X(POOL_QUEUE_FULL, "pool: waiting queue full") \
    X(POOL_LOAD_FAILED, "pool: model failed to load") \
    X(POOL_CRASHED, "pool: process exited unexpectedly") \
    X(POOL_BUSY, "pool: unload refused, model busy") \
    X(POOL_STOPPED, "pool: stopped")

#define RSD_LOG_ITEMS(X) \
    RSDI_LOG_ITEMS_CORE(X) RSDI_LOG_ITEMS_JSON(X) RSDI_LOG_ITEMS_HTTP(X) \
    RSDI_LOG_ITEMS_RECONCILE(X) RSDI_LOG_ITEMS_POOL(X)

typedef enum rsd_log_item {
#define RSDI_X(name, str) RSD_LOGITEM_##name,
    RSD_LOG_ITEMS(RSDI_X)
#undef RSDI_X
    RSD_LOGITEM_NUM
} rsd_log_item;

/* Name of a log item, e.g. "ALLOC_FAILED"; never NULL. */
RSD_API const char *rsd_log_item_name(uint32_t item);

/* Logger hook: level is RSD_LOG_*, item an rsd_log_item, msg a formatted line
   (never holds a bearer token), where is "file:line" or NULL. */
typedef struct rsd_logger {
    void (*fn)(void *user, int level, uint32_t item, const char *msg, const char *where);
    void *user;
} rsd_logger;

/* ==== >>types: allocator, string view ===================================== */
/* Allocator hooks; zeroed = RSD_DEFAULT_ALLOC/FREE. Both or neither. */
typedef struct rsd_allocator {
    void *(*alloc_fn)(size_t size, void *user);
    void (*free_fn)(void *ptr, void *user);
    void *user;
} rsd_allocator;

/* A string view: ptr need not be NUL-terminated. */
typedef struct rsd_str {
    const char *ptr;
    size_t len;
} rsd_str;

/* View of a NUL-terminated string (NULL gives the empty view). */
RSD_API rsd_str rsd_str_c(const char *s);
/* Byte-wise equality of two views. */
RSD_API bool rsd_str_eq(rsd_str a, rsd_str b);
/* Equality with a NUL-terminated string. */
RSD_API bool rsd_str_eq_c(rsd_str a, const char *s);

/* ==== >>json (declarations) =============================================== */

/* ==== >>json end ========================================================== */

/* ==== >>reconcile (declarations) ========================================== */

/* ==== >>reconcile end ===================================================== */

/* ==== >>fit (declarations) ================================================ */

/* ==== >>fit end =========================================================== */

/* ==== >>pool (declarations) =============================================== */
/* Process-pool policy (pure, sans-I/O): slots, per-model FIFO queues, LRU
   eviction of idle slots, byte reservations, pins, idle TTL. It never forks,
   never touches a socket, never reads a clock: the host feeds events and pulls
   actions. See POOL in the manual at the top of this file. */
enum {
    RSD_POOL_MAX_SLOTS = 16,          /* hard cap on slots (processes) */
    RSD_POOL_MAX_MODELS = 64,         /* entries in a pool's model table */
    RSD_POOL_MAX_MODEL_ID = 128,      /* bytes of a model id, including the NUL */
    RSD_POOL_MAX_REQUESTS = 1048575,  /* cap on desc.max_requests (20-bit index) */
    RSD_POOL_DEFAULT_REQUESTS = 1024, /* desc.max_requests when 0 */
    RSD_POOL_DEFAULT_MAX_WAIT_MS = 30000 /* desc.max_wait_ms when 0 (W26 bound) */
};
/* desc.max_wait_ms value that disables the starvation bound. */
#define RSD_POOL_WAIT_FOREVER 0xFFFFFFFFu
/* Largest byte figure accepted anywhere in the pool (256 PiB). */
#define RSD_POOL_MAX_BYTES ((uint64_t)1 << 58)
/* rsd_pool_step() result when no timer is armed. */
#define RSD_POOL_NO_DEADLINE UINT64_MAX

/* A request (sokol-style handle: 0 = invalid, generation in the high bits). */
typedef struct rsd_pool_req { uint32_t id; } rsd_pool_req;
/* One incarnation of a slot's process (index in the low 8 bits, generation
   above). The host echoes it in rsd_pool_on_started/on_exited; a stale one
   (an earlier process in the same slot) is refused. */
typedef struct rsd_pool_proc { uint32_t id; } rsd_pool_proc;

/* Slot states; see STATE MACHINE in the manual. */
typedef enum rsd_pool_slot_state {
    RSD_POOL_SLOT_EMPTY = 0, /* no process, no model, no reservation */
    RSD_POOL_SLOT_STARTING,  /* SPAWN emitted; waiting for rsd_pool_on_started */
    RSD_POOL_SLOT_READY,     /* serving its model */
    RSD_POOL_SLOT_DRAINING,  /* no new admissions; STOP once in-flight reaches 0 */
    RSD_POOL_SLOT_STOPPING,  /* STOP emitted; waiting for rsd_pool_on_exited */
    RSD_POOL_SLOT_FAILED,    /* load failed; STOP emitted; waiting for on_exited */
    RSD_POOL_SLOT_NUM
} rsd_pool_slot_state;

/* Why a slot is stopped (action.why, event.why). */
typedef enum rsd_pool_why {
    RSD_POOL_WHY_NONE = 0,
    RSD_POOL_WHY_EVICT,       /* LRU idle victim, to make room (count or bytes) */
    RSD_POOL_WHY_TTL,         /* idle TTL expired */
    RSD_POOL_WHY_TRIM,        /* rsd_pool_configure lowered the maximum */
    RSD_POOL_WHY_STARVE,      /* drained for a request waiting past max_wait_ms (W26) */
    RSD_POOL_WHY_UNLOAD,      /* rsd_pool_unload */
    RSD_POOL_WHY_SHUTDOWN,    /* rsd_pool_stop */
    RSD_POOL_WHY_LOAD_FAILED, /* rsd_pool_on_started(ok = false) */
    RSD_POOL_WHY_NUM
} rsd_pool_why;

/* Actions pulled with rsd_pool_next_action. */
typedef enum rsd_pool_action_kind {
    RSD_POOL_ACTION_NONE = 0,
    RSD_POOL_ACTION_SPAWN, /* start a process for .model in .slot (reserve .reserve_bytes) */
    RSD_POOL_ACTION_STOP,  /* stop the process in .slot (.why); report rsd_pool_on_exited */
    RSD_POOL_ACTION_GRANT, /* waiting request .req may now be sent to .slot */
    RSD_POOL_ACTION_FAIL,  /* request .req cannot be served (.result); its handle is gone */
    RSD_POOL_ACTION_NUM
} rsd_pool_action_kind;

/* One action. Fields not listed for a kind are 0 / -1 / NULL. */
typedef struct rsd_pool_action {
    rsd_pool_action_kind kind;
    int slot;               /* SPAWN, STOP, GRANT: slot index 0..RSD_POOL_MAX_SLOTS-1 */
    rsd_pool_proc proc;     /* SPAWN, STOP: the process incarnation */
    int model;              /* model index (SPAWN: to load; STOP: being stopped; GRANT/FAIL) */
    const char *model_id;   /* NUL-terminated id of .model (owned by the pool) */
    uint64_t reserve_bytes; /* SPAWN: bytes reserved for the load; STOP: bytes held */
    rsd_pool_why why;       /* STOP */
    rsd_pool_req req;       /* GRANT, FAIL */
    void *user;             /* GRANT, FAIL: the user pointer given to rsd_pool_acquire */
    int result;             /* FAIL: the reason, an RSD_ERR_* (<0) */
} rsd_pool_action;

/* One model of the table (rsd_pool_desc.models or rsd_pool_add_model). */
typedef struct rsd_pool_model_desc {
    const char *id;          /* model id, copied; 1..RSD_POOL_MAX_MODEL_ID-1 bytes */
    uint64_t reserve_bytes;  /* VRAM reserved at claim time; 0 = desc.default_reserve_bytes */
    uint32_t ttl_ms;         /* unload after this long idle since the last request finished; 0 = never */
    uint32_t max_in_flight;  /* concurrent requests per process (llama-server --parallel); 0 = unlimited */
    bool pinned;             /* never evicted, trimmed or TTL-unloaded (only unload/stop stop it) */
} rsd_pool_model_desc;

/* Pool configuration; zeroed means defaults. */
typedef struct rsd_pool_desc {
    int max_slots;                 /* resident processes; 0 = 1; clamped to 1..RSD_POOL_MAX_SLOTS */
    uint32_t max_requests;         /* waiting + running requests tracked; 0 = RSD_POOL_DEFAULT_REQUESTS */
    uint32_t max_waiting;          /* waiting requests (queue capacity); 0 = max_requests */
    uint64_t vram_budget_bytes;    /* byte budget for all reservations; 0 = none (count only) */
    uint64_t default_reserve_bytes;/* reservation of a model that gives none; 0 = 0 */
    uint32_t max_wait_ms;          /* W26 starvation bound; 0 = default; RSD_POOL_WAIT_FOREVER = off */
    uint32_t event_log;            /* entries in the event-log ring; 0 = no log */
    const rsd_pool_model_desc *models; /* initial model table (may be NULL) */
    int num_models;                /* entries in models */
    rsd_allocator allocator;       /* zeroed = RSD_DEFAULT_ALLOC/FREE */
    rsd_logger logger;             /* zeroed = silent */
} rsd_pool_desc;

/* Event-log entry kinds (for audits such as "only idle slots were evicted"). */
typedef enum rsd_pool_event_kind {
    RSD_POOL_EV_NONE = 0,
    RSD_POOL_EV_CLAIM,       /* slot claimed for a model (SPAWN emitted) */
    RSD_POOL_EV_READY,       /* load finished */
    RSD_POOL_EV_LOAD_FAILED, /* load failed */
    RSD_POOL_EV_DRAIN,       /* slot put in DRAINING (.why STARVE or UNLOAD) */
    RSD_POOL_EV_STOP,        /* STOP emitted (.why) */
    RSD_POOL_EV_EXITED,      /* process gone after a STOP */
    RSD_POOL_EV_CRASHED,     /* process gone without a STOP */
    RSD_POOL_EV_NUM
} rsd_pool_event_kind;

/* One event-log entry: the slot as it was when the decision was made. */
typedef struct rsd_pool_event {
    rsd_pool_event_kind kind;
    rsd_pool_why why;
    int slot, model;
    uint32_t in_flight;     /* in-flight count at that moment */
    bool pinned;
    uint64_t reserve_bytes;
    uint64_t now_ms;
    uint64_t clock;         /* pool logical clock */
} rsd_pool_event;

/* Per-slot part of rsd_pool_stats. */
typedef struct rsd_pool_slot_info {
    rsd_pool_slot_state state;
    int model;                /* -1 when none */
    const char *model_id;     /* NULL when none */
    rsd_pool_proc proc;
    uint32_t in_flight;
    uint64_t reserve_bytes;
    uint64_t last_use;        /* logical clock of the last use (LRU key) */
    uint64_t idle_deadline_ms;/* TTL unload time when idle, else RSD_POOL_NO_DEADLINE */
    uint32_t ttl_ms;
    bool pinned;
    int64_t pid;              /* whatever the host stored with rsd_pool_set_pid; 0 = none */
} rsd_pool_slot_info;

/* Snapshot of the pool (W34: complete, every slot, plus lifetime counters). */
typedef struct rsd_pool_stats {
    int max_slots, live_slots;  /* live = STARTING + READY + DRAINING */
    int occupied_slots;         /* every non-EMPTY slot */
    bool stopped;
    uint32_t waiting, running;  /* requests queued / granted and not released */
    uint32_t preloads;          /* rsd_pool_preload loads still queued */
    uint32_t models_waiting;    /* models waiting for a slot */
    uint64_t reserved_bytes;    /* sum of slot reservations (STOPPING included) */
    uint64_t budget_bytes;      /* effective budget; 0 = unlimited */
    uint64_t foreign_bytes;     /* measured VRAM used by others */
    uint64_t clock;
    /* lifetime counters */
    uint64_t acquires, grants_immediate, grants_queued, waits, cancels, releases;
    uint64_t spawns, readies, load_failures, crashes, exits;
    uint64_t evictions, ttl_expiries, trims, starve_drains, unloads, fails;
    uint64_t queue_full, no_fit, max_wait_ms, events_dropped;
    rsd_pool_slot_info slots[RSD_POOL_MAX_SLOTS];
} rsd_pool_stats;

/* Per-model snapshot. */
typedef struct rsd_pool_model_info {
    const char *id;
    uint64_t reserve_bytes;
    uint32_t ttl_ms, max_in_flight;
    bool pinned;
    int slot;                 /* -1 when not resident/claimed */
    rsd_pool_slot_state state;/* state of that slot, EMPTY when none */
    uint32_t waiting;         /* queued requests for this model */
    uint32_t running;         /* in-flight on its slot */
} rsd_pool_model_info;

/* rsd_pool_unload flags. */
enum {
    RSD_POOL_UNLOAD_REFUSE_BUSY = 0, /* default: RSD_ERR_POOL_BUSY if any target is busy */
    RSD_POOL_UNLOAD_DRAIN = 1        /* busy targets drain (no new work), then stop */
};

typedef struct rsd_pool rsd_pool;

/* Create a pool (the only allocation); NULL on a bad desc or no memory. */
RSD_API rsd_pool *rsd_pool_create(const rsd_pool_desc *desc);
/* Free the pool. Processes are the host's: call rsd_pool_stop and reap first. */
RSD_API void rsd_pool_destroy(rsd_pool *pool);
/* Add a model; returns its index (>= 0) or RSD_ERR_ARG / RSD_ERR_CAPACITY. */
RSD_API int rsd_pool_add_model(rsd_pool *pool, const rsd_pool_model_desc *model);
/* Index of the model with this id, or RSD_ERR_NOT_FOUND. */
RSD_API int rsd_pool_find_model(const rsd_pool *pool, rsd_str id);
/* Change a model's pin; pinning never stops anything, unpinning may let it be evicted. */
RSD_API int rsd_pool_set_pinned(rsd_pool *pool, int model, bool pinned, uint64_t now_ms);
/* Ask for a request on model: RSD_OK (granted now; *slot set, in-flight counted),
   RSD_PENDING (queued; wait for GRANT/FAIL on *req) or <0 (nothing to release). */
RSD_API int rsd_pool_acquire(rsd_pool *pool, int model, uint64_t now_ms, void *user,
                             rsd_pool_req *req, int *slot);
/* Load model and leave it resident without a request (P9; boot policy P37): RSD_OK
   when it is already READY or STARTING, RSD_PENDING when queued, <0 as acquire. */
RSD_API int rsd_pool_preload(rsd_pool *pool, int model, uint64_t now_ms);
/* A granted request finished: in-flight--, LRU clock and idle deadline updated. */
RSD_API int rsd_pool_release(rsd_pool *pool, rsd_pool_req req, uint64_t now_ms);
/* The client went away: drop a waiting request, or release a granted one. */
RSD_API int rsd_pool_cancel(rsd_pool *pool, rsd_pool_req req, uint64_t now_ms);
/* Report the end of a load started by SPAWN: ok = healthy; !ok = failed (pool emits STOP). */
RSD_API int rsd_pool_on_started(rsd_pool *pool, rsd_pool_proc proc, bool ok, uint64_t now_ms);
/* Report that a slot's process is gone (after STOP, or a crash); frees slot and reservation. */
RSD_API int rsd_pool_on_exited(rsd_pool *pool, rsd_pool_proc proc, uint64_t now_ms);
/* Replace a slot's claim-time reservation with the measured figure (P20, W23). */
RSD_API int rsd_pool_set_reserved(rsd_pool *pool, rsd_pool_proc proc, uint64_t bytes,
                                  uint64_t now_ms);
/* Measured VRAM: total_bytes (0 = unknown) and bytes used by others (W23). */
RSD_API int rsd_pool_set_vram(rsd_pool *pool, uint64_t total_bytes, uint64_t foreign_bytes,
                              uint64_t now_ms);
/* Store the host's pid (or any id) for the process in proc, shown in stats. */
RSD_API int rsd_pool_set_pid(rsd_pool *pool, rsd_pool_proc proc, int64_t pid);
/* Pull the next action (STOPs and SPAWNs first, then GRANT/FAIL); false when none. */
RSD_API bool rsd_pool_next_action(rsd_pool *pool, rsd_pool_action *action);
/* Run timers (idle TTL, W26 wait bound); returns the next deadline or RSD_POOL_NO_DEADLINE. */
RSD_API uint64_t rsd_pool_step(rsd_pool *pool, uint64_t now_ms);
/* Set the maximum number of slots (clamped 1..16) and stop idle excess slots (LRU first). */
RSD_API int rsd_pool_configure(rsd_pool *pool, int max_slots, uint64_t now_ms);
/* Unload model (-1 = every model): RSD_OK (stopping), RSD_PENDING (draining), <0. */
RSD_API int rsd_pool_unload(rsd_pool *pool, int model, int flags, uint64_t now_ms);
/* Stop everything: FAIL every request, STOP every process, refuse later work. */
RSD_API int rsd_pool_stop(rsd_pool *pool, uint64_t now_ms);
/* Fill a complete snapshot (W34). */
RSD_API void rsd_pool_query_stats(const rsd_pool *pool, rsd_pool_stats *stats);
/* Fill a per-model snapshot; RSD_ERR_ARG for a bad index. */
RSD_API int rsd_pool_query_model(const rsd_pool *pool, int model, rsd_pool_model_info *info);
/* Pull the oldest event-log entry; false when empty (or no log configured). */
RSD_API bool rsd_pool_next_event(rsd_pool *pool, rsd_pool_event *event);
/* Slot index of a process handle (its low 8 bits); -1 for an invalid handle. */
RSD_API int rsd_pool_proc_slot(rsd_pool_proc proc);
/* Names for enums (never NULL). */
RSD_API const char *rsd_pool_slot_state_name(int state);
/* Name of an rsd_pool_why value (never NULL). */
RSD_API const char *rsd_pool_why_name(int why);

/* ==== >>pool end ========================================================== */

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* RESIDENCY_H_INCLUDED */

/* ========================================================================== */
/* IMPLEMENTATION                                                             */
/* ========================================================================== */
#if defined(RESIDENCY_IMPLEMENTATION) && !defined(RESIDENCY_IMPL_INCLUDED)
#define RESIDENCY_IMPL_INCLUDED 1

#include <string.h>
#include <stdio.h>
#include <stdarg.h>

#ifndef RSD_ASSERT
#include <assert.h>
#define RSD_ASSERT(c) assert(c)
#endif
#if defined(RSD_DEFAULT_ALLOC) != defined(RSD_DEFAULT_FREE)
#error "residency.h: define both RSD_DEFAULT_ALLOC and RSD_DEFAULT_FREE, or neither"
#endif
#if !defined(RSD_DEFAULT_ALLOC) && !defined(RSD_NO_MALLOC)
#include <stdlib.h>
#define RSD_DEFAULT_ALLOC(sz, u) ((void)(u), malloc(sz))
#define RSD_DEFAULT_FREE(p, u) ((void)(u), free(p))
#endif
#ifndef RSD_SNPRINTF
#define RSD_SNPRINTF snprintf
#endif
#ifndef RSDI_UNUSED
#define RSDI_UNUSED(x) ((void)(x))
#endif
#ifndef RSDI_STR2
#define RSDI_STR2(x) #x
#define RSDI_STR1(x) RSDI_STR2(x)
#define RSDI_WHERE __FILE__ ":" RSDI_STR1(__LINE__)
#endif
/* Internal functions: static, and quiet when a build does not use them. */
#ifndef RSDI_PRIVATE
#if defined(__GNUC__) || defined(__clang__)
#define RSDI_PRIVATE static __attribute__((unused))
#else
#define RSDI_PRIVATE static
#endif
#endif
#if defined(__GNUC__) || defined(__clang__)
#define RSDI_LIKELY(x) __builtin_expect(!!(x), 1)
#define RSDI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RSDI_LIKELY(x) (x)
#define RSDI_UNLIKELY(x) (x)
#endif

/* ==== >>util: results, strings, overflow-checked sizes ==================== */
RSD_API const char *rsd_result_str(int result) {
    switch (result) {
#ifdef RSD_NO_ERROR_STRINGS
#define RSDI_X(name, val, str) case val: return #name;
#else
#define RSDI_X(name, val, str) case val: return str;
#endif
    RSD_RESULTS(RSDI_X)
#undef RSDI_X
    default: return result > 0 ? "pending" : "unknown error";
    }
}

RSD_API const char *rsd_result_name(int result) {
    switch (result) {
#define RSDI_X(name, val, str) case val: return #name;
    RSD_RESULTS(RSDI_X)
#undef RSDI_X
    default: return result > 0 ? "PENDING" : "ERR_UNKNOWN";
    }
}

RSD_API const char *rsd_log_item_name(uint32_t item) {
    static const char *const names[] = {
#define RSDI_X(name, str) #name,
        RSD_LOG_ITEMS(RSDI_X)
#undef RSDI_X
        "NUM"};
    return item < (uint32_t)RSD_LOGITEM_NUM ? names[item] : "UNKNOWN";
}

RSD_API rsd_str rsd_str_c(const char *s) {
    rsd_str v;
    v.ptr = s ? s : "";
    v.len = s ? strlen(s) : 0;
    return v;
}

RSD_API bool rsd_str_eq(rsd_str a, rsd_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

RSD_API bool rsd_str_eq_c(rsd_str a, const char *s) { return rsd_str_eq(a, rsd_str_c(s)); }

/* a + b into *out; false on overflow (then *out is untouched). */
RSDI_PRIVATE bool rsdi_size_add(size_t a, size_t b, size_t *out) {
    if (a > (size_t)-1 - b) return false;
    *out = a + b;
    return true;
}

/* a * b into *out; false on overflow (then *out is untouched). */
RSDI_PRIVATE bool rsdi_size_mul(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > (size_t)-1 / a) return false;
    *out = a * b;
    return true;
}

/* ==== >>alloc ============================================================= */
/* Checks the both-or-neither rule; RSD_OK or RSD_ERR_ARG. */
RSDI_PRIVATE int rsdi_allocator_check(const rsd_allocator *a) {
    if (!a) return RSD_OK;
    if ((a->alloc_fn == NULL) != (a->free_fn == NULL)) return RSD_ERR_ARG;
#ifdef RSD_NO_MALLOC
    if (!a->alloc_fn) return RSD_ERR_ARG;
#endif
    return RSD_OK;
}

RSDI_PRIVATE void *rsdi_malloc(const rsd_allocator *a, size_t size) {
    if (size == 0) size = 1;
    if (a && a->alloc_fn) return a->alloc_fn(size, a->user);
#ifdef RSD_NO_MALLOC
    return NULL;
#else
    return RSD_DEFAULT_ALLOC(size, a ? a->user : NULL);
#endif
}

RSDI_PRIVATE void rsdi_free(const rsd_allocator *a, void *p) {
    if (!p) return;
    if (a && a->free_fn) {
        a->free_fn(p, a->user);
        return;
    }
#ifndef RSD_NO_MALLOC
    RSD_DEFAULT_FREE(p, a ? a->user : NULL);
#endif
}

/* ==== >>log =============================================================== */
RSDI_PRIVATE void rsdi_log(const rsd_logger *lg, int level, uint32_t item, const char *msg,
                     const char *where) {
    if (lg && lg->fn) lg->fn(lg->user, level, item, msg, where);
}

/* printf-style log into a fixed stack buffer; never allocates. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 5, 6)))
#endif
RSDI_PRIVATE void rsdi_logf(const rsd_logger *lg, int level, uint32_t item, const char *where,
                            const char *fmt, ...) {
    char buf[512];
    va_list ap;
    if (!lg || !lg->fn) return;
    va_start(ap, fmt);
    (void)vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    lg->fn(lg->user, level, item, buf, where);
}

/* ==== >>json (implementation) ============================================= */

/* ==== >>json end ========================================================== */

/* ==== >>reconcile (implementation) ======================================== */

/* ==== >>reconcile end ===================================================== */

/* ==== >>fit (implementation) ============================================== */

/* ==== >>fit end =========================================================== */

/* ==== >>pool (implementation) ============================================= */
#define RSDI_POOL_NIL 0xFFFFFFFFu
#define RSDI_POOL_IDX_BITS 20
#define RSDI_POOL_IDX_MASK ((1u << RSDI_POOL_IDX_BITS) - 1u)
#define RSDI_POOL_GEN_MASK 0xFFFu
#define RSDI_POOL_UNLIMITED ((int64_t)1 << 62)

enum { RSDI_PREQ_FREE = 0, RSDI_PREQ_WAITING, RSDI_PREQ_RUNNING, RSDI_PREQ_FAILED,
       RSDI_PREQ_ORPHAN };
enum { RSDI_PNTF_NONE = 0, RSDI_PNTF_GRANT, RSDI_PNTF_FAIL };

typedef struct rsdi_pool_reqent {
    uint32_t gen;          /* 1..4095 while live */
    uint8_t state;         /* RSDI_PREQ_* */
    uint8_t ntf;           /* RSDI_PNTF_*: on the notify list */
    uint8_t preload;       /* rsd_pool_preload: no handle, freed when granted */
    int16_t model;
    int8_t slot;
    int result;            /* FAIL reason */
    uint64_t enq_ms;
    void *user;
} rsdi_pool_reqent;

/* List links live apart from the entries (structure of arrays): walking a model's
   queue or the notify list then chases 8-byte links that stay in cache, and the
   entry loads they lead to are independent, so they overlap. */
typedef struct rsdi_pool_link { uint32_t prev, next; } rsdi_pool_link;

typedef struct rsdi_pool_model {
    char id[RSD_POOL_MAX_MODEL_ID];
    uint64_t reserve_bytes;
    uint32_t ttl_ms, max_in_flight;
    bool pinned;
    int slot;                        /* claimed slot or -1 */
    uint32_t wq_head, wq_tail, wq_count;
    int want_prev, want_next;        /* list of models waiting for a slot */
    bool wanting;
} rsdi_pool_model;

typedef struct rsdi_pool_slot {
    rsd_pool_slot_state state;
    int model;
    uint32_t gen;                    /* process incarnation, 1..2^24-1 */
    uint32_t in_flight;
    uint64_t reserve_bytes;
    uint64_t last_use;
    uint64_t idle_deadline_ms;
    int64_t pid;
    rsd_pool_action_kind pending;    /* SPAWN or STOP waiting to be pulled */
    rsd_pool_why why;
    int act_next;                    /* slot action FIFO link */
    bool in_act;
    bool drain_after_start;          /* unload(DRAIN) arrived while STARTING */
} rsdi_pool_slot;

struct rsd_pool {
    rsd_allocator alloc;
    rsd_logger logger;
    int max_slots;
    uint32_t max_requests, max_waiting, max_wait_ms;
    uint64_t budget_bytes, default_reserve, measured_total, foreign_bytes;
    bool stopped;
    uint64_t clock, now_ms;
    rsdi_pool_model models[RSD_POOL_MAX_MODELS];
    int num_models;
    rsdi_pool_slot slots[RSD_POOL_MAX_SLOTS];
    int want_head, want_tail;
    int act_head, act_tail;
    uint32_t ntf_head, ntf_tail;
    rsdi_pool_reqent *reqs;
    rsdi_pool_link *wq;    /* model wait queue links; wq[i].next = free list link */
    rsdi_pool_link *nt;    /* notify list links */
    uint32_t free_head, free_tail;
    uint32_t waiting, running, models_waiting, preloads;
    uint64_t reserved_total;
    rsd_pool_event *evlog;
    uint32_t ev_cap, ev_head, ev_count;
    rsd_pool_stats ctr; /* counters only (slots[] unused here) */
    uint64_t work;      /* white-box: model/slot visits in admission passes (W25 tests) */
    bool trim_pending;  /* live slots above max after configure (busy excess) */
};

/* a + b saturating at RSD_POOL_NO_DEADLINE (times come from the host). */
RSDI_PRIVATE uint64_t rsdi_pool_at(uint64_t a, uint64_t b) {
    return a > RSD_POOL_NO_DEADLINE - b ? RSD_POOL_NO_DEADLINE : a + b;
}

RSDI_PRIVATE int rsdi_pool_norm_max(int v) {
    if (v < 1) return 1;
    return v > RSD_POOL_MAX_SLOTS ? RSD_POOL_MAX_SLOTS : v;
}

/* Effective byte budget: min(configured, measured); 0 = unlimited. */
RSDI_PRIVATE uint64_t rsdi_pool_budget(const rsd_pool *p) {
    if (p->budget_bytes && p->measured_total)
        return p->budget_bytes < p->measured_total ? p->budget_bytes : p->measured_total;
    return p->budget_bytes ? p->budget_bytes : p->measured_total;
}

RSDI_PRIVATE void rsdi_pool_event_log(rsd_pool *p, rsd_pool_event_kind kind, rsd_pool_why why,
                                      int slot) {
    rsd_pool_event *e;
    const rsdi_pool_slot *s = &p->slots[slot];
    if (!p->ev_cap) return;
    if (p->ev_count == p->ev_cap) {
        p->ev_head = (p->ev_head + 1) % p->ev_cap;
        p->ev_count--;
        p->ctr.events_dropped++;
    }
    e = &p->evlog[(p->ev_head + p->ev_count) % p->ev_cap];
    p->ev_count++;
    e->kind = kind;
    e->why = why;
    e->slot = slot;
    e->model = s->model;
    e->in_flight = s->in_flight;
    e->pinned = s->model >= 0 && p->models[s->model].pinned;
    e->reserve_bytes = s->reserve_bytes;
    e->now_ms = p->now_ms;
    e->clock = p->clock;
}

/* ---- request table ------------------------------------------------------- */
RSDI_PRIVATE rsd_pool_req rsdi_pool_handle(const rsd_pool *p, uint32_t idx) {
    rsd_pool_req h;
    h.id = (p->reqs[idx].gen << RSDI_POOL_IDX_BITS) | idx;
    return h;
}

RSDI_PRIVATE rsdi_pool_reqent *rsdi_pool_lookup(rsd_pool *p, rsd_pool_req h, uint32_t *idx) {
    uint32_t i = h.id & RSDI_POOL_IDX_MASK, g = h.id >> RSDI_POOL_IDX_BITS;
    if (h.id == 0 || i >= p->max_requests) return NULL;
    if (p->reqs[i].gen != g || p->reqs[i].state == RSDI_PREQ_FREE) return NULL;
    *idx = i;
    return &p->reqs[i];
}

RSDI_PRIVATE uint32_t rsdi_pool_req_alloc(rsd_pool *p) {
    uint32_t i = p->free_head;
    rsdi_pool_reqent *r;
    if (i == RSDI_POOL_NIL) return i;
    r = &p->reqs[i];
    p->free_head = p->wq[i].next;
    if (p->free_head == RSDI_POOL_NIL) p->free_tail = RSDI_POOL_NIL;
    r->gen = (r->gen & RSDI_POOL_GEN_MASK) + 1u;
    if (r->gen > RSDI_POOL_GEN_MASK) r->gen = 1;
    p->wq[i].prev = p->wq[i].next = p->nt[i].prev = p->nt[i].next = RSDI_POOL_NIL;
    r->ntf = RSDI_PNTF_NONE;
    r->preload = 0;
    r->slot = -1;
    r->result = 0;
    return i;
}

/* FIFO free list: a freed entry is reused last, so generations wrap slowly. */
RSDI_PRIVATE void rsdi_pool_req_free(rsd_pool *p, uint32_t i) {
    rsdi_pool_reqent *r = &p->reqs[i];
    r->state = RSDI_PREQ_FREE;
    r->user = NULL;
    p->wq[i].next = RSDI_POOL_NIL;
    if (p->free_tail == RSDI_POOL_NIL) p->free_head = i;
    else p->wq[p->free_tail].next = i;
    p->free_tail = i;
}

/* ---- notify list (pending GRANT / FAIL) ---------------------------------- */
RSDI_PRIVATE void rsdi_pool_ntf_push(rsd_pool *p, uint32_t i, int kind) {
    rsdi_pool_reqent *r = &p->reqs[i];
    r->ntf = (uint8_t)kind;
    p->nt[i].next = RSDI_POOL_NIL;
    p->nt[i].prev = p->ntf_tail;
    if (p->ntf_tail == RSDI_POOL_NIL) p->ntf_head = i;
    else p->nt[p->ntf_tail].next = i;
    p->ntf_tail = i;
}

RSDI_PRIVATE void rsdi_pool_ntf_unlink(rsd_pool *p, uint32_t i) {
    rsdi_pool_reqent *r = &p->reqs[i];
    rsdi_pool_link *l = &p->nt[i];
    if (r->ntf == RSDI_PNTF_NONE) return;
    if (l->prev != RSDI_POOL_NIL) p->nt[l->prev].next = l->next;
    else p->ntf_head = l->next;
    if (l->next != RSDI_POOL_NIL) p->nt[l->next].prev = l->prev;
    else p->ntf_tail = l->prev;
    r->ntf = RSDI_PNTF_NONE;
    l->prev = l->next = RSDI_POOL_NIL;
}

/* ---- models waiting for a slot (FIFO by arrival of their first waiter) ---- */
RSDI_PRIVATE void rsdi_pool_want_add(rsd_pool *p, int m) {
    rsdi_pool_model *md = &p->models[m];
    if (md->wanting) return;
    md->wanting = true;
    md->want_next = -1;
    md->want_prev = p->want_tail;
    if (p->want_tail < 0) p->want_head = m;
    else p->models[p->want_tail].want_next = m;
    p->want_tail = m;
    p->models_waiting++;
}

RSDI_PRIVATE void rsdi_pool_want_del(rsd_pool *p, int m) {
    rsdi_pool_model *md = &p->models[m];
    if (!md->wanting) return;
    if (md->want_prev >= 0) p->models[md->want_prev].want_next = md->want_next;
    else p->want_head = md->want_next;
    if (md->want_next >= 0) p->models[md->want_next].want_prev = md->want_prev;
    else p->want_tail = md->want_prev;
    md->wanting = false;
    md->want_prev = md->want_next = -1;
    p->models_waiting--;
}

/* ---- per-model wait queues ------------------------------------------------ */
RSDI_PRIVATE void rsdi_pool_wq_push(rsd_pool *p, int m, uint32_t i) {
    rsdi_pool_model *md = &p->models[m];
    p->wq[i].next = RSDI_POOL_NIL;
    p->wq[i].prev = md->wq_tail;
    if (md->wq_tail == RSDI_POOL_NIL) md->wq_head = i;
    else p->wq[md->wq_tail].next = i;
    md->wq_tail = i;
    md->wq_count++;
    if (p->reqs[i].preload) p->preloads++;
    else p->waiting++;
}

RSDI_PRIVATE void rsdi_pool_wq_unlink(rsd_pool *p, int m, uint32_t i) {
    rsdi_pool_model *md = &p->models[m];
    rsdi_pool_link *l = &p->wq[i];
    if (l->prev != RSDI_POOL_NIL) p->wq[l->prev].next = l->next;
    else md->wq_head = l->next;
    if (l->next != RSDI_POOL_NIL) p->wq[l->next].prev = l->prev;
    else md->wq_tail = l->prev;
    l->prev = l->next = RSDI_POOL_NIL;
    md->wq_count--;
    if (p->reqs[i].preload) p->preloads--;
    else p->waiting--;
    if (md->wq_count == 0) rsdi_pool_want_del(p, m);
}

/* ---- slot actions (FIFO of slots with one pending SPAWN or STOP) ---------- */
RSDI_PRIVATE void rsdi_pool_act_del(rsd_pool *p, int s) {
    int *link = &p->act_head, prev = -1;
    if (!p->slots[s].in_act) return;
    while (*link >= 0 && *link != s) {
        prev = *link;
        link = &p->slots[*link].act_next;
    }
    if (*link == s) {
        *link = p->slots[s].act_next;
        if (p->act_tail == s) p->act_tail = prev;
    }
    p->slots[s].in_act = false;
    p->slots[s].pending = RSD_POOL_ACTION_NONE;
}

RSDI_PRIVATE void rsdi_pool_act_push(rsd_pool *p, int s, rsd_pool_action_kind kind) {
    rsdi_pool_act_del(p, s);
    p->slots[s].pending = kind;
    p->slots[s].in_act = true;
    p->slots[s].act_next = -1;
    if (p->act_tail < 0) p->act_head = s;
    else p->slots[p->act_tail].act_next = s;
    p->act_tail = s;
}

/* ---- grants and failures -------------------------------------------------- */
RSDI_PRIVATE void rsdi_pool_grant(rsd_pool *p, int s, uint32_t i) {
    rsdi_pool_reqent *r = &p->reqs[i];
    rsdi_pool_slot *sl = &p->slots[s];
    uint64_t waited = p->now_ms > r->enq_ms ? p->now_ms - r->enq_ms : 0;
    rsdi_pool_wq_unlink(p, r->model, i);
    if (r->preload) { /* the load it asked for is done; nothing runs */
        rsdi_pool_req_free(p, i);
        sl->last_use = ++p->clock;
        return;
    }
    r->state = RSDI_PREQ_RUNNING;
    r->slot = (int8_t)s;
    sl->in_flight++;
    sl->last_use = ++p->clock;
    sl->idle_deadline_ms = RSD_POOL_NO_DEADLINE;
    p->running++;
    p->ctr.grants_queued++;
    if (waited > p->ctr.max_wait_ms) p->ctr.max_wait_ms = waited;
    rsdi_pool_ntf_push(p, i, RSDI_PNTF_GRANT);
}

/* Grant the head waiters of the slot's model while it has room. O(grants). */
RSDI_PRIVATE void rsdi_pool_grant_waiters(rsd_pool *p, int s) {
    rsdi_pool_slot *sl = &p->slots[s];
    rsdi_pool_model *md = &p->models[sl->model];
    uint32_t ahead = md->wq_head;
    int k;
    /* Long queues: touch entries a few links ahead (the links are dense and cached,
       the entries are not), so their cache misses overlap. */
    for (k = 0; k < 8 && ahead != RSDI_POOL_NIL; k++) ahead = p->wq[ahead].next;
    while (md->wq_head != RSDI_POOL_NIL &&
           (md->max_in_flight == 0 || sl->in_flight < md->max_in_flight)) {
#if defined(__GNUC__) || defined(__clang__)
        if (ahead != RSDI_POOL_NIL) {
            __builtin_prefetch(&p->reqs[ahead], 1);
            ahead = p->wq[ahead].next;
        }
#endif
        rsdi_pool_grant(p, s, md->wq_head);
    }
}

/* Fail one request (waiting or running) with reason; it leaves its queue now and its
   handle dies when the FAIL is pulled (or at once on release/cancel). */
RSDI_PRIVATE void rsdi_pool_fail_req(rsd_pool *p, uint32_t i, int result) {
    rsdi_pool_reqent *r = &p->reqs[i];
    if (r->state == RSDI_PREQ_WAITING && r->preload) { /* nobody to tell */
        rsdi_pool_wq_unlink(p, r->model, i);
        rsdi_pool_req_free(p, i);
        return;
    }
    if (r->state == RSDI_PREQ_WAITING) {
        rsdi_pool_wq_unlink(p, r->model, i);
    } else if (r->state == RSDI_PREQ_RUNNING) {
        rsdi_pool_ntf_unlink(p, i);
        p->slots[(int)r->slot].in_flight--;
        p->running--;
    } else if (r->state == RSDI_PREQ_ORPHAN) {
        rsdi_pool_ntf_unlink(p, i);
    } else {
        return;
    }
    r->state = RSDI_PREQ_FAILED;
    r->slot = -1;
    r->result = result;
    p->ctr.fails++;
    rsdi_pool_ntf_push(p, i, RSDI_PNTF_FAIL);
}

RSDI_PRIVATE void rsdi_pool_fail_model_waiters(rsd_pool *p, int m, int result) {
    while (p->models[m].wq_head != RSDI_POOL_NIL)
        rsdi_pool_fail_req(p, p->models[m].wq_head, result);
}

/* ---- slot transitions ----------------------------------------------------- */
RSDI_PRIVATE rsd_pool_proc rsdi_pool_proc_of(const rsd_pool *p, int s) {
    rsd_pool_proc h;
    h.id = (p->slots[s].gen << 8) | (uint32_t)s;
    return h;
}

RSDI_PRIVATE void rsdi_pool_claim(rsd_pool *p, int s, int m) {
    rsdi_pool_slot *sl = &p->slots[s];
    sl->gen = (sl->gen + 1u) & 0xFFFFFFu;
    if (sl->gen == 0) sl->gen = 1;
    sl->state = RSD_POOL_SLOT_STARTING;
    sl->model = m;
    sl->in_flight = 0;
    sl->reserve_bytes = p->models[m].reserve_bytes;
    sl->last_use = ++p->clock;
    sl->idle_deadline_ms = RSD_POOL_NO_DEADLINE;
    sl->pid = 0;
    sl->drain_after_start = false;
    sl->why = RSD_POOL_WHY_NONE;
    p->reserved_total += sl->reserve_bytes;
    p->models[m].slot = s;
    rsdi_pool_want_del(p, m);
    p->ctr.spawns++;
    rsdi_pool_act_push(p, s, RSD_POOL_ACTION_SPAWN);
    rsdi_pool_event_log(p, RSD_POOL_EV_CLAIM, RSD_POOL_WHY_NONE, s);
}

/* The slot's process is gone (or never existed): back to EMPTY, reservation freed,
   running requests orphaned, the model's waiters go back to wanting a slot. */
RSDI_PRIVATE void rsdi_pool_vacate(rsd_pool *p, int s) {
    rsdi_pool_slot *sl = &p->slots[s];
    int m = sl->model;
    rsdi_pool_act_del(p, s);
    p->reserved_total -= sl->reserve_bytes;
    sl->reserve_bytes = 0;
    sl->state = RSD_POOL_SLOT_EMPTY;
    sl->model = -1;
    sl->idle_deadline_ms = RSD_POOL_NO_DEADLINE;
    sl->pid = 0;
    sl->drain_after_start = false;
    sl->last_use = ++p->clock;
    if (sl->in_flight) {
        /* Orphan what still runs there: its release is then only bookkeeping. O(reqs)
           but only on a crash with requests in flight. */
        uint32_t i;
        for (i = 0; i < p->max_requests && sl->in_flight; i++) {
            rsdi_pool_reqent *r = &p->reqs[i];
            if (r->state == RSDI_PREQ_RUNNING && r->slot == s) {
                sl->in_flight--;
                p->running--;
                r->slot = -1;
                if (r->ntf == RSDI_PNTF_GRANT) { /* the host never saw it: tell it */
                    rsdi_pool_ntf_unlink(p, i);
                    r->state = RSDI_PREQ_FAILED;
                    r->result = RSD_ERR_POOL_CRASHED;
                    p->ctr.fails++;
                    rsdi_pool_ntf_push(p, i, RSDI_PNTF_FAIL);
                } else {
                    r->state = RSDI_PREQ_ORPHAN;
                }
            }
        }
        sl->in_flight = 0;
    }
    if (m >= 0) {
        p->models[m].slot = -1;
        if (p->models[m].wq_count) rsdi_pool_want_add(p, m);
    }
}

RSDI_PRIVATE void rsdi_pool_stop_slot(rsd_pool *p, int s, rsd_pool_why why) {
    rsdi_pool_slot *sl = &p->slots[s];
    if (sl->state == RSD_POOL_SLOT_STARTING && sl->pending == RSD_POOL_ACTION_SPAWN) {
        /* The host never saw the SPAWN: there is no process to stop. */
        rsdi_pool_event_log(p, RSD_POOL_EV_STOP, why, s);
        p->ctr.spawns--;
        rsdi_pool_vacate(p, s);
        return;
    }
    sl->state = RSD_POOL_SLOT_STOPPING;
    sl->why = why;
    sl->idle_deadline_ms = RSD_POOL_NO_DEADLINE;
    rsdi_pool_act_push(p, s, RSD_POOL_ACTION_STOP);
    rsdi_pool_event_log(p, RSD_POOL_EV_STOP, why, s);
    switch (why) {
    case RSD_POOL_WHY_EVICT: p->ctr.evictions++; break;
    case RSD_POOL_WHY_TTL: p->ctr.ttl_expiries++; break;
    case RSD_POOL_WHY_TRIM: p->ctr.trims++; break;
    case RSD_POOL_WHY_UNLOAD: p->ctr.unloads++; break;
    default: break;
    }
    rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_POOL_STOP, RSDI_WHERE,
              "pool: stopping slot %d (%s): %s", s,
              sl->model >= 0 ? p->models[sl->model].id : "-", rsd_pool_why_name((int)why));
}

RSDI_PRIVATE bool rsdi_pool_idle(const rsd_pool *p, const rsdi_pool_slot *sl) {
    return sl->state == RSD_POOL_SLOT_READY && sl->in_flight == 0 &&
           !p->models[sl->model].pinned;
}

/* Least-recently-used idle, unpinned READY slot not in excl; -1 when none. O(slots). */
RSDI_PRIVATE int rsdi_pool_lru_idle(const rsd_pool *p, uint32_t excl, bool busy_ok) {
    int s, best = -1;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        const rsdi_pool_slot *sl = &p->slots[s];
        if (excl & (1u << s)) continue;
        if (sl->state != RSD_POOL_SLOT_READY || p->models[sl->model].pinned) continue;
        if (!busy_ok && sl->in_flight != 0) continue;
        if (best < 0 || sl->last_use < p->slots[best].last_use) best = s;
    }
    return best;
}

RSDI_PRIVATE int rsdi_pool_count(const rsd_pool *p, bool live_only) {
    int s, n = 0;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        rsd_pool_slot_state st = p->slots[s].state;
        if (st == RSD_POOL_SLOT_EMPTY) continue;
        if (live_only && (st == RSD_POOL_SLOT_STOPPING || st == RSD_POOL_SLOT_FAILED)) continue;
        n++;
    }
    return n;
}

/* Can model m never be admitted as things stand? RSD_ERR_POOL_NO_FIT when it exceeds
   the whole budget, RSD_ERR_POOL_PINNED when pinned residents leave no slot or bytes
   (pins are never evicted, so waiting would be forever); else RSD_OK. O(slots). */
RSDI_PRIVATE int rsdi_pool_never_fits(const rsd_pool *p, int m) {
    uint64_t budget = rsdi_pool_budget(p), pinned_b = 0;
    int s, pinned_s = 0;
    if (budget && p->models[m].reserve_bytes > budget) return RSD_ERR_POOL_NO_FIT;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        const rsdi_pool_slot *sl = &p->slots[s];
        if (sl->model < 0 || sl->model == m || !p->models[sl->model].pinned) continue;
        if (sl->state != RSD_POOL_SLOT_STARTING && sl->state != RSD_POOL_SLOT_READY) continue;
        pinned_s++;
        pinned_b += sl->reserve_bytes;
    }
    if (pinned_s >= p->max_slots) return RSD_ERR_POOL_PINNED;
    if (budget && p->models[m].reserve_bytes + pinned_b > budget) return RSD_ERR_POOL_PINNED;
    return RSD_OK;
}

/* Nobody waits for a slot any more: W26 drains lose their reason, so those slots take
   work again (their queued requests first). O(slots). */
RSDI_PRIVATE void rsdi_pool_undrain(rsd_pool *p) {
    int s;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        rsdi_pool_slot *sl = &p->slots[s];
        if (sl->state != RSD_POOL_SLOT_DRAINING || sl->why != RSD_POOL_WHY_STARVE) continue;
        sl->state = RSD_POOL_SLOT_READY;
        sl->why = RSD_POOL_WHY_NONE;
        rsdi_pool_grant_waiters(p, s);
    }
}

/* Admission pass (P19 + P31..P35 + W21..W26). Visits each model waiting for a slot
   in FIFO order; work is O(models x slots), independent of the number of waiters. */
RSDI_PRIVATE void rsdi_pool_pass(rsd_pool *p) {
    int s, m, next, live;
    int64_t free_s, free_b, pend_s = 0, pend_b = 0, cap;
    uint64_t budget;
    if (p->stopped) return;
    p->work++;
    /* P19 trim: idle excess above max, LRU first; busy excess waits. */
    live = rsdi_pool_count(p, true);
    while (live > p->max_slots && (s = rsdi_pool_lru_idle(p, 0, false)) >= 0) {
        rsdi_pool_stop_slot(p, s, RSD_POOL_WHY_TRIM);
        live--;
    }
    p->trim_pending = live > p->max_slots;
    if (p->want_head < 0) {
        if (p->ctr.starve_drains) rsdi_pool_undrain(p);
        return;
    }
    budget = rsdi_pool_budget(p);
    cap = budget ? (int64_t)budget - (int64_t)(p->foreign_bytes < budget ? p->foreign_bytes : budget)
                 : RSDI_POOL_UNLIMITED;
    free_s = (int64_t)p->max_slots - rsdi_pool_count(p, false);
    free_b = cap - (int64_t)p->reserved_total;
    /* Capacity already on its way out (stopping, or draining toward a stop). */
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        rsd_pool_slot_state st = p->slots[s].state;
        if (st == RSD_POOL_SLOT_STOPPING || st == RSD_POOL_SLOT_FAILED ||
            st == RSD_POOL_SLOT_DRAINING) {
            pend_s++;
            pend_b += (int64_t)p->slots[s].reserve_bytes;
        }
    }
    if (free_s < 0) { pend_s += free_s; free_s = 0; }
    for (m = p->want_head; m >= 0; m = next) {
        rsdi_pool_model *md = &p->models[m];
        int64_t r = (int64_t)md->reserve_bytes, avail_s, avail_b;
        uint32_t picked = 0;
        int victims = 0, v;
        bool starving;
        next = md->want_next;
        p->work++;
        if ((v = rsdi_pool_never_fits(p, m)) < 0) { /* can never fit: fail at once */
            p->ctr.no_fit++;
            rsdi_logf(&p->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_NO_FIT, RSDI_WHERE,
                      "pool: %s (%llu bytes) cannot fit: %s", md->id,
                      (unsigned long long)md->reserve_bytes, rsd_result_str(v));
            rsdi_pool_fail_model_waiters(p, m, v);
            continue;
        }
        if (free_s >= 1 && free_b >= r) { /* empty slot (claim) or grow: P32.2-3 */
            for (s = 0; s < RSD_POOL_MAX_SLOTS; s++)
                if (p->slots[s].state == RSD_POOL_SLOT_EMPTY) break;
            if (s < RSD_POOL_MAX_SLOTS) {
                rsdi_pool_claim(p, s, m);
                free_s--;
                free_b -= r;
                continue;
            }
        }
        avail_s = free_s + pend_s;
        avail_b = free_b + pend_b;
        /* Evict idle LRU slots until count and bytes fit (P32.5, W22). Decide the whole
           set first: evicting idle slots that cannot make enough room is pointless. */
        while ((avail_s < 1 || avail_b < r) && (v = rsdi_pool_lru_idle(p, picked, false)) >= 0) {
            picked |= 1u << v;
            victims++;
            avail_s++;
            avail_b += (int64_t)p->slots[v].reserve_bytes;
        }
        starving = p->max_wait_ms != RSD_POOL_WAIT_FOREVER && md->wq_head != RSDI_POOL_NIL &&
                   p->now_ms >= rsdi_pool_at(p->reqs[md->wq_head].enq_ms, p->max_wait_ms);
        if (avail_s < 1 || avail_b < r) {
            /* W26: past the wait bound, busy LRU slots stop taking new work and drain. */
            uint32_t drain = 0;
            if (starving) {
                while ((avail_s < 1 || avail_b < r) &&
                       (v = rsdi_pool_lru_idle(p, picked | drain, true)) >= 0) {
                    drain |= 1u << v;
                    avail_s++;
                    avail_b += (int64_t)p->slots[v].reserve_bytes;
                }
            }
            if (avail_s < 1 || avail_b < r) continue; /* cannot be covered now: wait */
            for (v = 0; v < RSD_POOL_MAX_SLOTS; v++) {
                if (!(drain & (1u << v))) continue;
                p->slots[v].state = RSD_POOL_SLOT_DRAINING;
                p->slots[v].why = RSD_POOL_WHY_STARVE;
                p->slots[v].idle_deadline_ms = RSD_POOL_NO_DEADLINE;
                p->ctr.starve_drains++;
                rsdi_pool_event_log(p, RSD_POOL_EV_DRAIN, RSD_POOL_WHY_STARVE, v);
                rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_POOL_DRAIN, RSDI_WHERE,
                          "pool: draining slot %d (%s) for %s waiting past %u ms", v,
                          p->models[p->slots[v].model].id, md->id, p->max_wait_ms);
                pend_s++;
                pend_b += (int64_t)p->slots[v].reserve_bytes;
            }
        }
        if (victims) {
            for (v = 0; v < RSD_POOL_MAX_SLOTS; v++) {
                if (!(picked & (1u << v))) continue;
                rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_POOL_EVICT, RSDI_WHERE,
                          "pool: evicting %s for %s", p->models[p->slots[v].model].id, md->id);
                pend_s++;
                pend_b += (int64_t)p->slots[v].reserve_bytes;
                rsdi_pool_stop_slot(p, v, RSD_POOL_WHY_EVICT);
            }
        }
        /* Commit: this model holds the free and outgoing capacity it needs, so later
           models cannot take what is being freed for it (no thrash). */
        {
            int64_t ts = 1, tb = r, d;
            d = free_s < ts ? free_s : ts;
            free_s -= d;
            pend_s -= ts - d;
            if (free_b > 0) {
                d = free_b < tb ? free_b : tb;
                free_b -= d;
                tb -= d;
            }
            pend_b -= tb;
        }
    }
}

/* A slot finished a request (or lost one): refill from its queue, arm TTL, drain. */
RSDI_PRIVATE void rsdi_pool_slot_settled(rsd_pool *p, int s) {
    rsdi_pool_slot *sl = &p->slots[s];
    sl->last_use = ++p->clock;
    if (sl->state == RSD_POOL_SLOT_READY) {
        if (p->models[sl->model].wq_head != RSDI_POOL_NIL) rsdi_pool_grant_waiters(p, s);
        if (sl->in_flight == 0) {
            uint32_t ttl = p->models[sl->model].ttl_ms;
            sl->idle_deadline_ms = ttl ? rsdi_pool_at(p->now_ms, ttl) : RSD_POOL_NO_DEADLINE;
            if (p->want_head >= 0 || p->trim_pending) rsdi_pool_pass(p);
        }
    } else if (sl->state == RSD_POOL_SLOT_DRAINING && sl->in_flight == 0) {
        rsdi_pool_stop_slot(p, s, sl->why == RSD_POOL_WHY_NONE ? RSD_POOL_WHY_UNLOAD : sl->why);
    }
}

/* ---- public --------------------------------------------------------------- */
RSD_API int rsd_pool_proc_slot(rsd_pool_proc proc) {
    return proc.id == 0 || (proc.id & 0xFFu) >= RSD_POOL_MAX_SLOTS ? -1 : (int)(proc.id & 0xFFu);
}

RSD_API const char *rsd_pool_slot_state_name(int state) {
    static const char *const n[] = {"empty", "starting", "ready", "draining", "stopping", "failed"};
    return state >= 0 && state < (int)RSD_POOL_SLOT_NUM ? n[state] : "unknown";
}

RSD_API const char *rsd_pool_why_name(int why) {
    static const char *const n[] = {"none", "evict", "ttl", "trim", "starve", "unload",
                                    "shutdown", "load-failed"};
    return why >= 0 && why < (int)RSD_POOL_WHY_NUM ? n[why] : "unknown";
}

RSDI_PRIVATE int rsdi_pool_model_check(const rsd_pool_model_desc *d) {
    size_t n;
    if (!d || !d->id) return RSD_ERR_ARG;
    n = strlen(d->id);
    if (n == 0 || n >= RSD_POOL_MAX_MODEL_ID) return RSD_ERR_ARG;
    if (d->reserve_bytes > RSD_POOL_MAX_BYTES) return RSD_ERR_ARG;
    return RSD_OK;
}

RSD_API int rsd_pool_add_model(rsd_pool *pool, const rsd_pool_model_desc *d) {
    rsdi_pool_model *md;
    int m;
    if (!pool || rsdi_pool_model_check(d) < 0) {
        if (pool)
            rsdi_log(&pool->logger, RSD_LOG_ERROR, RSD_LOGITEM_POOL_BAD_MODEL,
                     "pool: model id must be 1..127 bytes, reserve <= RSD_POOL_MAX_BYTES",
                     RSDI_WHERE);
        return RSD_ERR_ARG;
    }
    if (rsd_pool_find_model(pool, rsd_str_c(d->id)) >= 0) return RSD_ERR_ARG;
    if (pool->num_models >= RSD_POOL_MAX_MODELS) {
        rsdi_log(&pool->logger, RSD_LOG_ERROR, RSD_LOGITEM_POOL_MODEL_TABLE_FULL,
                 "pool: model table full (RSD_POOL_MAX_MODELS)", RSDI_WHERE);
        return RSD_ERR_CAPACITY;
    }
    m = pool->num_models++;
    md = &pool->models[m];
    memset(md, 0, sizeof *md);
    memcpy(md->id, d->id, strlen(d->id) + 1);
    md->reserve_bytes = d->reserve_bytes ? d->reserve_bytes : pool->default_reserve;
    md->ttl_ms = d->ttl_ms;
    md->max_in_flight = d->max_in_flight;
    md->pinned = d->pinned;
    md->slot = -1;
    md->wq_head = md->wq_tail = RSDI_POOL_NIL;
    md->want_prev = md->want_next = -1;
    return m;
}

RSD_API int rsd_pool_find_model(const rsd_pool *pool, rsd_str id) {
    int m;
    if (!pool || !id.ptr || id.len >= RSD_POOL_MAX_MODEL_ID) return RSD_ERR_NOT_FOUND;
    for (m = 0; m < pool->num_models; m++) {
        const char *s = pool->models[m].id;
        if (strncmp(s, id.ptr, id.len) == 0 && s[id.len] == '\0' &&
            (id.len == 0 || memchr(id.ptr, 0, id.len) == NULL))
            return m;
    }
    return RSD_ERR_NOT_FOUND;
}

RSD_API rsd_pool *rsd_pool_create(const rsd_pool_desc *desc) {
    rsd_pool_desc d;
    rsd_pool *p;
    size_t reqs_bytes, link_bytes, ev_bytes, total, off_reqs, off_wq, off_nt, off_ev;
    uint32_t i;
    int k;
    if (!desc) return NULL;
    d = *desc;
    if (rsdi_allocator_check(&d.allocator) < 0) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOCATOR_HALF, NULL, RSDI_WHERE);
        return NULL;
    }
    if (d.max_requests == 0) d.max_requests = RSD_POOL_DEFAULT_REQUESTS;
    if (d.max_waiting == 0 || d.max_waiting > d.max_requests) d.max_waiting = d.max_requests;
    if (d.max_wait_ms == 0) d.max_wait_ms = RSD_POOL_DEFAULT_MAX_WAIT_MS;
    if (d.max_requests > RSD_POOL_MAX_REQUESTS || d.vram_budget_bytes > RSD_POOL_MAX_BYTES ||
        d.default_reserve_bytes > RSD_POOL_MAX_BYTES || d.num_models < 0 ||
        d.num_models > RSD_POOL_MAX_MODELS || (d.num_models > 0 && !d.models) ||
        d.event_log > RSD_POOL_MAX_REQUESTS) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_POOL_BAD_DESC,
                 "pool: desc out of range (max_requests, bytes, num_models or event_log)",
                 RSDI_WHERE);
        return NULL;
    }
    for (k = 0; k < d.num_models; k++) {
        if (rsdi_pool_model_check(&d.models[k]) < 0) {
            rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_POOL_BAD_MODEL,
                     "pool: bad model in desc.models", RSDI_WHERE);
            return NULL;
        }
    }
    off_reqs = (sizeof(rsd_pool) + 15u) & ~(size_t)15u;
    /* One block: pool, entries, two link arrays, event ring (each 16-byte aligned). */
    if (!rsdi_size_mul(d.max_requests, sizeof(rsdi_pool_reqent), &reqs_bytes) ||
        !rsdi_size_mul(d.max_requests, sizeof(rsdi_pool_link), &link_bytes) ||
        !rsdi_size_add(off_reqs, reqs_bytes, &off_wq) ||
        !rsdi_size_add((off_wq + 15u) & ~(size_t)15u, link_bytes, &off_nt) ||
        !rsdi_size_add((off_nt + 15u) & ~(size_t)15u, link_bytes, &off_ev) ||
        !rsdi_size_mul(d.event_log, sizeof(rsd_pool_event), &ev_bytes))
        return NULL;
    off_wq = (off_wq + 15u) & ~(size_t)15u;
    off_nt = (off_nt + 15u) & ~(size_t)15u;
    off_ev = (off_ev + 15u) & ~(size_t)15u;
    if (!rsdi_size_add(off_ev, ev_bytes, &total)) return NULL;
    p = (rsd_pool *)rsdi_malloc(&d.allocator, total);
    if (!p) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, NULL, RSDI_WHERE);
        return NULL;
    }
    memset(p, 0, sizeof *p);
    p->alloc = d.allocator;
    p->logger = d.logger;
    p->max_slots = rsdi_pool_norm_max(d.max_slots);
    p->max_requests = d.max_requests;
    p->max_waiting = d.max_waiting;
    p->max_wait_ms = d.max_wait_ms;
    p->budget_bytes = d.vram_budget_bytes;
    p->default_reserve = d.default_reserve_bytes;
    p->reqs = (rsdi_pool_reqent *)(void *)((char *)p + off_reqs);
    p->wq = (rsdi_pool_link *)(void *)((char *)p + off_wq);
    p->nt = (rsdi_pool_link *)(void *)((char *)p + off_nt);
    p->evlog = d.event_log ? (rsd_pool_event *)(void *)((char *)p + off_ev) : NULL;
    p->ev_cap = d.event_log;
    p->want_head = p->want_tail = -1;
    p->act_head = p->act_tail = -1;
    p->ntf_head = p->ntf_tail = RSDI_POOL_NIL;
    for (k = 0; k < RSD_POOL_MAX_SLOTS; k++) {
        p->slots[k].model = -1;
        p->slots[k].act_next = -1;
        p->slots[k].idle_deadline_ms = RSD_POOL_NO_DEADLINE;
    }
    for (i = 0; i < p->max_requests; i++) {
        memset(&p->reqs[i], 0, sizeof p->reqs[i]);
        p->nt[i].prev = p->nt[i].next = p->wq[i].prev = RSDI_POOL_NIL;
        p->wq[i].next = i + 1 < p->max_requests ? i + 1 : RSDI_POOL_NIL;
    }
    p->free_head = 0;
    p->free_tail = p->max_requests - 1;
    for (k = 0; k < d.num_models; k++) {
        if (rsd_pool_add_model(p, &d.models[k]) < 0) {
            rsdi_free(&p->alloc, p);
            return NULL;
        }
    }
    return p;
}

RSD_API void rsd_pool_destroy(rsd_pool *pool) {
    rsd_allocator a;
    if (!pool) return;
    a = pool->alloc;
    rsdi_free(&a, pool);
}

RSD_API int rsd_pool_set_pinned(rsd_pool *pool, int model, bool pinned, uint64_t now_ms) {
    if (!pool || model < 0 || model >= pool->num_models) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    pool->models[model].pinned = pinned;
    if (pinned) {
        /* A pin wins over a W26 drain: the slot takes work again. */
        int s = pool->models[model].slot;
        if (s >= 0 && pool->slots[s].state == RSD_POOL_SLOT_DRAINING &&
            pool->slots[s].why == RSD_POOL_WHY_STARVE) {
            pool->slots[s].state = RSD_POOL_SLOT_READY;
            pool->slots[s].why = RSD_POOL_WHY_NONE;
            rsdi_pool_grant_waiters(pool, s);
        }
    } else {
        int s = pool->models[model].slot;
        if (s >= 0 && pool->slots[s].state == RSD_POOL_SLOT_READY &&
            pool->slots[s].in_flight == 0 && pool->models[model].ttl_ms)
            pool->slots[s].idle_deadline_ms = rsdi_pool_at(pool->now_ms, pool->models[model].ttl_ms);
    }
    rsdi_pool_pass(pool); /* unpin: may be evicted now; pin: waiters may never fit */
    return RSD_OK;
}

RSD_API int rsd_pool_acquire(rsd_pool *pool, int model, uint64_t now_ms, void *user,
                             rsd_pool_req *req, int *slot) {
    rsdi_pool_model *md;
    rsdi_pool_reqent *r;
    uint32_t i;
    int s, rc;
    if (req) req->id = 0;
    if (slot) *slot = -1;
    if (!pool || !req || model < 0 || model >= pool->num_models) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return RSD_ERR_POOL_STOPPED;
    md = &pool->models[model];
    pool->ctr.acquires++;
    s = md->slot;
    /* Fast path: resident and ready, room, nobody queued ahead (P32.1). */
    if (RSDI_LIKELY(s >= 0 && pool->slots[s].state == RSD_POOL_SLOT_READY &&
                    md->wq_head == RSDI_POOL_NIL &&
                    (md->max_in_flight == 0 || pool->slots[s].in_flight < md->max_in_flight))) {
        rsdi_pool_slot *sl = &pool->slots[s];
        i = rsdi_pool_req_alloc(pool);
        if (i == RSDI_POOL_NIL) { pool->ctr.queue_full++; return RSD_ERR_CAPACITY; }
        r = &pool->reqs[i];
        r->state = RSDI_PREQ_RUNNING;
        r->model = (int16_t)model;
        r->slot = (int8_t)s;
        r->user = user;
        r->enq_ms = now_ms;
        sl->in_flight++; /* counted at admission, not at dispatch (#28698) */
        sl->last_use = ++pool->clock;
        sl->idle_deadline_ms = RSD_POOL_NO_DEADLINE;
        pool->running++;
        pool->ctr.grants_immediate++;
        *req = rsdi_pool_handle(pool, i);
        if (slot) *slot = s;
        return RSD_OK;
    }
    if (s < 0 && !md->wanting && (rc = rsdi_pool_never_fits(pool, model)) < 0) {
        pool->ctr.no_fit++;
        rsdi_logf(&pool->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_NO_FIT, RSDI_WHERE,
                  "pool: %s (%llu bytes) cannot fit: %s", md->id,
                  (unsigned long long)md->reserve_bytes, rsd_result_str(rc));
        return rc;
    }
    if (pool->waiting + pool->preloads >= pool->max_waiting ||
        (i = rsdi_pool_req_alloc(pool)) == RSDI_POOL_NIL) {
        pool->ctr.queue_full++;
        rsdi_log(&pool->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_QUEUE_FULL,
                 "pool: waiting queue full", RSDI_WHERE);
        return RSD_ERR_POOL_QUEUE_FULL;
    }
    r = &pool->reqs[i];
    r->state = RSDI_PREQ_WAITING;
    r->model = (int16_t)model;
    r->user = user;
    r->enq_ms = now_ms;
    rsdi_pool_wq_push(pool, model, i);
    pool->ctr.waits++;
    *req = rsdi_pool_handle(pool, i);
    if (s < 0 && !md->wanting) { /* needs a slot: P35, residents keep flowing */
        rsdi_pool_want_add(pool, model);
        rsdi_pool_pass(pool);
    }
    return RSD_PENDING;
}

RSD_API int rsd_pool_preload(rsd_pool *pool, int model, uint64_t now_ms) {
    rsdi_pool_model *md;
    uint32_t i;
    int s, rc;
    if (!pool || model < 0 || model >= pool->num_models) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return RSD_ERR_POOL_STOPPED;
    md = &pool->models[model];
    s = md->slot;
    if (s >= 0 && (pool->slots[s].state == RSD_POOL_SLOT_READY ||
                   pool->slots[s].state == RSD_POOL_SLOT_STARTING))
        return RSD_OK;
    if (s < 0 && !md->wanting && (rc = rsdi_pool_never_fits(pool, model)) < 0) {
        pool->ctr.no_fit++;
        return rc;
    }
    if (pool->waiting + pool->preloads >= pool->max_waiting ||
        (i = rsdi_pool_req_alloc(pool)) == RSDI_POOL_NIL) {
        pool->ctr.queue_full++;
        return RSD_ERR_POOL_QUEUE_FULL;
    }
    pool->reqs[i].state = RSDI_PREQ_WAITING;
    pool->reqs[i].preload = 1;
    pool->reqs[i].model = (int16_t)model;
    pool->reqs[i].user = NULL;
    pool->reqs[i].enq_ms = pool->now_ms;
    rsdi_pool_wq_push(pool, model, i);
    if (s < 0 && !md->wanting) {
        rsdi_pool_want_add(pool, model);
        rsdi_pool_pass(pool);
    }
    return RSD_PENDING;
}

RSDI_PRIVATE int rsdi_pool_finish(rsd_pool *pool, rsd_pool_req req, uint64_t now_ms, bool cancel) {
    rsdi_pool_reqent *r;
    uint32_t i;
    int s;
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    r = rsdi_pool_lookup(pool, req, &i);
    if (!r) return RSD_ERR_POOL_STALE;
    switch (r->state) {
    case RSDI_PREQ_WAITING: {
        bool was_wanting = pool->models[r->model].wanting;
        if (!cancel) return RSD_ERR_STATE;
        rsdi_pool_wq_unlink(pool, r->model, i);
        rsdi_pool_req_free(pool, i);
        pool->ctr.cancels++;
        if (was_wanting && pool->want_head < 0 && pool->ctr.starve_drains) rsdi_pool_pass(pool);
        return RSD_OK;
    }
    case RSDI_PREQ_RUNNING:
        s = r->slot;
        rsdi_pool_ntf_unlink(pool, i);
        rsdi_pool_req_free(pool, i);
        pool->slots[s].in_flight--;
        pool->running--;
        if (cancel) pool->ctr.cancels++;
        else pool->ctr.releases++;
        rsdi_pool_slot_settled(pool, s);
        return RSD_OK;
    case RSDI_PREQ_FAILED:
    case RSDI_PREQ_ORPHAN:
        rsdi_pool_ntf_unlink(pool, i);
        rsdi_pool_req_free(pool, i);
        return RSD_OK;
    default:
        return RSD_ERR_POOL_STALE;
    }
}

RSD_API int rsd_pool_release(rsd_pool *pool, rsd_pool_req req, uint64_t now_ms) {
    return rsdi_pool_finish(pool, req, now_ms, false);
}

RSD_API int rsd_pool_cancel(rsd_pool *pool, rsd_pool_req req, uint64_t now_ms) {
    return rsdi_pool_finish(pool, req, now_ms, true);
}

RSDI_PRIVATE int rsdi_pool_slot_of(const rsd_pool *pool, rsd_pool_proc proc) {
    int s = (int)(proc.id & 0xFFu);
    if (proc.id == 0 || s >= RSD_POOL_MAX_SLOTS) return -1;
    if (pool->slots[s].state == RSD_POOL_SLOT_EMPTY || pool->slots[s].gen != (proc.id >> 8))
        return -1;
    return s;
}

RSD_API int rsd_pool_on_started(rsd_pool *pool, rsd_pool_proc proc, bool ok, uint64_t now_ms) {
    rsdi_pool_slot *sl;
    int s;
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if ((s = rsdi_pool_slot_of(pool, proc)) < 0) return RSD_ERR_POOL_STALE;
    sl = &pool->slots[s];
    if (sl->state != RSD_POOL_SLOT_STARTING) return RSD_ERR_STATE;
    if (sl->pending == RSD_POOL_ACTION_SPAWN) rsdi_pool_act_del(pool, s);
    if (!ok) {
        /* W27 + P53: fail only this model's waiters; the slot is stopped and freed. */
        int m = sl->model;
        pool->ctr.load_failures++;
        rsdi_pool_event_log(pool, RSD_POOL_EV_LOAD_FAILED, RSD_POOL_WHY_LOAD_FAILED, s);
        rsdi_logf(&pool->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_LOAD_FAILED, RSDI_WHERE,
                  "pool: %s failed to load in slot %d", pool->models[m].id, s);
        rsdi_pool_fail_model_waiters(pool, m, RSD_ERR_POOL_LOAD_FAILED);
        pool->models[m].slot = -1;
        sl->state = RSD_POOL_SLOT_FAILED;
        sl->why = RSD_POOL_WHY_LOAD_FAILED;
        sl->model = m; /* kept for the STOP action; no longer routes requests */
        rsdi_pool_act_push(pool, s, RSD_POOL_ACTION_STOP);
        rsdi_pool_pass(pool);
        return RSD_OK;
    }
    sl->state = RSD_POOL_SLOT_READY;
    sl->last_use = ++pool->clock;
    pool->ctr.readies++;
    rsdi_pool_event_log(pool, RSD_POOL_EV_READY, RSD_POOL_WHY_NONE, s);
    rsdi_pool_grant_waiters(pool, s);
    if (sl->drain_after_start) {
        sl->state = RSD_POOL_SLOT_DRAINING;
        sl->why = RSD_POOL_WHY_UNLOAD;
        rsdi_pool_event_log(pool, RSD_POOL_EV_DRAIN, RSD_POOL_WHY_UNLOAD, s);
        if (sl->in_flight == 0) rsdi_pool_stop_slot(pool, s, RSD_POOL_WHY_UNLOAD);
    } else if (sl->in_flight == 0) {
        uint32_t ttl = pool->models[sl->model].ttl_ms;
        sl->idle_deadline_ms = ttl ? rsdi_pool_at(pool->now_ms, ttl) : RSD_POOL_NO_DEADLINE;
        if (pool->want_head >= 0) rsdi_pool_pass(pool);
    }
    return RSD_OK;
}

RSD_API int rsd_pool_on_exited(rsd_pool *pool, rsd_pool_proc proc, uint64_t now_ms) {
    rsdi_pool_slot *sl;
    int s;
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if ((s = rsdi_pool_slot_of(pool, proc)) < 0) return RSD_ERR_POOL_STALE;
    sl = &pool->slots[s];
    if (sl->state == RSD_POOL_SLOT_STOPPING || sl->state == RSD_POOL_SLOT_FAILED) {
        pool->ctr.exits++;
        rsdi_pool_event_log(pool, RSD_POOL_EV_EXITED, sl->why, s);
    } else {
        /* Crash (W27): the process is gone, so are its VRAM and its requests. A crash
           while starting fails that model's waiters, as a failed load does. */
        pool->ctr.crashes++;
        rsdi_pool_event_log(pool, RSD_POOL_EV_CRASHED, RSD_POOL_WHY_NONE, s);
        rsdi_logf(&pool->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_CRASHED, RSDI_WHERE,
                  "pool: process in slot %d (%s) exited unexpectedly", s,
                  sl->model >= 0 ? pool->models[sl->model].id : "-");
        if (sl->state == RSD_POOL_SLOT_STARTING) {
            pool->ctr.load_failures++;
            rsdi_pool_fail_model_waiters(pool, sl->model, RSD_ERR_POOL_CRASHED);
        }
    }
    if (sl->model >= 0 && pool->models[sl->model].slot != s) sl->model = -1;
    rsdi_pool_vacate(pool, s);
    rsdi_pool_pass(pool);
    return RSD_OK;
}

RSD_API int rsd_pool_set_reserved(rsd_pool *pool, rsd_pool_proc proc, uint64_t bytes,
                                  uint64_t now_ms) {
    rsdi_pool_slot *sl;
    int s;
    if (!pool || bytes > RSD_POOL_MAX_BYTES) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if ((s = rsdi_pool_slot_of(pool, proc)) < 0) return RSD_ERR_POOL_STALE;
    sl = &pool->slots[s];
    pool->reserved_total = pool->reserved_total - sl->reserve_bytes + bytes;
    sl->reserve_bytes = bytes;
    rsdi_pool_pass(pool);
    return RSD_OK;
}

RSD_API int rsd_pool_set_vram(rsd_pool *pool, uint64_t total_bytes, uint64_t foreign_bytes,
                              uint64_t now_ms) {
    if (!pool || total_bytes > RSD_POOL_MAX_BYTES || foreign_bytes > RSD_POOL_MAX_BYTES)
        return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    pool->measured_total = total_bytes;
    pool->foreign_bytes = foreign_bytes;
    rsdi_pool_pass(pool);
    return RSD_OK;
}

RSD_API int rsd_pool_set_pid(rsd_pool *pool, rsd_pool_proc proc, int64_t pid) {
    int s;
    if (!pool) return RSD_ERR_ARG;
    if ((s = rsdi_pool_slot_of(pool, proc)) < 0) return RSD_ERR_POOL_STALE;
    pool->slots[s].pid = pid;
    return RSD_OK;
}

RSD_API bool rsd_pool_next_action(rsd_pool *pool, rsd_pool_action *a) {
    uint32_t i;
    if (!pool || !a) return false;
    memset(a, 0, sizeof *a);
    a->slot = -1;
    a->model = -1;
    if (pool->act_head >= 0) {
        int s = pool->act_head;
        rsdi_pool_slot *sl = &pool->slots[s];
        a->kind = sl->pending;
        a->slot = s;
        a->proc = rsdi_pool_proc_of(pool, s);
        a->model = sl->model;
        a->model_id = sl->model >= 0 ? pool->models[sl->model].id : NULL;
        a->reserve_bytes = sl->reserve_bytes;
        a->why = a->kind == RSD_POOL_ACTION_STOP ? sl->why : RSD_POOL_WHY_NONE;
        rsdi_pool_act_del(pool, s);
        return true;
    }
    i = pool->ntf_head;
    if (i != RSDI_POOL_NIL) {
        rsdi_pool_reqent *r = &pool->reqs[i];
#if defined(__GNUC__) || defined(__clang__)
        { /* bursts of GRANTs: touch the entry a few pulls ahead (see grant_waiters) */
            uint32_t ahead = pool->nt[i].next;
            int k;
            for (k = 0; k < 4 && ahead != RSDI_POOL_NIL; k++) ahead = pool->nt[ahead].next;
            if (ahead != RSDI_POOL_NIL) __builtin_prefetch(&pool->reqs[ahead]);
        }
#endif
        a->req = rsdi_pool_handle(pool, i);
        a->model = r->model;
        a->model_id = pool->models[r->model].id;
        a->user = r->user;
        if (r->ntf == RSDI_PNTF_GRANT) {
            a->kind = RSD_POOL_ACTION_GRANT;
            a->slot = r->slot;
            rsdi_pool_ntf_unlink(pool, i);
        } else {
            a->kind = RSD_POOL_ACTION_FAIL;
            a->result = r->result;
            rsdi_pool_ntf_unlink(pool, i);
            rsdi_pool_req_free(pool, i);
        }
        return true;
    }
    return false;
}

RSD_API uint64_t rsd_pool_step(rsd_pool *pool, uint64_t now_ms) {
    uint64_t next = RSD_POOL_NO_DEADLINE;
    int s, m;
    if (!pool) return next;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return next;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) { /* idle TTL (llama-swap ttl, keep_alive) */
        rsdi_pool_slot *sl = &pool->slots[s];
        if (!rsdi_pool_idle(pool, sl) || sl->idle_deadline_ms == RSD_POOL_NO_DEADLINE) continue;
        if (sl->idle_deadline_ms <= pool->now_ms) rsdi_pool_stop_slot(pool, s, RSD_POOL_WHY_TTL);
    }
    rsdi_pool_pass(pool);
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        const rsdi_pool_slot *sl = &pool->slots[s];
        if (rsdi_pool_idle(pool, sl) && sl->idle_deadline_ms < next) next = sl->idle_deadline_ms;
    }
    if (pool->max_wait_ms != RSD_POOL_WAIT_FOREVER) {
        for (m = pool->want_head; m >= 0; m = pool->models[m].want_next) {
            uint64_t t = rsdi_pool_at(pool->reqs[pool->models[m].wq_head].enq_ms, pool->max_wait_ms);
            if (t > pool->now_ms && t < next) next = t;
        }
    }
    return next;
}

RSD_API int rsd_pool_configure(rsd_pool *pool, int max_slots, uint64_t now_ms) {
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    pool->max_slots = rsdi_pool_norm_max(max_slots);
    rsdi_pool_pass(pool);
    return RSD_OK;
}

RSD_API int rsd_pool_unload(rsd_pool *pool, int model, int flags, uint64_t now_ms) {
    int s, pass_, result = RSD_OK;
    if (!pool || model < -1 || model >= pool->num_models) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return RSD_ERR_POOL_STOPPED;
    /* Pass 0 checks (refuse mode changes nothing when busy); pass 1 acts. */
    for (pass_ = 0; pass_ < 2; pass_++) {
        for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
            rsdi_pool_slot *sl = &pool->slots[s];
            bool busy;
            if (sl->model < 0 || (model >= 0 && sl->model != model)) continue;
            if (sl->state != RSD_POOL_SLOT_STARTING && sl->state != RSD_POOL_SLOT_READY &&
                sl->state != RSD_POOL_SLOT_DRAINING)
                continue;
            busy = sl->in_flight > 0 || (sl->state == RSD_POOL_SLOT_STARTING &&
                                         sl->pending != RSD_POOL_ACTION_SPAWN);
            if (pass_ == 0) {
                if (busy && !(flags & RSD_POOL_UNLOAD_DRAIN)) {
                    rsdi_logf(&pool->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_BUSY, RSDI_WHERE,
                              "pool: %s is still serving requests", pool->models[sl->model].id);
                    return RSD_ERR_POOL_BUSY;
                }
                continue;
            }
            if (!busy) {
                if (sl->state == RSD_POOL_SLOT_STARTING) rsdi_pool_fail_model_waiters(pool, sl->model, RSD_ERR_POOL_UNLOADED);
                rsdi_pool_stop_slot(pool, s, RSD_POOL_WHY_UNLOAD);
            } else if (sl->state == RSD_POOL_SLOT_STARTING) {
                sl->drain_after_start = true;
                result = RSD_PENDING;
            } else {
                sl->state = RSD_POOL_SLOT_DRAINING;
                sl->why = RSD_POOL_WHY_UNLOAD;
                rsdi_pool_event_log(pool, RSD_POOL_EV_DRAIN, RSD_POOL_WHY_UNLOAD, s);
                result = RSD_PENDING;
            }
        }
    }
    rsdi_pool_pass(pool);
    return result;
}

RSD_API int rsd_pool_stop(rsd_pool *pool, uint64_t now_ms) {
    int s, m;
    uint32_t i;
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return RSD_OK;
    rsdi_log(&pool->logger, RSD_LOG_INFO, RSD_LOGITEM_POOL_STOPPED, "pool: stopped", RSDI_WHERE);
    /* W28: fail every waiting request, then every running one. */
    for (m = 0; m < pool->num_models; m++) rsdi_pool_fail_model_waiters(pool, m, RSD_ERR_POOL_STOPPED);
    if (pool->running) {
        for (i = 0; i < pool->max_requests; i++) {
            uint8_t st = pool->reqs[i].state;
            if (st == RSDI_PREQ_RUNNING || st == RSDI_PREQ_ORPHAN)
                rsdi_pool_fail_req(pool, i, RSD_ERR_POOL_STOPPED);
        }
    }
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        rsd_pool_slot_state st = pool->slots[s].state;
        if (st == RSD_POOL_SLOT_STARTING || st == RSD_POOL_SLOT_READY || st == RSD_POOL_SLOT_DRAINING)
            rsdi_pool_stop_slot(pool, s, RSD_POOL_WHY_SHUTDOWN);
    }
    pool->stopped = true;
    return RSD_OK;
}

RSD_API void rsd_pool_query_stats(const rsd_pool *pool, rsd_pool_stats *st) {
    int s;
    if (!st) return;
    if (!pool) { memset(st, 0, sizeof *st); return; }
    *st = pool->ctr;
    st->max_slots = pool->max_slots;
    st->live_slots = rsdi_pool_count(pool, true);
    st->occupied_slots = rsdi_pool_count(pool, false);
    st->stopped = pool->stopped;
    st->waiting = pool->waiting;
    st->running = pool->running;
    st->models_waiting = pool->models_waiting;
    st->preloads = pool->preloads;
    st->reserved_bytes = pool->reserved_total;
    st->budget_bytes = rsdi_pool_budget(pool);
    st->foreign_bytes = pool->foreign_bytes;
    st->clock = pool->clock;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        const rsdi_pool_slot *sl = &pool->slots[s];
        rsd_pool_slot_info *o = &st->slots[s];
        o->state = sl->state;
        o->model = sl->model;
        o->model_id = sl->model >= 0 ? pool->models[sl->model].id : NULL;
        o->proc = rsdi_pool_proc_of(pool, s);
        if (sl->state == RSD_POOL_SLOT_EMPTY) o->proc.id = 0;
        o->in_flight = sl->in_flight;
        o->reserve_bytes = sl->reserve_bytes;
        o->last_use = sl->last_use;
        o->idle_deadline_ms = sl->idle_deadline_ms;
        o->ttl_ms = sl->model >= 0 ? pool->models[sl->model].ttl_ms : 0;
        o->pinned = sl->model >= 0 && pool->models[sl->model].pinned;
        o->pid = sl->pid;
    }
}

RSD_API int rsd_pool_query_model(const rsd_pool *pool, int model, rsd_pool_model_info *info) {
    const rsdi_pool_model *md;
    if (!info) return RSD_ERR_ARG;
    memset(info, 0, sizeof *info);
    info->slot = -1;
    if (!pool || model < 0 || model >= pool->num_models) return RSD_ERR_ARG;
    md = &pool->models[model];
    info->id = md->id;
    info->reserve_bytes = md->reserve_bytes;
    info->ttl_ms = md->ttl_ms;
    info->max_in_flight = md->max_in_flight;
    info->pinned = md->pinned;
    info->slot = md->slot;
    info->state = md->slot >= 0 ? pool->slots[md->slot].state : RSD_POOL_SLOT_EMPTY;
    info->waiting = md->wq_count;
    info->running = md->slot >= 0 ? pool->slots[md->slot].in_flight : 0;
    return RSD_OK;
}

RSD_API bool rsd_pool_next_event(rsd_pool *pool, rsd_pool_event *ev) {
    if (!pool || !ev || pool->ev_count == 0) return false;
    *ev = pool->evlog[pool->ev_head];
    pool->ev_head = (pool->ev_head + 1) % pool->ev_cap;
    pool->ev_count--;
    return true;
}
/* ==== >>pool end ========================================================== */

#endif /* RESIDENCY_IMPLEMENTATION */

/*
MIT License

Copyright (c) 2026 the residency.h authors

Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of
the Software, and to permit persons to whom the Software is furnished to do so,
subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS
FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR
COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER
IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN
CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
*/
