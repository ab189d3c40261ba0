"""Natural-language inference: P(entailment, neutral, contradiction | premise, hypothesis).

FVA-RAG's adjudicator asks an NLI cross-encoder whether a passage contradicts a draft answer.
On Colab that is the hub's ``cross-encoder/nli-deberta-v3-base`` (the paper: ``-large``). Offline
no pretrained NLI model exists, so at ``tiny`` and ``small`` the kit fine-tunes its MiniLM
encoder as a cross-encoder on SNLI training pairs — a stage artifact, ``runs/<scale>/nli/model``,
saved like a hub model — and records its accuracy per class on SNLI dev and MultiNLI dev, pairs
it never trained on:

    clf = rk.nli.nli_model("tiny")                  # trained once (about a minute), then reused
    clf.probabilities(["A man sleeps."], ["A man is running."])   # columns in LABELS order
    rk.nli.evaluate(clf, rk.data.load_nli("mnli_dev"), limit=1000)

The ``tiny`` recipe is sized to train in about a minute on 2 CPU cores; ``train``'s docstring
says why each choice is what it is.
"""
from __future__ import annotations

import math
import random
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from robustkit.artifacts import digest, read_manifest, stage
from robustkit.config import Scale, check_knob, get_scale, quiet_model_loading, runs_dir
from robustkit.data.nli import LABELS, NLIPair, NLISet, label_columns, load_nli
from robustkit.data.records import write_jsonl
from robustkit.device import pick_device, place
from robustkit.models import kit_trained, resolve_model

if TYPE_CHECKING:
    import pandas as pd

INFER_MAX_LENGTH = 256  # tokens of premise + hypothesis at inference: a clipped passage and a claim


@dataclass(frozen=True)
class Recipe:
    """How the kit trains its NLI cross-encoder at one scale."""

    pairs: int  # SNLI training pairs (a seeded sample of the 18,000)
    epochs: int
    lr: float  # the encoder's peak learning rate
    head_lr: float  # the pooler and the new classification layer's peak learning rate
    batch_size: int
    max_length: int  # tokens of premise + hypothesis in training (SNLI pairs average ~30)
    warmup: float  # fraction of the steps with a linear warm-up, then linear decay to 0
    weight_decay: float
    dropout: float  # the encoder's dropout in training (MiniLM's own: 0.1)
    eval_pairs: int  # seeded SNLI-dev and MNLI-dev pairs scored into the manifest

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("lr", "head_lr"):
                check_knob(f"NLI recipe {f.name}", value, low=0, low_open=True)
            elif f.name in ("warmup", "weight_decay", "dropout"):
                check_knob(f"NLI recipe {f.name}", value, low=0, high=1)
            else:
                check_knob(f"NLI recipe {f.name}", value, integer=True, low=1)


# ``train`` says why each choice; the results page (figures/README.md) holds what they measured.
TRAINING = {
    "tiny": Recipe(pairs=3000, epochs=1, lr=1e-4, head_lr=1e-3, batch_size=16, max_length=64,
                   warmup=0.1, weight_decay=0.01, dropout=0.0, eval_pairs=500),
    "small": Recipe(pairs=18000, epochs=2, lr=1e-4, head_lr=1e-3, batch_size=16, max_length=64,
                    warmup=0.1, weight_decay=0.01, dropout=0.1, eval_pairs=2000),
}


