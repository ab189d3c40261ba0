"""The generator's boundaries, tried as a hostile user would (issue 35, second ring): a bad argument
is refused, naming it, before a tokenizer or model loads or a cache row is written; a prompt longer
than the model's context is refused before any of its call is decoded; a damaged call cache is set
aside beside itself and replaced by an empty one, with a printed line."""
import gc
import hashlib
import json
import os
import re
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from robustkit import llm
from robustkit.callcache import CallCache
from robustkit.llm import Generator


def refuse(*args, **kwargs):
    raise AssertionError("the model or its tokenizer was loaded")


@pytest.fixture
def untouchable(monkeypatch):
    """Loading the weights or the tokenizer fails the test: a refusal must come before either."""
    monkeypatch.setattr(llm, "load_causal_lm", refuse)
    monkeypatch.setattr(llm, "load_tokenizer", refuse)


@pytest.fixture
def gen(tmp_path, untouchable):
    """The tiny generator, with an empty private call cache."""
    return Generator("generator", "tiny", cache=CallCache(tmp_path / "calls.sqlite"))


ASK = "Who wrote Hamlet?"
SYSTEM_ONLY = [{"role": "system", "content": "Answer briefly."}]

# (case, call, error type, words the message must contain: the culprit and the fix)
BAD_CALLS = [
    ("batch_size=-1", lambda g: g.generate([ASK], batch_size=-1), ValueError, ["batch_size must be >= 1, got -1"]),
    ("batch_size=0", lambda g: g.generate([ASK], batch_size=0), ValueError, ["batch_size must be >= 1, got 0"]),
    ("batch_size=2.5", lambda g: g.generate([ASK], batch_size=2.5), ValueError,
     ["batch_size must be an integer, got 2.5"]),
    ("an empty stop string", lambda g: g.generate([ASK], stop=[""]), ValueError,
     ["stop[0] must be a non-empty str, got ''", "stop=() decodes up to max_new_tokens"]),
    ("stop as one string", lambda g: g.generate([ASK], stop="\n\n"), TypeError,
     ["stop must be a list of strings, got a str", "wrap it in a list"]),
    ("a number among the stop strings", lambda g: g.generate([ASK], stop=["\n", 5]), TypeError,
     ["stop[1] must be a non-empty str, got 5"]),
    ("max_new_tokens=0", lambda g: g.generate([ASK], max_new_tokens=0), ValueError,
     ["max_new_tokens must be >= 1, got 0"]),
    ("max_new_tokens=2.5", lambda g: g.generate([ASK], max_new_tokens=2.5), ValueError,
     ["max_new_tokens must be an integer, got 2.5"]),
    ("an empty prompt", lambda g: g.generate([""]), ValueError, ["prompt 0 is empty", "drop it or give it a question"]),
    ("a blank prompt after a good one", lambda g: g.generate([ASK, " \n"]), ValueError, ["prompt 1 is empty"]),
    ("an empty message list", lambda g: g.generate([[]]), ValueError,
     ["prompt 0 has no user or assistant message with any content", "drop it or give it a question"]),
    ("a user message without content", lambda g: g.generate([[{"role": "user", "content": "  "}]]), ValueError,
     ["prompt 0 has no user or assistant message"]),
    ("only a system message", lambda g: g.generate([ASK, SYSTEM_ONLY]), ValueError,
     ["prompt 1 has no user or assistant message"]),
    ("a message without a role", lambda g: g.generate([[{"content": ASK}]]), TypeError,
     ["prompt 0 is a list", "{'role': ..., 'content': str}"]),
    ("scoring an empty prompt", lambda g: g.option_probabilities([ASK, ""]), ValueError, ["prompt 1 is empty"]),
    ("scoring with batch_size=-1", lambda g: g.option_probabilities([ASK], batch_size=-1), ValueError,
     ["batch_size must be >= 1, got -1"]),
    ("options as one string", lambda g: g.option_probabilities([ASK], options="yes"), TypeError,
     ["options must be a list of strings, got a str ('yes')", "wrap it in a list"]),
    ("an empty option", lambda g: g.option_probabilities([ASK], options=["yes", ""]), ValueError,
     ["options[1] must be a non-empty str, got ''", 'options=("yes", "no")']),
    ("a continuation for an empty message list", lambda g: g.continuation_logprobs([[]], ["Shakespeare"]),
     ValueError, ["prompt 0 has no user or assistant message"]),
    ("continuations with batch_size=2.5", lambda g: g.continuation_logprobs([ASK], ["Shakespeare"], batch_size=2.5),
     ValueError, ["batch_size must be an integer, got 2.5"]),
]


