/* The implementation TU, compiled as C99, C11 and (renamed) C++11. */
#define RESIDENCY_IMPLEMENTATION
#include "../../residency_http.h"
int rsdt_decl_only(void);
int main(void) { return rsdt_decl_only() ? 0 : 1; }
