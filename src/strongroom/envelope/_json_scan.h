/*
 * Field mode's strict JSON reader and canonical writer, one pass over UTF-8 bytes (issue 18). Included by the two
 * native modules that read field-mode documents: strongroom.envelope._canonical (the reader alone, for
 * json_fields) and strongroom.crypto._gcm (the client library's sealing and opening of top-level members). Every
 * function is static: each module gets its own copy.
 *
 * scan_document() reads a document as json_fields.load_json_object reads it and writes, into Scan.out, what
 * json_fields._json_bytes writes of what that read (compact, non-ASCII as is, the stdlib's escapes and number
 * spelling). It answers OK, ERROR (a Python exception is set: memory) or FALLBACK whenever it is not sure to agree
 * with the Python reader and writer: anything the Python reader refuses (invalid UTF-8 or JSON, a member named
 * twice in one object, NaN or Infinity, a number beyond a double, a lone surrogate escape, and with top_object a
 * value that is not an object), and a few shapes it accepts that are left to it (nesting deeper than MAX_DEPTH,
 * integers of more than MAX_INT_DIGITS digits, "-0"). Its callers then take the record through the Python path,
 * which decides exactly as before: this reader only spares the interpreter the documents that path would accept,
 * and is held to it by differential tests (tests/unit/envelope/test_json_canonical_native.py).
 *
 * Member names are compared in their canonical spelling, which is one-to-one with the decoded string (lone
 * surrogates, the only strings without a UTF-8 form, are refused), so a duplicate spelt with escapes is found.
 * No key and no cipher here; the GIL is held throughout.
 */
#ifndef STRONGROOM_JSON_SCAN_H
#define STRONGROOM_JSON_SCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define JS_MAX_DEPTH 100
#define JS_MAX_INT_DIGITS 18
#define JS_MAX_NUMBER 400

enum { JS_FALLBACK = 0, JS_OK = 1, JS_ERROR = -1 };

typedef struct {
    Py_ssize_t start, len; /* a member name's canonical bytes in the output */
} JsName;

typedef struct {
    const unsigned char *p, *end;
    unsigned char *out;
    Py_ssize_t len, cap;
    JsName *names;
    Py_ssize_t n_names, cap_names;
    int depth, sealed_strings;
    PyObject *wanted;  /* tuple of bytes */
    Py_ssize_t *spans; /* 2 per wanted name */
} JsScan;

static int js_reserve(JsScan *s, Py_ssize_t more) {
    if (s->len + more <= s->cap) return JS_OK;
    Py_ssize_t cap = s->cap * 2 > s->len + more ? s->cap * 2 : s->len + more + 64;
    unsigned char *grown = PyMem_Realloc(s->out, cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return JS_ERROR;
    }
    s->out = grown, s->cap = cap;
    return JS_OK;
}

static inline int js_put(JsScan *s, const void *bytes, Py_ssize_t n) {
    if (js_reserve(s, n) != JS_OK) return JS_ERROR;
    memcpy(s->out + s->len, bytes, n);
    s->len += n;
    return JS_OK;
}

static inline int js_put1(JsScan *s, unsigned char c) {
    if (s->len == s->cap && js_reserve(s, 1) != JS_OK) return JS_ERROR;
    s->out[s->len++] = c;
    return JS_OK;
}

/* 1 for the bytes a string's run may hold as they are (printable ASCII but the quote and the backslash), 2 for a
 * UTF-8 lead byte (its sequence is checked), 0 for the rest (the quote, the backslash, control bytes, bytes that
 * cannot start a sequence). Filled on first use. */
static unsigned char js_run_class[256];
static int js_classes_ready;

static void js_init_classes(void) {
    if (js_classes_ready) return;
    for (int c = 0x20; c < 0x80; c++) js_run_class[c] = c == '"' || c == '\\' ? 0 : 1;
    for (int c = 0xC2; c <= 0xF4; c++) js_run_class[c] = 2;
    js_classes_ready = 1;
}

/* Whether one of the 8 bytes in x is not a plain run byte of class 1: a control byte (< 0x20), the quote, the
 * backslash, or a byte >= 0x80. Exact for "none" (each test below is non-zero iff such a byte is there), so a word
 * it passes is printable ASCII throughout. Borrows only carry towards higher bytes, so the lowest flagged byte (the
 * first in memory on a little-endian machine) is the first such byte: the bytes before it are skipped at once and
 * it goes by the byte path. */
static inline uint64_t js_special8(uint64_t x) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = x ^ (ones * '"'), backslash = x ^ (ones * '\\');
    return ((x - ones * 0x20) | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | x) & highs;
}

