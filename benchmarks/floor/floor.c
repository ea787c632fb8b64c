/* Lower bounds for a relayed MPI path on this machine, in C with no Python anywhere.
 *
 * The last rank is a relay: it moves every message it gets from one side to the other with
 * the same loop as mmpi's forwarder (Improbe, receive, send on), polling with sched_yield,
 * as every mmpi process does. The other ranks form two halves, "low" and "high".
 *
 *   floor pingpong ITERS        2 ranks + relay: one-way time of an 8 B ping-pong via the relay
 *   floor direct ITERS          2 ranks, no relay: the same ping-pong straight (native one hop)
 *   floor barrier ITERS         2k ranks + relay: time per barrier made of a fan-in to each
 *                               half's leader, a token exchange between the leaders via the
 *                               relay and a fan-out (mmpi's scheme), all polling with yield
 *   floor exchange ITERS BYTES  2 ranks + relay: both ranks send BYTES to each other via the
 *                               relay at once; time per exchange
 *   floor stream WINDOWS BYTES  2 ranks + relay: windows of 16 messages one way, an ack per
 *                               window (osu_bw's pattern); MB/s. stream-direct: no relay
 *
 * Build: mpicc -O2 -o floor floor.c (mpicc comes with the mpich wheel). Run: see run.sh.
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG 1
#define WARMUP 100

static void wait_msg(void *buf, int n, int src, MPI_Comm comm, MPI_Status *st) {
  MPI_Message m; int flag = 0;
  for (;;) {
    MPI_Improbe(src, TAG, comm, &flag, &m, st);
    if (flag) break;
    sched_yield();
  }
  MPI_Mrecv(buf, n, MPI_BYTE, &m, st);
}

static void wait_req(MPI_Request *r) {
  int flag = 0;
  if (*r == MPI_REQUEST_NULL) return;
  for (;;) { MPI_Test(r, &flag, MPI_STATUS_IGNORE); if (flag) return; sched_yield(); }
}

/* Relay everything between rank a and rank b, `count` messages in all. Two buffers, so that
 * receiving the next message overlaps sending the last one on (both directions at once). */
