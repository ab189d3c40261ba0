import pytest

from robustkit.corm.groups import build_groups, relevance_groups
from robustkit.crossencoder.groups import split_groups
from robustkit.crossencoder.model import CrossEncoder, CrossEncoderScorer

TEXTS = {d: f"passage {d}" for d in "abcde"}
LABELS = [
    {"question_id": "q1", "doc_id": "a", "in_clean_pool": True, "perturbed_k": [], "outcomes": [1, 0], "has_gold": True},
    {"question_id": "q1", "doc_id": "b", "in_clean_pool": True, "perturbed_k": [0], "outcomes": [0, 0], "has_gold": False},
    {"question_id": "q1", "doc_id": "c", "in_clean_pool": False, "perturbed_k": [0, 1], "outcomes": [0, 0], "has_gold": False},
    {"question_id": "q1", "doc_id": "d", "in_clean_pool": False, "perturbed_k": [1], "outcomes": [1, 1], "has_gold": True},
    {"question_id": "q1", "doc_id": "e", "in_clean_pool": True, "perturbed_k": [1], "outcomes": [0, 1], "has_gold": False},
    {"question_id": "q2", "doc_id": "a", "in_clean_pool": True, "perturbed_k": [0], "outcomes": [0, 0], "has_gold": False},
]
PERTURBATIONS = [{"question_id": "q1", "k": 0, "type": "false_premise", "text": "q1 biased 0"},
                 {"question_id": "q1", "k": 1, "type": "confirmation_bias", "text": "q1 biased 1"},
                 {"question_id": "q2", "k": 0, "type": "false_premise", "text": "q2 biased 0"}]


@pytest.mark.parametrize("seed", range(5))
def test_group_composition_rules(seed):
    groups, stats = build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=2, seed=seed)
    assert stats == {"slots": 3, "skipped (no positive)": 1, "short of N negatives": 1}
    by_k = {g["k"]: g for g in groups}
    assert set(by_k) == {0, 1}
    for g in groups:
        assert g["doc_ids"][0] in {"a", "e"}  # clean pool, s > 0
        assert g["labels"][0] == 0.5 and all(s == 0 for s in g["labels"][1:])
        assert g["query"] == f"q1 biased {g['k']}"  # the critic reads the perturbed query
        assert g["docs"] == [TEXTS[d] for d in g["doc_ids"]]
    assert set(by_k[0]["doc_ids"][1:]) == {"b", "c"}  # perturbed pool of k=0, s = 0
    assert by_k[1]["doc_ids"][1:] == ["c"]  # d has s > 0, e is a positive


def test_k_prime_recomputes_utilities():
    groups, stats = build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=2, k_prime=1)
    assert stats["slots"] == 2 and len(groups) == 1
    assert groups[0]["doc_ids"][0] == "a" and groups[0]["labels"][0] == 1.0
    assert set(groups[0]["doc_ids"][1:]) == {"b", "c"}
    with pytest.raises(ValueError, match="K' must be in 1..2"):
        build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=2, k_prime=3)


def test_drop_type_upsamples_to_same_size():
    groups, _ = build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=2)
    dropped, _ = build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=2, drop_type="false_premise")
    assert len(dropped) == len(groups) and {g["type"] for g in dropped} == {"confirmation_bias"}


def test_relevance_groups_mirror_the_critic_groups_with_clean_query_and_gold_labels():
    critic, _ = build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=2)
    no_gold = [{**critic[0], "question_id": "q2"}]  # q2 has no gold-bearing candidate
    groups = relevance_groups(LABELS, critic + no_gold, {"q1": "clean q1", "q2": "clean q2"}, TEXTS,
                              n_negatives=2)
    assert len(groups) == len(critic) + 1  # the same number of groups (q2's redrawn from q1)
    for g in groups:
        assert g["query"] == "clean q1" and g["doc_ids"][0] in {"a", "d"}
        assert g["labels"] == [1.0, 0.0, 0.0] and not set(g["doc_ids"][1:]) & {"a", "d"}
    assert relevance_groups(LABELS, no_gold, {"q2": "clean q2"}, TEXTS, n_negatives=2) == []


def test_bad_group_parameters():
    with pytest.raises(ValueError, match="N .* must be >= 1"):
        build_groups(LABELS, PERTURBATIONS, TEXTS, n_negatives=0)
    with pytest.raises(ValueError, match="empty label pool"):
        build_groups([], PERTURBATIONS, TEXTS, n_negatives=2)


def test_split_holds_out_whole_questions():
    groups = [{"question_id": f"q{i % 10}", "k": i} for i in range(40)]
    train, val = split_groups(groups, 0.2)
    assert not {g["question_id"] for g in train} & {g["question_id"] for g in val}
    assert len(val) == 8


