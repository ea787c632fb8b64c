/* The collectives' floor: mmpi's bridged Allreduce and Bcast algorithms in C, no Python anywhere.
 *
 * Three jobs joined as mmpi's are (Open_port / Comm_accept / Comm_connect): a one-process relay
 * and two 2-process clusters, "low" and "high". The relay moves every message it gets from one
 * cluster to the other (Improbe, receive, send on; a pool of whole-message buffers), polling
 * with sched_yield as every mmpi process does; the clusters wait the same way. The algorithms
 * are the library's (mmpi/_collectives.py):
 *
 *   allreduce, under 512 KiB: native reduce to local rank 0, the two leaders swap their
 *              partial results through the relay and add, native bcast in each cluster;
 *   allreduce, 512 KiB and up: native reduce-scatter (local rank i gets share i), local rank i
 *              of each cluster swaps share i with local rank i of the other, adds, and a
 *              native in-place allgather puts the shares together;
 *   bcast from low rank 0: it sends the data (from 512 KiB: share i to high rank i) and
 *              broadcasts in its cluster; the high cluster bcasts it (from 512 KiB: allgathers
 *              the shares).
 *   alltoall, BYTES per pair of ranks (mmpi's scheme from 32 KiB blocks): every rank sends
 *              each block for the other cluster straight to its rank through the relay, and
 *              swaps the local blocks natively.
 *
 *   coll relay PORTDIR OP ITERS BYTES     (mpiexec -n 1)
 *   coll low|high PORTDIR OP ITERS BYTES  (mpiexec -n 2 each, after the relay)
 *   coll native - OP ITERS BYTES          (mpiexec -n 4: MPICH's own blocking collective, as
 *                                          mmpi-bench's native baseline calls it)
 *
 * CHECK=1 in the environment adds mmpi's collective check to the bridged algorithms (see
 * check): the floor for what mmpi does, mismatch detection included.
 * Each call is timed alone, with an untimed synchronisation after it, as mmpi-bench times
 * collectives; the figure (us per call) is the slowest rank's, printed per cluster (the
 * slower cluster's is the result). OP is allreduce, bcast or alltoall. TESTS and SPLIT in the
 * environment change the tests per sched_yield (10) and where the shares start (512 KiB);
 * PHASES=1 prints the time of each phase of the shares' allreduce, per rank.
 * Build: mpicc_abi -O2 -o coll coll.c. Run: `bash run.sh coll [ROUNDS]` (see run.sh).
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs.h"

static long SPLIT = 512 << 10;  /* SPLIT=bytes in the environment: where the shares start */
#define WARMUP 50
#define TO 10     /* tag of a message for remote local rank r: TO + r; the relay sends it on
                     with the sender's local rank as its tag */
#define POOL 16

static int tests = 10;  /* TESTS: tests per sched_yield, as mmpi's waits (MMPI_TESTS_PER_YIELD) */
static int check_on = 0; /* CHECK=1: each call first runs mmpi's collective check (see check) */

static void wait_req(MPI_Request *r) {
  int flag = 0;
  for (int i = 1;; i++) {
    MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    if (flag) return;
    if (i % tests == 0) sched_yield();
  }
}

static void wait_all(int n, MPI_Request *q) {
  int flag = 0;
  for (int i = 1;; i++) {
    MPI_Testall(n, q, &flag, MPI_STATUSES_IGNORE);
    if (flag) return;
    if (i % tests == 0) sched_yield();
  }
}

enum { ALLREDUCE, BCAST, ALLTOALL };

/* Messages one call sends across, in both directions together, and the 2 of the untimed
 * synchronisation after it (see settle). */
static long per_call(int op, int bytes) {
  if (op == ALLREDUCE) return (bytes >= SPLIT ? 4 : 2) + 2;
  if (op == BCAST) return (bytes >= SPLIT ? 2 : 1) + 2;
  return 8 + 2;  /* each of 4 ranks, a block to each of 2 remote ranks */
}

/* Between timed calls, as mmpi-bench's Barrier between calls: the two clusters' leaders swap a
 * byte through the relay between two native barriers. */
static void settle(int me, MPI_Comm w, MPI_Comm x) {
  char a = 0, b;
  MPI_Barrier(w);
  if (me == 0) {
    MPI_Request q[2];
    MPI_Irecv(&b, 1, MPI_BYTE, 0, MPI_ANY_TAG, x, q);
    MPI_Isend(&a, 1, MPI_BYTE, 0, TO, x, q + 1);
    wait_all(2, q);
  }
  MPI_Barrier(w);
}

