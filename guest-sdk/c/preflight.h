/* Write a preflight check in C: a function from a request to an outcome.
 *
 *     #include "preflight.h"
 *
 *     static pf_outcome check(const pf_request *request) {
 *         const pf_json *spec = pf_json_get(request->object, "spec");
 *         if (pf_json_bool(pf_json_get(spec, "paused"), false))
 *             return pf_because(pf_requeue_after_ms(600000), "Paused", "paused; checking again in 10 minutes");
 *         return pf_proceed();
 *     }
 *
 *     PREFLIGHT_CHECK(check)
 *
 * The idioms are the Rust SDK's: proceed / requeue after / block / error, with a reason and a message, outputs,
 * logging. The object and the configuration arrive parsed (preflight_json.h). A configuration that is not a JSON
 * object is an error with reason InvalidConfig; pf_invalid_object reports an object without the shape the check
 * needs (reason InvalidObject). Build for the guest world `preflight:guest/check` (guest-sdk/wit) with
 * wit-bindgen c, Debian's clang and wasi-libc, and the reactor adapter (guest-sdk/c/README.md).
 */
#ifndef PREFLIGHT_H
#define PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "preflight_json.h"

/** Which object is being checked. */
typedef struct {
    const char *group;     /* empty for the core group */
    const char *version;
    const char *kind;
    const char *namespace; /* NULL for cluster-scoped objects */
    const char *name;
} pf_target;

/** What a check is given: the object and its configuration parsed, the object's identity, the host's clock. */
typedef struct {
    const pf_json *object;
    const pf_json *config;
    const char *raw_object; /* the object's JSON text */
    pf_target target;
    uint64_t now_seconds; /* since the Unix epoch, UTC */
    uint32_t now_nanoseconds;
} pf_request;

/** The most outputs a result may carry (the contract's limit). */
#define PF_MAX_OUTPUTS 16

/** The decision of a check; build it with the functions below (strings are copied). */
typedef struct {
    bool proceed;
    bool has_delay;
    uint32_t delay_ms;
    char *error;   /* NULL: no error */
    char *reason;  /* NULL: the host picks a default */
    char *message;
    size_t output_count;
    char *output_keys[PF_MAX_OUTPUTS];
    char *output_values[PF_MAX_OUTPUTS];
} pf_outcome;

