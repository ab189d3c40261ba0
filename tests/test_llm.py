"""The generator runs the real SmolLM2-135M; each test uses a private call cache."""
import pytest

from robustkit import llm
from robustkit.callcache import CallCache
from robustkit.llm import Generator

PASSAGE_PROMPT = ("Passage: Canberra is the capital city of Australia.\n"
                  "Question: what is the capital of australia?\nAnswer:")


@pytest.fixture
def fresh(tmp_path, generator):
    """A generator sharing the loaded model but with an empty cache."""
    return generator.with_cache(CallCache(tmp_path / "calls.sqlite"))


def test_batched_equals_unbatched_and_follows_passage(fresh, generator):
    prompts = [PASSAGE_PROMPT, "What is 2 + 2?", "Name a colour."]
    batched = fresh.generate(prompts, max_new_tokens=12, batch_size=3)
    assert "canberra" in batched[0].lower()
    uncached = generator.with_cache(False)
    assert [uncached.generate([p], max_new_tokens=12)[0] for p in prompts] == batched
    assert fresh.generate(prompts[::-1], max_new_tokens=12) == batched[::-1]
    assert fresh.hits == 3 and fresh.misses == 3


def test_cache_survives_restart(tmp_path, fresh, monkeypatch):
    out = fresh.generate([PASSAGE_PROMPT], max_new_tokens=8)
    reopened = Generator("generator", "tiny", cache=CallCache(tmp_path / "calls.sqlite"))
    monkeypatch.setattr(llm, "load_causal_lm", lambda *a, **k: pytest.fail("a full replay loaded the weights"))
    assert reopened.generate([PASSAGE_PROMPT], max_new_tokens=8) == out


def test_stop_strings_cut_output(fresh):
    out = fresh.generate(["Count from one to ten in words, separated by commas."],
                         max_new_tokens=24, stop=[","])
    assert "," not in out[0]


def test_crash_mid_generation_keeps_cache_consistent(tmp_path, fresh, monkeypatch):
    prompts = [f"Say the number {i}." for i in range(4)]
    calls = {"n": 0}
    real = fresh._decode

    def crash_on_second_batch(*args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(fresh, "_decode", crash_on_second_batch)
    with pytest.raises(KeyboardInterrupt):
        fresh.generate(prompts, max_new_tokens=4, batch_size=2)
    assert len(fresh.cache) == 2  # the finished batch, nothing half-written
    monkeypatch.setattr(fresh, "_decode", real)
    fresh.generate(prompts, max_new_tokens=4, batch_size=2)
    assert len(fresh.cache) == 4 and fresh.misses == 4 + 2


@pytest.mark.parametrize("bad,message", [("one prompt", "not a single str"),
                                         (["ok", 5], "prompt 1 is a int")])
def test_bad_prompts_rejected(fresh, bad, message):
    with pytest.raises(TypeError, match=message):
        fresh.generate(bad)


def test_prefix_plan_groups_sharers_and_packs_batches():
    from robustkit.prefix import plan

    passage = list(range(100, 160))
    ids = [passage + [1, 2], [7] * 70, passage + [3], passage + [4, 5, 6], [8, 9]]
    batches = plan(ids, batch_size=3, min_shared=48)
    groups = [g for batch in batches for g in batch]
    shared = next(g for g in groups if 0 in g[0])
    assert sorted(shared[0]) == [0, 2, 3] and shared[1] == 60  # one passage, three questions
    assert [len(ids[m[0]]) for m, _ in groups] == sorted((len(ids[m[0]]) for m, _ in groups), reverse=True)
    assert all(sum(len(m) for m, _ in b) <= 3 for b in batches)
    assert sorted(i for m, _ in groups for i in m) == list(range(5))
    alone = {m[0]: length for m, length in groups if len(m) == 1}
    assert alone == {1: 69, 4: 1}  # a prompt of its own: all but its last token is prefix


def test_shared_prefix_equals_separate_prompts(fresh):
    """The K questions one passage is asked share its prefix; answers and option probabilities
    match those of the same prompts computed one by one."""
    passage = ("Canberra is the capital city of Australia. It was chosen in 1908 as a compromise "
               "between Sydney and Melbourne, and Parliament House opened there in 1927.")
    prompts = [f"{passage}\n\nQuestion: {q}" for q in
               ("what is the capital of australia?", "when did parliament house open?",
                "which two cities competed to be the capital?")]
    together = fresh.generate(prompts, max_new_tokens=12, batch_size=3)
    alone = fresh.with_cache(False)
    assert together == [alone.generate([p], max_new_tokens=12)[0] for p in prompts]
    probs = fresh.option_probabilities(prompts, batch_size=3)
    for p, joint in zip(prompts, probs):
        assert joint == pytest.approx(alone.option_probabilities([p])[0], abs=1e-4)


def test_reserved_cache_decodes_what_the_growing_cache_decodes(fresh):
    """Decoding into a reserved KV cache (written in place) gives token for token what
    transformers' growing cache (concatenated each step) gives, over a full 24-token budget."""
    prompts = [PASSAGE_PROMPT, "Passage: The Nile flows north into the Mediterranean Sea.\n"
               "Question: which sea does the nile flow into?\nAnswer:"]
    reserved = fresh.with_cache(False)
    growing = fresh.with_cache(False)
    growing.reserve_cache = False
    assert (reserved.generate(prompts, max_new_tokens=24, stop=())
            == growing.generate(prompts, max_new_tokens=24, stop=()))


def test_reserved_layer_returns_the_concatenation_and_refuses_to_overflow():
    import torch
    from transformers import DynamicCache

    from robustkit import prefix

    first, second = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 2, 4)
    cache = DynamicCache()
    cache.update(first, first + 1, 0)
    prefix.reserve(cache, 2)
    keys, values = cache.update(second, second + 1, 0)
    assert torch.equal(keys, torch.cat([first, second], dim=-2))
    assert torch.equal(values, torch.cat([first, second], dim=-2) + 1)
    assert cache.get_seq_length() == 7
    with pytest.raises(RuntimeError, match="reserved KV cache holds 7 positions; 8"):
        cache.update(second[:, :, :1], second[:, :, :1], 0)
