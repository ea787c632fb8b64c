/* The forwarder's relay loop, compiled: one direction's hot path outside the interpreter.
 *
 * The same rules as forwarder/_relay.py (the reference, and the fallback where no compiler
 * was found at install): envelopes in arrival order, sent on at once (Rule 1); large
 * messages in chunks through a bounded pool of buffers, handed out in arrival order (Rule 2);
 * payloads opaque, only the envelope's `xfer` rewritten (Rule 3); nothing blocks inside MPI,
 * idle polls back off (Rule 4). `run` polls with the GIL released, so both directions (and
 * the heartbeat thread) truly run at once. Messages other than T_EAGER, T_COLL and T_LARGE
 * (a rank's T_BYE, anything unknown) are handed back to Python, which owns the control
 * protocol; errors in an envelope come back as a message for ProtocolError.
 *
 * Built against the MPI the install found (setup.py: the mpich wheel's, MPICH's ABI, or Open
 * MPI's): the communicators are mpi4py's, passed as their integer handles (MPICH's are ints,
 * Open MPI's pointers; the cast takes either). Built as `forwarder._crelay`, inside its
 * package (mmpi-run starts the forwarder with no directory of the user's on its path).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* Which MPI this was compiled against, for the loader's check (mmpi/wire/compiled.py). */
#if defined(OPEN_MPI)
#define MMPI_BUILT_FOR "Open MPI"
#else
#define MMPI_BUILT_FOR "MPICH"
#endif

/* mmpi/wire/protocol.py */
#include "mmpi_wire.h" /* the wire's constants (mmpi/wire/protocol.py) */
#define REAP_AT 16
#define PROBES 64

typedef struct {
    MPI_Request req;
    char *buf;
    int len;
} Sent;

typedef struct {
    MPI_Request req;
    char *buf;
    int len;
} Chunk;

typedef struct {
    int src, in_tag, dst, out_tag, chunk;
    uint64_t nbytes, next;
    Chunk *recvs, *sends; /* FIFO rings of `depth` entries */
    int r0, rn, s0, sn;
} Transfer;

/* A control message of at most SLOT bytes (an envelope and the default eager size, 32 KiB,
 * with room) lands in a slot buffer; at most SLOTS_KEPT free ones are kept (2 MiB). */
#define SLOT (64 * 1024)
#define SLOTS_KEPT 32

typedef struct {
    PyObject_HEAD
    MPI_Comm src_ctrl, src_data, dst_ctrl, dst_data;
    int *local_of; /* destination virtual rank -> local rank in the destination, -1: none */
    int nvranks;
    int *src_vranks; /* source local rank -> virtual rank */
    int src_size, dst_size;
    int *xfer; /* per destination local rank: the last chunk tag used */
    int chunk, pool_one, pool_many, depth;
    long long eager_budget, reap_bytes;
    /* sends on of envelopes and eager payloads, not known complete */
    Sent *inflight;
    MPI_Request *inflight_reqs;
    int ninflight, cap_inflight;
    long long inflight_bytes;
    /* large messages on their way, in arrival order */
    Transfer *transfers;
    int ntransfers, cap_transfers;
    char **pool; /* free chunk buffers, last in first out (warm ones) */
    int npool, allocated;
    /* free buffers of SLOT bytes for control messages (envelopes, eager payloads): reused,
     * so a long stream of messages of every size does not fragment malloc's arena */
    char *slots[SLOTS_KEPT];
    int nslots;
    /* what Python must handle: a control message (tag, source, bytes), or an error */
    int special_tag, special_source;
    char *special_buf;
    int special_len;
    char error[512];
    int byes;
    long long messages, bytes;
    long long busy_ns; /* time in polls that moved something: the relay's work */
    /* back-off: yield for `yield_ns` of quiet, then naps growing to `max_sleep_ns` */
    long long yield_ns, max_sleep_ns;
} Relay;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int fail(Relay *r, const char *msg) {
    snprintf(r->error, sizeof r->error, "%s", msg);
    return -1;
}

static uint32_t get_u32(const char *b, int off) {
    uint32_t v;
    memcpy(&v, b + off, 4);
    return v;
}

