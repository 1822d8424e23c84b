/* Declarations only: no implementation, must compile and link with impl_a.c. */
#include "../../residency_http.h"
int rsdt_decl_only(void);
int rsdt_decl_only(void) { return rsd_result_str(RSD_OK) != 0; }
