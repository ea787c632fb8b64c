/* A small blocking Barrier or Allreduce in one compiled call: the steps of the leaders' scheme
 * (mmpi/_collectives/reductions.py, the reference and the fallback) with no interpreted step
 * between them. Part of the module `_mmpi_crank` (mmpi/_crank.c).
 *
 * On shared cores a small collective is a chain of turns on the CPU, and every turn a waiting
 * rank takes costs the others its length: the interpreted steps and waits made each turn
 * several times longer than the same steps in C (docs/performance.md, "Small collectives").
 *
 *   small_coll(local, check, words, nwords, nmine, first_barrier, allreduce,
 *              sendbuf, recvbuf, count, dtype, op,
 *              link, me, peer, ctx, tag, call, tests, first, idle, keep)
 *
 * runs, on the cluster's native communicator `local`:
 *   1. the cluster's check (Rule 3 of _collectives/_base.py): the persistent allgather `check`
 *      started and waited for, then each rank's first three words of `words` compared with
 *      this rank's; or, with no check, a native barrier if `first_barrier`;
 *   2. Allreduce: a native reduce to local rank 0 (`sendbuf` None: in place);
 *   3. at the leader (`link` not 0): its crossing (T_COLL: envelope and `recvbuf`'s bytes, or
 *      none for a Barrier) to world rank `peer`, then the wait for the peer's, taken from the
 *      link (crossings of others are handed to `keep(bytearray)`, as _crossing.Crossings does),
 *      and for an Allreduce the peer's partial combined into `recvbuf` (predefined ops only);
 *   4. a native bcast from local rank 0 (Allreduce) or a native barrier.
 * Every wait tests `tests` times per sched_yield (the GIL released while yielding); after
 * `first` rounds it gives the engine its say once per 32 rounds, `idle(n, crossing)`: its
 * back-off, drains and liveness checks, which may raise; `idle` returns True while the
 * back-off naps (a round per call then), or, in the crossing's wait (`crossing` 1), the
 * crossing kept meanwhile by a drain as (tag, call, payload). A drain in an earlier wait of
 * the call may have kept it too: the crossing's wait then first asks `idle(-1, 1)`.
 * Returns None when done, else what Python must say: (1,) the check found a mismatch (the
 * words hold everyone's); (2, tag, call) the peer's crossing is of another call; (3, nbytes)
 * the peer's partial has another size.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

/* mmpi/_crank.c */
extern PyObject *crank_mpi_error(const char *call, int rc);
extern int crank_send(MPI_Comm comm, int mpitag, int src, int dst, int tag, int ctx, int flags,
                      unsigned int aux, const void *payload, Py_ssize_t n);

#define T_COLL 3 /* mmpi/wire/protocol.py */
#define VERSION 2
#define ENVELOPE_SIZE 40
#define ROUNDS_PER_IDLE 32

typedef struct {
    int tests, first;
    PyObject *idle;
    long round;
    int napping, crossing;
    int idled; /* idle() has run in this call: a drain may have kept the peer's crossing */
} Waiter;

static void yield_cpu(void) {
    Py_BEGIN_ALLOW_THREADS
    sched_yield();
    Py_END_ALLOW_THREADS
}

/* After a round of tests found nothing: yield, or let the engine have its say. NULL on error,
 * else a new reference: None, or what idle() returned. */
static PyObject *next_round(Waiter *w) {
    long r = w->round++;
    if (r < w->first || (!w->napping && (r - w->first) % ROUNDS_PER_IDLE != 0)) {
        yield_cpu();
        Py_RETURN_NONE;
    }
    PyObject *got = PyObject_CallFunction(w->idle, "li", r - w->first, w->crossing);
    w->idled = 1;
    if (!got) return NULL;
    w->napping = got == Py_True;
    return got;
}

/* Wait for native request `r`: 0 when complete, -1 on error. */
static int wait_request(MPI_Request *r, Waiter *w) {
    w->round = 0;
    w->napping = w->crossing = 0;
    for (;;) {
        for (int t = 0; t < w->tests; t++) {
            int flag = 0, rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                crank_mpi_error("MPI_Test", rc);
                return -1;
            }
            if (flag) return 0;
        }
        PyObject *got = next_round(w);
        if (!got) return -1;
        Py_DECREF(got);
    }
}