@pytest.mark.slow
def test_tiny_end_to_end_critic_separates_gold_from_premise(monkeypatch):
    """perturb → label → groups → warm start → train at the tiny scale: the notebooks' own
    stages, so notebooks 01–03 replay its model calls and reuse its warm start and critic; on the
    training questions the critic ranks the gold passage above the premise-matching ones for
    their hand-written biased rewrites."""
    import numpy as np

    from robustkit.corm import settings, train
    from robustkit.data import mini_corpus, mini_rewrites

    cfg = settings("tiny")
    model_dir = train.train_critic(cfg, "corm", progress=False)
    history = train.training_history(cfg, ["corm"])
    assert (history["split"] == "val").sum() == cfg.epochs
    per_epoch = (history["split"] == "train").sum() // cfg.epochs  # each validation row at its epoch's last step
    assert history.loc[history["split"] == "val", "step"].tolist() == [e * per_epoch for e in range(1, cfg.epochs + 1)]
    scorer = CrossEncoderScorer(model_dir)
    corpus = mini_corpus()
    pairs = [([r.text] * 2, [corpus[q.gold_ids[0]].content, corpus[r.premise_ids[0]].content])
             for q in train.train_questions(cfg) for r in mini_rewrites()
             if r.question_id == q.id and r.premise_ids]
    wins = []
    for pair in pairs:
        gold, premise = scorer.score(*pair)
        wins.append(gold > premise)
    print(f"gold above premise in {np.mean(wins):.0%} of {len(wins)} pairs")
    assert np.mean(wins) > 0.5, f"gold above premise in {np.mean(wins):.0%} of {len(wins)} pairs"
    # validating the pipeline's shared scorer leaves it in eval mode: same scores after as before
    shared = train.critic_scorer(cfg, "corm")
    before = shared.uncached().score(*pairs[0])  # uncached: a remembered score cannot show dropout
    train.compare_on_validation(cfg, ["corm"])
    assert not shared.model.training
    np.testing.assert_array_equal(shared.uncached().score(*pairs[0]), before)
    # the shared scorer remembers pairs: the same scores, in the asked order, without a forward
    np.testing.assert_array_equal(shared.score(*pairs[0]), before)
    flipped = (pairs[0][0][::-1], pairs[0][1][::-1])
    monkeypatch.setattr(shared, "_forward", lambda *a: pytest.fail("a remembered pair was rescored"))
    np.testing.assert_array_equal(shared.score(*pairs[0]), before)
    np.testing.assert_array_equal(shared.score(*flipped), before[::-1])
    # a second call reuses the checkpoint instead of retraining
    stamp = (model_dir / "head.pt").stat().st_mtime_ns
    assert train.train_critic(cfg, "corm") == model_dir
    assert (model_dir / "head.pt").stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_checkpoint_with_mismatched_tokenizer_is_refused(tmp_path):
    from robustkit.models import resolve_model

    init = resolve_model("critic_init", "tiny")
    critic = CrossEncoder(init.path)
    critic.save(tmp_path / "c")
    config = (tmp_path / "c" / "critic_config.json")
    config.write_text(config.read_text().replace(str(critic.tokenizer.vocab_size), "1234"))
    with pytest.raises(ValueError, match="tokenizer vocabulary"):
        CrossEncoder.load(tmp_path / "c")


def test_training_entry_point_imports_only_torch_transformers_accelerate():
    import subprocess
    import sys

    heavy = ["pandas", "faiss", "sentence_transformers", "datasets", "bm25s", "scipy", "seaborn",
             "matplotlib", "peft", "trl", "sklearn"]
    code = ("import sys, robustkit.crossencoder.train, robustkit.corm.__main__, accelerate; "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.slow
def test_stored_scores_are_replayed_by_a_later_scorer_of_the_same_checkpoint_only(tmp_path, monkeypatch):
    """``store_as`` keeps scores on disk: a new scorer (a later notebook) of the same checkpoint
    replays them exactly and runs the critic only on new pairs; another checkpoint does not."""
    import numpy as np
    import torch

    from robustkit.models import resolve_model

    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path))
    torch.manual_seed(0)
    critic = CrossEncoder(resolve_model("critic_init", "tiny", verbose=False).path)
    queries, passages = ["who wrote hamlet", "capital of peru"], ["Hamlet is by Shakespeare.", "Lima."]
    first = CrossEncoderScorer(critic, store_as="checkpoint-a").score(queries, passages)

    def scorer_logging_pairs(checkpoint: str, asked: list) -> CrossEncoderScorer:
        scorer = CrossEncoderScorer(critic, store_as=checkpoint)
        forward = scorer._forward
        monkeypatch.setattr(scorer, "_forward", lambda q, p: asked.extend(zip(q, p)) or forward(q, p))
        return scorer

    asked = []
    again = scorer_logging_pairs("checkpoint-a", asked).score([*queries, queries[0]], [*passages, passages[1]])
    np.testing.assert_array_equal(again[:2], first)  # replayed bit for bit
    assert asked == [(queries[0], passages[1])]  # only the new pair reached the critic
    asked = []
    scorer_logging_pairs("checkpoint-b", asked).score(queries, passages)
    assert asked == list(zip(queries, passages))  # another checkpoint's scores are not replayed
