"""The Evidence Critic (CoRM-RAG §3.3): listwise groups, the cross-encoder, Accelerate training.

The critic reads a *perturbed* question and one passage, [x̃ₖ ; d] → encoder → CLS → dropout 0.1
→ linear → one logit, and learns the teacher's robustness utility s(x, d) with
``HybridListwiseLoss``. Baselines share the init, the loop and the data budget: PA-CE (pointwise
loss on the same groups) and a relevance cross-encoder (pointwise loss on relevance labels —
does the passage contain a gold alias — for clean queries).

One loop serves CPU and GPU (bf16 autocast on GPU, fp32 on CPU) and several GPUs unchanged:

    accelerate launch -m robustkit.critic train --groups runs/colab/groups.jsonl --out runs/colab/critic

This module imports only torch, transformers and accelerate (plus the kit's light modules).
"""
from __future__ import annotations

import json
import math
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from robustkit.artifacts import JsonlLog, atomic_write_text, write_json
from robustkit.losses import make_loss
from robustkit.metrics import mrr, ndcg_at_k

# --- listwise groups ---------------------------------------------------------------------------


def build_groups(labels: Sequence[dict], perturbations: Sequence[dict], texts: dict[str, str], *,
                 n_negatives: int, seed: int = 0, k_prime: int | None = None,
                 drop_type: str | None = None) -> tuple[list[dict], dict]:
    """Listwise training groups exactly as CoRM-RAG builds them.

    For each (question i, perturbation k): one positive sampled from the *clean* pool with
    s > 0, and up to N negatives sampled from the candidates retrieved for x̃ₖ (the perturbed
    pool) with s = 0; the group is skipped when there is no positive. Every document is paired
    with the perturbed query x̃ₖ.

    Args:
        labels: teacher records (question_id, doc_id, in_clean_pool, perturbed_k, outcomes).
        perturbations: adversary records (question_id, k, type, text).
        texts: doc id → passage text shown to the critic.
        n_negatives: N.
        k_prime: use only the first K′ perturbations and recompute s from them (Fig. 6).
        drop_type: leave out one perturbation type, upsampling the rest to the same number of
            groups (Fig. 5).

    Returns (groups, stats) where stats counts skipped slots and groups short of N negatives.
    """
    if n_negatives < 1:
        raise ValueError(f"N (negatives per group) must be >= 1, got {n_negatives}")
    if not labels:
        raise ValueError("empty label pool: no teacher records to build groups from")
    k_all = max(len(r["outcomes"]) for r in labels)
    k_use = k_prime or k_all
    if not 1 <= k_use <= k_all:
        raise ValueError(f"K' must be in 1..{k_all}, got {k_prime}")
    rng = random.Random(seed)
    by_question = defaultdict(list)
    for record in labels:
        by_question[record["question_id"]].append(record)
    groups, stats = [], {"slots": 0, "skipped (no positive)": 0, "short of N negatives": 0}
    for p in perturbations:
        if p["k"] >= k_use:
            continue
        stats["slots"] += 1
        candidates = by_question.get(p["question_id"])
        if candidates is None:
            raise ValueError(f"perturbation of {p['question_id']!r} has no teacher labels")
        s = {r["doc_id"]: sum(r["outcomes"][:k_use]) / k_use for r in candidates}
        positives = [r["doc_id"] for r in candidates if r["in_clean_pool"] and s[r["doc_id"]] > 0]
        negatives = [r["doc_id"] for r in candidates if p["k"] in r["perturbed_k"] and s[r["doc_id"]] == 0]
        if not positives:
            stats["skipped (no positive)"] += 1
            continue
        positive = rng.choice(positives)
        chosen = rng.sample(negatives, min(n_negatives, len(negatives)))
        stats["short of N negatives"] += len(chosen) < n_negatives
        docs = [positive, *chosen]
        groups.append({"question_id": p["question_id"], "k": p["k"], "type": p["type"],
                       "query": p["text"], "doc_ids": docs, "docs": [texts[d] for d in docs],
                       "labels": [s[d] for d in docs]})
    if drop_type:
        groups = _drop_and_upsample(groups, drop_type, rng)
    return groups, stats


