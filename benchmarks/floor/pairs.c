/* The concurrent pairs' floor: N cross-cluster osu_bw streams through one relay, in C.
 *
 * mmpi-bench's `pairs` target compares the aggregate bandwidth of 4 concurrent pairs (low rank
 * i -> high rank i, 4+4 ranks and a forwarder: 9 processes on this machine's 2 cores) with that
 * of 1 pair (3 processes). This is the same traffic with no Python anywhere, so that the ratio
 * any relay gets here is known. Three jobs joined as mmpi's are (Open_port / Comm_accept /
 * Comm_connect): a one-process relay and two N-process clusters.
 *
 * What moves is what mmpi moves (mmpi/_engine/engine.py, forwarder/_relay.py): every message is sent
 * as CHUNK-byte pieces (1 MiB); the relay receives each piece into a buffer of a bounded pool
 * (POOL buffers: mmpi's 4 for one pair, 8 for several) and sends it on to the addressed rank,
 * so each byte is copied twice on its way. Each low rank sends windows of 64 messages then
 * waits for a one-byte ack from its high rank (osu_bw, as mmpi-bench). Every process waits as
 * mmpi's do: tests and sched_yield for 5 ms of quiet, then naps growing from 20 us to 250 us
 * (NAPS=0 in the environment: yield only). POOL=n: the relay's pool of buffers instead.
 *
 *   pairs relay PORTDIR N WINDOWS BYTES   (mpiexec -n 1)
 *   pairs low|high PORTDIR N WINDOWS BYTES (mpiexec -n N each, after the relay)
 *
 * Prints, from low rank 0, the aggregate MB/s and messages per second: every pair's bytes (and
 * messages) over the slowest pair's time (two warm-up windows excluded). Build: mpicc_abi -O2
 * -o pairs pairs.c. Run: `bash run.sh pairs [ROUNDS]`, which alternates 1 and 4 pairs, or
 * `bash run.sh rate [ROUNDS]`: small messages (osu_mbw_mr's message rate), the relay holding
 * up to 64 in flight (POOL=64) as mmpi's forwarder holds its eager messages.
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jobs.h"

#define WINDOW 64
#define WARMUP 2
#define CHUNK (1 << 20)
#define ACK (1 << 14)  /* tag bit (TAG_UB is at least 32767) of an ack (high -> low); the rest of a tag is a local rank */

static int naps = 1;

/* mmpi's back-off (mmpi/_backoff.py): yield for 5 ms of quiet, then naps of 20..250 us. */
typedef struct { double since; long nap_ns; } backoff;

static void idle(backoff *b) {
  double now = MPI_Wtime();
  if (b->since == 0) { b->since = now; b->nap_ns = 20000; return; }
  if (!naps || now - b->since < 5e-3) { sched_yield(); return; }
  struct timespec ts = {0, b->nap_ns};
  nanosleep(&ts, NULL);
  if (b->nap_ns < 250000) b->nap_ns = b->nap_ns * 2 > 250000 ? 250000 : b->nap_ns * 2;
}

/* Wait for all of q; as mmpi's waits, any request completing counts as progress (the back-off
 * starts over), so a rank that is streaming never naps. */
static void wait_all(int n, MPI_Request *q) {
  backoff b = {0, 0};
  int *done = malloc(n * sizeof *done), left = n, k;
  while (left > 0) {
    MPI_Testsome(n, q, &k, done, MPI_STATUSES_IGNORE);
    if (k == MPI_UNDEFINED) break;  /* all were already complete */
    if (k > 0) { left -= k; b.since = 0; } else idle(&b);
  }
  free(done);
}

/* Move `count` pieces from either cluster to the rank each is addressed to (its tag's local
 * rank; on the way it gets the sender's), through `pool` buffers of CHUNK bytes. */
