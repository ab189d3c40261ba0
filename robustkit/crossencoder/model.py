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
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from robustkit.artifacts import write_json
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


class CrossEncoderScorer:
    """Batched scoring of (query, passage) pairs with a trained cross-encoder: σ(z) ∈ [0, 1].

    Scores are remembered per (query, passage) pair: the weights never change once trained, and
    an evaluation asks for the same pairs again (CoRM's retrieval prior rescores the critic's
    candidates, the γ and λ choices the same validation queries). With ``store_as``
    (the checkpoint's sha256) they are also kept in the kit's on-disk call cache, so the next
    process — the next notebook, a rerun — replays them instead of running the model again.
    ``uncached()`` shares the model without either, for timing real forward passes."""

    def __init__(self, model: CrossEncoder | str | Path, batch_size: int | None = None,
                 device: str | None = None, *, cache: bool = True, store_as: str | None = None):
        self.model = model if isinstance(model, CrossEncoder) else CrossEncoder.load(model)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        # small batches keep a CPU's caches warm: 55 pairs/s at 16 vs 36-46 at 64 (2-core AVX2)
        self.batch_size = batch_size or (64 if self.device == "cuda" else 16)
        self._memo: dict[tuple[str, str], float] | None = {} if cache else None
        self._store = None
        if cache and store_as:
            from robustkit.llm import CallCache  # imported here: the training entry point stays light

            self._store = CallCache()
            # bf16 autocast on a GPU gives other scores than fp32 on a CPU: they are kept apart
            self._store_model = f"cross-encoder:{store_as}:{'bf16' if self.device == 'cuda' else 'fp32'}"

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
        """One forward pass per batch, pairs sorted by length so that batches pad less."""
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


@lru_cache(maxsize=16)
def stored_scorer(path: str, sha256: str) -> CrossEncoderScorer:
    """One scorer per trained checkpoint per process, its scores kept on disk under ``sha256``
    (the checkpoint's, from its manifest) so that the next process replays them."""
    return CrossEncoderScorer(path, store_as=sha256)
