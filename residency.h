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
   --- reconcile: the pure decision (>>reconcile) -------------------------------
       Facts in, plan out: no I/O, no allocation, no clock, no globals. The
       sans-I/O drivers (llama.cpp router, LM Studio, Ollama) that fill the facts
       from parsed payloads and carry the plan out over HTTP, the cross-process
       lock and the state files (attribution, mutation generation) come next, in
       another part; they are not in this section.

       int rsd_decide(const rsd_facts *facts, rsd_plan *out);
           Decide what to do to make facts->keep resident. *out is always
           written (zeroed, decision NONE on error). Returns RSD_OK,
           RSD_ERR_ARG (NULL, bad enum, negative count, NULL view with a length),
           RSD_ERR_RESIDENTS_LIMIT (over an RSD_MAX_* limit, e.g. 65 residents),
           RSD_ERR_MODEL_ID (empty keep or resident id; any id or alias of
           RSD_MODEL_ID_MAX bytes or more). Empty aliases are ignored.

       Facts (the caller fills them; zeroed fields are defaults):
           rsd_facts { strategy (DEFAULT=ROUTER | ROUTER | JIT | SCHEDULER),
             optout (NONE | ENV | TARGET), target_id, runtime_id, keep,
             keep_aliases[4] + n, keep_tags[8] + n, keep_pinned,
             residents + n_residents (<= 64), protected_models + n_protected
             (<= 64), max_instances (0 = unknown), context_length (0 = none),
             model_max_context (0 = unknown), context_ceiling (0 = 131072) }
           rsd_resident { model_id, aliases[4] + n, tags[8] + n,
             size_vram_bytes + has_size_vram, size_bytes + has_size (absent is
             never zero), loaded_by_us (attribution), pinned }
           rsd_protected_model { model_id (trimmed; empty skipped), role }
         Model ids are rsd_str views, not copies: the caller keeps the strings
         alive while the facts and the plan are used (the plan names residents
         by index). A driver copies ids out of a response into its own arena.
         Comparison is exact, byte-wise, case-sensitive.

       Plan:
           rsd_plan { decision, reason, would, keep_resident, keep_index,
             resident_count, slots_needed, load_context, evict[] + n_evict,
             fallback[] + n_fallback, blocked[] + n_blocked, notices[] +
             n_notices, cls[] (per resident: is_keep, protection, role, ours,
             evict, group) }
         evict/fallback/blocked hold indices into facts->residents. Unload the
         evict list in order, then load; fallback (JIT only) is what to unload,
         in order, if the load fails.

       Classification. A resident is the keep when its id or an alias equals the
       keep or a keep alias. Tag protection: a tag exactly "pinned:true" or
       "role:scout", or rsd_resident.pinned. Config protection: its id, else the
       first alias, in protected_models; role = the first entry for that id
       with a role, else none (a bare id still protects). Tag beats config; the
       role is kept. Residents that share any id or alias are ONE model (an
       identity group): protected if any member is, the keep if any member is,
       evicted once (by the canonical-first member's id), freeing all its slots.
       Determinism: residents are taken in canonical order (model_id bytes,
       then index), so the same facts in any listing order give the same plan;
       ties are broken by id (upstream used listing order).

       Decision table (keep = the requested model; others = non-keep groups;
       tiers: unprotected, then configured, each "loaded by us" first):
         keep resident, any strategy   ALREADY_RESIDENT   KEEP_RESIDENT; one
                                       notice if others: stress over-capacity
                                       (count > max) else co-resident
         ROUTER, nothing resident      LOAD               EMPTY_SERVER
         ROUTER, capacity unknown      LOAD_AFTER_EVICT   CAPACITY_UNKNOWN_EVICT_ONE:
                                       exactly one unprotected resident (W8)
                                       or LOAD            CAPACITY_UNKNOWN_NONE_EVICTABLE
         ROUTER, free slot             LOAD               FREE_SLOT (co-resident
                                       "loading ... (N+1/C instances)")
         ROUTER, full                  LOAD_AFTER_EVICT   EVICT_UNPROTECTED /
                                       EVICT_CONFIG: the fewest groups, tier
                                       order, so that count - freed + 1 <= max
         ROUTER, full, only pinned     DECLINE            DECLINE_ALL_PINNED
         ROUTER, full, keep pinned and only configured models could make room
                                       DECLINE            DECLINE_PINNED_KEEP
                                       (#72: a pinned keep never displaces a
                                       configured model; blocked[] names them)
         JIT                           LOAD               JIT_LOAD; evict none,
                                       fallback = unprotected, then configured
                                       unless the keep is pinned
         SCHEDULER                     LOAD_AFTER_EVICT   SCHEDULER_RELEASE_OURS
                                       (our unprotected stragglers only) or
                                       LOAD               SCHEDULER_LOAD
         optout != NONE                OBSERVE            OBSERVE_ENV / _TARGET
         driver: keep not served       DECLINE            DECLINE_NOT_LOADABLE
         driver: listing failed        OBSERVE            PROBE_FAILED (not cached)
       Tag-pinned models and the keep are never in evict or fallback.
       Capacity counts instances only; sizes feed notices, never the choice.

       W8, capacity unknown: upstream evicted every unprotected resident. A load
       adds one model, so freeing one slot always suffices for a count-limited
       server that was at or under its limit; and evicting one we chose stops a
       full router from displacing a pinned model itself. So we evict exactly
       one unprotected resident (ours first, then by id), never a configured
       one, and load without eviction when none is unprotected.

       W19, observe: decision OBSERVE never loads or unloads, for every runtime
       (upstream LM Studio still loaded). evict and fallback are empty; would
       holds the managed decision, cls[].evict and load_context what it would
       have done, and the action notices are kept with observe_only set (their
       text starts "observe-only, nothing done: ").

       Notices, in plan order (R32): context stress, split stress per resident
       (canonical order), the strategy/eviction notices, then the clamp.
           rsd_notice { kind, level, msg, observe_only, subject (resident index
             or -1), detail (RSD_DETAIL_* bits), requested_context,
             model_max_context, load_context, resident_count, max_instances,
             resident_vram_bytes, resident_total_bytes, freed_vram_bytes,
             config_protected, role }
         msg                  kind/level              detail bits
         CONTEXT_OVER_MAX     stress/warning          REQUESTED_CONTEXT MODEL_MAX_CONTEXT
         SPLIT                stress/warning          RESIDENT_VRAM_BYTES RESIDENT_TOTAL_BYTES
         OVER_CAPACITY        stress/warning          RESIDENT_COUNT MAX_INSTANCES
         SERVES_ALONGSIDE     co-resident/info        RESIDENT_COUNT [MAX_INSTANCES]
         LOADING_ALONGSIDE    co-resident/info        RESIDENT_COUNT MAX_INSTANCES
         DECLINE_PINNED_KEEP  will-not-fit/error      RESIDENT_COUNT MAX_INSTANCES
                                                      CONFIG_PROTECTED [ROLE]
         DECLINE_ALL_PINNED   will-not-fit/error      RESIDENT_COUNT MAX_INSTANCES
         EVICT_CONFIG         swap/warning            SWAPPED_OUT CONFIG_PROTECTED [ROLE]
         EVICT_OURS           about-to-evict/info     [FREED_VRAM_BYTES]
         EVICT_FOREIGN        swap/warning            SWAPPED_OUT [FREED_VRAM_BYTES]
         CONTEXT_CLAMPED      stress/warning          REQUESTED_CONTEXT LOAD_CONTEXT
         NOT_LOADABLE         will-not-fit/error      (none)
       int rsd_notice_format(facts, plan, notice, buf, cap);
           The operator message (upstream wording, "Clio" read as "residency";
           GiB with one decimal; roles as "the chat model", "the memory
           model", "a worker model", "a target default model", "a configured
           model"). snprintf-like: returns the full length, always
           NUL-terminates when cap > 0; buf may be NULL with cap 0.
       int rsd_plan_decline_unloadable(facts, plan, models_listed);
           The loadability gate (R45): turn a plan the driver must refuse
           because the server does not serve the keep into a decline with
           exactly one will-not-fit notice and nothing else.
       rsd_decision_str, rsd_reason_str, rsd_reason_name, rsd_notice_kind_str,
       rsd_notice_level_str, rsd_notice_msg_str, rsd_role_str, rsd_role_phrase:
           enum to string (X-macros RSD_DECISIONS, RSD_REASONS, RSD_NOTICE_KINDS,
           RSD_NOTICE_LEVELS, RSD_NOTICE_MSGS, RSD_ROLES); never NULL.
       bool rsd_tags_protect(const rsd_str *tags, int n);   the R8 tag rule.
       int rsd_protected_collect(const rsd_role_sources *src, out, cap);
           Build protected_models from settings (R12): chat, memory, worker
           default, worker profiles, target defaults, in that order; trimmed,
           empty skipped, first claim wins. Returns the count or RSD_ERR_BUFFER.

       Opt-outs (environment):
           RESIDENCY=observe|off|0|false|user|user-managed (trimmed, any case)
               observe-only; unset, empty or anything else: managed.
           bool rsd_env_observe(const char *value);
           bool rsd_lifecycle_user_managed(const char *lifecycle);
           rsd_optout rsd_optout_resolve(const char *env_value, bool user_managed);
               TARGET when the target is user-managed, else ENV when the value
               opts out, else NONE. rsd_optout_from_env(user_managed) calls
               getenv("RESIDENCY") itself.

       Decision cache (caller-owned, fixed size, no allocation):
           rsd_decision_cache c = {0};            TTL 60 000 ms (c.ttl_ms to change)
           int rsd_cache_lookup(&c, target_key, model, now_ms, generation, &hit);
               1 = live hit (skip probing: ALREADY_RESIDENT, DECLINE or
               OBSERVE; emit nothing again), 0 = miss.
           int rsd_cache_store(&c, target_key, model, plan, mutation_failed,
                               now_ms, generation);
               After the reconcile finished. A plan that loaded is stored as
               ALREADY_RESIDENT. Returns 0 (not stored) when mutation_failed
               (an unload or the load failed: W4), for PROBE_FAILED and NONE.
               Declines and opt-out observes are stored (W3, R52).
           int rsd_cache_invalidate(&c, target_key, model);
               After any local mutation of the target; an empty model drops
               every entry of the key. Returns the count dropped.
         Keyed by (normalised target key, model) (W2): alternating models on a
         server both hit. generation is the caller's mutation counter (the
         state dir will share one across processes); an entry stored under
         another generation is a miss. Full: an expired slot, else the least
         recently used (lowest slot on ties) is replaced.
           int rsd_target_key_normalise(rsd_str raw, char *out, size_t cap);
               W9: "llamacpp|HTTP://Mini:8080/v1/" -> "llamacpp|http://mini:8080/v1";
               lower-cases up to the host, drops :80 (http) and :443 (https),
               query, fragment and trailing '/'; idempotent. Meant to give the
               same text as rsd_url_key (residency_http.h) on a valid URL, so a
               driver may pass "<runtime>|" + that key. The cache applies it
               to every key it is given.

       Results: RSD_ERR_RESIDENTS_LIMIT (-50), RSD_ERR_MODEL_ID (-51), plus
       RSD_ERR_ARG and RSD_ERR_BUFFER. Log items (for the drivers):
       RECONCILE_BAD_FACTS, RECONCILE_DECLINE, RECONCILE_EVICT,
       RECONCILE_OBSERVE, RECONCILE_CACHE_HIT, FIT_CLAMPED.
       Limits: RSD_MAX_RESIDENTS 64, RSD_MAX_ALIASES 4, RSD_MAX_TAGS 8 (a driver
       seeing more keeps the protecting ones), RSD_MAX_PROTECTED 64,
       RSD_MODEL_ID_MAX 256 (incl. NUL), RSD_TARGET_KEY_MAX 256,
       RSD_MAX_NOTICES 132 (never reached), RSD_DECISION_CACHE_MAX 32.
       Sizes (x86-64): rsd_plan 11 376 bytes, rsd_decision_cache 17 672,
       rsd_facts 312 plus the caller's arrays (rsd_resident 248 each);
       keep them out of small stacks. rsd_decide uses ~1.5 KiB of stack and
       O(n^2) id comparisons for n <= 64 residents.
   --- fit: the context-fit clamp (>>fit) --------------------------------------
       While other models share a server, cap the context a load asks for: a
       27B model at 262,144 tokens beside a resident 26B made 25 tokens in
       2m18s; at 131,072 it answered a 9k prompt in 9.7 s. A model alone is
       never clamped and a request is never raised. Usable for any runtime
       whose load takes a context length.

       uint32_t rsd_fit_context(uint32_t requested, int n_other_residents,
                                uint32_t ceiling);
           requested if n_other_residents <= 0, ceiling == RSD_FIT_CEILING_OFF
           or requested <= ceiling; else ceiling. ceiling 0 = the default.
       uint32_t rsd_fit_ceiling_parse(const char *value);
           RESIDENCY_CORESIDENT_CONTEXT, trimmed, any case: unset/empty ->
           131072 (RSD_FIT_CEILING_DEFAULT); "off", "0", "false" ->
           RSD_FIT_CEILING_OFF (disabled); a positive integer prefix
           (parseInt: "196608", "+4096", "196608tokens") -> that value
           (saturating at 0xFFFFFFFE); anything else ("abc", "-5", "00") ->
           131072. rsd_fit_ceiling_from_env() calls getenv itself.
       Inside rsd_decide: when context_length is set and the plan loads (LOAD
       or LOAD_AFTER_EVICT), load_context = rsd_fit_context(context_length,
       neighbours, context_ceiling), where neighbours are the other models that
       stay resident AFTER the planned evictions (upstream counted them before;
       with JIT nothing is evicted, so it is the same). When it clamps, the plan
       ends with a stress/warning notice CONTEXT_CLAMPED, "loading '<keep>'
       alongside <neighbours>: context clamped <from> to <to> tokens", detail
       REQUESTED_CONTEXT and LOAD_CONTEXT. No load, no clamp: load_context 0.
       [doc:pool]

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
#define RSDI_RESULTS_RECONCILE(X) \
    X(ERR_RESIDENTS_LIMIT, -50, "more residents, aliases, tags or protected ids than the RSD_MAX_* limits") \
    X(ERR_MODEL_ID, -51, "model id empty or longer than RSD_MODEL_ID_MAX - 1 bytes")
/* >>results:pool */
#define RSDI_RESULTS_POOL(X)
/* >>results:state */
#define RSDI_RESULTS_STATE(X) \
    X(ERR_LOCK, -80, "could not take the cross-process lock") \
    X(ERR_STATE_DIR, -81, "state directory unusable") \
    X(ERR_STATE_IO, -82, "state file I/O failed")

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
#define RSDI_LOG_ITEMS_HTTP(X) \
    X(HTTP_DESC_INVALID, "http: invalid desc") \
    X(HTTP_RESOLVE_FAILED, "http client: host could not be resolved") \
    X(HTTP_CAPACITY, "http client: all request slots busy") \
    X(HTTP_CONNECT_FAILED, "http client: connect failed") \
    X(HTTP_TIMEOUT, "http client: request timed out") \
    X(HTTP_REQUEST_FAILED, "http client: request failed") \
    X(HTTP_STALE_RETRY, "http client: kept-alive connection was stale, retried once") \
    X(HTTP_LISTEN_FAILED, "http server: bind/listen failed") \
    X(HTTP_ACCEPT_FAILED, "http server: accept failed") \
    X(HTTP_BAD_REQUEST, "http server: bad request answered and closed") \
    X(HTTP_CLIENT_GONE, "http server: client went away before its answer")
/* >>log:reconcile */
#define RSDI_LOG_ITEMS_RECONCILE(X) \
    X(RECONCILE_BAD_FACTS, "reconcile: facts rejected (limit, empty or overlong id)") \
    X(RECONCILE_DECLINE, "reconcile: declined (will not fit without evicting a protected model)") \
    X(RECONCILE_EVICT, "reconcile: evicting a resident to make room") \
    X(RECONCILE_OBSERVE, "reconcile: observe-only, nothing changed") \
    X(RECONCILE_CACHE_HIT, "reconcile: decision cache hit, no probe") \
    X(FIT_CLAMPED, "fit: load context clamped beside co-resident models")
/* >>log:pool */
#define RSDI_LOG_ITEMS_POOL(X)
/* >>log:state */
#define RSDI_LOG_ITEMS_STATE(X) \
    X(STATE_DIR_UNRESOLVED, "state dir: no desc dir, RESIDENCY_STATE_DIR, XDG_STATE_HOME or HOME") \
    X(STATE_DIR_TOO_LONG, "state dir: path longer than RSD_STATE_MAX_DIR_BYTES") \
    X(STATE_DIR_CREATE_FAILED, "state dir: mkdir failed") \
    X(STATE_DIR_UNSAFE, "state dir: not a directory, not ours, or world-writable") \
    X(STATE_KEY_INVALID, "state: empty or over-long target key") \
    X(LOCK_OPEN_FAILED, "lock: cannot open the lock file") \
    X(LOCK_FAILED, "lock: flock or the lock hook failed") \
    X(LOCK_WAIT_EXPIRED, "lock: wait deadline passed; proceeding without the lock") \
    X(LOCK_TIMEOUT, "lock: wait deadline passed (fail-closed)") \
    X(LOCK_PROCEED_UNLOCKED, "lock: lock unavailable; proceeding without it") \
    X(ATTR_CORRUPT, "attribution file corrupt or truncated; treated as empty") \
    X(ATTR_READ_FAILED, "attribution file unreadable") \
    X(ATTR_WRITE_FAILED, "attribution file write failed") \
    X(ATTR_FULL, "attribution set full (RSD_STATE_MAX_ATTR)") \
    X(ATTR_LOCK_TIMEOUT, "attribution file lock busy past RSD_STATE_ATTR_LOCK_WAIT_MS")

#define RSD_LOG_ITEMS(X) \
    RSDI_LOG_ITEMS_CORE(X) RSDI_LOG_ITEMS_JSON(X) RSDI_LOG_ITEMS_HTTP(X) \
    RSDI_LOG_ITEMS_RECONCILE(X) RSDI_LOG_ITEMS_POOL(X) RSDI_LOG_ITEMS_STATE(X)

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
/* Limits (see LIMITS in the manual). */
enum {
    RSD_JSON_MAX_DEPTH = 64,          /* default nesting limit (containers) */
    RSD_JSON_DEPTH_CAP = 1024,        /* largest max_depth a desc may ask for */
    RSD_JSON_MAX_BYTES = 0x7FFFFFFF,  /* largest input: offsets and counts fit int32 */
    RSD_JSON_WRITER_MAX_DEPTH = 64,   /* writer nesting limit */
    RSD_JSON_NUM_MAX_DIGITS = 768     /* significant digits kept by rsd_json_double */
};

/* Token types; 0 is the sentinel written after the last token when room allows. */
typedef enum rsd_json_type {
    RSD_JSON_INVALID = 0,
    RSD_JSON_NULL,
    RSD_JSON_BOOL,
    RSD_JSON_NUMBER,
    RSD_JSON_STRING,
    RSD_JSON_ARRAY,
    RSD_JSON_OBJECT,
    RSD_JSON_TYPE_NUM
} rsd_json_type;

/* Token flags. */
enum {
    RSD_JSON_F_KEY = 1,      /* string token is an object key (its one child is the value) */
    RSD_JSON_F_ESCAPED = 2,  /* string token contains at least one backslash escape */
    RSD_JSON_F_INT = 4       /* number token has no fraction and no exponent */
};

/* One token. Offsets are bytes into the source. Strings: inside the quotes
   (raw, still escaped). Containers: from the bracket to one past its closer.
   An object's children are its keys; each key has exactly one child, its value. */
typedef struct rsd_json_tok {
    uint8_t type;    /* rsd_json_type */
    uint8_t flags;   /* RSD_JSON_F_* */
    uint16_t reserved;
    uint32_t start;  /* first byte */
    uint32_t end;    /* one past the last byte */
    int32_t parent;  /* parent token index (a key for object values), -1 for the root */
    int32_t next;    /* index one past this token's subtree: O(1) skip to the next sibling */
    uint32_t size;   /* children: array elements, object members, 1 for a key, 0 otherwise */
} rsd_json_tok;

/* Parse limits; zeroed = defaults. */
typedef struct rsd_json_desc {
    uint32_t max_depth;  /* 0 = RSD_JSON_MAX_DEPTH; > RSD_JSON_DEPTH_CAP is RSD_ERR_ARG */
    size_t max_bytes;    /* 0 = RSD_JSON_MAX_BYTES; larger values are clamped to it */
} rsd_json_desc;

/* Where and why a parse failed. */
typedef struct rsd_json_err {
    int code;           /* the result returned by the parse (RSD_OK when it succeeded) */
    size_t offset;      /* byte offset of the offending byte (== len when truncated) */
    uint32_t line;      /* 1-based line of offset */
    uint32_t col;       /* 1-based column of offset, counted in bytes */
    const char *what;   /* short static description, e.g. "trailing comma"; never NULL */
} rsd_json_err;

/* A parsed document: the source and the caller's tokens (neither is copied). */
typedef struct rsd_json_doc {
    const char *src;       /* the input (not NUL-terminated) */
    size_t len;            /* input length */
    rsd_json_tok *toks;    /* caller's token array (NULL after a count pass) */
    uint32_t count;        /* tokens produced (or needed, after a count pass) */
    uint32_t cap;          /* capacity of toks */
    rsd_json_err err;      /* error position and reason */
} rsd_json_doc;

/* Strict RFC 8259 parse of s[0..len) into toks[0..cap). Returns the token count (>0)
   or <0: RSD_ERR_JSON, RSD_ERR_TRUNCATED (input ended early), RSD_ERR_JSON_DEPTH,
   RSD_ERR_JSON_TOKENS (cap too small), RSD_ERR_TOO_LARGE, RSD_ERR_ARG. toks == NULL
   validates and counts only. Never allocates; doc->err says where it failed. */
RSD_API int rsd_json_parse(rsd_json_doc *doc, const char *s, size_t len, rsd_json_tok *toks,
                           uint32_t cap);
/* rsd_json_parse with limits from desc (NULL = defaults). */
RSD_API int rsd_json_parse_ex(rsd_json_doc *doc, const char *s, size_t len, rsd_json_tok *toks,
                              uint32_t cap, const rsd_json_desc *desc);

/* Type of token i (RSD_JSON_INVALID when i is out of range). */
RSD_API rsd_json_type rsd_json_type_of(const rsd_json_doc *doc, int i);
/* Children of token i (elements, members, 1 for a key), 0 for scalars or bad i. */
RSD_API int rsd_json_size(const rsd_json_doc *doc, int i);
/* First child of i (first element, first key, a key's value) or -1. */
RSD_API int rsd_json_child(const rsd_json_doc *doc, int i);
/* Next sibling of i (next element, next key) or -1. O(1). */
RSD_API int rsd_json_next(const rsd_json_doc *doc, int i);
/* Parent of i (for an object member's value: its key) or -1. */
RSD_API int rsd_json_parent(const rsd_json_doc *doc, int i);
/* Value of member `key` in object obj (escapes in the source key are decoded), or -1. */
RSD_API int rsd_json_find(const rsd_json_doc *doc, int obj, const char *key);
/* Element idx of array arr, or -1. O(idx). */
RSD_API int rsd_json_at(const rsd_json_doc *doc, int arr, uint32_t idx);
/* Raw source bytes of token i (strings: between the quotes, still escaped). */
RSD_API rsd_str rsd_json_view(const rsd_json_doc *doc, int i);
/* True when string token i, unescaped, equals the NUL-terminated s. No buffer needed. */
RSD_API bool rsd_json_str_eq(const rsd_json_doc *doc, int i, const char *s);
/* Unescape string token i into buf (NUL-terminated); *len = decoded length (without
   NUL) even when buf is short. RSD_OK, RSD_ERR_BUFFER (cap <= length), RSD_ERR_JSON_TYPE. */
RSD_API int rsd_json_str(const rsd_json_doc *doc, int i, char *buf, size_t cap, size_t *len);
/* Integer value of number token i. RSD_ERR_JSON_TYPE if it has a fraction or exponent
   or is not a number, RSD_ERR_JSON_RANGE if it does not fit int64_t. */
RSD_API int rsd_json_int64(const rsd_json_doc *doc, int i, int64_t *out);
/* Correctly rounded double of number token i (locale-independent). RSD_ERR_JSON_RANGE
   when the magnitude overflows (underflow gives 0 or a subnormal), RSD_ERR_JSON_TYPE. */
RSD_API int rsd_json_double(const rsd_json_doc *doc, int i, double *out);
/* Value of a true/false token. RSD_ERR_JSON_TYPE otherwise. */
RSD_API int rsd_json_bool(const rsd_json_doc *doc, int i, bool *out);

/* Bounds-checked JSON writer over a caller buffer. Commas and colons are automatic;
   every error is sticky and nothing is ever written at or past buf[cap]. */
typedef struct rsd_json_writer {
    char *buf;          /* caller buffer */
    size_t cap;         /* its size */
    size_t len;         /* bytes written so far */
    int err;            /* first error (sticky), RSD_OK while fine */
    uint32_t depth;     /* open containers */
    uint64_t is_obj;    /* bit d: container at depth d is an object */
    uint64_t has_item;  /* bit d: container at depth d already holds an item */
    bool after_key;     /* a key was written; a value must follow */
    bool done;          /* the top-level value is complete */
} rsd_json_writer;

/* Start writing into buf[0..cap). */
RSD_API void rsd_json_w_init(rsd_json_writer *w, char *buf, size_t cap);
/* '{' as a value. */
RSD_API int rsd_json_w_begin_object(rsd_json_writer *w);
/* '}' (RSD_ERR_STATE if no object is open or a key awaits its value). */
RSD_API int rsd_json_w_end_object(rsd_json_writer *w);
/* '[' as a value. */
RSD_API int rsd_json_w_begin_array(rsd_json_writer *w);
/* ']' (RSD_ERR_STATE if no array is open). */
RSD_API int rsd_json_w_end_array(rsd_json_writer *w);
/* An object key (NUL-terminated, UTF-8); the next call writes its value. */
RSD_API int rsd_json_w_key(rsd_json_writer *w, const char *key);
/* A string value (NUL-terminated UTF-8). Invalid UTF-8 is RSD_ERR_ARG (sticky). */
RSD_API int rsd_json_w_str(rsd_json_writer *w, const char *s);
/* A string value of n bytes (may contain NUL, written as \u0000). */
RSD_API int rsd_json_w_strn(rsd_json_writer *w, const char *s, size_t n);
/* An integer value. */
RSD_API int rsd_json_w_int(rsd_json_writer *w, int64_t v);
/* A double, shortest form that round-trips (<= 17 digits). NaN/inf: RSD_ERR_ARG. */
RSD_API int rsd_json_w_double(rsd_json_writer *w, double v);
/* true / false. */
RSD_API int rsd_json_w_bool(rsd_json_writer *w, bool v);
/* null. */
RSD_API int rsd_json_w_null(rsd_json_writer *w);
/* n raw bytes as one value, unchecked (the caller vouches it is valid JSON). */
RSD_API int rsd_json_w_raw(rsd_json_writer *w, const char *json, size_t n);
/* Finish: length written (>= 0; a NUL follows when room) or the sticky error;
   RSD_ERR_STATE when containers are open or no value was written. */
RSD_API int rsd_json_w_finish(rsd_json_writer *w);

/* ==== >>json end ========================================================== */

/* ==== >>reconcile (declarations) ========================================== */
/* The pure reconciler decision: facts in, plan out. No I/O, no allocation, no
   clock. The sans-I/O drivers (llama.cpp router, LM Studio, Ollama), the lock and
   the state files build on it and come next. Manual: [doc:reconcile] above. */
enum {
    RSD_MAX_RESIDENTS = 64,       /* residents in one rsd_facts */
    RSD_MAX_ALIASES = 4,          /* aliases per resident, and of the keep model */
    RSD_MAX_TAGS = 8,             /* tags per resident, and of the keep model */
    RSD_MAX_PROTECTED = 64,       /* entries in rsd_facts.protected_models */
    RSD_MODEL_ID_MAX = 256,       /* bytes of a model id, including the NUL */
    RSD_TARGET_KEY_MAX = 256,     /* bytes of a normalised target key, incl. NUL */
    RSD_MAX_NOTICES = 2 * RSD_MAX_RESIDENTS + 4, /* a plan never needs more */
    RSD_DECISION_CACHE_MAX = 32,  /* entries in one rsd_decision_cache */
    RSD_DECISION_CACHE_TTL_MS = 60000 /* default TTL of the decision cache */
};

/* Decisions: X(NAME, "string"). */
#define RSD_DECISIONS(X) \
    X(NONE, "none") \
    X(ALREADY_RESIDENT, "already-resident") \
    X(LOAD, "load") \
    X(LOAD_AFTER_EVICT, "load-after-evict") \
    X(DECLINE, "decline") \
    X(OBSERVE, "observe")
/* What the plan asks the driver to do. */
typedef enum rsd_decision {
#define RSDI_X(n, s) RSD_DECISION_##n,
    RSD_DECISIONS(RSDI_X)
#undef RSDI_X
    RSD_DECISION_NUM
} rsd_decision;

/* Reason codes (W18): why the plan is what it is. X(NAME, "string"). */
#define RSD_REASONS(X) \
    X(NONE, "none") \
    X(KEEP_RESIDENT, "keep model already resident; co-residents are left alone") \
    X(EMPTY_SERVER, "nothing resident; load") \
    X(FREE_SLOT, "a free instance slot exists; load beside the residents") \
    X(EVICT_UNPROTECTED, "every slot taken; evict the fewest unprotected residents") \
    X(EVICT_CONFIG, "every slot taken and no unprotected resident left; evict a configured model") \
    X(CAPACITY_UNKNOWN_EVICT_ONE, "capacity unknown; evict one unprotected resident (W8)") \
    X(CAPACITY_UNKNOWN_NONE_EVICTABLE, "capacity unknown and nothing unprotected; load as is") \
    X(JIT_LOAD, "jit: load now; the fallback list is used only if the load fails") \
    X(SCHEDULER_RELEASE_OURS, "scheduler: release stragglers this process loaded") \
    X(SCHEDULER_LOAD, "scheduler: nothing of ours to release; the request loads") \
    X(DECLINE_ALL_PINNED, "declined: the slots hold pinned models") \
    X(DECLINE_PINNED_KEEP, "declined: a pinned keep would strand a configured model") \
    X(DECLINE_NOT_LOADABLE, "declined: the server does not serve the keep model") \
    X(OBSERVE_ENV, "observe-only: RESIDENCY opt-out") \
    X(OBSERVE_TARGET, "observe-only: target is user-managed") \
    X(PROBE_FAILED, "observe: the resident listing failed")
/* Why a plan was made. */
typedef enum rsd_reason {
#define RSDI_X(n, s) RSD_REASON_##n,
    RSD_REASONS(RSDI_X)
#undef RSDI_X
    RSD_REASON_NUM
} rsd_reason;

/* Notice kinds (upstream names). X(NAME, "string"). */
#define RSD_NOTICE_KINDS(X) \
    X(NONE, "none") \
    X(CO_RESIDENT, "co-resident") \
    X(SWAP, "swap") \
    X(ABOUT_TO_EVICT, "about-to-evict") \
    X(STRESS, "stress") \
    X(WILL_NOT_FIT, "will-not-fit") \
    X(DEGRADED, "degraded")
/* Kind of an operator notice. */
typedef enum rsd_notice_kind {
#define RSDI_X(n, s) RSD_NOTICE_##n,
    RSD_NOTICE_KINDS(RSDI_X)
#undef RSDI_X
    RSD_NOTICE_KIND_NUM
} rsd_notice_kind;

/* Notice levels. X(NAME, "string"). */
#define RSD_NOTICE_LEVELS(X) X(NONE, "none") X(INFO, "info") X(WARNING, "warning") X(ERROR, "error")
/* Severity of an operator notice. */
typedef enum rsd_notice_level {
#define RSDI_X(n, s) RSD_LEVEL_##n,
    RSD_NOTICE_LEVELS(RSDI_X)
#undef RSDI_X
    RSD_LEVEL_NUM
} rsd_notice_level;

/* Message templates: X(NAME, "string"); the text is in rsd_notice_format. */
#define RSD_NOTICE_MSGS(X) \
    X(NONE, "none") \
    X(CONTEXT_OVER_MAX, "context-over-max") \
    X(SPLIT, "split") \
    X(OVER_CAPACITY, "over-capacity") \
    X(SERVES_ALONGSIDE, "serves-alongside") \
    X(LOADING_ALONGSIDE, "loading-alongside") \
    X(DECLINE_PINNED_KEEP, "decline-pinned-keep") \
    X(DECLINE_ALL_PINNED, "decline-all-pinned") \
    X(EVICT_CONFIG, "evict-config") \
    X(EVICT_OURS, "evict-ours") \
    X(EVICT_FOREIGN, "evict-foreign") \
    X(CONTEXT_CLAMPED, "context-clamped") \
    X(NOT_LOADABLE, "not-loadable")
/* Which message a notice carries. */
typedef enum rsd_notice_msg {
#define RSDI_X(n, s) RSD_MSG_##n,
    RSD_NOTICE_MSGS(RSDI_X)
#undef RSDI_X
    RSD_MSG_NUM
} rsd_notice_msg;

/* Configured roles (R12), in precedence order of collection. */
#define RSD_ROLES(X) \
    X(NONE, "none", "a configured model") \
    X(CHAT, "chat", "the chat model") \
    X(MEMORY, "memory", "the memory model") \
    X(WORKER, "worker", "a worker model") \
    X(TARGET_DEFAULT, "target-default", "a target default model")
/* Role of a configured (protected) model; NONE = configured, role unknown. */
typedef enum rsd_role {
#define RSDI_X(n, s, p) RSD_ROLE_##n,
    RSD_ROLES(RSDI_X)
#undef RSDI_X
    RSD_ROLE_NUM
} rsd_role;

/* Reconcile strategies; DEFAULT (zero) means ROUTER. */
typedef enum rsd_strategy {
    RSD_STRATEGY_DEFAULT = 0,
    RSD_STRATEGY_ROUTER,    /* llama.cpp router: count capacity, evict before load */
    RSD_STRATEGY_JIT,       /* LM Studio: load, evict from fallback only on failure */
    RSD_STRATEGY_SCHEDULER, /* Ollama: release our own stragglers only */
    RSD_STRATEGY_NUM
} rsd_strategy;

/* Observe-only opt-outs (R34, R35); NONE (zero) = managed. */
typedef enum rsd_optout {
    RSD_OPTOUT_NONE = 0,  /* managed: may load and evict */
    RSD_OPTOUT_ENV,       /* RESIDENCY=observe|off|0|false|user|user-managed */
    RSD_OPTOUT_TARGET,    /* the target is marked user-managed */
    RSD_OPTOUT_NUM
} rsd_optout;

/* How a resident is protected from eviction. */
typedef enum rsd_protection {
    RSD_PROTECT_NONE = 0,
    RSD_PROTECT_TAG,    /* tag pinned:true or role:scout, or rsd_resident.pinned */
    RSD_PROTECT_CONFIG  /* id or alias listed in rsd_facts.protected_models */
} rsd_protection;

/* One loaded model as the server reports it (R4). Strings are views the caller
   keeps alive while the facts and their plan are in use. */
typedef struct rsd_resident {
    rsd_str model_id;                   /* required, 1..RSD_MODEL_ID_MAX-1 bytes */
    rsd_str aliases[RSD_MAX_ALIASES];   /* other ids of the same model; empty ones ignored */
    int n_aliases;                      /* 0..RSD_MAX_ALIASES */
    rsd_str tags[RSD_MAX_TAGS];         /* server tags (llama.cpp presets) */
    int n_tags;                         /* 0..RSD_MAX_TAGS */
    uint64_t size_vram_bytes;           /* GPU-resident bytes, valid if has_size_vram */
    uint64_t size_bytes;                /* total weight bytes, valid if has_size */
    bool has_size_vram;                 /* absent sizes are never zero (R5) */
    bool has_size;
    bool loaded_by_us;                  /* attribution: we loaded it (R13) */
    bool pinned;                        /* protect as if tagged pinned:true */
} rsd_resident;

/* One configured model id with its role (R9). */
typedef struct rsd_protected_model {
    rsd_str model_id;  /* trimmed by rsd_decide; empty or overlong entries are skipped */
    rsd_role role;     /* RSD_ROLE_NONE = bare id, role unknown */
} rsd_protected_model;

/* Everything the decision needs (R14). Zeroed fields mean: router, capacity
   unknown, no context given, default clamp ceiling, managed. */
typedef struct rsd_facts {
    rsd_strategy strategy;
    rsd_optout optout;                  /* see rsd_optout_resolve */
    rsd_str target_id;                  /* for messages */
    rsd_str runtime_id;                 /* for messages/callers; not interpreted */
    rsd_str keep;                       /* the model to make resident (required) */
    rsd_str keep_aliases[RSD_MAX_ALIASES];
    int n_keep_aliases;
    rsd_str keep_tags[RSD_MAX_TAGS];    /* the keep's tags as the server lists them */
    int n_keep_tags;
    bool keep_pinned;                   /* keep will be tag-pinned (R26), besides keep_tags */
    const rsd_resident *residents;      /* what is loaded (loaded/loading/sleeping) */
    int n_residents;                    /* 0..RSD_MAX_RESIDENTS */
    const rsd_protected_model *protected_models; /* configured ids (R9-R12) */
    int n_protected;                    /* 0..RSD_MAX_PROTECTED */
    uint32_t max_instances;             /* server capacity; 0 = unknown */
    uint32_t context_length;            /* requested load context; 0 = none */
    uint32_t model_max_context;         /* keep's context limit; 0 = unknown */
    uint32_t context_ceiling;           /* clamp ceiling; 0 = RSD_FIT_CEILING_DEFAULT */
} rsd_facts;

/* Per-resident classification, index-aligned with rsd_facts.residents. */
typedef struct rsd_resident_class {
    uint8_t is_keep;       /* shares an id with the keep model */
    uint8_t protection;    /* rsd_protection of its identity group */
    uint8_t role;          /* rsd_role when config-protected */
    uint8_t ours;          /* loaded_by_us (any member of its group) */
    uint8_t evict;         /* planned (or, when observing, would be) evicted */
    uint8_t group;         /* index of its identity group's representative */
} rsd_resident_class;

/* Detail fields present on a notice (bit mask). */
enum {
    RSD_DETAIL_REQUESTED_CONTEXT = 1u << 0,
    RSD_DETAIL_MODEL_MAX_CONTEXT = 1u << 1,
    RSD_DETAIL_LOAD_CONTEXT = 1u << 2,
    RSD_DETAIL_RESIDENT_VRAM_BYTES = 1u << 3,
    RSD_DETAIL_RESIDENT_TOTAL_BYTES = 1u << 4,
    RSD_DETAIL_RESIDENT_COUNT = 1u << 5,
    RSD_DETAIL_MAX_INSTANCES = 1u << 6,
    RSD_DETAIL_FREED_VRAM_BYTES = 1u << 7,
    RSD_DETAIL_SWAPPED_OUT = 1u << 8,     /* the subject's model id */
    RSD_DETAIL_CONFIG_PROTECTED = 1u << 9,
    RSD_DETAIL_ROLE = 1u << 10
};

/* An operator notice (R16). Its text comes from rsd_notice_format. */
typedef struct rsd_notice {
    rsd_notice_kind kind;
    rsd_notice_level level;
    rsd_notice_msg msg;
    bool observe_only;        /* observe mode: what would have happened; nothing did */
    int subject;              /* index into rsd_facts.residents, or -1 */
    uint32_t detail;          /* RSD_DETAIL_* bits: which fields below are set */
    uint32_t requested_context, model_max_context, load_context;
    uint32_t resident_count, max_instances;
    uint64_t resident_vram_bytes, resident_total_bytes, freed_vram_bytes;
    bool config_protected;
    rsd_role role;
} rsd_notice;

/* The plan (R15 + W18). Index lists refer to rsd_facts.residents; the plan is
   meaningful only together with the facts it came from. */
typedef struct rsd_plan {
    rsd_decision decision;
    rsd_reason reason;
    rsd_decision would;       /* observe: what a managed run would decide; else == decision */
    bool keep_resident;       /* a resident matches the keep model */
    int keep_index;           /* first resident matching the keep, or -1 */
    uint32_t resident_count;  /* rsd_facts.n_residents */
    int slots_needed;         /* router, capacity known: slots to free (count + 1 - max), 0 if one is free */
    uint32_t load_context;    /* context to load with (clamped); 0 = no context given */
    int n_evict;              /* unload these, in order, before loading */
    int16_t evict[RSD_MAX_RESIDENTS];
    int n_fallback;           /* jit: unload these in order if the load fails */
    int16_t fallback[RSD_MAX_RESIDENTS];
    int n_blocked;            /* decline-pinned-keep: configured models it would strand */
    int16_t blocked[RSD_MAX_RESIDENTS];
    int n_notices;
    rsd_notice notices[RSD_MAX_NOTICES];
    rsd_resident_class cls[RSD_MAX_RESIDENTS];
} rsd_plan;

/* Decide what to do (R21-R33, W8, W18, W19). Returns RSD_OK, or <0 for bad facts
   (RSD_ERR_ARG, RSD_ERR_RESIDENTS_LIMIT, RSD_ERR_MODEL_ID); *out is always written. */
RSD_API int rsd_decide(const rsd_facts *facts, rsd_plan *out);
/* Loadability gate (R45, R64-R65): the driver found, from the listing it already
   has, that the server does not serve the keep model. Turns a plan that would
   evict into a decline (reason DECLINE_NOT_LOADABLE), drops its evictions and
   notices, and leaves one will-not-fit notice ("... does not serve ..."); the
   operator never sees eviction notices for a refused swap. models_listed goes
   into the message. Returns RSD_OK, or RSD_ERR_ARG. */
RSD_API int rsd_plan_decline_unloadable(const rsd_facts *facts, rsd_plan *plan, uint32_t models_listed);
/* Render a notice's operator message into buf (always NUL-terminated when cap > 0);
   returns the full length (snprintf-like) or <0. */
RSD_API int rsd_notice_format(const rsd_facts *facts, const rsd_plan *plan,
                              const rsd_notice *notice, char *buf, size_t cap);
/* "already-resident", ...; never NULL. */
RSD_API const char *rsd_decision_str(int decision);
/* Reason text; never NULL. */
RSD_API const char *rsd_reason_str(int reason);
/* Bare reason name, e.g. "EVICT_CONFIG"; never NULL. */
RSD_API const char *rsd_reason_name(int reason);
/* "co-resident", "swap", ...; never NULL. */
RSD_API const char *rsd_notice_kind_str(int kind);
/* "info", "warning", "error"; never NULL. */
RSD_API const char *rsd_notice_level_str(int level);
/* Template name of a notice message; never NULL. */
RSD_API const char *rsd_notice_msg_str(int msg);
/* "chat", "memory", "worker", "target-default", "none"; never NULL. */
RSD_API const char *rsd_role_str(int role);
/* "the chat model", ... "a configured model"; never NULL. */
RSD_API const char *rsd_role_phrase(int role);
/* True iff the tags protect a model: exact "pinned:true" or "role:scout" (R8). */
RSD_API bool rsd_tags_protect(const rsd_str *tags, int n_tags);

/* The operator's settings, for rsd_protected_collect (R12). */
typedef struct rsd_role_sources {
    rsd_str chat;                     /* orchestrator model */
    rsd_str memory;                   /* background model */
    rsd_str worker_default;           /* worker default model */
    const rsd_str *worker_profiles;   /* every worker profile's model, in order */
    int n_worker_profiles;
    const rsd_str *target_defaults;   /* every target's default model, in order */
    int n_target_defaults;
} rsd_role_sources;

/* Collect protected ids with roles, first claim wins, trimmed, empty skipped (R12).
   Returns the count written, or RSD_ERR_BUFFER when cap is too small. */
RSD_API int rsd_protected_collect(const rsd_role_sources *src, rsd_protected_model *out, int cap);

/* True iff RESIDENCY's value asks for observe-only (R34): observe|off|0|false|user|
   user-managed, trimmed, any case. NULL/empty/other = managed. */
RSD_API bool rsd_env_observe(const char *env_value);
/* True iff a target lifecycle value is "user-managed" (trimmed, any case) (R35). */
RSD_API bool rsd_lifecycle_user_managed(const char *lifecycle);
/* Combined verdict (R35): TARGET if user_managed, else ENV if the env value opts out, else NONE. */
RSD_API rsd_optout rsd_optout_resolve(const char *env_value, bool target_user_managed);
/* Same, reading getenv("RESIDENCY") itself. */
RSD_API rsd_optout rsd_optout_from_env(bool target_user_managed);

/* Normalise a target key (W9): lower-case scheme and host, drop a default port
   (:80 for http, :443 for https), drop query, fragment and trailing '/' of the
   path; agrees with rsd_url_key and is idempotent on its output. Text before
   "scheme://" (e.g. "llamacpp|") is kept, lower-cased. Returns the length, or
   RSD_ERR_BUFFER if it does not fit cap (incl. NUL), RSD_ERR_ARG for NULL out. */
RSD_API int rsd_target_key_normalise(rsd_str raw, char *out, size_t cap);

/* One decision-cache slot; treat as opaque. */
typedef struct rsd_cache_entry {
    char key[RSD_TARGET_KEY_MAX];
    char model[RSD_MODEL_ID_MAX];
    uint64_t at_ms;           /* when stored */
    uint64_t used_ms;         /* last hit, for LRU replacement */
    uint64_t generation;      /* mutation generation it was stored under */
    rsd_decision decision;
    rsd_reason reason;
    bool used;
} rsd_cache_entry;

/* Decision cache per (normalised target key, model) with a TTL (W2-W4, W9).
   Caller-owned, fixed size, no allocation. Zeroed = empty, TTL 60 s. */
typedef struct rsd_decision_cache {
    uint32_t ttl_ms;          /* 0 = RSD_DECISION_CACHE_TTL_MS */
    rsd_cache_entry entries[RSD_DECISION_CACHE_MAX];
} rsd_decision_cache;

/* A cache hit. */
typedef struct rsd_cache_hit {
    rsd_decision decision;    /* ALREADY_RESIDENT (after a good load too), DECLINE or OBSERVE */
    rsd_reason reason;
    uint64_t age_ms;
} rsd_cache_hit;

/* Look up (key, model) at now_ms under the given mutation generation. Returns 1 on
   a live hit (hit filled if non-NULL), 0 on a miss, <0 on bad arguments. */
RSD_API int rsd_cache_lookup(rsd_decision_cache *c, rsd_str target_key, rsd_str model,
                             uint64_t now_ms, uint64_t generation, rsd_cache_hit *hit);
/* Store the outcome of a reconcile. mutation_failed = an unload or the load failed.
   Returns 1 if stored, 0 if the plan must not be cached (failed mutation, probe
   failure, NONE), <0 on bad arguments or an overlong key/model. */
RSD_API int rsd_cache_store(rsd_decision_cache *c, rsd_str target_key, rsd_str model,
                            const rsd_plan *plan, bool mutation_failed, uint64_t now_ms,
                            uint64_t generation);
/* Drop (key, model), or every entry of key when model is empty. Returns the count. */
RSD_API int rsd_cache_invalidate(rsd_decision_cache *c, rsd_str target_key, rsd_str model);
/* ==== >>reconcile end ===================================================== */

/* ==== >>fit (declarations) ================================================ */
/* Context-fit clamp (S29, S30): cap a load's context while other models share
   the server. Manual: [doc:fit] above. */
enum {
    RSD_FIT_CEILING_DEFAULT = 131072  /* default ceiling, RESIDENCY_CORESIDENT_CONTEXT */
};
/* Ceiling value meaning "clamp disabled" (any request fits under it). */
#define RSD_FIT_CEILING_OFF 0xFFFFFFFFu

/* Context to load with: requested when n_other_residents == 0, the ceiling is
   RSD_FIT_CEILING_OFF, or requested <= ceiling; else ceiling. Never raises a
   request. ceiling 0 means RSD_FIT_CEILING_DEFAULT. */
RSD_API uint32_t rsd_fit_context(uint32_t requested, int n_other_residents, uint32_t ceiling);
/* Parse RESIDENCY_CORESIDENT_CONTEXT (S30): NULL/empty -> default; off|0|false
   (trimmed, any case) -> RSD_FIT_CEILING_OFF; a positive integer prefix -> that
   (saturating at 0xFFFFFFFE); anything else -> RSD_FIT_CEILING_DEFAULT. */
RSD_API uint32_t rsd_fit_ceiling_parse(const char *env_value);
/* Same, reading getenv("RESIDENCY_CORESIDENT_CONTEXT") itself. */
RSD_API uint32_t rsd_fit_ceiling_from_env(void);
/* ==== >>fit end =========================================================== */

/* ==== >>pool (declarations) =============================================== */

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
#include <stdlib.h> /* strtod */
#include <float.h>  /* DBL_MAX */

/* 1 for bytes that end the plain run of a string body: '"', '\\', < 0x20, >= 0x80. */
static const uint8_t rsdi_json_strclass[256] = {
    1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,
    0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,
    1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,
    1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,
    1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,
};

#define RSDI_JSON_ISWS(c) ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t')
#define RSDI_JSON_ISDIGIT(c) ((unsigned)((c) - '0') < 10u)

RSDI_PRIVATE int rsdi_json_hexval(unsigned c) {
    if (c - '0' < 10u) return (int)(c - '0');
    c |= 0x20u;
    if (c - 'a' < 6u) return (int)(c - 'a' + 10);
    return -1;
}

/* Four hex digits at *pp: 0 and *cp, RSD_ERR_TRUNCATED, or RSD_ERR_JSON (*pp at the bad byte). */
RSDI_PRIVATE int rsdi_json_hex4(const unsigned char **pp, const unsigned char *e, unsigned *cp) {
    const unsigned char *p = *pp;
    unsigned v = 0;
    int k, h;
    for (k = 0; k < 4; k++) {
        if (p + k >= e) { *pp = e; return RSD_ERR_TRUNCATED; }
        h = rsdi_json_hexval(p[k]);
        if (h < 0) { *pp = p + k; return RSD_ERR_JSON; }
        v = (v << 4) | (unsigned)h;
    }
    *pp = p + 4;
    *cp = v;
    return 0;
}

/* Validates one UTF-8 sequence starting at the lead byte *pp (>= 0x80). */
RSDI_PRIVATE int rsdi_json_utf8(const unsigned char **pp, const unsigned char *e) {
    const unsigned char *p = *pp;
    unsigned c = p[0], lo = 0x80, hi = 0xBF;
    int need, k;
    if (c < 0xC2) return RSD_ERR_JSON;
    if (c < 0xE0) need = 1;
    else if (c < 0xF0) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;        /* overlong */
        else if (c == 0xED) hi = 0x9F;   /* UTF-16 surrogates */
    } else if (c < 0xF5) {
        need = 3;
        if (c == 0xF0) lo = 0x90;        /* overlong */
        else if (c == 0xF4) hi = 0x8F;   /* > U+10FFFF */
    } else return RSD_ERR_JSON;
    for (k = 1; k <= need; k++) {
        if (p + k >= e) { *pp = e; return RSD_ERR_TRUNCATED; }
        if (p[k] < lo || p[k] > hi) { *pp = p + k; return RSD_ERR_JSON; }
        lo = 0x80;
        hi = 0xBF;
    }
    *pp = p + need + 1;
    return 0;
}

