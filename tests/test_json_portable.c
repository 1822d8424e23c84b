/* The JSON tests again with the portable scanning paths (no SSE2, no SWAR byte index),
   as a compiler without GNU builtins would build them. */
#define RSDI_JSON_PORTABLE 1
#include "test_json.c"
