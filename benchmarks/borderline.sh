#!/bin/bash
# Many short runs of the targets at the line (barrier, 8 B and 1 MiB allreduce, 1 MiB bcast):
# three `--all` runs per batch are too few to tell a median of 2.9 from one of 3.1.
#
#   benchmarks/borderline.sh RUNS DIR [GAP_SECONDS]
#
# Each run is `mmpi-bench barrier allreduce bcast --sizes 8,1M --json DIR/run-NN.json` (native
# and bridged in the same run, as in `--all`), GAP seconds apart (default 10); then
# benchmarks/targets.py prints each run's ratios and their medians.
set -euo pipefail
runs=$1; dir=$2; gap=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
for i in $(seq -w "$runs"); do
  mmpi-bench barrier allreduce bcast --sizes 8,1M --json "$dir/run-$i.json" -q > /dev/null
  [ "$i" -lt "$runs" ] && sleep "$gap"
done
python "$here/targets.py" "$dir"/run-*.json
