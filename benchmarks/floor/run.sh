#!/bin/bash
# Lower bounds of a relayed path on this machine: floor.c (C) and floor.py (bare mpi4py), no mmpi.
# Usage: bash benchmarks/floor/run.sh [ROUNDS]   (needs mpicc_abi from the mpich wheel and a C
# compiler). Built against the standard MPI ABI, as mpi4py is: MPICH's own ABI limits port
# names to 256 characters and UCX's are longer, so Open_port fails there.
#        bash benchmarks/floor/run.sh coll [ROUNDS]   the collectives' floor instead (coll.c),
# alternated with mmpi-bench: rounds of C native, C relayed and mmpi's bridged Allreduce 8 B /
# 1 MiB, Bcast 1 MiB and Alltoall 64 KiB on 2+2 ranks (see coll.c's comment). PYTHON=1 adds,
# per collective, coll.py (coll.c in bare mpi4py): its native baseline and its relay and
# ranks in the three other pairings (Python relay and ranks, C relay with Python ranks, Python
# relay with C ranks).
#        bash benchmarks/floor/run.sh bcast [ROUNDS]  the 1 MiB Bcast alone, for many short
# rounds (its ratio swings most): as `coll` runs it with PYTHON=1, then coll.py's ranks (with
# its relay and with coll.c's) separating the calls as mmpi's Barrier does (SETTLE=polled),
# then `mmpi-bench bcast --sizes 8,1M`.
#        bash benchmarks/floor/run.sh barrier [ROUNDS]  mmpi's Barrier in bare Python (coll.py
# barrier: three jobs, back-to-back barriers of mmpi's structure) against mpi4py's, then
# `mmpi-bench barrier`.
#        bash benchmarks/floor/run.sh pairs [ROUNDS]  the concurrent pairs' floor (pairs.c):
# rounds of 1 and 4 C-relayed pairs of 4 MiB streams, alternated with `mmpi-bench pairs`.
set -e
here=$(cd "$(dirname "$0")" && pwd)
what=paths
case "${1:-}" in coll|bcast|barrier|pairs) what=$1; shift ;; esac
rounds=${1:-3}
tmp=$(mktemp -d)
bin=$tmp/floor
coll=$tmp/coll
pairs=$tmp/pairs
pycoll=$tmp/pycoll
printf '#!/bin/sh\nexec python "%s/coll.py" "$@"\n' "$here" > "$pycoll"
chmod +x "$pycoll"
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
# jobs3 RELAY RANKS N DIR ARGS...: a floor's relay job (program RELAY) and its two N-rank
# cluster jobs (program RANKS), joined in DIR; the clusters' output goes to DIR/low.out and
# DIR/high.out
jobs3() {
  local relay=$1 ranks=$2 n=$3 d=$4 pids=()
  shift 4
  timeout 120 mpiexec -n 1 "$relay" relay "$d" "$@" & pids+=($!)
  timeout 120 mpiexec -n "$n" "$ranks" low "$d" "$@" > "$d/low.out" & pids+=($!)
  timeout 120 mpiexec -n "$n" "$ranks" high "$d" "$@" > "$d/high.out" & pids+=($!)
  wait "${pids[@]}"
}
# relayed [RELAY RANKS] OP ITERS BYTES: coll.c (or the given programs) on 2+2 ranks; prints
# the slower cluster's figure, prefixed with the relay's language when it is not the ranks'
relayed() {
  local d relay=$coll ranks=$coll what=""
  if [ $# -gt 3 ]; then relay=$1; ranks=$2; shift 2; fi
  [ "$relay" != "$ranks" ] && what="($([ "$relay" = "$coll" ] && echo C || echo Python) relay) "
  d=$(mktemp -d -p "$tmp")
  if jobs3 "$relay" "$ranks" 2 "$d" "$@"; then
    echo "$what$(sort -t: -k2 -g "$d/low.out" "$d/high.out" | tail -1)"
  else
    echo "FAILED: relayed $*"
  fi
}
# cpairs N WINDOWS BYTES: pairs.c with N pairs
cpairs() {
  local d
  d=$(mktemp -d -p "$tmp")
  if jobs3 "$pairs" "$pairs" "$1" "$d" "$@"; then cat "$d/low.out"; else echo "FAILED: pairs $*"; fi
}
pairs_rounds() {
  for r in $(seq "$rounds"); do
    echo "== round $r $(date -u +%H:%M:%S)"
    cpairs 1 10 4194304
    cpairs 4 5 4194304
    timeout 300 mmpi-bench pairs --sizes 4M -q 2>&1 | grep -vE '^#|^$' || echo "FAILED: mmpi-bench"
  done
}
native() { timeout 120 mpiexec -n 4 "$coll" native - "$@" || echo "FAILED: native $*"; }
# one collective: C native and relayed, then (PYTHON=1) coll.py's native and three pairings
one_coll() {
  native "$@"
  relayed "$@"
  if [ -n "${PYTHON:-}" ]; then
    timeout 120 mpiexec -n 4 "$pycoll" native - "$@" || echo "FAILED: python native $*"
    relayed "$pycoll" "$pycoll" "$@"
    relayed "$coll" "$pycoll" "$@"
    relayed "$pycoll" "$coll" "$@"
  fi
}
coll_rounds() {
  for r in $(seq "$rounds"); do
    echo "== round $r $(date -u +%H:%M:%S)"
    one_coll allreduce 2000 8
    one_coll allreduce 300 1048576
    one_coll bcast 300 1048576
    one_coll alltoall 500 65536
    timeout 300 mmpi-bench allreduce bcast --sizes 8,1M -q 2>&1 | grep -vE '^#|^$' || echo "FAILED: mmpi-bench"
    timeout 300 mmpi-bench alltoall --sizes 64K -q 2>&1 | grep -vE '^#|^$' || echo "FAILED: mmpi-bench"
  done
}
bcast_rounds() {
  for r in $(seq "$rounds"); do
    echo "== round $r $(date -u +%H:%M:%S)"
    PYTHON=1 one_coll bcast 300 1048576
    SETTLE=polled relayed "$pycoll" "$pycoll" bcast 300 1048576
    SETTLE=polled relayed "$coll" "$pycoll" bcast 300 1048576
    timeout 300 mmpi-bench bcast --sizes 8,1M -q 2>&1 | grep -vE '^#|^$' || echo "FAILED: mmpi-bench"
  done
}
barrier_rounds() {
  for r in $(seq "$rounds"); do
    echo "== round $r $(date -u +%H:%M:%S)"
    timeout 120 mpiexec -n 4 "$pycoll" native - barrier 3000 0 || echo "FAILED: python native barrier"
    relayed "$pycoll" "$pycoll" barrier 3000 0
    timeout 300 mmpi-bench barrier -q 2>&1 | grep -vE '^#|^$' || echo "FAILED: mmpi-bench"
  done
}
path_rounds() {
  for r in $(seq "$rounds"); do
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
    run -n 2 python "$here/floor.py" direct 10000
    for t in 1 2; do
      export THREADS=$t
      run -n 3 python "$here/floor.py" pingpong 10000
      run -n 5 python "$here/floor.py" barrier 3000
      run -n 3 python "$here/floor.py" exchange 300 1048576
      run -n 3 python "$here/floor.py" exchange 500 262144
    done
    unset THREADS
    run -n 4 python "$here/floor.py" native-barrier 3000
  done
}
case $what in
  coll) coll_rounds ;;
  bcast) bcast_rounds ;;
  barrier) barrier_rounds ;;
  pairs) pairs_rounds ;;
  *) path_rounds ;;
esac
rm -rf "$tmp"