static void relay(int a, int b, long count, int bytes) {
  char *buf[2] = {malloc(bytes > 8 ? bytes : 8), malloc(bytes > 8 ? bytes : 8)};
  MPI_Request sent[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Status st;
  for (long i = 0; i < count; i++) {
    int k = i % 2;
    MPI_Message m; int flag = 0;
    for (;;) {
      MPI_Improbe(MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &flag, &m, &st);
      if (flag) break;
      sched_yield();
    }
    wait_req(&sent[k]);
    int n; MPI_Get_count(&st, MPI_BYTE, &n);
    MPI_Mrecv(buf[k], n, MPI_BYTE, &m, &st);
    MPI_Isend(buf[k], n, MPI_BYTE, st.MPI_SOURCE == a ? b : a, TAG, MPI_COMM_WORLD, &sent[k]);
  }
  wait_req(&sent[0]); wait_req(&sent[1]);
  free(buf[0]); free(buf[1]);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argv[1];
  int iters = atoi(argv[2]);
  int total = iters + WARMUP;
  double t0 = 0, t = 0;
  MPI_Status st;
  MPI_Barrier(MPI_COMM_WORLD);
  if (!strcmp(mode, "pingpong") || !strcmp(mode, "direct")) {
    int relayed = !strcmp(mode, "pingpong");
    char buf[8] = {0};
    int other = rank == 0 ? (relayed ? 2 : 1) : 0;
    int via = relayed ? 1 : other;
    if (relayed && rank == 1) {
      relay(0, 2, 2L * total, 8);
    } else {
      for (int i = 0; i < total; i++) {
        if (i == WARMUP) t0 = MPI_Wtime();
        if (rank == 0) { MPI_Send(buf, 8, MPI_BYTE, via, TAG, MPI_COMM_WORLD); wait_msg(buf, 8, via, MPI_COMM_WORLD, &st); }
        else { wait_msg(buf, 8, via, MPI_COMM_WORLD, &st); MPI_Send(buf, 8, MPI_BYTE, via, TAG, MPI_COMM_WORLD); }
      }
      t = (MPI_Wtime() - t0) / iters / 2;
    }
    (void)other;
  } else if (!strcmp(mode, "barrier")) {
    int k = (size - 1) / 2, r = size - 1;
    int low = rank < k, leader = rank == 0 || rank == k;
    int mine = low ? 0 : k, other = low ? k : 0;
    char b = 0;
    if (rank == r) {
      relay(0, k, 2L * total, 1);
    } else {
      for (int i = 0; i < total; i++) {
        if (i == WARMUP) t0 = MPI_Wtime();
        if (leader) {
          for (int j = 1; j < k; j++) wait_msg(&b, 1, mine + j, MPI_COMM_WORLD, &st);
          MPI_Send(&b, 1, MPI_BYTE, r, TAG, MPI_COMM_WORLD);
          wait_msg(&b, 1, r, MPI_COMM_WORLD, &st);
          for (int j = 1; j < k; j++) MPI_Send(&b, 1, MPI_BYTE, mine + j, TAG, MPI_COMM_WORLD);
        } else {
          MPI_Send(&b, 1, MPI_BYTE, mine, TAG, MPI_COMM_WORLD);
          wait_msg(&b, 1, mine, MPI_COMM_WORLD, &st);
        }
      }
      t = (MPI_Wtime() - t0) / iters;
    }
    (void)other;
  } else if (!strcmp(mode, "stream") || !strcmp(mode, "stream-direct")) {
    /* rank 0 streams BYTES-sized messages to the last rank (via the relay unless direct),
     * WINDOW in flight, and the last rank acks each window: osu_bw's pattern. */
    int bytes = atoi(argv[3]), relayed = !strcmp(mode, "stream");
    int last = size - 1, via0 = relayed ? 1 : last, via1 = relayed ? 1 : 0;
    enum { WINDOW = 16 };
    int windows = iters, warm = 5;
    if (relayed && rank == 1) {
      relay(0, last, (long)(windows + warm) * (WINDOW + 1), bytes);
    } else if (rank == 0 || rank == last) {
      char *buf = calloc(bytes, 1), ack = 0;
      MPI_Request q[WINDOW];
      for (int w = 0; w < windows + warm; w++) {
        if (w == warm) t0 = MPI_Wtime();
        if (rank == 0) {
          for (int j = 0; j < WINDOW; j++) MPI_Isend(buf, bytes, MPI_BYTE, via0, TAG, MPI_COMM_WORLD, &q[j]);
          for (int j = 0; j < WINDOW; j++) wait_req(&q[j]);
          wait_msg(&ack, 1, via0, MPI_COMM_WORLD, &st);
        } else {
          for (int j = 0; j < WINDOW; j++) wait_msg(buf, bytes, via1, MPI_COMM_WORLD, &st);
          MPI_Send(&ack, 1, MPI_BYTE, via1, TAG, MPI_COMM_WORLD);
        }
      }
      t = (MPI_Wtime() - t0) / ((double)windows * WINDOW * bytes) * 1e6; /* s per MB */
      free(buf);
    }
    if (rank == 0) { printf("C %s on %d processes: %.0f MB/s\n", mode, size, 1.0 / t); MPI_Barrier(MPI_COMM_WORLD); MPI_Finalize(); return 0; }
  } else if (!strcmp(mode, "exchange")) {
    int bytes = atoi(argv[3]);
    if (rank == 1) {
      relay(0, 2, 2L * total, bytes);
    } else {
      char *s = calloc(bytes, 1), *rb = malloc(bytes);
      for (int i = 0; i < total; i++) {
        if (i == WARMUP) t0 = MPI_Wtime();
        MPI_Request q;
        MPI_Isend(s, bytes, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, &q);
        wait_msg(rb, bytes, 1, MPI_COMM_WORLD, &st);
        wait_req(&q);
      }
      t = (MPI_Wtime() - t0) / iters;
      free(s); free(rb);
    }
  }
  if (rank == 0) printf("C %s on %d processes: %.2f us\n", mode, size, t * 1e6);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
