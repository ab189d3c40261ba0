"""One way to build any method: the registry of method ids, the config each method is built from,
and identities derived from what a method's constructor takes (fast tier: nothing loads a model)."""
from dataclasses import dataclass

import pandas as pd
import pytest

from robustkit import registry
from robustkit.alignrag.config import AlignRAGConfig
from robustkit.config import MethodConfig, Scale, get_scale, with_overrides
from robustkit.corm.config import CormConfig
from robustkit.counterrefine.config import CounterRefineConfig
from robustkit.fva.config import FVAConfig, settings as fva_settings
from robustkit.methods import Answer, derived_identity, evaluate
from mirror import needs_mirror


def test_every_id_is_built_by_its_home_folder_and_every_folder_id_is_registered():
    for method_id, entry in registry.ENTRIES.items():
        assert method_id.removesuffix(registry.COMPOSED) in registry.FOLDERS[entry.folder][1].IDS, method_id
    for folder, (_, module) in registry.FOLDERS.items():
        assert set(module.IDS) <= set(registry.ENTRIES), folder  # one vocabulary: no id outside the registry
    assert registry.ids()[:len(registry.HEAD_TO_HEAD)] == list(registry.HEAD_TO_HEAD)
    assert len(set(registry.ids())) == len(registry.ids())


def test_every_paper_folder_has_the_same_shape():
    """A reader who knows one folder knows all four: each file name means the same job in each."""
    from pathlib import Path

    import robustkit

    shape = {"__init__", "config", "data", "method", "train", "build", "pipeline", "experiments", "readings",
             "figures", "paper", "report"}
    for folder in registry.FOLDERS:
        files = {p.stem for p in (Path(robustkit.__file__).parent / folder).glob("*.py")}
        assert shape <= files, (folder, sorted(shape - files))


def test_an_unknown_id_is_refused_with_the_known_ones_named():
    with pytest.raises(ValueError, match=r"unknown method 'vanilla'.*'fva-rag'"):
        registry.build("vanilla", "tiny")
    with pytest.raises(ValueError, match="unknown method 'alignrag \\(cft\\)'"):
        registry.entry("alignrag (cft)")


def test_a_folders_build_refuses_what_it_does_not_define_before_building_anything():
    from robustkit.data import Corpus, Passage
    from robustkit.fva import build

    with pytest.raises(ValueError, match="unknown FVA method 'corm'"):
        build.build("corm", fva_settings("tiny"))
    with pytest.raises(TypeError, match="FVA's build takes a FVAConfig .* got CormConfig"):
        build.build("fva-rag", CormConfig.settings("tiny"))
    with pytest.raises(ValueError, match="pass corpus= and the retriever= that searches it together"):
        build.build("fva-rag", fva_settings("tiny"), corpus=Corpus([Passage("p", "t", "x")], "one"))


@pytest.fixture
def recorded(monkeypatch):
    """Every folder's ``build`` replaced by one that records what it was given."""
    calls = []
    for folder, (_, module) in registry.FOLDERS.items():
        monkeypatch.setattr(module, "build", lambda name, cfg, folder=folder, **kw: calls.append(
            (folder, name, cfg, kw)) or f"{folder}:{name}")
    return calls


def test_build_hands_the_method_its_papers_config_tuned_or_at_its_defaults(recorded):
    tuned = fva_settings("tiny", tau=0.7)
    assert registry.build("fva-rag", tuned) == "fva:fva-rag"
    assert registry.build("counterrefine", tuned) == "counterrefine:counterrefine"
    (_, _, given, _), (_, _, default, _) = recorded
    assert given is tuned and default == CounterRefineConfig.settings("tiny")


def test_a_shared_id_is_the_paper_whose_config_is_given_else_its_home(recorded):
    registry.build("dense", fva_settings("tiny"))
    registry.build("dense", "tiny")
    registry.build("dense", AlignRAGConfig.settings("tiny"))
    assert [(folder, name) for folder, name, _, _ in recorded] == [("fva", "dense"), ("corm", "dense"),
                                                                    ("alignrag", "dense")]


def test_a_composed_method_reads_the_corm_critics_reranking_with_both_configs(recorded, monkeypatch):
    from robustkit import resources
    from robustkit.corm import build as corm_build

    seen = []
    monkeypatch.setattr(resources, "retriever_for", lambda scale: "dense retriever")
    monkeypatch.setattr(resources, "corpus_for", lambda scale: "the scale's corpus")
    monkeypatch.setattr(corm_build, "robust_retriever", lambda cfg, base: seen.append((cfg, base)) or "reranked")
    corm = CormConfig.settings("tiny", m_inference=7)
    registry.build("fva-rag+corm", [corm, fva_settings("tiny", k=2)])
    (folder, name, cfg, kwargs), = recorded
    assert (folder, name, cfg.k) == ("fva", "fva-rag", 2)
    assert kwargs["retriever"] == "reranked" and kwargs["corpus"] == "the scale's corpus"
    assert seen == [(corm, "dense retriever")]


def test_configs_of_one_comparison_share_a_scale():
    other = with_overrides("tiny", seed=1)
    with pytest.raises(ValueError, match="configs at different scales"):
        registry.configs_for([CormConfig.settings("tiny"), FVAConfig.settings(other)])
    with pytest.raises(ValueError, match="two FVAConfigs"):
        registry.configs_for([FVAConfig.settings("tiny"), FVAConfig.settings("tiny", k=2)])
    with pytest.raises(TypeError, match="config must be a scale"):
        registry.configs_for(42)
    chosen = registry.configs_for(FVAConfig.settings(other, k=2))
    assert chosen["fva"].k == 2 and chosen["corm"] == CormConfig.settings(other)


