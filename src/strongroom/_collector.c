/*
 * strongroom._collector: take an object out of the cyclic garbage collector's passes (runtime.untracked).
 *
 * The client library's caches keep a few Python objects per active subject (a producer's key and its ready
 * sealer, for 100,000 subjects about 400,000 objects). None of them can be part of a reference cycle, yet
 * every full pass of the collector walks them all: about 165 ms each, in the middle of whatever the process
 * was doing (docs/benchmarks.md, "Client library"). CPython untracks tuples and dicts that hold only atomic
 * values by itself; untrack() does the same for a chosen object. Reference counting still frees it.
 *
 * The caller's promise: the object is never part of a reference cycle (it holds only strings, bytes, numbers,
 * None and other objects that keep that promise, and nothing can be added to it). An untracked cycle would
 * never be freed; nothing worse.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *untrack(PyObject *module, PyObject *obj) {
    if (PyObject_IS_GC(obj) && PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    return Py_NewRef(obj);
}

static PyMethodDef module_methods[] = {
    {"untrack", untrack, METH_O,
     "untrack(obj) -> obj: the cyclic collector no longer walks obj (which must never be part of a cycle)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "strongroom._collector",
    "Objects out of the cyclic garbage collector's passes (see strongroom.runtime.untracked).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__collector(void) { return PyModule_Create(&module_def); }