def relevance_groups(labels: Sequence[dict], questions: dict[str, str], texts: dict[str, str], *,
                     n_negatives: int, seed: int = 0) -> list[dict]:
    """Groups for the relevance cross-encoder: clean query, label = passage contains a gold alias.

    Same candidates and group size as the critic's, so both see the same data budget.
    """
    rng = random.Random(seed)
    by_question = defaultdict(list)
    for record in labels:
        by_question[record["question_id"]].append(record)
    groups = []
    for qid, candidates in by_question.items():
        relevant = [r["doc_id"] for r in candidates if r["has_gold"]]
        other = [r["doc_id"] for r in candidates if not r["has_gold"]]
        if not relevant:
            continue
        docs = [rng.choice(relevant), *rng.sample(other, min(n_negatives, len(other)))]
        groups.append({"question_id": qid, "k": -1, "type": "clean", "query": questions[qid],
                       "doc_ids": docs, "docs": [texts[d] for d in docs],
                       "labels": [1.0] + [0.0] * (len(docs) - 1)})
    return groups


def split_groups(groups: Sequence[dict], val_fraction: float = 0.15, seed: int = 0):
    """Hold out whole questions (never a question's other perturbations) for validation."""
    qids = sorted({g["question_id"] for g in groups})
    random.Random(seed).shuffle(qids)
    held = set(qids[:max(1, round(val_fraction * len(qids)))])
    return ([g for g in groups if g["question_id"] not in held],
            [g for g in groups if g["question_id"] in held])


def _drop_and_upsample(groups: list[dict], drop_type: str, rng: random.Random) -> list[dict]:
    kept = [g for g in groups if g["type"] != drop_type]
    if len(kept) == len(groups):
        raise ValueError(f"no group has perturbation type {drop_type!r}")
    return kept + [rng.choice(kept) for _ in range(len(groups) - len(kept))]


# --- the model ---------------------------------------------------------------------------------


