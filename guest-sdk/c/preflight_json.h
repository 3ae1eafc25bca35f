/* A small, strict JSON reader for preflight checks written in C: the object and the configuration a check is
 * given arrive as JSON text, and C has no JSON in its standard library. Parsing builds a read-only tree; every
 * accessor accepts NULL and answers "absent", so that a chain of lookups needs one test at its end:
 *
 *     const pf_json *names = pf_json_get(pf_json_get(request->object, "spec"), "dependsOn");
 *     for (size_t i = 0; i < pf_json_length(names); i++) puts(pf_json_string(pf_json_at(names, i)));
 */
#ifndef PREFLIGHT_JSON_H
#define PREFLIGHT_JSON_H

#include <stdbool.h>
#include <stddef.h>

/** The type of a JSON value. */
typedef enum {
    PF_JSON_NULL,
    PF_JSON_BOOL,
    PF_JSON_NUMBER,
    PF_JSON_STRING,
    PF_JSON_ARRAY,
    PF_JSON_OBJECT,
} pf_json_type;

/** A parsed JSON value; read it with the accessors below. */
typedef struct pf_json pf_json;

/** Parses `length` bytes of `text`. Returns the root value, or NULL with a message in `error` (at most
 *  `error_size` bytes, NUL-terminated) saying what is wrong and where. Free the tree with pf_json_free. */
pf_json *pf_json_parse(const char *text, size_t length, char *error, size_t error_size);

/** Frees a tree returned by pf_json_parse (NULL is fine). */
void pf_json_free(pf_json *value);

/** The type of `value`; PF_JSON_NULL for NULL (an absent value reads as null). */
pf_json_type pf_json_type_of(const pf_json *value);

/** The member `key` of an object; NULL when `value` is not an object or has no such member. */
const pf_json *pf_json_get(const pf_json *value, const char *key);

/** The number of elements of an array or members of an object; 0 for anything else. */
size_t pf_json_length(const pf_json *value);

/** Element `index` of an array (or the value of member `index` of an object); NULL when out of range. */
const pf_json *pf_json_at(const pf_json *value, size_t index);

/** The key of member `index` of an object; NULL when `value` is not an object or `index` is out of range. */
const char *pf_json_key_at(const pf_json *value, size_t index);

/** The text of a string (NUL-terminated UTF-8); NULL when `value` is not a string. */
const char *pf_json_string(const pf_json *value);

/** The number, or `fallback` when `value` is not a number. */
double pf_json_number(const pf_json *value, double fallback);

/** The boolean, or `fallback` when `value` is not a boolean. */
bool pf_json_bool(const pf_json *value, bool fallback);

/** True when `value` is an array whose elements are all strings (an absent value is not). */
bool pf_json_is_string_array(const pf_json *value);

#endif