static void js_skip_ws(JsScan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int js_hex4(const unsigned char *p, unsigned *cp) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return 0;
    }
    *cp = v;
    return 1;
}

/* The canonical spelling of one code point (never a surrogate) inside a string. */
static int js_put_code_point(JsScan *s, unsigned cp) {
    static const char hex[] = "0123456789abcdef";
    unsigned char b[6];
    int n;
    if (cp == '"' || cp == '\\') b[0] = '\\', b[1] = (unsigned char)cp, n = 2;
    else if (cp == '\b') b[0] = '\\', b[1] = 'b', n = 2;
    else if (cp == '\f') b[0] = '\\', b[1] = 'f', n = 2;
    else if (cp == '\n') b[0] = '\\', b[1] = 'n', n = 2;
    else if (cp == '\r') b[0] = '\\', b[1] = 'r', n = 2;
    else if (cp == '\t') b[0] = '\\', b[1] = 't', n = 2;
    else if (cp < 0x20) b[0] = '\\', b[1] = 'u', b[2] = '0', b[3] = '0', b[4] = hex[cp >> 4], b[5] = hex[cp & 15], n = 6;
    else if (cp < 0x80) b[0] = (unsigned char)cp, n = 1;
    else if (cp < 0x800) b[0] = 0xC0 | (cp >> 6), b[1] = 0x80 | (cp & 63), n = 2;
    else if (cp < 0x10000) b[0] = 0xE0 | (cp >> 12), b[1] = 0x80 | ((cp >> 6) & 63), b[2] = 0x80 | (cp & 63), n = 3;
    else
        b[0] = 0xF0 | (cp >> 18), b[1] = 0x80 | ((cp >> 12) & 63), b[2] = 0x80 | ((cp >> 6) & 63),
        b[3] = 0x80 | (cp & 63), n = 4;
    return js_put(s, b, n);
}

/* The length of the well-formed UTF-8 sequence at p (a lead byte >= 0x80), 0 when it is not one. Python's
 * strict decoder refuses exactly these: overlong forms, surrogates, beyond U+10FFFF, truncation. */
