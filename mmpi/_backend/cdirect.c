/* A blocking Alltoall of large blocks in one compiled call: the steps of
 * mmpi/_collectives/direct.py's Python rounds (the reference, and what finishes a call that
 * leaves the common case) with no interpreted step between them. Part of the module
 * `mmpi._backend._compiled` (mmpi/_backend/crank.c).
 *
 * On shared cores every turn a waiting rank takes costs the others its length; the call's
 * interpreted posting and wait rounds were most of what a bridged 64 KiB Alltoall cost above
 * a bare one (docs/performance.md, "Alltoall blocks straight to their ranks").
 *
 *   alltoall_blocks(local, check, words, nwords, nmine, sbuf, rbuf, heads, got, blk, mine,
 *                   obase, far, routes, xfers, ctrls, datas, contexts, vrank, cid, tag,
 *                   chunk, tests, say)
 *
 *   1. the cluster's check: the persistent allgather `check` (0: none), already started,
 *      waited for; each rank's first three words of `words` compared with this rank's;
 *   2. the native alltoallv of this cluster's blocks on `local` (`mine`: their ranks);
 *   3. for each rank far[j] of the other cluster an envelope (protocol T_LARGE) on link
 *      routes[j]'s control channel (from `heads`, 40 bytes each, which must outlive the
 *      sends) and its block, sbuf's block obase + j, on its data channel tagged xfers[j]
 *      (one chunk: blk <= chunk);
 *   4. rounds: each link drained (crank_drain); an envelope of this call's (T_LARGE, K_P2P, no
 *      flags, context `cid`, tag `tag`, blk bytes) from a rank still awaited (got[j] 0, a byte
 *      per far rank that Python shares: 1 where it receives the block itself) has its
 *      block's receive posted at once into rbuf (got[j] set to TAKEN); everything else goes to `say.hand(link, items)` in
 *      order (the engine's hand-on), also when nothing is left. A round that finds nothing
 *      tests the requests once every block is posted, and yields the CPU every `tests` such
 *      rounds; once per SAY_EVERY seconds (ccoll.h) instead of a yield, or each round while
 *      the back-off naps, `say.say()` gives the engine's say (its progress, liveness,
 *      back-off): bit 0 of its answer, it naps.
 * `say.hand` and `say.say` answer with bit 1 set when a message from an awaited rank waits in
 * the engine's queues (an engine round took its envelope): the call then stops taking
 * envelopes and returns what Python must finish the reference's way.
 * Returns (1,) if the check found a mismatch (nothing sent; the words hold everyone's), else
 * (0, taken, pending): the ranks whose blocks it received (got TAKEN), and None when every
 * request is complete, or the handles of those still pending (the call gave up).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ccoll.h" /* ccoll_say_due, ccoll_yield, ccoll_test */

/* mmpi/_backend/crank.c */
extern PyObject *crank_mpi_error(const char *call, int rc);
extern PyObject *crank_drain(MPI_Comm comm, PyObject *contexts);
extern void crank_envelope(char *buf, int src, int dst, int tag, int ctx, int flags,
                           uint64_t nbytes, uint32_t chunk, uint32_t xfer, uint32_t aux);

/* mmpi/wire/protocol.py */
#include "mmpi_wire.h"
#define TAKEN 2 /* got[j]: far[j]'s block's receive posted by this call */

typedef struct {
    PyObject *say;
    int tests, napping, giveup;
    double say_at;
} Rounds;

/* After rounds that found nothing: yield, or let the engine have its say. -1 on error. */
static int quiet_round(Rounds *w) {
    if (!w->napping && !ccoll_say_due(&w->say_at)) {
        ccoll_yield();
        return 0;
    }
    PyObject *got = PyObject_CallMethod(w->say, "say", NULL);
    if (!got) return -1;
    long bits = PyLong_AsLong(got);
    Py_DECREF(got);
    if (bits == -1 && PyErr_Occurred()) return -1;
    w->napping = bits & 1;
    w->giveup |= (bits & 2) != 0;
    return 0;
}

