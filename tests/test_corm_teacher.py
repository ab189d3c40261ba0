import json

import pytest

from robustkit.corm.teacher import k_prime_distribution, label, robustness
from robustkit.data import DataError, mini_corpus, mini_questions
from robustkit.retrieval import DenseRetriever


@pytest.fixture(scope="module")
def setup(embedder):
    corpus = mini_corpus()
    questions = mini_questions("train")[:3]
    perturbations = [{"question_id": q.id, "k": k, "type": "false_premise",
                      "text": f"{q.text} {extra}"}
                     for q in questions for k, extra in enumerate(["in the old days", "as i recall"])]
    return corpus, questions, perturbations, DenseRetriever(corpus, embedder)


def test_labels_follow_the_definition(setup, generator):
    corpus, questions, perturbations, retriever = setup
    records = label(questions, perturbations, corpus, retriever, generator, m=3, progress=False)
    for r in records:
        assert len(r["outcomes"]) == 2 and r["s"] == sum(r["outcomes"]) / 2
        assert robustness(r, 1) == r["outcomes"][0]
    gold = [r for r in records if r["has_gold"]]
    assert gold and sum(r["s"] for r in gold) / len(gold) > 0.5  # the teacher reads gold passages
    assert {r["question_id"] for r in records} == {q.id for q in questions}
    assert all(r["in_clean_pool"] or r["perturbed_k"] for r in records)
    table = k_prime_distribution(records)
    assert list(table.columns) == ["K'=1", "K'=2"] and table.sum().round(6).eq(1.0).all()


def test_labelling_resumes_from_its_log(setup, generator, tmp_path, monkeypatch):
    corpus, questions, perturbations, retriever = setup
    full = label(questions, perturbations, corpus, retriever, generator, m=3, progress=False)
    real, calls = generator.generate, {"n": 0}

    def dies_on_second_chunk(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(generator, "generate", dies_on_second_chunk)
    log = tmp_path / "log.jsonl"
    with pytest.raises(KeyboardInterrupt):
        label(questions, perturbations, corpus, retriever, generator, m=3, log_path=log,
              chunk_size=1, progress=False)
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert logged and all(r["question_id"] == questions[0].id for r in logged)
    monkeypatch.setattr(generator, "generate", real)
    resumed = label(questions, perturbations, corpus, retriever, generator, m=3, log_path=log,
                    chunk_size=1, progress=False)
    assert resumed == full


def test_bad_inputs_fail_before_work(setup, generator):
    corpus, questions, perturbations, retriever = setup
    with pytest.raises(DataError, match="unknown question id"):
        label(questions[:1], perturbations, corpus, retriever, generator, m=2)
    with pytest.raises(ValueError, match="M .* must be >= 1"):
        label(questions, perturbations, corpus, retriever, generator, m=0)
    with pytest.raises(DataError, match="no perturbation"):
        label(questions, perturbations[:2], corpus, retriever, generator, m=2)