static int js_utf8_length(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (end - p < n || p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

/* A string at s->p (its opening quote), written canonically with its quotes; *content gets where its
 * canonical text starts in the output. */
static int js_string(JsScan *s, Py_ssize_t *content) {
    s->p++;
    if (js_put1(s, '"') != JS_OK) return JS_ERROR;
    *content = s->len;
    for (;;) {
        /* a run of bytes that are their own canonical spelling: printable ASCII and well-formed UTF-8 */
        const unsigned char *run = s->p;
        while (s->p < s->end) {
            if (s->end - s->p >= 8) { /* eight bytes at a time while they are printable ASCII */
                uint64_t word;
                memcpy(&word, s->p, 8);
                uint64_t special = js_special8(word);
                if (!special) {
                    s->p += 8;
                    continue;
                }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                s->p += __builtin_ctzll(special) >> 3; /* the bytes before the first special one are plain */
#endif
            }
            unsigned char kind = js_run_class[*s->p];
            if (kind == 1) {
                s->p++;
            } else if (kind == 2) {
                int n = js_utf8_length(s->p, s->end);
                if (n == 0) return JS_FALLBACK; /* not UTF-8: the strict reader refuses it */
                s->p += n;
            } else {
                break;
            }
        }
        if (s->p > run && js_put(s, run, s->p - run) != JS_OK) return JS_ERROR;
        if (s->p >= s->end) return JS_FALLBACK;
        unsigned char c = *s->p;
        if (c == '"') {
            s->p++;
            return js_put1(s, '"');
        }
        if (c != '\\') return JS_FALLBACK; /* a raw control character or a byte no UTF-8 sequence starts with */
        /* an escape */
        if (s->end - s->p < 2) return JS_FALLBACK;
        unsigned char e = s->p[1];
        unsigned cp;
        s->p += 2;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (s->end - s->p < 4 || !js_hex4(s->p, &cp)) return JS_FALLBACK;
            s->p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return JS_FALLBACK; /* a lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned low;
                if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' || !js_hex4(s->p + 2, &low) || low < 0xDC00 ||
                    low > 0xDFFF)
                    return JS_FALLBACK; /* a lone high surrogate */
                s->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            break;
        default: return JS_FALLBACK;
        }
        if (js_put_code_point(s, cp) != JS_OK) return JS_ERROR;
    }
}

static int js_number(JsScan *s) {
    const unsigned char *start = s->p;
    int is_float = 0;
    if (*s->p == '-') s->p++;
    if (s->p >= s->end) return JS_FALLBACK;
    if (*s->p == '0') s->p++;
    else if (*s->p >= '1' && *s->p <= '9')
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
    else
        return JS_FALLBACK;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (s->p >= s->end || *s->p < '0' || *s->p > '9') return JS_FALLBACK;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
        is_float = 1;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '-' || *s->p == '+')) s->p++;
        if (s->p >= s->end || *s->p < '0' || *s->p > '9') return JS_FALLBACK;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
        is_float = 1;
    }
    Py_ssize_t n = s->p - start;
    if (!is_float) {
        /* int(token) written back is the token itself, but for "-0" (written "0") */
        if (n - (*start == '-') > JS_MAX_INT_DIGITS || (n == 2 && start[0] == '-' && start[1] == '0')) return JS_FALLBACK;
        return js_put(s, start, n);
    }
    if (n > JS_MAX_NUMBER) return JS_FALLBACK;
    char token[JS_MAX_NUMBER + 1];
    memcpy(token, start, n);
    token[n] = '\0';
    char *stop = NULL;
    double parsed = PyOS_string_to_double(token, &stop, NULL); /* float(token), as the reader's parse_float */
    if (parsed == -1.0 && PyErr_Occurred()) return JS_ERROR;
    if (stop != token + n || !isfinite(parsed)) return JS_FALLBACK; /* beyond a double: the writer refuses it */
    char *text = PyOS_double_to_string(parsed, 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* float.__repr__ */
    if (text == NULL) return JS_ERROR;
    int result = js_put(s, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return result;
}

static int js_literal(JsScan *s, const char *word, Py_ssize_t n) {
    if (s->end - s->p < n || memcmp(s->p, word, n) != 0) return JS_FALLBACK;
    s->p += n;
    return js_put(s, word, n);
}

static int js_name_less(const JsScan *s, const JsName *a, const JsName *b) {
    if (a->len != b->len) return a->len < b->len;
    return memcmp(s->out + a->start, s->out + b->start, a->len) < 0;
}

/* Whether two of the names in [first, first + n) are the same bytes (sorted in place: insertion sort, objects
 * are small; Shell's gaps keep a large one fast). */
static int js_has_duplicate(JsScan *s, Py_ssize_t first, Py_ssize_t n) {
    JsName *names = s->names + first;
    static const Py_ssize_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        Py_ssize_t gap = gaps[g];
        for (Py_ssize_t i = gap; i < n; i++) {
            JsName item = names[i];
            Py_ssize_t j = i;
            for (; j >= gap && js_name_less(s, &item, &names[j - gap]); j -= gap) names[j] = names[j - gap];
            names[j] = item;
        }
    }
    for (Py_ssize_t i = 1; i < n; i++)
        if (names[i].len == names[i - 1].len &&
            memcmp(s->out + names[i].start, s->out + names[i - 1].start, names[i].len) == 0)
            return 1;
    return 0;
}

static int js_value(JsScan *s);

/* After a member or an element: a comma (written; *more = 1, at the next item) or the closing byte (passed over,
 * not written; *more = 0). Anything else is FALLBACK. */
static int js_after_item(JsScan *s, unsigned char close, int *more) {
    js_skip_ws(s);
    if (s->p >= s->end) return JS_FALLBACK;
    if (*s->p == ',') {
        s->p++;
        js_skip_ws(s);
        *more = 1;
        return js_put1(s, ',');
    }
    if (*s->p != close) return JS_FALLBACK;
    s->p++;
    *more = 0;
    return JS_OK;
}

static int js_push_name(JsScan *s, Py_ssize_t start, Py_ssize_t len) {
    if (s->n_names == s->cap_names) {
        Py_ssize_t cap = s->cap_names ? s->cap_names * 2 : 64;
        JsName *grown = PyMem_Realloc(s->names, cap * sizeof(JsName));
        if (grown == NULL) {
            PyErr_NoMemory();
            return JS_ERROR;
        }
        s->names = grown, s->cap_names = cap;
    }
    s->names[s->n_names].start = start;
    s->names[s->n_names].len = len;
    s->n_names++;
    return JS_OK;
}

/* Which wanted name (index) the canonical member name at start/len is, -1 when none. */
static Py_ssize_t js_wanted_index(JsScan *s, Py_ssize_t start, Py_ssize_t len) {
    Py_ssize_t n = PyTuple_GET_SIZE(s->wanted);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(s->wanted, i);
        if (PyBytes_GET_SIZE(name) == len && memcmp(PyBytes_AS_STRING(name), s->out + start, len) == 0) return i;
    }
    return -1;
}

