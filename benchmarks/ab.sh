#!/bin/bash
# Alternate mmpi-bench runs between variants, the only way changes were judged here (the
# machine drifts by 20-30% between batches; see RESULTS.md, "Noise").
#
#   benchmarks/ab.sh ROUNDS OUT VARIANT... -- MMPI-BENCH-ARGS
#
# A VARIANT is either a source tree (a directory: its code runs, through PYTHONPATH, e.g. a
# `git worktree` of an older commit) or environment settings ("MMPI_FWD_MODE=direction", or
# several in one word separated by spaces). Each round runs every variant once, in order; OUT
# collects the tables without their comments, for `python benchmarks/ab_table.py OUT`.
set -euo pipefail
rounds=$1; out=$2; shift 2
variants=()
while [ "$1" != "--" ]; do variants+=("$1"); shift; done; shift
here=$(cd "$(dirname "$0")/.." && pwd)
: > "$out"
for i in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    echo "== [$v] round $i" >> "$out"
    if [ -d "$v" ]; then
      (cd "$v" && PYTHONPATH="$v" mmpi-bench "$@" -q 2>&1 | grep -vE '^#|^$') >> "$out" || true
    else
      # shellcheck disable=SC2086  # a variant's settings are meant to split into words
      (cd "$here" && env $v mmpi-bench "$@" -q 2>&1 | grep -vE '^#|^$') >> "$out" || true
    fi
  done
done
echo DONE >> "$out"
