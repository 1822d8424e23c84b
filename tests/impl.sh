# Which implementation a test is built with (the Makefile, tests/cross.sh and
# tests/windows.sh all ask here). "own": the test defines RESIDENCY_IMPLEMENTATION itself,
# or includes a test that does (it reads the internals, or sets a configuration macro),
# and builds it in its own TU. Else the test uses only the public API and is linked with
# the implementation built once: "http" (tests/impl_http.c) when it includes
# residency_http.h, else "core" (tests/impl_core.c).
impl_of() {
  if grep -q -e '^#define RESIDENCY_IMPLEMENTATION' -e '^#include "test_.*\.c"' "$1"; then echo own
  elif grep -q 'residency_http\.h' "$1"; then echo http
  else echo core; fi
}
