/* A small blocking Barrier, Allreduce, Bcast or Reduce in one compiled call: the steps of
 * mmpi/_collectives/reductions.py and carried.py (the reference and the fallback) with no
 * interpreted step between them. Part of the module `mmpi._backend._compiled` (mmpi/_backend/crank.c).
 *
 * On shared cores a small collective is a chain of turns on the CPU, and every turn a waiting
 * rank takes costs the others its length: the interpreted steps and waits made each turn
 * several times longer than the same steps in C (docs/performance.md, "Small collectives").
 *
 *   small_coll(mode, local, check, words, nwords, nmine, verify,
 *              sendbuf, recvbuf, count, dtype, op,
 *              link, me, peer, ctx, tag, call, sends, part, tests, first, idle, keep)
 *
 * runs a Barrier or Allreduce (`mode`), on the cluster's native communicator `local`:
 *   1. the cluster's check (Rule 3 of _collectives/common.py): the persistent allgather `check`
 *      started and waited for, then each rank's first three words of `words` compared with
 *      this rank's; or, with no check, a native barrier (a Barrier's first);
 *   2. Allreduce: a native reduce to local rank 0 (`sendbuf` None: in place);
 *   3. at the leader (`link` not 0, the forwarder link to `peer`): its crossing (T_COLL: envelope and `recvbuf`'s bytes, or
 *      none for a Barrier) to world rank `peer`, then the wait for the peer's, taken from the
 *      link (crossings of others are handed to `keep(bytearray)`, as
 *      _engine.crossings.Crossings does), and for an Allreduce the peer's partial combined into
 *      `recvbuf` (predefined ops only);
 *   4. a native bcast from local rank 0 (Allreduce) or a native barrier.
 * A small Bcast or Reduce instead carries its data in the check (mmpi/_collectives/carried.py,
 * the reference): see bcast_carried and reduce_carried below.
 * Every wait tests `tests` times per sched_yield (the GIL released while yielding); after
 * `first` rounds it gives the engine its say once per SAY_EVERY seconds (ccoll.h),
 * `idle(n, crossing)` (n from 0 in each wait): its back-off, drains and liveness checks,
 * which may raise; `idle` returns True while the
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
#include <stdlib.h>
#include <string.h>

#include "ccoll.h"

/* mmpi/_backend/crank.c */
extern PyObject *crank_mpi_error(const char *call, int rc);
extern int crank_send(MPI_Comm comm, int mpitag, int src, int dst, int tag, int ctx, int flags,
                      unsigned int aux, const void *payload, Py_ssize_t n);

#include "mmpi_wire.h"

/* After a round of tests found nothing: yield, or let the engine have its say. NULL on error,
 * else a new reference: None, or what idle() returned. */
static PyObject *next_round(Waiter *w) {
    long r = w->round++;
    if (r == 0) w->say_at = ccoll_now() + SAY_EVERY, w->says = 0; /* from the wait's start */
    if (!w->napping && (r < w->first || !ccoll_say_due(&w->say_at))) {
        ccoll_yield();
        Py_RETURN_NONE;
    }
    PyObject *got = PyObject_CallFunction(w->idle, "li", w->says++, w->crossing);
    w->idled = 1;
    if (!got) return NULL;
    w->napping = got == Py_True;
    return got;
}

int ccoll_test(MPI_Request *r, int tests) {
    for (int t = 0; t < tests; t++) {
        int flag = 0, rc = MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            crank_mpi_error("MPI_Test", rc);
            return -1;
        }
        if (flag) return 1;
    }
    return 0;
}

