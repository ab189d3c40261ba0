"""``python -m robustkit doctor``: a short end-to-end self-check of every method on this machine.

    table = rk.doctor.run()                          # in a notebook: one row per check
    python -m robustkit doctor --only corm,fva       # a shell or CI: exit status 1 when one failed

Seven checks, each timed: the teaching set, BM25 and dense retrieval, the generator reading gold
passages, then each method end to end through its own stages and ``Method``, the sizes shrunk
(two training and two test questions, one epoch) and the structural knobs kept. A check passes,
FAILs (the exception's type and first line are kept; the run goes on) or is skipped, saying why.

Isolation: while the checks run, ``$ROBUSTKIT_RUNS`` and ``$ROBUSTKIT_FIGURES`` point into
``cache_dir()/doctor`` (restored after), so no stage writes into the user's runs or figures. That
folder is emptied at each start, so every model a check trains is trained again: a reused one
would hide a broken training path after an upgrade (manifests record a stage's inputs, not the
torch version or the device). The LLM call cache, keyed by model and prompt, is shared.
"""
from __future__ import annotations

import json
import math
import os
import random
import resource
import shutil
import sys
import textwrap
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from robustkit import __version__, device, nli, resources
from robustkit.artifacts import read_manifest
from robustkit.config import Scale, get_scale, is_offline, runs_dir, with_overrides
from robustkit.data import (check_mini, data_dir, load_nli, mini_corpus, mini_misconceptions, mini_multihop,
                            mini_questions, mini_rewrites)
from robustkit.judges import NLIAdjudicator
from robustkit.locks import exclusive
from robustkit.methods import Query, queries_from
from robustkit.metrics import recall_at_k
from robustkit.models import kit_trained, resolve_model
from robustkit.paths import CHECKOUT, MINI_DIR, cache_dir, home
from robustkit.reader import answer_with_context

if TYPE_CHECKING:
    import pandas as pd

# the checks' sizes: the smallest that still run each path end to end
RETRIEVAL_QUESTIONS, RETRIEVAL_K, MIN_RECALL = 10, 5, 0.5  # a broken index or embedder scores ~k/corpus
GENERATOR_QUESTIONS = 3
METHOD_QUESTIONS = 2  # test questions each method answers
CORM_TRAIN = 2  # the fewest that split into a training and a validation question
CORM_K = 2  # perturbations per training question: labels average over more than one
NLI_PAIRS, NLI_DEV_PAIRS = 320, 100  # 20 steps: tiny's NLI training path, not its 3,000-pair adjudicator
ALIGNRAG_TRAIN = 2  # one LoRA step at tiny's batch of 2 (a CPU step takes seconds)


class Skipped(Exception):
    """The check does not apply on this machine; the message says why."""


class CheckFailed(Exception):
    """The check ran to its end but its result is wrong; the message says what."""


@dataclass
class Outcome:
    """What a check ran, where, in which dtype, and its LM calls (generated now, replayed)."""
    detail: str
    device: str = "-"
    dtype: str = "-"
    calls: tuple[int, int] | None = None


def run(scale: Scale | str | None = None, only=None, dataset: str | None = None) -> pd.DataFrame:
    """Run the checks — all, or ``only`` (names, or one comma-separated string) — at ``scale``,
    isolated from the user's artifacts; one row per check, in the doctor's order. ``dataset="mini"``
    keeps the scale's knobs and models but reads the teaching set (minutes instead of embedding
    a Wikipedia corpus; FVA-RAG still reads TruthfulQA)."""
    import pandas as pd

    names = selected(only)
    scale = get_scale(scale) if dataset is None else with_overrides(scale, dataset=dataset)
    rows = []
    folder = cache_dir() / "doctor"
    # a second doctor (another notebook, another shell) waits instead of wiping this one's folder
    with exclusive(folder, "running the doctor"), isolated_runs(folder):
        for name in names:
            print(f"[doctor] {name} …", flush=True)
            rows.append(run_check(name, CHECKS[name], scale))
            print(f"[doctor] {name}: {rows[-1]['status']} in {rows[-1]['seconds']:.1f} s", flush=True)
    return pd.DataFrame(rows)


