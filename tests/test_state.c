/* State directory, cross-process lock (flock + hook) and persisted attribution. */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
#include "rsd_test.h"

#include "portable.h"
#include "counting.h"
#include "attr_set.h"
#include <signal.h>
#if defined(_WIN32)
#include <process.h> /* getpid */
#define O_STATE_FILE (O_WRONLY | O_CREAT | O_TRUNC | O_BINARY)
#else
#include <sys/resource.h>
#include <sys/wait.h>
#define O_STATE_FILE (O_WRONLY | O_CREAT | O_TRUNC)
#endif

/* ---- helpers ------------------------------------------------------------------ */
typedef struct logcap {
    int items[RSD_LOGITEM_NUM];
    int total;
} logcap;

static void log_fn(void *user, int level, uint32_t item, const char *msg, const char *where) {
    logcap *c = (logcap *)user;
    (void)level; (void)msg; (void)where;
    if (item < (uint32_t)RSD_LOGITEM_NUM) c->items[item]++;
    c->total++;
    if (getenv("RSD_TEST_VERBOSE")) printf("    log %s: %s\n", rsd_log_item_name(item), msg ? msg : "");
}

static void rm_rf(const char *path) { tp_remove_tree(path); }

/* Open descriptors (Windows: handles) of this process. */
static int count_fds(void) { return tp_open_handles(); }

static char *make_tmp(char *buf, size_t cap) { return tp_temp_dir("state", buf, cap) == 0 ? buf : NULL; }

typedef struct fake_env {
    const char *names[4];
    const char *values[4];
} fake_env;

static const char *fake_getenv(const char *name, void *user) {
    fake_env *e = (fake_env *)user;
    int i;
    for (i = 0; i < 4; i++)
        if (e->names[i] && strcmp(e->names[i], name) == 0) return e->values[i];
    return NULL;
}

/* rsd_state_lock_step read as the code of the wait: RSD_PENDING while it waits, then its
   end (RSD_OK, or <0), pulled with rsd_state_lock_next_event; later calls read the same
   end from lk's state and error (the lock's query); RSD_ERR_STATE for an IDLE lock. */
static int lock_step(rsd_state *st, rsd_state_lock *lk, uint64_t now) {
    int n = rsd_state_lock_step(st, lk, now), end = RSD_PENDING;
    if (n < 0) return n;
    if (n > 0) {
        CHECK_EQ_INT(n, 1);
        CHECK(rsd_state_lock_next_deadline(lk) == 0);
        CHECK(rsd_state_lock_next_event(lk, &end));
        CHECK(!rsd_state_lock_next_event(lk, &n)); /* once */
        return end;
    }
    if (lk->state == RSD_LOCK_WAITING) {
        CHECK(rsd_state_lock_next_deadline(lk) == lk->wake_ms);
        return RSD_PENDING;
    }
    return lk->state == RSD_LOCK_FAILED ? (lk->error < 0 ? lk->error : RSD_ERR_LOCK) : RSD_OK;
}

static rsd_state *open_state(const char *dir, logcap *lc, uint32_t wait_ms, bool fail_closed) {
    rsd_state_desc d;
    rsd_state *st = NULL;
    memset(&d, 0, sizeof d);
    d.dir = dir;
    d.logger.fn = log_fn;
    d.logger.user = lc;
    d.lock_wait_ms = wait_ms;
    d.lock_fail_closed = fail_closed;
    if ((st = rsd_state_create(&d, NULL)) == NULL) return NULL;
    return st;
}

#if !defined(_WIN32) /* fork */
static void wr(int fd, char c) { if (write(fd, &c, 1) != 1) _exit(90); }
static char rd(int fd) { char c = 0; return read(fd, &c, 1) == 1 ? c : 0; }

/* A child that takes `key`, reports 'H' on up[1], then _exits (without unlocking)
   when anything (or EOF) arrives on down[0]. */
static pid_t spawn_holder(rsd_state *st, const char *key, int *up_rd, int *down_wr) {
    int up[2], down[2];
    pid_t pid;
    if (pipe(up) != 0 || pipe(down) != 0) return -1;
    pid = fork();
    if (pid == 0) {
        rsd_state_lock lk;
        memset(&lk, 0, sizeof lk);
        close(up[0]);
        close(down[1]);
        if (rsd_state_lock_try(st, &lk, key, "holder child") != RSD_OK) _exit(3);
        wr(up[1], 'H');
        (void)rd(down[0]);
        _exit(0); /* no unlock: the kernel releases the flock with the process */
    }
    close(up[1]);
    close(down[0]);
    *up_rd = up[0];
    *down_wr = down[1];
    return pid;
}

static int reap(pid_t pid) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
#endif

static const char *const KEY_ALLOC = "http://127.0.0.1:7070";

/* ---- directory resolution and creation ------------------------------------------ */
static void test_resolve_order(void) {
    rsd_state_desc d;
    fake_env env;
    char buf[RSD_STATE_MAX_DIR_BYTES + 1];
    memset(&d, 0, sizeof d);
    memset(&env, 0, sizeof env);
    d.getenv_fn = fake_getenv;
    d.getenv_user = &env;
    env.names[0] = "RESIDENCY_STATE_DIR"; env.values[0] = "/rsd/dir/";
#if defined(_WIN32)
    env.names[1] = "LOCALAPPDATA";        env.values[1] = "C:\\Users\\u\\AppData\\Local";
#else
    env.names[1] = "XDG_STATE_HOME";      env.values[1] = "/xdg//";
#endif
    env.names[2] = "HOME";                env.values[2] = "/home/u";
    /* desc wins over everything */
    d.dir = "/from/desc";
    CHECK(rsd_state_resolve_dir(&d, buf, sizeof buf) > 0);
    CHECK_EQ_STR(buf, "/from/desc");
    d.dir = "";
    CHECK(rsd_state_resolve_dir(&d, buf, sizeof buf) > 0);
    CHECK_EQ_STR(buf, "/rsd/dir"); /* trailing slash dropped */
    env.values[0] = ""; /* empty counts as unset */
#if defined(_WIN32) /* %LOCALAPPDATA%\residency, else nothing (HOME is not used) */
    CHECK(rsd_state_resolve_dir(&d, buf, sizeof buf) > 0);
    CHECK_EQ_STR(buf, "C:\\Users\\u\\AppData\\Local\\residency");
    env.values[1] = NULL;
    CHECK_EQ_INT(rsd_state_resolve_dir(&d, buf, sizeof buf), RSD_ERR_STATE_DIR);
#else
    CHECK(rsd_state_resolve_dir(&d, buf, sizeof buf) > 0);
    CHECK_EQ_STR(buf, "/xdg/residency");
    env.values[1] = "relative/xdg"; /* XDG: relative paths are ignored */
    CHECK(rsd_state_resolve_dir(&d, buf, sizeof buf) > 0);
    CHECK_EQ_STR(buf, "/home/u/.local/state/residency");
    env.values[1] = NULL;
    CHECK_EQ_INT(rsd_state_resolve_dir(&d, buf, sizeof buf), (int)strlen("/home/u/.local/state/residency"));
    env.values[2] = NULL;
    CHECK_EQ_INT(rsd_state_resolve_dir(&d, buf, sizeof buf), RSD_ERR_STATE_DIR);
#endif
    env.values[0] = "rel/dir"; /* an explicit RESIDENCY_STATE_DIR may be relative */
    CHECK(rsd_state_resolve_dir(&d, buf, sizeof buf) > 0);
    CHECK_EQ_STR(buf, "rel/dir");
    CHECK_EQ_INT(rsd_state_resolve_dir(&d, buf, 4), RSD_ERR_STATE_DIR);
    CHECK_EQ_INT(rsd_state_resolve_dir(&d, NULL, 4), RSD_ERR_ARG);
}

static void test_open_unresolved(void) {
    rsd_state_desc d;
    fake_env env;
    logcap lc;
    rsd_state *st = (rsd_state *)&lc;
    int err = RSD_OK;
    memset(&d, 0, sizeof d);
    memset(&env, 0, sizeof env);
    memset(&lc, 0, sizeof lc);
    d.getenv_fn = fake_getenv;
    d.getenv_user = &env;
    d.logger.fn = log_fn;
    d.logger.user = &lc;
    st = rsd_state_create(&d, &err);
    CHECK_EQ_INT(err, RSD_ERR_STATE_DIR);
    CHECK(st == NULL);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_STATE_DIR_UNRESOLVED], 1);
}

static void test_dir_created_0700(void) {
    char tmp[64], dir[256], p[300];
    const char *parts[5] = {"/a", "/a/b", "/a/b/c", "/a/b/c/locks", "/a/b/c/attr"};
    struct stat sb;
    logcap lc;
    rsd_state *st;
    rsd_state_desc d;
    fake_env env;
    int i;
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    snprintf(dir, sizeof dir, "%s/a/b/c", tmp);
    /* through the environment seam, not desc->dir */
    memset(&d, 0, sizeof d);
    memset(&env, 0, sizeof env);
    env.names[0] = "RESIDENCY_STATE_DIR";
    env.values[0] = dir;
    d.getenv_fn = fake_getenv;
    d.getenv_user = &env;
    REQUIRE((st = rsd_state_create(&d, NULL)) != NULL);
    CHECK_EQ_STR(rsd_state_dir(st), dir);
    for (i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s%s", tmp, parts[i]);
        CHECK(stat(p, &sb) == 0 && S_ISDIR(sb.st_mode));
#if !defined(_WIN32) /* Windows: the ACL inherited from %LOCALAPPDATA%, no mode bits */
        CHECK_EQ_INT(sb.st_mode & 0777, 0700);
#endif
    }
    rsd_state_destroy(st);
    /* opening again over the existing tree is fine */
    st = open_state(dir, &lc, 0, false);
    CHECK(st != NULL);
    rsd_state_destroy(st);
    CHECK_EQ_INT(lc.total, 0);
    rm_rf(tmp);
}

