/* The gate of mmpi/_runtime/progress.py in C: Rule 1's flags, and the wrapper every public call of a
 * bridged object runs in while a progress thread is on. Part of the module `mmpi._backend._compiled`.
 *
 * Interpreted, the wrapper costs 220-310 ns per call; here 40-115 ns (docs/progress.md). These
 * are the same steps as python.Gate's (the reference, and the fallback):
 *
 *   Gate(lock, op_module): busy, passing, owner, thread (attributes); locked(fn) -> wrapper.
 *
 * A wrapper called by the thread that holds the pass (`owner`, while `passing`) calls fn as
 * it is. Otherwise it counts itself in `busy`, then waits for a pass under way (acquiring
 * and releasing `lock`, the GIL let go meanwhile), calls fn, and uncounts itself; the
 * outermost call then forgets the completed operations once _engine.op.ACTIVE holds more than 256,
 * and wakes the sleeping thread (`thread.idle`) if the call left work in flight: the
 * engine's background steps, the newest active operation not done, or _engine.op.NEW_WORK a
 * receive not yet matched (NEW_WORK is reset to False).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <pythread.h>

typedef struct {
    PyObject_HEAD
    long busy;
    char passing;
    unsigned long long owner;
    PyObject *thread, *lock, *op; /* thread: None while there is none */
} Gate;

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    Gate *gate;
    vectorcallfunc vectorcall;
} Locked;

static PyTypeObject LockedType;

static PyObject *s_acquire, *s_release, *s_active, *s_new_work, *s_idle, *s_engine,
    *s_background, *s_done, *s_matched, *s_wake, *s_set;

static int gate_strings(void) {
    if (s_acquire) return 0;
#define I(v, s) if (!(v = PyUnicode_InternFromString(s))) return -1;
    I(s_acquire, "acquire") I(s_release, "release") I(s_active, "ACTIVE")
    I(s_new_work, "NEW_WORK") I(s_idle, "idle") I(s_engine, "engine")
    I(s_background, "background") I(s_done, "done") I(s_matched, "matched") I(s_wake, "wake")
    I(s_set, "set")
#undef I
    return 0;
}

static int gate_init(Gate *g, PyObject *args, PyObject *kw) {
    PyObject *lock, *op;
    if (gate_strings() < 0 || !PyArg_ParseTuple(args, "OO", &lock, &op)) return -1;
    Py_INCREF(lock);
    Py_XSETREF(g->lock, lock);
    Py_INCREF(op);
    Py_XSETREF(g->op, op);
    Py_XSETREF(g->thread, Py_NewRef(Py_None));
    g->owner = (unsigned long long)-1;
    return 0;
}

static int gate_traverse(Gate *g, visitproc visit, void *arg) {
    Py_VISIT(g->thread);
    Py_VISIT(g->lock);
    Py_VISIT(g->op);
    return 0;
}

static int gate_clear(Gate *g) {
    Py_CLEAR(g->thread);
    Py_CLEAR(g->lock);
    Py_CLEAR(g->op);
    return 0;
}

static void gate_dealloc(Gate *g) {
    PyObject_GC_UnTrack(g);
    gate_clear(g);
    Py_TYPE(g)->tp_free((PyObject *)g);
}

/* Truth of o.name (a new attribute each time): 1, 0, or -1 on an error. */
static int truth(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* The outermost call's end: 0, or -1 on an error. */
static int after(Gate *g) {
    PyObject *active = PyObject_GetAttr(g->op, s_active);
    if (!active) return -1;
    int rc = -1;
    PyObject *t = NULL;
    if (PyList_Check(active) && PyList_GET_SIZE(active) > 256) { /* forget the completed */
        PyObject *keep = PyList_New(0);
        if (!keep) goto out;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(active); i++) {
            PyObject *op = PyList_GET_ITEM(active, i);
            int done = truth(op, s_done);
            if (done < 0 || (!done && PyList_Append(keep, op) < 0)) {
                Py_DECREF(keep);
                goto out;
            }
        }
        int set = PyObject_SetAttr(g->op, s_active, keep);
        Py_DECREF(active);
        active = keep;
        if (set < 0) goto out;
    }
    /* held: the attribute lookups below run Python, which may replace the gate's thread */
    t = Py_NewRef(g->thread);
    int idle;
    if (t == Py_None || (idle = truth(t, s_idle)) == 0) {
        rc = 0;
        goto out;
    }
    if (idle < 0) goto out;
    PyObject *new = PyObject_GetAttr(g->op, s_new_work);
    if (!new) goto out;
    if (PyObject_SetAttr(g->op, s_new_work, Py_False) < 0) {
        Py_DECREF(new);
        goto out;
    }
    int wake = 0;
    PyObject *engine = PyObject_GetAttr(t, s_engine);
    if (engine) {
        wake = truth(engine, s_background);
        Py_DECREF(engine);
    } else {
        wake = -1;
    }
    if (!wake && PyList_Check(active) && PyList_GET_SIZE(active)) {
        PyObject *last = Py_NewRef(PyList_GET_ITEM(active, PyList_GET_SIZE(active) - 1));
        int done = truth(last, s_done);
        Py_DECREF(last);
        wake = done < 0 ? -1 : !done;
    }
    if (!wake && new != Py_True) {
        int t_new = PyObject_IsTrue(new);
        if (t_new > 0) {
            int matched = truth(new, s_matched);
            wake = matched < 0 ? -1 : !matched;
        } else if (t_new < 0) {
            wake = -1;
        }
    }
    Py_DECREF(new);
    if (wake < 0) goto out;
    if (wake) {
        PyObject *ev = PyObject_GetAttr(t, s_wake);
        PyObject *r = ev ? PyObject_CallMethodNoArgs(ev, s_set) : NULL;
        Py_XDECREF(ev);
        if (!r) goto out;
        Py_DECREF(r);
    }
    rc = 0;
out:
    Py_XDECREF(t);
    Py_DECREF(active);
    return rc;
}

