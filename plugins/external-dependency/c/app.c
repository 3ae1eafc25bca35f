/* Do not reconcile until an external system says the dependency exists; then expose its key. The C build of
 * plugins/external-dependency, answering exactly as the Rust build: the object names its dependency in
 * spec.dependency; GET {endpoint}{dependency} answers 200 with {"key": ...} (proceed, and output the key), 404
 * (requeue after retryAfterSeconds plus jitter), or anything else (an error). The check's ConfigMap must grant
 * the endpoint (its `http` key):
 *
 *     {"endpoint": "https://deps.example.com/dependencies/", "retryAfterSeconds": 600, "jitterPercent": 10}
 */
#include <stdlib.h>
#include <string.h>

#include "preflight.h"

static bool plain_name(const char *name) {
    for (const char *c = name; *c != '\0'; c++) {
        bool allowed = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                       *c == '-' || *c == '_' || *c == '.';
        if (!allowed) return false;
    }
    return true;
}

static pf_outcome check(const pf_request *request) {
    const char *endpoint = pf_json_string(pf_json_get(request->config, "endpoint"));
    double retry_after_seconds = pf_json_number(pf_json_get(request->config, "retryAfterSeconds"), 600);
    double jitter_percent = pf_json_number(pf_json_get(request->config, "jitterPercent"), 10);
    const char *output_key = pf_json_string(pf_json_get(request->config, "outputKey"));
    const char *dependency = pf_json_string(pf_json_get(pf_json_get(request->object, "spec"), "dependency"));
    if (dependency == NULL || dependency[0] == '\0') {
        return pf_because(pf_error("spec.dependency is empty"), "InvalidSpec", "%s", "");
    }
    if (!plain_name(dependency)) {
        return pf_because(pf_error("spec.dependency \"%s\" is not a plain name", dependency), "InvalidSpec", "%s", "");
    }
    size_t url_length = strlen(endpoint == NULL ? "" : endpoint) + strlen(dependency) + 1;
    char *url = malloc(url_length);
    if (url == NULL) abort();
    strcpy(url, endpoint == NULL ? "" : endpoint);
    strcat(url, dependency);
    pf_response response;
    char *failure = pf_http_get(url, NULL, 0, &response);
    if (failure != NULL) {
        pf_outcome outcome = pf_error("%s", failure);
        free(failure);
        free(url);
        return outcome;
    }
    pf_outcome outcome;
    if (response.status == 200) {
        char problem[256];
        pf_json *found = pf_json_parse(response.body, response.body_length, problem, sizeof problem);
        const char *key = pf_json_string(pf_json_get(found, "key"));
        if (key == NULL) {
            outcome = pf_error("the response is not the JSON expected: %s", found == NULL ? problem : "no key");
        } else {
            outcome = pf_output(pf_because(pf_proceed(), "DependencyAvailable", "%s is available", dependency),
                                output_key == NULL ? "dependencyKey" : output_key, key);
        }
        pf_json_free(found);
    } else if (response.status == 404) {
        uint64_t delay_ms = pf_with_jitter_ms((uint64_t)retry_after_seconds * 1000, (uint32_t)jitter_percent,
                                              &request->target);
        outcome = pf_because(pf_requeue_after_ms(delay_ms), "DependencyMissing",
                             "%s does not exist yet; checking again every %.0f s", dependency, retry_after_seconds);
    } else {
        outcome = pf_error("%s answered %d", url, response.status);
    }
    pf_response_free(&response);
    free(url);
    return outcome;
}

static char *validate(const pf_json *config) {
    static const char *const known[] = {"endpoint", "retryAfterSeconds", "jitterPercent", "outputKey"};
    for (size_t i = 0; i < pf_json_length(config); i++) {
        const char *key = pf_json_key_at(config, i);
        bool found = false;
        for (size_t k = 0; k < sizeof known / sizeof *known; k++) found = found || strcmp(key, known[k]) == 0;
        if (!found) return pf_refuse("unknown field `%s`", key);
    }
    const char *endpoint = pf_json_string(pf_json_get(config, "endpoint"));
    if (endpoint == NULL || (strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0)) {
        return pf_refuse("endpoint \"%s\" must be an http:// or https:// URL", endpoint == NULL ? "" : endpoint);
    }
    const pf_json *retry = pf_json_get(config, "retryAfterSeconds");
    if (retry != NULL && pf_json_number(retry, 1) == 0) return pf_refuse("retryAfterSeconds must be at least 1");
    return NULL;
}

PREFLIGHT_CHECK_WITH_VALIDATE(check, validate)