#if !defined(_WIN32) /* POSIX modes, owners and symlinks */
static void test_dir_unsafe(void) {
    char tmp[64], dir[256], p[300], target[300];
    logcap lc;
    rsd_state *st;
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    /* world-writable state dir: refused */
    snprintf(dir, sizeof dir, "%s/open", tmp);
    REQUIRE(mkdir(dir, 0700) == 0 && chmod(dir, 0777) == 0);
    CHECK(open_state(dir, &lc, 0, false) == NULL);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_STATE_DIR_UNSAFE], 1);
    /* group-writable is accepted (umask 002 with per-user groups) */
    snprintf(dir, sizeof dir, "%s/group", tmp);
    REQUIRE(mkdir(dir, 0700) == 0 && chmod(dir, 0770) == 0);
    st = open_state(dir, &lc, 0, false);
    CHECK(st != NULL);
    rsd_state_destroy(st);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_STATE_DIR_UNSAFE], 1);
    /* owned by someone else: refused (only testable as root, which can chown) */
    if (geteuid() == 0) {
        snprintf(dir, sizeof dir, "%s/theirs", tmp);
        REQUIRE(mkdir(dir, 0700) == 0 && chown(dir, 54321, 54321) == 0);
        lc.items[RSD_LOGITEM_STATE_DIR_UNSAFE] = 0;
        CHECK(open_state(dir, &lc, 0, false) == NULL);
        CHECK_EQ_INT(lc.items[RSD_LOGITEM_STATE_DIR_UNSAFE], 1);
    }
    /* a regular file where the dir should be: refused */
    snprintf(dir, sizeof dir, "%s/file", tmp);
    REQUIRE(close(open(dir, O_CREAT | O_WRONLY, 0600)) == 0);
    CHECK(open_state(dir, &lc, 0, false) == NULL);
    /* the state dir itself may be a symlink to a directory of ours */
    snprintf(target, sizeof target, "%s/real", tmp);
    snprintf(dir, sizeof dir, "%s/link", tmp);
    REQUIRE(mkdir(target, 0700) == 0 && symlink(target, dir) == 0);
    st = open_state(dir, &lc, 0, false);
    CHECK(st != NULL);
    rsd_state_destroy(st);
    /* but locks/ or attr/ being a symlink is refused (someone could redirect our writes) */
    snprintf(dir, sizeof dir, "%s/s2", tmp);
    REQUIRE(mkdir(dir, 0700) == 0);
    snprintf(p, sizeof p, "%s/locks", dir);
    REQUIRE(symlink(target, p) == 0);
    lc.items[RSD_LOGITEM_STATE_DIR_UNSAFE] = 0;
    CHECK(open_state(dir, &lc, 0, false) == NULL);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_STATE_DIR_UNSAFE], 1);
    rm_rf(tmp);
}
#endif

static void test_open_allocator(void) {
    char tmp[64];
    counted ca;
    logcap lc;
    rsd_state_desc d;
    rsd_state *st = NULL;
    int err = RSD_OK;
    memset(&lc, 0, sizeof lc);
    memset(&d, 0, sizeof d);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    d.dir = tmp;
    d.logger.fn = log_fn;
    d.logger.user = &lc;
    d.allocator = counting(&ca);
    d.allocator.free_fn = NULL;
    st = rsd_state_create(&d, &err);
    CHECK_EQ_INT(err, RSD_ERR_ARG); /* half an allocator */
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ALLOCATOR_HALF], 1);
    d.allocator.free_fn = counted_free;
    ca.fail_all = true;
    st = rsd_state_create(&d, &err);
    CHECK_EQ_INT(err, RSD_ERR_NOMEM);
    CHECK(st == NULL);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ALLOC_FAILED], 1);
    ca.fail_all = false;
    REQUIRE((st = rsd_state_create(&d, NULL)) != NULL);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY_ALLOC, "m", NULL, 1), RSD_OK); /* no allocation */
    rsd_state_destroy(st);
    rsd_state_destroy(NULL);
    CHECK_EQ_INT(ca.allocs, 1);
    CHECK_EQ_INT(ca.frees, 1);
    rm_rf(tmp);
}

/* ---- file names --------------------------------------------------------------------- */
static bool name_is_safe(const char *n) {
    size_t i, len = strlen(n);
    if (len == 0 || len > RSD_STATE_NAME_PREFIX_BYTES + 17 || n[0] == '.' || n[0] == '-') return false;
    for (i = 0; i < len; i++)
        if (!rsdi_state_safe_char((unsigned char)n[i])) return false;
    return strcmp(n, ".") != 0 && strcmp(n, "..") != 0;
}

static void test_file_names(void) {
    char a[RSD_STATE_MAX_NAME_BYTES], b[RSD_STATE_MAX_NAME_BYTES];
    char longkey[RSD_STATE_MAX_KEY_BYTES + 2];
    static const char *const hostile[] = {
        "../../etc/passwd", "..", ".", "/", "-rf", ".hidden", "a/b", "a_b", "a\nb", "\xff\xfe",
        "lmstudio|http://[::1]:1234/v1", "http://127.0.0.1:8080", " ", "\t"};
    size_t i, j;
    /* FNV-1a 64 of "a" is af63dc4c8601ec8c */
    CHECK_EQ_INT(rsd_state_file_name("a", a, sizeof a), 18);
    CHECK_EQ_STR(a, "a-af63dc4c8601ec8c");
    CHECK(rsd_state_file_name("http://127.0.0.1:8080", a, sizeof a) > 0);
    CHECK(strncmp(a, "http_127.0.0.1_8080-", 20) == 0);
    CHECK(rsd_state_file_name("llamacpp|http://mini:8080/v1", a, sizeof a) > 0);
    CHECK(strncmp(a, "llamacpp_http_mini_8080_v1-", 27) == 0);
    for (i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        CHECK(rsd_state_file_name(hostile[i], a, sizeof a) > 0);
        CHECK(name_is_safe(a));
        for (j = 0; j < i; j++) { /* distinct keys never share a name */
            CHECK(rsd_state_file_name(hostile[j], b, sizeof b) > 0);
            CHECK(strcmp(a, b) != 0);
        }
    }
    memset(longkey, 'k', sizeof longkey);
    longkey[RSD_STATE_MAX_KEY_BYTES] = '\0';
    CHECK_EQ_INT(rsd_state_file_name(longkey, a, sizeof a), RSD_STATE_NAME_PREFIX_BYTES + 17);
    CHECK(name_is_safe(a));
    longkey[RSD_STATE_MAX_KEY_BYTES - 1] = 'x'; /* differs only past the readable prefix */
    CHECK(rsd_state_file_name(longkey, b, sizeof b) > 0);
    CHECK(strcmp(a, b) != 0 && strncmp(a, b, RSD_STATE_NAME_PREFIX_BYTES) == 0);
    longkey[RSD_STATE_MAX_KEY_BYTES] = 'k';
    longkey[RSD_STATE_MAX_KEY_BYTES + 1] = '\0';
    CHECK_EQ_INT(rsd_state_file_name(longkey, a, sizeof a), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_state_file_name("", a, sizeof a), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_state_file_name(NULL, a, sizeof a), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_state_file_name("a", a, 10), RSD_ERR_BUFFER);
}

/* ---- the lock ---------------------------------------------------------------------- */
static const char *const KEY = "http://127.0.0.1:8080";

static void test_lock_take_release(void) {
    char tmp[64], p[512], name[RSD_STATE_MAX_NAME_BYTES];
    logcap lc;
    rsd_state *st;
    rsd_state_lock lk, lk2;
    rsd_lock_owner o;
    struct stat sb;
    memset(&lc, 0, sizeof lc);
    memset(&lk, 0, sizeof lk);
    memset(&lk2, 0, sizeof lk2);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    CHECK_EQ_INT(rsd_state_lock_owner(st, KEY, &o), RSD_ERR_NOT_FOUND); /* never taken */
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk, KEY, "test\npurpose"), RSD_OK);
    CHECK(rsd_state_lock_held(&lk));
    CHECK_EQ_INT(rsd_state_lock_begin(st, &lk, KEY, "x", 0, 0), RSD_ERR_STATE); /* still held */
    /* the owner record names us */
    CHECK_EQ_INT(rsd_state_lock_owner(st, KEY, &o), RSD_OK);
    CHECK_EQ_INT(o.pid, (long long)getpid());
    CHECK_EQ_STR(o.purpose, "test?purpose"); /* control bytes cleaned */
    CHECK(o.host[0] != '\0');
    CHECK(o.taken_unix_ms > 1600000000000ull);
    /* flock is per open file: a second acquisition in this process is busy, too */
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk2, KEY, "second"), RSD_PENDING);
    CHECK(!rsd_state_lock_held(&lk2));
    CHECK_EQ_INT(lk2.state, RSD_LOCK_IDLE);
    /* another key is independent */
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk2, "http://127.0.0.1:8081", "other"), RSD_OK);
    rsd_state_unlock(st, &lk2);
    rsd_state_unlock(st, &lk);
    CHECK(!rsd_state_lock_held(&lk));
    CHECK_EQ_INT(rsd_state_lock_owner(st, KEY, &o), RSD_ERR_NOT_FOUND); /* record cleared */
    /* the lock file stays (deleting flock files races) */
    REQUIRE(rsd_state_file_name(KEY, name, sizeof name) > 0);
    snprintf(p, sizeof p, "%s/locks/%s.lock", tmp, name);
    CHECK(stat(p, &sb) == 0 && S_ISREG(sb.st_mode));
#if !defined(_WIN32)
    CHECK_EQ_INT(sb.st_mode & 0777, 0600);
#endif
    rsd_state_unlock(st, &lk); /* idempotent */
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk2, KEY, "again"), RSD_OK);
    rsd_state_unlock(st, &lk2);
    {
        static char longkey[RSD_STATE_MAX_KEY_BYTES + 1];
        memset(longkey, 'k', RSD_STATE_MAX_KEY_BYTES);
        CHECK_EQ_INT(rsd_state_lock_try(st, &lk2, longkey, "longest key"), RSD_OK);
        CHECK_EQ_STR(lk2.key, longkey);
        rsd_state_unlock(st, &lk2);
    }
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk2, "", "bad key"), RSD_ERR_ARG);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_STATE_KEY_INVALID], 1);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