def main(scale: Scale | str | None = None, only=None, dataset: str | None = None) -> int:
    """Print the header, run the checks, print the table, each check's detail and the tally;
    returns how many checks failed."""
    names = selected(only)  # a typo is refused before any work
    scale = get_scale(scale) if dataset is None else with_overrides(scale, dataset=dataset)
    start = time.perf_counter()
    print(header(scale), flush=True)
    table = run(scale, names)
    shown = table.drop(columns=["detail"] + ([] if table["GPU peak GB"].notna().any() else ["GPU peak GB"]))
    print("\n" + shown.to_string(index=False, na_rep="-", float_format=lambda x: f"{x:.1f}"))
    print("(RSS: the process's resident memory after the check; peak: its highest so far)")
    print("\ndetails:")
    for name, detail in zip(table["check"], table["detail"]):
        print(textwrap.fill(detail, width=110, initial_indent=f"  {name}: ", subsequent_indent="    "))
    tally = table["status"].value_counts()
    print(f"\ndoctor: {tally.get('pass', 0)} passed, {tally.get('FAIL', 0)} failed, "
          f"{tally.get('skip', 0)} skipped in {time.perf_counter() - start:.0f} s")
    return int(tally.get("FAIL", 0))


def selected(only=None) -> list[str]:
    """The checks to run, in the doctor's order; an unknown name is refused, naming the valid ones."""
    if only is None:
        return list(CHECKS)
    asked = [n.strip() for n in (only.split(",") if isinstance(only, str) else only) if n.strip()]
    unknown = [n for n in asked if n not in CHECKS]
    if unknown or not asked:
        raise ValueError(f"unknown check(s) {unknown or asked!r} for --only; expected some of "
                         f"{', '.join(CHECKS)}, comma-separated")
    return [n for n in CHECKS if n in asked]


def header(scale: Scale) -> str:
    """The kit and its libraries, where it runs from, the device and precisions, the models, and
    where files go."""
    import torch
    import transformers

    from robustkit.session import describe_environment

    card, cpu = device.gpu(), device.cpu_info()
    hardware = f"GPU {card}" if card else f"CPU {cpu['model']} ({cpu['isa']}), {torch.get_num_threads()} threads"
    if hasattr(os, "getloadavg"):  # other busy processes on a small CPU slow every check (threads wait on each other)
        hardware += f", load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    # read as config.runs_dir and figures_dir do: they would create the folders
    runs = os.environ.get("ROBUSTKIT_RUNS") or home() / "runs"
    figures = os.environ.get("ROBUSTKIT_FIGURES") or home() / "figures"
    return "\n".join([
        f"robustkit doctor — kit {__version__} from {f'the checkout {CHECKOUT}' if CHECKOUT else 'a wheel'}, "
        f"python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}",
        f"  {hardware}; cross-encoders train in mixed precision '{device.mixed_precision(device.pick_device())}'",
        f"  your runs: {runs}, your figures: {figures} (the doctor writes neither); cache: {cache_dir()}; "
        f"the doctor's own artifacts: {cache_dir() / 'doctor'} (emptied at each start)",
        describe_environment(scale).to_string(index=False)])


@contextmanager
def isolated_runs(folder: Path):
    """Inside, every stage writes under ``folder`` (emptied first): ``$ROBUSTKIT_RUNS`` and
    ``$ROBUSTKIT_FIGURES`` point there (``config.runs_dir`` and ``figures_dir`` read them on every
    call). The user's values are restored after, whatever happens."""
    shutil.rmtree(folder, ignore_errors=True)
    saved = {var: os.environ.get(var) for var in ("ROBUSTKIT_RUNS", "ROBUSTKIT_FIGURES")}
    os.environ.update(ROBUSTKIT_RUNS=str(folder / "runs"), ROBUSTKIT_FIGURES=str(folder / "figures"))
    try:
        yield folder
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def run_check(name: str, check, scale: Scale) -> dict:
    """One check, timed and its memory measured; an exception makes a FAIL row, never the end."""
    if device.has_gpu():
        import torch

        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    status, outcome = "pass", Outcome("")
    try:
        outcome = check(scale)
    except Skipped as why:
        status, outcome.detail = "skip", f"skipped: {why}"
    except Exception as err:  # noqa: BLE001 — the doctor reports every failure and goes on
        status, outcome.detail = "FAIL", f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"
        if not isinstance(err, CheckFailed):  # a crash: its traceback is what a bug report needs
            traceback.print_exc()
    seconds = time.perf_counter() - start
    return {"check": name, "status": status, "seconds": round(seconds, 1), "device": outcome.device,
            "dtype": outcome.dtype, "LM calls new/replayed": "{}/{}".format(*outcome.calls) if outcome.calls else "-",
            **_memory(), "detail": outcome.detail}


