/* A receive or a small send across posted in one call: `Irecv`'s and `Isend`'s common
 * cases without their interpreted steps. Each returns None, having changed nothing, for
 * anything else: the Python path then runs (the reference), and says what is wrong with the
 * arguments if something is.
 *
 * A buffer is a whole numpy array or bytearray, or [array, datatype] with a datatype laid out
 * by its own extent (as _engine.buffers._array_and_type takes them, once it has seen the datatype).
 * Receiver.post: such a buffer, C-contiguous and writable; a source and a
 * tag that are plain ints in range (or ANY_SOURCE, ANY_TAG); no message waiting unmatched in
 * the context; the engine not finalized. It makes what mmpi/_engine/p2p.py's `irecv` and
 * `BridgedRequest.of` make: an `Op`, a `Posted` appended to the context's posted queue,
 * `_engine.op.NEW_WORK` set, the request.
 * Sender.post: such a buffer, C-contiguous, of at most the eager size, to
 * a rank of the other cluster with a plain int tag, no traffic count and no send held for a
 * dynamic broadcast: `_engine.p2p.send_now`'s case. The envelope and a copy go out as `send_eager`
 * sends them (the send is complete at once) and the request is the done `_engine.op.SENT`'s.
 *
 * The objects are the Python classes' own instances. They are made without their __init__:
 * an Op's fields are copied from a template made by Op(matched=False) (a list in it, the
 * natives, is made anew), so the defaults live in one place, mmpi/_engine/op.py. A slot is written
 * at the offset its member descriptor gives, as the descriptor itself would.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <mpi.h>

#include "mmpi_wire.h"

#define MAX_SLOTS 32

static PyTypeObject *op_type, *posted_type, *req_type, *native_type;
static PyObject *sent_op; /* _engine.op.SENT: the operation of every send done at once */
/* [array, datatype]: numpy's ndarray, MPI.Datatype, and _engine.buffers.KNOWN (handle -> (extent,
 * base, plain)), where a datatype is once the Python path has parsed it */
static PyObject *ndarray_type, *datatype_type, *known_types, *s_handle;
static PyObject *op_module, *plain_types, *s_new_work, *s_irecv, *s_finalized, *s_monitor, *s_held, *s_cast, *s_B,
    *empty_tuple;
static long any_source, any_tag;
static Py_ssize_t op_off[MAX_SLOTS], op_remote;
static PyObject *op_default[MAX_SLOTS]; /* the template's values, NULL where a fresh list */
static int op_nslots;
static Py_ssize_t p_source, p_tag, p_view, p_op, p_call;
static PyObject *n_source, *n_tag, *n_view, *n_op, *n_after, *n_nbytes, *n_matched, *n_done;
static Py_ssize_t o_source, o_tag, o_after, o_nbytes, o_matched, o_done;
static Py_ssize_t r_op, r_pickled, r_consumed, r_value;

/* The offset of slot `name` of `type`, or -1 with an exception set. */
static Py_ssize_t slot_offset(PyTypeObject *type, const char *name) {
    PyObject *d = PyDict_GetItemString(type->tp_dict, name); /* borrowed */
    if (!d || !PyObject_TypeCheck(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "mmpi._backend._compiled: %s.%s is not a slot", type->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "mmpi._backend._compiled: %s.%s is not an object slot",
                     type->tp_name, name);
        return -1;
    }
    return m->offset;
}

static void put(PyObject *obj, Py_ssize_t off, PyObject *v) { /* a fresh object's empty slot */
    Py_INCREF(v);
    *(PyObject **)((char *)obj + off) = v;
}

static int is_type(PyObject *o, const char *what) {
    if (PyType_Check(o)) return 1;
    PyErr_Format(PyExc_TypeError, "mmpi._backend._compiled.recv_setup: %s must be a class", what);
    return 0;
}

/* recv_setup(Op, template, Posted, BridgedRequest, native Request, _engine.op module, plain types,
 * ANY_SOURCE, ANY_TAG, SENT, ndarray, Datatype, known datatypes): once per process, before
 * any Receiver or Sender posts. */