#if !defined(_WIN32) /* fork */
static void test_lock_holder_exit_releases(void) {
    char tmp[64];
    logcap lc;
    rsd_state *st;
    rsd_state_lock lk;
    rsd_lock_owner o;
    int up, down;
    pid_t pid;
    memset(&lc, 0, sizeof lc);
    memset(&lk, 0, sizeof lk);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    pid = spawn_holder(st, KEY, &up, &down);
    REQUIRE(pid > 0);
    CHECK_EQ_INT(rd(up), 'H');
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk, KEY, "parent"), RSD_PENDING);
    CHECK_EQ_INT(rsd_state_lock_owner(st, KEY, &o), RSD_OK);
    CHECK_EQ_INT(o.pid, (long long)pid);
    CHECK_EQ_STR(o.purpose, "holder child");
    wr(down, 'G');
    CHECK_EQ_INT(reap(pid), 0);
    /* _exit without unlock: the kernel dropped the lock; no stale window */
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk, KEY, "parent"), RSD_OK);
    CHECK_EQ_INT(rsd_state_lock_owner(st, KEY, &o), RSD_OK);
    CHECK_EQ_INT(o.pid, (long long)getpid()); /* the dead holder's record was replaced */
    rsd_state_unlock(st, &lk);
    close(up);
    close(down);
    rsd_state_destroy(st);
    rm_rf(tmp);
}
#endif

#if !defined(_WIN32) /* fork */
static void test_lock_blocking_wait(void) {
    char tmp[64];
    logcap lc;
    rsd_state *st;
    rsd_state_lock lk;
    int up[2];
    pid_t pid;
    memset(&lc, 0, sizeof lc);
    memset(&lk, 0, sizeof lk);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, true)) != NULL);
    REQUIRE(pipe(up) == 0);
    REQUIRE(rsd_state_lock_try(st, &lk, KEY, "parent") == RSD_OK);
    pid = fork();
    if (pid == 0) {
        rsd_state_lock c;
        int r;
        memset(&c, 0, sizeof c);
        close(up[0]);
        if (rsd_state_lock_try(st, &c, KEY, "child") != RSD_PENDING) _exit(4);
        wr(up[1], 'W'); /* seen busy; now wait for it (fail-closed, 60 s budget) */
        r = rsd_state_lock_sync(st, &c, KEY, "child", 60000);
        wr(up[1], r == RSD_OK && rsd_state_lock_held(&c) ? 'O' : 'F');
        rsd_state_unlock(st, &c);
        _exit(0);
    }
    REQUIRE(pid > 0);
    close(up[1]);
    CHECK_EQ_INT(rd(up[0]), 'W');
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(rd(up[0]), 'O');
    CHECK_EQ_INT(reap(pid), 0);
    close(up[0]);
    rsd_state_destroy(st);
    rm_rf(tmp);
}
#endif

#if !defined(_WIN32) /* fork */
static void test_lock_deadline_fake_clock(void) {
    char tmp[64];
    logcap lc, lc2;
    rsd_state *st, *st2;
    rsd_state_lock lk, lk2;
    rsd_state_lock_info li;
    int up, down, r, steps = 0;
    uint64_t now = 1000, expect_wake[] = {1005, 1015, 1035, 1075, 1155, 1255, 1355, 1455, 1500};
    pid_t pid;
    memset(&lc, 0, sizeof lc);
    memset(&lc2, 0, sizeof lc2);
    memset(&lk, 0, sizeof lk);
    memset(&lk2, 0, sizeof lk2);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 500, false)) != NULL);
    REQUIRE((st2 = open_state(tmp, &lc2, 500, true)) != NULL);
    pid = spawn_holder(st, KEY, &up, &down);
    REQUIRE(pid > 0);
    REQUIRE(rd(up) == 'H');
    /* fail-open (upstream): wait 500 ms on the fake clock, then proceed unlocked */
    CHECK_EQ_INT(rsd_state_lock_begin(st, &lk, KEY, "reconcile", now, 0), RSD_OK);
    CHECK_EQ_INT(lk.deadline_ms, 1500);
    CHECK_EQ_INT(lock_step(st, &lk, now), RSD_PENDING);
    CHECK_EQ_INT(lk.attempts, 1);
    CHECK_EQ_INT(lock_step(st, &lk, now + 3), RSD_PENDING); /* not due: no attempt */
    CHECK_EQ_INT(lk.attempts, 1);
    rsd_state_lock_query(&lk, &li); /* what it waits on */
    CHECK_EQ_INT(li.state, RSD_LOCK_WAITING);
    CHECK(!li.held && !li.end_waiting);
    CHECK_EQ_INT(li.wake_ms, 1005);
    CHECK_EQ_INT(li.deadline_ms, 1500);
    CHECK_EQ_INT(li.attempts, 1);
    CHECK_EQ_STR(li.key, KEY);
    CHECK_EQ_STR(li.purpose, "reconcile");
    /* retry schedule: 5 ms doubling to 100 ms, last wake clamped to the deadline */
    for (;;) {
        if (steps < 9) CHECK_EQ_INT(lk.wake_ms, expect_wake[steps]);
        now = lk.wake_ms;
        r = lock_step(st, &lk, now);
        steps++;
        if (r != RSD_PENDING || steps > 100) break;
    }
    CHECK_EQ_INT(steps, 9);
    CHECK_EQ_INT(now, 1500);
    CHECK_EQ_INT(r, RSD_OK);
    CHECK_EQ_INT(lk.state, RSD_LOCK_UNLOCKED);
    CHECK_EQ_INT(lk.error, RSD_ERR_TIMEOUT);
    CHECK(!rsd_state_lock_held(&lk));
    rsd_state_lock_query(&lk, &li);
    CHECK(li.state == RSD_LOCK_UNLOCKED && li.error == RSD_ERR_TIMEOUT && !li.held);
    CHECK(!li.end_waiting); /* lock_step pulled it */
    CHECK_EQ_INT(li.attempts, 1 + 9); /* the first, and one at each wake */
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_LOCK_WAIT_EXPIRED], 1);
    CHECK_EQ_INT(lock_step(st, &lk, now + 1), RSD_OK); /* stays settled */
    rsd_state_unlock(st, &lk); /* never releases what it never held */
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk, KEY, "probe"), RSD_PENDING);
    /* fail-closed: RSD_ERR_TIMEOUT; an explicit deadline (one per reconcile, W5) wins */
    CHECK_EQ_INT(rsd_state_lock_begin(st2, &lk2, KEY, "reconcile", 0, 30), RSD_OK);
    now = 0;
    while ((r = lock_step(st2, &lk2, now)) == RSD_PENDING) now = lk2.wake_ms;
    CHECK_EQ_INT(r, RSD_ERR_TIMEOUT);
    CHECK_EQ_INT(now, 30);
    CHECK_EQ_INT(lk2.state, RSD_LOCK_FAILED);
    CHECK_EQ_INT(lc2.items[RSD_LOGITEM_LOCK_TIMEOUT], 1);
    CHECK_EQ_INT(lc2.items[RSD_LOGITEM_LOCK_WAIT_EXPIRED], 0);
    CHECK_EQ_INT(lock_step(st2, &lk2, now), RSD_ERR_TIMEOUT);
    rsd_state_unlock(st2, &lk2);
    /* once the holder is gone a waiting acquisition gets it on its next due step */
    CHECK_EQ_INT(rsd_state_lock_begin(st2, &lk2, KEY, "reconcile", 0, 0), RSD_OK);
    CHECK_EQ_INT(lock_step(st2, &lk2, 0), RSD_PENDING);
    wr(down, 'G');
    CHECK_EQ_INT(reap(pid), 0);
    CHECK_EQ_INT(rsd_state_lock_step(st2, &lk2, lk2.wake_ms), 1);
    rsd_state_lock_query(&lk2, &li);
    CHECK(li.state == RSD_LOCK_HELD && li.held && li.error == RSD_OK);
    CHECK(li.end_waiting); /* not pulled yet */
    CHECK(rsd_state_lock_next_event(&lk2, &r) && r == RSD_OK);
    rsd_state_lock_query(&lk2, &li);
    CHECK(li.held && !li.end_waiting);
    CHECK(rsd_state_lock_held(&lk2));
    rsd_state_unlock(st2, &lk2);
    rsd_state_lock_query(&lk2, &li);
    CHECK(li.state == RSD_LOCK_IDLE && !li.held);
    rsd_state_lock_query(NULL, &li);
    CHECK(li.state == RSD_LOCK_IDLE && li.attempts == 0);
    CHECK_EQ_STR(li.key, "");
    close(up);
    close(down);
    rsd_state_destroy(st);
    rsd_state_destroy(st2);
    rm_rf(tmp);
}
#endif

/* The lock file cannot be opened (locks/ vanished): fail-open proceeds, fail-closed fails. */
static void test_lock_open_error_policy(void) {
    char tmp[64], p[256];
    logcap lc, lc2;
    rsd_state *st, *st2;
    rsd_state_lock lk;
    memset(&lc, 0, sizeof lc);
    memset(&lc2, 0, sizeof lc2);
    memset(&lk, 0, sizeof lk);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    REQUIRE((st2 = open_state(tmp, &lc2, 0, true)) != NULL);
    snprintf(p, sizeof p, "%s/locks", tmp);
    REQUIRE(rmdir(p) == 0);
    CHECK_EQ_INT(rsd_state_lock_begin(st, &lk, KEY, "x", 7, 0), RSD_OK);
    CHECK_EQ_INT(lock_step(st, &lk, 7), RSD_OK);
    CHECK_EQ_INT(lk.state, RSD_LOCK_UNLOCKED);
    CHECK_EQ_INT(lk.error, RSD_ERR_LOCK);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_LOCK_OPEN_FAILED], 1);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_LOCK_PROCEED_UNLOCKED], 1);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(rsd_state_lock_begin(st2, &lk, KEY, "x", 7, 0), RSD_OK);
    CHECK_EQ_INT(lock_step(st2, &lk, 7), RSD_ERR_LOCK);
    CHECK_EQ_INT(lk.state, RSD_LOCK_FAILED);
    CHECK_EQ_INT(lc2.items[RSD_LOGITEM_LOCK_FAILED], 1);
    rsd_state_unlock(st2, &lk);
    CHECK_EQ_INT(lock_step(st2, &lk, 8), RSD_ERR_STATE); /* IDLE */
    /* deadline arithmetic saturates */
    CHECK_EQ_INT(rsd_state_lock_begin(st2, &lk, KEY, "x", UINT64_MAX - 3, 0), RSD_OK);
    CHECK(lk.deadline_ms == UINT64_MAX);
    rsd_state_unlock(st2, &lk);
    rsd_state_destroy(st);
    rsd_state_destroy(st2);
    rm_rf(tmp);
}

