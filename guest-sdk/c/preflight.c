/* The C SDK: the exports of the contract's world, turning the host's request into a pf_request and a
 * pf_outcome into the contract's result (see preflight.h), and the imports as helpers (lookups, outbound HTTP).
 * Built with the bindings `wit-bindgen c` generates for the guest world preflight:guest/check (guest-sdk/wit:
 * the contract and wasi:http); a check that sends no request imports no wasi:http (the linker drops it). */
#include "preflight.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check.h"

typedef check_string_t wit_string;

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

static char *formatted(const char *format, ...) __attribute__((format(printf, 1, 2)));
static char *formatted(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    char *text = vformat(format, arguments);
    va_end(arguments);
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
    check_string_free(raw);
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
        check_string_dup(&result.group, "");
        check_string_dup(&result.version, api_version);
    } else {
        check_string_dup_n(&result.group, api_version, (size_t)(slash - api_version));
        check_string_dup(&result.version, slash + 1);
    }
    check_string_dup(&result.kind, kind);
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
    check_string_dup(&in_namespace, namespace == NULL ? "" : namespace);
    check_string_dup(&named, name);
    check_option_string_t found;
    wit_string failure;
    bool ok = preflight_check_cluster_get(&wanted, namespace == NULL ? NULL : &in_namespace, &named, &found, &failure);
    preflight_check_cluster_object_kind_free(&wanted);
    check_string_free(&in_namespace);
    check_string_free(&named);
    if (!ok) {
        *error = terminated(&failure);
        check_string_free(&failure);
        return PF_LOOKUP_FAILED;
    }
    if (!found.is_some) return PF_LOOKUP_NOT_FOUND;
    pf_lookup result = parsed((const char *)found.val.ptr, found.val.len, kind, object, error);
    check_option_string_free(&found);
    return result;
}

