/* The front of a communicator's small blocking Barrier, Bcast, Allreduce and Reduce: what
 * mmpi/_collectives/compiled.py does around ccoll.c's steps (the call's checks, the
 * communicator's bookkeeping, the arguments of the steps), in C. Part of `mmpi._backend._compiled`.
 *
 * On shared cores a rank's interpreted steps before and after a small collective lengthen
 * every turn it takes on the CPU while the others poll: about 5 us of them per call made a
 * Bcast of 8 B take twice as long as its steps alone (docs/performance.md, "Small
 * collectives").
 *
 * Front(...).barrier(), .bcast(buf, root), .allreduce(sendbuf, recvbuf, op) and
 * .reduce(sendbuf, recvbuf, op, root) return True once the call is done, or False, having
 * changed nothing, where it is not the common case: the Python path (the reference) then runs
 * and says what is wrong, if anything. The common case is compiled.py's Rule (no monitor,
 * nothing kept, nothing pending or held, no unpacks, no rank gone) with a whole C-contiguous
 * numpy array of a dtype the Python path has met, a plain int root in range, and for an
 * Allreduce or a Reduce a predefined op and arrays of one dtype and size (or MPI.IN_PLACE, at
 * a Reduce's root only). What ccoll.c hands back for Python to say (a mismatch, a crossing of
 * another call, another size) goes to `fail(mode, got, nbytes, source)`, which raises.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>
#include <stdint.h>
#include <time.h>

#include "ccoll.h"

/* the objects a front holds, by index */
enum { O_CORE, O_COLL, O_LOCAL, O_ENGINE, O_CROSSINGS, O_KEPT, O_DEPARTURES, O_FANOUT,
       O_UNPACKS, O_HEARD, O_NDARRAYS, O_NDARRAY, O_IN_PLACE, O_OPS, O_IDLE, O_KEEP, O_FAIL,
       O_WORLD_OF, O_LOCAL_OF, O_HANDLES, O_WORDS, O_NAMES, NOBJ };

#define MAX_OPS 16

typedef struct {
    PyObject_HEAD
    PyObject *o[NOBJ];
    Py_buffer words; /* the check's int64 words (O_WORDS not None) */
    MPI_Comm local;
    MPI_Request check;
    MPI_Op ops[MAX_OPS];
    long size, rank, nmine, leader, peer, me, ctx, nfwd, nwords, verify, checks, carry,
        eager_max, split_from, tests, first;
    int64_t kinds[4]; /* by mode: Barrier, Allreduce, Bcast, Reduce */
    int tags[4];
} Front;

static PyObject *s_finalized, *s_pending, *s_monitor, *s_local, *s_held, *s_gone, *s_current,
    *s_name, *s_call_name, *s_call, *s_calls, *s_dtype, *s_handle;

static int interned(void) {
    if (s_finalized) return 0;
#define I(v, s) if (!(v = PyUnicode_InternFromString(s))) return -1;
    I(s_finalized, "finalized") I(s_pending, "pending") I(s_monitor, "monitor")
    I(s_local, "local") I(s_held, "held") I(s_gone, "gone") I(s_current, "current")
    I(s_name, "name") I(s_call_name, "call_name") I(s_call, "call") I(s_calls, "calls")
    I(s_dtype, "dtype") I(s_handle, "handle")
#undef I
    return 0;
}

