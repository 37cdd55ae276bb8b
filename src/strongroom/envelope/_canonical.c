/*
 * strongroom.envelope._canonical: field mode's strict JSON reader and canonical writer (issue 18), the reader of
 * _json_scan.h exposed to json_fields.
 *
 * canonical(data, names, top_object) reads the UTF-8 JSON text `data` as json_fields.load_json_object reads
 * it and writes it as json_fields._json_bytes writes what that read. It answers
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
 * or None whenever it is not sure to agree with the Python reader and writer (see _json_scan.h): json_fields then
 * takes the record through its Python path.
 */
#include "_json_scan.h"

static PyObject *canonical(PyObject *module, PyObject *args) {
    PyObject *data, *wanted, *result = NULL;
    int top_object;
    if (!PyArg_ParseTuple(args, "SO!p:canonical", &data, &PyTuple_Type, &wanted, &top_object)) return NULL;
    if (!scan_names_ok(wanted)) return NULL;
    Py_ssize_t n_wanted = PyTuple_GET_SIZE(wanted), size = PyBytes_GET_SIZE(data);
    const unsigned char *bytes = (const unsigned char *)PyBytes_AS_STRING(data);
    JsScan s;
    int r = scan_document(&s, bytes, size, wanted, top_object);
    if (r == JS_ERROR) goto done;
    if (r == JS_FALLBACK) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int identical = scan_identical(&s, bytes, size);
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
    scan_release(&s);
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
    if (PyModule_AddIntConstant(module, "MAX_DEPTH", JS_MAX_DEPTH) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
