"""The kit's cross-encoder: the model, its pre-tokenised listwise groups, its scorer.

It reads a query and one passage, [q ; d] → encoder → CLS → dropout 0.1 → linear → one logit.
Trained on "contains a gold alias" labels it is the relevance cross-encoder (``relevance``: the
warm start every CoRM critic starts from, CRAG's retrieval evaluator); trained on the teacher's
robustness utility s(x, d) of *perturbed* questions it is CoRM-RAG's Evidence Critic (§3.3).
Losses in ``crossencoder.loss``, the training loop in ``crossencoder.train``.

This module imports only torch and transformers (plus the kit's light modules), so the GPU
training entry point needs nothing else.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from robustkit import memo
from robustkit.artifacts import write_json
from robustkit.callcache import CallCache
from robustkit.config import quiet_model_loading
from robustkit.crossencoder import MAX_LENGTH


class CrossEncoder(nn.Module):
    """Cross-encoder: encoder → CLS vector → dropout → linear → one logit per (query, passage)."""

    def __init__(self, encoder_path: str, dropout: float = 0.1, max_length: int = MAX_LENGTH,
                 base_model: str | None = None):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        quiet_model_loading()
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
    def load(cls, directory: str | Path) -> "CrossEncoder":
        directory = Path(directory)
        config_path = directory / "critic_config.json"
        if not config_path.exists():
            raise FileNotFoundError(f"{directory}: not a cross-encoder checkpoint (no critic_config.json)")
        config = json.loads(config_path.read_text())
        model = cls(str(directory / "encoder"), config["dropout"], config["max_length"],
                     config["base_model"])
        if model.tokenizer.vocab_size != model.encoder.config.vocab_size \
                or model.tokenizer.vocab_size != config["tokenizer_vocab_size"]:
            raise ValueError(f"{directory}: tokenizer vocabulary ({model.tokenizer.vocab_size}) "
                             f"does not match the encoder's ({model.encoder.config.vocab_size}) "
                             f"for base model {config['base_model']!r}")
        model.head.load_state_dict(torch.load(directory / "head.pt", map_location="cpu"))
        return model.eval()


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


def group_logits(model, batch: dict) -> torch.Tensor:
    """Score every pair in a batch and lay the logits out as (groups, candidates)."""
    inputs = {k: v for k, v in batch.items() if k not in ("targets", "mask", "slots")}
    flat = model(**inputs)
    grid = flat.new_full((batch["mask"].numel(),), -1e4).index_copy(0, batch["slots"], flat)
    return grid.view(batch["mask"].shape)  # index_copy with precomputed slots: no device sync


class PretrainedCrossEncoder(nn.Module):
    """A hub cross-encoder — an ``AutoModelForSequenceClassification`` checkpoint with one logit,
    such as ``cross-encoder/ms-marco-MiniLM-L-6-v2`` — behind ``CrossEncoder``'s interface: a
    ``tokenizer``, a ``config`` with ``max_length``, one logit per (query, passage) from ``forward``."""

    def __init__(self, path: str, name: str | None = None, max_length: int = MAX_LENGTH):
        super().__init__()
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        quiet_model_loading()
        self.model = AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32)
        if self.model.config.num_labels != 1:
            raise ValueError(f"{name or path}: a relevance cross-encoder gives one logit per pair, this "
                             f"model gives {self.model.config.num_labels}")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.config = {"base_model": name or path, "max_length": max_length}

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).logits[:, 0]


def pair_logits(model: Callable[..., torch.Tensor], tokenizer, firsts: Sequence[str], seconds: Sequence[str], *,
                max_length: int, device: str, truncation: str | bool = "only_second",
                batch_pairs: int | None = None) -> torch.Tensor:
    """``model``'s logits for every (first, second) pair, in input order, as float32 on the CPU.

    The pairs are tokenised in one call, sorted by token length and batched so that a batch pads
    to its own longest pair. A CPU scores small batches (16 pairs: its caches stay warm); a GPU
    takes batches of up to ``GPU_TOKENS_PER_BATCH`` tokens, autocast in the device's precision,
    keeps every batch's logits on the device and copies them back once, so the host waits for
    the GPU once per call instead of once per batch. Non-finite logits (an fp16 overflow) stop
    with the fix."""
    from robustkit.device import autocast_dtype, mixed_precision

    if not firsts:
        return torch.empty(0)
    encoded = tokenizer(list(firsts), list(seconds), truncation=truncation, max_length=max_length)
    lengths = np.array([len(ids) for ids in encoded["input_ids"]])
    order = np.argsort(lengths, kind="stable")
    cast = autocast_dtype(device) if device.startswith("cuda") else None
    logits = []
    for rows in _batches(order, lengths, batch_pairs or (None if device.startswith("cuda") else 16)):
        batch = _padded(encoded, rows, tokenizer.pad_token_id, pin=device.startswith("cuda"))
        batch = {key: value.to(device, non_blocking=True) for key, value in batch.items()}
        with torch.autocast(device.split(":")[0], dtype=cast, enabled=cast is not None):
            logits.append(model(**batch).float())
    out = torch.empty(len(order), *logits[0].shape[1:])
    out[torch.from_numpy(order)] = torch.cat(logits).cpu()
    if not torch.isfinite(out).all():
        raise FloatingPointError(
            f"{int((~torch.isfinite(out)).sum())} non-finite logits from {type(model).__name__} in "
            f"{mixed_precision(device)} on {device}: an overflow; score in fp32 with "
            "ROBUSTKIT_MIXED_PRECISION=no")
    return out


GPU_TOKENS_PER_BATCH = 65536  # a GPU batch: up to 256 pairs of 256 tokens, more of shorter ones


def _padded(encoded, rows: np.ndarray, pad_id: int, pin: bool) -> dict[str, torch.Tensor]:
    """The rows' token lists right-padded to their longest (pinned for an asynchronous copy)."""
    width = max(len(encoded["input_ids"][i]) for i in rows)
    out = {}
    for key in encoded.keys():
        array = np.full((len(rows), width), pad_id if key == "input_ids" else 0, dtype=np.int64)
        for row, i in enumerate(rows):
            array[row, :len(encoded[key][i])] = encoded[key][i]
        out[key] = torch.from_numpy(array).pin_memory() if pin else torch.from_numpy(array)
    return out