static void relay(MPI_Comm lo, MPI_Comm hi, long count, int bytes) {
  char *buf[POOL];
  MPI_Request sq[POOL];
  for (int i = 0; i < POOL; i++) { buf[i] = malloc(bytes); sq[i] = MPI_REQUEST_NULL; }
  MPI_Comm side[2] = {lo, hi};
  long moved = 0;
  int next = 0;
  while (moved < count) {
    int did = 0;
    for (int s = 0; s < 2; s++) {
      MPI_Message m; MPI_Status st; int flag = 0;
      MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, side[s], &flag, &m, &st);
      if (!flag) continue;
      int k = next; next = (next + 1) % POOL;
      wait_req(&sq[k]);  /* the pool is larger than what one call has in flight */
      int n; MPI_Get_count(&st, MPI_BYTE, &n);
      MPI_Mrecv(buf[k], n, MPI_BYTE, &m, &st);
      /* on to the addressed rank, tagged with the sender's local rank */
      MPI_Isend(buf[k], n, MPI_BYTE, st.MPI_TAG - TO, st.MPI_SOURCE, side[!s], &sq[k]);
      moved++; did = 1;
    }
    if (!did) sched_yield();
  }
  wait_all(POOL, sq);
  for (int i = 0; i < POOL; i++) free(buf[i]);
}

/* mmpi's collective check (mmpi/_collectives/common.py, Rule 3): a persistent allgather of
 * each rank's 11 words (the call, its root, its size, then up to 64 bytes of data), the
 * first three compared. A small Bcast carries its data in it (`data`, to `at` of rank
 * `from`'s part), and makes no native bcast of its own (mmpi/_collectives/carried.py). */
static MPI_Request cr = MPI_REQUEST_NULL;  /* the check's allgather, freed at the end */
static void check(MPI_Comm w, int kind, int bytes, const char *data, char *at, int from) {
  static long long mine[11], all[22];
  if (cr == MPI_REQUEST_NULL)
    MPI_Allgather_init(mine, 11, MPI_LONG_LONG, all, 11, MPI_LONG_LONG, w, MPI_INFO_NULL, &cr);
  mine[0] = kind; mine[1] = -1; mine[2] = bytes;
  if (data) memcpy(mine + 3, data, bytes);
  MPI_Start(&cr); wait_req(&cr);
  if (memcmp(all, all + 11, 24)) { fprintf(stderr, "coll: check mismatch\n"); MPI_Abort(w, 4); }
  if (at) memcpy(at, all + 11 * from + 3, bytes);
}

/* Time spent in the shares' phases: reduce-scatter, exchange, add, allgather (PHASES=1). */
static double phase[4];

/* One call of the bridged algorithm on a 2-rank cluster; x: the intercomm to the relay. */
static void allreduce(float *s, float *r, float *theirs, int n, int me, MPI_Comm w, MPI_Comm x) {
  MPI_Request q[2];
  if ((long)n * 4 >= SPLIT) {
    int half = n / 2;
    float *share = r + (long)me * half;
    int counts[2] = {half, half};  /* MPICH's Ireduce_scatter_block is 10x slower here */
    double t[5];
    t[0] = MPI_Wtime();
    MPI_Ireduce_scatter(s, share, counts, MPI_FLOAT, MPI_SUM, w, q); wait_req(q);
    t[1] = MPI_Wtime();
    MPI_Irecv(theirs, half, MPI_FLOAT, 0, MPI_ANY_TAG, x, q);
    MPI_Isend(share, half, MPI_FLOAT, 0, TO + me, x, q + 1);
    wait_all(2, q);
    t[2] = MPI_Wtime();
    for (int i = 0; i < half; i++) share[i] += theirs[i];
    t[3] = MPI_Wtime();
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, half, MPI_FLOAT, w, q); wait_req(q);
    t[4] = MPI_Wtime();
    for (int i = 0; i < 4; i++) phase[i] += t[i + 1] - t[i];
    return;
  }
  if (check_on) check(w, ALLREDUCE, n * 4, NULL, NULL, 0);
  MPI_Ireduce(s, r, n, MPI_FLOAT, MPI_SUM, 0, w, q); wait_req(q);
  if (me == 0) {
    MPI_Irecv(theirs, n, MPI_FLOAT, 0, MPI_ANY_TAG, x, q);
    MPI_Isend(r, n, MPI_FLOAT, 0, TO, x, q + 1);
    wait_all(2, q);
    for (int i = 0; i < n; i++) r[i] += theirs[i];
  }
  MPI_Ibcast(r, n, MPI_FLOAT, 0, w, q); wait_req(q);
}

