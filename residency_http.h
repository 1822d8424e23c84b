/* residency_http.h -- the I/O shell of residency.h: URL parsing, a non-blocking
   HTTP/1.1 client and server over POSIX sockets (optional TLS via mbedTLS), and
   the drivers that run the core's reconciler and process pool for real.
   v0.1.0 -- MIT license (see residency.h).

   Do this:
       #define RESIDENCY_IMPLEMENTATION
       #include "residency_http.h"
   in *one* C or C++ file, before any system header. That one define turns on
   both implementations (residency.h is included from here). Other files include
   "residency_http.h" without the define. Link with nothing but libc; with
   RSD_HTTP_MBEDTLS also -lmbedtls -lmbedx509 -lmbedcrypto.

   CONFIGURATION MACROS
       RESIDENCY_HTTP_IMPLEMENTATION  same as RESIDENCY_IMPLEMENTATION: the shell uses
                                      the core's internals, so both are instantiated
       RSD_HTTP_MBEDTLS               enable https:// through mbedTLS 2.28+

   API REFERENCE
       --- url ---------------------------------------------------------------
       int rsd_url_parse(rsd_url *out, const char *s, size_t len)
           Splits "http(s)://host[:port][/path][?query][#fragment]" into views
           of s (zero-copy: keep s alive while using *out). RSD_OK, RSD_ERR_URL
           or RSD_ERR_ARG (out NULL, or s NULL with len > 0). Accepted:
             scheme  "http" or "https", any case; tls = (https).
             host    DNS name: dot-separated LDH labels ([A-Za-z0-9-], 1..63
                     bytes, no '-' at either end, 253 bytes total, no trailing
                     dot, last label not all digits; '_' is refused);
                     IPv4: strict dotted quad (4 parts, 0..255, no leading
                     zeros: "01.2.3.4" is refused, as are "1.2.3" and "1234");
                     IPv6: "[...]" with 1-4 hex digit groups, one "::" at
                     most, optional dotted-quad tail; zone ids ("%25eth0") are
                     refused. host_kind says which; host has no brackets.
             port    ":1".."65535" (at most 5 digits); else 80 / 443, with
                     port_explicit = false. ":" with no digits is refused.
             path    from the first '/' up to '#': path and query, as written
                     (no percent-decoding); empty when absent (send "/").
                     A query without a path ("http://h?q") is refused, so a
                     non-empty path always starts with '/'.
           Refused: other schemes, userinfo ('@' anywhere in the authority),
           any byte <= 0x20, 0x7F or >= 0x80 anywhere (spaces, controls,
           raw UTF-8), an empty host, len 0 or len > RSD_URL_MAX_BYTES (2048).
           The fragment is validated like the rest, then dropped.
       int rsd_url_key(const rsd_url *u, char *buf, size_t cap)
           Writes the normalised key NUL-terminated into buf and returns its
           length (> 0). Rules: scheme and host lower-cased (ASCII), IPv6 in
           brackets, the port only when it differs from the scheme's default
           (explicit ":80" on http is dropped, ":443" on http is kept), the
           path without query or fragment and without trailing slashes
           ("/" becomes ""). "HTTP://LocalHost:80/v1/?x#y" -> "http://localhost/v1".
           The key is never longer than the URL it came from, and it is a
           fixed point: rsd_url_key(rsd_url_parse(key)) == key. Returns
           RSD_ERR_BUFFER when cap < length + 1 (buf untouched), RSD_ERR_ARG for
           NULLs or a zeroed/invalid url. Two URLs naming the same server
           endpoint modulo case/default port/trailing slash share a key; %-
           encoding and "." segments are NOT normalised.
       --- httpparse: pure HTTP/1.x head parsers and chunked decoder ---------
       No sockets, no allocation, no state but what the caller holds. These
       are the fuzzed core under the client and the server.

       int rsd_http_parse_response(const char *buf, size_t len, size_t last_len,
                                   rsd_http_response_head *out, size_t *consumed)
       int rsd_http_parse_request(const char *buf, size_t len, size_t last_len,
                                  rsd_http_request_head *out, size_t *consumed)
           picohttpparser contract. Call with everything received so far:
             RSD_OK       head complete; *consumed = head bytes (the body, or
                          the next message, starts at buf + *consumed); out
                          holds views into buf (nothing is copied or
                          NUL-terminated) and the derived framing.
             RSD_PENDING  buf is a valid prefix: read more, call again with the
                          grown buffer and last_len = the previous len.
             RSD_ERR_PROTOCOL / RSD_ERR_HEADERS_TOO_LARGE (more than
                          RSD_HTTP_MAX_HEADERS = 64 fields), RSD_ERR_ARG (NULLs).
           *out is only meaningful on RSD_OK. Each call re-parses from buf[0]
           (stateless); last_len > 0 only lets it answer RSD_PENDING at once
           when no blank line ends the head in buf[last_len-3 .. len) (the
           slowloris shortcut). Consequence: with last_len, an error in newly
           arrived bytes is reported when the head's blank line arrives, not
           earlier; with last_len = 0 every call reports it at once. The
           parsers never read buf[len] or beyond (tested with a guard page),
           and every prefix of a valid head returns RSD_PENDING. There is no
           byte limit on the head: bound your receive buffer and treat "full
           and still PENDING" as RSD_ERR_HEADERS_TOO_LARGE.
           Accepted grammar (RFC 9112, with the leniencies marked *):
             status-line   "HTTP/1.0" or "HTTP/1.1", SP, 3 digits 100..999,
                           SP, reason (HTAB/SP/VCHAR/obs-text), line end;
                           * "HTTP/1.1 204" + line end (no SP, no reason) too.
             request-line  method (tchar+), SP, target (0x21..0x7E, no
                           obs-text), SP, "HTTP/1.x", line end; exactly one SP
                           each. * Empty lines before it are skipped (9112 2.2).
             field-line    name (tchar+) ':' OWS value OWS; value bytes are
                           HTAB, SP..'~' and 0x80..0xFF; leading/trailing
                           blanks are trimmed from the view. Whitespace before
                           ':', an empty name, obs-fold (a line starting with
                           SP/HTAB), NUL/CR/other controls or DEL in a value:
                           RSD_ERR_PROTOCOL.
             line end      CR LF, * or a bare LF (as picohttpparser); a CR not
                           followed by LF is an error.
           Framing (out->framing; RFC 9112 section 6):
             content_length  -1 when absent (for a request: no body). Digits
                           only, at most INT64_MAX; repeated fields or a
                           comma list must all carry the same value; anything
                           else is RSD_ERR_PROTOCOL.
             chunked       Transfer-Encoding (all fields, as one comma list,
                           codings compared case-insensitively) ends in
                           "chunked". "chunked" twice or not last: error.
                           Response with TE: Content-Length is ignored
                           (content_length = -1); TE not ending in chunked =>
                           close = true (body runs to connection close).
                           Request with TE: it must end in chunked and must not
                           also have Content-Length, else RSD_ERR_PROTOCOL.
                           HTTP/1.0 with any TE: RSD_ERR_PROTOCOL (9112 6.1).
             close         a "close" token in Connection (comma list, any case),
                           or HTTP/1.0 without a "keep-alive" token; also set
                           for a response whose TE does not end in chunked.
           Request only: expect_continue = HTTP/1.1 and "Expect: 100-continue"
           (any case). Whether a response has a body at all also depends on
           the request: see rsd_http_response_bodyless.
       rsd_str rsd_http_header_get(const rsd_http_header *h, size_t n, const char *name)
           First field named name (ASCII case-insensitive); {NULL, 0} when
           absent (an empty value present has a non-NULL ptr).
       bool rsd_http_response_bodyless(rsd_str method, int status)
           True for a response to "HEAD" (exact case), 1xx, 204 and 304:
           ignore its framing and read no body.

       int rsd_http_dechunk_step(rsd_http_dechunk *d, char *buf, size_t *len)
           Incremental, in-place chunked decoder. Zero *d before the body;
           feed each received piece (any split, down to single bytes). The
           call rewrites buf[0..*len) so that the decoded data is at
           buf[0..*len') and returns:
             RSD_PENDING  all input consumed, body not finished;
             RSD_OK       last chunk and trailers done; d->rest = number of
                          input bytes after the body (the next response on a
                          kept-alive connection), moved to buf[*len' ..
                          *len' + d->rest). Calling again after RSD_OK returns
                          RSD_OK with *len = 0 and d->rest = all the input.
             RSD_ERR_PROTOCOL  sticky; *len = data decoded before the fault.
           The decoded output is never longer than the input; d->total counts
           data bytes, d->overhead framing bytes. Accepted: hex sizes (either
           case, at most 16 digits, value <= 2^62), BWS then ";ext..." chunk
           extensions (skipped; size line <= RSD_HTTP_CHUNK_LINE_MAX = 1024
           bytes), trailer fields (skipped, must start with a tchar; all of
           them <= RSD_HTTP_TRAILER_MAX = 8192 bytes), CR LF or bare LF.
           Abuse guard: RSD_ERR_PROTOCOL as soon as overhead >
           RSD_HTTP_CHUNK_OVERHEAD_SLACK (4096) + total / 2, i.e. after the
           first 4 KiB the framing may be at most half the size of the data.
           1-byte chunks ("1\r\nx\r\n", 5 bytes of framing per data byte) are
           cut off after about 1 KiB of data; 16-byte chunks (6 per 16) and
           ordinary SSE event chunks pass. Limits are per body; bound the body
           itself with your own max_body_bytes.
       [doc:http client]
       [doc:http server]
       [doc:tls]
       [doc:drive]
       STATE: state directory, cross-process lock, persisted attribution (>>state)
       -------------------------------------------------------------------------
       State that must survive a restart or be shared between processes: which
       models this library loaded on each target (W10), which LM Studio instances
       it owns (W16), and one lock per target that serialises mutations across
       processes (W6). Everything is keyed by the normalised target key, a string
       such as "http://127.0.0.1:8080" from rsd_url_key (prefixes such as
       "lmstudio|" are fine: any non-empty string up to RSD_STATE_MAX_KEY_BYTES).

       Directory, first that is set and non-empty:
           desc.dir, $RESIDENCY_STATE_DIR, $XDG_STATE_HOME/residency (absolute
           XDG values only, as the XDG spec says), $HOME/.local/state/residency.
       The environment is read through desc.getenv_fn (default getenv), so tests
       and hosts can supply it. rsd_state_open creates every missing component
       with mode 0700 (mkdir -p) and then refuses (RSD_ERR_STATE_DIR, log item
       STATE_DIR_UNSAFE) a directory that is not a directory, not owned by our
       effective uid, or world-writable (others could plant files or swap our
       subdirectories). Group-writable is accepted: with umask 002 and per-user
       groups a hand-made directory is 0775. Existing modes are never changed.
       The state dir itself may be a symlink to such a directory (users relocate
       it); its subdirectories locks/ and attr/ must be real directories. Files
       are opened with O_CLOEXEC|O_NOFOLLOW|O_NONBLOCK and must be regular files,
       so a planted symlink or FIFO is refused, never followed or blocked on.

       Layout:
           <dir>/locks/<name>.lock   cross-process lock + owner record (0600)
           <dir>/attr/<name>.attr    attribution of one target (0600)
           <dir>/attr/<name>.lock    short lock around an attribution/generation update
           <dir>/attr/<name>.gen     mutation generation of one target ("<n>\n")
           <dir>/attr/<name>.{attr,gen}.tmp  transient, during an update
       <name> = rsd_state_file_name(key): the key's first bytes with every run of
       bytes outside [A-Za-z0-9._-] replaced by one '_' (at most
       RSD_STATE_NAME_PREFIX_BYTES, a leading '.' or '-' also becomes '_'), then
       '-', then the 64-bit FNV-1a hash of the whole key as 16 lower-case hex
       digits: "http://127.0.0.1:8080" -> "http_127.0.0.1_8080-75327da3b04bcbf2".
       The prefix is for humans; the hash keeps distinct keys apart ("a/b" and
       "a_b", or long keys sharing a prefix). Lock files are never deleted:
       unlinking a flock file while someone may hold or be opening it lets two
       processes lock two different inodes. One small file per target remains.

       int rsd_state_open(rsd_state **out, const rsd_state_desc *desc)
           Resolves and creates the directory, allocates the object (one block of
           about 165 KB from desc.allocator; nothing else allocates). desc NULL or
           zeroed = defaults. Errors: RSD_ERR_STATE_DIR (unresolvable, too long,
           mkdir failed, unsafe), RSD_ERR_ARG (half an allocator or lock hook),
           RSD_ERR_NOMEM. A reconciler without a state dir should run without the
           lock and without persistence rather than fail (upstream K5).
       void rsd_state_close(rsd_state *st)       release your locks first
       const char *rsd_state_dir(const rsd_state *st)
       int rsd_state_resolve_dir(const rsd_state_desc *d, char *buf, size_t cap)
           resolution only (no disk access); returns the length
       int rsd_state_file_name(const char *key, char *buf, size_t cap)
           cap >= RSD_STATE_MAX_NAME_BYTES; returns the length

       The lock. One rsd_state_lock per acquisition, embedded in the caller's
       object (for example a reconcile); zero it once. Lock semantics:
       flock(LOCK_EX) on <dir>/locks/<name>.lock. The kernel releases it when
       the holder's descriptor closes, including when the process dies (no
       stale locks, no pid adjudication, no staleness window). flock conflicts
       between open files, so two acquisitions in one process exclude each other
       too. After taking it the holder writes an owner record for diagnostics:
           pid=<pid>\nhost=<hostname>\ntaken_unix_ms=<wall clock>\npurpose=<text>\n
       and truncates it on release. The record never decides anything; it only
       feeds rsd_state_lock_owner and the timeout message (a holder that died
       leaves its record until the next holder overwrites it).
           int rsd_state_lock_begin(st, lk, key, purpose, now_ms, deadline_ms)
               no I/O; deadline_ms is absolute on the caller's clock, 0 = now_ms
               + desc.lock_wait_ms (default 120000). Pass the reconcile's own
               deadline so one overall deadline bounds lock and load (W5).
           int rsd_state_lock_step(st, lk, now_ms)
               never blocks; makes one attempt when now_ms >= lk->wake_ms.
               RSD_OK: HELD, or UNLOCKED (fail-open: proceed without the lock;
               lk->error says why). RSD_PENDING: come back at lk->wake_ms.
               <0: FAILED (fail-closed): RSD_ERR_TIMEOUT, RSD_ERR_LOCK (flock or
               open failed, or the hook's own negative code).
               Retries: 5 ms, doubling to 100 ms; the last wake is clamped to the
               deadline and the deadline is checked after a failed attempt, so
               the final attempt happens at the deadline. No jitter (no hidden
               randomness); flock needs none.
           int rsd_state_lock_try(st, lk, key, purpose)
               one attempt, no deadline: RSD_OK = HELD, RSD_PENDING = busy (lk
               left IDLE), <0 = error (lk IDLE).
           int rsd_state_lock_wait(st, lk, key, purpose, wait_ms)
               the blocking wrapper: begin + step + nanosleep on CLOCK_MONOTONIC.
               The only lock call that sleeps. wait_ms 0 = desc.lock_wait_ms.
           void rsd_state_unlock(st, lk)
               HELD: truncate the record, LOCK_UN, close. WAITING: abandon (close).
               UNLOCKED/FAILED: close nothing held; never releases a lock that
               lk did not take. Always leaves lk IDLE; idempotent.
           bool rsd_state_lock_held(const rsd_state_lock *lk)
           int rsd_state_lock_owner(st, key, rsd_lock_owner *out)
               RSD_OK, or RSD_ERR_NOT_FOUND when free or never taken.
       Example, a frame loop executing a reconcile's LOCK step:
           rsd_state_lock lk;  memset(&lk, 0, sizeof lk);   (once)
           rsd_state_lock_begin(st, &lk, key, "reconcile", now_ms, deadline_ms);
           every frame:  r = rsd_state_lock_step(st, &lk, now_ms);
               RSD_PENDING: nothing to do before lk.wake_ms;
               RSD_OK: mutate (rsd_state_lock_held(&lk) says whether under the
               lock), then rsd_state_unlock(st, &lk);   r < 0: give up.
       Blocking CLI: if (rsd_state_lock_wait(st, &lk, key, "cli", 0) == RSD_OK)
                     { ...; rsd_state_unlock(st, &lk); }
       Policy at the deadline or on an error: desc.lock_fail_closed false (the
       default, as upstream K5: serialisation is an optimisation that must never
       fail a turn) = RSD_OK in state UNLOCKED with a warning log item
       (LOCK_WAIT_EXPIRED, or LOCK_PROCEED_UNLOCKED for errors) naming the
       owner record; true = the error, state FAILED, log LOCK_TIMEOUT/LOCK_FAILED.
       State machine of rsd_state_lock (who may call what):
           IDLE --begin--> WAITING --step: taken--> HELD --unlock--> IDLE
                           WAITING --step: busy---> WAITING (wake_ms moves on)
                           WAITING --step: deadline/error--> UNLOCKED | FAILED
           UNLOCKED/FAILED --unlock--> IDLE;   WAITING --unlock--> IDLE (abandon)
           begin on HELD or WAITING is RSD_ERR_STATE; step on IDLE is RSD_ERR_STATE.
       Lock hook: desc.lock_hook = {try_lock(key, user), unlock(key, user), user}
       (both or neither) replaces flock entirely, for example with a distributed
       lock. try_lock must not block: RSD_OK taken, RSD_PENDING busy (retried on
       the same schedule), <0 error (then the fail-open/closed policy applies).
       unlock is called exactly once per successful try_lock. With a hook no
       lock file and no owner record are written.
       Fork: lock files are O_CLOEXEC. A child forked while a lock is held shares
       the open file (and so the lock) until it execs or exits; it must not call
       rsd_state_unlock on the inherited lk (LOCK_UN would release the parent's).

       Attribution. One text file per target:
           residency-attr 1\n
           <model>\t<instance>\t<loaded_at_ms>\t<pid>\n      (0..64 lines)
           end <count>\n
       Ids escape '\\' '\t' '\n' '\r' as \\ \t \n \r and every other byte below
       0x20 and 0x7f as \xHH; other bytes (UTF-8) are written as they are. An
       entry with an instance is an LM Studio instance this library owns (model
       = its model key); without one it marks a model this library loaded. The
       trailer detects truncation. The parser is strict: bad magic, escape,
       number, field count, duplicate (model, instance), an empty model, more
       than RSD_STATE_MAX_ATTR entries, a wrong count, bytes after the trailer,
       or a file over RSD_STATE_MAX_FILE_BYTES make the whole file corrupt: it
       reads as empty, out->corrupt is set and ATTR_CORRUPT is logged; the next
       add rewrites it. Never a crash (fuzzed: fuzz/fuzz_attr.c).
           int rsd_state_attr_load(st, key, rsd_attr_set *out)
               entry count; a missing file is empty. No lock needed: files are
               replaced by rename, so a reader sees the old or the new version.
               <0 (RSD_ERR_STATE_IO) only for an unreadable file (a symlink, a
               directory, EACCES).
           int rsd_state_attr_add(st, key, model, instance, loaded_at_ms)
               adds (model, instance) or refreshes its loaded_at_ms and pid;
               instance NULL or "" = plain attribution. loaded_at_ms is the
               caller's timestamp (wall-clock ms is the useful choice across
               restarts). RSD_OK, RSD_ERR_CAPACITY (ATTR_FULL logged),
               RSD_ERR_ARG (empty model, id over RSD_STATE_MAX_ID_BYTES).
           int rsd_state_attr_remove(st, key, model, instance)
               instance NULL = every entry of model (mark and instances);
               otherwise exactly (model, instance). Returns how many went.
           int rsd_attr_set_find(const rsd_attr_set *s, model, instance)
               index, or RSD_ERR_NOT_FOUND; instance NULL = any entry of model.
       Updates are read-modify-write under <dir>/attr/<name>.lock (flock,
       independent of the target lock, so they work whether or not the caller
       holds it): read, change, write <name>.attr.tmp, fsync it, rename over.
       The directory is not fsynced: after a crash the old or the new version
       is there, both valid (the rename may be lost, the data never torn).
       Concurrent adds from many processes lose nothing.
       These calls are synchronous file I/O (an fsync costs milliseconds); the
       file lock is polled (1 ms doubling to 20 ms) for at most
       RSD_STATE_ATTR_LOCK_WAIT_MS of sleep, then RSD_ERR_LOCK (ATTR_LOCK_TIMEOUT).
       A frame loop should call them from its I/O step, not per frame.

       Generation (W2: a decision cache shared in spirit across processes):
           int rsd_state_gen_read(st, key, uint64_t *out)
               0 when never bumped; RSD_ERR_STATE_IO when unreadable or corrupt
               (then do not trust a cached decision).
           int rsd_state_gen_bump(st, key, uint64_t *out)
               after any load/unload on key; under the same short file lock as
               attribution updates, replaced by rename (no fsync: after a crash
               every in-memory cache is gone anyway). A corrupt value restarts
               from the wall clock in ms, never from a number a cache may hold.
       A cache entry records the generation it saw and is valid while
       rsd_state_gen_read still returns it.

       Limits: RSD_STATE_MAX_DIR_BYTES 896 (dir path; 64 bytes are kept for
       file names), RSD_STATE_MAX_KEY_BYTES 2304, RSD_STATE_NAME_PREFIX_BYTES 48,
       RSD_STATE_MAX_ID_BYTES 255, RSD_STATE_MAX_ATTR 64 entries per target,
       RSD_STATE_MAX_FILE_BYTES (64 entries with every id byte escaped),
       RSD_STATE_MAX_PURPOSE_BYTES 63, RSD_STATE_MAX_HOST_BYTES 255,
       RSD_STATE_LOCK_WAIT_MS_DEFAULT 120000, retries 5..100 ms,
       RSD_STATE_ATTR_LOCK_WAIT_MS 10000. sizeof(rsd_state_lock) is about 2.5 KB
       (it keeps the key for the hook); sizeof(rsd_attr_set) about 33 KB.
       Errors: RSD_ERR_STATE_DIR, RSD_ERR_STATE_IO, RSD_ERR_LOCK, RSD_ERR_TIMEOUT,
       RSD_ERR_CAPACITY, RSD_ERR_ARG, RSD_ERR_STATE, RSD_ERR_NOT_FOUND.
       Threading: one rsd_state per thread (it has one scratch buffer); distinct
       objects, threads and processes may share a directory freely.
       Platform: POSIX (flock from <sys/file.h>; on Linux NFS maps it to fcntl
       locks). Not available on Windows yet.

   PLATFORM NOTES
       POSIX only for now (Linux, macOS, BSD). The process-wide SIGPIPE
       disposition is never touched: sends use MSG_NOSIGNAL (SO_NOSIGPIPE where
       that is the mechanism). No SIGCHLD handler is ever installed.
*/
#if defined(RESIDENCY_IMPLEMENTATION) && !defined(RESIDENCY_HTTP_IMPLEMENTATION)
#define RESIDENCY_HTTP_IMPLEMENTATION 1
#endif
#if defined(RESIDENCY_HTTP_IMPLEMENTATION) && !defined(RESIDENCY_IMPLEMENTATION)
#define RESIDENCY_IMPLEMENTATION 1
#endif
#include "residency.h"

#if RSD_VERSION_MAJOR != 0 || RSD_VERSION_MINOR != 1
#error "residency_http.h v0.1 needs residency.h v0.1: vendor both files from the same release"
#endif

#ifndef RESIDENCY_HTTP_H_INCLUDED
#define RESIDENCY_HTTP_H_INCLUDED