class NLIClassifier:
    """A sequence-pair classifier read from ``path`` (a hub id or a saved folder) whose labels name
    the three NLI classes, in any order and case (hub models differ), scored in batches of similar
    length with dropout off.

    Attributes: ``name`` (recorded by manifests), ``stats`` (the kit model's training manifest
    statistics — its dev accuracies — or None for a hub model).
    """

    def __init__(self, path: str | Path, *, name: str | None = None, batch_size: int = 32,
                 device: str | None = None, stats: dict | None = None):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        check_knob("batch_size", batch_size, integer=True, low=1)
        quiet_model_loading()
        self.name = name or str(path)
        self.stats = stats
        self.batch_size = batch_size
        self.device = pick_device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        self.columns = label_columns(self.model.config.id2label)

    def probabilities(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """P(label | premise, hypothesis): one row per pair, columns ``LABELS`` (entailment,
        neutral, contradiction), each row summing to 1. Empty lists give shape (0, 3). Batched
        as the kit's cross-encoders are (``crossencoder.model.pair_logits``): by length, on a GPU
        in its mixed precision with one copy back per call."""
        import torch

        from robustkit.crossencoder.model import pair_logits

        _check_texts(premises, "premises")
        _check_texts(hypotheses, "hypotheses")
        if len(premises) != len(hypotheses):
            raise ValueError(f"{len(premises)} premises but {len(hypotheses)} hypotheses: "
                             "they must align one to one")
        if not premises:
            return np.empty((0, len(LABELS)), dtype=np.float32)
        place(self.model, self.device, f"NLI {self.name}")
        with torch.inference_mode():
            logits = pair_logits(lambda **batch: self.model(**batch).logits, self.tokenizer,
                                 premises, hypotheses, max_length=INFER_MAX_LENGTH, device=self.device,
                                 truncation=True, batch_pairs=None if self.device.startswith("cuda") else self.batch_size)
        return torch.softmax(logits, dim=-1)[:, self.columns].numpy()

    def identity(self) -> dict:
        """The model's name and, for the kit's own model, a digest of its training statistics
        (another training run gives other dev accuracies, hence another identity)."""
        return {"nli": self.name, **({"trained": digest(self.stats)[:16]} if self.stats else {})}

    def __repr__(self) -> str:
        return f"NLIClassifier({self.name!r}, device={self.device!r})"


def nli_model(scale: Scale | str | None = None, *, progress: bool = True) -> NLIClassifier:
    """The scale's NLI model: the registered hub model (colab, paper) or the one chosen for the
    ``nli`` role, else the kit's MiniLM cross-encoder fine-tuned on SNLI (trained once per scale,
    then reused). Prints one line saying which. A hub model the machine cannot reach stops with
    ``OfflineModelError`` (``models.resolve_model``): the kit never trains a stand-in silently.

    Args:
        scale: a scale or its name (default: the current one).
        progress: a training progress bar, where ``show_progress()`` allows bars at all.
    """
    scale = get_scale(scale)
    if not kit_trained("nli", scale):
        spec = resolve_model("nli", scale, verbose=False)
        print(f"[robustkit] NLI adjudicator: {spec.name} ({spec.source})")
        return NLIClassifier(spec.path, name=spec.name)
    why = "no pretrained NLI model offline"
    path = train_kit_model(scale, progress=progress)
    stats = read_manifest(path)["stats"]
    name = f"kit-nli-minilm-{scale.name}"
    snli, mnli = stats["snli_dev"], stats["mnli_dev"]
    print(f"[robustkit] NLI adjudicator: {name}, MiniLM fine-tuned on {stats['pairs']:,} SNLI pairs "
          f"({why}); accuracy {snli['accuracy']:.0%} on SNLI dev, {mnli['accuracy']:.0%} on MNLI dev")
    return NLIClassifier(path, name=name, stats=stats)


def train_kit_model(scale: Scale | str | None = None, *, progress: bool = True) -> Path:
    """Fine-tune MiniLM on a seeded sample of SNLI train with the scale's ``Recipe``; a stage
    artifact under ``runs/<scale>/nli/model`` reused while its inputs match. Scales without a
    recipe of their own (colab, paper, whose hub model is out of reach) use ``small``'s.

    The manifest's stats hold the training time and throughput, the final training loss and
    ``evaluate``'s report on ``eval_pairs`` seeded SNLI-dev and MNLI-dev pairs.

    Returns the model's folder (load it with ``NLIClassifier``).
    """
    scale = get_scale(scale)
    recipe_scale = scale.name if scale.name in TRAINING else "small"
    recipe = TRAINING[recipe_scale]
    init = resolve_model("critic_init", recipe_scale, verbose=False)
    data = load_nli("train")
    pairs = random.Random(scale.seed).sample(data.pairs, min(recipe.pairs, len(data)))
    dev = {split: load_nli(split) for split in ("snli_dev", "mnli_dev")}
    inputs = {"init": init.name, "data": data.fingerprint, "recipe": asdict(recipe),
              "pairs": len(pairs), "frozen": "word embeddings", "optimizer": "fused AdamW",
              "seed": scale.seed,
              "eval": {split: d.fingerprint for split, d in dev.items()}}

    def build(out: Path, scratch: Path) -> dict:
        started = time.perf_counter()
        history = train(pairs, init=init.path, out=out, scratch=scratch, recipe=recipe,
                        seed=scale.seed, progress=progress)
        seconds = time.perf_counter() - started
        classifier = NLIClassifier(out, name=f"kit-nli-minilm-{scale.name}")
        losses = [row["loss"] for row in history[-50:]]
        stats = {"init": init.name, "pairs": len(pairs), "epochs": recipe.epochs,
                 "lr": recipe.lr, "head_lr": recipe.head_lr, "train seconds": round(seconds, 1),
                 "train pairs/s": round(len(pairs) * recipe.epochs / seconds, 1),
                 "final train loss": round(float(np.mean(losses)), 4)}
        for split, d in dev.items():
            stats[split] = evaluate(classifier, d, limit=recipe.eval_pairs, seed=scale.seed)
        return stats

    return stage(runs_dir(scale) / "nli" / "model", inputs, build, lambda path: path)


def train(pairs: Sequence[NLIPair], *, init: str, out: str | Path, recipe: Recipe,
          scratch: str | Path | None = None, seed: int = 0, progress: bool = True) -> list[dict]:
    """Fine-tune ``init`` as a three-way NLI cross-encoder (``[CLS] premise [SEP] hypothesis``
    → pooler → 3 logits, cross-entropy) and save it to ``out`` like a hub model.

    The recipe's choices (the results page holds the SNLI dev accuracies behind each):

    - a high encoder learning rate (1e-4) and a 10× higher one for the pooler and the new head:
      lower rates learn too little from a few thousand pairs, 2e-4 collapses to one class;
    - batches of 16: twice the updates of 32 from the same pairs, which this budget needs;
    - no dropout in this single epoch: no pair is seen twice, so there is nothing to overfit
      (``small``'s two epochs keep MiniLM's 0.1);
    - the word-embedding table (half of MiniLM's weights) frozen: faster, no less accurate;
    - fused AdamW: one kernel over all weights instead of a per-tensor loop;
    - dynamic padding with length-grouped batches (pairs sorted by length within shuffled chunks
      of 50 batches), so a batch pads to its own longest pair, not to ``max_length``.

    The lowest layers stay trainable: freezing them trains faster but learns less per pair.

    AdamW with linear warm-up and decay, in the kit's one training loop (``crossencoder.loop.fit``,
    as the ranking cross-encoders train). With ``scratch``, a checkpoint after each epoch but the
    last lets a killed run resume at the next epoch (batch order and dropout are seeded per epoch,
    so a resumed run trains as an uninterrupted one). Returns the history: one row per step.
    """
    import torch
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer,
                              get_linear_schedule_with_warmup)

    from robustkit.crossencoder.loop import accelerator_for, fit

    if not pairs:
        raise ValueError("no NLI pairs to train on")
    quiet_model_loading()
    accelerator = accelerator_for()
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(init)
    model = AutoModelForSequenceClassification.from_pretrained(
        init, num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
        hidden_dropout_prob=recipe.dropout, attention_probs_dropout_prob=recipe.dropout)
    model.get_input_embeddings().weight.requires_grad_(False)
    head = [p for n, p in model.named_parameters() if p.requires_grad and _is_head(model, n)]
    body = [p for n, p in model.named_parameters() if p.requires_grad and not _is_head(model, n)]
    optimizer = torch.optim.AdamW([{"params": body, "lr": recipe.lr},
                                   {"params": head, "lr": recipe.head_lr}],
                                  weight_decay=recipe.weight_decay, fused=True)
    # token type ids mark the hypothesis, as at inference
    encoded = tokenizer([p.premise for p in pairs], [p.hypothesis for p in pairs],
                        truncation=True, max_length=recipe.max_length)
    labels = [LABELS.index(p.label) for p in pairs]
    lengths = [len(ids) for ids in encoded["input_ids"]]
    steps = math.ceil(len(pairs) / recipe.batch_size) * recipe.epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, int(recipe.warmup * steps), steps)

    def batches(epoch: int) -> list[dict]:  # length-grouped, shuffled per epoch by its own seed
        device = accelerator.device
        return [{**tokenizer.pad({key: [encoded[key][i] for i in batch] for key in encoded}, return_tensors="pt").to(device),
                 "labels": torch.tensor([labels[i] for i in batch], device=device)}
                for batch in _length_grouped(lengths, recipe.batch_size, random.Random(seed + epoch))]

    def step(model, batch: dict, backward):
        loss = model(**batch).loss
        backward(loss)
        return loss

    with tempfile.TemporaryDirectory() as spare:  # without scratch: checkpoints nobody will resume
        model, rows = fit(accelerator, model, optimizer, scheduler, epochs=recipe.epochs,
                          out_dir=scratch or spare, batches=batches, step=step, what="the NLI cross-encoder",
                          on_epoch=lambda epoch: torch.manual_seed(seed + epoch), progress=progress)
    history = [{"step": number, "epoch": int(row["epoch"]), "loss": row["loss"]}
               for number, row in enumerate(rows, start=1)]
    model.eval()
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    write_jsonl(Path(out) / "history.jsonl", history)
    return history


