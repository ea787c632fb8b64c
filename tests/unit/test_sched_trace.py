"""benchmarks/sched_trace.py sums up scheduler switches: turns per thread, the poller's waits."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("sched_trace",
                                               ROOT / "benchmarks" / "sched_trace.py")
sched_trace = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sched_trace)


def _switch(cpu: int, t_us: int, prev: int, state: str, nxt: int) -> str:
    return (f"          python-{prev}   [{cpu:03d}] d..2. {1000 + t_us / 1e6:.6f}: sched_switch: "
            f"prev_comm=python prev_pid={prev} prev_prio=120 prev_state={state} ==> "
            f"next_comm=python next_pid={nxt} next_prio=120")


# CPU 0: the forwarder (7) runs 10 us, rank 8 runs 200 us, the forwarder 100 us, rank 8 40 us,
# the forwarder again. CPU 1: rank 9 alone, switching to idle (0) and back.
TRACE = "\n".join([
    "# tracer: nop",
    _switch(0, 0, 5, "R", 7),
    _switch(0, 10, 7, "R", 8),
    _switch(0, 210, 8, "R", 7),
    _switch(0, 310, 7, "R", 8),
    _switch(0, 350, 8, "S", 7),
    _switch(1, 0, 0, "R", 9),
    _switch(1, 300, 9, "S", 0),
    _switch(1, 360, 0, "R", 9),
]) + "\n"


def test_turns_are_cut_from_switch_to_switch_per_thread():
    runs, span = sched_trace.turns(TRACE)
    assert abs(span - 360e-6) < 1e-9
    fwd = [(cpu, round((e - s) * 1e6), how) for cpu, s, e, how in runs[7]]
    assert fwd == [(0, 10, "R"), (0, 100, "R")]
    assert [(round((e - s) * 1e6), how) for _, s, e, how in runs[8]] == [(200, "R"), (40, "S")]
    assert [(round((e - s) * 1e6), how) for _, s, e, how in runs[9]] == [(300, "S")]
    assert 5 not in runs  # its turn began before the trace did


def test_the_report_names_the_poller_its_waits_and_who_ran_meanwhile(capsys):
    runs, span = sched_trace.turns(TRACE)
    sched_trace.report(runs, span, {7: "forwarder", 8: "low:0", 9: "high:0"})
    out = capsys.readouterr().out
    assert "forwarder       7:  30.6% of a core, 2 turns" in out
    assert "high:0       9:  83.3% of a core, 1 turns" in out
    assert "ended {'S': 1}" in out
    # One wait of 200 us, after a turn of 10 us, while low:0 had the core.
    assert "forwarder poller 7: waits between turns median 200" in out
    assert "waits of 150-300 us: 1, after its own turns of median 10 us" in out
    assert "low:0 200" in out
