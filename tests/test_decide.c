/* The pure reconciler: decision (R21-R33), opt-outs (R34-R35), context-fit clamp
   (S29-S30), decision cache (W2-W4, W9). Tests named upstream_* port the cases of
   upstream-behaviour.md 6.1 (clio residency.test.ts) and 6.9 (resident-models). */
/* The public API only: linked with the implementation built once (tests/impl.sh); the
   feature macros are the ones the implementation sets. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#include "../residency.h"
#include "rsd_test.h"

/* ---- helpers --------------------------------------------------------------- */
static rsd_resident res_of(const char *id) {
    rsd_resident r;
    memset(&r, 0, sizeof r);
    r.model_id = rsd_str_c(id);
    return r;
}
static void tag(rsd_resident *r, const char *t) { r->tags[r->n_tags++] = rsd_str_c(t); }
static void alias(rsd_resident *r, const char *a) { r->aliases[r->n_aliases++] = rsd_str_c(a); }

static void facts_of(rsd_facts *f, const char *keep, rsd_strategy s, const rsd_resident *res, int n,
                     uint32_t max_instances) {
    memset(f, 0, sizeof *f);
    f->strategy = s;
    f->target_id = rsd_str_c("mini");
    f->runtime_id = rsd_str_c("llamacpp");
    f->keep = rsd_str_c(keep);
    f->residents = res;
    f->n_residents = n;
    f->max_instances = max_instances;
}

static char idbuf[8][RSD_MODEL_ID_MAX];
/* Model id of plan list entry k ("" when out of range). */
static const char *id_at(const rsd_facts *f, const int16_t *list, int n, int k) {
    static int slot;
    const rsd_str *s;
    char *b = idbuf[slot++ & 7];
    if (k < 0 || k >= n) return "";
    s = &f->residents[list[k]].model_id;
    memcpy(b, s->ptr, s->len);
    b[s->len] = '\0';
    return b;
}
#define EVICT(f, p, k) id_at(f, (p)->evict, (p)->n_evict, k)
#define FALLBACK(f, p, k) id_at(f, (p)->fallback, (p)->n_fallback, k)

static char msgbuf[2048];
static const char *msg_of(const rsd_facts *f, const rsd_plan *p, int k) {
    msgbuf[0] = '\0';
    if (k < 0) k += p->n_notices;
    if (k < 0 || k >= p->n_notices) return "";
    if (rsd_notice_format(f, p, &p->notices[k], msgbuf, sizeof msgbuf) < 0) return "";
    return msgbuf;
}
static const rsd_notice *last_notice(const rsd_plan *p) {
    return p->n_notices ? &p->notices[p->n_notices - 1] : NULL;
}

static rsd_plan plan; /* ~12 KiB: static, not on the test's stack */
static rsd_plan plan2;

/* ---- 6.1 decision (pure) ----------------------------------------------------- */
static void upstream_co_hosts_within_known_capacity(void) {
    rsd_resident r[1];
    rsd_facts f;
    r[0] = res_of("scout");
    tag(&r[0], "role:scout");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 1, 2);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD);
    CHECK_EQ_INT(plan.reason, RSD_REASON_FREE_SLOT);
    CHECK_EQ_INT(plan.n_evict, 0);
    REQUIRE(plan.n_notices >= 1);
    CHECK_EQ_INT(plan.notices[0].kind, RSD_NOTICE_CO_RESIDENT);
    CHECK_EQ_INT(plan.notices[0].level, RSD_LEVEL_INFO);
    CHECK_EQ_INT(plan.notices[0].resident_count, 2);
    CHECK_EQ_INT(plan.notices[0].max_instances, 2);
    CHECK_EQ_STR(msg_of(&f, &plan, 0), "loading 'coder' alongside scout on 'mini' (2/2 instances).");
}

static void upstream_keep_resident_never_evicts_co_residents(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("coder");
    r[1] = res_of("other");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 2, 0);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(plan.reason, RSD_REASON_KEEP_RESIDENT);
    CHECK(plan.keep_resident);
    CHECK_EQ_INT(plan.keep_index, 0);
    CHECK_EQ_INT(plan.n_evict, 0);
    CHECK_EQ_INT(plan.n_fallback, 0);
    REQUIRE(plan.n_notices == 1);
    CHECK_EQ_INT(plan.notices[0].kind, RSD_NOTICE_CO_RESIDENT);
    CHECK_EQ_INT(plan.notices[0].detail, RSD_DETAIL_RESIDENT_COUNT);
    CHECK(strstr(msg_of(&f, &plan, 0), "'mini' serves 'coder' alongside other.") != NULL);
}

static void upstream_capacity_full_eviction_chooses_non_protected(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("scout");
    tag(&r[0], "role:scout");
    r[1] = res_of("old-code");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 2, 2);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_UNPROTECTED);
    CHECK_EQ_INT(plan.slots_needed, 1);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "old-code");
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_SWAP);
    CHECK_EQ_INT(last_notice(&plan)->msg, RSD_MSG_EVICT_FOREIGN);
    CHECK(strstr(msg_of(&f, &plan, -1),
                 "swapping resident 'old-code' (no last use is known: first by id) for requested 'coder'") != NULL);
    CHECK_EQ_INT(plan.cls[plan.evict[0]].victim_rule, RSD_VICTIM_BY_ID);
}

static rsd_protected_model prot[8];

static void upstream_capacity_full_falls_back_to_config_protected(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("scout");
    tag(&r[0], "role:scout");
    r[1] = res_of("configured-coder");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 2, 2);
    prot[0].model_id = rsd_str_c("configured-coder");
    prot[0].role = RSD_ROLE_NONE;
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_CONFIG);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "configured-coder");
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_SWAP);
    CHECK_EQ_INT(last_notice(&plan)->level, RSD_LEVEL_WARNING);
    /* detail exactly {swappedOut, configProtected: true} */
    CHECK_EQ_INT(last_notice(&plan)->detail, RSD_DETAIL_SWAPPED_OUT | RSD_DETAIL_CONFIG_PROTECTED);
    CHECK(last_notice(&plan)->config_protected);
    CHECK_EQ_INT(last_notice(&plan)->subject, 1);
}

static void upstream_declines_when_every_slot_holds_a_tag_pinned_model(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("scout");
    tag(&r[0], "role:scout");
    r[1] = res_of("pinned");
    tag(&r[1], "pinned:true");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 2, 2);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_DECLINE);
    CHECK_EQ_INT(plan.reason, RSD_REASON_DECLINE_ALL_PINNED);
    CHECK_EQ_INT(plan.n_evict, 0);
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_WILL_NOT_FIT);
    CHECK_EQ_INT(last_notice(&plan)->level, RSD_LEVEL_ERROR);
    CHECK_EQ_INT(last_notice(&plan)->detail, RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES);
    CHECK(strstr(msg_of(&f, &plan, -1), "all 2 instance slots hold pinned models (pinned, scout)") != NULL);
}

static void upstream_never_evicts_config_protected_for_pinned_keep(void) {
    rsd_resident r[1];
    rsd_facts f;
    r[0] = res_of("Nemo-3.5-Lightning");
    facts_of(&f, "scout-2", RSD_STRATEGY_ROUTER, r, 1, 1);
    f.keep_tags[f.n_keep_tags++] = rsd_str_c("pinned:true");
    prot[0].model_id = rsd_str_c("Nemo-3.5-Lightning");
    prot[0].role = RSD_ROLE_WORKER;
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_DECLINE);
    CHECK_EQ_INT(plan.reason, RSD_REASON_DECLINE_PINNED_KEEP);
    CHECK_EQ_INT(plan.n_evict, 0);
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_WILL_NOT_FIT);
    CHECK(last_notice(&plan)->config_protected);
    CHECK(last_notice(&plan)->detail & RSD_DETAIL_CONFIG_PROTECTED);
    CHECK(last_notice(&plan)->detail & RSD_DETAIL_ROLE);
    CHECK_EQ_INT(last_notice(&plan)->role, RSD_ROLE_WORKER);
    CHECK(strstr(msg_of(&f, &plan, -1), "'Nemo-3.5-Lightning' (a worker model)") != NULL);
    /* the same via keep_pinned instead of tags */
    f.n_keep_tags = 0;
    f.keep_pinned = true;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_DECLINE_PINNED_KEEP);
}

static void upstream_tag_pinned_keep_may_take_an_unprotected_slot(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("configured");
    r[1] = res_of("scratch");
    r[1].loaded_by_us = true;
    facts_of(&f, "scout-2", RSD_STRATEGY_ROUTER, r, 2, 2);
    f.keep_pinned = true;
    prot[0].model_id = rsd_str_c("configured");
    prot[0].role = RSD_ROLE_CHAT;
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "scratch");
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_ABOUT_TO_EVICT);
}

static void upstream_router_without_capacity_swaps_only_unprotected(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = res_of("scout");
    tag(&r[0], "role:scout");
    r[1] = res_of("old-code");
    r[2] = res_of("configured");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 3, 0);
    prot[0].model_id = rsd_str_c("configured");
    prot[0].role = RSD_ROLE_NONE;
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "old-code");
}

static void upstream_jit_evicts_nothing_and_ranks_fallback_unprotected_first(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("configured-orch");
    r[1] = res_of("operator-model");
    facts_of(&f, "coder", RSD_STRATEGY_JIT, r, 2, 0);
    prot[0].model_id = rsd_str_c("configured-orch");
    prot[0].role = RSD_ROLE_CHAT;
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD);
    CHECK_EQ_INT(plan.reason, RSD_REASON_JIT_LOAD);
    CHECK_EQ_INT(plan.n_evict, 0);
    REQUIRE(plan.n_fallback == 2);
    CHECK_EQ_STR(FALLBACK(&f, &plan, 0), "operator-model");
    CHECK_EQ_STR(FALLBACK(&f, &plan, 1), "configured-orch");
    CHECK_EQ_INT(plan.n_notices, 0); /* fallback entries get no notices */
    /* a pinned keep never gets a configured model in its fallback (R26) */
    f.keep_pinned = true;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_fallback == 1);
    CHECK_EQ_STR(FALLBACK(&f, &plan, 0), "operator-model");
}

static void upstream_scheduler_releases_only_own_unprotected_stragglers(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = res_of("clio-straggler");
    r[0].loaded_by_us = true;
    r[0].has_size_vram = true;
    r[0].size_vram_bytes = 5u << 20;
    r[1] = res_of("operator-model");
    r[2] = res_of("configured");
    r[2].loaded_by_us = true;
    facts_of(&f, "coder", RSD_STRATEGY_SCHEDULER, r, 3, 0);
    prot[0].model_id = rsd_str_c("configured");
    prot[0].role = RSD_ROLE_NONE;
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(plan.reason, RSD_REASON_SCHEDULER_RELEASE_OURS);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "clio-straggler");
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_ABOUT_TO_EVICT);
    CHECK_EQ_INT(last_notice(&plan)->detail, RSD_DETAIL_FREED_VRAM_BYTES);
    CHECK(last_notice(&plan)->freed_vram_bytes == (5u << 20));
    /* nothing of ours left: load only */
    r[0].loaded_by_us = false;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD);
    CHECK_EQ_INT(plan.reason, RSD_REASON_SCHEDULER_LOAD);
    CHECK_EQ_INT(plan.n_evict, 0);
}

