"""``python -m robustkit doctor``: a failing check is reported and the others still run, the
command line's exit status says so, a typo in ``--only`` or ``--dataset`` is refused. The real
doctor runs in tests/test_packaging.py, from the installed wheel at the ``colab`` settings."""
import os

import pytest

from robustkit import config, doctor
from robustkit.__main__ import main as cli


@pytest.fixture
def user_folders(tmp_path, monkeypatch):
    """The user's runs and figures, and a cache of the test's own (the doctor empties its folder there)."""
    user = tmp_path / "user"
    monkeypatch.setenv("ROBUSTKIT_RUNS", str(user / "runs"))
    monkeypatch.setenv("ROBUSTKIT_FIGURES", str(user / "figures"))
    monkeypatch.setenv("ROBUSTKIT_HOME", str(user / "home"))
    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path / "cache"))
    return user


def test_a_failing_check_is_reported_and_the_others_still_run(user_folders, monkeypatch, capsys):
    ran, seen_runs = [], []

    def passes(scale):
        ran.append("passes")
        seen_runs.append(os.environ["ROBUSTKIT_RUNS"])
        return doctor.Outcome("ran", calls=(2, 5))

    def fails(scale):
        ran.append("fails")
        raise ValueError("the critic diverged\nsecond line of the message")

    def skips(scale):
        ran.append("skips")
        raise doctor.Skipped("no GPU here")

    def passes_too(scale):
        ran.append("passes too")
        return doctor.Outcome("ran as well")

    monkeypatch.setattr(doctor, "CHECKS", {"a": passes, "b": fails, "c": skips, "d": passes_too})
    table = doctor.run("tiny")
    assert ran == ["passes", "fails", "skips", "passes too"]
    assert list(table["status"]) == ["pass", "FAIL", "skip", "pass"]
    failed = table.set_index("check").loc["b"]
    assert failed["detail"] == "ValueError: the critic diverged"
    assert table.set_index("check").loc["c", "detail"] == "skipped: no GPU here"
    assert table.set_index("check").loc["a", "LM calls new/replayed"] == "2/5"
    assert (table["seconds"] >= 0).all() and (table["peak RSS GB"] > 0).all()
    # the checks wrote under the doctor's folder; the user's settings are back
    assert seen_runs == [str(user_folders.parent / "cache" / "doctor" / "runs")]
    assert os.environ["ROBUSTKIT_RUNS"] == str(user_folders / "runs")
    assert os.environ["ROBUSTKIT_FIGURES"] == str(user_folders / "figures")
    assert not user_folders.exists()

    capsys.readouterr()
    assert cli(["doctor", "--only", "a,b"]) == 1  # exit status 1: a check failed
    out = capsys.readouterr().out
    assert "doctor: 1 passed, 1 failed, 0 skipped in" in out
    assert "ValueError: the critic diverged" in out and "robustkit doctor — kit" in out
    assert cli(["doctor", "--only", "a,c"]) == 0  # a skip is no failure


def test_only_with_an_unknown_check_is_refused_naming_the_valid_ones(user_folders, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(doctor, "CHECKS", {name: ran.append for name in doctor.CHECKS})
    with pytest.raises(SystemExit) as stop:
        cli(["doctor", "--only", "corm,fvaa"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "'fvaa'" in err and "data, retrieval, generator, corm, fva, counterrefine, alignrag" in err
    assert "Traceback" not in err and not ran
    assert not (user_folders.parent / "cache" / "doctor").exists()  # refused before any work
    assert doctor.selected(" alignrag, corm ") == ["corm", "alignrag"]  # the doctor's order


def test_dataset_swaps_the_data_and_keeps_the_scales_knobs(user_folders, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(doctor, "CHECKS", {"a": lambda scale: seen.append(scale) or doctor.Outcome("ran")})
    doctor.run("colab", "a", dataset="mini")
    assert (seen[0].name, seen[0].dataset) == ("colab", "mini")
    assert seen[0].n_test_questions == config.SCALES["colab"].n_test_questions
    with pytest.raises(SystemExit) as stop:
        cli(["doctor", "--dataset", "wikipedia"])
    assert stop.value.code == 2 and "invalid choice: 'wikipedia'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown dataset 'nq' for a scale; expected one of mini, nq_open_oracle"):
        config.with_overrides("tiny", dataset="nq")


def test_a_second_doctor_cannot_wipe_the_folder_of_one_that_runs(user_folders, monkeypatch):
    """The doctor empties its folder first: it holds that folder's lock while it runs, so a second
    doctor (another notebook) waits for it instead of deleting its artifacts mid-check."""
    import fcntl

    held = []

    def check(scale):
        lock = user_folders.parent / "cache" / ".doctor.lock"
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append("running the doctor" in lock.read_text())
        finally:
            os.close(fd)
        return doctor.Outcome("ran")

    monkeypatch.setattr(doctor, "CHECKS", {"a": check})
    assert list(doctor.run("tiny")["status"]) == ["pass"] and held == [True]
