/* Lower bounds for a relayed MPI path on this machine, in C with no Python anywhere.
 *
 * The last rank is a relay: it moves every message it gets from one side to the other with
 * the same loop as mmpi's forwarder (Improbe, receive, send on), polling with sched_yield,
 * as every mmpi process does. The other ranks form two halves, "low" and "high".
 *
 *   floor pingpong ITERS        2 ranks + relay: one-way time of an 8 B ping-pong via the relay
 *   floor xpingpong ROLE PORTFILE ITERS
 *                               the same across three one-process jobs (ROLE low, relay, high)
 *                               joined by Comm_connect, as mmpi's are
 *   floor direct ITERS          2 ranks, no relay: the same ping-pong straight (native one hop)
 *   floor barrier ITERS         2k ranks + relay: time per barrier made of a fan-in to each
 *                               half's leader, a token exchange between the leaders via the
 *                               relay and a fan-out (mmpi's scheme), all polling with yield
 *   floor exchange ITERS BYTES  2 ranks + relay: both ranks send BYTES to each other via the
 *                               relay at once; time per exchange
 *   floor stream WINDOWS BYTES  2 ranks + relay: windows of 16 messages one way, an ack per
 *                               window (osu_bw's pattern); MB/s. stream-direct: no relay
 *   floor pipe WINDOWS BYTES CHUNK DEPTH
 *                               the same stream, each message sent as CHUNK-byte pieces that the
 *                               relay moves on one by one as they come in, with DEPTH buffers
 *                               (mmpi's pipeline): receiving chunk k+1 overlaps sending chunk k
 *   floor bipipe ...            the same, both ends streaming to each other at once (osu_bibw);
 *                               aggregate MB/s. bistream-direct WINDOWS BYTES: no relay
 *
 * Build: mpicc_abi -O2 -o floor floor.c (it comes with the mpich wheel). Run: see run.sh.
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* -- pipelined streams: every message goes as chunks, the relay moves each chunk on as it comes */
#define ACK 2
enum { WIN = 16, MAXDEPTH = 16, LOW = 0, RELAY = 1, HIGH = 2 };

typedef struct {          /* one direction of the pipelined relay */
  MPI_Comm sc, dc;        /* receive from rank src of sc, send to rank dst of dc */
  int src, dst, chunk, depth;
  long total, posted, sent;    /* chunks in all, receives posted, sends posted */
  char *buf[MAXDEPTH];
  MPI_Request rq[MAXDEPTH], sq[MAXDEPTH];
} pipe_t;

static void pipe_init(pipe_t *p, MPI_Comm sc, int src, MPI_Comm dc, int dst, long total,
                      int chunk, int depth) {
  memset(p, 0, sizeof *p);
  p->sc = sc; p->dc = dc;
  p->src = src; p->dst = dst; p->total = total; p->chunk = chunk; p->depth = depth;
  for (int i = 0; i < depth; i++) {
    p->buf[i] = malloc(chunk); memset(p->buf[i], 0, chunk);
    p->rq[i] = p->sq[i] = MPI_REQUEST_NULL;
  }
}

/* One round: pass on the oldest received chunk, reuse sent buffers for new receives. */
static int pipe_poll(pipe_t *p) {
  int did = 0, flag;
  while (p->sent < p->posted) {          /* chunks leave in the order they came */
    int k = p->sent % p->depth;
    MPI_Test(&p->rq[k], &flag, MPI_STATUS_IGNORE);
    if (!flag) break;
    MPI_Isend(p->buf[k], p->chunk, MPI_BYTE, p->dst, TAG, p->dc, &p->sq[k]);
    p->sent++; did = 1;
  }
  while (p->posted < p->total && p->posted - p->sent < p->depth) {
    int k = p->posted % p->depth;
    if (p->posted >= p->depth) {           /* the buffer's last chunk must have left */
      MPI_Test(&p->sq[k], &flag, MPI_STATUS_IGNORE);
      if (!flag) break;
    }
    MPI_Irecv(p->buf[k], p->chunk, MPI_BYTE, p->src, TAG, p->sc, &p->rq[k]);
    p->posted++; did = 1;
  }
  return did;
}

static int pipe_done(pipe_t *p) {
  if (p->sent < p->total) return 0;
  int flag; MPI_Testall(p->depth, p->sq, &flag, MPI_STATUSES_IGNORE);
  return flag;
}

static void wait_all(int n, MPI_Request *q) {
  int flag = 0;
  for (;;) { MPI_Testall(n, q, &flag, MPI_STATUSES_IGNORE); if (flag) return; sched_yield(); }
}