static void upstream_observe_only_opt_out_never_evicts_and_still_reports(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("old-code");
    r[0].loaded_by_us = true;
    r[1] = res_of("other");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 2, 2);
    f.context_length = 262144;
    f.model_max_context = 131072;
    f.optout = RSD_OPTOUT_ENV;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_OBSERVE);
    CHECK_EQ_INT(plan.reason, RSD_REASON_OBSERVE_ENV);
    CHECK_EQ_INT(plan.would, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(plan.n_evict, 0);
    CHECK_EQ_INT(plan.n_fallback, 0);
    CHECK(!plan.keep_resident);
    REQUIRE(plan.n_notices >= 2);
    CHECK_EQ_INT(plan.notices[0].kind, RSD_NOTICE_STRESS);
    CHECK(!plan.notices[0].observe_only);
    CHECK_EQ_INT(plan.notices[1].kind, RSD_NOTICE_ABOUT_TO_EVICT);
    CHECK(plan.notices[1].observe_only);
    CHECK(strncmp(msg_of(&f, &plan, 1), "observe-only, nothing done: evicting", 36) == 0);
}

static void upstream_stress_notices(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = res_of("coder");
    r[1] = res_of("split");
    r[1].has_size_vram = r[1].has_size = true;
    r[1].size_vram_bytes = (uint64_t)12 << 30;
    r[1].size_bytes = (uint64_t)20 << 30;
    r[2] = res_of("third");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 3, 2);
    f.context_length = 262144;
    f.model_max_context = 131072;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_ALREADY_RESIDENT);
    REQUIRE(plan.n_notices == 3);
    CHECK_EQ_INT(plan.notices[0].kind, RSD_NOTICE_STRESS);
    CHECK_EQ_INT(plan.notices[1].kind, RSD_NOTICE_STRESS);
    CHECK_EQ_INT(plan.notices[2].kind, RSD_NOTICE_STRESS);
    CHECK_EQ_INT(plan.notices[0].detail, RSD_DETAIL_REQUESTED_CONTEXT | RSD_DETAIL_MODEL_MAX_CONTEXT);
    CHECK_EQ_INT(plan.notices[0].requested_context, 262144);
    CHECK_EQ_INT(plan.notices[0].model_max_context, 131072);
    CHECK_EQ_INT(plan.notices[1].detail, RSD_DETAIL_RESIDENT_VRAM_BYTES | RSD_DETAIL_RESIDENT_TOTAL_BYTES);
    CHECK(plan.notices[1].resident_vram_bytes == (uint64_t)12 << 30);
    CHECK(plan.notices[1].resident_total_bytes == (uint64_t)20 << 30);
    CHECK_EQ_INT(plan.notices[2].detail, RSD_DETAIL_RESIDENT_COUNT | RSD_DETAIL_MAX_INSTANCES);
    CHECK_EQ_INT(plan.notices[2].resident_count, 3);
    CHECK_EQ_INT(plan.notices[2].max_instances, 2);
    CHECK_EQ_STR(msg_of(&f, &plan, 0), "context length 262144 exceeds coder's 131072-token limit on 'mini'; "
                                        "lower the context window to avoid a truncated or split load.");
    CHECK(strstr(msg_of(&f, &plan, 1), "(12.0 GiB of 20.0 GiB on GPU)") != NULL);
    CHECK(strstr(msg_of(&f, &plan, 2), "'mini' holds 3 models (split, third alongside 'coder') above its "
                                       "2-instance capacity") != NULL);
}

/* Driver case 14, pure part: the provider's ids protect residents. */
static void upstream_classifies_configured_models_as_protected(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("orchestrator-coder");
    r[1] = res_of("operator-model");
    facts_of(&f, "coder", RSD_STRATEGY_JIT, r, 2, 0);
    prot[0].model_id = rsd_str_c("  orchestrator-coder ");
    prot[0].role = RSD_ROLE_NONE;
    prot[1].model_id = rsd_str_c("   ");
    prot[1].role = RSD_ROLE_CHAT;
    f.protected_models = prot;
    f.n_protected = 2;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.n_evict, 0);
    REQUIRE(plan.n_fallback == 2);
    CHECK_EQ_STR(FALLBACK(&f, &plan, 0), "operator-model");
    CHECK_EQ_STR(FALLBACK(&f, &plan, 1), "orchestrator-coder");
    CHECK_EQ_INT(plan.cls[0].protection, RSD_PROTECT_CONFIG);
}

static void upstream_env_opt_out(void) {
    CHECK(!rsd_env_observe(NULL));
    CHECK(!rsd_env_observe(""));
    CHECK(rsd_env_observe("observe"));
    CHECK(rsd_env_observe("user-managed"));
    CHECK(!rsd_env_observe("clio-managed"));
    CHECK(!rsd_env_observe("managed"));
    CHECK(rsd_env_observe(" OFF "));
    CHECK(rsd_env_observe("0"));
    CHECK(rsd_env_observe("False"));
    CHECK(rsd_env_observe("user"));
    CHECK(!rsd_env_observe("observer"));
    CHECK(!rsd_env_observe("1"));
    CHECK_EQ_INT(rsd_optout_resolve(NULL, false), RSD_OPTOUT_NONE);
    CHECK_EQ_INT(rsd_optout_resolve("observe", false), RSD_OPTOUT_ENV);
}

static void upstream_per_target_lifecycle(void) {
    CHECK(!rsd_lifecycle_user_managed(NULL));
    CHECK(!rsd_lifecycle_user_managed("clio-managed"));
    CHECK(rsd_lifecycle_user_managed("user-managed"));
    CHECK_EQ_INT(rsd_optout_resolve(NULL, rsd_lifecycle_user_managed(NULL)), RSD_OPTOUT_NONE);
    CHECK_EQ_INT(rsd_optout_resolve(NULL, rsd_lifecycle_user_managed("clio-managed")), RSD_OPTOUT_NONE);
    CHECK_EQ_INT(rsd_optout_resolve(NULL, rsd_lifecycle_user_managed("user-managed")), RSD_OPTOUT_TARGET);
    CHECK_EQ_INT(rsd_optout_resolve("observe", rsd_lifecycle_user_managed("clio-managed")), RSD_OPTOUT_ENV);
    CHECK_EQ_INT(rsd_optout_resolve("observe", true), RSD_OPTOUT_TARGET);
}

static void upstream_collects_protected_ids_in_order(void) {
    rsd_str profiles[3], targets[3];
    rsd_role_sources src;
    rsd_protected_model out[16];
    int n;
    memset(&src, 0, sizeof src);
    src.chat = rsd_str_c(" orch ");
    src.memory = rsd_str_c(NULL);
    src.worker_default = rsd_str_c("wdef");
    profiles[0] = rsd_str_c("p1");
    profiles[1] = rsd_str_c("");
    profiles[2] = rsd_str_c("orch"); /* already claimed by chat */
    targets[0] = rsd_str_c("t1");
    targets[1] = rsd_str_c("p1");
    targets[2] = rsd_str_c("t2");
    src.worker_profiles = profiles;
    src.n_worker_profiles = 3;
    src.target_defaults = targets;
    src.n_target_defaults = 3;
    n = rsd_protected_collect(&src, out, 16);
    REQUIRE(n == 5);
    CHECK(rsd_str_eq_c(out[0].model_id, "orch"));
    CHECK(rsd_str_eq_c(out[1].model_id, "wdef"));
    CHECK(rsd_str_eq_c(out[2].model_id, "p1"));
    CHECK(rsd_str_eq_c(out[3].model_id, "t1"));
    CHECK(rsd_str_eq_c(out[4].model_id, "t2"));
    CHECK_EQ_INT(rsd_protected_collect(&src, out, 4), RSD_ERR_BUFFER);
}

static void upstream_tags_each_id_with_its_plane(void) {
    rsd_str targets[1];
    rsd_role_sources src;
    rsd_protected_model out[8];
    int n;
    memset(&src, 0, sizeof src);
    src.chat = rsd_str_c("c");
    src.memory = rsd_str_c("m");
    src.worker_default = rsd_str_c("w");
    targets[0] = rsd_str_c("t");
    src.target_defaults = targets;
    src.n_target_defaults = 1;
    n = rsd_protected_collect(&src, out, 8);
    REQUIRE(n == 4);
    CHECK_EQ_INT(out[0].role, RSD_ROLE_CHAT);
    CHECK_EQ_INT(out[1].role, RSD_ROLE_MEMORY);
    CHECK_EQ_INT(out[2].role, RSD_ROLE_WORKER);
    CHECK_EQ_INT(out[3].role, RSD_ROLE_TARGET_DEFAULT);
    CHECK_EQ_STR(rsd_role_str(out[3].role), "target-default");
}

static void upstream_names_the_role_of_an_evicted_config_model(void) {
    rsd_resident r[1];
    rsd_facts f;
    r[0] = res_of("memory-small");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 1, 1);
    prot[0].model_id = rsd_str_c("memory-small");
    prot[0].role = RSD_ROLE_MEMORY;
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "memory-small");
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_SWAP);
    CHECK(last_notice(&plan)->detail & RSD_DETAIL_ROLE);
    CHECK_EQ_INT(last_notice(&plan)->role, RSD_ROLE_MEMORY);
    CHECK(strstr(msg_of(&f, &plan, -1), "the memory model") != NULL);
}

static void upstream_still_protects_a_bare_configured_id(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("operator-model");
    r[1] = res_of("spare");
    facts_of(&f, "coder", RSD_STRATEGY_JIT, r, 2, 0);
    prot[0].model_id = rsd_str_c("operator-model");
    prot[0].role = RSD_ROLE_NONE;
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_fallback == 2);
    CHECK_EQ_STR(FALLBACK(&f, &plan, 0), "spare");
    CHECK_EQ_STR(FALLBACK(&f, &plan, 1), "operator-model");
}

/* R9: a bare entry is overridden by a later entry with a role; first role wins. */
static void role_precedence_first_known_role_wins(void) {
    rsd_resident r[1];
    rsd_facts f;
    r[0] = res_of("m");
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 1, 1);
    prot[0].model_id = rsd_str_c("m");
    prot[0].role = RSD_ROLE_NONE;
    prot[1].model_id = rsd_str_c("m");
    prot[1].role = RSD_ROLE_WORKER;
    prot[2].model_id = rsd_str_c("m");
    prot[2].role = RSD_ROLE_CHAT;
    f.protected_models = prot;
    f.n_protected = 3;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.cls[0].role, RSD_ROLE_WORKER);
    /* R11: tag beats config for protection, the role is still filled */
    tag(&r[0], "pinned:true");
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.cls[0].protection, RSD_PROTECT_TAG);
    CHECK_EQ_INT(plan.cls[0].role, RSD_ROLE_WORKER);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_DECLINE);
}