#ifdef __cplusplus
extern "C" {
#endif

/* ==== >>url (declarations) ================================================ */
enum { RSD_URL_MAX_BYTES = 2048 };  /* longest URL rsd_url_parse accepts */

typedef enum rsd_host_kind {
    RSD_HOST_INVALID = 0,
    RSD_HOST_NAME,   /* needs resolution (blocking helper or the user's resolver hook) */
    RSD_HOST_IPV4,   /* dotted quad, goes straight to connect() */
    RSD_HOST_IPV6,   /* written as [..] in the URL; host holds it without brackets */
    RSD_HOST_NUM
} rsd_host_kind;

/* A parsed URL: views into the caller's string (zero-copy; keep it alive). */
typedef struct rsd_url {
    rsd_str scheme;      /* "http" or "https", as written (any case) */
    rsd_str host;        /* without [] for IPv6 */
    rsd_str path;        /* from the first '/' (path and query, no fragment); may be empty = "/" */
    uint16_t port;       /* explicit, else 80 / 443 */
    bool tls;            /* scheme is https */
    bool port_explicit;  /* the URL named a port */
    rsd_host_kind host_kind;
} rsd_url;

/* Parses http(s)://host[:port][/path][?query][#fragment]. Userinfo (user@host),
   other schemes, bad ports, empty hosts, a query without a path, spaces, control and
   non-ASCII bytes are RSD_ERR_URL. */
RSD_API int rsd_url_parse(rsd_url *out, const char *s, size_t len);
/* Writes the normalised key ("http://127.0.0.1:8080/v1": lower-case scheme and host,
   default port dropped, trailing slashes removed, query and fragment dropped) NUL-terminated into buf. Returns the
   key length (>0) or RSD_ERR_BUFFER. Caches and locks are keyed by it. */
RSD_API int rsd_url_key(const rsd_url *u, char *buf, size_t cap);
/* ==== >>url end =========================================================== */

/* ==== >>httpparse (declarations) ========================================== */
/* Incremental, zero-copy parsers with the picohttpparser contract: call again with
   the same buffer grown by new bytes; RSD_OK = complete (*consumed = head bytes),
   RSD_PENDING = need more, <0 = error (RSD_ERR_PROTOCOL, RSD_ERR_HEADERS_TOO_LARGE). */
enum {
    RSD_HTTP_MAX_HEADERS = 64,             /* more header lines than this: RSD_ERR_HEADERS_TOO_LARGE */
    RSD_HTTP_CHUNK_LINE_MAX = 1024,        /* longest chunk-size line (size + extensions) */
    RSD_HTTP_TRAILER_MAX = 8192,           /* total bytes of trailer fields */
    RSD_HTTP_CHUNK_OVERHEAD_SLACK = 4096   /* dechunk guard: overhead > this + data/2 is an error */
};

typedef struct rsd_http_header {
    rsd_str name;   /* as received; compare case-insensitively */
    rsd_str value;  /* leading/trailing blanks trimmed */
} rsd_http_header;

/* Fields common to requests and responses, derived from the headers. */
typedef struct rsd_http_framing {
    int64_t content_length;  /* -1 when absent */
    bool chunked;            /* Transfer-Encoding ends in chunked */
    bool close;              /* Connection: close, HTTP/1.0 without keep-alive, or a
                                response body delimited by connection close */
} rsd_http_framing;

typedef struct rsd_http_response_head {
    int minor_version;       /* 1 for HTTP/1.1, 0 for HTTP/1.0 */
    int status;              /* 100..999 */
    rsd_str reason;
    rsd_http_header headers[RSD_HTTP_MAX_HEADERS];
    size_t num_headers;
    rsd_http_framing framing;
} rsd_http_response_head;

typedef struct rsd_http_request_head {
    rsd_str method;
    rsd_str target;          /* origin-form "/path?query" (or "*" / absolute-form as sent) */
    int minor_version;
    rsd_http_header headers[RSD_HTTP_MAX_HEADERS];
    size_t num_headers;
    rsd_http_framing framing;
    bool expect_continue;    /* Expect: 100-continue */
} rsd_http_request_head;

/* last_len: how many of these bytes the previous call already saw (0 the first time). */
RSD_API int rsd_http_parse_response(const char *buf, size_t len, size_t last_len,
                                    rsd_http_response_head *out, size_t *consumed);
RSD_API int rsd_http_parse_request(const char *buf, size_t len, size_t last_len,
                                   rsd_http_request_head *out, size_t *consumed);
/* Case-insensitive header lookup; the empty view (ptr NULL) when absent. */
RSD_API rsd_str rsd_http_header_get(const rsd_http_header *h, size_t n, const char *name);
/* True when a response to `method` with `status` has no body (HEAD, 1xx, 204, 304). */
RSD_API bool rsd_http_response_bodyless(rsd_str method, int status);

/* Chunked transfer decoding, in place, incremental. Zero the struct to start.
   Each call decodes buf[0..*len) in place and sets *len to the decoded data bytes now
   at the start of buf. Returns RSD_PENDING (feed more), RSD_OK (last chunk and
   trailers done; d->rest = how many of the input bytes after the end were not part of
   the body, left at buf[*len .. *len + d->rest)), or RSD_ERR_PROTOCOL (bad size line,
   extension or trailer too long, size overflow, or framing overhead over the guard). */
typedef struct rsd_http_dechunk {
    uint64_t chunk_left;     /* data bytes left in the current chunk */
    uint64_t total;          /* decoded data bytes so far */
    uint64_t overhead;       /* framing bytes so far (the abuse guard) */
    size_t rest;             /* on RSD_OK: bytes after the body's end */
    uint32_t line_bytes;     /* bytes of the current size line, or of all trailers so far */
    int state;               /* internal */
} rsd_http_dechunk;
RSD_API int rsd_http_dechunk_step(rsd_http_dechunk *d, char *buf, size_t *len);
/* ==== >>httpparse end ===================================================== */

/* ==== >>http client (declarations) ======================================== */

/* ==== >>http client end =================================================== */

/* ==== >>http server (declarations) ======================================== */

/* ==== >>http server end =================================================== */

/* ==== >>drive (declarations) ============================================== */

/* ==== >>drive end ========================================================= */

/* ==== >>proc (declarations) =============================================== */
/* PROC -- child-process supervision (residency_http.h, section >>proc)
   -------------------------------------------------------------------------
   Runs model servers (llama-server by default) as child processes for the pool:
   builds argv from a template, picks a free loopback port, starts the child,
   drains its stdout+stderr into a fixed ring, notices its exit, stops it with
   SIGTERM then SIGKILL. Non-blocking: nothing waits except a spawn itself (the
   calling thread pauses until the child has exec'd, ~0.5-2 ms) and
   rsd_procs_destroy (bounded). Compiled out by RSD_NO_PROCESS.

   Frame loop:
       rsd_procs *p = rsd_procs_create(&desc);             (the only allocation)
       rsd_proc h;  rsd_procs_spawn(p, &spec, now, &h);     (STARTING)
       each frame / after poll():
           uint64_t next = rsd_procs_step(p, now);          (drain, reap, timers)
           while (rsd_procs_next_event(p, &ev)) switch (ev.kind) {
           case RSD_PROC_EV_PROBE:   send GET http://127.0.0.1:<port>/health;
                                     200 -> rsd_procs_mark_ready(p, ev.proc, now)
           case RSD_PROC_EV_EXITED:  crashed / early exit: quote rsd_procs_tail()
           case RSD_PROC_EV_STOPPED: gone after a stop; rsd_procs_release(p, ev.proc)
           ... }
           poll() the descriptors from rsd_procs_fds (POLLIN) until `next`.
       rsd_procs_stop(p, h, now);  ... STOPPED ...  rsd_procs_release(p, h);
       rsd_procs_destroy(p);       (SIGKILLs and reaps whatever is left)

   Mapping to the pool (residency.h >>pool): action SPAWN -> rsd_procs_spawn
   (RSD_ERR_SPAWN: rsd_pool_on_started(ok=false) then on_exited); PROBE + /health
   200 -> mark_ready + rsd_pool_on_started(ok=true); START_TIMEOUT ->
   on_started(ok=false); action STOP -> rsd_procs_stop; EXITED or STOPPED ->
   rsd_pool_on_exited (W27: the slot is freed on any failure or crash) and
   rsd_procs_release. rsd_pool_set_pid(info.pid) for stats.

   States (rsd_proc_state):
       spawn ok --> STARTING --mark_ready--> READY
       spawn failed --> FAILED                          (SPAWN_FAILED queued)
       STARTING/READY --stop--> STOPPING --term_grace_ms--> KILLING (SIGKILL)
       STARTING --start deadline--> START_TIMEOUT, then as stop  (timed_out)
       STARTING/READY --exits--> EXITED                 (event EXITED)
       STOPPING/KILLING --exits--> EXITED               (event STOPPED)
       KILLING --kill_wait_ms, not reaped--> STUCK notice, stays KILLING
       EXITED/FAILED --rsd_procs_release--> FREE        (handle goes stale)
       rsd_procs_kill: STARTING/READY/STOPPING --> KILLING at once.
   Each process yields exactly one terminal event: SPAWN_FAILED, EXITED or
   STOPPED. An exit while STOPPING/KILLING or after a start timeout is STOPPED,
   any other exit is EXITED (.was_ready says whether it was serving: a crash).

   int rsd_procs_spawn(p, spec, now_ms, &h)
       RSD_OK: running, STARTING, h valid. RSD_ERR_SPAWN: h valid, state FAILED,
       SPAWN_FAILED queued right away with .err = errno (ENOENT for a missing
       binary, EACCES, EAGAIN, EMFILE...), nothing left to reap (W31: no wait).
       Other <0 (no process, h = 0): RSD_ERR_ARG, RSD_ERR_CAPACITY (no free slot,
       argv/env over the limits), RSD_ERR_PROC_TEMPLATE, RSD_ERR_PROC_PORT.
       Steps: port (spec.port, else bind 127.0.0.1:0, read it back, close: W30;
       a port another live child of ours holds is skipped), argv expansion, the
       environment, PATH lookup of a bare exe name (in the child's PATH when
       spec.env sets one), then the launch. The child gets: stdin /dev/null,
       stdout and stderr into one pipe (so the ring keeps their order), every
       other descriptor closed (the host's descriptors without O_CLOEXEC too), its
       own process group, default signal dispositions, an empty signal mask, and
       on Linux PR_SET_PDEATHSIG = SIGKILL (unless desc.survive_parent).
   Templates: spec.args is argv after argv[0] (NULL = rsd_proc_llama_args():
       -m {model} --host {host} --port {port} ?-c {ctx} ?-np {parallel}
       ?-ngl {ngl} ?--alias {alias} {extra}). Each element is one argument;
       {model} {alias} {host} {port} {ctx} {parallel} {ngl} {name} and
       spec.vars names are replaced inside it; "{{" and "}}" are braces. The
       element "{extra}" is replaced by spec.extra's arguments (appended at the
       end when the template has no "{extra}"). "?flag" followed by a value
       element is an optional pair: both are emitted when every placeholder of
       both is set, else neither. "??x" is the literal "?x". A required element
       with an unset or unknown placeholder, or a bad brace, is
       RSD_ERR_PROC_TEMPLATE. Unset: NULL/"" strings, ctx <= 0, parallel <= 0;
       host defaults to 127.0.0.1; port is always set. rsd_procs_expand runs the
       same expansion into caller buffers without spawning.
   spec.env: "NAME=value" sets or overrides, "NAME" removes; the rest is inherited.
   spec.cwd: the child's working directory (a relative exe with '/' is
       resolved there). spec.start_deadline_ms overrides desc's per process.

   Readiness (P44, W31): rsd_procs_step emits PROBE events while STARTING: the
   first probe_first_ms (10) after the spawn, then the interval doubles up to
   probe_max_ms (500): +10, +20, +40 ... +500, +500, never past the start
   deadline. At most one PROBE is pending per process (an unpulled one is not
   repeated), so a host that ignores them loses nothing. The host sends
   GET /health and: 200 -> rsd_procs_mark_ready; 503 (loading) or connection
   refused -> wait for the next PROBE; an exit ends the wait at once (EXITED
   arrives from step, with the status and the ring). No READY within the start
   deadline (default 300 s) -> START_TIMEOUT, SIGTERM, later STOPPED(timed_out).

   Stop (P46, W31): SIGTERM to the child's process group (a shell wrapper's own
   children too), SIGKILL at now + term_grace_ms (default 10 s), then the reaped
   exit is awaited: STOPPED comes only once waitpid has it, so the port and VRAM
   are free when it arrives. If a SIGKILLed child is not reaped within
   kill_wait_ms (a process in uninterruptible sleep), STUCK is emitted and
   reaping continues. Signals are only ever sent to a pid we have not reaped, so
   a recycled pid is never hit.

   Reaping: waitpid(pid, WNOHANG) per child, never waitpid(-1) (the host's other
   children are not ours); no SIGCHLD handler is installed. Exits are noticed via
   a pidfd (Linux 5.3+, in rsd_procs_fds) or, without one, by polling: every
   RSD_PROC_REAP_POLL_MS (1 s), or 1, 2, 4 ... ms once the output pipe closed.
   If the host sets SIGCHLD to SIG_IGN the kernel reaps for us: the exit is then
   reported with exit_code -1 and term_signal 0 (status unknown).

   Output: the pipe is non-blocking and drained at every step (up to
   RSD_PROC_DRAIN_STEP_BYTES per process), so a chatty child never blocks on a
   full pipe for longer than the host's step interval. The ring keeps the last
   desc.ring_bytes (default 16 KiB). rsd_procs_tail(p, h, n, buf, cap) gives the
   last n lines (0 = all), starting at a line boundary, control bytes as '?',
   cut from the front to fit cap; valid until rsd_procs_release, so error
   messages can quote it after EXITED. desc.log_output forwards every line to the
   logger (RSD_LOG_DEBUG, item PROC_OUTPUT, "<name>[<pid>]: <line>", lines cut at
   RSD_PROC_LINE_MAX). rsd_procs_command quotes the expanded command line.

   Other calls: rsd_procs_query (pid, port, state, uptime, exit status, counts),
   rsd_procs_live (handles of running processes), rsd_procs_next_deadline,
   rsd_procs_kill (SIGKILL now), rsd_procs_release (EXITED/FAILED -> FREE).
   Events: a queue of 4 x max_procs; if the host never pulls them the oldest are
   dropped, so pull them every step.

   Spawn methods (desc.spawn; measured with bench/proc.mk, see the report):
       VFORK  Linux default: vfork + prctl(PR_SET_PDEATHSIG) + execve. The child
              borrows the parent's memory until exec, so the cost does not grow
              with the host's heap (fork of a 256 MiB-heap parent took ~63-70 ms
              here; vfork and posix_spawn ~2 ms). The calling thread is paused
              until exec; all signals are blocked meanwhile.
       FORK   fork + the same child code; exec errors come back through an
              O_CLOEXEC pipe. Forced everywhere by RSD_SPAWN_VIA_FORK.
       POSIX  posix_spawn (POSIX_SPAWN_SETPGROUP, SETSIGMASK, SETSIGDEF,
              addclosefrom_np on glibc 2.34+, addchdir_np on glibc 2.29+, else
              the fork path when a cwd is given). Cannot set PDEATHSIG, so on
              Linux it needs desc.survive_parent (create fails otherwise);
              default elsewhere.
   Children die with their parent: Linux only (PR_SET_PDEATHSIG, SIGKILL). The
   kernel sends it when the *thread* that spawned the child exits, so spawn from
   a thread that lives as long as the supervisor. Only the direct child gets it;
   a wrapper script's children do not. Elsewhere, and with survive_parent,
   children outlive a crashed host (llama-server does not watch a pipe).

   Limits: RSD_PROCS_MAX 64 processes (default 16), RSD_PROC_MAX_ARGS 128,
   desc.arg_bytes (default 8192, max 1 MiB) of expanded command per process,
   RSD_PROC_MAX_ENV 1024 environment entries, RSD_PROC_MAX_VARS 16,
   RSD_PROC_RING_MIN 256 .. RSD_PROC_RING_MAX 16 MiB, RSD_PROC_PATH_MAX 4096,
   RSD_PROC_NAME_MAX 64. Memory: one block of about max_procs x (ring_bytes +
   arg_bytes + 1 KiB) + 14 KiB (defaults: about 410 KB). Descriptors per running
   child: 2 (pipe, pidfd).
   W30 residual race: the port is free when chosen but not held; another process
   may bind it before the child does (llama-server then exits 1 within ~10 ms:
   EXITED with "couldn't bind" in the tail; spawn again).
   Errors: RSD_ERR_SPAWN, RSD_ERR_PROC_TEMPLATE, RSD_ERR_PROC_PORT,
   RSD_ERR_PROC_STALE, RSD_ERR_STATE, RSD_ERR_CAPACITY, RSD_ERR_ARG.
   Threading: one rsd_procs per thread; not thread-safe. POSIX only. */
#ifndef RSD_NO_PROCESS
enum {
    RSD_PROCS_MAX = 64,                  /* hard cap on desc.max_procs */
    RSD_PROCS_DEFAULT = 16,              /* desc.max_procs when 0 */
    RSD_PROC_MAX_ARGS = 128,             /* argv entries after expansion (argv[0] included) */
    RSD_PROC_ARG_BYTES_DEFAULT = 8192,   /* desc.arg_bytes when 0: expanded command per process */
    RSD_PROC_ARG_BYTES_MAX = 1 << 20,    /* cap on desc.arg_bytes */
    RSD_PROC_MAX_ENV = 1024,             /* entries of a child's environment (inherited + added) */
    RSD_PROC_MAX_VARS = 16,              /* user placeholders in rsd_proc_spec.vars */
    RSD_PROC_RING_DEFAULT = 16384,       /* desc.ring_bytes when 0: output kept per process */
    RSD_PROC_RING_MIN = 256,             /* smaller desc.ring_bytes values are raised to this */
    RSD_PROC_RING_MAX = 1 << 24,         /* cap on desc.ring_bytes */
    RSD_PROC_LINE_MAX = 512,             /* longest output line forwarded to the logger */
    RSD_PROC_NAME_MAX = 64,              /* bytes of a process label, including the NUL */
    RSD_PROC_PATH_MAX = 4096,            /* longest resolved program path */
    RSD_PROC_TERM_GRACE_DEFAULT_MS = 10000,     /* SIGTERM -> SIGKILL (desc.term_grace_ms) */
    RSD_PROC_START_DEADLINE_DEFAULT_MS = 300000,/* STARTING -> START_TIMEOUT (W31, P44) */
    RSD_PROC_KILL_WAIT_DEFAULT_MS = 5000,       /* SIGKILL -> STUCK notice if not reaped */
    RSD_PROC_PROBE_FIRST_DEFAULT_MS = 10,       /* first readiness probe after the spawn */
    RSD_PROC_PROBE_MAX_DEFAULT_MS = 500,        /* probe interval doubles up to this */
    RSD_PROC_REAP_POLL_MS = 1000,        /* waitpid poll when no pidfd and no pipe EOF */
    RSD_PROC_DRAIN_STEP_BYTES = 1 << 20, /* most output read from one process per step */
    RSD_PROC_DESTROY_WAIT_MS = 2000      /* rsd_procs_destroy waits this long per reap */
};
/* rsd_procs_step / rsd_procs_next_deadline when no timer is armed. */
#define RSD_PROC_NO_DEADLINE UINT64_MAX

/* Process handle (index in the low 8 bits, generation above; 0 = invalid). */
typedef struct rsd_proc { uint32_t id; } rsd_proc;

/* Process states; see the state machine in the manual. */
typedef enum rsd_proc_state {
    RSD_PROC_FREE = 0,   /* no process in this slot (or a stale handle) */
    RSD_PROC_STARTING,   /* running; waiting for rsd_procs_mark_ready */
    RSD_PROC_READY,      /* running and marked ready */
    RSD_PROC_STOPPING,   /* SIGTERM sent; SIGKILL at the end of the grace period */
    RSD_PROC_KILLING,    /* SIGKILL sent; waiting for the reap */
    RSD_PROC_EXITED,     /* reaped (exit status known); rsd_procs_release frees it */
    RSD_PROC_FAILED,     /* never ran (spawn failed; errno known); rsd_procs_release */
    RSD_PROC_STATE_NUM
} rsd_proc_state;

/* How children are started (rsd_procs_desc.spawn). */
typedef enum rsd_proc_spawn_method {
    RSD_PROC_SPAWN_AUTO = 0,  /* Linux: VFORK, or POSIX with survive_parent; elsewhere POSIX */
    RSD_PROC_SPAWN_POSIX,     /* posix_spawn (no PDEATHSIG: needs survive_parent on Linux) */
    RSD_PROC_SPAWN_VFORK,     /* Linux: vfork + prctl(PDEATHSIG) + execve (FORK elsewhere) */
    RSD_PROC_SPAWN_FORK,      /* fork + prctl + execve; forced by RSD_SPAWN_VIA_FORK */
    RSD_PROC_SPAWN_NUM
} rsd_proc_spawn_method;

/* Supervisor configuration; zeroed means defaults. */
typedef struct rsd_procs_desc {
    int max_procs;              /* process slots; 0 = RSD_PROCS_DEFAULT; 1..RSD_PROCS_MAX */
    uint32_t ring_bytes;        /* output ring per process; 0 = RSD_PROC_RING_DEFAULT */
    uint32_t arg_bytes;         /* expanded command per process; 0 = RSD_PROC_ARG_BYTES_DEFAULT */
    uint32_t term_grace_ms;     /* SIGTERM -> SIGKILL; 0 = RSD_PROC_TERM_GRACE_DEFAULT_MS */
    uint32_t start_deadline_ms; /* STARTING too long -> START_TIMEOUT + stop; 0 = 300000 */
    uint32_t kill_wait_ms;      /* SIGKILL not reaped -> STUCK notice; 0 = 5000 */
    uint32_t probe_first_ms;    /* first readiness probe; 0 = 10 */
    uint32_t probe_max_ms;      /* probe interval doubles up to this; 0 = 500 */
    bool survive_parent;        /* false (default): children get SIGKILL when we die (Linux) */
    bool log_output;            /* forward each child output line to the logger (DEBUG) */
    rsd_proc_spawn_method spawn;/* RSD_PROC_SPAWN_AUTO by default */
    rsd_allocator allocator;    /* zeroed = RSD_DEFAULT_ALLOC/FREE */
    rsd_logger logger;          /* zeroed = silent */
} rsd_procs_desc;

/* One placeholder value for a command template: {name} -> value. */
typedef struct rsd_proc_var {
    const char *name;           /* [A-Za-z0-9_]+, not one of the built-in names */
    const char *value;          /* NULL or "" = unset */
} rsd_proc_var;

/* What to run. Strings are read during rsd_procs_spawn only (nothing is kept). */
typedef struct rsd_proc_spec {
    const char *exe;            /* program: a path, or a name searched in PATH; NULL = "llama-server" */
    const char *const *args;    /* argv template after argv[0], NULL-terminated; NULL = rsd_proc_llama_args */
    const char *const *extra;   /* the user's extra arguments (NULL-terminated): at "{extra}", else appended */
    const char *model;          /* {model}: model file path */
    const char *alias;          /* {alias}: served model name; NULL/"" = unset */
    const char *host;           /* {host}: NULL = "127.0.0.1" */
    uint16_t port;              /* {port}: 0 = pick a free loopback port (bind port 0, W30) */
    int64_t ctx;                /* {ctx}: context size; <= 0 = unset */
    int parallel;               /* {parallel}: slots; <= 0 = unset */
    const char *ngl;            /* {ngl}: GPU layers ("99", "auto", "all"); NULL/"" = unset */
    const rsd_proc_var *vars;   /* more placeholders, num_vars of them (<= RSD_PROC_MAX_VARS) */
    int num_vars;
    const char *const *env;     /* "NAME=value" set/override, "NAME" unset; NULL-terminated */
    const char *cwd;            /* working directory; NULL = ours */
    const char *name;           /* label for logs ({name}); NULL = the model's file name */
    uint32_t start_deadline_ms; /* 0 = desc.start_deadline_ms */
    void *user;                 /* echoed in events and info */
} rsd_proc_spec;

/* The built-in llama-server template (wire.md 2.1, P43):
   -m {model} --host {host} --port {port} ?-c {ctx} ?-np {parallel} ?-ngl {ngl}
   ?--alias {alias} {extra}. NULL-terminated. */
RSD_API const char *const *rsd_proc_llama_args(void);

/* Events pulled with rsd_procs_next_event. Each process ends with exactly one of
   SPAWN_FAILED, EXITED or STOPPED; START_TIMEOUT, STUCK and PROBE come before it. */
typedef enum rsd_proc_event_kind {
    RSD_PROC_EV_NONE = 0,
    RSD_PROC_EV_SPAWN_FAILED, /* never ran: .err = errno (ENOENT, EACCES, EAGAIN...) */
    RSD_PROC_EV_EXITED,       /* died without being asked (early exit or crash): status */
    RSD_PROC_EV_STOPPED,      /* exited after rsd_procs_stop or a start timeout: status */
    RSD_PROC_EV_START_TIMEOUT,/* not marked ready by the start deadline; stop begun */
    RSD_PROC_EV_STUCK,        /* SIGKILL sent kill_wait_ms ago and still not reaped */
    RSD_PROC_EV_PROBE,        /* STARTING: send a readiness probe (GET /health) now */
    RSD_PROC_EV_NUM
} rsd_proc_event_kind;

/* One event. */
typedef struct rsd_proc_event {
    rsd_proc_event_kind kind;
    rsd_proc proc;
    int64_t pid;                /* 0 for SPAWN_FAILED */
    int exit_code;              /* EXITED/STOPPED: exit status 0..255, or -1 (signal / unknown) */
    int term_signal;            /* EXITED/STOPPED: signal that ended it, 0 = none */
    int err;                    /* SPAWN_FAILED: errno */
    bool was_ready;             /* it had been marked ready (EXITED = a crash while serving) */
    bool killed;                /* SIGKILL was needed (the grace period ran out) */
    bool timed_out;             /* the start deadline passed */
    uint64_t at_ms;             /* now_ms of the step that saw it */
    void *user;                 /* rsd_proc_spec.user */
} rsd_proc_event;

/* Snapshot of one process (rsd_procs_query). */
typedef struct rsd_proc_info {
    rsd_proc_state state;
    int64_t pid;                /* 0 when it never ran */
    uint16_t port;              /* the port it was given ({port}) */
    uint64_t spawn_ms, ready_ms;/* now_ms at spawn / mark_ready (0 = not yet) */
    uint64_t uptime_ms;         /* since spawn, up to now_ms or the reap */
    uint64_t start_deadline_ms; /* absolute */
    int exit_code, term_signal; /* as in rsd_proc_event; -1 / 0 while running */
    bool core_dumped;
    int err;                    /* spawn errno, 0 = none */
    bool was_ready, killed, timed_out, stop_requested;
    uint64_t out_bytes;         /* output bytes read so far (the ring keeps the last ring_bytes) */
    uint64_t out_lines;         /* newlines read so far */
    int argc;                   /* expanded argument count, argv[0] included */
    const char *name;           /* label (owned by the supervisor) */
    void *user;
} rsd_proc_info;

typedef struct rsd_procs rsd_procs;

/* Create a supervisor (the only allocation); NULL on a bad desc or no memory. */
RSD_API rsd_procs *rsd_procs_create(const rsd_procs_desc *desc);
/* SIGKILL every live child and reap it (bounded wait), then free. NULL is fine. */
RSD_API void rsd_procs_destroy(rsd_procs *p);
/* Expand spec into argv without running anything (port 0 stays "0"): argc or <0.
   argv gets up to cap-1 pointers into buf plus a NULL. */
RSD_API int rsd_procs_expand(const rsd_proc_spec *spec, char *buf, size_t buf_cap,
                             const char **argv, int cap);
/* Start a process: RSD_OK (STARTING, *out set), RSD_ERR_SPAWN (*out set, state FAILED,
   SPAWN_FAILED queued), or <0 with no process (ERR_ARG, ERR_CAPACITY, ERR_PROC_*). */
RSD_API int rsd_procs_spawn(rsd_procs *p, const rsd_proc_spec *spec, uint64_t now_ms,
                            rsd_proc *out);
/* STARTING -> READY (the host's /health probe said 200). RSD_ERR_STATE otherwise. */
RSD_API int rsd_procs_mark_ready(rsd_procs *p, rsd_proc h, uint64_t now_ms);
/* SIGTERM the child's process group, SIGKILL after term_grace_ms; STOPPED follows. Also
   RSD_OK when already stopping or gone. */
RSD_API int rsd_procs_stop(rsd_procs *p, rsd_proc h, uint64_t now_ms);
/* SIGKILL now (no grace); STOPPED follows. */
RSD_API int rsd_procs_kill(rsd_procs *p, rsd_proc h, uint64_t now_ms);
/* Free an EXITED/FAILED slot (the handle goes stale). RSD_ERR_STATE while running. */
RSD_API int rsd_procs_release(rsd_procs *p, rsd_proc h);
/* Drain pipes, reap exits, run timers; returns the next deadline (or RSD_PROC_NO_DEADLINE). */
RSD_API uint64_t rsd_procs_step(rsd_procs *p, uint64_t now_ms);
/* The next time rsd_procs_step has timed work (no side effects). */
RSD_API uint64_t rsd_procs_next_deadline(const rsd_procs *p);
/* Descriptors to poll for readability (output pipes, pidfds): count written (<= cap). */
RSD_API int rsd_procs_fds(const rsd_procs *p, int *fds, int cap);
/* Pull the oldest event; false when none. */
RSD_API bool rsd_procs_next_event(rsd_procs *p, rsd_proc_event *ev);
/* Snapshot of one process at now_ms; RSD_ERR_PROC_STALE for a bad handle. */
RSD_API int rsd_procs_query(const rsd_procs *p, rsd_proc h, uint64_t now_ms, rsd_proc_info *info);
/* The last max_lines output lines (0 = all the ring holds), NUL-terminated in buf with
   control bytes shown as '?'; returns the length (truncated from the front to fit) or <0. */
RSD_API int rsd_procs_tail(const rsd_procs *p, rsd_proc h, int max_lines, char *buf, size_t cap);
/* The expanded command line, arguments quoted where needed, for messages; length or <0. */
RSD_API int rsd_procs_command(const rsd_procs *p, rsd_proc h, char *buf, size_t cap);
/* Handles of live processes (not EXITED/FAILED/FREE): count written. */
RSD_API int rsd_procs_live(const rsd_procs *p, rsd_proc *out, int cap);
/* Names for enums (never NULL). */
RSD_API const char *rsd_proc_state_name(int state);
/* Name of an rsd_proc_event_kind (never NULL). */
RSD_API const char *rsd_proc_event_name(int kind);
#endif /* RSD_NO_PROCESS */
/* ==== >>proc end ========================================================== */

/* ==== >>state (declarations) ============================================== */
/* State under a state directory: persisted attribution (models / LM Studio instances
   this library loaded) and a cross-process lock, one file each per target key. */
enum {
    RSD_STATE_MAX_DIR_BYTES = 896,       /* longest state directory path */
    RSD_STATE_MAX_KEY_BYTES = 2304,      /* longest target key (URL key plus a prefix) */
    RSD_STATE_NAME_PREFIX_BYTES = 48,    /* readable part of a state file name */
    RSD_STATE_MAX_NAME_BYTES = 80,       /* buffer for a file name: prefix '-' 16 hex NUL */
    RSD_STATE_MAX_ID_BYTES = 255,        /* longest model id / instance id in an attribution */
    RSD_STATE_MAX_ATTR = 64,             /* entries in one attribution set (one target) */
    RSD_STATE_MAX_PURPOSE_BYTES = 63,    /* lock purpose kept in the owner record */
    RSD_STATE_MAX_HOST_BYTES = 255,      /* host name kept in the owner record */
    RSD_STATE_LOCK_WAIT_MS_DEFAULT = 120000, /* lock wait budget when the desc says 0 */
    RSD_STATE_LOCK_RETRY_MIN_MS = 5,     /* first retry delay of a waiting lock */
    RSD_STATE_LOCK_RETRY_MAX_MS = 100,   /* retry delay doubles up to this */
    RSD_STATE_ATTR_LOCK_WAIT_MS = 10000, /* longest sleep waiting for the attribution-file lock */
    /* largest attribution file accepted (every byte of two ids escaped as \xHH) */
    RSD_STATE_MAX_FILE_BYTES = 64 + RSD_STATE_MAX_ATTR * (8 * RSD_STATE_MAX_ID_BYTES + 48)
};

typedef struct rsd_state rsd_state;  /* opaque; rsd_state_open / rsd_state_close */

/* A user lock that replaces flock (for example a distributed lock). try_lock must not
   block: RSD_OK = taken, RSD_PENDING = held elsewhere (retried later), <0 = error. */
typedef struct rsd_state_lock_hook {
    int (*try_lock)(const char *key, void *user);
    void (*unlock)(const char *key, void *user);
    void *user;
} rsd_state_lock_hook;

/* Zeroed = defaults: directory from the environment, flock, 120 s, proceed unlocked. */
typedef struct rsd_state_desc {
    const char *dir;            /* state directory; NULL/"" = RESIDENCY_STATE_DIR, XDG, HOME */
    const char *(*getenv_fn)(const char *name, void *user);  /* NULL = getenv */
    void *getenv_user;
    rsd_state_lock_hook lock_hook;  /* both functions or neither; set = replaces flock */
    uint32_t lock_wait_ms;      /* 0 = RSD_STATE_LOCK_WAIT_MS_DEFAULT */
    bool lock_fail_closed;      /* deadline/error: false = proceed unlocked (warn), true = fail */
    rsd_allocator allocator;
    rsd_logger logger;
} rsd_state_desc;

/* Lock acquisition states (rsd_state_lock.state). */
typedef enum rsd_lock_state {
    RSD_LOCK_IDLE = 0,   /* zeroed, released, or a try that found it busy */
    RSD_LOCK_WAITING,    /* begun: call rsd_state_lock_step at wake_ms */
    RSD_LOCK_HELD,       /* held (flock or the hook) until rsd_state_unlock */
    RSD_LOCK_UNLOCKED,   /* fail-open: deadline/error passed, proceed without the lock */
    RSD_LOCK_FAILED,     /* fail-closed: gave up; error says why */
    RSD_LOCK_STATE_NUM
} rsd_lock_state;

/* One lock acquisition, owned by the caller (embed it, zero it). Fields marked
   read-only may be inspected; the rest is internal. */
typedef struct rsd_state_lock {
    int error;                  /* read-only: RSD_OK, or why it is UNLOCKED/FAILED */
    rsd_lock_state state;       /* read-only */
    uint64_t wake_ms;           /* read-only: next time rsd_state_lock_step wants to run */
    uint64_t deadline_ms;       /* read-only: when waiting gives up */
    uint32_t attempts;          /* read-only: try_lock/flock attempts made */
    uint32_t backoff_ms;        /* internal */
    uint64_t begin_ms;          /* internal */
    int fd;                     /* internal: lock file, -1 when closed */
    bool via_hook;              /* internal */
    char name[RSD_STATE_MAX_NAME_BYTES];            /* internal: file name */
    char purpose[RSD_STATE_MAX_PURPOSE_BYTES + 1];  /* internal */
    char key[RSD_STATE_MAX_KEY_BYTES + 1];          /* internal */
} rsd_state_lock;

/* Diagnostics written into a lock file by its holder. */
typedef struct rsd_lock_owner {
    int64_t pid;
    uint64_t taken_unix_ms;     /* wall clock when taken (diagnostics only) */
    char host[RSD_STATE_MAX_HOST_BYTES + 1];
    char purpose[RSD_STATE_MAX_PURPOSE_BYTES + 1];
} rsd_lock_owner;

/* One attribution: a model this library loaded on a target; with instance set, an
   LM Studio instance this library owns (model = its model key). */
typedef struct rsd_attr {
    char model[RSD_STATE_MAX_ID_BYTES + 1];
    char instance[RSD_STATE_MAX_ID_BYTES + 1];  /* "" = plain attribution */
    uint64_t loaded_at_ms;      /* caller's timestamp (wall-clock ms recommended) */
    int64_t pid;                /* process that wrote the entry (diagnostics) */
} rsd_attr;

/* The attribution of one target, in file order. */
typedef struct rsd_attr_set {
    size_t count;
    bool corrupt;               /* the file was corrupt and was read as empty */
    rsd_attr items[RSD_STATE_MAX_ATTR];
} rsd_attr_set;

/* Resolves the state directory (desc->dir, RESIDENCY_STATE_DIR, $XDG_STATE_HOME/residency,
   $HOME/.local/state/residency) into buf without touching the disk; length or <0. */
RSD_API int rsd_state_resolve_dir(const rsd_state_desc *desc, char *buf, size_t cap);
/* Safe file name for a key: sanitised prefix '-' FNV-1a-64 hex; length or RSD_ERR_ARG/BUFFER. */
RSD_API int rsd_state_file_name(const char *key, char *buf, size_t cap);
/* Resolves and creates (0700, mkdir -p) the state dir and allocates the object. */
RSD_API int rsd_state_open(rsd_state **out, const rsd_state_desc *desc);
/* Frees the object (NULL is fine). Locks must be released first. */
RSD_API void rsd_state_close(rsd_state *st);
/* The resolved state directory. */
RSD_API const char *rsd_state_dir(const rsd_state *st);

/* Starts acquiring key's lock; no I/O. deadline_ms: absolute, on the caller's now_ms
   clock; 0 = now_ms + lock_wait_ms. Then call rsd_state_lock_step. */
RSD_API int rsd_state_lock_begin(rsd_state *st, rsd_state_lock *lk, const char *key,
                                 const char *purpose, uint64_t now_ms, uint64_t deadline_ms);
/* Never blocks. One attempt when now_ms >= lk->wake_ms. RSD_OK = HELD or UNLOCKED (proceed),
   RSD_PENDING = call again at lk->wake_ms, <0 = FAILED (RSD_ERR_TIMEOUT, RSD_ERR_LOCK...). */
RSD_API int rsd_state_lock_step(rsd_state *st, rsd_state_lock *lk, uint64_t now_ms);
/* One non-blocking attempt: RSD_OK = HELD, RSD_PENDING = held elsewhere (lk left IDLE), <0. */
RSD_API int rsd_state_lock_try(rsd_state *st, rsd_state_lock *lk, const char *key,
                               const char *purpose);
/* Blocking: begin + step + nanosleep until done; wait_ms 0 = desc default. Same results
   as rsd_state_lock_step. The only lock call that sleeps. */
RSD_API int rsd_state_lock_wait(rsd_state *st, rsd_state_lock *lk, const char *key,
                                const char *purpose, uint32_t wait_ms);
/* Releases a held lock (clears the owner record) or abandons a wait; IDLE after. */
RSD_API void rsd_state_unlock(rsd_state *st, rsd_state_lock *lk);
/* True while lk holds the lock (false when proceeding UNLOCKED). */
RSD_API bool rsd_state_lock_held(const rsd_state_lock *lk);
/* Reads the owner record of key's lock file: RSD_OK, RSD_ERR_NOT_FOUND (free/never taken). */
RSD_API int rsd_state_lock_owner(rsd_state *st, const char *key, rsd_lock_owner *out);

/* Reads key's attribution into *out: entry count (>= 0); a missing file is empty; a corrupt
   one is empty with out->corrupt set and ATTR_CORRUPT logged. <0 only on I/O errors. */
RSD_API int rsd_state_attr_load(rsd_state *st, const char *key, rsd_attr_set *out);
/* Adds (or refreshes) (model, instance) under the file lock; instance NULL/"" = plain.
   Atomic (temp file, fsync, rename). RSD_OK, RSD_ERR_CAPACITY when full, <0. */
RSD_API int rsd_state_attr_add(rsd_state *st, const char *key, const char *model,
                               const char *instance, uint64_t loaded_at_ms);
/* Removes (model, instance); instance NULL = every entry of model. Count removed (>= 0) or <0. */
RSD_API int rsd_state_attr_remove(rsd_state *st, const char *key, const char *model,
                                  const char *instance);
/* Cross-process mutation generation of key (W2): *out = 0 when never bumped. A cache
   entry stays valid while the generation it saw is unchanged. RSD_OK or <0. */
RSD_API int rsd_state_gen_read(rsd_state *st, const char *key, uint64_t *out);
/* Increments key's generation after a mutation (load/unload); *out = the new value. */
RSD_API int rsd_state_gen_bump(rsd_state *st, const char *key, uint64_t *out);
/* Index of (model, instance) in set (instance NULL = any), or RSD_ERR_NOT_FOUND. */
RSD_API int rsd_attr_set_find(const rsd_attr_set *set, const char *model, const char *instance);
/* ==== >>state end ========================================================= */

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* RESIDENCY_HTTP_H_INCLUDED */

/* ========================================================================== */
/* IMPLEMENTATION                                                             */
/* ========================================================================== */
#if defined(RESIDENCY_HTTP_IMPLEMENTATION) && !defined(RESIDENCY_HTTP_IMPL_INCLUDED)
#define RESIDENCY_HTTP_IMPL_INCLUDED 1

/* ==== >>url (implementation) ============================================== */
/* ASCII-only helpers (no locale), shared by >>url and >>httpparse. */
RSDI_PRIVATE char rsdi_ascii_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive equality of s[0..n) with a lower-case NUL-terminated literal. */
RSDI_PRIVATE bool rsdi_ieq_lit(const char *s, size_t n, const char *lit) {
    size_t i;
    for (i = 0; i < n; i++) {
        if (lit[i] == '\0' || rsdi_ascii_lower(s[i]) != lit[i]) return false;
    }
    return lit[n] == '\0';
}

RSDI_PRIVATE int rsdi_hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Strict dotted quad: exactly 4 parts of 1-3 digits, each 0..255, no leading zero. */
RSDI_PRIVATE bool rsdi_ipv4_ok(const char *s, size_t n) {
    size_t i = 0;
    int part;
    for (part = 0; part < 4; part++) {
        size_t start = i;
        unsigned v = 0;
        if (part > 0) {
            if (i >= n || s[i] != '.') return false;
            start = ++i;
        }
        while (i < n && s[i] >= '0' && s[i] <= '9' && i - start < 3) v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == start || v > 255) return false;
        if (i - start > 1 && s[start] == '0') return false;
    }
    return i == n;
}

