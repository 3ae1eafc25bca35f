/* The C SDK: the exports of the contract's world, turning the host's request into a pf_request and a
 * pf_outcome into the contract's result (see preflight.h). Built with the bindings `wit-bindgen c` generates for
 * the world preflight:check/preflight-check-with-config@0.2.0. */
#include "preflight.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preflight_check_with_config.h"

typedef preflight_check_with_config_string_t wit_string;

/* A NUL-terminated copy of a WIT string (the canonical ABI's strings are not terminated). */
static char *terminated(const wit_string *text) {
    char *copy = malloc(text->len + 1);
    if (copy == NULL) abort();
    memcpy(copy, text->ptr, text->len);
    copy[text->len] = '\0';
    return copy;
}

static char *vformat(const char *format, va_list arguments) {
    va_list again;
    va_copy(again, arguments);
    int length = vsnprintf(NULL, 0, format, arguments);
    char *text = malloc(length < 0 ? 1 : (size_t)length + 1);
    if (text == NULL) abort();
    if (length < 0) {
        text[0] = '\0';
    } else {
        vsnprintf(text, (size_t)length + 1, format, again);
    }
    va_end(again);
    return text;
}

static char *duplicate(const char *text) {
    char *copy = strdup(text == NULL ? "" : text);
    if (copy == NULL) abort();
    return copy;
}

static pf_outcome outcome(bool proceed) {
    pf_outcome result;
    memset(&result, 0, sizeof result);
    result.proceed = proceed;
    return result;
}

static uint32_t clamp_ms(uint64_t delay_ms) { return delay_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)delay_ms; }

pf_outcome pf_proceed(void) { return outcome(true); }

pf_outcome pf_requeue_after_ms(uint64_t delay_ms) {
    pf_outcome result = outcome(false);
    result.has_delay = true;
    result.delay_ms = clamp_ms(delay_ms);
    return result;
}

pf_outcome pf_block(void) { return outcome(false); }

/* An error outcome with `reason` (NULL: the host's default) and a formatted message. */
static pf_outcome verror(const char *reason, const char *format, va_list arguments) {
    pf_outcome result = outcome(false);
    result.error = vformat(format, arguments);
    result.reason = reason == NULL ? NULL : duplicate(reason);
    return result;
}

pf_outcome pf_error(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    pf_outcome result = verror(NULL, format, arguments);
    va_end(arguments);
    return result;
}

pf_outcome pf_invalid_object(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    pf_outcome result = verror("InvalidObject", format, arguments);
    va_end(arguments);
    return result;
}

pf_outcome pf_because(pf_outcome result, const char *reason, const char *format, ...) {
    free(result.reason);
    free(result.message);
    result.reason = duplicate(reason);
    va_list arguments;
    va_start(arguments, format);
    result.message = vformat(format, arguments);
    va_end(arguments);
    return result;
}

pf_outcome pf_recheck_after_ms(pf_outcome result, uint64_t delay_ms) {
    result.has_delay = true;
    result.delay_ms = clamp_ms(delay_ms);
    return result;
}

pf_outcome pf_output(pf_outcome result, const char *key, const char *value) {
    for (size_t i = 0; i < result.output_count; i++) {
        if (strcmp(result.output_keys[i], key) == 0) {
            free(result.output_values[i]);
            result.output_values[i] = duplicate(value);
            return result;
        }
    }
    if (result.output_count == PF_MAX_OUTPUTS) {
        if (result.error == NULL) {
            result.error = pf_refuse("more than %d outputs", PF_MAX_OUTPUTS);
        }
        return result;
    }
    result.output_keys[result.output_count] = duplicate(key);
    result.output_values[result.output_count] = duplicate(value);
    result.output_count++;
    return result;
}

char *pf_refuse(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    char *text = vformat(format, arguments);
    va_end(arguments);
    return text;
}

uint64_t pf_with_jitter_ms(uint64_t base_ms, uint32_t percent, const pf_target *target) {
    uint64_t spread_ms = base_ms * (percent > 100 ? 100 : percent) / 100;
    if (spread_ms == 0) return base_ms;
    uint64_t hash = 0xcbf29ce484222325ULL;
    const char *parts[] = {target->namespace == NULL ? "" : target->namespace, "/", target->name};
    for (size_t i = 0; i < 3; i++) {
        for (const unsigned char *byte = (const unsigned char *)parts[i]; *byte != '\0'; byte++) {
            hash = (hash ^ *byte) * 0x100000001b3ULL;
        }
    }
    return base_ms + hash % spread_ms;
}

