/* The ranks' side of a crossing, compiled: a small message out, and everything a forwarder
 * has sent in, each in one call instead of a handful of interpreted ones.
 *
 * The same bytes and rules as the Python path (mmpi/_backend/python.py, the
 * reference, and the fallback where no compiler was found at install):
 *   send_eager   packs the envelope (mmpi/wire/protocol.py) and the payload into a buffer of
 *                its own, starts the send to the forwarder and keeps the request: the
 *                program's send is complete at once, its buffer free (the Outbox's rule).
 *   reap         forgets the sends that have completed; True once none is left (finalize).
 *   drain        receives every message waiting on one forwarder link, in arrival order,
 *                as (tag, bytearray, src, user tag, context) for the engine to hand on (None
 *                if there is none); src is -1 unless the message is a plain eager one
 *                (protocol.plain_eager's test), whose envelope is then read here. Given the
 *                engine's contexts, it completes the receive posted for a plain eager message
 *                itself where that takes only a copy (mmpi/_engine/p2p.py's rules).
 *   wait_link    a wait's first rounds: probe a link and yield the CPU, a few times over,
 *                without the GIL; a round holds the core for a fraction of an interpreted one.
 * All but wait_link run with the GIL held: each is a few MPI calls that never block.
 *
 * Built against the MPI the install found, as forwarder/_crelay.c is: communicators are
 * passed as mpi4py's integer handles. With the other C files of this folder it is the
 * extension `mmpi._backend._compiled` (compiled.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* Which MPI this was compiled against, for the loader's check (mmpi/wire/compiled.py). */
#if defined(OPEN_MPI)
#define MMPI_BUILT_FOR "Open MPI"
#else
#define MMPI_BUILT_FOR "MPICH"
#endif

#include "mmpi_wire.h" /* the wire's constants */

typedef struct {
    MPI_Request req;
    char *buf;
} Out;

static Out *outbox = NULL;
static int nout = 0, capout = 0, limit = 64;
static MPI_Request *reqs = NULL; /* scratch for Testsome */
static int *done = NULL;

PyObject *crank_mpi_error(const char *call, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return PyErr_Format(PyExc_RuntimeError, "mmpi._backend._compiled: %s failed: %s", call, msg);
}

/* Forget the completed sends; -1 (with an exception set) on an MPI error. */
static int reap_sends(void) {
    if (nout == 0) return 0;
    int ndone = 0, rc;
    for (int i = 0; i < nout; i++) reqs[i] = outbox[i].req;
    rc = MPI_Testsome(nout, reqs, &ndone, done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
        crank_mpi_error("MPI_Testsome", rc);
        return -1;
    }
    if (ndone > 0 && ndone != MPI_UNDEFINED) {
        for (int k = 0; k < ndone; k++) {
            free(outbox[done[k]].buf);
            outbox[done[k]].buf = NULL;
        }
        int j = 0;
        for (int i = 0; i < nout; i++)
            if (outbox[i].buf != NULL) outbox[j++] = outbox[i];
        nout = j;
    }
    /* a forwarder slow to take them: test less often as they pile up, not on every send */
    limit = nout * 2 > 64 ? nout * 2 : 64;
    return 0;
}

static int grow(void) {
    int cap = capout ? capout * 2 : 256;
    Out *o = realloc(outbox, (size_t)cap * sizeof(Out));
    if (!o) return -1;
    outbox = o;
    MPI_Request *r = realloc(reqs, (size_t)cap * sizeof(MPI_Request));
    if (!r) return -1;
    reqs = r;
    int *d = realloc(done, (size_t)cap * sizeof(int));
    if (!d) return -1;
    done = d;
    capout = cap;
    return 0;
}

static void put32(char *at, int32_t v) { memcpy(at, &v, 4); }

/* The envelope (protocol's "<BBHiiiiQIII") into `buf`'s first ENVELOPE_SIZE bytes. Shared with
 * cdirect.c. */