static int front_init(Front *f, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {
        "core", "coll", "local", "engine", "crossings", "kept", "departures", "fanout",
        "unpacks", "heard", "ndarrays", "ndarray", "in_place", "ops", "idle", "keep", "fail",
        "world_of", "local_of", "handles", "words", "names",
        "local_handle", "check_handle", "size", "rank", "nmine", "leader", "peer", "me", "ctx",
        "nfwd", "nwords", "verify", "checks", "carry", "eager_max", "split_from", "tests",
        "first", "kinds", "tags", NULL};
    PyObject *o[NOBJ], *kinds, *tags;
    unsigned long long local_h, check_h;
    if (f->o[O_CORE]) {
        PyErr_SetString(PyExc_TypeError, "mmpi._backend._compiled.Front: made already");
        return -1;
    }
    if (interned() < 0 ||
        !PyArg_ParseTupleAndKeywords(
            args, kw, "OOOOOO!OOO!O!O!OOO!OOOO!O!O!OO!$KKllllllllllllllllO!O!", kwlist,
            &o[O_CORE], &o[O_COLL], &o[O_LOCAL], &o[O_ENGINE], &o[O_CROSSINGS], &PyDict_Type,
            &o[O_KEPT], &o[O_DEPARTURES], &o[O_FANOUT], &PyList_Type, &o[O_UNPACKS],
            &PyList_Type, &o[O_HEARD], &PyDict_Type, &o[O_NDARRAYS], &o[O_NDARRAY],
            &o[O_IN_PLACE], &PyTuple_Type, &o[O_OPS], &o[O_IDLE], &o[O_KEEP], &o[O_FAIL],
            &PyTuple_Type, &o[O_WORLD_OF], &PyTuple_Type, &o[O_LOCAL_OF], &PyTuple_Type,
            &o[O_HANDLES], &o[O_WORDS], &PyTuple_Type, &o[O_NAMES], &local_h, &check_h,
            &f->size, &f->rank, &f->nmine, &f->leader, &f->peer, &f->me, &f->ctx, &f->nfwd,
            &f->nwords, &f->verify, &f->checks, &f->carry, &f->eager_max, &f->split_from,
            &f->tests, &f->first, &PyTuple_Type, &kinds, &PyTuple_Type, &tags))
        return -1;
    if (PyTuple_GET_SIZE(o[O_WORLD_OF]) != f->size || PyTuple_GET_SIZE(o[O_LOCAL_OF]) != f->size ||
        PyTuple_GET_SIZE(o[O_HANDLES]) != f->nfwd || f->nfwd < 1 ||
        PyTuple_GET_SIZE(o[O_OPS]) > MAX_OPS || PyTuple_GET_SIZE(kinds) != 4 ||
        PyTuple_GET_SIZE(tags) != 4 || PyTuple_GET_SIZE(o[O_NAMES]) != 4) {
        PyErr_SetString(PyExc_ValueError, "mmpi._backend._compiled.Front: inconsistent arguments");
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        f->kinds[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(kinds, i));
        f->tags[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(tags, i));
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o[O_OPS]); i++) {
        PyObject *h = PyObject_GetAttr(PyTuple_GET_ITEM(o[O_OPS], i), s_handle);
        f->ops[i] = h ? (MPI_Op)PyLong_AsUnsignedLongLong(h) : 0;
        Py_XDECREF(h);
    }
    if (PyErr_Occurred()) return -1;
    if (o[O_WORDS] != Py_None &&
        PyObject_GetBuffer(o[O_WORDS], &f->words, PyBUF_SIMPLE | PyBUF_WRITABLE) < 0)
        return -1;
    if (o[O_WORDS] != Py_None &&
        f->words.len < (Py_ssize_t)sizeof(int64_t) * f->nwords * (f->nmine + 1)) {
        PyBuffer_Release(&f->words);
        PyErr_SetString(PyExc_ValueError, "mmpi._backend._compiled.Front: words too short");
        return -1;
    }
    for (int i = 0; i < NOBJ; i++) {
        Py_INCREF(o[i]);
        Py_XSETREF(f->o[i], o[i]);
    }
    f->local = (MPI_Comm)local_h;
    f->check = check_h ? (MPI_Request)check_h : MPI_REQUEST_NULL;
    return 0;
}

static int front_traverse(Front *f, visitproc visit, void *arg) {
    for (int i = 0; i < NOBJ; i++) Py_VISIT(f->o[i]);
    return 0;
}

