#!/bin/sh
# make demo -- residency.h keeping models resident on a llama.cpp router.
# With a real llama-server ($LLAMA_SERVER, else ../shared/llama.cpp/bin/llama-server beside
# the repository, else llama-server on PATH; RSD_DEMO_SIM=1 skips the search) it runs against
# the real thing, on tiny random-weight models written on the spot by build/bin/tiny-gguf
# (they load in milliseconds; their answers are garbage text). Without one,
# build/bin/rsd-sim plays the router (300 ms loads). Either way: capacity 2, two models
# pinned by their preset tags, on a free loopback port; build/bin/rsd-ensure asks it for
# models. Every step checks its exit code and the resident list afterwards; any surprise fails
# the demo. No network or GPU.
# Part 2: build/bin/rsd-serve runs a pool of llama-server processes (the real one, or
# rsd-sim playing it) behind one port, at most two at a time; requests go through
# build/bin/rsd-http.
set -u
B=${B:-build}
SIM=$B/bin/rsd-sim
ENSURE=$B/bin/rsd-ensure
SERVE=$B/bin/rsd-serve
HTTP=$B/bin/rsd-http
TINY=$B/bin/tiny-gguf
for p in "$SIM" "$ENSURE" "$SERVE" "$HTTP" "$TINY"; do
    [ -x "$p" ] || { echo "demo: $p is missing (run: make apps)" >&2; exit 1; }
done