/* Streams of WIN messages of `bytes` per window and an ack from HIGH (osu_bw, osu_bibw if bi).
 * RELAY passes chunks between its peers lo (rank lo_rank of comm lo) and hi; an end talks to
 * rank `peer` of `comm` (the relay, or the other end when there is none). Returns MB/s at LOW. */
static double pipes(int role, int bi, int windows, int bytes, int chunk, int depth,
                    MPI_Comm comm, int peer, MPI_Comm lo, int lo_rank, MPI_Comm hi, int hi_rank) {
  int warm = 3, nch = bytes / chunk;
  long chunks = (long)(windows + warm) * WIN * nch;
  double t0 = 0;
  if (role == RELAY) {
    pipe_t up, down;
    pipe_init(&up, lo, lo_rank, hi, hi_rank, chunks, chunk, depth);
    pipe_init(&down, hi, hi_rank, lo, lo_rank, bi ? chunks : 0, chunk, depth);
    long acks = 0;
    char a;
    while (acks < windows + warm || !pipe_done(&up) || !pipe_done(&down)) {
      int did = pipe_poll(&up) | pipe_poll(&down), flag;
      MPI_Iprobe(hi_rank, ACK, hi, &flag, MPI_STATUS_IGNORE);
      if (flag) {
        MPI_Recv(&a, 1, MPI_BYTE, hi_rank, ACK, hi, MPI_STATUS_IGNORE);
        MPI_Send(&a, 1, MPI_BYTE, lo_rank, ACK, lo);
        acks++; did = 1;
      }
      if (!did) sched_yield();
    }
    return 0;
  }
  char *sbuf = calloc(bytes, 1), *rbuf = calloc(bytes, 1), a = 0;
  MPI_Request *q = malloc(sizeof(MPI_Request) * 2 * WIN * nch);
  int sending = role == LOW || bi, receiving = role == HIGH || bi;
  for (int w = 0; w < windows + warm; w++) {
    if (w == warm) t0 = MPI_Wtime();
    int n = 0;
    for (int j = 0; receiving && j < WIN; j++)
      for (int c = 0; c < nch; c++)
        MPI_Irecv(rbuf + (long)c * chunk, chunk, MPI_BYTE, peer, TAG, comm, &q[n++]);
    for (int j = 0; sending && j < WIN; j++)
      for (int c = 0; c < nch; c++)
        MPI_Isend(sbuf + (long)c * chunk, chunk, MPI_BYTE, peer, TAG, comm, &q[n++]);
    wait_all(n, q);
    MPI_Status st;
    if (role == HIGH) MPI_Send(&a, 1, MPI_BYTE, peer, ACK, comm);
    else { int flag = 0; while (!flag) { MPI_Iprobe(peer, ACK, comm, &flag, &st); if (!flag) sched_yield(); }
           MPI_Recv(&a, 1, MPI_BYTE, peer, ACK, comm, &st); }
  }
  double t = MPI_Wtime() - t0;
  free(sbuf); free(rbuf); free(q);
  return (double)windows * WIN * bytes * (bi ? 2 : 1) / t / 1e6;
}

/* The x- modes: each process is its own one-process job, joined like mmpi's (Open_port,
 * Comm_accept / Comm_connect): the relay (or, direct, the HIGH end) opens a port and writes
 * its name to PORTFILE; the others read it and connect, LOW first. */