static int front_clear(Front *f) {
    if (f->o[O_WORDS] && f->o[O_WORDS] != Py_None) PyBuffer_Release(&f->words);
    for (int i = 0; i < NOBJ; i++) Py_CLEAR(f->o[i]);
    return 0;
}

static void front_dealloc(Front *f) {
    PyObject_GC_UnTrack(f);
    front_clear(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

/* 1 if o.name is false, 0 if true, -1 on an error. */
static int quiet(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t < 0 ? -1 : !t;
}

/* Whether o.name is `want`: 1 or 0, -1 on an error. */
static int attr_is(PyObject *o, PyObject *name, PyObject *want) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    Py_DECREF(v);
    return v == want;
}

/* compiled.py's Rule, and what the Python path would do first: 1 if the call may run here. */
static int ready(Front *f) {
    int r;
    if (PyList_GET_SIZE(f->o[O_UNPACKS]) || PyDict_GET_SIZE(f->o[O_KEPT])) return 0;
    if ((r = quiet(f->o[O_ENGINE], s_finalized)) != 1) return r;
    if ((r = quiet(f->o[O_CORE], s_pending)) != 1) return r;
    if ((r = attr_is(f->o[O_CROSSINGS], s_monitor, Py_None)) != 1) return r;
    if ((r = attr_is(f->o[O_COLL], s_local, f->o[O_LOCAL])) != 1) return r;
    if ((r = quiet(f->o[O_FANOUT], s_held)) != 1) return r;
    return quiet(f->o[O_DEPARTURES], s_gone);
}

/* The (datatype, extent) the Python path has worked out for `a`'s dtype (borrowed), if `a` is
 * a numpy array and it has; NULL (no exception) otherwise. `dtype`: a's, borrowed. */
static PyObject *known(Front *f, PyObject *a, PyObject **dtype) {
    if ((PyObject *)Py_TYPE(a) != f->o[O_NDARRAY]) return NULL;
    PyObject *dt = PyObject_GetAttr(a, s_dtype);
    if (!dt) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *got = PyDict_GetItemWithError(f->o[O_NDARRAYS], dt);
    Py_DECREF(dt); /* the array keeps its dtype */
    if (!got || !PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2) {
        PyErr_Clear();
        return NULL;
    }
    if (dtype) *dtype = dt;
    return got;
}

/* The index of `op` among the predefined ops, or -1. */
static int op_index(Front *f, PyObject *op) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f->o[O_OPS]); i++)
        if (PyTuple_GET_ITEM(f->o[O_OPS], i) == op) return (int)i;
    return -1;
}

