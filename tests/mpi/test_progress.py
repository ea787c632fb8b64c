"""Progress threads (MMPI_PROGRESS): operations complete while the program computes, results
stay right with the program's own threads, and the modes start threads where they say."""
# ruff: noqa: D103  (test names say what they check)

import pytest

pytestmark = pytest.mark.mpi


@pytest.mark.timeout(150)
@pytest.mark.parametrize("mode,low,high,extra", [
    ("all", 2, 2, ()), ("all", 1, 3, ()), ("all", 2, 2, ("--forwarders", "2")),
    ("leaders", 2, 2, ()), ("off", 2, 2, ())])
def test_progress_threads_complete_operations_while_the_program_sleeps(bridged, mode, low,
                                                                       high, extra):
    job = bridged("progress_mix.py", mode, low=low, high=high, timeout=140,
                  launcher_args=("--progress", mode, *extra))
    assert job.returncode == 0, job.output[-5000:]
    oks = [ln for ln in job.stdout.splitlines() if "progress ok" in ln]
    assert len(oks) == low + high, job.output[-4000:]
    threads = sum("thread True" in ln for ln in oks)
    assert threads == {"all": low + high, "leaders": 2, "off": 0}[mode], job.output[-3000:]


@pytest.mark.timeout(60)
def test_an_unknown_progress_mode_is_refused_by_name(bridged):
    job = bridged("progress_mix.py", "off", timeout=50, env={"MMPI_PROGRESS": "sometimes"})
    assert job.returncode != 0
    assert "MMPI_PROGRESS='sometimes'" in job.output and "leaders" in job.output, job.output
