/* residency_http.h -- the I/O shell of residency.h: URL parsing, a non-blocking
   HTTP/1.1 client and server over POSIX sockets or Winsock (optional TLS via mbedTLS), and
   the drivers that run the core's reconciler and process pool for real.
   v0.1.0 -- MIT license (see residency.h).

   DO THIS
       #define RESIDENCY_IMPLEMENTATION
       #include "residency_http.h"
   in *one* C or C++ file, before any system header. That one define turns on
   both implementations (residency.h is included from here). Other files include
   "residency_http.h" without the define. Link with nothing but libc; with
   RSD_HTTP_MBEDTLS also -lmbedtls -lmbedx509 -lmbedcrypto; on glibc before 2.34
   also -ldl (the device memory probe's dlopen), unless RSD_NO_DEVMEM.

   CONFIGURATION MACROS
       RESIDENCY_HTTP_IMPLEMENTATION  same as RESIDENCY_IMPLEMENTATION: the shell uses
                                      the core's internals, so both are instantiated
       RSD_HTTP_MBEDTLS               enable https:// through mbedTLS 2.28+
     Feature macros (a program pays only for what it uses; each combination is built
     by the compile matrix):
       RSD_NO_HTTP_SERVER             no HTTP server (rsd_http_server_*): the
                                      declarations stay, the implementation goes
       RSD_NO_PROC                    no process supervisor and no fleet (rsd_procs_*,
                                      rsd_proc_*, rsd_fleet_*); the same as the older
                                      spelling RSD_NO_PROCESS
       RSD_NO_OLLAMA                  no Ollama payloads nor driver (residency.h):
                                      rsd_runtime_ollama() is NULL, and the ensurer
                                      answers an Ollama target with "no ollama driver
                                      in this build", managing nothing
       RSD_NO_LMSTUDIO                no LM Studio payloads nor driver (residency.h),
                                      answered the same way ("no lmstudio driver ...")
       RSD_NO_ETCD                    no etcd coordinator: rsd_etcd_create returns
                                      NULL (and its footprint 0), so an ensurer given a
                                      coordinator (desc.coord, $RESIDENCY_COORD) is
                                      not created; the state directory is used
                                      otherwise
       RSD_NO_DETECT                  the ensurer does not detect runtimes: a request
                                      whose runtime is AUTO (its own and the desc's)
                                      ends with RSD_ERR_NOT_FOUND, "no runtime
                                      detection in this build", sending nothing; the
                                      core's rsd_detect_* stay for a caller of its own
       RSD_NO_DEVMEM                  no device memory probe (rsd_devmem_*): neither
                                      the declarations nor the implementation, so
                                      nothing refers to dlopen / LoadLibrary
       RSD_NO_SERVE_LEASE             a free request (free_bytes) does not try
                                      rsd-serve's own lease first: it goes straight to
                                      the reconcile's free plan (a state-directory
                                      lease), and returning an "rsd-serve:ID" lease is
                                      RSD_ERR_ARG; for programs that never free bytes
                                      on an rsd-serve (about 3 KB of .text)
       RSD_NO_ENSURE_KV               no slot saves around the ensurer's unloads and
                                      loads (rsd_ensurer_desc.kv_slots): an ensurer
                                      whose desc asks for them is not created; for
                                      programs that never ask

   API REFERENCE
   ---- url: URL parsing -------------------------------------------------------
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
       The key of a server (locks, caches, state files) is the core's
       rsd_target_key_normalise, the one key function: "HTTP://LocalHost:080/v1/?x#y"
       -> "http://localhost" for every URL rsd_url_parse accepts.
   ---- httpparse: pure HTTP/1.x head parsers and chunked decoder --------------
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
             other_codings TE names a coding besides chunked ("gzip, chunked"):
                           the framing above still holds, but the body is encoded
                           and nothing in this library decodes it (the server
                           answers 501, the client fails with RSD_ERR_PROTOCOL).
             close         a "close" token in Connection (comma list, any case),
                           or HTTP/1.0 without a "keep-alive" token; also set
                           for a response whose TE does not end in chunked.
           Request only: expect_continue = HTTP/1.1 and "Expect: 100-continue"
           (any case). Host (RFC 9112 3.2): an HTTP/1.1 request without one, any
           request with two, or a value that is not host[:port] (a byte outside
           letters, digits and -._~%!$&'()*+,;=:[]) is RSD_ERR_PROTOCOL; an empty
           value is allowed. Whether a response has a body at all also depends on
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

   ---- net: sockets on POSIX and Windows --------------------------------------
       POSIX sockets; MSG_NOSIGNAL (SO_NOSIGPIPE where that exists), never a
       SIGPIPE handler; poll(), never select(). Windows (_WIN32): Winsock
       2, WSAPoll; each client and server takes a WSAStartup reference in create
       and returns it in destroy (the user never calls it); sockets are
       non-blocking (FIONBIO) and not inherited by children; WSAGetLastError
       codes are mapped to the errno values reported in sys_errno. Include
       windows.h, if at all, after this header or with WIN32_LEAN_AND_MEAN (the
       old winsock.h clashes with winsock2.h). Process supervision (proc,
       fleet) on Windows: see "Windows" in the proc manual. TLS: every connection
       does its I/O through an internal transport (recv/send/close function
       pointers): plain sockets, or mbedTLS with RSD_HTTP_MBEDTLS (below).

   ---- tls: https:// through mbedTLS (RSD_HTTP_MBEDTLS) -----------------------
       Enable: compile the implementation with -DRSD_HTTP_MBEDTLS and link with
       -lmbedtls -lmbedx509 -lmbedcrypto (Debian/Ubuntu: apt-get install
       libmbedtls-dev; mbedTLS 2.28 is what is tested; it needs MBEDTLS_FS_IO,
       MBEDTLS_X509_CRT_PARSE_C, MBEDTLS_SSL_SERVER_NAME_INDICATION and
       MBEDTLS_ENTROPY_C/CTR_DRBG_C, all in the default config). mbedTLS headers
       are included by the implementation only; public declarations carry no
       mbedTLS types. Without the macro an https URL is RSD_ERR_TLS_UNAVAILABLE
       from rsd_http_send / rsd_http_request_sync (plain http is unaffected).
       Desc fields (rsd_http_client_desc, ignored without the macro):
           tls_ca_file               PEM bundle of trusted CAs. NULL = the first
                                     readable system bundle of
                                     /etc/ssl/certs/ca-certificates.crt (Debian),
                                     /etc/pki/tls/certs/ca-bundle.crt (Fedora),
                                     /etc/ssl/ca-bundle.pem (openSUSE),
                                     /etc/ssl/cert.pem (Alpine, macOS, BSD).
                                     An explicit file that does not load makes
                                     create fail (NULL, log TLS_SETUP_FAILED); no
                                     system bundle found is not an error at create,
                                     but every https send is then RSD_ERR_TLS (log
                                     TLS_NO_CA) unless verification is off.
           tls_insecure_skip_verify  no chain, validity or host name check at all
                                     (mbedTLS VERIFY_NONE). Must be set explicitly;
                                     create logs a RSD_LOG_WARN TLS_INSECURE item.
           tls_off                   set nothing up (no CA parsing, no TLS memory):
                                     https = RSD_ERR_TLS_UNAVAILABLE.
       Verification (the default): the chain must end in a CA of the bundle
       (TLS 1.2 minimum; mbedTLS's default suites), and the leaf must name the
       URL's host: a DNS name is sent as SNI and checked by mbedTLS (SAN dNSName,
       wildcards as mbedTLS does them, else CN); an IP literal (https://127.0.0.1,
       https://[::1]) sends no SNI (RFC 6066) and must appear as an iPAddress SAN
       (checked by this library: mbedTLS 2.28 does not match iPAddress names).
       With resolve_fn or getaddrinfo the name checked is still the URL's host,
       never the address it resolved to. No client certificates, no session
       resumption, no ALPN, no renegotiation, no OCSP/CRL.
       Non-blocking: the handshake runs inside rsd_http_client_step after the TCP
       connect; WANT_READ / WANT_WRITE become the POLLIN / POLLOUT that
       rsd_http_client_pollfds reports, and connect_timeout_ms covers TCP connect
       plus handshake (RSD_ERR_TIMEOUT). Decrypted bytes buffered inside mbedTLS
       (invisible to poll) make next_deadline return 0, so a poll loop never stalls
       on them. Keep-alive works over TLS: a connection is reused only for the same
       address, port and URL host name (what SNI and verification used); close sends a
       best-effort close_notify. A peer closing without close_notify ends a
       close-delimited body like plain TCP does (truncation is not detected there;
       Content-Length / chunked bodies are).
       Errors (rsd_http_event): RSD_ERR_TLS_VERIFY = certificate refused,
       ev.tls_verify_flags holds mbedTLS's MBEDTLS_X509_BADCERT_* flags (NOT_TRUSTED
       0x08 unknown CA, CN_MISMATCH 0x04 wrong name, EXPIRED 0x01, ...);
       RSD_ERR_TLS = any other handshake failure (protocol, alert, no shared
       cipher); ev.tls_error is the mbedTLS error code (< 0) in both. Log items
       TLS_VERIFY_FAILED / TLS_HANDSHAKE_FAILED (RSD_LOG_WARN) carry the host, the
       code, the flags and mbedTLS's text; keys, session secrets and request
       headers are never logged.
       Memory: create sets up everything from the desc's allocator (config, RNG,
       CA chain holder, one mbedtls_ssl_context per max_conns socket), but mbedTLS
       allocates internally with its own calloc/free: the CA chain when parsed,
       the record buffers in mbedtls_ssl_setup (at create, about 2 x 16.7 KiB per
       socket with the default MBEDTLS_SSL_MAX_CONTENT_LEN), and per connection
       the SNI host name copy, the handshake state and the peer's certificate
       chain. This library never calls mbedtls_platform_set_calloc_free (it is
       process-global): route mbedTLS's allocations yourself if you need to.
       (Whether mbedTLS allocates while reading/writing an established session is
       not measured here.) Cost with TLS compiled in and not tls_off: parsing the
       system bundle at every create (Debian's 144 certificates: ~14 ms per
       create+destroy at -O2 on the shared 2-core box); set tls_off for clients
       that never use https.

   ---- http client: non-blocking HTTP/1.1 -------------------------------------
       TL;DR, a frame loop (the host owns the clock and the sleep):
           rsd_http_client *c = rsd_http_client_create(NULL);   // zeroed desc = defaults
           rsd_http_request q = {0};
           q.url = "http://127.0.0.1:8080/v1/models";
           q.bearer_token = key;                                // optional; never logged
           rsd_http_req_h h;
           if (rsd_http_send(c, &q, now_ms, &h) < 0) ...        // no I/O yet
           for (;;) {                                           // once per frame
               rsd_pollfd fds[8];
               int n = rsd_http_client_pollfds(c, fds, 8);      // may be 0
               uint64_t dl = rsd_http_client_next_deadline(c);  // 0 = now, RSD_NO_DEADLINE
               poll((struct pollfd *)fds, n, <min(frame budget, dl - now)>);
               rsd_http_client_step_polled(c, now = rsd_now_ms(), fds, n);
               rsd_http_event ev;
               while (rsd_http_next_event(c, &ev))              // views valid until next call
                   if (ev.result == RSD_OK) use(ev.status, ev.body);
                   else log(rsd_result_str(ev.result), ev.sys_errno);
           }
           rsd_http_client_destroy(c);
       and a blocking call (a CLI, a test):
           rsd_http_event resp;
           int r = rsd_http_request_sync(c, &q, &resp);          // resolves names too
           if (r == RSD_OK && resp.status == 200) fwrite(resp.body.ptr, 1, resp.body.len, stdout);

       rsd_pollfd {int fd; short events; short revents;} has the layout of struct
       pollfd (checked at compile time), RSD_POLLIN/RSD_POLLOUT equal POLLIN/POLLOUT:
       cast the array for poll(). On Windows it is {uintptr_t fd (a SOCKET); short
       events; short revents;}, the layout of WSAPOLLFD, with RSD_POLLIN/RSD_POLLOUT
       equal to POLLRDNORM/POLLWRNORM: cast the array for WSAPoll(). rsd_poll(fds,
       n, timeout_ms) is either one (and, with n 0, a plain sleep, which WSAPoll
       refuses). All times are absolute ms on the caller's clock (rsd_now_ms() is
       CLOCK_MONOTONIC, QueryPerformanceCounter on Windows; tests pass a fake clock). Handles
       (rsd_http_req_h) are {id}: 0 = invalid, slot in the low 12 bits, a generation
       above (HANDLES in residency.h), so a stale handle is detected, never confused
       with a new request.

       rsd_http_client *rsd_http_client_create(const rsd_http_client_desc *desc)
           Allocates everything now (5 blocks: object, connection table, request
           table, poll array, one buffer block of max_requests x (max_request_bytes +
           max_header_bytes + max_body_bytes), by default 8 x 1.08 MiB (tests/test_sizes_shell.c), untouched
           pages stay virtual). NULL on a bad desc or no memory (logged:
           HTTP_DESC_INVALID / ALLOC_FAILED). Desc fields, 0 = default:
             max_requests 8 (slots: in flight + completed but not yet pulled),
             max_conns 8 (sockets: in flight + kept alive; at most 4095),
             max_header_bytes 16 KiB, max_body_bytes 1 MiB (per slot),
             max_request_bytes 64 KiB (request head + body), connect_timeout_ms
             5000, total_timeout_ms 60000, idle_timeout_ms 30000 (a kept-alive
             socket unused this long is closed by step; a shorter Keep-Alive:
             timeout= from the server wins, see Keep-alive below), no_keepalive,
             resolve_fn/resolve_user (see names below), allocator, logger.
       void rsd_http_client_destroy(rsd_http_client *c)
           Closes every socket (pending requests vanish without events), frees all.
       int rsd_http_send(c, const rsd_http_request *req, uint64_t now_ms, rsd_http_req_h *out)
           Validates and queues; does no I/O (step connects and writes). Copies
           everything it needs: method (NULL = GET, a token of at most 16 bytes),
           url (http://host[:port]/path), bearer_token (Authorization: Bearer),
           content_type, extra headers (name must be a token, values without
           CR/LF/controls: header injection is RSD_ERR_ARG), body (copied; a body,
           or POST/PUT/PATCH, always sends Content-Length). The request line,
           Host, headers and body are built into one buffer and go out in ONE
           write on a TCP_NODELAY socket (no Nagle x delayed-ACK stall, perf.md).
           Per-request connect_timeout_ms / total_timeout_ms (0 = client default,
           RSD_TIMEOUT_NONE = never) start at now_ms. retry_any_method: resend a
           POST too (see Stale socket below). quiet: its failure is not logged
           (the event says it), for a question whose failure the caller expects,
           such as one to a process it is stopping.
           Where the body goes: by default the slot's own buffer (max_body_bytes);
           body_buf/body_cap = the caller's buffer (must live until the event);
           on_body(user, data, len) = streamed from inside step, nothing kept;
           on_sse(user, event) = parsed as text/event-stream (half the slot buffer
           receives, half collects an event's data), nothing kept. Streamed bodies
           are limited by max_stream_bytes (0 = unlimited) only.
           Errors: RSD_ERR_ARG, RSD_ERR_URL, RSD_ERR_TLS_UNAVAILABLE (https without
           RSD_HTTP_MBEDTLS or with tls_off), RSD_ERR_TLS (https, no CA bundle),
           RSD_ERR_RESOLVE (a name and no resolve_fn), RSD_ERR_TOO_LARGE (request
           over max_request_bytes), RSD_ERR_CAPACITY (every slot busy; logged).
       int rsd_http_client_step(c, uint64_t now_ms)
       int rsd_http_client_step_polled(c, uint64_t now_ms, const rsd_pollfd *fds, int nfds)
           Never blocks. Starts queued requests (a kept-alive socket to the same
           address first, else a new non-blocking connect, else the longest-idle
           kept-alive socket is closed to make room, else it stays queued),
           finishes connects (SO_ERROR), writes, reads, parses, applies timeouts
           (after I/O, so bytes that arrived in time count), closes expired idle
           sockets. step_polled skips sockets listed in fds with revents == 0
           (the host just polled them); step tries every socket (one poll(0) for
           a connecting one, a recv that may say EAGAIN for a reading one).
           One step reads at most 1 MiB for each request (and a single receive
           once the request's deadline has passed), so a peer that streams
           faster than on_body / on_sse consume cannot hold a step: the rest
           waits in the socket (poll reports it) for the next step, and a
           deadline still fires at the first step past it.
           Returns the number of completed events waiting (>= 0), RSD_ERR_ARG.
       bool rsd_http_next_event(c, rsd_http_event *ev)
           Oldest completion first. ev: req, result (RSD_OK whatever the HTTP
           status, or an error), sys_errno, status (0 if no head arrived), headers,
           num_headers, body (empty when streamed or on error), body_bytes (decoded
           bytes received, streamed ones too), reused, retried, tls_error and
           tls_verify_flags (https failures, see TLS below), user. Every
           rsd_http_send that returned RSD_OK produces exactly one event (also on
           timeout, error or cancel). The views stay valid until the next call on c.
       int rsd_http_client_pollfds(c, rsd_pollfd *out, int cap)
           One entry per socket step is waiting on (POLLOUT while connecting or
           sending, POLLIN while reading; during a TLS handshake whichever mbedTLS
           waits for); kept-alive idle sockets are not listed.
           Returns how many it wants (only cap are written when that is more).
       uint64_t rsd_http_client_next_deadline(c)
           Earliest connect/total deadline or idle expiry; 0 when a completion
           waits to be pulled or a queued request can start now; RSD_NO_DEADLINE
           when only socket readiness matters.
       int rsd_http_cancel(c, rsd_http_req_h h)
           Closes the request's socket (it cannot be reused mid-request); its event
           reports RSD_ERR_CANCELLED. RSD_ERR_NOT_FOUND for a stale or completed
           handle.
       int rsd_http_pause(c, rsd_http_req_h h, bool paused)
           Stops / resumes reading the response (its socket leaves / rejoins
           pollfds): backpressure for streamed bodies, e.g. a proxy pausing the
           upstream while rsd_http_stream_room() downstream is low. It may be
           called from inside on_body / on_sse and takes effect when that
           callback returns: no further on_body / on_sse call and no read for
           the request (not even of bytes already in the socket buffer) until
           paused = false, so a proxy holds at most the one piece it could not
           forward (one receive: at most max_body_bytes; max_body_bytes / 2
           with on_sse). With on_sse, events already received behind the one
           that paused are kept in the slot and delivered first after the
           resume (next_deadline says 0 then); the request completes only
           after them. Resuming needs no wakeup of its own: the socket rejoins
           pollfds and the next step goes on. Timeouts keep running (use
           RSD_TIMEOUT_NONE for long streams). RSD_OK, RSD_ERR_NOT_FOUND.
       int rsd_http_client_query_req(c, rsd_http_req_h h, rsd_http_req_info *out)
           The response head as soon as it has arrived, before the body ends:
           for a proxy that must send status, Content-Type and framing on before
           the first body byte (it works from inside on_body, which is called
           only after the head). out: status, minor_version, reason, headers,
           num_headers, framing (content_length -1 when absent, chunked, close:
           as announced), bodyless (HEAD/1xx/204/304), done (the request has
           completed; its event is waiting), paused, body_bytes (decoded so far).
           RSD_OK; RSD_PENDING while queued, connecting, sending or waiting for
           the head (interim 1xx heads are skipped, never reported); the
           request's error (< 0) when it completed without a head; RSD_ERR_NOT_FOUND
           for a stale handle (its event was pulled and released). The views
           point into the request's slot and stay valid until its event has
           been pulled and released, like the event's own views.
       int rsd_http_request_sync(c, const rsd_http_request *req, rsd_http_event *resp)
           The blocking wrapper, nothing but the loop above on rsd_now_ms(): send,
           step, then poll(pollfds, next_deadline) + step_polled until this
           request's event, which it takes (other requests' events stay queued for
           rsd_http_next_event). A host name (not an IP literal, not "localhost")
           is resolved with getaddrinfo here, first address. Returns resp->result;
           resp's views are valid until the next call on c.
       uint64_t rsd_now_ms(void)          CLOCK_MONOTONIC in ms.
       void rsd_http_client_query(c, rsd_http_client_info *out)
           The client's totals: requests, connects, reuses, retries, timeouts,
           errors, stale.
       int rsd_http_client_close_idle(c, const char *host, uint16_t port)
           Closes the kept-alive idle sockets to host:port (a numeric address, or
           "localhost") now; returns how many, or RSD_ERR_ARG / RSD_ERR_RESOLVE.
           Requests in flight keep theirs. For a host about to stop a server it
           talks to: a server may wait for its idle connections before it exits
           (llama-server's HTTP threads look at theirs every 10 ms), while a closed
           one ends at once.

       Names. rsd_http_send never resolves: IPv4/IPv6 literals and "localhost"
       (= 127.0.0.1) go straight to connect(); any other name goes through
       desc.resolve_fn(user, host, out, cap) (write a numeric address, return 0)
       or fails with RSD_ERR_RESOLVE. Only rsd_http_request_sync calls
       getaddrinfo, which blocks.

       Request state machine (one slot; one request per socket, no pipelining):
           FREE -send-> QUEUED -step-> CONNECTING -> SENDING -> HEAD -> BODY -> DONE
                                 \---(kept-alive socket)--^
           DONE -next_event-> DELIVERED (views live) -any later call on c-> FREE
           Any active state -> DONE on error, timeout or cancel.
           Timeouts: QUEUED and CONNECTING count against connect_timeout_ms (from
           send) and total_timeout_ms; later states against total_timeout_ms.
           A request that fires at deadline D completes at the first step with
           now_ms >= D, exactly, whatever the peer does (a peer dribbling one byte
           at a time cannot extend it).
           Keep-alive: after a complete response the socket returns to the idle
           set unless the response said Connection: close or was HTTP/1.0
           without keep-alive, the body ran to connection close, extra bytes
           followed the body, or no_keepalive is set. It stays there for
           idle_timeout_ms, or less when the response announced the server's own
           limit ("Keep-Alive: timeout=N", as llama-server's 5 s): it is closed 1 s
           before the server would close it (at N/2 when N < 2 s; N = 0: not kept).
           Before an idle socket is reused it is checked without blocking (one
           MSG_PEEK recv): one the peer closed, reset or wrote to while idle is
           closed and another (or a fresh connect) is used (info.stale). Stale
           socket: when a kept-alive socket still fails (EOF, ECONNRESET, EPIPE)
           before any response byte -- the peer closed it as the request went out
           -- an idempotent request (GET, HEAD, PUT, DELETE, OPTIONS) is retried
           once, transparently, on a fresh connection (log item HTTP_STALE_RETRY,
           ev.retried); a POST/PATCH fails with RSD_ERR_CLOSED (it may have run)
           unless it set retry_any_method (a proxy whose requests are safe to
           resend: a server that drops an idle connection has not read it).
           Interim 1xx responses are skipped; 101 is RSD_ERR_PROTOCOL.

       Limits and errors (each is an error, never a silent truncation):
           head over max_header_bytes, or over RSD_HTTP_MAX_HEADERS fields
                                         RSD_ERR_HEADERS_TOO_LARGE
           Content-Length over the body buffer, or the decoded chunked / read-to-
           close body outgrowing it, or a stream over max_stream_bytes
                                         RSD_ERR_BODY_TOO_LARGE (status is set)
           connect refused / unreachable RSD_ERR_CONNECT (sys_errno = ECONNREFUSED...)
           deadline passed               RSD_ERR_TIMEOUT
           peer closed mid-response      RSD_ERR_CLOSED (body_bytes = what came)
           other socket error            RSD_ERR_IO (sys_errno)
           malformed response / chunking, or a transfer coding other than
           chunked (gzip, ...: the client never asks for one)
                                         RSD_ERR_PROTOCOL
           cancelled                     RSD_ERR_CANCELLED
           Logging: only the request line (method and path, with its query) and
           result names appear in log lines; header values, and so the bearer
           token, never do (keep secrets out of URLs).

       SSE line reader (pure; the client's on_sse uses it, hosts may too):
       void rsd_sse_init(rsd_sse_reader *r, char *buf, size_t cap)
       int rsd_sse_feed(rsd_sse_reader *r, const char *p, size_t n, size_t *used, rsd_sse_event *ev)
           Feed any split of a text/event-stream. RSD_OK = one event in *ev
           (event, data with lines joined by '\n', last id; views valid until the
           next feed), call again with p + *used; RSD_PENDING = all consumed.
           Lines end in \n, \r\n or \r; ':' lines are comments; "retry" and
           unknown fields are ignored; a blank line dispatches when at least one
           data line was seen (a bare "data" line = empty data). Data over cap:
           RSD_ERR_TOO_LARGE for that event, then the reader goes on.
           `event:`/`id:` values are kept up to RSD_SSE_MAX_NAME (64) bytes.
           The llama.cpp router's /models/sse sends one `data: {json}` per event,
           no `event:` line; OpenAI streaming sends `data: {json}` and a final
           `data: [DONE]`.
   ---- http server: small non-blocking HTTP/1.1 server ------------------------
       For simulators, tests, a serve example and a pool front-end. Same shape as
       the client: step(now)/pollfds/next_deadline, events pulled, no callbacks.
           rsd_http_server_desc sd = {0};                       // 127.0.0.1, port 0
           rsd_http_server *s = rsd_http_server_create(&sd);
           printf("listening on %u\n", rsd_http_server_port(s));
           for (;;) {
               rsd_pollfd fds[64];
               int n = rsd_http_server_pollfds(s, fds, 64);
               poll((struct pollfd *)fds, n, <until rsd_http_server_next_deadline(s)>);
               rsd_http_server_step_polled(s, rsd_now_ms(), fds, n);
               rsd_http_server_event ev;
               while (rsd_http_server_next_event(s, &ev)) {
                   if (ev.type == RSD_HTTP_SEV_CLOSED) { forget(ev.req); continue; }
                   if (rsd_str_eq_c(ev.head->target, "/health"))
                       rsd_http_respond(s, ev.req, 200, &ctype_json, 1, "{\"status\":\"ok\"}", 15);
                   else
                       hold(ev.req);   // answer on a later step: rsd_http_respond(s, h, ...)
               }
           }

       rsd_http_server *rsd_http_server_create(const rsd_http_server_desc *desc)
           Binds bind_host (numeric; NULL = "127.0.0.1") : port (0 = ephemeral,
           read it back with rsd_http_server_port), listens (backlog 128,
           SO_REUSEADDR, O_NONBLOCK|O_CLOEXEC), allocates 3 blocks: object,
           connection table, one buffer block of max_conns x (max_header_bytes +
           max_body_bytes + 1 KiB + max_response_bytes). NULL on failure, logged
           (HTTP_DESC_INVALID, HTTP_LISTEN_FAILED with errno, ALLOC_FAILED).
           Defaults: max_conns 32 (more clients wait in the backlog, or take
           the place of an idle one: below), max_header_bytes 8 KiB,
           max_body_bytes 64 KiB, max_response_bytes 256 KiB (the per-connection
           send buffer: the largest Content-Length response; stream bigger
           ones), idle_timeout_ms 30000 (idle keep-alive connection closed),
           request_timeout_ms 10000 (a started request must be complete by
           then, else 408 and close), first_byte_timeout_ms 5000 (a new
           connection that sends nothing is closed; never later than
           idle_timeout_ms), head_timeout_ms 5000 (from a request's first byte
           to the end of its head, else 408 and close), body_timeout_ms 5000
           (the longest wait for the next byte of a body, else 408 and close);
           the head and body deadlines are never later than request_timeout_ms.
           RSD_TIMEOUT_NONE in the last three leaves only the idle / request
           timeout.
       void rsd_http_server_destroy(s)     closes every socket, frees everything.
       uint16_t rsd_http_server_port(s)
       int rsd_http_server_step(s, now_ms)
       int rsd_http_server_step_polled(s, now_ms, const rsd_pollfd *fds, int nfds)
           Accepts (while a connection slot is free), flushes pending output, reads,
           parses (a Content-Length or chunked body is read completely first), and
           expires. Returns the number of events waiting. With many connections use
           step_polled: plain step tries a recv on every connection.
           Connection exhaustion: when every slot is taken and another client
           waits, one connection is closed to take it (log item
           HTTP_CONN_EVICTED, info.evictions): a closing one first, then the
           one waiting longest for its first byte, its next keep-alive request
           or the rest of its head (idle, silent, slowloris), then the one whose
           body has gone longest without a byte (a slow upload). Not one whose
           wait began in this same ms (just accepted, just answered, a body byte
           just read): it becomes a candidate in the next ms, and until then the
           listener stays out of pollfds and next_deadline is the next ms, so
           the host neither spins nor oversleeps. A connection whose request is
           complete (event queued, request held, answer or stream being sent)
           is never dropped: when all are such, new clients wait in the backlog
           until one is answered.
           What a client can still do: the limits are per connection (a
           deadline for each stage, a size for each buffer) and per table
           (max_conns). An attacker who opens more sockets than max_conns only
           makes them take each other's places; one who keeps max_conns
           requests complete and unanswered (the host holds them) fills the
           table until the host answers; any one connection can hold its slot
           for at most first_byte_timeout_ms, then head_timeout_ms, then
           body_timeout_ms per byte up to request_timeout_ms, or
           idle_timeout_ms between keep-alive requests, and less when the table
           is full and others wait.
           Out of descriptors (accept fails with EMFILE/ENFILE or any error not
           about one connection): the listener leaves pollfds and is not tried
           until one of the server's connections closes or
           RSD_HTTP_SERVER_ACCEPT_BACKOFF_MS (1000) pass (next_deadline says
           when), logged once per run of failures (HTTP_ACCEPT_FAILED,
           info.accept_pauses): a full descriptor table does not spin the host.
       bool rsd_http_server_next_event(s, rsd_http_server_event *ev)
           RSD_HTTP_SEV_REQUEST: ev.req (handle), ev.head (method, target,
           headers, framing), ev.body (decoded). They stay valid until the request
           is answered, however many steps later.
           RSD_HTTP_SEV_CLOSED: the client of a request you hold (pulled, not yet
           answered, or streaming) went away; the handle is dead from now on
           (calls with it return RSD_ERR_CLOSED). A client that leaves before its
           REQUEST event was pulled is dropped silently.
       int rsd_http_server_query_req(s, rsd_http_sreq_h h, rsd_http_server_event *out)
           Re-reads a held request (RSD_OK), RSD_ERR_CLOSED, RSD_ERR_NOT_FOUND.
       int rsd_http_respond(s, h, int status, const rsd_http_header *headers, size_t n,
                            const void *body, size_t len)
           Content-Length response; headers are extra lines (Content-Type ...).
           Written to the socket at once as far as it takes; step sends the rest.
           The connection then serves its next request (pipelined bytes already
           read are parsed on the next step), or closes if the request said
           Connection: close / HTTP/1.0. A HEAD request gets the head only.
           RSD_ERR_TOO_LARGE (does not fit max_response_bytes; nothing sent),
           RSD_ERR_ARG (status outside 100..999, header with CR/LF), RSD_ERR_STATE
           (the request is streaming), RSD_ERR_CLOSED, RSD_ERR_NOT_FOUND (stale).
       int rsd_http_stream_begin(s, h, int status, headers, n)
       int rsd_http_stream_write(s, h, const void *data, size_t len)    one chunk
       int rsd_http_stream_sse(s, h, const char *event, const char *data, size_t len)
           one SSE event as one chunk: "event: <event>\n" when event is non-NULL,
           "data: <line>\n" per line of data, then "\n"
       int rsd_http_stream_end(s, h)                                   last chunk
       int rsd_http_stream_end_close(s, h)
           The last chunk, then the connection closes once it is out (a stream that
           ended in an error: rsd-serve after a child died mid-stream).
       int rsd_http_stream_begin_raw(s, h, status, headers, n, int64_t content_length)
           The same without chunk framing: content_length >= 0 is announced and the
           writes are the body as is; < 0 = the body ends with the connection
           (Connection: close; stream_end closes). For simulators: RSIM_STREAM
           close-delimited bodies, and with rsd_http_abort a mid-body drop.
       int rsd_http_abort(s, h)
           Closes the connection of a held or streaming request now (queued bytes
           go out first if the socket takes them). The handle is dead afterwards
           (RSD_ERR_CLOSED). For "hang up" and truncation failure injection.
       size_t rsd_http_stream_room(s, h)    bytes a write can take now
           A chunked response written over as many steps as you like (add
           Content-Type: text/event-stream for SSE). When the send buffer is full,
           write returns RSD_ERR_CAPACITY: step, then retry. RSD_ERR_CLOSED once
           the client is gone (you also get a SEV_CLOSED event).
       int rsd_http_server_pollfds(s, out, cap)   / uint64_t rsd_http_server_next_deadline(s)
           Like the client's: the listening socket while a slot is free or one
           can be freed for a new client now (and accept is not paused), every
           connection (POLLIN while its receive buffer has room, POLLOUT while
           output is pending). next_deadline: 0 when pipelined bytes wait to be
           parsed, else the earliest first-byte/head/body/idle/request timeout,
           the end of an accept pause, or the next ms when the table is full and
           a connection becomes evictable then.
       void rsd_http_server_query(s, rsd_http_server_info *out)
           The server's totals: accepts, requests, responses, bad_requests,
           closes, evictions, accept_pauses.

       Connection states: READ (waiting for a head/body) -> PENDING (event queued /
       held by you) -> [STREAMING] -> answered -> READ (keep-alive) or CLOSING;
       any state -> closed on EOF/error (SEV_CLOSED if you hold its request).
       One request per connection at a time: pipelined requests wait in the
       receive buffer until the current one is answered. A client that half-closes
       (shutdown(SHUT_WR)) while its request is held counts as gone.

       Bad clients are answered and closed inside step without an event, and
       without disturbing other connections:
           malformed request line / header / chunking, no Host in HTTP/1.1,
           two Host fields, a bad Host value             400 Bad Request
           Transfer-Encoding with a coding besides chunked (gzip)   501
           Content-Length or chunked body over max_body_bytes   413
           head over max_header_bytes or RSD_HTTP_MAX_HEADERS fields   431
           head not complete within head_timeout_ms, no body byte for
           body_timeout_ms, or request not within request_timeout_ms   408
           (log item HTTP_BAD_REQUEST; info.bad_requests). Expect: 100-continue
           gets "100 Continue" before the body is read.

       Memory (client and server): every buffer comes from the desc's allocator
       in create; send, step, respond and the streams never allocate (a
       steady-state keep-alive request is 0 allocations: tests count it).

   ---- proc: child-process supervision ----------------------------------------
   Runs model servers (llama-server by default) as child processes for the pool:
   builds argv from a template, picks a free loopback port, starts the child,
   drains its stdout+stderr into a fixed ring, notices its exit, stops it with
   SIGTERM then SIGKILL. Non-blocking: nothing waits except a spawn itself (the
   calling thread pauses until the child has exec'd, ~0.5-2 ms) and
   rsd_procs_destroy (bounded). Compiled out by RSD_NO_PROCESS.

   Frame loop:
       rsd_procs *p = rsd_procs_create(&desc);             (the only allocation)
       rsd_proc_h h;  rsd_procs_spawn(p, &spec, now, &h);     (STARTING)
       each frame / after poll():
           rsd_procs_step(p, now);           (drain, reap, timers: events waiting)
           while (rsd_procs_next_event(p, &ev)) switch (ev.kind) {
           case RSD_PROC_EV_PROBE:   send GET http://127.0.0.1:<port>/health;
                                     200 -> rsd_procs_mark_ready(p, ev.proc, now)
           case RSD_PROC_EV_EXITED:  crashed / early exit: quote rsd_procs_tail()
           case RSD_PROC_EV_STOPPED: gone after a stop; rsd_procs_forget(p, ev.proc)
           ... }
           poll() the descriptors from rsd_procs_pollfds (POLLIN) until
           rsd_procs_next_deadline(p).
       rsd_procs_stop(p, h, now);  ... STOPPED ...  rsd_procs_forget(p, h);
       rsd_procs_destroy(p);       (SIGKILLs and reaps whatever is left)

   Mapping to the pool (residency.h's pool section): action SPAWN -> rsd_procs_spawn
   (RSD_ERR_SPAWN: rsd_pool_on_started(ok=false) then on_exited); PROBE + /health
   200 -> mark_ready + rsd_pool_on_started(ok=true); START_TIMEOUT ->
   on_started(ok=false); action STOP -> rsd_procs_stop; EXITED or STOPPED ->
   rsd_pool_on_exited (the slot is freed on any failure or crash) and
   rsd_procs_forget. rsd_pool_set_pid(info.pid) for rsd_pool_query.

   States (rsd_proc_state):
       spawn ok --> STARTING --mark_ready--> READY
       spawn failed --> FAILED                          (SPAWN_FAILED queued)
       STARTING/READY --stop--> STOPPING --term_grace_ms--> KILLING (SIGKILL)
       STARTING --start deadline--> START_TIMEOUT, then as stop  (timed_out)
       STARTING/READY --exits--> EXITED                 (event EXITED)
       STOPPING/KILLING --exits--> EXITED               (event STOPPED)
       KILLING --kill_wait_ms, not reaped--> STUCK notice, stays KILLING
       EXITED/FAILED --rsd_procs_forget--> FREE        (handle goes stale)
       rsd_procs_kill: STARTING/READY/STOPPING --> KILLING at once.
   Each process yields exactly one terminal event: SPAWN_FAILED, EXITED or
   STOPPED. An exit while STOPPING/KILLING or after a start timeout is STOPPED,
   any other exit is EXITED (.was_ready says whether it was serving: a crash).

   int rsd_procs_spawn(p, spec, now_ms, &h)
       RSD_OK: running, STARTING, h valid. RSD_ERR_SPAWN: h valid, state FAILED,
       SPAWN_FAILED queued right away with .err = errno (ENOENT for a missing
       binary, EACCES, EAGAIN, EMFILE...), nothing left to reap (no wait). On
       Windows rsd_proc_info also names the call that failed and its own code
       (.os_call, .os_err: GetLastError(); .err is EIO for a code without an
       errno value), and the log line and the fleet's reason quote both.
       Other <0 (no process, h = 0): RSD_ERR_ARG, RSD_ERR_CAPACITY (no free slot,
       argv/env over the limits), RSD_ERR_PROC_TEMPLATE, RSD_ERR_PROC_PORT.
       Steps: port (spec.port, else bind 127.0.0.1:0, read it back, close;
       a port another live child of ours holds is skipped), argv expansion, the
       environment, PATH lookup of a bare exe name (in the child's PATH when
       spec.env sets one), then the launch. The child gets: stdin /dev/null,
       stdout and stderr into one pipe (so the ring keeps their order), every
       other descriptor closed (the host's descriptors without O_CLOEXEC too), its
       own process group, default signal dispositions, an empty signal mask, and
       on Linux PR_SET_PDEATHSIG = SIGKILL (unless desc.survive_parent).
   Templates: spec.args is argv after argv[0] and spec.exe_args (verbatim words
       such as the subcommand of the unified `llama serve` binary; NULL = none)
       (spec.args NULL = rsd_proc_llama_args():
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
   Checking before starting: rsd_procs_check(p, spec, why, cap) tells what a spawn
       would fail on, without starting anything or taking a port: the template
       expands (and fits arg_bytes), the environment fits, the program is found
       (PATH searched as the spawn does, relative paths from spec.cwd) and is an
       executable file, and with the default llama-server template (spec.args
       NULL) the model file is a readable file. RSD_OK, or RSD_ERR_SPAWN /
       RSD_ERR_PROC_TEMPLATE / RSD_ERR_CAPACITY with the reason in why ("cannot
       run /opt/llama-server: No such file or directory"). A check that passes
       does not promise a start: the model may still fail to load.
   spec.env: "NAME=value" sets or overrides, "NAME" removes; the rest is inherited.
   spec.cwd: the child's working directory (a relative exe with '/' is
       resolved there). spec.start_deadline_ms overrides desc's per process.

   Readiness: rsd_procs_step emits PROBE events while STARTING: the
   first probe_first_ms (10) after the spawn, then the interval doubles up to
   probe_max_ms (500): +10, +20, +40 ... +500, +500, never past the start
   deadline. At most one PROBE is pending per process (an unpulled one is not
   repeated), so a host that ignores them loses nothing. The host sends
   GET /health and: 200 -> rsd_procs_mark_ready; 503 (loading) or connection
   refused -> wait for the next PROBE; an exit ends the wait at once (EXITED
   arrives from step, with the status and the ring). No READY within the start
   deadline (default 300 s) -> START_TIMEOUT, SIGTERM, later STOPPED(timed_out).

   Stop: SIGTERM to the child's process group (a shell wrapper's own
   children too), SIGKILL to the group at now + term_grace_ms (default 10 s), then
   the end of the whole group is awaited: STOPPED comes only once waitpid has the
   child and no process of its group is left, so the port and VRAM are free when
   it arrives (a wrapper that dies of the SIGTERM while its server shuts down, or
   ignores it, does not end the stop early). If a SIGKILLed child is not reaped
   within kill_wait_ms (a process in uninterruptible sleep), STUCK is emitted and
   reaping continues; members of its group that outlive SIGKILL by kill_wait_ms
   are logged and left behind. A child that exits by itself while its group lives
   on (a wrapper's server) takes the group with it: SIGKILL to the rest, EXITED once
   it is gone. Signals go to a pid only while it is not reaped, and to the group
   only while a member exists (the kernel keeps a group's id from being reused
   until its last member is gone); a process that leaves the group (setsid,
   setpgid) is not followed.

   Reaping: waitpid(-group, WNOHANG) and waitpid(pid, WNOHANG) per child, never
   waitpid(-1) (the host's other children are not ours); no SIGCHLD handler is
   installed. A host that is a child subreaper (Linux PR_SET_CHILD_SUBREAPER, as
   rsd-serve) gets a wrapper's orphans re-parented to it; those of the group are
   reaped here too, so the last member of a group is always reaped by us. Exits are noticed via
   a pidfd (Linux 5.3+, in rsd_procs_pollfds) or, without one, by polling: every
   RSD_PROC_REAP_POLL_MS (1 s), or 1, 2, 4 ... ms once the output pipe closed.
   If the host sets SIGCHLD to SIG_IGN the kernel reaps for us: the exit is then
   reported with exit_code -1 and term_signal 0 (status unknown).

   Output: the pipe is non-blocking and drained at every step (up to
   RSD_PROC_DRAIN_STEP_BYTES per process), so a chatty child never blocks on a
   full pipe for longer than the host's step interval. The ring keeps the last
   desc.ring_bytes (default 16 KiB). rsd_procs_tail(p, h, n, buf, cap) gives the
   last n lines (0 = all), starting at a line boundary, control bytes as '?',
   cut from the front to fit cap, every value rsd_arg_redact hides in the
   command line (an --api-key VALUE the child echoes) replaced by ***; valid
   until rsd_procs_forget, so error
   messages can quote it after EXITED. desc.log_output forwards every line to the
   logger (RSD_LOG_DEBUG, item PROC_OUTPUT, "<name>[<pid>]: <line>", lines cut at
   RSD_PROC_LINE_MAX). rsd_procs_command quotes the expanded command line, with the
   value of every secret flag (--api-key, --hf-token, ...) and URL passwords shown as
   *** (rsd_arg_redact, residency.h); it is what fleet messages quote.

   Other calls: rsd_procs_query_proc(p, h, &info) (one process: pid, port, state,
   uptime up to the supervisor's last now, exit status, output counts),
   rsd_procs_query(p, &info) (the supervisor: max_procs, live processes by
   state, exited ones not forgotten, events waiting and dropped),
   rsd_procs_live (handles of running processes), rsd_procs_next_deadline,
   rsd_procs_kill (SIGKILL now), rsd_procs_forget (EXITED/FAILED -> FREE).
   Events: a queue of 4 x max_procs; if the host never pulls them the oldest are
   dropped, so pull them every step.

   Spawn methods (desc.spawn; measured with bench/proc.mk, see the report):
       VFORK  Linux default: vfork + prctl(PR_SET_PDEATHSIG) + execve. The child
              borrows the parent's memory until exec, so the cost does not grow
              with the host's heap (fork of a 256 MiB-heap parent took ~63-70 ms
              here; vfork and posix_spawn ~2 ms). The calling thread is paused
              until exec; all signals are blocked meanwhile. Exec errors come
              back through an O_CLOEXEC pipe, not the shared memory, so they are
              seen where vfork is emulated as fork (qemu-user).
       FORK   fork + the same child code and pipe. Forced everywhere by
              RSD_SPAWN_VIA_FORK.
       POSIX  posix_spawn (POSIX_SPAWN_SETPGROUP, SETSIGMASK, SETSIGDEF,
              addclosefrom_np on glibc 2.34+, addchdir_np on glibc 2.29+, else
              the fork path when a cwd is given). Cannot set PDEATHSIG, so on
              Linux it needs desc.survive_parent (create fails otherwise);
              default elsewhere.
   Children die with their parent: Linux only (PR_SET_PDEATHSIG, SIGKILL). The
   kernel sends it when the *thread* that spawned the child exits, so spawn from
   a thread that lives as long as the supervisor. Only the direct child gets it:
   when the host dies without cleaning up (kill -9, a crash), a wrapper script's
   children survive it (they are re-parented to init or the nearest subreaper and
   keep their ports). Write wrappers as `sh -c "exec llama-server ..."`: exec makes
   the server itself the direct child, and PDEATHSIG survives exec. Elsewhere, and
   with survive_parent, children outlive a crashed host (llama-server does not
   watch a pipe). A graceful end (rsd_procs_stop, rsd_procs_destroy) reaches the
   whole group everywhere.

   Limits: RSD_PROCS_MAX 64 processes (default 16), RSD_PROC_MAX_ARGS 128,
   desc.arg_bytes (default 8192, max 1 MiB) of expanded command per process,
   RSD_PROC_MAX_ENV 1024 environment entries, RSD_PROC_MAX_VARS 16,
   RSD_PROC_RING_MIN 256 .. RSD_PROC_RING_MAX 16 MiB, RSD_PROC_PATH_MAX 4096,
   RSD_PROC_NAME_MAX 64. Memory: one block of about max_procs x (ring_bytes +
   arg_bytes + 1 KiB) + 14 KiB (defaults: about 410 KB); on Windows about max_procs x
   (ring_bytes + arg_bytes + 2 KiB) + 160 KiB (the UTF-16 command line, environment block
   and paths; defaults: about 590 KB). tests/test_sizes_shell.c measures both.
   Descriptors per running child: 2 (pipe, pidfd).
   A residual race: the port is free when chosen but not held; another process
   may bind it before the child does (llama-server then exits 1 within ~10 ms:
   EXITED with "couldn't bind" in the tail; spawn again).
   Errors: RSD_ERR_SPAWN, RSD_ERR_PROC_TEMPLATE, RSD_ERR_PROC_PORT,
   RSD_ERR_PROC_STALE, RSD_ERR_STATE, RSD_ERR_CAPACITY, RSD_ERR_ARG.
   Threading: one rsd_procs per thread; not thread-safe.

   Windows (_WIN32; Windows 10 and later, tested under wine): the same supervisor,
   states and events; only these primitives differ.
       Launch   CreateProcessW, no shell: argv[0] and every argument are quoted so that
                the Microsoft C runtime's parser (CommandLineToArgvW, the MSVCRT/UCRT
                startup) gives each back unchanged: an argument without blanks or '"'
                as it is, else inside "..." with each '"' as \" and the backslashes
                before a '"' or the closing quote doubled. Strings are UTF-8, passed as
                UTF-16 (a child reading GetCommandLineW gets them exactly; one using an
                ANSI main() gets them through its code page). The command line is at
                most 32767 UTF-16 units (E2BIG, SPAWN_FAILED). A bare exe name is looked
                up in PATH (';'-separated; ".exe" is tried when the name has no
                extension; the current directory only when PATH lists it); a path
                without an extension gets ".exe" when only that file exists; a relative
                path is taken from spec.cwd. spec.env is applied to our environment
                (names compared case-insensitively) into a block of at most 32768
                UTF-16 units (RSD_ERR_CAPACITY). desc.spawn is ignored.
       Handles  stdin is NUL, stdout and stderr one anonymous pipe (64 KiB buffer);
                only those two handles are inherited (PROC_THREAD_ATTRIBUTE_HANDLE_LIST).
                The child starts suspended, is put in a job object of its own, then
                resumed, so whatever it starts is in the job too: the job is the
                process group. Without survive_parent the job has
                JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE: when the host ends in any way (a
                crash, TerminateProcess) the system closes its handles and every
                process of every job dies with it. With no console of the host's own
                the child gets CREATE_NO_WINDOW (no console window pops up).
       Output   nothing a host can poll: rsd_procs_pollfds returns no descriptors, and
                rsd_procs_next_deadline asks for a step 10 ms after output, doubling to
                100 ms while a child is quiet. Each step reads what PeekNamedPipe says
                is there (a ReadFile that cannot block) and checks the process handle
                with a zero wait. A broken pipe is the end of output.
       Stop     CTRL_BREAK_EVENT to the child's process group (it was created with
                CREATE_NEW_PROCESS_GROUP and shares the host's console), then
                TerminateJobObject after term_grace_ms. A host with no console (a GUI
                program, a service, wine without a terminal) cannot send it: the stop
                is then TerminateJobObject at once (log item PROC_STOP says so; the
                event has killed set). llama-server ends at once on CTRL_BREAK (it
                handles only CTRL_C). rsd_procs_kill and rsd_procs_destroy terminate
                the job; destroy waits up to RSD_PROC_DESTROY_WAIT_MS for the child.
       Status   exit_code is GetExitCodeProcess's code as an int (an NTSTATUS such as
                0xC0000005, an access violation, reads negative); a process we
                terminated reads as term_signal 9 (SIGKILL), exit_code -1. A wrapper's
                children: the job's active process count (the group outlives its
                leader as on POSIX; wine reports 0, so there the leader's exit ends it).
       Sockets  the free-port probe takes a WSAStartup reference in create.

   ---- state: state directory, cross-process lock, persisted attribution ------
       State that must survive a restart or be shared between processes: which
       models this library loaded on each target, which LM Studio instances
       it owns, and one lock per target that serialises mutations across
       processes. Everything is keyed by the normalised target key, a string
       such as "http://127.0.0.1:8080" from rsd_target_key_normalise (prefixes such as
       "lmstudio|" are fine: any non-empty string up to RSD_STATE_MAX_KEY_BYTES).

       Directory, first that is set and non-empty:
           desc.dir, $RESIDENCY_STATE_DIR, $XDG_STATE_HOME/residency (absolute
           XDG values only, as the XDG spec says), $HOME/.local/state/residency.
       The environment is read through desc.getenv_fn (default getenv), so tests
       and hosts can supply it. rsd_state_create creates every missing component
       with mode 0700 (mkdir -p) and then refuses (RSD_ERR_STATE_DIR, log item
       STATE_DIR_UNSAFE) a directory that is not a directory, not owned by our
       effective uid, or world-writable (others could plant files or swap our
       subdirectories). Group-writable is accepted: with umask 002 and per-user
       groups a hand-made directory is 0775. Existing modes are never changed.
       The state dir itself may be a symlink to such a directory (users relocate
       it); its subdirectories locks/ and attr/ must be real directories. Files
       are opened with O_CLOEXEC|O_NOFOLLOW|O_NONBLOCK and must be regular files,
       so a planted symlink or FIFO is refused, never followed or blocked on.
       32-bit Linux: build with -D_FILE_OFFSET_BITS=64 (before any header). Without
       it glibc's stat answers EOVERFLOW for a file whose inode number or size does
       not fit 32 bits (XFS and btrfs hand out such inodes), so the state directory
       or a file in it is refused; the cross-built tests are built with it.
       Windows: desc.dir, %RESIDENCY_STATE_DIR%, then %LOCALAPPDATA%\residency;
       paths are UTF-8. The directory must be a directory (locks\ and attr\ not
       reparse points); ownership is left to its ACL (a user's own LOCALAPPDATA).
       Files are opened with CreateFileW (not inheritable, shared for read, write
       and delete), the lock is LockFileEx on one byte far past the end (so it
       never stops a reader), the atomic replace is MoveFileExW with
       MOVEFILE_REPLACE_EXISTING.

       Layout:
           <dir>/locks/<name>.lock   cross-process lock + owner record (0600)
           <dir>/attr/<name>.attr    attribution of one target (0600)
           <dir>/attr/<name>.lock    short lock around an attribution/generation update
           <dir>/attr/<name>.gen     mutation generation of one target ("<n>\n")
           <dir>/attr/gen.seq        change counter of every generation (64 bytes, mapped)
           <dir>/attr/<name>.used    last use of each model on one target (0600)
           <dir>/attr/<name>.{attr,gen}.tmp  transient, during an update
           <dir>/attr/<name>.attr.corrupt    the last corrupt attribution file, moved aside
       <name> = rsd_state_file_name(key): the key's first bytes with every run of
       bytes outside [A-Za-z0-9._-] replaced by one '_' (at most
       RSD_STATE_NAME_PREFIX_BYTES, a leading '.' or '-' also becomes '_'), then
       '-', then the 64-bit FNV-1a hash of the whole key as 16 lower-case hex
       digits: "http://127.0.0.1:8080" -> "http_127.0.0.1_8080-75327da3b04bcbf2".
       The prefix is for humans; the hash keeps distinct keys apart ("a/b" and
       "a_b", or long keys sharing a prefix). Lock files are never deleted:
       unlinking a flock file while someone may hold or be opening it lets two
       processes lock two different inodes. One small file per target remains.

       Records under an older key: versions before the one target key kept the
       URL's path and a port's leading zeros in the key ("llamacpp|http://h:8080/v1",
       "...:08080"), so their files carry another <name>. An ensurer with a state
       directory (not etcd) moves them at an ensure not answered from its decision
       cache: when a target's .attr, .used or .gen exists
       under the older key and not under the current one, it is renamed to the
       current name, under the current key's attribution lock taken without
       waiting (busy: the next ensure tries again), and STATE_MIGRATED is logged.
       A current record is never overwritten; an older one beside it stays.

       rsd_state *rsd_state_create(const rsd_state_desc *desc, int *err)
           Resolves and creates the directory, allocates the object (one block of
           about 17 KB from desc.allocator, measured by tests/test_sizes_shell.c:
           the object and its scratch set's arena of desc.attr_arena_bytes, 8 KiB
           by default; nothing else allocates: record files are read and written
           through one 4 KiB chunk, however large they are). desc NULL or
           zeroed = defaults. NULL on failure, and *err (err may be NULL; RSD_OK
           on success) says why: RSD_ERR_STATE_DIR (unresolvable, too long,
           mkdir failed, unsafe), RSD_ERR_ARG (half an allocator or lock hook),
           RSD_ERR_NOMEM. A reconciler without a state dir should run without the
           lock and without persistence rather than fail (fail-open, as upstream).
       size_t rsd_state_footprint(const rsd_state_desc *desc)
           The bytes create allocates for desc (that one block); 0 for a desc it
           refuses (the directory is not looked at).
       void rsd_state_destroy(rsd_state *st)       unlock your locks first
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
               deadline so one overall deadline bounds lock and load.
           int rsd_state_lock_step(st, lk, now_ms)
               never blocks; makes one attempt when now_ms >= lk->wake_ms.
               Returns the events waiting: 0 while it waits (come back at
               rsd_state_lock_next_deadline(lk), lk->wake_ms), 1 once the wait
               has ended, until pulled; RSD_ERR_STATE for an IDLE lk.
           bool rsd_state_lock_next_event(lk, int *result)
               the end of the wait, once. RSD_OK: HELD, or UNLOCKED (fail-open:
               proceed without the lock; lk->error says why). <0: FAILED
               (fail-closed): RSD_ERR_TIMEOUT, RSD_ERR_LOCK (flock or open
               failed, or the hook's own negative code).
           uint64_t rsd_state_lock_next_deadline(const rsd_state_lock *lk)
               0 while the end waits to be pulled, lk->wake_ms while waiting,
               else RSD_NO_DEADLINE.
               Retries: 5 ms, doubling to 100 ms; the last wake is clamped to the
               deadline and the deadline is checked after a failed attempt, so
               the final attempt happens at the deadline. No jitter (no hidden
               randomness); flock needs none.
           int rsd_state_lock_try(st, lk, key, purpose)
               one attempt, no deadline: RSD_OK = HELD, RSD_PENDING = busy (lk
               left IDLE), <0 = error (lk IDLE).
           int rsd_state_lock_sync(st, lk, key, purpose, wait_ms)
               the blocking wrapper: begin + step + nanosleep on CLOCK_MONOTONIC.
               The only lock call that sleeps. wait_ms 0 = desc.lock_wait_ms.
           void rsd_state_unlock(st, lk)
               HELD: truncate the record, LOCK_UN, close. WAITING: abandon (close).
               UNLOCKED/FAILED: close nothing held; never releases a lock that
               lk did not take. Always leaves lk IDLE; idempotent.
           bool rsd_state_lock_held(const rsd_state_lock *lk)
           void rsd_state_lock_query(const rsd_state_lock *lk, rsd_state_lock_info *out)
               state, error (why UNLOCKED or FAILED), held, end_waiting (not
               pulled yet), wake_ms and deadline_ms (while WAITING), attempts,
               and the key and purpose of its last begin ("" none).
           int rsd_state_lock_owner(st, key, rsd_lock_owner *out)
               RSD_OK, or RSD_ERR_NOT_FOUND when free or never taken.
       Example, a frame loop executing a reconcile's LOCK step:
           rsd_state_lock lk;  memset(&lk, 0, sizeof lk);   (once)
           rsd_state_lock_begin(st, &lk, key, "reconcile", now_ms, deadline_ms);
           every frame:  rsd_state_lock_step(st, &lk, now_ms);
               no end yet (rsd_state_lock_next_event false): nothing to do
               before rsd_state_lock_next_deadline(&lk);
               end RSD_OK: mutate (rsd_state_lock_held(&lk) says whether under
               the lock), then rsd_state_unlock(st, &lk);   end < 0: give up.
       Blocking CLI: if (rsd_state_lock_sync(st, &lk, key, "cli", 0) == RSD_OK)
                     { ...; rsd_state_unlock(st, &lk); }
       Policy at the deadline or on an error: desc.lock_fail_closed false (the
       default, as upstream: serialisation is an optimisation that must never
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
       reads as empty, out->corrupt is set and ATTR_CORRUPT is logged once. The
       read that finds it corrupt also resets it: under the attribution-file lock
       (one non-blocking try) it moves the file aside to <name>.attr.corrupt and
       sets out->reset, so the next read finds an empty, valid record and the
       corruption is reported once (the ensurer turns out->reset into a warning
       notice). When a writer holds the file lock at that moment the reader leaves
       the file to it (corrupt set, reset not), and the writer moves it aside
       before rewriting it. Never a crash (fuzzed: fuzz/fuzz_attr.c).
           int rsd_state_attr_load(st, key, rsd_attr_set *out)
               entry count; a missing file is empty. No lock needed: files are
               replaced by rename, so a reader sees the old or the new version
               (only a corrupt file is reset under the lock, as above).
               <0: RSD_ERR_STATE_IO for an unreadable file (a symlink, a
               directory, EACCES); RSD_ERR_TOO_LARGE for a valid record whose
               ids do not fit out's arena (below); RSD_ERR_ARG for a set that
               rsd_attr_set_init did not set up.
           int rsd_state_attr_add_sync(st, key, model, instance, loaded_at_ms)
               adds (model, instance) or refreshes its loaded_at_ms and pid;
               instance NULL or "" = plain attribution. loaded_at_ms is the
               caller's timestamp (wall-clock ms is the useful choice across
               restarts). RSD_OK, RSD_ERR_CAPACITY (ATTR_FULL logged),
               RSD_ERR_ARG (empty model, id over RSD_STATE_MAX_ID_BYTES).
           int rsd_state_attr_remove_sync(st, key, model, instance)
               instance NULL = every entry of model (mark and instances);
               otherwise exactly (model, instance). Returns how many went.
           int rsd_attr_set_find(const rsd_attr_set *s, model, instance)
               index, or RSD_ERR_NOT_FOUND; instance NULL = any entry of model.
       A set (rsd_attr_set) holds up to RSD_STATE_MAX_ATTR entries, and their ids
       in an arena of the caller's: items[i].model and .instance point into it
       and stay valid until the next call that writes the set. Each entry takes
       its model's bytes plus one, and its instance's plus one when it has one.
           int rsd_attr_set_init(set, char *arena, size_t arena_bytes)
               makes set empty over arena (kept by the caller while the set is
               used). RSD_STATE_ATTR_ARENA_MAX (32 KiB) holds any valid record;
               RSD_STATE_ATTR_ARENA_DEFAULT (8 KiB) 64 entries of 128 bytes of ids.
               A zeroed set has no arena, and a call that reads into it answers
               RSD_ERR_ARG. Example:
                   static char ids[RSD_STATE_ATTR_ARENA_DEFAULT];
                   rsd_attr_set set;
                   rsd_attr_set_init(&set, ids, sizeof ids);
                   n = rsd_state_attr_load(st, key, &set);
           int rsd_attr_set_copy(dst, const rsd_attr_set *src)
               the entries and their ids into dst's own arena (a struct copy
               would share src's): RSD_OK, RSD_ERR_TOO_LARGE (they do not fit,
               or src is over itself; dst empty, over set), RSD_ERR_ARG.
       A valid record whose ids do not fit the set's arena is never read in part:
       the load answers RSD_ERR_TOO_LARGE, the set is empty with over set and
       arena_used = the bytes it needs, rsd_state_last_error names
       attr_arena_bytes, and ATTR_READ_FAILED is logged. It is not corrupt: the
       file stays as it is. The state reads a record for an update into its own
       scratch set (desc.attr_arena_bytes, 0 = RSD_STATE_ATTR_ARENA_DEFAULT); an
       update of a record that does not fit there fails with RSD_ERR_TOO_LARGE
       and writes nothing, so no other process's entries are lost. An add whose
       ids find no room is RSD_ERR_CAPACITY (ATTR_FULL logged, the error names
       attr_arena_bytes), as an add to a full set is.
       Updates are read-modify-write under <dir>/attr/<name>.lock (flock,
       independent of the target lock, so they work whether or not the caller
       holds it): read, change, write <name>.attr.tmp, rename over. No fsync
       by default: the attribution describes models loaded on a live server,
       and a power loss resets that server too, while the rename already
       protects against a process crash (a reader finds the old or the new
       version, both valid). desc.attr_fsync = true fsyncs the temp file before
       the rename (milliseconds per update). Concurrent adds lose nothing.
       These calls are synchronous file I/O (microseconds without fsync); they
       wait for the file lock (retries 1 ms doubling to 20 ms, sleeping between
       them) for at most RSD_STATE_ATTR_LOCK_WAIT_MS, then RSD_ERR_LOCK
       (ATTR_LOCK_TIMEOUT). A loop that must never sleep uses the step form:
           int rsd_state_attr_lock_begin(st, lk, key, now_ms, deadline_ms)
               no I/O; starts acquiring key's attribution-file lock into an
               rsd_state_lock (deadline_ms absolute, 0 = now_ms +
               RSD_STATE_ATTR_LOCK_WAIT_MS). Then rsd_state_lock_step as for the
               target lock: one flock attempt per call when now_ms >= lk->wake_ms,
               retries 1 ms doubling to RSD_STATE_ATTR_RETRY_MAX_MS (20), the last
               one at the deadline. Always fail-closed: at the deadline
               RSD_ERR_TIMEOUT (ATTR_LOCK_TIMEOUT logged), state FAILED, whatever
               desc.lock_fail_closed says (a read-modify-write without its lock
               could lose another process's entries). A lock hook does not apply
               to it. Release with rsd_state_unlock.
           int rsd_state_attr_commit(st, lk, const rsd_attr_change *ch, n,
                                     loaded_at_ms, uint64_t *gen_out)
               with lk holding the attribution lock: applies ch[0..n) in order
               ({model, instance, remove}: add or refresh, or remove exactly as
               rsd_state_attr_add_sync/_remove do) in one read-modify-write, then
               bumps the generation (*gen_out = the new value, 0 when the bump
               failed). The bump is tried even when the attribution write failed,
               so other processes still drop their cached decisions. RSD_OK, or
               the first error: RSD_ERR_STATE_IO (a write failed: ENOSPC, EFBIG,
               EIO...), RSD_ERR_CAPACITY (an add beyond RSD_STATE_MAX_ATTR, or
               whose ids find no room in attr_arena_bytes; the other changes are
               written), RSD_ERR_TOO_LARGE (the record does not fit the state's
               scratch set: nothing written), RSD_ERR_ARG, RSD_ERR_STATE (lk not
               an attribution lock, or not held).
           const char *rsd_state_last_error(const rsd_state *st)
               one line about the most recent failure of a write, a read or the
               attribution lock, with the path and strerror ("write
               /s/attr/x.attr: No space left on device"); "" before any.
               rsd_state_attr_commit clears it first.

       Last uses. One file per target in the attribution's format (same parser,
       writer, atomic replace and short file lock): one entry per model, the
       instance empty, loaded_at_ms = its last use in ms since the epoch (the
       wall clock, so every process on the host and a server's own figure
       compare). A full record (RSD_STATE_MAX_ATTR models) drops its oldest
       entry; a use never moves an entry back in time (another process may
       have recorded a later one). A corrupt file reads as empty and is reset
       as the attribution is.
           int rsd_state_used_load(st, key, rsd_attr_set *out)
               entry count, as rsd_state_attr_load.
           int rsd_state_used_touch(st, key, model, used_ms)
           int rsd_state_used_touch_sync(st, key, model, used_ms)
               records a use; the file lock with one try (RSD_PENDING when it is
               busy), or, _sync, the blocking wait for it (at most
               RSD_STATE_ATTR_LOCK_WAIT_MS). RSD_OK, RSD_ERR_ARG (empty or overlong model,
               used_ms 0), RSD_ERR_STATE_IO, RSD_ERR_LOCK.

       Generation (a decision cache shared in spirit across processes):
           int rsd_state_gen_read(st, key, uint64_t *out)
               0 when never bumped; RSD_ERR_STATE_IO when unreadable or corrupt
               (then do not trust a cached decision).
           int rsd_state_gen_bump_sync(st, key, uint64_t *out)
               after any load/unload on key; under the same short file lock as
               attribution updates, replaced by rename (no fsync: after a crash
               every in-memory cache is gone anyway). A corrupt value restarts
               from the wall clock in ms, never from a number a cache may hold.
       A cache entry records the generation it saw and is valid while
       rsd_state_gen_read still returns it.
       The change counter: each rsd_state maps attr/gen.seq shared (64 bytes,
       0600) and every bump, in any process, adds one to it after the new file is
       in place. A read that finds the counter where it was when this state last
       read that key's file returns that value without opening the file (a load
       and a compare: a decision-cache hit with a state directory costs about what
       one without does); otherwise it reads the file. Without atomics (not gcc or
       clang), on Windows, or when the file cannot be mapped, every read opens the
       file. A generation file edited by hand, or by an older build that knows
       no counter, is seen once any bump moves the counter or by a new
       rsd_state. The state directory is local (a mapping is not shared over NFS);
       several hosts use etcd.

       Limits: RSD_STATE_MAX_DIR_BYTES 896 (dir path; 64 bytes are kept for
       file names), RSD_STATE_MAX_KEY_BYTES 2304, RSD_STATE_NAME_PREFIX_BYTES 48,
       RSD_STATE_MAX_ID_BYTES 255, RSD_STATE_MAX_ATTR 64 entries per target,
       RSD_STATE_MAX_FILE_BYTES (64 entries with every id byte escaped),
       RSD_STATE_MAX_PURPOSE_BYTES 63, RSD_STATE_MAX_HOST_BYTES 255,
       RSD_STATE_LOCK_WAIT_MS_DEFAULT 120000, retries 5..100 ms,
       RSD_STATE_ATTR_LOCK_WAIT_MS 10000, RSD_STATE_ATTR_RETRY_MAX_MS 20,
       RSD_STATE_DETAIL_BYTES 1200 (rsd_state_last_error), desc.attr_arena_bytes
       (RSD_STATE_ATTR_ARENA_DEFAULT 8192; RSD_STATE_ATTR_ARENA_MAX 32768 holds any
       record). sizeof(rsd_state_lock) is about 2.5 KB (it keeps the key for the
       hook); sizeof(rsd_attr_set) about 2 KB, its arena apart.
       Errors: RSD_ERR_STATE_DIR, RSD_ERR_STATE_IO, RSD_ERR_LOCK, RSD_ERR_TIMEOUT,
       RSD_ERR_CAPACITY, RSD_ERR_ARG, RSD_ERR_STATE, RSD_ERR_NOT_FOUND.
       Threading: one rsd_state per thread (it has one scratch buffer); distinct
       objects, threads and processes may share a directory freely.
       Platform: POSIX (flock from <sys/file.h>; on Linux NFS maps it to fcntl
       locks). Not available on Windows yet.

   ---- etcd: the lock and the attribution for several hosts -------------------
       The state directory's lock and record hold only among processes of one host.
       When several hosts share one inference server (workstations or edge boxes in
       front of one GPU server, a router behind a LAN address), point every host's
       ensurer at one etcd v3 cluster: RESIDENCY_COORD=etcd://host:2379[/prefix] (or
       desc.coord). The lock, the attribution and the generation of each target then
       live there, and nothing else changes in the ensurer: the same reconcile, the
       same notices, the same fail-open rule. Only etcd's JSON gateway is used (POST
       /v3/kv/range, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive,
       /v3/auth/authenticate; etcd 3.4+ serves it under /v3), over this file's HTTP
       client: keys and values base64, int64 fields as JSON strings, no new dependency.

       Keys, under the prefix ("/residency" when the URL has no path), with <name> =
       rsd_state_file_name(target key) as for the state directory:
           <prefix>/lock/<name>   the lock: a key bound to this host's lease; value =
                                  "host=..\npid=..\ntaken_unix_ms=..\npurpose=..\n"
           <prefix>/attr/<name>   the attribution, in the attribution file's format
           <prefix>/gen/<name>    the generation, decimal
           <prefix>/prot/<host>   the models this host protects (desc.protected_models;
                                  the attribution format, instance = the role name)
       URL: etcd://host[:port][/prefix] (port 2379 by default), etcds:// for TLS (the
       client's tls_ca_file / tls_insecure_skip_verify apply), or http(s)://. A host
       name is resolved by rsd_ensurer_sync (or rsd_ensurer_resolve_sync(e, "http://host:2379")).

       What it does, per ensure (each is one request; the steps never block):
         - read: at the start, before the decision cache is consulted, one txn reads the
           target's attribution and generation and every host's protections (the first
           read of a coordinator also writes this host's protections). The other hosts'
           protected models are added to the reconcile's protected_models, each model
           once: no host evicts what another protects. The protections' range holds the
           first RSD_ETCD_MAX_KVS - 3 hosts; when etcd says more follow, the operation
           reads the rest before it ends (POST /v3/kv/range after the last key, at the
           first answer's revision, RSD_ETCD_MAX_KVS a page). A failed read is a
           degraded/warning notice; the ensure goes on with an empty record (and the
           lock then decides). Protections that stay unknown (over RSD_MAX_PROTECTED
           distinct models, this host's own included; a record over attr_arena_bytes or
           not valid; a key or value that cannot be read; a page that failed) are one
           degraded/warning notice (dmsg STATE_FAILED) naming the first reason; the
           ensure decides with those it knows.
         - lock: a txn "create_revision(lock) == 0 ? put(lock, lease) : read", whose
           answer also reads the attribution, generation and protections again (so the
           reconcile lists again when they changed, as with the state directory). The
           lease (desc.coord_lease_ttl_s, default 5 s) is granted before the first lock
           and again after half its TTL; while the lock is held every step sends a
           keepalive a third of a TTL after the last one. A busy lock is tried again
           after 5 ms doubling to 100 ms until the lock's deadline (the ensure's), then
           the file lock's rule: fail-open (proceed unlocked; warning notice naming the
           holder's record) or fail-closed (desc.lock_fail_closed: the ensure fails).
           The fencing revision is the lock key's create_revision (the txn's revision).
         - commit: one txn "create_revision(lock) == fence AND mod_revision(attr) == as
           read ? put(attr), put(gen + 1)". A holder whose lease expired (it stalled, or
           was cut off, longer than the TTL) finds the key gone or someone else's: the
           commit is refused (RSD_ERR_LOCK, "no longer ours", as a commit that could not
           be recorded: warning notice, result.state_error). An unlocked (fail-open)
           commit compares only the attribution and is re-applied on the new record when
           another host changed it (RSD_ETCD_COMMIT_TRIES).
         - unlock: the key is deleted if its create_revision is still the fence; the
           ensure ends when etcd answered (bounded by the request timeout). A holder
           that dies (kill -9, power, network) never unlocks: its key goes with its
           lease, a TTL later.
       etcd unreachable (refused, timed out, 5xx): each operation retries (5 ms doubling
       to 500 ms) for at most one lease TTL and never past its deadline, then the lock
       fails open or closed as above, the read and the commit say so in a warning
       notice; after that, operations within one TTL make one attempt only (a dead etcd
       costs one TTL per ensure, not one per step). Authentication: desc.coord_user +
       coord_password (RESIDENCY_COORD_USER / _PASSWORD) log in with POST
       /v3/auth/authenticate and again when etcd says the token is invalid (simple
       tokens expire after 5 minutes idle); or desc.coord_auth_token
       (RESIDENCY_COORD_TOKEN). The token goes raw in the Authorization header (the
       gateway answers 401 to "Bearer <token>"); a refused or missing login is
       RSD_ERR_AUTH. Credentials are never logged.
       Guarantees, with every host on the same etcd and prefix: one host at a time
       mutates a target (while leases are honoured); a host never evicts a model
       another host protects (protections published before the decision); the record
       of what residency loaded is shared and changes only with a valid fence.
       Not guaranteed: a holder that stalls past its TTL may still send the unload or
       load it was about to send (only its record is refused, and the next holder
       lists again); a host that first publishes its protections while another host
       is deciding is seen from that host's next ensure; the server's own users (not
       going through residency) are not locked out; protections stay in etcd until
       the host publishes new ones (delete <prefix>/prot/<host> to retire a host).

       The gateway as measured on etcd 3.4.23 (the parser relies on no more): proto3
       JSON leaves out default fields ("succeeded" is absent when a txn's compare
       failed, "kvs" and "count" when a range is empty); int64 fields are JSON strings;
       each kv carries key, create_revision, mod_revision, version, value and "lease";
       /v3/lease/keepalive answers one {"result":{...}} and ends the (chunked) body, and
       for an expired lease it is HTTP 200 without "TTL"; a put or txn on an expired
       lease is HTTP 404 {"error":"etcdserver: requested lease not found","code":5}
       (chunked, with a Grpc-Trailer-Content-Type trailer); with auth on, no token is
       HTTP 400 code 3 "user name is empty" and a bad one 401 code 16.

       Public API (the ensurer calls these; a host may too):
       rsd_etcd *rsd_etcd_create(const rsd_etcd_desc *d)
           Allocates everything now, sized by attr_arena_bytes: the object with its
           token array, its two sets' ids and three buffers -- an attribution as
           written (room for any record whose ids fit the arena), the operation's
           request as built and then its answer (the decoded values of two such
           records and RSD_ETCD_MAX_KVS pairs' JSON), the answer's decoded values
           (two such records: the attribution and the protections rsd_etcd_query shows)
           -- and its own HTTP client with a slot for each request it has in flight
           (three: the operation's, a keepalive, a release; each with room for the
           operation's request, and 4 KiB heads and bodies for the small answers
           unless d->http says more). An answer larger than the answer buffer, or
           whose values do not fit the values buffer, fails the operation at once
           with RSD_ERR_TOO_LARGE (the lock: fail-open or closed as for an
           unreachable etcd), logged (ATTR_READ_FAILED) and in the info's message
           with the limit and attr_arena_bytes; the attribution then reads as
           empty and a commit on it fails the same way: it is never read or
           rewritten in part.
           d: url (required), host_id (NULL = gethostname), lease_ttl_s
           (5), request_timeout_ms (2000), fail_closed, auth_token / auth_user +
           auth_password, protected_models + n_protected (this host's), http (TLS and
           limits), attr_arena_bytes (the ids of an attribution or another host's
           protections as read, in each of two sets; 0 = RSD_STATE_ATTR_ARENA_DEFAULT,
           and never less than this host's own protections take), allocator, logger.
           NULL for a desc it refuses (a bad url included: logged) or no memory.
       size_t rsd_etcd_footprint(const rsd_etcd_desc *d)
           The bytes create allocates for d, TLS's configuration apart (the object
           with its buffers and its client); 0 for a desc create refuses, so a NULL
           from create with a footprint is no memory. An attribution in etcd whose ids
           do not fit reads as empty with attrs->over set (logged, ATTR_READ_FAILED),
           is not corrupt, and a commit on it fails with RSD_ERR_TOO_LARGE naming
           attr_arena_bytes: it is never rewritten shorter. Another host's
           protections that do not fit are logged and not known here (the info's
           protected_incomplete).
       int rsd_etcd_read_begin(co, key, now_ms, deadline_ms)
       int rsd_etcd_lock_begin(co, key, purpose, now_ms, deadline_ms)
       int rsd_etcd_commit_begin(co, changes, n, loaded_at_ms, now_ms, deadline_ms)
       int rsd_etcd_unlock_begin(co, now_ms)
           Start an operation (no I/O; one at a time: a begin abandons the one running;
           lock_begin while held is RSD_ERR_STATE).
           deadline_ms 0 = one lease TTL from now. changes are rsd_attr_change as for
           rsd_state_attr_commit and must stay valid until it is done.
       int rsd_etcd_step(co, now_ms)
           The events waiting: 0 while an operation (or a release) runs, and when
           idle; 1 once it has ended, until rsd_etcd_next_event pulls its end.
       bool rsd_etcd_next_event(co, rsd_etcd_info *out)
           The end of the last operation begun, once (false while it runs): *out as
           query, with out->result its code: read RSD_OK / the error; lock RSD_OK
           (held, or fail-open: not held) / the error (fail-closed: RSD_ERR_TIMEOUT
           busy, RSD_ERR_CONNECT..., RSD_ERR_AUTH); commit RSD_OK / RSD_ERR_LOCK
           (fenced) / the error; unlock RSD_OK once etcd answered the delete.
       int rsd_etcd_pollfds(co, out, cap)  uint64_t rsd_etcd_next_deadline(co)
           How many sockets it wants; when step must next run (0 while an end
           waits to be pulled).
       void rsd_etcd_query(co, rsd_etcd_info *out)
           held, lost (the lease ran out while held), fence, has_gen/gen, attrs,
           attr_corrupt, the other hosts' protected_models (each model once; a role
           any host gives wins over a bare entry), protected_incomplete with
           protected_why (the first reason some stay unknown, "" none; logged,
           ATTR_READ_FAILED), owner (the holder's record when busy), message (why it
           failed or proceeded unlocked), root, prefix. A commit reads no
           protections: the query shows those read before it.
       int rsd_etcd_parse_url(url, root, cap, prefix, cap)
       Limits: RSD_ETCD_MAX_PREFIX_BYTES 128, RSD_ETCD_MAX_HOST_BYTES 128,
       RSD_ETCD_MAX_KEY_BYTES 512, RSD_ETCD_MAX_KVS 96 per answer (the protections'
       range asks for the first RSD_ETCD_MAX_KVS - 3 hosts, each further page for
       RSD_ETCD_MAX_KVS), RSD_MAX_PROTECTED distinct protected models in all (more:
       protected_incomplete). Threading: one coordinator per thread. Fuzzed:
       fuzz/fuzz_etcd.c (the answers, each also as a further page).

   ---- ensure: run reconciles over real sockets (rsd_ensurer) -----------------
       The I/O shell around the sans-I/O reconcile of residency.h (its driver section): it
       performs the HTTP, WAIT, LOCK, COMMIT and UNLOCK steps with the HTTP client,
       the caller's clock and the state directory (or etcd: the etcd section, the same
       steps on the other backend). Two ways to use it, one code path:

           rsd_ensurer *e = rsd_ensurer_create(NULL);        zeroed desc = defaults
           rsd_ensure_req q;  memset(&q, 0, sizeof q);
           q.url = "http://127.0.0.1:8080";  q.model = "qwen";
           rsd_ensure_result res;
           int rc = rsd_ensurer_sync(e, &q, &res);             blocking: the loop below + poll()
           rsd_ensurer_destroy(e);

       a frame loop (one call per frame, never blocks):
           rsd_ensurer_begin(e, &q, now_ms);                 no I/O
           every frame:
               rsd_ensurer_step(e, now_ms);                  0 while running, 1 once ended
               n = rsd_ensurer_notices(e, &notes);           new notices: notes[seen..n)
               if (rsd_ensurer_next_event(e, &res)) { rc = res.result; done; }
               (optional) poll the fds of rsd_ensurer_pollfds until
               rsd_ensurer_next_deadline(e) within the frame budget.

       rsd_ensurer *rsd_ensurer_create(const rsd_ensurer_desc *d)
           Allocates everything now, from d->allocator: the object (with the
           decision cache unless no_cache, one scratch
           region that holds detection's state (runtime AUTO) until the run
           starts and then the attribution as read, a set and its arena of
           d->attr_arena_bytes (with a state directory or etcd; the last-use
           and lease records are read into the state's own scratch set, each
           used before the next read), the in-memory instance
           records (a runtime with instances, no state directory and no etcd;
           when the state directory cannot be opened, create allocates them
           then), the protected ids at their own length, and its reconcile:
           rsd_reconcile_footprint bytes made by rsd_reconcile_init with d->limits
           and d->runtime: among its tables the answers' buffer of max_body_bytes, 8 KiB by
           default, that every answer of an ensure goes to as it arrives
           (on_body: a listing entry by entry, any other answer whole); detection
           reads into the same tokens and buffer), the HTTP client
           (d->http, its allocator and logger default to d's; zeroed sizes are
           the ensurer's: RSD_ENSURE_HTTP_REQUESTS 2 slots and sockets, as many
           as one ensure has in flight -- its HTTP step and the /models/sse
           stream --, RSD_ENSURE_HTTP_REQUEST_BYTES (the longest URL, bearer and
           load body a reconcile sends, plus 1 KiB), RSD_ENSURE_HTTP_HEADER_BYTES
           4 KiB, slot bodies RSD_ENSURE_HTTP_SLOT_BODY 4 KiB: the stream's (an
           event's data up to half of it; a longer event is skipped and the wait
           ends at its next poll), and the limit of an extra request on
           rsd_ensurer_http that brings no body_buf. A real llama.cpp router's
           answer heads are 168-185 bytes and its /models/sse events about
           150-320 bytes; a longer head fails
           that request with RSD_ERR_HEADERS_TOO_LARGE, and d->http.max_header_bytes /
           max_body_bytes raise them) and,
           unless d->no_state, the state directory (rsd_state_create with d->state_dir;
           NULL = $RESIDENCY_STATE_DIR, $XDG_STATE_HOME/residency, ~/.local/state/
           residency). A state directory that cannot be opened is not an error:
           the ensurer runs without the lock, attribution and generation (it fails
           open) and rsd_ensurer_has_state says so. NULL on a bad desc or no memory.
           Desc (zeroed = defaults): allocator, logger, http (client limits),
           limits (the reconcile's tables: rsd_reconcile_limits), runtime (the
           runtime of every ensure: a request's AUTO means it and a request
           naming another is refused with RSD_ERR_ARG; AUTO = any, detected;
           a given runtime without instances, llama.cpp router or Ollama, has
           no LM Studio state and no in-memory instance records), state_dir, no_state, lock_fail_closed (state),
           attr_arena_bytes (the bytes of ids an attribution as read holds, here,
           in the state and in etcd, and of the in-memory instance records; 0 = as many as the reconcile keeps,
           limits.id_arena_bytes: 128 per model, 8 KiB by default, so max_models
           raises both; a record over it is never acted on in part, see STATE), protected_models +
           n_protected (configured ids with roles, copied: never evicted unless
           nothing else is left), residency_env (the RESIDENCY value; NULL =
           getenv("RESIDENCY") at each begin unless ignore_env; a value that is
           neither an opt-out nor on|1|true|managed manages, and the first reconcile
           of the ensurer that sees it adds a degraded/warning notice, dmsg
           ENV_UNKNOWN, naming the accepted values), cache_ttl_ms (0 =
           60 s), no_cache (no TTL fast path), no_sse (never subscribe to
           /models/sse: poll only), sse_poll_ms (poll interval of a wait while
           the stream is open; 0 = RSD_ENSURE_SSE_POLL_MS, 500), coord (etcd for several
           hosts: "etcd://host:2379[/prefix]"; NULL = $RESIDENCY_COORD unless ignore_env;
           a bad value makes create fail) with coord_host, coord_lease_ttl_s,
           coord_auth_token / coord_user / coord_password (see ETCD above),
           kv_slots and kv_timeout_ms (slot saves around a llama.cpp router's
           swaps, below; RSD_NO_ENSURE_KV: create refuses kv_slots).
       size_t rsd_ensurer_footprint(const rsd_ensurer_desc *d)
           The bytes rsd_ensurer_create(d) allocates in all (NULL = the defaults;
           TLS's configuration not counted): the state directory's block unless
           d->no_state and etcd's coordinator with a coord included; 0 for a desc
           create refuses (limits, runtime, protected list) and for a coord in a
           build without etcd.
           On x86-64 (tests/test_sizes.c checks the bounds): under 247 KiB with
           the defaults -- the reconcile under 134 KiB (its tables above, the
           answers' 8 KiB buffer among them), the scratch region under 12 KiB
           (detection's state; the attribution set and its arena take 10 KiB),
           the decision cache under 19 KiB, the client under 34 KiB, the rest of
           the object under 35 KiB, the state's block under 17 KiB (see STATE)
           --, under 239 KiB with runtime LLAMACPP (no LM Studio state; the
           scratch region is the attribution's 10 KiB).
           no_state leaves out the state's block, adds the in-memory instance
           records (attr_arena_bytes, 8 KiB by default) where the runtime has
           instances and leaves the scratch region to detection: under 239 KiB
           with runtime AUTO, under 212 KiB with LLAMACPP. When the state
           directory cannot be opened, create runs without it and allocates, in
           place of its block, the in-memory instance records where the runtime
           has instances; they are smaller than that block, so the footprint is
           an upper bound then too. A coord adds the coordinator,
           under 651 KiB with the defaults (its object with its buffers under
           447 KiB, the struct itself under 150 KiB; its client under 205 KiB:
           three slots, see ETCD). attr_arena_bytes (by default the limits' id
           arena) adds what it asks over 8 KiB to each set that holds an
           attribution as read: the ensurer's, the state's scratch set and the
           coordinator's two, whose buffers follow it too; smaller limits,
           no_cache and a runtime shrink it. kv_slots adds under 81 KiB (a 32 KiB
           /slots answer and its 2048 JSON tokens).
       void rsd_ensurer_destroy(rsd_ensurer *e)    releases a held lock, frees all.
       int rsd_ensurer_begin(e, const rsd_ensure_req *q, uint64_t now_ms)
           Validates and copies q; no I/O. q: url (the server, "http://h:8080" or
           ".../v1"), model (the keep), runtime (RSD_RUNTIME_AUTO = probe, see below;
           LLAMACPP, LMSTUDIO, OLLAMA), context_length (0 = none), context_ceiling
           (the clamp of a load beside other residents: 0 = the
           RESIDENCY_CORESIDENT_CONTEXT environment variable read at begin by
           rsd_fit_ceiling_from_env, or 131072 with d->ignore_env;
           RSD_FIT_CEILING_OFF = no clamp; every runtime), timeout_ms (0 =
           120000, LM Studio 300000: the whole ensure, lock wait and load included),
           probe_timeout_ms (0 = 1500, LM Studio's catalog 5000), bearer (API
           key, never logged or printed), observe (force
           observe-only: nothing is loaded or unloaded), user_managed (the
           target's lifecycle is user-managed: observe too), keep_pinned,
           free_bytes and lease_ttl_ms (a free request, below), capacity_bytes
           and keep_bytes (byte-aware eviction, as rsd_reconcile_desc's),
           kv_bytes_per_token and context_floor (the clamp by bytes: "Context
           fit" in residency.h; a GGUF path gives the figure through
           rsd_gguf_read_file and rsd_gguf_kv_per_token).
           RSD_OK, RSD_ERR_ARG (NULLs, empty model, an ensure already running: it
           must finish first), RSD_ERR_URL, RSD_ERR_MODEL_ID. On error the ensure is
           DONE at once with that result (its end event carries it, query shows it).
       int rsd_ensurer_step(e, uint64_t now_ms)
           Does all ready work and returns the events waiting: 0 while it runs
           (call again; sleep at most until rsd_ensurer_next_deadline or socket
           activity) or when nothing was begun, 1 once it has ended until
           rsd_ensurer_next_event pulls its end; RSD_ERR_ARG for NULL.
       bool rsd_ensurer_next_event(e, rsd_ensure_result *out)
           Its end, once: *out as query gives it, with out->result the final code:
           RSD_OK when the reconcile ran to its end (outcome RESIDENT, OBSERVED or
           DECLINED: look at the result), <0 when the load failed or the server
           could not be read (outcome LOAD_FAILED or DEGRADED; result.message says
           why). LM Studio: a model the server does not advertise ends DECLINED
           with RSD_ERR_NOT_SERVED (the request must not be sent), a server asking
           for an API key DEGRADED with RSD_ERR_AUTH. False while it runs or once
           pulled; query keeps the result until the next begin.
       int rsd_ensurer_pollfds(e, rsd_pollfd *out, int cap)
       uint64_t rsd_ensurer_next_deadline(e)
           For the host's poll(): the client's sockets (how many it wants), and
           the earliest of the client's deadlines, the reconcile's next poll (WAIT)
           and the next attempt at the target lock or the attribution lock
           (COMMIT); 0 while its end waits to be pulled. RSD_NO_DEADLINE when done
           or only sockets matter.
       int rsd_ensurer_notices(e, const rsd_reconcile_notice **out)
           The notices so far (live while running: print notes[seen..n) after each
           step). Valid until the next begin.
       void rsd_ensurer_query(e, rsd_ensure_result *out)
           The result so far (final after done): result, outcome, decision, reason,
           runtime (the one used, after detection), message, evicted[] (with the
           restored flags), notices, requests (HTTP requests sent, detection
           probes included), elapsed_ms, cache_hit, keep_resident, lock_held,
           loaded, mutated, wire_id (the id to send requests with: the model, or on
           LM Studio the instance it resolved to, e.g. "qwen:2"), lms_tier (LM
           Studio's API tier), and progress fields (op and model of the last HTTP
           step: RSD_OP_LOAD = loading op_model; RSD_OP_LIST with a non-empty op_model
           = polling until op_model is loaded; NONE while the COMMIT waits for the
           attribution lock; load_stage and load_progress = the last progress a
           router's /models/sse gave for the load being waited for, either shape
           (rsd_reconcile_event; "" and -1 when none); lock_waiting = waiting for the target lock that another
           ensure, perhaps in another process, holds while it changes the server),
           state_error (RSD_OK, or why the change was not
           recorded in the state directory: RSD_ERR_STATE_IO, RSD_ERR_TIMEOUT for a
           busy attribution lock...), kv_saved and kv_restored (kv_slots: the
           slots saved before this ensure's unloads, restored after its load).
           Pointers stay valid until the next begin.
       Slot saves (desc.kv_slots: a swap keeps the conversation; off by default).
       On a llama.cpp router started with --slot-save-path DIR, an unload the
       reconcile asks for waits while the model's slots that hold a prompt are
       saved: GET <root>/slots?model=M, then one POST <root>/slots/ID?action=save
       {"model": M, "filename": "rsd-KEY-ID.bin"} at a time (the router passes a
       POST to the child its body's "model" names; it refuses ?model= on a POST).
       When the ensure has loaded its model, the same GET lists its slots and each
       is restored from its file (action=restore; a slot without one answers 400
       and stays cold; a file stays after its restore until the slot's next save
       replaces it: llama-server reuses a restored cache only as far as a new
       prompt shares its tokens). KEY is 16 hex digits of an FNV-1a 64 over the target key,
       the model id and the child's slot count and n_ctx: the ensurer cannot see
       the model file, so a file replaced under the same id with the same shape is
       not told apart (llama-server refuses a file of another shape). All of it
       is bounded by kv_timeout_ms (0 = 10 s) and half of what is left of the
       ensure's deadline; a failed or slow save or restore is logged (WARN) and
       costs that slot's cache, not the unload, the load or the ensure (but see a
       restore that ends the child, below). The router deletes no file and has
       no budget for DIR: that is the operator's (rsd-serve's kv_cache_dir has
       both: in front of rsd-serve leave kv_slots off and set kv_cache_dir
       there). A /slots answer over 32 KiB or 2048 JSON tokens (about 16 busy
       slots) saves nothing. A restore the child does not answer ends it:
       llama-server aborts on a file cut inside its data (as a save that a full
       disk cut short leaves), and the router answers 500 and shows the model
       unloaded (a 500, a 502 or no answer at all is taken for this). The
       slots are listed again, which loads the model again (the router's
       autoload); that slot, empty now, is saved over the file (a restore of it
       then reads 0 tokens, in any process), and the other files are restored
       (at most twice in one ensure). Until that save succeeds, or this ensurer
       saves the slot with a prompt again, it does not restore that file again.
       When the list fails the model is not loaded, and the ensure fails with
       RSD_ERR_POOL_CRASHED.
       int rsd_ensurer_sync(e, const rsd_ensure_req *q, rsd_ensure_result *out)
           The blocking wrapper: rsd_ensurer_resolve_sync, begin, then step + poll() on
           rsd_now_ms() until done. Returns what the last step returned.
       Freeing memory (a lease). A request with no model (q->model NULL or "")
       and q->free_bytes = N frees N bytes instead of loading; begin, step,
       pollfds, next_deadline and query drive it as they drive an ensure (a
       frame loop steps it once a frame), and rsd_ensurer_sync blocks on it.
       rsd-serve first: the first step POSTs <root>/_rsd/lease {"bytes": N,
       "ttl_ms": q->lease_ttl_ms (0 = RSD_ENSURE_LEASE_TTL_MS, 10 min: a
       caller that crashes gives the bytes back then), "restore": true}; rsd-serve
       stops idle, unpinned processes, least recently used first, never a busy
       or pinned one. While its answer says "ready": false (a stopped process
       has not exited yet, or the device does not show the memory free yet) the
       ensure polls GET <root>/_rsd/lease/ID, 20 ms first, doubling to 500 ms,
       until ready or the ensure's deadline. Ready means the memory is really
       free: the processes have exited (rsd-serve's pool frees a process's bytes
       when its exit is reaped, not when it is asked to stop) and, where
       rsd-serve reads the device (vram_budget = auto), a reading after those
       exits shows the bytes free; so the memory is free when the ensure ends.
       Outcome FREED, res.freed_bytes = the bytes granted (less than asked when busy or pinned processes hold the rest:
       reason FREE_SHORT), res.evicted = the models it stopped (an id in
       its answer that is no usable model id is left out), res.lease_id =
       "rsd-serve:ID" (a state-directory lease id never has a colon), and
       res.message names the bytes: "rsd-serve lease rsd-serve:3
       ready: 4294967296 of 4294967296 bytes granted, 1 model(s) stopped". 409:
       DECLINED (RSD_OK; nothing idle to stop, nothing changed); 503 (no
       vram_budget, too many leases): DEGRADED, RSD_ERR_SERVER_ERROR with
       rsd-serve's words; 400: RSD_ERR_ARG; 401/403: RSD_ERR_AUTH; past the
       deadline while not ready: RSD_ERR_TIMEOUT with lease_id still set (return
       it, or its ttl passes). How the target is known to be rsd-serve: a 404,
       405 or 501 to that POST, or a 200 that is not a lease (LM Studio answers
       unknown routes so), means it is not, and the request goes on as below
       (detection included). A free request is rare (a cutscene, another GPU
       program), so the one probe costs other runtimes one request there and
       ensures of a model nothing; it needs no earlier contact with the server
       (a header or a listing field would need a listing first, which a given
       runtime skips, and a proxy may drop a header), and it reaches rsd-serve
       through the same URL the caller uses. A request naming runtime OLLAMA or
       LMSTUDIO skips it.
       Other servers: the same reconcile as an ensure (lock, list, decide,
       unloads, commit) with a free plan (see "Free plans" in
       residency.h's manual): models this library loaded there, unprotected, whose
       size the server lists (the llama.cpp router lists meta.size while a model is
       loaded; rsd-sim too), least recently used first, until N are
       freed. Nothing is loaded and nothing is cached. res.outcome FREED (perhaps
       less than asked: res.freed_bytes, the listed sizes of what went, and a
       will-not-fit notice say so) or DECLINED (nothing to unload; no request but
       the listing); res.evicted lists what went. With a state directory the
       unloads are a lease: res.lease_id names it, recorded as attr/lease_<id>-
       <hash>.lease (the attribution's format: model = what went, instance = the
       URL); it has no ttl. LM Studio is refused (RSD_ERR_ARG): its instances have
       their own machine.
       int rsd_ensurer_lease_return_begin(e, const rsd_ensure_req *q, const char *lease_id, uint64_t now_ms)
           Starts giving a lease back; no I/O. step, pollfds, next_deadline and
           next_event drive it like an ensure (never blocks).
           "rsd-serve:ID": one DELETE <q->url root>/_rsd/lease/ID (q->url is
           required: the id does not hold it); rsd-serve starts what it stopped
           again (the lease asked to restore). It ends with RSD_OK; query: outcome
           NONE, restored = the models rsd-serve starts again, evicted = them
           (restored set), message says so; 404 (released, or its ttl passed):
           RSD_ERR_NOT_FOUND. A state-directory lease: one ensure per model, in
           the lease's order, at the recorded URL unless q->url is set (q also
           gives the runtime, bearer and timeout; q may be NULL); before each model
           the lease record is read under its file lock, taken without blocking
           (next_deadline is the lock's next try), and each model that comes back
           leaves the lease at once (what failed stays for another return); a
           recorded URL's host name must be resolved already (rsd_ensurer_resolve_sync),
           as for any non-blocking ensure.
           It ends with RSD_OK when all came back, else the first failed ensure's
           code (RSD_ERR_STATE for one that ended without error and without its
           model resident, e.g. observe-only), RSD_ERR_NOT_FOUND for an unknown or
           returned lease; query: restored = the models back, and the last
           ensure's result when all came back, else the first failed one's result,
           outcome, decision, reason and message, without notices, evicted list,
           op_model and wire_id. RSD_OK, RSD_ERR_ARG (a bad id, an rsd-serve lease
           without q->url), RSD_ERR_STATE (an ensure or return is running; a
           state-directory lease without a state directory). While a return runs,
           rsd_ensurer_begin answers RSD_ERR_STATE.
       int rsd_ensurer_lease_return_sync(e, const rsd_ensure_req *q, const char *lease_id, out)
           Blocking: rsd_ensurer_lease_return_begin, then step + poll() until done
           (each recorded URL's host name is resolved first, as rsd_ensurer_sync
           does). Returns the count restored, or the code above (and
           RSD_ERR_ARG for a NULL or over-long id); *out (may be NULL) is
           query's result.
       int rsd_ensurer_resolve_sync(e, const char *url)
           Blocking getaddrinfo for the URL's host name (and etcd's, with desc.coord;
           first address), kept in a
           small table (RSD_ENSURE_MAX_NAMES, oldest replaced) that the client's
           resolve hook reads: the non-blocking path never resolves (it fails with
           RSD_ERR_RESOLVE for a name not resolved here, unless d->http.resolve_fn
           knows it). IP literals and "localhost" need nothing: RSD_OK at once.
       rsd_http_client *rsd_ensurer_http(e)       the owned client, for extra requests
           between ensures (while one runs, step consumes and drops other events)
       bool rsd_ensurer_has_state(e)              a state directory is in use
       const char *rsd_runtime_kind_str(int k)    "auto", "llamacpp", "lmstudio", "ollama"
       int rsd_runtime_kind_parse(const char *s)  the kind, or RSD_ERR_ARG

       What a step does with each reconcile step: HTTP -> rsd_http_send (headers
       from the step, timeout = the step's), the answer fed back as soon as its
       event arrives; WAIT -> nothing until now_ms >= wake_ms (or a /models/sse
       event ends it, below); LOCK ->
       rsd_state_lock_begin/step (never blocks; fail-open by default: proceeds
       unlocked with a warning notice), then the generation and the attribution
       read again under the lock (rsd_reconcile_set_ours: a model another process
       loaded while we waited is known as residency's, and a changed attribution
       makes the reconcile list and decide again); COMMIT -> the attribution
       changes (the keep in, unrestored victims out; LM Studio: owned instances
       out and in) and the generation bump in one rsd_state_attr_commit, under
       the attribution-file lock taken with rsd_state_attr_lock_begin/step: the
       step never sleeps for it but comes back at its next attempt
       (rsd_ensurer_next_deadline), until the ensure's deadline (at least 50 ms);
       then commit_done. A COMMIT that cannot be recorded (the lock busy past
       the deadline, a failed write: a full disk, EFBIG, EIO) ends the ensure
       as it would have ended (the model is loaded: RESIDENT, exit code 0 in
       rsd-ensure) with a degraded/warning notice quoting what failed
       (rsd_reconcile_commit_failed), result.state_error set, and no decision
       cached on it; UNLOCK -> rsd_state_unlock. An attribution found corrupt
       (and reset, see STATE) is one degraded/warning notice of the ensure that
       reset it: residency no longer knows which models it loaded there. An
       attribution whose ids do not fit attr_arena_bytes is one degraded/warning
       notice (dmsg STATE_FAILED) naming it and the bytes it needs: residency
       treats every resident there as not its own, and a COMMIT on it fails
       (the record is left whole, never rewritten shorter). At the
       start of a reconcile the target's generation is read (one small file)
       and the decision cache is looked up first: a live entry for (target,
       model) under that generation ends the ensure at once (cache_hit, no
       request, no attribution read, the reconcile not even set up; a hit under
       another generation is a miss). Otherwise the attribution
       (rsd_state_attr_load: the models this library loaded there, from any
       process) is read and both go to the reconcile (desc.ours,
       desc.generation), with the last uses (rsd_state_used_load, plus this
       ensurer's own) as desc.last_used: eviction among candidates of equal
       protection takes the least recently used first, and a last use the
       server lists itself (rsd-serve's status.last_used) wins over the
       record. An ensure that ends with the model resident (loaded, already
       resident, or a cache hit) records a use of (target, model) at the wall
       clock: one try of the file lock, and when it is busy the use is written
       at the next ensure or at destroy (the bounded wait); the same model is
       written at most once a second. Without a state directory (and with
       etcd) the last uses are only this ensurer's own: 32 of them in 4 KiB of
       their targets' keys and models (at least 8 of the longest ids), the
       oldest replaced when either is full.
       Without a
       state directory there is no LOCK step, attribution is only what this
       ensurer's own cache knows, and the generation is not used. With etcd
       (desc.coord / RESIDENCY_COORD) the lock, the attribution and the
       generation come from there instead, whether or not a state directory
       exists: the ensure first reads them (one request, before the cache is
       consulted: other hosts bump the generation too), LOCK and COMMIT are etcd
       transactions (COMMIT fenced by the lock's revision), UNLOCK waits for the
       delete, and every step also keeps the held lock's lease alive (see ETCD).
       With etcd an LM Studio ensure sends its first listing itself (the
       detection probe's answer is not reused: one more GET).

       /models/sse (llama.cpp router only): just before a load or
       unload POST (or when a wait begins without one, e.g. for a model already
       LOADING) the
       ensurer opens GET <root>/models/sse as a streaming request (on_sse, one
       more in result.requests) and keeps it open across the WAIT steps of the
       ensure; it is cancelled when the ensure ends. Each event's data goes to
       rsd_reconcile_event: the "loaded" (or failed) event of the waited model
       ends the WAIT at once and the poll that follows confirms it (the listing
       stays the truth, so outcomes are those of polling alone); so does the
       "unloaded" event of a victim the reconcile waits for after an unload. Events that
       arrive while a poll or the POST is in flight are kept (the newest
       RSD_ENSURE_SSE_PENDING, each under RSD_ENSURE_SSE_EVENT_BYTES; a longer
       one makes the next wait poll fast) and replayed when it begins. While the stream is open a wait polls every
       sse_poll_ms instead of the fast 20 ms-doubling schedule (the stream gives
       the latency; fewer requests than upstream on long loads), except the first
       wait after a late subscription or a dropped event, and never later than a
       probe timeout before the deadline. A server that refuses the stream (not
       200 text/event-stream, or a transport error before any answer) is
       remembered per target (RSD_ENSURE_MAX_NAMES) and polled only from then
       on; a stream that ends mid-ensure restores the fast schedule and is not
       reopened before the next ensure. The stream
       holds one client slot and socket while it is open (plus its unpulled
       CANCELLED event until the next step with a request).

       Runtime detection (q.runtime AUTO) is the core's rsd_detect (driver:
       detect), driven over the ensurer's client: one GET per probe under the root
       URL until one matches (llama.cpp router, Ollama, LM Studio 0.4+, LM Studio
       0.3); RSD_NO_DETECT leaves it out. The answer is cached per target in the
       ensurer (RSD_ENSURE_MAX_NAMES entries), so only the first ensure of a
       target pays for it. What the probe
       read is handed to the reconcile, not asked again: a router's /props as its
       instance limit (desc.capacity_known), so a resident model costs 2 requests
       (GET /props, GET /v1/models), as upstream; LM Studio's GET /api/v1/models
       as its first listing (desc.first_listing). No match -> DEGRADED
       RSD_ERR_NOT_FOUND ("not a model server: URL answers, but not as a llama.cpp
       router, Ollama or LM Studio (GET /props: HTTP 404)"), or RSD_ERR_AUTH when
       a probe was answered 401/403 ("URL asks for an API key ... and none was
       given", or "URL refused the API key given"); a refused connection or any
       transport error on the first probe ends the ensure at once (DEGRADED, the
       transport error, e.g. RSD_ERR_CONNECT, message "server unreachable:
       connection refused (URL)").

       Every runtime runs the one machine (rsd_reconcile with the runtime's
       adapter), through the same loop, lock, notices, cache and result. The
       target key is rsd_reconcile_target_key's ("<runtime>|<url>", LM Studio:
       "lmstudio|<root>", so both spellings of its URL share lock, attribution
       and cache). The target's attribution entries go in as desc.ours (plain
       models) and desc.owned (instances, LM Studio); COMMIT removes
       result.attr_remove[] and adds result.attr_add[] and bumps the generation.
       Only owned instances are ever unloaded: an instance loaded by another
       process using the same state directory is owned too; the operator's and
       LM Link peers' never. Without a state directory the ensurer remembers the
       instances it loaded in memory, as many as attr_arena_bytes holds (each
       its target key, model id and instance id with their NULs; one that does
       not fit is not remembered).
       The TTL cache keeps the wire id, so an LM Studio hit makes no request and
       still answers result.wire_id and lms_tier. A runtime with its own
       default deadline (LM Studio: 300 s, loads are slow) uses it when
       q.timeout_ms is 0. result.evicted[].id are what left the server (LM
       Studio: the unloaded instance ids).

       Limits: RSD_ENSURE_MAX_NAMES 8 (resolved names, detected runtimes, targets
       without /models/sse), RSD_ENSURE_SSE_POLL_MS 500, RSD_ENSURE_SSE_PENDING 4,
       RSD_ENSURE_SSE_EVENT_BYTES 512 (detection reads each answer's top level
       into the reconcile's max_tokens and its answers' buffer), the reconcile's
       limits (notices, ids, max_body_bytes: the driver section). Memory: create only.
       Threading: one ensurer per thread; any number of ensurers and processes
       may share a state directory (the lock serialises their mutations).
       Errors: those of the reconcile (driver), of the client (http client),
       RSD_ERR_RESOLVE, RSD_ERR_NOT_FOUND (no manageable runtime), RSD_ERR_NOMEM.

   ---- fleet: the pool running real processes (rsd_fleet) ---------------------
   rsd_fleet: the pool policy (rsd_pool, residency.h) running real processes (rsd_procs)
   with /health readiness probes over the HTTP client. One object, stepped by the host
   like the others (step / pollfds / next_deadline / next_event), no threads, no signals.
   The host sends each granted request to http://127.0.0.1:<port> itself and calls
   rsd_fleet_release when it is done (rsd_fleet_cancel when its client went away).
   Needs processes (compiled out by RSD_NO_PROCESS).
   Frame loop:
       rsd_fleet_desc d = {0};  d.pool.max_slots = 2;  d.procs.term_grace_ms = 5000;
       rsd_fleet *f = rsd_fleet_create(&d);                   (all allocation here)
       int m = rsd_fleet_add_model(f, &md);   md.pool = {id, reserve_bytes, ttl_ms,
                  max_in_flight, pinned}; md.spec = the rsd_proc_spec (copied)
       r = rsd_fleet_acquire(f, m, now, conn, &req, &port);
           RSD_OK: send to 127.0.0.1:port now | RSD_PENDING: wait for GRANT/FAIL on req
       each frame / after poll() on rsd_fleet_pollfds until rsd_fleet_next_deadline:
           rsd_fleet_step(f, now);
           while (rsd_fleet_next_event(f, &ev)) switch (ev.kind) {
           GRANT: send ev.user's request to 127.0.0.1:ev.port
           FAIL:  answer ev.user with ev.message (reason, command, last output lines)
           STARTING/READY/STOPPING/EXITED/CRASHED: log, status page }
       rsd_fleet_release(f, req, now) when a granted request is done (rsd_fleet_cancel
       when its client went away, granted or still waiting: a GRANT or FAIL for it that
       was not pulled yet is withdrawn, so none comes after the cancel).
       rsd_fleet_stop(f, now); step until rsd_fleet_idle(f); rsd_fleet_destroy(f).

   What it does with the pool's actions (residency.h's pool section) and the
   supervisor's events (proc):
       before      a model that is not resident is admitted (acquire, load), which may
                   evict another, rsd_procs_check runs on its spec: a missing or
                   non-executable binary, an unreadable model file or an incomplete
                   template fails the call at once with RSD_ERR_FLEET_START (the reason
                   in rsd_fleet_query_model's last_error), nothing stopped or started.
       SPAWN       rsd_procs_spawn(model's spec; spec.port 0 = a free loopback port),
                   STARTING. A spawn that fails (missing binary, EACCES, no free port,
                   template error) fails the model's waiting requests at once (no
                   deadline is waited for): CRASHED + FAIL(RSD_ERR_FLEET_START).
       PROBE       GET <health_path> on the child's host:port (a wildcard host is
                   probed on loopback), at most one in flight per process, each bounded
                   by probe_timeout_ms. The supervisor paces them (desc.procs.probe_first_ms
                   10, doubling to probe_max_ms 500); besides, a starting child that
                   writes output is probed again (at most every
                   RSD_FLEET_OUTPUT_PROBE_GAP_MS; at once when the new output holds
                   "model loaded", which llama-server logs the moment /health turns
                   200), so READY follows within a few ms instead of up to 500. That
                   text is all the fleet looks for in the log: /health still decides.
                   503, refused, timeout = keep waiting. After the first 200 one GET
                   /props asks for the child's own slot count (llama-server's
                   "total_slots", its -np; auto = 4) -- unless the spec says it: the
                   llama-server template (args NULL) with parallel > 0 and no -np or
                   --parallel among extra gives -np {parallel}, so READY comes at
                   the 200. READY then, and the process is
                   given at most that many requests at once (rsd_pool_set_slot_limit;
                   the smaller of it and the model's max_in_flight), the rest wait in
                   the pool -- not in the child's accept queue, where llama-server
                   leaves a connection until one of its HTTP threads is free (a
                   kept-alive idle connection holds one for its 5 s keep-alive). A
                   /props that fails or has no total_slots (another server) leaves
                   only max_in_flight.
                   With desc.ready_hold_ms the READY comes with .held = true and the
                   pool is not told yet: the model's requests keep waiting in the pool
                   (pool.state STARTING, counted in pool.waiting) while the host
                   prepares the child (e.g. restores its saved slots), until
                   rsd_fleet_ready_go(f, model) or ready_hold_ms after the READY (then
                   it goes by itself and logs FLEET_READY at warn). A held process that
                   exits, or that the host gives up (rsd_fleet_ready_restart(f, model,
                   why): its restore failed, say; the process is killed), starts the
                   model again: the waiting requests keep waiting for the new process
                   (CRASHED "... while its ready was held; starting it again"). A
                   second one in a row (RSD_FLEET_HELD_RESTARTS) fails them as a start
                   that failed ("... while its ready was held"). A STOP ends the hold
                   (the pool stops a process it never saw ready, and its stop may be
                   held as below).
       exit while starting (or START_TIMEOUT): the load failed; the model's waiting
                   requests FAIL(RSD_ERR_FLEET_START) at once with the exit status (or
                   "not ready within N ms") and the last output lines. CRASHED.
       exit while serving: CRASHED (RSD_ERR_POOL_CRASHED); the slot and its bytes are
                   free at once; requests running there are orphaned (release or
                   cancel them as usual); the next request respawns the model.
       STOP        rsd_procs_stop (SIGTERM to its process group, SIGKILL after
                   desc.procs.term_grace_ms): STOPPING (.why), then EXITED once reaped.
                   With desc.stop_hold_ms a READY process is held first: STOPPING
                   (.why, .port, .held = true), no new grant, and the SIGTERM waits
                   for rsd_fleet_stop_go(f, model) or stop_hold_ms, whichever comes
                   first (the host saves the child's state meanwhile, e.g. its slots).
                   The hold is part of the grace: it lasts at most half of
                   term_grace_ms, and the SIGKILL comes term_grace_ms after the STOP,
                   held or not, so a slow save never makes a stop longer.
       GRANT/FAIL  GRANT (.port) / FAIL (.result, .message) events. FAILs that the pool
                   reports as ERR_POOL_LOAD_FAILED carry RSD_ERR_FLEET_START.

   A model from the fleet's view (rsd_fleet_query_model: pool.state, pid, port):
       not resident --acquire/load, slot free or an idle LRU victim stopped--> STARTING
       STARTING --/health 200--> READY --idle LRU victim, TTL, trim, unload, stop-->
           STOPPING --reaped--> not resident
       (with ready_hold_ms: the READY event at the 200, pool.state READY at the go)
       STARTING --spawn error, exit, start deadline--> not resident (waiters FAIL)
       READY --exits unasked--> not resident (CRASHED); the next request respawns it
   A busy model (granted requests not released) is never evicted, trimmed or TTL-stopped.

   rsd_fleet_create(desc) -> fleet | NULL
       desc.pool as rsd_pool_desc (its .models ignored: use desc.models or add_model);
       desc.procs as rsd_procs_desc (max_procs 0 = RSD_POOL_MAX_SLOTS); probe_timeout_ms.
       The allocator and logger are passed on to the pool, the supervisor and the probe
       client unless those set their own. A probe that finds a starting child's port not
       yet bound is no error: it logs FLEET_WAITING (debug) "fleet: waiting for ID (port
       N) to listen"; a watchdog poll that cannot connect logs HTTP_CONNECT_FAILED (warn).
   rsd_fleet_add_model(f, md) -> index | RSD_ERR_ARG (bad id, health_path not starting
       with '/' or over RSD_FLEET_HEALTH_PATH_MAX, bad vars, a probe_bearer with control
       bytes) | RSD_ERR_CAPACITY (table full, or the spec's strings and arrays over
       RSD_FLEET_SPEC_BYTES). health_path NULL = "/health". probe_bearer: the child's own
       API key, sent with its /health and /props probes and watchdog polls (llama-server
       run with --api-key answers /props 401 without it, and its slot count is then
       unknown).
   rsd_fleet_set_model(f, m, md, now): model m (same id) gets md's spec and pool
       settings (reserve_bytes, ttl_ms, max_in_flight, pinned); its start backoff and
       last failure are forgotten. The next start uses the new spec; a process that
       runs keeps its command (rsd_pool_unload with RSD_POOL_UNLOAD_DRAIN restarts it
       once idle). Errors as add_model; on an error nothing changed.
   rsd_fleet_acquire(f, m, now, user, &req, &port): RSD_OK (port set), RSD_PENDING, or
       an error (no handle): RSD_ERR_FLEET_START (the check before a start failed, see
       "before" above), the pool's RSD_ERR_POOL_BACKOFF (its last start failed: no new
       one before the model's retry_at_ms; 1 s doubling to 60 s, desc.pool.
       start_backoff_ms; rsd_fleet_load or rsd_pool_reset_backoff clear it; models
       evicted for a start that fails are loaded again), RSD_ERR_POOL_NO_FIT
       (reservation over the whole budget: at once, nothing started),
       RSD_ERR_POOL_PINNED, RSD_ERR_POOL_STOPPED, RSD_ERR_POOL_QUEUE_FULL,
       RSD_ERR_CAPACITY, RSD_ERR_ARG.
   rsd_fleet_acquire_ex(f, m, flags, now, user, &req, &port): with the pool's acquire
       flags; RSD_POOL_ACQUIRE_EXCLUSIVE runs the request alone on m's process once it
       has drained (benchmarks, calibration); other models keep flowing.
   rsd_fleet_pool(f): the embedded pool, called directly where the fleet adds nothing:
       rsd_pool_unload (-1 = every model), rsd_pool_configure (the most resident
       processes; idle excess stopped, LRU first), rsd_pool_reset_backoff, the event
       log, rsd_pool_set_vram (a measured total, and what others hold there; a reading
       only admits: nothing running is stopped for it; rsd_devmem reads one), and the
       byte leases rsd_pool_lease_take / rsd_pool_query_lease / rsd_pool_lease_return
       (a VRAM lease for a workload outside the fleet: idle, unpinned processes stopped LRU first, STOPPING
       with why "lease", never a busy or pinned one; starts that would break it wait;
       returning it or its ttl gives the bytes back and, with lease_desc.restore, restarts
       what it stopped; needs a byte budget). The next rsd_fleet_step carries out the
       STOPs and SPAWNs they queue (rsd_fleet_next_deadline is 0 until then).
       Requests, preloads and the stop go through the fleet's own calls below; the
       pool is never stepped, nor its actions pulled, by the host.
   rsd_fleet_query_model(f, m, &info): pool view, pid, port, times, last_result,
       last_error (the message of its last failed start or crash), retry_at_ms,
       exit_code (of the process that failed: its status, 128+N for signal N, 127 when
       it never ran).
   rsd_fleet_query(f, &info): the fleet: its models, its processes by state (starting,
       ready, held readies, stopping, held stops), the events waiting and dropped, stopped, and the
       pool's rsd_pool_info (info.pool).
   Watchdog (desc.watchdog_*; off by default): every READY process is polled with GET
       health_path each watchdog_interval_ms (a step of rsd_fleet_step on the now_ms
       given, never a sleep; each poll bounded by the smaller of the interval and
       probe_timeout_ms). watchdog_failures (3) failed polls in a row -- not 200:
       timeout, refused, an error status -- or watchdog_errors (5) answers in a row
       with a 5xx other than 503 that the host reports with rsd_fleet_report(f, m,
       port, status, now) (502 for a failed connection; any other status resets the
       count), and the process is SIGKILLed: CRASHED (RSD_ERR_POOL_CRASHED) with the
       message "restarted by the watchdog (N of at most R in a row, in D ms): why"; its
       slot is free at once and the model is loaded again after D = 1 s doubling to
       60 s. After watchdog_restarts (5) restarts in a row -- a process up and healthy
       for 60 s starts the count over, and so does rsd_fleet_set_model -- it is left
       stopped ("stopped by the watchdog, not restarted"); the next acquire starts it
       as usual. Polls never count as use: no grant, no idle timer reset.
   rsd_fleet_release / rsd_fleet_cancel / rsd_fleet_load / rsd_fleet_stop: as
       rsd_pool_release / cancel / preload / stop; each applies the pool's resulting
       actions at once (a SPAWN runs inside the call: about 1-2 ms; the GRANT a release
       frees is waiting when it returns). cancel also withdraws a GRANT or FAIL not
       pulled yet, load and acquire check the model's command first, stop refuses later
       work.
   rsd_fleet_step(f, now): supervisor step and events, probe I/O, pool timers (idle
       TTL and the starvation wait bound run on the now_ms given), pool actions, until nothing moves;
       returns the events waiting (>= 0), RSD_ERR_ARG.
   rsd_fleet_stop_go(f, m, now): model m's held stop (desc.stop_hold_ms) goes on now:
       its SIGTERM is sent, its SIGKILL due term_grace_ms after the STOP. RSD_OK, RSD_ERR_NOT_FOUND (m holds no stop), RSD_ERR_ARG.
   rsd_fleet_ready_go(f, m, now): model m's held ready (desc.ready_hold_ms) goes on now:
       the pool is told, and the GRANTs of its waiting requests are queued when it
       returns. RSD_OK, RSD_ERR_NOT_FOUND (m holds no ready), RSD_ERR_ARG.
   rsd_fleet_ready_restart(f, m, why, now): model m's held ready is given up: its process
       is killed (why is logged and quoted) and the model starts again, as above.
       RSD_OK, RSD_ERR_NOT_FOUND (m holds no ready), RSD_ERR_ARG.
   rsd_fleet_pollfds(f, out, cap): child pipes and pidfds (POLLIN) then the probe
       sockets; returns how many it wants (may exceed cap: only cap written).
   rsd_fleet_next_deadline(f): 0 while events wait to be pulled, else the earliest of
       the supervisor's, the pool's and the probes' timers; RSD_NO_DEADLINE = none.
   rsd_fleet_next_event(f, &ev): GRANT/FAIL are queued apart from the narration
       (STARTING..CRASHED) and never crowded out by it; pulled in order. Strings (model_id,
       message) stay valid until the next rsd_fleet_* call.
   rsd_fleet_idle(f): no process of ours alive. rsd_fleet_destroy SIGKILLs and reaps
       what is left (bounded by RSD_PROC_DESTROY_WAIT_MS per child) and frees.
   rsd_fleet_pool / rsd_fleet_procs: the embedded objects, for the pool's event log
       (desc.pool.event_log), rsd_procs_tail; do not drive them directly.

   Limits: RSD_FLEET_MAX_MODELS (64) models, RSD_POOL_MAX_SLOTS (16) processes,
   RSD_FLEET_SPEC_BYTES (4096) of copied spec per model, RSD_FLEET_MESSAGE_MAX (1024)
   per message (command cut to 320 bytes, last 8 output lines cut from the front).
   Events: GRANT/FAIL queue 2 x max_requests + 16, narration queue 128; when full the
   oldest is dropped and counted (rsd_fleet_query's events_dropped; log item FLEET_EVENT_DROPPED):
   pull every step. Memory: one block of about 415 KB + 195 bytes per max_requests, plus
   the pool's, the supervisor's (about 410 KB by default) and the probe client's (about
   2.9 MB by default; tests/test_sizes_shell.c measures them all). Errors:
   RSD_ERR_FLEET_START (-110) in FAIL/CRASHED events, the pool's
   RSD_ERR_POOL_*, RSD_ERR_ARG, RSD_ERR_CAPACITY, RSD_ERR_STATE (the embedded pool was
   given models directly). Threading: one fleet per thread. Windows: as the supervisor
   ("Windows" in the proc manual): rsd_fleet_pollfds gives only the probe sockets, and
   rsd_fleet_next_deadline includes the supervisor's pipe timer.

   ---- devmem: device memory probe ---------------------------------------------
   What each device holds now, for a byte budget: total, used and free bytes per device,
   which pool it is, and how much of it the caller's own processes hold. A plain read:
   local procfs/sysfs files and NVML calls, no thread, no wait, nothing sampled in the
   background. Whoever calls it decides when (rsd-serve: at start, on reload and when it
   admits a start); a reading never stops anything by itself. Compiled out by
   RSD_NO_DEVMEM.

   rsd_devmem_create(&desc) -> rsd_devmem*
       Allocates the probe (desc.allocator) and loads NVML once, at run time: dlopen
       ("libnvidia-ml.so.1"), LoadLibrary("nvml.dll") on Windows, or desc.nvml_path, else
       $RESIDENCY_NVML unless desc.ignore_env ("" = no NVML). Nothing is linked at build
       time (glibc before 2.34 keeps dlopen in libdl: link -ldl there, or build with
       RSD_NO_DEVMEM). It resolves nvmlInit_v2, nvmlDeviceGetCount_v2,
       nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetMemoryInfo,
       nvmlDeviceGetComputeRunningProcesses and nvmlShutdown, and calls nvmlInit_v2; a
       missing library, symbol or failed init leaves NVML out, and
       rsd_devmem_nvml_status says why in words ("" while NVML is in use). desc.sys_root
       ("/sys") and desc.proc_root ("/proc") let a test point the probe at a fake tree.
       NULL only for a bad desc (allocator hooks not both or neither, a path of
       RSD_DEVMEM_PATH_MAX bytes or more) or no memory. rsd_devmem_footprint(&desc):
       the bytes it allocates (one block), 0 for such a desc.
   rsd_devmem_read(dm, own_pids, n_pids, out, cap) -> entries, or RSD_ERR_ARG
       Fills out with, in this order (at most cap, at most RSD_DEVMEM_MAX_DEVICES):
         nvmlN   each NVIDIA GPU that reports its memory (one that answers
                 NOT_SUPPORTED is left out): pool "vram"; own_bytes is the sum of
                 usedGpuMemory over the compute processes whose pid is in own_pids
                 (own_known false when the list fails, is longer than 64, or a process
                 of ours reads NVML_VALUE_NOT_AVAILABLE, as under Windows' WDDM).
         cardN   each amdgpu card (N < 16) with mem_info_vram_total and _used, or
                 mem_info_gtt_total and _used, under SYS/class/drm/cardN/device. A card
                 whose VRAM names its vendor (mem_info_vram_vendor) is discrete: pool
                 "vram", figures from mem_info_vram_*. One without a vendor, or without
                 VRAM files, is an APU (Strix Halo, Phoenix...): its VRAM is a carve-out
                 of host memory, so it is pool "host/unified" and its figures also go
                 into the host entry. gtt_* carry mem_info_gtt_* either way. A discrete
                 card's own_bytes comes from the kernel's DRM usage stats of the own
                 pids (PROC/PID/fdinfo/FD: drm-pdev, the card's PCI address, i.e. the
                 last component of its SYS/class/drm/cardN/device link; drm-client-id,
                 each client once; drm-memory-vram, else drm-resident-vram); own_known
                 is false where none of them has a client on that card (a kernel
                 without those stats, or no own pid uses it): others_bytes = used. Not
                 on Windows.
         host    PROC/meminfo: total = MemTotal, free = MemAvailable (MemFree on
                 a kernel without it), plus every APU carve-out (the kernel's MemTotal
                 leaves it out); own_bytes = the VmRSS of each own pid
                 (PROC/PID/status; a pid that is gone counts 0). unified is set on an
                 NVIDIA Tegra (the device tree's compatible list, SYS/firmware/
                 devicetree/base/compatible, names "nvidia,tegra"; NVML is not loaded
                 there, source RSD_DEVMEM_TEGRA) and beside an AMD APU: the GPU's pool
                 is this one. On Windows: GlobalMemoryStatusEx, own_known false. Absent
                 where neither is there (macOS).
       Every entry holds used <= total (a larger reported used is cut to total), free =
       total - used and own + others = used. A file that is missing, empty, not a clean
       number, larger than 2^64 - 1, or longer than RSD_DEVMEM_FILE_MAX (16 KiB) is not
       a figure: its device is left out. RSD_ERR_ARG: dm or out NULL, cap < 0, n_pids
       outside 0..RSD_DEVMEM_MAX_PIDS (64), or own_pids NULL with n_pids > 0.
   rsd_devmem_pick(devs, n, &out)
       The one figure a budget is set from: the vram entries summed (name "vram xN"
       when several; own_known only if every one knew), else the host entry. RSD_OK or
       RSD_ERR_NOT_FOUND.
   rsd_devmem_parse_meminfo(text, len, key, &bytes), rsd_devmem_parse_u64(text, len, &v)
       The parsers under the reads, fuzzed (fuzz/fuzz_devmem.c): "Key:<blanks>N[ unit]"
       lines (kB and KiB = 1024 bytes, MiB = 2^20, no unit = bytes; whole key names only, the first match wins, anything
       else on the line is RSD_ERR_PAYLOAD) and a sysfs number (digits, then only
       whitespace). Results RSD_OK, RSD_ERR_NOT_FOUND, RSD_ERR_PAYLOAD,
       RSD_ERR_OVERFLOW, RSD_ERR_ARG; the value is 0 unless RSD_OK.
   rsd_devmem_destroy(dm): nvmlShutdown, unload, free. One probe per thread.

   PLATFORM NOTES
       POSIX (Linux, macOS, BSD) and Windows (see "Windows" in the proc manual). The process-wide SIGPIPE
       disposition is never touched: sends use MSG_NOSIGNAL (SO_NOSIGPIPE where
       that is the mechanism). No SIGCHLD handler is ever installed. Every
       descriptor the library opens (sockets, accepted connections, pipes, lock
       and state files) is close-on-exec; the implementation refuses to build
       (#error) where O_CLOEXEC or FD_CLOEXEC is missing rather than leak them
       into spawned children.
*/
#if defined(RSD_NO_PROC) && !defined(RSD_NO_PROCESS)
#define RSD_NO_PROCESS 1
#endif
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

/* ==== url ================================================================= */
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
/* ==== url end ============================================================= */

/* ==== httpparse =========================================================== */
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
    bool other_codings;      /* Transfer-Encoding names a coding besides chunked (gzip,
                                ...), which nothing here decodes: the server answers
                                501, the client fails with RSD_ERR_PROTOCOL */
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
/* ==== httpparse end ======================================================= */

/* ==== http client ========================================================= */
/* Poll entry with the layout of POSIX `struct pollfd` {int fd; short events; short
   revents;} (the implementation checks size, offsets and flag values at compile time),
   so an array of these can be handed to poll() with a cast. */
#if defined(_WIN32)
/* Windows: the layout of WSAPOLLFD {SOCKET fd; SHORT events; SHORT revents;}, flags
   equal to POLLRDNORM / POLLWRNORM, so the array goes to WSAPoll() with a cast. */
typedef struct rsd_pollfd {
    uintptr_t fd;   /* a SOCKET */
    short events;   /* RSD_POLLIN / RSD_POLLOUT */
    short revents;  /* filled by the host's WSAPoll() */
} rsd_pollfd;
enum { RSD_POLLIN = 0x0100, RSD_POLLOUT = 0x0010 };  /* equal to POLLRDNORM / POLLWRNORM */
#else
typedef struct rsd_pollfd {
    int fd;
    short events;   /* RSD_POLLIN / RSD_POLLOUT */
    short revents;  /* filled by the host's poll() */
} rsd_pollfd;
enum { RSD_POLLIN = 0x001, RSD_POLLOUT = 0x004 };  /* equal to POLLIN / POLLOUT */
#endif

/* Waits up to timeout_ms (-1 = no limit) until one of fds is ready: poll(), or
   WSAPoll() on Windows; with nfds 0 it only sleeps (WSAPoll refuses an empty set).
   Returns how many are ready (0 = timeout), -1 with errno. */
RSD_API int rsd_poll(rsd_pollfd *fds, int nfds, int timeout_ms);

#define RSD_TIMEOUT_NONE 0xFFFFFFFFu       /* a *_timeout_ms field: never time out */

/* Client limits and defaults (a zeroed desc field means the default). */
enum {
    RSD_HTTP_MAX_HOST_BYTES = 255,             /* host name / address in a URL */
    RSD_HTTP_MAX_CONNS_LIMIT = 4095,           /* upper bound for max_conns / max_requests */
    RSD_HTTP_CLIENT_DEFAULT_MAX_REQUESTS = 8,  /* concurrent request slots */
    RSD_HTTP_CLIENT_DEFAULT_MAX_CONNS = 8,     /* sockets (in flight + kept alive) */
    RSD_HTTP_DEFAULT_MAX_HEADER_BYTES = 16384, /* response head */
    RSD_HTTP_DEFAULT_MAX_BODY_BYTES = 1048576, /* response body per slot */
    RSD_HTTP_DEFAULT_MAX_REQUEST_BYTES = 65536,/* request head + body, sent in one write */
    RSD_HTTP_DEFAULT_CONNECT_TIMEOUT_MS = 5000,
    RSD_HTTP_DEFAULT_TOTAL_TIMEOUT_MS = 60000,
    RSD_HTTP_DEFAULT_IDLE_TIMEOUT_MS = 30000,  /* kept-alive socket closed after this idle time */
    RSD_SSE_MAX_NAME = 64                      /* SSE `event:` / `id:` values kept (longer: cut) */
};

/* ---- SSE line reader (pure, incremental; no I/O, no allocation) ---- */
/* One dispatched server-sent event; views valid until the next rsd_sse_feed. */
typedef struct rsd_sse_event {
    rsd_str event;  /* `event:` field, empty when absent */
    rsd_str data;   /* `data:` lines joined with '\n' */
    rsd_str id;     /* last `id:` seen (persists across events, as in the spec) */
} rsd_sse_event;

/* Reader state; set up with rsd_sse_init. Field meanings are internal. */
typedef struct rsd_sse_reader {
    char *buf;           /* caller's data buffer */
    size_t cap;
    size_t data_len;
    uint32_t data_lines;
    uint32_t event_len, id_len, field_len;
    char event[RSD_SSE_MAX_NAME];
    char id[RSD_SSE_MAX_NAME];
    char field[8];
    int state;
    int target;
    bool skip_lf;
    bool overflow;
} rsd_sse_reader;

/* Prepares a reader that collects `data:` into buf[0..cap). */
RSD_API void rsd_sse_init(rsd_sse_reader *r, char *buf, size_t cap);
/* Consumes bytes from p[0..n) until an event completes. *used = bytes consumed.
   RSD_OK: *ev holds an event (call again with p + *used). RSD_PENDING: all consumed,
   no event yet. RSD_ERR_TOO_LARGE: an event's data overflowed cap; it is dropped, and
   reading continues with the next event on the next call. Handles \n, \r\n and \r. */
RSD_API int rsd_sse_feed(rsd_sse_reader *r, const char *p, size_t n, size_t *used,
                         rsd_sse_event *ev);

/* ---- client ---- */
typedef struct rsd_http_client rsd_http_client;
/* Handle of an in-flight request: 0 = invalid; see HANDLES in residency.h. */
typedef struct rsd_http_req_h { uint32_t id; } rsd_http_req_h;

/* Client configuration; zeroed = defaults. Every buffer is allocated by create. */
typedef struct rsd_http_client_desc {
    int max_requests;             /* request slots (in flight + unpulled events); 0 = 8 */
    int max_conns;                /* sockets, in flight + kept alive; 0 = 8 */
    size_t max_header_bytes;      /* response head limit; 0 = 16 KiB */
    size_t max_body_bytes;        /* per-slot body buffer and limit; 0 = 1 MiB */
    size_t max_request_bytes;     /* request head + body limit; 0 = 64 KiB */
    uint32_t connect_timeout_ms;  /* per-request default; 0 = 5000; RSD_TIMEOUT_NONE = never */
    uint32_t total_timeout_ms;    /* per-request default; 0 = 60000; RSD_TIMEOUT_NONE = never */
    uint32_t idle_timeout_ms;     /* kept-alive socket lifetime when idle; 0 = 30000 */
    bool no_keepalive;            /* close every connection after its response */
    /* Name resolution for the non-blocking path (never called for numeric hosts or
       "localhost"): write a numeric address into out (NUL-terminated), return 0, or <0. */
    int (*resolve_fn)(void *user, const char *host, char *out, size_t cap);
    void *resolve_user;
    rsd_allocator allocator;
    rsd_logger logger;
    /* TLS (only with RSD_HTTP_MBEDTLS; ignored otherwise): */
    const char *tls_ca_file;      /* PEM CA bundle; NULL = the system bundle (see the manual) */
    bool tls_insecure_skip_verify;/* no certificate / host name check (logged as TLS_INSECURE) */
    bool tls_off;                 /* do not set TLS up at all: https = RSD_ERR_TLS_UNAVAILABLE */
} rsd_http_client_desc;

/* One request. Everything is copied by rsd_http_send except body_buf and user. */
typedef struct rsd_http_request {
    const char *method;           /* NULL = "GET" */
    const char *url;              /* "http://127.0.0.1:8080/v1/models" */
    const char *bearer_token;     /* sends Authorization: Bearer <token>; never logged */
    const rsd_http_header *headers; /* extra headers (name/value views), copied */
    size_t num_headers;
    const char *content_type;     /* sent when non-NULL */
    const void *body;             /* copied; Content-Length is always sent for a body */
    size_t body_len;
    uint32_t connect_timeout_ms;  /* 0 = client default; RSD_TIMEOUT_NONE = never */
    uint32_t total_timeout_ms;    /* 0 = client default; RSD_TIMEOUT_NONE = never */
    char *body_buf;               /* optional: receive the body here (live until the event) */
    size_t body_cap;              /* its size; more body = RSD_ERR_BODY_TOO_LARGE */
    /* Optional streaming: decoded body bytes are handed over from inside step instead of
       being kept (the event's body is then empty). */
    void (*on_body)(void *user, const char *data, size_t len);
    /* Optional: body parsed as text/event-stream, one call per event from inside step. */
    void (*on_sse)(void *user, const rsd_sse_event *ev);
    uint64_t max_stream_bytes;    /* streamed/SSE body limit; 0 = unlimited */
    bool retry_any_method;        /* a POST/PATCH too is resent once when a kept-alive socket
                                     closed before any response byte (see Stale socket) */
    bool quiet;                   /* its failure is not logged (the event says it) */
    void *user;                   /* returned in the event and passed to the callbacks */
} rsd_http_request;

/* A completed request (or the response of rsd_http_request_sync). Views point into the
   client and stay valid until the next call on that client. */
typedef struct rsd_http_event {
    rsd_http_req_h req;
    int result;                   /* RSD_OK (any HTTP status) or an error */
    int sys_errno;                /* errno behind an I/O or connect error, else 0 */
    int status;                   /* HTTP status, 0 when no response head arrived */
    const rsd_http_header *headers;
    size_t num_headers;
    rsd_str body;                 /* whole body (empty when streamed) */
    uint64_t body_bytes;          /* decoded body bytes received (streamed ones too) */
    bool reused;                  /* went over a kept-alive connection */
    bool retried;                 /* was retried once on a fresh connection */
    int tls_error;                /* RSD_ERR_TLS*: the mbedTLS error code (< 0), else 0 */
    uint32_t tls_verify_flags;    /* RSD_ERR_TLS_VERIFY: mbedTLS MBEDTLS_X509_BADCERT_* flags */
    void *user;
} rsd_http_event;

/* The response head of a request still in flight (rsd_http_client_query_req). Views point
   into the request's slot: valid until its event has been pulled and released (the
   next call on the client after the rsd_http_next_event that returned it). */
typedef struct rsd_http_req_info {
    int status;                   /* final status (interim 1xx are never reported) */
    int minor_version;            /* 1 for HTTP/1.1, 0 for HTTP/1.0 */
    rsd_str reason;
    const rsd_http_header *headers;
    size_t num_headers;
    rsd_http_framing framing;     /* content_length / chunked / close, as announced */
    bool bodyless;                /* HEAD, 1xx, 204, 304: no body follows */
    bool done;                    /* the request has completed (its event is waiting) */
    bool paused;                  /* reading is paused (rsd_http_pause) */
    uint64_t body_bytes;          /* decoded body bytes received so far */
} rsd_http_req_info;

/* Counters for tests and diagnostics. */
typedef struct rsd_http_client_info {
    uint64_t requests, connects, reuses, retries, timeouts, errors;
    uint64_t stale;               /* kept-alive sockets found closed by the peer before reuse */
} rsd_http_client_info;

/* Monotonic clock in ms (CLOCK_MONOTONIC); the shell's clock for blocking wrappers. */
RSD_API uint64_t rsd_now_ms(void);
/* Creates a client, allocating every buffer now; NULL on a bad desc or no memory (logged). */
RSD_API rsd_http_client *rsd_http_client_create(const rsd_http_client_desc *desc);
/* The bytes rsd_http_client_create(desc) allocates, TLS apart (with RSD_HTTP_MBEDTLS and
   not tls_off, create also allocates TLS's state); 0 for a desc it refuses. */
RSD_API size_t rsd_http_client_footprint(const rsd_http_client_desc *desc);
/* Closes every socket and frees everything; NULL is fine. */
RSD_API void rsd_http_client_destroy(rsd_http_client *c);
/* Validates and queues a request (no I/O: connecting and sending happen in step).
   RSD_OK and *out, or RSD_ERR_ARG / RSD_ERR_URL / RSD_ERR_RESOLVE / RSD_ERR_TOO_LARGE /
   RSD_ERR_CAPACITY (all slots busy) / RSD_ERR_TLS_UNAVAILABLE (https without
   RSD_HTTP_MBEDTLS, or tls_off) / RSD_ERR_TLS (https and no CA bundle could be loaded). */
RSD_API int rsd_http_send(rsd_http_client *c, const rsd_http_request *req, uint64_t now_ms,
                          rsd_http_req_h *out);
/* Does all ready work without blocking: connects, writes, reads, timeouts. Returns the
   number of completed events waiting to be pulled (>= 0). Tries every socket. */
RSD_API int rsd_http_client_step(rsd_http_client *c, uint64_t now_ms);
/* Like step, after the host's own poll() on the entries from rsd_http_client_pollfds:
   sockets listed with revents == 0 are skipped (saves syscalls). */
RSD_API int rsd_http_client_step_polled(rsd_http_client *c, uint64_t now_ms,
                                        const rsd_pollfd *fds, int nfds);
/* Pulls the oldest completion; false when none. Views valid until the next call on c. */
RSD_API bool rsd_http_next_event(rsd_http_client *c, rsd_http_event *ev);
/* Writes up to cap poll entries for the sockets step waits on; returns how many it
   wants (may exceed cap: then only cap were written). */
RSD_API int rsd_http_client_pollfds(const rsd_http_client *c, rsd_pollfd *out, int cap);
/* Earliest absolute time (ms, the callers' clock) step must run; 0 = now (a completion
   waits to be pulled, or a queued request can start); RSD_NO_DEADLINE = only socket
   readiness matters. */
RSD_API uint64_t rsd_http_client_next_deadline(const rsd_http_client *c);
/* Aborts a request: its socket is closed and its event reports RSD_ERR_CANCELLED.
   RSD_ERR_NOT_FOUND for a stale handle or one already completed. */
RSD_API int rsd_http_cancel(rsd_http_client *c, rsd_http_req_h h);
/* Stops (paused = true) or resumes reading a request's response: backpressure for a
   streamed body (e.g. a proxy whose downstream is full). Takes effect at once, also
   when called from inside on_body / on_sse: no further callback until resumed. Timeouts
   keep running. RSD_OK or RSD_ERR_NOT_FOUND. */
RSD_API int rsd_http_pause(rsd_http_client *c, rsd_http_req_h h, bool paused);
/* The response head of request h as soon as it has arrived, also while the body is
   still streaming (call it from on_body too). RSD_OK and *out; RSD_PENDING while no
   head has arrived; the request's error (< 0) when it completed without a head;
   RSD_ERR_NOT_FOUND for a stale handle; RSD_ERR_ARG for NULLs. */
RSD_API int rsd_http_client_query_req(const rsd_http_client *c, rsd_http_req_h h, rsd_http_req_info *out);
/* Blocking request: resolves names with getaddrinfo, then loops poll() + step on
   rsd_now_ms() until this request completes. Returns resp->result; resp's views are
   valid until the next call on c. Other requests' events stay queued for next_event. */
RSD_API int rsd_http_request_sync(rsd_http_client *c, const rsd_http_request *req,
                                  rsd_http_event *resp);
/* The client's totals (counters). */
RSD_API void rsd_http_client_query(const rsd_http_client *c, rsd_http_client_info *out);
/* Closes the idle kept-alive sockets to host:port (numeric or "localhost"); how many,
   or RSD_ERR_ARG / RSD_ERR_RESOLVE. */
RSD_API int rsd_http_client_close_idle(rsd_http_client *c, const char *host, uint16_t port);

/* ==== http client end ===================================================== */

/* ==== http server ========================================================= */
/* Server limits and defaults (a zeroed desc field means the default). */
enum {
    RSD_HTTP_SERVER_DEFAULT_MAX_CONNS = 32,
    RSD_HTTP_SERVER_DEFAULT_MAX_HEADER_BYTES = 8192,    /* over: 431 */
    RSD_HTTP_SERVER_DEFAULT_MAX_BODY_BYTES = 65536,     /* over: 413 */
    RSD_HTTP_SERVER_DEFAULT_MAX_RESPONSE_BYTES = 262144,/* per-connection send buffer */
    RSD_HTTP_SERVER_DEFAULT_IDLE_TIMEOUT_MS = 30000,    /* idle keep-alive connection */
    RSD_HTTP_SERVER_DEFAULT_REQUEST_TIMEOUT_MS = 10000, /* a started request must complete */
    RSD_HTTP_SERVER_DEFAULT_FIRST_BYTE_TIMEOUT_MS = 5000, /* a new connection's first byte */
    RSD_HTTP_SERVER_DEFAULT_HEAD_TIMEOUT_MS = 5000,     /* first byte to the end of the head */
    RSD_HTTP_SERVER_DEFAULT_BODY_TIMEOUT_MS = 5000,     /* longest gap between body bytes */
    RSD_HTTP_SERVER_ACCEPT_BACKOFF_MS = 1000            /* out of descriptors: listener paused */
};

typedef struct rsd_http_server rsd_http_server;
/* Handle of a received request awaiting its answer; 0 = invalid. */
typedef struct rsd_http_sreq_h { uint32_t id; } rsd_http_sreq_h;

/* Server configuration; zeroed = defaults. Every buffer is allocated by create. */
typedef struct rsd_http_server_desc {
    const char *bind_host;        /* numeric address; NULL = "127.0.0.1" */
    uint16_t port;                /* 0 = ephemeral: read it back with rsd_http_server_port */
    int max_conns;                /* 0 = 32; when full, a new client takes the place of the
                                     oldest idle or head-incomplete one, else waits in the backlog */
    size_t max_header_bytes;      /* request head limit; 0 = 8 KiB */
    size_t max_body_bytes;        /* request body limit; 0 = 64 KiB */
    size_t max_response_bytes;    /* per-connection send buffer; 0 = 256 KiB */
    uint32_t idle_timeout_ms;     /* 0 = 30000; RSD_TIMEOUT_NONE = never */
    uint32_t request_timeout_ms;  /* head+body of a started request; 0 = 10000 */
    uint32_t first_byte_timeout_ms; /* accept to the first byte; 0 = 5000; RSD_TIMEOUT_NONE =
                                     only idle_timeout_ms */
    uint32_t head_timeout_ms;     /* first byte to the end of the head; 0 = 5000;
                                     RSD_TIMEOUT_NONE = only request_timeout_ms */
    uint32_t body_timeout_ms;     /* longest wait for the next byte of a body being read;
                                     0 = 5000; RSD_TIMEOUT_NONE = only request_timeout_ms */
    rsd_allocator allocator;
    rsd_logger logger;
} rsd_http_server_desc;

typedef enum rsd_http_server_event_type {
    RSD_HTTP_SEV_NONE = 0,
    RSD_HTTP_SEV_REQUEST,   /* a complete request: answer it now or later */
    RSD_HTTP_SEV_CLOSED,    /* the client of an unanswered / streaming request went away */
    RSD_HTTP_SEV_NUM
} rsd_http_server_event_type;

/* Server event. head and body stay valid until the request is answered (respond or
   stream_end) or its CLOSED event has been pulled. */
typedef struct rsd_http_server_event {
    int type;                            /* rsd_http_server_event_type */
    rsd_http_sreq_h req;
    const rsd_http_request_head *head;   /* NULL for CLOSED */
    rsd_str body;                        /* decoded request body */
} rsd_http_server_event;

typedef struct rsd_http_server_info {
    uint64_t accepts, requests, responses, bad_requests, closes;
    uint64_t evictions;      /* connections dropped to make room for a new client */
    uint64_t accept_pauses;  /* times the listener was paused (out of descriptors) */
} rsd_http_server_info;

#ifndef RSD_NO_HTTP_SERVER /* compiled out: no declarations (RSD_STATIC would warn of them) */
/* Binds, listens and allocates every buffer; NULL on failure (logged with errno). */
RSD_API rsd_http_server *rsd_http_server_create(const rsd_http_server_desc *desc);
/* The bytes rsd_http_server_create(desc) allocates (its 3 blocks); 0 for a desc it refuses
   (the address is checked, nothing is bound). */
RSD_API size_t rsd_http_server_footprint(const rsd_http_server_desc *desc);
/* Closes every socket and frees everything; NULL is fine. */
RSD_API void rsd_http_server_destroy(rsd_http_server *s);
/* The bound port (useful after port 0). */
RSD_API uint16_t rsd_http_server_port(const rsd_http_server *s);
/* Accepts, reads, parses, writes and expires without blocking; returns the number of
   events waiting to be pulled. Bad requests are answered (400/413/431) and closed here. */
RSD_API int rsd_http_server_step(rsd_http_server *s, uint64_t now_ms);
/* Like step after the host's poll() on rsd_http_server_pollfds entries (skips idle ones). */
RSD_API int rsd_http_server_step_polled(rsd_http_server *s, uint64_t now_ms,
                                        const rsd_pollfd *fds, int nfds);
/* Pulls the next event; false when none. */
RSD_API bool rsd_http_server_next_event(rsd_http_server *s, rsd_http_server_event *ev);
/* Re-reads a pending request (e.g. a deferred one); RSD_OK, or RSD_ERR_NOT_FOUND /
   RSD_ERR_CLOSED. */
RSD_API int rsd_http_server_query_req(const rsd_http_server *s, rsd_http_sreq_h h,
                                      rsd_http_server_event *out);
/* Poll entries (listen socket + connections); returns how many it wants. */
RSD_API int rsd_http_server_pollfds(const rsd_http_server *s, rsd_pollfd *out, int cap);
/* Earliest absolute time step must run (timeouts); 0 while events wait to be pulled;
   RSD_NO_DEADLINE if none. */
RSD_API uint64_t rsd_http_server_next_deadline(const rsd_http_server *s);
/* Answers a request with a Content-Length response (headers are extra lines, e.g.
   Content-Type). Writes what the socket takes now; step sends the rest. RSD_OK,
   RSD_ERR_CLOSED (client gone), RSD_ERR_NOT_FOUND (stale handle), RSD_ERR_TOO_LARGE
   (over max_response_bytes), RSD_ERR_ARG (bad status/header). */
RSD_API int rsd_http_respond(rsd_http_server *s, rsd_http_sreq_h h, int status,
                             const rsd_http_header *headers, size_t num_headers,
                             const void *body, size_t body_len);
/* Starts a chunked streaming response (add a Content-Type header, e.g.
   text/event-stream). Then stream_write / stream_sse any number of times, then stream_end. */
RSD_API int rsd_http_stream_begin(rsd_http_server *s, rsd_http_sreq_h h, int status,
                                  const rsd_http_header *headers, size_t num_headers);
/* Starts an unchunked streaming response: content_length >= 0 announces that many body
   bytes (stream_write sends them as they are; writing fewer and then rsd_http_abort
   simulates a mid-body drop), < 0 = body delimited by the close (Connection: close;
   stream_end closes). For simulators and failure injection. */
RSD_API int rsd_http_stream_begin_raw(rsd_http_server *s, rsd_http_sreq_h h, int status,
                                      const rsd_http_header *headers, size_t num_headers,
                                      int64_t content_length);
/* Closes a held or streaming request's connection now (what was already queued is sent
   first if the socket takes it; the rest is dropped). The handle is dead afterwards. */
RSD_API int rsd_http_abort(rsd_http_server *s, rsd_http_sreq_h h);
/* Sends one chunk. RSD_ERR_CAPACITY when the send buffer is full (step, then retry);
   RSD_ERR_CLOSED when the client went away. */
RSD_API int rsd_http_stream_write(rsd_http_server *s, rsd_http_sreq_h h, const void *data,
                                  size_t len);
/* Sends one SSE event as one chunk: optional `event:` line, `data:` per line of data, blank line. */
RSD_API int rsd_http_stream_sse(rsd_http_server *s, rsd_http_sreq_h h, const char *event,
                                const char *data, size_t len);
/* Sends the last chunk; the connection then serves the next request. */
RSD_API int rsd_http_stream_end(rsd_http_server *s, rsd_http_sreq_h h);
/* Sends the last chunk and closes the connection once it is out (a stream that ended
   in an error: the client's next request goes on a fresh connection). */
RSD_API int rsd_http_stream_end_close(rsd_http_server *s, rsd_http_sreq_h h);
/* Bytes a stream_write can take right now (0 when the handle is not streaming). */
RSD_API size_t rsd_http_stream_room(rsd_http_server *s, rsd_http_sreq_h h);
/* The server's totals (counters). */
RSD_API void rsd_http_server_query(const rsd_http_server *s, rsd_http_server_info *out);
#endif /* RSD_NO_HTTP_SERVER */

/* ==== http server end ===================================================== */

/* ==== proc ================================================================ */
/* Manual: "PROC" in the doc block at the top of this file. */
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
    RSD_PROC_START_DEADLINE_DEFAULT_MS = 300000,/* STARTING -> START_TIMEOUT */
    RSD_PROC_KILL_WAIT_DEFAULT_MS = 5000,       /* SIGKILL -> STUCK notice if not reaped */
    RSD_PROC_PROBE_FIRST_DEFAULT_MS = 10,       /* first readiness probe after the spawn */
    RSD_PROC_PROBE_MAX_DEFAULT_MS = 500,        /* probe interval doubles up to this */
    RSD_PROC_REAP_POLL_MS = 1000,        /* waitpid poll when no pidfd and no pipe EOF */
    RSD_PROC_DRAIN_STEP_BYTES = 1 << 20, /* most output read from one process per step */
    RSD_PROC_DESTROY_WAIT_MS = 2000      /* rsd_procs_destroy waits this long per reap */
};

/* Process handle (0 = invalid; see HANDLES in residency.h). */
typedef struct rsd_proc_h { uint32_t id; } rsd_proc_h;

/* Process states; see the state machine in the manual. */
typedef enum rsd_proc_state {
    RSD_PROC_FREE = 0,   /* no process in this slot (or a stale handle) */
    RSD_PROC_STARTING,   /* running; waiting for rsd_procs_mark_ready */
    RSD_PROC_READY,      /* running and marked ready */
    RSD_PROC_STOPPING,   /* SIGTERM sent; SIGKILL at the end of the grace period */
    RSD_PROC_KILLING,    /* SIGKILL sent; waiting for the reap */
    RSD_PROC_EXITED,     /* reaped (exit status known); rsd_procs_forget frees it */
    RSD_PROC_FAILED,     /* never ran (spawn failed; errno known); rsd_procs_forget */
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
    bool survive_parent;        /* false (default): children die with us (Linux PDEATHSIG; Windows job) */
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
    uint16_t port;              /* {port}: 0 = pick a free loopback port (bind port 0) */
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
    const char *const *exe_args; /* verbatim arguments right after argv[0], before the template
                                    (NULL-terminated; NULL = none): a subcommand, `serve` of
                                    `llama serve`, or a wrapper's own arguments */
} rsd_proc_spec;

/* The built-in llama-server template:
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
    rsd_proc_h proc;
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

/* Snapshot of one process (rsd_procs_query_proc). */
typedef struct rsd_proc_info {
    rsd_proc_state state;
    int64_t pid;                /* 0 when it never ran */
    uint16_t port;              /* the port it was given ({port}) */
    uint64_t spawn_ms, ready_ms;/* now_ms at spawn / mark_ready (0 = not yet) */
    uint64_t uptime_ms;         /* since spawn, up to the supervisor's now_ms or the reap */
    uint64_t start_deadline_ms; /* absolute */
    int exit_code, term_signal; /* as in rsd_proc_event; -1 / 0 while running */
    bool core_dumped;
    int err;                    /* spawn errno, 0 = none */
    uint32_t os_err;            /* Windows: the failed spawn call's GetLastError() (err is its errno
                                   value, EIO when it has none); 0 elsewhere or when none */
    const char *os_call;        /* that call ("CreateProcessW"...), NULL when os_err is 0 */
    bool was_ready, killed, timed_out, stop_requested;
    uint64_t out_bytes;         /* output bytes read so far (the ring keeps the last ring_bytes) */
    uint64_t out_lines;         /* newlines read so far */
    int argc;                   /* expanded argument count, argv[0] included */
    const char *name;           /* label (owned by the supervisor) */
    void *user;
} rsd_proc_info;

/* Snapshot of the supervisor (rsd_procs_query). */
typedef struct rsd_procs_info {
    int max_procs;              /* process slots (desc.max_procs) */
    int live;                   /* running: starting + ready + stopping */
    int starting, ready;
    int stopping;               /* STOPPING or KILLING: asked to exit, not reaped yet */
    int exited;                 /* EXITED or FAILED, not forgotten yet (rsd_procs_forget) */
    int events_waiting;         /* to be pulled (rsd_procs_next_event) */
    uint64_t events_dropped;    /* events lost because the queue was full */
    uint64_t now_ms;            /* its clock: the latest now_ms a call gave it */
} rsd_procs_info;

typedef struct rsd_procs rsd_procs;

/* Create a supervisor (the only allocation); NULL on a bad desc or no memory. */
RSD_API rsd_procs *rsd_procs_create(const rsd_procs_desc *desc);
/* The bytes rsd_procs_create(desc) allocates (its one block); 0 for a desc it refuses. */
RSD_API size_t rsd_procs_footprint(const rsd_procs_desc *desc);
/* SIGKILL every live child's process group and reap it (bounded wait), then free. */
RSD_API void rsd_procs_destroy(rsd_procs *p);
/* Expand spec into argv without running anything (port 0 stays "0"): argc or <0.
   argv gets up to cap-1 pointers into buf plus a NULL. */
RSD_API int rsd_procs_expand(const rsd_proc_spec *spec, char *buf, size_t buf_cap,
                             const char **argv, int cap);
/* What can be checked without starting spec (a spawn would fail): the template expands,
   the program exists and is executable (PATH searched as a spawn does), and with the
   default llama-server template the model file is readable. RSD_OK, or RSD_ERR_SPAWN /
   RSD_ERR_PROC_TEMPLATE / RSD_ERR_CAPACITY with the reason in why (cap bytes). */
RSD_API int rsd_procs_check(rsd_procs *p, const rsd_proc_spec *spec, char *why, size_t cap);
/* Start a process: RSD_OK (STARTING, *out set), RSD_ERR_SPAWN (*out set, state FAILED,
   SPAWN_FAILED queued), or <0 with no process (ERR_ARG, ERR_CAPACITY, ERR_PROC_*). */
RSD_API int rsd_procs_spawn(rsd_procs *p, const rsd_proc_spec *spec, uint64_t now_ms,
                            rsd_proc_h *out);
/* STARTING -> READY (the host's /health probe said 200). RSD_ERR_STATE otherwise. */
RSD_API int rsd_procs_mark_ready(rsd_procs *p, rsd_proc_h h, uint64_t now_ms);
/* SIGTERM the child's process group, SIGKILL after term_grace_ms; STOPPED follows. Also
   RSD_OK when already stopping or gone. */
RSD_API int rsd_procs_stop(rsd_procs *p, rsd_proc_h h, uint64_t now_ms);
/* SIGKILL now (no grace); STOPPED follows. */
RSD_API int rsd_procs_kill(rsd_procs *p, rsd_proc_h h, uint64_t now_ms);
/* Free an EXITED/FAILED slot (the handle goes stale). RSD_ERR_STATE while running. */
RSD_API int rsd_procs_forget(rsd_procs *p, rsd_proc_h h);
/* Drain pipes, reap exits, run timers: the events waiting (>= 0), or RSD_ERR_ARG. */
RSD_API int rsd_procs_step(rsd_procs *p, uint64_t now_ms);
/* 0 while events wait; else the next time rsd_procs_step has timed work (no side effects). */
RSD_API uint64_t rsd_procs_next_deadline(const rsd_procs *p);
/* Descriptors to poll for readability (output pipes, pidfds), as rsd_pollfd entries
   with events RSD_POLLIN, as every *_pollfds: how many it wants (min(that, cap) written).
   Windows: none (the supervisor checks its pipes on the timer of next_deadline). */
RSD_API int rsd_procs_pollfds(const rsd_procs *p, rsd_pollfd *out, int cap);
/* Pull the oldest event; false when none. */
RSD_API bool rsd_procs_next_event(rsd_procs *p, rsd_proc_event *ev);
/* Snapshot of one process on the supervisor's clock; RSD_ERR_PROC_STALE for a bad handle. */
RSD_API int rsd_procs_query_proc(const rsd_procs *p, rsd_proc_h h, rsd_proc_info *info);
/* Snapshot of the supervisor: its processes by state, events waiting and dropped. */
RSD_API void rsd_procs_query(const rsd_procs *p, rsd_procs_info *info);
/* The last max_lines output lines (0 = all the ring holds), NUL-terminated in buf with
   control bytes shown as '?'; returns the length (truncated from the front to fit) or <0. */
RSD_API int rsd_procs_tail(const rsd_procs *p, rsd_proc_h h, int max_lines, char *buf, size_t cap);
/* The expanded command line, arguments quoted where needed, for messages; length or <0. */
RSD_API int rsd_procs_command(const rsd_procs *p, rsd_proc_h h, char *buf, size_t cap);
/* (secret values and URL passwords shown as ***, as rsd_arg_redact in residency.h) */
/* Handles of live processes (not EXITED/FAILED/FREE): count written. */
RSD_API int rsd_procs_live(const rsd_procs *p, rsd_proc_h *out, int cap);
/* Names for enums (never NULL). */
RSD_API const char *rsd_proc_state_str(int state);
/* Name of an rsd_proc_event_kind (never NULL). */
RSD_API const char *rsd_proc_event_str(int kind);
#endif /* RSD_NO_PROCESS */
/* ==== proc end ============================================================ */

/* ==== state =============================================================== */
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
    RSD_STATE_ATTR_LOCK_WAIT_MS = 10000, /* longest wait for the attribution-file lock (blocking calls) */
    RSD_STATE_ATTR_RETRY_MAX_MS = 20,    /* attribution-file lock: retry delay 1 ms doubling to this */
    RSD_STATE_DETAIL_BYTES = 1200,       /* rsd_state_last_error text, with a path */
    /* largest attribution file accepted (every byte of two ids escaped as \xHH) */
    RSD_STATE_MAX_FILE_BYTES = 64 + RSD_STATE_MAX_ATTR * (8 * RSD_STATE_MAX_ID_BYTES + 48),
    /* an attribution set's id arena when a desc says 0: 128 bytes of ids per entry */
    RSD_STATE_ATTR_ARENA_DEFAULT = RSD_STATE_MAX_ATTR * 128,
    /* the arena that holds any valid record: every entry with two ids of the longest length */
    RSD_STATE_ATTR_ARENA_MAX = RSD_STATE_MAX_ATTR * 2 * (RSD_STATE_MAX_ID_BYTES + 1)
};

typedef struct rsd_state rsd_state;  /* opaque; rsd_state_create / rsd_state_destroy */

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
    bool attr_fsync;            /* fsync attribution temp files before the rename (default off) */
    uint32_t attr_arena_bytes;  /* ids of the record the state reads for an update; 0 = RSD_STATE_ATTR_ARENA_DEFAULT */
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
    bool attr;                  /* internal: the short attribution-file lock (rsd_state_attr_lock_begin) */
    bool end_taken;             /* internal: the wait's end was pulled (or returned by try) */
    char name[RSD_STATE_MAX_NAME_BYTES];            /* internal: file name */
    char purpose[RSD_STATE_MAX_PURPOSE_BYTES + 1];  /* internal */
    char key[RSD_STATE_MAX_KEY_BYTES + 1];          /* internal */
} rsd_state_lock;

/* Snapshot of one lock acquisition (rsd_state_lock_query). */
typedef struct rsd_state_lock_info {
    rsd_lock_state state;
    int error;                  /* RSD_OK, or why it is UNLOCKED / FAILED */
    bool held;                  /* the lock is ours (rsd_state_lock_held) */
    bool end_waiting;           /* the wait has ended; rsd_state_lock_next_event has not pulled it */
    uint64_t wake_ms;           /* WAITING: the next attempt */
    uint64_t deadline_ms;       /* WAITING: when the wait gives up */
    uint32_t attempts;          /* try_lock / flock attempts made */
    const char *key;            /* the key of its last begin ("" none); points into the lock */
    const char *purpose;        /* that begin's purpose, as the owner record has it */
} rsd_state_lock_info;

/* Diagnostics written into a lock file by its holder. */
typedef struct rsd_lock_owner {
    int64_t pid;
    uint64_t taken_unix_ms;     /* wall clock when taken (diagnostics only) */
    char host[RSD_STATE_MAX_HOST_BYTES + 1];
    char purpose[RSD_STATE_MAX_PURPOSE_BYTES + 1];
} rsd_lock_owner;

/* One attribution: a model this library loaded on a target; with instance set, an
   LM Studio instance this library owns (model = its model key).
   The ids live in the set's arena: valid until the next call that writes the set. */
typedef struct rsd_attr {
    const char *model;
    const char *instance;       /* "" = plain attribution */
    uint64_t loaded_at_ms;      /* caller's timestamp (wall-clock ms recommended) */
    int64_t pid;                /* process that wrote the entry (diagnostics) */
} rsd_attr;

/* The attribution of one target, in file order. Set up with rsd_attr_set_init over the
   caller's arena before a call writes it; a zeroed set reads nothing (RSD_ERR_ARG). Copy
   one with rsd_attr_set_copy (a plain struct copy shares the arena). */
typedef struct rsd_attr_set {
    size_t count;
    bool corrupt;               /* the file was corrupt and was read as empty */
    bool reset;                 /* this call moved the corrupt file aside (<name>.attr.corrupt) */
    bool over;                  /* the record's ids did not fit the arena: read as empty, RSD_ERR_TOO_LARGE */
    uint32_t magic;             /* internal: set by rsd_attr_set_init */
    char *arena;                /* internal: the ids, arena_used of arena_bytes in use */
    size_t arena_bytes, arena_used;
    rsd_attr items[RSD_STATE_MAX_ATTR];
} rsd_attr_set;

/* Makes set empty over the caller's arena (arena_bytes of ids, each with its NUL; the
   arena must stay while the set is used): RSD_OK, or RSD_ERR_ARG (NULL set, or NULL arena
   with bytes). RSD_STATE_ATTR_ARENA_MAX bytes hold any valid record. */
RSD_API int rsd_attr_set_init(rsd_attr_set *set, char *arena, size_t arena_bytes);
/* Copies src's entries and ids into dst's own arena: RSD_OK, RSD_ERR_ARG (dst not set
   up), or RSD_ERR_TOO_LARGE (src's ids do not fit dst's arena, or src is itself a record
   that did not fit: dst is then empty, over set, arena_used the bytes needed). */
RSD_API int rsd_attr_set_copy(rsd_attr_set *dst, const rsd_attr_set *src);

/* Resolves the state directory (desc->dir, RESIDENCY_STATE_DIR, $XDG_STATE_HOME/residency,
   $HOME/.local/state/residency) into buf without touching the disk; length or <0. */
RSD_API int rsd_state_resolve_dir(const rsd_state_desc *desc, char *buf, size_t cap);
/* Safe file name for a key: sanitised prefix '-' FNV-1a-64 hex; length or RSD_ERR_ARG/BUFFER. */
RSD_API int rsd_state_file_name(const char *key, char *buf, size_t cap);
/* Resolves and creates (0700, mkdir -p) the state dir and allocates the object; NULL on
   failure, with *err (err may be NULL) RSD_ERR_STATE_DIR, RSD_ERR_ARG or RSD_ERR_NOMEM. */
RSD_API rsd_state *rsd_state_create(const rsd_state_desc *desc, int *err);
/* The bytes rsd_state_create(desc) allocates (NULL = defaults); 0 for a desc it refuses. */
RSD_API size_t rsd_state_footprint(const rsd_state_desc *desc);
/* Frees the object (NULL is fine). Locks must be released first. */
RSD_API void rsd_state_destroy(rsd_state *st);
/* The resolved state directory. */
RSD_API const char *rsd_state_dir(const rsd_state *st);

/* Starts acquiring key's lock; no I/O. deadline_ms: absolute, on the caller's now_ms
   clock; 0 = now_ms + lock_wait_ms. Then call rsd_state_lock_step. */
RSD_API int rsd_state_lock_begin(rsd_state *st, rsd_state_lock *lk, const char *key,
                                 const char *purpose, uint64_t now_ms, uint64_t deadline_ms);
/* Never blocks. One attempt when now_ms >= lk->wake_ms. The events waiting: 0 while it
   waits, 1 once the wait has ended (HELD, UNLOCKED or FAILED) until
   rsd_state_lock_next_event pulls that; RSD_ERR_ARG, RSD_ERR_STATE (IDLE: nothing begun). */
RSD_API int rsd_state_lock_step(rsd_state *st, rsd_state_lock *lk, uint64_t now_ms);
/* The end of the wait, once: *result RSD_OK = HELD or UNLOCKED (proceed), <0 = FAILED
   (RSD_ERR_TIMEOUT, RSD_ERR_LOCK...). False while it waits or once pulled. */
RSD_API bool rsd_state_lock_next_event(rsd_state_lock *lk, int *result);
/* 0 while the end waits to be pulled; lk->wake_ms while waiting; else RSD_NO_DEADLINE. */
RSD_API uint64_t rsd_state_lock_next_deadline(const rsd_state_lock *lk);
/* One non-blocking attempt: RSD_OK = HELD, RSD_PENDING = held elsewhere (lk left IDLE), <0. */
RSD_API int rsd_state_lock_try(rsd_state *st, rsd_state_lock *lk, const char *key,
                               const char *purpose);
/* Blocking: begin + step + nanosleep until done; wait_ms 0 = desc default. Returns the
   wait's end (as rsd_state_lock_next_event's result). The only lock call that sleeps. */
RSD_API int rsd_state_lock_sync(rsd_state *st, rsd_state_lock *lk, const char *key,
                                const char *purpose, uint32_t wait_ms);
/* Releases a held lock (clears the owner record) or abandons a wait; IDLE after. */
RSD_API void rsd_state_unlock(rsd_state *st, rsd_state_lock *lk);
/* True while lk holds the lock (false when proceeding UNLOCKED). */
RSD_API bool rsd_state_lock_held(const rsd_state_lock *lk);
/* Snapshot of lk: its state, what it waits on (key, wake_ms, deadline_ms), its attempts. */
RSD_API void rsd_state_lock_query(const rsd_state_lock *lk, rsd_state_lock_info *info);
/* Reads the owner record of key's lock file: RSD_OK, RSD_ERR_NOT_FOUND (free/never taken). */
RSD_API int rsd_state_lock_owner(rsd_state *st, const char *key, rsd_lock_owner *out);

/* Reads key's attribution into *out: entry count (>= 0); a missing file is empty; a corrupt
   one is empty with out->corrupt set and ATTR_CORRUPT logged. <0 only on I/O errors. */
RSD_API int rsd_state_attr_load(rsd_state *st, const char *key, rsd_attr_set *out);
/* Adds (or refreshes) (model, instance) under the file lock; instance NULL/"" = plain.
   Atomic (temp file, rename; fsync only with desc.attr_fsync). RSD_OK, RSD_ERR_CAPACITY, <0. */
RSD_API int rsd_state_attr_add_sync(rsd_state *st, const char *key, const char *model,
                                    const char *instance, uint64_t loaded_at_ms);
/* Removes (model, instance); instance NULL = every entry of model. Count removed (>= 0) or <0. */
RSD_API int rsd_state_attr_remove_sync(rsd_state *st, const char *key, const char *model,
                                       const char *instance);
/* Reads key's last-use record (attr/<name>.used, the attribution's format: loaded_at_ms is
   the last use, ms since the epoch): entry count, as rsd_state_attr_load. */
RSD_API int rsd_state_used_load(rsd_state *st, const char *key, rsd_attr_set *out);
/* Records a use of model on key at used_ms (ms since the epoch; an earlier figure than the
   recorded one changes nothing; a full record drops its oldest entry), under the
   attribution-file lock, taken with one try (RSD_PENDING when busy). */
RSD_API int rsd_state_used_touch(rsd_state *st, const char *key, const char *model, uint64_t used_ms);
/* The same, waiting for the lock (at most RSD_STATE_ATTR_LOCK_WAIT_MS). */
RSD_API int rsd_state_used_touch_sync(rsd_state *st, const char *key, const char *model, uint64_t used_ms);
/* Cross-process mutation generation of key: *out = 0 when never bumped. A cache
   entry stays valid while the generation it saw is unchanged. RSD_OK or <0. */
RSD_API int rsd_state_gen_read(rsd_state *st, const char *key, uint64_t *out);
/* Increments key's generation after a mutation (load/unload); *out = the new value. */
RSD_API int rsd_state_gen_bump_sync(rsd_state *st, const char *key, uint64_t *out);
/* One change of a commit: add (or refresh) or remove (model, instance); instance NULL/""
   = plain attribution (for a remove: NULL = every entry of model). */
typedef struct rsd_attr_change {
    const char *model;
    const char *instance;
    bool remove;
} rsd_attr_change;
/* Starts acquiring key's short attribution-file lock (the one attr_add/remove and gen_bump
   take); no I/O. Then rsd_state_lock_step (never blocks); always fail-closed. deadline_ms 0 =
   now_ms + RSD_STATE_ATTR_LOCK_WAIT_MS. Release with rsd_state_unlock. */
RSD_API int rsd_state_attr_lock_begin(rsd_state *st, rsd_state_lock *lk, const char *key,
                                      uint64_t now_ms, uint64_t deadline_ms);
/* With lk holding key's attribution lock: applies changes[0..n) in one rewrite of the file,
   then bumps the generation (*gen_out, 0 when that failed). Both are tried; RSD_OK or the
   first error (RSD_ERR_STATE_IO, RSD_ERR_CAPACITY...; rsd_state_last_error says what). */
RSD_API int rsd_state_attr_commit(rsd_state *st, rsd_state_lock *lk, const rsd_attr_change *changes,
                                  int n, uint64_t loaded_at_ms, uint64_t *gen_out);
/* One line about the most recent failed state write, read or attribution lock ("" none). */
RSD_API const char *rsd_state_last_error(const rsd_state *st);
/* Index of (model, instance) in set (instance NULL = any), or RSD_ERR_NOT_FOUND. */
RSD_API int rsd_attr_set_find(const rsd_attr_set *set, const char *model, const char *instance);
/* ==== state end =========================================================== */

/* ==== etcd ================================================================ */
/* Manual: "ETCD" in the doc block at the top of this file. The lock, the attribution and
   the generation of a target on etcd v3 (its JSON gateway), for several hosts. */
enum {
    RSD_ETCD_LEASE_TTL_S = 5,          /* default lease (and so lock) lifetime after a holder dies */
    RSD_ETCD_REQUEST_MS = 2000,        /* default timeout of one etcd request */
    RSD_ETCD_MAX_PREFIX_BYTES = 128,   /* key prefix ("/residency" by default) */
    RSD_ETCD_MAX_HOST_BYTES = 128,     /* this host's id in owner records and protections */
    RSD_ETCD_MAX_KEY_BYTES = 512,      /* longest etcd key this library writes or reads back */
    RSD_ETCD_MAX_KVS = 96,             /* key-value pairs kept from one answer */
    RSD_ETCD_RETRY_MIN_MS = 5,         /* a busy lock is tried again after 5 ms ... */
    RSD_ETCD_RETRY_MAX_MS = 100,       /* ... doubling to 100 ms */
    RSD_ETCD_COMMIT_TRIES = 8          /* commits re-based on a changed attribution (unlocked) */
};

typedef struct rsd_etcd rsd_etcd;

/* etcd coordinator configuration; zeroed = defaults (url is required). */
typedef struct rsd_etcd_desc {
    const char *url;                  /* etcd://host:port[/prefix], etcds://... (TLS), http(s)://... */
    const char *host_id;              /* this host in owner records and protections; NULL = hostname */
    uint32_t lease_ttl_s;             /* lease lifetime; 0 = RSD_ETCD_LEASE_TTL_S */
    uint32_t request_timeout_ms;      /* one request; 0 = RSD_ETCD_REQUEST_MS */
    bool fail_closed;                 /* lock deadline / etcd unreachable fails instead of proceeding */
    const char *auth_token;           /* etcd auth token, sent as the Authorization header; never logged */
    const char *auth_user;            /* etcd user: the coordinator authenticates (and again when the token expires) */
    const char *auth_password;        /* its password; never logged */
    const rsd_protected_model *protected_models; /* this host's, published for the other hosts */
    int n_protected;                  /* 0..RSD_MAX_PROTECTED */
    rsd_http_client_desc http;        /* TLS options (tls_ca_file ...), limits; allocator/logger default below */
    uint32_t attr_arena_bytes;        /* ids of an attribution or a protection record as read;
                                         it also sizes the coordinator's buffers (a bigger
                                         answer is RSD_ERR_TOO_LARGE);
                                         0 = RSD_STATE_ATTR_ARENA_DEFAULT */
    rsd_allocator allocator;
    rsd_logger logger;
} rsd_etcd_desc;

/* What the coordinator knows after its last operation (views live until the next begin). */
typedef struct rsd_etcd_info {
    int result;                       /* of the last operation: RSD_OK, RSD_PENDING, <0 */
    bool held;                        /* the lock is held (fenced by fence) */
    bool lost;                        /* the lease ran out while held: commits are refused */
    int64_t fence;                    /* the lock key's create_revision while held */
    bool has_gen;                     /* gen was read (a corrupt value reads as unknown) */
    uint64_t gen;                     /* the target's mutation generation */
    bool attr_corrupt;                /* the stored attribution was corrupt: read as empty */
    const rsd_attr_set *attrs;        /* the target's attribution as last read */
    int n_protected;                  /* the other hosts' protected models, each once */
    const rsd_protected_model *protected_models;
    bool protected_incomplete;        /* some host's protections are not known (too many models, a
                                         record over attr_arena_bytes or invalid, a page not read) */
    const char *protected_why;        /* the first reason ("" none) */
    const char *owner;                /* the lock holder's record when busy ("" none) */
    const char *message;              /* why the last operation failed or proceeded unlocked ("" none) */
    const char *root;                 /* the gateway's root URL ("http://host:2379") */
    const char *prefix;               /* the key prefix ("/residency") */
} rsd_etcd_info;

/* Creates the coordinator (its own HTTP client; no I/O). NULL for a bad desc or url (logged;
   rsd_etcd_footprint gives 0 for it) or no memory. */
RSD_API rsd_etcd *rsd_etcd_create(const rsd_etcd_desc *desc);
/* The bytes rsd_etcd_create(desc) allocates (TLS apart); 0 for a desc it refuses. */
RSD_API size_t rsd_etcd_footprint(const rsd_etcd_desc *desc);
/* Frees everything; a held lock is left to its lease (unlock and step first to release it now). */
RSD_API void rsd_etcd_destroy(rsd_etcd *co);
/* Starts reading key's attribution, generation and every host's protections (no I/O). */
RSD_API int rsd_etcd_read_begin(rsd_etcd *co, const char *key, uint64_t now_ms, uint64_t deadline_ms);
/* Starts taking key's lock (a lease-bound key); the answer also reads what read_begin reads. */
RSD_API int rsd_etcd_lock_begin(rsd_etcd *co, const char *key, const char *purpose, uint64_t now_ms,
                                uint64_t deadline_ms);
/* Starts the commit: changes applied to the attribution and the generation bumped in one
   transaction, refused when the lock was lost. changes stay the caller's until done. */
RSD_API int rsd_etcd_commit_begin(rsd_etcd *co, const rsd_attr_change *changes, int n,
                                  uint64_t loaded_at_ms, uint64_t now_ms, uint64_t deadline_ms);
/* Releases the lock: not held from now on; the key is deleted (if still ours) by the next
   steps, which return RSD_PENDING until etcd answered. Abandons a lock wait. */
RSD_API int rsd_etcd_unlock_begin(rsd_etcd *co, uint64_t now_ms);
/* Never blocks: sends, reads, keeps the lease alive. The events waiting: 0 while an
   operation (or a release) runs or when idle, 1 once it has ended until rsd_etcd_next_event
   pulls that; RSD_ERR_ARG for NULL. */
RSD_API int rsd_etcd_step(rsd_etcd *co, uint64_t now_ms);
/* The end of the last operation begun, once: *out as rsd_etcd_query, with out->result its
   code (RSD_OK, or <0). False while it runs or once pulled. */
RSD_API bool rsd_etcd_next_event(rsd_etcd *co, rsd_etcd_info *out);
/* The client's sockets for the host's poll(); how many it wants. */
RSD_API int rsd_etcd_pollfds(const rsd_etcd *co, rsd_pollfd *out, int cap);
/* Earliest time step must run (a retry, the next keepalive, a timeout); 0 while an end waits
   to be pulled; RSD_NO_DEADLINE. */
RSD_API uint64_t rsd_etcd_next_deadline(const rsd_etcd *co);
/* What the last operation found. */
RSD_API void rsd_etcd_query(const rsd_etcd *co, rsd_etcd_info *out);
/* Splits "etcd://h:p/prefix" into the gateway root ("http://h:p") and the prefix. RSD_OK or RSD_ERR_URL. */
RSD_API int rsd_etcd_parse_url(const char *url, char *root, size_t root_cap, char *prefix, size_t prefix_cap);
/* ==== etcd end ============================================================ */

/* ==== ensure ============================================================== */
/* Manual: "drive" in the doc block at the top of this file. */
enum {
    RSD_ENSURE_MAX_NAMES = 8,       /* resolved host names and detected runtimes kept */
    RSD_ENSURE_TIMEOUT_MS = 120000, /* default whole-ensure deadline (a runtime may have its own) */
    RSD_ENSURE_LEASE_TTL_MS = 600000, /* default ttl of an rsd-serve lease a free request takes (10 min) */
    RSD_ENSURE_SSE_POLL_MS = 500,   /* poll interval of a wait while /models/sse is open */
    RSD_ENSURE_SSE_PENDING = 4,     /* /models/sse events kept between waits (replayed) */
    RSD_ENSURE_SSE_EVENT_BYTES = 512, /* longest such kept event (longer: poll fast instead) */
    RSD_ENSURE_HTTP_REQUESTS = 2,   /* the owned client's default request slots and sockets: one ensure's
                                       HTTP step and its /models/sse stream */
    RSD_ENSURE_HTTP_REQUEST_BYTES = RSD_RECONCILE_URL_MAX + RSD_RECONCILE_BEARER_MAX + RSD_RECONCILE_BODY_MAX +
                                    1024, /* its default request limit: the longest URL, bearer and load body
                                             a reconcile sends, with the head's other fields */
    RSD_ENSURE_HTTP_HEADER_BYTES = 4096, /* its default response head limit */
    RSD_ENSURE_HTTP_SLOT_BODY = 4096  /* its slots' own body buffer (the /models/sse stream, extra requests on
                                         rsd_ensurer_http); the ensure's answers go to the ensurer's buffer */
};

/* Which server software a target runs. AUTO (zero) = detect by probing. */
#define RSD_RUNTIME_KINDS(X) X(AUTO, "auto") X(LLAMACPP, "llamacpp") X(LMSTUDIO, "lmstudio") \
    X(OLLAMA, "ollama")
/* Runtime of an ensure. */
typedef enum rsd_runtime_kind {
#define RSDI_X(n, s) RSD_RUNTIME_##n,
    RSD_RUNTIME_KINDS(RSDI_X)
#undef RSDI_X
    RSD_RUNTIME_KIND_NUM
} rsd_runtime_kind;

typedef struct rsd_ensurer rsd_ensurer;

/* Ensurer configuration; zeroed = defaults. */
typedef struct rsd_ensurer_desc {
    rsd_allocator allocator;
    rsd_logger logger;
    rsd_http_client_desc http;        /* owned client's limits (zero = RSD_ENSURE_HTTP_*); allocator/logger
                                         default to the above. The ensure's own answers are read into one
                                         buffer of limits.max_body_bytes, not into the slots */
    rsd_reconcile_limits limits;      /* the reconcile's tables (zeroed = defaults), in the ensurer's block */
    rsd_runtime_kind runtime;         /* the runtime of every ensure (a request's AUTO means it, a request
                                         naming another is refused); AUTO = any, detected by probing. A given
                                         runtime sizes the reconcile for it alone: no LM Studio state for a
                                         llama.cpp router or Ollama */
    const char *state_dir;            /* NULL = RESIDENCY_STATE_DIR, XDG_STATE_HOME, HOME */
    bool no_state;                    /* no state directory: no lock, attribution, generation */
    bool lock_fail_closed;            /* lock deadline/error fails the ensure instead of proceeding */
    uint32_t attr_arena_bytes;        /* bytes of ids an attribution as read holds (here, in the state and
                                         etcd); 0 = the reconcile's id arena (limits.id_arena_bytes: by
                                         default 128 per model, 8 KiB for 64) */
    const rsd_protected_model *protected_models; /* configured ids with roles (copied) */
    int n_protected;                  /* 0..RSD_MAX_PROTECTED */
    const char *residency_env;        /* RESIDENCY value; NULL = getenv("RESIDENCY") per begin */
    bool ignore_env;                  /* treat RESIDENCY (residency_env NULL) and RESIDENCY_CORESIDENT_CONTEXT as unset */
    uint32_t cache_ttl_ms;            /* decision cache TTL; 0 = 60000 */
    bool no_cache;                    /* no TTL fast path */
    bool no_sse;                      /* never open GET /models/sse (llama.cpp router): poll only */
    uint32_t sse_poll_ms;             /* poll interval while /models/sse is open; 0 = 500 */
    /* Several hosts: lock, attribution and generation on etcd instead of the state dir. */
    const char *coord;                /* "etcd://host:2379[/prefix]"; NULL = $RESIDENCY_COORD (unless ignore_env) */
    const char *coord_host;           /* this host's id there; NULL = hostname */
    uint32_t coord_lease_ttl_s;       /* lease (lock) lifetime after a holder dies; 0 = 5 */
    const char *coord_auth_token;     /* etcd auth token (Authorization header); NULL = $RESIDENCY_COORD_TOKEN */
    const char *coord_user;           /* etcd user (authenticates itself); NULL = $RESIDENCY_COORD_USER */
    const char *coord_password;       /* its password; NULL = $RESIDENCY_COORD_PASSWORD; never logged */
    /* A swap keeps the conversation (llama.cpp router started with --slot-save-path DIR;
       off by default; RSD_NO_ENSURE_KV: not built, and create refuses kv_slots). */
    bool kv_slots;                    /* save the slots of a model before an unload this ensurer makes and
                                         restore them after that model's next load through an ensurer */
    uint32_t kv_timeout_ms;           /* one model's saves (or restores) at most; 0 = 10000; never more
                                         than half of what is left of the ensure's deadline */
} rsd_ensurer_desc;

/* One "make this model resident" request; strings are copied by begin. */
typedef struct rsd_ensure_req {
    const char *url;                  /* server base URL, "http://127.0.0.1:8080" or ".../v1" */
    const char *model;                /* the model to make resident */
    rsd_runtime_kind runtime;         /* AUTO = probe */
    uint32_t context_length;          /* requested load context; 0 = none */
    uint32_t context_ceiling;         /* clamp beside other residents; 0 = env/131072; RSD_FIT_CEILING_OFF */
    uint32_t timeout_ms;              /* whole ensure; 0 = RSD_ENSURE_TIMEOUT_MS */
    uint32_t probe_timeout_ms;        /* per listing/probe request; 0 = 1500 */
    const char *bearer;               /* API key; NULL = none; never logged */
    bool observe;                     /* observe-only for this request (never mutates) */
    bool user_managed;                /* the target is user-managed (observe-only) */
    bool keep_pinned;                 /* the model will be tag-pinned */
    uint64_t free_bytes;              /* with model NULL or "": free this many bytes instead (a lease:
                                         see rsd_ensurer_lease_return_sync) */
    uint32_t lease_ttl_ms;            /* a free request to rsd-serve: its lease ends by itself this long
                                         after it is taken (a crashed caller gives the bytes back);
                                         0 = RSD_ENSURE_LEASE_TTL_MS */
    uint64_t capacity_bytes;          /* memory the residents share (VRAM total); 0 = unknown */
    uint64_t keep_bytes;              /* the model's footprint at context_length; 0 = its listed size */
    uint64_t kv_bytes_per_token;      /* its KV per context token (rsd_gguf_kv_per_token): the clamp
                                         by bytes; 0 = unknown (the fixed ceiling) */
    uint32_t context_floor;           /* the clamp by bytes never goes below; 0 = 4096 */
} rsd_ensure_req;

/* The outcome of an ensure (final once rsd_ensurer_next_event gave its end). */
typedef struct rsd_ensure_result {
    int result;                       /* RSD_PENDING while running, then the final code */
    rsd_outcome outcome;
    rsd_decision decision;
    rsd_reason reason;
    rsd_runtime_kind runtime;         /* the runtime used (after detection) */
    bool done, cache_hit, keep_resident, lock_held, loaded, mutated;
    uint32_t requests;                /* HTTP requests sent (detection probes included) */
    uint64_t elapsed_ms;
    const char *message;              /* one line for the operator; "" when none */
    int n_evicted;
    const rsd_evicted *evicted;
    int n_notices;
    const rsd_reconcile_notice *notices;
    rsd_http_op op;                   /* progress: op of the last HTTP step (LIST + op_model = waiting) */
    const char *op_model;             /* progress: the model that step concerns ("" none) */
    const char *load_stage;           /* progress: the stage a router's /models/sse gave for the waited
                                         load ("fit_params", "text_model", ...; "" none) */
    double load_progress;             /* progress: that event's value, 0..1; -1 = none */
    const char *wire_id;              /* the model id to send requests with (LM Studio: the resolved instance) */
    rsd_lms_tier lms_tier;            /* LM Studio: the API tier found (NONE otherwise) */
    int state_error;                  /* RSD_OK, or why the change was not recorded in the state dir */
    bool lock_waiting;                /* progress: waiting for the target lock another ensure holds */
    uint64_t freed_bytes;             /* a free ensure: the listed sizes of what it unloaded */
    const char *lease_id;             /* a free ensure that freed something: the lease to return
                                         ("rsd-serve:ID" on rsd-serve, else the state directory's; ""
                                         otherwise) */
    int restored;                     /* a release: the models loaded back (rsd-serve: that it starts again) */
    int kv_saved;                     /* kv_slots: slots saved before this ensure's unloads */
    int kv_restored;                  /* kv_slots: slots restored after its load */
} rsd_ensure_result;

/* Creates an ensurer (client, state dir, reconcile, cache); NULL on a bad desc / no memory. */
RSD_API rsd_ensurer *rsd_ensurer_create(const rsd_ensurer_desc *desc);
/* Bytes rsd_ensurer_create(desc) allocates at most (NULL = defaults): its state directory's
   block and etcd's coordinator included, TLS not; 0 when desc is invalid. */
RSD_API size_t rsd_ensurer_footprint(const rsd_ensurer_desc *desc);
/* Releases a held lock, closes sockets, frees everything; NULL is fine. */
RSD_API void rsd_ensurer_destroy(rsd_ensurer *e);
/* Starts an ensure (copies q; no I/O). RSD_OK or <0 (then the ensure is done with it). */
RSD_API int rsd_ensurer_begin(rsd_ensurer *e, const rsd_ensure_req *q, uint64_t now_ms);
/* Never blocks. The events waiting: 0 while it runs (or nothing was begun), 1 once it has
   ended until rsd_ensurer_next_event pulls that; RSD_ERR_ARG for NULL. */
RSD_API int rsd_ensurer_step(rsd_ensurer *e, uint64_t now_ms);
/* The end of an ensure (or lease return), once: *out is its result as rsd_ensurer_query gives
   it, with out->result the code it ended with (RSD_OK or <0). False while it runs. */
RSD_API bool rsd_ensurer_next_event(rsd_ensurer *e, rsd_ensure_result *out);
/* Poll entries of the sockets the ensure waits on; returns how many it wants. */
RSD_API int rsd_ensurer_pollfds(const rsd_ensurer *e, rsd_pollfd *out, int cap);
/* Earliest absolute time step must run; 0 while its end waits to be pulled;
   RSD_NO_DEADLINE when only sockets matter. */
RSD_API uint64_t rsd_ensurer_next_deadline(const rsd_ensurer *e);
/* Notices so far (live while running); *out valid until the next begin. */
RSD_API int rsd_ensurer_notices(rsd_ensurer *e, const rsd_reconcile_notice **out);
/* The result so far (final once done). */
RSD_API void rsd_ensurer_query(const rsd_ensurer *e, rsd_ensure_result *out);
/* Blocking: resolve, begin, step + poll() until done. Returns the final code. */
RSD_API int rsd_ensurer_sync(rsd_ensurer *e, const rsd_ensure_req *q, rsd_ensure_result *out);
/* Blocking (lease_return_begin, then step + poll): gives lease_id back. rsd-serve's ("rsd-serve:ID",
   q->url required): DELETE, and rsd-serve starts what it stopped. The state directory's: loads
   back what the free ensure unloaded (one ensure per model, at the URL recorded with it unless
   q->url is set; q gives runtime, bearer, timeout), then forgets what came back. *out: query's
   result. The count restored, or <0: RSD_ERR_STATE (no state directory), RSD_ERR_NOT_FOUND (no
   such lease), RSD_ERR_ARG, or the first failed ensure's code (what failed stays in the lease). */
RSD_API int rsd_ensurer_lease_return_sync(rsd_ensurer *e, const rsd_ensure_req *q, const char *lease_id,
                                          rsd_ensure_result *out);
/* Starts giving lease_id back without blocking; rsd_ensurer_step / pollfds / next_deadline /
   next_event drive it like an ensure (result.restored: the models back). RSD_OK or <0 (RSD_ERR_ARG:
   a bad id, an rsd-serve lease without q->url; RSD_ERR_STATE: an ensure or return is running,
   or a state-directory lease without a state directory). */
RSD_API int rsd_ensurer_lease_return_begin(rsd_ensurer *e, const rsd_ensure_req *q, const char *lease_id,
                                           uint64_t now_ms);
/* Blocking getaddrinfo of the URL's host for the non-blocking path; RSD_OK or <0. */
RSD_API int rsd_ensurer_resolve_sync(rsd_ensurer *e, const char *url);
/* The ensurer's own HTTP client (for extra requests between ensures). */
RSD_API rsd_http_client *rsd_ensurer_http(rsd_ensurer *e);
/* True when a state directory (lock, attribution, generation) is in use. */
RSD_API bool rsd_ensurer_has_state(const rsd_ensurer *e);
/* "auto", "llamacpp", "lmstudio", "ollama"; never NULL. */
RSD_API const char *rsd_runtime_kind_str(int kind);
/* Parses a runtime name (as rsd_runtime_kind_str, any case; "router" = llamacpp). */
RSD_API int rsd_runtime_kind_parse(const char *s);
/* ==== ensure end ========================================================== */

/* ==== fleet =============================================================== */
/* Manual: "fleet" in the doc block at the top of this file. */
#ifndef RSD_NO_PROCESS
enum {
    RSD_FLEET_MAX_MODELS = RSD_POOL_MAX_MODELS, /* model table */
    RSD_FLEET_MESSAGE_MAX = 1024,               /* event message (reason + last output lines) */
    RSD_FLEET_SPEC_BYTES = 4096,                /* copied strings of one model's rsd_proc_spec */
    RSD_FLEET_PROBE_TIMEOUT_DEFAULT_MS = 2000,  /* one /health probe */
    RSD_FLEET_HEALTH_PATH_MAX = 256,            /* bytes of health_path, including the NUL */
    RSD_FLEET_OUTPUT_PROBE_GAP_MS = 5,          /* output-triggered probes at most this often */
    RSD_FLEET_READY_SCAN_BYTES = 512,           /* new output looked at for "model loaded" */
    RSD_FLEET_HELD_RESTARTS = 1,                /* held readies lost in a row that start the model again */
    RSD_FLEET_WATCHDOG_FAILURES_DEFAULT = 3,    /* failed /health polls in a row before a restart */
    RSD_FLEET_WATCHDOG_ERRORS_DEFAULT = 5,      /* 5xx answers in a row before a restart */
    RSD_FLEET_WATCHDOG_RESTARTS_DEFAULT = 5,    /* watchdog restarts in a row, then it gives up */
    RSD_FLEET_WATCHDOG_BACKOFF_MS = 1000,       /* first restart delay (doubles per restart) */
    RSD_FLEET_WATCHDOG_BACKOFF_MAX_MS = 60000,  /* restart delay cap */
    RSD_FLEET_WATCHDOG_STABLE_MS = 60000        /* up this long and healthy: the count starts over */
};

/* One model: the pool's view plus how to start its process. */
typedef struct rsd_fleet_model_desc {
    rsd_pool_model_desc pool;   /* id, reserve_bytes, ttl_ms, max_in_flight, pinned */
    rsd_proc_spec spec;         /* command; every string (and array) is copied at add time;
                                   spec.port 0 = a free loopback port at each start */
    const char *health_path;    /* readiness probe; NULL = "/health" (200 = ready, 503 = loading) */
    const char *probe_bearer;   /* sent as "Authorization: Bearer ..." with the probes (a child
                                   run with --api-key answers /props 401 without it); copied;
                                   NULL = none */
} rsd_fleet_model_desc;

/* Fleet configuration; zeroed means defaults. The allocator and logger, when set here,
   are also used by the embedded pool and supervisor unless those set their own. */
typedef struct rsd_fleet_desc {
    rsd_pool_desc pool;         /* max_slots, vram budget, queue sizes...; .models is ignored */
    rsd_procs_desc procs;       /* grace, start deadline, probe pacing, ring size... */
    const rsd_fleet_model_desc *models; /* initial model table (may be NULL) */
    int num_models;
    uint32_t probe_timeout_ms;  /* one /health request; 0 = RSD_FLEET_PROBE_TIMEOUT_DEFAULT_MS */
    /* Watchdog (off unless watchdog_interval_ms is set): a READY process is polled with
       GET health_path every watchdog_interval_ms (each poll bounded by the smaller of
       the interval and probe_timeout_ms); watchdog_failures failed polls in a row (not
       200: timeout, refused, 5xx), or watchdog_errors 5xx answers in a row reported
       with rsd_fleet_report, and it is killed and started again after a backoff. */
    uint32_t watchdog_interval_ms;  /* 0 = no health polls once ready */
    uint32_t watchdog_failures;     /* 0 = RSD_FLEET_WATCHDOG_FAILURES_DEFAULT */
    uint32_t watchdog_errors;       /* 0 = RSD_FLEET_WATCHDOG_ERRORS_DEFAULT */
    uint32_t watchdog_restarts;     /* 0 = RSD_FLEET_WATCHDOG_RESTARTS_DEFAULT */
    uint32_t stop_hold_ms;          /* a READY process's stop waits for rsd_fleet_stop_go at
                                       most this long (and half of procs.term_grace_ms)
                                       before its SIGTERM, inside the grace; 0 = at once */
    uint32_t ready_hold_ms;         /* a process that turned READY takes its first requests
                                       after rsd_fleet_ready_go, at the latest this long
                                       after its READY; 0 = at once */
    rsd_allocator allocator;
    rsd_logger logger;
} rsd_fleet_desc;

/* Events pulled with rsd_fleet_next_event. GRANT and FAIL answer a PENDING acquire; the
   others narrate the processes (for logs, status pages and tests). */
typedef enum rsd_fleet_event_kind {
    RSD_FLEET_EV_NONE = 0,
    RSD_FLEET_EV_GRANT,      /* .req may now be sent to 127.0.0.1:.port */
    RSD_FLEET_EV_FAIL,       /* .req cannot be served: .result, .message; its handle is gone */
    RSD_FLEET_EV_STARTING,   /* a process for .model was spawned (.pid, .port) */
    RSD_FLEET_EV_READY,      /* its /health answered 200 */
    RSD_FLEET_EV_STOPPING,   /* the pool stops it (.why: evict, ttl, unload, ...) */
    RSD_FLEET_EV_EXITED,     /* it is gone after a stop (.exit_code, .term_signal) */
    RSD_FLEET_EV_CRASHED,    /* it died unasked, or never started (.result, .message) */
    RSD_FLEET_EV_NUM
} rsd_fleet_event_kind;

/* One event. Strings stay valid until the next rsd_fleet_* call. */
typedef struct rsd_fleet_event {
    rsd_fleet_event_kind kind;
    rsd_pool_req_h req;         /* GRANT, FAIL */
    void *user;                 /* GRANT, FAIL: the pointer given to rsd_fleet_acquire */
    int model;                  /* model index, -1 when none */
    const char *model_id;       /* NULL when none */
    int slot;                   /* pool slot, -1 when none */
    uint16_t port;              /* GRANT, STARTING, READY */
    int64_t pid;                /* STARTING..CRASHED; 0 when it never ran */
    int result;                 /* FAIL, CRASHED: an RSD_ERR_* (<0) */
    rsd_pool_why why;           /* STOPPING */
    bool held;                  /* STOPPING: the SIGTERM waits for rsd_fleet_stop_go;
                                   READY: no grant before rsd_fleet_ready_go */
    int exit_code, term_signal; /* EXITED, CRASHED (as rsd_proc_event) */
    const char *message;        /* FAIL, CRASHED: reason, command and last output lines */
    uint64_t at_ms;
} rsd_fleet_event;

/* Per-model snapshot for status pages. */
typedef struct rsd_fleet_model_info {
    rsd_pool_model_info pool;   /* id, reservation, ttl, pin, slot, state, waiting, running */
    int64_t pid;                /* 0 when not running */
    uint16_t port;              /* 0 when not running */
    uint64_t started_ms;        /* spawn time of the current process, 0 = none */
    uint64_t ready_ms;          /* when /health said 200, 0 = not yet */
    uint64_t last_used_ms;      /* when its last request finished (or was granted), 0 = never */
    uint64_t idle_deadline_ms;  /* TTL unload time while idle, RSD_NO_DEADLINE otherwise */
    int last_result;            /* result of its last failed start/crash, 0 = none */
    const char *last_error;     /* its message (reason, command, last output lines); NULL =
                                   none. Valid until the next rsd_fleet_* call that changes it */
    uint64_t retry_at_ms;       /* after a failed start: no new start before this; 0 = none */
    int exit_code;              /* its last process's exit status (128+N: killed by signal N;
                                   127: never ran), with last_result; 0 = none */
} rsd_fleet_model_info;

/* Snapshot of the fleet for status pages. */
typedef struct rsd_fleet_info {
    int models;                 /* added with rsd_fleet_add_model */
    int processes;              /* of ours, not yet reaped: starting + ready + stopping */
    int starting;               /* spawned, /health not 200 yet */
    int ready;                  /* /health said 200, not stopping */
    int stopping;               /* the pool sent STOP; reaped soon */
    int held_stops;             /* of those, SIGTERM waiting for rsd_fleet_stop_go (stop_hold_ms) */
    int held_readies;           /* of the ready, no grant before rsd_fleet_ready_go (ready_hold_ms) */
    int events_waiting;         /* to be pulled (rsd_fleet_next_event) */
    uint64_t events_dropped;    /* events lost because a queue was full */
    bool stopped;               /* rsd_fleet_stop was called */
    rsd_pool_info pool;         /* the embedded pool's (rsd_pool_query) */
} rsd_fleet_info;

typedef struct rsd_fleet rsd_fleet;

/* Create a fleet (its pool, supervisor and probe client; all allocation happens here). */
RSD_API rsd_fleet *rsd_fleet_create(const rsd_fleet_desc *desc);
/* The bytes rsd_fleet_create(desc) allocates: its block, its pool's, its supervisor's and
   its probe client's; 0 for a desc it refuses (desc.models are checked at create). */
RSD_API size_t rsd_fleet_footprint(const rsd_fleet_desc *desc);
/* Kill every child (SIGKILL, bounded reap) and free. For a graceful end use
   rsd_fleet_stop and step until rsd_fleet_idle. NULL is fine. */
RSD_API void rsd_fleet_destroy(rsd_fleet *f);
/* Add a model (spec strings copied); its index or <0. */
RSD_API int rsd_fleet_add_model(rsd_fleet *f, const rsd_fleet_model_desc *model);
/* Index of the model with this id, or RSD_ERR_NOT_FOUND. */
RSD_API int rsd_fleet_find_model(const rsd_fleet *f, rsd_str id);
/* Ask to send a request to model: RSD_OK (*port set: send now), RSD_PENDING (wait for
   GRANT or FAIL on *req) or <0 (nothing to release). */
RSD_API int rsd_fleet_acquire(rsd_fleet *f, int model, uint64_t now_ms, void *user,
                              rsd_pool_req_h *req, uint16_t *port);
/* rsd_fleet_acquire with rsd_pool_acquire_ex flags (RSD_POOL_ACQUIRE_EXCLUSIVE: the
   request runs alone on its model's process, after it drained). */
RSD_API int rsd_fleet_acquire_ex(rsd_fleet *f, int model, int flags, uint64_t now_ms, void *user,
                                 rsd_pool_req_h *req, uint16_t *port);
/* The request finished (granted ones only). */
RSD_API int rsd_fleet_release(rsd_fleet *f, rsd_pool_req_h req, uint64_t now_ms);
/* The client went away: drop a waiting request or release a granted one; a GRANT or
   FAIL for it not pulled yet is withdrawn (a FAIL not pulled: RSD_OK too). */
RSD_API int rsd_fleet_cancel(rsd_fleet *f, rsd_pool_req_h req, uint64_t now_ms);
/* Load a model without a request (rsd_pool_preload): RSD_OK, RSD_PENDING or <0. */
RSD_API int rsd_fleet_load(rsd_fleet *f, int model, uint64_t now_ms);
/* Replace model's command and pool settings (same id): the next start uses the new
   spec; a running process is not touched (unload it to restart it). Its start backoff
   and last failure are forgotten. RSD_OK, or as add_model (nothing changed). */
RSD_API int rsd_fleet_set_model(rsd_fleet *f, int model, const rsd_fleet_model_desc *md, uint64_t now_ms);
/* The host's outcome of a request it sent to model's process on port: its HTTP status,
   or 502 when the connection failed. 5xx in a row (503 "busy/loading" aside) count
   toward the watchdog's error limit; anything else resets the count. Needs the watchdog
   (watchdog_interval_ms or watchdog_errors set). RSD_OK, or RSD_ERR_ARG. */
RSD_API int rsd_fleet_report(rsd_fleet *f, int model, uint16_t port, int http_status, uint64_t now_ms);
/* Stop everything: fail waiting requests, stop every process, refuse later work. */
RSD_API int rsd_fleet_stop(rsd_fleet *f, uint64_t now_ms);
/* True when no process of ours is alive (after rsd_fleet_stop: safe to destroy). */
RSD_API bool rsd_fleet_idle(const rsd_fleet *f);
/* Do all pending work: reap, drain output, probe, apply pool actions. Returns the events
   waiting (>= 0), or RSD_ERR_ARG. */
RSD_API int rsd_fleet_step(rsd_fleet *f, uint64_t now_ms);
/* A held stop (desc.stop_hold_ms) of model's process goes on now. RSD_OK,
   RSD_ERR_NOT_FOUND (none held) or RSD_ERR_ARG. */
RSD_API int rsd_fleet_stop_go(rsd_fleet *f, int model, uint64_t now_ms);
/* A held ready (desc.ready_hold_ms) of model's process goes on now: the pool grants its
   waiting requests (their GRANTs are queued when it returns). RSD_OK, RSD_ERR_NOT_FOUND
   (none held) or RSD_ERR_ARG. */
RSD_API int rsd_fleet_ready_go(rsd_fleet *f, int model, uint64_t now_ms);
/* A held ready of model's process is given up (why: the host's reason, logged): the
   process is killed and, as for a held process that exits, the model starts again for
   its waiting requests (or they fail). RSD_OK, RSD_ERR_NOT_FOUND (none held) or
   RSD_ERR_ARG. */
RSD_API int rsd_fleet_ready_restart(rsd_fleet *f, int model, const char *why, uint64_t now_ms);
/* Descriptors to poll (child pipes and pidfds: POLLIN; probe sockets as they need); how
   many it wants (min(that, cap) written). */
RSD_API int rsd_fleet_pollfds(const rsd_fleet *f, rsd_pollfd *out, int cap);
/* Next time step has timed work; 0 while events wait to be pulled; RSD_NO_DEADLINE = none. */
RSD_API uint64_t rsd_fleet_next_deadline(const rsd_fleet *f);
/* Pull the oldest event; false when none. */
RSD_API bool rsd_fleet_next_event(rsd_fleet *f, rsd_fleet_event *ev);
/* Snapshot of one model; RSD_ERR_ARG for a bad index. */
RSD_API int rsd_fleet_query_model(const rsd_fleet *f, int model, rsd_fleet_model_info *info);
/* Snapshot of the fleet: its processes by state, events waiting and dropped (the host did
   not pull them), and its pool's rsd_pool_info. */
RSD_API void rsd_fleet_query(const rsd_fleet *f, rsd_fleet_info *info);
/* The embedded pool, for what the fleet adds nothing to: its event log, rsd_pool_unload,
   rsd_pool_configure, rsd_pool_set_vram, rsd_pool_reset_backoff and the leases. The next
   rsd_fleet_step carries out what they queue (rsd_fleet_next_deadline is 0 until then).
   Requests, preloads and the stop go through the fleet's calls; never step the pool or
   pull its actions. (rsd_fleet_query gives its rsd_pool_info.) */
RSD_API rsd_pool *rsd_fleet_pool(rsd_fleet *f);
/* The embedded supervisor (rsd_procs_tail, rsd_procs_query_proc; do not stop its children). */
RSD_API rsd_procs *rsd_fleet_procs(rsd_fleet *f);
/* Name of an rsd_fleet_event_kind (never NULL). */
RSD_API const char *rsd_fleet_event_str(int kind);
#endif /* RSD_NO_PROCESS */
/* ==== fleet end =========================================================== */

/* ==== devmem ============================================================== */
/* Manual: "DEVMEM" in the doc block at the top of this file. */
#ifndef RSD_NO_DEVMEM
enum {
    RSD_DEVMEM_MAX_DEVICES = 16,     /* entries one read reports at most (cap on out) */
    RSD_DEVMEM_MAX_PIDS = 64,        /* own pids one read attributes */
    RSD_DEVMEM_PATH_MAX = 512,       /* longest root or library path in the desc */
    RSD_DEVMEM_FILE_MAX = 16384      /* bytes of a procfs/sysfs file read at most */
};
typedef enum rsd_devmem_pool {
    RSD_DEVMEM_VRAM = 1,             /* a discrete GPU's own memory ("vram") */
    RSD_DEVMEM_HOST = 2              /* host memory, which a unified-memory GPU shares ("host/unified") */
} rsd_devmem_pool;
typedef enum rsd_devmem_source {
    RSD_DEVMEM_NVML = 1,             /* libnvidia-ml, loaded at run time */
    RSD_DEVMEM_AMDGPU = 2,           /* /sys/class/drm/cardN/device/mem_info_* */
    RSD_DEVMEM_MEMINFO = 3,          /* /proc/meminfo (GlobalMemoryStatusEx on Windows) */
    RSD_DEVMEM_TEGRA = 4             /* /proc/meminfo on an NVIDIA Tegra (Jetson) */
} rsd_devmem_source;
typedef struct rsd_devmem_dev {
    char name[24];                   /* "nvml0", "card1", "host" */
    int pool;                        /* rsd_devmem_pool */
    int source;                      /* rsd_devmem_source */
    bool unified;                    /* a GPU uses this host memory (Jetson, AMD APU) */
    bool own_known;                  /* own_bytes was read per process */
    uint64_t total_bytes;
    uint64_t used_bytes;             /* total - free */
    uint64_t free_bytes;             /* free (NVML, sysfs); MemAvailable (meminfo) */
    uint64_t own_bytes;              /* held by the pids given to the read; 0 when !own_known */
    uint64_t others_bytes;           /* used - own: other programs, the driver, the desktop */
    uint64_t gtt_total_bytes;        /* AMD: the GTT aperture (host memory the GPU maps); else 0 */
    uint64_t gtt_used_bytes;
} rsd_devmem_dev;
typedef struct rsd_devmem_desc {
    const char *nvml_path;           /* NULL: $RESIDENCY_NVML, else libnvidia-ml.so.1 (nvml.dll);
                                        "" = do not load NVML */
    const char *sys_root;            /* NULL = "/sys" (tests: a fake tree) */
    const char *proc_root;           /* NULL = "/proc" */
    bool ignore_env;                 /* do not read $RESIDENCY_NVML */
    rsd_allocator allocator;         /* zeroed = RSD_DEFAULT_ALLOC/FREE */
} rsd_devmem_desc;
typedef struct rsd_devmem rsd_devmem;

/* Creates a probe: loads and initialises NVML once when it is there (nothing to link).
   NULL only for a bad desc or no memory; a host without NVML still gets a probe. */
RSD_API rsd_devmem *rsd_devmem_create(const rsd_devmem_desc *desc);
/* The bytes rsd_devmem_create(desc) allocates (its one block; NVML's own are the C
   library's); 0 for a desc it refuses. */
RSD_API size_t rsd_devmem_footprint(const rsd_devmem_desc *desc);
/* Reads every device's memory now (plain file reads and NVML calls; no thread, no
   wait). own_pids (n_pids <= RSD_DEVMEM_MAX_PIDS) are the caller's processes: what they
   hold is own_bytes, the rest of used is others_bytes. Fills out[0..cap) with the
   NVML devices, then the AMD cards, then "host"; returns how many, or RSD_ERR_ARG. */
RSD_API int rsd_devmem_read(rsd_devmem *dm, const int64_t *own_pids, int n_pids,
                            rsd_devmem_dev *out, int cap);
/* The one figure a byte budget is set from: the sum of the vram entries when there are
   any, else the host entry. RSD_OK, or RSD_ERR_NOT_FOUND (out zeroed) when n == 0. */
RSD_API int rsd_devmem_pick(const rsd_devmem_dev *devs, int n, rsd_devmem_dev *out);
/* Why NVML is not in use ("" when it is): the dlopen or nvmlInit failure, in words. */
RSD_API const char *rsd_devmem_nvml_status(const rsd_devmem *dm);
RSD_API void rsd_devmem_destroy(rsd_devmem *dm);
/* "vram" or "host/unified" for an rsd_devmem_pool; "?" otherwise. */
RSD_API const char *rsd_devmem_pool_str(int pool);
/* The value of "Key:" in /proc/meminfo, /proc/PID/status or DRM fdinfo text, in bytes
   ("kB" and "KiB" are x 1024, "MiB" x 2^20; no unit = bytes). RSD_OK, RSD_ERR_NOT_FOUND (no such line),
   RSD_ERR_PAYLOAD (not a number), RSD_ERR_OVERFLOW (over 2^64 - 1), RSD_ERR_ARG. */
RSD_API int rsd_devmem_parse_meminfo(const char *text, size_t len, const char *key,
                                     uint64_t *bytes);
/* A sysfs number: decimal digits, then only whitespace. RSD_OK, RSD_ERR_PAYLOAD,
   RSD_ERR_OVERFLOW, RSD_ERR_ARG. */
RSD_API int rsd_devmem_parse_u64(const char *text, size_t len, uint64_t *out);
#endif /* RSD_NO_DEVMEM */
/* ==== devmem end ========================================================== */
/* ==== gguf file =========================================================== */
#ifndef RSD_NO_GGUF
/* Reads the model file at path into g (rsd_gguf_init first) in 16 KiB pieces until the
   reader has the header: RSD_OK, the reader's error, or RSD_ERR_NOT_FOUND / RSD_ERR_IO
   when the file cannot be opened or read (rsd_gguf_error says which and why). Blocking;
   the file is open only during the call. */
RSD_API int rsd_gguf_read_file(rsd_gguf *g, const char *path);
#endif
/* ==== gguf file end ======================================================= */

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* RESIDENCY_HTTP_H_INCLUDED */

/* ========================================================================== */
/* IMPLEMENTATION                                                             */
/* ========================================================================== */
#if defined(RESIDENCY_HTTP_IMPLEMENTATION) && !defined(RESIDENCY_HTTP_IMPL_INCLUDED)
#define RESIDENCY_HTTP_IMPL_INCLUDED 1

/* ==== >>url =============================================================== */
/* ASCII-only helpers (no locale), shared by the url and httpparse sections (rsdi_ascii_lower and
   rsdi_ieq_c are the core's). */
/* Case-insensitive equality of s[0..n) with a lower-case NUL-terminated literal. */
RSDI_PRIVATE bool rsdi_ieq_lit(const char *s, size_t n, const char *lit) {
    rsd_str v;
    v.ptr = s;
    v.len = n;
    return rsdi_ieq_c(v, lit);
}

/* A hex digit's value, or -1: the core's (one hex rule for URLs, chunk sizes and state files). */
RSDI_PRIVATE int rsdi_hexval(char c) { return rsdi_json_hexval((unsigned char)c); }

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

/* ==== url end ============================================================= */

/* ==== >>httpparse ========================================================= */
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

/* A Host value: uri-host [":" port] (RFC 9112 3.2, RFC 3986 3.2.2), possibly empty.
   Bytes outside unreserved / pct-encoded / sub-delims / ':' / '[' ']' (space, '@',
   '/', '?', '#', '"', obs-text ...) make it invalid. */
RSDI_PRIVATE bool rsdi_http_host_ok(rsd_str v) {
    size_t i;
    for (i = 0; i < v.len; i++) {
        unsigned char c = (unsigned char)v.ptr[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) continue;
        if (!memchr("-._~%!$&'()*+,;=:[]", c, 19)) return false;
    }
    return true;
}

/* Framing from the headers (RFC 9112 section 6); for a request also the Host rule. */
RSDI_PRIVATE int rsdi_http_framing(const rsd_http_header *h, size_t n, int minor, bool request,
                                   rsd_http_framing *f, bool *expect_continue) {
    size_t i, pos;
    rsd_str el;
    int64_t cl = -1;
    bool te_seen = false, te_last_chunked = false, conn_close = false, conn_ka = false;
    bool other_codings = false;
    int chunked_count = 0, hosts = 0;
    if (expect_continue) *expect_continue = false;
    for (i = 0; i < n; i++) {
        rsd_str name = h[i].name, val = h[i].value;
        if (request && name.len == 4 && rsdi_ieq_lit(name.ptr, name.len, "host")) {
            if (++hosts > 1 || !rsdi_http_host_ok(val)) return RSD_ERR_PROTOCOL;
        } else if (name.len == 14 && rsdi_ieq_lit(name.ptr, name.len, "content-length")) {
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
                else other_codings = true;
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
    if (request && minor == 1 && hosts == 0) return RSD_ERR_PROTOCOL; /* HTTP/1.1 needs Host */
    f->content_length = cl;
    f->chunked = false;
    f->other_codings = other_codings;
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

/* ==== httpparse end ======================================================= */

/* ==== >>net: socket helpers shared by the client and the server ============
   The only place that knows which socket API it is: POSIX sockets, or Winsock 2 on
   Windows (_WIN32). Everything above calls these wrappers; a failed call leaves a
   POSIX errno value in errno on both (Winsock's WSAGetLastError() codes are mapped).
   On Windows a SOCKET is held in an int: socket handles are kernel handles, which
   Windows keeps within 32 bits on 64-bit systems, and INVALID_SOCKET becomes -1. */
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#if defined(_MSC_VER)
#pragma comment(lib, "ws2_32.lib")
#endif
#if !defined(POLLRDNORM) || !defined(POLLWRNORM)
#error "residency_http.h on Windows needs WSAPoll (Windows Vista or later: _WIN32_WINNT >= 0x0600)"
#endif
#ifndef MSG_DONTWAIT
#define MSG_DONTWAIT 0 /* every socket of ours is non-blocking already */
#endif
/* rsd_pollfd must be usable as WSAPOLLFD. */
typedef char rsdi_pollfd_layout_check[(sizeof(rsd_pollfd) == sizeof(WSAPOLLFD) &&
                                       offsetof(rsd_pollfd, fd) == offsetof(WSAPOLLFD, fd) &&
                                       offsetof(rsd_pollfd, events) == offsetof(WSAPOLLFD, events) &&
                                       offsetof(rsd_pollfd, revents) == offsetof(WSAPOLLFD, revents) &&
                                       RSD_POLLIN == POLLRDNORM && RSD_POLLOUT == POLLWRNORM) ? 1 : -1];
#define RSDI_SEND_FLAGS 0
#else
#include <unistd.h>
#include <poll.h>
#include <netdb.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

/* Every descriptor this library opens is close-on-exec (sockets, pipes, lock and state
   files), or a spawned llama-server would inherit the host's sockets and locks. There
   is no silent fallback: a libc without these (pre-POSIX.1-2008) does not build. */
#if !defined(O_CLOEXEC) || !defined(FD_CLOEXEC)
#error "residency_http.h needs O_CLOEXEC and FD_CLOEXEC (POSIX.1-2008) so no descriptor leaks into a child"
#endif

/* rsd_pollfd must be usable as struct pollfd. */
typedef char rsdi_pollfd_layout_check[(sizeof(rsd_pollfd) == sizeof(struct pollfd) &&
                                       offsetof(rsd_pollfd, fd) == offsetof(struct pollfd, fd) &&
                                       offsetof(rsd_pollfd, events) == offsetof(struct pollfd, events) &&
                                       offsetof(rsd_pollfd, revents) == offsetof(struct pollfd, revents) &&
                                       RSD_POLLIN == POLLIN && RSD_POLLOUT == POLLOUT) ? 1 : -1];

/* RSDI_FORCE_BSD (a compile check, tests/compile.sh): take the paths macOS takes
   (no MSG_NOSIGNAL, SOCK_NONBLOCK, pipe2, PR_SET_PDEATHSIG) on a Linux build. */
#if defined(MSG_NOSIGNAL) && !defined(RSDI_FORCE_BSD)
#define RSDI_SEND_FLAGS MSG_NOSIGNAL
#else
#define RSDI_SEND_FLAGS 0
#endif
#endif /* _WIN32 */

#if defined(_WIN32)
/* A Winsock error code as the POSIX errno value the code above tests for. */
RSDI_PRIVATE int rsdi_wsa_errno(int w) {
    switch (w) {
    case 0: return 0;
    case WSAEWOULDBLOCK: return EWOULDBLOCK;
    case WSAEINPROGRESS: case WSAEALREADY: return EINPROGRESS;
    case WSAEINTR: return EINTR;
    case WSAECONNREFUSED: return ECONNREFUSED;
    case WSAECONNRESET: case WSAENETRESET: return ECONNRESET;
    case WSAECONNABORTED: return ECONNABORTED;
    case WSAESHUTDOWN: return EPIPE;
    case WSAENOTCONN: return ENOTCONN;
    case WSAETIMEDOUT: return ETIMEDOUT;
    case WSAENETUNREACH: case WSAENETDOWN: return ENETUNREACH;
    case WSAEHOSTUNREACH: case WSAEHOSTDOWN: return EHOSTUNREACH;
    case WSAEADDRINUSE: return EADDRINUSE;
    case WSAEADDRNOTAVAIL: return EADDRNOTAVAIL;
    case WSAEAFNOSUPPORT: case WSAEPFNOSUPPORT: return EAFNOSUPPORT;
    case WSAEMFILE: return EMFILE;
    case WSAENOBUFS: return ENOBUFS;
    case WSAEACCES: return EACCES;
    case WSAEINVAL: return EINVAL;
    case WSAENOTSOCK: case WSAEBADF: return EBADF;
    case WSAEMSGSIZE: return EMSGSIZE;
    case WSANOTINITIALISED: case WSASYSNOTREADY: case WSAVERNOTSUPPORTED: return ENETDOWN;
    default: return EIO;
    }
}
/* Windows: paths are UTF-8 here and UTF-16 for the W calls; errors become errno values. */
RSDI_PRIVATE int rsdi_win_errno(DWORD w) {
    switch (w) {
    case ERROR_FILE_NOT_FOUND: case ERROR_PATH_NOT_FOUND: case ERROR_INVALID_DRIVE: return ENOENT;
    case ERROR_ACCESS_DENIED: return EACCES;
    case ERROR_SHARING_VIOLATION: case ERROR_LOCK_VIOLATION: case ERROR_IO_PENDING: return EWOULDBLOCK;
    case ERROR_FILE_EXISTS: case ERROR_ALREADY_EXISTS: return EEXIST;
    case ERROR_DISK_FULL: case ERROR_HANDLE_DISK_FULL: return ENOSPC;
    case ERROR_NOT_ENOUGH_MEMORY: case ERROR_OUTOFMEMORY: return ENOMEM;
    case ERROR_TOO_MANY_OPEN_FILES: return EMFILE;
    case ERROR_FILENAME_EXCED_RANGE: return ENAMETOOLONG;
    case ERROR_DIRECTORY: return ENOTDIR;
    case ERROR_INVALID_PARAMETER: case ERROR_INVALID_NAME: return EINVAL;
    case ERROR_BAD_EXE_FORMAT: case ERROR_EXE_MACHINE_TYPE_MISMATCH: return ENOEXEC;
    case ERROR_BROKEN_PIPE: return EPIPE;
    default: return EIO;
    }
}
RSDI_PRIVATE bool rsdi_win_path(const char *path, wchar_t *w, int cap) {
    if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, cap) > 0) return true;
    errno = ENAMETOOLONG;
    return false;
}
RSDI_PRIVATE int rsdi_sock_fail(void) {
    errno = rsdi_wsa_errno(WSAGetLastError());
    return -1;
}
/* Winsock counts WSAStartup/WSACleanup pairs itself: each object that uses sockets
   takes one reference in create and gives it back in destroy. */
RSDI_PRIVATE int rsdi_net_up(void) {
    WSADATA wd;
    int r = WSAStartup(MAKEWORD(2, 2), &wd);
    if (r != 0) {
        errno = rsdi_wsa_errno(r);
        return -1;
    }
    return 0;
}
RSDI_PRIVATE void rsdi_net_down(void) { (void)WSACleanup(); }
#else
RSDI_PRIVATE int rsdi_net_up(void) { return 0; }
RSDI_PRIVATE void rsdi_net_down(void) {}
#endif

RSDI_PRIVATE void rsdi_sock_close(int fd) {
#if defined(_WIN32)
    (void)closesocket((SOCKET)fd);
#else
    (void)close(fd);
#endif
}

/* recv/send: bytes, 0 = EOF (recv), -1 with errno (EAGAIN/EWOULDBLOCK = would block). */
RSDI_PRIVATE long rsdi_sock_recv(int fd, char *buf, size_t n, int flags) {
#if defined(_WIN32)
    int r = recv((SOCKET)fd, buf, n > 0x40000000u ? 0x40000000 : (int)n, flags);
    return r == SOCKET_ERROR ? (long)rsdi_sock_fail() : (long)r;
#else
    ssize_t r;
    do { r = recv(fd, buf, n, flags); } while (r < 0 && errno == EINTR);
    return (long)r;
#endif
}

RSDI_PRIVATE long rsdi_sock_send(int fd, const char *buf, size_t n) {
#if defined(_WIN32)
    int r = send((SOCKET)fd, buf, n > 0x40000000u ? 0x40000000 : (int)n, 0);
    return r == SOCKET_ERROR ? (long)rsdi_sock_fail() : (long)r;
#else
    ssize_t r;
    do { r = send(fd, buf, n, RSDI_SEND_FLAGS); } while (r < 0 && errno == EINTR);
    return (long)r;
#endif
}

/* poll() / WSAPoll() over an rsd_pollfd array; with no entries it only waits
   (WSAPoll refuses an empty set). -1 with errno. */
RSD_API int rsd_poll(rsd_pollfd *fds, int n, int timeout_ms) {
#if defined(_WIN32)
    int r;
    if (n <= 0) {
        Sleep(timeout_ms < 0 ? INFINITE : (DWORD)timeout_ms);
        return 0;
    }
    r = WSAPoll((WSAPOLLFD *)(void *)fds, (ULONG)n, timeout_ms);
    return r == SOCKET_ERROR ? rsdi_sock_fail() : r;
#else
    return poll((struct pollfd *)(void *)fds, (nfds_t)n, timeout_ms);
#endif
}

RSDI_PRIVATE int rsdi_sock_connect(int fd, const struct sockaddr *sa, socklen_t len) {
#if defined(_WIN32)
    if (connect((SOCKET)fd, sa, len) == 0) return 0;
    (void)rsdi_sock_fail();
    if (errno == EWOULDBLOCK) errno = EINPROGRESS; /* Winsock's word for a started connect */
    return -1;
#else
    return connect(fd, sa, len);
#endif
}

/* The pending error of a connecting socket (SO_ERROR) as an errno value, 0 = none. */
RSDI_PRIVATE int rsdi_sock_error(int fd) {
    int err = 0;
    socklen_t len = (socklen_t)sizeof err;
#if defined(_WIN32)
    if (getsockopt((SOCKET)fd, SOL_SOCKET, SO_ERROR, (char *)&err, &len) != 0) return rsdi_wsa_errno(WSAGetLastError());
    return rsdi_wsa_errno(err);
#else
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return errno;
    return err;
#endif
}

/* bind + listen; -1 with errno. */
RSDI_PRIVATE int rsdi_sock_listen(int fd, const struct sockaddr *sa, socklen_t len, int backlog) {
#if defined(_WIN32)
    if (bind((SOCKET)fd, sa, len) != 0 || listen((SOCKET)fd, backlog) != 0) return rsdi_sock_fail();
    return 0;
#else
    if (bind(fd, sa, len) < 0 || listen(fd, backlog) < 0) return -1;
    return 0;
#endif
}

/* The next pending connection; -1 with errno (EAGAIN/EWOULDBLOCK = none). The caller
   makes it non-blocking and close-on-exec (rsdi_fd_nonblock). */
RSDI_PRIVATE int rsdi_sock_accept(int lfd) {
#if defined(_WIN32)
    SOCKET sk = accept((SOCKET)lfd, NULL, NULL);
    return sk == INVALID_SOCKET ? rsdi_sock_fail() : (int)sk;
#else
    return accept(lfd, NULL, NULL);
#endif
}

/* The local address of a socket; -1 with errno. */
RSDI_PRIVATE int rsdi_sock_name(int fd, struct sockaddr_storage *ss) {
    socklen_t len = (socklen_t)sizeof *ss;
#if defined(_WIN32)
    return getsockname((SOCKET)fd, (struct sockaddr *)(void *)ss, &len) != 0 ? rsdi_sock_fail() : 0;
#else
    return getsockname(fd, (struct sockaddr *)(void *)ss, &len) < 0 ? -1 : 0;
#endif
}

RSDI_PRIVATE void rsdi_sock_setint(int fd, int level, int name, int v) {
#if defined(_WIN32)
    (void)setsockopt((SOCKET)fd, level, name, (const char *)&v, (int)sizeof v);
#else
    (void)setsockopt(fd, level, name, &v, (socklen_t)sizeof v);
#endif
}

enum { RSDI_HINT_UNKNOWN = 0, RSDI_HINT_READY, RSDI_HINT_IDLE };

/* Per-connection transport: plain sockets now; TLS (RSD_HTTP_MBEDTLS) slots in here.
   recv/send return bytes, 0 = EOF (recv), -1 with errno (EAGAIN = would block). */
typedef struct rsdi_io {
    long (*recv_fn)(void *ctx, int fd, char *buf, size_t n);
    long (*send_fn)(void *ctx, int fd, const char *buf, size_t n);
    void (*close_fn)(void *ctx, int fd);
} rsdi_io;

RSDI_PRIVATE long rsdi_plain_recv(void *ctx, int fd, char *buf, size_t n) {
    (void)ctx;
    return rsdi_sock_recv(fd, buf, n, 0);
}

RSDI_PRIVATE long rsdi_plain_send(void *ctx, int fd, const char *buf, size_t n) {
    (void)ctx;
    return rsdi_sock_send(fd, buf, n);
}

RSDI_PRIVATE void rsdi_plain_close(void *ctx, int fd) {
    (void)ctx;
    rsdi_sock_close(fd);
}

static const rsdi_io rsdi_io_plain = {rsdi_plain_recv, rsdi_plain_send, rsdi_plain_close};

RSDI_PRIVATE bool rsdi_would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

/* Non-blocking and not inherited by children: O_NONBLOCK and FD_CLOEXEC, or on
   Windows FIONBIO and no HANDLE_FLAG_INHERIT. */
RSDI_PRIVATE int rsdi_fd_nonblock(int fd) {
#if defined(_WIN32)
    u_long on = 1;
    if (ioctlsocket((SOCKET)fd, FIONBIO, &on) != 0) return rsdi_sock_fail();
    (void)SetHandleInformation((HANDLE)(uintptr_t)(SOCKET)fd, HANDLE_FLAG_INHERIT, 0);
    return 0;
#else
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) return -1;
    return 0;
#endif
}

RSDI_PRIVATE void rsdi_sock_opts(int fd) {
    rsdi_sock_setint(fd, IPPROTO_TCP, TCP_NODELAY, 1);
#if defined(SO_NOSIGPIPE)
    rsdi_sock_setint(fd, SOL_SOCKET, SO_NOSIGPIPE, 1);
#endif
}

/* A non-blocking, close-on-exec stream socket; -1 with errno. */
RSDI_PRIVATE int rsdi_sock_open(int family) {
    int fd;
#if defined(_WIN32)
    SOCKET sk = WSASocketW(family, SOCK_STREAM, IPPROTO_TCP, NULL, 0, WSA_FLAG_NO_HANDLE_INHERIT);
    if (sk == INVALID_SOCKET) return rsdi_sock_fail();
    fd = (int)sk;
    if (rsdi_fd_nonblock(fd) < 0) {
        int e = errno;
        rsdi_sock_close(fd);
        errno = e;
        return -1;
    }
#elif defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC) && !defined(RSDI_FORCE_BSD)
    fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
#else
    fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (rsdi_fd_nonblock(fd) < 0) {
        int e = errno;
        rsdi_sock_close(fd);
        errno = e;
        return -1;
    }
#endif
    rsdi_sock_opts(fd);
    return fd;
}

typedef struct rsdi_addr {
    struct sockaddr_storage ss;
    socklen_t len;
} rsdi_addr;

/* Numeric IPv4/IPv6 text (NUL-terminated) + port into *a; RSD_OK or RSD_ERR_RESOLVE. */
RSDI_PRIVATE int rsdi_addr_make(rsdi_addr *a, const char *numeric, uint16_t port) {
    memset(a, 0, sizeof *a);
    {
        struct sockaddr_in *v4 = (struct sockaddr_in *)(void *)&a->ss;
        if (inet_pton(AF_INET, numeric, &v4->sin_addr) == 1) {
            v4->sin_family = AF_INET;
            v4->sin_port = htons(port);
            a->len = (socklen_t)sizeof *v4;
            return RSD_OK;
        }
    }
    {
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)(void *)&a->ss;
        if (inet_pton(AF_INET6, numeric, &v6->sin6_addr) == 1) {
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons(port);
            a->len = (socklen_t)sizeof *v6;
            return RSD_OK;
        }
    }
    return RSD_ERR_RESOLVE;
}

RSDI_PRIVATE bool rsdi_addr_eq(const rsdi_addr *a, const rsdi_addr *b) {
    return a->len == b->len && memcmp(&a->ss, &b->ss, (size_t)a->len) == 0;
}

RSDI_PRIVATE uint64_t rsdi_deadline(uint64_t start, uint32_t ms) {
    if (ms == RSD_TIMEOUT_NONE) return RSD_NO_DEADLINE;
    if (start > RSD_NO_DEADLINE - 1 - ms) return RSD_NO_DEADLINE - 1;
    return start + ms;
}

/* Bounded appender used to build heads; `over` latches on overflow. */
typedef struct rsdi_wbuf {
    char *p;
    size_t cap, len;
    bool over;
} rsdi_wbuf;

RSDI_PRIVATE void rsdi_w_put(rsdi_wbuf *w, const char *s, size_t n) {
    if (w->over || n > w->cap - w->len) {
        w->over = true;
        return;
    }
    if (n) memcpy(w->p + w->len, s, n);
    w->len += n;
}

RSDI_PRIVATE void rsdi_w_puts(rsdi_wbuf *w, const char *s) { rsdi_w_put(w, s, strlen(s)); }

RSDI_PRIVATE void rsdi_w_putu(rsdi_wbuf *w, uint64_t v, int base) {
    char t[24];
    int i = 24;
    do {
        t[--i] = "0123456789abcdef"[v % (uint64_t)base];
        v /= (uint64_t)base;
    } while (v && i > 0);
    rsdi_w_put(w, t + i, (size_t)(24 - i));
}

/* "<name: >v\r\n" when v is set */
RSDI_PRIVATE void rsdi_w_field(rsdi_wbuf *w, const char *name, const char *v) {
    if (!v) return;
    rsdi_w_puts(w, name);
    rsdi_w_puts(w, v);
    rsdi_w_put(w, "\r\n", 2);
}

/* "Content-Length: v\r\n" */
RSDI_PRIVATE void rsdi_w_clen(rsdi_wbuf *w, uint64_t v) {
    rsdi_w_puts(w, "Content-Length: ");
    rsdi_w_putu(w, v, 10);
    rsdi_w_put(w, "\r\n", 2);
}

RSDI_PRIVATE bool rsdi_token_ok(rsd_str s) {
    size_t i;
    if (s.len == 0 || !s.ptr) return false;
    for (i = 0; i < s.len; i++)
        if (!RSDI_HTTP_TCHAR(s.ptr[i])) return false; /* the parser's tchar map */
    return true;
}

/* Header value: no CR, LF or other control bytes except TAB. */
RSDI_PRIVATE bool rsdi_value_ok(rsd_str s) {
    size_t i;
    if (s.len && !s.ptr) return false;
    for (i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return false;
    }
    return true;
}

RSDI_PRIVATE bool rsdi_headers_ok(const rsd_http_header *h, size_t n) {
    size_t i;
    if (n && !h) return false;
    for (i = 0; i < n; i++)
        if (!rsdi_token_ok(h[i].name) || !rsdi_value_ok(h[i].value)) return false;
    return true;
}

RSDI_PRIVATE void rsdi_w_headers(rsdi_wbuf *w, const rsd_http_header *h, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        rsdi_w_put(w, h[i].name.ptr, h[i].name.len);
        rsdi_w_put(w, ": ", 2);
        rsdi_w_put(w, h[i].value.ptr, h[i].value.len);
        rsdi_w_put(w, "\r\n", 2);
    }
}

RSD_API uint64_t rsd_now_ms(void) {
#if defined(_WIN32)
    LARGE_INTEGER f, t;
    if (!QueryPerformanceFrequency(&f) || !QueryPerformanceCounter(&t) || f.QuadPart <= 0) return 0;
    return (uint64_t)(t.QuadPart / f.QuadPart) * 1000u +
           (uint64_t)(t.QuadPart % f.QuadPart) * 1000u / (uint64_t)f.QuadPart;
#else
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
#endif
}

/* Milliseconds since 1970 on the wall clock (0 when unknown). */
RSDI_PRIVATE uint64_t rsdi_wall_ms(void) {
#if defined(_WIN32)
    FILETIME ft;
    uint64_t t;
    GetSystemTimeAsFileTime(&ft);
    t = ((uint64_t)ft.dwHighDateTime << 32) | ft.dwLowDateTime; /* 100 ns since 1601 */
    return t < 116444736000000000ull ? 0 : (t - 116444736000000000ull) / 10000u;
#else
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
#endif
}

/* ==== net end ============================================================= */

/* ==== >>tls: mbedTLS transport (RSD_HTTP_MBEDTLS) ============================
   One rsdi_tls per client (config, RNG, CA chain) and one rsdi_tls_conn per socket
   slot, all set up in create (mbedtls_ssl_setup allocates the record buffers then);
   the handshake runs non-blocking inside step. Without RSD_HTTP_MBEDTLS the hooks
   below are stubs and https is RSD_ERR_TLS_UNAVAILABLE. */
enum { RSDI_TLS_HS_DONE = 0, RSDI_TLS_HS_AGAIN = 1 };
/* 1 when this build speaks https:// (RSD_HTTP_MBEDTLS); 0 compiles the client's TLS
   paths out (no request can be https there: send refuses it). */
#if defined(RSD_HTTP_MBEDTLS)
#define RSDI_TLS_BUILD 1
#else
#define RSDI_TLS_BUILD 0
#endif
#if defined(RSD_HTTP_MBEDTLS)
#include <mbedtls/ssl.h>
#include <mbedtls/entropy.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/x509_crt.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h> /* MBEDTLS_ERR_NET_* codes only */
#include <mbedtls/asn1.h>

typedef struct rsdi_tls_conn {
    mbedtls_ssl_context ssl;
    int fd;
    int sys_errno;       /* errno behind the last failed bio call */
    short want;          /* POLLIN / POLLOUT the handshake waits for */
    bool handshaken;
    size_t ip_len;       /* IP-literal host: 4 or 16 bytes in ip, checked against iPAddress SANs */
    unsigned char ip[16];
} rsdi_tls_conn;

typedef struct rsdi_tls {
    mbedtls_ssl_config conf;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_x509_crt ca;
    bool ca_loaded, insecure;
    int nconns, nsetup;
    rsdi_tls_conn *conns;
    rsd_allocator allocator;
} rsdi_tls;

/* Tried in order when tls_ca_file is NULL. */
static const char *const rsdi_tls_system_bundles[] = {
    "/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Arch, Gentoo */
    "/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
    "/etc/ssl/ca-bundle.pem",             /* openSUSE */
    "/etc/ssl/cert.pem",                  /* Alpine, macOS, BSDs */
    NULL
};

RSDI_PRIVATE int rsdi_tls_bio_send(void *ctx, const unsigned char *buf, size_t len) {
    rsdi_tls_conn *t = (rsdi_tls_conn *)ctx;
    long r = rsdi_sock_send(t->fd, (const char *)buf, len);
    if (r >= 0) return (int)r;
    t->sys_errno = errno;
    if (rsdi_would_block(errno)) return MBEDTLS_ERR_SSL_WANT_WRITE;
    if (errno == EPIPE || errno == ECONNRESET) return MBEDTLS_ERR_NET_CONN_RESET;
    return MBEDTLS_ERR_NET_SEND_FAILED;
}

RSDI_PRIVATE int rsdi_tls_bio_recv(void *ctx, unsigned char *buf, size_t len) {
    rsdi_tls_conn *t = (rsdi_tls_conn *)ctx;
    long r = rsdi_sock_recv(t->fd, (char *)buf, len, 0);
    if (r >= 0) return (int)r;
    t->sys_errno = errno;
    if (rsdi_would_block(errno)) return MBEDTLS_ERR_SSL_WANT_READ;
    if (errno == ECONNRESET) return MBEDTLS_ERR_NET_CONN_RESET;
    return MBEDTLS_ERR_NET_RECV_FAILED;
}

/* rsdi_io over an established TLS session: same contract as the plain one. */
RSDI_PRIVATE long rsdi_tls_recv(void *ctx, int fd, char *buf, size_t n) {
    rsdi_tls_conn *t = (rsdi_tls_conn *)ctx;
    int r;
    (void)fd;
    if (n > 0x40000000u) n = 0x40000000u;
    r = mbedtls_ssl_read(&t->ssl, (unsigned char *)buf, n);
    if (r >= 0) return (long)r;
    if (r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || r == MBEDTLS_ERR_SSL_CONN_EOF) return 0;
    if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) errno = EAGAIN;
    else if (r == MBEDTLS_ERR_NET_CONN_RESET) errno = ECONNRESET;
    else errno = t->sys_errno ? t->sys_errno : EIO;
    return -1;
}

RSDI_PRIVATE long rsdi_tls_send(void *ctx, int fd, const char *buf, size_t n) {
    rsdi_tls_conn *t = (rsdi_tls_conn *)ctx;
    int r;
    (void)fd;
    if (n > 0x40000000u) n = 0x40000000u;
    r = mbedtls_ssl_write(&t->ssl, (const unsigned char *)buf, n);
    if (r >= 0) return (long)r;
    if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) errno = EAGAIN;
    else if (r == MBEDTLS_ERR_NET_CONN_RESET) errno = ECONNRESET;
    else errno = t->sys_errno ? t->sys_errno : EIO;
    return -1;
}

/* Best-effort close_notify (never waits), then the socket; the context is reset for
   the slot's next connection (its buffers stay allocated). */
RSDI_PRIVATE void rsdi_tls_close(void *ctx, int fd) {
    rsdi_tls_conn *t = (rsdi_tls_conn *)ctx;
    if (t->handshaken) (void)mbedtls_ssl_close_notify(&t->ssl);
    rsdi_sock_close(fd);
    (void)mbedtls_ssl_session_reset(&t->ssl);
    t->fd = -1;
    t->handshaken = false;
    t->want = 0;
}

static const rsdi_io rsdi_io_tls = {rsdi_tls_recv, rsdi_tls_send, rsdi_tls_close};

/* True when the certificate's subjectAltName holds iPAddress == ip[0..n). mbedTLS 2.28
   neither parses nor matches iPAddress names, so this walks the DER extensions. */
RSDI_PRIVATE bool rsdi_tls_san_has_ip(const mbedtls_x509_crt *crt, const unsigned char *ip, size_t n) {
    static const unsigned char san_oid[3] = {0x55, 0x1D, 0x11}; /* 2.5.29.17 */
    unsigned char *p = crt->v3_ext.p, *end = p + crt->v3_ext.len, *ext_end;
    size_t len;
    if (!p || crt->v3_ext.len == 0) return false;
    if (mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE) != 0) return false;
    end = p + len;
    while (p < end) {
        size_t oid_len;
        unsigned char *oid;
        if (mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE) != 0) return false;
        ext_end = p + len;
        if (mbedtls_asn1_get_tag(&p, ext_end, &oid_len, MBEDTLS_ASN1_OID) != 0) return false;
        oid = p;
        p += oid_len;
        if (oid_len == sizeof san_oid && memcmp(oid, san_oid, sizeof san_oid) == 0) {
            unsigned char *q, *q_end;
            if (p < ext_end && *p == MBEDTLS_ASN1_BOOLEAN) {
                int crit;
                if (mbedtls_asn1_get_bool(&p, ext_end, &crit) != 0) return false;
            }
            if (mbedtls_asn1_get_tag(&p, ext_end, &len, MBEDTLS_ASN1_OCTET_STRING) != 0) return false;
            q = p;
            q_end = p + len;
            if (mbedtls_asn1_get_tag(&q, q_end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE) != 0) return false;
            q_end = q + len;
            while (q < q_end) { /* GeneralName: [7] IMPLICIT OCTET STRING is iPAddress */
                int tag = *q++;
                if (mbedtls_asn1_get_len(&q, q_end, &len) != 0) return false;
                if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) && len == n && memcmp(q, ip, n) == 0) return true;
                q += len;
            }
            return false;
        }
        p = ext_end;
    }
    return false;
}

/* Verify hook: for an IP-literal host the leaf must name that address. */
RSDI_PRIVATE int rsdi_tls_verify_cb(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags) {
    rsdi_tls_conn *tc = (rsdi_tls_conn *)ctx;
    if (depth == 0 && tc->ip_len && !rsdi_tls_san_has_ip(crt, tc->ip, tc->ip_len))
        *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    return 0;
}

RSDI_PRIVATE void rsdi_tls_destroy(rsdi_tls *t) {
    int k;
    rsd_allocator a;
    if (!t) return;
    a = t->allocator;
    for (k = 0; k < t->nsetup; k++) mbedtls_ssl_free(&t->conns[k].ssl);
    rsdi_free(&a, t->conns);
    mbedtls_x509_crt_free(&t->ca);
    mbedtls_ssl_config_free(&t->conf);
    mbedtls_ctr_drbg_free(&t->drbg);
    mbedtls_entropy_free(&t->entropy);
    rsdi_free(&a, t);
}

/* Everything TLS needs, set up now: RNG, CA chain, config, one context per socket.
   NULL on failure (logged). */
RSDI_PRIVATE rsdi_tls *rsdi_tls_create(const rsd_http_client_desc *d, int nconns) {
    static const char pers[] = "residency_http client";
    rsdi_tls *t;
    int k, r;
    char err[128];
    t = (rsdi_tls *)rsdi_malloc(&d->allocator, sizeof *t);
    if (!t) goto nomem;
    memset(t, 0, sizeof *t);
    t->allocator = d->allocator;
    t->insecure = d->tls_insecure_skip_verify;
    mbedtls_ssl_config_init(&t->conf);
    mbedtls_entropy_init(&t->entropy);
    mbedtls_ctr_drbg_init(&t->drbg);
    mbedtls_x509_crt_init(&t->ca);
    t->conns = (rsdi_tls_conn *)rsdi_malloc(&d->allocator, sizeof(rsdi_tls_conn) * (size_t)nconns);
    if (!t->conns) {
        rsdi_tls_destroy(t);
        goto nomem;
    }
    memset(t->conns, 0, sizeof(rsdi_tls_conn) * (size_t)nconns);
    t->nconns = nconns;
    r = mbedtls_ctr_drbg_seed(&t->drbg, mbedtls_entropy_func, &t->entropy,
                              (const unsigned char *)pers, sizeof pers - 1);
    if (r != 0) {
        mbedtls_strerror(r, err, sizeof err);
        rsdi_logf(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_TLS_SETUP_FAILED, RSDI_WHERE,
                  "tls: RNG seed failed: -0x%04x %s", (unsigned)-r, err);
        goto fail;
    }
    if (d->tls_ca_file) {
        r = mbedtls_x509_crt_parse_file(&t->ca, d->tls_ca_file);
        if (r < 0 || t->ca.version == 0) {
            mbedtls_strerror(r, err, sizeof err);
            rsdi_logf(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_TLS_SETUP_FAILED, RSDI_WHERE,
                      "tls: cannot load CA file %s: -0x%04x %s", d->tls_ca_file, (unsigned)-r, err);
            goto fail;
        }
        t->ca_loaded = true;
    } else {
        const char *const *b;
        for (b = rsdi_tls_system_bundles; *b && !t->ca_loaded; b++) {
            if (access(*b, R_OK) != 0) continue;
            r = mbedtls_x509_crt_parse_file(&t->ca, *b);
            if (r >= 0 && t->ca.version != 0) t->ca_loaded = true;
        }
        /* none found: https fails at send (TLS_NO_CA) unless verification is off */
    }
    r = mbedtls_ssl_config_defaults(&t->conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT);
    if (r != 0) goto fail_cfg;
    mbedtls_ssl_conf_min_version(&t->conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_rng(&t->conf, mbedtls_ctr_drbg_random, &t->drbg);
    mbedtls_ssl_conf_ca_chain(&t->conf, &t->ca, NULL);
    mbedtls_ssl_conf_authmode(&t->conf, t->insecure ? MBEDTLS_SSL_VERIFY_NONE : MBEDTLS_SSL_VERIFY_REQUIRED);
    for (k = 0; k < nconns; k++) {
        rsdi_tls_conn *tc = &t->conns[k];
        mbedtls_ssl_init(&tc->ssl);
        t->nsetup = k + 1;
        tc->fd = -1;
        r = mbedtls_ssl_setup(&tc->ssl, &t->conf);
        if (r != 0) goto fail_cfg;
        mbedtls_ssl_set_bio(&tc->ssl, tc, rsdi_tls_bio_send, rsdi_tls_bio_recv, NULL);
        mbedtls_ssl_set_verify(&tc->ssl, rsdi_tls_verify_cb, tc);
    }
    if (t->insecure)
        rsdi_log(&d->logger, RSD_LOG_WARN, RSD_LOGITEM_TLS_INSECURE,
                 "tls: certificate and host name verification DISABLED by tls_insecure_skip_verify", RSDI_WHERE);
    return t;
fail_cfg:
    mbedtls_strerror(r, err, sizeof err);
    rsdi_logf(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_TLS_SETUP_FAILED, RSDI_WHERE,
              "tls: config/setup failed: -0x%04x %s", (unsigned)-r, err);
fail:
    rsdi_tls_destroy(t);
    return NULL;
nomem:
    rsdi_log(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, "http client: tls allocation failed", RSDI_WHERE);
    return NULL;
}

/* Prepares slot k's context for a new connection on fd to host (SNI + name check). */
RSDI_PRIVATE int rsdi_tls_begin(rsdi_tls *t, int k, int fd, const char *host, const rsdi_io **io,
                                void **ctx) {
    rsdi_tls_conn *tc = &t->conns[k];
    (void)mbedtls_ssl_session_reset(&tc->ssl);
    tc->fd = fd;
    tc->sys_errno = 0;
    tc->handshaken = false;
    tc->want = POLLOUT;
    tc->ip_len = 0;
    if (inet_pton(AF_INET, host, tc->ip) == 1) tc->ip_len = 4;
    else if (inet_pton(AF_INET6, host, tc->ip) == 1) tc->ip_len = 16;
    /* a name: SNI + mbedTLS's name check; an address: no SNI (RFC 6066), own SAN check */
    if (mbedtls_ssl_set_hostname(&tc->ssl, tc->ip_len ? NULL : host) != 0) return RSD_ERR_TLS;
    *io = &rsdi_io_tls;
    *ctx = tc;
    return RSD_OK;
}

/* One non-blocking handshake step: RSDI_TLS_HS_DONE, RSDI_TLS_HS_AGAIN (wait for
   tc->want), or RSD_ERR_TLS / RSD_ERR_TLS_VERIFY with *code = the mbedTLS error and
   *flags = the verify flags. what/cap receives a one-line reason for the log. */
RSDI_PRIVATE int rsdi_tls_handshake(void *ctx, int *code, uint32_t *flags, char *what, size_t cap) {
    rsdi_tls_conn *tc = (rsdi_tls_conn *)ctx;
    int r = mbedtls_ssl_handshake(&tc->ssl);
    *code = 0;
    *flags = 0;
    if (r == 0) {
        tc->handshaken = true;
        tc->want = 0;
        return RSDI_TLS_HS_DONE;
    }
    if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE) {
        tc->want = r == MBEDTLS_ERR_SSL_WANT_READ ? POLLIN : POLLOUT;
        return RSDI_TLS_HS_AGAIN;
    }
    *code = r;
    if (r == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
        int n;
        *flags = mbedtls_ssl_get_verify_result(&tc->ssl);
        n = mbedtls_x509_crt_verify_info(what, cap, "", *flags);
        if (n <= 0) what[0] = '\0';
        { /* one line: the info is "reason\nreason\n" */
            size_t i;
            for (i = 0; what[i]; i++)
                if (what[i] == '\n') what[i] = what[i + 1] ? ';' : '\0';
        }
        return RSD_ERR_TLS_VERIFY;
    }
    mbedtls_strerror(r, what, cap);
    return RSD_ERR_TLS;
}

/* POLLIN/POLLOUT the handshake on this connection waits for. */
RSDI_PRIVATE short rsdi_tls_want(void *ctx) {
    return ((rsdi_tls_conn *)ctx)->want;
}

/* Decrypted bytes waiting inside mbedTLS (poll() cannot see them). */
RSDI_PRIVATE bool rsdi_tls_pending(const rsdi_io *io, void *ctx) {
    return io == &rsdi_io_tls && mbedtls_ssl_get_bytes_avail(&((rsdi_tls_conn *)ctx)->ssl) > 0;
}

RSDI_PRIVATE bool rsdi_tls_usable(const rsdi_tls *t) { return t && (t->ca_loaded || t->insecure); }
#else /* !RSD_HTTP_MBEDTLS: stubs */
typedef struct rsdi_tls { int unused; } rsdi_tls;
RSDI_PRIVATE void rsdi_tls_destroy(rsdi_tls *t) { (void)t; }
RSDI_PRIVATE int rsdi_tls_begin(rsdi_tls *t, int k, int fd, const char *host, const rsdi_io **io,
                                void **ctx) {
    (void)t; (void)k; (void)fd; (void)host; (void)io; (void)ctx;
    return RSD_ERR_TLS_UNAVAILABLE;
}
RSDI_PRIVATE int rsdi_tls_handshake(void *ctx, int *code, uint32_t *flags, char *what, size_t cap) {
    (void)ctx; (void)what; (void)cap;
    *code = 0;
    *flags = 0;
    return RSD_ERR_TLS_UNAVAILABLE;
}
RSDI_PRIVATE short rsdi_tls_want(void *ctx) { (void)ctx; return RSD_POLLOUT; }
RSDI_PRIVATE bool rsdi_tls_pending(const rsdi_io *io, void *ctx) { (void)io; (void)ctx; return false; }
RSDI_PRIVATE bool rsdi_tls_usable(const rsdi_tls *t) { (void)t; return false; }
#endif /* RSD_HTTP_MBEDTLS */
/* ==== tls end ============================================================= */

/* ==== >>client: the HTTP/1.1 client ======================================= */
/* ---- SSE line reader ---------------------------------------------------------- */
enum { RSDI_SSE_LINE = 0, RSDI_SSE_FIELD, RSDI_SSE_SPACE, RSDI_SSE_VALUE, RSDI_SSE_SKIP };
enum { RSDI_SSE_T_NONE = 0, RSDI_SSE_T_DATA, RSDI_SSE_T_EVENT, RSDI_SSE_T_ID };

RSD_API void rsd_sse_init(rsd_sse_reader *r, char *buf, size_t cap) {
    if (!r) return;
    memset(r, 0, sizeof *r);
    r->buf = buf;
    r->cap = buf ? cap : 0;
}

RSDI_PRIVATE void rsdi_sse_reset_event(rsd_sse_reader *r) {
    r->data_len = 0;
    r->data_lines = 0;
    r->event_len = 0;
    r->overflow = false;
}

RSDI_PRIVATE void rsdi_sse_data_byte(rsd_sse_reader *r, char ch) {
    if (r->data_len >= r->cap) {
        r->overflow = true;
        return;
    }
    r->buf[r->data_len++] = ch;
}

/* Field name complete (at ':' or end of line): choose where its value goes. */
RSDI_PRIVATE void rsdi_sse_field_done(rsd_sse_reader *r) {
    r->target = RSDI_SSE_T_NONE;
    if (r->field_len == 4 && memcmp(r->field, "data", 4) == 0) {
        r->target = RSDI_SSE_T_DATA;
        if (r->data_lines++ > 0) rsdi_sse_data_byte(r, '\n');
    } else if (r->field_len == 5 && memcmp(r->field, "event", 5) == 0) {
        r->target = RSDI_SSE_T_EVENT;
        r->event_len = 0;
    } else if (r->field_len == 2 && memcmp(r->field, "id", 2) == 0) {
        r->target = RSDI_SSE_T_ID;
        r->id_len = 0;
    }
}

RSD_API int rsd_sse_feed(rsd_sse_reader *r, const char *p, size_t n, size_t *used,
                         rsd_sse_event *ev) {
    size_t i;
    if (used) *used = 0;
    if (!r || (n && !p) || !used || !ev) return RSD_ERR_ARG;
    for (i = 0; i < n; i++) {
        char ch = p[i];
        if (r->skip_lf) {
            r->skip_lf = false;
            if (ch == '\n') continue;
        }
        if (ch == '\r' || ch == '\n') {
            if (ch == '\r') r->skip_lf = true;
            if (r->state == RSDI_SSE_FIELD) rsdi_sse_field_done(r);
            if (r->state == RSDI_SSE_LINE) { /* blank line: dispatch */
                if (r->data_lines > 0) {
                    bool over = r->overflow;
                    *used = i + 1;
                    ev->data.ptr = r->buf ? r->buf : "";
                    ev->data.len = r->data_len;
                    ev->event.ptr = r->event;
                    ev->event.len = r->event_len;
                    ev->id.ptr = r->id;
                    ev->id.len = r->id_len;
                    rsdi_sse_reset_event(r);
                    if (over) return RSD_ERR_TOO_LARGE;
                    /* views stay valid: the next feed overwrites them */
                    return RSD_OK;
                }
                rsdi_sse_reset_event(r);
            }
            r->state = RSDI_SSE_LINE;
            r->field_len = 0;
            continue;
        }
        switch (r->state) {
        case RSDI_SSE_LINE:
            if (ch == ':') {
                r->state = RSDI_SSE_SKIP; /* comment */
                break;
            }
            r->state = RSDI_SSE_FIELD;
            r->field_len = 0;
            /* fall through */
        case RSDI_SSE_FIELD:
            if (ch == ':') {
                rsdi_sse_field_done(r);
                r->state = RSDI_SSE_SPACE;
            } else if (r->field_len < (uint32_t)sizeof r->field) {
                r->field[r->field_len++] = ch;
            } else {
                r->field_len = (uint32_t)sizeof r->field + 1u; /* too long: unknown field */
                if (r->field_len > sizeof r->field) r->field_len = (uint32_t)sizeof r->field;
                r->field[0] = '\0';
            }
            break;
        case RSDI_SSE_SPACE:
            r->state = RSDI_SSE_VALUE;
            if (ch == ' ') break;
            /* fall through */
        case RSDI_SSE_VALUE:
            if (r->target == RSDI_SSE_T_DATA) rsdi_sse_data_byte(r, ch);
            else if (r->target == RSDI_SSE_T_EVENT && r->event_len < RSD_SSE_MAX_NAME) r->event[r->event_len++] = ch;
            else if (r->target == RSDI_SSE_T_ID && r->id_len < RSD_SSE_MAX_NAME) r->id[r->id_len++] = ch;
            break;
        default: /* RSDI_SSE_SKIP */
            break;
        }
    }
    *used = n;
    return RSD_PENDING;
}

/* ---- client ------------------------------------------------------------------- */
enum { RSDI_CC_FREE = 0, RSDI_CC_CONNECTING, RSDI_CC_BUSY, RSDI_CC_IDLE, RSDI_CC_HANDSHAKE };
enum {
    RSDI_RQ_FREE = 0, RSDI_RQ_QUEUED, RSDI_RQ_CONNECTING, RSDI_RQ_SENDING, RSDI_RQ_HEAD,
    RSDI_RQ_BODY, RSDI_RQ_DONE, RSDI_RQ_DELIVERED
};
enum { RSDI_BODY_NONE = 0, RSDI_BODY_LENGTH, RSDI_BODY_CHUNKED, RSDI_BODY_CLOSE };
enum { RSDI_SLOT_BITS = 12, RSDI_SMALL_ROOM = 256 }; /* handle index bits: RSD_HTTP_MAX_CONNS_LIMIT */
enum { RSDI_STEP_READ_BYTES = 1 << 20 }; /* most one step reads for one request */

typedef struct rsdi_cconn {
    int fd;
    int state;
    int req;             /* slot using it, -1 */
    int hint;
    uint64_t idle_since;
    uint32_t idle_ms;    /* kept while idle this long: idle_timeout_ms, or less when the
                            peer announced a shorter Keep-Alive: timeout= */
    rsdi_addr addr;
    const rsdi_io *io;
    void *io_ctx;
    bool tls;            /* https: kept-alive reuse also needs the same host name */
    char host[RSD_HTTP_MAX_HOST_BYTES + 1];
} rsdi_cconn;

typedef struct rsdi_creq {
    int state;
    uint32_t gen;
    char *tx, *head;
    char *own_body;      /* the slot's buffer (max_body_bytes) */
    /* from here on, a request's own: zeroed by send */
    int conn;
    rsdi_addr addr;
    size_t tx_len, tx_off, req_line_len;
    size_t head_len;
    char *body;          /* body area: own_body or the caller's body_buf */
    size_t body_cap, body_len;
    rsd_http_response_head resp;
    int body_mode;
    uint64_t body_left, body_total, max_stream;
    rsd_http_dechunk dc;
    rsd_sse_reader sse;
    uint64_t connect_deadline, total_deadline, done_seq;
    bool may_retry, is_head, reused, retried, fresh_only, extra, got_head, paused, quiet;
    int result, sys_errno;
    bool tls;            /* https: host is the SNI / verified name */
    char host[RSD_HTTP_MAX_HOST_BYTES + 1];
    int tls_error;
    uint32_t tls_flags;
    void (*on_body)(void *user, const char *data, size_t len);
    void (*on_sse)(void *user, const rsd_sse_event *ev);
    void *user;
    const char *sse_rest;  /* paused from on_sse: received bytes not yet fed to the reader
                              (in the head or body area, which nothing writes meanwhile) */
    size_t sse_rest_len;
    bool sse_end;          /* ... and the body ended within them: finish once delivered */
} rsdi_creq;

struct rsd_http_client {
    bool net_ref;          /* holds a reference on the socket layer (rsdi_net_up) */
    rsd_http_client_desc desc;
    rsdi_cconn *conns;
    rsdi_creq *reqs;
    rsd_pollfd *pfds;
    char *bufs;
    int nconns, nreqs;
    int delivered;       /* slot whose event views are live, -1 */
    uint64_t seq, now;
    rsd_http_client_info stats;
    rsdi_tls *tls;       /* NULL: https = RSD_ERR_TLS_UNAVAILABLE */
};

/* A desc's defaults as a table: each zero field (of 4 or 8 bytes: an int, a uint32_t, a
   size_t) takes its entry's value. */
typedef struct rsdi_dflt {
    uint16_t off, size;
    uint32_t v;
} rsdi_dflt;
#define RSDI_DFLT(T, f, v) {(uint16_t)offsetof(T, f), (uint16_t)sizeof(((T *)0)->f), (uint32_t)(v)}

RSDI_PRIVATE void rsdi_defaults(void *d, const rsdi_dflt *t, size_t n) {
    for (; n--; t++) {
        char *p = (char *)d + t->off;
        if (t->size == 8) {
            uint64_t x;
            memcpy(&x, p, sizeof x);
            if (!x) x = t->v;
            memcpy(p, &x, sizeof x);
        } else {
            uint32_t x;
            memcpy(&x, p, sizeof x);
            if (!x) x = t->v;
            memcpy(p, &x, sizeof x);
        }
    }
}

RSDI_PRIVATE int rsdi_client_desc_fix(rsd_http_client_desc *d) {
    static const rsdi_dflt t[] = {
        RSDI_DFLT(rsd_http_client_desc, max_requests, RSD_HTTP_CLIENT_DEFAULT_MAX_REQUESTS),
        RSDI_DFLT(rsd_http_client_desc, max_conns, RSD_HTTP_CLIENT_DEFAULT_MAX_CONNS),
        RSDI_DFLT(rsd_http_client_desc, max_header_bytes, RSD_HTTP_DEFAULT_MAX_HEADER_BYTES),
        RSDI_DFLT(rsd_http_client_desc, max_body_bytes, RSD_HTTP_DEFAULT_MAX_BODY_BYTES),
        RSDI_DFLT(rsd_http_client_desc, max_request_bytes, RSD_HTTP_DEFAULT_MAX_REQUEST_BYTES),
        RSDI_DFLT(rsd_http_client_desc, connect_timeout_ms, RSD_HTTP_DEFAULT_CONNECT_TIMEOUT_MS),
        RSDI_DFLT(rsd_http_client_desc, total_timeout_ms, RSD_HTTP_DEFAULT_TOTAL_TIMEOUT_MS),
        RSDI_DFLT(rsd_http_client_desc, idle_timeout_ms, RSD_HTTP_DEFAULT_IDLE_TIMEOUT_MS)};
    if (d->max_requests < 0 || d->max_conns < 0 || d->max_requests > RSD_HTTP_MAX_CONNS_LIMIT ||
        d->max_conns > RSD_HTTP_MAX_CONNS_LIMIT)
        return RSD_ERR_ARG;
    rsdi_defaults(d, t, sizeof t / sizeof t[0]);
    if (d->max_header_bytes < 64 || d->max_request_bytes < 64) return RSD_ERR_ARG;
    return rsdi_allocator_check(&d->allocator);
}

/* Bytes rsd_http_client_create allocates for d (already fixed), without TLS; 0 = overflow. */
RSDI_PRIVATE size_t rsdi_client_footprint(const rsd_http_client_desc *d) {
    size_t per = 0, total = 0;
    if (!rsdi_size_add(d->max_request_bytes, d->max_header_bytes, &per) || !rsdi_size_add(per, d->max_body_bytes, &per) ||
        !rsdi_size_mul(per, (size_t)d->max_requests, &total))
        return 0;
    return sizeof(rsd_http_client) + total + (sizeof(rsdi_cconn) + sizeof(rsd_pollfd)) * (size_t)d->max_conns +
           sizeof(rsdi_creq) * (size_t)d->max_requests;
}

RSD_API size_t rsd_http_client_footprint(const rsd_http_client_desc *desc) {
    rsd_http_client_desc d;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    return rsdi_client_desc_fix(&d) < 0 ? 0 : rsdi_client_footprint(&d);
}

RSD_API rsd_http_client *rsd_http_client_create(const rsd_http_client_desc *desc) {
    rsd_http_client_desc d;
    rsd_http_client *c;
    size_t per = 0, total = 0, sz;
    int i;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (rsdi_client_desc_fix(&d) < 0) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, "http client: invalid desc", RSDI_WHERE);
        return NULL;
    }
    if (!rsdi_size_add(d.max_request_bytes, d.max_header_bytes, &per) ||
        !rsdi_size_add(per, d.max_body_bytes, &per) ||
        !rsdi_size_mul(per, (size_t)d.max_requests, &total)) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, "http client: buffer sizes overflow", RSDI_WHERE);
        return NULL;
    }
    c = (rsd_http_client *)rsdi_malloc(&d.allocator, sizeof *c);
    if (!c) goto nomem;
    memset(c, 0, sizeof *c);
    c->desc = d;
    c->nconns = d.max_conns;
    if (rsdi_net_up() < 0) {
        rsdi_logf(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, RSDI_WHERE,
                  "http client: the socket layer did not start: errno %d", errno);
        rsdi_free(&d.allocator, c);
        return NULL;
    }
    c->net_ref = true;
    c->nreqs = d.max_requests;
    c->delivered = -1;
    sz = sizeof(rsdi_cconn) * (size_t)d.max_conns;
    c->conns = (rsdi_cconn *)rsdi_malloc(&d.allocator, sz);
    if (!c->conns) {
        rsd_http_client_destroy(c);
        goto nomem;
    }
    memset(c->conns, 0, sz);
    for (i = 0; i < c->nconns; i++) {
        c->conns[i].fd = -1;
        c->conns[i].req = -1;
    }
    c->reqs = (rsdi_creq *)rsdi_malloc(&d.allocator, sizeof(rsdi_creq) * (size_t)d.max_requests);
    c->pfds = (rsd_pollfd *)rsdi_malloc(&d.allocator, sizeof(rsd_pollfd) * (size_t)d.max_conns);
    c->bufs = (char *)rsdi_malloc(&d.allocator, total);
    if (!c->reqs || !c->pfds || !c->bufs) {
        rsd_http_client_destroy(c);
        goto nomem;
    }
    memset(c->reqs, 0, sizeof(rsdi_creq) * (size_t)d.max_requests);
    for (i = 0; i < c->nreqs; i++) {
        rsdi_creq *r = &c->reqs[i];
        r->tx = c->bufs + per * (size_t)i;
        r->head = r->tx + d.max_request_bytes;
        r->own_body = r->head + d.max_header_bytes;
        r->gen = 1;
        r->conn = -1;
    }
#if defined(RSD_HTTP_MBEDTLS)
    if (!d.tls_off) {
        c->tls = rsdi_tls_create(&d, d.max_conns);
        if (!c->tls) {
            rsd_http_client_destroy(c);
            return NULL; /* logged */
        }
    }
#endif
    return c;
nomem:
    rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, "http client: allocation failed", RSDI_WHERE);
    return NULL;
}

RSDI_PRIVATE void rsdi_cconn_close(rsd_http_client *c, int k) {
    rsdi_cconn *cn = &c->conns[k];
    if (cn->fd >= 0) cn->io->close_fn(cn->io_ctx, cn->fd);
    cn->fd = -1;
    cn->state = RSDI_CC_FREE;
    cn->req = -1;
}

RSD_API void rsd_http_client_destroy(rsd_http_client *c) {
    rsd_allocator a;
    int i;
    if (!c) return;
    a = c->desc.allocator;
    if (c->conns)
        for (i = 0; i < c->nconns; i++)
            if (c->conns[i].fd >= 0) rsdi_cconn_close(c, i);
    rsdi_tls_destroy(c->tls);
    if (c->net_ref) rsdi_net_down();
    rsdi_free(&a, c->bufs);
    rsdi_free(&a, c->pfds);
    rsdi_free(&a, c->reqs);
    rsdi_free(&a, c->conns);
    rsdi_free(&a, c);
}

RSDI_PRIVATE void rsdi_client_release(rsd_http_client *c) {
    if (c->delivered >= 0) {
        rsdi_creq *r = &c->reqs[c->delivered];
        r->state = RSDI_RQ_FREE;
        r->gen = rsdi_handle_next_gen(r->gen, RSDI_SLOT_BITS);
        c->delivered = -1;
    }
}

RSDI_PRIVATE int rsdi_client_slot(const rsd_http_client *c, rsd_http_req_h h) {
    uint32_t slot = rsdi_handle_idx(h.id, RSDI_SLOT_BITS);
    if (h.id == 0 || slot >= (uint32_t)c->nreqs) return -1;
    if (c->reqs[slot].gen != rsdi_handle_gen(h.id, RSDI_SLOT_BITS)) return -1;
    return (int)slot;
}

/* What a method asks of the client: RSDI_M_RETRY (idempotent: sent again on a fresh
   connection after a stale kept-alive one), RSDI_M_LEN (a Content-Length even without a
   body), RSDI_M_HEAD (the answer has no body). */
enum { RSDI_M_RETRY = 1, RSDI_M_LEN = 2, RSDI_M_HEAD = 4 };
RSDI_PRIVATE int rsdi_method_flags(const char *m) {
    static const char names[] = "GET\0HEAD\0PUT\0DELETE\0OPTIONS\0POST\0PATCH\0";
    static const unsigned char flags[] = {RSDI_M_RETRY, RSDI_M_RETRY | RSDI_M_HEAD, RSDI_M_RETRY | RSDI_M_LEN,
                                          RSDI_M_RETRY, RSDI_M_RETRY, RSDI_M_LEN, RSDI_M_LEN};
    const char *n = names;
    int i;
    for (i = 0; *n; i++, n += strlen(n) + 1)
        if (strcmp(m, n) == 0) return flags[i];
    return 0;
}

/* Request line + head + body into the slot's tx buffer (one write later). */
RSDI_PRIVATE int rsdi_build_request(rsd_http_client *c, rsdi_creq *r, const rsd_http_request *q,
                                    const char *method, int mflags, const rsd_url *u) {
    rsdi_wbuf w;
    w.p = r->tx;
    w.cap = c->desc.max_request_bytes;
    w.len = 0;
    w.over = false;
    rsdi_w_puts(&w, method);
    rsdi_w_put(&w, " ", 1);
    if (u->path.len) rsdi_w_put(&w, u->path.ptr, u->path.len);
    else rsdi_w_put(&w, "/", 1);
    r->req_line_len = w.len;
    rsdi_w_puts(&w, " HTTP/1.1\r\nHost: ");
    if (u->host_kind == RSD_HOST_IPV6) rsdi_w_put(&w, "[", 1);
    rsdi_w_put(&w, u->host.ptr, u->host.len);
    if (u->host_kind == RSD_HOST_IPV6) rsdi_w_put(&w, "]", 1);
    if (u->port_explicit) {
        rsdi_w_put(&w, ":", 1);
        rsdi_w_putu(&w, u->port, 10);
    }
    rsdi_w_put(&w, "\r\n", 2);
    rsdi_w_field(&w, "Authorization: Bearer ", q->bearer_token);
    rsdi_w_field(&w, "Content-Type: ", q->content_type);
    if (q->body_len > 0 || (mflags & RSDI_M_LEN)) rsdi_w_clen(&w, (uint64_t)q->body_len);
    rsdi_w_headers(&w, q->headers, q->num_headers);
    rsdi_w_put(&w, "\r\n", 2);
    if (q->body_len) rsdi_w_put(&w, (const char *)q->body, q->body_len);
    if (w.over) return RSD_ERR_TOO_LARGE;
    r->tx_len = w.len;
    r->tx_off = 0;
    return RSD_OK;
}

/* Numeric address for the URL's host (no blocking resolution here). */
RSDI_PRIVATE int rsdi_client_addr(rsd_http_client *c, const rsd_url *u, const char *numeric,
                                  rsdi_addr *out) {
    char host[RSD_HTTP_MAX_HOST_BYTES + 1], num[RSD_HTTP_MAX_HOST_BYTES + 1];
    if (u->host.len == 0 || u->host.len > RSD_HTTP_MAX_HOST_BYTES) return RSD_ERR_URL;
    memcpy(host, u->host.ptr, u->host.len);
    host[u->host.len] = '\0';
    if (u->host_kind == RSD_HOST_IPV4 || u->host_kind == RSD_HOST_IPV6)
        return rsdi_addr_make(out, host, u->port);
    if (u->host.len == 9) {
        size_t i;
        bool lh = true;
        for (i = 0; i < 9; i++)
            if ((host[i] | 0x20) != "localhost"[i]) lh = false;
        if (lh) return rsdi_addr_make(out, "127.0.0.1", u->port);
    }
    if (numeric) return rsdi_addr_make(out, numeric, u->port);
    if (c->desc.resolve_fn) {
        num[0] = '\0';
        if (c->desc.resolve_fn(c->desc.resolve_user, host, num, sizeof num) < 0) return RSD_ERR_RESOLVE;
        num[sizeof num - 1] = '\0';
        return rsdi_addr_make(out, num, u->port);
    }
    return RSD_ERR_RESOLVE;
}

RSDI_PRIVATE int rsdi_http_send_ex(rsd_http_client *c, const rsd_http_request *q, uint64_t now,
                                   rsd_http_req_h *out, const char *numeric) {
    const char *method;
    rsd_url u;
    rsdi_addr addr;
    rsdi_creq *r;
    size_t mlen;
    int i, slot = -1, res, mflags;
    uint32_t ct, tt;
    if (out) out->id = 0;
    if (!c || !q || !q->url || !out) return RSD_ERR_ARG;
    rsdi_client_release(c);
    method = q->method ? q->method : "GET";
    mlen = strlen(method);
    if (mlen > 16 || !rsdi_token_ok(rsd_str_c(method)) || !rsdi_headers_ok(q->headers, q->num_headers) ||
        (q->body_len && !q->body) || (q->body_buf && !q->body_cap) ||
        (q->bearer_token && !rsdi_value_ok(rsd_str_c(q->bearer_token))) ||
        (q->content_type && !rsdi_value_ok(rsd_str_c(q->content_type))))
        return RSD_ERR_ARG;
    res = rsd_url_parse(&u, q->url, strlen(q->url));
    if (res < 0) return res;
    if (u.tls && (!RSDI_TLS_BUILD || !c->tls)) return RSD_ERR_TLS_UNAVAILABLE;
    if (u.tls && !rsdi_tls_usable(c->tls)) {
        rsdi_log(&c->desc.logger, RSD_LOG_ERROR, RSD_LOGITEM_TLS_NO_CA,
                 "tls: no CA bundle was loaded (set tls_ca_file); https refused", RSDI_WHERE);
        return RSD_ERR_TLS;
    }
    res = rsdi_client_addr(c, &u, numeric, &addr);
    if (res < 0) {
        rsdi_log(&c->desc.logger, RSD_LOG_WARN, RSD_LOGITEM_HTTP_RESOLVE_FAILED,
                 "http client: host is not numeric and no resolver is set", RSDI_WHERE);
        return res;
    }
    for (i = 0; i < c->nreqs; i++)
        if (c->reqs[i].state == RSDI_RQ_FREE) {
            slot = i;
            break;
        }
    if (slot < 0) {
        rsdi_log(&c->desc.logger, RSD_LOG_WARN, RSD_LOGITEM_HTTP_CAPACITY, "http client: all request slots busy", RSDI_WHERE);
        return RSD_ERR_CAPACITY;
    }
    r = &c->reqs[slot];
    memset(&r->conn, 0, sizeof *r - offsetof(rsdi_creq, conn));
    mflags = rsdi_method_flags(method);
    res = rsdi_build_request(c, r, q, method, mflags, &u);
    if (res < 0) return res;
    r->addr = addr;
    r->conn = -1;
    r->tls = u.tls;
    if (u.tls) memcpy(r->host, u.host.ptr, u.host.len); /* u.host.len <= RSD_HTTP_MAX_HOST_BYTES: checked by rsdi_client_addr */
    r->is_head = (mflags & RSDI_M_HEAD) != 0;
    r->may_retry = q->retry_any_method || (mflags & RSDI_M_RETRY);
    r->quiet = q->quiet;
    r->on_body = q->on_body;
    r->on_sse = q->on_sse;
    r->max_stream = q->max_stream_bytes;
    r->user = q->user;
    if (q->body_buf && !q->on_body && !q->on_sse) {
        r->body = q->body_buf;
        r->body_cap = q->body_cap;
    } else {
        r->body = r->own_body;
        r->body_cap = c->desc.max_body_bytes;
    }
    if (q->on_sse && c->desc.max_body_bytes < 2 * (size_t)RSDI_SMALL_ROOM) return RSD_ERR_ARG;
    if (q->on_sse) { /* half the slot buffer receives, the other half collects events */
        r->body_cap = c->desc.max_body_bytes / 2;
        rsd_sse_init(&r->sse, r->own_body + r->body_cap, c->desc.max_body_bytes - r->body_cap);
    }
    ct = q->connect_timeout_ms ? q->connect_timeout_ms : c->desc.connect_timeout_ms;
    tt = q->total_timeout_ms ? q->total_timeout_ms : c->desc.total_timeout_ms;
    r->connect_deadline = rsdi_deadline(now, ct);
    r->total_deadline = rsdi_deadline(now, tt);
    r->state = RSDI_RQ_QUEUED;
    c->stats.requests++;
    out->id = rsdi_handle_make(r->gen, (uint32_t)slot, RSDI_SLOT_BITS);
    return RSD_OK;
}

RSD_API int rsd_http_send(rsd_http_client *c, const rsd_http_request *req, uint64_t now_ms,
                          rsd_http_req_h *out) {
    return rsdi_http_send_ex(c, req, now_ms, out, NULL);
}

RSDI_PRIVATE void rsdi_req_log(rsd_http_client *c, rsdi_creq *r, int level, uint32_t item,
                               const char *what) {
    /* Only the request line (method + path) is logged: never header values. */
    if (r->quiet && level == RSD_LOG_WARN) return; /* the caller expects it may fail */
    rsdi_logf(&c->desc.logger, level, item, RSDI_WHERE, "http client: %.*s: %s (%s, errno %d)",
              (int)r->req_line_len, r->tx, what, rsd_result_name(r->result), r->sys_errno);
}

/* The peer's idle limit from "Keep-Alive: timeout=N" (seconds) in ms; -1 when not
   announced (absent, malformed, or no timeout parameter). */
RSDI_PRIVATE long rsdi_keepalive_ms(const rsd_http_header *h, size_t n) {
    rsd_str v = rsd_http_header_get(h, n, "Keep-Alive");
    size_t i = 0;
    while (v.ptr && i < v.len) {
        size_t j;
        while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t' || v.ptr[i] == ',')) i++;
        j = i;
        while (j < v.len && v.ptr[j] != ',') j++;
        if (j - i > 8 && rsdi_ieq_lit(v.ptr + i, 8, "timeout=")) {
            long sec = 0;
            size_t k = i + 8;
            if (k == j || v.ptr[k] < '0' || v.ptr[k] > '9') return -1;
            for (; k < j && v.ptr[k] >= '0' && v.ptr[k] <= '9'; k++)
                if ((sec = sec * 10 + (v.ptr[k] - '0')) > 86400) sec = 86400;
            return sec * 1000;
        }
        i = j;
    }
    return -1;
}

/* Completes a request. On success the connection is kept alive when the framing allows. */
RSDI_PRIVATE void rsdi_req_finish(rsd_http_client *c, int i, int result, int err) {
    rsdi_creq *r = &c->reqs[i];
    r->result = result;
    r->sys_errno = err;
    if (r->conn >= 0) {
        rsdi_cconn *cn = &c->conns[r->conn];
        bool keep = result == RSD_OK && !c->desc.no_keepalive && !r->extra &&
                    !r->resp.framing.close && r->body_mode != RSDI_BODY_CLOSE &&
                    r->resp.minor_version >= 1;
        long ka = keep ? rsdi_keepalive_ms(r->resp.headers, r->resp.num_headers) : -1;
        if (ka == 0) keep = false;
        if (keep) {
            cn->state = RSDI_CC_IDLE;
            cn->req = -1;
            cn->idle_since = c->now;
            cn->idle_ms = c->desc.idle_timeout_ms;
            if (ka > 0) { /* drop it before the peer does: 1 s early, or at half a short one */
                long keep_ms = ka >= 2000 ? ka - 1000 : ka / 2;
                if ((uint64_t)keep_ms < cn->idle_ms) cn->idle_ms = (uint32_t)keep_ms;
            }
        } else {
            rsdi_cconn_close(c, r->conn);
        }
        r->conn = -1;
    }
    r->state = RSDI_RQ_DONE;
    r->done_seq = c->seq++;
    if (result == RSD_ERR_TIMEOUT) {
        c->stats.timeouts++;
        rsdi_req_log(c, r, RSD_LOG_WARN, RSD_LOGITEM_HTTP_TIMEOUT, "timed out");
    } else if (result == RSD_ERR_CONNECT) {
        c->stats.errors++;
        rsdi_req_log(c, r, RSD_LOG_WARN, RSD_LOGITEM_HTTP_CONNECT_FAILED, "connect failed");
    } else if (result < 0 && result != RSD_ERR_CANCELLED) {
        c->stats.errors++;
        rsdi_req_log(c, r, RSD_LOG_WARN, RSD_LOGITEM_HTTP_REQUEST_FAILED, "failed");
    }
}

RSDI_PRIVATE void rsdi_req_start(rsd_http_client *c, int i);
RSDI_PRIVATE void rsdi_req_progress(rsd_http_client *c, int i);

/* A failure on a kept-alive connection before any response byte: retry the request once
   on a fresh connection (an idempotent one, or retry_any_method); otherwise fail. */
RSDI_PRIVATE void rsdi_req_fail_io(rsd_http_client *c, int i, int result, int err) {
    rsdi_creq *r = &c->reqs[i];
    if (r->reused && !r->retried && r->may_retry && r->head_len == 0 && !r->got_head) {
        rsdi_cconn_close(c, r->conn);
        r->conn = -1;
        r->retried = true;
        r->fresh_only = true;
        r->reused = false;
        r->tx_off = 0;
        r->state = RSDI_RQ_QUEUED;
        c->stats.retries++;
        r->result = result;
        r->sys_errno = err;
        rsdi_req_log(c, r, RSD_LOG_INFO, RSD_LOGITEM_HTTP_STALE_RETRY, "stale kept-alive connection, retrying");
        rsdi_req_start(c, i);
        if (r->state != RSDI_RQ_QUEUED && r->state != RSDI_RQ_DONE) rsdi_req_progress(c, i);
        return;
    }
    rsdi_req_finish(c, i, result, err);
}

/* An idle kept-alive socket is still usable: no EOF, no reset, and no unasked bytes
   (a peer's parting 408, or a TLS alert) waiting on it. One MSG_PEEK recv. */
RSDI_PRIVATE bool rsdi_idle_alive(int fd) {
    char b;
    long n = rsdi_sock_recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && rsdi_would_block(errno);
}

RSDI_PRIVATE void rsdi_req_start(rsd_http_client *c, int i) {
    rsdi_creq *r = &c->reqs[i];
    rsdi_cconn *cn;
    int k, pick = -1, oldest = -1;
    int fd;
    if (!r->fresh_only && !c->desc.no_keepalive) {
        for (k = 0; k < c->nconns; k++) {
            cn = &c->conns[k];
            if (cn->state == RSDI_CC_IDLE && rsdi_addr_eq(&cn->addr, &r->addr) && cn->tls == r->tls &&
                (!r->tls || strcmp(cn->host, r->host) == 0)) {
                if (!rsdi_idle_alive(cn->fd)) { /* the peer closed it while idle */
                    rsdi_cconn_close(c, k);
                    c->stats.stale++;
                    continue;
                }
                cn->state = RSDI_CC_BUSY;
                cn->req = i;
                r->conn = k;
                r->reused = true;
                r->state = RSDI_RQ_SENDING;
                c->stats.reuses++;
                return;
            }
        }
    }
    for (k = 0; k < c->nconns && pick < 0; k++)
        if (c->conns[k].state == RSDI_CC_FREE) pick = k;
    if (pick < 0) { /* evict the longest-idle kept-alive socket */
        for (k = 0; k < c->nconns; k++)
            if (c->conns[k].state == RSDI_CC_IDLE &&
                (oldest < 0 || c->conns[k].idle_since < c->conns[oldest].idle_since))
                oldest = k;
        if (oldest < 0) return; /* stays queued */
        rsdi_cconn_close(c, oldest);
        pick = oldest;
    }
    cn = &c->conns[pick];
    fd = rsdi_sock_open(r->addr.ss.ss_family);
    if (fd < 0) {
        rsdi_req_finish(c, i, RSD_ERR_IO, errno);
        return;
    }
    cn->fd = fd;
    cn->io = &rsdi_io_plain;
    cn->io_ctx = NULL;
    cn->addr = r->addr;
    cn->req = i;
    cn->hint = RSDI_HINT_UNKNOWN;
    cn->tls = r->tls;
    memcpy(cn->host, r->host, sizeof cn->host);
    r->conn = pick;
    c->stats.connects++;
    if (RSDI_TLS_BUILD && r->tls && rsdi_tls_begin(c->tls, pick, fd, r->host, &cn->io, &cn->io_ctx) < 0) {
        cn->state = RSDI_CC_BUSY;
        rsdi_req_finish(c, i, RSD_ERR_TLS, 0);
        return;
    }
    if (rsdi_sock_connect(fd, (const struct sockaddr *)(const void *)&r->addr.ss, r->addr.len) == 0) {
        cn->state = RSDI_CC_BUSY;
        r->state = RSDI_RQ_SENDING;
        if (r->tls) { /* the handshake comes first: still "connecting" */
            cn->state = RSDI_CC_HANDSHAKE;
            r->state = RSDI_RQ_CONNECTING;
        }
    } else if (errno == EINPROGRESS || errno == EINTR) {
        cn->state = RSDI_CC_CONNECTING;
        r->state = RSDI_RQ_CONNECTING;
    } else {
        int e = errno;
        cn->state = RSDI_CC_BUSY;
        rsdi_req_finish(c, i, RSD_ERR_CONNECT, e);
    }
}

/* Hands decoded body bytes to the streaming callbacks (from inside step); with_body
   false = only to the SSE reader (bytes held back by a pause, on_body saw them). */
RSDI_PRIVATE int rsdi_req_stream_out(rsdi_creq *r, const char *data, size_t len, bool with_body) {
    if (r->on_body && len && with_body) r->on_body(r->user, data, len);
    if (r->on_sse) {
        const char *p = data;
        size_t n = len, used = 0;
        rsd_sse_event ev;
        while (n) {
            int e;
            if (r->paused) { /* paused from on_sse: keep the rest for the resume */
                r->sse_rest = p;
                r->sse_rest_len = n;
                break;
            }
            e = rsd_sse_feed(&r->sse, p, n, &used, &ev);
            p += used;
            n -= used;
            if (e == RSD_OK) r->on_sse(r->user, &ev);
            else if (e != RSD_ERR_TOO_LARGE) break;
        }
    }
    r->body_len = 0;
    return RSD_OK;
}

/* Feeds n received body bytes at src (mutable; may be the body area itself).
   Returns RSD_OK (body complete), RSD_PENDING, or an error. */
RSDI_PRIVATE int rsdi_req_feed(rsdi_creq *r, char *src, size_t n) {
    bool streaming = r->on_body || r->on_sse;
    size_t room, take = n;
    int res = RSD_PENDING;
    if (r->body_mode == RSDI_BODY_CHUNKED) {
        res = rsd_http_dechunk_step(&r->dc, src, &take);
        if (res < 0) return res;
        if (res == RSD_OK && r->dc.rest) r->extra = true;
    } else if (r->body_mode == RSDI_BODY_LENGTH) {
        if (take > r->body_left) {
            take = (size_t)r->body_left;
            r->extra = true;
        }
        r->body_left -= take;
        if (r->body_left == 0) res = RSD_OK;
    }
    if (streaming) { /* handed over from where it lies; nothing is kept */
        int e;
        r->body_total += take;
        if (r->max_stream && r->body_total > r->max_stream) return RSD_ERR_BODY_TOO_LARGE;
        e = rsdi_req_stream_out(r, src, take, true);
        if (e < 0) return e;
        if (r->sse_rest_len) { /* events wait: the request ends after they are out */
            r->sse_end = res == RSD_OK;
            return RSD_PENDING;
        }
        return res;
    }
    room = r->body_cap - r->body_len;
    if (take > room) return RSD_ERR_BODY_TOO_LARGE;
    if (take && src != r->body + r->body_len) memmove(r->body + r->body_len, src, take);
    r->body_len += take;
    r->body_total += take;
    return res;
}

/* The response head is complete: pick the body framing and feed the bytes after it. */
RSDI_PRIVATE int rsdi_req_head_done(rsd_http_client *c, rsdi_creq *r, size_t consumed) {
    const rsd_http_framing *f = &r->resp.framing;
    bool streaming = r->on_body || r->on_sse;
    size_t extra = r->head_len - consumed;
    int st = r->resp.status;
    (void)c;
    r->got_head = true;
    if (rsd_http_response_bodyless(rsd_str_c(r->is_head ? "HEAD" : "GET"), st)) {
        r->body_mode = RSDI_BODY_NONE;
        if (extra) r->extra = true;
        return RSD_OK;
    }
    if (f->other_codings) return RSD_ERR_PROTOCOL; /* never asked for (no TE header sent) */
    if (f->chunked) {
        r->body_mode = RSDI_BODY_CHUNKED;
    } else if (f->content_length >= 0) {
        r->body_mode = RSDI_BODY_LENGTH;
        r->body_left = (uint64_t)f->content_length;
        if (!streaming && r->body_left > (uint64_t)r->body_cap) return RSD_ERR_BODY_TOO_LARGE;
        if (streaming && r->max_stream && r->body_left > r->max_stream) return RSD_ERR_BODY_TOO_LARGE;
        if (r->body_left == 0) {
            if (extra) r->extra = true;
            return RSD_OK;
        }
    } else {
        r->body_mode = RSDI_BODY_CLOSE;
    }
    if (!extra) return RSD_PENDING;
    return rsdi_req_feed(r, r->head + consumed, extra);
}

/* Reads and parses what the socket has, but at most RSDI_STEP_READ_BYTES per step (and
   one receive once the request's deadline has passed): a peer that streams faster than
   the callbacks consume cannot keep a step from returning, and the deadline fires at
   the first step past it. What is left waits in the socket (poll reports it). */
RSDI_PRIVATE void rsdi_req_read(rsd_http_client *c, int i) {
    rsdi_creq *r = &c->reqs[i];
    rsdi_cconn *cn = &c->conns[r->conn];
    char scratch[RSDI_SMALL_ROOM];
    size_t got = 0;
    long n = 0;
    for (;; got += (size_t)n) { /* one receive per pass */
        size_t want;
        char *dst;
        int res;
        if (got && (got >= RSDI_STEP_READ_BYTES || c->now >= r->total_deadline)) return;
        if (r->state == RSDI_RQ_HEAD) {
            want = c->desc.max_header_bytes - r->head_len;
            dst = r->head + r->head_len;
        } else {
            want = r->body_cap - r->body_len;
            if (r->body_mode == RSDI_BODY_LENGTH && want > r->body_left) want = (size_t)r->body_left;
            if (want < RSDI_SMALL_ROOM && r->body_mode != RSDI_BODY_LENGTH && !r->on_body && !r->on_sse) {
                dst = scratch; /* near the limit: read small, decode, then check the room */
                want = sizeof scratch;
            } else {
                dst = r->body + r->body_len;
            }
        }
        n = cn->io->recv_fn(cn->io_ctx, cn->fd, dst, want);
        if (n <= 0) { /* with the head read (got_head) fail_io finishes: no retry */
            if (n < 0 && rsdi_would_block(errno)) return;
            if (n < 0) rsdi_req_fail_io(c, i, RSD_ERR_IO, errno);
            else rsdi_req_fail_io(c, i, r->body_mode == RSDI_BODY_CLOSE ? RSD_OK : RSD_ERR_CLOSED, 0);
            return;
        }
        if (r->state == RSDI_RQ_HEAD) {
            size_t prev = r->head_len, consumed = 0;
            r->head_len += (size_t)n;
        parse:
            res = rsd_http_parse_response(r->head, r->head_len, prev, &r->resp, &consumed);
            if (res == RSD_PENDING) {
                if (r->head_len >= c->desc.max_header_bytes) {
                    rsdi_req_finish(c, i, RSD_ERR_HEADERS_TOO_LARGE, 0);
                    return;
                }
                if ((size_t)n < want) return;
                continue;
            }
            if (res < 0) {
                rsdi_req_finish(c, i, res, 0);
                return;
            }
            if (r->resp.status >= 100 && r->resp.status < 200 && r->resp.status != 101) {
                /* interim response: drop it and parse what follows */
                memmove(r->head, r->head + consumed, r->head_len - consumed);
                r->head_len -= consumed;
                prev = 0;
                if (r->head_len) goto parse;
                continue;
            }
            if (r->resp.status == 101) {
                rsdi_req_finish(c, i, RSD_ERR_PROTOCOL, 0);
                return;
            }
            res = rsdi_req_head_done(c, r, consumed);
            r->head_len = consumed;
            if (res != RSD_PENDING) {
                rsdi_req_finish(c, i, res, 0);
                return;
            }
            r->state = RSDI_RQ_BODY;
            if ((size_t)n < want || r->paused) return; /* paused from on_body: stop here */
        } else {
            res = rsdi_req_feed(r, dst, (size_t)n);
            if (res != RSD_PENDING) {
                rsdi_req_finish(c, i, res, 0);
                return;
            }
            if ((size_t)n < want || r->paused) return; /* paused from a callback: stop here */
        }
    }
}

RSDI_PRIVATE bool rsdi_poll_one(int fd, short ev) {
    rsd_pollfd p;
    p.fd = fd;
    p.events = ev;
    p.revents = 0;
    return rsd_poll(&p, 1, 0) > 0;
}

RSDI_PRIVATE void rsdi_req_progress(rsd_http_client *c, int i) {
    rsdi_creq *r = &c->reqs[i];
    rsdi_cconn *cn = &c->conns[r->conn];
    if (r->state == RSDI_RQ_CONNECTING && cn->state != RSDI_CC_HANDSHAKE) {
        int err;
        if (cn->hint == RSDI_HINT_IDLE) return;
        if (cn->hint == RSDI_HINT_UNKNOWN && !rsdi_poll_one(cn->fd, RSD_POLLOUT)) return;
        err = rsdi_sock_error(cn->fd);
        if (err) {
            rsdi_req_finish(c, i, RSD_ERR_CONNECT, err);
            return;
        }
        cn->state = RSDI_CC_BUSY;
        r->state = RSDI_RQ_SENDING;
        if (RSDI_TLS_BUILD && r->tls) {
            cn->state = RSDI_CC_HANDSHAKE;
            r->state = RSDI_RQ_CONNECTING;
            cn->hint = RSDI_HINT_UNKNOWN; /* try the first flight now */
        }
    }
    if (RSDI_TLS_BUILD && r->state == RSDI_RQ_CONNECTING) { /* TLS handshake; the connect timeout covers it */
        char what[160];
        int code = 0, hs;
        uint32_t flags = 0;
        if (cn->hint == RSDI_HINT_IDLE) return;
        what[0] = '\0';
        hs = rsdi_tls_handshake(cn->io_ctx, &code, &flags, what, sizeof what);
        if (hs == RSDI_TLS_HS_AGAIN) return;
        if (hs < 0) {
            r->tls_error = code;
            r->tls_flags = flags;
            rsdi_logf(&c->desc.logger, RSD_LOG_WARN,
                      hs == RSD_ERR_TLS_VERIFY ? RSD_LOGITEM_TLS_VERIFY_FAILED : RSD_LOGITEM_TLS_HANDSHAKE_FAILED,
                      RSDI_WHERE, "tls: %s: %s (mbedTLS -0x%04x, verify flags 0x%08x): %s",
                      r->host, hs == RSD_ERR_TLS_VERIFY ? "certificate verification failed" : "handshake failed",
                      (unsigned)-code, (unsigned)flags, what);
            rsdi_req_finish(c, i, hs, 0);
            return;
        }
        cn->state = RSDI_CC_BUSY;
        r->state = RSDI_RQ_SENDING;
    }
    if (r->state == RSDI_RQ_SENDING) {
        while (r->tx_off < r->tx_len) {
            long n = cn->io->send_fn(cn->io_ctx, cn->fd, r->tx + r->tx_off, r->tx_len - r->tx_off);
            if (n < 0) {
                if (rsdi_would_block(errno)) return;
                rsdi_req_fail_io(c, i, errno == EPIPE || errno == ECONNRESET ? RSD_ERR_CLOSED : RSD_ERR_IO, errno);
                return;
            }
            r->tx_off += (size_t)n;
        }
        r->state = RSDI_RQ_HEAD;
        r->head_len = 0;
        return; /* the answer cannot be there yet: wait for POLLIN */
    }
    if (r->state == RSDI_RQ_HEAD || r->state == RSDI_RQ_BODY) {
        if (r->sse_rest_len && !r->paused) { /* resumed: the events held back go first */
            const char *p = r->sse_rest;
            size_t n = r->sse_rest_len;
            r->sse_rest_len = 0;
            (void)rsdi_req_stream_out(r, p, n, false);
            if (r->sse_rest_len) return;  /* paused again */
            if (r->sse_end) {
                rsdi_req_finish(c, i, RSD_OK, 0);
                return;
            }
        }
        if (cn->hint == RSDI_HINT_IDLE || r->paused) return;
        rsdi_req_read(c, i);
    }
}

RSDI_PRIVATE int rsdi_client_step(rsd_http_client *c, uint64_t now, const rsd_pollfd *fds, int nfds) {
    int i, k, done = 0;
    if (!c) return RSD_ERR_ARG;
    c->now = now;
    rsdi_client_release(c);
    for (k = 0; k < c->nconns; k++) c->conns[k].hint = RSDI_HINT_UNKNOWN;
    if (fds)
        for (i = 0; i < nfds; i++)
            for (k = 0; k < c->nconns; k++)
                if (c->conns[k].fd == (int)fds[i].fd && c->conns[k].state != RSDI_CC_FREE) {
                    c->conns[k].hint = fds[i].revents ? RSDI_HINT_READY : RSDI_HINT_IDLE;
                    if (c->conns[k].hint == RSDI_HINT_IDLE && rsdi_tls_pending(c->conns[k].io, c->conns[k].io_ctx))
                        c->conns[k].hint = RSDI_HINT_UNKNOWN; /* decrypted bytes poll() cannot see */
                    break;
                }
    for (i = 0; i < c->nreqs; i++)
        if (c->reqs[i].state == RSDI_RQ_QUEUED) rsdi_req_start(c, i);
    for (i = 0; i < c->nreqs; i++) {
        int st = c->reqs[i].state;
        if (st >= RSDI_RQ_CONNECTING && st <= RSDI_RQ_BODY) rsdi_req_progress(c, i);
    }
    for (i = 0; i < c->nreqs; i++) /* sockets freed above can take queued requests */
        if (c->reqs[i].state == RSDI_RQ_QUEUED) {
            rsdi_req_start(c, i);
            if (c->reqs[i].state == RSDI_RQ_SENDING) rsdi_req_progress(c, i);
        }
    for (i = 0; i < c->nreqs; i++) {
        rsdi_creq *r = &c->reqs[i];
        if (r->state < RSDI_RQ_QUEUED || r->state > RSDI_RQ_BODY) continue;
        if ((r->state <= RSDI_RQ_CONNECTING && now >= r->connect_deadline) || now >= r->total_deadline)
            rsdi_req_finish(c, i, RSD_ERR_TIMEOUT, 0);
    }
    for (k = 0; k < c->nconns; k++) {
        rsdi_cconn *cn = &c->conns[k];
        if (cn->state == RSDI_CC_IDLE && now >= cn->idle_since &&
            now - cn->idle_since >= (uint64_t)cn->idle_ms)
            rsdi_cconn_close(c, k);
    }
    for (i = 0; i < c->nreqs; i++)
        if (c->reqs[i].state == RSDI_RQ_DONE) done++;
    return done;
}

RSD_API int rsd_http_client_step(rsd_http_client *c, uint64_t now_ms) {
    return rsdi_client_step(c, now_ms, NULL, 0);
}

RSD_API int rsd_http_client_step_polled(rsd_http_client *c, uint64_t now_ms,
                                        const rsd_pollfd *fds, int nfds) {
    return rsdi_client_step(c, now_ms, fds, nfds);
}

RSDI_PRIVATE bool rsdi_client_take(rsd_http_client *c, int want, rsd_http_event *ev) {
    int i, best = -1;
    rsdi_creq *r;
    rsdi_client_release(c);
    if (want >= 0) {
        if (c->reqs[want].state == RSDI_RQ_DONE) best = want;
    } else {
        for (i = 0; i < c->nreqs; i++)
            if (c->reqs[i].state == RSDI_RQ_DONE && (best < 0 || c->reqs[i].done_seq < c->reqs[best].done_seq))
                best = i;
    }
    if (best < 0) return false;
    r = &c->reqs[best];
    memset(ev, 0, sizeof *ev);
    ev->req.id = rsdi_handle_make(r->gen, (uint32_t)best, RSDI_SLOT_BITS);
    ev->result = r->result;
    ev->sys_errno = r->sys_errno;
    if (r->got_head) {
        ev->status = r->resp.status;
        ev->headers = r->resp.headers;
        ev->num_headers = r->resp.num_headers;
    }
    ev->body.ptr = r->body ? r->body : "";
    ev->body.len = (r->result == RSD_OK && !r->on_body && !r->on_sse) ? r->body_len : 0;
    ev->body_bytes = r->body_total;
    ev->reused = r->reused;
    ev->retried = r->retried;
    ev->tls_error = r->tls_error;
    ev->tls_verify_flags = r->tls_flags;
    ev->user = r->user;
    r->state = RSDI_RQ_DELIVERED;
    c->delivered = best;
    return true;
}

RSD_API bool rsd_http_next_event(rsd_http_client *c, rsd_http_event *ev) {
    if (!c || !ev) return false;
    return rsdi_client_take(c, -1, ev);
}

RSD_API int rsd_http_client_pollfds(const rsd_http_client *c, rsd_pollfd *out, int cap) {
    int i, n = 0;
    if (!c) return 0;
    for (i = 0; i < c->nreqs; i++) {
        const rsdi_creq *r = &c->reqs[i];
        short ev;
        if (r->state == RSDI_RQ_CONNECTING && c->conns[r->conn].state == RSDI_CC_HANDSHAKE)
            ev = rsdi_tls_want(c->conns[r->conn].io_ctx);
        else if (r->state == RSDI_RQ_CONNECTING || r->state == RSDI_RQ_SENDING) ev = RSD_POLLOUT;
        else if ((r->state == RSDI_RQ_HEAD || r->state == RSDI_RQ_BODY) && !r->paused) ev = RSD_POLLIN;
        else continue;
        if (out && n < cap) {
            out[n].fd = c->conns[r->conn].fd;
            out[n].events = ev;
            out[n].revents = 0;
        }
        n++;
    }
    return n;
}

/* When the client's own work is next due, finished requests not counted (the blocking
   request and the ensurer pull only their own answers). */
RSDI_PRIVATE uint64_t rsdi_client_deadline(const rsd_http_client *c) {
    uint64_t dl = RSD_NO_DEADLINE;
    int i, k;
    bool can_start = false;
    for (k = 0; k < c->nconns; k++)
        if (c->conns[k].state == RSDI_CC_FREE || c->conns[k].state == RSDI_CC_IDLE) can_start = true;
    for (i = 0; i < c->nreqs; i++) {
        const rsdi_creq *r = &c->reqs[i];
        if (r->state < RSDI_RQ_QUEUED || r->state > RSDI_RQ_BODY) continue;
        if (r->state == RSDI_RQ_QUEUED && can_start) return 0;
        if (r->state == RSDI_RQ_BODY && r->sse_rest_len && !r->paused) return 0; /* held events */
        if ((r->state == RSDI_RQ_HEAD || r->state == RSDI_RQ_BODY) && !r->paused &&
            rsdi_tls_pending(c->conns[r->conn].io, c->conns[r->conn].io_ctx))
            return 0;
        if (r->state <= RSDI_RQ_CONNECTING && r->connect_deadline < dl) dl = r->connect_deadline;
        if (r->total_deadline < dl) dl = r->total_deadline;
    }
    for (k = 0; k < c->nconns; k++)
        if (c->conns[k].state == RSDI_CC_IDLE) {
            uint64_t t = rsdi_deadline(c->conns[k].idle_since, c->conns[k].idle_ms);
            if (t < dl) dl = t;
        }
    return dl;
}

RSD_API uint64_t rsd_http_client_next_deadline(const rsd_http_client *c) {
    int i;
    if (!c) return RSD_NO_DEADLINE;
    for (i = 0; i < c->nreqs; i++)
        if (c->reqs[i].state == RSDI_RQ_DONE) return 0; /* an event waits to be pulled */
    return rsdi_client_deadline(c);
}

RSD_API int rsd_http_cancel(rsd_http_client *c, rsd_http_req_h h) {
    int i;
    if (!c) return RSD_ERR_ARG;
    i = rsdi_client_slot(c, h);
    if (i < 0 || c->reqs[i].state < RSDI_RQ_QUEUED || c->reqs[i].state > RSDI_RQ_BODY)
        return RSD_ERR_NOT_FOUND;
    if (c->reqs[i].conn >= 0) {
        rsdi_cconn_close(c, c->reqs[i].conn);
        c->reqs[i].conn = -1;
    }
    rsdi_req_finish(c, i, RSD_ERR_CANCELLED, 0);
    return RSD_OK;
}

RSD_API int rsd_http_client_close_idle(rsd_http_client *c, const char *host, uint16_t port) {
    rsdi_addr a;
    int k, n = 0;
    if (!c || !host) return RSD_ERR_ARG;
    if (rsdi_addr_make(&a, strcmp(host, "localhost") ? host : "127.0.0.1", port) != RSD_OK) return RSD_ERR_RESOLVE;
    for (k = 0; k < c->nconns; k++)
        if (c->conns[k].state == RSDI_CC_IDLE && rsdi_addr_eq(&c->conns[k].addr, &a)) {
            rsdi_cconn_close(c, k);
            n++;
        }
    return n;
}

RSD_API int rsd_http_pause(rsd_http_client *c, rsd_http_req_h h, bool paused) {
    int i;
    if (!c) return RSD_ERR_ARG;
    i = rsdi_client_slot(c, h);
    if (i < 0 || c->reqs[i].state < RSDI_RQ_QUEUED || c->reqs[i].state > RSDI_RQ_BODY)
        return RSD_ERR_NOT_FOUND;
    c->reqs[i].paused = paused;
    return RSD_OK;
}

RSD_API int rsd_http_client_query_req(const rsd_http_client *c, rsd_http_req_h h, rsd_http_req_info *out) {
    const rsdi_creq *r;
    int i;
    if (out) memset(out, 0, sizeof *out);
    if (!c || !out) return RSD_ERR_ARG;
    i = rsdi_client_slot(c, h);
    if (i < 0 || c->reqs[i].state < RSDI_RQ_QUEUED) return RSD_ERR_NOT_FOUND;
    r = &c->reqs[i];
    out->done = r->state >= RSDI_RQ_DONE;
    out->paused = r->paused;
    out->body_bytes = r->body_total;
    if (!r->got_head) {
        if (!out->done) return RSD_PENDING;
        return r->result < 0 ? r->result : RSD_ERR_PROTOCOL;
    }
    out->status = r->resp.status;
    out->minor_version = r->resp.minor_version;
    out->reason = r->resp.reason;
    out->headers = r->resp.headers;
    out->num_headers = r->resp.num_headers;
    out->framing = r->resp.framing;
    out->bodyless = r->body_mode == RSDI_BODY_NONE;
    return RSD_OK;
}

RSD_API int rsd_http_request_sync(rsd_http_client *c, const rsd_http_request *req,
                                  rsd_http_event *resp) {
    char numeric[INET6_ADDRSTRLEN + 1];
    const char *num = NULL;
    rsd_http_req_h h;
    rsd_url u;
    uint64_t now;
    int res, slot;
    if (resp) memset(resp, 0, sizeof *resp);
    if (!c || !req || !req->url || !resp) return RSD_ERR_ARG;
    resp->body.ptr = "";
    res = rsd_url_parse(&u, req->url, strlen(req->url));
    if (res < 0) return resp->result = res;
    if (u.host_kind == RSD_HOST_NAME && !c->desc.resolve_fn && u.host.len <= RSD_HTTP_MAX_HOST_BYTES) {
        char host[RSD_HTTP_MAX_HOST_BYTES + 1];
        struct addrinfo hints, *ai = NULL;
        memcpy(host, u.host.ptr, u.host.len);
        host[u.host.len] = '\0';
        memset(&hints, 0, sizeof hints);
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai) {
            rsdi_log(&c->desc.logger, RSD_LOG_WARN, RSD_LOGITEM_HTTP_RESOLVE_FAILED, "http client: getaddrinfo failed", RSDI_WHERE);
            return resp->result = RSD_ERR_RESOLVE;
        }
        if (ai->ai_family == AF_INET)
            num = inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)ai->ai_addr)->sin_addr, numeric, (socklen_t)sizeof numeric);
        else if (ai->ai_family == AF_INET6)
            num = inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)ai->ai_addr)->sin6_addr, numeric, (socklen_t)sizeof numeric);
        freeaddrinfo(ai);
        if (!num) return resp->result = RSD_ERR_RESOLVE;
    }
    now = rsd_now_ms();
    res = rsdi_http_send_ex(c, req, now, &h, num);
    if (res < 0) return resp->result = res;
    slot = (int)rsdi_handle_idx(h.id, RSDI_SLOT_BITS);
    (void)rsdi_client_step(c, now, NULL, 0);
    for (;;) {
        int n, timeout;
        uint64_t dl;
        if (rsdi_client_take(c, slot, resp)) return resp->result;
        n = rsd_http_client_pollfds(c, c->pfds, c->nconns);
        if (n > c->nconns) n = c->nconns;
        dl = rsdi_client_deadline(c);
        now = rsd_now_ms();
        if (dl == RSD_NO_DEADLINE) timeout = -1;
        else if (dl <= now) timeout = 0;
        else timeout = dl - now > 0x7fffffff ? 0x7fffffff : (int)(dl - now);
        if (timeout == 0 && n == 0) {
            (void)rsdi_client_step(c, now, NULL, 0);
            continue;
        }
        if (rsd_poll(c->pfds, n, timeout) < 0 && errno != EINTR) {
            (void)rsd_http_cancel(c, h);
            if (rsdi_client_take(c, slot, resp)) resp->result = RSD_ERR_IO;
            return RSD_ERR_IO;
        }
        (void)rsdi_client_step(c, rsd_now_ms(), c->pfds, n);
    }
}

RSD_API void rsd_http_client_query(const rsd_http_client *c, rsd_http_client_info *out) {
    if (!out) return;
    if (!c) memset(out, 0, sizeof *out);
    else *out = c->stats;
}

/* ==== client end ========================================================== */

/* ==== >>server: the HTTP/1.1 server ======================================= */
#ifndef RSD_NO_HTTP_SERVER
/* Uses the socket helpers of the net section. */
enum { RSDI_SC_FREE = 0, RSDI_SC_READ, RSDI_SC_PENDING, RSDI_SC_STREAM, RSDI_SC_CLOSING, RSDI_SC_ZOMBIE };
enum { RSDI_SRV_SLACK = 1024, RSDI_SEV_PULLED = 2 };

typedef struct rsdi_sconn {
    int fd;
    int state;
    int hint;
    uint32_t gen, dead_gen;
    char *rx;
    size_t rx_len, parsed_prev;
    char *tx;
    size_t tx_off, tx_len;
    rsd_http_request_head head;
    size_t head_len, body_len, req_end;
    int body_mode;
    rsd_http_dechunk dc;
    int ev_type;         /* queued event: RSD_HTTP_SEV_*, NONE when none */
    uint64_t ev_seq, last_active, req_start;
    bool delivered;      /* the REQUEST event was pulled (the user holds the handle) */
    bool zombie_pulled;  /* its CLOSED event was pulled: free on the next next_event */
    bool need_parse;     /* unparsed bytes (pipelined) wait in rx */
    bool close_after;
    bool raw;            /* streaming without chunk framing (stream_begin_raw) */
    bool fresh;          /* accepted, no byte received yet */
    const rsdi_io *io;
    void *io_ctx;
} rsdi_sconn;

struct rsd_http_server {
    bool net_ref;          /* holds a reference on the socket layer (rsdi_net_up) */
    rsd_http_server_desc desc;
    int lfd;
    int lhint;
    uint16_t port;
    rsdi_sconn *conns;
    char *bufs;
    int n;
    size_t rx_cap;
    uint64_t seq, now;
    uint64_t accept_resume;  /* accept_paused: try the listener again from then */
    bool accept_paused;      /* accept ran out of descriptors: not polled, not tried */
    bool accept_err_logged;  /* one log line per run of accept failures */
    rsd_http_server_info stats;
};

RSDI_PRIVATE int rsdi_server_desc_fix(rsd_http_server_desc *d) {
    static const rsdi_dflt t[] = {
        RSDI_DFLT(rsd_http_server_desc, max_conns, RSD_HTTP_SERVER_DEFAULT_MAX_CONNS),
        RSDI_DFLT(rsd_http_server_desc, max_header_bytes, RSD_HTTP_SERVER_DEFAULT_MAX_HEADER_BYTES),
        RSDI_DFLT(rsd_http_server_desc, max_body_bytes, RSD_HTTP_SERVER_DEFAULT_MAX_BODY_BYTES),
        RSDI_DFLT(rsd_http_server_desc, max_response_bytes, RSD_HTTP_SERVER_DEFAULT_MAX_RESPONSE_BYTES),
        RSDI_DFLT(rsd_http_server_desc, idle_timeout_ms, RSD_HTTP_SERVER_DEFAULT_IDLE_TIMEOUT_MS),
        RSDI_DFLT(rsd_http_server_desc, request_timeout_ms, RSD_HTTP_SERVER_DEFAULT_REQUEST_TIMEOUT_MS),
        RSDI_DFLT(rsd_http_server_desc, first_byte_timeout_ms, RSD_HTTP_SERVER_DEFAULT_FIRST_BYTE_TIMEOUT_MS),
        RSDI_DFLT(rsd_http_server_desc, head_timeout_ms, RSD_HTTP_SERVER_DEFAULT_HEAD_TIMEOUT_MS),
        RSDI_DFLT(rsd_http_server_desc, body_timeout_ms, RSD_HTTP_SERVER_DEFAULT_BODY_TIMEOUT_MS)};
    if (d->max_conns < 0 || d->max_conns > RSD_HTTP_MAX_CONNS_LIMIT) return RSD_ERR_ARG;
    rsdi_defaults(d, t, sizeof t / sizeof t[0]);
    if (!d->bind_host) d->bind_host = "127.0.0.1";
    if (d->max_header_bytes < 64 || d->max_response_bytes < 256) return RSD_ERR_ARG;
    return rsdi_allocator_check(&d->allocator);
}

RSDI_PRIVATE uint32_t rsdi_sreq_id(const rsd_http_server *s, int k) {
    return rsdi_handle_make(s->conns[k].gen, (uint32_t)k, RSDI_SLOT_BITS);
}

RSDI_PRIVATE void rsdi_sconn_bump(rsdi_sconn *cn) {
    cn->gen = rsdi_handle_next_gen(cn->gen, RSDI_SLOT_BITS);
}

RSDI_PRIVATE void rsdi_sconn_free(rsd_http_server *s, int k) {
    rsdi_sconn *cn = &s->conns[k];
    if (cn->fd >= 0) cn->io->close_fn(cn->io_ctx, cn->fd);
    cn->fd = -1;
    cn->state = RSDI_SC_FREE;
    cn->ev_type = RSD_HTTP_SEV_NONE;
    cn->delivered = cn->zombie_pulled = cn->need_parse = cn->close_after = false;
    rsdi_sconn_bump(cn);
    s->stats.closes++;
    s->accept_paused = false; /* a descriptor was freed: the listener may go on */
}

/* The connection is gone (EOF, error, timeout). A request the user holds becomes a
   CLOSED event; one not yet pulled is dropped. */
RSDI_PRIVATE void rsdi_sconn_drop(rsd_http_server *s, int k) {
    rsdi_sconn *cn = &s->conns[k];
    if ((cn->state == RSDI_SC_PENDING || cn->state == RSDI_SC_STREAM) && cn->delivered) {
        if (cn->fd >= 0) cn->io->close_fn(cn->io_ctx, cn->fd);
        cn->fd = -1;
        cn->state = RSDI_SC_ZOMBIE;
        cn->ev_type = RSD_HTTP_SEV_CLOSED;
        cn->ev_seq = s->seq++;
        cn->dead_gen = cn->gen;
        s->stats.closes++;
        s->accept_paused = false;
        rsdi_log(&s->desc.logger, RSD_LOG_INFO, RSD_LOGITEM_HTTP_CLIENT_GONE,
                 "http server: client went away before its answer", RSDI_WHERE);
        return;
    }
    if (cn->state == RSDI_SC_PENDING || cn->state == RSDI_SC_STREAM) cn->dead_gen = cn->gen;
    rsdi_sconn_free(s, k);
}

/* A connection's receive room, its whole buffer (receive + send) and all the buffers, for
   d (already fixed); false on overflow. */
RSDI_PRIVATE bool rsdi_server_sizes(const rsd_http_server_desc *d, size_t *rx_cap, size_t *per, size_t *total) {
    return rsdi_size_add(d->max_header_bytes, d->max_body_bytes, rx_cap) &&
           rsdi_size_add(*rx_cap, RSDI_SRV_SLACK, rx_cap) && rsdi_size_add(*rx_cap, d->max_response_bytes, per) &&
           rsdi_size_mul(*per, (size_t)d->max_conns, total);
}

RSD_API size_t rsd_http_server_footprint(const rsd_http_server_desc *desc) {
    rsd_http_server_desc d;
    rsdi_addr addr;
    size_t per = 0, total = 0, rx_cap = 0, sz = 0;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (rsdi_server_desc_fix(&d) < 0 || rsdi_addr_make(&addr, d.bind_host, d.port) < 0 ||
        !rsdi_server_sizes(&d, &rx_cap, &per, &total) ||
        !rsdi_size_add(sizeof(rsd_http_server) + sizeof(rsdi_sconn) * (size_t)d.max_conns, total, &sz))
        return 0;
    return sz;
}

RSD_API rsd_http_server *rsd_http_server_create(const rsd_http_server_desc *desc) {
    rsd_http_server_desc d;
    rsd_http_server *s;
    rsdi_addr addr;
    size_t per = 0, total = 0, rx_cap = 0;
    int i;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (rsdi_server_desc_fix(&d) < 0 || rsdi_addr_make(&addr, d.bind_host, d.port) < 0) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, "http server: invalid desc", RSDI_WHERE);
        return NULL;
    }
    if (!rsdi_server_sizes(&d, &rx_cap, &per, &total)) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, "http server: buffer sizes overflow", RSDI_WHERE);
        return NULL;
    }
    s = (rsd_http_server *)rsdi_malloc(&d.allocator, sizeof *s);
    if (!s) goto nomem;
    memset(s, 0, sizeof *s);
    s->desc = d;
    s->lfd = -1;
    if (rsdi_net_up() < 0) goto fail;
    s->net_ref = true;
    s->n = d.max_conns;
    s->rx_cap = rx_cap;
    s->conns = (rsdi_sconn *)rsdi_malloc(&d.allocator, sizeof(rsdi_sconn) * (size_t)d.max_conns);
    if (s->conns) {
        memset(s->conns, 0, sizeof(rsdi_sconn) * (size_t)d.max_conns);
        for (i = 0; i < s->n; i++) s->conns[i].fd = -1;
    }
    s->bufs = (char *)rsdi_malloc(&d.allocator, total);
    if (!s->conns || !s->bufs) {
        rsd_http_server_destroy(s);
        goto nomem;
    }
    for (i = 0; i < s->n; i++) {
        s->conns[i].gen = 1;
        s->conns[i].rx = s->bufs + per * (size_t)i;
        s->conns[i].tx = s->conns[i].rx + rx_cap;
        s->conns[i].io = &rsdi_io_plain;
    }
    s->desc.bind_host = NULL; /* not kept: the caller's string need not outlive create */
    s->lfd = rsdi_sock_open(addr.ss.ss_family);
    if (s->lfd < 0) goto fail;
#if !defined(_WIN32) /* Windows' SO_REUSEADDR would let another socket steal the port */
    rsdi_sock_setint(s->lfd, SOL_SOCKET, SO_REUSEADDR, 1);
#endif
    if (rsdi_sock_listen(s->lfd, (const struct sockaddr *)(const void *)&addr.ss, addr.len, 128) < 0) goto fail;
    {
        struct sockaddr_storage ss;
        if (rsdi_sock_name(s->lfd, &ss) < 0) goto fail;
        if (ss.ss_family == AF_INET) s->port = ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port);
        else s->port = ntohs(((struct sockaddr_in6 *)(void *)&ss)->sin6_port);
    }
    return s;
fail:
    rsdi_logf(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_LISTEN_FAILED, RSDI_WHERE,
              "http server: bind/listen on port %u failed: errno %d", (unsigned)d.port, errno);
    rsd_http_server_destroy(s);
    return NULL;
nomem:
    rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, "http server: allocation failed", RSDI_WHERE);
    return NULL;
}

RSD_API void rsd_http_server_destroy(rsd_http_server *s) {
    rsd_allocator a;
    int i;
    if (!s) return;
    a = s->desc.allocator;
    if (s->conns)
        for (i = 0; i < s->n; i++)
            if (s->conns[i].fd >= 0) s->conns[i].io->close_fn(s->conns[i].io_ctx, s->conns[i].fd);
    if (s->lfd >= 0) rsdi_sock_close(s->lfd);
    if (s->net_ref) rsdi_net_down();
    rsdi_free(&a, s->bufs);
    rsdi_free(&a, s->conns);
    rsdi_free(&a, s);
}

RSD_API uint16_t rsd_http_server_port(const rsd_http_server *s) { return s ? s->port : 0; }

/* Sends pending tx bytes; false when the connection died (already dropped). */
RSDI_PRIVATE bool rsdi_sconn_flush(rsd_http_server *s, int k) {
    rsdi_sconn *cn = &s->conns[k];
    while (cn->tx_off < cn->tx_len) {
        long n = cn->io->send_fn(cn->io_ctx, cn->fd, cn->tx + cn->tx_off, cn->tx_len - cn->tx_off);
        if (n < 0) {
            if (rsdi_would_block(errno)) return true;
            rsdi_sconn_drop(s, k);
            return false;
        }
        cn->tx_off += (size_t)n;
    }
    cn->tx_off = cn->tx_len = 0;
    if (cn->state == RSDI_SC_CLOSING) {
        rsdi_sconn_free(s, k);
        return false;
    }
    return true;
}

/* Room for n more tx bytes (compacting first); a wbuf over the free tail. */
RSDI_PRIVATE rsdi_wbuf rsdi_sconn_wbuf(rsd_http_server *s, rsdi_sconn *cn) {
    rsdi_wbuf w;
    if (cn->tx_off) {
        memmove(cn->tx, cn->tx + cn->tx_off, cn->tx_len - cn->tx_off);
        cn->tx_len -= cn->tx_off;
        cn->tx_off = 0;
    }
    w.p = cn->tx + cn->tx_len;
    w.cap = s->desc.max_response_bytes - cn->tx_len;
    w.len = 0;
    w.over = false;
    return w;
}

/* Reason phrases, each "<status><phrase>" and NUL-terminated; an empty one ends the list. */
static const char rsdi_reasons[] =
    "200OK\0" "201Created\0" "202Accepted\0" "204No Content\0" "400Bad Request\0" "401Unauthorized\0"
    "403Forbidden\0" "404Not Found\0" "405Method Not Allowed\0" "408Request Timeout\0" "409Conflict\0"
    "413Content Too Large\0" "429Too Many Requests\0" "431Request Header Fields Too Large\0"
    "500Internal Server Error\0" "501Not Implemented\0" "503Service Unavailable\0";

RSDI_PRIVATE const char *rsdi_reason(int status) {
    const char *p;
    for (p = rsdi_reasons; *p; p += strlen(p) + 1)
        if ((p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0') == status) return p + 3;
    return status < 300 ? "OK" : status < 400 ? "Redirect" : status < 500 ? "Client Error" : "Server Error";
}

/* Bad client: a fixed answer, then close once it is sent. Other clients are unaffected. */
RSDI_PRIVATE void rsdi_sconn_reject(rsd_http_server *s, int k, int status) {
    rsdi_sconn *cn = &s->conns[k];
    rsdi_wbuf w;
    cn->tx_off = cn->tx_len = 0;
    w = rsdi_sconn_wbuf(s, cn);
    rsdi_w_puts(&w, "HTTP/1.1 ");
    rsdi_w_putu(&w, (uint64_t)status, 10);
    rsdi_w_put(&w, " ", 1);
    rsdi_w_puts(&w, rsdi_reason(status));
    rsdi_w_puts(&w, "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    cn->tx_len = w.over ? 0 : w.len;
    cn->state = RSDI_SC_CLOSING;
    cn->req_start = s->now;
    cn->need_parse = false;
    s->stats.bad_requests++;
    rsdi_logf(&s->desc.logger, RSD_LOG_INFO, RSD_LOGITEM_HTTP_BAD_REQUEST, RSDI_WHERE,
              "http server: answered %d and closing the connection", status);
    (void)rsdi_sconn_flush(s, k);
}

/* Parses what is in rx (state READ); may queue a REQUEST event or reject. */
RSDI_PRIVATE void rsdi_sconn_parse(rsd_http_server *s, int k) {
    rsdi_sconn *cn = &s->conns[k];
    cn->need_parse = false;
    if (cn->rx_len == 0) return;
    if (cn->head_len == 0) {
        size_t consumed = 0;
        int r = rsd_http_parse_request(cn->rx, cn->rx_len, cn->parsed_prev, &cn->head, &consumed);
        cn->parsed_prev = cn->rx_len;
        if (r == RSD_PENDING) {
            if (cn->rx_len >= s->desc.max_header_bytes) rsdi_sconn_reject(s, k, 431);
            return;
        }
        if (r == RSD_ERR_HEADERS_TOO_LARGE || (r == RSD_OK && consumed > s->desc.max_header_bytes)) {
            rsdi_sconn_reject(s, k, 431);
            return;
        }
        if (r < 0) {
            rsdi_sconn_reject(s, k, 400);
            return;
        }
        if (cn->head.framing.other_codings) { /* gzip, chunked: nothing here decodes gzip */
            rsdi_sconn_reject(s, k, 501);
            return;
        }
        cn->head_len = consumed;
        cn->body_len = 0;
        memset(&cn->dc, 0, sizeof cn->dc);
        if (cn->head.framing.chunked) {
            cn->body_mode = RSDI_BODY_CHUNKED;
        } else if (cn->head.framing.content_length > 0) {
            if ((uint64_t)cn->head.framing.content_length > (uint64_t)s->desc.max_body_bytes) {
                rsdi_sconn_reject(s, k, 413);
                return;
            }
            cn->body_mode = RSDI_BODY_LENGTH;
        } else {
            cn->body_mode = RSDI_BODY_NONE;
        }
        if (cn->head.expect_continue && cn->body_mode != RSDI_BODY_NONE) {
            rsdi_wbuf w = rsdi_sconn_wbuf(s, cn);
            rsdi_w_puts(&w, "HTTP/1.1 100 Continue\r\n\r\n");
            if (!w.over) cn->tx_len += w.len;
            if (!rsdi_sconn_flush(s, k)) return;
        }
    }
    if (cn->body_mode == RSDI_BODY_LENGTH) {
        size_t cl = (size_t)cn->head.framing.content_length;
        if (cn->rx_len - cn->head_len < cl) return;
        cn->body_len = cl;
        cn->req_end = cn->head_len + cl;
    } else if (cn->body_mode == RSDI_BODY_CHUNKED) {
        size_t at = cn->head_len + cn->body_len, n = cn->rx_len - at;
        int r = n ? rsd_http_dechunk_step(&cn->dc, cn->rx + at, &n) : RSD_PENDING;
        if (r < 0) {
            rsdi_sconn_reject(s, k, 400);
            return;
        }
        cn->body_len += n;
        if (cn->body_len > s->desc.max_body_bytes) {
            rsdi_sconn_reject(s, k, 413);
            return;
        }
        if (r == RSD_PENDING) {
            cn->rx_len = cn->head_len + cn->body_len;
            if (cn->rx_len >= s->rx_cap) rsdi_sconn_reject(s, k, 413);
            return;
        }
        cn->req_end = cn->head_len + cn->body_len;
        cn->rx_len = cn->req_end + cn->dc.rest;
    } else {
        cn->req_end = cn->head_len;
    }
    cn->state = RSDI_SC_PENDING;
    cn->ev_type = RSD_HTTP_SEV_REQUEST;
    cn->ev_seq = s->seq++;
    cn->delivered = false;
    cn->close_after = cn->head.framing.close;
    s->stats.requests++;
}

/* Reads what is available; false when the connection died. */
RSDI_PRIVATE bool rsdi_sconn_read(rsd_http_server *s, int k) {
    rsdi_sconn *cn = &s->conns[k];
    for (;;) {
        size_t want = s->rx_cap - cn->rx_len;
        long n;
        if (want == 0) return true;
        n = cn->io->recv_fn(cn->io_ctx, cn->fd, cn->rx + cn->rx_len, want);
        if (n < 0) {
            if (rsdi_would_block(errno)) return true;
            rsdi_sconn_drop(s, k);
            return false;
        }
        if (n == 0) {
            rsdi_sconn_drop(s, k);
            return false;
        }
        if (cn->state == RSDI_SC_READ && cn->rx_len == 0) cn->req_start = s->now;
        cn->fresh = false;
        cn->rx_len += (size_t)n;
        cn->last_active = s->now;
        if (cn->state == RSDI_SC_READ) cn->need_parse = true;
        if ((size_t)n < want) return true;
    }
}

/* When a READ connection times out: a new one's first byte (first_byte_timeout_ms, and
   never later than idle_timeout_ms), an idle kept-alive one's next request
   (idle_timeout_ms), the end of a head (head_timeout_ms), the next byte of a body
   (body_timeout_ms after the last one) and the whole request (request_timeout_ms,
   which bounds the head and body deadlines). */
RSDI_PRIVATE uint64_t rsdi_sconn_deadline(const rsd_http_server *s, const rsdi_sconn *cn) {
    uint64_t t, u;
    if (cn->rx_len == 0) {
        t = rsdi_deadline(cn->last_active, s->desc.idle_timeout_ms);
        u = cn->fresh ? rsdi_deadline(cn->last_active, s->desc.first_byte_timeout_ms) : t;
    } else {
        t = rsdi_deadline(cn->req_start, s->desc.request_timeout_ms);
        u = cn->head_len ? rsdi_deadline(cn->last_active, s->desc.body_timeout_ms)
                         : rsdi_deadline(cn->req_start, s->desc.head_timeout_ms);
    }
    return u < t ? u : t;
}

/* Whether a connection may be dropped for a new client, and in which order: 0 = closing
   after a rejection (first), 1 = waiting for its first byte, its next request or the
   rest of its head (since *t), 2 = reading a body (no byte since *t); -1 = never (a
   request held, streamed or being answered). */
RSDI_PRIVATE int rsdi_sconn_evict_class(const rsdi_sconn *cn, uint64_t *t) {
    if (cn->state == RSDI_SC_CLOSING) {
        *t = 0;
        return 0;
    }
    if (cn->state != RSDI_SC_READ || cn->need_parse) return -1;
    if (cn->head_len) {
        *t = cn->last_active;
        return 2;
    }
    *t = cn->rx_len ? cn->req_start : cn->last_active;
    return 1;
}

/* The connection to drop for a new client when the table is full: the lowest class
   above, the longest waiting within it. spare_now: not one whose wait began in this
   very ms (just accepted, just answered, a body byte just read): it becomes a candidate
   one ms later (rsdi_server_spared). -1 when there is none. */
RSDI_PRIVATE int rsdi_server_victim(const rsd_http_server *s, bool spare_now) {
    int k, best = -1, bc = 0;
    uint64_t bt = 0;
    for (k = 0; k < s->n; k++) {
        uint64_t t = 0;
        int c = rsdi_sconn_evict_class(&s->conns[k], &t);
        if (c < 0 || (spare_now && c > 0 && t >= s->now)) continue;
        if (best < 0 || c < bc || (c == bc && t < bt)) {
            best = k;
            bc = c;
            bt = t;
        }
    }
    return best;
}

/* Table full and only spared candidates: a new client can be taken one ms from now. */
RSDI_PRIVATE bool rsdi_server_spared(const rsd_http_server *s) {
    int k;
    for (k = 0; k < s->n; k++)
        if (s->conns[k].state == RSDI_SC_FREE) return false;
    return rsdi_server_victim(s, true) < 0 && rsdi_server_victim(s, false) >= 0;
}

/* Takes waiting clients into free slots; with evict, into the slot of the victim above
   once none is free. Returns true when it stopped for want of a slot (clients may still
   wait in the backlog). Out of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM) or any
   other error that is not about one connection: the listener pauses (left out of
   pollfds, not tried) until a connection closes or RSD_HTTP_SERVER_ACCEPT_BACKOFF_MS
   pass, so a full descriptor table cannot spin the host; one log line per run of
   failures. */
RSDI_PRIVATE bool rsdi_server_accept(rsd_http_server *s, bool evict) {
    int k = 0;
    while (!s->accept_paused) {
        int fd, victim = -1;
        while (k < s->n && s->conns[k].state != RSDI_SC_FREE) k++;
        if (k >= s->n && (!evict || (victim = rsdi_server_victim(s, true)) < 0))
            return true; /* full: the rest wait in the backlog */
        fd = rsdi_sock_accept(s->lfd);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue; /* that one is gone */
            if (rsdi_would_block(e)) return false;
            s->accept_paused = true;
            s->accept_resume = rsdi_deadline(s->now, RSD_HTTP_SERVER_ACCEPT_BACKOFF_MS);
            s->stats.accept_pauses++;
            if (!s->accept_err_logged)
                rsdi_logf(&s->desc.logger, RSD_LOG_WARN, RSD_LOGITEM_HTTP_ACCEPT_FAILED, RSDI_WHERE,
                          "http server: accept failed: errno %d; not accepting until a connection "
                          "closes or %u ms pass (logged once)",
                          e, (unsigned)RSD_HTTP_SERVER_ACCEPT_BACKOFF_MS);
            s->accept_err_logged = true;
            return false;
        }
        s->accept_err_logged = false;
        if (rsdi_fd_nonblock(fd) < 0) {
            rsdi_sock_close(fd);
            continue;
        }
        rsdi_sock_opts(fd);
        if (victim >= 0) {
            rsdi_sconn *v = &s->conns[victim];
            rsdi_logf(&s->desc.logger, RSD_LOG_INFO, RSD_LOGITEM_HTTP_CONN_EVICTED, RSDI_WHERE,
                      "http server: all %d connections busy; dropped one %s to take a new client",
                      s->n, v->state == RSDI_SC_CLOSING ? "closing"
                            : v->head_len                  ? "with a stalled body"
                            : v->rx_len                    ? "with an unfinished head"
                                                           : "waiting idle");
            rsdi_sconn_free(s, victim);
            s->stats.evictions++;
            k = victim;
        }
        {
            rsdi_sconn *cn = &s->conns[k];
            cn->fd = fd;
            cn->state = RSDI_SC_READ;
            cn->io = &rsdi_io_plain;
            cn->io_ctx = NULL;
            cn->rx_len = cn->parsed_prev = cn->head_len = cn->body_len = cn->req_end = 0;
            cn->tx_off = cn->tx_len = 0;
            cn->last_active = cn->req_start = s->now;
            cn->hint = RSDI_HINT_READY;
            cn->fresh = true;
            s->stats.accepts++;
        }
    }
    return false;
}

RSDI_PRIVATE int rsdi_server_step(rsd_http_server *s, uint64_t now, const rsd_pollfd *fds, int nfds) {
    int i, k, events = 0;
    bool full;
    if (!s) return RSD_ERR_ARG;
    s->now = now;
    s->lhint = RSDI_HINT_UNKNOWN;
    for (k = 0; k < s->n; k++) s->conns[k].hint = RSDI_HINT_UNKNOWN;
    if (fds)
        for (i = 0; i < nfds; i++) {
            int h = fds[i].revents ? RSDI_HINT_READY : RSDI_HINT_IDLE;
            if ((int)fds[i].fd == s->lfd) {
                s->lhint = h;
                continue;
            }
            for (k = 0; k < s->n; k++)
                if (s->conns[k].fd == (int)fds[i].fd && s->conns[k].fd >= 0) {
                    s->conns[k].hint = h;
                    break;
                }
        }
    if (s->accept_paused && now >= s->accept_resume) s->accept_paused = false;
    full = s->lhint != RSDI_HINT_IDLE && rsdi_server_accept(s, false);
    for (k = 0; k < s->n; k++) {
        rsdi_sconn *cn = &s->conns[k];
        int st = cn->state;
        if (st == RSDI_SC_FREE || st == RSDI_SC_ZOMBIE) continue;
        if (cn->tx_len > cn->tx_off && !rsdi_sconn_flush(s, k)) continue;
        if (cn->state == RSDI_SC_CLOSING) { /* a peer that never reads its last answer */
            if (now >= rsdi_deadline(cn->req_start, s->desc.request_timeout_ms)) rsdi_sconn_free(s, k);
            continue;
        }
        if (cn->hint != RSDI_HINT_IDLE && !rsdi_sconn_read(s, k)) continue;
        if (cn->state == RSDI_SC_READ && cn->need_parse) rsdi_sconn_parse(s, k);
        if (cn->state == RSDI_SC_READ && now >= rsdi_sconn_deadline(s, cn)) { /* silent or slow */
            if (cn->rx_len) rsdi_sconn_reject(s, k, 408);
            else rsdi_sconn_free(s, k);
        }
    }
    /* Still full and clients waiting: the oldest idle or head-incomplete connection
       makes room (one that just arrived and has not sent yet is spared this ms). */
    if (full) (void)rsdi_server_accept(s, true);
    for (k = 0; k < s->n; k++)
        if (s->conns[k].ev_type != RSD_HTTP_SEV_NONE) events++;
    return events;
}

RSD_API int rsd_http_server_step(rsd_http_server *s, uint64_t now_ms) {
    return rsdi_server_step(s, now_ms, NULL, 0);
}

RSD_API int rsd_http_server_step_polled(rsd_http_server *s, uint64_t now_ms,
                                        const rsd_pollfd *fds, int nfds) {
    return rsdi_server_step(s, now_ms, fds, nfds);
}

RSDI_PRIVATE void rsdi_sev_fill(const rsd_http_server *s, int k, rsd_http_server_event *ev) {
    const rsdi_sconn *cn = &s->conns[k];
    memset(ev, 0, sizeof *ev);
    ev->req.id = rsdi_sreq_id(s, k);
    ev->body.ptr = "";
    if (cn->state == RSDI_SC_ZOMBIE) {
        ev->type = RSD_HTTP_SEV_CLOSED;
        return;
    }
    ev->type = RSD_HTTP_SEV_REQUEST;
    ev->head = &cn->head;
    ev->body.ptr = cn->rx + cn->head_len;
    ev->body.len = cn->body_len;
}

RSD_API bool rsd_http_server_next_event(rsd_http_server *s, rsd_http_server_event *ev) {
    int k, best = -1;
    if (!s || !ev) return false;
    for (k = 0; k < s->n; k++)
        if (s->conns[k].state == RSDI_SC_ZOMBIE && s->conns[k].zombie_pulled) {
            s->conns[k].state = RSDI_SC_FREE;
            s->conns[k].zombie_pulled = false;
            rsdi_sconn_bump(&s->conns[k]);
        }
    for (k = 0; k < s->n; k++)
        if (s->conns[k].ev_type != RSD_HTTP_SEV_NONE && (best < 0 || s->conns[k].ev_seq < s->conns[best].ev_seq))
            best = k;
    if (best < 0) return false;
    rsdi_sev_fill(s, best, ev);
    if (s->conns[best].ev_type == RSD_HTTP_SEV_CLOSED) s->conns[best].zombie_pulled = true;
    else s->conns[best].delivered = true;
    s->conns[best].ev_type = RSD_HTTP_SEV_NONE;
    return true;
}

/* Slot of a live handle, or <0: RSD_ERR_CLOSED / RSD_ERR_NOT_FOUND. */
RSDI_PRIVATE int rsdi_server_slot(const rsd_http_server *s, rsd_http_sreq_h h) {
    uint32_t slot = rsdi_handle_idx(h.id, RSDI_SLOT_BITS), gen = rsdi_handle_gen(h.id, RSDI_SLOT_BITS);
    const rsdi_sconn *cn;
    if (!s || h.id == 0 || slot >= (uint32_t)s->n) return RSD_ERR_NOT_FOUND;
    cn = &s->conns[slot];
    if (cn->gen != gen) return cn->dead_gen == gen ? RSD_ERR_CLOSED : RSD_ERR_NOT_FOUND;
    if (cn->state == RSDI_SC_ZOMBIE) return RSD_ERR_CLOSED;
    if (cn->state != RSDI_SC_PENDING && cn->state != RSDI_SC_STREAM) return RSD_ERR_NOT_FOUND;
    return (int)slot;
}

RSD_API int rsd_http_server_query_req(const rsd_http_server *s, rsd_http_sreq_h h, rsd_http_server_event *out) {
    int k = rsdi_server_slot(s, h);
    if (k < 0) return k;
    if (out) rsdi_sev_fill(s, k, out);
    return RSD_OK;
}

RSD_API int rsd_http_server_pollfds(const rsd_http_server *s, rsd_pollfd *out, int cap) {
    int k, n = 0, free_slots = 0;
    if (!s) return 0;
    for (k = 0; k < s->n; k++) {
        const rsdi_sconn *cn = &s->conns[k];
        short ev = 0;
        if (cn->state == RSDI_SC_FREE) {
            free_slots++;
            continue;
        }
        if (cn->state == RSDI_SC_ZOMBIE) continue;
        if (cn->tx_len > cn->tx_off) ev |= RSD_POLLOUT;
        if (cn->state != RSDI_SC_CLOSING && cn->rx_len < s->rx_cap) ev |= RSD_POLLIN;
        if (!ev) continue;
        if (out && n < cap) {
            out[n].fd = cn->fd;
            out[n].events = ev;
            out[n].revents = 0;
        }
        n++;
    }
    if (s->lfd >= 0 && !s->accept_paused && (free_slots || rsdi_server_victim(s, true) >= 0)) {
        if (out && n < cap) {
            out[n].fd = s->lfd;
            out[n].events = RSD_POLLIN;
            out[n].revents = 0;
        }
        n++;
    }
    return n;
}

RSD_API uint64_t rsd_http_server_next_deadline(const rsd_http_server *s) {
    uint64_t dl = RSD_NO_DEADLINE;
    int k;
    if (!s) return dl;
    for (k = 0; k < s->n; k++) {
        const rsdi_sconn *cn = &s->conns[k];
        uint64_t t;
        if (cn->ev_type != RSD_HTTP_SEV_NONE) return 0;  /* an event waits to be pulled */
        if (cn->state == RSDI_SC_CLOSING) {
            t = rsdi_deadline(cn->req_start, s->desc.request_timeout_ms);
            if (t < dl) dl = t;
            continue;
        }
        if (cn->state != RSDI_SC_READ) continue;
        if (cn->need_parse) return 0;
        t = rsdi_sconn_deadline(s, cn);
        if (t < dl) dl = t;
    }
    if (s->accept_paused && s->accept_resume < dl) dl = s->accept_resume;
    if (!s->accept_paused && s->now + 1 < dl && rsdi_server_spared(s)) dl = s->now + 1;
    return dl;
}

/* The answer is complete: next request on the connection (or close). */
RSDI_PRIVATE void rsdi_sconn_answered(rsd_http_server *s, int k) {
    rsdi_sconn *cn = &s->conns[k];
    s->stats.responses++;
    rsdi_sconn_bump(cn);
    cn->delivered = false;
    cn->ev_type = RSD_HTTP_SEV_NONE;
    if (cn->close_after) {
        cn->state = RSDI_SC_CLOSING;
        cn->req_start = s->now;
        (void)rsdi_sconn_flush(s, k);
        return;
    }
    if (cn->rx_len > cn->req_end) memmove(cn->rx, cn->rx + cn->req_end, cn->rx_len - cn->req_end);
    cn->rx_len -= cn->req_end;
    cn->req_end = cn->head_len = cn->body_len = cn->parsed_prev = 0;
    cn->state = RSDI_SC_READ;
    cn->need_parse = cn->rx_len > 0;
    cn->last_active = cn->req_start = s->now;
    (void)rsdi_sconn_flush(s, k);
}

/* The answer's head for a pending request into *w (not yet sent): the status line, the
   headers, then Content-Length (length >= 0), chunked framing (RSDI_LEN_CHUNKED) or
   neither (RSDI_LEN_CLOSE: the connection closes after the body), and the blank line.
   The slot, or why not (bad: an argument of the caller's is wrong). */
enum { RSDI_LEN_CLOSE = -1, RSDI_LEN_CHUNKED = -2 };
RSDI_PRIVATE int rsdi_answer_head(rsd_http_server *s, rsd_http_sreq_h h, int status, int min_status,
                                  const rsd_http_header *headers, size_t num_headers, int64_t length, bool bad,
                                  rsdi_wbuf *w) {
    int k = rsdi_server_slot(s, h);
    rsdi_sconn *cn;
    if (k < 0) return k;
    cn = &s->conns[k];
    if (cn->state != RSDI_SC_PENDING) return RSD_ERR_STATE;
    if (status < min_status || status > 999 || !rsdi_headers_ok(headers, num_headers) || bad) return RSD_ERR_ARG;
    *w = rsdi_sconn_wbuf(s, cn);
    rsdi_w_puts(w, "HTTP/1.1 ");
    rsdi_w_putu(w, (uint64_t)status, 10);
    rsdi_w_put(w, " ", 1);
    rsdi_w_puts(w, rsdi_reason(status));
    rsdi_w_put(w, "\r\n", 2);
    rsdi_w_headers(w, headers, num_headers);
    if (cn->close_after || length == RSDI_LEN_CLOSE) rsdi_w_puts(w, "Connection: close\r\n");
    if (length >= 0) rsdi_w_clen(w, (uint64_t)length);
    else if (length == RSDI_LEN_CHUNKED) rsdi_w_puts(w, "Transfer-Encoding: chunked\r\n");
    rsdi_w_put(w, "\r\n", 2);
    return k;
}

RSD_API int rsd_http_respond(rsd_http_server *s, rsd_http_sreq_h h, int status,
                             const rsd_http_header *headers, size_t num_headers,
                             const void *body, size_t body_len) {
    rsdi_wbuf w;
    int k = rsdi_answer_head(s, h, status, 100, headers, num_headers, (int64_t)body_len, body_len && !body, &w);
    rsdi_sconn *cn;
    if (k < 0) return k;
    cn = &s->conns[k];
    if (body_len && !rsd_str_eq_c(cn->head.method, "HEAD")) rsdi_w_put(&w, (const char *)body, body_len);
    if (w.over) return RSD_ERR_TOO_LARGE;
    cn->tx_len += w.len;
    rsdi_sconn_answered(s, k);
    return RSD_OK;
}

/* A stream's head is out: chunked (raw false) or the bytes as they are. */
RSDI_PRIVATE int rsdi_stream_started(rsd_http_server *s, int k, const rsdi_wbuf *w, bool raw, bool close) {
    rsdi_sconn *cn;
    if (k < 0) return k;
    if (w->over) return RSD_ERR_TOO_LARGE;
    cn = &s->conns[k];
    cn->tx_len += w->len;
    cn->state = RSDI_SC_STREAM;
    cn->raw = raw;
    if (close) cn->close_after = true;
    (void)rsdi_sconn_flush(s, k);
    return RSD_OK;
}

RSD_API int rsd_http_stream_begin(rsd_http_server *s, rsd_http_sreq_h h, int status,
                                  const rsd_http_header *headers, size_t num_headers) {
    rsdi_wbuf w;
    int k = rsdi_answer_head(s, h, status, 200, headers, num_headers, RSDI_LEN_CHUNKED, false, &w);
    return rsdi_stream_started(s, k, &w, false, false);
}

RSD_API int rsd_http_stream_begin_raw(rsd_http_server *s, rsd_http_sreq_h h, int status,
                                      const rsd_http_header *headers, size_t num_headers,
                                      int64_t content_length) {
    rsdi_wbuf w;
    int k = rsdi_answer_head(s, h, status, 200, headers, num_headers,
                             content_length < 0 ? (int64_t)RSDI_LEN_CLOSE : content_length, false, &w);
    return rsdi_stream_started(s, k, &w, true, content_length < 0);
}

RSD_API int rsd_http_abort(rsd_http_server *s, rsd_http_sreq_h h) {
    int k = rsdi_server_slot(s, h);
    rsdi_sconn *cn;
    if (k < 0) return k;
    cn = &s->conns[k];
    if (cn->tx_len > cn->tx_off && !rsdi_sconn_flush(s, k)) return RSD_OK; /* already gone */
    cn->dead_gen = cn->gen;
    rsdi_sconn_free(s, k);
    return RSD_OK;
}

RSDI_PRIVATE int rsdi_stream_slot(rsd_http_server *s, rsd_http_sreq_h h) {
    int k = rsdi_server_slot(s, h);
    if (k < 0) return k;
    if (s->conns[k].state != RSDI_SC_STREAM) return RSD_ERR_STATE;
    return k;
}

RSD_API int rsd_http_stream_write(rsd_http_server *s, rsd_http_sreq_h h, const void *data, size_t len) {
    int k = rsdi_stream_slot(s, h);
    rsdi_sconn *cn;
    rsdi_wbuf w;
    if (k < 0) return k;
    if (len == 0) return RSD_OK; /* a zero chunk would end the stream */
    if (!data) return RSD_ERR_ARG;
    cn = &s->conns[k];
    w = rsdi_sconn_wbuf(s, cn);
    if (!cn->raw) {
        rsdi_w_putu(&w, (uint64_t)len, 16);
        rsdi_w_put(&w, "\r\n", 2);
    }
    rsdi_w_put(&w, (const char *)data, len);
    if (!cn->raw) rsdi_w_put(&w, "\r\n", 2);
    if (w.over) return RSD_ERR_CAPACITY;
    cn->tx_len += w.len;
    (void)rsdi_sconn_flush(s, k);
    return RSD_OK;
}

RSD_API int rsd_http_stream_sse(rsd_http_server *s, rsd_http_sreq_h h, const char *event,
                                const char *data, size_t len) {
    int k = rsdi_stream_slot(s, h);
    rsdi_sconn *cn;
    rsdi_wbuf w;
    size_t i, start, body_len, hdr_len;
    if (k < 0) return k;
    if ((len && !data) || (event && !rsdi_value_ok(rsd_str_c(event)))) return RSD_ERR_ARG;
    cn = &s->conns[k];
    /* size of the event text first (the chunk size line precedes it) */
    body_len = event ? 8 + strlen(event) : 0; /* "event: " + name + "\n" */
    for (start = 0, i = 0; i <= len; i++)
        if (i == len || data[i] == '\n') {
            body_len += 7 + (i - start); /* "data: " + line + "\n" */
            start = i + 1;
        }
    body_len += 1;
    w = rsdi_sconn_wbuf(s, cn);
    if (!cn->raw) {
        rsdi_w_putu(&w, (uint64_t)body_len, 16);
        rsdi_w_put(&w, "\r\n", 2);
    }
    hdr_len = w.len;
    if (event) {
        rsdi_w_puts(&w, "event: ");
        rsdi_w_puts(&w, event);
        rsdi_w_put(&w, "\n", 1);
    }
    for (start = 0, i = 0; i <= len; i++)
        if (i == len || data[i] == '\n') {
            size_t e = i;
            rsdi_w_puts(&w, "data: ");
            if (e > start && data[e - 1] == '\r') e--;
            rsdi_w_put(&w, data + start, e - start);
            if (e != i) rsdi_w_put(&w, " ", 1); /* keep the size: \r became a blank */
            rsdi_w_put(&w, "\n", 1);
            start = i + 1;
        }
    rsdi_w_put(&w, "\n", 1);
    if (!cn->raw) rsdi_w_put(&w, "\r\n", 2);
    if (w.over) return RSD_ERR_CAPACITY;
    if (w.len - hdr_len - (cn->raw ? 0u : 2u) != body_len) return RSD_ERR_ARG; /* cannot happen */
    cn->tx_len += w.len;
    (void)rsdi_sconn_flush(s, k);
    return RSD_OK;
}

RSD_API int rsd_http_stream_end(rsd_http_server *s, rsd_http_sreq_h h) {
    int k = rsdi_stream_slot(s, h);
    rsdi_sconn *cn;
    rsdi_wbuf w;
    if (k < 0) return k;
    cn = &s->conns[k];
    if (!cn->raw) {
        w = rsdi_sconn_wbuf(s, cn);
        rsdi_w_puts(&w, "0\r\n\r\n");
        if (w.over) return RSD_ERR_CAPACITY;
        cn->tx_len += w.len;
    }
    rsdi_sconn_answered(s, k);
    return RSD_OK;
}

RSD_API int rsd_http_stream_end_close(rsd_http_server *s, rsd_http_sreq_h h) {
    int k = rsdi_stream_slot(s, h);
    if (k < 0) return k;
    s->conns[k].close_after = true;
    return rsd_http_stream_end(s, h);
}

RSD_API size_t rsd_http_stream_room(rsd_http_server *s, rsd_http_sreq_h h) {
    int k = rsdi_stream_slot(s, h);
    size_t room;
    if (k < 0) return 0;
    room = s->desc.max_response_bytes - (s->conns[k].tx_len - s->conns[k].tx_off);
    if (s->conns[k].raw) return room;
    return room > 32 ? room - 32 : 0; /* chunk framing */
}

RSD_API void rsd_http_server_query(const rsd_http_server *s, rsd_http_server_info *out) {
    if (!out) return;
    if (!s) memset(out, 0, sizeof *out);
    else *out = s->stats;
}

#endif /* RSD_NO_HTTP_SERVER */
/* ==== server end ========================================================== */

/* ==== >>proc ============================================================== */
#ifndef RSD_NO_PROCESS
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* The platform layer of the supervisor: the functions marked "platform" below have a
   POSIX body and a Windows (_WIN32) body; everything else is one shared copy. */
#if defined(_WIN32) /* windows.h and winsock2.h from the net section */
#include <wchar.h>
#include <sys/stat.h>
typedef long rsdi_pid_t;         /* a Windows process id */
#define RSDI_SIGTERM 15          /* the graceful stop: CTRL_BREAK_EVENT to its group */
#define RSDI_SIGKILL 9           /* TerminateJobObject */
#define RSDI_PROC_KILL_CODE 137u /* exit code TerminateJobObject gives (128 + 9) */
#define RSDI_PROC_PIPE_BYTES 65536u  /* output pipe buffer */
#define RSDI_PROC_POLL_MIN_MS 10u    /* pipe and exit checked on a timer: 10 ms after */
#define RSDI_PROC_POLL_MAX_MS 100u   /* output, doubling to 100 ms while quiet */
#define RSDI_PROC_WCMD 32768     /* CreateProcessW's command line limit, in UTF-16 units */
#define RSDI_PROC_WENV 32768     /* environment block (spec.env), in UTF-16 units */
#define RSDI_PROC_SEP '\\'
#else
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#if defined(__linux__) && !defined(RSDI_FORCE_BSD)
#include <sys/prctl.h>
#include <sys/syscall.h>
#define RSDI_PROC_LINUX 1
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
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29)) && \
    !defined(RSDI_FORCE_BSD)
#define RSDI_HAVE_SPAWN_CHDIR 1
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)) && \
    !defined(RSDI_FORCE_BSD)
#define RSDI_HAVE_SPAWN_CLOSEFROM 1
#endif
#if (defined(__GLIBC__) || defined(__linux__) || defined(__FreeBSD__) || defined(__NetBSD__) || \
     defined(__OpenBSD__)) && !defined(RSDI_FORCE_BSD)
#define RSDI_HAVE_PIPE2 1
#endif
typedef pid_t rsdi_pid_t;
#define RSDI_SIGTERM SIGTERM
#define RSDI_SIGKILL SIGKILL
#define RSDI_PROC_SEP '/'
#endif /* _WIN32 */

#define RSDI_PROC_GROUP_POLL_MS 100u /* the rest of a group after the leader: poll cap */
#define RSDI_PROC_IDX_BITS 8 /* handle index bits: RSD_PROCS_MAX */

typedef struct rsdi_proc_slot {
    uint32_t gen;                /* 1..2^24-1 while in use */
    rsd_proc_state state;
    rsdi_pid_t pid;              /* > 0 until the terminal event (the leader may be reaped) */
    rsdi_pid_t pgid;             /* its process group (= pid; Windows: its job), 0 = none or gone */
    bool reaped;                 /* the leader is reaped; waiting for the rest of its group */
    bool ev_asked;               /* the terminal event is STOPPED (else EXITED) */
    int out_fd;                  /* read end of the output pipe, -1 */
    int pid_fd;                  /* Linux pidfd, -1 */
#if defined(_WIN32)
    HANDLE out_h, proc_h, job_h; /* output pipe (read end), process, its job object; NULL */
#endif
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
    uint32_t os_err;             /* Windows: GetLastError() of the spawn call that failed */
    const char *os_call;         /* ... and that call's name */
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
    uint64_t now_ms;             /* the latest now_ms a call gave (uptime_ms runs to it) */
    const char **argv;           /* RSD_PROC_MAX_ARGS + 1 */
    char **envp;                 /* RSD_PROC_MAX_ENV + 1 */
    char path[RSD_PROC_PATH_MAX];
#if defined(_WIN32)
    char *cmd8;                  /* the command line, quoted, UTF-8 (cmd8_cap) */
    size_t cmd8_cap;
    wchar_t *wcmd;               /* ... as UTF-16 (RSDI_PROC_WCMD) */
    wchar_t *wenv;               /* the child's environment block (RSDI_PROC_WENV) */
    size_t wenv_len;
    void *attrs;                 /* PROC_THREAD_ATTRIBUTE_LIST (attrs_size), NULL = none */
    size_t attrs_size;
    wchar_t wpath[RSD_PROC_PATH_MAX], wcwd[RSD_PROC_PATH_MAX];
#endif
};

static const char *const rsdi_proc_llama_args[] = {
    "-m", "{model}", "--host", "{host}", "--port", "{port}", "?-c", "{ctx}",
    "?-np", "{parallel}", "?-ngl", "{ngl}", "?--alias", "{alias}", "{extra}", NULL};

RSD_API const char *const *rsd_proc_llama_args(void) { return rsdi_proc_llama_args; }

RSD_API const char *rsd_proc_state_str(int state) {
    static const char *const n[] = {"FREE", "STARTING", "READY", "STOPPING", "KILLING",
                                    "EXITED", "FAILED"};
    return state >= 0 && state < (int)RSD_PROC_STATE_NUM ? n[state] : "UNKNOWN";
}

RSD_API const char *rsd_proc_event_str(int kind) {
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
    if (!o->buf) { o->len += n; return; } /* counting only (rsd_procs_check) */
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
    for (i = 0; s->exe_args && s->exe_args[i]; i++) { /* verbatim: no placeholders */
        start = o->len;
        rsdi_proc_put(o, s->exe_args[i], strlen(s->exe_args[i]));
        rsdi_proc_end_arg(o, start);
    }
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

/* path, or cwd/path when path is relative and cwd is set, into buf (false: too long). */
/* Platform: an absolute path ('/'; Windows also '\\', "C:..."), a path with a directory
   part (not a bare name searched in PATH), the file name part of a path. */
RSDI_PRIVATE bool rsdi_proc_is_abs(const char *path) {
#if defined(_WIN32)
    return path[0] == '/' || path[0] == '\\' ||
           (((path[0] | 32) >= 'a' && (path[0] | 32) <= 'z') && path[1] == ':');
#else
    return path[0] == '/';
#endif
}
RSDI_PRIVATE bool rsdi_proc_has_dir(const char *path) {
#if defined(_WIN32)
    return strpbrk(path, "/\\:") != NULL;
#else
    return strchr(path, '/') != NULL;
#endif
}
RSDI_PRIVATE const char *rsdi_proc_base(const char *path) {
    const char *b = path, *c;
    for (c = path; *c; c++)
        if (*c == '/' || *c == RSDI_PROC_SEP) b = c + 1;
    return *b ? b : path;
}

/* path, or cwd/path when path is relative and cwd is set, into buf (false: too long). */
RSDI_PRIVATE bool rsdi_proc_join(const char *cwd, const char *path, char *buf, size_t cap) {
    int n = !rsdi_proc_is_abs(path) && cwd && cwd[0]
                ? RSD_SNPRINTF(buf, cap, "%s%c%s", cwd, RSDI_PROC_SEP, path)
                : RSD_SNPRINTF(buf, cap, "%s", path);
    return n >= 0 && (size_t)n < cap;
}

/* One argument quoted for a Windows command line so that the Microsoft C runtime's
   parser (CommandLineToArgvW, the MSVCRT/UCRT startup code) gives it back unchanged:
   an argument without space, tab, newline, vertical tab or '"' (and not empty) as it
   is; else inside "...", where a run of n backslashes before a '"' becomes 2n+1
   backslashes and the '"' itself, a run before the closing quote 2n, and any other
   run stays n. Writes what fits into out (cap bytes, NUL not written) and returns the
   length needed. Pure, so it is tested on every platform. */
RSDI_PRIVATE size_t rsdi_proc_win_quote(const char *arg, char *out, size_t cap) {
    size_t o = 0, bs = 0, k;
    const char *c;
#define RSDI_WQ_PUT(ch) do { if (o < cap) out[o] = (ch); o++; } while (0)
    if (arg[0] && !strpbrk(arg, " \t\n\v\"")) {
        for (c = arg; *c; c++) RSDI_WQ_PUT(*c);
        return o;
    }
    RSDI_WQ_PUT('"');
    for (c = arg;; c++) {
        if (*c == '\\') { bs++; continue; }
        if (*c == '\0' || *c == '"') {
            for (k = 0; k < 2 * bs + (*c == '"'); k++) RSDI_WQ_PUT('\\');
            if (*c == '\0') break;
        } else {
            for (k = 0; k < bs; k++) RSDI_WQ_PUT('\\');
        }
        RSDI_WQ_PUT(*c);
        bs = 0;
    }
    RSDI_WQ_PUT('"');
#undef RSDI_WQ_PUT
    return o;
}

/* The whole command line: each of argv quoted, one space between. Length needed. */
RSDI_PRIVATE size_t rsdi_proc_win_cmdline(const char *const *argv, char *out, size_t cap) {
    size_t o = 0;
    int a;
    for (a = 0; argv[a]; a++) {
        if (a) {
            if (o < cap) out[o] = ' ';
            o++;
        }
        o += rsdi_proc_win_quote(argv[a], o < cap ? out + o : out, o < cap ? cap - o : 0);
    }
    return o;
}

/* Platform: an environment entry names var (Windows: case-insensitively). */
RSDI_PRIVATE bool rsdi_proc_env_is(const char *entry, const char *var, size_t vl) {
    size_t i;
    for (i = 0; i < vl; i++) {
        char a = entry[i], b = var[i];
#if defined(_WIN32)
        if (a >= 'a' && a <= 'z') a = (char)(a - 32);
        if (b >= 'a' && b <= 'z') b = (char)(b - 32);
#endif
        if (a != b || a == '\0') return false;
    }
    return entry[vl] == '=' || entry[vl] == '\0';
}

/* The PATH a bare program name is searched in: spec.env's when it sets or removes
   PATH, else ours. */
RSDI_PRIVATE const char *rsdi_proc_path_var(const char *const *add) {
    const char *v = getenv("PATH");
    int k;
    for (k = 0; add && add[k]; k++)
        if (rsdi_proc_env_is(add[k], "PATH", 4)) v = add[k][4] == '=' ? add[k] + 5 : NULL;
    return v;
}

#if !defined(_WIN32)
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

#endif /* !_WIN32 */

/* A free loopback TCP port: bind port 0 (and listen), read it back, close; the
   socket helpers of the net section, so one copy for both socket APIs. 0 on failure. */
RSDI_PRIVATE uint16_t rsdi_proc_free_port(const char *host) {
    struct sockaddr_in a;
    struct sockaddr_storage ss;
    uint16_t port = 0;
    int fd = rsdi_sock_open(AF_INET);
    if (fd < 0) return 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    if (!host || inet_pton(AF_INET, host, &a.sin_addr) != 1)
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (rsdi_sock_listen(fd, (const struct sockaddr *)&a, (socklen_t)sizeof a, 1) == 0 &&
        rsdi_sock_name(fd, &ss) == 0 && ss.ss_family == AF_INET)
        port = ntohs(((const struct sockaddr_in *)(const void *)&ss)->sin_port);
    rsdi_sock_close(fd);
    return port;
}

/* Platform: why path cannot be run (exec) or read: 0, or an errno value. */
RSDI_PRIVATE int rsdi_proc_file_err(const char *path, bool exec) {
#if defined(_WIN32)
    wchar_t w[RSD_PROC_PATH_MAX];
    DWORD at;
    (void)exec; /* what CreateProcessW can run is decided by the file's content */
    if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, RSD_PROC_PATH_MAX) <= 0)
        return ENAMETOOLONG;
    at = GetFileAttributesW(w);
    if (at == INVALID_FILE_ATTRIBUTES) return rsdi_win_errno(GetLastError());
    return (at & FILE_ATTRIBUTE_DIRECTORY) ? EISDIR : 0;
#else
    struct stat sb;
    if (stat(path, &sb) != 0) return errno;
    if (S_ISDIR(sb.st_mode)) return EISDIR;
    return access(path, exec ? X_OK : R_OK) != 0 ? errno : 0;
#endif
}

/* Platform: exe as the launch runs it, into p->path: a path as given (Windows: with
   ".exe" added when the name has no extension and only that file exists, looked up
   from cwd), else the first match in path (':'-separated; Windows ';', each name also
   tried with ".exe"). RSD_OK or an errno value. */
RSDI_PRIVATE int rsdi_proc_resolve(rsd_procs *p, const char *exe, const char *path,
                                   const char *cwd) {
    const char *d;
    size_t el = strlen(exe);
    int last_err = ENOENT;
#if defined(_WIN32)
    const char list_sep = ';';
    bool ext = strchr(rsdi_proc_base(exe), '.') != NULL;
#else
    const char list_sep = ':';
    (void)cwd;
#endif
    if (rsdi_proc_has_dir(exe)) {
        if (el + 1 > sizeof p->path) return ENAMETOOLONG;
        memcpy(p->path, exe, el + 1);
#if defined(_WIN32)
        if (!ext && el + 5 <= sizeof p->path) {
            char f[RSD_PROC_PATH_MAX];
            if (rsdi_proc_join(cwd, exe, f, sizeof f - 4) && rsdi_proc_file_err(f, true) == ENOENT) {
                memcpy(f + strlen(f), ".exe", 5);
                if (rsdi_proc_file_err(f, true) == 0) memcpy(p->path + el, ".exe", 5);
            }
        }
#endif
        return 0;
    }
#if !defined(_WIN32)
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
#else
    if (!path) path = "";
#endif
    for (d = path;; d++) {
        const char *e = strchr(d, list_sep);
        size_t dl = e ? (size_t)(e - d) : strlen(d);
        int x;
        if (dl == 0) { d = "."; dl = 1; }  /* empty entry = current directory */
        for (x = 0; x < 2; x++) {
#if defined(_WIN32)
            size_t xl = x ? 4 : 0;
            if (x && ext) break;
#else
            size_t xl = 0;
            if (x) break;
#endif
            if (dl + 1 + el + xl + 1 <= sizeof p->path) {
                int fe;
                memcpy(p->path, d, dl);
                p->path[dl] = RSDI_PROC_SEP;
                memcpy(p->path + dl + 1, exe, el + 1);
                if (xl) memcpy(p->path + dl + 1 + el, ".exe", 5);
                fe = rsdi_proc_file_err(p->path, true);
                if (fe == 0) return 0;
                if (fe == EACCES) last_err = EACCES;
            }
        }
        if (!e) break;
        d = e;
    }
    return last_err;
}

RSDI_PRIVATE int rsdi_proc_env(rsd_procs *p, const char *const *add);

RSD_API int rsd_procs_check(rsd_procs *p, const rsd_proc_spec *spec, char *why, size_t cap) {
    rsdi_proc_out o;
    char file[RSD_PROC_PATH_MAX];
    const char *exe;
    int r, err;
    if (why && cap) why[0] = '\0';
    if (!p || !spec || (!why && cap)) return RSD_ERR_ARG;
    memset(&o, 0, sizeof o); /* buf NULL: count only */
    o.max = RSD_PROC_MAX_ARGS;
    r = rsdi_proc_expand(spec, 1, &o);
    if (r < 0 || o.len > p->arg_bytes) {
        if (cap)
            (void)RSD_SNPRINTF(why, cap, "command template: %s",
                               r < 0 ? rsd_result_str(r) : "longer than arg_bytes");
        return r < 0 ? r : RSD_ERR_CAPACITY;
    }
    if (spec->env) {
        if ((r = rsdi_proc_env(p, spec->env)) < 0) {
            if (cap) (void)RSD_SNPRINTF(why, cap, "environment: %s", rsd_result_str(r));
            return r;
        }
    }
    exe = rsdi_proc_exe(spec);
    err = rsdi_proc_resolve(p, exe, rsdi_proc_path_var(spec->env), spec->cwd);
    if (!err && rsdi_proc_has_dir(exe)) { /* a path: the launch would run exactly this */
        if (!rsdi_proc_join(spec->cwd, p->path, file, sizeof file)) err = ENAMETOOLONG;
        else err = rsdi_proc_file_err(file, true);
    }
    if (err) {
        if (cap) (void)RSD_SNPRINTF(why, cap, "cannot run %s: %s", exe, strerror(err));
        return RSD_ERR_SPAWN;
    }
    if (!spec->args && spec->model && spec->model[0]) { /* llama-server's -m FILE */
        if (!rsdi_proc_join(spec->cwd, spec->model, file, sizeof file)) err = ENAMETOOLONG;
        else err = rsdi_proc_file_err(file, false);
        if (err) {
            if (cap) (void)RSD_SNPRINTF(why, cap, "cannot read model file %s: %s", spec->model, strerror(err));
            return RSD_ERR_SPAWN;
        }
    }
    return RSD_OK;
}

/* Platform: builds the child's environment (ours with spec->env applied) into p->envp
   (Windows: the UTF-16 block p->wenv). RSD_OK, or RSD_ERR_CAPACITY when it has more
   than RSD_PROC_MAX_ENV entries (Windows: more than RSDI_PROC_WENV UTF-16 units). */
#if defined(_WIN32)
RSDI_PRIVATE int rsdi_proc_env(rsd_procs *p, const char *const *add) {
    wchar_t *cur = GetEnvironmentStringsW(), *e;
    size_t o = 0;
    int k, r = RSD_OK;
    for (e = cur; e && *e && r == RSD_OK; e += wcslen(e) + 1) {
        size_t el = wcslen(e);
        bool drop = false;
        for (k = 0; add[k] && !drop; k++) {
            const char *aeq = strchr(add[k], '=');
            size_t al = aeq ? (size_t)(aeq - add[k]) : strlen(add[k]), i;
            /* an entry's name ends at the first '=' after its first character ("=C:=C:\\") */
            if (al == 0 || al >= el || e[al] != L'=') continue;
            for (i = 0; i < al; i++) {
                wchar_t a = e[i], b = (wchar_t)(unsigned char)add[k][i];
                if (a >= L'a' && a <= L'z') a = (wchar_t)(a - 32);
                if (b >= L'a' && b <= L'z') b = (wchar_t)(b - 32);
                if (a != b) break;
            }
            drop = i == al;
        }
        if (drop) continue;
        if (o + el + 2 > RSDI_PROC_WENV) r = RSD_ERR_CAPACITY;
        else {
            memcpy(p->wenv + o, e, (el + 1) * sizeof(wchar_t));
            o += el + 1;
        }
    }
    if (cur) (void)FreeEnvironmentStringsW(cur);
    for (k = 0; add[k] && r == RSD_OK; k++) {
        int n;
        if (!strchr(add[k], '=')) continue;  /* "NAME": unset */
        n = RSDI_PROC_WENV - (int)o - 1 > 0
                ? MultiByteToWideChar(CP_UTF8, 0, add[k], -1, p->wenv + o, RSDI_PROC_WENV - (int)o - 1)
                : 0;
        if (n <= 0) r = RSD_ERR_CAPACITY;
        else o += (size_t)n;
    }
    if (r != RSD_OK) return r;
    if (o == 0) p->wenv[o++] = 0; /* an empty block is two NULs */
    p->wenv[o++] = 0;
    p->wenv_len = o;
    return RSD_OK;
}
#else
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
#endif

#if !defined(_WIN32)
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
   error goes down errfd, a close-on-exec pipe, on both paths: not through the memory
   a vfork child shares, because a vfork can be a fork in disguise (qemu-user runs
   CLONE_VM|CLONE_VFORK as a plain fork), and then the parent would never see it. */
RSDI_PRIVATE void rsdi_proc_child(const rsd_procs *p, const char *cwd, int nullfd, int outfd,
                                  char *const *envp, pid_t parent, int errfd) {
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
    (void)!write(errfd, &err, sizeof err);
    _exit(127);
}

/* Parent side after fork or vfork: the child's report on the pipe's read end rd (EOF:
   it exec'd). 0, or the child's errno with the child reaped. */
RSDI_PRIVATE int rsdi_proc_exec_report(int rd, pid_t pid) {
    int err = 0, st;
    ssize_t n;
    do n = read(rd, &err, sizeof err);
    while (n < 0 && errno == EINTR);
    close(rd);
    if (n != (ssize_t)sizeof err) return 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    return err ? err : ECHILD;
}

/* fork path: portable; the parent blocks on a close-on-exec pipe until exec. fork
   copies the parent's page tables: slow for a parent with a large heap (bench/). */
RSDI_PRIVATE int rsdi_proc_fork(rsd_procs *p, const char *cwd, int nullfd, int outfd,
                                char *const *envp, pid_t *out_pid) {
    int ep[2], err = 0;
    pid_t pid, parent = getpid();
    sigset_t all, old;
    if (rsdi_proc_pipe(ep) != 0) return errno ? errno : EMFILE;
    /* Block signals around fork so no host handler runs in the child before exec. */
    sigfillset(&all);
    (void)sigprocmask(SIG_SETMASK, &all, &old);
    pid = fork();
    if (pid == 0) rsdi_proc_child(p, cwd, nullfd, outfd, envp, parent, ep[1]);
    err = errno;
    (void)sigprocmask(SIG_SETMASK, &old, NULL);
    close(ep[1]);
    if (pid < 0) {
        close(ep[0]);
        return err ? err : EAGAIN;
    }
    (void)setpgid(pid, pid); /* the classic race fix; EACCES after exec is fine */
    err = rsdi_proc_exec_report(ep[0], pid); /* blocks until exec (EOF) or the report */
    if (err) return err;
    *out_pid = pid;
    return 0;
}

#ifdef RSDI_PROC_LINUX
/* vfork path (Linux default): the child borrows the parent's memory until execve,
   so the cost does not grow with the parent's heap, like glibc's posix_spawn
   (CLONE_VM | CLONE_VFORK), and the child can still call prctl. The calling thread
   is suspended until the child execs or exits; signals are blocked meanwhile so no
   host handler runs on the shared stack. By then the report pipe holds the child's
   errno or is at EOF, so reading it does not wait (under an emulated vfork it waits
   for the exec, as the fork path does). */
RSDI_PRIVATE int rsdi_proc_vfork(rsd_procs *p, const char *cwd, int nullfd, int outfd,
                                 char *const *envp, pid_t *out_pid) {
    int ep[2], err;
    pid_t pid, parent = getpid();
    sigset_t all, old;
    if (rsdi_proc_pipe(ep) != 0) return errno ? errno : EMFILE;
    sigfillset(&all);
    (void)sigprocmask(SIG_SETMASK, &all, &old);
    pid = vfork();
    if (pid == 0) rsdi_proc_child(p, cwd, nullfd, outfd, envp, parent, ep[1]);
    err = pid < 0 ? errno : 0;
    (void)sigprocmask(SIG_SETMASK, &old, NULL);
    close(ep[1]);
    if (pid < 0) {
        close(ep[0]);
        return err ? err : EAGAIN;
    }
    err = rsdi_proc_exec_report(ep[0], pid);
    if (err) return err;
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
#endif /* !_WIN32 */

/* Platform: starts p->path with p->argv (and the environment rsdi_proc_env built, when
   own_env) in cwd: stdin the null device, stdout and stderr one pipe whose read end
   the slot keeps, its own process group (Windows: its own job object too). Sets
   s->pid, s->pgid and the slot's handles. 0 or an errno value (nothing left running). */
#if defined(_WIN32)
/* The errno value of the Windows call `what` that just failed; its own code and name are
   kept in the slot for the error messages (rsd_proc_info.os_err). */
RSDI_PRIVATE int rsdi_proc_win_err(rsdi_proc_slot *s, const char *what) {
    DWORD w = GetLastError();
    s->os_err = (uint32_t)w;
    s->os_call = what;
    return rsdi_win_errno(w);
}
RSDI_PRIVATE int rsdi_proc_launch(rsd_procs *p, rsdi_proc_slot *s, const char *cwd, bool own_env) {
    SECURITY_ATTRIBUTES sa;
    STARTUPINFOEXW si;
    PROCESS_INFORMATION pi;
    HANDLE rd = NULL, wr = NULL, nul = INVALID_HANDLE_VALUE, job = NULL, inherit[2];
    char file[RSD_PROC_PATH_MAX];
    DWORD flags = CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP | CREATE_UNICODE_ENVIRONMENT;
    bool attrs = false;
    size_t n;
    int err = 0;
    n = rsdi_proc_win_cmdline(p->argv, p->cmd8, p->cmd8_cap);
    if (n >= p->cmd8_cap) return E2BIG;
    p->cmd8[n] = '\0';
    if (MultiByteToWideChar(CP_UTF8, 0, p->cmd8, -1, p->wcmd, RSDI_PROC_WCMD) <= 0) return E2BIG;
    /* CreateProcessW takes a relative program path from our directory, not the child's */
    if (!rsdi_proc_join(cwd, p->path, file, sizeof file) ||
        MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, file, -1, p->wpath, RSD_PROC_PATH_MAX) <= 0 ||
        (cwd && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, cwd, -1, p->wcwd, RSD_PROC_PATH_MAX) <= 0))
        return ENAMETOOLONG;
    sa.nLength = (DWORD)sizeof sa;
    sa.lpSecurityDescriptor = NULL;
    sa.bInheritHandle = TRUE;
    if (!CreatePipe(&rd, &wr, &sa, RSDI_PROC_PIPE_BYTES)) return rsdi_proc_win_err(s, "CreatePipe");
    (void)SetHandleInformation(rd, HANDLE_FLAG_INHERIT, 0);
    nul = CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &sa, OPEN_EXISTING, 0, NULL);
    if (nul == INVALID_HANDLE_VALUE) err = rsdi_proc_win_err(s, "CreateFileW(NUL)");
    if (!err && !(job = CreateJobObjectW(NULL, NULL))) err = rsdi_proc_win_err(s, "CreateJobObjectW");
    if (!err && !p->survive_parent) { /* children die with their parent: its job's last handle */
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION li;
        memset(&li, 0, sizeof li);
        li.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        if (!SetInformationJobObject(job, JobObjectExtendedLimitInformation, &li, (DWORD)sizeof li))
            err = rsdi_proc_win_err(s, "SetInformationJobObject");
    }
    if (err) goto out;
    memset(&si, 0, sizeof si);
    si.StartupInfo.cb = (DWORD)sizeof si.StartupInfo;
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = nul;
    si.StartupInfo.hStdOutput = wr;
    si.StartupInfo.hStdError = wr;
    /* only these two handles are inherited, not every inheritable handle of the host */
    inherit[0] = nul;
    inherit[1] = wr;
    if (p->attrs) {
        SIZE_T sz = (SIZE_T)p->attrs_size;
        LPPROC_THREAD_ATTRIBUTE_LIST al = (LPPROC_THREAD_ATTRIBUTE_LIST)p->attrs;
        if (InitializeProcThreadAttributeList(al, 1, 0, &sz)) {
            if (UpdateProcThreadAttribute(al, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, inherit,
                                          sizeof inherit, NULL, NULL)) {
                si.lpAttributeList = al;
                si.StartupInfo.cb = (DWORD)sizeof si;
                flags |= EXTENDED_STARTUPINFO_PRESENT;
            }
            attrs = true;
        }
    }
    /* Without a console of ours the child would open a console window of its own. */
    if (!GetConsoleWindow()) flags |= CREATE_NO_WINDOW;
    if (!CreateProcessW(p->wpath, p->wcmd, NULL, NULL, TRUE, flags, own_env ? p->wenv : NULL,
                        cwd ? p->wcwd : NULL, &si.StartupInfo, &pi)) {
        err = rsdi_proc_win_err(s, "CreateProcessW");
        goto out;
    }
    /* suspended until it is in its job, so whatever it starts is in the job too */
    if (!AssignProcessToJobObject(job, pi.hProcess)) {
        err = rsdi_proc_win_err(s, "AssignProcessToJobObject");
        (void)TerminateProcess(pi.hProcess, RSDI_PROC_KILL_CODE);
        (void)WaitForSingleObject(pi.hProcess, RSD_PROC_DESTROY_WAIT_MS);
        (void)CloseHandle(pi.hThread);
        (void)CloseHandle(pi.hProcess);
        goto out;
    }
    (void)ResumeThread(pi.hThread);
    (void)CloseHandle(pi.hThread);
    s->pid = (rsdi_pid_t)pi.dwProcessId;
    s->pgid = s->pid;
    s->proc_h = pi.hProcess;
    s->job_h = job;
    s->out_h = rd;
    job = NULL;
    rd = NULL;
out:
    if (attrs) DeleteProcThreadAttributeList((LPPROC_THREAD_ATTRIBUTE_LIST)p->attrs);
    if (rd) (void)CloseHandle(rd);
    if (wr) (void)CloseHandle(wr);
    if (nul != INVALID_HANDLE_VALUE) (void)CloseHandle(nul);
    if (job) (void)CloseHandle(job);
    return err;
}
#else
RSDI_PRIVATE int rsdi_proc_launch(rsd_procs *p, rsdi_proc_slot *s, const char *cwd, bool own_env) {
    extern char **environ;
    char *const *envp = own_env ? p->envp : environ;
    int err = 0, pipefd[2], nullfd;
    pid_t pid = 0;
    nullfd = rsdi_proc_fd_high(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (nullfd < 0) return errno ? errno : EMFILE;
    if (rsdi_proc_pipe(pipefd) != 0) err = errno ? errno : EMFILE;
    else {
        rsd_proc_spawn_method m = p->method;
#ifndef RSDI_HAVE_SPAWN_CHDIR
        if (cwd && m == RSD_PROC_SPAWN_POSIX) m = RSD_PROC_SPAWN_FORK;
#endif
#ifdef RSDI_PROC_LINUX
        if (m == RSD_PROC_SPAWN_VFORK)
            err = rsdi_proc_vfork(p, cwd, nullfd, pipefd[1], envp, &pid);
        else
#endif
        if (m == RSD_PROC_SPAWN_FORK)
            err = rsdi_proc_fork(p, cwd, nullfd, pipefd[1], envp, &pid);
        else
            err = rsdi_proc_posix_spawn(p, cwd, nullfd, pipefd[1], envp, &pid);
        close(pipefd[1]);
        if (err) close(pipefd[0]);
        else s->out_fd = pipefd[0];
    }
    close(nullfd);
    if (err) return err;
    (void)fcntl(s->out_fd, F_SETFL, fcntl(s->out_fd, F_GETFL) | O_NONBLOCK);
    s->pid = pid;
    s->pgid = getpgid(pid) == pid ? pid : 0; /* it leads its own group (set before exec) */
#if defined(RSDI_PROC_LINUX) && defined(SYS_pidfd_open)
    {
        long pfd = syscall(SYS_pidfd_open, (long)pid, 0L);
        s->pid_fd = pfd >= 0 ? rsdi_proc_fd_high((int)pfd) : -1;
        if (s->pid_fd >= 0) (void)fcntl(s->pid_fd, F_SETFD, FD_CLOEXEC);
    }
#endif
    return 0;
}
#endif

/* ---- slots, events -------------------------------------------------------- */
RSDI_PRIVATE rsdi_proc_slot *rsdi_proc_get(const rsd_procs *p, rsd_proc_h h) {
    uint32_t i = rsdi_handle_idx(h.id, RSDI_PROC_IDX_BITS), g = rsdi_handle_gen(h.id, RSDI_PROC_IDX_BITS);
    rsdi_proc_slot *s;
    if (!p || h.id == 0 || i >= (uint32_t)p->max_procs) return NULL;
    s = &p->slots[i];
    if (s->state == RSD_PROC_FREE || s->gen != g) return NULL;
    return s;
}

RSDI_PRIVATE rsd_proc_h rsdi_proc_handle(const rsd_procs *p, const rsdi_proc_slot *s) {
    rsd_proc_h h;
    h.id = rsdi_handle_make(s->gen, (uint32_t)(s - p->slots), RSDI_PROC_IDX_BITS);
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

/* The supervisor's clock moves on to now_ms (never back). */
RSDI_PRIVATE void rsdi_procs_clock(rsd_procs *p, uint64_t now_ms) {
    if (now_ms > p->now_ms) p->now_ms = now_ms;
}

/* Platform: signals the child's process group (the child leads it; once the leader is
   reaped the group id stays reserved while any member lives), else the child while not
   reaped. Windows: RSDI_SIGTERM is CTRL_BREAK_EVENT to its process group (it shares our
   console, if we have one), RSDI_SIGKILL TerminateJobObject (every process in its job).
   False when nothing could be sent. */
RSDI_PRIVATE bool rsdi_proc_signal(rsdi_proc_slot *s, int sig) {
    if (s->pid <= 0) return false;
#if defined(_WIN32)
    if (sig == RSDI_SIGKILL) {
        if (s->job_h && TerminateJobObject(s->job_h, RSDI_PROC_KILL_CODE)) return true;
        return !s->reaped && s->proc_h && TerminateProcess(s->proc_h, RSDI_PROC_KILL_CODE);
    }
    return !s->reaped && GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, (DWORD)s->pid) != 0;
#else
    if (s->pgid > 0 && kill(-s->pgid, sig) == 0) return true;
    return !s->reaped && kill(s->pid, sig) == 0;
#endif
}

/* Platform: does any process of the child's group (Windows: job) still exist (a
   wrapper's children)? */
RSDI_PRIVATE bool rsdi_proc_group_alive(const rsdi_proc_slot *s) {
#if defined(_WIN32)
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION ai;
    if (!s->job_h) return false;
    memset(&ai, 0, sizeof ai);
    if (!QueryInformationJobObject(s->job_h, JobObjectBasicAccountingInformation, &ai,
                                   (DWORD)sizeof ai, NULL))
        return false;
    return ai.ActiveProcesses > 0;
#else
    return s->pgid > 0 && (kill(-s->pgid, 0) == 0 || errno == EPERM);
#endif
}

/* Platform: reaps members of the group that are our children (orphans re-parented to a
   child subreaper host) other than the leader; returns true when it reaped the leader,
   its status in *st. waitpid(-pgid) only: never another child of the host. Windows:
   nothing to reap (a job's members need no reaping); false. */
RSDI_PRIVATE bool rsdi_proc_reap_group(rsdi_proc_slot *s, int *st) {
#if defined(_WIN32)
    (void)s;
    (void)st;
    return false;
#else
    pid_t r;
    int x = 0;
    if (s->pgid <= 0) return false;
    for (;;) {
        do r = waitpid(-s->pgid, &x, WNOHANG);
        while (r < 0 && errno == EINTR);
        if (r <= 0) return false;
        if (r == s->pid && !s->reaped) {
            *st = x;
            return true;
        }
    }
#endif
}

/* Platform: closes the output pipe and the exit watch (pidfd; Windows: the process
   handle). The group (Windows: the job handle) stays until rsdi_proc_forget. */
RSDI_PRIVATE void rsdi_proc_close_fds(rsdi_proc_slot *s) {
#if defined(_WIN32)
    if (s->out_h) (void)CloseHandle(s->out_h);
    if (s->proc_h) (void)CloseHandle(s->proc_h);
    s->out_h = s->proc_h = NULL;
#else
    if (s->out_fd >= 0) close(s->out_fd);
    if (s->pid_fd >= 0) close(s->pid_fd);
#endif
    s->out_fd = s->pid_fd = -1;
}

/* Platform: the group is gone or given up (Windows: close the job handle). */
RSDI_PRIVATE void rsdi_proc_forget(rsdi_proc_slot *s) {
#if defined(_WIN32)
    if (s->job_h) (void)CloseHandle(s->job_h); /* kill-on-close takes what is left */
    s->job_h = NULL;
#endif
    s->pid = 0;
    s->pgid = 0;
}

/* Platform: the output pipe is open. */
RSDI_PRIVATE bool rsdi_proc_out_open(const rsdi_proc_slot *s) {
#if defined(_WIN32)
    return s->out_h != NULL;
#else
    return s->out_fd >= 0;
#endif
}

/* Platform: reads what the output pipe holds now, never waiting: bytes, -1 = nothing
   now, 0 = end of output (EOF or an error). Windows: PeekNamedPipe, then a ReadFile of
   no more than it said is there. */
RSDI_PRIVATE long rsdi_proc_read(rsdi_proc_slot *s, char *buf, size_t n) {
#if defined(_WIN32)
    DWORD avail = 0, got = 0;
    if (!PeekNamedPipe(s->out_h, NULL, 0, NULL, &avail, NULL)) return 0; /* broken: EOF */
    if (avail == 0) return -1;
    if (avail > n) avail = (DWORD)n;
    if (!ReadFile(s->out_h, buf, avail, &got, NULL)) return 0;
    return got ? (long)got : -1;
#else
    ssize_t r;
    do r = read(s->out_fd, buf, n);
    while (r < 0 && errno == EINTR);
    if (r > 0) return (long)r;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
    return 0;
#endif
}

/* Platform: the exit status st (known = it was obtained) into the slot. Windows: st is
   GetExitCodeProcess's code, our own TerminateJobObject's code reads as SIGKILL. */
RSDI_PRIVATE void rsdi_proc_status(rsdi_proc_slot *s, int st, bool known) {
    s->exit_code = -1;
    s->term_signal = 0;
    if (!known) return;
#if defined(_WIN32)
    if (s->killed && (DWORD)st == RSDI_PROC_KILL_CODE) s->term_signal = RSDI_SIGKILL;
    else s->exit_code = st;
#else
    if (WIFEXITED(st)) s->exit_code = WEXITSTATUS(st);
    else if (WIFSIGNALED(st)) {
        s->term_signal = WTERMSIG(st);
#ifdef WCOREDUMP
        s->core_dumped = WCOREDUMP(st) != 0;
#endif
    }
#endif
}

/* ---- output ------------------------------------------------------------------ */
RSDI_PRIVATE void rsdi_proc_log_line(rsd_procs *p, rsdi_proc_slot *s) {
    size_t n = s->line_len, i;
    while (n && (s->line[n - 1] == '\r' || s->line[n - 1] == ' ')) n--;
    s->line[n] = '\0';
    for (i = 0; i < n; i++)
        if ((unsigned char)s->line[i] < 0x20 || s->line[i] == 0x7f) s->line[i] = '?';
    n = rsdi_text_scrub(s->line, n, s->args, s->args_len);
    s->line[n] = '\0';
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

/* Reads what the pipe holds (at most RSD_PROC_DRAIN_STEP_BYTES); the bytes read. */
RSDI_PRIVATE size_t rsdi_proc_drain(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms) {
    char buf[4096];
    size_t total = 0;
    while (rsdi_proc_out_open(s) && total < RSD_PROC_DRAIN_STEP_BYTES) {
        long n = rsdi_proc_read(s, buf, sizeof buf);
        if (n > 0) {
            rsdi_proc_take(p, s, buf, (size_t)n);
            total += (size_t)n;
            continue;
        }
        if (n < 0) break;
        /* EOF (or a read error): the child closed its output, usually by exiting. */
#if defined(_WIN32)
        (void)CloseHandle(s->out_h);
        s->out_h = NULL;
#else
        close(s->out_fd);
        s->out_fd = -1;
#endif
        s->eof = true;
        if (p->log_output && s->line_len) rsdi_proc_log_line(p, s);
        s->recheck_iv = 1;
        s->recheck_ms = now_ms + 1;
        break;
    }
    return total;
}

/* ---- reaping and timers -------------------------------------------------------- */
RSDI_PRIVATE void rsdi_proc_finish(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms);
RSDI_PRIVATE void rsdi_proc_reaped(rsd_procs *p, rsdi_proc_slot *s, int st, bool known,
                                   uint64_t now_ms) {
    bool asked = s->stop_requested || s->timed_out;
    (void)rsdi_proc_drain(p, s, now_ms); /* what it wrote just before exiting */
    rsdi_proc_close_fds(s);
    rsdi_proc_status(s, st, known);
    s->end_ms = now_ms;
    s->reaped = true;
    s->ev_asked = asked;
    rsdi_logf(&p->logger, asked ? RSD_LOG_INFO : RSD_LOG_ERROR,
              asked ? RSD_LOGITEM_PROC_STOPPED : RSD_LOGITEM_PROC_EXITED, NULL,
              "%s[%ld]: %s with code %d signal %d%s after %llu ms", s->name, (long)s->pid,
              asked ? "stopped" : "exited", s->exit_code, s->term_signal,
              s->killed ? " (SIGKILL)" : "", (unsigned long long)(now_ms - s->spawn_ms));
    if (rsdi_proc_group_alive(s)) {
        /* A wrapper's children outlive it: the event waits until the group is gone (its
           port and memory are free then). Unasked, nothing can use them: SIGKILL now. */
        if (!asked) {
            (void)rsdi_proc_signal(s, RSDI_SIGKILL);
            s->state = RSD_PROC_KILLING;
            s->stuck_at_ms = now_ms + p->kill_wait_ms;
        }
        rsdi_logf(&p->logger, RSD_LOG_WARN, RSD_LOGITEM_PROC_KILL, NULL,
                  "%s[%ld]: its process group outlives it; %s", s->name, (long)s->pid,
                  asked ? "waiting for it (SIGKILL at the end of the grace period)" : "SIGKILL");
        s->recheck_iv = 1;
        s->recheck_ms = now_ms + 1;
        return;
    }
    rsdi_proc_finish(p, s, now_ms);
}

/* The terminal event of a reaped child whose group is gone. */
RSDI_PRIVATE void rsdi_proc_finish(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms) {
    s->state = RSD_PROC_EXITED;
    rsdi_proc_event(p, s, s->ev_asked ? RSD_PROC_EV_STOPPED : RSD_PROC_EV_EXITED, now_ms);
    rsdi_proc_forget(s);
}

/* Platform: one waitpid(pid, WNOHANG) (never waitpid(-1): the host's other children
   are not ours). Windows: a zero-timeout wait on the process handle. */
RSDI_PRIVATE bool rsdi_proc_try_reap(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms) {
#if defined(_WIN32)
    DWORD code = 0;
    bool known;
    if (!s->proc_h || WaitForSingleObject(s->proc_h, 0) != WAIT_OBJECT_0) return false;
    known = GetExitCodeProcess(s->proc_h, &code) != 0;
    rsdi_proc_reaped(p, s, (int)code, known, now_ms);
    return true;
#else
    int st = 0;
    pid_t r;
    if (rsdi_proc_reap_group(s, &st)) { /* the leader, found among its group */
        rsdi_proc_reaped(p, s, st, true, now_ms);
        return true;
    }
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
#endif
}

RSDI_PRIVATE void rsdi_proc_begin_kill(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms) {
    (void)rsdi_proc_signal(s, RSDI_SIGKILL);
    s->killed = true;
    s->state = RSD_PROC_KILLING;
    s->stuck_at_ms = now_ms + p->kill_wait_ms;
    rsdi_logf(&p->logger, RSD_LOG_WARN, RSD_LOGITEM_PROC_KILL, NULL, "%s[%ld]: SIGKILL",
              s->name, (long)s->pid);
}

/* SIGTERM now, SIGKILL at kill_at_ms (now + term_grace_ms, or a held stop's end of grace). */
RSDI_PRIVATE void rsdi_proc_begin_stop(rsd_procs *p, rsdi_proc_slot *s, uint64_t now_ms, uint64_t kill_at_ms) {
    s->stop_requested = true;
#if defined(_WIN32)
    if (!rsdi_proc_signal(s, RSDI_SIGTERM)) {
        /* no console shared with it (a GUI host, or none at all): nothing graceful to send */
        rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_PROC_STOP, NULL,
                  "%s[%ld]: no console to send CTRL_BREAK through; terminating it", s->name,
                  (long)s->pid);
        rsdi_proc_begin_kill(p, s, now_ms);
        return;
    }
#else
    (void)rsdi_proc_signal(s, RSDI_SIGTERM);
#endif
    s->state = RSD_PROC_STOPPING;
    s->kill_at_ms = kill_at_ms > now_ms ? kill_at_ms : now_ms;
    rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_PROC_STOP, NULL,
              "%s[%ld]: SIGTERM, SIGKILL in %llu ms", s->name, (long)s->pid,
              (unsigned long long)(s->kill_at_ms - now_ms));
}

/* rsd_procs_create's block: its parts' bytes. */
typedef struct rsdi_procs_sizes {
    size_t total, slots, ev, argv, envp, attrs, cmd8;
} rsdi_procs_sizes;

/* rsd_procs_create's checks and sizes: fills in d's defaults and *z; RSD_OK, or RSD_ERR_ARG
   for a desc create refuses (said to d's logger). */
RSDI_PRIVATE int rsdi_procs_plan(rsd_procs_desc *d, rsdi_procs_sizes *z) {
    static const rsdi_dflt t[] = {
        RSDI_DFLT(rsd_procs_desc, max_procs, RSD_PROCS_DEFAULT),
        RSDI_DFLT(rsd_procs_desc, ring_bytes, RSD_PROC_RING_DEFAULT),
        RSDI_DFLT(rsd_procs_desc, arg_bytes, RSD_PROC_ARG_BYTES_DEFAULT),
        RSDI_DFLT(rsd_procs_desc, term_grace_ms, RSD_PROC_TERM_GRACE_DEFAULT_MS),
        RSDI_DFLT(rsd_procs_desc, start_deadline_ms, RSD_PROC_START_DEADLINE_DEFAULT_MS),
        RSDI_DFLT(rsd_procs_desc, kill_wait_ms, RSD_PROC_KILL_WAIT_DEFAULT_MS),
        RSDI_DFLT(rsd_procs_desc, probe_first_ms, RSD_PROC_PROBE_FIRST_DEFAULT_MS),
        RSDI_DFLT(rsd_procs_desc, probe_max_ms, RSD_PROC_PROBE_MAX_DEFAULT_MS)};
    size_t per;
    memset(z, 0, sizeof *z);
    if (rsdi_allocator_check(&d->allocator) != RSD_OK) {
        rsdi_log(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOCATOR_HALF, "procs: half an allocator",
                 RSDI_WHERE);
        return RSD_ERR_ARG;
    }
    rsdi_defaults(d, t, sizeof t / sizeof t[0]);
    if (d->ring_bytes < RSD_PROC_RING_MIN) d->ring_bytes = RSD_PROC_RING_MIN;
    if (d->probe_max_ms < d->probe_first_ms) d->probe_max_ms = d->probe_first_ms;
    if (d->max_procs < 1 || d->max_procs > RSD_PROCS_MAX || d->ring_bytes > RSD_PROC_RING_MAX ||
        d->arg_bytes > RSD_PROC_ARG_BYTES_MAX || (int)d->spawn < 0 ||
        (int)d->spawn >= (int)RSD_PROC_SPAWN_NUM) {
        rsdi_log(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_BAD_DESC,
                 "procs: desc value out of range", RSDI_WHERE);
        return RSD_ERR_ARG;
    }
#ifdef RSDI_PROC_LINUX
    if (d->spawn == RSD_PROC_SPAWN_POSIX && !d->survive_parent) {
        rsdi_log(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_BAD_DESC,
                 "procs: posix_spawn cannot set PDEATHSIG; set survive_parent or use FORK",
                 RSDI_WHERE);
        return RSD_ERR_ARG;
    }
#endif
    /* One block: struct, slots, events, argv, envp, then per slot ring + args. */
    per = (size_t)d->ring_bytes + (size_t)d->arg_bytes;
    z->slots = sizeof(rsdi_proc_slot) * (size_t)d->max_procs;
    z->ev = sizeof(rsd_proc_event) * (size_t)d->max_procs * 4;
    z->argv = sizeof(char *) * (RSD_PROC_MAX_ARGS + 1);
    z->envp = sizeof(char *) * (RSD_PROC_MAX_ENV + 1);
    z->total = sizeof(rsd_procs) + z->slots + z->ev + z->argv + z->envp + per * (size_t)d->max_procs + 64;
#if defined(_WIN32)
    /* the command line (quoted UTF-8, then UTF-16), the environment block, the
       attribute list that limits what the child inherits */
    {
        SIZE_T asz = 0;
        (void)InitializeProcThreadAttributeList(NULL, 1, 0, &asz);
        z->attrs = ((size_t)asz + 15) & ~(size_t)15;
        z->cmd8 = 2 * (size_t)d->arg_bytes + 3 * (RSD_PROC_MAX_ARGS + 1) + 16;
        z->total += z->attrs + sizeof(wchar_t) * (RSDI_PROC_WCMD + RSDI_PROC_WENV) + z->cmd8 + 64;
    }
#endif
    return RSD_OK;
}

/* ---- public ------------------------------------------------------------------- */
RSD_API size_t rsd_procs_footprint(const rsd_procs_desc *desc) {
    rsd_procs_desc d;
    rsdi_procs_sizes z;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    memset(&d.logger, 0, sizeof d.logger); /* a measure, not a create: nothing to say */
    return rsdi_procs_plan(&d, &z) == RSD_OK ? z.total : 0;
}

RSD_API rsd_procs *rsd_procs_create(const rsd_procs_desc *desc) {
    rsd_procs_desc d;
    rsd_procs *p;
    rsdi_procs_sizes z;
    size_t off;
    int i;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (rsdi_procs_plan(&d, &z) != RSD_OK) return NULL;
#if defined(_WIN32)
    if (rsdi_net_up() != 0) { /* the free-port socket */
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_BAD_DESC, "procs: WSAStartup failed",
                 RSDI_WHERE);
        return NULL;
    }
#endif
    p = (rsd_procs *)rsdi_malloc(&d.allocator, z.total);
    if (!p) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, "procs: allocation failed",
                 RSDI_WHERE);
#if defined(_WIN32)
        rsdi_net_down();
#endif
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
    off += (z.slots + 15) & ~(size_t)15;
    p->events = (rsd_proc_event *)(void *)((char *)p + off);
    p->ev_cap = (uint32_t)d.max_procs * 4;
    off += (z.ev + 15) & ~(size_t)15;
    p->argv = (const char **)(void *)((char *)p + off);
    off += z.argv;
    p->envp = (char **)(void *)((char *)p + off);
    off += z.envp;
    for (i = 0; i < d.max_procs; i++) {
        rsdi_proc_slot *s = &p->slots[i];
        memset(s, 0, sizeof *s);
        s->out_fd = s->pid_fd = -1;
        s->ring = (char *)p + off;
        off += d.ring_bytes;
        s->args = (char *)p + off;
        off += d.arg_bytes;
    }
#if defined(_WIN32)
    off = (off + 15) & ~(size_t)15;
    p->wcmd = (wchar_t *)(void *)((char *)p + off);
    off += sizeof(wchar_t) * RSDI_PROC_WCMD;
    p->wenv = (wchar_t *)(void *)((char *)p + off);
    off += sizeof(wchar_t) * RSDI_PROC_WENV;
    p->attrs = z.attrs ? (char *)p + off : NULL;
    p->attrs_size = z.attrs;
    off += z.attrs;
    p->cmd8 = (char *)p + off;
    p->cmd8_cap = z.cmd8;
#endif
    return p;
}

/* Platform: SIGKILL the child's group (Windows: terminate its job) and wait, bounded by
   RSD_PROC_DESTROY_WAIT_MS, until it is reaped and its group is gone. */
RSDI_PRIVATE void rsdi_proc_destroy_one(rsd_procs *p, rsdi_proc_slot *s) {
#if defined(_WIN32)
    (void)rsdi_proc_signal(s, RSDI_SIGKILL); /* the whole job */
    if (s->proc_h && WaitForSingleObject(s->proc_h, RSD_PROC_DESTROY_WAIT_MS) != WAIT_OBJECT_0)
        rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_STUCK, NULL,
                  "%s[%ld]: not gone after TerminateJobObject; left behind", s->name, (long)s->pid);
#else
    int st, waited = 0;
    pid_t r;
    (void)rsdi_proc_signal(s, RSDI_SIGKILL); /* the whole group */
    for (;;) {
        if (rsdi_proc_reap_group(s, &st)) s->reaped = true;
        if (!s->reaped) {
            r = waitpid(s->pid, &st, WNOHANG);
            if (r == s->pid || (r < 0 && errno != EINTR)) s->reaped = true;
        }
        if (s->reaped && !rsdi_proc_group_alive(s)) break;
        if (waited >= RSD_PROC_DESTROY_WAIT_MS) {
            rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_STUCK, NULL,
                      "%s[%ld]: not reaped after SIGKILL; left behind", s->name, (long)s->pid);
            break;
        }
        if (!s->reaped && s->pid_fd >= 0) {
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
#endif
}

RSD_API void rsd_procs_destroy(rsd_procs *p) {
    int i;
    if (!p) return;
    for (i = 0; i < p->max_procs; i++) {
        rsdi_proc_slot *s = &p->slots[i];
        if (s->pid > 0) rsdi_proc_destroy_one(p, s);
        rsdi_proc_close_fds(s);
        rsdi_proc_forget(s);
    }
    rsdi_free(&p->alloc, p);
#if defined(_WIN32)
    rsdi_net_down();
#endif
}

RSD_API int rsd_procs_spawn(rsd_procs *p, const rsd_proc_spec *spec, uint64_t now_ms,
                            rsd_proc_h *out) {
    rsdi_proc_slot *s = NULL;
    rsdi_proc_out o;
    bool own_env = false;
    int i, r, err = 0;
    uint16_t port;
    if (out) out->id = 0;
    if (!p || !spec || !out) return RSD_ERR_ARG;
    rsdi_procs_clock(p, now_ms);
    for (i = 0; i < p->max_procs; i++)
        if (p->slots[i].state == RSD_PROC_FREE) {
            s = &p->slots[i];
            break;
        }
    if (!s) return RSD_ERR_CAPACITY;
    /* a free port, never one another live child of ours was given. */
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
    if (spec->env) {
        r = rsdi_proc_env(p, spec->env);
        if (r < 0) return r;
        own_env = true;
    }
    /* The slot is now taken, whatever happens to the launch. */
    {
        uint32_t gen = rsdi_handle_next_gen(s->gen, RSDI_PROC_IDX_BITS);
        char *ring = s->ring, *args = s->args;
        memset(s, 0, sizeof *s);
        s->gen = gen;
        s->ring = ring;
        s->args = args;
    }
    s->out_fd = s->pid_fd = -1;
#if defined(_WIN32)
    s->out_h = s->proc_h = s->job_h = NULL;
#endif
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
        if (!nm) src = rsdi_proc_base(src);
        n = strlen(src);
        if (n > RSD_PROC_NAME_MAX - 1) n = RSD_PROC_NAME_MAX - 1;
        memcpy(s->name, src, n);
        s->name[n] = '\0';
    }
    *out = rsdi_proc_handle(p, s);
    err = rsdi_proc_resolve(p, rsdi_proc_exe(spec), rsdi_proc_path_var(spec->env), spec->cwd);
    if (!err) err = rsdi_proc_launch(p, s, spec->cwd, own_env);
    if (err) {
        char os[64] = "";
        s->err = err;
        s->state = RSD_PROC_FAILED;
        s->end_ms = now_ms;
        if (s->os_err)
            (void)RSD_SNPRINTF(os, sizeof os, " (%s: Windows error %lu)", s->os_call ? s->os_call : "?",
                               (unsigned long)s->os_err);
        rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_SPAWN_FAILED, NULL, "%s: could not launch %s: %s%s",
                  s->name, s->args, strerror(err), os);
        rsdi_proc_event(p, s, RSD_PROC_EV_SPAWN_FAILED, now_ms);
        return RSD_ERR_SPAWN;
    }
    s->state = RSD_PROC_STARTING;
    s->start_deadline_ms =
        now_ms + (spec->start_deadline_ms ? spec->start_deadline_ms : p->start_deadline_ms);
    s->probe_ms = p->probe_first_ms;
    s->next_probe_ms = now_ms + p->probe_first_ms;
#if defined(_WIN32)
    s->recheck_iv = RSDI_PROC_POLL_MIN_MS; /* nothing to poll(): a timer */
#else
    s->recheck_iv = RSD_PROC_REAP_POLL_MS;
#endif
    s->recheck_ms = now_ms + s->recheck_iv;
    rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_PROC_SPAWN, NULL, "%s[%ld]: port %u: %s",
              s->name, (long)s->pid, (unsigned)port, s->args);
    return RSD_OK;
}

RSD_API int rsd_procs_mark_ready(rsd_procs *p, rsd_proc_h h, uint64_t now_ms) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!s) return RSD_ERR_PROC_STALE;
    rsdi_procs_clock(p, now_ms);
    if (s->state != RSD_PROC_STARTING) return RSD_ERR_STATE;
    s->state = RSD_PROC_READY;
    s->was_ready = true;
    s->ready_ms = now_ms;
    rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_PROC_READY, NULL, "%s[%ld]: ready after %llu ms",
              s->name, (long)s->pid, (unsigned long long)(now_ms - s->spawn_ms));
    return RSD_OK;
}

RSD_API int rsd_procs_stop(rsd_procs *p, rsd_proc_h h, uint64_t now_ms) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!s) return RSD_ERR_PROC_STALE;
    rsdi_procs_clock(p, now_ms);
    s->stop_requested = true;
    if (s->state == RSD_PROC_STARTING || s->state == RSD_PROC_READY)
        rsdi_proc_begin_stop(p, s, now_ms, now_ms + p->term_grace_ms);
    return RSD_OK;
}

/* rsd_procs_stop whose SIGKILL comes at kill_by_ms at the latest (at once when that has
   passed): a stop that was held (rsd_fleet_desc.stop_hold_ms) keeps to its grace. */
RSDI_PRIVATE int rsdi_procs_stop_by(rsd_procs *p, rsd_proc_h h, uint64_t now_ms, uint64_t kill_by_ms) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    uint64_t at = now_ms + p->term_grace_ms;
    if (!s) return RSD_ERR_PROC_STALE;
    s->stop_requested = true;
    if (s->state == RSD_PROC_STARTING || s->state == RSD_PROC_READY)
        rsdi_proc_begin_stop(p, s, now_ms, kill_by_ms < at ? kill_by_ms : at);
    return RSD_OK;
}

RSD_API int rsd_procs_kill(rsd_procs *p, rsd_proc_h h, uint64_t now_ms) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!s) return RSD_ERR_PROC_STALE;
    rsdi_procs_clock(p, now_ms);
    s->stop_requested = true;
    if (rsdi_proc_running(s) && s->state != RSD_PROC_KILLING) rsdi_proc_begin_kill(p, s, now_ms);
    return RSD_OK;
}

RSD_API int rsd_procs_forget(rsd_procs *p, rsd_proc_h h) {
    rsdi_proc_slot *s = rsdi_proc_get(p, h);
    if (!s) return RSD_ERR_PROC_STALE;
    if (s->state != RSD_PROC_EXITED && s->state != RSD_PROC_FAILED) return RSD_ERR_STATE;
    s->state = RSD_PROC_FREE;
    return RSD_OK;
}

/* Events waiting to be pulled: the queue, and one PROBE per STARTING process that asked. */
RSDI_PRIVATE int rsdi_procs_waiting(const rsd_procs *p) {
    int i, n = (int)p->ev_count;
    for (i = 0; i < p->max_procs; i++)
        n += p->slots[i].probe_pending && p->slots[i].state == RSD_PROC_STARTING;
    return n;
}

RSD_API uint64_t rsd_procs_next_deadline(const rsd_procs *p) {
    uint64_t d = RSD_NO_DEADLINE;
    int i;
    if (!p) return d;
    if (rsdi_procs_waiting(p) > 0) return 0;
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

#if !defined(_WIN32)
/* Which running children have output (bit 0 of ready[i]) or have exited (bit 1): one
   poll with no wait over every pipe and pidfd, instead of a read and two waitpids per
   child on every step. A child without a pidfd, or a failed poll, reads as both. */
RSDI_PRIVATE void rsdi_procs_ready(const rsd_procs *p, unsigned char *ready) {
    struct pollfd pf[2 * RSD_PROCS_MAX];
    int owner[2 * RSD_PROCS_MAX], i, n = 0; /* pf[k] is slot owner[k]'s pipe or pidfd */
    for (i = 0; i < p->max_procs; i++) {
        const rsdi_proc_slot *s = &p->slots[i];
        ready[i] = 0;
        if (!rsdi_proc_running(s) || s->reaped) continue;
        if (s->pid_fd < 0) ready[i] = 2;
        if (s->out_fd >= 0) {
            pf[n].fd = s->out_fd;
            pf[n].events = POLLIN;
            pf[n].revents = 0;
            owner[n++] = i;
        }
        if (s->pid_fd >= 0) {
            pf[n].fd = s->pid_fd;
            pf[n].events = POLLIN;
            pf[n].revents = 0;
            owner[n++] = i;
        }
    }
    if (n && poll(pf, (nfds_t)n, 0) < 0) {
        for (i = 0; i < p->max_procs; i++) ready[i] = 3;
        return;
    }
    for (i = 0; i < n; i++)
        if (pf[i].revents) ready[owner[i]] |= pf[i].fd == p->slots[owner[i]].out_fd ? 1 : 2;
}
#endif

RSD_API int rsd_procs_step(rsd_procs *p, uint64_t now_ms) {
    int i;
    unsigned char ready[RSD_PROCS_MAX];
    if (!p) return RSD_ERR_ARG;
    rsdi_procs_clock(p, now_ms);
#if defined(_WIN32)
    memset(ready, 3, sizeof ready); /* no poll on a pipe or a process handle: try each */
#else
    rsdi_procs_ready(p, ready);
#endif
    for (i = 0; i < p->max_procs; i++) {
        rsdi_proc_slot *s = &p->slots[i];
        int st = 0;
        size_t got;
        if (!rsdi_proc_running(s)) continue;
        if (s->reaped) { /* the leader is gone; the rest of its group is not yet */
            (void)rsdi_proc_reap_group(s, &st);
            if (!rsdi_proc_group_alive(s)) {
                rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_PROC_STOPPED, NULL,
                          "%s[%ld]: process group gone %llu ms after it", s->name, (long)s->pid,
                          (unsigned long long)(now_ms - s->end_ms));
                rsdi_proc_finish(p, s, now_ms);
                continue;
            }
            if (s->state == RSD_PROC_STOPPING && now_ms >= s->kill_at_ms) rsdi_proc_begin_kill(p, s, now_ms);
            if (s->state == RSD_PROC_KILLING && now_ms >= s->stuck_at_ms) {
                rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_STUCK, NULL,
                          "%s[%ld]: members of its process group survive SIGKILL; left behind",
                          s->name, (long)s->pid);
                rsdi_proc_finish(p, s, now_ms);
                continue;
            }
            if (now_ms >= s->recheck_ms) {
                s->recheck_iv *= 2;
                if (s->recheck_iv > RSDI_PROC_GROUP_POLL_MS) s->recheck_iv = RSDI_PROC_GROUP_POLL_MS;
                s->recheck_ms = now_ms + s->recheck_iv;
            }
            continue;
        }
        got = ready[i] & 1 ? rsdi_proc_drain(p, s, now_ms) : 0;
        /* exited (pidfd), or its slow recheck is due (an orphaned group member to reap) */
        if ((ready[i] & 2 || now_ms >= s->recheck_ms) && rsdi_proc_try_reap(p, s, now_ms)) continue;
#if defined(_WIN32)
        /* no pipe or process handle the host can poll: 10 ms after output, doubling to
           100 ms while it is quiet (1, 2, 4 ... ms once the pipe closed) */
        if (got && !s->eof) {
            s->recheck_iv = RSDI_PROC_POLL_MIN_MS;
            s->recheck_ms = now_ms + s->recheck_iv;
        } else if (now_ms >= s->recheck_ms) {
            s->recheck_iv *= 2;
            if (s->recheck_iv > RSDI_PROC_POLL_MAX_MS) s->recheck_iv = RSDI_PROC_POLL_MAX_MS;
            s->recheck_ms = now_ms + s->recheck_iv;
        }
#else
        (void)got;
        if (now_ms >= s->recheck_ms) {
            if (s->eof) {  /* probably exiting: 1, 2, 4 ... ms, back to the slow poll */
                s->recheck_iv *= 2;
                if (s->recheck_iv > (uint32_t)RSD_PROC_REAP_POLL_MS)
                    s->recheck_iv = (uint32_t)RSD_PROC_REAP_POLL_MS;
            }
            s->recheck_ms = now_ms + s->recheck_iv;
        }
#endif
        if (s->state == RSD_PROC_STARTING && now_ms >= s->start_deadline_ms) {
            s->timed_out = true;
            rsdi_logf(&p->logger, RSD_LOG_ERROR, RSD_LOGITEM_PROC_START_TIMEOUT, NULL,
                      "%s[%ld]: not ready within %llu ms; stopping", s->name, (long)s->pid,
                      (unsigned long long)(now_ms - s->spawn_ms));
            rsdi_proc_event(p, s, RSD_PROC_EV_START_TIMEOUT, now_ms);
            rsdi_proc_begin_stop(p, s, now_ms, now_ms + p->term_grace_ms);
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
    return rsdi_procs_waiting(p);
}

RSD_API int rsd_procs_pollfds(const rsd_procs *p, rsd_pollfd *out, int cap) {
    int i, n = 0;
    if (!p || cap < 0 || (!out && cap > 0)) return RSD_ERR_ARG;
    for (i = 0; i < p->max_procs; i++) {
        const rsdi_proc_slot *s = &p->slots[i];
        int k, fd[2];
        if (!rsdi_proc_running(s)) continue;
        fd[0] = s->out_fd;
        fd[1] = s->pid_fd;
        for (k = 0; k < 2; k++) {
            if (fd[k] < 0) continue;
            if (n < cap) {
                out[n].fd = fd[k];
                out[n].events = RSD_POLLIN;
                out[n].revents = 0;
            }
            n++;
        }
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

RSD_API int rsd_procs_query_proc(const rsd_procs *p, rsd_proc_h h, rsd_proc_info *info) {
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
        uint64_t end = rsdi_proc_running(s) ? p->now_ms : s->end_ms;
        info->uptime_ms = end > s->spawn_ms ? end - s->spawn_ms : 0;
    }
    info->start_deadline_ms = s->start_deadline_ms;
    info->exit_code = s->exit_code;
    info->term_signal = s->term_signal;
    info->core_dumped = s->core_dumped;
    info->err = s->err;
    info->os_err = s->os_err;
    info->os_call = s->os_err ? s->os_call : NULL;
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

RSD_API void rsd_procs_query(const rsd_procs *p, rsd_procs_info *info) {
    int i;
    if (!info) return;
    memset(info, 0, sizeof *info);
    if (!p) return;
    info->max_procs = p->max_procs;
    for (i = 0; i < p->max_procs; i++) {
        rsd_proc_state st = p->slots[i].state;
        info->live += rsdi_proc_running(&p->slots[i]);
        info->starting += st == RSD_PROC_STARTING;
        info->ready += st == RSD_PROC_READY;
        info->stopping += st == RSD_PROC_STOPPING || st == RSD_PROC_KILLING;
        info->exited += st == RSD_PROC_EXITED || st == RSD_PROC_FAILED;
    }
    info->events_waiting = rsdi_procs_waiting(p);
    info->events_dropped = p->events_dropped;
    info->now_ms = p->now_ms;
}

RSD_API int rsd_procs_tail(const rsd_procs *p, rsd_proc_h h, int max_lines, char *buf, size_t cap) {
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
    /* Fit into cap - 1 bytes, keeping the end; start at a line boundary if possible (s2
       itself when a line starts there: the byte before it is a newline). */
    if (end - start > cap - 1) {
        uint64_t s2 = end - (cap - 1), j;
        for (j = s2 - 1; j < end; j++)
            if (RSDI_RING_AT(j) == '\n') break;
        start = (j + 1 < end) ? j + 1 : s2;
    }
    n = (size_t)(end - start);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)RSDI_RING_AT(start + i);
        buf[i] = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : (char)c;
    }
#undef RSDI_RING_AT
    n = rsdi_text_scrub(buf, n, s->args, s->args_len); /* a child echoing --api-key VALUE */
    buf[n] = '\0';
    return (int)n;
}

RSD_API int rsd_procs_command(const rsd_procs *p, rsd_proc_h h, char *buf, size_t cap) {
    const rsdi_proc_slot *s = rsdi_proc_get(p, h);
    const char *prev = NULL;
    size_t off = 0;
    rsdi_sb b;
    int a;
    if (!buf || cap == 0) return RSD_ERR_ARG;
    buf[0] = '\0';
    if (!s) return RSD_ERR_PROC_STALE;
    rsdi_sb_init(&b, buf, cap);
    for (a = 0; a < s->argc; a++) {
        const char *arg = s->args + off;
        size_t l = strlen(arg);
        bool q = l == 0 || strpbrk(arg, " \t\n'\"\\$`*?[]{}()<>|&;#~") != NULL;
        off += l + 1;
        if (a) rsdi_sb_c(&b, " ");
        if (q) rsdi_sb_c(&b, "'");
        b.sq = q;
        rsdi_sb_redact(&b, prev, arg); /* secrets as *** (rsd_arg_redact) */
        b.sq = false;
        if (q) rsdi_sb_c(&b, "'");
        prev = arg;
    }
    (void)rsdi_sb_end(&b);
    return (int)(b.len < cap ? b.len : cap - 1);
}

RSD_API int rsd_procs_live(const rsd_procs *p, rsd_proc_h *out, int cap) {
    int i, n = 0;
    if (!p || (!out && cap > 0)) return RSD_ERR_ARG;
    for (i = 0; i < p->max_procs; i++)
        if (rsdi_proc_running(&p->slots[i]) && n < cap) out[n++] = rsdi_proc_handle(p, &p->slots[i]);
    return n;
}
#endif /* RSD_NO_PROCESS */
/* ==== proc end ============================================================ */

/* ==== >>state ============================================================= */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/types.h>
#if defined(_WIN32) /* windows.h from the net section */
#include <io.h>
#include <process.h>
#else
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#endif

#ifndef O_NOFOLLOW
#define O_NOFOLLOW 0
#endif

/* Record files go through one chunk of this size: twice the longest line of a valid record
   (8 x RSD_STATE_MAX_ID_BYTES + 48 bytes, every id byte escaped). */
enum { RSDI_ATTR_CHUNK = 4096 };

struct rsd_state {
    rsd_allocator alloc;
    rsd_logger logger;
    rsd_state_lock_hook hook;
    uint32_t lock_wait_ms;
    bool fail_closed, attr_fsync;
    char dir[RSD_STATE_MAX_DIR_BYTES + 1];
    char host[RSD_STATE_MAX_HOST_BYTES + 1];
    char filebuf[RSDI_ATTR_CHUNK];        /* record files are read and written through it, a chunk at a time */
    char detail[RSD_STATE_DETAIL_BYTES];  /* rsd_state_last_error */
    /* The change counter: attr/gen.seq mapped shared (NULL where it cannot be, or on
       Windows), counting every generation change in the directory; the last generation
       read from a file is kept with the count it was read under (gen_key's). */
    volatile uint32_t *seq;
    uint32_t gen_seq;
    uint64_t gen_val;
    char gen_key[RSD_TARGET_KEY_MAX];     /* "" = none kept */
    rsd_attr_set scratch;                 /* its arena (desc.attr_arena_bytes) follows the struct */
};

enum { RSDI_STATE_PATH_BYTES = RSD_STATE_MAX_DIR_BYTES + 128 };
RSDI_PRIVATE void rsdi_state_seq_open(rsd_state *st);
RSDI_PRIVATE void rsdi_state_seq_close(rsd_state *st);

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
#if defined(_WIN32)
    else if ((v = rsdi_state_env(desc, "LOCALAPPDATA")) != NULL)
        r = rsdi_state_join(buf, cap, v, "\\residency");
#else
    else if ((v = rsdi_state_env(desc, "XDG_STATE_HOME")) != NULL && v[0] == '/')
        r = rsdi_state_join(buf, cap, v, "/residency");  /* XDG: relative values are ignored */
    else if ((v = rsdi_state_env(desc, "HOME")) != NULL && v[0] == '/')
        r = rsdi_state_join(buf, cap, v, "/.local/state/residency");
#endif
    else return RSD_ERR_STATE_DIR;
    return r == RSD_ERR_BUFFER ? RSD_ERR_STATE_DIR : r;
}

/* A directory we may keep state in: a directory (after symlinks when follow), owned by
   our effective uid, not writable by others. Group-writable is allowed: with the common
   umask 002 and per-user groups, a hand-made directory is 0775. */
#if defined(_WIN32)
enum { RSDI_WPATH = RSD_STATE_MAX_DIR_BYTES + 160 };
#endif

/* A directory we may keep state in: a directory (after symlinks when follow), owned by
   our effective uid, not writable by others. Group-writable is allowed: with the common
   umask 002 and per-user groups, a hand-made directory is 0775. Windows: a directory,
   not a reparse point unless follow; its ACL (the user's own %LOCALAPPDATA%) is what
   keeps others out, and it is not inspected. */
RSDI_PRIVATE bool rsdi_state_dir_ok(const char *path, bool follow) {
#if defined(_WIN32)
    wchar_t w[RSDI_WPATH];
    DWORD a;
    if (!rsdi_win_path(path, w, RSDI_WPATH)) return false;
    a = GetFileAttributesW(w);
    if (a == INVALID_FILE_ATTRIBUTES || !(a & FILE_ATTRIBUTE_DIRECTORY)) return false;
    return follow || !(a & FILE_ATTRIBUTE_REPARSE_POINT);
#else
    struct stat sb;
    if ((follow ? stat(path, &sb) : lstat(path, &sb)) != 0) return false;
    return S_ISDIR(sb.st_mode) && sb.st_uid == geteuid() && (sb.st_mode & 002) == 0;
#endif
}

RSDI_PRIVATE long rsdi_state_euid(void) {
#if defined(_WIN32)
    return 0; /* no uid: ownership is the directory's ACL */
#else
    return (long)geteuid();
#endif
}

RSDI_PRIVATE bool rsdi_state_mkdir1(const char *path) {
#if defined(_WIN32)
    wchar_t w[RSDI_WPATH];
    DWORD a;
    if (!rsdi_win_path(path, w, RSDI_WPATH)) return false;
    if (CreateDirectoryW(w, NULL)) return true;
    errno = rsdi_win_errno(GetLastError());
    a = GetFileAttributesW(w);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
#else
    struct stat sb;
    if (mkdir(path, 0700) == 0) return true;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
#endif
}

RSDI_PRIVATE bool rsdi_state_is_sep(char c) {
#if defined(_WIN32)
    return c == '/' || c == '\\';
#else
    return c == '/';
#endif
}

/* mkdir -p with 0700 for every missing component. */
RSDI_PRIVATE bool rsdi_state_mkdirs(const char *dir) {
    char p[RSD_STATE_MAX_DIR_BYTES + 1];
    size_t i, n = strlen(dir);
    if (n == 0 || n > RSD_STATE_MAX_DIR_BYTES) return false;
    memcpy(p, dir, n + 1);
    for (i = 1; i < n; i++) {
        char sep = p[i];
        if (!rsdi_state_is_sep(sep) || rsdi_state_is_sep(p[i - 1])) continue;
        p[i] = '\0';
        if (!rsdi_state_mkdir1(p)) return false;
        p[i] = sep;
    }
    return rsdi_state_mkdir1(p);
}

RSDI_PRIVATE int rsdi_state_path(const rsd_state *st, char *buf, const char *sub,
                                 const char *name, const char *ext) {
    int n = RSD_SNPRINTF(buf, RSDI_STATE_PATH_BYTES, "%s/%s%s%s%s", st->dir, sub,
                         name ? "/" : "", name ? name : "", ext ? ext : "");
    return (n < 0 || n >= (int)RSDI_STATE_PATH_BYTES) ? RSD_ERR_STATE_DIR : RSD_OK;
}

/* The bytes rsd_state_create allocates for desc: one block, the object and its scratch set's
   arena of desc.attr_arena_bytes. */
RSDI_PRIVATE size_t rsdi_state_footprint(const rsd_state_desc *desc) {
    return rsdi_al8(sizeof(rsd_state)) +
           (desc->attr_arena_bytes ? desc->attr_arena_bytes : (size_t)RSD_STATE_ATTR_ARENA_DEFAULT);
}

/* The path of key's file sub/<name><ext>: RSD_OK, RSD_ERR_ARG (no state, a bad key) or
   RSD_ERR_STATE_DIR (too long). */
RSDI_PRIVATE int rsdi_key_path(const rsd_state *st, const char *key, const char *sub, const char *ext, char *path) {
    char name[RSD_STATE_MAX_NAME_BYTES];
    if (!st || !key || rsd_state_file_name(key, name, sizeof name) < 0) return RSD_ERR_ARG;
    return rsdi_state_path(st, path, sub, name, ext);
}

RSDI_PRIVATE int rsdi_state_create(rsd_state **out, const rsd_state_desc *desc) {
    rsd_state_desc zero;
    rsd_state *st;
    char dir[RSD_STATE_MAX_DIR_BYTES + 1], sub[RSDI_STATE_PATH_BYTES];
    int r;
    static const char *const subs[2] = {"locks", "attr"};
    size_t i, arena;
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
                  rsdi_state_euid());
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
    arena = rsdi_state_footprint(desc) - rsdi_al8(sizeof *st); /* the block after the object */
    st = (rsd_state *)rsdi_malloc(&desc->allocator, rsdi_al8(sizeof *st) + arena);
    if (!st) {
        rsdi_log(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, NULL, RSDI_WHERE);
        return RSD_ERR_NOMEM;
    }
    memset(st, 0, sizeof *st);
    (void)rsd_attr_set_init(&st->scratch, (char *)st + rsdi_al8(sizeof *st), arena);
    st->alloc = desc->allocator;
    st->logger = desc->logger;
    st->hook = desc->lock_hook;
    st->lock_wait_ms = desc->lock_wait_ms ? desc->lock_wait_ms
                                          : (uint32_t)RSD_STATE_LOCK_WAIT_MS_DEFAULT;
    st->fail_closed = desc->lock_fail_closed;
    st->attr_fsync = desc->attr_fsync;
    memcpy(st->dir, dir, (size_t)r + 1);
#if defined(_WIN32)
    {
        DWORD hn = (DWORD)(sizeof st->host - 1);
        if (!GetComputerNameA(st->host, &hn)) memcpy(st->host, "?", 2);
    }
#else
    if (gethostname(st->host, sizeof st->host - 1) != 0) memcpy(st->host, "?", 2);
#endif
    st->host[sizeof st->host - 1] = '\0';
    rsdi_state_seq_open(st);
    *out = st;
    return RSD_OK;
}

RSD_API rsd_state *rsd_state_create(const rsd_state_desc *desc, int *err) {
    rsd_state *st;
    int r = rsdi_state_create(&st, desc);
    if (err) *err = r;
    return st;
}

RSD_API size_t rsd_state_footprint(const rsd_state_desc *desc) {
    rsd_state_desc zero;
    if (!desc) {
        memset(&zero, 0, sizeof zero);
        desc = &zero;
    }
    if (rsdi_allocator_check(&desc->allocator) < 0 ||
        (desc->lock_hook.try_lock == NULL) != (desc->lock_hook.unlock == NULL))
        return 0;
    return rsdi_state_footprint(desc);
}

RSD_API void rsd_state_destroy(rsd_state *st) {
    rsd_allocator a;
    if (!st) return;
    rsdi_state_seq_close(st);
    a = st->alloc;
    rsdi_free(&a, st);
}

RSD_API const char *rsd_state_dir(const rsd_state *st) { return st ? st->dir : ""; }

/* ---- small file helpers (POSIX, or Win32 under _WIN32) ------------------------
   A file is an int descriptor on both: on Windows a CRT descriptor over a handle
   from CreateFileW (not inheritable, shared for read, write and delete so a holder's
   open file never blocks a reader or a rename), reached with _get_osfhandle. */
#if defined(_WIN32)
RSDI_PRIVATE HANDLE rsdi_state_h(int fd) { return (HANDLE)_get_osfhandle(fd); }
RSDI_PRIVATE int rsdi_state_winfail(void) {
    errno = rsdi_win_errno(GetLastError());
    return -1;
}
#endif

RSDI_PRIVATE void rsdi_state_close_fd(int fd) {
#if defined(_WIN32)
    if (fd >= 0) (void)_close(fd);
#else
    if (fd >= 0) (void)close(fd);  /* no retry on EINTR: the fd is gone either way on Linux */
#endif
}

RSDI_PRIVATE bool rsdi_state_write_all(int fd, const char *p, size_t n, int64_t at, bool positioned) {
    while (n > 0) {
#if defined(_WIN32)
        DWORD w = 0;
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        ov.Offset = (DWORD)((uint64_t)at & 0xffffffffu);
        ov.OffsetHigh = (DWORD)((uint64_t)at >> 32);
        if (!WriteFile(rsdi_state_h(fd), p, n > 0x40000000u ? 0x40000000u : (DWORD)n, &w,
                       positioned ? &ov : NULL)) {
            (void)rsdi_state_winfail();
            return false;
        }
#else
        ssize_t w = positioned ? pwrite(fd, p, n, (off_t)at) : write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
#endif
        p += w;
        n -= (size_t)w;
        at += (int64_t)w;
    }
    return true;
}

/* Reads up to cap bytes from offset off (fewer only at the end of the file); returns bytes
   read, or -1. */
RSDI_PRIVATE long rsdi_state_read_at(int fd, char *buf, size_t cap, uint64_t off) {
    size_t n = 0;
    while (n < cap) {
#if defined(_WIN32)
        DWORD r = 0;
        OVERLAPPED ov;
        memset(&ov, 0, sizeof ov);
        ov.Offset = (DWORD)((off + n) & 0xffffffffu);
        ov.OffsetHigh = (DWORD)((off + n) >> 32);
        if (!ReadFile(rsdi_state_h(fd), buf + n, (DWORD)(cap - n > 0x40000000u ? 0x40000000u : cap - n), &r, &ov)) {
            if (GetLastError() == ERROR_HANDLE_EOF) break;
            return (long)rsdi_state_winfail();
        }
#else
        ssize_t r = pread(fd, buf + n, cap - n, (off_t)(off + n));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
#endif
        if (r == 0) break;
        n += (size_t)r;
    }
    return (long)n;
}

/* Reads up to cap bytes from offset 0; returns bytes read, or -1. */
RSDI_PRIVATE long rsdi_state_read_all(int fd, char *buf, size_t cap) { return rsdi_state_read_at(fd, buf, cap, 0); }

/* Opens a regular file without following a symlink and without blocking on a FIFO.
   flags: O_RDONLY, O_RDWR or O_WRONLY; excl: create it, and fail when it exists. */
RSDI_PRIVATE int rsdi_state_open_ex(const char *path, int flags, bool create, bool excl) {
#if defined(_WIN32)
    wchar_t w[RSDI_WPATH];
    HANDLE h;
    int fd;
    DWORD acc = flags == O_RDONLY ? GENERIC_READ : flags == O_WRONLY ? GENERIC_WRITE : GENERIC_READ | GENERIC_WRITE;
    DWORD disp = excl ? CREATE_NEW : create ? OPEN_ALWAYS : OPEN_EXISTING;
    if (!rsdi_win_path(path, w, RSDI_WPATH)) return -1;
    h = CreateFileW(w, acc, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, disp,
                    FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT, NULL);
    if (h == INVALID_HANDLE_VALUE) return rsdi_state_winfail();
    if (GetFileType(h) != FILE_TYPE_DISK) {
        (void)CloseHandle(h);
        errno = EINVAL;
        return -1;
    }
    fd = _open_osfhandle((intptr_t)h, flags == O_RDONLY ? _O_RDONLY : 0);
    if (fd < 0) {
        (void)CloseHandle(h);
        errno = EMFILE;
    }
    return fd;
#else
    struct stat sb;
    int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_CREAT : 0) |
                            (excl ? O_EXCL : 0), 0600);
    if (fd < 0) return -1;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        rsdi_state_close_fd(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
#endif
}

RSDI_PRIVATE int rsdi_state_open_file(const char *path, int flags, bool create) {
    return rsdi_state_open_ex(path, flags, create, false);
}

RSDI_PRIVATE void rsdi_state_truncate(int fd, int64_t n) {
#if defined(_WIN32)
    LARGE_INTEGER at;
    at.QuadPart = n;
    if (SetFilePointerEx(rsdi_state_h(fd), at, NULL, FILE_BEGIN)) (void)SetEndOfFile(rsdi_state_h(fd));
#else
    (void)ftruncate(fd, (off_t)n);
#endif
}

RSDI_PRIVATE bool rsdi_state_fsync(int fd) {
#if defined(_WIN32)
    return FlushFileBuffers(rsdi_state_h(fd)) ? true : (rsdi_state_winfail(), false);
#else
    return fsync(fd) == 0;
#endif
}

/* The cross-process lock on an open file, never waiting: 0 taken, -1 with errno
   (EWOULDBLOCK = someone else holds it). flock(LOCK_EX|LOCK_NB); on Windows LockFileEx
   of one byte far past the end, so the lock never stops a reader of the contents. */
#if defined(_WIN32)
#define RSDI_LOCK_BYTE_HIGH 0x40000000u /* offset 2^62 */
#endif
RSDI_PRIVATE int rsdi_state_flock(int fd) {
#if defined(_WIN32)
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.OffsetHigh = RSDI_LOCK_BYTE_HIGH;
    if (LockFileEx(rsdi_state_h(fd), LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, &ov)) return 0;
    return rsdi_state_winfail();
#else
    return flock(fd, LOCK_EX | LOCK_NB);
#endif
}

RSDI_PRIVATE void rsdi_state_funlock(int fd) {
#if defined(_WIN32)
    OVERLAPPED ov;
    memset(&ov, 0, sizeof ov);
    ov.OffsetHigh = RSDI_LOCK_BYTE_HIGH;
    (void)UnlockFileEx(rsdi_state_h(fd), 0, 1, 0, &ov);
#else
    (void)flock(fd, LOCK_UN);
#endif
}

/* Atomic replacement of to by from (rename; MoveFileExW with REPLACE_EXISTING). */
RSDI_PRIVATE int rsdi_state_rename(const char *from, const char *to) {
#if defined(_WIN32)
    wchar_t wf[RSDI_WPATH], wt[RSDI_WPATH];
    if (!rsdi_win_path(from, wf, RSDI_WPATH) || !rsdi_win_path(to, wt, RSDI_WPATH)) return -1;
    if (MoveFileExW(wf, wt, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) return 0;
    return rsdi_state_winfail();
#else
    return rename(from, to);
#endif
}

RSDI_PRIVATE void rsdi_state_unlink(const char *path) {
#if defined(_WIN32)
    wchar_t w[RSDI_WPATH];
    if (rsdi_win_path(path, w, RSDI_WPATH)) (void)DeleteFileW(w);
#else
    (void)unlink(path);
#endif
}

RSDI_PRIVATE long rsdi_state_pid(void) {
#if defined(_WIN32)
    return (long)GetCurrentProcessId();
#else
    return (long)getpid();
#endif
}

RSDI_PRIVATE void rsdi_state_sleep_ms(uint32_t ms) {
#if defined(_WIN32)
    Sleep((DWORD)ms);
#else
    struct timespec ts, rem;
    ts.tv_sec = (time_t)(ms / 1000u);
    ts.tv_nsec = (long)(ms % 1000u) * 1000000L;
    while (nanosleep(&ts, &rem) != 0 && errno == EINTR) ts = rem;
#endif
}

RSDI_PRIVATE uint64_t rsdi_state_mono_ms(void) { return rsd_now_ms(); }

RSDI_PRIVATE uint64_t rsdi_state_wall_ms(void) { return rsdi_wall_ms(); }

/* Copies s into dst (cap bytes incl. NUL), replacing control bytes by '?'. */
RSDI_PRIVATE void rsdi_state_copy_clean(char *dst, size_t cap, const char *s) {
    size_t i = 0;
    if (s)
        for (; s[i] && i + 1 < cap; i++)
            dst[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    dst[i] = '\0';
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
/* Records one line for rsd_state_last_error. */
RSDI_PRIVATE void rsdi_state_detail(rsd_state *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(st->detail, sizeof st->detail, fmt, ap);
    va_end(ap);
}

RSD_API const char *rsd_state_last_error(const rsd_state *st) { return st ? st->detail : ""; }

/* A file call on name failed with err: logged ("<verb> <name>: <why>", the verb only when
   in_log) and kept as the last error ("<verb> <name>: <why>"). */
RSDI_PRIVATE void rsdi_state_sys_fail(rsd_state *st, int level, uint32_t item, const char *verb, const char *name,
                                      int err, bool in_log) {
    const char *why = strerror(err);
    rsdi_logf(&st->logger, level, item, RSDI_WHERE, "%s%s%s: %s", in_log ? verb : "", in_log ? " " : "", name, why);
    rsdi_state_detail(st, "%s %s: %s", verb, name, why);
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
                         rsdi_state_pid(), st->host, (unsigned long long)rsdi_state_wall_ms(),
                         lk->purpose);
    if (n <= 0 || n >= (int)sizeof rec) return;
    /* Write first, then cut: a reader never sees an empty file while we hold it. */
    if (rsdi_state_write_all(lk->fd, rec, (size_t)n, 0, true)) rsdi_state_truncate(lk->fd, n);
}

/* One attempt: RSD_OK taken, RSD_PENDING busy, <0 error. */
RSDI_PRIVATE int rsdi_state_lock_attempt(rsd_state *st, rsd_state_lock *lk) {
    char path[RSDI_STATE_PATH_BYTES];
    lk->attempts++;
    if (lk->via_hook && !lk->attr) {
        int r = st->hook.try_lock(lk->key, st->hook.user);
        if (r == RSD_OK || r == RSD_PENDING) return r;
        return r < 0 ? r : RSD_ERR_LOCK;
    }
    if (lk->fd < 0) {
        if (rsdi_state_path(st, path, lk->attr ? "attr" : "locks", lk->name, ".lock") < 0)
            return RSD_ERR_STATE_DIR;
        lk->fd = rsdi_state_open_file(path, O_RDWR, true);
        if (lk->fd < 0) {
            rsdi_state_sys_fail(st, RSD_LOG_WARN, RSD_LOGITEM_LOCK_OPEN_FAILED, "open", path, errno, true);
            return lk->attr ? RSD_ERR_STATE_IO : RSD_ERR_LOCK;
        }
    }
    if (rsdi_state_flock(lk->fd) == 0) return RSD_OK;
    if (errno == EWOULDBLOCK || errno == EAGAIN || errno == EINTR) return RSD_PENDING;
    rsdi_state_sys_fail(st, RSD_LOG_WARN, RSD_LOGITEM_LOCK_FAILED, "flock", lk->name, errno, true);
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
    if (lk->attr) { /* a read-modify-write without its lock could lose entries: never proceed */
        lk->state = RSD_LOCK_FAILED;
        if (err == RSD_ERR_TIMEOUT) {
            rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_LOCK_TIMEOUT, RSDI_WHERE,
                      "attr/%s.lock busy for %llu ms", lk->name, (unsigned long long)(now_ms - lk->begin_ms));
            rsdi_state_detail(st, "%s/attr/%s.lock busy for %llu ms", st->dir, lk->name,
                              (unsigned long long)(now_ms - lk->begin_ms));
        }
        return err;
    }
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

/* One step, read as a code: RSD_OK = HELD or UNLOCKED, RSD_PENDING = waiting, <0 = FAILED
   (RSD_ERR_STATE when IDLE). */
RSDI_PRIVATE int rsdi_state_lock_code(rsd_state *st, rsd_state_lock *lk, uint64_t now_ms) {
    int r;
    uint64_t next;
    uint32_t cap;
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
        if (!lk->via_hook && !lk->attr) rsdi_state_write_owner(st, lk);
        return RSD_OK;
    }
    if (r < 0) return rsdi_state_lock_give_up(st, lk, r, now_ms);
    if (now_ms >= lk->deadline_ms) return rsdi_state_lock_give_up(st, lk, RSD_ERR_TIMEOUT, now_ms);
    next = now_ms > UINT64_MAX - lk->backoff_ms ? UINT64_MAX : now_ms + lk->backoff_ms;
    lk->wake_ms = next < lk->deadline_ms ? next : lk->deadline_ms;
    cap = lk->attr ? (uint32_t)RSD_STATE_ATTR_RETRY_MAX_MS : (uint32_t)RSD_STATE_LOCK_RETRY_MAX_MS;
    lk->backoff_ms = lk->backoff_ms * 2 > cap ? cap : lk->backoff_ms * 2;
    return RSD_PENDING;
}

/* The wait has ended (HELD, UNLOCKED, FAILED) and its end was not pulled. */
RSDI_PRIVATE bool rsdi_state_lock_end_waits(const rsd_state_lock *lk) {
    return !lk->end_taken && (lk->state == RSD_LOCK_HELD || lk->state == RSD_LOCK_UNLOCKED ||
                              lk->state == RSD_LOCK_FAILED);
}

RSD_API int rsd_state_lock_step(rsd_state *st, rsd_state_lock *lk, uint64_t now_ms) {
    int r;
    if (!st || !lk) return RSD_ERR_ARG;
    r = rsdi_state_lock_code(st, lk, now_ms);
    if (r == RSD_ERR_STATE && lk->state != RSD_LOCK_FAILED) return r; /* IDLE: nothing begun */
    return rsdi_state_lock_end_waits(lk) ? 1 : 0;
}

RSD_API bool rsd_state_lock_next_event(rsd_state_lock *lk, int *result) {
    if (!lk || !rsdi_state_lock_end_waits(lk)) return false;
    lk->end_taken = true;
    if (result) *result = lk->state == RSD_LOCK_FAILED ? (lk->error < 0 ? lk->error : RSD_ERR_LOCK) : RSD_OK;
    return true;
}

RSD_API uint64_t rsd_state_lock_next_deadline(const rsd_state_lock *lk) {
    if (!lk) return RSD_NO_DEADLINE;
    if (rsdi_state_lock_end_waits(lk)) return 0;
    return lk->state == RSD_LOCK_WAITING ? lk->wake_ms : RSD_NO_DEADLINE;
}

RSD_API int rsd_state_lock_try(rsd_state *st, rsd_state_lock *lk, const char *key,
                               const char *purpose) {
    int r = rsd_state_lock_begin(st, lk, key, purpose, 0, 1);
    if (r < 0) return r;
    r = rsdi_state_lock_attempt(st, lk);
    lk->end_taken = true; /* its end is what try returns */
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

/* The blocking loop over a begun lock: step, sleep until its wake, on CLOCK_MONOTONIC;
   returns the wait's end. */
RSDI_PRIVATE int rsdi_state_lock_loop(rsd_state *st, rsd_state_lock *lk, uint64_t now) {
    int r;
    for (;;) {
        r = rsd_state_lock_step(st, lk, now);
        if (r < 0) return r;
        if (rsd_state_lock_next_event(lk, &r)) return r;
        now = rsdi_state_mono_ms();
        if (lk->wake_ms > now) {
            uint64_t d = lk->wake_ms - now;
            rsdi_state_sleep_ms(d > 1000u ? 1000u : (uint32_t)d);
            now = rsdi_state_mono_ms();
        }
    }
}

RSD_API int rsd_state_lock_sync(rsd_state *st, rsd_state_lock *lk, const char *key,
                                const char *purpose, uint32_t wait_ms) {
    uint64_t now = rsdi_state_mono_ms();
    int r = rsd_state_lock_begin(st, lk, key, purpose, now, wait_ms ? now + wait_ms : 0);
    return r < 0 ? r : rsdi_state_lock_loop(st, lk, now);
}

RSD_API int rsd_state_attr_lock_begin(rsd_state *st, rsd_state_lock *lk, const char *key,
                                      uint64_t now_ms, uint64_t deadline_ms) {
    int r = rsd_state_lock_begin(st, lk, key, "attribution", now_ms,
                                 deadline_ms ? deadline_ms
                                 : now_ms > UINT64_MAX - RSD_STATE_ATTR_LOCK_WAIT_MS
                                     ? UINT64_MAX : now_ms + RSD_STATE_ATTR_LOCK_WAIT_MS);
    if (r < 0) return r;
    lk->attr = true;
    lk->via_hook = false; /* a lock hook replaces the target lock only */
    lk->backoff_ms = 1;
    return RSD_OK;
}

RSD_API void rsd_state_unlock(rsd_state *st, rsd_state_lock *lk) {
    if (!lk) return;
    if (lk->state == RSD_LOCK_HELD) {
        if (lk->via_hook) {
            if (st && st->hook.unlock) st->hook.unlock(lk->key, st->hook.user);
        } else if (lk->fd >= 0) {
            if (!lk->attr) rsdi_state_truncate(lk->fd, 0);  /* free locks carry no owner record */
            rsdi_state_funlock(lk->fd);
        }
    }
    if (lk->state != RSD_LOCK_IDLE) rsdi_state_close_fd(lk->fd);
    lk->fd = -1;
    lk->state = RSD_LOCK_IDLE;
}

RSD_API bool rsd_state_lock_held(const rsd_state_lock *lk) {
    return lk && lk->state == RSD_LOCK_HELD;
}

RSD_API void rsd_state_lock_query(const rsd_state_lock *lk, rsd_state_lock_info *info) {
    if (!info) return;
    memset(info, 0, sizeof *info);
    info->key = info->purpose = "";
    if (!lk) return;
    info->state = lk->state;
    info->error = lk->error;
    info->held = lk->state == RSD_LOCK_HELD;
    info->end_waiting = rsdi_state_lock_end_waits(lk);
    info->wake_ms = lk->wake_ms;
    info->deadline_ms = lk->deadline_ms;
    info->attempts = lk->attempts;
    info->key = lk->key;
    info->purpose = lk->purpose;
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
    char path[RSDI_STATE_PATH_BYTES];
    int fd, r;
    if (!st || !key || !out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    if ((r = rsdi_key_path(st, key, "locks", ".lock", path)) < 0) return r;
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

static const char rsdi_attr_none[] = "";       /* an empty id takes no arena bytes */
enum { RSDI_ATTR_SET_MAGIC = 0x61747472 };     /* a set made by rsd_attr_set_init */

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

RSD_API int rsd_attr_set_init(rsd_attr_set *set, char *arena, size_t arena_bytes) {
    if (!set || (!arena && arena_bytes)) return RSD_ERR_ARG;
    memset(set, 0, sizeof *set);
    set->magic = RSDI_ATTR_SET_MAGIC;
    set->arena = arena;
    set->arena_bytes = arena_bytes;
    return RSD_OK;
}

/* Empties set; its arena stays. */
RSDI_PRIVATE void rsdi_attr_set_clear(rsd_attr_set *set) {
    set->count = set->arena_used = 0;
    set->corrupt = set->reset = set->over = false;
}

/* The arena bytes an entry's ids take (each with its NUL; an empty id none). */
RSDI_PRIVATE size_t rsdi_attr_need(size_t model_len, size_t inst_len) {
    return model_len + 1 + (inst_len ? inst_len + 1 : 0);
}

/* The offset of p in set's arena, or arena_bytes when p is not in it. */
RSDI_PRIVATE size_t rsdi_attr_off(const rsd_attr_set *set, const char *p) {
    size_t o = (size_t)((uintptr_t)p - (uintptr_t)set->arena);
    return set->arena && (uintptr_t)p >= (uintptr_t)set->arena && o < set->arena_bytes ? o : set->arena_bytes;
}

/* Moves the ids the entries use to the arena's start, in address order (ids left behind by
   a remove or a replace go). */
RSDI_PRIVATE void rsdi_attr_compact(rsd_attr_set *set) {
    size_t used = 0, done = 0; /* ids at offsets below done are in place */
    for (;;) {
        const char **next = NULL;
        size_t best = set->arena_bytes, i, n;
        for (i = 0; i < set->count; i++) {
            const char **f[2];
            int k;
            f[0] = &set->items[i].model;
            f[1] = &set->items[i].instance;
            for (k = 0; k < 2; k++) {
                size_t o = rsdi_attr_off(set, *f[k]);
                if (o < set->arena_bytes && o >= done && o < best) {
                    best = o;
                    next = f[k];
                }
            }
        }
        if (!next) break;
        n = strlen(*next) + 1;
        memmove(set->arena + used, *next, n);
        *next = set->arena + used;
        used += n;
        done = best + n;
    }
    set->arena_used = used;
}

/* Stores (model, instance) as entry i (i == count: a new one, which the caller counts), its
   ids copied into the arena: true, or false when they do not fit even after compacting
   (the set unchanged). An entry that already holds those ids keeps them. */
RSDI_PRIVATE bool rsdi_attr_set_put(rsd_attr_set *set, size_t i, const char *model, const char *inst,
                                    uint64_t loaded_at_ms, int64_t pid) {
    rsd_attr *a = &set->items[i];
    size_t ml = strlen(model), il = strlen(inst), need = rsdi_attr_need(ml, il);
    if (i < set->count && strcmp(a->model, model) == 0 && strcmp(a->instance, inst) == 0) need = 0;
    if (set->arena_used > set->arena_bytes || need > set->arena_bytes - set->arena_used) {
        size_t live = 0, k;
        for (k = 0; k < set->count; k++)
            if (k != i) live += rsdi_attr_need(strlen(set->items[k].model), strlen(set->items[k].instance));
        if (need > set->arena_bytes - live) return false;
        if (i < set->count) a->model = a->instance = rsdi_attr_none; /* its old ids go with the compaction */
        rsdi_attr_compact(set);
    }
    if (need) {
        char *m = set->arena + set->arena_used;
        memcpy(m, model, ml + 1);
        a->model = m;
        if (il) memcpy(m + ml + 1, inst, il + 1);
        a->instance = il ? m + ml + 1 : rsdi_attr_none;
        set->arena_used += need;
    }
    a->loaded_at_ms = loaded_at_ms;
    a->pid = pid;
    return true;
}

/* Ends a read whose ids did not fit: empty, over set, arena_used = the bytes it needs. */
RSDI_PRIVATE int rsdi_attr_set_over(rsd_attr_set *set, size_t need) {
    rsdi_attr_set_clear(set);
    set->over = true;
    set->arena_used = need;
    return RSD_ERR_TOO_LARGE;
}

RSD_API int rsd_attr_set_copy(rsd_attr_set *dst, const rsd_attr_set *src) {
    size_t i, need = 0;
    if (!dst || !src || dst->magic != RSDI_ATTR_SET_MAGIC || src->count > RSD_STATE_MAX_ATTR) return RSD_ERR_ARG;
    if (dst == src) return RSD_OK;
    if (src->over) return rsdi_attr_set_over(dst, src->arena_used); /* it holds nothing to copy */
    rsdi_attr_set_clear(dst);
    for (i = 0; i < src->count; i++)
        need += rsdi_attr_need(strlen(src->items[i].model), strlen(src->items[i].instance));
    if (need > dst->arena_bytes) return rsdi_attr_set_over(dst, need);
    for (i = 0; i < src->count; i++, dst->count++)
        (void)rsdi_attr_set_put(dst, i, src->items[i].model, src->items[i].instance, src->items[i].loaded_at_ms,
                                src->items[i].pid);
    dst->corrupt = src->corrupt;
    dst->reset = src->reset;
    return RSD_OK;
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
                if (i + 2 > n || (h = rsdi_hexval(s[i])) < 0 || (l = rsdi_hexval(s[i + 1])) < 0)
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

/* One line of a record after its magic (without its '\n'): 0 = an entry, added to out
   (when its ids do not fit, out->over is set and the entry counted without them, its
   bytes added to out->arena_used, so that the rest is still checked); 1 = the trailer,
   its count right; <0 = bad (RSD_ERR_PROTOCOL). */
RSDI_PRIVATE int rsdi_attr_line(const char *line, size_t len, rsd_attr_set *out) {
    const char *f[4];
    size_t fl[4], nf = 0, i, s;
    /* the trailer has no tab; an entry line always has three (ids may read "end 1") */
    if (len >= 4 && memcmp(line, "end ", 4) == 0 && !memchr(line, '\t', len)) {
        uint64_t cnt;
        return rsdi_attr_u64(line + 4, len - 4, &cnt) && cnt == out->count ? 1 : RSD_ERR_PROTOCOL;
    }
    for (s = 0, i = 0; i <= len; i++) {
        if (i == len || line[i] == '\t') {
            if (nf == 4) return RSD_ERR_PROTOCOL;
            f[nf] = line + s;
            fl[nf++] = i - s;
            s = i + 1;
        }
    }
    if (nf != 4 || out->count >= RSD_STATE_MAX_ATTR) return RSD_ERR_PROTOCOL;
    {
        char model[RSD_STATE_MAX_ID_BYTES + 1], inst[RSD_STATE_MAX_ID_BYTES + 1];
        uint64_t pid, at;
        if (fl[0] == 0 || !rsdi_attr_unescape(f[0], fl[0], model) || !rsdi_attr_unescape(f[1], fl[1], inst) ||
            !rsdi_attr_u64(f[2], fl[2], &at) || !rsdi_attr_u64(f[3], fl[3], &pid) || pid > (uint64_t)INT64_MAX)
            return RSD_ERR_PROTOCOL;
        if (rsd_attr_set_find(out, model, inst) >= 0) return RSD_ERR_PROTOCOL; /* duplicate */
        if (out->over || !rsdi_attr_set_put(out, out->count, model, inst, at, (int64_t)pid)) {
            out->over = true; /* from here on arena_used counts the bytes the record needs */
            out->arena_used += rsdi_attr_need(strlen(model), strlen(inst));
            out->items[out->count].model = out->items[out->count].instance = rsdi_attr_none;
        }
        out->count++;
    }
    return 0;
}

/* Strict parser: RSD_OK with *out filled, or RSD_ERR_TRUNCATED / RSD_ERR_PROTOCOL
   (out is then empty), or RSD_ERR_TOO_LARGE for a valid record whose ids do not fit out's
   arena (empty, out->over, out->arena_used = the bytes it needs). Never reads outside
   buf[0..n). */
RSDI_PRIVATE int rsdi_attr_parse(const char *buf, size_t n, rsd_attr_set *out) {
    size_t pos, ml = sizeof rsdi_attr_magic - 1;
    rsdi_attr_set_clear(out);
    if (n < ml || memcmp(buf, rsdi_attr_magic, ml) != 0)
        return n < ml ? RSD_ERR_TRUNCATED : RSD_ERR_PROTOCOL;
    pos = ml;
    for (;;) {
        const char *line = buf + pos;
        const char *nl = (const char *)memchr(line, '\n', n - pos);
        size_t len;
        int r;
        if (!nl) {
            rsdi_attr_set_clear(out);
            return RSD_ERR_TRUNCATED;
        }
        len = (size_t)(nl - line);
        r = rsdi_attr_line(line, len, out);
        if (r < 0 || (r == 1 && pos + len + 1 != n)) { /* bad, or something after the trailer */
            rsdi_attr_set_clear(out);
            return RSD_ERR_PROTOCOL;
        }
        if (r == 1) return out->over ? rsdi_attr_set_over(out, out->arena_used) : RSD_OK;
        pos += len + 1;
    }
}

/* rsdi_attr_parse over a file read RSDI_ATTR_CHUNK bytes at a time through st->filebuf
   (no line of a valid record is longer: 8 x 255 + 48 bytes), with the same results, plus
   RSD_ERR_TOO_LARGE for a file over RSD_STATE_MAX_FILE_BYTES (whatever it holds, as a
   whole read would find; out->over not set) and RSD_ERR_STATE_IO (errno set) when a read
   fails. *size: the bytes read (at most RSD_STATE_MAX_FILE_BYTES + 1). */
RSDI_PRIVATE int rsdi_attr_read_fd(rsd_state *st, int fd, rsd_attr_set *out, long *size) {
    char *b = st->filebuf;
    size_t have = 0, ml = sizeof rsdi_attr_magic - 1;
    uint64_t off = 0;
    int state = 0, err = 0; /* state: 0 the magic, 1 lines, 2 after the trailer, 3 in an overlong line */
    bool eof = false;
    rsdi_attr_set_clear(out);
    *size = 0;
    while (!err) {
        size_t pos = 0;
        if (!eof) {
            long n = rsdi_state_read_at(fd, b + have, RSDI_ATTR_CHUNK - have, off);
            if (n < 0) return RSD_ERR_STATE_IO;
            eof = (size_t)n < RSDI_ATTR_CHUNK - have;
            off += (uint64_t)n;
            have += (size_t)n;
            if (off > (uint64_t)RSD_STATE_MAX_FILE_BYTES) break;
        }
        if (state == 0) {
            if (have < ml && !eof) continue;
            if (have < ml || memcmp(b, rsdi_attr_magic, ml) != 0) {
                err = have < ml ? RSD_ERR_TRUNCATED : RSD_ERR_PROTOCOL;
                break;
            }
            pos = ml;
            state = 1;
        }
        while (state == 1 || state == 3) {
            const char *nl = (const char *)memchr(b + pos, '\n', have - pos);
            int r;
            if (!nl) break;
            if (state == 3) { /* an overlong line ended: never a valid one */
                err = RSD_ERR_PROTOCOL;
                break;
            }
            r = rsdi_attr_line(b + pos, (size_t)(nl - (b + pos)), out);
            pos = (size_t)(nl - b) + 1;
            if (r < 0) err = r;
            else if (r == 1) state = 2;
            if (r != 0) break;
        }
        if (err) break;
        if (state == 2 && pos < have) { /* something after the trailer */
            err = RSD_ERR_PROTOCOL;
            break;
        }
        if (state == 1 && pos == 0 && have == RSDI_ATTR_CHUNK) state = 3; /* a line longer than the chunk */
        if (state == 3) pos = have; /* its bytes are not kept */
        memmove(b, b + pos, have - pos);
        have -= pos;
        if (eof) {
            if (state != 2) err = RSD_ERR_TRUNCATED; /* a line without its '\n', or no trailer */
            break;
        }
    }
    while (err && !eof && off <= (uint64_t)RSD_STATE_MAX_FILE_BYTES) { /* the rest: only its size counts */
        long n = rsdi_state_read_at(fd, b, RSDI_ATTR_CHUNK, off);
        if (n < 0) return RSD_ERR_STATE_IO;
        eof = (size_t)n < RSDI_ATTR_CHUNK;
        off += (uint64_t)n;
    }
    *size = (long)(off > (uint64_t)RSD_STATE_MAX_FILE_BYTES ? (uint64_t)RSD_STATE_MAX_FILE_BYTES + 1 : off);
    if (off > (uint64_t)RSD_STATE_MAX_FILE_BYTES) err = RSD_ERR_TOO_LARGE;
    if (err) rsdi_attr_set_clear(out);
    else if (out->over) err = rsdi_attr_set_over(out, out->arena_used);
    return err;
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

/* Part i of set's file image appended to buf[*n..cap): i 0 the magic, 1..count the entry
   lines, count + 1 the trailer. RSD_OK, or RSD_ERR_BUFFER (nothing appended) / RSD_ERR_ARG. */
RSDI_PRIVATE int rsdi_attr_format_part(const rsd_attr_set *set, size_t i, char *buf, size_t cap, size_t *n) {
    size_t n0 = *n;
    char num[64];
    int k;
    if (i == 0) {
        if (!rsdi_attr_put(buf, cap, n, rsdi_attr_magic, sizeof rsdi_attr_magic - 1)) return RSD_ERR_BUFFER;
    } else if (i <= set->count) {
        const rsd_attr *a = &set->items[i - 1];
        if (!a->model || !a->model[0] || !a->instance || a->pid < 0) return RSD_ERR_ARG;
        k = RSD_SNPRINTF(num, sizeof num, "\t%llu\t%lld\n", (unsigned long long)a->loaded_at_ms,
                         (long long)a->pid);
        if (!rsdi_attr_put_escaped(buf, cap, n, a->model) || !rsdi_attr_put(buf, cap, n, "\t", 1) ||
            !rsdi_attr_put_escaped(buf, cap, n, a->instance) || !rsdi_attr_put(buf, cap, n, num, (size_t)k)) {
            *n = n0;
            return RSD_ERR_BUFFER;
        }
    } else {
        k = RSD_SNPRINTF(num, sizeof num, "end %u\n", (unsigned)set->count);
        if (!rsdi_attr_put(buf, cap, n, num, (size_t)k)) return RSD_ERR_BUFFER;
    }
    return RSD_OK;
}

/* Writes the file image of set into buf; length, or RSD_ERR_BUFFER / RSD_ERR_ARG. */
RSDI_PRIVATE int rsdi_attr_format(const rsd_attr_set *set, char *buf, size_t cap) {
    size_t n = 0, i;
    int r;
    if (set->count > RSD_STATE_MAX_ATTR) return RSD_ERR_ARG;
    for (i = 0; i <= set->count + 1; i++)
        if ((r = rsdi_attr_format_part(set, i, buf, cap, &n)) < 0) return r;
    return (int)n;
}

/* Reads and parses an attribution file into out. Missing = empty; corrupt = empty
   with out->corrupt and a log item. <0 when the file exists but cannot be read, or
   RSD_ERR_TOO_LARGE when its ids do not fit out's arena (empty, out->over: never read in
   part, never reset). */
RSDI_PRIVATE int rsdi_attr_read(rsd_state *st, const char *path, rsd_attr_set *out) {
    int fd = rsdi_state_open_file(path, O_RDONLY, false), r = RSD_ERR_STATE_IO, e = errno;
    long n = 0;
    rsdi_attr_set_clear(out);
    if (fd < 0 && e == ENOENT) return RSD_OK;
    if (fd >= 0) {
        r = rsdi_attr_read_fd(st, fd, out, &n);
        e = errno;
        rsdi_state_close_fd(fd);
    }
    if (r == RSD_ERR_STATE_IO) { /* it cannot be opened, or a read failed */
        rsdi_state_sys_fail(st, RSD_LOG_WARN, RSD_LOGITEM_ATTR_READ_FAILED, "read", path, e, false);
        return RSD_ERR_STATE_IO;
    }
    if (r == RSD_ERR_TOO_LARGE && out->over) { /* a valid record, larger than the set */
        rsdi_state_detail(st, "read %s: its ids need %lu bytes, over the %lu of attr_arena_bytes (raise it)", path,
                          (unsigned long)out->arena_used, (unsigned long)out->arena_bytes);
        rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_READ_FAILED, RSDI_WHERE, "%s", st->detail);
        return r;
    }
    if (r < 0) { /* the caller logs it once (rsdi_attr_log_corrupt), after trying to reset it */
        rsdi_attr_set_clear(out);
        out->corrupt = true;
        rsdi_state_detail(st, "%s (%ld bytes): %s", path, n, rsd_result_str(r));
    }
    return RSD_OK;
}

RSDI_PRIVATE void rsdi_attr_log_corrupt(rsd_state *st, const rsd_attr_set *set) {
    rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_CORRUPT, RSDI_WHERE, "%s; treated as empty%s",
              st->detail, set->reset ? ", reset (the corrupt file is kept as <name>.attr.corrupt)" : "");
}

/* Under the attribution-file lock: moves a corrupt attribution file aside to
   <path>.corrupt (the newest one kept, for a post-mortem), so it reads as empty -- and
   is reported -- once. */
RSDI_PRIVATE void rsdi_attr_set_aside(const char *path, rsd_attr_set *set) {
    char aside[RSDI_STATE_PATH_BYTES + 16];
    (void)RSD_SNPRINTF(aside, sizeof aside, "%s.corrupt", path);
    if (rsdi_state_rename(path, aside) == 0) set->reset = true;
}

RSDI_PRIVATE int rsdi_attr_lock_try(rsd_state *st, rsd_state_lock *lk, const char *key);

/* Reads key's record of kind ext (".attr" attribution, ".used" last uses): entry count. */
RSDI_PRIVATE int rsdi_record_load(rsd_state *st, const char *key, const char *ext, rsd_attr_set *out) {
    char path[RSDI_STATE_PATH_BYTES];
    int r;
    if (!st || !key || !out || out->magic != RSDI_ATTR_SET_MAGIC) return RSD_ERR_ARG;
    rsdi_attr_set_clear(out);
    if ((r = rsdi_key_path(st, key, "attr", ext, path)) < 0) return r;
    r = rsdi_attr_read(st, path, out);
    if (r == RSD_OK && out->corrupt) { /* reset it now, unless a writer is at it (it rewrites it) */
        rsd_state_lock lk;
        memset(&lk, 0, sizeof lk);
        if (rsdi_attr_lock_try(st, &lk, key) == RSD_OK) {
            r = rsdi_attr_read(st, path, out); /* again under the lock: still corrupt? */
            if (r == RSD_OK && out->corrupt) rsdi_attr_set_aside(path, out);
            rsd_state_unlock(st, &lk);
        }
        if (r == RSD_OK && out->corrupt) rsdi_attr_log_corrupt(st, out);
    }
    return r < 0 ? r : (int)out->count;
}

RSD_API int rsd_state_attr_load(rsd_state *st, const char *key, rsd_attr_set *out) {
    return rsdi_record_load(st, key, ".attr", out);
}

RSD_API int rsd_state_used_load(rsd_state *st, const char *key, rsd_attr_set *out) {
    return rsdi_record_load(st, key, ".used", out);
}

/* The state's scratch set: a record read into it is valid until the next state call. */
RSDI_PRIVATE rsd_attr_set *rsdi_state_scratch(rsd_state *st) { return &st->scratch; }

/* One non-blocking attempt at key's attribution-file lock: RSD_OK = held, else lk is IDLE. */
RSDI_PRIVATE int rsdi_attr_lock_try(rsd_state *st, rsd_state_lock *lk, const char *key) {
    int r = rsd_state_attr_lock_begin(st, lk, key, 0, 1);
    if (r < 0) return r;
    r = rsdi_state_lock_code(st, lk, 0);
    if (r != RSD_OK) rsd_state_unlock(st, lk);
    return r;
}

/* Takes key's attribution-file lock, blocking (the step loop with sleeps) for at most
   RSD_STATE_ATTR_LOCK_WAIT_MS: RSD_OK, RSD_ERR_TIMEOUT (ATTR_LOCK_TIMEOUT logged) or <0. */
RSDI_PRIVATE int rsdi_attr_lock_wait(rsd_state *st, rsd_state_lock *lk, const char *key) {
    uint64_t now = rsdi_state_mono_ms();
    int r = rsd_state_attr_lock_begin(st, lk, key, now, 0);
    if (r < 0) return r;
    r = rsdi_state_lock_loop(st, lk, now);
    if (r != RSD_OK) rsd_state_unlock(st, lk);
    return r;
}

/* Atomically replaces path with data: temp file, (fsync), rename. The directory is not
   fsynced: after a crash a reader finds the old or the new version, both valid. The
   caller holds the attribution file lock, so the temp name can be fixed. */
/* Writes set's file image to fd through st->filebuf, a chunk at a time. */
RSDI_PRIVATE bool rsdi_attr_write_fd(rsd_state *st, int fd, const rsd_attr_set *set) {
    size_t n = 0, i;
    for (i = 0; i <= set->count + 1; i++) {
        if (rsdi_attr_format_part(set, i, st->filebuf, sizeof st->filebuf, &n) == RSD_OK) continue;
        if (!rsdi_state_write_all(fd, st->filebuf, n, 0, false)) return false; /* full: out with it, and again */
        n = 0;
        if (rsdi_attr_format_part(set, i, st->filebuf, sizeof st->filebuf, &n) != RSD_OK) {
            errno = EINVAL; /* never: one part fits the chunk */
            return false;
        }
    }
    return rsdi_state_write_all(fd, st->filebuf, n, 0, false);
}

/* Replaces path with data[0..n) -- or, with set, that record's file image -- through a
   temp file and a rename (fsync first with sync). */
RSDI_PRIVATE int rsdi_state_replace(rsd_state *st, const char *path, const char *data, size_t n,
                                    const rsd_attr_set *set, bool sync) {
    char tmp[RSDI_STATE_PATH_BYTES + 8];
    int fd, err;
    bool ok;
    (void)RSD_SNPRINTF(tmp, sizeof tmp, "%s.tmp", path);
    rsdi_state_unlink(tmp);  /* a stale temp of a writer that died */
    fd = rsdi_state_open_ex(tmp, O_WRONLY, true, true);
    if (fd < 0) goto fail;
    ok = (set ? rsdi_attr_write_fd(st, fd, set) : rsdi_state_write_all(fd, data, n, 0, false)) &&
         (!sync || rsdi_state_fsync(fd));
    err = errno;
#if defined(_WIN32)
    if (_close(fd) != 0 && ok) {
#else
    if (close(fd) != 0 && ok) {
#endif
        ok = false;
        err = errno;
    }
    if (ok && rsdi_state_rename(tmp, path) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        rsdi_state_unlink(tmp);
        errno = err;
        goto fail;
    }
    return RSD_OK;
fail:
    rsdi_state_sys_fail(st, RSD_LOG_ERROR, RSD_LOGITEM_ATTR_WRITE_FAILED, "write", path, errno, false);
    return RSD_ERR_STATE_IO;
}

RSDI_PRIVATE int rsdi_attr_write(rsd_state *st, const char *path, const rsd_attr_set *set) {
    size_t i;
    if (set->count > RSD_STATE_MAX_ATTR) return RSD_ERR_ARG;
    for (i = 0; i < set->count; i++) { /* what rsdi_attr_format refuses, before the file is touched */
        const rsd_attr *a = &set->items[i];
        if (!a->model || !a->model[0] || !a->instance || a->pid < 0) return RSD_ERR_ARG;
    }
    return rsdi_state_replace(st, path, NULL, 0, set, st->attr_fsync);
}

RSDI_PRIVATE bool rsdi_attr_change_ok(const rsd_attr_change *c) {
    return c->model && c->model[0] && strlen(c->model) <= RSD_STATE_MAX_ID_BYTES &&
           (!c->instance || strlen(c->instance) <= RSD_STATE_MAX_ID_BYTES);
}

/* Applies one change to set in memory: entries removed (>= 0; an add: 0, or 1 when a last
   use was not newer than the one recorded), RSD_ERR_CAPACITY (a new entry in a full set)
   or RSD_ERR_TOO_LARGE (its ids do not fit the arena); the set is unchanged on an error.
   full_drops_oldest: the last-use record, where a full set replaces its oldest entry and a
   use never goes back. */
RSDI_PRIVATE int rsdi_attr_set_apply(rsd_attr_set *set, const rsd_attr_change *c, uint64_t loaded_at_ms, int64_t pid,
                                     bool full_drops_oldest) {
    size_t i, o;
    int removed = 0;
    if (!c->remove) {
        const char *inst = c->instance ? c->instance : "";
        int at = rsd_attr_set_find(set, c->model, inst);
        if (at >= 0 && full_drops_oldest && set->items[at].loaded_at_ms >= loaded_at_ms)
            return 1; /* last uses never go back (another process may have recorded a later one) */
        if (at < 0 && set->count >= RSD_STATE_MAX_ATTR && full_drops_oldest) { /* last uses: the oldest goes */
            at = 0;
            for (i = 1; i < set->count; i++)
                if (set->items[i].loaded_at_ms < set->items[at].loaded_at_ms) at = (int)i;
        }
        if (at < 0) {
            if (set->count >= RSD_STATE_MAX_ATTR) return RSD_ERR_CAPACITY;
            at = (int)set->count;
        }
        if (!rsdi_attr_set_put(set, (size_t)at, c->model, inst, loaded_at_ms, pid)) return RSD_ERR_TOO_LARGE;
        if ((size_t)at == set->count) set->count++;
        return 0;
    }
    for (i = 0, o = 0; i < set->count; i++) {
        const rsd_attr *a = &set->items[i];
        if (strcmp(a->model, c->model) == 0 && (!c->instance || strcmp(a->instance, c->instance) == 0)) {
            removed++;
            continue;
        }
        if (o != i) set->items[o] = *a;
        o++;
    }
    set->count = o;
    return removed;
}

/* rsdi_attr_set_apply for the state's records, with this process's pid; a change that
   finds no room is logged (ATTR_FULL) and told in rsd_state_last_error, and answers
   RSD_ERR_CAPACITY. */
RSDI_PRIVATE int rsdi_attr_apply(rsd_state *st, const char *key, rsd_attr_set *set,
                                 const rsd_attr_change *c, uint64_t loaded_at_ms, bool full_drops_oldest) {
    int r = rsdi_attr_set_apply(set, c, loaded_at_ms, (int64_t)rsdi_state_pid(), full_drops_oldest);
    if (r == RSD_ERR_CAPACITY) {
        rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_FULL, RSDI_WHERE, "%s: %u entries", key,
                  (unsigned)set->count);
        rsdi_state_detail(st, "attribution of %s is full (%u entries): '%s' not recorded", key,
                          (unsigned)set->count, c->model);
    } else if (r == RSD_ERR_TOO_LARGE) {
        rsdi_logf(&st->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_FULL, RSDI_WHERE, "%s: %lu bytes of ids", key,
                  (unsigned long)set->arena_used);
        rsdi_state_detail(st, "attribution of %s: its ids fill the %lu bytes of attr_arena_bytes (raise it): "
                          "'%s' not recorded", key, (unsigned long)set->arena_bytes, c->model);
        r = RSD_ERR_CAPACITY;
    }
    return r;
}

/* Under the attribution-file lock: read, apply changes[0..n), write when anything changed
   (a corrupt file is moved aside and rewritten). RSD_OK (or the count removed with
   count_removed) or the first error; the changes that could be applied are written even
   when one failed (RSD_ERR_CAPACITY). */
RSDI_PRIVATE int rsdi_record_update_locked(rsd_state *st, const char *key, const char *ext,
                                           const rsd_attr_change *ch, int n, uint64_t loaded_at_ms,
                                           bool count_removed) {
    char path[RSDI_STATE_PATH_BYTES];
    rsd_attr_set *set = &st->scratch;
    int r, i, removed = 0, err = RSD_OK;
    bool changed = false, used = strcmp(ext, ".used") == 0;
    if ((r = rsdi_key_path(st, key, "attr", ext, path)) < 0) return r;
    r = rsdi_attr_read(st, path, set);
    if (r < 0) return r;
    if (set->corrupt) {
        rsdi_attr_set_aside(path, set);
        rsdi_attr_log_corrupt(st, set);
        changed = true; /* rewritten: empty plus the changes */
    }
    for (i = 0; i < n; i++) {
        r = rsdi_attr_apply(st, key, set, &ch[i], loaded_at_ms, used);
        if (r < 0) {
            if (err == RSD_OK) err = r;
            continue;
        }
        if (ch[i].remove) removed += r;
        changed = changed || (ch[i].remove ? r > 0 : r == 0); /* an add answers 1 when nothing changed */
    }
    if (changed && (r = rsdi_attr_write(st, path, set)) < 0) return r;
    if (err < 0) return err;
    return count_removed ? removed : RSD_OK;
}

RSDI_PRIVATE int rsdi_attr_update_locked(rsd_state *st, const char *key, const rsd_attr_change *ch,
                                         int n, uint64_t loaded_at_ms, bool count_removed) {
    return rsdi_record_update_locked(st, key, ".attr", ch, n, loaded_at_ms, count_removed);
}

/* One blocking change (rsd_state_attr_add_sync / _remove): lock, update, unlock. */
RSDI_PRIVATE int rsdi_attr_modify(rsd_state *st, const char *key, const char *model,
                                  const char *instance, uint64_t loaded_at_ms, bool remove) {
    char name[RSD_STATE_MAX_NAME_BYTES];
    rsd_state_lock lk;
    rsd_attr_change c;
    int r;
    c.model = model;
    c.instance = instance;
    c.remove = remove;
    if (!st || !key || !rsdi_attr_change_ok(&c)) return RSD_ERR_ARG;
    if (rsd_state_file_name(key, name, sizeof name) < 0) return RSD_ERR_ARG;
    memset(&lk, 0, sizeof lk);
    r = rsdi_attr_lock_wait(st, &lk, key);
    if (r < 0) return r == RSD_ERR_TIMEOUT ? RSD_ERR_LOCK : r;
    r = rsdi_attr_update_locked(st, key, &c, 1, loaded_at_ms, remove);
    rsd_state_unlock(st, &lk);
    return r;
}

RSD_API int rsd_state_attr_add_sync(rsd_state *st, const char *key, const char *model,
                                    const char *instance, uint64_t loaded_at_ms) {
    return rsdi_attr_modify(st, key, model, instance, loaded_at_ms, false);
}

RSD_API int rsd_state_attr_remove_sync(rsd_state *st, const char *key, const char *model,
                                       const char *instance) {
    return rsdi_attr_modify(st, key, model, instance, 0, true);
}

/* ---- last uses: attr/<name>.used, the attribution's format and file lock ----------- */
RSDI_PRIVATE int rsdi_used_touch(rsd_state *st, const char *key, const char *model, uint64_t used_ms,
                                 bool wait) {
    rsd_state_lock lk;
    rsd_attr_change c;
    int r;
    c.model = model;
    c.instance = NULL;
    c.remove = false;
    if (!st || !key || !rsdi_attr_change_ok(&c) || !used_ms) return RSD_ERR_ARG;
    memset(&lk, 0, sizeof lk);
    r = wait ? rsdi_attr_lock_wait(st, &lk, key) : rsdi_attr_lock_try(st, &lk, key);
    if (r == RSD_PENDING) return RSD_PENDING;
    if (r < 0) return r == RSD_ERR_TIMEOUT ? RSD_ERR_LOCK : r;
    r = rsdi_record_update_locked(st, key, ".used", &c, 1, used_ms, false);
    rsd_state_unlock(st, &lk);
    return r;
}

RSD_API int rsd_state_used_touch(rsd_state *st, const char *key, const char *model, uint64_t used_ms) {
    return rsdi_used_touch(st, key, model, used_ms, false);
}

RSD_API int rsd_state_used_touch_sync(rsd_state *st, const char *key, const char *model, uint64_t used_ms) {
    return rsdi_used_touch(st, key, model, used_ms, true);
}

/* ---- cross-process mutation generation ------------------------------------- */
/* The change counter (attr/gen.seq, 64 bytes mapped shared): every generation change in
   the directory adds one after its file is in place, so a reader that finds the count it
   last read a generation file under can keep that file's value without reading it. Only
   where this compiler has atomics and the system mmap; elsewhere every read opens the file. */
#if !defined(_WIN32) && (defined(__GNUC__) || defined(__clang__))
#define RSDI_STATE_SEQ 1
#else
#define RSDI_STATE_SEQ 0
#endif

RSDI_PRIVATE void rsdi_state_seq_open(rsd_state *st) {
#if RSDI_STATE_SEQ
    char path[RSDI_STATE_PATH_BYTES];
    struct stat sb;
    void *m;
    int fd;
    if (rsdi_state_path(st, path, "attr", "gen", ".seq") < 0) return;
    fd = rsdi_state_open_file(path, O_RDWR, true);
    if (fd < 0) return;
    if (fstat(fd, &sb) != 0 || (sb.st_size < 64 && ftruncate(fd, 64) != 0)) {
        rsdi_state_close_fd(fd);
        return;
    }
    m = mmap(NULL, 64, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    rsdi_state_close_fd(fd);
    if (m != MAP_FAILED) st->seq = (volatile uint32_t *)m;
#else
    (void)st;
#endif
}

RSDI_PRIVATE void rsdi_state_seq_close(rsd_state *st) {
#if RSDI_STATE_SEQ
    if (st->seq) (void)munmap((void *)(uintptr_t)st->seq, 64);
#endif
    st->seq = NULL;
}

/* Some generation file changed: one more on the counter (the reader's acquire pairs
   with this release, so a new count means the new file is in place). */
RSDI_PRIVATE void rsdi_state_seq_bump(rsd_state *st) {
#if RSDI_STATE_SEQ
    if (st->seq) (void)__atomic_fetch_add(st->seq, 1u, __ATOMIC_RELEASE);
#else
    (void)st;
#endif
}

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

RSD_API int rsd_state_gen_read(rsd_state *st, const char *key, uint64_t *out) {
    char path[RSDI_STATE_PATH_BYTES];
    uint32_t seq = 0;
    bool counted;
    int r;
    if (!out) return RSD_ERR_ARG;
    *out = 0;
    counted = st && key && st->seq;
#if RSDI_STATE_SEQ
    if (counted) {
        seq = __atomic_load_n(st->seq, __ATOMIC_ACQUIRE);
        if (st->gen_key[0] && seq == st->gen_seq && strcmp(st->gen_key, key) == 0) {
            *out = st->gen_val; /* nothing changed since that file was read */
            return RSD_OK;
        }
    }
#endif
    r = rsdi_key_path(st, key, "attr", ".gen", path);
    if (r < 0) return r;
    r = rsdi_state_gen_read_path(st, path, out);
    if (counted) {
        size_t n = strlen(key);
        st->gen_key[0] = '\0';
        if (r == RSD_OK && n < sizeof st->gen_key) {
            memcpy(st->gen_key, key, n + 1);
            st->gen_seq = seq; /* the count from before the read: a change since is seen next time */
            st->gen_val = *out;
        }
    }
    return r;
}

/* Under the attribution-file lock: generation + 1, replaced by rename. */
RSDI_PRIVATE int rsdi_state_gen_bump_locked(rsd_state *st, const char *path, uint64_t *out) {
    char buf[32];
    uint64_t g = 0;
    int r, n;
    /* A corrupt value restarts from the wall clock, never from a small number that a
       cache may still hold. */
    if (rsdi_state_gen_read_path(st, path, &g) < 0) g = rsdi_state_wall_ms();
    g = g == UINT64_MAX ? 1 : g + 1;
    n = RSD_SNPRINTF(buf, sizeof buf, "%llu\n", (unsigned long long)g);
    r = rsdi_state_replace(st, path, buf, (size_t)n, NULL, false);
    rsdi_state_seq_bump(st); /* even after a failed write: readers must look again */
    if (r == RSD_OK && out) *out = g;
    return r;
}

RSD_API int rsd_state_gen_bump_sync(rsd_state *st, const char *key, uint64_t *out) {
    char path[RSDI_STATE_PATH_BYTES];
    rsd_state_lock lk;
    int r;
    if (out) *out = 0;
    r = rsdi_key_path(st, key, "attr", ".gen", path);
    if (r < 0) return r;
    memset(&lk, 0, sizeof lk);
    r = rsdi_attr_lock_wait(st, &lk, key);
    if (r < 0) return r == RSD_ERR_TIMEOUT ? RSD_ERR_LOCK : r;
    r = rsdi_state_gen_bump_locked(st, path, out);
    rsd_state_unlock(st, &lk);
    return r;
}

RSD_API int rsd_state_attr_commit(rsd_state *st, rsd_state_lock *lk, const rsd_attr_change *changes,
                                  int n, uint64_t loaded_at_ms, uint64_t *gen_out) {
    char path[RSDI_STATE_PATH_BYTES];
    int r = RSD_OK, g, i;
    if (gen_out) *gen_out = 0;
    if (!st || !lk || n < 0 || (n && !changes)) return RSD_ERR_ARG;
    if (!lk->attr || lk->state != RSD_LOCK_HELD) return RSD_ERR_STATE;
    for (i = 0; i < n; i++)
        if (!rsdi_attr_change_ok(&changes[i])) return RSD_ERR_ARG;
    st->detail[0] = '\0';
    if (n > 0) r = rsdi_attr_update_locked(st, lk->key, changes, n, loaded_at_ms, false);
    g = rsdi_key_path(st, lk->key, "attr", ".gen", path);
    if (g == RSD_OK) { /* even after a failed write: other processes must drop their caches */
        char first[RSD_STATE_DETAIL_BYTES];
        memcpy(first, st->detail, sizeof first);
        g = rsdi_state_gen_bump_locked(st, path, gen_out);
        if (r < 0) memcpy(st->detail, first, sizeof first); /* the first failure is the one to tell */
    }
    return r < 0 ? r : g;
}
/* ---- records under an older version's key ------------------------------------------- */
/* One pass of the key rule older versions applied to "<runtime>|<url>": what comes before
   the host's end lower-cased, a default port spelled ":80" (http) or ":443" (https) after
   a host with no ':' dropped, then query, fragment and trailing '/' -- the path
   (".../v1"), a port's leading zeros and ws:// kept. Its length, or <0. */
RSDI_PRIVATE int rsdi_state_legacy_pass(const char *s, char *out, size_t cap) {
    const char *sep = strstr(s, "://");
    size_t n = strlen(s), hb = 0, he = 0, skip = 0, end, sb, i, o = 0;
    if (sep) {
        const char *dp = NULL;
        size_t se = (size_t)(sep - s);
        for (sb = se; sb > 0 && s[sb - 1] != '|'; sb--) {}
        if (se - sb == 4 && rsdi_ieq_lit(s + sb, 4, "http")) dp = ":80";
        if (se - sb == 5 && rsdi_ieq_lit(s + sb, 5, "https")) dp = ":443";
        hb = se + 3;
        for (he = hb; s[he] && s[he] != '/' && s[he] != '?' && s[he] != '#'; he++) {}
        if (dp && he - hb > strlen(dp) && memcmp(s + he - strlen(dp), dp, strlen(dp)) == 0) {
            size_t h = he - strlen(dp);
            bool plain = true;
            if (s[h - 1] != ']')
                for (i = hb; i < h; i++)
                    if (s[i] == ':') plain = false;
            if (plain) skip = strlen(dp);
        }
    }
    end = sep ? he + strcspn(s + he, "?#") : n;
    while (end > he && s[end - 1] == '/') end--;
    for (i = 0; i < end; i++) {
        if (i >= he - skip && i < he) continue;
        if (o + 1 >= cap) return RSD_ERR_BUFFER;
        out[o++] = i < he ? rsdi_ascii_lower(s[i]) : s[i];
    }
    if (cap == 0) return RSD_ERR_BUFFER;
    out[o] = '\0';
    return (int)o;
}

/* The key an older version gave raw: its pass repeated until stable. */
RSDI_PRIVATE int rsdi_state_legacy_key(const char *raw, char *out, size_t cap) {
    char tmp[RSD_STATE_MAX_KEY_BYTES + 1];
    int r = rsdi_state_legacy_pass(raw, out, cap), k;
    for (k = 0; r > 0 && (size_t)r < sizeof tmp && k < 8; k++) {
        memcpy(tmp, out, (size_t)r + 1);
        r = rsdi_state_legacy_pass(tmp, out, cap);
        if (strcmp(tmp, out) == 0) break;
    }
    return r;
}

/* Moves what an older version recorded under old_key (attr/<name>.attr, .used and .gen) to
   new_key's names, each only while new_key has none of its own, under new_key's
   attribution lock taken without waiting (busy: left for a later call). How many moved. */
RSDI_PRIVATE int rsdi_state_migrate(rsd_state *st, const char *old_key, const char *new_key) {
    static const char *const exts[3] = {".attr", ".used", ".gen"};
    char on[RSD_STATE_MAX_NAME_BYTES], nn[RSD_STATE_MAX_NAME_BYTES];
    char op[RSDI_STATE_PATH_BYTES], np[RSDI_STATE_PATH_BYTES];
    rsd_state_lock lk;
    int i, fd, moved = 0;
    bool any = false;
    if (!st || strcmp(old_key, new_key) == 0 || rsd_state_file_name(old_key, on, sizeof on) < 0 ||
        rsd_state_file_name(new_key, nn, sizeof nn) < 0)
        return 0;
    for (i = 0; i < 3 && !any; i++) { /* nothing under the old name (the usual case): no lock */
        if (rsdi_state_path(st, op, "attr", on, exts[i]) < 0) return 0;
        fd = rsdi_state_open_file(op, O_RDONLY, false);
        any = fd >= 0;
        rsdi_state_close_fd(fd);
    }
    memset(&lk, 0, sizeof lk);
    if (!any || rsdi_attr_lock_try(st, &lk, new_key) != RSD_OK) return 0;
    for (i = 0; i < 3; i++) {
        if (rsdi_state_path(st, op, "attr", on, exts[i]) < 0 || rsdi_state_path(st, np, "attr", nn, exts[i]) < 0)
            break;
        fd = rsdi_state_open_file(np, O_RDONLY, false);
        if (fd >= 0 || errno != ENOENT) { /* the new key has its own: the old one stays */
            rsdi_state_close_fd(fd);
            continue;
        }
        if (rsdi_state_rename(op, np) == 0) moved++;
    }
    rsd_state_unlock(st, &lk);
    if (moved) rsdi_state_seq_bump(st); /* a generation file may have moved in */
    if (moved)
        rsdi_logf(&st->logger, RSD_LOG_INFO, RSD_LOGITEM_STATE_MIGRATED, RSDI_WHERE,
                  "state: the records of '%s' moved to its current key '%s'", old_key, new_key);
    return moved;
}
/* ==== state end =========================================================== */

/* ==== >>etcd ============================================================== */
#ifndef RSD_NO_ETCD
/* Uses the HTTP client, the JSON module and the attribution format of the state section. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { RSDI_EO_NONE = 0, RSDI_EO_READ, RSDI_EO_LOCK, RSDI_EO_COMMIT };
enum { RSDI_EP_END = 0, RSDI_EP_GIVE_UP, RSDI_EP_AGAIN }; /* after the protections' pages */
enum { RSDI_ES_IDLE = 0, RSDI_ES_SEND, RSDI_ES_GRANT, RSDI_ES_TXN, RSDI_ES_SLEEP, RSDI_ES_AUTH };
enum {
    RSDI_ETCD_TOKS = 2048,      /* an answer's tokens: RSD_ETCD_MAX_KVS kvs of 13, the responses' frames */
    RSDI_ETCD_OWNER_BYTES = 512,
    RSDI_ETCD_KV_JSON = 640,    /* a kv's JSON besides its value: the base64 key, revisions, version, lease */
    RSDI_ETCD_REQUESTS = 3,     /* in flight at once: the operation's, a keepalive, a release */
    RSDI_ETCD_SLOT_BYTES = 4096 /* a slot's head and body (a keepalive's or a release's answer) */
};

typedef struct rsdi_etcd_kv {
    char key[RSD_ETCD_MAX_KEY_BYTES];
    size_t val_off, val_len;          /* into the answer's vals */
    int64_t create_rev, mod_rev;
} rsdi_etcd_kv;

/* One parsed gateway answer (every endpoint's shape: header, succeeded, responses[] of
   response_range kvs, top-level kvs, ID/TTL at the top or under "result", error/code). */
typedef struct rsdi_etcd_ans {
    int64_t revision, id, ttl, code;
    bool succeeded, has_error;
    bool big;                         /* a value did not fit the vals left (the answer is not read) */
    bool more;                        /* a range said more keys follow its limit (the protections') */
    int skipped;                      /* kvs not kept: an unreadable key or value, over RSD_ETCD_MAX_KVS */
    int after;                        /* the kv of the last key of the range that said more (-1: not kept) */
    char error[160];
    char token[1024];                 /* /v3/auth/authenticate */
    int n_kvs;
    rsdi_etcd_kv kvs[RSD_ETCD_MAX_KVS];
    char *vals;
    size_t vals_cap, vals_len;
} rsdi_etcd_ans;

struct rsd_etcd {
    bool end_owed;                    /* an operation was begun and its end not pulled yet */
    rsd_allocator alloc;
    rsd_logger logger;
    rsd_http_client *http;
    char root[RSD_HTTP_MAX_HOST_BYTES + 64];
    char prefix[RSD_ETCD_MAX_PREFIX_BYTES + 1];
    char host[RSD_ETCD_MAX_HOST_BYTES + 1];
    char auth[1024];
    char user[256], pass[256];
    bool has_auth, has_login, fail_closed, prot_published;
    uint32_t ttl_s, req_ms;
    int n_own;
    rsd_protected_model own[RSD_MAX_PROTECTED];
    char own_ids[RSD_MAX_PROTECTED][RSD_MODEL_ID_MAX];
    /* the lease */
    int64_t lease;
    uint64_t lease_ref;               /* when the lease was last granted or refreshed (sent) */
    bool ka_inflight;
    uint64_t ka_sent;
    rsd_http_req_h ka_h;
    /* a release in the background: the lock key deleted if its create_revision is unl_fence */
    bool unl_pending, unl_inflight;
    int64_t unl_fence;
    uint64_t unl_deadline;
    rsd_http_req_h unl_h;
    char unl_key[RSD_ETCD_MAX_KEY_BYTES];
    /* the operation */
    int op, sub, result, tries;
    bool inflight;
    rsd_http_req_h h;
    uint64_t wake, deadline, backoff, err_since, down_at, sent_at;
    bool busy_seen;                   /* the lock was found taken at least once */
    const rsd_attr_change *chg;
    int n_chg;
    uint64_t loaded_at;
    char purpose[RSD_STATE_MAX_PURPOSE_BYTES + 1];
    char k_lock[RSD_ETCD_MAX_KEY_BYTES], k_attr[RSD_ETCD_MAX_KEY_BYTES], k_gen[RSD_ETCD_MAX_KEY_BYTES];
    char k_prot[RSD_ETCD_MAX_KEY_BYTES], k_prot_self[RSD_ETCD_MAX_KEY_BYTES];
    char tkey[RSD_STATE_MAX_KEY_BYTES + 1];
    /* what is known */
    bool held, lost, has_gen, attr_corrupt;
    int64_t fence, attr_mod;
    uint64_t gen, gen_next;
    rsd_attr_set attrs, next;
    int n_rprot;
    rsd_protected_model rprot[RSD_MAX_PROTECTED];
    char rprot_ids[RSD_MAX_PROTECTED][RSD_MODEL_ID_MAX];
    bool prot_incomplete;             /* some host's protections are not known (prot_why says why) */
    char prot_why[192];
    /* the protections' further pages, read before the operation ends with pg_end */
    bool pg_more, paging;
    int pg_end, pg_then;              /* then: RSDI_EP_END, RSDI_EP_GIVE_UP (a lock), RSDI_EP_AGAIN (a commit) */
    int64_t pg_rev;                   /* the first answer's revision: every page reads that one */
    char pg_after[RSD_ETCD_MAX_KEY_BYTES]; /* the next page starts after this key */
    char owner[RSDI_ETCD_OWNER_BYTES];
    char message[512];
    char url[RSD_HTTP_MAX_HOST_BYTES + 96];
    /* after the struct and the two sets' ids (rsdi_etcd_sizes): */
    char *attr_text;                  /* an attribution as written (text_cap: any record the sets hold) */
    char *body;                       /* the operation's request as built, then its answer (body_cap) */
    size_t text_cap, req_cap, body_cap;
    rsdi_etcd_ans ans;                /* its vals (vals_cap) after the body */
    rsd_json_tok toks[RSDI_ETCD_TOKS];
};

RSDI_PRIVATE uint64_t rsdi_etcd_wall_ms(void) { return rsdi_wall_ms(); }

/* ---- base64 (RFC 4648, padded) ------------------------------------------------ */
RSDI_PRIVATE size_t rsdi_b64_len(size_t n) { return (n + 2) / 3 * 4; }

RSDI_PRIVATE size_t rsdi_b64_encode(const unsigned char *s, size_t n, char *out) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i, o = 0;
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        out[o++] = a[(v >> 18) & 63];
        out[o++] = a[(v >> 12) & 63];
        out[o++] = a[(v >> 6) & 63];
        out[o++] = a[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) v |= (uint32_t)s[i + 1] << 8;
        out[o++] = a[(v >> 18) & 63];
        out[o++] = a[(v >> 12) & 63];
        out[o++] = i + 1 < n ? a[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    return o;
}

RSDI_PRIVATE int rsdi_b64_val(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict decode of s[0..n) into out (cap bytes): the length, or -1 (bad input, too long). */
RSDI_PRIVATE long rsdi_b64_decode(const char *s, size_t n, char *out, size_t cap) {
    size_t i, o = 0;
    if (n % 4) return -1;
    for (i = 0; i < n; i += 4) {
        int v0 = rsdi_b64_val(s[i]), v1 = rsdi_b64_val(s[i + 1]), v2, v3;
        bool last = i + 4 == n;
        uint32_t v;
        if (v0 < 0 || v1 < 0) return -1;
        v2 = (last && s[i + 2] == '=') ? -2 : rsdi_b64_val(s[i + 2]);
        v3 = (last && s[i + 3] == '=') ? -2 : rsdi_b64_val(s[i + 3]);
        if (v2 == -1 || v3 == -1 || (v2 == -2 && v3 != -2)) return -1;
        v = ((uint32_t)v0 << 18) | ((uint32_t)v1 << 12) | ((uint32_t)(v2 < 0 ? 0 : v2) << 6) |
            (uint32_t)(v3 < 0 ? 0 : v3);
        if (o + 3 > cap && (o + (size_t)(v2 < 0 ? 1 : v3 < 0 ? 2 : 3) > cap)) return -1;
        out[o++] = (char)(v >> 16);
        if (v2 >= 0) out[o++] = (char)((v >> 8) & 0xff);
        if (v3 >= 0) out[o++] = (char)(v & 0xff);
    }
    return (long)o;
}

/* ---- the gateway's answers -------------------------------------------------------- */
/* An int64 written as a JSON string ("123", as the gateway writes them) or a number. */
RSDI_PRIVATE bool rsdi_etcd_i64(const rsd_json_doc *d, int t, int64_t *out) {
    rsd_str v;
    size_t i;
    int64_t x = 0;
    if (t < 0) return false;
    if (rsd_json_type_of(d, t) == RSD_JSON_NUMBER) return rsd_json_int64(d, t, out) == RSD_OK;
    if (rsd_json_type_of(d, t) != RSD_JSON_STRING) return false;
    v = rsd_json_view(d, t);
    if (v.len == 0 || v.len > 19) return false;
    for (i = 0; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9') return false;
        if (x > (INT64_MAX - (v.ptr[i] - '0')) / 10) return false;
        x = x * 10 + (v.ptr[i] - '0');
    }
    *out = x;
    return true;
}

/* A base64 JSON string into buf (cap): the length, or -1. */
RSDI_PRIVATE long rsdi_etcd_b64_tok(const rsd_json_doc *d, int t, char *buf, size_t cap) {
    rsd_str v;
    if (t < 0 || rsd_json_type_of(d, t) != RSD_JSON_STRING) return -1;
    v = rsd_json_view(d, t); /* the base64 alphabet has no JSON escapes but "\/" */
    if (memchr(v.ptr, '\\', v.len)) {
        char tmp[RSD_ETCD_MAX_KEY_BYTES * 2];
        size_t n;
        if (rsd_json_str(d, t, tmp, sizeof tmp, &n) != RSD_OK) return -1;
        return rsdi_b64_decode(tmp, n, buf, cap);
    }
    return rsdi_b64_decode(v.ptr, v.len, buf, cap);
}

/* The kvs of one range (obj: its response, arr: its "kvs"). When it says "more", a->after
   is the kv of its last key (the next page starts after it), -1 when that one was not kept. */
RSDI_PRIVATE void rsdi_etcd_kvs(const rsd_json_doc *d, int obj, int arr, rsdi_etcd_ans *a) {
    int k;
    bool more = false, last_kept = false;
    if (rsd_json_bool(d, rsd_json_find(d, obj, "more"), &more) == RSD_OK && more) {
        a->more = true;
        a->after = -1;
    }
    if (rsd_json_type_of(d, arr) != RSD_JSON_ARRAY) return;
    for (k = rsd_json_child(d, arr); k >= 0; k = rsd_json_next(d, k)) {
        rsdi_etcd_kv *kv;
        long n;
        int v;
        last_kept = false;
        if (rsd_json_type_of(d, k) != RSD_JSON_OBJECT) continue;
        if (a->n_kvs >= RSD_ETCD_MAX_KVS) { /* further ones are dropped */
            a->skipped++;
            continue;
        }
        kv = &a->kvs[a->n_kvs];
        memset(kv, 0, sizeof *kv);
        n = rsdi_etcd_b64_tok(d, rsd_json_find(d, k, "key"), kv->key, sizeof kv->key - 1);
        if (n <= 0 || memchr(kv->key, '\0', (size_t)n)) { /* not a key of ours */
            a->skipped++;
            continue;
        }
        kv->key[n] = '\0';
        v = rsd_json_find(d, k, "value");
        kv->val_off = a->vals_len;
        if (v >= 0) {
            n = rsdi_etcd_b64_tok(d, v, a->vals + a->vals_len, a->vals_cap - a->vals_len);
            if (n < 0) { /* bad, or no room for it (whatever it holds): the reader says so */
                a->big |= rsd_json_view(d, v).len / 4 * 3 > a->vals_cap - a->vals_len + 2;
                a->skipped++;
                continue;
            }
            kv->val_len = (size_t)n;
            a->vals_len += (size_t)n;
        }
        (void)rsdi_etcd_i64(d, rsd_json_find(d, k, "create_revision"), &kv->create_rev);
        (void)rsdi_etcd_i64(d, rsd_json_find(d, k, "mod_revision"), &kv->mod_rev);
        a->n_kvs++;
        last_kept = true;
    }
    if (more) a->after = last_kept ? a->n_kvs - 1 : -1;
}

/* Parses one answer body into a (a->vals/vals_cap set by the caller). RSD_OK or RSD_ERR_JSON /
   RSD_ERR_PAYLOAD (not an object). Never reads beyond body[len). */
RSDI_PRIVATE int rsdi_etcd_parse(const char *body, size_t len, rsd_json_tok *toks, uint32_t ntoks,
                                 rsdi_etcd_ans *a) {
    rsd_json_doc d;
    int root, t, r, k;
    char *vals = a->vals;
    size_t cap = a->vals_cap;
    memset(a, 0, sizeof *a);
    a->vals = vals;
    a->vals_cap = cap;
    a->after = -1;
    r = rsd_json_parse(&d, body, len, toks, ntoks);
    if (r < 0) return RSD_ERR_JSON;
    root = 0;
    if (rsd_json_type_of(&d, root) != RSD_JSON_OBJECT) return RSD_ERR_PAYLOAD;
    (void)rsdi_etcd_i64(&d, rsd_json_find(&d, rsd_json_find(&d, root, "header"), "revision"), &a->revision);
    if ((t = rsd_json_find(&d, root, "succeeded")) >= 0) (void)rsd_json_bool(&d, t, &a->succeeded);
    if ((t = rsd_json_find(&d, root, "token")) >= 0 &&
        rsd_json_str(&d, t, a->token, sizeof a->token, NULL) != RSD_OK)
        a->token[0] = '\0';
    if ((t = rsd_json_find(&d, root, "error")) >= 0) {
        a->has_error = true;
        if (rsd_json_str(&d, t, a->error, sizeof a->error, NULL) == RSD_ERR_JSON_TYPE) a->error[0] = '\0';
        (void)rsdi_etcd_i64(&d, rsd_json_find(&d, root, "code"), &a->code);
    }
    t = rsd_json_find(&d, root, "result");
    t = rsd_json_type_of(&d, t) == RSD_JSON_OBJECT ? t : root;
    (void)rsdi_etcd_i64(&d, rsd_json_find(&d, t, "ID"), &a->id);
    (void)rsdi_etcd_i64(&d, rsd_json_find(&d, t, "TTL"), &a->ttl);
    if (a->revision == 0) (void)rsdi_etcd_i64(&d, rsd_json_find(&d, rsd_json_find(&d, t, "header"), "revision"),
                                              &a->revision);
    rsdi_etcd_kvs(&d, root, rsd_json_find(&d, root, "kvs"), a);
    t = rsd_json_find(&d, root, "responses");
    if (rsd_json_type_of(&d, t) == RSD_JSON_ARRAY)
        for (k = rsd_json_child(&d, t); k >= 0; k = rsd_json_next(&d, k)) {
            int rr = rsd_json_find(&d, k, "response_range");
            if (rsd_json_type_of(&d, rr) == RSD_JSON_OBJECT) rsdi_etcd_kvs(&d, rr, rsd_json_find(&d, rr, "kvs"), a);
        }
    return RSD_OK;
}

/* ---- building requests ------------------------------------------------------------ */
typedef struct rsdi_etcd_w {
    char *buf;
    size_t cap, n;
    bool over;
} rsdi_etcd_w;

RSDI_PRIVATE void rsdi_ew_raw(rsdi_etcd_w *w, const char *s) {
    size_t l = strlen(s);
    if (w->over || l > w->cap - w->n) {
        w->over = true;
        return;
    }
    memcpy(w->buf + w->n, s, l);
    w->n += l;
}

RSDI_PRIVATE void rsdi_ew_b64(rsdi_etcd_w *w, const char *s, size_t n) {
    if (w->over || rsdi_b64_len(n) + 2 > w->cap - w->n) {
        w->over = true;
        return;
    }
    w->buf[w->n++] = '"';
    w->n += rsdi_b64_encode((const unsigned char *)s, n, w->buf + w->n);
    w->buf[w->n++] = '"';
}

RSDI_PRIVATE void rsdi_ew_i64(rsdi_etcd_w *w, int64_t v) {
    char num[32];
    (void)RSD_SNPRINTF(num, sizeof num, "\"%lld\"", (long long)v);
    rsdi_ew_raw(w, num);
}

/* {"key":K[,"range_end":E]} as a request_range */
RSDI_PRIVATE void rsdi_ew_range(rsdi_etcd_w *w, const char *key, bool prefix) {
    rsdi_ew_raw(w, "{\"request_range\":{\"key\":");
    rsdi_ew_b64(w, key, strlen(key));
    if (prefix) { /* every key that starts with key: the end is key with its last byte + 1 */
        char end[RSD_ETCD_MAX_KEY_BYTES];
        size_t l = strlen(key);
        memcpy(end, key, l);
        end[l - 1] = (char)(end[l - 1] + 1);
        rsdi_ew_raw(w, ",\"range_end\":");
        rsdi_ew_b64(w, end, l);
        rsdi_ew_raw(w, ",\"limit\":");
        rsdi_ew_i64(w, RSD_ETCD_MAX_KVS - 3); /* the answer's other kvs: the lock, attribution, generation */
    }
    rsdi_ew_raw(w, "}}");
}

RSDI_PRIVATE void rsdi_ew_put(rsdi_etcd_w *w, const char *key, const char *val, size_t n, int64_t lease) {
    rsdi_ew_raw(w, "{\"request_put\":{\"key\":");
    rsdi_ew_b64(w, key, strlen(key));
    rsdi_ew_raw(w, ",\"value\":");
    rsdi_ew_b64(w, val, n);
    if (lease) {
        rsdi_ew_raw(w, ",\"lease\":");
        rsdi_ew_i64(w, lease);
    }
    rsdi_ew_raw(w, "}}");
}

/* the three reads every answer carries: attribution, generation, every host's protections */
RSDI_PRIVATE void rsdi_ew_reads(rsdi_etcd_w *w, const rsd_etcd *co) {
    rsdi_ew_range(w, co->k_attr, false);
    rsdi_ew_raw(w, ",");
    rsdi_ew_range(w, co->k_gen, false);
    rsdi_ew_raw(w, ",");
    rsdi_ew_range(w, co->k_prot, true);
}

/* The protections' next page (a /v3/kv/range): the keys after pg_after up to the range's
   end, at the first answer's revision, RSD_ETCD_MAX_KVS of them. */
RSDI_PRIVATE void rsdi_ew_prot_page(rsdi_etcd_w *w, const rsd_etcd *co) {
    char k[RSD_ETCD_MAX_KEY_BYTES + 1];
    size_t l = strlen(co->pg_after);
    memcpy(k, co->pg_after, l + 1); /* the smallest key after it: the key with a NUL added */
    rsdi_ew_raw(w, "{\"key\":");
    rsdi_ew_b64(w, k, l + 1);
    l = strlen(co->k_prot);
    memcpy(k, co->k_prot, l);
    k[l - 1] = (char)(k[l - 1] + 1);
    rsdi_ew_raw(w, ",\"range_end\":");
    rsdi_ew_b64(w, k, l);
    rsdi_ew_raw(w, ",\"limit\":");
    rsdi_ew_i64(w, RSD_ETCD_MAX_KVS);
    if (co->pg_rev > 0) {
        rsdi_ew_raw(w, ",\"revision\":");
        rsdi_ew_i64(w, co->pg_rev);
    }
    rsdi_ew_raw(w, "}");
}

/* ---- what an answer says ----------------------------------------------------------- */
RSDI_PRIVATE int rsdi_etcd_role_parse(const char *s) {
    int r;
    for (r = 0; r < (int)RSD_ROLE_NUM; r++)
        if (strcmp(rsd_role_str(r), s) == 0) return r;
    return 0;
}

/* Some host's protections stay unknown: the first reason is kept and logged. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
RSDI_PRIVATE void rsdi_etcd_prot_unknown(rsd_etcd *co, const char *fmt, ...) {
    va_list ap;
    if (co->prot_incomplete) return;
    co->prot_incomplete = true;
    va_start(ap, fmt);
    (void)vsnprintf(co->prot_why, sizeof co->prot_why, fmt, ap);
    va_end(ap);
    rsdi_logf(&co->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_READ_FAILED, RSDI_WHERE,
              "etcd %s*: other hosts' protections known only in part: %s", co->k_prot, co->prot_why);
}

/* One host's protection record (key, value v of n bytes): its models join the others', each
   model once (a role given by any host wins over a bare entry). */
RSDI_PRIVATE void rsdi_etcd_take_prot(rsd_etcd *co, const char *key, const char *v, size_t n) {
    size_t k;
    if (rsdi_attr_parse(v, n, &co->next) < 0) { /* someone's record we cannot read: said, not trusted */
        if (co->next.over)
            rsdi_etcd_prot_unknown(co, "the record %.96s needs %lu bytes of ids, over attr_arena_bytes (%lu)", key,
                                   (unsigned long)co->next.arena_used, (unsigned long)co->next.arena_bytes);
        else
            rsdi_etcd_prot_unknown(co, "the record %.96s is not a valid protection list", key);
        return;
    }
    for (k = 0; k < co->next.count; k++) {
        const rsd_attr *p = &co->next.items[k];
        int role = rsdi_etcd_role_parse(p->instance), j;
        size_t l = strlen(p->model);
        if (l == 0 || l >= RSD_MODEL_ID_MAX) continue;
        for (j = 0; j < co->n_rprot && strcmp(co->rprot_ids[j], p->model) != 0; j++) {}
        if (j < co->n_rprot) { /* protected already */
            if (co->rprot[j].role == RSD_ROLE_NONE) co->rprot[j].role = (rsd_role)role;
            continue;
        }
        if (co->n_rprot >= RSD_MAX_PROTECTED) {
            rsdi_etcd_prot_unknown(co, "over %d distinct protected models (RSD_MAX_PROTECTED)", (int)RSD_MAX_PROTECTED);
            continue;
        }
        memcpy(co->rprot_ids[co->n_rprot], p->model, l + 1);
        co->rprot[co->n_rprot].model_id = rsd_str_c(co->rprot_ids[co->n_rprot]);
        co->rprot[co->n_rprot].role = (rsd_role)role;
        co->n_rprot++;
    }
}

/* The protections of an answer (the first one's range, or a page): every record but this
   host's own; whether another page follows (pg_more, after pg_after). */
RSDI_PRIVATE void rsdi_etcd_take_prots(rsd_etcd *co, const rsdi_etcd_ans *a) {
    int i;
    size_t pl = strlen(co->k_prot);
    for (i = 0; i < a->n_kvs; i++) {
        const rsdi_etcd_kv *kv = &a->kvs[i];
        if (strncmp(kv->key, co->k_prot, pl) == 0 && strcmp(kv->key, co->k_prot_self) != 0)
            rsdi_etcd_take_prot(co, kv->key, a->vals + kv->val_off, kv->val_len);
    }
    if (a->skipped) rsdi_etcd_prot_unknown(co, "%d key(s) or value(s) in an answer could not be read", a->skipped);
    co->pg_more = false;
    if (!a->more) return;
    if (a->after < 0 || strncmp(a->kvs[a->after].key, co->k_prot, pl) != 0 ||
        strcmp(a->kvs[a->after].key, co->pg_after) <= 0)
        rsdi_etcd_prot_unknown(co, "a page of the protections ends at a key that cannot be read past");
    else if (co->n_rprot < RSD_MAX_PROTECTED || !co->prot_incomplete) { /* else nothing more can be kept */
        memcpy(co->pg_after, a->kvs[a->after].key, strlen(a->kvs[a->after].key) + 1);
        co->pg_more = true;
    }
}

/* The reads of an answer (absent keys included: a missing attribution is empty). */
RSDI_PRIVATE void rsdi_etcd_take_reads(rsd_etcd *co, const rsdi_etcd_ans *a, bool lock_too) {
    int i;
    rsdi_attr_set_clear(&co->attrs);
    co->attr_mod = 0;
    co->attr_corrupt = false;
    co->has_gen = true;
    co->gen = 0;
    co->n_rprot = 0;
    co->prot_incomplete = false;
    co->prot_why[0] = co->pg_after[0] = '\0';
    co->pg_rev = a->revision;
    if (lock_too) co->owner[0] = '\0';
    for (i = 0; i < a->n_kvs; i++) {
        const rsdi_etcd_kv *kv = &a->kvs[i];
        const char *v = a->vals + kv->val_off;
        if (strcmp(kv->key, co->k_attr) == 0) {
            co->attr_mod = kv->mod_rev;
            if (kv->val_len && rsdi_attr_parse(v, kv->val_len, &co->attrs) < 0) {
                if (co->attrs.over) /* valid, but larger than the set: read as empty, and never rewritten */
                    rsdi_logf(&co->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_READ_FAILED, RSDI_WHERE,
                              "etcd %s: its ids need %lu bytes, over the %lu of attr_arena_bytes (raise it)",
                              co->k_attr, (unsigned long)co->attrs.arena_used, (unsigned long)co->attrs.arena_bytes);
                else {
                    co->attr_corrupt = true; /* read as empty; the next commit rewrites it */
                    rsdi_logf(&co->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_CORRUPT, RSDI_WHERE, "etcd %s", co->k_attr);
                }
            }
        } else if (strcmp(kv->key, co->k_gen) == 0) {
            char num[32];
            uint64_t g = 0;
            size_t k;
            bool ok = kv->val_len > 0 && kv->val_len < sizeof num;
            for (k = 0; ok && k < kv->val_len; k++) {
                ok = v[k] >= '0' && v[k] <= '9' && g <= (UINT64_MAX - (uint64_t)(v[k] - '0')) / 10;
                if (ok) g = g * 10 + (uint64_t)(v[k] - '0');
            }
            co->has_gen = ok;
            co->gen = ok ? g : 0;
        } else if (lock_too && strcmp(kv->key, co->k_lock) == 0) {
            size_t n = kv->val_len < sizeof co->owner - 1 ? kv->val_len : sizeof co->owner - 1;
            size_t k;
            memcpy(co->owner, v, n);
            for (k = 0; k < n; k++)
                if ((unsigned char)co->owner[k] < 0x20) co->owner[k] = ' ';
            co->owner[n] = '\0';
        }
    }
    rsdi_etcd_take_prots(co, a);
}

/* The lock key as an answer's failure branch saw it: its create_revision (0 = absent). */
RSDI_PRIVATE int64_t rsdi_etcd_lock_rev(const rsd_etcd *co, const rsdi_etcd_ans *a) {
    int i;
    for (i = 0; i < a->n_kvs; i++)
        if (strcmp(a->kvs[i].key, co->k_lock) == 0) return a->kvs[i].create_rev;
    return 0;
}

/* ---- create / destroy ---------------------------------------------------------------- */
RSD_API int rsd_etcd_parse_url(const char *url, char *root, size_t root_cap, char *prefix, size_t prefix_cap) {
    const char *rest;
    bool tls = false;
    rsd_url u;
    size_t n, hl;
    if (!url || !root || !prefix) return RSD_ERR_ARG;
    if (strncmp(url, "etcd://", 7) == 0) rest = url + 7;
    else if (strncmp(url, "etcds://", 8) == 0) rest = url + 8, tls = true;
    else if (strncmp(url, "http://", 7) == 0) rest = url + 7;
    else if (strncmp(url, "https://", 8) == 0) rest = url + 8, tls = true;
    else return RSD_ERR_URL;
    n = strlen(rest);
    if (n + 9 > root_cap || n + 9 > RSD_URL_MAX_BYTES) return RSD_ERR_URL;
    (void)RSD_SNPRINTF(root, root_cap, "%s%s", tls ? "https://" : "http://", rest);
    if (rsd_url_parse(&u, root, strlen(root)) != RSD_OK) return RSD_ERR_URL;
    if (memchr(u.path.ptr ? u.path.ptr : "", '?', u.path.len)) return RSD_ERR_URL;
    hl = (size_t)(u.path.ptr ? u.path.ptr - root : (ptrdiff_t)strlen(root));
    /* the prefix: the path without trailing slashes; none = "/residency" */
    n = u.path.len;
    while (n && u.path.ptr[n - 1] == '/') n--;
    if (n == 0) {
        if (prefix_cap < sizeof "/residency") return RSD_ERR_URL;
        memcpy(prefix, "/residency", sizeof "/residency");
    } else {
        if (n + 1 > prefix_cap || n > RSD_ETCD_MAX_PREFIX_BYTES) return RSD_ERR_URL;
        memcpy(prefix, u.path.ptr, n);
        prefix[n] = '\0';
    }
    root[hl] = '\0';
    if (!u.port_explicit) { /* etcd's client port, not 80/443 */
        if (hl + 6 > root_cap) return RSD_ERR_URL;
        memcpy(root + hl, ":2379", 6);
    }
    return RSD_OK;
}

/* The room of each of the two sets of ids after the struct: desc.attr_arena_bytes, at least
   as large as this host's protections (published through one; the attribution's two swap
   after a commit). */
RSDI_PRIVATE size_t rsdi_etcd_arena(const rsd_etcd_desc *d) {
    size_t arena = d->attr_arena_bytes ? d->attr_arena_bytes : (size_t)RSD_STATE_ATTR_ARENA_DEFAULT, prot = 0;
    int i;
    for (i = 0; i < d->n_protected; i++) {
        rsd_str id = d->protected_models[i].model_id;
        if (id.ptr && id.len && id.len < RSD_MODEL_ID_MAX)
            prot += rsdi_attr_need(id.len, d->protected_models[i].role ? strlen(rsd_role_str((int)d->protected_models[i].role)) : 0);
    }
    return rsdi_al8(arena > prot ? arena : prot);
}

/* The coordinator's buffers, all from the sets' arena: text, an attribution as written
   (any record whose ids fit the arena: 4 bytes an id byte escaped, 48 a line); req, a
   request (one such record in base64 beside keys and JSON); vals, an answer's decoded
   values (the attribution, every host's protections that RSD_MAX_PROTECTED keeps, the
   records' frames, the lock owner and the generation); body, an answer (vals in base64,
   RSD_ETCD_MAX_KVS kvs' JSON). block: the object with all of them. */
typedef struct rsdi_etcd_sizes {
    size_t arena, text, req, vals, body, block;
} rsdi_etcd_sizes;

RSDI_PRIVATE void rsdi_etcd_sizes_of(const rsd_etcd_desc *d, rsdi_etcd_sizes *z) {
    z->arena = rsdi_etcd_arena(d);
    z->text = 64 + RSD_STATE_MAX_ATTR * 48 + 4 * (z->arena < (size_t)RSD_STATE_MAX_FILE_BYTES / 4 ? z->arena
                                                  : (size_t)RSD_STATE_MAX_FILE_BYTES / 4);
    if (z->text > (size_t)RSD_STATE_MAX_FILE_BYTES) z->text = RSD_STATE_MAX_FILE_BYTES;
    z->req = rsdi_b64_len(z->text) + 8192;
    z->vals = 2 * z->text + 8192;
    z->body = rsdi_b64_len(z->vals) + RSD_ETCD_MAX_KVS * RSDI_ETCD_KV_JSON + 4096;
    z->block = rsdi_al8(sizeof(rsd_etcd)) + 2 * z->arena + rsdi_al8(z->text) + rsdi_al8(z->body) + rsdi_al8(z->vals);
}

/* The coordinator's own client: the desc's, with a slot for each request it has in flight
   (the operation's answers go to the coordinator's body, the slots' own bodies take the
   small ones) and room for the operation's request. */
RSDI_PRIVATE rsd_http_client_desc rsdi_etcd_http_desc(const rsd_etcd_desc *d) {
    rsd_http_client_desc hd = d->http;
    rsdi_etcd_sizes z;
    rsdi_etcd_sizes_of(d, &z);
    if (!hd.allocator.alloc_fn) hd.allocator = d->allocator;
    if (!hd.logger.fn) hd.logger = d->logger;
    if (hd.max_requests < RSDI_ETCD_REQUESTS) hd.max_requests = RSDI_ETCD_REQUESTS;
    if (hd.max_conns < RSDI_ETCD_REQUESTS) hd.max_conns = RSDI_ETCD_REQUESTS;
    if (!hd.max_header_bytes) hd.max_header_bytes = RSDI_ETCD_SLOT_BYTES;
    if (!hd.max_body_bytes) hd.max_body_bytes = RSDI_ETCD_SLOT_BYTES;
    if (hd.max_request_bytes < z.req + 2048) hd.max_request_bytes = z.req + 2048;
    return hd;
}

/* The bytes rsd_etcd_create allocates for d (TLS apart): the object with its buffers and
   the client; 0 = the client's sizes overflow. */
RSDI_PRIVATE size_t rsdi_etcd_footprint(const rsd_etcd_desc *d) {
    rsd_http_client_desc hd = rsdi_etcd_http_desc(d);
    rsdi_etcd_sizes z;
    size_t http;
    if (rsdi_client_desc_fix(&hd) < 0 || !(http = rsdi_client_footprint(&hd))) return 0;
    rsdi_etcd_sizes_of(d, &z);
    return z.block + http;
}

/* RSD_OK when create takes desc's fields (its url apart), else RSD_ERR_ARG. */
RSDI_PRIVATE int rsdi_etcd_desc_check(const rsd_etcd_desc *d) {
    if (!d || !d->url) return RSD_ERR_ARG;
    if (rsdi_allocator_check(&d->allocator) != RSD_OK || d->n_protected < 0 || d->n_protected > RSD_MAX_PROTECTED ||
        (d->n_protected && !d->protected_models) || (d->auth_token && strlen(d->auth_token) >= 1024) ||
        (d->auth_user && strlen(d->auth_user) >= 256) || (d->auth_password && strlen(d->auth_password) >= 256) ||
        (d->host_id && (!d->host_id[0] || strlen(d->host_id) > RSD_ETCD_MAX_HOST_BYTES)))
        return RSD_ERR_ARG;
    return RSD_OK;
}

RSD_API size_t rsd_etcd_footprint(const rsd_etcd_desc *desc) {
    char root[RSD_HTTP_MAX_HOST_BYTES + 64], prefix[RSD_ETCD_MAX_PREFIX_BYTES + 1];
    if (rsdi_etcd_desc_check(desc) != RSD_OK ||
        rsd_etcd_parse_url(desc->url, root, sizeof root, prefix, sizeof prefix) != RSD_OK)
        return 0;
    return rsdi_etcd_footprint(desc);
}

RSD_API rsd_etcd *rsd_etcd_create(const rsd_etcd_desc *desc) {
    rsd_etcd_desc d;
    rsd_http_client_desc hd;
    rsd_etcd *co;
    rsdi_etcd_sizes z;
    char *at;
    int i, r;
    if (rsdi_etcd_desc_check(desc) != RSD_OK) return NULL;
    d = *desc;
    rsdi_etcd_sizes_of(&d, &z);
    co = (rsd_etcd *)rsdi_malloc(&d.allocator, z.block);
    if (!co) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, "etcd: allocation failed", RSDI_WHERE);
        return NULL;
    }
    memset(co, 0, sizeof *co);
    at = (char *)co + rsdi_al8(sizeof *co);
    (void)rsd_attr_set_init(&co->attrs, at, z.arena);
    (void)rsd_attr_set_init(&co->next, at + z.arena, z.arena);
    co->attr_text = at + 2 * z.arena;
    co->text_cap = z.text;
    co->body = co->attr_text + rsdi_al8(z.text);
    co->body_cap = z.body;
    co->req_cap = z.req;
    co->ans.vals = co->body + rsdi_al8(z.body);
    co->ans.vals_cap = z.vals;
    co->alloc = d.allocator;
    co->logger = d.logger;
    r = rsd_etcd_parse_url(d.url, co->root, sizeof co->root, co->prefix, sizeof co->prefix);
    if (r != RSD_OK) {
        rsdi_logf(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, RSDI_WHERE,
                  "etcd: bad coordinator URL '%.200s' (etcd://host:port[/prefix])", d.url);
        rsd_etcd_destroy(co); /* destroy takes what create has set up so far */
        return NULL;
    }
    hd = rsdi_etcd_http_desc(&d);
    co->http = rsd_http_client_create(&hd);
    if (!co->http) {
        rsd_etcd_destroy(co);
        return NULL;
    }
    if (d.host_id) (void)rsdi_cpy(co->host, sizeof co->host, d.host_id);
    else if (gethostname(co->host, sizeof co->host - 1) != 0 || !co->host[0])
        (void)rsdi_cpy(co->host, sizeof co->host, "localhost");
    co->host[sizeof co->host - 1] = '\0';
    if (d.auth_token && d.auth_token[0]) {
        co->has_auth = true;
        (void)rsdi_cpy(co->auth, sizeof co->auth, d.auth_token);
    }
    if (d.auth_user && d.auth_user[0]) {
        co->has_login = true;
        (void)rsdi_cpy(co->user, sizeof co->user, d.auth_user);
        (void)rsdi_cpy(co->pass, sizeof co->pass, d.auth_password ? d.auth_password : "");
    }
    co->fail_closed = d.fail_closed;
    co->ttl_s = d.lease_ttl_s ? d.lease_ttl_s : (uint32_t)RSD_ETCD_LEASE_TTL_S;
    co->req_ms = d.request_timeout_ms ? d.request_timeout_ms : (uint32_t)RSD_ETCD_REQUEST_MS;
    for (i = 0; i < d.n_protected; i++) {
        rsd_str id = d.protected_models[i].model_id;
        if (!id.ptr || !id.len || id.len >= RSD_MODEL_ID_MAX) continue;
        memcpy(co->own_ids[co->n_own], id.ptr, id.len);
        co->own_ids[co->n_own][id.len] = '\0';
        co->own[co->n_own].model_id = rsd_str_c(co->own_ids[co->n_own]);
        co->own[co->n_own++].role = d.protected_models[i].role;
    }
    (void)RSD_SNPRINTF(co->k_prot, sizeof co->k_prot, "%s/prot/", co->prefix);
    (void)RSD_SNPRINTF(co->k_prot_self, sizeof co->k_prot_self, "%s/prot/%s", co->prefix, co->host);
    return co;
}

RSD_API void rsd_etcd_destroy(rsd_etcd *co) {
    rsd_allocator a;
    if (!co) return;
    rsd_http_client_destroy(co->http);
    a = co->alloc;
    rsdi_free(&a, co);
}

/* ---- the operations ---------------------------------------------------------------- */
RSDI_PRIVATE int rsdi_etcd_begin(rsd_etcd *co, int op, const char *key, uint64_t now_ms, uint64_t deadline_ms) {
    char name[RSD_STATE_MAX_NAME_BYTES];
    if (!co) return RSD_ERR_ARG;
    if (co->op != RSDI_EO_NONE) { /* a new operation abandons the running one */
        if (co->inflight) (void)rsd_http_cancel(co->http, co->h);
        co->inflight = false;
        co->op = RSDI_EO_NONE;
    }
    if (key) {
        if (!key[0] || strlen(key) > RSD_STATE_MAX_KEY_BYTES || rsd_state_file_name(key, name, sizeof name) < 0)
            return RSD_ERR_ARG;
        memcpy(co->tkey, key, strlen(key) + 1);
        (void)RSD_SNPRINTF(co->k_lock, sizeof co->k_lock, "%s/lock/%s", co->prefix, name);
        (void)RSD_SNPRINTF(co->k_attr, sizeof co->k_attr, "%s/attr/%s", co->prefix, name);
        (void)RSD_SNPRINTF(co->k_gen, sizeof co->k_gen, "%s/gen/%s", co->prefix, name);
    }
    co->op = op;
    co->end_owed = true;
    co->sub = RSDI_ES_SEND;
    co->result = RSD_PENDING;
    co->paging = co->pg_more = false;
    co->deadline = deadline_ms ? deadline_ms : now_ms + (uint64_t)co->ttl_s * 1000u;
    co->backoff = RSD_ETCD_RETRY_MIN_MS;
    co->wake = now_ms;
    co->tries = 0;
    co->busy_seen = false;
    co->message[0] = '\0';
    /* etcd found unreachable moments ago: one attempt, not another full wait */
    co->err_since = co->down_at && now_ms < co->down_at + (uint64_t)co->ttl_s * 1000u ? co->down_at : 0;
    return RSD_OK;
}

RSD_API int rsd_etcd_read_begin(rsd_etcd *co, const char *key, uint64_t now_ms, uint64_t deadline_ms) {
    return rsdi_etcd_begin(co, RSDI_EO_READ, key, now_ms, deadline_ms);
}

RSD_API int rsd_etcd_lock_begin(rsd_etcd *co, const char *key, const char *purpose, uint64_t now_ms,
                                uint64_t deadline_ms) {
    int r;
    if (co && co->held) return RSD_ERR_STATE;
    r = rsdi_etcd_begin(co, RSDI_EO_LOCK, key, now_ms, deadline_ms);
    if (r == RSD_OK) {
        co->lost = false;
        (void)rsdi_cpy(co->purpose, sizeof co->purpose, purpose ? purpose : "");
    }
    return r;
}

RSD_API int rsd_etcd_commit_begin(rsd_etcd *co, const rsd_attr_change *changes, int n, uint64_t loaded_at_ms,
                                  uint64_t now_ms, uint64_t deadline_ms) {
    int i, r;
    if (!co || n < 0 || (n && !changes) || !co->tkey[0]) return RSD_ERR_ARG;
    for (i = 0; i < n; i++)
        if (!rsdi_attr_change_ok(&changes[i])) return RSD_ERR_ARG;
    r = rsdi_etcd_begin(co, RSDI_EO_COMMIT, NULL, now_ms, deadline_ms);
    if (r == RSD_OK) {
        co->chg = changes;
        co->n_chg = n;
        co->loaded_at = loaded_at_ms;
    }
    return r;
}

RSD_API int rsd_etcd_unlock_begin(rsd_etcd *co, uint64_t now_ms) {
    if (!co) return RSD_ERR_ARG;
    co->end_owed = true;
    if (co->op == RSDI_EO_LOCK) { /* abandon a wait (a txn in flight may still take it: its lease ends it) */
        if (co->inflight) (void)rsd_http_cancel(co->http, co->h);
        co->inflight = false;
        co->op = RSDI_EO_NONE;
        co->sub = RSDI_ES_IDLE;
        co->result = RSD_OK;
        co->paging = co->pg_more = false;
    }
    co->lost = false;
    if (!co->held) return RSD_OK;
    co->held = false; /* a new lock may be taken at once: the delete compares the old revision */
    co->unl_pending = true;
    co->unl_fence = co->fence;
    co->unl_deadline = now_ms + co->req_ms;
    memcpy(co->unl_key, co->k_lock, sizeof co->unl_key);
    return RSD_OK;
}

/* Ends the operation with r. */
RSDI_PRIVATE void rsdi_etcd_end(rsd_etcd *co, int r) {
    co->result = r;
    co->op = RSDI_EO_NONE;
    co->sub = RSDI_ES_IDLE;
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
RSDI_PRIVATE void rsdi_etcd_msg(rsd_etcd *co, int r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(co->message, sizeof co->message, fmt, ap);
    va_end(ap);
    (void)r;
}

/* A lock that could not be taken: fail-open (RSD_OK, not held, a warning) or closed. */
RSDI_PRIVATE void rsdi_etcd_lock_give_up(rsd_etcd *co, int err) {
    bool t = err == RSD_ERR_TIMEOUT;
    rsdi_logf(&co->logger, co->fail_closed ? RSD_LOG_ERROR : RSD_LOG_WARN,
              co->fail_closed ? (t ? RSD_LOGITEM_LOCK_TIMEOUT : RSD_LOGITEM_LOCK_FAILED)
                              : (t ? RSD_LOGITEM_LOCK_WAIT_EXPIRED : RSD_LOGITEM_LOCK_PROCEED_UNLOCKED),
              RSDI_WHERE, "etcd %s: %s", co->k_lock, co->message);
    rsdi_etcd_end(co, co->fail_closed ? err : (int)RSD_OK);
}

/* Once the protections' further pages are read (now when the answer had no more): ends the
   operation with r (then RSDI_EP_END), gives a lock up with r (RSDI_EP_GIVE_UP) or sends the
   operation's request again (RSDI_EP_AGAIN: a commit re-applied on a changed record). */
RSDI_PRIVATE void rsdi_etcd_finish(rsd_etcd *co, int r, int then) {
    if (co->pg_more) {
        co->paging = true;
        co->pg_end = r;
        co->pg_then = then;
        co->sub = RSDI_ES_SEND;
        return;
    }
    co->paging = false;
    if (then == RSDI_EP_GIVE_UP) rsdi_etcd_lock_give_up(co, r);
    else if (then == RSDI_EP_AGAIN) co->sub = RSDI_ES_SEND;
    else rsdi_etcd_end(co, r);
}

/* A page that could not be read: the protections stay known in part; the operation ends. */
RSDI_PRIVATE void rsdi_etcd_page_failed(rsd_etcd *co, const char *what) {
    rsdi_etcd_prot_unknown(co, "a page of the protections could not be read (%s)", what);
    co->pg_more = false;
    rsdi_etcd_finish(co, co->pg_end, co->pg_then);
}

/* A page's answer: its protections, then the next page or the operation's end. */
RSDI_PRIVATE void rsdi_etcd_page_answer(rsd_etcd *co, const rsd_http_event *ev, const rsdi_etcd_ans *a, int pr) {
    char what[256];
    if (ev->result < 0 || ev->status != 200 || pr < 0 || a->has_error || a->big) {
        (void)RSD_SNPRINTF(what, sizeof what, "%s, HTTP %d%s%s", ev->result < 0 ? rsd_result_str(ev->result) :
                           a->big ? "its values over the answer buffer" : pr < 0 ? rsd_result_str(pr) : "answered",
                           ev->status, a->error[0] ? ": " : "", a->error);
        rsdi_etcd_page_failed(co, what);
        return;
    }
    rsdi_etcd_take_prots(co, a);
    rsdi_etcd_finish(co, co->pg_end, co->pg_then);
}

/* Ends the operation with err, co->message logged (a lock gives up: fail-open or closed). */
RSDI_PRIVATE void rsdi_etcd_fail(rsd_etcd *co, int err) {
    if (co->op == RSDI_EO_LOCK) {
        rsdi_etcd_lock_give_up(co, err);
        return;
    }
    rsdi_logf(&co->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_READ_FAILED, RSDI_WHERE, "%s", co->message);
    rsdi_etcd_end(co, err);
}

/* A transport error, an error status or an unreadable answer: retried (backoff) while
   etcd may come back -- at most one lease TTL from the first error and never past the
   operation's deadline -- then the operation ends with err. Either way it sets sub (SLEEP,
   or IDLE as the operation ends). */
RSDI_PRIVATE void rsdi_etcd_trouble(rsd_etcd *co, int err, uint64_t now_ms, const char *what) {
    uint64_t bound;
    if (!co->err_since) co->err_since = now_ms;
    bound = co->err_since + (uint64_t)co->ttl_s * 1000u;
    if (bound > co->deadline) bound = co->deadline;
    if (now_ms + co->backoff < bound) {
        co->sub = RSDI_ES_SLEEP;
        co->wake = now_ms + co->backoff;
        co->backoff = co->backoff * 2 > 500 ? 500 : co->backoff * 2;
        return;
    }
    co->down_at = co->err_since;
    rsdi_etcd_msg(co, err, "etcd at %s unusable: %s", co->root, what);
    rsdi_etcd_fail(co, err);
}

/* An answer (or the attribution in it) larger than this coordinator reads: the operation
   fails at once (it would come again) with RSD_ERR_TOO_LARGE, the attribution unknown (read
   as empty; a commit's compare then fails, so it is never rewritten). */
RSDI_PRIVATE void rsdi_etcd_too_large(rsd_etcd *co, const char *what, size_t cap) {
    rsdi_attr_set_clear(&co->attrs);
    co->attr_mod = 0;
    rsdi_etcd_msg(co, RSD_ERR_TOO_LARGE, "etcd at %s: %s over the %lu bytes this coordinator reads "
                  "(attr_arena_bytes %lu sizes it; raise it)", co->root, what, (unsigned long)cap,
                  (unsigned long)co->attrs.arena_bytes);
    rsdi_etcd_fail(co, RSD_ERR_TOO_LARGE);
}

/* Sends body to path; RSD_OK or the send error. The operation's answer (h == &co->h) goes to
   co->body, a keepalive's or a release's to the slot's own. */
RSDI_PRIVATE int rsdi_etcd_send(rsd_etcd *co, const char *path, const char *body, size_t len, uint64_t now_ms,
                                uint64_t limit, rsd_http_req_h *h) {
    rsd_http_request q;
    rsd_http_header hdr;
    uint64_t left = limit > now_ms ? limit - now_ms : 1;
    memset(&q, 0, sizeof q);
    (void)RSD_SNPRINTF(co->url, sizeof co->url, "%s%s", co->root, path);
    q.method = "POST";
    q.url = co->url;
    q.content_type = "application/json";
    q.body = body;
    q.body_len = len;
    q.total_timeout_ms = (uint32_t)(left < co->req_ms ? left : co->req_ms);
    q.connect_timeout_ms = q.total_timeout_ms;
    q.retry_any_method = true; /* every etcd request here is safe to send again */
    if (h == &co->h) { /* built in co->body: the client has copied it when the answer comes */
        q.body_buf = co->body;
        q.body_cap = co->body_cap;
    }
    if (co->has_auth) {
        hdr.name = rsd_str_c("Authorization");
        hdr.value = rsd_str_c(co->auth);
        q.headers = &hdr;
        q.num_headers = 1;
    }
    return rsd_http_send(co->http, &q, now_ms, h);
}

/* Builds and sends the operation's next request. */
RSDI_PRIVATE void rsdi_etcd_send_next(rsd_etcd *co, uint64_t now_ms) {
    rsdi_etcd_w w;
    const char *path = "/v3/kv/txn";
    char owner[RSDI_ETCD_OWNER_BYTES];
    int r, i;
    w.buf = co->body;
    w.cap = co->req_cap;
    w.n = 0;
    w.over = false;
    if (co->has_login && !co->has_auth) { /* a token first (simple tokens expire: again on code 16) */
        rsd_json_writer jw;
        int k;
        rsd_json_w_init(&jw, co->body, co->req_cap);
        rsd_json_w_begin_object(&jw);
        rsd_json_w_key(&jw, "name");
        rsd_json_w_str(&jw, co->user);
        rsd_json_w_key(&jw, "password");
        rsd_json_w_str(&jw, co->pass);
        rsd_json_w_end_object(&jw);
        k = rsd_json_w_finish(&jw);
        w.n = k > 0 ? (size_t)k : 0;
        w.over = k <= 0;
        path = "/v3/auth/authenticate";
        co->sub = RSDI_ES_AUTH;
    } else if (co->paging) {
        rsdi_ew_prot_page(&w, co);
        path = "/v3/kv/range";
        co->sub = RSDI_ES_TXN;
    } else if (co->op == RSDI_EO_LOCK && (!co->lease || now_ms >= co->lease_ref + (uint64_t)co->ttl_s * 500u)) {
        char b[64];
        (void)RSD_SNPRINTF(b, sizeof b, "{\"TTL\":\"%u\"}", (unsigned)co->ttl_s);
        rsdi_ew_raw(&w, b);
        path = "/v3/lease/grant";
        co->sub = RSDI_ES_GRANT;
    } else if (co->op == RSDI_EO_READ) {
        rsdi_ew_raw(&w, "{\"success\":[");
        if (!co->prot_published) { /* this host's protections, once per coordinator (kept: not leased) */
            rsdi_attr_set_clear(&co->next);
            for (i = 0; i < co->n_own && i < RSD_STATE_MAX_ATTR; i++, co->next.count++) /* the arena holds them all */
                (void)rsdi_attr_set_put(&co->next, co->next.count, co->own_ids[i],
                                        co->own[i].role ? rsd_role_str((int)co->own[i].role) : "", 0, 0);
            r = rsdi_attr_format(&co->next, co->attr_text, co->text_cap);
            if (r > 0) {
                rsdi_ew_put(&w, co->k_prot_self, co->attr_text, (size_t)r, 0);
                rsdi_ew_raw(&w, ",");
            }
        }
        rsdi_ew_reads(&w, co);
        rsdi_ew_raw(&w, "]}");
        co->sub = RSDI_ES_TXN;
    } else if (co->op == RSDI_EO_LOCK) {
        int n = RSD_SNPRINTF(owner, sizeof owner, "host=%s\npid=%ld\ntaken_unix_ms=%llu\npurpose=%s\n", co->host,
                             (long)getpid(), (unsigned long long)rsdi_etcd_wall_ms(), co->purpose);
        rsdi_ew_raw(&w, "{\"compare\":[{\"key\":");
        rsdi_ew_b64(&w, co->k_lock, strlen(co->k_lock));
        rsdi_ew_raw(&w, ",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"}],\"success\":[");
        rsdi_ew_put(&w, co->k_lock, owner, n > 0 && (size_t)n < sizeof owner ? (size_t)n : 0, co->lease);
        rsdi_ew_raw(&w, ",");
        rsdi_ew_reads(&w, co);
        rsdi_ew_raw(&w, "],\"failure\":[");
        rsdi_ew_range(&w, co->k_lock, false);
        rsdi_ew_raw(&w, ",");
        rsdi_ew_reads(&w, co);
        rsdi_ew_raw(&w, "]}");
        co->sub = RSDI_ES_TXN;
    } else if (co->op == RSDI_EO_COMMIT) {
        char gv[32];
        uint64_t g = co->has_gen ? co->gen + 1 : rsdi_etcd_wall_ms(); /* unknown: never a value a cache holds */
        if (co->attrs.over) { /* rewriting what could not be read would lose it */
            rsdi_etcd_msg(co, RSD_ERR_TOO_LARGE, "etcd commit: the attribution %s needs %lu bytes of ids, over "
                          "attr_arena_bytes (%lu): not rewritten", co->k_attr, (unsigned long)co->attrs.arena_used,
                          (unsigned long)co->attrs.arena_bytes);
            rsdi_etcd_end(co, RSD_ERR_TOO_LARGE);
            return;
        }
        (void)rsd_attr_set_copy(&co->next, &co->attrs); /* the arenas are of one size */
        for (i = 0; i < co->n_chg; i++) {
            r = rsdi_attr_set_apply(&co->next, &co->chg[i], co->loaded_at, (int64_t)getpid(), false);
            if (r < 0) /* full: not recorded */
                rsdi_logf(&co->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_FULL, RSDI_WHERE,
                          "etcd %s: '%s' not recorded (%s: %u entries, %lu of attr_arena_bytes %lu)", co->k_attr,
                          co->chg[i].model, r == RSD_ERR_CAPACITY ? "full" : "no room for its ids",
                          (unsigned)co->next.count, (unsigned long)co->next.arena_used,
                          (unsigned long)co->next.arena_bytes);
        }
        r = rsdi_attr_format(&co->next, co->attr_text, co->text_cap);
        if (r < 0) {
            rsdi_etcd_msg(co, r, "etcd commit: the attribution does not format (%s)", rsd_result_str(r));
            rsdi_etcd_end(co, r);
            return;
        }
        co->gen_next = g;
        (void)RSD_SNPRINTF(gv, sizeof gv, "%llu", (unsigned long long)g);
        rsdi_ew_raw(&w, "{\"compare\":[");
        if (co->held) { /* the fencing revision: refused unless our lock key is still the one */
            rsdi_ew_raw(&w, "{\"key\":");
            rsdi_ew_b64(&w, co->k_lock, strlen(co->k_lock));
            rsdi_ew_raw(&w, ",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":");
            rsdi_ew_i64(&w, co->fence);
            rsdi_ew_raw(&w, "},");
        }
        rsdi_ew_raw(&w, "{\"key\":");
        rsdi_ew_b64(&w, co->k_attr, strlen(co->k_attr));
        rsdi_ew_raw(&w, ",\"target\":\"MOD\",\"result\":\"EQUAL\",\"mod_revision\":");
        rsdi_ew_i64(&w, co->attr_mod);
        rsdi_ew_raw(&w, "}],\"success\":[");
        rsdi_ew_put(&w, co->k_attr, co->attr_text, (size_t)r, 0);
        rsdi_ew_raw(&w, ",");
        rsdi_ew_put(&w, co->k_gen, gv, strlen(gv), 0);
        rsdi_ew_raw(&w, "],\"failure\":[");
        rsdi_ew_range(&w, co->k_lock, false);
        rsdi_ew_raw(&w, ",");
        rsdi_ew_reads(&w, co);
        rsdi_ew_raw(&w, "]}");
        co->sub = RSDI_ES_TXN;
    }
    if (co->paging && w.over) {
        rsdi_etcd_page_failed(co, "its request does not fit");
        return;
    }
    if (w.over) {
        rsdi_etcd_msg(co, RSD_ERR_TOO_LARGE, "etcd request over %lu bytes (attr_arena_bytes %lu sizes it)",
                      (unsigned long)co->req_cap, (unsigned long)co->attrs.arena_bytes);
        rsdi_etcd_end(co, RSD_ERR_TOO_LARGE);
        return;
    }
    co->sent_at = now_ms;
    r = rsdi_etcd_send(co, path, co->body, w.n, now_ms,
                       co->deadline > now_ms + co->req_ms ? co->deadline : now_ms + co->req_ms, &co->h);
    if (r < 0 && co->paging) {
        rsdi_etcd_page_failed(co, rsd_result_str(r));
        return;
    }
    if (r < 0) {
        rsdi_etcd_trouble(co, r, now_ms, rsd_result_str(r));
        return;
    }
    co->inflight = true;
}

/* The operation's answer arrived. */
RSDI_PRIVATE void rsdi_etcd_answer(rsd_etcd *co, const rsd_http_event *ev, uint64_t now_ms) {
    rsdi_etcd_ans *a = &co->ans;
    char what[256];
    int pr;
    co->inflight = false;
    pr = rsdi_etcd_parse(ev->body.ptr, ev->body.len, co->toks, RSDI_ETCD_TOKS, a); /* no body on an error */
    if (co->paging) { /* a further page of the protections (or the login it needed) */
        if (co->sub == RSDI_ES_AUTH && ev->result == RSD_OK && ev->status == 200 && !a->has_error && a->token[0]) {
            (void)rsdi_cpy(co->auth, sizeof co->auth, a->token);
            co->has_auth = true;
            co->sub = RSDI_ES_SEND;
        } else if (co->sub != RSDI_ES_AUTH && co->has_login && a->has_error && a->code == 16 && co->tries++ < 4) {
            co->has_auth = false; /* the token expired: authenticate again, then the page */
            co->sub = RSDI_ES_SEND;
        } else if (co->sub == RSDI_ES_AUTH) {
            rsdi_etcd_page_failed(co, "etcd refused the login");
        } else {
            rsdi_etcd_page_answer(co, ev, a, pr);
        }
        return;
    }
    if (ev->result == RSD_ERR_BODY_TOO_LARGE || a->big) {
        rsdi_etcd_too_large(co, a->big ? "an answer's values" : "an answer", a->big ? a->vals_cap : co->body_cap);
        return;
    }
    if (ev->result < 0) {
        (void)RSD_SNPRINTF(what, sizeof what, "%s%s%s", rsd_result_str(ev->result), ev->sys_errno ? ": " : "",
                           ev->sys_errno ? strerror(ev->sys_errno) : "");
        rsdi_etcd_trouble(co, ev->result, now_ms, what);
        return;
    }
    if (co->has_login && a->has_error && a->code == 16 && co->sub != RSDI_ES_AUTH && co->tries++ < 4) {
        co->has_auth = false; /* the token expired (or etcd restarted): authenticate again */
        co->sub = RSDI_ES_SEND;
        return;
    }
    if (co->sub == RSDI_ES_AUTH && ev->status == 200 && !a->has_error && a->token[0]) {
        (void)rsdi_cpy(co->auth, sizeof co->auth, a->token);
        co->has_auth = true;
        co->sub = RSDI_ES_SEND;
        return;
    }
    if (ev->status == 401 || ev->status == 403 || (a->has_error && (a->code == 16 || a->code == 7)) ||
        (a->has_error && strstr(a->error, "user name is empty")) || co->sub == RSDI_ES_AUTH) {
        rsdi_etcd_msg(co, RSD_ERR_AUTH, "etcd at %s refused us (HTTP %d): %s", co->root, ev->status, a->error);
        co->down_at = 0;
        if (co->op == RSDI_EO_LOCK) rsdi_etcd_lock_give_up(co, RSD_ERR_AUTH);
        else rsdi_etcd_end(co, RSD_ERR_AUTH);
        return;
    }
    if (a->has_error && a->code == 5 && strstr(a->error, "lease not found")) { /* our lease ran out */
        co->lease = 0;
        co->sub = RSDI_ES_SEND;
        if (co->tries++ < 4) return; /* grant a new one and try again at once */
    }
    if (pr < 0 || ev->status != 200 || a->has_error) {
        (void)RSD_SNPRINTF(what, sizeof what, "HTTP %d%s%s", ev->status, a->error[0] ? ": " : "", a->error);
        rsdi_etcd_trouble(co, pr < 0 ? pr : RSD_ERR_HTTP_STATUS, now_ms, what);
        return;
    }
    co->err_since = co->down_at = 0;
    if (co->sub == RSDI_ES_GRANT) {
        if (a->id == 0 || a->ttl <= 0) {
            rsdi_etcd_trouble(co, RSD_ERR_PAYLOAD, now_ms, "lease grant answered without an ID");
            return;
        }
        co->lease = a->id;
        co->lease_ref = co->sent_at;
        co->sub = RSDI_ES_SEND;
        return;
    }
    switch (co->op) {
    case RSDI_EO_READ:
        rsdi_etcd_take_reads(co, a, false);
        co->prot_published = true;
        rsdi_etcd_finish(co, RSD_OK, RSDI_EP_END);
        return;
    case RSDI_EO_LOCK:
        rsdi_etcd_take_reads(co, a, true);
        if (a->succeeded) {
            co->held = true;
            co->lost = false;
            co->fence = a->revision; /* the txn's revision = our lock key's create_revision */
            co->owner[0] = '\0';
            rsdi_etcd_finish(co, RSD_OK, RSDI_EP_END);
            return;
        }
        co->busy_seen = true;
        if (now_ms >= co->deadline) {
            rsdi_etcd_msg(co, RSD_ERR_TIMEOUT, "etcd lock %s still held at the deadline by %s", co->k_lock,
                          co->owner[0] ? co->owner : "(no record)");
            rsdi_etcd_finish(co, RSD_ERR_TIMEOUT, RSDI_EP_GIVE_UP);
            return;
        }
        co->sub = RSDI_ES_SLEEP;
        co->wake = now_ms + co->backoff;
        if (co->wake > co->deadline) co->wake = co->deadline;
        co->backoff = co->backoff * 2 > (uint64_t)RSD_ETCD_RETRY_MAX_MS ? (uint64_t)RSD_ETCD_RETRY_MAX_MS : co->backoff * 2;
        return;
    case RSDI_EO_COMMIT:
        if (a->succeeded) {
            rsd_attr_set t = co->attrs; /* swapped: each keeps its own arena */
            co->attrs = co->next;
            co->next = t;
            co->has_gen = true;
            co->gen = co->gen_next;
            co->attr_mod = a->revision;
            co->attr_corrupt = false;
            rsdi_etcd_end(co, RSD_OK);
            return;
        }
        {
            bool was_held = co->held;
            int64_t rev = rsdi_etcd_lock_rev(co, a);
            rsdi_etcd_take_reads(co, a, true);
            if (was_held && rev != co->fence) { /* fenced: our lease ran out and the key went */
                co->held = false;
                co->lost = true;
                rsdi_etcd_msg(co, RSD_ERR_LOCK,
                              "etcd refused the commit: the lock %s is no longer ours (lease expired; now %s)",
                              co->k_lock, co->owner[0] ? co->owner : "free");
                rsdi_logf(&co->logger, RSD_LOG_WARN, RSD_LOGITEM_LOCK_FAILED, RSDI_WHERE, "%s", co->message);
                rsdi_etcd_finish(co, RSD_ERR_LOCK, RSDI_EP_END);
                return;
            }
            /* the attribution changed under an unlocked commit: apply ours to the new one */
            if (++co->tries >= RSD_ETCD_COMMIT_TRIES || now_ms >= co->deadline) {
                rsdi_etcd_msg(co, RSD_ERR_TIMEOUT, "etcd commit: the attribution kept changing (%d tries)", co->tries);
                rsdi_etcd_finish(co, RSD_ERR_TIMEOUT, RSDI_EP_END);
                return;
            }
            rsdi_etcd_finish(co, RSD_OK, RSDI_EP_AGAIN); /* the coordinator keeps them: a commit reads nothing */
            return;
        }
    default: return;
    }
}

RSDI_PRIVATE void rsdi_etcd_ka_answer(rsd_etcd *co, const rsd_http_event *ev) {
    rsdi_etcd_ans *a = &co->ans;
    co->ka_inflight = false;
    if (ev->result < 0) return; /* etcd unreachable: the lease runs down; a commit is fenced then */
    if (rsdi_etcd_parse(ev->body.ptr, ev->body.len, co->toks, RSDI_ETCD_TOKS, a) < 0) return;
    if (ev->status == 200 && a->ttl > 0 && a->id == co->lease) {
        co->lease_ref = co->ka_sent;
        return;
    }
    if (ev->status == 200 || (a->has_error && a->code == 5)) { /* no TTL: the lease is gone */
        co->lease = 0;
        if (co->held) {
            co->lost = true;
            rsdi_logf(&co->logger, RSD_LOG_WARN, RSD_LOGITEM_LOCK_FAILED, RSDI_WHERE,
                      "etcd %s: the lease expired while held", co->k_lock);
        }
    }
}

/* One step: RSD_PENDING while an operation (or a release) runs, then its code (RSD_OK idle). */
RSDI_PRIVATE int rsdi_etcd_step_code(rsd_etcd *co, uint64_t now_ms) {
    rsd_http_event ev;
    int guard;
    for (guard = 0; guard < 8; guard++) {
        bool any = false;
        (void)rsd_http_client_step(co->http, now_ms);
        while (rsd_http_next_event(co->http, &ev)) {
            if (co->ka_inflight && ev.req.id == co->ka_h.id) rsdi_etcd_ka_answer(co, &ev);
            else if (co->unl_inflight && ev.req.id == co->unl_h.id) /* done or not: the lease ends it */
                co->unl_inflight = co->unl_pending = false;
            else if (co->inflight && ev.req.id == co->h.id) {
                rsdi_etcd_answer(co, &ev, now_ms);
                any = true;
            }
        }
        /* keep a held lock's lease alive: a third of its TTL after the last refresh */
        if (co->held && co->lease && !co->ka_inflight && now_ms >= co->lease_ref + (uint64_t)co->ttl_s * 1000u / 3) {
            char b[64];
            int n = RSD_SNPRINTF(b, sizeof b, "{\"ID\":\"%lld\"}", (long long)co->lease);
            co->ka_sent = now_ms;
            if (rsdi_etcd_send(co, "/v3/lease/keepalive", b, (size_t)n, now_ms, now_ms + co->req_ms, &co->ka_h) == RSD_OK)
                co->ka_inflight = true;
            else
                co->lease_ref = now_ms; /* no slot now: try again a third later */
            any = true;
        }
        if (co->unl_pending && !co->unl_inflight) { /* delete the key only while it is still ours */
            char b[4 * RSD_ETCD_MAX_KEY_BYTES / 3 * 2 + 256];
            rsdi_etcd_w w;
            w.buf = b;
            w.cap = sizeof b;
            w.n = 0;
            w.over = false;
            rsdi_ew_raw(&w, "{\"compare\":[{\"key\":");
            rsdi_ew_b64(&w, co->unl_key, strlen(co->unl_key));
            rsdi_ew_raw(&w, ",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":");
            rsdi_ew_i64(&w, co->unl_fence);
            rsdi_ew_raw(&w, "}],\"success\":[{\"request_delete_range\":{\"key\":");
            rsdi_ew_b64(&w, co->unl_key, strlen(co->unl_key));
            rsdi_ew_raw(&w, "}}]}");
            if (w.over || now_ms >= co->unl_deadline ||
                rsdi_etcd_send(co, "/v3/kv/txn", b, w.n, now_ms, co->unl_deadline, &co->unl_h) != RSD_OK)
                co->unl_pending = false; /* the lease releases it */
            else
                co->unl_inflight = true;
            any = true;
        }
        if (co->op != RSDI_EO_NONE && !co->inflight &&
            (co->sub == RSDI_ES_SEND || (co->sub == RSDI_ES_SLEEP && now_ms >= co->wake))) {
            rsdi_etcd_send_next(co, now_ms);
            any = true;
        }
        if (!any) break;
    }
    if (co->op != RSDI_EO_NONE || co->unl_pending) return RSD_PENDING;
    return co->result == RSD_PENDING ? RSD_OK : co->result;
}

/* The ended operation's end waits to be pulled. */
RSDI_PRIVATE bool rsdi_etcd_end_waits(const rsd_etcd *co) {
    return co->end_owed && co->op == RSDI_EO_NONE && !co->unl_pending;
}

/* The ensurer's step: the code as rsdi_etcd_step_code; an end counts as pulled. */
RSDI_PRIVATE int rsdi_etcd_step_take(rsd_etcd *co, uint64_t now_ms) {
    int r = rsdi_etcd_step_code(co, now_ms);
    if (r != RSD_PENDING) co->end_owed = false;
    return r;
}

RSD_API int rsd_etcd_step(rsd_etcd *co, uint64_t now_ms) {
    if (!co) return RSD_ERR_ARG;
    (void)rsdi_etcd_step_code(co, now_ms);
    return rsdi_etcd_end_waits(co) ? 1 : 0;
}

RSD_API bool rsd_etcd_next_event(rsd_etcd *co, rsd_etcd_info *out) {
    if (!co || !out || !rsdi_etcd_end_waits(co)) return false;
    rsd_etcd_query(co, out);
    out->result = co->result == RSD_PENDING ? RSD_OK : co->result;
    co->end_owed = false;
    return true;
}

RSD_API int rsd_etcd_pollfds(const rsd_etcd *co, rsd_pollfd *out, int cap) {
    return co ? rsd_http_client_pollfds(co->http, out, cap) : 0;
}

RSD_API uint64_t rsd_etcd_next_deadline(const rsd_etcd *co) {
    uint64_t dl;
    if (!co) return RSD_NO_DEADLINE;
    if (rsdi_etcd_end_waits(co)) return 0;
    dl = rsd_http_client_next_deadline(co->http);
    if (co->op != RSDI_EO_NONE && !co->inflight) {
        uint64_t w = co->sub == RSDI_ES_SLEEP ? co->wake : 0;
        if (w < dl) dl = w;
    }
    if (co->held && co->lease && !co->ka_inflight) {
        uint64_t k = co->lease_ref + (uint64_t)co->ttl_s * 1000u / 3;
        if (k < dl) dl = k;
    }
    return dl;
}

RSD_API void rsd_etcd_query(const rsd_etcd *co, rsd_etcd_info *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!co) {
        out->result = RSD_ERR_ARG;
        out->message = out->owner = out->root = out->prefix = out->protected_why = "";
        return;
    }
    out->result = co->op != RSDI_EO_NONE ? RSD_PENDING : co->result;
    out->held = co->held;
    out->lost = co->lost;
    out->fence = co->fence;
    out->has_gen = co->has_gen;
    out->gen = co->gen;
    out->attr_corrupt = co->attr_corrupt;
    out->attrs = &co->attrs;
    out->n_protected = co->n_rprot;
    out->protected_models = co->n_rprot ? co->rprot : NULL;
    out->protected_incomplete = co->prot_incomplete;
    out->protected_why = co->prot_why;
    out->owner = co->owner;
    out->message = co->message;
    out->root = co->root;
    out->prefix = co->prefix;
}
#else /* RSD_NO_ETCD: the coordinator is compiled out; create says so, the rest does nothing */
RSDI_PRIVATE size_t rsdi_etcd_footprint(const rsd_etcd_desc *d) { (void)d; return 0; } /* create refuses */
RSD_API size_t rsd_etcd_footprint(const rsd_etcd_desc *desc) { (void)desc; return 0; }
RSD_API rsd_etcd *rsd_etcd_create(const rsd_etcd_desc *desc) {
    if (desc) rsdi_log(&desc->logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID,
                       "etcd coordinator: not in this build (RSD_NO_ETCD)", RSDI_WHERE);
    return NULL;
}
RSD_API void rsd_etcd_destroy(rsd_etcd *co) { (void)co; }
RSD_API int rsd_etcd_read_begin(rsd_etcd *co, const char *key, uint64_t now_ms, uint64_t deadline_ms) {
    (void)co, (void)key, (void)now_ms, (void)deadline_ms;
    return RSD_ERR_STATE;
}
RSD_API int rsd_etcd_lock_begin(rsd_etcd *co, const char *key, const char *purpose, uint64_t now_ms,
                                uint64_t deadline_ms) {
    (void)co, (void)key, (void)purpose, (void)now_ms, (void)deadline_ms;
    return RSD_ERR_STATE;
}
RSD_API int rsd_etcd_commit_begin(rsd_etcd *co, const rsd_attr_change *changes, int n,
                                  uint64_t loaded_at_ms, uint64_t now_ms, uint64_t deadline_ms) {
    (void)co, (void)changes, (void)n, (void)loaded_at_ms, (void)now_ms, (void)deadline_ms;
    return RSD_ERR_STATE;
}
RSD_API int rsd_etcd_unlock_begin(rsd_etcd *co, uint64_t now_ms) { (void)co, (void)now_ms; return RSD_ERR_STATE; }
RSDI_PRIVATE int rsdi_etcd_step_take(rsd_etcd *co, uint64_t now_ms) { (void)co, (void)now_ms; return RSD_OK; }
RSD_API int rsd_etcd_step(rsd_etcd *co, uint64_t now_ms) { (void)co, (void)now_ms; return 0; }
RSD_API bool rsd_etcd_next_event(rsd_etcd *co, rsd_etcd_info *out) { (void)co, (void)out; return false; }
RSD_API int rsd_etcd_pollfds(const rsd_etcd *co, rsd_pollfd *out, int cap) { (void)co, (void)out, (void)cap; return 0; }
RSD_API uint64_t rsd_etcd_next_deadline(const rsd_etcd *co) { (void)co; return RSD_NO_DEADLINE; }
RSD_API void rsd_etcd_query(const rsd_etcd *co, rsd_etcd_info *out) {
    (void)co;
    if (out) memset(out, 0, sizeof *out);
}
RSD_API int rsd_etcd_parse_url(const char *url, char *root, size_t root_cap, char *prefix, size_t prefix_cap) {
    (void)url, (void)root, (void)root_cap, (void)prefix, (void)prefix_cap;
    return RSD_ERR_URL;
}
#endif /* RSD_NO_ETCD */
/* ==== etcd end ============================================================ */

/* ==== >>ensure: rsd_ensurer, the reconcile over sockets =================== */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if !defined(_WIN32) /* Windows: winsock2.h / ws2tcpip.h from the net section */
#include <poll.h>
#include <netdb.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#endif

enum { RSDI_EN_IDLE = 0, RSDI_EN_DETECT, RSDI_EN_RUN, RSDI_EN_DONE, RSDI_EN_LEASE };
/* rsd-serve's own lease (phase LEASE): the request in flight or due */
enum { RSDI_EN_LS_NONE = 0, RSDI_EN_LS_TAKE, RSDI_EN_LS_POLL, RSDI_EN_LS_DROP };
/* a state-directory lease's release: read the record, ensure its next model, take it out */
enum { RSDI_EN_REL_NONE = 0, RSDI_EN_REL_READ, RSDI_EN_REL_RUN, RSDI_EN_REL_DROP, RSDI_EN_REL_DONE };
enum { RSDI_EN_WAIT_NONE = 0, RSDI_EN_WAIT_HTTP, RSDI_EN_WAIT_WAKE, RSDI_EN_WAIT_LOCK, RSDI_EN_WAIT_COMMIT,
       RSDI_EN_WAIT_COORD };
/* what a coordinator (etcd) operation the ensure waits on was for */
enum { RSDI_EN_CO_READ = 1, RSDI_EN_CO_LOCK, RSDI_EN_CO_COMMIT, RSDI_EN_CO_UNLOCK };
/* The ensurer's etcd coordinator: always NULL in a build without etcd (its create fails
   there), so every etcd branch of the ensure compiles out. */
#ifdef RSD_NO_ETCD
#define RSDI_EN_CO(e) ((rsd_etcd *)NULL)
#else
#define RSDI_EN_CO(e) ((e)->co)
#endif
/* True while the ensure detects its runtime: never in a build without detection, so
   detection's branches of the ensure compile out. */
#ifdef RSD_NO_DETECT
#define RSDI_EN_DETECTING(e) ((void)(e), 0)
#define RSDI_EN_DETECTS_NOTHING 1
#else
#define RSDI_EN_DETECTING(e) ((e)->phase == RSDI_EN_DETECT)
#define RSDI_EN_DETECTS_NOTHING 0
#endif
/* 1 when a built-in runtime can run models as instances: LM Studio is the only one, so
   in a build without it every instance branch of the ensure compiles out. */
#ifdef RSD_NO_LMSTUDIO
#define RSDI_EN_INSTANCES 0
#else
#define RSDI_EN_INSTANCES 1
#endif
/* 1 when a free request tries rsd-serve's own lease first (RSD_NO_SERVE_LEASE: 0, and
   every branch of that lease compiles out). */
#ifdef RSD_NO_SERVE_LEASE
#define RSDI_EN_SERVE_LEASE 0
#else
#define RSDI_EN_SERVE_LEASE 1
#endif
#define RSDI_EN_IN_LEASE(e) (RSDI_EN_SERVE_LEASE && (e)->phase == RSDI_EN_LEASE)
/* 1 when the ensurer can save slots around its unloads and loads (desc.kv_slots;
   RSD_NO_ENSURE_KV: 0, and every branch of it compiles out). */
#ifdef RSD_NO_ENSURE_KV
#define RSDI_EN_KV_BUILT 0
#else
#define RSDI_EN_KV_BUILT 1
#endif
#define RSDI_EN_KV_ON(e) (RSDI_EN_KV_BUILT && (e)->kv != NULL)
enum { RSDI_EN_KV_BODY = 32768, RSDI_EN_KV_TOKS = 2048, RSDI_EN_KV_SLOTS = 64, RSDI_EN_KV_TIMEOUT_MS = 10000,
       RSDI_EN_KV_BAD = 16, RSDI_EN_KV_RELISTS = 2, RSDI_EN_KV_RELIST_MS = 20 };
enum { RSDI_EN_KV_NONE = 0, RSDI_EN_KV_LIST, RSDI_EN_KV_FILE, RSDI_EN_KV_HEAL, RSDI_EN_KV_RELIST };
/* The slot saves of desc.kv_slots (the "slot saves" section). */
typedef struct rsdi_en_kv {
    int phase;                        /* NONE, LIST (GET /slots?model=), FILE (one save or restore),
                                         HEAL (an empty save over a file whose restore ended the child),
                                         RELIST (the list again, at e->wake: the router has not seen that end yet) */
    bool save;                        /* saving before an unload (held), else restoring after the load */
    bool restore_tried;               /* this ensure's load was looked at */
    uint32_t timeout_ms;              /* desc.kv_timeout_ms */
    rsd_step held;                    /* the reconcile's unload, sent when the saves are over */
    char model[RSD_MODEL_ID_MAX];
    uint64_t key, deadline;
    int ids[RSDI_EN_KV_SLOTS], n, cur;
    int saved, restored;              /* this ensure's (the result's kv_saved, kv_restored) */
    int relists;                      /* this ensure's lists again after a restore ended the child */
    int heal[RSDI_EN_KV_RELISTS], n_heal; /* the slots whose files those were: saved empty once the model is back */
    uint64_t bad[RSDI_EN_KV_BAD];     /* files whose restore ended the child (rsdi_en_kv_file_id), kept
                                         until this ensurer saves that slot again; 0 = free */
    int bad_next;                     /* the entry the next bad file takes (the oldest goes) */
    size_t len;
    bool over;
    char body[RSDI_EN_KV_BODY];
    rsd_json_tok toks[RSDI_EN_KV_TOKS];
} rsdi_en_kv;
enum {
    RSDI_EN_COMMIT_GRACE_MS = 50, /* least time a COMMIT may wait for the attribution lock */
    RSDI_EN_MAX_CHANGES = 2 * RSD_RECONCILE_MAX_ATTR
};

typedef struct rsdi_ensure_name {
    char host[RSD_HTTP_MAX_HOST_BYTES + 1];
    char addr[64];
} rsdi_ensure_name;

typedef struct rsdi_ensure_det {
    char key[RSD_TARGET_KEY_MAX];
    rsd_runtime_kind kind;
} rsdi_ensure_det;

/* A last use this ensurer saw (an ensure that returned resident): the record without a
   state directory, and with one what was written (one write a second at most) or is
   still to be written (pending: the file lock was busy). */
enum { RSDI_EN_USES = 32, RSDI_EN_USE_TEXT = 4096, RSDI_EN_USE_WRITE_MS = 1000 };
typedef struct rsdi_ensure_use {
    uint64_t used_ms, written_ms;
    uint16_t key_at, model_at;        /* its key and model in the ensurer's use_text */
    bool pending;
} rsdi_ensure_use;

/* What detection learnt that the reconcile can use: the router's instance limit, and
   the first listing when the probe was that very GET. */
typedef struct rsdi_en_found {
    bool capacity_known, unlimited;
    uint32_t max_instances;
    const char *listing;
    size_t listing_len;
} rsdi_en_found;

struct rsd_ensurer {
    rsd_allocator alloc;
    rsd_logger logger;
    rsd_http_client *http;
    int (*user_resolve)(void *user, const char *host, char *out, size_t cap);
    void *user_resolve_user;
    struct rsdi_en_kv *kv;            /* desc.kv_slots: the slot saves' state and buffers (in the block) */
    rsd_state *st;
    rsd_etcd *co;                     /* etcd: lock, attribution and generation (else the state dir) */
    int co_then, co_read_err;
    bool co_read;                     /* this ensure's first read from etcd is done */
    bool co_told;                     /* this ensure said the etcd record is corrupt */
    int n_prot_all;                   /* the configured protected models plus the other hosts', each once */
    rsd_protected_model prot_all[RSD_MAX_PROTECTED];
    bool prot_over;                   /* they were more than RSD_MAX_PROTECTED: some are not known */
    rsd_state_lock lk;
    bool lk_active;
    rsd_state_lock alk;               /* the attribution-file lock of a COMMIT */
    bool alk_active;
    int n_chg;
    rsd_attr_change chg[RSDI_EN_MAX_CHANGES]; /* the COMMIT's changes (views into the machine's result) */
    bool ignore_env, has_env, no_cache, lock_fail_closed;
    char env[128];
    int n_protected;
    rsd_protected_model prot[RSD_MAX_PROTECTED]; /* ids in the ensurer's block, each its own length */
    rsd_decision_cache *cache;        /* in the ensurer's block; NULL with desc.no_cache */
    rsdi_ensure_name names[RSD_ENSURE_MAX_NAMES];
    int names_next;
    rsdi_ensure_det det[RSD_ENSURE_MAX_NAMES];
    int det_next;
    /* /models/sse (llama.cpp router): targets known to lack it, the open stream */
    bool no_sse;
    uint32_t sse_poll_ms;
    char nosse[RSD_ENSURE_MAX_NAMES][RSD_TARGET_KEY_MAX];
    int nosse_next;
    bool sse_open, sse_fresh, sse_fast, sse_tried; /* tried: opened once in this ensure */
    bool hit;                         /* the current ensure ended on the TTL fast path */
    rsd_cache_hit hit_v;              /* that hit */
    rsd_http_req_h sse_h;
    uint64_t rwake;                   /* the reconcile's own wake of the current WAIT */
    uint32_t sse_events, sse_wakes, n_pend;
    uint32_t pend_len[RSD_ENSURE_SSE_PENDING];
    char pend[RSD_ENSURE_SSE_PENDING][RSD_ENSURE_SSE_EVENT_BYTES];
    /* the current ensure */
    int phase, final, waiting, error;
    bool inflight, reconciling, observe, user_managed, keep_pinned;
    bool timeout_given;               /* q->timeout_ms was set (else the runtime's default) */
    bool env_warned;                  /* the ENV_UNKNOWN notice was given (once per ensurer) */
    rsdi_en_found found;              /* what detection found (kept while etcd is read first) */
    rsd_http_req_h h;
    rsd_runtime_kind kind;
    rsd_runtime_kind only_kind;       /* desc.runtime: the one runtime it serves (AUTO = any) */
    const rsd_runtime *rt;            /* the runtime of the current run */
    rsd_outcome outcome;
    uint32_t ctx, ctx_ceiling, ctx_floor, timeout_ms, probe_ms, probe_ms_req, requests;
    uint64_t cap_bytes, keep_bytes, kv_per_token;
    uint64_t t0, deadline, wake, last_now, elapsed;
    rsd_http_op op;
    char op_model[RSD_MODEL_ID_MAX];
    char url[RSD_RECONCILE_URL_MAX];
    char root[RSD_RECONCILE_URL_MAX];
    char model[RSD_MODEL_ID_MAX];
    char bearer[RSD_RECONCILE_BEARER_MAX];
    char key[RSD_TARGET_KEY_MAX];
    /* The key of url, kept while the next ensure names the same URL and runtime: a
       decision-cache hit then normalises nothing. */
    bool memo_ok;                     /* memo_key is url's under memo_kind */
    rsd_runtime_kind memo_kind;
    char memo_key[RSD_TARGET_KEY_MAX];
    char message[RSD_RECONCILE_TEXT_MAX];
    rsd_http_header hdrs[RSD_RECONCILE_MAX_HEADERS];
    int n_ours, n_owned;
    const char *ours[RSD_RECONCILE_MAX_OURS];
    rsd_owned owned[RSD_RECONCILE_MAX_OWNED];
    char *mem;                        /* no state dir: the instances this ensurer loaded, "key\0model\0inst\0"
                                         each, in mem_used of mem_cap bytes (attr_arena_bytes, in the ensurer's
                                         block; none when its runtime has no instances) */
    char *mem_own;                    /* ... or allocated at create when the state directory could not be opened */
    size_t mem_cap, mem_used;
    rsd_attr_set *attrs;              /* the target's attribution, as read (in the block with a state
                                         directory or etcd, else NULL); the last-use and lease records are
                                         read into the state's own scratch set, each used before the next read */
    char *attr_arena;                 /* attrs' ids (attr_arena_bytes, after the set in the scratch region;
                                         set up again at each read: detection uses the region before) */
    size_t attr_arena_bytes;
    bool attr_over_told;              /* this ensure said the attribution does not fit attr_arena_bytes */
    uint64_t free_bytes;              /* a free ensure: the bytes asked */
    char lease_id[48];                /* a free ensure: its lease ("" none) */
    /* rsd-serve's own lease (phase LEASE): a free ensure's POST /_rsd/lease and GET polls, or a
       release's DELETE; its answers go to the reconcile's buffer (not reconciling then) */
    int ls;                           /* RSDI_EN_LS_*: the request in flight or due */
    bool ls_used;                     /* this ensure (or release) spoke to rsd-serve's lease endpoint */
    bool ls_over;                     /* its answer did not fit the buffer */
    uint32_t lease_ttl_ms, ls_delay;  /* the ttl sent; the next poll's delay (fast first, doubling) */
    size_t ls_len;                    /* bytes of the answer so far */
    uint64_t ls_id, ls_granted, ls_requested;
    int n_ls_stopped;                 /* the models it stopped (a release: that rsd-serve starts again), in
                                         ls_stopped */
    /* a state-directory lease's release (rsd_ensurer_lease_return_begin): one ensure per model */
    int rel;                          /* RSDI_EN_REL_*: what the next step does */
    bool done_taken;                  /* the ended ensure's (or release's) event was pulled */
    int rel_final, rel_err, rel_n;    /* its code; the first failed ensure's; models back */
    uint32_t rel_kept;                /* the record's first entries that did not come back */
    bool rel_url_given, rel_resolve, rel_ran; /* the record's file lock between ensures: alk */
    rsd_ensure_req rel_q;             /* the release's request (its strings: e->url when given, e->bearer) */
    char rel_key[64];
    rsd_outcome rel_outcome;          /* the first failed ensure's words */
    rsd_decision rel_decision;
    rsd_reason rel_reason;
    char rel_msg[RSD_RECONCILE_TEXT_MAX];
    int n_last, n_uses;
    rsd_last_use last[RSD_RECONCILE_MAX_OURS]; /* for the reconcile: the record's and our own */
    rsdi_ensure_use uses[RSDI_EN_USES];
    uint32_t use_len;                 /* bytes of use_text in use: each use's key NUL model NUL, in uses' order */
    char use_text[RSDI_EN_USE_TEXT];
    rsd_detect *detect;               /* while detecting (its tokens are rc's): in the block's scratch region,
                                         which the attribution uses once the run starts; NULL for one runtime */
    rsd_reconcile *rc;                /* the reconcile, at the end of the ensurer's block */
    const rsd_reconcile_result *res;  /* its result */
    rsd_json_tok *toks;               /* its tokens and answers' buffer (rsd_reconcile_scratch): detection's */
    uint32_t n_toks;                  /* and a lease's while it does not run */
    char *ans;
    size_t ans_cap;
    rsd_evicted *ls_stopped;          /* a lease's stopped models: the reconcile's evicted rows, borrowed
                                         (rsdi_rc_evicted_rows; ids after the lease's answer in ans) */
};

/* The runtime adapter of a kind (NULL for AUTO). */
RSDI_PRIVATE const rsd_runtime *rsdi_en_runtime_of(rsd_runtime_kind kind) {
    switch (kind) {
    case RSD_RUNTIME_LLAMACPP: return rsd_runtime_router();
    case RSD_RUNTIME_OLLAMA: return rsd_runtime_ollama();
    case RSD_RUNTIME_LMSTUDIO: return rsd_runtime_lmstudio();
    default: return NULL;
    }
}

/* ---- helpers ------------------------------------------------------------------ */
RSDI_PRIVATE uint64_t rsdi_en_wall_ms(void) { return rsdi_wall_ms(); }

RSDI_PRIVATE bool rsdi_en_ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (rsdi_ascii_lower(*a) != rsdi_ascii_lower(*b)) return false;
    return *a == *b;
}

/* The client's resolve hook: names resolved by rsd_ensurer_resolve_sync, then the user's. */
RSDI_PRIVATE int rsdi_en_resolve_hook(void *user, const char *host, char *out, size_t cap) {
    rsd_ensurer *e = (rsd_ensurer *)user;
    int i;
    for (i = 0; i < RSD_ENSURE_MAX_NAMES; i++)
        if (e->names[i].host[0] && rsdi_en_ieq(e->names[i].host, host))
            return rsdi_cpy(out, cap, e->names[i].addr) ? 0 : RSD_ERR_BUFFER;
    if (e->user_resolve) return e->user_resolve(e->user_resolve_user, host, out, cap);
    return RSD_ERR_RESOLVE;
}

RSDI_PRIVATE uint32_t rsdi_en_left(const rsd_ensurer *e, uint64_t now_ms, uint32_t cap);

/* ASCII case-insensitive prefix test of a header value. */
RSDI_PRIVATE bool rsdi_en_has_prefix(rsd_str v, const char *lit) {
    size_t i;
    for (i = 0; lit[i]; i++)
        if (i >= v.len || rsdi_ascii_lower(v.ptr[i]) != lit[i]) return false;
    return true;
}

/* ---- /models/sse: wake a router WAIT at the "loaded" event (the poll still confirms) ---- */
RSDI_PRIVATE bool rsdi_en_nosse(const rsd_ensurer *e) {
    int i;
    for (i = 0; i < RSD_ENSURE_MAX_NAMES; i++)
        if (e->nosse[i][0] && strcmp(e->nosse[i], e->key) == 0) return true;
    return false;
}

/* One event of the stream (called from inside rsd_http_client_step). During a WAIT it
   goes to rsd_reconcile_event; between WAITs (a poll or the load POST in flight) it is
   kept and replayed when the next WAIT begins. */
RSDI_PRIVATE void rsdi_en_on_sse(void *user, const rsd_sse_event *ev) {
    rsd_ensurer *e = (rsd_ensurer *)user;
    if (!e->sse_open || !e->reconciling || e->phase != RSDI_EN_RUN) return;
    e->sse_events++;
    if (e->waiting == RSDI_EN_WAIT_WAKE) {
        if (rsd_reconcile_event(e->rc, ev->data.ptr, ev->data.len, e->last_now) == 1) {
            e->wake = e->last_now;
            e->sse_wakes++;
        }
        return;
    }
    if (ev->data.len >= (size_t)RSD_ENSURE_SSE_EVENT_BYTES) {
        e->sse_fast = true; /* could not keep it: the next WAIT polls on the fast schedule */
        return;
    }
    if (e->n_pend == (uint32_t)RSD_ENSURE_SSE_PENDING) { /* full: the newest matter, drop the oldest */
        memmove(e->pend[0], e->pend[1], sizeof e->pend[0] * (RSD_ENSURE_SSE_PENDING - 1));
        memmove(e->pend_len, e->pend_len + 1, sizeof e->pend_len[0] * (RSD_ENSURE_SSE_PENDING - 1));
        e->n_pend--;
    }
    if (ev->data.len) memcpy(e->pend[e->n_pend], ev->data.ptr, ev->data.len);
    e->pend_len[e->n_pend++] = (uint32_t)ev->data.len;
}

/* Opens GET <root>/models/sse for the current router target; false = poll only. */
RSDI_PRIVATE bool rsdi_en_sse_open(rsd_ensurer *e, uint64_t now_ms) {
    char url[RSD_RECONCILE_URL_MAX + 16]; /* rsd_http_send copies it */
    rsd_http_request q;
    rsd_http_header h;
    if (e->sse_open) return true;
    if (e->sse_tried || e->no_sse || e->kind != RSD_RUNTIME_LLAMACPP || !e->key[0] || rsdi_en_nosse(e)) return false;
    if (RSD_SNPRINTF(url, sizeof url, "%s/models/sse", e->root) >= (int)sizeof url) return false;
    memset(&q, 0, sizeof q);
    h.name = rsd_str_c("Accept");
    h.value = rsd_str_c("text/event-stream");
    q.url = url;
    q.bearer_token = e->bearer[0] ? e->bearer : NULL;
    q.headers = &h;
    q.num_headers = 1;
    q.connect_timeout_ms = rsdi_en_left(e, now_ms, e->probe_ms);
    q.total_timeout_ms = rsdi_en_left(e, now_ms, 0xFFFFFFFFu);
    q.on_sse = rsdi_en_on_sse;
    q.user = e;
    if (rsd_http_send(e->http, &q, now_ms, &e->sse_h) < 0) return false; /* e.g. no slot: poll */
    e->requests++;
    e->sse_open = e->sse_tried = true;
    e->sse_fast = false;
    e->n_pend = 0;
    return true;
}

/* Cancels one of the ensure's requests and takes its event at once: the client keeps a
   slot until its event is taken, and the next ensure needs both slots. Events before it are
   dropped, as the step drops every event that is not the ensure's. */
RSDI_PRIVATE void rsdi_en_cancel(rsd_ensurer *e, rsd_http_req_h h) {
    rsd_http_event ev;
    if (rsd_http_cancel(e->http, h) != RSD_OK) return;
    while (rsd_http_next_event(e->http, &ev) && ev.req.id != h.id) {
    }
}

/* Closes the stream when the ensure ends. */
RSDI_PRIVATE void rsdi_en_sse_close(rsd_ensurer *e) {
    if (e->sse_open) rsdi_en_cancel(e, e->sse_h);
    e->sse_open = false;
    e->n_pend = 0;
}

/* The stream ended by itself: a refusal (not 200 text/event-stream, or an error before
   any answer) marks the target as without SSE; any end restores the reconcile's schedule. */
RSDI_PRIVATE void rsdi_en_sse_ended(rsd_ensurer *e, const rsd_http_event *ev) {
    rsd_str ct = rsd_http_header_get(ev->headers, ev->num_headers, "Content-Type");
    bool refused = ev->result == RSD_OK
                       ? (ev->status != 200 || !rsdi_en_has_prefix(ct, "text/event-stream"))
                       : (ev->result != RSD_ERR_CANCELLED && ev->result != RSD_ERR_TIMEOUT &&
                          ev->result != RSD_ERR_CLOSED && ev->status == 0);
    e->sse_open = false;
    e->n_pend = 0;
    if (refused) {
        (void)rsdi_cpy(e->nosse[e->nosse_next], RSD_TARGET_KEY_MAX, e->key);
        e->nosse_next = (e->nosse_next + 1) % RSD_ENSURE_MAX_NAMES;
    }
    if (e->waiting == RSDI_EN_WAIT_WAKE && e->wake > e->rwake) e->wake = e->rwake;
}

/* A WAIT begins: with the stream open (opened now if a router WAIT has none yet), replay
   the events kept since the last WAIT, then poll every sse_poll_ms instead of the fast
   schedule -- the stream gives the latency, the poll only confirms. Not slowed: the first
   WAIT after opening here (an event may have come before the subscription), after a lost
   event, or when the slower poll would come within a probe timeout of the deadline. */
RSDI_PRIVATE void rsdi_en_sse_wait(rsd_ensurer *e, uint64_t now_ms) {
    uint64_t later;
    uint32_t i;
    bool woke = false;
    if (!e->sse_open && rsdi_en_sse_open(e, now_ms)) e->sse_fresh = true;
    if (!e->sse_open) return;
    for (i = 0; i < e->n_pend; i++)
        if (rsd_reconcile_event(e->rc, e->pend[i], e->pend_len[i], now_ms) == 1) woke = true;
    e->n_pend = 0;
    if (woke) {
        e->wake = now_ms;
        e->sse_wakes++;
        e->sse_fast = false;
        return;
    }
    if (e->sse_fresh || e->sse_fast) {
        e->sse_fresh = e->sse_fast = false;
        return;
    }
    later = now_ms + e->sse_poll_ms;
    if (later > e->wake && later + e->probe_ms < e->deadline) e->wake = later;
}

/* Releases the target lock and a COMMIT's attribution lock, if held or waited for. */
RSDI_PRIVATE void rsdi_en_unlock_all(rsd_ensurer *e) {
    /* etcd: the next steps delete the key, else its lease */
    if (RSDI_EN_CO(e)) (void)rsd_etcd_unlock_begin(RSDI_EN_CO(e), e->last_now);
    if (e->alk_active && e->st) rsd_state_unlock(e->st, &e->alk);
    if (e->lk_active && e->st) rsd_state_unlock(e->st, &e->lk);
    e->alk_active = e->lk_active = false;
}

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 4, 5)))
#endif
RSDI_PRIVATE void rsdi_en_fail(rsd_ensurer *e, int err, uint64_t now_ms, const char *fmt, ...) {
    char msg[sizeof e->message];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    (void)rsdi_url_redact(msg, e->message, sizeof e->message); /* a URL's password as *** */
    if (e->inflight) rsdi_en_cancel(e, e->h);
    e->inflight = false;
    rsdi_en_sse_close(e);
    rsdi_en_unlock_all(e);
    e->reconciling = false;
    e->outcome = RSD_OUTCOME_DEGRADED;
    e->error = err < 0 ? err : RSD_ERR_STATE;
    e->final = e->error;
    e->phase = RSDI_EN_DONE;
    e->waiting = RSDI_EN_WAIT_NONE;
    e->elapsed = now_ms > e->t0 ? now_ms - e->t0 : 0;
    rsdi_logf(&e->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_DEGRADED, RSDI_WHERE, "%s", e->message);
}

RSDI_PRIVATE void rsdi_en_touch(rsd_ensurer *e);

/* A free ensure unloaded something: its lease, "lease|<id>" in the state directory
   (attr/<name>.lease, the attribution's format: model = what went, instance = the URL).
   The id is new, so nobody else writes that record: no file lock. */
RSDI_PRIVATE void rsdi_en_lease_write(rsd_ensurer *e) {
    rsd_attr_change ch[RSD_MAX_RESIDENTS];
    char key[64];
    int k, n = 0;
    if (!e->st) return;
    (void)RSD_SNPRINTF(e->lease_id, sizeof e->lease_id, "%llx-%lx", (unsigned long long)rsdi_en_wall_ms(),
                       (unsigned long)rsdi_state_pid());
    (void)RSD_SNPRINTF(key, sizeof key, "lease|%s", e->lease_id);
    for (k = 0; k < e->res->n_evicted && n < RSD_MAX_RESIDENTS; k++) {
        if (e->res->evicted[k].displaced) continue;
        ch[n].model = e->res->evicted[k].id;
        ch[n].instance = e->url;
        ch[n++].remove = false;
    }
    if (n && rsdi_record_update_locked(e->st, key, ".lease", ch, n, rsdi_en_wall_ms(), false) < 0)
        e->lease_id[0] = '\0'; /* not recorded: nothing to release */
}

RSDI_PRIVATE void rsdi_en_finish(rsd_ensurer *e, uint64_t now_ms) {
    rsdi_en_sse_close(e);
    rsdi_en_unlock_all(e);
    e->final = e->res->error;
    e->phase = RSDI_EN_DONE;
    e->waiting = RSDI_EN_WAIT_NONE;
    e->elapsed = now_ms > e->t0 ? now_ms - e->t0 : 0;
    if (e->res->outcome == RSD_OUTCOME_RESIDENT || e->res->keep_resident) rsdi_en_touch(e);
    if (e->free_bytes && e->res->n_evicted) rsdi_en_lease_write(e);
}

/* ---- create / destroy ---------------------------------------------------------- */
/* The owned client's desc: the user's, with the ensurer's defaults where it is zero (one
   HTTP step and the /models/sse stream at a time; the step's answer goes to the ensurer's
   body buffer, so the slots' own buffers only hold the stream and extra requests). */
RSDI_PRIVATE rsd_http_client_desc rsdi_en_http_desc(const rsd_ensurer_desc *d) {
    static const rsdi_dflt t[] = {
        RSDI_DFLT(rsd_http_client_desc, max_requests, RSD_ENSURE_HTTP_REQUESTS),
        RSDI_DFLT(rsd_http_client_desc, max_conns, RSD_ENSURE_HTTP_REQUESTS),
        RSDI_DFLT(rsd_http_client_desc, max_request_bytes, RSD_ENSURE_HTTP_REQUEST_BYTES),
        RSDI_DFLT(rsd_http_client_desc, max_header_bytes, RSD_ENSURE_HTTP_HEADER_BYTES),
        RSDI_DFLT(rsd_http_client_desc, max_body_bytes, RSD_ENSURE_HTTP_SLOT_BODY)};
    rsd_http_client_desc hd = d->http;
    if (!hd.allocator.alloc_fn) hd.allocator = d->allocator;
    if (!hd.logger.fn) hd.logger = d->logger;
    rsdi_defaults(&hd, t, sizeof t / sizeof t[0]);
    return hd;
}

/* The reconcile's limits: the user's, with the ensurer's runtime; false when desc.runtime
   is out of range. */
RSDI_PRIVATE bool rsdi_en_limits(const rsd_ensurer_desc *d, rsd_reconcile_limits *lim) {
    *lim = d->limits;
    if ((int)d->runtime < 0 || (int)d->runtime >= (int)RSD_RUNTIME_KIND_NUM) return false;
    if (!lim->runtime) lim->runtime = rsdi_en_runtime_of(d->runtime);
#if defined(RSD_NO_LMSTUDIO) && defined(RSD_NO_OLLAMA)
    if (!lim->runtime) lim->runtime = rsd_runtime_router(); /* the one runtime in the build: no room for instances */
#endif
    return true;
}

/* The ensurer's own block: the struct, the decision cache (unless no_cache), the in-memory
   instance records (a runtime with instances, no state directory), the scratch region
   (detection, then the attribution), the protected ids, the reconcile (its footprint; the
   answers' buffer is among its tables). */
typedef struct rsdi_en_sizes {
    size_t cache, mem, scratch, attr, prot, rc, kv, total;
    bool lms;                         /* the reconcile keeps instances (LM Studio's state) */
} rsdi_en_sizes;

/* The coordinator URL of a desc (desc.coord, else $RESIDENCY_COORD unless ignore_env); NULL = none. */
RSDI_PRIVATE const char *rsdi_en_coord_url(const rsd_ensurer_desc *d) {
    const char *cu = d->coord ? d->coord : d->ignore_env ? NULL : getenv("RESIDENCY_COORD");
    return cu && cu[0] ? cu : NULL;
}

/* The in-memory instance records: as many bytes as the attribution's ids (attr), so that they
   never take more than the state directory's block they stand in for. */
RSDI_PRIVATE size_t rsdi_en_mem_bytes(size_t attr) { return rsdi_al8(attr); }

RSDI_PRIVATE bool rsdi_en_block(const rsd_ensurer_desc *d, const rsd_reconcile_limits *lim, rsdi_en_sizes *b) {
    rsd_reconcile_limits z = *lim;
    int i;
    if (d->kv_slots && !RSDI_EN_KV_BUILT) return false;
    if (rsd_reconcile_limits_fill(&z) != RSD_OK || !(b->rc = rsdi_al8(rsd_reconcile_footprint(lim)))) return false;
    /* the limits' rule: a runtime with instances keeps their state */
    b->lms = !lim->runtime || (lim->runtime->flags & RSD_RT_INSTANCES);
    b->cache = d->no_cache ? 0 : rsdi_al8(sizeof(rsd_decision_cache));
    /* the in-memory instance records serve only without a state directory and etcd (when the
       directory cannot be opened, create allocates them then) */
    /* the attribution's ids: desc.attr_arena_bytes, by default as many as the reconcile
       keeps (its ours and owned ids go there) */
    b->attr = d->attr_arena_bytes ? d->attr_arena_bytes : z.id_arena_bytes;
    b->mem = RSDI_EN_INSTANCES && b->lms && d->no_state && !rsdi_en_coord_url(d) ? rsdi_en_mem_bytes(b->attr) : 0;
    /* one scratch region: detection's state (runtime AUTO) until the run starts, then the
       attribution (with a state directory or etcd; the last uses and a lease are read into
       the state's own scratch) */
    b->scratch = !d->no_state || rsdi_en_coord_url(d) ? rsdi_al8(sizeof(rsd_attr_set)) + rsdi_al8(b->attr) : 0;
    if (!RSDI_EN_DETECTS_NOTHING && d->runtime == RSD_RUNTIME_AUTO && b->scratch < rsdi_al8(sizeof(rsd_detect)))
        b->scratch = rsdi_al8(sizeof(rsd_detect)); /* a build without detection never holds its state */
    b->prot = 0;
    for (i = 0; i < d->n_protected; i++) b->prot += d->protected_models[i].model_id.len + 1;
    b->kv = RSDI_EN_KV_BUILT && d->kv_slots ? rsdi_al8(sizeof(rsdi_en_kv)) : 0;
    b->total = rsdi_al8(sizeof(rsd_ensurer)) + b->cache + b->mem + b->scratch + b->rc + b->prot + b->kv;
    return true;
}

/* The state directory's desc (attr: the attribution's ids, as the ensurer's own set). */
RSDI_PRIVATE rsd_state_desc rsdi_en_state_desc(const rsd_ensurer_desc *d, size_t attr) {
    rsd_state_desc sd;
    memset(&sd, 0, sizeof sd);
    sd.dir = d->state_dir;
    sd.lock_fail_closed = d->lock_fail_closed;
    sd.attr_arena_bytes = (uint32_t)attr;
    sd.allocator = d->allocator;
    sd.logger = d->logger;
    return sd;
}

/* The coordinator's desc for the URL cu (the client's resolver apart). */
RSDI_PRIVATE rsd_etcd_desc rsdi_en_etcd_desc(const rsd_ensurer_desc *d, const char *cu, size_t attr) {
    rsd_etcd_desc cd;
    memset(&cd, 0, sizeof cd);
    cd.url = cu;
    cd.logger = d->logger;
#ifndef RSD_NO_ETCD /* else create only says that etcd is not in this build */
    cd.host_id = d->coord_host;
    cd.lease_ttl_s = d->coord_lease_ttl_s;
    cd.attr_arena_bytes = (uint32_t)attr;
#define RSDI_EN_COORD_ENV(f, name) (d->f ? d->f : d->ignore_env ? NULL : getenv(name))
    cd.auth_token = RSDI_EN_COORD_ENV(coord_auth_token, "RESIDENCY_COORD_TOKEN");
    cd.auth_user = RSDI_EN_COORD_ENV(coord_user, "RESIDENCY_COORD_USER");
    cd.auth_password = RSDI_EN_COORD_ENV(coord_password, "RESIDENCY_COORD_PASSWORD");
#undef RSDI_EN_COORD_ENV
    cd.fail_closed = d->lock_fail_closed;
    cd.protected_models = d->protected_models;
    cd.n_protected = d->n_protected;
    cd.http = d->http; /* TLS options, limits */
    cd.allocator = d->allocator;
#else
    (void)attr;
#endif
    return cd;
}

RSD_API rsd_ensurer *rsd_ensurer_create(const rsd_ensurer_desc *desc) {
    rsd_ensurer_desc d;
    rsd_http_client_desc hd;
    rsd_reconcile_limits lim;
    rsd_ensurer *e;
    rsdi_en_sizes b;
    char *at;
    int i;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (rsdi_allocator_check(&d.allocator) != RSD_OK || d.n_protected < 0 || d.n_protected > RSD_MAX_PROTECTED ||
        (d.n_protected && !d.protected_models) || !rsdi_en_limits(&d, &lim) || (d.kv_slots && !RSDI_EN_KV_BUILT)) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID,
                 d.kv_slots && !RSDI_EN_KV_BUILT ? "ensurer: kv_slots: not in this build (RSD_NO_ENSURE_KV)"
                                                 : "ensurer: invalid desc", RSDI_WHERE);
        return NULL;
    }
    for (i = 0; i < d.n_protected; i++) {
        rsd_str id = d.protected_models[i].model_id;
        if ((!id.ptr && id.len) || id.len >= (lim.max_id_bytes ? lim.max_id_bytes : (size_t)RSD_MODEL_ID_MAX) ||
            (int)d.protected_models[i].role < 0 ||
            (int)d.protected_models[i].role >= (int)RSD_ROLE_NUM) {
            rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, "ensurer: bad protected model",
                     RSDI_WHERE);
            return NULL;
        }
    }
    if (!rsdi_en_block(&d, &lim, &b)) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, "ensurer: invalid limits", RSDI_WHERE);
        return NULL;
    }
    e = (rsd_ensurer *)rsdi_malloc(&d.allocator, b.total);
    if (!e) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, "ensurer: allocation failed", RSDI_WHERE);
        return NULL;
    }
    memset(e, 0, b.total);
    at = (char *)e + rsdi_al8(sizeof *e);
    if (b.cache) e->cache = (rsd_decision_cache *)(void *)at;
    at += b.cache;
    if (b.mem) e->mem = at;
    e->mem_cap = b.mem;
    at += b.mem;
    if (!d.no_state || rsdi_en_coord_url(&d)) {
        e->attrs = (rsd_attr_set *)(void *)at;
        e->attr_arena = at + rsdi_al8(sizeof(rsd_attr_set));
        e->attr_arena_bytes = b.attr;
        (void)rsd_attr_set_init(e->attrs, e->attr_arena, e->attr_arena_bytes);
    }
    if (!RSDI_EN_DETECTS_NOTHING && d.runtime == RSD_RUNTIME_AUTO) e->detect = (rsd_detect *)(void *)at;
    at += b.scratch;
    e->rc = (rsd_reconcile *)(void *)at;
    at += b.rc;
    if (b.kv) {
        e->kv = (rsdi_en_kv *)(void *)at;
        e->kv->timeout_ms = d.kv_timeout_ms ? d.kv_timeout_ms : (uint32_t)RSDI_EN_KV_TIMEOUT_MS;
    }
    at += b.kv;
    e->only_kind = d.runtime;
    e->alloc = d.allocator;
    e->logger = d.logger;
    hd = rsdi_en_http_desc(&d);
    e->user_resolve = hd.resolve_fn;
    e->user_resolve_user = hd.resolve_user;
    hd.resolve_fn = rsdi_en_resolve_hook;
    hd.resolve_user = e;
    if ((i = rsd_reconcile_init(e->rc, b.rc, &lim)) < 0) { /* rsdi_en_block checked the limits */
        rsdi_logf(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, RSDI_WHERE, "ensurer: reconcile: %s",
                  rsd_result_str(i));
        rsd_ensurer_destroy(e); /* destroy takes what create has set up so far */
        return NULL;
    }
    e->res = rsd_reconcile_result_of(e->rc);
    e->ls_stopped = rsdi_rc_evicted_rows(e->rc);
    rsd_reconcile_scratch(e->rc, &e->toks, &e->n_toks, &e->ans, &e->ans_cap);
    e->http = rsd_http_client_create(&hd);
    if (!e->http) {
        rsd_ensurer_destroy(e);
        return NULL;
    }
    if (!d.no_state) {
        rsd_state_desc sd = rsdi_en_state_desc(&d, b.attr);
        e->st = rsd_state_create(&sd, NULL); /* NULL: run without it (fail-open) */
        if (!e->st && !rsdi_en_coord_url(&d) && RSDI_EN_INSTANCES && b.lms) { /* instances kept in memory */
            e->mem = e->mem_own = (char *)rsdi_malloc(&d.allocator, rsdi_en_mem_bytes(b.attr));
            e->mem_cap = e->mem ? rsdi_en_mem_bytes(b.attr) : 0;
            if (!e->mem)
                rsdi_log(&d.logger, RSD_LOG_WARN, RSD_LOGITEM_ALLOC_FAILED,
                         "ensurer: no room for the in-memory instance records; instances it loads are not its own",
                         RSDI_WHERE);
        }
    }
    {
        const char *cu = rsdi_en_coord_url(&d);
        if (cu && e->attrs) {
            rsd_etcd_desc cd = rsdi_en_etcd_desc(&d, cu, b.attr);
            cd.http.resolve_fn = hd.resolve_fn;
            cd.http.resolve_user = hd.resolve_user;
            if ((e->co = rsd_etcd_create(&cd)) == NULL) { /* a bad coordinator is a configuration error */
                rsdi_logf(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_HTTP_DESC_INVALID, RSDI_WHERE,
                          "ensurer: cannot use the coordinator '%.200s'", cu);
                rsd_ensurer_destroy(e);
                return NULL;
            }
        }
    }
    e->lock_fail_closed = d.lock_fail_closed;
    e->ignore_env = d.ignore_env;
    if (d.residency_env) {
        e->has_env = true;
        if (!rsdi_cpy(e->env, sizeof e->env, d.residency_env)) e->env[0] = '\0';
    }
    e->no_cache = d.no_cache;
    e->no_sse = d.no_sse;
    e->sse_poll_ms = d.sse_poll_ms ? d.sse_poll_ms : (uint32_t)RSD_ENSURE_SSE_POLL_MS;
    if (e->cache) e->cache->ttl_ms = d.cache_ttl_ms;
    e->n_protected = d.n_protected;
    for (i = 0; i < d.n_protected; i++) { /* at: the protected ids' room, each id's length + 1 */
        rsd_str id = d.protected_models[i].model_id;
        if (id.len) memcpy(at, id.ptr, id.len);
        at[id.len] = '\0';
        e->prot[i].model_id = rsd_str_c(at);
        e->prot[i].role = d.protected_models[i].role;
        at += id.len + 1;
    }
    e->lk.fd = -1;
    e->alk.fd = -1;
    e->phase = RSDI_EN_IDLE;
    e->final = RSD_ERR_STATE;
    return e;
}

#define RSDI_EN_USE_KEY(e, u) ((e)->use_text + (u)->key_at)
#define RSDI_EN_USE_MODEL(e, u) ((e)->use_text + (u)->model_at)

/* Writes the last uses a busy file lock held back: one try each (wait: the bounded
   blocking wait, at destroy). */
RSDI_PRIVATE void rsdi_en_uses_flush(rsd_ensurer *e, bool wait) {
    int k;
    for (k = 0; k < e->n_uses && e->st; k++) {
        rsdi_ensure_use *u = &e->uses[k];
        const char *key = RSDI_EN_USE_KEY(e, u), *model = RSDI_EN_USE_MODEL(e, u);
        if (!u->pending) continue;
        if ((wait ? rsd_state_used_touch_sync(e->st, key, model, u->used_ms)
                  : rsd_state_used_touch(e->st, key, model, u->used_ms)) == RSD_PENDING)
            continue;
        u->pending = false;
        u->written_ms = u->used_ms;
    }
}

/* The oldest use goes (written out first when its lock was busy), its ids with it: the
   text keeps the uses' order without holes. */
RSDI_PRIVATE void rsdi_en_use_drop_oldest(rsd_ensurer *e) {
    rsdi_ensure_use *u = &e->uses[0];
    size_t at, n;
    int k, o;
    for (k = 1; k < e->n_uses; k++)
        if (e->uses[k].used_ms < u->used_ms) u = &e->uses[k];
    if (u->pending && e->st) (void)rsd_state_used_touch(e->st, RSDI_EN_USE_KEY(e, u), RSDI_EN_USE_MODEL(e, u), u->used_ms);
    at = u->key_at;
    n = u->model_at + strlen(RSDI_EN_USE_MODEL(e, u)) + 1 - at;
    memmove(e->use_text + at, e->use_text + at + n, e->use_len - at - n);
    e->use_len -= (uint32_t)n;
    for (k = 0, o = 0; k < e->n_uses; k++) {
        rsdi_ensure_use v = e->uses[k];
        if (&e->uses[k] == u) continue;
        if (v.key_at > at) {
            v.key_at = (uint16_t)(v.key_at - n);
            v.model_at = (uint16_t)(v.model_at - n);
        }
        e->uses[o++] = v;
    }
    e->n_uses = o;
}

/* An ensure returned resident: a use of (key, model) now, on the wall clock (shared by
   every process on the host and comparable with a server's status.last_used). The table
   holds RSDI_EN_USES uses and RSDI_EN_USE_TEXT bytes of their ids; when either is full the
   oldest goes. */
RSDI_PRIVATE void rsdi_en_touch(rsd_ensurer *e) {
    uint64_t wall = rsdi_en_wall_ms();
    rsdi_ensure_use *u = NULL;
    size_t kl = strlen(e->key), ml = strlen(e->model);
    int k;
    if (!e->key[0] || !e->model[0]) return;
    for (k = 0; k < e->n_uses && !u; k++)
        if (strcmp(RSDI_EN_USE_KEY(e, &e->uses[k]), e->key) == 0 && strcmp(RSDI_EN_USE_MODEL(e, &e->uses[k]), e->model) == 0)
            u = &e->uses[k];
    if (!u) {
        if (kl + ml + 2 > sizeof e->use_text) return; /* never: a key and a model fit (256 + 256 bytes) */
        while (e->n_uses && (e->n_uses >= RSDI_EN_USES || e->use_len + kl + ml + 2 > sizeof e->use_text))
            rsdi_en_use_drop_oldest(e);
        u = &e->uses[e->n_uses++];
        memset(u, 0, sizeof *u);
        u->key_at = (uint16_t)e->use_len;
        memcpy(e->use_text + e->use_len, e->key, kl + 1);
        u->model_at = (uint16_t)(e->use_len + kl + 1);
        memcpy(e->use_text + u->model_at, e->model, ml + 1);
        e->use_len += (uint32_t)(kl + ml + 2);
    }
    if (wall > u->used_ms) u->used_ms = wall;
    if (!e->st || (!u->pending && u->written_ms && u->used_ms - u->written_ms < RSDI_EN_USE_WRITE_MS)) return;
    if (rsd_state_used_touch(e->st, RSDI_EN_USE_KEY(e, u), RSDI_EN_USE_MODEL(e, u), u->used_ms) == RSD_PENDING) {
        u->pending = true;
    } else {
        u->pending = false;
        u->written_ms = u->used_ms;
    }
}

/* The target's last uses for the reconcile: the state directory's record, and this
   ensurer's own (newer, or not written yet). The record is read into the state's scratch
   set, so this is the last state call before rsd_reconcile_begin copies them. */
RSDI_PRIVATE void rsdi_en_read_uses(rsd_ensurer *e) {
    const rsd_attr_set *used = e->st ? rsdi_state_scratch(e->st) : NULL;
    size_t i;
    int k;
    e->n_last = 0;
    if (used && rsd_state_used_load(e->st, e->key, rsdi_state_scratch(e->st)) > 0)
        for (i = 0; i < used->count && e->n_last < RSD_RECONCILE_MAX_OURS; i++) {
            e->last[e->n_last].model = used->items[i].model;
            e->last[e->n_last++].used_ms = used->items[i].loaded_at_ms;
        }
    for (k = 0; k < e->n_uses && e->n_last < RSD_RECONCILE_MAX_OURS; k++)
        if (strcmp(RSDI_EN_USE_KEY(e, &e->uses[k]), e->key) == 0) {
            e->last[e->n_last].model = RSDI_EN_USE_MODEL(e, &e->uses[k]);
            e->last[e->n_last++].used_ms = e->uses[k].used_ms;
        }
}

RSD_API void rsd_ensurer_destroy(rsd_ensurer *e) {
    rsd_allocator a;
    if (!e) return;
    rsdi_en_uses_flush(e, true);
    rsdi_en_unlock_all(e);
    rsd_etcd_destroy(e->co);
    rsd_http_client_destroy(e->http);
    rsd_state_destroy(e->st);
    a = e->alloc;
    rsdi_free(&a, e->mem_own);
    rsdi_free(&a, e);
}

RSD_API size_t rsd_ensurer_footprint(const rsd_ensurer_desc *desc) {
    rsd_ensurer_desc d;
    rsd_http_client_desc hd;
    rsd_reconcile_limits lim;
    size_t http, total, co = 0;
    rsdi_en_sizes b;
    const char *cu;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    hd = rsdi_en_http_desc(&d);
    if (d.n_protected < 0 || d.n_protected > RSD_MAX_PROTECTED || (d.n_protected && !d.protected_models) ||
        !rsdi_en_limits(&d, &lim) || rsdi_client_desc_fix(&hd) < 0 || !(http = rsdi_client_footprint(&hd)) ||
        !rsdi_en_block(&d, &lim, &b))
        return 0;
    total = b.total + http; /* the reconcile is in the block */
    if (!d.no_state) {
        rsd_state_desc sd = rsdi_en_state_desc(&d, b.attr);
        total += rsdi_state_footprint(&sd);
    }
    if ((cu = rsdi_en_coord_url(&d)) != NULL) {
        rsd_etcd_desc cd = rsdi_en_etcd_desc(&d, cu, b.attr);
        if (!(co = rsdi_etcd_footprint(&cd))) return 0; /* not in this build: create refuses */
    }
    return total + co;
}

RSD_API rsd_http_client *rsd_ensurer_http(rsd_ensurer *e) { return e ? e->http : NULL; }

RSD_API bool rsd_ensurer_has_state(const rsd_ensurer *e) { return e && e->st; }

RSD_API const char *rsd_runtime_kind_str(int kind) {
    switch (kind) {
#define RSDI_X(n, s) case RSD_RUNTIME_##n: return s;
        RSD_RUNTIME_KINDS(RSDI_X)
#undef RSDI_X
    default: return "unknown";
    }
}

RSD_API int rsd_runtime_kind_parse(const char *s) {
    int k;
    if (!s) return RSD_ERR_ARG;
    if (rsdi_en_ieq(s, "router") || rsdi_en_ieq(s, "llama.cpp") || rsdi_en_ieq(s, "llama-server"))
        return RSD_RUNTIME_LLAMACPP;
    for (k = 0; k < (int)RSD_RUNTIME_KIND_NUM; k++)
        if (rsdi_en_ieq(s, rsd_runtime_kind_str(k))) return k;
    return RSD_ERR_ARG;
}

RSDI_PRIVATE int rsdi_en_resolve_one(rsd_ensurer *e, const char *url);

/* The URL's host, and etcd's when the ensurer uses it. */
RSD_API int rsd_ensurer_resolve_sync(rsd_ensurer *e, const char *url) {
    int r = rsdi_en_resolve_one(e, url);
    if (e && RSDI_EN_CO(e)) {
        rsd_etcd_info v;
        rsd_etcd_query(RSDI_EN_CO(e), &v);
        (void)rsdi_en_resolve_one(e, v.root); /* a failure shows up as etcd unreachable */
    }
    return r;
}

RSDI_PRIVATE int rsdi_en_resolve_one(rsd_ensurer *e, const char *url) {
    char host[RSD_HTTP_MAX_HOST_BYTES + 1], numeric[INET6_ADDRSTRLEN + 1];
    struct addrinfo hints, *ai = NULL;
    const char *num = NULL;
    rsd_url u;
    int rc, i;
    if (!e || !url) return RSD_ERR_ARG;
    if ((rc = rsd_url_parse(&u, url, strlen(url))) < 0) return rc;
    if (u.host_kind != RSD_HOST_NAME || u.host.len > RSD_HTTP_MAX_HOST_BYTES) return RSD_OK;
    memcpy(host, u.host.ptr, u.host.len);
    host[u.host.len] = '\0';
    if (rsdi_en_ieq(host, "localhost")) return RSD_OK;
    for (i = 0; i < RSD_ENSURE_MAX_NAMES; i++)
        if (rsdi_en_ieq(e->names[i].host, host)) return RSD_OK;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai) {
        rsdi_logf(&e->logger, RSD_LOG_WARN, RSD_LOGITEM_HTTP_RESOLVE_FAILED, RSDI_WHERE, "%s", host);
        return RSD_ERR_RESOLVE;
    }
    if (ai->ai_family == AF_INET)
        num = inet_ntop(AF_INET, &((struct sockaddr_in *)(void *)ai->ai_addr)->sin_addr, numeric,
                        (socklen_t)sizeof numeric);
    else if (ai->ai_family == AF_INET6)
        num = inet_ntop(AF_INET6, &((struct sockaddr_in6 *)(void *)ai->ai_addr)->sin6_addr, numeric,
                        (socklen_t)sizeof numeric);
    freeaddrinfo(ai);
    if (!num) return RSD_ERR_RESOLVE;
    i = e->names_next;
    e->names_next = (e->names_next + 1) % RSD_ENSURE_MAX_NAMES;
    (void)rsdi_cpy(e->names[i].host, sizeof e->names[i].host, host);
    (void)rsdi_cpy(e->names[i].addr, sizeof e->names[i].addr, num);
    return RSD_OK;
}

/* ---- the run ------------------------------------------------------------------- */
RSDI_PRIVATE uint32_t rsdi_en_left(const rsd_ensurer *e, uint64_t now_ms, uint32_t cap) {
    uint64_t left = e->deadline > now_ms ? e->deadline - now_ms : 1;
    return left < cap ? (uint32_t)left : cap;
}

/* The RESIDENCY value a reconcile sees: forced observe, the desc's, or the environment's. */
RSDI_PRIVATE const char *rsdi_en_env(const rsd_ensurer *e) {
    if (e->observe) return "observe";
    if (e->has_env) return e->env;
    return e->ignore_env ? NULL : getenv("RESIDENCY");
}

/* ---- the run: one machine (rsd_reconcile) with the runtime's adapter ---------------- */
/* The target's generation from etcd (as last read) or the state dir; false = unknown. */
RSDI_PRIVATE bool rsdi_en_gen(rsd_ensurer *e, uint64_t *gen) {
    *gen = 0;
    if (RSDI_EN_CO(e)) {
        rsd_etcd_info v;
        rsd_etcd_query(RSDI_EN_CO(e), &v);
        if (e->co_read_err < 0 || !v.has_gen) return false;
        *gen = v.gen;
        return true;
    }
    return e->st && rsd_state_gen_read(e->st, e->key, gen) == RSD_OK;
}

/* The target's attribution into e->attrs, from etcd (as last read) or the state dir;
   RSD_ERR_TOO_LARGE (e->attrs->over) when it does not fit attr_arena_bytes. The set is
   set up again first: detection's state shares its region. */
RSDI_PRIVATE int rsdi_en_attr_load(rsd_ensurer *e) {
    (void)rsd_attr_set_init(e->attrs, e->attr_arena, e->attr_arena_bytes);
    if (RSDI_EN_CO(e)) {
        rsd_etcd_info v;
        int r;
        rsd_etcd_query(RSDI_EN_CO(e), &v);
        if (e->co_read_err < 0) {
            e->attrs->corrupt = v.attr_corrupt;
            return 0;
        }
        if ((r = rsd_attr_set_copy(e->attrs, v.attrs)) < 0) return r; /* over there: over here */
        e->attrs->reset = false;
        e->attrs->corrupt = v.attr_corrupt;
        return (int)e->attrs->count;
    }
    if (!e->st) return RSD_ERR_STATE;
    return rsd_state_attr_load(e->st, e->key, e->attrs);
}

/* The protected models a reconcile gets: the configured ones, with etcd also every other
   host's (published by their ensurers), each model once, up to RSD_MAX_PROTECTED (prot_over
   when more: the notice says so). */
RSDI_PRIVATE const rsd_protected_model *rsdi_en_protected(rsd_ensurer *e, int *n) {
    rsd_etcd_info v;
    int i, j;
    e->prot_over = false;
    if (!RSDI_EN_CO(e)) {
        *n = e->n_protected;
        return e->n_protected ? e->prot : NULL;
    }
    rsd_etcd_query(RSDI_EN_CO(e), &v);
    e->n_prot_all = 0;
    for (i = 0; i < e->n_protected; i++) e->prot_all[e->n_prot_all++] = e->prot[i];
    for (i = 0; i < v.n_protected; i++) {
        rsd_str id = v.protected_models[i].model_id;
        for (j = 0; j < e->n_protected && !rsd_str_eq(e->prot[j].model_id, id); j++) {}
        if (j < e->n_protected) { /* this host protects it too: a role given by either wins */
            if (e->prot_all[j].role == RSD_ROLE_NONE) e->prot_all[j].role = v.protected_models[i].role;
            continue;
        }
        if (e->n_prot_all >= RSD_MAX_PROTECTED) {
            e->prot_over = true;
            continue;
        }
        e->prot_all[e->n_prot_all++] = v.protected_models[i];
    }
    *n = e->n_prot_all;
    return e->n_prot_all ? e->prot_all : NULL;
}

/* etcd: the first read of an ensure (attribution, generation, the hosts' protections),
   before the reconcile starts; start_run / start_lms run again when it answered. */
RSDI_PRIVATE bool rsdi_en_co_read(rsd_ensurer *e, uint64_t now_ms) {
    uint64_t dl;
    int r;
    if (!RSDI_EN_CO(e) || e->co_read) return false;
    dl = e->deadline < now_ms + (uint64_t)RSD_ETCD_REQUEST_MS * 2 ? e->deadline : now_ms + (uint64_t)RSD_ETCD_REQUEST_MS * 2;
    r = rsd_etcd_read_begin(RSDI_EN_CO(e), e->key, now_ms, dl);
    e->phase = RSDI_EN_RUN;
    if (r < 0) {
        e->co_read = true;
        e->co_read_err = r;
        return false;
    }
    e->waiting = RSDI_EN_WAIT_COORD;
    e->co_then = RSDI_EN_CO_READ;
    return true;
}

/* etcd could not be read at the start: one warning notice (after begin). */
RSDI_PRIVATE void rsdi_en_co_notice(rsd_ensurer *e) {
    rsd_etcd_info v;
    if (!RSDI_EN_CO(e) || e->co_read_err >= 0) return;
    rsd_etcd_query(RSDI_EN_CO(e), &v);
    if (RSDI_EN_INSTANCES && (e->rt->flags & RSD_RT_INSTANCES))
        rsd_reconcile_add_notice(e->rc, RSD_DMSG_STATE_FAILED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                 "could not read the shared record for '%s' from etcd (%s): residency treats every "
                                 "loaded instance there as not its own", e->url,
                                 v.message[0] ? v.message : rsd_result_str(e->co_read_err));
    else
        rsd_reconcile_add_notice(e->rc, RSD_DMSG_STATE_FAILED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                 "could not read the shared record for '%s' from etcd (%s): residency treats every "
                                 "resident there as not its own, and other hosts' protections are unknown", e->url,
                                 v.message[0] ? v.message : rsd_result_str(e->co_read_err));
}

/* Other hosts' protections read only in part (etcd said so, or with this host's own they are
   over RSD_MAX_PROTECTED): one warning notice; the decision goes on with those known. */
RSDI_PRIVATE void rsdi_en_prot_notice(rsd_ensurer *e) {
    rsd_etcd_info v;
    if (!RSDI_EN_CO(e) || e->co_read_err < 0) return; /* unreadable: rsdi_en_co_notice says so */
    rsd_etcd_query(RSDI_EN_CO(e), &v);
    if (!v.protected_incomplete && !e->prot_over) return;
    rsd_reconcile_add_notice(e->rc, RSD_DMSG_STATE_FAILED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                             "other hosts' protections on etcd are known only in part for '%s' (%s): residency "
                             "decides with those it knows and may evict a model another host protects", e->url,
                             v.protected_incomplete ? v.protected_why
                                                    : "with this host's own, over RSD_MAX_PROTECTED distinct models");
}

/* The in-memory record at p: its model and instance ids, and the next record. */
RSDI_PRIVATE char *rsdi_en_mem_next(char *p, char **m, char **in) {
    *m = p + strlen(p) + 1;
    *in = *m + strlen(*m) + 1;
    return *in + strlen(*in) + 1;
}

/* The target's attribution: plain entries (models this library loaded there) as ours[],
   entries naming an instance as owned[] -- or, without a state directory, the instances
   this ensurer loaded itself. */
RSDI_PRIVATE void rsdi_en_read_attr(rsd_ensurer *e) {
    size_t i;
    e->n_ours = e->n_owned = 0;
    if (!e->st && !RSDI_EN_CO(e)) {
        char *p = e->mem, *n, *m, *in;
        for (; RSDI_EN_INSTANCES && p && p < e->mem + e->mem_used && e->n_owned < RSD_RECONCILE_MAX_OWNED; p = n) {
            n = rsdi_en_mem_next(p, &m, &in);
            if (strcmp(p, e->key) == 0) {
                e->owned[e->n_owned].model = m;
                e->owned[e->n_owned++].instance = in;
            }
        }
        return;
    }
    if (rsdi_en_attr_load(e) < 0) return;
    for (i = 0; i < e->attrs->count; i++) {
        if (!e->attrs->items[i].instance[0]) {
            if (e->n_ours < RSD_RECONCILE_MAX_OURS) e->ours[e->n_ours++] = e->attrs->items[i].model;
        } else if (RSDI_EN_INSTANCES && e->n_owned < RSD_RECONCILE_MAX_OWNED) {
            e->owned[e->n_owned].model = e->attrs->items[i].model;
            e->owned[e->n_owned++].instance = e->attrs->items[i].instance;
        }
    }
}

/* Says so (once: the read that reset it) when the attribution just read was corrupt. */
RSDI_PRIVATE void rsdi_en_reset_notice(rsd_ensurer *e) {
    char name[RSD_STATE_MAX_NAME_BYTES];
    if (e->attrs && e->attrs->over && !e->attr_over_told && e->reconciling) { /* once per ensure */
        e->attr_over_told = true;
        rsd_reconcile_add_notice(e->rc, RSD_DMSG_STATE_FAILED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                 "the record of the %s residency loaded on '%s' needs %lu bytes of ids, over "
                                 "attr_arena_bytes (%lu): residency treats every %s there as not its own and "
                                 "records no change until attr_arena_bytes is raised",
                                 (e->rt->flags & RSD_RT_INSTANCES) ? "instances" : "models", e->url,
                                 (unsigned long)e->attrs->arena_used, (unsigned long)e->attrs->arena_bytes,
                                 (e->rt->flags & RSD_RT_INSTANCES) ? "loaded instance" : "resident");
    }
    if (RSDI_EN_CO(e) && e->attrs->corrupt && !e->co_told && e->reconciling) { /* once per ensure */
        rsd_etcd_info v;
        rsd_etcd_query(RSDI_EN_CO(e), &v);
        e->co_told = true;
        if (rsd_state_file_name(e->key, name, sizeof name) < 0) name[0] = '\0';
        if (RSDI_EN_INSTANCES && (e->rt->flags & RSD_RT_INSTANCES))
            rsd_reconcile_add_notice(e->rc, RSD_DMSG_ATTR_RESET, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                     "the record of the %s instances residency loaded on '%s' (etcd %s/attr/%s) "
                                     "is corrupt: residency treats every loaded instance there as not its own "
                                     "until the next change rewrites it", e->rt->label, e->url, v.prefix, name);
        else
            rsd_reconcile_add_notice(e->rc, RSD_DMSG_ATTR_RESET, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                     "the record of the models residency loaded on '%s' (etcd %s/attr/%s) is "
                                     "corrupt: residency treats every resident there as not its own until the "
                                     "next change rewrites it", e->url, v.prefix, name);
        return;
    }
    if (!e->st || !e->attrs->reset) return;
    e->attrs->reset = false;
    if (rsd_state_file_name(e->key, name, sizeof name) < 0) name[0] = '\0';
    if (RSDI_EN_INSTANCES && (e->rt->flags & RSD_RT_INSTANCES))
        rsd_reconcile_add_notice(e->rc, RSD_DMSG_ATTR_RESET, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                 "the record of the %s instances residency loaded on '%s' was corrupt and "
                                 "has been reset (kept as %s/attr/%s.attr.corrupt): residency treats every loaded "
                                 "instance there as not its own", e->rt->label, e->url, rsd_state_dir(e->st), name);
    else
        rsd_reconcile_add_notice(e->rc, RSD_DMSG_ATTR_RESET, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                 "the record of the models residency loaded on '%s' was corrupt and has been "
                                 "reset (kept as %s/attr/%s.attr.corrupt): residency treats every resident "
                                 "there as not its own", e->url, rsd_state_dir(e->st), name);
}

/* Says so once per ensurer when RESIDENCY holds a value residency does not know (a typo
   such as "obsreve" must not silently mean "manage"). */
RSDI_PRIVATE void rsdi_en_env_notice(rsd_ensurer *e) {
    static const char fmt[] = "RESIDENCY='%.60s' is not a value residency knows, so it manages this "
                              "target as if RESIDENCY were unset; for observe-only use observe, off, 0, "
                              "false, user or user-managed, to manage on purpose on, 1, true or managed";
    const char *v = e->observe ? NULL : rsdi_en_env(e);
    if (e->env_warned || rsd_env_known(v)) return;
    e->env_warned = true;
    rsd_reconcile_add_notice(e->rc, RSD_DMSG_ENV_UNKNOWN, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL, fmt, v);
}

/* The TTL fast path, before the attribution is read and the reconcile is set
   up: a live decision-cache entry for (key, model) under this generation (a hit under
   another generation is a miss) ends the ensure with no request, as the reconcile's own
   lookup would. A bearer the reconcile would reject takes the slow path (its error). */
RSDI_PRIVATE bool rsdi_en_ttl_hit(rsd_ensurer *e, uint64_t gen, uint64_t now_ms) {
    if (!rsdi_no_ctl(e->bearer)) return false;
    if (!e->cache || rsdi_cache_lookup_norm(e->cache, e->key, e->model, now_ms, gen, &e->hit_v) != 1) return false;
    e->hit = true;
    e->outcome = (rsd_outcome)e->hit_v.outcome;
    e->reconciling = false;
    e->final = e->hit_v.error;
    e->phase = RSDI_EN_DONE;
    e->waiting = RSDI_EN_WAIT_NONE;
    e->elapsed = now_ms > e->t0 ? now_ms - e->t0 : 0;
    rsdi_logf(&e->logger, RSD_LOG_DEBUG, RSD_LOGITEM_RECONCILE_CACHE_HIT, RSDI_WHERE, "%s %s", e->key, e->model);
    if ((rsd_outcome)e->hit_v.outcome == RSD_OUTCOME_RESIDENT || e->hit_v.keep_resident) rsdi_en_touch(e);
    return true;
}

/* The state directory's records of this target under the key an older version gave it
   ("<runtime>|<url>" by the older rule: the path and a port's leading zeros kept) move to
   e->key, so an upgrade keeps what it loaded and when it was used. How many files moved. */
RSDI_PRIVATE int rsdi_en_migrate(rsd_ensurer *e, const rsd_runtime *rt) {
    char raw[RSD_RECONCILE_URL_MAX + 64], root[RSD_RECONCILE_URL_MAX], old[RSD_TARGET_KEY_MAX];
    const char *u = e->url; /* the key before normalising: "<runtime>|<url>", a root hook's root */
    if (rt->root && rt->root(e->url, root, sizeof root) < 0) return 0;
    if (rt->root) u = root;
    if (RSD_SNPRINTF(raw, sizeof raw, "%s|%s", rt->name, u) >= (int)sizeof raw ||
        rsdi_state_legacy_key(raw, old, sizeof old) <= 0)
        return 0;
    return rsdi_state_migrate(e->st, old, e->key); /* how many files moved */
}

/* Starts the reconcile for e->kind: key, generation, TTL fast path, attribution, desc. */
RSDI_PRIVATE void rsdi_en_start_run(rsd_ensurer *e, const rsdi_en_found *f, uint64_t now_ms) {
    const rsd_runtime *rt = rsdi_en_runtime_of(e->kind);
    rsd_reconcile_desc d;
    uint64_t gen = 0;
    bool has_gen = false;
    int rc;
    if (!rt) {
        rsdi_en_fail(e, RSD_ERR_NOT_FOUND, now_ms, "%s at %s: no %s driver in this build; nothing managed",
                     rsd_runtime_kind_str(e->kind), e->url, rsd_runtime_kind_str(e->kind));
        return;
    }
    e->rt = rt;
    if (!e->memo_ok || e->memo_kind != e->kind) {
        e->memo_ok = false;
        if (rsd_reconcile_target_key(rt, e->url, e->key, sizeof e->key) < 0) {
            rsdi_en_fail(e, RSD_ERR_URL, now_ms, "URL too long: %s", e->url);
            return;
        }
        memcpy(e->memo_key, e->key, sizeof e->key);
        e->memo_ok = true;
        e->memo_kind = e->kind;
    } else {
        memcpy(e->key, e->memo_key, sizeof e->key);
    }
    if (!e->timeout_given && rt->deadline_ms) e->deadline = e->t0 + rt->deadline_ms; /* e.g. slow LM Studio loads */
    if (f) { /* what detection found (the listing only while its answer is in hand) */
        e->found = *f;
        e->found.listing = NULL;
        e->found.listing_len = 0;
    }
    if (rsdi_en_co_read(e, now_ms)) return; /* etcd first; called again (f NULL) when it answered */
    if (!f) f = &e->found;
    has_gen = rsdi_en_gen(e, &gen);
    if (!e->no_cache && !e->free_bytes && rsdi_en_ttl_hit(e, has_gen ? gen : 0, now_ms)) return;
    if (e->free_bytes && RSDI_EN_INSTANCES && (rt->flags & RSD_RT_INSTANCES)) {
        rsdi_en_fail(e, RSD_ERR_ARG, now_ms, "%s at %s: freeing bytes is not offered for this runtime", rt->label, e->url);
        return;
    }
    if (e->st && !RSDI_EN_CO(e) && rsdi_en_migrate(e, rt) > 0) /* not on a TTL hit: nothing to move then */
        has_gen = rsdi_en_gen(e, &gen);
    rsdi_en_read_attr(e);
    rsdi_en_uses_flush(e, false);
    rsdi_en_read_uses(e);
    memset(&d, 0, sizeof d);
    d.runtime = rt;
    d.base_url = e->url;
    d.target_key = e->key;
    d.keep = e->model[0] ? e->model : NULL;
    d.free_bytes = e->free_bytes;
    d.residency_env = rsdi_en_env(e);
    d.user_managed = e->user_managed;
    d.keep_pinned = e->keep_pinned;
    d.explicit_load = true; /* ensuring residency is an explicit load */
    d.lock = e->st != NULL || RSDI_EN_CO(e) != NULL;
    d.has_generation = has_gen;
    d.generation = gen;
    d.protected_models = rsdi_en_protected(e, &d.n_protected);
    d.ours = e->n_ours ? e->ours : NULL;
    d.n_ours = e->n_ours;
    d.last_used = e->n_last ? e->last : NULL;
    d.n_last_used = e->n_last;
    d.owned = e->n_owned ? e->owned : NULL;
    d.n_owned = e->n_owned;
    d.context_length = e->ctx;
    d.context_ceiling = e->ctx_ceiling;
    d.context_floor = e->ctx_floor;
    d.kv_bytes_per_token = e->kv_per_token;
    d.capacity_bytes = e->cap_bytes;
    d.keep_bytes = e->keep_bytes;
    d.deadline_ms = rsdi_en_left(e, now_ms, 0xFFFFFFFFu);
    d.probe_timeout_ms = e->probe_ms_req;
    d.bearer = e->bearer[0] ? e->bearer : NULL;
    d.cache = e->no_cache ? NULL : e->cache;
    d.logger = e->logger;
    if (f) {
        d.capacity_known = f->capacity_known;
        d.unlimited = f->unlimited;
        d.max_instances = f->max_instances;
        d.first_listing = f->listing;
        d.first_listing_len = f->listing_len;
    }
    e->reconciling = true;
    e->phase = RSDI_EN_RUN;
    rc = rsd_reconcile_begin(e->rc, &d, now_ms);
    if (rc == RSD_OK) {
        rsdi_en_env_notice(e);
        rsdi_en_reset_notice(e);
        rsdi_en_co_notice(e);
        rsdi_en_prot_notice(e);
    }
    /* on error the reconcile is DONE with it; step picks it up */
}

/* A detection answer: the next probe, or the run with what it found, or the end. */
RSDI_PRIVATE void rsdi_en_probe_answer(rsd_ensurer *e, const rsd_http_event *ev, uint64_t now_ms) {
    rsd_detect *d = e->detect;
    rsdi_en_found f;
    (void)rsd_detect_feed(d, ev->result, ev->status, NULL, 0, ev->sys_errno ? strerror(ev->sys_errno) : NULL, now_ms);
    if (rsd_detect_next(d, now_ms).kind != RSD_STEP_DONE) return; /* the next probe (or the same, later) */
    if (!d->runtime) {
        rsdi_en_fail(e, d->error, now_ms, "%s", d->message);
        return;
    }
    {
        int i = e->det_next;
        e->det_next = (e->det_next + 1) % RSD_ENSURE_MAX_NAMES;
        (void)rsd_target_key_normalise(rsd_str_c(e->url), e->det[i].key, sizeof e->det[i].key);
        e->kind = (rsd_runtime_kind)rsd_runtime_kind_parse(d->runtime->name);
        e->det[i].kind = e->kind;
    }
    memset(&f, 0, sizeof f);
    f.capacity_known = d->capacity_known;
    f.unlimited = d->unlimited;
    f.max_instances = d->max_instances;
    if (d->first_listing) { /* the runtime's first request is this very GET (kept whole in the reconcile's buffer) */
        f.listing = d->buf;
        f.listing_len = d->buf_len;
    }
    rsdi_en_start_run(e, &f, now_ms); /* the detection state is gone from here on */
}

/* ---- rsd-serve's own lease: a free ensure, and its release ----------------------- */
/* A free ensure first POSTs /_rsd/lease (rsd-serve's lease: ttl, restore), then polls
   GET /_rsd/lease/ID until ready; a 404, 405 or 501 to the POST (or a 200 that is no lease:
   LM Studio's unknown route) means the target is not rsd-serve, and the ensure goes on as
   before (detection, the free plan). A release of an
   "rsd-serve:ID" lease is one DELETE /_rsd/lease/ID. */
#define RSDI_EN_LS_PREFIX "rsd-serve:"

RSDI_PRIVATE void rsdi_en_on_body(void *user, const char *data, size_t len);

/* Sends the lease request e->ls asks for; false when it could not be sent (the ensure failed). */
RSDI_PRIVATE bool rsdi_en_ls_send(rsd_ensurer *e, uint64_t now_ms) {
    char url[RSD_RECONCILE_URL_MAX + 48], body[128]; /* rsd_http_send copies both */
    rsd_http_request q;
    int rc, n;
    memset(&q, 0, sizeof q);
    if (e->ls == RSDI_EN_LS_TAKE) {
        n = RSD_SNPRINTF(url, sizeof url, "%s/_rsd/lease", e->root);
        q.method = "POST";
        q.content_type = "application/json";
        q.body = body;
        q.body_len = (size_t)RSD_SNPRINTF(body, sizeof body, "{\"bytes\":%llu,\"ttl_ms\":%lu,\"restore\":true}",
                                          (unsigned long long)e->free_bytes, (unsigned long)e->lease_ttl_ms);
    } else {
        n = RSD_SNPRINTF(url, sizeof url, "%s/_rsd/lease/%llu", e->root, (unsigned long long)e->ls_id);
        q.method = e->ls == RSDI_EN_LS_POLL ? "GET" : "DELETE";
    }
    if (n < 0 || n >= (int)sizeof url) {
        rsdi_en_fail(e, RSD_ERR_URL, now_ms, "lease: URL too long: %s", e->root);
        return false;
    }
    q.url = url;
    q.bearer_token = e->bearer[0] ? e->bearer : NULL;
    q.total_timeout_ms = rsdi_en_left(e, now_ms, e->probe_ms);
    q.connect_timeout_ms = q.total_timeout_ms;
    q.on_body = rsdi_en_on_body;
    q.user = e;
    e->ls_len = 0;
    e->ls_over = false;
    if ((rc = rsd_http_send(e->http, &q, now_ms, &e->h)) < 0) {
        rsdi_en_fail(e, rc, now_ms, "%s %s: %s", q.method, url, rsd_result_str(rc));
        return false;
    }
    e->requests++;
    e->inflight = true;
    e->waiting = RSDI_EN_WAIT_HTTP;
    e->op = RSD_OP_NONE;
    return true;
}

/* The lease's words for the operator in e->message (a URL's password as ***). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
RSDI_PRIVATE void rsdi_en_say(rsd_ensurer *e, const char *fmt, ...) {
    char msg[sizeof e->message];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    (void)rsdi_url_redact(msg, e->message, sizeof e->message);
}

/* The lease's end: outcome, final code, and e->message already written. */
RSDI_PRIVATE void rsdi_en_ls_end(rsd_ensurer *e, rsd_outcome outcome, int final, uint64_t now_ms) {
    e->outcome = outcome;
    e->final = final;
    e->error = final;
    e->phase = RSDI_EN_DONE;
    e->waiting = RSDI_EN_WAIT_NONE;
    e->ls = RSDI_EN_LS_NONE;
    e->elapsed = now_ms > e->t0 ? now_ms - e->t0 : 0;
}

/* rsd-serve's lease answer (POST and GET: {"id", "granted", "requested", "ready",
   "restore", "expires_in_ms", "stopped": [ids]}; DELETE: the same, "released": true first):
   what the ensurer reads. need_id: id (> 0), granted (>= 0) and ready are required. The
   stopped ids are unescaped into text, each NUL-terminated, into ev[0..max_ev) (id, model
   ""); one that is no usable id (rsdi_id_ok) is skipped, one that does not fit ends the
   list. RSD_OK or RSD_ERR_PAYLOAD (fuzz/fuzz_lease.c). */
typedef struct rsdi_en_lease_ans {
    uint64_t id, granted, requested;
    bool ready, restore;
    int n_stopped;
} rsdi_en_lease_ans;

RSDI_PRIVATE int rsdi_en_lease_parse(const char *s, size_t n, rsd_json_tok *toks, uint32_t n_toks, bool need_id,
                                     rsdi_en_lease_ans *a, rsd_evicted *ev, int max_ev, char *text,
                                     size_t text_cap) {
    rsd_json_doc d;
    int64_t v = 0;
    int arr, i, k;
    size_t used = 0;
    memset(a, 0, sizeof *a);
    if (rsd_json_parse(&d, s, n, toks, n_toks) < 1 || rsd_json_type_of(&d, 0) != RSD_JSON_OBJECT)
        return RSD_ERR_PAYLOAD;
    if (need_id) {
        if (rsd_json_int64(&d, rsd_json_find(&d, 0, "id"), &v) != RSD_OK || v <= 0) return RSD_ERR_PAYLOAD;
        a->id = (uint64_t)v;
        if (rsd_json_int64(&d, rsd_json_find(&d, 0, "granted"), &v) != RSD_OK || v < 0) return RSD_ERR_PAYLOAD;
        a->granted = (uint64_t)v;
        if (rsd_json_bool(&d, rsd_json_find(&d, 0, "ready"), &a->ready) != RSD_OK) return RSD_ERR_PAYLOAD;
    }
    if (rsd_json_int64(&d, rsd_json_find(&d, 0, "requested"), &v) == RSD_OK && v >= 0) a->requested = (uint64_t)v;
    (void)rsd_json_bool(&d, rsd_json_find(&d, 0, "restore"), &a->restore);
    arr = rsd_json_find(&d, 0, "stopped");
    if (arr < 0 || rsd_json_type_of(&d, arr) != RSD_JSON_ARRAY) return RSD_OK;
    for (k = 0; a->n_stopped < max_ev && (i = rsd_json_at(&d, arr, (uint32_t)k)) >= 0; k++) {
        size_t len = 0;
        rsd_str id;
        if (rsd_json_type_of(&d, i) != RSD_JSON_STRING) continue;
        if (used >= text_cap || rsd_json_str(&d, i, text + used, text_cap - used, &len) != RSD_OK) break; /* no room */
        id.ptr = text + used;
        id.len = len;
        if (!rsdi_id_ok(id)) continue; /* no usable id (empty, a NUL inside): skipped, as every parser does */
        memset(&ev[a->n_stopped], 0, sizeof ev[0]);
        ev[a->n_stopped].id = text + used;
        ev[a->n_stopped].model = "";
        a->n_stopped++;
        used += len + 1;
    }
    return RSD_OK;
}

/* Reads the lease's answer (see rsdi_en_lease_parse): its figures into e, the stopped models
   into the reconcile's result (not reconciling now) with their ids after the answer in its
   buffer; false when it is not a lease answer. */
RSDI_PRIVATE bool rsdi_en_ls_read(rsd_ensurer *e, bool *ready) {
    rsdi_en_lease_ans a;
    int k;
    *ready = false;
    if (e->ls_over || rsdi_en_lease_parse(e->ans, e->ls_len, e->toks, e->n_toks, e->ls != RSDI_EN_LS_DROP, &a,
                                          e->ls_stopped, RSD_MAX_RESIDENTS, e->ans + e->ls_len,
                                          e->ans_cap - e->ls_len) != RSD_OK)
        return false;
    if (e->ls != RSDI_EN_LS_DROP) {
        e->ls_id = a.id;
        e->ls_granted = a.granted;
        if (a.requested) e->ls_requested = a.requested;
        *ready = a.ready;
    }
    e->n_ls_stopped = a.n_stopped;
    for (k = 0; k < a.n_stopped; k++) e->ls_stopped[k].restored = e->ls == RSDI_EN_LS_DROP && a.restore;
    return true;
}

/* The error body's message ({"error":{"message":...}}), or the status. */
RSDI_PRIVATE const char *rsdi_en_ls_why(rsd_ensurer *e, int status, char *buf, size_t cap) {
    rsd_json_doc d;
    size_t n = 0;
    if (!e->ls_over && rsd_json_parse(&d, e->ans, e->ls_len, e->toks, e->n_toks) > 0 &&
        rsd_json_str(&d, rsd_json_find(&d, rsd_json_find(&d, 0, "error"), "message"), buf, cap, &n) == RSD_OK)
        return buf;
    (void)RSD_SNPRINTF(buf, cap, "HTTP %d", status);
    return buf;
}

RSDI_PRIVATE void rsdi_en_go(rsd_ensurer *e, uint64_t now_ms);

/* One answer of the lease's request. */
RSDI_PRIVATE void rsdi_en_ls_answer(rsd_ensurer *e, const rsd_http_event *ev, uint64_t now_ms) {
    char why[256];
    bool ready = false;
    int st = ev->status, err;
    if (ev->result != RSD_OK) {
        rsdi_en_fail(e, ev->result, now_ms, "lease at %s: %s", e->root, rsd_result_str(ev->result));
        return;
    }
    if (st == 200 && rsdi_en_ls_read(e, &ready)) {
        if (e->ls == RSDI_EN_LS_DROP) {
            bool later = e->n_ls_stopped && !e->ls_stopped[0].restored; /* the lease did not restore */
            rsdi_en_say(e, "rsd-serve lease %s released at %s; %d stopped model(s) %s", e->lease_id, e->root,
                        e->n_ls_stopped, later ? "start on their next request" : "start again");
            rsdi_en_ls_end(e, RSD_OUTCOME_NONE, RSD_OK, now_ms);
            return;
        }
        (void)RSD_SNPRINTF(e->lease_id, sizeof e->lease_id, RSDI_EN_LS_PREFIX "%llu", (unsigned long long)e->ls_id);
        if (ready) {
            rsdi_en_say(e, "rsd-serve lease %s ready: %llu of %llu bytes granted%s, %d model(s) stopped",
                        e->lease_id, (unsigned long long)e->ls_granted, (unsigned long long)e->ls_requested,
                        e->ls_granted < e->ls_requested ? " (busy or pinned models hold the rest)" : "",
                        e->n_ls_stopped);
            rsdi_en_ls_end(e, RSD_OUTCOME_FREED, RSD_OK, now_ms);
            return;
        }
        if (e->ls == RSDI_EN_LS_TAKE) e->ls_delay = RSD_RECONCILE_POLL_FIRST_MS;
        else e->ls_delay = e->ls_delay * 2 > (uint32_t)RSD_RECONCILE_POLL_MAX_MS ? (uint32_t)RSD_RECONCILE_POLL_MAX_MS
                                                                               : e->ls_delay * 2;
        e->ls = RSDI_EN_LS_POLL; /* granted, its stopped processes still exiting */
        e->waiting = RSDI_EN_WAIT_WAKE;
        e->wake = now_ms + e->ls_delay < e->deadline ? now_ms + e->ls_delay : e->deadline;
        return;
    }
    if (e->ls == RSDI_EN_LS_TAKE && (st == 404 || st == 405 || st == 501 || st == 200)) {
        /* not rsd-serve (LM Studio answers an unknown route 200 with an error): the free plan */
        e->ls = RSDI_EN_LS_NONE;
        e->ls_used = false;
        e->n_ls_stopped = 0;
        rsdi_en_go(e, now_ms);
        return;
    }
    (void)rsdi_en_ls_why(e, st, why, sizeof why);
    if (e->ls == RSDI_EN_LS_TAKE && st == 409) { /* declined: everything busy or pinned; nothing stopped */
        rsdi_en_say(e, "rsd-serve at %s declined a lease of %llu bytes: %s", e->root,
                    (unsigned long long)e->free_bytes, why);
        rsdi_en_ls_end(e, RSD_OUTCOME_DECLINED, RSD_OK, now_ms);
        return;
    }
    err = st == 200 ? RSD_ERR_PAYLOAD : st == 400 ? RSD_ERR_ARG : st == 401 || st == 403 ? RSD_ERR_AUTH
        : st == 404 ? RSD_ERR_NOT_FOUND : st == 503 ? RSD_ERR_SERVER_ERROR : RSD_ERR_HTTP_STATUS;
    if (st == 404) e->lease_id[0] = '\0'; /* gone (expired, released): nothing to release */
    rsdi_en_fail(e, err, now_ms, "rsd-serve lease at %s: %s %s", e->root,
                 e->ls == RSDI_EN_LS_TAKE ? "not taken:" : e->ls == RSDI_EN_LS_POLL ? "lost before it was ready:"
                                                                                   : "not released:",
                 st == 200 ? "the answer is not a lease" : why);
}

/* Detection (runtime AUTO) or the run: what begin does after validating. */
RSDI_PRIVATE void rsdi_en_go(rsd_ensurer *e, uint64_t now_ms) {
    if (e->kind == RSD_RUNTIME_AUTO) {
#ifdef RSD_NO_DETECT
        rsdi_en_fail(e, RSD_ERR_NOT_FOUND, now_ms,
                     "%s: no runtime detection in this build (RSD_NO_DETECT); name the runtime "
                     "(rsd_ensure_req.runtime)", e->url);
#else
        int rc;
        memset(e->detect, 0, sizeof *e->detect); /* the region held the last run's attribution */
        e->detect->toks = e->toks; /* not reconciling yet: the reconcile's tokens and buffer are free */
        e->detect->n_toks = e->n_toks;
        e->detect->buf = e->ans;
        e->detect->buf_cap = e->ans_cap;
        if ((rc = rsd_detect_begin(e->detect, e->url, e->bearer, e->probe_ms, e->deadline, now_ms)) < 0) {
            rsdi_en_fail(e, rc, now_ms, "ensure: bad server URL '%.200s'", e->url);
            return;
        }
        e->phase = RSDI_EN_DETECT;
#endif
        return;
    }
    rsdi_en_start_run(e, NULL, now_ms);
}

RSDI_PRIVATE int rsdi_en_begin(rsd_ensurer *e, const rsd_ensure_req *q, uint64_t now_ms);

RSD_API int rsd_ensurer_begin(rsd_ensurer *e, const rsd_ensure_req *q, uint64_t now_ms) {
    if (e && e->rel != RSDI_EN_REL_NONE && e->rel != RSDI_EN_REL_DONE) return RSD_ERR_STATE; /* a release runs */
    if (e) e->rel = RSDI_EN_REL_NONE;
    return rsdi_en_begin(e, q, now_ms);
}

RSDI_PRIVATE int rsdi_en_begin(rsd_ensurer *e, const rsd_ensure_req *q, uint64_t now_ms) {
    rsd_url u;
    char k[RSD_TARGET_KEY_MAX];
    int rc, i;
    if (!e) return RSD_ERR_ARG;
    if (e->phase == RSDI_EN_DETECT || e->phase == RSDI_EN_RUN) return RSD_ERR_STATE;
    e->phase = RSDI_EN_DONE;
    e->done_taken = false;
    e->inflight = e->reconciling = false;
    e->waiting = RSDI_EN_WAIT_NONE;
    e->requests = 0;
    e->t0 = e->last_now = now_ms;
    e->elapsed = 0;
    e->message[0] = '\0';
    e->op = RSD_OP_NONE;
    e->op_model[0] = '\0';
    e->key[0] = '\0';
    e->kind = RSD_RUNTIME_AUTO;
    e->outcome = RSD_OUTCOME_NONE;
    e->error = RSD_OK;
    e->rt = rsd_runtime_router();
    e->hit = false;
    e->sse_tried = false;
    e->co_read = false;
    e->co_told = false;
    e->attr_over_told = false;
    e->co_read_err = RSD_OK;
    memset(&e->found, 0, sizeof e->found); /* what detection finds is for this ensure only */
    e->lease_id[0] = '\0';
    e->ls = RSDI_EN_LS_NONE;
    e->ls_used = false;
    e->ls_id = e->ls_granted = e->ls_requested = 0;
    e->n_ls_stopped = 0;
    if (RSDI_EN_KV_ON(e)) {
        e->kv->phase = RSDI_EN_KV_NONE;
        e->kv->saved = e->kv->restored = e->kv->relists = e->kv->n_heal = 0;
        e->kv->restore_tried = false;
    }
    e->free_bytes = q && (!q->model || !q->model[0]) ? q->free_bytes : 0;
    if (!q || !q->url || (!q->model && !e->free_bytes) || (int)q->runtime < 0 ||
        (int)q->runtime >= (int)RSD_RUNTIME_KIND_NUM) {
        rsdi_en_fail(e, RSD_ERR_ARG, now_ms, "ensure: missing url or model, or a bad runtime");
        return RSD_ERR_ARG;
    }
    e->deadline = now_ms + (q->timeout_ms ? q->timeout_ms : (uint32_t)RSD_ENSURE_TIMEOUT_MS);
    e->lease_ttl_ms = q->lease_ttl_ms ? q->lease_ttl_ms : (uint32_t)RSD_ENSURE_LEASE_TTL_MS;
    e->ls_requested = e->free_bytes;
    if (e->free_bytes) {
        e->model[0] = '\0';
    } else if (!q->model[0] || !rsdi_cpy(e->model, sizeof e->model, q->model)) {
        rsdi_en_fail(e, RSD_ERR_MODEL_ID, now_ms, "ensure: model id empty or over %d bytes", RSD_MODEL_ID_MAX - 1);
        return RSD_ERR_MODEL_ID;
    }
    if ((rc = rsd_url_parse(&u, q->url, strlen(q->url))) < 0 || strlen(q->url) + 64 > sizeof e->url) {
        rsdi_en_fail(e, RSD_ERR_URL, now_ms, "ensure: bad server URL '%.200s'", q->url);
        return RSD_ERR_URL;
    }
    if (q->bearer && (strlen(q->bearer) >= sizeof e->bearer)) {
        rsdi_en_fail(e, RSD_ERR_ARG, now_ms, "ensure: bearer token too long");
        return RSD_ERR_ARG;
    }
    if (strcmp(e->url, q->url) != 0) e->memo_ok = false; /* the memo is e->url's */
    (void)rsdi_cpy(e->url, sizeof e->url, q->url);
    (void)rsdi_cpy(e->bearer, sizeof e->bearer, q->bearer ? q->bearer : "");
    if (rsd_root_url(rsd_str_c(e->url), e->root, sizeof e->root) <= 0) {
        rsdi_en_fail(e, RSD_ERR_URL, now_ms, "ensure: bad server URL '%.200s'", q->url);
        return RSD_ERR_URL;
    }
    e->ctx = q->context_length;
    e->ctx_ceiling = q->context_ceiling ? q->context_ceiling
                   : e->ignore_env ? (uint32_t)RSD_FIT_CEILING_DEFAULT : rsd_fit_ceiling_from_env();
    e->ctx_floor = q->context_floor;
    e->kv_per_token = q->kv_bytes_per_token;
    e->cap_bytes = q->capacity_bytes;
    e->keep_bytes = q->keep_bytes;
    e->timeout_ms = q->timeout_ms;
    e->probe_ms = q->probe_timeout_ms ? q->probe_timeout_ms : (uint32_t)RSD_RECONCILE_PROBE_TIMEOUT_MS;
    e->probe_ms_req = q->probe_timeout_ms;
    e->timeout_given = q->timeout_ms != 0;
    e->observe = q->observe;
    e->user_managed = q->user_managed;
    e->keep_pinned = q->keep_pinned;
    e->kind = q->runtime ? q->runtime : e->only_kind;
    if (e->only_kind && e->kind != e->only_kind) {
        rsdi_en_fail(e, RSD_ERR_ARG, now_ms, "ensure: a %s request to an ensurer for %s only (rsd_ensurer_desc.runtime)",
                     rsd_runtime_kind_str(e->kind), rsd_runtime_kind_str(e->only_kind));
        return RSD_ERR_ARG;
    }
    if (!RSDI_EN_DETECTS_NOTHING && e->kind == RSD_RUNTIME_AUTO && /* what detection found before */
        rsd_target_key_normalise(rsd_str_c(e->url), k, sizeof k) > 0) {
        for (i = 0; i < RSD_ENSURE_MAX_NAMES; i++)
            if (e->det[i].key[0] && strcmp(e->det[i].key, k) == 0) e->kind = e->det[i].kind;
    }
    if (RSDI_EN_SERVE_LEASE && e->free_bytes && e->kind != RSD_RUNTIME_LMSTUDIO && e->kind != RSD_RUNTIME_OLLAMA) {
        e->phase = RSDI_EN_LEASE; /* rsd-serve's own lease first; step sends it */
        e->ls = RSDI_EN_LS_TAKE;
        e->ls_used = true;
        return RSD_OK;
    }
    rsdi_en_go(e, now_ms);
    return e->phase == RSDI_EN_DONE ? e->final : RSD_OK;
}

/* The step's answer as it arrives: to detection or to the reconcile, with the status of
   its head (on_body is called only after the head). */
RSDI_PRIVATE void rsdi_en_on_body(void *user, const char *data, size_t len) {
    rsd_ensurer *e = (rsd_ensurer *)user;
    rsd_http_req_info hi;
    int status = rsd_http_client_query_req(e->http, e->h, &hi) == RSD_OK ? hi.status : 0;
    if (RSDI_EN_IN_LEASE(e)) { /* rsd-serve's lease answer, kept whole (reconcile's buffer: not in use) */
        if (len > e->ans_cap - e->ls_len) {
            e->ls_over = true;
        } else {
            memcpy(e->ans + e->ls_len, data, len);
            e->ls_len += len;
        }
    } else if (RSDI_EN_DETECTING(e)) {
        (void)rsd_detect_body(e->detect, status, data, len);
    } else {
        (void)rsd_reconcile_body(e->rc, status, data, len);
    }
}

/* Sends an HTTP step (the reconcile's or detection's); false when it could not be sent
   (*send_rc says why). */
RSDI_PRIVATE bool rsdi_en_http(rsd_ensurer *e, const rsd_step *s, uint64_t now_ms, int *send_rc) {
    rsd_http_request q;
    int i;
    memset(&q, 0, sizeof q);
    q.method = s->http.method;
    q.url = s->http.url;
    for (i = 0; i < s->http.n_headers && i < RSD_RECONCILE_MAX_HEADERS; i++) {
        e->hdrs[i].name = rsd_str_c(s->http.headers[i].name);
        e->hdrs[i].value = rsd_str_c(s->http.headers[i].value);
    }
    q.headers = e->hdrs;
    q.num_headers = (size_t)i;
    q.body = s->http.body;
    q.body_len = s->http.body ? s->http.body_len : 0;
    q.total_timeout_ms = s->http.timeout_ms ? s->http.timeout_ms : 1;
    q.connect_timeout_ms = q.total_timeout_ms;
    q.on_body = rsdi_en_on_body; /* one step at a time: its answer is read as it arrives */
    q.user = e;
    e->op = RSDI_EN_DETECTING(e) ? RSD_OP_NONE : s->http.op;
    (void)rsdi_cpy(e->op_model, sizeof e->op_model, s->http.model ? s->http.model : "");
    /* subscribe first: the "loaded" (or the victim's "unloaded") event must not be missed */
    if (s->http.op == RSD_OP_LOAD || s->http.op == RSD_OP_UNLOAD) {
        (void)rsdi_en_sse_open(e, now_ms);
        e->n_pend = 0;
    }
    *send_rc = rsd_http_send(e->http, &q, now_ms, &e->h);
    if (*send_rc < 0) return false;
    e->inflight = true;
    e->waiting = RSDI_EN_WAIT_HTTP;
    return true;
}

/* Without a state directory: remember (model, instance) owned on e->key in memory. */
RSDI_PRIVATE void rsdi_en_mem_set(rsd_ensurer *e, const rsd_attr_ref *a, bool add) {
    char rec[RSD_TARGET_KEY_MAX + 2 * RSD_MODEL_ID_MAX], *p, *m, *in, *n, *end = e->mem + e->mem_used;
    size_t kl = strlen(e->key) + 1, ml = strlen(a->model) + 1, il = strlen(a->instance) + 1;
    if (!e->mem || kl + ml + il > sizeof rec) return;
    memcpy(rec, e->key, kl); /* the record, built first: a's ids may be in the records that move */
    memcpy(rec + kl, a->model, ml);
    memcpy(rec + kl + ml, a->instance, il);
    for (p = e->mem; p < end; p = n) { /* the record of this instance goes */
        n = rsdi_en_mem_next(p, &m, &in);
        if (strcmp(p, rec) == 0 && strcmp(in, rec + kl + ml) == 0) {
            memmove(p, n, (size_t)(end - n));
            e->mem_used -= (size_t)(n - p);
            break;
        }
    }
    if (!add || kl + ml + il > e->mem_cap - e->mem_used) return; /* full: not remembered */
    memcpy(e->mem + e->mem_used, rec, kl + ml + il);
    e->mem_used += kl + ml + il;
}

/* One attribution change of the COMMIT: into the state directory's update, or (no state
   directory) an instance into the ensurer's memory. */
RSDI_PRIVATE void rsdi_en_change(rsd_ensurer *e, const rsd_attr_ref *a, bool remove) {
    if (!a->model || !a->model[0]) return;
    if (!e->st && !RSDI_EN_CO(e)) {
        if (RSDI_EN_INSTANCES && a->instance && a->instance[0]) rsdi_en_mem_set(e, a, !remove);
        return;
    }
    if (e->n_chg >= RSDI_EN_MAX_CHANGES) return;
    e->chg[e->n_chg].model = a->model;
    e->chg[e->n_chg].instance = a->instance && a->instance[0] ? a->instance : NULL; /* plain: every entry of it */
    e->chg[e->n_chg++].remove = remove;
}

/* The attribution lock answered (r: rsd_state_lock_step's result): the changes and the
   generation bump in one update, then commit_done -- or commit_failed with why. */
RSDI_PRIVATE void rsdi_en_commit_end(rsd_ensurer *e, int r) {
    char what[RSD_STATE_DETAIL_BYTES];
    uint64_t gen = 0;
    if (RSDI_EN_CO(e)) { /* etcd: the transaction has answered (r) */
        rsd_etcd_info v;
        rsd_etcd_query(RSDI_EN_CO(e), &v);
        gen = v.gen;
        if (r != RSD_OK) {
            (void)RSD_SNPRINTF(what, sizeof what, "%s", v.message[0] ? v.message : rsd_result_str(r));
            (void)rsd_reconcile_commit_failed(e->rc, r, what);
            return;
        }
    }
    if (r == RSD_OK && !RSDI_EN_CO(e)) r = rsd_state_attr_commit(e->st, &e->alk, e->chg, e->n_chg, rsdi_en_wall_ms(), &gen);
    if (e->alk_active) rsd_state_unlock(e->st, &e->alk);
    e->alk_active = false;
    if (r == RSD_OK) {
        (void)rsd_reconcile_commit_done(e->rc, gen);
        return;
    }
    (void)RSD_SNPRINTF(what, sizeof what, "%s", rsd_state_last_error(e->st)[0] ? rsd_state_last_error(e->st)
                                                                              : rsd_result_str(r));
    (void)rsd_reconcile_commit_failed(e->rc, r, what);
}

/* COMMIT: what the machine loaded and unloaded goes into the attribution (removals
   first, then additions), and the generation is bumped -- one update under the
   attribution-file lock, taken without blocking (WAIT_COMMIT: the step comes back at the
   lock's next attempt), bounded by the ensure's deadline (at least RSDI_EN_COMMIT_GRACE_MS).
   Without a state directory only the in-memory instances change. */
RSDI_PRIVATE void rsdi_en_commit_begin(rsd_ensurer *e, uint64_t now_ms) {
    const rsd_reconcile_result *res = e->res;
    uint64_t dl;
    int i, r;
    e->n_chg = 0;
    for (i = 0; i < res->n_attr_remove; i++) rsdi_en_change(e, &res->attr_remove[i], true);
    for (i = 0; i < res->n_attr_add; i++) rsdi_en_change(e, &res->attr_add[i], false);
    dl = e->deadline > now_ms + RSDI_EN_COMMIT_GRACE_MS ? e->deadline : now_ms + RSDI_EN_COMMIT_GRACE_MS;
    if (RSDI_EN_CO(e)) { /* one transaction, fenced by the lock's revision (WAIT_COORD until it answers) */
        r = rsd_etcd_commit_begin(RSDI_EN_CO(e), e->chg, e->n_chg, rsdi_en_wall_ms(), now_ms, dl);
        if (r < 0) {
            rsdi_en_commit_end(e, r);
            return;
        }
        e->waiting = RSDI_EN_WAIT_COORD;
        e->co_then = RSDI_EN_CO_COMMIT;
        e->op = RSD_OP_NONE;
        e->op_model[0] = '\0';
        return;
    }
    if (!e->st) return;
    r = rsd_state_attr_lock_begin(e->st, &e->alk, e->key, now_ms, dl);
    if (r < 0) {
        rsdi_en_commit_end(e, r);
        return;
    }
    e->alk_active = true;
    e->waiting = RSDI_EN_WAIT_COMMIT;
    e->op = RSD_OP_NONE; /* progress: no HTTP step (a load is no longer being waited for) */
    e->op_model[0] = '\0';
}

/* The target lock answered (r: the flock step's or etcd's result): fail-closed ends the
   ensure (false); else the generation and the attribution read again under the lock go
   to the machine with lock_done. */
RSDI_PRIVATE bool rsdi_en_lock_answer(rsd_ensurer *e, int r, uint64_t now_ms) {
    uint64_t gen = 0;
    bool held;
    if (r < 0) { /* fail-closed */
        const char *why = rsd_result_str(r);
        rsd_etcd_info v;
        if (RSDI_EN_CO(e)) {
            rsd_etcd_query(RSDI_EN_CO(e), &v);
            if (v.message[0]) why = v.message;
        }
        rsdi_en_fail(e, r, now_ms, "could not take the residency lock for %s: %s", e->url, why);
        return false;
    }
    if (RSDI_EN_CO(e)) {
        rsd_etcd_info v;
        rsd_etcd_query(RSDI_EN_CO(e), &v);
        held = v.held;
        e->co_read_err = RSD_OK; /* the lock's answer carried a fresh read (or the last one stands) */
    } else {
        held = rsd_state_lock_held(&e->lk);
    }
    if (held && !rsdi_en_gen(e, &gen)) gen = ~(uint64_t)0;
    rsdi_en_read_attr(e); /* it may have changed while we waited */
    (void)rsd_reconcile_set_ours(e->rc, e->ours, e->n_ours);
    if (RSDI_EN_INSTANCES) (void)rsd_reconcile_set_owned(e->rc, e->owned, e->n_owned);
    rsdi_en_reset_notice(e);
    (void)rsd_reconcile_lock_done(e->rc, held, gen, now_ms);
    return true;
}

/* ---- slot saves: a swap keeps the conversation (desc.kv_slots) ------------------- */
/* With desc.kv_slots, on a llama.cpp router (started with --slot-save-path DIR), an
   unload the reconcile asks for waits while the model's slots that hold a prompt are
   saved: GET /slots?model=M, then one POST /slots/ID?action=save {"model": M,
   "filename": NAME} at a time (the router passes it to M's child, the body's "model"
   naming it). After the ensure loaded its model, the same GET lists the slots, and each
   is restored from its file (action=restore): a slot without a file answers 400 and
   stays cold. NAME is "rsd-KEY-ID.bin", KEY 16 hex digits of FNV-1a 64 over the target's
   key, the model id, and the child's slot count and n_ctx (the ensurer cannot see the
   model file: the router's files are keyed by what its answers say). All of it is
   bounded by desc.kv_timeout_ms and half of what is left of the ensure; a failed or
   slow save or restore costs that cache (logged), never the unload, load or ensure.
   The router neither deletes nor budgets the files: DIR is the operator's. */
RSDI_PRIVATE uint64_t rsdi_en_kv_fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The id of slot id's file under k->key (never 0: 0 marks a free entry of k->bad). */
RSDI_PRIVATE uint64_t rsdi_en_kv_file_id(const rsdi_en_kv *k, int id) {
    uint64_t h = rsdi_en_kv_fnv(k->key, &id, sizeof id);
    return h ? h : 1;
}

/* An answer that says the router's child is gone: 500 or 502 (the router's "proxy
   error"), or no answer at all (a timeout is not this: the child may be slow). */
RSDI_PRIVATE bool rsdi_en_kv_child_gone(const rsd_http_event *ev) {
    return ev->status == 500 || ev->status == 502 || (!ev->status && ev->result != RSD_OK && ev->result != RSD_ERR_TIMEOUT);
}

/* Whether slot id's file ended the child at a restore (and was not saved again since). */
RSDI_PRIVATE bool rsdi_en_kv_is_bad(const rsdi_en_kv *k, int id) {
    uint64_t f = rsdi_en_kv_file_id(k, id);
    int i;
    for (i = 0; i < RSDI_EN_KV_BAD; i++)
        if (k->bad[i] == f) return true;
    return false;
}

/* Marks slot id's file bad (on) or good again (off: this ensurer saved it). */
RSDI_PRIVATE void rsdi_en_kv_mark(rsdi_en_kv *k, int id, bool on) {
    uint64_t f = rsdi_en_kv_file_id(k, id);
    int i;
    for (i = 0; i < RSDI_EN_KV_BAD; i++)
        if (k->bad[i] == f) k->bad[i] = 0;
    if (!on) return;
    k->bad[k->bad_next] = f;
    k->bad_next = (k->bad_next + 1) % RSDI_EN_KV_BAD;
}

RSDI_PRIVATE void rsdi_en_kv_body(void *user, const char *data, size_t len) {
    rsdi_en_kv *k = ((rsd_ensurer *)user)->kv;
    if (len > sizeof k->body - 1 - k->len) {
        k->over = true;
        return;
    }
    memcpy(k->body + k->len, data, len);
    k->len += len;
}

/* One request of the slot saves (body NULL: GET); false when it could not be sent. */
RSDI_PRIVATE bool rsdi_en_kv_send(rsd_ensurer *e, const char *url, const char *body, uint64_t now_ms) {
    rsdi_en_kv *k = e->kv;
    rsd_http_request q;
    uint64_t dl = k->deadline < e->deadline ? k->deadline : e->deadline;
    memset(&q, 0, sizeof q);
    q.method = body ? "POST" : "GET";
    q.url = url;
    if (body) {
        q.content_type = "application/json";
        q.body = body;
        q.body_len = strlen(body);
    }
    q.bearer_token = e->bearer[0] ? e->bearer : NULL;
    q.total_timeout_ms = dl > now_ms ? (uint32_t)(dl - now_ms < 0xFFFFFFFFu ? dl - now_ms : 0xFFFFFFFFu) : 1;
    q.connect_timeout_ms = q.total_timeout_ms;
    q.on_body = rsdi_en_kv_body;
    q.user = e;
    k->len = 0;
    k->over = false;
    if (now_ms >= dl || rsd_http_send(e->http, &q, now_ms, &e->h) < 0) return false;
    e->requests++;
    e->inflight = true;
    e->waiting = RSDI_EN_WAIT_HTTP;
    return true;
}

/* The saves (or restores) are over: the held unload goes, or the ensure ends. */
RSDI_PRIVATE void rsdi_en_kv_end(rsd_ensurer *e, uint64_t now_ms, const char *why) {
    rsdi_en_kv *k = e->kv;
    int rc;
    k->phase = RSDI_EN_KV_NONE;
    if (why)
        rsdi_logf(&e->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_DEGRADED, RSDI_WHERE, "kv_slots: slot %s of '%s' at %s: %s",
                  k->save ? "saves" : "restores", k->model, e->root, why);
    if (!k->save) {
        rsdi_en_finish(e, now_ms);
        return;
    }
    k->held.http.timeout_ms = rsdi_en_left(e, now_ms, k->held.http.timeout_ms ? k->held.http.timeout_ms : 1);
    if (!rsdi_en_http(e, &k->held, now_ms, &rc)) (void)rsd_reconcile_feed(e->rc, rc, 0, NULL, 0, now_ms);
}

/* GET ROOT/slots?model=M (M percent-encoded); false when it cannot be sent. */
RSDI_PRIVATE bool rsdi_en_kv_list(rsd_ensurer *e, uint64_t now_ms) {
    static const char hex[] = "0123456789ABCDEF";
    char url[RSD_RECONCILE_URL_MAX + 3 * RSD_MODEL_ID_MAX + 16];
    const char *m;
    int n = RSD_SNPRINTF(url, sizeof url, "%s/slots?model=", e->root);
    size_t o = n > 0 ? (size_t)n : sizeof url;
    for (m = e->kv->model; *m && o + 4 < sizeof url; m++) {
        unsigned char c = (unsigned char)*m;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
            c == '.' || c == '~') {
            url[o++] = (char)c;
        } else {
            url[o++] = '%';
            url[o++] = hex[c >> 4];
            url[o++] = hex[c & 15];
        }
    }
    if (*m || o >= sizeof url) return false;
    url[o] = '\0';
    e->kv->phase = RSDI_EN_KV_LIST;
    return rsdi_en_kv_send(e, url, NULL, now_ms);
}

/* POST ROOT/slots/ID?action=save|restore for slot id (phase FILE, or HEAL: an empty
   save); false when it cannot be sent. */
RSDI_PRIVATE bool rsdi_en_kv_file_for(rsd_ensurer *e, int id, bool save, int phase, uint64_t now_ms) {
    rsdi_en_kv *k = e->kv;
    char url[RSD_RECONCILE_URL_MAX + 48], name[48], body[RSD_MODEL_ID_MAX * 6 + 96];
    rsd_json_writer w;
    (void)RSD_SNPRINTF(name, sizeof name, "rsd-%016llx-%d.bin", (unsigned long long)k->key, id);
    if (RSD_SNPRINTF(url, sizeof url, "%s/slots/%d?action=%s", e->root, id, save ? "save" : "restore") >= (int)sizeof url)
        return false;
    rsd_json_w_init(&w, body, sizeof body);
    (void)rsd_json_w_begin_object(&w);
    (void)rsd_json_w_key(&w, "model");
    (void)rsd_json_w_str(&w, k->model);
    (void)rsd_json_w_key(&w, "filename");
    (void)rsd_json_w_str(&w, name);
    (void)rsd_json_w_end_object(&w);
    if (rsd_json_w_finish(&w) < 0) return false;
    k->phase = phase;
    return rsdi_en_kv_send(e, url, body, now_ms);
}

/* The save or restore of k->ids[k->cur]. */
RSDI_PRIVATE bool rsdi_en_kv_file(rsd_ensurer *e, uint64_t now_ms) {
    return rsdi_en_kv_file_for(e, e->kv->ids[e->kv->cur], e->kv->save, RSDI_EN_KV_FILE, now_ms);
}

/* The next file, or the end. */
RSDI_PRIVATE void rsdi_en_kv_next(rsd_ensurer *e, uint64_t now_ms) {
    rsdi_en_kv *k = e->kv;
    if (k->cur >= k->n) {
        if (k->save || k->restored)
            rsdi_logf(&e->logger, RSD_LOG_INFO, RSD_LOGITEM_DRIVER_DEGRADED, RSDI_WHERE, "kv_slots: '%s' at %s: %d slot(s) %s",
                      k->model, e->root, k->save ? k->saved : k->restored, k->save ? "saved" : "restored");
        rsdi_en_kv_end(e, now_ms, NULL);
        return;
    }
    if (!rsdi_en_kv_file(e, now_ms)) rsdi_en_kv_end(e, now_ms, "could not send the request (or no time was left)");
}

/* After the model a restore ended came back: its slot, empty now, is saved over the file
   that ended it (the next restore of it, by any process, reads 0 tokens and ends
   nothing); then the restores go on. */
RSDI_PRIVATE void rsdi_en_kv_heal_or_next(rsd_ensurer *e, uint64_t now_ms) {
    rsdi_en_kv *k = e->kv;
    if (k->n_heal > 0 && rsdi_en_kv_file_for(e, k->heal[k->n_heal - 1], true, RSDI_EN_KV_HEAL, now_ms)) return;
    k->n_heal = 0;
    rsdi_en_kv_next(e, now_ms);
}

/* An answer of the slot saves. */
RSDI_PRIVATE void rsdi_en_kv_answer(rsd_ensurer *e, const rsd_http_event *ev, uint64_t now_ms) {
    rsdi_en_kv *k = e->kv;
    rsd_json_doc doc;
    int64_t v = 0;
    bool ok = ev->result == RSD_OK && ev->status == 200 && !k->over;
    if (k->phase == RSDI_EN_KV_LIST) {
        rsd_slot sl[RSDI_EN_KV_SLOTS];
        char num[48];
        int i, total = ok ? rsd_router_parse_slots(k->body, k->len, k->toks, RSDI_EN_KV_TOKS, sl, RSDI_EN_KV_SLOTS) : -1;
        uint64_t h = 14695981039346656037ull;
        unsigned char sep = 0x1f;
        if (total < 0 && !k->save && k->relists && rsdi_en_kv_child_gone(ev) &&
            now_ms + RSDI_EN_KV_RELIST_MS < k->deadline) {
            /* the router proxied it to the child that is gone: it has not seen the exit yet */
            k->phase = RSDI_EN_KV_RELIST;
            e->waiting = RSDI_EN_WAIT_WAKE;
            e->wake = now_ms + RSDI_EN_KV_RELIST_MS;
            return;
        }
        if (total < 0 && !k->save && k->relists) { /* the model a restore ended did not come back */
            k->phase = RSDI_EN_KV_NONE;
            rsdi_en_fail(e, RSD_ERR_POOL_CRASHED, now_ms,
                         "kv_slots: '%s' at %s: a slot restore ended its child and GET /slots?model= answered %s %d: "
                         "not loaded", k->model, e->root, rsd_result_str(ev->result), ev->status);
            return;
        }
        if (total < 0) {
            char why[96];
            (void)RSD_SNPRINTF(why, sizeof why, "GET /slots?model= answered %s %d%s", rsd_result_str(ev->result),
                               ev->status, ev->status == 501 ? " (no --slot-save-path or --no-slots?)" : "");
            rsdi_en_kv_end(e, now_ms, why);
            return;
        }
        (void)RSD_SNPRINTF(num, sizeof num, "%d %lld", total, (long long)(total ? sl[0].n_ctx : 0));
        h = rsdi_en_kv_fnv(h, e->key, strlen(e->key));
        h = rsdi_en_kv_fnv(rsdi_en_kv_fnv(h, &sep, 1), k->model, strlen(k->model));
        h = rsdi_en_kv_fnv(rsdi_en_kv_fnv(h, &sep, 1), num, strlen(num));
        k->key = h;
        k->n = k->cur = 0;
        for (i = 0; i < total && i < RSDI_EN_KV_SLOTS; i++)
            if (sl[i].id < 1000 && (k->save ? sl[i].n_prompt_tokens > 0 : !rsdi_en_kv_is_bad(k, sl[i].id)))
                k->ids[k->n++] = sl[i].id;
        if (k->save) rsdi_en_kv_next(e, now_ms);
        else rsdi_en_kv_heal_or_next(e, now_ms);
        return;
    }
    if (k->phase == RSDI_EN_KV_HEAL) {
        int id = k->heal[--k->n_heal];
        if (ok) rsdi_en_kv_mark(k, id, false); /* an empty save now: a restore of it ends nothing */
        rsdi_logf(&e->logger, ok ? RSD_LOG_INFO : RSD_LOG_WARN, RSD_LOGITEM_DRIVER_DEGRADED, RSDI_WHERE,
                  "kv_slots: '%s' at %s: slot %d's file %s (%s %d)", k->model, e->root, id,
                  ok ? "replaced by an empty save" : "could not be replaced", rsd_result_str(ev->result), ev->status);
        rsdi_en_kv_heal_or_next(e, now_ms);
        return;
    }
    if (!k->save && rsdi_en_kv_child_gone(ev)) {
        /* no answer from the child: llama-server aborts on a file cut inside its data (a
           save a full disk cut short), and the router shows the model unloaded. Its file is
           not restored again by this ensurer until it saves that slot; the list is asked
           again, which loads the model again (the router's autoload), and the other slots
           are restored into it. */
        char why[160];
        rsdi_en_kv_mark(k, k->ids[k->cur], true);
        (void)RSD_SNPRINTF(why, sizeof why, "the restore of slot %d ended its child (%s %d); that file is left alone%s",
                           k->ids[k->cur], rsd_result_str(ev->result), ev->status,
                           k->relists < RSDI_EN_KV_RELISTS ? ", the model loaded again" : "");
        if (k->relists >= RSDI_EN_KV_RELISTS) {
            rsdi_en_kv_end(e, now_ms, why);
            return;
        }
        rsdi_logf(&e->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_DEGRADED, RSDI_WHERE, "kv_slots: '%s' at %s: %s", k->model,
                  e->root, why);
        k->heal[k->n_heal++] = k->ids[k->cur];
        k->relists++;
        k->restored = 0; /* the slots restored before it went with the child */
        if (!rsdi_en_kv_list(e, now_ms)) rsdi_en_kv_end(e, now_ms, "could not send the request (or no time was left)");
        return;
    }
    ok = ok && rsd_json_parse(&doc, k->body, k->len, k->toks, RSDI_EN_KV_TOKS) > 0;
    if (k->save && ok) rsdi_en_kv_mark(k, k->ids[k->cur], false); /* a new file replaces a bad one */
    if (ok && rsd_json_int64(&doc, rsd_json_find(&doc, 0, k->save ? "n_saved" : "n_restored"), &v) == RSD_OK && v > 0) {
        if (k->save) k->saved++;
        else k->restored++;
    } else if (k->save && !(ok && v == 0)) {
        char why[96];
        (void)RSD_SNPRINTF(why, sizeof why, "slot %d not saved (%s %d): its cache is lost", k->ids[k->cur],
                           rsd_result_str(ev->result), ev->status);
        rsdi_logf(&e->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_DEGRADED, RSDI_WHERE, "kv_slots: '%s' at %s: %s",
                  k->model, e->root, why);
    }
    if (ev->result == RSD_ERR_TIMEOUT) { /* the time is spent: the rest stay unsaved (cold) */
        rsdi_en_kv_end(e, now_ms, "timed out");
        return;
    }
    k->cur++;
    rsdi_en_kv_next(e, now_ms);
}

/* Before an HTTP step: an unload on a llama.cpp router is held while its model's slots
   are saved (true: held). */
RSDI_PRIVATE bool rsdi_en_kv_before(rsd_ensurer *e, const rsd_step *s, uint64_t now_ms) {
    rsdi_en_kv *k = e->kv;
    uint64_t half = e->deadline > now_ms ? (e->deadline - now_ms) / 2 : 0;
    if (s->http.op != RSD_OP_UNLOAD || !s->http.model || !s->http.model[0] || e->kind != RSD_RUNTIME_LLAMACPP ||
        !rsdi_cpy(k->model, sizeof k->model, s->http.model))
        return false;
    k->held = *s; /* its strings are the reconcile's, which waits for this step's answer */
    k->save = true;
    k->deadline = now_ms + (k->timeout_ms < half ? k->timeout_ms : half);
    e->op = RSD_OP_UNLOAD; /* progress: the unload (its saves) */
    (void)rsdi_cpy(e->op_model, sizeof e->op_model, k->model);
    if (!rsdi_en_kv_list(e, now_ms)) {
        k->phase = RSDI_EN_KV_NONE;
        return false;
    }
    return true;
}

/* At the end: the model this ensure loaded gets its slots back (true: restoring). */
RSDI_PRIVATE bool rsdi_en_kv_after(rsd_ensurer *e, uint64_t now_ms) {
    rsdi_en_kv *k = e->kv;
    const rsd_reconcile_result *res = rsd_reconcile_result_of(e->rc);
    uint64_t half = e->deadline > now_ms ? (e->deadline - now_ms) / 2 : 0;
    if (k->restore_tried) return false;
    k->restore_tried = true;
    if (!res->loaded || res->error != RSD_OK || e->kind != RSD_RUNTIME_LLAMACPP ||
        !e->model[0] || !rsdi_cpy(k->model, sizeof k->model, res->wire_id[0] ? res->wire_id : e->model))
        return false;
    k->save = false;
    k->deadline = now_ms + (k->timeout_ms < half ? k->timeout_ms : half);
    if (!rsdi_en_kv_list(e, now_ms)) {
        k->phase = RSDI_EN_KV_NONE;
        return false;
    }
    return true;
}

/* One step of the reconcile: perform what it asks. False = come back later (PENDING). */
RSDI_PRIVATE bool rsdi_en_run_step(rsd_ensurer *e, uint64_t now_ms) {
    rsd_step s = rsd_reconcile_next(e->rc, now_ms);
    int rc;
    switch (s.kind) {
    case RSD_STEP_HTTP:
        if (RSDI_EN_KV_ON(e) && rsdi_en_kv_before(e, &s, now_ms)) return true; /* the saves first */
        if (!rsdi_en_http(e, &s, now_ms, &rc)) (void)rsd_reconcile_feed(e->rc, rc, 0, NULL, 0, now_ms);
        return true;
    case RSD_STEP_WAIT:
        e->waiting = RSDI_EN_WAIT_WAKE;
        e->rwake = e->wake = s.wake_ms;
        if (s.wait_model) rsdi_en_sse_wait(e, now_ms); /* else a backoff: no event ends it */
        return now_ms >= e->wake;
    case RSD_STEP_LOCK:
        if (RSDI_EN_CO(e)) {
            if (rsd_etcd_lock_begin(RSDI_EN_CO(e), e->key, "rsd_ensure", now_ms, s.deadline_ms) < 0) {
                (void)rsd_reconcile_lock_done(e->rc, false, 0, now_ms);
                return true;
            }
            e->waiting = RSDI_EN_WAIT_COORD;
            e->co_then = RSDI_EN_CO_LOCK;
            return true;
        }
        if (!e->st || rsd_state_lock_begin(e->st, &e->lk, s.key, "rsd_ensure", now_ms, s.deadline_ms) < 0) {
            (void)rsd_reconcile_lock_done(e->rc, false, 0, now_ms);
            return true;
        }
        e->lk_active = true;
        e->waiting = RSDI_EN_WAIT_LOCK;
        return true;
    case RSD_STEP_COMMIT: rsdi_en_commit_begin(e, now_ms); return true;
    case RSD_STEP_UNLOCK:
        if (RSDI_EN_CO(e)) { /* released now; the ensure ends once etcd deleted the key */
            (void)rsd_etcd_unlock_begin(RSDI_EN_CO(e), now_ms);
            e->waiting = RSDI_EN_WAIT_COORD;
            e->co_then = RSDI_EN_CO_UNLOCK;
            return true;
        }
        if (e->lk_active && e->st) rsd_state_unlock(e->st, &e->lk);
        e->lk_active = false;
        return true;
    case RSD_STEP_DONE:
        if (RSDI_EN_KV_ON(e) && rsdi_en_kv_after(e, now_ms)) return true; /* the restores first */
        rsdi_en_finish(e, now_ms);
        return true;
    default: return true;
    }
}

RSDI_PRIVATE int rsdi_en_rel_step(rsd_ensurer *e, uint64_t now_ms);

/* One step of the ensure (or of a release's current ensure). */
RSDI_PRIVATE int rsdi_en_step_one(rsd_ensurer *e, uint64_t now_ms) {
    int guard, rc;
    if (RSDI_EN_CO(e)) (void)rsdi_etcd_step_take(RSDI_EN_CO(e), now_ms); /* the lease's keepalive, a release in the background */
    if (e->phase == RSDI_EN_IDLE || e->phase == RSDI_EN_DONE) return e->final;
    e->last_now = now_ms;
    for (guard = 0; guard < 256; guard++) {
        if (e->inflight || (e->sse_open && guard == 0)) {
            rsd_http_event ev;
            bool fed = false;
            (void)rsd_http_client_step(e->http, now_ms);
            while ((e->inflight || e->sse_open) && rsd_http_next_event(e->http, &ev)) {
                if (e->sse_open && ev.req.id == e->sse_h.id) {
                    rsdi_en_sse_ended(e, &ev);
                    continue;
                }
                if (!e->inflight || ev.req.id != e->h.id) continue; /* someone else's request on our client */
                e->inflight = false;
                e->waiting = RSDI_EN_WAIT_NONE;
                fed = true;
                if (RSDI_EN_IN_LEASE(e)) rsdi_en_ls_answer(e, &ev, now_ms);
                else if (RSDI_EN_DETECTING(e)) rsdi_en_probe_answer(e, &ev, now_ms);
                else if (RSDI_EN_KV_ON(e) && e->kv->phase != RSDI_EN_KV_NONE) rsdi_en_kv_answer(e, &ev, now_ms);
                else (void)rsd_reconcile_feed(e->rc, ev.result, ev.status, NULL, 0, now_ms);
            }
            if (e->inflight) return RSD_PENDING;
            if (fed) continue;
        }
        if (e->phase == RSDI_EN_DONE) return e->final;
        if (RSDI_EN_IN_LEASE(e)) { /* rsd-serve's lease: the next request when it is due */
            if (e->waiting == RSDI_EN_WAIT_WAKE && now_ms < e->wake) return RSD_PENDING;
            e->waiting = RSDI_EN_WAIT_NONE;
            if (e->ls == RSDI_EN_LS_POLL && now_ms >= e->deadline) {
                rsdi_en_fail(e, RSD_ERR_TIMEOUT, now_ms,
                             "rsd-serve lease %s at %s: %llu of %llu bytes granted but not ready within %llu ms "
                             "(its stopped processes have not exited); release it or let its ttl pass",
                             e->lease_id, e->root, (unsigned long long)e->ls_granted,
                             (unsigned long long)e->ls_requested, (unsigned long long)(now_ms - e->t0));
                return e->final;
            }
            if (!rsdi_en_ls_send(e, now_ms)) return e->final;
            continue;
        }
        if (RSDI_EN_DETECTING(e)) {
            rsd_step s = rsd_detect_next(e->detect, now_ms);
            if (s.kind != RSD_STEP_HTTP) return e->final; /* cannot happen: DONE leaves DETECT */
            if (!rsdi_en_http(e, &s, now_ms, &rc)) {
                rsdi_en_fail(e, rc, now_ms, "GET %s: %s", s.http.url, rsd_result_str(rc));
                return e->final;
            }
            e->requests++;
            continue;
        }
        if (e->waiting == RSDI_EN_WAIT_LOCK || e->waiting == RSDI_EN_WAIT_COMMIT) { /* the target's or the attribution's file lock */
            bool commit = e->waiting == RSDI_EN_WAIT_COMMIT;
            int r = rsdi_state_lock_code(e->st, commit ? &e->alk : &e->lk, now_ms);
            if (r == RSD_PENDING) return RSD_PENDING;
            e->waiting = RSDI_EN_WAIT_NONE;
            if (commit) rsdi_en_commit_end(e, r);
            else if (!rsdi_en_lock_answer(e, r, now_ms)) return e->final;
            continue;
        }
        if (e->waiting == RSDI_EN_WAIT_COORD) { /* etcd: read, lock, commit or unlock */
            int r = rsdi_etcd_step_take(RSDI_EN_CO(e), now_ms);
            if (r == RSD_PENDING) return RSD_PENDING;
            e->waiting = RSDI_EN_WAIT_NONE;
            if (e->co_then == RSDI_EN_CO_READ) {
                e->co_read = true;
                e->co_read_err = r;
                rsdi_en_start_run(e, NULL, now_ms);
            } else if (e->co_then == RSDI_EN_CO_LOCK) {
                if (!rsdi_en_lock_answer(e, r, now_ms)) return e->final;
            } else if (e->co_then == RSDI_EN_CO_COMMIT) {
                rsdi_en_commit_end(e, r);
            }
            continue;
        }
        if (e->waiting == RSDI_EN_WAIT_WAKE && now_ms < e->wake) return RSD_PENDING;
        if (RSDI_EN_KV_ON(e) && e->kv->phase == RSDI_EN_KV_RELIST) { /* the slots listed again, now */
            e->waiting = RSDI_EN_WAIT_NONE;
            if (!rsdi_en_kv_list(e, now_ms)) rsdi_en_kv_end(e, now_ms, "could not send the request (or no time was left)");
            continue;
        }
        if (!rsdi_en_run_step(e, now_ms)) return RSD_PENDING;
        if (e->phase == RSDI_EN_DONE) return e->final;
    }
    return RSD_PENDING;
}

/* One step of what runs: RSD_PENDING, or the code it ended with. */
RSDI_PRIVATE int rsdi_en_step(rsd_ensurer *e, uint64_t now_ms) {
    if (e->rel != RSDI_EN_REL_NONE) return rsdi_en_rel_step(e, now_ms);
    return rsdi_en_step_one(e, now_ms);
}

/* The ensure (or release) has ended and its event was not pulled yet. */
RSDI_PRIVATE bool rsdi_en_done_waits(const rsd_ensurer *e) {
    if (e->done_taken) return false;
    return e->rel != RSDI_EN_REL_NONE ? e->rel == RSDI_EN_REL_DONE : e->phase == RSDI_EN_DONE;
}

RSD_API int rsd_ensurer_step(rsd_ensurer *e, uint64_t now_ms) {
    if (!e) return RSD_ERR_ARG;
    (void)rsdi_en_step(e, now_ms);
    return rsdi_en_done_waits(e) ? 1 : 0;
}

RSD_API bool rsd_ensurer_next_event(rsd_ensurer *e, rsd_ensure_result *out) {
    if (!e || !out || !rsdi_en_done_waits(e)) return false;
    rsd_ensurer_query(e, out);
    out->result = e->rel != RSDI_EN_REL_NONE ? e->rel_final : e->final;
    e->done_taken = true;
    return true;
}

RSD_API int rsd_ensurer_pollfds(const rsd_ensurer *e, rsd_pollfd *out, int cap) {
    int n;
    if (e && (e->rel == RSDI_EN_REL_READ || e->rel == RSDI_EN_REL_DROP)) return 0; /* between ensures: a file lock */
    if (!e || (e->phase != RSDI_EN_DETECT && e->phase != RSDI_EN_RUN && e->phase != RSDI_EN_LEASE)) return 0;
    n = rsd_http_client_pollfds(e->http, out, cap);
    if (RSDI_EN_CO(e)) n += rsd_etcd_pollfds(RSDI_EN_CO(e), out + (n < cap ? n : cap), n < cap ? cap - n : 0);
    return n;
}

RSD_API uint64_t rsd_ensurer_next_deadline(const rsd_ensurer *e) {
    uint64_t dl;
    if (e && rsdi_en_done_waits(e)) return 0;
    if (e && (e->rel == RSDI_EN_REL_READ || e->rel == RSDI_EN_REL_DROP)) /* between ensures */
        return e->alk_active ? e->alk.wake_ms : 0;
    if (!e || (e->phase != RSDI_EN_DETECT && e->phase != RSDI_EN_RUN && e->phase != RSDI_EN_LEASE))
        return RSD_NO_DEADLINE;
    switch (e->waiting) {
    case RSDI_EN_WAIT_HTTP:
        dl = rsdi_client_deadline(e->http);
        break;
    case RSDI_EN_WAIT_WAKE: dl = e->wake; break;
    case RSDI_EN_WAIT_LOCK: dl = e->lk.wake_ms; break;
    case RSDI_EN_WAIT_COMMIT: dl = e->alk.wake_ms; break;
    case RSDI_EN_WAIT_COORD: dl = RSD_NO_DEADLINE; break; /* etcd's own, below */
    default: return 0;
    }
    if (RSDI_EN_CO(e)) { /* etcd's requests, retries and the lease's keepalive */
        uint64_t c = rsd_etcd_next_deadline(RSDI_EN_CO(e));
        if (c < dl) dl = c;
    }
    return dl;
}

RSD_API int rsd_ensurer_notices(rsd_ensurer *e, const rsd_reconcile_notice **out) {
    int n = rsd_reconcile_notices(e ? e->rc : NULL, out);
    return e && e->reconciling ? n : 0;
}

RSD_API void rsd_ensurer_query(const rsd_ensurer *e, rsd_ensure_result *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    out->message = "";
    out->op_model = "";
    out->load_stage = "";
    out->load_progress = -1.0;
    out->wire_id = "";
    if (!e) {
        out->result = RSD_ERR_ARG;
        return;
    }
    out->done = e->phase == RSDI_EN_DONE;
    out->result = e->phase == RSDI_EN_DONE ? e->final : e->phase == RSDI_EN_IDLE ? RSD_ERR_STATE : RSD_PENDING;
    out->runtime = e->kind;
    out->requests = e->requests;
    if (RSDI_EN_KV_ON(e)) {
        out->kv_saved = e->kv->saved;
        out->kv_restored = e->kv->restored;
    }
    out->elapsed_ms = out->done ? e->elapsed : (e->last_now > e->t0 ? e->last_now - e->t0 : 0);
    out->op = e->op;
    out->op_model = e->op_model;
    out->lock_waiting = e->phase == RSDI_EN_RUN && e->waiting == RSDI_EN_WAIT_LOCK;
    out->wire_id = e->model;
    out->evicted = e->res->evicted;
    (void)rsd_reconcile_notices(e->rc, &out->notices);
    out->lease_id = e->lease_id;
    if (e->reconciling) {
        const rsd_reconcile_result *r = e->res;
        out->load_progress = rsd_reconcile_progress(e->rc, &out->load_stage);
        out->outcome = r->outcome;
        out->decision = r->decision;
        out->reason = r->reason;
        out->cache_hit = r->cache_hit;
        out->keep_resident = r->keep_resident;
        out->lock_held = r->lock_held;
        out->loaded = r->loaded;
        out->mutated = r->mutated;
        out->requests += r->requests;
        out->message = r->message;
        out->state_error = r->state_error;
        out->n_evicted = r->n_evicted;
        out->freed_bytes = r->freed_bytes;
        out->n_notices = rsd_reconcile_notices(e->rc, NULL);
        if (r->wire_id[0]) out->wire_id = r->wire_id;
        out->lms_tier = r->tier;
    } else if (e->hit) {
        out->outcome = e->outcome;
        out->decision = e->hit_v.decision;
        out->reason = e->hit_v.reason;
        out->cache_hit = true;
        out->keep_resident = e->hit_v.keep_resident;
        if (e->hit_v.wire_id[0]) out->wire_id = e->hit_v.wire_id;
        out->lms_tier = (rsd_lms_tier)e->hit_v.tier;
    } else {
        out->outcome = e->outcome;
        out->decision = e->outcome == RSD_OUTCOME_DEGRADED ? RSD_DECISION_OBSERVE : RSD_DECISION_NONE;
        out->reason = e->outcome == RSD_OUTCOME_DEGRADED ? RSD_REASON_PROBE_FAILED : RSD_REASON_NONE;
        out->message = e->message;
        if (e->ls_used) { /* rsd-serve's lease: what it granted and stopped (a release: what comes back) */
            out->freed_bytes = e->ls_granted;
            out->evicted = e->ls_stopped;
            out->n_evicted = e->n_ls_stopped;
            out->mutated = e->n_ls_stopped > 0;
            if (e->outcome == RSD_OUTCOME_FREED) {
                out->decision = RSD_DECISION_FREE;
                out->reason = e->ls_granted < e->ls_requested ? RSD_REASON_FREE_SHORT : RSD_REASON_FREE_BYTES;
            } else if (e->outcome == RSD_OUTCOME_DECLINED) {
                out->decision = RSD_DECISION_DECLINE;
                out->reason = RSD_REASON_FREE_NOTHING;
            } else if (e->ls_requested == 0 && e->final == RSD_OK) { /* a release: rsd-serve starts them again */
                int k;
                for (k = 0; k < e->n_ls_stopped; k++) out->restored += e->ls_stopped[k].restored;
            }
        }
    }
    if (e->rel != RSDI_EN_REL_NONE) { /* a state-directory lease's release */
        out->restored = e->rel_n;
        if (e->rel != RSDI_EN_REL_DONE) {
            out->done = false;
            out->result = RSD_PENDING;
        } else if (e->rel_final < 0 && (e->rel_err < 0 || !e->rel_ran)) { /* the first failure's words */
            out->result = e->rel_final;
            out->outcome = e->rel_err < 0 ? e->rel_outcome : RSD_OUTCOME_NONE;
            out->decision = e->rel_err < 0 ? e->rel_decision : RSD_DECISION_NONE;
            out->reason = e->rel_err < 0 ? e->rel_reason : RSD_REASON_NONE;
            out->message = e->rel_msg;
            out->op_model = out->wire_id = out->lease_id = out->load_stage = "";
            out->n_evicted = out->n_notices = 0;
            out->evicted = NULL;
            out->notices = NULL;
        }
    }
}

/* Steps a begun ensure (or release) to its end, poll() between steps; pulls its event. */
RSDI_PRIVATE int rsdi_en_loop(rsd_ensurer *e, rsd_ensure_result *out) {
    rsd_pollfd fds[32];
    rsd_ensure_result res;
    while (rsd_ensurer_step(e, rsd_now_ms()) == 0) {
        int n = rsd_ensurer_pollfds(e, fds, 32), timeout;
        uint64_t dl = rsd_ensurer_next_deadline(e), now = rsd_now_ms();
        if (n > 32) n = 32; /* fds[] is the blocking call's own: the rest waits for the next round */
        if (dl == RSD_NO_DEADLINE) timeout = n ? -1 : 10;
        else if (dl <= now) timeout = 0;
        else timeout = dl - now > 1000 ? 1000 : (int)(dl - now);
        if (timeout == 0) continue;
        if (rsd_poll(fds, n, timeout) < 0 && errno != EINTR) break;
    }
    if (out) rsd_ensurer_query(e, out);
    if (!rsd_ensurer_next_event(e, &res)) return RSD_PENDING; /* poll() failed */
    return res.result;
}

RSD_API int rsd_ensurer_sync(rsd_ensurer *e, const rsd_ensure_req *q, rsd_ensure_result *out) {
    int rc;
    if (out) memset(out, 0, sizeof *out);
    if (!e) return RSD_ERR_ARG;
    if (q && q->url) (void)rsd_ensurer_resolve_sync(e, q->url); /* a failure shows up as RSD_ERR_RESOLVE */
    rc = rsd_ensurer_begin(e, q, rsd_now_ms());
    if (rc == RSD_ERR_STATE) return rc;
    return rsdi_en_loop(e, out);
}

RSD_API int rsd_ensurer_lease_return_begin(rsd_ensurer *e, const rsd_ensure_req *q, const char *lease_id,
                                           uint64_t now_ms) {
    static const char pre[] = RSDI_EN_LS_PREFIX;
    rsd_ensure_req one;
    uint64_t id = 0;
    const char *p;
    int rc;
    if (!e || !lease_id) return RSD_ERR_ARG;
    if (e->phase == RSDI_EN_DETECT || e->phase == RSDI_EN_RUN || e->phase == RSDI_EN_LEASE) return RSD_ERR_STATE;
    if (e->rel != RSDI_EN_REL_NONE && e->rel != RSDI_EN_REL_DONE) return RSD_ERR_STATE;
    e->rel = RSDI_EN_REL_NONE;
    if (strncmp(lease_id, pre, sizeof pre - 1) != 0) { /* a state-directory lease: one ensure per model */
        if (!lease_id[0] || strlen(lease_id) > 40) return RSD_ERR_ARG;
        if (!e->st) return RSD_ERR_STATE;
        if (q && q->url && !rsdi_cpy(e->url, sizeof e->url, q->url)) return RSD_ERR_URL; /* each ensure's */
        memset(&e->rel_q, 0, sizeof e->rel_q);
        if (q) e->rel_q = *q;
        e->rel_url_given = q && q->url;
        (void)rsdi_cpy(e->bearer, sizeof e->bearer, q && q->bearer ? q->bearer : "");
        if (q && q->bearer && strlen(q->bearer) >= sizeof e->bearer) return RSD_ERR_ARG;
        (void)RSD_SNPRINTF(e->rel_key, sizeof e->rel_key, "lease|%s", lease_id);
        e->rel_final = e->rel_err = RSD_OK;
        e->rel_n = 0;
        e->rel_kept = 0;
        e->rel_resolve = e->rel_ran = false;
        e->rel_msg[0] = '\0';
        e->rel = RSDI_EN_REL_READ;
        e->done_taken = false;
        (void)now_ms;
        return RSD_OK;
    }
    if (!RSDI_EN_SERVE_LEASE) {
        e->phase = RSDI_EN_DONE;
        e->done_taken = false;
        rsdi_en_fail(e, RSD_ERR_ARG, now_ms, "release: %s is an rsd-serve lease, and this build has none "
                     "(RSD_NO_SERVE_LEASE)", lease_id);
        return RSD_ERR_ARG;
    }
    for (p = lease_id + sizeof pre - 1; *p >= '0' && *p <= '9' && id <= 0xFFFFFFFFu; p++)
        id = id * 10 + (uint64_t)(*p - '0');
    memset(&one, 0, sizeof one);
    if (q) one = *q;
    one.model = NULL;
    one.free_bytes = 1; /* begin's checks and resets, as for the lease's take */
    one.runtime = RSD_RUNTIME_AUTO;
    if (*p || !id || id > 0xFFFFFFFFu || !q || !q->url || e->only_kind == RSD_RUNTIME_LMSTUDIO ||
        e->only_kind == RSD_RUNTIME_OLLAMA) {
        e->phase = RSDI_EN_DONE;
        e->ls_used = false;
        e->done_taken = false;
        rsdi_en_fail(e, RSD_ERR_ARG, now_ms, "release: %s needs a valid id and the rsd-serve URL (q->url)",
                     lease_id);
        return RSD_ERR_ARG;
    }
    if ((rc = rsd_ensurer_begin(e, &one, now_ms)) < 0) return rc;
    e->free_bytes = e->ls_requested = 0;
    e->ls = RSDI_EN_LS_DROP;
    e->ls_id = id;
    (void)rsdi_cpy(e->lease_id, sizeof e->lease_id, lease_id);
    return RSD_OK;
}

/* The release ends: its code (the first failed ensure's, else RSD_OK). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
RSDI_PRIVATE int rsdi_en_rel_end(rsd_ensurer *e, int final, const char *fmt, ...) {
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(e->rel_msg, sizeof e->rel_msg, fmt, ap);
        va_end(ap);
    }
    if (e->alk_active) rsd_state_unlock(e->st, &e->alk);
    e->alk_active = false;
    e->rel = RSDI_EN_REL_DONE;
    e->rel_final = final;
    return final;
}

/* A state-directory lease's release, one step: under the record's lock (taken without
   blocking) read it and begin the ensure of its next model; step that ensure; take what
   came back out of the record. What failed stays in it (rel_kept) for another release. */
RSDI_PRIVATE int rsdi_en_rel_step(rsd_ensurer *e, uint64_t now_ms) {
    static const char ext[] = ".lease";
    int guard, r;
    for (guard = 0; guard < 64; guard++) {
        bool first = !e->rel_n && !e->rel_kept;
        if (e->rel == RSDI_EN_REL_DONE) return e->rel_final;
        if (e->rel == RSDI_EN_REL_RUN) {
            rsd_ensure_result res;
            r = rsdi_en_step_one(e, now_ms);
            if (r == RSD_PENDING) return RSD_PENDING;
            rsd_ensurer_query(e, &res);
            if (r == RSD_OK && res.outcome == RSD_OUTCOME_RESIDENT) {
                e->rel = RSDI_EN_REL_DROP;
                continue;
            }
            if (e->rel_err == RSD_OK) { /* its words outlive the ensures after it */
                e->rel_err = r < 0 ? r : RSD_ERR_STATE;
                e->rel_outcome = res.outcome;
                e->rel_decision = res.decision;
                e->rel_reason = res.reason;
                (void)rsdi_cpy(e->rel_msg, sizeof e->rel_msg, res.message ? res.message : "");
            }
            e->rel_kept++;
            e->rel = RSDI_EN_REL_READ;
            continue;
        }
        if (!e->alk_active) { /* READ or DROP: the record's lock first */
            r = rsd_state_attr_lock_begin(e->st, &e->alk, e->rel_key, now_ms, 0);
            if (r < 0) {
                if (e->rel == RSDI_EN_REL_READ)
                    return rsdi_en_rel_end(e, first ? r : e->rel_err, first ? "release: lease %s: %s" : NULL,
                                           e->rel_key + 6, rsd_result_str(r));
                e->rel_n++; /* it came back but could not leave the record: go on past it */
                e->rel_kept++;
                e->rel = RSDI_EN_REL_READ;
                continue;
            }
            e->alk_active = true;
        }
        r = rsdi_state_lock_code(e->st, &e->alk, now_ms);
        if (r == RSD_PENDING) return RSD_PENDING;
        if (r != RSD_OK) {
            rsd_state_unlock(e->st, &e->alk);
            e->alk_active = false;
            if (e->rel == RSDI_EN_REL_READ) {
                r = r == RSD_ERR_TIMEOUT ? RSD_ERR_LOCK : r;
                return rsdi_en_rel_end(e, first ? r : e->rel_err, first ? "release: lease %s: %s" : NULL,
                                       e->rel_key + 6, rsd_result_str(r));
            }
            e->rel_n++;
            e->rel_kept++;
            e->rel = RSDI_EN_REL_READ;
            continue;
        }
        if (e->rel == RSDI_EN_REL_DROP) { /* the entry of the model that came back (e->model) leaves */
            const rsd_attr_set *lease = rsdi_state_scratch(e->st);
            char model[RSD_STATE_MAX_ID_BYTES + 1], at[RSD_STATE_MAX_ID_BYTES + 1];
            rsd_attr_change gone;
            size_t j;
            r = rsdi_record_load(e->st, e->rel_key, ext, rsdi_state_scratch(e->st));
            for (j = e->rel_kept; r > 0 && j < lease->count && strcmp(lease->items[j].model, e->model) != 0; j++) {
            }
            if (r > 0 && j < lease->count) {
                (void)rsdi_cpy(model, sizeof model, lease->items[j].model); /* the update reads the record again */
                (void)rsdi_cpy(at, sizeof at, lease->items[j].instance);
                gone.model = model;
                gone.instance = at;
                gone.remove = true;
                r = rsdi_record_update_locked(e->st, e->rel_key, ext, &gone, 1, 0, true);
            } else {
                r = 0;
            }
            rsd_state_unlock(e->st, &e->alk);
            e->alk_active = false;
            e->rel_n++;
            if (r <= 0) e->rel_kept++; /* it could not leave the record: go on past it */
            e->rel = RSDI_EN_REL_READ;
            continue;
        }
        { /* READ: the record, then its next model's ensure */
            const rsd_attr_set *lease = rsdi_state_scratch(e->st);
            rsd_ensure_req one;
            char url[RSD_RECONCILE_URL_MAX], bearer[RSD_RECONCILE_BEARER_MAX], model[RSD_STATE_MAX_ID_BYTES + 1];
            r = rsdi_record_load(e->st, e->rel_key, ext, rsdi_state_scratch(e->st));
            rsd_state_unlock(e->st, &e->alk);
            e->alk_active = false;
            if (first && r <= 0)
                return rsdi_en_rel_end(e, r < 0 ? r : RSD_ERR_NOT_FOUND, "release: no lease %s here%s",
                                       e->rel_key + 6, r < 0 ? " (its record could not be read)" : "");
            if (r < 0 || lease->count <= e->rel_kept) return rsdi_en_rel_end(e, e->rel_err, NULL);
            (void)rsdi_cpy(model, sizeof model, lease->items[e->rel_kept].model);
            (void)rsdi_cpy(url, sizeof url, e->rel_url_given ? e->url : lease->items[e->rel_kept].instance);
            (void)rsdi_cpy(bearer, sizeof bearer, e->bearer);
            one = e->rel_q;
            one.url = url;
            one.model = model;
            one.bearer = bearer[0] ? bearer : NULL;
            one.free_bytes = 0;
            if (e->rel_resolve) (void)rsd_ensurer_resolve_sync(e, url); /* the blocking rsd_ensurer_lease_return_sync only */
            e->rel_ran = true;
            e->rel = RSDI_EN_REL_RUN;
            (void)rsdi_en_begin(e, &one, now_ms); /* an error ends that ensure at once: the RUN step reads it */
        }
    }
    return RSD_PENDING;
}

RSD_API int rsd_ensurer_lease_return_sync(rsd_ensurer *e, const rsd_ensure_req *q, const char *lease_id,
                                          rsd_ensure_result *out) {
    int r;
    if (out) memset(out, 0, sizeof *out);
    if (!e || !lease_id || !lease_id[0] || strlen(lease_id) > 40) return RSD_ERR_ARG;
    if (strncmp(lease_id, RSDI_EN_LS_PREFIX, sizeof RSDI_EN_LS_PREFIX - 1) != 0 && !e->st) return RSD_ERR_STATE;
    if (q && q->url) (void)rsd_ensurer_resolve_sync(e, q->url); /* a failure shows up as RSD_ERR_RESOLVE */
    if ((r = rsd_ensurer_lease_return_begin(e, q, lease_id, rsd_now_ms())) < 0) {
        if (out) rsd_ensurer_query(e, out);
        return r;
    }
    e->rel_resolve = true; /* blocking anyway: each recorded URL's host name is resolved first */
    r = rsdi_en_loop(e, out);
    if (r < 0) return r;
    {
        rsd_ensure_result res;
        rsd_ensurer_query(e, &res);
        return res.restored;
    }
}
/* ==== ensure end ========================================================== */

/* ==== >>fleet ============================================================= */
#ifndef RSD_NO_PROCESS
#include <errno.h>
#include <stdio.h>
#include <string.h>

enum {
    RSDI_FLEET_NARR_EVENTS = 8 * RSD_POOL_MAX_SLOTS, /* narration ring (drop-oldest) */
    RSDI_FLEET_TAIL_LINES = 8,                       /* output lines quoted in a message */
    RSDI_FLEET_CMD_BYTES = 320,                      /* command quoted in a message */
    RSDI_FLEET_URL_BYTES = 96 + RSD_FLEET_HEALTH_PATH_MAX,
    RSDI_FLEET_MAX_PASSES = 16,                      /* step loop bound */
    RSDI_FLEET_PROBE_BODY = 65536,                   /* a /props answer (chat template included) */
    RSDI_FLEET_PROPS_TOKENS = 2048                   /* JSON tokens of a /props answer */
};

typedef struct rsdi_fleet_model {
    rsd_proc_spec spec;        /* strings and arrays point into buf */
    char *buf;                 /* RSD_FLEET_SPEC_BYTES */
    const char *health_path;   /* in buf */
    const char *probe_host;    /* numeric host for the probe URL ("127.0.0.1", "[::1]"...) */
    const char *probe_bearer;  /* in buf; NULL = none */
    int last_result;
    int exit_code;             /* of its last process (128+signal, 127 never ran) */
    uint32_t wd_restarts;      /* watchdog restarts in a row */
    uint64_t wd_restart_at;    /* load it again then (0 = none) */
    uint32_t held_restarts;    /* held readies lost in a row (RSD_FLEET_HELD_RESTARTS) */
    uint32_t msg_gen;
    char msg[RSD_FLEET_MESSAGE_MAX];
} rsdi_fleet_model;

typedef struct rsdi_fleet_slot {
    rsd_pool_proc_h pp;        /* pool incarnation; 0 = no process here */
    rsd_proc_h proc;           /* supervisor handle; 0 = none (or already released) */
    int model;
    uint16_t port;
    int64_t pid;
    uint64_t started_ms, ready_ms;
    bool told;                 /* rsd_pool_on_started reported (ok or not) */
    uint64_t ready_until;      /* a held ready: the pool is told then at the latest (0 = none;
                                  desc.ready_hold_ms) */
    bool ready;
    bool healthy;              /* /health said 200; GET /props (its slot count) in flight */
    bool stopping;             /* the pool sent STOP */
    uint64_t hold_until;       /* a held stop: SIGTERM then (0 = none; desc.stop_hold_ms) */
    uint64_t kill_by;          /* a held stop: SIGKILL then at the latest (the STOP + term_grace_ms) */
    rsd_http_req_h probe;      /* /health request in flight; 0 = none */
    uint64_t probe_sent_ms;
    uint64_t out_seen;         /* the child's out_bytes when the last probe was sent */
    uint64_t wd_next_ms;       /* next watchdog poll (READY) */
    uint32_t wd_fails;         /* failed polls in a row */
    uint32_t wd_errors;        /* 5xx answers in a row (rsd_fleet_report) */
    char wd_why[160];          /* set when the watchdog, or the host's rsd_fleet_ready_restart, killed it */
} rsdi_fleet_slot;

typedef struct rsdi_fleet_qev {
    rsd_fleet_event ev;        /* .message NULL while queued */
    uint64_t seq;
    int msg_model;             /* message taken from this model's msg at pull, -1 = none */
    uint32_t msg_gen;
} rsdi_fleet_qev;

struct rsd_fleet {
    rsd_allocator alloc;
    rsd_logger logger;
    rsd_pool *pool;
    rsd_procs *procs;
    rsd_http_client *client;
    uint32_t probe_timeout_ms;
    uint32_t wd_interval, wd_failures, wd_errors, wd_restarts; /* the watchdog (interval 0 = no polls) */
    uint32_t stop_hold_ms;     /* desc.stop_hold_ms */
    uint32_t ready_hold_ms;    /* desc.ready_hold_ms */
    bool wd_on;
    int num_models;
    rsdi_fleet_model *models;  /* RSD_FLEET_MAX_MODELS entries */
    rsdi_fleet_slot slots[RSD_POOL_MAX_SLOTS];
    rsdi_fleet_qev *rq;        /* GRANT/FAIL ring */
    uint32_t rq_cap, rq_head, rq_count;
    rsdi_fleet_qev nq[RSDI_FLEET_NARR_EVENTS]; /* narration ring */
    uint32_t nq_head, nq_count;
    uint64_t seq, dropped;
    bool stopped;
    rsd_json_tok *props_toks;  /* RSDI_FLEET_PROPS_TOKENS */
    char *spare;               /* RSD_FLEET_SPEC_BYTES: rsd_fleet_set_model copies here first */
    char out_msg[RSD_FLEET_MESSAGE_MAX]; /* message of the last pulled event */
    char tmp[RSD_FLEET_MESSAGE_MAX];
    char tail[RSD_FLEET_MESSAGE_MAX];
};

RSDI_PRIVATE const char *const rsdi_fleet_ev_names[RSD_FLEET_EV_NUM] = {
    "NONE", "GRANT", "FAIL", "STARTING", "READY", "STOPPING", "EXITED", "CRASHED"};

RSD_API const char *rsd_fleet_event_str(int kind) {
    return kind >= 0 && kind < RSD_FLEET_EV_NUM ? rsdi_fleet_ev_names[kind] : "?";
}

/* ---- copying a model's spec into its buffer ---- */
typedef struct rsdi_fleet_arena {
    char *buf;
    size_t cap, off;
    bool over;
} rsdi_fleet_arena;

RSDI_PRIVATE void *rsdi_fleet_take(rsdi_fleet_arena *a, size_t n, size_t align) {
    size_t o = (a->off + align - 1) & ~(align - 1);
    if (a->over || o > a->cap || n > a->cap - o) {
        a->over = true;
        return NULL;
    }
    a->off = o + n;
    return a->buf + o;
}

RSDI_PRIVATE const char *rsdi_fleet_str(rsdi_fleet_arena *a, const char *s) {
    size_t n;
    char *d;
    if (!s) return NULL;
    n = strlen(s) + 1;
    d = (char *)rsdi_fleet_take(a, n, 1);
    if (d) memcpy(d, s, n);
    return d;
}

RSDI_PRIVATE const char *const *rsdi_fleet_strv(rsdi_fleet_arena *a, const char *const *v) {
    size_t n = 0, i, lim = a->cap / sizeof(char *);
    const char **d;
    if (!v) return NULL;
    while (v[n]) {
        if (++n >= lim) { a->over = true; return NULL; }
    }
    d = (const char **)rsdi_fleet_take(a, (n + 1) * sizeof(char *), sizeof(void *));
    if (!d) return NULL;
    for (i = 0; i < n; i++) d[i] = rsdi_fleet_str(a, v[i]);
    d[n] = NULL;
    return d;
}

/* The strings and the string lists of a rsd_proc_spec (offsets), in the order the model's
   arena takes them; RSDI_FLEET_SPEC_AT/GET name the member at one. */
#define RSDI_FLEET_SPEC_AT(sp, type, off) (*(type *)(void *)((char *)(sp) + (off)))
#define RSDI_FLEET_SPEC_GET(sp, type, off) (*(type const *)(const void *)((const char *)(sp) + (off)))
static const size_t rsdi_fleet_spec_lists[] = {
    offsetof(rsd_proc_spec, args), offsetof(rsd_proc_spec, extra), offsetof(rsd_proc_spec, env),
    offsetof(rsd_proc_spec, exe_args)};
static const size_t rsdi_fleet_spec_strs[] = {
    offsetof(rsd_proc_spec, exe), offsetof(rsd_proc_spec, model), offsetof(rsd_proc_spec, alias),
    offsetof(rsd_proc_spec, host), offsetof(rsd_proc_spec, ngl), offsetof(rsd_proc_spec, cwd),
    offsetof(rsd_proc_spec, name)};

RSDI_PRIVATE int rsdi_fleet_copy_spec(rsdi_fleet_model *m, const rsd_fleet_model_desc *md) {
    rsdi_fleet_arena a;
    const rsd_proc_spec *s = &md->spec;
    const char *hp = md->health_path ? md->health_path : "/health";
    const char *h;
    size_t k;
    a.buf = m->buf;
    a.cap = RSD_FLEET_SPEC_BYTES;
    a.off = 0;
    a.over = false;
    if (hp[0] != '/' || strlen(hp) >= RSD_FLEET_HEALTH_PATH_MAX) return RSD_ERR_ARG;
    if (md->probe_bearer && !rsdi_no_ctl(md->probe_bearer)) return RSD_ERR_ARG; /* it goes in a header line */
    if (s->num_vars < 0 || s->num_vars > RSD_PROC_MAX_VARS || (s->num_vars && !s->vars))
        return RSD_ERR_ARG;
    m->spec = *s; /* the numbers and user; every string and list is copied below */
    for (k = 0; k < sizeof rsdi_fleet_spec_lists / sizeof rsdi_fleet_spec_lists[0]; k++)
        RSDI_FLEET_SPEC_AT(&m->spec, const char *const *, rsdi_fleet_spec_lists[k]) =
            rsdi_fleet_strv(&a, RSDI_FLEET_SPEC_GET(s, const char *const *, rsdi_fleet_spec_lists[k]));
    m->spec.vars = NULL;
    m->spec.num_vars = 0;
    if (s->num_vars) {
        rsd_proc_var *v = (rsd_proc_var *)rsdi_fleet_take(
            &a, (size_t)s->num_vars * sizeof(rsd_proc_var), sizeof(void *));
        int i;
        for (i = 0; v && i < s->num_vars; i++) {
            v[i].name = rsdi_fleet_str(&a, s->vars[i].name);
            v[i].value = rsdi_fleet_str(&a, s->vars[i].value);
        }
        m->spec.vars = v;
        m->spec.num_vars = s->num_vars;
    }
    for (k = 0; k < sizeof rsdi_fleet_spec_strs / sizeof rsdi_fleet_spec_strs[0]; k++)
        RSDI_FLEET_SPEC_AT(&m->spec, const char *, rsdi_fleet_spec_strs[k]) =
            rsdi_fleet_str(&a, RSDI_FLEET_SPEC_GET(s, const char *, rsdi_fleet_spec_strs[k]));
    m->health_path = rsdi_fleet_str(&a, hp);
    m->probe_bearer = md->probe_bearer && md->probe_bearer[0] ? rsdi_fleet_str(&a, md->probe_bearer) : NULL;
    /* The probe goes to the address the child binds: a wildcard bind is probed on loopback. */
    h = s->host;
    if (!h || !h[0] || !strcmp(h, "0.0.0.0") || !strcmp(h, "localhost")) h = "127.0.0.1";
    else if (!strcmp(h, "::")) h = "[::1]";
    if (strchr(h, ':') && h[0] != '[') {
        size_t n = strlen(h);
        char *d = n < 64 ? (char *)rsdi_fleet_take(&a, n + 3, 1) : NULL;
        if (d) { d[0] = '['; memcpy(d + 1, h, n); d[n + 1] = ']'; d[n + 2] = '\0'; }
        else a.over = true;
        m->probe_host = d;
    } else {
        m->probe_host = strlen(h) < 64 ? rsdi_fleet_str(&a, h) : NULL;
        if (!m->probe_host) a.over = true;
    }
    return a.over ? RSD_ERR_CAPACITY : RSD_OK;
}

/* ---- events ---- */
RSDI_PRIVATE void rsdi_fleet_push(rsd_fleet *f, const rsd_fleet_event *ev, int msg_model) {
    rsdi_fleet_qev *q;
    bool req = ev->kind == RSD_FLEET_EV_GRANT || ev->kind == RSD_FLEET_EV_FAIL;
    if (req) {
        if (f->rq_count == f->rq_cap) { /* host not pulling: drop the oldest */
            f->rq_head = (f->rq_head + 1) % f->rq_cap;
            f->rq_count--;
            f->dropped++;
            rsdi_log(&f->logger, RSD_LOG_ERROR, RSD_LOGITEM_FLEET_EVENT_DROPPED,
                     "fleet: GRANT/FAIL queue full; oldest dropped", RSDI_WHERE);
        }
        q = &f->rq[(f->rq_head + f->rq_count++) % f->rq_cap];
    } else {
        if (f->nq_count == RSDI_FLEET_NARR_EVENTS) {
            f->nq_head = (f->nq_head + 1) % RSDI_FLEET_NARR_EVENTS;
            f->nq_count--;
            f->dropped++;
            rsdi_log(&f->logger, RSD_LOG_DEBUG, RSD_LOGITEM_FLEET_EVENT_DROPPED,
                     "fleet: event queue full; oldest dropped", RSDI_WHERE);
        }
        q = &f->nq[(f->nq_head + f->nq_count++) % RSDI_FLEET_NARR_EVENTS];
    }
    q->ev = *ev;
    q->ev.message = NULL;
    q->seq = ++f->seq;
    q->msg_model = msg_model;
    q->msg_gen = msg_model >= 0 ? f->models[msg_model].msg_gen : 0;
}

RSDI_PRIVATE void rsdi_fleet_ev_init(rsd_fleet *f, rsd_fleet_event *ev, rsd_fleet_event_kind kind,
                                    int model, int slot, uint64_t now_ms) {
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->model = model;
    ev->slot = slot;
    ev->at_ms = now_ms;
    if (model >= 0) {
        rsd_pool_model_info mi;
        if (rsd_pool_query_model(f->pool, model, &mi) == RSD_OK) ev->model_id = mi.id;
    }
}

RSDI_PRIVATE const char *rsdi_fleet_model_id(const rsd_fleet *f, int model) {
    rsd_pool_model_info mi;
    if (model < 0 || rsd_pool_query_model(f->pool, model, &mi) != RSD_OK) return "?";
    return mi.id;
}

/* Writes "model <id>: <reason>[; command: ...][; last output:\n...]" into the model's
   message (quoting the process h when it is still known). */
RSDI_PRIVATE void rsdi_fleet_note(rsd_fleet *f, int model, rsd_proc_h h, int result,
                                  const char *reason) {
    uint32_t item = result == RSD_ERR_POOL_CRASHED ? (uint32_t)RSD_LOGITEM_FLEET_CRASHED
                                                   : (uint32_t)RSD_LOGITEM_FLEET_START_FAILED;
    rsdi_fleet_model *m = &f->models[model];
    size_t n, cap = sizeof m->msg;
    int k;
    k = RSD_SNPRINTF(m->msg, cap, "model %s: %s", rsdi_fleet_model_id(f, model), reason);
    n = k < 0 ? 0 : (size_t)k >= cap ? cap - 1 : (size_t)k;
    if (h.id && rsd_procs_command(f->procs, h, f->tmp, RSDI_FLEET_CMD_BYTES) > 0 && n + 16 < cap) {
        k = RSD_SNPRINTF(m->msg + n, cap - n, "; command: %s", f->tmp);
        n = k < 0 ? n : n + (size_t)k >= cap ? cap - 1 : n + (size_t)k;
    }
    if (h.id && n + 24 < cap &&
        rsd_procs_tail(f->procs, h, RSDI_FLEET_TAIL_LINES, f->tail, cap - n - 18) > 0) {
        k = RSD_SNPRINTF(m->msg + n, cap - n, "; last output:\n%s", f->tail);
        n = k < 0 ? n : n + (size_t)k >= cap ? cap - 1 : n + (size_t)k;
    }
    while (n > 0 && (m->msg[n - 1] == '\n' || m->msg[n - 1] == ' ')) m->msg[--n] = '\0';
    m->msg_gen++;
    m->last_result = result;
    rsdi_log(&f->logger, RSD_LOG_WARN, item, m->msg, RSDI_WHERE);
}

/* ---- slots ---- */
RSDI_PRIVATE rsdi_fleet_slot *rsdi_fleet_slot_of_proc(rsd_fleet *f, rsd_proc_h h) {
    int i;
    if (!h.id) return NULL;
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++)
        if (f->slots[i].pp.id && f->slots[i].proc.id == h.id) return &f->slots[i];
    return NULL;
}

RSDI_PRIVATE void rsdi_fleet_cancel_probe(rsd_fleet *f, rsdi_fleet_slot *s) {
    if (s->probe.id) (void)rsd_http_cancel(f->client, s->probe);
    s->probe.id = 0;
}

/* Sends GET path to slot s's child as s->probe (its one request in flight); false when
   it could not be sent (s->probe is then empty). */
RSDI_PRIVATE bool rsdi_fleet_send_get(rsd_fleet *f, rsdi_fleet_slot *s, const char *path, uint32_t timeout_ms,
                                      uint64_t now_ms) {
    rsd_http_request rq;
    char url[RSDI_FLEET_URL_BYTES];
    const rsdi_fleet_model *m = &f->models[s->model];
    (void)RSD_SNPRINTF(url, sizeof url, "http://%s:%u%s", m->probe_host, (unsigned)s->port, path);
    memset(&rq, 0, sizeof rq);
    rq.method = "GET";
    rq.url = url;
    rq.connect_timeout_ms = timeout_ms;
    rq.total_timeout_ms = timeout_ms;
    rq.bearer_token = m->probe_bearer;
    s->probe_sent_ms = now_ms;
    if (rsd_http_send(f->client, &rq, now_ms, &s->probe) != RSD_OK) s->probe.id = 0;
    return s->probe.id != 0;
}

/* GET path on a starting child (at most one request per child in flight). */
RSDI_PRIVATE bool rsdi_fleet_get(rsd_fleet *f, rsdi_fleet_slot *s, const char *path, uint64_t now_ms) {
    rsd_proc_info info;
    if (s->probe.id || s->told || s->stopping || !s->proc.id) return false;
    if (rsd_procs_query_proc(f->procs, s->proc, &info) != RSD_OK ||
        info.state != RSD_PROC_STARTING)
        return false;
    s->out_seen = info.out_bytes;
    return rsdi_fleet_send_get(f, s, path, f->probe_timeout_ms, now_ms); /* if not, the next PROBE tries again */
}

/* The probe client's log, passed on to the fleet's logger but for connect failures: a
   starting child that does not listen yet is no error (rsdi_fleet_probe_log tells it). */
RSDI_PRIVATE void rsdi_fleet_client_log(void *user, int level, uint32_t item, const char *msg,
                                        const char *where) {
    rsd_fleet *f = (rsd_fleet *)user;
    if (item == RSD_LOGITEM_HTTP_CONNECT_FAILED) return;
    if (f->logger.fn) f->logger.fn(f->logger.user, level, item, msg, where);
}

/* A probe or poll that could not connect: "waiting for ID (port N) to listen" (debug)
   while the child starts; a warning once it was ready (the watchdog's poll). */
RSDI_PRIVATE void rsdi_fleet_probe_log(rsd_fleet *f, const rsdi_fleet_slot *s, const rsd_http_event *he) {
    if (he->result != RSD_ERR_CONNECT) return;
    if (s->ready)
        rsdi_logf(&f->logger, RSD_LOG_WARN, RSD_LOGITEM_HTTP_CONNECT_FAILED, RSDI_WHERE,
                  "fleet: %s (port %u): watchdog poll could not connect (errno %d)",
                  rsdi_fleet_model_id(f, s->model), (unsigned)s->port, he->sys_errno);
    else
        rsdi_logf(&f->logger, RSD_LOG_DEBUG, RSD_LOGITEM_FLEET_WAITING, RSDI_WHERE,
                  "fleet: waiting for %s (port %u) to listen", rsdi_fleet_model_id(f, s->model),
                  (unsigned)s->port);
}

/* The readiness probe (GET health_path), until it has said 200 once. */
RSDI_PRIVATE bool rsdi_fleet_send_probe(rsd_fleet *f, rsdi_fleet_slot *s, uint64_t now_ms) {
    return !s->healthy && rsdi_fleet_get(f, s, f->models[s->model].health_path, now_ms);
}

/* The child's own slot count from its GET /props answer (llama-server's total_slots,
   = -np); 0 when it gave none (another server, an error, a body too large). */
RSDI_PRIVATE uint32_t rsdi_fleet_props_slots(rsd_fleet *f, const rsd_http_event *he) {
    rsd_json_doc d;
    int64_t v = 0;
    if (!he || he->result != RSD_OK || he->status != 200 ||
        rsd_json_parse(&d, he->body.ptr, he->body.len, f->props_toks, RSDI_FLEET_PROPS_TOKENS) <= 0 ||
        rsd_json_int64(&d, rsd_json_find(&d, 0, "total_slots"), &v) != RSD_OK || v <= 0 ||
        v > (int64_t)RSD_POOL_MAX_REQUESTS)
        return 0;
    return (uint32_t)v;
}

/* The slot count a child has for sure without asking: the llama-server template's
   -np {parallel} when set and no extra argument gives another (-np, --parallel); else 0. */
RSDI_PRIVATE int rsdi_fleet_known_slots(const rsd_proc_spec *sp) {
    int i;
    if (sp->args || sp->parallel <= 0) return 0;
    for (i = 0; sp->extra && sp->extra[i]; i++)
        if (!strcmp(sp->extra[i], "-np") || !strncmp(sp->extra[i], "--parallel", 10)) return 0;
    return sp->parallel;
}

/* A READY process takes requests: the pool is told (it grants the waiting ones). */
RSDI_PRIVATE void rsdi_fleet_ready_on(rsd_fleet *f, rsdi_fleet_slot *s, uint64_t now_ms) {
    s->ready_until = 0;
    s->told = true;
    f->models[s->model].held_restarts = 0;
    s->wd_next_ms = f->wd_interval ? now_ms + f->wd_interval : 0;
    (void)rsd_pool_on_started(f->pool, s->pp, true, now_ms);
}

/* /health said 200 and /props answered (or could not): READY, at most the child's own
   slot count of requests at once (the rest queue in the pool, not in its accept queue).
   With desc.ready_hold_ms the pool is told later (rsd_fleet_ready_go or the hold's end). */
RSDI_PRIVATE void rsdi_fleet_ready(rsd_fleet *f, rsdi_fleet_slot *s, const rsd_http_event *props,
                                   uint64_t now_ms) {
    rsd_fleet_event ev;
    uint32_t slots = props ? rsdi_fleet_props_slots(f, props) : (uint32_t)rsdi_fleet_known_slots(&f->models[s->model].spec);
    if (s->told || s->ready || s->stopping || rsd_procs_mark_ready(f->procs, s->proc, now_ms) != RSD_OK) return;
    s->ready = true;
    s->ready_ms = now_ms;
    if (slots) (void)rsd_pool_set_slot_limit(f->pool, s->pp, slots, now_ms);
    rsdi_fleet_ev_init(f, &ev, RSD_FLEET_EV_READY, s->model, (int)(s - f->slots), now_ms);
    ev.pid = s->pid;
    ev.port = s->port;
    ev.held = f->ready_hold_ms != 0;
    rsdi_fleet_push(f, &ev, -1);
    rsdi_logf(&f->logger, RSD_LOG_INFO, RSD_LOGITEM_FLEET_READY, RSDI_WHERE,
              "fleet: %s ready on port %u after %llu ms (%u slots)%s", rsdi_fleet_model_id(f, s->model),
              (unsigned)s->port, (unsigned long long)(now_ms - s->started_ms), (unsigned)slots,
              ev.held ? "; held" : "");
    if (ev.held) s->ready_until = now_ms + f->ready_hold_ms;
    else rsdi_fleet_ready_on(f, s, now_ms);
}

RSDI_PRIVATE void rsdi_fleet_clear_slot(rsdi_fleet_slot *s) {
    memset(s, 0, sizeof *s);
    s->model = -1;
}

/* Pool SPAWN: start the model's process in slot. */
RSDI_PRIVATE void rsdi_fleet_spawn(rsd_fleet *f, int slot, rsd_pool_proc_h pp, int model,
                                   uint64_t now_ms) {
    rsdi_fleet_slot *s = &f->slots[slot];
    rsd_proc_spec spec = f->models[model].spec;
    rsd_proc_h h;
    rsd_proc_info info;
    rsd_fleet_event ev;
    int r;
    char reason[192];
    rsdi_fleet_clear_slot(s);
    s->pp = pp;
    s->model = model;
    s->started_ms = now_ms;
    r = rsd_procs_spawn(f->procs, &spec, now_ms, &h);
    if (r == RSD_OK && rsd_procs_query_proc(f->procs, h, &info) == RSD_OK) {
        s->proc = h;
        s->pid = info.pid;
        s->port = info.port;
        s->out_seen = 0;
        (void)rsd_pool_set_pid(f->pool, pp, info.pid);
        rsdi_fleet_ev_init(f, &ev, RSD_FLEET_EV_STARTING, model, slot, now_ms);
        ev.pid = s->pid;
        ev.port = s->port;
        rsdi_fleet_push(f, &ev, -1);
        return;
    }
    /* it never ran; the waiting requests fail now, quoting why. */
    if (r == RSD_ERR_SPAWN && rsd_procs_query_proc(f->procs, h, &info) == RSD_OK) {
        char os[64] = "";
        if (info.os_err)
            (void)RSD_SNPRINTF(os, sizeof os, "; %s: Windows error %lu", info.os_call, (unsigned long)info.os_err);
        (void)RSD_SNPRINTF(reason, sizeof reason, "could not start: %s (errno %d%s)", strerror(info.err), info.err, os);
    }
    else
        (void)RSD_SNPRINTF(reason, sizeof reason, "could not start: %s", rsd_result_str(r));
    rsdi_fleet_note(f, model, r == RSD_ERR_SPAWN ? h : s->proc, RSD_ERR_FLEET_START, reason);
    f->models[model].exit_code = 127;
    if (r == RSD_ERR_SPAWN) (void)rsd_procs_forget(f->procs, h);
    rsdi_fleet_clear_slot(s);
    rsdi_fleet_ev_init(f, &ev, RSD_FLEET_EV_CRASHED, model, slot, now_ms);
    ev.result = RSD_ERR_FLEET_START;
    ev.exit_code = -1;
    rsdi_fleet_push(f, &ev, model);
    (void)rsd_pool_on_started(f->pool, pp, false, now_ms);
    (void)rsd_pool_on_exited(f->pool, pp, now_ms);
}

/* The process of slot s is gone (EXITED, STOPPED or SPAWN_FAILED). */
RSDI_PRIVATE void rsdi_fleet_gone(rsd_fleet *f, rsdi_fleet_slot *s, const rsd_proc_event *pe,
                                  uint64_t now_ms) {
    rsd_fleet_event ev;
    rsd_pool_proc_h pp = s->pp;
    int model = s->model, slot = (int)(s - f->slots), msg_model = -1;
    char reason[384], status[64];
    rsd_fleet_event_kind kind = RSD_FLEET_EV_EXITED;
    int result = 0;
    rsdi_fleet_cancel_probe(f, s);
    if (pe->kind == RSD_PROC_EV_SPAWN_FAILED)
        (void)RSD_SNPRINTF(status, sizeof status, "could not start: %s (errno %d)", strerror(pe->err),
                       pe->err);
    else if (pe->term_signal)
        (void)RSD_SNPRINTF(status, sizeof status, "killed by signal %d", pe->term_signal);
    else
        (void)RSD_SNPRINTF(status, sizeof status, "exited with code %d", pe->exit_code);
    if (!s->told && !s->stopping) {
        /* an early exit ends the wait at once; a held ready's (the host's preparation may
           have ended it) starts the model again, once in a row, for the requests waiting */
        bool again = s->ready && f->models[model].held_restarts < RSD_FLEET_HELD_RESTARTS;
        (void)RSD_SNPRINTF(reason, sizeof reason, "%s %s%s%s%s", status,
                           s->ready ? "while its ready was held" : "before it was ready", s->wd_why[0] ? ": " : "",
                           s->wd_why, again ? "; starting it again for the requests waiting" : "");
        f->models[model].held_restarts = again ? f->models[model].held_restarts + 1 : 0;
        result = again ? RSD_ERR_POOL_CRASHED : RSD_ERR_FLEET_START;
        rsdi_fleet_note(f, model, s->proc, result, reason);
        s->told = true;
        if (again) (void)rsd_pool_restart(f->pool, pp, now_ms);
        else (void)rsd_pool_on_started(f->pool, pp, false, now_ms);
        kind = RSD_FLEET_EV_CRASHED;
        msg_model = model;
    } else if (s->ready && !s->stopping && s->wd_why[0]) { /* the watchdog killed it */
        rsdi_fleet_model *fm = &f->models[model];
        fm->wd_restarts++;
        if (fm->wd_restarts <= f->wd_restarts) {
            uint64_t delay = (uint64_t)RSD_FLEET_WATCHDOG_BACKOFF_MS << (fm->wd_restarts - 1 < 6 ? fm->wd_restarts - 1 : 6);
            if (delay > RSD_FLEET_WATCHDOG_BACKOFF_MAX_MS) delay = RSD_FLEET_WATCHDOG_BACKOFF_MAX_MS;
            fm->wd_restart_at = now_ms + delay;
            (void)RSD_SNPRINTF(reason, sizeof reason, "restarted by the watchdog (%u of at most %u in a row, in %llu ms): %s",
                           (unsigned)fm->wd_restarts, (unsigned)f->wd_restarts, (unsigned long long)delay, s->wd_why);
        } else {
            fm->wd_restart_at = 0;
            (void)RSD_SNPRINTF(reason, sizeof reason, "stopped by the watchdog, not restarted (%u restarts in a row): %s",
                           (unsigned)(fm->wd_restarts - 1), s->wd_why);
        }
        rsdi_fleet_note(f, model, s->proc, RSD_ERR_POOL_CRASHED, reason);
        kind = RSD_FLEET_EV_CRASHED;
        result = RSD_ERR_POOL_CRASHED;
        msg_model = model;
    } else if (s->ready && !s->stopping) { /* crash while serving */
        (void)RSD_SNPRINTF(reason, sizeof reason, "%s while serving", status);
        rsdi_fleet_note(f, model, s->proc, RSD_ERR_POOL_CRASHED, reason);
        kind = RSD_FLEET_EV_CRASHED;
        result = RSD_ERR_POOL_CRASHED;
        msg_model = model;
    } else if (!s->ready && pe->timed_out) { /* never became ready: note written at START_TIMEOUT */
        kind = RSD_FLEET_EV_CRASHED;
        result = RSD_ERR_FLEET_START;
        msg_model = model;
    }
    if (kind == RSD_FLEET_EV_CRASHED) /* the status that goes with last_result */
        f->models[model].exit_code = pe->kind == RSD_PROC_EV_SPAWN_FAILED ? 127
                                     : pe->term_signal ? 128 + pe->term_signal : pe->exit_code;
    rsdi_fleet_ev_init(f, &ev, kind, model, slot, now_ms);
    ev.pid = s->pid;
    ev.port = s->port;
    ev.result = result;
    ev.exit_code = pe->exit_code;
    ev.term_signal = pe->term_signal;
    rsdi_fleet_push(f, &ev, msg_model);
    (void)rsd_procs_forget(f->procs, s->proc);
    rsdi_fleet_clear_slot(s);
    (void)rsd_pool_on_exited(f->pool, pp, now_ms);
}

/* Applies one pool action. */
RSDI_PRIVATE void rsdi_fleet_apply(rsd_fleet *f, const rsd_pool_action *a, uint64_t now_ms) {
    rsd_fleet_event ev;
    rsdi_fleet_slot *s;
    switch (a->kind) {
    case RSD_POOL_ACTION_SPAWN:
        rsdi_fleet_spawn(f, a->slot, a->proc, a->model, now_ms);
        break;
    case RSD_POOL_ACTION_STOP:
        s = &f->slots[a->slot];
        if (!s->pp.id || s->pp.id != a->proc.id) break; /* already gone */
        if (!s->stopping) {
            s->stopping = true;
            s->ready_until = 0; /* a held ready ends: the pool stops what it never saw ready */
            rsdi_fleet_cancel_probe(f, s);
            rsdi_fleet_ev_init(f, &ev, RSD_FLEET_EV_STOPPING, s->model, a->slot, now_ms);
            ev.pid = s->pid;
            ev.port = s->port;
            ev.why = a->why;
            if (f->stop_hold_ms && f->procs->term_grace_ms >= 2 && s->ready && !s->wd_why[0]) {
                /* the host saves first, inside the grace: at most half of it, the rest is the SIGTERM's */
                uint32_t hold = f->stop_hold_ms < f->procs->term_grace_ms / 2 ? f->stop_hold_ms
                                                                               : f->procs->term_grace_ms / 2;
                s->hold_until = now_ms + hold;
                s->kill_by = now_ms + f->procs->term_grace_ms;
                ev.held = true;
            }
            rsdi_fleet_push(f, &ev, -1);
        }
        if (!s->hold_until) (void)rsd_procs_stop(f->procs, s->proc, now_ms);
        break;
    case RSD_POOL_ACTION_GRANT:
        rsdi_fleet_ev_init(f, &ev, RSD_FLEET_EV_GRANT, a->model, a->slot, now_ms);
        ev.req = a->req;
        ev.user = a->user;
        ev.port = a->slot >= 0 && a->slot < RSD_POOL_MAX_SLOTS ? f->slots[a->slot].port : 0;
        rsdi_fleet_push(f, &ev, -1);
        break;
    case RSD_POOL_ACTION_FAIL: {
        int mm = -1;
        rsdi_fleet_ev_init(f, &ev, RSD_FLEET_EV_FAIL, a->model, -1, now_ms);
        ev.req = a->req;
        ev.user = a->user;
        ev.result = a->result;
        if (a->model >= 0 && (a->result == RSD_ERR_POOL_LOAD_FAILED ||
                              a->result == RSD_ERR_POOL_CRASHED) &&
            f->models[a->model].last_result) {
            mm = a->model;
            if (a->result == RSD_ERR_POOL_LOAD_FAILED) ev.result = RSD_ERR_FLEET_START;
        }
        rsdi_fleet_push(f, &ev, mm);
        break;
    }
    default: break;
    }
}

/* Drains pool actions and runs its timers until it has nothing more to say. */
RSDI_PRIVATE int rsdi_fleet_pump(rsd_fleet *f, uint64_t now_ms) {
    rsd_pool_action a;
    int n = 0, pass;
    for (pass = 0; pass < RSDI_FLEET_MAX_PASSES; pass++) {
        int k = 0;
        /* timers first (TTL stops, starvation drains), then every action queued so far; applying
           them may queue more (a STOP frees room for a SPAWN), so until a pass finds none */
        (void)rsd_pool_step(f->pool, now_ms);
        while (rsd_pool_next_action(f->pool, &a)) {
            rsdi_fleet_apply(f, &a, now_ms);
            k++;
        }
        n += k;
        if (k == 0) break;
    }
    return n;
}

/* Carries out what a pool call queued (the public calls that change the pool end here). */
RSDI_PRIVATE int rsdi_fleet_then(rsd_fleet *f, int r, uint64_t now_ms) {
    (void)rsdi_fleet_pump(f, now_ms);
    return r;
}

/* rsd_fleet_create's block: fleet, model table, spec buffers, GRANT/FAIL ring,
   request->model map, each 16-byte aligned. */
typedef struct rsdi_fleet_layout {
    size_t off_models, off_bufs, off_rq, off_toks, total;
    uint32_t maxreq;
} rsdi_fleet_layout;

/* rsd_fleet_create's checks and block: RSD_OK, or RSD_ERR_ARG for a desc it refuses. */
RSDI_PRIVATE int rsdi_fleet_plan(const rsd_fleet_desc *d, rsdi_fleet_layout *z) {
    size_t sz;
    if (rsdi_allocator_check(&d->allocator) != RSD_OK) {
        rsdi_log(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOCATOR_HALF, "fleet: half an allocator",
                 RSDI_WHERE);
        return RSD_ERR_ARG;
    }
    if (d->num_models < 0 || d->num_models > RSD_FLEET_MAX_MODELS || (d->num_models && !d->models))
        return RSD_ERR_ARG;
    z->maxreq = d->pool.max_requests ? d->pool.max_requests : (uint32_t)RSD_POOL_DEFAULT_REQUESTS;
    if (z->maxreq > RSD_POOL_MAX_REQUESTS) return RSD_ERR_ARG;
    z->total = sizeof(rsd_fleet);
    z->off_models = (z->total + 15) & ~(size_t)15;
    z->total = z->off_models + sizeof(rsdi_fleet_model) * RSD_FLEET_MAX_MODELS;
    z->off_bufs = (z->total + 15) & ~(size_t)15;
    z->total = z->off_bufs + (size_t)RSD_FLEET_SPEC_BYTES * (RSD_FLEET_MAX_MODELS + 1); /* + the spare */
    z->off_rq = (z->total + 15) & ~(size_t)15;
    if (!rsdi_size_mul((size_t)z->maxreq * 2 + 16, sizeof(rsdi_fleet_qev), &sz) ||
        !rsdi_size_add(z->off_rq, sz, &z->total))
        return RSD_ERR_ARG;
    z->off_toks = (z->total + 15) & ~(size_t)15;
    z->total = z->off_toks + sizeof(rsd_json_tok) * RSDI_FLEET_PROPS_TOKENS;
    return RSD_OK;
}

/* The descs of the pool, the supervisor and the probe client that create makes for d
   (the client's logger apart). */
RSDI_PRIVATE void rsdi_fleet_parts(const rsd_fleet_desc *d, rsd_pool_desc *pd, rsd_procs_desc *prd,
                                   rsd_http_client_desc *cd) {
    uint32_t probe_ms = d->probe_timeout_ms ? d->probe_timeout_ms : (uint32_t)RSD_FLEET_PROBE_TIMEOUT_DEFAULT_MS;
    *pd = d->pool;
    pd->models = NULL;
    pd->num_models = 0;
    if (!pd->allocator.alloc_fn && !pd->allocator.free_fn) pd->allocator = d->allocator;
    if (!pd->logger.fn) pd->logger = d->logger;
    *prd = d->procs;
    if (prd->max_procs == 0) prd->max_procs = RSD_POOL_MAX_SLOTS;
    if (!prd->allocator.alloc_fn && !prd->allocator.free_fn) prd->allocator = d->allocator;
    if (!prd->logger.fn) prd->logger = d->logger;
    memset(cd, 0, sizeof *cd);
    cd->max_requests = 2 * RSD_POOL_MAX_SLOTS; /* a probe per process + cancelled ones */
    cd->max_conns = 2 * RSD_POOL_MAX_SLOTS;
    cd->max_body_bytes = RSDI_FLEET_PROBE_BODY;
    cd->max_request_bytes = 4096;
    cd->connect_timeout_ms = probe_ms;
    cd->total_timeout_ms = probe_ms;
    cd->no_keepalive = true;
    cd->tls_off = true;
    cd->allocator = d->allocator;
}

/* ---- public ---- */
RSD_API size_t rsd_fleet_footprint(const rsd_fleet_desc *desc) {
    rsd_fleet_desc d;
    rsd_pool_desc pd;
    rsd_procs_desc prd;
    rsd_http_client_desc cd;
    rsdi_fleet_layout z;
    size_t a, b, c;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    memset(&d.logger, 0, sizeof d.logger); /* a measure, not a create: nothing to say */
    memset(&d.pool.logger, 0, sizeof d.pool.logger);
    memset(&d.procs.logger, 0, sizeof d.procs.logger);
    if (rsdi_fleet_plan(&d, &z) != RSD_OK) return 0;
    rsdi_fleet_parts(&d, &pd, &prd, &cd);
    a = rsd_pool_footprint(&pd);
    b = rsd_procs_footprint(&prd);
    c = rsd_http_client_footprint(&cd);
    return a && b && c ? z.total + a + b + c : 0;
}

RSD_API rsd_fleet *rsd_fleet_create(const rsd_fleet_desc *desc) {
    rsd_fleet_desc d;
    rsd_pool_desc pd;
    rsd_procs_desc prd;
    rsd_http_client_desc cd;
    rsd_fleet *f;
    rsdi_fleet_layout z;
    int i;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (rsdi_fleet_plan(&d, &z) != RSD_OK) return NULL;
    f = (rsd_fleet *)rsdi_malloc(&d.allocator, z.total);
    if (!f) {
        rsdi_log(&d.logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOC_FAILED, "fleet: no memory", RSDI_WHERE);
        return NULL;
    }
    memset(f, 0, sizeof *f);
    f->alloc = d.allocator;
    f->logger = d.logger;
    f->models = (rsdi_fleet_model *)(void *)((char *)f + z.off_models);
    memset(f->models, 0, sizeof(rsdi_fleet_model) * RSD_FLEET_MAX_MODELS);
    for (i = 0; i < RSD_FLEET_MAX_MODELS; i++)
        f->models[i].buf = (char *)f + z.off_bufs + (size_t)i * RSD_FLEET_SPEC_BYTES;
    f->spare = (char *)f + z.off_bufs + (size_t)RSD_FLEET_MAX_MODELS * RSD_FLEET_SPEC_BYTES;
    f->rq = (rsdi_fleet_qev *)(void *)((char *)f + z.off_rq);
    f->props_toks = (rsd_json_tok *)(void *)((char *)f + z.off_toks);
    f->rq_cap = z.maxreq * 2 + 16;
    f->probe_timeout_ms = d.probe_timeout_ms ? d.probe_timeout_ms
                                             : (uint32_t)RSD_FLEET_PROBE_TIMEOUT_DEFAULT_MS;
    f->wd_interval = d.watchdog_interval_ms;
    f->wd_on = d.watchdog_interval_ms || d.watchdog_errors;
    f->wd_failures = d.watchdog_failures ? d.watchdog_failures : (uint32_t)RSD_FLEET_WATCHDOG_FAILURES_DEFAULT;
    f->wd_errors = d.watchdog_errors ? d.watchdog_errors : (uint32_t)RSD_FLEET_WATCHDOG_ERRORS_DEFAULT;
    f->wd_restarts = d.watchdog_restarts ? d.watchdog_restarts : (uint32_t)RSD_FLEET_WATCHDOG_RESTARTS_DEFAULT;
    f->stop_hold_ms = d.stop_hold_ms;
    f->ready_hold_ms = d.ready_hold_ms;
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) rsdi_fleet_clear_slot(&f->slots[i]);

    rsdi_fleet_parts(&d, &pd, &prd, &cd);
    if (d.logger.fn) { /* its connect failures are the fleet's to tell (rsdi_fleet_client_log) */
        cd.logger.fn = rsdi_fleet_client_log;
        cd.logger.user = f;
    }
    f->pool = rsd_pool_create(&pd);
    f->procs = f->pool ? rsd_procs_create(&prd) : NULL;
    f->client = f->procs ? rsd_http_client_create(&cd) : NULL;
    if (!f->client) {
        rsd_fleet_destroy(f);
        return NULL;
    }
    for (i = 0; i < d.num_models; i++)
        if (rsd_fleet_add_model(f, &d.models[i]) < 0) {
            rsd_fleet_destroy(f);
            return NULL;
        }
    return f;
}

RSD_API void rsd_fleet_destroy(rsd_fleet *f) {
    rsd_allocator a;
    if (!f) return;
    a = f->alloc;
    rsd_procs_destroy(f->procs); /* SIGKILL and reap what is left (bounded) */
    rsd_http_client_destroy(f->client);
    rsd_pool_destroy(f->pool);
    rsdi_free(&a, f);
}

RSD_API int rsd_fleet_add_model(rsd_fleet *f, const rsd_fleet_model_desc *model) {
    int r, idx;
    if (!f || !model) return RSD_ERR_ARG;
    if (f->num_models >= RSD_FLEET_MAX_MODELS) return RSD_ERR_CAPACITY;
    r = rsdi_fleet_copy_spec(&f->models[f->num_models], model);
    if (r < 0) {
        rsdi_logf(&f->logger, RSD_LOG_ERROR, RSD_LOGITEM_POOL_BAD_MODEL, RSDI_WHERE,
                  "fleet: model %s: %s", model->pool.id ? model->pool.id : "(null)",
                  r == RSD_ERR_CAPACITY ? "spec strings over RSD_FLEET_SPEC_BYTES"
                                        : "bad health_path or vars");
        return r;
    }
    idx = rsd_pool_add_model(f->pool, &model->pool);
    if (idx < 0) return idx;
    if (idx != f->num_models) return RSD_ERR_STATE; /* the pool was driven directly */
    f->num_models++;
    return idx;
}

RSD_API int rsd_fleet_set_model(rsd_fleet *f, int model, const rsd_fleet_model_desc *md, uint64_t now_ms) {
    rsdi_fleet_model t;
    rsd_pool_model_desc pd;
    int r;
    char *old;
    if (!f || !md || model < 0 || model >= f->num_models) return RSD_ERR_ARG;
    pd = md->pool;
    if (pd.id && strcmp(pd.id, rsdi_fleet_model_id(f, model)) != 0) return RSD_ERR_ARG;
    memset(&t, 0, sizeof t);
    t.buf = f->spare;
    if ((r = rsdi_fleet_copy_spec(&t, md)) < 0) return r;
    pd.id = NULL;
    if ((r = rsd_pool_set_model(f->pool, model, &pd, now_ms)) < 0) return r;
    old = f->models[model].buf; /* the new copy becomes the model's, its old buffer the spare */
    f->models[model].spec = t.spec;
    f->models[model].health_path = t.health_path;
    f->models[model].probe_host = t.probe_host;
    f->models[model].probe_bearer = t.probe_bearer; /* in the new buffer too */
    f->models[model].buf = f->spare;
    f->spare = old;
    f->models[model].last_result = 0;
    f->models[model].exit_code = 0;
    f->models[model].wd_restarts = 0;
    (void)rsd_pool_reset_backoff(f->pool, model);
    return rsdi_fleet_then(f, RSD_OK, now_ms);
}

RSD_API int rsd_fleet_find_model(const rsd_fleet *f, rsd_str id) {
    if (!f) return RSD_ERR_ARG;
    return rsd_pool_find_model(f->pool, id);
}

/* Before a model that is not resident (nor on its way) is given a slot -- which may evict
   another -- check what can be checked without starting it (rsd_procs_check): a missing
   binary or model file fails at once, nothing stopped. RSD_OK or RSD_ERR_FLEET_START. */
RSDI_PRIVATE int rsdi_fleet_precheck(rsd_fleet *f, int model) {
    rsd_pool_model_info mi;
    rsd_proc_h none;
    char why[RSD_FLEET_MESSAGE_MAX / 2];
    if (f->stopped || rsd_pool_query_model(f->pool, model, &mi) != RSD_OK || mi.slot >= 0 ||
        mi.waiting || mi.preloads)
        return RSD_OK;
    if (rsd_procs_check(f->procs, &f->models[model].spec, why, sizeof why) == RSD_OK) return RSD_OK;
    none.id = 0;
    rsdi_fleet_note(f, model, none, RSD_ERR_FLEET_START, why);
    f->models[model].exit_code = 127;
    return RSD_ERR_FLEET_START;
}

RSD_API int rsd_fleet_acquire(rsd_fleet *f, int model, uint64_t now_ms, void *user,
                              rsd_pool_req_h *req, uint16_t *port) {
    return rsd_fleet_acquire_ex(f, model, 0, now_ms, user, req, port);
}

RSD_API int rsd_fleet_acquire_ex(rsd_fleet *f, int model, int flags, uint64_t now_ms, void *user,
                                 rsd_pool_req_h *req, uint16_t *port) {
    int r, slot = -1;
    if (req) req->id = 0;
    if (port) *port = 0;
    if (!f || !req || model < 0 || model >= f->num_models) return RSD_ERR_ARG;
    if ((r = rsdi_fleet_precheck(f, model)) < 0) return r;
    r = rsd_pool_acquire_ex(f->pool, model, flags, now_ms, user, req, &slot);
    if (r == RSD_OK && port && slot >= 0 && slot < RSD_POOL_MAX_SLOTS) *port = f->slots[slot].port;
    (void)rsdi_fleet_pump(f, now_ms);
    return r;
}

RSD_API int rsd_fleet_release(rsd_fleet *f, rsd_pool_req_h req, uint64_t now_ms) {
    return f ? rsdi_fleet_then(f, rsd_pool_release(f->pool, req, now_ms), now_ms) : RSD_ERR_ARG;
}

/* Removes a queued GRANT/FAIL for req (its host gave up on it); true if one was there. */
RSDI_PRIVATE bool rsdi_fleet_scrub(rsd_fleet *f, rsd_pool_req_h req) {
    uint32_t i;
    bool hit = false;
    if (!req.id) return false;
    for (i = 0; i < f->rq_count; i++) {
        rsdi_fleet_qev *q = &f->rq[(f->rq_head + i) % f->rq_cap];
        if (q->ev.req.id == req.id && q->ev.kind != RSD_FLEET_EV_NONE) {
            q->ev.kind = RSD_FLEET_EV_NONE; /* skipped by next_event */
            hit = true;
        }
    }
    return hit;
}

RSD_API int rsd_fleet_cancel(rsd_fleet *f, rsd_pool_req_h req, uint64_t now_ms) {
    int r;
    bool scrubbed;
    if (!f) return RSD_ERR_ARG;
    r = rsd_pool_cancel(f->pool, req, now_ms);
    scrubbed = rsdi_fleet_scrub(f, req);
    if (r == RSD_ERR_POOL_STALE && scrubbed) r = RSD_OK; /* its FAIL was not pulled yet */
    (void)rsdi_fleet_pump(f, now_ms);
    return r;
}

RSD_API int rsd_fleet_load(rsd_fleet *f, int model, uint64_t now_ms) {
    int r;
    if (!f || model < 0 || model >= f->num_models) return RSD_ERR_ARG;
    if ((r = rsdi_fleet_precheck(f, model)) < 0) return r;
    return rsdi_fleet_then(f, rsd_pool_preload(f->pool, model, now_ms), now_ms);
}

RSD_API int rsd_fleet_stop(rsd_fleet *f, uint64_t now_ms) {
    int r;
    if (!f) return RSD_ERR_ARG;
    f->stopped = true;
    r = rsd_pool_stop(f->pool, now_ms);
    (void)rsdi_fleet_pump(f, now_ms);
    return r;
}

RSD_API bool rsd_fleet_idle(const rsd_fleet *f) {
    int i;
    rsd_proc_h h;
    if (!f) return true;
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++)
        if (f->slots[i].pp.id) return false;
    return rsd_procs_live(f->procs, &h, 1) == 0;
}

/* A starting child that wrote output since the last probe is probed again at once
   (llama-server logs "model loaded" the moment /health turns 200), at most every
   RSD_FLEET_OUTPUT_PROBE_GAP_MS; 0 = nothing to do, else the time it may go. */
RSDI_PRIVATE uint64_t rsdi_fleet_output_probe_at(const rsd_fleet *f, const rsdi_fleet_slot *s) {
    rsd_proc_info info;
    char tail[RSD_FLEET_READY_SCAN_BYTES];
    uint64_t fresh;
    if (!s->pp.id || !s->proc.id || s->told || s->healthy || s->stopping || s->probe.id) return 0;
    if (rsd_procs_query_proc(f->procs, s->proc, &info) != RSD_OK || info.state != RSD_PROC_STARTING ||
        info.out_bytes == s->out_seen)
        return 0;
    /* no gap when the new output (its last RSD_FLEET_READY_SCAN_BYTES) holds that line */
    fresh = info.out_bytes - s->out_seen;
    if (rsd_procs_tail(f->procs, s->proc, 0, tail, fresh < sizeof tail ? (size_t)fresh + 1 : sizeof tail) > 0 &&
        strstr(tail, "model loaded"))
        return s->probe_sent_ms ? s->probe_sent_ms : 1;
    return s->probe_sent_ms + RSD_FLEET_OUTPUT_PROBE_GAP_MS;
}

/* ---- watchdog ---- */
/* Kills the process of slot s (it is READY and broken); gone() tells why and schedules
   its restart. */
RSDI_PRIVATE void rsdi_fleet_wd_kill(rsd_fleet *f, rsdi_fleet_slot *s, const char *why, uint64_t now_ms) {
    if (s->wd_why[0] || s->stopping || !s->proc.id) return;
    (void)RSD_SNPRINTF(s->wd_why, sizeof s->wd_why, "%s", why);
    rsdi_fleet_cancel_probe(f, s);
    rsdi_logf(&f->logger, RSD_LOG_WARN, RSD_LOGITEM_FLEET_CRASHED, RSDI_WHERE, "fleet: %s pid %lld: watchdog: %s; killed",
              rsdi_fleet_model_id(f, s->model), (long long)s->pid, why);
    (void)rsd_procs_kill(f->procs, s->proc, now_ms);
}

/* A READY process due for its health poll gets one (GET health_path). */
RSDI_PRIVATE bool rsdi_fleet_wd_poll(rsd_fleet *f, rsdi_fleet_slot *s, uint64_t now_ms) {
    if (!f->wd_interval || !s->pp.id || !s->ready || s->stopping || s->wd_why[0] || s->probe.id ||
        !s->wd_next_ms || now_ms < s->wd_next_ms)
        return false;
    s->wd_next_ms = now_ms + f->wd_interval;
    return rsdi_fleet_send_get(f, s, f->models[s->model].health_path,
                               f->wd_interval < f->probe_timeout_ms ? f->wd_interval : f->probe_timeout_ms, now_ms);
}

/* The answer to a health poll of READY slot s. */
RSDI_PRIVATE void rsdi_fleet_wd_answer(rsd_fleet *f, rsdi_fleet_slot *s, const rsd_http_event *he, uint64_t now_ms) {
    char why[160];
    if (he->result == RSD_OK && he->status == 200) {
        s->wd_fails = 0;
        if (now_ms - s->ready_ms >= RSD_FLEET_WATCHDOG_STABLE_MS) f->models[s->model].wd_restarts = 0;
        return;
    }
    s->wd_fails++;
    if (s->wd_fails < f->wd_failures) return;
    if (he->result == RSD_OK)
        (void)RSD_SNPRINTF(why, sizeof why, "GET %s answered %d, %u polls in a row", f->models[s->model].health_path,
                       he->status, (unsigned)s->wd_fails);
    else
        (void)RSD_SNPRINTF(why, sizeof why, "GET %s did not answer (%s), %u polls in a row", f->models[s->model].health_path,
                       rsd_result_str(he->result), (unsigned)s->wd_fails);
    rsdi_fleet_wd_kill(f, s, why, now_ms);
}

RSD_API int rsd_fleet_report(rsd_fleet *f, int model, uint16_t port, int http_status, uint64_t now_ms) {
    int i;
    if (!f || model < 0 || model >= f->num_models) return RSD_ERR_ARG;
    if (!f->wd_on) return RSD_OK;
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
        rsdi_fleet_slot *s = &f->slots[i];
        char why[160];
        if (!s->pp.id || s->model != model || s->port != port || !s->ready || s->stopping) continue;
        if (http_status < 500 || http_status > 599 || http_status == 503) {
            s->wd_errors = 0;
            continue;
        }
        if (++s->wd_errors < f->wd_errors) continue;
        (void)RSD_SNPRINTF(why, sizeof why, "%u answers in a row failed with 5xx (the last %d)", (unsigned)s->wd_errors,
                       http_status);
        rsdi_fleet_wd_kill(f, s, why, now_ms);
    }
    return RSD_OK;
}

/* Models whose watchdog restart is due are loaded again. */
RSDI_PRIVATE int rsdi_fleet_wd_restarts(rsd_fleet *f, uint64_t now_ms) {
    int i, n = 0;
    for (i = 0; i < f->num_models; i++) {
        rsdi_fleet_model *m = &f->models[i];
        if (!m->wd_restart_at || now_ms < m->wd_restart_at || f->stopped) continue;
        m->wd_restart_at = 0;
        n++;
        if (rsdi_fleet_precheck(f, i) == RSD_OK) (void)rsd_pool_preload(f->pool, i, now_ms);
    }
    return n;
}

/* Events waiting to be pulled: GRANT/FAIL not withdrawn by a cancel, and the narration. */
RSDI_PRIVATE int rsdi_fleet_waiting(const rsd_fleet *f) {
    uint32_t i, n = f->nq_count;
    for (i = 0; i < f->rq_count; i++) n += f->rq[(f->rq_head + i) % f->rq_cap].ev.kind != RSD_FLEET_EV_NONE;
    return (int)n;
}

RSD_API int rsd_fleet_step(rsd_fleet *f, uint64_t now_ms) {
    int pass, i;
    if (!f) return RSD_ERR_ARG;
    for (pass = 0; pass < RSDI_FLEET_MAX_PASSES; pass++) {
        rsd_proc_event pe;
        rsd_http_event he;
        int work = 0;
        (void)rsd_procs_step(f->procs, now_ms);
        while (rsd_procs_next_event(f->procs, &pe)) {
            rsdi_fleet_slot *s = rsdi_fleet_slot_of_proc(f, pe.proc);
            if (!s) continue; /* e.g. the SPAWN_FAILED of a spawn handled at once */
            work++;
            switch (pe.kind) {
            case RSD_PROC_EV_PROBE: (void)rsdi_fleet_send_probe(f, s, now_ms); break;
            case RSD_PROC_EV_START_TIMEOUT:
                if (!s->told && !s->stopping) {
                    char reason[160];
                    (void)RSD_SNPRINTF(reason, sizeof reason,
                                   "not ready within %llu ms (GET %s never answered 200); stopped",
                                   (unsigned long long)(now_ms - s->started_ms),
                                   f->models[s->model].health_path);
                    rsdi_fleet_note(f, s->model, s->proc, RSD_ERR_FLEET_START, reason);
                    s->told = true;
                    rsdi_fleet_cancel_probe(f, s);
                    (void)rsd_pool_on_started(f->pool, s->pp, false, now_ms);
                }
                break;
            case RSD_PROC_EV_SPAWN_FAILED:
            case RSD_PROC_EV_EXITED:
            case RSD_PROC_EV_STOPPED: rsdi_fleet_gone(f, s, &pe, now_ms); break;
            default: break; /* STUCK: logged by the supervisor */
            }
        }
        for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
            uint64_t at = rsdi_fleet_output_probe_at(f, &f->slots[i]);
            if (at && at <= now_ms && rsdi_fleet_send_probe(f, &f->slots[i], now_ms)) work++;
            if (rsdi_fleet_wd_poll(f, &f->slots[i], now_ms)) work++;
        }
        work += rsdi_fleet_wd_restarts(f, now_ms);
        for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
            rsdi_fleet_slot *s = &f->slots[i];
            if (s->hold_until && s->hold_until <= now_ms) { /* the host took too long */
                s->hold_until = 0;
                (void)rsdi_procs_stop_by(f->procs, s->proc, now_ms, s->kill_by);
                work++;
            }
            if (s->ready_until && s->ready_until <= now_ms) { /* no go from the host: it goes anyway */
                rsdi_logf(&f->logger, RSD_LOG_WARN, RSD_LOGITEM_FLEET_READY, RSDI_WHERE,
                          "fleet: %s: no go within ready_hold_ms (%u ms); it takes requests now",
                          rsdi_fleet_model_id(f, s->model), (unsigned)f->ready_hold_ms);
                rsdi_fleet_ready_on(f, s, now_ms);
                work++;
            }
        }
        (void)rsd_http_client_step(f->client, now_ms);
        while (rsd_http_next_event(f->client, &he)) {
            rsdi_fleet_slot *s = NULL;
            for (i = 0; i < RSD_POOL_MAX_SLOTS && he.req.id; i++)
                if (f->slots[i].pp.id && f->slots[i].probe.id == he.req.id) s = &f->slots[i];
            if (!s) continue;
            s->probe.id = 0;
            work++;
            rsdi_fleet_probe_log(f, s, &he);
            if (s->ready) { /* a watchdog poll */
                rsdi_fleet_wd_answer(f, s, &he, now_ms);
            } else if (s->healthy) { /* the /props answer, whatever it says */
                rsdi_fleet_ready(f, s, &he, now_ms);
            } else if (he.result == RSD_OK && he.status == 200 && !s->told && !s->stopping) {
                s->healthy = true; /* its slot count before the first grant: -np as we gave it, or asked */
                if (rsdi_fleet_known_slots(&f->models[s->model].spec) > 0)
                    rsdi_fleet_ready(f, s, NULL, now_ms);
                else if (!rsdi_fleet_get(f, s, "/props", now_ms)) rsdi_fleet_ready(f, s, NULL, now_ms);
            }
            /* 503 (loading), refused, timeout: wait for the next PROBE or output */
        }
        work += rsdi_fleet_pump(f, now_ms);
        if (!work) break;
    }
    return rsdi_fleet_waiting(f);
}

/* Model's process whose stop (ready: whose ready) is held, or NULL. */
RSDI_PRIVATE rsdi_fleet_slot *rsdi_fleet_held(rsd_fleet *f, int model, bool ready) {
    int i;
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
        rsdi_fleet_slot *s = &f->slots[i];
        if (s->pp.id && s->model == model && (ready ? s->ready_until : s->hold_until)) return s;
    }
    return NULL;
}

RSD_API int rsd_fleet_stop_go(rsd_fleet *f, int model, uint64_t now_ms) {
    rsdi_fleet_slot *s;
    if (!f || model < 0 || model >= f->num_models) return RSD_ERR_ARG;
    if (!(s = rsdi_fleet_held(f, model, false))) return RSD_ERR_NOT_FOUND;
    s->hold_until = 0;
    (void)rsdi_procs_stop_by(f->procs, s->proc, now_ms, s->kill_by);
    return RSD_OK;
}

RSD_API int rsd_fleet_ready_go(rsd_fleet *f, int model, uint64_t now_ms) {
    rsdi_fleet_slot *s;
    if (!f || model < 0 || model >= f->num_models) return RSD_ERR_ARG;
    if (!(s = rsdi_fleet_held(f, model, true))) return RSD_ERR_NOT_FOUND;
    rsdi_fleet_ready_on(f, s, now_ms);
    return rsdi_fleet_then(f, RSD_OK, now_ms);
}

RSD_API int rsd_fleet_ready_restart(rsd_fleet *f, int model, const char *why, uint64_t now_ms) {
    rsdi_fleet_slot *s;
    if (!f || model < 0 || model >= f->num_models) return RSD_ERR_ARG;
    if (!(s = rsdi_fleet_held(f, model, true))) return RSD_ERR_NOT_FOUND;
    s->ready_until = 0;
    (void)RSD_SNPRINTF(s->wd_why, sizeof s->wd_why, "%s", why && why[0] ? why : "the host gave its ready up");
    rsdi_fleet_cancel_probe(f, s);
    rsdi_logf(&f->logger, RSD_LOG_WARN, RSD_LOGITEM_FLEET_CRASHED, RSDI_WHERE, "fleet: %s pid %lld: %s; killed",
              rsdi_fleet_model_id(f, model), (long long)s->pid, s->wd_why);
    (void)rsd_procs_kill(f->procs, s->proc, now_ms);
    /* its exit (rsdi_fleet_gone) starts the model again for its waiters, or fails them */
    return rsdi_fleet_then(f, RSD_OK, now_ms);
}

RSD_API int rsd_fleet_pollfds(const rsd_fleet *f, rsd_pollfd *out, int cap) {
    rsd_pollfd pf[2 * RSD_PROCS_MAX];
    int n, k, w, c;
    if (!f || cap < 0 || (!out && cap > 0)) return RSD_ERR_ARG;
    n = rsd_procs_pollfds(f->procs, pf, 2 * RSD_PROCS_MAX);
    if (n < 0) n = 0;
    for (k = 0, w = 0; k < n && w < cap; k++, w++) out[w] = pf[k];
    c = rsd_http_client_pollfds(f->client, w < cap ? out + w : NULL, cap - w);
    if (c < 0) c = 0;
    return n + c;
}

/* Drops the scrubbed events (kind NONE) at the head of the GRANT/FAIL queue. */
RSDI_PRIVATE void rsdi_fleet_skip_scrubbed(rsd_fleet *f) {
    while (f->rq_count && f->rq[f->rq_head].ev.kind == RSD_FLEET_EV_NONE) {
        f->rq_head = (f->rq_head + 1) % f->rq_cap;
        f->rq_count--;
    }
}

RSD_API uint64_t rsd_fleet_next_deadline(const rsd_fleet *f) {
    uint64_t d, x;
    int i;
    if (!f) return RSD_NO_DEADLINE;
    if (rsdi_fleet_waiting(f) > 0) return 0;
    d = rsd_procs_next_deadline(f->procs);
    x = rsd_pool_next_deadline(f->pool);
    if (x < d) d = x;
    x = rsd_http_client_next_deadline(f->client);
    if (x < d) d = x;
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
        const rsdi_fleet_slot *s = &f->slots[i];
        x = rsdi_fleet_output_probe_at(f, &f->slots[i]);
        if (x && x < d) d = x;
        if (s->hold_until && s->hold_until < d) d = s->hold_until;
        if (s->ready_until && s->ready_until < d) d = s->ready_until;
        if (f->wd_interval && s->pp.id && s->ready && !s->stopping && !s->wd_why[0] && !s->probe.id &&
            s->wd_next_ms && s->wd_next_ms < d)
            d = s->wd_next_ms;
    }
    for (i = 0; i < f->num_models; i++)
        if (f->models[i].wd_restart_at && f->models[i].wd_restart_at < d) d = f->models[i].wd_restart_at;
    return d;
}

RSD_API bool rsd_fleet_next_event(rsd_fleet *f, rsd_fleet_event *ev) {
    rsdi_fleet_qev *q;
    if (!f || !ev) return false;
    rsdi_fleet_skip_scrubbed(f);
    if (f->rq_count && (!f->nq_count || f->rq[f->rq_head].seq < f->nq[f->nq_head].seq)) {
        q = &f->rq[f->rq_head];
        f->rq_head = (f->rq_head + 1) % f->rq_cap;
        f->rq_count--;
    } else if (f->nq_count) {
        q = &f->nq[f->nq_head];
        f->nq_head = (f->nq_head + 1) % RSDI_FLEET_NARR_EVENTS;
        f->nq_count--;
    } else {
        return false;
    }
    *ev = q->ev;
    f->out_msg[0] = '\0';
    if (q->msg_model >= 0 && f->models[q->msg_model].msg_gen == q->msg_gen) {
        memcpy(f->out_msg, f->models[q->msg_model].msg, sizeof f->out_msg);
    } else if (ev->kind == RSD_FLEET_EV_FAIL || ev->kind == RSD_FLEET_EV_CRASHED) {
        (void)RSD_SNPRINTF(f->out_msg, sizeof f->out_msg, "model %s: %s",
                       ev->model_id ? ev->model_id : "?", rsd_result_str(ev->result));
    }
    ev->message = f->out_msg[0] ? f->out_msg : NULL;
    return true;
}

RSD_API int rsd_fleet_query_model(const rsd_fleet *f, int model, rsd_fleet_model_info *info) {
    int i;
    if (!info) return RSD_ERR_ARG;
    memset(info, 0, sizeof *info);
    info->idle_deadline_ms = RSD_NO_DEADLINE;
    if (!f || model < 0 || model >= f->num_models) return RSD_ERR_ARG;
    if (rsd_pool_query_model(f->pool, model, &info->pool) != RSD_OK) return RSD_ERR_ARG;
    info->last_used_ms = info->pool.last_used_ms;
    info->last_result = f->models[model].last_result;
    info->exit_code = f->models[model].exit_code;
    info->last_error = f->models[model].last_result ? f->models[model].msg : NULL;
    info->retry_at_ms = info->pool.retry_at_ms;
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
        const rsdi_fleet_slot *s = &f->slots[i];
        if (!s->pp.id || s->model != model) continue;
        if (s->stopping && i != info->pool.slot) continue; /* an old process on its way out */
        info->pid = s->pid;
        info->port = s->port;
        info->started_ms = s->started_ms;
        info->ready_ms = s->ready_ms;
        break;
    }
    if (info->pool.slot >= 0) {
        rsd_pool_info st;
        rsd_pool_query(f->pool, &st);
        info->idle_deadline_ms = st.slots[info->pool.slot].idle_deadline_ms;
    }
    return RSD_OK;
}

RSD_API void rsd_fleet_query(const rsd_fleet *f, rsd_fleet_info *info) {
    int i;
    if (!info) return;
    memset(info, 0, sizeof *info);
    rsd_pool_query(f ? f->pool : NULL, &info->pool);
    if (!f) return;
    info->models = f->num_models;
    for (i = 0; i < RSD_POOL_MAX_SLOTS; i++) {
        const rsdi_fleet_slot *s = &f->slots[i];
        if (!s->pp.id) continue;
        info->processes++;
        info->stopping += s->stopping;
        info->held_stops += s->stopping && s->hold_until != 0;
        info->held_readies += s->ready_until != 0;
        info->ready += s->ready && !s->stopping;
        info->starting += !s->ready && !s->stopping;
    }
    info->events_waiting = rsdi_fleet_waiting(f);
    info->events_dropped = f->dropped;
    info->stopped = f->stopped;
}

RSD_API rsd_pool *rsd_fleet_pool(rsd_fleet *f) { return f ? f->pool : NULL; }
RSD_API rsd_procs *rsd_fleet_procs(rsd_fleet *f) { return f ? f->procs : NULL; }
#endif /* RSD_NO_PROCESS */
/* ==== fleet end =========================================================== */

/* ==== >>devmem: the device memory probe =================================== */
#ifndef RSD_NO_DEVMEM
#if !defined(_WIN32)
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>
#endif

/* The NVML ABI this probe uses (nvml.h, stable since the v2 entry points): nvmlMemory_t
   and the v1 process record that nvmlDeviceGetComputeRunningProcesses fills. */
typedef struct rsdi_nvml_memory { unsigned long long total, free_, used; } rsdi_nvml_memory;
typedef struct rsdi_nvml_proc { unsigned int pid; unsigned long long used; } rsdi_nvml_proc;
#define RSDI_NVML_NOT_AVAILABLE (~0ull) /* usedGpuMemory under WDDM or without rights */
enum { RSDI_NVML_PROCS = 64 };
typedef int (*rsdi_nvml_void_fn)(void);
typedef int (*rsdi_nvml_count_fn)(unsigned int *);
typedef int (*rsdi_nvml_handle_fn)(unsigned int, void **);
typedef int (*rsdi_nvml_mem_fn)(void *, rsdi_nvml_memory *);
typedef int (*rsdi_nvml_procs_fn)(void *, unsigned int *, rsdi_nvml_proc *);

struct rsd_devmem {
    rsd_allocator alloc;
    char sys_root[RSD_DEVMEM_PATH_MAX];
    char proc_root[RSD_DEVMEM_PATH_MAX];
    void *lib;                       /* dlopen handle / HMODULE; NULL when NVML is not in use */
    rsdi_nvml_void_fn nv_shutdown;
    rsdi_nvml_count_fn nv_count;
    rsdi_nvml_handle_fn nv_handle;
    rsdi_nvml_mem_fn nv_mem;
    rsdi_nvml_procs_fn nv_procs;
    bool tegra;                      /* NVIDIA Tegra: the GPU's memory is the host's */
    char nvml_status[192];
    char buf[RSD_DEVMEM_FILE_MAX + 1];
};

RSD_API const char *rsd_devmem_pool_str(int pool) {
    return pool == RSD_DEVMEM_VRAM ? "vram" : pool == RSD_DEVMEM_HOST ? "host/unified" : "?";
}

RSD_API int rsd_devmem_parse_u64(const char *text, size_t len, uint64_t *out) {
    size_t i = 0;
    uint64_t v = 0;
    if (!out || (!text && len)) return RSD_ERR_ARG;
    *out = 0;
    if (i == len || text[i] < '0' || text[i] > '9') return RSD_ERR_PAYLOAD;
    for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
        unsigned d = (unsigned)(text[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return RSD_ERR_OVERFLOW;
        v = v * 10 + d;
    }
    for (; i < len; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r') return RSD_ERR_PAYLOAD;
    *out = v;
    return RSD_OK;
}

RSD_API int rsd_devmem_parse_meminfo(const char *text, size_t len, const char *key, uint64_t *bytes) {
    size_t kl, i = 0;
    if (!bytes || !key || !*key || (!text && len)) return RSD_ERR_ARG;
    *bytes = 0;
    kl = strlen(key);
    while (i < len) { /* one line per turn: "Key:<spaces>N[ kB]" */
        size_t e = i, j;
        while (e < len && text[e] != '\n') e++;
        if (e - i > kl && !memcmp(text + i, key, kl) && text[i + kl] == ':') {
            uint64_t v = 0, mul = 1;
            size_t ds;
            j = i + kl + 1;
            while (j < e && (text[j] == ' ' || text[j] == '\t')) j++;
            ds = j;
            while (j < e && text[j] >= '0' && text[j] <= '9') j++;
            {
                int r = rsd_devmem_parse_u64(text + ds, j - ds, &v);
                if (r != RSD_OK) return j == ds ? RSD_ERR_PAYLOAD : r;
            }
            while (j < e && (text[j] == ' ' || text[j] == '\t')) j++;
            if (e - j >= 2 && (text[j] == 'k' || text[j] == 'K') && text[j + 1] == 'B') { mul = 1024; j += 2; }
            else if (e - j >= 3 && text[j + 1] == 'i' && text[j + 2] == 'B' && (text[j] == 'K' || text[j] == 'M')) {
                mul = text[j] == 'K' ? 1024 : 1024 * 1024; /* drm fdinfo's KiB / MiB */
                j += 3;
            }
            while (j < e && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r')) j++;
            if (j != e) return RSD_ERR_PAYLOAD;
            if (v > UINT64_MAX / mul) return RSD_ERR_OVERFLOW;
            *bytes = v * mul;
            return RSD_OK;
        }
        i = e + 1;
    }
    return RSD_ERR_NOT_FOUND;
}

/* Reads root/rel into dm->buf (NUL-terminated); RSD_OK, RSD_ERR_NOT_FOUND (absent or
   unreadable), RSD_ERR_TOO_LARGE (longer than RSD_DEVMEM_FILE_MAX bytes). */
RSDI_PRIVATE int rsdi_dm_read(rsd_devmem *dm, const char *root, const char *rel, size_t *len) {
    char path[RSD_DEVMEM_PATH_MAX + 96];
    size_t n = 0;
    int w = snprintf(path, sizeof path, "%s/%s", root, rel);
    *len = 0;
    dm->buf[0] = 0;
    if (w < 0 || (size_t)w >= sizeof path) return RSD_ERR_NOT_FOUND;
#if defined(_WIN32)
    {
        FILE *f = fopen(path, "rb");
        if (!f) return RSD_ERR_NOT_FOUND;
        n = fread(dm->buf, 1, sizeof dm->buf, f);
        fclose(f);
    }
#else
    {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return RSD_ERR_NOT_FOUND;
        while (n < sizeof dm->buf) {
            ssize_t r = read(fd, dm->buf + n, sizeof dm->buf - n);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                if (r < 0) n = 0;
                break;
            }
            n += (size_t)r;
        }
        close(fd);
    }
#endif
    if (n > RSD_DEVMEM_FILE_MAX) return RSD_ERR_TOO_LARGE;
    dm->buf[n] = 0;
    *len = n;
    return RSD_OK;
}

/* One number file under sys_root; false when absent or not a clean number. */
RSDI_PRIVATE bool rsdi_dm_sys_u64(rsd_devmem *dm, const char *rel, uint64_t *v) {
    size_t n;
    *v = 0;
    return rsdi_dm_read(dm, dm->sys_root, rel, &n) == RSD_OK && rsd_devmem_parse_u64(dm->buf, n, v) == RSD_OK;
}

RSDI_PRIVATE void rsdi_dm_set(rsd_devmem_dev *d, const char *name, int pool, int source, uint64_t total,
                              uint64_t used) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->pool = pool;
    d->source = source;
    if (used > total) used = total;
    d->total_bytes = total;
    d->used_bytes = used;
    d->free_bytes = total - used;
    d->others_bytes = used;
}

RSDI_PRIVATE void rsdi_dm_own(rsd_devmem_dev *d, uint64_t own) {
    if (own > d->used_bytes) own = d->used_bytes;
    d->own_known = true;
    d->own_bytes = own;
    d->others_bytes = d->used_bytes - own;
}

RSDI_PRIVATE void *rsdi_dm_sym(void *lib, const char *name) {
#if defined(_WIN32)
    FARPROC p = GetProcAddress((HMODULE)lib, name);
    void *v;
    memcpy(&v, &p, sizeof v < sizeof p ? sizeof v : sizeof p);
    return v;
#else
    return dlsym(lib, name);
#endif
}

RSDI_PRIVATE void rsdi_dm_close_lib(rsd_devmem *dm) {
    if (!dm->lib) return;
#if defined(_WIN32)
    FreeLibrary((HMODULE)dm->lib);
#else
    dlclose(dm->lib);
#endif
    dm->lib = NULL;
}

/* Loads NVML from path and initialises it; on failure says why in nvml_status. */
RSDI_PRIVATE void rsdi_dm_load_nvml(rsd_devmem *dm, const char *path) {
    void *init, *p[5];
    int r, i;
    const char *names[5] = {"nvmlShutdown", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
                            "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetComputeRunningProcesses"};
    rsdi_nvml_void_fn init_fn;
#if defined(_WIN32)
    dm->lib = (void *)LoadLibraryA(path);
    if (!dm->lib) {
        snprintf(dm->nvml_status, sizeof dm->nvml_status, "%s: not loaded (error %lu)", path,
                 (unsigned long)GetLastError());
        return;
    }
#else
    dm->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dm->lib) {
        const char *e = dlerror();
        snprintf(dm->nvml_status, sizeof dm->nvml_status, "%s: not loaded (%s)", path, e ? e : "dlopen failed");
        return;
    }
#endif
    init = rsdi_dm_sym(dm->lib, "nvmlInit_v2");
    for (i = 0; i < 5; i++) {
        p[i] = rsdi_dm_sym(dm->lib, names[i]);
        if (!p[i] || !init) {
            snprintf(dm->nvml_status, sizeof dm->nvml_status, "%s: no %s", path, init ? names[i] : "nvmlInit_v2");
            rsdi_dm_close_lib(dm);
            return;
        }
    }
    /* object pointer -> function pointer through memcpy (ISO C has no cast for it) */
    memcpy(&init_fn, &init, sizeof init_fn);
    memcpy(&dm->nv_shutdown, &p[0], sizeof dm->nv_shutdown);
    memcpy(&dm->nv_count, &p[1], sizeof dm->nv_count);
    memcpy(&dm->nv_handle, &p[2], sizeof dm->nv_handle);
    memcpy(&dm->nv_mem, &p[3], sizeof dm->nv_mem);
    memcpy(&dm->nv_procs, &p[4], sizeof dm->nv_procs);
    if ((r = init_fn()) != 0) {
        snprintf(dm->nvml_status, sizeof dm->nvml_status, "%s: nvmlInit_v2 failed (NVML error %d)", path, r);
        rsdi_dm_close_lib(dm);
        return;
    }
    dm->nvml_status[0] = 0;
}

/* rsd_devmem_create's checks: fills in d's defaults; the NVML library's path, or NULL for a
   desc create refuses. */
RSDI_PRIVATE const char *rsdi_dm_plan(rsd_devmem_desc *d) {
    const char *nv;
    if (rsdi_allocator_check(&d->allocator) != RSD_OK) return NULL;
    if (!d->sys_root) d->sys_root = "/sys";
    if (!d->proc_root) d->proc_root = "/proc";
    nv = d->nvml_path ? d->nvml_path : d->ignore_env ? NULL : getenv("RESIDENCY_NVML");
#if defined(_WIN32)
    if (!nv) nv = "nvml.dll";
#else
    if (!nv) nv = "libnvidia-ml.so.1";
#endif
    if (strlen(d->sys_root) >= RSD_DEVMEM_PATH_MAX || strlen(d->proc_root) >= RSD_DEVMEM_PATH_MAX ||
        strlen(nv) >= RSD_DEVMEM_PATH_MAX)
        return NULL;
    return nv;
}

RSD_API size_t rsd_devmem_footprint(const rsd_devmem_desc *desc) {
    rsd_devmem_desc d;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    return rsdi_dm_plan(&d) ? sizeof(rsd_devmem) : 0;
}

RSD_API rsd_devmem *rsd_devmem_create(const rsd_devmem_desc *desc) {
    rsd_devmem_desc d;
    rsd_devmem *dm;
    const char *nv;
    size_t n;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (!(nv = rsdi_dm_plan(&d))) return NULL;
    dm = (rsd_devmem *)rsdi_malloc(&d.allocator, sizeof *dm);
    if (!dm) return NULL;
    memset(dm, 0, sizeof *dm);
    dm->alloc = d.allocator;
    memcpy(dm->sys_root, d.sys_root, strlen(d.sys_root) + 1);
    memcpy(dm->proc_root, d.proc_root, strlen(d.proc_root) + 1);
    /* Tegra: the device tree's compatible list (NUL-separated) names "nvidia,tegra..." */
    if (rsdi_dm_read(dm, dm->sys_root, "firmware/devicetree/base/compatible", &n) == RSD_OK) {
        size_t i;
        for (i = 0; i + 12 <= n && !dm->tegra; i++) dm->tegra = !memcmp(dm->buf + i, "nvidia,tegra", 12);
    }
    if (!*nv) snprintf(dm->nvml_status, sizeof dm->nvml_status, "NVML not used (empty library path)");
    else if (dm->tegra) snprintf(dm->nvml_status, sizeof dm->nvml_status, "NVML not used: Tegra shares host memory");
    else rsdi_dm_load_nvml(dm, nv);
    return dm;
}

RSD_API void rsd_devmem_destroy(rsd_devmem *dm) {
    rsd_allocator a;
    if (!dm) return;
    if (dm->lib && dm->nv_shutdown) dm->nv_shutdown();
    rsdi_dm_close_lib(dm);
    a = dm->alloc;
    rsdi_free(&a, dm);
}

RSD_API const char *rsd_devmem_nvml_status(const rsd_devmem *dm) {
    return !dm ? "no probe" : dm->nvml_status;
}

RSDI_PRIVATE bool rsdi_dm_is_own(const int64_t *pids, int n, int64_t pid) {
    int i;
    for (i = 0; i < n; i++)
        if (pids[i] == pid) return true;
    return false;
}

/* NVML devices; returns how many were written. */
RSDI_PRIVATE int rsdi_dm_read_nvml(rsd_devmem *dm, const int64_t *pids, int np, rsd_devmem_dev *out, int cap) {
    unsigned int count = 0, i;
    int k = 0;
    if (!dm->lib || dm->nv_count(&count) != 0) return 0;
    for (i = 0; i < count && k < cap; i++) {
        void *h = NULL;
        rsdi_nvml_memory m;
        rsdi_nvml_proc pr[RSDI_NVML_PROCS];
        unsigned int np_ = RSDI_NVML_PROCS, j;
        char name[24];
        memset(&m, 0, sizeof m);
        if (dm->nv_handle(i, &h) != 0 || dm->nv_mem(h, &m) != 0) continue; /* e.g. NOT_SUPPORTED */
        snprintf(name, sizeof name, "nvml%u", i);
        rsdi_dm_set(&out[k], name, RSD_DEVMEM_VRAM, RSD_DEVMEM_NVML, m.total, m.used);
        if (dm->nv_procs(h, &np_, pr) == 0 && np_ <= RSDI_NVML_PROCS) {
            uint64_t own = 0;
            bool known = true;
            for (j = 0; j < np_; j++) {
                if (!rsdi_dm_is_own(pids, np, (int64_t)pr[j].pid)) continue;
                if (pr[j].used == RSDI_NVML_NOT_AVAILABLE) known = false;
                else own += pr[j].used < out[k].used_bytes - own ? pr[j].used : out[k].used_bytes - own;
            }
            if (known) rsdi_dm_own(&out[k], own);
        }
        k++;
    }
    return k;
}

#if !defined(_WIN32)
enum { RSDI_DM_MAX_FDS = 4096, RSDI_DM_MAX_CLIENTS = 64 };
/* VRAM our processes hold on the card whose PCI address is pdev, from the DRM usage
   stats in PROC/PID/fdinfo/FD (drm-pdev, drm-client-id, drm-memory-vram or
   drm-resident-vram); a client open through several descriptors counts once. Returns
   how many DRM clients of that card were found (0: the figure says nothing). */
RSDI_PRIVATE int rsdi_dm_fdinfo_vram(rsd_devmem *dm, const int64_t *pids, int np, const char *pdev, uint64_t *own) {
    uint64_t seen[RSDI_DM_MAX_CLIENTS];
    int ns = 0, i, found = 0;
    size_t pl = strlen(pdev);
    *own = 0;
    for (i = 0; i < np; i++) {
        char rel[64], dir[RSD_DEVMEM_PATH_MAX + 64];
        DIR *d;
        struct dirent *de;
        int nfd = 0;
        if (pids[i] <= 0) continue;
        snprintf(rel, sizeof rel, "%lld/fdinfo", (long long)pids[i]);
        snprintf(dir, sizeof dir, "%s/%s", dm->proc_root, rel);
        if (!(d = opendir(dir))) continue; /* gone */
        while ((de = readdir(d)) != NULL && nfd++ < RSDI_DM_MAX_FDS) {
            char frel[64 + 256];
            const char *p;
            size_t n;
            uint64_t id, v;
            int k;
            bool dup = false;
            if (de->d_name[0] == '.' || strlen(de->d_name) > 32) continue;
            snprintf(frel, sizeof frel, "%s/%s", rel, de->d_name);
            if (rsdi_dm_read(dm, dm->proc_root, frel, &n) != RSD_OK) continue;
            /* drm-pdev:<blanks>0000:03:00.0 */
            p = strstr(dm->buf, "\ndrm-pdev:");
            if (!p) continue;
            p += 10;
            while (*p == ' ' || *p == '\t') p++;
            if (strncmp(p, pdev, pl) || (p[pl] != '\n' && p[pl] != 0 && p[pl] != ' ')) continue;
            if (rsd_devmem_parse_meminfo(dm->buf, n, "drm-client-id", &id) != RSD_OK) continue;
            for (k = 0; k < ns; k++) dup = dup || seen[k] == id;
            if (dup) continue;
            if (ns < RSDI_DM_MAX_CLIENTS) seen[ns++] = id;
            found++;
            if (rsd_devmem_parse_meminfo(dm->buf, n, "drm-memory-vram", &v) == RSD_OK ||
                rsd_devmem_parse_meminfo(dm->buf, n, "drm-resident-vram", &v) == RSD_OK)
                *own = v > UINT64_MAX - *own ? UINT64_MAX : *own + v;
        }
        closedir(d);
    }
    return found;
}
#endif

RSD_API int rsd_devmem_read(rsd_devmem *dm, const int64_t *own_pids, int n_pids, rsd_devmem_dev *out, int cap) {
    int k, card;
    uint64_t apu_total = 0, apu_used = 0;
    bool apu = false;
    if (!dm || !out || cap < 0 || n_pids < 0 || n_pids > RSD_DEVMEM_MAX_PIDS || (n_pids && !own_pids))
        return RSD_ERR_ARG;
    if (cap > RSD_DEVMEM_MAX_DEVICES) cap = RSD_DEVMEM_MAX_DEVICES;
    k = rsdi_dm_read_nvml(dm, own_pids, n_pids, out, cap);
    /* amdgpu: a card whose VRAM has a vendor (mem_info_vram_vendor) is discrete; one
       without it, or without VRAM files at all but with a GTT, is an APU, whose
       carve-out is host memory. */
    for (card = 0; card < RSD_DEVMEM_MAX_DEVICES && k < cap; card++) {
        char rel[96], name[24];
        uint64_t vt, vu, gt, gu;
        bool has_v, has_g, vendor;
        size_t n;
        snprintf(rel, sizeof rel, "class/drm/card%d/device/mem_info_vram_total", card);
        has_v = rsdi_dm_sys_u64(dm, rel, &vt);
        snprintf(rel, sizeof rel, "class/drm/card%d/device/mem_info_vram_used", card);
        has_v = rsdi_dm_sys_u64(dm, rel, &vu) && has_v;
        snprintf(rel, sizeof rel, "class/drm/card%d/device/mem_info_gtt_total", card);
        has_g = rsdi_dm_sys_u64(dm, rel, &gt);
        snprintf(rel, sizeof rel, "class/drm/card%d/device/mem_info_gtt_used", card);
        has_g = rsdi_dm_sys_u64(dm, rel, &gu) && has_g;
        if (!has_v && !has_g) continue;
        snprintf(rel, sizeof rel, "class/drm/card%d/device/mem_info_vram_vendor", card);
        vendor = rsdi_dm_read(dm, dm->sys_root, rel, &n) == RSD_OK && n > 0;
        snprintf(name, sizeof name, "card%d", card);
        if (has_v && vendor) {
            rsdi_dm_set(&out[k], name, RSD_DEVMEM_VRAM, RSD_DEVMEM_AMDGPU, vt, vu);
#if !defined(_WIN32)
            if (n_pids > 0) { /* the card's PCI address: its device link's last component */
                char link[RSD_DEVMEM_PATH_MAX + 64], target[256];
                ssize_t tl;
                snprintf(link, sizeof link, "%s/class/drm/card%d/device", dm->sys_root, card);
                tl = readlink(link, target, sizeof target - 1);
                if (tl > 0) {
                    const char *pdev;
                    uint64_t own;
                    target[tl] = 0;
                    pdev = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
                    if (*pdev && rsdi_dm_fdinfo_vram(dm, own_pids, n_pids, pdev, &own) > 0) rsdi_dm_own(&out[k], own);
                }
            }
#endif
        } else {
            if (!has_v) vt = vu = 0;
            rsdi_dm_set(&out[k], name, RSD_DEVMEM_HOST, RSD_DEVMEM_AMDGPU, vt, vu);
            out[k].unified = true;
            apu = true;
            apu_total = vt > UINT64_MAX - apu_total ? UINT64_MAX : apu_total + vt;
            apu_used = vu > UINT64_MAX - apu_used ? UINT64_MAX : apu_used + vu;
        }
        if (has_g) {
            out[k].gtt_total_bytes = gt;
            out[k].gtt_used_bytes = gu < gt ? gu : gt;
        }
        k++;
    }
    if (k < cap) { /* host memory; on a Tegra or beside an APU, the GPU's pool too */
#if defined(_WIN32)
        MEMORYSTATUSEX ms;
        memset(&ms, 0, sizeof ms);
        ms.dwLength = sizeof ms;
        if (GlobalMemoryStatusEx(&ms)) {
            rsdi_dm_set(&out[k], "host", RSD_DEVMEM_HOST, RSD_DEVMEM_MEMINFO, ms.ullTotalPhys,
                        ms.ullTotalPhys - ms.ullAvailPhys);
            out[k].unified = apu;
            k++;
        }
#else
        size_t n;
        uint64_t total, avail;
        if (rsdi_dm_read(dm, dm->proc_root, "meminfo", &n) == RSD_OK &&
            rsd_devmem_parse_meminfo(dm->buf, n, "MemTotal", &total) == RSD_OK &&
            (rsd_devmem_parse_meminfo(dm->buf, n, "MemAvailable", &avail) == RSD_OK ||
             rsd_devmem_parse_meminfo(dm->buf, n, "MemFree", &avail) == RSD_OK)) {
            uint64_t own = 0;
            int i;
            if (avail > total) avail = total + 0;
            /* an APU's carve-out is host memory the kernel does not count in MemTotal */
            rsdi_dm_set(&out[k], "host", RSD_DEVMEM_HOST, dm->tegra ? RSD_DEVMEM_TEGRA : RSD_DEVMEM_MEMINFO,
                        apu_total > UINT64_MAX - total ? UINT64_MAX : total + apu_total,
                        apu_used > UINT64_MAX - (total - avail) ? UINT64_MAX : total - avail + apu_used);
            out[k].unified = dm->tegra || apu;
            for (i = 0; i < n_pids; i++) { /* resident set of each own process; gone = 0 */
                char rel[48];
                uint64_t rss;
                if (own_pids[i] <= 0) continue;
                snprintf(rel, sizeof rel, "%lld/status", (long long)own_pids[i]);
                if (rsdi_dm_read(dm, dm->proc_root, rel, &n) == RSD_OK &&
                    rsd_devmem_parse_meminfo(dm->buf, n, "VmRSS", &rss) == RSD_OK)
                    own = rss > UINT64_MAX - own ? UINT64_MAX : own + rss;
            }
            rsdi_dm_own(&out[k], own);
            k++;
        }
#endif
    }
    return k;
}

RSD_API int rsd_devmem_pick(const rsd_devmem_dev *devs, int n, rsd_devmem_dev *out) {
    int i, nv = 0;
    if (!out || n < 0 || (n && !devs)) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    for (i = 0; i < n; i++) {
        const rsd_devmem_dev *d = &devs[i];
        if (d->pool != RSD_DEVMEM_VRAM) continue;
        if (!nv++) {
            *out = *d;
            out->own_known = true;
            out->total_bytes = out->used_bytes = out->free_bytes = out->own_bytes = out->others_bytes = 0;
            snprintf(out->name, sizeof out->name, "%s", d->name);
        } else {
            snprintf(out->name, sizeof out->name, "vram x%d", nv);
        }
#define RSDI_DM_ADD(f) out->f = d->f > UINT64_MAX - out->f ? UINT64_MAX : out->f + d->f
        RSDI_DM_ADD(total_bytes);
        RSDI_DM_ADD(used_bytes);
        RSDI_DM_ADD(free_bytes);
        RSDI_DM_ADD(own_bytes);
        RSDI_DM_ADD(others_bytes);
#undef RSDI_DM_ADD
        out->own_known = out->own_known && d->own_known;
    }
    if (nv) return RSD_OK;
    for (i = 0; i < n; i++)
        if (devs[i].source == RSD_DEVMEM_MEMINFO || devs[i].source == RSD_DEVMEM_TEGRA) {
            *out = devs[i];
            return RSD_OK;
        }
    return RSD_ERR_NOT_FOUND;
}
#endif /* RSD_NO_DEVMEM */
/* ==== devmem end ========================================================== */
/* ==== >>gguf_file ========================================================= */
#ifndef RSD_NO_GGUF
RSD_API int rsd_gguf_read_file(rsd_gguf *g, const char *path) {
    unsigned char buf[16384];
    FILE *f;
    int r = RSD_PENDING, e;
    if (!g || !path) return RSD_ERR_ARG;
    if (g->err) return g->err;
    if ((f = fopen(path, "rb")) == NULL) {
        e = errno;
        RSD_SNPRINTF(g->msg, sizeof g->msg, "cannot open %s: %s", path, strerror(e));
        return g->err = e == ENOENT ? RSD_ERR_NOT_FOUND : RSD_ERR_IO;
    }
    while (r == RSD_PENDING) {
        size_t n = fread(buf, 1, sizeof buf, f);
        if (n == 0) {
            if (ferror(f)) {
                RSD_SNPRINTF(g->msg, sizeof g->msg, "cannot read %s at byte %llu", path, (unsigned long long)g->pos);
                r = g->err = RSD_ERR_IO;
            } else {
                r = rsd_gguf_end(g);
            }
            break;
        }
        r = rsd_gguf_feed(g, buf, n);
    }
    fclose(f);
    return r;
}
#endif
/* ==== gguf_file end ======================================================= */

#endif /* RESIDENCY_HTTP_IMPLEMENTATION */
