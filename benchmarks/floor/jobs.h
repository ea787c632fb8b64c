/* The three jobs of a C floor, joined as mmpi's are (coll.c, pairs.c): a one-process relay
 * opens a port per cluster (two clusters on one port can crash MPICH's accept) and writes each
 * port name to a file in a shared directory (written, then renamed, so a reader never sees
 * half a name); each cluster's rank 0 polls for its file and the cluster connects
 * collectively. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

/* The relay's side: c[0] to the low cluster, c[1] to the high one. */
static void accept_clusters(const char *dir, MPI_Comm c[2]) {
  const char *names[2] = {"low", "high"};
  char ports[2][MPI_MAX_PORT_NAME], path[4096], tmp[4200];
  for (int s = 0; s < 2; s++) {
    MPI_Open_port(MPI_INFO_NULL, ports[s]);
    snprintf(path, sizeof path, "%s/%s", dir, names[s]);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    fputs(ports[s], f);
    fclose(f);
    rename(tmp, path);
  }
  for (int s = 0; s < 2; s++) MPI_Comm_accept(ports[s], MPI_INFO_NULL, 0, MPI_COMM_SELF, &c[s]);
}

/* A cluster's side (`cluster` is "low" or "high"): the intercommunicator to the relay. */
static MPI_Comm connect_cluster(const char *dir, const char *cluster) {
  char path[4096], port[MPI_MAX_PORT_NAME] = {0};
  int me;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (me == 0) {
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, cluster);
    while (!(f = fopen(path, "r"))) usleep(1000);
    if (!fgets(port, sizeof port, f)) port[0] = 0;
    fclose(f);
  }
  MPI_Comm x;
  MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &x);
  return x;
}
