"""The disk the kit uses: a scale's runs and the cache sized folder by folder, a notebook's measured
need checked against the free space, a scale's or a method's runs removed (listed first, lock files
kept, refused while a process builds there), and the README's disk table kept to the measurements."""
import csv
import re
import shutil
from pathlib import Path

import pytest

from robustkit import disk, locks
from robustkit.__main__ import main


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A runs folder and a cache of known sizes: (runs/tiny, cache)."""
    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path / "cache"))
    runs, cache = tmp_path / "runs" / "tiny", tmp_path / "cache"
    files = {runs / "alignrag" / "critic-cft" / "adapter_model.safetensors": 4000,
             runs / "alignrag" / "critic-cft.manifest.json": 100, runs / "corm" / "critics" / "corm" / "head.pt": 300,
             runs / "corm" / "labels.jsonl": 50, tmp_path / "runs" / "small" / "corm" / "labels.jsonl": 999,
             cache / "llm_calls.sqlite": 70, cache / "models" / "smollm" / "model.safetensors": 2000}
    for path, size in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)
    for lock in (runs / "alignrag" / ".critic-cft.lock", runs / "corm" / "critics" / ".corm.lock"):
        lock.touch()
    return runs, cache


def test_usage_sizes_each_folder_of_the_scale_and_of_the_cache(folders):
    runs, cache = folders
    table = disk.usage("tiny").set_index("where")
    assert list(table.index) == [str(runs / "alignrag"), str(runs / "corm"), str(cache / "models"),
                                 str(cache / "llm_calls.sqlite")]  # largest first, another scale's not counted
    assert table["bytes"].tolist() == [4100, 350, 2000, 70] and table["files"].tolist() == [2, 2, 1, 1]
    assert table["part"].tolist() == ["runs", "runs", "cache", "cache"]
    assert "converted" in table.loc[str(cache / "models"), "holds"]


def test_a_measured_row_records_what_runs_and_the_cache_hold_now(folders, capsys):
    main(["disk", "--scale", "tiny", "--row", "notebook 03", "--measured-on", "a test, cold"])
    (row,) = csv.DictReader([",".join(["what", "scale", "runs_bytes", "cache_bytes", "measured_on"]),
                             capsys.readouterr().out.strip()])
    assert row == {"what": "notebook 03", "scale": "tiny", "runs_bytes": "4450", "cache_bytes": "2070",
                   "measured_on": "a test, cold"}


def test_clean_lists_what_goes_and_removes_it_only_when_asked(folders, capsys):
    runs, cache = folders
    main(["clean", "--scale", "tiny", "--method", "alignrag"])
    out = capsys.readouterr().out
    assert "critic-cft" in out and "nothing removed (add --yes" in out
    assert (runs / "alignrag" / "critic-cft" / "adapter_model.safetensors").exists()
    main(["clean", "--scale", "tiny", "--method", "alignrag", "--yes"])
    assert "removed 0.00 GB in 2 files" in capsys.readouterr().out
    # only the lock file is left (deleting one another process holds would let two processes build at once)
    assert [p.name for p in (runs / "alignrag").rglob("*")] == [".critic-cft.lock"]
    assert (runs / "corm" / "labels.jsonl").exists() and (cache / "llm_calls.sqlite").exists()
    table = disk.clean("tiny", remove=True)  # the whole scale: every method's folder
    assert [Path(w).name for w in table["where"]] == ["alignrag", "corm"]
    assert sorted(p.name for p in runs.rglob("*") if p.is_file()) == [".corm.lock", ".critic-cft.lock"]
    assert (runs.parent / "small" / "corm" / "labels.jsonl").exists()  # another scale's runs stay


def test_clean_refuses_an_unknown_method_and_a_folder_being_built_in(folders):
    runs, _ = folders
    with pytest.raises(ValueError, match=r"no folder .*nope: the methods with runs at tiny are \['alignrag', 'corm'\]"):
        disk.clean("tiny", "nope")
    with locks.exclusive(runs / "corm" / "critics" / "corm", "training the corm critic"):
        with pytest.raises(disk.FolderInUse, match="training the corm critic"):
            disk.clean("tiny", "corm", remove=True)
    assert (runs / "corm" / "critics" / "corm" / "head.pt").exists()  # refused before anything went


def test_a_notebook_is_warned_only_when_a_disk_lacks_its_measured_need(folders, monkeypatch):
    runs, cache = folders
    monkeypatch.delitem(disk.MEASURED_DISK, ("notebook 07", "tiny"), raising=False)
    assert disk.space_warning("07", "tiny") is None  # nothing measured: no number to check against
    monkeypatch.setitem(disk.MEASURED_DISK, ("notebook 07", "tiny"), (4450, 2070, "a test row"))
    assert disk.space_warning("07", "tiny") is None  # all of it is there already
    free = shutil.disk_usage(runs).free
    monkeypatch.setitem(disk.MEASURED_DISK, ("notebook 07", "tiny"), (4450 + free + 10**9, 2070, "a test row"))
    warning = disk.space_warning("07", "tiny")
    assert "LOW DISK" in warning and "notebook 07 at tiny" in warning and "a test row" in warning
    assert str(runs) in warning and "python -m robustkit clean" in warning


def test_the_readmes_disk_table_shows_the_measured_run():
    """The README's tiny row is run_disk.csv's notebook-08 row, or says "not yet measured" while there is none."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    (row,) = re.findall(r"^\| `tiny` \|.*$", readme.split("\n## Disk\n")[1].split("\n## ")[0], re.M)
    measured = disk.MEASURED_DISK.get(("notebook 08", "tiny"))
    if measured is None:
        assert "not yet measured" in row
    else:
        runs, cache, _ = measured
        assert f"| {runs / 1e9:.2f} GB | {cache / 1e9:.2f} GB |" in row
