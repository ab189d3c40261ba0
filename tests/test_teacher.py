import json

import pytest

from robustkit.data import DataError, Passage, Corpus, mini_corpus, mini_questions
from robustkit.retrieval import DenseRetriever
from robustkit.teacher import label, load_labels, robustness


@pytest.fixture(scope="module")
def setup(embedder):
    corpus = mini_corpus()
    questions = mini_questions("train")[:3]
    perturbations = [{"question_id": q.id, "k": k, "type": "false_premise",
                      "text": f"{q.text} {extra}"}
                     for q in questions for k, extra in enumerate(["in the old days", "as i recall"])]
    return corpus, questions, perturbations, DenseRetriever(corpus, model=embedder)


def test_labels_follow_the_definition(setup, generator, tmp_path):
    corpus, questions, perturbations, retriever = setup
    records = label(questions, perturbations, corpus, retriever, generator, m=3,
                    out_path=tmp_path / "labels.jsonl", progress=False)
    for r in records:
        assert len(r["outcomes"]) == 2 and r["s"] == sum(r["outcomes"]) / 2
        assert robustness(r, 1) == r["outcomes"][0]
    gold = [r for r in records if r["has_gold"]]
    assert gold and sum(r["s"] for r in gold) / len(gold) > 0.5  # the teacher reads gold passages
    assert {r["question_id"] for r in records} == {q.id for q in questions}
    assert all(r["in_clean_pool"] or r["perturbed_k"] for r in records)


def test_labelling_resumes_to_an_identical_artifact(setup, generator, tmp_path, monkeypatch):
    corpus, questions, perturbations, retriever = setup
    label(questions, perturbations, corpus, retriever, generator, m=3,
          out_path=tmp_path / "full.jsonl", progress=False)
    real, calls = generator.generate, {"n": 0}

    def dies_on_second_chunk(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(generator, "generate", dies_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        label(questions, perturbations, corpus, retriever, generator, m=3,
              out_path=tmp_path / "resumed.jsonl", chunk_size=1, progress=False)
    partial = (tmp_path / "resumed.jsonl.partial").read_text().splitlines()
    assert partial and all(json.loads(l)["question_id"] == questions[0].id for l in partial)
    monkeypatch.setattr(generator, "generate", real)
    label(questions, perturbations, corpus, retriever, generator, m=3,
          out_path=tmp_path / "resumed.jsonl", chunk_size=1, progress=False)
    assert (tmp_path / "resumed.jsonl").read_text() == (tmp_path / "full.jsonl").read_text()
    assert not (tmp_path / "resumed.jsonl.partial").exists()


def test_labels_from_another_corpus_are_refused(setup, generator, tmp_path):
    corpus, questions, perturbations, retriever = setup
    label(questions, perturbations, corpus, retriever, generator, m=2,
          out_path=tmp_path / "l.jsonl", progress=False)
    other = Corpus([Passage("x", "X", "another corpus")], "other")
    with pytest.raises(DataError, match="labelled on corpus sha256"):
        load_labels(tmp_path / "l.jsonl", other)


def test_bad_inputs_fail_before_work(setup, generator, tmp_path):
    corpus, questions, perturbations, retriever = setup
    with pytest.raises(DataError, match="unknown question id"):
        label(questions[:1], perturbations, corpus, retriever, generator, m=2,
              out_path=tmp_path / "x.jsonl")
    with pytest.raises(ValueError, match="M .* must be >= 1"):
        label(questions, perturbations, corpus, retriever, generator, m=0, out_path=tmp_path / "x.jsonl")
    with pytest.raises(DataError, match="no perturbation"):
        label(questions, perturbations[:2], corpus, retriever, generator, m=2,
              out_path=tmp_path / "x.jsonl")