void crank_envelope(char *buf, int src, int dst, int tag, int ctx, int flags, uint64_t nbytes,
                    uint32_t chunk, uint32_t xfer, uint32_t aux) {
    uint16_t f = (uint16_t)flags;
    buf[WIRE_OFF_VERSION] = WIRE_VERSION;
    buf[WIRE_OFF_KIND] = WIRE_K_P2P;
    memcpy(buf + WIRE_OFF_FLAGS, &f, 2);
    put32(buf + WIRE_OFF_SRC, src);
    put32(buf + WIRE_OFF_DST, dst);
    put32(buf + WIRE_OFF_TAG, tag);
    put32(buf + WIRE_OFF_CONTEXT, ctx);
    memcpy(buf + WIRE_OFF_NBYTES, &nbytes, 8);
    memcpy(buf + WIRE_OFF_CHUNK, &chunk, 4);
    memcpy(buf + WIRE_OFF_XFER, &xfer, 4);
    memcpy(buf + WIRE_OFF_AUX, &aux, 4);
}

/* Envelope and payload into a buffer of our own, the send started and kept in the outbox: the
 * caller's buffer is free at once. 0, or -1 with an exception set. Shared with ccoll.c. */
int crank_send(MPI_Comm comm, int mpitag, int src, int dst, int tag, int ctx, int flags,
               unsigned int aux, const void *payload, Py_ssize_t n) {
    if (n > INT32_MAX - WIRE_ENVELOPE_SIZE) {
        PyErr_Format(PyExc_ValueError, "mmpi._backend._compiled: an eager message of %zd bytes", n);
        return -1;
    }
    if (nout == capout && grow() < 0) {
        PyErr_NoMemory();
        return -1;
    }
    char *buf = malloc(WIRE_ENVELOPE_SIZE + (size_t)n);
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    crank_envelope(buf, src, dst, tag, ctx, flags, (uint64_t)n, 0, 0, aux); /* no chunks */
    if (n) memcpy(buf + WIRE_ENVELOPE_SIZE, payload, (size_t)n);
    MPI_Request req;
    int rc = MPI_Isend(buf, WIRE_ENVELOPE_SIZE + (int)n, MPI_BYTE, 0, mpitag, comm, &req);
    if (rc != MPI_SUCCESS) {
        free(buf);
        crank_mpi_error("MPI_Isend", rc);
        return -1;
    }
    outbox[nout].req = req;
    outbox[nout].buf = buf;
    nout++;
    if (nout >= limit && reap_sends() < 0) return -1;
    return 0;
}

