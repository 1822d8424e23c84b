/* residency.h -- keep the right LLM models resident on local inference servers.
   v0.1.0 -- MIT license (see end of file).

   DO THIS
       #define RESIDENCY_IMPLEMENTATION
       #include "residency.h"        (or "residency_http.h", which includes this one)
   in *one* C or C++ file, before any system header, to create the implementation.
   Every other file includes the header(s) without the define.

   VERSION
       RSD_VERSION_STRING "0.1.0" (RSD_VERSION_MAJOR, _MINOR, _PATCH): this header's
       version, the one that `rsd-serve --version`, `rsd-ensure --version`, residency.pc
       and the CMake package give. `make install` puts both headers in include/residency/.

   residency.h is the core: platform-free, libc only, no I/O. residency_http.h is
   the I/O shell (POSIX sockets, optional mbedTLS) that drives the core.

   CONFIGURATION MACROS (define before including, in the implementation file)
       RESIDENCY_IMPLEMENTATION  instantiate the implementation(s) in this TU
       RSD_STATIC                make every function static (private copy per TU)
       RSD_DLL                   __declspec(dllexport/dllimport) on Windows
       RSD_API                   override the declaration prefix entirely
       RSD_DEFAULT_ALLOC(sz,u)   default allocator (default: malloc(sz))
       RSD_DEFAULT_FREE(p,u)     default free (default: free(p)); both or neither
       RSD_NO_MALLOC             no libc defaults: a user allocator is mandatory
       RSD_NO_ERROR_STRINGS      rsd_result_str() returns bare names only
       RSD_SNPRINTF              default: snprintf
       RSD_NO_OLLAMA             no Ollama payload parsers nor driver: rsd_runtime_ollama()
                                 returns NULL (the shell's feature macros are in its
                                 manual)
       RSD_NO_LMSTUDIO           no LM Studio payload parsers nor driver (rsd_lms_*
                                 but rsd_lms_tier_str): rsd_runtime_lmstudio() returns
                                 NULL; detection still recognises an LM Studio server;
                                 no load-first lifecycle (begin refuses RSD_RT_LOAD_FIRST)
       RSD_NO_GGUF               no GGUF reader, start estimate nor llama-server log
                                 reader (rsd_gguf_*, rsd_ggml_*, rsd_llama_log_*)

   ENVIRONMENT (read only by the *_from_env helpers and, per begin, the ensurer)
       RESIDENCY                     observe|off|0|false|user|user-managed =
                                     observe-only (never mutate); else managed
                                     (a value not in that list nor on|1|true|
                                     managed: warned about once per ensurer)
       RESIDENCY_CORESIDENT_CONTEXT  clamp ceiling for loads beside others:
                                     off|0|false disables, N sets, else 131072
       RESIDENCY_STATE_DIR           state directory (lock, attribution,
                                     generation); else $XDG_STATE_HOME/residency,
                                     else ~/.local/state/residency
       PATH                          searched for a process's exe (proc)

   FEATURE OVERVIEW
     residency.h (pure: no I/O, no clock, no threads)
       json      strict RFC 8259 tokenizer into caller-owned tokens (zero-copy,
                 bounded depth and size, no allocation) and a bounds-checked writer
                 that escapes any byte sequence.
       reconcile the decision: facts about a server (residents, aliases, tags, pins,
                 capacity, configured roles) in, a plan out (load, evict which,
                 decline, observe) with a reason code and operator notices; the
                 decision cache (TTL per target and model); the context-fit clamp
                 for loads beside other models.
       payload   parsers for the llama.cpp router, Ollama and LM Studio listings.
       driver    the reconcile as a sans-I/O state machine per runtime: it asks
                 for HTTP requests, waits and the lock, and is fed the answers.
       pool      the process-pool policy: which of N model-server processes runs,
                 LRU eviction of idle ones only, bytes and count, pins, idle TTL.
       gguf      what a model costs: a GGUF header reader fed in pieces (bounded, no
                 allocation), the start estimate (model, KV, compute bytes as
                 llama.cpp sizes them) and a reader of llama-server's own report.
     residency_http.h (the I/O shell: POSIX sockets, or Winsock on Windows)
       url, http URL parsing; net, tls: sockets and optional mbedTLS; a
                 non-blocking HTTP/1.1 client and server; ensure: rsd_ensurer runs a reconcile over sockets (blocking
                 or one step per frame) with the state directory's flock and
                 attribution; proc: child processes; state: the state directory;
                 fleet: the pool running real llama-server processes.

   TL;DR
       JSON:
           rsd_json_tok toks[256];
           rsd_json_doc doc;
           int r = rsd_json_parse(&doc, text, len, toks, 256);
           if (r < 0) printf("%s at %u:%u\n", rsd_result_str(r), doc.err.line, doc.err.col);
       Make a model resident (residency_http.h; blocking, or see rsd_ensurer_step):
           rsd_ensurer *e = rsd_ensurer_create(NULL);
           rsd_ensure_req q;  memset(&q, 0, sizeof q);
           q.url = "http://127.0.0.1:8080";  q.model = "qwen3-8b";
           rsd_ensure_result res;
           if (rsd_ensurer_sync(e, &q, &res) == RSD_OK && res.keep_resident) go();
           else printf("%s\n", res.message);
           rsd_ensurer_destroy(e);
       Decide only (pure; the facts come from your own listing):
           rsd_plan plan;  rsd_decide(&facts, &plan);
           -> plan.decision (LOAD, LOAD_AFTER_EVICT, ALREADY_RESIDENT, DECLINE,
              OBSERVE), plan.evict[], plan.notices[], plan.reason
       Pool of processes: rsd_pool (policy, below) or rsd_fleet (residency_http.h:
       the same policy with processes, /health probes and crash handling).

   API REFERENCE
     Names: a function that works on an object is named after the object's type
     (rsd_pool_step(pool), rsd_procs_step(p), rsd_fleet_step(f), rsd_ensurer_step(e));
     *_str gives a value's label ("already-resident", "ready", "in progress; call
     again") and *_name the bare name of its X-macro entry ("ERR_TIMEOUT",
     "EVICT_CONFIG", "ALLOC_FAILED").

   PUMP
     Every object that runs on the caller's clock (rsd_pool here; the HTTP client and
     server, rsd_procs, rsd_fleet, rsd_ensurer, rsd_etcd and the state directory's
     lock in residency_http.h) is driven the same way, and none of these calls blocks:
       int X_step(X *, uint64_t now)
           Does the work due at now. Returns the events waiting to be pulled (>= 0),
           or < 0 (RSD_ERR_ARG for NULL).
       bool X_next_event(X *, ev *)
           Pulls the oldest event; false when none. The pool's are its actions
           (rsd_pool_next_action; rsd_pool_next_event reads its log), the HTTP
           client's rsd_http_next_event. The ensurer, etcd and the lock have one
           event per ensure, operation or wait: its end, with its result. The lock
           works within its state: rsd_state_lock_step(st, lk, now).
       int X_pollfds(const X *, rsd_pollfd *out, int cap)
           How many descriptors it wants polled (rsd_pollfd, residency_http.h); it
           writes min(that, cap), so the caller may pass more room. The pool and
           the lock have none.
       uint64_t X_next_deadline(const X *)
           0 while events wait (or work is due now); else the time step must next
           run; RSD_NO_DEADLINE when nothing is due.
       void X_query(const X *, X_info *)
           The object's own state: its counts, what it waits on, its totals
           (rsd_pool_query fills an rsd_pool_info; rsd_http_client_query,
           rsd_http_server_query, rsd_procs_query, rsd_fleet_query, rsd_etcd_query
           and rsd_state_lock_query likewise; the ensurer's info is the
           rsd_ensure_result its next_event gives). A NULL X gives an empty info
           (result RSD_ERR_ARG where it has one).
       int X_query_ITEM(const X *, handle or index, ITEM_info *)
           One thing it holds: RSD_OK, or < 0 for a stale handle or a bad index
           (rsd_pool_query_model, rsd_pool_query_lease; rsd_http_client_query_req,
           rsd_http_server_query_req, rsd_procs_query_proc, rsd_fleet_query_model).
     A frame: step each object, pull its events, poll every descriptor until the
     earliest deadline (tests/test_pump.c drives them all through one such loop).

   HANDLES
     What an object hands out to be named again later is a handle, spelled rsd_X_h:
     rsd_pool_req_h, rsd_pool_proc_h and rsd_pool_lease_h here; rsd_http_req_h,
     rsd_http_sreq_h and rsd_proc_h in residency_http.h. Each is a struct of one
     uint32_t id, and an id of 0 is never valid (a zeroed handle means "none"). The
     id holds the entry's index in its table in the low bits, as many as the table's
     limit needs (pool requests 20, HTTP requests 12, processes and pool processes 8,
     leases 4), and the entry's generation above them. Each reuse of an entry moves its
     generation on (never to 0), so a stale handle is refused, never taken for the
     entry's new tenant, until the generation wraps after 2^(32 - bits) - 1 reuses.
   LIFECYCLE AND VERBS
     X *X_create(const X_desc *desc)      what the library allocates: every byte from
                                          desc->allocator, at create and nowhere else
                                          (desc NULL or zeroed = defaults); NULL for a
                                          desc it refuses (logged) or no memory
     size_t X_footprint(const X_desc *desc)
                                          the bytes X_create(desc) allocates, exactly
                                          (tests/test_sizes_shell.c counts them); 0 for
                                          a desc create refuses, so a NULL from create
                                          with a footprint is no memory. Where some
                                          bytes are not the library's they are named
                                          (TLS's state)
     void X_destroy(X *)                  frees all of it; NULL is fine
       rsd_listing, rsd_pool; rsd_http_client, rsd_http_server, rsd_ensurer,
       rsd_procs, rsd_state, rsd_etcd, rsd_fleet, rsd_devmem. A create that can fail
       for a reason outside its desc and memory takes int *err (may be NULL) for
       the result code: rsd_state_create (the directory).
     X_init(X *, ...)                     a struct the caller owns, storage and all:
                                          nothing to destroy (rsd_json_w_init,
                                          rsd_json_split_init, rsd_listing_init,
                                          rsd_gguf_init, rsd_llama_log_init;
                                          rsd_sse_init, rsd_attr_set_init; and
                                          rsd_reconcile_init, in the caller's
                                          rsd_reconcile_footprint(lim) bytes)
     X_begin / X_OP_begin                 starts an operation (no I/O); X_step drives it
                                          and X_next_event gives its one end
     X_sync / X_OP_sync                   blocks (poll, sleep, a lock, a DNS lookup)
                                          until that operation ends: the only calls
                                          that wait (rsd_http_request_sync,
                                          rsd_ensurer_sync, rsd_ensurer_lease_return_sync,
                                          rsd_ensurer_resolve_sync, rsd_state_lock_sync,
                                          rsd_state_attr_add_sync, _remove_sync,
                                          rsd_state_gen_bump_sync)
     One verb, one meaning: acquire / release a request (the pool's and the fleet's);
     lease_take / lease_return a byte lease (pool, fleet, and the ensurer's free
     requests); stop a process (it exits), forget an exited one's slot
     (rsd_procs_forget); cancel a request not wanted any more; unload a model;
     end the input of a parser fed in pieces.

   ---- text: what reaches a terminal or a log line ----------------------------
       Text a server or a child chose (model ids, messages, command lines) is
       passed through these before it is printed, logged or put in an error
       message; JSON output is written with the JSON writer instead (escaped once).

       size_t rsd_text_escape(rsd_str s, char *buf, size_t cap)
           Copies s with every byte a terminal could act on made visible: LF, CR
           and TAB as \n \r \t, the other control bytes (0x00-0x1F), DEL and the
           UTF-8 C1 controls U+0080-U+009F (ESC [ and CSI sequences, BEL, a fake
           new log line) as \xHH per byte, and bytes that are not valid UTF-8 as
           \xHH too. Valid printable UTF-8 and backslashes are copied as they are.
           rsd_notice_format uses it for every id it quotes.
       size_t rsd_arg_redact(const char *prev, const char *arg, char *buf, size_t cap)
           One argument of a command line as listings, errors and logs show it.
           A flag is secret when the last word of its name (words split at '-',
           '_' and '.', before any '='; a last word "file" or "path" is skipped)
           ends, in any case, with key, keys, secret(s), token, password(s), passwd
           or credential(s): --api-key, --hf-token, --api-key-file, --ssl-key-file,
           --db-password, --apikey; not --image-max-tokens (a count), --token-ms
           or --keep. -hft (llama.cpp's short --hf-token) is secret too. The
           argument after a secret flag is shown as ***
           (--api-key ***, --hf-token ***, --api-key-file ***), and
           --api-key=VALUE as --api-key=***. In any argument, the user:password@
           part of a URL (scheme://...@host) becomes ***@. Everything else is
           copied. rsd_procs_command (and so every fleet message) and rsd-serve's
           model listing use it, and rsd_procs_tail replaces every copy of such a
           value in a child's output (llama-server echoes an argument it rejects). A secret is best passed in the environment
           (LLAMA_API_KEY, HF_TOKEN), which nothing here ever shows.
       Both return the full length (snprintf-like) and NUL-terminate when cap > 0;
       buf may be NULL with cap 0 to measure. NULL strings read as empty.

   ---- json: strict tokenizer, accessors, writer -------------------------------
       Parse into tokens you own, then walk them by index. Nothing is copied and
       nothing is allocated; the source must outlive the doc.

       rsd_json_tok toks[512]; rsd_json_doc doc;
       int n = rsd_json_parse(&doc, body, body_len, toks, 512);
       if (n < 0) { log("%s: %s at %u:%u", rsd_result_str(n), doc.err.what,
                        doc.err.line, doc.err.col); return n; }
       int data = rsd_json_find(&doc, 0, "data");
       for (int m = rsd_json_child(&doc, data); m >= 0; m = rsd_json_next(&doc, m)) {
           char id[256]; size_t id_len;
           if (rsd_json_str(&doc, rsd_json_find(&doc, m, "id"), id, sizeof id, &id_len) < 0)
               continue;                                      (not a string, or too long)
           int st = rsd_json_find(&doc, m, "status");
           bool loaded = rsd_json_str_eq(&doc, rsd_json_find(&doc, st, "value"), "loaded");
       }

     Parsing
       int rsd_json_parse(rsd_json_doc *doc, const char *s, size_t len,
                          rsd_json_tok *toks, uint32_t cap)
           Strict RFC 8259. Returns the token count (> 0) or a negative result.
           toks == NULL is the count pass: it validates fully and returns the count
           a real pass will need (the real pass also writes a sentinel token of type
           RSD_JSON_INVALID at toks[count] when cap > count). A top-level scalar is
           a valid document. s need not be NUL-terminated; no byte at or after
           s[len] is ever read.
       int rsd_json_parse_ex(..., const rsd_json_desc *desc)
           The same with limits: desc->max_depth (0 = RSD_JSON_MAX_DEPTH = 64,
           at most RSD_JSON_DEPTH_CAP = 1024, above that RSD_ERR_ARG) and
           desc->max_bytes (0 = RSD_JSON_MAX_BYTES; larger values are clamped).
     A long list with few tokens
       int rsd_json_parse_top(doc, s, len, toks, cap)
           Validates all of s exactly as rsd_json_parse does, but keeps only the
           tokens of the root and of its members: a member whose value is a
           container gets one token without children. RSD_ERR_ARG without tokens.
       int rsd_json_each(doc, arr, &pos, &el)     (size_t pos = 0 to start)
           The next element of array token arr, tokenized in full into the tokens
           after doc's own: el is a document of that element alone (its root is
           token 0; the next call reuses its tokens). 1 = an element, 0 = no
           more, RSD_ERR_JSON_TOKENS when one element needs more tokens than
           remain.
       int rsd_json_expand(doc, i, &sub)
           Token i's value tokenized in full the same way (an error object, a
           config member). RSD_OK or RSD_ERR_JSON_TOKENS.
       So a listing of any length is read with the tokens of its top level and
       of its largest entry.
     A document as it arrives
       void rsd_json_split_init(sp, buf, cap, toks, n_toks, fn, user)
       int rsd_json_split_feed(sp, data, len)        (any split, in order)
       int rsd_json_split_end(sp, &top)
           Splits a document fed in pieces: each element of an array that is
           the value of a top-level member (and each element of a top-level
           array) is tokenized in full with toks, as rsd_json_each gives it,
           and handed to fn(user, key, &el), then forgotten; key is the
           member's key, raw (still escaped; empty for a top-level array).
           Before a list's first element fn(user, key, NULL) says that list
           begins, so a reader of duplicate keys lets the last one win. The
           rest of the document, those lists written as [], is kept in buf
           with the element in flight after it (an element that arrives whole
           in one piece is read where it lies). end parses the kept top level
           into toks (top's source is buf) and returns its token count or the
           whole document's verdict: exactly the code rsd_json_parse_top gives
           it (the first error in the document wins; RSD_ERR_JSON_TOKENS when
           the top level and the largest element do not fit in toks together,
           so toks sized by the count pass always do),
           or RSD_ERR_BODY_TOO_LARGE when an element, or the top level, is
           larger than cap (top.err.what says which; nothing is cut).
           top.err.offset is the offending byte in the whole document, as
           rsd_json_parse_top gives it, except for RSD_ERR_JSON_TOKENS and
           RSD_ERR_BODY_TOO_LARGE (where the splitter found them out: its own
           tokens are used otherwise, and an element over cap at its start);
           its line and col are 0 (not counted). feed
           returns RSD_OK or the first error, which is sticky; data may lie in
           buf itself, at or after what is kept (a buffer read so far is split
           in place). Strictness is the parser's: the splitter checks only the
           separators between elements (one comma and JSON whitespace).
       Every payload parser below reads its lists this way: the whole-body
       calls feed the body in one piece (its top level, without its lists, in
       2 KiB on the stack; a valid body with a larger top level is
       RSD_ERR_BODY_TOO_LARGE, a broken one gives its parse error), and the
       reconcile and detection feed an answer as it arrives.
       Rejected (RSD_ERR_JSON): trailing commas, leading zeros ("01", "-01"), "1.",
       ".5", "+1", NaN/Infinity, raw control characters (< 0x20) in strings, bad
       escapes ("\x", "\'", "\U"), lone or misordered \u surrogates, invalid UTF-8
       (overlong forms, UTF-8-encoded surrogates, > U+10FFFF, stray continuation
       bytes, 0xF5..0xFF), comments, single quotes, a BOM, anything but the four
       JSON whitespace bytes after the value. Depth counts open containers.
       Errors: RSD_ERR_JSON (malformed), RSD_ERR_TRUNCATED (the input ended where
       more was required: every strict prefix of a valid container, string or
       literal gives exactly this, so it means "read more"; note that a prefix of a
       top-level number such as "12" of "123" is itself valid), RSD_ERR_JSON_DEPTH,
       RSD_ERR_JSON_TOKENS (cap too small: size toks with the count pass),
       RSD_ERR_TOO_LARGE (len over max_bytes: refused before any byte is read, so
       it costs nothing however large the input; err.offset = max_bytes, line and
       col 0), RSD_ERR_ARG (doc NULL, s NULL with len > 0, bad desc). doc->err
       holds code, offset (the offending byte; len when truncated), 1-based line
       and byte column (counted only up to offset), and what, a short static
       reason ("trailing comma", "lone high surrogate", ...). On success
       doc->err.code is RSD_OK.

     Tokens (rsd_json_tok, 24 bytes)
       type    RSD_JSON_NULL, BOOL, NUMBER, STRING, ARRAY, OBJECT (INVALID = 0).
       flags   RSD_JSON_F_KEY (an object key), RSD_JSON_F_ESCAPED (the string holds
               a backslash: the unescape fast path is skipped only then),
               RSD_JSON_F_INT (a number without fraction or exponent).
       start, end  byte offsets (uint32_t). Strings: between the quotes, raw.
               Containers: from the bracket to one past the closer.
       parent  index of the parent, -1 for the root; always < the token's index.
       next    one past the token's subtree: the next sibling when it has one. Skipping
               any subtree is O(1).
       size    number of children: array elements, object members, 1 for a key.
       Tree shape: an object's children are its keys; each key has exactly one
       child, its value (jsmn style). So members iterate like elements:
           for (k = rsd_json_child(d, obj); k >= 0; k = rsd_json_next(d, k))
               key k, value rsd_json_child(d, k) (always k + 1)

     Accessors (every index is bounds-checked; a bad index is harmless)
       rsd_json_type rsd_json_type_of(doc, i)   RSD_JSON_INVALID when i is out of range
       int  rsd_json_size(doc, i)               children count, 0 for scalars
       int  rsd_json_child(doc, i)              first child or -1
       int  rsd_json_next(doc, i)               next sibling or -1, O(1)
       int  rsd_json_parent(doc, i)             parent or -1 (a value's parent is its key)
       int  rsd_json_find(doc, obj, "key")      value of the last member whose decoded
                                                key equals "key" (duplicate keys: the
                                                last wins, as in llama.cpp's reader and
                                                JSON.parse), or -1 (obj not an
                                                object, key missing). Keys written with
                                                escapes match ("m\u006fdel" == "model");
                                                unescaped keys compare by length then memcmp.
       int  rsd_json_at(doc, arr, idx)          element idx or -1, O(idx)
       rsd_str rsd_json_view(doc, i)            raw bytes (strings still escaped)
       bool rsd_json_str_eq(doc, i, "s")        decoded string equals s; no buffer. A
                                                string holding \u0000 never equals a C string.
       int  rsd_json_str(doc, i, buf, cap, &len)
           Unescapes into buf and NUL-terminates; \uXXXX and surrogate pairs become
           UTF-8. *len is the decoded length (without the NUL) even when cap is too
           small (then RSD_ERR_BUFFER, buf holds a terminated prefix). The decoded
           length is never more than the raw length, so cap = view.len + 1 always
           suffices. RSD_ERR_JSON_TYPE for a non-string.
       int  rsd_json_int64(doc, i, &out)
           RSD_ERR_JSON_TYPE unless an integer literal (no '.', no exponent: "1.0"
           and "1e2" are TYPE errors); RSD_ERR_JSON_RANGE outside int64_t. "-0" is 0.
       int  rsd_json_double(doc, i, &out)
           Correctly rounded and locale-independent: an exact path for <= 15 digits
           and |exponent| <= 22, otherwise strtod on a copy rewritten without a
           decimal point (so LC_NUMERIC never matters), keeping
           RSD_JSON_NUM_MAX_DIGITS = 768 significant digits plus a sticky digit.
           Overflow is RSD_ERR_JSON_RANGE; underflow gives 0 or a subnormal; "-0"
           gives -0.0.
       int  rsd_json_bool(doc, i, &out)          RSD_ERR_JSON_TYPE unless true/false.

     Writer
       rsd_json_writer w; char body[512];
       rsd_json_w_init(&w, body, sizeof body);
       rsd_json_w_begin_object(&w);
       rsd_json_w_key(&w, "model"); rsd_json_w_str(&w, model_id);
       rsd_json_w_key(&w, "n_ctx"); rsd_json_w_int(&w, 8192);
       rsd_json_w_end_object(&w);
       int len = rsd_json_w_finish(&w);             (length, or the first error)
       Calls: w_begin_object/w_end_object, w_begin_array/w_end_array, w_key
       (C string), w_keyn (bytes), w_str (C string), w_strn (bytes, may hold NUL), w_int (int64_t), w_double,
       w_bool, w_null, w_raw (pre-encoded JSON, unchecked). Commas and colons are
       automatic. Every call returns RSD_OK or the writer's first error, and every
       error is sticky, so checking w_finish alone is enough:
         RSD_ERR_BUFFER  the output does not fit; nothing is ever written at or
                         past buf[cap] (w_finish adds a NUL only when room remains).
         RSD_ERR_ARG     a string or key that is not valid UTF-8 (same rules as the
                         parser: a mangled model id is never sent), NaN or infinity,
                         NULL pointers.
         RSD_ERR_STATE   a key outside an object, a value where a key is due, a
                         mismatched end, a second top-level value, or w_finish with
                         containers open / nothing written.
         RSD_ERR_JSON_DEPTH  more than RSD_JSON_WRITER_MAX_DEPTH = 64 open containers.
       Strings: '"' and '\\' are escaped, \b \f \n \r \t use short forms, other
       bytes < 0x20 become \u00XX, everything else (DEL and valid UTF-8) passes
       through. Doubles use the shortest of %.15g/%.16g/%.17g that parses back to
       the same value (the locale's radix is replaced by '.').

     Limits
       RSD_JSON_MAX_BYTES 0x7FFFFFFF (offsets fit uint32_t, counts fit int),
       RSD_JSON_MAX_DEPTH 64 (default), RSD_JSON_DEPTH_CAP 1024 (the parser keeps
       one bit per level on the stack), RSD_JSON_WRITER_MAX_DEPTH 64,
       RSD_JSON_NUM_MAX_DIGITS 768. A document of len bytes never needs more than
       len tokens. Stack (x86-64, gcc -O2, checked by tests/manual.sh): a parse's
       frame is under 200 bytes; rsd_json_double's conversion under 1 KiB.
     Performance
       String bodies are scanned 16 bytes at a time with SSE2 when the compiler
       targets it (x86-64 always does; define RSD_JSON_NO_SIMD to opt out) and 8 at
       a time with portable SWAR otherwise. bench/json.mk compares against cJSON,
       jsmn and simdjson on a 64-model router payload and a 1 MB mixed document.
   ---- reconcile: the pure decision -------------------------------------------
       Facts in, plan out: no I/O, no allocation, no clock, no globals. The
       sans-I/O drivers (llama.cpp router, LM Studio, Ollama) that fill the facts
       from parsed payloads and carry the plan out over HTTP are the driver
       section's; the cross-process lock and the state files (attribution,
       mutation generation) are residency_http.h's.

       int rsd_decide(const rsd_facts *facts, rsd_plan *out);
           Decide what to do to make facts->keep resident. *out is always
           written (zeroed, decision NONE on error). Returns RSD_OK,
           RSD_ERR_ARG (NULL, bad enum, negative count, NULL view with a length),
           RSD_ERR_RESIDENTS_LIMIT (over an RSD_MAX_* limit, e.g. 65 residents),
           RSD_ERR_MODEL_ID (empty keep or resident id; any id or alias of
           RSD_MODEL_ID_MAX bytes or more). Empty aliases are ignored.

     Facts (the caller fills them; zeroed fields are defaults)
           rsd_facts { strategy (DEFAULT=ROUTER | ROUTER | JIT | SCHEDULER),
             optout (NONE | ENV | TARGET), target_id, runtime_id, keep,
             keep_aliases[4] + n, keep_tags[8] + n, keep_pinned,
             residents + n_residents (<= 64), protected_models + n_protected
             (<= 64), max_instances (0 = unknown), context_length (0 = none),
             model_max_context (0 = unknown), context_ceiling (0 = 131072),
             capacity_bytes, keep_bytes (0 = unknown), free_bytes,
             kv_bytes_per_token (0 = unknown), context_floor (0 = 4096) }
           rsd_resident { model_id, aliases[4] + n, tags[8] + n,
             size_vram_bytes + has_size_vram, size_bytes + has_size (absent is
             never zero), loaded_by_us (attribution), pinned, last_used_ms
             (its last use, ms since the epoch; 0 = unknown) }
           rsd_protected_model { model_id (trimmed; empty skipped), role }
         Model ids are rsd_str views, not copies: the caller keeps the strings
         alive while the facts and the plan are used (the plan names residents
         by index). A driver copies ids out of a response into its own arena.
         Comparison is exact, byte-wise, case-sensitive.

     Plan
           rsd_plan { decision, reason, would, keep_resident, keep_index,
             resident_count, slots_needed, load_context, evict[] + n_evict,
             fallback[] + n_fallback, blocked[] + n_blocked, notices[] +
             n_notices, cls[] (per resident: is_keep, protection, role, ours,
             evict, group, victim_rule) }
         evict/fallback/blocked hold indices into facts->residents. Unload the
         evict list in order, then load; fallback (JIT only) is what to unload,
         in order, if the load fails.

     Classification
       A resident is the keep when its id or an alias equals the keep or a keep
       alias. Tag protection: a tag exactly "pinned:true" or "role:scout", or
       rsd_resident.pinned. Config protection: its id, else the first alias, in
       protected_models; role = the first entry for that id with a role, else
       none (a bare id still protects). Tag beats config; the role is kept.
       Residents that share any id or alias are ONE model (an identity group):
       protected if any member is, the keep if any member is, evicted once (by
       the canonical-first member's id), freeing all its slots. Determinism:
       residents are taken in canonical order (model_id bytes, then index), so
       the same facts in any listing order give the same plan; ties are broken
       by id, never by listing order. A group's last use is its members'
       latest last_used_ms.

     Least recently used
       Among the candidates of equal protection (a tier) the victims go in this
       order: the ones this library loaded first, then the least recently used
       first (a model with no known use, 0, before any used one: never used is
       the least recent), then by id, which therefore decides only when no last
       use tells them apart. The reason says which rule chose (EVICT_LRU rather
       than EVICT_UNPROTECTED when a last use was known in the tier), and so
       does each victim's class (cls[].victim_rule LRU, UNUSED or BY_ID), and its
       eviction notice's text adds "(least recently used)", "(no use of it is
       known)" or "(no last use is known: first by id)" after the model's name.
       The same
       order is JIT's fallback and the scheduler's release. Byte-aware picks
       stay largest first, ties in this order, and their notices carry no rule.

     Decision table (keep = the requested model; others = non-keep groups;
     tiers: unprotected, then configured, each in the order above)
         keep resident, any strategy   ALREADY_RESIDENT   KEEP_RESIDENT; one
                                       notice if others: stress over-capacity
                                       (count > max) else co-resident
         ROUTER, nothing resident      LOAD               EMPTY_SERVER
         ROUTER, capacity unknown      LOAD_AFTER_EVICT   CAPACITY_UNKNOWN_EVICT_ONE:
                                       exactly one unprotected resident
                                       or LOAD            CAPACITY_UNKNOWN_NONE_EVICTABLE
         ROUTER, free slot             LOAD               FREE_SLOT (co-resident
                                       "loading ... (N+1/C instances)")
         ROUTER, full                  LOAD_AFTER_EVICT   EVICT_LRU (a last use
                                       known) / EVICT_UNPROTECTED (none) /
                                       EVICT_CONFIG: the fewest groups, tier
                                       order, so that count - freed + 1 <= max
         ROUTER, full, only pinned     DECLINE            DECLINE_ALL_PINNED
         ROUTER, full, keep pinned and only configured models could make room
                                       DECLINE            DECLINE_PINNED_KEEP
                                       (a pinned keep never displaces a
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
         no keep, free_bytes           FREE               FREE_BYTES / FREE_SHORT /
                                       FREE_NOTHING: see "Free plans"
         sizes known             LOAD / LOAD_AFTER_EVICT  FITS_BYTES /
                                       EVICT_BYTES: see "Byte-aware eviction"
       Tag-pinned models and the keep are never in evict or fallback.
       Capacity counts instances unless capacity_bytes, keep_bytes and every
       resident's size are known; sizes never decline a load.

     Free plans
       An empty keep with rsd_facts.free_bytes > 0 asks to free that many bytes
       instead of loading (an empty keep without it is RSD_ERR_MODEL_ID). The
       candidates are the unprotected groups this library loaded (loaded_by_us)
       whose every member has a known footprint (size_vram_bytes, else
       size_bytes), in the order above (least recently used first); they go
       until free_bytes are freed. Decision FREE (would FREE when observing);
       plan.freed_bytes is what they free; reason FREE_BYTES, FREE_SHORT (all of
       them hold less than asked: they all go, and a will-not-fit/warning notice
       FREE_SHORT says how much can be freed) or FREE_NOTHING (no candidate).
       One about-to-evict/info notice FREE_OURS per victim, detail
       FREED_VRAM_BYTES FREE_BYTES: "unloading residency-loaded model
       'b' (least recently used) from 'T' to free memory (2.0 GiB of the 3.0 GiB
       asked)." Sizes under 1 GiB are given in MiB or bytes there.

     Capacity unknown
       A load adds one model, so freeing one slot always suffices for a
       count-limited server that was at or under its limit; and evicting one we
       chose stops a full router from displacing a pinned model itself. So the
       plan evicts exactly one unprotected resident (the first of its tier: ours
       first, then the least recently used, then by id),
       never a configured one, and loads without eviction when none is
       unprotected. (The upstream driver evicted every unprotected resident.)

     Observe
       Decision OBSERVE never loads or unloads, for every runtime. evict and
       fallback are empty; would holds the managed decision, cls[].evict and
       load_context what it would have done, and the action notices are kept
       with observe_only set (their text starts "observe-only, nothing done: ").

     Byte-aware eviction
       rsd_facts.capacity_bytes  memory the residents share, e.g. the VRAM total
                                 (the caller's or the server's figure); 0 = unknown
       rsd_facts.keep_bytes      what the keep takes once loaded; 0 = unknown
       A resident's footprint is size_vram_bytes when has_size_vram, else
       size_bytes when has_size. Bytes count only when capacity_bytes, keep_bytes
       and EVERY resident's footprint are known; otherwise every plan is exactly
       the plan without sizes (tested: byte for byte). With them: free = capacity
       - sum of footprints, need = keep_bytes - free (0 when it fits), and
         ROUTER, capacity known: when need > 0 (a free slot or not), the victims
           are the fewest that free both the slots (count - freed + 1 <= max) and
           the bytes: unprotected tier, then configured (not for a pinned keep),
           each tier largest first (ties: the tier order, ours first, then id),
           then every picked victim the others make unneeded is spared (latest
           first). Reason EVICT_BYTES (EVICT_CONFIG if a configured one goes).
           need == 0: the count rules.
         ROUTER, capacity unknown: need > 0 -> the fewest unprotected ones that
           free it, EVICT_BYTES (never a configured one). need == 0: the one
           eviction of "Capacity unknown" stays, because a router limits by count
           (--models-max), not bytes, and that one keeps its LRU away from a
           pinned model.
         SCHEDULER: only the fewest of our unprotected stragglers that free
           `need` (none when it fits: LOAD, FITS_BYTES), instead of all of them.
         JIT: the same as without sizes (the fallback list is used only after a
           failed load).
       When even every allowed candidate cannot free enough, the plan is the one
       without sizes plus a will-not-fit/WARNING notice BYTES_SHORT (detail
       KEEP_BYTES, FREE_BYTES = free + what the candidates hold, CAPACITY_BYTES):
       "'<keep>' needs 10.0 GiB on '<target>', and only 2.0 GiB of 32.0 GiB can be
       freed without evicting a protected model; residency evicts no more than
       without sizes, and the load may fail or spill to CPU." An empty server
       too small for the keep gets the same notice (EMPTY_SERVER, load as is).
       Sizes never decline a load: the figures are estimates, and a decline
       comes only from pins and configured models. The same facts in any
       listing order give the same plan.

     Notices (in plan order: context stress, split stress per resident in
     canonical order, the strategy/eviction notices, then the clamp)
           rsd_notice { kind, level, msg, observe_only, subject (resident index
             or -1), detail (RSD_DETAIL_* bits), requested_context,
             model_max_context, load_context, resident_count, max_instances,
             resident_vram_bytes, resident_total_bytes, freed_vram_bytes,
             config_protected, role, keep_bytes, free_bytes, capacity_bytes }
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
           The loadability gate: turn a plan the driver must refuse
           because the server does not serve the keep into a decline with
           exactly one will-not-fit notice and nothing else.
       rsd_decision_str, rsd_reason_str, rsd_reason_name, rsd_notice_kind_str,
       rsd_notice_level_str, rsd_notice_msg_str, rsd_role_str, rsd_role_phrase:
           enum to string (X-macros RSD_DECISIONS, RSD_REASONS, RSD_NOTICE_KINDS,
           RSD_NOTICE_LEVELS, RSD_NOTICE_MSGS, RSD_ROLES); never NULL.

     Protection settings
       bool rsd_tags_protect(const rsd_str *tags, int n);
           The tag rule: true when a tag is exactly "pinned:true" or "role:scout".
       int rsd_protected_collect(const rsd_role_sources *src, out, cap);
           Build protected_models from settings: chat, memory, worker
           default, worker profiles, target defaults, in that order; trimmed,
           empty skipped, first claim wins. Returns the count or RSD_ERR_BUFFER.

     Opt-outs (environment)
           RESIDENCY=observe|off|0|false|user|user-managed (trimmed, any case)
               observe-only; unset, empty, on|1|true|managed: managed. Any other
               value also means managed, and the ensurer says so once (a warning
               notice naming the accepted values): a typo never silently manages.
           bool rsd_env_observe(const char *value);
           bool rsd_env_known(const char *value);   one of the values above (or unset)
           bool rsd_lifecycle_user_managed(const char *lifecycle);
           rsd_optout rsd_optout_resolve(const char *env_value, bool user_managed);
               TARGET when the target is user-managed, else ENV when the value
               opts out, else NONE. rsd_optout_from_env(user_managed) calls
               getenv("RESIDENCY") itself.

     Decision cache (caller-owned, fixed size, no allocation)
           rsd_decision_cache c = {0};            TTL 60 000 ms (c.ttl_ms to change)
           int rsd_cache_lookup(&c, target_key, model, now_ms, generation, &hit);
               1 = live hit (skip probing: ALREADY_RESIDENT, DECLINE or
               OBSERVE; emit nothing again), 0 = miss.
           int rsd_cache_store(&c, target_key, model, plan, mutation_failed,
                               now_ms, generation);
               After the reconcile finished. A plan that loaded is stored as
               ALREADY_RESIDENT. Returns 0 (not stored) when mutation_failed
               (an unload or the load failed), for PROBE_FAILED and NONE.
               Declines and opt-out observes are stored.
           int rsd_cache_invalidate(&c, target_key, model);
               After any local mutation of the target; an empty model drops
               every entry of the key. Returns the count dropped.
         Keyed by (normalised target key, model): alternating models on a
         server both hit. generation is the caller's mutation counter (the
         state directory shares one across processes); an entry stored under
         another generation is a miss. Full: an expired slot, else the least
         recently used (lowest slot on ties) is replaced. An entry keeps its
         ids in one text of RSD_DECISION_CACHE_TEXT (512) bytes: the longest key
         and model always fit; a reconcile's LM Studio wire id and model key
         take the rest, and an outcome whose ids do not fit is not cached (the
         next ensure asks the server again).

     Root URL and target key
           int rsd_root_url(rsd_str url, char *out, size_t cap);
               The one root-URL rule, for every runtime: spaces trimmed,
               ws:// -> http://, wss:// -> https://, trailing '/' dropped, then
               one trailing "/v1", then trailing '/' ("http://h:8080/v1/" ->
               "http://h:8080"). Requests go to root + path. RSD_ERR_URL for an
               empty root or one with a query or fragment.
           int rsd_target_key_normalise(rsd_str raw, char *out, size_t cap);
               The one key of a server, shared by the lock, the caches and the
               state files of every process: "llamacpp|HTTP://Mini:08080/v1/"
               -> "llamacpp|http://mini:8080". Lower-cases up to the host, reads
               ws/wss as http/https, writes the port without leading zeros and
               drops :80 (http) and :443 (https), drops query and fragment, and
               keeps the path as rsd_root_url does; idempotent. A key is at
               most RSD_TARGET_KEY_MAX - 1 bytes: one that does not settle
               within that is RSD_ERR_BUFFER, whatever cap. The drivers key
               "<runtime>|<base URL>" with it; the cache applies it to every key
               it is given.

     Context fit: the clamp for loads beside other models
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
       int rsd_fit_context_bytes(&desc, &out);   (RSD_OK; RSD_ERR_ARG for NULL)
           The clamp by bytes. rsd_fit_bytes_desc { requested, n_other_residents,
           kv_bytes_per_token (the load's KV bytes per context token, every
           layer, K and V; 0 = unknown), free_bytes (the budget less what stays
           resident and what other programs hold), load_bytes (the load's own
           bytes besides its KV: weights, compute), n_seq (KV streams: -np N
           without a unified cache; 0 = 1), floor (0 = RSD_FIT_FLOOR_DEFAULT,
           4096), ceiling }. Alone (n_other_residents <= 0) or with no request:
           the request. Without a figure: rsd_fit_context's fixed ceiling. With
           one: the request when its KV, as llama.cpp allocates it (each
           sequence's share padded up to 256 cells), fits free_bytes -
           load_bytes; else the largest context of whole 256-cell blocks in each
           of n_seq streams (a multiple of 256 x n_seq, so llama.cpp rounds it no
           further) whose KV fits: out.fits. It never goes below the floor: when
           fits < floor, context = the floor (the request if lower) and
           out.floored says that context does not fit (a host that can evict
           should evict instead). rsd-serve uses it for a child start that would
           not fit beside the models running while a slot is free: it clamps
           that start's -c (and shrinks its reservation by the KV given up)
           instead of evicting, only when the result is not floored; else it
           evicts as without the clamp (apps/rsd-serve/rsd-serve.c, "Context fit"). Never above the request; a
           product past 2^64 never fits. out = { context, fits, kv_bytes (of
           context, padded), by_bytes, clamped, floored }. The floor: 4096
           tokens is the context below which a chat model is of little use
           (a system prompt and a few turns), and llama-server's own minimum
           slot context is far below it; a caller with its own need sets floor.
           The figure: rsd_gguf_kv_per_token(&info, &start, &per_token,
           &n_stream) from the model file (see gguf), or a known figure
           (llama-server's -lv 4 "KV buffer size" / n_ctx).
       Inside rsd_decide: when context_length is set and the plan loads (LOAD
       or LOAD_AFTER_EVICT), load_context = rsd_fit_context(context_length,
       neighbours, context_ceiling), where neighbours are the other models that
       stay resident AFTER the planned evictions (with JIT nothing is evicted).
       With facts.kv_bytes_per_token, capacity_bytes, keep_bytes and every
       resident's footprint known it is rsd_fit_context_bytes instead:
       free_bytes = capacity - the neighbours' footprints, load_bytes =
       keep_bytes less the KV of context_length (keep_bytes is the keep's
       footprint at the requested context), n_seq 1, floor
       facts.context_floor. rsd_reconcile_desc and the ensurer's request
       carry both fields to it.
       When it clamps, the plan ends with a stress/warning notice
       CONTEXT_CLAMPED, "loading '<keep>' alongside <neighbours>: context
       clamped <from> to <to> tokens", detail REQUESTED_CONTEXT and
       LOAD_CONTEXT. No load, no clamp: load_context 0.

     Results, log items, limits
       Results: RSD_ERR_RESIDENTS_LIMIT (-50), RSD_ERR_MODEL_ID (-51), plus
       RSD_ERR_ARG and RSD_ERR_BUFFER. Log items (for the drivers):
       RECONCILE_BAD_FACTS, RECONCILE_DECLINE, RECONCILE_EVICT,
       RECONCILE_OBSERVE, RECONCILE_CACHE_HIT, FIT_CLAMPED.
       Limits: RSD_MAX_RESIDENTS 64, RSD_MAX_ALIASES 4, RSD_MAX_TAGS 8 (a driver
       seeing more keeps the protecting ones), RSD_MAX_PROTECTED 64,
       RSD_MODEL_ID_MAX 256 (incl. NUL), RSD_TARGET_KEY_MAX 256,
       RSD_MAX_NOTICES 132 (never reached), RSD_DECISION_CACHE_MAX 32,
       RSD_DECISION_CACHE_TEXT 512.
       Sizes (x86-64; tests/test_sizes.c checks them): rsd_plan under 16 KiB,
       rsd_decision_cache under 19 KiB, rsd_facts under 512 bytes plus the
       caller's arrays (rsd_resident under 256 bytes each); keep the plan and
       the cache out of small stacks.

     Performance
       rsd_decide hashes every id, alias, protected id and keep name once into
       a per-call open-addressing table on the stack (512 slots of 8 bytes, only
       the 16..512 slots a call needs are cleared; equal hashes are confirmed
       byte for byte, so the hash never changes a result). One lookup per name
       does identity grouping (union-find; a group's representative is its
       canonical-first member), keep matching and the protected-role rule. The
       canonical order is a merge sort on 7-byte big-endian keys taken after the
       bytes the ids share, refined only where ids tie on them. Work is O(total
       name bytes + n log n) for n <= 64 residents; bench/reconcile.c figure 3
       measures it. Stack (x86-64, gcc -O2, checked by tests/manual.sh): rsd_decide's
       frame is under 9 KiB, most of it the name table and the working state;
       rsd_notice_format's under 1 KiB. The plan is zeroed whole:
       "*out is always written" and the unused tail stays zero, so plans compare
       with memcmp. Notice text is rendered only by rsd_notice_format, never at
       decide time. rsd_decide runs in named phases (names, identity groups,
       bytes, stress notices, the strategy, the clamp, observe). tests/
       decide_ref.h is a slow, obvious oracle of what the fast paths compute
       (identity groups, classification, the candidate order with least
       recently used): tests/test_decide_ref.c and fuzz/fuzz_decide.c require
       rsd_decide to agree with it.
   ---- payload: server listings -> rsd_listing --------------------------------
       Pure, JSON-only parsers of server payloads into one runtime-neutral
       listing type that the drivers (next section) turn into rsd_facts. Each call
       takes the caller's JSON token array (no allocation). A listing's list is
       read entry by entry through rsd_json_split (the body in one piece; the
       reconcile feeds its answers as they arrive), and nothing is kept unless
       the whole body is valid, so the tokens hold the body's top level plus one entry:
       a real router's entry is 66 tokens, and RSD_RECONCILE_TOKENS (256) holds
       any realistic entry; a count pass (rsd_json_parse(.., NULL, 0)) bounds any
       body. An entry over the tokens is RSD_ERR_JSON_TOKENS with nothing kept.
       rsd_listing { n, models[RSD_LISTING_MAX_MODELS], n_seen, n_skipped,
         truncated, has_states, arena }
       rsd_listed_model { id, n_aliases, n_tags, instance, state,
         failed, exit_code + has_exit_code, size_bytes + has_size,
         size_vram_bytes + has_size_vram, context_length, max_context, flags,
         last_used_ms } (88 bytes on x86-64)
       An entry's aliases and then its tags follow its id in the listing's
       arena, each NUL-terminated:
           rsd_str rsd_listed_alias(const rsd_listed_model *m, int k);
           rsd_str rsd_listed_tag(const rsd_listed_model *m, int k);
       give alias or tag k (an empty view out of range). A runtime hook that
       fills a listing itself writes them the same way.
       One set of rules for every runtime's parser (router, Ollama, LM Studio):
         - Duplicate keys: the last one wins, as in llama.cpp's own JSON reader
           (and JSON.parse, Go): {"id":"a","id":"b"} lists "b". rsd_json_find
           follows the same rule.
         - Ids: an id, alias, tag or instance id is usable when it is a string of
           1..RSD_MODEL_ID_MAX-1 bytes (decoded) without a NUL byte (a decoded
           \u0000). Other control bytes (a decoded \u0001, ESC) are kept, by
           every parser and by the request bodies: the server lists that model,
           so it stays manageable; terminal and log text escapes them
           (rsd_text_escape). An entry without a usable id is skipped and
           counted (n_skipped, LM Studio: n_dropped); an unusable alias or tag is
           left out. LM Studio's keys and instance ids are also trimmed of
           surrounding spaces.
         - Strings are copies: ids, aliases and tags are decoded (JSON escapes
           undone) into the result's own arena, NUL-terminated, so a result
           never points into the body and outlives it. The views point INTO the
           result, so never copy one by value (pass pointers).
       More than RSD_MAX_TAGS tags: the protecting ones are kept first.
       More entries than RSD_LISTING_MAX_MODELS, or ids beyond
       RSD_LISTING_ARENA_BYTES: the first ones are kept and truncated is set;
       the drivers then refuse to act on the listing (observe), because
       the keep or a resident may be among the entries cut off.
       int rsd_listing_find(const rsd_listing *l, rsd_str name);
           index of the entry whose id or an alias equals name, else -1.
       rsd_model_state: UNKNOWN, UNLOADED, LOADING, LOADED, SLEEPING,
         DOWNLOADING, FAILED; rsd_model_state_resident() is true for LOADING,
         LOADED and SLEEPING (a sleeping model holds its slot).
     llama.cpp router
       int rsd_router_parse_models(body, len, toks, n_toks, rsd_listing *out);
           GET /v1/models (= /models). RSD_OK with out filled, or the JSON
           error (RSD_ERR_JSON, _DEPTH, _TOKENS, _TOO_LARGE, RSD_ERR_TRUNCATED).
           A top level that is not an object, or "data" that is not an array,
           is an empty listing ({}, null, {"data":[{"id":42}]} -> 0).
           State: status.value when status is an object, else status
           itself; "loaded", "loading", "sleeping", "unloaded", "downloading";
           "downloaded" reads as UNLOADED; status.failed == true on an entry
           (only on "unloaded") or the legacy value "failed" gives
           FAILED with exit_code from status.exit_code when it is an integer.
           Anything else is UNKNOWN. has_states = some entry is not UNKNOWN:
           false for a plain llama-server (its entries have no status) and for
           an empty list, which is how a driver tells "not a router".
           Also read: aliases[] and tags[] (string elements only),
           status.args "--ctx-size N" / "-c N" -> context_length (meta.n_ctx,
           what the child runs with, wins when present),
           meta.n_ctx_train -> max_context, meta.size -> size_bytes.
       int rsd_router_parse_props(body, len, toks, n_toks, rsd_router_props *out);
           GET /props. is_router = (role == "router"); max_instances is
           a JSON number, finite and > 0, floored, saturated at 0x7FFFFFFF;
           strings, null, 0, negatives, fractions below 1 -> 0 = unknown.
           unlimited = is_router and max_instances is exactly 0 (--models-max
           0). RSD_OK or a JSON error; a non-object is RSD_OK, all unknown.
       int rsd_router_parse_slots(body, len, toks, n_toks, rsd_slot *out, cap);
           GET /slots of a llama-server (a router's /slots?model=M answers
           the same): how many slots the answer lists, the first cap of them
           in out: id ("id", else the slot's place), n_ctx, n_prompt_tokens
           (0 where the member is absent: b10116 leaves it out of a slot
           that never ran; negatives read as 0). A JSON error, or
           RSD_ERR_PAYLOAD for a top level that is not an array or an
           element that is not an object. The kv cache saves of rsd-serve
           and of the ensurer (kv_slots) read it.
       Error bodies: rsd_server_error_parse ("Ollama and LM Studio", below)
           reads every runtime's error envelope.
       Storage: an rsd_listing is a header (under 64 bytes) over the caller's
       storage: rsd_listing_init(l, models, max_models, arena, arena_bytes)
       gives it arrays the caller owns (no allocation); rsd_listing_create(desc)
       allocates header and storage in one block from desc->allocator (zeroed
       desc: RSD_LISTING_DEFAULT_MODELS 64 entries, RSD_LISTING_ARENA_PER_MODEL
       176 arena bytes per entry, at least RSD_MODEL_ID_MAX; under 17 KiB on
       x86-64: 64 entries of 88 bytes and an arena of 11 KiB),
       rsd_listing_footprint(desc) says how much,
       rsd_listing_destroy frees it. A listing without storage is RSD_ERR_ARG
       to every parser. More entries than max_models, or strings beyond
       arena_bytes: the first ones are kept and truncated is set (nothing is
       written past either). RSD_LISTING_MAX_MODELS 256, RSD_LISTING_ARENA_BYTES
       65536 and RSD_LISTING_MAX_TOKENS 16384 (a whole payload of about 200
       real router entries, for tools that keep every token) size a large
       listing, for tools and tests. Fuzzed: fuzz/fuzz_router_payload.c (no crash, ids within
       limits, deterministic, agreement with a token-count pass).

     Ollama and LM Studio
       Server payloads, Ollama and LM Studio (pure, JSON only; no I/O, no allocation),
       under the rules above. Each parser takes the response body and a caller token
       array (it holds the top level plus one entry or member, as above;
       RSD_RECONCILE_TOKENS is plenty) and fills a fixed-size caller-owned result whose strings
       are copies in the result itself. Hostile input never crashes and never
       over-fills: an entry without a usable id is dropped and counted; a wrong-typed
       optional field reads as absent; a body that is not the expected shape is an
       error (RSD_ERR_JSON_TYPE), never a half result.

       Error bodies (every runtime):
         int rsd_server_error_parse(out, body, len, toks, cap)
             The error member of any reply: {"error":"text"} (Ollama, LM Studio
             0.3/0.4 text form) or {"error":{"type","message","code","param"}}
             (LM Studio v1 object form). 1 = present (out->message, out->type,
             out->code filled; truncated and control bytes replaced by ' '),
             0 = valid JSON with no error member, <0 = not JSON.
     Ollama
         int rsd_ollama_ps_listing(body, len, toks, n_toks, out)   GET /api/ps
             /api/ps (or /api/tags) into the neutral rsd_listing: every entry
             LOADED; id = "model" when usable, else "name", and the other an alias
             when it differs; sizes only when the server gave numbers (absent is
             never zero); context_length. "models": null is empty. RSD_OK,
             RSD_ERR_JSON_TYPE (not {"models":[...]}), a JSON error. Entries past
             RSD_LISTING_MAX_MODELS or its arena set truncated.
         int rsd_ollama_name_normalise(name, out, cap)
             The display form Ollama lists: host/namespace/model:tag with the
             default host (registry.ollama.ai) and the "library" namespace
             dropped, ":latest" added when the last segment has no tag, spaces
             trimmed around the name and after a dropped part. Idempotent. Case is kept (compares exactly).
             Length, or RSD_ERR_BUFFER / RSD_ERR_MODEL_ID (empty).
         int rsd_ollama_parse_version(out, body, len, toks, cap)   GET /api/version
         int rsd_ollama_parse_generate(out, body, len, toks, cap)  POST /api/generate
             {"done":true,"done_reason":"load"|"unload"} or {"error":...}:
             RSD_OK, RSD_ERR_SERVER_ERROR (out->error filled), <0 bad body.
         int rsd_ollama_load_body(buf, cap, model, opts)
             {"model":m,"stream":false[,"keep_alive":s][,"options":{"num_ctx":n}]}
         int rsd_ollama_unload_body(buf, cap, model)
             {"model":m,"keep_alive":0,"stream":false}   (without the prompt)
       Limits: RSD_SERVER_ERROR_MAX 256.

     LM Studio
         int rsd_lms_parse_models(cat, body, len, toks, cap)
             Any catalog, tier by body shape: {"models":[...]} is REST v1
             (0.4+: key, type, max_context_length, size_bytes, capabilities,
             loaded_instances[{id, config.context_length}]); {"data":[...]} is v0
             (0.3: id, state "loaded"/"not-loaded", loaded_context_length) or the
             OpenAI list (id only) -- the caller tells those two apart by the URL
             it asked. cat->tier is V1 or V0. Entries listing one model key twice
             (LM Link) are folded -- this is about entries, not about JSON
             keys, where the last wins as everywhere: the first entry wins,
             missing scalars are filled from later ones, instances are concatenated without duplicate ids. v0 rows
             become models with one instance {id, context} when loaded.
             Returns the models kept (>= 0); RSD_ERR_SERVER_ERROR for a
             200-with-error body ({"error":...}: a 0.3 server asked for v1, or an
             unknown route); RSD_ERR_JSON_TYPE for any other shape.
         int rsd_lms_catalog_from_response(cat, tier, status, body, len, toks, cap)
             One step of tier detection: tier is what was asked (V1 =
             /api/v1/models, V0 = /api/v0/models, OPENAI = /v1/models). 401/403
             -> RSD_ERR_AUTH; a 2xx body of that tier's shape -> the count (cat->tier
             = tier); anything else -> <0 with cat->error holding the server's
             message or "HTTP <status>" (try the next tier).
         int rsd_lms_resolve(cat, requested, default_id, peers, n_peers, res)
             Instance resolution: an instance id equal to requested ->
             INSTANCE; a key equal to requested -> JIT when it has no instance,
             else INSTANCE (the instance equal to default_id, else the first with
             no LM Link peer, else the first); else UNKNOWN. res->wire_id is
             what to send; res->peer_mask has bit p set when peers[p] (another
             server's listing, different root) also has that instance loaded.
         int rsd_lms_residents(cat, owned_ids, n_owned, out, cap)
             One resident per distinct model key with a loaded instance
             (listing order); loaded_by_us when one of its instances is owned.
         int rsd_lms_parse_reply(out, body, len, toks, cap)
             Load reply {"instance_id"|"model_instance_id", "status",
             "load_config"|"config": {"context_length"}, "load_time_seconds"} or
             unload reply {"instance_id"}; RSD_ERR_SERVER_ERROR on an error member
             (any status: LM Studio answers unknown routes 200 + error).
         int rsd_lms_load_body(buf, cap, key, opts)
             The exact body LM Studio's own client sends: {"model":k,"echo_load_config":true} then, only
             when set, context_length, flash_attention, eval_batch_size,
             num_experts, offload_kv_cache_to_gpu, in that order.
         int rsd_lms_unload_body(buf, cap, instance_id)   {"instance_id":id}
         The root URL is rsd_root_url's (the reconcile section, beside the target key).
       Cost: the parser builds an index as it folds (hashes of keys and
       instance ids, each model's instances chained), so folding, resolution,
       residents and the driver's fallback filtering are linear in the listing (plus
       the peers' ids and the owned ids), not products of them. No allocation: the
       index lives in the catalog (under 3 KiB; the catalog under 32 KiB).
       Limits: RSD_LMS_MAX_MODELS 256 (folded), RSD_LMS_MAX_INSTANCES 64,
       RSD_LMS_MAX_PEERS 32, RSD_LMS_ARENA_BYTES 16384 (the copied keys and
       instance ids); beyond them entries are dropped with truncated set, so an
       UNKNOWN resolution on a truncated catalog proves nothing.

   ---- driver: the sans-I/O reconcile -----------------------------------------
       One reconcile = "make model X resident on this server", as a state
       machine that never touches a socket, a clock, a file or the heap. It
       is opaque and lives in the caller's memory: allocate
       rsd_reconcile_footprint(lim) bytes (8-byte aligned, as malloc's are)
       and make it there with rsd_reconcile_init (see Memory below); free that
       memory to end it. The caller performs the steps it asks for (HTTP
       requests, waits, the cross-process lock) and feeds the answers back. The
       shell in residency_http.h runs it over sockets; tests run it with canned
       answers.

           size_t size = rsd_reconcile_footprint(NULL);      (the defaults)
           rsd_reconcile *r = (rsd_reconcile *)malloc(size);
           rsd_reconcile_init(r, size, NULL);                (once; reused by every begin)
           const rsd_reconcile_result *res = rsd_reconcile_result_of(r);
           const rsd_reconcile_notice *notices;
           rsd_reconcile_desc d;  memset(&d, 0, sizeof d);
           d.base_url = "http://mini:8080/v1";  d.keep = "qwen-coder";
           d.cache = &my_cache;  d.lock = true;
           rsd_reconcile_begin(r, &d, now_ms());
           for (;;) {
               rsd_step s = rsd_reconcile_next(r, now_ms());
               n = rsd_reconcile_notices(r, &notices);
               while (seen < n) show(&notices[seen++]);                (live)
               if (s.kind == RSD_STEP_HTTP)   { send s.http; then
                   rsd_reconcile_feed(r, transport_rc, status, body, len, now_ms()); }
               else if (s.kind == RSD_STEP_WAIT)   sleep_until(s.wake_ms);
               else if (s.kind == RSD_STEP_LOCK)   { take lock s.key by s.deadline_ms;
                   rsd_reconcile_lock_done(r, held, generation_now, now_ms()); }
               else if (s.kind == RSD_STEP_COMMIT) { persist res->attr_add /
                   attr_remove, bump the generation;
                   rsd_reconcile_commit_done(r, new_generation); }   (optional)
               else if (s.kind == RSD_STEP_UNLOCK) release the lock;
               else break;                                   (RSD_STEP_DONE)
           }
           res->outcome, error, decision, reason, message, evicted ...
           free(r);                                          (it owns nothing else)

       const rsd_reconcile_result *rsd_reconcile_result_of(const rsd_reconcile *r);
           The result (below): final after DONE, its counters live; the same
           pointer for the reconcile's life.
       int rsd_reconcile_notices(const rsd_reconcile *r, const rsd_reconcile_notice **out);
           How many notices this reconcile has so far; *out (NULL: not
           written) = the first. They are appended as they happen.
       const char *rsd_reconcile_key(const rsd_reconcile *r);
           The normalised target key of the last begin ("" before one).
       double rsd_reconcile_progress(const rsd_reconcile *r, const char **stage);
           The waited load's last progress value 0..1 (-1 = none yet) and
           *stage its stage name ("" = none); see rsd_reconcile_event.
       void rsd_reconcile_scratch(r, rsd_json_tok **toks, uint32_t *n_toks,
                                  char **buf, size_t *cap);
           Its JSON tokens and answers' buffer, for the host to borrow while
           no reconcile runs (before begin, after DONE), e.g. for detection
           (rsd_detect.toks and .buf). Nothing is written when an argument is NULL.

       int rsd_reconcile_begin(rsd_reconcile *r, const rsd_reconcile_desc *d,
                               uint64_t now_ms);
           Validates and COPIES everything it needs from d (the caller may free
           its strings afterwards); no I/O. RSD_OK, RSD_ERR_ARG (NULL, no keep,
           no base_url, a bearer with control bytes, n_protected/n_ours out of
           range), RSD_ERR_URL (base_url empty, with '?' or '#', or longer than
           RSD_RECONCILE_URL_MAX - 32), RSD_ERR_MODEL_ID (keep, an own or a
           protected id of RSD_MODEL_ID_MAX bytes or more), RSD_ERR_BUFFER (the
           normalised key does not fit RSD_TARGET_KEY_MAX). On error the object
           is left DONE with result.error set, so next() returns DONE.
       rsd_step rsd_reconcile_next(rsd_reconcile *r, uint64_t now_ms);
           What to do now. Idempotent while a step is outstanding: it returns
           the same HTTP or LOCK step again until it is answered (do not send
           it twice); WAIT until now_ms >= wake_ms; COMMIT and UNLOCK count as
           done when next() is called again. Views in the step point into r
           and stay valid until the next call that changes r.
             RSD_STEP_HTTP    s.http: op, model, method ("GET"/"POST"), url
                              (full, NUL-terminated), headers[n_headers]
                              (Content-Type: application/json on POSTs,
                              Authorization: Bearer <token> when d.bearer),
                              body + body_len (NULL/0 for GET), timeout_ms
                              (never past the overall deadline, at least 1).
             RSD_STEP_WAIT    come back at s.wake_ms (absolute, caller's clock);
                              s.wait_model = the model waited for.
             RSD_STEP_LOCK    take the cross-process lock named s.key (the
                              normalised target key) waiting at most until
                              s.deadline_ms (the reconcile's own deadline),
                              then rsd_reconcile_lock_done.
             RSD_STEP_COMMIT  mutations happened: persist result.attr_add and
                              result.attr_remove[] under s.key, bump the mutation
                              generation, optionally tell it with
                              rsd_reconcile_commit_done. Comes before UNLOCK.
             RSD_STEP_UNLOCK  release the lock (once per LOCK, always, even when
                              lock_done said held = false).
             RSD_STEP_DONE    s.result = result.error; nothing more to do.
       int rsd_reconcile_body(rsd_reconcile *r, int http_status, const char *data, size_t len);
           The next decoded bytes of the outstanding HTTP step's answer, as they
           arrive (http_status from its head: an HTTP client knows it before
           the body). A 2xx listing is read as it arrives (rsd_json_split into
           the answers' buffer); any other answer is kept whole in that buffer,
           and one larger than it is RSD_ERR_TOO_LARGE at the feed. RSD_OK,
           RSD_ERR_STATE when no HTTP step is outstanding, RSD_ERR_ARG.
       int rsd_reconcile_feed(rsd_reconcile *r, int transport, int http_status,
                              const char *body, size_t len, uint64_t now_ms);
           The answer to the outstanding HTTP step. transport is RSD_OK or a
           negative RSD_ERR_* (RSD_ERR_TIMEOUT, RSD_ERR_CONNECT, ...: then
           http_status and body are ignored). body is the answer's last piece,
           or all of it (NULL after pieces given to rsd_reconcile_body): one
           path, so a whole body is read exactly as the same bytes in pieces.
           Nothing is kept past the feed. RSD_OK, or RSD_ERR_STATE when no HTTP
           step is outstanding.
       int rsd_reconcile_lock_done(rsd_reconcile *r, bool held,
                                   uint64_t generation, uint64_t now_ms);
           held = the lock is held; false = proceeding without it (a warning
           notice says so: the lock fails open, as upstream does). generation = the
           target's
           mutation generation read after taking the lock (rsd_state_gen_read).
           Unless held, d.has_generation and generation == d.generation
           (no process using this library mutated the target since the
           listing), the machine lists again and decides again before any
           mutation. RSD_OK or RSD_ERR_STATE.
       int rsd_reconcile_set_ours(rsd_reconcile *r, const char *const *ours, int n);
           Optional, while the LOCK step is outstanding (before lock_done): the
           attribution read again under the lock replaces d.ours (a model
           another process loaded while this one waited is then known as
           residency's). A set different from the current one makes lock_done
           list and decide again even when the generation is unchanged.
           RSD_OK, RSD_ERR_STATE (no LOCK step), RSD_ERR_ARG (n out of range,
           an id of RSD_MODEL_ID_MAX bytes or more).
       int rsd_reconcile_commit_done(rsd_reconcile *r, uint64_t generation);
           After a COMMIT step: the generation after the bump, under which the
           decision is cached. Without it the cache entry uses d.generation.
       int rsd_reconcile_commit_failed(rsd_reconcile *r, int error, const char *what);
           After a COMMIT step the host could not persist (the attribution or
           the generation not written: a full disk, a busy file lock):
           result.state_error = error, one degraded/warning notice (dmsg
           STATE_FAILED) "could not record this change on '<target>' in the
           state directory (<what>); other processes sharing it may act on a
           stale view ...", and nothing is cached (the key's entries are
           dropped as after any mutation). The outcome is unchanged: the model
           is as resident as it was. RSD_OK or RSD_ERR_STATE.
       int rsd_reconcile_event(rsd_reconcile *r, const char *data, size_t len,
                               uint64_t now_ms);
           Optional, for hosts that keep GET <root>/models/sse open: feed each event's data (the JSON after "data: "). During a
           WAIT (s.wait_model names the model waited for), an event whose
           "model" is that model (any name the decision's listing gives it) or
           "*", and whose data.status is not "loading"/"downloading" (progress),
           ends the wait: the next next() polls at once. The listing stays the
           truth (the poll confirms), so results are the same as with polls
           alone; only the latency changes: DONE within a round trip of the
           "loaded" event instead of up to one poll interval (test: a 350 ms
           load on rsd-sim ended 351 ms after the POST instead of 626 ms). Returns 1
           when the event ends the wait (the poll is due now, or already was),
           0 when it was ignored (another model, progress, not waiting, not
           JSON), RSD_ERR_ARG. A progress event of the waited model leaves its
           stage ("" until one names a plain stage name: "fit_params",
           "text_model", "mmproj_model") and value (0..1) for
           rsd_reconcile_progress, from either shape:
           {"status":"loading","progress":{"stage":S,"value":V}} (later routers,
           PR #24828) or {"status":"loading","progress":{"stages":[...],
           "current":S,"value":V}} (July); begin clears them. The shell
           (rsd_ensurer, residency_http.h) subscribes to /models/sse on a
           llama.cpp router while it waits and feeds every event here; without
           events, polling alone is complete.
       const char *rsd_outcome_str(int outcome), rsd_step_kind_str(int kind),
       rsd_http_op_str(int op), rsd_driver_msg_str(int dmsg): never NULL.
       const rsd_runtime *rsd_runtime_router(void);
           The llama.cpp router adapter (the default when d.runtime is NULL).

     Desc (zeroed fields are defaults; every string is copied by begin)
           runtime (NULL = router), base_url (as configured, "http://h:8080/v1";
           a base without "/v1" works too), target_key (NULL = normalised
           "<runtime name>|<base_url>" by rsd_target_key_normalise),
           target_id (messages; NULL = base_url), runtime_id (NULL = runtime
           name), keep, residency_env (the RESIDENCY value; NULL = unset),
           user_managed (per-target opt-out), protected_models + n_protected,
           keep_pinned, context_length, model_max_context (0 = the listing's
           meta.n_ctx_train when known), context_ceiling, deadline_ms (0 =
           120000, the whole reconcile: lock wait, unloads, load, wait),
           probe_timeout_ms (0 = 1500, per listing/props request; doubled for
           each retry after a timeout, see step 2), restore_ms
           (0 = 30000: extra time for restoring after a failed load, so the
           worst case is deadline + restore), bearer, cache (NULL = no TTL fast
           path), generation + has_generation, ours + n_ours (ids this library
           loaded on the target: the persisted attribution), lock (emit
           LOCK/UNLOCK around mutations), logger, capacity_bytes and
           keep_bytes (0 = unknown); capacity_known + max_instances +
           unlimited (the server's instance limit is already known, e.g. from
           detection: no capacity request); first_listing + first_listing_len
           (the answer to the first listing GET, already read: begin takes it
           as that answer and does not send it; it is parsed in begin and not
           kept). For runtimes with instances (LM Studio): default_model,
           explicit_load, load (the load body's options; its context is
           context_length, clamped, or load.context_length when that is 0),
           owned + n_owned (instances this library loaded there, up to
           RSD_RECONCILE_MAX_OWNED), peers + n_peers (LM Link). The defaults of
           deadline_ms, probe_timeout_ms and restore_ms are the runtime's when it
           has its own (LM Studio: 300000, 5000, 120000).

     Behaviour, in order (the upstream driver's order)
        1. Cache: a live rsd_cache_lookup hit for (key, keep) ends the
           reconcile in begin with no request and no notice: RESIDENT, OBSERVED
           or DECLINED (with the code it had) and the wire id, cache_hit set.
           Otherwise begin already issues the first request (next() returns it).
        2. List (GET <root>/v1/models, probe timeout). On a router
           (RSD_RT_PROBE_RETRY) a listing, props or poll request that times out
           is sent again with twice the timeout (1.5 s, 3 s, 6 s, ...) while the
           overall deadline allows: a busy server answers late, it is not gone;
           only the deadline ends the attempts. Any other failure
           (transport, non-2xx, bad JSON, not a router, truncated, more than
           RSD_MAX_RESIDENTS residents) -> outcome DEGRADED, decision OBSERVE,
           reason PROBE_FAILED, not cached, nothing mutated; one
           degraded/info notice says why (the level is info so a sink can
           drop it).
        3. Capacity (GET <root>/props, probe timeout, retried as a listing;
           failure = unknown).
           unlimited (--models-max 0) is passed to rsd_decide as a free slot.
        4. rsd_decide on the listing: residents = entries LOADING, LOADED or
           SLEEPING; keep tags/aliases from the keep's entry in any state;
           ours from d.ours (id or alias).
        5. Gate: a plan that evicts while the listing does not
           name the keep -> rsd_plan_decline_unloadable: DECLINED, one notice.
        6. Notices of the plan are rendered to text and appended to
           the notices at once (readable while the machine runs) -- except for
           a plan that will take the lock to mutate (LOAD, LOAD_AFTER_EVICT with
           d.lock): its notices wait for the decision under the lock (step 8)
           and appear then, so a plan the lock overtakes (another process
           changed the server meanwhile) never shows.
        7. OBSERVE (opt-out; never a mutating request) and DECLINE end
           here and are cached (via rsd_cache_store). ALREADY_RESIDENT
           ends here (cached) unless the keep is LOADING: then a read-only wait
           without the lock.
        8. LOAD / LOAD_AFTER_EVICT: LOCK (when d.lock), then the check of
           lock_done above (with the attribution given by set_ours, if any): re-list,
           re-decide, re-gate; then the notices of the plan decided under the
           lock (the held ones when it did not change; the new plan's when it
           did).
        9. Unload the victims one at a time (POST <root>/models/unload
           {"model": id}); a failure is a warning notice and the reconcile goes
           on, but nothing is cached afterwards. On a router
           (RSD_RT_UNLOAD_WAIT) each unload is followed by a wait (polls as in
           step 11, woken by /models/sse) until the victim is listed unloaded
           (failed:true or gone counts too), bounded by the overall deadline:
           the router answers the unload while the child is still stopping, the
           stopping child still counts against --models-max, and a load sent
           then makes a July 2026 router unload its own least-recently-used
           model as well, pinned or not (later routers wait for it instead).
           A victim still listed at the deadline: LOAD_FAILED RSD_ERR_TIMEOUT
           "timed out waiting for '<id>' to unload", the load never sent, what
           was unloaded restored (step 12).
       10. Load (POST <root>/models/load {"model": keep}) unless the keep is
           LOADED/SLEEPING; LOADING skips the POST and waits. Answers:
           2xx -> wait; 400 "already running" -> resident, wait (no attribution);
           500 "model limit reached" -> re-list: when that listing shows room
           (the known capacity above what runs) or another model loading, a
           concurrent cold load took the place for now (llama.cpp #28774, the
           July build and build 11037 alike): load again after a backoff
           (below); else a capacity answer: re-decide with max_instances = the
           residents now listed, unload what that plan evicts and load again
           (at most RSD_RECONCILE_LOAD_ATTEMPTS - 1 such rounds); nothing
           evictable -> LOAD_FAILED RSD_ERR_MODEL_LIMIT; 500 plain text "proxy
           error: Could not establish connection" (routers before PR #29217,
           right after an eviction) -> the backoff. The backoff: a WAIT step of
           50, 100, 200, 400, then 500 ms (no wait_model: no event ends it),
           then the load again, as long as the deadline allows; nothing is
           reported failed and nothing restored meanwhile. At the deadline:
           LOAD_FAILED RSD_ERR_TIMEOUT "the server still refused to load it at
           the deadline (<the last answer>)", then step 12 as any failed load;
           400
           "downloading" -> wait (step 11a); any other status -> LOAD_FAILED
           RSD_ERR_LOAD_REJECTED ("llama.cpp router rejected <url>: HTTP
           <status>: <the server's error message>", the message read by
           rsd_server_error_parse and left out when the body has none, e.g.
           "... HTTP 404: File Not Found"; on a 4xx, when the listing names every
           servable model (RSD_RT_CATALOG) and the keep is not in it, followed by
           "; '<id>' is not served there: it serves N models: a, b, c, d, e and
           K more"); a transport error -> LOAD_FAILED.
           An unload or poll that fails quotes the server's message the same way.
       11. Wait for loaded: GET the listing after 20 ms, then 40, 80, ...
           capped at 500 ms between polls, the last poll at the deadline; so
           DONE comes within one poll interval of the model being ready.
           Transport errors, 5xx and unparseable bodies are retried until the
           deadline; 4xx fails. failed:true (FAILED) ends the wait: "llama.cpp
           router reports '<id>' failed to load (exit code N)"
           RSD_ERR_LOAD_FAILED -- but only when it is news: a model already
           listed failed:true (with the same exit code) when the wait began
           (an earlier failure, an unload that timed out, a preset never
           loaded: the router keeps the flag) counts only once the entry has
           changed since (a poll showing another state or exit code, or a
           /models/sse event for the model) or after
           RSD_RECONCILE_FAILED_GRACE_MS (3 s); a router that queues the load
           lists the old entry until the load starts. A model missing from a
           listing keeps polling.
           The deadline -> "timed out waiting for '<id>' to load" RSD_ERR_TIMEOUT
           (" (still downloading)" appended when the last poll said so).
       11a. Downloading (a status value, never a failure):
           - the keep DOWNLOADING in the decision's listing: nothing is
             evicted, locked or loaded for a model that is not there yet; a
             read-only wait (polls as above) until its status changes, then
             list again and decide again (new plan notices only if the plan
             changed), then go on as usual. A download longer than the
             deadline ends LOAD_FAILED RSD_ERR_TIMEOUT, nothing mutated.
           - DOWNLOADING while waiting after our load (a child that downloads
             first: downloading -> loading -> loaded) keeps waiting.
           - the load answered "downloading" (RSD_LOAD_DOWNLOADING; rsd-sim
             answers 400 "model is downloading", the real router's answer is
             unconfirmed), or the keep went downloading -> unloaded while we
             waited: the load is POSTed again once the download is done
             (within RSD_RECONCILE_LOAD_ATTEMPTS), then waited for.
       12. Failed load -> restore. When the decision had
           protected residents (step 13's set) and a load POST was sent, the
           protected ones the server displaced are found first (in the last
           poll when one came after the POST, else one GET of the listing) and
           added to result.evicted (displaced = true). Then one restore loop
           (the same one as step 13's reloads): each evicted model in order,
           POST load + wait, bounded by restore_ms;
           notices: a load-failed/error notice first ("loading '<keep>' on
           '<target>' failed: <reason>"), then restored/warning (text
           "... restored 'a' so the target keeps serving.", detail bit
           RSD_DETAIL_RESTORED) and unrestored (will-not-fit/error,
           RSD_DETAIL_UNRESTORED) for our own evictions, then one notice per
           displaced model as in step 13; the ids are result.evicted[] with
           their restored flags. Restored models keep their attribution (they
           are not in attr_remove).
       13. Protected pass after a load this reconcile
           made or waited for, when the decision's listing had protected
           residents other than the keep and the plan's victims: tag-pinned
           ones and every caller-protected tier (d.protected_models, any role).
           The listing of the last poll (the one that showed the keep loaded)
           is checked; no extra request (upstream made one GET after every such
           load, and only for tag pins). Nothing protected gone: done. A
           protected model gone (the server's LRU displaced it) is added to
           result.evicted with displaced = true and:
           - reloaded (POST load + wait) only while a free slot is known:
             capacity known (or unlimited) and fewer residents listed than
             it. Reloading into a full server makes the router evict by its
             own LRU, perhaps the keep just loaded, so then it is NOT reloaded
             (capacity unknown counts as full: on a router, a load that
             displaced something shows the server was full); notice
             swap/warning "loading '<keep>' on '<target>' displaced pinned
             '<p>', and residency did not reload it: <why>. Reload it on the
             server, or raise the server's model limit." (.subject = p,
             detail SWAPPED_OUT | UNRESTORED); the turn still succeeds:
             the user asked for the keep, and it is resident.
           - reloaded: restored/info "... displaced pinned '<p>'; reloaded it
             into a free slot." (evicted[].restored set). A reload that fails
             gives the swap/warning notice above ("its reload failed").
           The notices say "protected" instead of "pinned" for a model that is
           protected by the caller rather than by a tag.
           After reloads, the last poll must still show the keep resident (a
           concurrent client can change the server meanwhile): if not, the
           keep is loaded again (one more load attempt, no second pass), so
           the pass never leaves the keep displaced. Only with no attempt or
           time left: LOAD_FAILED RSD_ERR_DISPLACED ("'<keep>' was displaced
           after it loaded") with a load-failed/error notice; upstream failed
           the turn whenever its restore displaced the keep.
       13a. Context: a resident keep (already resident, or once loaded) whose
           listing says it runs with less context than asked (load_context, or
           d.context_length: the router's meta.n_ctx, else --ctx-size in
           status.args) gets one stress/warning notice (dmsg CONTEXT, subject
           the keep): "'<keep>' on '<target>' runs with a context of N tokens,
           less than the M requested; the server's own setting for the model
           decides it, not this request." A router's preset sets the context;
           a load request cannot change it, and the server itself says nothing.
       14. COMMIT (when anything was mutated) with attr_add (the keep, when a
           load POST of ours succeeded) and attr_remove (names of evicted,
           unrestored models found in d.ours); cache: every entry of the key is
           invalidated after a mutation, then (key, keep) is stored unless an
           unload or the load failed; UNLOCK; DONE.
       Requests: no more than the upstream driver sends in the same scenario,
       except the re-list under the lock (skipped when the generation proves nothing changed),
       the faster polls of step 11 and, on a router, the polls after each
       unload (step 9: usually one); the pinned pass costs no GET.
       Sizes: desc.capacity_bytes (e.g. the GPU's VRAM total) and
       desc.keep_bytes (0 = the keep's listed size_vram or size, when the
       listing has one) go into rsd_facts; when they and every resident's
       size are known, rsd_decide evicts by bytes (see the reconcile section). Ollama's
       /api/ps gives every resident's size_vram; a router lists meta.size for
       models that have loaded once. Unknown anywhere: the count rules.
       The router never receives a request that names a model on a GET, so no
       probe can autoload; the machine sends no "?model=" probes.

     Result (rsd_reconcile_result_of(r); final after DONE, counters live)
           outcome     RESIDENT (keep loaded or sleeping), OBSERVED (opt-out),
                       DECLINED, LOAD_FAILED, DEGRADED (could not read the
                       server, or the deadline passed before any mutation)
           error       RSD_OK or why: RSD_ERR_NOT_ROUTER, _LISTING_TRUNCATED,
                       _LOAD_REJECTED, _LOAD_FAILED, _MODEL_LIMIT, _DISPLACED,
                       _PAYLOAD, RSD_ERR_TIMEOUT, RSD_ERR_CONNECT, RSD_ERR_HTTP_STATUS,
                       a JSON error, RSD_ERR_RESIDENTS_LIMIT ...
           message     one line for the operator (the upstream error text)
           decision, reason, would, keep_resident (before), load_context,
           cache_hit, cached, mutated, loaded (our load POST succeeded),
           unload_failed, lock_held, redecided, evicted[] + n_evicted (models
           that left the server: our unloads in order, then pinned models the
           server displaced, displaced = true; restored = loaded back),
           attr_add[] + n_attr_add and attr_remove[] + n_attr_remove (model,
           instance: views into r, valid until the next begin), wire_id (the id
           to send: the keep, or the instance resolved or loaded), model_key,
           requests, load_attempts, elapsed_ms.
       Notices: rsd_reconcile_notices(r, &n) gives n[0 .. count) (result.notices_dropped
       counts those beyond the limits' max_notices, RSD_RECONCILE_MAX_NOTICES by
       default, or their text arena), appended as they happen: the plan's notices
       (dmsg PLAN, rsd_notice fields kept, subject index -1 and the id in
       .subject) and driver notices (dmsg: kind/level):
           RESTORED       restored/warning (after a failed load),
                          restored/info (pinned pass reload)
           UNRESTORED     will-not-fit/error, swap/warning (pinned pass)
           LOAD_FAILED    load-failed/error: the keep's load failed (any cause:
                          rejected, failed:true, timeout, displaced)
           UNLOAD_FAILED  degraded/warning    LOCK_UNLOCKED  degraded/warning
           DEGRADED       degraded/info       STATE_FAILED   degraded/warning
           CONTEXT        stress/warning (step 13a)
           ATTR_RESET     degraded/warning (added by the shell: the attribution
                          file was corrupt and has been reset)
           ENV_UNKNOWN    degraded/warning (added by the shell, once per ensurer:
                          RESIDENCY holds a value it does not know; managed)
         The kinds restored and load-failed are ours (upstream folded them into
         swap and threw the error); rsd_notice_kind_str gives "restored" and
         "load-failed". .text is the rendered line (cut at
       RSD_RECONCILE_NOTICE_TEXT_MAX - 1 bytes, or at the room left in the
       notice text arena, text_cut set); .text and .subject point into the
       reconcile (valid until the next begin).

     Runtimes
       rsd_runtime is a table of hooks plus flags and defaults; the
       llama.cpp router is rsd_runtime_router(), Ollama rsd_runtime_ollama(),
       LM Studio rsd_runtime_lmstudio(). Another runtime supplies its own table
       (its name is the key prefix) and reuses the whole machine -- begin's desc
       checks, the cache, notices, lock, COMMIT, UNLOCK, the restore loop and the
       result -- without touching the implementation (examples/custom_runtime.c
       shows one). Every hook gets c, the reconcile's rsd_runtime_ctx: what a
       runtime needs of it, kept current by the machine. It reads c->root,
       c->keep, c->target_id, c->ours[0 .. c->n_ours) (the attribution),
       c->owned[0 .. c->n_owned) (the instances this library loaded there:
       desc.owned or rsd_reconcile_set_owned's; in a load-first runtime the
       instance the keep's load makes or adopt takes joins, one unloaded
       leaves; a runtime with RSD_RT_INSTANCES),
       c->explicit_load (desc.explicit_load), c->context_length
       (desc.context_length), c->op_instance, c->op_evicted,
       c->toks + c->max_tokens; it writes c->url
       (RSD_RECONCILE_URL_MAX bytes), c->body (RSD_RECONCILE_BODY_MAX),
       c->made_instance (RSD_MODEL_ID_MAX), c->why (RSD_RECONCILE_TEXT_MAX: a
       load-first runtime's reason) and c->data (RSD_RECONCILE_RT_DATA
       bytes of scratch, 8-aligned, zeroed by begin); c->r is the reconcile
       for the calls below. Accessors give the rest: rsd_reconcile_plan(c->r)
       (the last decision: load_context, fallback, ...) and
       rsd_reconcile_facts(c->r) (what the next rsd_reconcile_decide reads).
       Hooks of every runtime:
           request(c, op, model, out)   build the request: write the URL into
               c->url (rsd_reconcile_set_url(c->r, path) appends a path to the
               root), the body into c->body (rsd_reconcile_model_body writes
               {"model":id}), then rsd_reconcile_http_fill(c->r, out, method,
               body_len or -1) adds the headers. op is LIST, CAPACITY, LOAD,
               UNLOAD or POLL (POLL is built as LIST). During an UNLOAD,
               c->op_instance is the victim's listed instance id ("" if none);
               during a restoring LOAD c->op_evicted is the entry brought back;
               rsd_reconcile_plan(c->r)->load_context is the clamped context
               for a LOAD of the keep (model == c->keep).
           parse_list(c, body, len, out)  fill *out (c->toks is the token
               array); <0 = the listing cannot be acted on (degrade). The body
               is whole: at most max_body_bytes.
           list_entry(c, out, key, el), list_end(c, out, rc, top)  instead of
               parse_list (both or neither): a 2xx listing is read as it
               arrives through rsd_json_split into the answers' buffer;
               list_entry takes each entry of a top-level list (el NULL when
               that list begins: reset out), list_end the splitter's verdict
               rc (<0: the answer is broken or over the buffer) and the kept
               top level, and returns as parse_list. The built-in runtimes
               read their listings this way.
           parse_capacity(c, ...)   NULL = no capacity request.
           load_answer(c, status, body, len)  ACCEPTED (wait if RSD_RT_WAIT),
               DOWNLOADING (wait, load again when the download ends),
               ALREADY, LIMIT (re-list; room listed or another model loading:
               BUSY's backoff; else re-decide with the server full at its
               listed count, unload the plan's evict list, or with none the
               first fallback entry, one at a time for JIT; load again,
               at most RSD_RECONCILE_LOAD_ATTEMPTS - 1 such rounds), BUSY (a
               transient refusal: load again after a backoff within the
               deadline, step 10) or REJECTED. It may
               write c->made_instance (an instance id the load made: it becomes
               result.wire_id and is attributed as ours).
           deadline_ms, probe_timeout_ms, restore_ms: the runtime's defaults
               (0 = the machine's); root(base_url, out, cap): its root URL rule
               (NULL = drop trailing '/' and one "/v1"); a runtime with it is
               keyed by its root.
       There is one lifecycle. A load-first runtime (RSD_RT_LOAD_FIRST, LM
       Studio) keeps its own catalog and changes where the lifecycle frees
       room: it loads the keep before anything is freed, and frees room only
       when that load fails. Its four hooks replace parse_list and list_end,
       and set the result through the calls after them:
           catalog(c, first, status, body, len)  read a 2xx listing into the
               runtime's catalog: RSD_OK, > 0 = list again (first: the first
               listing, whose API tier falls back; the request hook names the
               next tier), < 0 = not read (c->why says why: DEGRADED). A
               transport error on the first listing degrades at once.
           gate(c, under_lock)  after the first listing and after the one
               under the lock: resolve the request and decide (rsd_reconcile_
               decide on rsd_reconcile_facts). The facts arrive with the
               desc's part filled, the rest zeroed: strategy (the runtime's),
               optout (residency_env, user_managed), target_id, runtime_id,
               keep (desc.keep), keep_pinned, protected_models + n_protected,
               context_length, model_max_context, context_ceiling,
               context_floor, kv_bytes_per_token, capacity_bytes, keep_bytes
               and free_bytes as the desc gave them. The hook adds its
               listing's part: residents + n_residents (loaded_by_us from
               c->owned or c->ours), the keep's aliases and tags, max_instances,
               model_max_context and keep_bytes where the desc gave 0, and keep
               when the request resolves to another key (LM Studio drops
               capacity_bytes and keep_bytes: it frees room by failed loads,
               not by bytes). 1 = the reconcile ends
               here (not served, an instance already loaded, no explicit load,
               nothing to load: the hook set the outcome); 0 = load the keep
               (taking the lock first when desc.lock; with the lock held and
               nothing changed since begin the load follows at once, else
               LIST again and gate(c, true)); < 0 = DEGRADED (c->why). Under
               the lock, a gate that does not degrade sets result.redecided.
           adopt(c)  after a failed load the lifecycle lists again (catalog,
               first false); true = an instance the load made landed after the
               load gave up: adopted (its id set as the wire id; attributed,
               RESIDENT).
           free_room(c)  else: name the next candidate's owned instances to
               unload (rsd_reconcile_unload, one call each) and return how many
               (0 = none left). The lifecycle unloads them one request each
               (model = the instance id), records each (rsd_reconcile_evicted,
               rsd_reconcile_attr) and loads again; with no candidate left a
               first failed load is retried once as is (when the plan has a
               fallback); then LOAD_FAILED and the restore loop. The deadline
               passing before any load was sent is DEGRADED instead.
       load_answer classifies the answers of both the loads and the unloads
       (ACCEPTED = done); for a refused one it may write the server's words to
       c->why (else the failure says "HTTP <status>"). The hooks use
       rsd_reconcile_add_notice and rsd_reconcile_decide; any hook may also
       record an eviction (rsd_reconcile_evicted) or an attribution
       (rsd_reconcile_attr). Each call below copies what it is given:
           void rsd_reconcile_set_catalog(r, tier, complete)
               What a catalog read: tier = the API tier found (result.tier;
               RSD_LMS_TIER_NONE leaves it), complete = false when entries were
               cut off (the reconcile's answer is then never cached).
           int rsd_reconcile_set_model(r, key, wire_id, state)
               How the request resolved (gate; adopt names the instance it
               takes): key = the model a load of the keep loads
               (result.model_key), wire_id = the id requests use
               (result.wire_id), NULL leaving either as it is; state =
               result.state (RSD_LMS_UNKNOWN not served, JIT no instance,
               INSTANCE loaded). RSD_OK, or RSD_ERR_MODEL_ID for an id
               RSD_MODEL_ID_MAX or longer (nothing set). Begin sets both ids
               to the keep.
           void rsd_reconcile_set_decision(r, decision, reason, keep_resident)
               A decision the gate makes without rsd_reconcile_decide (not
               served: DECLINE; an instance loaded: ALREADY_RESIDENT):
               result.decision, .reason and .keep_resident.
           void rsd_reconcile_set_outcome(r, outcome, error, message)
               How a gate that returns 1 ends the reconcile: result.outcome,
               .error and, message not NULL, .message (cut to
               RSD_RECONCILE_TEXT_MAX - 1 bytes). Begin sets error RSD_OK.
           int rsd_reconcile_unload(r, instance, model, context_length)
               free_room's instance to unload: model = the candidate whose it
               is (its notices, result.evicted; the same for every call of one
               free_room), context_length = what a restore loads it with. At
               most 16 per free_room. RSD_OK, RSD_ERR_ARG (an empty id, another
               model), RSD_ERR_MODEL_ID (one RSD_MODEL_ID_MAX or longer),
               RSD_ERR_BUFFER (16 named) or RSD_ERR_TOO_LARGE (the id arena is
               full).
       LM Studio is built this way, and so can a runtime outside this file be
       (tests/test_custom_runtime.c has one). Flags: RSD_RT_CATALOG (listing names
       every servable model: enables the loadability gate), RSD_RT_LOAD (explicit load;
       without it the reconcile ends RESIDENT after the unloads and the request
       itself loads, as Ollama does), RSD_RT_WAIT (poll until loaded),
       RSD_RT_PINNED_PASS (over every protected tier, and the check for
       displaced protected models after a failed load), RSD_RT_UNLOAD_WAIT
       (step 9's wait after an unload), RSD_RT_PROBE_RETRY (step 2's retry of
       timed-out probes), RSD_RT_INSTANCES (models run as instances with their
       own ids: each unloaded instance leaves the attribution, a restore makes
       a new one), RSD_RT_LOAD_FIRST (above). The router has the first six;
       Ollama LOAD | WAIT; LM Studio LOAD | INSTANCES | LOAD_FIRST.
       int rsd_reconcile_target_key(rt, base_url, out, cap)
           The key begin uses when desc.target_key is NULL (for a host that
           needs it before begin: generation, attribution).

     Limits and sizes
       RSD_RECONCILE_URL_MAX 2048, RSD_RECONCILE_BEARER_MAX
       512, RSD_RECONCILE_MAX_NOTICES 64 (text under 512 each), RSD_RECONCILE_MAX_OURS
       64, RSD_RECONCILE_LOAD_ATTEMPTS 3, polls 20..500 ms,
       RSD_RECONCILE_FAILED_GRACE_MS 3000 (step 11).
       Memory: the reconcile lives in one block of the caller's memory:
           size_t rsd_reconcile_footprint(const rsd_reconcile_limits *lim);
           int rsd_reconcile_init(rsd_reconcile *r, size_t size, const rsd_reconcile_limits *lim);
       Allocate footprint(lim) bytes (0 = lim is invalid), 8-byte aligned
       (malloc's memory is; static or heap, any storage that outlives the
       reconcile), and pass them as r with their size. init lays out the
       struct (51 KiB on x86-64: the result, the plan, the facts, URLs) and
       its tables after it: the notices and their text, the id arena, the LM
       Studio state, both listings' storage (LM Studio's catalog lives in it,
       at least its 31 KiB: a reconcile on LM Studio lists into neither), the
       answers' buffer and the JSON tokens, sized by lim (NULL or zeroed
       fields = defaults; rsd_reconcile_limits_fill(lim) writes the defaults
       into the zeroed fields, RSD_OK or RSD_ERR_ARG): max_models (entries of one listing, RSD_LISTING_DEFAULT_MODELS
       64: a server listing 64 models), arena_bytes (their ids, aliases and
       tags, RSD_LISTING_ARENA_PER_MODEL 176 per entry: names over it end
       DEGRADED naming arena_bytes), max_tokens (JSON tokens held at once: an answer
       is validated whole, then its list is read entry by entry, so this is
       the top level plus the largest entry, RSD_RECONCILE_TOKENS 256; a real
       router's entry is 66), max_body_bytes (the answers' buffer: a 2xx
       listing is read as it arrives, so this holds its top level and one
       entry; any other answer (capacity, load and unload answers, error
       bodies) is kept whole in it; RSD_RECONCILE_BODY_BYTES 8 KiB, at least
       1 KiB. A real router's entry, with its child's arguments, preset and
       meta, is 66 tokens and 1,040 to 1,320 bytes with ids of 64 to 120
       bytes; its own GET /props is 240 bytes, a child's 1.9 KB plus its chat
       template, which the reconcile never asks for),
       max_id_bytes (the longest id it takes, NUL included: protected ids,
       ours, last uses, and the listed ids and instances; 16 to
       RSD_MODEL_ID_MAX, the default; it costs no memory), id_arena_bytes
       (the id arena: every id the reconcile keeps, from the desc and from
       the listings (victims, pinned and evicted models, LM Studio's
       instances), each once, at 2 bytes over its length;
       RSD_RECONCILE_IDS_PER_MODEL 128 per listing entry, 8 KiB with the
       defaults: 63 ids of 120 bytes that are both ours and victims fit),
       max_notices (notices kept, RSD_RECONCILE_MAX_NOTICES 64; more are
       counted in result.notices_dropped), notice_text_bytes (their subjects and
       texts together, RSD_RECONCILE_NOTICE_TEXT_AVG 160 per notice, at least
       1 KiB; a typical line is 130 bytes) and runtime (NULL = any; else the
       only runtime begin accepts, and a runtime without RSD_RT_INSTANCES
       gets no LM Studio state, about 7 KiB). init returns RSD_OK, RSD_ERR_ARG
       (r NULL or not 8-byte aligned, bad limits) or RSD_ERR_BUFFER (size
       under the footprint). The reconcile owns nothing else: free the block
       to end it. The footprint is under 134 KiB with the defaults on x86-64:
       the struct, 6 KiB tokens, 33 KiB listings, 18 KiB notices, 11 KiB ids,
       8 KiB answers' buffer and 7 KiB LM Studio state (checked by
       tests/test_sizes.c). begin reuses the tables; begin on zeroed memory
       init never made a reconcile is RSD_ERR_STATE, and with a desc.runtime other than
       limits.runtime RSD_ERR_ARG (result.message says so). An answer over the
       limits is never acted on: more entries than max_models
       (RSD_ERR_LISTING_TRUNCATED), an entry of more tokens than max_tokens
       (RSD_ERR_JSON_TOKENS), an entry or a top level of more bytes than
       max_body_bytes (RSD_ERR_TOO_LARGE, "a list entry is larger than the
       buffer") or a listed id or instance of max_id_bytes or more
       (RSD_ERR_MODEL_ID) make a listing DEGRADED with a message naming the
       limit to raise; a load answer over max_body_bytes is a failed load, a
       capacity answer over it reads as an unknown capacity. A
       protected id or ours entry of max_id_bytes or more is refused by begin
       (RSD_ERR_MODEL_ID, RSD_ERR_ARG for set_ours). Ids over id_arena_bytes
       are never cut: the desc's make begin return RSD_ERR_TOO_LARGE; those
       of set_ours, set_owned (which return RSD_ERR_TOO_LARGE too) or of a
       listing make the reconcile DEGRADED (RSD_ERR_TOO_LARGE) before
       anything is unloaded or loaded, result.message naming id_arena_bytes. A notice that finds less room than its text in
       notice_text_bytes is cut to it (text_cut); one that finds none is
       dropped and counted in result.notices_dropped. The result's evicted ids
       and the notices' strings live in these arenas: valid until the next
       begin. No allocation, no globals, no clock, no I/O. Deterministic: the same
       desc, answers and clock readings give the same steps and result.
       Log items: DRIVER_DEGRADED, DRIVER_UNLOAD_FAILED, DRIVER_LOAD_FAILED,
       DRIVER_LIMIT, DRIVER_REDECIDE, DRIVER_RESTORE, DRIVER_LOCK_UNLOCKED.

     Ollama
       The Ollama runtime for rsd_reconcile (strategy SCHEDULER).
         const rsd_runtime *rsd_runtime_ollama(void);
             Give it as rsd_reconcile_desc.runtime with base_url
             "http://host:11434" (a trailing "/v1" of the OpenAI-compatible URL is
             dropped). The machine then:
             - lists GET <root>/api/ps (probe timeout: every request has one);
               every entry is resident (Ollama has no loading flag); id = "model"
               (else "name"), alias = the other; sizes only when given;
               the keep and the attributed ids (desc.ours) match an entry whose
               name normalises equal ("llama3.2" ~ "llama3.2:latest"; they are
               added to it as aliases, so a model attributed as requested is
               still recognised as ours);
             - decides with SCHEDULER: release only our stragglers
               (unprotected residents in desc.ours, the persisted attribution);
               foreign and protected residents are never touched;
             - takes the lock only when it will unload or load, lists
               again under it, unloads one straggler at a time with
               POST <root>/api/generate {"model":id,"keep_alive":0,"stream":false},
               then loads the keep with POST <root>/api/generate
               {"model":keep,"stream":false,"keep_alive":-1[,"options":{"num_ctx":
               load_context}]} -- keep_alive -1 as Ollama chats send it, so
               the model is ours (attr_add) and a later switch releases it; the
               load blocks until loaded, its timeout is the overall deadline;
             - waits until /api/ps lists the keep (20 ms doubling to 500 ms);
             - a keep already resident is never loaded nor attributed (only what
               residency loaded is pinned).
             num_ctx is sent only with desc.context_length (clamped beside other
             residents, by the context-fit rules); chats must use result.load_context, since a
             different num_ctx makes Ollama reload the model.
             Answers: a 2xx {"done":true,...} load is accepted; a body with
             "error", 404 (unknown model), 400, 500 (load failure, OOM), 503
             (queue full) are rejections (LOAD_FAILED, restore of what was
             released). Hostile or unparseable listings: DEGRADED, observe, a
             notice, nothing mutated, not cached.
         The listing comes from rsd_ollama_ps_listing (payload section).

     LM Studio
       The LM Studio runtime for rsd_reconcile (strategy JIT), a load-first
       runtime (RSD_RT_LOAD_FIRST) of the one lifecycle: its hooks detect the
       API tier, resolve which wire id a request uses (and end early), and
       adopt or free room, candidate by candidate, only after a load with an
       exact body fails.

           rsd_reconcile *r = ...;        (footprint bytes, rsd_reconcile_init once)
           rsd_reconcile_desc d; memset(&d, 0, sizeof d);
           d.runtime = rsd_runtime_lmstudio();
           d.base_url = "http://studio:1234/v1"; d.keep = "qwen3.8-27b";
           d.explicit_load = true; d.context_length = 262144; d.lock = true;
           d.owned = owned_from_state; d.n_owned = n;     (persisted)
           rsd_reconcile_begin(r, &d, now); then the loop above; COMMIT:
                 rsd_state_attr_remove_sync(key, a.model, a.instance) for each
                 result.attr_remove[], rsd_state_attr_add_sync(...) for attr_add[], bump
                 the generation, rsd_reconcile_commit_done (or _commit_failed).
                 Optional, before lock_done: rsd_reconcile_set_owned(r, owned, n)
                 with the owned instances read again under the lock (a changed set
                 makes it list and decide again, as rsd_reconcile_set_ours).
           (residency_http.h's rsd_ensurer does all of this: its ensure section.)
           then send the chat with "model": rsd_reconcile_result_of(r)->wire_id.

       Behaviour, in order:
        1. Catalog: GET <root>/api/v1/models, else /api/v0/models,
           else /v1/models (probe timeout, default 5000 ms), the tier chosen by
           body shape (a 0.3 server's 200 {"error":..} on v1 falls through).
           401/403 stop with RSD_ERR_AUTH; a transport error (refused, timeout)
           stops at once (a dead server costs one timeout, not three). Failure is
           DEGRADED (the turn goes on), one notice, nothing
           mutated. root = rsd_root_url's; the bearer goes on every request.
        2. Resolution: rsd_lms_resolve with desc.default_model and
           desc.peers. result.wire_id is the id to send. Notices: resolved to an
           instance (co-resident/info), LM Link peer (co-resident/
           warning). UNKNOWN on a complete catalog: DECLINED, RSD_ERR_NOT_SERVED,
           a message saying the server does not serve it and a will-not-fit/error notice (the completion must
           not be sent). A truncated catalog (over RSD_LMS_MAX_MODELS or
           _INSTANCES) is never acted on: a found instance is still used, else
           DEGRADED with RSD_ERR_LISTING_TRUNCATED and a notice.
        3. Early exits: a loaded instance -> RESIDENT; no explicit load ->
           OBSERVED (state JIT: the server loads on first use); tier 0.3/OpenAI
           -> OBSERVED (no load API).
        4. Decide: keep = the owning model key, residents = keys with
           loaded instances (loaded_by_us = one of its instances is owned),
           strategy JIT, context_length = desc.load.context_length, model max
           context from desc or the catalog. Plan notices (stress, clamp
           via rsd_decide, observe-only) are appended. OBSERVE (RESIDENCY opt-out
           or user_managed) never loads.
        5. LOCK (desc.lock), then, unless the lock is held and the generation
           is unchanged, list v1 again and resolve again: an instance that
           appeared meanwhile is used (no duplicate "<key>:2").
        6. Load: POST <root>/api/v1/models/load with the exact body,
           context_length = the clamped load_context; timeout = what is left of
           the overall deadline (default 300 000 ms: loads are slow).
           instance_id (or model_instance_id) -> owned (attr_add), wire_id.
        7. On failure (any status, an error body, a transport error or timeout):
           list again first. An instance of the key that was not there
           before our load is adopted (the load landed after the client gave up). Else free the minimum: the next fallback candidate, in plan
           rank (ours first), that still has OWNED instances in that fresh
           listing: unload those (POST /api/v1/models/unload {"instance_id"}),
           one request each, then load again; repeat per candidate while loads
           fail, at most RSD_LMS_LOAD_ATTEMPTS loads. Without such a candidate
           the load is retried once as is. Instances that are not
           owned (the operator's, other processes', LM Link peers') are never
           unloaded. An unload failure is a warning and the next candidate
           is tried.
        8. All loads failed: the unloaded instances are loaded again ({"model":
           key, "echo_load_config":true, "context_length": their old context}),
           bounded by restore_ms after the deadline; notices restored /
           unrestored; LOAD_FAILED with the server's message (or "HTTP <n>").
           The deadline passing before any load was sent (a long lock wait) is
           DEGRADED RSD_ERR_TIMEOUT instead: nothing was tried nor changed.
        9. COMMIT (when something was loaded or unloaded): attr_add[] (model key,
           instance id) for the keep's new instance and restored instances,
           attr_remove[] for unloaded owned instances; UNLOCK; DONE.
       TTL cache (desc.cache, the rsd_decision_cache): as for every runtime, plus:
       the entry keeps tier, resolution, wire_id and model_key, so a hit answers them;
       a DECLINED (RSD_ERR_NOT_SERVED) is cached with its code; a truncated catalog
       is never cached. A failed load is never cached, so the fallback is never
       disabled by the cache.
       Result fields: tier, state (resolution), wire_id, model_key, adopted,
       load_attempts; evicted[] (id = the instance, model = its key, context_length);
       attr_add[] / attr_remove[] as (model key, instance id). Result codes added:
       RSD_ERR_NOT_SERVED. Limits: RSD_LMS_LOAD_ATTEMPTS 4, RSD_LMS_MAX_EVICT 16,
       RSD_RECONCILE_MAX_OWNED 64, RSD_LMS_MAX_PEER_IDS 128 (copied), deadlines above.

     Detection
       Which runtime a server runs, as a sans-I/O step (an engine with its own HTTP
       stack uses it as the ensurer does):
           rsd_detect d;   d.toks = toks; d.n_toks = n;   (the caller's JSON tokens)
           d.buf = buf; d.buf_cap = cap;                  (optional: answers in pieces)
           rsd_detect_begin(&d, base_url, bearer, probe_timeout_ms, deadline, now);
           while ((s = rsd_detect_next(&d, now)).kind == RSD_STEP_HTTP)
               send s.http (a GET), rsd_detect_body(&d, status, data, len) as it
               arrives, then rsd_detect_feed(&d, transport, status, NULL, 0, now);
               (or, without buf, the whole body to rsd_detect_feed)
           d.runtime (NULL = none; d.error, d.message say why)
       With buf (at least 1 KiB; the ensurer gives the reconcile's answers' buffer),
       an answer is kept whole in it; a 2xx LM Studio listing larger than buf is
       read as it arrives (it then matches by its list, and d.first_listing is
       false: the reconcile asks for it again), and any other 2xx answer larger
       than buf matches nothing (a single-model server's /props with a long chat
       template: not a router's, whose /props is 240 bytes).
       Probes in order, each one GET under the root URL, until one matches: llama.cpp
       router (GET /props with "role":"router": d.capacity_known, max_instances and
       unlimited are its instance limit, for desc.capacity_known), Ollama (GET
       /api/version with a "version" string), LM Studio (GET /api/v1/models with a
       "models" array: d.first_listing says this answer is the runtime's first
       listing, for desc.first_listing; then GET /api/v0/models with a "data" array
       for 0.3 servers). A probe that times out is sent again with twice the timeout
       while the deadline allows (a busy server is slow, not gone). A refused
       connection, a failed resolve or any transport error on the first probe ends
       it (d.error = that error, "<url> unreachable: GET <probe>: <why>"); no match:
       RSD_ERR_NOT_FOUND, or RSD_ERR_AUTH when a probe was answered 401/403.

   ---- pool: the process-pool policy (pure, sans-I/O) -------------------------
       Keeps up to max_slots model-server processes resident, one model per
       slot, and decides which request runs where. It never forks, never
       touches a socket and never reads a clock: the host (a supervisor in
       residency_http.h, or your own) feeds events with now_ms and pulls
       actions. Same snapshot + same events = same actions.

     Host loop (one pool, any thread, one at a time)
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
               rsd_pool_step(pool, now);          (idle TTL, the wait-bound timer)
               wake = rsd_pool_next_deadline(pool); (0: actions wait)

       rsd_pool_create(desc) / rsd_pool_destroy(pool)
           The only allocation: one block of about 17 KiB + 48 bytes per
           max_requests + 48 bytes per event_log entry (tests/test_sizes_shell.c). destroy does not stop
           processes (they are the host's): call rsd_pool_stop and reap first.
           A zeroed (or NULL) desc = 1 slot, 1024 requests, no byte budget, a 30 s wait bound,
           start backoff 1 s doubling to 60 s, overlap RSD_POOL_OVERLAP_BYTES (below).
       rsd_pool_add_model(pool, &model_desc) -> index | RSD_ERR_ARG/CAPACITY
           id 1..127 bytes (copied, unique); reserve_bytes (0 = the desc's
           default_reserve_bytes) is reserved when a slot is claimed, before
           the load; ttl_ms: unload after that long idle since the last
           request *finished* (0 = never; llama-swap ttl, Ollama keep_alive);
           max_in_flight: concurrency per process (0 = unlimited; set it to
           llama-server --parallel so requests beyond it queue here, FIFO);
           pinned: never evicted, trimmed or TTL-unloaded.
       rsd_pool_find_model(pool, id), rsd_pool_set_pinned(pool, m, on, now)
       rsd_pool_set_model(pool, m, &model_desc, now): new reserve_bytes, ttl_ms,
           max_in_flight and pinned for model m (the id must be the same or NULL);
           a resident process keeps the reservation it was admitted with until it
           stops; the TTL and the cap apply at once. RSD_ERR_ARG as add_model.
       rsd_pool_acquire(pool, m, now, user, &req, &slot)
           RSD_OK: granted now, in-flight counted now (at admission, not at
           dispatch: a slot holding a granted request is never idle, the
           llama.cpp router's #28698 race). RSD_PENDING: queued; *req is the
           handle to wait on. Errors (no handle): RSD_ERR_POOL_STOPPED,
           RSD_ERR_POOL_NO_FIT (reservation > whole budget), RSD_ERR_POOL_PINNED
           (pinned residents leave no slot or bytes), RSD_ERR_POOL_QUEUE_FULL,
           RSD_ERR_CAPACITY (request table full), RSD_ERR_POOL_BACKOFF (m is not
           resident and its last start failed less than its backoff ago: see
           Failed starts), RSD_ERR_ARG.
       rsd_pool_acquire_ex(pool, m, flags, now, user, &req, &slot)
           acquire with flags. RSD_POOL_ACQUIRE_EXCLUSIVE (benchmarks,
           calibration): the request runs alone on m's process. It joins m's
           FIFO like any other; when it reaches the head it waits for the
           process to drain (no request behind it overtakes it), is granted
           when in-flight is 0, and while it runs nothing else is admitted to
           that process. Its release (or cancel) lets the queue move on; the
           process is not restarted. Other models keep flowing throughout.
       rsd_pool_preload(pool, m, now)
           Load m and leave it resident with no request (a boot policy,
           e.g. preload the pinned models). RSD_OK when READY or STARTING
           already, RSD_PENDING when queued; no GRANT or FAIL ever comes for a
           preload (a failed load is only logged and counted). st.preloads
           counts those still queued. An explicit load ignores and clears m's
           start backoff.
       rsd_pool_reset_backoff(pool, m or -1)
           Forgets the failed starts (for a host whose configuration of m
           changed): the next request starts it at once.
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
       rsd_pool_restart(pool, proc, now)
           A STARTING process is given up and its model started anew (the host
           found the process unfit before its first request): the slot stops
           routing at once and a STOP (why RESTART) is emitted; the model's
           waiters keep waiting and a new SPAWN comes as soon as room allows
           (it may come before the old process is gone), which drains once
           started when an unload(DRAIN) was waiting for the old one. No load
           failure is counted and no backoff starts. RSD_ERR_STATE when not
           STARTING.
       rsd_pool_on_exited(pool, proc, now)
           After a STOP, or unasked (a crash): the slot is EMPTY and its
           reservation freed at once. A crash orphans the requests that
           were running there (release/cancel them as usual; bookkeeping only;
           a GRANT not pulled yet becomes FAIL(RSD_ERR_POOL_CRASHED) instead);
           a crash while STARTING fails the model's waiters (ERR_POOL_CRASHED).
       rsd_pool_set_reserved(pool, proc, bytes, now)
           Replace the claim-time estimate with the measured figure (after
           READY, from the child's log or nvidia-smi). Shrinking it
           may admit waiters at once.
       rsd_pool_set_vram(pool, total, foreign, now)   measured VRAM
       rsd_pool_set_pid(pool, proc, pid)              shown in rsd_pool_query only
       rsd_pool_set_slot_limit(pool, proc, n, now)
           The process takes at most n requests at once (its own count, measured:
           llama-server's total_slots); the smaller of n and the model's
           max_in_flight applies to that process (0 = none of its own). Requests
           beyond it queue here, not in the server's accept queue.
       rsd_pool_next_action(pool, &a) -> bool
           STOPs and SPAWNs first (in decision order), then GRANT/FAIL in order.
       rsd_pool_step(pool, now) -> actions waiting (>= 0) | RSD_ERR_ARG
           Stops idle slots whose TTL expired, ends leases whose ttl passed, runs
           admission (starvation).
       rsd_pool_next_deadline(pool) -> 0 | time | RSD_NO_DEADLINE
           0 while actions wait; else when step must next run (an idle TTL, a
           lease's ttl, the wait bound); RSD_NO_DEADLINE when nothing is due.
       rsd_pool_configure(pool, max, now)
           max clamped to 1..16. Idle excess slots stop at once, LRU
           first; busy excess stops when it goes idle.
       rsd_pool_unload(pool, m or -1, flags, now)
           Default: RSD_ERR_POOL_BUSY and no change if any target is busy or
           loading. RSD_POOL_UNLOAD_DRAIN: busy targets take no new work and
           stop when drained (returns RSD_PENDING); idle ones stop now (RSD_OK).
           Explicit unload stops pinned models too. Later requests reload.
       rsd_pool_stop(pool, now)
           Every waiting and running request gets FAIL(RSD_ERR_POOL_STOPPED),
           every process a STOP; later acquire/unload return ERR_POOL_STOPPED.
       rsd_pool_query(pool, &info), rsd_pool_query_model(pool, m, &info)
           Every slot (state, model, proc, in-flight, reservation, last use,
           idle deadline, ttl, pin, pid) and lifetime counters (acquires,
           grants, waits, max wait, spawns, readies, load failures, crashes,
           evictions, TTL expiries, trims, starvation drains, unloads, fails...);
           per model also last_used_ms (now_ms of its last grant or finished
           request, 0 = never), start_failures and retry_at_ms (the backoff);
           counters backoffs (acquires refused) and restores.
       rsd_pool_next_event(pool, &ev)
           Optional audit ring (desc.event_log entries; oldest dropped first):
           CLAIM, READY, LOAD_FAILED, DRAIN, STOP (why), EXITED, CRASHED, each
           with the slot's in-flight count and pin at decision time.
       rsd_pool_lease_take(pool, &lease_desc, now, &lease)
       rsd_pool_query_lease(pool, lease, &info), rsd_pool_lease_return(pool, lease, now)
           A byte lease holds part of the VRAM budget for a workload outside
           the pool (a game's renderer during a cutscene, another program).
           Taking one stops idle, unpinned processes in LRU order (STOP, why
           "lease") until the reservations that stay plus every lease fit the
           budget; a busy or pinned process is never stopped, so the grant may
           be partial (info.granted < info.requested). RSD_OK: granted and free
           now; RSD_PENDING: granted, the stopped processes are still exiting
           (info.ready turns true once they have); RSD_ERR_POOL_NO_FIT:
           declined, nothing stopped (everything busy or pinned, or the pool
           has no byte budget); RSD_ERR_CAPACITY: RSD_POOL_MAX_LEASES live.
           While it lives no start that would break it begins: those models
           wait (they are not failed, even one that fits the budget but not
           beside the lease). Returning it, or lease_desc.ttl_ms passing in
           rsd_pool_step, gives the bytes back; with lease_desc.restore the
           models it stopped are loaded again at once (a preload each, counted
           in st.restores; one still stopping starts once it has exited), else
           on their next request. info.stopped is a
           bitmask of the model indexes it stopped; st.leased_bytes the bytes
           held; counters leases, leases_declined, lease_stops, lease_expiries.

     Admission
       Requests for a READY model with room go
       straight through. Otherwise the request joins its model's FIFO; a model
       with no slot joins the list of models waiting for a slot (FIFO by its
       oldest request). Each admission pass visits those models in order and,
       for each: (1) claims an EMPTY slot if the count and the bytes fit
       (reserved + reservation + foreign <= budget); (2) else counts capacity
       already on its way out (STOPPING, DRAINING) and evicts idle, unpinned
       READY slots in LRU order until count and bytes fit (only if that is
       enough), sparing every picked one the others make unneeded (latest
       picked first: a small LRU model picked before a large one that alone
       makes room stays); (3) if its oldest request has waited max_wait_ms, busy LRU
       slots are put in DRAINING (no new admissions) until it would fit (the
       wait bound; lifted again when no model waits for a slot any more, and by a pin);
       (4) holds what it needs, so later models cannot take capacity being
       freed for it. A busy slot is never evicted or trimmed; requests for
       residents keep flowing while others wait. So queued requests are
       collated by model: on one slot, A B C A B C arriving together (or while
       A serves) are served A A B B C C, three loads instead of six; and the
       age bound keeps a model that never goes idle from starving the others
       (past max_wait_ms its process drains, the waiting model goes next, and
       the first model's later requests wait their turn). When one stop frees
       room for several waiting models, one pass starts them all. Work per event is
       O(models x slots), independent of the number of waiting requests;
       a load that completes grants its waiters in O(granted).

     Swaps beside a stop (desc.overlap)
       A process that is stopping (STOPPING, FAILED) keeps its reservation until
       on_exited, always. With RSD_POOL_OVERLAP_BYTES (the default) and a byte
       budget it holds no count slot: a start that needs its slot, not its
       bytes, is claimed in the same pass as the STOP (the actions come out STOP
       then SPAWN), so the new process loads while the old one exits (a swap
       costs the load, not the exit plus the load). A start that needs the
       stopping process's bytes waits for its on_exited as before: memory is
       never counted twice. Without a byte budget the pool knows nothing of
       memory, so the count is the only guard and a start waits for the exit;
       RSD_POOL_OVERLAP_COUNT (a host that knows the memory holds both, e.g.
       children on host memory) overlaps there too; RSD_POOL_OVERLAP_OFF never
       overlaps. A model never starts beside its own stopping process: its
       requests wait for that exit (the old process may be saving its state in
       its stop grace), then it starts. At most RSD_POOL_MAX_SLOTS processes,
       stopping ones included, exist at once.

     Failed starts
       A start fails when on_started(!ok) comes, or the process
       exits while STARTING. Then (1) the model's waiters FAIL; (2) its next
       start is backed off: acquire answers RSD_ERR_POOL_BACKOFF at once, with
       nothing queued or stopped, until retry_at_ms = now + desc.start_backoff_ms
       (1 s) doubled per consecutive failure up to start_backoff_max_ms (60 s);
       a READY, an explicit preload or rsd_pool_reset_backoff clears it; (3) the
       idle models that were evicted to make room for that start are loaded
       again (a preload each, counted in st.restores): a model that cannot
       start does not cost a healthy one. A model evicted for a start that
       then succeeds stays evicted. A crash after READY is not a failed start:
       the next request respawns it at once.

     Slot states (who may call what)
           EMPTY    --claim-->  STARTING (SPAWN emitted, reservation taken)
           STARTING --on_started(ok)--> READY | --on_started(!ok)--> FAILED
                    --on_exited--> EMPTY (crash while loading)
                    stop/unload before the SPAWN was pulled: back to EMPTY
           READY    --idle LRU victim, TTL, trim, unload, stop--> STOPPING
                    --wait bound or unload(DRAIN) while busy--> DRAINING
                    --on_exited (crash)--> EMPTY
           DRAINING --last release--> STOPPING;  --on_exited--> EMPTY
           STOPPING, FAILED --on_exited--> EMPTY (reservation freed)
       on_started is valid only in STARTING (else RSD_ERR_STATE); on_exited in
       any non-EMPTY state; a proc from an earlier process in the same slot is
       RSD_ERR_POOL_STALE. Requests: WAITING --GRANT--> RUNNING --release-->
       gone; WAITING/RUNNING --FAIL (pulled)--> gone; cancel from either.

     Bytes
       Budget = min(desc.vram_budget_bytes, measured total), either
       may be 0 = unknown; both 0 = count-only admission. Foreign use is
       subtracted for admission but not for "can never fit" (it may go away;
       a request that fits the budget but not beside foreign use waits for
       the host's next rsd_pool_set_vram). st.models_foreign_held counts the
       models the last admission pass held back only for foreign use (they
       would start, evicting idle LRU residents if need be, were it not
       there): while it is above 0 the host should read the device again at a
       bounded pace (rsd-serve: every 250 ms) and pass the reading to
       rsd_pool_set_vram, which admits them once the memory is there; at 0
       there is no reason to read. A reading never stops a model by itself:
       an eviction happens only inside a pass, for a waiting start. A
       measurement below what is already reserved stops new admissions;
       nothing running is stopped for it.

       Limits: RSD_POOL_MAX_SLOTS 16, RSD_POOL_MAX_MODELS 64,
       RSD_POOL_MAX_MODEL_ID 128, RSD_POOL_MAX_REQUESTS 1048575 (handles carry
       a 12-bit generation: a stale handle is detected unless its entry was
       reused 4096 times since; entries are reused FIFO), RSD_POOL_MAX_BYTES
       2^58, RSD_POOL_DEFAULT_MAX_WAIT_MS 30000 (RSD_POOL_WAIT_FOREVER = off),
       RSD_POOL_MAX_LEASES 8 (lease handles carry a 28-bit generation).
       Errors: RSD_ERR_POOL_* (-60..-69) as above, plus RSD_ERR_ARG,
       RSD_ERR_STATE, RSD_ERR_CAPACITY. Crash-recovery and stop paths that
       orphan or fail running requests scan the request table once (O(max_
       requests)); every other operation is O(models x slots) or better.

   STATE MACHINES
     One ensure (the driver section has every step; residency_http.h's ensure
     section runs it over sockets)
       AUTO-DETECT (ensurer only: GET /props, /api/version, /api/v1/models)
         -> CACHE: a live (target, model) hit ends here with no request
         -> LIST (+ capacity probe) -> DECIDE (rsd_decide) -> GATE
         -> OBSERVE / DECLINE / ALREADY_RESIDENT: done (cached)
         -> LOCK (flock on the target key, bounded; fail-open with a warning)
         -> LIST + DECIDE again under the lock (the generation file tells
            whether anyone mutated the target since)
         -> UNLOAD victims one at a time -> LOAD -> WAIT (poll 20 ms doubling
            to 500 ms, transient errors retried until the deadline)
         -> on a failed load: RESTORE what was evicted
         -> COMMIT (attribution, generation bump) -> UNLOCK -> DONE
       Outcomes: RESIDENT, OBSERVED, DECLINED, LOAD_FAILED, DEGRADED (listing
       unreadable: nothing done, not cached), FREED (a free reconcile:
       desc.free_bytes and no keep; UNLOAD victims, then COMMIT, no LOAD).
       rsd-ensure maps them to exit codes 0 (resident; freed), 2 (declined), 3 (load failed), 4 (observe-only and not
       resident), and a DEGRADED one by its result: 5 (server unreachable:
       RSD_ERR_CONNECT, _TIMEOUT, _RESOLVE, _CLOSED, _IO, _TLS), 7 (RSD_ERR_AUTH),
       else 6 (not a model server).

     Pool slots and requests: "Slot states" in the pool section.

   ---- gguf: what a model file costs (pure, sans-I/O; RSD_NO_GGUF leaves it out) --
       The reader takes a GGUF file's first bytes, in pieces of any size, from the
       caller's own file API, and stops once it has the header: the metadata and
       every tensor's info. It never needs the weights.

       static rsd_gguf g;                     (about 12 KiB: keep it off small stacks)
       rsd_gguf_tensor t[4096]; rsd_gguf_desc d = {t, 4096, 0};
       rsd_gguf_init(&g, &d);
       while ((n = read(fd, buf, sizeof buf)) > 0 && (r = rsd_gguf_feed(&g, buf, n)) == RSD_PENDING) {}
       if (r == RSD_PENDING) r = rsd_gguf_end(&g);          (the file ended early)
       if (r < 0) log("%s", rsd_gguf_error(&g));   "GGUF byte 1234: tensor ... has 5 dims"
       residency_http.h's rsd_gguf_read_file(&g, path) does the same with stdio.

     What it reads (rsd_gguf_info; 0 where the file is silent)
       version 2 or 3 (little-endian); general.architecture, .file_type,
       .alignment (a power of 2; default 32); ARCH.block_count, .context_length,
       .embedding_length, .feed_forward_length, .attention.head_count,
       .attention.head_count_kv (as llama.cpp: absent means head_count), .key_length,
       .value_length, .sliding_window, .sliding_window_pattern, .expert_count,
       .expert_used_count, .vocab_size. Keys of another prefix than the architecture
       are not this model's and are ignored. The vocabulary is the length of
       tokenizer.ggml.tokens, else ARCH.vocab_size. head_count, head_count_kv and
       feed_forward_length may be per-layer arrays: *_layer[] then hold them (the
       scalar is the largest), else the scalar fills block_count entries.
       swa_layer[] marks the sliding-window layers (with a window only): the
       pattern key, a period P (layer il slides when il % P < P - 1; P 0: all) or
       one flag per layer, else the period llama.cpp gives the architecture (gemma2
       2 with a 4096 window by default, gemma3 6, gemma3n 5, cohere2 and exaone4 4).
       Each tensor: name (at most 63 bytes), dims (at most 4), ggml type, offset,
       bytes (rows of whole blocks: rsd_ggml_type_block gives the block of every
       type ggml.h numbers, f32 to nvfp4; an id it does not know is
       RSD_ERR_GGUF_TYPE), layer (N of blk.N., else -1). The sums: tensor_bytes,
       layer_bytes[N], token_embd_bytes, output_bytes, ffn_type (blk.0.ffn_up's
       type); data_offset (the header's end
       aligned) and data_bytes (the end of the last tensor's data) bound the weight
       area.
     What it refuses (the first error sticks; rsd_gguf_error gives the byte)
       RSD_ERR_GGUF_MAGIC: not GGUF, big-endian, another version. RSD_ERR_GGUF: a
       count over RSD_GGUF_MAX_COUNT (2^28 tensors, keys or elements), a string over
       RSD_GGUF_MAX_STRING (16 MiB), an unknown value type, an array of arrays, a
       known key of the wrong type or out of range (negative, past 2^32, block_count
       or a per-layer array past RSD_GGUF_MAX_LAYERS 512), a tensor name of 64 bytes
       or more, more than 4 dims, a negative dim, a row that is not whole blocks, an
       offset that is not where the previous tensor's padded data ends (as llama.cpp
       refuses them). RSD_ERR_OVERFLOW: sizes past 2^63. RSD_ERR_CAPACITY: more
       tensors than desc.max_tensors (desc.tensors NULL: only the sums are kept).
       RSD_ERR_TOO_LARGE: a header longer than desc.max_header_bytes (default 256 MiB).
       RSD_ERR_TRUNCATED from rsd_gguf_end. Nothing is allocated; every count and
       size is checked before it is used.

     The estimate
       int rsd_gguf_estimate_start(&g.info, &start, &est)
           What llama-server takes for this model and start (rsd_gguf_start:
           zeroed = its defaults, CPU only), in bytes: model, kv, compute, total,
           and the parts on the GPU by -ngl. It does what llama.cpp does: -c 0 is
           the training context, and a larger -c is not capped by it; the batch is
           min(-b, -c) and the ubatch min(-ub, batch); the context is padded to 256;
           without -np the server runs 4 slots on one unified cache (each sequence
           may use all of it), with -np N the cache is N streams of
           pad256(ctx / N) cells (-c 1000 -np 4: 4 x 256) unless -kvu; a layer's
           K and V rows are head_count_kv x key/value length in the cache type
           (-ctk/-ctv: f16, q8_0, q4_0, ...), a layer without KV heads has none,
           and a sliding-window layer keeps pad256(min(cells, window x (unified ?
           N : 1) + ubatch)) cells unless --swa-full. The model is the weight area;
           with every layer on the GPU a tied output layer is a second copy of the
           embedding there. The compute figure is a model of llama.cpp's graph on
           a CPU with flash attention: the f16 attention mask (cells x ubatch x 2,
           again for sliding-window cells), ubatch x 4 x (embd + 2 x ff with f32
           FFN weights, 2 x embd + 3 x ff with q8_0, embd + 4 x ff else) for
           the activations, and vocab x 8 per sequence for the logits and the
           output buffer. Its activation term is a fit to the real server's
           figures on 8 shapes (within about 15 % of them; the mask and the
           model dominate real ones), not derived; a GPU's graph differs. Not modelled: recurrent state, MLA,
           multimodal projectors, the -fit step that may shrink -c.
       int rsd_gguf_kv_per_token(&g.info, &start, &per_token, &n_stream)
           The KV bytes one context token costs that start (its cache types;
           every layer at every cell, so a sliding-window layer counts as a
           full one: an upper bound) and its KV streams (1 for a unified cache,
           N for -np N): the context-fit clamp's kv_bytes_per_token and n_seq.
     The server's own figures
       rsd_llama_log_init(&lg); rsd_llama_log_line(&lg, line, len) per line of a
       llama-server's output (-lv 4 prints them): "<dev> model|KV|compute|output
       buffer size = X MiB" summed per device and in all, and llama_context's
       n_ctx, n_ctx_seq, n_seq_max, n_batch, n_ubatch, kv_unified. 1 for a line
       that gave a figure, else 0. The figures are printed to 0.01 MiB.

   RESULTS
       Every fallible function returns an int from RSD_RESULTS: 0 = RSD_OK,
       >0 = pending / progress (never an error), <0 = error. rsd_result_str(r)
       always exists. `if (r < 0)` is always the error test.

   MEMORY
       Nothing in residency.h allocates except rsd_listing_create and
       rsd_pool_create, which use the allocator in their desc (or
       RSD_DEFAULT_ALLOC/FREE when it is zeroed); a reconcile lives in memory the
       caller gives rsd_reconcile_init (rsd_reconcile_footprint bytes); residency_http.h
       allocates in its *_create functions, and mbedTLS in its own.
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

   INTERNALS THE SHELL SHARES
       residency_http.h calls the core's public API and only these internal
       functions (rsdi_, static; tests/manual.sh checks the list):
         util  rsdi_al8 rsdi_allocator_check rsdi_malloc rsdi_free rsdi_size_add
               rsdi_size_mul rsdi_cpy rsdi_ieq_c rsdi_ascii_lower rsdi_handle_make
               rsdi_handle_idx rsdi_handle_gen rsdi_handle_next_gen
         log   rsdi_log rsdi_logf
         text  rsdi_no_ctl rsdi_sb_init rsdi_sb_c rsdi_sb_end rsdi_sb_redact
               rsdi_text_scrub rsdi_url_redact
         json  rsdi_json_hexval
         payload  rsdi_id_ok
         reconcile  rsdi_cache_lookup_norm rsdi_rc_evicted_rows

   CHANGELOG
       CHANGELOG.md, beside this file in the repository.
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
#if defined(__APPLE__) && !defined(_DARWIN_C_SOURCE)
#define _DARWIN_C_SOURCE 1 /* _POSIX_C_SOURCE alone hides flock() there (untested platform) */
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

/* ==== results: one X-macro, 0 ok, >0 pending, <0 error ==================== */
/* Each module owns a sub-list and a numeric range:
     general -1..-9, json -10..-19, http -20..-39, tls -40..-49,
     reconcile -50..-59, pool/process -60..-79, state/lock -80..-89,
     driver -90..-109, fleet -110..-119, gguf -120..-129 */
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
/* json */
#define RSDI_RESULTS_JSON(X) \
    X(ERR_JSON, -10, "malformed JSON") \
    X(ERR_JSON_DEPTH, -11, "JSON nesting too deep") \
    X(ERR_TRUNCATED, -12, "input ended early") \
    X(ERR_JSON_TOKENS, -13, "not enough JSON tokens (size the array with a count pass)") \
    X(ERR_JSON_TYPE, -14, "JSON value has the wrong type") \
    X(ERR_JSON_RANGE, -15, "JSON number out of range") \
    X(ERR_TOO_LARGE, -16, "input larger than the configured limit")
/* http */
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
/* tls */
#define RSDI_RESULTS_TLS(X) \
    X(ERR_TLS, -40, "TLS failure") \
    X(ERR_TLS_VERIFY, -41, "TLS certificate verification failed") \
    X(ERR_TLS_UNAVAILABLE, -42, "https URL but built without RSD_HTTP_MBEDTLS")
/* reconcile */
#define RSDI_RESULTS_RECONCILE(X) \
    X(ERR_RESIDENTS_LIMIT, -50, "more residents, aliases, tags or protected ids than the RSD_MAX_* limits") \
    X(ERR_MODEL_ID, -51, "model id empty or longer than RSD_MODEL_ID_MAX - 1 bytes")
/* driver (range -90..-99) */
#define RSDI_RESULTS_DRIVER(X) \
    X(ERR_NOT_ROUTER, -90, "not a llama.cpp router: its model listing reports no load states") \
    X(ERR_LISTING_TRUNCATED, -91, "model listing over its max_models or its arena; not acted on") \
    X(ERR_LOAD_REJECTED, -92, "the server rejected the load request") \
    X(ERR_LOAD_FAILED, -93, "the server reports the model failed to load") \
    X(ERR_MODEL_LIMIT, -94, "server model limit reached and no resident may be evicted") \
    X(ERR_DISPLACED, -95, "restoring a displaced pinned model displaced the requested model") \
    X(ERR_PAYLOAD, -96, "server payload has the wrong shape")
/* driver2 (range -100..-109): Ollama and LM Studio payloads and drivers */
#define RSDI_RESULTS_DRIVER2(X) \
    X(ERR_SERVER_ERROR, -100, "server replied with an error body") \
    X(ERR_AUTH, -101, "server requires authentication (HTTP 401/403)") \
    X(ERR_NOT_SERVED, -102, "the server does not advertise the requested model")
/* proc (range -70..-79) */
#define RSDI_RESULTS_PROC(X) \
    X(ERR_SPAWN, -70, "could not start the process (errno in the SPAWN_FAILED event)") \
    X(ERR_PROC_TEMPLATE, -71, "command template invalid, or a required placeholder unset") \
    X(ERR_PROC_PORT, -72, "no free loopback port") \
    X(ERR_PROC_STALE, -73, "stale or invalid process handle")
/* pool */
#define RSDI_RESULTS_POOL(X) \
    X(ERR_POOL_STOPPED, -60, "pool stopped; no new work accepted") \
    X(ERR_POOL_NO_FIT, -61, "model can never fit in the VRAM budget") \
    X(ERR_POOL_QUEUE_FULL, -62, "pool waiting queue full") \
    X(ERR_POOL_LOAD_FAILED, -63, "model failed to load") \
    X(ERR_POOL_CRASHED, -64, "model process exited unexpectedly") \
    X(ERR_POOL_BUSY, -65, "model is still serving requests") \
    X(ERR_POOL_STALE, -66, "stale or invalid pool handle") \
    X(ERR_POOL_UNLOADED, -67, "model unloaded before it was ready") \
    X(ERR_POOL_PINNED, -68, "no room beside the pinned models") \
    X(ERR_POOL_BACKOFF, -69, "model failed to start recently; not retried before its backoff ends")
/* state */
#define RSDI_RESULTS_STATE(X) \
    X(ERR_LOCK, -80, "could not take the cross-process lock") \
    X(ERR_STATE_DIR, -81, "state directory unusable") \
    X(ERR_STATE_IO, -82, "state file I/O failed")
/* fleet (range -110..-119): the pool running real processes (residency_http.h) */
#define RSDI_RESULTS_FLEET(X) \
    X(ERR_FLEET_START, -110, "model process failed to start or exited before it was ready")
/* gguf (range -120..-129): model files */
#define RSDI_RESULTS_GGUF(X) \
    X(ERR_GGUF, -120, "malformed GGUF file") \
    X(ERR_GGUF_MAGIC, -121, "not a GGUF file, or a GGUF version not read (2 and 3 are)") \
    X(ERR_GGUF_TYPE, -122, "GGUF tensor of an unknown ggml type")

#define RSD_RESULTS(X) \
    RSDI_RESULTS_CORE(X) RSDI_RESULTS_JSON(X) RSDI_RESULTS_HTTP(X) RSDI_RESULTS_TLS(X) \
    RSDI_RESULTS_RECONCILE(X) RSDI_RESULTS_DRIVER(X) RSDI_RESULTS_DRIVER2(X) RSDI_RESULTS_PROC(X) \
    RSDI_RESULTS_POOL(X) RSDI_RESULTS_STATE(X) RSDI_RESULTS_FLEET(X) RSDI_RESULTS_GGUF(X)

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

/* ==== log: levels and X-macro items ======================================= */
enum { RSD_LOG_ERROR = 1, RSD_LOG_WARN = 2, RSD_LOG_INFO = 3, RSD_LOG_DEBUG = 4 };

#define RSDI_LOG_ITEMS_CORE(X) \
    X(OK, "no error") \
    X(ALLOCATOR_HALF, "allocator: alloc_fn and free_fn must be given together") \
    X(ALLOC_FAILED, "allocation failed")
/* json */
#define RSDI_LOG_ITEMS_JSON(X)
/* http */
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
    X(HTTP_CONN_EVICTED, "http server: connection table full; oldest idle or unfinished connection dropped") \
    X(HTTP_BAD_REQUEST, "http server: bad request answered and closed") \
    X(HTTP_CLIENT_GONE, "http server: client went away before its answer")
/* tls */
#define RSDI_LOG_ITEMS_TLS(X) \
    X(TLS_INSECURE, "tls: certificate verification DISABLED (tls_insecure_skip_verify)") \
    X(TLS_SETUP_FAILED, "tls: setup failed (RNG seed, CA bundle, config)") \
    X(TLS_NO_CA, "tls: no CA bundle loaded; https refused") \
    X(TLS_HANDSHAKE_FAILED, "tls: handshake failed") \
    X(TLS_VERIFY_FAILED, "tls: server certificate verification failed")
/* reconcile */
#define RSDI_LOG_ITEMS_RECONCILE(X) \
    X(RECONCILE_BAD_FACTS, "reconcile: facts rejected (limit, empty or overlong id)") \
    X(RECONCILE_DECLINE, "reconcile: declined (will not fit without evicting a protected model)") \
    X(RECONCILE_EVICT, "reconcile: evicting a resident to make room") \
    X(RECONCILE_OBSERVE, "reconcile: observe-only, nothing changed") \
    X(RECONCILE_CACHE_HIT, "reconcile: decision cache hit, no probe") \
    X(FIT_CLAMPED, "fit: load context clamped beside co-resident models")
/* driver */
#define RSDI_LOG_ITEMS_DRIVER(X) \
    X(DRIVER_DEGRADED, "driver: server unreadable; observing only, not cached") \
    X(DRIVER_UNLOAD_FAILED, "driver: an unload failed; continuing, result not cached") \
    X(DRIVER_LOAD_FAILED, "driver: the load failed") \
    X(DRIVER_LIMIT, "driver: model limit reached; re-listing to evict one more") \
    X(DRIVER_REDECIDE, "driver: the listing changed under the lock; decided again") \
    X(DRIVER_RESTORE, "driver: restored evicted models after a failed load") \
    X(DRIVER_LOCK_UNLOCKED, "driver: proceeding without the cross-process lock")
/* proc */
#define RSDI_LOG_ITEMS_PROC(X) \
    X(PROC_BAD_DESC, "procs: desc value out of range") \
    X(PROC_TEMPLATE, "procs: command template invalid or a placeholder unset") \
    X(PROC_PORT, "procs: no free loopback port") \
    X(PROC_SPAWN, "procs: process started") \
    X(PROC_SPAWN_FAILED, "procs: process could not be started") \
    X(PROC_READY, "procs: process marked ready") \
    X(PROC_START_TIMEOUT, "procs: not ready by the start deadline; stopping") \
    X(PROC_STOP, "procs: SIGTERM sent") \
    X(PROC_KILL, "procs: SIGKILL sent (grace period over, or kill)") \
    X(PROC_STOPPED, "procs: process exited after a stop") \
    X(PROC_EXITED, "procs: process exited unexpectedly") \
    X(PROC_STUCK, "procs: process not reaped after SIGKILL") \
    X(PROC_OUTPUT, "procs: one line of a child's output (debug)")
/* pool */
#define RSDI_LOG_ITEMS_POOL(X) \
    X(POOL_BAD_DESC, "pool: desc value out of range") \
    X(POOL_BAD_MODEL, "pool: bad model (id length, reserve bytes, duplicate)") \
    X(POOL_MODEL_TABLE_FULL, "pool: model table full (RSD_POOL_MAX_MODELS)") \
    X(POOL_STOP, "pool: stopping a slot's process") \
    X(POOL_EVICT, "pool: evicting the LRU idle slot") \
    X(POOL_DRAIN, "pool: draining a busy slot for a starving request") \
    X(POOL_NO_FIT, "pool: model can never fit in the byte budget") \
    X(POOL_QUEUE_FULL, "pool: waiting queue full") \
    X(POOL_LOAD_FAILED, "pool: model failed to load") \
    X(POOL_CRASHED, "pool: process exited unexpectedly") \
    X(POOL_BUSY, "pool: unload refused, model busy") \
    X(POOL_BACKOFF, "pool: start failed; next start of the model backed off") \
    X(POOL_RESTORE, "pool: reloading a model evicted for a start that failed") \
    X(POOL_LEASE, "pool: a byte lease granted or released") \
    X(POOL_STOPPED, "pool: stopped")
/* state */
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
    X(ATTR_LOCK_TIMEOUT, "attribution file lock busy past RSD_STATE_ATTR_LOCK_WAIT_MS") \
    X(STATE_MIGRATED, "state: records under an older version's target key moved to the current key")
/* fleet */
#define RSDI_LOG_ITEMS_FLEET(X) \
    X(FLEET_START_FAILED, "fleet: a model process failed to start") \
    X(FLEET_CRASHED, "fleet: a ready model process exited unexpectedly") \
    X(FLEET_READY, "fleet: a model process answered its health probe with 200") \
    X(FLEET_WAITING, "fleet: a starting model process does not listen yet (not an error)") \
    X(FLEET_EVENT_DROPPED, "fleet: event queue full, oldest event dropped (pull events every step)")

#define RSD_LOG_ITEMS(X) \
    RSDI_LOG_ITEMS_CORE(X) RSDI_LOG_ITEMS_JSON(X) RSDI_LOG_ITEMS_HTTP(X) \
    RSDI_LOG_ITEMS_RECONCILE(X) RSDI_LOG_ITEMS_DRIVER(X) RSDI_LOG_ITEMS_PROC(X) RSDI_LOG_ITEMS_POOL(X) RSDI_LOG_ITEMS_STATE(X) \
    RSDI_LOG_ITEMS_TLS(X) RSDI_LOG_ITEMS_FLEET(X)

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

/* ==== types: allocator, string view ======================================= */
/* The one "no deadline": what every *_next_deadline returns when nothing is due (pool,
   process supervisor, HTTP client and server, fleet, ensurer, etcd). */
#define RSD_NO_DEADLINE UINT64_MAX

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

/* ==== text: what reaches a terminal or a log line ========================= */
/* s for a terminal or a log line: control bytes, DEL, C1 controls and bytes that
   are not UTF-8 become \n \r \t or \xHH; the rest is copied. Returns the full
   length (snprintf-like); NUL-terminates when cap > 0; buf may be NULL with cap 0. */
RSD_API size_t rsd_text_escape(rsd_str s, char *buf, size_t cap);
/* Command-line argument arg as it may be shown, given the one before it (prev, NULL
   for the first): the value of a flag whose name holds key, token, secret or password
   becomes ***, and a URL's user:password@ becomes ***@. Same return as above. */
RSD_API size_t rsd_arg_redact(const char *prev, const char *arg, char *buf, size_t cap);

/* ==== json ================================================================ */
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
    uint32_t line;      /* 1-based line of offset; 0 for RSD_ERR_TOO_LARGE (input not read) */
    uint32_t col;       /* 1-based column of offset, counted in bytes; 0 as line */
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

/* Strict parse of all of s[0..len) keeping only the tokens of the root and its members:
   a member's container value is one token without children (rsd_json_expand and
   rsd_json_each read into it). The token count (> 0) or <0 as rsd_json_parse;
   RSD_ERR_ARG without tokens. */
RSD_API int rsd_json_parse_top(rsd_json_doc *doc, const char *s, size_t len, rsd_json_tok *toks,
                               uint32_t cap);
/* The value of token i tokenized in full into the tokens after doc's own: *sub is a
   document of that value alone (its root is token 0). RSD_OK, RSD_ERR_JSON_TOKENS (it
   needs more tokens than remain), RSD_ERR_ARG. */
RSD_API int rsd_json_expand(const rsd_json_doc *doc, int i, rsd_json_doc *sub);
/* The elements of array token arr one at a time, each tokenized in full into the tokens
   after doc's own (*el as rsd_json_expand gives it). Start with *pos = 0. 1 = *el is the
   next element, 0 = no more, <0 = RSD_ERR_JSON_TOKENS (one element needs more tokens than
   remain), RSD_ERR_ARG. */
RSD_API int rsd_json_each(const rsd_json_doc *doc, int arr, size_t *pos, rsd_json_doc *el);

/* A list entry handed by the splitter: key is the raw (still escaped) key of the
   top-level member whose array holds it (empty for an element of a top-level array);
   el is the entry tokenized in full (root 0), or NULL when that member's array begins. */
typedef void (*rsd_json_split_fn)(void *user, rsd_str key, const rsd_json_doc *el);

/* A document read as it arrives: the elements of each array that is the value of a
   top-level member (or the top-level array itself) go to fn one at a time and are then
   forgotten; the rest, those arrays written as [], is kept in buf. All fields internal. */
typedef struct rsd_json_split {
    char *buf;                 /* the kept top level, then the element in flight */
    size_t cap, kept, fly, total, key_at, key_len, el_at, err_at;
    rsd_json_tok *toks;
    uint32_t n_toks, depth, el_depth, max_el, n_root;
    uint32_t dropped;          /* the bytes of the lists' elements before the last list's end */
    uint32_t list_at;          /* 4 bytes before the last list's '[' where it is kept (0: the whole is read) */
    rsd_json_split_fn fn;
    void *user;
    int err, pending;          /* the first error; RSD_ERR_JSON_TOKENS waiting on the rest */
    uint8_t st, in_str, esc, root, prev, kind;
    uint8_t whole;             /* a whole body in one piece: elements are read where they lie, unbounded */
    const char *what;
} rsd_json_split;

/* Starts splitting into buf[0..cap) with toks[0..n_toks) for each element (and the top
   level at the end). */
RSD_API void rsd_json_split_init(rsd_json_split *sp, char *buf, size_t cap, rsd_json_tok *toks, uint32_t n_toks,
                                 rsd_json_split_fn fn, void *user);
/* The next len bytes of the document (any split; data may be inside buf, at or after
   what is kept). RSD_OK or the first error (sticky). */
RSD_API int rsd_json_split_feed(rsd_json_split *sp, const char *data, size_t len);
/* The end of the document: *top is the kept top level (the source is buf). The token
   count (> 0) or <0: the verdict rsd_json_parse_top gives on the whole document
   (RSD_ERR_JSON_TOKENS when its top level and its largest element do not fit in the
   tokens together), or RSD_ERR_BODY_TOO_LARGE (an element or the top level over cap). */
RSD_API int rsd_json_split_end(rsd_json_split *sp, rsd_json_doc *top);

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
/* Value of the last member `key` in object obj (escapes in keys decoded), or -1. */
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
/* An object key of n bytes (may contain NUL). */
RSD_API int rsd_json_w_keyn(rsd_json_writer *w, const char *key, size_t n);
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

/* ==== json end ============================================================ */

/* ==== reconcile =========================================================== */
/* The pure reconciler decision: facts in, plan out. No I/O, no allocation, no
   clock. Manual: "reconcile" in the doc block at the top of this file. */
enum {
    RSD_MAX_RESIDENTS = 64,       /* residents in one rsd_facts */
    RSD_MAX_ALIASES = 4,          /* aliases per resident, and of the keep model */
    RSD_MAX_TAGS = 8,             /* tags per resident, and of the keep model */
    RSD_MAX_PROTECTED = 64,       /* entries in rsd_facts.protected_models */
    RSD_MODEL_ID_MAX = 256,       /* bytes of a model id, including the NUL */
    RSD_TARGET_KEY_MAX = 256,     /* bytes of a normalised target key, incl. NUL */
    RSD_MAX_NOTICES = 2 * RSD_MAX_RESIDENTS + 4, /* a plan never needs more */
    RSD_DECISION_CACHE_MAX = 32,  /* entries in one rsd_decision_cache */
    RSD_DECISION_CACHE_TEXT = RSD_TARGET_KEY_MAX + RSD_MODEL_ID_MAX, /* bytes of one entry's ids: the key and
                                     the model always fit; LM Studio's wire id and model key share the rest */
    RSD_DECISION_CACHE_TTL_MS = 60000 /* default TTL of the decision cache */
};

/* Decisions: X(NAME, "string"). */
#define RSD_DECISIONS(X) \
    X(NONE, "none") \
    X(ALREADY_RESIDENT, "already-resident") \
    X(LOAD, "load") \
    X(LOAD_AFTER_EVICT, "load-after-evict") \
    X(DECLINE, "decline") \
    X(OBSERVE, "observe") \
    X(FREE, "free")
/* What the plan asks the driver to do. */
typedef enum rsd_decision {
#define RSDI_X(n, s) RSD_DECISION_##n,
    RSD_DECISIONS(RSDI_X)
#undef RSDI_X
    RSD_DECISION_NUM
} rsd_decision;

/* Reason codes: why the plan is what it is. X(NAME, "string"). */
#define RSD_REASONS(X) \
    X(NONE, "none") \
    X(KEEP_RESIDENT, "keep model already resident; co-residents are left alone") \
    X(EMPTY_SERVER, "nothing resident; load") \
    X(FREE_SLOT, "a free instance slot exists; load beside the residents") \
    X(EVICT_UNPROTECTED, "every slot taken; evict the fewest unprotected residents") \
    X(EVICT_LRU, "every slot taken; evict the least recently used unprotected residents") \
    X(EVICT_CONFIG, "every slot taken and no unprotected resident left; evict a configured model") \
    X(CAPACITY_UNKNOWN_EVICT_ONE, "capacity unknown; evict one unprotected resident") \
    X(CAPACITY_UNKNOWN_NONE_EVICTABLE, "capacity unknown and nothing unprotected; load as is") \
    X(JIT_LOAD, "jit: load now; the fallback list is used only if the load fails") \
    X(SCHEDULER_RELEASE_OURS, "scheduler: release stragglers this process loaded") \
    X(SCHEDULER_LOAD, "scheduler: nothing of ours to release; the request loads") \
    X(FITS_BYTES, "sizes known: the keep fits in the free memory; nothing evicted") \
    X(EVICT_BYTES, "sizes known: evict the fewest unprotected residents that free enough memory") \
    X(DECLINE_ALL_PINNED, "declined: the slots hold pinned models") \
    X(DECLINE_PINNED_KEEP, "declined: a pinned keep would strand a configured model") \
    X(DECLINE_NOT_LOADABLE, "declined: the server does not serve the keep model") \
    X(OBSERVE_ENV, "observe-only: RESIDENCY opt-out") \
    X(OBSERVE_TARGET, "observe-only: target is user-managed") \
    X(PROBE_FAILED, "observe: the resident listing failed") \
    X(FREE_BYTES, "free memory: unload models this library loaded, least recently used first") \
    X(FREE_SHORT, "free memory: the models this library loaded hold less than asked; unload them all") \
    X(FREE_NOTHING, "free memory: no model this library loaded can be unloaded")
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
    X(DEGRADED, "degraded") \
    X(RESTORED, "restored") \
    X(LOAD_FAILED, "load-failed")
/* Kind of an operator notice (RESTORED and LOAD_FAILED come from the drivers). */
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
    X(NOT_LOADABLE, "not-loadable") \
    X(BYTES_SHORT, "bytes-short") \
    X(FREE_OURS, "free-ours") \
    X(FREE_SHORT, "free-short")
/* Which message a notice carries. */
typedef enum rsd_notice_msg {
#define RSDI_X(n, s) RSD_MSG_##n,
    RSD_NOTICE_MSGS(RSDI_X)
#undef RSDI_X
    RSD_MSG_NUM
} rsd_notice_msg;

/* Configured roles, in precedence order of collection. */
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

/* Observe-only opt-outs; NONE (zero) = managed. */
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

/* One loaded model as the server reports it. Strings are views the caller
   keeps alive while the facts and their plan are in use. */
typedef struct rsd_resident {
    rsd_str model_id;                   /* required, 1..RSD_MODEL_ID_MAX-1 bytes */
    rsd_str aliases[RSD_MAX_ALIASES];   /* other ids of the same model; empty ones ignored */
    rsd_str tags[RSD_MAX_TAGS];         /* server tags (llama.cpp presets) */
    int n_aliases;                      /* 0..RSD_MAX_ALIASES */
    int n_tags;                         /* 0..RSD_MAX_TAGS */
    uint64_t size_vram_bytes;           /* GPU-resident bytes, valid if has_size_vram */
    uint64_t size_bytes;                /* total weight bytes, valid if has_size */
    uint64_t last_used_ms;              /* its last use, ms since the epoch; 0 = unknown */
    bool has_size_vram;                 /* absent sizes are never zero */
    bool has_size;
    bool loaded_by_us;                  /* attribution: we loaded it */
    bool pinned;                        /* protect as if tagged pinned:true */
} rsd_resident;

/* One configured model id with its role. */
typedef struct rsd_protected_model {
    rsd_str model_id;  /* trimmed by rsd_decide; empty or overlong entries are skipped */
    rsd_role role;     /* RSD_ROLE_NONE = bare id, role unknown */
} rsd_protected_model;

/* Everything the decision needs. Zeroed fields mean: router, capacity
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
    bool keep_pinned;                   /* keep will be tag-pinned, besides keep_tags */
    const rsd_resident *residents;      /* what is loaded (loaded/loading/sleeping) */
    int n_residents;                    /* 0..RSD_MAX_RESIDENTS */
    const rsd_protected_model *protected_models; /* configured ids */
    int n_protected;                    /* 0..RSD_MAX_PROTECTED */
    uint32_t max_instances;             /* server capacity; 0 = unknown */
    uint32_t context_length;            /* requested load context; 0 = none */
    uint32_t model_max_context;         /* keep's context limit; 0 = unknown */
    uint32_t context_ceiling;           /* clamp ceiling; 0 = RSD_FIT_CEILING_DEFAULT */
    uint64_t capacity_bytes;            /* memory the residents share (e.g. VRAM total); 0 = unknown */
    uint64_t keep_bytes;                /* what the keep takes once loaded; 0 = unknown */
    uint64_t free_bytes;                /* with an empty keep: a free plan (free this many bytes), no load */
    uint64_t kv_bytes_per_token;        /* the keep's KV bytes per context token: the clamp by bytes
                                           (with capacity_bytes and every resident sized); 0 = unknown */
    uint32_t context_floor;             /* the clamp by bytes never goes below; 0 = RSD_FIT_FLOOR_DEFAULT */
} rsd_facts;

/* Per-resident classification, index-aligned with rsd_facts.residents. */
typedef struct rsd_resident_class {
    uint8_t is_keep;       /* shares an id with the keep model */
    uint8_t protection;    /* rsd_protection of its identity group */
    uint8_t role;          /* rsd_role when config-protected */
    uint8_t ours;          /* loaded_by_us (any member of its group) */
    uint8_t evict;         /* planned (or, when observing, would be) evicted */
    uint8_t group;         /* index of its identity group's representative */
    uint8_t victim_rule;   /* planned victim: rsd_victim_rule, why before the others of its tier */
} rsd_resident_class;

/* Why an eviction notice's victim went before the other candidates of its tier. */
typedef enum rsd_victim_rule {
    RSD_VICTIM_NONE = 0,   /* not a victim chosen by order (byte-aware picks: largest first) */
    RSD_VICTIM_LRU,        /* the least recently used of its tier (its last use is known) */
    RSD_VICTIM_UNUSED,     /* no use of it is known, while others of its tier have one */
    RSD_VICTIM_BY_ID,      /* no last use is known in its tier: the first by id */
    RSD_VICTIM_NUM
} rsd_victim_rule;

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
    RSD_DETAIL_ROLE = 1u << 10,
    RSD_DETAIL_RESTORED = 1u << 11,      /* driver: ids in result.evicted[] with restored set */
    RSD_DETAIL_UNRESTORED = 1u << 12,    /* driver: ids in result.evicted[] left unloaded */
    RSD_DETAIL_KEEP_BYTES = 1u << 13,
    RSD_DETAIL_FREE_BYTES = 1u << 14,
    RSD_DETAIL_CAPACITY_BYTES = 1u << 15
};

/* An operator notice. Its text comes from rsd_notice_format. */
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
    uint64_t keep_bytes, free_bytes, capacity_bytes; /* BYTES_SHORT */
    bool config_protected;
    rsd_role role;
} rsd_notice;

/* The plan, with a reason code. Index lists refer to rsd_facts.residents; the plan is
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
    uint64_t freed_bytes;     /* a free plan: what its evictions free */
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

/* Decide what to do. Returns RSD_OK, or <0 for bad facts
   (RSD_ERR_ARG, RSD_ERR_RESIDENTS_LIMIT, RSD_ERR_MODEL_ID); *out is always written. */
RSD_API int rsd_decide(const rsd_facts *facts, rsd_plan *out);
/* Loadability gate: the driver found, from the listing it already
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
/* True iff the tags protect a model: exact "pinned:true" or "role:scout". */
RSD_API bool rsd_tags_protect(const rsd_str *tags, int n_tags);

/* The operator's settings, for rsd_protected_collect. */
typedef struct rsd_role_sources {
    rsd_str chat;                     /* orchestrator model */
    rsd_str memory;                   /* background model */
    rsd_str worker_default;           /* worker default model */
    const rsd_str *worker_profiles;   /* every worker profile's model, in order */
    int n_worker_profiles;
    const rsd_str *target_defaults;   /* every target's default model, in order */
    int n_target_defaults;
} rsd_role_sources;

/* Collect protected ids with roles, first claim wins, trimmed, empty skipped.
   Returns the count written, or RSD_ERR_BUFFER when cap is too small. */
RSD_API int rsd_protected_collect(const rsd_role_sources *src, rsd_protected_model *out, int cap);

/* True iff RESIDENCY's value asks for observe-only: observe|off|0|false|user|
   user-managed, trimmed, any case. NULL/empty/other = managed. */
RSD_API bool rsd_env_observe(const char *env_value);
/* True iff RESIDENCY's value is one residency knows: NULL, empty, an opt-out above, or an
   explicit managed value on|1|true|managed (trimmed, any case). Anything else (a typo such
   as "obsreve") still means managed; the ensurer warns about it once. */
RSD_API bool rsd_env_known(const char *env_value);
/* True iff a target lifecycle value is "user-managed" (trimmed, any case). */
RSD_API bool rsd_lifecycle_user_managed(const char *lifecycle);
/* Combined verdict: TARGET if user_managed, else ENV if the env value opts out, else NONE. */
RSD_API rsd_optout rsd_optout_resolve(const char *env_value, bool target_user_managed);
/* Same, reading getenv("RESIDENCY") itself. */
RSD_API rsd_optout rsd_optout_from_env(bool target_user_managed);

/* The root URL of a configured base URL into out (NUL-terminated): spaces trimmed,
   ws:// -> http://, wss:// -> https://, trailing '/' dropped, then one trailing "/v1",
   then trailing '/'. Requests go to root + "/v1/models" and so on. Length, or
   RSD_ERR_URL (empty root, a query or fragment), RSD_ERR_BUFFER, RSD_ERR_ARG. */
RSD_API int rsd_root_url(rsd_str url, char *out, size_t cap);
/* Normalise a target key: ["runtime|"]URL, the one key of a server that the lock, the
   caches and the state files share. Scheme, host and the prefix lower-cased; ws/wss read
   as http/https; the port without leading zeros and dropped when it is the default
   (80, 443); query and fragment dropped; the path as rsd_root_url leaves it (so
   "http://h:08080/", "http://H:8080" and "http://h:8080/v1" are one key). A text without
   "scheme://" loses only trailing '/'. Idempotent. Returns the length, or
   RSD_ERR_BUFFER if it does not fit cap (incl. NUL), RSD_ERR_ARG for NULL out. */
RSD_API int rsd_target_key_normalise(rsd_str raw, char *out, size_t cap);

/* One decision-cache slot; treat as opaque. */
typedef struct rsd_cache_entry {
    uint64_t at_ms;           /* when stored */
    uint64_t used_ms;         /* last hit, for LRU replacement */
    uint64_t generation;      /* mutation generation it was stored under */
    rsd_decision decision;
    rsd_reason reason;
    bool used;
    bool keep_resident;       /* the keep was resident (stored by a reconcile) */
    int outcome;              /* rsd_outcome stored by a reconcile; 0 = from the decision */
    int error;                /* the reconcile's result code (a decline may carry one) */
    int tier, state;          /* LM Studio: API tier and resolution */
    uint16_t model_at, wire_at, mkey_at, text_len; /* where each id starts in text; bytes used */
    char text[RSD_DECISION_CACHE_TEXT]; /* key NUL model NUL wire id NUL model key NUL ("" = the model itself) */
} rsd_cache_entry;

/* Decision cache per (normalised target key, model) with a TTL.
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
    int outcome;              /* rsd_outcome of the reconcile that stored it */
    int error;                /* its result code */
    bool keep_resident;
    int tier, state;          /* LM Studio: API tier and resolution (0 otherwise) */
    const char *wire_id;      /* the id to send ("" = the model); valid until the entry changes */
    const char *model_key;    /* the model it concerns ("" = the model) */
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
/* ---- context fit ---- */
/* Context-fit clamp: cap a load's context while other models share
   the server. Manual: "fit" in the doc block at the top of this file. */
enum {
    RSD_FIT_CEILING_DEFAULT = 131072  /* default ceiling, RESIDENCY_CORESIDENT_CONTEXT */
};
/* Ceiling value meaning "clamp disabled" (any request fits under it). */
#define RSD_FIT_CEILING_OFF 0xFFFFFFFFu

/* Context to load with: requested when n_other_residents == 0, the ceiling is
   RSD_FIT_CEILING_OFF, or requested <= ceiling; else ceiling. Never raises a
   request. ceiling 0 means RSD_FIT_CEILING_DEFAULT. */
RSD_API uint32_t rsd_fit_context(uint32_t requested, int n_other_residents, uint32_t ceiling);
/* Parse RESIDENCY_CORESIDENT_CONTEXT: NULL/empty -> default; off|0|false
   (trimmed, any case) -> RSD_FIT_CEILING_OFF; a positive integer prefix -> that
   (saturating at 0xFFFFFFFE); anything else -> RSD_FIT_CEILING_DEFAULT. */
RSD_API uint32_t rsd_fit_ceiling_parse(const char *env_value);
/* Same, reading getenv("RESIDENCY_CORESIDENT_CONTEXT") itself. */
RSD_API uint32_t rsd_fit_ceiling_from_env(void);

/* The clamp by bytes: the largest context whose KV cache fits the bytes left beside the
   models that stay, never below a floor; the fixed ceiling without a figure. */
enum {
    RSD_FIT_FLOOR_DEFAULT = 4096, /* a clamp by bytes never goes below this many tokens */
    RSD_FIT_ROUND = 256           /* llama.cpp pads each sequence's context to this */
};
typedef struct rsd_fit_bytes_desc {
    uint32_t requested;          /* context the load asks for (-c), tokens; 0 = none */
    int n_other_residents;       /* models that stay resident beside it; <= 0: never clamped */
    uint64_t kv_bytes_per_token; /* its KV bytes per context cell (every layer, K and V);
                                    0 = unknown: the fixed ceiling (rsd_fit_context) */
    uint64_t free_bytes;         /* the budget less what stays resident and what others hold */
    uint64_t load_bytes;         /* the load's own bytes besides its KV (weights, compute) */
    uint32_t n_seq;              /* KV streams the context is split into (-np N without a
                                    unified cache); 0 = 1 */
    uint32_t floor;              /* never clamped below this; 0 = RSD_FIT_FLOOR_DEFAULT */
    uint32_t ceiling;            /* without a figure: as rsd_fit_context (0 = default) */
} rsd_fit_bytes_desc;

typedef struct rsd_fit_bytes {
    uint32_t context;   /* load with this; never above requested */
    uint32_t fits;      /* the largest context whose KV fits: requested when it does, else a
                           multiple of 256 x n_seq (0: not even one block) */
    uint64_t kv_bytes;  /* KV bytes of context as llama.cpp allocates it (saturating) */
    bool by_bytes;      /* the figure decided (else the fixed ceiling, or alone) */
    bool clamped;       /* context < requested */
    bool floored;       /* fits < the floor: context is the floor (or requested, if lower) and
                           its KV does not fit the bytes left; a host evicts instead */
} rsd_fit_bytes;

/* Fill out: RSD_OK, or RSD_ERR_ARG for NULL. */
RSD_API int rsd_fit_context_bytes(const rsd_fit_bytes_desc *d, rsd_fit_bytes *out);
/* ==== reconcile end ======================================================= */

/* ==== payload ============================================================= */
/* router */
/* Manual: "payload" in the doc block at the top of this file. */
enum {
    RSD_LISTING_DEFAULT_MODELS = 64, /* entries of a listing made with the defaults (a server listing 64 models) */
    RSD_LISTING_ARENA_PER_MODEL = 176, /* default arena bytes per entry (ids, aliases, tags; a real router's id: 20-120) */
    RSD_LISTING_MAX_MODELS = 256,     /* a large listing: tests and tools size theirs with these */
    RSD_LISTING_ARENA_BYTES = 65536,  /* its arena (decoded ids, aliases and tags) */
    RSD_LISTING_MAX_TOKENS = 16384    /* JSON tokens of a whole payload of that size (parsers need only one entry's) */
};

/* Load state of a listed model. */
#define RSD_MODEL_STATES(X) \
    X(UNKNOWN, "unknown") \
    X(UNLOADED, "unloaded") \
    X(LOADING, "loading") \
    X(LOADED, "loaded") \
    X(SLEEPING, "sleeping") \
    X(DOWNLOADING, "downloading") \
    X(FAILED, "failed")
/* State of one listed model; FAILED = unloaded after a failed load or crash. */
typedef enum rsd_model_state {
#define RSDI_X(n, s) RSD_MODEL_##n,
    RSD_MODEL_STATES(RSDI_X)
#undef RSDI_X
    RSD_MODEL_STATE_NUM
} rsd_model_state;

/* Flags of a listed model. */
enum {
    RSD_LISTED_ALIASES_CUT = 1u << 0,  /* more aliases than RSD_MAX_ALIASES */
    RSD_LISTED_TAGS_CUT = 1u << 1      /* more tags than RSD_MAX_TAGS */
};

/* One model in a server listing. Views point into the owning rsd_listing's arena, where
   the entry's aliases and then its tags follow its id, each NUL-terminated: read them
   with rsd_listed_alias and rsd_listed_tag. */
typedef struct rsd_listed_model {
    rsd_str id;                         /* canonical id, 1..RSD_MODEL_ID_MAX-1 bytes, no NUL */
    rsd_str instance;                   /* runtime instance id (LM Studio); empty otherwise */
    uint64_t size_bytes;                /* total weight bytes when has_size */
    uint64_t size_vram_bytes;           /* GPU-resident bytes when has_size_vram */
    uint64_t last_used_ms;              /* status.last_used (ms since the epoch) when listed; 0 = not */
    int64_t exit_code;                  /* router status.exit_code when has_exit_code */
    uint32_t context_length;            /* context it runs with; 0 = unknown */
    uint32_t max_context;               /* its trained/maximum context; 0 = unknown */
    rsd_model_state state;
    uint8_t n_aliases;                  /* other names that route to it: rsd_listed_alias(m, 0..n-1) */
    uint8_t n_tags;                     /* preset tags, protecting ones kept first: rsd_listed_tag */
    uint8_t flags;                      /* RSD_LISTED_* */
    bool failed;                        /* the last load/run failed (router failed:true) */
    bool has_exit_code;
    bool has_size, has_size_vram;       /* absent sizes are never zero */
} rsd_listed_model;

/* A parsed server listing (every model the server reports, in listing order). Its
   storage (models[], arena) is the caller's, given by rsd_listing_init, or allocated by
   rsd_listing_create. */
typedef struct rsd_listing {
    int n;                              /* entries kept in models[] */
    uint32_t n_seen;                    /* elements in the payload's list */
    uint32_t n_skipped;                 /* elements dropped (no usable id) */
    bool truncated;                     /* entries were cut off: do not act on it */
    bool has_states;                    /* some entry has a known state (router check) */
    size_t arena_used;
    /* the storage: everything above is the parsed header, reset by every parse */
    rsd_listed_model *models;
    char *arena;
    int max_models;                     /* room in models[] */
    size_t arena_bytes;                 /* room in arena */
} rsd_listing;

/* Sizes of a listing made by rsd_listing_create; zeroed = defaults. */
typedef struct rsd_listing_desc {
    int max_models;                     /* 0 = RSD_LISTING_DEFAULT_MODELS (64) */
    size_t arena_bytes;                 /* 0 = RSD_LISTING_ARENA_PER_MODEL per entry */
    rsd_allocator allocator;
} rsd_listing_desc;

/* What a router's GET /props says. */
typedef struct rsd_router_props {
    bool is_router;                     /* "role": "router" */
    bool unlimited;                     /* is_router and max_instances exactly 0 */
    uint32_t max_instances;             /* > 0 when known; 0 = unknown */
} rsd_router_props;

/* "unloaded", "loading", ...; never NULL. */
RSD_API const char *rsd_model_state_str(int state);
/* True for LOADING, LOADED and SLEEPING: the model holds an instance slot. */
RSD_API bool rsd_model_state_resident(int state);
/* Give l caller storage: models[0..max_models) and arena[0..arena_bytes). No allocation.
   RSD_OK, RSD_ERR_ARG (NULL storage, max_models < 1 or arena_bytes < RSD_MODEL_ID_MAX). */
RSD_API int rsd_listing_init(rsd_listing *l, rsd_listed_model *models, int max_models, char *arena,
                             size_t arena_bytes);
/* A listing and its storage in one block from d's allocator (NULL = defaults); NULL on
   failure. rsd_listing_destroy frees it. */
RSD_API rsd_listing *rsd_listing_create(const rsd_listing_desc *d);
RSD_API void rsd_listing_destroy(rsd_listing *l);
/* Bytes rsd_listing_create(d) allocates (0 = d is invalid). */
RSD_API size_t rsd_listing_footprint(const rsd_listing_desc *d);
/* Index of the entry whose id or an alias equals name, or -1. */
RSD_API int rsd_listing_find(const rsd_listing *l, rsd_str name);
/* Alias k (0..n_aliases-1) of a listed model; an empty view when k is out of range. */
RSD_API rsd_str rsd_listed_alias(const rsd_listed_model *m, int k);
/* Tag k (0..n_tags-1) of a listed model; an empty view when k is out of range. */
RSD_API rsd_str rsd_listed_tag(const rsd_listed_model *m, int k);
/* Parse a llama.cpp router GET /v1/models body into *out. RSD_OK or a JSON error. */
RSD_API int rsd_router_parse_models(const char *body, size_t len, rsd_json_tok *toks,
                                    uint32_t n_toks, rsd_listing *out);
/* Parse a router GET /props body (role, max_instances). RSD_OK or a JSON error. */
RSD_API int rsd_router_parse_props(const char *body, size_t len, rsd_json_tok *toks,
                                   uint32_t n_toks, rsd_router_props *out);
/* One slot of llama-server's GET /slots answer. */
typedef struct rsd_slot {
    int id;                             /* "id", else its place in the answer */
    uint32_t n_ctx;                     /* "n_ctx"; 0 = absent */
    int64_t n_prompt_tokens;            /* the tokens its prompt cache holds; 0 = none or absent */
} rsd_slot;
/* Parse a GET /slots body: the first cap slots into out[]; how many the answer has
   (may exceed cap), or a JSON error, RSD_ERR_PAYLOAD (not an array of objects). */
RSD_API int rsd_router_parse_slots(const char *body, size_t len, rsd_json_tok *toks, uint32_t n_toks,
                                   rsd_slot *out, int cap);
/* ollama */
/* Manual: "payload: Ollama and LM Studio" in the doc block at the top of this file. */
enum {
    RSD_SERVER_ERROR_MAX = 256       /* bytes kept of a server error message, incl. NUL */
};

/* The error member of a server reply (both the text and the object form). */
typedef struct rsd_server_error {
    bool present;                        /* the reply had a non-null "error" member */
    char message[RSD_SERVER_ERROR_MAX];  /* text, or the object's "message"; "" if none */
    char type[64];                       /* object form: "model_not_found", ...; else "" */
    char code[64];                       /* object form: "code"; else "" */
} rsd_server_error;

/* Parse the "error" member of a reply body: 1 present, 0 absent, <0 not JSON. */
RSD_API int rsd_server_error_parse(rsd_server_error *out, const char *body, size_t len,
                                   rsd_json_tok *toks, uint32_t cap);

/* GET /api/version. */
typedef struct rsd_ollama_version {
    char text[64];                /* "0.12.6" (truncated), "" if absent */
    int major, minor, patch;      /* -1 where the text has no such number */
} rsd_ollama_version;

/* done_reason of a /api/generate reply. */
typedef enum rsd_ollama_done {
    RSD_OLLAMA_DONE_NONE = 0,     /* absent (not done, or an older server) */
    RSD_OLLAMA_DONE_LOAD,         /* "load": the model is loaded */
    RSD_OLLAMA_DONE_UNLOAD,       /* "unload": unload accepted (happens asynchronously) */
    RSD_OLLAMA_DONE_STOP,         /* "stop" */
    RSD_OLLAMA_DONE_LENGTH,       /* "length" */
    RSD_OLLAMA_DONE_OTHER,        /* any other text */
    RSD_OLLAMA_DONE_NUM
} rsd_ollama_done;

/* A /api/generate reply (load or unload). */
typedef struct rsd_ollama_reply {
    bool done;                    /* "done": true */
    rsd_ollama_done reason;       /* "done_reason" */
    rsd_server_error error;       /* "error" member, if any */
} rsd_ollama_reply;

/* Load request options; zeroed = {"model":m,"stream":false} only. */
typedef struct rsd_ollama_load_opts {
    bool set_keep_alive;          /* send keep_alive */
    int64_t keep_alive_s;         /* seconds; < 0 = forever (what chats send) */
    uint32_t num_ctx;             /* options.num_ctx; 0 = omit (a different value reloads) */
} rsd_ollama_load_opts;

#ifndef RSD_NO_OLLAMA /* compiled out: no declarations (RSD_STATIC would warn of them) */
/* Parse GET /api/ps into a neutral listing (every entry LOADED). RSD_OK or <0. */
RSD_API int rsd_ollama_ps_listing(const char *body, size_t len, rsd_json_tok *toks, uint32_t n_toks,
                                  rsd_listing *out);
/* Normalise a model name to the form /api/ps lists ("llama3.2" -> "llama3.2:latest"). */
RSD_API int rsd_ollama_name_normalise(rsd_str name, char *out, size_t cap);
/* Parse {"version":"x.y.z"}: RSD_OK, RSD_ERR_JSON_TYPE (no version string), <0. */
RSD_API int rsd_ollama_parse_version(rsd_ollama_version *out, const char *body, size_t len,
                                     rsd_json_tok *toks, uint32_t cap);
/* Parse a /api/generate reply: RSD_OK, RSD_ERR_SERVER_ERROR (error member), <0 bad body. */
RSD_API int rsd_ollama_parse_generate(rsd_ollama_reply *out, const char *body, size_t len,
                                      rsd_json_tok *toks, uint32_t cap);
/* Write the load body for POST /api/generate into buf. Length or <0 (RSD_ERR_BUFFER). */
RSD_API int rsd_ollama_load_body(char *buf, size_t cap, rsd_str model, const rsd_ollama_load_opts *opts);
/* Write the unload body {"model":m,"keep_alive":0,"stream":false}. Length or <0. */
RSD_API int rsd_ollama_unload_body(char *buf, size_t cap, rsd_str model);
#endif /* RSD_NO_OLLAMA */
/* lmstudio */
/* Manual: "payload: LM Studio" in the doc block at the top of this file. */
enum {
    RSD_LMS_MAX_MODELS = 256,     /* catalog models kept (after folding duplicates) */
    RSD_LMS_MAX_INSTANCES = 64,   /* loaded instances kept */
    RSD_LMS_MAX_PEERS = 32,       /* peer listings rsd_lms_resolve accepts */
    RSD_LMS_ARENA_BYTES = 16384,  /* copied keys and instance ids of one catalog */
    RSD_LMS_MODEL_SLOTS = 2 * RSD_LMS_MAX_MODELS,      /* hash slots over model keys */
    RSD_LMS_INSTANCE_SLOTS = 2 * RSD_LMS_MAX_INSTANCES /* hash slots over instance ids */
};

/* API tier of an LM Studio server. */
typedef enum rsd_lms_tier {
    RSD_LMS_TIER_NONE = 0,
    RSD_LMS_TIER_V1,              /* 0.4+: /api/v1/models, load and unload exist */
    RSD_LMS_TIER_V0,              /* 0.3.x: /api/v0/models, observe-only (no load API) */
    RSD_LMS_TIER_OPENAI,          /* only /v1/models: ids, no state */
    RSD_LMS_TIER_NUM
} rsd_lms_tier;

/* Model type as listed. */
typedef enum rsd_lms_type {
    RSD_LMS_TYPE_UNKNOWN = 0,
    RSD_LMS_TYPE_LLM,
    RSD_LMS_TYPE_VLM,
    RSD_LMS_TYPE_EMBEDDING,       /* "embedding" (v1) or "embeddings" (v0) */
    RSD_LMS_TYPE_OTHER,
    RSD_LMS_TYPE_NUM
} rsd_lms_type;

/* One catalog model (folded over LM Link duplicates). */
typedef struct rsd_lms_model {
    rsd_str key;                  /* model key (v0: the row id) */
    rsd_lms_type type;
    uint32_t max_context_length;  /* 0 = not given */
    uint64_t size_bytes;          /* valid if has_size */
    bool has_size;
    bool vision;                  /* capabilities.vision, else type vlm */
    bool tools;                   /* trained_for_tool_use / "tool_use" */
    bool reasoning;               /* capabilities.reasoning is true or an object */
    int n_instances;              /* instances of this model in rsd_lms_catalog.instances */
} rsd_lms_model;

/* One loaded instance. */
typedef struct rsd_lms_instance {
    rsd_str id;                   /* instance id (the wire model id) */
    int model;                    /* index into rsd_lms_catalog.models */
    uint32_t context_length;      /* loaded context; 0 = not reported */
} rsd_lms_instance;

/* Lookup tables over one catalog: open-addressing hashes of model keys and
   instance ids, and each model's instances in listing order. Built by the parser as it
   folds; treat as private. A catalog whose counts differ from the index's (filled by
   hand) is indexed on the fly, on the stack, by the functions that read it. */
typedef struct rsd_lms_index {
    int n_models, n_instances;                      /* what the index covers */
    uint16_t model_slot[RSD_LMS_MODEL_SLOTS];       /* model index + 1; 0 = empty */
    uint16_t instance_slot[RSD_LMS_INSTANCE_SLOTS]; /* instance index + 1; 0 = empty */
    int16_t first[RSD_LMS_MAX_MODELS];              /* a model's first instance, -1 none */
    int16_t last[RSD_LMS_MAX_MODELS];               /* its last (for appending) */
    int16_t next[RSD_LMS_MAX_INSTANCES];            /* next instance of the same model, -1 end */
} rsd_lms_index;

/* A parsed catalog. Treat index and arena fields as private. */
typedef struct rsd_lms_catalog {
    rsd_lms_tier tier;            /* shape found (V1 or V0), or the tier asked */
    int n_models;                 /* folded models, first-appearance order */
    int n_instances;              /* instances, listing order (a model's in order) */
    int n_entries;                /* entries in the payload, before folding */
    int n_dropped;                /* entries or instances not kept */
    bool truncated;               /* something was dropped for a cap */
    rsd_server_error error;       /* rsd_lms_catalog_from_response: why it failed */
    rsd_lms_model models[RSD_LMS_MAX_MODELS];
    rsd_lms_instance instances[RSD_LMS_MAX_INSTANCES];
    rsd_lms_index index;          /* lookups without scans */
    size_t arena_used;
    char arena[RSD_LMS_ARENA_BYTES];
    /* internal: the list being read (1 "models", 2 "data") and what each model has */
    int list;
    uint8_t have[RSD_LMS_MAX_MODELS];
} rsd_lms_catalog;


/* Another server's listing, for LM Link peer detection. */
typedef struct rsd_lms_peer {
    rsd_str target_id;            /* that target's id (peers with equal ids count once) */
    const rsd_str *instance_ids;  /* its loaded instance ids */
    int n_instance_ids;
} rsd_lms_peer;

/* Resolution states. */
typedef enum rsd_lms_state {
    RSD_LMS_UNKNOWN = 0,          /* not advertised */
    RSD_LMS_JIT,                  /* a key with no instance: the server loads on use */
    RSD_LMS_INSTANCE,             /* a loaded instance */
    RSD_LMS_STATE_NUM
} rsd_lms_state;

/* Which wire id a request uses. */
typedef struct rsd_lms_resolution {
    rsd_lms_state state;
    int model;                    /* owning model index, or -1 */
    int instance;                 /* instance index, or -1 */
    rsd_str wire_id;              /* instance id, or the requested id */
    uint32_t peer_mask;           /* bit p: peers[p] has wire_id loaded too */
} rsd_lms_resolution;


/* A load or unload reply. Treat arena fields as private. */
typedef struct rsd_lms_reply {
    rsd_str instance_id;          /* trimmed; "" if absent */
    rsd_str status;               /* "loaded", ...; "" if absent */
    rsd_lms_type type;
    uint32_t context_length;      /* load_config.context_length; 0 if absent */
    uint32_t load_time_ms;        /* load_time_seconds * 1000, valid if has_load_time */
    bool has_load_time;
    rsd_server_error error;       /* error member, if any */
    size_t arena_used;
    char arena[2 * RSD_MODEL_ID_MAX];
} rsd_lms_reply;

/* Tri-state for optional load booleans; zero = omit. */
typedef enum rsd_lms_flag { RSD_LMS_FLAG_OMIT = 0, RSD_LMS_FLAG_TRUE, RSD_LMS_FLAG_FALSE } rsd_lms_flag;
/* Explicit load settings; zeroed = {"model":k,"echo_load_config":true} only. */
typedef struct rsd_lms_load_opts {
    uint32_t context_length;      /* 0 = omit (the driver passes the clamped value) */
    rsd_lms_flag flash_attention;
    uint32_t eval_batch_size;     /* 0 = omit */
    uint32_t num_experts;         /* 0 = omit */
    rsd_lms_flag offload_kv_cache_to_gpu;
} rsd_lms_load_opts;

#ifndef RSD_NO_LMSTUDIO /* compiled out: no declarations (RSD_STATIC would warn of them) */
/* Parse an LM Studio catalog, tier by shape. Models kept (>= 0) or <0. */
RSD_API int rsd_lms_parse_models(rsd_lms_catalog *cat, const char *body, size_t len,
                                 rsd_json_tok *toks, uint32_t cap);
/* One tier-detection step: count, RSD_ERR_AUTH, or <0 = try the next tier. */
RSD_API int rsd_lms_catalog_from_response(rsd_lms_catalog *cat, rsd_lms_tier tier, int status,
                                          const char *body, size_t len, rsd_json_tok *toks,
                                          uint32_t cap);
/* Resolve requested against a catalog. RSD_OK or RSD_ERR_ARG. */
RSD_API int rsd_lms_resolve(const rsd_lms_catalog *cat, rsd_str requested, rsd_str default_id,
                            const rsd_lms_peer *peers, int n_peers, rsd_lms_resolution *out);
/* Residents for rsd_decide: distinct keys with loaded instances. Count or <0. */
RSD_API int rsd_lms_residents(const rsd_lms_catalog *cat, const rsd_str *owned_ids, int n_owned,
                              rsd_resident *out, int cap);
/* Parse a load/unload reply: RSD_OK, RSD_ERR_SERVER_ERROR, <0 bad body. */
RSD_API int rsd_lms_parse_reply(rsd_lms_reply *out, const char *body, size_t len,
                                rsd_json_tok *toks, uint32_t cap);
/* Write the load body (exact field order). Length or <0 (RSD_ERR_BUFFER). */
RSD_API int rsd_lms_load_body(char *buf, size_t cap, rsd_str model_key, const rsd_lms_load_opts *opts);
/* Write {"instance_id":id}. Length or <0. */
RSD_API int rsd_lms_unload_body(char *buf, size_t cap, rsd_str instance_id);
#endif /* RSD_NO_LMSTUDIO */
/* "0.4+", "0.3.x", "openai-compat", "none"; never NULL. */
RSD_API const char *rsd_lms_tier_str(int tier);
/* ==== payload end ========================================================= */

/* ==== driver ============================================================== */
/* core */
/* Manual: "driver" in the doc block at the top of this file. */
enum {
    RSD_RECONCILE_URL_MAX = 2048,          /* bytes of a request URL incl. NUL */
    RSD_RECONCILE_BEARER_MAX = 512,        /* bytes of a bearer token incl. NUL */
    RSD_RECONCILE_BODY_MAX = 6 * RSD_MODEL_ID_MAX + 256, /* request body buffer */
    RSD_RECONCILE_MAX_NOTICES = 64,        /* notices kept per reconcile */
    RSD_RECONCILE_NOTICE_TEXT_MAX = 512,   /* rendered notice text incl. NUL */
    RSD_RECONCILE_NOTICE_TEXT_AVG = 160,   /* default notice text arena bytes per notice kept (a typical line: 130) */
    RSD_RECONCILE_TEXT_MAX = 512,          /* result.message incl. NUL */
    RSD_RECONCILE_MAX_OURS = 64,           /* ids in rsd_reconcile_desc.ours */
    RSD_RECONCILE_MAX_HEADERS = 2,         /* headers of one HTTP step */
    RSD_RECONCILE_LOAD_ATTEMPTS = 3,       /* load POSTs per reconcile (model-limit retries) */
    RSD_RECONCILE_DEADLINE_MS = 120000,    /* default overall deadline */
    RSD_RECONCILE_PROBE_TIMEOUT_MS = 1500, /* default listing/props timeout */
    RSD_RECONCILE_RESTORE_MS = 30000,      /* default restore budget after a failed load */
    RSD_RECONCILE_POLL_FIRST_MS = 20,      /* first wait-for-loaded poll */
    RSD_RECONCILE_POLL_MAX_MS = 500,       /* poll interval cap */
    RSD_RECONCILE_STAGE_MAX = 32,          /* a load progress stage name incl. NUL */
    RSD_RECONCILE_BUSY_FIRST_MS = 50,      /* first backoff after a transient load refusal (doubling to 500) */
    RSD_RECONCILE_FAILED_GRACE_MS = 3000,  /* failed:true listed before a load counts after this */
    RSD_RECONCILE_RT_DATA = 1024,          /* bytes of runtime-hook scratch in rsd_reconcile */
    RSD_RECONCILE_TOKENS = 256,            /* default JSON tokens held at once: an answer's top level and one entry (a real router's: 66) */
    RSD_RECONCILE_BODY_BYTES = 8192,       /* default answers' buffer: a listing's top level and one entry, or a whole answer */
    RSD_RECONCILE_IDS_PER_MODEL = 128,     /* default id arena bytes per listing entry (ids are 20-120 bytes) */
    RSD_RECONCILE_MAX_ATTR = RSD_MAX_RESIDENTS + 1, /* attribution changes in one result */
    RSD_LMS_LOAD_ATTEMPTS = 4,             /* LM Studio: load POSTs per reconcile (first + retries) */
    RSD_RECONCILE_MAX_OWNED = 64,          /* owned (model, instance) pairs in a desc */
    RSD_LMS_MAX_PEER_IDS = 128,            /* LM Studio: peer instance ids copied from a desc */
    RSD_LMS_MAX_EVICT = 16,                /* LM Studio: instances unloaded by one reconcile */
    RSD_LMS_DEADLINE_MS = 300000,          /* LM Studio's default overall deadline (loads are slow) */
    RSD_LMS_PROBE_TIMEOUT_MS = 5000,       /* LM Studio's default catalog timeout */
    RSD_LMS_RESTORE_MS = 120000            /* LM Studio's default restore budget */
};

/* What the caller must do next. */
#define RSD_STEP_KINDS(X) X(NONE, "none") X(HTTP, "http") X(WAIT, "wait") X(LOCK, "lock") \
    X(COMMIT, "commit") X(UNLOCK, "unlock") X(DONE, "done")
/* Kind of an rsd_step. */
typedef enum rsd_step_kind {
#define RSDI_X(n, s) RSD_STEP_##n,
    RSD_STEP_KINDS(RSDI_X)
#undef RSDI_X
    RSD_STEP_KIND_NUM
} rsd_step_kind;

/* Purpose of an HTTP step. */
#define RSD_HTTP_OPS(X) X(NONE, "none") X(LIST, "list") X(CAPACITY, "capacity") \
    X(LOAD, "load") X(UNLOAD, "unload") X(POLL, "poll")
/* Which request an HTTP step is. */
typedef enum rsd_http_op {
#define RSDI_X(n, s) RSD_OP_##n,
    RSD_HTTP_OPS(RSDI_X)
#undef RSDI_X
    RSD_OP_NUM
} rsd_http_op;

/* Final outcome of a reconcile. */
#define RSD_OUTCOMES(X) X(NONE, "none") X(RESIDENT, "resident") X(OBSERVED, "observed") \
    X(DECLINED, "declined") X(LOAD_FAILED, "load-failed") X(DEGRADED, "degraded") X(FREED, "freed")
/* How a reconcile ended. */
typedef enum rsd_outcome {
#define RSDI_X(n, s) RSD_OUTCOME_##n,
    RSD_OUTCOMES(RSDI_X)
#undef RSDI_X
    RSD_OUTCOME_NUM
} rsd_outcome;

/* Notices the driver adds to the plan's (PLAN = a notice of rsd_decide). */
#define RSD_DRIVER_MSGS(X) X(PLAN, "plan") X(RESTORED, "restored") X(UNRESTORED, "unrestored") \
    X(LOAD_FAILED, "load-failed") X(UNLOAD_FAILED, "unload-failed") \
    X(LOCK_UNLOCKED, "lock-unlocked") X(DEGRADED, "degraded") X(CONTEXT, "context") \
    X(STATE_FAILED, "state-failed") X(ATTR_RESET, "attr-reset") X(ENV_UNKNOWN, "env-unknown")
/* Which driver message a notice carries. */
typedef enum rsd_driver_msg {
#define RSDI_X(n, s) RSD_DMSG_##n,
    RSD_DRIVER_MSGS(RSDI_X)
#undef RSDI_X
    RSD_DMSG_NUM
} rsd_driver_msg;

/* How a runtime classifies the answer to its load request. */
typedef enum rsd_load_answer {
    RSD_LOAD_ACCEPTED = 0,  /* started (or done): wait for loaded */
    RSD_LOAD_ALREADY,       /* already running: resident, not ours */
    RSD_LOAD_LIMIT,         /* capacity full: re-list, evict one more, retry */
    RSD_LOAD_REJECTED,      /* refused: the load failed */
    RSD_LOAD_DOWNLOADING,   /* the model is downloading: wait, load again when it is done */
    RSD_LOAD_BUSY           /* a transient refusal (try again later): load again after a backoff */
} rsd_load_answer;

/* One request header of an HTTP step. */
typedef struct rsd_step_header {
    const char *name;
    const char *value;
} rsd_step_header;

/* An HTTP request to perform (views into the rsd_reconcile). */
typedef struct rsd_step_http {
    rsd_http_op op;
    const char *model;        /* the model it concerns ("" for LIST/CAPACITY) */
    const char *method;       /* "GET" or "POST" */
    const char *url;          /* full URL, NUL-terminated */
    rsd_step_header headers[RSD_RECONCILE_MAX_HEADERS];
    int n_headers;
    const char *body;         /* NULL for GET */
    size_t body_len;
    uint32_t timeout_ms;      /* >= 1, never past the overall deadline */
} rsd_step_http;

/* One step of a reconcile. */
typedef struct rsd_step {
    rsd_step_kind kind;
    rsd_step_http http;       /* HTTP */
    uint64_t wake_ms;         /* WAIT: absolute time to come back */
    const char *wait_model;   /* WAIT: the model being waited for (for rsd_reconcile_event) */
    const char *key;          /* LOCK, COMMIT, UNLOCK: normalised target key */
    uint64_t deadline_ms;     /* LOCK: give up waiting at this absolute time */
    int result;               /* DONE: result.error */
} rsd_step;

/* A notice as the driver keeps it: rendered. Its strings live in the reconcile's
   notice text arena: valid until its next begin. */
typedef struct rsd_reconcile_notice {
    rsd_notice notice;        /* kind, level, msg, detail fields; subject is -1 */
    rsd_driver_msg dmsg;      /* PLAN or a driver message */
    bool text_cut;            /* text was longer than the room for it */
    const char *subject;      /* the resident it is about, or "" */
    const char *text;         /* the operator line, under RSD_RECONCILE_NOTICE_TEXT_MAX bytes */
} rsd_reconcile_notice;

/* One model (or, on a runtime with instances, one instance) that left the server. The
   strings live in the reconcile's id arena: valid until its next begin. */
typedef struct rsd_evicted {
    const char *id;           /* the model id; the instance id on a runtime with instances */
    const char *model;        /* the owning model key of an instance ("" otherwise) */
    uint32_t context_length;      /* the instance's loaded context (its restore uses it); 0 = none */
    bool restored;            /* loaded back (after a failed load, or by the pinned pass) */
    bool displaced;           /* the server unloaded it (a pinned model its LRU displaced), not us */
} rsd_evicted;

/* One attribution change: views into the rsd_reconcile, valid until the next begin. */
typedef struct rsd_attr_ref {
    const char *model;        /* model id (the model key on a runtime with instances) */
    const char *instance;     /* instance id, "" for a plain model */
} rsd_attr_ref;

/* The outcome of a reconcile (final after DONE; counters are live). */
typedef struct rsd_reconcile_result {
    rsd_outcome outcome;
    int error;                /* RSD_OK or why (see the manual) */
    rsd_decision decision;    /* of the last decide (OBSERVE when degraded) */
    rsd_reason reason;
    rsd_decision would;
    bool keep_resident;       /* the keep was resident in the decision's listing */
    bool cache_hit, cached, mutated, loaded, unload_failed, lock_held, redecided;
    bool adopted;             /* a load that landed after its request gave up was taken as ours */
    uint32_t load_context;    /* clamped context of the plan (0 = none) */
    uint32_t requests;        /* HTTP steps emitted */
    uint32_t load_attempts;   /* load requests for the keep */
    uint64_t freed_bytes;     /* a free reconcile: the listed sizes of what it unloaded */
    uint64_t elapsed_ms;      /* from begin to DONE */
    rsd_lms_tier tier;        /* API tier found (a load-first runtime's; NONE otherwise) */
    rsd_lms_state state;      /* how the request resolved (a load-first runtime's; UNKNOWN otherwise) */
    char wire_id[RSD_MODEL_ID_MAX];   /* the model id to send requests with */
    char model_key[RSD_MODEL_ID_MAX]; /* the model the reconcile loads (the keep, or its owning key) */
    char message[RSD_RECONCILE_TEXT_MAX];
    int n_evicted;
    rsd_evicted evicted[RSD_MAX_RESIDENTS];
    int n_attr_add;
    rsd_attr_ref attr_add[RSD_RECONCILE_MAX_ATTR];
    int n_attr_remove;
    rsd_attr_ref attr_remove[RSD_RECONCILE_MAX_ATTR];
    int state_error;          /* RSD_OK, or why the COMMIT was not persisted (commit_failed) */
    int notices_dropped;      /* notices past limits.max_notices or the text arena, not kept */
} rsd_reconcile_result;

/* The reconcile: opaque, in the caller's memory (rsd_reconcile_footprint bytes, given to
   rsd_reconcile_init). */
typedef struct rsd_reconcile rsd_reconcile;

/* An instance this library owns on the target (persisted attribution). */
typedef struct rsd_owned {
    const char *model;                   /* model key */
    const char *instance;                /* instance id */
} rsd_owned;

/* What a runtime hook sees of its reconcile, kept current by the machine for each hook
   call. A hook writes only url, body, made_instance, data and why; a load-first hook sets
   the result through rsd_reconcile_set_catalog, _set_model, _set_decision, _set_outcome
   and _unload. */
typedef struct rsd_runtime_ctx {
    rsd_reconcile *r;                 /* for rsd_reconcile_set_url, _model_body, _http_fill, _decide,
                                         _add_notice, _evicted, _attr and the load-first calls */
    const char *root;                 /* the target's root URL (base URL without trailing '/' and one
                                         "/v1", or the runtime's root hook's) */
    const char *keep;                 /* the model to make resident ("" when freeing bytes) */
    const char *target_id;            /* the target as messages name it */
    const char *const *ours;          /* the ids this library loaded on the target (desc.ours, set_ours) */
    int n_ours;
    const rsd_owned *owned;           /* the instances it loaded there (desc.owned, set_owned; a runtime
                                         with RSD_RT_INSTANCES); load first: the keep's new instance
                                         joins, an unloaded one leaves */
    int n_owned;
    bool explicit_load;               /* desc.explicit_load */
    uint32_t context_length;          /* desc.context_length (0 = none asked); the clamped context of a
                                         LOAD of the keep is rsd_reconcile_plan(c->r)->load_context */
    const char *op_instance;          /* request of an UNLOAD: the victim's listed instance id, or "" */
    const rsd_evicted *op_evicted;    /* request of a restoring LOAD: the entry it brings back, or NULL */
    char *url;                        /* the request's URL, RSD_RECONCILE_URL_MAX bytes */
    char *body;                       /* the request's body, RSD_RECONCILE_BODY_MAX bytes */
    char *made_instance;              /* load_answer: the instance id a load made, RSD_MODEL_ID_MAX bytes */
    rsd_json_tok *toks;               /* tokens to parse an answer (its top level and one entry) */
    uint32_t max_tokens;
    void *data;                       /* RSD_RECONCILE_RT_DATA bytes of scratch, 8-aligned, zeroed by begin */
    char *why;                        /* a load-first hook's reason when it returns < 0, or its
                                         load_answer's for a refused load or unload (the server's
                                         words), RSD_RECONCILE_TEXT_MAX bytes */
} rsd_runtime_ctx;

/* A runtime adapter: hooks the one lifecycle calls, plus flags and defaults. The first
   four serve every runtime (list, capacity, decide, unload, load, wait); a load-first
   runtime (RSD_RT_LOAD_FIRST, LM Studio) adds the four hooks at the end. Every hook gets
   the rsd_runtime_ctx. */
typedef struct rsd_runtime {
    const char *name;         /* key prefix and default runtime_id, e.g. "llamacpp" */
    const char *label;        /* for messages, e.g. "llama.cpp router" */
    rsd_strategy strategy;
    uint32_t flags;           /* RSD_RT_* */
    /* Fill out (url in c->url, body in c->body) for op on model. RSD_OK or <0. */
    int (*request)(rsd_runtime_ctx *c, rsd_http_op op, const char *model, rsd_step_http *out);
    /* Parse a 2xx listing body into out; <0 when it cannot be acted on. */
    int (*parse_list)(rsd_runtime_ctx *c, const char *body, size_t len, rsd_listing *out);
    /* Parse a 2xx capacity body: *max (0 unknown), *unlimited. NULL = no probe. */
    int (*parse_capacity)(rsd_runtime_ctx *c, const char *body, size_t len, uint32_t *max,
                          bool *unlimited);
    /* Classify the answer to a load request (may write c->made_instance). */
    rsd_load_answer (*load_answer)(rsd_runtime_ctx *c, int status, const char *body, size_t len);
    /* Defaults of the desc's timeouts for this runtime; 0 = the machine's. */
    uint32_t deadline_ms, probe_timeout_ms, restore_ms;
    /* Root URL from the configured base URL (RSD_OK or <0); NULL = drop trailing '/'
       and one "/v1". A runtime with this hook keys its target by the root. */
    int (*root)(const char *base_url, char *out, size_t cap);
    /* A 2xx listing read as it arrives, in place of parse_list (both or neither):
       list_entry takes each entry of a top-level list (key raw, as rsd_json_split gives
       it; el NULL when that list begins), list_end the splitter's verdict (rc < 0) and
       the kept top level, and returns as parse_list. */
    void (*list_entry)(rsd_runtime_ctx *c, rsd_listing *out, rsd_str key, const rsd_json_doc *el);
    int (*list_end)(rsd_runtime_ctx *c, rsd_listing *out, int rc, const rsd_json_doc *top);
    /* Load first (RSD_RT_LOAD_FIRST; all four, in place of parse_list and list_end):
       catalog reads a 2xx listing into the runtime's own catalog (first: the first
       listing, whose API tier may fall back): RSD_OK, > 0 = list again (the request hook
       names the next tier), < 0 = not read (c->why says why); rsd_reconcile_set_catalog;
       gate resolves the keep (rsd_reconcile_set_model) and decides after a listing
       (under_lock: the listing under the lock) on rsd_reconcile_facts, which arrive with
       the desc's part filled: 0 = load the keep, 1 = the reconcile ends
       here (rsd_reconcile_set_outcome), < 0 = degraded (c->why);
       adopt, after a failed load's listing: true = an instance the load made landed
       late and is adopted (its id set as the wire id; the reconcile ends resident);
       free_room names the next candidate's owned instances to unload
       (rsd_reconcile_unload each) and returns how many (0 = no candidate left). */
    int (*catalog)(rsd_runtime_ctx *c, bool first, int status, const char *body, size_t len);
    int (*gate)(rsd_runtime_ctx *c, bool under_lock);
    bool (*adopt)(rsd_runtime_ctx *c);
    int (*free_room)(rsd_runtime_ctx *c);
} rsd_runtime;

/* Runtime flags. */
enum {
    RSD_RT_CATALOG = 1u << 0,    /* the listing names every servable model (enables the gate) */
    RSD_RT_LOAD = 1u << 1,       /* explicit load request */
    RSD_RT_WAIT = 1u << 2,       /* poll the listing until the load is done */
    RSD_RT_PINNED_PASS = 1u << 3, /* restore displaced protected models after a load */
    RSD_RT_UNLOAD_WAIT = 1u << 4, /* after an unload, poll until the victim is listed unloaded */
    RSD_RT_PROBE_RETRY = 1u << 5, /* a listing/props timeout is retried (doubled) within the deadline */
    RSD_RT_INSTANCES = 1u << 6,   /* models run as instances with their own ids (attribution by instance) */
    RSD_RT_LOAD_FIRST = 1u << 7   /* load the keep first; free room (free_room's instances) only when
                                     that load fails (the hooks catalog, gate, adopt, free_room) */
};

/* Everything a reconcile needs; zeroed fields are defaults, strings are copied. */
/* A recorded last use of a model on a target (rsd_reconcile_desc.last_used). */
typedef struct rsd_last_use {
    const char *model;                /* id (or alias) as recorded */
    uint64_t used_ms;                 /* ms since the epoch; 0 = unknown (ignored) */
} rsd_last_use;

typedef struct rsd_reconcile_desc {
    const rsd_runtime *runtime;       /* NULL = rsd_runtime_router() */
    const char *base_url;             /* as configured, e.g. "http://mini:8080/v1" */
    const char *target_key;           /* NULL = normalise("<runtime>|" base_url) */
    const char *target_id;            /* for messages; NULL = base_url */
    const char *runtime_id;           /* for messages; NULL = runtime->name */
    const char *keep;                 /* model to make resident (required, unless free_bytes) */
    uint64_t free_bytes;              /* with keep NULL or "": free this many bytes instead (unload
                                         models this library loaded, least recently used first) */
    const char *residency_env;        /* value of RESIDENCY; NULL = unset (managed) */
    bool user_managed;                /* target lifecycle user-managed (observe) */
    bool keep_pinned;                 /* the keep will be tag-pinned */
    bool lock;                        /* emit LOCK/UNLOCK around mutations */
    bool has_generation;              /* generation below is meaningful */
    uint64_t generation;              /* mutation generation read before begin */
    const rsd_protected_model *protected_models; /* configured ids with roles */
    int n_protected;                  /* 0..RSD_MAX_PROTECTED */
    const char *const *ours;          /* ids this library loaded here (attribution) */
    int n_ours;                       /* 0..RSD_RECONCILE_MAX_OURS */
    const rsd_last_use *last_used;    /* last uses recorded here (the state directory); a figure the
                                         listing gives (status.last_used) is preferred */
    int n_last_used;                  /* 0..RSD_RECONCILE_MAX_OURS */
    uint32_t context_length, model_max_context, context_ceiling; /* see rsd_facts */
    uint64_t kv_bytes_per_token;      /* see rsd_facts (rsd_gguf_kv_per_token from the model file) */
    uint32_t context_floor;           /* see rsd_facts */
    uint32_t deadline_ms;             /* 0 = the runtime's default, whole reconcile */
    uint32_t probe_timeout_ms;        /* 0 = the runtime's default */
    uint32_t restore_ms;              /* 0 = the runtime's default */
    const char *bearer;               /* API key; NULL = none */
    rsd_decision_cache *cache;        /* NULL = no TTL fast path */
    rsd_logger logger;
    uint64_t capacity_bytes;          /* memory the residents share (VRAM total); 0 = unknown */
    uint64_t keep_bytes;              /* the keep's footprint; 0 = its listed size, else unknown */
    bool capacity_known;              /* max_instances/unlimited below are the server's (no capacity request) */
    bool unlimited;                   /* with capacity_known: no instance limit */
    uint32_t max_instances;           /* with capacity_known: the limit (0 = unknown) */
    const char *first_listing;        /* the answer to the first listing GET, already read (e.g. by
                                         detection): begin takes it as that answer; NULL = none */
    size_t first_listing_len;
    /* runtimes with instances (LM Studio) */
    const char *default_model;        /* the target's default instance; NULL = none */
    bool explicit_load;               /* load settings configured; false = the server loads on first use */
    rsd_lms_load_opts load;           /* load options (the context is context_length, clamped) */
    const rsd_owned *owned;           /* instances this library loaded here */
    int n_owned;                      /* 0..RSD_RECONCILE_MAX_OWNED */
    const rsd_lms_peer *peers;        /* other targets' instances (LM Link) */
    int n_peers;                      /* 0..RSD_LMS_MAX_PEERS */
} rsd_reconcile_desc;

/* Sizes of a reconcile's tables; zeroed = defaults (a server listing 64 models, any runtime). */
typedef struct rsd_reconcile_limits {
    int max_models;                   /* entries of one listing; 0 = RSD_LISTING_DEFAULT_MODELS */
    size_t arena_bytes;               /* ids, aliases and tags of one listing; 0 = RSD_LISTING_ARENA_PER_MODEL per entry */
    uint32_t max_tokens;              /* JSON tokens held at once (an answer's top level and one listing entry); 0 = RSD_RECONCILE_TOKENS */
    size_t max_body_bytes;            /* the answers' buffer: a listing's top level and one entry, or a whole
                                         answer (at least 1024); 0 = RSD_RECONCILE_BODY_BYTES */
    size_t max_id_bytes;              /* bytes of an id it keeps (protected, ours, victims...), NUL included;
                                         0 = RSD_MODEL_ID_MAX; 16..RSD_MODEL_ID_MAX */
    int max_notices;                  /* notices kept per reconcile (more are counted in notices_dropped);
                                         0 = RSD_RECONCILE_MAX_NOTICES; 1..4096 */
    size_t notice_text_bytes;         /* the notices' subjects and texts together (a notice that finds too
                                         little room is cut, text_cut; one that finds none is dropped and
                                         counted); 0 = RSD_RECONCILE_NOTICE_TEXT_AVG per notice, at least
                                         1 KiB; 1 KiB..1 GiB */
    size_t id_arena_bytes;            /* all the ids one reconcile keeps (each once, 2 bytes over its length);
                                         0 = RSD_RECONCILE_IDS_PER_MODEL per listing entry, at least 1 KiB;
                                         1 KiB..1 GiB */
    const rsd_runtime *runtime;       /* the only runtime begin accepts; NULL = any. The state of a runtime
                                         with instances (LM Studio) is allocated only when it can be used:
                                         runtime NULL or one with RSD_RT_INSTANCES */
} rsd_reconcile_limits;

/* Bytes of a reconcile with lim (NULL = defaults): the struct and its tables; 0 when lim
   is invalid. */
RSD_API size_t rsd_reconcile_footprint(const rsd_reconcile_limits *lim);
/* Make a reconcile in mem (size bytes, at least rsd_reconcile_footprint(lim), 8-byte
   aligned: malloc's memory is), sized by lim (NULL = defaults). It owns nothing else:
   to end it, free mem. RSD_OK, RSD_ERR_ARG (NULL, misaligned, a limit out of range),
   RSD_ERR_BUFFER (size too small). */
RSD_API int rsd_reconcile_init(rsd_reconcile *r, size_t size, const rsd_reconcile_limits *lim);
/* lim with each zeroed field set to the default init uses. RSD_OK, RSD_ERR_ARG. */
RSD_API int rsd_reconcile_limits_fill(rsd_reconcile_limits *lim);
/* The result (final after DONE, counters live); never NULL for a reconcile. */
RSD_API const rsd_reconcile_result *rsd_reconcile_result_of(const rsd_reconcile *r);
/* The notices so far, in order: *out (may be NULL) = the first, returns how many. */
RSD_API int rsd_reconcile_notices(const rsd_reconcile *r, const rsd_reconcile_notice **out);
/* The normalised target key of the last begin ("" before one). */
RSD_API const char *rsd_reconcile_key(const rsd_reconcile *r);
/* The waited load's last progress: its value 0..1 (-1 = none yet), *stage (may be NULL)
   its stage name ("" = none). */
RSD_API double rsd_reconcile_progress(const rsd_reconcile *r, const char **stage);
/* Its JSON tokens and answers' buffer, for the host to borrow while no reconcile runs
   (before begin, after DONE): what detection and other parsers may use. Nothing is
   written when an argument is NULL. */
RSD_API void rsd_reconcile_scratch(rsd_reconcile *r, rsd_json_tok **toks, uint32_t *n_toks, char **buf,
                                   size_t *cap);
/* Start a reconcile (copies d; no I/O). RSD_OK or <0 (then next() says DONE). */
RSD_API int rsd_reconcile_begin(rsd_reconcile *r, const rsd_reconcile_desc *d, uint64_t now_ms);
/* The next step to perform (idempotent while one is outstanding). */
RSD_API rsd_step rsd_reconcile_next(rsd_reconcile *r, uint64_t now_ms);
/* The next len decoded bytes of the outstanding HTTP step's answer (http_status from its
   head), before rsd_reconcile_feed: a 2xx listing is read as it arrives, any other answer
   is kept whole in the answers' buffer (max_body_bytes). RSD_OK, RSD_ERR_STATE, RSD_ERR_ARG. */
RSD_API int rsd_reconcile_body(rsd_reconcile *r, int http_status, const char *data, size_t len);
/* Answer the outstanding HTTP step: transport RSD_OK or a negative RSD_ERR_*; body (may be
   NULL) is the answer's last piece, or all of it when none came through rsd_reconcile_body. */
RSD_API int rsd_reconcile_feed(rsd_reconcile *r, int transport, int http_status,
                               const char *body, size_t len, uint64_t now_ms);
/* Before lock_done: the attribution (desc.ours) read again under the lock; a changed set
   makes lock_done list and decide again. RSD_OK, RSD_ERR_STATE (no LOCK step), RSD_ERR_ARG,
   RSD_ERR_TOO_LARGE (the ids do not fit in limits.id_arena_bytes). */
RSD_API int rsd_reconcile_set_ours(rsd_reconcile *r, const char *const *ours, int n);
/* Before lock_done: the owned instances (desc.owned) read again under the lock, as set_ours. */
RSD_API int rsd_reconcile_set_owned(rsd_reconcile *r, const rsd_owned *owned, int n);
/* Answer the LOCK step: held or proceeding unlocked; generation read under the lock. */
RSD_API int rsd_reconcile_lock_done(rsd_reconcile *r, bool held, uint64_t generation,
                                    uint64_t now_ms);
/* Optional answer to a COMMIT step: the mutation generation after the bump. */
RSD_API int rsd_reconcile_commit_done(rsd_reconcile *r, uint64_t generation);
/* After a COMMIT step that could not be persisted: a warning notice quoting what,
   result.state_error = error, nothing cached for the target. RSD_OK or RSD_ERR_STATE. */
RSD_API int rsd_reconcile_commit_failed(rsd_reconcile *r, int error, const char *what);
/* Optional: one router /models/sse event's data (the JSON after "data: "). When it
   says the waited model changed, the WAIT ends now (next() polls). 1 woke, 0 not. */
RSD_API int rsd_reconcile_event(rsd_reconcile *r, const char *data, size_t len, uint64_t now_ms);
/* The llama.cpp router runtime adapter. */
RSD_API const rsd_runtime *rsd_runtime_router(void);
/* "resident", "observed", ...; never NULL. */
RSD_API const char *rsd_outcome_str(int outcome);
/* "http", "wait", ...; never NULL. */
RSD_API const char *rsd_step_kind_str(int kind);
/* "list", "load", ...; never NULL. */
RSD_API const char *rsd_http_op_str(int op);
/* "plan", "restored", ...; never NULL. */
RSD_API const char *rsd_driver_msg_str(int dmsg);

/* The normalised target key of base_url on runtime rt (NULL = router): "<name>|<base_url>",
   or "<name>|<root>" for a runtime with a root hook. Its length or <0. */
RSD_API int rsd_reconcile_target_key(const rsd_runtime *rt, const char *base_url, char *out, size_t cap);

/* For runtime hooks (r = their c->r): the machine's lifecycle, the same for every runtime. */
/* c->url = root + path. RSD_OK or RSD_ERR_URL when it does not fit. */
RSD_API int rsd_reconcile_set_url(rsd_reconcile *r, const char *path);
/* c->body = {"model": model}; its length or <0. */
RSD_API int rsd_reconcile_model_body(rsd_reconcile *r, const char *model);
/* Fill a request: method, c->url, c->body[0..body_len) (body_len < 0: none), headers. */
RSD_API void rsd_reconcile_http_fill(rsd_reconcile *r, rsd_step_http *h, const char *method, int body_len);
/* Append a driver notice (formatted, escaped for a terminal; dropped and counted when full). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 6, 7)))
#endif
RSD_API void rsd_reconcile_add_notice(rsd_reconcile *r, rsd_driver_msg dmsg, rsd_notice_kind kind,
                                  rsd_notice_level level, const char *subject, const char *fmt, ...);
/* Decide on the facts (rsd_reconcile_facts, filled by the hook) into the plan and the
   result's decision fields; emit = append the plan's notices now. RSD_OK or <0. */
RSD_API int rsd_reconcile_decide(rsd_reconcile *r, bool emit);
/* The facts the next rsd_reconcile_decide reads (before each gate hook: the desc's part
   filled, the rest zeroed; see the manual). */
RSD_API rsd_facts *rsd_reconcile_facts(rsd_reconcile *r);
/* The plan of the last decide. */
RSD_API const rsd_plan *rsd_reconcile_plan(const rsd_reconcile *r);
/* Record an eviction (into result.evicted; attribution removal when it was owned); NULL
   when the list or the id arena is full. */
RSD_API rsd_evicted *rsd_reconcile_evicted(rsd_reconcile *r, const char *id, const char *model,
                                           uint32_t context_length);
/* Add an attribution (views must live as long as r: r's own strings). */
RSD_API void rsd_reconcile_attr(rsd_reconcile *r, bool add, const char *model, const char *instance);
/* For load-first hooks (RSD_RT_LOAD_FIRST): the result fields they set, each copied. */
/* A listing read: tier = the API tier found (result.tier; NONE leaves it), complete =
   false when entries were cut off (this reconcile's answer is then never cached). */
RSD_API void rsd_reconcile_set_catalog(rsd_reconcile *r, rsd_lms_tier tier, bool complete);
/* The request resolved: key = the model a load of the keep loads (result.model_key),
   wire_id = the id requests use (result.wire_id), NULL leaving either as it is; state =
   result.state. RSD_OK, or RSD_ERR_MODEL_ID for an id RSD_MODEL_ID_MAX or longer (nothing set). */
RSD_API int rsd_reconcile_set_model(rsd_reconcile *r, const char *key, const char *wire_id, rsd_lms_state state);
/* A decision made without rsd_reconcile_decide: result.decision, .reason, .keep_resident. */
RSD_API void rsd_reconcile_set_decision(rsd_reconcile *r, rsd_decision decision, rsd_reason reason,
                                        bool keep_resident);
/* How the reconcile ends: result.outcome, .error and (message not NULL) .message, cut
   to RSD_RECONCILE_TEXT_MAX - 1 bytes. */
RSD_API void rsd_reconcile_set_outcome(rsd_reconcile *r, rsd_outcome outcome, int error, const char *message);
/* free_room: an instance to unload next (model: the candidate whose it is, the same for
   every call of one free_room; context_length: what a restore loads it with). RSD_OK,
   RSD_ERR_ARG (an empty id, another model), RSD_ERR_MODEL_ID (an id RSD_MODEL_ID_MAX or
   longer), RSD_ERR_BUFFER (16 named already) or RSD_ERR_TOO_LARGE (the id arena is full). */
RSD_API int rsd_reconcile_unload(rsd_reconcile *r, const char *instance, const char *model, uint32_t context_length);
/* ollama */
/* Manual: "driver: Ollama" in the doc block at the top of this file. */
/* The Ollama runtime adapter (strategy SCHEDULER). */
RSD_API const rsd_runtime *rsd_runtime_ollama(void);
/* lmstudio */
/* Manual: "driver: LM Studio" in the doc block at the top of this file. */
/* The LM Studio runtime adapter (strategy JIT; load first, free room on failure). */
RSD_API const rsd_runtime *rsd_runtime_lmstudio(void);
/* detect */
/* Manual: "driver: detection" in the doc block at the top of this file. */

/* Which runtime a server runs, found by probing (sans-I/O: the caller sends the GETs). */
typedef struct rsd_detect {
    /* result, final once next() says DONE */
    const rsd_runtime *runtime;       /* the runtime found; NULL = none */
    int error;                        /* RSD_OK, RSD_ERR_NOT_FOUND, RSD_ERR_AUTH, or the transport error */
    char message[2 * RSD_RECONCILE_URL_MAX + 192]; /* why none was found */
    bool capacity_known, unlimited;   /* a router's GET /props: its instance limit */
    uint32_t max_instances;
    bool first_listing;               /* the matching answer is the runtime's first listing (kept below) */
    uint32_t requests;                /* GETs sent */
    const char *url;                  /* the GET of the outstanding step (for messages) */
    /* internal */
    int probe, tries, probe0_status;
    bool saw_auth, has_bearer;
    uint32_t probe_ms;
    uint64_t deadline;
    char base[RSD_RECONCILE_URL_MAX];
    char root[RSD_RECONCILE_URL_MAX];
    char probe_url[RSD_RECONCILE_URL_MAX + 64];
    char auth[RSD_RECONCILE_BEARER_MAX + 8];
    rsd_step step;
    /* the caller's, set before begin (begin keeps them): the JSON tokens an answer is
       parsed into; and the buffer an answer given by rsd_detect_body is kept in (a
       listing that does not fit is read as it arrives); e.g. a reconcile's, from
       rsd_reconcile_scratch; no buffer = answers whole to the feed */
    rsd_json_tok *toks;
    uint32_t n_toks;
    char *buf;
    size_t buf_cap;
    /* internal: the answer in buf */
    size_t buf_len;
    uint8_t buf_state;                /* RSDI_ANS_* */
    rsd_json_split split;
} rsd_detect;

/* Start detecting the runtime at base_url (bearer NULL = none; probe_timeout_ms 0 = 1500
   per GET, doubled after each timeout until deadline_ms, absolute). RSD_OK or <0. */
RSD_API int rsd_detect_begin(rsd_detect *d, const char *base_url, const char *bearer, uint32_t probe_timeout_ms,
                             uint64_t deadline_ms, uint64_t now_ms);
/* The next step: HTTP (a GET to send) or DONE. */
RSD_API rsd_step rsd_detect_next(rsd_detect *d, uint64_t now_ms);
/* Answer the outstanding GET (transport RSD_OK or <0; why = the host's words for a
   transport error, e.g. strerror(errno), NULL = rsd_result_str). RSD_OK or RSD_ERR_STATE. */
/* The next len decoded bytes of the outstanding GET's answer (http_status from its head),
   into d->buf, before rsd_detect_feed. RSD_OK, RSD_ERR_STATE (no step, or no buf), RSD_ERR_ARG. */
RSD_API int rsd_detect_body(rsd_detect *d, int http_status, const char *data, size_t len);
RSD_API int rsd_detect_feed(rsd_detect *d, int transport, int http_status, const char *body, size_t len,
                            const char *why, uint64_t now_ms);
/* ==== driver end ========================================================== */

/* ==== pool ================================================================ */
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
    RSD_POOL_DEFAULT_MAX_WAIT_MS = 30000, /* desc.max_wait_ms when 0 (bound) */
    RSD_POOL_DEFAULT_BACKOFF_MS = 1000,   /* desc.start_backoff_ms when 0 */
    RSD_POOL_DEFAULT_BACKOFF_MAX_MS = 60000, /* desc.start_backoff_max_ms when 0 */
    RSD_POOL_MAX_LEASES = 8           /* live byte leases (rsd_pool_lease_take) at once */
};
/* desc.max_wait_ms value that disables the starvation bound. */
#define RSD_POOL_WAIT_FOREVER 0xFFFFFFFFu
/* Largest byte figure accepted anywhere in the pool (256 PiB). */
#define RSD_POOL_MAX_BYTES ((uint64_t)1 << 58)

/* A request (a handle: 0 = invalid; see HANDLES). */
typedef struct rsd_pool_req_h { uint32_t id; } rsd_pool_req_h;
/* One incarnation of a slot's process (a handle; its index is the slot). The host
   echoes it in rsd_pool_on_started/on_exited; a stale one (an earlier process in the
   same slot) is refused. */
typedef struct rsd_pool_proc_h { uint32_t id; } rsd_pool_proc_h;

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
    RSD_POOL_WHY_STARVE,      /* drained for a request waiting past max_wait_ms */
    RSD_POOL_WHY_UNLOAD,      /* rsd_pool_unload */
    RSD_POOL_WHY_SHUTDOWN,    /* rsd_pool_stop */
    RSD_POOL_WHY_LOAD_FAILED, /* rsd_pool_on_started(ok = false) */
    RSD_POOL_WHY_LEASE,       /* idle victim stopped to free bytes for a lease */
    RSD_POOL_WHY_RESTART,     /* rsd_pool_restart: its start is made again */
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
    rsd_pool_proc_h proc;   /* SPAWN, STOP: the process incarnation */
    int model;              /* model index (SPAWN: to load; STOP: being stopped; GRANT/FAIL) */
    const char *model_id;   /* NUL-terminated id of .model (owned by the pool) */
    uint64_t reserve_bytes; /* SPAWN: bytes reserved for the load; STOP: bytes held */
    rsd_pool_why why;       /* STOP */
    rsd_pool_req_h req;     /* GRANT, FAIL */
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

/* rsd_pool_desc.overlap: may a start begin beside a process that is still stopping? */
typedef enum rsd_pool_overlap {
    RSD_POOL_OVERLAP_BYTES = 0, /* with a byte budget: a stopping process holds its bytes until it
                                   has exited but no count slot; count only: wait for the exit */
    RSD_POOL_OVERLAP_COUNT = 1, /* also count only: the host knows the memory holds both */
    RSD_POOL_OVERLAP_OFF = 2    /* every start waits for the exits it needs */
} rsd_pool_overlap;

/* Pool configuration; zeroed means defaults. */
typedef struct rsd_pool_desc {
    int max_slots;                 /* resident processes; 0 = 1; clamped to 1..RSD_POOL_MAX_SLOTS */
    uint32_t max_requests;         /* waiting + running requests tracked; 0 = RSD_POOL_DEFAULT_REQUESTS */
    uint32_t max_waiting;          /* waiting requests (queue capacity); 0 = max_requests */
    uint64_t vram_budget_bytes;    /* byte budget for all reservations; 0 = none (count only) */
    uint64_t default_reserve_bytes;/* reservation of a model that gives none; 0 = 0 */
    uint32_t max_wait_ms;          /* starvation bound; 0 = default; RSD_POOL_WAIT_FOREVER = off */
    uint32_t event_log;            /* entries in the event-log ring; 0 = no log */
    uint32_t start_backoff_ms;     /* after a failed start, no new start for this long, doubling
                                      per consecutive failure; 0 = 1000 */
    uint32_t start_backoff_max_ms; /* the doubling stops here; 0 = 60000 */
    int overlap;                   /* rsd_pool_overlap; 0 = RSD_POOL_OVERLAP_BYTES */
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

/* Per-slot part of rsd_pool_info. */
typedef struct rsd_pool_slot_info {
    rsd_pool_slot_state state;
    int model;                /* -1 when none */
    const char *model_id;     /* NULL when none */
    rsd_pool_proc_h proc;
    uint32_t in_flight;
    uint64_t reserve_bytes;
    uint64_t last_use;        /* logical clock of the last use (LRU key) */
    uint64_t idle_deadline_ms;/* TTL unload time when idle, else RSD_NO_DEADLINE */
    uint32_t ttl_ms;
    bool pinned;
    int64_t pid;              /* whatever the host stored with rsd_pool_set_pid; 0 = none */
    uint32_t max_in_flight;   /* requests it takes at once (model and set_slot_limit); 0 = unlimited */
    bool exclusive;           /* an exclusive request runs on it (nothing else is admitted) */
} rsd_pool_slot_info;

/* Snapshot of the pool (complete, every slot, plus lifetime counters). */
typedef struct rsd_pool_info {
    int max_slots, live_slots;  /* live = STARTING + READY + DRAINING */
    int occupied_slots;         /* every non-EMPTY slot */
    bool stopped;
    uint32_t waiting, running;  /* requests queued / granted and not released */
    uint32_t preloads;          /* rsd_pool_preload loads still queued */
    uint32_t models_waiting;    /* models waiting for a slot */
    uint32_t models_foreign_held; /* of those, held only by others' memory (foreign_bytes):
                                     they would start were it not there; re-read it soon */
    uint64_t reserved_bytes;    /* sum of slot reservations (STOPPING included) */
    uint64_t budget_bytes;      /* effective budget; 0 = unlimited */
    uint64_t foreign_bytes;     /* measured VRAM used by others */
    uint64_t clock;
    /* lifetime counters */
    uint64_t acquires, grants_immediate, grants_queued, waits, cancels, releases;
    uint64_t spawns, readies, load_failures, crashes, exits;
    uint64_t evictions, ttl_expiries, trims, starve_drains, unloads, fails;
    uint64_t queue_full, no_fit, max_wait_ms, events_dropped;
    uint64_t backoffs;          /* acquires refused with RSD_ERR_POOL_BACKOFF */
    uint64_t restores;          /* models reloaded because the start they were evicted for failed */
    uint64_t leased_bytes;      /* bytes held by live leases (kept out of every start) */
    uint64_t leases, leases_declined, lease_stops, lease_expiries; /* lifetime */
    rsd_pool_slot_info slots[RSD_POOL_MAX_SLOTS];
} rsd_pool_info;

/* Per-model snapshot. */
typedef struct rsd_pool_model_info {
    const char *id;
    uint64_t reserve_bytes;
    uint32_t ttl_ms, max_in_flight;
    bool pinned;
    int slot;                 /* -1 when not resident/claimed */
    rsd_pool_slot_state state;/* state of that slot, EMPTY when none */
    uint32_t waiting;         /* queued requests for this model */
    uint32_t preloads;        /* queued loads with no request (rsd_pool_preload, restores) */
    uint32_t running;         /* in-flight on its slot */
    uint64_t last_used_ms;    /* now_ms of its last grant or finished request; 0 = never */
    uint32_t start_failures;  /* consecutive failed starts (a READY or a reset clears it) */
    uint64_t retry_at_ms;     /* no new start before this (backoff); 0 = none */
} rsd_pool_model_info;

/* rsd_pool_unload flags. */
enum {
    RSD_POOL_UNLOAD_REFUSE_BUSY = 0, /* default: RSD_ERR_POOL_BUSY if any target is busy */
    RSD_POOL_UNLOAD_DRAIN = 1        /* busy targets drain (no new work), then stop */
};

typedef struct rsd_pool rsd_pool;

/* Create a pool (the only allocation); desc NULL = defaults; NULL on a bad desc or no memory. */
RSD_API rsd_pool *rsd_pool_create(const rsd_pool_desc *desc);
/* The bytes rsd_pool_create(desc) allocates (its one block); 0 for a desc it refuses. */
RSD_API size_t rsd_pool_footprint(const rsd_pool_desc *desc);
/* Free the pool. Processes are the host's: call rsd_pool_stop and reap first. */
RSD_API void rsd_pool_destroy(rsd_pool *pool);
/* Add a model; returns its index (>= 0) or RSD_ERR_ARG / RSD_ERR_CAPACITY. */
RSD_API int rsd_pool_add_model(rsd_pool *pool, const rsd_pool_model_desc *model);
/* Index of the model with this id, or RSD_ERR_NOT_FOUND. */
RSD_API int rsd_pool_find_model(const rsd_pool *pool, rsd_str id);
/* Change a model's pin; pinning never stops anything, unpinning may let it be evicted. */
RSD_API int rsd_pool_set_pinned(rsd_pool *pool, int model, bool pinned, uint64_t now_ms);
/* Change a model's reservation, TTL, in-flight cap and pin (same id, or id NULL). */
RSD_API int rsd_pool_set_model(rsd_pool *pool, int model, const rsd_pool_model_desc *d, uint64_t now_ms);
/* Ask for a request on model: RSD_OK (granted now; *slot set, in-flight counted),
   RSD_PENDING (queued; wait for GRANT/FAIL on *req) or <0 (nothing to release). */
RSD_API int rsd_pool_acquire(rsd_pool *pool, int model, uint64_t now_ms, void *user,
                             rsd_pool_req_h *req, int *slot);
/* rsd_pool_acquire_ex flags. */
enum {
    RSD_POOL_ACQUIRE_EXCLUSIVE = 1 /* run alone on the model's process (benchmarks,
                                      calibration): it is granted once the process has
                                      drained, and nothing else is admitted to that
                                      process until it is released; other models and
                                      the requests queued behind it keep their order */
};
/* rsd_pool_acquire with flags (0 = rsd_pool_acquire). RSD_ERR_ARG for unknown flags. */
RSD_API int rsd_pool_acquire_ex(rsd_pool *pool, int model, int flags, uint64_t now_ms,
                                void *user, rsd_pool_req_h *req, int *slot);
/* Load model and leave it resident without a request (boot policy): RSD_OK
   when it is already READY or STARTING, RSD_PENDING when queued, <0 as acquire. An
   explicit load clears the model's start backoff. */
RSD_API int rsd_pool_preload(rsd_pool *pool, int model, uint64_t now_ms);
/* A granted request finished: in-flight--, LRU clock and idle deadline updated. */
RSD_API int rsd_pool_release(rsd_pool *pool, rsd_pool_req_h req, uint64_t now_ms);
/* The client went away: drop a waiting request, or release a granted one. */
RSD_API int rsd_pool_cancel(rsd_pool *pool, rsd_pool_req_h req, uint64_t now_ms);
/* Report the end of a load started by SPAWN: ok = healthy; !ok = failed (pool emits STOP). */
RSD_API int rsd_pool_on_started(rsd_pool *pool, rsd_pool_proc_h proc, bool ok, uint64_t now_ms);
/* A STARTING process is given up and its model started again: STOP (why RESTART), the
   model's waiters keep waiting; no load failure, no backoff. */
RSD_API int rsd_pool_restart(rsd_pool *pool, rsd_pool_proc_h proc, uint64_t now_ms);
/* Report that a slot's process is gone (after STOP, or a crash); frees slot and reservation. */
RSD_API int rsd_pool_on_exited(rsd_pool *pool, rsd_pool_proc_h proc, uint64_t now_ms);
/* Replace a slot's claim-time reservation with the measured figure. */
RSD_API int rsd_pool_set_reserved(rsd_pool *pool, rsd_pool_proc_h proc, uint64_t bytes,
                                  uint64_t now_ms);
/* Measured VRAM: total_bytes (0 = unknown) and bytes used by others. */
RSD_API int rsd_pool_set_vram(rsd_pool *pool, uint64_t total_bytes, uint64_t foreign_bytes,
                              uint64_t now_ms);
/* The process in proc takes at most max_in_flight requests at once (its own count, e.g.
   llama-server's total_slots; 0 = no limit of its own): the smaller of this and the
   model's max_in_flight applies to it. */
RSD_API int rsd_pool_set_slot_limit(rsd_pool *pool, rsd_pool_proc_h proc, uint32_t max_in_flight,
                                    uint64_t now_ms);
/* Store the host's pid (or any id) for the process in proc, shown by rsd_pool_query. */
RSD_API int rsd_pool_set_pid(rsd_pool *pool, rsd_pool_proc_h proc, int64_t pid);
/* Pull the next action (STOPs and SPAWNs first, then GRANT/FAIL); false when none. */
RSD_API bool rsd_pool_next_action(rsd_pool *pool, rsd_pool_action *action);
/* Run timers (idle TTL, lease ttl, the wait bound): the actions waiting (>= 0), or RSD_ERR_ARG. */
RSD_API int rsd_pool_step(rsd_pool *pool, uint64_t now_ms);
/* When step must next run: 0 while actions wait, RSD_NO_DEADLINE when nothing is due. */
RSD_API uint64_t rsd_pool_next_deadline(const rsd_pool *pool);
/* Forget model's failed starts (-1 = every model): its next request starts it at once
   (for a host whose configuration of the model changed). */
RSD_API int rsd_pool_reset_backoff(rsd_pool *pool, int model);
/* Set the maximum number of slots (clamped 1..16) and stop idle excess slots (LRU first). */
RSD_API int rsd_pool_configure(rsd_pool *pool, int max_slots, uint64_t now_ms);
/* Unload model (-1 = every model): RSD_OK (stopping), RSD_PENDING (draining), <0. */
RSD_API int rsd_pool_unload(rsd_pool *pool, int model, int flags, uint64_t now_ms);
/* Stop everything: FAIL every request, STOP every process, refuse later work. */
RSD_API int rsd_pool_stop(rsd_pool *pool, uint64_t now_ms);
/* ---- byte leases: room in the budget for someone else ----------------------
   A lease holds bytes of the VRAM budget for a workload outside the pool (a game's
   renderer, a cutscene, another program). Taking one stops idle, unpinned processes
   in least-recently-used order until the reservations plus every lease fit the
   budget; a busy or pinned process is never stopped, so the grant may be partial.
   While it lives, no start that would break it begins: those models wait (they are
   not failed). Releasing it (or its ttl passing, in rsd_pool_step) gives the bytes
   back and, with .restore, reloads what it stopped. A pool without a byte budget
   (vram_budget_bytes = 0 and no rsd_pool_set_vram total) has nothing to lease. */
typedef struct rsd_pool_lease_h { uint32_t id; } rsd_pool_lease_h; /* a handle: 0 = invalid */

typedef struct rsd_pool_lease_desc {
    uint64_t bytes;   /* bytes wanted; 1..RSD_POOL_MAX_BYTES */
    uint32_t ttl_ms;  /* returned by rsd_pool_step this long after it was taken; 0 = never */
    bool restore;     /* on return, reload the models it stopped (else on their next request) */
} rsd_pool_lease_desc;

typedef struct rsd_pool_lease_info {
    uint64_t requested, granted; /* granted < requested: busy or pinned processes hold the rest */
    bool ready;                  /* the granted bytes are free now (its victims have exited) */
    uint64_t expires_ms;         /* RSD_NO_DEADLINE without a ttl */
    uint64_t stopped;            /* bit m set: model m was stopped for it */
    int num_stopped;
    bool restore;
} rsd_pool_lease_info;

/* Take a lease: RSD_OK (granted, fully or in part, and free now), RSD_PENDING (granted;
   the processes it stopped are still exiting: rsd_pool_query_lease says when it is
   ready), RSD_ERR_POOL_NO_FIT (declined: nothing can be freed, or no byte budget;
   nothing was stopped), RSD_ERR_CAPACITY (RSD_POOL_MAX_LEASES live), RSD_ERR_ARG. */
RSD_API int rsd_pool_lease_take(rsd_pool *pool, const rsd_pool_lease_desc *desc, uint64_t now_ms,
                                rsd_pool_lease_h *lease);
/* Fill info for a live lease; RSD_ERR_POOL_STALE for a released or invalid one. */
RSD_API int rsd_pool_query_lease(const rsd_pool *pool, rsd_pool_lease_h lease,
                                 rsd_pool_lease_info *info);
/* Give a lease's bytes back (and reload what it stopped when it asked to). */
RSD_API int rsd_pool_lease_return(rsd_pool *pool, rsd_pool_lease_h lease, uint64_t now_ms);

/* Fill a complete snapshot. */
RSD_API void rsd_pool_query(const rsd_pool *pool, rsd_pool_info *info);
/* Fill a per-model snapshot; RSD_ERR_ARG for a bad index. */
RSD_API int rsd_pool_query_model(const rsd_pool *pool, int model, rsd_pool_model_info *info);
/* Pull the oldest event-log entry; false when empty (or no log configured). */
RSD_API bool rsd_pool_next_event(rsd_pool *pool, rsd_pool_event *event);
/* Slot index of a process handle (its index); -1 for an invalid handle. */
RSD_API int rsd_pool_proc_slot(rsd_pool_proc_h proc);
/* Names for enums (never NULL). */
RSD_API const char *rsd_pool_slot_state_str(int state);
/* Name of an rsd_pool_why value (never NULL). */
RSD_API const char *rsd_pool_why_str(int why);

/* ==== pool end ============================================================ */

/* ==== gguf ================================================================ */
#ifndef RSD_NO_GGUF
enum {
    RSD_GGUF_NAME_MAX = 64,        /* a tensor name's bytes + NUL (llama.cpp's limit) */
    RSD_GGUF_ARCH_MAX = 64,        /* general.architecture's bytes + NUL */
    RSD_GGUF_MAX_LAYERS = 512,     /* block_count and per-layer arrays (llama.cpp's limit) */
    RSD_GGUF_MAX_DEVICES = 8       /* devices one server log reports (rsd_llama_log) */
};
#define RSD_GGUF_MAX_HEADER ((uint64_t)256 << 20) /* default desc.max_header_bytes */
#define RSD_GGUF_MAX_STRING ((uint64_t)16 << 20)  /* one string's bytes */
#define RSD_GGUF_MAX_COUNT ((uint64_t)1 << 28)    /* tensors, keys, one array's elements */

/* One tensor as its info says; the data is never read. */
typedef struct rsd_gguf_tensor {
    char name[RSD_GGUF_NAME_MAX];
    uint32_t n_dims;             /* 0..4 */
    uint32_t type;               /* ggml type id (rsd_ggml_type_name) */
    uint64_t ne[4];              /* elements per dim, 1 past n_dims */
    uint64_t offset;             /* from the start of the weight area */
    uint64_t bytes;              /* the data's size (not the alignment padding) */
    int32_t layer;               /* N of "blk.N.", else -1 */
} rsd_gguf_tensor;

typedef struct rsd_gguf_desc {
    rsd_gguf_tensor *tensors;    /* the caller's array for the infos; NULL: totals only */
    uint32_t max_tensors;        /* its length; a file with more: RSD_ERR_CAPACITY */
    uint64_t max_header_bytes;   /* 0 = RSD_GGUF_MAX_HEADER; more: RSD_ERR_TOO_LARGE */
} rsd_gguf_desc;

/* What a file says (0 where it is silent). Per-layer arrays hold block_count entries,
   filled from the scalar when the file gives one value. */
typedef struct rsd_gguf_info {
    uint32_t version;            /* 2 or 3 */
    uint64_t n_tensors, n_kv;
    char architecture[RSD_GGUF_ARCH_MAX];
    uint32_t block_count, context_length, embedding_length, feed_forward_length;
    uint32_t head_count, head_count_kv, key_length, value_length;
    uint32_t vocab_size;         /* tokenizer.ggml.tokens' length, else ARCH.vocab_size */
    uint32_t expert_count, expert_used_count, sliding_window;
    uint32_t file_type;          /* general.file_type (llama_ftype), UINT32_MAX when absent */
    uint32_t alignment;          /* general.alignment, else 32 */
    uint32_t head_count_layer[RSD_GGUF_MAX_LAYERS], head_count_kv_layer[RSD_GGUF_MAX_LAYERS];
    uint32_t feed_forward_layer[RSD_GGUF_MAX_LAYERS];
    uint8_t swa_layer[RSD_GGUF_MAX_LAYERS]; /* 1: a sliding-window layer */
    uint64_t header_bytes;       /* the bytes read: magic to the last tensor info */
    uint64_t data_offset;        /* where the weight area begins (aligned) */
    uint64_t data_bytes;         /* the weight area's size, padding included */
    uint64_t tensor_bytes;       /* the sum of the tensors' bytes */
    uint64_t layer_bytes[RSD_GGUF_MAX_LAYERS]; /* tensors of blk.N */
    uint64_t token_embd_bytes, output_bytes;   /* token_embd.weight, output.weight */
    uint32_t ffn_type;           /* blk.0.ffn_up.weight's ggml type, UINT32_MAX when absent */
} rsd_gguf_info;

typedef struct rsd_gguf {
    rsd_gguf_info info;
    /* the reader's state */
    rsd_gguf_tensor *tensors;
    uint32_t max_tensors, st, key, vtype, etype, dim, nbuf, need;
    uint64_t max_header, pos, kv_i, t_i, arr_n, arr_i, str_len, str_have, skip, running;
    uint64_t tokens_n;
    rsd_gguf_tensor cur;         /* the tensor info being read */
    int err;
    uint32_t have;               /* bit per field the file gave */
    uint32_t alen[4], swa_period;/* per-layer arrays' lengths; the pattern's period */
    uint32_t pfx[16];            /* each field's key prefix (hash), checked against the arch */
    unsigned char num[8];
    char str[RSD_GGUF_NAME_MAX + 64];
    char msg[224];
} rsd_gguf;

/* Starts reading; desc may be NULL (totals only, default limits). */
RSD_API void rsd_gguf_init(rsd_gguf *g, const rsd_gguf_desc *desc);
/* The file's next len bytes, in order (any split). RSD_PENDING: more wanted; RSD_OK:
   everything is read (info is complete; later bytes are not needed); <0: the first error,
   sticky (rsd_gguf_error says what and where). */
RSD_API int rsd_gguf_feed(rsd_gguf *g, const void *data, size_t len);
/* The file ended: RSD_OK when the reader had everything, else RSD_ERR_TRUNCATED (or the
   earlier error). */
RSD_API int rsd_gguf_end(rsd_gguf *g);
/* The error's text with its byte offset ("" while none). */
RSD_API const char *rsd_gguf_error(const rsd_gguf *g);
/* ggml type id -> "q8_0" etc. ("unknown" for an id not known); its block size in
   elements and bytes (0 for an unknown id). */
RSD_API const char *rsd_ggml_type_name(uint32_t type);
RSD_API uint32_t rsd_ggml_type_block(uint32_t type, uint32_t *block_bytes);
/* "f16", "q8_0", ... -> the id; -1 when unknown (names as llama.cpp's --cache-type-k). */
RSD_API int rsd_ggml_type_from_name(const char *name);

/* A server start: the parameters the estimate reads (zeroed = llama-server's defaults, CPU only). */
#define RSD_GGUF_NGL_NONE (-2)
typedef struct rsd_gguf_start {
    uint32_t n_ctx;              /* -c; 0 = the model's context_length */
    int32_t n_parallel;          /* -np; 0 or -1 = auto: 4 slots sharing one KV cache */
    int32_t kv_unified;          /* -kvu: 1 on, -1 off, 0 = the default (on only with auto -np) */
    const char *cache_type_k;    /* -ctk, -ctv: NULL = "f16" */
    const char *cache_type_v;
    uint32_t n_batch, n_ubatch;  /* -b, -ub: 0 = 2048, 512 */
    int32_t n_gpu_layers;        /* -ngl: -1 = all (a GPU build's default); 0 or RSD_GGUF_NGL_NONE =
                                    none (every buffer on the host: a CPU build) */
    bool swa_full;               /* --swa-full */
} rsd_gguf_start;

typedef struct rsd_gguf_estimate {
    uint64_t model, kv, compute, total; /* bytes; total = model + kv + compute */
    uint64_t model_device;       /* the part of model on the GPU (by -ngl) */
    uint64_t kv_device;          /* the part of kv on the GPU */
    uint32_t n_ctx, n_ctx_seq, n_seq, n_stream, kv_cells, kv_cells_swa, n_batch, n_ubatch;
    bool kv_unified;             /* one cache all sequences share */
} rsd_gguf_estimate;

/* What a start of this model takes. RSD_OK, RSD_ERR_OVERFLOW (a figure past 2^64), or
   RSD_ERR_ARG (an unknown cache type or one whose block does not divide a row, a model
   without embedding length, head count, blocks or context, n_parallel > 256). */
RSD_API int rsd_gguf_estimate_start(const rsd_gguf_info *info, const rsd_gguf_start *start,
                                    rsd_gguf_estimate *out);
/* The KV bytes one context token costs this start (every layer, K and V in the start's
   cache types; a sliding-window layer counted at every cell: an upper bound), and the KV
   streams its context is split into (n_stream may be NULL): rsd_fit_bytes_desc's
   kv_bytes_per_token and n_seq. Results as rsd_gguf_estimate_start. */
RSD_API int rsd_gguf_kv_per_token(const rsd_gguf_info *info, const rsd_gguf_start *start,
                                  uint64_t *per_token, uint32_t *n_stream);

/* What a llama-server child reported in its log (llama.cpp's -lv 4 lines), in bytes. */
typedef struct rsd_llama_log_device {
    char name[32];               /* "CPU_Mapped", "CUDA0", "CPU" as the log names it */
    uint64_t model, kv, compute, output;
} rsd_llama_log_device;
typedef struct rsd_llama_log {
    uint64_t model, kv, compute, output; /* sums over the devices */
    uint32_t n_ctx, n_ctx_seq, n_seq_max, n_batch, n_ubatch;
    int32_t kv_unified;          /* 1, 0, or -1 not seen */
    uint32_t n_devices, lines;   /* devices listed; lines that gave a figure */
    rsd_llama_log_device dev[RSD_GGUF_MAX_DEVICES];
} rsd_llama_log;

RSD_API void rsd_llama_log_init(rsd_llama_log *lg);
/* One line of the log (without its newline; any bytes). 1 when it gave a figure, 0 when
   it is not one of the lines read, RSD_ERR_CAPACITY for a device past
   RSD_GGUF_MAX_DEVICES (its figure still counts in the sums). */
RSD_API int rsd_llama_log_line(rsd_llama_log *lg, const char *line, size_t len);
#endif /* RSD_NO_GGUF */
/* ==== gguf end ============================================================ */

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
/* A small internal function on a parser's hot path: inlined, except in a -Os build. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__OPTIMIZE_SIZE__)
#define RSDI_INLINE static __inline__ __attribute__((always_inline, unused))
#else
#define RSDI_INLINE RSDI_PRIVATE
#endif
#if defined(__GNUC__) || defined(__clang__)
#define RSDI_LIKELY(x) __builtin_expect(!!(x), 1)
#define RSDI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RSDI_LIKELY(x) (x)
#define RSDI_UNLIKELY(x) (x)
#endif

/* ==== >>util: results, strings, overflow-checked sizes ==================== */
/* Body of an enum-to-string function over an X(NAME, "string") list: the string of v,
   or "unknown" outside 0..num-1. */
#define RSDI_ENUM_STR_X(n, str) str,
#define RSDI_ENUM_STR(LIST, num, v) \
    do { \
        static const char *const rsdi_names_[] = {LIST(RSDI_ENUM_STR_X) "unknown"}; \
        return (int)(v) >= 0 && (int)(v) < (int)(num) ? rsdi_names_[(int)(v)] : "unknown"; \
    } while (0)
/* One table from the result X-macro: each code with its name and its text (the name
   again under RSD_NO_ERROR_STRINGS, so the texts are not linked). */
typedef struct rsdi_result_row { int code; const char *name, *str; } rsdi_result_row;
RSDI_PRIVATE const rsdi_result_row *rsdi_result_find(int result) {
    static const rsdi_result_row rows[] = {
#ifdef RSD_NO_ERROR_STRINGS
#define RSDI_X(name, val, str) {val, #name, #name},
#else
#define RSDI_X(name, val, str) {val, #name, str},
#endif
        RSD_RESULTS(RSDI_X)
#undef RSDI_X
    };
    size_t i;
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].code == result) return &rows[i];
    return NULL;
}

RSD_API const char *rsd_result_str(int result) {
    const rsdi_result_row *r = rsdi_result_find(result);
    return r ? r->str : result > 0 ? "pending" : "unknown error";
}

RSD_API const char *rsd_result_name(int result) {
    const rsdi_result_row *r = rsdi_result_find(result);
    return r ? r->name : result > 0 ? "PENDING" : "ERR_UNKNOWN";
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

/* Handles (rsd_X_h): one uint32_t, the generation above `bits` index bits. A table sizes
   `bits` for its limit; the generation runs 1..2^(32-bits)-1 and is never 0, so 0 is never
   a live handle, and a slot's next generation refuses the handles of its earlier tenants. */
RSDI_PRIVATE uint32_t rsdi_handle_make(uint32_t gen, uint32_t idx, unsigned bits) { return gen << bits | idx; }
RSDI_PRIVATE uint32_t rsdi_handle_idx(uint32_t id, unsigned bits) { return id & ((1u << bits) - 1u); }
RSDI_PRIVATE uint32_t rsdi_handle_gen(uint32_t id, unsigned bits) { return id >> bits; }
RSDI_PRIVATE uint32_t rsdi_handle_next_gen(uint32_t gen, unsigned bits) {
    gen = (gen + 1u) & (0xFFFFFFFFu >> bits);
    return gen ? gen : 1u;
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

/* ==== >>text ============================================================== */
/* Validates one UTF-8 sequence starting at the lead byte *pp (>= 0x80): 0 with *pp past
   it, RSD_ERR_TRUNCATED (*pp at e), or RSD_ERR_JSON with *pp at the bad byte (malformed
   text; the JSON parser passes the code on). */
RSDI_INLINE int rsdi_utf8_seq(const unsigned char **pp, const unsigned char *e) {
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

/* True when s has no control byte (below 0x20, or 0x7f): a bearer token goes into a
   header line as it is (header injection). */
RSDI_PRIVATE bool rsdi_no_ctl(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return false;
    return true;
}

/* Bounded appender (rsd_text_escape, rsd_arg_redact, rsd_notice_format,
   rsd_procs_command): writes what fits, counts everything. With sq set, each '
   becomes '\'' (inside a single-quoted shell word). */
typedef struct rsdi_sb {
    char *buf;
    size_t cap, len;
    bool sq;
} rsdi_sb;

RSDI_PRIVATE void rsdi_sb_init(rsdi_sb *b, char *buf, size_t cap) {
    b->buf = buf;
    b->cap = buf ? cap : 0;
    b->len = 0;
    b->sq = false;
    if (b->cap) buf[0] = '\0';
}
RSDI_PRIVATE void rsdi_sb_put(rsdi_sb *b, const char *s, size_t n) {
    size_t i;
    if (!b->sq) { /* no quoting: what fits, at once */
        size_t room = b->cap && b->len < b->cap - 1 ? b->cap - 1 - b->len : 0;
        if (room && n) memcpy(b->buf + b->len, s, n < room ? n : room);
        b->len += n;
        return;
    }
    for (i = 0; i < n; i++) {
        if (b->sq && s[i] == '\'') {
            b->sq = false;
            rsdi_sb_put(b, "'\\''", 4);
            b->sq = true;
            continue;
        }
        if (b->cap && b->len < b->cap - 1) b->buf[b->len] = s[i];
        b->len++;
    }
}
RSDI_PRIVATE void rsdi_sb_c(rsdi_sb *b, const char *s) { rsdi_sb_put(b, s, strlen(s)); }
/* NUL-terminates at the end or at the cut; returns the full length. */
RSDI_PRIVATE size_t rsdi_sb_end(rsdi_sb *b) {
    if (b->cap) b->buf[b->len < b->cap ? b->len : b->cap - 1] = '\0';
    return b->len;
}

RSDI_PRIVATE void rsdi_sb_esc(rsdi_sb *b, rsd_str s) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s.ptr, *e, *q;
    char x[4];
    if (!p) return;
    e = p + s.len;
    while (p < e) {
        unsigned c = *p;
        if (c >= 0x20 && c < 0x7F) {
            q = p;
            while (q < e && *q >= 0x20 && *q < 0x7F) q++;
            rsdi_sb_put(b, (const char *)p, (size_t)(q - p));
            p = q;
            continue;
        }
        q = p;
        if (c >= 0x80 && rsdi_utf8_seq(&q, e) == 0 && !(c == 0xC2 && p[1] < 0xA0)) {
            rsdi_sb_put(b, (const char *)p, (size_t)(q - p)); /* valid, not a C1 control */
            p = q;
            continue;
        }
        if (c == '\n') rsdi_sb_c(b, "\\n");
        else if (c == '\r') rsdi_sb_c(b, "\\r");
        else if (c == '\t') rsdi_sb_c(b, "\\t");
        else {
            x[0] = '\\';
            x[1] = 'x';
            x[2] = hex[c >> 4];
            x[3] = hex[c & 15];
            rsdi_sb_put(b, x, 4);
        }
        p++;
    }
}

RSD_API size_t rsd_text_escape(rsd_str s, char *buf, size_t cap) {
    rsdi_sb b;
    rsdi_sb_init(&b, buf, cap);
    rsdi_sb_esc(&b, s);
    return rsdi_sb_end(&b);
}

/* A flag (leading '-') whose name a[0..n) names a secret (see the manual): its last
   word (words split at '-', '_' and '.'; a last "file" or "path" skipped) ends with
   key(s), secret(s), token, password(s), passwd or credential(s); or -hft. */
RSDI_PRIVATE bool rsdi_arg_secret_flag(const char *a, size_t n) {
    static const char *const ends[] = {"key", "keys", "secret", "secrets", "token", "password",
                                       "passwords", "passwd", "credential", "credentials"};
    char w[32];
    size_t i, e = n, b, k, wl;
    int pass;
    if (!a || n < 2 || a[0] != '-') return false;
    if (n == 4 && memcmp(a, "-hft", 4) == 0) return true;
    for (i = 1; i < n && a[i] == '-'; i++) {}
    for (pass = 0; pass < 2; pass++) {
        for (b = e; b > i && a[b - 1] != '-' && a[b - 1] != '_' && a[b - 1] != '.'; b--) {}
        if (e - b == 0 || e - b >= sizeof w) return false;
        for (k = 0; k < e - b; k++) {
            char c = a[b + k];
            w[k] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
        }
        wl = e - b;
        if (pass == 0 && b > i && wl == 4 && (!memcmp(w, "file", 4) || !memcmp(w, "path", 4))) {
            e = b - 1; /* --api-key-file: the word before */
            continue;
        }
        for (k = 0; k < sizeof ends / sizeof ends[0]; k++) {
            size_t el = strlen(ends[k]);
            if (wl >= el && !memcmp(w + wl - el, ends[k], el)) return true;
        }
        return false;
    }
    return false;
}

/* The user:password of a URL in arg at or after from ("scheme://user:password@host"):
   true with *off, *len set. (prev unused: the shape of rsdi_arg_secret_span.) */
RSDI_PRIVATE bool rsdi_url_secret_span(const char *prev, const char *arg, size_t from, size_t *off,
                                       size_t *len) {
    size_t n = strlen(arg), i;
    (void)prev;
    for (i = from; i + 3 <= n; i++) {
        size_t h, at = 0, end;
        if (memcmp(arg + i, "://", 3) != 0) continue;
        h = i + 3;
        for (end = h; end < n && arg[end] != '/' && arg[end] != '?' && arg[end] != '#'; end++)
            if (arg[end] == '@') at = end;
        if (at) {
            *off = h;
            *len = at - h;
            return true;
        }
    }
    return false;
}

/* The next part of arg (at or after from) that is not to be shown, given the argument
   before it: the whole value after a secret flag, the value of --secret-flag=VALUE, or
   the user:password of a URL. True with *off, *len set; false when there is none. */
RSDI_PRIVATE bool rsdi_arg_secret_span(const char *prev, const char *arg, size_t from, size_t *off,
                                       size_t *len) {
    size_t n = strlen(arg);
    const char *eq;
    if (prev && !strchr(prev, '=') && rsdi_arg_secret_flag(prev, strlen(prev))) {
        *off = 0;
        *len = n;
        return from == 0;
    }
    eq = strchr(arg, '=');
    if (eq && rsdi_arg_secret_flag(arg, (size_t)(eq - arg))) {
        *off = (size_t)(eq - arg) + 1;
        *len = n - *off;
        return from <= *off;
    }
    return rsdi_url_secret_span(prev, arg, from, off, len);
}

/* arg into b with every part span finds shown as ***. */
RSDI_PRIVATE void rsdi_sb_redact_by(rsdi_sb *b, const char *prev, const char *arg,
                                    bool (*span)(const char *, const char *, size_t, size_t *, size_t *)) {
    size_t from = 0, off, len;
    if (!arg) arg = "";
    while (span(prev, arg, from, &off, &len)) {
        rsdi_sb_put(b, arg + from, off - from);
        rsdi_sb_c(b, "***");
        from = off + len;
        if (!arg[from]) break;
    }
    rsdi_sb_put(b, arg + from, strlen(arg + from));
}

RSDI_PRIVATE void rsdi_sb_redact(rsdi_sb *b, const char *prev, const char *arg) {
    rsdi_sb_redact_by(b, prev, arg, rsdi_arg_secret_span);
}

/* s with only a URL's user:password shown as *** (rsd_arg_redact's URL rule without its
   flag rules: for text that is no argument, such as an error message). */
RSDI_PRIVATE size_t rsdi_url_redact(const char *s, char *buf, size_t cap) {
    rsdi_sb b;
    rsdi_sb_init(&b, buf, cap);
    rsdi_sb_redact_by(&b, NULL, s, rsdi_url_secret_span);
    return rsdi_sb_end(&b);
}

/* Replaces, in text[0..n) (output a child wrote, which may echo its arguments), every
   copy of a value rsd_arg_redact hides in the NUL-separated argv args[0..args_len)
   with *** (as many '*' when shorter than 3 bytes); in place, never longer. Returns
   the new length. */
RSDI_PRIVATE size_t rsdi_text_scrub(char *text, size_t n, const char *args, size_t args_len) {
    const char *prev = NULL, *a = args;
    while (a && a < args + args_len) {
        size_t from = 0, off, len, al = strlen(a);
        while (rsdi_arg_secret_span(prev, a, from, &off, &len)) {
            size_t i = 0, put = len < 3 ? len : 3;
            while (len > 0 && i + len <= n) {
                if (memcmp(text + i, a + off, len) != 0) { i++; continue; }
                memset(text + i, '*', put);
                memmove(text + i + put, text + i + len, n - i - len);
                n -= len - put;
                i += put;
            }
            from = off + len;
            if (from >= al) break;
        }
        prev = a;
        a += al + 1;
    }
    return n;
}

RSD_API size_t rsd_arg_redact(const char *prev, const char *arg, char *buf, size_t cap) {
    rsdi_sb b;
    rsdi_sb_init(&b, buf, cap);
    rsdi_sb_redact(&b, prev, arg);
    return rsdi_sb_end(&b);
}
/* ==== text end ============================================================ */

/* ==== >>json ============================================================== */
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

#define RSDI_JSON_ISWS(c) ((c) <= ' ' && ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t'))
/* Index of the first flagged byte in a SWAR mask (little-endian: lowest set bit). */
#if defined(__GNUC__) || defined(__clang__)
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && !defined(RSDI_JSON_PORTABLE)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RSDI_JSON_FIRST_BYTE(m) ((unsigned)__builtin_ctzll(m) >> 3)
#endif
#endif
#ifdef __OPTIMIZE_SIZE__ /* -Os: one copy of the parser body */
#define RSDI_JSON_INLINE static __attribute__((unused))
#else
#define RSDI_JSON_INLINE static __inline__ __attribute__((always_inline, unused))
#endif
#if defined(__SSE2__) && defined(RSDI_JSON_FIRST_BYTE) && !defined(RSD_JSON_NO_SIMD)
#include <emmintrin.h>
#define RSDI_JSON_SSE2 1
#endif
#else
#define RSDI_JSON_INLINE RSDI_PRIVATE
#endif
#define RSDI_JSON_ISDIGIT(c) ((unsigned)((c) - '0') < 10u)

RSDI_PRIVATE int rsdi_json_hexval(unsigned c) {
    if (c - '0' < 10u) return (int)(c - '0');
    c |= 0x20u;
    if (c - 'a' < 6u) return (int)(c - 'a' + 10);
    return -1;
}

/* Four hex digits at *pp: 0 and *cp, RSD_ERR_TRUNCATED, or RSD_ERR_JSON (*pp at the bad byte). */
RSDI_JSON_INLINE int rsdi_json_hex4(const unsigned char **pp, const unsigned char *e, unsigned *cp) {
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


/* Scans a string body from *pp (just past the opening quote) to the closing quote.
   Returns RSD_JSON_F_ESCAPED or 0 with *pp at the closing quote, or an error with
   *pp at the bad byte. */
RSDI_JSON_INLINE int rsdi_json_scan_str(const unsigned char **pp, const unsigned char *e,
                                        const char **what) {
    const unsigned char *p = *pp;
    unsigned c, cp, lo;
    int r, esc = 0;
    for (;;) {
#ifdef RSDI_JSON_SSE2
        /* Plain run, 16 bytes at a time; signed < 0x20 also catches bytes >= 0x80. */
        while (e - p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
            __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                                  _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                                     _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));
            int bits = _mm_movemask_epi8(m);
            if (bits) {
                p += __builtin_ctz((unsigned)bits);
                goto special;
            }
            p += 16;
        }
#endif
        /* Plain run, 8 bytes at a time: stop at '"', '\\', < 0x20 or >= 0x80. */
        while (e - p >= 8) {
            uint64_t w, t1, t2, m;
            const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
            memcpy(&w, p, 8);
            t1 = w ^ (ones * 0x22u);
            t2 = w ^ (ones * 0x5Cu);
            m = ((t1 - ones) & ~t1) | ((t2 - ones) & ~t2) | ((w - ones * 0x20u) & ~w) | w;
            m &= high;
            if (m) {
#ifdef RSDI_JSON_FIRST_BYTE
                p += RSDI_JSON_FIRST_BYTE(m);
                goto special;
#else
                break;
#endif
            }
            p += 8;
        }
        while (p < e && !rsdi_json_strclass[*p]) p++;
#ifdef RSDI_JSON_FIRST_BYTE
    special:
#endif
        if (RSDI_UNLIKELY(p >= e)) { *pp = e; *what = "unterminated string"; return RSD_ERR_TRUNCATED; }
        c = *p;
        if (RSDI_LIKELY(c == '"')) { *pp = p; return esc; }
        if (c == '\\') {
            esc = RSD_JSON_F_ESCAPED;
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
                *pp = p - 1; *what = "lone low surrogate"; return RSD_ERR_JSON;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p >= e) { *pp = e; *what = "high surrogate at end of input"; return RSD_ERR_TRUNCATED; }
                if (p[0] != '\\') { *pp = p; *what = "lone high surrogate"; return RSD_ERR_JSON; }
                if (p + 1 >= e) { *pp = e; *what = "high surrogate at end of input"; return RSD_ERR_TRUNCATED; }
                if (p[1] != 'u') { *pp = p + 1; *what = "lone high surrogate"; return RSD_ERR_JSON; }
                p += 2;
                r = rsdi_json_hex4(&p, e, &lo);
                if (r) { *pp = p; *what = "bad \\u escape"; return r; }
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    *pp = p - 1; *what = "high surrogate not followed by a low one"; return RSD_ERR_JSON;
                }
            }
            continue;
        }
        if (c < 0x20) { *pp = p; *what = "control character in string"; return RSD_ERR_JSON; }
        r = rsdi_utf8_seq(&p, e);
        if (r) { *pp = p; *what = "invalid UTF-8"; return r; }
    }
}

/* Skips ASCII digits from p; 8 at a time where the SWAR byte index is available. */
RSDI_JSON_INLINE const unsigned char *rsdi_json_digits(const unsigned char *p, const unsigned char *e) {
#ifdef RSDI_JSON_FIRST_BYTE
    while (e - p >= 8) {
        uint64_t w, nd;
        const uint64_t hi = 0xF0F0F0F0F0F0F0F0ull, zeros = 0x3030303030303030ull;
        memcpy(&w, p, 8);
        /* a byte is a digit iff its high nibble is 3 and adding 6 keeps it 3; carries
           only leave non-digit bytes, so the lowest flagged byte is exact */
        nd = ((w & hi) ^ zeros) | (((w + 0x0606060606060606ull) & hi) ^ zeros);
        if (nd) return p + RSDI_JSON_FIRST_BYTE(nd);
        p += 8;
    }
#endif
    while (p < e && RSDI_JSON_ISDIGIT(*p)) p++;
    return p;
}

/* Scans a number at *pp; on success *pp is one past it and *flags has F_INT or not. */
RSDI_JSON_INLINE int rsdi_json_scan_num(const unsigned char **pp, const unsigned char *e,
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
        p = rsdi_json_digits(p + 1, e);
    } else {
        *pp = p; *what = "expected a digit"; return RSD_ERR_JSON;
    }
    if (p < e && *p == '.') {
        *flags = 0;
        p++;
        if (p >= e) { *pp = e; *what = "number ends after '.'"; return RSD_ERR_TRUNCATED; }
        if (!RSDI_JSON_ISDIGIT(*p)) { *pp = p; *what = "expected a digit after '.'"; return RSD_ERR_JSON; }
        p = rsdi_json_digits(p + 1, e);
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
    if (counting) { \
        n++; \
    } else if (!shallow || depth < lim) { \
        rsd_json_tok t_; \
        if (RSDI_UNLIKELY(n >= cap)) RSDI_JSON_FAIL(RSD_ERR_JSON_TOKENS, "token array full"); \
        t_.type = (uint8_t)(type_); t_.flags = (uint8_t)(flags_); t_.reserved = 0; \
        t_.start = (uint32_t)(start_); t_.end = (uint32_t)(end_); \
        t_.parent = cur; t_.next = (int32_t)(n + 1); t_.size = 0; \
        toks[n] = t_; \
        if (cur >= 0) toks[cur].size++; \
        n++; \
    } \
} while (0)

/* Records a failure at p in doc->err (line and column are counted only here). */
RSDI_PRIVATE int rsdi_json_fail(rsd_json_doc *doc, const unsigned char *s, const unsigned char *p,
                                const unsigned char *e, int code, const char *what) {
    size_t off, k;
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

/* The parser. Always inlined with a constant `counting` and `shallow`, so the count pass
   carries no token-writing branches and the real pass no NULL checks. The shallow pass
   keeps the tokens of depth < lim only (the root is depth 0, its members 1): a container at depth lim - 1
   is kept without children, and the whole input is still validated. With prefix, the
   input may go on after the value: doc->len becomes the value's end. */
RSDI_JSON_INLINE int rsdi_json_parse_body(rsd_json_doc *doc, const unsigned char *s,
                                          const unsigned char *e, rsd_json_tok *toks,
                                          uint32_t cap, uint32_t max_depth, uint32_t lim, int prefix,
                                          const int counting, const int shallow) {
    const unsigned char *p = s, *q;
    uint32_t n = 0, depth = 0;
    int32_t cur = -1;   /* innermost open container, or the key whose value is being parsed */
    unsigned char objbits[RSD_JSON_DEPTH_CAP / 8];  /* bit d: container at depth d is an object */
    int in_obj = 0, code = RSD_OK, r;
    const char *what = "ok";
    unsigned c;

value:
    if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, "expected a value");
    c = *p;
    if (RSDI_UNLIKELY(c <= ' ')) {
        RSDI_JSON_SKIP_WS();
        if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, "expected a value");
        c = *p;
    }
    if (c == '"') {
        q = ++p;
        r = rsdi_json_scan_str(&p, e, &what);
        if (RSDI_UNLIKELY(r < 0)) { code = r; goto fail; }
        RSDI_JSON_EMIT(RSD_JSON_STRING, r, q - s, p - s);
        p++;
        goto after_value;
    }
    if (c == '-' || RSDI_JSON_ISDIGIT(c)) {
        uint8_t nflags;
        q = p;
        r = rsdi_json_scan_num(&p, e, &nflags, &what);
        if (RSDI_UNLIKELY(r)) { code = r; goto fail; }
        RSDI_JSON_EMIT(RSD_JSON_NUMBER, nflags, q - s, p - s);
        goto after_value;
    }
    if (c == '{' || c == '[') {
        if (RSDI_UNLIKELY(depth >= max_depth)) RSDI_JSON_FAIL(RSD_ERR_JSON_DEPTH, "nesting too deep");
        RSDI_JSON_EMIT(c == '{' ? RSD_JSON_OBJECT : RSD_JSON_ARRAY, 0, p - s, 0);
        if (!counting && (!shallow || depth < lim)) cur = (int32_t)(n - 1);
        in_obj = c == '{';
        if ((depth & 7) == 0) objbits[depth >> 3] = 0;
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
    if (c == 't') {
        if (RSDI_LIKELY(e - p >= 4 && memcmp(p, "true", 4) == 0)) p += 4, r = 0;
        else r = rsdi_json_scan_lit(&p, e, "true", 4);
    } else if (c == 'f') {
        if (RSDI_LIKELY(e - p >= 5 && memcmp(p, "false", 5) == 0)) p += 5, r = 0;
        else r = rsdi_json_scan_lit(&p, e, "false", 5);
    } else if (c == 'n') {
        if (RSDI_LIKELY(e - p >= 4 && memcmp(p, "null", 4) == 0)) p += 4, r = 0;
        else r = rsdi_json_scan_lit(&p, e, "null", 4);
    } else if (c == ']' && depth && !in_obj) RSDI_JSON_FAIL(RSD_ERR_JSON, "trailing comma");
    else RSDI_JSON_FAIL(RSD_ERR_JSON, "unexpected character");
    if (RSDI_UNLIKELY(r)) RSDI_JSON_FAIL(r, r == RSD_ERR_TRUNCATED ? "literal ends early" : "bad literal");
    RSDI_JSON_EMIT(c == 'n' ? RSD_JSON_NULL : RSD_JSON_BOOL, 0, q - s, p - s);
    goto after_value;

key:
    /* p < e */
    c = *p;
    if (RSDI_UNLIKELY(c <= ' ')) {
        RSDI_JSON_SKIP_WS();
        if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, "expected a string key");
        c = *p;
    }
    if (RSDI_UNLIKELY(c != '"')) RSDI_JSON_FAIL(RSD_ERR_JSON, c == '}' ? "trailing comma" : "expected a string key");
    q = ++p;
    r = rsdi_json_scan_str(&p, e, &what);
    if (RSDI_UNLIKELY(r < 0)) { code = r; goto fail; }
    RSDI_JSON_EMIT(RSD_JSON_STRING, r | RSD_JSON_F_KEY, q - s, p - s);
    if (!counting && (!shallow || depth < lim)) cur = (int32_t)(n - 1);
    p++;
    if (RSDI_LIKELY(p < e && *p == ':')) {
        p++;
        goto value;
    }
    RSDI_JSON_SKIP_WS();
    if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, "expected ':'");
    if (RSDI_UNLIKELY(*p != ':')) RSDI_JSON_FAIL(RSD_ERR_JSON, "expected ':'");
    p++;
    goto value;

close:
    /* p is one past the closer of the container at depth - 1 */
    depth--;
    if (!counting && (!shallow || depth < lim)) {
        toks[cur].end = (uint32_t)(p - s);
        toks[cur].next = (int32_t)n;
        cur = toks[cur].parent;
    }
    in_obj = depth ? (objbits[(depth - 1) >> 3] >> ((depth - 1) & 7)) & 1 : 0;

after_value:
    if (!counting && in_obj && (!shallow || depth < lim)) { /* in an object, cur is the key whose value just ended */
        toks[cur].next = (int32_t)n;
        cur = toks[cur].parent;
    }
    if (RSDI_UNLIKELY(depth == 0)) {
        if (prefix) {
            doc->len = (size_t)(p - s);
            goto done;
        }
        RSDI_JSON_SKIP_WS();
        if (p != e) RSDI_JSON_FAIL(RSD_ERR_JSON, "unexpected data after the value");
        goto done;
    }
    if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, in_obj ? "unclosed object" : "unclosed array");
    c = *p;
    if (RSDI_UNLIKELY(c <= ' ')) {
        RSDI_JSON_SKIP_WS();
        if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, in_obj ? "unclosed object" : "unclosed array");
        c = *p;
    }
    p++;
    if (c == ',') {
        if (RSDI_UNLIKELY(p >= e)) RSDI_JSON_FAIL(RSD_ERR_TRUNCATED, "expected a value after ','");
        if (in_obj) goto key;
        goto value;
    }
    if (c == (in_obj ? '}' : ']')) goto close;
    p--;
    RSDI_JSON_FAIL(RSD_ERR_JSON, in_obj ? "expected ',' or '}'" : "expected ',' or ']'");

done:
    doc->count = n;
    if (!counting && n < cap) {
        memset(toks + n, 0, sizeof *toks);
        toks[n].parent = -1;
        toks[n].next = (int32_t)n;
    }
    return (int)n;

fail:
    return rsdi_json_fail(doc, s, p, e, code, what);
}

/* The three passes, each its own function (its own registers): the real pass, the count
   pass, and the top-level pass that keeps tokens of depth < lim. */
RSDI_PRIVATE int rsdi_json_pass_full(rsd_json_doc *doc, const unsigned char *s, const unsigned char *e,
                                     rsd_json_tok *toks, uint32_t cap, uint32_t max_depth, int prefix) {
    return rsdi_json_parse_body(doc, s, e, toks, cap, max_depth, 0xFFFFFFFFu, prefix, 0, 0);
}
RSDI_PRIVATE int rsdi_json_pass_count(rsd_json_doc *doc, const unsigned char *s, const unsigned char *e,
                                      uint32_t max_depth, int prefix) {
    return rsdi_json_parse_body(doc, s, e, NULL, 0, max_depth, 0xFFFFFFFFu, prefix, 1, 0);
}
RSDI_PRIVATE int rsdi_json_pass_top(rsd_json_doc *doc, const unsigned char *s, const unsigned char *e,
                                    rsd_json_tok *toks, uint32_t cap, uint32_t max_depth, uint32_t lim) {
    return rsdi_json_parse_body(doc, s, e, toks, cap, max_depth, lim, 0, 0, 1);
}

/* rsd_json_parse_ex with the token depth limit and the prefix mode of the parser. */
RSDI_PRIVATE int rsdi_json_parse_in(rsd_json_doc *doc, const char *src, size_t len, rsd_json_tok *toks,
                                    uint32_t cap, const rsd_json_desc *desc, uint32_t lim, int prefix) {
    const unsigned char *s;
    uint32_t max_depth = RSD_JSON_MAX_DEPTH;
    size_t max_bytes = RSD_JSON_MAX_BYTES;

    if (!doc) return RSD_ERR_ARG;
    memset(doc, 0, sizeof *doc);
    doc->err.what = "ok";
    if (desc) {
        if (desc->max_depth > RSD_JSON_DEPTH_CAP) {
            doc->err.what = "max_depth above RSD_JSON_DEPTH_CAP";
            return doc->err.code = RSD_ERR_ARG;
        }
        if (desc->max_depth) max_depth = desc->max_depth;
        if (desc->max_bytes && desc->max_bytes < max_bytes) max_bytes = desc->max_bytes;
    }
    if (!src) {
        if (len) {
            doc->err.what = "NULL input";
            return doc->err.code = RSD_ERR_ARG;
        }
        src = "";
    }
    doc->src = src;
    doc->len = len;
    doc->toks = toks;
    doc->cap = toks ? cap : 0;
    s = (const unsigned char *)src;
    if (len > max_bytes) { /* refused unread: no line or column is counted */
        doc->err.code = RSD_ERR_TOO_LARGE;
        doc->err.offset = max_bytes;
        doc->err.what = "input too large";
        return RSD_ERR_TOO_LARGE;
    }
    if (toks && lim != 0xFFFFFFFFu) return rsdi_json_pass_top(doc, s, s + len, toks, cap, max_depth, lim);
    if (toks) return rsdi_json_pass_full(doc, s, s + len, toks, cap, max_depth, prefix);
    return rsdi_json_pass_count(doc, s, s + len, max_depth, prefix);
}

RSD_API int rsd_json_parse_ex(rsd_json_doc *doc, const char *src, size_t len, rsd_json_tok *toks,
                              uint32_t cap, const rsd_json_desc *desc) {
    return rsdi_json_parse_in(doc, src, len, toks, cap, desc, 0xFFFFFFFFu, 0);
}

RSD_API int rsd_json_parse(rsd_json_doc *doc, const char *s, size_t len, rsd_json_tok *toks,
                           uint32_t cap) {
    return rsd_json_parse_ex(doc, s, len, toks, cap, NULL);
}

RSD_API int rsd_json_parse_top(rsd_json_doc *doc, const char *s, size_t len, rsd_json_tok *toks,
                               uint32_t cap) {
    if (doc && (!toks || !cap)) {
        memset(doc, 0, sizeof *doc);
        doc->err.what = "no tokens";
        return doc->err.code = RSD_ERR_ARG;
    }
    return rsdi_json_parse_in(doc, s, len, toks, cap, NULL, 2, 0);
}

/* Parse the value at src[at..) of doc (at most to src[lim]) into the tokens after doc's. */
RSDI_PRIVATE int rsdi_json_sub(const rsd_json_doc *doc, size_t at, size_t lim, rsd_json_doc *sub) {
    int r = rsdi_json_parse_in(sub, doc->src + at, lim - at, doc->toks + doc->count, doc->cap - doc->count,
                               NULL, 0xFFFFFFFFu, 1);
    return r < 0 ? r : RSD_OK;
}

RSD_API int rsd_json_expand(const rsd_json_doc *doc, int i, rsd_json_doc *sub) {
    const rsd_json_tok *t;
    size_t at, end;
    if (!doc || !sub || !doc->toks || i < 0 || (uint32_t)i >= doc->count || doc->count > doc->cap) return RSD_ERR_ARG;
    t = doc->toks + i;
    at = t->start;
    end = t->end;
    if (t->type == RSD_JSON_STRING) at--, end++; /* the quotes */
    if (at > end || end > doc->len) return RSD_ERR_ARG;
    return rsdi_json_sub(doc, at, end, sub);
}

RSD_API int rsd_json_each(const rsd_json_doc *doc, int arr, size_t *pos, rsd_json_doc *el) {
    const rsd_json_tok *t;
    size_t p, end;
    int r;
    if (!doc || !pos || !el || !doc->toks || arr < 0 || (uint32_t)arr >= doc->count || doc->count > doc->cap)
        return RSD_ERR_ARG;
    t = doc->toks + arr;
    if (t->type != RSD_JSON_ARRAY || t->end > doc->len || t->end < t->start + 2) return RSD_ERR_ARG;
    end = t->end - 1; /* the ']' */
    p = *pos ? *pos : t->start + 1;
    if (p < t->start + 1 || p > end) return RSD_ERR_ARG;
    while (p < end && (RSDI_JSON_ISWS((unsigned char)doc->src[p]) || doc->src[p] == ',')) p++;
    if (p >= end) {
        *pos = end;
        return 0;
    }
    if ((r = rsdi_json_sub(doc, p, end, el)) < 0) return r;
    *pos = p + el->len;
    return 1;
}


/* ---- the splitter ---- */
enum { RSDI_SP_TOP = 0, RSDI_SP_FIRST, RSDI_SP_AFTER, RSDI_SP_NEXT, RSDI_SP_EL };
enum { RSDI_SP_CONT = 1, RSDI_SP_STR, RSDI_SP_SCALAR };

RSD_API void rsd_json_split_init(rsd_json_split *sp, char *buf, size_t cap, rsd_json_tok *toks, uint32_t n_toks,
                                 rsd_json_split_fn fn, void *user) {
    if (!sp) return;
    memset(sp, 0, sizeof *sp);
    sp->buf = buf;
    sp->cap = buf ? cap : 0;
    sp->toks = toks;
    sp->n_toks = toks ? n_toks : 0;
    sp->fn = fn;
    sp->user = user;
    sp->what = "ok";
    if (!toks || !n_toks) {
        sp->err = RSD_ERR_ARG;
        sp->what = "no tokens";
    }
}

/* The first error of the document: one the kept top level already holds comes before
   the one found at the split position (everything between was valid). The kept top
   level is valid up to the last list's start (checked there), so an error in it lies
   after that list's end: at its offset in the document, sp->dropped bytes further. */
RSDI_PRIVATE int rsdi_sp_fail(rsd_json_split *sp, int code, const char *what, size_t at) {
    rsd_json_doc d;
    int r;
    if (code != RSD_ERR_TOO_LARGE && sp->kept) {
        r = rsdi_json_parse_in(&d, sp->buf, sp->kept, sp->toks, sp->n_toks, NULL, 2, 0);
        if (r < 0 && r != RSD_ERR_TRUNCATED) {
            code = r;
            what = d.err.what;
            at = d.err.offset + sp->dropped;
        }
    }
    sp->err = code;
    sp->what = what;
    sp->err_at = at;
    return code;
}

/* Appends n bytes at src to what is kept (the top level, or the element in flight). */
RSDI_PRIVATE bool rsdi_sp_put(rsd_json_split *sp, const unsigned char *src, size_t n) {
    size_t at = sp->kept + sp->fly;
    if (!n) return true;
    if (n > sp->cap - at) return false;
    if ((const char *)src != sp->buf + at) memmove(sp->buf + at, src, n);
    if (sp->st == RSDI_SP_EL) sp->fly += n;
    else sp->kept += n;
    return true;
}

/* A tokenized element (r tokens) to fn. */
RSDI_PRIVATE void rsdi_sp_give(rsd_json_split *sp, const rsd_json_doc *el, int r) {
    rsd_str key;
    if ((uint32_t)r > sp->max_el) sp->max_el = (uint32_t)r;
    if (sp->depth == 1) sp->n_root++;
    if (!sp->pending && sp->fn) {
        key.ptr = sp->depth == 1 ? "" : sp->buf + sp->key_at;
        key.len = sp->depth == 1 ? 0 : sp->key_len;
        sp->fn(sp->user, key, el);
    }
}

/* One whole element at p[0..n): tokenized with the depth left, then to fn. */
RSDI_PRIVATE int rsdi_sp_element(rsd_json_split *sp, const char *p, size_t n, bool followed) {
    rsd_json_desc jd;
    rsd_json_doc el;
    int r;
    jd.max_depth = RSD_JSON_MAX_DEPTH - sp->depth;
    jd.max_bytes = 0;
    r = sp->pending ? RSD_ERR_JSON_TOKENS
                    : rsdi_json_parse_in(&el, p, n, sp->toks, sp->n_toks, &jd, 0xFFFFFFFFu, 0);
    if (r == RSD_ERR_JSON_TOKENS) { /* it does not fit: valid? then the verdict waits for the rest */
        r = rsdi_json_parse_in(&el, p, n, NULL, 0, &jd, 0xFFFFFFFFu, 0);
        if (r >= 0) sp->pending = RSD_ERR_JSON_TOKENS;
    }
    if (r == RSD_ERR_TRUNCATED && followed) r = RSD_ERR_JSON; /* a scalar cut by a delimiter */
    if (r < 0) return rsdi_sp_fail(sp, r, el.err.what, sp->el_at + el.err.offset);
    rsdi_sp_give(sp, &el, r);
    return RSD_OK;
}

RSD_API int rsd_json_split_feed(rsd_json_split *sp, const char *data, size_t len) {
    const unsigned char *p, *e, *run, *el;
    rsd_str key;
    unsigned c;
    if (!sp) return RSD_ERR_ARG;
    if (sp->err) return sp->err;
    if (!data && len) return rsdi_sp_fail(sp, RSD_ERR_ARG, "NULL input", sp->total);
    if (len > (size_t)RSD_JSON_MAX_BYTES - sp->total) {
        sp->err = RSD_ERR_TOO_LARGE;
        sp->what = "input too large";
        sp->err_at = RSD_JSON_MAX_BYTES;
        return sp->err;
    }
    p = (const unsigned char *)data;
    e = p + len;
    run = p;
    el = sp->st == RSDI_SP_EL ? NULL : p; /* where the element in flight starts in data */
#define RSDI_SP_AT(q) (sp->total + (size_t)((q) - (const unsigned char *)data))
#define RSDI_SP_FAIL(c_, w_, q_) do { size_t at_ = (q_); sp->total += len; return rsdi_sp_fail(sp, (c_), (w_), at_); } while (0)
    while (p < e) {
        switch (sp->st) {
        case RSDI_SP_TOP:
            c = *p;
            if (sp->in_str) {
                if (sp->esc) sp->esc = 0;
                else if (c == '\\') sp->esc = 1;
                else if (c == '"') {
                    sp->in_str = 0;
                    if (sp->depth == 1) {
                        sp->key_len = sp->kept + (size_t)(p - run) - sp->key_at;
                        sp->prev = '"';
                    }
                }
                p++;
                continue;
            }
            if (c == '"') {
                sp->in_str = 1;
                if (sp->depth == 0 && !sp->root) sp->root = 3;
                if (sp->depth == 1) sp->key_at = sp->kept + (size_t)(p - run) + 1;
            } else if (c == '{' || c == '[') {
                bool first = sp->depth == 0 && !sp->root;
                if (first) sp->root = c == '{' ? 1 : 2;
                if (c == '[' && ((first && sp->root == 2) || (sp->depth == 1 && sp->root == 1 && sp->prev == ':'))) {
                    rsd_json_doc kd;
                    int r;
                    p++; /* a list: its '[' is kept, its elements are not */
                    if (!rsdi_sp_put(sp, run, (size_t)(p - run)))
                        RSDI_SP_FAIL(RSD_ERR_BODY_TOO_LARGE, "the top level is larger than the buffer", RSDI_SP_AT(p));
                    /* what is kept so far is valid (an error in it is the document's first): the
                       whole at the first list, then what came after the last list, read from
                       that list's "[]" behind a stand-in for what went before it, "{\"\":"
                       (the parser's state there: in the top-level object, after a member's value) */
                    {
                        size_t from = sp->list_at;
                        char was[4];
                        if (from) {
                            memcpy(was, sp->buf + from, 4);
                            memcpy(sp->buf + from, "{\"\":", 4);
                        }
                        r = rsdi_json_parse_in(&kd, sp->buf + from, sp->kept - from, NULL, 0, NULL, 0xFFFFFFFFu, 0);
                        if (from) memcpy(sp->buf + from, was, 4);
                        sp->list_at = (uint32_t)(sp->kept - 5); /* read at a later list: only a member's
                                                                   list has one, after "{\"\":[" at least */
                        if (r < 0 && r != RSD_ERR_TRUNCATED) /* rsdi_sp_fail places it (reading the whole) */
                            RSDI_SP_FAIL(r, kd.err.what, 0);
                    }
                    key.ptr = sp->depth == 0 ? "" : sp->buf + sp->key_at;
                    key.len = sp->depth == 0 ? 0 : sp->key_len;
                    sp->depth++;
                    sp->st = RSDI_SP_FIRST;
                    if (sp->fn) sp->fn(sp->user, key, NULL);
                    continue;
                }
                sp->depth++;
            } else if (c == '}' || c == ']') {
                if (sp->depth) sp->depth--;
                if (sp->depth == 1) sp->prev = (uint8_t)c;
            } else if (!RSDI_JSON_ISWS(c)) {
                if (sp->depth == 0 && !sp->root) sp->root = 3;
                if (sp->depth == 1) sp->prev = (uint8_t)c;
            }
            p++;
            continue;
        case RSDI_SP_FIRST:
        case RSDI_SP_AFTER:
        case RSDI_SP_NEXT:
            c = *p;
            if (RSDI_JSON_ISWS(c)) {
                p++;
                continue;
            }
            if (c == ']') {
                if (sp->st == RSDI_SP_NEXT) RSDI_SP_FAIL(RSD_ERR_JSON, "trailing comma", RSDI_SP_AT(p));
                sp->dropped = (uint32_t)(RSDI_SP_AT(p) - sp->kept); /* the ']' is kept next */
                sp->st = RSDI_SP_TOP;
                run = p++;
                sp->depth--;
                if (sp->depth == 1) sp->prev = ']';
                continue;
            }
            if (sp->st == RSDI_SP_AFTER) {
                if (c != ',') RSDI_SP_FAIL(RSD_ERR_JSON, "expected ',' or ']'", RSDI_SP_AT(p));
                sp->st = RSDI_SP_NEXT;
                p++;
                continue;
            }
            if (c == ',' || c == ':' || c == '}') RSDI_SP_FAIL(RSD_ERR_JSON, "unexpected character", RSDI_SP_AT(p));
            if (!sp->pending) { /* the parser finds where it ends: a value that ends in data is read where it lies */
                rsd_json_desc jd;
                rsd_json_doc ed;
                int r;
                jd.max_depth = RSD_JSON_MAX_DEPTH - sp->depth;
                jd.max_bytes = 0;
                r = rsdi_json_parse_in(&ed, (const char *)p, (size_t)(e - p), sp->toks, sp->n_toks, &jd, 0xFFFFFFFFu, 1);
                if (r != RSD_ERR_TRUNCATED && r != RSD_ERR_JSON_TOKENS &&
                    (r < 0 || ed.len < (size_t)(e - p) || c == '{' || c == '[' || c == '"')) {
                    sp->el_at = RSDI_SP_AT(p);
                    if (r < 0) RSDI_SP_FAIL(r, ed.err.what, sp->el_at + ed.err.offset);
                    if (!sp->whole && ed.len > sp->cap - sp->kept)
                        RSDI_SP_FAIL(RSD_ERR_BODY_TOO_LARGE, "a list entry is larger than the buffer", sp->el_at);
                    rsdi_sp_give(sp, &ed, r);
                    p += ed.len;
                    sp->st = RSDI_SP_AFTER;
                    continue;
                }
            }
            sp->st = RSDI_SP_EL;
            sp->kind = c == '{' || c == '[' ? RSDI_SP_CONT : c == '"' ? RSDI_SP_STR : RSDI_SP_SCALAR;
            sp->el_depth = sp->kind == RSDI_SP_CONT;
            sp->in_str = sp->esc = 0;
            sp->el_at = RSDI_SP_AT(p);
            el = p++;
            continue;
        default: { /* RSDI_SP_EL */
            bool done = false, followed = false;
            const unsigned char *from = el ? el : (const unsigned char *)data;
            if (sp->kind == RSDI_SP_SCALAR) {
                while (p < e) {
                    c = *p;
                    if (RSDI_JSON_ISWS(c) || c == ',' || c == ']' || c == '}' || c == '[' || c == '{' || c == '"' ||
                        c == ':') {
                        done = followed = true;
                        break;
                    }
                    p++;
                }
            } else {
                uint32_t d = sp->el_depth;
                bool in_str = sp->kind == RSDI_SP_STR || sp->in_str, esc = sp->esc != 0;
                while (p < e) {
                    c = *p++;
                    if (in_str) {
                        if (esc) esc = false;
                        else if (c == '\\') esc = true;
                        else if (c == '"') {
                            in_str = false;
                            if (!d) { done = true; break; }
                        }
                    } else if (c == '"') in_str = true;
                    else if (c == '{' || c == '[') d++;
                    else if (c == '}' || c == ']') {
                        if (--d == 0) { done = true; break; }
                    }
                }
                sp->el_depth = d;
                sp->in_str = in_str;
                sp->esc = esc;
                if (sp->kind == RSDI_SP_STR) sp->in_str = 0; /* a string element's own quote is its kind */
            }
            if (!done) continue; /* to the end of data: kept below */
            if (el && !sp->fly) { /* all in this chunk: read where it lies (as if kept: bounded by the buffer) */
                if (!sp->whole && (size_t)(p - el) > sp->cap - sp->kept)
                    RSDI_SP_FAIL(RSD_ERR_BODY_TOO_LARGE, "a list entry is larger than the buffer", sp->el_at);
                if (rsdi_sp_element(sp, (const char *)el, (size_t)(p - el), followed) < 0) { sp->total += len; return sp->err; }
            } else {
                if (!rsdi_sp_put(sp, from, (size_t)(p - from)))
                    RSDI_SP_FAIL(RSD_ERR_BODY_TOO_LARGE, "a list entry is larger than the buffer", sp->el_at);
                if (rsdi_sp_element(sp, sp->buf + sp->kept, sp->fly, followed) < 0) { sp->total += len; return sp->err; }
            }
            sp->fly = 0;
            sp->st = RSDI_SP_AFTER;
            el = NULL;
            continue;
        }
        }
    }
    /* the end of data: what is still kept moves into buf */
    if (sp->st == RSDI_SP_TOP) {
        if (!rsdi_sp_put(sp, run, (size_t)(p - run)))
            RSDI_SP_FAIL(RSD_ERR_BODY_TOO_LARGE, "the top level is larger than the buffer", RSDI_SP_AT(p));
    } else if (sp->st == RSDI_SP_EL) {
        const unsigned char *from = el ? el : (const unsigned char *)data;
        if (!rsdi_sp_put(sp, from, (size_t)(e - from)))
            RSDI_SP_FAIL(RSD_ERR_BODY_TOO_LARGE, "a list entry is larger than the buffer", sp->el_at);
    }
    sp->total += len;
    return RSD_OK;
#undef RSDI_SP_AT
#undef RSDI_SP_FAIL
}

RSD_API int rsd_json_split_end(rsd_json_split *sp, rsd_json_doc *top) {
    rsd_json_doc d;
    int r;
    if (top) {
        memset(top, 0, sizeof *top);
        top->src = "";
        top->err.what = "ok";
    }
    if (!sp || !top) return RSD_ERR_ARG;
    if (sp->err) {
        top->err.code = sp->err;
        top->err.what = sp->what;
        top->err.offset = sp->err_at;
        return sp->err;
    }
    if (sp->st != RSDI_SP_TOP) { /* inside a list: the document ended early, or an element is wrong */
        size_t at = sp->total;
        int code = RSD_ERR_TRUNCATED;
        const char *what = "unclosed array";
        if (sp->st == RSDI_SP_EL) {
            rsd_json_desc jd;
            jd.max_depth = RSD_JSON_MAX_DEPTH - sp->depth;
            jd.max_bytes = 0;
            r = rsdi_json_parse_in(&d, sp->buf + sp->kept, sp->fly, NULL, 0, &jd, 0xFFFFFFFFu, 0);
            if (r < 0) {
                code = r;
                what = d.err.what;
                at = sp->el_at + d.err.offset;
            }
        }
        (void)rsdi_sp_fail(sp, code, what, at);
        return rsd_json_split_end(sp, top);
    }
    r = rsd_json_parse_top(top, sp->buf ? sp->buf : "", sp->kept, sp->toks, sp->n_toks);
    if (r < 0) { /* the offset in the whole document (after the last list); no line is counted */
        top->err.offset += sp->dropped;
        top->err.line = top->err.col = 0;
    } else if (sp->pending || (uint64_t)r + sp->n_root - (sp->n_root > 0) + sp->max_el > sp->n_toks) {
        /* its top level and its largest element together (a root array's largest element
           expanded in the place of its own token): over the tokens */
        r = RSD_ERR_JSON_TOKENS;
        top->err.code = r;
        top->err.what = "token array full";
        top->err.offset = sp->total; /* known at the end */
        top->count = 0;
    }
    if (r < 0) {
        sp->err = r;
        sp->what = top->err.what;
        sp->err_at = top->err.offset;
    }
    return r;
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
    static const char named[] = "\"\\/bfnrt";
    const char *k;
    unsigned cp = 0, lo = 0;
    *nout = 1;
    if (e - p < 2) { out[0] = '?'; return e; }
    if (p[1] != 'u') { /* a one-letter escape, or '?' for an unknown one */
        k = (const char *)memchr(named, p[1], 8);
        out[0] = k ? (unsigned char)"\"\\/\b\f\n\r\t"[k - named] : '?';
        return p + 2;
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

/* String token t equals key[0..klen) after unescaping. */
RSDI_PRIVATE bool rsdi_json_eq(const rsd_json_doc *doc, const rsd_json_tok *t, const char *key,
                               size_t klen) {
    const unsigned char *p, *e, *q = (const unsigned char *)key, *qe = q + klen;
    unsigned char tmp[4];
    int k, j;
    if (t->type != RSD_JSON_STRING || t->end > doc->len || t->start > t->end) return false;
    p = (const unsigned char *)doc->src + t->start;
    e = (const unsigned char *)doc->src + t->end;
    if (!(t->flags & RSD_JSON_F_ESCAPED))
        return (size_t)(e - p) == klen && (klen == 0 || memcmp(p, key, klen) == 0);
    if ((size_t)(e - p) < klen) return false; /* escapes only ever shrink */
    while (p < e) {
        if (*p != '\\') {
            if (q >= qe || *q != *p) return false;
            p++, q++;
            continue;
        }
        p = rsdi_json_unesc(p, e, tmp, &k);
        for (j = 0; j < k; j++, q++)
            if (q >= qe || *q != tmp[j]) return false;
    }
    return q == qe;
}

RSD_API bool rsd_json_str_eq(const rsd_json_doc *doc, int i, const char *s) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    return t && s && rsdi_json_eq(doc, t, s, strlen(s));
}

/* rsd_json_str_eq with the length of s known (no strlen: the payload parsers compare
   every member's key with literals, RSDI_JSON_EQ). */
RSDI_PRIVATE bool rsdi_json_eqn(const rsd_json_doc *doc, int i, const char *s, size_t n) {
    const rsd_json_tok *t = rsdi_json_tok(doc, i);
    if (!t || (!(t->flags & RSD_JSON_F_ESCAPED) && t->end - t->start != n)) return false; /* most differ in length */
    return rsdi_json_eq(doc, t, s, n);
}
#define RSDI_JSON_EQ(doc, i, lit) rsdi_json_eqn((doc), (i), lit, sizeof(lit) - 1)

/* rsd_json_find with the key's length known (RSDI_JSON_FIND: a literal key). */
RSDI_PRIVATE int rsdi_json_findn(const rsd_json_doc *doc, int obj, const char *key, size_t klen) {
    const rsd_json_tok *t = rsdi_json_tok(doc, obj), *kt;
    uint32_t k, end;
    int v = -1;
    if (!t || t->type != RSD_JSON_OBJECT || !key) return -1;
    end = t->next > 0 && (uint32_t)t->next < doc->count ? (uint32_t)t->next : doc->count;
    /* every member is read (a later duplicate wins): keys are walked by their O(1)
       subtree skip, and an unescaped key is compared by length before its bytes */
    for (k = (uint32_t)obj + 1; k < end; k = (uint32_t)kt->next) {
        kt = doc->toks + k;
        if (kt->type != RSD_JSON_STRING || kt->end > doc->len || kt->start > kt->end) break;
        if (kt->flags & RSD_JSON_F_ESCAPED) {
            if (rsdi_json_eq(doc, kt, key, klen)) v = (int)k + 1;
        } else if (kt->end - kt->start == klen && (klen == 0 || memcmp(doc->src + kt->start, key, klen) == 0)) {
            v = (int)k + 1;
        }
        if (kt->next <= (int32_t)k) break; /* a hand-made token array: never loop */
    }
    return v;
}

RSD_API int rsd_json_find(const rsd_json_doc *doc, int obj, const char *key) {
    return key ? rsdi_json_findn(doc, obj, key, strlen(key)) : -1;
}
#define RSDI_JSON_FIND(doc, obj, lit) rsdi_json_findn((doc), (obj), lit, sizeof(lit) - 1)

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
    static const char hex[] = "0123456789abcdef", shortc[] = "\"\\\b\f\n\r\t";
    const unsigned char *p = (const unsigned char *)str, *e = p + n, *q;
    size_t mark = w->len;
    const char *k;
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
            if (rsdi_utf8_seq(&q, e)) {
                w->len = mark;
                return rsdi_jw_fail(w, RSD_ERR_ARG);
            }
            if (rsdi_jw_put(w, (const char *)p, (size_t)(q - p))) return w->err;
            p = q;
            continue;
        }
        /* the short escapes, else \u00XX */
        k = (const char *)memchr(shortc, *p, 7);
        esc[0] = '\\';
        esc[1] = k ? "\"\\bfnrt"[k - shortc] : 'u';
        esc[2] = esc[3] = '0';
        esc[4] = hex[*p >> 4];
        esc[5] = hex[*p & 15];
        if (rsdi_jw_put(w, esc, k ? 2 : 6)) return w->err;
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
    if (!w) return RSD_ERR_ARG;
    if (!key) return rsdi_jw_fail(w, RSD_ERR_ARG);
    return rsd_json_w_keyn(w, key, strlen(key));
}

RSD_API int rsd_json_w_keyn(rsd_json_writer *w, const char *key, size_t n) {
    uint64_t bit;
    if (!w) return RSD_ERR_ARG;
    if (w->err) return w->err;
    if (!key && n) return rsdi_jw_fail(w, RSD_ERR_ARG);
    if (w->depth == 0) return rsdi_jw_fail(w, RSD_ERR_STATE);
    bit = (uint64_t)1 << (w->depth - 1);
    if (!(w->is_obj & bit) || w->after_key) return rsdi_jw_fail(w, RSD_ERR_STATE);
    if ((w->has_item & bit) && rsdi_jw_put(w, ",", 1)) return w->err;
    w->has_item |= bit;
    if (rsdi_jw_string(w, key, n) || rsdi_jw_put(w, ":", 1)) return w->err;
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

/* ==== json end ============================================================ */

/* ==== >>reconcile ========================================================= */
#include <stdlib.h> /* getenv */
RSD_API const char *rsd_decision_str(int decision) {
    RSDI_ENUM_STR(RSD_DECISIONS, RSD_DECISION_NUM, decision);
}

RSD_API const char *rsd_reason_str(int reason) {
    RSDI_ENUM_STR(RSD_REASONS, RSD_REASON_NUM, reason);
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
    RSDI_ENUM_STR(RSD_NOTICE_KINDS, RSD_NOTICE_KIND_NUM, kind);
}

RSD_API const char *rsd_notice_level_str(int level) {
    RSDI_ENUM_STR(RSD_NOTICE_LEVELS, RSD_LEVEL_NUM, level);
}

RSD_API const char *rsd_notice_msg_str(int msg) {
    RSDI_ENUM_STR(RSD_NOTICE_MSGS, RSD_MSG_NUM, msg);
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

/* ASCII lower case (no locale). */
RSDI_PRIVATE char rsdi_ascii_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* ASCII case-insensitive equality with a lower-case literal. */
RSDI_PRIVATE bool rsdi_ieq_c(rsd_str s, const char *lit) {
    size_t i, n = strlen(lit);
    if (s.len != n) return false;
    for (i = 0; i < n; i++)
        if (rsdi_ascii_lower(s.ptr[i]) != lit[i]) return false;
    return true;
}

/* Total order on views: bytes (unsigned), then length. */
RSDI_PRIVATE int rsdi_str_cmp(rsd_str a, rsd_str b) {
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c) return c;
    return a.len < b.len ? -1 : a.len > b.len ? 1 : 0;
}

/* The tag-protection rule, written only here: a tag exactly "pinned:true" or "role:scout". */
RSDI_PRIVATE bool rsdi_tag_protects(rsd_str t) {
    return (t.len == 11 && memcmp(t.ptr, "pinned:true", 11) == 0) ||
           (t.len == 10 && memcmp(t.ptr, "role:scout", 10) == 0);
}

RSD_API bool rsd_tags_protect(const rsd_str *tags, int n_tags) {
    int i;
    if (!tags || n_tags <= 0) return false;
    for (i = 0; i < n_tags; i++)
        if (rsdi_tag_protects(tags[i])) return true;
    return false;
}

/* Name k of resident r: 0 = model_id, 1.. = aliases (may be empty = skip). */
RSDI_PRIVATE rsd_str rsdi_res_name(const rsd_resident *r, int k) {
    return k == 0 ? r->model_id : r->aliases[k - 1];
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
    if ((r = rsdi_check_id(f->keep, f->free_bytes > 0)) < 0) return r; /* a free plan has no keep */
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

/* Working state of one rsd_decide call (on the stack; see the manual for the figure). */
typedef struct rsdi_decide_ws {
    int n;
    int16_t order[RSD_MAX_RESIDENTS];   /* canonical order: (model_id, index) */
    int16_t root[RSD_MAX_RESIDENTS];    /* union-find parent */
    int16_t rep[RSD_MAX_RESIDENTS];     /* at a root: its canonical-first member */
    uint8_t tag[RSD_MAX_RESIDENTS], cfg[RSD_MAX_RESIDENTS], role[RSD_MAX_RESIDENTS];
    uint8_t ekeep[RSD_MAX_RESIDENTS];   /* the entry carries a keep name */
    uint8_t gsize[RSD_MAX_RESIDENTS];   /* members, at the representative */
    uint8_t role_set[RSD_MAX_RESIDENTS]; /* group role decided */
    int n_others;                       /* non-keep groups, canonical order */
    int16_t others[RSD_MAX_RESIDENTS];
    int n_unprot, n_config;             /* eviction tiers, ours first */
    int16_t unprot[RSD_MAX_RESIDENTS], config[RSD_MAX_RESIDENTS];
    uint64_t glast[RSD_MAX_RESIDENTS];  /* group's last use (its members' latest), at the representative */
    bool keep_pinned;                   /* the keep is (will be) tag-pinned: configured ones stay */
    bool picked_by_bytes;               /* the victims were chosen by size, not by order */
    bool bytes_known;                   /* capacity, keep and every resident sized */
    uint64_t free_bytes, need_bytes;    /* free now; to free for the keep (0 = it fits) */
    uint64_t gbytes[RSD_MAX_RESIDENTS]; /* group footprint, at the representative */
    uint64_t key[RSD_MAX_RESIDENTS];    /* sort keys, by position in order[] */
    uint64_t tmp[RSD_MAX_RESIDENTS];    /* merge scratch */
} rsdi_decide_ws;

/* Name table of one rsd_decide call: every distinct id, alias, protected id and keep
   name, hashed once, open addressing (linear probing). Sized per call to a power of
   two above 1.5x the names; only that part is cleared. */
enum {
    RSDI_NT_NAMES = RSD_MAX_RESIDENTS * (1 + RSD_MAX_ALIASES) + RSD_MAX_PROTECTED + 1 + RSD_MAX_ALIASES,
    RSDI_NT_SLOTS = 512,  /* a power of two > RSDI_NT_NAMES (389): load <= 0.76 */
    RSDI_NT_PROT = 64,    /* slot.ref: protected entry j is RSDI_NT_PROT * 8 + j */
    RSDI_NT_KEEP = 80     /* slot.ref: keep name k (0 = keep, 1.. = aliases) is RSDI_NT_KEEP * 8 + k */
};
/* How the protected list names a name: not at all, by a bare entry, or with a role
   (the first entry with a role gives it). */
enum { RSDI_NT_UNLISTED = 0, RSDI_NT_BARE = 1, RSDI_NT_ROLE = 2 };
typedef struct rsdi_nt_slot {
    int16_t ref;      /* the first holder of the name: resident i's name k = i * 8 + k, or see above */
    int8_t res;       /* first resident carrying the name, -1 = none yet */
    uint8_t is_keep;  /* the keep or a keep alias */
    uint8_t listed;   /* RSDI_NT_UNLISTED, _BARE or _ROLE */
    uint8_t role;     /* with RSDI_NT_ROLE: its rsd_role */
} rsdi_nt_slot;
typedef struct rsdi_nt {
    uint32_t mask;
    uint32_t hash[RSDI_NT_SLOTS];       /* 0 = empty */
    rsdi_nt_slot slot[RSDI_NT_SLOTS];
} rsdi_nt;

/* Hash of a name, never 0: 8 bytes at a time in two lanes, then a final mix. Only a
   hint: equal hashes are confirmed byte for byte, so any hash is correct. */
RSDI_PRIVATE uint32_t rsdi_name_hash(const char *s, size_t n) {
    const uint64_t k1 = 0x9e3779b97f4a7c15ull, k2 = 0xc2b2ae3d27d4eb4full;
    uint64_t h = k2 ^ (uint64_t)n, a = k1, w, w2;
    size_t i, len = n;
    while (n >= 16) {
        memcpy(&w, s, 8);
        memcpy(&w2, s + 8, 8);
        h = (h ^ w) * k1;
        a = (a ^ w2) * k2;
        s += 16;
        n -= 16;
    }
    if (n >= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * k1;
        s += 8;
        n -= 8;
    }
    if (n) {
        if (len >= 8) {
            memcpy(&w, s + n - 8, 8); /* the last 8 bytes, overlapping */
        } else {
            w = 0;
            for (i = 0; i < n; i++) w |= (uint64_t)(uint8_t)s[i] << (8 * i);
        }
        a = (a ^ w) * k2;
    }
    h ^= a ^ (a >> 31);
    h ^= h >> 32;
    h *= k1;
    h ^= h >> 29;
    return (uint32_t)h ? (uint32_t)h : 1u;
}

/* The name a slot's ref stands for. */
RSDI_PRIVATE rsd_str rsdi_nt_name(const rsd_facts *f, int ref) {
    int i = ref >> 3, k = ref & 7;
    if (i < RSDI_NT_PROT) return rsdi_res_name(&f->residents[i], k);
    if (i < RSDI_NT_KEEP) return rsdi_str_trim(f->protected_models[ref - RSDI_NT_PROT * 8].model_id);
    return k == 0 ? f->keep : f->keep_aliases[k - 1];
}

/* The slot of name s (non-empty), inserted for ref when new (*fresh set). */
RSDI_PRIVATE rsdi_nt_slot *rsdi_nt_get(rsdi_nt *t, const rsd_facts *f, rsd_str s, int ref, bool *fresh) {
    uint32_t h = rsdi_name_hash(s.ptr, s.len), i = h & t->mask;
    for (;;) {
        uint32_t sh = t->hash[i];
        if (sh == 0) {
            t->hash[i] = h;
            t->slot[i].ref = (int16_t)ref;
            t->slot[i].res = -1;
            t->slot[i].is_keep = 0;
            t->slot[i].listed = RSDI_NT_UNLISTED;
            t->slot[i].role = (uint8_t)RSD_ROLE_NONE;
            *fresh = true;
            return &t->slot[i];
        }
        if (sh == h && rsd_str_eq(rsdi_nt_name(f, t->slot[i].ref), s)) {
            *fresh = false;
            return &t->slot[i];
        }
        i = (i + 1) & t->mask;
    }
}

RSDI_PRIVATE int rsdi_find(rsdi_decide_ws *w, int i) {
    while (w->root[i] != i) {
        w->root[i] = w->root[w->root[i]];
        i = w->root[i];
    }
    return i;
}

/* Little-endian GNU C: word loads with bswap/ctz; else byte loops (same results;
   -DRSDI_LE_WORDS=0 forces them, as a test of the portable path). */
#ifndef RSDI_LE_WORDS
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RSDI_LE_WORDS 1
#endif
#endif
#endif
#ifndef RSDI_LE_WORDS
#define RSDI_LE_WORDS 0
#endif

/* Sort key of s at byte offset o: the 7 bytes there, big-endian (zero past the end),
   then the resident index (6 bits). */
RSDI_PRIVATE uint64_t rsdi_sort_key(rsd_str s, size_t o, int idx) {
    uint64_t k = 0;
    size_t j;
#if RSDI_LE_WORDS
    if (o + 8 <= s.len) {
        memcpy(&k, s.ptr + o, 8);
        return ((__builtin_bswap64(k) >> 8) << 6) | (uint64_t)idx;
    }
    if (o >= s.len) return (uint64_t)idx;
    if (s.len >= 8) { /* the last 8 bytes, shifted so byte o is on top */
        memcpy(&k, s.ptr + s.len - 8, 8);
        return (((__builtin_bswap64(k) << (8 * (o + 8 - s.len))) >> 8) << 6) | (uint64_t)idx;
    }
#endif
    for (j = o; j < o + 7; j++) k = (k << 8) | (j < s.len ? (uint64_t)(uint8_t)s.ptr[j] : 0);
    return (k << 6) | (uint64_t)idx;
}

/* Bytes s and t share from offset o on (both at least max long, equal before o), up to max. */
RSDI_PRIVATE size_t rsdi_common(const char *s, const char *t, size_t o, size_t max) {
    uint64_t a, b;
    while (o + 8 <= max) {
        memcpy(&a, s + o, 8);
        memcpy(&b, t + o, 8);
        if (a != b) {
#if RSDI_LE_WORDS
            return o + ((size_t)__builtin_ctzll(a ^ b) >> 3);
#else
            break;
#endif
        }
        o += 8;
    }
#if RSDI_LE_WORDS
    if (o < max && max >= 8) { /* the last 8 bytes; those before o are equal */
        memcpy(&a, s + max - 8, 8);
        memcpy(&b, t + max - 8, 8);
        return a == b ? max : max - 8 + ((size_t)__builtin_ctzll(a ^ b) >> 3);
    }
#endif
    while (o < max && s[o] == t[o]) o++;
    return o;
}

/* Sorts n <= 64 unique keys ascending: insertion sort on runs of 8, then branch-free
   merges (tmp: scratch of n). */
RSDI_PRIVATE void rsdi_sort_keys(uint64_t *key, int n, uint64_t *tmp) {
    uint64_t *src = key, *dst = tmp, *x;
    int i, j, lo, width;
    for (lo = 0; lo < n; lo += 8) {
        int hi = lo + 8 < n ? lo + 8 : n;
        for (i = lo + 1; i < hi; i++) {
            uint64_t k = key[i];
            for (j = i; j > lo && key[j - 1] > k; j--) key[j] = key[j - 1];
            key[j] = k;
        }
    }
    for (width = 8; width < n; width *= 2) {
        for (lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n, o = lo;
            i = lo;
            j = mid;
            while (i < mid && j < hi) {
                uint64_t a = src[i], b = src[j];
                int take_b = b < a;
                dst[o++] = take_b ? b : a;
                j += take_b;
                i += !take_b;
            }
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
        }
        x = src;
        src = dst;
        dst = x;
    }
    if (src != key) memcpy(key, src, (size_t)n * sizeof *key);
}

/* Insertion sort of order[lo, hi) by whole model_id (stable: index order kept among
   equal ids); a NULL view counts as the empty id. */
RSDI_PRIVATE void rsdi_order_insert(const rsd_facts *f, int16_t *order, int lo, int hi) {
    int a, b;
    for (a = lo + 1; a < hi; a++) {
        int16_t x = order[a];
        rsd_str sx = f->residents[x].model_id;
        if (!sx.ptr) sx.len = 0;
        for (b = a; b > lo; b--) {
            rsd_str sy = f->residents[order[b - 1]].model_id;
            if (!sy.ptr) sy.len = 0;
            if (rsdi_str_cmp(sy, sx) <= 0) break;
            order[b] = order[b - 1];
        }
        order[b] = x;
    }
}

/* Canonical order of order[0, n), n <= 64: model_id bytes (unsigned), then length,
   then index. Per range of ids known to share their first `depth` bytes: skip the
   bytes the range shares, sort on a 7-byte key there; runs that tie on the key and
   all go on become ranges of their own (a work list, no recursion), a tied run
   where an id ends inside the key is sorted by whole comparison. */
RSDI_PRIVATE void rsdi_sort_ids(const rsd_facts *f, int16_t *order, uint64_t *key, uint64_t *tmp, int n) {
    struct { int lo, hi; size_t depth; } todo[RSD_MAX_RESIDENTS / 2 + 1]; /* disjoint, >= 2 each */
    int nt = 1;
    todo[0].lo = 0;
    todo[0].hi = n;
    todo[0].depth = 0;
    while (nt > 0) {
        int lo = todo[nt - 1].lo, hi = todo[nt - 1].hi, i, j;
        size_t depth = todo[nt - 1].depth, L;
        rsd_str first = f->residents[order[lo]].model_id;
        nt--;
        L = first.len;
        for (i = lo + 1; i < hi && L > depth; i++) {
            rsd_str s = f->residents[order[i]].model_id;
            L = rsdi_common(first.ptr, s.ptr, depth, L < s.len ? L : s.len);
        }
        for (i = lo; i < hi; i++) key[i] = rsdi_sort_key(f->residents[order[i]].model_id, L, order[i]);
        rsdi_sort_keys(key + lo, hi - lo, tmp);
        for (i = lo; i < hi; i++) order[i] = (int16_t)(key[i] & 63);
        for (i = lo; i < hi; i = j) { /* runs that tie on the 7 bytes */
            uint64_t k = key[i] >> 6;
            bool longer = true;
            for (j = i; j < hi && (key[j] >> 6) == k; j++)
                longer = longer && f->residents[order[j]].model_id.len >= L + 7;
            if (j - i < 2) continue;
            if (longer) { /* all go on: sort the run from the next 7 bytes */
                todo[nt].lo = i;
                todo[nt].hi = j;
                todo[nt].depth = L + 7;
                nt++;
                continue;
            }
            rsdi_order_insert(f, order, i, j); /* one ends here: compare whole */
        }
    }
}

/* Each message's kind and level, the detail fields it always carries, and whether it only
   describes the server (kept as it is under observe), in rsd_notice_msg order. */
typedef struct rsdi_notice_class {
    uint8_t kind, level, advisory;
    uint16_t detail;
} rsdi_notice_class;
#define RSDI_NC(k, l, a, d) {(uint8_t)RSD_NOTICE_##k, (uint8_t)RSD_LEVEL_##l, a, (uint16_t)(d)}
static const rsdi_notice_class rsdi_notice_classes[RSD_MSG_NUM] = {
    RSDI_NC(NONE, NONE, 0, 0),
    RSDI_NC(STRESS, WARNING, 1, RSD_DETAIL_REQUESTED_CONTEXT | RSD_DETAIL_MODEL_MAX_CONTEXT), /* CONTEXT_OVER_MAX */
    RSDI_NC(STRESS, WARNING, 1, RSD_DETAIL_RESIDENT_VRAM_BYTES | RSD_DETAIL_RESIDENT_TOTAL_BYTES), /* SPLIT */
    RSDI_NC(STRESS, WARNING, 1, RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES), /* OVER_CAPACITY */
    RSDI_NC(CO_RESIDENT, INFO, 1, RSD_DETAIL_RESIDENT_COUNT), /* SERVES_ALONGSIDE (+ MAX_INSTANCES when known) */
    RSDI_NC(CO_RESIDENT, INFO, 0, RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES), /* LOADING_ALONGSIDE */
    RSDI_NC(WILL_NOT_FIT, ERROR, 0, 0), /* DECLINE_PINNED_KEEP: a DECLINE_ALL_PINNED notice turns into it */
    RSDI_NC(WILL_NOT_FIT, ERROR, 0, RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES), /* DECLINE_ALL_PINNED */
    RSDI_NC(SWAP, WARNING, 0, RSD_DETAIL_SWAPPED_OUT | RSD_DETAIL_CONFIG_PROTECTED), /* EVICT_CONFIG */
    RSDI_NC(ABOUT_TO_EVICT, INFO, 0, 0), /* EVICT_OURS */
    RSDI_NC(SWAP, WARNING, 0, RSD_DETAIL_SWAPPED_OUT), /* EVICT_FOREIGN */
    RSDI_NC(STRESS, WARNING, 0, RSD_DETAIL_REQUESTED_CONTEXT | RSD_DETAIL_LOAD_CONTEXT), /* CONTEXT_CLAMPED */
    RSDI_NC(WILL_NOT_FIT, ERROR, 0, 0), /* NOT_LOADABLE (no detail upstream) */
    RSDI_NC(WILL_NOT_FIT, WARNING, 0, RSD_DETAIL_KEEP_BYTES | RSD_DETAIL_FREE_BYTES | RSD_DETAIL_CAPACITY_BYTES),
    RSDI_NC(ABOUT_TO_EVICT, INFO, 0, RSD_DETAIL_FREED_VRAM_BYTES | RSD_DETAIL_FREE_BYTES), /* FREE_OURS */
    RSDI_NC(WILL_NOT_FIT, WARNING, 0, RSD_DETAIL_FREE_BYTES | RSD_DETAIL_FREED_VRAM_BYTES) /* FREE_SHORT */
};
#undef RSDI_NC

/* Appends a notice of message msg; returns it zeroed with its kind, level and detail set,
   or NULL if full. */
RSDI_PRIVATE rsd_notice *rsdi_notice_add(rsd_plan *p, rsd_notice_msg msg, int subject) {
    const rsdi_notice_class *c = &rsdi_notice_classes[msg];
    rsd_notice *n;
    if (p->n_notices >= RSD_MAX_NOTICES) return NULL;
    n = &p->notices[p->n_notices++];
    memset(n, 0, sizeof *n);
    n->kind = (rsd_notice_kind)c->kind;
    n->level = (rsd_notice_level)c->level;
    n->detail = c->detail;
    n->msg = msg;
    n->subject = subject;
    n->role = RSD_ROLE_NONE;
    return n;
}

/* Builds a tier: the groups with the given protection, ours first, then least recently
   used first (an unknown last use, 0, first of all), then canonical order. */
RSDI_PRIVATE int rsdi_tier(const rsdi_decide_ws *w, const rsd_plan *p, int protection, int16_t *out) {
    int pass, k, j, n = 0;
    for (pass = 0; pass < 2; pass++) {
        int first = n;
        for (k = 0; k < w->n_others; k++) { /* others[] is canonical: a stable insertion by last use */
            int g = w->others[k];
            if (p->cls[g].protection != protection) continue;
            if ((pass == 0) != (p->cls[g].ours != 0)) continue;
            for (j = n++; j > first && w->glast[out[j - 1]] > w->glast[g]; j--) out[j] = out[j - 1];
            out[j] = (int16_t)g;
        }
    }
    return n;
}

/* Why victim g came first among the candidates of its protection (its tier). */
RSDI_PRIVATE rsd_victim_rule rsdi_victim_rule(const rsdi_decide_ws *w, const rsd_plan *p, int g) {
    int k;
    if (w->picked_by_bytes) return RSD_VICTIM_NONE;
    if (w->glast[g]) return RSD_VICTIM_LRU;
    for (k = 0; k < w->n_others; k++)
        if (p->cls[w->others[k]].protection == p->cls[g].protection && w->glast[w->others[k]]) return RSD_VICTIM_UNUSED;
    return RSD_VICTIM_BY_ID;
}

/* cls[].victim_rule of every planned victim (and its group's members). */
RSDI_PRIVATE void rsdi_victim_rules(const rsdi_decide_ws *w, rsd_plan *p) {
    int k, i;
    for (k = 0; k < p->n_evict; k++) {
        int g = p->evict[k];
        uint8_t rule = (uint8_t)rsdi_victim_rule(w, p, g);
        for (i = 0; i < w->n; i++)
            if (p->cls[i].group == g) p->cls[i].victim_rule = rule;
    }
}

/* True when a last use is known for a group of tier list[0, n). */
RSDI_PRIVATE bool rsdi_tier_used(const rsdi_decide_ws *w, const int16_t *list, int n) {
    int k;
    for (k = 0; k < n; k++)
        if (w->glast[list[k]]) return true;
    return false;
}

RSDI_PRIVATE void rsdi_mark_evict(const rsdi_decide_ws *w, rsd_plan *p, int g) {
    int i;
    for (i = 0; i < w->n; i++)
        if (p->cls[i].group == g) p->cls[i].evict = 1;
    p->evict[p->n_evict++] = (int16_t)g;
}

/* One notice per planned eviction, saying why this victim. */
RSDI_PRIVATE void rsdi_evict_notices(const rsd_facts *f, const rsdi_decide_ws *w, rsd_plan *p) {
    int k;
    rsdi_victim_rules(w, p);
    for (k = 0; k < p->n_evict; k++) {
        int g = p->evict[k];
        const rsd_resident *r = &f->residents[g];
        rsd_notice *n;
        if (p->cls[g].protection == RSD_PROTECT_CONFIG) {
            n = rsdi_notice_add(p, RSD_MSG_EVICT_CONFIG, g);
            if (!n) return;
            n->config_protected = true;
            n->role = (rsd_role)p->cls[g].role;
            if (n->role != RSD_ROLE_NONE) n->detail |= RSD_DETAIL_ROLE;
        } else if (p->cls[g].ours) {
            n = rsdi_notice_add(p, RSD_MSG_EVICT_OURS, g);
            if (!n) return;
        } else {
            n = rsdi_notice_add(p, RSD_MSG_EVICT_FOREIGN, g);
            if (!n) return;
        }
        if (p->cls[g].protection != RSD_PROTECT_CONFIG && r->has_size_vram) {
            n->detail |= RSD_DETAIL_FREED_VRAM_BYTES;
            n->freed_vram_bytes = r->size_vram_bytes;
        }
    }
}

/* a resident's footprint: its GPU bytes if given, else its total bytes. */
RSDI_PRIVATE bool rsdi_res_bytes(const rsd_resident *r, uint64_t *b) {
    if (r->has_size_vram) { *b = r->size_vram_bytes; return true; }
    if (r->has_size) { *b = r->size_bytes; return true; }
    return false;
}

RSDI_PRIVATE uint64_t rsdi_add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* choose victims from tier a, then tier b, each tier largest first (ties keep the
   tier order: ours first, then id), until `slots` instances and `bytes` are freed;
   then spare the picked ones, latest first, that the rest make unneeded. Writes the
   picks in order to out; returns their count, or -1 (nothing written) when even all
   candidates do not free enough. */
RSDI_PRIVATE int rsdi_pick_bytes(const rsdi_decide_ws *w, const int16_t *a, int na, const int16_t *b, int nb,
                                 int64_t slots, uint64_t bytes, int16_t *out) {
    int16_t c[RSD_MAX_RESIDENTS];
    int n = 0, t, i, j, np = 0;
    int64_t fs = 0;
    uint64_t fb = 0;
    for (t = 0; t < 2; t++) {
        const int16_t *src = t ? b : a;
        int ns = t ? nb : na, first = n;
        for (i = 0; i < ns; i++) { /* stable insertion by footprint, descending */
            int16_t g = src[i];
            j = n++;
            while (j > first && w->gbytes[c[j - 1]] < w->gbytes[g]) {
                c[j] = c[j - 1];
                j--;
            }
            c[j] = g;
        }
    }
    for (i = 0; i < n && (fs < slots || fb < bytes); i++) {
        out[np++] = c[i];
        fs += w->gsize[c[i]];
        fb = rsdi_add_sat(fb, w->gbytes[c[i]]);
    }
    if (fs < slots || fb < bytes) return -1;
    for (i = np - 2; i >= 0; i--) /* the last pick is needed by construction */
        if (fs - w->gsize[out[i]] >= slots && fb - w->gbytes[out[i]] >= bytes) {
            fs -= w->gsize[out[i]];
            fb -= w->gbytes[out[i]];
            for (j = i; j + 1 < np; j++) out[j] = out[j + 1];
            np--;
        }
    return np;
}

/* the keep does not fit even after evicting every candidate: say so (the plan
   then goes on as without sizes). evictable = bytes the candidates hold. */
RSDI_PRIVATE void rsdi_bytes_short(const rsd_facts *f, const rsdi_decide_ws *w, rsd_plan *p, uint64_t evictable) {
    rsd_notice *n = rsdi_notice_add(p, RSD_MSG_BYTES_SHORT, -1);
    if (!n) return;
    n->keep_bytes = f->keep_bytes;
    n->free_bytes = rsdi_add_sat(w->free_bytes, evictable);
    n->capacity_bytes = f->capacity_bytes;
}

/* mark the byte picks (or note the shortfall). Returns true when it planned. */
RSDI_PRIVATE bool rsdi_evict_bytes(const rsd_facts *f, rsdi_decide_ws *w, rsd_plan *p, const int16_t *a, int na,
                                   const int16_t *b, int nb, int64_t slots) {
    int16_t picks[RSD_MAX_RESIDENTS];
    int np = rsdi_pick_bytes(w, a, na, b, nb, slots, w->need_bytes, picks), k;
    bool any_config = false;
    if (np < 0) {
        uint64_t all = 0;
        for (k = 0; k < na; k++) all = rsdi_add_sat(all, w->gbytes[a[k]]);
        for (k = 0; k < nb; k++) all = rsdi_add_sat(all, w->gbytes[b[k]]);
        rsdi_bytes_short(f, w, p, all);
        return false;
    }
    for (k = 0; k < np; k++) {
        rsdi_mark_evict(w, p, picks[k]);
        any_config = any_config || p->cls[picks[k]].protection == RSD_PROTECT_CONFIG;
    }
    w->picked_by_bytes = np > 0;
    p->decision = np ? RSD_DECISION_LOAD_AFTER_EVICT : RSD_DECISION_LOAD;
    p->reason = !np ? RSD_REASON_FITS_BYTES : any_config ? RSD_REASON_EVICT_CONFIG : RSD_REASON_EVICT_BYTES;
    return true;
}

/* Router strategy with known capacity. */
RSDI_PRIVATE void rsdi_router_known(const rsd_facts *f, rsdi_decide_ws *w, rsd_plan *p,
                                    bool config_evictable) {
    int64_t needed = (int64_t)f->n_residents + 1 - (int64_t)f->max_instances;
    int64_t freed = 0, avail_unprot = 0, avail_config = 0;
    int k;
    bool any_config = false, by_bytes = w->bytes_known && w->need_bytes > 0;
    rsd_notice *n;
    p->slots_needed = needed > 0 ? (int)needed : 0;
    if (needed <= 0 && by_bytes && /* a free slot, but not the memory */
        rsdi_evict_bytes(f, w, p, w->unprot, w->n_unprot, w->config, config_evictable ? w->n_config : 0, 0))
        return;
    if (needed <= 0) { /* R30a */
        p->decision = RSD_DECISION_LOAD;
        p->reason = RSD_REASON_FREE_SLOT;
        n = rsdi_notice_add(p, RSD_MSG_LOADING_ALONGSIDE, -1);
        if (n) {
            n->resident_count = (uint32_t)f->n_residents + 1;
            n->max_instances = f->max_instances;
        }
        return;
    }
    for (k = 0; k < w->n_unprot; k++) avail_unprot += w->gsize[w->unprot[k]];
    for (k = 0; k < w->n_config; k++) avail_config += w->gsize[w->config[k]];
    if (avail_unprot + (config_evictable ? avail_config : 0) < needed) {
        n = rsdi_notice_add(p, RSD_MSG_DECLINE_ALL_PINNED, -1);
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
            n->resident_count = (uint32_t)f->n_residents;
            n->max_instances = f->max_instances;
        }
        return;
    }
    if (by_bytes &&
        rsdi_evict_bytes(f, w, p, w->unprot, w->n_unprot, w->config, config_evictable ? w->n_config : 0, needed))
        return;
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
    p->reason = any_config ? RSD_REASON_EVICT_CONFIG
              : rsdi_tier_used(w, w->unprot, w->n_unprot) ? RSD_REASON_EVICT_LRU : RSD_REASON_EVICT_UNPROTECTED;
}

/* ---- rsd_decide, phase by phase ----------------------------------------------------- */

/* Phase 1, names: the name table holds the protected ids first (the first entry with
   a role gives the role, else a bare entry protects with none), then the keep's
   names. */
RSDI_PRIVATE void rsdi_decide_names(const rsd_facts *f, rsdi_nt *t) {
    uint32_t names = (uint32_t)f->n_protected + 1u + (uint32_t)f->n_keep_aliases, size;
    int i, k;
    bool fresh;
    for (i = 0; i < f->n_residents; i++) names += 1u + (uint32_t)f->residents[i].n_aliases;
    for (size = 16; size < names + names / 2 + 1 && size < RSDI_NT_SLOTS; size *= 2) {}
    t->mask = size - 1;
    memset(t->hash, 0, size * sizeof t->hash[0]);
    for (i = 0; i < f->n_protected; i++) {
        rsd_str id = rsdi_str_trim(f->protected_models[i].model_id);
        rsd_role role = f->protected_models[i].role;
        rsdi_nt_slot *s;
        if (id.len == 0 || id.len >= RSD_MODEL_ID_MAX) continue;
        s = rsdi_nt_get(t, f, id, RSDI_NT_PROT * 8 + i, &fresh);
        if (s->listed == RSDI_NT_ROLE) continue; /* an earlier entry gave the role */
        if (role != RSD_ROLE_NONE) {
            s->listed = RSDI_NT_ROLE;
            s->role = (uint8_t)role;
        } else {
            s->listed = RSDI_NT_BARE;
        }
    }
    for (k = 0; k <= f->n_keep_aliases; k++) {
        rsd_str x = k == 0 ? f->keep : f->keep_aliases[k - 1];
        if (x.len) rsdi_nt_get(t, f, x, RSDI_NT_KEEP * 8 + k, &fresh)->is_keep = 1;
    }
}

/* Phase 2, identity groups: per-entry protection and keep match; entries
   that share any id or alias are one model, represented by its canonical-first
   member, which holds the group's facts (keep, ours, protection, role, last use);
   then every member gets them, and others[] lists the non-keep groups in canonical
   order. */
RSDI_PRIVATE void rsdi_decide_groups(const rsd_facts *f, rsdi_decide_ws *w, rsdi_nt *t, rsd_plan *p) {
    int i, k;
    bool fresh;
    for (i = 0; i < w->n; i++) {
        const rsd_resident *res = &f->residents[i];
        w->root[i] = (int16_t)i;
        w->rep[i] = -1;
        w->cfg[i] = w->role[i] = w->ekeep[i] = 0;
        w->gsize[i] = w->role_set[i] = 0;
        w->gbytes[i] = w->glast[i] = 0;
        w->tag[i] = (uint8_t)(res->pinned || rsd_tags_protect(res->tags, res->n_tags));
        for (k = 0; k <= res->n_aliases; k++) {
            rsd_str x = rsdi_res_name(res, k);
            rsdi_nt_slot *s;
            if (!x.len) continue;
            s = rsdi_nt_get(t, f, x, i * 8 + k, &fresh);
            if (s->res < 0) {
                s->res = (int8_t)i;
            } else if (s->res != i) {
                int a = rsdi_find(w, i), b = rsdi_find(w, s->res);
                if (a != b) w->root[a > b ? a : b] = (int16_t)(a < b ? a : b);
            }
            if (s->is_keep) w->ekeep[i] = 1;
            if (s->listed != RSDI_NT_UNLISTED && !w->cfg[i]) { /* the id, else the first protected alias */
                w->cfg[i] = 1;
                w->role[i] = s->listed == RSDI_NT_ROLE ? s->role : (uint8_t)RSD_ROLE_NONE;
            }
        }
    }
    for (k = 0; k < w->n; k++) {
        int e = w->order[k], g = rsdi_find(w, e);
        if (w->rep[g] < 0) w->rep[g] = (int16_t)e;
    }
    for (i = 0; i < w->n; i++) p->cls[i].group = (uint8_t)w->rep[rsdi_find(w, i)];
    for (k = 0; k < w->n; k++) { /* aggregates at the representative, in canonical order */
        int e = w->order[k], g = p->cls[e].group;
        rsd_resident_class *c = &p->cls[g];
        w->gsize[g]++;
        if (w->ekeep[e]) c->is_keep = 1;
        if (f->residents[e].loaded_by_us) c->ours = 1;
        if (f->residents[e].last_used_ms > w->glast[g]) w->glast[g] = f->residents[e].last_used_ms;
        if (w->tag[e]) c->protection = RSD_PROTECT_TAG;
        else if (w->cfg[e] && c->protection == RSD_PROTECT_NONE) c->protection = RSD_PROTECT_CONFIG;
        if (w->cfg[e] && !w->role_set[g]) { /* role of the canonical-first configured member */
            c->role = w->role[e];
            w->role_set[g] = 1;
        }
    }
    for (i = 0; i < w->n; i++) { /* spread group facts to members */
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
    for (k = 0; k < w->n; k++) {
        int e = w->order[k];
        if (p->cls[e].group == e && !p->cls[e].is_keep) w->others[w->n_others++] = (int16_t)e;
    }
}

/* Phase 3, bytes: only when everything is sized, else exactly as without. */
RSDI_PRIVATE void rsdi_decide_bytes(const rsd_facts *f, rsdi_decide_ws *w, const rsd_plan *p) {
    uint64_t used = 0, b = 0;
    int i;
    w->bytes_known = f->capacity_bytes > 0 && f->keep_bytes > 0;
    for (i = 0; i < w->n && w->bytes_known; i++) {
        if (!rsdi_res_bytes(&f->residents[i], &b)) w->bytes_known = false;
        w->gbytes[p->cls[i].group] = rsdi_add_sat(w->gbytes[p->cls[i].group], b);
        used = rsdi_add_sat(used, b);
    }
    w->free_bytes = f->capacity_bytes > used ? f->capacity_bytes - used : 0;
    w->need_bytes = f->keep_bytes > w->free_bytes ? f->keep_bytes - w->free_bytes : 0;
}

/* Phase 4, stress: the context over the model's limit, then every resident split
   across CPU and GPU, keep included, canonical order. */
RSDI_PRIVATE void rsdi_decide_stress(const rsd_facts *f, const rsdi_decide_ws *w, rsd_plan *p) {
    int k;
    if (f->context_length && f->model_max_context && f->context_length > f->model_max_context) {
        rsd_notice *n = rsdi_notice_add(p, RSD_MSG_CONTEXT_OVER_MAX, -1);
        if (n) {
            n->requested_context = f->context_length;
            n->model_max_context = f->model_max_context;
        }
    }
    for (k = 0; k < w->n; k++) {
        const rsd_resident *res = &f->residents[w->order[k]];
        if (res->has_size && res->has_size_vram && res->size_bytes > res->size_vram_bytes) {
            rsd_notice *n = rsdi_notice_add(p, RSD_MSG_SPLIT, w->order[k]);
            if (n) {
                n->resident_vram_bytes = res->size_vram_bytes;
                n->resident_total_bytes = res->size_bytes;
            }
        }
    }
}

/* Phase 5a: the keep is resident: nothing to do; one notice when others share
   the server. */
RSDI_PRIVATE void rsdi_decide_resident(const rsd_facts *f, const rsdi_decide_ws *w, rsd_plan *p) {
    rsd_notice *n;
    p->decision = RSD_DECISION_ALREADY_RESIDENT;
    p->reason = RSD_REASON_KEEP_RESIDENT;
    if (!w->n_others) return;
    if (f->max_instances && (uint32_t)w->n > f->max_instances) {
        n = rsdi_notice_add(p, RSD_MSG_OVER_CAPACITY, -1);
    } else {
        n = rsdi_notice_add(p, RSD_MSG_SERVES_ALONGSIDE, -1);
        if (n && f->max_instances) n->detail |= RSD_DETAIL_MAX_INSTANCES;
    }
    if (n) {
        n->resident_count = (uint32_t)w->n;
        n->max_instances = f->max_instances;
    }
}

/* Phase 5b, JIT: load now; the fallback is the tiers in order. */
RSDI_PRIVATE void rsdi_decide_jit(const rsdi_decide_ws *w, rsd_plan *p) {
    int k;
    for (k = 0; k < w->n_unprot; k++) p->fallback[p->n_fallback++] = w->unprot[k];
    for (k = 0; !w->keep_pinned && k < w->n_config; k++) p->fallback[p->n_fallback++] = w->config[k];
    p->decision = RSD_DECISION_LOAD;
    p->reason = RSD_REASON_JIT_LOAD;
}

/* Phase 5c, scheduler: release our unprotected stragglers (with sizes, only the
   fewest that free what the keep needs). */
RSDI_PRIVATE void rsdi_decide_scheduler(const rsd_facts *f, rsdi_decide_ws *w, rsd_plan *p) {
    int16_t ours[RSD_MAX_RESIDENTS] = {0}; /* = {0}: gcc -O2 maybe-uninitialized */
    int n_ours = 0, k;
    for (k = 0; k < w->n_unprot; k++)
        if (p->cls[w->unprot[k]].ours) ours[n_ours++] = w->unprot[k];
    if (w->bytes_known && rsdi_evict_bytes(f, w, p, ours, n_ours, NULL, 0, 0)) {
        if (p->n_evict) p->reason = RSD_REASON_SCHEDULER_RELEASE_OURS; /* the fewest of ours */
        return;
    }
    for (k = 0; k < n_ours; k++) rsdi_mark_evict(w, p, ours[k]);
    p->decision = p->n_evict ? RSD_DECISION_LOAD_AFTER_EVICT : RSD_DECISION_LOAD;
    p->reason = p->n_evict ? RSD_REASON_SCHEDULER_RELEASE_OURS : RSD_REASON_SCHEDULER_LOAD;
}

/* Phase 5d, router: empty, capacity unknown (evict one), or known. */
RSDI_PRIVATE void rsdi_decide_router(const rsd_facts *f, rsdi_decide_ws *w, rsd_plan *p) {
    if (w->n == 0) {
        p->decision = RSD_DECISION_LOAD;
        p->reason = RSD_REASON_EMPTY_SERVER;
        if (w->bytes_known && w->need_bytes) rsdi_bytes_short(f, w, p, 0); /* too big even alone */
    } else if (f->max_instances == 0) {
        if (w->bytes_known && w->need_bytes && rsdi_evict_bytes(f, w, p, w->unprot, w->n_unprot, NULL, 0, 0)) {
            /* as many as the bytes need (one or more); never a configured one. When the
               bytes fit, the one eviction stays: the router limits by count, not bytes */
        } else if (w->n_unprot) {
            rsdi_mark_evict(w, p, w->unprot[0]);
            p->decision = RSD_DECISION_LOAD_AFTER_EVICT;
            p->reason = RSD_REASON_CAPACITY_UNKNOWN_EVICT_ONE;
        } else {
            p->decision = RSD_DECISION_LOAD;
            p->reason = RSD_REASON_CAPACITY_UNKNOWN_NONE_EVICTABLE;
        }
    } else {
        rsdi_router_known(f, w, p, !w->keep_pinned);
    }
}

/* Phase 5e, a free plan (an empty keep and free_bytes): unload models this library
   loaded, unprotected and of known size, in tier order (least recently used first),
   until free_bytes are freed; one notice per victim, and one more when they cannot free
   it all. */
RSDI_PRIVATE void rsdi_decide_free(const rsd_facts *f, rsdi_decide_ws *w, rsd_plan *p) {
    uint64_t freed = 0, b, held = 0;
    int k;
    rsd_notice *n;
    for (k = 0; k < w->n_unprot; k++) {
        int g = w->unprot[k], i;
        bool sized = p->cls[g].ours != 0;
        for (b = 0, i = 0; i < w->n && sized; i++)
            if (p->cls[i].group == g) {
                uint64_t x = 0;
                sized = rsdi_res_bytes(&f->residents[i], &x);
                b = rsdi_add_sat(b, x);
            }
        if (!sized || !b) continue;
        held = rsdi_add_sat(held, b);
        if (freed >= f->free_bytes) continue;
        rsdi_mark_evict(w, p, g);
        freed = rsdi_add_sat(freed, b);
        n = rsdi_notice_add(p, RSD_MSG_FREE_OURS, g);
        if (n) {
            n->freed_vram_bytes = b;
            n->free_bytes = f->free_bytes;
        }
    }
    rsdi_victim_rules(w, p);
    p->decision = RSD_DECISION_FREE;
    p->freed_bytes = freed;
    p->reason = !p->n_evict ? RSD_REASON_FREE_NOTHING : freed < f->free_bytes ? RSD_REASON_FREE_SHORT
                                                                              : RSD_REASON_FREE_BYTES;
    if (freed >= f->free_bytes) return;
    n = rsdi_notice_add(p, RSD_MSG_FREE_SHORT, -1);
    if (n) {
        n->free_bytes = f->free_bytes;
        n->freed_vram_bytes = held;
    }
}

RSDI_PRIVATE uint64_t rsdi_fit_kv(uint64_t per_token, uint32_t ctx, uint32_t seq);
/* Phase 6, clamp: the load context while neighbours stay resident (by bytes when the
   keep's KV per token, the capacity and every footprint are known). */
RSDI_PRIVATE void rsdi_decide_clamp(const rsd_facts *f, const rsdi_decide_ws *w, rsd_plan *p) {
    int neighbours = 0, k;
    uint64_t stay = 0, kv;
    rsd_fit_bytes_desc d;
    rsd_fit_bytes fb;
    rsd_notice *n;
    if (!f->context_length || (p->decision != RSD_DECISION_LOAD && p->decision != RSD_DECISION_LOAD_AFTER_EVICT))
        return;
    for (k = 0; k < w->n_others; k++)
        if (!p->cls[w->others[k]].evict) {
            neighbours++;
            stay = rsdi_add_sat(stay, w->gbytes[w->others[k]]);
        }
    memset(&d, 0, sizeof d);
    d.requested = f->context_length;
    d.n_other_residents = neighbours;
    d.ceiling = f->context_ceiling;
    d.floor = f->context_floor;
    if (f->kv_bytes_per_token && f->capacity_bytes && w->bytes_known) {
        /* by bytes: keep_bytes is its footprint at context_length; the rest is not KV */
        kv = rsdi_fit_kv(f->kv_bytes_per_token, f->context_length, 1);
        d.kv_bytes_per_token = f->kv_bytes_per_token;
        d.free_bytes = f->capacity_bytes > stay ? f->capacity_bytes - stay : 0;
        d.load_bytes = f->keep_bytes > kv ? f->keep_bytes - kv : 0;
    }
    (void)rsd_fit_context_bytes(&d, &fb);
    p->load_context = fb.context;
    if (p->load_context >= f->context_length) return;
    n = rsdi_notice_add(p, RSD_MSG_CONTEXT_CLAMPED, -1);
    if (n) {
        n->requested_context = f->context_length;
        n->load_context = p->load_context;
    }
}

/* Phase 7, observe: an opt-out keeps the plan as what would happen and
   mutates nothing. */
RSDI_PRIVATE void rsdi_decide_observe(const rsd_facts *f, rsd_plan *p) {
    int k;
    p->would = p->decision;
    if (f->optout == RSD_OPTOUT_NONE) return;
    p->decision = RSD_DECISION_OBSERVE;
    p->reason = f->optout == RSD_OPTOUT_TARGET ? RSD_REASON_OBSERVE_TARGET : RSD_REASON_OBSERVE_ENV;
    p->n_evict = 0;
    p->n_fallback = 0;
    for (k = 0; k < p->n_notices; k++)
        if (!rsdi_notice_classes[p->notices[k].msg].advisory) p->notices[k].observe_only = true;
}

RSD_API int rsd_decide(const rsd_facts *f, rsd_plan *p) {
    rsdi_decide_ws w;
    rsdi_nt t;
    int i, r;
    if (!p) return RSD_ERR_ARG;
    memset(p, 0, sizeof *p);
    p->keep_index = -1;
    if (!f) return RSD_ERR_ARG;
    if ((r = rsdi_check_facts(f)) < 0) return r;
    w.n = f->n_residents;
    w.n_others = w.n_unprot = w.n_config = 0;
    w.picked_by_bytes = false;
    w.keep_pinned = f->keep_pinned || rsd_tags_protect(f->keep_tags, f->n_keep_tags);
    p->resident_count = (uint32_t)w.n;
    for (i = 0; i < w.n; i++) w.order[i] = (int16_t)i; /* canonical order: (model_id, index) */
    if (w.n > 1) rsdi_sort_ids(f, w.order, w.key, w.tmp, w.n);
    rsdi_decide_names(f, &t);
    rsdi_decide_groups(f, &w, &t, p);
    rsdi_decide_bytes(f, &w, p);
    rsdi_decide_stress(f, &w, p);
    if (!f->keep.len) { /* a free plan (rsdi_check_facts let an empty keep through only for it) */
        w.n_unprot = rsdi_tier(&w, p, RSD_PROTECT_NONE, w.unprot);
        rsdi_decide_free(f, &w, p);
    } else if (p->keep_resident) {
        rsdi_decide_resident(f, &w, p);
    } else {
        w.n_unprot = rsdi_tier(&w, p, RSD_PROTECT_NONE, w.unprot);
        w.n_config = rsdi_tier(&w, p, RSD_PROTECT_CONFIG, w.config);
        if (f->strategy == RSD_STRATEGY_JIT) rsdi_decide_jit(&w, p);
        else if (f->strategy == RSD_STRATEGY_SCHEDULER) rsdi_decide_scheduler(f, &w, p);
        else rsdi_decide_router(f, &w, p);
        rsdi_evict_notices(f, &w, p);
    }
    rsdi_decide_clamp(f, &w, p);
    rsdi_decide_observe(f, p);
    return RSD_OK;
}

/* Ids and names from the facts (chosen by a server) are escaped for a terminal. */
RSDI_PRIVATE void rsdi_sb_s(rsdi_sb *b, rsd_str s) { rsdi_sb_esc(b, s); }
RSDI_PRIVATE void rsdi_sb_q(rsdi_sb *b, rsd_str s) { rsdi_sb_c(b, "'"); rsdi_sb_s(b, s); rsdi_sb_c(b, "'"); }
RSDI_PRIVATE void rsdi_sb_u(rsdi_sb *b, uint64_t v) {
    char t[24];
    int n = 0;
    do { t[sizeof t - 1 - n++] = (char)('0' + v % 10); v /= 10; } while (v);
    rsdi_sb_put(b, t + sizeof t - n, (size_t)n);
}
/* bytes / 1024^3 with one decimal, rounded half up, then " GiB". */
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
                                 bool skip_evicted) {
    int16_t order[RSD_MAX_RESIDENTS];
    uint64_t key[RSD_MAX_RESIDENTS], tmp[RSD_MAX_RESIDENTS];
    int i, n = 0, first = 1;
    bool valid = true;
    for (i = 0; i < f->n_residents && i < RSD_MAX_RESIDENTS; i++) {
        if (p->cls[i].group != i || p->cls[i].is_keep || (skip_evicted && p->cls[i].evict)) continue;
        valid = valid && rsdi_str_valid(f->residents[i].model_id);
        order[n++] = (int16_t)i;
    }
    if (valid && n > 1) {
        rsdi_sort_ids(f, order, key, tmp, n);
    } else { /* facts rsd_decide would refuse (a NULL view): as empty ids, never read */
        rsdi_order_insert(f, order, 0, n);
    }
    for (i = 0; i < n; i++) {
        const rsd_resident_class *c = &p->cls[order[i]];
        if (!first) rsdi_sb_c(b, ", ");
        first = 0;
        rsdi_sb_s(b, f->residents[order[i]].model_id);
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
    n = rsdi_notice_add(p, RSD_MSG_NOT_LOADABLE, -1);
    if (n) n->resident_count = models_listed; /* no detail upstream; the count is for the text */
    return RSD_OK;
}

/* A size for the free notices: GiB with one decimal from 1 GiB, else MiB from 1 MiB, else bytes. */
RSDI_PRIVATE void rsdi_sb_size(rsdi_sb *b, uint64_t bytes) {
    const uint64_t mib = (uint64_t)1 << 20;
    uint64_t tenths;
    if (bytes >= (uint64_t)1 << 30) {
        rsdi_sb_gib(b, bytes);
        return;
    }
    if (bytes < mib) {
        rsdi_sb_u(b, bytes);
        rsdi_sb_c(b, " bytes");
        return;
    }
    tenths = (bytes * 10 + mib / 2) / mib; /* bytes < 2^30: no overflow */
    rsdi_sb_u(b, tenths / 10);
    rsdi_sb_c(b, ".");
    rsdi_sb_u(b, tenths % 10);
    rsdi_sb_c(b, " MiB");
}

/* Why an eviction notice's victim: " (least recently used)" and the like; nothing for
   byte-aware picks. */
RSDI_PRIVATE void rsdi_sb_victim(rsdi_sb *b, const rsd_plan *p, const rsd_notice *n) {
    switch (n->subject >= 0 && n->subject < RSD_MAX_RESIDENTS ? (int)p->cls[n->subject].victim_rule : (int)RSD_VICTIM_NONE) {
    case RSD_VICTIM_LRU: rsdi_sb_c(b, " (least recently used)"); break;
    case RSD_VICTIM_UNUSED: rsdi_sb_c(b, " (no use of it is known)"); break;
    case RSD_VICTIM_BY_ID: rsdi_sb_c(b, " (no last use is known: first by id)"); break;
    default: break;
    }
}

/* The operator messages, in rsd_notice_msg order (NONE has none: the kind's text).
   A template is literal text with these insertions:
     %K the keep quoted, %k the keep bare, %T the target quoted, %S the subject quoted,
     %v why the subject was the victim, %R the notice's role phrase,
     %O the other residents with roles, %o without, %e without the evicted ones,
     %B the blocked models with their role phrases,
     %uF a number, %gF GiB with one decimal, %zF a free-notice size, where F names the
     notice field: 0 requested_context, 1 model_max_context, 2 load_context,
     3 resident_count, 4 max_instances, 5 resident_vram_bytes, 6 resident_total_bytes,
     7 freed_vram_bytes, 8 keep_bytes, 9 free_bytes, A capacity_bytes. */
static const char *const rsdi_notice_text[RSD_MSG_NUM] = {
    NULL,
    "context length %u0 exceeds %k's %u1-token limit on %T; lower the context window to avoid a "
    "truncated or split load.",
    "model %S on %T is split across CPU and GPU (%g5 of %g6 on GPU); expect slow generation.",
    "%T holds %u3 models (%O alongside %K) above its %u4-instance capacity; unload one or raise "
    "the server's limit.",
    "%T serves %K alongside %O. residency leaves co-resident models loaded; keep the setup only "
    "while weights and KV caches fit in GPU memory.",
    "loading %K alongside %o on %T (%u3/%u4 instances).",
    "cannot load pinned %K on %T: it would evict %B that settings still reference, and a pinned "
    "model is never evicted, so the configured model could not return. Unload one manually, unpin "
    "%K on the server, or raise the server's max instances.",
    "cannot load %K on %T: all %u4 instance slots hold pinned models (%o). Unload one manually or "
    "raise the server's max instances.",
    "evicting %S%v from %T to make room for %K even though settings still reference it as %R: "
    "every slot is taken and no unprotected resident is left. Another profile pointed at it will "
    "reload it.",
    "evicting residency-loaded model %S%v from %T to free a slot for %K.",
    "swapping resident %S%v for requested %K on %T (residency did not load it; recorded transition "
    "instead of a silent unload; set RESIDENCY=observe or mark the target user-managed to forbid "
    "swaps).",
    "loading %K alongside %e: context clamped %u0 to %u2 tokens",
    "%T does not serve %K; it lists %u3 model(s). Residency left the target untouched. Fix the wire "
    "model id in settings, or add the preset to the server.",
    "%K needs %g8 on %T, and only %g9 of %gA can be freed without evicting a protected model; "
    "residency evicts no more than without sizes, and the load may fail or spill to CPU.",
    "unloading residency-loaded model %S%v from %T to free memory (%z7 of the %z9 asked).",
    "only %z7 of the %z9 asked can be freed on %T: the rest is held by models residency did not "
    "load, protected ones, or ones whose size the server does not list."};

/* The blocked models of a decline, each with its role phrase. */
RSDI_PRIVATE void rsdi_sb_blocked(rsdi_sb *b, const rsd_facts *f, const rsd_plan *p) {
    int k;
    for (k = 0; k < p->n_blocked && k < RSD_MAX_RESIDENTS; k++) {
        int g = p->blocked[k];
        if (g < 0 || g >= f->n_residents) continue;
        if (k) rsdi_sb_c(b, ", ");
        rsdi_sb_q(b, f->residents[g].model_id);
        rsdi_sb_c(b, " (");
        rsdi_sb_c(b, rsd_role_phrase(p->cls[g].role));
        rsdi_sb_c(b, ")");
    }
}

/* rsd_notice_format reads the numbers by offset: a notice's offsets fit a byte, the counts
   are 32 bits and the byte sizes 64. */
typedef char rsdi_notice_fields_check[(sizeof(rsd_notice) < 256 && sizeof(((rsd_notice *)0)->max_instances) == 4 &&
                                       sizeof(((rsd_notice *)0)->resident_vram_bytes) == 8) ? 1 : -1];

RSD_API int rsd_notice_format(const rsd_facts *f, const rsd_plan *p, const rsd_notice *n,
                              char *buf, size_t cap) {
    rsdi_sb b;
    /* the fields %u, %g and %z name, 0..A: five 32-bit counts, then six 64-bit byte sizes */
    static const uint8_t field[11] = {
        offsetof(rsd_notice, requested_context), offsetof(rsd_notice, model_max_context),
        offsetof(rsd_notice, load_context), offsetof(rsd_notice, resident_count),
        offsetof(rsd_notice, max_instances), offsetof(rsd_notice, resident_vram_bytes),
        offsetof(rsd_notice, resident_total_bytes), offsetof(rsd_notice, freed_vram_bytes),
        offsetof(rsd_notice, keep_bytes), offsetof(rsd_notice, free_bytes), offsetof(rsd_notice, capacity_bytes)};
    const char *t, *lit;
    if (!f || !p || !n || (!buf && cap)) return RSD_ERR_ARG;
    if (f->n_residents < 0 || f->n_residents > RSD_MAX_RESIDENTS || (f->n_residents && !f->residents))
        return RSD_ERR_ARG;
    if (n->subject >= f->n_residents || n->subject < -1) return RSD_ERR_ARG;
    rsdi_sb_init(&b, buf, cap);
    if (n->observe_only) rsdi_sb_c(&b, "observe-only, nothing done: ");
    t = (int)n->msg > 0 && (int)n->msg < (int)RSD_MSG_NUM ? rsdi_notice_text[n->msg] : NULL;
    if (!t) t = rsd_notice_kind_str(n->kind); /* its text has no '%' */
    while (*t) {
        char c;
        uint64_t x;
        for (lit = t; *t && *t != '%'; t++) {}
        rsdi_sb_put(&b, lit, (size_t)(t - lit));
        if (!*t) break;
        c = t[1];
        t += 2;
        switch (c) {
        case 'K': rsdi_sb_q(&b, f->keep); break;
        case 'k': rsdi_sb_s(&b, f->keep); break;
        case 'T': rsdi_sb_q(&b, f->target_id); break;
        case 'S': rsdi_sb_q(&b, n->subject >= 0 ? f->residents[n->subject].model_id : rsd_str_c("")); break;
        case 'v': rsdi_sb_victim(&b, p, n); break;
        case 'R': rsdi_sb_c(&b, rsd_role_phrase(n->role)); break;
        case 'O': rsdi_sb_others(&b, f, p, true, false); break;
        case 'o': rsdi_sb_others(&b, f, p, false, false); break;
        case 'e': rsdi_sb_others(&b, f, p, false, true); break;
        case 'B': rsdi_sb_blocked(&b, f, p); break;
        default: { /* u, g, z: a field follows */
            int k = *t <= '9' ? *t - '0' : *t - 'A' + 10;
            const char *at = (const char *)n + field[k];
            if (k < 5) {
                uint32_t x32;
                memcpy(&x32, at, sizeof x32);
                x = x32;
            } else {
                memcpy(&x, at, sizeof x);
            }
            t++;
            if (c == 'u') rsdi_sb_u(&b, x);
            else if (c == 'g') rsdi_sb_gib(&b, x);
            else rsdi_sb_size(&b, x);
            break;
        }
        }
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

RSD_API bool rsd_env_known(const char *env_value) {
    static const char *const managed[] = {"on", "1", "true", "managed"};
    rsd_str v = rsdi_str_trim(rsd_str_c(env_value));
    size_t i;
    if (!v.len || rsd_env_observe(env_value)) return true;
    for (i = 0; i < sizeof managed / sizeof managed[0]; i++)
        if (rsdi_ieq_c(v, managed[i])) return true;
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

/* The root-URL rule, the one place it is written: the path without trailing '/', then
   without one trailing "/v1", then without trailing '/' again. */
RSDI_PRIVATE rsd_str rsdi_root_path(rsd_str p) {
    while (p.len && p.ptr[p.len - 1] == '/') p.len--;
    if (p.len >= 3 && memcmp(p.ptr + p.len - 3, "/v1", 3) == 0) p.len -= 3;
    while (p.len && p.ptr[p.len - 1] == '/') p.len--;
    return p;
}

/* ASCII case-insensitive prefix test. */
RSDI_PRIVATE bool rsdi_iprefix(rsd_str s, const char *lit) {
    size_t n = strlen(lit);
    rsd_str h;
    if (s.len < n) return false;
    h.ptr = s.ptr;
    h.len = n;
    return rsdi_ieq_c(h, lit);
}

RSD_API int rsd_root_url(rsd_str url, char *out, size_t cap) {
    rsd_str s;
    const char *scheme = "";
    size_t sl, need;
    if ((!out && cap) || !rsdi_str_valid(url)) return RSD_ERR_ARG;
    if (cap) out[0] = '\0';
    s = rsdi_str_trim(url);
    if (s.len && (memchr(s.ptr, '?', s.len) || memchr(s.ptr, '#', s.len))) return RSD_ERR_URL;
    s = rsdi_root_path(s);
    if (rsdi_iprefix(s, "ws://")) { scheme = "http://"; s.ptr += 5; s.len -= 5; }
    else if (rsdi_iprefix(s, "wss://")) { scheme = "https://"; s.ptr += 6; s.len -= 6; }
    if (!s.len) return RSD_ERR_URL;
    sl = strlen(scheme);
    need = sl + s.len;
    if (need >= cap || need > 0x7FFFFFFF) return RSD_ERR_BUFFER;
    memcpy(out, scheme, sl);
    memcpy(out + sl, s.ptr, s.len);
    out[need] = '\0';
    return (int)need;
}

/* Appends n bytes of p to out[*o] (lower-cased when lower); when they do not fit, *o
   becomes cap and every later append fails too. */
RSDI_PRIVATE void rsdi_key_put(char *out, size_t cap, size_t *o, const char *p, size_t n, bool lower) {
    size_t i;
    if (n >= cap || *o >= cap - n) {
        *o = cap;
        return;
    }
    for (i = 0; i < n; i++) out[(*o)++] = lower ? rsdi_ascii_lower(p[i]) : p[i];
}

/* One normalisation pass; rsd_target_key_normalise repeats it to a fixed point. */
RSDI_PRIVATE int rsdi_key_norm1(rsd_str raw, char *out, size_t cap) {
    size_t i, o = 0, sb, se = 0, hb, he, pe, colon;
    rsd_str sch, path;
    const char *s, *def = NULL;
    bool has_scheme = false;
    if (!out || !rsdi_str_valid(raw)) return RSD_ERR_ARG;
    raw = rsdi_str_trim(raw);
    s = raw.ptr;
    for (i = 0; i + 2 < raw.len; i++)
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') { has_scheme = true; se = i; break; }
    if (!has_scheme) { /* a plain key: only trailing '/' dropped */
        while (raw.len && s[raw.len - 1] == '/') raw.len--;
        rsdi_key_put(out, cap, &o, s, raw.len, false);
    } else {
        for (sb = se; sb > 0 && s[sb - 1] != '|'; sb--) {} /* the scheme follows a "runtime|" prefix */
        sch.ptr = s + sb;
        sch.len = se - sb;
        rsdi_key_put(out, cap, &o, s, sb, true);
        if (rsdi_ieq_c(sch, "http") || rsdi_ieq_c(sch, "ws")) { rsdi_key_put(out, cap, &o, "http://", 7, false); def = "80"; }
        else if (rsdi_ieq_c(sch, "https") || rsdi_ieq_c(sch, "wss")) { rsdi_key_put(out, cap, &o, "https://", 8, false); def = "443"; }
        else rsdi_key_put(out, cap, &o, s + sb, se + 3 - sb, true);
        hb = se + 3;
        for (he = hb; he < raw.len && s[he] != '/' && s[he] != '?' && s[he] != '#'; he++) {}
        /* a port: digits after the last ':' of a plain host or after a [v6] literal */
        colon = he;
        for (i = he; i > hb; i--)
            if (s[i - 1] == ':' || s[i - 1] == ']') { colon = s[i - 1] == ':' ? i - 1 : he; break; }
        if (colon < he) {
            for (i = hb; i < colon && s[colon - 1] != ']'; i++)
                if (s[i] == ':') colon = he; /* an unbracketed v6 text: no port */
            for (i = colon + 1; i < he; i++)
                if (s[i] < '0' || s[i] > '9') colon = he;
            if (colon + 1 == he) colon = he;
        }
        rsdi_key_put(out, cap, &o, s + hb, colon - hb, true);
        if (colon < he) {
            size_t d = colon + 1;
            while (d + 1 < he && s[d] == '0') d++; /* ":08080" is ":8080" */
            if (!def || he - d != strlen(def) || memcmp(s + d, def, he - d) != 0)
                {
                rsdi_key_put(out, cap, &o, ":", 1, false);
                rsdi_key_put(out, cap, &o, s + d, he - d, false);
            }
        }
        for (pe = he; pe < raw.len && s[pe] != '?' && s[pe] != '#'; pe++) {} /* query, fragment dropped */
        path.ptr = s + he;
        path.len = pe - he;
        for (i = path.len + 1; path.len < i;) { /* every trailing "/v1", as passes would */
            i = path.len;
            path = rsdi_root_path(path);
        }
        rsdi_key_put(out, cap, &o, path.ptr, path.len, false);
    }
    if (cap == 0 || o >= cap) return RSD_ERR_BUFFER;
    out[o] = '\0';
    return (int)o;
}

RSD_API int rsd_target_key_normalise(rsd_str raw, char *out, size_t cap) {
    char tmp[RSD_TARGET_KEY_MAX];
    int r, k, prev;
    rsd_str cur;
    if (!out || !rsdi_str_valid(raw)) return RSD_ERR_ARG;
    r = rsdi_key_norm1(raw, out, cap);
    cur.ptr = out;
    /* Stripping can expose more to strip ("a:80 /"): repeat until stable, so
       the result is idempotent. Every pass that changes the key shortens it;
       each reads out and writes tmp, so a key that does not come within tmp
       is refused rather than returned unsettled. */
    for (k = 0; r > 0 && k < RSD_TARGET_KEY_MAX; k++) {
        prev = r;
        cur.len = strlen(out); /* up to a NUL byte, as the key is read back */
        r = rsdi_key_norm1(cur, tmp, sizeof tmp);
        if (r < 0) return r;
        if (r == prev && memcmp(tmp, out, (size_t)r) == 0) break;
        memcpy(out, tmp, (size_t)r + 1);
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

/* The entry is in use and for (k, model m; NULL = any model of k). */
RSDI_PRIVATE bool rsdi_cache_is(const rsd_cache_entry *e, const char *k, const char *m) {
    return e->used && strcmp(e->text, k) == 0 && (!m || strcmp(e->text + e->model_at, m) == 0);
}

/* Appends one id to the entry's text: its offset, or -1 when the text is full. */
RSDI_PRIVATE int rsdi_cache_text(rsd_cache_entry *e, const char *id) {
    size_t n = strlen(id), at = e->text_len;
    if (n >= sizeof e->text - at) return -1;
    memcpy(e->text + at, id, n + 1);
    e->text_len = (uint16_t)(at + n + 1);
    return (int)at;
}

/* LM Studio's wire id and model key of a stored entry ("" = the model itself); false when
   they do not fit in its text. */
RSDI_PRIVATE bool rsdi_cache_ids(rsd_cache_entry *e, const char *wire, const char *mkey) {
    int w = wire[0] ? rsdi_cache_text(e, wire) : (int)e->wire_at;
    int k = mkey[0] ? rsdi_cache_text(e, mkey) : (int)e->mkey_at;
    if (w < 0 || k < 0) return false;
    e->wire_at = (uint16_t)w;
    e->mkey_at = (uint16_t)k;
    return true;
}

RSDI_PRIVATE uint64_t rsdi_cache_ttl(const rsd_decision_cache *c) {
    return c->ttl_ms ? c->ttl_ms : (uint64_t)RSD_DECISION_CACHE_TTL_MS;
}

RSDI_PRIVATE bool rsdi_cache_live(const rsd_decision_cache *c, const rsd_cache_entry *e, uint64_t now_ms,
                                  uint64_t generation) {
    return e->used && e->generation == generation && now_ms >= e->at_ms &&
           now_ms - e->at_ms < rsdi_cache_ttl(c);
}

/* rsd_cache_lookup with k already normalised and m a valid model id (the ensurer, which
   keeps its target's key). */
RSDI_PRIVATE int rsdi_cache_lookup_norm(rsd_decision_cache *c, const char *k, const char *m, uint64_t now_ms,
                                        uint64_t generation, rsd_cache_hit *hit) {
    int i;
    for (i = 0; i < RSD_DECISION_CACHE_MAX; i++) {
        rsd_cache_entry *e = &c->entries[i];
        if (!rsdi_cache_is(e, k, m)) continue;
        if (!rsdi_cache_live(c, e, now_ms, generation)) {
            e->used = false; /* expired or stale generation */
            return 0;
        }
        e->used_ms = now_ms;
        if (hit) {
            hit->decision = e->decision;
            hit->reason = e->reason;
            hit->age_ms = now_ms - e->at_ms;
            hit->outcome = e->outcome ? e->outcome
                         : e->decision == RSD_DECISION_OBSERVE ? (int)RSD_OUTCOME_OBSERVED
                         : e->decision == RSD_DECISION_DECLINE ? (int)RSD_OUTCOME_DECLINED : (int)RSD_OUTCOME_RESIDENT;
            hit->error = e->error;
            hit->keep_resident = e->outcome ? e->keep_resident : hit->outcome == (int)RSD_OUTCOME_RESIDENT;
            hit->tier = e->tier;
            hit->state = e->state;
            hit->wire_id = e->text + e->wire_at;
            hit->model_key = e->text + e->mkey_at;
        }
        return 1;
    }
    return 0;
}

RSD_API int rsd_cache_lookup(rsd_decision_cache *c, rsd_str target_key, rsd_str model, uint64_t now_ms,
                             uint64_t generation, rsd_cache_hit *hit) {
    char k[RSD_TARGET_KEY_MAX], m[RSD_MODEL_ID_MAX];
    int r;
    if (!c) return RSD_ERR_ARG;
    if ((r = rsdi_cache_keys(target_key, model, k, m)) < 0) return r;
    return rsdi_cache_lookup_norm(c, k, m, now_ms, generation, hit);
}

/* The slot for (k, m), stored now with decision d (a successful load leaves the keep
   resident); the caller may add a reconcile's fields. */
RSDI_PRIVATE rsd_cache_entry *rsdi_cache_put(rsd_decision_cache *c, const char *k, const char *m, rsd_decision d,
                                             rsd_reason why, uint64_t now_ms, uint64_t generation) {
    int i, slot = -1;
    if (d == RSD_DECISION_LOAD || d == RSD_DECISION_LOAD_AFTER_EVICT) d = RSD_DECISION_ALREADY_RESIDENT;
    for (i = 0; i < RSD_DECISION_CACHE_MAX; i++) /* same key: overwrite */
        if (rsdi_cache_is(&c->entries[i], k, m)) {
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
    memset(&c->entries[slot], 0, sizeof c->entries[slot]);
    (void)rsdi_cache_text(&c->entries[slot], k); /* both fit (RSD_DECISION_CACHE_TEXT) */
    c->entries[slot].model_at = (uint16_t)rsdi_cache_text(&c->entries[slot], m);
    c->entries[slot].wire_at = c->entries[slot].mkey_at = (uint16_t)(c->entries[slot].text_len - 1); /* "" */
    c->entries[slot].at_ms = now_ms;
    c->entries[slot].used_ms = now_ms;
    c->entries[slot].generation = generation;
    c->entries[slot].decision = d;
    c->entries[slot].reason = why;
    c->entries[slot].used = true;
    return &c->entries[slot];
}

RSD_API int rsd_cache_store(rsd_decision_cache *c, rsd_str target_key, rsd_str model, const rsd_plan *plan,
                            bool mutation_failed, uint64_t now_ms, uint64_t generation) {
    char k[RSD_TARGET_KEY_MAX], m[RSD_MODEL_ID_MAX];
    rsd_decision d;
    int r;
    if (!c || !plan) return RSD_ERR_ARG;
    if ((r = rsdi_cache_keys(target_key, model, k, m)) < 0) return r;
    d = plan->decision;
    if (mutation_failed || d == RSD_DECISION_NONE || (int)d < 0 || (int)d >= (int)RSD_DECISION_NUM ||
        plan->reason == RSD_REASON_PROBE_FAILED)
        return 0; /* never cache a failed or degraded reconcile */
    (void)rsdi_cache_put(c, k, m, d, plan->reason, now_ms, generation);
    return 1;
}

RSD_API int rsd_cache_invalidate(rsd_decision_cache *c, rsd_str target_key, rsd_str model) {
    char k[RSD_TARGET_KEY_MAX], m[RSD_MODEL_ID_MAX];
    int i, r, n = 0;
    if (!c) return RSD_ERR_ARG;
    if ((r = rsdi_cache_keys(target_key, model, k, m)) < 0) return r;
    for (i = 0; i < RSD_DECISION_CACHE_MAX; i++) {
        rsd_cache_entry *e = &c->entries[i];
        if (!rsdi_cache_is(e, k, m[0] ? m : NULL)) continue;
        e->used = false;
        n++;
    }
    return n;
}
/* ---- context fit: the clamp for loads beside other models ---- */
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

/* KV bytes llama.cpp allocates for ctx tokens over seq streams: pad256(ceil(ctx / seq))
   cells each, per_token bytes a cell; UINT64_MAX past 2^64. */
RSDI_PRIVATE uint64_t rsdi_fit_kv(uint64_t per_token, uint32_t ctx, uint32_t seq) {
    uint64_t cells = ((uint64_t)ctx + seq - 1) / seq;
    cells = (cells + RSD_FIT_ROUND - 1) / RSD_FIT_ROUND * RSD_FIT_ROUND * seq;
    return per_token && cells > UINT64_MAX / per_token ? UINT64_MAX : cells * per_token;
}

RSD_API int rsd_fit_context_bytes(const rsd_fit_bytes_desc *d, rsd_fit_bytes *out) {
    uint64_t room, block, blocks, fit, kv;
    uint32_t seq, floor_;
    if (!d || !out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    seq = d->n_seq ? d->n_seq : 1;
    floor_ = d->floor ? d->floor : (uint32_t)RSD_FIT_FLOOR_DEFAULT;
    out->context = out->fits = d->requested;
    if (!d->requested || d->n_other_residents <= 0) {
        out->kv_bytes = d->requested ? rsdi_fit_kv(d->kv_bytes_per_token, d->requested, seq) : 0;
        return RSD_OK;
    }
    if (!d->kv_bytes_per_token) { /* no figure: the fixed ceiling */
        out->context = out->fits = rsd_fit_context(d->requested, d->n_other_residents, d->ceiling);
        out->clamped = out->context < d->requested;
        return RSD_OK;
    }
    out->by_bytes = true;
    room = d->free_bytes > d->load_bytes ? d->free_bytes - d->load_bytes : 0;
    /* one block: 256 cells in each of seq streams (past 2^64: not even one fits) */
    block = d->kv_bytes_per_token > UINT64_MAX / ((uint64_t)RSD_FIT_ROUND * seq)
                ? 0 : d->kv_bytes_per_token * RSD_FIT_ROUND * seq;
    blocks = block ? room / block : 0;
    fit = blocks > 0xFFFFFFFFu / ((uint64_t)RSD_FIT_ROUND * seq) ? 0xFFFFFFFFu : blocks * RSD_FIT_ROUND * seq;
    kv = rsdi_fit_kv(d->kv_bytes_per_token, d->requested, seq);
    if (kv != UINT64_MAX && kv <= room) fit = d->requested;
    out->fits = fit < d->requested ? (uint32_t)fit : d->requested;
    if (out->fits >= d->requested) out->context = d->requested;
    else if (out->fits >= floor_) out->context = out->fits;
    else {
        out->context = floor_ < d->requested ? floor_ : d->requested;
        out->floored = true;
    }
    out->clamped = out->context < d->requested;
    out->kv_bytes = rsdi_fit_kv(d->kv_bytes_per_token, out->context, seq);
    return RSD_OK;
}
/* ==== reconcile end ======================================================= */

/* ==== >>payload =========================================================== */
/* ---- >>payload:router ---- */
RSD_API const char *rsd_model_state_str(int state) {
    RSDI_ENUM_STR(RSD_MODEL_STATES, RSD_MODEL_STATE_NUM, state);
}

RSD_API bool rsd_model_state_resident(int state) {
    return state == RSD_MODEL_LOADING || state == RSD_MODEL_LOADED || state == RSD_MODEL_SLEEPING;
}

/* The payload layer: helpers every runtime parser (router, Ollama, LM Studio) uses. */

/* The one id rule of every payload parser and request body: a usable model, alias, tag
   or instance id is 1..RSD_MODEL_ID_MAX-1 bytes (decoded) without a NUL byte, so it is
   also a C string. Other control bytes are kept: a server may list such a model, and it
   stays manageable; text that reaches a terminal or a log escapes them (rsd_text_escape). */
RSDI_PRIVATE bool rsdi_id_ok(rsd_str s) {
    return s.ptr && s.len > 0 && s.len < (size_t)RSD_MODEL_ID_MAX && !memchr(s.ptr, '\0', s.len);
}

/* Where the copied strings of one result go; used is restored to drop an entry. */
typedef struct rsdi_pl_arena {
    char *buf;
    size_t cap;
    size_t used;
} rsdi_pl_arena;

/* What rsdi_pl_copy requires of a string: any text, an id (rsdi_id_ok), or an id once
   the spaces around it are trimmed (LM Studio's keys and instance ids). */
enum { RSDI_PL_TEXT = 0, RSDI_PL_ID = 1, RSDI_PL_ID_TRIM = 2 };

/* String token i decoded (JSON escapes undone) and copied into the arena, NUL-terminated
   there: parsed results never point into the body. rule is an RSDI_PL_* above; the
   length limit of an id applies to the text as listed. 1 = copied (*out set), 0 = not
   a string or not a usable id, -1 = the arena cannot hold it (the caller marks its
   result truncated). *out is "" unless 1. */
RSDI_PRIVATE int rsdi_pl_copy(const rsd_json_doc *d, int i, rsdi_pl_arena *a, int rule, rsd_str *out) {
    size_t n = 0;
    rsd_str v;
    int r;
    out->ptr = "";
    out->len = 0;
    if (rsd_json_type_of(d, i) != RSD_JSON_STRING) return 0;
    if (!a->buf || a->used >= a->cap) r = rsd_json_str(d, i, NULL, 0, &n);
    else r = rsd_json_str(d, i, a->buf + a->used, a->cap - a->used, &n);
    if (rule != RSDI_PL_TEXT && (n == 0 || n >= (size_t)RSD_MODEL_ID_MAX)) return 0;
    if (r == RSD_ERR_BUFFER) return -1;
    if (r != RSD_OK) return 0;
    v.ptr = a->buf + a->used;
    v.len = n;
    a->used += n + 1;
    if (rule == RSDI_PL_ID_TRIM) v = rsdi_str_trim(v);
    if (rule != RSDI_PL_TEXT && !rsdi_id_ok(v)) {
        a->used -= n + 1;
        return 0;
    }
    *out = v;
    return 1;
}

/* Non-negative integral number (an integer token, or a double without fraction
   below 2^63, e.g. 6.5e9); false for anything else. */
RSDI_PRIVATE bool rsdi_pl_u64(const rsd_json_doc *d, int i, uint64_t *out) {
    int64_t v;
    double x;
    if (rsd_json_type_of(d, i) != RSD_JSON_NUMBER) return false;
    if (rsd_json_int64(d, i, &v) == RSD_OK) {
        if (v < 0) return false;
        *out = (uint64_t)v;
        return true;
    }
    if (rsd_json_double(d, i, &x) != RSD_OK) return false;
    if (!(x >= 0.0) || x >= 9223372036854775808.0 || x != (double)(int64_t)x) return false;
    *out = (uint64_t)x;
    return true;
}

/* rsdi_pl_u64 limited to 1..UINT32_MAX (a context length); false otherwise. */
RSDI_PRIVATE bool rsdi_pl_u32_pos(const rsd_json_doc *d, int i, uint32_t *out) {
    uint64_t v;
    if (!rsdi_pl_u64(d, i, &v) || v == 0 || v > 0xFFFFFFFFu) return false;
    *out = (uint32_t)v;
    return true;
}

/* Decoded text of string token i into dst[cap] (cap >= 1): cut at a UTF-8 boundary
   when it does not fit, control bytes replaced by ' '. False if i is no string. */
RSDI_PRIVATE bool rsdi_pl_text(const rsd_json_doc *d, int i, char *dst, size_t cap) {
    size_t n = 0, k;
    dst[0] = '\0';
    if (rsd_json_type_of(d, i) != RSD_JSON_STRING) return false;
    if (rsd_json_str(d, i, dst, cap, &n) == RSD_ERR_BUFFER) {
        n = cap - 1;
        k = n;
        while (k > 0 && ((unsigned char)dst[k - 1] & 0xC0) == 0x80) k--;
        if (k > 0 && (unsigned char)dst[k - 1] >= 0xC0) {
            unsigned char lead = (unsigned char)dst[k - 1];
            size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
            if (n - (k - 1) < need) n = k - 1;
        }
        dst[n] = '\0';
    }
    for (k = 0; k < n; k++)
        if ((unsigned char)dst[k] < 0x20 || (unsigned char)dst[k] == 0x7F) dst[k] = ' ';
    return true;
}

/* Fill *out from the "error" member of object obj; true when one is present
   (a non-empty string, an object, or any other non-null, non-false value). An object's
   members are read by expanding it (d may be a top-level document). */
RSDI_PRIVATE bool rsdi_pl_error(const rsd_json_doc *d, int obj, rsd_server_error *out) {
    rsd_json_doc sub;
    int e = rsd_json_find(d, obj, "error"), m;
    rsd_json_type t = rsd_json_type_of(d, e);
    memset(out, 0, sizeof *out);
    if (e < 0 || t == RSD_JSON_NULL) return false;
    if (t == RSD_JSON_BOOL && d->src[d->toks[e].start] == 'f') return false;
    if (t == RSD_JSON_STRING) {
        if (d->toks[e].end == d->toks[e].start) return false;
        (void)rsdi_pl_text(d, e, out->message, sizeof out->message);
    } else if (t == RSD_JSON_OBJECT && rsd_json_expand(d, e, &sub) == RSD_OK) { /* the object's own tokens */
        (void)rsdi_pl_text(&sub, rsd_json_find(&sub, 0, "message"), out->message, sizeof out->message);
        (void)rsdi_pl_text(&sub, rsd_json_find(&sub, 0, "type"), out->type, sizeof out->type);
        m = rsd_json_find(&sub, 0, "code");
        if (rsd_json_type_of(&sub, m) == RSD_JSON_NUMBER) {
            rsd_str v = rsd_json_view(&sub, m);
            size_t n = v.len < sizeof out->code - 1 ? v.len : sizeof out->code - 1;
            memcpy(out->code, v.ptr, n);
            out->code[n] = '\0';
        } else {
            (void)rsdi_pl_text(&sub, m, out->code, sizeof out->code);
        }
    }
    out->present = true;
    return true;
}

/* Validate all of body and keep the tokens of its top level in d (the caller's tokens):
   every payload parser starts here, then reads a nested member with rsd_json_expand and
   a list one element at a time with rsd_json_each, so the tokens held at once are the
   top level plus one member or entry, however long the list. */
RSDI_PRIVATE int rsdi_pl_parse(rsd_json_doc *d, const char *body, size_t len, rsd_json_tok *toks,
                               uint32_t cap) {
    if ((!body && len) || !toks || cap == 0) return RSD_ERR_ARG;
    return rsd_json_parse_top(d, body ? body : "", len, toks, cap);
}

/* A listing's reader: the splitter's callback takes each list entry (or a list's start),
   then end takes the splitter's verdict and the kept top level. */
typedef int (*rsdi_pl_end_fn)(void *ctx, int rc, const rsd_json_doc *top);

/* The top level of a body parsed whole, without its lists, is kept here (on the stack). */
enum { RSDI_PL_TOP_BYTES = 2048 };

/* A whole body through a listing's reader: one piece, then the end. */
RSDI_PRIVATE int rsdi_pl_whole(const char *body, size_t len, rsd_json_tok *toks, uint32_t cap, rsd_json_split_fn fn,
                               rsdi_pl_end_fn end, void *ctx) {
    char top_buf[RSDI_PL_TOP_BYTES];
    rsd_json_split sp;
    rsd_json_doc top;
    int rc;
    if ((!body && len) || !toks || cap == 0) return end(ctx, RSD_ERR_ARG, NULL);
    rsd_json_split_init(&sp, top_buf, sizeof top_buf, toks, cap, fn, ctx);
    sp.whole = 1; /* only the top level is kept: an entry of any size is read in the body */
    (void)rsd_json_split_feed(&sp, body ? body : "", len);
    rc = rsd_json_split_end(&sp, &top);
    if (rc == RSD_ERR_BODY_TOO_LARGE) { /* the top level over RSDI_PL_TOP_BYTES: a broken body says why it is broken */
        rsd_json_doc d;
        int v = rsd_json_parse_top(&d, body ? body : "", len, toks, cap);
        if (v < 0) rc = v;
    }
    return end(ctx, rc, &top);
}

/* The raw key of a list (as the splitter gives it) equals lit, escapes decoded as
   rsd_json_find decodes them. */
RSDI_PRIVATE bool rsdi_pl_key(rsd_str key, const char *lit, size_t n) {
    rsd_json_doc d;
    rsd_json_tok t;
    if (!key.len || !memchr(key.ptr, '\\', key.len)) return key.len == n && memcmp(key.ptr, lit, n) == 0;
    memset(&d, 0, sizeof d);
    memset(&t, 0, sizeof t);
    t.type = RSD_JSON_STRING;
    t.flags = RSD_JSON_F_ESCAPED;
    t.end = (uint32_t)key.len;
    d.src = key.ptr;
    d.len = key.len;
    d.toks = &t;
    d.count = d.cap = 1;
    return rsdi_json_eq(&d, &t, lit, n);
}
#define RSDI_PL_KEY(key, lit) rsdi_pl_key((key), lit, sizeof(lit) - 1)

/* Whether s is the id or one of the n aliases. */
RSDI_PRIVATE bool rsdi_names(rsd_str s, rsd_str id, const rsd_str *aliases, int n) {
    int a;
    if (rsd_str_eq(s, id)) return true;
    for (a = 0; a < n && a < RSD_MAX_ALIASES; a++)
        if (rsd_str_eq(s, aliases[a])) return true;
    return false;
}

/* Name k of a listed model: 0 the id, then its aliases, then its tags, each one past the
   NUL of the one before it in the arena. An empty view past the last. */
RSDI_PRIVATE rsd_str rsdi_listed_name(const rsd_listed_model *m, int k) {
    rsd_str v;
    int j;
    v.ptr = "";
    v.len = 0;
    if (!m || !m->id.ptr || k < 0 || k > (int)m->n_aliases + (int)m->n_tags) return v;
    v = m->id;
    for (j = 0; j < k; j++) {
        v.ptr += v.len + 1;
        v.len = strlen(v.ptr);
    }
    return v;
}

RSD_API rsd_str rsd_listed_alias(const rsd_listed_model *m, int k) {
    return rsdi_listed_name(m, m && k >= 0 && k < (int)m->n_aliases ? 1 + k : -1);
}

RSD_API rsd_str rsd_listed_tag(const rsd_listed_model *m, int k) {
    return rsdi_listed_name(m, m && k >= 0 && k < (int)m->n_tags ? 1 + (int)m->n_aliases + k : -1);
}

/* The aliases and tags of m as views (arrays of RSD_MAX_ALIASES and RSD_MAX_TAGS), in one
   walk; either may be NULL. */
RSDI_PRIVATE void rsdi_listed_views(const rsd_listed_model *m, rsd_str *aliases, rsd_str *tags) {
    rsd_str v = m->id;
    int j, n = (int)m->n_aliases + (int)m->n_tags;
    for (j = 0; j < n; j++) {
        v.ptr += v.len + 1;
        v.len = strlen(v.ptr);
        if (j < (int)m->n_aliases) {
            if (aliases) aliases[j] = v;
        } else if (tags) {
            tags[j - (int)m->n_aliases] = v;
        }
    }
}

/* Whether s is the id or an alias of listed model m. */
RSDI_PRIVATE bool rsdi_listed_names(rsd_str s, const rsd_listed_model *m) {
    rsd_str v = m->id;
    int j;
    if (rsd_str_eq(s, v)) return true;
    for (j = 0; j < (int)m->n_aliases; j++) {
        v.ptr += v.len + 1;
        v.len = strlen(v.ptr);
        if (rsd_str_eq(s, v)) return true;
    }
    return false;
}

RSD_API int rsd_listing_find(const rsd_listing *l, rsd_str name) {
    int i;
    if (!l || !name.len || !name.ptr) return -1;
    for (i = 0; i < l->n && i < l->max_models; i++)
        if (l->models[i].id.ptr && rsdi_listed_names(name, &l->models[i])) return i;
    return -1;
}

/* Reset the header of a listing (entries are written as they are filled). */
RSDI_PRIVATE void rsdi_listing_reset(rsd_listing *l) {
    l->n = 0;
    l->n_seen = 0;
    l->n_skipped = 0;
    l->truncated = false;
    l->has_states = false;
    l->arena_used = 0;
}

RSD_API int rsd_listing_init(rsd_listing *l, rsd_listed_model *models, int max_models, char *arena,
                             size_t arena_bytes) {
    if (!l || !models || !arena || max_models < 1 || arena_bytes < (size_t)RSD_MODEL_ID_MAX) return RSD_ERR_ARG;
    memset(l, 0, sizeof *l);
    l->models = models;
    l->max_models = max_models;
    l->arena = arena;
    l->arena_bytes = arena_bytes;
    return RSD_OK;
}

/* The sizes of a listing desc with its defaults applied; false = invalid. */
RSDI_PRIVATE bool rsdi_listing_sizes(const rsd_listing_desc *d, int *models, size_t *arena) {
    *models = d && d->max_models ? d->max_models : (int)RSD_LISTING_DEFAULT_MODELS;
    *arena = d && d->arena_bytes ? d->arena_bytes : (size_t)*models * RSD_LISTING_ARENA_PER_MODEL;
    if (!(d && d->arena_bytes) && *arena < (size_t)RSD_MODEL_ID_MAX) *arena = RSD_MODEL_ID_MAX; /* one longest id */
    return *models >= 1 && *models <= (1 << 20) && *arena >= (size_t)RSD_MODEL_ID_MAX && *arena <= ((size_t)1 << 30);
}

/* A listing made by rsd_listing_create: the header, its allocator, then the storage. */
typedef struct rsdi_listing_block {
    rsd_listing l;
    rsd_allocator al;
    union { uint64_t u; void *p; double d; } align;
} rsdi_listing_block;

RSD_API size_t rsd_listing_footprint(const rsd_listing_desc *d) {
    int n;
    size_t a;
    if (!rsdi_listing_sizes(d, &n, &a)) return 0;
    return sizeof(rsdi_listing_block) + (size_t)n * sizeof(rsd_listed_model) + a;
}

RSD_API rsd_listing *rsd_listing_create(const rsd_listing_desc *d) {
    rsdi_listing_block *b;
    int n;
    size_t a, bytes = rsd_listing_footprint(d);
    if (!bytes || !rsdi_listing_sizes(d, &n, &a) || rsdi_allocator_check(d ? &d->allocator : NULL) < 0) return NULL;
    if (!(b = (rsdi_listing_block *)rsdi_malloc(d ? &d->allocator : NULL, bytes))) return NULL;
    memset(&b->al, 0, sizeof b->al);
    if (d) b->al = d->allocator;
    (void)rsd_listing_init(&b->l, (rsd_listed_model *)(void *)(b + 1), n,
                           (char *)(void *)(b + 1) + (size_t)n * sizeof(rsd_listed_model), a);
    return &b->l;
}

RSD_API void rsd_listing_destroy(rsd_listing *l) {
    rsdi_listing_block *b = (rsdi_listing_block *)(void *)l;
    if (b) rsdi_free(&b->al, b);
}

/* Copy string token i into the listing's arena as an id (rsdi_pl_copy with the id rule).
   1 = ok (*out set), 0 = unusable id, -1 = arena full. */
RSDI_PRIVATE int rsdi_listing_name(rsd_listing *l, const rsd_json_doc *doc, int i, rsd_str *out) {
    rsdi_pl_arena a;
    int r;
    a.buf = l->arena;
    a.cap = l->arena_bytes;
    a.used = l->arena_used;
    r = rsdi_pl_copy(doc, i, &a, RSDI_PL_ID, out);
    l->arena_used = a.used;
    return r;
}

/* Parse "--ctx-size N" / "-c N" from a status.args array; 0 when absent. */
RSDI_PRIVATE uint32_t rsdi_router_args_ctx(const rsd_json_doc *doc, int args) {
    int k;
    uint32_t ctx = 0;
    if (rsd_json_type_of(doc, args) != RSD_JSON_ARRAY) return 0;
    for (k = rsd_json_child(doc, args); k >= 0; k = rsd_json_next(doc, k)) {
        int v = rsd_json_next(doc, k);
        if (v < 0) break;
        if (RSDI_JSON_EQ(doc, k, "--ctx-size") || RSDI_JSON_EQ(doc, k, "-c")) {
            rsd_str s = rsd_json_view(doc, v);
            uint64_t x = 0;
            size_t j;
            if (rsd_json_type_of(doc, v) != RSD_JSON_STRING || !s.len || s.len > 10) continue;
            for (j = 0; j < s.len && s.ptr[j] >= '0' && s.ptr[j] <= '9'; j++) x = x * 10 + (uint64_t)(s.ptr[j] - '0');
            if (j == s.len && x <= 0xFFFFFFFFu) ctx = (uint32_t)x;
        }
    }
    return ctx;
}

/* One element of a router listing's "data" (its own document, root 0) into *out. */
RSDI_PRIVATE void rsdi_router_entry(void *ctx, const rsd_json_doc *doc) {
    rsd_listing *out = (rsd_listing *)ctx;
    const int e = 0;
    static const char *const keys[] = {"id", "status", "aliases", "tags", "meta"};
    static const uint8_t key_len[] = {2, 6, 7, 4, 4};
    rsd_listed_model *m;
    size_t mark = out->arena_used;
    int mem[5] = {-1, -1, -1, -1, -1}, st, v, k, j, got, id, aliases, tags, meta;
    out->n_seen++;
    if (rsd_json_type_of(doc, e) != RSD_JSON_OBJECT) { out->n_skipped++; return; }
    if (out->n >= out->max_models) { out->truncated = true; return; }
    m = &out->models[out->n];
    memset(m, 0, sizeof *m);
    /* one pass over the members; a later duplicate key replaces an earlier one */
    for (k = rsd_json_child(doc, e); k >= 0; k = rsd_json_next(doc, k))
        for (j = 0; j < 5; j++)
            if (rsdi_json_eqn(doc, k, keys[j], key_len[j])) { mem[j] = k + 1; break; }
    id = mem[0];
    st = mem[1];
    aliases = mem[2];
    tags = mem[3];
    meta = mem[4];
    got = rsdi_listing_name(out, doc, id, &m->id);
    if (got < 0) { out->truncated = true; return; }
    if (got == 0) { out->n_skipped++; return; }
    /* aliases (rules), then tags, each after the one before in the arena (the names an
       entry keeps are contiguous after its id): protecting tags first when over the limit */
    v = aliases;
    if (rsd_json_type_of(doc, v) == RSD_JSON_ARRAY)
        for (k = rsd_json_child(doc, v); k >= 0; k = rsd_json_next(doc, k)) {
            size_t at = out->arena_used;
            rsd_str a;
            if (m->n_aliases >= RSD_MAX_ALIASES) { m->flags |= RSD_LISTED_ALIASES_CUT; break; }
            got = rsdi_listing_name(out, doc, k, &a);
            if (got < 0) { out->truncated = true; break; }
            if (got > 0 && !rsd_str_eq(a, m->id)) m->n_aliases++;
            else out->arena_used = at; /* not kept */
        }
    v = tags;
    if (rsd_json_type_of(doc, v) == RSD_JSON_ARRAY) {
        size_t last = 0;                /* where the last kept tag starts */
        bool protects = false;          /* a kept tag protects */
        for (k = rsd_json_child(doc, v); k >= 0; k = rsd_json_next(doc, k)) {
            size_t at = out->arena_used;
            rsd_str t;
            if (rsd_json_type_of(doc, k) != RSD_JSON_STRING) continue;
            if (m->n_tags >= RSD_MAX_TAGS) m->flags |= RSD_LISTED_TAGS_CUT;
            got = rsdi_listing_name(out, doc, k, &t);
            if (got < 0) { out->truncated = true; break; }
            if (got == 0) continue;
            if (m->n_tags >= RSD_MAX_TAGS) {
                if (!rsdi_tag_protects(t) || protects) {
                    out->arena_used = at; /* not kept */
                    continue;
                }
                memmove(out->arena + last, t.ptr, t.len + 1); /* a protecting tag replaces the last one */
                out->arena_used = last + t.len + 1;
                protects = true;
                continue;
            }
            last = at;
            protects = protects || rsdi_tag_protects(t);
            m->n_tags++;
        }
    }
    if (out->truncated) { out->arena_used = mark; return; }
    /* state */
    v = st;
    if (rsd_json_type_of(doc, st) == RSD_JSON_OBJECT) {
        bool failed = false;
        int64_t code;
        int f = RSDI_JSON_FIND(doc, st, "failed");
        v = RSDI_JSON_FIND(doc, st, "value");
        if (f >= 0 && rsd_json_bool(doc, f, &failed) == RSD_OK && failed) m->failed = true;
        f = RSDI_JSON_FIND(doc, st, "exit_code");
        if (f >= 0 && rsd_json_int64(doc, f, &code) == RSD_OK) {
            m->exit_code = code;
            m->has_exit_code = true;
        }
        m->context_length = rsdi_router_args_ctx(doc, RSDI_JSON_FIND(doc, st, "args"));
        if (!rsdi_pl_u64(doc, RSDI_JSON_FIND(doc, st, "last_used"), &m->last_used_ms)) /* rsd-serve lists it */
            m->last_used_ms = 0;
    }
    /* the value is a state's own name ("unknown" leaves it unknown), or "downloaded" */
    if (rsd_json_type_of(doc, v) == RSD_JSON_STRING) {
#define RSDI_X(n, str) sizeof(str) - 1,
        static const uint8_t state_len[] = {RSD_MODEL_STATES(RSDI_X) 0};
#undef RSDI_X
        for (j = 1; j < (int)RSD_MODEL_STATE_NUM; j++)
            if (rsdi_json_eqn(doc, v, rsd_model_state_str(j), state_len[j])) m->state = (rsd_model_state)j;
    }
    if (RSDI_JSON_EQ(doc, v, "downloaded")) m->state = RSD_MODEL_UNLOADED;
    if (m->state == RSD_MODEL_FAILED) m->failed = true;
    if (m->failed && m->state == RSD_MODEL_UNLOADED) m->state = RSD_MODEL_FAILED;
    if (m->state != RSD_MODEL_UNKNOWN) out->has_states = true;
    /* meta: trained context and file size, when the child reported them */
    v = meta;
    if (rsd_json_type_of(doc, v) == RSD_JSON_OBJECT) {
        uint64_t x;
        if (rsdi_pl_u64(doc, RSDI_JSON_FIND(doc, v, "n_ctx_train"), &x) && x <= 0xFFFFFFFFu) m->max_context = (uint32_t)x;
        if (rsdi_pl_u64(doc, RSDI_JSON_FIND(doc, v, "n_ctx"), &x) && x > 0 && x <= 0xFFFFFFFFu) /* what it runs with */
            m->context_length = (uint32_t)x;
        if (rsdi_pl_u64(doc, RSDI_JSON_FIND(doc, v, "size"), &x)) {
            m->size_bytes = x;
            m->has_size = true;
        }
    }
    out->n++;
}

/* The router's reader: the entries of the last "data" list. */
RSDI_PRIVATE void rsdi_router_list_el(void *ctx, rsd_str key, const rsd_json_doc *el) {
    rsd_listing *out = (rsd_listing *)ctx;
    if (!RSDI_PL_KEY(key, "data")) return;
    if (el) rsdi_router_entry(out, el);
    else rsdi_listing_reset(out); /* a later "data" wins */
}

RSDI_PRIVATE int rsdi_router_list_end(void *ctx, int rc, const rsd_json_doc *top) {
    rsd_listing *out = (rsd_listing *)ctx;
    if (rc < 0 || rsd_json_type_of(top, 0) != RSD_JSON_OBJECT ||
        rsd_json_type_of(top, RSDI_JSON_FIND(top, 0, "data")) != RSD_JSON_ARRAY)
        rsdi_listing_reset(out); /* never a partial list */
    return rc < 0 ? rc : RSD_OK;
}

RSD_API int rsd_router_parse_models(const char *body, size_t len, rsd_json_tok *toks,
                                    uint32_t n_toks, rsd_listing *out) {
    if (!out) return RSD_ERR_ARG;
    rsdi_listing_reset(out);
    if ((!body && len) || !toks || !n_toks || !out->models || !out->arena) return RSD_ERR_ARG;
    return rsdi_pl_whole(body, len, toks, n_toks, rsdi_router_list_el, rsdi_router_list_end, out);
}

RSD_API int rsd_router_parse_props(const char *body, size_t len, rsd_json_tok *toks,
                                   uint32_t n_toks, rsd_router_props *out) {
    rsd_json_doc doc;
    int r, v;
    double x;
    if (!out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    if ((!body && len) || !toks || !n_toks) return RSD_ERR_ARG;
    r = rsdi_pl_parse(&doc, body, len, toks, n_toks);
    if (r < 0) return r;
    if (rsd_json_type_of(&doc, 0) != RSD_JSON_OBJECT) return RSD_OK;
    out->is_router = rsd_json_str_eq(&doc, RSDI_JSON_FIND(&doc, 0, "role"), "router");
    v = RSDI_JSON_FIND(&doc, 0, "max_instances");
    if (rsd_json_type_of(&doc, v) != RSD_JSON_NUMBER || rsd_json_double(&doc, v, &x) != RSD_OK) return RSD_OK;
    if (x >= 1.0) out->max_instances = x >= 2147483647.0 ? 0x7FFFFFFFu : (uint32_t)x; /* floor */
    else if (x == 0.0 && out->is_router) out->unlimited = true;
    return RSD_OK;
}

RSD_API int rsd_router_parse_slots(const char *body, size_t len, rsd_json_tok *toks, uint32_t n_toks,
                                   rsd_slot *out, int cap) {
    rsd_json_doc doc;
    int r, row, n = 0;
    if ((!body && len) || !toks || !n_toks || cap < 0 || (cap && !out)) return RSD_ERR_ARG;
    r = rsd_json_parse(&doc, body ? body : "", len, toks, n_toks);
    if (r < 0) return r;
    if (rsd_json_type_of(&doc, 0) != RSD_JSON_ARRAY) return RSD_ERR_PAYLOAD;
    for (row = rsd_json_child(&doc, 0); row >= 0; row = rsd_json_next(&doc, row), n++) {
        int64_t id = n, ctx = 0, np = 0;
        if (rsd_json_type_of(&doc, row) != RSD_JSON_OBJECT) return RSD_ERR_PAYLOAD;
        if (n >= cap) continue;
        if (rsd_json_int64(&doc, RSDI_JSON_FIND(&doc, row, "id"), &id) != RSD_OK || id < 0 || id > 0x7FFFFFFF) id = n;
        if (rsd_json_int64(&doc, RSDI_JSON_FIND(&doc, row, "n_ctx"), &ctx) != RSD_OK || ctx < 0 || ctx > 0x7FFFFFFF)
            ctx = 0;
        if (rsd_json_int64(&doc, RSDI_JSON_FIND(&doc, row, "n_prompt_tokens"), &np) != RSD_OK || np < 0) np = 0;
        out[n].id = (int)id;
        out[n].n_ctx = (uint32_t)ctx;
        out[n].n_prompt_tokens = np;
    }
    return n;
}
/* ---- payload:router end ---- */
RSD_API int rsd_server_error_parse(rsd_server_error *out, const char *body, size_t len,
                                   rsd_json_tok *toks, uint32_t cap) {
    rsd_json_doc d;
    int r;
    if (!out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    r = rsdi_pl_parse(&d, body, len, toks, cap);
    if (r < 0) return r;
    return rsdi_pl_error(&d, 0, out) ? 1 : 0;
}

/* {"model":m, ...}: shared start of the request bodies; false if m is unusable. */
RSDI_PRIVATE bool rsdi_pl_body_model(rsd_json_writer *w, char *buf, size_t cap, const char *key,
                                     rsd_str model) {
    rsd_json_w_init(w, buf, cap);
    if (!model.ptr || !rsdi_id_ok(model)) return false;
    rsd_json_w_begin_object(w);
    rsd_json_w_key(w, key);
    rsd_json_w_strn(w, model.ptr, model.len);
    return true;
}

/* ---- >>payload:ollama ---- */
#ifndef RSD_NO_OLLAMA
/* The "models" array of an Ollama listing: its token, 0 for null (empty), or <0. */
RSDI_PRIVATE int rsdi_ollama_models_array(const rsd_json_doc *d) {
    int arr;
    if (rsd_json_type_of(d, 0) != RSD_JSON_OBJECT) return RSD_ERR_JSON_TYPE;
    arr = RSDI_JSON_FIND(d, 0, "models");
    if (rsd_json_type_of(d, arr) == RSD_JSON_NULL) return 0;
    if (rsd_json_type_of(d, arr) != RSD_JSON_ARRAY) return RSD_ERR_JSON_TYPE;
    return arr;
}

/* One element of an Ollama listing's "models" (its own document, root 0) into *out. */
RSDI_PRIVATE void rsdi_ollama_entry(void *ctx, const rsd_json_doc *d) {
    rsd_listing *out = (rsd_listing *)ctx;
    rsd_listed_model *m;
    rsd_str name, model;
    size_t mark = out->arena_used;
    int gn, gm;
    out->n_seen++;
    if (out->n >= out->max_models) {
        out->truncated = true;
        return;
    }
    if (rsd_json_type_of(d, 0) != RSD_JSON_OBJECT) {
        out->n_skipped++;
        return;
    }
    m = &out->models[out->n];
    memset(m, 0, sizeof *m);
    name.ptr = model.ptr = "";
    name.len = model.len = 0;
    gm = rsdi_listing_name(out, d, RSDI_JSON_FIND(d, 0, "model"), &model);
    gn = rsdi_listing_name(out, d, RSDI_JSON_FIND(d, 0, "name"), &name);
    if (gm < 0 || gn < 0) {
        out->arena_used = mark;
        out->truncated = true;
        return;
    }
    if (!gm && !gn) {
        out->arena_used = mark;
        out->n_skipped++;
        return;
    }
    m->id = gm ? model : name;
    if (gm && gn && !rsd_str_eq(model, name)) m->n_aliases = 1; /* name, after the id in the arena */
    else if (gm && gn) out->arena_used = mark + model.len + 1; /* the same name once */
    m->instance.ptr = "";
    m->state = RSD_MODEL_LOADED;
    m->has_size = rsdi_pl_u64(d, RSDI_JSON_FIND(d, 0, "size"), &m->size_bytes);
    if (!m->has_size) m->size_bytes = 0;
    m->has_size_vram = rsdi_pl_u64(d, RSDI_JSON_FIND(d, 0, "size_vram"), &m->size_vram_bytes);
    if (!m->has_size_vram) m->size_vram_bytes = 0;
    if (!rsdi_pl_u32_pos(d, RSDI_JSON_FIND(d, 0, "context_length"), &m->context_length))
        m->context_length = 0;
    out->n++;
}

/* Ollama's reader: the entries of the last "models" list. */
RSDI_PRIVATE void rsdi_ollama_list_el(void *ctx, rsd_str key, const rsd_json_doc *el) {
    rsd_listing *out = (rsd_listing *)ctx;
    if (!RSDI_PL_KEY(key, "models")) return;
    if (el) rsdi_ollama_entry(out, el);
    else rsdi_listing_reset(out); /* a later "models" wins */
}

RSDI_PRIVATE int rsdi_ollama_list_end(void *ctx, int rc, const rsd_json_doc *top) {
    rsd_listing *out = (rsd_listing *)ctx;
    int arr = rc < 0 ? rc : rsdi_ollama_models_array(top);
    if (arr <= 0) rsdi_listing_reset(out); /* never a partial list; null is an empty one */
    if (arr < 0) return arr;
    out->has_states = true;
    return RSD_OK;
}

RSD_API int rsd_ollama_ps_listing(const char *body, size_t len, rsd_json_tok *toks, uint32_t n_toks,
                                  rsd_listing *out) {
    if (!out) return RSD_ERR_ARG;
    rsdi_listing_reset(out);
    if (!out->models || !out->arena) return RSD_ERR_ARG;
    return rsdi_pl_whole(body, len, toks, n_toks, rsdi_ollama_list_el, rsdi_ollama_list_end, out);
}

RSD_API int rsd_ollama_name_normalise(rsd_str name, char *out, size_t cap) {
    rsd_str s = rsdi_str_trim(name);
    size_t i, last = 0, need, slashes = 0;
    bool tag = false;
    if (!out && cap) return RSD_ERR_ARG;
    if (cap) out[0] = '\0';
    if (!s.ptr) s.len = 0;
    /* host/namespace/model:tag; the default host and the "library" namespace are
       not displayed. Only exact part counts are stripped, so the result is stable. */
    for (i = 0; i < s.len; i++) slashes += s.ptr[i] == '/';
    if (slashes == 2 && rsdi_iprefix(s, "registry.ollama.ai/")) {
        s.ptr += 19;
        s.len -= 19;
        s = rsdi_str_trim(s); /* what follows a stripped part is trimmed too, as a next pass would */
        slashes = 1;
    }
    if (slashes == 1 && rsdi_iprefix(s, "library/")) {
        s.ptr += 8;
        s.len -= 8;
        s = rsdi_str_trim(s);
    }
    for (i = 0; i < s.len; i++)
        if (s.ptr[i] == '/') last = i + 1;
    if (s.len == 0 || last == s.len) return RSD_ERR_MODEL_ID;
    for (i = last; i < s.len; i++)
        if (s.ptr[i] == ':' || s.ptr[i] == '@') tag = true;
    need = s.len + (tag ? 0 : 7);
    if (need >= cap) return RSD_ERR_BUFFER;
    memcpy(out, s.ptr, s.len);
    if (!tag) memcpy(out + s.len, ":latest", 7);
    out[need] = '\0';
    return (int)need;
}

RSD_API int rsd_ollama_parse_version(rsd_ollama_version *out, const char *body, size_t len,
                                     rsd_json_tok *toks, uint32_t cap) {
    rsd_json_doc d;
    int r, v, *parts[3], k;
    const char *p;
    if (!out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    out->major = out->minor = out->patch = -1;
    r = rsdi_pl_parse(&d, body, len, toks, cap);
    if (r < 0) return r;
    v = RSDI_JSON_FIND(&d, 0, "version");
    if (!rsdi_pl_text(&d, v, out->text, sizeof out->text)) return RSD_ERR_JSON_TYPE;
    parts[0] = &out->major;
    parts[1] = &out->minor;
    parts[2] = &out->patch;
    p = out->text;
    if (*p == 'v') p++;
    for (k = 0; k < 3; k++) {
        int n = 0, digits = 0;
        while (*p >= '0' && *p <= '9' && digits < 9) n = n * 10 + (*p++ - '0'), digits++;
        if (!digits) break;
        *parts[k] = n;
        if (*p != '.') break;
        p++;
    }
    return RSD_OK;
}

RSD_API int rsd_ollama_parse_generate(rsd_ollama_reply *out, const char *body, size_t len,
                                      rsd_json_tok *toks, uint32_t cap) {
    static const char *const reasons[] = {"", "load", "unload", "stop", "length"};
    rsd_json_doc d;
    int r, v, k;
    bool b = false;
    if (!out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    r = rsdi_pl_parse(&d, body, len, toks, cap);
    if (r < 0) return r;
    if (rsd_json_type_of(&d, 0) != RSD_JSON_OBJECT) return RSD_ERR_JSON_TYPE;
    if (rsdi_pl_error(&d, 0, &out->error)) return RSD_ERR_SERVER_ERROR;
    if (rsd_json_bool(&d, RSDI_JSON_FIND(&d, 0, "done"), &b) == RSD_OK) out->done = b;
    v = RSDI_JSON_FIND(&d, 0, "done_reason");
    if (rsd_json_type_of(&d, v) == RSD_JSON_STRING) {
        out->reason = RSD_OLLAMA_DONE_OTHER;
        for (k = 1; k < (int)(sizeof reasons / sizeof reasons[0]); k++)
            if (rsd_json_str_eq(&d, v, reasons[k])) out->reason = (rsd_ollama_done)k;
    }
    return RSD_OK;
}

RSD_API int rsd_ollama_load_body(char *buf, size_t cap, rsd_str model, const rsd_ollama_load_opts *opts) {
    rsd_json_writer w;
    if (!buf && cap) return RSD_ERR_ARG;
    if (!rsdi_pl_body_model(&w, buf, cap, "model", model)) return RSD_ERR_MODEL_ID;
    rsd_json_w_key(&w, "stream");
    rsd_json_w_bool(&w, false);
    if (opts && opts->set_keep_alive) {
        rsd_json_w_key(&w, "keep_alive");
        rsd_json_w_int(&w, opts->keep_alive_s < 0 ? -1 : opts->keep_alive_s);
    }
    if (opts && opts->num_ctx) {
        rsd_json_w_key(&w, "options");
        rsd_json_w_begin_object(&w);
        rsd_json_w_key(&w, "num_ctx");
        rsd_json_w_int(&w, (int64_t)opts->num_ctx);
        rsd_json_w_end_object(&w);
    }
    rsd_json_w_end_object(&w);
    return rsd_json_w_finish(&w);
}

RSD_API int rsd_ollama_unload_body(char *buf, size_t cap, rsd_str model) {
    rsd_json_writer w;
    if (!buf && cap) return RSD_ERR_ARG;
    if (!rsdi_pl_body_model(&w, buf, cap, "model", model)) return RSD_ERR_MODEL_ID;
    rsd_json_w_key(&w, "keep_alive");
    rsd_json_w_int(&w, 0);
    rsd_json_w_key(&w, "stream");
    rsd_json_w_bool(&w, false);
    rsd_json_w_end_object(&w);
    return rsd_json_w_finish(&w);
}
#endif /* RSD_NO_OLLAMA */
/* ---- payload:ollama end ---- */
/* ---- >>payload:lmstudio ---- */
RSD_API const char *rsd_lms_tier_str(int tier) {
    switch (tier) {
    case RSD_LMS_TIER_V1: return "0.4+";
    case RSD_LMS_TIER_V0: return "0.3.x";
    case RSD_LMS_TIER_OPENAI: return "openai-compat";
    default: return "none";
    }
}
#ifndef RSD_NO_LMSTUDIO
/* Bits of rsdi_lms_have[]: which scalar fields a folded model already has. */
enum { RSDI_LMS_HAVE_TYPE = 1, RSDI_LMS_HAVE_CTX = 2, RSDI_LMS_HAVE_SIZE = 4,
       RSDI_LMS_HAVE_VISION = 8, RSDI_LMS_HAVE_TOOLS = 16, RSDI_LMS_HAVE_REASONING = 32 };

/* Parse state of one catalog. */
typedef struct rsdi_lms_parse {
    rsd_lms_catalog *cat;
    const rsd_json_doc *d;            /* the entry being read (its own document, root 0) */
    bool v1;
    rsdi_pl_arena a;
    uint8_t *have;                    /* the catalog's */
} rsdi_lms_parse;


/* A string token copied as a trimmed id: 1 ok, 0 absent, wrong type or unusable, -1 the
   arena is full (the catalog is then truncated). */
RSDI_PRIVATE int rsdi_lms_id(const rsd_json_doc *d, int i, rsdi_pl_arena *a, rsd_str *out) {
    return rsdi_pl_copy(d, i, a, RSDI_PL_ID_TRIM, out);
}

/* An entry or instance not kept: counted; a full arena also truncates the catalog. */
RSDI_PRIVATE void rsdi_lms_drop(rsd_lms_catalog *cat, int why) {
    cat->n_dropped++;
    if (why < 0) cat->truncated = true;
}

RSDI_PRIVATE rsd_lms_type rsdi_lms_type(const rsd_json_doc *d, int i) {
    if (rsd_json_type_of(d, i) != RSD_JSON_STRING) return RSD_LMS_TYPE_UNKNOWN;
    if (RSDI_JSON_EQ(d, i, "llm")) return RSD_LMS_TYPE_LLM;
    if (RSDI_JSON_EQ(d, i, "vlm")) return RSD_LMS_TYPE_VLM;
    if (RSDI_JSON_EQ(d, i, "embedding") || RSDI_JSON_EQ(d, i, "embeddings"))
        return RSD_LMS_TYPE_EMBEDDING;
    return RSD_LMS_TYPE_OTHER;
}

/* ---- the index ---- */
RSDI_PRIVATE uint32_t rsdi_lms_hash(rsd_str s) {
    uint32_t h = 2166136261u;
    size_t i;
    if (!s.ptr) return h;
    for (i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 16777619u;
    return h;
}

RSDI_PRIVATE void rsdi_lms_ix_clear(rsd_lms_index *x) {
    x->n_models = x->n_instances = 0;
    memset(x->model_slot, 0, sizeof x->model_slot);
    memset(x->instance_slot, 0, sizeof x->instance_slot);
}

/* The first model (lowest index) whose key is key, or -1. */
RSDI_PRIVATE int rsdi_lms_ix_model(const rsd_lms_catalog *cat, const rsd_lms_index *x, rsd_str key) {
    uint32_t h = rsdi_lms_hash(key), n;
    for (n = 0; n < RSD_LMS_MODEL_SLOTS; n++, h++) {
        int m = (int)x->model_slot[h & (RSD_LMS_MODEL_SLOTS - 1)] - 1;
        if (m < 0) return -1;
        if (m < cat->n_models && rsd_str_eq(cat->models[m].key, key)) return m;
    }
    return -1;
}

/* Next instance after slot *pos (start with *pos = hash of id) whose id is id, or -1. */
RSDI_PRIVATE int rsdi_lms_ix_inst(const rsd_lms_catalog *cat, const rsd_lms_index *x, rsd_str id, uint32_t *pos,
                                  uint32_t *probes) {
    for (; *probes < RSD_LMS_INSTANCE_SLOTS; (*probes)++) {
        int i = (int)x->instance_slot[*pos & (RSD_LMS_INSTANCE_SLOTS - 1)] - 1;
        (*pos)++;
        if (i < 0) {
            *probes = RSD_LMS_INSTANCE_SLOTS;
            return -1;
        }
        if (i < cat->n_instances && rsd_str_eq(cat->instances[i].id, id)) {
            (*probes)++;
            return i;
        }
    }
    return -1;
}

/* Index model m (the next one) and instance i (the next one, appended to its model). */
RSDI_PRIVATE void rsdi_lms_ix_add_model(const rsd_lms_catalog *cat, rsd_lms_index *x, int m) {
    uint32_t h = rsdi_lms_hash(cat->models[m].key);
    while (x->model_slot[h & (RSD_LMS_MODEL_SLOTS - 1)]) h++; /* never full: 2x the models */
    x->model_slot[h & (RSD_LMS_MODEL_SLOTS - 1)] = (uint16_t)(m + 1);
    x->first[m] = x->last[m] = -1;
    x->n_models = m + 1;
}

RSDI_PRIVATE void rsdi_lms_ix_add_inst(const rsd_lms_catalog *cat, rsd_lms_index *x, int i) {
    uint32_t h = rsdi_lms_hash(cat->instances[i].id);
    int m = cat->instances[i].model;
    while (x->instance_slot[h & (RSD_LMS_INSTANCE_SLOTS - 1)]) h++;
    x->instance_slot[h & (RSD_LMS_INSTANCE_SLOTS - 1)] = (uint16_t)(i + 1);
    x->next[i] = -1;
    if (m >= 0 && m < x->n_models) {
        if (x->last[m] < 0) x->first[m] = (int16_t)i;
        else x->next[x->last[m]] = (int16_t)i;
        x->last[m] = (int16_t)i;
    }
    x->n_instances = i + 1;
}

/* The catalog's own index when it covers the catalog, else one built into tmp. */
RSDI_PRIVATE const rsd_lms_index *rsdi_lms_ix(const rsd_lms_catalog *cat, rsd_lms_index *tmp) {
    int k;
    if (cat->index.n_models == cat->n_models && cat->index.n_instances == cat->n_instances) return &cat->index;
    rsdi_lms_ix_clear(tmp);
    for (k = 0; k < cat->n_models; k++) rsdi_lms_ix_add_model(cat, tmp, k);
    for (k = 0; k < cat->n_instances; k++) rsdi_lms_ix_add_inst(cat, tmp, k);
    return tmp;
}

/* The model for key: the existing one (fold) or a new one; -1 when full. */
RSDI_PRIVATE int rsdi_lms_model(rsdi_lms_parse *p, rsd_str key) {
    rsd_lms_catalog *cat = p->cat;
    int m = rsdi_lms_ix_model(cat, &cat->index, key);
    if (m >= 0) return m;
    if (cat->n_models >= RSD_LMS_MAX_MODELS) {
        cat->n_dropped++;
        cat->truncated = true;
        return -1;
    }
    m = cat->n_models++;
    memset(&cat->models[m], 0, sizeof cat->models[m]);
    cat->models[m].key = key;
    p->have[m] = 0;
    rsdi_lms_ix_add_model(cat, &cat->index, m);
    return m;
}

/* Append instance id of model m unless the model already has it. */
RSDI_PRIVATE void rsdi_lms_instance(rsdi_lms_parse *p, int m, rsd_str id, uint32_t ctx) {
    rsd_lms_catalog *cat = p->cat;
    uint32_t pos = rsdi_lms_hash(id), probes = 0;
    int i;
    while ((i = rsdi_lms_ix_inst(cat, &cat->index, id, &pos, &probes)) >= 0)
        if (cat->instances[i].model == m) return;
    if (cat->n_instances >= RSD_LMS_MAX_INSTANCES) {
        cat->n_dropped++;
        cat->truncated = true;
        return;
    }
    i = cat->n_instances++;
    cat->instances[i].id = id;
    cat->instances[i].model = m;
    cat->instances[i].context_length = ctx;
    cat->models[m].n_instances++;
    rsdi_lms_ix_add_inst(cat, &cat->index, i);
}

/* Scalar fields of one entry, merged "first wins, fill the missing". */
typedef struct rsdi_lms_fields {
    uint8_t have;
    rsd_lms_type type;
    uint32_t ctx;
    uint64_t size;
    bool vision, tools, reasoning;
} rsdi_lms_fields;

RSDI_PRIVATE void rsdi_lms_merge(rsdi_lms_parse *p, int m, const rsdi_lms_fields *f) {
    rsd_lms_model *mo = &p->cat->models[m];
    uint8_t add = (uint8_t)(f->have & ~p->have[m]);
    if (add & RSDI_LMS_HAVE_TYPE) mo->type = f->type;
    if (add & RSDI_LMS_HAVE_CTX) mo->max_context_length = f->ctx;
    if (add & RSDI_LMS_HAVE_SIZE) { mo->size_bytes = f->size; mo->has_size = true; }
    if (add & RSDI_LMS_HAVE_VISION) mo->vision = f->vision;
    if (add & RSDI_LMS_HAVE_TOOLS) mo->tools = f->tools;
    if (add & RSDI_LMS_HAVE_REASONING) mo->reasoning = f->reasoning;
    p->have[m] = (uint8_t)(p->have[m] | f->have);
}

/* One /api/v1/models entry (p->v1), or one /api/v0/models or /v1/models row. */
RSDI_PRIVATE void rsdi_lms_entry_at(rsdi_lms_parse *p, int e) {
    const rsd_json_doc *d = p->d;
    rsdi_lms_fields f;
    rsd_str key, id;
    int k, v, caps = -1, insts = -1, m, i, c;
    uint32_t loaded_ctx = 0;
    size_t mark = p->a.used;
    bool b, loaded = false;
    int key_ok = 0;
    memset(&f, 0, sizeof f);
    if (rsd_json_type_of(d, e) != RSD_JSON_OBJECT) { p->cat->n_dropped++; return; }
    for (k = rsd_json_child(d, e); k >= 0; k = rsd_json_next(d, k)) {
        v = k + 1;
        if (p->v1 ? RSDI_JSON_EQ(d, k, "key") : RSDI_JSON_EQ(d, k, "id")) {
            key_ok = rsdi_lms_id(d, v, &p->a, &key);
        } else if (RSDI_JSON_EQ(d, k, "type")) {
            f.type = rsdi_lms_type(d, v);
            f.have = (uint8_t)(f.type ? f.have | RSDI_LMS_HAVE_TYPE : f.have & ~RSDI_LMS_HAVE_TYPE);
        } else if (RSDI_JSON_EQ(d, k, "max_context_length")) {
            if (rsdi_pl_u32_pos(d, v, &f.ctx)) f.have |= RSDI_LMS_HAVE_CTX;
            else f.have = (uint8_t)(f.have & ~RSDI_LMS_HAVE_CTX);
        } else if (RSDI_JSON_EQ(d, k, "capabilities")) {
            caps = v; /* the last one counts */
        } else if (!p->v1) {
            if (RSDI_JSON_EQ(d, k, "state")) {
                loaded = RSDI_JSON_EQ(d, v, "loaded");
            } else if (RSDI_JSON_EQ(d, k, "loaded_context_length")) {
                if (!rsdi_pl_u32_pos(d, v, &loaded_ctx)) loaded_ctx = 0;
            }
        } else if (RSDI_JSON_EQ(d, k, "size_bytes")) {
            if (rsdi_pl_u64(d, v, &f.size)) f.have |= RSDI_LMS_HAVE_SIZE;
            else f.have = (uint8_t)(f.have & ~RSDI_LMS_HAVE_SIZE);
        } else if (RSDI_JSON_EQ(d, k, "loaded_instances")) {
            insts = v;
        }
    }
    if (key_ok <= 0) {
        p->a.used = mark;
        rsdi_lms_drop(p->cat, key_ok);
        return;
    }
    if (!p->v1) { /* v0: an array of names, "tool_use" among them */
        if (rsd_json_type_of(d, caps) == RSD_JSON_ARRAY) {
            f.have |= RSDI_LMS_HAVE_TOOLS;
            for (c = rsd_json_child(d, caps); c >= 0; c = rsd_json_next(d, c))
                if (RSDI_JSON_EQ(d, c, "tool_use")) f.tools = true;
        }
    } else if (rsd_json_type_of(d, caps) == RSD_JSON_OBJECT) {
        if (rsd_json_bool(d, RSDI_JSON_FIND(d, caps, "vision"), &b) == RSD_OK) {
            f.vision = b;
            f.have |= RSDI_LMS_HAVE_VISION;
        }
        if (rsd_json_bool(d, RSDI_JSON_FIND(d, caps, "trained_for_tool_use"), &b) == RSD_OK) {
            f.tools = b;
            f.have |= RSDI_LMS_HAVE_TOOLS;
        }
        v = RSDI_JSON_FIND(d, caps, "reasoning");
        if (v >= 0) {
            f.reasoning = rsd_json_type_of(d, v) == RSD_JSON_OBJECT ||
                          (rsd_json_bool(d, v, &b) == RSD_OK && b);
            f.have |= RSDI_LMS_HAVE_REASONING;
        }
    }
    if (!(f.have & RSDI_LMS_HAVE_VISION) && (f.have & RSDI_LMS_HAVE_TYPE)) {
        f.vision = f.type == RSD_LMS_TYPE_VLM;
        f.have |= RSDI_LMS_HAVE_VISION;
    }
    m = rsdi_lms_model(p, key);
    if (m < 0) {
        p->a.used = mark;
        return;
    }
    rsdi_lms_merge(p, m, &f);
    if (!p->v1) {
        if (loaded || loaded_ctx > 0) rsdi_lms_instance(p, m, p->cat->models[m].key, loaded_ctx);
        return;
    }
    if (rsd_json_type_of(d, insts) != RSD_JSON_ARRAY) return;
    for (i = rsd_json_child(d, insts); i >= 0; i = rsd_json_next(d, i)) {
        uint32_t ctx = 0;
        int got = rsdi_lms_id(d, RSDI_JSON_FIND(d, i, "id"), &p->a, &id);
        if (got <= 0) {
            rsdi_lms_drop(p->cat, got);
            continue;
        }
        c = RSDI_JSON_FIND(d, i, "config");
        if (!rsdi_pl_u32_pos(d, RSDI_JSON_FIND(d, c, "context_length"), &ctx)) ctx = 0;
        rsdi_lms_instance(p, m, id, ctx);
    }
}

RSDI_PRIVATE void rsdi_lms_reset(rsd_lms_catalog *cat);

/* One catalog entry (its own document, root 0). */
RSDI_PRIVATE void rsdi_lms_entry(void *ctx, const rsd_json_doc *el) {
    rsdi_lms_parse *p = (rsdi_lms_parse *)ctx;
    p->d = el;
    p->cat->n_entries++;
    rsdi_lms_entry_at(p, 0);
}

/* LM Studio's reader: the entries of the last "models" list (v1), else of the last
   "data" list (v0); a "models" list wins over every "data" list. */
RSDI_PRIVATE void rsdi_lms_list_el(void *ctx, rsd_str key, const rsd_json_doc *el) {
    rsd_lms_catalog *cat = (rsd_lms_catalog *)ctx;
    rsdi_lms_parse p;
    bool models = RSDI_PL_KEY(key, "models");
    if (!models && !RSDI_PL_KEY(key, "data")) return;
    if (!el) {
        if (!models && cat->list == 1) return;
        rsdi_lms_reset(cat);
        cat->list = models ? 1 : 2;
        return;
    }
    if (cat->list != (models ? 1 : 2)) return;
    p.cat = cat;
    p.v1 = models;
    p.have = cat->have;
    p.a.buf = cat->arena;
    p.a.cap = sizeof cat->arena;
    p.a.used = cat->arena_used;
    rsdi_lms_entry(&p, el);
    cat->arena_used = p.a.used;
}

/* The shape found; sets cat->tier and cat->error. The models kept or <0 (never a partial
   catalog). */
RSDI_PRIVATE int rsdi_lms_list_end(void *ctx, int rc, const rsd_json_doc *d) {
    rsd_lms_catalog *cat = (rsd_lms_catalog *)ctx;
    int list = cat->list;
    bool v1;
    if (rc >= 0 && rsd_json_type_of(d, 0) != RSD_JSON_OBJECT) rc = RSD_ERR_JSON_TYPE;
    if (rc < 0) {
        rsdi_lms_reset(cat);
        return rc;
    }
    v1 = rsd_json_type_of(d, RSDI_JSON_FIND(d, 0, "models")) == RSD_JSON_ARRAY;
    if (!v1 && rsd_json_type_of(d, RSDI_JSON_FIND(d, 0, "data")) != RSD_JSON_ARRAY) {
        rsdi_lms_reset(cat);
        return rsdi_pl_error(d, 0, &cat->error) ? RSD_ERR_SERVER_ERROR : RSD_ERR_JSON_TYPE;
    }
    if (list != (v1 ? 1 : 2)) { /* "models" was a list, then a later "models" is not: the "data" list is gone */
        rsdi_lms_reset(cat);
        return RSD_ERR_JSON_TYPE;
    }
    cat->tier = v1 ? RSD_LMS_TIER_V1 : RSD_LMS_TIER_V0;
    return cat->n_models;
}

/* Reset the header of a catalog (the big arrays are written before being read). */
RSDI_PRIVATE void rsdi_lms_reset(rsd_lms_catalog *cat) {
    cat->tier = RSD_LMS_TIER_NONE;
    cat->n_models = cat->n_instances = cat->n_entries = cat->n_dropped = 0;
    cat->truncated = false;
    memset(&cat->error, 0, sizeof cat->error);
    cat->arena_used = 0;
    cat->list = 0;
    rsdi_lms_ix_clear(&cat->index);
}

RSD_API int rsd_lms_parse_models(rsd_lms_catalog *cat, const char *body, size_t len,
                                 rsd_json_tok *toks, uint32_t cap) {
    if (!cat) return RSD_ERR_ARG;
    rsdi_lms_reset(cat);
    return rsdi_pl_whole(body, len, toks, cap, rsdi_lms_list_el, rsdi_lms_list_end, cat);
}

/* A 2xx catalog read (r: rsdi_lms_list_end's) for the tier asked. */
RSDI_PRIVATE int rsdi_lms_tier_read(rsd_lms_catalog *cat, rsd_lms_tier tier, int r) {
    if (r >= 0 && cat->tier != (tier == RSD_LMS_TIER_V1 ? RSD_LMS_TIER_V1 : RSD_LMS_TIER_V0)) {
        rsdi_lms_reset(cat);
        r = RSD_ERR_JSON_TYPE;
    }
    if (r < 0) {
        cat->n_models = cat->n_instances = 0;
        rsdi_lms_ix_clear(&cat->index);
        cat->tier = RSD_LMS_TIER_NONE;
        return r;
    }
    cat->tier = tier;
    return r;
}

RSD_API int rsd_lms_catalog_from_response(rsd_lms_catalog *cat, rsd_lms_tier tier, int status,
                                          const char *body, size_t len, rsd_json_tok *toks,
                                          uint32_t cap) {
    rsd_json_doc d;
    if (!cat || tier <= RSD_LMS_TIER_NONE || tier >= RSD_LMS_TIER_NUM) return RSD_ERR_ARG;
    rsdi_lms_reset(cat);
    if (status < 200 || status > 299) {
        if (rsdi_pl_parse(&d, body, len, toks, cap) > 0 &&
            rsd_json_type_of(&d, 0) == RSD_JSON_OBJECT)
            (void)rsdi_pl_error(&d, 0, &cat->error);
        cat->error.present = true;
        if (status == 401 || status == 403) {
            if (!cat->error.message[0])
                (void)RSD_SNPRINTF(cat->error.message, sizeof cat->error.message,
                                   "LM Studio authentication required");
            return RSD_ERR_AUTH;
        }
        if (!cat->error.message[0])
            (void)RSD_SNPRINTF(cat->error.message, sizeof cat->error.message, "HTTP %d", status);
        return RSD_ERR_HTTP_STATUS;
    }
    return rsdi_lms_tier_read(cat, tier, rsdi_pl_whole(body, len, toks, cap, rsdi_lms_list_el, rsdi_lms_list_end, cat));
}

/* Peer marks: has[i] bit p = peers[p] lists instance i's id; grp[p] = the first
   peer with the same target id. One pass over the peers' ids, hash lookups into the
   catalog. */
RSDI_PRIVATE void rsdi_lms_peer_marks(const rsd_lms_catalog *cat, const rsd_lms_index *x, const rsd_lms_peer *peers,
                                      int n_peers, uint32_t *has, int *grp) {
    int p, q, j, i;
    memset(has, 0, sizeof(uint32_t) * RSD_LMS_MAX_INSTANCES);
    for (p = 0; p < n_peers; p++) {
        grp[p] = p;
        for (q = 0; q < p; q++)
            if (rsd_str_eq(peers[q].target_id, peers[p].target_id)) {
                grp[p] = grp[q];
                break;
            }
        if (!peers[p].instance_ids) continue;
        for (j = 0; j < peers[p].n_instance_ids; j++) {
            uint32_t pos = rsdi_lms_hash(peers[p].instance_ids[j]), probes = 0;
            while ((i = rsdi_lms_ix_inst(cat, x, peers[p].instance_ids[j], &pos, &probes)) >= 0) has[i] |= 1u << p;
        }
    }
}

/* Bit mask of peers holding an instance (peers with an equal target id count once). */
RSDI_PRIVATE uint32_t rsdi_lms_peer_mask(uint32_t has, const int *grp, int n_peers) {
    uint32_t mask = 0, groups = 0;
    int p;
    for (p = 0; p < n_peers; p++)
        if (((has >> p) & 1u) && !((groups >> grp[p]) & 1u)) {
            mask |= 1u << p;
            groups |= 1u << grp[p];
        }
    return mask;
}

RSD_API int rsd_lms_resolve(const rsd_lms_catalog *cat, rsd_str requested, rsd_str default_id,
                            const rsd_lms_peer *peers, int n_peers, rsd_lms_resolution *out) {
    rsd_lms_index tmp;
    const rsd_lms_index *x;
    uint32_t has[RSD_LMS_MAX_INSTANCES], pos, probes = 0;
    int grp[RSD_LMS_MAX_PEERS];
    int m = -1, mi = -1, ii = -1, mk, i, pick = -1, first = -1, quiet = -1;
    if (out) {
        memset(out, 0, sizeof *out);
        out->model = out->instance = -1;
        out->wire_id = requested;
    }
    if (!cat || !out || n_peers < 0 || n_peers > RSD_LMS_MAX_PEERS || (n_peers && !peers) ||
        (!requested.ptr && requested.len) || (!default_id.ptr && default_id.len) ||
        cat->n_models < 0 || cat->n_models > RSD_LMS_MAX_MODELS || cat->n_instances < 0 ||
        cat->n_instances > RSD_LMS_MAX_INSTANCES)
        return RSD_ERR_ARG;
    if (!requested.ptr) out->wire_id = requested = rsd_str_c(NULL);
    x = rsdi_lms_ix(cat, &tmp);
    /* walks the models in order, an instance id match before the key at each: the
       winner is the lowest model owning such an instance, else the first key match */
    pos = rsdi_lms_hash(requested);
    while ((i = rsdi_lms_ix_inst(cat, x, requested, &pos, &probes)) >= 0) {
        int im = cat->instances[i].model;
        if (im < 0 || im >= cat->n_models) continue;
        if (mi < 0 || im < mi || (im == mi && i < ii)) {
            mi = im;
            ii = i;
        }
    }
    mk = rsdi_lms_ix_model(cat, x, requested);
    if (mi < 0 && mk < 0) return RSD_OK; /* UNKNOWN */
    if (mk >= 0 && (mi < 0 || mk < mi) && (x->first[mk] < 0 || x->first[mk] >= cat->n_instances)) {
        out->state = RSD_LMS_JIT;
        out->model = mk;
        return RSD_OK;
    }
    if (n_peers) rsdi_lms_peer_marks(cat, x, peers, n_peers, has, grp); /* only for an instance */
    if (mi >= 0 && (mk < 0 || mi <= mk)) {
        m = mi;
        pick = ii;
    } else {
        m = mk;
        for (i = x->first[mk]; i >= 0 && i < cat->n_instances; i = x->next[i]) {
            if (first < 0) first = i;
            if (default_id.len && rsd_str_eq(cat->instances[i].id, default_id)) { pick = i; break; }
            if (quiet < 0 && !(n_peers && rsdi_lms_peer_mask(has[i], grp, n_peers))) quiet = i;
        }
        if (pick < 0) pick = quiet >= 0 ? quiet : first;
    }
    out->state = RSD_LMS_INSTANCE;
    out->model = m;
    out->instance = pick;
    out->wire_id = cat->instances[pick].id;
    out->peer_mask = n_peers ? rsdi_lms_peer_mask(has[pick], grp, n_peers) : 0;
    return RSD_OK;
}

/* The first model with model m's key (m itself when keys are unique, as parsed). */
RSDI_PRIVATE int rsdi_lms_canon(const rsd_lms_catalog *cat, const rsd_lms_index *x, int m) {
    int c = rsdi_lms_ix_model(cat, x, cat->models[m].key);
    return c >= 0 && c <= m ? c : m;
}

RSD_API int rsd_lms_residents(const rsd_lms_catalog *cat, const rsd_str *owned_ids, int n_owned,
                              rsd_resident *out, int cap) {
    rsd_lms_index tmp;
    const rsd_lms_index *x;
    int16_t slot[RSD_LMS_MAX_MODELS];
    bool ours[RSD_LMS_MAX_MODELS];
    int i, j, n = 0, m;
    if (!cat || (!out && cap) || cap < 0 || n_owned < 0 || (n_owned && !owned_ids) ||
        cat->n_models < 0 || cat->n_models > RSD_LMS_MAX_MODELS || cat->n_instances < 0 ||
        cat->n_instances > RSD_LMS_MAX_INSTANCES)
        return RSD_ERR_ARG;
    x = rsdi_lms_ix(cat, &tmp);
    for (m = 0; m < cat->n_models; m++) {
        slot[m] = -1;
        ours[m] = false;
    }
    /* owned ids -> the (first) model of that key: one hash lookup each */
    for (j = 0; j < n_owned; j++) {
        uint32_t pos = rsdi_lms_hash(owned_ids[j]), probes = 0;
        while ((i = rsdi_lms_ix_inst(cat, x, owned_ids[j], &pos, &probes)) >= 0) {
            m = cat->instances[i].model;
            if (m >= 0 && m < cat->n_models) ours[rsdi_lms_canon(cat, x, m)] = true;
        }
    }
    for (i = 0; i < cat->n_instances; i++) {
        m = cat->instances[i].model;
        if (m < 0 || m >= cat->n_models) return RSD_ERR_ARG;
        if (slot[m] >= 0) continue;
        if (n >= cap) return RSD_ERR_BUFFER;
        slot[m] = (int16_t)n;
        memset(&out[n], 0, sizeof out[n]);
        out[n].model_id = cat->models[m].key;
        if (cat->models[m].has_size) {
            out[n].size_bytes = cat->models[m].size_bytes;
            out[n].has_size = true;
        }
        out[n].loaded_by_us = ours[rsdi_lms_canon(cat, x, m)];
        n++;
    }
    return n;
}

RSD_API int rsd_lms_parse_reply(rsd_lms_reply *out, const char *body, size_t len,
                                rsd_json_tok *toks, uint32_t cap) {
    rsd_json_doc d, sub;
    rsdi_pl_arena a;
    rsd_str s;
    int r, v, c;
    double secs;
    if (!out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    out->instance_id.ptr = out->status.ptr = "";
    r = rsdi_pl_parse(&d, body, len, toks, cap);
    if (r < 0) return r;
    if (rsd_json_type_of(&d, 0) != RSD_JSON_OBJECT) return RSD_ERR_JSON_TYPE;
    if (rsdi_pl_error(&d, 0, &out->error)) return RSD_ERR_SERVER_ERROR;
    a.buf = out->arena;
    a.cap = sizeof out->arena;
    a.used = 0;
    if (rsdi_lms_id(&d, RSDI_JSON_FIND(&d, 0, "instance_id"), &a, &s) > 0 ||
        rsdi_lms_id(&d, RSDI_JSON_FIND(&d, 0, "model_instance_id"), &a, &s) > 0)
        out->instance_id = s;
    if (rsdi_pl_copy(&d, RSDI_JSON_FIND(&d, 0, "status"), &a, RSDI_PL_TEXT, &s) > 0) out->status = s;
    out->type = rsdi_lms_type(&d, RSDI_JSON_FIND(&d, 0, "type"));
    c = RSDI_JSON_FIND(&d, 0, "load_config");
    if (c < 0) c = RSDI_JSON_FIND(&d, 0, "config");
    if (rsd_json_type_of(&d, c) != RSD_JSON_OBJECT || rsd_json_expand(&d, c, &sub) != RSD_OK ||
        !rsdi_pl_u32_pos(&sub, RSDI_JSON_FIND(&sub, 0, "context_length"), &out->context_length))
        out->context_length = 0;
    v = RSDI_JSON_FIND(&d, 0, "load_time_seconds");
    if (rsd_json_double(&d, v, &secs) == RSD_OK && secs >= 0.0) {
        out->load_time_ms = secs * 1000.0 >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)(secs * 1000.0 + 0.5);
        out->has_load_time = true;
    }
    out->arena_used = a.used;
    return RSD_OK;
}

/* Optional boolean member of a load body. */
RSDI_PRIVATE void rsdi_lms_flag(rsd_json_writer *w, const char *key, rsd_lms_flag f) {
    if (f != RSD_LMS_FLAG_TRUE && f != RSD_LMS_FLAG_FALSE) return;
    rsd_json_w_key(w, key);
    rsd_json_w_bool(w, f == RSD_LMS_FLAG_TRUE);
}

RSD_API int rsd_lms_load_body(char *buf, size_t cap, rsd_str model_key, const rsd_lms_load_opts *opts) {
    rsd_json_writer w;
    if (!buf && cap) return RSD_ERR_ARG;
    if (!rsdi_pl_body_model(&w, buf, cap, "model", model_key)) return RSD_ERR_MODEL_ID;
    rsd_json_w_key(&w, "echo_load_config");
    rsd_json_w_bool(&w, true);
    if (opts) {
        if (opts->context_length) {
            rsd_json_w_key(&w, "context_length");
            rsd_json_w_int(&w, (int64_t)opts->context_length);
        }
        rsdi_lms_flag(&w, "flash_attention", opts->flash_attention);
        if (opts->eval_batch_size) {
            rsd_json_w_key(&w, "eval_batch_size");
            rsd_json_w_int(&w, (int64_t)opts->eval_batch_size);
        }
        if (opts->num_experts) {
            rsd_json_w_key(&w, "num_experts");
            rsd_json_w_int(&w, (int64_t)opts->num_experts);
        }
        rsdi_lms_flag(&w, "offload_kv_cache_to_gpu", opts->offload_kv_cache_to_gpu);
    }
    rsd_json_w_end_object(&w);
    return rsd_json_w_finish(&w);
}

RSD_API int rsd_lms_unload_body(char *buf, size_t cap, rsd_str instance_id) {
    rsd_json_writer w;
    if (!buf && cap) return RSD_ERR_ARG;
    if (!rsdi_pl_body_model(&w, buf, cap, "instance_id", instance_id)) return RSD_ERR_MODEL_ID;
    rsd_json_w_end_object(&w);
    return rsd_json_w_finish(&w);
}

#endif /* RSD_NO_LMSTUDIO */
/* ---- payload:lmstudio end ---- */
/* ==== payload end ========================================================= */

/* ==== >>driver ============================================================ */
/* ---- >>driver:core ---- */
RSD_API const char *rsd_outcome_str(int outcome) {
    RSDI_ENUM_STR(RSD_OUTCOMES, RSD_OUTCOME_NUM, outcome);
}

RSD_API const char *rsd_step_kind_str(int kind) {
    RSDI_ENUM_STR(RSD_STEP_KINDS, RSD_STEP_KIND_NUM, kind);
}

RSD_API const char *rsd_http_op_str(int op) {
    RSDI_ENUM_STR(RSD_HTTP_OPS, RSD_OP_NUM, op);
}

RSD_API const char *rsd_driver_msg_str(int dmsg) {
    RSDI_ENUM_STR(RSD_DRIVER_MSGS, RSD_DMSG_NUM, dmsg);
}

/* Machine phases (rsd_reconcile.phase). */
enum {
    RSDI_PH_DONE = 0,
    RSDI_PH_START,     /* cache lookup, then the first listing */
    RSDI_PH_LIST,      /* awaiting the first listing */
    RSDI_PH_CAP,       /* awaiting the capacity probe */
    RSDI_PH_LOCK,      /* awaiting lock_done */
    RSDI_PH_RELIST,    /* awaiting the listing under the lock */
    RSDI_PH_UNLOAD,    /* awaiting an unload of victims[vi] */
    RSDI_PH_LOAD,      /* awaiting the keep's load */
    RSDI_PH_LIMIT,     /* awaiting the listing after a model-limit answer */
    RSDI_PH_WAIT,      /* sleeping until wake, then POLL */
    RSDI_PH_POLL,      /* awaiting a wait-for-loaded poll */
    RSDI_PH_RESTORE,   /* awaiting the reload of an evicted model */
    RSDI_PH_CHECK,     /* awaiting the listing after a failed load (displaced protected models) */
    RSDI_PH_DLLIST,    /* awaiting the listing after the keep's download ended */
    RSDI_PH_COMMIT,    /* COMMIT step issued */
    RSDI_PH_UNLOCK,    /* UNLOCK step issued */
    RSDI_PH_BACKOFF    /* sleeping until wake after a transient load refusal, then the load again */
};

/* The answers' buffer (rsd_reconcile.ans_state): the answer kept whole, read as it
   arrives (a listing), larger than the buffer (kept whole), or read (a listing's verdict). */
enum { RSDI_ANS_WHOLE = 0, RSDI_ANS_SPLIT, RSDI_ANS_OVER, RSDI_ANS_READ };
RSDI_PRIVATE int rsdi_rc_listed(rsd_reconcile *r, const char *body, size_t len, rsd_listing *out);

/* What a wait-for-loaded is for (rsd_reconcile.after_wait). */
enum { RSDI_W_KEEP = 0, RSDI_W_KEEP_RO, RSDI_W_RESTORE, RSDI_W_GONE, RSDI_W_DOWNLOAD };
/* Restore state of an evicted or displaced model (rsd_reconcile.ev_state). */
enum { RSDI_PIN_HERE = 0, RSDI_PIN_GONE, RSDI_PIN_RELOADED, RSDI_PIN_NO_ROOM, RSDI_PIN_FAILED, RSDI_PIN_LATE };

/* LM Studio's part of an rsd_reconcile (internal). */
typedef struct rsd_lms_machine {
    /* every string below lives in the reconcile's id arena (rsd_reconcile.ids) */
    int tier_try, ci, ui, n_cand, n_unload, evict_mark, n_before, n_peers, n_peer_ids, n_made;
    bool retried_plain;
    rsd_lms_load_opts load;
    const char *default_model;
    char first_err[RSD_RECONCILE_TEXT_MAX];
    rsd_owned owned[RSD_RECONCILE_MAX_OWNED + RSD_LMS_MAX_EVICT + 1]; /* cx.owned (cx.n_owned of them) */
    const char *made[RSD_LMS_MAX_EVICT + 1];              /* instance ids our loads made */
    rsd_str peer_ids[RSD_LMS_MAX_PEER_IDS];               /* the peers' instance ids, peer by peer */
    const char *cand[RSD_MAX_RESIDENTS];                  /* fallback keys in rank order */
    const char *before[16];                               /* keep's instances before our load */
    const char *unload_inst[16];                          /* free_room's instances to unload */
    const char *unload_model;                             /* the candidate whose they are */
    uint32_t unload_ctx[16];
    rsd_lms_peer peers[RSD_LMS_MAX_PEERS];                /* desc.peers (views into peer_ids) */
    rsd_lms_catalog *cat;             /* the catalog, in the storage of rsd_reconcile.snap and .poll (a
                                         reconcile on LM Studio lists into neither) */
    rsd_lms_reply reply;
} rsd_lms_machine;

/* The reconcile state machine, in the caller's memory (rsd_reconcile_init): the struct,
   then its tables. Users see it through the accessors, runtime hooks through cx. */
struct rsd_reconcile {
    rsd_reconcile_result result;
    rsd_runtime_ctx cx;               /* what the hooks see: its fields are the machine's own */
    int n_notices;
    rsd_reconcile_notice *notices;    /* max_notices of them (in the tables) */
    int max_notices;                  /* limits.max_notices */
    char *ntext;                      /* the notices' text arena (in the tables): subjects and texts */
    size_t ntext_cap, ntext_used;     /* limits.notice_text_bytes, and how many are used */
    char key[RSD_TARGET_KEY_MAX];     /* normalised target key */
    void *tables;                     /* the tables, after the struct in its memory, sized by the limits */
    uint32_t max_tokens;              /* toks[] entries */
    size_t max_body;                  /* the answers' buffer: bytes of an answer kept whole, or of a
                                         listing's top level and one entry */
    char *ans;                        /* that buffer (in the tables) */
    size_t ans_len;                   /* bytes of the answer kept whole */
    rsd_json_split split;             /* a listing answer read as it arrives */
    rsd_json_doc ans_top;             /* its top level, once the feed has it */
    int ans_rc;                       /* its reader's verdict (RSDI_ANS_READ) */
    uint8_t ans_state;                /* RSDI_ANS_*: kept whole, split, over the buffer, read */
    const rsd_runtime *only_rt;       /* limits.runtime: the one runtime begin accepts (NULL = any) */
    /* copied desc */
    const rsd_runtime *rt;
    rsd_logger logger;
    rsd_decision_cache *cache;
    char root[RSD_RECONCILE_URL_MAX]; /* base URL without trailing '/' and "/v1" */
    char target_id[RSD_RECONCILE_URL_MAX];
    char runtime_id[64];
    char keep[RSD_MODEL_ID_MAX];
    char auth[RSD_RECONCILE_BEARER_MAX + 8];
    rsd_optout optout;
    bool keep_pinned, want_lock, has_gen;
    uint64_t gen, commit_gen;
    uint32_t ctx_max, ctx_ceiling, ctx_floor, probe_ms, restore_ms; /* cx.context_length: desc's */
    uint64_t cap_bytes, keep_bytes, kv_per_token;
    int n_protected;                  /* cx.ours, cx.n_ours: the attribution */
    rsd_protected_model protected_models[RSD_MAX_PROTECTED];
    size_t id_bytes;                  /* limits.max_id_bytes: an id kept is shorter */
    char *ids;                        /* the id arena (in the tables): every id the reconcile keeps, once */
    size_t ids_cap, ids_used;         /* its bytes (limits.id_arena_bytes) and how many are used */
    bool ids_full;                    /* an id did not fit in it (the reconcile degrades) */
    const char **protected_ids;       /* RSD_MAX_PROTECTED rows (in the tables; strings in ids) */
    const char **ours;                /* RSD_RECONCILE_MAX_OURS rows (as above) */
    const char **last_id;             /* desc.last_used ids, RSD_RECONCILE_MAX_OURS rows (as above) */
    uint64_t last_ms[RSD_RECONCILE_MAX_OURS]; /* desc.last_used figures */
    int n_last;
    /* machine */
    int phase, after_wait;
    bool shown, locked;
    bool cap_known;                   /* desc.capacity_known: no capacity request */
    uint64_t free_bytes;              /* a free reconcile: the bytes asked (no keep, no load) */
    uint64_t t0, deadline, restore_deadline, wake, wait_deadline;
    uint32_t poll_delay, max_instances;
    bool unlimited;
    char wait_model[RSD_MODEL_ID_MAX];
    const char **victims;                     /* RSD_MAX_RESIDENTS rows each, in the tables (strings in ids) */
    uint64_t victim_ours[RSD_MAX_RESIDENTS];  /* bit k: ours[k] names the victim */
    const char **victim_inst;                 /* its listed instance, or "" */
    int res_listing[RSD_MAX_RESIDENTS];       /* snap index of facts resident i */
    int evicted_victim[RSD_MAX_RESIDENTS];    /* victims[] index of result.evicted[i] */
    const char **pinned;                      /* protected residents of the decision (not victims) */
    bool pinned_tag[RSD_MAX_RESIDENTS];       /* pinned[i] is tag-pinned (else caller-protected) */
    uint8_t ev_state[RSD_MAX_RESIDENTS];      /* restore state of result.evicted[i] */
    bool wait_pre_failed, wait_pre_has_exit;  /* its failed:true / exit_code before the wait */
    int64_t wait_pre_exit;
    uint64_t wait_t0;
    rsd_resident res[RSD_MAX_RESIDENTS];
    rsd_step step;
    char url[RSD_RECONCILE_URL_MAX];
    char body[RSD_RECONCILE_BODY_MAX];
    /* a run's state, zeroed by begin in one piece (posted to rt_data) */
    bool posted;
    bool ours_changed;                /* set_ours/set_owned under the lock changed the attribution */
    bool notices_held;                /* the plan's notices wait for the decision under the lock */
    bool no_cache;                    /* set by a runtime: this reconcile's answer must not be cached */
    bool dl_seen, pinned_done;        /* a download was seen; the pinned pass ran */
    bool keep_ok;                     /* the keep loaded (restore pass after success) */
    bool ctx_noticed;                 /* the context notice was given */
    bool poll_fresh;                  /* poll holds a listing newer than the last load POST */
    bool wait_fresh;                  /* the waited model changed since the wait began */
    bool has_load_value;              /* load_value holds the last progress value */
    char load_stage[RSD_RECONCILE_STAGE_MAX]; /* the waited load's last progress stage ("" none) */
    double load_value;                /* and its value, 0..1 */
    int load_attempts, vi, ri, n_victims, n_pinned, n_reloaded, pin_room;
    int probe_tries;                  /* listing/props attempts of the current probe */
    int busy_tries;                   /* loads sent again after a transient refusal (backoff);
                                         not counted against RSD_RECONCILE_LOAD_ATTEMPTS */
    int limit_rounds;                 /* model-limit answers that made it evict one more */
    int fail_error;
    rsd_model_state keep_state, wait_state; /* wait_state: the waited model's last polled state */
    const rsd_listing *last_list;     /* snap or poll, whichever was read last */
    char keep_instance[RSD_MODEL_ID_MAX]; /* the instance the keep's load made, or "" */
    char fail_reason[RSD_RECONCILE_TEXT_MAX];
    char made_instance[RSD_MODEL_ID_MAX]; /* cx.made_instance: load_answer writes the instance a load made */
    rsd_plan plan;
    rsd_facts facts;
    union {
        uint64_t align;
        unsigned char bytes[RSD_RECONCILE_RT_DATA];
    } rt_data;                        /* cx.data: the hooks' scratch, zeroed by begin */
    rsd_lms_machine *lms;             /* instances and LM Studio's state (in the tables; NULL when
                                         limits.runtime has no instances) */
    rsd_listing snap;                 /* listing the decision was made on (storage in the tables) */
    rsd_listing poll;                 /* listing of the latest poll (storage in the tables) */
    rsd_json_tok *toks;               /* max_tokens of them (in the tables) */
};

/* Bounded copy of a C string; false when it does not fit. */
RSDI_PRIVATE bool rsdi_cpy(char *dst, size_t cap, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) {
        if (cap) dst[0] = '\0';
        return false;
    }
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
    return true;
}

/* Copy a view as a C string, truncating to cap - 1. */
RSDI_PRIVATE void rsdi_cpy_str(char *dst, size_t cap, rsd_str s) {
    size_t n = s.len < cap - 1 ? s.len : cap - 1;
    if (n) memcpy(dst, s.ptr, n);
    dst[n] = '\0';
}

/* Row i of one of a reconcile's id tables (a string in its id arena). */
RSDI_PRIVATE const char *rsdi_rc_row(const rsd_reconcile *r, const char *const *table, int i) {
    (void)r;
    return table[i];
}

/* s (cut to cap - 1 bytes, cap <= RSD_MODEL_ID_MAX) in the id arena, kept once: an
   entry is a length byte, the bytes and a NUL. "" needs no room. NULL when it does not
   fit (ids_full set). */
RSDI_PRIVATE const char *rsdi_rc_id(rsd_reconcile *r, rsd_str s, size_t cap) {
    unsigned char *a = (unsigned char *)r->ids;
    size_t n = s.len < cap - 1 ? s.len : cap - 1, at = 0;
    if (!n || !s.ptr) return "";
    while (at < r->ids_used) {
        if (a[at] == n && memcmp(a + at + 1, s.ptr, n) == 0) return (const char *)a + at + 1;
        at += (size_t)a[at] + 2;
    }
    if (r->ids_cap - r->ids_used < n + 2) {
        r->ids_full = true;
        return NULL;
    }
    a[at] = (unsigned char)n;
    memcpy(a + at + 1, s.ptr, n);
    a[at + 1 + n] = '\0';
    r->ids_used += n + 2;
    return (const char *)a + at + 1;
}

/* A C string in the id arena (see rsdi_rc_id). */
RSDI_PRIVATE const char *rsdi_rc_idc(rsd_reconcile *r, const char *s) {
    return rsdi_rc_id(r, rsd_str_c(s ? s : ""), RSD_MODEL_ID_MAX);
}

/* The message of a reconcile whose ids did not fit in its arena. */
#define RSDI_IDS_FULL_FMT "the ids it keeps need more than its %lu bytes (raise id_arena_bytes in rsd_reconcile_limits)"

RSDI_PRIVATE uint64_t rsdi_rc_left(uint64_t deadline, uint64_t now_ms) {
    return deadline > now_ms ? deadline - now_ms : 0;
}

/* Append a notice slot with its subject (cut to RSD_MODEL_ID_MAX - 1 bytes) in the text
   arena; *text and *cap: where its text goes and the room for it (NUL included, at most
   RSD_RECONCILE_NOTICE_TEXT_MAX). NULL when the slots or the arena are full (counted in
   notices_dropped). */
RSDI_PRIVATE rsd_reconcile_notice *rsdi_rc_notice_slot(rsd_reconcile *r, rsd_str subject, char **text, size_t *cap) {
    rsd_reconcile_notice *n;
    size_t left = r->ntext_cap - r->ntext_used;
    size_t sl = !subject.ptr ? 0 : subject.len < RSD_MODEL_ID_MAX - 1 ? subject.len : RSD_MODEL_ID_MAX - 1;
    char *a = r->ntext + r->ntext_used;
    if (r->n_notices >= r->max_notices || left < (sl ? sl + 1 : 0) + 2) {
        r->result.notices_dropped++;
        return NULL;
    }
    n = &r->notices[r->n_notices];
    memset(n, 0, sizeof *n);
    n->notice.subject = -1;
    n->subject = "";
    if (sl) {
        memcpy(a, subject.ptr, sl);
        a[sl] = '\0';
        n->subject = a;
        a += sl + 1;
        left -= sl + 1;
    }
    *text = a;
    *cap = left < (size_t)RSD_RECONCILE_NOTICE_TEXT_MAX ? left : (size_t)RSD_RECONCILE_NOTICE_TEXT_MAX;
    return n;
}

/* A driver notice's text: formatted, then escaped for a terminal (the subject ids
   come from the server), cut to fit. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 4, 0)))
#endif
RSDI_PRIVATE void rsdi_notice_vtext(rsd_reconcile_notice *n, char *text, size_t cap, const char *fmt, va_list ap) {
    char tmp[RSD_RECONCILE_NOTICE_TEXT_MAX];
    int len = vsnprintf(tmp, sizeof tmp, fmt, ap);
    size_t e;
    if (len < 0) tmp[0] = '\0';
    e = rsd_text_escape(rsd_str_c(tmp), text, cap);
    n->text_cut = len < 0 || (size_t)len >= sizeof tmp || e >= cap;
}

/* Publish a filled slot whose text is at text (the counter moves last: a poller never
   sees half a notice). */
RSDI_PRIVATE void rsdi_rc_notice_publish(rsd_reconcile *r, rsd_reconcile_notice *n, const char *text) {
    n->text = text;
    r->ntext_used = (size_t)(text - r->ntext) + strlen(text) + 1;
    r->n_notices++;
}

RSD_API void rsd_reconcile_add_notice(rsd_reconcile *r, rsd_driver_msg dmsg, rsd_notice_kind kind,
                                  rsd_notice_level level, const char *subject, const char *fmt, ...) {
    char *text;
    size_t cap;
    rsd_reconcile_notice *n = rsdi_rc_notice_slot(r, rsd_str_c(subject ? subject : ""), &text, &cap);
    va_list ap;
    if (!n) return;
    n->dmsg = dmsg;
    n->notice.kind = kind;
    n->notice.level = level;
    n->notice.msg = RSD_MSG_NONE;
    va_start(ap, fmt);
    rsdi_notice_vtext(n, text, cap, fmt, ap);
    va_end(ap);
    rsdi_rc_notice_publish(r, n, text);
}

/* Set detail bits on the notice just appended, if it is the given driver message. */
RSDI_PRIVATE void rsdi_rc_last_detail(rsd_reconcile *r, rsd_driver_msg dmsg, uint32_t bits) {
    if (r->n_notices > 0 && r->notices[r->n_notices - 1].dmsg == dmsg) r->notices[r->n_notices - 1].notice.detail |= bits;
}

/* Render and append every notice of the current plan. */
RSDI_PRIVATE void rsdi_rc_emit_plan(rsd_reconcile *r) {
    int i;
    for (i = 0; i < r->plan.n_notices && i < RSD_MAX_NOTICES; i++) {
        const rsd_notice *pn = &r->plan.notices[i];
        char *text;
        size_t cap;
        rsd_reconcile_notice *n = rsdi_rc_notice_slot(r, pn->subject >= 0 && pn->subject < r->facts.n_residents
                                                          ? r->facts.residents[pn->subject].model_id : rsd_str_c(""),
                                                      &text, &cap);
        int len;
        if (!n) return;
        n->notice = *pn;
        n->dmsg = RSD_DMSG_PLAN;
        len = rsd_notice_format(&r->facts, &r->plan, pn, text, cap);
        if (len < 0) text[0] = '\0';
        n->text_cut = len < 0 || (size_t)len >= cap;
        n->notice.subject = -1;
        rsdi_rc_notice_publish(r, n, text);
        if (pn->level == RSD_LEVEL_ERROR || pn->kind == RSD_NOTICE_SWAP)
            rsdi_logf(&r->logger, pn->level == RSD_LEVEL_ERROR ? RSD_LOG_WARN : RSD_LOG_INFO,
                      pn->kind == RSD_NOTICE_WILL_NOT_FIT ? RSD_LOGITEM_RECONCILE_DECLINE
                                                          : RSD_LOGITEM_RECONCILE_EVICT,
                      RSDI_WHERE, "%s", n->text);
    }
}

/* The plan's notices, now -- or, for a plan that mutates under the lock, held until the
   decision is made again under it (lock_done), so a plan the lock overtakes never shows. */
RSDI_PRIVATE void rsdi_rc_emit_or_hold(rsd_reconcile *r) {
    bool mutating = r->plan.decision == RSD_DECISION_LOAD || r->plan.decision == RSD_DECISION_LOAD_AFTER_EVICT;
    if (mutating && r->want_lock && !r->locked && r->keep_state != RSD_MODEL_DOWNLOADING) {
        r->notices_held = true;
        return;
    }
    r->notices_held = false;
    rsdi_rc_emit_plan(r);
}

/* The held notices (if any), once the plan they describe is the one carried out. */
RSDI_PRIVATE void rsdi_rc_release_notices(rsd_reconcile *r) {
    if (!r->notices_held) return;
    r->notices_held = false;
    rsdi_rc_emit_plan(r);
}

/* ---- request building (shared by runtimes) ---- */

/* r->url = root + path. RSD_OK or RSD_ERR_URL when it does not fit. */
RSD_API int rsd_reconcile_set_url(rsd_reconcile *r, const char *path) {
    size_t a = strlen(r->root), b = strlen(path);
    if (a + b + 1 > sizeof r->url) return RSD_ERR_URL;
    memcpy(r->url, r->root, a);
    memcpy(r->url + a, path, b + 1);
    return RSD_OK;
}

/* r->body = {"model": model}; its length or <0. */
RSD_API int rsd_reconcile_model_body(rsd_reconcile *r, const char *model) {
    rsd_json_writer w;
    rsd_json_w_init(&w, r->body, sizeof r->body);
    rsd_json_w_begin_object(&w);
    rsd_json_w_key(&w, "model");
    rsd_json_w_strn(&w, model, strlen(model));
    rsd_json_w_end_object(&w);
    return rsd_json_w_finish(&w);
}

/* Fill an HTTP step: method, url, optional JSON body, headers. */
RSD_API void rsd_reconcile_http_fill(rsd_reconcile *r, rsd_step_http *h, const char *method, int body_len) {
    h->method = method;
    h->url = r->url;
    h->n_headers = 0;
    h->body = NULL;
    h->body_len = 0;
    if (body_len >= 0) {
        h->body = r->body;
        h->body_len = (size_t)body_len;
        h->headers[h->n_headers].name = "Content-Type";
        h->headers[h->n_headers++].value = "application/json";
    }
    if (r->auth[0]) {
        h->headers[h->n_headers].name = "Authorization";
        h->headers[h->n_headers++].value = r->auth;
    }
}

/* ---- the llama.cpp router adapter ---- */

RSDI_PRIVATE int rsdi_router_request(rsd_runtime_ctx *c, rsd_http_op op, const char *model, rsd_step_http *h) {
    rsd_reconcile *r = c->r;
    int rc, n = -1;
    const char *path = op == RSD_OP_CAPACITY ? "/props"
                     : op == RSD_OP_LOAD ? "/models/load"
                     : op == RSD_OP_UNLOAD ? "/models/unload" : "/v1/models";
    if ((rc = rsd_reconcile_set_url(r, path)) < 0) return rc;
    if (op == RSD_OP_LOAD || op == RSD_OP_UNLOAD) {
        if ((n = rsd_reconcile_model_body(r, model ? model : "")) < 0) return n;
    }
    rsd_reconcile_http_fill(r, h, n >= 0 ? "POST" : "GET", n);
    return RSD_OK;
}

RSDI_PRIVATE void rsdi_router_rt_entry(rsd_runtime_ctx *c, rsd_listing *out, rsd_str key, const rsd_json_doc *el) {
    RSDI_UNUSED(c);
    rsdi_router_list_el(out, key, el);
}

RSDI_PRIVATE int rsdi_router_rt_end(rsd_runtime_ctx *c, rsd_listing *out, int rc, const rsd_json_doc *top) {
    RSDI_UNUSED(c);
    rc = rsdi_router_list_end(out, rc, top);
    if (rc < 0) return rc;
    if (out->truncated) return RSD_ERR_LISTING_TRUNCATED;
    if (!out->has_states) return RSD_ERR_NOT_ROUTER;
    return RSD_OK;
}

RSDI_PRIVATE int rsdi_router_parse_cap(rsd_runtime_ctx *c, const char *body, size_t len, uint32_t *max,
                                       bool *unlimited) {
    rsd_router_props p;
    int rc = rsd_router_parse_props(body, len, c->toks, c->max_tokens, &p);
    *max = rc < 0 ? 0 : p.max_instances;
    *unlimited = rc < 0 ? false : p.unlimited;
    return rc;
}

/* Bounded substring search over a body that need not be NUL-terminated. */
RSDI_PRIVATE bool rsdi_body_has(const char *body, size_t len, const char *needle) {
    size_t n = strlen(needle), i;
    if (!body || len < n) return false;
    for (i = 0; i + n <= len; i++)
        if (body[i] == needle[0] && memcmp(body + i, needle, n) == 0) return true;
    return false;
}

RSDI_PRIVATE rsd_load_answer rsdi_router_load_answer(rsd_runtime_ctx *c, int status, const char *body, size_t len) {
    RSDI_UNUSED(c);
    if (status >= 200 && status < 300) return RSD_LOAD_ACCEPTED;
    if (status == 400 && rsdi_body_has(body, len, "downloading")) return RSD_LOAD_DOWNLOADING; /* rsd-sim */
    if (status == 400 && rsdi_body_has(body, len, "already running")) return RSD_LOAD_ALREADY;
    if (status >= 500 && rsdi_body_has(body, len, "model limit reached")) return RSD_LOAD_LIMIT;
    /* a router before PR #29217, right after an eviction: plain text, transient */
    if (status >= 500 && rsdi_body_has(body, len, "proxy error: Could not establish connection")) return RSD_LOAD_BUSY;
    return RSD_LOAD_REJECTED;
}

RSD_API const rsd_runtime *rsd_runtime_router(void) {
    static const rsd_runtime rt = {
        "llamacpp", "llama.cpp router", RSD_STRATEGY_ROUTER,
        RSD_RT_CATALOG | RSD_RT_LOAD | RSD_RT_WAIT | RSD_RT_PINNED_PASS | RSD_RT_UNLOAD_WAIT | RSD_RT_PROBE_RETRY,
        rsdi_router_request, NULL, rsdi_router_parse_cap, rsdi_router_load_answer,
        0, 0, 0, NULL, rsdi_router_rt_entry, rsdi_router_rt_end, NULL, NULL, NULL, NULL};
    return &rt;
}

/* ---- the machine ---- */

RSDI_PRIVATE void rsdi_rc_issue_http(rsd_reconcile *r, int phase, rsd_http_op op, const char *model,
                                     uint64_t now_ms);

/* An instance a load made (r->made_instance) of model: kept, and attributed to us. */
RSDI_PRIVATE const char *rsdi_rc_made(rsd_reconcile *r, const char *model) {
    const char *m;
    if (!r->lms || r->lms->n_made >= (int)(sizeof r->lms->made / sizeof r->lms->made[0])) return NULL;
    if (!(m = rsdi_rc_idc(r, r->made_instance))) return NULL;
    r->lms->made[r->lms->n_made++] = m;
    rsd_reconcile_attr(r, true, model, m);
    return m;
}

/* r->step zeroed, of kind kind. */
RSDI_PRIVATE void rsdi_rc_step(rsd_reconcile *r, rsd_step_kind kind) {
    memset(&r->step, 0, sizeof r->step);
    r->step.kind = kind;
}

RSDI_PRIVATE void rsdi_rc_done(rsd_reconcile *r, uint64_t now_ms) {
    r->phase = RSDI_PH_DONE;
    r->result.elapsed_ms = now_ms > r->t0 ? now_ms - r->t0 : 0;
    rsdi_rc_step(r, RSD_STEP_DONE);
    r->step.result = r->result.error;
}

RSDI_PRIVATE void rsdi_rc_unlock_or_done(rsd_reconcile *r, uint64_t now_ms) {
    if (r->locked) {
        r->locked = false;
        r->phase = RSDI_PH_UNLOCK;
        r->shown = false;
        rsdi_rc_step(r, RSD_STEP_UNLOCK);
        r->step.key = r->key;
        return;
    }
    rsdi_rc_done(r, now_ms);
}

/* Store the outcome unless it failed or was degraded: RESIDENT, OBSERVED
   and DECLINED (with its code), never after a failed unload, a failed COMMIT, or when the
   runtime said not to (no_cache: e.g. a truncated catalog). A mutation first drops every
   entry of the key. */
RSDI_PRIVATE void rsdi_rc_cache_store(rsd_reconcile *r, uint64_t generation, uint64_t now_ms) {
    rsd_outcome o = r->result.outcome;
    rsd_cache_entry *e;
    char k[RSD_TARGET_KEY_MAX], m[RSD_MODEL_ID_MAX];
    if (!r->cache || r->result.cache_hit) return;
    if (r->result.mutated) rsd_cache_invalidate(r->cache, rsd_str_c(r->key), rsd_str_c(""));
    if (r->no_cache || r->free_bytes || r->result.unload_failed || r->result.state_error < 0) return;
    if (o != RSD_OUTCOME_RESIDENT && o != RSD_OUTCOME_OBSERVED && o != RSD_OUTCOME_DECLINED) return;
    if (r->result.error < 0 && o != RSD_OUTCOME_DECLINED) return;
    if (r->result.reason == RSD_REASON_PROBE_FAILED) return;
    if (rsdi_cache_keys(rsd_str_c(r->key), rsd_str_c(r->keep), k, m) < 0) return;
    e = rsdi_cache_put(r->cache, k, m, r->result.decision, r->result.reason, now_ms, r->has_gen ? generation : 0);
    e->outcome = (int)o;
    e->error = r->result.error;
    e->keep_resident = o == RSD_OUTCOME_RESIDENT;
    e->tier = (int)r->result.tier;
    e->state = (int)r->result.state;
    if (!rsdi_cache_ids(e, strcmp(r->result.wire_id, r->keep) != 0 ? r->result.wire_id : "",
                        strcmp(r->result.model_key, r->keep) != 0 ? r->result.model_key : "")) {
        e->used = false; /* its ids do not fit beside the key and the model: not cached */
        return;
    }
    r->result.cached = true;
}

RSD_API void rsd_reconcile_attr(rsd_reconcile *r, bool add, const char *model, const char *instance) {
    int *n = add ? &r->result.n_attr_add : &r->result.n_attr_remove;
    rsd_attr_ref *a = add ? r->result.attr_add : r->result.attr_remove;
    if (!model || !model[0] || *n >= RSD_RECONCILE_MAX_ATTR) return;
    a[*n].model = model;
    a[*n].instance = instance ? instance : "";
    (*n)++;
}

/* The next result.evicted entry, zeroed with its id (in the id arena) and model "", of
   victim row victim (-1: none) in restore state state; NULL when the table is full. */
RSDI_PRIVATE rsd_evicted *rsdi_rc_ev_add(rsd_reconcile *r, const char *id, int victim, int state) {
    int k = r->result.n_evicted;
    rsd_evicted *e;
    if (k >= RSD_MAX_RESIDENTS) return NULL;
    e = &r->result.evicted[k];
    memset(e, 0, sizeof *e);
    e->id = id;
    e->model = "";
    r->evicted_victim[k] = victim;
    r->ev_state[k] = (uint8_t)state;
    r->result.n_evicted++;
    return e;
}

RSD_API rsd_evicted *rsd_reconcile_evicted(rsd_reconcile *r, const char *id, const char *model,
                                           uint32_t context_length) {
    const char *i, *m;
    rsd_evicted *e;
    if (r->result.n_evicted >= RSD_MAX_RESIDENTS || !(i = rsdi_rc_idc(r, id)) || !(m = rsdi_rc_idc(r, model)))
        return NULL;
    e = rsdi_rc_ev_add(r, i, -1, RSDI_PIN_HERE);
    e->model = m;
    e->context_length = context_length;
    return e;
}

RSD_API void rsd_reconcile_set_catalog(rsd_reconcile *r, rsd_lms_tier tier, bool complete) {
    if (tier != RSD_LMS_TIER_NONE) r->result.tier = tier;
    r->no_cache = !complete;
}

RSD_API int rsd_reconcile_set_model(rsd_reconcile *r, const char *key, const char *wire_id, rsd_lms_state state) {
    if ((key && strlen(key) >= RSD_MODEL_ID_MAX) || (wire_id && strlen(wire_id) >= RSD_MODEL_ID_MAX))
        return RSD_ERR_MODEL_ID;
    if (key) rsdi_cpy(r->result.model_key, sizeof r->result.model_key, key);
    if (wire_id) rsdi_cpy(r->result.wire_id, sizeof r->result.wire_id, wire_id);
    r->result.state = state;
    return RSD_OK;
}

RSD_API void rsd_reconcile_set_decision(rsd_reconcile *r, rsd_decision decision, rsd_reason reason,
                                        bool keep_resident) {
    r->result.decision = decision;
    r->result.reason = reason;
    r->result.keep_resident = keep_resident;
}

RSD_API void rsd_reconcile_set_outcome(rsd_reconcile *r, rsd_outcome outcome, int error, const char *message) {
    r->result.outcome = outcome;
    r->result.error = error;
    if (message) rsdi_cpy_str(r->result.message, sizeof r->result.message, rsd_str_c(message));
}

RSD_API int rsd_reconcile_unload(rsd_reconcile *r, const char *instance, const char *model, uint32_t context_length) {
    rsd_lms_machine *m = r ? r->lms : NULL;
    int n;
    if (!m || !instance || !instance[0] || !model || !model[0] || (m->n_unload && strcmp(model, m->unload_model)))
        return RSD_ERR_ARG;
    if (strlen(instance) >= RSD_MODEL_ID_MAX || strlen(model) >= RSD_MODEL_ID_MAX) return RSD_ERR_MODEL_ID;
    if ((n = m->n_unload) >= (int)(sizeof m->unload_inst / sizeof m->unload_inst[0])) return RSD_ERR_BUFFER;
    if (!(m->unload_inst[n] = rsdi_rc_idc(r, instance)) || !(m->unload_model = rsdi_rc_idc(r, model)))
        return RSD_ERR_TOO_LARGE;
    m->unload_ctx[n] = context_length;
    m->n_unload++;
    return RSD_OK;
}

/* Attribution removals of plain models: names in ours of evicted models that stayed
   unloaded. (A runtime with instances removes each instance as it unloads it: a
   restore makes a new one.) */
RSDI_PRIVATE void rsdi_rc_attr_remove(rsd_reconcile *r) {
    int i, k, j;
    if (r->rt->flags & RSD_RT_INSTANCES) return;
    r->result.n_attr_remove = 0;
    for (i = 0; i < r->result.n_evicted; i++) {
        uint64_t mask;
        if (r->result.evicted[i].restored) continue;
        if (r->evicted_victim[i] >= 0) mask = r->victim_ours[r->evicted_victim[i]];
        else /* displaced by the server: match its id */
            for (mask = 0, k = 0; k < r->cx.n_ours && k < 64; k++)
                if (strcmp(rsdi_rc_row(r, r->ours, k), r->result.evicted[i].id) == 0) mask |= (uint64_t)1 << k;
        for (k = 0; k < r->cx.n_ours && k < 64; k++) {
            bool dup = false;
            if (!((mask >> k) & 1u)) continue;
            for (j = 0; j < r->result.n_attr_remove && !dup; j++)
                dup = strcmp(r->result.attr_remove[j].model, rsdi_rc_row(r, r->ours, k)) == 0;
            if (!dup) rsd_reconcile_attr(r, false, rsdi_rc_row(r, r->ours, k), "");
        }
    }
}

RSDI_PRIVATE void rsdi_rc_finish(rsd_reconcile *r, uint64_t now_ms) {
    rsdi_rc_attr_remove(r);
    if (r->result.mutated) {
        r->phase = RSDI_PH_COMMIT;
        r->shown = false;
        r->commit_gen = r->gen;
        rsdi_rc_step(r, RSD_STEP_COMMIT);
        r->step.key = r->key;
        return;
    }
    rsdi_rc_cache_store(r, r->gen, now_ms);
    rsdi_rc_unlock_or_done(r, now_ms);
}

/* Observe without acting: the server could not be read. Not cached. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 4, 5)))
#endif
RSDI_PRIVATE void rsdi_rc_degrade(rsd_reconcile *r, int err, uint64_t now_ms, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(r->result.message, sizeof r->result.message, fmt, ap);
    va_end(ap);
    r->result.outcome = RSD_OUTCOME_DEGRADED;
    r->result.error = err < 0 ? err : RSD_ERR_STATE;
    r->result.decision = RSD_DECISION_OBSERVE;
    r->result.would = RSD_DECISION_OBSERVE;
    r->result.reason = RSD_REASON_PROBE_FAILED;
    rsd_reconcile_add_notice(r, RSD_DMSG_DEGRADED, RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO, NULL,
                       "residency only observes '%s' this time: %s", r->target_id, r->result.message);
    rsdi_logf(&r->logger, RSD_LOG_INFO, RSD_LOGITEM_DRIVER_DEGRADED, RSDI_WHERE, "%s: %s", r->key,
              r->result.message);
    rsdi_rc_finish(r, now_ms);
}

/* "GET <url>: HTTP 503" or "GET <url>: timed out" into buf. */
RSDI_PRIVATE void rsdi_rc_describe(const rsd_reconcile *r, int transport, int status, char *buf, size_t cap) {
    const char *m = r->step.http.method ? r->step.http.method : "?";
    if (transport == RSD_ERR_TOO_LARGE) {
        if (RSD_SNPRINTF(buf, cap, "%s %s: the answer is larger than this reconcile's %lu bytes (raise max_body_bytes "
                         "in rsd_reconcile_limits)", m, r->url, (unsigned long)r->max_body) < 0 && cap)
            buf[0] = '\0';
    } else if (transport < 0) (void)RSD_SNPRINTF(buf, cap, "%s %s: %s", m, r->url, rsd_result_str(transport));
    else (void)RSD_SNPRINTF(buf, cap, "%s %s: HTTP %d", m, r->url, status);
}

/* ": <the server's error message>" (rsd_server_error_parse) appended to buf, when the
   body carries one; buf is left as is otherwise. */
RSDI_PRIVATE void rsdi_rc_quote_error(rsd_reconcile *r, const char *body, size_t len, char *buf, size_t cap) {
    rsd_server_error e;
    size_t n = strlen(buf);
    if (!body || !len || n + 3 >= cap) return;
    if (rsd_server_error_parse(&e, body, len, r->toks, r->max_tokens) == 1 && e.message[0])
        (void)RSD_SNPRINTF(buf + n, cap - n, ": %s", e.message);
}

/* The plan's decision in the result. */
RSDI_PRIVATE void rsdi_rc_plan_result(rsd_reconcile *r) {
    r->result.decision = r->plan.decision;
    r->result.reason = r->plan.reason;
    r->result.would = r->plan.would;
    r->result.keep_resident = r->plan.keep_resident;
    r->result.load_context = r->plan.load_context;
}

/* When the listing names every servable model and the keep is not among them: "; it
   serves N models: a, b, c, d, e and 3 more" appended to buf (an unknown model id is the
   usual cause of a rejected load). */
RSDI_PRIVATE void rsdi_rc_served_ids(const rsd_reconcile *r, char *buf, size_t cap) {
    const rsd_listing *l = r->last_list;
    size_t n = strlen(buf);
    int i;
    if (!(r->rt->flags & RSD_RT_CATALOG) || !l || rsd_listing_find(l, rsd_str_c(r->keep)) >= 0) return;
    if (l->n == 0) {
        (void)RSD_SNPRINTF(buf + n, cap - n, "; '%s' is not served there: it lists no model", r->keep);
        return;
    }
    (void)RSD_SNPRINTF(buf + n, cap - n, "; '%s' is not served there: it serves %d model%s: ", r->keep, l->n,
                       l->n == 1 ? "" : "s");
    for (i = 0; i < l->n && i < 5; i++) {
        n = strlen(buf);
        (void)RSD_SNPRINTF(buf + n, cap - n, "%s%.*s", i ? ", " : "", (int)l->models[i].id.len, l->models[i].id.ptr);
    }
    n = strlen(buf);
    if (l->n > 5) (void)RSD_SNPRINTF(buf + n, cap - n, " and %d more", l->n - 5);
}

/* The facts' part the desc gives, the rest zeroed (a listing adds residents, the keep's other
   names and tags, max_instances, and model_max_context and keep_bytes where the desc gave none). */
RSDI_PRIVATE void rsdi_rc_desc_facts(rsd_reconcile *r) {
    rsd_facts *f = &r->facts;
    memset(f, 0, sizeof *f);
    f->strategy = r->rt->strategy;
    f->optout = r->optout;
    f->target_id = rsd_str_c(r->target_id);
    f->runtime_id = rsd_str_c(r->runtime_id);
    f->keep = rsd_str_c(r->keep);
    f->keep_pinned = r->keep_pinned;
    f->protected_models = r->protected_models;
    f->n_protected = r->n_protected;
    f->context_length = r->cx.context_length;
    f->model_max_context = r->ctx_max;
    f->context_ceiling = r->ctx_ceiling;
    f->kv_bytes_per_token = r->kv_per_token;
    f->context_floor = r->ctx_floor;
    f->free_bytes = r->free_bytes;
    f->capacity_bytes = r->cap_bytes;
    f->keep_bytes = r->keep_bytes;
}

/* Facts from the desc and r->snap, then the decision and the gate. */
RSDI_PRIVATE int rsdi_rc_decide(rsd_reconcile *r, uint32_t max_override) {
    rsd_facts *f = &r->facts;
    const rsd_listing *l = &r->snap;
    int i, k, n = 0, rc, ki;
    rsdi_rc_desc_facts(r);
    for (i = 0; i < l->n; i++) {
        const rsd_listed_model *m = &l->models[i];
        rsd_resident *res;
        if (!rsd_model_state_resident(m->state)) continue;
        if (n >= RSD_MAX_RESIDENTS) return RSD_ERR_RESIDENTS_LIMIT;
        r->res_listing[n] = i;
        res = &r->res[n++];
        memset(res, 0, sizeof *res);
        res->model_id = m->id;
        rsdi_listed_views(m, res->aliases, res->tags);
        res->n_aliases = m->n_aliases;
        res->n_tags = m->n_tags;
        res->size_bytes = m->size_bytes;
        res->has_size = m->has_size;
        res->size_vram_bytes = m->size_vram_bytes;
        res->has_size_vram = m->has_size_vram;
        for (k = 0; k < r->cx.n_ours && !res->loaded_by_us; k++)
            res->loaded_by_us = rsdi_names(rsd_str_c(rsdi_rc_row(r, r->ours, k)), m->id, res->aliases, m->n_aliases);
        res->last_used_ms = m->last_used_ms; /* the server's figure, else the latest recorded one */
        for (k = 0; k < r->n_last && !m->last_used_ms; k++)
            if (r->last_ms[k] > res->last_used_ms &&
                rsdi_names(rsd_str_c(rsdi_rc_row(r, r->last_id, k)), m->id, res->aliases, m->n_aliases))
                res->last_used_ms = r->last_ms[k];
    }
    ki = rsd_listing_find(l, f->keep);
    r->keep_state = RSD_MODEL_UNKNOWN;
    if (ki >= 0) { /* the keep's tags and other names from its entry, any state */
        const rsd_listed_model *m = &l->models[ki];
        rsd_str al[RSD_MAX_ALIASES];
        r->keep_state = m->state;
        rsdi_listed_views(m, al, f->keep_tags);
        f->n_keep_tags = m->n_tags;
        if (!rsd_str_eq(m->id, f->keep)) f->keep_aliases[f->n_keep_aliases++] = m->id;
        for (k = 0; k < m->n_aliases && f->n_keep_aliases < RSD_MAX_ALIASES; k++)
            if (!rsd_str_eq(al[k], f->keep)) f->keep_aliases[f->n_keep_aliases++] = al[k];
    }
    f->residents = r->res;
    f->n_residents = n;
    f->max_instances = max_override ? max_override : r->unlimited ? (uint32_t)n + 1 : r->max_instances;
    if (!f->model_max_context && ki >= 0) f->model_max_context = l->models[ki].max_context;
    if (!f->keep_bytes && ki >= 0)
        f->keep_bytes = l->models[ki].has_size_vram ? l->models[ki].size_vram_bytes
                      : l->models[ki].has_size ? l->models[ki].size_bytes : 0;
    if ((rc = rsd_decide(f, &r->plan)) < 0) return rc;
    if ((r->rt->flags & RSD_RT_CATALOG) && r->plan.n_evict > 0 && ki < 0 && !r->free_bytes)
        rsd_plan_decline_unloadable(f, &r->plan, (uint32_t)l->n);
    rsdi_rc_plan_result(r);
    return RSD_OK;
}

RSD_API int rsd_reconcile_decide(rsd_reconcile *r, bool emit) {
    int rc;
    if (!r) return RSD_ERR_ARG;
    if ((rc = rsd_decide(&r->facts, &r->plan)) < 0) return rc;
    rsdi_rc_plan_result(r);
    if (emit) rsdi_rc_emit_plan(r);
    return RSD_OK;
}

/* Append victims to victims[]: the plan's evict list, or with use_fallback and no
   evict list the first fallback entry (JIT: one at a time). Returns the count. */
RSDI_PRIVATE int rsdi_rc_take_victims_ex(rsd_reconcile *r, bool use_fallback) {
    const int16_t *list = r->plan.evict;
    int cnt = r->plan.n_evict, i, k, added = 0;
    if (cnt == 0 && use_fallback && r->plan.n_fallback > 0) {
        list = r->plan.fallback;
        cnt = 1;
    }
    for (i = 0; i < cnt && r->n_victims < RSD_MAX_RESIDENTS; i++) {
        int e = list[i], li;
        const rsd_resident *res;
        uint64_t mask = 0;
        if (e < 0 || e >= r->facts.n_residents) continue;
        res = &r->res[e];
        for (k = 0; k < r->cx.n_ours && k < 64; k++)
            if (rsdi_names(rsd_str_c(rsdi_rc_row(r, r->ours, k)), res->model_id, res->aliases, res->n_aliases))
                mask |= (uint64_t)1 << k;
        li = r->res_listing[e];
        if (!(r->victims[r->n_victims] = rsdi_rc_id(r, res->model_id, r->id_bytes)) ||
            !(r->victim_inst[r->n_victims] =
                  li >= 0 && li < r->snap.n ? rsdi_rc_id(r, r->snap.models[li].instance, r->id_bytes) : ""))
            break; /* ids_full: the caller degrades */
        r->victim_ours[r->n_victims++] = mask;
        added++;
    }
    return added;
}

RSDI_PRIVATE int rsdi_rc_take_victims(rsd_reconcile *r) { return rsdi_rc_take_victims_ex(r, false); }

/* Did the new plan change what would be done (decision, reason, victims from `from`)? */
RSDI_PRIVATE bool rsdi_rc_plan_changed(rsd_reconcile *r, rsd_decision d, rsd_reason why, int from) {
    int i;
    if (r->plan.decision != d || r->plan.reason != why || r->plan.n_evict != r->n_victims - from) return true;
    for (i = 0; i < r->plan.n_evict; i++) {
        int e = r->plan.evict[i];
        if (e < 0 || e >= r->facts.n_residents ||
            !rsd_str_eq_c(r->res[e].model_id, rsdi_rc_row(r, r->victims, from + i)))
            return true;
    }
    return false;
}

RSDI_PRIVATE void rsdi_rc_schedule(rsd_reconcile *r, uint64_t now_ms, uint32_t delay);
RSDI_PRIVATE void rsdi_rc_load_failed(rsd_reconcile *r, int err, const char *msg, uint64_t now_ms);
RSDI_PRIVATE void rsdi_rc_backoff_done(rsd_reconcile *r, uint64_t now_ms);

RSDI_PRIVATE void rsdi_rc_wait(rsd_reconcile *r, int ctx, const char *model, uint64_t now_ms) {
    const rsd_listing *l = r->last_list;
    int k = l ? rsd_listing_find(l, rsd_str_c(model)) : -1;
    rsdi_cpy(r->wait_model, sizeof r->wait_model, model);
    r->after_wait = ctx;
    r->wait_state = RSD_MODEL_UNKNOWN;
    /* failed:true listed before the wait is not proof of this load failing */
    r->wait_pre_failed = k >= 0 && l->models[k].state == RSD_MODEL_FAILED;
    r->wait_pre_has_exit = k >= 0 && l->models[k].has_exit_code;
    r->wait_pre_exit = r->wait_pre_has_exit ? l->models[k].exit_code : 0;
    r->wait_fresh = !r->wait_pre_failed;
    r->wait_t0 = now_ms;
    r->poll_delay = RSD_RECONCILE_POLL_FIRST_MS;
    r->wait_deadline = ctx == RSDI_W_RESTORE ? r->restore_deadline : r->deadline;
    rsdi_rc_schedule(r, now_ms, r->poll_delay);
}

/* A notice when the keep runs with less context than requested: the server's preset
   sets it, and the server says nothing. Once per reconcile. */
RSDI_PRIVATE void rsdi_rc_context_check(rsd_reconcile *r) {
    const rsd_listing *l = r->last_list;
    uint32_t want = r->result.load_context ? r->result.load_context : r->cx.context_length, have;
    int k;
    if (r->ctx_noticed || !want || !l) return;
    k = rsd_listing_find(l, rsd_str_c(r->keep));
    if (k < 0 || !rsd_model_state_resident(l->models[k].state)) return;
    have = l->models[k].context_length;
    if (!have || have >= want) return;
    r->ctx_noticed = true;
    rsd_reconcile_add_notice(r, RSD_DMSG_CONTEXT, RSD_NOTICE_STRESS, RSD_LEVEL_WARNING, r->keep,
                       "'%s' on '%s' runs with a context of %u tokens, less than the %u requested; the "
                       "server's own setting for the model decides it, not this request.",
                       r->keep, r->target_id, (unsigned)have, (unsigned)want);
}

RSDI_PRIVATE void rsdi_rc_success(rsd_reconcile *r, uint64_t now_ms) {
    r->result.outcome = RSD_OUTCOME_RESIDENT;
    r->result.error = RSD_OK;
    if (r->posted && !r->result.loaded) {
        r->result.loaded = true;
        rsd_reconcile_attr(r, true, r->keep, r->keep_instance);
    }
    rsdi_rc_context_check(r);
    rsdi_rc_finish(r, now_ms);
}

#if !defined(RSD_NO_LMSTUDIO)
/* ---- load first (RSD_RT_LOAD_FIRST) ---- */
/* The keep is loaded before anything is freed. A failed load lists again (LIMIT): an
   instance that landed late is adopted, else the next candidate's owned instances are
   unloaded one by one (UNLOAD) and the keep loaded again, else one plain load is tried
   again, else LOAD_FAILED. Listings go to rt->catalog, the decision to rt->gate.
   Compiled out with RSD_NO_LMSTUDIO (begin then refuses the flag). */

/* "POST <url>: timed out", or "HTTP <status>" (an answer load_answer gave no reason for). */
RSDI_PRIVATE void rsdi_lf_why(rsd_reconcile *r, int transport, int status, char *buf, size_t cap) {
    if (transport < 0) (void)RSD_SNPRINTF(buf, cap, "%s %.300s: %s", r->step.http.method, r->url, rsd_result_str(transport));
    else (void)RSD_SNPRINTF(buf, cap, "HTTP %d", status);
}

/* Observe only: the target could not be read (an id that did not fit is why, whatever msg). */
RSDI_PRIVATE void rsdi_lf_degrade(rsd_reconcile *r, int err, const char *msg, uint64_t now_ms) {
    char full[160];
    if (r->ids_full) {
        (void)RSD_SNPRINTF(full, sizeof full, RSDI_IDS_FULL_FMT, (unsigned long)r->ids_cap);
        msg = full;
        err = RSD_ERR_TOO_LARGE;
    }
    r->result.outcome = RSD_OUTCOME_DEGRADED;
    r->result.error = err < 0 ? err : RSD_ERR_PAYLOAD;
    if (r->result.decision == RSD_DECISION_NONE) r->result.decision = RSD_DECISION_OBSERVE;
    rsdi_cpy(r->result.message, sizeof r->result.message, msg);
    rsd_reconcile_add_notice(r, RSD_DMSG_DEGRADED, RSD_NOTICE_DEGRADED, RSD_LEVEL_INFO, NULL,
                             "%s target '%s' could not be read (%s); observing only, nothing changed.", r->rt->label,
                             r->target_id, msg);
    rsdi_logf(&r->logger, RSD_LOG_INFO, RSD_LOGITEM_DRIVER_DEGRADED, RSDI_WHERE, "%s", msg);
    rsdi_rc_finish(r, now_ms);
}

/* Remember (model, inst) as owned for the rest of this reconcile. */
RSDI_PRIVATE void rsdi_lf_own(rsd_reconcile *r, const char *model, const char *inst) {
    rsd_owned *o = &r->lms->owned[r->cx.n_owned];
    if (r->cx.n_owned >= (int)(sizeof r->lms->owned / sizeof r->lms->owned[0])) return;
    if (!(o->model = rsdi_rc_idc(r, model)) || !(o->instance = rsdi_rc_idc(r, inst))) return;
    r->cx.n_owned++;
}

RSDI_PRIVATE void rsdi_lf_disown(rsd_reconcile *r, const char *inst) {
    rsd_owned *o = r->lms->owned;
    int i;
    for (i = 0; i < r->cx.n_owned; i++)
        if (strcmp(o[i].instance, inst) == 0) {
            o[i] = o[--r->cx.n_owned];
            return;
        }
}

/* Every load failed: the deadline passing before any was sent is DEGRADED (nothing was
   tried nor changed); else LOAD_FAILED and the restore loop. */
RSDI_PRIVATE void rsdi_lf_load_failed(rsd_reconcile *r, uint64_t now_ms) {
    if (r->load_attempts == 0 && !r->result.mutated && r->result.n_evicted == 0) {
        rsdi_lf_degrade(r, r->fail_error < 0 ? r->fail_error : RSD_ERR_TIMEOUT, r->fail_reason, now_ms);
        return;
    }
    rsdi_cpy(r->result.wire_id, sizeof r->result.wire_id, r->keep);
    rsdi_rc_load_failed(r, r->fail_error < 0 ? r->fail_error : RSD_ERR_LOAD_REJECTED, r->fail_reason, now_ms);
}
#endif /* RSD_NO_LMSTUDIO */

RSDI_PRIVATE void rsdi_rc_do_load(rsd_reconcile *r, uint64_t now_ms) {
    if (!(r->rt->flags & RSD_RT_LOAD) || r->keep_state == RSD_MODEL_LOADED ||
        r->keep_state == RSD_MODEL_SLEEPING) { /* no POST, no pinned pass */
        rsdi_rc_success(r, now_ms);
        return;
    }
    if (r->keep_state == RSD_MODEL_LOADING && (r->rt->flags & RSD_RT_WAIT)) {
        rsdi_rc_wait(r, RSDI_W_KEEP, r->keep, now_ms);
        return;
    }
    if (now_ms >= r->deadline) {
#ifndef RSD_NO_LMSTUDIO
        if (r->rt->flags & RSD_RT_LOAD_FIRST) {
            r->fail_error = RSD_ERR_TIMEOUT;
            rsdi_cpy(r->fail_reason, sizeof r->fail_reason, "the reconcile deadline passed before the load");
            rsdi_lf_load_failed(r, now_ms);
            return;
        }
#endif
        rsdi_rc_load_failed(r, RSD_ERR_TIMEOUT, "the reconcile deadline passed before the load", now_ms);
        return;
    }
    r->load_attempts++;
    r->poll_fresh = false;
    if (!(r->rt->flags & RSD_RT_LOAD_FIRST)) {
        rsdi_rc_issue_http(r, RSDI_PH_LOAD, RSD_OP_LOAD, r->keep, now_ms);
        return;
    }
    r->result.load_attempts = (uint32_t)r->load_attempts;
    rsdi_rc_issue_http(r, RSDI_PH_LOAD, RSD_OP_LOAD, r->result.model_key, now_ms);
}

/* A free reconcile's unloads are done: what they freed (the listed sizes of what went). */
RSDI_PRIVATE void rsdi_rc_freed(rsd_reconcile *r, uint64_t now_ms) {
    int k, i;
    r->result.freed_bytes = 0;
    for (k = 0; k < r->result.n_evicted; k++)
        for (i = 0; i < r->facts.n_residents; i++) {
            uint64_t b = r->res[i].has_size_vram ? r->res[i].size_vram_bytes : r->res[i].has_size ? r->res[i].size_bytes : 0;
            if (!r->result.evicted[k].displaced && rsd_str_eq_c(r->res[i].model_id, r->result.evicted[k].id))
                r->result.freed_bytes = r->result.freed_bytes > UINT64_MAX - b ? UINT64_MAX : r->result.freed_bytes + b;
        }
    r->result.outcome = r->result.n_evicted ? RSD_OUTCOME_FREED : RSD_OUTCOME_DECLINED;
    r->result.error = RSD_OK;
    rsdi_rc_finish(r, now_ms);
}

RSDI_PRIVATE void rsdi_rc_next_unload(rsd_reconcile *r, uint64_t now_ms) {
    if (r->vi < r->n_victims) {
        if (now_ms >= r->deadline) {
            if (r->free_bytes) { /* nothing to restore: what went is freed */
                rsdi_rc_freed(r, now_ms);
                return;
            }
            rsdi_rc_load_failed(r, RSD_ERR_TIMEOUT, "the reconcile deadline passed while unloading", now_ms);
            return;
        }
        rsdi_rc_issue_http(r, RSDI_PH_UNLOAD, RSD_OP_UNLOAD, rsdi_rc_row(r, r->victims, r->vi), now_ms);
        return;
    }
    if (r->free_bytes) rsdi_rc_freed(r, now_ms);
    else rsdi_rc_do_load(r, now_ms);
}

/* Start mutating on the current plan (after the lock, or without one). */
RSDI_PRIVATE void rsdi_rc_mutate(rsd_reconcile *r, uint64_t now_ms) {
    int i, v;
    r->n_victims = 0;
    r->vi = 0;
    rsdi_rc_take_victims(r);
    r->n_pinned = 0;
    for (i = 0; i < r->facts.n_residents && r->n_pinned < RSD_MAX_RESIDENTS; i++) { /* snapshot */
        bool victim = false;
        if (r->plan.cls[i].protection == RSD_PROTECT_NONE || r->plan.cls[i].is_keep) continue;
        for (v = 0; v < r->n_victims && !victim; v++) victim = rsd_str_eq_c(r->res[i].model_id, rsdi_rc_row(r, r->victims, v));
        if (victim) continue; /* the plan evicts it: not displaced when it goes */
        if (!(r->pinned[r->n_pinned] = rsdi_rc_id(r, r->res[i].model_id, r->id_bytes))) break;
        r->pinned_tag[r->n_pinned++] = r->plan.cls[i].protection == RSD_PROTECT_TAG;
    }
    if (r->ids_full) {
        rsdi_rc_degrade(r, RSD_ERR_TOO_LARGE, now_ms, RSDI_IDS_FULL_FMT, (unsigned long)r->ids_cap);
        return;
    }
    rsdi_rc_next_unload(r, now_ms);
}

RSDI_PRIVATE void rsdi_rc_lock(rsd_reconcile *r) {
    r->phase = RSDI_PH_LOCK;
    r->locked = true;
    rsdi_rc_step(r, RSD_STEP_LOCK);
    r->step.key = r->key;
    r->step.deadline_ms = r->deadline;
}

/* A plan that changes the server: take the lock first when one is wanted, else mutate. */
RSDI_PRIVATE void rsdi_rc_lock_or_mutate(rsd_reconcile *r, bool under_lock, uint64_t now_ms) {
    if (r->want_lock && !under_lock) rsdi_rc_lock(r);
    else rsdi_rc_mutate(r, now_ms);
}

/* After a decision: end, wait read-only, lock, or mutate. */
RSDI_PRIVATE void rsdi_rc_after_decide(rsd_reconcile *r, bool under_lock, uint64_t now_ms) {
    switch (r->plan.decision) {
    case RSD_DECISION_OBSERVE:
        r->result.outcome = RSD_OUTCOME_OBSERVED;
        rsdi_rc_finish(r, now_ms);
        return;
    case RSD_DECISION_DECLINE:
        r->result.outcome = RSD_OUTCOME_DECLINED;
        if (r->n_notices > 0) rsdi_cpy(r->result.message, sizeof r->result.message, r->notices[r->n_notices - 1].text);
        rsdi_rc_finish(r, now_ms);
        return;
    case RSD_DECISION_ALREADY_RESIDENT:
        if (r->keep_state == RSD_MODEL_LOADING && (r->rt->flags & RSD_RT_WAIT)) {
            rsdi_rc_wait(r, RSDI_W_KEEP_RO, r->keep, now_ms); /* read-only, no lock */
            return;
        }
        rsdi_rc_success(r, now_ms);
        return;
    case RSD_DECISION_FREE:
        if (!r->plan.n_evict) { /* nothing this library loaded can go */
            r->result.outcome = RSD_OUTCOME_DECLINED;
            if (r->n_notices > 0) rsdi_cpy(r->result.message, sizeof r->result.message, r->notices[r->n_notices - 1].text);
            rsdi_rc_finish(r, now_ms);
            return;
        }
        rsdi_rc_lock_or_mutate(r, under_lock, now_ms);
        return;
    case RSD_DECISION_LOAD:
    case RSD_DECISION_LOAD_AFTER_EVICT:
        if (r->keep_state == RSD_MODEL_DOWNLOADING && (r->rt->flags & RSD_RT_WAIT)) {
            r->dl_seen = true; /* nothing is evicted for a model that is not there yet: wait, then decide again */
            rsdi_rc_wait(r, RSDI_W_DOWNLOAD, r->keep, now_ms);
            return;
        }
        rsdi_rc_lock_or_mutate(r, under_lock, now_ms);
        return;
    default:
        rsdi_rc_degrade(r, RSD_ERR_STATE, now_ms, "no decision");
        return;
    }
}

/* Protected residents of the decision (tag pins and caller-protected ids, neither the
   keep nor a victim) that the latest listing (r->poll) no longer shows resident: the
   server displaced them. Each is added to result.evicted with displaced = true. */
RSDI_PRIVATE int rsdi_rc_mark_displaced(rsd_reconcile *r) {
    int i, j, k, gone = 0;
    for (i = 0; i < r->n_pinned; i++) {
        bool dup = false;
        rsd_evicted *e;
        k = rsd_listing_find(&r->poll, rsd_str_c(rsdi_rc_row(r, r->pinned, i)));
        if (k >= 0 && rsd_model_state_resident(r->poll.models[k].state)) continue;
        for (j = 0; j < r->result.n_evicted && !dup; j++) dup = strcmp(r->result.evicted[j].id, rsdi_rc_row(r, r->pinned, i)) == 0;
        if (dup || !(e = rsdi_rc_ev_add(r, rsdi_rc_row(r, r->pinned, i), -1, RSDI_PIN_GONE))) continue;
        e->displaced = true;
        gone++;
    }
    return gone;
}

/* "pinned" for a tag-pinned model, "protected" for a caller-protected one. */
RSDI_PRIVATE const char *rsdi_rc_prot_word(const rsd_reconcile *r, const char *id) {
    int i;
    for (i = 0; i < r->n_pinned; i++)
        if (strcmp(rsdi_rc_row(r, r->pinned, i), id) == 0) return r->pinned_tag[i] ? "pinned" : "protected";
    return "protected";
}

RSDI_PRIVATE void rsdi_rc_restore_end(rsd_reconcile *r, uint64_t now_ms);

/* The one restore loop, over result.evicted[] in order. After a failed load (keep_ok
   false) every model that left is loaded back, bounded by restore_deadline;
   after a successful one only the displaced protected models, and only while a free
   slot is known (pin_room), since a load into a full router makes it evict by its own
   LRU, perhaps the keep just loaded. */
RSDI_PRIVATE void rsdi_rc_next_restore(rsd_reconcile *r, uint64_t now_ms) {
    while (r->ri < r->result.n_evicted) {
        rsd_evicted *e = &r->result.evicted[r->ri];
        if (!e->restored && (!r->keep_ok || e->displaced)) {
            if (r->keep_ok && r->pin_room <= 0) r->ev_state[r->ri] = RSDI_PIN_NO_ROOM;
            else if (now_ms >= r->restore_deadline) r->ev_state[r->ri] = RSDI_PIN_LATE;
            else {
                if (r->keep_ok) r->pin_room--;
                rsdi_rc_issue_http(r, RSDI_PH_RESTORE, RSD_OP_LOAD, e->model[0] ? e->model : e->id, now_ms);
                return;
            }
        }
        r->ri++;
    }
    rsdi_rc_restore_end(r, now_ms);
}

/* The restore loop is over: notices (for our own evictions after a failed load;
   one per displaced protected model), then, after a success, make sure the keep survived. */
RSDI_PRIVATE void rsdi_rc_restore_end(rsd_reconcile *r, uint64_t now_ms) {
    char ok[RSD_RECONCILE_NOTICE_TEXT_MAX], bad[RSD_RECONCILE_NOTICE_TEXT_MAX];
    size_t no = 0, nb = 0;
    int i, k;
    ok[0] = bad[0] = '\0';
    for (i = 0; i < r->result.n_evicted && !r->keep_ok; i++) {
        bool good = r->result.evicted[i].restored;
        char *b = good ? ok : bad;
        size_t *n = good ? &no : &nb;
        int w;
        if (r->result.evicted[i].displaced || *n >= sizeof ok - 1) continue;
        w = RSD_SNPRINTF(b + *n, sizeof ok - *n, "%s'%s'", *n ? ", " : "",
                         r->result.evicted[i].model[0] ? r->result.evicted[i].model : r->result.evicted[i].id);
        if (w < 0) continue;
        *n += (size_t)w;
        if (*n > sizeof ok - 1) *n = sizeof ok - 1;
    }
    if (no) { /* restored, with its own kind */
        rsd_reconcile_add_notice(r, RSD_DMSG_RESTORED, RSD_NOTICE_RESTORED, RSD_LEVEL_WARNING, NULL,
                           "loading '%s' on '%s' failed (%s); restored %s so the target keeps serving.",
                           r->result.model_key, r->target_id, r->fail_reason, ok);
        rsdi_rc_last_detail(r, RSD_DMSG_RESTORED, RSD_DETAIL_RESTORED);
        rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_RESTORE, RSDI_WHERE, "restored %s", ok);
    }
    if (nb) {
        rsd_reconcile_add_notice(r, RSD_DMSG_UNRESTORED, RSD_NOTICE_WILL_NOT_FIT, RSD_LEVEL_ERROR, NULL,
                           "loading '%s' on '%s' failed (%s) and %s could not be restored; the target may "
                           "now serve nothing. Reload it on the server.",
                           r->result.model_key, r->target_id, r->fail_reason, bad);
        rsdi_rc_last_detail(r, RSD_DMSG_UNRESTORED, RSD_DETAIL_UNRESTORED);
    }
    for (i = 0; i < r->result.n_evicted; i++) {
        const rsd_evicted *e = &r->result.evicted[i];
        int st = r->ev_state[i];
        if (!e->displaced) continue;
        /* one notice: reloaded, or not and why */
        rsd_reconcile_add_notice(r, e->restored ? RSD_DMSG_RESTORED : RSD_DMSG_UNRESTORED,
                                 e->restored ? RSD_NOTICE_RESTORED : RSD_NOTICE_SWAP,
                                 e->restored ? RSD_LEVEL_INFO : RSD_LEVEL_WARNING, e->id,
                                 e->restored ? "loading '%s' on '%s' displaced %s '%s'; reloaded it into a free slot.%s"
                                 : "loading '%s' on '%s' displaced %s '%s', and residency did not reload it: %s. "
                                   "Reload it on the server, or raise the server's model limit.",
                                 r->keep, r->target_id, rsdi_rc_prot_word(r, e->id), e->id,
                                 e->restored ? ""
                                 : st == RSDI_PIN_NO_ROOM ? "the server has no free slot it knows of, and a reload "
                                                            "could evict the requested model"
                                 : st == RSDI_PIN_FAILED ? "its reload failed" : "the deadline passed");
        rsdi_rc_last_detail(r, e->restored ? RSD_DMSG_RESTORED : RSD_DMSG_UNRESTORED,
                            e->restored ? RSD_DETAIL_RESTORED : RSD_DETAIL_SWAPPED_OUT | RSD_DETAIL_UNRESTORED);
    }
    if (!r->keep_ok) {
        rsdi_rc_finish(r, now_ms);
        return;
    }
    if (r->n_reloaded > 0 && /* r->poll: the listing that showed the last reload done */
        ((k = rsd_listing_find(&r->poll, rsd_str_c(r->keep))) < 0 ||
         !rsd_model_state_resident(r->poll.models[k].state))) { /* only a concurrent change gets here */
        if (now_ms < r->deadline && r->load_attempts - r->busy_tries < RSD_RECONCILE_LOAD_ATTEMPTS) {
            rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_RESTORE, RSDI_WHERE,
                      "%s: '%s' was displaced after the pinned pass; loading it again", r->key, r->keep);
            r->keep_state = RSD_MODEL_UNLOADED;
            r->keep_ok = false;
            rsdi_rc_do_load(r, now_ms); /* the keep wins; pinned_done: no second pass */
            return;
        }
        r->result.outcome = RSD_OUTCOME_LOAD_FAILED;
        r->result.error = RSD_ERR_DISPLACED;
        (void)RSD_SNPRINTF(r->result.message, sizeof r->result.message, "'%s' was displaced after it loaded",
                           r->keep);
        rsd_reconcile_add_notice(r, RSD_DMSG_LOAD_FAILED, RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR, NULL,
                           "loading '%s' on '%s' failed: %s", r->keep, r->target_id, r->result.message);
        rsdi_rc_finish(r, now_ms);
        return;
    }
    rsdi_rc_success(r, now_ms);
}

RSDI_PRIVATE void rsdi_rc_load_failed(rsd_reconcile *r, int err, const char *msg, uint64_t now_ms) {
    r->result.outcome = RSD_OUTCOME_LOAD_FAILED;
    r->result.error = err < 0 ? err : RSD_ERR_LOAD_FAILED;
    rsdi_cpy(r->fail_reason, sizeof r->fail_reason, msg);
    rsdi_cpy(r->result.message, sizeof r->result.message, msg); /* the load's own error */
    rsd_reconcile_add_notice(r, RSD_DMSG_LOAD_FAILED, RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_ERROR, NULL,
                       "loading '%s' on '%s' failed: %s", r->result.model_key, r->target_id, msg);
    rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_LOAD_FAILED, RSDI_WHERE, "%s: %s", r->result.model_key,
              msg);
    r->keep_ok = false;
    r->ri = 0;
    r->restore_deadline = now_ms + r->restore_ms;
    /* a load the server acted on may have displaced protected models too (its own LRU):
       look at a listing newer than the load POST, reading one when no poll gave it */
    if (r->n_pinned > 0 && r->load_attempts > 0 && (r->rt->flags & RSD_RT_PINNED_PASS)) {
        if (!r->poll_fresh) {
            rsdi_rc_issue_http(r, RSDI_PH_CHECK, RSD_OP_LIST, "", now_ms);
            return;
        }
        (void)rsdi_rc_mark_displaced(r);
    }
    if (r->result.n_evicted > 0) {
        rsdi_rc_next_restore(r, now_ms);
        return;
    }
    rsdi_rc_finish(r, now_ms);
}

/* The protected pass: after the keep loaded, look at the listing that showed it loaded
   (no extra request) for protected residents of the decision that are gone. */
RSDI_PRIVATE void rsdi_rc_pinned_pass(rsd_reconcile *r, uint64_t now_ms) {
    int i, n_res = 0;
    r->pinned_done = true;
    r->keep_ok = true;
    if (!rsdi_rc_mark_displaced(r)) {
        rsdi_rc_success(r, now_ms);
        return;
    }
    for (i = 0; i < r->poll.n; i++) n_res += rsd_model_state_resident(r->poll.models[i].state);
    /* A reload into a full server makes it evict by its own LRU, perhaps the keep:
       reload only into slots known to be free (capacity unknown = none known). */
    r->pin_room = r->unlimited ? RSD_MAX_RESIDENTS
                : r->max_instances > (uint32_t)n_res ? (int)(r->max_instances - (uint32_t)n_res) : 0;
    r->ri = 0;
    r->n_reloaded = 0;
    r->restore_deadline = r->deadline;
    rsdi_rc_next_restore(r, now_ms);
}

RSDI_PRIVATE void rsdi_rc_wait_ok(rsd_reconcile *r, uint64_t now_ms) {
    switch (r->after_wait) {
    case RSDI_W_KEEP:
        if ((r->rt->flags & RSD_RT_PINNED_PASS) && r->n_pinned > 0 && !r->pinned_done) {
            rsdi_rc_pinned_pass(r, now_ms);
            return;
        }
        rsdi_rc_success(r, now_ms);
        return;
    case RSDI_W_RESTORE:
        r->result.evicted[r->ri].restored = true;
        r->ev_state[r->ri++] = RSDI_PIN_RELOADED;
        r->n_reloaded++;
        rsdi_rc_next_restore(r, now_ms);
        return;
    case RSDI_W_GONE: /* the victim is listed unloaded: the next unload, or the load */
        r->vi++;
        rsdi_rc_next_unload(r, now_ms);
        return;
    default:
        rsdi_rc_success(r, now_ms);
        return;
    }
}

RSDI_PRIVATE void rsdi_rc_wait_failed(rsd_reconcile *r, int err, const char *msg, uint64_t now_ms) {
    switch (r->after_wait) {
    case RSDI_W_RESTORE:
        r->ev_state[r->ri++] = err == RSD_ERR_TIMEOUT ? RSDI_PIN_LATE : RSDI_PIN_FAILED;
        rsdi_rc_next_restore(r, now_ms);
        return;
    default:
        rsdi_rc_load_failed(r, err, msg, now_ms);
        return;
    }
}

/* Next poll after delay, never past the wait's deadline (the last poll is at it). */
RSDI_PRIVATE void rsdi_rc_schedule(rsd_reconcile *r, uint64_t now_ms, uint32_t delay) {
    if (now_ms >= r->wait_deadline) {
        char msg[RSD_MODEL_ID_MAX + 64];
        (void)RSD_SNPRINTF(msg, sizeof msg, "timed out waiting for '%s' to %s%s", r->wait_model,
                           r->after_wait == RSDI_W_GONE ? "unload" : "load",
                           r->wait_state == RSD_MODEL_DOWNLOADING ? " (still downloading)" : "");
        rsdi_rc_wait_failed(r, RSD_ERR_TIMEOUT, msg, now_ms);
        return;
    }
    r->wake = now_ms + delay;
    if (r->wake > r->wait_deadline) r->wake = r->wait_deadline;
    r->phase = RSDI_PH_WAIT;
    rsdi_rc_step(r, RSD_STEP_WAIT);
    r->step.wake_ms = r->wake;
    r->step.wait_model = r->wait_model;
}

RSDI_PRIVATE void rsdi_rc_issue_http(rsd_reconcile *r, int phase, rsd_http_op op, const char *model,
                                     uint64_t now_ms) {
    bool restoring = phase == RSDI_PH_RESTORE || phase == RSDI_PH_CHECK ||
                     (phase == RSDI_PH_POLL && r->after_wait == RSDI_W_RESTORE);
    uint64_t left = rsdi_rc_left(restoring ? r->restore_deadline : r->deadline, now_ms), t;
    int rc;
    rsdi_rc_step(r, RSD_STEP_HTTP);
    r->step.http.op = op;
    r->step.http.model = model ? model : "";
    r->ans_len = 0;
    r->ans_state = RSDI_ANS_WHOLE;
    r->cx.op_instance = phase == RSDI_PH_UNLOAD && r->vi < r->n_victims ? rsdi_rc_row(r, r->victim_inst, r->vi) : "";
    r->cx.op_evicted = phase == RSDI_PH_RESTORE && r->ri < r->result.n_evicted ? &r->result.evicted[r->ri] : NULL;
    rc = r->rt->request(&r->cx, op, model, &r->step.http);
    if (rc < 0) { /* cannot even build it: nothing was sent */
        r->result.error = rc;
        rsdi_cpy(r->result.message, sizeof r->result.message, "cannot build the request URL");
        if (r->result.mutated) rsdi_rc_finish(r, now_ms);
        else rsdi_rc_degrade(r, rc, now_ms, "cannot build the request URL");
        return;
    }
    /* a probe sent again after a timeout gets twice the time (rsdi_rc_probe_retry) */
    t = (op == RSD_OP_LOAD || op == RSD_OP_UNLOAD) ? left : (uint64_t)r->probe_ms << r->probe_tries;
    if (t > left) t = left;
    if (t < 1) t = 1;
    r->step.http.timeout_ms = t > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)t;
    r->phase = phase;
    r->result.requests++;
}

/* The root URL of base_url: the runtime's rule, or without trailing '/' and one "/v1". */
RSDI_PRIVATE int rsdi_rc_root(const rsd_runtime *rt, const char *base_url, char *out, size_t cap) {
    if (rt->root) return rt->root(base_url, out, cap) < 0 ? RSD_ERR_URL : RSD_OK;
    if (strlen(base_url) + 32 > cap) return RSD_ERR_URL;
    return rsd_root_url(rsd_str_c(base_url), out, cap) > 0 ? RSD_OK : RSD_ERR_URL;
}

/* The target key before it is normalised: "<runtime name>|<base URL>", or the root URL for
   a runtime with its own root rule (the shell's migration of old keys builds it too, from
   the runtime's public root hook). */
RSDI_PRIVATE int rsdi_rc_raw_key(const rsd_runtime *rt, const char *base_url, char *raw, size_t cap) {
    char root[RSD_RECONCILE_URL_MAX];
    int rc;
    if (rt->root) { /* keyed by its root */
        if ((rc = rsdi_rc_root(rt, base_url, root, sizeof root)) < 0) return rc;
        base_url = root;
    }
    return RSD_SNPRINTF(raw, cap, "%s|%s", rt->name, base_url) >= (int)cap ? RSD_ERR_BUFFER : RSD_OK;
}

RSD_API int rsd_reconcile_target_key(const rsd_runtime *rt, const char *base_url, char *out, size_t cap) {
    char raw[RSD_RECONCILE_URL_MAX + 64];
    int rc;
    if (!out || !base_url) return RSD_ERR_ARG;
    if (!rt) rt = rsd_runtime_router();
    if ((rc = rsdi_rc_raw_key(rt, base_url, raw, sizeof raw)) < 0) return rc;
    return rsd_target_key_normalise(rsd_str_c(raw), out, cap);
}

/* The ids of ours[0, n) into r->ours ("" and NULL skipped): RSD_ERR_MODEL_ID for one
   max_id_bytes or longer, RSD_ERR_TOO_LARGE when the id arena is full. */
RSDI_PRIVATE int rsdi_rc_copy_ours(rsd_reconcile *r, const char *const *ours, int n) {
    int i;
    r->cx.n_ours = 0;
    for (i = 0; i < n; i++) {
        if (!ours[i] || !ours[i][0]) continue;
        if (strlen(ours[i]) >= r->id_bytes) return RSD_ERR_MODEL_ID;
        if (!(r->ours[r->cx.n_ours] = rsdi_rc_idc(r, ours[i]))) return RSD_ERR_TOO_LARGE;
        r->cx.n_ours++;
    }
    return RSD_OK;
}

/* The owned[0, n) that name an instance into r->lms (at most RSD_RECONCILE_MAX_OWNED):
   RSD_ERR_MODEL_ID for an id RSD_MODEL_ID_MAX or longer, RSD_ERR_TOO_LARGE when the id
   arena is full. */
RSDI_PRIVATE int rsdi_rc_copy_owned(rsd_reconcile *r, const rsd_owned *owned, int n) {
    int i;
    r->cx.n_owned = 0;
    for (i = 0; i < n && r->cx.n_owned < RSD_RECONCILE_MAX_OWNED; i++) {
        rsd_owned *o = &r->lms->owned[r->cx.n_owned];
        const char *mk = owned[i].model ? owned[i].model : "";
        if (!owned[i].instance || !owned[i].instance[0]) continue;
        if (strlen(mk) >= RSD_MODEL_ID_MAX || strlen(owned[i].instance) >= RSD_MODEL_ID_MAX) return RSD_ERR_MODEL_ID;
        if (!(o->model = rsdi_rc_idc(r, mk)) || !(o->instance = rsdi_rc_idc(r, owned[i].instance))) return RSD_ERR_TOO_LARGE;
        r->cx.n_owned++;
    }
    return RSD_OK;
}

/* desc.owned and desc.peers into r->lms (runtimes with instances). */
RSDI_PRIVATE int rsdi_rc_copy_instances(rsd_reconcile *r, const rsd_reconcile_desc *d) {
    rsd_lms_machine *m = r->lms;
    int i, j, rc;
    const char *s;
    m->n_peers = m->n_peer_ids = 0;
    if ((rc = rsdi_rc_copy_owned(r, d->owned, d->n_owned)) < 0) return rc;
    for (i = 0; i < d->n_peers; i++) {
        const rsd_lms_peer *p = &d->peers[i];
        rsd_lms_peer *q = &m->peers[i];
        if ((p->n_instance_ids && !p->instance_ids) || p->n_instance_ids < 0) return RSD_ERR_ARG;
        if (!(s = rsdi_rc_id(r, p->target_id, RSD_MODEL_ID_MAX))) return RSD_ERR_TOO_LARGE;
        q->target_id = rsd_str_c(s);
        q->instance_ids = m->peer_ids + m->n_peer_ids;
        q->n_instance_ids = 0;
        for (j = 0; j < p->n_instance_ids && m->n_peer_ids < RSD_LMS_MAX_PEER_IDS; j++) {
            if (p->instance_ids[j].len >= RSD_MODEL_ID_MAX || !p->instance_ids[j].ptr) continue;
            if (!(s = rsdi_rc_id(r, p->instance_ids[j], RSD_MODEL_ID_MAX))) return RSD_ERR_TOO_LARGE;
            m->peer_ids[m->n_peer_ids++] = rsd_str_c(s);
            q->n_instance_ids++;
        }
        m->n_peers++;
    }
    return RSD_OK;
}

/* The desc's tables: where each count and its pointer are, and the count's maximum. */
static const struct { uint16_t n, p, max; } rsdi_rc_desc_tables[5] = {
    {offsetof(rsd_reconcile_desc, n_protected), offsetof(rsd_reconcile_desc, protected_models), RSD_MAX_PROTECTED},
    {offsetof(rsd_reconcile_desc, n_ours), offsetof(rsd_reconcile_desc, ours), RSD_RECONCILE_MAX_OURS},
    {offsetof(rsd_reconcile_desc, n_last_used), offsetof(rsd_reconcile_desc, last_used), RSD_RECONCILE_MAX_OURS},
    {offsetof(rsd_reconcile_desc, n_owned), offsetof(rsd_reconcile_desc, owned), RSD_RECONCILE_MAX_OWNED},
    {offsetof(rsd_reconcile_desc, n_peers), offsetof(rsd_reconcile_desc, peers), RSD_LMS_MAX_PEERS}};

/* Validate d and copy what the reconcile needs (no I/O). */
RSDI_PRIVATE int rsdi_rc_copy_desc(rsd_reconcile *r, const rsd_reconcile_desc *d, uint64_t now_ms) {
    const rsd_runtime *rt;
    int i, rc;
    if (!d || (!d->keep && !d->free_bytes) || !d->base_url) return RSD_ERR_ARG;
    rt = r->rt = d->runtime ? d->runtime : rsd_runtime_router();
    r->free_bytes = d->keep && d->keep[0] ? 0 : d->free_bytes;
    if (rt->flags & RSD_RT_LOAD_FIRST) { /* its four hooks, the instances' state; never to free bytes */
#ifdef RSD_NO_LMSTUDIO
        return RSD_ERR_ARG; /* the load-first lifecycle is compiled out */
#else
        if (r->free_bytes || !r->lms || !rt->catalog || !rt->gate || !rt->adopt || !rt->free_room) return RSD_ERR_ARG;
#endif
    } else if (!rt->parse_list && !rt->list_end) {
        return RSD_ERR_ARG;
    }
    if (!rt->request || !rt->load_answer || !rt->name || !rt->list_entry != !rt->list_end) return RSD_ERR_ARG;
    for (i = 0; i < 5; i++) { /* each table's count in [0, its maximum], and its pointer set when > 0 */
        int n;
        const void *t;
        memcpy(&n, (const char *)d + rsdi_rc_desc_tables[i].n, sizeof n);
        memcpy(&t, (const char *)d + rsdi_rc_desc_tables[i].p, sizeof t);
        if (n < 0 || n > rsdi_rc_desc_tables[i].max || (n && !t)) return RSD_ERR_ARG;
    }
    r->logger = d->logger;
    r->cache = d->cache;
    if ((!r->free_bytes && !d->keep[0]) || !rsdi_cpy(r->keep, sizeof r->keep, d->keep ? d->keep : "") ||
        (r->lms && d->default_model && strlen(d->default_model) >= RSD_MODEL_ID_MAX))
        return RSD_ERR_MODEL_ID;
    if (r->lms && !(r->lms->default_model = rsdi_rc_idc(r, d->default_model))) return RSD_ERR_TOO_LARGE;
    if ((rc = rsdi_rc_root(rt, d->base_url, r->root, sizeof r->root)) < 0) return rc;
    if (d->target_key && d->target_key[0]) { /* the normalised target key */
        char raw[RSD_RECONCILE_URL_MAX + 64];
        if (!rsdi_cpy(raw, sizeof raw, d->target_key)) return RSD_ERR_BUFFER;
        if ((rc = rsd_target_key_normalise(rsd_str_c(raw), r->key, sizeof r->key)) < 0) return rc;
    } else if ((rc = rsd_reconcile_target_key(rt, d->base_url, r->key, sizeof r->key)) < 0) {
        return rc;
    }
    rsdi_cpy(r->target_id, sizeof r->target_id, d->target_id ? d->target_id : rt->root ? r->root : d->base_url);
    rsdi_cpy(r->runtime_id, sizeof r->runtime_id, d->runtime_id ? d->runtime_id : rt->name);
    r->auth[0] = '\0'; /* bearer: no control bytes (header injection) */
    if (d->bearer && d->bearer[0]) {
        if (strlen(d->bearer) >= RSD_RECONCILE_BEARER_MAX || !rsdi_no_ctl(d->bearer)) return RSD_ERR_ARG;
        (void)RSD_SNPRINTF(r->auth, sizeof r->auth, "Bearer %s", d->bearer);
    }
    r->n_protected = d->n_protected;
    for (i = 0; i < d->n_protected; i++) {
        rsd_str id = d->protected_models[i].model_id;
        if ((!id.ptr && id.len) || id.len >= r->id_bytes) return RSD_ERR_MODEL_ID;
        if (!(r->protected_ids[i] = rsdi_rc_id(r, id, r->id_bytes))) return RSD_ERR_TOO_LARGE;
        r->protected_models[i].model_id.ptr = r->protected_ids[i];
        r->protected_models[i].model_id.len = id.len;
        r->protected_models[i].role = d->protected_models[i].role;
        if ((int)r->protected_models[i].role < 0 || (int)r->protected_models[i].role >= (int)RSD_ROLE_NUM)
            return RSD_ERR_ARG;
    }
    if ((rc = rsdi_rc_copy_ours(r, d->ours, d->n_ours)) < 0) return rc;
    r->n_last = 0;
    for (i = 0; i < d->n_last_used; i++) {
        const char *id = d->last_used[i].model;
        if (!id || !id[0] || !d->last_used[i].used_ms || strlen(id) >= r->id_bytes) continue; /* unusable: unknown */
        if (!(r->last_id[r->n_last] = rsdi_rc_idc(r, id))) return RSD_ERR_TOO_LARGE;
        r->last_ms[r->n_last++] = d->last_used[i].used_ms;
    }
    if (r->lms) { /* else limits.runtime has no instances: desc.owned and desc.peers mean nothing */
        if ((rc = rsdi_rc_copy_instances(r, d)) < 0) return rc;
        r->lms->load = d->load;
    }
    r->optout = rsd_optout_resolve(d->residency_env, d->user_managed);
    r->keep_pinned = d->keep_pinned;
    r->want_lock = d->lock;
    r->has_gen = d->has_generation;
    r->gen = d->has_generation ? d->generation : 0;
    r->commit_gen = r->gen;
    r->cx.context_length = d->context_length ? d->context_length : d->load.context_length;
    r->cx.explicit_load = d->explicit_load;
    r->ctx_max = d->model_max_context;
    r->ctx_ceiling = d->context_ceiling;
    r->ctx_floor = d->context_floor;
    r->kv_per_token = d->kv_bytes_per_token;
    r->cap_bytes = d->capacity_bytes;
    r->keep_bytes = d->keep_bytes;
    r->cap_known = d->capacity_known;
    r->max_instances = d->capacity_known ? d->max_instances : 0;
    r->unlimited = d->capacity_known && d->unlimited;
    r->probe_ms = d->probe_timeout_ms ? d->probe_timeout_ms
                : rt->probe_timeout_ms ? rt->probe_timeout_ms : (uint32_t)RSD_RECONCILE_PROBE_TIMEOUT_MS;
    r->restore_ms = d->restore_ms ? d->restore_ms : rt->restore_ms ? rt->restore_ms : (uint32_t)RSD_RECONCILE_RESTORE_MS;
    r->deadline = now_ms + (d->deadline_ms ? d->deadline_ms
                            : rt->deadline_ms ? rt->deadline_ms : (uint32_t)RSD_RECONCILE_DEADLINE_MS);
    r->restore_deadline = r->deadline;
    rsdi_cpy(r->result.model_key, sizeof r->result.model_key, r->keep);
    rsdi_cpy(r->result.wire_id, sizeof r->result.wire_id, r->keep);
    return RSD_OK;
}

/* The machine's own state back to the start (the zeroes rsdi_rc_reset_run writes are these values). */
typedef char rsdi_rc_run_zero_check[(RSD_MODEL_UNKNOWN == 0 && RSD_OK == 0) ? 1 : -1];
RSDI_PRIVATE void rsdi_rc_reset_run(rsd_reconcile *r) {
    rsd_lms_machine *m = r->lms;
    /* every flag and count false or 0, last_list NULL, keep_state and wait_state
       RSD_MODEL_UNKNOWN, the strings "", plan, facts and rt_data zeroed */
    memset(&r->posted, 0, (size_t)((char *)(&r->rt_data + 1) - (char *)&r->posted));
    r->snap.n = 0;
    r->poll.n = 0;
    r->cx.op_instance = "";
    r->cx.op_evicted = NULL;
    if (!m) return;
    m->tier_try = RSD_LMS_TIER_V1;
    m->ci = m->ui = m->n_cand = m->n_unload = m->evict_mark = m->n_before = m->n_made = 0;
    m->retried_plain = false;
    m->first_err[0] = '\0';
}

/* The tables of a reconcile: sizes with the defaults applied; false = invalid limits. */
typedef struct rsdi_rc_sizes {
    int models, notices;
    size_t arena, body, id, ids, ntext, lists, total;
    uint32_t toks;
    bool lms;                         /* the instances / LM Studio state is allocated */
} rsdi_rc_sizes;

RSDI_PRIVATE size_t rsdi_al8(size_t n) { return (n + 7u) & ~(size_t)7u; }

/* An arena's bytes: those asked, else the default raised to 1 KiB; 0 when the bytes asked
   are under 1 KiB or over 1 GiB. */
RSDI_PRIVATE size_t rsdi_rc_arena(size_t asked, size_t dflt) {
    size_t n = asked ? asked : dflt < 1024 ? 1024 : dflt;
    return n < 1024 || n > ((size_t)1 << 30) ? 0 : n;
}

RSDI_PRIVATE bool rsdi_rc_sizes_of(const rsd_reconcile_limits *limits, rsdi_rc_sizes *z) {
    size_t t;
    rsd_listing_desc ld;
    rsd_reconcile_limits l; /* NULL = the defaults, as all zero */
    const rsd_reconcile_limits *lim = &l;
    if (limits) l = *limits;
    else memset(&l, 0, sizeof l);
    memset(&ld, 0, sizeof ld);
    ld.max_models = lim->max_models;
    ld.arena_bytes = lim->arena_bytes;
    if (!rsdi_listing_sizes(&ld, &z->models, &z->arena)) return false;
    t = lim->max_tokens ? lim->max_tokens : (size_t)RSD_RECONCILE_TOKENS;
    if (t < 64 || t > 0x7FFFFFFFu / sizeof(rsd_json_tok)) return false;
    z->toks = (uint32_t)t;
    z->body = lim->max_body_bytes ? lim->max_body_bytes : (size_t)RSD_RECONCILE_BODY_BYTES;
    if (z->body > RSD_JSON_MAX_BYTES) z->body = RSD_JSON_MAX_BYTES;
    if (z->body < 1024) return false;
    z->lms = !lim->runtime || (lim->runtime->flags & RSD_RT_INSTANCES);
    z->id = lim->max_id_bytes ? lim->max_id_bytes : (size_t)RSD_MODEL_ID_MAX;
    if (z->id < 16 || z->id > (size_t)RSD_MODEL_ID_MAX) return false;
    if (!(z->ids = rsdi_rc_arena(lim->id_arena_bytes, (size_t)z->models * RSD_RECONCILE_IDS_PER_MODEL))) return false;
    z->notices = lim->max_notices ? lim->max_notices : (int)RSD_RECONCILE_MAX_NOTICES;
    if (z->notices < 1 || z->notices > 4096) return false;
    if (!(z->ntext = rsdi_rc_arena(lim->notice_text_bytes, (size_t)z->notices * RSD_RECONCILE_NOTICE_TEXT_AVG)))
        return false;
    /* the two listings' storage holds LM Studio's catalog too (a reconcile on LM Studio lists
       into neither) */
    z->lists = 2 * (rsdi_al8((size_t)z->models * sizeof(rsd_listed_model)) + rsdi_al8(z->arena));
#ifndef RSD_NO_LMSTUDIO
    if (z->lms && z->lists < rsdi_al8(sizeof(rsd_lms_catalog))) z->lists = rsdi_al8(sizeof(rsd_lms_catalog));
#endif
    z->total = rsdi_al8(sizeof(rsd_reconcile_notice) * (size_t)z->notices) + rsdi_al8(z->ntext) +
               rsdi_al8(z->ids) + sizeof(const char *) * (RSD_MAX_PROTECTED + 2 * RSD_RECONCILE_MAX_OURS +
                                                          3 * RSD_MAX_RESIDENTS) +
               (z->lms ? rsdi_al8(sizeof(rsd_lms_machine)) : 0) +
               z->lists + rsdi_al8(z->body) +
               (size_t)z->toks * sizeof(rsd_json_tok);
    return true;
}

RSD_API size_t rsd_reconcile_footprint(const rsd_reconcile_limits *lim) {
    rsdi_rc_sizes z;
    return rsdi_rc_sizes_of(lim, &z) ? rsdi_al8(sizeof(rsd_reconcile)) + z.total : 0;
}

RSD_API int rsd_reconcile_limits_fill(rsd_reconcile_limits *lim) {
    rsdi_rc_sizes z;
    if (!lim || !rsdi_rc_sizes_of(lim, &z)) return RSD_ERR_ARG;
    lim->max_models = z.models;
    lim->arena_bytes = z.arena;
    lim->max_tokens = z.toks;
    lim->max_body_bytes = z.body;
    lim->max_id_bytes = z.id;
    lim->max_notices = z.notices;
    lim->notice_text_bytes = z.ntext;
    lim->id_arena_bytes = z.ids;
    return RSD_OK;
}

/* The next n bytes of a table block (n a multiple of 8). */
RSDI_PRIVATE void *rsdi_rc_carve(unsigned char **at, size_t n) {
    void *p = *at;
    *at += rsdi_al8(n);
    return p;
}

RSD_API int rsd_reconcile_init(rsd_reconcile *r, size_t size, const rsd_reconcile_limits *lim) {
    rsdi_rc_sizes z;
    unsigned char *at;
    if (!r || ((size_t)(uintptr_t)(void *)r & 7u) || !rsdi_rc_sizes_of(lim, &z)) return RSD_ERR_ARG;
    if (size < rsdi_al8(sizeof *r) + z.total) return RSD_ERR_BUFFER;
    memset(r, 0, sizeof *r);
    r->tables = (unsigned char *)r + rsdi_al8(sizeof *r);
    at = (unsigned char *)r->tables;
    r->notices = (rsd_reconcile_notice *)rsdi_rc_carve(&at, sizeof(rsd_reconcile_notice) * (size_t)z.notices);
    r->max_notices = z.notices;
    r->ntext = (char *)rsdi_rc_carve(&at, z.ntext);
    r->ntext_cap = z.ntext;
    r->id_bytes = z.id;
    r->protected_ids = (const char **)rsdi_rc_carve(&at, sizeof(const char *) * RSD_MAX_PROTECTED);
    r->ours = (const char **)rsdi_rc_carve(&at, sizeof(const char *) * RSD_RECONCILE_MAX_OURS);
    r->last_id = (const char **)rsdi_rc_carve(&at, sizeof(const char *) * RSD_RECONCILE_MAX_OURS);
    r->victims = (const char **)rsdi_rc_carve(&at, sizeof(const char *) * RSD_MAX_RESIDENTS);
    r->victim_inst = (const char **)rsdi_rc_carve(&at, sizeof(const char *) * RSD_MAX_RESIDENTS);
    r->pinned = (const char **)rsdi_rc_carve(&at, sizeof(const char *) * RSD_MAX_RESIDENTS);
    r->ids = (char *)rsdi_rc_carve(&at, z.ids);
    r->ids_cap = z.ids;
    r->ans = (char *)rsdi_rc_carve(&at, z.body);
    if (z.lms) {
        r->lms = (rsd_lms_machine *)rsdi_rc_carve(&at, sizeof(rsd_lms_machine));
        memset(r->lms, 0, sizeof *r->lms);
        r->cx.owned = r->lms->owned;
    }
    {
        size_t one = rsdi_al8((size_t)z.models * sizeof(rsd_listed_model)) + rsdi_al8(z.arena);
        unsigned char *shared = (unsigned char *)rsdi_rc_carve(&at, z.lists);
        rsd_listed_model *m1 = (rsd_listed_model *)(void *)shared;
        char *a1 = (char *)shared + rsdi_al8((size_t)z.models * sizeof(rsd_listed_model));
        rsd_listed_model *m2 = (rsd_listed_model *)(void *)(shared + one);
        char *a2 = (char *)shared + one + rsdi_al8((size_t)z.models * sizeof(rsd_listed_model));
        (void)rsd_listing_init(&r->snap, m1, z.models, a1, z.arena);
        (void)rsd_listing_init(&r->poll, m2, z.models, a2, z.arena);
#ifndef RSD_NO_LMSTUDIO
        if (r->lms) {
            r->lms->cat = (rsd_lms_catalog *)(void *)shared;
            rsdi_lms_reset(r->lms->cat);
        }
#endif
    }
    r->toks = (rsd_json_tok *)(void *)at;
    r->max_tokens = z.toks;
    r->max_body = z.body;
    r->only_rt = lim ? lim->runtime : NULL;
    r->phase = RSDI_PH_DONE;
    r->step.kind = RSD_STEP_DONE;
    r->cx.r = r;
    r->cx.root = r->root;
    r->cx.keep = r->keep;
    r->cx.target_id = r->target_id;
    r->cx.ours = r->ours;
    r->cx.op_instance = "";
    r->cx.url = r->url;
    r->cx.body = r->body;
    r->cx.made_instance = r->made_instance;
    r->cx.why = r->fail_reason; /* a load-first hook's reason; the load's, once one fails */
    r->cx.toks = r->toks;
    r->cx.max_tokens = r->max_tokens;
    r->cx.data = r->rt_data.bytes;
    return RSD_OK;
}

RSD_API const rsd_reconcile_result *rsd_reconcile_result_of(const rsd_reconcile *r) { return r ? &r->result : NULL; }

RSD_API int rsd_reconcile_notices(const rsd_reconcile *r, const rsd_reconcile_notice **out) {
    if (out) *out = r ? r->notices : NULL;
    return r ? r->n_notices : 0;
}

RSD_API const char *rsd_reconcile_key(const rsd_reconcile *r) { return r ? r->key : ""; }

RSD_API double rsd_reconcile_progress(const rsd_reconcile *r, const char **stage) {
    if (stage) *stage = r ? r->load_stage : "";
    return r && r->has_load_value ? r->load_value : -1.0;
}

RSD_API void rsd_reconcile_scratch(rsd_reconcile *r, rsd_json_tok **toks, uint32_t *n_toks, char **buf,
                                   size_t *cap) {
    if (!r || !toks || !n_toks || !buf || !cap) return;
    *toks = r->toks;
    *n_toks = r->max_tokens;
    *buf = r->ans;
    *cap = r->max_body;
}

RSD_API rsd_facts *rsd_reconcile_facts(rsd_reconcile *r) { return r ? &r->facts : NULL; }

/* Internal, for residency_http.h: the result's RSD_MAX_RESIDENTS evicted rows, which the
   ensurer borrows while no reconcile runs (an rsd-serve lease lists its stopped models
   there; the next begin clears them). */
RSDI_PRIVATE rsd_evicted *rsdi_rc_evicted_rows(rsd_reconcile *r) { return r->result.evicted; }

RSD_API const rsd_plan *rsd_reconcile_plan(const rsd_reconcile *r) { return r ? &r->plan : NULL; }

RSDI_PRIVATE void rsdi_rc_start(rsd_reconcile *r, uint64_t now_ms);

RSD_API int rsd_reconcile_begin(rsd_reconcile *r, const rsd_reconcile_desc *d, uint64_t now_ms) {
    int rc;
    if (!r) return RSD_ERR_ARG;
    memset(&r->result, 0, sizeof r->result);
    r->n_notices = 0;
    r->result.notices_dropped = 0;
    r->ntext_used = 0;
    r->phase = RSDI_PH_DONE;
    r->t0 = now_ms;
    r->locked = false;
    rsdi_rc_step(r, RSD_STEP_DONE);
    r->result.outcome = RSD_OUTCOME_DEGRADED;
    r->result.error = RSD_ERR_ARG;
    r->step.result = RSD_ERR_ARG;
    r->key[0] = '\0';
    r->cache = NULL;
    if (!r->tables) { /* never given its tables */
        r->result.error = r->step.result = RSD_ERR_STATE;
        rsdi_cpy(r->result.message, sizeof r->result.message,
                 "rsd_reconcile_begin: call rsd_reconcile_init first (it makes the reconcile in its memory)");
        return RSD_ERR_STATE;
    }
    if (d && r->only_rt && (d->runtime ? d->runtime : rsd_runtime_router()) != r->only_rt) {
        (void)RSD_SNPRINTF(r->result.message, sizeof r->result.message,
                           "rsd_reconcile_begin: this reconcile's tables are for the %s runtime only "
                           "(rsd_reconcile_limits.runtime)", r->only_rt->name ? r->only_rt->name : "?");
        return RSD_ERR_ARG;
    }
    r->ids_used = 0; /* the previous run's ids (result.evicted, notices' subjects) go */
    r->ids_full = false;
    if ((rc = rsdi_rc_copy_desc(r, d, now_ms)) < 0) {
        r->result.error = rc;
        r->step.result = rc;
        if (r->ids_full)
            (void)RSD_SNPRINTF(r->result.message, sizeof r->result.message, "rsd_reconcile_begin: " RSDI_IDS_FULL_FMT,
                               (unsigned long)r->ids_cap);
        return rc;
    }
    rsdi_rc_reset_run(r);
    r->result.outcome = RSD_OUTCOME_NONE;
    r->result.error = RSD_OK;
    r->result.decision = RSD_DECISION_NONE;
    r->phase = RSDI_PH_START;
    r->step.kind = RSD_STEP_NONE;
    r->step.result = RSD_OK;
    rsdi_rc_start(r, now_ms); /* the cache (a hit ends it here), else the first request */
    if (d->first_listing) { /* the first listing is in hand: that answer at once */
        if (r->step.kind == RSD_STEP_HTTP && r->step.http.op == RSD_OP_LIST) {
            r->result.requests--; /* not sent: it came with the desc */
            (void)rsd_reconcile_feed(r, RSD_OK, 200, d->first_listing, d->first_listing_len, now_ms);
        }
    }
    return RSD_OK;
}

/* The cache, else the first request. */
RSDI_PRIVATE void rsdi_rc_start(rsd_reconcile *r, uint64_t now_ms) {
    rsd_cache_hit hit;
    if (r->cache && !r->free_bytes && rsd_cache_lookup(r->cache, rsd_str_c(r->key), rsd_str_c(r->keep), now_ms,
                                     r->has_gen ? r->gen : 0, &hit) == 1) { /* no request, no notice */
        r->result.cache_hit = true;
        r->result.decision = hit.decision;
        r->result.would = hit.decision;
        r->result.reason = hit.reason;
        r->result.outcome = (rsd_outcome)hit.outcome;
        r->result.error = hit.error;
        r->result.keep_resident = hit.keep_resident;
        r->result.tier = (rsd_lms_tier)hit.tier;
        r->result.state = (rsd_lms_state)hit.state;
        if (hit.wire_id[0]) rsdi_cpy(r->result.wire_id, sizeof r->result.wire_id, hit.wire_id);
        if (hit.model_key[0]) rsdi_cpy(r->result.model_key, sizeof r->result.model_key, hit.model_key);
        rsdi_logf(&r->logger, RSD_LOG_DEBUG, RSD_LOGITEM_RECONCILE_CACHE_HIT, RSDI_WHERE, "%s %s",
                  r->key, r->keep);
        rsdi_rc_done(r, now_ms);
        return;
    }
#ifndef RSD_NO_LMSTUDIO
    if (r->rt->flags & RSD_RT_LOAD_FIRST) rsdi_lms_reset(r->lms->cat); /* its storage may hold a router's listings */
#endif
    rsdi_rc_issue_http(r, RSDI_PH_LIST, RSD_OP_LIST, "", now_ms);
}

RSD_API rsd_step rsd_reconcile_next(rsd_reconcile *r, uint64_t now_ms) {
    if (!r) {
        rsd_step s;
        memset(&s, 0, sizeof s);
        s.kind = RSD_STEP_DONE;
        s.result = RSD_ERR_ARG;
        return s;
    }
    switch (r->phase) {
    case RSDI_PH_START:
        rsdi_rc_start(r, now_ms);
        break;
    case RSDI_PH_WAIT:
        if (now_ms >= r->wake) rsdi_rc_issue_http(r, RSDI_PH_POLL, RSD_OP_LIST, r->wait_model, now_ms);
        break;
    case RSDI_PH_BACKOFF:
        if (now_ms >= r->wake) rsdi_rc_backoff_done(r, now_ms);
        break;
    case RSDI_PH_COMMIT:
        if (!r->shown) { r->shown = true; break; }
        rsdi_rc_cache_store(r, r->commit_gen, now_ms);
        rsdi_rc_unlock_or_done(r, now_ms);
        if (r->phase == RSDI_PH_UNLOCK) r->shown = true;
        break;
    case RSDI_PH_UNLOCK:
        if (!r->shown) { r->shown = true; break; }
        rsdi_rc_done(r, now_ms);
        break;
    default:
        break; /* an outstanding HTTP or LOCK step, or DONE: the same step again */
    }
    return r->step;
}

/* A loading event's progress, either shape: {"stage":S,"value":V} (later routers, PR
   #24828) or July's {"stages":[...],"current":S,"value":V}. A stage is kept only when it
   is a plain name ([A-Za-z0-9_.-], under RSD_RECONCILE_STAGE_MAX); a value in 0..1. */
RSDI_PRIVATE void rsdi_rc_progress(rsd_reconcile *r, const rsd_json_doc *d) {
    char stage[RSD_RECONCILE_STAGE_MAX];
    size_t n = 0, i;
    double v;
    int p = rsd_json_find(d, 0, "progress"), k;
    if (rsd_json_type_of(d, p) != RSD_JSON_OBJECT) return;
    k = rsd_json_find(d, p, "stage");
    if (rsd_json_type_of(d, k) != RSD_JSON_STRING) k = rsd_json_find(d, p, "current");
    if (rsd_json_type_of(d, k) == RSD_JSON_STRING && rsd_json_str(d, k, stage, sizeof stage, &n) >= 0 && n > 0 &&
        n < sizeof stage) {
        for (i = 0; i < n; i++) {
            char c = stage[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                  c == '.'))
                break;
        }
        if (i == n) memcpy(r->load_stage, stage, n + 1);
    }
    k = rsd_json_find(d, p, "value");
    if (rsd_json_double(d, k, &v) == RSD_OK && v >= 0.0 && v <= 1.0) {
        r->load_value = v;
        r->has_load_value = true;
    }
}

RSD_API int rsd_reconcile_event(rsd_reconcile *r, const char *data, size_t len, uint64_t now_ms) {
    rsd_json_doc doc, sub;
    char model[RSD_MODEL_ID_MAX];
    rsd_str id;
    size_t n = 0;
    int m, st, ki;
    if (!r || (!data && len)) return RSD_ERR_ARG;
    if (r->phase != RSDI_PH_WAIT) return 0;
    if (rsd_json_parse_top(&doc, data ? data : "", len, r->toks, r->max_tokens) < 0 ||
        rsd_json_type_of(&doc, 0) != RSD_JSON_OBJECT)
        return 0;
    m = rsd_json_find(&doc, 0, "model");
    if (rsd_json_type_of(&doc, m) != RSD_JSON_STRING || rsd_json_str(&doc, m, model, sizeof model, &n) < 0)
        return 0;
    id.ptr = model;
    id.len = n;
    if (!rsdi_id_ok(id)) return 0; /* a \u0000 inside: no model's event (strcmp would see a shorter id) */
    if (strcmp(model, "*") != 0 && strcmp(model, r->wait_model) != 0) { /* the same model by another name? */
        ki = rsd_listing_find(&r->snap, rsd_str_c(r->wait_model));
        if (ki < 0 || rsd_listing_find(&r->snap, rsd_str_c(model)) != ki) return 0;
    }
    if (strcmp(model, "*") != 0) r->wait_fresh = true; /* the entry moved: a failed:true after this is news */
    st = rsd_json_find(&doc, 0, "data");
    if (rsd_json_type_of(&doc, st) == RSD_JSON_OBJECT && rsd_json_expand(&doc, st, &sub) == RSD_OK) {
        st = rsd_json_find(&sub, 0, "status");
        if (rsd_json_str_eq(&sub, st, "loading") || rsd_json_str_eq(&sub, st, "downloading")) { /* progress */
            rsdi_rc_progress(r, &sub);
            return 0;
        }
    }
    if (now_ms < r->wake) { /* the listing stays the truth: poll it now */
        r->wake = now_ms;
        r->step.wake_ms = now_ms;
    }
    return 1; /* a wake already due stays due */
}

RSD_API int rsd_reconcile_commit_done(rsd_reconcile *r, uint64_t generation) {
    if (!r || r->phase != RSDI_PH_COMMIT) return RSD_ERR_STATE;
    r->commit_gen = generation;
    return RSD_OK;
}

RSD_API int rsd_reconcile_commit_failed(rsd_reconcile *r, int error, const char *what) {
    if (!r || r->phase != RSDI_PH_COMMIT) return RSD_ERR_STATE;
    r->result.state_error = error < 0 ? error : RSD_ERR_STATE_IO;
    { /* "on LM Studio target 'x'" and "instances residency owns" for a runtime with instances */
        bool inst = (r->rt->flags & RSD_RT_INSTANCES) != 0;
        rsd_reconcile_add_notice(r, RSD_DMSG_STATE_FAILED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                 "could not record this change on %s%s'%s' in the state directory (%s); other "
                                 "processes sharing it may act on a stale view (cached decisions, %s) until the "
                                 "next change is recorded", inst ? r->rt->label : "", inst ? " target " : "",
                                 r->target_id, what && what[0] ? what : rsd_result_str(r->result.state_error),
                                 inst ? "instances residency owns" : "models residency loaded");
    }
    rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_ATTR_WRITE_FAILED, RSDI_WHERE, "%s: %s", r->key,
              what ? what : "");
    return RSD_OK;
}

RSD_API int rsd_reconcile_set_ours(rsd_reconcile *r, const char *const *ours, int n) {
    int i, k, m = 0, rc;
    bool same;
    if (!r || r->phase != RSDI_PH_LOCK) return RSD_ERR_STATE;
    if (n < 0 || n > RSD_RECONCILE_MAX_OURS || (n && !ours)) return RSD_ERR_ARG;
    for (i = 0; i < n; i++)
        if (ours[i] && ours[i][0] && strlen(ours[i]) >= r->id_bytes) return RSD_ERR_ARG;
    for (i = 0; i < n; i++) m += ours[i] && ours[i][0];
    same = m == r->cx.n_ours; /* as sets: every new id is already there (no duplicates are kept) */
    for (i = 0; i < n && same; i++) {
        bool found = !ours[i] || !ours[i][0];
        for (k = 0; k < r->cx.n_ours && !found; k++) found = strcmp(rsdi_rc_row(r, r->ours, k), ours[i]) == 0;
        same = found;
    }
    if (same) return RSD_OK;
    if ((rc = rsdi_rc_copy_ours(r, ours, n)) < 0) return rc; /* the lengths are checked above */
    r->ours_changed = true;
    return RSD_OK;
}

RSD_API int rsd_reconcile_set_owned(rsd_reconcile *r, const rsd_owned *owned, int n) {
    int i, k, c = 0, rc;
    bool same;
    if (!r || r->phase != RSDI_PH_LOCK) return RSD_ERR_STATE;
    if (n < 0 || n > RSD_RECONCILE_MAX_OWNED || (n && !owned)) return RSD_ERR_ARG;
    if (!r->lms) return RSD_OK; /* limits.runtime has no instances: nothing is owned by instance */
    for (i = 0; i < n; i++) {
        if (!owned[i].instance || !owned[i].instance[0]) continue;
        if (strlen(owned[i].instance) >= RSD_MODEL_ID_MAX ||
            (owned[i].model && strlen(owned[i].model) >= RSD_MODEL_ID_MAX))
            return RSD_ERR_ARG;
        c++;
    }
    same = c == r->cx.n_owned; /* as sets of instance ids */
    for (i = 0; i < n && same; i++) {
        bool found = !owned[i].instance || !owned[i].instance[0];
        for (k = 0; k < r->cx.n_owned && !found; k++) found = strcmp(r->lms->owned[k].instance, owned[i].instance) == 0;
        same = found;
    }
    if (same) return RSD_OK;
    if ((rc = rsdi_rc_copy_owned(r, owned, n)) < 0) return rc; /* the lengths are checked above */
    r->ours_changed = true;
    return RSD_OK;
}

#if !defined(RSD_NO_LMSTUDIO)
/* Load first: the answers (see above). */
/* The gate's verdict after a listing: end, degrade, or load (first taking the lock when
   one is wanted and not held). */
RSDI_PRIVATE void rsdi_lf_gate(rsd_reconcile *r, bool under_lock, uint64_t now_ms) {
    int rc;
    rsdi_rc_desc_facts(r); /* the hook adds its listing's part */
    rc = r->rt->gate(&r->cx, under_lock);
    if (under_lock && rc >= 0) r->result.redecided = true; /* decided again on the listing under the lock */
    if (rc > 0) rsdi_rc_finish(r, now_ms);
    else if (rc < 0) rsdi_lf_degrade(r, rc, r->cx.why, now_ms);
    else if (r->want_lock && !under_lock) rsdi_rc_lock(r);
    else rsdi_rc_do_load(r, now_ms);
}

/* The first listing: the catalog by API tier (the hook asks again while a tier is left). */
RSDI_PRIVATE void rsdi_lf_on_list(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                  uint64_t now_ms) {
    int rc;
    if (transport < 0) { /* a dead server costs one timeout, not one per tier */
        rsdi_lf_why(r, transport, 0, r->cx.why, RSD_RECONCILE_TEXT_MAX);
        rsdi_lf_degrade(r, transport, r->cx.why, now_ms);
        return;
    }
    rc = r->rt->catalog(&r->cx, true, status, body, len);
    if (rc > 0) rsdi_rc_issue_http(r, RSDI_PH_LIST, RSD_OP_LIST, "", now_ms);
    else if (rc < 0) rsdi_lf_degrade(r, rc, r->cx.why, now_ms);
    else rsdi_lf_gate(r, false, now_ms);
}

/* The listing under the lock: decided again (an instance that appeared meanwhile is used). */
RSDI_PRIVATE void rsdi_lf_on_relist(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                    uint64_t now_ms) {
    bool ok2xx = transport == RSD_OK && status >= 200 && status <= 299;
    int rc = ok2xx ? r->rt->catalog(&r->cx, false, status, body, len) : RSD_ERR_HTTP_STATUS;
    if (rc < 0) {
        rsdi_lf_why(r, transport, status, r->cx.why, RSD_RECONCILE_TEXT_MAX);
        rsdi_lf_degrade(r, transport < 0 ? transport : rc, r->cx.why, now_ms);
        return;
    }
    rsdi_lf_gate(r, true, now_ms);
}

/* The lock's answer: load on the listing the decision was made on when nothing changed,
   else list again under the lock. */
RSDI_PRIVATE void rsdi_lf_locked(rsd_reconcile *r, bool held, bool unchanged, uint64_t now_ms) {
    if (!held) {
        rsd_reconcile_add_notice(r, RSD_DMSG_LOCK_UNLOCKED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                                 "%s target '%s': proceeding without the cross-process lock.", r->rt->label,
                                 r->target_id);
        rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_LOCK_UNLOCKED, RSDI_WHERE, "%s", r->key);
    }
    if (r->ids_full) rsdi_lf_degrade(r, RSD_ERR_TOO_LARGE, "", now_ms); /* set_owned's did not fit */
    else if (unchanged) rsdi_rc_do_load(r, now_ms);
    else rsdi_rc_issue_http(r, RSDI_PH_RELIST, RSD_OP_LIST, "", now_ms);
}

/* The keep's load: loaded (the instance it made is ours), or list again (LIMIT). */
RSDI_PRIVATE void rsdi_lf_on_load(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                  uint64_t now_ms) {
    bool ok2xx = transport == RSD_OK && status >= 200 && status <= 299;
    rsd_load_answer a;
    r->made_instance[0] = '\0';
    r->cx.why[0] = '\0'; /* load_answer may say why the server refused (the failure's reason) */
    a = transport == RSD_OK ? r->rt->load_answer(&r->cx, status, body, len) : RSD_LOAD_REJECTED;
    if (a == RSD_LOAD_ACCEPTED) {
        r->result.mutated = r->result.loaded = true;
        r->result.state = RSD_LMS_INSTANCE;
        rsdi_cpy(r->result.wire_id, sizeof r->result.wire_id, r->made_instance[0] ? r->made_instance : r->keep);
        if (r->made_instance[0]) {
            rsdi_lf_own(r, r->result.model_key, r->made_instance);
            (void)rsdi_rc_made(r, r->result.model_key);
        }
        r->result.outcome = RSD_OUTCOME_RESIDENT;
        r->result.error = RSD_OK;
        rsdi_rc_finish(r, now_ms);
        return;
    }
    if (!r->cx.why[0]) rsdi_lf_why(r, transport, status, r->fail_reason, sizeof r->fail_reason);
    r->fail_error = transport < 0 ? transport : ok2xx ? RSD_ERR_SERVER_ERROR : RSD_ERR_LOAD_REJECTED;
    rsd_reconcile_add_notice(r, RSD_DMSG_LOAD_FAILED, RSD_NOTICE_LOAD_FAILED, RSD_LEVEL_WARNING, r->result.model_key,
                             "loading '%s' on '%s' failed (%s); listing again before any retry.", r->result.model_key,
                             r->target_id, r->fail_reason);
    rsdi_rc_issue_http(r, RSDI_PH_LIMIT, RSD_OP_LIST, "", now_ms);
}

/* The listing after a failed load (blind: no further mutation when it cannot be read):
   adopt a late instance, else free the next candidate, else retry once, else fail. */
RSDI_PRIVATE void rsdi_lf_on_limit(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                   uint64_t now_ms) {
    rsd_lms_machine *m = r->lms;
    if (!(transport == RSD_OK && status >= 200 && status <= 299) || r->rt->catalog(&r->cx, false, status, body, len) < 0) {
        rsdi_lf_load_failed(r, now_ms);
        return;
    }
    if (r->ids_full) { /* the instances before the load are not all known: nothing can be told apart */
        rsdi_lf_degrade(r, RSD_ERR_TOO_LARGE, "", now_ms);
        return;
    }
    if (r->rt->adopt(&r->cx)) { /* our load landed after the client gave up: the instance is ours */
        rsdi_lf_own(r, r->result.model_key, r->result.wire_id);
        rsd_reconcile_attr(r, true, r->result.model_key, r->result.wire_id);
        r->result.state = RSD_LMS_INSTANCE;
        r->result.adopted = r->result.loaded = r->result.mutated = true;
        r->result.outcome = RSD_OUTCOME_RESIDENT;
        r->result.error = RSD_OK;
        rsdi_rc_finish(r, now_ms);
        return;
    }
    if (r->load_attempts < RSD_LMS_LOAD_ATTEMPTS && now_ms < r->deadline) {
        m->n_unload = 0; /* free_room names them (rsd_reconcile_unload) */
        if (r->rt->free_room(&r->cx) > 0 && m->n_unload > 0) {
            m->ui = 0;
            m->evict_mark = r->result.n_evicted;
            rsdi_rc_issue_http(r, RSDI_PH_UNLOAD, RSD_OP_UNLOAD, m->unload_inst[0], now_ms);
            return;
        }
        if (!m->retried_plain && r->load_attempts == 1 && r->plan.n_fallback > 0) { /* retry once */
            m->retried_plain = true;
            rsdi_rc_do_load(r, now_ms);
            return;
        }
    }
    rsdi_lf_load_failed(r, now_ms);
}

/* One unload of an owned instance of the current candidate; then the next, then load
   again (something was freed) or list again (nothing was: the next candidate). */
RSDI_PRIVATE void rsdi_lf_on_unload(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                    uint64_t now_ms) {
    rsd_lms_machine *m = r->lms;
    const char *inst = m->unload_inst[m->ui], *cand = m->unload_model;
    char why[RSD_RECONCILE_TEXT_MAX];
    bool ok2xx = transport == RSD_OK && status >= 200 && status <= 299;
    rsd_evicted *e;
    why[0] = '\0';
    r->cx.why = why; /* an unload's refusal is its own, not the failed load's (fail_reason) */
    if (ok2xx && r->rt->load_answer(&r->cx, status, body, len) == RSD_LOAD_ACCEPTED) {
        if ((e = rsd_reconcile_evicted(r, inst, cand, m->unload_ctx[m->ui])) != NULL)
            rsd_reconcile_attr(r, false, e->model, e->id); /* the instance is gone; a restore makes a new one */
        rsdi_lf_disown(r, inst);
        r->result.mutated = true;
        rsd_reconcile_add_notice(r, RSD_DMSG_PLAN, RSD_NOTICE_SWAP, RSD_LEVEL_WARNING, cand,
                                 "unloaded our instance '%s' of '%s' on '%s' to make room for '%s'.", inst, cand,
                                 r->target_id, r->result.model_key);
    } else {
        if (transport == RSD_OK && !ok2xx) (void)r->rt->load_answer(&r->cx, status, body, len); /* its reason */
        if (!why[0]) rsdi_lf_why(r, transport, status, why, sizeof why);
        r->result.unload_failed = true;
        rsd_reconcile_add_notice(r, RSD_DMSG_UNLOAD_FAILED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, cand,
                                 "unloading instance '%s' of '%s' on '%s' failed: %s", inst, cand, r->target_id, why);
        rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_UNLOAD_FAILED, RSDI_WHERE, "%s: %s", inst, why);
    }
    r->cx.why = r->fail_reason;
    if (++m->ui < m->n_unload) {
        rsdi_rc_issue_http(r, RSDI_PH_UNLOAD, RSD_OP_UNLOAD, m->unload_inst[m->ui], now_ms);
        return;
    }
    if (r->result.n_evicted > m->evict_mark) rsdi_rc_do_load(r, now_ms); /* freed something: retry */
    else rsdi_rc_issue_http(r, RSDI_PH_LIMIT, RSD_OP_LIST, "", now_ms); /* nothing freed: next candidate */
}
#endif /* RSD_NO_LMSTUDIO */


RSD_API int rsd_reconcile_lock_done(rsd_reconcile *r, bool held, uint64_t generation, uint64_t now_ms) {
    if (!r || r->phase != RSDI_PH_LOCK) return RSD_ERR_STATE;
    r->result.lock_held = held;
#ifndef RSD_NO_LMSTUDIO
    if (r->rt->flags & RSD_RT_LOAD_FIRST) {
        rsdi_lf_locked(r, held, held && r->has_gen && generation == r->gen && !r->ours_changed, now_ms);
        return RSD_OK;
    }
#endif
    if (!held) {
        rsd_reconcile_add_notice(r, RSD_DMSG_LOCK_UNLOCKED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, NULL,
                           "could not take the residency lock for '%s'; changing it without the lock",
                           r->target_id);
        rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_LOCK_UNLOCKED, RSDI_WHERE, "%s", r->key);
    }
    if (now_ms >= r->deadline) {
        rsdi_rc_degrade(r, RSD_ERR_TIMEOUT, now_ms, "the reconcile deadline passed waiting for the lock");
        return RSD_OK;
    }
    if (held && r->has_gen && generation == r->gen && !r->ours_changed) { /* nothing changed since the listing */
        rsdi_rc_release_notices(r);
        rsdi_rc_mutate(r, now_ms);
        return RSD_OK;
    }
    r->n_victims = 0;
    rsdi_rc_take_victims(r); /* the first plan's victims, to compare */
    rsdi_rc_issue_http(r, RSDI_PH_RELIST, RSD_OP_LIST, "", now_ms);
    return RSD_OK;
}

/* A listing or props request that timed out is sent again, with twice the timeout,
   while the overall deadline allows: a busy server is slow, not gone. True = sent. */
RSDI_PRIVATE bool rsdi_rc_probe_retry(rsd_reconcile *r, int transport, uint64_t now_ms) {
    if (transport != RSD_ERR_TIMEOUT || now_ms >= r->deadline || !(r->rt->flags & RSD_RT_PROBE_RETRY)) return false;
    if (r->probe_tries < 16) r->probe_tries++;
    rsdi_rc_issue_http(r, r->phase, r->step.http.op, r->step.http.model, now_ms);
    return true;
}

/* The runtime's parse into snap; RSD_ERR_MODEL_ID when a listed id or instance is
   max_id_bytes or longer (victims and pinned models are kept from it). */
RSDI_PRIVATE int rsdi_rc_parse_snap(rsd_reconcile *r, const char *body, size_t len) {
    int rc = rsdi_rc_listed(r, body, len, &r->snap), i;
    for (i = 0; rc >= 0 && i < r->snap.n; i++)
        if (r->snap.models[i].id.len >= r->id_bytes || r->snap.models[i].instance.len >= r->id_bytes)
            return RSD_ERR_MODEL_ID;
    return rc;
}

/* The first listing, or the one under the lock: parse into snap, retry or degrade. */
RSDI_PRIVATE bool rsdi_rc_take_listing(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                       uint64_t now_ms) {
    char what[RSD_RECONCILE_URL_MAX + 64];
    int rc;
    if (rsdi_rc_probe_retry(r, transport, now_ms)) return false;
    if (transport < 0 || status < 200 || status > 299) {
        rsdi_rc_describe(r, transport, status, what, sizeof what);
        rsdi_rc_degrade(r, transport < 0 ? transport : RSD_ERR_HTTP_STATUS, now_ms, "%s", what);
        return false;
    }
    rc = rsdi_rc_parse_snap(r, body, len);
    if (rc == RSD_ERR_BODY_TOO_LARGE) { /* one entry, or the top level, over the answers' buffer */
        rsdi_rc_degrade(r, RSD_ERR_TOO_LARGE, now_ms, "GET %s: %s (%lu bytes; raise max_body_bytes in "
                        "rsd_reconcile_limits)", r->url, r->split.what, (unsigned long)r->max_body);
        return false;
    }
    if (rc == RSD_ERR_MODEL_ID) { /* an id longer than limits.max_id_bytes */
        rsdi_rc_degrade(r, rc, now_ms, "GET %s: a listed id is %d bytes or longer, more than this reconcile keeps "
                        "(raise max_id_bytes in rsd_reconcile_limits)", r->url, (int)r->id_bytes);
        return false;
    }
    if (rc == RSD_ERR_LISTING_TRUNCATED && r->snap.n_seen <= (uint32_t)r->snap.max_models) { /* the names */
        rsdi_rc_degrade(r, rc, now_ms, "GET %s: %s; the listed names are more than the %lu bytes this reconcile "
                        "keeps for them (raise arena_bytes in rsd_reconcile_limits)", r->url, rsd_result_str(rc),
                        (unsigned long)r->snap.arena_bytes);
        return false;
    }
    if (rc == RSD_ERR_LISTING_TRUNCATED || rc == RSD_ERR_JSON_TOKENS) { /* over this reconcile's limits */
        rsdi_rc_degrade(r, rc, now_ms, "GET %s: %s; this reconcile holds %d models and %lu JSON tokens "
                        "(raise max_models or max_tokens in rsd_reconcile_limits)", r->url, rsd_result_str(rc),
                        r->snap.max_models, (unsigned long)r->max_tokens);
        return false;
    }
    if (rc < 0) {
        rsdi_rc_degrade(r, rc, now_ms, "GET %s: %s", r->url, rsd_result_str(rc));
        return false;
    }
    r->last_list = &r->snap;
    return true;
}

/* Decide on r->snap (the first time or again); degrade on bad facts. */
RSDI_PRIVATE bool rsdi_rc_decide_or_degrade(rsd_reconcile *r, uint32_t max_override, uint64_t now_ms) {
    int rc = rsdi_rc_decide(r, max_override);
    if (rc < 0) {
        rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_RECONCILE_BAD_FACTS, RSDI_WHERE, "%s",
                  rsd_result_str(rc));
        if (r->result.mutated) rsdi_rc_load_failed(r, rc, rsd_result_str(rc), now_ms);
        else rsdi_rc_degrade(r, rc, now_ms, "the listing cannot be decided on: %s", rsd_result_str(rc));
        return false;
    }
    return true;
}

RSDI_PRIVATE void rsdi_rc_first_decide(rsd_reconcile *r, uint64_t now_ms) {
    if (!rsdi_rc_decide_or_degrade(r, 0, now_ms)) return;
    rsdi_rc_emit_or_hold(r);
    rsdi_rc_after_decide(r, false, now_ms);
}

/* The first listing: the capacity probe next, or the decision. */
RSDI_PRIVATE void rsdi_rc_on_list(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                  bool ok, uint64_t now_ms) {
#ifndef RSD_NO_LMSTUDIO
    if (r->rt->flags & RSD_RT_LOAD_FIRST) {
        rsdi_lf_on_list(r, transport, status, body, len, now_ms);
        return;
    }
#endif
    (void)ok;
    if (!rsdi_rc_take_listing(r, transport, status, body, len, now_ms)) return;
    if (r->rt->parse_capacity && !r->cap_known) rsdi_rc_issue_http(r, RSDI_PH_CAP, RSD_OP_CAPACITY, "", now_ms);
    else rsdi_rc_first_decide(r, now_ms);
}

/* The capacity answer (a failure reads as "unknown"), then the decision. */
RSDI_PRIVATE void rsdi_rc_on_cap(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                 bool ok, uint64_t now_ms) {
    (void)status;
    if (rsdi_rc_probe_retry(r, transport, now_ms)) return;
    if (ok) (void)r->rt->parse_capacity(&r->cx, body, len, &r->max_instances, &r->unlimited);
    rsdi_rc_first_decide(r, now_ms);
}

/* The listing under the lock, or after the keep's download ended: decide again. */
RSDI_PRIVATE void rsdi_rc_on_relist(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                    bool ok, uint64_t now_ms) {
    rsd_decision d0 = r->plan.decision;
    rsd_reason w0 = r->plan.reason;
    bool relist = r->phase == RSDI_PH_RELIST;
    (void)ok;
#ifndef RSD_NO_LMSTUDIO
    if (r->rt->flags & RSD_RT_LOAD_FIRST) {
        rsdi_lf_on_relist(r, transport, status, body, len, now_ms);
        return;
    }
#endif
    if (!rsdi_rc_take_listing(r, transport, status, body, len, now_ms)) return;
    if (!rsdi_rc_decide_or_degrade(r, 0, now_ms)) return;
    if (rsdi_rc_plan_changed(r, d0, w0, 0)) { /* the world moved while we waited */
        r->result.redecided = r->result.redecided || relist;
        rsdi_logf(&r->logger, RSD_LOG_INFO, RSD_LOGITEM_DRIVER_REDECIDE, RSDI_WHERE, "%s: %s -> %s", r->key,
                  rsd_decision_str(d0), rsd_decision_str(r->plan.decision));
        if (relist) {
            r->notices_held = false;
            rsdi_rc_emit_plan(r);
        } else {
            rsdi_rc_emit_or_hold(r);
        }
    } else if (relist) {
        rsdi_rc_release_notices(r); /* the same plan, now decided under the lock */
    }
    rsdi_rc_after_decide(r, r->locked, now_ms);
}

/* A victim's unload answer: recorded and waited for, or a warning; the next one. */
RSDI_PRIVATE void rsdi_rc_on_unload(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                    bool ok, uint64_t now_ms) {
    char what[RSD_RECONCILE_URL_MAX + 96];
#ifndef RSD_NO_LMSTUDIO
    if (r->rt->flags & RSD_RT_LOAD_FIRST) {
        rsdi_lf_on_unload(r, transport, status, body, len, now_ms);
        return;
    }
#endif
    if (ok) {
        (void)rsdi_rc_ev_add(r, rsdi_rc_row(r, r->victims, r->vi), r->vi, RSDI_PIN_HERE);
        r->result.mutated = true;
        if (r->rt->flags & RSD_RT_UNLOAD_WAIT) { /* until it is listed unloaded */
            rsdi_rc_wait(r, RSDI_W_GONE, rsdi_rc_row(r, r->victims, r->vi), now_ms);
            return;
        }
    } else { /* swallowed, but never cached */
        r->result.unload_failed = true;
        rsdi_rc_describe(r, transport, status, what, sizeof what);
        if (transport == RSD_OK) rsdi_rc_quote_error(r, body, len, what, sizeof what);
        rsd_reconcile_add_notice(r, RSD_DMSG_UNLOAD_FAILED, RSD_NOTICE_DEGRADED, RSD_LEVEL_WARNING, rsdi_rc_row(r, r->victims, r->vi),
                           "unloading '%s' from '%s' failed (%s); continuing", rsdi_rc_row(r, r->victims, r->vi),
                           r->target_id, what);
        rsdi_logf(&r->logger, RSD_LOG_WARN, RSD_LOGITEM_DRIVER_UNLOAD_FAILED, RSDI_WHERE, "%s", what);
    }
    r->vi++;
    rsdi_rc_next_unload(r, now_ms);
}

/* A transient refusal of the keep's load (a concurrent cold load took the place, the
   proxy not yet connected after an eviction): the load again after 50, 100, 200, ...
   500 ms, never past the deadline. Nothing failed: no failed-load notice, no restore
   unless the deadline ends it. what = the answer, quoted then. */
RSDI_PRIVATE void rsdi_rc_backoff(rsd_reconcile *r, const char *what, uint64_t now_ms) {
    uint32_t delay = (uint32_t)RSD_RECONCILE_BUSY_FIRST_MS << (r->busy_tries < 4 ? r->busy_tries : 4);
    if (delay > (uint32_t)RSD_RECONCILE_POLL_MAX_MS) delay = RSD_RECONCILE_POLL_MAX_MS;
    rsdi_cpy(r->fail_reason, sizeof r->fail_reason, what);
    rsdi_logf(&r->logger, RSD_LOG_INFO, RSD_LOGITEM_DRIVER_LIMIT, RSDI_WHERE, "%s: %s; loading again in %u ms",
              r->key, what, (unsigned)delay);
    r->wake = now_ms + delay;
    if (r->wake > r->deadline) r->wake = r->deadline;
    r->phase = RSDI_PH_BACKOFF;
    rsdi_rc_step(r, RSD_STEP_WAIT);
    r->step.wake_ms = r->wake;
}

/* The backoff is over: the load again, or the deadline's failure. */
RSDI_PRIVATE void rsdi_rc_backoff_done(rsd_reconcile *r, uint64_t now_ms) {
    char what[RSD_RECONCILE_TEXT_MAX];
    if (now_ms >= r->deadline) {
        (void)RSD_SNPRINTF(what, sizeof what, "the server still refused to load it at the deadline (%.400s)",
                           r->fail_reason);
        rsdi_rc_load_failed(r, RSD_ERR_TIMEOUT, what, now_ms);
        return;
    }
    r->busy_tries++;
    rsdi_rc_do_load(r, now_ms);
}

/* The keep's load answer: wait, wait for a download, a capacity answer, a transient
   refusal, or a failure. */
RSDI_PRIVATE void rsdi_rc_on_load(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                  bool ok, uint64_t now_ms) {
    rsd_load_answer a;
    char what[RSD_RECONCILE_URL_MAX + 96];
#ifndef RSD_NO_LMSTUDIO
    if (r->rt->flags & RSD_RT_LOAD_FIRST) {
        rsdi_lf_on_load(r, transport, status, body, len, now_ms);
        return;
    }
#endif
    (void)ok;
    if (transport < 0) {
        rsdi_rc_describe(r, transport, status, what, sizeof what);
        rsdi_rc_load_failed(r, transport, what, now_ms);
        return;
    }
    r->made_instance[0] = '\0';
    a = r->rt->load_answer(&r->cx, status, body, len);
    if (a == RSD_LOAD_ACCEPTED || a == RSD_LOAD_ALREADY) {
        if (a == RSD_LOAD_ACCEPTED) {
            r->posted = true;
            r->result.mutated = true;
            rsdi_cpy(r->keep_instance, sizeof r->keep_instance, r->made_instance);
            if (r->made_instance[0]) rsdi_cpy(r->result.wire_id, sizeof r->result.wire_id, r->made_instance);
        }
        if (r->rt->flags & RSD_RT_WAIT) rsdi_rc_wait(r, RSDI_W_KEEP, r->keep, now_ms);
        else rsdi_rc_success(r, now_ms);
    } else if (a == RSD_LOAD_DOWNLOADING && (r->rt->flags & RSD_RT_WAIT) &&
               r->load_attempts - r->busy_tries < RSD_RECONCILE_LOAD_ATTEMPTS) {
        r->dl_seen = true; /* wait (not a failure); the poll loads it again when the download ends */
        rsdi_rc_wait(r, RSDI_W_KEEP, r->keep, now_ms);
    } else if (a == RSD_LOAD_LIMIT && r->limit_rounds < RSD_RECONCILE_LOAD_ATTEMPTS - 1 && now_ms < r->deadline) {
        rsdi_logf(&r->logger, RSD_LOG_INFO, RSD_LOGITEM_DRIVER_LIMIT, RSDI_WHERE, "%s: model limit reached",
                  r->key);
        rsdi_rc_issue_http(r, RSDI_PH_LIMIT, RSD_OP_LIST, "", now_ms);
    } else if (a == RSD_LOAD_BUSY) { /* the router's own words when plain text (a custom runtime's: JSON) */
        (void)RSD_SNPRINTF(what, sizeof what, "HTTP %d", status);
        if (rsdi_body_has(body, len, "proxy error: Could not establish connection"))
            rsdi_cpy(what + strlen(what), sizeof what - strlen(what), ": proxy error: Could not establish connection");
        else rsdi_rc_quote_error(r, body, len, what, sizeof what);
        rsdi_rc_backoff(r, what, now_ms);
    } else { /* the server's own words after the status (say why) */
        (void)RSD_SNPRINTF(what, sizeof what, "%s rejected %s: HTTP %d", r->rt->label, r->url, status);
        rsdi_rc_quote_error(r, body, len, what, sizeof what);
        if (a != RSD_LOAD_LIMIT) {
            if (status >= 400 && status <= 499) rsdi_rc_served_ids(r, what, sizeof what);
        } else if (!strstr(what, "model limit reached")) {
            rsdi_cpy(what + strlen(what), sizeof what - strlen(what), " (model limit reached)");
        }
        rsdi_rc_load_failed(r, a == RSD_LOAD_LIMIT ? RSD_ERR_MODEL_LIMIT : RSD_ERR_LOAD_REJECTED, what, now_ms);
    }
}

/* The listing after a "model limit reached": decide with the server full, evict, load again. */
RSDI_PRIVATE void rsdi_rc_on_limit(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                   bool ok, uint64_t now_ms) {
    int from = r->n_victims, i, n = 0, k;
    bool busy = false;
    char what[RSD_RECONCILE_URL_MAX + 96];
#ifndef RSD_NO_LMSTUDIO
    if (r->rt->flags & RSD_RT_LOAD_FIRST) {
        rsdi_lf_on_limit(r, transport, status, body, len, now_ms);
        return;
    }
#endif
    (void)transport;
    (void)status;
    (void)RSD_SNPRINTF(what, sizeof what, "%s: model limit reached and no resident may be evicted",
                       r->rt->label);
    if (!ok || rsdi_rc_parse_snap(r, body, len) < 0) {
        rsdi_rc_load_failed(r, RSD_ERR_MODEL_LIMIT, what, now_ms);
        return;
    }
    r->last_list = &r->snap;
    k = rsd_listing_find(&r->snap, rsd_str_c(r->keep));
    for (i = 0; i < r->snap.n; i++) {
        n += rsd_model_state_resident(r->snap.models[i].state);
        if (i != k && r->snap.models[i].state == RSD_MODEL_LOADING) busy = true;
    }
    /* Room listed (the known capacity above what runs), or another model loading: a
       concurrent cold load lost or won the router's re-check (llama.cpp #28774). That
       passes: load again after a backoff, evicting nothing more. */
    if ((k < 0 || !rsd_model_state_resident(r->snap.models[k].state)) &&
        (busy || r->unlimited || (r->max_instances > 0 && (uint32_t)n < r->max_instances))) {
        rsdi_rc_backoff(r, "model limit reached, try again later", now_ms);
        return;
    }
    r->limit_rounds++;
    /* the answer says the server is full at what it lists now */
    if (!rsdi_rc_decide_or_degrade(r, n > 0 ? (uint32_t)n : 1u, now_ms)) return;
    if (r->plan.decision == RSD_DECISION_ALREADY_RESIDENT) {
        rsdi_rc_wait(r, RSDI_W_KEEP, r->keep, now_ms);
    } else if ((r->plan.decision == RSD_DECISION_LOAD_AFTER_EVICT || r->plan.decision == RSD_DECISION_LOAD) &&
               rsdi_rc_take_victims_ex(r, true) > 0 && !r->ids_full) {
        rsdi_rc_emit_plan(r);
        r->vi = from;
        rsdi_rc_next_unload(r, now_ms);
    } else if (r->ids_full) {
        rsdi_rc_degrade(r, RSD_ERR_TOO_LARGE, now_ms, RSDI_IDS_FULL_FMT, (unsigned long)r->ids_cap);
    } else {
        rsdi_rc_emit_plan(r);
        rsdi_rc_load_failed(r, RSD_ERR_MODEL_LIMIT, what, now_ms);
    }
}

/* A poll while waiting: done, failed, downloading, or poll again. */
RSDI_PRIVATE void rsdi_rc_on_poll(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                  bool ok, uint64_t now_ms) {
    int k;
    char what[RSD_RECONCILE_URL_MAX + 96];
    int rc;
    if (transport == RSD_OK && status >= 400 && status <= 499) { /* not transient */
        rsdi_rc_describe(r, transport, status, what, sizeof what);
        rsdi_rc_quote_error(r, body, len, what, sizeof what);
        rsdi_rc_wait_failed(r, RSD_ERR_HTTP_STATUS, what, now_ms);
        return;
    }
    r->poll_delay = r->poll_delay * 2 > (uint32_t)RSD_RECONCILE_POLL_MAX_MS ? (uint32_t)RSD_RECONCILE_POLL_MAX_MS
                                                                      : r->poll_delay * 2;
    if (transport == RSD_ERR_TIMEOUT && (r->rt->flags & RSD_RT_PROBE_RETRY) && r->probe_tries < 16)
        r->probe_tries++; /* the next poll waits longer */
    if (!ok || (rc = rsdi_rc_listed(r, body, len, &r->poll)) < 0) { /* transient */
        rsdi_rc_schedule(r, now_ms, r->poll_delay);
        return;
    }
    r->last_list = &r->poll;
    r->poll_fresh = true;
    k = rsd_listing_find(&r->poll, rsd_str_c(r->wait_model));
    r->wait_state = k >= 0 ? r->poll.models[k].state : RSD_MODEL_UNKNOWN;
    if (k >= 0 && (r->wait_state != RSD_MODEL_FAILED || r->poll.models[k].has_exit_code != r->wait_pre_has_exit ||
                   r->poll.models[k].exit_code != r->wait_pre_exit))
        r->wait_fresh = true; /* the entry moved since the wait began */
    if (r->after_wait == RSDI_W_GONE) { /* unloaded, failed:true (a stop that timed out) or gone */
        if (k >= 0 && rsd_model_state_resident(r->wait_state)) rsdi_rc_schedule(r, now_ms, r->poll_delay);
        else rsdi_rc_wait_ok(r, now_ms);
    } else if (r->wait_state == RSD_MODEL_FAILED && !r->wait_fresh &&
               now_ms - r->wait_t0 < (uint64_t)RSD_RECONCILE_FAILED_GRACE_MS) {
        rsdi_rc_schedule(r, now_ms, r->poll_delay); /* the failure listed before this wait */
    } else if (r->after_wait == RSDI_W_DOWNLOAD && (k < 0 || r->wait_state == RSD_MODEL_DOWNLOADING)) {
        rsdi_rc_schedule(r, now_ms, r->poll_delay);
    } else if (r->after_wait == RSDI_W_DOWNLOAD) { /* the download ended: list and decide again */
        r->n_victims = 0;
        rsdi_rc_take_victims(r); /* the first plan's, to compare */
        rsdi_rc_issue_http(r, RSDI_PH_DLLIST, RSD_OP_LIST, "", now_ms);
    } else if (r->wait_state == RSD_MODEL_DOWNLOADING) { /* keep waiting */
        r->dl_seen = true;
        rsdi_rc_schedule(r, now_ms, r->poll_delay);
    } else if (r->wait_state == RSD_MODEL_UNLOADED && r->dl_seen && r->after_wait == RSDI_W_KEEP) {
        r->dl_seen = false; /* downloaded, and nothing loads it: load it now */
        if (r->load_attempts - r->busy_tries < RSD_RECONCILE_LOAD_ATTEMPTS) {
            r->keep_state = RSD_MODEL_UNLOADED;
            rsdi_rc_do_load(r, now_ms);
        } else {
            (void)RSD_SNPRINTF(what, sizeof what, "'%s' finished downloading but did not load", r->wait_model);
            rsdi_rc_wait_failed(r, RSD_ERR_LOAD_FAILED, what, now_ms);
        }
    } else if (k >= 0 && (r->poll.models[k].state == RSD_MODEL_LOADED || r->poll.models[k].state == RSD_MODEL_SLEEPING)) {
        rsdi_rc_wait_ok(r, now_ms);
    } else if (k >= 0 && r->poll.models[k].state == RSD_MODEL_FAILED) {
        if (r->poll.models[k].has_exit_code)
            (void)RSD_SNPRINTF(what, sizeof what, "%s reports '%s' failed to load (exit code %lld)", r->rt->label,
                               r->wait_model, (long long)r->poll.models[k].exit_code);
        else
            (void)RSD_SNPRINTF(what, sizeof what, "%s reports '%s' failed to load", r->rt->label, r->wait_model);
        rsdi_rc_wait_failed(r, RSD_ERR_LOAD_FAILED, what, now_ms);
    } else {
        rsdi_rc_schedule(r, now_ms, r->poll_delay);
    }
}

/* A restore load's answer: wait for it, or the next one. */
RSDI_PRIVATE void rsdi_rc_on_restore(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                     bool ok, uint64_t now_ms) {
    rsd_load_answer a;
    (void)ok;
    r->made_instance[0] = '\0';
    a = transport < 0 ? RSD_LOAD_REJECTED : r->rt->load_answer(&r->cx, status, body, len);
    if (a == RSD_LOAD_ACCEPTED || a == RSD_LOAD_ALREADY) {
        if (a == RSD_LOAD_ACCEPTED) r->result.mutated = true;
        if (r->made_instance[0]) rsdi_rc_made(r, r->result.evicted[r->ri].model[0] ? r->result.evicted[r->ri].model
                                                                                  : r->result.evicted[r->ri].id);
        if (r->rt->flags & RSD_RT_WAIT) rsdi_rc_wait(r, RSDI_W_RESTORE, r->result.evicted[r->ri].id, now_ms);
        else {
            r->after_wait = RSDI_W_RESTORE;
            rsdi_rc_wait_ok(r, now_ms);
        }
    } else {
        if (r->keep_ok) r->pin_room++; /* nothing took the slot */
        r->ev_state[r->ri++] = RSDI_PIN_FAILED;
        rsdi_rc_next_restore(r, now_ms);
    }
}

/* After a failed load: which protected models did the server displace? Then restore. */
RSDI_PRIVATE void rsdi_rc_on_check(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                                   bool ok, uint64_t now_ms) {
    (void)transport;
    (void)status;
    if (ok && rsdi_rc_listed(r, body, len, &r->poll) >= 0) {
        r->last_list = &r->poll;
        (void)rsdi_rc_mark_displaced(r);
    }
    if (r->result.n_evicted > 0) rsdi_rc_next_restore(r, now_ms);
    else rsdi_rc_finish(r, now_ms);
}

/* ---- the answers' buffer ---- */
/* Where the outstanding step's 2xx answer is read as it arrives: a runtime's listing
   (*out, the listing it fills), LM Studio's catalog (*out NULL), or nowhere (false). */
RSDI_PRIVATE bool rsdi_rc_ans_list(rsd_reconcile *r, rsd_listing **out) {
    *out = NULL;
    switch (r->phase) {
    case RSDI_PH_LIST: case RSDI_PH_RELIST: case RSDI_PH_DLLIST: case RSDI_PH_LIMIT:
#ifndef RSD_NO_LMSTUDIO
        if (r->lms && r->rt == rsd_runtime_lmstudio()) return true; /* LM Studio's catalog */
#endif
        *out = &r->snap;
        return r->rt->list_end != NULL;
    case RSDI_PH_POLL: case RSDI_PH_CHECK:
        *out = &r->poll;
        return r->rt->list_end != NULL;
    default:
        return false;
    }
}

/* The splitter's entries go to the listing's reader. */
RSDI_PRIVATE void rsdi_rc_ans_entry(void *user, rsd_str key, const rsd_json_doc *el) {
    rsd_reconcile *r = (rsd_reconcile *)user;
    rsd_listing *out;
    if (!rsdi_rc_ans_list(r, &out)) return;
#ifndef RSD_NO_LMSTUDIO
    if (!out) {
        rsdi_lms_list_el(r->lms->cat, key, el);
        return;
    }
#endif
    if (out) r->rt->list_entry(&r->cx, out, key, el);
}

/* From here the answer is read as it arrives: what is kept whole so far first, in place. */
RSDI_PRIVATE void rsdi_rc_ans_split(rsd_reconcile *r) {
    rsd_listing *out;
    (void)rsdi_rc_ans_list(r, &out);
    if (out) rsdi_listing_reset(out);
#ifndef RSD_NO_LMSTUDIO
    else rsdi_lms_reset(r->lms->cat);
#endif
    rsd_json_split_init(&r->split, r->ans, r->max_body, r->toks, r->max_tokens, rsdi_rc_ans_entry, r);
    r->ans_state = RSDI_ANS_SPLIT;
    (void)rsd_json_split_feed(&r->split, r->ans, r->ans_len);
    r->ans_len = 0;
}

RSD_API int rsd_reconcile_body(rsd_reconcile *r, int status, const char *data, size_t len) {
    rsd_listing *out;
    if (!r || r->step.kind != RSD_STEP_HTTP) return RSD_ERR_STATE;
    if (!len) return RSD_OK;
    if (!data) return RSD_ERR_ARG;
    if (r->ans_state == RSDI_ANS_WHOLE && len > r->max_body - r->ans_len) {
        if (status >= 200 && status <= 299 && rsdi_rc_ans_list(r, &out)) rsdi_rc_ans_split(r);
        else r->ans_state = RSDI_ANS_OVER; /* kept whole, and larger than the buffer */
    }
    if (r->ans_state == RSDI_ANS_SPLIT) (void)rsd_json_split_feed(&r->split, data, len);
    else if (r->ans_state == RSDI_ANS_WHOLE) {
        if (data != r->ans + r->ans_len) memmove(r->ans + r->ans_len, data, len);
        r->ans_len += len;
    }
    return RSD_OK;
}

/* The end of a 2xx listing answer: its reader's verdict in ans_rc. */
RSDI_PRIVATE void rsdi_rc_ans_read(rsd_reconcile *r) {
    rsd_listing *out;
    int rc;
    if (!rsdi_rc_ans_list(r, &out)) return;
    if (r->ans_state == RSDI_ANS_WHOLE) rsdi_rc_ans_split(r);
    rc = rsd_json_split_end(&r->split, &r->ans_top);
    r->ans_state = RSDI_ANS_READ;
#ifndef RSD_NO_LMSTUDIO
    if (!out) {
        r->ans_rc = rsdi_lms_list_end(r->lms->cat, rc, &r->ans_top);
        return;
    }
#endif
    r->ans_rc = r->rt->list_end(&r->cx, out, rc, &r->ans_top);
}

/* A listing answer that ended without its end (the transport failed after its first
   entries were read): the listing it was read into is empty and no longer the last read,
   never partial. */
RSDI_PRIVATE void rsdi_rc_ans_cut(rsd_reconcile *r) {
    rsd_listing *out;
    if (!rsdi_rc_ans_list(r, &out)) return;
    if (out) {
        rsdi_listing_reset(out);
        if (r->last_list == out) r->last_list = NULL;
    }
#ifndef RSD_NO_LMSTUDIO
    else rsdi_lms_reset(r->lms->cat);
#endif
}

/* A listing into out: what its reader made of the answer, or (a runtime with parse_list)
   the whole body parsed. */
RSDI_PRIVATE int rsdi_rc_listed(rsd_reconcile *r, const char *body, size_t len, rsd_listing *out) {
    rsd_listing *o;
    if (!r->rt->list_end) return r->rt->parse_list(&r->cx, body, len, out);
    if (r->ans_state != RSDI_ANS_READ || !rsdi_rc_ans_list(r, &o) || o != out) return RSD_ERR_STATE;
    return r->ans_rc;
}

/* The answer handlers by phase (NULL: no answer is awaited there). */
typedef void (*rsdi_rc_on_fn)(rsd_reconcile *r, int transport, int status, const char *body, size_t len, bool ok,
                              uint64_t now_ms);
static const rsdi_rc_on_fn rsdi_rc_on[] = {
    NULL, NULL, rsdi_rc_on_list, rsdi_rc_on_cap, NULL, rsdi_rc_on_relist, rsdi_rc_on_unload, rsdi_rc_on_load,
    rsdi_rc_on_limit, NULL, rsdi_rc_on_poll, rsdi_rc_on_restore, rsdi_rc_on_check, rsdi_rc_on_relist};

RSD_API int rsd_reconcile_feed(rsd_reconcile *r, int transport, int status, const char *body, size_t len,
                               uint64_t now_ms) {
    bool ok;
    if (!r || r->step.kind != RSD_STEP_HTTP) return RSD_ERR_STATE;
    if (body && len) (void)rsd_reconcile_body(r, status, body, len); /* the last piece, or the whole answer */
    if (transport == RSD_OK && r->ans_state == RSDI_ANS_OVER) transport = RSD_ERR_TOO_LARGE; /* over max_body_bytes */
    if (transport == RSD_OK && status >= 200 && status <= 299) rsdi_rc_ans_read(r);
    else if (r->ans_state == RSDI_ANS_SPLIT) rsdi_rc_ans_cut(r); /* cut off after entries were read */
    body = r->ans;
    len = r->ans_state == RSDI_ANS_WHOLE ? r->ans_len : 0;
    if (transport > 0) transport = RSD_ERR_ARG;
    if (transport != RSD_ERR_TIMEOUT) r->probe_tries = 0;
    ok = transport == RSD_OK && status >= 200 && status <= 299;
    if ((unsigned)r->phase >= sizeof rsdi_rc_on / sizeof rsdi_rc_on[0] || !rsdi_rc_on[r->phase]) return RSD_ERR_STATE;
    rsdi_rc_on[r->phase](r, transport, status, body, len, ok, now_ms);
    return RSD_OK;
}
/* ---- driver:core end ---- */
/* ---- >>driver:ollama ---- */
#ifndef RSD_NO_OLLAMA
RSDI_PRIVATE int rsdi_ollama_request(rsd_runtime_ctx *c, rsd_http_op op, const char *model, rsd_step_http *h) {
    rsd_ollama_load_opts o;
    int rc, n = -1;
    if ((rc = rsd_reconcile_set_url(c->r, op == RSD_OP_LOAD || op == RSD_OP_UNLOAD ? "/api/generate" : "/api/ps")) < 0)
        return rc;
    if (op == RSD_OP_LOAD) {
        memset(&o, 0, sizeof o);
        o.set_keep_alive = true;
        o.keep_alive_s = -1; /* what the chats send; the scheduler strategy releases it later */
        if (c->context_length && model && strcmp(model, c->keep) == 0)
            o.num_ctx = rsd_reconcile_plan(c->r)->load_context;
        n = rsd_ollama_load_body(c->body, RSD_RECONCILE_BODY_MAX, rsd_str_c(model), &o);
    } else if (op == RSD_OP_UNLOAD) {
        n = rsd_ollama_unload_body(c->body, RSD_RECONCILE_BODY_MAX, rsd_str_c(model));
    }
    if ((op == RSD_OP_LOAD || op == RSD_OP_UNLOAD) && n < 0) return n;
    rsd_reconcile_http_fill(c->r, h, n >= 0 ? "POST" : "GET", n);
    return RSD_OK;
}

/* Give entry m the alias name when name is not already one of its ids but normalises
   like one ("k" ~ "k:latest"). Its names are contiguous in the arena, so they are copied
   again at the arena's end with the new alias after the others. */
RSDI_PRIVATE void rsdi_ollama_alias_if_same(rsd_listing *l, rsd_listed_model *m, rsd_str name) {
    char want[2 * RSD_MODEL_ID_MAX], got[2 * RSD_MODEL_ID_MAX];
    rsd_str al[RSD_MAX_ALIASES], last;
    int nw, k;
    size_t run, at;
    bool hit;
    if (!name.len || rsd_str_eq(m->id, name)) return;
    rsdi_listed_views(m, al, NULL);
    for (k = 0; k < m->n_aliases; k++)
        if (rsd_str_eq(al[k], name)) return;
    if ((nw = rsd_ollama_name_normalise(name, want, sizeof want)) < 0) return;
    hit = rsd_ollama_name_normalise(m->id, got, sizeof got) == nw && memcmp(got, want, (size_t)nw) == 0;
    for (k = 0; k < m->n_aliases && !hit; k++)
        hit = rsd_ollama_name_normalise(al[k], got, sizeof got) == nw && memcmp(got, want, (size_t)nw) == 0;
    if (!hit || m->n_aliases >= RSD_MAX_ALIASES) return;
    last = rsdi_listed_name(m, m->n_aliases + m->n_tags);
    run = (size_t)(last.ptr + last.len + 1 - m->id.ptr); /* id, aliases and tags */
    if (l->arena_bytes - l->arena_used <= run + name.len) return;
    at = l->arena_used;
    last = rsdi_listed_name(m, m->n_aliases); /* the last alias (or the id) */
    k = (int)(last.ptr + last.len + 1 - m->id.ptr); /* bytes up to the tags */
    memcpy(l->arena + at, m->id.ptr, (size_t)k);
    memcpy(l->arena + at + k, name.ptr, name.len);
    l->arena[at + k + name.len] = '\0';
    memcpy(l->arena + at + k + name.len + 1, m->id.ptr + k, run - (size_t)k);
    m->id.ptr = l->arena + at;
    m->n_aliases++;
    l->arena_used += run + name.len + 1;
}

/* the keep and our attributed ids match the entries they name once
   normalised, so "llama3.2" (as requested, as attributed) is "llama3.2:latest". */
RSDI_PRIVATE void rsdi_ollama_names(const rsd_runtime_ctx *c, rsd_listing *l) {
    int i, k;
    for (i = 0; i < l->n; i++) {
        rsdi_ollama_alias_if_same(l, &l->models[i], rsd_str_c(c->keep));
        for (k = 0; k < c->n_ours; k++) rsdi_ollama_alias_if_same(l, &l->models[i], rsd_str_c(c->ours[k]));
    }
}

RSDI_PRIVATE void rsdi_ollama_rt_entry(rsd_runtime_ctx *c, rsd_listing *out, rsd_str key, const rsd_json_doc *el) {
    RSDI_UNUSED(c);
    rsdi_ollama_list_el(out, key, el);
}

RSDI_PRIVATE int rsdi_ollama_rt_list(rsd_runtime_ctx *c, rsd_listing *out, int rc, const rsd_json_doc *top) {
    rc = rsdi_ollama_list_end(out, rc, top);
    if (rc < 0) return rc;
    if (out->truncated) return RSD_ERR_LISTING_TRUNCATED;
    rsdi_ollama_names(c, out);
    return RSD_OK;
}

RSDI_PRIVATE rsd_load_answer rsdi_ollama_load_answer(rsd_runtime_ctx *c, int status, const char *body, size_t len) {
    rsd_ollama_reply g;
    if (status < 200 || status > 299) return RSD_LOAD_REJECTED;
    /* a 2xx carrying an error member is a refusal; an unreadable 2xx is taken as
       accepted: the wait that follows checks /api/ps */
    if (rsd_ollama_parse_generate(&g, body, len, c->toks, c->max_tokens) == RSD_ERR_SERVER_ERROR)
        return RSD_LOAD_REJECTED;
    return RSD_LOAD_ACCEPTED;
}

RSD_API const rsd_runtime *rsd_runtime_ollama(void) {
    static const rsd_runtime rt = {
        "ollama", "Ollama", RSD_STRATEGY_SCHEDULER, RSD_RT_LOAD | RSD_RT_WAIT,
        rsdi_ollama_request, NULL, NULL, rsdi_ollama_load_answer, 0, 0, 0, NULL,
        rsdi_ollama_rt_entry, rsdi_ollama_rt_list, NULL, NULL, NULL, NULL};
    return &rt;
}
#else
/* Compiled out: no Ollama adapter (the ensurer says so and manages nothing). */
RSD_API const rsd_runtime *rsd_runtime_ollama(void) { return NULL; }
#endif /* RSD_NO_OLLAMA */
/* ---- driver:ollama end ---- */
/* ---- >>driver:lmstudio ---- */
#ifndef RSD_NO_LMSTUDIO
/* LM Studio as a load-first runtime of rsd_reconcile (RSD_RT_LOAD_FIRST): the catalog by
   API tier, the wire id resolved (an early end), the keep loaded first and room freed,
   candidate by candidate, only when that fails. */

RSDI_PRIVATE int rsdi_lms_root(const char *base_url, char *out, size_t cap) {
    int rc = rsd_root_url(rsd_str_c(base_url), out, cap - 64);
    return rc <= 0 || strchr(out, '?') || strchr(out, '#') ? RSD_ERR_URL : RSD_OK;
}

RSDI_PRIVATE int rsdi_lms_request(rsd_runtime_ctx *c, rsd_http_op op, const char *model, rsd_step_http *h) {
    rsd_reconcile *r = c->r;
    rsd_lms_load_opts o;
    int rc, n = -1;
    const char *path = op == RSD_OP_LOAD ? "/api/v1/models/load"
                     : op == RSD_OP_UNLOAD ? "/api/v1/models/unload"
                     : r->lms->tier_try == RSD_LMS_TIER_V1 ? "/api/v1/models"
                     : r->lms->tier_try == RSD_LMS_TIER_V0 ? "/api/v0/models" : "/v1/models";
    if ((rc = rsd_reconcile_set_url(r, path)) < 0) return rc;
    if (op == RSD_OP_LOAD) {
        if (c->op_evicted) { /* a restore: the key with its old context */
            memset(&o, 0, sizeof o);
            o.context_length = c->op_evicted->context_length;
        } else { /* the exact body, the clamped context */
            o = r->lms->load;
            o.context_length = c->context_length ? (r->plan.load_context ? r->plan.load_context : c->context_length) : 0;
        }
        n = rsd_lms_load_body(c->body, RSD_RECONCILE_BODY_MAX, rsd_str_c(model ? model : ""), &o);
    } else if (op == RSD_OP_UNLOAD) {
        n = rsd_lms_unload_body(c->body, RSD_RECONCILE_BODY_MAX, rsd_str_c(model ? model : ""));
    }
    if ((op == RSD_OP_LOAD || op == RSD_OP_UNLOAD) && n < 0) return n;
    rsd_reconcile_http_fill(r, h, n >= 0 ? "POST" : "GET", n);
    return RSD_OK;}

/* A 2xx that is not an error body is done (a load: an unreadable one too, loaded, id
   unknown); the instance id it names goes to c->made_instance. Any other answer's
   error message, if it has one, goes to c->why. */
RSDI_PRIVATE rsd_load_answer rsdi_lms_load_answer(rsd_runtime_ctx *c, int status, const char *body, size_t len) {
    rsd_lms_machine *m = c->r->lms;
    int rc = RSD_ERR_SERVER_ERROR;
    if (status < 200 || status > 299) (void)rsd_server_error_parse(&m->reply.error, body, len, c->toks, c->max_tokens);
    else rc = rsd_lms_parse_reply(&m->reply, body, len, c->toks, c->max_tokens);
    if (rc == RSD_ERR_SERVER_ERROR) {
        if (m->reply.error.present && m->reply.error.message[0])
            rsdi_cpy_str(c->why, RSD_RECONCILE_TEXT_MAX, rsd_str_c(m->reply.error.message));
        return RSD_LOAD_REJECTED;
    }
    if (rc == RSD_OK && m->reply.instance_id.len > 0)
        rsdi_cpy_str(c->made_instance, RSD_MODEL_ID_MAX, m->reply.instance_id);
    return RSD_LOAD_ACCEPTED;
}

/* The catalog hook: a 2xx listing into r->lms->cat (first: by tier, v1, else v0, else
   the OpenAI listing; later ones: the v1 catalog). A truncated one is never cached. */
RSDI_PRIVATE int rsdi_lms_catalog(rsd_runtime_ctx *c, bool first, int status, const char *body, size_t len) {
    rsd_reconcile *r = c->r;
    rsd_lms_machine *m = r->lms;
    rsd_lms_tier tier = first ? (rsd_lms_tier)m->tier_try : RSD_LMS_TIER_V1;
    int rc = r->ans_state == RSDI_ANS_READ ? rsdi_lms_tier_read(m->cat, tier, r->ans_rc) /* read as it arrived */
           : rsd_lms_catalog_from_response(m->cat, tier, status, body, len, r->toks, r->max_tokens);
    rsd_reconcile_set_catalog(r, rc >= 0 && first ? tier : RSD_LMS_TIER_NONE, !m->cat->truncated);
    if (rc >= 0 || !first) return rc < 0 ? rc : RSD_OK;
    if (rc == RSD_ERR_AUTH) {
        rsdi_cpy(c->why, RSD_RECONCILE_TEXT_MAX, "LM Studio authentication required");
        return rc;
    }
    if (!m->first_err[0] && m->cat->error.message[0]) rsdi_cpy(m->first_err, sizeof m->first_err, m->cat->error.message);
    if (m->tier_try < RSD_LMS_TIER_OPENAI) {
        m->tier_try++;
        return 1;
    }
    rsdi_cpy(c->why, RSD_RECONCILE_TEXT_MAX, m->first_err[0] ? m->first_err : "LM Studio returned no recognized model catalog");
    return RSD_ERR_PAYLOAD;
}

/* Resolve against the catalog (inside a feed); sets wire id, key, state. */
RSDI_PRIVATE rsd_lms_resolution rsdi_lms_resolve_cat(rsd_reconcile *r) {
    rsd_lms_machine *m = r->lms;
    rsd_lms_resolution res;
    char key[RSD_MODEL_ID_MAX], wire[RSD_MODEL_ID_MAX];
    (void)rsd_lms_resolve(m->cat, rsd_str_c(r->keep), rsd_str_c(m->default_model), m->peers, m->n_peers, &res);
    rsdi_cpy_str(wire, sizeof wire, res.wire_id);
    rsdi_cpy_str(key, sizeof key, res.model >= 0 ? m->cat->models[res.model].key : rsd_str_c(r->keep));
    (void)rsd_reconcile_set_model(r, key, wire, res.state); /* both fit: cut to RSD_MODEL_ID_MAX - 1 */
    return res;
}

/* The catalog's residents into r->res, ours by cx.owned: how many, or <0. */
RSDI_PRIVATE int rsdi_lms_residents_of(rsd_reconcile *r) {
    rsd_str ids[RSD_RECONCILE_MAX_OWNED + RSD_LMS_MAX_EVICT + 1];
    int i;
    for (i = 0; i < r->cx.n_owned; i++) ids[i] = rsd_str_c(r->lms->owned[i].instance);
    return rsd_lms_residents(r->lms->cat, ids, r->cx.n_owned, r->res, RSD_MAX_RESIDENTS);
}

/* The listing's part of the facts (the desc's is filled before the gate), decide (JIT),
   copy the fallback keys. RSD_OK or <0. */
RSDI_PRIVATE int rsdi_lms_decide(rsd_reconcile *r, int keep_model, bool emit) {
    rsd_lms_machine *m = r->lms;
    rsd_facts *f = &r->facts;
    int n, i, rc;
    if ((n = rsdi_lms_residents_of(r)) < 0) return n == RSD_ERR_BUFFER ? RSD_ERR_RESIDENTS_LIMIT : n;
    f->keep = rsd_str_c(r->result.model_key);
    f->residents = r->res;
    f->n_residents = n;
    if (!f->model_max_context && keep_model >= 0) f->model_max_context = m->cat->models[keep_model].max_context_length;
    f->capacity_bytes = f->keep_bytes = 0; /* room is freed by a failed load, not by bytes */
    if ((rc = rsd_reconcile_decide(r, emit)) < 0) return rc;
    m->n_cand = 0;
    for (i = 0; i < r->plan.n_fallback; i++) {
        int e = r->plan.fallback[i];
        if (e < 0 || e >= n) continue;
        if (!(m->cand[m->n_cand] = rsdi_rc_id(r, r->res[e].model_id, RSD_MODEL_ID_MAX))) return RSD_ERR_TOO_LARGE;
        m->n_cand++;
    }
    return RSD_OK;
}

/* The first instance of model key in the catalog (then follow cat.index.next), or -1. */
RSDI_PRIVATE int rsdi_lms_first_of(const rsd_reconcile *r, const char *key) {
    int m = rsdi_lms_ix_model(r->lms->cat, &r->lms->cat->index, rsd_str_c(key));
    return m >= 0 ? r->lms->cat->index.first[m] : -1;
}

/* Remember the keep's instances before our load (to spot a load that landed late). */
RSDI_PRIVATE void rsdi_lms_snapshot_keep(rsd_reconcile *r) {
    rsd_lms_machine *m = r->lms;
    int i;
    m->n_before = 0;
    for (i = rsdi_lms_first_of(r, r->result.model_key); i >= 0 && m->n_before < 16; i = m->cat->index.next[i])
        if ((m->before[m->n_before] = rsdi_rc_id(r, m->cat->instances[i].id, RSD_MODEL_ID_MAX)) != NULL) m->n_before++;
}

/* The notices of a resolution: to a loaded instance, an LM Link peer. */
RSDI_PRIVATE void rsdi_lms_resolution_notices(rsd_reconcile *r, const rsd_lms_resolution *res) {
    char peers[RSD_RECONCILE_NOTICE_TEXT_MAX];
    size_t n = 0;
    int i;
    if (res->state != RSD_LMS_UNKNOWN && strcmp(r->result.wire_id, r->keep) != 0)
        rsd_reconcile_add_notice(r, RSD_DMSG_PLAN, RSD_NOTICE_CO_RESIDENT, RSD_LEVEL_INFO, r->keep,
                             "LM Studio resolved '%s' to loaded instance '%s' on target '%s'.", r->keep,
                             r->result.wire_id, r->target_id);
    if (!res->peer_mask) return;
    peers[0] = '\0';
    for (i = 0; i < r->lms->n_peers && i < 32; i++) {
        int w;
        if (!((res->peer_mask >> i) & 1u) || n >= sizeof peers - 1) continue;
        w = RSD_SNPRINTF(peers + n, sizeof peers - n, "%s%s", n ? ", " : "", r->lms->peers[i].target_id.ptr);
        if (w > 0) n = n + (size_t)w > sizeof peers - 1 ? sizeof peers - 1 : n + (size_t)w;
    }
    rsd_reconcile_add_notice(r, RSD_DMSG_PLAN, RSD_NOTICE_CO_RESIDENT, RSD_LEVEL_WARNING, r->result.wire_id,
                         "LM Studio instance '%s' is also loaded on %s; this request may be served by that LM "
                         "Link peer.", r->result.wire_id, peers);
}

/* The request names nothing the complete catalog serves: DECLINED (the reconcile ends). */
RSDI_PRIVATE void rsdi_lms_not_served(rsd_reconcile *r) {
    const rsd_lms_catalog *c = r->lms->cat;
    char ids[RSD_RECONCILE_TEXT_MAX], msg[RSD_RECONCILE_TEXT_MAX];
    size_t n = 0;
    int i;
    ids[0] = '\0';
    for (i = 0; i < c->n_instances && n < sizeof ids - 1; i++) {
        int w = RSD_SNPRINTF(ids + n, sizeof ids - n, "%s%.*s", n ? ", " : "", (int)c->instances[i].id.len,
                             c->instances[i].id.ptr);
        if (w > 0) n = n + (size_t)w > sizeof ids - 1 ? sizeof ids - 1 : n + (size_t)w;
    }
    (void)RSD_SNPRINTF(msg, sizeof msg,
                       "LM Studio target '%.100s' does not advertise model '%.100s'. Resident instances: %.160s. Configure "
                       "an explicit LM Studio load before requesting an unlisted model.",
                       r->target_id, r->keep, n ? ids : "none");
    rsd_reconcile_set_outcome(r, RSD_OUTCOME_DECLINED, RSD_ERR_NOT_SERVED, msg);
    rsd_reconcile_set_decision(r, RSD_DECISION_DECLINE, RSD_REASON_DECLINE_NOT_LOADABLE, false);
    rsd_reconcile_add_notice(r, RSD_DMSG_PLAN, RSD_NOTICE_WILL_NOT_FIT, RSD_LEVEL_ERROR, r->keep, "%s", msg);
}

/* The catalog has an instance for the request: RESIDENT, nothing loaded (keep_resident
   when it was there at the first catalog). The reconcile ends (1). */
RSDI_PRIVATE int rsdi_lms_has_instance(rsd_reconcile *r, bool under_lock) {
    rsd_reconcile_set_decision(r, RSD_DECISION_ALREADY_RESIDENT, RSD_REASON_KEEP_RESIDENT,
                               under_lock ? r->result.keep_resident : true);
    rsd_reconcile_set_outcome(r, RSD_OUTCOME_RESIDENT, RSD_OK, NULL);
    return 1;
}

/* The gate hook: resolve, end early (not served, an instance loaded, no explicit load)
   or decide; 0 = load the keep (its instances before the load are remembered). */
RSDI_PRIVATE int rsdi_lms_gate(rsd_runtime_ctx *c, bool under_lock) {
    rsd_reconcile *r = c->r;
    rsd_lms_resolution res = rsdi_lms_resolve_cat(r);
    int rc = 0;
    if (under_lock) { /* an instance that appeared meanwhile is used */
        if (res.state == RSD_LMS_INSTANCE) return rsdi_lms_has_instance(r, true);
        if (res.state != RSD_LMS_JIT || (rc = rsdi_lms_decide(r, res.model, false)) < 0) {
            rsdi_cpy(c->why, RSD_RECONCILE_TEXT_MAX, "the model changed under the lock");
            return rc < 0 ? rc : RSD_ERR_NOT_SERVED;
        }
        rsdi_lms_snapshot_keep(r);
        return 0;
    }
    rsdi_lms_resolution_notices(r, &res);
    if (res.state == RSD_LMS_UNKNOWN && !r->lms->cat->truncated) {
        rsdi_lms_not_served(r);
        return 1;
    }
    if (res.state == RSD_LMS_INSTANCE) return rsdi_lms_has_instance(r, false);
    if (r->lms->cat->truncated && (res.state == RSD_LMS_UNKNOWN || c->explicit_load)) {
        /* entries were cut off: the keep or a resident may be among them; act on nothing */
        rsdi_cpy(c->why, RSD_RECONCILE_TEXT_MAX, "the catalog is over RSD_LMS_MAX_MODELS/_INSTANCES");
        return RSD_ERR_LISTING_TRUNCATED;
    }
    rsd_reconcile_set_outcome(r, RSD_OUTCOME_OBSERVED, RSD_OK, NULL); /* the server loads on first use */
    if (!c->explicit_load || r->result.tier != RSD_LMS_TIER_V1 || res.state != RSD_LMS_JIT) return 1;
    if ((rc = rsdi_lms_decide(r, res.model, true)) < 0) {
        rsdi_cpy(c->why, RSD_RECONCILE_TEXT_MAX, "the catalog cannot be decided on");
        return rc;
    }
    if (r->plan.decision != RSD_DECISION_LOAD && r->plan.decision != RSD_DECISION_LOAD_AFTER_EVICT) {
        if (r->plan.decision == RSD_DECISION_ALREADY_RESIDENT)
            rsd_reconcile_set_outcome(r, RSD_OUTCOME_RESIDENT, RSD_OK, NULL);
        return 1; /* OBSERVE (never loads) */
    }
    rsdi_lms_snapshot_keep(r);
    return 0;
}

/* The adopt hook: an instance of the keep that was not there before our load landed
   after the client gave up; its id becomes the wire id. */
RSDI_PRIVATE bool rsdi_lms_adopt(rsd_runtime_ctx *c) {
    rsd_reconcile *r = c->r;
    rsd_lms_machine *m = r->lms;
    char id[RSD_MODEL_ID_MAX];
    int i, k;
    for (i = rsdi_lms_first_of(r, r->result.model_key); i >= 0; i = m->cat->index.next[i]) {
        const rsd_lms_instance *in = &m->cat->instances[i];
        bool seen = false;
        for (k = 0; k < m->n_before && !seen; k++) seen = rsd_str_eq_c(in->id, m->before[k]);
        if (seen) continue;
        rsdi_cpy_str(id, sizeof id, in->id);
        (void)rsd_reconcile_set_model(r, NULL, id, RSD_LMS_INSTANCE);
        return true;
    }
    return false;
}

/* The free_room hook: the owned listed instances of the next candidate (from cand[ci])
   named to unload; how many, 0 when no candidate has one. */
RSDI_PRIVATE int rsdi_lms_free_room(rsd_runtime_ctx *c) {
    rsd_reconcile *r = c->r;
    rsd_lms_machine *m = r->lms;
    bool own[RSD_LMS_MAX_INSTANCES];
    char inst[RSD_MODEL_ID_MAX];
    int i, k, n = 0;
    /* which listed instances are owned: one lookup per owned id */
    memset(own, 0, sizeof own);
    for (k = 0; k < c->n_owned; k++) {
        rsd_str id = rsd_str_c(c->owned[k].instance);
        uint32_t pos = rsdi_lms_hash(id), probes = 0;
        while ((i = rsdi_lms_ix_inst(m->cat, &m->cat->index, id, &pos, &probes)) >= 0) own[i] = true;
    }
    for (; m->ci < m->n_cand; m->ci++) {
        n = 0;
        for (i = rsdi_lms_first_of(r, m->cand[m->ci]); i >= 0 && n < 16; i = m->cat->index.next[i]) {
            const rsd_lms_instance *in = &m->cat->instances[i];
            if (!own[i]) continue;
            if (r->result.n_evicted + n >= RSD_LMS_MAX_EVICT) break;
            rsdi_cpy_str(inst, sizeof inst, in->id);
            if (rsd_reconcile_unload(r, inst, m->cand[m->ci], in->context_length) < 0) break;
            n++;
        }
        if (n > 0) {
            m->ci++; /* the next call starts at the next candidate */
            return n;
        }
    }
    return 0;
}

RSD_API const rsd_runtime *rsd_runtime_lmstudio(void) {
    static const rsd_runtime rt = {
        "lmstudio", "LM Studio", RSD_STRATEGY_JIT, RSD_RT_LOAD | RSD_RT_INSTANCES | RSD_RT_LOAD_FIRST,
        rsdi_lms_request, NULL, NULL, rsdi_lms_load_answer,
        RSD_LMS_DEADLINE_MS, RSD_LMS_PROBE_TIMEOUT_MS, RSD_LMS_RESTORE_MS, rsdi_lms_root,
        NULL, NULL, rsdi_lms_catalog, rsdi_lms_gate, rsdi_lms_adopt, rsdi_lms_free_room};
    return &rt;
}
#else
/* Compiled out: no LM Studio adapter (the ensurer says so and manages nothing). */
RSD_API const rsd_runtime *rsd_runtime_lmstudio(void) { return NULL; }
#endif /* RSD_NO_LMSTUDIO */
/* ---- driver:lmstudio end ---- */
/* ---- >>driver:detect ---- */
/* The root is an object whose member `key` has JSON type `type`. */
RSDI_PRIVATE bool rsdi_det_member(rsd_detect *d, const char *body, size_t len, const char *key, rsd_json_type type) {
    rsd_json_doc doc;
    int v;
    if (rsd_json_parse_top(&doc, body, len, d->toks, d->n_toks) <= 0) return false;
    if (rsd_json_type_of(&doc, 0) != RSD_JSON_OBJECT) return false;
    v = rsd_json_find(&doc, 0, key);
    return v >= 0 && rsd_json_type_of(&doc, v) == type;
}

RSDI_PRIVATE bool rsdi_det_router(rsd_detect *d, const char *body, size_t len) {
    rsd_router_props p;
    memset(&p, 0, sizeof p);
    if (rsd_router_parse_props(body, len, d->toks, d->n_toks, &p) != RSD_OK || !p.is_router) return false;
    d->capacity_known = true; /* the reconcile's capacity answer too: GET /props once */
    d->max_instances = p.max_instances;
    d->unlimited = p.unlimited;
    return true;
}

RSDI_PRIVATE bool rsdi_det_ollama(rsd_detect *d, const char *body, size_t len) {
    return rsdi_det_member(d, body, len, "version", RSD_JSON_STRING);
}

RSDI_PRIVATE bool rsdi_det_lms_v1(rsd_detect *d, const char *body, size_t len) {
    return rsdi_det_member(d, body, len, "models", RSD_JSON_ARRAY);
}

RSDI_PRIVATE bool rsdi_det_lms_v0(rsd_detect *d, const char *body, size_t len) {
    return rsdi_det_member(d, body, len, "data", RSD_JSON_ARRAY);
}

typedef struct rsdi_det_probe {
    const char *path;                                    /* GET under the root URL */
    const char *list;                                    /* a listing: the member that is its list */
    bool (*match)(rsd_detect *d, const char *body, size_t len); /* on a 2xx answer */
    const rsd_runtime *(*runtime)(void);
    bool first_listing;                                  /* the answer is the runtime's first listing */
} rsdi_det_probe;

/* Probe order = detection order. */
static const rsdi_det_probe rsdi_det_probes[] = {
    {"/props", NULL, rsdi_det_router, rsd_runtime_router, false},
    {"/api/version", NULL, rsdi_det_ollama, rsd_runtime_ollama, false},
    {"/api/v1/models", "models", rsdi_det_lms_v1, rsd_runtime_lmstudio, true},
    {"/api/v0/models", "data", rsdi_det_lms_v0, rsd_runtime_lmstudio, false}
};
enum { RSDI_DET_NPROBES = (int)(sizeof rsdi_det_probes / sizeof rsdi_det_probes[0]) };

RSDI_PRIVATE void rsdi_det_done(rsd_detect *d, int err) {
    d->error = err;
    d->probe = RSDI_DET_NPROBES;
    memset(&d->step, 0, sizeof d->step);
    d->step.kind = RSD_STEP_DONE;
    d->step.result = err;
}

RSD_API int rsd_detect_begin(rsd_detect *d, const char *base_url, const char *bearer, uint32_t probe_timeout_ms,
                             uint64_t deadline_ms, uint64_t now_ms) {
    int rc;
    if (!d) return RSD_ERR_ARG;
    memset(&d->step, 0, sizeof d->step);
    d->runtime = NULL;
    d->capacity_known = d->unlimited = d->first_listing = d->saw_auth = false;
    d->max_instances = d->requests = 0;
    d->message[0] = d->auth[0] = '\0';
    d->url = "";
    d->tries = d->probe = d->probe0_status = 0;
    d->has_bearer = bearer && bearer[0];
    d->error = RSD_ERR_ARG;
    d->step.kind = RSD_STEP_DONE;
    d->step.result = RSD_ERR_ARG;
    if (!base_url || !rsdi_cpy(d->base, sizeof d->base, base_url) || !d->toks || d->n_toks < 64) return RSD_ERR_ARG;
    if ((rc = rsdi_rc_root(rsd_runtime_router(), base_url, d->root, sizeof d->root)) < 0) {
        rsdi_det_done(d, rc);
        return rc;
    }
    if (bearer && bearer[0] && RSD_SNPRINTF(d->auth, sizeof d->auth, "Bearer %s", bearer) >= (int)sizeof d->auth) {
        rsdi_det_done(d, RSD_ERR_ARG);
        return RSD_ERR_ARG;
    }
    d->probe_ms = probe_timeout_ms ? probe_timeout_ms : (uint32_t)RSD_RECONCILE_PROBE_TIMEOUT_MS;
    d->deadline = deadline_ms;
    d->error = RSD_OK;
    d->step.kind = RSD_STEP_NONE;
    d->step.result = RSD_OK;
    (void)now_ms;
    return RSD_OK;
}

RSD_API rsd_step rsd_detect_next(rsd_detect *d, uint64_t now_ms) {
    rsd_step_http *h;
    uint64_t t, left;
    if (!d) {
        rsd_step s;
        memset(&s, 0, sizeof s);
        s.kind = RSD_STEP_DONE;
        s.result = RSD_ERR_ARG;
        return s;
    }
    if (d->step.kind != RSD_STEP_NONE) return d->step; /* outstanding, or DONE */
    memset(&d->step, 0, sizeof d->step);
    (void)RSD_SNPRINTF(d->probe_url, sizeof d->probe_url, "%s%s", d->root, rsdi_det_probes[d->probe].path);
    h = &d->step.http;
    d->step.kind = RSD_STEP_HTTP;
    h->op = RSD_OP_LIST;
    h->model = "";
    h->method = "GET";
    h->url = d->url = d->probe_url;
    if (d->auth[0]) {
        h->headers[0].name = "Authorization";
        h->headers[0].value = d->auth;
        h->n_headers = 1;
    }
    /* a probe sent again after a timeout gets twice the time */
    left = d->deadline > now_ms ? d->deadline - now_ms : 1;
    t = (uint64_t)d->probe_ms << d->tries;
    if (t > left) t = left;
    h->timeout_ms = t > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)t;
    d->requests++;
    d->buf_len = 0;
    d->buf_state = RSDI_ANS_WHOLE;
    return d->step;
}

RSD_API int rsd_detect_body(rsd_detect *d, int status, const char *data, size_t len) {
    if (!d || d->step.kind != RSD_STEP_HTTP || !d->buf || d->buf_cap < 1024) return RSD_ERR_STATE;
    if (!len) return RSD_OK;
    if (!data) return RSD_ERR_ARG;
    if (d->buf_state == RSDI_ANS_WHOLE && len > d->buf_cap - d->buf_len) {
        if (status >= 200 && status <= 299 && rsdi_det_probes[d->probe].list) { /* read as it arrives, in place */
            rsd_json_split_init(&d->split, d->buf, d->buf_cap, d->toks, d->n_toks, NULL, NULL);
            (void)rsd_json_split_feed(&d->split, d->buf, d->buf_len);
            d->buf_state = RSDI_ANS_SPLIT;
        } else {
            d->buf_state = RSDI_ANS_OVER; /* kept whole, and larger than the buffer */
        }
    }
    if (d->buf_state == RSDI_ANS_SPLIT) (void)rsd_json_split_feed(&d->split, data, len);
    else if (d->buf_state == RSDI_ANS_WHOLE) {
        if (data != d->buf + d->buf_len) memmove(d->buf + d->buf_len, data, len);
        d->buf_len += len;
    }
    return RSD_OK;
}

/* A probe's 2xx answer matches: kept whole, its own reader; read as it arrived, its list. */
RSDI_PRIVATE bool rsdi_det_match(rsd_detect *d, const rsdi_det_probe *p, const char *body, size_t len) {
    rsd_json_doc top;
    int v;
    if (d->buf_state == RSDI_ANS_OVER) return false; /* e.g. a single-model server's /props: not a router's */
    if (d->buf_state != RSDI_ANS_SPLIT) return p->match(d, body, len);
    if (rsd_json_split_end(&d->split, &top) <= 0 || rsd_json_type_of(&top, 0) != RSD_JSON_OBJECT) return false;
    v = rsd_json_find(&top, 0, p->list);
    return v >= 0 && rsd_json_type_of(&top, v) == RSD_JSON_ARRAY;
}

RSD_API int rsd_detect_feed(rsd_detect *d, int transport, int status, const char *body, size_t len,
                            const char *why, uint64_t now_ms) {
    const rsdi_det_probe *p;
    if (!d || d->step.kind != RSD_STEP_HTTP) return RSD_ERR_STATE;
    if (!body) len = 0;
    if (d->buf && d->buf_cap >= 1024) { /* the answer in the buffer (this piece the last) */
        if (len) (void)rsd_detect_body(d, status, body, len);
        body = d->buf;
        len = d->buf_state == RSDI_ANS_WHOLE ? d->buf_len : 0;
    }
    p = &rsdi_det_probes[d->probe];
    d->step.kind = RSD_STEP_NONE;
    if (transport == RSD_ERR_TIMEOUT && now_ms < d->deadline) { /* busy, not gone: the same probe again */
        if (d->tries < 16) d->tries++;
        return RSD_OK;
    }
    d->tries = 0;
    if (transport < 0 && (transport == RSD_ERR_CONNECT || transport == RSD_ERR_RESOLVE || d->probe == 0)) {
        char w[128];
        bool unreachable = transport == RSD_ERR_CONNECT || transport == RSD_ERR_RESOLVE || transport == RSD_ERR_TIMEOUT ||
                           transport == RSD_ERR_CLOSED || transport == RSD_ERR_IO || transport == RSD_ERR_TLS ||
                           transport == RSD_ERR_TLS_VERIFY;
        /* plain words: "connection refused", "timed out", "name resolution failed" */
        (void)rsdi_cpy(w, sizeof w, why && why[0] ? why : rsd_result_str(transport));
        if (w[0] >= 'A' && w[0] <= 'Z') w[0] = (char)(w[0] - 'A' + 'a');
        if (unreachable) (void)RSD_SNPRINTF(d->message, sizeof d->message, "server unreachable: %s (%s)", w, d->base);
        else /* it answered, but not in HTTP a model server speaks (another protocol, a huge head) */
            (void)RSD_SNPRINTF(d->message, sizeof d->message, "not a model server: GET %s: %s", d->probe_url, w);
        rsdi_det_done(d, transport);
        return RSD_OK;
    }
    if (transport == RSD_OK && (status == 401 || status == 403)) d->saw_auth = true;
    if (d->probe == 0) d->probe0_status = status;
    if (transport == RSD_OK && status >= 200 && status <= 299 && rsdi_det_match(d, p, body, len)) {
        d->runtime = p->runtime();
        d->first_listing = p->first_listing && d->buf_state == RSDI_ANS_WHOLE; /* kept whole: replayed */
        rsdi_det_done(d, RSD_OK);
        return RSD_OK;
    }
    if (++d->probe < RSDI_DET_NPROBES) return RSD_OK;
    if (d->saw_auth) {
        (void)RSD_SNPRINTF(d->message, sizeof d->message,
                           d->has_bearer ? "%s refused the API key given (HTTP 401/403)"
                                         : "%s asks for an API key (HTTP 401/403) and none was given", d->base);
        rsdi_det_done(d, RSD_ERR_AUTH);
    } else {
        (void)RSD_SNPRINTF(d->message, sizeof d->message,
                           "not a model server: %s answers, but not as a llama.cpp router, Ollama or LM "
                           "Studio (GET %s: HTTP %d)", d->base, rsdi_det_probes[0].path, d->probe0_status);
        rsdi_det_done(d, RSD_ERR_NOT_FOUND);
    }
    return RSD_OK;
}
/* ---- driver:detect end ---- */
/* ==== driver end ========================================================== */

/* ==== >>pool ============================================================== */
#define RSDI_POOL_NIL 0xFFFFFFFFu
#define RSDI_POOL_REQ_BITS 20  /* handle index bits: RSD_POOL_MAX_REQUESTS */
#define RSDI_POOL_PROC_BITS 8  /* RSD_POOL_MAX_SLOTS */
#define RSDI_POOL_LEASE_BITS 4 /* RSD_POOL_MAX_LEASES */
#define RSDI_POOL_UNLIMITED ((int64_t)1 << 62)

enum { RSDI_PREQ_FREE = 0, RSDI_PREQ_WAITING, RSDI_PREQ_RUNNING, RSDI_PREQ_FAILED,
       RSDI_PREQ_ORPHAN };
enum { RSDI_PNTF_NONE = 0, RSDI_PNTF_GRANT, RSDI_PNTF_FAIL };

typedef struct rsdi_pool_reqent {
    uint32_t gen;          /* 1..4095 while live */
    uint8_t state;         /* RSDI_PREQ_* */
    uint8_t ntf;           /* RSDI_PNTF_*: on the notify list */
    uint8_t preload;       /* rsd_pool_preload: no handle, freed when granted */
    uint8_t exclusive;     /* RSD_POOL_ACQUIRE_EXCLUSIVE: runs alone on its process */
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
    uint32_t wq_head, wq_tail, wq_count, wq_preloads; /* queue length; preloads in it */
    int want_prev, want_next;        /* list of models waiting for a slot */
    bool wanting;
    uint64_t last_used_ms;           /* now_ms of its last grant or finished request */
    uint32_t start_failures;         /* consecutive failed starts */
    uint64_t retry_at_ms;            /* backoff: no new start before this; 0 = none */
    int evicted_for;                 /* the model whose claim evicted it (restored if that
                                        start fails); -1 = none */
    bool drain_next;                 /* its next start drains once started: an unload(DRAIN)
                                        met a start that rsd_pool_restart made again */
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
    uint32_t limit;                  /* the process's own concurrency (set_slot_limit); 0 = none */
    rsd_pool_action_kind pending;    /* SPAWN or STOP waiting to be pulled */
    rsd_pool_why why;
    int act_next;                    /* slot action FIFO link */
    bool in_act;
    bool drain_after_start;          /* unload(DRAIN) arrived while STARTING */
    bool exclusive;                  /* an exclusive request runs: nothing else admitted */
} rsdi_pool_slot;

typedef struct rsdi_pool_leaseent {
    uint32_t gen;          /* 0 = free */
    bool restore;
    uint64_t requested, granted, expires_ms;
    uint64_t stopped;      /* bit m: model m stopped for it */
} rsdi_pool_leaseent;

struct rsd_pool {
    rsd_allocator alloc;
    rsd_logger logger;
    int max_slots;
    uint32_t max_requests, max_waiting, max_wait_ms, backoff_ms, backoff_max_ms;
    int overlap;       /* rsd_pool_overlap */
    uint64_t budget_bytes, default_reserve, measured_total, foreign_bytes;
    bool stopped;
    uint64_t clock, now_ms;
    rsdi_pool_model models[RSD_POOL_MAX_MODELS];
    int num_models;
    rsdi_pool_slot slots[RSD_POOL_MAX_SLOTS];
    int want_head, want_tail;
    int act_head, act_tail;
    uint32_t ntf_head, ntf_tail, ntf_count;
    rsdi_pool_reqent *reqs;
    rsdi_pool_link *wq;    /* model wait queue links; wq[i].next = free list link */
    rsdi_pool_link *nt;    /* notify list links */
    uint32_t free_head, free_tail;
    uint32_t waiting, running, models_waiting, preloads;
    uint32_t foreign_held; /* models the last pass held back only for foreign_bytes */
    uint64_t reserved_total;
    rsd_pool_event *evlog;
    uint32_t ev_cap, ev_head, ev_count;
    rsd_pool_info ctr; /* counters only (slots[] unused here) */
    uint64_t work;      /* white-box: model/slot visits in admission passes (tests) */
    bool trim_pending;  /* live slots above max after configure (busy excess) */
    rsdi_pool_leaseent leases[RSD_POOL_MAX_LEASES];
    uint32_t lease_gen[RSD_POOL_MAX_LEASES]; /* last generation handed out per entry */
    uint64_t leased_total; /* sum of the live leases' granted bytes */
};

RSDI_PRIVATE void rsdi_pool_lease_end(rsd_pool *p, int i);

/* a + b saturating at RSD_NO_DEADLINE (times come from the host). */
RSDI_PRIVATE uint64_t rsdi_pool_at(uint64_t a, uint64_t b) {
    return a > RSD_NO_DEADLINE - b ? RSD_NO_DEADLINE : a + b;
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
RSDI_PRIVATE rsd_pool_req_h rsdi_pool_handle(const rsd_pool *p, uint32_t idx) {
    rsd_pool_req_h h;
    h.id = rsdi_handle_make(p->reqs[idx].gen, idx, RSDI_POOL_REQ_BITS);
    return h;
}

RSDI_PRIVATE rsdi_pool_reqent *rsdi_pool_lookup(rsd_pool *p, rsd_pool_req_h h, uint32_t *idx) {
    uint32_t i = rsdi_handle_idx(h.id, RSDI_POOL_REQ_BITS), g = rsdi_handle_gen(h.id, RSDI_POOL_REQ_BITS);
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
    r->gen = rsdi_handle_next_gen(r->gen, RSDI_POOL_REQ_BITS);
    p->wq[i].prev = p->wq[i].next = p->nt[i].prev = p->nt[i].next = RSDI_POOL_NIL;
    r->ntf = RSDI_PNTF_NONE;
    r->preload = 0;
    r->exclusive = 0;
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
    p->ntf_count++;
}

RSDI_PRIVATE void rsdi_pool_ntf_unlink(rsd_pool *p, uint32_t i) {
    rsdi_pool_reqent *r = &p->reqs[i];
    rsdi_pool_link *l = &p->nt[i];
    if (r->ntf == RSDI_PNTF_NONE) return;
    if (l->prev != RSDI_POOL_NIL) p->nt[l->prev].next = l->next;
    else p->ntf_head = l->next;
    if (l->next != RSDI_POOL_NIL) p->nt[l->next].prev = l->prev;
    else p->ntf_tail = l->prev;
    p->ntf_count--;
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
    if (p->reqs[i].preload) { p->preloads++; md->wq_preloads++; }
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
    if (p->reqs[i].preload) { p->preloads--; md->wq_preloads--; }
    else p->waiting--;
    if (md->wq_count == 0) {
        rsdi_pool_want_del(p, m);
        md->drain_next = false; /* nobody left for it to serve */
    }
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
    p->models[r->model].last_used_ms = p->now_ms;
    sl->idle_deadline_ms = RSD_NO_DEADLINE;
    p->running++;
    p->ctr.grants_queued++;
    if (waited > p->ctr.max_wait_ms) p->ctr.max_wait_ms = waited;
    rsdi_pool_ntf_push(p, i, RSDI_PNTF_GRANT);
}

/* Requests slot s may take at once: the model's max_in_flight and the process's own
   limit (rsd_pool_set_slot_limit), the smaller when both are set; 0 = unlimited. */
RSDI_PRIVATE uint32_t rsdi_pool_cap(const rsd_pool *p, int s) {
    uint32_t m = p->models[p->slots[s].model].max_in_flight, l = p->slots[s].limit;
    return !l ? m : !m || l < m ? l : m;
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
    uint32_t cap = rsdi_pool_cap(p, s);
    while (md->wq_head != RSDI_POOL_NIL && !sl->exclusive && (cap == 0 || sl->in_flight < cap)) {
#if defined(__GNUC__) || defined(__clang__)
        if (ahead != RSDI_POOL_NIL) {
            __builtin_prefetch(&p->reqs[ahead], 1);
            ahead = p->wq[ahead].next;
        }
#endif
        if (p->reqs[md->wq_head].exclusive) { /* it waits for the process to drain */
            if (sl->in_flight != 0) break;
            sl->exclusive = true;
        }
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
        if (r->exclusive) p->slots[(int)r->slot].exclusive = false;
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
RSDI_PRIVATE rsd_pool_proc_h rsdi_pool_proc_of(const rsd_pool *p, int s) {
    rsd_pool_proc_h h;
    h.id = rsdi_handle_make(p->slots[s].gen, (uint32_t)s, RSDI_POOL_PROC_BITS);
    return h;
}

RSDI_PRIVATE void rsdi_pool_claim(rsd_pool *p, int s, int m) {
    rsdi_pool_slot *sl = &p->slots[s];
    sl->gen = rsdi_handle_next_gen(sl->gen, RSDI_POOL_PROC_BITS);
    sl->state = RSD_POOL_SLOT_STARTING;
    sl->model = m;
    sl->in_flight = 0;
    sl->reserve_bytes = p->models[m].reserve_bytes;
    sl->last_use = ++p->clock;
    sl->idle_deadline_ms = RSD_NO_DEADLINE;
    sl->pid = 0;
    sl->limit = 0;
    sl->drain_after_start = p->models[m].drain_next;
    p->models[m].drain_next = false;
    sl->exclusive = false;
    sl->why = RSD_POOL_WHY_NONE;
    p->reserved_total += sl->reserve_bytes;
    p->models[m].slot = s;
    p->models[m].evicted_for = -1;
    rsdi_pool_want_del(p, m);
    p->ctr.spawns++;
    rsdi_pool_act_push(p, s, RSD_POOL_ACTION_SPAWN);
    rsdi_pool_event_log(p, RSD_POOL_EV_CLAIM, RSD_POOL_WHY_NONE, s);
}

/* Model m claims an empty slot entry when free_s and free_b hold one more process of r
   bytes: true (both counted down), else false with nothing changed. */
RSDI_PRIVATE bool rsdi_pool_claim_empty(rsd_pool *p, int m, int64_t r, int64_t *free_s, int64_t *free_b) {
    int s;
    if (*free_s < 1 || *free_b < r) return false;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++)
        if (p->slots[s].state == RSD_POOL_SLOT_EMPTY) break;
    if (s == RSD_POOL_MAX_SLOTS) return false;
    rsdi_pool_claim(p, s, m);
    (*free_s)--;
    *free_b -= r;
    return true;
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
    sl->idle_deadline_ms = RSD_NO_DEADLINE;
    sl->pid = 0;
    sl->drain_after_start = false;
    sl->exclusive = false;
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
    sl->idle_deadline_ms = RSD_NO_DEADLINE;
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
              sl->model >= 0 ? p->models[sl->model].id : "-", rsd_pool_why_str((int)why));
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

/* Nobody waits for a slot any more: starvation drains lose their reason, so those slots take
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

/* Admission pass. Visits each model waiting for a slot
   in FIFO order; work is O(models x slots), independent of the number of waiters. */
RSDI_PRIVATE void rsdi_pool_pass(rsd_pool *p) {
    int s, m, next, live;
    int64_t free_s, free_b, pend_s = 0, pend_b = 0, cap;
    uint64_t budget;
    bool ov; /* a stopping process holds no count slot: a start may begin beside it */
    if (p->stopped) return;
    p->work++;
    /* trim: idle excess above max, LRU first; busy excess waits. */
    live = rsdi_pool_count(p, true);
    while (live > p->max_slots && (s = rsdi_pool_lru_idle(p, 0, false)) >= 0) {
        rsdi_pool_stop_slot(p, s, RSD_POOL_WHY_TRIM);
        live--;
    }
    p->trim_pending = live > p->max_slots;
    p->foreign_held = 0;
    if (p->want_head < 0) {
        if (p->ctr.starve_drains) rsdi_pool_undrain(p);
        return;
    }
    budget = rsdi_pool_budget(p);
    ov = p->overlap == RSD_POOL_OVERLAP_COUNT || (p->overlap == RSD_POOL_OVERLAP_BYTES && budget);
    cap = budget ? (int64_t)budget - (int64_t)(p->foreign_bytes < budget ? p->foreign_bytes : budget)
                 : RSDI_POOL_UNLIMITED;
    cap -= (int64_t)p->leased_total; /* a lease's bytes go to no start */
    free_s = (int64_t)p->max_slots - rsdi_pool_count(p, ov);
    free_b = cap - (int64_t)p->reserved_total;
    /* Capacity already on its way out (stopping, or draining toward a stop); with ov a
       stopping process's count slot is free already, its bytes are not until it exits. */
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        rsd_pool_slot_state st = p->slots[s].state;
        if (st == RSD_POOL_SLOT_STOPPING || st == RSD_POOL_SLOT_FAILED ||
            st == RSD_POOL_SLOT_DRAINING) {
            if (!ov || st == RSD_POOL_SLOT_DRAINING) pend_s++;
            pend_b += (int64_t)p->slots[s].reserve_bytes;
        }
    }
    if (free_s < 0) { pend_s += free_s; free_s = 0; }
    for (m = p->want_head; m >= 0; m = next) {
        rsdi_pool_model *md = &p->models[m];
        int64_t r = (int64_t)md->reserve_bytes, avail_s, avail_b;
        uint32_t picked = 0;
        int victims = 0, v, k, order[RSD_POOL_MAX_SLOTS];
        bool starving;
        next = md->want_next;
        p->work++;
        if ((v = rsdi_pool_never_fits(p, m)) < 0) { /* can never fit: fail at once */
            p->ctr.no_fit++;
            rsdi_logf(&p->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_NO_FIT, RSDI_WHERE,
                      "pool: %s (%llu bytes) cannot fit: %s (budget %llu bytes, others hold %llu)", md->id,
                      (unsigned long long)md->reserve_bytes, rsd_result_str(v),
                      (unsigned long long)rsdi_pool_budget(p), (unsigned long long)p->foreign_bytes);
            rsdi_pool_fail_model_waiters(p, m, v);
            continue;
        }
        if (rsdi_pool_claim_empty(p, m, r, &free_s, &free_b)) continue; /* room now: claim */
        avail_s = free_s + pend_s;
        avail_b = free_b + pend_b;
        /* Evict idle LRU slots until count and bytes fit. Decide the whole
           set first: evicting idle slots that cannot make enough room is pointless. */
        while ((avail_s < 1 || avail_b < r) && (v = rsdi_pool_lru_idle(p, picked, false)) >= 0) {
            picked |= 1u << v;
            order[victims++] = v;
            avail_s++;
            avail_b += (int64_t)p->slots[v].reserve_bytes;
        }
        /* Then spare every victim the others make unneeded, the latest picked first (a
           small LRU victim picked before a large one that alone makes room stays). */
        for (k = victims - 2; k >= 0 && avail_s >= 1 && avail_b >= r; k--) {
            int64_t b = (int64_t)p->slots[order[k]].reserve_bytes;
            if (avail_s - 1 < 1 || avail_b - b < r) continue;
            picked &= ~(1u << order[k]);
            avail_s--;
            avail_b -= b;
        }
        starving = p->max_wait_ms != RSD_POOL_WAIT_FOREVER && md->wq_head != RSDI_POOL_NIL &&
                   p->now_ms >= rsdi_pool_at(p->reqs[md->wq_head].enq_ms, p->max_wait_ms);
        if (avail_s < 1 || avail_b < r) {
            /* past the wait bound, busy LRU slots stop taking new work and drain. */
            uint32_t drain = 0;
            if (starving) {
                while ((avail_s < 1 || avail_b < r) &&
                       (v = rsdi_pool_lru_idle(p, picked | drain, true)) >= 0) {
                    drain |= 1u << v;
                    avail_s++;
                    avail_b += (int64_t)p->slots[v].reserve_bytes;
                }
            }
            if (avail_s < 1 || avail_b < r) { /* cannot be covered now: wait */
                /* held only by others' memory: it would be covered without it */
                if (avail_s >= 1 && budget && p->foreign_bytes &&
                    avail_b + (int64_t)(p->foreign_bytes < budget ? p->foreign_bytes : budget) >= r)
                    p->foreign_held++;
                continue;
            }
            for (v = 0; v < RSD_POOL_MAX_SLOTS; v++) {
                if (!(drain & (1u << v))) continue;
                p->slots[v].state = RSD_POOL_SLOT_DRAINING;
                p->slots[v].why = RSD_POOL_WHY_STARVE;
                p->slots[v].idle_deadline_ms = RSD_NO_DEADLINE;
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
                p->models[p->slots[v].model].evicted_for = m;
                if (ov) free_s++;
                else pend_s++;
                pend_b += (int64_t)p->slots[v].reserve_bytes;
                rsdi_pool_stop_slot(p, v, RSD_POOL_WHY_EVICT);
            }
            /* With ov the start begins now, beside the stops, when the bytes hold both
               (and a slot entry is empty: up to RSD_POOL_MAX_SLOTS processes at once). */
            if (ov && rsdi_pool_claim_empty(p, m, r, &free_s, &free_b)) continue;
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
            sl->idle_deadline_ms = ttl ? rsdi_pool_at(p->now_ms, ttl) : RSD_NO_DEADLINE;
            if (p->want_head >= 0 || p->trim_pending) rsdi_pool_pass(p);
        }
    } else if (sl->state == RSD_POOL_SLOT_DRAINING && sl->in_flight == 0) {
        rsdi_pool_stop_slot(p, s, sl->why == RSD_POOL_WHY_NONE ? RSD_POOL_WHY_UNLOAD : sl->why);
        /* its count slot is free now where starts overlap stops (the pass decides) */
        if (p->overlap != RSD_POOL_OVERLAP_OFF && p->want_head >= 0) rsdi_pool_pass(p);
    }
}

/* ---- public --------------------------------------------------------------- */
RSD_API int rsd_pool_proc_slot(rsd_pool_proc_h proc) {
    uint32_t s = rsdi_handle_idx(proc.id, RSDI_POOL_PROC_BITS);
    return proc.id == 0 || s >= RSD_POOL_MAX_SLOTS ? -1 : (int)s;
}

RSD_API const char *rsd_pool_slot_state_str(int state) {
    static const char *const n[] = {"empty", "starting", "ready", "draining", "stopping", "failed"};
    return state >= 0 && state < (int)RSD_POOL_SLOT_NUM ? n[state] : "unknown";
}

RSD_API const char *rsd_pool_why_str(int why) {
    static const char *const n[] = {"none", "evict", "ttl", "trim", "starve", "unload",
                                    "shutdown", "load-failed", "lease", "restart"};
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
    md->evicted_for = -1;
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

/* rsd_pool_create's one block: pool, entries, two link arrays, event ring (each 16-byte
   aligned): the offsets and the total. */
typedef struct rsdi_pool_layout {
    size_t off_reqs, off_wq, off_nt, off_ev, total;
} rsdi_pool_layout;

/* rsd_pool_create's checks and sizes: fills in d's defaults and *z; RSD_OK, or RSD_ERR_ARG
   for a desc create refuses (said to d's logger). */
RSDI_PRIVATE int rsdi_pool_plan(rsd_pool_desc *d, rsdi_pool_layout *z) {
    size_t reqs_bytes, link_bytes, ev_bytes;
    int k;
    if (rsdi_allocator_check(&d->allocator) < 0) {
        rsdi_log(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_ALLOCATOR_HALF, NULL, RSDI_WHERE);
        return RSD_ERR_ARG;
    }
    if (d->max_requests == 0) d->max_requests = RSD_POOL_DEFAULT_REQUESTS;
    if (d->max_waiting == 0 || d->max_waiting > d->max_requests) d->max_waiting = d->max_requests;
    if (d->max_wait_ms == 0) d->max_wait_ms = RSD_POOL_DEFAULT_MAX_WAIT_MS;
    if (d->max_requests > RSD_POOL_MAX_REQUESTS || d->vram_budget_bytes > RSD_POOL_MAX_BYTES ||
        d->default_reserve_bytes > RSD_POOL_MAX_BYTES || d->num_models < 0 ||
        d->num_models > RSD_POOL_MAX_MODELS || (d->num_models > 0 && !d->models) ||
        d->event_log > RSD_POOL_MAX_REQUESTS || d->overlap < 0 || d->overlap > RSD_POOL_OVERLAP_OFF) {
        rsdi_log(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_POOL_BAD_DESC,
                 "pool: desc out of range (max_requests, bytes, num_models, event_log or overlap)",
                 RSDI_WHERE);
        return RSD_ERR_ARG;
    }
    for (k = 0; k < d->num_models; k++) {
        if (rsdi_pool_model_check(&d->models[k]) < 0) {
            rsdi_log(&d->logger, RSD_LOG_ERROR, RSD_LOGITEM_POOL_BAD_MODEL,
                     "pool: bad model in desc.models", RSDI_WHERE);
            return RSD_ERR_ARG;
        }
    }
    z->off_reqs = (sizeof(rsd_pool) + 15u) & ~(size_t)15u;
    if (!rsdi_size_mul(d->max_requests, sizeof(rsdi_pool_reqent), &reqs_bytes) ||
        !rsdi_size_mul(d->max_requests, sizeof(rsdi_pool_link), &link_bytes) ||
        !rsdi_size_add(z->off_reqs, reqs_bytes, &z->off_wq) ||
        !rsdi_size_add((z->off_wq + 15u) & ~(size_t)15u, link_bytes, &z->off_nt) ||
        !rsdi_size_add((z->off_nt + 15u) & ~(size_t)15u, link_bytes, &z->off_ev) ||
        !rsdi_size_mul(d->event_log, sizeof(rsd_pool_event), &ev_bytes))
        return RSD_ERR_ARG;
    z->off_wq = (z->off_wq + 15u) & ~(size_t)15u;
    z->off_nt = (z->off_nt + 15u) & ~(size_t)15u;
    z->off_ev = (z->off_ev + 15u) & ~(size_t)15u;
    return rsdi_size_add(z->off_ev, ev_bytes, &z->total) ? RSD_OK : RSD_ERR_ARG;
}

RSD_API size_t rsd_pool_footprint(const rsd_pool_desc *desc) {
    rsd_pool_desc d;
    rsdi_pool_layout z;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    memset(&d.logger, 0, sizeof d.logger); /* a measure, not a create: nothing to say */
    return rsdi_pool_plan(&d, &z) == RSD_OK ? z.total : 0;
}

RSD_API rsd_pool *rsd_pool_create(const rsd_pool_desc *desc) {
    rsd_pool_desc d;
    rsd_pool *p;
    rsdi_pool_layout z;
    uint32_t i;
    int k;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d); /* NULL = the defaults, as every create */
    if (rsdi_pool_plan(&d, &z) != RSD_OK) return NULL;
    p = (rsd_pool *)rsdi_malloc(&d.allocator, z.total);
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
    p->overlap = d.overlap;
    p->backoff_ms = d.start_backoff_ms ? d.start_backoff_ms : (uint32_t)RSD_POOL_DEFAULT_BACKOFF_MS;
    p->backoff_max_ms = d.start_backoff_max_ms ? d.start_backoff_max_ms
                                               : (uint32_t)RSD_POOL_DEFAULT_BACKOFF_MAX_MS;
    if (p->backoff_max_ms < p->backoff_ms) p->backoff_max_ms = p->backoff_ms;
    p->budget_bytes = d.vram_budget_bytes;
    p->default_reserve = d.default_reserve_bytes;
    p->reqs = (rsdi_pool_reqent *)(void *)((char *)p + z.off_reqs);
    p->wq = (rsdi_pool_link *)(void *)((char *)p + z.off_wq);
    p->nt = (rsdi_pool_link *)(void *)((char *)p + z.off_nt);
    p->evlog = d.event_log ? (rsd_pool_event *)(void *)((char *)p + z.off_ev) : NULL;
    p->ev_cap = d.event_log;
    p->want_head = p->want_tail = -1;
    p->act_head = p->act_tail = -1;
    p->ntf_head = p->ntf_tail = RSDI_POOL_NIL;
    for (k = 0; k < RSD_POOL_MAX_SLOTS; k++) {
        p->slots[k].model = -1;
        p->slots[k].act_next = -1;
        p->slots[k].idle_deadline_ms = RSD_NO_DEADLINE;
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

RSD_API int rsd_pool_set_model(rsd_pool *pool, int model, const rsd_pool_model_desc *d, uint64_t now_ms) {
    rsd_pool_model_desc c;
    rsdi_pool_model *md;
    if (!pool || !d || model < 0 || model >= pool->num_models) return RSD_ERR_ARG;
    md = &pool->models[model];
    c = *d;
    if (!c.id) c.id = md->id;
    if (rsdi_pool_model_check(&c) < 0 || strcmp(c.id, md->id) != 0) return RSD_ERR_ARG;
    md->reserve_bytes = c.reserve_bytes ? c.reserve_bytes : pool->default_reserve;
    md->ttl_ms = c.ttl_ms;
    md->max_in_flight = c.max_in_flight;
    return rsd_pool_set_pinned(pool, model, c.pinned, now_ms); /* the pin's rules, then a pass */
}

RSD_API int rsd_pool_set_pinned(rsd_pool *pool, int model, bool pinned, uint64_t now_ms) {
    if (!pool || model < 0 || model >= pool->num_models) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    pool->models[model].pinned = pinned;
    if (pinned) {
        /* A pin wins over a starvation drain: the slot takes work again. */
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
                             rsd_pool_req_h *req, int *slot) {
    return rsd_pool_acquire_ex(pool, model, 0, now_ms, user, req, slot);
}

/* Queues a waiting request for model (req: its handle, counted in waits) or, with req
   NULL, a preload; a model without a slot is wanted and a pass runs. RSD_PENDING, or the
   error (an acquire's is logged). */
RSDI_PRIVATE int rsdi_pool_enqueue(rsd_pool *pool, int model, bool excl, void *user, uint64_t enq_ms,
                                   rsd_pool_req_h *req) {
    rsdi_pool_model *md = &pool->models[model];
    rsdi_pool_reqent *r;
    uint32_t i;
    int s = md->slot, rc;
    if (s < 0 && !md->wanting && (rc = rsdi_pool_never_fits(pool, model)) < 0) {
        pool->ctr.no_fit++;
        if (req)
            rsdi_logf(&pool->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_NO_FIT, RSDI_WHERE,
                      "pool: %s (%llu bytes) cannot fit: %s (budget %llu bytes, others hold %llu)", md->id,
                      (unsigned long long)md->reserve_bytes, rsd_result_str(rc),
                      (unsigned long long)rsdi_pool_budget(pool), (unsigned long long)pool->foreign_bytes);
        return rc;
    }
    if (pool->waiting + pool->preloads >= pool->max_waiting ||
        (i = rsdi_pool_req_alloc(pool)) == RSDI_POOL_NIL) {
        pool->ctr.queue_full++;
        if (req) rsdi_log(&pool->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_QUEUE_FULL, "pool: waiting queue full", RSDI_WHERE);
        return RSD_ERR_POOL_QUEUE_FULL;
    }
    r = &pool->reqs[i];
    r->state = RSDI_PREQ_WAITING;
    r->exclusive = (uint8_t)excl;
    r->preload = req ? 0 : 1;
    r->model = (int16_t)model;
    r->user = user;
    r->enq_ms = enq_ms;
    rsdi_pool_wq_push(pool, model, i);
    if (req) {
        pool->ctr.waits++;
        *req = rsdi_pool_handle(pool, i);
    }
    if (s < 0 && !md->wanting) { /* needs a slot; residents keep flowing */
        rsdi_pool_want_add(pool, model);
        rsdi_pool_pass(pool);
    }
    return RSD_PENDING;
}

RSD_API int rsd_pool_acquire_ex(rsd_pool *pool, int model, int flags, uint64_t now_ms,
                                void *user, rsd_pool_req_h *req, int *slot) {
    rsdi_pool_model *md;
    rsdi_pool_reqent *r;
    uint32_t i;
    int s;
    bool excl = (flags & RSD_POOL_ACQUIRE_EXCLUSIVE) != 0;
    if (req) req->id = 0;
    if (slot) *slot = -1;
    if (!pool || !req || model < 0 || model >= pool->num_models ||
        (flags & ~RSD_POOL_ACQUIRE_EXCLUSIVE))
        return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return RSD_ERR_POOL_STOPPED;
    md = &pool->models[model];
    pool->ctr.acquires++;
    s = md->slot;
    /* Fast path: resident and ready, room, nobody queued ahead; an exclusive
       request only on an idle process, and nothing beside a running exclusive one. */
    if (RSDI_LIKELY(s >= 0 && pool->slots[s].state == RSD_POOL_SLOT_READY &&
                    md->wq_head == RSDI_POOL_NIL && !pool->slots[s].exclusive &&
                    (excl ? pool->slots[s].in_flight == 0
                          : ((md->max_in_flight == 0 && pool->slots[s].limit == 0) ||
                             pool->slots[s].in_flight < rsdi_pool_cap(pool, s))))) {
        rsdi_pool_slot *sl = &pool->slots[s];
        i = rsdi_pool_req_alloc(pool);
        if (i == RSDI_POOL_NIL) { pool->ctr.queue_full++; return RSD_ERR_CAPACITY; }
        r = &pool->reqs[i];
        r->exclusive = (uint8_t)excl;
        sl->exclusive = excl;
        r->state = RSDI_PREQ_RUNNING;
        r->model = (int16_t)model;
        r->slot = (int8_t)s;
        r->user = user;
        r->enq_ms = now_ms;
        sl->in_flight++; /* counted at admission, not at dispatch (#28698) */
        sl->last_use = ++pool->clock;
        pool->models[model].last_used_ms = now_ms;
        sl->idle_deadline_ms = RSD_NO_DEADLINE;
        pool->running++;
        pool->ctr.grants_immediate++;
        *req = rsdi_pool_handle(pool, i);
        if (slot) *slot = s;
        return RSD_OK;
    }
    if (s < 0 && md->retry_at_ms > now_ms) { /* its last start failed: not yet again */
        pool->ctr.backoffs++;
        return RSD_ERR_POOL_BACKOFF;
    }
    return rsdi_pool_enqueue(pool, model, excl, user, now_ms, req);
}

/* Queues a load of model with no request (rsd_pool_preload, and the restore of a model
   evicted for a start that failed). RSD_OK when READY or STARTING already. */
RSDI_PRIVATE int rsdi_pool_preload_req(rsd_pool *pool, int model) {
    int s = pool->models[model].slot;
    if (s >= 0 && (pool->slots[s].state == RSD_POOL_SLOT_READY ||
                   pool->slots[s].state == RSD_POOL_SLOT_STARTING))
        return RSD_OK;
    return rsdi_pool_enqueue(pool, model, false, NULL, pool->now_ms, NULL);
}

RSD_API int rsd_pool_preload(rsd_pool *pool, int model, uint64_t now_ms) {
    if (!pool || model < 0 || model >= pool->num_models) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return RSD_ERR_POOL_STOPPED;
    pool->models[model].start_failures = 0; /* an explicit load: try now */
    pool->models[model].retry_at_ms = 0;
    return rsdi_pool_preload_req(pool, model);
}

RSD_API int rsd_pool_reset_backoff(rsd_pool *pool, int model) {
    int m;
    if (!pool || model < -1 || model >= pool->num_models) return RSD_ERR_ARG;
    for (m = model < 0 ? 0 : model; m < (model < 0 ? pool->num_models : model + 1); m++) {
        pool->models[m].start_failures = 0;
        pool->models[m].retry_at_ms = 0;
    }
    return RSD_OK;
}

/* A start of model m failed (a failed load, or an exit before READY): its next start
   waits backoff_ms << (failures - 1), at most backoff_max_ms, and the models evicted to
   make room for it are loaded again. */
RSDI_PRIVATE void rsdi_pool_start_failed(rsd_pool *p, int m) {
    rsdi_pool_model *md = &p->models[m];
    uint64_t d = p->backoff_ms;
    uint32_t k;
    int v;
    if (md->start_failures < 0xFFFFFFFFu) md->start_failures++;
    for (k = 1; k < md->start_failures && d < p->backoff_max_ms; k++) d *= 2;
    if (d > p->backoff_max_ms) d = p->backoff_max_ms;
    md->retry_at_ms = rsdi_pool_at(p->now_ms, d);
    rsdi_logf(&p->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_BACKOFF, RSDI_WHERE,
              "pool: %s failed to start (%u in a row); next start in %llu ms", md->id,
              (unsigned)md->start_failures, (unsigned long long)d);
    for (v = 0; v < p->num_models; v++) {
        rsdi_pool_model *vm = &p->models[v];
        if (vm->evicted_for != m) continue;
        vm->evicted_for = -1;
        /* one still stopping (the failed start overlapped its stop) starts once it has exited */
        if ((vm->slot >= 0 && p->slots[vm->slot].state != RSD_POOL_SLOT_STOPPING) || vm->wanting ||
            p->stopped)
            continue;
        if (rsdi_pool_preload_req(p, v) == RSD_PENDING) {
            p->ctr.restores++;
            rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_POOL_RESTORE, RSDI_WHERE,
                      "pool: reloading %s (evicted for %s, which failed to start)", vm->id, md->id);
        }
    }
}

RSDI_PRIVATE int rsdi_pool_finish(rsd_pool *pool, rsd_pool_req_h req, uint64_t now_ms, bool cancel) {
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
        int m = r->model, ms = pool->models[r->model].slot;
        if (!cancel) return RSD_ERR_STATE;
        rsdi_pool_wq_unlink(pool, m, i);
        rsdi_pool_req_free(pool, i);
        pool->ctr.cancels++;
        /* An exclusive request at the head held those behind it: they may go now. */
        if (ms >= 0 && pool->slots[ms].state == RSD_POOL_SLOT_READY &&
            pool->models[m].wq_head != RSDI_POOL_NIL)
            rsdi_pool_grant_waiters(pool, ms);
        if (was_wanting && pool->want_head < 0 && pool->ctr.starve_drains) rsdi_pool_pass(pool);
        return RSD_OK;
    }
    case RSDI_PREQ_RUNNING:
        s = r->slot;
        if (r->exclusive) pool->slots[s].exclusive = false;
        pool->models[r->model].last_used_ms = pool->now_ms;
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

RSD_API int rsd_pool_release(rsd_pool *pool, rsd_pool_req_h req, uint64_t now_ms) {
    return rsdi_pool_finish(pool, req, now_ms, false);
}

RSD_API int rsd_pool_cancel(rsd_pool *pool, rsd_pool_req_h req, uint64_t now_ms) {
    return rsdi_pool_finish(pool, req, now_ms, true);
}

RSDI_PRIVATE int rsdi_pool_slot_of(const rsd_pool *pool, rsd_pool_proc_h proc) {
    int s = (int)rsdi_handle_idx(proc.id, RSDI_POOL_PROC_BITS);
    if (proc.id == 0 || s >= RSD_POOL_MAX_SLOTS) return -1;
    if (pool->slots[s].state == RSD_POOL_SLOT_EMPTY ||
        pool->slots[s].gen != rsdi_handle_gen(proc.id, RSDI_POOL_PROC_BITS))
        return -1;
    return s;
}

/* The slot of a STARTING proc whose start the host reports (its SPAWN no longer
   pending), or RSD_ERR_ARG / RSD_ERR_POOL_STALE / RSD_ERR_STATE. */
RSDI_PRIVATE int rsdi_pool_start_news(rsd_pool *pool, rsd_pool_proc_h proc, uint64_t now_ms) {
    int s;
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if ((s = rsdi_pool_slot_of(pool, proc)) < 0) return RSD_ERR_POOL_STALE;
    if (pool->slots[s].state != RSD_POOL_SLOT_STARTING) return RSD_ERR_STATE;
    if (pool->slots[s].pending == RSD_POOL_ACTION_SPAWN) rsdi_pool_act_del(pool, s);
    return s;
}

RSD_API int rsd_pool_on_started(rsd_pool *pool, rsd_pool_proc_h proc, bool ok, uint64_t now_ms) {
    rsdi_pool_slot *sl;
    int s;
    if ((s = rsdi_pool_start_news(pool, proc, now_ms)) < 0) return s;
    sl = &pool->slots[s];
    if (!ok) {
        /* fail only this model's waiters; the slot is stopped and freed. */
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
        rsdi_pool_start_failed(pool, m);
        rsdi_pool_pass(pool);
        return RSD_OK;
    }
    sl->state = RSD_POOL_SLOT_READY;
    sl->last_use = ++pool->clock;
    pool->ctr.readies++;
    {   /* it started: no backoff, and what it evicted stays evicted */
        int v, m = sl->model;
        pool->models[m].start_failures = 0;
        pool->models[m].retry_at_ms = 0;
        for (v = 0; v < pool->num_models; v++)
            if (pool->models[v].evicted_for == m) pool->models[v].evicted_for = -1;
    }
    rsdi_pool_event_log(pool, RSD_POOL_EV_READY, RSD_POOL_WHY_NONE, s);
    rsdi_pool_grant_waiters(pool, s);
    if (sl->drain_after_start) {
        sl->state = RSD_POOL_SLOT_DRAINING;
        sl->why = RSD_POOL_WHY_UNLOAD;
        rsdi_pool_event_log(pool, RSD_POOL_EV_DRAIN, RSD_POOL_WHY_UNLOAD, s);
        if (sl->in_flight == 0) rsdi_pool_stop_slot(pool, s, RSD_POOL_WHY_UNLOAD);
    } else if (sl->in_flight == 0) {
        uint32_t ttl = pool->models[sl->model].ttl_ms;
        sl->idle_deadline_ms = ttl ? rsdi_pool_at(pool->now_ms, ttl) : RSD_NO_DEADLINE;
        if (pool->want_head >= 0) rsdi_pool_pass(pool);
    }
    return RSD_OK;
}

RSD_API int rsd_pool_restart(rsd_pool *pool, rsd_pool_proc_h proc, uint64_t now_ms) {
    rsdi_pool_slot *sl;
    int s, m;
    if ((s = rsdi_pool_start_news(pool, proc, now_ms)) < 0) return s;
    sl = &pool->slots[s];
    m = sl->model;
    pool->models[m].drain_next = sl->drain_after_start && pool->models[m].wq_count; /* an unload(DRAIN) waits for the new one */
    rsdi_pool_stop_slot(pool, s, RSD_POOL_WHY_RESTART);
    sl->model = m; /* kept for the STOP action; no longer routes requests */
    pool->models[m].slot = -1;
    if (pool->models[m].wq_count) rsdi_pool_want_add(pool, m);
    rsdi_pool_pass(pool);
    return RSD_OK;
}

RSD_API int rsd_pool_on_exited(rsd_pool *pool, rsd_pool_proc_h proc, uint64_t now_ms) {
    rsdi_pool_slot *sl;
    int s, crashed_starting = -1;
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if ((s = rsdi_pool_slot_of(pool, proc)) < 0) return RSD_ERR_POOL_STALE;
    sl = &pool->slots[s];
    if (sl->state == RSD_POOL_SLOT_STOPPING || sl->state == RSD_POOL_SLOT_FAILED) {
        pool->ctr.exits++;
        rsdi_pool_event_log(pool, RSD_POOL_EV_EXITED, sl->why, s);
    } else {
        /* Crash: the process is gone, so are its VRAM and its requests. A crash
           while starting fails that model's waiters, as a failed load does. */
        pool->ctr.crashes++;
        rsdi_pool_event_log(pool, RSD_POOL_EV_CRASHED, RSD_POOL_WHY_NONE, s);
        rsdi_logf(&pool->logger, RSD_LOG_WARN, RSD_LOGITEM_POOL_CRASHED, RSDI_WHERE,
                  "pool: process in slot %d (%s) exited unexpectedly", s,
                  sl->model >= 0 ? pool->models[sl->model].id : "-");
        if (sl->state == RSD_POOL_SLOT_STARTING) {
            pool->ctr.load_failures++;
            rsdi_pool_fail_model_waiters(pool, sl->model, RSD_ERR_POOL_CRASHED);
            crashed_starting = sl->model;
        }
    }
    if (sl->model >= 0 && pool->models[sl->model].slot != s) sl->model = -1;
    rsdi_pool_vacate(pool, s);
    if (crashed_starting >= 0) rsdi_pool_start_failed(pool, crashed_starting);
    rsdi_pool_pass(pool);
    return RSD_OK;
}

RSD_API int rsd_pool_set_reserved(rsd_pool *pool, rsd_pool_proc_h proc, uint64_t bytes,
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

RSD_API int rsd_pool_set_pid(rsd_pool *pool, rsd_pool_proc_h proc, int64_t pid) {
    int s;
    if (!pool) return RSD_ERR_ARG;
    if ((s = rsdi_pool_slot_of(pool, proc)) < 0) return RSD_ERR_POOL_STALE;
    pool->slots[s].pid = pid;
    return RSD_OK;
}

RSD_API int rsd_pool_set_slot_limit(rsd_pool *pool, rsd_pool_proc_h proc, uint32_t max_in_flight,
                                    uint64_t now_ms) {
    int s;
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if ((s = rsdi_pool_slot_of(pool, proc)) < 0) return RSD_ERR_POOL_STALE;
    pool->slots[s].limit = max_in_flight;
    if (pool->slots[s].state == RSD_POOL_SLOT_READY) rsdi_pool_grant_waiters(pool, s);
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

/* Actions waiting to be pulled: slots with a SPAWN or STOP, then GRANTs and FAILs. */
RSDI_PRIVATE int rsdi_pool_waiting_actions(const rsd_pool *pool) {
    int s, n = 0;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) n += pool->slots[s].in_act;
    return n + (int)pool->ntf_count;
}

RSD_API int rsd_pool_step(rsd_pool *pool, uint64_t now_ms) {
    int s;
    if (!pool) return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return rsdi_pool_waiting_actions(pool);
    for (s = 0; s < RSD_POOL_MAX_LEASES; s++) { /* lease ttl */
        rsdi_pool_leaseent *le = &pool->leases[s];
        if (le->gen && le->expires_ms <= pool->now_ms) {
            pool->ctr.lease_expiries++;
            rsdi_pool_lease_end(pool, s);
        }
    }
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) { /* idle TTL (llama-swap ttl, keep_alive) */
        rsdi_pool_slot *sl = &pool->slots[s];
        if (!rsdi_pool_idle(pool, sl) || sl->idle_deadline_ms == RSD_NO_DEADLINE) continue;
        if (sl->idle_deadline_ms <= pool->now_ms) rsdi_pool_stop_slot(pool, s, RSD_POOL_WHY_TTL);
    }
    rsdi_pool_pass(pool);
    return rsdi_pool_waiting_actions(pool);
}

RSD_API uint64_t rsd_pool_next_deadline(const rsd_pool *pool) {
    uint64_t next = RSD_NO_DEADLINE;
    int s, m;
    if (!pool) return next;
    if (rsdi_pool_waiting_actions(pool) > 0) return 0;
    if (pool->stopped) return next;
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        const rsdi_pool_slot *sl = &pool->slots[s];
        if (rsdi_pool_idle(pool, sl) && sl->idle_deadline_ms < next) next = sl->idle_deadline_ms;
    }
    for (s = 0; s < RSD_POOL_MAX_LEASES; s++)
        if (pool->leases[s].gen && pool->leases[s].expires_ms < next) next = pool->leases[s].expires_ms;
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
    /* fail every waiting request, then every running one. */
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

/* ---- leases --------------------------------------------------------------- */
RSDI_PRIVATE int rsdi_pool_lease_slot(const rsd_pool *p, rsd_pool_lease_h h) {
    uint32_t i = rsdi_handle_idx(h.id, RSDI_POOL_LEASE_BITS);
    if (!p || h.id == 0 || i >= RSD_POOL_MAX_LEASES || !p->leases[i].gen ||
        p->leases[i].gen != rsdi_handle_gen(h.id, RSDI_POOL_LEASE_BITS))
        return -1;
    return (int)i;
}

/* Budget minus what others use (foreign); -1 when the pool has no byte budget. */
RSDI_PRIVATE int64_t rsdi_pool_byte_cap(const rsd_pool *p) {
    uint64_t b = rsdi_pool_budget(p);
    if (!b) return -1;
    return (int64_t)b - (int64_t)(p->foreign_bytes < b ? p->foreign_bytes : b);
}

/* Drop lease i: its bytes go back to starts, what it stopped comes back if asked. */
RSDI_PRIVATE void rsdi_pool_lease_end(rsd_pool *p, int i) {
    rsdi_pool_leaseent *le = &p->leases[i];
    int m;
    p->leased_total -= le->granted;
    rsdi_logf(&p->logger, RSD_LOG_INFO, RSD_LOGITEM_POOL_LEASE, RSDI_WHERE,
              "pool: lease of %llu bytes released", (unsigned long long)le->granted);
    le->gen = 0;
    if (le->restore && !p->stopped) {
        /* a victim still stopping (released before it exited) gets its preload queued too:
           it starts again once its slot is vacated */
        for (m = 0; m < p->num_models; m++) {
            if (!(le->stopped & ((uint64_t)1 << m))) continue;
            if (p->models[m].wanting) continue;
            if (rsdi_pool_preload_req(p, m) == RSD_PENDING) p->ctr.restores++;
        }
    }
    le->stopped = 0;
    if (p->want_head >= 0) rsdi_pool_pass(p);
}

RSD_API int rsd_pool_lease_take(rsd_pool *pool, const rsd_pool_lease_desc *desc, uint64_t now_ms,
                                rsd_pool_lease_h *lease) {
    int64_t cap, held = 0, avail;
    uint32_t picked = 0, gen;
    int i, s, v;
    rsdi_pool_leaseent *le;
    if (lease) lease->id = 0;
    if (!pool || !desc || !lease || desc->bytes == 0 || desc->bytes > RSD_POOL_MAX_BYTES)
        return RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    if (pool->stopped) return RSD_ERR_POOL_STOPPED;
    for (i = 0; i < RSD_POOL_MAX_LEASES && pool->leases[i].gen; i++) {}
    if (i == RSD_POOL_MAX_LEASES) return RSD_ERR_CAPACITY;
    if ((cap = rsdi_pool_byte_cap(pool)) < 0) { pool->ctr.leases_declined++; return RSD_ERR_POOL_NO_FIT; }
    /* What stays: every reservation but those already on their way out. */
    for (s = 0; s < RSD_POOL_MAX_SLOTS; s++) {
        rsd_pool_slot_state st = pool->slots[s].state;
        if (st != RSD_POOL_SLOT_EMPTY && st != RSD_POOL_SLOT_STOPPING && st != RSD_POOL_SLOT_FAILED)
            held += (int64_t)pool->slots[s].reserve_bytes;
    }
    avail = cap - (int64_t)pool->leased_total - held;
    while (avail < (int64_t)desc->bytes && (v = rsdi_pool_lru_idle(pool, picked, false)) >= 0) {
        picked |= 1u << v;
        avail += (int64_t)pool->slots[v].reserve_bytes;
    }
    if (avail <= 0) { pool->ctr.leases_declined++; return RSD_ERR_POOL_NO_FIT; }
    le = &pool->leases[i];
    gen = pool->lease_gen[i] = rsdi_handle_next_gen(pool->lease_gen[i], RSDI_POOL_LEASE_BITS);
    le->gen = gen;
    le->requested = desc->bytes;
    le->granted = avail < (int64_t)desc->bytes ? (uint64_t)avail : desc->bytes;
    le->expires_ms = desc->ttl_ms ? rsdi_pool_at(pool->now_ms, desc->ttl_ms) : RSD_NO_DEADLINE;
    le->restore = desc->restore;
    le->stopped = 0;
    pool->leased_total += le->granted;
    pool->ctr.leases++;
    for (v = 0; v < RSD_POOL_MAX_SLOTS; v++) {
        if (!(picked & (1u << v))) continue;
        le->stopped |= (uint64_t)1 << pool->slots[v].model;
        pool->ctr.lease_stops++;
        rsdi_pool_stop_slot(pool, v, RSD_POOL_WHY_LEASE);
    }
    rsdi_logf(&pool->logger, RSD_LOG_INFO, RSD_LOGITEM_POOL_LEASE, RSDI_WHERE,
              "pool: lease of %llu bytes granted %llu", (unsigned long long)desc->bytes,
              (unsigned long long)le->granted);
    lease->id = rsdi_handle_make(gen, (uint32_t)i, RSDI_POOL_LEASE_BITS);
    return (int64_t)pool->reserved_total + (int64_t)pool->leased_total <= cap ? RSD_OK : RSD_PENDING;
}

RSD_API int rsd_pool_query_lease(const rsd_pool *pool, rsd_pool_lease_h lease,
                                 rsd_pool_lease_info *info) {
    const rsdi_pool_leaseent *le;
    int i = rsdi_pool_lease_slot(pool, lease), m;
    if (!info) return RSD_ERR_ARG;
    memset(info, 0, sizeof *info);
    if (i < 0) return RSD_ERR_POOL_STALE;
    le = &pool->leases[i];
    info->requested = le->requested;
    info->granted = le->granted;
    info->ready = (int64_t)pool->reserved_total + (int64_t)pool->leased_total <=
                  rsdi_pool_byte_cap(pool);
    info->expires_ms = le->expires_ms;
    info->stopped = le->stopped;
    for (m = 0; m < RSD_POOL_MAX_MODELS; m++)
        if (le->stopped & ((uint64_t)1 << m)) info->num_stopped++;
    info->restore = le->restore;
    return RSD_OK;
}

RSD_API int rsd_pool_lease_return(rsd_pool *pool, rsd_pool_lease_h lease, uint64_t now_ms) {
    int i = rsdi_pool_lease_slot(pool, lease);
    if (i < 0) return pool ? RSD_ERR_POOL_STALE : RSD_ERR_ARG;
    if (now_ms > pool->now_ms) pool->now_ms = now_ms;
    rsdi_pool_lease_end(pool, i);
    return RSD_OK;
}

RSD_API void rsd_pool_query(const rsd_pool *pool, rsd_pool_info *st) {
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
    st->models_foreign_held = pool->models_waiting ? pool->foreign_held : 0;
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
        o->max_in_flight = sl->model >= 0 ? rsdi_pool_cap(pool, s) : 0;
        o->exclusive = sl->exclusive;
    }
    st->leased_bytes = pool->leased_total;
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
    info->waiting = md->wq_count - md->wq_preloads;
    info->preloads = md->wq_preloads;
    info->running = md->slot >= 0 ? pool->slots[md->slot].in_flight : 0;
    info->last_used_ms = md->last_used_ms;
    info->start_failures = md->start_failures;
    info->retry_at_ms = md->retry_at_ms;
    return RSD_OK;
}

RSD_API bool rsd_pool_next_event(rsd_pool *pool, rsd_pool_event *ev) {
    if (!pool || !ev || pool->ev_count == 0) return false;
    *ev = pool->evlog[pool->ev_head];
    pool->ev_head = (pool->ev_head + 1) % pool->ev_cap;
    pool->ev_count--;
    return true;
}
/* ==== pool end ============================================================ */

/* ==== >>gguf ============================================================== */
#ifndef RSD_NO_GGUF
/* ggml types: elements per block, bytes per block, name (as ggml.h numbers them; 0 bytes:
   an id no file may use). */
typedef struct rsdi_ggml_type { uint16_t blck, bytes; const char *name; } rsdi_ggml_type;
static const rsdi_ggml_type rsdi_ggml_types[] = {
    {1, 4, "f32"}, {1, 2, "f16"}, {32, 18, "q4_0"}, {32, 20, "q4_1"}, {0, 0, "unknown"},
    {0, 0, "unknown"}, {32, 22, "q5_0"}, {32, 24, "q5_1"}, {32, 34, "q8_0"}, {32, 36, "q8_1"},
    {256, 84, "q2_K"}, {256, 110, "q3_K"}, {256, 144, "q4_K"}, {256, 176, "q5_K"},
    {256, 210, "q6_K"}, {256, 292, "q8_K"}, {256, 66, "iq2_xxs"}, {256, 74, "iq2_xs"},
    {256, 98, "iq3_xxs"}, {256, 50, "iq1_s"}, {32, 18, "iq4_nl"}, {256, 110, "iq3_s"},
    {256, 82, "iq2_s"}, {256, 136, "iq4_xs"}, {1, 1, "i8"}, {1, 2, "i16"}, {1, 4, "i32"},
    {1, 8, "i64"}, {1, 8, "f64"}, {256, 56, "iq1_m"}, {1, 2, "bf16"}, {0, 0, "unknown"},
    {0, 0, "unknown"}, {0, 0, "unknown"}, {256, 54, "tq1_0"}, {256, 66, "tq2_0"},
    {0, 0, "unknown"}, {0, 0, "unknown"}, {0, 0, "unknown"}, {32, 17, "mxfp4"}, {64, 36, "nvfp4"}};
#define RSDI_GGML_NTYPES (sizeof rsdi_ggml_types / sizeof rsdi_ggml_types[0])

RSD_API const char *rsd_ggml_type_name(uint32_t type) {
    return type < RSDI_GGML_NTYPES ? rsdi_ggml_types[type].name : "unknown";
}

RSD_API uint32_t rsd_ggml_type_block(uint32_t type, uint32_t *block_bytes) {
    uint32_t blck = type < RSDI_GGML_NTYPES ? rsdi_ggml_types[type].blck : 0;
    if (block_bytes) *block_bytes = blck ? rsdi_ggml_types[type].bytes : 0;
    return blck;
}

RSD_API int rsd_ggml_type_from_name(const char *name) {
    size_t i;
    if (!name) return -1;
    for (i = 0; i < RSDI_GGML_NTYPES; i++)
        if (rsdi_ggml_types[i].blck && strcmp(rsdi_ggml_types[i].name, name) == 0) return (int)i;
    return -1;
}

/* value types (gguf.h) */
enum { RSDI_GV_U8, RSDI_GV_I8, RSDI_GV_U16, RSDI_GV_I16, RSDI_GV_U32, RSDI_GV_I32, RSDI_GV_F32,
       RSDI_GV_BOOL, RSDI_GV_STRING, RSDI_GV_ARRAY, RSDI_GV_U64, RSDI_GV_I64, RSDI_GV_F64 };
/* the reader's stages: each waits for a number (need bytes), a string's bytes or a skip */
enum { RSDI_GS_MAGIC, RSDI_GS_VERSION, RSDI_GS_NTENS, RSDI_GS_NKV, RSDI_GS_KEYLEN, RSDI_GS_KEY,
       RSDI_GS_VTYPE, RSDI_GS_VAL, RSDI_GS_VSTRLEN, RSDI_GS_VSTR, RSDI_GS_AETYPE, RSDI_GS_ACOUNT,
       RSDI_GS_AELEM, RSDI_GS_ASTRLEN, RSDI_GS_ASTR, RSDI_GS_SKIP, RSDI_GS_TNAMELEN, RSDI_GS_TNAME,
       RSDI_GS_TNDIMS, RSDI_GS_TDIM, RSDI_GS_TTYPE, RSDI_GS_TOFF, RSDI_GS_DONE };
/* the fields read from ARCH.<suffix> keys; the first four may be per-layer arrays */
enum { RSDI_GF_FF, RSDI_GF_HEAD, RSDI_GF_HEADKV, RSDI_GF_SWAPAT, RSDI_GF_BLOCK, RSDI_GF_CTX,
       RSDI_GF_EMBD, RSDI_GF_KEYLEN, RSDI_GF_VALLEN, RSDI_GF_SWA, RSDI_GF_EXPERT, RSDI_GF_EXPUSED,
       RSDI_GF_VOCAB, RSDI_GF_NUM };
static const char *const rsdi_gguf_suffix[RSDI_GF_NUM] = {
    "feed_forward_length", "attention.head_count", "attention.head_count_kv",
    "attention.sliding_window_pattern", "block_count", "context_length", "embedding_length",
    "attention.key_length", "attention.value_length", "attention.sliding_window",
    "expert_count", "expert_used_count", "vocab_size"};
/* key ids: 0 skip, then these, then RSDI_GK_FIELD + field */
enum { RSDI_GK_SKIP, RSDI_GK_ARCH, RSDI_GK_FTYPE, RSDI_GK_ALIGN, RSDI_GK_TOKENS, RSDI_GK_FIELD };
#define RSDI_GGUF_ISSTR(st) ((st) == RSDI_GS_KEY || (st) == RSDI_GS_VSTR || (st) == RSDI_GS_ASTR || (st) == RSDI_GS_TNAME)

RSDI_PRIVATE uint32_t rsdi_gguf_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

RSDI_PRIVATE uint64_t rsdi_gguf_le(const unsigned char *p, uint32_t n) {
    uint64_t v = 0;
    while (n--) v = (v << 8) | p[n];
    return v;
}

RSDI_PRIVATE uint32_t rsdi_gguf_vsize(uint32_t t) {
    static const unsigned char sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? sz[t] : 0;
}

RSDI_PRIVATE uint32_t *rsdi_gguf_field(rsd_gguf_info *in, int f) {
    switch (f) {
    case RSDI_GF_FF: return &in->feed_forward_length;
    case RSDI_GF_HEAD: return &in->head_count;
    case RSDI_GF_HEADKV: return &in->head_count_kv;
    case RSDI_GF_BLOCK: return &in->block_count;
    case RSDI_GF_CTX: return &in->context_length;
    case RSDI_GF_EMBD: return &in->embedding_length;
    case RSDI_GF_KEYLEN: return &in->key_length;
    case RSDI_GF_VALLEN: return &in->value_length;
    case RSDI_GF_SWA: return &in->sliding_window;
    case RSDI_GF_EXPERT: return &in->expert_count;
    case RSDI_GF_EXPUSED: return &in->expert_used_count;
    case RSDI_GF_VOCAB: return &in->vocab_size;
    default: return NULL; /* the pattern has no scalar field */
    }
}

RSDI_PRIVATE int rsdi_gguf_fail(rsd_gguf *g, int code, uint64_t at, const char *what, const char *arg,
                                uint64_t a, uint64_t b) {
    char w[160];
    RSD_SNPRINTF(w, sizeof w, what, arg ? arg : "", (unsigned long long)a, (unsigned long long)b);
    RSD_SNPRINTF(g->msg, sizeof g->msg, "GGUF byte %llu: %s", (unsigned long long)at, w);
    g->err = code;
    return code;
}

RSD_API void rsd_gguf_init(rsd_gguf *g, const rsd_gguf_desc *desc) {
    if (!g) return;
    memset(g, 0, sizeof *g);
    g->info.file_type = UINT32_MAX;
    g->info.ffn_type = UINT32_MAX;
    g->info.alignment = 32;
    if (desc && desc->tensors) {
        g->tensors = desc->tensors;
        g->max_tensors = desc->max_tensors;
    }
    g->max_header = desc && desc->max_header_bytes ? desc->max_header_bytes : RSD_GGUF_MAX_HEADER;
    g->st = RSDI_GS_MAGIC;
    g->need = 4;
}

/* Which key this is: general.*, tokenizer.ggml.tokens, or ARCH.<a field's suffix> (its
   prefix's hash kept, checked against general.architecture at the end). */
RSDI_PRIVATE uint32_t rsdi_gguf_key(rsd_gguf *g, const char *k, size_t n) {
    size_t dot = 0, i;
    if (n > sizeof g->str - 49) return RSDI_GK_SKIP; /* longer than what was kept */
    if (n == 20 && memcmp(k, "general.architecture", 20) == 0) return RSDI_GK_ARCH;
    if (n == 17 && memcmp(k, "general.file_type", 17) == 0) return RSDI_GK_FTYPE;
    if (n == 17 && memcmp(k, "general.alignment", 17) == 0) return RSDI_GK_ALIGN;
    if (n == 21 && memcmp(k, "tokenizer.ggml.tokens", 21) == 0) return RSDI_GK_TOKENS;
    while (dot < n && k[dot] != '.') dot++;
    if (dot == 0 || dot >= n) return RSDI_GK_SKIP;
    if (g->info.architecture[0] && (strlen(g->info.architecture) != dot || memcmp(k, g->info.architecture, dot) != 0))
        return RSDI_GK_SKIP; /* another prefix than the architecture read: not this model's */
    for (i = 0; i < RSDI_GF_NUM; i++) {
        size_t sl = strlen(rsdi_gguf_suffix[i]);
        if (n - dot - 1 == sl && memcmp(k + dot + 1, rsdi_gguf_suffix[i], sl) == 0) {
            g->pfx[i] = rsdi_gguf_hash(k, dot);
            return RSDI_GK_FIELD + (uint32_t)i;
        }
    }
    return RSDI_GK_SKIP;
}

RSDI_PRIVATE void rsdi_gguf_want(rsd_gguf *g, uint32_t st, uint32_t need) {
    g->st = st;
    g->need = need;
    g->nbuf = 0;
}

/* A string of n bytes follows (its length just read). */
RSDI_PRIVATE int rsdi_gguf_want_str(rsd_gguf *g, uint32_t st, uint64_t n, const char *what) {
    if (n > RSD_GGUF_MAX_STRING)
        return rsdi_gguf_fail(g, RSD_ERR_GGUF, g->pos - 8, "%s is %llu bytes long (over the limit)", what, n, 0);
    if (n > g->max_header - g->pos)
        return rsdi_gguf_fail(g, RSD_ERR_TOO_LARGE, g->pos - 8, "%s of %llu bytes ends past the header limit", what, n, 0);
    g->st = st;
    g->str_len = n;
    g->str_have = 0;
    return RSD_PENDING;
}

/* The integer value of a scalar of type t in g->num; false for a non-integer type. */
RSDI_PRIVATE bool rsdi_gguf_int(const rsd_gguf *g, uint32_t t, int64_t *v, uint64_t *u) {
    uint64_t raw = rsdi_gguf_le(g->num, rsdi_gguf_vsize(t));
    *u = raw;
    switch (t) {
    case RSDI_GV_U8: case RSDI_GV_U16: case RSDI_GV_U32: case RSDI_GV_BOOL: *v = (int64_t)raw; return true;
    case RSDI_GV_U64: *v = raw > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)raw; return true;
    case RSDI_GV_I8: *v = (int8_t)(uint8_t)raw; return true;
    case RSDI_GV_I16: *v = (int16_t)(uint16_t)raw; return true;
    case RSDI_GV_I32: *v = (int32_t)(uint32_t)raw; return true;
    case RSDI_GV_I64: *v = raw > (uint64_t)INT64_MAX ? -1 - (int64_t)(~raw) : (int64_t)raw; return true;
    default: return false;
    }
}

/* A count or size value of a known key: a non-negative integer below 2^32. */
RSDI_PRIVATE int rsdi_gguf_u32(rsd_gguf *g, uint32_t t, uint32_t *out) {
    int64_t v;
    uint64_t u;
    if (!rsdi_gguf_int(g, t, &v, &u))
        return rsdi_gguf_fail(g, RSD_ERR_GGUF, g->pos, "key %s has value type %llu, not an integer", g->str + sizeof g->str - 48, t, 0);
    if (v < 0 || v > (int64_t)UINT32_MAX)
        return rsdi_gguf_fail(g, RSD_ERR_GGUF, g->pos, "key %s has the value %llu, out of range", g->str + sizeof g->str - 48, u, 0);
    *out = (uint32_t)v;
    return RSD_OK;
}

RSDI_PRIVATE int rsdi_gguf_next_kv(rsd_gguf *g);
RSDI_PRIVATE int rsdi_gguf_finish(rsd_gguf *g);

RSDI_PRIVATE int rsdi_gguf_next_tensor(rsd_gguf *g) {
    if (g->t_i < g->info.n_tensors) {
        rsdi_gguf_want(g, RSDI_GS_TNAMELEN, 8);
        return RSD_PENDING;
    }
    return rsdi_gguf_finish(g);
}

RSDI_PRIVATE int rsdi_gguf_next_kv(rsd_gguf *g) {
    if (g->kv_i < g->info.n_kv) {
        g->kv_i++;
        rsdi_gguf_want(g, RSDI_GS_KEYLEN, 8);
        return RSD_PENDING;
    }
    return rsdi_gguf_next_tensor(g);
}

/* A tensor's info is complete: check its offset, count its bytes, keep it. */
RSDI_PRIVATE int rsdi_gguf_tensor_done(rsd_gguf *g, uint64_t off) {
    rsd_gguf_tensor *t = &g->cur;
    rsd_gguf_info *in = &g->info;
    uint64_t pad, a = in->alignment;
    const char *nm = t->name;
    if (off != g->running)
        return rsdi_gguf_fail(g, RSD_ERR_GGUF, g->pos - 8, "tensor %s has offset %llu, expected %llu", nm, off, g->running);
    t->offset = off;
    pad = (a - t->bytes % a) % a;
    if (t->bytes > (uint64_t)INT64_MAX - pad || g->running > (uint64_t)INT64_MAX - pad - t->bytes)
        return rsdi_gguf_fail(g, RSD_ERR_OVERFLOW, g->pos - 8, "tensor %s: the weight area's size overflows", nm, 0, 0);
    g->running += t->bytes + pad;
    in->data_bytes = off + t->bytes;
    in->tensor_bytes += t->bytes; /* <= running: no overflow */
    t->layer = -1;
    if (memcmp(nm, "blk.", 4) == 0 && nm[4] >= '0' && nm[4] <= '9') {
        uint32_t l = 0, i = 4;
        while (nm[i] >= '0' && nm[i] <= '9' && l < RSD_GGUF_MAX_LAYERS) l = l * 10 + (uint32_t)(nm[i++] - '0');
        if (nm[i] == '.' && l < RSD_GGUF_MAX_LAYERS) {
            t->layer = (int32_t)l;
            in->layer_bytes[l] += t->bytes;
            if (l == 0 && strcmp(nm + i, ".ffn_up.weight") == 0) in->ffn_type = t->type;
        }
    } else if (strcmp(nm, "token_embd.weight") == 0) {
        in->token_embd_bytes += t->bytes;
    } else if (strcmp(nm, "output.weight") == 0) {
        in->output_bytes += t->bytes;
    }
    if (g->tensors) g->tensors[g->t_i] = *t;
    g->t_i++;
    return rsdi_gguf_next_tensor(g);
}

/* The last tensor info is read: settle the fields (the architecture's prefix, per-layer
   arrays, vocabulary, sliding-window layers). */
RSDI_PRIVATE int rsdi_gguf_finish(rsd_gguf *g) {
    rsd_gguf_info *in = &g->info;
    uint32_t ah = rsdi_gguf_hash(in->architecture, strlen(in->architecture)), il, f, period = 0;
    uint64_t a = in->alignment;
    for (f = 0; f < RSDI_GF_NUM; f++)
        if ((g->have >> f & 1u) && g->pfx[f] != ah) { /* another prefix's key: not this model's */
            uint32_t *p = rsdi_gguf_field(in, (int)f);
            g->have &= ~(1u << f);
            if (f < 4) g->alen[f] = 0;
            if (f == RSDI_GF_SWAPAT) memset(in->swa_layer, 0, sizeof in->swa_layer);
            if (p) *p = 0;
        }
    if (in->block_count > RSD_GGUF_MAX_LAYERS)
        return rsdi_gguf_fail(g, RSD_ERR_GGUF, g->pos, "%sblock_count %llu is over %llu", "", in->block_count, RSD_GGUF_MAX_LAYERS);
    if (!(g->have >> RSDI_GF_HEADKV & 1u)) { /* absent: as many as the query heads */
        in->head_count_kv = in->head_count;
        memcpy(in->head_count_kv_layer, in->head_count_layer, sizeof in->head_count_kv_layer);
        g->alen[RSDI_GF_HEADKV] = g->alen[RSDI_GF_HEAD];
    }
    for (f = 0; f < 3; f++) { /* per-layer: the scalar fills the layers; an array's largest is the scalar */
        uint32_t *arr = f == RSDI_GF_FF ? in->feed_forward_layer : f == RSDI_GF_HEAD ? in->head_count_layer : in->head_count_kv_layer;
        uint32_t *sc = rsdi_gguf_field(in, (int)f), mx = 0;
        if (g->alen[f]) {
            for (il = 0; il < g->alen[f]; il++) mx = arr[il] > mx ? arr[il] : mx;
            *sc = mx;
        } else {
            for (il = 0; il < in->block_count; il++) arr[il] = *sc;
        }
    }
    if (g->tokens_n) in->vocab_size = g->tokens_n > UINT32_MAX ? UINT32_MAX : (uint32_t)g->tokens_n;
    /* sliding-window layers: the pattern key, else the architecture's default period */
    if (strcmp(in->architecture, "gemma2") == 0) {
        period = 2;
        if (!in->sliding_window) in->sliding_window = 4096;
    } else if (strcmp(in->architecture, "gemma3") == 0 || strcmp(in->architecture, "gemma-embedding") == 0) {
        period = 6;
    } else if (strcmp(in->architecture, "gemma3n") == 0) {
        period = 5;
    } else if (strcmp(in->architecture, "cohere2") == 0 || strcmp(in->architecture, "exaone4") == 0) {
        period = 4;
    }
    if (g->alen[RSDI_GF_SWAPAT] == 0 && (g->have >> RSDI_GF_SWAPAT & 1u)) period = g->swa_period;
    if (g->alen[RSDI_GF_SWAPAT] == 0 && in->sliding_window && (period || (g->have >> RSDI_GF_SWAPAT & 1u)))
        for (il = 0; il < in->block_count; il++)
            in->swa_layer[il] = (uint8_t)(period == 0 || il % period < period - 1);
    if (!in->sliding_window) memset(in->swa_layer, 0, sizeof in->swa_layer);
    in->header_bytes = g->pos;
    if (g->pos > UINT64_MAX - (a - 1))
        return rsdi_gguf_fail(g, RSD_ERR_OVERFLOW, g->pos, "%sthe data offset overflows", "", 0, 0);
    in->data_offset = (g->pos + a - 1) / a * a;
    g->st = RSDI_GS_DONE;
    return RSD_OK;
}

/* The stage's number, string or skip is complete: act on it and set up the next. */
RSDI_PRIVATE int rsdi_gguf_step(rsd_gguf *g) {
    rsd_gguf_info *in = &g->info;
    uint64_t v = rsdi_gguf_le(g->num, g->need);
    uint64_t at = g->pos - g->need;
    char *kn = g->str + sizeof g->str - 48; /* the key's name for messages (its first 47 bytes) */
    switch (g->st) {
    case RSDI_GS_MAGIC:
        if (memcmp(g->num, "GGUF", 4) != 0)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF_MAGIC, 0, "%snot a GGUF file (magic %08llx)", "", rsdi_gguf_le(g->num, 4), 0);
        rsdi_gguf_want(g, RSDI_GS_VERSION, 4);
        return RSD_PENDING;
    case RSDI_GS_VERSION:
        if (v != 2 && v != 3)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF_MAGIC, at, v == 0x02000000u || v == 0x03000000u
                                  ? "%sa big-endian GGUF file (version %llx): not read" : "%sGGUF version %llu: not read", "", v, 0);
        in->version = (uint32_t)v;
        rsdi_gguf_want(g, RSDI_GS_NTENS, 8);
        return RSD_PENDING;
    case RSDI_GS_NTENS:
        if (v > RSD_GGUF_MAX_COUNT)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "%s%llu tensors: over the limit of %llu", "", v, RSD_GGUF_MAX_COUNT);
        if (g->tensors && v > g->max_tensors)
            return rsdi_gguf_fail(g, RSD_ERR_CAPACITY, at, "%s%llu tensors; the desc holds %llu", "", v, g->max_tensors);
        in->n_tensors = v;
        rsdi_gguf_want(g, RSDI_GS_NKV, 8);
        return RSD_PENDING;
    case RSDI_GS_NKV:
        if (v > RSD_GGUF_MAX_COUNT)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "%s%llu metadata keys: over the limit of %llu", "", v, RSD_GGUF_MAX_COUNT);
        in->n_kv = v;
        return rsdi_gguf_next_kv(g);
    case RSDI_GS_KEYLEN:
        return rsdi_gguf_want_str(g, RSDI_GS_KEY, v, "a key");
    case RSDI_GS_KEY: {
        size_t n = g->str_len < 47 ? (size_t)g->str_len : 47;
        g->key = rsdi_gguf_key(g, g->str, (size_t)g->str_len);
        memmove(kn, g->str, n);
        kn[n] = '\0';
        rsdi_gguf_want(g, RSDI_GS_VTYPE, 4);
        return RSD_PENDING;
    }
    case RSDI_GS_VTYPE:
        g->vtype = (uint32_t)v;
        if (v == RSDI_GV_STRING) rsdi_gguf_want(g, RSDI_GS_VSTRLEN, 8);
        else if (v == RSDI_GV_ARRAY) rsdi_gguf_want(g, RSDI_GS_AETYPE, 4);
        else if (rsdi_gguf_vsize(g->vtype)) rsdi_gguf_want(g, RSDI_GS_VAL, rsdi_gguf_vsize(g->vtype));
        else return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "key %s has the unknown value type %llu", kn, v, 0);
        return RSD_PENDING;
    case RSDI_GS_VAL: {
        uint32_t u = 0, f = g->key - RSDI_GK_FIELD;
        int r;
        if (g->key == RSDI_GK_SKIP || g->key == RSDI_GK_ARCH || g->key == RSDI_GK_TOKENS) return rsdi_gguf_next_kv(g);
        if ((r = rsdi_gguf_u32(g, g->vtype, &u)) < 0) return r;
        if (g->key == RSDI_GK_FTYPE) {
            in->file_type = u;
        } else if (g->key == RSDI_GK_ALIGN) {
            if (u == 0 || (u & (u - 1)) != 0)
                return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "%sgeneral.alignment %llu is not a power of 2", "", u, 0);
            in->alignment = u;
        } else if (f == RSDI_GF_SWAPAT) {
            g->swa_period = u;
            g->alen[f] = 0;
            g->have |= 1u << f;
        } else {
            *rsdi_gguf_field(in, (int)f) = u;
            if (f < 4) g->alen[f] = 0;
            g->have |= 1u << f;
        }
        return rsdi_gguf_next_kv(g);
    }
    case RSDI_GS_VSTRLEN:
        return rsdi_gguf_want_str(g, RSDI_GS_VSTR, v, "a string value");
    case RSDI_GS_VSTR:
        if (g->key == RSDI_GK_ARCH) {
            if (g->str_len >= RSD_GGUF_ARCH_MAX)
                return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "%sgeneral.architecture is %llu bytes long", "", g->str_len, 0);
            memcpy(in->architecture, g->str, (size_t)g->str_len);
            in->architecture[g->str_len] = '\0';
        } else if (g->key != RSDI_GK_SKIP && g->key != RSDI_GK_TOKENS) {
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "key %s is a string, not an integer", kn, 0, 0);
        }
        return rsdi_gguf_next_kv(g);
    case RSDI_GS_AETYPE:
        if (v == RSDI_GV_ARRAY)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "key %s is an array of arrays (not read)", kn, 0, 0);
        if (v != RSDI_GV_STRING && !rsdi_gguf_vsize((uint32_t)v))
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "key %s is an array of the unknown type %llu", kn, v, 0);
        g->etype = (uint32_t)v;
        rsdi_gguf_want(g, RSDI_GS_ACOUNT, 8);
        return RSD_PENDING;
    case RSDI_GS_ACOUNT: {
        uint32_t f = g->key - RSDI_GK_FIELD;
        int64_t sv;
        uint64_t su;
        if (v > RSD_GGUF_MAX_COUNT)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "key %s has %llu elements: over the limit of %llu", kn, v, RSD_GGUF_MAX_COUNT);
        g->arr_n = v;
        g->arr_i = 0;
        if (g->key == RSDI_GK_TOKENS) g->tokens_n = v;
        if (g->key >= RSDI_GK_FIELD) {
            if (f >= 4 || !rsdi_gguf_int(g, g->etype, &sv, &su))
                return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "key %s is an array of type %llu, not an integer", kn, g->etype, 0);
            if (v > RSD_GGUF_MAX_LAYERS)
                return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "key %s has %llu per-layer values (at most %llu)", kn, v, RSD_GGUF_MAX_LAYERS);
            g->alen[f] = (uint32_t)v;
            g->have |= 1u << f;
            if (f == RSDI_GF_SWAPAT) memset(in->swa_layer, 0, sizeof in->swa_layer);
        }
        if (v == 0) return rsdi_gguf_next_kv(g);
        if (g->etype == RSDI_GV_STRING) rsdi_gguf_want(g, RSDI_GS_ASTRLEN, 8);
        else if (g->key >= RSDI_GK_FIELD) rsdi_gguf_want(g, RSDI_GS_AELEM, rsdi_gguf_vsize(g->etype));
        else { /* elements no field reads: skipped (v <= 2^28, 8 bytes each) */
            g->skip = v * rsdi_gguf_vsize(g->etype);
            if (g->skip > g->max_header - g->pos)
                return rsdi_gguf_fail(g, RSD_ERR_TOO_LARGE, at, "key %s's %llu elements end past the header limit", kn, v, 0);
            g->st = RSDI_GS_SKIP;
        }
        return RSD_PENDING;
    }
    case RSDI_GS_AELEM: {
        uint32_t u = 0, f = g->key - RSDI_GK_FIELD;
        int r = rsdi_gguf_u32(g, g->etype, &u);
        if (r < 0) return r;
        if (f == RSDI_GF_FF) in->feed_forward_layer[g->arr_i] = u;
        else if (f == RSDI_GF_HEAD) in->head_count_layer[g->arr_i] = u;
        else if (f == RSDI_GF_HEADKV) in->head_count_kv_layer[g->arr_i] = u;
        else in->swa_layer[g->arr_i] = (uint8_t)(u != 0);
        if (++g->arr_i < g->arr_n) rsdi_gguf_want(g, RSDI_GS_AELEM, rsdi_gguf_vsize(g->etype));
        else return rsdi_gguf_next_kv(g);
        return RSD_PENDING;
    }
    case RSDI_GS_ASTRLEN:
        return rsdi_gguf_want_str(g, RSDI_GS_ASTR, v, "an array's string");
    case RSDI_GS_ASTR:
        if (++g->arr_i < g->arr_n) rsdi_gguf_want(g, RSDI_GS_ASTRLEN, 8);
        else return rsdi_gguf_next_kv(g);
        return RSD_PENDING;
    case RSDI_GS_SKIP:
        return rsdi_gguf_next_kv(g);
    case RSDI_GS_TNAMELEN:
        if (v >= RSD_GGUF_NAME_MAX)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "%stensor %llu's name is %llu bytes long (at most 63)", "", g->t_i, v);
        return rsdi_gguf_want_str(g, RSDI_GS_TNAME, v, "a tensor name");
    case RSDI_GS_TNAME:
        memset(&g->cur, 0, sizeof g->cur);
        memcpy(g->cur.name, g->str, (size_t)g->str_len);
        rsdi_gguf_want(g, RSDI_GS_TNDIMS, 4);
        return RSD_PENDING;
    case RSDI_GS_TNDIMS:
        if (v > 4) return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "tensor %s has %llu dims (at most 4)", g->cur.name, v, 0);
        g->cur.n_dims = (uint32_t)v;
        g->cur.ne[0] = g->cur.ne[1] = g->cur.ne[2] = g->cur.ne[3] = 1;
        g->dim = 0;
        rsdi_gguf_want(g, v ? RSDI_GS_TDIM : RSDI_GS_TTYPE, v ? 8 : 4);
        return RSD_PENDING;
    case RSDI_GS_TDIM:
        if (v > (uint64_t)INT64_MAX)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "tensor %s has a negative dim (%llx)", g->cur.name, v, 0);
        g->cur.ne[g->dim++] = v;
        rsdi_gguf_want(g, g->dim < g->cur.n_dims ? RSDI_GS_TDIM : RSDI_GS_TTYPE, g->dim < g->cur.n_dims ? 8 : 4);
        return RSD_PENDING;
    case RSDI_GS_TTYPE: {
        uint32_t bb = 0, blck = rsd_ggml_type_block((uint32_t)v, &bb), d;
        uint64_t n = g->cur.ne[0] / (blck ? blck : 1), elems = g->cur.ne[0];
        rsd_gguf_tensor *t = &g->cur;
        if (!blck) return rsdi_gguf_fail(g, RSD_ERR_GGUF_TYPE, at, "tensor %s has the unknown ggml type %llu", t->name, v, 0);
        if (t->ne[0] % blck != 0)
            return rsdi_gguf_fail(g, RSD_ERR_GGUF, at, "tensor %s: %llu elements per row, not a multiple of its block (%llu)", t->name, t->ne[0], blck);
        t->type = (uint32_t)v;
        if (n > (uint64_t)INT64_MAX / bb)
            return rsdi_gguf_fail(g, RSD_ERR_OVERFLOW, at, "tensor %s's size overflows", t->name, 0, 0);
        n *= bb;
        for (d = 1; d < 4; d++) {
            if (t->ne[d] && (n > (uint64_t)INT64_MAX / t->ne[d] || elems > (uint64_t)INT64_MAX / t->ne[d]))
                return rsdi_gguf_fail(g, RSD_ERR_OVERFLOW, at, "tensor %s's size overflows", t->name, 0, 0);
            n *= t->ne[d];
            elems *= t->ne[d];
        }
        t->bytes = n;
        rsdi_gguf_want(g, RSDI_GS_TOFF, 8);
        return RSD_PENDING;
    }
    case RSDI_GS_TOFF:
        return rsdi_gguf_tensor_done(g, v);
    default:
        return RSD_OK;
    }
}

RSD_API int rsd_gguf_feed(rsd_gguf *g, const void *data, size_t len) {
    const unsigned char *d = (const unsigned char *)data;
    size_t i = 0;
    if (!g || (!data && len)) return RSD_ERR_ARG;
    if (g->err) return g->err;
    for (;;) {
        int r = RSD_PENDING;
        if (g->st == RSDI_GS_DONE) return RSD_OK;
        if (RSDI_GGUF_ISSTR(g->st) && g->str_have == g->str_len) {
            r = rsdi_gguf_step(g);
        } else if (g->st == RSDI_GS_SKIP && g->skip == 0) {
            r = rsdi_gguf_step(g);
        } else if (i == len) {
            return RSD_PENDING;
        } else if (RSDI_GGUF_ISSTR(g->st)) {
            uint64_t take = g->str_len - g->str_have, room = sizeof g->str - 49;
            if (take > len - i) take = len - i;
            if (g->str_have < room && g->st != RSDI_GS_ASTR) /* an array's strings are counted, not read */
                memcpy(g->str + g->str_have, d + i, (size_t)(take < room - g->str_have ? take : room - g->str_have));
            g->str_have += take;
            g->pos += take;
            i += (size_t)take;
        } else if (g->st == RSDI_GS_SKIP) {
            uint64_t take = g->skip < len - i ? g->skip : len - i;
            g->skip -= take;
            g->pos += take;
            i += (size_t)take;
        } else { /* a number: as many of its bytes as are here, up to the header limit */
            size_t take = g->need - g->nbuf;
            if (g->pos >= g->max_header)
                return rsdi_gguf_fail(g, RSD_ERR_TOO_LARGE, g->pos, "%sthe header is longer than the limit (%llu bytes)", "", g->max_header, 0);
            if (take > len - i) take = len - i;
            if (take > g->max_header - g->pos) take = (size_t)(g->max_header - g->pos);
            memcpy(g->num + g->nbuf, d + i, take);
            g->nbuf += (uint32_t)take;
            g->pos += take;
            i += take;
            if (g->nbuf == g->need) r = rsdi_gguf_step(g);
        }
        if (r < 0) return r;
    }
}

RSD_API int rsd_gguf_end(rsd_gguf *g) {
    static const char *const where[] = {"the magic", "the version", "the tensor count", "the key count",
                                        "a key", "a key", "a value type", "a value", "a string value",
                                        "a string value", "an array", "an array", "an array", "an array",
                                        "an array", "an array", "a tensor info", "a tensor info",
                                        "a tensor info", "a tensor info", "a tensor info", "a tensor info"};
    if (!g) return RSD_ERR_ARG;
    if (g->err) return g->err;
    if (g->st == RSDI_GS_DONE) return RSD_OK;
    return rsdi_gguf_fail(g, RSD_ERR_TRUNCATED, g->pos, "the file ends inside %s", where[g->st], 0, 0);
}

RSD_API const char *rsd_gguf_error(const rsd_gguf *g) { return g && g->err ? g->msg : ""; }

/* ---- >>gguf:estimate ---------------------------------------------------- */
RSDI_PRIVATE uint32_t rsdi_pad256(uint64_t n) { return n > UINT32_MAX - 255 ? UINT32_MAX & ~255u : (uint32_t)((n + 255) / 256 * 256); }

/* a * b and a + b that stick at UINT64_MAX (a figure that large is an error) */
RSDI_PRIVATE uint64_t rsdi_sat_mul(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
RSDI_PRIVATE uint64_t rsdi_sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Bytes of one row of n elements of type t; 0 when n is not a whole number of blocks. */
RSDI_PRIVATE uint64_t rsdi_ggml_row(int t, uint64_t n) {
    uint32_t bb = 0, blck = rsd_ggml_type_block((uint32_t)t, &bb);
    return blck && n % blck == 0 ? rsdi_sat_mul(n / blck, bb) : 0;
}

RSD_API int rsd_gguf_kv_per_token(const rsd_gguf_info *info, const rsd_gguf_start *start,
                                  uint64_t *per_token, uint32_t *n_stream) {
    rsd_gguf_start st;
    rsd_gguf_estimate e;
    uint64_t cells;
    int r;
    if (!info || !per_token) return RSD_ERR_ARG;
    if (start) st = *start;
    else memset(&st, 0, sizeof st);
    st.swa_full = true; /* every layer keeps every cell */
    st.n_ctx = 256u * (st.n_parallel > 0 ? (uint32_t)st.n_parallel : 1u);
    if ((r = rsd_gguf_estimate_start(info, &st, &e)) < 0) return r;
    cells = (uint64_t)e.kv_cells * e.n_stream;
    if (!cells) return RSD_ERR_ARG;
    *per_token = (e.kv + cells - 1) / cells;
    if (n_stream) *n_stream = e.n_stream;
    return RSD_OK;
}

RSD_API int rsd_gguf_estimate_start(const rsd_gguf_info *in, const rsd_gguf_start *st, rsd_gguf_estimate *out) {
    rsd_gguf_start z;
    int tk, tv;
    uint32_t il, n_layer, n_gpu, first_gpu, n_ctx, n_seq, unified, n_head, hk, hv, n_ff = 0, nb, nub;
    uint64_t kv = 0, kv_dev = 0, model, dev = 0, g;
    if (!in || !out) return RSD_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!st) {
        memset(&z, 0, sizeof z);
        st = &z;
    }
    n_layer = in->block_count;
    tk = rsd_ggml_type_from_name(st->cache_type_k ? st->cache_type_k : "f16");
    tv = rsd_ggml_type_from_name(st->cache_type_v ? st->cache_type_v : "f16");
    if (tk < 0 || tv < 0 || !in->embedding_length || !in->head_count || !n_layer || n_layer > RSD_GGUF_MAX_LAYERS ||
        st->n_parallel > 256)
        return RSD_ERR_ARG;
    /* llama-server: -np auto is 4 slots on one unified cache; -c 0 the training context */
    n_seq = st->n_parallel > 0 ? (uint32_t)st->n_parallel : 4;
    unified = st->n_parallel <= 0 || st->kv_unified > 0;
    n_ctx = st->n_ctx ? st->n_ctx : in->context_length;
    if (!n_ctx) return RSD_ERR_ARG;
    /* llama_context: the batch is capped by the context as given, then the context is
       padded to 256; without a unified cache each sequence's share is padded again */
    nb = st->n_batch ? st->n_batch : 2048;
    nb = nb < n_ctx ? nb : n_ctx;
    nub = st->n_ubatch ? st->n_ubatch : 512;
    nub = nub < nb ? nub : nb;
    out->n_batch = nb;
    out->n_ubatch = nub;
    out->n_seq = n_seq;
    out->n_ctx = rsdi_pad256(n_ctx);
    if (unified) {
        out->n_ctx_seq = out->n_ctx;
    } else {
        out->n_ctx_seq = rsdi_pad256(out->n_ctx / n_seq);
        out->n_ctx = out->n_ctx_seq * n_seq;
    }
    out->n_stream = unified ? 1 : n_seq;
    out->kv_unified = unified != 0;
    out->kv_cells = out->n_ctx_seq;
    out->kv_cells_swa = out->kv_cells;
    if (in->sliding_window && !st->swa_full) {
        uint64_t w = (uint64_t)in->sliding_window * (unified ? n_seq : 1) + nub;
        out->kv_cells_swa = rsdi_pad256(w < out->kv_cells ? w : out->kv_cells);
    }
    /* -ngl: the last n_gpu layers on the device, the output layer too when all are */
    n_gpu = st->n_gpu_layers == RSD_GGUF_NGL_NONE || st->n_gpu_layers == 0 ? 0
            : st->n_gpu_layers < 0 || (uint32_t)st->n_gpu_layers > n_layer ? n_layer + 1 : (uint32_t)st->n_gpu_layers;
    first_gpu = n_gpu >= n_layer ? 0 : n_layer - n_gpu;
    n_head = in->head_count;
    for (il = 0; il < n_layer; il++) {
        uint32_t h = in->head_count_layer[il] ? in->head_count_layer[il] : n_head;
        uint32_t hkv = in->head_count_kv_layer[il];
        uint64_t k_row, v_row, cells = in->swa_layer[il] ? out->kv_cells_swa : out->kv_cells, b;
        hk = in->key_length ? in->key_length : in->embedding_length / h;
        hv = in->value_length ? in->value_length : in->embedding_length / h;
        n_ff = in->feed_forward_layer[il] > n_ff ? in->feed_forward_layer[il] : n_ff;
        if (!hkv) continue; /* a layer without attention (recurrent) */
        /* llama.cpp refuses a cache type whose block does not divide a head */
        if (!rsdi_ggml_row(tk, hk) || !rsdi_ggml_row(tv, hv)) return RSD_ERR_ARG;
        k_row = rsdi_ggml_row(tk, (uint64_t)hk * hkv); /* < 2^64 * 4: both < 2^32 */
        v_row = rsdi_ggml_row(tv, (uint64_t)hv * hkv);
        b = rsdi_sat_mul(rsdi_sat_mul(rsdi_sat_add(k_row, v_row), cells), out->n_stream);
        kv = rsdi_sat_add(kv, b);
        if (n_gpu && il >= first_gpu) {
            kv_dev = rsdi_sat_add(kv_dev, b);
            dev = rsdi_sat_add(dev, in->layer_bytes[il]);
        }
    }
    model = in->data_bytes;
    if (n_gpu > n_layer) { /* the output layer, a copy of the embedding when the file ties them */
        uint64_t o = in->output_bytes ? in->output_bytes : in->token_embd_bytes;
        dev = rsdi_sat_add(dev, o);
        if (!in->output_bytes) model = rsdi_sat_add(model, o);
    }
    /* the compute graph at its largest, an ubatch of nub tokens, with flash attention
       (llama.cpp's auto on a CPU): the attention mask (f16, the cache's cells by the
       ubatch; a second one for sliding-window layers), the activations of the FFN
       (floats a token: embd + 2 x ff with f32 weights, 2 x embd + 3 x ff with
       q8_0, embd + 4 x ff else: a fit to the real server's figures, not derived), and the logits of one row per sequence twice (the graph's and the
       output buffer) */
    g = rsdi_sat_mul((uint64_t)out->kv_cells * 2, nub);
    for (il = 0; il < n_layer && !in->swa_layer[il]; il++) {}
    if (il < n_layer) g = rsdi_sat_add(g, rsdi_sat_mul((uint64_t)out->kv_cells_swa * 2, nub));
    {   /* per token: embd x a + ff x b floats, by the FFN weights' type */
        uint64_t a = in->ffn_type == 0 ? 1 : in->ffn_type == 8 ? 2 : 1, b = in->ffn_type == 0 ? 2 : in->ffn_type == 8 ? 3 : 4;
        g = rsdi_sat_add(g, rsdi_sat_mul((uint64_t)nub * 4, a * in->embedding_length + b * n_ff));
    }
    g = rsdi_sat_add(g, (uint64_t)in->vocab_size * 8 * n_seq);
    out->model = model;
    out->model_device = dev;
    out->kv = kv;
    out->kv_device = kv_dev;
    out->compute = g;
    out->total = rsdi_sat_add(rsdi_sat_add(model, kv), g);
    return out->total == UINT64_MAX ? RSD_ERR_OVERFLOW : RSD_OK;
}

/* ---- >>gguf:log --------------------------------------------------------- */
RSD_API void rsd_llama_log_init(rsd_llama_log *lg) {
    if (!lg) return;
    memset(lg, 0, sizeof *lg);
    lg->kv_unified = -1;
}

RSDI_PRIVATE const char *rsdi_log_find(const char *s, size_t n, const char *pat) {
    size_t m = strlen(pat), i;
    for (i = 0; m <= n && i <= n - m; i++)
        if (s[i] == pat[0] && memcmp(s + i, pat, m) == 0) return s + i;
    return NULL;
}

/* "=   12.34 MiB" after p: the bytes (rounded), or false. */
RSDI_PRIVATE bool rsdi_log_mib(const char *p, const char *end, uint64_t *out) {
    uint64_t ip = 0, fr = 0, scale = 1;
    int digits = 0;
    while (p < end && *p == ' ') p++;
    if (p >= end || *p != '=') return false;
    p++;
    while (p < end && *p == ' ') p++;
    while (p < end && *p >= '0' && *p <= '9' && digits < 12) ip = ip * 10 + (uint64_t)(*p++ - '0'), digits++;
    if (!digits || (p < end && *p >= '0' && *p <= '9')) return false;
    if (p < end && *p == '.') {
        p++;
        while (p < end && *p >= '0' && *p <= '9') {
            if (scale < 1000000) fr = fr * 10 + (uint64_t)(*p - '0'), scale *= 10;
            p++;
        }
    }
    while (p < end && *p == ' ') p++;
    if (end - p < 3 || memcmp(p, "MiB", 3) != 0) return false;
    *out = ip * 1048576u + (fr * 1048576u + scale / 2) / scale;
    return true;
}

RSDI_PRIVATE bool rsdi_log_u32(const char *p, const char *end, uint32_t *out) {
    uint64_t v = 0;
    int digits = 0;
    while (p < end && *p == ' ') p++;
    if (p >= end || *p != '=') return false;
    p++;
    while (p < end && *p == ' ') p++;
    while (p < end && *p >= '0' && *p <= '9' && v <= UINT32_MAX) v = v * 10 + (uint64_t)(*p++ - '0'), digits++;
    if (!digits || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

RSD_API int rsd_llama_log_line(rsd_llama_log *lg, const char *line, size_t len) {
    static const char *const what[4] = {" model buffer size", " KV buffer size", " compute buffer size", " output buffer size"};
    static const char *const ctx[5] = {"llama_context: n_ctx ", "llama_context: n_ctx_seq ", "llama_context: n_seq_max ",
                                       "llama_context: n_batch ", "llama_context: n_ubatch "};
    const char *end = line + len, *p, *w;
    uint64_t b = 0;
    uint32_t u = 0, d;
    int k;
    if (!lg || (!line && len)) return RSD_ERR_ARG;
    if (!len) return 0;
    for (k = 0; k < 4; k++) {
        rsd_llama_log_device *dv = NULL;
        size_t nl;
        if ((p = rsdi_log_find(line, len, what[k])) == NULL || !rsdi_log_mib(p + strlen(what[k]), end, &b)) continue;
        while (p > line && p[-1] == ' ') p--; /* the device: the word before */
        w = p;
        while (w > line && w[-1] > ' ' && w[-1] < 127 && w[-1] != ':') w--; /* printable, no spaces */
        nl = (size_t)(p - w);
        if (nl == 0 || nl >= sizeof dv->name) return 0;
        for (d = 0; d < lg->n_devices; d++)
            if (strlen(lg->dev[d].name) == nl && memcmp(lg->dev[d].name, w, nl) == 0) dv = &lg->dev[d];
        if (!dv && lg->n_devices < RSD_GGUF_MAX_DEVICES) {
            dv = &lg->dev[lg->n_devices++];
            memcpy(dv->name, w, nl);
            dv->name[nl] = '\0';
        }
        if (k == 0) lg->model += b;
        else if (k == 1) lg->kv += b;
        else if (k == 2) lg->compute += b;
        else lg->output += b;
        lg->lines++;
        if (!dv) return RSD_ERR_CAPACITY;
        if (k == 0) dv->model += b;
        else if (k == 1) dv->kv += b;
        else if (k == 2) dv->compute += b;
        else dv->output += b;
        return 1;
    }
    for (k = 0; k < 5; k++) {
        if ((p = rsdi_log_find(line, len, ctx[k])) == NULL || !rsdi_log_u32(p + strlen(ctx[k]), end, &u)) continue;
        if (k == 0) lg->n_ctx = u;
        else if (k == 1) lg->n_ctx_seq = u;
        else if (k == 2) lg->n_seq_max = u;
        else if (k == 3) lg->n_batch = u;
        else lg->n_ubatch = u;
        lg->lines++;
        return 1;
    }
    if ((p = rsdi_log_find(line, len, "llama_context: kv_unified ")) != NULL) {
        p += 26;
        while (p < end && *p == ' ') p++;
        if (p < end && *p == '=') {
            p++;
            while (p < end && *p == ' ') p++;
            if (end - p >= 4 && memcmp(p, "true", 4) == 0) lg->kv_unified = 1;
            else if (end - p >= 5 && memcmp(p, "false", 5) == 0) lg->kv_unified = 0;
            else return 0;
            lg->lines++;
            return 1;
        }
    }
    return 0;
}
#endif /* RSD_NO_GGUF */
/* ==== gguf end ============================================================ */

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