static int test_check(MPI_Request *r, Rounds *w) { /* 0 when complete, -1 on error */
    for (;;) {
        int done = ccoll_test(r, w->napping ? 1 : w->tests); /* a test per nap once napping */
        if (done) return done < 0 ? -1 : 0;
        if (quiet_round(w) < 0) return -1;
    }
}

typedef struct {
    Py_ssize_t nfar, blk, obase, awaited;
    long *far;       /* world ranks of the other cluster's ranks, in their order */
    char *got;       /* got[j]: 0 awaited, 1 Python's already, TAKEN posted here */
    char *rbuf;
    int cid, tag;
    MPI_Comm *datas;
    MPI_Request *reqs;
    int nreqs;
} Blocks;

/* Whether drained item (tag, bytearray, src, utag, ctx) is the envelope of an awaited block:
 * its receive posted (1), not one (0), or -1 on error. */
static int take(Blocks *b, int link, PyObject *item) {
    PyObject *ba = PyTuple_GET_ITEM(item, 1);
    if (PyLong_AsLong(PyTuple_GET_ITEM(item, 0)) != WIRE_T_LARGE ||
        PyLong_AsLong(PyTuple_GET_ITEM(item, 2)) >= 0 || !PyByteArray_Check(ba) ||
        PyByteArray_GET_SIZE(ba) != WIRE_ENVELOPE_SIZE)
        return PyErr_Occurred() ? -1 : 0;
    const char *e = PyByteArray_AS_STRING(ba);
    uint16_t flags;
    int32_t src, tag, cid;
    uint64_t nbytes;
    uint32_t chunk, xfer;
    memcpy(&flags, e + WIRE_OFF_FLAGS, 2);
    memcpy(&src, e + WIRE_OFF_SRC, 4);
    memcpy(&tag, e + WIRE_OFF_TAG, 4);
    memcpy(&cid, e + WIRE_OFF_CONTEXT, 4);
    memcpy(&nbytes, e + WIRE_OFF_NBYTES, 8);
    memcpy(&chunk, e + WIRE_OFF_CHUNK, 4);
    memcpy(&xfer, e + WIRE_OFF_XFER, 4);
    if (e[WIRE_OFF_VERSION] != WIRE_VERSION || e[WIRE_OFF_KIND] != WIRE_K_P2P || flags || cid != b->cid ||
        tag != b->tag ||
        nbytes != (uint64_t)b->blk || chunk < (uint64_t)b->blk)
        return 0;
    for (Py_ssize_t j = 0; j < b->nfar; j++) {
        if (b->far[j] != src || b->got[j]) continue;
        int rc = MPI_Irecv(b->rbuf + (b->obase + j) * b->blk, (int)b->blk, MPI_BYTE, 0,
                           (int)xfer, b->datas[link], &b->reqs[b->nreqs]);
        if (rc != MPI_SUCCESS) {
            crank_mpi_error("MPI_Irecv", rc);
            return -1;
        }
        b->nreqs++;
        b->got[j] = TAKEN;
        b->awaited--;
        return 1;
    }
    return 0;
}

/* Drain every link once: 1 if anything came, 0 if not, -1 on error. */
static int drain_links(Blocks *b, MPI_Comm *ctrls, int nlinks, PyObject *contexts, Rounds *w) {
    int came = 0;
    for (int i = 0; i < nlinks; i++) {
        PyObject *got = crank_drain(ctrls[i], contexts);
        if (!got) return -1;
        if (got == Py_None) {
            Py_DECREF(got);
            continue;
        }
        came = 1;
        PyObject *left = PyList_New(0);
        for (Py_ssize_t k = 0; left && k < PyList_GET_SIZE(got); k++) {
            PyObject *item = PyList_GET_ITEM(got, k);
            int t = b->awaited && !w->giveup ? take(b, i, item) : 0;
            if (t < 0 || (!t && PyList_Append(left, item) < 0)) Py_CLEAR(left);
        }
        Py_DECREF(got);
        if (!left) return -1;
        PyObject *r = PyObject_CallMethod(w->say, "hand", "iN", i, left);
        if (!r) return -1;
        long bits = PyLong_AsLong(r);
        Py_DECREF(r);
        if (bits == -1 && PyErr_Occurred()) return -1;
        w->giveup |= (bits & 2) != 0;
        if (w->napping) w->napping = 0; /* something came: poll eagerly again */
    }
    return came;
}