/* Scans a string body from *pp (just past the opening quote) to the closing quote.
   On success *pp points at the closing quote. On error *pp is the bad byte. */
RSDI_PRIVATE int rsdi_json_scan_str(const unsigned char **pp, const unsigned char *e,
                                    uint8_t *flags, const char **what) {
    const unsigned char *p = *pp;
    unsigned c, cp, lo;
    int r;
    for (;;) {
        /* Plain run, 8 bytes at a time: stop at '"', '\\', < 0x20 or >= 0x80. */
        while (e - p >= 8) {
            uint64_t w, t1, t2, m;
            const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
            memcpy(&w, p, 8);
            t1 = w ^ (ones * 0x22u);
            t2 = w ^ (ones * 0x5Cu);
            m = ((t1 - ones) & ~t1) | ((t2 - ones) & ~t2) | ((w - ones * 0x20u) & ~w) | w;
            if (m & high) break;
            p += 8;
        }
        while (p < e && !rsdi_json_strclass[*p]) p++;
        if (RSDI_UNLIKELY(p >= e)) { *pp = e; *what = "unterminated string"; return RSD_ERR_TRUNCATED; }
        c = *p;
        if (RSDI_LIKELY(c == '"')) { *pp = p; return 0; }
        if (c == '\\') {
            *flags |= RSD_JSON_F_ESCAPED;
            if (p + 1 >= e) { *pp = e; *what = "unterminated escape"; return RSD_ERR_TRUNCATED; }
            c = p[1];
            if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                c == 'r' || c == 't') {
                p += 2;
                continue;
            }
            if (c != 'u') { *pp = p + 1; *what = "invalid escape"; return RSD_ERR_JSON; }
            p += 2;
            r = rsdi_json_hex4(&p, e, &cp);
            if (r) { *pp = p; *what = "bad \\u escape"; return r; }
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                *pp = p - 6; *what = "lone low surrogate"; return RSD_ERR_JSON;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p >= e) { *pp = e; *what = "high surrogate at end of input"; return RSD_ERR_TRUNCATED; }
                if (p[0] != '\\') { *pp = p; *what = "lone high surrogate"; return RSD_ERR_JSON; }
                if (p + 1 >= e) { *pp = e; *what = "high surrogate at end of input"; return RSD_ERR_TRUNCATED; }
                if (p[1] != 'u') { *pp = p; *what = "lone high surrogate"; return RSD_ERR_JSON; }
                p += 2;
                r = rsdi_json_hex4(&p, e, &lo);
                if (r) { *pp = p; *what = "bad \\u escape"; return r; }
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    *pp = p - 6; *what = "high surrogate not followed by a low one"; return RSD_ERR_JSON;
                }
            }
            continue;
        }
        if (c < 0x20) { *pp = p; *what = "control character in string"; return RSD_ERR_JSON; }
        r = rsdi_json_utf8(&p, e);
        if (r) { *pp = p; *what = "invalid UTF-8"; return r; }
    }
}

