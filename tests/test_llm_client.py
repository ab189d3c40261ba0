"""The OpenAI-compatible backend: choices parsed, responses read, and, on loopback against a real
`transformers serve` process the test starts and stops, answers equal to the in-process ones."""
import math
import time

import pytest

from robustkit.config import with_overrides
from robustkit.llm import Generator
from robustkit.loopback import free_port, transformers_serve
from robustkit.llm_client import ServedGenerator, make_generator
from robustkit.llm_replies import option_probabilities_from, reply_logprob
from robustkit.models import (ModelError, ServerError, ServerFeatureError, check_server, resolve_model, served_model,
                              served_spec)
from faults import scripted


# --- choices and responses (fast tier) ------------------------------------------------------

def test_a_served_choice_names_model_and_url(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    spec = served_spec("teacher", "openai:Qwen/Qwen3-14B@http://gpu:8000/v1/")
    assert (spec.source, spec.path, served_model(spec)) == ("openai", "http://gpu:8000/v1", "Qwen/Qwen3-14B")
    # a URL with credentials keeps its '@'; the model name ends at the first '@http'
    spec = served_spec("teacher", "openai:org/m@v2@https://user:pw@host/v1")
    assert (served_model(spec), spec.path) == ("org/m@v2", "https://user:pw@host/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    assert served_spec("generator", "openai:m").path == "http://localhost:8000/v1"


def test_a_served_choice_without_url_or_for_an_encoder_is_refused(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="OPENAI_BASE_URL"):
        served_spec("generator", "openai:m")
    with pytest.raises(ModelError, match="chat LM roles"):
        served_spec("embedder", "openai:m@http://localhost:1/v1")
    with pytest.raises(ModelError, match="names no model"):
        served_spec("generator", "openai:@http://localhost:1/v1")


def test_generator_of_a_served_role_is_a_served_generator_and_contacts_nothing():
    scale = with_overrides("tiny", models={"generator": f"openai:m@http://127.0.0.1:{free_port()}/v1"})
    gen = make_generator("generator", scale)
    assert isinstance(gen, ServedGenerator) and gen.model_id.startswith("openai:m@")
    assert resolve_model("generator", scale).source == "openai"
    assert type(make_generator("teacher", scale)) is Generator  # other roles stay in-process
    with pytest.raises(TypeError, match="dtype"):
        make_generator("generator", scale, dtype="float32")
    with pytest.raises(ValueError, match="is served.*make_generator"):  # Generator runs in-process only
        Generator("generator", scale)


def test_an_unreachable_server_is_named_with_the_fix():
    spec = served_spec("generator", f"openai:m@http://127.0.0.1:{free_port()}/v1")
    started = time.perf_counter()
    with pytest.raises(ServerError, match=r"does not answer GET /models.*start it"):
        check_server(spec, timeout=2)
    assert time.perf_counter() - started < 10


def test_option_probabilities_read_each_options_own_token():
    top = [("Yes", -0.1), ("yes", -0.5), ("no", -1.2), ("No", -2.0), ("y", -4.0)]
    probs, missing = option_probabilities_from(top, ("yes", "no"))
    assert probs == pytest.approx([math.exp(-0.5) / (math.exp(-0.5) + math.exp(-1.2)),
                                   math.exp(-1.2) / (math.exp(-0.5) + math.exp(-1.2))])
    assert missing == 0
    probs, missing = option_probabilities_from(top, ("yes", "maybe"))
    assert (probs, missing) == ([1.0, 0.0], 1)
    with pytest.raises(ValueError, match="share a first token"):
        option_probabilities_from([("a", -1.0)], ("ab", "ac"))
    with pytest.raises(ServerError, match="none of the options"):
        option_probabilities_from(top, ("maybe", "perhaps"))


def test_reply_logprob_sums_the_echoed_reply_tokens_only():
    # "Q: x\nA:" then the reply " Paris" (offset 7..13) then one generated token at 13
    offsets, logprobs = [0, 2, 4, 5, 7, 9, 13], [None, -1.0, -1.0, -1.0, -0.5, -0.25, -9.0]
    assert reply_logprob(offsets, logprobs, 7, 13) == pytest.approx(-0.75)
    with pytest.raises(ValueError, match="merges"):
        reply_logprob(offsets, logprobs, 8, 13)


# --- a scripted server's faults (fast tier) -----------------------------------------------------

def _chat(content="yes", top=(("yes", -0.2), ("no", -1.8))):
    """An OpenAI chat completion with the first reply token's top log-probabilities."""
    logprobs = {"content": [{"token": top[0][0], "logprob": top[0][1], "bytes": None,
                             "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top]}]}
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": logprobs,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}


def _served(url, tmp_path):
    from robustkit.callcache import CallCache

    return make_generator("generator", with_overrides("tiny", models={"generator": f"openai:m@{url}"}),
                          cache=CallCache(tmp_path / "calls.sqlite"))


GOOD = [math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.8)), math.exp(-1.8) / (math.exp(-0.2) + math.exp(-1.8))]


@pytest.mark.parametrize("bad", [float("nan"), 50.0, "high", None])
def test_an_invalid_log_probability_is_named_and_never_cached(tmp_path, bad):
    sent = {"reply": _chat(top=(("yes", bad), ("no", -1.8)))}
    with scripted(lambda path, body, n: (200, sent["reply"])) as (url, received):
        served = _served(url, tmp_path)
        with pytest.raises(ServerError, match=r"generator server at .* sent an invalid choices\[0\].logprobs"
                                              r".*during option_probabilities: .*'logprob': "):
            served.option_probabilities(["Is Oslo in Norway?"])
        sent["reply"] = _chat()  # the server fixed: its answer is what gets stored
        assert served.option_probabilities(["Is Oslo in Norway?"]) == [pytest.approx(GOOD)]
        again = served.with_cache(served.cache)
        assert again.option_probabilities(["Is Oslo in Norway?"]) == [pytest.approx(GOOD)]
    assert (len(received), again.hits) == (2, 1)


@pytest.mark.parametrize("reply, named", [
    ({**_chat(), "choices": []}, r"sent an invalid choices during generate: \[\] \(expected a non-empty list\)"),
    (_chat(content=42), r"sent an invalid choices\[0\].message.content during generate: 42"),
])
def test_a_reply_without_its_answer_is_named(tmp_path, reply, named):
    with scripted(lambda path, body, n: (200, reply)) as (url, _):
        with pytest.raises(ServerError, match=named):
            _served(url, tmp_path).generate(["Who wrote Hamlet?"])


def test_a_truncated_reply_is_retried_then_named(tmp_path):
    with scripted(lambda path, body, n: (200, b'{"id": "c", "choices": [{"mess') if n == 1 else (200, _chat())) as (url, _):
        assert _served(url, tmp_path).generate(["Who wrote Hamlet?"]) == ["yes"]
    with scripted(lambda path, body, n: (200, b'{"id": "c", "choices": [{"mess')) as (url, received):
        with pytest.raises(ServerError, match=r"answered generate with a body that is not the API's JSON"):
            _served(url, tmp_path / "b").generate(["Who wrote Hamlet?"])
    assert len(received) == 3


def test_a_server_error_page_is_named_with_its_status_after_the_client_s_retries(tmp_path):
    with scripted(lambda path, body, n: (500, b"<html><body>Internal Server Error</body></html>")) as (url, received):
        with pytest.raises(ServerError, match=r"answered generate with HTTP 500 \(<html><body>Internal Server Error"):
            _served(url, tmp_path).generate(["Who wrote Hamlet?"])
    assert len(received) == 4  # the first try and the client's three retries


# --- a real server on loopback (slow tier) --------------------------------------------------

@pytest.fixture(scope="module")
def server():
    """`transformers serve` over the kit's converted SmolLM2 folder, on loopback, for this module."""
    from robustkit.weights import weights_dir

    folder = weights_dir(resolve_model("generator", "tiny", verbose=False), "float32")
    with transformers_serve(folder, continuous_batching=True) as choice:
        yield choice


@pytest.fixture
def served(server, tmp_path):
    from robustkit.callcache import CallCache

    return make_generator("generator", with_overrides("tiny", models={"generator": server}),
                          cache=CallCache(tmp_path / "calls.sqlite"), concurrency=4)


@pytest.mark.slow
def test_served_answers_equal_the_in_process_ones_and_replay_from_the_cache(served, mini_reader_prompts):
    local = Generator("generator", "tiny", cache=False).generate(mini_reader_prompts, max_new_tokens=16)
    assert served.generate(mini_reader_prompts, max_new_tokens=16) == local
    assert (served.hits, served.misses) == (0, len(local))
    again = served.with_cache(served.cache)
    assert again.generate(mini_reader_prompts, max_new_tokens=16) == local
    assert (again.hits, again.misses) == (len(local), 0)


@pytest.mark.slow
def test_what_the_server_lacks_stops_the_call_by_name(served):
    with pytest.raises(ServerFeatureError, match=r"top_logprobs.*option_probabilities"):
        served.option_probabilities(["Is Paris in France?"])
    with pytest.raises(ServerFeatureError, match=r"continue_final_message.*generate"):
        served.generate([[{"role": "user", "content": "Who wrote Hamlet?"},
                          {"role": "assistant", "content": "Answer:"}]])
    with pytest.raises(ServerFeatureError, match=r"echo with logprobs.*continuation_logprobs"):
        served.continuation_logprobs(["What is the capital of France?"], ["Paris"])


@pytest.fixture(scope="module")
def mini_reader_prompts():
    """data/mini's first six test questions, each with its gold passage, as the reader asks them."""
    from robustkit.data.mini import mini_corpus, mini_questions
    from robustkit.reader import reader_prompt

    corpus = mini_corpus()
    questions = mini_questions("test")[:6]
    return [reader_prompt(q.text, [corpus[q.gold_ids[0]]]) for q in questions]


@pytest.mark.slow
def test_the_audit_of_a_served_chat_model_asks_it_closed_book(server, tmp_path):
    from robustkit.audit import ClosedBook, analyse, audit_set, run

    questions, rewrites = audit_set("mini", "tiny", n_questions=3)
    served = make_generator("generator", with_overrides("tiny", models={"generator": server}), cache=False)
    results = run(ClosedBook(served, name="smollm"), questions, rewrites, name="smollm")
    local = Generator("generator", "tiny", cache=False).generate(list(results["query"]), max_new_tokens=32)
    assert results["answer"].tolist() == local
    assert analyse(results)["sycophancy"].empty  # a closed-book model reads no passages


@pytest.mark.slow
def test_a_kit_method_reads_with_a_served_reader_as_with_its_own(server, tmp_path):
    """`robustkit audit --format openai --corpus`: the kit's dense RAG with the served model as its
    reader answers as the in-process dense RAG does (the same retrieval, prompts and greedy reader)."""
    from argparse import Namespace

    from robustkit import registry
    from robustkit.audit.cli import system_under_test
    from robustkit.config import get_scale
    from robustkit.data.mini import mini_questions
    from robustkit.methods import Query

    model, url = server.removeprefix("openai:").split("@http")
    args = Namespace(format="openai", endpoint=f"http{url}", model=model, corpus="mini", name="smollm", timeout=300.0)
    queries = [Query(q.id, q.id, q.text) for q in mini_questions("test")[:4]]
    served = system_under_test(args, get_scale("tiny")).answer(queries)
    local = registry.build("dense", "tiny").answer(queries)
    assert [a.passage_ids for a in served] == [a.passage_ids for a in local]
    assert [a.text for a in served] == [a.text for a in local]


@pytest.mark.slow
def test_a_server_that_ignores_what_it_is_asked_is_refused_and_the_rest_agrees(mini_reader_prompts):
    """llama-cpp-python's server accepts continue_final_message and echo + logprobs but ignores the
    first and shifts the second (abetlen/llama-cpp-python#1983): the kit's probes refuse both by
    name, and what the server does support agrees with the in-process model within the distance
    between llama.cpp's Q4_1 kernels and the kit's fp32 copy of the same GGUF. Needs an interpreter
    with ``llama-cpp-python[server]`` in $ROBUSTKIT_TEST_LLAMA_CPP_PYTHON (it compiles llama.cpp,
    minutes that CI's set-up does not spend)."""
    import os

    from robustkit.loopback import llama_cpp_serve
    from pathlib import Path

    from robustkit.weights import weights_dir

    python = os.environ.get("ROBUSTKIT_TEST_LLAMA_CPP_PYTHON")
    if not python:
        pytest.skip("set ROBUSTKIT_TEST_LLAMA_CPP_PYTHON to a Python with llama-cpp-python[server]")
    spec = resolve_model("generator", "tiny", verbose=False)
    with llama_cpp_serve(python, str(Path(spec.path) / spec.gguf_file), weights_dir(spec, "float32")) as choice:
        served = make_generator("generator", with_overrides("tiny", models={"generator": choice}), cache=False)
        with pytest.raises(ServerFeatureError, match=r"ignored continue_final_message.*generate"):
            served.generate([[{"role": "user", "content": "Who wrote Hamlet?"},
                              {"role": "assistant", "content": "The author of Hamlet is"}]])
        with pytest.raises(ServerFeatureError, match=r"echoes prompt log-probabilities that disagree.*continuation"):
            served.continuation_logprobs(["What is the capital of France?"], ["Paris"])
        local = Generator("generator", "tiny", cache=False)
        questions = [f"{p}\nAnswer yes or no." for p in mini_reader_prompts]
        pairs = zip(served.option_probabilities(questions), local.option_probabilities(questions))
        # an option outside the server's top 20 tokens gets 0 (counted); the others compare
        far = [abs(a[0] - b[0]) for a, b in pairs if 0 < a[0] < 1]
        assert len(far) >= 3 and max(far) < 0.1, far
        answers = served.generate(mini_reader_prompts, max_new_tokens=16)
        same = sum(a == b for a, b in zip(answers, local.generate(mini_reader_prompts, max_new_tokens=16)))
        print(f"llama.cpp (Q4_1) and in-process fp32: {same} of {len(answers)} greedy answers equal; "
              f"P(yes) differs by at most {max(far):.3f} on {len(far)} prompts, {served.options_missing} "
              "options outside the top 20")
        assert all(answers)