class EvidenceCritic(nn.Module):
    """Cross-encoder: encoder → CLS vector → dropout → linear → one logit per (query, passage)."""

    def __init__(self, encoder_path: str, dropout: float = 0.1, max_length: int = 256,
                 base_model: str | None = None):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        self.encoder = AutoModel.from_pretrained(encoder_path, dtype=torch.float32)  # fp32 master weights
        self.tokenizer = AutoTokenizer.from_pretrained(encoder_path)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(self.encoder.config.hidden_size, 1)
        self.config = {"base_model": base_model or encoder_path, "dropout": dropout,
                       "max_length": max_length,
                       "tokenizer_vocab_size": self.tokenizer.vocab_size}

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state
        return self.head(self.dropout(hidden[:, 0])).squeeze(-1)

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        tmp = directory.with_name(directory.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        self.encoder.save_pretrained(tmp / "encoder")
        self.tokenizer.save_pretrained(tmp / "encoder")
        torch.save(self.head.state_dict(), tmp / "head.pt")
        write_json(tmp / "critic_config.json", self.config)
        if directory.exists():
            import shutil

            shutil.rmtree(directory)
        tmp.rename(directory)

    @classmethod
    def load(cls, directory: str | Path) -> "EvidenceCritic":
        directory = Path(directory)
        config_path = directory / "critic_config.json"
        if not config_path.exists():
            raise FileNotFoundError(f"{directory}: not a critic checkpoint (no critic_config.json)")
        config = json.loads(config_path.read_text())
        critic = cls(str(directory / "encoder"), config["dropout"], config["max_length"],
                     config["base_model"])
        if critic.tokenizer.vocab_size != critic.encoder.config.vocab_size \
                or critic.tokenizer.vocab_size != config["tokenizer_vocab_size"]:
            raise ValueError(f"{directory}: tokenizer vocabulary ({critic.tokenizer.vocab_size}) "
                             f"does not match the encoder's ({critic.encoder.config.vocab_size}) "
                             f"for base model {config['base_model']!r}")
        critic.head.load_state_dict(torch.load(directory / "head.pt", map_location="cpu"))
        return critic.eval()


# --- data: pre-tokenised groups, dynamically padded -------------------------------------------


class GroupDataset(torch.utils.data.Dataset):
    """Groups tokenised once up front; batches are padded only to their own longest pair."""

    def __init__(self, groups: Sequence[dict], tokenizer, max_length: int):
        if not groups:
            raise ValueError("no groups to train or evaluate on")
        queries = [g["query"] for g in groups for _ in g["docs"]]
        docs = [d for g in groups for d in g["docs"]]
        encoded = tokenizer(queries, docs, truncation="only_second", max_length=max_length)
        self.items, start = [], 0
        for g in groups:
            n = len(g["docs"])
            self.items.append({key: encoded[key][start:start + n] for key in encoded.keys()}
                              | {"labels": g["labels"]})
            start += n
        self.pad_id = tokenizer.pad_token_id

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return self.items[i]

    def collate(self, batch: list[dict]) -> dict:
        pairs = [(item, j) for item in batch for j in range(len(item["labels"]))]
        length = max(len(item["input_ids"][j]) for item, j in pairs)
        out = {}
        for key in batch[0]:
            if key == "labels":
                continue
            pad = self.pad_id if key == "input_ids" else 0
            out[key] = torch.tensor([item[key][j] + [pad] * (length - len(item[key][j]))
                                     for item, j in pairs])
        n_max = max(len(item["labels"]) for item in batch)
        out["targets"] = torch.zeros(len(batch), n_max)
        out["mask"] = torch.zeros(len(batch), n_max, dtype=torch.bool)
        for g, item in enumerate(batch):
            out["targets"][g, :len(item["labels"])] = torch.tensor(item["labels"])
            out["mask"][g, :len(item["labels"])] = True
        out["slots"] = out["mask"].flatten().nonzero().squeeze(1)  # where each pair's logit goes
        return out


def _group_logits(model, batch: dict) -> torch.Tensor:
    """Score every pair in a batch and lay the logits out as (groups, candidates)."""
    inputs = {k: v for k, v in batch.items() if k not in ("targets", "mask", "slots")}
    flat = model(**inputs)
    grid = flat.new_full((batch["mask"].numel(),), -1e4).index_copy(0, batch["slots"], flat)
    return grid.view(batch["mask"].shape)  # index_copy with precomputed slots: no device sync


# --- training ----------------------------------------------------------------------------------


def train(groups: Sequence[dict], val_groups: Sequence[dict], *, init: str, out_dir: str | Path,
          loss: str = "hybrid", tau: float = 1.0, epochs: int = 3, lr: float = 5e-5,
          batch_groups: int = 32, grad_accum: int = 1, weight_decay: float = 0.01,
          warmup: float = 0.06, max_length: int = 256, seed: int = 0, base_model: str | None = None,
          progress: bool = True) -> list[dict]:
    """Train a critic with Accelerate; resumes from the last finished epoch in ``out_dir``.

    Args:
        groups, val_groups: from ``build_groups`` / ``relevance_groups`` (+ ``split_groups``).
        init: encoder to start from (a path or hub id).
        loss: ``hybrid`` (CoRM), ``pointwise`` (PA-CE, relevance CE) or ``listwise`` (rank-only).
        tau: listwise temperature τ.
        epochs, lr, batch_groups, grad_accum, weight_decay, warmup: AdamW with a cosine schedule
            and linear warm-up over ``warmup`` of the steps (paper: 3, 5e-5, 32, 0.01, 6%).

    Returns the history: one row per logged step (train loss) and per epoch (val metrics). The
    final model is saved to ``out_dir/model``.
    """
    from accelerate import Accelerator
    from transformers import get_cosine_schedule_with_warmup

    _check_hparams(epochs=epochs, lr=lr, batch_groups=batch_groups, grad_accum=grad_accum)
    out_dir = Path(out_dir)
    accelerator = Accelerator(mixed_precision="bf16" if torch.cuda.is_available() else "no",
                              gradient_accumulation_steps=grad_accum)
    torch.manual_seed(seed)
    model = EvidenceCritic(init, max_length=max_length, base_model=base_model)
    train_data = GroupDataset(groups, model.tokenizer, max_length)
    val_data = GroupDataset(val_groups, model.tokenizer, max_length)
    criterion = make_loss(loss, tau)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay,
                                  fused=torch.cuda.is_available())
    steps_per_epoch = math.ceil(len(train_data) / batch_groups / grad_accum)
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(warmup * steps_per_epoch * epochs),
                                                steps_per_epoch * epochs)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    history = JsonlLog(out_dir / "history.jsonl", key="id")
    start_epoch = _resume(accelerator, out_dir)
    for epoch in range(start_epoch, epochs):
        loader = accelerator.prepare(torch.utils.data.DataLoader(
            train_data, batch_size=batch_groups, shuffle=True, collate_fn=train_data.collate,
            generator=torch.Generator().manual_seed(seed + epoch)))
        model.train()
        rows = []
        for step, batch in enumerate(tqdm(loader, desc=f"epoch {epoch + 1}/{epochs}",
                                          disable=not (progress and accelerator.is_main_process))):
            with accelerator.accumulate(model):
                value = criterion(_group_logits(model, batch), batch["targets"], batch["mask"])
                accelerator.backward(value)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            rows.append({"id": f"train-{epoch}-{step}", "epoch": epoch + step / len(loader),
                         "split": "train", "loss": value.item()})
        val = evaluate(accelerator.unwrap_model(model), val_data, criterion, batch_groups)
        rows.append({"id": f"val-{epoch}", "epoch": epoch + 1, "split": "val", **val})
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            history.extend(rows)
        accelerator.save_state(out_dir / "checkpoints" / f"epoch-{epoch}")
        _prune_checkpoints(out_dir, keep=epoch)
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save(out_dir / "model")
    return [history.records[k] for k in sorted(history.records, key=_history_order)]