/* Scans a number at *pp; on success *pp is one past it and *flags has F_INT or not. */
RSDI_PRIVATE int rsdi_json_scan_num(const unsigned char **pp, const unsigned char *e,
                                    uint8_t *flags, const char **what) {
    const unsigned char *p = *pp;
    *flags = RSD_JSON_F_INT;
    if (*p == '-') {
        p++;
        if (p >= e) { *pp = e; *what = "number ends after '-'"; return RSD_ERR_TRUNCATED; }
    }
    if (*p == '0') {
        p++;
        if (p < e && RSDI_JSON_ISDIGIT(*p)) { *pp = p; *what = "leading zero"; return RSD_ERR_JSON; }
    } else if (RSDI_JSON_ISDIGIT(*p)) {
        p++;
        while (p < e && RSDI_JSON_ISDIGIT(*p)) p++;
    } else {
        *pp = p; *what = "expected a digit"; return RSD_ERR_JSON;
    }
    if (p < e && *p == '.') {
        *flags = 0;
        p++;
        if (p >= e) { *pp = e; *what = "number ends after '.'"; return RSD_ERR_TRUNCATED; }
        if (!RSDI_JSON_ISDIGIT(*p)) { *pp = p; *what = "expected a digit after '.'"; return RSD_ERR_JSON; }
        while (p < e && RSDI_JSON_ISDIGIT(*p)) p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *flags = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e) { *pp = e; *what = "number ends in its exponent"; return RSD_ERR_TRUNCATED; }
        if (!RSDI_JSON_ISDIGIT(*p)) { *pp = p; *what = "expected an exponent digit"; return RSD_ERR_JSON; }
        while (p < e && RSDI_JSON_ISDIGIT(*p)) p++;
    }
    *pp = p;
    return 0;
}

