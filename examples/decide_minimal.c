/* decide_minimal.c -- the pure reconciler without any I/O: describe what a
   llama.cpp router holds, ask what to do to make "coder" resident, print the plan.
   Build: cc -std=c99 -I. examples/decide_minimal.c -o decide_minimal */
#define RESIDENCY_IMPLEMENTATION
#include "residency.h"
#include <stdio.h>
#include <string.h>

int main(void) {
    static rsd_plan plan; /* ~11 KiB: not on a small stack */
    rsd_resident res[3];
    rsd_protected_model prot[1];
    rsd_facts f;
    char msg[512];
    int i;

    memset(res, 0, sizeof res);
    res[0].model_id = rsd_str_c("scout");        /* pinned by a server preset tag */
    res[0].tags[res[0].n_tags++] = rsd_str_c("role:scout");
    res[1].model_id = rsd_str_c("memory-small"); /* configured as the memory model */
    res[2].model_id = rsd_str_c("old-code");     /* loaded by someone else */

    prot[0].model_id = rsd_str_c("memory-small");
    prot[0].role = RSD_ROLE_MEMORY;

    memset(&f, 0, sizeof f);
    f.strategy = RSD_STRATEGY_ROUTER;
    f.optout = rsd_optout_from_env(false);       /* RESIDENCY=observe forbids changes */
    f.target_id = rsd_str_c("mini");
    f.keep = rsd_str_c("coder");
    f.residents = res;
    f.n_residents = 3;
    f.protected_models = prot;
    f.n_protected = 1;
    f.max_instances = 3;                         /* from GET /props */
    f.context_length = 262144;
    f.context_ceiling = rsd_fit_ceiling_from_env();

    if (rsd_decide(&f, &plan) < 0) return 1;
    printf("decision: %s (%s)\n", rsd_decision_str(plan.decision), rsd_reason_str(plan.reason));
    for (i = 0; i < plan.n_evict; i++)
        printf("unload:   %.*s\n", (int)res[plan.evict[i]].model_id.len, res[plan.evict[i]].model_id.ptr);
    if (plan.load_context && plan.decision != RSD_DECISION_OBSERVE)
        printf("load with context %u\n", plan.load_context);
    for (i = 0; i < plan.n_notices; i++) {
        rsd_notice_format(&f, &plan, &plan.notices[i], msg, sizeof msg);
        printf("notice %s/%s: %s\n", rsd_notice_kind_str(plan.notices[i].kind),
               rsd_notice_level_str(plan.notices[i].level), msg);
    }
    return 0;
}
