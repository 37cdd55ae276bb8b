/*
 * strongroom.envelope._canonical: field mode's strict JSON reader and canonical writer in one pass (issue 18).
 *
 * canonical(data, names, top_object) reads the UTF-8 JSON text `data` as json_fields.load_json_object reads
 * it and writes it as json_fields._json_bytes writes what that read (compact, non-ASCII as is, the stdlib's
 * escapes and number spelling). It answers
 *
 *     (text, identical, sealed_strings, spans)
 *
 *   text            the canonical bytes (`data` itself when it is already canonical);
 *   identical       whether it was;
 *   sealed_strings  whether a string value (not a member name) starts with "sr1:", as json_fields._find_sealed
 *                   finds them;
 *   spans           for each entry of `names` (canonical member-name bytes, without quotes), the start and end
 *                   in `text` of that top-level member's value, (-1, -1) when absent.
 *
 * or None whenever it is not sure to agree with the Python reader and writer: anything the Python reader
 * refuses (invalid UTF-8 or JSON, a member named twice in one object, NaN or Infinity, a number beyond a
 * double, a lone surrogate escape, and with top_object a value that is not an object), and a few shapes it
 * accepts that are left to it (nesting deeper than MAX_DEPTH, integers of more than MAX_INT_DIGITS digits,
 * "-0"). json_fields then takes the record through its Python path, which decides exactly as before: this
 * file only spares the interpreter the documents that path would accept, and is held to it by differential
 * tests (tests/unit/envelope/test_json_canonical_native.py).
 *
 * Member names are compared in their canonical spelling, which is one-to-one with the decoded string (lone
 * surrogates, the only strings without a UTF-8 form, are refused), so a duplicate spelt with escapes is found.
 * No key and no cipher here; the GIL is held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#define MAX_DEPTH 100
#define MAX_INT_DIGITS 18
#define MAX_NUMBER 400

enum { FALLBACK = 0, OK = 1, ERROR = -1 };

typedef struct {
    Py_ssize_t start, len; /* a member name's canonical bytes in the output */
} Name;

typedef struct {
    const unsigned char *p, *end;
    unsigned char *out;
    Py_ssize_t len, cap;
    Name *names;
    Py_ssize_t n_names, cap_names;
    int depth, sealed_strings;
    PyObject *wanted;  /* tuple of bytes */
    Py_ssize_t *spans; /* 2 per wanted name */
} Scan;