typedef struct hook_rec {
    int tries, unlocks, busy_left, fail;
    char last_key[128];
} hook_rec;

static int hook_try(const char *key, void *user) {
    hook_rec *h = (hook_rec *)user;
    h->tries++;
    snprintf(h->last_key, sizeof h->last_key, "%s", key);
    if (h->fail) return RSD_ERR_LOCK;
    if (h->busy_left > 0) { h->busy_left--; return RSD_PENDING; }
    return RSD_OK;
}

static void hook_unlock(const char *key, void *user) {
    hook_rec *h = (hook_rec *)user;
    h->unlocks++;
    snprintf(h->last_key, sizeof h->last_key, "%s", key);
}

static void test_lock_hook(void) {
    char tmp[64], p[256];
    logcap lc;
    hook_rec h;
    rsd_state_desc d;
    rsd_state *st = NULL;
    int err = RSD_OK;
    rsd_state_lock lk;
    rsd_lock_owner o;
    int r;
    uint64_t now = 0;
    memset(&lc, 0, sizeof lc);
    memset(&h, 0, sizeof h);
    memset(&lk, 0, sizeof lk);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    memset(&d, 0, sizeof d);
    d.dir = tmp;
    d.logger.fn = log_fn;
    d.logger.user = &lc;
    d.lock_hook.try_lock = hook_try;
    d.lock_hook.unlock = NULL;
    d.lock_hook.user = &h;
    st = rsd_state_create(&d, &err);
    CHECK_EQ_INT(err, RSD_ERR_ARG); /* both or neither */
    d.lock_hook.unlock = hook_unlock;
    REQUIRE((st = rsd_state_create(&d, NULL)) != NULL);
    h.busy_left = 2;
    CHECK_EQ_INT(rsd_state_lock_begin(st, &lk, KEY, "hooked", now, 0), RSD_OK);
    while ((r = lock_step(st, &lk, now)) == RSD_PENDING) now = lk.wake_ms;
    CHECK_EQ_INT(r, RSD_OK);
    CHECK(rsd_state_lock_held(&lk));
    CHECK_EQ_INT(h.tries, 3);
    CHECK_EQ_STR(h.last_key, KEY);
    snprintf(p, sizeof p, "%s/locks", tmp);
    CHECK_EQ_INT(tp_count_dir(p), 0); /* flock never used: no lock file */
    CHECK_EQ_INT(rsd_state_lock_owner(st, KEY, &o), RSD_ERR_NOT_FOUND);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(h.unlocks, 1);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(h.unlocks, 1);
    /* the hook's error: fail-open proceeds unlocked and never calls unlock */
    h.fail = 1;
    CHECK_EQ_INT(rsd_state_lock_begin(st, &lk, KEY, "hooked", 0, 0), RSD_OK);
    CHECK_EQ_INT(lock_step(st, &lk, 0), RSD_OK);
    CHECK_EQ_INT(lk.state, RSD_LOCK_UNLOCKED);
    CHECK_EQ_INT(lk.error, RSD_ERR_LOCK);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_LOCK_PROCEED_UNLOCKED], 1);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(h.unlocks, 1);
    /* try with the hook */
    h.fail = 0;
    h.busy_left = 1;
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk, KEY, "t"), RSD_PENDING);
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk, KEY, "t"), RSD_OK);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(h.unlocks, 2);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

/* ---- attribution ----------------------------------------------------------------- */
static const char *const HOSTILE_IDS[] = {
    "plain-model:Q4_K_M", "tab\there", "line\nbreak", "cr\rlf\r\n", "quote\"s'and`", "back\\slash\\",
    "\\t literal", "ünïcødé 模型 🚀", "\x01\x02ctl\x7f\x1b[0m", "end 3", "residency-attr 1", " spaced "};
enum { N_HOSTILE = sizeof HOSTILE_IDS / sizeof HOSTILE_IDS[0] };

static void attr_path(const char *tmp, const char *key, char *out, size_t cap) {
    char name[RSD_STATE_MAX_NAME_BYTES];
    (void)rsd_state_file_name(key, name, sizeof name);
    snprintf(out, cap, "%s/attr/%s.attr", tmp, name);
}

static void write_file(const char *path, const char *data, size_t n) {
    int fd = open(path, O_STATE_FILE, 0600);
    if (fd >= 0) {
        if (write(fd, data, n) != (ssize_t)n) CHECK(0);
        close(fd);
    }
}

static void test_attr_roundtrip(void) {
    char tmp[64], p[512];
    logcap lc;
    rsd_state *st;
    static rsd_attr_set set;
    size_t i;
    int at;
    char longid[RSD_STATE_MAX_ID_BYTES + 2];
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0); /* no file yet */
    CHECK(!set.corrupt);
    for (i = 0; i < N_HOSTILE; i++)
        CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, HOSTILE_IDS[i], NULL, 1000 + i), RSD_OK);
    /* LM Studio owned instances: (model key, instance id) */
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "qwen3-27b", "qwen3-27b:2", 77), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "qwen3-27b", "inst\twith\ntabs", 78), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), (int)N_HOSTILE + 2);
    for (i = 0; i < N_HOSTILE; i++) {
        at = rsd_attr_set_find(&set, HOSTILE_IDS[i], "");
        CHECK_EQ_INT(at, (int)i); /* file order = insertion order */
        if (at >= 0) {
            CHECK_EQ_INT(set.items[at].loaded_at_ms, 1000 + i);
            CHECK_EQ_INT(set.items[at].pid, (long long)getpid());
        }
    }
    CHECK(rsd_attr_set_find(&set, "qwen3-27b", "inst\twith\ntabs") == (int)N_HOSTILE + 1);
    CHECK(rsd_attr_set_find(&set, "qwen3-27b", NULL) == (int)N_HOSTILE);
    CHECK_EQ_INT(rsd_attr_set_find(&set, "qwen3-27b", ""), RSD_ERR_NOT_FOUND);
    /* re-adding refreshes in place */
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "tab\there", "", 5), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), (int)N_HOSTILE + 2);
    CHECK_EQ_INT(set.items[1].loaded_at_ms, 5);
    /* the file is one line per entry: escaped ids never break a line */
    {
        FILE *f;
        int lines = 0, c;
        attr_path(tmp, KEY, p, sizeof p);
        f = fopen(p, "rb");
        REQUIRE(f);
        while ((c = fgetc(f)) != EOF) lines += c == '\n';
        fclose(f);
        CHECK_EQ_INT(lines, (int)N_HOSTILE + 2 + 2);
    }
    /* removal */
    CHECK_EQ_INT(rsd_state_attr_remove_sync(st, KEY, "qwen3-27b", "qwen3-27b:2"), 1);
    CHECK_EQ_INT(rsd_state_attr_remove_sync(st, KEY, "qwen3-27b", "qwen3-27b:2"), 0);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "qwen3-27b", "", 1), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_remove_sync(st, KEY, "qwen3-27b", NULL), 2); /* mark + instance */
    CHECK_EQ_INT(rsd_state_attr_remove_sync(st, KEY, "line\nbreak", ""), 1);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), (int)N_HOSTILE - 1);
    CHECK_EQ_INT(rsd_attr_set_find(&set, "line\nbreak", NULL), RSD_ERR_NOT_FOUND);
    /* other targets are separate files */
    CHECK_EQ_INT(rsd_state_attr_load(st, "http://127.0.0.1:9999", &set), 0);
    /* bad arguments */
    memset(longid, 'm', sizeof longid);
    longid[RSD_STATE_MAX_ID_BYTES + 1] = '\0';
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, longid, NULL, 0), RSD_ERR_ARG);
    longid[RSD_STATE_MAX_ID_BYTES] = '\0';
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, longid, longid, 0), RSD_OK); /* exactly the limit */
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "", NULL, 0), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, "", "m", NULL, 0), RSD_ERR_ARG);
    CHECK_EQ_INT(lc.total, 0);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

/* desc.attr_fsync (opt-in) writes the same files the default (no fsync) path writes, and
   neither leaves a temp file behind. */
static void test_attr_fsync_optin(void) {
    char tmp[64], p[512], t[520];
    rsd_state *a = NULL, *b = NULL;
    rsd_state_desc d;
    static rsd_attr_set set;
    ATTR_SET_UP(set);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    memset(&d, 0, sizeof d);
    d.dir = tmp;
    REQUIRE((a = rsd_state_create(&d, NULL)) != NULL);
    d.attr_fsync = true;
    REQUIRE((b = rsd_state_create(&d, NULL)) != NULL);
    CHECK_EQ_INT(rsd_state_attr_add_sync(a, KEY, "plain", NULL, 1), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_add_sync(b, KEY, "synced", NULL, 2), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(a, KEY, &set), 2);
    CHECK(rsd_attr_set_find(&set, "plain", NULL) == 0 && rsd_attr_set_find(&set, "synced", NULL) == 1);
    CHECK_EQ_INT(rsd_state_attr_remove_sync(b, KEY, "plain", NULL), 1);
    CHECK_EQ_INT(rsd_state_attr_load(b, KEY, &set), 1);
    attr_path(tmp, KEY, p, sizeof p);
    snprintf(t, sizeof t, "%s.tmp", p);
    CHECK(access(p, F_OK) == 0);
    CHECK(access(t, F_OK) != 0);
    rsd_state_destroy(a);
    rsd_state_destroy(b);
    rm_rf(tmp);
}

