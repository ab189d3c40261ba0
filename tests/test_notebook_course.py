"""The notebooks as a course, read from their files (nothing executes): each of 01-08 writes its
method's core out and checks it equal to the package, every exercise has a solution (collapsed, run
in CI) and, where it asks for a guess, a check; every glossary link lands on a term."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from robustkit.course import GLOSSARY_URL, github_anchor

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
GLOSSARY = ROOT / "docs" / "glossary.md"
GLOSSARY_LINK = re.compile(r"\(" + re.escape(GLOSSARY_URL) + r"#([^)\s]+)\)")
# collapsed in Jupyter (jupyter), Colab (cellView) and on the course site (the hide-cell tag)
SOLUTION_METADATA = {"tags": ["solution", "hide-cell"], "cellView": "form",
                     "jupyter": {"source_hidden": True, "outputs_hidden": True}}


def _cells(path: Path) -> list[dict]:
    cells = json.loads(path.read_text())["cells"]
    return [{**cell, "source": "".join(cell["source"])} for cell in cells]


def _glossary_anchors() -> set[str]:
    return {github_anchor(line.lstrip("#")) for line in GLOSSARY.read_text().splitlines() if line.startswith("#")}


def _exercises(cells: list[dict]) -> list[tuple[int, list[dict]]]:
    """(exercise number, the cells from its heading to the next heading) per exercise."""
    starts = [(i, int(m.group(1))) for i, cell in enumerate(cells) if cell["cell_type"] == "markdown"
              and (m := re.match(r"### Exercise (\d+)\b", cell["source"]))]
    ends = [i for i, _ in starts[1:]] + [len(cells)]
    return [(number, cells[i:end]) for (i, number), end in zip(starts, ends)]


def test_the_course_has_nine_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == [f"{n:02d}" for n in range(9)]


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=lambda p: p.name[:2])
def test_each_method_notebook_checks_its_written_out_core_against_the_package(path):
    code = [cell["source"] for cell in _cells(path) if cell["cell_type"] == "code"]
    written_out = [name for source in code for name in re.findall(r"^def (\w+)\(", source, re.M)]
    assert written_out, f"{path.name}: no function of its own (the method's core, written out)"
    assert any("rk.course.same(" in source for source in code), \
        f"{path.name}: its written-out core is never checked against the package (rk.course.same)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_every_exercise_has_a_collapsed_solution_and_every_guess_a_check(path):
    cells = _cells(path)
    exercises = _exercises(cells)
    assert exercises, f"{path.name}: no '### Exercise N' headings"
    assert [n for n, _ in exercises] == list(range(1, len(exercises) + 1)), f"{path.name}: exercises out of order"
    assert not any(re.search(r"^## Exercises\n+1\. ", cell["source"], re.M) for cell in cells
                   if cell["cell_type"] == "markdown"), f"{path.name}: an exercise list without solutions"
    for number, part in exercises:
        solutions = [cell for cell in part if cell["cell_type"] == "code"
                     and "solution" in cell["metadata"].get("tags", [])]
        assert len(solutions) == 1, f"{path.name} exercise {number}: {len(solutions)} solution cells"
        solution = solutions[0]
        assert solution["source"].startswith(f"# @title Solution {number} "), solution["source"][:60]
        assert {key: solution["metadata"].get(key) for key in SOLUTION_METADATA} == SOLUTION_METADATA
        guesses = [cell for cell in part if cell["cell_type"] == "code"
                   and cell["source"].startswith(f"guess_{number} = None")]
        if guesses:
            assert f"rk.course.check(guess_{number}," in solution["source"], \
                f"{path.name} exercise {number}: a guess cell but no rk.course.check of it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_glossary_links_land_on_a_term_and_every_notebook_links_some(path):
    anchors = _glossary_anchors()
    links = [anchor for cell in _cells(path) if cell["cell_type"] == "markdown"
             for anchor in GLOSSARY_LINK.findall(cell["source"])]
    assert links, f"{path.name} links no glossary term"
    assert not set(links) - anchors, f"{path.name}: links to missing glossary terms {sorted(set(links) - anchors)}"


def test_the_glossarys_own_links_land_and_it_cites_the_four_papers():
    text = GLOSSARY.read_text()
    anchors = _glossary_anchors()
    internal = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert not internal - anchors, sorted(internal - anchors)
    for paper in ("2605.01302", "2512.07015", "2603.16091", "2504.14858"):
        assert f"arXiv:{paper}" in text


def test_github_slugs_as_github_makes_them():
    assert github_anchor(" NDCG@3") == "ndcg3"
    assert github_anchor("AURC and E-AURC") == "aurc-and-e-aurc"
    assert github_anchor("The papers' methods") == "the-papers-methods"


MACHINE_PATH = re.compile(r"(?<![\w.~])(?:/(?:home|root|tmp|work|Users|opt|usr|var|private|mnt|content)/|[A-Z]:\\\\)")
PROGRESS_BAR = re.compile(r"\d+%\|")  # tqdm's "answering:  40%|████" (a frozen bar, in a saved output)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_committed_outputs_hold_no_machine_path_and_no_progress_bar(path):
    """A committed output is read on GitHub, on the course site and by every student: a path of the
    machine that ran it (its home, a checkout, site-packages) says nothing to them and leaks it,
    and a progress bar saved mid-run shows a count that stopped (CI runs with ROBUSTKIT_PROGRESS=0)."""
    for number, cell in enumerate(json.loads(path.read_text())["cells"]):
        for output in cell.get("outputs", []):
            assert "application/vnd.jupyter.widget-view+json" not in output.get("data", {}) \
                or "text/html" in output["data"], f"{path.name} cell {number}: a widget with no static view"
            texts = [output.get("text", "")] + [output.get("data", {}).get(kind, "")
                                                for kind in ("text/plain", "text/html", "text/markdown")]
            texts += output.get("traceback", [])
            for text in map("".join, texts):
                found = MACHINE_PATH.search(text)
                assert not found, f"{path.name} cell {number}: a machine path in its output: " \
                                  f"{text[max(0, found.start() - 60):found.end() + 60]!r}"
                assert not PROGRESS_BAR.search(text), f"{path.name} cell {number}: a progress bar in its output"


def test_the_machine_path_check_catches_what_it_should():
    assert MACHINE_PATH.search("saved to /work/shared/datasets/simpleqa/test.csv")
    assert MACHINE_PATH.search("File /usr/lib/python3.11/site-packages/x.py")
    assert not MACHINE_PATH.search("runs → ../runs, figures → ../figures; see data/mini/questions.jsonl")
    assert not MACHINE_PATH.search("~/.cache/robustkit and https://github.com/robustkit/robustkit/tmp/x")
    assert PROGRESS_BAR.search("answering:   0%|          | 0/168 [00:00<?, ?it/s]")
    assert not PROGRESS_BAR.search("accuracy 40% | CI 20–60%")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_links_work_where_the_notebook_is_opened(path):
    """A notebook is opened on Colab, on GitHub and copied alone into a course's empty folder:
    a relative link (../figures/…) leads nowhere there, so links name the repository."""
    relative = [link for cell in _cells(path) if cell["cell_type"] == "markdown"
                for link in re.findall(r"\]\((\.\.?/[^)]*)\)", cell["source"])]
    assert not relative, f"{path.name}: relative links {relative}"