# --- the checks --------------------------------------------------------------------------------

def check_data(scale: Scale) -> Outcome:
    _require_mirror(f"the {scale.dataset} data", scale.dataset != "mini")
    report = check_mini(MINI_DIR)
    if not report.ok:
        raise CheckFailed(f"data/mini has {len(report.violations)} violation(s), the first: {report.violations[0]} "
                          "(python -m robustkit.data check lists them)")
    loaded = (f"{len(mini_questions())} questions, {len(mini_rewrites())} rewrites, {len(mini_corpus())} passages, "
              f"{len(mini_misconceptions())} misconceptions, {len(mini_multihop())} two-hop questions")
    corpus, train, test = (resources.corpus_for(scale), resources.train_questions(scale),
                           resources.test_questions(scale))
    return Outcome(f"data/mini ({MINI_DIR}) valid and loaded: {loaded}; scale {scale.name} reads {len(corpus):,} "
                   f"{scale.dataset} passages, {len(train)} training and {len(test)} test questions")


def check_retrieval(scale: Scale) -> Outcome:
    _require_mirror(f"the {scale.dataset} data", scale.dataset != "mini")
    corpus, dense = resources.corpus_for(scale), resources.retriever_for(scale)
    questions = [q for q in resources.test_questions(scale) if q.gold_ids][:RETRIEVAL_QUESTIONS]
    recall, example = {}, None
    for retriever in (resources.bm25_for(scale), dense):
        ranked = [[h.doc_id for h in row] for row in retriever.search([q.text for q in questions], RETRIEVAL_K)]
        found = [recall_at_k(r, q.gold_ids, RETRIEVAL_K) for r, q in zip(ranked, questions)]
        recall[retriever.name] = sum(found) / len(questions)
        example = example or next(((q, r.index(d) + 1) for q, r in zip(questions, ranked) for d in r
                                   if d in q.gold_ids), None)
    said = ", ".join(f"{name} {value:.2f}" for name, value in recall.items())
    said += f" (chance {RETRIEVAL_K / len(corpus):.3f}), {len(questions)} test questions, {len(corpus):,} passages"
    if min(recall.values()) < MIN_RECALL:
        raise CheckFailed(f"recall@{RETRIEVAL_K} of the gold passage {said}: below {MIN_RECALL}, so the index "
                          "or the embedder is broken")
    weights = next(dense.embedder.model.parameters())
    return Outcome(f"recall@{RETRIEVAL_K} of the gold passage: {said}" +
                   (f"; e.g. {example[0].text!r}: gold passage at rank {example[1]}" if example else ""),
                   str(weights.device), str(weights.dtype).removeprefix("torch."))


def check_generator(scale: Scale) -> Outcome:
    _require_mirror(f"the {scale.dataset} data", scale.dataset != "mini")
    generator = resources.generator_for(scale).with_cache(False)  # decode now: one check never replays
    corpus = resources.corpus_for(scale)
    questions = [q for q in resources.test_questions(scale) if q.gold_ids][:GENERATOR_QUESTIONS]
    answers = answer_with_context(generator, [q.text for q in questions],
                                  [[corpus[q.gold_ids[0]]] for q in questions], desc="doctor: reading")
    _require_well_formed(answers, len(questions))
    shown = "; ".join(f"{q.text!r} → {a!r} (gold {q.answer!r})" for q, a in zip(questions, answers))
    return Outcome(f"{generator.model_id} ({generator.spec.source}) read each question's gold passage, decoded "
                   f"now (call cache bypassed): {shown}", generator.device, generator.dtype,
                   (generator.misses, generator.hits))


