/* The core's implementation, built once for every test that includes only residency.h and
   uses only the public API (see the Makefile and tests/impl.sh). */
#define RESIDENCY_IMPLEMENTATION
#include "../residency.h"