/* Wait for native request `r`: 0 when complete, -1 on error. */
static int wait_request(MPI_Request *r, Waiter *w) {
    w->round = 0;
    w->napping = w->crossing = 0;
    for (;;) {
        int done = ccoll_test(r, w->tests);
        if (done) return done < 0 ? -1 : 0;
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
            rc = MPI_Improbe(0, WIRE_T_COLL, link, &flag, &msg, &st);
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
            if (count >= WIRE_ENVELOPE_SIZE && b[WIRE_OFF_VERSION] == WIRE_VERSION) {
                memcpy(&src, b + WIRE_OFF_SRC, 4);
                memcpy(&tag, b + WIRE_OFF_TAG, 4);
                memcpy(&cid, b + WIRE_OFF_CONTEXT, 4);
                memcpy(&nb, b + WIRE_OFF_NBYTES, 8);
                memcpy(&call, b + WIRE_OFF_AUX, 4);
                if (src == peer && cid == ctx && nb == (uint64_t)(count - WIRE_ENVELOPE_SIZE)) {
                    PyObject *view = PyMemoryView_FromObject(ba);
                    PyObject *payload = NULL;
                    if (view) {
                        payload = PySequence_GetSlice(view, WIRE_ENVELOPE_SIZE, count);
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

/* Start the check and wait for it; with `verify`, compare everyone's first three words with
 * this rank's. 0 done, 1 mismatch, -1 error. */
static int check(Call *k) {
    MPI_Request chk = k->check;
    if (started("MPI_Start", MPI_Start(&chk)) < 0 || wait_request(&chk, &k->w) < 0) return -1;
    const int64_t *all = (const int64_t *)k->words.buf;
    if (!k->verify) return 0;
    for (int i = 1; i <= k->nmine; i++)
        if (memcmp(all, all + (Py_ssize_t)i * k->nwords, 3 * sizeof(int64_t))) return 1;
    return 0;
}

/* The peer's crossing for this call, its payload's buffer in `tb` (released by the caller with
 * *got): 0, or a result tuple to return (another call's crossing, or another size than
 * `nbytes`), or NULL on error (*got NULL). */
static PyObject *take_crossing(Call *k, Py_ssize_t nbytes, Py_buffer *tb, PyObject **got) {
    int gtag = 0;
    unsigned int gcall = 0;
    PyObject *payload = NULL;
    *got = wait_crossing(k->link, k->peer, k->ctx, k->keep, &k->w);
    if (!*got) return NULL;
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(*got, "iIO", &gtag, &gcall, &payload)) goto fail;
    if (gtag != k->tag || gcall != k->call) {
        out = Py_BuildValue("(iiI)", 2, gtag, gcall);
        goto fail;
    }
    if (PyObject_GetBuffer(payload, tb, PyBUF_SIMPLE) < 0) goto fail;
    if (tb->len != nbytes) {
        out = Py_BuildValue("(in)", 3, tb->len);
        PyBuffer_Release(tb);
        goto fail;
    }
    return Py_None; /* borrowed: the caller only compares */
fail:
    Py_CLEAR(*got);
    return out;
}

/* Barrier and Allreduce: the leaders' scheme. A new reference to the result, NULL on error. */
static PyObject *reduce_scheme(Call *k) {
    MPI_Request r;
    int allreduce = k->mode == ALLREDUCE;
    if (k->check != MPI_REQUEST_NULL) {
        int bad = check(k);
        if (bad < 0) return NULL;
        if (bad) return Py_BuildValue("(i)", 1);
    } else if (k->mode == BARRIER) {
        if (started("MPI_Ibarrier", MPI_Ibarrier(k->local, &r)) < 0 || wait_request(&r, &k->w) < 0)
            return NULL;
    }
    if (allreduce) { /* the native reduce to the leader */
        int rc;
        if (k->link != MPI_COMM_NULL)
            rc = MPI_Ireduce(k->have_sb ? k->sb.buf : MPI_IN_PLACE, k->rb.buf, k->count, k->dt,
                             k->op, 0, k->local, &r);
        else
            rc = MPI_Ireduce(k->have_sb ? k->sb.buf : k->rb.buf, NULL, k->count, k->dt, k->op, 0,
                             k->local, &r);
        if (started("MPI_Ireduce", rc) < 0 || wait_request(&r, &k->w) < 0) return NULL;
    }
    if (k->link != MPI_COMM_NULL) { /* the leaders' exchange */
        if (crank_send(k->link, WIRE_T_COLL, k->me, k->peer, k->tag, k->ctx, 0, k->call,
                       allreduce ? k->rb.buf : NULL, allreduce ? k->rb.len : 0) < 0)
            return NULL;
        Py_buffer tb;
        PyObject *got, *out = take_crossing(k, allreduce ? k->rb.len : 0, &tb, &got);
        if (!got) return out;
        if (allreduce) { /* theirs op mine, into mine: predefined ops commute */
            int rc = MPI_Reduce_local(tb.buf, k->rb.buf, k->count, k->dt, k->op);
            PyBuffer_Release(&tb);
            Py_DECREF(got);
            if (started("MPI_Reduce_local", rc) < 0) return NULL;
        } else {
            PyBuffer_Release(&tb);
            Py_DECREF(got);
        }
    }
    int rc = allreduce ? MPI_Ibcast(k->rb.buf, k->count, k->dt, 0, k->local, &r)
                       : MPI_Ibarrier(k->local, &r);
    if (started(allreduce ? "MPI_Ibcast" : "MPI_Ibarrier", rc) < 0 || wait_request(&r, &k->w) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Bcast with its data in the check (mmpi/_collectives/carried.py, Rule 1): the root sends it
 * across (`sends`), the other cluster's leader takes it from the link (`link` set), then every
 * rank of more than one runs the check with the data in its part if it has it, and takes it
 * from part `part`. A new reference to the result, NULL on error. */
static PyObject *bcast_carried(Call *k) {
    Py_ssize_t nb = k->rb.len;
    int have = k->sends;
    if (k->sends) {
        if (crank_send(k->link, WIRE_T_COLL, k->me, k->peer, k->tag, k->ctx, 0, k->call, k->rb.buf,
                       nb) < 0)
            return NULL;
    } else if (k->link != MPI_COMM_NULL) {
        Py_buffer tb;
        PyObject *got, *out = take_crossing(k, nb, &tb, &got);
        if (!got) return out;
        memcpy(k->rb.buf, tb.buf, (size_t)nb);
        PyBuffer_Release(&tb);
        Py_DECREF(got);
        have = 1;
    }
    if (k->check == MPI_REQUEST_NULL) Py_RETURN_NONE; /* a cluster of one */
    char *raw = (char *)k->words.buf;
    Py_ssize_t part = 8 * (Py_ssize_t)k->nwords;
    if (have) memcpy(raw + 24, k->rb.buf, (size_t)nb);
    int bad = check(k);
    if (bad < 0) return NULL;
    if (bad) return Py_BuildValue("(i)", 1);
    if (!have) memcpy(k->rb.buf, raw + part * (1 + k->part) + 24, (size_t)nb);
    Py_RETURN_NONE;
}

/* Reduce with the parts in the check (carried.py, Rule 2): every rank of more than one runs
 * the check with its data (`sb`, or at the root in place `rb`); the rank that sums (`part`: the
 * root, or the other cluster's leader) combines the parts in rank order; that leader sends its
 * cluster's partial to the root (`sends`), which takes it from the link (`link` set) and
 * combines it into `rb`. A new reference to the result, NULL on error. */
static PyObject *reduce_carried(Call *k) {
    const Py_buffer *mine = k->have_sb ? &k->sb : &k->rb;
    Py_ssize_t nb = mine->len;
    char *out = k->have_rb ? (char *)k->rb.buf : NULL, *scratch = NULL;
    if (!out && !(out = scratch = malloc(nb ? (size_t)nb : 1))) return PyErr_NoMemory();
    PyObject *result = NULL;
    if (k->check != MPI_REQUEST_NULL) {
        char *raw = (char *)k->words.buf;
        Py_ssize_t part = 8 * (Py_ssize_t)k->nwords;
        memcpy(raw + 24, mine->buf, (size_t)nb);
        int bad = check(k);
        if (bad) {
            if (bad > 0) result = Py_BuildValue("(i)", 1);
            goto done;
        }
        if (!k->part) goto none;
        memcpy(out, raw + part + 24, (size_t)nb);
        for (int i = 1; i < k->nmine; i++) {
            int rc = MPI_Reduce_local(raw + part * (1 + i) + 24, out, k->count, k->dt, k->op);
            if (started("MPI_Reduce_local", rc) < 0) goto done;
        }
    } else if (k->have_rb && k->have_sb) {
        memcpy(out, k->sb.buf, (size_t)nb);
    } else if (!k->have_rb) {
        memcpy(out, mine->buf, (size_t)nb);
    }
    if (k->sends) {
        if (crank_send(k->link, WIRE_T_COLL, k->me, k->peer, k->tag, k->ctx, 0, k->call, out, nb) < 0)
            goto done;
    } else if (k->link != MPI_COMM_NULL) { /* the root: theirs op mine (predefined ops commute) */
        Py_buffer tb;
        PyObject *got, *res = take_crossing(k, nb, &tb, &got);
        if (!got) {
            result = res;
            goto done;
        }
        int rc = MPI_Reduce_local(tb.buf, out, k->count, k->dt, k->op);
        PyBuffer_Release(&tb);
        Py_DECREF(got);
        if (started("MPI_Reduce_local", rc) < 0) goto done;
    }
none:
    result = Py_None;
    Py_INCREF(result);
done:
    free(scratch);
    return result;
}

/* Run the call `k` describes (its buffers got, its waiter's idle set): small_coll's and
 * cfront.c's common end. A new reference to the result, NULL on error. */
PyObject *ccoll_run(Call *k) {
    if (k->w.tests < 1) k->w.tests = 1;
    if (k->check != MPI_REQUEST_NULL &&
        (k->words.len < (Py_ssize_t)(sizeof(int64_t) * k->nwords * (k->nmine + 1)) ||
         k->nwords < 3)) {
        PyErr_SetString(PyExc_ValueError, "mmpi._backend._compiled.small_coll: words too short");
        return NULL;
    }
    Py_ssize_t carried = k->have_sb ? k->sb.len : k->rb.len;
    if ((k->mode == REDUCE ? !k->have_sb && !k->have_rb : k->mode != BARRIER && !k->have_rb) ||
        k->mode < BARRIER || k->mode > REDUCE ||
        (k->mode >= BCAST && carried > 8 * (Py_ssize_t)k->nwords - 24)) {
        PyErr_SetString(PyExc_ValueError, "mmpi._backend._compiled.small_coll: bad arguments");
        return NULL;
    }
    return k->mode == BCAST ? bcast_carried(k) : k->mode == REDUCE ? reduce_carried(k)
                                                                   : reduce_scheme(k);
}

PyObject *small_coll(PyObject *self, PyObject *args) {
    unsigned long long local_h, check_h, dtype_h, op_h, link_h;
    PyObject *sendobj, *recvobj, *idle;
    Call k;
    memset(&k, 0, sizeof k);
    if (!PyArg_ParseTuple(args, "iKKw*iiiOOiKKKiiiiIiiiiOO", &k.mode, &local_h, &check_h,
                          &k.words, &k.nwords, &k.nmine, &k.verify, &sendobj,
                          &recvobj, &k.count, &dtype_h, &op_h, &link_h, &k.me, &k.peer, &k.ctx,
                          &k.tag, &k.call, &k.sends, &k.part, &k.w.tests, &k.w.first, &idle,
                          &k.keep))
        return NULL;
    k.local = (MPI_Comm)local_h;
    k.check = check_h ? (MPI_Request)check_h : MPI_REQUEST_NULL;
    k.link = link_h ? (MPI_Comm)link_h : MPI_COMM_NULL;
    k.dt = (MPI_Datatype)dtype_h;
    k.op = (MPI_Op)op_h;
    k.w.idle = idle;
    PyObject *result = NULL;
    if (recvobj != Py_None) {
        /* a Bcast root's buffer may be read-only: it is only read */
        int flags = k.mode == BCAST && k.sends ? PyBUF_SIMPLE : PyBUF_SIMPLE | PyBUF_WRITABLE;
        if (PyObject_GetBuffer(recvobj, &k.rb, flags) < 0) goto done;
        k.have_rb = 1;
    }
    if (sendobj != Py_None) {
        if (PyObject_GetBuffer(sendobj, &k.sb, PyBUF_SIMPLE) < 0) goto done;
        k.have_sb = 1;
    }
    result = ccoll_run(&k);
done:
    if (k.have_sb) PyBuffer_Release(&k.sb);
    if (k.have_rb) PyBuffer_Release(&k.rb);
    PyBuffer_Release(&k.words);
    return result;
}
