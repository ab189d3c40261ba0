"""AlignRAG's critic: the training corpus (rationales, context granularity, contrastive critiques)
and its two recipes — critique fine-tuning (CFT: LoRA SFT with TRL's ``SFTTrainer``) and
critique preference optimisation (CPO: TRL's ``DPOTrainer``) — plus the "without CCS" ablation.

    examples = training_corpus(cfg)              # one row per in-domain training question
    critic = critic_generator(cfg, "cft")        # trained (or reused), ready to generate

Every critic starts from the same base model (the generator's weights) with the same LoRA shape,
training questions, epochs, batch size and learning rate. Only what training made is kept: the
LoRA adapter as peft saves it (``adapter_model.safetensors``, ``adapter_config.json``) and the loss
curve, under ``runs/<scale>/alignrag/critic-<variant>/`` — about 4 MB at tiny, where a merged copy
of SmolLM2 took 538 MB and one of a colab or paper model takes gigabytes. The critic merges it into
its own copy of the base weights when it first generates (``weights.merge_adapter``). The adapter
folder's checksum is part of the critic's model id, so a retrained critic never reuses another's
cached critiques.
"""
from __future__ import annotations

import json
import os
import random
import warnings
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pandas as pd

from robustkit import memo, resources
from robustkit.alignrag.config import AlignRAGConfig, settings
from robustkit.alignrag.critique import (BETTER_HEAD, Rationale, answer_in, augment, check_target,
                                         contrastive_critique, granularity, split_critique)
from robustkit.alignrag.data import eval_sets, run_dir
from robustkit.alignrag.method import (PROMPT_VERSION, REASON, SELF_FEEDBACK, STRONG, critic_prompt,
                                       critique, documents_block, reason)
from robustkit.artifacts import read_manifest, stage
from robustkit.config import set_seed, show_progress
from robustkit.data.records import Passage, read_jsonl, write_jsonl
from robustkit.device import mixed_precision, pick_device
from robustkit.llm import DEFAULT_SYSTEM, Generator
from robustkit.models import ModelSpec
from robustkit.qa_sets import QASet
from robustkit.reader import clip_words
from robustkit.retrieval import search_for
from robustkit.weights import weights_dir

# critic variant -> (TRL recipe, the training target's column): CPO prefers the contrastive
# critique (chosen) over the weak model's self-critique (rejected)
VARIANTS = {"cft": ("sft", "ccs_critique"), "w/o ccs": ("sft", "self_critique"), "cpo": ("dpo", "ccs_critique")}


def training_corpus(cfg: AlignRAGConfig | None = None) -> list[dict]:
    """One row per in-domain training question: its documents (every ``augment_every``-th set with
    one irrelevant document), their granularity tiers, the weak rationale (the generator's own
    y₀), the strong one (the generator shown the gold answer: InstructRAG's self-synthesis), the
    weak model's self-critique and the contrastive critique (the kit's deterministic CCS)."""
    cfg = settings(cfg)
    domain = eval_sets(cfg)["in-domain"]
    generator = resources.generator_for(cfg.scale)
    inputs = {"questions": [q.id for q in domain.train], "corpus": domain.corpus.checksum,
              "generator": generator.identity(), "prompts": PROMPT_VERSION, "seed": cfg.scale.seed,
              **{k: getattr(cfg, k) for k in ("k", "max_words", "augment_every", "rationale_tokens",
                                              "answer_tokens", "critique_tokens")}}

    def build(out: Path, scratch: Path) -> dict:
        rows = _synthesise(cfg, domain, generator)
        write_jsonl(out, rows)
        return tier_counts(rows).set_index("tier")["questions"].to_dict()

    return stage(run_dir(cfg) / "training.jsonl", inputs, build, read_jsonl)


def tier_counts(rows: list[dict]) -> pd.DataFrame:
    """How many training sets fall in each context-granularity tier."""
    frame = pd.DataFrame(rows)
    counts = [(f"{axis}: {tier}", int((frame[axis] == tier).sum()))
              for axis in ("relevance", "helpfulness", "completeness") for tier in sorted(frame[axis].unique())]
    return pd.DataFrame(counts, columns=["tier", "questions"])


