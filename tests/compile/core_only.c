/* residency.h alone, with the implementation: must not need the HTTP header. */
#define RESIDENCY_IMPLEMENTATION
#define RSD_NO_ERROR_STRINGS
#include "../../residency.h"
int main(void) { return rsd_result_str(RSD_OK)[0] == 'O' ? 0 : 1; }
