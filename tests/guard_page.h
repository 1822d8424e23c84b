/* guard_page.h -- test helper (not part of the library): memory that ends at a page
   which faults when touched, so a parser's over-read crashes the test. */
#ifndef RSDT_GUARD_PAGE_H
#define RSDT_GUARD_PAGE_H
#include <stddef.h>
/* rsdt_guard(readable_pages, &page): readable_pages whole pages followed by a page that
   faults when touched (mmap + PROT_NONE; VirtualAlloc + PAGE_NOACCESS on Windows),
   made once by each caller and kept for the program's life; *page = the page size.
   NULL when the system refuses. */
#if defined(_WIN32)
#include <windows.h>
static unsigned char *rsdt_guard(size_t readable_pages, size_t *page) {
    SYSTEM_INFO si;
    unsigned char *m;
    DWORD old;
    GetSystemInfo(&si);
    *page = (size_t)si.dwPageSize;
    m = (unsigned char *)VirtualAlloc(NULL, (readable_pages + 1) * *page, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (!m) return NULL;
    if (!VirtualProtect(m + readable_pages * *page, *page, PAGE_NOACCESS, &old)) return NULL;
    return m;
}
#else
#include <sys/mman.h>
#include <unistd.h>
static unsigned char *rsdt_guard(size_t readable_pages, size_t *page) {
    unsigned char *m;
    *page = (size_t)sysconf(_SC_PAGESIZE);
    m = (unsigned char *)mmap(NULL, (readable_pages + 1) * *page, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == (unsigned char *)MAP_FAILED) return NULL;
    if (mprotect(m + readable_pages * *page, *page, PROT_NONE) != 0) return NULL;
    return m;
}
#endif

#endif
