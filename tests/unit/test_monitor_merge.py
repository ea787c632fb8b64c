"""mmpi-monitor merge: rank files checked and merged into the documented matrix.npz."""

import json

import numpy as np
import pytest
from monitor_fake import pairs_messages, rank_documents, size_bin, write_rank_files

from place import MonitorError, load_job, load_matrices, merge_rank_files, save_matrices
from place.cli import monitor_main
from place.matrices import BINS
from place.matrices import size_bin as place_size_bin
from place.report import heaviest_pairs, summarize

LAYOUT = ["low", "low", "high", "high"]
# phase, kind, src, dst, bytes: local and forwarded, user and collective, two phases
MESSAGES = [
    ("init", "coll", 0, 1, 8), ("init", "coll", 0, 2, 8), ("init", "coll", 2, 3, 8),
    ("main", "p2p", 0, 1, 100), ("main", "p2p", 0, 1, 100), ("main", "p2p", 1, 3, 1 << 20),
    ("main", "p2p", 3, 1, 1), ("main", "p2p", 2, 2, 0), ("main", "coll", 1, 3, 4096),
]


@pytest.fixture
def job_dir(tmp_path):
    write_rank_files(tmp_path, LAYOUT, MESSAGES, phases=("init", "main"))
    return tmp_path


