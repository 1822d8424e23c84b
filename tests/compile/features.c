/* The feature macros (RSD_NO_OLLAMA, RSD_NO_HTTP_SERVER, RSD_NO_PROC), given on the command
   line in every combination by tests/compile.sh: the implementation builds, links and what
   is compiled out says so. */
#define RESIDENCY_IMPLEMENTATION
#include "../../residency_http.h"
int main(void) {
    rsd_ensurer *e = rsd_ensurer_create(NULL);
    int bad = !e || !rsd_runtime_router();
#ifdef RSD_NO_OLLAMA
    bad |= rsd_runtime_ollama() != NULL;
#else
    bad |= rsd_runtime_ollama() == NULL;
#endif
    rsd_ensurer_destroy(e);
    return bad;
}
