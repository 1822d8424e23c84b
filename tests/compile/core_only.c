/* residency.h alone, with the implementation: must not need the HTTP header. */
#define RESIDENCY_IMPLEMENTATION
#define RSD_NO_ERROR_STRINGS
#include "../../residency.h"
int main(void) {
#ifndef RSD_NO_GGUF
    rsd_gguf_estimate est;
    if (rsd_gguf_estimate_start(NULL, NULL, &est) != RSD_ERR_ARG) return 1;
#endif
    return rsd_result_str(RSD_OK)[0] == 'O' ? 0 : 1;
}