/* R8: only the exact strings protect. */
static void tags_that_protect(void) {
    rsd_str t[3];
    t[0] = rsd_str_c("role:code");
    t[1] = rsd_str_c("pinned:false");
    t[2] = rsd_str_c("Pinned:true");
    CHECK(!rsd_tags_protect(t, 3));
    t[2] = rsd_str_c("pinned:true");
    CHECK(rsd_tags_protect(t, 3));
    t[2] = rsd_str_c("role:scout");
    CHECK(rsd_tags_protect(t, 3));
    CHECK(!rsd_tags_protect(NULL, 3));
}

/* R30e: eviction order is ours-first then foreign, then config ours/foreign; only
   as many as needed. */
static void eviction_order_and_minimum(void) {
    rsd_resident r[5];
    rsd_facts f;
    r[0] = res_of("a-foreign");
    r[1] = res_of("b-ours");
    r[1].loaded_by_us = true;
    r[2] = res_of("c-config-foreign");
    r[3] = res_of("d-config-ours");
    r[3].loaded_by_us = true;
    r[4] = res_of("e-foreign");
    prot[0].model_id = rsd_str_c("c-config-foreign");
    prot[0].role = RSD_ROLE_NONE;
    prot[1].model_id = rsd_str_c("d-config-ours");
    prot[1].role = RSD_ROLE_NONE;
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 5, 3); /* needs 3 slots */
    f.protected_models = prot;
    f.n_protected = 2;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.slots_needed, 3);
    REQUIRE(plan.n_evict == 3);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "b-ours");
    CHECK_EQ_STR(EVICT(&f, &plan, 1), "a-foreign");
    CHECK_EQ_STR(EVICT(&f, &plan, 2), "e-foreign");
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_UNPROTECTED);
    f.max_instances = 1; /* needs 5: every unprotected, then config ours, config foreign */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 5);
    CHECK_EQ_STR(EVICT(&f, &plan, 3), "d-config-ours");
    CHECK_EQ_STR(EVICT(&f, &plan, 4), "c-config-foreign");
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_CONFIG);
    REQUIRE(plan.n_notices == 5);
    CHECK_EQ_INT(plan.notices[0].kind, RSD_NOTICE_ABOUT_TO_EVICT);
    CHECK_EQ_INT(plan.notices[1].kind, RSD_NOTICE_SWAP);
    CHECK_EQ_INT(plan.notices[3].msg, RSD_MSG_EVICT_CONFIG);
}

/* ---- 6.9 resident-models (facts level; the /api/ps parsing is the parse module's) */
static void upstream_resident_models_preserves_vram_and_total_size(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("llama3:8b");
    r[0].has_size_vram = r[0].has_size = true;
    r[0].size_vram_bytes = 3221225472u; /* 3 GiB */
    r[0].size_bytes = (uint64_t)5 << 30;
    r[1] = res_of("qwen");
    facts_of(&f, "qwen", RSD_STRATEGY_SCHEDULER, r, 2, 0);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_notices >= 1);
    CHECK_EQ_INT(plan.notices[0].msg, RSD_MSG_SPLIT);
    CHECK(plan.notices[0].resident_vram_bytes == 3221225472u);
    CHECK(strstr(msg_of(&f, &plan, 0), "(3.0 GiB of 5.0 GiB on GPU)") != NULL);
}

static void upstream_resident_models_omits_unreported_sizes(void) {
    rsd_resident r[1];
    rsd_facts f;
    r[0] = res_of("cpu-model");
    r[0].has_size = true;
    r[0].size_bytes = (uint64_t)5 << 30; /* VRAM not reported: never "0 on GPU" */
    facts_of(&f, "cpu-model", RSD_STRATEGY_SCHEDULER, r, 1, 0);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.n_notices, 0);
    r[0].has_size_vram = true; /* a *reported* zero is a real zero: all on CPU */
    r[0].size_vram_bytes = 0;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_notices == 1);
    CHECK(strstr(msg_of(&f, &plan, 0), "(0.0 GiB of 5.0 GiB on GPU)") != NULL);
}

static void upstream_resident_models_divergent_model_name_as_aliases(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("library/llama3:latest");
    alias(&r[0], "llama3:latest");
    r[0].loaded_by_us = true;
    r[1] = res_of("other");
    r[1].loaded_by_us = true;
    facts_of(&f, "llama3:latest", RSD_STRATEGY_SCHEDULER, r, 2, 0);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(plan.keep_index, 0);
}

static void upstream_resident_models_keeps_model_matching_id_or_alias(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = res_of("a");
    alias(&r[0], "a-name");
    r[0].loaded_by_us = true;
    r[1] = res_of("b");
    r[1].loaded_by_us = true;
    facts_of(&f, "zzz", RSD_STRATEGY_SCHEDULER, r, 2, 0);
    f.keep_aliases[f.n_keep_aliases++] = rsd_str_c("a-name"); /* keep known by an alias too */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_ALREADY_RESIDENT);
    f.n_keep_aliases = 0;
    f.keep = rsd_str_c("c");
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.n_evict, 2); /* neither matches: both are our stragglers */
    f.keep = rsd_str_c("a-name");
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK_EQ_INT(plan.n_evict, 0);
}

/* ---- weak-spot fixes --------------------------------------------------------- */
/* W8: capacity unknown evicts exactly one (ours first), never all unprotected. */
static void w8_capacity_unknown_evicts_one(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = res_of("a");
    r[1] = res_of("b");
    r[2] = res_of("c");
    r[2].loaded_by_us = true;
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 3, 0);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(plan.reason, RSD_REASON_CAPACITY_UNKNOWN_EVICT_ONE);
    REQUIRE(plan.n_evict == 1); /* upstream R29 would evict a, b and c */
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "c");
    r[2].loaded_by_us = false;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "a"); /* ties by id */
    /* nothing unprotected: load as is, never a configured model blindly */
    prot[0].model_id = rsd_str_c("a");
    prot[0].role = RSD_ROLE_NONE;
    r[1].pinned = true;
    tag(&r[2], "role:scout");
    f.protected_models = prot;
    f.n_protected = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD);
    CHECK_EQ_INT(plan.reason, RSD_REASON_CAPACITY_UNKNOWN_NONE_EVICTABLE);
    CHECK_EQ_INT(plan.n_evict, 0);
    /* empty server */
    f.n_residents = 0;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EMPTY_SERVER);
    CHECK_EQ_INT(plan.n_notices, 0);
}

/* W18: every plan carries a reason code with a name and a text. */
static void w18_plan_returns_a_reason_code(void) {
    int i;
    rsd_resident r[1];
    rsd_facts f;
    r[0] = res_of("scout");
    r[0].pinned = true;
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 1, 1);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_DECLINE);
    CHECK_EQ_INT(plan.reason, RSD_REASON_DECLINE_ALL_PINNED);
    CHECK_EQ_STR(rsd_reason_name(plan.reason), "DECLINE_ALL_PINNED");
    CHECK_EQ_STR(rsd_decision_str(plan.decision), "decline");
    CHECK_EQ_STR(rsd_decision_str(RSD_DECISION_LOAD_AFTER_EVICT), "load-after-evict");
    CHECK_EQ_STR(rsd_notice_kind_str(RSD_NOTICE_ABOUT_TO_EVICT), "about-to-evict");
    CHECK_EQ_STR(rsd_notice_kind_str(RSD_NOTICE_WILL_NOT_FIT), "will-not-fit");
    CHECK_EQ_STR(rsd_notice_level_str(RSD_LEVEL_WARNING), "warning");
    CHECK_EQ_STR(rsd_reason_name(-1), "UNKNOWN");
    CHECK_EQ_STR(rsd_decision_str(99), "unknown");
    CHECK_EQ_STR(rsd_role_phrase(-3), "a configured model");
    for (i = 0; i < RSD_REASON_NUM; i++) CHECK(rsd_reason_str(i)[0] != '\0');
    for (i = 0; i < RSD_MSG_NUM; i++) CHECK(rsd_notice_msg_str(i)[0] != '\0');
}

/* W19: observe never mutates, for every strategy, and says what it would do. */
static void w19_observe_never_mutates_any_strategy(void) {
    rsd_resident r[2];
    rsd_facts f;
    int s;
    r[0] = res_of("a");
    r[0].loaded_by_us = true;
    r[1] = res_of("b");
    for (s = RSD_STRATEGY_DEFAULT; s < RSD_STRATEGY_NUM; s++) {
        facts_of(&f, "keep", (rsd_strategy)s, r, 2, 2);
        f.optout = RSD_OPTOUT_TARGET;
        f.context_length = 262144;
        REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
        CHECK_EQ_INT(plan.decision, RSD_DECISION_OBSERVE);
        CHECK_EQ_INT(plan.reason, RSD_REASON_OBSERVE_TARGET);
        CHECK_EQ_INT(plan.n_evict, 0);
        CHECK_EQ_INT(plan.n_fallback, 0);
        CHECK(plan.would == RSD_DECISION_LOAD || plan.would == RSD_DECISION_LOAD_AFTER_EVICT);
    }
    /* jit: upstream still loaded under observe (S34); we report the would-be clamp only */
    facts_of(&f, "keep", RSD_STRATEGY_JIT, r, 2, 0);
    f.optout = RSD_OPTOUT_ENV;
    f.context_length = 262144;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.would, RSD_DECISION_LOAD);
    REQUIRE(plan.n_notices == 1);
    CHECK(plan.notices[0].observe_only);
    CHECK_EQ_INT(plan.notices[0].msg, RSD_MSG_CONTEXT_CLAMPED);
    CHECK_EQ_STR(msg_of(&f, &plan, 0), "observe-only, nothing done: loading 'keep' alongside a, b: "
                                       "context clamped 262144 to 131072 tokens");
}

/* ---- context-fit clamp (S29, S30) ------------------------------------------- */
static void fit_clamps_only_beside_neighbours(void) {
    CHECK_EQ_INT(rsd_fit_context(262144, 1, 131072), 131072);
    CHECK_EQ_INT(rsd_fit_context(262144, 0, 131072), 262144);  /* alone: never clamped */
    CHECK_EQ_INT(rsd_fit_context(65536, 3, 131072), 65536);    /* below: never raised */
    CHECK_EQ_INT(rsd_fit_context(131072, 3, 131072), 131072);  /* equal: unchanged */
    CHECK_EQ_INT(rsd_fit_context(131073, 1, 0), 131072);       /* 0 = default ceiling */
    CHECK_EQ_INT(rsd_fit_context(262144, 1, RSD_FIT_CEILING_OFF), 262144);
    CHECK_EQ_INT(rsd_fit_context(262144, 2, 196608), 196608);
    CHECK_EQ_INT(rsd_fit_context(262144, -1, 100), 262144);
}

