#!/bin/bash
# The collectives' floor (coll.c) alternated with mmpi-bench: rounds of C native, C relayed and
# mmpi's bridged Allreduce 8 B / 1 MiB, Bcast 1 MiB and Alltoall 64 KiB on 2+2 ranks (see
# coll.c's comment).
# Usage: bash benchmarks/floor/coll.sh [ROUNDS]   (needs mpicc_abi from the mpich wheel and cc)
set -e
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-3}
tmp=$(mktemp -d)
bin=$tmp/coll
mpicc_abi -O2 -Wall -o "$bin" "$here/coll.c"
# relayed OP ITERS BYTES: the relay job and the two cluster jobs; prints the slower cluster's
relayed() {
  local d pids=()
  d=$(mktemp -d -p "$tmp")
  timeout 120 mpiexec -n 1 "$bin" relay "$d" "$@" & pids+=($!)
  timeout 120 mpiexec -n 2 "$bin" low "$d" "$@" > "$d/low.out" & pids+=($!)
  timeout 120 mpiexec -n 2 "$bin" high "$d" "$@" > "$d/high.out" & pids+=($!)
  if wait "${pids[@]}"; then
    sort -t: -k2 -g "$d/low.out" "$d/high.out" | tail -1
  else
    echo "FAILED: relayed $*"
  fi
}
native() { timeout 120 mpiexec -n 4 "$bin" native - "$@" || echo "FAILED: native $*"; }
for r in $(seq "$rounds"); do
  echo "== round $r $(date -u +%H:%M:%S)"
  native allreduce 2000 8
  relayed allreduce 2000 8
  native allreduce 300 1048576
  relayed allreduce 300 1048576
  native bcast 300 1048576
  relayed bcast 300 1048576
  native alltoall 500 65536
  relayed alltoall 500 65536
  timeout 300 mmpi-bench allreduce bcast --sizes 8,1M -q 2>&1 | grep -vE '^#|^$' || echo "FAILED: mmpi-bench"
  timeout 300 mmpi-bench alltoall --sizes 64K -q 2>&1 | grep -vE '^#|^$' || echo "FAILED: mmpi-bench"
done
rm -rf "$tmp"
