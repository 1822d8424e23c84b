/* minimal.c -- make a model resident with the blocking call.
   usage: minimal [URL] [MODEL]   (defaults: http://127.0.0.1:8080 default) */
#define RESIDENCY_IMPLEMENTATION
#include "residency_http.h"  /* -I the directory that holds it (-I. here) */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    rsd_ensurer *e = rsd_ensurer_create(NULL);          /* zeroed desc = defaults */
    rsd_ensure_req q;
    rsd_ensure_result res;
    int i;
    memset(&q, 0, sizeof q);
    q.url = argc > 1 ? argv[1] : "http://127.0.0.1:8080";
    q.model = argc > 2 ? argv[2] : "default";
    rsd_ensurer_sync(e, &q, &res);                            /* blocks until done */
    for (i = 0; i < res.n_notices; i++) printf("%s\n", res.notices[i].text);
    printf("%s: %s %s\n", rsd_outcome_str(res.outcome), q.model, res.message);
    rsd_ensurer_destroy(e);
    return res.outcome == RSD_OUTCOME_RESIDENT ? 0 : 1;
}