static void fit_ceiling_env_parsing(void) {
    CHECK_EQ_INT(rsd_fit_ceiling_parse(NULL), 131072);
    CHECK_EQ_INT(rsd_fit_ceiling_parse(""), 131072);
    CHECK_EQ_INT(rsd_fit_ceiling_parse("   "), 131072);
    CHECK(rsd_fit_ceiling_parse("off") == RSD_FIT_CEILING_OFF);
    CHECK(rsd_fit_ceiling_parse(" OFF ") == RSD_FIT_CEILING_OFF);
    CHECK(rsd_fit_ceiling_parse("0") == RSD_FIT_CEILING_OFF);
    CHECK(rsd_fit_ceiling_parse("false") == RSD_FIT_CEILING_OFF);
    CHECK_EQ_INT(rsd_fit_ceiling_parse("196608"), 196608);
    CHECK_EQ_INT(rsd_fit_ceiling_parse("196608tokens"), 196608); /* parseInt prefix */
    CHECK_EQ_INT(rsd_fit_ceiling_parse("+4096"), 4096);
    CHECK_EQ_INT(rsd_fit_ceiling_parse("-5"), 131072);
    CHECK_EQ_INT(rsd_fit_ceiling_parse("00"), 131072);           /* parses to 0: default */
    CHECK_EQ_INT(rsd_fit_ceiling_parse("abc"), 131072);
    CHECK_EQ_INT(rsd_fit_ceiling_parse("1e9"), 1);
    CHECK(rsd_fit_ceiling_parse("99999999999999999999999") == 0xFFFFFFFEu);
}

static void fit_in_decide_uses_neighbours_after_eviction(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("big-26b");
    facts_of(&f, "qwen-27b", RSD_STRATEGY_ROUTER, r, 1, 2);
    f.context_length = 262144;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD);
    CHECK_EQ_INT(plan.load_context, 131072);
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_STRESS);
    CHECK_EQ_INT(last_notice(&plan)->detail, RSD_DETAIL_REQUESTED_CONTEXT | RSD_DETAIL_LOAD_CONTEXT);
    CHECK_EQ_STR(msg_of(&f, &plan, -1), "loading 'qwen-27b' alongside big-26b: context clamped 262144 to 131072 tokens");
    f.max_instances = 1; /* the neighbour is evicted first: the model loads alone */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(plan.load_context, 262144);
    CHECK_EQ_INT(last_notice(&plan)->msg, RSD_MSG_EVICT_FOREIGN);
    f.max_instances = 2;
    f.context_ceiling = RSD_FIT_CEILING_OFF;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.load_context, 262144);
    f.context_ceiling = 0;
    r[1] = res_of("qwen-27b"); /* keep resident: no load, no clamp */
    f.n_residents = 2;
    f.max_instances = 3;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.load_context, 0);
}

/* ---- decision cache (R40, R52, R53, W2-W4, W9) ------------------------------- */
static rsd_decision_cache cache;

static void make_plan(rsd_decision d, rsd_reason why) {
    memset(&plan, 0, sizeof plan);
    plan.decision = d;
    plan.reason = why;
}

static void upstream_unloads_then_ttl_skips(void) {
    rsd_cache_hit hit;
    rsd_str key = rsd_str_c("llamacpp|http://mini:8080/v1"), m = rsd_str_c("coder");
    rsd_resident r[1];
    rsd_facts f;
    memset(&cache, 0, sizeof cache);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 1000, 0, &hit), 0); /* miss: probe */
    r[0] = res_of("old-model");
    r[0].loaded_by_us = true;
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 1, 0);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "old-model");
    REQUIRE(plan.n_notices >= 1);
    CHECK_EQ_INT(plan.notices[0].kind, RSD_NOTICE_ABOUT_TO_EVICT);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, m, &plan, false, 1000, 0), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 1100, 0, &hit), 1); /* +100 ms: no probe */
    CHECK_EQ_INT(hit.decision, RSD_DECISION_ALREADY_RESIDENT);
    CHECK(hit.age_ms == 100);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 1000 + 59999, 0, &hit), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 1000 + 60000, 0, &hit), 0); /* TTL over */
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 1000 + 100, 0, &hit), 0);   /* and gone */
}

/* Driver case 16: list failure degrades to an uncached observe; a failed unload
   keeps the plan (evict [old-model]) but, unlike upstream (W4), is not cached. */
static void upstream_degrades_list_and_unload_failures(void) {
    rsd_cache_hit hit;
    rsd_str key = rsd_str_c("llamacpp|http://mini:8080/v1"), m = rsd_str_c("coder");
    rsd_resident r[1];
    rsd_facts f;
    memset(&cache, 0, sizeof cache);
    make_plan(RSD_DECISION_OBSERVE, RSD_REASON_PROBE_FAILED);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, m, &plan, false, 0, 0), 0);
    r[0] = res_of("old-model");
    r[0].loaded_by_us = true;
    facts_of(&f, "coder", RSD_STRATEGY_ROUTER, r, 1, 1);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "old-model");
    CHECK_EQ_INT(rsd_cache_store(&cache, key, m, &plan, true, 0, 0), 0);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 1, 0, &hit), 0); /* next turn re-probes */
}

static void upstream_caches_an_opt_out_observation(void) {
    rsd_cache_hit hit;
    rsd_str key = rsd_str_c("lmstudio|http://box:1234"), m = rsd_str_c("qwen");
    memset(&cache, 0, sizeof cache);
    make_plan(RSD_DECISION_OBSERVE, RSD_REASON_OBSERVE_ENV);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, m, &plan, false, 5, 0), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 10, 0, &hit), 1);
    CHECK_EQ_INT(hit.decision, RSD_DECISION_OBSERVE); /* the driver emits nothing again */
    /* a degraded observe (listing failed, R41) is never cached */
    make_plan(RSD_DECISION_OBSERVE, RSD_REASON_PROBE_FAILED);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, rsd_str_c("other"), &plan, false, 5, 0), 0);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, rsd_str_c("other"), 10, 0, &hit), 0);
}

static void w2_cache_is_per_target_and_model(void) {
    rsd_cache_hit hit;
    rsd_str key = rsd_str_c("llamacpp|http://mini:8080/v1");
    memset(&cache, 0, sizeof cache);
    make_plan(RSD_DECISION_ALREADY_RESIDENT, RSD_REASON_KEEP_RESIDENT);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, rsd_str_c("chat"), &plan, false, 0, 0), 1);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, rsd_str_c("worker"), &plan, false, 0, 0), 1);
    /* alternating models both hit (upstream kept one entry per target) */
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, rsd_str_c("chat"), 10, 0, &hit), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, rsd_str_c("worker"), 20, 0, &hit), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, rsd_str_c("ollama|http://mini:11434"), rsd_str_c("chat"), 20, 0, &hit), 0);
    /* a local mutation invalidates the target */
    CHECK_EQ_INT(rsd_cache_invalidate(&cache, key, rsd_str_c("")), 2);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, rsd_str_c("chat"), 30, 0, &hit), 0);
    /* a shared mutation generation moved on: stale */
    CHECK_EQ_INT(rsd_cache_store(&cache, key, rsd_str_c("chat"), &plan, false, 0, 7), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, rsd_str_c("chat"), 30, 8, &hit), 0);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, rsd_str_c("chat"), &plan, false, 0, 8), 1);
    CHECK_EQ_INT(rsd_cache_invalidate(&cache, key, rsd_str_c("worker")), 0);
    CHECK_EQ_INT(rsd_cache_invalidate(&cache, key, rsd_str_c("chat")), 1);
}

static void w3_declines_are_deduplicated(void) {
    rsd_cache_hit hit;
    rsd_str key = rsd_str_c("llamacpp|http://mini:8080/v1"), m = rsd_str_c("coder");
    memset(&cache, 0, sizeof cache);
    make_plan(RSD_DECISION_DECLINE, RSD_REASON_DECLINE_ALL_PINNED);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, m, &plan, false, 0, 0), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 1, 0, &hit), 1);
    CHECK_EQ_INT(hit.decision, RSD_DECISION_DECLINE);
    CHECK_EQ_INT(hit.reason, RSD_REASON_DECLINE_ALL_PINNED);
}

static void w4_failed_unloads_are_never_cached(void) {
    rsd_cache_hit hit;
    rsd_str key = rsd_str_c("llamacpp|http://mini:8080/v1"), m = rsd_str_c("coder");
    memset(&cache, 0, sizeof cache);
    make_plan(RSD_DECISION_LOAD_AFTER_EVICT, RSD_REASON_EVICT_UNPROTECTED);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, m, &plan, true, 0, 0), 0);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, key, m, 1, 0, &hit), 0);
    make_plan(RSD_DECISION_NONE, RSD_REASON_NONE);
    CHECK_EQ_INT(rsd_cache_store(&cache, key, m, &plan, false, 0, 0), 0);
}