/* Literal `lit` (n bytes) at *pp. */
RSDI_PRIVATE int rsdi_json_scan_lit(const unsigned char **pp, const unsigned char *e,
                                    const char *lit, int n) {
    const unsigned char *p = *pp;
    int k;
    for (k = 0; k < n; k++) {
        if (p + k >= e) { *pp = e; return RSD_ERR_TRUNCATED; }
        if (p[k] != (unsigned char)lit[k]) { *pp = p + k; return RSD_ERR_JSON; }
    }
    *pp = p + n;
    return 0;
}

#define RSDI_JSON_SKIP_WS() while (p < e && RSDI_JSON_ISWS(*p)) p++
#define RSDI_JSON_FAIL(c_, w_) do { code = (c_); what = (w_); goto fail; } while (0)
#define RSDI_JSON_EMIT(type_, flags_, start_, end_) do { \
    if (toks) { \
        rsd_json_tok *t_; \
        if (RSDI_UNLIKELY(n >= cap)) RSDI_JSON_FAIL(RSD_ERR_JSON_TOKENS, "token array full"); \
        t_ = toks + n; \
        t_->type = (uint8_t)(type_); t_->flags = (uint8_t)(flags_); t_->reserved = 0; \
        t_->start = (uint32_t)(start_); t_->end = (uint32_t)(end_); \
        t_->parent = cur; t_->next = (int32_t)(n + 1); t_->size = 0; \
        if (cur >= 0) toks[cur].size++; \
    } \
    n++; \
} while (0)

RSD_API int rsd_json_parse_ex(rsd_json_doc *doc, const char *src, size_t len, rsd_json_tok *toks,
                              uint32_t cap, const rsd_json_desc *desc) {
    const unsigned char *s, *p, *e, *q;
    uint32_t n = 0, depth = 0, max_depth = RSD_JSON_MAX_DEPTH;
    size_t max_bytes = RSD_JSON_MAX_BYTES;
    int32_t cur = -1;   /* innermost open container, or the key whose value is being parsed */
    unsigned char objbits[RSD_JSON_DEPTH_CAP / 8];  /* bit d: container at depth d is an object */
    int in_obj = 0, code = RSD_OK, r;
    const char *what = "ok";
    unsigned c;
    uint8_t flags;
    size_t off, k;

    if (!doc) return RSD_ERR_ARG;
    memset(doc, 0, sizeof *doc);
    doc->err.what = what;
    if (desc) {
        if (desc->max_depth > RSD_JSON_DEPTH_CAP) return doc->err.code = RSD_ERR_ARG;
        if (desc->max_depth) max_depth = desc->max_depth;
        if (desc->max_bytes && desc->max_bytes < max_bytes) max_bytes = desc->max_bytes;
    }
    if (!src) {
        if (len) return doc->err.code = RSD_ERR_ARG;
        src = "";
    }
    doc->src = src;
    doc->len = len;
    doc->toks = toks;
    doc->cap = toks ? cap : 0;
    s = p = (const unsigned char *)src;
    e = s + len;
    if (len > max_bytes) { p = s + max_bytes; RSDI_JSON_FAIL(RSD_ERR_TOO_LARGE, "input too large"); }

value:
    RSDI_JSON_SKIP_WS();
    if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, "expected a value");
    c = *p;
    if (c == '"') {
        q = ++p;
        flags = 0;
        r = rsdi_json_scan_str(&p, e, &flags, &what);
        if (RSDI_UNLIKELY(r)) { code = r; goto fail; }
        RSDI_JSON_EMIT(RSD_JSON_STRING, flags, q - s, p - s);
        p++;
        goto after_value;
    }
    if (c == '-' || RSDI_JSON_ISDIGIT(c)) {
        q = p;
        r = rsdi_json_scan_num(&p, e, &flags, &what);
        if (RSDI_UNLIKELY(r)) { code = r; goto fail; }
        RSDI_JSON_EMIT(RSD_JSON_NUMBER, flags, q - s, p - s);
        goto after_value;
    }
    if (c == '{' || c == '[') {
        if (RSDI_UNLIKELY(depth >= max_depth)) RSDI_JSON_FAIL(RSD_ERR_JSON_DEPTH, "nesting too deep");
        RSDI_JSON_EMIT(c == '{' ? RSD_JSON_OBJECT : RSD_JSON_ARRAY, 0, p - s, 0);
        if (toks) cur = (int32_t)(n - 1);
        in_obj = c == '{';
        if (in_obj) objbits[depth >> 3] = (unsigned char)(objbits[depth >> 3] | (1u << (depth & 7)));
        else objbits[depth >> 3] = (unsigned char)(objbits[depth >> 3] & ~(1u << (depth & 7)));
        depth++;
        p++;
        RSDI_JSON_SKIP_WS();
        if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, in_obj ? "unclosed object" : "unclosed array");
        if (in_obj) {
            if (*p == '}') { p++; goto close; }
            goto key;
        }
        if (*p == ']') { p++; goto close; }
        goto value;
    }
    q = p;
    if (c == 't') r = rsdi_json_scan_lit(&p, e, "true", 4), flags = 1;
    else if (c == 'f') r = rsdi_json_scan_lit(&p, e, "false", 5), flags = 0;
    else if (c == 'n') r = rsdi_json_scan_lit(&p, e, "null", 4), flags = 0;
    else if (c == ']' && depth && !in_obj) RSDI_JSON_FAIL(RSD_ERR_JSON, "trailing comma");
    else RSDI_JSON_FAIL(RSD_ERR_JSON, "unexpected character");
    if (r) RSDI_JSON_FAIL(r, r == RSD_ERR_TRUNCATED ? "literal ends early" : "bad literal");
    RSDI_JSON_EMIT(c == 'n' ? RSD_JSON_NULL : RSD_JSON_BOOL, 0, q - s, p - s);
    goto after_value;

key:
    /* p < e and *p is not whitespace */
    if (RSDI_UNLIKELY(*p != '"')) RSDI_JSON_FAIL(RSD_ERR_JSON, *p == '}' ? "trailing comma" : "expected a string key");
    q = ++p;
    flags = RSD_JSON_F_KEY;
    r = rsdi_json_scan_str(&p, e, &flags, &what);
    if (RSDI_UNLIKELY(r)) { code = r; goto fail; }
    RSDI_JSON_EMIT(RSD_JSON_STRING, flags, q - s, p - s);
    if (toks) cur = (int32_t)(n - 1);
    p++;
    RSDI_JSON_SKIP_WS();
    if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, "expected ':'");
    if (RSDI_UNLIKELY(*p != ':')) RSDI_JSON_FAIL(RSD_ERR_JSON, "expected ':'");
    p++;
    goto value;

close:
    /* p is one past the closer of the container at depth - 1 */
    depth--;
    if (toks) {
        toks[cur].end = (uint32_t)(p - s);
        toks[cur].next = (int32_t)n;
        cur = toks[cur].parent;
    }
    if (depth) in_obj = (objbits[(depth - 1) >> 3] >> ((depth - 1) & 7)) & 1;

after_value:
    if (toks && cur >= 0 && (toks[cur].flags & RSD_JSON_F_KEY)) {
        toks[cur].next = (int32_t)n;
        cur = toks[cur].parent;
    }
    RSDI_JSON_SKIP_WS();
    if (RSDI_UNLIKELY(depth == 0)) {
        if (p != e) RSDI_JSON_FAIL(RSD_ERR_JSON, "unexpected data after the value");
        goto done;
    }
    if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, in_obj ? "unclosed object" : "unclosed array");
    c = *p++;
    if (c == ',') {
        RSDI_JSON_SKIP_WS();
        if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, "expected a value after ','");
        if (in_obj) goto key;
        goto value;
    }
    if (c == (in_obj ? '}' : ']')) goto close;
    p--;
    RSDI_JSON_FAIL(RSD_ERR_JSON, in_obj ? "expected ',' or '}'" : "expected ',' or ']'");

done:
    doc->count = n;
    if (toks && n < cap) {
        memset(toks + n, 0, sizeof *toks);
        toks[n].parent = -1;
        toks[n].next = (int32_t)n;
    }
    return (int)n;

fail:
    if (p > e) p = e;
    off = (size_t)(p - s);
    doc->count = 0;
    doc->err.code = code;
    doc->err.offset = off;
    doc->err.what = what;
    doc->err.line = 1;
    doc->err.col = 1;
    for (k = 0; k < off; k++) {
        if (s[k] == '\n') { doc->err.line++; doc->err.col = 1; }
        else doc->err.col++;
    }
    return code;
}

RSD_API int rsd_json_parse(rsd_json_doc *doc, const char *s, size_t len, rsd_json_tok *toks,
                           uint32_t cap) {
    return rsd_json_parse_ex(doc, s, len, toks, cap, NULL);
}

#undef RSDI_JSON_SKIP_WS
#undef RSDI_JSON_FAIL
#undef RSDI_JSON_EMIT

/* ---- accessors ---- */
RSDI_PRIVATE const rsd_json_tok *rsdi_json_tok(const rsd_json_doc *d, int i) {
    if (!d || !d->toks || i < 0 || (uint32_t)i >= d->count) return NULL;
    return d->toks + i;
}

RSD_API rsd_json_type rsd_json_type_of(const rsd_json_doc *doc, int i) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    return t ? (rsd_json_type)t->type : RSD_JSON_INVALID;
}

RSD_API int rsd_json_size(const rsd_json_doc *doc, int i) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    return t ? (int)t->size : 0;
}

RSD_API int rsd_json_child(const rsd_json_doc *doc, int i) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    return t && t->size ? i + 1 : -1;
}

RSD_API int rsd_json_next(const rsd_json_doc *doc, int i) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i), *pt;
    if (!t || !(pt = rsdi_json_tok(doc, t->parent))) return -1;
    return t->next < pt->next ? t->next : -1;
}

RSD_API int rsd_json_parent(const rsd_json_doc *doc, int i) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    return t ? t->parent : -1;
}

RSD_API rsd_str rsd_json_view(const rsd_json_doc *doc, int i) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    rsd_str v;
    v.ptr = "";
    v.len = 0;
    if (t && t->end >= t->start && t->end <= doc->len) {
        v.ptr = doc->src + t->start;
        v.len = t->end - t->start;
    }
    return v;
}

