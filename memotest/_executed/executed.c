/* memotest._executed._executed: which code objects a Python process executed.
 *
 * A PEP 523 frame-evaluation function notes the code object of every frame the
 * interpreter evaluates (a call, a generator or coroutine resumed, a module or class
 * body), in every thread of the interpreter, then hands the frame to the evaluator that
 * was there before. memotest's forked runs use it to fingerprint a Python source file by
 * the code of it that ran (memotest/worker/code_watch.py, memotest/inputs/code.py), and
 * phase() drains a second table, what ran since its last call (per test of a pytest run,
 * memotest_pytest/attribute.py). Tables of pointers, each code
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
/* The phase table: the code objects noted since the last phase() call, when phases are
 * on (a pytest run attributing code to each test: memotest/worker/code_watch.py). */
static PyObject **ptable;
static size_t pcapacity, pused;
static int phasing;
static _PyFrameEvalFunction previous;

static size_t slot_of(PyObject *p, size_t cap) {
    return (size_t)(((uintptr_t)p >> 4) * (uintptr_t)0x9E3779B97F4A7C15ULL) & (cap - 1);
}

static int grow(PyObject ***tab, size_t *cap_p) {
    size_t cap = *cap_p ? *cap_p * 2 : 4096;
    PyObject **fresh = PyMem_RawCalloc(cap, sizeof(PyObject *));
    if (fresh == NULL)
        return -1;
    for (size_t i = 0; i < *cap_p; i++) {
        PyObject *p = (*tab)[i];
        if (p == NULL)
            continue;
        size_t j = slot_of(p, cap);
        while (fresh[j] != NULL)
            j = (j + 1) & (cap - 1);
        fresh[j] = p;
    }
    PyMem_RawFree(*tab);
    *tab = fresh;
    *cap_p = cap;
    return 0;
}

/* Adds code to a table (a strong reference) unless it is there already. */
static void add(PyObject ***tab, size_t *cap_p, size_t *used_p, PyObject *code) {
    if (*cap_p) {
        size_t i = slot_of(code, *cap_p);
        for (;;) {
            PyObject *p = (*tab)[i];
            if (p == code)
                return;
            if (p == NULL)
                break;
            i = (i + 1) & (*cap_p - 1);
        }
    }
    if ((*used_p + 1) * 2 > *cap_p && grow(tab, cap_p) < 0) {
        lost = 1;
        return;
    }
    size_t i = slot_of(code, *cap_p);
    while ((*tab)[i] != NULL)
        i = (i + 1) & (*cap_p - 1);
    Py_INCREF(code);
    (*tab)[i] = code;
    (*used_p)++;
}

static void note(PyObject *code) {
    add(&table, &capacity, &used, code);
    if (phasing)
        add(&ptable, &pcapacity, &pused, code);
}

/* The codes of a table as a new list, the table emptied (its references handed over). */
static PyObject *drain(PyObject **tab, size_t cap, size_t *used_p) {
    PyObject *codes = PyList_New(0);
    if (codes == NULL)
        return NULL;
    for (size_t i = 0; i < cap; i++) {
        PyObject *p = tab[i];
        if (p == NULL)
            continue;
        if (PyList_Append(codes, p) < 0) {
            Py_DECREF(codes);
            return NULL;
        }
        Py_DECREF(p);
        tab[i] = NULL;
    }
    *used_p = 0;
    return codes;
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
#define phase unsupported
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
    PyObject *codes = drain(table, capacity, &used);
    if (codes == NULL)
        return NULL;
    PyObject *rest = drain(ptable, pcapacity, &pused);
    if (rest == NULL) {
        Py_DECREF(codes);
        return NULL;
    }
    Py_DECREF(rest);
    phasing = 0;
    lost = 0;
    return Py_BuildValue("(NO)", codes, intact ? Py_True : Py_False);
}

static PyObject *phase(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    if (!active) {
        PyErr_SetString(PyExc_RuntimeError, "not started");
        return NULL;
    }
    PyObject *codes = drain(ptable, pcapacity, &pused);
    phasing = 1;
    return codes;
}
#endif

static PyMethodDef methods[] = {
    {"start", start, METH_NOARGS,
     "Start noting the code object of every frame evaluated, in every thread."},
    {"stop", stop, METH_NOARGS,
     "Stop; return (the code objects noted, whether the noting was never displaced)."},
    {"phase", phase, METH_NOARGS,
     "The code objects noted since the last call (all noted from now on when first called)."},
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