static void w9_target_keys_are_normalised(void) {
    char out[RSD_TARGET_KEY_MAX];
    rsd_cache_hit hit;
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c("llamacpp|HTTP://Mini:8080/v1/"), out, sizeof out), 25);
    CHECK_EQ_STR(out, "llamacpp|http://mini:8080");
    rsd_target_key_normalise(rsd_str_c("ollama|http://Box:80/"), out, sizeof out);
    CHECK_EQ_STR(out, "ollama|http://box");
    rsd_target_key_normalise(rsd_str_c("lmstudio|https://Box:443/API/"), out, sizeof out);
    CHECK_EQ_STR(out, "lmstudio|https://box/API");
    rsd_target_key_normalise(rsd_str_c("x|http://box:8080"), out, sizeof out);
    CHECK_EQ_STR(out, "x|http://box:8080");
    rsd_target_key_normalise(rsd_str_c("http://box:18080//"), out, sizeof out);
    CHECK_EQ_STR(out, "http://box:18080");
    rsd_target_key_normalise(rsd_str_c("llamacpp|http://Box:8080/v1/?x=1#f"), out, sizeof out);
    CHECK_EQ_STR(out, "llamacpp|http://box:8080");
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c(out), out + 64, sizeof out - 64), 24); /* idempotent */
    CHECK_EQ_STR(out + 64, "llamacpp|http://box:8080");
    /* one server, one key: a zero-padded port, case, a trailing '/' or "/v1", ws:// */
    rsd_target_key_normalise(rsd_str_c("llamacpp|http://h:08080/"), out, sizeof out);
    CHECK_EQ_STR(out, "llamacpp|http://h:8080");
    rsd_target_key_normalise(rsd_str_c("llamacpp|http://H:8080"), out, sizeof out);
    CHECK_EQ_STR(out, "llamacpp|http://h:8080");
    rsd_target_key_normalise(rsd_str_c("llamacpp|http://h:8080/v1"), out, sizeof out);
    CHECK_EQ_STR(out, "llamacpp|http://h:8080");
    rsd_target_key_normalise(rsd_str_c("lmstudio|ws://h:1234/"), out, sizeof out);
    CHECK_EQ_STR(out, "lmstudio|http://h:1234");
    rsd_target_key_normalise(rsd_str_c("x|http://[::1]:080/"), out, sizeof out);
    CHECK_EQ_STR(out, "x|http://[::1]");
    rsd_target_key_normalise(rsd_str_c("x|http://h:0/"), out, sizeof out);
    CHECK_EQ_STR(out, "x|http://h:0");
    rsd_target_key_normalise(rsd_str_c("plain-key/"), out, sizeof out);
    CHECK_EQ_STR(out, "plain-key");
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c("http://abcdef"), out, 5), RSD_ERR_BUFFER);
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c("ab"), out, 3), 2);
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c("ab"), out, 2), RSD_ERR_BUFFER);
    CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c("ab"), NULL, 2), RSD_ERR_ARG);
    { /* a key over RSD_TARGET_KEY_MAX after its first pass still settles (idempotent),
         and one that stays over it is refused, whatever cap (fuzz_url) */
        char raw[400], big[600], again[600];
        size_t n = (size_t)snprintf(raw, sizeof raw, "http://h/");
        rsd_str rs;
        int k;
        memset(raw + n, 'a', 200);
        n += 200;
        while (n + 3 < 270) { memcpy(raw + n, "/v1", 3); n += 3; }
        rs.ptr = raw;
        rs.len = n; /* 269 bytes, 266 after one pass */
        k = rsd_target_key_normalise(rs, big, sizeof big);
        CHECK_EQ_INT(k, 209);
        CHECK_EQ_INT(rsd_target_key_normalise(rsd_str_c(big), again, sizeof again), k);
        memset(raw, 'a', 300);
        rs.len = 300;
        CHECK_EQ_INT(rsd_target_key_normalise(rs, big, sizeof big), RSD_ERR_BUFFER);
    }
    memset(&cache, 0, sizeof cache);
    make_plan(RSD_DECISION_ALREADY_RESIDENT, RSD_REASON_KEEP_RESIDENT);
    CHECK_EQ_INT(rsd_cache_store(&cache, rsd_str_c("llamacpp|http://mini:8080/v1"), rsd_str_c("m"), &plan, false, 0, 0), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, rsd_str_c("llamacpp|http://MINI:8080/v1/"), rsd_str_c("m"), 1, 0, &hit), 1);
}

static void cache_full_replaces_least_recently_used(void) {
    char key[32];
    rsd_cache_hit hit;
    int i;
    memset(&cache, 0, sizeof cache);
    cache.ttl_ms = 1000000;
    make_plan(RSD_DECISION_ALREADY_RESIDENT, RSD_REASON_KEEP_RESIDENT);
    for (i = 0; i < RSD_DECISION_CACHE_MAX; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ_INT(rsd_cache_store(&cache, rsd_str_c(key), rsd_str_c("m"), &plan, false, (uint64_t)i, 0), 1);
    }
    CHECK_EQ_INT(rsd_cache_lookup(&cache, rsd_str_c("k0"), rsd_str_c("m"), 100, 0, &hit), 1); /* k0 now recent */
    CHECK_EQ_INT(rsd_cache_store(&cache, rsd_str_c("new"), rsd_str_c("m"), &plan, false, 101, 0), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, rsd_str_c("k0"), rsd_str_c("m"), 102, 0, &hit), 1);
    CHECK_EQ_INT(rsd_cache_lookup(&cache, rsd_str_c("k1"), rsd_str_c("m"), 102, 0, &hit), 0); /* LRU victim */
    CHECK_EQ_INT(rsd_cache_lookup(&cache, rsd_str_c("new"), rsd_str_c("m"), 102, 0, &hit), 1);
    /* overlong model or key: clean error */
    {
        static char longid[RSD_MODEL_ID_MAX + 1];
        memset(longid, 'x', RSD_MODEL_ID_MAX);
        CHECK_EQ_INT(rsd_cache_store(&cache, rsd_str_c("k"), rsd_str_c(longid), &plan, false, 0, 0), RSD_ERR_MODEL_ID);
        CHECK_EQ_INT(rsd_cache_lookup(&cache, rsd_str_c(longid), rsd_str_c("m"), 0, 0, &hit), RSD_ERR_BUFFER);
    }
    CHECK_EQ_INT(rsd_cache_lookup(NULL, rsd_str_c("k"), rsd_str_c("m"), 0, 0, &hit), RSD_ERR_ARG);
}

/* ---- determinism, limits, hostile facts -------------------------------------- */
static int same_plan_by_id(const rsd_facts *fa, const rsd_plan *a, const rsd_facts *fb, const rsd_plan *b) {
    int k;
    char ma[2048], mb[2048];
    if (a->decision != b->decision || a->reason != b->reason || a->n_evict != b->n_evict ||
        a->n_fallback != b->n_fallback || a->n_notices != b->n_notices || a->load_context != b->load_context)
        return 0;
    for (k = 0; k < a->n_evict; k++)
        if (!rsd_str_eq(fa->residents[a->evict[k]].model_id, fb->residents[b->evict[k]].model_id)) return 0;
    for (k = 0; k < a->n_fallback; k++)
        if (!rsd_str_eq(fa->residents[a->fallback[k]].model_id, fb->residents[b->fallback[k]].model_id)) return 0;
    for (k = 0; k < a->n_notices; k++) {
        if (a->notices[k].kind != b->notices[k].kind || a->notices[k].msg != b->notices[k].msg) return 0;
        rsd_notice_format(fa, a, &a->notices[k], ma, sizeof ma);
        rsd_notice_format(fb, b, &b->notices[k], mb, sizeof mb);
        if (strcmp(ma, mb) != 0) return 0;
    }
    return 1;
}

static void determinism_shuffled_residents_give_the_same_plan(void) {
    static const char *ids[8] = {"h", "c", "a", "f", "b", "g", "e", "d"};
    rsd_resident base[8], shuf[8];
    rsd_facts fa, fb;
    uint32_t seed = 12345;
    int i, round, strat;
    for (i = 0; i < 8; i++) {
        base[i] = res_of(ids[i]);
        base[i].loaded_by_us = (i % 3) == 0;
        base[i].has_size = base[i].has_size_vram = (i % 2) == 0;
        base[i].size_bytes = (uint64_t)(i + 2) << 30;
        base[i].size_vram_bytes = (uint64_t)(i + 1) << 30;
    }
    tag(&base[5], "pinned:true");
    prot[0].model_id = rsd_str_c("f");
    prot[0].role = RSD_ROLE_MEMORY;
    prot[1].model_id = rsd_str_c("b");
    prot[1].role = RSD_ROLE_NONE;
    for (strat = RSD_STRATEGY_ROUTER; strat < RSD_STRATEGY_NUM; strat++) {
        uint32_t cap;
        for (cap = 0; cap < 10; cap++) {
            facts_of(&fa, "keep", (rsd_strategy)strat, base, 8, cap);
            fa.protected_models = prot;
            fa.n_protected = 2;
            fa.context_length = 200000;
            REQUIRE(rsd_decide(&fa, &plan) == RSD_OK);
            for (round = 0; round < 20; round++) {
                memcpy(shuf, base, sizeof base);
                for (i = 7; i > 0; i--) {
                    int j;
                    rsd_resident t;
                    seed = seed * 1103515245u + 12345u;
                    j = (int)((seed >> 16) % (uint32_t)(i + 1));
                    t = shuf[i];
                    shuf[i] = shuf[j];
                    shuf[j] = t;
                }
                fb = fa;
                fb.residents = shuf;
                REQUIRE(rsd_decide(&fb, &plan2) == RSD_OK);
                CHECK(same_plan_by_id(&fa, &plan, &fb, &plan2));
            }
        }
    }
}

static void limits_65_residents_is_a_clean_error(void) {
    static rsd_resident r[RSD_MAX_RESIDENTS + 1];
    static char names[RSD_MAX_RESIDENTS + 1][16];
    rsd_facts f;
    int i;
    for (i = 0; i <= RSD_MAX_RESIDENTS; i++) {
        snprintf(names[i], sizeof names[i], "m%d", i);
        r[i] = res_of(names[i]);
    }
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, RSD_MAX_RESIDENTS + 1, 4);
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_RESIDENTS_LIMIT);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_NONE);
    CHECK_EQ_INT(plan.n_evict, 0);
    f.n_residents = RSD_MAX_RESIDENTS; /* 64 is fine: needs 61 evictions */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.n_evict, 61);
    CHECK_EQ_INT(plan.n_notices, 61);
    r[0].n_aliases = RSD_MAX_ALIASES + 1;
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_RESIDENTS_LIMIT);
    r[0].n_aliases = 0;
    r[0].n_tags = -1;
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_ARG);
    r[0].n_tags = 0;
    f.n_protected = RSD_MAX_PROTECTED + 1;
    f.protected_models = prot;
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_RESIDENTS_LIMIT);
    CHECK_EQ_INT(rsd_result_name(RSD_ERR_RESIDENTS_LIMIT)[0], 'E');
}

static void hostile_ids_are_rejected_cleanly(void) {
    static char longid[RSD_MODEL_ID_MAX + 1];
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("a");
    r[1] = res_of("");
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 2, 1);
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_MODEL_ID); /* empty resident id */
    r[1].model_id.ptr = NULL;
    r[1].model_id.len = 3;
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_ARG);     /* NULL with a length */
    memset(longid, 'x', RSD_MODEL_ID_MAX - 1);
    r[1] = res_of(longid);                                  /* 255 bytes: fine */
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_OK);
    longid[RSD_MODEL_ID_MAX - 1] = 'x';                     /* 256 bytes */
    r[1] = res_of(longid);
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_MODEL_ID);
    r[1] = res_of("b");
    f.keep = rsd_str_c("");
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_MODEL_ID); /* empty keep */
    f.keep = rsd_str_c("keep");
    f.strategy = (rsd_strategy)17;
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_ARG);
    f.strategy = RSD_STRATEGY_ROUTER;
    f.residents = NULL;
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_decide(NULL, &plan), RSD_ERR_ARG);
    CHECK_EQ_INT(rsd_decide(&f, NULL), RSD_ERR_ARG);
}

