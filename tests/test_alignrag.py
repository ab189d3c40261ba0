"""AlignRAG: knobs checked before any work, the CDA loop's calls and trajectory, the closed-book
baseline, guards before training, a real (tiny) LoRA fit saved as its adapter and critiquing as the
merged model did, and the pipeline's grouping of datasets by retriever."""
import json
from pathlib import Path

import pytest

from robustkit.alignrag import method, pipeline, settings, train
from robustkit.alignrag.critique import CRITIQUE_HEAD
from robustkit.alignrag.method import SELF, AlignRAG, ChainOfThought, align
from robustkit.data import mini_questions
from robustkit.methods import Query
from robustkit.qa_sets import QASet

BUDGETS = dict(rationale_tokens=6, answer_tokens=4, critique_tokens=6)


class CountingGenerator:
    """A real generator, counting its generate calls and the prompts each carried."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    @property
    def model_id(self):
        return self.inner.model_id

    def generate(self, prompts, **kw):
        self.calls.append(len(prompts))
        return self.inner.generate(prompts, **kw)


@pytest.mark.parametrize("knob, value", [("iterations", -1), ("lora_r", 0), ("k", 0), ("learning_rate", 0.0),
                                         ("learning_rate", float("nan")), ("epochs", 1.5), ("lora_layers", -2)])
def test_bad_knobs_are_refused_by_name(knob, value):
    with pytest.raises(ValueError, match=knob):
        settings("tiny", **{knob: value})


def test_unknown_knob_and_bad_method_arguments():
    with pytest.raises(ValueError, match="unknown AlignRAG knob"):
        settings("tiny", rounds=3)
    with pytest.raises(ValueError, match="iterations"):
        AlignRAG(None, None, None, iterations=-1)
    with pytest.raises(ValueError, match="unknown critic variant"):
        train.train_critic(settings("tiny"), "sft")


def test_cda_shares_retrieval_and_y0_and_batches_critics_per_model(generator, mini, counting):
    corpus, dense = mini
    retriever, gen = counting(dense), CountingGenerator(generator)
    common = dict(k=2, max_words=15, **BUDGETS)
    refiners = [AlignRAG(retriever, gen, corpus, critic=SELF, iterations=2, name="self-refine", **common),
                AlignRAG(retriever, gen, corpus, critic=generator, iterations=1, name="frozen-critic", **common)]
    questions = mini_questions("test")[:2]
    out = align(refiners, [Query(q.id, q.id, q.text) for q in questions])
    assert retriever.calls == [(2, 2)]  # one retrieval call for every question and refiner
    # y0 (reasoning + answer); round 1: both critics share one model -> one critique call, one
    # reasoning and one answer call for both refiners; round 2: self-refine alone
    assert gen.calls == [2, 2, 4, 4, 4, 2, 2, 2]
    for name, rounds in (("self-refine", 2), ("frozen-critic", 1)):
        for a in out[name]:
            steps = a.trace["trajectory"]
            assert [s["iteration"] for s in steps] == list(range(rounds + 1))
            assert steps[0]["critique"] is None and all(s["critique"].startswith(CRITIQUE_HEAD) for s in steps[1:])
            assert a.text == steps[-1]["answer"] and a.model_calls == 2 + 3 * rounds and a.retrieval_calls == 1
    first = [a.trace["trajectory"][0] for a in out["self-refine"]]
    assert first == [a.trace["trajectory"][0] for a in out["frozen-critic"]]  # the same y0
    # the critics read different prompts, so they may critique the same y0 differently
    assert out["self-refine"][0].trace["critic"] == "the generator itself"


def test_refiners_that_differ_in_shared_settings_are_refused(generator, mini):
    corpus, dense = mini
    a = AlignRAG(dense, generator, corpus, k=2, name="a", **BUDGETS)
    b = AlignRAG(dense, generator, corpus, k=3, name="b", **BUDGETS)
    with pytest.raises(ValueError, match="differ"):
        align([a, b], [Query("x", "x", "who wrote hamlet")])
    with pytest.raises(ValueError, match="distinct names"):
        align([a, a], [Query("x", "x", "who wrote hamlet")])


def test_chain_of_thought_reads_no_documents(generator):
    questions = mini_questions("test")[:2]
    answers = ChainOfThought(generator, rationale_tokens=6, answer_tokens=4).answer(
        [Query(q.id, q.id, q.text) for q in questions])
    assert all(a.retrieval_calls == 0 and a.passage_ids == [] and a.model_calls == 2 for a in answers)
    assert "documents" not in method.answer_prompt(None, "who wrote hamlet", "Shakespeare wrote it.")
    assert method.answer_prompt("[1] Hamlet.", "who wrote hamlet?", "r").startswith("[1] Hamlet.\n\nReasoning: r")


def test_malformed_training_target_stops_before_training(monkeypatch):
    cfg = settings("tiny")
    rows = [{"ccs_critique": f"{CRITIQUE_HEAD} fine. The better rationale should be: x", "self_critique": "no heads"}]
    monkeypatch.setattr(train, "training_corpus", lambda cfg: rows)
    monkeypatch.setattr(train, "_fit", lambda *a, **k: pytest.fail("training started"))
    with pytest.raises(ValueError, match="head"):
        train.train_critic(cfg, "w/o ccs")


def test_an_empty_training_set_is_refused(mini):
    corpus, dense = mini
    empty = QASet("mini-factual", [], [], corpus, dense, "fp", False)
    with pytest.raises(ValueError, match="no training questions"):
        train._synthesise(settings("tiny"), empty, None)


@pytest.fixture(scope="module")
def tiny_critic(generator, mini, tmp_path_factory):
    """A real LoRA fit of SmolLM2 (one step, LoRA on the top layer only), saved as every critic is:
    (the adapter's folder, the fit's statistics, the base weights' folder)."""
    corpus, _ = mini
    doc = corpus.passages[0]
    rows = [{"question": f"what is {doc.title}", "doc_ids": [doc.id], "weak_reasoning": "It is unknown.",
             "weak_answer": "unknown", "ccs_critique": f"{CRITIQUE_HEAD} The answer is wrong. The better rationale "
             f"should be: Document [1] says it is {doc.title}.", "self_critique": "x"}] * 2
    # a large step, so that the adapter changes what the critic writes, not only its logits
    cfg = settings("tiny", epochs=1, batch_size=2, lora_layers=1, max_length=160, learning_rate=0.05)
    weights = train.weights_dir(generator.spec, generator.dtype)
    folder = tmp_path_factory.mktemp("critic")
    stats = train._fit(cfg, "sft", "ccs_critique", rows, weights, folder / "critic", folder / "scratch")
    return folder / "critic", stats, weights


def test_a_critic_on_disk_is_its_lora_adapter_on_the_top_layers(tiny_critic, generator):
    from safetensors.torch import load_file

    out, stats, weights = tiny_critic
    assert stats["steps"] == 1 and json.loads((out / "losses.json").read_text())[0]["loss"] > 0
    assert sorted(p.name for p in out.iterdir()) == ["adapter_config.json", "adapter_model.safetensors", "losses.json"]
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == generator.model_id  # a model id, not this machine's path
    adapter = load_file(out / "adapter_model.safetensors")
    assert adapter and all(".layers.29." in k and "lora_" in k for k in adapter)  # the top layer's LoRA only
    assert any(v.abs().max() > 0 for k, v in adapter.items() if "lora_B" in k)  # B starts at 0: it trained
    full = sum(p.stat().st_size for p in Path(weights).glob("*.safetensors"))
    assert (out / "adapter_model.safetensors").stat().st_size < full / 100


def test_the_adapter_on_the_base_critiques_as_the_merged_copy_did(tiny_critic, generator, mini, tmp_path):
    """Loaded on the shared base, the adapter writes the critique that the merged full copy (how
    critics were stored before) writes, token for token; its logits are peft's unmerged adapter's,
    not the base model's; and the generator's own copy of the base weights is left as it was."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from robustkit.alignrag.critique import Rationale
    from robustkit.llm import Generator
    from robustkit.models import ModelSpec

    out, _, weights = tiny_critic
    corpus, _ = mini
    before = {k: v.clone() for k, v in generator.model.state_dict().items() if ".layers.29." in k}
    critic = train.adapter_critic(out, "test/alignrag-critic-adapter", "tiny").with_cache(False)
    base = AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32)
    PeftModel.from_pretrained(base, out).merge_and_unload().save_pretrained(tmp_path / "merged")
    generator.tokenizer.save_pretrained(tmp_path / "merged")
    as_before = Generator("critic", "tiny", cache=False,
                          spec=ModelSpec("critic", "test/alignrag-critic-merged", str(tmp_path / "merged"), "folder"))
    messages = [method.critic_prompt(f"what is {d.title}", [d], Rationale("It is unknown.", "unknown"), 20)
                for d in corpus.passages[:3]]
    critiques = method.critique(critic, messages, tokens=16)
    assert critiques == method.critique(as_before, messages, tokens=16)
    assert critiques != method.critique(generator.with_cache(False), messages, tokens=16)

    batch = critic.tokenizer([critic.render(m) for m in messages], return_tensors="pt", padding=True,
                             add_special_tokens=False)
    unmerged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32), out)
    with torch.inference_mode():
        logits = critic.model(**batch).logits
        assert torch.allclose(logits, unmerged(**batch).logits, atol=1e-4)
        assert (logits - generator.model(**batch).logits).abs().max() > 1e-3  # the adapter moved them
    assert all(torch.equal(generator.model.state_dict()[k], v) for k, v in before.items())


def test_lora_targets_name_the_top_layers(generator):
    model = generator.model
    every = train._lora_targets(model, 0)
    assert every == {"target_modules": "all-linear"}
    top = train._lora_targets(model, 3)
    assert top["layers_to_transform"] == [27, 28, 29] and "q_proj" in top["target_modules"]
    with pytest.raises(ValueError, match="decoder layers"):
        train._lora_targets(model, 31)


def test_sets_sharing_a_retriever_run_together(mini):
    corpus, dense = mini
    a, b = (QASet(n, [], [], corpus, dense, "fp", m) for n, m in (("one", False), ("two", True)))
    c = QASet("three", [], [], corpus, object(), "fp", False)
    groups = pipeline._sharing_a_retriever({"in-domain": a, "out-of-domain": b, "other": c})
    assert [[d for d, _ in g] for g in groups] == [["in-domain", "out-of-domain"], ["other"]]


@pytest.mark.slow  # the evaluated sets build their dense retriever (MiniLM)
def test_the_run_log_only_reads_nothing_is_trained(tmp_path, monkeypatch):
    from robustkit import alignrag

    monkeypatch.setenv("ROBUSTKIT_RUNS", str(tmp_path))
    log = alignrag.run_log("tiny")
    assert set(log["critics"].values()) == {"not built yet"} and log["training"] == "not built yet"
    assert not any(p for p in tmp_path.rglob("*") if p.is_file())  # no corpus, no critic written
