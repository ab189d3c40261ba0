"""The one ``stage`` mechanism: reuse on matching inputs, rebuild otherwise, never a mix."""
import json

import pytest

from robustkit.artifacts import checksum, is_current, manifest_path, read_manifest, stage


def _writer(calls, text="v1"):
    def build(out, scratch):
        calls.append(scratch)
        out.write_text(text)
        return {"built": text}
    return build


def test_builds_once_and_reuses_on_matching_inputs(tmp_path):
    calls = []
    path = tmp_path / "a.txt"
    assert stage(path, {"x": 1}, _writer(calls), lambda p: p.read_text()) == "v1"
    assert stage(path, {"x": 1}, _writer(calls, "v2"), lambda p: p.read_text()) == "v1"
    assert len(calls) == 1
    manifest = read_manifest(path)
    assert manifest["inputs"] == {"x": 1} and manifest["stats"] == {"built": "v1"}
    assert manifest["sha256"] == checksum(path)
    assert not (tmp_path / "a.txt.partial").exists()  # scratch is cleared once the artifact is done


def test_other_inputs_rebuild(tmp_path):
    calls = []
    path = tmp_path / "a.txt"
    stage(path, {"x": 1}, _writer(calls), lambda p: p.read_text())
    assert stage(path, {"x": 2}, _writer(calls, "v2"), lambda p: p.read_text()) == "v2"
    assert read_manifest(path)["inputs"] == {"x": 2} and len(calls) == 2


def test_bytes_that_do_not_match_the_manifest_rebuild(tmp_path):
    calls = []
    path = tmp_path / "a.txt"
    stage(path, {"x": 1}, _writer(calls), lambda p: p.read_text())
    path.write_text("edited by hand")
    assert not is_current(path, {"x": 1})
    assert stage(path, {"x": 1}, _writer(calls), lambda p: p.read_text()) == "v1"
    assert len(calls) == 2


def test_a_crashed_build_leaves_the_old_artifact_and_keeps_its_progress(tmp_path):
    path = tmp_path / "a.txt"
    stage(path, {"x": 1}, _writer([]), lambda p: p.read_text())
    seen = []

    def crashes(out, scratch):
        (scratch / "progress").write_text("half")
        out.write_text("half-written")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stage(path, {"x": 2}, crashes, lambda p: p.read_text())
    assert path.read_text() == "v1" and is_current(path, {"x": 1})  # old artifact, old manifest

    def resumes(out, scratch):
        seen.append((scratch / "progress").read_text())
        out.write_text("v2")

    assert stage(path, {"x": 2}, resumes, lambda p: p.read_text()) == "v2"
    assert seen == ["half"]  # the same inputs resumed from their scratch


def test_scratch_of_other_inputs_is_never_resumed(tmp_path):
    path = tmp_path / "a.txt"

    def crashes(out, scratch):
        (scratch / "progress").write_text("from x=1")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stage(path, {"x": 1}, crashes, lambda p: p.read_text())
    seen = []

    def build(out, scratch):
        seen.append(sorted(p.name for p in scratch.iterdir()))
        out.write_text("v2")

    stage(path, {"x": 2}, build, lambda p: p.read_text())
    assert seen == [["inputs.json"]]


def test_an_artifact_without_manifest_is_rebuilt(tmp_path):
    """A crash between putting the artifact in place and writing its manifest."""
    calls = []
    path = tmp_path / "a.txt"
    stage(path, {"x": 1}, _writer(calls), lambda p: p.read_text())
    manifest_path(path).unlink()
    stage(path, {"x": 1}, _writer(calls), lambda p: p.read_text())
    assert len(calls) == 2