static void hostile_duplicates_and_aliases_never_evict_protected(void) {
    rsd_resident r[5];
    rsd_facts f;
    int k;
    r[0] = res_of("dup");            /* unprotected copy of a pinned id */
    r[1] = res_of("dup");
    r[1].pinned = true;
    r[2] = res_of("x");              /* alias links x to the pinned "p" */
    alias(&r[2], "p");
    r[3] = res_of("p");
    tag(&r[3], "role:scout");
    r[4] = res_of("y");              /* alias equals the keep */
    alias(&r[4], "keep");
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 4, 1);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_DECLINE);
    CHECK_EQ_INT(plan.n_evict, 0);
    CHECK_EQ_INT(plan.cls[0].protection, RSD_PROTECT_TAG);
    CHECK_EQ_INT(plan.cls[2].protection, RSD_PROTECT_TAG);
    f.max_instances = 0;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.n_evict, 0);
    f.n_residents = 5;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_ALREADY_RESIDENT);
    /* the keep also listed as protected, and duplicated unprotected: still fine */
    r[0] = res_of("keep");
    r[1] = res_of("keep");
    prot[0].model_id = rsd_str_c("keep");
    prot[0].role = RSD_ROLE_CHAT;
    f.protected_models = prot;
    f.n_protected = 1;
    f.max_instances = 1;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_ALREADY_RESIDENT);
    for (k = 0; k < plan.n_notices; k++) {
        char m[1024];
        CHECK(rsd_notice_format(&f, &plan, &plan.notices[k], m, sizeof m) > 0);
    }
    /* duplicate unprotected ids are one model: evicted once, freeing both slots */
    r[0] = res_of("d");
    r[1] = res_of("d");
    r[2] = res_of("e");
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 3, 2); /* needs 2 */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "d");
}

/* R45, R64-R65: a refused swap becomes a decline with one will-not-fit notice. */
static void upstream_loadability_gate_declines_without_eviction_notices(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = res_of("a");
    r[1] = res_of("b");
    facts_of(&f, "missing", RSD_STRATEGY_ROUTER, r, 2, 2);
    f.context_length = 262144;
    f.model_max_context = 1000;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK(plan.n_notices >= 2);
    REQUIRE(rsd_plan_decline_unloadable(&f, &plan, 7) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_DECLINE);
    CHECK_EQ_INT(plan.reason, RSD_REASON_DECLINE_NOT_LOADABLE);
    CHECK_EQ_INT(plan.n_evict, 0);
    REQUIRE(plan.n_notices == 1);
    CHECK_EQ_INT(plan.notices[0].kind, RSD_NOTICE_WILL_NOT_FIT);
    CHECK_EQ_INT(plan.notices[0].level, RSD_LEVEL_ERROR);
    CHECK_EQ_INT(plan.notices[0].detail, 0);
    CHECK(strstr(msg_of(&f, &plan, 0), "'mini' does not serve 'missing'; it lists 7 model(s).") != NULL);
    CHECK_EQ_INT(rsd_plan_decline_unloadable(NULL, &plan, 0), RSD_ERR_ARG);
}

static void notice_format_truncates_safely(void) {
    rsd_resident r[2];
    rsd_facts f;
    char small[8];
    int full;
    r[0] = res_of("scout");
    r[0].pinned = true;
    r[1] = res_of("old");
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 2, 2);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_notices == 1);
    full = rsd_notice_format(&f, &plan, &plan.notices[0], NULL, 0);
    CHECK(full > 40);
    CHECK_EQ_INT(rsd_notice_format(&f, &plan, &plan.notices[0], small, sizeof small), full);
    CHECK_EQ_STR(small, "swappin");
    CHECK_EQ_INT((int)strlen(msg_of(&f, &plan, 0)), full);
    plan.notices[0].subject = 5; /* corrupted notice: rejected, not read out of bounds */
    CHECK_EQ_INT(rsd_notice_format(&f, &plan, &plan.notices[0], small, sizeof small), RSD_ERR_ARG);
}

/* Ids a server chose are quoted in notices with their control bytes made visible: an
   ESC sequence, a BEL or a CR/LF in an id cannot recolour the operator's terminal or
   forge a log line. */
static void notice_escapes_server_ids(void) {
    rsd_resident r[2];
    rsd_facts f;
    const char *m;
    r[0] = res_of("evil\x1b[2J\x1b]0;pwned\x07");
    r[1] = res_of("two\r\nrsd-ensure: fake line \xc2\x9b" "31m");
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 2, 2);
    f.target_id = rsd_str_c("host\x1b[0m");
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_notices >= 1);
    m = msg_of(&f, &plan, 0);
    CHECK(strpbrk(m, "\x1b\x07\r\n") == NULL);
    CHECK(strstr(m, "\xc2\x9b") == NULL);
    CHECK(strstr(m, "'host\\x1b[0m'") != NULL);
    CHECK(strstr(m, "evil\\x1b[2J\\x1b]0;pwned\\x07") != NULL || strstr(m, "two\\r\\nrsd-ensure: fake line \\xc2\\x9b31m") != NULL);
}


/* ---- W12: byte-aware eviction when sizes are known ----------------------------- */
#define GIB ((uint64_t)1 << 30)
static rsd_resident sized(const char *id, uint64_t gib, bool ours) {
    rsd_resident r = res_of(id);
    r.size_vram_bytes = gib * GIB;
    r.has_size_vram = true;
    r.loaded_by_us = ours;
    return r;
}
/* The clamp by bytes (issue 26, part 4): the largest context whose KV fits what is left,
   in whole 256-cell blocks per sequence, never below the floor, never above the request. */
static rsd_fit_bytes fitb(uint32_t req, int others, uint64_t per_tok, uint64_t free_b, uint64_t load_b, uint32_t seq,
                          uint32_t floor_) {
    rsd_fit_bytes_desc d;
    rsd_fit_bytes o;
    memset(&d, 0, sizeof d);
    d.requested = req;
    d.n_other_residents = others;
    d.kv_bytes_per_token = per_tok;
    d.free_bytes = free_b;
    d.load_bytes = load_b;
    d.n_seq = seq;
    d.floor = floor_;
    CHECK_EQ_INT(rsd_fit_context_bytes(&d, &o), RSD_OK);
    return o;
}

static void fit_bytes_pure(void) {
    rsd_fit_bytes o;
    rsd_fit_bytes_desc d;
    const uint64_t kib = 1024, per = 96 * kib; /* 96 KiB a token: 256 tokens = 24 MiB */
    CHECK_EQ_INT(rsd_fit_context_bytes(NULL, &o), RSD_ERR_ARG);
    memset(&d, 0, sizeof d);
    CHECK_EQ_INT(rsd_fit_context_bytes(&d, NULL), RSD_ERR_ARG);
    /* alone: never clamped, whatever the bytes */
    o = fitb(131072, 0, per, 0, 0, 1, 0);
    CHECK_EQ_INT(o.context, 131072);
    CHECK(!o.clamped && !o.by_bytes);
    CHECK(o.kv_bytes == 131072 * per);
    /* no figure: the fixed ceiling */
    o = fitb(262144, 1, 0, 1 * GIB, 0, 1, 0);
    CHECK_EQ_INT(o.context, 131072);
    CHECK(o.clamped && !o.by_bytes);
    /* it all fits: the request, unrounded */
    o = fitb(10000, 1, per, 10000 * per + 256 * per, 0, 1, 0);
    CHECK_EQ_INT(o.context, 10000);
    CHECK(!o.clamped && o.by_bytes && !o.floored);
    CHECK(o.kv_bytes == 10240 * per); /* padded to 256 as llama.cpp allocates */
    /* 10000 tokens are 10240 cells: 10000 x per bytes is not enough -> 9984 */
    o = fitb(10000, 1, per, 10000 * per, 0, 1, 0);
    CHECK_EQ_INT(o.context, 9984);
    CHECK(o.clamped);
    /* 1 GiB left less 400 MiB of weights: 624 MiB / 24 MiB = 26 blocks of 256 */
    o = fitb(131072, 2, per, GIB, 400u << 20, 1, 0);
    CHECK_EQ_INT(o.context, 26 * 256);
    CHECK_EQ_INT(o.fits, 26 * 256);
    CHECK(o.kv_bytes <= GIB - (400u << 20));
    /* 4 sequences: whole blocks in each (a multiple of 1024), the per-sequence share as
       llama.cpp pads it */
    o = fitb(131072, 1, per, GIB, 400u << 20, 4, 0);
    CHECK_EQ_INT(o.context, 6 * 1024);
    CHECK_EQ_INT(o.context % (256 * 4), 0);
    /* below the floor: the floor, marked floored (a host evicts instead) */
    o = fitb(131072, 1, per, 100u << 20, 0, 1, 0); /* 4 blocks = 1024 tokens fit */
    CHECK_EQ_INT(o.fits, 1024);
    CHECK_EQ_INT(o.context, RSD_FIT_FLOOR_DEFAULT);
    CHECK(o.floored && o.clamped);
    o = fitb(131072, 1, per, 100u << 20, 0, 1, 512); /* a floor of its own */
    CHECK_EQ_INT(o.context, 1024);
    CHECK(!o.floored);
    /* nothing left (the other bytes take it all): the floor, nothing fits */
    o = fitb(131072, 1, per, GIB, 2 * GIB, 1, 0);
    CHECK_EQ_INT(o.fits, 0);
    CHECK_EQ_INT(o.context, 4096);
    CHECK(o.floored);
    /* a request under the floor is never raised */
    o = fitb(2048, 1, per, 0, 0, 1, 0);
    CHECK_EQ_INT(o.context, 2048);
    CHECK(o.floored && !o.clamped);
    /* overflow: a figure so large one block is past 2^64; bytes past 2^32 tokens */
    o = fitb(131072, 1, UINT64_MAX / 2, UINT64_MAX, 0, 4, 0);
    CHECK_EQ_INT(o.fits, 0);
    CHECK(o.floored);
    CHECK(o.kv_bytes == UINT64_MAX);
    o = fitb(0xFFFFFFFFu, 1, 1, UINT64_MAX, 0, 1, 0);
    CHECK(o.context == 0xFFFFFFFFu && !o.clamped);
    o = fitb(0xFFFFFFFFu, 1, 1, (uint64_t)1 << 40, 0, 3, 0);
    CHECK(o.context == 0xFFFFFFFFu && !o.clamped); /* 2^40 cells fit every token */
    /* no request: nothing */
    o = fitb(0, 3, per, 0, 0, 1, 0);
    CHECK_EQ_INT(o.context, 0);
    CHECK(!o.clamped);
}

/* rsd_decide clamps by bytes when the keep's KV per token, the capacity and every
   footprint are known: what stays after the planned evictions bounds it. */
static void fit_bytes_in_decide(void) {
    rsd_resident r[2];
    rsd_facts f;
    const uint64_t per = 128 * 1024; /* 128 KiB a token: 32 MiB a block of 256 */
    r[0] = sized("a", 10, false);
    r[1] = sized("b", 3, false);
    r[0].pinned = r[1].pinned = true; /* evicted by nothing: JIT keeps them anyway */
    facts_of(&f, "keep", RSD_STRATEGY_JIT, r, 2, 0);
    f.context_length = 65536;
    f.capacity_bytes = 16 * GIB; /* 13 stay: 3 left */
    f.keep_bytes = 2 * GIB + 65536 * per; /* 2 GiB weights + 8 GiB of KV at 65536 */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.load_context, 65536); /* no figure: under the fixed ceiling */
    f.kv_bytes_per_token = per;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.load_context, 8192); /* 1 GiB for KV: 32 blocks of 256 */
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->msg, RSD_MSG_CONTEXT_CLAMPED);
    CHECK_EQ_INT(last_notice(&plan)->load_context, 8192);
    /* 0.5 GiB for KV: 4096, the floor exactly */
    f.capacity_bytes = 15 * GIB + (512u << 20);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.load_context, 4096);
    f.capacity_bytes = 15 * GIB + (256u << 20);
    f.context_floor = 1024;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.load_context, 2048);
    f.context_floor = 0;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.load_context, 4096); /* the default floor */
    /* a resident of unknown size: bytes do not count, the fixed ceiling rules */
    r[1].has_size_vram = false;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.load_context, 65536);
}

