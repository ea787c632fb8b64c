#!/bin/bash
# Lower bounds of a relayed path on this machine: floor.c (C) and floor.py (bare mpi4py), no mmpi.
# Usage: bash benchmarks/floor/run.sh [ROUNDS]   (needs mpicc_abi from the mpich wheel and a C
# compiler). Built against the standard MPI ABI, as mpi4py is: MPICH's own ABI limits port
# names to 256 characters and UCX's are longer, so Open_port fails there.
set -e
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-3}
tmp=$(mktemp -d)
bin=$tmp/floor
mpicc_abi -O2 -Wall -o "$bin" "$here/floor.c"
run() { timeout 120 mpiexec "$@" 2>&1 | grep -E ' (us|MB/s)$' || echo "FAILED: $*"; }
# xrun MODE WINDOWS BYTES [CHUNK DEPTH]: one one-process job per role, joined by Comm_connect
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
  wait "${pids[@]}" && grep -h 'MB/s$' "$pf.low" || echo "FAILED: $mode $*"
}
for r in $(seq "$rounds"); do
  run -n 2 "$bin" direct 20000
  run -n 3 "$bin" pingpong 20000
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
rm -rf "$tmp"