def test_size_bins_follow_the_contract():
    for s, k in ((0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (1024, 10), (1025, 11),
                 (2**60, BINS - 1)):
        assert size_bin(s) == place_size_bin(s) == k, s


def test_every_byte_is_accounted_for_by_kind_phase_and_pair(job_dir):
    job = merge_rank_files(job_dir)
    assert job.layout == tuple(LAYOUT) and job.phases == ("init", "main")
    p2p, coll = job.matrix("p2p_bytes"), job.matrix("coll_bytes")
    assert p2p[0, 1] == 200 and p2p[1, 3] == 1 << 20 and p2p[3, 1] == 1 and p2p[2, 2] == 0
    assert job.matrix("p2p_msgs")[0, 1] == 2 and job.matrix("p2p_msgs")[2, 2] == 1
    assert p2p.sum() == 200 + (1 << 20) + 1
    assert coll.sum() == 8 * 3 + 4096
    assert job.matrix("coll_bytes", "init").sum() == 24
    assert job.matrix("coll_bytes", "main")[1, 3] == 4096
    assert job.matrix("hist_p2p")[1, 3, 20] == 1 and job.matrix("hist_p2p")[0, 1, 7] == 2
    assert job.matrix("hist_coll").sum() == job.matrix("coll_msgs").sum() == 4
    fwd = job.forwarded
    assert fwd[1, 3] and fwd[3, 1] and not fwd[0, 1] and not fwd[2, 3]
    assert p2p[fwd].sum() == (1 << 20) + 1 and coll[fwd].sum() == 8 + 4096


def test_phases_merge_by_name_and_repeated_names_add_up(tmp_path):
    docs = rank_documents(["low", "high"], [("a", "p2p", 0, 1, 10), ("b", "p2p", 1, 0, 20)],
                          phases=("a", "b"))
    docs[1]["phases"] = docs[1]["phases"][::-1]  # another order on rank 1
    docs[0]["phases"].append(dict(docs[0]["phases"][0]))  # "a" twice on rank 0
    for d in docs:
        (tmp_path / f"rank-{d['rank']}.json").write_text(json.dumps(d))
    job = merge_rank_files(tmp_path)
    assert job.phases == ("a", "b")
    assert job.matrix("p2p_bytes", "a")[0, 1] == 20
    assert job.matrix("p2p_bytes", "b")[1, 0] == 20


def test_a_rank_without_a_phase_sent_nothing_in_it(tmp_path):
    docs = rank_documents(["low", "high"], [("x", "p2p", 1, 0, 5)], phases=("main", "x"))
    docs[0]["phases"] = docs[0]["phases"][:1]
    for d in docs:
        (tmp_path / f"rank-{d['rank']}.json").write_text(json.dumps(d))
    job = merge_rank_files(tmp_path)
    assert job.phases == ("main", "x") and job.matrix("p2p_bytes", "x")[1, 0] == 5
    assert job.matrix("p2p_bytes", "x")[0].sum() == 0


def test_the_npz_file_holds_the_documented_arrays(job_dir):
    job = merge_rank_files(job_dir)
    path = job_dir / "matrix.npz"
    save_matrices(job, path)
    with np.load(path, allow_pickle=False) as z:
        assert int(z["version"]) == 1
        assert list(z["layout"]) == LAYOUT and list(z["phases"]) == ["init", "main"]
        for name in ("p2p_msgs", "p2p_bytes", "coll_msgs", "coll_bytes"):
            assert z[name].shape == (4, 4) and z[name].dtype == np.int64
            assert z[f"phase_{name}"].shape == (2, 4, 4)
            assert (z[name] == z[f"phase_{name}"].sum(axis=0)).all()
        assert z["hist_p2p"].shape == (4, 4, 48) and z["phase_hist_coll"].shape == (2, 4, 4, 48)
        assert z["forwarded"].dtype == bool and z["forwarded"][0, 2]
    again = load_matrices(path)
    assert again.layout == job.layout and again.phases == job.phases
    for name, arr in job.per_phase.items():
        assert (again.per_phase[name] == arr).all()
    assert load_job(job_dir).phases == job.phases  # the rank files win over the npz


def test_a_directory_with_only_the_npz_is_read_from_it(job_dir, tmp_path_factory):
    other = tmp_path_factory.mktemp("copy")
    save_matrices(merge_rank_files(job_dir), other / "matrix.npz")
    assert load_job(other).matrix("p2p_bytes")[1, 3] == 1 << 20


def test_summary_names_totals_forwarded_share_and_heaviest_pairs(job_dir):
    text = summarize(merge_rank_files(job_dir))
    assert "4 ranks: low 0-1, high 2-3; phases: init, main" in text
    lines = {line.split()[0]: line for line in text.splitlines() if not line.startswith(" ")}
    assert "1.0 MiB" in lines["p2p"] and "100.0%" in lines["p2p"]  # 1 MiB + 1 B of 1 MiB+201
    assert "4.0 KiB" in lines["collectives"] and "99.6%" in lines["collectives"]
    assert "1-3*" in text and "0-1 " in text
    assert heaviest_pairs(merge_rank_files(job_dir).matrix("p2p_bytes"))[0] == (1, 3, 2**20 + 1)


def test_merge_command_writes_the_npz_and_prints_the_summary(job_dir, capsys):
    assert monitor_main(["merge", str(job_dir)]) == 0
    out = capsys.readouterr().out
    assert (job_dir / "matrix.npz").exists() and "heaviest pairs" in out
    assert monitor_main(["show", str(job_dir / "matrix.npz"), "--phase", "init"]) == 0
    assert "showing init" in capsys.readouterr().out


def test_merge_of_the_pairs_program(tmp_path):
    write_rank_files(tmp_path, ["low"] * 4 + ["high"] * 4, pairs_messages(8))
    job = merge_rank_files(tmp_path)
    b = job.matrix("p2p_bytes")
    assert b[job.forwarded].sum() == b.sum() == 8 * 3 * (1 << 20)


# -- refused input: every error names the file and the field ------------------------------------
def _write(tmp_path, docs):
    for d in docs:
        (tmp_path / f"rank-{d['rank']}.json").write_text(json.dumps(d))


def _docs():
    return rank_documents(LAYOUT, MESSAGES, phases=("init", "main"))


def _set(path, value):
    def change(docs):
        target = docs
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop(3), "no file for rank 3 of 4"),
    (lambda d: d.pop(1) and d.pop(1), "no file for ranks 1-2 of 4"),
    (_set([2, "size"], 5), "rank-2.json: size 5 differs from 4 in"),
    (_set([1, "layout"], ["low", "high", "high", "high"]), "rank-1.json: layout [\"low\", "
                                                             "\"high\", \"high\", \"high\"] "
                                                             "differs from [\"low\", \"low\""),
    (_set([2, "layout"], ["low", "low", "high", "low"]), "rank-2.json: layout"),
    (_set([0, "version"], 2), "rank-0.json: version 2 is not supported"),
    (_set([0, "cluster"], "high"), "rank-0.json: cluster 'high' differs from layout[0]"),
    (_set([0, "layout"], ["low", "low", "mid", "high"]), "layout[2]: unknown cluster 'mid'"),
    (_set([0, "extra"], 1), "rank-0.json: unknown field 'extra'"),
    (lambda d: d[0].pop("phases"), "rank-0.json: missing field 'phases'"),
    (_set([1, "phases", 1, "p2p_bytes"], [0, 0, 0]), "rank-1.json: phases[1].p2p_bytes: "
                                                     "expected a list of 4 counts"),
    (_set([1, "phases", 0, "coll_msgs", 2], -1), "phases[0].coll_msgs[2]: negative count -1"),
    (_set([1, "phases", 0, "coll_bytes", 2], 1.5), "phases[0].coll_bytes: expected whole"),
    (_set([1, "phases", 1, "hist_p2p", 3], [0] * 47), "phases[1].hist_p2p: expected 4 lists "
                                                      "of 48 counts"),
    (_set([1, "phases", 1, "p2p_msgs", 3], 2), "rank-1.json: phases[1].hist_p2p[3]: adds up "
                                               "to 1 messages, but p2p_msgs[3] is 2"),
    (_set([1, "phases", 1, "p2p_bytes", 3], 100), "phases[1].p2p_bytes[3]: 100 bytes cannot "
                                                  "be the size"),
    (_set([0, "phases", 1, "name"], ""), "phases[1].name: expected a non-empty string"),
    (_set([0, "phases", 1, "bogus"], 0), "phases[1]: unknown field 'bogus'"),
])
def test_bad_rank_files_are_refused_naming_file_and_field(tmp_path, change, message):
    docs = _docs()
    change(docs)
    _write(tmp_path, docs)
    with pytest.raises(MonitorError, match=None) as err:
        merge_rank_files(tmp_path)
    assert message in str(err.value)


