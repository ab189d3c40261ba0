"""The embedded teaching set passes its validator, and the validator catches each kind of fault."""
import json
import shutil

import pytest

from robustkit.data import (PERTURBATION_TYPES, MINI_DIR, mini_corpus, mini_misconceptions,
                            mini_multihop, mini_questions, mini_rewrites)
from robustkit.data.check import check_mini, rewrite_violations, wh_word


def test_mini_is_valid_and_meets_minima():
    report = check_mini(MINI_DIR)
    assert report.ok, report.summary()
    questions = mini_questions()
    assert len(questions) >= 150 and len(mini_questions("test")) >= 50
    assert len({q.domain for q in questions}) >= 10
    assert len(mini_corpus()) >= 900
    assert len(mini_misconceptions()) >= 60 and len(mini_multihop()) >= 40
    per_question = {(r.question_id, r.type) for r in mini_rewrites()}
    assert per_question == {(q.id, t) for q in questions for t in PERTURBATION_TYPES}


@pytest.fixture
def broken(tmp_path):
    """A copy of data/mini whose files a test may corrupt (the manifest check is re-based)."""
    root = tmp_path / "mini"
    shutil.copytree(MINI_DIR, root)

    def edit(name, change):
        path = root / name
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        change(rows)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        (root / "SHA256SUMS").unlink()
        return [v for v in check_mini(root).violations if not v.startswith("SHA256SUMS")]
    return edit


def test_gold_passage_without_answer_is_caught(broken):
    def drop_answer(rows):
        rows[0]["title"], rows[0]["text"] = "Filler", " ".join(["filler"] * 50)
    violations = broken("passages.jsonl", drop_answer)
    assert any("does not contain the answer" in v for v in violations)


def test_unknown_passage_and_duplicate_id_are_caught(broken):
    def corrupt(rows):
        rows[0]["gold_ids"] = ["p-nowhere"]
        rows[1]["id"] = rows[2]["id"]
    violations = broken("questions.jsonl", corrupt)
    assert any("unknown passage id 'p-nowhere'" in v for v in violations)
    assert any("duplicate id" in v for v in violations)


def test_answer_leak_in_premise_passage_is_caught(broken):
    question = mini_questions()[0]
    def leak(rows):
        premise = next(r for r in rows if r["id"] == f"p-{question.id}-fp")
        premise["text"] += f" It mentions {question.answer}."
    assert any("premise passage" in v for v in broken("passages.jsonl", leak))


def test_manifest_mismatch_is_caught(tmp_path):
    root = tmp_path / "mini"
    shutil.copytree(MINI_DIR, root)
    with open(root / "questions.jsonl", "a") as f:
        f.write("\n")
    assert any("checksum mismatch" in v for v in check_mini(root).violations)


@pytest.mark.parametrize("rewrite,wrong,kind,expected", [
    ("which city is the capital of france", None, "topical_distraction", []),
    ("name the capital of france", None, "topical_distraction", ["wh-word"]),
    ("which city is the capital of france, actually", None, "topical_distraction", ["hedging"]),
    ("which city is the capital of france, paris or lyon", None, "topical_distraction", ["leaks"]),
    ("which city is the capital of france after lyon's rise", "Marseille", "false_premise",
     ["wrong-belief entity"]),
    ("which city is the capital of france after paris", "Paris", "false_premise",
     ["leaks", "alias"]),
])
def test_rewrite_rules_one_case_each(rewrite, wrong, kind, expected):
    problems = rewrite_violations("which city is the capital of france", ["Paris"], rewrite,
                                  wrong, kind)
    assert len(problems) == len(expected)
    assert all(e in p for e, p in zip(expected, problems))


def test_wh_word_prefers_multiword():
    assert wh_word("how many legs does a spider have") == "how many"
    assert wh_word("in what year did it end") == "what"