static int handles(PyObject *t, MPI_Comm *into, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        into[i] = (MPI_Comm)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, i));
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

static PyObject *run(Blocks *b, Py_buffer *sb, Py_buffer *words, int nwords, int nmine,
                     MPI_Comm local, MPI_Request check, PyObject *mine, PyObject *routes,
                     PyObject *xfers, MPI_Comm *ctrls, int nlinks, PyObject *contexts,
                     int vrank, Py_ssize_t chunk, Rounds *w, char *heads, int *counts,
                     int *displs) {
    if (check != MPI_REQUEST_NULL) {
        if (test_check(&check, w) < 0) return NULL;
        const int64_t *x = words->buf;
        for (int i = 1; i <= nmine; i++)
            if (memcmp(x, x + (Py_ssize_t)i * nwords, 3 * sizeof(int64_t)))
                return Py_BuildValue("(i)", 1);
    }
    for (int i = 0; i < nmine; i++) {
        long r = PyLong_AsLong(PyTuple_GET_ITEM(mine, i));
        if (r == -1 && PyErr_Occurred()) return NULL;
        counts[i] = (int)b->blk;
        displs[i] = (int)(r * b->blk);
    }
    int rc = MPI_Ialltoallv(sb->buf, counts, displs, MPI_BYTE, b->rbuf, counts, displs,
                            MPI_BYTE, local, &b->reqs[b->nreqs]);
    if (rc != MPI_SUCCESS) return crank_mpi_error("MPI_Ialltoallv", rc);
    b->nreqs++;
    for (Py_ssize_t j = 0; j < b->nfar; j++) {
        long link = PyLong_AsLong(PyTuple_GET_ITEM(routes, j));
        long xfer = PyLong_AsLong(PyTuple_GET_ITEM(xfers, j));
        if (PyErr_Occurred()) return NULL;
        if (link < 0 || link >= nlinks) return PyErr_Format(PyExc_ValueError, "bad route");
        char *e = heads + j * WIRE_ENVELOPE_SIZE;
        crank_envelope(e, vrank, (int)b->far[j], b->tag, b->cid, 0, (uint64_t)b->blk,
                       (uint32_t)chunk, (uint32_t)xfer, 0);
        rc = MPI_Isend(e, WIRE_ENVELOPE_SIZE, MPI_BYTE, 0, WIRE_T_LARGE, ctrls[link], &b->reqs[b->nreqs]);
        if (rc == MPI_SUCCESS) b->nreqs++;
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend((char *)sb->buf + (b->obase + j) * b->blk, (int)b->blk, MPI_BYTE, 0,
                           (int)xfer, b->datas[link], &b->reqs[b->nreqs]);
        if (rc != MPI_SUCCESS) return crank_mpi_error("MPI_Isend", rc);
        b->nreqs++;
    }
    for (long quiet = 0; !w->giveup;) {
        int came = drain_links(b, ctrls, nlinks, contexts, w);
        if (came < 0) return NULL;
        if (came) continue;
        if (!b->awaited) {
            int flag = 0;
            rc = MPI_Testall(b->nreqs, b->reqs, &flag, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS) return crank_mpi_error("MPI_Testall", rc);
            if (flag) break;
        }
        if (++quiet % w->tests && !w->napping) continue; /* rounds per yield, as native waits */
        if (quiet_round(w) < 0) return NULL;
    }
    PyObject *taken = PyList_New(0), *pending = Py_None;
    for (Py_ssize_t j = 0; taken && j < b->nfar; j++) {
        PyObject *r = b->got[j] == TAKEN ? PyLong_FromLong(b->far[j]) : NULL;
        if (b->got[j] == TAKEN && (!r || PyList_Append(taken, r) < 0)) Py_CLEAR(taken);
        Py_XDECREF(r);
    }
    if (taken && w->giveup) {
        pending = PyList_New(0);
        for (int i = 0; pending && i < b->nreqs; i++) {
            if (b->reqs[i] == MPI_REQUEST_NULL) continue;
            PyObject *h = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)b->reqs[i]);
            if (!h || PyList_Append(pending, h) < 0) Py_CLEAR(pending);
            Py_XDECREF(h);
        }
    } else {
        Py_INCREF(pending);
    }
    if (!taken || !pending) {
        Py_XDECREF(taken);
        Py_XDECREF(pending);
        return NULL;
    }
    return Py_BuildValue("(iNN)", 0, taken, pending);
}