/* IPv6 text without brackets: 8 groups of 1-4 hex digits, at most one "::", an
   optional dotted-quad tail (2 groups). Zone ids ("%eth0") are rejected. */
RSDI_PRIVATE bool rsdi_ipv6_ok(const char *s, size_t n) {
    size_t i = 0;
    int groups = 0;
    bool dbl = false;
    if (n < 2) return false;
    if (s[0] == ':') {
        if (s[1] != ':') return false;
        dbl = true;
        i = 2;
        if (i == n) return true;
    }
    for (;;) {
        size_t start = i;
        while (i < n && rsdi_hexval(s[i]) >= 0 && i - start < 5) i++;
        if (i < n && s[i] == '.') {
            if (!rsdi_ipv4_ok(s + start, n - start)) return false;
            groups += 2;
            break;
        }
        if (i == start || i - start > 4) return false;
        groups++;
        if (i == n) break;
        if (s[i] != ':') return false;
        i++;
        if (i < n && s[i] == ':') {
            if (dbl) return false;
            dbl = true;
            i++;
            if (i == n) break;
        } else if (i == n) {
            return false;
        }
        if (groups > 8) return false;
    }
    return dbl ? groups <= 7 : groups == 8;
}

/* DNS name: dot-separated LDH labels of 1..63 bytes, no leading/trailing '-',
   at most 253 bytes, and the last label not all digits (that would be a bad IPv4). */
RSDI_PRIVATE bool rsdi_dnsname_ok(const char *s, size_t n) {
    size_t i = 0;
    if (n == 0 || n > 253) return false;
    for (;;) {
        size_t start = i;
        bool all_digits = true;
        while (i < n && s[i] != '.') {
            char c = s[i];
            bool digit = c >= '0' && c <= '9';
            bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            if (!digit && !alpha && c != '-') return false;
            if (!digit) all_digits = false;
            i++;
        }
        if (i == start || i - start > 63) return false;
        if (s[start] == '-' || s[i - 1] == '-') return false;
        if (i == n) return !all_digits;
        i++; /* the dot; a trailing dot leaves an empty label: rejected above */
    }
}

RSD_API int rsd_url_parse(rsd_url *out, const char *s, size_t len) {
    size_t i, k, auth_start, auth_end, host_end;
    rsd_url u;
    if (!out || (!s && len)) return RSD_ERR_ARG;
    memset(&u, 0, sizeof u);
    *out = u;
    if (len == 0 || len > RSD_URL_MAX_BYTES) return RSD_ERR_URL;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7F) return RSD_ERR_URL;  /* whitespace, controls, non-ASCII */
    }
    for (k = 0; k < len && s[k] != ':'; k++) {}
    if (rsdi_ieq_lit(s, k, "http")) u.tls = false;
    else if (rsdi_ieq_lit(s, k, "https")) u.tls = true;
    else return RSD_ERR_URL;
    if (len - k < 3 || s[k + 1] != '/' || s[k + 2] != '/') return RSD_ERR_URL;
    u.scheme.ptr = s;
    u.scheme.len = k;
    auth_start = k + 3;
    for (auth_end = auth_start; auth_end < len; auth_end++) {
        char c = s[auth_end];
        if (c == '/' || c == '?' || c == '#') break;
        if (c == '@') return RSD_ERR_URL;  /* userinfo is refused */
    }
    if (auth_end == auth_start) return RSD_ERR_URL;
    if (s[auth_start] == '[') {
        for (host_end = auth_start + 1; host_end < auth_end && s[host_end] != ']'; host_end++) {}
        if (host_end == auth_end) return RSD_ERR_URL;
        if (!rsdi_ipv6_ok(s + auth_start + 1, host_end - auth_start - 1)) return RSD_ERR_URL;
        u.host.ptr = s + auth_start + 1;
        u.host.len = host_end - auth_start - 1;
        u.host_kind = RSD_HOST_IPV6;
        host_end++; /* past ']' */
        if (host_end < auth_end && s[host_end] != ':') return RSD_ERR_URL;
    } else {
        bool digits_dots = true;
        for (host_end = auth_start; host_end < auth_end && s[host_end] != ':'; host_end++) {
            char c = s[host_end];
            if (!((c >= '0' && c <= '9') || c == '.')) digits_dots = false;
        }
        u.host.ptr = s + auth_start;
        u.host.len = host_end - auth_start;
        if (digits_dots) {
            if (!rsdi_ipv4_ok(u.host.ptr, u.host.len)) return RSD_ERR_URL;
            u.host_kind = RSD_HOST_IPV4;
        } else {
            if (!rsdi_dnsname_ok(u.host.ptr, u.host.len)) return RSD_ERR_URL;
            u.host_kind = RSD_HOST_NAME;
        }
    }
    u.port = u.tls ? 443 : 80;
    if (host_end < auth_end) { /* s[host_end] == ':' */
        unsigned long v = 0;
        size_t p = host_end + 1;
        if (p == auth_end || auth_end - p > 5) return RSD_ERR_URL;
        for (; p < auth_end; p++) {
            if (s[p] < '0' || s[p] > '9') return RSD_ERR_URL;
            v = v * 10 + (unsigned long)(s[p] - '0');
        }
        if (v < 1 || v > 65535) return RSD_ERR_URL;
        u.port = (uint16_t)v;
        u.port_explicit = true;
    }
    /* Path and query up to the fragment. A query without a path ("http://h?q") is
       refused so that path, when not empty, always starts with '/'. */
    if (auth_end < len && s[auth_end] == '?') return RSD_ERR_URL;
    u.path.ptr = s + auth_end;
    for (i = auth_end; i < len && s[i] != '#'; i++) {}
    u.path.len = i - auth_end;
    *out = u;
    return RSD_OK;
}