static void xjoin(int role, int direct, const char *portfile, MPI_Comm *a, MPI_Comm *b) {
  char port[MPI_MAX_PORT_NAME] = {0};
  int opener = direct ? HIGH : RELAY;
  if (role == opener) {
    MPI_Open_port(MPI_INFO_NULL, port);
    char tmp[4096]; snprintf(tmp, sizeof tmp, "%s.tmp", portfile);
    FILE *f = fopen(tmp, "w"); fputs(port, f); fclose(f); rename(tmp, portfile);
    MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, a);       /* LOW */
    if (!direct) MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, b);  /* HIGH */
  } else {
    FILE *f;
    while (!(f = fopen(portfile, "r"))) sched_yield();
    if (!fgets(port, sizeof port, f)) port[0] = 0;
    fclose(f);
    if (role == HIGH) {  /* let LOW be accepted first */
      struct timespec ts = {0, 300000000}; nanosleep(&ts, NULL);
    }
    MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, a);
  }
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
  if (mode[0] != 'x') MPI_Barrier(MPI_COMM_WORLD);
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
  } else if (!strcmp(mode, "pipe") || !strcmp(mode, "bipipe") || !strcmp(mode, "bistream-direct")) {
    int bytes = atoi(argv[3]);
    int chunk = argc > 4 ? atoi(argv[4]) : bytes, depth = argc > 5 ? atoi(argv[5]) : 2;
    int relayed = strcmp(mode, "bistream-direct") != 0, last = size - 1;
    if (!relayed) chunk = bytes;
    if (depth > MAXDEPTH || bytes % chunk) { if (rank == 0) fprintf(stderr, "bad CHUNK or DEPTH\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    int role = rank == 0 ? LOW : (relayed && rank == 1 ? RELAY : HIGH);
    double mbs = 0;
    if (rank == 0 || rank == last || (relayed && rank == 1))
      mbs = pipes(role, strcmp(mode, "pipe") != 0, iters, bytes, chunk, depth, MPI_COMM_WORLD,
                  relayed ? 1 : (rank == 0 ? last : 0), MPI_COMM_WORLD, 0, MPI_COMM_WORLD, last);
    if (rank == 0) printf("C %s on %d processes, %d B in %d B chunks, depth %d: %.0f MB/s\n", mode, size, bytes, chunk, depth, mbs);
    MPI_Barrier(MPI_COMM_WORLD); MPI_Finalize(); return 0;
  } else if (!strcmp(mode, "xpingpong")) {
    /* floor xpingpong ROLE PORTFILE ITERS: the 8 B ping-pong across three one-process jobs
     * joined by Comm_connect, as mmpi's ranks and forwarder are: the relay polls both
     * intercommunicators in turn (Improbe, receive, send on), yielding when both are empty. */
    const char *r = argv[2], *portfile = argv[3];
    int role = !strcmp(r, "low") ? LOW : !strcmp(r, "relay") ? RELAY : HIGH;
    int n = atoi(argv[4]), all = n + WARMUP;
    char buf[8] = {0};
    MPI_Comm a = MPI_COMM_NULL, b = MPI_COMM_NULL;
    xjoin(role, 0, portfile, &a, &b);
    if (role == RELAY) {
      MPI_Comm side[2] = {a, b};
      for (long i = 0; i < 2L * all; i++) {
        MPI_Message m; int flag = 0, s = 0;
        for (;;) {
          MPI_Improbe(0, TAG, side[s], &flag, &m, &st);
          if (flag) break;
          s ^= 1;
          if (!s) sched_yield();
        }
        MPI_Mrecv(buf, 8, MPI_BYTE, &m, &st);
        MPI_Send(buf, 8, MPI_BYTE, 0, TAG, side[s ^ 1]);
      }
    } else {
      for (int i = 0; i < all; i++) {
        if (i == WARMUP) t0 = MPI_Wtime();
        if (role == LOW) { MPI_Send(buf, 8, MPI_BYTE, 0, TAG, a); wait_msg(buf, 8, 0, a, &st); }
        else { wait_msg(buf, 8, 0, a, &st); MPI_Send(buf, 8, MPI_BYTE, 0, TAG, a); }
      }
      t = (MPI_Wtime() - t0) / n / 2;
      if (role == LOW) printf("C xpingpong across jobs: %.2f us\n", t * 1e6);
    }
    MPI_Comm_disconnect(&a);
    if (b != MPI_COMM_NULL) MPI_Comm_disconnect(&b);
    MPI_Finalize(); return 0;
  } else if (!strncmp(mode, "x", 1)) {
    /* floor xpipe|xbipipe|xstream-direct|xbistream-direct ROLE PORTFILE WINDOWS BYTES [CHUNK DEPTH]
     * ROLE: low, relay or high; three (direct: two) one-process jobs, see xjoin. */
    const char *r = argv[2], *portfile = argv[3];
    int role = !strcmp(r, "low") ? LOW : !strcmp(r, "relay") ? RELAY : HIGH;
    int windows = atoi(argv[4]), bytes = atoi(argv[5]);
    int direct = strstr(mode, "direct") != NULL, bi = strstr(mode, "bi") != NULL;
    int chunk = !direct && argc > 6 ? atoi(argv[6]) : bytes, depth = argc > 7 ? atoi(argv[7]) : 2;
    if (depth > MAXDEPTH || bytes % chunk) { fprintf(stderr, "bad CHUNK or DEPTH\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
    MPI_Comm a = MPI_COMM_NULL, b = MPI_COMM_NULL;
    xjoin(role, direct, portfile, &a, &b);
    double mbs = pipes(role, bi, windows, bytes, chunk, depth, a, 0, a, 0, b, 0);
    if (role == LOW) printf("C %s across jobs, %d B in %d B chunks, depth %d: %.0f MB/s\n", mode, bytes, chunk, depth, mbs);
    MPI_Comm_disconnect(&a);
    if (b != MPI_COMM_NULL) MPI_Comm_disconnect(&b);
    MPI_Finalize(); return 0;
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