static void test_attr_capacity(void) {
    char tmp[64], id[32];
    logcap lc;
    rsd_state *st;
    static rsd_attr_set set;
    int i;
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    for (i = 0; i < RSD_STATE_MAX_ATTR; i++) {
        snprintf(id, sizeof id, "m%d", i);
        CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, id, NULL, (uint64_t)i), RSD_OK);
    }
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "one-too-many", NULL, 0), RSD_ERR_CAPACITY);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ATTR_FULL], 1);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "m3", NULL, 9), RSD_OK); /* refresh still fits */
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), RSD_STATE_MAX_ATTR);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

static void test_attr_corrupt(void) {
    char tmp[64], p[512], img[4096], target[512];
    logcap lc;
    rsd_state *st;
    static rsd_attr_set set;
    size_t n, cut;
    FILE *f;
    int bad = 0;
    static const char *const broken[] = {
        "", "garbage", "residency-attr 2\nend 0\n", "residency-attr 1\n",
        "residency-attr 1\nend 1\n", "residency-attr 1\nm\t\t1\t2\nend 0\n",
        "residency-attr 1\nm\t\t1\nend 1\n", "residency-attr 1\nm\t\tx\t2\nend 1\n",
        "residency-attr 1\n\t\t1\t2\nend 1\n", "residency-attr 1\nm\\q\t\t1\t2\nend 1\n",
        "residency-attr 1\nm\\x0\t\t1\t2\nend 1\n", "residency-attr 1\nm\\x00\t\t1\t2\nend 1\n",
        "residency-attr 1\nm\t\t1\t2\nm\t\t3\t4\nend 2\n", "residency-attr 1\nend 0\nextra",
        "residency-attr 1\nm\t\t99999999999999999999\t2\nend 1\n",
        "residency-attr 1\nm\t\t1\t9223372036854775808\nend 1\n",
        "residency-attr 1\nraw\x01ctl\t\t1\t2\nend 1\n", "residency-attr 1\nm\t\t1\t2\t3\nend 1\n"};
    size_t i;
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    attr_path(tmp, KEY, p, sizeof p);
    for (i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        write_file(p, broken[i], strlen(broken[i]));
        lc.items[RSD_LOGITEM_ATTR_CORRUPT] = 0;
        CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
        CHECK(set.corrupt);
        if (lc.items[RSD_LOGITEM_ATTR_CORRUPT] != 1) printf("  not flagged: case %d\n", (int)i);
        CHECK_EQ_INT(lc.items[RSD_LOGITEM_ATTR_CORRUPT], 1);
    }
    /* a valid file, then every truncated prefix of it: all read as empty + corrupt */
    unlink(p);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "a\tb", NULL, 1), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "c", "inst", 2), RSD_OK);
    f = fopen(p, "rb");
    REQUIRE(f);
    n = fread(img, 1, sizeof img, f);
    fclose(f);
    for (cut = 0; cut < n; cut++) {
        write_file(p, img, cut);
        if (rsd_state_attr_load(st, KEY, &set) != 0 || !set.corrupt) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    write_file(p, img, n);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 2);
    CHECK(!set.corrupt);
    /* an add over a corrupt file starts from empty and repairs it */
    write_file(p, "\0\0\0junk", 7);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "fresh", NULL, 3), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 1);
    CHECK_EQ_STR(set.items[0].model, "fresh");
    /* oversize file */
    {
        static char big[RSD_STATE_MAX_FILE_BYTES + 10];
        memset(big, 'x', sizeof big);
        write_file(p, big, sizeof big);
        CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
        CHECK(set.corrupt);
    }
    /* a symlink or a directory in place of the file is never followed or read */
    unlink(p);
#if !defined(_WIN32) /* symlinks need a privilege on Windows */
    snprintf(target, sizeof target, "%s/elsewhere", tmp);
    write_file(target, img, n);
    REQUIRE(symlink(target, p) == 0);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), RSD_ERR_STATE_IO);
    CHECK(lc.items[RSD_LOGITEM_ATTR_READ_FAILED] >= 1);
    unlink(p);
#else
    (void)target;
#endif
    REQUIRE(tp_mkdir(p) == 0);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), RSD_ERR_STATE_IO);
    CHECK(rsd_state_attr_add_sync(st, KEY, "x", NULL, 0) < 0);
    rmdir(p);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

enum { CONC_PROCS = 4, CONC_EACH = 12 };

/* The attribution-file lock as a step: a second acquisition never blocks (PENDING with a
   wake 1 ms, 2 ms ... later, on the caller's clock), gives up at its deadline with
   RSD_ERR_TIMEOUT even when the target lock is fail-open, and a held one commits several
   changes and the generation bump in one update. */
static void test_attr_lock_step_and_commit(void) {
    char tmp[64];
    logcap lc;
    rsd_state *st;
    rsd_state_lock a, b;
    static rsd_attr_set set;
    rsd_attr_change ch[3];
    uint64_t g = 0, now;
    int r = RSD_PENDING, steps = 0;
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    CHECK_EQ_INT(rsd_state_attr_lock_begin(st, &a, KEY, 1000, 0), RSD_OK);
    CHECK_EQ_INT(lock_step(st, &a, 1000), RSD_OK);
    CHECK(rsd_state_lock_held(&a));
    CHECK_EQ_INT(rsd_state_attr_lock_begin(st, &b, KEY, 1000, 1100), RSD_OK);
    for (now = 1000; r == RSD_PENDING && steps < 1000; steps++) {
        r = lock_step(st, &b, now);
        if (r == RSD_PENDING) {
            CHECK(b.wake_ms > now && b.wake_ms <= now + RSD_STATE_ATTR_RETRY_MAX_MS);
            now = b.wake_ms;
        }
    }
    CHECK_EQ_INT(r, RSD_ERR_TIMEOUT); /* fail-closed although the desc is fail-open */
    CHECK_EQ_INT(b.state, RSD_LOCK_FAILED);
    CHECK_EQ_INT(now, 1100);
    CHECK(b.attempts >= 6);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ATTR_LOCK_TIMEOUT], 1);
    CHECK(strstr(rsd_state_last_error(st), "busy") != NULL);
    CHECK_EQ_INT(rsd_state_attr_commit(st, &b, NULL, 0, 0, &g), RSD_ERR_STATE); /* not held */
    rsd_state_unlock(st, &b);
    /* the holder commits: two adds and a remove, one generation bump */
    rsd_state_unlock(st, &a);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "old", NULL, 1), RSD_OK);
    memset(&a, 0, sizeof a);
    CHECK_EQ_INT(rsd_state_attr_lock_begin(st, &a, KEY, 2000, 0), RSD_OK);
    CHECK_EQ_INT(lock_step(st, &a, 2000), RSD_OK);
    ch[0].model = "m";   ch[0].instance = NULL;   ch[0].remove = false;
    ch[1].model = "k";   ch[1].instance = "k:2";  ch[1].remove = false;
    ch[2].model = "old"; ch[2].instance = NULL;   ch[2].remove = true;
    CHECK_EQ_INT(rsd_state_attr_commit(st, &a, ch, 3, 77, &g), RSD_OK);
    CHECK_EQ_INT(g, 1);
    rsd_state_unlock(st, &a);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 2);
    CHECK(rsd_attr_set_find(&set, "m", "") >= 0 && rsd_attr_set_find(&set, "k", "k:2") >= 0);
    CHECK(rsd_attr_set_find(&set, "old", NULL) < 0);
    CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 1);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

#if !defined(_WIN32) /* fork, RLIMIT_FSIZE */
/* A write that fails for real (RLIMIT_FSIZE 0 in a child: EFBIG, as on a full disk) is
   reported: RSD_ERR_STATE_IO from the commit, what failed in rsd_state_last_error, the
   old file intact, no temp file left behind. */
static void test_attr_commit_write_fails(void) {
    char tmp[64], p[512];
    logcap lc;
    rsd_state *st;
    pid_t pid;
    static rsd_attr_set set;
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "before", NULL, 1), RSD_OK);
    fflush(stdout);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        struct rlimit rl;
        rsd_state_lock lk;
        rsd_attr_change c;
        uint64_t g = 9;
        int r;
        rl.rlim_cur = rl.rlim_max = 0;
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(10);
        memset(&lk, 0, sizeof lk);
        if (rsd_state_attr_lock_begin(st, &lk, KEY, 0, 0) != RSD_OK || lock_step(st, &lk, 0) != RSD_OK) _exit(11);
        c.model = "after";
        c.instance = NULL;
        c.remove = false;
        r = rsd_state_attr_commit(st, &lk, &c, 1, 2, &g);
        rsd_state_unlock(st, &lk);
        if (r != RSD_ERR_STATE_IO) _exit(12);
        if (g != 0) _exit(13);
        if (!strstr(rsd_state_last_error(st), "File too large")) _exit(14);
        _exit(0);
    }
    CHECK_EQ_INT(reap(pid), 0);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 1);
    CHECK(rsd_attr_set_find(&set, "before", NULL) >= 0);
    attr_path(tmp, KEY, p, sizeof p);
    strcat(p, ".tmp");
    CHECK(access(p, F_OK) != 0);
    rsd_state_destroy(st);
    rm_rf(tmp);
}
#endif

/* A corrupt attribution file is reset by the read that finds it (moved aside to
   .attr.corrupt), so it is reported once: the next read finds a valid, empty record.
   While a writer holds the file lock the reader leaves it to the writer. */