/* The extent and handle of a known (datatype, extent): 0, or -1 (no exception) if unusable. */
static int type_of(PyObject *dt, Py_ssize_t *extent, unsigned long long *handle) {
    *extent = PyLong_AsSsize_t(PyTuple_GET_ITEM(dt, 1));
    PyObject *h = PyObject_GetAttr(PyTuple_GET_ITEM(dt, 0), s_handle);
    *handle = h ? PyLong_AsUnsignedLongLong(h) : 0;
    Py_XDECREF(h);
    if (PyErr_Occurred() || *extent <= 0) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

static int set_long(PyObject *o, PyObject *name, long v) {
    PyObject *n = PyLong_FromLong(v);
    if (!n) return -1;
    int rc = PyObject_SetAttr(o, name, n);
    Py_DECREF(n);
    return rc;
}

/* Run call `k` (its mode, buffers, check and sends filled in) with this rank's crossing from
 * rank `source` or to rank `dest` (-1: none), as _collectives.compiled._run does; True, or NULL. */
static PyObject *go(Front *f, Call *k, long source, long dest, Py_ssize_t nbytes) {
    int mode = k->mode;
    long pw = -1, route = 0;
    k->local = f->local;
    k->nwords = (int)f->nwords;
    k->nmine = (int)f->nmine;
    k->verify = (int)f->verify;
    k->me = (int)f->me;
    k->ctx = (int)f->ctx;
    k->tag = f->tags[mode];
    k->w.tests = (int)f->tests;
    k->w.first = (int)f->first;
    k->keep = f->o[O_KEEP];
    k->link = MPI_COMM_NULL;
    if (source >= 0 || dest >= 0) {
        pw = PyLong_AsLong(PyTuple_GET_ITEM(f->o[O_WORLD_OF], source >= 0 ? source : dest));
        route = (f->me + pw) % f->nfwd;
        k->peer = (int)pw;
        k->link = (MPI_Comm)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(f->o[O_HANDLES], route));
        if (PyErr_Occurred()) return NULL;
    }
    PyObject *key = source >= 0 ? Py_BuildValue("(ll)", f->ctx, pw) : Py_NewRef(Py_None);
    PyObject *idle = key ? PyObject_CallFunctionObjArgs(f->o[O_IDLE], f->o[O_ENGINE], key, NULL)
                         : NULL;
    Py_XDECREF(key);
    if (!idle) return NULL;
    k->w.idle = idle;
    /* core.start(name) and departures.enter(core), as _collectives.run.blocking does */
    PyObject *name = PyTuple_GET_ITEM(f->o[O_NAMES], mode), *calls = NULL;
    if (PyObject_SetAttr(f->o[O_COLL], s_name, name) < 0 ||
        PyObject_SetAttr(f->o[O_CORE], s_call_name, name) < 0 ||
        !(calls = PyObject_GetAttr(f->o[O_CORE], s_calls)) ||
        PyObject_SetAttr(f->o[O_COLL], s_call, calls) < 0 ||
        PyObject_SetAttr(f->o[O_DEPARTURES], s_current, f->o[O_CORE]) < 0) {
        Py_XDECREF(calls);
        Py_DECREF(idle);
        return NULL;
    }
    long ncalls = PyLong_AsLong(calls);
    Py_DECREF(calls);
    k->call = (unsigned int)ncalls;
    PyObject *got = ccoll_run(k);
    Py_DECREF(idle);
    if (got && source >= 0) { /* e.heard[route] = time.monotonic() */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        PyObject *now = PyFloat_FromDouble((double)ts.tv_sec + ts.tv_nsec * 1e-9);
        if (!now || PyList_SetItem(f->o[O_HEARD], route, now) < 0) Py_CLEAR(got);
    }
    PyObject *et, *ev, *tb; /* departures.leave(), whatever happened */
    PyErr_Fetch(&et, &ev, &tb);
    int left = PyObject_SetAttr(f->o[O_DEPARTURES], s_current, Py_None);
    if (et) {
        if (left < 0) PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    if (et || left < 0) {
        Py_XDECREF(got);
        return NULL;
    }
    if (got == Py_None) {
        Py_DECREF(got);
        if (set_long(f->o[O_CORE], s_calls, ncalls + 1) < 0) return NULL;
        Py_RETURN_TRUE;
    }
    PyObject *r = PyObject_CallFunction(f->o[O_FAIL], "iOnl", mode, got, nbytes, source);
    Py_DECREF(got);
    if (r) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_RuntimeError, "mmpi._backend._compiled.Front: fail() did not raise");
    }
    return NULL;
}

static void use_check(Front *f, Call *k, int mode, long root, Py_ssize_t nbytes) {
    int64_t *w = (int64_t *)f->words.buf;
    w[0] = f->kinds[mode];
    w[1] = root;
    w[2] = nbytes;
    k->words = f->words;
    k->check = f->check;
}

static void release_buffers(Call *k) {
    if (k->have_sb) PyBuffer_Release(&k->sb);
    if (k->have_rb) PyBuffer_Release(&k->rb);
    k->have_sb = k->have_rb = 0;
}

/* A call of `mode` begins: 1 with `k` cleared for it if the call may run here (ready), 0 if
 * not, -1 on an error. */
