/* state_dir.h -- a fresh state directory for one test program (test helper, not part of
   the library): make_state_dir("name") makes /tmp/rsd-test-name.XXXXXX (Windows: in
   %TEMP%) into g_state_dir, remove_state_dir() removes it again (only such a directory;
   portable.h). empty_state_dir() leaves the same directory empty: a main sets it as
   rsdt_before_each when its tests' records are keyed by a port the kernel may hand out
   again. */
#ifndef RSD_TEST_STATE_DIR_H
#define RSD_TEST_STATE_DIR_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

static char g_state_dir[256];

static void make_state_dir(const char *name) { (void)tp_temp_dir(name, g_state_dir, sizeof g_state_dir); }

static void remove_state_dir(void) { tp_remove_tree(g_state_dir); }

TP_FN void empty_state_dir(void) { /* not every test uses it */
    if (!g_state_dir[0]) return;
    tp_remove_tree(g_state_dir);
    (void)tp_mkdir(g_state_dir);
}
#endif
