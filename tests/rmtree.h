/* rmtree.h -- removes a test's temporary directory and what is in it, its
   subdirectories too (no symbolic link is followed: lstat). Not part of the library.
   Needs <dirent.h> <stdio.h> <string.h> <sys/stat.h> <unistd.h>. */
#ifndef RSD_TESTS_RMTREE_H
#define RSD_TESTS_RMTREE_H
#include <dirent.h>
#include <sys/stat.h>

#if defined(__GNUC__) || defined(__clang__)
__attribute__((unused))
#endif
static void rmtree(const char *dir) {
    DIR *d;
    struct dirent *e;
    char p[1200];
    if (!dir || !dir[0] || (d = opendir(dir)) == NULL) return;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rmtree(p);
        else (void)unlink(p);
    }
    closedir(d);
    (void)rmdir(dir);
}
#endif