static void relay(MPI_Comm lo, MPI_Comm hi, long count, int pool) {
  char **buf = malloc(pool * sizeof *buf);
  MPI_Request *sq = malloc(pool * sizeof *sq);
  for (int i = 0; i < pool; i++) { buf[i] = malloc(CHUNK); sq[i] = MPI_REQUEST_NULL; }
  MPI_Comm side[2] = {lo, hi};
  backoff b = {0, 0};
  for (long moved = 0; moved < count;) {
    int did = 0, k = -1, flag;
    for (int i = 0; i < pool && k < 0; i++) {  /* a free buffer, else nothing can come in */
      MPI_Test(&sq[i], &flag, MPI_STATUS_IGNORE);
      if (flag) k = i;
    }
    for (int s = 0; s < 2 && k >= 0; s++) {
      MPI_Message m; MPI_Status st;
      MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, side[s], &flag, &m, &st);
      if (!flag) continue;
      int n; MPI_Get_count(&st, MPI_BYTE, &n);
      MPI_Mrecv(buf[k], n, MPI_BYTE, &m, &st);
      int ack = st.MPI_TAG & ACK;
      MPI_Isend(buf[k], n, MPI_BYTE, st.MPI_TAG & ~ACK, ack | st.MPI_SOURCE, side[!s], &sq[k]);
      moved++; did = 1; k = -1;
      for (int i = 0; i < pool && k < 0; i++)
        if (sq[i] == MPI_REQUEST_NULL) k = i;
    }
    if (did) b.since = 0; else idle(&b);
  }
  wait_all(pool, sq);
  for (int i = 0; i < pool; i++) free(buf[i]);
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: pairs relay|low|high PORTDIR N WINDOWS BYTES\n");
    return 2;
  }
  if (strcmp(argv[1], "relay") && strcmp(argv[1], "low") && strcmp(argv[1], "high")) {
    fprintf(stderr, "pairs: unknown role %s (one of relay|low|high)\n", argv[1]);
    return 2;
  }
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  /* as mpi4py and mmpi */
  const char *role = argv[1], *dir = argv[2];
  int npairs = atoi(argv[3]), windows = atoi(argv[4]) + WARMUP, bytes = atoi(argv[5]);
  int pieces = (bytes + CHUNK - 1) / CHUNK, me;
  if (getenv("NAPS")) naps = atoi(getenv("NAPS"));
  int pool = getenv("POOL") ? atoi(getenv("POOL")) : npairs > 1 ? 8 : 4;
  if (npairs < 1 || bytes < 1 || windows <= WARMUP || pool < 1) {
    fprintf(stderr, "pairs: N, WINDOWS, BYTES and POOL must be positive\n");
    return 2;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (!strcmp(role, "relay")) {
    MPI_Comm c[2];
    accept_clusters(dir, c);
    relay(c[0], c[1], (long)npairs * windows * (WINDOW * pieces + 1), pool);
    MPI_Comm_disconnect(&c[0]); MPI_Comm_disconnect(&c[1]);
    MPI_Finalize();
    return 0;
  }
  int low = !strcmp(role, "low");
  MPI_Comm x = connect_cluster(dir, role);
  char *data = malloc(bytes), ack = 0;
  memset(data, low ? 1 + me : 0, bytes);
  int nq = WINDOW * pieces;
  MPI_Request *q = malloc(nq * sizeof *q), aq;
  double t0 = 0, spent;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int w = 0; w < windows; w++) {
    if (w == WARMUP) t0 = MPI_Wtime();
    for (int i = 0, j = 0; i < WINDOW; i++)
      for (int p = 0; p < pieces; p++, j++) {
        long off = (long)p * CHUNK;
        int n = bytes - off < CHUNK ? (int)(bytes - off) : CHUNK;
        if (low) MPI_Isend(data + off, n, MPI_BYTE, 0, me, x, q + j);  /* to high rank me */
        else MPI_Irecv(data + off, n, MPI_BYTE, 0, MPI_ANY_TAG, x, q + j);  /* one buffer, as OSU */
      }
    wait_all(nq, q);
    if (low) MPI_Irecv(&ack, 1, MPI_BYTE, 0, MPI_ANY_TAG, x, &aq);
    else MPI_Isend(&ack, 1, MPI_BYTE, 0, ACK | me, x, &aq);
    wait_all(1, &aq);
  }
  spent = MPI_Wtime() - t0;
  /* what came is checked, so that a broken relay cannot pass for a fast one */
  if (!low && (data[0] != 1 + me || data[bytes - 1] != 1 + me)) {
    fprintf(stderr, "pairs: high rank %d got the wrong data\n", me);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  double most;
  MPI_Reduce(&spent, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (low && me == 0)
    printf("C relayed %d pair(s) of %d B streams: %.0f MB/s, %.0f msg/s\n", npairs, bytes,
           (double)npairs * (windows - WARMUP) * WINDOW * bytes / most / 1e6,
           (double)npairs * (windows - WARMUP) * WINDOW / most);
  MPI_Comm_disconnect(&x);
  MPI_Finalize();
  return 0;
}