RSD_API int rsd_url_key(const rsd_url *u, char *buf, size_t cap) {
    size_t n = 0, i, plen;
    char port[8];
    int portlen = 0;
    if (!u || !buf || u->host_kind <= RSD_HOST_INVALID || u->host_kind >= RSD_HOST_NUM ||
        (u->host.len && !u->host.ptr) || (u->path.len && !u->path.ptr))
        return RSD_ERR_ARG;
    if (u->port != (u->tls ? 443 : 80)) portlen = RSD_SNPRINTF(port, sizeof port, ":%u", (unsigned)u->port);
    plen = 0;
    while (plen < u->path.len && u->path.ptr[plen] != '?' && u->path.ptr[plen] != '#') plen++;
    while (plen > 0 && u->path.ptr[plen - 1] == '/') plen--;
    /* scheme "://" host ([host] for IPv6) [":" port] path NUL */
    if (u->host.len > RSD_URL_MAX_BYTES || plen > RSD_URL_MAX_BYTES ||
        (u->tls ? 8u : 7u) + u->host.len + (u->host_kind == RSD_HOST_IPV6 ? 2u : 0u) +
                (size_t)portlen + plen + 1 > cap)
        return RSD_ERR_BUFFER;
    memcpy(buf, u->tls ? "https://" : "http://", u->tls ? 8u : 7u);
    n = u->tls ? 8u : 7u;
    if (u->host_kind == RSD_HOST_IPV6) buf[n++] = '[';
    for (i = 0; i < u->host.len; i++) buf[n++] = rsdi_ascii_lower(u->host.ptr[i]);
    if (u->host_kind == RSD_HOST_IPV6) buf[n++] = ']';
    if (portlen > 0) {
        memcpy(buf + n, port, (size_t)portlen);
        n += (size_t)portlen;
    }
    if (plen) memcpy(buf + n, u->path.ptr, plen);
    n += plen;
    buf[n] = '\0';
    return (int)n;
}

/* ==== >>url end =========================================================== */

/* ==== >>httpparse (implementation) ======================================== */
/* RFC 9110 tchar as a 256-bit map. */
static const uint32_t rsdi_http_tchar_map[8] = {
    0x00000000u, 0x03ff6cfau, 0xc7fffffeu, 0x57ffffffu, 0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u};
#define RSDI_HTTP_TCHAR(c) \
    ((rsdi_http_tchar_map[(unsigned char)(c) >> 5] >> ((unsigned char)(c) & 31)) & 1u)
/* Field-value / reason byte: HTAB, SP..'~', obs-text (0x80..0xFF). */
#define RSDI_HTTP_VCHAR(c) \
    ((unsigned char)(c) == 0x09 || ((unsigned char)(c) >= 0x20 && (unsigned char)(c) != 0x7F))

/* Fast path: 8 bytes that are all SP..'~' or obs-text (no HTAB, no controls). */
#define RSDI_HTTP_VB(p, i) ((unsigned char)((unsigned char)(p)[i] - 0x20u) < 0x5Fu || (unsigned char)(p)[i] >= 0x80)
#define RSDI_HTTP_VCHAR8(p) \
    (RSDI_HTTP_VB(p, 0) && RSDI_HTTP_VB(p, 1) && RSDI_HTTP_VB(p, 2) && RSDI_HTTP_VB(p, 3) && \
     RSDI_HTTP_VB(p, 4) && RSDI_HTTP_VB(p, 5) && RSDI_HTTP_VB(p, 6) && RSDI_HTTP_VB(p, 7))

/* The last_len shortcut: is the blank line that ends a head somewhere in
   buf[last_len-3 .. len)? (A previous call saw buf[0..last_len) and said PENDING,
   so the end can only be in the new bytes or straddle the old end.) */
RSDI_PRIVATE bool rsdi_http_head_maybe_complete(const char *buf, size_t len, size_t last_len) {
    size_t i = last_len >= 3 ? last_len - 3 : 0;
    while (i < len) {
        const char *nl = (const char *)memchr(buf + i, '\n', len - i);
        if (!nl) return false;
        i = (size_t)(nl - buf) + 1;
        if (i < len && buf[i] == '\n') return true;
        if (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n') return true;
    }
    return false;
}

/* Matches a literal at *pp: RSD_OK (advanced), RSD_PENDING (input is a prefix of
   it), RSD_ERR_PROTOCOL (mismatch). */
RSDI_PRIVATE int rsdi_http_expect(const char **pp, const char *e, const char *lit, size_t n) {
    size_t have = (size_t)(e - *pp), cmp = have < n ? have : n;
    if (memcmp(*pp, lit, cmp) != 0) return RSD_ERR_PROTOCOL;
    if (have < n) return RSD_PENDING;
    *pp += n;
    return RSD_OK;
}

/* Line end at *pp: CR LF or a bare LF. RSD_OK (advanced), PENDING, or PROTOCOL. */
RSDI_PRIVATE int rsdi_http_eol(const char **pp, const char *e) {
    const char *p = *pp;
    if (p == e) return RSD_PENDING;
    if (*p == '\n') {
        *pp = p + 1;
        return RSD_OK;
    }
    if (*p != '\r') return RSD_ERR_PROTOCOL;
    if (p + 1 == e) return RSD_PENDING;
    if (p[1] != '\n') return RSD_ERR_PROTOCOL;
    *pp = p + 2;
    return RSD_OK;
}

/* "HTTP/1.x" at *pp; sets *minor (0 or 1). */
RSDI_PRIVATE int rsdi_http_version(const char **pp, const char *e, int *minor) {
    int r = rsdi_http_expect(pp, e, "HTTP/1.", 7);
    if (r != RSD_OK) return r;
    if (*pp == e) return RSD_PENDING;
    if (**pp != '0' && **pp != '1') return RSD_ERR_PROTOCOL;
    *minor = **pp - '0';
    (*pp)++;
    return RSD_OK;
}

/* Header fields up to and including the blank line. */
RSDI_PRIVATE int rsdi_http_headers(const char **pp, const char *e, rsd_http_header *hdrs,
                                   size_t *num) {
    const char *p = *pp;
    size_t n = 0;
    int r;
    for (;;) {
        const char *name, *val, *vend;
        if (p == e) return RSD_PENDING;
        if (*p == '\r' || *p == '\n') {
            r = rsdi_http_eol(&p, e);
            if (r != RSD_OK) return r;
            break;
        }
        if (n == RSD_HTTP_MAX_HEADERS) return RSD_ERR_HEADERS_TOO_LARGE;
        name = p;
        while (p < e && RSDI_HTTP_TCHAR(*p)) p++;
        if (p == e) return RSD_PENDING;
        /* Empty name, whitespace before ':' and obs-fold (a line starting with
           SP/HTAB) all end up here. */
        if (*p != ':' || p == name) return RSD_ERR_PROTOCOL;
        hdrs[n].name.ptr = name;
        hdrs[n].name.len = (size_t)(p - name);
        p++;
        while (p < e && (*p == ' ' || *p == '\t')) p++;
        val = p;
        while (e - p >= 8 && RSDI_HTTP_VCHAR8(p)) p += 8;
        while (p < e && RSDI_HTTP_VCHAR(*p)) p++;
        vend = p;
        while (vend > val && (vend[-1] == ' ' || vend[-1] == '\t')) vend--;
        r = rsdi_http_eol(&p, e);
        if (r != RSD_OK) return r;
        hdrs[n].value.ptr = val;
        hdrs[n].value.len = (size_t)(vend - val);
        n++;
    }
    *num = n;
    *pp = p;
    return RSD_OK;
}

/* Walks a comma-separated list: the next element of v (OWS-trimmed, maybe empty)
   starting at *pos; false at the end. */
RSDI_PRIVATE bool rsdi_http_list_next(rsd_str v, size_t *pos, rsd_str *elem) {
    size_t i = *pos, a, b;
    if (i > v.len) return false;
    a = i;
    while (i < v.len && v.ptr[i] != ',') i++;
    b = i;
    while (a < b && (v.ptr[a] == ' ' || v.ptr[a] == '\t')) a++;
    while (b > a && (v.ptr[b - 1] == ' ' || v.ptr[b - 1] == '\t')) b--;
    elem->ptr = v.ptr + a;
    elem->len = b - a;
    *pos = i + 1;
    return true;
}

/* Framing from the headers (RFC 9112 section 6). */
RSDI_PRIVATE int rsdi_http_framing(const rsd_http_header *h, size_t n, int minor, bool request,
                                   rsd_http_framing *f, bool *expect_continue) {
    size_t i, pos;
    rsd_str el;
    int64_t cl = -1;
    bool te_seen = false, te_last_chunked = false, conn_close = false, conn_ka = false;
    int chunked_count = 0;
    if (expect_continue) *expect_continue = false;
    for (i = 0; i < n; i++) {
        rsd_str name = h[i].name, val = h[i].value;
        if (name.len == 14 && rsdi_ieq_lit(name.ptr, name.len, "content-length")) {
            pos = 0;
            while (rsdi_http_list_next(val, &pos, &el)) {
                int64_t v = 0;
                size_t j;
                if (el.len == 0) return RSD_ERR_PROTOCOL;
                for (j = 0; j < el.len; j++) {
                    int d = el.ptr[j] - '0';
                    if (d < 0 || d > 9) return RSD_ERR_PROTOCOL;
                    if (v > (INT64_MAX - d) / 10) return RSD_ERR_PROTOCOL;
                    v = v * 10 + d;
                }
                if (cl >= 0 && v != cl) return RSD_ERR_PROTOCOL;
                cl = v;
            }
        } else if (name.len == 17 && rsdi_ieq_lit(name.ptr, name.len, "transfer-encoding")) {
            te_seen = true;
            pos = 0;
            while (rsdi_http_list_next(val, &pos, &el)) {
                size_t tl = 0;
                if (el.len == 0) continue;
                while (tl < el.len && el.ptr[tl] != ';' && el.ptr[tl] != ' ' && el.ptr[tl] != '\t') tl++;
                te_last_chunked = rsdi_ieq_lit(el.ptr, tl, "chunked");
                if (te_last_chunked) chunked_count++;
            }
        } else if (name.len == 10 && rsdi_ieq_lit(name.ptr, name.len, "connection")) {
            pos = 0;
            while (rsdi_http_list_next(val, &pos, &el)) {
                if (rsdi_ieq_lit(el.ptr, el.len, "close")) conn_close = true;
                else if (rsdi_ieq_lit(el.ptr, el.len, "keep-alive")) conn_ka = true;
            }
        } else if (request && expect_continue && minor == 1 &&
                   name.len == 6 && rsdi_ieq_lit(name.ptr, name.len, "expect")) {
            if (rsdi_ieq_lit(val.ptr, val.len, "100-continue")) *expect_continue = true;
        }
    }
    f->content_length = cl;
    f->chunked = false;
    f->close = conn_close || (minor == 0 && !conn_ka);
    if (te_seen) {
        /* HTTP/1.0 with Transfer-Encoding is faulty framing (9112 6.1); chunked
           applied twice or not last is malformed. */
        if (minor == 0 || chunked_count > 1) return RSD_ERR_PROTOCOL;
        if (request) {
            if (cl >= 0 || !te_last_chunked) return RSD_ERR_PROTOCOL;
            f->chunked = true;
        } else {
            f->content_length = -1; /* Transfer-Encoding overrides Content-Length */
            if (te_last_chunked) f->chunked = true;
            else if (chunked_count) return RSD_ERR_PROTOCOL;
            else f->close = true; /* body runs until the connection closes */
        }
    }
    return RSD_OK;
}

RSD_API int rsd_http_parse_response(const char *buf, size_t len, size_t last_len,
                                    rsd_http_response_head *out, size_t *consumed) {
    const char *p = buf, *e = buf + len, *reason;
    int r, st;
    if (!out || !consumed || (!buf && len)) return RSD_ERR_ARG;
    if (len == 0) return RSD_PENDING;
    if (last_len > 0 && last_len <= len && !rsdi_http_head_maybe_complete(buf, len, last_len))
        return RSD_PENDING;
    out->num_headers = 0;
    r = rsdi_http_version(&p, e, &out->minor_version);
    if (r != RSD_OK) return r;
    if (p == e) return RSD_PENDING;
    if (*p++ != ' ') return RSD_ERR_PROTOCOL;
    if (e - p < 3) {
        /* partial status: report a bad byte now rather than at the end */
        if (p == e) return RSD_PENDING;
        if (*p < '1' || *p > '9') return RSD_ERR_PROTOCOL;
        for (p++; p < e; p++)
            if (*p < '0' || *p > '9') return RSD_ERR_PROTOCOL;
        return RSD_PENDING;
    }
    if (p[0] < '1' || p[0] > '9' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9')
        return RSD_ERR_PROTOCOL;
    st = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
    p += 3;
    if (p == e) return RSD_PENDING;
    if (*p == ' ') p++;
    else if (*p != '\r' && *p != '\n') return RSD_ERR_PROTOCOL;
    reason = p;
    while (p < e && RSDI_HTTP_VCHAR(*p)) p++;
    out->status = st;
    out->reason.ptr = reason;
    out->reason.len = (size_t)(p - reason);
    r = rsdi_http_eol(&p, e);
    if (r != RSD_OK) return r;
    r = rsdi_http_headers(&p, e, out->headers, &out->num_headers);
    if (r != RSD_OK) return r;
    r = rsdi_http_framing(out->headers, out->num_headers, out->minor_version, false,
                          &out->framing, NULL);
    if (r != RSD_OK) return r;
    *consumed = (size_t)(p - buf);
    return RSD_OK;
}

RSD_API int rsd_http_parse_request(const char *buf, size_t len, size_t last_len,
                                   rsd_http_request_head *out, size_t *consumed) {
    const char *p = buf, *e = buf + len, *tok;
    int r;
    if (!out || !consumed || (!buf && len)) return RSD_ERR_ARG;
    if (len == 0) return RSD_PENDING;
    if (last_len > 0 && last_len <= len && !rsdi_http_head_maybe_complete(buf, len, last_len))
        return RSD_PENDING;
    out->num_headers = 0;
    out->expect_continue = false;
    /* RFC 9112 2.2: ignore empty lines before the request line (a client's stray
       CRLF after a body). */
    while (p < e && (*p == '\r' || *p == '\n')) {
        r = rsdi_http_eol(&p, e);
        if (r != RSD_OK) return r;
    }
    tok = p;
    while (p < e && RSDI_HTTP_TCHAR(*p)) p++;
    if (p == e) return RSD_PENDING;
    if (*p != ' ' || p == tok) return RSD_ERR_PROTOCOL;
    out->method.ptr = tok;
    out->method.len = (size_t)(p - tok);
    tok = ++p;
    while (p < e && (unsigned char)*p > 0x20 && (unsigned char)*p < 0x7F) p++;
    if (p == e) return RSD_PENDING;
    if (*p != ' ' || p == tok) return RSD_ERR_PROTOCOL;
    out->target.ptr = tok;
    out->target.len = (size_t)(p - tok);
    p++;
    r = rsdi_http_version(&p, e, &out->minor_version);
    if (r != RSD_OK) return r;
    r = rsdi_http_eol(&p, e);
    if (r != RSD_OK) return r;
    r = rsdi_http_headers(&p, e, out->headers, &out->num_headers);
    if (r != RSD_OK) return r;
    r = rsdi_http_framing(out->headers, out->num_headers, out->minor_version, true,
                          &out->framing, &out->expect_continue);
    if (r != RSD_OK) return r;
    *consumed = (size_t)(p - buf);
    return RSD_OK;
}

RSD_API rsd_str rsd_http_header_get(const rsd_http_header *h, size_t n, const char *name) {
    rsd_str none;
    size_t i, nl;
    none.ptr = NULL;
    none.len = 0;
    if (!h || !name) return none;
    nl = strlen(name);
    for (i = 0; i < n; i++) {
        size_t j;
        if (h[i].name.len != nl) continue;
        for (j = 0; j < nl; j++)
            if (rsdi_ascii_lower(h[i].name.ptr[j]) != rsdi_ascii_lower(name[j])) break;
        if (j == nl) return h[i].value;
    }
    return none;
}

RSD_API bool rsd_http_response_bodyless(rsd_str method, int status) {
    if (method.len == 4 && method.ptr && memcmp(method.ptr, "HEAD", 4) == 0) return true;
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

/* Dechunk states (rsd_http_dechunk.state; 0 = expecting the first size line). */
enum {
    RSDI_DC_SIZE = 0,  /* hex digits of a chunk size */
    RSDI_DC_EXT_WS,    /* after the digits: BWS, then ';' or the line end */
    RSDI_DC_EXT,       /* chunk extension bytes up to the line end */
    RSDI_DC_SIZE_LF,   /* CR seen on the size line */
    RSDI_DC_DATA,      /* chunk_left data bytes */
    RSDI_DC_DATA_CR,   /* CR LF (or LF) after the data */
    RSDI_DC_DATA_LF,
    RSDI_DC_TRAILER_START, /* start of a trailer line or the final blank line */
    RSDI_DC_TRAILER,
    RSDI_DC_TRAILER_LF,
    RSDI_DC_END_LF,    /* CR of the final blank line seen */
    RSDI_DC_DONE,
    RSDI_DC_ERROR
};

/* Largest chunk size accepted (2^62). */
#define RSDI_DC_MAX_SIZE ((uint64_t)1 << 62)

RSD_API int rsd_http_dechunk_step(rsd_http_dechunk *d, char *buf, size_t *len) {
    size_t r = 0, w = 0, n;
    if (!d || !len || (!buf && *len)) return RSD_ERR_ARG;
    n = *len;
    if (d->state == RSDI_DC_DONE) {
        *len = 0;
        d->rest = n;
        return RSD_OK;
    }
    if (d->state < RSDI_DC_SIZE || d->state > RSDI_DC_DONE) {
        d->state = RSDI_DC_ERROR;
        *len = 0;
        return RSD_ERR_PROTOCOL;
    }
    while (r < n) {
        char c;
        if (d->state == RSDI_DC_DATA) {
            size_t k = n - r;
            if ((uint64_t)k > d->chunk_left) k = (size_t)d->chunk_left;
            if (w != r) memmove(buf + w, buf + r, k);
            w += k;
            r += k;
            d->chunk_left -= k;
            d->total += k;
            if (d->chunk_left == 0) d->state = RSDI_DC_DATA_CR;
            continue;
        }
        c = buf[r++];
        d->overhead++;
        if (d->overhead > (uint64_t)RSD_HTTP_CHUNK_OVERHEAD_SLACK + d->total / 2) goto fail;
        switch (d->state) {
        case RSDI_DC_SIZE: {
            int v = rsdi_hexval(c);
            if (v >= 0) {
                if (d->line_bytes >= 16) goto fail;
                if (d->chunk_left > (RSDI_DC_MAX_SIZE - (uint64_t)v) / 16) goto fail;
                d->chunk_left = d->chunk_left * 16 + (uint64_t)v;
                d->line_bytes++;
                break;
            }
            if (d->line_bytes == 0) goto fail;
            if (c == ' ' || c == '\t') d->state = RSDI_DC_EXT_WS;
            else if (c == ';') d->state = RSDI_DC_EXT;
            else if (c == '\r') d->state = RSDI_DC_SIZE_LF;
            else if (c == '\n') goto size_done;
            else goto fail;
            d->line_bytes++;
            break;
        }
        case RSDI_DC_EXT_WS:
            if (++d->line_bytes > RSD_HTTP_CHUNK_LINE_MAX) goto fail;
            if (c == ' ' || c == '\t') break;
            if (c == ';') d->state = RSDI_DC_EXT;
            else if (c == '\r') d->state = RSDI_DC_SIZE_LF;
            else if (c == '\n') goto size_done;
            else goto fail;
            break;
        case RSDI_DC_EXT:
            if (++d->line_bytes > RSD_HTTP_CHUNK_LINE_MAX) goto fail;
            if (c == '\r') d->state = RSDI_DC_SIZE_LF;
            else if (c == '\n') goto size_done;
            else if (!RSDI_HTTP_VCHAR(c)) goto fail;
            break;
        case RSDI_DC_SIZE_LF:
            if (c != '\n') goto fail;
        size_done:
            d->line_bytes = 0;
            d->state = d->chunk_left ? RSDI_DC_DATA : RSDI_DC_TRAILER_START;
            break;
        case RSDI_DC_DATA_CR:
            if (c == '\r') d->state = RSDI_DC_DATA_LF;
            else if (c == '\n') d->state = RSDI_DC_SIZE;
            else goto fail;
            break;
        case RSDI_DC_DATA_LF:
            if (c != '\n') goto fail;
            d->state = RSDI_DC_SIZE;
            break;
        case RSDI_DC_TRAILER_START:
            if (c == '\r') { d->state = RSDI_DC_END_LF; break; }
            if (c == '\n') { d->state = RSDI_DC_DONE; break; }
            /* a trailer field line: must start with a tchar (no obs-fold) */
            if (!RSDI_HTTP_TCHAR(c)) goto fail;
            if (++d->line_bytes > RSD_HTTP_TRAILER_MAX) goto fail;
            d->state = RSDI_DC_TRAILER;
            break;
        case RSDI_DC_TRAILER:
            if (c == '\r') d->state = RSDI_DC_TRAILER_LF;
            else if (c == '\n') d->state = RSDI_DC_TRAILER_START;
            else if (!RSDI_HTTP_VCHAR(c)) goto fail;
            else if (++d->line_bytes > RSD_HTTP_TRAILER_MAX) goto fail;
            break;
        case RSDI_DC_TRAILER_LF:
            if (c != '\n') goto fail;
            d->state = RSDI_DC_TRAILER_START;
            break;
        case RSDI_DC_END_LF:
            if (c != '\n') goto fail;
            d->state = RSDI_DC_DONE;
            break;
        default:
            goto fail;
        }
        if (d->state == RSDI_DC_DONE) {
            d->rest = n - r;
            if (d->rest && w != r) memmove(buf + w, buf + r, d->rest);
            *len = w;
            return RSD_OK;
        }
    }
    *len = w;
    return RSD_PENDING;
fail:
    d->state = RSDI_DC_ERROR;
    *len = w;
    return RSD_ERR_PROTOCOL;
}

/* ==== >>httpparse end ===================================================== */

/* ==== >>http client (implementation) ====================================== */

/* ==== >>http client end =================================================== */

/* ==== >>http server (implementation) ====================================== */

/* ==== >>http server end =================================================== */

/* ==== >>drive (implementation) ============================================ */

/* ==== >>drive end ========================================================= */

/* ==== >>proc (implementation) ============================================= */
#ifndef RSD_NO_PROCESS
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#define RSDI_PROC_LINUX 1
#endif
#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
/* glibc declares these only under _GNU_SOURCE, which the implementation TU does not
   set (it asks for _POSIX_C_SOURCE + _DEFAULT_SOURCE); they exist since 2.9/2.29/2.34. */
#if defined(__GLIBC__) && !defined(__USE_GNU)
#ifdef __cplusplus
extern "C" {
#endif
int pipe2(int fds[2], int flags);
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29)
int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *fa, const char *path);
#endif
#if __GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)
int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *fa, int from);
#endif
#ifdef __cplusplus
}
#endif
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29))
#define RSDI_HAVE_SPAWN_CHDIR 1
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define RSDI_HAVE_SPAWN_CLOSEFROM 1
#endif
#if defined(__GLIBC__) || defined(__linux__) || defined(__FreeBSD__) || defined(__NetBSD__) || \
    defined(__OpenBSD__)
#define RSDI_HAVE_PIPE2 1
#endif

#define RSDI_PROC_IDX_BITS 8
#define RSDI_PROC_IDX_MASK 0xFFu
#define RSDI_PROC_GEN_MAX 0xFFFFFFu