static void bcast(char *b, int bytes, int low, int me, MPI_Comm w, MPI_Comm x) {
  MPI_Request q[3];
  int split = bytes >= SPLIT, half = bytes / 2;
  if (check_on && bytes <= 64) {  /* the data in the check */
    if (low && me == 0) {
      MPI_Isend(b, bytes, MPI_BYTE, 0, TO, x, q);
      check(w, BCAST, bytes, b, NULL, 0);
      wait_req(q);
    } else if (!low && me == 0) {
      MPI_Irecv(b, bytes, MPI_BYTE, 0, MPI_ANY_TAG, x, q); wait_req(q);
      check(w, BCAST, bytes, b, NULL, 0);
    } else {
      check(w, BCAST, bytes, NULL, b, 0);
    }
    return;
  }
  if (low) {
    int ns = 0;
    if (me == 0 && split) {
      MPI_Isend(b, half, MPI_BYTE, 0, TO, x, q + 1);
      MPI_Isend(b + half, half, MPI_BYTE, 0, TO + 1, x, q + 2);
      ns = 2;
    } else if (me == 0) {
      MPI_Isend(b, bytes, MPI_BYTE, 0, TO, x, q + 1);
      ns = 1;
    }
    MPI_Ibcast(b, bytes, MPI_BYTE, 0, w, q); wait_req(q);
    wait_all(ns, q + 1);
  } else if (split) {
    MPI_Irecv(b + (long)me * half, half, MPI_BYTE, 0, MPI_ANY_TAG, x, q); wait_req(q);
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, half, MPI_BYTE, w, q); wait_req(q);
  } else {
    if (me == 0) { MPI_Irecv(b, bytes, MPI_BYTE, 0, MPI_ANY_TAG, x, q); wait_req(q); }
    MPI_Ibcast(b, bytes, MPI_BYTE, 0, w, q); wait_req(q);
  }
}