# The real llama-server, if there is one (the same search as the real-server tests).
LLAMA=
if [ "${RSD_DEMO_SIM:-}" != 1 ]; then
    if [ -n "${LLAMA_SERVER:-}" ]; then
        if [ -f "$LLAMA_SERVER" ] && [ -x "$LLAMA_SERVER" ]; then LLAMA=$LLAMA_SERVER
        else echo "demo: LLAMA_SERVER=$LLAMA_SERVER is not an executable file" >&2; exit 1; fi
    elif [ -f ../shared/llama.cpp/bin/llama-server ] && [ -x ../shared/llama.cpp/bin/llama-server ]; then
        LLAMA=../shared/llama.cpp/bin/llama-server
    else
        LLAMA=$(command -v llama-server 2>/dev/null || true)
    fi
    [ -n "$LLAMA" ] && LLAMA=$(cd "$(dirname "$LLAMA")" && pwd)/$(basename "$LLAMA")
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rsd-demo.XXXXXX") || exit 1
SIM_PID=
SERVE_PID=
cleanup() {
    [ -n "$SIM_PID" ] && kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null
    [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The state dir (cross-process lock, attribution of what we loaded) lives in the temp dir.
export RESIDENCY_STATE_DIR="$TMP/state"
export LLAMA_CACHE="$TMP/cache"
unset RESIDENCY RESIDENCY_TOKEN

# wait_listening PID FILE WHAT: waits (at most 20 s) until FILE has the
# "listening on http://127.0.0.1:PORT" line, then prints the URL.
wait_listening() {
    i=0
    while ! grep -q 'listening on http://127.0.0.1:' "$2" 2>/dev/null; do
        i=$((i + 1))
        if [ $i -gt 400 ] || ! kill -0 "$1" 2>/dev/null; then
            echo "demo: $3 did not start" >&2
            tail -n 20 "$2" >&2
            return 1
        fi
        sleep 0.05
    done
    sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$2" | head -n 1
}

MODELS="chat-8b coder-7b writer-12b vision-4b embed-2b"
if [ -n "$LLAMA" ]; then
    mkdir -p "$TMP/models" || exit 1
    # shellcheck disable=SC2086
    "$TINY" "$TMP/models" $MODELS || { echo "demo: cannot write the tiny models" >&2; exit 1; }
    for m in $MODELS; do
        echo "[$m]"
        echo "model = $TMP/models/$m.gguf"
        echo "ctx-size = 256"
        echo "threads = 1"
        case $m in chat-8b | embed-2b) echo "tags = pinned:true" ;; esac
        echo
    done >"$TMP/preset.ini"
    "$LLAMA" --host 127.0.0.1 --port 0 --models-preset "$TMP/preset.ini" --models-max 2 \
        </dev/null >"$TMP/sim.out" 2>"$TMP/sim.err" &
    SIM_PID=$!
    URL=$(wait_listening "$SIM_PID" "$TMP/sim.err" "llama-server") || exit 1
    echo "residency.h demo: a REAL llama.cpp router at $URL"
    echo "  $LLAMA ($("$LLAMA" --version 2>&1 | head -n 1))"
    echo "  capacity 2 models (--models-max 2), tiny models written by tiny-gguf (they load in ms),"
    echo "  chat-8b and embed-2b are pinned by their preset tag (pinned:true)"
else
    "$SIM" --runtime router --port 0 --models-max 2 --load-ms 300 \
        --model id=chat-8b,tags=pinned:true \
        --model id=coder-7b \
        --model id=writer-12b \
        --model id=vision-4b \
        --model id=embed-2b,tags=pinned:true \
        >"$TMP/sim.out" 2>"$TMP/sim.err" &
    SIM_PID=$!
    URL=$(wait_listening "$SIM_PID" "$TMP/sim.out" "the simulator") || exit 1
    if [ "${RSD_DEMO_SIM:-}" = 1 ]; then why="RSD_DEMO_SIM=1"; else why="no llama-server found"; fi
    echo "residency.h demo: a SIMULATED llama.cpp router (rsd-sim; $why) at $URL"
    echo "  capacity 2 models (--models-max 2), loads take 300 ms,"
    echo "  chat-8b and embed-2b are pinned by their preset tag (pinned:true)"
fi
echo "  state dir (lock, attribution): $RESIDENCY_STATE_DIR"

STEP=0
# run TITLE EXPECTED_EXIT EXPECTED_RESIDENTS rsd-ensure-arguments...
run() {
    title=$1 want=$2 want_list=$3
    shift 3
    STEP=$((STEP + 1))
    echo
    echo "== $STEP. $title"
    # the line shown is the line run: it can be pasted as it is (from the repository)
    cmd="${ENV_SHOWN:-}$ENSURE --url $URL $*"
    echo "   \$ $cmd"
    eval "$cmd" >"$TMP/step.out" 2>&1
    got=$?
    sed 's/^/   /' "$TMP/step.out"
    list=$("$ENSURE" --url "$URL" --list 2>&1)
    echo "   server now: $list"
    if [ "$got" -ne "$want" ]; then
        echo "demo: FAILED at step $STEP: rsd-ensure exited $got, expected $want" >&2
        exit 1
    fi
    if [ "$list" != "resident: $want_list" ]; then
        echo "demo: FAILED at step $STEP: expected 'resident: $want_list'" >&2
        exit 1
    fi
    echo "   ok (exit $got)"
}

ENV_SHOWN=
run "Load the pinned chat model on an empty router" 0 \
    "chat-8b (loaded, pinned)" \
    --model chat-8b

run "Load a coder beside it: a free slot, so nothing is evicted (co-resident)" 0 \
    "chat-8b (loaded, pinned), coder-7b (loaded)" \
    --model coder-7b

run "Ask for a writer: both slots are taken, the unprotected coder is swapped out" 0 \
    "chat-8b (loaded, pinned), writer-12b (loaded)" \
    --model writer-12b

run "Load the pinned embedder: the writer is the only unprotected resident, so it goes" 0 \
    "chat-8b (loaded, pinned), embed-2b (loaded, pinned)" \
    --model embed-2b

run "Ask for vision while both slots hold pinned models: declined, nothing evicted" 2 \
    "chat-8b (loaded, pinned), embed-2b (loaded, pinned)" \
    --model vision-4b

ENV_SHOWN="RESIDENCY=observe "
run "Observe-only (RESIDENCY=observe): reports what it would do, changes nothing (exit 4)" 4 \
    "chat-8b (loaded, pinned), embed-2b (loaded, pinned)" \
    --model coder-7b
ENV_SHOWN=

run "The same with --observe and --json, for scripts" 4 \
    "chat-8b (loaded, pinned), embed-2b (loaded, pinned)" \
    --model coder-7b --observe --json

echo
echo "demo: part 1: all $STEP steps behaved as expected"

# ---- part 2: rsd-serve -------------------------------------------------------------
kill "$SIM_PID" 2>/dev/null && wait "$SIM_PID" 2>/dev/null
SIM_PID=
if [ -n "$LLAMA" ]; then
    cat >"$TMP/serve.ini" <<EOF
# rsd-serve: three models, at most two resident, each its own real llama-server
listen = 127.0.0.1:0
max_models = 2
llama_server = $LLAMA
args = --threads 1
stop_grace = 5

[model chat-8b]
model = $TMP/models/chat-8b.gguf
ctx = 256
aliases = chat

[model coder-7b]
model = $TMP/models/coder-7b.gguf
ctx = 256

[model writer-12b]
model = $TMP/models/writer-12b.gguf
ctx = 256
EOF
    CHILD="a real llama-server"
    REPLY_MARK='"object":"chat.completion"'
    REPLY_NOTE="  (random weights: garbage text)"
else
    # rsd-serve checks that a model file is readable before it starts a model: empty files
    mkdir -p "$TMP/models" && : >"$TMP/models/chat-8b.gguf" && : >"$TMP/models/coder-7b.gguf" &&
        : >"$TMP/models/writer-12b.gguf"
    cat >"$TMP/serve.ini" <<EOF
# rsd-serve: three models, at most two resident; rsd-sim plays llama-server
listen = 127.0.0.1:0
max_models = 2
llama_server = $SIM
args = --runtime server --load-ms 200
stop_grace = 2

[model chat-8b]
model = $TMP/models/chat-8b.gguf
aliases = chat

[model coder-7b]
model = $TMP/models/coder-7b.gguf

[model writer-12b]
model = $TMP/models/writer-12b.gguf
EOF
    CHILD="a simulated llama-server (rsd-sim --runtime server)"
    REPLY_MARK='simulated'
    REPLY_NOTE=
fi
"$SERVE" --config "$TMP/serve.ini" >"$TMP/serve.out" 2>"$TMP/serve.err" &
SERVE_PID=$!
SURL=$(wait_listening "$SERVE_PID" "$TMP/serve.out" "rsd-serve") || { cat "$TMP/serve.err" >&2; exit 1; }
echo
echo "residency.h demo, part 2: rsd-serve at $SURL"
echo "  three models (chat-8b, coder-7b, writer-12b), at most 2 resident processes,"
echo "  each $CHILD started on demand"
LOG_SEEN=0
# prints rsd-serve's log lines that are new since the last call
show_log() {
    n=$(wc -l <"$TMP/serve.err")
    if [ "$n" -gt "$LOG_SEEN" ]; then
        head -n "$n" "$TMP/serve.err" | tail -n $((n - LOG_SEEN)) | sed 's/^/   log| /'
    fi
    LOG_SEEN=$n
}
show_log
# check_list EXPECTED: the resident list, read through the router API (GET /v1/models)
check_list() {
    list=$("$ENSURE" --url "$SURL" --list 2>&1)
    echo "   rsd-serve now: $list"
    if [ "$list" != "resident: $1" ]; then
        echo "demo: FAILED at step $STEP: expected 'resident: $1'" >&2
        exit 1
    fi
}
# chat TITLE MODEL EXPECTED_RESIDENTS
chat() {
    STEP=$((STEP + 1))
    echo
    echo "== $STEP. $1"
    cmd="$HTTP -d '{\"model\":\"$2\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}' $SURL/v1/chat/completions"
    echo "   \$ $cmd"
    eval "$cmd" >"$TMP/step.out" 2>"$TMP/step.err"
    got=$?
    sed 's/^/   /' "$TMP/step.err"
    show_log
    if [ "$got" -ne 0 ] || ! grep -q "$REPLY_MARK" "$TMP/step.out"; then
        echo "demo: FAILED at step $STEP: the request did not succeed (exit $got)" >&2
        cat "$TMP/step.out" >&2
        exit 1
    fi
    echo "   reply: $(sed 's/.*"content":"\([^"]*\)".*/\1/' "$TMP/step.out" | head -c 60)$REPLY_NOTE"
    check_list "$3"
    echo "   ok"
}

chat "A request for chat-8b (by its alias 'chat'): its llama-server is started" chat \
    "chat-8b (loaded)"
chat "A request for coder-7b: a free slot, so a second process starts beside it" coder-7b \
    "chat-8b (loaded), coder-7b (loaded)"
chat "A request for writer-12b: both slots taken, the least recently used idle one goes" writer-12b \
    "coder-7b (loaded), writer-12b (loaded)"
if ! grep -q 'chat-8b: stopping .*(evict)' "$TMP/serve.err"; then
    echo "demo: FAILED at step $STEP: no eviction of chat-8b in rsd-serve's log" >&2
    exit 1
fi

STEP=$((STEP + 1))
echo
echo "== $STEP. Stop rsd-serve (SIGTERM): every process is stopped, exit 0"
kill -TERM "$SERVE_PID"
wait "$SERVE_PID"
got=$?
SERVE_PID=
show_log
if [ "$got" -ne 0 ]; then
    echo "demo: FAILED at step $STEP: rsd-serve exited $got, expected 0" >&2
    exit 1
fi
evictions=$(grep -c '(evict)' "$TMP/serve.err")
if [ "$evictions" -ne 1 ]; then
    echo "demo: FAILED at step $STEP: expected exactly one eviction in the log, saw $evictions" >&2
    exit 1
fi
echo "   ok (exit 0, one eviction)"

echo
echo "demo: all $STEP steps behaved as expected"
exit 0