static void log_at(preflight_check_log_level_t level, const char *format, va_list arguments) {
    char *text = vformat(format, arguments);
    wit_string message = {(uint8_t *)text, strlen(text)};
    preflight_check_log_log(level, &message);
    free(text);
}

#define LOGGER(function, level)                                                                          \
    void function(const char *format, ...) {                                                             \
        va_list arguments;                                                                               \
        va_start(arguments, format);                                                                     \
        log_at(level, format, arguments);                                                                \
        va_end(arguments);                                                                               \
    }

LOGGER(pf_trace, PREFLIGHT_CHECK_LOG_LEVEL_TRACE)
LOGGER(pf_debug, PREFLIGHT_CHECK_LOG_LEVEL_DEBUG)
LOGGER(pf_info, PREFLIGHT_CHECK_LOG_LEVEL_INFO)
LOGGER(pf_warn, PREFLIGHT_CHECK_LOG_LEVEL_WARN)
LOGGER(pf_error_log, PREFLIGHT_CHECK_LOG_LEVEL_ERROR)

/* The configuration, parsed: an empty text is `{}`; anything but an object is refused with `error` set. */
static pf_json *parse_config(const wit_string *raw, char *error, size_t error_size) {
    size_t start = 0;
    while (start < raw->len && (raw->ptr[start] == ' ' || raw->ptr[start] == '\n' || raw->ptr[start] == '\t' ||
                                raw->ptr[start] == '\r')) {
        start++;
    }
    if (start == raw->len) return pf_json_parse("{}", 2, error, error_size);
    pf_json *config = pf_json_parse((const char *)raw->ptr, raw->len, error, error_size);
    if (config != NULL && pf_json_type_of(config) != PF_JSON_OBJECT) {
        snprintf(error, error_size, "the configuration must be a mapping");
        pf_json_free(config);
        return NULL;
    }
    return config;
}

static void set_string(wit_string *target, char *owned) {
    target->ptr = (uint8_t *)owned;
    target->len = owned == NULL ? 0 : strlen(owned);
}

/* Moves `result` into the contract's record; the bindings' post-return frees what it points to. */
static void into_result(pf_outcome result, exports_preflight_check_evaluate_preflight_result_t *ret) {
    ret->proceed = result.proceed;
    ret->requeue_after_ms.is_some = result.has_delay;
    ret->requeue_after_ms.val = result.delay_ms;
    ret->error.is_some = result.error != NULL;
    set_string(&ret->error.val, result.error);
    set_string(&ret->reason, result.reason);
    set_string(&ret->message, result.message);
    ret->outputs.len = result.output_count;
    ret->outputs.ptr = result.output_count == 0 ? NULL : calloc(result.output_count, sizeof *ret->outputs.ptr);
    if (result.output_count > 0 && ret->outputs.ptr == NULL) abort();
    for (size_t i = 0; i < result.output_count; i++) {
        set_string(&ret->outputs.ptr[i].key, result.output_keys[i]);
        set_string(&ret->outputs.ptr[i].value, result.output_values[i]);
    }
}

void exports_preflight_check_evaluate_check(exports_preflight_check_evaluate_check_request_t *raw,
                                            exports_preflight_check_evaluate_preflight_result_t *ret) {
    char problem[256] = "";
    pf_json *config = parse_config(&raw->config, problem, sizeof problem);
    if (config == NULL) {
        into_result(pf_because(pf_error("invalid check configuration: %s", problem), "InvalidConfig", "%s", ""),
                    ret);
        exports_preflight_check_evaluate_check_request_free(raw);
        return;
    }
    char *object_text = terminated(&raw->object);
    pf_json *object = pf_json_parse(object_text, raw->object.len, problem, sizeof problem);
    if (object == NULL) {
        into_result(pf_invalid_object("the object is not JSON: %s", problem), ret);
    } else {
        char *group = terminated(&raw->target.group);
        char *version = terminated(&raw->target.version);
        char *kind = terminated(&raw->target.kind);
        char *namespace = raw->target.namespace_.is_some ? terminated(&raw->target.namespace_.val) : NULL;
        char *name = terminated(&raw->target.name);
        pf_request request = {
            .object = object,
            .config = config,
            .raw_object = object_text,
            .target = {group, version, kind, namespace, name},
            .now_seconds = raw->now.seconds,
            .now_nanoseconds = raw->now.nanoseconds,
        };
        into_result(preflight_user_check(&request), ret);
        free(group);
        free(version);
        free(kind);
        free(namespace);
        free(name);
    }
    pf_json_free(object);
    pf_json_free(config);
    free(object_text);
    exports_preflight_check_evaluate_check_request_free(raw);
}