static PyObject *locked_vectorcall(Locked *self, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
    Gate *g = self->gate;
    if (g->passing && (unsigned long long)PyThread_get_thread_ident() == g->owner)
        return PyObject_Vectorcall(self->fn, args, nargsf, kwnames); /* the pass's own call */
    g->busy++; /* then look for a pass (Rule 1) */
    if (g->passing) { /* the pass under way ends first */
        PyObject *r = PyObject_CallMethodNoArgs(g->lock, s_acquire);
        if (r) {
            Py_DECREF(r);
            r = PyObject_CallMethodNoArgs(g->lock, s_release);
        }
        if (!r) {
            g->busy--;
            return NULL;
        }
        Py_DECREF(r);
    }
    PyObject *result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    g->busy--;
    if (!result || g->busy) return result; /* a call inside another: the outer one decides */
    if (after(g) < 0) Py_CLEAR(result);
    return result;
}

static PyObject *gate_locked(Gate *g, PyObject *fn) {
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "mmpi._backend._compiled.Gate.locked: not callable");
        return NULL;
    }
    Locked *l = PyObject_GC_New(Locked, &LockedType);
    if (!l) return NULL;
    l->fn = Py_NewRef(fn);
    l->gate = (Gate *)Py_NewRef((PyObject *)g);
    l->vectorcall = (vectorcallfunc)locked_vectorcall;
    PyObject_GC_Track(l);
    return (PyObject *)l;
}

static PyMethodDef gate_methods[] = {
    {"locked", (PyCFunction)gate_locked, METH_O, "locked(fn): fn, run behind the gate"},
    {NULL}};

static PyMemberDef gate_members[] = {
    {"busy", T_LONG, offsetof(Gate, busy), READONLY, "bridged calls under way"},
    {"passing", T_BOOL, offsetof(Gate, passing), 0, "whether the thread is in a pass"},
    {"owner", T_ULONGLONG, offsetof(Gate, owner), 0, "the thread's ident"},
    {"thread", T_OBJECT_EX, offsetof(Gate, thread), 0, "the progress thread, or None"},
    {"lock", T_OBJECT_EX, offsetof(Gate, lock), READONLY, "held by the thread for a pass"},
    {"op", T_OBJECT_EX, offsetof(Gate, op), READONLY, "mmpi._engine.op"},
    {NULL}};

PyTypeObject GateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mmpi._backend._compiled.Gate",
    .tp_basicsize = sizeof(Gate),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Gate(lock, _engine.op module): mmpi._runtime.progress's Rule 1, compiled",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)gate_init,
    .tp_traverse = (traverseproc)gate_traverse,
    .tp_clear = (inquiry)gate_clear,
    .tp_dealloc = (destructor)gate_dealloc,
    .tp_methods = gate_methods,
    .tp_members = gate_members,
};

static int locked_traverse(Locked *l, visitproc visit, void *arg) {
    Py_VISIT(l->fn);
    Py_VISIT(l->gate);
    return 0;
}

static int locked_clear(Locked *l) {
    Py_CLEAR(l->fn);
    Py_CLEAR(l->gate);
    return 0;
}

static void locked_dealloc(Locked *l) {
    PyObject_GC_UnTrack(l);
    locked_clear(l);
    PyObject_GC_Del(l);
}

/* a method: bound to the instance it is got from, as a function is */
static PyObject *locked_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

/* __name__, __qualname__, __doc__, __module__ ... are the wrapped function's */
static PyObject *locked_getattro(Locked *l, PyObject *name) {
    PyObject *v = PyObject_GenericGetAttr((PyObject *)l, name);
    if (v || !PyErr_ExceptionMatches(PyExc_AttributeError)) return v;
    PyErr_Clear();
    return PyObject_GetAttr(l->fn, name);
}

static PyObject *locked_doc(Locked *l, void *closure) {
    return PyObject_GetAttrString(l->fn, "__doc__");
}
static PyObject *locked_true(Locked *l, void *closure) { Py_RETURN_TRUE; }

static PyGetSetDef locked_getset[] = {
    {"__doc__", (getter)locked_doc, NULL, NULL, NULL},
    {"__mmpi_locked__", (getter)locked_true, NULL, NULL, NULL},
    {NULL}};

static PyMemberDef locked_members[] = {
    {"__wrapped__", T_OBJECT_EX, offsetof(Locked, fn), READONLY, NULL},
    {NULL}};

static PyTypeObject LockedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mmpi._backend._compiled.Locked",
    .tp_basicsize = sizeof(Locked),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(Locked, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = locked_get,
    .tp_getattro = (getattrofunc)locked_getattro,
    .tp_traverse = (traverseproc)locked_traverse,
    .tp_clear = (inquiry)locked_clear,
    .tp_dealloc = (destructor)locked_dealloc,
    .tp_getset = locked_getset,
    .tp_members = locked_members,
};

/* for crank.c's module init */
int cgate_ready(void) { return PyType_Ready(&LockedType); }