/* Appends code point cp as UTF-8 to out; returns the byte count. */
RSDI_PRIVATE int rsdi_json_put_utf8(unsigned char *out, unsigned cp) {
    if (cp < 0x80) { out[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes one escape at p (p[0] == '\\', p < e); writes 1..4 bytes to out and
   returns the position after it. Defensive: malformed input decodes to '?'. */
RSDI_PRIVATE const unsigned char *rsdi_json_unesc(const unsigned char *p, const unsigned char *e,
                                                 unsigned char *out, int *nout) {
    unsigned cp = 0, lo = 0;
    *nout = 1;
    if (e - p < 2) { out[0] = '?'; return e; }
    switch (p[1]) {
    case '"': out[0] = '"'; return p + 2;
    case '\\': out[0] = '\\'; return p + 2;
    case '/': out[0] = '/'; return p + 2;
    case 'b': out[0] = '\b'; return p + 2;
    case 'f': out[0] = '\f'; return p + 2;
    case 'n': out[0] = '\n'; return p + 2;
    case 'r': out[0] = '\r'; return p + 2;
    case 't': out[0] = '\t'; return p + 2;
    case 'u': break;
    default: out[0] = '?'; return p + 2;
    }
    p += 2;
    if (rsdi_json_hex4(&p, e, &cp)) { out[0] = '?'; return p < e ? p + 1 : e; }
    if (cp >= 0xD800 && cp <= 0xDBFF && e - p >= 6 && p[0] == '\\' && p[1] == 'u') {
        const unsigned char *q = p + 2;
        if (!rsdi_json_hex4(&q, e, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p = q;
        }
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
    *nout = rsdi_json_put_utf8(out, cp);
    return p;
}

RSD_API int rsd_json_str(const rsd_json_doc *doc, int i, char *buf, size_t cap, size_t *len) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    const unsigned char *p, *e, *q;
    unsigned char tmp[4];
    size_t n = 0, run;
    int k;
    if (len) *len = 0;
    if (!t || t->type != RSD_JSON_STRING || t->end > doc->len || t->start > t->end)
        return RSD_ERR_JSON_TYPE;
    if (!buf) cap = 0;
    p = (const unsigned char *)doc->src + t->start;
    e = (const unsigned char *)doc->src + t->end;
    while (p < e) {
        q = p;
        while (q < e && *q != '\\') q++;
        run = (size_t)(q - p);
        if (run) {
            if (n < cap) memcpy(buf + n, p, cap - n < run ? cap - n : run);
            n += run;
            p = q;
            continue;
        }
        p = rsdi_json_unesc(p, e, tmp, &k);
        for (run = 0; run < (size_t)k; run++, n++)
            if (n < cap) buf[n] = (char)tmp[run];
    }
    if (len) *len = n;
    if (n >= cap) {
        if (cap) buf[cap - 1] = '\0';
        return RSD_ERR_BUFFER;
    }
    buf[n] = '\0';
    return RSD_OK;
}

RSD_API bool rsd_json_str_eq(const rsd_json_doc *doc, int i, const char *s) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    const unsigned char *p, *e, *q = (const unsigned char *)s;
    unsigned char tmp[4];
    int k, j;
    if (!t || !s || t->type != RSD_JSON_STRING || t->end > doc->len || t->start > t->end)
        return false;
    p = (const unsigned char *)doc->src + t->start;
    e = (const unsigned char *)doc->src + t->end;
    if (!(t->flags & RSD_JSON_F_ESCAPED)) {
        size_t n = (size_t)(e - p);
        /* the source holds no NUL, so strncmp == 0 proves s has >= n bytes */
        return memchr(p, 0, n) == NULL && strncmp(s, (const char *)p, n) == 0 && s[n] == '\0';
    }
    while (p < e) {
        if (*p != '\\') {
            if (*q != *p || *q == '\0') return false;
            p++, q++;
            continue;
        }
        p = rsdi_json_unesc(p, e, tmp, &k);
        for (j = 0; j < k; j++, q++)
            if (*q != tmp[j] || *q == '\0') return false;
    }
    return *q == '\0';
}

RSD_API int rsd_json_find(const rsd_json_doc *doc, int obj, const char *key) {
    const rsd_json_tok *t = rsdi_json_tok(doc, obj);
    int k;
    if (!t || t->type != RSD_JSON_OBJECT || !key) return -1;
    for (k = rsd_json_child(doc, obj); k >= 0; k = rsd_json_next(doc, k))
        if (rsd_json_str_eq(doc, k, key)) return rsd_json_child(doc, k);
    return -1;
}

RSD_API int rsd_json_at(const rsd_json_doc *doc, int arr, uint32_t idx) {
    const rsd_json_tok *t = rsdi_json_tok(doc, arr);
    int k;
    if (!t || t->type != RSD_JSON_ARRAY || idx >= t->size) return -1;
    for (k = rsd_json_child(doc, arr); k >= 0 && idx; idx--) k = rsd_json_next(doc, k);
    return k;
}

RSD_API int rsd_json_bool(const rsd_json_doc *doc, int i, bool *out) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    if (!t || t->type != RSD_JSON_BOOL || t->start >= doc->len) return RSD_ERR_JSON_TYPE;
    if (out) *out = doc->src[t->start] == 't';
    return RSD_OK;
}

RSD_API int rsd_json_int64(const rsd_json_doc *doc, int i, int64_t *out) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    const char *p, *e;
    uint64_t v = 0, lim;
    bool neg;
    if (!t || t->type != RSD_JSON_NUMBER || !(t->flags & RSD_JSON_F_INT) || t->end > doc->len ||
        t->start >= t->end)
        return RSD_ERR_JSON_TYPE;
    p = doc->src + t->start;
    e = doc->src + t->end;
    neg = *p == '-';
    if (neg) p++;
    lim = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
    for (; p < e; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (d > 9) return RSD_ERR_JSON_TYPE;
        if (v > (lim - d) / 10) return RSD_ERR_JSON_RANGE;
        v = v * 10 + d;
    }
    if (out) *out = neg ? (v == (uint64_t)1 << 63 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    return RSD_OK;
}

/* Correctly rounded conversion of a syntactically valid JSON number p[0..n).
   Exact fast path (Clinger) for <= 15 digits and |exp| <= 22; otherwise strtod on a
   rewritten copy without a decimal point, so the C locale's radix never matters. */
RSDI_PRIVATE int rsdi_json_num_to_double(const char *p, size_t n, double *out) {
    static const double pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    char buf[RSD_JSON_NUM_MAX_DIGITS + 32];
    const char *e = p + n;
    int nd = 0, sticky = 0, eneg = 0;
    int64_t exp10 = 0, ex = 0;
    bool neg = false, frac = false;
    double v;
    if (p < e && *p == '-') { neg = true; p++; }
    for (; p < e; p++) {
        char c = *p;
        if (c == '.') { frac = true; continue; }
        if (c < '0' || c > '9') break;
        if (frac) exp10--;
        if (nd == 0 && c == '0') continue;
        if (nd < RSD_JSON_NUM_MAX_DIGITS) buf[nd++] = c;
        else {
            exp10++;
            if (c != '0') sticky = 1;
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        for (; p < e && *p >= '0' && *p <= '9'; p++)
            if (ex < 100000000) ex = ex * 10 + (*p - '0');
        exp10 += eneg ? -ex : ex;
    }
    if (nd == 0) { *out = neg ? -0.0 : 0.0; return RSD_OK; }
    if (nd <= 15 && exp10 >= -22 && exp10 <= 22) {
        uint64_t m = 0;
        int k;
        for (k = 0; k < nd; k++) m = m * 10 + (uint64_t)(buf[k] - '0');
        v = (double)m;
        v = exp10 < 0 ? v / pow10[-exp10] : v * pow10[exp10];
    } else {
        if (sticky) { buf[nd++] = '1'; exp10--; }
        if (exp10 > 99999999) exp10 = 99999999;
        if (exp10 < -99999999) exp10 = -99999999;
        RSD_SNPRINTF(buf + nd, sizeof buf - (size_t)nd, "e%ld", (long)exp10);
        v = strtod(buf, NULL);
    }
    if (v > DBL_MAX) return RSD_ERR_JSON_RANGE;
    *out = neg ? -v : v;
    return RSD_OK;
}

RSD_API int rsd_json_double(const rsd_json_doc *doc, int i, double *out) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    double v = 0;
    int r;
    if (!t || t->type != RSD_JSON_NUMBER || t->end > doc->len || t->start >= t->end)
        return RSD_ERR_JSON_TYPE;
    r = rsdi_json_num_to_double(doc->src + t->start, t->end - t->start, &v);
    if (r == RSD_OK && out) *out = v;
    return r;
}

/* ---- writer ---- */
RSD_API void rsd_json_w_init(rsd_json_writer *w, char *buf, size_t cap) {
    if (!w) return;
    memset(w, 0, sizeof *w);
    w->buf = buf;
    w->cap = buf ? cap : 0;
    if (w->cap) buf[0] = '\0';
}

RSDI_PRIVATE int rsdi_jw_fail(rsd_json_writer *w, int err) {
    if (w->err == RSD_OK) w->err = err;
    return w->err;
}

RSDI_PRIVATE int rsdi_jw_put(rsd_json_writer *w, const char *s, size_t n) {
    if (RSDI_UNLIKELY(n > w->cap - w->len)) return rsdi_jw_fail(w, RSD_ERR_BUFFER);
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    return RSD_OK;
}

/* Comma and state checks before a value. */
RSDI_PRIVATE int rsdi_jw_value(rsd_json_writer *w) {
    uint64_t bit;
    if (w->err) return w->err;
    if (w->depth == 0) return w->done ? rsdi_jw_fail(w, RSD_ERR_STATE) : RSD_OK;
    bit = (uint64_t)1 << (w->depth - 1);
    if (w->is_obj & bit) {
        if (!w->after_key) return rsdi_jw_fail(w, RSD_ERR_STATE);
        w->after_key = false;
        return RSD_OK;
    }
    if (w->has_item & bit) {
        if (rsdi_jw_put(w, ",", 1)) return w->err;
    }
    w->has_item |= bit;
    return RSD_OK;
}

RSDI_PRIVATE int rsdi_jw_after(rsd_json_writer *w) {
    if (w->err) return w->err;
    if (w->depth == 0) w->done = true;
    return RSD_OK;
}

/* Escaped, quoted string; invalid UTF-8 fails with RSD_ERR_ARG (nothing kept). */
RSDI_PRIVATE int rsdi_jw_string(rsd_json_writer *w, const char *str, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)str, *e = p + n, *q;
    size_t mark = w->len;
    char esc[6];
    if (!str && n) return rsdi_jw_fail(w, RSD_ERR_ARG);
    if (!str) p = e = (const unsigned char *)"";
    if (rsdi_jw_put(w, "\"", 1)) return w->err;
    while (p < e) {
        q = p;
        while (q < e && !rsdi_json_strclass[*q]) q++;
        if (q > p && rsdi_jw_put(w, (const char *)p, (size_t)(q - p))) return w->err;
        p = q;
        if (p >= e) break;
        if (*p >= 0x80) {
            q = p;
            if (rsdi_json_utf8(&q, e)) {
                w->len = mark;
                return rsdi_jw_fail(w, RSD_ERR_ARG);
            }
            if (rsdi_jw_put(w, (const char *)p, (size_t)(q - p))) return w->err;
            p = q;
            continue;
        }
        esc[0] = '\\';
        switch (*p) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
            esc[4] = hex[*p >> 4]; esc[5] = hex[*p & 15];
            if (rsdi_jw_put(w, esc, 6)) return w->err;
            p++;
            continue;
        }
        if (rsdi_jw_put(w, esc, 2)) return w->err;
        p++;
    }
    return rsdi_jw_put(w, "\"", 1);
}

RSDI_PRIVATE int rsdi_jw_open(rsd_json_writer *w, bool obj) {
    uint64_t bit;
    if (rsdi_jw_value(w)) return w->err;
    if (w->depth >= RSD_JSON_WRITER_MAX_DEPTH) return rsdi_jw_fail(w, RSD_ERR_JSON_DEPTH);
    if (rsdi_jw_put(w, obj ? "{" : "[", 1)) return w->err;
    bit = (uint64_t)1 << w->depth;
    if (obj) w->is_obj |= bit;
    else w->is_obj &= ~bit;
    w->has_item &= ~bit;
    w->depth++;
    return RSD_OK;
}

RSDI_PRIVATE int rsdi_jw_close(rsd_json_writer *w, bool obj) {
    uint64_t bit;
    if (!w || w->err) return w ? w->err : RSD_ERR_ARG;
    if (w->depth == 0) return rsdi_jw_fail(w, RSD_ERR_STATE);
    bit = (uint64_t)1 << (w->depth - 1);
    if (((w->is_obj & bit) != 0) != obj || w->after_key) return rsdi_jw_fail(w, RSD_ERR_STATE);
    if (rsdi_jw_put(w, obj ? "}" : "]", 1)) return w->err;
    w->depth--;
    return rsdi_jw_after(w);
}

RSD_API int rsd_json_w_begin_object(rsd_json_writer *w) { return w ? rsdi_jw_open(w, true) : RSD_ERR_ARG; }
RSD_API int rsd_json_w_end_object(rsd_json_writer *w) { return rsdi_jw_close(w, true); }
RSD_API int rsd_json_w_begin_array(rsd_json_writer *w) { return w ? rsdi_jw_open(w, false) : RSD_ERR_ARG; }
RSD_API int rsd_json_w_end_array(rsd_json_writer *w) { return rsdi_jw_close(w, false); }

RSD_API int rsd_json_w_key(rsd_json_writer *w, const char *key) {
    uint64_t bit;
    if (!w) return RSD_ERR_ARG;
    if (w->err) return w->err;
    if (!key) return rsdi_jw_fail(w, RSD_ERR_ARG);
    if (w->depth == 0) return rsdi_jw_fail(w, RSD_ERR_STATE);
    bit = (uint64_t)1 << (w->depth - 1);
    if (!(w->is_obj & bit) || w->after_key) return rsdi_jw_fail(w, RSD_ERR_STATE);
    if ((w->has_item & bit) && rsdi_jw_put(w, ",", 1)) return w->err;
    w->has_item |= bit;
    if (rsdi_jw_string(w, key, strlen(key)) || rsdi_jw_put(w, ":", 1)) return w->err;
    w->after_key = true;
    return RSD_OK;
}

RSD_API int rsd_json_w_strn(rsd_json_writer *w, const char *s, size_t n) {
    if (!w) return RSD_ERR_ARG;
    if (rsdi_jw_value(w) || rsdi_jw_string(w, s, n)) return w->err;
    return rsdi_jw_after(w);
}

RSD_API int rsd_json_w_str(rsd_json_writer *w, const char *s) {
    if (!w) return RSD_ERR_ARG;
    if (!s) return rsdi_jw_fail(w, RSD_ERR_ARG);
    return rsd_json_w_strn(w, s, strlen(s));
}

RSD_API int rsd_json_w_raw(rsd_json_writer *w, const char *json, size_t n) {
    if (!w) return RSD_ERR_ARG;
    if (!json || !n) return rsdi_jw_fail(w, RSD_ERR_ARG);
    if (rsdi_jw_value(w) || rsdi_jw_put(w, json, n)) return w->err;
    return rsdi_jw_after(w);
}

RSD_API int rsd_json_w_int(rsd_json_writer *w, int64_t v) {
    char tmp[24];
    int k = (int)sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) tmp[--k] = '-';
    return rsd_json_w_raw(w, tmp + k, sizeof tmp - (size_t)k);
}

RSD_API int rsd_json_w_double(rsd_json_writer *w, double v) {
    char tmp[40], out[40];
    int prec, n = 0, k, m;
    double back = 0;
    if (!w) return RSD_ERR_ARG;
    if (v != v || v > DBL_MAX || v < -DBL_MAX) return rsdi_jw_fail(w, RSD_ERR_ARG);
    for (prec = 15; prec <= 17; prec++) {
        m = RSD_SNPRINTF(tmp, sizeof tmp, "%.*g", prec, v);
        if (m <= 0 || m >= (int)sizeof tmp) return rsdi_jw_fail(w, RSD_ERR_ARG);
        /* Normalize: any non [0-9eE+-] run (the locale's radix) becomes '.'. */
        for (k = 0, n = 0; k < m; k++) {
            char c = tmp[k];
            if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e' || c == 'E') out[n++] = c;
            else if (n == 0 || out[n - 1] != '.') out[n++] = '.';
        }
        if (rsdi_json_num_to_double(out, (size_t)n, &back) == RSD_OK && back == v) break;
    }
    return rsd_json_w_raw(w, out, (size_t)n);
}

RSD_API int rsd_json_w_bool(rsd_json_writer *w, bool v) {
    return v ? rsd_json_w_raw(w, "true", 4) : rsd_json_w_raw(w, "false", 5);
}

RSD_API int rsd_json_w_null(rsd_json_writer *w) { return rsd_json_w_raw(w, "null", 4); }

RSD_API int rsd_json_w_finish(rsd_json_writer *w) {
    if (!w) return RSD_ERR_ARG;
    if (w->err) return w->err;
    if (w->depth || !w->done) return rsdi_jw_fail(w, RSD_ERR_STATE);
    if (w->len > (size_t)RSD_JSON_MAX_BYTES) return rsdi_jw_fail(w, RSD_ERR_TOO_LARGE);
    if (w->len < w->cap) w->buf[w->len] = '\0';
    return (int)w->len;
}

/* ==== >>json end ========================================================== */

/* ==== >>reconcile (implementation) ======================================== */
#include <stdlib.h> /* getenv */
RSD_API const char *rsd_decision_str(int decision) {
    static const char *const s[] = {
#define RSDI_X(n, str) str,
        RSD_DECISIONS(RSDI_X)
#undef RSDI_X
        "unknown"};
    return decision >= 0 && decision < (int)RSD_DECISION_NUM ? s[decision] : "unknown";
}

RSD_API const char *rsd_reason_str(int reason) {
    static const char *const s[] = {
#define RSDI_X(n, str) str,
        RSD_REASONS(RSDI_X)
#undef RSDI_X
        "unknown"};
    return reason >= 0 && reason < (int)RSD_REASON_NUM ? s[reason] : "unknown";
}

