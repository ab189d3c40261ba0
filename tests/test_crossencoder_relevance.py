"""The core cross-encoder's relevance model: its cheap-label groups, its recipe, its training."""
import pytest

from robustkit.crossencoder.groups import alias_groups
from robustkit.crossencoder.relevance import RECIPES, Recipe, recipe

TEXTS = {"g": "Paris is the capital of France.", "h": "The capital is Paris, said the guide.",
         "n1": "Lyon is a city.", "n2": "Berlin is in Germany.", "n3": "Rome is old."}
QUESTION = {"id": "q1", "text": "capital of France?", "answers": ["Paris"]}


def test_alias_groups_take_the_best_ranked_gold_passage_and_only_answerless_negatives():
    groups, stats = alias_groups([QUESTION], [["n1", "h", "g", "n2", "n3"]], TEXTS,
                                 n_negatives=2, seed=0)
    (group,) = groups
    assert group["query"] == "capital of France?" and group["type"] == "clean"
    positive = [d for d, y in zip(group["doc_ids"], group["labels"]) if y == 1.0]
    assert positive == ["h"]  # the better-ranked of the two gold-bearing candidates
    negatives = set(group["doc_ids"]) - {"h"}
    assert len(negatives) == 2 and negatives <= {"n1", "n2", "n3"}  # never the other gold one
    assert group["docs"] == [TEXTS[d] for d in group["doc_ids"]]
    assert stats == {"questions": 1, "skipped (no gold candidate)": 0, "skipped (no negative)": 0}


def test_alias_groups_shuffle_the_positive_and_count_skips():
    questions = [dict(QUESTION, id=f"q{i}") for i in range(40)]
    groups, _ = alias_groups(questions, [["g", "n1", "n2", "n3"]] * 40, TEXTS, n_negatives=3)
    positions = {g["labels"].index(1.0) for g in groups}
    assert len(positions) > 1, "the positive always sits at one position: a tie would leak the label"
    no_gold = dict(QUESTION, id="q-none", answers=["Madrid"])
    _, stats = alias_groups([QUESTION, no_gold, dict(QUESTION, id="q-only")],
                            [["g", "n1"], ["g", "n1"], ["g", "h"]], TEXTS, n_negatives=1)
    assert stats["skipped (no gold candidate)"] == 1 and stats["skipped (no negative)"] == 1
    with pytest.raises(ValueError, match="no relevance group"):
        alias_groups([no_gold], [["g", "n1"]], TEXTS, n_negatives=1)
    with pytest.raises(ValueError, match="2 candidate lists"):
        alias_groups([QUESTION], [["g"], ["g"]], TEXTS, n_negatives=1)
    with pytest.raises(ValueError, match="N"):
        alias_groups([QUESTION], [["g"]], TEXTS, n_negatives=0)


@pytest.mark.parametrize("change, message", [({"dataset": "squad"}, "dataset must be one of"),
                                             ({"m": 1}, "m must be >= 2"),
                                             ({"questions": -1}, "questions"),
                                             ({"lr": 0.0}, "lr"),
                                             ({"epochs": 1.5}, "epochs must be an integer")])
def test_a_bad_recipe_is_refused_before_anything_is_trained(change, message):
    with pytest.raises(ValueError, match=message):
        recipe("tiny", **change)
    with pytest.raises(TypeError, match="unexpected keyword"):
        recipe("tiny", negatives=3)


def test_every_scale_has_a_recipe_that_learns_only_from_a_training_split():
    assert set(RECIPES) == {"tiny", "small", "colab", "paper"}
    assert recipe("tiny").dataset == "mini" and recipe("small").dataset == "nq_open_oracle"
    assert recipe("tiny").slug == "mini-all-m10-n4-e2-lr0.0003-b8"
    assert Recipe("nq_open_oracle", 300, 10, 6, 1, 3e-4, 16).slug == recipe("small").slug


@pytest.mark.slow
def test_training_from_a_saved_cross_encoder_starts_from_its_head(tmp_path):
    """A model trained from a saved cross-encoder (a critic from the warm start) keeps its head."""
    import torch

    from robustkit.crossencoder.model import CrossEncoder
    from robustkit.crossencoder.train import train
    from robustkit.models import resolve_model

    init = resolve_model("critic_init", "tiny")
    start = CrossEncoder(init.path, base_model=init.name)
    with torch.no_grad():
        start.head.bias.fill_(3.0)
    start.save(tmp_path / "start")
    group = {"query": "capital of France?", "docs": [TEXTS["g"], TEXTS["n1"]], "labels": [1.0, 0.0]}
    train([group] * 2, [group], init=str(tmp_path / "start"), out_dir=tmp_path / "run",
          epochs=1, lr=1e-9, batch_groups=2, max_length=32, progress=False)
    trained = CrossEncoder.load(tmp_path / "run" / "model")
    assert trained.config["base_model"] == init.name
    assert abs(trained.head.bias.item() - 3.0) < 1e-3


@pytest.mark.slow
def test_the_relevance_model_ranks_answer_bearing_passages_of_unseen_questions_first():
    """Trained on data/mini's training split only (the tiny recipe: the model notebooks 03 and 05
    use), among a test question's dense top 10 it puts a gold-bearing passage first far more
    often than a random order, and on the biased rewrites of those questions (where the dense
    retriever follows the premise) at least as often as dense (measured: 0.75 vs 0.59, random
    0.13; on clean queries dense's 0.83 stays ahead of its 0.76)."""
    import numpy as np

    from robustkit import resources
    from robustkit.crossencoder.relevance import relevance_scorer
    from robustkit.data import mini_rewrites
    from robustkit.data.records import contains_answer

    scorer = relevance_scorer("tiny", progress=False)
    corpus, retriever = resources.corpus_for("tiny"), resources.retriever_for("tiny")
    questions = {q.id: q for q in resources.test_questions("tiny")}
    biased = [r for r in mini_rewrites() if r.question_id in questions]

    def top1(texts, answers):
        dense, ce, random_order = [], [], []
        for text, gold_answers, row in zip(texts, answers, retriever.search(texts, 10)):
            gold = [contains_answer(corpus[h.doc_id].content, gold_answers) for h in row]
            if any(gold) and not all(gold):
                scores = scorer.score([text] * len(row), [corpus[h.doc_id].content for h in row])
                dense.append(gold[0])
                ce.append(gold[int(np.argmax(scores))])
                random_order.append(sum(gold) / len(gold))
        assert len(ce) >= 20
        return np.mean(dense), np.mean(ce), np.mean(random_order)

    _, ce, random_order = top1([q.text for q in questions.values()], [q.answers for q in questions.values()])
    assert ce > random_order + 0.4
    dense, ce, random_order = top1([r.text for r in biased], [questions[r.question_id].answers for r in biased])
    assert ce >= dense and ce > random_order + 0.4