static int started(const char *call, int rc) {
    if (rc == MPI_SUCCESS) return 0;
    crank_mpi_error(call, rc);
    return -1;
}

/* Wait for the crossing from world rank `peer` on context `ctx`: a new reference to it as
 * (tag, call, payload), or NULL on error. */
static PyObject *wait_crossing(MPI_Comm link, int peer, int ctx, PyObject *keep, Waiter *w) {
    w->round = 0;
    w->napping = 0;
    w->crossing = 1;
    if (w->idled) { /* idle(-1, 1): only the crossing a drain of an earlier wait kept, if any */
        PyObject *got = PyObject_CallFunction(w->idle, "li", -1L, 1);
        if (!got || PyTuple_Check(got)) return got;
        Py_DECREF(got);
    }
    for (;;) {
        for (int t = 0; t < w->tests; t++) {
            int flag = 0, count = 0, rc;
            MPI_Message msg;
            MPI_Status st;
            rc = MPI_Improbe(0, T_COLL, link, &flag, &msg, &st);
            if (rc != MPI_SUCCESS) return crank_mpi_error("MPI_Improbe", rc);
            if (!flag) continue;
            MPI_Get_count(&st, MPI_BYTE, &count);
            PyObject *ba = PyByteArray_FromStringAndSize(NULL, count);
            if (!ba) return NULL;
            rc = MPI_Mrecv(PyByteArray_AS_STRING(ba), count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                Py_DECREF(ba);
                return crank_mpi_error("MPI_Mrecv", rc);
            }
            const char *b = PyByteArray_AS_STRING(ba);
            int32_t src, cid, tag;
            uint32_t call;
            uint64_t nb;
            if (count >= ENVELOPE_SIZE && b[0] == VERSION) {
                memcpy(&src, b + 4, 4);
                memcpy(&tag, b + 12, 4);
                memcpy(&cid, b + 16, 4);
                memcpy(&nb, b + 20, 8);
                memcpy(&call, b + 36, 4);
                if (src == peer && cid == ctx && nb == (uint64_t)(count - ENVELOPE_SIZE)) {
                    PyObject *view = PyMemoryView_FromObject(ba);
                    PyObject *payload = NULL;
                    if (view) {
                        payload = PySequence_GetSlice(view, ENVELOPE_SIZE, count);
                        Py_DECREF(view);
                    }
                    Py_DECREF(ba);
                    if (!payload) return NULL;
                    return Py_BuildValue("(iIN)", (int)tag, (unsigned int)call, payload);
                }
            }
            /* another's, or malformed: keep() keeps it, or says what is wrong */
            PyObject *kept = PyObject_CallOneArg(keep, ba);
            Py_DECREF(ba);
            if (!kept) return NULL;
            Py_DECREF(kept);
        }
        PyObject *got = next_round(w);
        if (!got) return NULL;
        if (PyTuple_Check(got)) return got; /* kept by a drain the engine made meanwhile */
        Py_DECREF(got);
    }
}

