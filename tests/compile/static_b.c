#define RSD_STATIC
#define RESIDENCY_IMPLEMENTATION
#include "../../residency_http.h"
int rsdt_static_b(void);
int rsdt_static_b(void) { return rsd_result_str(RSD_ERR_ARG)[0] == 'i'; }
