"""The relevance cross-encoder: a pretrained reranker where the scale has one, else the kit's own.

    scorer = rk.crossencoder.relevance_scorer(scale)   # σ(z) ∈ [0, 1] per (query, passage)
    path = rk.crossencoder.relevance_model(scale)      # the kit's: trained once, reused after

At ``colab`` and ``paper`` the relevance cross-encoder is the hub's MS MARCO model (the
``relevance_ce`` role; any one-logit sequence classifier can be chosen for it, at any scale).

A reranker is normally fine-tuned from a pretrained cross-encoder (the hub's MS MARCO MiniLM);
offline none exists, and a bi-encoder with a fresh head learns neither relevance nor robustness
from ~100 groups. So the kit trains one on cheap labels: for each training-split question, its
clean query over its dense top M, labelled by "the passage contains a gold alias" (no model
call), listwise loss, a fresh head at a high learning rate. Two methods start from it or use it:
CoRM-RAG's critics are fine-tuned from it (its warm start), CRAG grades retrieval with it (CRAG
trains a T5 evaluator for the same job).

Only training splits are read, so no evaluated question is ever learnt from. The model is an
artifact under ``runs/<scale>/relevance/<recipe>/`` built through ``stage``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from robustkit import memo, resources
from robustkit.artifacts import NotStaged, digest, manifest_path, read_manifest, stage
from robustkit.config import Scale, check_knob, get_scale, runs_dir, with_overrides
from robustkit.crossencoder import MAX_LENGTH
from robustkit.models import ModelSpec, kit_trained, resolve_model

DATASETS = ("nq_open_oracle", "mini")  # datasets with a training split and a corpus


@dataclass(frozen=True)
class Recipe:
    """How the relevance model is trained: whose training split, how many questions (0 = all),
    dense candidates per question, negatives per group, and the optimiser's budget."""
    dataset: str
    questions: int
    m: int  # at least 2: a positive and a negative
    n_negatives: int
    epochs: int
    lr: float  # high: a fresh head has to learn in a few dozen steps
    batch_groups: int

    def __post_init__(self):
        if self.dataset not in DATASETS:
            raise ValueError(f"relevance recipe: dataset must be one of {list(DATASETS)}, got {self.dataset!r}")
        check_knob("relevance recipe questions", self.questions, integer=True, low=0)
        check_knob("relevance recipe m", self.m, integer=True, low=2)
        for name in ("n_negatives", "epochs", "batch_groups"):
            check_knob(f"relevance recipe {name}", getattr(self, name), integer=True, low=1)
        check_knob("relevance recipe lr", self.lr, low=0, low_open=True)

    @property
    def slug(self) -> str:
        """A folder name that says the recipe: ``mini-all-m10-n4-e2-lr0.0003-b8``."""
        return (f"{self.dataset}-{self.questions or 'all'}-m{self.m}-n{self.n_negatives}"
                f"-e{self.epochs}-lr{self.lr:g}-b{self.batch_groups}")


# tiny learns from data/mini's training questions at a high rate (3e-4): a low one (5e-5) left the
# cross-encoder below dense retrieval on biased queries; small takes 300 NQ-open training questions,
# one epoch, enough to pass dense there and keep training to minutes on a CPU (the results page has
# the recall each reached). Colab and paper learn from every NQ-open oracle training question.
RECIPES: dict[str, Recipe] = {
    "tiny": Recipe("mini", 0, 10, 4, 2, 3e-4, 8),
    "small": Recipe("nq_open_oracle", 300, 10, 6, 1, 3e-4, 16),
    "colab": Recipe("nq_open_oracle", 0, 10, 10, 1, 3e-4, 32),
    "paper": Recipe("nq_open_oracle", 0, 10, 10, 1, 3e-4, 32),
}


def recipe(scale: Scale | str | None = None, **changes) -> Recipe:
    """The scale's recipe, with ``changes`` applied (unknown fields are an error)."""
    scale = get_scale(scale)
    if scale.name not in RECIPES:
        raise ValueError(f"no relevance recipe for scale {scale.name!r}; expected one of {sorted(RECIPES)}")
    return replace(RECIPES[scale.name], **changes)


def groups_for(scale: Scale | str | None = None, chosen: Recipe | None = None
               ) -> tuple[list[dict], list[dict], dict]:
    """The relevance model's groups, split train / validation by question: ``chosen.questions``
    of ``chosen.dataset``'s training split (seeded by the scale's seed), each its clean query over
    its dense top ``chosen.m`` in that dataset's corpus. Built once per process: every reuse of the
    trained model (CoRM's critics start from it) digests them to check it is current."""
    scale = get_scale(scale)
    return _groups(scale, chosen or recipe(scale))