static int begin(Front *f, Call *k, int mode) {
    int r = ready(f);
    if (r <= 0) return r;
    memset(k, 0, sizeof *k);
    k->mode = mode;
    k->check = MPI_REQUEST_NULL;
    return 1;
}

/* k's receive buffer (writable) from `recvbuf`, its send buffer from `sendbuf`, either NULL
 * for none: 1, or 0 (nothing held, no exception) where one is not a C-contiguous buffer. */
static int get_buffers(Call *k, PyObject *recvbuf, PyObject *sendbuf) {
    if (recvbuf) {
        if (PyObject_GetBuffer(recvbuf, &k->rb, PyBUF_SIMPLE | PyBUF_WRITABLE) < 0) {
            PyErr_Clear();
            return 0;
        }
        k->have_rb = 1;
    }
    if (sendbuf) {
        if (PyObject_GetBuffer(sendbuf, &k->sb, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();
            release_buffers(k);
            return 0;
        }
        k->have_sb = 1;
    }
    return 1;
}

static PyObject *front_barrier(Front *f, PyObject *noargs) {
    Call k;
    int r = begin(f, &k, BARRIER);
    if (r <= 0) return r < 0 ? NULL : Py_NewRef(Py_False);
    if (f->checks) use_check(f, &k, BARRIER, -1, -1);
    return go(f, &k, f->leader ? f->peer : -1, -1, -1);
}

static PyObject *front_bcast(Front *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyLong_CheckExact(args[1])) Py_RETURN_FALSE;
    int over = 0;
    long root = PyLong_AsLongAndOverflow(args[1], &over);
    if (over || root < 0 || root >= f->size || !known(f, args[0], NULL)) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    Call k;
    int r = begin(f, &k, BCAST);
    if (r <= 0) return r < 0 ? NULL : Py_NewRef(Py_False);
    k.sends = f->rank == root;
    /* a Bcast root's buffer may be read-only: it is only read */
    if (PyObject_GetBuffer(args[0], &k.rb, k.sends ? PyBUF_SIMPLE
                                                   : PyBUF_SIMPLE | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    k.have_rb = 1;
    Py_ssize_t nb = k.rb.len;
    if (nb > f->carry || nb > f->eager_max) {
        PyBuffer_Release(&k.rb);
        Py_RETURN_FALSE;
    }
    long lroot = PyLong_AsLong(PyTuple_GET_ITEM(f->o[O_LOCAL_OF], root));
    k.part = lroot >= 0 ? (int)lroot : 0;
    if (f->nmine >= 2) use_check(f, &k, BCAST, root, nb);
    PyObject *out = go(f, &k, f->leader && lroot < 0 ? root : -1, k.sends ? f->peer : -1, nb);
    PyBuffer_Release(&k.rb);
    return out;
}

static PyObject *front_allreduce(Front *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) Py_RETURN_FALSE;
    PyObject *sendbuf = args[0], *recvbuf = args[1], *dtype = NULL, *sdtype = NULL;
    int which = op_index(f, args[2]);
    PyObject *dt = which < 0 ? NULL : known(f, recvbuf, &dtype);
    int in_place = sendbuf == f->o[O_IN_PLACE];
    if (!dt || (!in_place && (!known(f, sendbuf, &sdtype) || sdtype != dtype)))
        Py_RETURN_FALSE;
    Py_ssize_t extent;
    unsigned long long dth;
    if (type_of(dt, &extent, &dth) < 0) Py_RETURN_FALSE;
    Call k;
    int r = begin(f, &k, ALLREDUCE);
    if (r <= 0) return r < 0 ? NULL : Py_NewRef(Py_False);
    if (!get_buffers(&k, recvbuf, in_place ? NULL : sendbuf)) Py_RETURN_FALSE;
    Py_ssize_t nb = k.rb.len;
    PyObject *out;
    if ((k.have_sb && k.sb.len != nb) || nb >= f->split_from || nb > f->eager_max ||
        nb % extent) {
        out = Py_NewRef(Py_False);
    } else {
        k.count = (int)(nb / extent);
        k.dt = (MPI_Datatype)dth;
        k.op = f->ops[which];
        if (f->checks) use_check(f, &k, ALLREDUCE, -1, nb);
        out = go(f, &k, f->leader ? f->peer : -1, -1, nb);
    }
    release_buffers(&k);
    return out;
}

static PyObject *front_reduce(Front *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyLong_CheckExact(args[3])) Py_RETURN_FALSE;
    PyObject *sendbuf = args[0], *recvbuf = args[1], *dtype = NULL, *rdtype = NULL;
    int over = 0, which = op_index(f, args[2]);
    long root = PyLong_AsLongAndOverflow(args[3], &over);
    if (over || root < 0 || root >= f->size || which < 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    int at_root = f->rank == root, in_place = sendbuf == f->o[O_IN_PLACE];
    PyObject *dt = in_place ? NULL : known(f, sendbuf, &dtype);
    if (at_root && in_place) dt = known(f, recvbuf, &dtype);
    else if (at_root && (!dt || !known(f, recvbuf, &rdtype) || rdtype != dtype)) dt = NULL;
    Py_ssize_t extent;
    unsigned long long dth;
    if (!dt || type_of(dt, &extent, &dth) < 0) Py_RETURN_FALSE; /* (IN_PLACE off the root too) */
    Call k;
    int r = begin(f, &k, REDUCE);
    if (r <= 0) return r < 0 ? NULL : Py_NewRef(Py_False);
    if (!get_buffers(&k, at_root ? recvbuf : NULL, in_place ? NULL : sendbuf)) Py_RETURN_FALSE;
    Py_ssize_t nb = k.have_sb ? k.sb.len : k.rb.len;
    long lroot = PyLong_AsLong(PyTuple_GET_ITEM(f->o[O_LOCAL_OF], root));
    PyObject *out;
    if ((k.have_sb && k.have_rb && k.rb.len != nb) || nb > f->carry || nb > f->eager_max ||
        nb % extent) {
        out = Py_NewRef(Py_False);
    } else {
        k.count = (int)(nb / extent);
        k.dt = (MPI_Datatype)dth;
        k.op = f->ops[which];
        /* the rank that sums its cluster's parts: the root, or the other cluster's leader */
        k.part = lroot >= 0 ? at_root : (int)f->leader;
        k.sends = lroot < 0 && f->leader;
        if (f->nmine >= 2) use_check(f, &k, REDUCE, root, nb);
        out = go(f, &k, at_root ? f->peer : -1, k.sends ? root : -1, nb);
    }
    release_buffers(&k);
    return out;
}

static PyMethodDef front_methods[] = {
    {"barrier", (PyCFunction)front_barrier, METH_NOARGS, "barrier(): Barrier, or False"},
    {"bcast", (PyCFunction)(void (*)(void))front_bcast, METH_FASTCALL,
     "bcast(buf, root): Bcast, or False"},
    {"allreduce", (PyCFunction)(void (*)(void))front_allreduce, METH_FASTCALL,
     "allreduce(sendbuf, recvbuf, op): Allreduce, or False"},
    {"reduce", (PyCFunction)(void (*)(void))front_reduce, METH_FASTCALL,
     "reduce(sendbuf, recvbuf, op, root): Reduce, or False"},
    {NULL}};

PyTypeObject FrontType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mmpi._backend._compiled.Front",
    .tp_basicsize = sizeof(Front),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Front(**what compiled.front gives): a communicator's small blocking Barrier, "
              "Bcast and Allreduce, each in one call",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)front_init,
    .tp_traverse = (traverseproc)front_traverse,
    .tp_clear = (inquiry)front_clear,
    .tp_dealloc = (destructor)front_dealloc,
    .tp_methods = front_methods,
};