def check_corm(scale: Scale) -> Outcome:
    from robustkit import registry
    from robustkit.corm import pipeline, settings, train

    _require_mirror(f"the {scale.dataset} data", scale.dataset != "mini")
    # sizes shrunk — K to CORM_K and the labelled candidates M to a group's N + 1 (labelling is the
    # check's cost: K·M teacher calls a question); N, Algorithm 1's M and C as the scale sets them;
    # no relevance warm start (minutes at tiny)
    base = settings(with_overrides(scale, n_train_questions=CORM_TRAIN, n_test_questions=METHOD_QUESTIONS))
    cfg = base.replace(epochs=1, warm_start=False, k_perturbations=min(base.k_perturbations, CORM_K),
                       m_candidates=min(base.m_candidates, base.n_negatives + 1))
    reader = resources.generator_for(cfg.scale)
    calls = _Calls(reader, resources.generator_for(cfg.scale, "teacher"),
                   resources.generator_for(cfg.scale, "adversary", system_prompt=None))
    critic = train.train_critic(cfg, "corm", progress=False)  # perturb → label → groups → train
    validation = read_manifest(critic)["stats"]["final validation"]
    if not math.isfinite(validation["loss"]):
        raise CheckFailed(f"the critic's validation loss is {validation['loss']}")
    train_groups = train.training_groups(cfg)[0]
    sources = Counter(r["source"] for r in train.perturbations(cfg))
    gamma = train.gamma_at_coverage(cfg, 0.5)  # so that Algorithm 1 both answers and abstains
    queries = queries_from(pipeline.test_queries(cfg))
    answers = registry.build("corm", cfg, gamma=gamma).answer(queries)
    _require_well_formed([a.text for a in answers], len(queries))
    abstained = sum(a.abstained for a in answers)
    return Outcome(f"{CORM_TRAIN} train / {METHOD_QUESTIONS} test questions, K={cfg.k_perturbations}, "
                   f"M={cfg.m_candidates} (labels) / {cfg.m_inference} (Algorithm 1), N={cfg.n_negatives}, "
                   f"C={cfg.context_size}; {sources['llm']} adversary rewrites + {sources['template']} templates, "
                   f"{len(train.labels(cfg))} candidates labelled; critic 1 epoch on {len(train_groups)} groups "
                   f"from {train.critic_start(cfg)[1]} (no warm start), validation NDCG@3 "
                   f"{validation['ndcg@3']:.2f}; Algorithm 1 at "
                   f"γ={gamma:.3f} (50% validation coverage): {len(answers)} clean and biased queries, {abstained} "
                   "abstained", reader.device, reader.dtype, calls.counts())


def check_fva(scale: Scale) -> Outcome:
    from robustkit import registry
    from robustkit.fva import eval_sets, settings
    from robustkit.retrieval import DenseRetriever, load_embedder

    _require_mirror("FVA-RAG's TruthfulQA set and its NLI adjudicator's SNLI pairs")
    # τ = 0 falsifies every draft that has an anti-context, so the revision step runs too; CRAG's
    # trained evaluator is left out (FVA-RAG needs none)
    cfg = settings(scale, n_mini=METHOD_QUESTIONS, n_truthfulqa=METHOD_QUESTIONS, tau=0.0,
                   crag_evaluator="dense-cosine")
    ev = eval_sets(cfg)[0]  # data/mini's held-out misconception questions at tiny, TruthfulQA beyond
    classifier, which = _nli_classifier(scale)
    generator = resources.generator_for(scale)
    calls = _Calls(generator)
    fva = registry.build("fva-rag", cfg, corpus=ev.caches["B"], adjudicator=NLIAdjudicator(classifier),
                         retriever=DenseRetriever(ev.caches["B"], load_embedder(scale)))
    queries = [Query(i.id, i.id, i.text) for i in ev.items]
    answers = fva.answer(queries)
    _require_well_formed([a.text for a in answers], len(queries))
    scores = [s for a in answers for s in a.trace["contradiction"]]
    kill = [len(a.trace["kill_queries"]) for a in answers]
    if not all(0 <= s <= 1 for s in scores) or set(kill) != {cfg.m_kill_queries}:
        raise CheckFailed(f"contradiction scores {scores} outside [0, 1], or not m={cfg.m_kill_queries} kill queries")
    worst = ", ".join(f"{a.trace['max_contradiction']:.2f}" for a in answers)
    return Outcome(f"{len(queries)} {ev.name} questions over cache B, k={cfg.k}, m={cfg.m_kill_queries} kill "
                   f"queries; adjudicator: {which}; max contradiction {worst}; τ=0 (paper 0.5), so "
                   f"{sum(a.trace['revision'] is not None for a in answers)} drafts revised: "
                   f"{[a.text for a in answers]}", generator.device, generator.dtype, calls.counts())