/** The object may be reconciled now. */
pf_outcome pf_proceed(void);
/** Do not reconcile now; evaluate again after `delay_ms` milliseconds. */
pf_outcome pf_requeue_after_ms(uint64_t delay_ms);
/** Do not reconcile; evaluate again when the object or the check changes. */
pf_outcome pf_block(void);
/** The check could not decide (printf-style message); the host backs off and retries. */
pf_outcome pf_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
/** The object does not have the shape the check needs: an error with reason InvalidObject. */
pf_outcome pf_invalid_object(const char *format, ...) __attribute__((format(printf, 1, 2)));
/** Sets the condition's reason (UpperCamelCase) and message (printf-style). */
pf_outcome pf_because(pf_outcome outcome, const char *reason, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/** For a proceeding outcome: evaluate again after `delay_ms` even if nothing changes. */
pf_outcome pf_recheck_after_ms(pf_outcome outcome, uint64_t delay_ms);
/** Records `key` = `value` on the object (a key given twice keeps the last value; more than
 *  PF_MAX_OUTPUTS keys make the outcome an error). */
pf_outcome pf_output(pf_outcome outcome, const char *key, const char *value);

/** `base_ms` plus up to `percent`% of it, chosen by a hash of the object's namespace and name (FNV-1a, the
 *  same rule as every SDK's with_jitter): objects spread their retries, each keeps its schedule. */
uint64_t pf_with_jitter_ms(uint64_t base_ms, uint32_t percent, const pf_target *target);

/** Reads an RFC 3339 date-time as Kubernetes writes them ("2026-12-04T10:15:30Z", "2026-12-04T11:15:30.25+01:00")
 *  into *unix_ms (Unix milliseconds), by the rule every SDK holds to: YYYY-MM-DDTHH:MM:SS, then 1 to 9 fraction
 *  digits after a "." (truncated to milliseconds), then "Z" or "+HH:MM"/"-HH:MM"; "T" and "Z" upper case; the
 *  date must exist, seconds 0-59, offsets up to 23:59. Returns false (and leaves *unix_ms) otherwise. */
bool pf_parse_time(const char *text, int64_t *unix_ms);

/** Log lines, tagged by the host with the check and the object (printf-style). */
void pf_trace(const char *format, ...) __attribute__((format(printf, 1, 2)));
void pf_debug(const char *format, ...) __attribute__((format(printf, 1, 2)));
void pf_info(const char *format, ...) __attribute__((format(printf, 1, 2)));
void pf_warn(const char *format, ...) __attribute__((format(printf, 1, 2)));
void pf_error_log(const char *format, ...) __attribute__((format(printf, 1, 2)));

/** How a lookup of other objects (contract 0.2, answered by the operator from its watch caches) went. */
typedef enum {
    PF_LOOKUP_FOUND,     /* the object (or the list) is in *result */
    PF_LOOKUP_NOT_FOUND, /* no such object */
    PF_LOOKUP_FAILED,    /* refused or failed: *error says what is not granted or what went wrong */
} pf_lookup;

/** Reads the object `name` of `kind` in `api_version` ("v1", "apps/v1") in `namespace` (NULL: the gated
 *  object's). On PF_LOOKUP_FOUND, *object is the parsed object (free it with pf_json_free); on
 *  PF_LOOKUP_FAILED, *error is an allocated message (free it). Only the kinds, and Secrets by name, that the
 *  check's ConfigMap grants can be read. */
pf_lookup pf_get(const char *api_version, const char *kind, const char *namespace, const char *name, pf_json **object,
                 char **error);
/** Reads the objects of `kind` in `api_version` matching `label_selector` ("app=db,tier!=cache"; "": all),
 *  sorted by namespace and name, as one parsed JSON array in *objects (free it with pf_json_free). */
pf_lookup pf_list(const char *api_version, const char *kind, const char *namespace, const char *label_selector,
                  pf_json **objects, char **error);

/** Most redirects pf_http_get follows; each one is a new request the host checks against the allow-list. */
#define PF_MAX_REDIRECTS 5

/** A request or response header field (NUL-terminated name and value). */
typedef struct {
    char *name;
    char *value;
} pf_header;

/** An HTTP response read whole (the host caps its size). */
typedef struct {
    int status;
    pf_header *headers;  /* names in lower case, as the host gives them */
    size_t header_count;
    char *body;          /* NUL-terminated after body_length bytes */
    size_t body_length;
} pf_response;

/** Sends GET `url` through the host's wasi:http (contract 0.2) and reads the whole response into *response,
 *  following up to PF_MAX_REDIRECTS redirects, with `header_count` request `headers` (NULL, 0: none). Returns
 *  NULL on success (free the response with pf_response_free), else an allocated message (free it) that names
 *  the wasi:http error code as every SDK does ("GET http://...: HttpRequestDenied": not in the check's
 *  allow-list). The host sends only to destinations the check's ConfigMap grants (its `http` key), and
 *  refuses the headers it sets itself (Host, the grant's credentials). */
char *pf_http_get(const char *url, const pf_header *headers, size_t header_count, pf_response *response);
/** The first value of header `name` (case-insensitive), or NULL. */
const char *pf_response_header(const pf_response *response, const char *name);
/** Frees what pf_http_get put in *response. */
void pf_response_free(pf_response *response);

/** The function a check defines. */
typedef pf_outcome (*pf_check_fn)(const pf_request *request);
/** An optional configuration check, called when the configuration is loaded: return NULL to accept it, or
 *  pf_refuse(...) to refuse it with a message the operator reports on the ConfigMap. */
typedef char *(*pf_validate_fn)(const pf_json *config);

/** A refusal for a validate function, printf-style (allocated; the SDK frees it). */
char *pf_refuse(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* What PREFLIGHT_CHECK defines and the SDK's exports call. */
extern const pf_check_fn preflight_user_check;
extern const pf_validate_fn preflight_user_validate;

/** Makes `check` the check this component exports. */
#define PREFLIGHT_CHECK(check) PREFLIGHT_CHECK_WITH_VALIDATE(check, NULL)
/** Makes `check` the check this component exports, and `validate` its configuration check. */
#define PREFLIGHT_CHECK_WITH_VALIDATE(check, validate)                                                   \
    const pf_check_fn preflight_user_check = (check);                                                    \
    const pf_validate_fn preflight_user_validate = (validate);

#endif