def test_folder_artifacts(tmp_path):
    path = tmp_path / "model"

    def build(out, scratch):
        (out / "sub").mkdir(parents=True)
        (out / "sub" / "w.bin").write_bytes(b"\x00\x01")
        (out / "config.json").write_text(json.dumps({"a": 1}))

    assert stage(path, {"x": 1}, build, lambda p: p) == path
    assert is_current(path, {"x": 1})
    (path / "sub" / "w.bin").write_bytes(b"\x00\x02")
    assert not is_current(path, {"x": 1})
    stage(path, {"x": 1}, build, lambda p: p)  # rebuilt and swapped in place
    assert (path / "sub" / "w.bin").read_bytes() == b"\x00\x01" and is_current(path, {"x": 1})


def test_a_build_that_writes_nothing_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="without writing its artifact"):
        stage(tmp_path / "a.txt", {"x": 1}, lambda out, scratch: None, lambda p: p)


def test_a_figure_and_its_table_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt
    import pandas as pd

    from robustkit import plots

    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(tmp_path))
    fig, table = plt.figure(), pd.DataFrame({"x": [1, 2]})
    assert plots.save(fig, "f", table) == tmp_path / "f.png"
    png = (tmp_path / "f.png").read_bytes()
    assert png.startswith(b"\x89PNG") and pd.read_csv(tmp_path / "f.csv").equals(table)

    def dies_midway(out, **kwargs):
        out.write(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr(fig, "savefig", dies_midway)
    with pytest.raises(KeyboardInterrupt):
        plots.save(fig, "f", pd.DataFrame({"x": [3]}))
    assert (tmp_path / "f.png").read_bytes() == png and pd.read_csv(tmp_path / "f.csv").equals(table)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.csv", "f.png"]
    plt.close(fig)


def test_load_only_reads_a_current_artifact_and_refuses_to_build_a_missing_or_stale_one(tmp_path, monkeypatch):
    import robustkit as rk
    from robustkit.artifacts import NotStaged, load_only

    calls, path, read = [], tmp_path / "critic.txt", lambda p: p.read_text()
    with load_only():
        with pytest.raises(NotStaged, match="not built yet"):
            stage(path, {"seed": 0, "lr": 1e-3}, _writer(calls), read)
    assert not calls and not path.exists()
    stage(path, {"seed": 0, "lr": 1e-3}, _writer(calls), read)  # outside the block: built once
    with rk.load_only():
        assert stage(path, {"seed": 0, "lr": 1e-3}, _writer(calls, "v2"), read) == "v1"
        with pytest.raises(NotStaged, match=r"other inputs \(differing: lr\)"):
            stage(path, {"seed": 0, "lr": 5e-4}, _writer(calls, "v2"), read)
        with load_only(False):  # lifted inside a block
            assert stage(path, {"seed": 1, "lr": 1e-3}, _writer(calls, "v3"), read) == "v3"
    assert len(calls) == 2 and read_manifest(path)["inputs"] == {"seed": 1, "lr": 1e-3}
    path.write_text("edited by hand")
    monkeypatch.setenv("ROBUSTKIT_LOAD_ONLY", "1")  # the whole process, as a notebook or CLI sets it
    with pytest.raises(NotStaged, match="checksum no longer matches"):
        stage(path, {"seed": 1, "lr": 1e-3}, _writer(calls, "v4"), read)
    assert len(calls) == 2 and path.read_text() == "edited by hand"
    assert issubclass(NotStaged, FileNotFoundError)  # the command line prints its message, no traceback


def test_load_only_still_answers_new_questions(tmp_path):
    """Load-only never trains, but a stage that answers or scores questions (``trains=False``) is
    built there as anywhere: a researcher's new questions get answered by the staged critic."""
    from robustkit.artifacts import NotStaged, load_only

    calls, read = [], lambda p: p.read_text()
    with load_only():
        with pytest.raises(NotStaged):
            stage(tmp_path / "critic", {"lr": 1e-3}, _writer(calls), read)
        assert stage(tmp_path / "answers.jsonl", {"questions": ["q1"]}, _writer(calls), read, trains=False) == "v1"
        assert stage(tmp_path / "answers.jsonl", {"questions": ["q1"]}, _writer(calls, "v2"), read,
                     trains=False) == "v1"  # reused as any stage is
    assert len(calls) == 1 and not (tmp_path / "critic").exists()
