"""Training throughput of the Evidence Critic's loop, on a GPU or this CPU (results page: Performance).

``python -m robustkit.corm bench --groups G --init I --shapes minilm,base,large`` times the kit's
own loop — real groups, pre-tokenised and dynamically padded, the hybrid loss, fused AdamW, mixed precision
autocast on GPU (fp32 on CPU) — and reports samples/s, tokens/s, peak memory and MFU.
"""
from __future__ import annotations

import time
from typing import Sequence

import torch

from robustkit.crossencoder.loss import make_loss
from robustkit.crossencoder.model import CrossEncoder, GroupDataset, group_logits
from robustkit.device import mixed_precision

# Encoder shapes for the benchmark: (layers, hidden, heads, intermediate). "minilm" uses the real
# init weights; the others are randomly initialised at that shape (speed does not depend on weights).
ENCODER_SHAPES = {"minilm": None, "base": (12, 768, 12, 3072), "large": (24, 1024, 16, 4096)}
H200_BF16_PEAK = 989e12  # dense bf16 FLOP/s of an H100/H200 SXM, the usual MFU denominator


def benchmark(groups: Sequence[dict], *, init: str, shape: str = "minilm", batch_pairs: int = 352,
              steps: int = 30, warmup_steps: int = 5, max_length: int = 256,
              pad_to: int | None = None, workers: int = 4, compile_model: bool = False) -> dict:
    """Training throughput of the kit's own loop: real groups, pre-tokenised and dynamically
    padded, the hybrid loss, fused AdamW, the GPU's mixed precision (fp32 on CPU).

    MFU counts training FLOPs as 6·N·T + 12·L·d·Σ s² — N non-embedding parameters, T tokens
    processed (padding included), L layers, d hidden size, s each sequence's padded length — over
    ``H200_BF16_PEAK``. ``pad_to`` pads every pair to a fixed length (to compare with fixed-length
    probes).
    """
    from accelerate import Accelerator

    cuda = torch.cuda.is_available()
    accelerator = Accelerator(mixed_precision=mixed_precision("cuda" if cuda else "cpu"))
    model = CrossEncoder(_shaped_encoder(init, shape), max_length=max_length)
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
        loss = criterion(group_logits(model, batch), batch["targets"], batch["mask"])
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