static void test_attr_corrupt_reset_once(void) {
    char tmp[64], p[512], aside[600];
    logcap lc;
    rsd_state *st;
    rsd_state_lock lk;
    static rsd_attr_set set;
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    memset(&lk, 0, sizeof lk);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    attr_path(tmp, KEY, p, sizeof p);
    snprintf(aside, sizeof aside, "%s.corrupt", p);
    write_file(p, "garbage", 7);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
    CHECK(set.corrupt && set.reset);
    CHECK(access(aside, F_OK) == 0);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ATTR_CORRUPT], 1);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
    CHECK(!set.corrupt && !set.reset); /* said once */
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ATTR_CORRUPT], 1);
    /* a writer holds the file lock: not reset by the reader */
    write_file(p, "garbage", 7);
    CHECK_EQ_INT(rsd_state_attr_lock_begin(st, &lk, KEY, 0, 0), RSD_OK);
    CHECK_EQ_INT(lock_step(st, &lk, 0), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
    CHECK(set.corrupt && !set.reset);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
    CHECK(set.corrupt && set.reset);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
    CHECK(!set.corrupt);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

#if !defined(_WIN32) /* fork */
static void test_attr_concurrent(void) {
    char tmp[64], id[64];
    logcap lc;
    rsd_state *st;
    static rsd_attr_set set;
    int go[2], i, j, missing = 0;
    pid_t pids[CONC_PROCS];
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    REQUIRE(pipe(go) == 0);
    for (i = 0; i < CONC_PROCS; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(go[1]);
            (void)rd(go[0]); /* barrier: EOF when the parent closes its end */
            for (j = 0; j < CONC_EACH; j++) {
                snprintf(id, sizeof id, "proc%d\tmodel%d", i, j);
                if (rsd_state_attr_add_sync(st, KEY, id, NULL, (uint64_t)j) != RSD_OK) _exit(5);
            }
            _exit(0);
        }
        REQUIRE(pids[i] > 0);
    }
    close(go[0]);
    close(go[1]); /* release all children at once */
    for (i = 0; i < CONC_PROCS; i++) CHECK_EQ_INT(reap(pids[i]), 0);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), CONC_PROCS * CONC_EACH);
    for (i = 0; i < CONC_PROCS; i++)
        for (j = 0; j < CONC_EACH; j++) {
            snprintf(id, sizeof id, "proc%d\tmodel%d", i, j);
            if (rsd_attr_set_find(&set, id, "") < 0) missing++;
        }
    CHECK_EQ_INT(missing, 0);
    rsd_state_destroy(st);
    rm_rf(tmp);
}
#endif

#if !defined(_WIN32) /* fork */
static void test_generation(void) {
    char tmp[64], p[512], name[RSD_STATE_MAX_NAME_BYTES];
    logcap lc;
    rsd_state *st;
    uint64_t g = 99;
    int i, go[2];
    pid_t pids[CONC_PROCS];
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 0);
    CHECK_EQ_INT(rsd_state_gen_bump_sync(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 1);
    CHECK_EQ_INT(rsd_state_gen_bump_sync(st, KEY, NULL), RSD_OK);
    CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 2);
    CHECK_EQ_INT(rsd_state_gen_read(st, "http://127.0.0.1:1", &g), RSD_OK);
    CHECK_EQ_INT(g, 0);
    /* concurrent bumps from 4 processes are all counted */
    REQUIRE(pipe(go) == 0);
    for (i = 0; i < CONC_PROCS; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            int j;
            close(go[1]);
            (void)rd(go[0]);
            for (j = 0; j < 10; j++)
                if (rsd_state_gen_bump_sync(st, KEY, NULL) != RSD_OK) _exit(6);
            _exit(0);
        }
        REQUIRE(pids[i] > 0);
    }
    close(go[0]);
    close(go[1]);
    for (i = 0; i < CONC_PROCS; i++) CHECK_EQ_INT(reap(pids[i]), 0);
    CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 2 + CONC_PROCS * 10);
    /* corrupt: read fails (a cache must not trust it); a bump restarts far above. A file
       written by hand moves no change counter, so st keeps what it read last; another
       state object (as another process) reads the file. */
    REQUIRE(rsd_state_file_name(KEY, name, sizeof name) > 0);
    snprintf(p, sizeof p, "%s/attr/%s.gen", tmp, name);
    write_file(p, "12x\n", 4);
    {
        rsd_state *st2 = open_state(tmp, &lc, 0, false);
        REQUIRE(st2 != NULL);
        CHECK_EQ_INT(rsd_state_gen_read(st2, KEY, &g), RSD_ERR_STATE_IO);
        rsd_state_destroy(st2);
    }
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ATTR_CORRUPT], 1);
    CHECK_EQ_INT(rsd_state_gen_bump_sync(st, KEY, &g), RSD_OK);
    CHECK(g > 1600000000000ull);
    CHECK_EQ_INT(rsd_state_gen_read(st, "", &g), RSD_ERR_ARG);
    rsd_state_destroy(st);
    rm_rf(tmp);
}
#endif

#if !defined(_WIN32) /* fork */
/* The change counter: a reader that read a generation keeps it without opening the file
   until a bump anywhere in the directory (another process, its own rsd_state) moves the
   counter; then it reads the file again and sees the new value. */
static void test_generation_counter(void) {
    char tmp[64], p[512], name[RSD_STATE_MAX_NAME_BYTES];
    logcap lc;
    rsd_state *st;
    uint64_t g = 0;
    pid_t pid;
    int round;
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    snprintf(p, sizeof p, "%s/attr/gen.seq", tmp);
    CHECK(access(p, F_OK) == 0);
    CHECK_EQ_INT(rsd_state_gen_bump_sync(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 1);
    for (round = 0; round < 3; round++) {
        /* another process, its own state object (its own mapping), bumps */
        pid = fork();
        if (pid == 0) {
            rsd_state *o = open_state(tmp, NULL, 0, false);
            uint64_t x = 0;
            _exit(o && rsd_state_gen_bump_sync(o, KEY, &x) == RSD_OK && x == (uint64_t)round + 2 ? 0 : 7);
        }
        REQUIRE(pid > 0);
        CHECK_EQ_INT(reap(pid), 0);
        CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
        CHECK_EQ_INT(g, round + 2);
        CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK); /* the kept value */
        CHECK_EQ_INT(g, round + 2);
    }
    /* a bump on another key moves the counter too: this key is read again, unchanged */
    CHECK_EQ_INT(rsd_state_gen_bump_sync(st, "http://127.0.0.1:1", NULL), RSD_OK);
    CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 4);
    /* what a hand edit changed is seen once the counter moves */
    REQUIRE(rsd_state_file_name(KEY, name, sizeof name) > 0);
    snprintf(p, sizeof p, "%s/attr/%s.gen", tmp, name);
    write_file(p, "40\n", 3);
    CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 4);
    CHECK_EQ_INT(rsd_state_gen_bump_sync(st, "http://127.0.0.1:1", NULL), RSD_OK);
    CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    CHECK_EQ_INT(g, 40);
    rsd_state_destroy(st);
    rm_rf(tmp);
}
#endif

static void test_no_fd_leak(void) {
    char tmp[64], p[512];
    logcap lc;
    rsd_state *st;
    rsd_state_lock lk, lk2;
    rsd_lock_owner o;
    static rsd_attr_set set;
    int before, r;
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    memset(&lk, 0, sizeof lk);
    memset(&lk2, 0, sizeof lk2);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    before = count_fds();
    if (before < 0) { /* GetProcessHandleCount under wine */
        printf("skip: test_no_fd_leak: this system does not tell how many handles are open\n");
        rm_rf(tmp);
        return;
    }
    REQUIRE((st = open_state(tmp, &lc, 50, false)) != NULL);
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk, KEY, "a"), RSD_OK);
    CHECK_EQ_INT(rsd_state_lock_try(st, &lk2, KEY, "b"), RSD_PENDING);
    CHECK_EQ_INT(rsd_state_lock_owner(st, KEY, &o), RSD_OK);
    /* a wait that expires (fail-open) and one abandoned half-way */
    CHECK_EQ_INT(rsd_state_lock_begin(st, &lk2, KEY, "b", 0, 0), RSD_OK);
    while ((r = lock_step(st, &lk2, lk2.wake_ms)) == RSD_PENDING) {}
    CHECK_EQ_INT(r, RSD_OK);
    rsd_state_unlock(st, &lk2);
    CHECK_EQ_INT(rsd_state_lock_begin(st, &lk2, KEY, "b", 0, 0), RSD_OK);
    CHECK_EQ_INT(lock_step(st, &lk2, 0), RSD_PENDING);
    rsd_state_unlock(st, &lk2);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(rsd_state_lock_sync(st, &lk, KEY, "c", 0), RSD_OK);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "m", NULL, 1), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "m", "i", 1), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_remove_sync(st, KEY, "m", NULL), 2);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
    attr_path(tmp, KEY, p, sizeof p);
    write_file(p, "broken", 6);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 0);
    CHECK_EQ_INT(rsd_state_attr_remove_sync(st, KEY, "m", NULL), 0);
    CHECK_EQ_INT(rsd_state_gen_bump_sync(st, KEY, NULL), RSD_OK);
    {
        uint64_t g;
        CHECK_EQ_INT(rsd_state_gen_read(st, KEY, &g), RSD_OK);
    }
    rsd_state_destroy(st);
    CHECK_EQ_INT(count_fds(), before);
    rm_rf(tmp);
}

/* Appends (model, instance) to s through the library's own put. */
static void put_attr(rsd_attr_set *s, const char *model, const char *inst, uint64_t at, int64_t pid) {
    REQUIRE(s->count < RSD_STATE_MAX_ATTR && rsdi_attr_set_put(s, s->count, model, inst, at, pid));
    s->count++;
}

/* The same entries (ids and numbers) and flags. */
static int same_set(const rsd_attr_set *x, const rsd_attr_set *y) {
    return x->corrupt == y->corrupt && x->reset == y->reset && x->over == y->over && attr_items_same(x, y);
}

/* The largest valid record into s: RSD_STATE_MAX_ATTR entries, both ids of the longest
   length, every byte one that is written escaped. */
static void largest_set(rsd_attr_set *s, uint64_t step) {
    char model[RSD_STATE_MAX_ID_BYTES + 1], inst[RSD_STATE_MAX_ID_BYTES + 1];
    size_t i;
    (void)rsd_attr_set_init(s, s->arena, s->arena_bytes);
    memset(model, 1, RSD_STATE_MAX_ID_BYTES);
    memset(inst, 2, RSD_STATE_MAX_ID_BYTES);
    model[RSD_STATE_MAX_ID_BYTES] = inst[RSD_STATE_MAX_ID_BYTES] = '\0';
    for (i = 0; i < RSD_STATE_MAX_ATTR; i++) {
        model[0] = (char)(0x20 + (i % 90));
        model[1] = (char)(0x20 + (i / 90));
        put_attr(s, model, inst, UINT64_MAX - step * i, INT64_MAX);
    }
}

