/* lms_scan_ref.h -- the LM Studio lookups as plain scans, exactly as they were before
   W20 (resolution S15-S17, peers, residents S27): the reference that tests/test_lms_index.c
   and fuzz/fuzz_lms_index.c compare the indexed rsd_lms_resolve / rsd_lms_residents with.
   Include after residency.h. Not part of the library. */
#ifndef LMS_SCAN_REF_H
#define LMS_SCAN_REF_H
#include <string.h>

static uint32_t ref_peers(rsd_str id, const rsd_lms_peer *peers, int n_peers) {
    uint32_t mask = 0;
    int p, q, j;
    for (p = 0; p < n_peers; p++) {
        bool dup = false, has = false;
        for (q = 0; q < p && !dup; q++)
            if ((mask >> q) & 1u) dup = rsd_str_eq(peers[q].target_id, peers[p].target_id);
        if (dup || !peers[p].instance_ids) continue;
        for (j = 0; j < peers[p].n_instance_ids && !has; j++) has = rsd_str_eq(peers[p].instance_ids[j], id);
        if (has) mask |= 1u << p;
    }
    return mask;
}

static void ref_resolve(const rsd_lms_catalog *cat, rsd_str requested, rsd_str default_id, const rsd_lms_peer *peers,
                        int n_peers, rsd_lms_resolution *out) {
    int m, i, pick;
    memset(out, 0, sizeof *out);
    out->model = out->instance = -1;
    out->wire_id = requested;
    for (m = 0; m < cat->n_models; m++) {
        pick = -1;
        for (i = 0; i < cat->n_instances; i++)
            if (cat->instances[i].model == m && rsd_str_eq(cat->instances[i].id, requested)) {
                pick = i;
                break;
            }
        if (pick < 0 && rsd_str_eq(cat->models[m].key, requested)) {
            int first = -1, quiet = -1;
            for (i = 0; i < cat->n_instances; i++) {
                if (cat->instances[i].model != m) continue;
                if (first < 0) first = i;
                if (default_id.len && rsd_str_eq(cat->instances[i].id, default_id)) { pick = i; break; }
                if (quiet < 0 && !ref_peers(cat->instances[i].id, peers, n_peers)) quiet = i;
            }
            if (pick < 0) pick = quiet >= 0 ? quiet : first;
            if (pick < 0) {
                out->state = RSD_LMS_JIT;
                out->model = m;
                return;
            }
        }
        if (pick >= 0) {
            out->state = RSD_LMS_INSTANCE;
            out->model = m;
            out->instance = pick;
            out->wire_id = cat->instances[pick].id;
            out->peer_mask = ref_peers(out->wire_id, peers, n_peers);
            return;
        }
    }
}

static int ref_residents(const rsd_lms_catalog *cat, const rsd_str *owned_ids, int n_owned, rsd_resident *out, int cap) {
    uint8_t seen[RSD_LMS_MAX_MODELS];
    int i, j, n = 0, m;
    memset(seen, 0, sizeof seen);
    for (i = 0; i < cat->n_instances; i++) {
        m = cat->instances[i].model;
        if (!seen[m]) {
            if (n >= cap) return RSD_ERR_BUFFER;
            seen[m] = 1;
            memset(&out[n], 0, sizeof out[n]);
            out[n].model_id = cat->models[m].key;
            out[n].size_bytes = cat->models[m].size_bytes;
            out[n].has_size = cat->models[m].has_size;
            n++;
        }
        for (j = 0; j < n_owned; j++)
            if (rsd_str_eq(owned_ids[j], cat->instances[i].id)) {
                int r;
                for (r = 0; r < n; r++)
                    if (rsd_str_eq(out[r].model_id, cat->models[m].key)) out[r].loaded_by_us = true;
            }
    }
    return n;
}

#endif