pf_lookup pf_list(const char *api_version, const char *kind, const char *namespace, const char *label_selector,
                  pf_json **objects, char **error) {
    *objects = NULL;
    *error = NULL;
    preflight_check_cluster_object_kind_t wanted = object_kind(api_version, kind);
    wit_string in_namespace, selector;
    check_string_dup(&in_namespace, namespace == NULL ? "" : namespace);
    check_string_dup(&selector, label_selector == NULL ? "" : label_selector);
    check_list_string_t found;
    wit_string failure;
    bool ok =
        preflight_check_cluster_list(&wanted, namespace == NULL ? NULL : &in_namespace, &selector, &found, &failure);
    preflight_check_cluster_object_kind_free(&wanted);
    check_string_free(&in_namespace);
    check_string_free(&selector);
    if (!ok) {
        *error = terminated(&failure);
        check_string_free(&failure);
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
    check_list_string_free(&found);
    pf_lookup result = parsed(array, at, kind, objects, error);
    free(array);
    return result;
}

/* ---- Outbound HTTP (wasi:http/outgoing-handler; the host enforces the check's grant) ---- */

/* The wasi:http error codes by tag, named as every SDK names them. */
static const char *const ERROR_CODE_NAMES[] = {
    "DnsTimeout", "DnsError", "DestinationNotFound", "DestinationUnavailable", "DestinationIpProhibited",
    "DestinationIpUnroutable", "ConnectionRefused", "ConnectionTerminated", "ConnectionTimeout",
    "ConnectionReadTimeout", "ConnectionWriteTimeout", "ConnectionLimitReached", "TlsProtocolError",
    "TlsCertificateError", "TlsAlertReceived", "HttpRequestDenied", "HttpRequestLengthRequired",
    "HttpRequestBodySize", "HttpRequestMethodInvalid", "HttpRequestUriInvalid", "HttpRequestUriTooLong",
    "HttpRequestHeaderSectionSize", "HttpRequestHeaderSize", "HttpRequestTrailerSectionSize",
    "HttpRequestTrailerSize", "HttpResponseIncomplete", "HttpResponseHeaderSectionSize", "HttpResponseHeaderSize",
    "HttpResponseBodySize", "HttpResponseTrailerSectionSize", "HttpResponseTrailerSize",
    "HttpResponseTransferCoding", "HttpResponseContentCoding", "HttpResponseTimeout", "HttpUpgradeFailed",
    "HttpProtocolError", "LoopDetected", "ConfigurationError", "InternalError",
};

static char *http_failure(const char *url, const char *what) { return formatted("GET %s: %s", url, what); }

static char *error_code_failure(const char *url, wasi_http_types_error_code_t *code) {
    const char *name = code->tag < sizeof ERROR_CODE_NAMES / sizeof *ERROR_CODE_NAMES ? ERROR_CODE_NAMES[code->tag]
                                                                                         : "an unknown error code";
    char *failure = http_failure(url, name);
    wasi_http_types_error_code_free(code);
    return failure;
}

/* Splits an absolute http(s) URL into scheme (https or not), authority and path with query, allocated. */
static char *split_url(const char *url, bool *https, char **authority, char **path) {
    const char *rest = strstr(url, "://");
    if (rest == NULL) return formatted("\"%s\" is not an absolute URL", url);
    size_t scheme_length = (size_t)(rest - url);
    bool is_http = scheme_length == 4 && strncasecmp(url, "http", 4) == 0;
    *https = scheme_length == 5 && strncasecmp(url, "https", 5) == 0;
    if (!is_http && !*https) return formatted("\"%s\": the scheme must be http or https", url);
    rest += 3;
    size_t cut = strcspn(rest, "/?");
    if (cut == 0) return formatted("\"%s\" has no host", url);
    *authority = strndup(rest, cut);
    *path = duplicate(rest[cut] == '\0' ? "/" : rest + cut);
    if (*authority == NULL || *path == NULL) abort();
    return NULL;
}

static char *send_get(const char *url, const pf_header *headers, size_t header_count, pf_response *response) {
    bool https;
    char *authority = NULL, *path = NULL;
    char *problem = split_url(url, &https, &authority, &path);
    if (problem != NULL) return problem;
    wasi_http_types_own_fields_t fields = wasi_http_types_constructor_fields();
    for (size_t i = 0; i < header_count && problem == NULL; i++) {
        check_string_t name;
        check_string_dup(&name, headers[i].name);
        wasi_http_types_field_value_t value = {(uint8_t *)headers[i].value, strlen(headers[i].value)};
        wasi_http_types_header_error_t refused;
        if (!wasi_http_types_method_fields_append(wasi_http_types_borrow_fields(fields), &name, &value, &refused)) {
            problem = formatted("GET %s: header %s is refused", url, headers[i].name);
        }
        check_string_free(&name);
    }
    wasi_http_types_own_outgoing_request_t request = wasi_http_types_constructor_outgoing_request(fields);
    wasi_http_types_borrow_outgoing_request_t borrowed = wasi_http_types_borrow_outgoing_request(request);
    wasi_http_types_method_t get = {.tag = WASI_HTTP_TYPES_METHOD_GET};
    wasi_http_types_scheme_t scheme = {.tag = https ? WASI_HTTP_TYPES_SCHEME_HTTPS : WASI_HTTP_TYPES_SCHEME_HTTP};
    check_string_t wire_authority, wire_path;
    check_string_set(&wire_authority, authority);
    check_string_set(&wire_path, path);
    if (problem == NULL && !(wasi_http_types_method_outgoing_request_set_method(borrowed, &get) &&
                             wasi_http_types_method_outgoing_request_set_scheme(borrowed, &scheme) &&
                             wasi_http_types_method_outgoing_request_set_authority(borrowed, &wire_authority) &&
                             wasi_http_types_method_outgoing_request_set_path_with_query(borrowed, &wire_path))) {
        problem = http_failure(url, "invalid URL");
    }
    free(authority);
    free(path);
    if (problem != NULL) {
        wasi_http_types_outgoing_request_drop_own(request);
        return problem;
    }
    wasi_http_types_own_future_incoming_response_t pending;
    wasi_http_types_error_code_t code;
    if (!wasi_http_outgoing_handler_handle(request, NULL, &pending, &code)) return error_code_failure(url, &code);
    wasi_http_types_borrow_future_incoming_response_t waiting = wasi_http_types_borrow_future_incoming_response(pending);
    wasi_io_poll_own_pollable_t ready = wasi_http_types_method_future_incoming_response_subscribe(waiting);
    wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable(ready));
    wasi_io_poll_pollable_drop_own(ready);
    wasi_http_types_result_result_own_incoming_response_error_code_void_t answer;
    bool answered = wasi_http_types_method_future_incoming_response_get(waiting, &answer);
    wasi_http_types_future_incoming_response_drop_own(pending);
    if (!answered || answer.is_err) return http_failure(url, "no response");
    if (answer.val.ok.is_err) return error_code_failure(url, &answer.val.ok.val.err);
    wasi_http_types_own_incoming_response_t incoming = answer.val.ok.val.ok;
    wasi_http_types_borrow_incoming_response_t read = wasi_http_types_borrow_incoming_response(incoming);
    memset(response, 0, sizeof *response);
    response->status = wasi_http_types_method_incoming_response_status(read);
    wasi_http_types_own_headers_t got = wasi_http_types_method_incoming_response_headers(read);
    wasi_http_types_list_tuple2_field_name_field_value_t entries;
    wasi_http_types_method_fields_entries(wasi_http_types_borrow_fields(got), &entries);
    response->headers = calloc(entries.len == 0 ? 1 : entries.len, sizeof *response->headers);
    if (response->headers == NULL) abort();
    for (size_t i = 0; i < entries.len; i++) {
        response->headers[i].name = terminated(&entries.ptr[i].f0);
        response->headers[i].value = strndup((const char *)entries.ptr[i].f1.ptr, entries.ptr[i].f1.len);
        if (response->headers[i].value == NULL) abort();
    }
    response->header_count = entries.len;
    wasi_http_types_list_tuple2_field_name_field_value_free(&entries);
    wasi_http_types_fields_drop_own(got);
    wasi_http_types_own_incoming_body_t body;
    wasi_io_streams_own_input_stream_t stream;
    if (!wasi_http_types_method_incoming_response_consume(read, &body)) {
        wasi_http_types_incoming_response_drop_own(incoming);
        pf_response_free(response);
        return http_failure(url, "the body cannot be read");
    }
    if (!wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body(body), &stream)) {
        wasi_http_types_incoming_body_drop_own(body);
        wasi_http_types_incoming_response_drop_own(incoming);
        pf_response_free(response);
        return http_failure(url, "the body cannot be read");
    }
    size_t capacity = 1;
    response->body = malloc(capacity);
    if (response->body == NULL) abort();
    for (;;) {
        check_list_u8_t chunk;
        wasi_io_streams_stream_error_t failed;
        if (!wasi_io_streams_method_input_stream_blocking_read(wasi_io_streams_borrow_input_stream(stream), 64 << 10,
                                                               &chunk, &failed)) {
            bool closed = failed.tag == WASI_IO_STREAMS_STREAM_ERROR_CLOSED;
            wasi_io_streams_stream_error_free(&failed);
            if (closed) break;
            problem = http_failure(url, "reading the body failed");
            break;
        }
        if (response->body_length + chunk.len + 1 > capacity) {
            while (response->body_length + chunk.len + 1 > capacity) capacity *= 2;
            response->body = realloc(response->body, capacity);
            if (response->body == NULL) abort();
        }
        memcpy(response->body + response->body_length, chunk.ptr, chunk.len);
        response->body_length += chunk.len;
        check_list_u8_free(&chunk);
    }
    response->body[response->body_length] = '\0';
    wasi_io_streams_input_stream_drop_own(stream);
    wasi_http_types_future_trailers_drop_own(wasi_http_types_static_incoming_body_finish(body));
    wasi_http_types_incoming_response_drop_own(incoming);
    if (problem != NULL) pf_response_free(response);
    return problem;
}