static void test_format_parse_internal(void) {
    static rsd_attr_set a, b;
    static char buf[RSD_STATE_MAX_FILE_BYTES + 1];
    size_t i;
    int n, n2;
    ATTR_SET_UP(a); ATTR_SET_UP(b);
    for (i = 0; i < N_HOSTILE; i++)
        put_attr(&a, HOSTILE_IDS[i], HOSTILE_IDS[N_HOSTILE - 1 - i], UINT64_MAX - i, INT64_MAX - (int64_t)i);
    n = rsdi_attr_format(&a, buf, sizeof buf);
    REQUIRE(n > 0);
    CHECK_EQ_INT(rsdi_attr_parse(buf, (size_t)n, &b), RSD_OK);
    CHECK_EQ_INT(b.count, a.count);
    CHECK(same_set(&a, &b));
    /* worst case: every byte of both ids escaped as \xHH, full set -> fits the limit (a set
       over RSD_STATE_ATTR_ARENA_MAX bytes holds it) */
    largest_set(&a, 0);
    CHECK_EQ_INT(a.arena_used, RSD_STATE_ATTR_ARENA_MAX);
    n2 = rsdi_attr_format(&a, buf, RSD_STATE_MAX_FILE_BYTES);
    CHECK(n2 > 0);
    CHECK_EQ_INT(rsdi_attr_parse(buf, (size_t)(n2 > 0 ? n2 : 0), &b), RSD_OK);
    CHECK(same_set(&a, &b));
}

/* The whole file at path into buf (cap bytes): its length, or -1. */
static long slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n;
    if (!f) return -1;
    n = fread(buf, 1, cap, f);
    fclose(f);
    return (long)n;
}

/* 64 entries with both ids 255 bytes long round-trip through the files when the desc asks
   for the room (attr_arena_bytes = RSD_STATE_ATTR_ARENA_MAX). With the default arena the
   same record is reported (RSD_ERR_TOO_LARGE naming attr_arena_bytes, the set empty and
   marked over), never read in part, and never written back shorter: an add, a remove, a
   commit and a last use on it fail and leave the file as it was. */
static void test_attr_over_the_arena_is_reported_and_kept(void) {
    static rsd_attr_set set;
    static char before[RSD_STATE_MAX_FILE_BYTES], after[RSD_STATE_MAX_FILE_BYTES];
    static char small_ids[RSD_STATE_ATTR_ARENA_DEFAULT];
    rsd_attr_set small;
    char tmp[64], p[512], aside[600], model[RSD_STATE_MAX_ID_BYTES + 1], inst[RSD_STATE_MAX_ID_BYTES + 1];
    logcap lc;
    rsd_state_desc d;
    rsd_state *big = NULL, *st;
    rsd_state_lock lk;
    rsd_attr_change ch;
    long n0, n1;
    int i;
    ATTR_SET_UP(set);
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    memset(&d, 0, sizeof d);
    d.dir = tmp;
    d.attr_arena_bytes = RSD_STATE_ATTR_ARENA_MAX;
    REQUIRE((big = rsd_state_create(&d, NULL)) != NULL);
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL); /* the default arena */
    memset(model, 'm', RSD_STATE_MAX_ID_BYTES);
    memset(inst, 'i', RSD_STATE_MAX_ID_BYTES);
    model[RSD_STATE_MAX_ID_BYTES] = inst[RSD_STATE_MAX_ID_BYTES] = '\0';
    for (i = 0; i < RSD_STATE_MAX_ATTR; i++) {
        model[0] = inst[0] = (char)('A' + i % 26);
        model[1] = inst[1] = (char)('a' + i / 26);
        CHECK_EQ_INT(rsd_state_attr_add_sync(big, KEY, model, inst, 1000 + (uint64_t)i), RSD_OK);
    }
    CHECK_EQ_INT(rsd_state_attr_load(big, KEY, &set), RSD_STATE_MAX_ATTR);
    CHECK_EQ_INT(set.arena_used, RSD_STATE_ATTR_ARENA_MAX);
    for (i = 0; i < RSD_STATE_MAX_ATTR; i++) {
        model[0] = inst[0] = (char)('A' + i % 26);
        model[1] = inst[1] = (char)('a' + i / 26);
        CHECK(rsd_attr_set_find(&set, model, inst) == i);
        CHECK_EQ_INT(set.items[i].loaded_at_ms, 1000 + i);
    }
    attr_path(tmp, KEY, p, sizeof p);
    snprintf(aside, sizeof aside, "%s.corrupt", p);
    n0 = slurp(p, before, sizeof before);
    REQUIRE(n0 > 0);
    /* the default arena: reported, not read in part, not corrupt */
    CHECK_EQ_INT(rsd_attr_set_init(&small, small_ids, sizeof small_ids), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &small), RSD_ERR_TOO_LARGE);
    CHECK(small.over && !small.corrupt && !small.reset && small.count == 0);
    CHECK_EQ_INT(small.arena_used, RSD_STATE_ATTR_ARENA_MAX);
    CHECK(strstr(rsd_state_last_error(st), "attr_arena_bytes") != NULL);
    CHECK(lc.items[RSD_LOGITEM_ATTR_READ_FAILED] >= 1);
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ATTR_CORRUPT], 0);
    /* an update through the state's own (default) scratch set writes nothing */
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "new", NULL, 1), RSD_ERR_TOO_LARGE);
    CHECK(strstr(rsd_state_last_error(st), "attr_arena_bytes") != NULL);
    CHECK_EQ_INT(rsd_state_attr_remove_sync(st, KEY, set.items[0].model, NULL), RSD_ERR_TOO_LARGE);
    memset(&lk, 0, sizeof lk);
    REQUIRE(rsd_state_attr_lock_begin(st, &lk, KEY, 0, 0) == RSD_OK && lock_step(st, &lk, 0) == RSD_OK);
    ch.model = "new";
    ch.instance = NULL;
    ch.remove = false;
    CHECK_EQ_INT(rsd_state_attr_commit(st, &lk, &ch, 1, 5, NULL), RSD_ERR_TOO_LARGE);
    rsd_state_unlock(st, &lk);
    n1 = slurp(p, after, sizeof after);
    CHECK(n1 == n0 && memcmp(before, after, (size_t)n0) == 0);
    CHECK(slurp(aside, after, sizeof after) < 0); /* never moved aside */
    CHECK_EQ_INT(lc.items[RSD_LOGITEM_ATTR_CORRUPT], 0);
    CHECK_EQ_INT(rsd_state_attr_load(big, KEY, &set), RSD_STATE_MAX_ATTR); /* all still there */
    /* the last uses: 64 models of 255 bytes need 16 KiB */
    for (i = 0; i < RSD_STATE_MAX_ATTR; i++) {
        model[0] = (char)('A' + i % 26);
        model[1] = (char)('a' + i / 26);
        CHECK_EQ_INT(rsd_state_used_touch_sync(big, KEY, model, 1000 + (uint64_t)i), RSD_OK);
    }
    CHECK_EQ_INT(rsd_state_used_load(big, KEY, &set), RSD_STATE_MAX_ATTR);
    p[strlen(p) - 5] = '\0';
    strcat(p, ".used");
    n0 = slurp(p, before, sizeof before);
    CHECK_EQ_INT(rsd_state_used_touch_sync(st, KEY, "x", 99999), RSD_ERR_TOO_LARGE);
    CHECK_EQ_INT(rsd_state_used_load(st, KEY, &small), RSD_ERR_TOO_LARGE);
    n1 = slurp(p, after, sizeof after);
    CHECK(n0 > 0 && n1 == n0 && memcmp(before, after, (size_t)n0) == 0);
    /* over the arena and cut short: corrupt, as a whole read finds it */
    write_file(p, before, (size_t)n0 - 3);
    CHECK_EQ_INT(rsd_state_used_load(st, KEY, &small), 0);
    CHECK(small.corrupt && !small.over);
    rsd_state_destroy(st);
    rsd_state_destroy(big);
    rm_rf(tmp);
}

/* One update that removes and adds within a full arena: the ids the remove left behind are
   compacted away, so the add finds the room the file will have. */
static void test_attr_arena_compacts_within_an_update(void) {
    static rsd_attr_set set;
    char tmp[64], a[200], b[200], c[200];
    rsd_state_desc d;
    rsd_state *st = NULL;
    rsd_state_lock lk;
    rsd_attr_change ch[2];
    ATTR_SET_UP(set);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    memset(a, 'a', 199);
    memset(b, 'b', 199);
    memset(c, 'c', 199);
    a[199] = b[199] = c[199] = '\0';
    memset(&d, 0, sizeof d);
    d.dir = tmp;
    d.attr_arena_bytes = 400; /* two 199-byte models exactly */
    REQUIRE((st = rsd_state_create(&d, NULL)) != NULL);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, a, NULL, 1), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, b, NULL, 2), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, c, NULL, 3), RSD_ERR_CAPACITY);
    memset(&lk, 0, sizeof lk);
    REQUIRE(rsd_state_attr_lock_begin(st, &lk, KEY, 0, 0) == RSD_OK && lock_step(st, &lk, 0) == RSD_OK);
    ch[0].model = a;
    ch[0].instance = NULL;
    ch[0].remove = true;
    ch[1].model = c;
    ch[1].instance = NULL;
    ch[1].remove = false;
    CHECK_EQ_INT(rsd_state_attr_commit(st, &lk, ch, 2, 4, NULL), RSD_OK);
    rsd_state_unlock(st, &lk);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &set), 2);
    CHECK(rsd_attr_set_find(&set, b, "") == 0 && rsd_attr_set_find(&set, c, "") == 1);
    CHECK(rsd_attr_set_find(&set, a, NULL) < 0);
    CHECK_EQ_INT(set.items[1].loaded_at_ms, 4);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