static int32_t get_i32(const char *b, int off) {
    int32_t v;
    memcpy(&v, b + off, 4);
    return v;
}

static uint64_t get_u64(const char *b, int off) {
    uint64_t v;
    memcpy(&v, b + off, 8);
    return v;
}

/* -- buffers ------------------------------------------------------------------------------ */
static int pairs_in_flight(Relay *r) {
    /* distinct (source, destination) pairs among the transfers: few, so a scan will do */
    int n = 0;
    for (int i = 0; i < r->ntransfers && n < 2; i++) {
        Transfer *t = &r->transfers[i];
        int seen = 0;
        for (int j = 0; j < i; j++)
            if (r->transfers[j].src == t->src && r->transfers[j].dst == t->dst) {
                seen = 1;
                break;
            }
        if (!seen) n++;
    }
    return n;
}

static char *take_buffer(Relay *r) {
    int limit = pairs_in_flight(r) <= 1 ? r->pool_one : r->pool_many;
    if (r->allocated - r->npool >= limit) return NULL;
    if (r->npool) return r->pool[--r->npool];
    char *b = malloc(r->chunk);
    if (!b) return NULL;
    r->allocated++;
    char **p = realloc(r->pool, sizeof(char *) * r->allocated);
    if (!p) {
        free(b);
        r->allocated--;
        return NULL;
    }
    r->pool = p;
    return b;
}

static void give_buffer(Relay *r, char *b) { r->pool[r->npool++] = b; }

/* A buffer for a control message of `count` bytes: a slot where it fits, else its own. */
static char *take_ctrl(Relay *r, int count) {
    if (count > SLOT) return malloc(count > 0 ? count : 1);
    if (r->nslots) return r->slots[--r->nslots];
    return malloc(SLOT);
}

/* Done with a control message's buffer of `len` bytes (as take_ctrl sized it). */
static void give_ctrl(Relay *r, char *buf, int len) {
    if (len <= SLOT && r->nslots < SLOTS_KEPT)
        r->slots[r->nslots++] = buf;
    else
        free(buf);
}

/* -- control-channel sends on ------------------------------------------------------------ */
static int send_on(Relay *r, char *buf, int len, int dst, int tag) {
    if (r->ninflight == r->cap_inflight) {
        int cap = r->cap_inflight ? 2 * r->cap_inflight : 64;
        Sent *s = realloc(r->inflight, sizeof(Sent) * cap);
        if (!s) return fail(r, "out of memory");
        r->inflight = s;
        MPI_Request *q = realloc(r->inflight_reqs, sizeof(MPI_Request) * cap);
        if (!q) return fail(r, "out of memory");
        r->inflight_reqs = q;
        r->cap_inflight = cap;
    }
    Sent *s = &r->inflight[r->ninflight];
    if (MPI_Isend(buf, len, MPI_BYTE, dst, tag, r->dst_ctrl, &s->req) != MPI_SUCCESS)
        return fail(r, "MPI_Isend failed on the control channel");
    s->buf = buf;
    s->len = len;
    r->ninflight++;
    r->inflight_bytes += len;
    return 0;
}

static int reap(Relay *r) {
    if (!r->ninflight) return 0;
    for (int i = 0; i < r->ninflight; i++) r->inflight_reqs[i] = r->inflight[i].req;
    int outcount = 0;
    int *idx = malloc(sizeof(int) * r->ninflight);
    if (!idx) return fail(r, "out of memory");
    MPI_Testsome(r->ninflight, r->inflight_reqs, &outcount, idx, MPI_STATUSES_IGNORE);
    if (outcount == MPI_UNDEFINED || outcount == 0) {
        free(idx);
        return 0;
    }
    for (int k = 0; k < outcount; k++) {
        Sent *s = &r->inflight[idx[k]];
        r->inflight_bytes -= s->len;
        give_ctrl(r, s->buf, s->len);
        s->buf = NULL;
    }
    free(idx);
    int w = 0;
    for (int i = 0; i < r->ninflight; i++)
        if (r->inflight[i].buf) r->inflight[w++] = r->inflight[i];
    r->ninflight = w;
    return 1;
}

