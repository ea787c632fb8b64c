#!/bin/bash
# Lower bounds of a relayed path on this machine: floor.c (C) and floor.py (bare mpi4py), no mmpi.
# Usage: bash benchmarks/floor/run.sh [ROUNDS]   (needs mpicc from the mpich wheel and a C compiler)
set -e
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-3}
bin=$(mktemp -d)/floor
mpicc -O2 -Wall -o "$bin" "$here/floor.c"
run() { timeout 120 mpiexec "$@" 2>&1 | grep -E ' (us|MB/s)$' || echo "FAILED: $*"; }
for r in $(seq "$rounds"); do
  run -n 2 "$bin" direct 20000
  run -n 3 "$bin" pingpong 20000
  run -n 5 "$bin" barrier 5000
  run -n 3 "$bin" exchange 500 1048576
  run -n 3 "$bin" exchange 1000 262144
  run -n 2 "$bin" stream-direct 50 4194304
  run -n 3 "$bin" stream 50 4194304
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