def _synthesise(cfg: AlignRAGConfig, domain: QASet, generator) -> list[dict]:
    questions = domain.train
    if not questions:
        raise ValueError(f"no training questions in {domain.name!r}: the critic has nothing to learn from")
    hits = search_for(domain.retriever, [q.id for q in questions], [q.text for q in questions], cfg.k)
    docs = [[domain.corpus[h.doc_id] for h in row] for row in hits]
    rng = random.Random(cfg.scale.seed)
    augmented = [(i + 1) % cfg.augment_every == 0 and cfg.k > 1 for i in range(len(questions))]
    for i, q in enumerate(questions):
        if augmented[i]:  # an unrelated question's document: retrieved for another question, no gold alias
            pool = [d for j, row in enumerate(docs) if j != i for d in row
                    if d.id not in q.gold_ids and not answer_in(d.content, q.answers)]
            docs[i] = augment(docs[i], list({d.id: d for d in pool}.values()), rng)
    blocks = [documents_block(d, cfg.max_words) for d in docs]
    budgets = dict(rationale_tokens=cfg.rationale_tokens, answer_tokens=cfg.answer_tokens)
    texts = [q.text for q in questions]
    weak = reason(generator, [[{"role": "user", "content": REASON.format(documents=b, question=q.text)}]
                              for b, q in zip(blocks, questions)], texts, blocks, **budgets, desc="weak rationales")
    strong_text = generator.generate(
        [[{"role": "user", "content": STRONG.format(documents=b, question=q.text, gold=q.answer)},
          {"role": "assistant", "content": "Reasoning:"}] for b, q in zip(blocks, questions)],
        max_new_tokens=cfg.rationale_tokens, desc="strong rationales")
    strong = [Rationale(r, q.answer) for r, q in zip(strong_text, questions)]
    own = critique(generator, [critic_prompt(q.text, d, y, cfg.max_words, template=SELF_FEEDBACK)
                               for q, d, y in zip(questions, docs, weak)], tokens=cfg.critique_tokens,
                   desc="self-critiques")
    # the critique quotes only what the critic is shown: the documents as clipped in its prompt
    shown = [[Passage(p.id, "", clip_words(p.content, cfg.max_words), p.kind) for p in d] for d in docs]
    rows = []
    for q, d, seen, aug, w, s, c in zip(questions, docs, shown, augmented, weak, strong, own):
        tiers = granularity(q, d, aug)
        rows.append({"question_id": q.id, "question": q.text, "gold": list(q.answers), "doc_ids": [p.id for p in d],
                     "relevance": tiers.relevance, "helpfulness": tiers.helpfulness,
                     "completeness": tiers.completeness, "weak_reasoning": w.reasoning, "weak_answer": w.answer,
                     "weak_correct": answer_in(w.answer, q.answers), "strong_reasoning": s.reasoning,
                     "strong_answer": s.answer, "self_critique": _complete(c, w),
                     "ccs_critique": contrastive_critique(q, seen, w, s, max_words=8)})
    return rows


def _complete(own: str, weak: Rationale) -> str:
    """The self-critique in the target's two parts: a 135M model seldom writes the second head, so
    when it is missing the weak model's own rationale stands as its "better" one (it has no other)."""
    if split_critique(own)[1]:
        return own
    return f"{own.rstrip()} {BETTER_HEAD} {weak.reasoning} So the answer is {weak.answer}."


def critic_generator(cfg: AlignRAGConfig | None, variant: str) -> Generator:
    """The critic trained by ``variant`` ("cft", "w/o ccs" or "cpo"), trained now or reused."""
    return _critic_generator(settings(cfg), variant)


@memo.cached(16, per_runs_folder=True)
def _critic_generator(cfg: AlignRAGConfig, variant: str) -> Generator:
    # once per process: the run log, every dataset's refiners and the notebook all ask for the same
    # critics, and each holds its own merged copy of the base weights once loaded
    path = train_critic(cfg, variant)
    digest = read_manifest(path)["sha256"][:12]
    return adapter_critic(path, f"robustkit/alignrag-critic-{_slug(variant)}-{digest}", cfg.scale)


