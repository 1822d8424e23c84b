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
#define RSDI_RESULTS_RECONCILE(X)
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
#define RSDI_LOG_ITEMS_HTTP(X)
/* >>log:reconcile */
#define RSDI_LOG_ITEMS_RECONCILE(X)
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

/* ==== >>json end ========================================================== */

/* ==== >>reconcile (declarations) ========================================== */

/* ==== >>reconcile end ===================================================== */

/* ==== >>fit (declarations) ================================================ */

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

/* ==== >>reconcile end ===================================================== */

/* ==== >>fit (implementation) ============================================== */

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