/* `location` (absolute, or an absolute path) relative to `base`, allocated; NULL with *problem set if neither. */
static char *resolve(const char *base, const char *location, char **problem) {
    if (strstr(location, "://") != NULL) return duplicate(location);
    if (location[0] != '/') {
        *problem = formatted("unsupported redirect location \"%s\" (relative paths are not followed)", location);
        return NULL;
    }
    const char *authority = strstr(base, "://") + 3;
    size_t prefix = (size_t)(authority - base) + strcspn(authority, "/?");
    return formatted("%.*s%s", (int)prefix, base, location);
}

char *pf_http_get(const char *url, const pf_header *headers, size_t header_count, pf_response *response) {
    char *current = duplicate(url);
    for (int redirect = 0; redirect <= PF_MAX_REDIRECTS; redirect++) {
        char *problem = send_get(current, headers, header_count, response);
        if (problem != NULL) {
            free(current);
            return problem;
        }
        const char *location = pf_response_header(response, "location");
        bool moved = location != NULL && (response->status == 301 || response->status == 302 ||
                                          response->status == 303 || response->status == 307 ||
                                          response->status == 308);
        if (!moved) {
            free(current);
            return NULL;
        }
        char *next = resolve(current, location, &problem);
        pf_response_free(response);
        free(current);
        if (next == NULL) return problem;
        current = next;
    }
    char *problem = formatted("more than %d redirects from %s", PF_MAX_REDIRECTS, current);
    free(current);
    return problem;
}

const char *pf_response_header(const pf_response *response, const char *name) {
    for (size_t i = 0; i < response->header_count; i++) {
        if (strcasecmp(response->headers[i].name, name) == 0) return response->headers[i].value;
    }
    return NULL;
}

void pf_response_free(pf_response *response) {
    for (size_t i = 0; i < response->header_count; i++) {
        free(response->headers[i].name);
        free(response->headers[i].value);
    }
    free(response->headers);
    free(response->body);
    memset(response, 0, sizeof *response);
}
