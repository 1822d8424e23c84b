/* Both implementations, built once for every test that includes residency_http.h and uses
   only the public API (see the Makefile and tests/impl.sh). */
#define RESIDENCY_IMPLEMENTATION
#include "../residency_http.h"