typedef struct rsdi_proc_slot {
    uint32_t gen;                /* 1..RSDI_PROC_GEN_MAX while in use */
    rsd_proc_state state;
    pid_t pid;                   /* > 0 while not reaped */
    int out_fd;                  /* read end of the output pipe, -1 */
    int pid_fd;                  /* Linux pidfd, -1 */
    uint16_t port;
    bool was_ready, stop_requested, killed, timed_out, eof, core_dumped, stuck_sent;
    int exit_code, term_signal, err;
    uint64_t spawn_ms, ready_ms, end_ms, start_deadline_ms;
    uint64_t kill_at_ms;         /* STOPPING: SIGKILL time */
    uint64_t stuck_at_ms;        /* KILLING: STUCK notice time */
    uint64_t next_probe_ms, probe_at_ms;
    uint32_t probe_ms;           /* current probe interval */
    bool probe_pending;          /* a PROBE event is due */
    uint64_t recheck_ms;         /* next waitpid poll (no pidfd, or EOF seen) */
    uint32_t recheck_iv;
    void *user;
    uint64_t out_bytes, out_lines;
    char *ring;                  /* ring_bytes */
    char *args;                  /* arg_bytes: NUL-separated expanded argv */
    size_t args_len;
    int argc;
    size_t line_len;             /* log forwarding */
    char line[RSD_PROC_LINE_MAX];
    char name[RSD_PROC_NAME_MAX];
} rsdi_proc_slot;

struct rsd_procs {
    rsd_allocator alloc;
    rsd_logger logger;
    int max_procs;
    uint32_t ring_bytes, arg_bytes, term_grace_ms, start_deadline_ms, kill_wait_ms;
    uint32_t probe_first_ms, probe_max_ms;
    bool survive_parent, log_output;
    rsd_proc_spawn_method method; /* resolved: POSIX, VFORK or FORK */
    rsdi_proc_slot *slots;
    rsd_proc_event *events;      /* ring of ev_cap */
    uint32_t ev_cap, ev_head, ev_count;
    uint64_t events_dropped;
    const char **argv;           /* RSD_PROC_MAX_ARGS + 1 */
    char **envp;                 /* RSD_PROC_MAX_ENV + 1 */
    char path[RSD_PROC_PATH_MAX];
};

static const char *const rsdi_proc_llama_args[] = {
    "-m", "{model}", "--host", "{host}", "--port", "{port}", "?-c", "{ctx}",
    "?-np", "{parallel}", "?-ngl", "{ngl}", "?--alias", "{alias}", "{extra}", NULL};

RSD_API const char *const *rsd_proc_llama_args(void) { return rsdi_proc_llama_args; }

RSD_API const char *rsd_proc_state_name(int state) {
    static const char *const n[] = {"FREE", "STARTING", "READY", "STOPPING", "KILLING",
                                    "EXITED", "FAILED"};
    return state >= 0 && state < (int)RSD_PROC_STATE_NUM ? n[state] : "UNKNOWN";
}

RSD_API const char *rsd_proc_event_name(int kind) {
    static const char *const n[] = {"NONE", "SPAWN_FAILED", "EXITED", "STOPPED",
                                    "START_TIMEOUT", "STUCK", "PROBE"};
    return kind >= 0 && kind < (int)RSD_PROC_EV_NUM ? n[kind] : "UNKNOWN";
}

/* ---- template expansion ---------------------------------------------------- */
typedef struct rsdi_proc_out {
    char *buf;
    size_t cap, len;
    const char **argv;
    int argc, max;
    bool overflow;
} rsdi_proc_out;

RSDI_PRIVATE void rsdi_proc_put(rsdi_proc_out *o, const char *s, size_t n) {
    if (o->overflow || n > o->cap - o->len) { o->overflow = true; return; }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

/* Ends the argument being built at start. */
RSDI_PRIVATE void rsdi_proc_end_arg(rsdi_proc_out *o, size_t start) {
    rsdi_proc_put(o, "", 1);
    if (o->overflow) return;
    if (o->argc >= o->max) { o->overflow = true; return; }
    if (o->argv) o->argv[o->argc] = o->buf + start;
    o->argc++;
}

/* Value of placeholder name (len n) for spec; *known = false for an unknown name.
   Returns NULL when the value is unset. num is scratch for numbers. */
RSDI_PRIVATE const char *rsdi_proc_var_value(const rsd_proc_spec *s, const char *nm, size_t n,
                                            uint16_t port, char *num, size_t numcap,
                                            bool *known) {
    int i;
    *known = true;
#define RSDI_PV_IS(lit) (n == sizeof(lit) - 1 && memcmp(nm, lit, n) == 0)
    if (RSDI_PV_IS("model")) return s->model && s->model[0] ? s->model : NULL;
    if (RSDI_PV_IS("alias")) return s->alias && s->alias[0] ? s->alias : NULL;
    if (RSDI_PV_IS("host")) return s->host && s->host[0] ? s->host : "127.0.0.1";
    if (RSDI_PV_IS("ngl")) return s->ngl && s->ngl[0] ? s->ngl : NULL;
    if (RSDI_PV_IS("name")) return s->name && s->name[0] ? s->name : NULL;
    if (RSDI_PV_IS("port")) {
        (void)RSD_SNPRINTF(num, numcap, "%u", (unsigned)port);
        return num;
    }
    if (RSDI_PV_IS("ctx")) {
        if (s->ctx <= 0) return NULL;
        (void)RSD_SNPRINTF(num, numcap, "%lld", (long long)s->ctx);
        return num;
    }
    if (RSDI_PV_IS("parallel")) {
        if (s->parallel <= 0) return NULL;
        (void)RSD_SNPRINTF(num, numcap, "%d", s->parallel);
        return num;
    }
#undef RSDI_PV_IS
    for (i = 0; s->vars && i < s->num_vars; i++) {
        const char *vn = s->vars[i].name;
        if (vn && strlen(vn) == n && memcmp(vn, nm, n) == 0)
            return s->vars[i].value && s->vars[i].value[0] ? s->vars[i].value : NULL;
    }
    *known = false;
    return NULL;
}

/* Checks one template element: RSD_OK when every placeholder is known and set,
   RSD_PENDING when one is unset, RSD_ERR_PROC_TEMPLATE on bad syntax/unknown names. */
RSDI_PRIVATE int rsdi_proc_elem_check(const rsd_proc_spec *s, const char *e, uint16_t port) {
    char num[32];
    bool unset = false;
    while (*e) {
        if (e[0] == '{' && e[1] == '{') { e += 2; continue; }
        if (e[0] == '}' && e[1] == '}') { e += 2; continue; }
        if (*e == '}') return RSD_ERR_PROC_TEMPLATE;
        if (*e == '{') {
            const char *end = strchr(e + 1, '}');
            bool known;
            size_t n;
            if (!end) return RSD_ERR_PROC_TEMPLATE;
            n = (size_t)(end - e - 1);
            if (n == 0) return RSD_ERR_PROC_TEMPLATE;
            if (!rsdi_proc_var_value(s, e + 1, n, port, num, sizeof num, &known)) {
                if (!known) return RSD_ERR_PROC_TEMPLATE;
                unset = true;
            }
            e = end + 1;
            continue;
        }
        e++;
    }
    return unset ? RSD_PENDING : RSD_OK;
}

RSDI_PRIVATE void rsdi_proc_emit_elem(rsdi_proc_out *o, const rsd_proc_spec *s, const char *e,
                                      uint16_t port) {
    char num[32];
    size_t start = o->len;
    while (*e) {
        if ((e[0] == '{' && e[1] == '{') || (e[0] == '}' && e[1] == '}')) {
            rsdi_proc_put(o, e, 1);
            e += 2;
        } else if (*e == '{') {
            const char *end = strchr(e + 1, '}');
            bool known;
            const char *v = rsdi_proc_var_value(s, e + 1, (size_t)(end - e - 1), port, num,
                                                sizeof num, &known);
            if (v) rsdi_proc_put(o, v, strlen(v));
            e = end + 1;
        } else {
            rsdi_proc_put(o, e, 1);
            e++;
        }
    }
    rsdi_proc_end_arg(o, start);
}

RSDI_PRIVATE const char *rsdi_proc_exe(const rsd_proc_spec *s) {
    return s->exe && s->exe[0] ? s->exe : "llama-server";
}

/* Expands spec into o (argv[0] = exe as given). */
RSDI_PRIVATE int rsdi_proc_expand(const rsd_proc_spec *s, uint16_t port, rsdi_proc_out *o) {
    const char *const *t = s->args ? s->args : rsdi_proc_llama_args;
    const char *exe = rsdi_proc_exe(s);
    bool extra_done = false;
    size_t i, start;
    int r;
    if (s->num_vars < 0 || s->num_vars > RSD_PROC_MAX_VARS || (s->num_vars && !s->vars))
        return RSD_ERR_ARG;
    start = o->len;
    rsdi_proc_put(o, exe, strlen(exe));
    rsdi_proc_end_arg(o, start);
    for (i = 0; t[i]; i++) {
        const char *e = t[i];
        if (strcmp(e, "{extra}") == 0) {
            size_t k;
            for (k = 0; s->extra && s->extra[k]; k++) {
                start = o->len;
                rsdi_proc_put(o, s->extra[k], strlen(s->extra[k]));
                rsdi_proc_end_arg(o, start);
            }
            extra_done = true;
            continue;
        }
        if (e[0] == '?' && e[1] != '?') {
            /* optional pair: "?flag" then value; both or neither */
            const char *v = t[i + 1];
            if (!v) return RSD_ERR_PROC_TEMPLATE;
            r = rsdi_proc_elem_check(s, e + 1, port);
            if (r < 0) return r;
            r = rsdi_proc_elem_check(s, v, port);
            if (r < 0) return r;
            if (r == RSD_OK) {
                rsdi_proc_emit_elem(o, s, e + 1, port);
                rsdi_proc_emit_elem(o, s, v, port);
            }
            i++;
            continue;
        }
        if (e[0] == '?') e++; /* "??x" is the literal "?x" */
        r = rsdi_proc_elem_check(s, e, port);
        if (r != RSD_OK) return RSD_ERR_PROC_TEMPLATE;
        rsdi_proc_emit_elem(o, s, e, port);
    }
    if (!extra_done) {
        size_t k;
        for (k = 0; s->extra && s->extra[k]; k++) {
            start = o->len;
            rsdi_proc_put(o, s->extra[k], strlen(s->extra[k]));
            rsdi_proc_end_arg(o, start);
        }
    }
    if (o->overflow) return RSD_ERR_CAPACITY;
    return o->argc;
}

RSD_API int rsd_procs_expand(const rsd_proc_spec *spec, char *buf, size_t buf_cap,
                             const char **argv, int cap) {
    rsdi_proc_out o;
    int r;
    if (!spec || !buf || !argv || cap < 2 || buf_cap == 0) return RSD_ERR_ARG;
    memset(&o, 0, sizeof o);
    o.buf = buf;
    o.cap = buf_cap;
    o.argv = argv;
    o.max = cap - 1;
    r = rsdi_proc_expand(spec, spec->port, &o);
    if (r < 0) return r;
    argv[o.argc] = NULL;
    return o.argc;
}

/* ---- small POSIX helpers ---------------------------------------------------- */
/* Moves fd to a number >= 3 (close-on-exec), so dup2 onto 0..2 in the child cannot
   clobber it. Returns the (possibly new) fd or -1. */
RSDI_PRIVATE int rsdi_proc_fd_high(int fd) {
    int nfd;
    if (fd < 0 || fd > 2) return fd;
    nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    return nfd;
}

RSDI_PRIVATE int rsdi_proc_pipe(int fds[2]) {
#ifdef RSDI_HAVE_PIPE2
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
#else
    if (pipe(fds) != 0) return -1;
    (void)fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(fds[1], F_SETFD, FD_CLOEXEC);
#endif
    fds[0] = rsdi_proc_fd_high(fds[0]);
    fds[1] = rsdi_proc_fd_high(fds[1]);
    if (fds[0] < 0 || fds[1] < 0) {
        if (fds[0] >= 0) close(fds[0]);
        if (fds[1] >= 0) close(fds[1]);
        return -1;
    }
    return 0;
}

/* A free loopback TCP port: bind port 0, read it back, close (W30). 0 on failure. */
RSDI_PRIVATE uint16_t rsdi_proc_free_port(const char *host) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    uint16_t port = 0;
    int fd;
#ifdef SOCK_CLOEXEC
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
#else
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
#endif
    if (fd < 0) return 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (!host || inet_pton(AF_INET, host, &a.sin_addr) != 1)
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Resolves exe through PATH (from the child's environment when it sets PATH) into
   p->path. RSD_OK or an errno value. */
RSDI_PRIVATE int rsdi_proc_resolve(rsd_procs *p, const char *exe, char *const *envp) {
    const char *path = NULL, *d;
    size_t el = strlen(exe);
    int last_err = ENOENT;
    if (strchr(exe, '/')) {
        if (el + 1 > sizeof p->path) return ENAMETOOLONG;
        memcpy(p->path, exe, el + 1);
        return 0;
    }
    if (envp) {
        int i;
        for (i = 0; envp[i]; i++)
            if (strncmp(envp[i], "PATH=", 5) == 0) path = envp[i] + 5;
    } else {
        path = getenv("PATH");
    }
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    for (d = path;; d++) {
        const char *e = strchr(d, ':');
        size_t dl = e ? (size_t)(e - d) : strlen(d);
        if (dl == 0) { d = "."; dl = 1; }  /* empty entry = current directory */
        if (dl + 1 + el + 1 <= sizeof p->path) {
            memcpy(p->path, d, dl);
            p->path[dl] = '/';
            memcpy(p->path + dl + 1, exe, el + 1);
            if (access(p->path, X_OK) == 0) return 0;
            if (errno == EACCES) last_err = EACCES;
        }
        if (!e) break;
        d = e;
    }
    return last_err;
}

/* Builds the child's environment into p->envp (environ with spec->env applied).
   RSD_OK, or RSD_ERR_CAPACITY when it has more than RSD_PROC_MAX_ENV entries. */
RSDI_PRIVATE int rsdi_proc_env(rsd_procs *p, const char *const *add) {
    extern char **environ;
    int n = 0, i, k;
    for (i = 0; environ && environ[i]; i++) {
        const char *e = environ[i];
        const char *eq = strchr(e, '=');
        size_t nl = eq ? (size_t)(eq - e) : strlen(e);
        bool drop = false;
        for (k = 0; add[k]; k++) {
            const char *aeq = strchr(add[k], '=');
            size_t al = aeq ? (size_t)(aeq - add[k]) : strlen(add[k]);
            if (al == nl && memcmp(add[k], e, nl) == 0) { drop = true; break; }
        }
        if (drop) continue;
        if (n >= RSD_PROC_MAX_ENV) return RSD_ERR_CAPACITY;
        p->envp[n++] = environ[i];
    }
    for (k = 0; add[k]; k++) {
        if (!strchr(add[k], '=')) continue;  /* "NAME": unset */
        if (n >= RSD_PROC_MAX_ENV) return RSD_ERR_CAPACITY;
        p->envp[n++] = (char *)(uintptr_t)add[k];
    }
    p->envp[n] = NULL;
    return RSD_OK;
}

/* Closes every descriptor >= from except keep (async-signal-safe: child side). */
RSDI_PRIVATE void rsdi_proc_close_from(int from, int keep) {
    struct rlimit rl;
    long max = 65536, fd;
#if defined(RSDI_PROC_LINUX) && defined(SYS_close_range)
    if (keep < from) {
        if (syscall(SYS_close_range, (unsigned)from, ~0u, 0u) == 0) return;
    } else if ((keep == from || syscall(SYS_close_range, (unsigned)from, (unsigned)(keep - 1), 0u) == 0) &&
               syscall(SYS_close_range, (unsigned)(keep + 1), ~0u, 0u) == 0) {
        return;
    }
#endif
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)max)
        max = (long)rl.rlim_cur;
    for (fd = from; fd < max; fd++)
        if (fd != keep) (void)close((int)fd);
}

/* Child side of the fork and vfork paths; never returns. PDEATHSIG, own process
   group, default signal dispositions, stdio, every other descriptor closed, cwd,
   execve. Only async-signal-safe calls (it may share the parent's memory). An exec
   error goes to *errp (vfork: shared memory) or down errfd (fork: close-on-exec pipe). */
RSDI_PRIVATE void rsdi_proc_child(const rsd_procs *p, const char *cwd, int nullfd, int outfd,
                                  char *const *envp, pid_t parent, int errfd,
                                  volatile int *errp) {
    int sig, err;
    struct sigaction sa;
    sigset_t none;
#ifdef RSDI_PROC_LINUX
    if (!p->survive_parent) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) goto fail;
        if (getppid() != parent) _exit(127); /* the parent died before prctl */
    }
#else
    (void)parent;
#endif
    (void)setpgid(0, 0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (sig = 1; sig < 65; sig++)
        if (sig != SIGKILL && sig != SIGSTOP) (void)sigaction(sig, &sa, NULL);
    if (dup2(nullfd, 0) < 0 || dup2(outfd, 1) < 0 || dup2(outfd, 2) < 0) goto fail;
    rsdi_proc_close_from(3, errfd);
    if (cwd && chdir(cwd) != 0) goto fail;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    execve(p->path, (char *const *)(uintptr_t)p->argv, envp);
fail:
    err = errno ? errno : ENOEXEC;
    if (errp) *errp = err;
    if (errfd >= 0) (void)!write(errfd, &err, sizeof err);
    _exit(127);
}

/* fork path: portable; the parent blocks on a close-on-exec pipe until exec. fork
   copies the parent's page tables: slow for a parent with a large heap (bench/). */
RSDI_PRIVATE int rsdi_proc_fork(rsd_procs *p, const char *cwd, int nullfd, int outfd,
                                char *const *envp, pid_t *out_pid) {
    int ep[2], err = 0;
    pid_t pid, parent = getpid();
    ssize_t n;
    sigset_t all, old;
    if (rsdi_proc_pipe(ep) != 0) return errno ? errno : EMFILE;
    /* Block signals around fork so no host handler runs in the child before exec. */
    sigfillset(&all);
    (void)sigprocmask(SIG_SETMASK, &all, &old);
    pid = fork();
    if (pid == 0) rsdi_proc_child(p, cwd, nullfd, outfd, envp, parent, ep[1], NULL);
    err = errno;
    (void)sigprocmask(SIG_SETMASK, &old, NULL);
    close(ep[1]);
    if (pid < 0) {
        close(ep[0]);
        return err ? err : EAGAIN;
    }
    (void)setpgid(pid, pid); /* the classic race fix; EACCES after exec is fine */
    /* Blocks until exec (EOF) or the child's report. */
    do n = read(ep[0], &err, sizeof err);
    while (n < 0 && errno == EINTR);
    close(ep[0]);
    if (n == (ssize_t)sizeof err) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        return err ? err : ECHILD;
    }
    *out_pid = pid;
    return 0;
}

#ifdef RSDI_PROC_LINUX
/* vfork path (Linux default): the child borrows the parent's memory until execve,
   so the cost does not grow with the parent's heap, like glibc's posix_spawn
   (CLONE_VM | CLONE_VFORK), and the child can still call prctl. The calling thread
   is suspended until the child execs or exits; signals are blocked meanwhile so no
   host handler runs on the shared stack. */
RSDI_PRIVATE int rsdi_proc_vfork(rsd_procs *p, const char *cwd, int nullfd, int outfd,
                                 char *const *envp, pid_t *out_pid) {
    volatile int child_err = 0;
    int err;
    pid_t pid, parent = getpid();
    sigset_t all, old;
    sigfillset(&all);
    (void)sigprocmask(SIG_SETMASK, &all, &old);
    pid = vfork();
    if (pid == 0) rsdi_proc_child(p, cwd, nullfd, outfd, envp, parent, -1, &child_err);
    err = pid < 0 ? errno : 0;
    (void)sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) return err ? err : EAGAIN;
    if (child_err) {
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        return child_err;
    }
    *out_pid = pid;
    return 0;
}
#endif

RSDI_PRIVATE int rsdi_proc_posix_spawn(rsd_procs *p, const char *cwd, int nullfd, int outfd,
                                       char *const *envp, pid_t *out_pid) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none, all;
    int r;
    if (posix_spawn_file_actions_init(&fa) != 0) return ENOMEM;
    if (posix_spawnattr_init(&at) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return ENOMEM;
    }
    sigemptyset(&none);
    sigfillset(&all);
    r = posix_spawnattr_setflags(&at, (short)(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETSIGDEF));
    if (!r) r = posix_spawnattr_setpgroup(&at, 0);
    if (!r) r = posix_spawnattr_setsigmask(&at, &none);
    if (!r) r = posix_spawnattr_setsigdefault(&at, &all);
    if (!r) r = posix_spawn_file_actions_adddup2(&fa, nullfd, 0);
    if (!r) r = posix_spawn_file_actions_adddup2(&fa, outfd, 1);
    if (!r) r = posix_spawn_file_actions_adddup2(&fa, outfd, 2);
#ifdef RSDI_HAVE_SPAWN_CLOSEFROM
    if (!r) r = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
    if (!r && cwd) {
#ifdef RSDI_HAVE_SPAWN_CHDIR
        r = posix_spawn_file_actions_addchdir_np(&fa, cwd);
#else
        r = ENOSYS; /* not reached: rsd_procs_spawn takes the fork path */
#endif
    }
    if (!r) r = posix_spawn(out_pid, p->path, &fa, &at, (char *const *)(uintptr_t)p->argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return r;
}

/* ---- slots, events -------------------------------------------------------- */
RSDI_PRIVATE rsdi_proc_slot *rsdi_proc_get(const rsd_procs *p, rsd_proc h) {
    uint32_t i = h.id & RSDI_PROC_IDX_MASK, g = h.id >> RSDI_PROC_IDX_BITS;
    rsdi_proc_slot *s;
    if (!p || h.id == 0 || i >= (uint32_t)p->max_procs) return NULL;
    s = &p->slots[i];
    if (s->state == RSD_PROC_FREE || s->gen != g) return NULL;
    return s;
}

RSDI_PRIVATE rsd_proc rsdi_proc_handle(const rsd_procs *p, const rsdi_proc_slot *s) {
    rsd_proc h;
    h.id = (s->gen << RSDI_PROC_IDX_BITS) | (uint32_t)(s - p->slots);
    return h;
}

RSDI_PRIVATE void rsdi_proc_event(rsd_procs *p, rsdi_proc_slot *s, rsd_proc_event_kind k,
                                  uint64_t now_ms) {
    rsd_proc_event *e;
    if (p->ev_count == p->ev_cap) {  /* drop the oldest */
        p->ev_head = (p->ev_head + 1) % p->ev_cap;
        p->ev_count--;
        p->events_dropped++;
    }
    e = &p->events[(p->ev_head + p->ev_count) % p->ev_cap];
    p->ev_count++;
    memset(e, 0, sizeof *e);
    e->kind = k;
    e->proc = rsdi_proc_handle(p, s);
    e->pid = (int64_t)s->pid;
    e->exit_code = s->exit_code;
    e->term_signal = s->term_signal;
    e->err = s->err;
    e->was_ready = s->was_ready;
    e->killed = s->killed;
    e->timed_out = s->timed_out;
    e->at_ms = now_ms;
    e->user = s->user;
}

RSDI_PRIVATE bool rsdi_proc_running(const rsdi_proc_slot *s) {
    return s->state == RSD_PROC_STARTING || s->state == RSD_PROC_READY ||
           s->state == RSD_PROC_STOPPING || s->state == RSD_PROC_KILLING;
}

/* Signals the child's process group (the child leads it), else the child. */
RSDI_PRIVATE void rsdi_proc_signal(rsdi_proc_slot *s, int sig) {
    if (s->pid <= 0) return;
    if (kill(-s->pid, sig) != 0) (void)kill(s->pid, sig);
}

RSDI_PRIVATE void rsdi_proc_close_fds(rsdi_proc_slot *s) {
    if (s->out_fd >= 0) close(s->out_fd);
    if (s->pid_fd >= 0) close(s->pid_fd);
    s->out_fd = s->pid_fd = -1;
}

/* ---- output ------------------------------------------------------------------ */
RSDI_PRIVATE void rsdi_proc_log_line(rsd_procs *p, rsdi_proc_slot *s) {
    size_t n = s->line_len, i;
    while (n && (s->line[n - 1] == '\r' || s->line[n - 1] == ' ')) n--;
    s->line[n] = '\0';
    for (i = 0; i < n; i++)
        if ((unsigned char)s->line[i] < 0x20 || s->line[i] == 0x7f) s->line[i] = '?';
    if (n) rsdi_logf(&p->logger, RSD_LOG_DEBUG, RSD_LOGITEM_PROC_OUTPUT, NULL, "%s[%ld]: %s",
                     s->name, (long)s->pid, s->line);
    s->line_len = 0;
}