RSD_API const char *rsd_reason_name(int reason) {
    static const char *const s[] = {
#define RSDI_X(n, str) #n,
        RSD_REASONS(RSDI_X)
#undef RSDI_X
        "UNKNOWN"};
    return reason >= 0 && reason < (int)RSD_REASON_NUM ? s[reason] : "UNKNOWN";
}

RSD_API const char *rsd_notice_kind_str(int kind) {
    static const char *const s[] = {
#define RSDI_X(n, str) str,
        RSD_NOTICE_KINDS(RSDI_X)
#undef RSDI_X
        "unknown"};
    return kind >= 0 && kind < (int)RSD_NOTICE_KIND_NUM ? s[kind] : "unknown";
}

RSD_API const char *rsd_notice_level_str(int level) {
    static const char *const s[] = {
#define RSDI_X(n, str) str,
        RSD_NOTICE_LEVELS(RSDI_X)
#undef RSDI_X
        "unknown"};
    return level >= 0 && level < (int)RSD_LEVEL_NUM ? s[level] : "unknown";
}

RSD_API const char *rsd_notice_msg_str(int msg) {
    static const char *const s[] = {
#define RSDI_X(n, str) str,
        RSD_NOTICE_MSGS(RSDI_X)
#undef RSDI_X
        "unknown"};
    return msg >= 0 && msg < (int)RSD_MSG_NUM ? s[msg] : "unknown";
}

RSD_API const char *rsd_role_str(int role) {
    static const char *const s[] = {
#define RSDI_X(n, str, phrase) str,
        RSD_ROLES(RSDI_X)
#undef RSDI_X
        "unknown"};
    return role >= 0 && role < (int)RSD_ROLE_NUM ? s[role] : "unknown";
}

RSD_API const char *rsd_role_phrase(int role) {
    static const char *const s[] = {
#define RSDI_X(n, str, phrase) phrase,
        RSD_ROLES(RSDI_X)
#undef RSDI_X
        "a configured model"};
    return role >= 0 && role < (int)RSD_ROLE_NUM ? s[role] : s[0];
}

/* A view is usable: no NULL pointer with a length. */
RSDI_PRIVATE bool rsdi_str_valid(rsd_str s) { return s.ptr != NULL || s.len == 0; }

RSDI_PRIVATE bool rsdi_is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* ASCII whitespace trimmed from both ends. */
RSDI_PRIVATE rsd_str rsdi_str_trim(rsd_str s) {
    if (!s.ptr) { s.len = 0; return s; }
    while (s.len && rsdi_is_space(s.ptr[0])) { s.ptr++; s.len--; }
    while (s.len && rsdi_is_space(s.ptr[s.len - 1])) s.len--;
    return s;
}

/* ASCII case-insensitive equality with a lower-case literal. */
RSDI_PRIVATE bool rsdi_ieq_c(rsd_str s, const char *lit) {
    size_t i, n = strlen(lit);
    if (s.len != n) return false;
    for (i = 0; i < n; i++) {
        char c = s.ptr[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != lit[i]) return false;
    }
    return true;
}

/* Total order on views: bytes (unsigned), then length. */
RSDI_PRIVATE int rsdi_str_cmp(rsd_str a, rsd_str b) {
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c) return c;
    return a.len < b.len ? -1 : a.len > b.len ? 1 : 0;
}

RSD_API bool rsd_tags_protect(const rsd_str *tags, int n_tags) {
    int i;
    if (!tags || n_tags <= 0) return false;
    for (i = 0; i < n_tags; i++)
        if (rsd_str_eq_c(tags[i], "pinned:true") || rsd_str_eq_c(tags[i], "role:scout")) return true;
    return false;
}

/* Name k of resident r: 0 = model_id, 1.. = aliases (may be empty = skip). */
RSDI_PRIVATE rsd_str rsdi_res_name(const rsd_resident *r, int k) {
    return k == 0 ? r->model_id : r->aliases[k - 1];
}

/* Role lookup in the protected list (R9): first entry with a known role wins; a
   bare entry counts when no entry for the id carries a role. */
RSDI_PRIVATE bool rsdi_protected_role(const rsd_facts *f, rsd_str name, rsd_role *role) {
    int i;
    bool bare = false;
    if (name.len == 0) return false;
    for (i = 0; i < f->n_protected; i++) {
        rsd_str id = rsdi_str_trim(f->protected_models[i].model_id);
        if (id.len == 0 || id.len >= RSD_MODEL_ID_MAX || !rsd_str_eq(id, name)) continue;
        if (f->protected_models[i].role != RSD_ROLE_NONE) {
            *role = f->protected_models[i].role;
            return true;
        }
        bare = true;
    }
    if (bare) *role = RSD_ROLE_NONE;
    return bare;
}

/* Checks a model id: non-empty, short enough, valid view. */
RSDI_PRIVATE int rsdi_check_id(rsd_str s, bool allow_empty) {
    if (!rsdi_str_valid(s)) return RSD_ERR_ARG;
    if (s.len == 0) return allow_empty ? RSD_OK : RSD_ERR_MODEL_ID;
    return s.len < RSD_MODEL_ID_MAX ? RSD_OK : RSD_ERR_MODEL_ID;
}

RSDI_PRIVATE int rsdi_check_facts(const rsd_facts *f) {
    int i, k, r;
    if ((int)f->strategy < 0 || (int)f->strategy >= (int)RSD_STRATEGY_NUM) return RSD_ERR_ARG;
    if ((int)f->optout < 0 || (int)f->optout >= (int)RSD_OPTOUT_NUM) return RSD_ERR_ARG;
    if (f->n_residents < 0 || f->n_protected < 0 || f->n_keep_aliases < 0 || f->n_keep_tags < 0)
        return RSD_ERR_ARG;
    if (f->n_residents > RSD_MAX_RESIDENTS || f->n_protected > RSD_MAX_PROTECTED ||
        f->n_keep_aliases > RSD_MAX_ALIASES || f->n_keep_tags > RSD_MAX_TAGS)
        return RSD_ERR_RESIDENTS_LIMIT;
    if ((f->n_residents && !f->residents) || (f->n_protected && !f->protected_models))
        return RSD_ERR_ARG;
    if (!rsdi_str_valid(f->target_id) || !rsdi_str_valid(f->runtime_id)) return RSD_ERR_ARG;
    if ((r = rsdi_check_id(f->keep, false)) < 0) return r;
    for (k = 0; k < f->n_keep_aliases; k++)
        if ((r = rsdi_check_id(f->keep_aliases[k], true)) < 0) return r;
    for (k = 0; k < f->n_keep_tags; k++)
        if (!rsdi_str_valid(f->keep_tags[k])) return RSD_ERR_ARG;
    for (i = 0; i < f->n_protected; i++) {
        int role = (int)f->protected_models[i].role;
        if (!rsdi_str_valid(f->protected_models[i].model_id)) return RSD_ERR_ARG;
        if (role < 0 || role >= (int)RSD_ROLE_NUM) return RSD_ERR_ARG;
    }
    for (i = 0; i < f->n_residents; i++) {
        const rsd_resident *res = &f->residents[i];
        if (res->n_aliases < 0 || res->n_tags < 0) return RSD_ERR_ARG;
        if (res->n_aliases > RSD_MAX_ALIASES || res->n_tags > RSD_MAX_TAGS)
            return RSD_ERR_RESIDENTS_LIMIT;
        if ((r = rsdi_check_id(res->model_id, false)) < 0) return r;
        for (k = 0; k < res->n_aliases; k++)
            if ((r = rsdi_check_id(res->aliases[k], true)) < 0) return r;
        for (k = 0; k < res->n_tags; k++)
            if (!rsdi_str_valid(res->tags[k])) return RSD_ERR_ARG;
    }
    return RSD_OK;
}

/* Do residents a and b share a non-empty name? */
RSDI_PRIVATE bool rsdi_share_name(const rsd_resident *a, const rsd_resident *b) {
    int i, j;
    for (i = 0; i <= a->n_aliases; i++) {
        rsd_str x = rsdi_res_name(a, i);
        if (!x.len) continue;
        for (j = 0; j <= b->n_aliases; j++)
            if (rsd_str_eq(x, rsdi_res_name(b, j))) return true;
    }
    return false;
}

/* Does resident r carry a name of the keep model? */
RSDI_PRIVATE bool rsdi_matches_keep(const rsd_facts *f, const rsd_resident *r) {
    int i, j;
    for (i = 0; i <= r->n_aliases; i++) {
        rsd_str x = rsdi_res_name(r, i);
        if (!x.len) continue;
        if (rsd_str_eq(x, f->keep)) return true;
        for (j = 0; j < f->n_keep_aliases; j++)
            if (rsd_str_eq(x, f->keep_aliases[j])) return true;
    }
    return false;
}

/* Working state of one rsd_decide call (on the stack, ~1.5 KiB). */
typedef struct rsdi_decide_ws {
    int n;
    int16_t order[RSD_MAX_RESIDENTS];   /* canonical order: (model_id, index) */
    int16_t pos[RSD_MAX_RESIDENTS];     /* position of index i in order */
    int16_t root[RSD_MAX_RESIDENTS];    /* union-find parent */
    uint8_t tag[RSD_MAX_RESIDENTS], cfg[RSD_MAX_RESIDENTS], role[RSD_MAX_RESIDENTS];
    uint8_t gsize[RSD_MAX_RESIDENTS];   /* members, at the representative */
    uint8_t role_set[RSD_MAX_RESIDENTS]; /* group role decided */
    int n_others;                       /* non-keep groups, canonical order */
    int16_t others[RSD_MAX_RESIDENTS];
    int n_unprot, n_config;             /* eviction tiers (R25), ours first */
    int16_t unprot[RSD_MAX_RESIDENTS], config[RSD_MAX_RESIDENTS];
} rsdi_decide_ws;

RSDI_PRIVATE int rsdi_find(rsdi_decide_ws *w, int i) {
    while (w->root[i] != i) {
        w->root[i] = w->root[w->root[i]];
        i = w->root[i];
    }
    return i;
}

/* Appends a notice; returns it zeroed with kind/level/msg set, or NULL if full. */
RSDI_PRIVATE rsd_notice *rsdi_notice_add(rsd_plan *p, rsd_notice_kind kind, rsd_notice_level level,
                                         rsd_notice_msg msg, int subject) {
    rsd_notice *n;
    if (p->n_notices >= RSD_MAX_NOTICES) return NULL;
    n = &p->notices[p->n_notices++];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->level = level;
    n->msg = msg;
    n->subject = subject;
    n->role = RSD_ROLE_NONE;
    return n;
}

/* Builds tiers: groups with the given protection, ours first, canonical order. */
RSDI_PRIVATE int rsdi_tier(const rsdi_decide_ws *w, const rsd_plan *p, int protection, int16_t *out) {
    int pass, k, n = 0;
    for (pass = 0; pass < 2; pass++)
        for (k = 0; k < w->n_others; k++) {
            int g = w->others[k];
            if (p->cls[g].protection != protection) continue;
            if ((pass == 0) != (p->cls[g].ours != 0)) continue;
            out[n++] = (int16_t)g;
        }
    return n;
}

RSDI_PRIVATE void rsdi_mark_evict(const rsdi_decide_ws *w, rsd_plan *p, int g) {
    int i;
    for (i = 0; i < w->n; i++)
        if (p->cls[i].group == g) p->cls[i].evict = 1;
    p->evict[p->n_evict++] = (int16_t)g;
}

/* R31: one notice per planned eviction. */
RSDI_PRIVATE void rsdi_evict_notices(const rsd_facts *f, rsd_plan *p) {
    int k;
    for (k = 0; k < p->n_evict; k++) {
        int g = p->evict[k];
        const rsd_resident *r = &f->residents[g];
        rsd_notice *n;
        if (p->cls[g].protection == RSD_PROTECT_CONFIG) {
            n = rsdi_notice_add(p, RSD_NOTICE_SWAP, RSD_LEVEL_WARNING, RSD_MSG_EVICT_CONFIG, g);
            if (!n) return;
            n->detail = RSD_DETAIL_SWAPPED_OUT | RSD_DETAIL_CONFIG_PROTECTED;
            n->config_protected = true;
            n->role = (rsd_role)p->cls[g].role;
            if (n->role != RSD_ROLE_NONE) n->detail |= RSD_DETAIL_ROLE;
        } else if (p->cls[g].ours) {
            n = rsdi_notice_add(p, RSD_NOTICE_ABOUT_TO_EVICT, RSD_LEVEL_INFO, RSD_MSG_EVICT_OURS, g);
            if (!n) return;
        } else {
            n = rsdi_notice_add(p, RSD_NOTICE_SWAP, RSD_LEVEL_WARNING, RSD_MSG_EVICT_FOREIGN, g);
            if (!n) return;
            n->detail = RSD_DETAIL_SWAPPED_OUT;
        }
        if (p->cls[g].protection != RSD_PROTECT_CONFIG && r->has_size_vram) {
            n->detail |= RSD_DETAIL_FREED_VRAM_BYTES;
            n->freed_vram_bytes = r->size_vram_bytes;
        }
    }
}

/* Router strategy with known capacity (R30). */
RSDI_PRIVATE void rsdi_router_known(const rsd_facts *f, rsdi_decide_ws *w, rsd_plan *p,
                                    bool config_evictable) {
    int64_t needed = (int64_t)f->n_residents + 1 - (int64_t)f->max_instances;
    int64_t freed = 0, avail_unprot = 0, avail_config = 0;
    int k;
    bool any_config = false;
    rsd_notice *n;
    p->slots_needed = needed > 0 ? (int)needed : 0;
    if (needed <= 0) { /* R30a */
        p->decision = RSD_DECISION_LOAD;
        p->reason = RSD_REASON_FREE_SLOT;
        n = rsdi_notice_add(p, RSD_NOTICE_CO_RESIDENT, RSD_LEVEL_INFO, RSD_MSG_LOADING_ALONGSIDE, -1);
        if (n) {
            n->detail = RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES;
            n->resident_count = (uint32_t)f->n_residents + 1;
            n->max_instances = f->max_instances;
        }
        return;
    }
    for (k = 0; k < w->n_unprot; k++) avail_unprot += w->gsize[w->unprot[k]];
    for (k = 0; k < w->n_config; k++) avail_config += w->gsize[w->config[k]];
    if (avail_unprot + (config_evictable ? avail_config : 0) < needed) {
        n = rsdi_notice_add(p, RSD_NOTICE_WILL_NOT_FIT, RSD_LEVEL_ERROR, RSD_MSG_DECLINE_ALL_PINNED, -1);
        p->decision = RSD_DECISION_DECLINE;
        p->reason = RSD_REASON_DECLINE_ALL_PINNED;
        if (!config_evictable && avail_unprot + avail_config >= needed) { /* R30c */
            p->reason = RSD_REASON_DECLINE_PINNED_KEEP;
            for (k = 0; k < w->n_config && freed + avail_unprot < needed; k++) {
                p->blocked[p->n_blocked++] = w->config[k];
                freed += w->gsize[w->config[k]];
            }
            if (n) {
                n->msg = RSD_MSG_DECLINE_PINNED_KEEP;
                n->config_protected = true;
                n->detail |= RSD_DETAIL_CONFIG_PROTECTED;
                if (p->n_blocked && p->cls[p->blocked[0]].role != RSD_ROLE_NONE) {
                    n->role = (rsd_role)p->cls[p->blocked[0]].role;
                    n->detail |= RSD_DETAIL_ROLE;
                }
            }
        }
        if (n) {
            n->detail |= RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES;
            n->resident_count = (uint32_t)f->n_residents;
            n->max_instances = f->max_instances;
        }
        return;
    }
    for (k = 0; k < w->n_unprot && freed < needed; k++) {
        rsdi_mark_evict(w, p, w->unprot[k]);
        freed += w->gsize[w->unprot[k]];
    }
    for (k = 0; config_evictable && k < w->n_config && freed < needed; k++) {
        rsdi_mark_evict(w, p, w->config[k]);
        freed += w->gsize[w->config[k]];
        any_config = true;
    }
    p->decision = RSD_DECISION_LOAD_AFTER_EVICT;
    p->reason = any_config ? RSD_REASON_EVICT_CONFIG : RSD_REASON_EVICT_UNPROTECTED;
}