def test_a_rank_file_whose_number_is_not_its_name_is_refused(tmp_path):
    docs = _docs()
    _write(tmp_path, docs)
    (tmp_path / "rank-3.json").write_text(json.dumps(docs[2]))
    with pytest.raises(MonitorError, match=r"rank-3.json: rank 2 does not match the file name"):
        merge_rank_files(tmp_path)


def test_a_rank_beyond_the_size_and_a_rank_twice_are_refused(tmp_path):
    docs = _docs()
    _write(tmp_path, docs)
    extra = dict(docs[0], rank=4)
    (tmp_path / "rank-4.json").write_text(json.dumps(extra))
    with pytest.raises(MonitorError, match="rank 4 is out of range for size 4"):
        merge_rank_files(tmp_path)
    (tmp_path / "rank-4.json").unlink()
    (tmp_path / "rank-03.json").write_text(json.dumps(docs[3]))
    with pytest.raises(MonitorError, match="rank-03.json and .*rank-3.json both hold rank 3"):
        merge_rank_files(tmp_path)


def test_truncated_json_and_odd_names_are_refused(tmp_path):
    _write(tmp_path, _docs())
    (tmp_path / "rank-2.json").write_text('{"version": 1, "rank"')
    with pytest.raises(MonitorError, match="rank-2.json: not valid JSON: .*line 1"):
        merge_rank_files(tmp_path)
    (tmp_path / "rank-2.json").write_text(json.dumps(_docs()[2]))
    (tmp_path / "rank-two.json").write_text("{}")
    with pytest.raises(MonitorError, match="rank-two.json: not a rank file name"):
        merge_rank_files(tmp_path)


def test_an_empty_or_missing_directory_is_refused(tmp_path, capsys):
    with pytest.raises(MonitorError, match="no rank-\\*.json files"):
        merge_rank_files(tmp_path)
    with pytest.raises(MonitorError, match="not a monitor directory"):
        load_job(tmp_path)
    assert monitor_main(["merge", str(tmp_path / "nope")]) == 1
    assert "nope: not a directory" in capsys.readouterr().err


def test_an_unknown_phase_is_refused(job_dir, capsys):
    assert monitor_main(["show", str(job_dir), "--phase", "solve"]) == 1
    assert "no phase named 'solve' (phases: init, main)" in capsys.readouterr().err


def test_a_file_that_is_not_a_matrix_file_is_refused(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(MonitorError, match="no array 'version'"):
        load_matrices(tmp_path / "x.npz")
    (tmp_path / "y.npz").write_text("hello")
    with pytest.raises(MonitorError, match="cannot read it as a matrix file"):
        load_matrices(tmp_path / "y.npz")