static int reserve(Scan *s, Py_ssize_t more) {
    if (s->len + more <= s->cap) return OK;
    Py_ssize_t cap = s->cap * 2 > s->len + more ? s->cap * 2 : s->len + more + 64;
    unsigned char *grown = PyMem_Realloc(s->out, cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    s->out = grown, s->cap = cap;
    return OK;
}

static int put(Scan *s, const void *bytes, Py_ssize_t n) {
    if (reserve(s, n) != OK) return ERROR;
    memcpy(s->out + s->len, bytes, n);
    s->len += n;
    return OK;
}

static void skip_ws(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int hex4(const unsigned char *p, unsigned *cp) {
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
static int put_code_point(Scan *s, unsigned cp) {
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
    return put(s, b, n);
}

/* The length of the well-formed UTF-8 sequence at p (a lead byte >= 0x80), 0 when it is not one. Python's
 * strict decoder refuses exactly these: overlong forms, surrogates, beyond U+10FFFF, truncation. */
static int utf8_length(const unsigned char *p, const unsigned char *end) {
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
static int string(Scan *s, Py_ssize_t *content) {
    s->p++;
    if (put(s, "\"", 1) != OK) return ERROR;
    *content = s->len;
    for (;;) {
        /* a run of bytes that are their own canonical spelling */
        const unsigned char *run = s->p;
        while (s->p < s->end && *s->p >= 0x20 && *s->p < 0x80 && *s->p != '"' && *s->p != '\\') s->p++;
        if (s->p > run && put(s, run, s->p - run) != OK) return ERROR;
        if (s->p >= s->end) return FALLBACK;
        unsigned char c = *s->p;
        if (c == '"') {
            s->p++;
            return put(s, "\"", 1);
        }
        if (c < 0x20) return FALLBACK; /* a raw control character: the strict reader refuses it */
        if (c >= 0x80) {
            int n = utf8_length(s->p, s->end);
            if (n == 0) return FALLBACK;
            if (put(s, s->p, n) != OK) return ERROR;
            s->p += n;
            continue;
        }
        /* an escape */
        if (s->end - s->p < 2) return FALLBACK;
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
            if (s->end - s->p < 4 || !hex4(s->p, &cp)) return FALLBACK;
            s->p += 4;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return FALLBACK; /* a lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned low;
                if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' || !hex4(s->p + 2, &low) || low < 0xDC00 ||
                    low > 0xDFFF)
                    return FALLBACK; /* a lone high surrogate */
                s->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            break;
        default: return FALLBACK;
        }
        if (put_code_point(s, cp) != OK) return ERROR;
    }
}

static int number(Scan *s) {
    const unsigned char *start = s->p;
    int is_float = 0;
    if (*s->p == '-') s->p++;
    if (s->p >= s->end) return FALLBACK;
    if (*s->p == '0') s->p++;
    else if (*s->p >= '1' && *s->p <= '9')
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
    else
        return FALLBACK;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (s->p >= s->end || *s->p < '0' || *s->p > '9') return FALLBACK;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
        is_float = 1;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '-' || *s->p == '+')) s->p++;
        if (s->p >= s->end || *s->p < '0' || *s->p > '9') return FALLBACK;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
        is_float = 1;
    }
    Py_ssize_t n = s->p - start;
    if (!is_float) {
        /* int(token) written back is the token itself, but for "-0" (written "0") */
        if (n - (*start == '-') > MAX_INT_DIGITS || (n == 2 && start[0] == '-' && start[1] == '0')) return FALLBACK;
        return put(s, start, n);
    }
    if (n > MAX_NUMBER) return FALLBACK;
    char token[MAX_NUMBER + 1];
    memcpy(token, start, n);
    token[n] = '\0';
    char *stop = NULL;
    double value = PyOS_string_to_double(token, &stop, NULL); /* float(token), as the reader's parse_float */
    if (value == -1.0 && PyErr_Occurred()) return ERROR;
    if (stop != token + n || !isfinite(value)) return FALLBACK; /* beyond a double: the writer refuses it */
    char *text = PyOS_double_to_string(value, 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* float.__repr__ */
    if (text == NULL) return ERROR;
    int result = put(s, text, (Py_ssize_t)strlen(text));
    PyMem_Free(text);
    return result;
}

static int literal(Scan *s, const char *word, Py_ssize_t n) {
    if (s->end - s->p < n || memcmp(s->p, word, n) != 0) return FALLBACK;
    s->p += n;
    return put(s, word, n);
}

static int name_less(const Scan *s, const Name *a, const Name *b) {
    if (a->len != b->len) return a->len < b->len;
    return memcmp(s->out + a->start, s->out + b->start, a->len) < 0;
}

/* Whether two of the names in [first, first + n) are the same bytes (sorted in place: insertion sort, objects
 * are small; Shell's gaps keep a large one fast). */
static int has_duplicate(Scan *s, Py_ssize_t first, Py_ssize_t n) {
    Name *names = s->names + first;
    static const Py_ssize_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        Py_ssize_t gap = gaps[g];
        for (Py_ssize_t i = gap; i < n; i++) {
            Name item = names[i];
            Py_ssize_t j = i;
            for (; j >= gap && name_less(s, &item, &names[j - gap]); j -= gap) names[j] = names[j - gap];
            names[j] = item;
        }
    }
    for (Py_ssize_t i = 1; i < n; i++)
        if (names[i].len == names[i - 1].len &&
            memcmp(s->out + names[i].start, s->out + names[i - 1].start, names[i].len) == 0)
            return 1;
    return 0;
}

static int value(Scan *s);

static int push_name(Scan *s, Py_ssize_t start, Py_ssize_t len) {
    if (s->n_names == s->cap_names) {
        Py_ssize_t cap = s->cap_names ? s->cap_names * 2 : 64;
        Name *grown = PyMem_Realloc(s->names, cap * sizeof(Name));
        if (grown == NULL) {
            PyErr_NoMemory();
            return ERROR;
        }
        s->names = grown, s->cap_names = cap;
    }
    s->names[s->n_names].start = start;
    s->names[s->n_names].len = len;
    s->n_names++;
    return OK;
}

/* Which wanted name (index) the canonical member name at start/len is, -1 when none. */
static Py_ssize_t wanted_index(Scan *s, Py_ssize_t start, Py_ssize_t len) {
    Py_ssize_t n = PyTuple_GET_SIZE(s->wanted);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(s->wanted, i);
        if (PyBytes_GET_SIZE(name) == len && memcmp(PyBytes_AS_STRING(name), s->out + start, len) == 0) return i;
    }
    return -1;
}

static int object(Scan *s) {
    int top = s->depth == 0, r;
    s->p++;
    if (put(s, "{", 1) != OK) return ERROR;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return put(s, "}", 1);
    }
    Py_ssize_t first = s->n_names;
    for (;;) {
        if (s->p >= s->end || *s->p != '"') return FALLBACK;
        Py_ssize_t content;
        if ((r = string(s, &content)) != OK) return r;
        Py_ssize_t name_len = s->len - 1 - content;
        if ((r = push_name(s, content, name_len)) != OK) return r;
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':') return FALLBACK;
        s->p++;
        if (put(s, ":", 1) != OK) return ERROR;
        skip_ws(s);
        Py_ssize_t at = s->len, slot = top ? wanted_index(s, content, name_len) : -1;
        s->depth++;
        r = value(s);
        s->depth--;
        if (r != OK) return r;
        if (slot >= 0) s->spans[2 * slot] = at, s->spans[2 * slot + 1] = s->len;
        skip_ws(s);
        if (s->p >= s->end) return FALLBACK;
        if (*s->p == ',') {
            s->p++;
            if (put(s, ",", 1) != OK) return ERROR;
            skip_ws(s);
            continue;
        }
        if (*s->p != '}') return FALLBACK;
        s->p++;
        break;
    }
    Py_ssize_t n = s->n_names - first;
    if (n > 1 && has_duplicate(s, first, n)) return FALLBACK; /* the reader refuses a member named twice */
    s->n_names = first;
    return put(s, "}", 1);
}

