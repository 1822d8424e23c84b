/* RSD_STATIC in two TUs linked together: no duplicate symbols. */
#define RSD_STATIC
#define RESIDENCY_IMPLEMENTATION
#include "../../residency_http.h"
int rsdt_static_b(void);
int main(void) { return (rsd_result_str(RSD_OK)[0] == 'o' && rsdt_static_b()) ? 0 : 1; }
