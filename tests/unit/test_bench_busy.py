"""mmpi-bench on a busy machine: it says so before measuring and in the report (no MPI)."""

import json

import pytest

from bench import _busy, cli, report


def test_others_running_reads_the_runnable_count_less_the_reader(tmp_path):
    f = tmp_path / "loadavg"
    f.write_text("45.10 30.02 12.00 46/812 99999\n")
    assert _busy.others_running(samples=3, interval=0, path=str(f)) == 45
    f.write_text("0.10 0.20 0.30 1/812 99999\n")
    assert _busy.others_running(samples=1, path=str(f)) == 0
    assert _busy.others_running(path=str(tmp_path / "none")) is None


def test_the_warning_starts_where_others_fill_the_cpus():
    assert _busy.warning(None, 2) is None
    assert _busy.warning(1, 2) is None
    text = _busy.warning(45, 2)
    assert "45 other runnable processes on 2 CPUs" in text and "not trustworthy" in text


def _one_barrier(run, timeout, **kw):
    out = cli.Outcome(run, status="ok", returncode=0, env={"type": "env"})
    out.results = [{"type": "result", "bench": "barrier", "size": 0, "unit": "us",
                    "value": 5.0, "samples": [5.0], "iters": 10}]
    return out


@pytest.mark.parametrize("others, warned", [(45, True), (0, False)])
def test_a_busy_machine_is_named_on_stderr_in_the_tables_and_the_json(
        monkeypatch, tmp_path, capsys, others, warned):
    monkeypatch.setattr(_busy, "others_running", lambda *a, **k: others)
    monkeypatch.setattr(_busy, "cpus", lambda: 2)
    monkeypatch.setattr(cli, "run_job", _one_barrier)
    assert cli.main(["barrier", "--json", str(tmp_path / "o.json"), "-q"]) == 0
    cap = capsys.readouterr()
    assert ("mmpi-bench: warning: 45 other runnable processes on 2 CPUs" in cap.err) == warned
    assert ("# WARNING: a busy machine" in cap.out) == warned
    doc = json.loads((tmp_path / "o.json").read_text())
    assert doc["environment"]["busy"]["most_others_running"] == others
    assert (doc["environment"]["busy"]["warning"] is not None) == warned
    # the replayed tables say it too
    monkeypatch.setattr(cli, "run_job", lambda *a, **k: pytest.fail("a job was started"))
    assert cli.main(["--from-json", str(tmp_path / "o.json")]) == 0
    assert ("# WARNING: a busy machine" in capsys.readouterr().out) == warned
    assert report.format_header({}, None).count("WARNING") == 0
