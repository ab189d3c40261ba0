"""`python -m robustkit serve`: requests parsed strictly, and, on loopback, a kit method answering
any OpenAI client (the official `openai` package) exactly as it answers in-process."""
import re
import socket
import sys

import httpx
import pytest

from robustkit.data import Corpus, Passage
from robustkit.llm import PromptTooLong
from robustkit.loopback import server
from robustkit.methods import Answer
from robustkit.serve import MAX_BATCH, MAX_BODY_BYTES, BadRequest, _question_of, _questions_of, app_for, check_port


def test_a_chat_request_yields_its_last_user_message():
    body = {"model": "dense", "messages": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "  Who wrote Hamlet? "}]}
    assert _question_of(body) == "Who wrote Hamlet?"
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Who wrote"},
                                                       {"type": "text", "text": "Hamlet?"}]}]}
    assert _question_of(parts) == "Who wrote Hamlet?"


@pytest.mark.parametrize("body, field", [
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "assistant", "content": "hi"}]}, r"messages\[-1\].role"),
    ({"messages": [{"role": "user", "content": " "}]}, r"messages\[-1\].content"),
    ({"messages": [{"role": "user", "content": "q"}], "stream": True}, "stream"),
    ({"messages": [{"role": "user", "content": "q"}], "n": 2}, "n"),
])
def test_a_malformed_chat_request_names_its_field(body, field):
    with pytest.raises(BadRequest, match=field):
        _question_of(body)


def test_a_rag_request_checks_every_row():
    assert _questions_of({"questions": [{"id": "a", "question": "Q1?"}, {"question": "Q2?"}]})[0] == ("a", "Q1?")
    assert _questions_of({"questions": [{"question": "Q2?"}]})[0][0].startswith("q-")  # the text's hash
    for body, field in [({"questions": [{"id": "a", "question": 3}]}, r"questions\[0\].question"),
                        ({"questions": [{"id": "a", "question": "x"}, {"id": "a", "question": "y"}]}, "share an id"),
                        ({"questions": [{"question": "x"}] * (MAX_BATCH + 1)}, "split the batch"),
                        ({}, "questions")]:
        with pytest.raises(BadRequest, match=field):
            _questions_of(body)


class LastWord:
    """Answers with the question's last word: the HTTP layer is under test here, not a method. A
    question of more than 50 words is a prompt its model cannot read."""
    name = "last-word"

    def answer(self, queries):
        if any(len(q.text.split()) > 50 for q in queries):
            raise PromptTooLong("prompt 0 is 9,999 tokens, more than the 8,192 positions m reads")
        return [Answer(q.id, q.question_id, self.name, q.text.split()[-1]) for q in queries]


def _client(**knobs):
    from fastapi.testclient import TestClient

    return TestClient(app_for(LastWord(), Corpus([Passage("p", "t", "x")]), **knobs))


def _chat(question):
    return {"model": "last-word", "messages": [{"role": "user", "content": question}]}


@pytest.mark.parametrize("send, status, words", [
    (lambda c: c.post("/v1/rag", content=b"{" + b" " * (MAX_BODY_BYTES + 1) + b"}"), 413, "more than 1,048,576"),
    (lambda c: c.post("/v1/chat/completions", json=_chat("why " * 2000)), 400,
     r"messages\[-1\].content is 7,999 characters, more than 4,000"),
    (lambda c: c.post("/v1/rag", content=b'{"questions": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), 400,
     "nests its JSON too deep"),
    (lambda c: c.post("/v1/rag", json={"questions": [{"id": "a", "question": "why " * 60}]}), 400,
     "cannot read this request: prompt 0 is 9,999 tokens"),
])
def test_oversized_or_pathological_input_is_refused_with_the_reason(send, status, words):
    reply = send(_client())
    assert reply.status_code == status and re.search(words, reply.json()["error"]["message"])
    assert _client().post("/v1/chat/completions", json=_chat("who wrote hamlet")).json()[
        "choices"][0]["message"]["content"] == "hamlet"  # and the next request is answered


def test_concurrent_requests_share_batches_and_each_gets_its_own_answers():
    from concurrent.futures import ThreadPoolExecutor

    client = _client(window=0.1)
    questions = [f"who wrote play{i}" for i in range(12)] + ["why " * 60]  # the last: too long for the model

    def ask(question):  # every request calls its one question "q1"
        return client.post("/v1/rag", json={"questions": [{"id": "q1", "question": question}]})

    with ThreadPoolExecutor(len(questions)) as pool:
        replies = list(pool.map(ask, questions))
    assert [r.json()["answers"][0]["answer"] for r in replies[:-1]] == [f"play{i}" for i in range(12)]
    assert all(r.json()["answers"][0]["id"] == "q1" for r in replies[:-1])
    assert replies[-1].status_code == 400 and "cannot read this request" in replies[-1].json()["error"]["message"]
    batcher = client.app.state.batcher
    assert batcher.requests == 12 and batcher.batches < 12  # shared, and the bad request failed alone


def test_with_an_api_key_only_requests_that_carry_it_are_answered():
    client = _client(api_key="s3cret")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
        reply = client.post("/v1/chat/completions", json=_chat("who wrote hamlet"), headers=headers)
        assert reply.status_code == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    assert client.get("/v1/models").status_code == 401 and client.get("/health").status_code == 200
    reply = client.post("/v1/chat/completions", json=_chat("who wrote hamlet"), headers={"Authorization": "Bearer s3cret"})
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "hamlet"


def test_a_taken_port_is_refused_before_any_work():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        with pytest.raises(ValueError, match=rf"cannot serve on 127.0.0.1:{holder.getsockname()[1]} .*another --port"):
            check_port("127.0.0.1", holder.getsockname()[1])


@pytest.fixture(scope="module")
def dense_server():
    with server(lambda port: [sys.executable, "-m", "robustkit", "serve", "--method", "dense",
                              "--scale", "tiny", "--port", str(port)]) as url:
        yield url


@pytest.mark.slow
def test_the_served_method_answers_any_openai_client_as_it_answers_in_process(dense_server):
    from openai import BadRequestError, NotFoundError, OpenAI

    from robustkit.data.mini import mini_questions
    from robustkit import registry
    from robustkit.methods import Query

    questions = mini_questions("test")[:4]
    local = registry.build("dense", "tiny").answer([Query(q.id, q.id, q.text) for q in questions])
    client = OpenAI(base_url=dense_server, api_key="-", max_retries=0)
    assert [m.id for m in client.models.list()] == ["dense"]
    for question, expected in zip(questions, local):
        reply = client.chat.completions.create(model="dense", messages=[{"role": "user", "content": question.text}])
        extra = reply.model_extra["robustkit"]
        assert reply.choices[0].message.content == expected.text
        assert [p["id"] for p in extra["passages"]] == expected.passage_ids
        assert extra["trace"]["ranked_ids"] == expected.trace["ranked_ids"]
    with pytest.raises(NotFoundError, match="serves the method 'dense'"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "q"}])
    with pytest.raises(BadRequestError, match="stream"):
        client.chat.completions.create(model="dense", messages=[{"role": "user", "content": "q"}], stream=True)
    batch = httpx.post(f"{dense_server}/rag", timeout=300,
                       json={"questions": [{"id": q.id, "question": q.text} for q in questions]}).json()
    assert [a["answer"] for a in batch["answers"]] == [a.text for a in local]
    assert [a["id"] for a in batch["answers"]] == [q.id for q in questions]
    bad = httpx.post(f"{dense_server}/rag", json={"questions": [{"id": "x"}]})
    assert bad.status_code == 400 and "questions[0].question" in bad.json()["error"]["message"]
