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
#define RSDI_LOG_ITEMS_RECONCILE(X) \
    X(RECONCILE_BAD_FACTS, "reconcile: facts rejected (limit, empty or overlong id)") \
    X(RECONCILE_DECLINE, "reconcile: declined (will not fit without evicting a protected model)") \
    X(RECONCILE_EVICT, "reconcile: evicting a resident to make room") \
    X(RECONCILE_OBSERVE, "reconcile: observe-only, nothing changed") \
    X(RECONCILE_CACHE_HIT, "reconcile: decision cache hit, no probe") \
    X(FIT_CLAMPED, "fit: load context clamped beside co-resident models")
/* >>log:pool */
#define RSDI_LOG_ITEMS_POOL(X)

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
    RSD_PROTECT_CONFIG, /* id or alias listed in rsd_facts.protected_models */
    RSD_PROTECT_NUM
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
    uint32_t hash[RSD_MAX_RESIDENTS][1 + RSD_MAX_ALIASES]; /* FNV-1a of each name, 0 = empty */
    int n_others;                       /* non-keep groups, canonical order */
    int16_t others[RSD_MAX_RESIDENTS];
    int n_unprot, n_config;             /* eviction tiers (R25), ours first */
    int16_t unprot[RSD_MAX_RESIDENTS], config[RSD_MAX_RESIDENTS];
} rsdi_decide_ws;

/* FNV-1a, never 0 for a non-empty name (0 marks "no name"). */
RSDI_PRIVATE uint32_t rsdi_name_hash(rsd_str s) {
    uint32_t h = 2166136261u;
    size_t i;
    if (!s.len) return 0;
    for (i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 16777619u;
    return h ? h : 1;
}

/* Do residents i and j share a non-empty name? Hashes first, bytes to confirm. */
RSDI_PRIVATE bool rsdi_share_name_h(const rsdi_decide_ws *w, const rsd_facts *f, int i, int j) {
    const rsd_resident *a = &f->residents[i], *b = &f->residents[j];
    int x, y;
    for (x = 0; x <= a->n_aliases; x++) {
        uint32_t hx = w->hash[i][x];
        if (!hx) continue;
        for (y = 0; y <= b->n_aliases; y++)
            if (w->hash[j][y] == hx && rsd_str_eq(rsdi_res_name(a, x), rsdi_res_name(b, y))) return true;
    }
    return false;
}

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
        for (k = 0; k <= f->residents[i].n_aliases; k++)
            w.hash[i][k] = rsdi_name_hash(rsdi_res_name(&f->residents[i], k));
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
            if (rsdi_share_name_h(&w, f, i, j)) {
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