/* A set that rsd_attr_set_init did not set up is refused, not filled through a stray arena. */
static void test_attr_set_needs_init(void) {
    static rsd_attr_set zeroed, dst;
    char tmp[64], ids[16];
    logcap lc;
    rsd_state *st;
    memset(&lc, 0, sizeof lc);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, &lc, 0, false)) != NULL);
    CHECK_EQ_INT(rsd_state_attr_add_sync(st, KEY, "m", NULL, 1), RSD_OK);
    memset(&zeroed, 0, sizeof zeroed);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &zeroed), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_state_used_load(st, KEY, &zeroed), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_attr_set_find(&zeroed, "m", NULL), RSD_ERR_NOT_FOUND);
    CHECK_EQ_INT(rsd_attr_set_init(NULL, ids, sizeof ids), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_attr_set_init(&dst, NULL, 4), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_attr_set_init(&dst, NULL, 0), RSD_OK); /* no room: a record with ids is too large */
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &dst), RSD_ERR_TOO_LARGE);
    CHECK_EQ_INT(rsd_attr_set_init(&dst, ids, sizeof ids), RSD_OK);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &zeroed), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_attr_set_copy(&zeroed, &dst), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_state_attr_load(st, KEY, &dst), 1);
    CHECK_EQ_INT(rsd_attr_set_init(&zeroed, ids + 2, 2), RSD_OK);
    CHECK_EQ_INT(rsd_attr_set_copy(&zeroed, &dst), RSD_OK); /* "m" and its NUL */
    CHECK(strcmp(zeroed.items[0].model, "m") == 0 && zeroed.items[0].model != dst.items[0].model);
    CHECK_EQ_INT(rsd_attr_set_init(&zeroed, ids + 2, 1), RSD_OK);
    CHECK_EQ_INT(rsd_attr_set_copy(&zeroed, &dst), RSD_ERR_TOO_LARGE);
    CHECK(zeroed.over && zeroed.count == 0 && zeroed.arena_used == 2);
    CHECK_EQ_INT(rsd_attr_set_copy(&dst, &zeroed), RSD_ERR_TOO_LARGE); /* a copy of one that did not fit */
    CHECK(dst.over && dst.count == 0 && dst.arena_used == 2);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

/* Record files are read and written a chunk (RSDI_ATTR_CHUNK) at a time: for every image
   -- the largest valid one, cut anywhere, with bytes after the trailer, a line longer than
   the chunk, a file over RSD_STATE_MAX_FILE_BYTES -- a read gives what rsdi_attr_parse
   gives on the whole image (and a write gives rsdi_attr_format's bytes). */
static void check_chunked_read(rsd_state *st, const char *path, const char *img, size_t n) {
    static rsd_attr_set a, b;
    int want;
    ATTR_SET_UP(a); ATTR_SET_UP(b);
    write_file(path, img, n);
    want = n > RSD_STATE_MAX_FILE_BYTES ? RSD_ERR_TOO_LARGE : rsdi_attr_parse(img, n, &b);
    CHECK_EQ_INT(rsdi_attr_read(st, path, &a), RSD_OK);
    CHECK_EQ_INT(a.corrupt, want < 0);
    if (want == RSD_OK) CHECK(same_set(&a, &b));
    else CHECK(strstr(rsd_state_last_error(st), rsd_result_str(want)) != NULL);
    if (a.corrupt != (want < 0) || (want < 0 && !strstr(rsd_state_last_error(st), rsd_result_str(want))))
        printf("  at %lu bytes: want %s, detail '%s'\n", (unsigned long)n, rsd_result_str(want),
               rsd_state_last_error(st));
}

static void test_chunked_read_matches_whole_parse(void) {
    static rsd_attr_set set, back;
    static char img[RSD_STATE_MAX_FILE_BYTES + 8192], file[RSD_STATE_MAX_FILE_BYTES + 8192];
    char tmp[64], path[300];
    rsd_state *st;
    size_t n, cut;
    int k;
    ATTR_SET_UP(set); ATTR_SET_UP(back);
    REQUIRE(make_tmp(tmp, sizeof tmp));
    REQUIRE((st = open_state(tmp, NULL, 0, false)) != NULL);
    snprintf(path, sizeof path, "%s/x.attr", tmp);
    largest_set(&set, 1); /* the largest valid record: every id byte escaped */
    k = rsdi_attr_format(&set, img, sizeof img);
    REQUIRE(k > RSDI_ATTR_CHUNK * 4);
    n = (size_t)k;
    /* the write: rsdi_attr_format's bytes, through the chunk */
    CHECK_EQ_INT(rsdi_attr_write(st, path, &set), RSD_OK);
    {
        FILE *f = fopen(path, "rb");
        size_t got = f ? fread(file, 1, sizeof file, f) : 0;
        if (f) fclose(f);
        CHECK_EQ_INT(got, n);
        CHECK(memcmp(file, img, n) == 0);
    }
    CHECK_EQ_INT(rsdi_attr_read(st, path, &back), RSD_OK);
    CHECK(!back.corrupt && same_set(&back, &set));
    check_chunked_read(st, path, img, n);
    for (cut = 0; cut < n; cut += cut < 40 ? 1 : 811) check_chunked_read(st, path, img, cut);
    for (cut = RSDI_ATTR_CHUNK - 3; cut <= RSDI_ATTR_CHUNK + 3; cut++) check_chunked_read(st, path, img, cut);
    check_chunked_read(st, path, img, n - 1);
    memcpy(file, img, n); /* bytes after the trailer */
    file[n] = '\n';
    check_chunked_read(st, path, file, n + 1);
    file[n] = 'x';
    check_chunked_read(st, path, file, n + 1);
    /* a line longer than the chunk, ended and not ended */
    memcpy(file, img, 17);
    memset(file + 17, 'a', RSDI_ATTR_CHUNK + 100);
    check_chunked_read(st, path, file, 17 + RSDI_ATTR_CHUNK + 100);
    file[17 + RSDI_ATTR_CHUNK + 100] = '\n';
    memcpy(file + 18 + RSDI_ATTR_CHUNK + 100, "end 0\n", 6);
    check_chunked_read(st, path, file, 24 + RSDI_ATTR_CHUNK + 100);
    /* over the limit: a valid record padded past it, and garbage past it */
    memcpy(file, img, n);
    memset(file + n, ' ', RSD_STATE_MAX_FILE_BYTES + 1 - n);
    check_chunked_read(st, path, file, RSD_STATE_MAX_FILE_BYTES + 1);
    check_chunked_read(st, path, file, RSD_STATE_MAX_FILE_BYTES + 4000);
    memset(file, 'z', RSD_STATE_MAX_FILE_BYTES + 1);
    check_chunked_read(st, path, file, RSD_STATE_MAX_FILE_BYTES + 1);
    check_chunked_read(st, path, file, RSD_STATE_MAX_FILE_BYTES);
    /* a small record: the magic only, short images */
    check_chunked_read(st, path, "residency-attr 1\nend 0\n", 23);
    check_chunked_read(st, path, "residency-attr 1\n", 17);
    check_chunked_read(st, path, "residency-attr", 14);
    check_chunked_read(st, path, "", 0);
    check_chunked_read(st, path, "residency-attr 2\nend 0\n", 23);
    rsd_state_destroy(st);
    rm_rf(tmp);
}

/* The key older versions gave "<runtime>|<url>" (rsdi_state_legacy_key; the expected
   keys were printed by rsd_target_key_normalise as it was before one target key). */
static void test_legacy_key(void) {
    static const char *const cases[][2] = {
        {"llamacpp|http://127.0.0.1:8080/v1", "llamacpp|http://127.0.0.1:8080/v1"},
        {"llamacpp|HTTP://LocalHost:80/v1/?x#y", "llamacpp|http://localhost/v1"},
        {"llamacpp|http://h:08080/", "llamacpp|http://h:08080"},
        {"llamacpp|https://H:443/", "llamacpp|https://h"},
        {"llamacpp|http://[::1]:80/v1", "llamacpp|http://[::1]/v1"},
        {"ollama|http://h:080", "ollama|http://h:080"},
        {"llamacpp|ws://h:80/v1", "llamacpp|ws://h:80/v1"},
        {"lmstudio|http://h:1234", "lmstudio|http://h:1234"},
        {"llamacpp|http://h:80/v1//", "llamacpp|http://h/v1"},
        {"llamacpp|http://a:b:80/x", "llamacpp|http://a:b:80/x"},
        {"plain/", "plain"}};
    char out[256];
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ_INT(rsdi_state_legacy_key(cases[i][0], out, sizeof out), (int)strlen(cases[i][1]));
        CHECK_EQ_STR(out, cases[i][1]);
    }
    CHECK(rsdi_state_legacy_key("llamacpp|http://h:8080/v1", out, 10) < 0); /* too small */
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(test_resolve_order);
    RUN(test_open_unresolved);
    RUN(test_dir_created_0700);
#if !defined(_WIN32)
    RUN(test_dir_unsafe);
#endif
    RUN(test_open_allocator);
    RUN(test_file_names);
    RUN(test_lock_take_release);
#if !defined(_WIN32)
    RUN(test_lock_holder_exit_releases);
#endif
#if !defined(_WIN32)
    RUN(test_lock_blocking_wait);
#endif
#if !defined(_WIN32)
    RUN(test_lock_deadline_fake_clock);
#endif
    RUN(test_lock_open_error_policy);
    RUN(test_lock_hook);
    RUN(test_attr_roundtrip);
    RUN(test_attr_fsync_optin);
    RUN(test_attr_capacity);
    RUN(test_attr_corrupt);
    RUN(test_attr_corrupt_reset_once);
    RUN(test_attr_lock_step_and_commit);
#if !defined(_WIN32)
    RUN(test_attr_commit_write_fails);
#endif
#if !defined(_WIN32)
    RUN(test_attr_concurrent);
#endif
#if !defined(_WIN32)
    RUN(test_generation);
    RUN(test_generation_counter);
#endif
    RUN(test_no_fd_leak);
    RUN(test_format_parse_internal);
    RUN(test_attr_over_the_arena_is_reported_and_kept);
    RUN(test_attr_arena_compacts_within_an_update);
    RUN(test_attr_set_needs_init);
    RUN(test_chunked_read_matches_whole_parse);
    RUN(test_legacy_key);
#if defined(_WIN32)
    printf("skip: test_dir_unsafe (POSIX modes, owners, symlinks); test_lock_holder_exit_releases, "
           "test_lock_blocking_wait, test_lock_deadline_fake_clock, test_attr_commit_write_fails, "
           "test_attr_concurrent, test_generation (a second process by fork(): none on Windows)\n");
#endif
    return RSD_TEST_END();
}
