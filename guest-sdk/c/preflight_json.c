/* The JSON reader of the C SDK: a recursive-descent parser of RFC 8259 JSON into a tree (see preflight_json.h). */
#include "preflight_json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nesting deeper than this is refused rather than risking the guest's stack. */
#define MAX_DEPTH 128

struct pf_json {
    pf_json_type type;
    bool boolean;
    double number;
    char *string;    /* PF_JSON_STRING */
    size_t length;   /* elements or members */
    pf_json **items; /* elements, or member values */
    char **keys;     /* member keys (objects only) */
};

typedef struct {
    const char *at;
    const char *end;
    const char *start;
    char *error;
    size_t error_size;
    bool failed;
} parser;

static void fail(parser *p, const char *what) {
    if (!p->failed && p->error_size > 0) {
        snprintf(p->error, p->error_size, "%s at byte %zu", what, (size_t)(p->at - p->start));
    }
    p->failed = true;
}

static void skip_space(parser *p) {
    while (p->at < p->end && (*p->at == ' ' || *p->at == '\t' || *p->at == '\n' || *p->at == '\r')) {
        p->at++;
    }
}

static pf_json *new_value(parser *p, pf_json_type type) {
    pf_json *value = calloc(1, sizeof *value);
    if (value == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    value->type = type;
    return value;
}

static bool literal(parser *p, const char *word) {
    size_t length = strlen(word);
    if ((size_t)(p->end - p->at) < length || memcmp(p->at, word, length) != 0) {
        fail(p, "unexpected character");
        return false;
    }
    p->at += length;
    return true;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_hex4(parser *p, uint32_t *code) {
    if (p->end - p->at < 4) {
        fail(p, "truncated \\u escape");
        return false;
    }
    *code = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_digit(p->at[i]);
        if (digit < 0) {
            fail(p, "invalid \\u escape");
            return false;
        }
        *code = *code * 16 + (uint32_t)digit;
    }
    p->at += 4;
    return true;
}

static size_t encode_utf8(uint32_t code, char *out) {
    if (code < 0x80) {
        out[0] = (char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (char)(0xC0 | (code >> 6));
        out[1] = (char)(0x80 | (code & 0x3F));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xE0 | (code >> 12));
        out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (code >> 18));
    out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((code >> 6) & 0x3F));
    out[3] = (char)(0x80 | (code & 0x3F));
    return 4;
}

