/* slot_names.h -- slot file names and what llama-server b10116 answers a save with each
   (its fs_validate_filename): test_serve_kv asks rsd-sim, test_real_kv the real router
   (which passes the save to its child). Both must match this table. Not part of the
   library. Strings are JSON text (escapes as sent). */
#ifndef RSD_TESTS_SLOT_NAMES_H
#define RSD_TESTS_SLOT_NAMES_H
static const struct slot_name_case {
    const char *name;
    int status;
} g_slot_names[] = {
    {".x.bin", 200}, {"a b.bin", 200}, {"x\\u00e9y.bin", 200}, {" a.bin", 400}, {"a.", 400},
    {"a*b", 400}, {"a|b", 400}, {"a<b", 400}, {"a?b", 400}, {"a..b", 400}, {"..", 400}, {".", 400},
    {"a:b", 400}, {"a/b", 400}, {"x\\u0001y", 400}, {"x\\u0085y", 400}, {"x\\ufeffy", 400},
    {"x\\uff0ey", 400}, {"x\\u2215y", 400}, {"x\\ufffdy", 400}, {"a\\u0000b.bin", 400}};
#endif
