/* {{name}}: a preflight check. While the object's spec.paused is true, do not reconcile it: evaluate again after
 * retryAfterSeconds (configuration, default 60). */
#include "preflight.h"

static pf_outcome check(const pf_request *request) {
    const pf_json *paused = pf_json_get(pf_json_get(request->object, "spec"), "paused");
    if (paused != NULL && pf_json_type_of(paused) != PF_JSON_BOOL) {
        return pf_invalid_object("the object does not match the check's type: spec.paused is not a boolean");
    }
    double seconds = pf_json_number(pf_json_get(request->config, "retryAfterSeconds"), 60);
    if (pf_json_bool(paused, false)) {
        return pf_because(pf_requeue_after_ms((uint64_t)(seconds * 1000)), "Paused",
                          "paused; checking again in %.0f s", seconds);
    }
    return pf_because(pf_proceed(), "Ready", "not paused");
}

PREFLIGHT_CHECK(check)
