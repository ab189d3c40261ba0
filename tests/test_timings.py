"""How long a notebook takes: estimates from the workload and a GPU's datasheet, labelled so;
the colab scale sized for a Colab session."""
import re
from pathlib import Path

import pytest

from robustkit import config, timings
from robustkit.device import GB, GPU
from robustkit.workload import notebook_work

NOTEBOOKS = ("00", "01", "02", "03", "04", "05", "06", "07", "08")


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_notebook_fits_a_colab_session_on_a_t4_as_estimated(notebook):
    minutes = timings.estimate_minutes(notebook, "colab", "T4")
    assert 0.5 < minutes <= 30, f"notebook {notebook} at colab: {minutes:.0f} min on a T4 (estimated)"
    assert timings.estimate_minutes(notebook, "colab", "H100") < minutes  # a faster GPU is faster


def test_the_estimate_follows_the_knobs():
    colab = config.get_scale("colab")
    more = config.with_overrides(colab, n_train_questions=2 * colab.n_train_questions)
    labels = [sum(w.items for w in notebook_work("02", s) if w.role == "teacher") for s in (colab, more)]
    assert labels[1] == pytest.approx(2 * labels[0], rel=0.01)
    assert timings.estimate_minutes("02", more, "T4") > 1.8 * timings.estimate_minutes("02", colab, "T4") - 2


def test_gpus_are_recognised_by_their_cuda_names():
    assert [timings.gpu_kind(n) for n in ("Tesla T4", "NVIDIA L4", "NVIDIA A100-SXM4-40GB",
                                         "NVIDIA A100 80GB PCIe", "NVIDIA H100 80GB HBM3")] == \
        ["T4", "L4", "A100 40GB", "A100 80GB", "H100"]
    assert timings.gpu_kind("NVIDIA GeForce RTX 4090") is None


def test_the_expected_time_says_whether_it_was_measured_or_estimated(monkeypatch):
    t4 = GPU("Tesla T4", 15 * GB, (7, 5))
    line = timings.expected_time("02", "colab", t4)
    assert "estimated" in line and "not measured" in line and "Tesla T4" in line
    assert "no estimate" in timings.expected_time("02", "colab", GPU("NVIDIA GeForce RTX 4090", 24 * GB, (8, 9)))
    monkeypatch.setitem(timings.MEASURED, ("notebook 02", "colab", "T4"), (600.0, "a T4 on 2026-12-01"))
    assert timings.expected_time("02", "colab", t4) == "about 10 min at colab (measured: a T4 on 2026-12-01)"
    seconds, how = timings.MEASURED[("notebook 00", "tiny", "CPU")]  # the results page's run_times.csv
    assert timings.expected_time("00", "tiny") == f"about {seconds:.0f} s at tiny (measured: {how})"
    assert "no measured time at small on a CPU" in timings.expected_time("00", "small")


def test_the_readmes_notebook_table_shows_the_measured_cpu_times():
    """The README's tiny column is run_times.csv's, so a new CI measurement cannot leave it stale."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    shown = dict(re.findall(r"^\| (0\d) \| \[.*?\]\(notebooks/.*?\) \| .*? \| ([^|]+?) \| [^|]+ \|$", readme, re.M))
    assert len(shown) == 9, shown
    for notebook, text in shown.items():
        seconds, _ = timings.MEASURED[(f"notebook {notebook}", "tiny", "CPU")]
        assert text == (f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"), notebook