def adapter_critic(adapter: Path, name: str, scale) -> Generator:
    """A critic LM: the scale's generator weights with the LoRA adapter saved in ``adapter`` merged in
    when it first generates; ``name`` is its model id, which keys its cached calls."""
    base = resources.generator_for(scale)
    spec = ModelSpec(role="critic", name=name, path=weights_dir(base.spec, base.dtype), source="trained",
                     adapter=str(adapter))
    return Generator("critic", scale, spec=spec)


def train_critic(cfg: AlignRAGConfig, variant: str) -> Path:
    """The critic of ``variant``: a staged folder of its LoRA adapter (peft's files) and ``losses.json``."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown critic variant {variant!r}; expected one of {list(VARIANTS)}")
    examples = training_corpus(cfg)
    recipe, target = VARIANTS[variant]
    for row in examples:  # a malformed target stops here, before any training
        check_target(row[target])
    base = resources.generator_for(cfg.scale)
    # "saved": a critic staged before adapters were kept is a merged full copy of the base model,
    # which this key makes stale (rebuilt, or under load-only refused as NotStaged), never misread
    inputs = {"variant": variant, "recipe": recipe, "examples": read_manifest(run_dir(cfg) / "training.jsonl")["sha256"],
              "base": base.model_id, "seed": cfg.scale.seed, "saved": "peft LoRA adapter",
              **{k: getattr(cfg, k) for k in ("lora_r", "lora_alpha", "lora_layers", "learning_rate", "epochs", "batch_size",
                                              "dpo_beta", "max_length", "max_words")}}

    def build(out: Path, scratch: Path) -> dict:
        return _fit(cfg, recipe, target, examples, weights_dir(base.spec, base.dtype), out, scratch)

    return stage(critic_path(cfg, variant), inputs, build, Path)


def critic_path(cfg: AlignRAGConfig, variant: str) -> Path:
    """Where the critic of ``variant`` is staged (built or not)."""
    return run_dir(settings(cfg)) / f"critic-{_slug(variant)}"


def training_curves(cfg: AlignRAGConfig | None = None) -> pd.DataFrame:
    """Loss per optimiser step of every trained critic (columns critic, step, loss)."""
    cfg = settings(cfg)
    frames = [pd.DataFrame(json.loads((train_critic(cfg, v) / "losses.json").read_text())).assign(critic=v)
              for v in VARIANTS]
    return pd.concat(frames, ignore_index=True)[["critic", "step", "loss"]]


def _fit(cfg: AlignRAGConfig, recipe: str, target: str, examples: list[dict], weights: str, out: Path,
         scratch: Path) -> dict:
    import datasets
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback

    set_seed(cfg.scale.seed)
    domain = eval_sets(cfg)["in-domain"]
    prompts = [[{"role": "system", "content": DEFAULT_SYSTEM},  # as the kit's generators render them
                *critic_prompt(row["question"], [domain.corpus[i] for i in row["doc_ids"]],
                               Rationale(row["weak_reasoning"], row["weak_answer"]), cfg.max_words)]
               for row in examples]
    if recipe == "sft":
        data = datasets.Dataset.from_list([{"prompt": p, "completion": _reply(r[target])}
                                           for p, r in zip(prompts, examples)])
    else:
        data = datasets.Dataset.from_list([{"prompt": p, "chosen": _reply(r["ccs_critique"]),
                                            "rejected": _reply(r["self_critique"])} for p, r in zip(prompts, examples)])
    tokenizer = AutoTokenizer.from_pretrained(weights)
    model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32)  # fp32 master weights
    where = pick_device()
    precision = mixed_precision(where) if where.startswith("cuda") else "cpu"
    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=0.0, task_type="CAUSAL_LM",
                      **_lora_targets(model, cfg.lora_layers))
    common = dict(output_dir=str(scratch / "trainer"), num_train_epochs=cfg.epochs,
                  per_device_train_batch_size=cfg.batch_size, learning_rate=cfg.learning_rate, logging_steps=1,
                  save_strategy="no", report_to="none", seed=cfg.scale.seed, data_seed=cfg.scale.seed,
                  max_length=cfg.max_length, disable_tqdm=not show_progress(), dataloader_num_workers=0,
                  use_cpu=precision == "cpu", bf16=precision == "bf16", fp16=precision == "fp16", dataset_num_proc=None,
                  # TRL checkpoints activations by default; on a CPU compute, not memory, is short, and
                  # recomputing the forward pass (through every layer) tripled a tiny step
                  gradient_checkpointing=torch.cuda.is_available())
    with warnings.catch_warnings(), _bars(show_progress()):
        # transformers 5 renames gradient checkpointing, which TRL's configs still set: not ours to fix
        warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning)
        trainer = _trainer(recipe, model, tokenizer, data, lora, common, cfg.dpo_beta)
        if not show_progress():  # without bars the Trainer prints every log line instead
            trainer.remove_callback(PrinterCallback)
        result = trainer.train()
    out.mkdir(parents=True)
    _save_adapter(trainer.model, out, resources.generator_for(cfg.scale).model_id)
    losses = [{"step": h["step"], "loss": h["loss"]} for h in trainer.state.log_history if "loss" in h]
    (out / "losses.json").write_text(json.dumps(losses))
    return {"examples": len(examples), "steps": trainer.state.global_step,
            "train_s": round(result.metrics["train_runtime"], 1),
            "samples_per_s": round(result.metrics["train_samples_per_second"], 2)}


@contextmanager
def _bars(show: bool):
    """TRL's own progress bars on or off: it tokenises through ``datasets.map`` (datasets' switch)
    and precomputes DPO's reference with a bare tqdm (``TQDM_DISABLE``); both restored after."""
    import datasets

    was = datasets.is_progress_bar_enabled()
    (datasets.enable_progress_bars if show else datasets.disable_progress_bars)()
    try:
        with mock.patch.dict(os.environ, {} if show else {"TQDM_DISABLE": "1"}):
            yield
    finally:
        (datasets.enable_progress_bars if was else datasets.disable_progress_bars)()


