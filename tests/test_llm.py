"""The generator runs the real SmolLM2-135M; each test uses a private call cache."""
import pytest

from robustkit.llm import CallCache, Generator

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


def test_cache_survives_restart(tmp_path, fresh):
    out = fresh.generate([PASSAGE_PROMPT], max_new_tokens=8)
    reopened = Generator("generator", "tiny", cache=CallCache(tmp_path / "calls.sqlite"))
    assert reopened.generate([PASSAGE_PROMPT], max_new_tokens=8) == out
    assert reopened._model is None  # a full replay never loads the weights


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