RSDI_PRIVATE void rsdi_proc_take(rsd_procs *p, rsdi_proc_slot *s, const char *b, size_t n) {
    size_t i, at = (size_t)(s->out_bytes % p->ring_bytes);
    for (i = 0; i < n; i++) {
        s->ring[at] = b[i];
        if (++at == p->ring_bytes) at = 0;
        if (b[i] == '\n') s->out_lines++;
        if (p->log_output) {
            if (b[i] == '\n') rsdi_proc_log_line(p, s);
            else if (s->line_len < RSD_PROC_LINE_MAX - 1) s->line[s->line_len++] = b[i];
        }
    }
    s->out_bytes += n;
}

/* Reads what the pipe holds (at most RSD_PROC_DRAIN_STEP_BYTES). */
RSDI_PRIVATE void rsdi_proc_drain(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms) {
    char buf[4096];
    size_t total = 0;
    while (s->out_fd >= 0 && total < RSD_PROC_DRAIN_STEP_BYTES) {
        ssize_t n = read(s->out_fd, buf, sizeof buf);
        if (n > 0) {
            rsdi_proc_take(p, s, buf, (size_t)n);
            total += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        /* EOF (or a read error): the child closed its output, usually by exiting. */
        close(s->out_fd);
        s->out_fd = -1;
        s->eof = true;
        if (p->log_output && s->line_len) rsdi_proc_log_line(p, s);
        s->recheck_iv = 1;
        s->recheck_ms = now_ms + 1;
        break;
    }
}

/* ---- reaping and timers -------------------------------------------------------- */
RSDI_PRIVATE void rsdi_proc_reaped(rsd_procs *p, rsdi_proc_slot *s, int st, bool known,
                                   uint64_t now_ms) {
    bool asked = s->stop_requested || s->timed_out;
    rsdi_proc_drain(p, s, now_ms); /* what it wrote just before exiting */
    rsdi_proc_close_fds(s);
    s->exit_code = -1;
    s->term_signal = 0;
    if (known && WIFEXITED(st)) s->exit_code = WEXITSTATUS(st);
    else if (known && WIFSIGNALED(st)) {
        s->term_signal = WTERMSIG(st);
#ifdef WCOREDUMP
        s->core_dumped = WCOREDUMP(st) != 0;
#endif
    }
    s->end_ms = now_ms;
    s->state = RSD_PROC_EXITED;
    rsdi_logf(&p->logger, asked ? RSD_LOG_INFO : RSD_LOG_ERROR,
              asked ? RSD_LOGITEM_PROC_STOPPED : RSD_LOGITEM_PROC_EXITED, NULL,
              "%s[%ld]: %s with code %d signal %d%s after %llu ms", s->name, (long)s->pid,
              asked ? "stopped" : "exited", s->exit_code, s->term_signal,
              s->killed ? " (SIGKILL)" : "", (unsigned long long)(now_ms - s->spawn_ms));
    rsdi_proc_event(p, s, asked ? RSD_PROC_EV_STOPPED : RSD_PROC_EV_EXITED, now_ms);
    s->pid = 0;
}

/* One waitpid(pid, WNOHANG) (never waitpid(-1): the host's other children are not ours). */
RSDI_PRIVATE bool rsdi_proc_try_reap(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms) {
    int st = 0;
    pid_t r;
    do r = waitpid(s->pid, &st, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == s->pid) {
        rsdi_proc_reaped(p, s, st, true, now_ms);
        return true;
    }
    if (r < 0 && errno == ECHILD) { /* SIGCHLD ignored by the host, or reaped elsewhere */
        rsdi_proc_reaped(p, s, 0, false, now_ms);
        return true;
    }
    return false;
}

RSDI_PRIVATE void rsdi_proc_begin_kill(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms) {
    rsdi_proc_signal(s, SIGKILL);
    s->killed = true;
    s->state = RSD_PROC_KILLING;
    s->stuck_at_ms = now_ms + p->kill_wait_ms;
    rsdi_logf(&p->logger, RSD_LOG_WARN, RSD_LOGITEM_PROC_KILL, NULL, "%s[%ld]: SIGKILL",
              s->name, (long)s->pid);
}

RSDI_PRIVATE void rsdi_proc_begin_stop(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms) {
    s->stop_requested = true;
    rsdi_proc_signal(s, SIGTERM);
    s->state = RSD_PROC_STOPPING;
    s->kill_at_ms = now_ms + p->term_grace_ms;
    rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_PROC_STOP, NULL,
              "%s[%ld]: SIGTERM, SIGKILL in %u ms", s->name, (long)s->pid,
              (unsigned)p->term_grace_ms);
}

/* ---- public ------------------------------------------------------------------- */
RSD_API rsd_procs *rsd_procs_create(const rsd_procs_desc *desc) {
    rsd_procs_desc d;
    rsd_procs *p;
    size_t per, total, off, slots_sz, ev_sz, argv_sz, envp_sz;
    int i;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (rsdi_allocator_check(&d.allocator) != RSD_OK) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOCATOR_HALF, "procs: half an allocator",
                 RSDI_WHERE);
        return NULL;
    }
    if (d.max_procs == 0) d.max_procs = RSD_PROCS_DEFAULT;
    if (d.ring_bytes == 0) d.ring_bytes = RSD_PROC_RING_DEFAULT;
    if (d.ring_bytes < RSD_PROC_RING_MIN) d.ring_bytes = RSD_PROC_RING_MIN;
    if (d.arg_bytes == 0) d.arg_bytes = RSD_PROC_ARG_BYTES_DEFAULT;
    if (d.term_grace_ms == 0) d.term_grace_ms = RSD_PROC_TERM_GRACE_DEFAULT_MS;
    if (d.start_deadline_ms == 0) d.start_deadline_ms = RSD_PROC_START_DEADLINE_DEFAULT_MS;
    if (d.kill_wait_ms == 0) d.kill_wait_ms = RSD_PROC_KILL_WAIT_DEFAULT_MS;
    if (d.probe_first_ms == 0) d.probe_first_ms = RSD_PROC_PROBE_FIRST_DEFAULT_MS;
    if (d.probe_max_ms == 0) d.probe_max_ms = RSD_PROC_PROBE_MAX_DEFAULT_MS;
    if (d.probe_max_ms < d.probe_first_ms) d.probe_max_ms = d.probe_first_ms;
    if (d.max_procs < 1 || d.max_procs > RSD_PROCS_MAX || d.ring_bytes > RSD_PROC_RING_MAX ||
        d.arg_bytes > RSD_PROC_ARG_BYTES_MAX || (int)d.spawn < 0 ||
        (int)d.spawn >= (int)RSD_PROC_SPAWN_NUM) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_BAD_DESC,
                 "procs: desc value out of range", RSDI_WHERE);
        return NULL;
    }
#ifdef RSDI_PROC_LINUX
    if (d.spawn == RSD_PROC_SPAWN_POSIX && !d.survive_parent) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_BAD_DESC,
                 "procs: posix_spawn cannot set PDEATHSIG; set survive_parent or use FORK",
                 RSDI_WHERE);
        return NULL;
    }
#endif
    /* One block: struct, slots, events, argv, envp, then per slot ring + args. */
    per = (size_t)d.ring_bytes + (size_t)d.arg_bytes;
    slots_sz = sizeof(rsdi_proc_slot) * (size_t)d.max_procs;
    ev_sz = sizeof(rsd_proc_event) * (size_t)d.max_procs * 4;
    argv_sz = sizeof(char *) * (RSD_PROC_MAX_ARGS + 1);
    envp_sz = sizeof(char *) * (RSD_PROC_MAX_ENV + 1);
    total = sizeof(rsd_procs) + slots_sz + ev_sz + argv_sz + envp_sz + per * (size_t)d.max_procs + 64;
    p = (rsd_procs *)rsdi_malloc(&d.allocator, total);
    if (!p) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, "procs: allocation failed",
                 RSDI_WHERE);
        return NULL;
    }
    memset(p, 0, sizeof *p);
    p->alloc = d.allocator;
    p->logger = d.logger;
    p->max_procs = d.max_procs;
    p->ring_bytes = d.ring_bytes;
    p->arg_bytes = d.arg_bytes;
    p->term_grace_ms = d.term_grace_ms;
    p->start_deadline_ms = d.start_deadline_ms;
    p->kill_wait_ms = d.kill_wait_ms;
    p->probe_first_ms = d.probe_first_ms;
    p->probe_max_ms = d.probe_max_ms;
    p->survive_parent = d.survive_parent;
    p->log_output = d.log_output;
    p->method = d.spawn;
    if (p->method == RSD_PROC_SPAWN_AUTO) {
#ifdef RSDI_PROC_LINUX
        p->method = d.survive_parent ? RSD_PROC_SPAWN_POSIX : RSD_PROC_SPAWN_VFORK;
#else
        p->method = RSD_PROC_SPAWN_POSIX;
#endif
    }
#ifndef RSDI_PROC_LINUX
    if (p->method == RSD_PROC_SPAWN_VFORK) p->method = RSD_PROC_SPAWN_FORK;
#endif
#if defined(RSD_SPAWN_VIA_FORK)
    p->method = RSD_PROC_SPAWN_FORK;
#endif
    off = (sizeof(rsd_procs) + 15) & ~(size_t)15;
    p->slots = (rsdi_proc_slot *)(void *)((char *)p + off);
    off += (slots_sz + 15) & ~(size_t)15;
    p->events = (rsd_proc_event *)(void *)((char *)p + off);
    p->ev_cap = (uint32_t)d.max_procs * 4;
    off += (ev_sz + 15) & ~(size_t)15;
    p->argv = (const char **)(void *)((char *)p + off);
    off += argv_sz;
    p->envp = (char **)(void *)((char *)p + off);
    off += envp_sz;
    for (i = 0; i < d.max_procs; i++) {
        rsdi_proc_slot *s = &p->slots[i];
        memset(s, 0, sizeof *s);
        s->out_fd = s->pid_fd = -1;
        s->ring = (char *)p + off;
        off += d.ring_bytes;
        s->args = (char *)p + off;
        off += d.arg_bytes;
    }
    return p;
}

RSD_API void rsd_procs_destroy(rsd_procs *p) {
    int i;
    if (!p) return;
    for (i = 0; i < p->max_procs; i++) {
        rsdi_proc_slot *s = &p->slots[i];
        if (s->pid > 0) {
            int st, waited = 0;
            pid_t r;
            rsdi_proc_signal(s, SIGKILL);
            for (;;) {
                r = waitpid(s->pid, &st, WNOHANG);
                if (r == s->pid || (r < 0 && errno != EINTR)) break;
                if (waited >= RSD_PROC_DESTROY_WAIT_MS) {
                    rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_STUCK, NULL,
                              "%s[%ld]: not reaped after SIGKILL; left behind", s->name,
                              (long)s->pid);
                    break;
                }
                if (s->pid_fd >= 0) {
                    struct pollfd pf;
                    pf.fd = s->pid_fd;
                    pf.events = POLLIN;
                    pf.revents = 0;
                    (void)poll(&pf, 1, 10);
                    waited += 10;
                } else {
                    struct timespec ts;
                    ts.tv_sec = 0;
                    ts.tv_nsec = 1000000;
                    (void)nanosleep(&ts, NULL);
                    waited += 1;
                }
            }
        }
        rsdi_proc_close_fds(s);
    }
    rsdi_free(&p->alloc, p);
}

RSD_API int rsd_procs_spawn(rsd_procs *p, const rsd_proc_spec *spec, uint64_t now_ms,
                            rsd_proc *out) {
    rsdi_proc_slot *s = NULL;
    rsdi_proc_out o;
    char *const *envp;
    int i, r, err = 0, pipefd[2], nullfd;
    uint16_t port;
    pid_t pid = 0;
    extern char **environ;
    if (out) out->id = 0;
    if (!p || !spec || !out) return RSD_ERR_ARG;
    for (i = 0; i < p->max_procs; i++)
        if (p->slots[i].state == RSD_PROC_FREE) {
            s = &p->slots[i];
            break;
        }
    if (!s) return RSD_ERR_CAPACITY;
    /* W30: a free port, never one another live child of ours was given. */
    port = spec->port;
    if (port == 0) {
        int tries;
        for (tries = 0; tries < 8 && port == 0; tries++) {
            int k;
            port = rsdi_proc_free_port(spec->host);
            for (k = 0; port && k < p->max_procs; k++)
                if (rsdi_proc_running(&p->slots[k]) && p->slots[k].port == port) port = 0;
        }
        if (port == 0) {
            rsdi_log(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_PORT, "procs: no free port",
                     RSDI_WHERE);
            return RSD_ERR_PROC_PORT;
        }
    }
    memset(&o, 0, sizeof o);
    o.buf = s->args;
    o.cap = p->arg_bytes;
    o.argv = p->argv;
    o.max = RSD_PROC_MAX_ARGS;
    r = rsdi_proc_expand(spec, port, &o);
    if (r < 0) {
        rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_TEMPLATE, RSDI_WHERE,
                  "procs: command template: %s", rsd_result_str(r));
        return r;
    }
    p->argv[o.argc] = NULL;
    envp = environ;
    if (spec->env) {
        r = rsdi_proc_env(p, spec->env);
        if (r < 0) return r;
        envp = p->envp;
    }
    /* The slot is now taken, whatever happens to the launch. */
    {
        uint32_t gen = s->gen + 1 > RSDI_PROC_GEN_MAX ? 1 : s->gen + 1;
        char *ring = s->ring, *args = s->args;
        memset(s, 0, sizeof *s);
        s->gen = gen;
        s->ring = ring;
        s->args = args;
    }
    s->out_fd = s->pid_fd = -1;
    s->args_len = o.len;
    s->argc = o.argc;
    s->port = port;
    s->user = spec->user;
    s->spawn_ms = now_ms;
    s->exit_code = -1;
    {
        const char *nm = spec->name && spec->name[0] ? spec->name : NULL;
        const char *src = nm ? nm : (spec->model && spec->model[0] ? spec->model : rsdi_proc_exe(spec));
        size_t n;
        if (!nm) {
            const char *sl = strrchr(src, '/');
            if (sl && sl[1]) src = sl + 1;
        }
        n = strlen(src);
        if (n > RSD_PROC_NAME_MAX - 1) n = RSD_PROC_NAME_MAX - 1;
        memcpy(s->name, src, n);
        s->name[n] = '\0';
    }
    *out = rsdi_proc_handle(p, s);
    err = rsdi_proc_resolve(p, rsdi_proc_exe(spec), spec->env ? envp : NULL);
    if (!err) {
        nullfd = rsdi_proc_fd_high(open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (nullfd < 0) err = errno ? errno : EMFILE;
        else {
            if (rsdi_proc_pipe(pipefd) != 0) err = errno ? errno : EMFILE;
            else {
                rsd_proc_spawn_method m = p->method;
#ifndef RSDI_HAVE_SPAWN_CHDIR
                if (spec->cwd && m == RSD_PROC_SPAWN_POSIX) m = RSD_PROC_SPAWN_FORK;
#endif
#ifdef RSDI_PROC_LINUX
                if (m == RSD_PROC_SPAWN_VFORK)
                    err = rsdi_proc_vfork(p, spec->cwd, nullfd, pipefd[1], envp, &pid);
                else
#endif
                if (m == RSD_PROC_SPAWN_FORK)
                    err = rsdi_proc_fork(p, spec->cwd, nullfd, pipefd[1], envp, &pid);
                else
                    err = rsdi_proc_posix_spawn(p, spec->cwd, nullfd, pipefd[1], envp, &pid);
                close(pipefd[1]);
                if (err) close(pipefd[0]);
                else s->out_fd = pipefd[0];
            }
            close(nullfd);
        }
    }
    if (err) {
        s->err = err;
        s->state = RSD_PROC_FAILED;
        s->end_ms = now_ms;
        rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_SPAWN_FAILED, NULL,
                  "%s: could not launch %s: %s", s->name, s->args, strerror(err));
        rsdi_proc_event(p, s, RSD_PROC_EV_SPAWN_FAILED, now_ms);
        return RSD_ERR_SPAWN;
    }
    (void)fcntl(s->out_fd, F_SETFL, fcntl(s->out_fd, F_GETFL) | O_NONBLOCK);
    s->pid = pid;
#if defined(RSDI_PROC_LINUX) && defined(SYS_pidfd_open)
    {
        long pfd = syscall(SYS_pidfd_open, (long)pid, 0L);
        s->pid_fd = pfd >= 0 ? rsdi_proc_fd_high((int)pfd) : -1;
        if (s->pid_fd >= 0) (void)fcntl(s->pid_fd, F_SETFD, FD_CLOEXEC);
    }
#endif
    s->state = RSD_PROC_STARTING;
    s->start_deadline_ms =
        now_ms + (spec->start_deadline_ms ? spec->start_deadline_ms : p->start_deadline_ms);
    s->probe_ms = p->probe_first_ms;
    s->next_probe_ms = now_ms + p->probe_first_ms;
    s->recheck_iv = RSD_PROC_REAP_POLL_MS;
    s->recheck_ms = now_ms + RSD_PROC_REAP_POLL_MS;
    rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_PROC_SPAWN, NULL, "%s[%ld]: port %u: %s",
              s->name, (long)pid, (unsigned)port, s->args);
    return RSD_OK;
}

RSD_API int rsd_procs_mark_ready(rsd_procs *p, rsd_proc h, uint64_t now_ms) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!s) return RSD_ERR_PROC_STALE;
    if (s->state != RSD_PROC_STARTING) return RSD_ERR_STATE;
    s->state = RSD_PROC_READY;
    s->was_ready = true;
    s->ready_ms = now_ms;
    rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_PROC_READY, NULL, "%s[%ld]: ready after %llu ms",
              s->name, (long)s->pid, (unsigned long long)(now_ms - s->spawn_ms));
    return RSD_OK;
}

RSD_API int rsd_procs_stop(rsd_procs *p, rsd_proc h, uint64_t now_ms) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!s) return RSD_ERR_PROC_STALE;
    s->stop_requested = true;
    if (s->state == RSD_PROC_STARTING || s->state == RSD_PROC_READY)
        rsdi_proc_begin_stop(p, s, now_ms);
    return RSD_OK;
}

RSD_API int rsd_procs_kill(rsd_procs *p, rsd_proc h, uint64_t now_ms) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!s) return RSD_ERR_PROC_STALE;
    s->stop_requested = true;
    if (rsdi_proc_running(s) && s->state != RSD_PROC_KILLING) rsdi_proc_begin_kill(p, s, now_ms);
    return RSD_OK;
}

RSD_API int rsd_procs_release(rsd_procs *p, rsd_proc h) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!s) return RSD_ERR_PROC_STALE;
    if (s->state != RSD_PROC_EXITED && s->state != RSD_PROC_FAILED) return RSD_ERR_STATE;
    s->state = RSD_PROC_FREE;
    return RSD_OK;
}

RSD_API uint64_t rsd_procs_next_deadline(const rsd_procs *p) {
    uint64_t d = RSD_PROC_NO_DEADLINE;
    int i;
    if (!p) return d;
    for (i = 0; i < p->max_procs; i++) {
        const rsdi_proc_slot *s = &p->slots[i];
        if (!rsdi_proc_running(s)) continue;
        if (s->state == RSD_PROC_STARTING) {
            if (s->start_deadline_ms < d) d = s->start_deadline_ms;
            if (s->next_probe_ms < d) d = s->next_probe_ms;
        }
        if (s->state == RSD_PROC_STOPPING && s->kill_at_ms < d) d = s->kill_at_ms;
        if (s->state == RSD_PROC_KILLING && !s->stuck_sent && s->stuck_at_ms < d) d = s->stuck_at_ms;
        /* Without a pidfd, exits are found by polling (fast once the pipe closed). */
        if (s->pid_fd < 0 && s->recheck_ms < d) d = s->recheck_ms;
    }
    return d;
}

RSD_API uint64_t rsd_procs_step(rsd_procs *p, uint64_t now_ms) {
    int i;
    if (!p) return RSD_PROC_NO_DEADLINE;
    for (i = 0; i < p->max_procs; i++) {
        rsdi_proc_slot *s = &p->slots[i];
        if (!rsdi_proc_running(s)) continue;
        rsdi_proc_drain(p, s, now_ms);
        if (rsdi_proc_try_reap(p, s, now_ms)) continue;
        if (now_ms >= s->recheck_ms) {
            if (s->eof) {  /* probably exiting: 1, 2, 4 ... ms, back to the slow poll */
                s->recheck_iv *= 2;
                if (s->recheck_iv > (uint32_t)RSD_PROC_REAP_POLL_MS)
                    s->recheck_iv = (uint32_t)RSD_PROC_REAP_POLL_MS;
            }
            s->recheck_ms = now_ms + s->recheck_iv;
        }
        if (s->state == RSD_PROC_STARTING && now_ms >= s->start_deadline_ms) {
            s->timed_out = true;
            rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_START_TIMEOUT, NULL,
                      "%s[%ld]: not ready within %llu ms; stopping", s->name, (long)s->pid,
                      (unsigned long long)(now_ms - s->spawn_ms));
            rsdi_proc_event(p, s, RSD_PROC_EV_START_TIMEOUT, now_ms);
            rsdi_proc_begin_stop(p, s, now_ms);
        }
        if (s->state == RSD_PROC_STARTING && now_ms >= s->next_probe_ms) {
            /* readiness probe schedule: first after probe_first_ms, then doubling up to
               probe_max_ms, never past the start deadline; one PROBE event pending at most */
            uint64_t iv = (uint64_t)s->probe_ms * 2;
            if (iv > p->probe_max_ms) iv = p->probe_max_ms;
            s->probe_ms = (uint32_t)iv;
            s->next_probe_ms = now_ms + iv;
            if (s->next_probe_ms > s->start_deadline_ms) s->next_probe_ms = s->start_deadline_ms;
            s->probe_pending = true;
            s->probe_at_ms = now_ms;
        }
        if (s->state == RSD_PROC_STOPPING && now_ms >= s->kill_at_ms) rsdi_proc_begin_kill(p, s, now_ms);
        if (s->state == RSD_PROC_KILLING && !s->stuck_sent && now_ms >= s->stuck_at_ms) {
            s->stuck_sent = true;
            rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_STUCK, NULL,
                      "%s[%ld]: not reaped %u ms after SIGKILL", s->name, (long)s->pid,
                      (unsigned)p->kill_wait_ms);
            rsdi_proc_event(p, s, RSD_PROC_EV_STUCK, now_ms);
        }
    }
    return rsd_procs_next_deadline(p);
}

RSD_API int rsd_procs_fds(const rsd_procs *p, int *fds, int cap) {
    int i, n = 0;
    if (!p || (!fds && cap > 0)) return RSD_ERR_ARG;
    for (i = 0; i < p->max_procs; i++) {
        const rsdi_proc_slot *s = &p->slots[i];
        if (!rsdi_proc_running(s)) continue;
        if (s->out_fd >= 0 && n < cap) fds[n++] = s->out_fd;
        if (s->pid_fd >= 0 && n < cap) fds[n++] = s->pid_fd;
    }
    return n;
}

RSD_API bool rsd_procs_next_event(rsd_procs *p, rsd_proc_event *ev) {
    int i;
    if (!p || !ev) return false;
    if (p->ev_count) {
        *ev = p->events[p->ev_head];
        p->ev_head = (p->ev_head + 1) % p->ev_cap;
        p->ev_count--;
        return true;
    }
    /* PROBE events are flags, not queue entries: at most one per process, never dropped */
    for (i = 0; i < p->max_procs; i++) {
        rsdi_proc_slot *s = &p->slots[i];
        if (!s->probe_pending) continue;
        s->probe_pending = false;
        if (s->state != RSD_PROC_STARTING) continue;
        memset(ev, 0, sizeof *ev);
        ev->kind = RSD_PROC_EV_PROBE;
        ev->proc = rsdi_proc_handle(p, s);
        ev->pid = (int64_t)s->pid;
        ev->exit_code = -1;
        ev->at_ms = s->probe_at_ms;
        ev->user = s->user;
        return true;
    }
    return false;
}