@pytest.mark.parametrize("case,call,error,words", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_a_bad_call_is_refused_before_any_work(gen, case, call, error, words):
    with pytest.raises(error) as raised:
        call(gen)
    for part in words:
        assert part in str(raised.value), f"{case}: message {str(raised.value)!r} does not name {part!r}"
    assert len(gen.cache) == 0 and gen.misses == 0  # nothing decoded, nothing written


@pytest.mark.parametrize("knobs,words", [
    ({"batch_size": -1}, ["batch_size must be >= 1, got -1"]),
    ({"batch_size": 2.5}, ["batch_size must be an integer, got 2.5"]),
    ({"batch_size": True}, ["batch_size must be an integer, got True"]),
    ({"dtype": "bogus"}, ["dtype='bogus' is not one of ('float32', 'bfloat16', 'float16')",
                          "leave it out for the device's default"]),
], ids=["batch_size=-1", "batch_size=2.5", "batch_size=True", "dtype=bogus"])
def test_a_bad_generator_is_refused_when_made(tmp_path, untouchable, knobs, words):
    cache = CallCache(tmp_path / "calls.sqlite")
    with pytest.raises(ValueError) as raised:
        Generator("generator", "tiny", cache=cache, **knobs)
    for part in words:
        assert part in str(raised.value)
    assert len(cache) == 0


# --- the model's context ------------------------------------------------------------------------

LONG = ("Canberra is the capital city of Australia, chosen in 1908 as a compromise. " * 1400)[:100_000]


@pytest.mark.slow
def test_a_prompt_beyond_the_context_is_refused_before_decoding(tmp_path, monkeypatch):
    monkeypatch.setattr(llm, "load_causal_lm", refuse)  # proves the weights were never needed
    gen = Generator("generator", "tiny", cache=CallCache(tmp_path / "c.sqlite"))
    tokens = len(gen.tokenizer(gen.render(LONG), add_special_tokens=False)["input_ids"])
    started = time.perf_counter()
    with pytest.raises(ValueError) as raised:  # the short prompt first: the whole call is refused
        gen.generate([ASK, LONG, LONG + " Who?"], max_new_tokens=32)
    seconds = time.perf_counter() - started
    message = str(raised.value)
    for words in (f"prompt 1 is {tokens:,} tokens, plus up to 32 new ones,", "the 8,192 positions",
                  "2 prompts of this call are too long", "fewer passages or shorter ones",
                  "max_passage_words: 80 at 'tiny'"):
        assert words in message, f"{message!r} does not say {words!r}"
    assert tokens > 8192 and seconds < 20 and len(gen.cache) == 0
    # the scoring calls add no tokens, and name the prompt by the caller's index
    with pytest.raises(ValueError, match=f"prompt 0 is {tokens:,} tokens more than the 8,192 positions"):
        gen.option_probabilities([LONG])
    with pytest.raises(ValueError, match=r"prompt 1 is [\d,]+ tokens more than the 8,192"):
        gen.continuation_logprobs([ASK, LONG], ["Shakespeare", "Canberra"])
    assert len(gen.cache) == 0


@pytest.mark.slow
def test_a_prompt_that_just_fits_goes_on_to_the_model(tmp_path, monkeypatch):
    monkeypatch.setattr(llm, "load_causal_lm", refuse)  # reaching it means the prompt was let through
    gen = Generator("generator", "tiny", cache=CallCache(tmp_path / "c.sqlite"))
    tokens = len(gen.tokenizer(gen.render(ASK), add_special_tokens=False)["input_ids"])
    for limit, outcome in ((tokens + 8, AssertionError), (tokens + 7, ValueError)):
        monkeypatch.setattr(llm, "auto_config", lambda path: SimpleNamespace(max_position_embeddings=limit))
        with pytest.raises(outcome):
            gen.generate([ASK], max_new_tokens=8)


@pytest.mark.slow
def test_valid_calls_keep_their_cache_keys(tmp_path, monkeypatch):
    """A call cached before these checks existed is replayed, without loading the weights."""
    monkeypatch.setattr(llm, "load_causal_lm", refuse)
    cache = CallCache(tmp_path / "c.sqlite")
    gen = Generator("generator", "tiny", cache=cache, dtype="float32")
    params = json.dumps({"max_new_tokens": 8, "stop": ["\n"], "decoding": "greedy", "dtype": "float32"},
                        sort_keys=True)
    rendered = gen.render(ASK)
    key = hashlib.sha256(f"{gen.model_id}\x00{params}\x00{rendered}".encode()).hexdigest()
    cache.put_many([(key, gen.model_id, rendered, params, "cached earlier")])
    assert gen.generate([ASK], max_new_tokens=8) == ["cached earlier"]


# --- a damaged call cache ---------------------------------------------------------------------------

def filled_cache(path: Path, n: int = 2000) -> list[str]:
    """A real call cache of ``n`` rows, closed (its WAL folded back into the file); its keys."""
    cache = CallCache(path)
    rows = [(f"key-{i}", "model", f"prompt {i}: " + "passage text " * 40, "{}", f"answer {i}") for i in range(n)]
    cache.put_many(rows)
    del cache
    gc.collect()
    assert not Path(f"{path}-wal").exists()
    return [key for key, *_ in rows]


def assert_set_aside(path: Path, cache: CallCache, damaged: bytes, printed: str, keys: list[str]) -> None:
    asides = list(path.parent.glob(f"{path.name}.corrupt-*"))
    assert cache.recovered == 1 and len(asides) == 1 and asides[0].read_bytes() == damaged
    assert re.fullmatch(rf"{re.escape(path.name)}\.corrupt-\d{{8}}T\d{{6}}\.\d{{6}}Z", asides[0].name)
    assert printed.count("\n") == 1, printed  # one line
    for words in (str(path), "is damaged", f"moved it to {asides[0]}", "only cached calls are lost",
                  "artifacts are stored apart"):
        assert words in printed
    assert cache.get_many(keys) == {}
    cache.put_many([("new", "model", "prompt", "{}", "output")])
    assert cache.get_many(["new", keys[0]]) == {"new": "output"} and len(cache) == 1


@pytest.mark.parametrize("damage", ["truncated to half", "garbage header"])
def test_a_damaged_cache_is_set_aside_when_opened(tmp_path, capsys, damage):
    path = tmp_path / "llm_calls.sqlite"
    keys = filled_cache(path)
    if damage == "truncated to half":
        os.truncate(path, path.stat().st_size // 2)
    else:
        with open(path, "r+b") as f:
            f.write(b"these bytes are no SQLite header " * 4)
    damaged = path.read_bytes()
    capsys.readouterr()
    cache = CallCache(path)
    assert_set_aside(path, cache, damaged, capsys.readouterr().out, keys)
    del cache
    gc.collect()
    reopened = CallCache(path)  # the fresh cache is a healthy one that keeps what it was given
    assert reopened.get_many(["new"]) == {"new": "output"} and reopened.recovered == 0


def test_damage_deep_in_the_file_is_found_when_first_read(tmp_path, capsys):
    path = tmp_path / "llm_calls.sqlite"
    keys = filled_cache(path)
    with open(path, "r+b") as f:  # opening reads the header and the schema, not this page
        f.seek(path.stat().st_size // 2)
        f.write(bytes(range(256)) * 32)
    damaged = path.read_bytes()
    capsys.readouterr()
    cache = CallCache(path)
    assert cache.recovered == 0
    assert cache.get_many(keys) == {}  # this lookup reads the damaged page: answered by a fresh cache
    assert_set_aside(path, cache, damaged, capsys.readouterr().out, keys)


def test_a_misuse_is_not_taken_for_damage(tmp_path):
    path = tmp_path / "llm_calls.sqlite"
    filled_cache(path, 10)
    cache = CallCache(path)
    with pytest.raises(sqlite3.ProgrammingError):
        cache.put_many([("a row", "too short")])
    assert cache.recovered == 0 and len(cache) == 10 and not list(tmp_path.glob("*.corrupt-*"))
