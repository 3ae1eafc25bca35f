/* Do not reconcile until the ConfigMap an object references exists (and holds the required key); retry after
 * a delay with jitter. The C build of plugins/referenced-config: the same configuration and answers.
 *
 *     {"requiredKey": "endpoint", "retryAfterSeconds": 60, "jitterPercent": 10}
 */
#include <stdio.h>
#include <stdlib.h>

#include "preflight.h"

static pf_outcome waiting(const pf_request *request, const char *reason, const char *what) {
    double retry_after_seconds = pf_json_number(pf_json_get(request->config, "retryAfterSeconds"), 60);
    double jitter_percent = pf_json_number(pf_json_get(request->config, "jitterPercent"), 10);
    uint64_t delay_ms = pf_with_jitter_ms((uint64_t)(retry_after_seconds * 1000), (uint32_t)jitter_percent,
                                          &request->target);
    return pf_because(pf_requeue_after_ms(delay_ms), reason, "%s; checking again every %.0f s", what,
                      retry_after_seconds);
}

static pf_outcome check(const pf_request *request) {
    const char *name = pf_json_string(pf_json_get(pf_json_get(request->object, "spec"), "configRef"));
    if (name == NULL || name[0] == '\0') return pf_because(pf_error("spec.configRef is empty"), "InvalidSpec", "%s", "");
    const char *key = pf_json_string(pf_json_get(request->config, "requiredKey"));
    pf_json *found = NULL;
    char *error = NULL;
    char what[512];
    switch (pf_get("v1", "ConfigMap", NULL, name, &found, &error)) {
    case PF_LOOKUP_FAILED: {
        pf_outcome failed = pf_error("%s", error);
        free(error);
        return failed;
    }
    case PF_LOOKUP_NOT_FOUND:
        snprintf(what, sizeof what, "waiting for ConfigMap %s", name);
        return waiting(request, "ConfigMissing", what);
    case PF_LOOKUP_FOUND:
        break;
    }
    bool holds = key == NULL || pf_json_get(pf_json_get(found, "data"), key) != NULL;
    pf_json_free(found);
    if (!holds) {
        snprintf(what, sizeof what, "ConfigMap %s has no key %s", name, key);
        return waiting(request, "ConfigIncomplete", what);
    }
    return pf_because(pf_proceed(), "ConfigPresent", "ConfigMap %s is there", name);
}

PREFLIGHT_CHECK(check)