RSD_API int rsd_procs_query(const rsd_procs *p, rsd_proc h, uint64_t now_ms, rsd_proc_info *info) {
    const rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!info) return RSD_ERR_ARG;
    memset(info, 0, sizeof *info);
    if (!s) return RSD_ERR_PROC_STALE;
    info->state = s->state;
    info->pid = (int64_t)s->pid;
    info->port = s->port;
    info->spawn_ms = s->spawn_ms;
    info->ready_ms = s->ready_ms;
    {
        uint64_t end = rsdi_proc_running(s) ? now_ms : s->end_ms;
        info->uptime_ms = end > s->spawn_ms ? end - s->spawn_ms : 0;
    }
    info->start_deadline_ms = s->start_deadline_ms;
    info->exit_code = s->exit_code;
    info->term_signal = s->term_signal;
    info->core_dumped = s->core_dumped;
    info->err = s->err;
    info->was_ready = s->was_ready;
    info->killed = s->killed;
    info->timed_out = s->timed_out;
    info->stop_requested = s->stop_requested;
    info->out_bytes = s->out_bytes;
    info->out_lines = s->out_lines;
    info->argc = s->argc;
    info->name = s->name;
    info->user = s->user;
    return RSD_OK;
}

RSD_API int rsd_procs_tail(const rsd_procs *p, rsd_proc h, int max_lines, char *buf, size_t cap) {
    const rsdi_proc_slot *s = rsdi_proc_get(p, h);
    uint64_t have, start, end, k;
    size_t n, i;
    int lines = 0;
    if (!buf || cap == 0) return RSD_ERR_ARG;
    buf[0] = '\0';
    if (!s) return RSD_ERR_PROC_STALE;
    end = s->out_bytes;
    have = end < p->ring_bytes ? end : p->ring_bytes;
    start = end - have;
#define RSDI_RING_AT(pos) (s->ring[(size_t)((pos) % p->ring_bytes)])
    if (start > 0) {  /* the ring wrapped: drop the partial first line */
        while (start < end && RSDI_RING_AT(start) != '\n') start++;
        if (start < end) start++;
    }
    /* Walk back over max_lines lines (a final newline does not open a new line). */
    k = end;
    if (k > start && RSDI_RING_AT(k - 1) == '\n') k--;
    while (k > start) {
        if (RSDI_RING_AT(k - 1) == '\n') {
            lines++;
            if (max_lines > 0 && lines >= max_lines) break;
        }
        k--;
    }
    if (max_lines > 0) start = k;
    /* Fit into cap - 1 bytes, keeping the end; start at a line boundary if possible. */
    if (end - start > cap - 1) {
        uint64_t s2 = end - (cap - 1), j;
        for (j = s2; j < end; j++)
            if (RSDI_RING_AT(j) == '\n') break;
        start = (j + 1 < end) ? j + 1 : s2;
    }
    n = (size_t)(end - start);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)RSDI_RING_AT(start + i);
        buf[i] = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : (char)c;
    }
#undef RSDI_RING_AT
    buf[n] = '\0';
    return (int)n;
}

RSD_API int rsd_procs_command(const rsd_procs *p, rsd_proc h, char *buf, size_t cap) {
    const rsdi_proc_slot *s = rsdi_proc_get(p, h);
    size_t n = 0, off = 0;
    int a;
    if (!buf || cap == 0) return RSD_ERR_ARG;
    buf[0] = '\0';
    if (!s) return RSD_ERR_PROC_STALE;
    for (a = 0; a < s->argc; a++) {
        const char *arg = s->args + off;
        size_t l = strlen(arg), i;
        bool q = l == 0 || strpbrk(arg, " \t\n'\"\\$`*?[]{}()<>|&;#~") != NULL;
        off += l + 1;
        if (a && n + 1 < cap) buf[n++] = ' ';
        if (q && n + 1 < cap) buf[n++] = '\'';
        for (i = 0; i < l; i++) {
            if (arg[i] == '\'') {  /* ' -> '\'' */
                if (n + 4 >= cap) break;
                memcpy(buf + n, "'\\''", 4);
                n += 4;
            } else if (n + 1 < cap) {
                buf[n++] = arg[i];
            }
        }
        if (q && n + 1 < cap) buf[n++] = '\'';
    }
    buf[n] = '\0';
    return (int)n;
}

RSD_API int rsd_procs_live(const rsd_procs *p, rsd_proc *out, int cap) {
    int i, n = 0;
    if (!p || (!out && cap > 0)) return RSD_ERR_ARG;
    for (i = 0; i < p->max_procs; i++)
        if (rsdi_proc_running(&p->slots[i]) && n < cap) out[n++] = rsdi_proc_handle(p, &p->slots[i]);
    return n;
}
#endif /* RSD_NO_PROCESS */
/* ==== >>proc end ========================================================== */

/* ==== >>state (implementation) ============================================ */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef O_NOFOLLOW
#define O_NOFOLLOW 0
#endif

struct rsd_state {
    rsd_allocator alloc;
    rsd_logger logger;
    rsd_state_lock_hook hook;
    uint32_t lock_wait_ms;
    bool fail_closed;
    char dir[RSD_STATE_MAX_DIR_BYTES + 1];
    char host[RSD_STATE_MAX_HOST_BYTES + 1];
    char filebuf[RSD_STATE_MAX_FILE_BYTES + 1];
    rsd_attr_set scratch;
};

enum { RSDI_STATE_PATH_BYTES = RSD_STATE_MAX_DIR_BYTES + 128 };

/* 64-bit FNV-1a over a NUL-terminated string. */
RSDI_PRIVATE uint64_t rsdi_state_fnv1a64(const char *s) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) {
        h ^= (uint64_t)(unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

RSDI_PRIVATE bool rsdi_state_safe_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

RSD_API int rsd_state_file_name(const char *key, char *buf, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t klen, n = 0, i;
    uint64_t h;
    bool run = false;
    if (!key || !buf) return RSD_ERR_ARG;
    klen = strlen(key);
    if (klen == 0 || klen > RSD_STATE_MAX_KEY_BYTES) return RSD_ERR_ARG;
    if (cap < RSD_STATE_MAX_NAME_BYTES) return RSD_ERR_BUFFER;
    /* Runs of bytes outside [A-Za-z0-9._-] become one '_'; a leading '.' or '-' becomes
       '_' so the name is never hidden, "." / "..", or an option-looking word. */
    for (i = 0; i < klen && n < RSD_STATE_NAME_PREFIX_BYTES; i++) {
        unsigned char c = (unsigned char)key[i];
        if (rsdi_state_safe_char(c)) {
            buf[n] = (n == 0 && (c == '.' || c == '-')) ? '_' : (char)c;
            n++;
            run = false;
        } else if (!run) {
            buf[n++] = '_';
            run = true;
        }
    }
    buf[n++] = '-';
    h = rsdi_state_fnv1a64(key);
    for (i = 0; i < 16; i++) buf[n++] = hex[(h >> (60 - 4 * i)) & 15u];
    buf[n] = '\0';
    return (int)n;
}

RSDI_PRIVATE const char *rsdi_state_env(const rsd_state_desc *d, const char *name) {
    const char *v;
    if (d && d->getenv_fn) v = d->getenv_fn(name, d->getenv_user);
    else v = getenv(name);
    return (v && v[0]) ? v : NULL;
}

/* Joins a and b into buf, dropping trailing slashes of the result (not a lone "/"). */
RSDI_PRIVATE int rsdi_state_join(char *buf, size_t cap, const char *a, const char *b) {
    size_t la = strlen(a), lb = b ? strlen(b) : 0, n;
    while (lb && la > 1 && a[la - 1] == '/') la--;  /* "/xdg/" + "/residency" */
    if (la + lb + 1 > cap) return RSD_ERR_BUFFER;
    memcpy(buf, a, la);
    if (lb) memcpy(buf + la, b, lb);
    n = la + lb;
    while (n > 1 && buf[n - 1] == '/') n--;
    buf[n] = '\0';
    return (int)n;
}

RSD_API int rsd_state_resolve_dir(const rsd_state_desc *desc, char *buf, size_t cap) {
    const char *v;
    int r;
    if (!buf || cap == 0) return RSD_ERR_ARG;
    if (cap > RSD_STATE_MAX_DIR_BYTES + 1) cap = RSD_STATE_MAX_DIR_BYTES + 1;
    if (desc && desc->dir && desc->dir[0]) r = rsdi_state_join(buf, cap, desc->dir, NULL);
    else if ((v = rsdi_state_env(desc, "RESIDENCY_STATE_DIR")) != NULL)
        r = rsdi_state_join(buf, cap, v, NULL);
    else if ((v = rsdi_state_env(desc, "XDG_STATE_HOME")) != NULL && v[0] == '/')
        r = rsdi_state_join(buf, cap, v, "/residency");  /* XDG: relative values are ignored */
    else if ((v = rsdi_state_env(desc, "HOME")) != NULL && v[0] == '/')
        r = rsdi_state_join(buf, cap, v, "/.local/state/residency");
    else return RSD_ERR_STATE_DIR;
    return r == RSD_ERR_BUFFER ? RSD_ERR_STATE_DIR : r;
}

/* A directory we may keep state in: a directory (after symlinks when follow), owned by
   our effective uid, not writable by others. Group-writable is allowed: with the common
   umask 002 and per-user groups, a hand-made directory is 0775. */
RSDI_PRIVATE bool rsdi_state_dir_ok(const char *path, bool follow) {
    struct stat sb;
    if ((follow ? stat(path, &sb) : lstat(path, &sb)) != 0) return false;
    return S_ISDIR(sb.st_mode) && sb.st_uid == geteuid() && (sb.st_mode & 002) == 0;
}

RSDI_PRIVATE bool rsdi_state_mkdir1(const char *path) {
    struct stat sb;
    if (mkdir(path, 0700) == 0) return true;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* mkdir -p with 0700 for every missing component. */
RSDI_PRIVATE bool rsdi_state_mkdirs(const char *dir) {
    char p[RSD_STATE_MAX_DIR_BYTES + 1];
    size_t i, n = strlen(dir);
    if (n == 0 || n > RSD_STATE_MAX_DIR_BYTES) return false;
    memcpy(p, dir, n + 1);
    for (i = 1; i < n; i++) {
        if (p[i] != '/' || p[i - 1] == '/') continue;
        p[i] = '\0';
        if (!rsdi_state_mkdir1(p)) return false;
        p[i] = '/';
    }
    return rsdi_state_mkdir1(p);
}

RSDI_PRIVATE int rsdi_state_path(const rsd_state *st, char *buf, const char *sub,
                                 const char *name, const char *ext) {
    int n = RSD_SNPRINTF(buf, RSDI_STATE_PATH_BYTES, "%s/%s%s%s%s", st->dir, sub,
                         name ? "/" : "", name ? name : "", ext ? ext : "");
    return (n < 0 || n >= (int)RSDI_STATE_PATH_BYTES) ? RSD_ERR_STATE_DIR : RSD_OK;
}

RSD_API int rsd_state_open(rsd_state **out, const rsd_state_desc *desc) {
    rsd_state_desc zero;
    rsd_state *st;
    char dir[RSD_STATE_MAX_DIR_BYTES + 1], sub[RSDI_STATE_PATH_BYTES];
    int r;
    static const char *const subs[2] = {"locks", "attr"};
    size_t i;
    if (!out) return RSD_ERR_ARG;
    *out = NULL;
    if (!desc) {
        memset(&zero, 0, sizeof zero);
        desc = &zero;
    }
    if (rsdi_allocator_check(&desc->allocator) < 0) {
        rsdi_log(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOCATOR_HALF, NULL, RSDI_WHERE);
        return RSD_ERR_ARG;
    }
    if ((desc->lock_hook.try_lock == NULL) != (desc->lock_hook.unlock == NULL)) return RSD_ERR_ARG;
    r = rsd_state_resolve_dir(desc, dir, sizeof dir);
    if (r < 0) {
        rsdi_log(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_STATE_DIR_UNRESOLVED, NULL, RSDI_WHERE);
        return r;
    }
    if ((size_t)r + 64 > RSD_STATE_MAX_DIR_BYTES) {
        rsdi_logf(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_STATE_DIR_TOO_LONG, RSDI_WHERE,
                  "state dir path has %d bytes", r);
        return RSD_ERR_STATE_DIR;
    }
    if (!rsdi_state_mkdirs(dir)) {
        rsdi_logf(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_STATE_DIR_CREATE_FAILED, RSDI_WHERE,
                  "mkdir -p %s: %s", dir, strerror(errno));
        return RSD_ERR_STATE_DIR;
    }
    /* The state dir itself may be a symlink (users relocate it); what it names must be ours. */
    if (!rsdi_state_dir_ok(dir, true)) {
        rsdi_logf(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_STATE_DIR_UNSAFE, RSDI_WHERE,
                  "%s: not a directory owned by uid %ld, or world-writable", dir,
                  (long)geteuid());
        return RSD_ERR_STATE_DIR;
    }
    for (i = 0; i < 2; i++) {
        (void)RSD_SNPRINTF(sub, sizeof sub, "%s/%s", dir, subs[i]);
        if (!rsdi_state_mkdir1(sub) || !rsdi_state_dir_ok(sub, false)) {
            rsdi_logf(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_STATE_DIR_UNSAFE, RSDI_WHERE,
                      "%s: must be a real directory (no symlink), ours, not world-writable", sub);
            return RSD_ERR_STATE_DIR;
        }
    }
    st = (rsd_state *)rsdi_malloc(&desc->allocator, sizeof *st);
    if (!st) {
        rsdi_log(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, NULL, RSDI_WHERE);
        return RSD_ERR_NOMEM;
    }
    memset(st, 0, sizeof *st);
    st->alloc = desc->allocator;
    st->logger = desc->logger;
    st->hook = desc->lock_hook;
    st->lock_wait_ms = desc->lock_wait_ms ? desc->lock_wait_ms
                                          : (uint32_t)RSD_STATE_LOCK_WAIT_MS_DEFAULT;
    st->fail_closed = desc->lock_fail_closed;
    memcpy(st->dir, dir, (size_t)r + 1);
    if (gethostname(st->host, sizeof st->host - 1) != 0) memcpy(st->host, "?", 2);
    st->host[sizeof st->host - 1] = '\0';
    *out = st;
    return RSD_OK;
}

RSD_API void rsd_state_close(rsd_state *st) {
    rsd_allocator a;
    if (!st) return;
    a = st->alloc;
    rsdi_free(&a, st);
}

RSD_API const char *rsd_state_dir(const rsd_state *st) { return st ? st->dir : ""; }

/* ---- small POSIX helpers --------------------------------------------------- */
RSDI_PRIVATE void rsdi_state_close_fd(int fd) {
    if (fd >= 0) (void)close(fd);  /* no retry on EINTR: the fd is gone either way on Linux */
}

RSDI_PRIVATE bool rsdi_state_write_all(int fd, const char *p, size_t n, off_t at, bool positioned) {
    while (n > 0) {
        ssize_t w = positioned ? pwrite(fd, p, n, at) : write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += w;
        n -= (size_t)w;
        at += (off_t)w;
    }
    return true;
}

/* Reads up to cap bytes from offset 0; returns bytes read, or -1. */
RSDI_PRIVATE long rsdi_state_read_all(int fd, char *buf, size_t cap) {
    size_t n = 0;
    while (n < cap) {
        ssize_t r = pread(fd, buf + n, cap - n, (off_t)n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    return (long)n;
}

/* Opens a regular file without following a symlink and without blocking on a FIFO. */
RSDI_PRIVATE int rsdi_state_open_file(const char *path, int flags, bool create) {
    struct stat sb;
    int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0),
                  0600);
    if (fd < 0) return -1;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        rsdi_state_close_fd(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

RSDI_PRIVATE void rsdi_state_sleep_ms(uint32_t ms) {
    struct timespec ts, rem;
    ts.tv_sec = (time_t)(ms / 1000u);
    ts.tv_nsec = (long)(ms % 1000u) * 1000000L;
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR) ts = rem;
}

RSDI_PRIVATE uint64_t rsdi_state_mono_ms(void) {
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

RSDI_PRIVATE uint64_t rsdi_state_wall_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Copies s into dst (cap bytes incl. NUL), replacing control bytes by '?'. */
RSDI_PRIVATE void rsdi_state_copy_clean(char *dst, size_t cap, const char *s) {
    size_t i = 0;
    if (s)
        for (; s[i] && i + 1 < cap; i++)
            dst[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    dst[i] = '\0';
}

/* ---- the cross-process lock ---------------------------------------------------- */
RSD_API int rsd_state_lock_begin(rsd_state *st, rsd_state_lock *lk, const char *key,
                                 const char *purpose, uint64_t now_ms, uint64_t deadline_ms) {
    size_t klen;
    if (!st || !lk || !key) return RSD_ERR_ARG;
    if (lk->state == RSD_LOCK_HELD || lk->state == RSD_LOCK_WAITING) return RSD_ERR_STATE;
    klen = strlen(key);
    memset(lk, 0, sizeof *lk);
    lk->fd = -1;
    if (rsd_state_file_name(key, lk->name, sizeof lk->name) < 0) {
        rsdi_log(&st->logger, RSD_LOG_ERROR, RSD_LOGITEM_STATE_KEY_INVALID, NULL, RSDI_WHERE);
        return RSD_ERR_ARG;
    }
    memcpy(lk->key, key, klen + 1);
    rsdi_state_copy_clean(lk->purpose, sizeof lk->purpose, purpose ? purpose : "");
    lk->via_hook = st->hook.try_lock != NULL;
    lk->begin_ms = now_ms;
    lk->wake_ms = now_ms;
    lk->deadline_ms = deadline_ms ? deadline_ms
                      : (now_ms > UINT64_MAX - st->lock_wait_ms ? UINT64_MAX
                                                                : now_ms + st->lock_wait_ms);
    lk->backoff_ms = RSD_STATE_LOCK_RETRY_MIN_MS;
    lk->state = RSD_LOCK_WAITING;
    lk->error = RSD_OK;
    return RSD_OK;
}

/* Writes the owner record into the held lock file (best effort: diagnostics only). */
RSDI_PRIVATE void rsdi_state_write_owner(rsd_state *st, rsd_state_lock *lk) {
    char rec[RSD_STATE_MAX_HOST_BYTES + RSD_STATE_MAX_PURPOSE_BYTES + 128];
    int n = RSD_SNPRINTF(rec, sizeof rec, "pid=%ld\nhost=%s\ntaken_unix_ms=%llu\npurpose=%s\n",
                         (long)getpid(), st->host, (unsigned long long)rsdi_state_wall_ms(),
                         lk->purpose);
    if (n <= 0 || n >= (int)sizeof rec) return;
    /* Write first, then cut: a reader never sees an empty file while we hold it. */
    if (rsdi_state_write_all(lk->fd, rec, (size_t)n, 0, true)) (void)ftruncate(lk->fd, n);
}

/* One attempt: RSD_OK taken, RSD_PENDING busy, <0 error. */
RSDI_PRIVATE int rsdi_state_lock_attempt(rsd_state *st, rsd_state_lock *lk) {
    char path[RSDI_STATE_PATH_BYTES];
    lk->attempts++;
    if (lk->via_hook) {
        int r = st->hook.try_lock(lk->key, st->hook.user);
        if (r == RSD_OK || r == RSD_PENDING) return r;
        return r < 0 ? r : RSD_ERR_LOCK;
    }
    if (lk->fd < 0) {
        if (rsdi_state_path(st, path, "locks", lk->name, ".lock") < 0) return RSD_ERR_STATE_DIR;
        lk->fd = rsdi_state_open_file(path, O_RDWR, true);
        if (lk->fd < 0) {
            rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_LOCK_OPEN_FAILED, RSDI_WHERE,
                      "open %s: %s", path, strerror(errno));
            return RSD_ERR_LOCK;
        }
    }
    if (flock(lk->fd, LOCK_EX | LOCK_NB) == 0) return RSD_OK;
    if (errno == EWOULDBLOCK || errno == EAGAIN || errno == EINTR) return RSD_PENDING;
    rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_LOCK_FAILED, RSDI_WHERE, "flock %s: %s",
              lk->name, strerror(errno));
    return RSD_ERR_LOCK;
}

/* Owner text for messages, from the open lock file. */
RSDI_PRIVATE void rsdi_state_owner_text(const rsd_state_lock *lk, char *out, size_t cap);

/* Gives up waiting with error err (fail-open: proceed unlocked). */
RSDI_PRIVATE int rsdi_state_lock_give_up(rsd_state *st, rsd_state_lock *lk, int err, uint64_t now_ms) {
    char owner[RSD_STATE_MAX_HOST_BYTES + RSD_STATE_MAX_PURPOSE_BYTES + 64];
    rsdi_state_owner_text(lk, owner, sizeof owner);
    rsdi_state_close_fd(lk->fd);
    lk->fd = -1;
    lk->error = err;
    if (st->fail_closed) {
        lk->state = RSD_LOCK_FAILED;
        rsdi_logf(&st->logger, RSD_LOG_ERROR,
                  err == RSD_ERR_TIMEOUT ? RSD_LOGITEM_LOCK_TIMEOUT : RSD_LOGITEM_LOCK_FAILED,
                  RSDI_WHERE, "lock %s (%s): %s after %llu ms%s", lk->key, lk->purpose,
                  rsd_result_str(err), (unsigned long long)(now_ms - lk->begin_ms), owner);
        return err;
    }
    lk->state = RSD_LOCK_UNLOCKED;
    rsdi_logf(&st->logger, RSD_LOG_WARN,
              err == RSD_ERR_TIMEOUT ? RSD_LOGITEM_LOCK_WAIT_EXPIRED
                                     : RSD_LOGITEM_LOCK_PROCEED_UNLOCKED,
              RSDI_WHERE, "lock %s (%s): %s after %llu ms%s; proceeding without the lock",
              lk->key, lk->purpose, rsd_result_str(err),
              (unsigned long long)(now_ms - lk->begin_ms), owner);
    return RSD_OK;
}

RSD_API int rsd_state_lock_step(rsd_state *st, rsd_state_lock *lk, uint64_t now_ms) {
    int r;
    uint64_t next;
    if (!st || !lk) return RSD_ERR_ARG;
    switch (lk->state) {
    case RSD_LOCK_HELD:
    case RSD_LOCK_UNLOCKED: return RSD_OK;
    case RSD_LOCK_FAILED: return lk->error < 0 ? lk->error : RSD_ERR_LOCK;
    case RSD_LOCK_WAITING: break;
    default: return RSD_ERR_STATE;
    }
    if (now_ms < lk->wake_ms) return RSD_PENDING;
    r = rsdi_state_lock_attempt(st, lk);
    if (r == RSD_OK) {
        lk->state = RSD_LOCK_HELD;
        lk->error = RSD_OK;
        if (!lk->via_hook) rsdi_state_write_owner(st, lk);
        return RSD_OK;
    }
    if (r < 0) return rsdi_state_lock_give_up(st, lk, r, now_ms);
    if (now_ms >= lk->deadline_ms) return rsdi_state_lock_give_up(st, lk, RSD_ERR_TIMEOUT, now_ms);
    next = now_ms > UINT64_MAX - lk->backoff_ms ? UINT64_MAX : now_ms + lk->backoff_ms;
    lk->wake_ms = next < lk->deadline_ms ? next : lk->deadline_ms;
    lk->backoff_ms = lk->backoff_ms * 2 > RSD_STATE_LOCK_RETRY_MAX_MS
                         ? (uint32_t)RSD_STATE_LOCK_RETRY_MAX_MS : lk->backoff_ms * 2;
    return RSD_PENDING;
}

RSD_API int rsd_state_lock_try(rsd_state *st, rsd_state_lock *lk, const char *key,
                               const char *purpose) {
    int r = rsd_state_lock_begin(st, lk, key, purpose, 0, 1);
    if (r < 0) return r;
    r = rsdi_state_lock_attempt(st, lk);
    if (r == RSD_OK) {
        lk->state = RSD_LOCK_HELD;
        if (!lk->via_hook) rsdi_state_write_owner(st, lk);
        return RSD_OK;
    }
    rsdi_state_close_fd(lk->fd);
    lk->fd = -1;
    lk->state = RSD_LOCK_IDLE;
    lk->error = r;
    return r;
}

RSD_API int rsd_state_lock_wait(rsd_state *st, rsd_state_lock *lk, const char *key,
                                const char *purpose, uint32_t wait_ms) {
    uint64_t now = rsdi_state_mono_ms();
    int r = rsd_state_lock_begin(st, lk, key, purpose, now, wait_ms ? now + wait_ms : 0);
    if (r < 0) return r;
    for (;;) {
        r = rsd_state_lock_step(st, lk, now);
        if (r != RSD_PENDING) return r;
        now = rsdi_state_mono_ms();
        if (lk->wake_ms > now) {
            uint64_t d = lk->wake_ms - now;
            rsdi_state_sleep_ms(d > 1000u ? 1000u : (uint32_t)d);
            now = rsdi_state_mono_ms();
        }
    }
}

RSD_API void rsd_state_unlock(rsd_state *st, rsd_state_lock *lk) {
    if (!lk) return;
    if (lk->state == RSD_LOCK_HELD) {
        if (lk->via_hook) {
            if (st && st->hook.unlock) st->hook.unlock(lk->key, st->hook.user);
        } else if (lk->fd >= 0) {
            (void)ftruncate(lk->fd, 0);  /* free locks carry no owner record */
            (void)flock(lk->fd, LOCK_UN);
        }
    }
    if (lk->state != RSD_LOCK_IDLE) rsdi_state_close_fd(lk->fd);
    lk->fd = -1;
    lk->state = RSD_LOCK_IDLE;
}

RSD_API bool rsd_state_lock_held(const rsd_state_lock *lk) {
    return lk && lk->state == RSD_LOCK_HELD;
}

/* Parses "name=value" lines of an owner record. */
RSDI_PRIVATE int rsdi_state_parse_owner(const char *buf, size_t n, rsd_lock_owner *out) {
    size_t i = 0;
    bool any = false;
    memset(out, 0, sizeof *out);
    while (i < n) {
        size_t s = i, e, eq;
        while (i < n && buf[i] != '\n') i++;
        e = i++;
        for (eq = s; eq < e && buf[eq] != '='; eq++) {}
        if (eq >= e) continue;
        {
            const char *v = buf + eq + 1;
            size_t vl = e - eq - 1, kl = eq - s;
            char tmp[RSD_STATE_MAX_HOST_BYTES + 1];
            if (vl > RSD_STATE_MAX_HOST_BYTES) vl = RSD_STATE_MAX_HOST_BYTES;
            memcpy(tmp, v, vl);
            tmp[vl] = '\0';
            if (kl == 3 && memcmp(buf + s, "pid", 3) == 0) {
                out->pid = (int64_t)strtoll(tmp, NULL, 10);
                any = true;
            } else if (kl == 4 && memcmp(buf + s, "host", 4) == 0) {
                rsdi_state_copy_clean(out->host, sizeof out->host, tmp);
            } else if (kl == 13 && memcmp(buf + s, "taken_unix_ms", 13) == 0) {
                out->taken_unix_ms = (uint64_t)strtoull(tmp, NULL, 10);
            } else if (kl == 7 && memcmp(buf + s, "purpose", 7) == 0) {
                rsdi_state_copy_clean(out->purpose, sizeof out->purpose, tmp);
            }
        }
    }
    return any ? RSD_OK : RSD_ERR_NOT_FOUND;
}

RSDI_PRIVATE int rsdi_state_read_owner_fd(int fd, rsd_lock_owner *out) {
    char buf[RSD_STATE_MAX_HOST_BYTES + RSD_STATE_MAX_PURPOSE_BYTES + 128];
    long n = rsdi_state_read_all(fd, buf, sizeof buf);
    if (n < 0) return RSD_ERR_STATE_IO;
    return rsdi_state_parse_owner(buf, (size_t)n, out);
}

RSDI_PRIVATE void rsdi_state_owner_text(const rsd_state_lock *lk, char *out, size_t cap) {
    rsd_lock_owner o;
    out[0] = '\0';
    if (lk->fd < 0 || rsdi_state_read_owner_fd(lk->fd, &o) != RSD_OK) return;
    (void)RSD_SNPRINTF(out, cap, " (owner pid=%lld host=%s purpose=%s)", (long long)o.pid,
                       o.host, o.purpose);
}

RSD_API int rsd_state_lock_owner(rsd_state *st, const char *key, rsd_lock_owner *out) {
    char name[RSD_STATE_MAX_NAME_BYTES], path[RSDI_STATE_PATH_BYTES];
    int fd, r;
    if (!st || !key || !out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (rsd_state_file_name(key, name, sizeof name) < 0) return RSD_ERR_ARG;
    if (rsdi_state_path(st, path, "locks", name, ".lock") < 0) return RSD_ERR_STATE_DIR;
    fd = rsdi_state_open_file(path, O_RDONLY, false);
    if (fd < 0) return errno == ENOENT ? RSD_ERR_NOT_FOUND : RSD_ERR_STATE_IO;
    r = rsdi_state_read_owner_fd(fd, out);
    rsdi_state_close_fd(fd);
    return r;
}

/* ---- attribution files ------------------------------------------------------- */
/* Format (text, one file per target, attr/<name>.attr):
     residency-attr 1\n
     <model>\t<instance>\t<loaded_at_ms>\t<pid>\n     (0..RSD_STATE_MAX_ATTR lines)
     end <count>\n
   ids escape \\ \t \n \r as two bytes and other bytes < 0x20 and 0x7f as \xHH. */
static const char rsdi_attr_magic[] = "residency-attr 1\n";

RSD_API int rsd_attr_set_find(const rsd_attr_set *set, const char *model, const char *instance) {
    size_t i;
    if (!set || !model) return RSD_ERR_ARG;
    for (i = 0; i < set->count && i < RSD_STATE_MAX_ATTR; i++) {
        if (strcmp(set->items[i].model, model) != 0) continue;
        if (instance && strcmp(set->items[i].instance, instance) != 0) continue;
        return (int)i;
    }
    return RSD_ERR_NOT_FOUND;
}

RSDI_PRIVATE int rsdi_attr_hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Unescapes s[0..n) into dst (RSD_STATE_MAX_ID_BYTES + 1); false when malformed. */
RSDI_PRIVATE bool rsdi_attr_unescape(const char *s, size_t n, char *dst) {
    size_t i = 0, o = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i++];
        if (c < 0x20 || c == 0x7f) return false;  /* raw control bytes never written */
        if (c == '\\') {
            if (i >= n) return false;
            c = (unsigned char)s[i++];
            if (c == '\\') c = '\\';
            else if (c == 't') c = '\t';
            else if (c == 'n') c = '\n';
            else if (c == 'r') c = '\r';
            else if (c == 'x') {
                int h, l;
                if (i + 2 > n || (h = rsdi_attr_hex(s[i])) < 0 || (l = rsdi_attr_hex(s[i + 1])) < 0)
                    return false;
                c = (unsigned char)(h * 16 + l);
                i += 2;
                if (c == 0) return false;
            } else return false;
        }
        if (o >= RSD_STATE_MAX_ID_BYTES) return false;
        dst[o++] = (char)c;
    }
    dst[o] = '\0';
    return true;
}

/* Parses a decimal in s[0..n) (1..20 digits, no sign) into *v; false on overflow. */
RSDI_PRIVATE bool rsdi_attr_u64(const char *s, size_t n, uint64_t *v) {
    uint64_t x = 0;
    size_t i;
    if (n == 0 || n > 20) return false;
    for (i = 0; i < n; i++) {
        unsigned d;
        if (s[i] < '0' || s[i] > '9') return false;
        d = (unsigned)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10u) return false;
        x = x * 10u + d;
    }
    *v = x;
    return true;
}

/* Strict parser: RSD_OK with *out filled, or RSD_ERR_TRUNCATED / RSD_ERR_PROTOCOL
   (out is then empty). Never reads outside buf[0..n). */
RSDI_PRIVATE int rsdi_attr_parse(const char *buf, size_t n, rsd_attr_set *out) {
    size_t pos, ml = sizeof rsdi_attr_magic - 1;
    memset(out, 0, sizeof *out);
    if (n < ml || memcmp(buf, rsdi_attr_magic, ml) != 0)
        return n < ml ? RSD_ERR_TRUNCATED : RSD_ERR_PROTOCOL;
    pos = ml;
    for (;;) {
        const char *line = buf + pos, *f[4];
        size_t len, fl[4], nf = 0, i, s;
        const char *nl = (const char *)memchr(line, '\n', n - pos);
        if (!nl) goto bad_trunc;
        len = (size_t)(nl - line);
        /* the trailer has no tab; an entry line always has three (ids may read "end 1") */
        if (len >= 4 && memcmp(line, "end ", 4) == 0 && !memchr(line, '\t', len)) {
            uint64_t cnt;
            if (!rsdi_attr_u64(line + 4, len - 4, &cnt) || cnt != out->count) goto bad;
            if (pos + len + 1 != n) goto bad;  /* nothing after the trailer */
            return RSD_OK;
        }
        for (s = 0, i = 0; i <= len; i++) {
            if (i == len || line[i] == '\t') {
                if (nf == 4) goto bad;
                f[nf] = line + s;
                fl[nf++] = i - s;
                s = i + 1;
            }
        }
        if (nf != 4 || out->count >= RSD_STATE_MAX_ATTR) goto bad;
        {
            rsd_attr *a = &out->items[out->count];
            uint64_t pid;
            if (fl[0] == 0 || !rsdi_attr_unescape(f[0], fl[0], a->model) ||
                !rsdi_attr_unescape(f[1], fl[1], a->instance) ||
                !rsdi_attr_u64(f[2], fl[2], &a->loaded_at_ms) || !rsdi_attr_u64(f[3], fl[3], &pid) ||
                pid > (uint64_t)INT64_MAX)
                goto bad;
            a->pid = (int64_t)pid;
            if (rsd_attr_set_find(out, a->model, a->instance) >= 0) goto bad;  /* duplicate */
            out->count++;
        }
        pos += len + 1;
    }
bad_trunc:
    memset(out, 0, sizeof *out);
    return RSD_ERR_TRUNCATED;
bad:
    memset(out, 0, sizeof *out);
    return RSD_ERR_PROTOCOL;
}

RSDI_PRIVATE bool rsdi_attr_put(char *buf, size_t cap, size_t *n, const char *s, size_t len) {
    if (len > cap - *n) return false;
    memcpy(buf + *n, s, len);
    *n += len;
    return true;
}

RSDI_PRIVATE bool rsdi_attr_put_escaped(char *buf, size_t cap, size_t *n, const char *s) {
    static const char hex[] = "0123456789abcdef";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char e[4];
        size_t el = 2;
        e[0] = '\\';
        if (c == '\\') e[1] = '\\';
        else if (c == '\t') e[1] = 't';
        else if (c == '\n') e[1] = 'n';
        else if (c == '\r') e[1] = 'r';
        else if (c < 0x20 || c == 0x7f) {
            e[1] = 'x';
            e[2] = hex[c >> 4];
            e[3] = hex[c & 15u];
            el = 4;
        } else {
            e[0] = (char)c;
            el = 1;
        }
        if (!rsdi_attr_put(buf, cap, n, e, el)) return false;
    }
    return true;
}

/* Writes the file image of set into buf; length, or RSD_ERR_BUFFER / RSD_ERR_ARG. */
RSDI_PRIVATE int rsdi_attr_format(const rsd_attr_set *set, char *buf, size_t cap) {
    size_t n = 0, i;
    char num[64];
    int k;
    if (set->count > RSD_STATE_MAX_ATTR) return RSD_ERR_ARG;
    if (!rsdi_attr_put(buf, cap, &n, rsdi_attr_magic, sizeof rsdi_attr_magic - 1))
        return RSD_ERR_BUFFER;
    for (i = 0; i < set->count; i++) {
        const rsd_attr *a = &set->items[i];
        if (!a->model[0] || a->pid < 0) return RSD_ERR_ARG;
        k = RSD_SNPRINTF(num, sizeof num, "\t%llu\t%lld\n", (unsigned long long)a->loaded_at_ms,
                         (long long)a->pid);
        if (!rsdi_attr_put_escaped(buf, cap, &n, a->model) ||
            !rsdi_attr_put(buf, cap, &n, "\t", 1) ||
            !rsdi_attr_put_escaped(buf, cap, &n, a->instance) ||
            !rsdi_attr_put(buf, cap, &n, num, (size_t)k))
            return RSD_ERR_BUFFER;
    }
    k = RSD_SNPRINTF(num, sizeof num, "end %u\n", (unsigned)set->count);
    if (!rsdi_attr_put(buf, cap, &n, num, (size_t)k)) return RSD_ERR_BUFFER;
    return (int)n;
}

/* Reads and parses an attribution file into out. Missing = empty; corrupt = empty
   with out->corrupt and a log item. <0 only when the file exists but cannot be read. */
RSDI_PRIVATE int rsdi_attr_read(rsd_state *st, const char *path, rsd_attr_set *out) {
    int fd = rsdi_state_open_file(path, O_RDONLY, false), r;
    long n;
    memset(out, 0, sizeof *out);
    if (fd < 0) {
        if (errno == ENOENT) return RSD_OK;
        rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_READ_FAILED, RSDI_WHERE, "%s: %s",
                  path, strerror(errno));
        return RSD_ERR_STATE_IO;
    }
    n = rsdi_state_read_all(fd, st->filebuf, RSD_STATE_MAX_FILE_BYTES + 1);
    rsdi_state_close_fd(fd);
    if (n < 0) {
        rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_READ_FAILED, RSDI_WHERE, "%s: %s",
                  path, strerror(errno));
        return RSD_ERR_STATE_IO;
    }
    r = n > (long)RSD_STATE_MAX_FILE_BYTES ? RSD_ERR_TOO_LARGE
                                           : rsdi_attr_parse(st->filebuf, (size_t)n, out);
    if (r < 0) {
        memset(out, 0, sizeof *out);
        out->corrupt = true;
        rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_CORRUPT, RSDI_WHERE,
                  "%s (%ld bytes): %s; treated as empty", path, n, rsd_result_str(r));
    }
    return RSD_OK;
}