bool exports_preflight_check_configure_validate_config(wit_string *raw, wit_string *err) {
    char problem[256] = "";
    pf_json *config = parse_config(raw, problem, sizeof problem);
    char *refusal = NULL;
    if (config == NULL) {
        refusal = pf_refuse("%s", problem);
    } else if (preflight_user_validate != NULL) {
        refusal = preflight_user_validate(config);
    }
    pf_json_free(config);
    preflight_check_with_config_string_free(raw);
    if (refusal == NULL) return true;
    set_string(err, refusal);
    return false;
}

/* Lookups (contract 0.2's preflight:check/cluster): the API version split into group and version, the
 * namespace optional, the answer parsed with preflight_json. */

static preflight_check_cluster_object_kind_t object_kind(const char *api_version, const char *kind) {
    preflight_check_cluster_object_kind_t result;
    const char *slash = strrchr(api_version, '/');
    if (slash == NULL) {
        preflight_check_with_config_string_dup(&result.group, "");
        preflight_check_with_config_string_dup(&result.version, api_version);
    } else {
        preflight_check_with_config_string_dup_n(&result.group, api_version, (size_t)(slash - api_version));
        preflight_check_with_config_string_dup(&result.version, slash + 1);
    }
    preflight_check_with_config_string_dup(&result.kind, kind);
    return result;
}

/* Parses the host's answer `text` into *tree; an unparsable answer is a failure naming the kind. */
static pf_lookup parsed(const char *text, size_t length, const char *kind, pf_json **tree, char **error) {
    char problem[256];
    *tree = pf_json_parse(text, length, problem, sizeof problem);
    if (*tree == NULL) {
        *error = pf_refuse("the host's answer for %s is not JSON: %s", kind, problem);
        return PF_LOOKUP_FAILED;
    }
    return PF_LOOKUP_FOUND;
}

pf_lookup pf_get(const char *api_version, const char *kind, const char *namespace, const char *name, pf_json **object,
                 char **error) {
    *object = NULL;
    *error = NULL;
    preflight_check_cluster_object_kind_t wanted = object_kind(api_version, kind);
    wit_string in_namespace, named;
    preflight_check_with_config_string_dup(&in_namespace, namespace == NULL ? "" : namespace);
    preflight_check_with_config_string_dup(&named, name);
    preflight_check_with_config_option_string_t found;
    wit_string failure;
    bool ok = preflight_check_cluster_get(&wanted, namespace == NULL ? NULL : &in_namespace, &named, &found, &failure);
    preflight_check_cluster_object_kind_free(&wanted);
    preflight_check_with_config_string_free(&in_namespace);
    preflight_check_with_config_string_free(&named);
    if (!ok) {
        *error = terminated(&failure);
        preflight_check_with_config_string_free(&failure);
        return PF_LOOKUP_FAILED;
    }
    if (!found.is_some) return PF_LOOKUP_NOT_FOUND;
    pf_lookup result = parsed((const char *)found.val.ptr, found.val.len, kind, object, error);
    preflight_check_with_config_option_string_free(&found);
    return result;
}

pf_lookup pf_list(const char *api_version, const char *kind, const char *namespace, const char *label_selector,
                  pf_json **objects, char **error) {
    *objects = NULL;
    *error = NULL;
    preflight_check_cluster_object_kind_t wanted = object_kind(api_version, kind);
    wit_string in_namespace, selector;
    preflight_check_with_config_string_dup(&in_namespace, namespace == NULL ? "" : namespace);
    preflight_check_with_config_string_dup(&selector, label_selector == NULL ? "" : label_selector);
    preflight_check_with_config_list_string_t found;
    wit_string failure;
    bool ok =
        preflight_check_cluster_list(&wanted, namespace == NULL ? NULL : &in_namespace, &selector, &found, &failure);
    preflight_check_cluster_object_kind_free(&wanted);
    preflight_check_with_config_string_free(&in_namespace);
    preflight_check_with_config_string_free(&selector);
    if (!ok) {
        *error = terminated(&failure);
        preflight_check_with_config_string_free(&failure);
        return PF_LOOKUP_FAILED;
    }
    size_t length = 2;
    for (size_t i = 0; i < found.len; i++) length += found.ptr[i].len + 1;
    char *array = malloc(length + 1);
    if (array == NULL) abort();
    size_t at = 0;
    array[at++] = '[';
    for (size_t i = 0; i < found.len; i++) {
        if (i > 0) array[at++] = ',';
        memcpy(array + at, found.ptr[i].ptr, found.ptr[i].len);
        at += found.ptr[i].len;
    }
    array[at++] = ']';
    array[at] = '\0';
    preflight_check_with_config_list_string_free(&found);
    pf_lookup result = parsed(array, at, kind, objects, error);
    free(array);
    return result;
}