PyObject *small_coll(PyObject *self, PyObject *args) {
    unsigned long long local_h, check_h, dtype_h, op_h, link_h;
    Py_buffer words;
    int nwords, nmine, first_barrier, allreduce, count, me, peer, ctx, tag, tests, first;
    unsigned int call;
    PyObject *sendobj, *recvobj, *idle, *keep;
    if (!PyArg_ParseTuple(args, "KKw*iiiiOOiKKKiiiiIiiOO", &local_h, &check_h, &words, &nwords,
                          &nmine, &first_barrier, &allreduce, &sendobj, &recvobj, &count,
                          &dtype_h, &op_h, &link_h, &me, &peer, &ctx, &tag, &call, &tests,
                          &first, &idle, &keep))
        return NULL;
    PyObject *result = NULL;
    Py_buffer sb = {0}, rb = {0};
    int have_sb = 0, have_rb = 0;
    MPI_Comm local = (MPI_Comm)local_h;
    MPI_Datatype dt = (MPI_Datatype)dtype_h;
    MPI_Op op = (MPI_Op)op_h;
    MPI_Request r;
    Waiter w = {tests < 1 ? 1 : tests, first, idle, 0, 0, 0, 0};
    if (allreduce) {
        if (PyObject_GetBuffer(recvobj, &rb, PyBUF_SIMPLE | PyBUF_WRITABLE) < 0) goto done;
        have_rb = 1;
        if (sendobj != Py_None) {
            if (PyObject_GetBuffer(sendobj, &sb, PyBUF_SIMPLE) < 0) goto done;
            have_sb = 1;
        }
    }
    /* 1. the check, or a first barrier */
    if (check_h) {
        MPI_Request chk = (MPI_Request)check_h;
        if (started("MPI_Start", MPI_Start(&chk)) < 0 || wait_request(&chk, &w) < 0) goto done;
        const int64_t *all = (const int64_t *)words.buf;
        if (words.len < (Py_ssize_t)(sizeof(int64_t) * nwords * (nmine + 1))) {
            PyErr_SetString(PyExc_ValueError, "_mmpi_crank.small_coll: words too short");
            goto done;
        }
        for (int i = 1; i <= nmine; i++)
            if (memcmp(all, all + (Py_ssize_t)i * nwords, 3 * sizeof(int64_t))) {
                result = Py_BuildValue("(i)", 1);
                goto done;
            }
    } else if (first_barrier) {
        if (started("MPI_Ibarrier", MPI_Ibarrier(local, &r)) < 0 || wait_request(&r, &w) < 0)
            goto done;
    }
    /* 2. the native reduce to the leader */
    if (allreduce) {
        const void *send = have_sb ? sb.buf : MPI_IN_PLACE;
        int rc;
        if (link_h) {
            rc = MPI_Ireduce(send, rb.buf, count, dt, op, 0, local, &r);
        } else {
            rc = MPI_Ireduce(have_sb ? sb.buf : rb.buf, NULL, count, dt, op, 0, local, &r);
        }
        if (started("MPI_Ireduce", rc) < 0 || wait_request(&r, &w) < 0) goto done;
    }
    /* 3. the leaders' exchange */
    if (link_h) {
        MPI_Comm link = (MPI_Comm)link_h;
        if (crank_send(link, T_COLL, me, peer, tag, ctx, 0, call, allreduce ? rb.buf : NULL,
                       allreduce ? rb.len : 0) < 0)
            goto done;
        PyObject *got = wait_crossing(link, peer, ctx, keep, &w);
        if (!got) goto done;
        int gtag = 0;
        unsigned int gcall = 0;
        PyObject *payload = NULL;
        if (!PyArg_ParseTuple(got, "iIO", &gtag, &gcall, &payload)) {
            Py_DECREF(got);
            goto done;
        }
        if (gtag != tag || gcall != call) {
            result = Py_BuildValue("(iiI)", 2, gtag, gcall);
            Py_DECREF(got);
            goto done;
        }
        if (allreduce) {
            Py_buffer tb;
            if (PyObject_GetBuffer(payload, &tb, PyBUF_SIMPLE) < 0) {
                Py_DECREF(got);
                goto done;
            }
            if (tb.len != rb.len) {
                result = Py_BuildValue("(in)", 3, tb.len);
                PyBuffer_Release(&tb);
                Py_DECREF(got);
                goto done;
            }
            /* theirs op mine, into mine: predefined ops commute (reductions._allreduce_plain) */
            int rc = MPI_Reduce_local(tb.buf, rb.buf, count, dt, op);
            PyBuffer_Release(&tb);
            if (started("MPI_Reduce_local", rc) < 0) {
                Py_DECREF(got);
                goto done;
            }
        }
        Py_DECREF(got);
    }
    /* 4. the native bcast, or the last barrier */
    if (allreduce) {
        if (started("MPI_Ibcast", MPI_Ibcast(rb.buf, count, dt, 0, local, &r)) < 0 ||
            wait_request(&r, &w) < 0)
            goto done;
    } else {
        if (started("MPI_Ibarrier", MPI_Ibarrier(local, &r)) < 0 || wait_request(&r, &w) < 0)
            goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    if (have_sb) PyBuffer_Release(&sb);
    if (have_rb) PyBuffer_Release(&rb);
    PyBuffer_Release(&words);
    return result;
}