PyObject *alltoall_blocks(PyObject *self, PyObject *args) {
    unsigned long long local_h, check_h;
    Py_buffer words, sb, rb, hb, gb;
    int nwords, nmine, vrank, cid, tag;
    Py_ssize_t blk, obase, chunk;
    PyObject *mine, *far, *routes, *xfers, *ctrls_t, *datas_t, *contexts;
    Rounds w = {0};
    Blocks b = {0};
    if (!PyArg_ParseTuple(args, "KKw*iiy*w*w*w*nO!nO!O!O!O!O!O!iiiniO", &local_h, &check_h,
                          &words, &nwords, &nmine, &sb, &rb, &hb, &gb, &blk, &PyTuple_Type, &mine,
                          &obase, &PyTuple_Type, &far, &PyTuple_Type, &routes, &PyTuple_Type,
                          &xfers, &PyTuple_Type, &ctrls_t, &PyTuple_Type, &datas_t,
                          &PyDict_Type, &contexts, &vrank, &cid, &tag, &chunk, &w.tests,
                          &w.say))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t nfar = PyTuple_GET_SIZE(far), nlinks = PyTuple_GET_SIZE(ctrls_t);
    if (w.tests < 1) w.tests = 1;
    if (PyTuple_GET_SIZE(mine) != nmine || PyTuple_GET_SIZE(routes) != nfar ||
        PyTuple_GET_SIZE(xfers) != nfar || PyTuple_GET_SIZE(datas_t) != nlinks || nlinks < 1 ||
        blk < 1 || blk > chunk || (obase + nfar) * blk > INT_MAX ||
        (Py_ssize_t)(nmine + obase + nfar) * blk > INT_MAX || sb.len < (obase + nfar) * blk ||
        rb.len < (obase + nfar) * blk || hb.len < nfar * WIRE_ENVELOPE_SIZE || gb.len != nfar ||
        (check_h && words.len < (Py_ssize_t)sizeof(int64_t) * nwords * (nmine + 1)) ||
        nwords < 3) {
        PyErr_SetString(PyExc_ValueError, "mmpi._backend._compiled.alltoall_blocks: bad arguments");
        goto done;
    }
    MPI_Comm *ctrls = malloc(2 * nlinks * sizeof(MPI_Comm));
    b.far = malloc((nfar + 1) * sizeof(long));
    b.reqs = malloc((3 * nfar + 1) * sizeof(MPI_Request));
    int *counts = malloc(2 * (nmine + 1) * sizeof(int));
    if (!ctrls || !b.far || !b.reqs || !counts) {
        PyErr_NoMemory();
    } else if (handles(ctrls_t, ctrls, nlinks) == 0 &&
               handles(datas_t, ctrls + nlinks, nlinks) == 0) {
        for (Py_ssize_t j = 0; j < nfar && !PyErr_Occurred(); j++)
            b.far[j] = PyLong_AsLong(PyTuple_GET_ITEM(far, j));
        if (!PyErr_Occurred()) {
            b.nfar = nfar;
            b.got = gb.buf;
            for (Py_ssize_t j = 0; j < nfar; j++) b.awaited += !b.got[j];
            b.blk = blk;
            b.obase = obase;
            b.rbuf = rb.buf;
            b.cid = cid;
            b.tag = tag;
            b.datas = ctrls + nlinks;
            result = run(&b, &sb, &words, nwords, nmine, (MPI_Comm)local_h,
                         check_h ? (MPI_Request)check_h : MPI_REQUEST_NULL, mine, routes, xfers,
                         ctrls, (int)nlinks, contexts, vrank, chunk, &w, hb.buf, counts,
                         counts + nmine + 1);
        }
    }
    free(ctrls);
    free(b.far);
    free(b.reqs);
    free(counts);
done:
    PyBuffer_Release(&words);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&hb);
    PyBuffer_Release(&gb);
    return result;
}
