/* attr_set.h -- attribution sets for tests (test helper, not part of the library; include
   it after residency_http.h). A set reads into the arena it is set up over: these give it
   RSD_STATE_ATTR_ARENA_MAX bytes, which hold any valid record.
     static rsd_attr_set set;  ATTR_SET_UP(set);      a static set, its arena static too
     rsd_attr_set *s = new_attr_set();  ... free(s);    a heap set, one block with its arena
     attr_items_same(x, y)                             1 when both hold the same entries (ids
                                                       and numbers, in order), else 0 */
#ifndef RSD_TEST_ATTR_SET_H
#define RSD_TEST_ATTR_SET_H
#include <stdlib.h>
#include <string.h>

#define ATTR_SET_UP(s) do { \
    static char s##_ids_[RSD_STATE_ATTR_ARENA_MAX]; \
    (void)rsd_attr_set_init(&(s), s##_ids_, sizeof s##_ids_); \
} while (0)

static inline rsd_attr_set *new_attr_set(void) {
    rsd_attr_set *s = (rsd_attr_set *)calloc(1, sizeof *s + RSD_STATE_ATTR_ARENA_MAX);
    if (s) (void)rsd_attr_set_init(s, (char *)(s + 1), RSD_STATE_ATTR_ARENA_MAX);
    return s;
}

static inline int attr_items_same(const rsd_attr_set *x, const rsd_attr_set *y) {
    size_t i;
    if (x->count != y->count) return 0;
    for (i = 0; i < x->count; i++) {
        const rsd_attr *p = &x->items[i], *q = &y->items[i];
        if (strcmp(p->model, q->model) != 0 || strcmp(p->instance, q->instance) != 0 ||
            p->loaded_at_ms != q->loaded_at_ms || p->pid != q->pid)
            return 0;
    }
    return 1;
}
#endif