@torch.no_grad()
def evaluate(model: EvidenceCritic, data: GroupDataset, criterion, batch_groups: int = 32) -> dict:
    """Held-out loss, NDCG@3 (gains = teacher utilities) and MRR of the first useful passage."""
    model.eval()
    device = next(model.parameters()).device
    losses, ndcgs, mrrs = [], [], []
    loader = torch.utils.data.DataLoader(data, batch_size=batch_groups, collate_fn=data.collate)
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = _group_logits(model, batch).float()
        losses.append(criterion(logits, batch["targets"], batch["mask"]).item())
        for z, s, m in zip(logits.cpu().numpy(), batch["targets"].cpu().numpy(),
                           batch["mask"].cpu().numpy()):
            ndcgs.append(ndcg_at_k(z[m], s[m], 3))
            mrrs.append(mrr(z[m], s[m]))
    model.train()
    return {"loss": float(np.mean(losses)), "ndcg@3": float(np.mean(ndcgs)),
            "mrr": float(np.mean(mrrs))}


def _resume(accelerator, out_dir: Path) -> int:
    done = sorted((out_dir / "checkpoints").glob("epoch-*"), key=lambda p: int(p.name[6:]))
    if not done:
        return 0
    accelerator.load_state(done[-1])
    return int(done[-1].name[6:]) + 1


def _prune_checkpoints(out_dir: Path, keep: int) -> None:
    import shutil

    for old in (out_dir / "checkpoints").glob("epoch-*"):
        if int(old.name[6:]) < keep:
            shutil.rmtree(old)


def _history_order(key: str) -> tuple:
    split, epoch, *step = key.split("-")
    return int(epoch), split == "val", int(step[0]) if step else 0


def _check_hparams(**values) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be > 0, got {value}")


# --- inference ---------------------------------------------------------------------------------


class CriticScorer:
    """Batched scoring of (query, passage) pairs with a trained critic: σ(z) ∈ [0, 1]."""

    def __init__(self, critic: EvidenceCritic | str | Path, batch_size: int = 64,
                 device: str | None = None):
        self.model = critic if isinstance(critic, EvidenceCritic) else EvidenceCritic.load(critic)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.batch_size = batch_size

    @torch.no_grad()
    def score(self, queries: Sequence[str], passages: Sequence[str]) -> np.ndarray:
        """Scores for aligned lists of queries and passages (sorted by length to pad less)."""
        if len(queries) != len(passages):
            raise ValueError(f"{len(queries)} queries but {len(passages)} passages")
        order = np.argsort([len(q) + len(p) for q, p in zip(queries, passages)])
        scores = np.empty(len(order), dtype=np.float32)
        tok = self.model.tokenizer
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            enc = tok([queries[i] for i in idx], [passages[i] for i in idx], padding=True,
                      truncation="only_second", max_length=self.model.config["max_length"],
                      return_tensors="pt").to(self.device)
            with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.device == "cuda"):
                scores[idx] = torch.sigmoid(self.model(**enc).float()).cpu().numpy()
        return scores


