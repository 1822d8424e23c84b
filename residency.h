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
    X(ERR_STATE_DIR, -81, "state directory unusable")

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
#define RSDI_LOG_ITEMS_STATE(X)

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