def check_counterrefine(scale: Scale) -> Outcome:
    from robustkit import registry
    from robustkit.counterrefine import eval_sets, settings

    _require_mirror("HotpotQA and NQ-open", scale.dataset != "mini")
    cfg = settings(scale, n_multihop=METHOD_QUESTIONS, n_hotpotqa=METHOD_QUESTIONS, n_factual=1, n_nq=1,
                   n_calibration=1)
    ev = eval_sets(cfg)[0]  # the two-hop set
    generator = resources.generator_for(scale)
    calls = _Calls(generator)
    # REVISE threshold 0 (as bench): a draft goes down the REVISE path — answer line, citation,
    # validator — whenever the refiner gives REVISE any chance; a calibrated one could keep them all
    method = registry.build("counterrefine", cfg, corpus=ev.corpus, retriever=ev.retriever, revise_above=0.0)
    queries = [Query(q.id, q.id, q.text) for q in ev.questions]
    answers = method.answer(queries)
    _require_well_formed([a.text for a in answers], len(queries))
    decisions = Counter(a.trace["decision"] for a in answers)
    if set(decisions) - {"KEEP", "REVISE"}:
        raise CheckFailed(f"refiner decisions {dict(decisions)}: expected KEEP or REVISE")
    outcomes = ", ".join(f"{n} {v}" for v, n in Counter(a.trace["validation"] for a in answers).items())
    return Outcome(f"{len(queries)} {ev.name} questions, k={cfg.k}, ≤{cfg.max_snippets} snippets, {cfg.decoding} "
                   f"decoding; drafts {[a.trace['draft'] for a in answers]}; second pass "
                   f"{sum(len(a.trace['queries']) for a in answers)} queries; REVISE threshold 0, replies parsed "
                   f"as {dict(decisions)} (a malformed one stands as KEEP); validation: {outcomes}",
                   generator.device, generator.dtype, calls.counts())


def check_alignrag(scale: Scale) -> Outcome:
    from robustkit import registry
    from robustkit.alignrag import eval_sets, settings, train

    _require_mirror("HotpotQA and NQ-open", scale.dataset != "mini")
    cfg = settings(scale, n_train=ALIGNRAG_TRAIN, n_factual=METHOD_QUESTIONS, n_nq=METHOD_QUESTIONS,
                   n_multihop=1, n_hotpotqa=1, epochs=1, iterations=1)
    domain = eval_sets(cfg)["in-domain"]
    generator = resources.generator_for(scale)
    calls = _Calls(generator)
    # trained (training corpus, LoRA SFT with TRL, its adapter saved) before the refiner is built: its
    # critic is kept per process, which would skip training on a second doctor run in one notebook
    path = train.train_critic(cfg, "cft")
    calls.add(train.critic_generator(cfg, "cft"))
    losses = [row["loss"] for row in json.loads((path / "losses.json").read_text())]
    if not losses or not all(math.isfinite(x) for x in losses):
        raise CheckFailed(f"the critic's training losses are {losses}")
    refiner = registry.build("alignrag", cfg, corpus=domain.corpus, retriever=domain.retriever)
    queries = [Query(q.id, q.id, q.text) for q in domain.questions]
    answers = refiner.answer(queries)
    _require_well_formed([a.text for a in answers], len(queries))
    critiques = [step["critique"] for a in answers for step in a.trace["trajectory"][1:]]
    if len(critiques) != len(answers) or not all(c and c.strip() for c in critiques):
        raise CheckFailed(f"expected one critique per question, got {critiques!r}")
    stats = read_manifest(path)["stats"]
    layers = f"the top {cfg.lora_layers} layers" if cfg.lora_layers else "every layer"
    return Outcome(f"critic: LoRA r={cfg.lora_r} on {layers}, CFT (TRL SFT), "
                   f"{stats['steps']} step(s) on {stats['examples']} {domain.name} training questions, loss "
                   f"{losses[-1]:.2f}; one critique → refine round on {len(queries)} {domain.name} questions: "
                   f"{[a.text for a in answers]}", generator.device, generator.dtype, calls.counts())


