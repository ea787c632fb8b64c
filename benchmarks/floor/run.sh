#!/bin/bash
# What any relay achieves on this machine: bare C relays of mmpi's traffic, no mmpi, no Python
# (docs/performance.md, "Floors"). Needs a C compiler and mpicc_abi (from the mpich wheel);
# the programs are built against the standard MPI ABI, as mpi4py is (MPICH's own ABI limits
# port names to 256 characters, and UCX's are longer).
#
#   bash benchmarks/floor/run.sh [ROUNDS]        paths (floor.c): one hop, via a relay, across
#                                                three jobs; barrier; exchanges; streams
#   bash benchmarks/floor/run.sh coll [ROUNDS]   the bridged Allreduce and Bcast of 8 B and 1 MiB
#                                                and Alltoall 64 KiB in C (coll.c) against
#                                                MPICH's own, the small ones also with mmpi's
#                                                collective check (CHECK=1), the Barrier
#                                                (floor.c), then `mmpi-bench` on the same points
#   bash benchmarks/floor/run.sh pairs [ROUNDS]  1 and 4 concurrent pairs of 4 MiB streams
#                                                through a C relay (pairs.c), then `mmpi-bench pairs`
#   bash benchmarks/floor/run.sh rate [ROUNDS]   message rate, 8 B - 4 KiB, 1 and 2 pairs through
#                                                the C relay (pairs.c), then `mmpi-bench rate`
#                                                with 1 and with 2 pairs a side (the rows of the
#                                                larger job's single pair have idle ranks)
#
# Rounds alternate the C floor with mmpi-bench, so both see the same stretch of the machine.
set -e
here=$(cd "$(dirname "$0")" && pwd)
what=paths
case "${1:-}" in coll|pairs|rate) what=$1; shift ;; esac
rounds=${1:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=$tmp/floor
coll=$tmp/coll
pairs=$tmp/pairs
mpicc_abi -O2 -Wall -o "$bin" "$here/floor.c"
mpicc_abi -O2 -Wall -o "$coll" "$here/coll.c"
mpicc_abi -O2 -Wall -o "$pairs" "$here/pairs.c"
run() { timeout 120 mpiexec "$@" 2>&1 | grep -E ' (us|MB/s)$' || echo "FAILED: $*"; }
# xrun MODE ARGS...: one one-process job per role, joined by Comm_connect (MODE xpingpong:
# ITERS; the others: WINDOWS BYTES [CHUNK DEPTH])
xrun() {
  local mode=$1 roles="relay low high" pids=() pf
  shift
  pf=$tmp/port.$RANDOM
  [[ $mode == *direct* ]] && roles="high low"
  for r in $roles; do
    timeout 120 mpiexec -n 1 "$bin" "$mode" "$r" "$pf" "$@" > "$pf.$r" 2>&1 &
    pids+=($!)
    sleep 0.2
  done
  wait "${pids[@]}" && grep -hE '(MB/s|us)$' "$pf.low" || echo "FAILED: $mode $*"
}
# jobs3 PROG N DIR ARGS...: a floor's relay job and its two N-rank cluster jobs, joined in
# DIR; the clusters' output goes to DIR/low.out and DIR/high.out
jobs3() {
  local prog=$1 n=$2 d=$3 pids=()
  shift 3
  timeout 120 mpiexec -n 1 "$prog" relay "$d" "$@" & pids+=($!)
  timeout 120 mpiexec -n "$n" "$prog" low "$d" "$@" > "$d/low.out" & pids+=($!)
  timeout 120 mpiexec -n "$n" "$prog" high "$d" "$@" > "$d/high.out" & pids+=($!)
  wait "${pids[@]}"
}
# relayed OP ITERS BYTES: coll.c on 2+2 ranks; prints the slower cluster's figure
relayed() {
  local d
  d=$(mktemp -d -p "$tmp")
  if jobs3 "$coll" 2 "$d" "$@"; then
    sort -t: -k2 -g "$d/low.out" "$d/high.out" | tail -1
  else
    echo "FAILED: relayed $*"
  fi
}
native() { timeout 120 mpiexec -n 4 "$coll" native - "$@" || echo "FAILED: native $*"; }
# bench ARGS...: mmpi-bench's tables, each row under its benchmark's title line
bench() {
  timeout 300 mmpi-bench "$@" -q 2>&1 | grep -E '^# mmpi-bench [^ ]+: |^[0-9-]' ||
    echo "FAILED: mmpi-bench $*"
}
# cpairs N WINDOWS BYTES: pairs.c with N pairs
cpairs() {
  local d
  d=$(mktemp -d -p "$tmp")
  if jobs3 "$pairs" "$1" "$d" "$@"; then cat "$d/low.out"; else echo "FAILED: pairs $*"; fi
}
coll_rounds() {
  for r in $(seq "$rounds"); do
    echo "== round $r $(date -u +%H:%M:%S)"
    for point in "allreduce 2000 8" "bcast 2000 8" "allreduce 300 1048576" \
                 "bcast 300 1048576" "alltoall 500 65536"; do
      # shellcheck disable=SC2086  # a point is three words
      native $point
      # shellcheck disable=SC2086
      relayed $point
    done
    # the small ones again with mmpi's collective check, as mmpi runs them
    CHECK=1 relayed allreduce 2000 8
    CHECK=1 relayed bcast 2000 8
    run -n 5 "$bin" barrier 5000
    bench barrier
    bench allreduce bcast --sizes 8,1M
    bench alltoall --sizes 64K
  done
}
pairs_rounds() {
  for r in $(seq "$rounds"); do
    echo "== round $r $(date -u +%H:%M:%S)"
    cpairs 1 10 4194304
    cpairs 4 5 4194304
    bench pairs --sizes 4M
  done
}
path_rounds() {
  for r in $(seq "$rounds"); do
    echo "== round $r $(date -u +%H:%M:%S)"
    run -n 2 "$bin" direct 20000
    run -n 3 "$bin" pingpong 20000
    xrun xpingpong 20000  # the same across three jobs, as mmpi's ranks and forwarder are
    run -n 5 "$bin" barrier 5000
    run -n 3 "$bin" exchange 500 1048576
    run -n 3 "$bin" exchange 1000 262144
    run -n 2 "$bin" stream-direct 50 4194304
    run -n 3 "$bin" stream 50 4194304
    # Bandwidth as mmpi moves it: across jobs, 1 MiB chunks through a pipeline of 2 buffers.
    xrun xstream-direct 50 4194304
    xrun xbistream-direct 50 4194304
    xrun xpipe 50 4194304 1048576 2
    xrun xbipipe 50 4194304 1048576 2
    bench latency bw bibw --sizes 8,4M
  done
}
rate_rounds() {
  for r in $(seq "$rounds"); do
    echo "== round $r $(date -u +%H:%M:%S)"
    for size in 8 64 512 4096; do
      POOL=64 cpairs 1 200 $size
      POOL=64 cpairs 2 100 $size
    done
    # each pair count in a job of its own size, as the C relay's (osu_mbw_mr runs 2N ranks)
    bench rate --sizes 8,64,512,4K --pairs 1
    bench rate --sizes 8,64,512,4K --pairs 2
  done
}
case $what in
  coll) coll_rounds ;;
  rate) rate_rounds ;;
  pairs) pairs_rounds ;;
  *) path_rounds ;;
esac
