/* memotest._executed._executed: which code objects a Python process executed.
 *
 * A PEP 523 frame-evaluation function notes the code object of every frame the
 * interpreter evaluates (a call, a generator or coroutine resumed, a module or class
 * body), in every thread of the interpreter, then hands the frame to the evaluator that
 * was there before. memotest's forked runs use it to fingerprint a Python source file by
 * the code of it that ran (memotest/worker/code_watch.py, memotest/inputs/code.py). Table of pointers, each code
 * object held by a strong reference so that its address is never reused while noted.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#define FRAME_CODE(f) ((f)->f_code)
typedef struct _PyInterpreterFrame frame_t;
#elif PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
#define FRAME_CODE(f) PyUnstable_InterpreterFrame_GetCode(f)
typedef struct _PyInterpreterFrame frame_t;
#define CODE_IS_NEW_REFERENCE 1
#else
#define UNSUPPORTED 1
#endif

#ifndef UNSUPPORTED
static PyObject **table;      /* open addressing; NULL = empty slot */
static size_t capacity, used;
static int lost;              /* a code object could not be noted (out of memory) */
static int active;
static _PyFrameEvalFunction previous;

static size_t slot_of(PyObject *p, size_t cap) {
    return (size_t)(((uintptr_t)p >> 4) * (uintptr_t)0x9E3779B97F4A7C15ULL) & (cap - 1);
}

static int grow(void) {
    size_t cap = capacity ? capacity * 2 : 4096;
    PyObject **fresh = PyMem_RawCalloc(cap, sizeof(PyObject *));
    if (fresh == NULL)
        return -1;
    for (size_t i = 0; i < capacity; i++) {
        PyObject *p = table[i];
        if (p == NULL)
            continue;
        size_t j = slot_of(p, cap);
        while (fresh[j] != NULL)
            j = (j + 1) & (cap - 1);
        fresh[j] = p;
    }
    PyMem_RawFree(table);
    table = fresh;
    capacity = cap;
    return 0;
}

static void note(PyObject *code) {
    if (capacity) {
        size_t i = slot_of(code, capacity);
        for (;;) {
            PyObject *p = table[i];
            if (p == code)
                return;
            if (p == NULL)
                break;
            i = (i + 1) & (capacity - 1);
        }
    }
    if ((used + 1) * 2 > capacity && grow() < 0) {
        lost = 1;
        return;
    }
    size_t i = slot_of(code, capacity);
    while (table[i] != NULL)
        i = (i + 1) & (capacity - 1);
    Py_INCREF(code);
    table[i] = code;
    used++;
}

static PyObject *evaluate(PyThreadState *ts, frame_t *frame, int throwflag) {
    PyObject *code = (PyObject *)FRAME_CODE(frame);
    if (code != NULL)
        note(code);
#ifdef CODE_IS_NEW_REFERENCE
    Py_XDECREF(code);
#endif
    return previous(ts, frame, throwflag);
}
#endif /* UNSUPPORTED */

#ifdef UNSUPPORTED
static PyObject *unsupported(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    PyErr_SetString(PyExc_RuntimeError, "not supported on this Python version");
    return NULL;
}
#define start unsupported
#define stop unsupported
#else
static PyObject *start(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    if (active) {
        PyErr_SetString(PyExc_RuntimeError, "already started");
        return NULL;
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    previous = _PyInterpreterState_GetEvalFrameFunc(interp);
    _PyInterpreterState_SetEvalFrameFunc(interp, evaluate);
    active = 1;
    Py_RETURN_NONE;
}

static PyObject *stop(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    if (!active) {
        PyErr_SetString(PyExc_RuntimeError, "not started");
        return NULL;
    }
    PyInterpreterState *interp = PyInterpreterState_Get();
    int ours = _PyInterpreterState_GetEvalFrameFunc(interp) == evaluate;
    int intact = ours && !lost;
    if (ours)
        _PyInterpreterState_SetEvalFrameFunc(interp, previous);
    active = 0;
    PyObject *codes = PyList_New(0);
    if (codes == NULL)
        return NULL;
    for (size_t i = 0; i < capacity; i++) {
        PyObject *p = table[i];
        if (p == NULL)
            continue;
        if (PyList_Append(codes, p) < 0) {
            Py_DECREF(codes);
            return NULL;
        }
        Py_DECREF(p);
        table[i] = NULL;
    }
    used = 0;
    lost = 0;
    return Py_BuildValue("(NO)", codes, intact ? Py_True : Py_False);
}
#endif

static PyMethodDef methods[] = {
    {"start", start, METH_NOARGS,
     "Start noting the code object of every frame evaluated, in every thread."},
    {"stop", stop, METH_NOARGS,
     "Stop; return (the code objects noted, whether the noting was never displaced)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_executed", "Which code objects a process executed.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__executed(void) {
    PyObject *m = PyModule_Create(&module);
#ifdef UNSUPPORTED
    int supported = 0;
#else
    int supported = 1;
#endif
    if (m != NULL && PyModule_AddIntConstant(m, "supported", supported) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
