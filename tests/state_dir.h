/* state_dir.h -- a fresh state directory for one test program (test helper, not part of
   the library): make_state_dir("name") makes /tmp/rsd-test-name.XXXXXX into g_state_dir,
   remove_state_dir() removes it again (only a directory it made). */
#ifndef RSD_TEST_STATE_DIR_H
#define RSD_TEST_STATE_DIR_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_state_dir[256];

static void make_state_dir(const char *name) {
    char tmpl[200];
    const char *d;
    snprintf(tmpl, sizeof tmpl, "/tmp/rsd-test-%s.XXXXXX", name);
    d = mkdtemp(tmpl);
    snprintf(g_state_dir, sizeof g_state_dir, "%s", d ? d : "");
}

static void remove_state_dir(void) {
    char cmd[300];
    if (!g_state_dir[0] || strncmp(g_state_dir, "/tmp/rsd-test-", 14) != 0 || strchr(g_state_dir, '\'')) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_state_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_state_dir);
}
#endif
