/* Do not reconcile until the dependencies an object names are available; retry in N minutes, with jitter.
 * The C build of plugins/dependency-ready: the same configuration, answers and fixtures
 * (plugins/dependency-ready/fixtures.yaml):
 *
 *     {"available": ["postgres-main"], "retryAfterSeconds": 600, "jitterPercent": 10}
 */
#include <stdlib.h>
#include <string.h>

#include "preflight.h"

static bool listed(const pf_json *names, const char *name) {
    for (size_t i = 0; i < pf_json_length(names); i++) {
        const char *listed_name = pf_json_string(pf_json_at(names, i));
        if (listed_name != NULL && strcmp(listed_name, name) == 0) return true;
    }
    return false;
}

static pf_outcome check(const pf_request *request) {
    const pf_json *spec = pf_json_get(request->object, "spec");
    if (spec != NULL && pf_json_type_of(spec) != PF_JSON_OBJECT) {
        return pf_invalid_object("the object does not match the check's type: spec is not a mapping");
    }
    const pf_json *depends_on = pf_json_get(spec, "dependsOn");
    if (depends_on != NULL && !pf_json_is_string_array(depends_on)) {
        return pf_invalid_object("the object does not match the check's type: spec.dependsOn is not a list of names");
    }
    const pf_json *available = pf_json_get(request->config, "available");
    double retry_after_seconds = pf_json_number(pf_json_get(request->config, "retryAfterSeconds"), 600);
    double jitter_percent = pf_json_number(pf_json_get(request->config, "jitterPercent"), 10);

    char missing[1024] = "";
    for (size_t i = 0; i < pf_json_length(depends_on); i++) {
        const char *name = pf_json_string(pf_json_at(depends_on, i));
        if (listed(available, name)) continue;
        if (missing[0] != '\0') strncat(missing, ", ", sizeof missing - strlen(missing) - 1);
        strncat(missing, name, sizeof missing - strlen(missing) - 1);
    }
    if (missing[0] == '\0') {
        return pf_because(pf_proceed(), "DependenciesAvailable", "all dependencies are available");
    }
    uint64_t delay_ms = pf_with_jitter_ms((uint64_t)(retry_after_seconds * 1000), (uint32_t)jitter_percent,
                                          &request->target);
    pf_debug("%s is waiting for %s", request->target.name, missing);
    return pf_because(pf_requeue_after_ms(delay_ms), "DependencyMissing",
                      "waiting for %s; checking again every %.0f s", missing, retry_after_seconds);
}

static char *validate(const pf_json *config) {
    const pf_json *available = pf_json_get(config, "available");
    if (available != NULL && pf_json_type_of(available) != PF_JSON_ARRAY) {
        return pf_refuse("available must be a list of names");
    }
    return NULL;
}

PREFLIGHT_CHECK_WITH_VALIDATE(check, validate)