PyObject *recv_setup(PyObject *self, PyObject *args) {
    PyObject *op, *tmpl, *posted, *req, *native, *mod, *plain;
    if (!PyArg_ParseTuple(args, "OOOOOOO!llOOOO!", &op, &tmpl, &posted, &req, &native, &mod,
                          &PyTuple_Type, &plain, &any_source, &any_tag, &sent_op, &ndarray_type,
                          &datatype_type, &PyDict_Type, &known_types))
        return NULL;
    Py_INCREF(sent_op);
    Py_INCREF(ndarray_type);
    Py_INCREF(datatype_type);
    Py_INCREF(known_types);
    if (!is_type(op, "Op") || !is_type(posted, "Posted") || !is_type(req, "BridgedRequest") ||
        !is_type(native, "Request"))
        return NULL;
    op_type = (PyTypeObject *)op;
    posted_type = (PyTypeObject *)posted;
    req_type = (PyTypeObject *)req;
    native_type = (PyTypeObject *)native;
    Py_INCREF(op);
    Py_INCREF(posted);
    Py_INCREF(req);
    Py_INCREF(native);
    Py_INCREF(mod);
    Py_INCREF(plain);
    op_module = mod;
    plain_types = plain;
    PyObject *slots = PyObject_GetAttrString(op, "__slots__");
    if (!slots) return NULL;
    PyObject *fast = PySequence_Fast(slots, "Op.__slots__");
    Py_DECREF(slots);
    if (!fast) return NULL;
    op_nslots = 0;
    op_remote = -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        PyObject *name = PySequence_Fast_GET_ITEM(fast, i);
        const char *s = PyUnicode_AsUTF8(name);
        if (!s) goto fail;
        if (!strcmp(s, "__weakref__") || !strcmp(s, "__dict__")) continue;
        if (op_nslots == MAX_SLOTS) {
            PyErr_SetString(PyExc_ValueError, "mmpi._backend._compiled: Op has too many slots");
            goto fail;
        }
        Py_ssize_t off = slot_offset(op_type, s);
        if (off < 0) goto fail;
        PyObject *v = PyObject_GetAttr(tmpl, name);
        if (!v) goto fail;
        if (PyList_CheckExact(v)) { /* made anew for each Op */
            if (PyList_GET_SIZE(v)) {
                Py_DECREF(v);
                PyErr_Format(PyExc_ValueError, "mmpi._backend._compiled: Op.%s starts non-empty", s);
                goto fail;
            }
            Py_CLEAR(v);
        } else if (v != Py_None && !PyBool_Check(v) && !PyLong_CheckExact(v)) {
            PyErr_Format(PyExc_TypeError, "mmpi._backend._compiled: Op.%s starts as a %s, not a constant",
                         s, Py_TYPE(v)->tp_name);
            Py_DECREF(v);
            goto fail;
        }
        if (!strcmp(s, "remote")) op_remote = off;
        op_off[op_nslots] = off;
        op_default[op_nslots++] = v; /* a reference kept for the process's life */
    }
    Py_DECREF(fast);
    if (op_remote < 0) {
        PyErr_SetString(PyExc_TypeError, "mmpi._backend._compiled: Op has no slot 'remote'");
        return NULL;
    }
    if ((p_source = slot_offset(posted_type, "source")) < 0 ||
        (p_tag = slot_offset(posted_type, "tag")) < 0 ||
        (p_view = slot_offset(posted_type, "view")) < 0 ||
        (p_op = slot_offset(posted_type, "op")) < 0 ||
        (p_call = slot_offset(posted_type, "call")) < 0 ||
        (r_op = slot_offset(req_type, "_op")) < 0 ||
        (r_pickled = slot_offset(req_type, "_pickled")) < 0 ||
        (r_consumed = slot_offset(req_type, "_consumed")) < 0 ||
        (r_value = slot_offset(req_type, "_value")) < 0)
        return NULL;
    if ((o_source = slot_offset(op_type, "source")) < 0 ||
        (o_tag = slot_offset(op_type, "tag")) < 0 ||
        (o_after = slot_offset(op_type, "after")) < 0 ||
        (o_nbytes = slot_offset(op_type, "nbytes")) < 0 ||
        (o_matched = slot_offset(op_type, "matched")) < 0 ||
        (o_done = slot_offset(op_type, "done")) < 0)
        return NULL;
    if (!n_source && (!(n_source = PyUnicode_InternFromString("source")) ||
                      !(n_tag = PyUnicode_InternFromString("tag")) ||
                      !(n_view = PyUnicode_InternFromString("view")) ||
                      !(n_op = PyUnicode_InternFromString("op")) ||
                      !(n_after = PyUnicode_InternFromString("after")) ||
                      !(n_nbytes = PyUnicode_InternFromString("nbytes")) ||
                      !(n_matched = PyUnicode_InternFromString("matched")) ||
                      !(n_done = PyUnicode_InternFromString("done")) ||
                      !(s_handle = PyUnicode_InternFromString("handle"))))
        return NULL;
    if (!s_new_work && (!(s_new_work = PyUnicode_InternFromString("NEW_WORK")) ||
                        !(s_irecv = PyUnicode_InternFromString("Irecv")) ||
                        !(s_finalized = PyUnicode_InternFromString("finalized")) ||
        !(s_monitor = PyUnicode_InternFromString("monitor")) ||
        !(s_held = PyUnicode_InternFromString("held")) ||
                        !(s_cast = PyUnicode_InternFromString("cast")) ||
                        !(s_B = PyUnicode_InternFromString("B")) ||
                        !(empty_tuple = PyTuple_New(0))))
        return NULL;
    Py_RETURN_NONE;