/* -- large transfers ---------------------------------------------------------------------- */
static int add_transfer(Relay *r, int src, int in_tag, int dst, int out_tag, uint64_t nbytes,
                        int chunk) {
    if (r->ntransfers == r->cap_transfers) {
        int cap = r->cap_transfers ? 2 * r->cap_transfers : 16;
        Transfer *t = realloc(r->transfers, sizeof(Transfer) * cap);
        if (!t) return fail(r, "out of memory");
        r->transfers = t;
        r->cap_transfers = cap;
    }
    Transfer *t = &r->transfers[r->ntransfers];
    memset(t, 0, sizeof *t);
    t->src = src;
    t->in_tag = in_tag;
    t->dst = dst;
    t->out_tag = out_tag;
    t->nbytes = nbytes;
    t->chunk = chunk;
    t->recvs = malloc(sizeof(Chunk) * r->depth);
    t->sends = malloc(sizeof(Chunk) * r->depth);
    if (!t->recvs || !t->sends) return fail(r, "out of memory");
    r->ntransfers++;
    return 0;
}

static int advance(Relay *r) {
    int did = 0, finished = 0;
    for (int i = 0; i < r->ntransfers; i++) {
        Transfer *t = &r->transfers[i];
        int flag;
        if (t->next == 0) {
            /* Not started and no buffer may go into use: transfers get buffers strictly in
             * arrival order, so none after this one has started either. */
            int limit = pairs_in_flight(r) <= 1 ? r->pool_one : r->pool_many;
            if (r->allocated - r->npool >= limit) break;
        }
        while (t->sn) {
            Chunk *c = &t->sends[t->s0];
            MPI_Test(&c->req, &flag, MPI_STATUS_IGNORE);
            if (!flag) break;
            give_buffer(r, c->buf);
            t->s0 = (t->s0 + 1) % r->depth;
            t->sn--;
            did = 1;
        }
        while (t->next < t->nbytes && t->rn + t->sn < r->depth) {
            char *b = take_buffer(r);
            if (!b) break;
            uint64_t left = t->nbytes - t->next;
            int n = left < (uint64_t)t->chunk ? (int)left : t->chunk;
            Chunk *c = &t->recvs[(t->r0 + t->rn) % r->depth];
            c->buf = b;
            c->len = n;
            if (MPI_Irecv(b, n, MPI_BYTE, t->src, t->in_tag, r->src_data, &c->req) != MPI_SUCCESS)
                return fail(r, "MPI_Irecv failed on the data channel");
            t->rn++;
            t->next += n;
            did = 1;
        }
        while (t->rn) {
            Chunk *c = &t->recvs[t->r0];
            MPI_Test(&c->req, &flag, MPI_STATUS_IGNORE);
            if (!flag) break;
            Chunk *s = &t->sends[(t->s0 + t->sn) % r->depth];
            s->buf = c->buf;
            s->len = c->len;
            if (MPI_Isend(c->buf, c->len, MPI_BYTE, t->dst, t->out_tag, r->dst_data, &s->req) !=
                MPI_SUCCESS)
                return fail(r, "MPI_Isend failed on the data channel");
            t->sn++;
            t->r0 = (t->r0 + 1) % r->depth;
            t->rn--;
            did = 1;
        }
        if (t->next >= t->nbytes && !t->rn && !t->sn) finished = 1;
    }
    if (finished) {
        int w = 0;
        for (int i = 0; i < r->ntransfers; i++) {
            Transfer *t = &r->transfers[i];
            if (t->next < t->nbytes || t->rn || t->sn) {
                r->transfers[w++] = *t;
            } else {
                free(t->recvs);
                free(t->sends);
            }
        }
        r->ntransfers = w;
    }
    return did;
}

/* -- envelopes ---------------------------------------------------------------------------- */
static int destination(Relay *r, const char *buf, int source, int *local) {
    int32_t dst = get_i32(buf, WIRE_OFF_DST);
    if (dst < 0 || dst >= r->nvranks || r->local_of[dst] < 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "rank %d addressed rank %d, which is not in the other cluster",
                 r->src_vranks[source], dst);
        return fail(r, msg);
    }
    *local = r->local_of[dst];
    return 0;
}