/* A free slot but not the memory: evict by bytes (count alone would load beside). */
static void w12_free_slot_without_memory_evicts_by_bytes(void) {
    rsd_resident r[2];
    rsd_facts f;
    r[0] = sized("a", 8, false);
    r[1] = sized("b", 4, false);
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 2, 4);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_FREE_SLOT); /* no sizes: as before */
    f.capacity_bytes = 16 * GIB; /* used 12, free 4; keep 10 -> 6 to free */
    f.keep_bytes = 10 * GIB;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_BYTES);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "a");
    CHECK_EQ_INT(last_notice(&plan)->kind, RSD_NOTICE_SWAP); /* the eviction notice as usual */
    /* it fits: nothing evicted, the count rule as before */
    f.keep_bytes = 4 * GIB;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_FREE_SLOT);
    CHECK_EQ_INT(plan.n_evict, 0);
}

/* Full by count: the count pick (ours first) would free 2 GiB of the 6 needed; the
   byte pick takes the one model that frees enough. */
static void w12_fewest_evictions_that_free_enough(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = sized("a", 2, true);
    r[1] = sized("b", 2, false);
    r[2] = sized("c", 12, false);
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 3, 3);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "a"); /* count-based, sizes unknown */
    f.capacity_bytes = 24 * GIB; /* used 16, free 8; keep 14 -> 6 */
    f.keep_bytes = 14 * GIB;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_BYTES);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "c");
    /* 13 GiB to free: c and then the next largest of the tier (a before b: ours first) */
    f.keep_bytes = 21 * GIB;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 2);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "c");
    CHECK_EQ_STR(EVICT(&f, &plan, 1), "a");
}

/* Only a configured model can free enough: it goes, and the unprotected one that
   could not help anyway is spared. Tag-pinned ones never go. */
static void w12_spares_victims_made_unneeded(void) {
    rsd_resident r[3];
    rsd_facts f;
    rsd_protected_model pm;
    r[0] = sized("u", 1, false);
    r[1] = sized("cfg", 10, false);
    r[2] = sized("pin", 20, false);
    tag(&r[2], "pinned:true");
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 3, 8);
    pm.model_id = rsd_str_c("cfg");
    pm.role = RSD_ROLE_MEMORY;
    f.protected_models = &pm;
    f.n_protected = 1;
    f.capacity_bytes = 32 * GIB; /* used 31, free 1; keep 10 -> 9 */
    f.keep_bytes = 10 * GIB;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_CONFIG);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "cfg");
    CHECK(!plan.cls[0].evict && !plan.cls[2].evict);
    /* a pinned keep may not displace the configured model (R26): short of bytes, the
       plan is the count plan (a free slot) plus a will-not-fit warning */
    f.keep_pinned = true;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_FREE_SLOT);
    CHECK_EQ_INT(plan.n_evict, 0);
    REQUIRE(plan.n_notices >= 1);
    CHECK_EQ_INT(plan.notices[0].kind, RSD_NOTICE_WILL_NOT_FIT);
    CHECK_EQ_INT(plan.notices[0].level, RSD_LEVEL_WARNING);
    CHECK_EQ_INT(plan.notices[0].msg, RSD_MSG_BYTES_SHORT);
    CHECK_EQ_INT(plan.notices[0].free_bytes, 2 * GIB);
    CHECK_EQ_STR(msg_of(&f, &plan, 0), "'keep' needs 10.0 GiB on 'mini', and only 2.0 GiB of 32.0 GiB can be freed "
                                       "without evicting a protected model; residency evicts no more than without "
                                       "sizes, and the load may fail or spill to CPU.");
}

/* One unsized resident: exactly the plan without sizes. */
static void w12_unknown_sizes_change_nothing(void) {
    rsd_resident r[3];
    rsd_facts f;
    int strat;
    r[0] = sized("a", 2, true);
    r[1] = res_of("b");
    r[2] = sized("c", 12, false);
    for (strat = RSD_STRATEGY_ROUTER; strat <= RSD_STRATEGY_SCHEDULER; strat++) {
        uint32_t max;
        for (max = 0; max <= 3; max += 3) {
            facts_of(&f, "keep", (rsd_strategy)strat, r, 3, max);
            REQUIRE(rsd_decide(&f, &plan2) == RSD_OK);
            f.capacity_bytes = 24 * GIB;
            f.keep_bytes = 30 * GIB;
            REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
            CHECK(memcmp(&plan, &plan2, sizeof plan) == 0);
        }
    }
}

/* Scheduler (Ollama): release only as many of our stragglers as the keep needs. */
static void w12_scheduler_releases_only_what_is_needed(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = sized("s1", 4, true);
    r[1] = sized("s2", 6, true);
    r[2] = sized("theirs", 8, false);
    facts_of(&f, "keep", RSD_STRATEGY_SCHEDULER, r, 3, 0);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.n_evict, 2); /* R28 without sizes: every straggler of ours */
    f.capacity_bytes = 24 * GIB;  /* used 18, free 6 */
    f.keep_bytes = 8 * GIB;        /* 2 to free */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_SCHEDULER_RELEASE_OURS);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "s2");
    f.keep_bytes = 5 * GIB; /* fits */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD);
    CHECK_EQ_INT(plan.reason, RSD_REASON_FITS_BYTES);
    CHECK_EQ_INT(plan.n_evict, 0);
    f.keep_bytes = 20 * GIB; /* ours free 10 of the 14 needed: all of ours, and a warning */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.n_evict, 2);
    CHECK_EQ_INT(plan.notices[0].msg, RSD_MSG_BYTES_SHORT);
    CHECK(!plan.cls[2].evict); /* never a foreign one */
}

/* Router, capacity unknown (W8 evicts one): the bytes can ask for more, never for
   fewer (a router limits by count; W8's one keeps its LRU off pinned models). */
static void w12_router_capacity_unknown_uses_sizes(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = sized("a", 4, false);
    r[1] = sized("b", 4, false);
    r[2] = sized("c", 2, false);
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 3, 0);
    f.capacity_bytes = 24 * GIB; /* used 10, free 14 */
    f.keep_bytes = 8 * GIB;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_CAPACITY_UNKNOWN_EVICT_ONE);
    REQUIRE(plan.n_evict == 1);
    f.keep_bytes = 22 * GIB; /* 8 to free: the two largest (a, b by id), not c */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_BYTES);
    REQUIRE(plan.n_evict == 2);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "a");
    CHECK_EQ_STR(EVICT(&f, &plan, 1), "b");
    f.n_residents = 2;
    f.keep_bytes = 20 * GIB; /* used 8, free 16: 4 to free: one of the two equal ones, by id */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_BYTES);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "a");
    /* the same facts listed the other way round: the same victim */
    {
        rsd_resident q[2];
        q[0] = r[1];
        q[1] = r[0];
        f.residents = q;
        REQUIRE(rsd_decide(&f, &plan2) == RSD_OK);
        REQUIRE(plan2.n_evict == 1);
        CHECK_EQ_STR(EVICT(&f, &plan2, 0), "a");
    }
}

/* ---- least recently used among candidates of equal protection ------------------- */
static rsd_resident used(const char *id, uint64_t last_used_ms, bool ours) {
    rsd_resident r = res_of(id);
    r.last_used_ms = last_used_ms;
    r.loaded_by_us = ours;
    return r;
}

/* The issue's case: a 3-slot router holding bravo, charlie and the newest alpha; a
   load of delta evicts the least recently used of bravo and charlie, never alpha (by
   id it was alpha). Every listing order gives the same plan. */
static void lru_issue_case(void) {
    rsd_resident r[3], q[3];
    rsd_facts f;
    int rot, k;
    r[0] = used("alpha", 3000, true);
    r[1] = used("bravo", 1000, true);
    r[2] = used("charlie", 2000, true);
    facts_of(&f, "delta", RSD_STRATEGY_ROUTER, r, 3, 3);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_LOAD_AFTER_EVICT);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_LRU);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "bravo");
    REQUIRE(last_notice(&plan));
    CHECK_EQ_INT(last_notice(&plan)->msg, RSD_MSG_EVICT_OURS);
    CHECK_EQ_INT(plan.cls[1].victim_rule, RSD_VICTIM_LRU);
    CHECK_EQ_INT(plan.cls[0].victim_rule, RSD_VICTIM_NONE);
    CHECK_EQ_STR(msg_of(&f, &plan, -1),
                 "evicting residency-loaded model 'bravo' (least recently used) from 'mini' to free a slot for 'delta'.");
    CHECK(strstr(rsd_reason_str(plan.reason), "least recently used") != NULL);
    for (rot = 1; rot < 3; rot++) {
        for (k = 0; k < 3; k++) q[k] = r[(k + rot) % 3];
        f.residents = q;
        REQUIRE(rsd_decide(&f, &plan2) == RSD_OK);
        REQUIRE(plan2.n_evict == 1);
        CHECK_EQ_STR(EVICT(&f, &plan2, 0), "bravo");
    }
    /* two slots to free: bravo then charlie */
    f.residents = r;
    f.max_instances = 2;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 2);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "bravo");
    CHECK_EQ_STR(EVICT(&f, &plan, 1), "charlie");
}

/* Nothing known: by id, as before (reason EVICT_UNPROTECTED, the notice says so). A
   model with no known use goes before used ones (never used is least recent). */
static void lru_unknown_and_mixed(void) {
    rsd_resident r[3];
    rsd_facts f;
    r[0] = used("alpha", 0, true);
    r[1] = used("bravo", 0, true);
    r[2] = used("charlie", 0, true);
    facts_of(&f, "delta", RSD_STRATEGY_ROUTER, r, 3, 3);
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_UNPROTECTED);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "alpha");
    CHECK_EQ_INT(plan.cls[0].victim_rule, RSD_VICTIM_BY_ID);
    CHECK(strstr(msg_of(&f, &plan, -1), "'alpha' (no last use is known: first by id)") != NULL);
    r[0].last_used_ms = 50;
    r[2].last_used_ms = 10;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_LRU);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "bravo");
    CHECK_EQ_INT(plan.cls[1].victim_rule, RSD_VICTIM_UNUSED);
    CHECK(strstr(msg_of(&f, &plan, -1), "'bravo' (no use of it is known)") != NULL);
    /* equal last uses: by id */
    r[1].last_used_ms = 10;
    r[0].last_used_ms = 10;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "alpha");
}