def _trainer(recipe: str, model, tokenizer, data, lora, common: dict, beta: float):
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    if recipe == "sft":
        return SFTTrainer(model=model, args=SFTConfig(**common), train_dataset=data, processing_class=tokenizer,
                          peft_config=lora)
    # the reference is the base model (the adapter switched off); its log-probabilities are
    # computed once, not again every epoch
    return DPOTrainer(model=model, args=DPOConfig(**common, beta=beta, precompute_ref_log_probs=True),
                      train_dataset=data, processing_class=tokenizer, peft_config=lora)


def _save_adapter(model, out: Path, base_id: str) -> None:
    """The trained adapter alone, as peft saves it. Its config names the base by model id rather
    than by this machine's path to the weights, and peft's model card (a template naming that path)
    is not kept: the folder's checksum is the critic's identity, the same on every machine. LoRA
    trains no embedding, so none is saved (and peft does not look the base up on the hub to check)."""
    model.peft_config["default"].base_model_name_or_path = base_id
    model.save_pretrained(out, save_embedding_layers=False)
    (out / "README.md").unlink(missing_ok=True)


def _reply(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def _lora_targets(model, top_layers: int) -> dict:
    """LoRA on every linear layer (the paper's), or only on the top ``top_layers`` decoder layers:
    then backpropagation stops there, which more than halves a CPU step (4.0 s against 9.4 s for
    4 × 300 tokens on SmolLM2-135M, 2 cores)."""
    if not top_layers:
        return {"target_modules": "all-linear"}
    n = model.config.num_hidden_layers
    if top_layers > n:
        raise ValueError(f"lora_layers is {top_layers} but the model has {n} decoder layers")
    linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.model.layers[0].named_modules()
                     if type(module).__name__ == "Linear"})
    return {"target_modules": linear, "layers_to_transform": list(range(n - top_layers, n))}


def _slug(variant: str) -> str:
    return variant.replace("w/o ", "no-").replace(" ", "-")