static int on_message(Relay *r, MPI_Message *msg, int source, int tag, int count) {
    char *buf = take_ctrl(r, count);
    if (!buf) return fail(r, "out of memory");
    MPI_Mrecv(buf, count, MPI_BYTE, msg, MPI_STATUS_IGNORE);
    if (tag != WIRE_T_EAGER && tag != WIRE_T_COLL && tag != WIRE_T_LARGE) { /* Python's to handle */
        r->special_tag = tag;
        r->special_source = source;
        r->special_buf = buf;
        r->special_len = count;
        return 1;
    }
    char err[200];
    if (count < WIRE_ENVELOPE_SIZE || (unsigned char)buf[0] != WIRE_VERSION) {
        snprintf(err, sizeof err, "rank %d sent a malformed envelope (%d bytes, version %d)",
                 r->src_vranks[source], count, count ? (unsigned char)buf[0] : -1);
        free(buf);
        return fail(r, err);
    }
    int local;
    if (destination(r, buf, source, &local)) {
        free(buf);
        return -1;
    }
    if (tag != WIRE_T_LARGE) {
        if (send_on(r, buf, count, local, tag)) return -1;
        r->messages++;
        r->bytes += count - WIRE_ENVELOPE_SIZE;
        return 0;
    }
    uint32_t chunk = get_u32(buf, WIRE_OFF_CHUNK);
    uint64_t nbytes = get_u64(buf, WIRE_OFF_NBYTES);
    int in_tag = (int)get_u32(buf, WIRE_OFF_XFER);
    if (chunk == 0 || chunk > (uint32_t)r->chunk) {
        snprintf(err, sizeof err, "rank %d sent chunks of %u bytes; this forwarder takes at most %d",
                 r->src_vranks[source], chunk, r->chunk);
        free(buf);
        return fail(r, err);
    }
    int out = r->xfer[local] % WIRE_MAX_XFER + 1;
    r->xfer[local] = out;
    uint32_t out32 = (uint32_t)out;
    memcpy(buf + WIRE_OFF_XFER, &out32, 4);
    /* the envelope goes on at once, so that the receiver can post its chunk receives early */
    if (send_on(r, buf, count, local, WIRE_T_LARGE)) return -1;
    if (add_transfer(r, source, in_tag, local, out, nbytes, (int)chunk)) return -1;
    r->messages++;
    r->bytes += (long long)nbytes;
    return 0;
}

/* One round: new envelopes, reaping, transfers. 1: work done; 0: none; 2: a message for
 * Python; -1: error. */
static int poll_once(Relay *r) {
    int did = 0;
    for (int i = 0; i < PROBES; i++) {
        if (r->inflight_bytes > r->eager_budget) break; /* backpressure: senders wait in MPI */
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, r->src_ctrl, &flag, &msg, &st);
        if (!flag) break;
        int count;
        MPI_Get_count(&st, MPI_BYTE, &count);
        int got = on_message(r, &msg, st.MPI_SOURCE, st.MPI_TAG, count);
        if (got < 0) return -1;
        if (got == 1) return 2;
        did = 1;
    }
    if (r->ninflight && (r->ninflight >= REAP_AT || r->inflight_bytes > r->reap_bytes ||
                         r->byes >= r->src_size)) {
        int got = reap(r);
        if (got < 0) return -1;
        did |= got;
    }
    if (r->ntransfers) {
        int got = advance(r);
        if (got < 0) return -1;
        did |= got;
    }
    return did;
}

static int finished(Relay *r) {
    return r->byes >= r->src_size && !r->ntransfers && !r->ninflight;
}

/* -- the Python type ---------------------------------------------------------------------- */
static PyTypeObject RelayType;

static int int_array(PyObject *seq, int **out, int *n) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (!fast) return -1;
    *n = (int)PySequence_Fast_GET_SIZE(fast);
    *out = malloc(sizeof(int) * (*n > 0 ? *n : 1));
    for (int i = 0; i < *n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        (*out)[i] = (int)v;
    }
    Py_DECREF(fast);
    return 0;
}