/* Protection first, then LRU: an old configured model stays while a newer unprotected
   one goes; a pinned one never goes; when only configured ones are left, their LRU. */
static void lru_within_protection(void) {
    rsd_resident r[4];
    rsd_protected_model pm[2];
    rsd_facts f;
    r[0] = used("alpha", 9000, true);
    r[1] = used("bravo", 100, true);
    r[2] = used("charlie", 200, true);
    r[3] = used("dora", 1, true);
    tag(&r[3], "pinned:true");
    memset(pm, 0, sizeof pm);
    pm[0].model_id = rsd_str_c("bravo");
    pm[1].model_id = rsd_str_c("charlie");
    facts_of(&f, "echo", RSD_STRATEGY_ROUTER, r, 4, 4);
    f.protected_models = pm;
    f.n_protected = 2;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "alpha");
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_LRU);
    f.max_instances = 2; /* three to free: alpha, then the configured LRU bravo, then charlie */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 3);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "alpha");
    CHECK_EQ_STR(EVICT(&f, &plan, 1), "bravo");
    CHECK_EQ_STR(EVICT(&f, &plan, 2), "charlie");
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_CONFIG);
    CHECK(strstr(msg_of(&f, &plan, -2), "evicting 'bravo' (least recently used) from 'mini'") != NULL);
}

/* Models this library loaded go before foreign ones (R25), LRU within each; a group's
   last use is its members' latest; JIT's fallback and the scheduler's release follow
   the same order; capacity unknown evicts the LRU one. */
static void lru_ours_groups_and_strategies(void) {
    rsd_resident r[4];
    rsd_facts f;
    r[0] = used("foreign-old", 5, false);
    r[1] = used("ours-new", 900, true);
    r[2] = used("ours-mid", 400, true);
    r[3] = used("ours-mid-alias", 950, true); /* one model with ours-mid: its latest use is 950 */
    alias(&r[3], "ours-mid");
    facts_of(&f, "keep", RSD_STRATEGY_ROUTER, r, 4, 4); /* 4 entries, 3 models: one slot to free */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "ours-new");
    f.max_instances = 0; /* W8: one, the LRU of ours */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_CAPACITY_UNKNOWN_EVICT_ONE);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "ours-new");
    CHECK_EQ_INT(plan.cls[1].victim_rule, RSD_VICTIM_LRU);
    f.strategy = RSD_STRATEGY_JIT;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_fallback == 3);
    CHECK_EQ_STR(FALLBACK(&f, &plan, 0), "ours-new");
    CHECK_EQ_STR(FALLBACK(&f, &plan, 1), "ours-mid");
    CHECK_EQ_STR(FALLBACK(&f, &plan, 2), "foreign-old");
    f.strategy = RSD_STRATEGY_SCHEDULER;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 2);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "ours-new");
    CHECK_EQ_STR(EVICT(&f, &plan, 1), "ours-mid");
}

/* Byte-aware picks stay largest first (ties: the LRU order); their notices give no
   order reason. */
static void lru_bytes_ties(void) {
    rsd_resident r[3];
    rsd_facts f;
    int k;
    r[0] = used("alpha", 300, true);
    r[1] = used("bravo", 100, true);
    r[2] = used("charlie", 200, true);
    for (k = 0; k < 3; k++) {
        r[k].has_size = true;
        r[k].size_bytes = 4;
    }
    facts_of(&f, "delta", RSD_STRATEGY_ROUTER, r, 3, 8);
    f.capacity_bytes = 12;
    f.keep_bytes = 4;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_EVICT_BYTES);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "bravo");
    CHECK_EQ_INT(plan.cls[1].victim_rule, RSD_VICTIM_NONE);
    CHECK(strstr(msg_of(&f, &plan, -1), "'bravo' from") != NULL);
}

/* A free plan (no keep, free_bytes): only models this library loaded, unprotected and
   of known size, least recently used first, until enough is freed; a shortfall says so;
   nothing to unload is FREE_NOTHING; observe-only does nothing. */
static void free_plan(void) {
    rsd_resident r[6];
    rsd_protected_model pm[1];
    rsd_facts f;
    int k;
    const uint64_t G = (uint64_t)1 << 30;
    r[0] = used("alpha", 3000, true);
    r[1] = used("bravo", 1000, true);
    r[2] = used("charlie", 2000, true);
    r[3] = used("foreign", 1, false);          /* not ours: never */
    r[4] = used("pinned", 2, true);
    tag(&r[4], "pinned:true");                  /* protected: never */
    r[5] = used("config", 3, true);             /* configured: never */
    for (k = 0; k < 6; k++) {
        r[k].has_size = true;
        r[k].size_bytes = 2 * G;
    }
    r[2].has_size = false;                      /* charlie's size unknown: skipped */
    memset(pm, 0, sizeof pm);
    pm[0].model_id = rsd_str_c("config");
    memset(&f, 0, sizeof f);
    f.target_id = rsd_str_c("mini");
    f.residents = r;
    f.n_residents = 6;
    f.max_instances = 6;
    f.protected_models = pm;
    f.n_protected = 1;
    f.free_bytes = 3 * G;
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_FREE);
    CHECK_EQ_INT(plan.reason, RSD_REASON_FREE_BYTES);
    REQUIRE(plan.n_evict == 2);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "bravo");
    CHECK_EQ_STR(EVICT(&f, &plan, 1), "alpha");
    CHECK(plan.freed_bytes == 4 * G);
    REQUIRE(plan.n_notices == 2);
    CHECK_EQ_STR(msg_of(&f, &plan, 0), "unloading residency-loaded model 'bravo' (least recently used) from 'mini' to "
                                        "free memory (2.0 GiB of the 3.0 GiB asked).");
    f.free_bytes = 1; /* one is enough */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    REQUIRE(plan.n_evict == 1);
    CHECK_EQ_STR(EVICT(&f, &plan, 0), "bravo");
    f.free_bytes = 9 * G; /* more than ours hold: all of them, and a notice */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_FREE_SHORT);
    CHECK_EQ_INT(plan.n_evict, 2);
    CHECK_EQ_INT(last_notice(&plan)->msg, RSD_MSG_FREE_SHORT);
    CHECK_EQ_STR(msg_of(&f, &plan, -1), "only 4.0 GiB of the 9.0 GiB asked can be freed on 'mini': the rest is held by "
                                         "models residency did not load, protected ones, or ones whose size the server "
                                         "does not list.");
    f.optout = RSD_OPTOUT_ENV; /* observe: nothing */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.decision, RSD_DECISION_OBSERVE);
    CHECK_EQ_INT(plan.would, RSD_DECISION_FREE);
    CHECK_EQ_INT(plan.n_evict, 0);
    f.optout = RSD_OPTOUT_NONE;
    f.n_residents = 0; /* nothing to unload */
    REQUIRE(rsd_decide(&f, &plan) == RSD_OK);
    CHECK_EQ_INT(plan.reason, RSD_REASON_FREE_NOTHING);
    CHECK_EQ_INT(plan.n_evict, 0);
    f.free_bytes = 0; /* an empty keep without bytes is still an error */
    CHECK_EQ_INT(rsd_decide(&f, &plan), RSD_ERR_MODEL_ID);
}

int main(int argc, char **argv) {
    RSD_TEST_BEGIN(argc, argv);
    RUN(upstream_co_hosts_within_known_capacity);
    RUN(lru_issue_case);
    RUN(lru_unknown_and_mixed);
    RUN(lru_within_protection);
    RUN(lru_ours_groups_and_strategies);
    RUN(lru_bytes_ties);
    RUN(free_plan);
    RUN(upstream_keep_resident_never_evicts_co_residents);
    RUN(upstream_capacity_full_eviction_chooses_non_protected);
    RUN(upstream_capacity_full_falls_back_to_config_protected);
    RUN(upstream_declines_when_every_slot_holds_a_tag_pinned_model);
    RUN(upstream_never_evicts_config_protected_for_pinned_keep);
    RUN(upstream_tag_pinned_keep_may_take_an_unprotected_slot);
    RUN(upstream_router_without_capacity_swaps_only_unprotected);
    RUN(upstream_jit_evicts_nothing_and_ranks_fallback_unprotected_first);
    RUN(upstream_scheduler_releases_only_own_unprotected_stragglers);
    RUN(upstream_observe_only_opt_out_never_evicts_and_still_reports);
    RUN(upstream_stress_notices);
    RUN(upstream_unloads_then_ttl_skips);
    RUN(upstream_classifies_configured_models_as_protected);
    RUN(upstream_degrades_list_and_unload_failures);
    RUN(upstream_caches_an_opt_out_observation);
    RUN(upstream_env_opt_out);
    RUN(upstream_per_target_lifecycle);
    RUN(upstream_collects_protected_ids_in_order);
    RUN(upstream_tags_each_id_with_its_plane);
    RUN(upstream_names_the_role_of_an_evicted_config_model);
    RUN(upstream_still_protects_a_bare_configured_id);
    RUN(upstream_resident_models_preserves_vram_and_total_size);
    RUN(upstream_resident_models_omits_unreported_sizes);
    RUN(upstream_resident_models_divergent_model_name_as_aliases);
    RUN(upstream_resident_models_keeps_model_matching_id_or_alias);
    RUN(role_precedence_first_known_role_wins);
    RUN(tags_that_protect);
    RUN(eviction_order_and_minimum);
    RUN(w8_capacity_unknown_evicts_one);
    RUN(w18_plan_returns_a_reason_code);
    RUN(w19_observe_never_mutates_any_strategy);
    RUN(fit_clamps_only_beside_neighbours);
    RUN(fit_ceiling_env_parsing);
    RUN(fit_in_decide_uses_neighbours_after_eviction);
    RUN(fit_bytes_pure);
    RUN(fit_bytes_in_decide);
    RUN(w2_cache_is_per_target_and_model);
    RUN(w3_declines_are_deduplicated);
    RUN(w4_failed_unloads_are_never_cached);
    RUN(w9_target_keys_are_normalised);
    RUN(cache_full_replaces_least_recently_used);
    RUN(determinism_shuffled_residents_give_the_same_plan);
    RUN(limits_65_residents_is_a_clean_error);
    RUN(hostile_ids_are_rejected_cleanly);
    RUN(hostile_duplicates_and_aliases_never_evict_protected);
    RUN(upstream_loadability_gate_declines_without_eviction_notices);
    RUN(notice_format_truncates_safely);
    RUN(notice_escapes_server_ids);
    RUN(w12_free_slot_without_memory_evicts_by_bytes);
    RUN(w12_fewest_evictions_that_free_enough);
    RUN(w12_spares_victims_made_unneeded);
    RUN(w12_unknown_sizes_change_nothing);
    RUN(w12_scheduler_releases_only_what_is_needed);
    RUN(w12_router_capacity_unknown_uses_sizes);
    return RSD_TEST_END();
}
