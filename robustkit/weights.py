"""A language model's weights in this process: where they are read from, in which dtype, and
which ones a GPU holds.

The dtype comes from ``device.model_dtype``: fp32 on every CPU, bf16 on a GPU that has it and
fp16 on one that does not (Colab's T4), ``$ROBUSTKIT_DTYPE`` to override; the choice is printed
when the weights are first loaded. Some models overflow in fp16 (the Qwen2 family is reported to,
on pre-Ampere GPUs): the first time a model is asked for in fp16 on a GPU, ``fp16_dtype`` runs
it on probe prompts, and a model whose logits are not finite runs in fp32 instead — printed,
counted in ``DTYPE_FALLBACKS`` and remembered per (model, GPU) in the cache folder. On a GPU
every model is admitted to ``device.GPU_MEMORY``, which releases the least recently used others
when room is short and names the model and the memory when it cannot fit.

SmolLM2-135M ships as a GGUF file; transformers de-quantises it once (~15 s) and the kit keeps a
safetensors copy in the cache directory, so later loads take about a second. One process at a
time converts (``locks``); another that asks meanwhile waits for it and reads its copy.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from robustkit import memo
from robustkit.artifacts import atomic_write_text
from robustkit.config import quiet_model_loading, show_progress
from robustkit.paths import cache_dir
from robustkit.device import GPU_MEMORY, gpu
from robustkit.locks import exclusive
from robustkit.models import ModelSpec, auto_config, parameter_count


def load_causal_lm(spec: ModelSpec, dtype: str, device: str = "cpu", reason: str = "", *,
                   shared: bool = True):
    """A causal LM for inference, loaded once per (weights, adapter, dtype, device) in this process —
    every generator naming the same model shares it (``shared=False``: a private copy, e.g. to time
    the load itself). A GGUF file is converted once to a cached copy. A spec with a LoRA ``adapter``
    gets its own copy of the base weights with the adapter merged in (``merge_adapter``), so the
    base model other generators share is never changed."""
    import torch
    from transformers import AutoModelForCausalLM

    weights = weights_dir(spec, dtype)
    key = (weights, spec.adapter, dtype, device)
    if shared and key in _LOADED:
        if device.startswith("cuda"):
            GPU_MEMORY.touch(spec.name)
        return _LOADED[key]
    quiet_model_loading()
    if device.startswith("cuda"):
        nbytes = parameter_count(auto_config(weights), "chat LM") * getattr(torch, dtype).itemsize
        GPU_MEMORY.admit(spec.name, nbytes, evict=lambda: _LOADED.pop(key, None))
    if shared:
        print(f"[robustkit] loading {spec.name} in {dtype} on {device}" + (f" ({reason})" if reason else ""))
    model = AutoModelForCausalLM.from_pretrained(weights, dtype=getattr(torch, dtype))
    if spec.adapter:
        model = merge_adapter(model, spec.adapter)
    model = model.to(device).eval()
    if shared:
        _LOADED[key] = model
    return model


def merge_adapter(model, adapter: str):
    """``model`` with the peft LoRA adapter saved in ``adapter`` merged into its weights
    (W + (α/r)·B·A, once): a plain transformers model again, which the kit's prefix sharing and
    decoding treat as any other, and which generates at the base model's cost — an unmerged
    adapter adds two small matrix products to every adapted layer at every step. At tiny (LoRA on
    6 of SmolLM2's 30 layers) the two decode alike (8 critiques of 40 tokens: 12.3 against 12.4
    CPU seconds, one thread), and merging costs under a second, once per critic and process."""
    from peft import PeftModel

    return PeftModel.from_pretrained(model, adapter).merge_and_unload()


# the models this process holds, by (weights, adapter, dtype, device)
_LOADED: dict[tuple[str, str | None, str, str], object] = memo.holding(f"{__name__}._LOADED", {})
DTYPE_FALLBACKS: list[str] = []  # models that overflowed in fp16 and run in fp32 instead
PROBE_PROMPTS = ("Passage: The Eiffel Tower was completed in 1889 for the World's Fair in Paris.\n"
                 "Question: When was the Eiffel Tower completed?",
                 "Write one sentence about the history of printing.")


def fp16_dtype(spec: ModelSpec, device: str, reason: str) -> tuple[str, str]:
    """``float16`` for ``spec`` on ``device`` if its logits stay finite on the probe prompts,
    else ``float32`` (printed and counted). Decided once per model and GPU, kept on disk."""
    record = cache_dir() / "fp16_probes.json"
    verdicts = json.loads(record.read_text()) if record.exists() else {}
    card = gpu().name if gpu() else device
    key = f"{spec.name} on {card}"
    if key not in verdicts:
        finite = finite_in_fp16(spec, device)
        with exclusive(record, "recording an fp16 probe"):  # merged, so another process's verdicts stay
            verdicts = json.loads(record.read_text()) if record.exists() else {}
            verdicts[key] = finite
            atomic_write_text(record, json.dumps(verdicts, indent=1))
    if verdicts[key]:
        return "float16", reason
    DTYPE_FALLBACKS.append(spec.name)
    print(f"[robustkit] {spec.name} overflows in fp16 on {card} (non-finite logits on the kit's probe "
          f"prompts): it runs in float32 instead (fallback {len(DTYPE_FALLBACKS)} of this session)")
    return "float32", f"fp16 overflows for this model on {card} (probe kept in {record})"


def finite_in_fp16(spec: ModelSpec, device: str) -> bool:
    """Whether ``spec`` in fp16 on ``device`` gives finite logits on ``PROBE_PROMPTS`` (chat-rendered,
    one batch). A model that passes stays loaded for the work that follows."""
    import torch

    tokenizer = load_tokenizer(weights_dir(spec, "float16"))
    rendered = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                              add_generation_prompt=True) for p in PROBE_PROMPTS]
    batch = tokenizer(rendered, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    model = load_causal_lm(spec, "float16", device, "probing fp16")
    with torch.inference_mode():
        finite = bool(torch.isfinite(model(**batch).logits).all())
    if not finite:
        _LOADED.pop((weights_dir(spec, "float16"), spec.adapter, "float16", device), None)
        GPU_MEMORY.forget(spec.name)
    return finite


@memo.cached(4)
def load_tokenizer(weights: str):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(weights)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def weights_dir(spec: ModelSpec, dtype: str) -> str:
    """Where ``from_pretrained`` reads the weights: the spec's path, or the GGUF's converted copy."""
    if not spec.gguf_file:
        return spec.path
    target = cache_dir() / "models" / f"{spec.name.replace('/', '--')}-{dtype}"
    if not (target / "config.json").exists():  # a finished copy is read without the lock
        with exclusive(target, f"converting {spec.gguf_file} to {target}"):
            if not (target / "config.json").exists():  # the holder we waited for may have converted it
                _convert_gguf(spec, dtype, target)
    return str(target)


def _convert_gguf(spec: ModelSpec, dtype: str, target: Path) -> None:
    """Convert into a folder of this process's own, then rename it into place: a half-written
    copy is never mistaken for a finished one, and never shared with another converter."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # a killed converter's folders: no other converter is at work, as this process holds the lock
    for leftover in target.parent.glob(f".{target.name}.*.tmp"):
        shutil.rmtree(leftover, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    tmp.chmod(0o755)  # mkdtemp makes a private folder; the copy keeps the usual permissions
    try:
        _dequantise(spec, dtype, tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _dequantise(spec: ModelSpec, dtype: str, out: Path) -> None:
    """The heavy part: read the GGUF, de-quantise it and save a plain ``dtype`` copy to ``out``."""
    from functools import partial
    from unittest import mock

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers import modeling_gguf_pytorch_utils as gguf_loader

    quiet_model_loading()
    print(f"[robustkit] converting {spec.gguf_file} to a cached {dtype} copy (once, ~15 s)")
    tokenizer = AutoTokenizer.from_pretrained(spec.path, gguf_file=spec.gguf_file)
    # the GGUF reader draws its own tqdm bar, outside the hub's switch: make it obey the kit's
    with mock.patch.object(gguf_loader, "tqdm", partial(tqdm, disable=not show_progress())):
        quantised = AutoModelForCausalLM.from_pretrained(spec.path, gguf_file=spec.gguf_file,
                                                         dtype=torch.float32)
    config = quantised.config
    del config.quantization_config  # a plain model: transformers refuses to save a GGUF-tagged one
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantised.state_dict())
    plain.to(getattr(torch, dtype)).save_pretrained(out)
    tokenizer.save_pretrained(out)