/* Reads a string after its opening quote; the decoded text is never longer than the escaped one. */
static char *read_string(parser *p) {
    const char *close = p->at;
    while (close < p->end && *close != '"') {
        close += (*close == '\\' && close + 1 < p->end) ? 2 : 1;
    }
    if (close >= p->end) {
        fail(p, "unterminated string");
        return NULL;
    }
    char *text = malloc((size_t)(close - p->at) + 1);
    if (text == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    size_t length = 0;
    while (*p->at != '"') {
        unsigned char c = (unsigned char)*p->at++;
        if (c < 0x20) {
            fail(p, "control character in string");
            free(text);
            return NULL;
        }
        if (c != '\\') {
            text[length++] = (char)c;
            continue;
        }
        char escape = *p->at++;
        switch (escape) {
        case '"': text[length++] = '"'; break;
        case '\\': text[length++] = '\\'; break;
        case '/': text[length++] = '/'; break;
        case 'b': text[length++] = '\b'; break;
        case 'f': text[length++] = '\f'; break;
        case 'n': text[length++] = '\n'; break;
        case 'r': text[length++] = '\r'; break;
        case 't': text[length++] = '\t'; break;
        case 'u': {
            uint32_t code;
            if (!read_hex4(p, &code)) {
                free(text);
                return NULL;
            }
            if (code >= 0xD800 && code <= 0xDBFF) {
                uint32_t low;
                if (p->end - p->at < 2 || p->at[0] != '\\' || p->at[1] != 'u') {
                    fail(p, "unpaired surrogate");
                    free(text);
                    return NULL;
                }
                p->at += 2;
                if (!read_hex4(p, &low) || low < 0xDC00 || low > 0xDFFF) {
                    fail(p, "unpaired surrogate");
                    free(text);
                    return NULL;
                }
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            } else if (code >= 0xDC00 && code <= 0xDFFF) {
                fail(p, "unpaired surrogate");
                free(text);
                return NULL;
            }
            length += encode_utf8(code, text + length);
            break;
        }
        default:
            fail(p, "invalid escape");
            free(text);
            return NULL;
        }
    }
    p->at++;
    text[length] = '\0';
    return text;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static pf_json *read_number(parser *p) {
    const char *start = p->at;
    if (p->at < p->end && *p->at == '-') p->at++;
    if (p->at < p->end && *p->at == '0') {
        p->at++;
    } else if (p->at < p->end && is_digit(*p->at)) {
        while (p->at < p->end && is_digit(*p->at)) p->at++;
    } else {
        fail(p, "invalid number");
        return NULL;
    }
    if (p->at < p->end && *p->at == '.') {
        p->at++;
        if (p->at >= p->end || !is_digit(*p->at)) {
            fail(p, "invalid number");
            return NULL;
        }
        while (p->at < p->end && is_digit(*p->at)) p->at++;
    }
    if (p->at < p->end && (*p->at == 'e' || *p->at == 'E')) {
        p->at++;
        if (p->at < p->end && (*p->at == '+' || *p->at == '-')) p->at++;
        if (p->at >= p->end || !is_digit(*p->at)) {
            fail(p, "invalid number");
            return NULL;
        }
        while (p->at < p->end && is_digit(*p->at)) p->at++;
    }
    char digits[64];
    size_t length = (size_t)(p->at - start);
    if (length >= sizeof digits) {
        fail(p, "number too long");
        return NULL;
    }
    memcpy(digits, start, length);
    digits[length] = '\0';
    pf_json *value = new_value(p, PF_JSON_NUMBER);
    if (value != NULL) value->number = strtod(digits, NULL);
    return value;
}

static bool append(parser *p, pf_json *container, pf_json *item, char *key) {
    pf_json **items = realloc(container->items, (container->length + 1) * sizeof *items);
    if (items == NULL) {
        fail(p, "out of memory");
        return false;
    }
    container->items = items;
    if (container->type == PF_JSON_OBJECT) {
        char **keys = realloc(container->keys, (container->length + 1) * sizeof *keys);
        if (keys == NULL) {
            fail(p, "out of memory");
            return false;
        }
        container->keys = keys;
        keys[container->length] = key;
    }
    items[container->length++] = item;
    return true;
}

static pf_json *read_value(parser *p, int depth);

static pf_json *read_container(parser *p, int depth, pf_json_type type) {
    char close = type == PF_JSON_ARRAY ? ']' : '}';
    pf_json *container = new_value(p, type);
    if (container == NULL) return NULL;
    p->at++;
    skip_space(p);
    if (p->at < p->end && *p->at == close) {
        p->at++;
        return container;
    }
    for (;;) {
        char *key = NULL;
        if (type == PF_JSON_OBJECT) {
            skip_space(p);
            if (p->at >= p->end || *p->at != '"') {
                fail(p, "expected a member name");
                break;
            }
            p->at++;
            key = read_string(p);
            if (key == NULL) break;
            skip_space(p);
            if (p->at >= p->end || *p->at != ':') {
                fail(p, "expected ':'");
                free(key);
                break;
            }
            p->at++;
        }
        pf_json *item = read_value(p, depth + 1);
        if (item == NULL || !append(p, container, item, key)) {
            free(key);
            pf_json_free(item);
            break;
        }
        skip_space(p);
        if (p->at < p->end && *p->at == ',') {
            p->at++;
            continue;
        }
        if (p->at < p->end && *p->at == close) {
            p->at++;
            return container;
        }
        fail(p, type == PF_JSON_ARRAY ? "expected ',' or ']'" : "expected ',' or '}'");
        break;
    }
    pf_json_free(container);
    return NULL;
}

static pf_json *read_value(parser *p, int depth) {
    if (depth > MAX_DEPTH) {
        fail(p, "nesting too deep");
        return NULL;
    }
    skip_space(p);
    if (p->at >= p->end) {
        fail(p, "unexpected end of input");
        return NULL;
    }
    switch (*p->at) {
    case '{': return read_container(p, depth, PF_JSON_OBJECT);
    case '[': return read_container(p, depth, PF_JSON_ARRAY);
    case '"': {
        p->at++;
        char *text = read_string(p);
        if (text == NULL) return NULL;
        pf_json *value = new_value(p, PF_JSON_STRING);
        if (value == NULL) {
            free(text);
            return NULL;
        }
        value->string = text;
        return value;
    }
    case 't':
    case 'f': {
        bool truth = *p->at == 't';
        if (!literal(p, truth ? "true" : "false")) return NULL;
        pf_json *value = new_value(p, PF_JSON_BOOL);
        if (value != NULL) value->boolean = truth;
        return value;
    }
    case 'n': return literal(p, "null") ? new_value(p, PF_JSON_NULL) : NULL;
    default: return read_number(p);
    }
}

pf_json *pf_json_parse(const char *text, size_t length, char *error, size_t error_size) {
    parser p = {text, text + length, text, error, error_size, false};
    pf_json *root = read_value(&p, 0);
    if (root != NULL) {
        skip_space(&p);
        if (p.at != p.end) {
            fail(&p, "unexpected data after the value");
            pf_json_free(root);
            root = NULL;
        }
    }
    return root;
}

void pf_json_free(pf_json *value) {
    if (value == NULL) return;
    for (size_t i = 0; i < value->length; i++) {
        pf_json_free(value->items[i]);
        if (value->keys != NULL) free(value->keys[i]);
    }
    free(value->items);
    free(value->keys);
    free(value->string);
    free(value);
}

pf_json_type pf_json_type_of(const pf_json *value) { return value == NULL ? PF_JSON_NULL : value->type; }

const pf_json *pf_json_get(const pf_json *value, const char *key) {
    if (value == NULL || value->type != PF_JSON_OBJECT) return NULL;
    /* The last of duplicate members wins, as in most JSON decoders. */
    for (size_t i = value->length; i-- > 0;) {
        if (strcmp(value->keys[i], key) == 0) return value->items[i];
    }
    return NULL;
}

size_t pf_json_length(const pf_json *value) {
    return value != NULL && (value->type == PF_JSON_ARRAY || value->type == PF_JSON_OBJECT) ? value->length : 0;
}

const pf_json *pf_json_at(const pf_json *value, size_t index) {
    return index < pf_json_length(value) ? value->items[index] : NULL;
}

const char *pf_json_key_at(const pf_json *value, size_t index) {
    return value != NULL && value->type == PF_JSON_OBJECT && index < value->length ? value->keys[index] : NULL;
}

const char *pf_json_string(const pf_json *value) {
    return value != NULL && value->type == PF_JSON_STRING ? value->string : NULL;
}

double pf_json_number(const pf_json *value, double fallback) {
    return value != NULL && value->type == PF_JSON_NUMBER ? value->number : fallback;
}

bool pf_json_bool(const pf_json *value, bool fallback) {
    return value != NULL && value->type == PF_JSON_BOOL ? value->boolean : fallback;
}

bool pf_json_is_string_array(const pf_json *value) {
    if (value == NULL || value->type != PF_JSON_ARRAY) return false;
    for (size_t i = 0; i < value->length; i++) {
        if (value->items[i]->type != PF_JSON_STRING) return false;
    }
    return true;
}