CHECKS = {"data": check_data, "retrieval": check_retrieval, "generator": check_generator, "corm": check_corm,
          "fva": check_fva, "counterrefine": check_counterrefine, "alignrag": check_alignrag}


# --- helpers -----------------------------------------------------------------------------------

def _nli_classifier(scale: Scale):
    """The scale's pretrained NLI model where it has one; else the kit's MiniLM trained now on
    ``NLI_PAIRS`` SNLI pairs with tiny's recipe — the path tiny's adjudicator is trained by
    (``nli.nli_model``: 3,000 pairs, about a minute), at a doctor's size. Returns it and a
    sentence saying which."""
    if not kit_trained("nli", scale):
        spec = resolve_model("nli", scale, verbose=False)
        return nli.nli_model(scale, progress=False), f"{spec.name} ({spec.source})"
    recipe = replace(nli.TRAINING["tiny"], pairs=NLI_PAIRS)
    pairs = random.Random(scale.seed).sample(load_nli("train").pairs, recipe.pairs)
    out = runs_dir(scale) / "nli-doctor"
    nli.train(pairs, init=resolve_model("critic_init", "tiny", verbose=False).path, out=out, recipe=recipe,
              seed=scale.seed, progress=False)
    classifier = nli.NLIClassifier(out, name=f"kit-nli-minilm-doctor-{recipe.pairs}")
    accuracy = nli.evaluate(classifier, load_nli("snli_dev"), limit=NLI_DEV_PAIRS, seed=scale.seed)["accuracy"]
    return classifier, (f"the kit's MiniLM NLI cross-encoder trained now on {recipe.pairs} SNLI pairs (tiny's "
                        f"recipe; tiny's own adjudicator learns from {nli.TRAINING['tiny'].pairs:,}), {accuracy:.0%} "
                        f"on {NLI_DEV_PAIRS} SNLI-dev pairs (chance 33%)")


class _Calls:
    """Language-model calls through some generators since they were added: (generated now,
    replayed from the call cache)."""

    def __init__(self, *generators):
        self.start: dict[int, tuple] = {}
        self.add(*generators)

    def add(self, *generators) -> None:
        for g in generators:
            self.start.setdefault(id(g), (g, g.misses, g.hits))

    def counts(self) -> tuple[int, int]:
        return (sum(g.misses - m for g, m, _ in self.start.values()),
                sum(g.hits - h for g, _, h in self.start.values()))


def _memory() -> dict:
    """The process's resident memory now and its peak so far (GB), and on a GPU the peak
    allocated since the check began (``run_check`` resets it)."""
    status = Path("/proc/self/status")  # Linux; elsewhere only the peak is known
    rss = next((int(line.split()[1]) * 1024 for line in status.read_text().splitlines() if line.startswith("VmRSS")),
               math.nan) if status.exists() else math.nan
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    gpu_peak = math.nan
    if device.has_gpu():
        import torch

        gpu_peak = torch.cuda.max_memory_allocated() / 1e9
    return {"RSS GB": rss / 1e9, "peak RSS GB": peak / 1e9, "GPU peak GB": gpu_peak}


def _require_mirror(what: str, needed: bool = True) -> None:
    """Skip a check that reads a real benchmark (``what``; data/mini ships with the kit) when
    neither the dataset mirror nor the hub is here."""
    if needed and data_dir() is None and is_offline():
        raise Skipped(f"{what} needs the dataset mirror ($ROBUSTKIT_DATA_DIR) or the hub; this machine has neither")


def _require_well_formed(texts, expected: int) -> None:
    """One non-empty, printable answer per question: what every method must return."""
    bad = [t for t in texts if not t.strip() or not t.isprintable()]
    if len(texts) != expected or bad:
        raise CheckFailed(f"{len(texts)} answers for {expected} questions, malformed (empty or with control "
                          f"characters): {bad!r}")