fail:
    Py_DECREF(fast);
    return NULL;
}

/* Where attribute `name` (interned) of `o` sits, if `o` is a Posted or an Op and
 * recv_setup ran: for crank.c's drain, which completes receives; else -1. */
static Py_ssize_t offset_of(PyObject *o, PyObject *name) {
    if (!op_type) return -1;
    if (Py_TYPE(o) == posted_type)
        return name == n_source ? p_source : name == n_tag ? p_tag : name == n_view ? p_view
             : name == n_op ? p_op : -1;
    if (Py_TYPE(o) == op_type)
        return name == n_source ? o_source : name == n_tag ? o_tag : name == n_after ? o_after
             : name == n_nbytes ? o_nbytes : name == n_matched ? o_matched
             : name == n_done ? o_done : -1;
    return -1;
}

/* o.name as a new reference: read from its slot where offset_of knows it, else getattr. */
PyObject *cpost_get(PyObject *o, PyObject *name) {
    Py_ssize_t off = offset_of(o, name);
    PyObject *v = off < 0 ? NULL : *(PyObject **)((char *)o + off);
    return v ? Py_NewRef(v) : PyObject_GetAttr(o, name);
}

/* o.name = v: into its slot where offset_of knows it, else setattr. 0, or -1 on an error. */
int cpost_set(PyObject *o, PyObject *name, PyObject *v) {
    Py_ssize_t off = offset_of(o, name);
    if (off < 0) return PyObject_SetAttr(o, name, v);
    Py_XSETREF(*(PyObject **)((char *)o + off), Py_NewRef(v));
    return 0;
}

typedef struct {
    PyObject_HEAD
    PyObject *engine, *append, *unexpected, *local_of; /* local_of: a tuple */
    long size, tag_ub;
} Receiver;

static int receiver_init(Receiver *self, PyObject *args, PyObject *kw) {
    PyObject *engine, *posted, *unexpected, *local_of;
    if (!PyArg_ParseTuple(args, "OOOO!ll", &engine, &posted, &unexpected, &PyTuple_Type,
                          &local_of, &self->size, &self->tag_ub))
        return -1;
    if (!op_type) {
        PyErr_SetString(PyExc_RuntimeError, "mmpi._backend._compiled: recv_setup was not called");
        return -1;
    }
    if (PyTuple_GET_SIZE(local_of) != self->size) {
        PyErr_SetString(PyExc_ValueError, "mmpi._backend._compiled.Receiver: local_of is not of size ranks");
        return -1;
    }
    PyObject *append = PyObject_GetAttrString(posted, "append");
    if (!append) return -1;
    Py_XSETREF(self->append, append);
    Py_INCREF(engine);
    Py_XSETREF(self->engine, engine);
    Py_INCREF(unexpected);
    Py_XSETREF(self->unexpected, unexpected);
    Py_INCREF(local_of);
    Py_XSETREF(self->local_of, local_of);
    return 0;
}

static int receiver_traverse(Receiver *self, visitproc visit, void *arg) {
    Py_VISIT(self->engine);
    Py_VISIT(self->append);
    Py_VISIT(self->unexpected);
    Py_VISIT(self->local_of);
    return 0;
}

static int receiver_clear(Receiver *self) {
    Py_CLEAR(self->engine);
    Py_CLEAR(self->append);
    Py_CLEAR(self->unexpected);
    Py_CLEAR(self->local_of);
    return 0;
}

