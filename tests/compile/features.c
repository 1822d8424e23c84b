/* The feature macros (RSD_NO_OLLAMA, RSD_NO_LMSTUDIO, RSD_NO_ETCD, RSD_NO_HTTP_SERVER,
   RSD_NO_PROC, RSD_NO_DETECT, RSD_NO_DEVMEM, RSD_NO_GGUF, RSD_NO_SERVE_LEASE, RSD_NO_ENSURE_KV), given on the command line in every combination by tests/compile.sh: the
   implementation builds, links and what is compiled out says so. */
#define RESIDENCY_IMPLEMENTATION
#include "../../residency_http.h"
int main(void) {
    rsd_ensurer_desc ed;
    rsd_ensurer *e;
    rsd_etcd *co = NULL;
    rsd_etcd_desc cd;
    int bad, rc;
    memset(&ed, 0, sizeof ed);
    ed.no_state = true;
    ed.ignore_env = true;
    e = rsd_ensurer_create(&ed);
    bad = !e || !rsd_runtime_router();
#ifdef RSD_NO_OLLAMA
    bad |= rsd_runtime_ollama() != NULL;
#else
    bad |= rsd_runtime_ollama() == NULL;
#endif
#ifdef RSD_NO_LMSTUDIO
    bad |= rsd_runtime_lmstudio() != NULL;
#else
    bad |= rsd_runtime_lmstudio() == NULL;
#endif
    memset(&cd, 0, sizeof cd);
    cd.url = "etcd://127.0.0.1:2379";
    co = rsd_etcd_create(&cd);
#ifdef RSD_NO_ETCD
    bad |= co != NULL || rsd_etcd_footprint(&cd) != 0;
#else
    bad |= co == NULL; /* no I/O at create */
#endif
    rsd_etcd_destroy(co);
    { /* an ensurer given a coordinator: created (no I/O yet), or refused where etcd is not built */
        rsd_ensurer *ce;
        rsd_ensurer_desc cdd = ed;
        cdd.coord = "etcd://127.0.0.1:2379";
        ce = rsd_ensurer_create(&cdd);
#ifdef RSD_NO_ETCD
        bad |= ce != NULL;
#else
        bad |= ce == NULL;
#endif
        bad |= (rsd_ensurer_footprint(&cdd) == 0) != (ce == NULL); /* 0: a desc create refuses */
        rsd_ensurer_destroy(ce);
    }
    if (e) { /* a request with runtime AUTO: detection starts (no I/O at begin), or fails at once */
        rsd_ensure_req q;
        rsd_ensure_result r;
        memset(&q, 0, sizeof q);
        q.url = "http://127.0.0.1:9/";
        q.model = "m";
        rc = rsd_ensurer_begin(e, &q, 1000);
        rsd_ensurer_query(e, &r);
#ifdef RSD_NO_DETECT
        bad |= rc != RSD_ERR_NOT_FOUND || r.requests != 0 || !strstr(r.message, "no runtime detection in this build");
#else
        bad |= rc != RSD_OK;
#endif
    }
    rsd_ensurer_destroy(e);
#ifndef RSD_NO_DEVMEM
    { /* the probe over roots that do not exist: no entries, no error */
        rsd_devmem_desc dd;
        rsd_devmem_dev dv[2];
        rsd_devmem *dm;
        memset(&dd, 0, sizeof dd);
        dd.nvml_path = "";
        dd.sys_root = dd.proc_root = "/nonexistent-rsd-features";
        dd.ignore_env = true;
        dm = rsd_devmem_create(&dd);
        bad |= !dm || rsd_devmem_read(dm, NULL, 0, dv, 2) != 0;
        rsd_devmem_destroy(dm);
    }
#endif
#ifndef RSD_NO_GGUF
    { /* the GGUF reader: a header in two pieces */
        static rsd_gguf g;
        static const unsigned char h[24] = {'G', 'G', 'U', 'F', 3};
        rsd_gguf_init(&g, NULL);
        bad |= rsd_gguf_feed(&g, h, 10) != RSD_PENDING || rsd_gguf_feed(&g, h + 10, 14) != RSD_OK;
    }
#endif
    { /* an rsd-serve lease's release: begun (no I/O yet), or refused without that lease */
        rsd_ensurer_desc ld;
        rsd_ensure_req lq;
        rsd_ensurer *le;
        memset(&ld, 0, sizeof ld);
        ld.no_state = true;
        ld.ignore_env = true;
        memset(&lq, 0, sizeof lq);
        lq.url = "http://127.0.0.1:9";
        le = rsd_ensurer_create(&ld);
#ifdef RSD_NO_SERVE_LEASE
        bad |= !le || rsd_ensurer_lease_return_begin(le, &lq, "rsd-serve:1", 0) != RSD_ERR_ARG;
#else
        bad |= !le || rsd_ensurer_lease_return_begin(le, &lq, "rsd-serve:1", 0) != RSD_OK;
#endif
        rsd_ensurer_destroy(le);
    }
    { /* the ensurer's slot saves (desc.kv_slots): created, or refused without them */
        rsd_ensurer_desc kd;
        rsd_ensurer *ke;
        memset(&kd, 0, sizeof kd);
        kd.no_state = true;
        kd.ignore_env = true;
        kd.kv_slots = true;
        ke = rsd_ensurer_create(&kd);
#ifdef RSD_NO_ENSURE_KV
        bad |= ke != NULL;
#else
        bad |= ke == NULL;
#endif
        rsd_ensurer_destroy(ke);
    }
    return bad;
}
