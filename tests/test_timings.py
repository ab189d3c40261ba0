"""How long a notebook takes: estimates from the workload and a GPU's datasheet, labelled so;
the colab scale sized for a Colab session."""
import re
from pathlib import Path

import pytest

from robustkit import config, timings, workload, workload_prompts
from robustkit.device import GB, GPU
from robustkit.fva import method as fva_method
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
    seconds, how = timings.MEASURED[("notebook 01", "tiny", "CPU")]  # the results page's run_times.csv
    shown = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
    assert timings.expected_time("01", "tiny") == f"about {shown} at tiny (measured: {how})"
    assert "no measured time at small on a CPU" in timings.expected_time("00", "small")


def test_the_readmes_notebook_table_shows_the_measured_cpu_times():
    """The README's tiny column is run_times.csv's, so a new CI measurement cannot leave it stale."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    shown = dict(re.findall(r"^\| (0\d) \| \[.*?\]\(notebooks/.*?\) \| .*? \| ([^|]+?) \| [^|]+ \|$", readme, re.M))
    assert len(shown) == 9, shown
    for notebook, text in shown.items():
        seconds, _ = timings.MEASURED[(f"notebook {notebook}", "tiny", "CPU")]
        assert text == (f"{seconds:.0f} s" if seconds < 60 else f"{seconds / 60:.1f} min"), notebook


def test_every_prompt_is_counted_as_its_method_builds_it_today():
    """The staged token counts were made on the prompts the methods build now: editing one (a template in
    fva.method, reader.READER_INSTRUCTION …) fails here until the counts are restaged."""
    skeletons = workload.prompt_skeletons()
    stale = workload_prompts.stale(skeletons)
    assert not stale, (f"prompts {stale} changed since robustkit/workload_prompts.py's STAGED counted them: "
                       "run `python -m robustkit.workload` and paste the table it prints over STAGED")
    assert set(workload_prompts.STAGED) == set(skeletons), "STAGED counts a prompt the workload no longer has"


@pytest.fixture
def recount(monkeypatch):
    """Prompts the workload counts afresh, by a stand-in for the tokenizer (1,000 tokens each)."""
    counted = []
    monkeypatch.setattr(workload_prompts, "count", lambda prompts: counted.extend(prompts) or
                        {name: 1000.0 for name in prompts})
    workload.overheads.cache_clear()
    yield counted
    workload.overheads.cache_clear()


def test_an_edited_prompt_changes_the_workload_derived_from_it(monkeypatch, recount):
    before = timings.estimate_minutes("05", "colab", "T4")
    kill = [w for w in notebook_work("05", "colab") if w.what == "FVA kill queries"]
    assert recount == []  # every count staged
    monkeypatch.setattr(fva_method, "KILL_PROMPT", fva_method.KILL_PROMPT + " Think step by step.")
    workload.overheads.cache_clear()
    edited = [w for w in notebook_work("05", "colab") if w.what == "FVA kill queries"]
    assert recount == ["kill"]  # counted afresh, the others read from STAGED
    assert edited[0].tokens_in - kill[0].tokens_in == round(1000 - workload_prompts.STAGED["kill"][0])
    assert timings.estimate_minutes("05", "colab", "T4") > before


@pytest.mark.slow
def test_the_staged_counts_are_the_tokenizers():
    """Each staged count is SmolLM2's tokenizer on its prompt rendered as the generator renders it
    (the tokenizer alone, from the shipped GGUF, about 10 s)."""
    skeletons = workload.prompt_skeletons()
    assert workload_prompts.count(skeletons) == {name: workload_prompts.STAGED[name][0] for name in skeletons}