static int Relay_init(Relay *r, PyObject *args, PyObject *kw) {
    static char *names[] = {"src_ctrl", "src_data", "dst_ctrl", "dst_data", "local_of",
                            "src_vranks", "dst_size", "chunk", "pool", "pool_many", "depth",
                            "eager_budget", "yield_us", "max_sleep_us", NULL};
    unsigned long long sc, sd, dc, dd; /* mpi4py's handles: ints or pointers */
    long long budget;
    PyObject *local_of, *src_vranks;
    double yield_us, max_sleep_us;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KKKKOOiiiiiLdd", names, &sc, &sd, &dc, &dd,
                                     &local_of, &src_vranks, &r->dst_size, &r->chunk,
                                     &r->pool_one, &r->pool_many, &r->depth, &budget, &yield_us,
                                     &max_sleep_us))
        return -1;
    if (r->depth < 1 || r->chunk < 1 || r->pool_one < 1) {
        PyErr_SetString(PyExc_ValueError, "chunk, pool and depth must be positive");
        return -1;
    }
    if (r->pool_many < r->pool_one) r->pool_many = r->pool_one;
    r->src_ctrl = (MPI_Comm)sc;
    r->src_data = (MPI_Comm)sd;
    r->dst_ctrl = (MPI_Comm)dc;
    r->dst_data = (MPI_Comm)dd;
    if (int_array(local_of, &r->local_of, &r->nvranks)) return -1;
    if (int_array(src_vranks, &r->src_vranks, &r->src_size)) return -1;
    r->xfer = calloc(r->dst_size > 0 ? r->dst_size : 1, sizeof(int));
    r->eager_budget = budget;
    r->reap_bytes = budget / 2;
    r->yield_ns = (long long)(yield_us * 1000);
    r->max_sleep_ns = (long long)(max_sleep_us * 1000);
    return 0;
}

