/* What ccoll.c (a small collective's steps) shares with cfront.c (its common calls' front):
 * the description of one call. Part of the module `mmpi._backend._compiled`. */
#ifndef MMPI_CCOLL_H
#define MMPI_CCOLL_H

#include <Python.h>
#include <mpi.h>
#include <sched.h>
#include <time.h>

enum { BARRIER, ALLREDUCE, BCAST, REDUCE };

/* A long wait's rounds give the engine its say (back-off, drains, liveness) once per this
 * many seconds: a say is interpreted, and every turn a waiting rank takes on shared cores
 * costs the others its length (docs/performance.md, "Small collectives"). */
#define SAY_EVERY 0.0005

static inline double ccoll_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whether the engine's say is due by the clock (then the next is SAY_EVERY from now); a
 * `*say_at` of 0 starts the clock. */
static inline int ccoll_say_due(double *say_at) {
    double now = ccoll_now();
    if (*say_at == 0) *say_at = now + SAY_EVERY;
    if (now < *say_at) return 0;
    *say_at = now + SAY_EVERY;
    return 1;
}

/* Yield the CPU, the GIL released meanwhile. */
static inline void ccoll_yield(void) {
    Py_BEGIN_ALLOW_THREADS
    sched_yield();
    Py_END_ALLOW_THREADS
}

typedef struct {
    int tests, first;
    PyObject *idle;
    long round, says;
    double say_at;
    int napping, crossing;
    int idled; /* idle() has run in this call: a drain may have kept the peer's crossing */
} Waiter;

typedef struct {
    int mode, nwords, nmine, verify, count, me, peer, ctx, tag, sends, part;
    unsigned int call;
    MPI_Comm local, link; /* link: MPI_COMM_NULL where this rank does not cross */
    MPI_Request check;    /* MPI_REQUEST_NULL: no check */
    MPI_Datatype dt;
    MPI_Op op;
    Py_buffer words, sb, rb;
    int have_sb, have_rb;
    PyObject *keep;
    Waiter w;
} Call;

/* Test native request `r` up to `tests` times: 1 once complete, 0 if not yet, -1 on error. */
int ccoll_test(MPI_Request *r, int tests);

/* Run the call `k` describes: None when done, a tuple for Python to raise (see ccoll.c), or
 * NULL with an exception set. Its buffers stay the caller's to release. */
PyObject *ccoll_run(Call *k);

#endif
