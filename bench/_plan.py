"""mmpi-bench's planning, pure: which jobs run, with which command lines, in which order.

cli.py runs what this plans, one job after the other (its docstring says why); nothing here
starts a process or reads the machine.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from launch import module_argv

from ._catalog import BENCHES, GROUPS

# The pairs target compares 4 concurrent cross pairs with one (docs/performance.md).
DEFAULT_PAIRS = 4
# MPICH's asynchronous progress: a thread per rank (needs MPI_THREAD_MULTIPLE, mpi4py's default)
ASYNC_ENV = (("MPIR_CVAR_ASYNC_PROGRESS", "1"),)


@dataclass(frozen=True)
class Run:
    """One job: which benchmarks, which mode, and the exact command line."""

    mode: str  # "native" or "bridged"
    group: str  # "p2p" or "world"
    argv: tuple[str, ...]
    specs: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()  # set for this job on top of ours


def plan_specs(names: Sequence[str], sizes: tuple[int, ...] | None) -> dict[str, str]:
    """Map each benchmark that has something to run to its worker spec (``name=s1,s2``)."""
    specs = {}
    for name in names:
        bench = BENCHES[name]
        if not bench.sizes:
            specs[name] = name
            continue
        chosen = bench.plan_sizes(sizes)
        if chosen:
            specs[name] = f"{name}={','.join(map(str, chosen))}"
    return specs


def plan_runs(specs: dict[str, str], low: int, high: int, options: Sequence[str], *,
              mmpi_run: Sequence[str], mpiexec: str, python: str = sys.executable,
              pairs: int = DEFAULT_PAIRS, bind_cpus: Sequence[int] = (),
              forwarders: int = 1,
              native_env: tuple[tuple[str, str], ...] | None = None) -> list[Run]:
    """Return the jobs to run, in order: for each group, native first, then bridged.

    Point-to-point also gets the native baseline across two jobs, between those two.
    `bind_cpus` (the CPUs this process may use, ascending; empty: no binding) binds the
    native ranks to cores in turn, and the bridged ones as mmpi-run's `paired` placement does
    (both clusters' rank i on core i, so the leaders share core 0) with the forwarders on the
    last cores, away from the leaders: the layout that makes small collectives fastest on a
    shared host. The pairs' layout stays unbound, as binding puts each pair's two ranks on
    one core (docs/performance.md, "Placement").
    """
    runs = []
    # Open MPI (`native_env` not None: launch.openmpi_env): its own flags and environment
    openmpi = native_env is not None
    native_flags = ("--oversubscribe",) if openmpi else ()
    native_env = native_env or ()
    shapes = {"p2p": (1, 1), "world": (low, high), "pairs": (pairs, pairs),
              "overlap": (low, high)}
    bound_run = tuple(mmpi_run)
    if bind_cpus:
        last = [str(bind_cpus[-1 - k % len(bind_cpus)]) for k in range(forwarders)]
        bound_run = (*mmpi_run, "--placement", "paired", "--forwarder-cpus", ",".join(last))
    for group in GROUPS:
        mine = tuple(s for n, s in specs.items() if BENCHES[n].group == group)
        if not mine:
            continue
        a, b = shapes[group]
        bind = bool(bind_cpus) and group != "pairs"
        worker = (*module_argv(python, "bench.worker"), "--low", str(a), *options, *mine)
        native_bind = (("--bind-to" if openmpi else "-bind-to", "core") if bind else ())
        native_bind += native_flags
        runs.append(Run("native", group, (mpiexec, "-n", str(a + b), *native_bind, *worker),
                        mine, native_env))
        if group == "p2p":  # the baseline between two jobs, as a forwarded message travels
            runs.append(Run("across", group,
                            (*module_argv(python, "bench.across"), mpiexec, *worker), mine,
                            native_env))
        if group == "overlap":  # and with MPICH's own progress thread
            runs.append(Run("async", group, (mpiexec, "-n", str(a + b), *native_bind, *worker),
                            mine, ASYNC_ENV))
        runs.append(Run("bridged", group,
                        (*(bound_run if bind else mmpi_run), "--low", str(a), "--high", str(b),
                         *worker), mine))
    return runs


def describe_layouts(low: int, high: int, forwarders: int = 1,
                     pairs: int = DEFAULT_PAIRS, bind: bool = False,
                     dvm: bool = False) -> dict[str, str]:
    """One line per group saying which ranks the two figures come from."""
    fwd = "the forwarder" if forwarders == 1 else f"{forwarders} forwarders"
    fwds = f"{forwarders} forwarder{'s' if forwarders > 1 else ''}"
    bound = " (bound: native ranks to cores in turn; bridged rank i of each cluster to core " \
            "i, the forwarders to the last cores)" if bind else ""
    return {
        "p2p": "native: 2 ranks of one mpiexec job; "
               + "across jobs: 2 one-rank mpiexec jobs joined by Comm_connect"
               + (" (in a DVM of their own, as Open MPI needs); " if dvm else "; ")
               + f"bridged: 1+1 ranks through {fwd} (vrank 0 <-> vrank 1){bound}",
        "world": f"native: {low + high} ranks of one mpiexec job; bridged: {low} low + {high} "
                 f"high ranks and {fwds}{bound}",
        "pairs": f"native: {2 * pairs} ranks of one mpiexec job; bridged: {pairs} low + "
                 f"{pairs} high ranks and {fwds}; pair i is low rank i -> high rank i",
        "overlap": f"native: {low + high} ranks of one mpiexec job, without and with MPICH's "
                   f"asynchronous progress (MPIR_CVAR_ASYNC_PROGRESS=1); bridged: {low} low + "
                   f"{high} high ranks and {fwds}{bound}",
    }


__all__ = ["ASYNC_ENV", "DEFAULT_PAIRS", "Run", "describe_layouts", "plan_runs", "plan_specs"]
