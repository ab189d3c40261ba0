"""`python -m robustkit run headtohead --questions FILE --corpus FILE`: a researcher's own data
through the chosen methods, the reference named, the report written where the user's figures go."""
import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from robustkit.__main__ import main
from robustkit.headtohead.own import _slug, _time_to_prepare
from test_audit import TOY_PASSAGES, TOY_QUESTIONS


def _write(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("argv, complaint", [
    (["run", "headtohead", "--corpus", "p.jsonl"], "--corpus needs --questions"),
    (["run", "corm", "--questions", "q.jsonl"], "--questions is for `run headtohead`, not `run corm`"),
    (["run", "headtohead", "--methods", "dense,vanilla"], r"unknown method\(s\) \['vanilla'\]"),
])
def test_the_command_refuses_what_it_cannot_run_naming_the_flag(argv, complaint, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert re.search(complaint, capsys.readouterr().err)


def test_the_time_to_prepare_is_the_measured_notebooks_or_says_it_is_not_measured():
    from robustkit.run_times import MEASURED

    corm = sum(MEASURED[(f"notebook {n}", "tiny", "CPU")][0] for n in ("00", "01", "02", "03"))
    assert _time_to_prepare(["corm"], "tiny").startswith(f"notebooks 00, 01, 02, 03, which build them, took "
                                                         f"{corm / 60:.0f} min cold in all")
    assert _time_to_prepare(["fva"], "paper").startswith("not measured at paper")
    assert _slug("My Questions (v2).jsonl") == "my-questions-v2" and _slug("???.jsonl") == "questions"


@pytest.mark.slow
def test_a_researchers_questions_and_corpus_give_a_report_against_the_chosen_reference(tmp_path):
    questions = _write(tmp_path / "composers.jsonl", TOY_QUESTIONS)
    passages = _write(tmp_path / "passages.jsonl", TOY_PASSAGES)
    env = {**os.environ, "ROBUSTKIT_FIGURES": str(tmp_path / "figures")}
    done = subprocess.run([sys.executable, "-m", "robustkit", "run", "headtohead", "--scale", "tiny",
                           "--questions", str(questions), "--corpus", str(passages), "--methods", "dense",
                           "--reference", "bm25"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    folder = tmp_path / "figures" / "headtohead-composers"
    answers = pd.read_csv(folder / "answers.csv")
    assert sorted(answers["method"].unique()) == ["bm25", "dense"]  # the reference runs though not listed
    assert len(answers) == 2 * 2 * len(TOY_QUESTIONS)  # each question clean and its hand-written rewrite
    tests = pd.read_csv(folder / "tests.csv")
    assert set(tests["reference"]) == {"bm25"} and set(tests["method"]) == {"dense"}
    report = (folder / "report.md").read_text()
    assert "every paired test against the reference, **bm25**" in report and "over " + str(passages) in report
    assert (folder / "cost.png").stat().st_size and (folder / "drops.png").stat().st_size
