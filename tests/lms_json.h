/* lms_json.h -- LM Studio catalog pieces written with the library's JSON writer, for the
   tests and the fuzz targets that build REST v1 bodies (test helper, not part of the
   library). Include after residency.h.
     lms_w_instance(w, id, len, ctx)   one loaded_instances entry of a v1 model:
                                       {"id":..., "config":{"context_length":ctx}}
                                       (no context_length when ctx is 0) */
#ifndef RSD_TESTS_LMS_JSON_H
#define RSD_TESTS_LMS_JSON_H

static inline void lms_w_instance(rsd_json_writer *w, const char *id, size_t len, int64_t ctx) {
    rsd_json_w_begin_object(w);
    rsd_json_w_key(w, "id");
    rsd_json_w_strn(w, id, len);
    rsd_json_w_key(w, "config");
    rsd_json_w_begin_object(w);
    if (ctx) {
        rsd_json_w_key(w, "context_length");
        rsd_json_w_int(w, ctx);
    }
    rsd_json_w_end_object(w);
    rsd_json_w_end_object(w);
}
#endif