# --- throughput benchmark ----------------------------------------------------------------------

# Encoder shapes for the benchmark: (layers, hidden, heads, intermediate). "minilm" uses the real
# init weights; the others are randomly initialised at that shape (speed does not depend on weights).
ENCODER_SHAPES = {"minilm": None, "base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096)}
H200_BF16_PEAK = 989e12  # dense bf16 FLOP/s of an H100/H200 SXM, the usual MFU denominator


def benchmark(groups: Sequence[dict], *, init: str, shape: str = "minilm", batch_pairs: int = 352,
              steps: int = 30, warmup_steps: int = 5, max_length: int = 256,
              pad_to: int | None = None, workers: int = 4, compile_model: bool = False) -> dict:
    """Training throughput of the kit's own loop: real groups, pre-tokenised and dynamically
    padded, the hybrid loss, fused AdamW, bf16 autocast on GPU (fp32 on CPU).

    MFU counts training FLOPs as 6·N·T + 12·L·d·Σ s² — N non-embedding parameters, T tokens
    processed (padding included), L layers, d hidden size, s each sequence's padded length — over
    ``H200_BF16_PEAK``. ``pad_to`` pads every pair to a fixed length (to compare with fixed-length
    probes).
    """
    from accelerate import Accelerator

    cuda = torch.cuda.is_available()
    accelerator = Accelerator(mixed_precision="bf16" if cuda else "no")
    model = EvidenceCritic(_shaped_encoder(init, shape), max_length=max_length)
    n_docs = max(1, round(sum(len(g["docs"]) for g in groups) / len(groups)))
    batch_groups = max(1, batch_pairs // n_docs)
    data = GroupDataset(groups, model.tokenizer, max_length)
    collate = data.collate if pad_to is None else (lambda b: _pad_batch(data.collate(b), pad_to, data.pad_id))
    loader = torch.utils.data.DataLoader(data, batch_size=batch_groups, shuffle=True, drop_last=True,
                                         collate_fn=collate, num_workers=workers if cuda else 0,
                                         pin_memory=cuda, persistent_workers=cuda and workers > 0)
    criterion = make_loss("hybrid")
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01, fused=cuda)
    if compile_model:
        model.encoder = torch.compile(model.encoder, dynamic=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    cfg = accelerator.unwrap_model(model).encoder.config
    n_params = sum(p.numel() for n, p in accelerator.unwrap_model(model).encoder.named_parameters()
                   if "embeddings" not in n)
    totals = {"pairs": 0, "tokens": 0, "real_tokens": 0, "flops": 0.0}
    batches = _cycle(loader)
    start = None
    for step in range(warmup_steps + steps):
        if step == warmup_steps:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            start = time.perf_counter()
        batch = {k: v.to(accelerator.device, non_blocking=True) for k, v in next(batches).items()}
        loss = criterion(_group_logits(model, batch), batch["targets"], batch["mask"])
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= warmup_steps:
            pairs, length = batch["input_ids"].shape
            totals["pairs"] += pairs
            totals["tokens"] += pairs * length
            totals["real_tokens"] += batch["attention_mask"].sum()  # stays on device: no sync
            totals["flops"] += 6 * n_params * pairs * length + 12 * cfg.num_hidden_layers \
                * cfg.hidden_size * pairs * length ** 2
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"device": torch.cuda.get_device_name() if cuda else "cpu", "shape": shape,
            "params (non-embedding)": n_params, "pairs per batch": batch_groups * n_docs,
            "pad_to": pad_to, "compiled": compile_model, "steps": steps,
            "samples/s": totals["pairs"] / seconds, "tokens/s": totals["tokens"] / seconds,
            "real tokens/s": float(totals["real_tokens"]) / seconds,
            "mean padded length": totals["tokens"] / totals["pairs"],
            "peak memory GB": torch.cuda.max_memory_allocated() / 1e9 if cuda else None,
            "MFU": totals["flops"] / seconds / H200_BF16_PEAK if cuda else None}


def _shaped_encoder(init: str, shape: str) -> str:
    """The init itself for "minilm"; otherwise a randomly initialised BERT of that shape (saved to
    a temporary folder with the init's tokenizer)."""
    if shape not in ENCODER_SHAPES:
        raise ValueError(f"unknown encoder shape {shape!r}; expected one of {sorted(ENCODER_SHAPES)}")
    if ENCODER_SHAPES[shape] is None:
        return init
    import tempfile

    from transformers import AutoTokenizer, BertConfig, BertModel

    layers, hidden, heads, intermediate = ENCODER_SHAPES[shape]
    folder = tempfile.mkdtemp(prefix=f"critic-{shape}-")
    BertModel(BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                         intermediate_size=intermediate)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(init).save_pretrained(folder)
    return folder


def _pad_batch(batch: dict, length: int, pad_id: int) -> dict:
    extra = length - batch["input_ids"].shape[1]
    if extra <= 0:
        return batch
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        if key in batch:
            fill = pad_id if key == "input_ids" else 0
            batch[key] = torch.nn.functional.pad(batch[key], (0, extra), value=fill)
    return batch


def _cycle(loader):
    while True:
        yield from loader


# --- command line ------------------------------------------------------------------------------


def main(argv=None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m robustkit.critic")
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train a critic from a groups JSONL")
    tr.add_argument("--groups", required=True)
    tr.add_argument("--val-groups")
    tr.add_argument("--init", required=True, help="encoder path or hub id")
    tr.add_argument("--out", required=True)
    tr.add_argument("--loss", default="hybrid", choices=["hybrid", "pointwise", "listwise"])
    tr.add_argument("--tau", type=float, default=1.0)
    tr.add_argument("--epochs", type=int, default=3)
    tr.add_argument("--lr", type=float, default=5e-5)
    tr.add_argument("--batch-groups", type=int, default=32)
    tr.add_argument("--grad-accum", type=int, default=1)
    tr.add_argument("--max-length", type=int, default=256)
    tr.add_argument("--seed", type=int, default=0)
    be = sub.add_parser("bench", help="training throughput of the kit's loop (GPU or CPU)")
    be.add_argument("--groups", required=True)
    be.add_argument("--init", required=True)
    be.add_argument("--shapes", default="minilm", help="comma-separated: minilm,base,large")
    be.add_argument("--batch-pairs", type=int, default=352)
    be.add_argument("--steps", type=int, default=30)
    be.add_argument("--pad-to", type=int)
    be.add_argument("--compile", action="store_true")
    be.add_argument("--out")
    args = parser.parse_args(argv)
    groups = [json.loads(line) for line in open(args.groups, encoding="utf-8")]
    if args.command == "bench":
        results = [benchmark(groups, init=args.init, shape=shape, batch_pairs=args.batch_pairs,
                             steps=args.steps, pad_to=args.pad_to, compile_model=args.compile)
                   for shape in args.shapes.split(",")]
        for result in results:
            print(json.dumps(result))
        if args.out:
            atomic_write_text(args.out, json.dumps(results, indent=2))
        return
    if args.val_groups:
        val = [json.loads(line) for line in open(args.val_groups, encoding="utf-8")]
    else:
        groups, val = split_groups(groups, seed=args.seed)
    start = time.perf_counter()
    history = train(groups, val, init=args.init, out_dir=args.out, loss=args.loss, tau=args.tau,
                    epochs=args.epochs, lr=args.lr, batch_groups=args.batch_groups,
                    grad_accum=args.grad_accum, max_length=args.max_length, seed=args.seed)
    last = [h for h in history if h["split"] == "val"][-1]
    atomic_write_text(Path(args.out) / "summary.json", json.dumps(
        {"seconds": time.perf_counter() - start, **last}, indent=2))
    print(json.dumps(last))


if __name__ == "__main__":
    main()