def _batches(order: np.ndarray, lengths: np.ndarray, batch_pairs: int | None) -> list[np.ndarray]:
    """Consecutive runs of ``order`` (sorted by length): ``batch_pairs`` pairs each, or (None) as
    many pairs as keep pairs × longest length within ``GPU_TOKENS_PER_BATCH``."""
    if batch_pairs:
        return [order[i:i + batch_pairs] for i in range(0, len(order), batch_pairs)]
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or (end + 1 - start) * lengths[order[end]] > GPU_TOKENS_PER_BATCH:
            batches.append(order[start:end])
            start = end
    return batches


class CrossEncoderScorer:
    """Batched scoring of (query, passage) pairs with a cross-encoder: σ(z) ∈ [0, 1].

    ``model`` is a trained kit checkpoint (a folder, or a ``CrossEncoder``) or a
    ``PretrainedCrossEncoder`` from the hub. Scores are remembered per (query, passage) pair: the
    weights never change once trained, and an evaluation asks for the same pairs again (CoRM's
    retrieval prior rescores the critic's candidates, the γ and λ choices the same validation
    queries). With ``store_as`` (the checkpoint's sha256, or a hub model's id) they are also kept
    in the kit's on-disk call cache, so the next process — the next notebook, a rerun — replays
    them instead of running the model again. ``uncached()`` shares the model without either, for
    timing real forward passes. On a GPU the model is admitted to ``device.GPU_MEMORY``, which may
    move it back to the CPU to make room for another model; it returns when next asked to score."""

    def __init__(self, model: nn.Module | str | Path, batch_size: int | None = None,
                 device: str | None = None, *, cache: bool = True, store_as: str | None = None):
        from robustkit.device import mixed_precision, pick_device

        self.model = model if isinstance(model, nn.Module) else CrossEncoder.load(model)
        self.device = pick_device(device)
        self.model.eval()
        self.batch_size = batch_size  # None: the device's default (see ``pair_logits``)
        self._memo: dict[tuple[str, str], float] | None = {} if cache else None
        self._store = None
        if cache and store_as:
            self._store = CallCache()
            # fp16 or bf16 autocast on a GPU gives other scores than fp32 on a CPU: they are kept apart
            precision = mixed_precision(self.device).replace("no", "fp32")
            self._store_model = f"cross-encoder:{store_as}:{precision}"

    def identity(self) -> dict:
        """The checkpoint (``store_as``) and precision its scores come from; a model held only in
        memory has none to record, so results from it cannot be staged."""
        if self._store is None:
            raise ValueError("this cross-encoder scorer has no stored checkpoint identity (store_as): results "
                             "from it cannot be staged; score with methods.run, or load it with stored_scorer")
        return {"cross-encoder": self._store_model}

    def uncached(self) -> "CrossEncoderScorer":
        """The same model and batch size, scoring every pair afresh."""
        return CrossEncoderScorer(self.model, self.batch_size, self.device, cache=False)

    def score(self, queries: Sequence[str], passages: Sequence[str]) -> np.ndarray:
        """Scores for aligned lists of queries and passages."""
        if len(queries) != len(passages):
            raise ValueError(f"{len(queries)} queries but {len(passages)} passages")
        if self._memo is None:
            return self._forward(list(queries), list(passages))
        pairs = list(zip(queries, passages))
        missing = list(dict.fromkeys(p for p in pairs if p not in self._memo))
        if missing and self._store is not None:
            keys = [self._key(p) for p in missing]
            stored = self._store.get_many(keys)
            self._memo.update((p, float(stored[k])) for p, k in zip(missing, keys) if k in stored)
            missing = [p for p in missing if p not in self._memo]
        if missing:
            fresh = self._forward([q for q, _ in missing], [d for _, d in missing]).tolist()
            self._memo.update(zip(missing, fresh))
            if self._store is not None:
                self._store.put_many([(self._key(p), self._store_model, f"{p[0]}\n\n{p[1]}", "", repr(x))
                                      for p, x in zip(missing, fresh)])
        return np.array([self._memo[p] for p in pairs], dtype=np.float32)

    def _key(self, pair: tuple[str, str]) -> str:
        return hashlib.sha256("\x00".join((self._store_model, *pair)).encode()).hexdigest()

    @torch.no_grad()
    def _forward(self, queries: list[str], passages: list[str]) -> np.ndarray:
        self._on_device()
        logits = pair_logits(self.model, self.model.tokenizer, queries, passages,
                             max_length=self.model.config["max_length"], device=self.device,
                             batch_pairs=self.batch_size)
        return torch.sigmoid(logits).numpy()

    def _on_device(self) -> None:
        from robustkit.device import place

        place(self.model, self.device, f"cross-encoder {self.model.config['base_model']} ({id(self.model):x})")


@memo.cached(16)
def stored_scorer(path: str, sha256: str) -> CrossEncoderScorer:
    """One scorer per trained checkpoint per process, its scores kept on disk under ``sha256``
    (the checkpoint's, from its manifest) so that the next process replays them."""
    return CrossEncoderScorer(path, store_as=sha256)


@memo.cached(4)
def pretrained_scorer(path: str, name: str) -> CrossEncoderScorer:
    """One scorer per hub cross-encoder per process, its scores kept on disk under its name."""
    return CrossEncoderScorer(PretrainedCrossEncoder(path, name), store_as=name)