static void receiver_dealloc(Receiver *self) {
    PyObject_GC_UnTrack(self);
    receiver_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether o.name is true: 1 or 0, -1 on an error. */
static int is_true_attr(PyObject *o, PyObject *name) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

static int is_plain(PyObject *buf) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(plain_types); i++)
        if ((PyObject *)Py_TYPE(buf) == PyTuple_GET_ITEM(plain_types, i)) return 1;
    return 0;
}

/* A new request of `op`, as BridgedRequest.of makes it. */
static PyObject *request_of(PyObject *op) {
    PyObject *req = native_type->tp_new(req_type, empty_tuple, NULL);
    if (!req) return NULL;
    put(req, r_op, op);
    put(req, r_pickled, Py_False);
    put(req, r_consumed, Py_False);
    put(req, r_value, Py_None);
    return req;
}

/* `o` as a rank or tag in 0..hi, `any` (then *none = 1), or -1: not the common case. */
static long plain_int(PyObject *o, long hi, long any, int *none) {
    if (!PyLong_CheckExact(o)) return -1;
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (overflow) return -1;
    *none = v == any;
    return *none ? 0 : v >= 0 && v <= hi ? v : -1;
}

/* The object whose whole buffer `spec` stands for, borrowed, and the size its length must be
 * a multiple of: a plain buffer (1), or `[array, datatype]` with a datatype laid out by its
 * own extent that the Python path has met before (_engine.buffers._array_and_type's case). NULL
 * (no exception) for anything else. */
static PyObject *whole(PyObject *spec, Py_ssize_t *extent) {
    *extent = 1;
    if (is_plain(spec)) return spec;
    if (!PyList_CheckExact(spec) || PyList_GET_SIZE(spec) != 2) return NULL;
    PyObject *a = PyList_GET_ITEM(spec, 0), *dt = PyList_GET_ITEM(spec, 1);
    if ((PyObject *)Py_TYPE(a) != ndarray_type || (PyObject *)Py_TYPE(dt) != datatype_type)
        return NULL;
    PyObject *h = PyObject_GetAttr(dt, s_handle);
    PyObject *known = h ? PyDict_GetItemWithError(known_types, h) : NULL; /* borrowed */
    Py_XDECREF(h);
    if (!known || !PyTuple_Check(known) || PyTuple_GET_SIZE(known) != 3 ||
        PyObject_IsTrue(PyTuple_GET_ITEM(known, 2)) != 1) {
        PyErr_Clear();
        return NULL;
    }
    *extent = PyLong_AsSsize_t(PyTuple_GET_ITEM(known, 0));
    if (*extent <= 0) {
        PyErr_Clear();
        return NULL;
    }
    return a;
}

/* The whole of `buf` as a writable, 1-D byte memoryview, as _engine.buffers.as_view makes it; NULL
 * (no exception) where that is not the common case. */
static PyObject *byte_view(PyObject *buf) {
    PyObject *mv = PyMemoryView_FromObject(buf);
    if (!mv) {
        PyErr_Clear();
        return NULL;
    }
    Py_buffer *b = PyMemoryView_GET_BUFFER(mv);
    if (b->readonly || !PyBuffer_IsContiguous(b, 'C')) {
        Py_DECREF(mv);
        return NULL;
    }
    if (b->ndim == 1 && (!b->format || !strcmp(b->format, "B"))) return mv;
    PyObject *flat = b->len ? PyObject_CallMethodOneArg(mv, s_cast, s_B) : NULL;
    Py_DECREF(mv);
    if (!flat) PyErr_Clear();
    return flat;
}