RSD_API int rsd_decide(const rsd_facts *f, rsd_plan *p) {
    rsdi_decide_ws w;
    int i, j, k, r;
    bool keep_pinned, config_evictable;
    if (!p) return RSD_ERR_ARG;
    memset(p, 0, sizeof *p);
    p->keep_index = -1;
    if (!f) return RSD_ERR_ARG;
    if ((r = rsdi_check_facts(f)) < 0) return r;
    memset(&w, 0, sizeof w);
    w.n = f->n_residents;
    p->resident_count = (uint32_t)w.n;

    /* Canonical order (model_id, then index): insertion sort, n <= 64. */
    for (i = 0; i < w.n; i++) {
        int16_t x = (int16_t)i;
        j = i;
        while (j > 0 && rsdi_str_cmp(f->residents[w.order[j - 1]].model_id, f->residents[x].model_id) > 0) {
            w.order[j] = w.order[j - 1];
            j--;
        }
        w.order[j] = x;
    }
    for (i = 0; i < w.n; i++) {
        w.pos[w.order[i]] = (int16_t)i;
        w.root[i] = (int16_t)i;
    }
    /* Per-entry protection (R8, R10) and identity groups: entries that share any
       id or alias are one model; the root is the canonical-first member. */
    for (i = 0; i < w.n; i++) {
        const rsd_resident *res = &f->residents[i];
        rsd_role role = RSD_ROLE_NONE;
        w.tag[i] = (uint8_t)(res->pinned || rsd_tags_protect(res->tags, res->n_tags));
        for (k = 0; k <= res->n_aliases; k++)
            if (rsdi_protected_role(f, rsdi_res_name(res, k), &role)) {
                w.cfg[i] = 1;
                w.role[i] = (uint8_t)role;
                break;
            }
        for (j = 0; j < i; j++)
            if (rsdi_share_name(res, &f->residents[j])) {
                int a = rsdi_find(&w, i), b = rsdi_find(&w, j);
                if (a != b) {
                    if (w.pos[a] < w.pos[b]) w.root[b] = (int16_t)a;
                    else w.root[a] = (int16_t)b;
                }
            }
    }
    /* Group aggregates at the representative, walked in canonical order. */
    for (i = 0; i < w.n; i++) p->cls[i].group = (uint8_t)rsdi_find(&w, i);
    for (k = 0; k < w.n; k++) {
        int e = w.order[k], g = p->cls[e].group;
        rsd_resident_class *c = &p->cls[g];
        w.gsize[g]++;
        if (rsdi_matches_keep(f, &f->residents[e])) c->is_keep = 1;
        if (f->residents[e].loaded_by_us) c->ours = 1;
        if (w.tag[e]) c->protection = RSD_PROTECT_TAG;
        else if (w.cfg[e] && c->protection == RSD_PROTECT_NONE) c->protection = RSD_PROTECT_CONFIG;
        if (w.cfg[e] && !w.role_set[g]) { /* role of the canonical-first configured member */
            c->role = w.role[e];
            w.role_set[g] = 1;
        }
    }
    for (i = 0; i < w.n; i++) { /* spread group facts to members */
        int g = p->cls[i].group;
        if (g != i) {
            p->cls[i].is_keep = p->cls[g].is_keep;
            p->cls[i].ours = p->cls[g].ours;
            p->cls[i].protection = p->cls[g].protection;
            p->cls[i].role = p->cls[g].role;
        }
        if (p->cls[i].is_keep) {
            p->keep_resident = true;
            if (p->keep_index < 0) p->keep_index = i;
        }
    }
    for (k = 0; k < w.n; k++) {
        int e = w.order[k];
        if (p->cls[e].group == e && !p->cls[e].is_keep) w.others[w.n_others++] = (int16_t)e;
    }

    /* R21: context stress. */
    if (f->context_length && f->model_max_context && f->context_length > f->model_max_context) {
        rsd_notice *n = rsdi_notice_add(p, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, RSD_MSG_CONTEXT_OVER_MAX, -1);
        if (n) {
            n->detail = RSD_DETAIL_REQUESTED_CONTEXT | RSD_DETAIL_MODEL_MAX_CONTEXT;
            n->requested_context = f->context_length;
            n->model_max_context = f->model_max_context;
        }
    }
    /* R22: split stress for every resident, keep included, canonical order. */
    for (k = 0; k < w.n; k++) {
        const rsd_resident *res = &f->residents[w.order[k]];
        if (res->has_size && res->has_size_vram && res->size_bytes > res->size_vram_bytes) {
            rsd_notice *n = rsdi_notice_add(p, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, RSD_MSG_SPLIT, w.order[k]);
            if (n) {
                n->detail = RSD_DETAIL_RESIDENT_VRAM_BYTES | RSD_DETAIL_RESIDENT_TOTAL_BYTES;
                n->resident_vram_bytes = res->size_vram_bytes;
                n->resident_total_bytes = res->size_bytes;
            }
        }
    }

    keep_pinned = f->keep_pinned || rsd_tags_protect(f->keep_tags, f->n_keep_tags);
    config_evictable = !keep_pinned; /* R26 */
    if (p->keep_resident) { /* R24 */
        p->decision = RSD_DECISION_ALREADY_RESIDENT;
        p->reason = RSD_REASON_KEEP_RESIDENT;
        if (w.n_others) {
            rsd_notice *n;
            if (f->max_instances && (uint32_t)w.n > f->max_instances) {
                n = rsdi_notice_add(p, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, RSD_MSG_OVER_CAPACITY, -1);
                if (n) n->detail = RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES;
            } else {
                n = rsdi_notice_add(p, RSD_NOTICE_CO_RESIDENT, RSD_LEVEL_INFO, RSD_MSG_SERVES_ALONGSIDE, -1);
                if (n) n->detail = RSD_DETAIL_RESIDENT_COUNT | (f->max_instances ? (uint32_t)RSD_DETAIL_MAX_INSTANCES : 0u);
            }
            if (n) {
                n->resident_count = (uint32_t)w.n;
                n->max_instances = f->max_instances;
            }
        }
    } else {
        w.n_unprot = rsdi_tier(&w, p, RSD_PROTECT_NONE, w.unprot);  /* R25 */
        w.n_config = rsdi_tier(&w, p, RSD_PROTECT_CONFIG, w.config);
        switch (f->strategy) {
        case RSD_STRATEGY_JIT: /* R27 */
            for (k = 0; k < w.n_unprot; k++) p->fallback[p->n_fallback++] = w.unprot[k];
            for (k = 0; config_evictable && k < w.n_config; k++) p->fallback[p->n_fallback++] = w.config[k];
            p->decision = RSD_DECISION_LOAD;
            p->reason = RSD_REASON_JIT_LOAD;
            break;
        case RSD_STRATEGY_SCHEDULER: /* R28 */
            for (k = 0; k < w.n_unprot; k++)
                if (p->cls[w.unprot[k]].ours) rsdi_mark_evict(&w, p, w.unprot[k]);
            p->decision = p->n_evict ? RSD_DECISION_LOAD_AFTER_EVICT : RSD_DECISION_LOAD;
            p->reason = p->n_evict ? RSD_REASON_SCHEDULER_RELEASE_OURS : RSD_REASON_SCHEDULER_LOAD;
            break;
        default: /* router */
            if (w.n == 0) {
                p->decision = RSD_DECISION_LOAD;
                p->reason = RSD_REASON_EMPTY_SERVER;
            } else if (f->max_instances == 0) { /* R29, improved (W8): evict one */
                if (w.n_unprot) {
                    rsdi_mark_evict(&w, p, w.unprot[0]);
                    p->decision = RSD_DECISION_LOAD_AFTER_EVICT;
                    p->reason = RSD_REASON_CAPACITY_UNKNOWN_EVICT_ONE;
                } else {
                    p->decision = RSD_DECISION_LOAD;
                    p->reason = RSD_REASON_CAPACITY_UNKNOWN_NONE_EVICTABLE;
                }
            } else {
                rsdi_router_known(f, &w, p, config_evictable);
            }
            break;
        }
        rsdi_evict_notices(f, p);
    }

    /* S29: clamp the load context while neighbours stay resident. */
    if (f->context_length &&
        (p->decision == RSD_DECISION_LOAD || p->decision == RSD_DECISION_LOAD_AFTER_EVICT)) {
        int neighbours = 0;
        for (k = 0; k < w.n_others; k++)
            if (!p->cls[w.others[k]].evict) neighbours++;
        p->load_context = rsd_fit_context(f->context_length, neighbours, f->context_ceiling);
        if (p->load_context < f->context_length) {
            rsd_notice *n = rsdi_notice_add(p, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, RSD_MSG_CONTEXT_CLAMPED, -1);
            if (n) {
                n->detail = RSD_DETAIL_REQUESTED_CONTEXT | RSD_DETAIL_LOAD_CONTEXT;
                n->requested_context = f->context_length;
                n->load_context = p->load_context;
            }
        }
    }

    p->would = p->decision;
    if (f->optout != RSD_OPTOUT_NONE) { /* R23 + W19: observe never mutates */
        p->decision = RSD_DECISION_OBSERVE;
        p->reason = f->optout == RSD_OPTOUT_TARGET ? RSD_REASON_OBSERVE_TARGET : RSD_REASON_OBSERVE_ENV;
        p->n_evict = 0;
        p->n_fallback = 0;
        for (k = 0; k < p->n_notices; k++) {
            rsd_notice_msg m = p->notices[k].msg;
            if (m != RSD_MSG_CONTEXT_OVER_MAX && m != RSD_MSG_SPLIT && m != RSD_MSG_OVER_CAPACITY &&
                m != RSD_MSG_SERVES_ALONGSIDE)
                p->notices[k].observe_only = true;
        }
    }
    return RSD_OK;
}

/* Bounded appender for rsd_notice_format: counts what it could not write. */
typedef struct rsdi_sb {
    char *buf;
    size_t cap, len;
} rsdi_sb;

RSDI_PRIVATE void rsdi_sb_put(rsdi_sb *b, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++, b->len++)
        if (b->cap && b->len < b->cap - 1) b->buf[b->len] = s[i];
}
RSDI_PRIVATE void rsdi_sb_c(rsdi_sb *b, const char *s) { rsdi_sb_put(b, s, strlen(s)); }
RSDI_PRIVATE void rsdi_sb_s(rsdi_sb *b, rsd_str s) { rsdi_sb_put(b, s.ptr ? s.ptr : "", s.ptr ? s.len : 0); }
RSDI_PRIVATE void rsdi_sb_q(rsdi_sb *b, rsd_str s) { rsdi_sb_c(b, "'"); rsdi_sb_s(b, s); rsdi_sb_c(b, "'"); }
RSDI_PRIVATE void rsdi_sb_u(rsdi_sb *b, uint64_t v) {
    char t[24];
    int n = 0;
    do { t[sizeof t - 1 - n++] = (char)('0' + v % 10); v /= 10; } while (v);
    rsdi_sb_put(b, t + sizeof t - n, (size_t)n);
}
/* bytes / 1024^3 with one decimal, rounded half up, then " GiB" (R19). */
RSDI_PRIVATE void rsdi_sb_gib(rsdi_sb *b, uint64_t bytes) {
    const uint64_t gib = (uint64_t)1 << 30;
    uint64_t whole = bytes / gib, rem = bytes % gib;
    uint64_t tenth = (rem * 10 + gib / 2) / gib; /* rem < 2^30, no overflow */
    if (tenth >= 10) { whole++; tenth -= 10; }
    rsdi_sb_u(b, whole);
    rsdi_sb_c(b, ".");
    rsdi_sb_u(b, tenth);
    rsdi_sb_c(b, " GiB");
}

/* Non-keep groups in canonical order; with_roles adds " (role)"; skip_evicted
   leaves out (would-be) evicted ones. */
