"""Every method of the kit by one id, built from its paper's config.

    rk.registry.ids()                                            # every id, the head-to-head's first
    method = rk.build("fva-rag", scale)                          # its paper's defaults at a scale
    method = rk.build("fva-rag", rk.fva.settings(scale, tau=0.7))   # a tuned config
    method = rk.build("dense", scale, corpus=mine, retriever=dense_over_mine)
    answers = method.answer(queries)

An id names one method everywhere: tables and figures, ``serve --method``, ``audit``, the command
line. Each paper's folder builds its own ids (``corm.build``, ``fva.build``, ``counterrefine.build``,
``alignrag.build``); this module only finds the folder and its config. Plain dense RAG is defined
by three papers with their own budgets — CoRM-RAG's reference over M candidates and C passages,
FVA-RAG's vanilla RAG over k, AlignRAG's vanilla reasoning RAG — so the config says whose:
``build("dense", rk.fva.settings(scale))`` is FVA-RAG's, and with a scale it is the home paper's
(CoRM-RAG's, the head-to-head's reference). A composed id (``fva-rag+corm``) is the method reading
the CoRM critic's most robust evidence first; it takes both papers' configs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from robustkit import resources
from robustkit.alignrag import build as alignrag_build
from robustkit.alignrag.config import AlignRAGConfig
from robustkit.config import MethodConfig, Scale, get_scale
from robustkit.corm import build as corm_build
from robustkit.corm.config import CormConfig
from robustkit.counterrefine import build as counterrefine_build
from robustkit.counterrefine.config import CounterRefineConfig
from robustkit.fva import build as fva_build
from robustkit.fva.config import FVAConfig

# paper folder -> (its config class, the module whose ``build`` builds its ids)
FOLDERS = {"corm": (CormConfig, corm_build), "fva": (FVAConfig, fva_build),
           "counterrefine": (CounterRefineConfig, counterrefine_build),
           "alignrag": (AlignRAGConfig, alignrag_build)}
COMPOSED = "+corm"  # a method reading the CoRM critic's reranking of the dense top M


@dataclass(frozen=True)
class Entry:
    """One method: its id, the paper it comes from (the tables' ``paper`` column), how tables and
    figures name it, and the folder that builds it at home."""

    id: str
    paper: str
    label: str
    folder: str


def _entries(folder: str, paper: str, labels: dict[str, str]) -> list[Entry]:
    return [Entry(i, paper, label, folder) for i, label in labels.items()]


_CORM_ABLATIONS = [i for i in corm_build.IDS if i.startswith(("rank-only", "tau-", "k-", "no-"))]
ENTRIES: dict[str, Entry] = {e.id: e for e in [
    *_entries("corm", "baseline", {"bm25": "BM25", "dense": "dense (MiniLM)", "random": "random order",
                                   "relevance-ce": "relevance CE"}),
    *_entries("corm", "CoRM-RAG (baseline)", {"pa-ce": "PA-CE", "llm-rerank": "LLM-rerank"}),
    *_entries("corm", "CoRM-RAG", {"corm": "CoRM critic (forced)", "corm+abstain": "CoRM critic + abstention"}),
    *_entries("corm", "CoRM-RAG (kit)", {"warm-start": "warm start (kit)",
                                         "corm-soft": "CoRM critic, soft labels (kit)",
                                         "corm-prior": "CoRM critic + dense prior (kit)"}),
    *_entries("corm", "CoRM-RAG (ablation)", {i: f"CoRM critic, {i}" for i in _CORM_ABLATIONS}),
    *_entries("fva", "FVA-RAG (baseline)", {"self-rag": "Self-RAG", "crag": "CRAG"}),
    *_entries("fva", "FVA-RAG", {"fva-rag": "FVA-RAG"}),
    *_entries("counterrefine", "CounterRefine", {"counterrefine": "CounterRefine"}),
    *_entries("counterrefine", "CounterRefine (ablation)", {
        "counterrefine-question-only": "CounterRefine, question-only second pass",
        "counterrefine-no-validator": "CounterRefine, no validator",
        "counterrefine-no-canonicalisation": "CounterRefine, no canonicalisation",
        "counterrefine-reconsider": "CounterRefine, reconsider (no new evidence)"}),
    *_entries("alignrag", "AlignRAG (baseline)", {"cot": "chain of thought (no retrieval)",
                                                  "self-refine": "Self-Refine"}),
    *_entries("alignrag", "AlignRAG (ablation)", {"frozen-critic": "AlignRAG, frozen critic",
                                                  "critic-no-ccs": "AlignRAG, critic w/o CCS"}),
    *_entries("alignrag", "AlignRAG", {"alignrag": "AlignRAG (CDA, CFT critic)",
                                       "alignrag-cpo": "AlignRAG (CDA, CPO critic)"}),
    *_entries("fva", "composed (kit)", {"fva-rag+corm": "FVA-RAG over the CoRM critic"}),
    *_entries("counterrefine", "composed (kit)", {"counterrefine+corm": "CounterRefine over the CoRM critic"}),
]}
# every method the head-to-head knows, in the order its tables list them; the last two composed
HEAD_TO_HEAD = ("bm25", "dense", "random", "relevance-ce", "pa-ce", "llm-rerank", "corm", "corm+abstain",
                "self-rag", "crag", "fva-rag", "counterrefine", "self-refine", "alignrag-cpo",
                "fva-rag+corm", "counterrefine+corm")


def ids(paper: str | None = None) -> list[str]:
    """Every method id (the head-to-head's first, in its order), or those of one ``paper``
    column value ("FVA-RAG", "CoRM-RAG (baseline)" …)."""
    ordered = [*HEAD_TO_HEAD, *(i for i in ENTRIES if i not in HEAD_TO_HEAD)]
    return [i for i in ordered if paper is None or ENTRIES[i].paper == paper]


def entry(method_id: str) -> Entry:
    """The registry's entry for ``method_id``; an unknown id is refused with every id named."""
    if method_id not in ENTRIES:
        raise ValueError(f"unknown method {method_id!r}; the kit's methods are {ids()}")
    return ENTRIES[method_id]


def label(method_id: str) -> str:
    """How tables and figures name ``method_id`` (an id the registry does not know: itself)."""
    return ENTRIES[method_id].label if method_id in ENTRIES else method_id


def paper(method_id: str) -> str:
    """The paper ``method_id`` comes from, as the tables' ``paper`` column says it."""
    return entry(method_id).paper


def configs_for(config=None) -> dict[str, MethodConfig]:
    """Every paper's config at one scale, by folder: ``config`` (a ``Scale``, a scale name or None
    for ``get_scale()``; one paper's config; or several) with each paper it does not give at its
    defaults there. Configs of different scales (or seeds, or models) are refused: the methods
    of one comparison read the same data with the same models."""
    given = _as_configs(config)
    if len({c.scale for c in given}) > 1:
        shown = ", ".join(f"{type(c).__name__} at {c.scale.name!r} (seed {c.scale.seed})" for c in given)
        raise ValueError(f"configs at different scales: {shown}; build each from the same scale "
                         "(rk.<method>.settings(scale, ...))")
    scale = given[0].scale if given else get_scale(config)
    chosen = {}
    for folder, (config_class, _) in FOLDERS.items():
        mine = [c for c in given if isinstance(c, config_class)]
        if len(mine) > 1:
            raise ValueError(f"two {config_class.__name__}s given; pass one config per paper")
        chosen[folder] = mine[0] if mine else config_class.settings(scale)
    return chosen


def build(method_id: str, config=None, *, corpus=None, retriever=None, generator=None, **options):
    """The method ``method_id`` with its paper's knobs — from ``config`` (that paper's config, tuned
    or not; several papers' configs; or a scale for their defaults) — over the scale's corpus and
    dense retriever, or over ``corpus`` searched by ``retriever`` (needed beyond CoRM-RAG's
    methods, which build dense retrieval over a corpus themselves), read by ``generator``
    (default: the scale's reader). Trained parts are reused when staged and trained when not.
    ``options`` go to the folder's ``build`` (``gamma`` for CoRM-RAG's Algorithm 1, ``calibration``
    for CRAG, ``revise_above`` for CounterRefine …).

    ``dense`` built with FVA-RAG's or AlignRAG's config is that paper's (``build("dense",
    rk.fva.settings(scale))``: FVA-RAG's vanilla RAG over k passages), else CoRM-RAG's."""
    folder = _folder(method_id, config)
    configs = configs_for(config)
    if retriever is not None and corpus is None:
        raise ValueError("a retriever needs the corpus it searches: pass corpus= too")
    if corpus is not None and retriever is None and folder != "corm":
        raise ValueError(f"{method_id!r} over another corpus needs its retriever: pass retriever= too")
    over = dict(corpus=corpus, retriever=retriever, generator=generator)
    if method_id.endswith(COMPOSED):  # robust evidence first: the critic reranks the dense top M
        scale = configs["corm"].scale
        base = retriever if retriever is not None else resources.retriever_for(scale)
        over.update(corpus=corpus if corpus is not None else resources.corpus_for(scale),
                    retriever=corm_build.robust_retriever(configs["corm"], base))
    return FOLDERS[folder][1].build(method_id.removesuffix(COMPOSED), configs[folder], **over, **options)


def _folder(method_id: str, config) -> str:
    """The folder that builds ``method_id``: the one whose single config is given, where it defines
    that id too, else the id's home."""
    home = entry(method_id).folder
    for folder, (config_class, module) in FOLDERS.items():
        if isinstance(config, config_class) and method_id in module.IDS:
            return folder
    return home


def _as_configs(config) -> list[MethodConfig]:
    if config is None or isinstance(config, (Scale, str)):
        return []
    if isinstance(config, MethodConfig):
        config = [config]
    if isinstance(config, dict):
        config = config.values()
    if isinstance(config, Iterable):
        configs = list(config)
        papers = tuple(config_class for config_class, _ in FOLDERS.values())
        if all(isinstance(c, papers) for c in configs):
            return configs
    raise TypeError(f"config must be a scale, a paper's config (rk.corm/fva/counterrefine/alignrag.settings("
                    f"scale)) or several of them (a head-to-head's are its .configs), got {config!r:.80}")