static PyObject *receiver_post(Receiver *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 && nargs != 4) Py_RETURN_NONE;
    /* with the call's name (a blocking Recv): the Op, not a request; errors name the call */
    int bare = nargs == 4;
    PyObject *call = bare ? args[3] : s_irecv;
    if (bare && !PyUnicode_CheckExact(call)) Py_RETURN_NONE;
    PyObject *buf = args[0], *source = args[1], *tag = args[2];
    int any_src = 0, any_t = 0;
    long src = plain_int(source, self->size - 1, any_source, &any_src);
    long t = plain_int(tag, self->tag_ub, any_tag, &any_t);
    if (src < 0 || t < 0) Py_RETURN_NONE;
    Py_ssize_t extent;
    PyObject *arr = whole(buf, &extent);
    if (!arr) Py_RETURN_NONE;
    Py_ssize_t waiting = PyObject_Size(self->unexpected);
    if (waiting < 0) return NULL;
    if (waiting > 0) Py_RETURN_NONE; /* it may match one: the Python path's matcher */
    int finalized = is_true_attr(self->engine, s_finalized);
    if (finalized < 0) return NULL;
    if (finalized) Py_RETURN_NONE; /* the Python path says so */
    PyObject *view = byte_view(arr);
    if (!view) Py_RETURN_NONE;
    if (PyMemoryView_GET_BUFFER(view)->len % extent) { /* not whole elements: Python's path */
        Py_DECREF(view);
        Py_RETURN_NONE;
    }
    PyObject *op = NULL, *posted = NULL, *req = NULL, *r = NULL;
    if (!(op = op_type->tp_alloc(op_type, 0))) goto error;
    for (int i = 0; i < op_nslots; i++) {
        PyObject *v = op_default[i];
        if (v) {
            put(op, op_off[i], v);
        } else {
            if (!(v = PyList_New(0))) goto error;
            *(PyObject **)((char *)op + op_off[i]) = v;
        }
    }
    if (!any_src && PyLong_AsLong(PyTuple_GET_ITEM(self->local_of, src)) < 0) {
        PyObject **slot = (PyObject **)((char *)op + op_remote);
        Py_SETREF(*slot, Py_NewRef(Py_True)); /* only a forwarder can bring it */
    }
    if (!(posted = posted_type->tp_alloc(posted_type, 0))) goto error;
    put(posted, p_source, any_src ? Py_None : source);
    put(posted, p_tag, any_t ? Py_None : tag);
    put(posted, p_view, view);
    put(posted, p_op, op);
    put(posted, p_call, call);
    if (!(req = bare ? Py_NewRef(op) : request_of(op))) goto error;
    if (!(r = PyObject_CallOneArg(self->append, posted))) goto error;
    Py_DECREF(r);
    /* a progress thread, if any, has a receive to look after (as _engine.p2p.irecv says) */
    if (PyObject_SetAttr(op_module, s_new_work, op) < 0) goto error;
    Py_DECREF(view);
    Py_DECREF(op);
    Py_DECREF(posted);
    return req;
error:
    Py_DECREF(view);
    Py_XDECREF(op);
    Py_XDECREF(posted);
    Py_XDECREF(req);
    return NULL;
}

static PyMethodDef receiver_methods[] = {
    {"post", (PyCFunction)(void (*)(void))receiver_post, METH_FASTCALL,
     "post(buf, source, tag[, call]): the request of a receive posted here (given the "
     "call's name: its operation), or None: not the common case, nothing done (the Python "
     "path then posts it)."},
    {NULL}};

PyTypeObject ReceiverType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mmpi._backend._compiled.Receiver",
    .tp_basicsize = sizeof(Receiver),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Receiver(engine, posted, unexpected, local_of, size, tag_ub): posts the "
              "common receives of one context (see cpost.c).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)receiver_init,
    .tp_traverse = (traverseproc)receiver_traverse,
    .tp_clear = (inquiry)receiver_clear,
    .tp_dealloc = (destructor)receiver_dealloc,
    .tp_methods = receiver_methods,
};

/* crank.c: envelope and payload out to the forwarder on `comm`, complete at once */
int crank_send(MPI_Comm comm, int mpitag, int src, int dst, int tag, int ctx, int flags,
               unsigned int aux, const void *payload, Py_ssize_t n);

typedef struct {
    PyObject_HEAD
    PyObject *engine, *p2p, *fanout, *world_of, *local_of; /* world_of, local_of: tuples */
    PyObject *handles;                                     /* a tuple of the links' handles */
    long vrank, cid, eager_max, size, tag_ub;
} Sender;

static int sender_init(Sender *self, PyObject *args, PyObject *kw) {
    PyObject *engine, *p2p, *fanout, *world_of, *local_of, *handles;
    if (!PyArg_ParseTuple(args, "OOOO!O!O!lllll", &engine, &p2p, &fanout, &PyTuple_Type,
                          &world_of, &PyTuple_Type, &local_of, &PyTuple_Type, &handles,
                          &self->vrank, &self->cid, &self->eager_max, &self->size, &self->tag_ub))
        return -1;
    if (!sent_op) {
        PyErr_SetString(PyExc_RuntimeError, "mmpi._backend._compiled: recv_setup was not called");
        return -1;
    }
    if (PyTuple_GET_SIZE(world_of) != self->size || PyTuple_GET_SIZE(local_of) != self->size ||
        PyTuple_GET_SIZE(handles) < 1) {
        PyErr_SetString(PyExc_ValueError, "mmpi._backend._compiled.Sender: ranks or links do not add up");
        return -1;
    }
    PyObject *keep[] = {engine, p2p, fanout, world_of, local_of, handles};
    PyObject **into[] = {&self->engine, &self->p2p, &self->fanout, &self->world_of,
                         &self->local_of, &self->handles};
    for (int i = 0; i < 6; i++) {
        Py_INCREF(keep[i]);
        Py_XSETREF(*into[i], keep[i]);
    }
    return 0;
}