static void Relay_dealloc(Relay *r) {
    free(r->local_of);
    free(r->src_vranks);
    free(r->xfer);
    for (int i = 0; i < r->ninflight; i++) free(r->inflight[i].buf);
    free(r->inflight);
    free(r->inflight_reqs);
    for (int i = 0; i < r->ntransfers; i++) {
        free(r->transfers[i].recvs);
        free(r->transfers[i].sends);
    }
    free(r->transfers);
    for (int i = 0; i < r->npool; i++) free(r->pool[i]);
    free(r->pool);
    for (int i = 0; i < r->nslots; i++) free(r->slots[i]);
    free(r->special_buf);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* run(relays, seconds): poll every relay of the tuple, the GIL released, until one has a
 * message for Python (returns its index), every one has finished (returns -1), or `seconds`
 * have passed (returns -2). */
static PyObject *run(PyObject *mod, PyObject *args) {
    PyObject *tuple;
    double seconds;
    if (!PyArg_ParseTuple(args, "O!d", &PyTuple_Type, &tuple, &seconds)) return NULL;
    int n = (int)PyTuple_GET_SIZE(tuple);
    Relay *rs[8];
    if (n < 1 || n > 8) {
        PyErr_SetString(PyExc_ValueError, "run takes 1 to 8 relays");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(tuple, i);
        if (!PyObject_TypeCheck(o, &RelayType)) {
            PyErr_SetString(PyExc_TypeError, "run takes a tuple of Relay objects");
            return NULL;
        }
        rs[i] = (Relay *)o;
    }
    int result = -2, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    long long start = now_ns(), deadline = start + (long long)(seconds * 1e9), since = 0;
    long long nap = 20000;
    for (;;) {
        int did = 0, all_done = 1, stop = 0;
        for (int i = 0; i < n; i++) {
            long long t0 = now_ns();
            int got = poll_once(rs[i]);
            if (got) rs[i]->busy_ns += now_ns() - t0;
            if (got < 0) {
                bad = i;
                stop = 1;
                break;
            }
            if (got == 2) {
                result = i;
                stop = 1;
                break;
            }
            did |= got;
            all_done &= finished(rs[i]);
        }
        if (stop) break;
        long long now = now_ns();
        if (did) {
            since = 0;
            nap = 20000;
            continue;
        }
        if (all_done) {
            result = -1;
            break;
        }
        if (now >= deadline) break;
        if (!since) {
            since = now;
            continue;
        }
        if (now - since < rs[0]->yield_ns) {
            sched_yield();
        } else {
            struct timespec ts = {0, nap};
            nanosleep(&ts, NULL);
            nap = nap * 2 < rs[0]->max_sleep_ns ? nap * 2 : rs[0]->max_sleep_ns;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyObject *err = PyObject_GetAttrString(mod, "RelayError");
        PyErr_SetString(err ? err : PyExc_RuntimeError, rs[bad]->error);
        Py_XDECREF(err);
        return NULL;
    }
    return PyLong_FromLong(result);
}

static PyObject *Relay_take(Relay *r, PyObject *unused) {
    /* (tag, source, bytes) of the message handed to Python, or None */
    if (!r->special_buf) Py_RETURN_NONE;
    PyObject *out = Py_BuildValue("iiy#", r->special_tag, r->special_source, r->special_buf,
                                  (Py_ssize_t)r->special_len);
    free(r->special_buf);
    r->special_buf = NULL;
    return out;
}

static PyObject *Relay_said_bye(Relay *r, PyObject *unused) {
    r->byes++;
    Py_RETURN_NONE;
}

static PyObject *Relay_get_finished(Relay *r, void *c) { return PyBool_FromLong(finished(r)); }
static PyObject *Relay_get_messages(Relay *r, void *c) { return PyLong_FromLongLong(r->messages); }
static PyObject *Relay_get_bytes(Relay *r, void *c) { return PyLong_FromLongLong(r->bytes); }
static PyObject *Relay_get_byes(Relay *r, void *c) { return PyLong_FromLong(r->byes); }
static PyObject *Relay_get_buffers(Relay *r, void *c) { return PyLong_FromLong(r->allocated); }
static PyObject *Relay_get_busy(Relay *r, void *c) { return PyFloat_FromDouble(r->busy_ns / 1e9); }

static PyMethodDef Relay_methods[] = {
    {"take", (PyCFunction)Relay_take, METH_NOARGS,
     "(tag, source, bytes) of the message handed to Python by run(), or None."},
    {"said_bye", (PyCFunction)Relay_said_bye, METH_NOARGS, "Count one more source rank's BYE."},
    {NULL}};

static PyGetSetDef Relay_getset[] = {
    {"finished", (getter)Relay_get_finished, NULL, "Every source said BYE, all delivered.", NULL},
    {"messages", (getter)Relay_get_messages, NULL, "Messages relayed.", NULL},
    {"bytes", (getter)Relay_get_bytes, NULL, "Payload bytes relayed.", NULL},
    {"byes", (getter)Relay_get_byes, NULL, "Source ranks that said BYE.", NULL},
    {"buffers", (getter)Relay_get_buffers, NULL, "Chunk buffers allocated.", NULL},
    {"busy", (getter)Relay_get_busy, NULL, "Seconds spent in polls that moved something.", NULL},
    {NULL}};

static PyTypeObject RelayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "forwarder._crelay.Relay",
    .tp_basicsize = sizeof(Relay),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One relay direction's state (see forwarder/_compiled.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Relay_init,
    .tp_dealloc = (destructor)Relay_dealloc,
    .tp_methods = Relay_methods,
    .tp_getset = Relay_getset,
};

static PyMethodDef module_methods[] = {
    {"run", run, METH_VARARGS,
     "run(relays, seconds): poll the relays without the GIL; the index of one with a message "
     "for Python, -1 once all finished, -2 after `seconds`."},
    {NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "forwarder._crelay",
                                    "The forwarder's compiled relay loop.", -1, module_methods};

PyMODINIT_FUNC PyInit__crelay(void) {
    if (PyType_Ready(&RelayType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&RelayType);
    PyModule_AddObject(m, "Relay", (PyObject *)&RelayType);
    PyObject *err = PyErr_NewException("forwarder._crelay.RelayError", NULL, NULL);
    PyModule_AddObject(m, "RelayError", err);
    PyModule_AddIntConstant(m, "MPI_VERSION_BUILT", MPI_VERSION);
    PyModule_AddStringConstant(m, "BUILT_FOR", MMPI_BUILT_FOR);
    return m;
}
