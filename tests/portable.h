/* portable.h -- what the loopback tests need from the OS, for POSIX and for Windows
   (make test-windows runs them under wine). Test helper, not part of the library.
   Include after residency_http.h (on Windows: winsock2.h and windows.h, which the
   implementation brings and which a test linked with it includes here).
       tp_temp_dir(name, out, cap)   a new directory /tmp/rsd-test-NAME.XXXXXX
                                     (Windows: %TEMP%\rsd-test-NAME.PID.N); 0 or -1
       tp_remove_tree(dir)           removes a directory tp_temp_dir made, recursively
       tp_exe(name)                  build/bin/NAME (Windows: build/win/bin/NAME.exe,
                                     where tests/windows.sh builds the programs)
       tp_runnable(path)             the program exists (and is executable on POSIX)
       tp_exe_cmd(name)              tp_exe for a popen() command line (Windows: cmd.exe
                                     wants backslashes)
       TP_DEVNULL                    "/dev/null" (Windows: "NUL"), for a command line
       tp_pclose_code(st)            a popen'ed program's exit code from pclose's status
       tp_count_dir(path)            entries of a directory but those starting with '.';
                                     -1 when it cannot be read (Windows: 0 when absent)
       tp_find_in_dir(dir, suffix, out, cap)  the path of the first entry whose name ends
                                     with suffix (not starting with '.'); 0 or -1
       tp_open_handles()             descriptors open in this process (Windows: handles),
                                     for leak checks; -1 when unknown (wine: always), so
                                     a leak check compares -1 with -1 there
       tp_no_children()              no child process of ours, alive or zombie (Windows:
                                     there are no zombies; true)
       tp_sock_close(fd)             close a socket from socket()
       tp_net_init()                 Windows: WSAStartup for the test's own sockets
       tp_setenv(name, value)        set (value NULL: remove) a variable of ours
       tp_mkdir(path)                a directory of our own (0700 on POSIX); 0 or -1
   With TP_POSIX_SOCKET_NAMES defined first, a test written against POSIX sockets builds
   on Windows as it is: socket, accept, connect, send, recv, read, write, close, poll,
   shutdown and setsockopt on a socket become Winsock calls (through the library's own
   wrappers where it has them, so errno is set as on POSIX). Only for tests whose
   read/write/close are on sockets alone. */
#ifndef RSD_TESTS_PORTABLE_H
#define RSD_TESTS_PORTABLE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <io.h>
#include <direct.h>
#else
#include <dirent.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#endif
#if defined(__GNUC__) || defined(__clang__)
#define TP_FN static __attribute__((unused))
#else
#define TP_FN static
#endif

TP_FN int tp_temp_dir(const char *name, char *out, size_t cap) {
#if defined(_WIN32)
    char tmp[MAX_PATH];
    DWORD n = GetTempPathA((DWORD)sizeof tmp, tmp);
    unsigned k;
    if (n == 0 || n >= sizeof tmp) return -1;
    for (k = 0; k < 1000; k++) {
        snprintf(out, cap, "%srsd-test-%s.%lu.%u", tmp, name, (unsigned long)GetCurrentProcessId(), k);
        if (CreateDirectoryA(out, NULL)) return 0;
        if (GetLastError() != ERROR_ALREADY_EXISTS) break;
    }
    out[0] = '\0';
    return -1;
#else
    char tmpl[200];
    const char *d;
    snprintf(tmpl, sizeof tmpl, "/tmp/rsd-test-%s.XXXXXX", name);
    d = mkdtemp(tmpl);
    snprintf(out, cap, "%s", d ? d : "");
    return d ? 0 : -1;
#endif
}