static int array(Scan *s) {
    int r;
    s->p++;
    if (put(s, "[", 1) != OK) return ERROR;
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return put(s, "]", 1);
    }
    for (;;) {
        s->depth++;
        r = value(s);
        s->depth--;
        if (r != OK) return r;
        skip_ws(s);
        if (s->p >= s->end) return FALLBACK;
        if (*s->p == ',') {
            s->p++;
            if (put(s, ",", 1) != OK) return ERROR;
            skip_ws(s);
            continue;
        }
        if (*s->p != ']') return FALLBACK;
        s->p++;
        return put(s, "]", 1);
    }
}

static int value(Scan *s) {
    if (s->p >= s->end || s->depth > MAX_DEPTH) return FALLBACK;
    switch (*s->p) {
    case '{': return object(s);
    case '[': return array(s);
    case '"': {
        Py_ssize_t content;
        int r = string(s, &content);
        if (r == OK && s->depth > 0 && s->len - 1 - content >= 4 && memcmp(s->out + content, "sr1:", 4) == 0)
            s->sealed_strings = 1;
        return r;
    }
    case 't': return literal(s, "true", 4);
    case 'f': return literal(s, "false", 5);
    case 'n': return literal(s, "null", 4);
    default: return number(s);
    }
}

static PyObject *canonical(PyObject *module, PyObject *args) {
    PyObject *data, *wanted, *result = NULL;
    int top_object;
    if (!PyArg_ParseTuple(args, "SO!p:canonical", &data, &PyTuple_Type, &wanted, &top_object)) return NULL;
    Py_ssize_t n_wanted = PyTuple_GET_SIZE(wanted);
    for (Py_ssize_t i = 0; i < n_wanted; i++)
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(wanted, i))) {
            PyErr_SetString(PyExc_TypeError, "canonical: names are bytes");
            return NULL;
        }
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    Scan s = {0};
    s.p = (const unsigned char *)PyBytes_AS_STRING(data);
    s.end = s.p + size;
    s.wanted = wanted;
    s.cap = size + 64;
    s.out = PyMem_Malloc(s.cap);
    s.spans = PyMem_Malloc((2 * n_wanted + 1) * sizeof(Py_ssize_t));
    if (s.out == NULL || s.spans == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < 2 * n_wanted; i++) s.spans[i] = -1;
    skip_ws(&s);
    int r = FALLBACK;
    if (!top_object || (s.p < s.end && *s.p == '{')) r = value(&s);
    if (r == OK) {
        skip_ws(&s);
        if (s.p != s.end) r = FALLBACK; /* extra data */
    }
    if (r == ERROR) goto done;
    if (r == FALLBACK) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int identical = s.len == size && memcmp(s.out, PyBytes_AS_STRING(data), size) == 0;
    PyObject *text = identical ? Py_NewRef(data) : PyBytes_FromStringAndSize((const char *)s.out, s.len);
    PyObject *spans = PyTuple_New(2 * n_wanted);
    if (text != NULL && spans != NULL) {
        int ok = 1;
        for (Py_ssize_t i = 0; ok && i < 2 * n_wanted; i++) {
            PyObject *at = PyLong_FromSsize_t(s.spans[i]);
            if (at == NULL) ok = 0;
            else PyTuple_SET_ITEM(spans, i, at);
        }
        if (ok) result = Py_BuildValue("(OOOO)", text, identical ? Py_True : Py_False,
                                       s.sealed_strings ? Py_True : Py_False, spans);
    }
    Py_XDECREF(text);
    Py_XDECREF(spans);
done:
    PyMem_Free(s.out);
    PyMem_Free(s.names);
    PyMem_Free(s.spans);
    return result;
}

static PyMethodDef module_methods[] = {
    {"canonical", canonical, METH_VARARGS,
     "canonical(data, names, top_object) -> (text, identical, sealed_strings, spans) | None: field mode's strict "
     "read and canonical write of a JSON text in one pass, None whenever the Python reader must judge it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "strongroom.envelope._canonical",
    "Field mode's strict JSON reader and canonical writer in C (see json_fields).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__canonical(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) return NULL;
    if (PyModule_AddIntConstant(module, "MAX_DEPTH", MAX_DEPTH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