static PyObject *send_eager(PyObject *self, PyObject *args) {
    unsigned long long comm;
    int mpitag, src, dst, tag, ctx, flags;
    unsigned int aux;
    Py_buffer payload;
    if (!PyArg_ParseTuple(args, "KiiiiiiIy*", &comm, &mpitag, &src, &dst, &tag, &ctx, &flags,
                          &aux, &payload))
        return NULL;
    int rc = crank_send((MPI_Comm)comm, mpitag, src, dst, tag, ctx, flags, aux, payload.buf,
                        payload.len);
    PyBuffer_Release(&payload);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *reap(PyObject *self, PyObject *noargs) {
    if (reap_sends() < 0) return NULL;
    return PyBool_FromLong(nout == 0);
}

static PyObject *pending(PyObject *self, PyObject *noargs) { return PyLong_FromLong(nout); }

/* cpost.c: an attribute of a Posted or an Op read or written in its slot (getattr and
 * setattr for anything else, or before recv_setup) */
PyObject *cpost_get(PyObject *o, PyObject *name);
int cpost_set(PyObject *o, PyObject *name, PyObject *v);

/* Attribute names, interned once (the Python objects drain reads and writes). */
static PyObject *s_from_world, *s_queues, *s_posted, *s_source, *s_tag, *s_view, *s_op, *s_after,
    *s_nbytes, *s_matched, *s_done;

/* What a received message's first bytes say, if it is a plain eager one (protocol.plain_eager:
 * version, kind, no flags, the size it says): 1 and its fields, else 0. */
static int plain_eager(int mpitag, const char *b, int count, int32_t *src, int32_t *utag,
                       int32_t *ctx) {
    if (mpitag != WIRE_T_EAGER || count < WIRE_ENVELOPE_SIZE || b[WIRE_OFF_VERSION] != WIRE_VERSION ||
        b[WIRE_OFF_KIND] != WIRE_K_P2P)
        return 0;
    uint16_t f;
    uint64_t nb;
    memcpy(&f, b + WIRE_OFF_FLAGS, 2);
    memcpy(&nb, b + WIRE_OFF_NBYTES, 8);
    if (f != 0 || nb != (uint64_t)(count - WIRE_ENVELOPE_SIZE)) return 0;
    memcpy(src, b + WIRE_OFF_SRC, 4);
    memcpy(utag, b + WIRE_OFF_TAG, 4);
    memcpy(ctx, b + WIRE_OFF_CONTEXT, 4);
    return *src >= 0; /* malformed otherwise: the Python path says what is wrong */
}

static int int_is(PyObject *o, long want) { /* o == want, for an int o */
    long v = PyLong_AsLong(o);
    return v == want && !(v == -1 && PyErr_Occurred());
}

/* Complete the receive posted for a plain eager message, as mmpi/_engine/p2p.py's _plain_eager
 * and _eager_into do (the reference): the earliest posted receive of context `cid` that accepts
 * (source, tag) takes it, if it has a buffer the bytes fit in and nothing to run at completion.
 * 1 if done here; 0 if the message is left to the Python path, nothing changed; -1 on error. */
static int complete_posted(PyObject *contexts, int32_t src, int32_t utag, int32_t cid,
                           const char *payload, Py_ssize_t n) {
    int result = 0;
    PyObject *key = NULL, *from_world = NULL, *queues = NULL, *posted = NULL, *it = NULL,
             *recv = NULL, *view = NULL, *op = NULL, *after = NULL, *tag = NULL, *nbytes = NULL;
    PyObject *ctx, *source;
    long i = 0;
    if (!(key = PyLong_FromLong(cid))) return -1;
    ctx = PyDict_GetItemWithError(contexts, key); /* borrowed */
    Py_CLEAR(key);
    if (!ctx) return PyErr_Occurred() ? -1 : 0;
    if (!(from_world = PyObject_GetAttr(ctx, s_from_world)) || !(key = PyLong_FromLong(src)))
        goto error;
    source = PyDict_GetItemWithError(from_world, key); /* borrowed: from_world holds it */
    if (!source) goto out_or_error;
    if (!(queues = PyObject_GetAttr(ctx, s_queues)) ||
        !(posted = PyObject_GetAttr(queues, s_posted)))
        goto error;
    long wanted = PyLong_AsLong(source);
    if (wanted == -1 && PyErr_Occurred()) goto error;
    if (!(it = PyObject_GetIter(posted))) goto error;
    for (;; i++) {
        recv = PyIter_Next(it);
        if (!recv) goto out_or_error; /* none accepts it: the Python path queues it */
        PyObject *s = cpost_get(recv, s_source), *t = s ? cpost_get(recv, s_tag) : NULL;
        if (!t) {
            Py_XDECREF(s);
            goto error;
        }
        int accepts = (s == Py_None || int_is(s, wanted)) && (t == Py_None || int_is(t, utag));
        Py_DECREF(s);
        Py_DECREF(t);
        if (PyErr_Occurred()) goto error;
        if (accepts) break;
        Py_CLEAR(recv);
    }
    if (!(view = cpost_get(recv, s_view)) || !(op = cpost_get(recv, s_op)) ||
        !(after = cpost_get(op, s_after)))
        goto error;
    if (view == Py_None || after != Py_None) goto out; /* a buffer of its own, steps to run */
    Py_buffer vb;
    if (PyObject_GetBuffer(view, &vb, PyBUF_SIMPLE | PyBUF_WRITABLE) < 0) goto error;
    if (vb.len < n) { /* too long: the Python path fails the receive, naming both sizes */
        PyBuffer_Release(&vb);
        goto out;
    }
    memcpy(vb.buf, payload, (size_t)n);
    PyBuffer_Release(&vb);
    if (PySequence_DelItem(posted, i) < 0 || !(tag = PyLong_FromLong(utag)) ||
        !(nbytes = PyLong_FromSsize_t(n)) || cpost_set(op, s_source, source) < 0 ||
        cpost_set(op, s_tag, tag) < 0 || cpost_set(op, s_nbytes, nbytes) < 0 ||
        cpost_set(op, s_matched, Py_True) < 0 || cpost_set(op, s_done, Py_True) < 0)
        goto error;
    result = 1;
    goto out;
out_or_error:
    if (PyErr_Occurred()) goto error;
    goto out;
error:
    result = -1;
out:
    Py_XDECREF(key);
    Py_XDECREF(from_world);
    Py_XDECREF(queues);
    Py_XDECREF(posted);
    Py_XDECREF(it);
    Py_XDECREF(recv);
    Py_XDECREF(view);
    Py_XDECREF(op);
    Py_XDECREF(after);
    Py_XDECREF(tag);
    Py_XDECREF(nbytes);
    return result;
}

/* Messages up to this size are received here first; larger ones into a bytearray at once. */
#define SCRATCH (64 * 1024 + WIRE_ENVELOPE_SIZE)
static char scratch[SCRATCH];

/* Every message waiting on `comm`: None if none, else the list of those left to Python (see
 * drain's doc), empty if posted receives took them all here. */
PyObject *crank_drain(MPI_Comm comm, PyObject *contexts) { /* also cdirect.c's */
    PyObject *got = NULL;
    for (;;) {
        int flag = 0, count = 0, rc;
        MPI_Message msg;
        MPI_Status st;
        rc = MPI_Improbe(0, MPI_ANY_TAG, comm, &flag, &msg, &st);
        if (rc != MPI_SUCCESS) {
            Py_XDECREF(got);
            return crank_mpi_error("MPI_Improbe", rc);
        }
        if (!flag) break;
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (!got && !(got = PyList_New(0))) return NULL; /* the message stays: failing anyway */
        PyObject *ba = NULL;
        char *into = scratch;
        if (count > SCRATCH) {
            if (!(ba = PyByteArray_FromStringAndSize(NULL, count))) {
                Py_DECREF(got);
                return NULL;
            }
            into = PyByteArray_AS_STRING(ba);
        }
        rc = MPI_Mrecv(into, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            Py_XDECREF(ba);
            Py_DECREF(got);
            return crank_mpi_error("MPI_Mrecv", rc);
        }
        int32_t src = -1, utag = 0, ctx = 0;
        if (!plain_eager(st.MPI_TAG, into, count, &src, &utag, &ctx)) src = -1;
        /* Only while nothing has been left to Python in this call: a message handed on
         * must meet the posted receives before any later message does (MPI's order). */
        if (src >= 0 && contexts != Py_None && PyList_GET_SIZE(got) == 0) {
            int done = complete_posted(contexts, src, utag, ctx, into + WIRE_ENVELOPE_SIZE,
                                       count - WIRE_ENVELOPE_SIZE);
            if (done < 0) {
                Py_XDECREF(ba);
                Py_DECREF(got);
                return NULL;
            }
            if (done) {
                Py_XDECREF(ba);
                continue;
            }
        }
        if (!ba && !(ba = PyByteArray_FromStringAndSize(into, count))) {
            Py_DECREF(got);
            return NULL;
        }
        PyObject *item = Py_BuildValue("(iNiii)", st.MPI_TAG, ba, (int)src, (int)utag, (int)ctx);
        if (!item || PyList_Append(got, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(got);
            return NULL;
        }
        Py_DECREF(item);
    }
    if (!got) Py_RETURN_NONE;
    return got;
}

static PyObject *drain(PyObject *self, PyObject *args) {
    unsigned long long comm;
    PyObject *contexts = Py_None;
    if (!PyArg_ParseTuple(args, "K|O", &comm, &contexts)) return NULL;
    if (contexts != Py_None && !PyDict_Check(contexts))
        return PyErr_Format(PyExc_TypeError, "mmpi._backend._compiled.drain: contexts must be a dict");
    return crank_drain((MPI_Comm)comm, contexts);
}

/* Whether ops[*k:] are all done (op.done is True), moving *k past those that are: 1; 0 if
 * one still waits for its message; 2 if one has its message but is not done (its poll, in
 * Python, must advance it); -1 on error. */
static int ops_done(PyObject *ops, Py_ssize_t *k) {
    for (; *k < PyList_GET_SIZE(ops); (*k)++) {
        PyObject *op = PyList_GET_ITEM(ops, *k), *d = cpost_get(op, s_done), *m = NULL;
        if (!d) return -1;
        int done = d == Py_True;
        Py_DECREF(d);
        if (done) continue;
        if (!(m = cpost_get(op, s_matched))) return -1;
        int matched = m == Py_True;
        Py_DECREF(m);
        return matched ? 2 : 0;
    }
    return 1;
}

/* wait_ops(comm, contexts, ops, rounds): Engine.wait_plain's rounds (the reference is its
 * Python loop: pull_links, then the ops' test): drain `comm` completing posted receives here,
 * until every op of the list `ops` is done, a message is left to Python, or `rounds` rounds
 * found nothing (each then yields the CPU, without the GIL). (heard, messages): whether
 * anything came, and what drain leaves to Python (None if nothing). */
static PyObject *wait_ops(PyObject *self, PyObject *args) {
    unsigned long long comm;
    PyObject *contexts, *ops;
    int rounds, heard = 0;
    if (!PyArg_ParseTuple(args, "KO!O!i", &comm, &PyDict_Type, &contexts, &PyList_Type, &ops,
                          &rounds))
        return NULL;
    Py_ssize_t k = 0;
    PyObject *left = NULL;
    for (int idle = 0; idle < rounds;) {
        PyObject *got = crank_drain((MPI_Comm)comm, contexts);
        if (!got) return NULL;
        int came = got != Py_None;
        if (came) {
            heard = 1;
            if (PyList_GET_SIZE(got)) { /* Python's to hand on, in order, before anything else */
                left = got;
                break;
            }
        }
        Py_DECREF(got);
        int state = ops_done(ops, &k);
        if (state < 0) return NULL;
        if (state) break; /* all done, or one's Python poll must advance it */
        if (!came) {
            idle++;
            Py_BEGIN_ALLOW_THREADS
            sched_yield();
            Py_END_ALLOW_THREADS
        }
    }
    return Py_BuildValue("(NN)", PyBool_FromLong(heard), left ? left : Py_NewRef(Py_None));
}

static PyObject *wait_link(PyObject *self, PyObject *args) {
    unsigned long long comm;
    int rounds, flag = 0, rc = MPI_SUCCESS;
    if (!PyArg_ParseTuple(args, "Ki", &comm, &rounds)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < rounds; i++) {
        rc = MPI_Iprobe(0, MPI_ANY_TAG, (MPI_Comm)comm, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) break;
        sched_yield();
    }
    Py_END_ALLOW_THREADS
    if (rc != MPI_SUCCESS) return crank_mpi_error("MPI_Iprobe", rc);
    return PyBool_FromLong(flag);
}

PyObject *small_coll(PyObject *self, PyObject *args); /* ccoll.c */
PyObject *alltoall_blocks(PyObject *self, PyObject *args); /* cdirect.c */
PyObject *recv_setup(PyObject *self, PyObject *args); /* cpost.c */
PyObject *capi_wrap(PyObject *self, PyObject *args);  /* capi.c */
extern PyTypeObject ReceiverType, SenderType;         /* cpost.c */
extern PyTypeObject FrontType;                        /* cfront.c */
extern PyTypeObject GateType;                         /* cgate.c */
extern int cgate_ready(void);

static PyMethodDef methods[] = {
    {"wait_link", wait_link, METH_VARARGS,
     "wait_link(comm, rounds): probe `comm`, yielding the CPU between probes, up to `rounds` "
     "times, without the GIL; whether a message is there."},
    {"send_eager", send_eager, METH_VARARGS,
     "send_eager(comm, mpitag, src, dst, tag, context, flags, aux, payload): envelope and "
     "payload to the forwarder on `comm`, sent from a buffer of our own."},
    {"small_coll", small_coll, METH_VARARGS,
     "small_coll(...): a small blocking Barrier or Allreduce, its steps in one call "
     "(ccoll.c)."},
    {"alltoall_blocks", alltoall_blocks, METH_VARARGS,
     "alltoall_blocks(...): a blocking Alltoall of large blocks, its steps in one call "
     "(cdirect.c)."},
    {"recv_setup", recv_setup, METH_VARARGS,
     "recv_setup(Op, template, Posted, BridgedRequest, Request, _engine.op module, plain types, "
     "ANY_SOURCE, ANY_TAG, SENT): what Receiver.post and Sender.post make, once per "
     "process (cpost.c)."},
    {"wrap_capi", capi_wrap, METH_VARARGS,
     "wrap_capi(get, new, resolve_get, resolve_new): mpi4py's PyMPIComm_Get and "
     "PyMPIComm_New capsules, wrapped to ask mmpi first (capi.c)."},
    {"reap", reap, METH_NOARGS, "reap(): forget completed sends; True once none is left."},
    {"pending", pending, METH_NOARGS, "pending(): sends not known to be complete."},
    {"wait_ops", wait_ops, METH_VARARGS,
     "wait_ops(comm, contexts, ops, rounds): drain `comm` (posted receives completed here) "
     "until every op of `ops` is done, a message is left to Python, or `rounds` rounds found "
     "nothing; (anything came, the messages left to Python or None)."},
    {"drain", drain, METH_VARARGS,
     "drain(comm, contexts=None): [(tag, bytearray, src, user tag, context), ...] of every "
     "message waiting on `comm` (src -1 but for plain eager ones), or None if none came; "
     "with `contexts` (the engine's, by id), a plain eager message that a posted receive "
     "takes whole completes it here and is not in the list."},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mmpi._backend._compiled",
                                    "The ranks' crossing path, compiled.", -1, methods};

PyMODINIT_FUNC PyInit__compiled(void) {
    if (PyType_Ready(&ReceiverType) < 0 || PyType_Ready(&SenderType) < 0 ||
        PyType_Ready(&FrontType) < 0 || PyType_Ready(&GateType) < 0 || cgate_ready() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&ReceiverType);
    if (PyModule_AddObject(m, "Receiver", (PyObject *)&ReceiverType) < 0) return NULL;
    Py_INCREF(&SenderType);
    if (PyModule_AddObject(m, "Sender", (PyObject *)&SenderType) < 0) return NULL;
    Py_INCREF(&FrontType);
    if (PyModule_AddObject(m, "Front", (PyObject *)&FrontType) < 0) return NULL;
    Py_INCREF(&GateType);
    if (PyModule_AddObject(m, "Gate", (PyObject *)&GateType) < 0) return NULL;
    if (!(s_from_world = PyUnicode_InternFromString("from_world")) ||
        !(s_queues = PyUnicode_InternFromString("queues")) ||
        !(s_posted = PyUnicode_InternFromString("posted")) ||
        !(s_source = PyUnicode_InternFromString("source")) ||
        !(s_tag = PyUnicode_InternFromString("tag")) ||
        !(s_view = PyUnicode_InternFromString("view")) ||
        !(s_op = PyUnicode_InternFromString("op")) ||
        !(s_after = PyUnicode_InternFromString("after")) ||
        !(s_nbytes = PyUnicode_InternFromString("nbytes")) ||
        !(s_matched = PyUnicode_InternFromString("matched")) ||
        !(s_done = PyUnicode_InternFromString("done")))
        return NULL;
    PyModule_AddIntConstant(m, "ENVELOPE_SIZE", WIRE_ENVELOPE_SIZE);
    PyModule_AddIntConstant(m, "VERSION", WIRE_VERSION);
    PyModule_AddStringConstant(m, "BUILT_FOR", MMPI_BUILT_FOR);
    return m;
}