RSD_API int rsd_state_attr_load(rsd_state *st, const char *key, rsd_attr_set *out) {
    char name[RSD_STATE_MAX_NAME_BYTES], path[RSDI_STATE_PATH_BYTES];
    int r;
    if (!st || !key || !out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (rsd_state_file_name(key, name, sizeof name) < 0) return RSD_ERR_ARG;
    if (rsdi_state_path(st, path, "attr", name, ".attr") < 0) return RSD_ERR_STATE_DIR;
    r = rsdi_attr_read(st, path, out);
    return r < 0 ? r : (int)out->count;
}

/* Takes the short attribution-file lock (attr/<name>.lock), polling for at most
   RSD_STATE_ATTR_LOCK_WAIT_MS of accumulated sleep. Returns the fd or <0. */
RSDI_PRIVATE int rsdi_attr_lock(rsd_state *st, const char *name) {
    char path[RSDI_STATE_PATH_BYTES];
    uint32_t slept = 0, delay = 1;
    int fd;
    if (rsdi_state_path(st, path, "attr", name, ".lock") < 0) return RSD_ERR_STATE_DIR;
    fd = rsdi_state_open_file(path, O_RDWR, true);
    if (fd < 0) {
        rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_LOCK_OPEN_FAILED, RSDI_WHERE, "open %s: %s",
                  path, strerror(errno));
        return RSD_ERR_STATE_IO;
    }
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        if (errno != EWOULDBLOCK && errno != EAGAIN && errno != EINTR) break;
        if (slept >= RSD_STATE_ATTR_LOCK_WAIT_MS) {
            rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_LOCK_TIMEOUT, RSDI_WHERE,
                      "%s busy for %u ms", path, (unsigned)slept);
            rsdi_state_close_fd(fd);
            return RSD_ERR_LOCK;
        }
        rsdi_state_sleep_ms(delay);
        slept += delay;
        delay = delay * 2u > 20u ? 20u : delay * 2u;
    }
    rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_LOCK_FAILED, RSDI_WHERE, "flock %s: %s",
              path, strerror(errno));
    rsdi_state_close_fd(fd);
    return RSD_ERR_LOCK;
}

/* Atomically replaces path with data: temp file, (fsync), rename. The directory is not
   fsynced: after a crash a reader finds the old or the new version, both valid. The
   caller holds the attribution file lock, so the temp name can be fixed. */
RSDI_PRIVATE int rsdi_state_replace(rsd_state *st, const char *path, const char *data, size_t n,
                                    bool sync) {
    char tmp[RSDI_STATE_PATH_BYTES + 8];
    int fd, err;
    bool ok;
    (void)RSD_SNPRINTF(tmp, sizeof tmp, "%s.tmp", path);
    (void)unlink(tmp);  /* a stale temp of a writer that died */
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) goto fail;
    ok = rsdi_state_write_all(fd, data, n, 0, false) && (!sync || fsync(fd) == 0);
    err = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        (void)unlink(tmp);
        errno = err;
        goto fail;
    }
    return RSD_OK;
fail:
    rsdi_logf(&st->logger, RSD_LOG_ERROR, RSD_LOGITEM_ATTR_WRITE_FAILED, RSDI_WHERE, "%s: %s",
              path, strerror(errno));
    return RSD_ERR_STATE_IO;
}

RSDI_PRIVATE int rsdi_attr_write(rsd_state *st, const char *path, const rsd_attr_set *set) {
    int n = rsdi_attr_format(set, st->filebuf, RSD_STATE_MAX_FILE_BYTES);
    if (n < 0) return n;
    return rsdi_state_replace(st, path, st->filebuf, (size_t)n, true);
}

/* Shared read-modify-write; op 0 = add, 1 = remove. */
RSDI_PRIVATE int rsdi_attr_modify(rsd_state *st, const char *key, const char *model,
                                  const char *instance, uint64_t loaded_at_ms, int op) {
    char name[RSD_STATE_MAX_NAME_BYTES], path[RSDI_STATE_PATH_BYTES];
    rsd_attr_set *set;
    int lfd, r, removed = 0;
    size_t i, o;
    if (!st || !key || !model || !model[0] || strlen(model) > RSD_STATE_MAX_ID_BYTES ||
        (instance && strlen(instance) > RSD_STATE_MAX_ID_BYTES))
        return RSD_ERR_ARG;
    if (rsd_state_file_name(key, name, sizeof name) < 0) return RSD_ERR_ARG;
    if (rsdi_state_path(st, path, "attr", name, ".attr") < 0) return RSD_ERR_STATE_DIR;
    lfd = rsdi_attr_lock(st, name);
    if (lfd < 0) return lfd;
    set = &st->scratch;
    r = rsdi_attr_read(st, path, set);
    if (r < 0) goto done;
    if (op == 0) {
        const char *inst = instance ? instance : "";
        int at = rsd_attr_set_find(set, model, inst);
        rsd_attr *a;
        if (at < 0) {
            if (set->count >= RSD_STATE_MAX_ATTR) {
                rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_FULL, RSDI_WHERE,
                          "%s: %u entries", key, (unsigned)set->count);
                r = RSD_ERR_CAPACITY;
                goto done;
            }
            at = (int)set->count++;
        }
        a = &set->items[at];
        memcpy(a->model, model, strlen(model) + 1);
        memcpy(a->instance, inst, strlen(inst) + 1);
        a->loaded_at_ms = loaded_at_ms;
        a->pid = (int64_t)getpid();
    } else {
        for (i = 0, o = 0; i < set->count; i++) {
            const rsd_attr *a = &set->items[i];
            if (strcmp(a->model, model) == 0 && (!instance || strcmp(a->instance, instance) == 0)) {
                removed++;
                continue;
            }
            if (o != i) set->items[o] = *a;
            o++;
        }
        set->count = o;
        if (removed == 0) {
            r = 0;
            goto done;
        }
    }
    r = rsdi_attr_write(st, path, set);
    if (r == RSD_OK) r = removed;
done:
    (void)flock(lfd, LOCK_UN);
    rsdi_state_close_fd(lfd);
    return r;
}

RSD_API int rsd_state_attr_add(rsd_state *st, const char *key, const char *model,
                               const char *instance, uint64_t loaded_at_ms) {
    return rsdi_attr_modify(st, key, model, instance, loaded_at_ms, 0);
}

RSD_API int rsd_state_attr_remove(rsd_state *st, const char *key, const char *model,
                                  const char *instance) {
    return rsdi_attr_modify(st, key, model, instance, 0, 1);
}

/* ---- cross-process mutation generation (W2) ------------------------------------- */
/* <dir>/attr/<name>.gen holds "<decimal>\n". RSD_OK with *out (0 = missing),
   RSD_ERR_STATE_IO when unreadable or corrupt. */
RSDI_PRIVATE int rsdi_state_gen_read_path(rsd_state *st, const char *path, uint64_t *out) {
    char buf[32];
    long n;
    int fd = rsdi_state_open_file(path, O_RDONLY, false);
    *out = 0;
    if (fd < 0) return errno == ENOENT ? RSD_OK : RSD_ERR_STATE_IO;
    n = rsdi_state_read_all(fd, buf, sizeof buf);
    rsdi_state_close_fd(fd);
    if (n < 2 || buf[n - 1] != '\n' || !rsdi_attr_u64(buf, (size_t)n - 1, out)) {
        *out = 0;
        rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_CORRUPT, RSDI_WHERE,
                  "%s: not a generation number", path);
        return RSD_ERR_STATE_IO;
    }
    return RSD_OK;
}

RSDI_PRIVATE int rsdi_state_gen_path(rsd_state *st, const char *key, char *name, char *path) {
    if (!st || !key) return RSD_ERR_ARG;
    if (rsd_state_file_name(key, name, RSD_STATE_MAX_NAME_BYTES) < 0) return RSD_ERR_ARG;
    return rsdi_state_path(st, path, "attr", name, ".gen");
}

RSD_API int rsd_state_gen_read(rsd_state *st, const char *key, uint64_t *out) {
    char name[RSD_STATE_MAX_NAME_BYTES], path[RSDI_STATE_PATH_BYTES];
    int r;
    if (!out) return RSD_ERR_ARG;
    *out = 0;
    r = rsdi_state_gen_path(st, key, name, path);
    return r < 0 ? r : rsdi_state_gen_read_path(st, path, out);
}

RSD_API int rsd_state_gen_bump(rsd_state *st, const char *key, uint64_t *out) {
    char name[RSD_STATE_MAX_NAME_BYTES], path[RSDI_STATE_PATH_BYTES], buf[32];
    uint64_t g = 0;
    int r, lfd, n;
    if (out) *out = 0;
    r = rsdi_state_gen_path(st, key, name, path);
    if (r < 0) return r;
    lfd = rsdi_attr_lock(st, name);
    if (lfd < 0) return lfd;
    /* A corrupt value restarts from the wall clock, never from a small number that a
       cache may still hold. */
    if (rsdi_state_gen_read_path(st, path, &g) < 0) g = rsdi_state_wall_ms();
    g = g == UINT64_MAX ? 1 : g + 1;
    n = RSD_SNPRINTF(buf, sizeof buf, "%llu\n", (unsigned long long)g);
    r = rsdi_state_replace(st, path, buf, (size_t)n, false);
    (void)flock(lfd, LOCK_UN);
    rsdi_state_close_fd(lfd);
    if (r == RSD_OK && out) *out = g;
    return r;
}
/* ==== >>state end ========================================================= */

#endif /* RESIDENCY_HTTP_IMPLEMENTATION */
