/* The conformance check in C (see tests/conformance/README.md): what it does is picked by spec.behave. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preflight.h"

/* Evaluations this instance has served: 1 in a fresh instance, more when the host reuses instances. */
static unsigned calls;

static pf_outcome check(const pf_request *request) {
    calls++;
    const pf_json *spec = pf_json_get(request->object, "spec");
    const char *behave = pf_json_string(pf_json_get(spec, "behave"));
    if (behave == NULL) {
        return pf_invalid_object("the object does not match the check's type: spec.behave is not a string");
    }
    if (strcmp(behave, "proceed") == 0) {
        const char *greeting = pf_json_string(pf_json_get(request->config, "greeting"));
        char now[24];
        snprintf(now, sizeof now, "%llu",
                 (unsigned long long)request->now_seconds * 1000 + request->now_nanoseconds / 1000000);
        pf_outcome outcome = pf_because(pf_proceed(), "Ready", "ready");
        outcome = pf_output(outcome, "namespace", request->target.namespace == NULL ? "" : request->target.namespace);
        outcome = pf_output(outcome, "greeting", greeting == NULL ? "" : greeting);
        return pf_output(outcome, "now", now);
    }
    if (strcmp(behave, "requeue") == 0) {
        const pf_json *seconds = pf_json_get(spec, "seconds");
        double count = pf_json_number(seconds, -1);
        if (seconds != NULL && (count < 0 || count != floor(count) || count > UINT32_MAX)) {
            return pf_invalid_object("the object does not match the check's type: spec.seconds is not a count");
        }
        uint64_t delay = seconds == NULL ? 0 : (uint64_t)count;
        return pf_because(pf_requeue_after_ms(delay * 1000), "Waiting", "waiting %llu s", (unsigned long long)delay);
    }
    if (strcmp(behave, "since") == 0) {
        const char *text = pf_json_string(pf_json_get(spec, "at"));
        int64_t at;
        if (!pf_parse_time(text, &at)) {
            return pf_invalid_object("the object does not match the check's type: spec.at: \"%s\" is not an RFC 3339 time",
                                     text == NULL ? "" : text);
        }
        char echoed[24];
        snprintf(echoed, sizeof echoed, "%lld", (long long)at);
        return pf_output(pf_because(pf_proceed(), "Parsed", "%s", ""), "at", echoed);
    }
    if (strcmp(behave, "count") == 0) {
        char count[16];
        snprintf(count, sizeof count, "%u", calls);
        return pf_output(pf_because(pf_proceed(), "Counted", "%s", ""), "calls", count);
    }
    if (strcmp(behave, "block") == 0) return pf_because(pf_block(), "Blocked", "blocked");
    if (strcmp(behave, "error") == 0) return pf_because(pf_error("it failed"), "Failed", "%s", "");
    if (strcmp(behave, "bad-reason") == 0) return pf_because(pf_proceed(), "not camel case", "%s", "");
    if (strcmp(behave, "trap") == 0) abort();
    if (strcmp(behave, "loop") == 0) {
        for (volatile unsigned spins = 0;; spins++) {
        }
    }
    return pf_error("unknown behaviour \"%s\"", behave);
}

PREFLIGHT_CHECK(check)