TP_FN void tp_remove_tree(const char *dir) {
    char cmd[600];
    if (!dir[0] || !strstr(dir, "rsd-test-") || strchr(dir, '\'') || strchr(dir, '"')) return;
#if defined(_WIN32)
    snprintf(cmd, sizeof cmd, "rmdir /s /q \"%s\"", dir);
#else
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
#endif
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

TP_FN const char *tp_exe(const char *name) {
    static char paths[8][256];
    static int k;
    char *p = paths[k++ % 8];
#if defined(_WIN32)
    snprintf(p, 256, "build/win/bin/%s.exe", name);
#else
    snprintf(p, 256, "build/bin/%s", name);
#endif
    return p;
}

TP_FN const char *tp_exe_cmd(const char *name) {
    char *p = (char *)tp_exe(name);
#if defined(_WIN32)
    char *c;
    for (c = p; *c; c++)
        if (*c == '/') *c = '\\';
#endif
    return p;
}

#if defined(_WIN32)
#define TP_DEVNULL "NUL"
#define tp_pclose_code(st) (st)
#else
#define TP_DEVNULL "/dev/null"
#define tp_pclose_code(st) (WIFEXITED(st) ? WEXITSTATUS(st) : -1)
#endif

TP_FN bool tp_runnable(const char *path) {
#if defined(_WIN32)
    return _access(path, 0) == 0;
#else
    return access(path, X_OK) == 0;
#endif
}

TP_FN int tp_count_dir(const char *path) {
#if defined(_WIN32)
    char pat[600];
    WIN32_FIND_DATAA fd;
    HANDLE h;
    int n = 0;
    snprintf(pat, sizeof pat, "%s\\*", path);
    h = FindFirstFileA(pat, &fd);
    if (h == INVALID_HANDLE_VALUE) return GetLastError() == ERROR_FILE_NOT_FOUND ? 0 : -1;
    do
        if (fd.cFileName[0] != '.') n++;
    while (FindNextFileA(h, &fd));
    FindClose(h);
    return n;
#else
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
#endif
}

TP_FN int tp_find_in_dir(const char *dir, const char *suffix, char *out, size_t cap) {
    size_t sl = strlen(suffix), n;
    int found = -1;
#if defined(_WIN32)
    char pat[MAX_PATH];
    WIN32_FIND_DATAA fd;
    HANDLE h;
    snprintf(pat, sizeof pat, "%s\\*", dir);
    h = FindFirstFileA(pat, &fd);
    if (h == INVALID_HANDLE_VALUE) return -1;
    do {
        n = strlen(fd.cFileName);
        if (found < 0 && fd.cFileName[0] != '.' && n >= sl && !strcmp(fd.cFileName + n - sl, suffix) &&
            (size_t)snprintf(out, cap, "%s\\%s", dir, fd.cFileName) < cap)
            found = 0;
    } while (FindNextFileA(h, &fd));
    FindClose(h);
#else
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) {
        n = strlen(e->d_name);
        if (found < 0 && e->d_name[0] != '.' && n >= sl && !strcmp(e->d_name + n - sl, suffix) &&
            (size_t)snprintf(out, cap, "%s/%s", dir, e->d_name) < cap)
            found = 0;
    }
    closedir(d);
#endif
    return found;
}

TP_FN int tp_open_handles(void) {
#if defined(_WIN32)
    DWORD n = 0; /* wine answers 0: unknown (a live process always holds handles) */
    return GetProcessHandleCount(GetCurrentProcess(), &n) && n > 0 ? (int)n : -1;
#else
    int n = tp_count_dir("/proc/self/fd");
    return n < 0 ? -1 : n - 1; /* the DIR's own descriptor */
#endif
}

TP_FN bool tp_no_children(void) {
#if defined(_WIN32)
    return true;
#else
    int st;
    return waitpid(-1, &st, WNOHANG) == -1 && errno == ECHILD;
#endif
}

TP_FN void tp_setenv(const char *name, const char *value) {
#if defined(_WIN32)
    char buf[1024];
    snprintf(buf, sizeof buf, "%s=%s", name, value ? value : "");
    (void)_putenv(buf); /* "NAME=" removes it */
    (void)SetEnvironmentVariableA(name, value);
#else
    if (value) (void)setenv(name, value, 1);
    else (void)unsetenv(name);
#endif
}

TP_FN int tp_mkdir(const char *path) {
#if defined(_WIN32)
    return _mkdir(path);
#else
    return mkdir(path, 0700);
#endif
}

TP_FN void tp_net_init(void) {
#if defined(_WIN32)
    WSADATA wd;
    (void)WSAStartup(MAKEWORD(2, 2), &wd);
#endif
}

TP_FN void tp_sock_close(int fd) {
#if defined(_WIN32)
    (void)closesocket((SOCKET)fd);
#else
    (void)close(fd);
#endif
}

#if defined(_WIN32) && defined(TP_POSIX_SOCKET_NAMES)
typedef unsigned long nfds_t;
#define MSG_NOSIGNAL 0
#define SHUT_WR SD_SEND
#define socket(a, b, c) ((int)socket((a), (b), (c)))
#define accept(l, a, b) ((int)accept((SOCKET)(l), (a), (b)))
#define connect(fd, a, l) connect((SOCKET)(fd), (a), (l))
#define bind(fd, a, l) bind((SOCKET)(fd), (a), (l))
#define listen(fd, n) listen((SOCKET)(fd), (n))
#define getsockname(fd, a, l) getsockname((SOCKET)(fd), (a), (l))
#define shutdown(fd, h) shutdown((SOCKET)(fd), (h))
#define setsockopt(fd, l, o, v, n) setsockopt((SOCKET)(fd), (l), (o), (const char *)(const void *)(v), (n))
#define send(fd, b, n, f) rsdi_sock_send((fd), (const char *)(const void *)(b), (size_t)(n))
#define recv(fd, b, n, f) rsdi_sock_recv((fd), (char *)(void *)(b), (size_t)(n), (f))
#define read(fd, b, n) rsdi_sock_recv((fd), (char *)(void *)(b), (size_t)(n), 0)
#define write(fd, b, n) rsdi_sock_send((fd), (const char *)(const void *)(b), (size_t)(n))
#define close(fd) rsdi_sock_close(fd)
#define poll(p, n, t) WSAPoll((p), (ULONG)(n), (t))
#endif
#endif