def evaluate(classifier: NLIClassifier, data: NLISet, limit: int | None = None,
             seed: int = 0) -> dict:
    """Accuracy overall and per gold class on ``data`` (or a seeded sample of ``limit`` pairs).

    A class's accuracy is its recall, the share of its pairs predicted as that class: the number
    that says whether the adjudicator finds contradictions, or merely avoids false alarms.

    Returns ``{"split", "n", "accuracy", "entailment accuracy", "neutral accuracy",
    "contradiction accuracy"}`` (a class absent from the sample gets NaN).
    """
    if limit is not None:
        check_knob("limit", limit, integer=True, low=1)
    pairs = data.pairs if limit is None or limit >= len(data) \
        else random.Random(seed).sample(data.pairs, limit)
    probs = classifier.probabilities([p.premise for p in pairs], [p.hypothesis for p in pairs])
    predicted = np.asarray(LABELS)[probs.argmax(axis=1)] if pairs else np.asarray([])
    gold = np.asarray([p.label for p in pairs])
    report = {"split": data.split, "n": len(pairs),
              "accuracy": float(np.mean(predicted == gold)) if pairs else math.nan}
    for label in LABELS:
        mine = gold == label
        report[f"{label} accuracy"] = float(np.mean(predicted[mine] == label)) if mine.any() \
            else math.nan
    return report


def _check_texts(texts, name: str) -> None:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__} "
                        f"{texts!r:.60}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a string, got {type(text).__name__} {text!r:.60}")


def _is_head(model, name: str) -> bool:
    """The pooler and the classification layer: new or barely pretrained, so they learn faster."""
    return "pooler" in name or not name.startswith(model.base_model_prefix + ".")


def _length_grouped(lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar length: shuffle, sort chunks of 50 batches by length, cut them
    into batches, shuffle the batches (so lengths do not rise through the epoch)."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    for start in range(0, len(order), 50 * batch_size):
        chunk = sorted(order[start:start + 50 * batch_size], key=lengths.__getitem__)
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def report_card(classifier: NLIClassifier, limit: int = 500, seed: int = 0) -> "pd.DataFrame":
    """The adjudicator's accuracy overall and per class on SNLI dev and MNLI dev, one row per
    split: the kit model's recorded evaluation, or for a hub model ``limit`` seeded pairs scored now."""
    import pandas as pd

    stats = classifier.stats or {}
    rows = [stats.get(split) or evaluate(classifier, load_nli(split), limit=limit, seed=seed)
            for split in ("snli_dev", "mnli_dev")]
    return pd.DataFrame(rows).assign(model=classifier.name).round(3)