@memo.cached(4)
def _groups(scale: Scale, chosen: Recipe) -> tuple[list[dict], list[dict], dict]:
    from robustkit.crossencoder.groups import alias_groups, split_groups

    source = with_overrides(scale, dataset=chosen.dataset)
    pool = resources.sample(resources.train_split(source), chosen.questions, scale.seed)
    corpus, retriever = resources.corpus_for(source), resources.retriever_for(source)
    hits = retriever.search([q.text for q in pool], min(chosen.m, len(corpus)))
    texts = {p.id: p.content for p in corpus}
    groups, stats = alias_groups([{"id": q.id, "text": q.text, "answers": q.answers} for q in pool],
                                 [[h.doc_id for h in row] for row in hits], texts,
                                 n_negatives=chosen.n_negatives, seed=scale.seed)
    train, val = split_groups(groups, seed=scale.seed)
    return train, val, stats | {"groups": len(groups)}


def relevance_model(scale: Scale | str | None = None, chosen: Recipe | None = None, *,
                    progress: bool = True) -> Path:
    """Train (or reuse) the relevance cross-encoder: ``critic_init``'s encoder with a fresh head,
    trained listwise on ``groups_for``. Returns its model folder."""
    from robustkit.crossencoder.train import pass_budget, train

    scale = get_scale(scale)
    chosen = chosen or recipe(scale)
    train_groups, val_groups, stats = groups_for(scale, chosen)
    init = resolve_model("critic_init", scale, verbose=False)
    max_pairs, budget = pass_budget(init.path, MAX_LENGTH)
    inputs = {"groups": digest(train_groups), "val": digest(val_groups), "init": init.name,
              "dataset": chosen.dataset, "loss": "listwise", "epochs": chosen.epochs, "lr": chosen.lr,
              "max_length": MAX_LENGTH, "batch_groups": chosen.batch_groups, "seed": scale.seed, **budget}

    def build(out: Path, scratch: Path) -> dict:
        history = train(train_groups, val_groups, init=init.path, base_model=init.name,
                        out_dir=scratch, model_dir=out, loss="listwise", epochs=chosen.epochs,
                        lr=chosen.lr, batch_groups=chosen.batch_groups, max_length=MAX_LENGTH,
                        seed=scale.seed, max_pairs=max_pairs, progress=progress)
        return {**stats, "train groups": len(train_groups), "validation groups": len(val_groups),
                "final validation": [h for h in history if h["split"] == "val"][-1]}

    return stage(runs_dir(scale) / "relevance" / chosen.slug, inputs, build, lambda path: path)


def pretrained(scale: Scale | str | None = None) -> ModelSpec | None:
    """The pretrained relevance cross-encoder of ``scale`` (the registry's hub model, or the user's
    choice for the ``relevance_ce`` role), or None where the kit trains its own."""
    scale = get_scale(scale)
    return None if kit_trained("relevance_ce", scale) else resolve_model("relevance_ce", scale, verbose=False)


def relevance_scorer(scale: Scale | str | None = None, chosen: Recipe | None = None, *,
                     progress: bool = True):
    """A ``CrossEncoderScorer`` for the relevance cross-encoder — the pretrained one where the
    scale has one, else the kit's (trained on demand) — loaded once per process, its scores kept
    on disk by checkpoint (or hub id)."""
    from robustkit.crossencoder.model import pretrained_scorer, stored_scorer

    spec = pretrained(scale)
    if spec is not None:
        return pretrained_scorer(spec.path, spec.name)
    path = relevance_model(scale, chosen, progress=progress)
    return stored_scorer(str(path), read_manifest(path)["sha256"])


def describe(scale: Scale | str | None = None, chosen: Recipe | None = None) -> str:
    """Which relevance cross-encoder grades at ``scale``, in words."""
    spec = pretrained(scale)
    if spec is not None:
        return f"{spec.name} ({spec.source}), pretrained"
    chosen = chosen or recipe(scale)
    return (f"the kit's relevance cross-encoder ({chosen.slug}: {chosen.dataset}'s training split, "
            "'contains a gold alias' labels)")


def identity(scale: Scale | str | None = None, chosen: Recipe | None = None) -> dict:
    """What a manifest records of the relevance model: a pretrained one's name, or the kit's
    init, recipe and checkpoint sha256. It only reads: the kit's model not trained yet raises
    ``NotStaged`` naming ``relevance_model``, which trains it."""
    scale = get_scale(scale)
    spec = pretrained(scale)
    if spec is not None:
        return {"model": spec.name, "source": spec.source}
    chosen = chosen or recipe(scale)
    path = runs_dir(scale) / "relevance" / chosen.slug
    if not manifest_path(path).exists():
        raise NotStaged(f"the relevance cross-encoder {chosen.slug} is not trained yet at {path}; "
                        "rk.crossencoder.relevance_model(scale) trains it")
    return {"model": "relevance cross-encoder", "init": resolve_model("critic_init", scale, verbose=False).name,
            "recipe": asdict(chosen), "sha256": read_manifest(path)["sha256"]}