/* Blocks of `bytes` for world ranks 0..3 (low 0, 1, high 0, 1) in `s`, from them in `r`. */
static void alltoall(char *s, char *r, int bytes, int low, int me, MPI_Comm w, MPI_Comm x) {
  MPI_Request q[6];
  int mine = (low ? 0 : 2) + me, peer = (low ? 0 : 2) + !me, far = low ? 2 : 0;
  long b = bytes;
  for (int i = 0; i < 2; i++)  /* remote local rank i's block comes tagged i */
    MPI_Irecv(r + (far + i) * b, bytes, MPI_BYTE, 0, i, x, q + i);
  MPI_Irecv(r + peer * b, bytes, MPI_BYTE, !me, 0, w, q + 2);
  for (int i = 0; i < 2; i++)
    MPI_Isend(s + (far + i) * b, bytes, MPI_BYTE, 0, TO + i, x, q + 3 + i);
  MPI_Isend(s + peer * b, bytes, MPI_BYTE, !me, 0, w, q + 5);
  memcpy(r + mine * b, s + mine * b, bytes);
  wait_all(6, q);
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: coll relay|low|high|native PORTDIR allreduce|bcast|alltoall ITERS BYTES\n");
    return 2;
  }
  if (strcmp(argv[1], "relay") && strcmp(argv[1], "low") && strcmp(argv[1], "high") && strcmp(argv[1], "native")) {
    fprintf(stderr, "coll: unknown role %s (one of relay|low|high|native)\n", argv[1]);
    return 2;
  }
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  /* as mpi4py and mmpi: MPICH then yields in blocking waits */
  const char *role = argv[1], *dir = argv[2], *op = argv[3];
  int iters = atoi(argv[4]), bytes = atoi(argv[5]), is_ar = !strcmp(op, "allreduce");
  int kind = is_ar ? ALLREDUCE : !strcmp(op, "bcast") ? BCAST : ALLTOALL;
  if (kind == ALLTOALL && strcmp(op, "alltoall")) {
    fprintf(stderr, "coll: unknown OP %s\n", op);
    return 2;
  }
  int total = iters + WARMUP, me;
  if (getenv("TESTS")) tests = atoi(getenv("TESTS"));
  if (getenv("CHECK")) check_on = atoi(getenv("CHECK"));
  if (getenv("SPLIT")) SPLIT = atol(getenv("SPLIT"));
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  double t0 = 0;
  if (!strcmp(role, "native")) {
    char *s = calloc(4L * bytes, 1), *r = calloc(4L * bytes, 1);
    double spent = 0, most;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < total; i++) {
      t0 = MPI_Wtime();
      if (is_ar) MPI_Allreduce(s, r, bytes / 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (kind == BCAST) MPI_Bcast(s, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
      else MPI_Alltoall(s, bytes, MPI_BYTE, r, bytes, MPI_BYTE, MPI_COMM_WORLD);
      if (i >= WARMUP) spent += MPI_Wtime() - t0;
      MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Reduce(&spent, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (me == 0) printf("C native %s %d B on 4 ranks: %.1f us\n", op, bytes, most / iters * 1e6);
    MPI_Finalize();
    return 0;
  }
  if (!strcmp(role, "relay")) {
    MPI_Comm c[2];
    accept_clusters(dir, c);
    relay(c[0], c[1], total * per_call(kind, bytes), bytes);
    MPI_Comm_disconnect(&c[0]); MPI_Comm_disconnect(&c[1]);
    MPI_Finalize();
    return 0;
  }
  int low = !strcmp(role, "low");
  MPI_Comm x = connect_cluster(dir, role);
  int n = bytes / 4;
  float *s = malloc((long)n * 4 + 4), *r = malloc((long)n * 4 + 4), *theirs = malloc((long)n * 4 + 4);
  for (int i = 0; i < n; i++) s[i] = (float)(low * 2 + me + 1);  /* 1, 2 | 3, 4: sum 10 */
  char *b = calloc(4L * bytes, 1), *a = calloc(4L * bytes, 1);
  if (low && me == 0) memset(b, 7, bytes);
  int world = (low ? 0 : 2) + me;
  if (kind == ALLTOALL)  /* the block for rank j carries 16 * (sender) + j */
    for (int j = 0; j < 4; j++) memset(b + (long)j * bytes, 16 * world + j, bytes);
  double spent = 0, most;
  for (int i = 0; i < total; i++) {
    t0 = MPI_Wtime();
    if (is_ar) allreduce(s, r, theirs, n, me, MPI_COMM_WORLD, x);
    else if (kind == BCAST) bcast(b, bytes, low, me, MPI_COMM_WORLD, x);
    else alltoall(b, a, bytes, low, me, MPI_COMM_WORLD, x);
    if (i >= WARMUP) spent += MPI_Wtime() - t0;
    settle(me, MPI_COMM_WORLD, x);
  }
  if (getenv("PHASES") && is_ar && bytes >= SPLIT)
    printf("%s rank %d, us per call: reduce-scatter %.0f, exchange %.0f, add %.0f, allgather %.0f\n",
           role, me, phase[0] / total * 1e6, phase[1] / total * 1e6, phase[2] / total * 1e6,
           phase[3] / total * 1e6);
  MPI_Reduce(&spent, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  double t = most / iters * 1e6;  /* the slower rank of this cluster; run.sh takes the max */
  /* the result is checked, so that a broken algorithm cannot pass for a fast one */
  int bad = is_ar ? (n > 0 && (r[0] != 10.0f || r[n - 1] != 10.0f)) : (b[0] != 7 || b[bytes - 1] != 7);
  if (kind == ALLTOALL) {
    bad = 0;
    for (int j = 0; j < 4; j++)
      bad |= a[(long)j * bytes] != 16 * j + world || a[(long)j * bytes + bytes - 1] != 16 * j + world;
  }
  if (bad) { fprintf(stderr, "coll %s %s: wrong result on %s rank %d\n", op, argv[5], role, me); MPI_Abort(MPI_COMM_WORLD, 3); }
  if (me == 0) printf("C relayed %s %d B on 2+2 ranks%s, %s cluster: %.1f us\n", op, bytes, check_on ? " with the check" : "", role, t);
  if (cr != MPI_REQUEST_NULL) MPI_Request_free(&cr);
  MPI_Comm_disconnect(&x);
  MPI_Finalize();
  return 0;
}