static int sender_traverse(Sender *self, visitproc visit, void *arg) {
    Py_VISIT(self->engine);
    Py_VISIT(self->p2p);
    Py_VISIT(self->fanout);
    Py_VISIT(self->world_of);
    Py_VISIT(self->local_of);
    Py_VISIT(self->handles);
    return 0;
}

static int sender_clear(Sender *self) {
    Py_CLEAR(self->engine);
    Py_CLEAR(self->p2p);
    Py_CLEAR(self->fanout);
    Py_CLEAR(self->world_of);
    Py_CLEAR(self->local_of);
    Py_CLEAR(self->handles);
    return 0;
}

static void sender_dealloc(Sender *self) {
    PyObject_GC_UnTrack(self);
    sender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *sender_post(Sender *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) Py_RETURN_NONE;
    PyObject *buf = args[0];
    int none = 0;
    long dest = plain_int(args[1], self->size - 1, LONG_MIN, &none);
    long tag = plain_int(args[2], self->tag_ub, LONG_MIN, &none);
    Py_ssize_t extent;
    PyObject *arr = dest < 0 || tag < 0 ? NULL : whole(buf, &extent);
    if (!arr) Py_RETURN_NONE;
    if (PyLong_AsLong(PyTuple_GET_ITEM(self->local_of, dest)) >= 0) Py_RETURN_NONE;
    int finalized = is_true_attr(self->engine, s_finalized);
    if (finalized) return finalized < 0 ? NULL : Py_NewRef(Py_None);
    int counted = is_true_attr(self->p2p, s_monitor); /* a Monitor while counting, else None */
    if (counted) return counted < 0 ? NULL : Py_NewRef(Py_None);
    int held = is_true_attr(self->fanout, s_held); /* held sends go first: the Python path */
    if (held) return held < 0 ? NULL : Py_NewRef(Py_None);
    Py_buffer b;
    if (PyObject_GetBuffer(arr, &b, PyBUF_SIMPLE) < 0) { /* not contiguous: the Python path */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (b.len > self->eager_max || b.len % extent) {
        PyBuffer_Release(&b);
        Py_RETURN_NONE;
    }
    long world = PyLong_AsLong(PyTuple_GET_ITEM(self->world_of, dest));
    Py_ssize_t nfwd = PyTuple_GET_SIZE(self->handles);
    /* protocol.route: the forwarder that carries every message from src to dst */
    PyObject *h = PyTuple_GET_ITEM(self->handles, (self->vrank + world) % nfwd);
    unsigned long long comm = PyLong_AsUnsignedLongLong(h);
    if (PyErr_Occurred()) {
        PyBuffer_Release(&b);
        return NULL;
    }
    int rc = crank_send((MPI_Comm)comm, WIRE_T_EAGER, (int)self->vrank, (int)world, (int)tag,
                        (int)self->cid, 0, 0, b.buf, b.len);
    PyBuffer_Release(&b);
    if (rc < 0) return NULL;
    return request_of(sent_op);
}

static PyMethodDef sender_methods[] = {
    {"post", (PyCFunction)(void (*)(void))sender_post, METH_FASTCALL,
     "post(buf, dest, tag): the request of a small send across, sent and complete, or None: "
     "not the common case, nothing done (the Python path then sends it)."},
    {NULL}};

PyTypeObject SenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mmpi._backend._compiled.Sender",
    .tp_basicsize = sizeof(Sender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Sender(engine, p2p, fanout, world_of, local_of, handles, vrank, context, "
              "eager_max, size, tag_ub): sends the common small sends across of one context "
              "(see cpost.c).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)sender_init,
    .tp_traverse = (traverseproc)sender_traverse,
    .tp_clear = (inquiry)sender_clear,
    .tp_dealloc = (destructor)sender_dealloc,
    .tp_methods = sender_methods,
};