RSDI_PRIVATE void rsdi_sb_others(rsdi_sb *b, const rsd_facts *f, const rsd_plan *p, bool with_roles,
                                 bool skip_evicted, bool quoted) {
    int16_t order[RSD_MAX_RESIDENTS];
    int i, j, n = 0, first = 1;
    for (i = 0; i < f->n_residents && i < RSD_MAX_RESIDENTS; i++) {
        if (p->cls[i].group != i || p->cls[i].is_keep || (skip_evicted && p->cls[i].evict)) continue;
        j = n++;
        while (j > 0 && rsdi_str_cmp(f->residents[order[j - 1]].model_id, f->residents[i].model_id) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = (int16_t)i;
    }
    for (i = 0; i < n; i++) {
        const rsd_resident_class *c = &p->cls[order[i]];
        if (!first) rsdi_sb_c(b, ", ");
        first = 0;
        if (quoted) rsdi_sb_q(b, f->residents[order[i]].model_id);
        else rsdi_sb_s(b, f->residents[order[i]].model_id);
        if (with_roles && c->protection == RSD_PROTECT_CONFIG && c->role != RSD_ROLE_NONE) {
            rsdi_sb_c(b, " (");
            rsdi_sb_c(b, rsd_role_str(c->role));
            rsdi_sb_c(b, ")");
        }
    }
}

RSD_API int rsd_plan_decline_unloadable(const rsd_facts *f, rsd_plan *p, uint32_t models_listed) {
    rsd_notice *n;
    int i;
    if (!f || !p) return RSD_ERR_ARG;
    p->decision = RSD_DECISION_DECLINE;
    p->would = RSD_DECISION_DECLINE;
    p->reason = RSD_REASON_DECLINE_NOT_LOADABLE;
    p->n_evict = 0;
    p->n_fallback = 0;
    p->n_blocked = 0;
    p->n_notices = 0;
    p->load_context = 0;
    for (i = 0; i < RSD_MAX_RESIDENTS; i++) p->cls[i].evict = 0;
    n = rsdi_notice_add(p, RSD_NOTICE_WILL_NOT_FIT, RSD_LEVEL_ERROR, RSD_MSG_NOT_LOADABLE, -1);
    if (n) n->resident_count = models_listed; /* no detail upstream; the count is for the text */
    return RSD_OK;
}

RSD_API int rsd_notice_format(const rsd_facts *f, const rsd_plan *p, const rsd_notice *n,
                              char *buf, size_t cap) {
    rsdi_sb b;
    rsd_str keep, target, subj;
    int k;
    if (!f || !p || !n || (!buf && cap)) return RSD_ERR_ARG;
    if (f->n_residents < 0 || f->n_residents > RSD_MAX_RESIDENTS || (f->n_residents && !f->residents))
        return RSD_ERR_ARG;
    if (n->subject >= f->n_residents || n->subject < -1) return RSD_ERR_ARG;
    b.buf = buf;
    b.cap = cap;
    b.len = 0;
    keep = f->keep;
    target = f->target_id;
    subj = n->subject >= 0 ? f->residents[n->subject].model_id : rsd_str_c("");
    if (n->observe_only) rsdi_sb_c(&b, "observe-only, nothing done: ");
    switch (n->msg) {
    case RSD_MSG_CONTEXT_OVER_MAX:
        rsdi_sb_c(&b, "context length "); rsdi_sb_u(&b, n->requested_context);
        rsdi_sb_c(&b, " exceeds "); rsdi_sb_s(&b, keep); rsdi_sb_c(&b, "'s ");
        rsdi_sb_u(&b, n->model_max_context); rsdi_sb_c(&b, "-token limit on "); rsdi_sb_q(&b, target);
        rsdi_sb_c(&b, "; lower the context window to avoid a truncated or split load.");
        break;
    case RSD_MSG_SPLIT:
        rsdi_sb_c(&b, "model "); rsdi_sb_q(&b, subj); rsdi_sb_c(&b, " on "); rsdi_sb_q(&b, target);
        rsdi_sb_c(&b, " is split across CPU and GPU ("); rsdi_sb_gib(&b, n->resident_vram_bytes);
        rsdi_sb_c(&b, " of "); rsdi_sb_gib(&b, n->resident_total_bytes);
        rsdi_sb_c(&b, " on GPU); expect slow generation.");
        break;
    case RSD_MSG_OVER_CAPACITY:
        rsdi_sb_q(&b, target); rsdi_sb_c(&b, " holds "); rsdi_sb_u(&b, n->resident_count);
        rsdi_sb_c(&b, " models ("); rsdi_sb_others(&b, f, p, true, false, false);
        rsdi_sb_c(&b, " alongside "); rsdi_sb_q(&b, keep); rsdi_sb_c(&b, ") above its ");
        rsdi_sb_u(&b, n->max_instances);
        rsdi_sb_c(&b, "-instance capacity; unload one or raise the server's limit.");
        break;
    case RSD_MSG_SERVES_ALONGSIDE:
        rsdi_sb_q(&b, target); rsdi_sb_c(&b, " serves "); rsdi_sb_q(&b, keep);
        rsdi_sb_c(&b, " alongside "); rsdi_sb_others(&b, f, p, true, false, false);
        rsdi_sb_c(&b, ". residency leaves co-resident models loaded; keep the setup only while "
                      "weights and KV caches fit in GPU memory.");
        break;
    case RSD_MSG_LOADING_ALONGSIDE:
        rsdi_sb_c(&b, "loading "); rsdi_sb_q(&b, keep); rsdi_sb_c(&b, " alongside ");
        rsdi_sb_others(&b, f, p, false, false, false); rsdi_sb_c(&b, " on "); rsdi_sb_q(&b, target);
        rsdi_sb_c(&b, " ("); rsdi_sb_u(&b, n->resident_count); rsdi_sb_c(&b, "/");
        rsdi_sb_u(&b, n->max_instances); rsdi_sb_c(&b, " instances).");
        break;
    case RSD_MSG_DECLINE_PINNED_KEEP:
        rsdi_sb_c(&b, "cannot load pinned "); rsdi_sb_q(&b, keep); rsdi_sb_c(&b, " on ");
        rsdi_sb_q(&b, target); rsdi_sb_c(&b, ": it would evict ");
        for (k = 0; k < p->n_blocked && k < RSD_MAX_RESIDENTS; k++) {
            int g = p->blocked[k];
            if (g < 0 || g >= f->n_residents) continue;
            if (k) rsdi_sb_c(&b, ", ");
            rsdi_sb_q(&b, f->residents[g].model_id); rsdi_sb_c(&b, " (");
            rsdi_sb_c(&b, rsd_role_phrase(p->cls[g].role)); rsdi_sb_c(&b, ")");
        }
        rsdi_sb_c(&b, " that settings still reference, and a pinned model is never evicted, so the "
                      "configured model could not return. Unload one manually, unpin ");
        rsdi_sb_q(&b, keep); rsdi_sb_c(&b, " on the server, or raise the server's max instances.");
        break;
    case RSD_MSG_DECLINE_ALL_PINNED:
        rsdi_sb_c(&b, "cannot load "); rsdi_sb_q(&b, keep); rsdi_sb_c(&b, " on "); rsdi_sb_q(&b, target);
        rsdi_sb_c(&b, ": all "); rsdi_sb_u(&b, n->max_instances);
        rsdi_sb_c(&b, " instance slots hold pinned models ("); rsdi_sb_others(&b, f, p, false, false, false);
        rsdi_sb_c(&b, "). Unload one manually or raise the server's max instances.");
        break;
    case RSD_MSG_EVICT_CONFIG:
        rsdi_sb_c(&b, "evicting "); rsdi_sb_q(&b, subj); rsdi_sb_c(&b, " from "); rsdi_sb_q(&b, target);
        rsdi_sb_c(&b, " to make room for "); rsdi_sb_q(&b, keep);
        rsdi_sb_c(&b, " even though settings still reference it as "); rsdi_sb_c(&b, rsd_role_phrase(n->role));
        rsdi_sb_c(&b, ": every slot is taken and no unprotected resident is left. Another profile "
                      "pointed at it will reload it.");
        break;
    case RSD_MSG_EVICT_OURS:
        rsdi_sb_c(&b, "evicting residency-loaded model "); rsdi_sb_q(&b, subj); rsdi_sb_c(&b, " from ");
        rsdi_sb_q(&b, target); rsdi_sb_c(&b, " to free a slot for "); rsdi_sb_q(&b, keep); rsdi_sb_c(&b, ".");
        break;
    case RSD_MSG_EVICT_FOREIGN:
        rsdi_sb_c(&b, "swapping resident "); rsdi_sb_q(&b, subj); rsdi_sb_c(&b, " for requested ");
        rsdi_sb_q(&b, keep); rsdi_sb_c(&b, " on "); rsdi_sb_q(&b, target);
        rsdi_sb_c(&b, " (residency did not load it; recorded transition instead of a silent unload; set "
                      "RESIDENCY=observe or mark the target user-managed to forbid swaps).");
        break;
    case RSD_MSG_CONTEXT_CLAMPED:
        rsdi_sb_c(&b, "loading "); rsdi_sb_q(&b, keep); rsdi_sb_c(&b, " alongside ");
        rsdi_sb_others(&b, f, p, false, true, false); rsdi_sb_c(&b, ": context clamped ");
        rsdi_sb_u(&b, n->requested_context); rsdi_sb_c(&b, " to "); rsdi_sb_u(&b, n->load_context);
        rsdi_sb_c(&b, " tokens");
        break;
    case RSD_MSG_NOT_LOADABLE:
        rsdi_sb_q(&b, target); rsdi_sb_c(&b, " does not serve "); rsdi_sb_q(&b, keep);
        rsdi_sb_c(&b, "; it lists "); rsdi_sb_u(&b, n->resident_count);
        rsdi_sb_c(&b, " model(s). Residency left the target untouched. Fix the wire model id in "
                      "settings, or add the preset to the server.");
        break;
    default:
        rsdi_sb_c(&b, rsd_notice_kind_str(n->kind));
        break;
    }
    if (cap) buf[b.len < cap ? b.len : cap - 1] = '\0';
    return b.len > 0x7fffffff ? 0x7fffffff : (int)b.len;
}

RSD_API int rsd_protected_collect(const rsd_role_sources *src, rsd_protected_model *out, int cap) {
    int n = 0, pass, i, k;
    if (!src || cap < 0 || (cap && !out)) return RSD_ERR_ARG;
    if (src->n_worker_profiles < 0 || src->n_target_defaults < 0 ||
        (src->n_worker_profiles && !src->worker_profiles) || (src->n_target_defaults && !src->target_defaults))
        return RSD_ERR_ARG;
    for (pass = 0; pass < 5; pass++) {
        int cnt = pass == 3 ? src->n_worker_profiles : pass == 4 ? src->n_target_defaults : 1;
        for (i = 0; i < cnt; i++) {
            rsd_str id = pass == 0 ? src->chat : pass == 1 ? src->memory : pass == 2 ? src->worker_default
                       : pass == 3 ? src->worker_profiles[i] : src->target_defaults[i];
            rsd_role role = pass == 0 ? RSD_ROLE_CHAT : pass == 1 ? RSD_ROLE_MEMORY
                          : pass == 4 ? RSD_ROLE_TARGET_DEFAULT : RSD_ROLE_WORKER;
            bool dup = false;
            if (!rsdi_str_valid(id)) return RSD_ERR_ARG;
            id = rsdi_str_trim(id);
            if (!id.len) continue;
            for (k = 0; k < n && !dup; k++) dup = rsd_str_eq(out[k].model_id, id);
            if (dup) continue;
            if (n >= cap) return RSD_ERR_BUFFER;
            out[n].model_id = id;
            out[n].role = role;
            n++;
        }
    }
    return n;
}

RSD_API bool rsd_env_observe(const char *env_value) {
    static const char *const opt[] = {"observe", "off", "0", "false", "user", "user-managed"};
    rsd_str v = rsdi_str_trim(rsd_str_c(env_value));
    size_t i;
    for (i = 0; i < sizeof opt / sizeof opt[0]; i++)
        if (rsdi_ieq_c(v, opt[i])) return true;
    return false;
}

RSD_API bool rsd_lifecycle_user_managed(const char *lifecycle) {
    return rsdi_ieq_c(rsdi_str_trim(rsd_str_c(lifecycle)), "user-managed");
}

RSD_API rsd_optout rsd_optout_resolve(const char *env_value, bool target_user_managed) {
    if (target_user_managed) return RSD_OPTOUT_TARGET;
    return rsd_env_observe(env_value) ? RSD_OPTOUT_ENV : RSD_OPTOUT_NONE;
}

RSD_API rsd_optout rsd_optout_from_env(bool target_user_managed) {
    return rsd_optout_resolve(getenv("RESIDENCY"), target_user_managed);
}

/* One normalisation pass; rsd_target_key_normalise repeats it to a fixed point. */
RSDI_PRIVATE int rsdi_key_norm1(rsd_str raw, char *out, size_t cap) {
    size_t i, n = 0, host_end, path_beg, scheme_end = 0, end;
    const char *s;
    bool has_scheme = false, http = false, https = false;
    if (!out || !rsdi_str_valid(raw)) return RSD_ERR_ARG;
    raw = rsdi_str_trim(raw);
    s = raw.ptr;
    for (i = 0; i + 2 < raw.len; i++)
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') { has_scheme = true; scheme_end = i; break; }
    if (has_scheme) {
        size_t sb = scheme_end; /* scheme starts after the last '|' before it */
        while (sb > 0 && s[sb - 1] != '|') sb--;
        {
            rsd_str sch;
            sch.ptr = s + sb;
            sch.len = scheme_end - sb;
            http = rsdi_ieq_c(sch, "http");
            https = rsdi_ieq_c(sch, "https");
        }
        host_end = scheme_end + 3;
        while (host_end < raw.len && s[host_end] != '/' && s[host_end] != '?' && s[host_end] != '#') host_end++;
    } else {
        host_end = 0;
    }
    path_beg = host_end;
    end = raw.len;
    if (has_scheme) /* drop query and fragment, as rsd_url_key does */
        for (i = path_beg; i < end; i++)
            if (s[i] == '?' || s[i] == '#') { end = i; break; }
    /* drop trailing '/' of the path */
    while (end > path_beg && s[end - 1] == '/') end--;
    {
        size_t hend = host_end;
        if (has_scheme) { /* drop default port */
            size_t port = http ? 3 : https ? 4 : 0;
            if (port && hend - (scheme_end + 3) > port &&
                memcmp(s + hend - port, https ? ":443" : ":80", port) == 0) {
                size_t h = hend - port; /* only a plain host or a [v6] literal before it */
                bool plain = s[h - 1] == ']';
                if (!plain) {
                    plain = true;
                    for (i = scheme_end + 3; i < h; i++)
                        if (s[i] == ':') plain = false;
                }
                if (plain) hend = h;
            }
        }
        for (i = 0; i < end; i++) {
            char c = s[i];
            if (i >= hend && i < host_end) continue;
            if (i < host_end && c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
            if (n + 1 >= cap) return RSD_ERR_BUFFER;
            out[n++] = c;
        }
    }
    if (cap == 0) return RSD_ERR_BUFFER;
    out[n] = '\0';
    return (int)n;
}

RSD_API int rsd_target_key_normalise(rsd_str raw, char *out, size_t cap) {
    char tmp[RSD_TARGET_KEY_MAX];
    int r, k, prev;
    if (!out || !rsdi_str_valid(raw)) return RSD_ERR_ARG;
    r = rsdi_key_norm1(raw, out, cap);
    /* Stripping can expose more to strip ("a:80 /"): repeat until stable, so
       the result is idempotent. Every pass that changes the key shortens it. */
    for (k = 0; r > 0 && (size_t)r < sizeof tmp && k < RSD_TARGET_KEY_MAX; k++) {
        memcpy(tmp, out, (size_t)r + 1);
        prev = r;
        r = rsdi_key_norm1(rsd_str_c(tmp), out, cap);
        if (r == prev && memcmp(tmp, out, (size_t)r) == 0) break;
    }
    return r;
}

/* Normalised key and model into fixed buffers; <0 when too long. */
RSDI_PRIVATE int rsdi_cache_keys(rsd_str key, rsd_str model, char *k, char *m) {
    int r = rsd_target_key_normalise(key, k, RSD_TARGET_KEY_MAX);
    if (r < 0) return r;
    if (!rsdi_str_valid(model)) return RSD_ERR_ARG;
    if (model.len >= RSD_MODEL_ID_MAX) return RSD_ERR_MODEL_ID;
    if (model.len) memcpy(m, model.ptr, model.len);
    m[model.len] = '\0';
    return RSD_OK;
}

RSDI_PRIVATE uint64_t rsdi_cache_ttl(const rsd_decision_cache *c) {
    return c->ttl_ms ? c->ttl_ms : (uint64_t)RSD_DECISION_CACHE_TTL_MS;
}

RSDI_PRIVATE bool rsdi_cache_live(const rsd_decision_cache *c, const rsd_cache_entry *e, uint64_t now_ms,
                                  uint64_t generation) {
    return e->used && e->generation == generation && now_ms >= e->at_ms &&
           now_ms - e->at_ms < rsdi_cache_ttl(c);
}

RSD_API int rsd_cache_lookup(rsd_decision_cache *c, rsd_str target_key, rsd_str model, uint64_t now_ms,
                             uint64_t generation, rsd_cache_hit *hit) {
    char k[RSD_TARGET_KEY_MAX], m[RSD_MODEL_ID_MAX];
    int i, r;
    if (!c) return RSD_ERR_ARG;
    if ((r = rsdi_cache_keys(target_key, model, k, m)) < 0) return r;
    for (i = 0; i < RSD_DECISION_CACHE_MAX; i++) {
        rsd_cache_entry *e = &c->entries[i];
        if (!e->used || strcmp(e->key, k) != 0 || strcmp(e->model, m) != 0) continue;
        if (!rsdi_cache_live(c, e, now_ms, generation)) {
            e->used = false; /* expired or stale generation */
            return 0;
        }
        e->used_ms = now_ms;
        if (hit) {
            hit->decision = e->decision;
            hit->reason = e->reason;
            hit->age_ms = now_ms - e->at_ms;
        }
        return 1;
    }
    return 0;
}

RSD_API int rsd_cache_store(rsd_decision_cache *c, rsd_str target_key, rsd_str model, const rsd_plan *plan,
                            bool mutation_failed, uint64_t now_ms, uint64_t generation) {
    char k[RSD_TARGET_KEY_MAX], m[RSD_MODEL_ID_MAX];
    rsd_decision d;
    int i, r, slot = -1;
    if (!c || !plan) return RSD_ERR_ARG;
    if ((r = rsdi_cache_keys(target_key, model, k, m)) < 0) return r;
    d = plan->decision;
    if (mutation_failed || d == RSD_DECISION_NONE || (int)d < 0 || (int)d >= (int)RSD_DECISION_NUM ||
        plan->reason == RSD_REASON_PROBE_FAILED)
        return 0; /* W4, R41: never cache a failed or degraded reconcile */
    /* A load that succeeded leaves the keep resident. */
    if (d == RSD_DECISION_LOAD || d == RSD_DECISION_LOAD_AFTER_EVICT) d = RSD_DECISION_ALREADY_RESIDENT;
    for (i = 0; i < RSD_DECISION_CACHE_MAX; i++) /* same key: overwrite */
        if (c->entries[i].used && strcmp(c->entries[i].key, k) == 0 && strcmp(c->entries[i].model, m) == 0) {
            slot = i;
            break;
        }
    for (i = 0; slot < 0 && i < RSD_DECISION_CACHE_MAX; i++) /* free or dead slot */
        if (!rsdi_cache_live(c, &c->entries[i], now_ms, generation)) slot = i;
    if (slot < 0) { /* least recently used, lowest index on ties */
        slot = 0;
        for (i = 1; i < RSD_DECISION_CACHE_MAX; i++)
            if (c->entries[i].used_ms < c->entries[slot].used_ms) slot = i;
    }
    memcpy(c->entries[slot].key, k, sizeof k);
    memcpy(c->entries[slot].model, m, sizeof m);
    c->entries[slot].at_ms = now_ms;
    c->entries[slot].used_ms = now_ms;
    c->entries[slot].generation = generation;
    c->entries[slot].decision = d;
    c->entries[slot].reason = plan->reason;
    c->entries[slot].used = true;
    return 1;
}

RSD_API int rsd_cache_invalidate(rsd_decision_cache *c, rsd_str target_key, rsd_str model) {
    char k[RSD_TARGET_KEY_MAX], m[RSD_MODEL_ID_MAX];
    int i, r, n = 0;
    if (!c) return RSD_ERR_ARG;
    if ((r = rsdi_cache_keys(target_key, model, k, m)) < 0) return r;
    for (i = 0; i < RSD_DECISION_CACHE_MAX; i++) {
        rsd_cache_entry *e = &c->entries[i];
        if (!e->used || strcmp(e->key, k) != 0 || (m[0] && strcmp(e->model, m) != 0)) continue;
        e->used = false;
        n++;
    }
    return n;
}
/* ==== >>reconcile end ===================================================== */

/* ==== >>fit (implementation) ============================================== */
RSD_API uint32_t rsd_fit_context(uint32_t requested, int n_other_residents, uint32_t ceiling) {
    if (ceiling == 0) ceiling = RSD_FIT_CEILING_DEFAULT;
    if (n_other_residents <= 0 || ceiling == RSD_FIT_CEILING_OFF || requested <= ceiling) return requested;
    return ceiling;
}

RSD_API uint32_t rsd_fit_ceiling_parse(const char *env_value) {
    rsd_str v = rsdi_str_trim(rsd_str_c(env_value));
    size_t i = 0;
    uint64_t acc = 0;
    bool neg = false, digits = false;
    if (v.len == 0) return RSD_FIT_CEILING_DEFAULT;
    if (rsdi_ieq_c(v, "off") || rsdi_ieq_c(v, "0") || rsdi_ieq_c(v, "false")) return RSD_FIT_CEILING_OFF;
    /* parseInt(v, 10): optional sign, then the longest digit prefix. */
    if (v.ptr[0] == '+' || v.ptr[0] == '-') { neg = v.ptr[0] == '-'; i = 1; }
    for (; i < v.len && v.ptr[i] >= '0' && v.ptr[i] <= '9'; i++) {
        digits = true;
        if (acc < 0xFFFFFFFEu) acc = acc * 10 + (uint64_t)(v.ptr[i] - '0');
    }
    if (!digits || neg || acc == 0) return RSD_FIT_CEILING_DEFAULT;
    return acc >= 0xFFFFFFFEu ? 0xFFFFFFFEu : (uint32_t)acc;
}

RSD_API uint32_t rsd_fit_ceiling_from_env(void) {
    return rsd_fit_ceiling_parse(getenv("RESIDENCY_CORESIDENT_CONTEXT"));
}
/* ==== >>fit end =========================================================== */

/* ==== >>pool (implementation) ============================================= */

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