static int js_object(JsScan *s) {
    int top = s->depth == 0, r;
    s->p++;
    if (js_put1(s, '{') != JS_OK) return JS_ERROR;
    js_skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return js_put1(s, '}');
    }
    Py_ssize_t first = s->n_names;
    for (;;) {
        if (s->p >= s->end || *s->p != '"') return JS_FALLBACK;
        Py_ssize_t content;
        if ((r = js_string(s, &content)) != JS_OK) return r;
        Py_ssize_t name_len = s->len - 1 - content;
        if ((r = js_push_name(s, content, name_len)) != JS_OK) return r;
        js_skip_ws(s);
        if (s->p >= s->end || *s->p != ':') return JS_FALLBACK;
        s->p++;
        if (js_put1(s, ':') != JS_OK) return JS_ERROR;
        js_skip_ws(s);
        Py_ssize_t at = s->len, slot = top ? js_wanted_index(s, content, name_len) : -1;
        s->depth++;
        r = js_value(s);
        s->depth--;
        if (r != JS_OK) return r;
        if (slot >= 0) s->spans[2 * slot] = at, s->spans[2 * slot + 1] = s->len;
        int more;
        if ((r = js_after_item(s, '}', &more)) != JS_OK) return r;
        if (!more) break;
    }
    Py_ssize_t n = s->n_names - first;
    if (n > 1 && js_has_duplicate(s, first, n)) return JS_FALLBACK; /* the reader refuses a member named twice */
    s->n_names = first;
    return js_put1(s, '}');
}

static int js_array(JsScan *s) {
    int r;
    s->p++;
    if (js_put1(s, '[') != JS_OK) return JS_ERROR;
    js_skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return js_put1(s, ']');
    }
    for (;;) {
        s->depth++;
        r = js_value(s);
        s->depth--;
        if (r != JS_OK) return r;
        int more;
        if ((r = js_after_item(s, ']', &more)) != JS_OK) return r;
        if (!more) return js_put1(s, ']');
    }
}

static int js_value(JsScan *s) {
    if (s->p >= s->end || s->depth > JS_MAX_DEPTH) return JS_FALLBACK;
    switch (*s->p) {
    case '{': return js_object(s);
    case '[': return js_array(s);
    case '"': {
        Py_ssize_t content;
        int r = js_string(s, &content);
        if (r == JS_OK && s->depth > 0 && s->len - 1 - content >= 4 && memcmp(s->out + content, "sr1:", 4) == 0)
            s->sealed_strings = 1;
        return r;
    }
    case 't': return js_literal(s, "true", 4);
    case 'f': return js_literal(s, "false", 5);
    case 'n': return js_literal(s, "null", 4);
    default: return js_number(s);
    }
}

/* Read data (size bytes) into s: its canonical text in s->out (s->len bytes), s->sealed_strings, and for each
 * entry of wanted (a tuple of bytes: canonical member names, without quotes) the span of that top-level member's
 * value in s->out, (-1, -1) when absent. With top_object, anything but an object is FALLBACK. The caller releases
 * s with scan_release whatever the answer. */
static int scan_document(JsScan *s, const unsigned char *data, Py_ssize_t size, PyObject *wanted, int top_object) {
    Py_ssize_t n_wanted = PyTuple_GET_SIZE(wanted);
    memset(s, 0, sizeof *s);
    js_init_classes();
    s->p = data;
    s->end = data + size;
    s->wanted = wanted;
    s->cap = size + 64;
    s->out = PyMem_Malloc(s->cap);
    s->spans = PyMem_Malloc((2 * n_wanted + 1) * sizeof(Py_ssize_t));
    if (s->out == NULL || s->spans == NULL) {
        PyErr_NoMemory();
        return JS_ERROR;
    }
    for (Py_ssize_t i = 0; i < 2 * n_wanted; i++) s->spans[i] = -1;
    js_skip_ws(s);
    int r = JS_FALLBACK;
    if (!top_object || (s->p < s->end && *s->p == '{')) r = js_value(s);
    if (r == JS_OK) {
        js_skip_ws(s);
        if (s->p != s->end) r = JS_FALLBACK; /* extra data */
    }
    return r;
}

/* Whether what scan_document wrote is data itself (data was already canonical). */
static int scan_identical(const JsScan *s, const unsigned char *data, Py_ssize_t size) {
    return s->len == size && memcmp(s->out, data, size) == 0;
}

static void scan_release(JsScan *s) {
    PyMem_Free(s->out);
    PyMem_Free(s->names);
    PyMem_Free(s->spans);
    s->out = NULL, s->names = NULL, s->spans = NULL;
}

/* Whether every entry of wanted is bytes (what scan_document compares member names with). */
static int scan_names_ok(PyObject *wanted) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(wanted); i++)
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(wanted, i))) {
            PyErr_SetString(PyExc_TypeError, "member names are bytes");
            return 0;
        }
    return 1;
}

#endif