def test_the_head_to_head_runs_each_method_with_the_config_it_is_given(recorded):
    from robustkit.headtohead import settings, system

    tuned = CormConfig.settings("tiny", m_inference=4, abstain_coverage=0.5)
    cfg = settings("tiny", configs=[tuned])
    assert "CormConfig" in repr(cfg) and cfg.config_for(CormConfig) is tuned
    system(cfg, "corm+abstain")
    system(cfg.replace(n_questions=2), "crag")  # the tuned config survives a change of another knob
    (_, name, given, _), (_, _, fva, _) = recorded
    assert (name, given) == ("corm+abstain", tuned) and fva == FVAConfig.settings("tiny")
    with pytest.raises(ValueError, match="at scale 'tiny' \\(seed 1\\)"):
        settings("tiny", configs=[FVAConfig.settings(with_overrides("tiny", seed=1))])


def test_one_config_base_checks_every_knob_and_shows_scale_and_seed():
    cfg = FVAConfig.settings("tiny", tau=0.3)
    assert repr(cfg).startswith("FVAConfig(scale='tiny', seed=0, k=3, m_kill_queries=3, tau=0.3")
    assert cfg.replace(k=5).tau == 0.3 and cfg.knobs()["k"] == 3
    assert cfg.table().loc["tau", "value"] == 0.3
    for config_class in (CormConfig, FVAConfig, CounterRefineConfig, AlignRAGConfig):
        with pytest.raises(ValueError, match="unknown .* knob\\(s\\) \\['nope'\\]"):
            config_class.settings("tiny", nope=1)
        with pytest.raises(TypeError, match="take a scale or a"):
            config_class.settings(cfg if config_class is not FVAConfig else CormConfig.settings("tiny"))


def test_a_knob_added_to_a_config_is_a_knob_like_the_others():
    @dataclass(frozen=True, repr=False)
    class Tuned(MethodConfig, what="tuned", defaults={"tiny": {"depth": 2}}):
        scale: Scale
        depth: int = 1
        width: int = 3  # the new knob

    cfg = Tuned.settings("tiny", width=5)
    assert cfg.knobs() == {"depth": 2, "width": 5} and "width=5" in repr(cfg)
    assert cfg.replace(depth=4).width == 5
    with pytest.raises(ValueError, match="no tuned defaults for scale 'small'"):
        Tuned.settings("small")


ANSWERED = []  # every Echo.answer call's knob: what ran, and what was read back


class Echo:
    """A method that needs no model: answers its query's text when it may ``repeat``, else "no"."""

    def __init__(self, corpus, *, repeat: bool = False, name: str = "echo"):
        self.corpus, self.repeat, self.name = corpus, repeat, name

    def answer(self, queries):
        ANSWERED.append(self.repeat)
        return [Answer(q.id, q.question_id, self.name, q.text if self.repeat else "no") for q in queries]

    def identity(self):
        return derived_identity(self, prompts="none")


def test_a_knob_the_constructor_takes_is_in_the_identity_and_a_new_value_rebuilds(tmp_path):
    from robustkit.data import Corpus, Passage

    corpus = Corpus([Passage("p", "t", "text")], "one")
    asked = pd.DataFrame({"query_id": ["q"], "question_id": ["q"], "query": ["oslo"], "answers": [["oslo"]]})
    ANSWERED.clear()
    for repeat in (False, True, True):  # the third reuses the second's staged rows
        rows = evaluate({"echo": Echo(corpus, repeat=repeat)}, asked, tmp_path)
        assert rows["correct"].tolist() == [float(repeat)]
    assert ANSWERED == [False, True]
    identity = Echo(corpus, repeat=True).identity()
    assert identity["repeat"] is True and identity["corpus"] == corpus.identity() and identity["prompts"] == "none"


def test_an_argument_the_method_does_not_keep_is_refused_by_name():
    class Forgetful(Echo):
        def __init__(self, corpus, *, depth: int = 3, **kwargs):
            super().__init__(corpus, **kwargs)  # depth is used, never kept: its identity could not say it

    with pytest.raises(TypeError, match="does not keep its constructor argument 'depth'"):
        Forgetful(None).identity()
    with pytest.raises(TypeError, match=r"Echo.corpus \(object\) has no identity"):
        Echo(object()).identity()


@needs_mirror("truthfulqa")  # FVA-RAG's questions
def test_describing_a_method_builds_nothing(tmp_path, monkeypatch):
    """``describe`` and ``run_log`` read: on an empty runs folder they leave it empty (and the
    fast tier would refuse the model loads that embedding a corpus needs)."""
    import robustkit as rk
    from robustkit.artifacts import NotStaged
    from robustkit.crossencoder import relevance

    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path))
    rk.clear()
    scale = get_scale("tiny")
    for folder in (rk.fva, rk.counterrefine, rk.alignrag):
        cfg = folder.settings(scale)
        assert len(folder.describe(cfg)) >= 2
        folder.run_log(cfg)
    assert rk.fva.run_log(rk.fva.settings(scale))["crag evaluator"] == "not built yet"
    with pytest.raises(NotStaged, match="relevance_model"):
        relevance.identity(scale)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
