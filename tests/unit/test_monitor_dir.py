"""--monitor DIR writes nothing through a link, nor in a directory another user prepared."""
# ruff: noqa: D103  (test names say what they check)

from __future__ import annotations

import os

import pytest

from launch import _monitoring
from launch._monitoring import MonitorDirError


def test_a_link_in_the_directory_is_removed_not_followed(tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text("keep me")
    d = tmp_path / "mon"
    d.mkdir()
    (d / "rank-0.json").symlink_to(victim)
    (d / "matrix.npz").symlink_to(victim)
    assert _monitoring.prepare(str(d)) == 2
    assert victim.read_text() == "keep me" and not list(d.iterdir())


def test_a_directory_that_is_a_link_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "rank-0.json").write_text("someone's")
    link = tmp_path / "mon"
    link.symlink_to(target)
    with pytest.raises(MonitorDirError, match=r"--monitor .*/mon: is a symbolic link"):
        _monitoring.prepare(str(link))
    assert (target / "rank-0.json").read_text() == "someone's"


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory another user owns needs root")
def test_a_directory_of_another_user_is_refused(tmp_path):
    d = tmp_path / "theirs"
    d.mkdir()
    (d / "rank-0.json").write_text("theirs")
    os.chown(d, 65534, 65534)
    with pytest.raises(MonitorDirError, match=r"belongs to (user '\w+'|uid 65534), not to you"):
        _monitoring.prepare(str(d))
    assert (d / "rank-0.json").read_text() == "theirs"


def test_a_directory_every_user_may_write_to_is_refused(tmp_path):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)
    with pytest.raises(MonitorDirError, match="every user may write in it"):
        _monitoring.prepare(str(d))
    d.chmod(0o1777)  # with the sticky bit nobody may remove or replace another's files
    assert _monitoring.prepare(str(d)) == 0


def test_matrices_are_written_under_a_fresh_name(tmp_path):
    import numpy as np

    from place import matrices

    victim = tmp_path / "victim"
    victim.write_text("keep me")
    out = tmp_path / "matrix.npz"
    out.symlink_to(victim)
    n = 2
    per_phase = {a: np.zeros((1, n, n, matrices.BINS) if a.startswith("hist") else (1, n, n),
                             np.int64) for a in matrices.ARRAYS}
    job = matrices.JobMatrices(("low", "high"), ("all",), per_phase)
    matrices.save_matrices(job, out)
    assert victim.read_text() == "keep me" and not out.is_symlink()
    assert np.load(out)["version"] == matrices.VERSION
