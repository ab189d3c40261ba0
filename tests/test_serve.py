"""`python -m robustkit serve`: requests parsed strictly, and, on loopback, a kit method answering
any OpenAI client (the official `openai` package) exactly as it answers in-process."""
import sys

import httpx
import pytest

from robustkit.loopback import server
from robustkit.serve import MAX_BATCH, BadRequest, _question_of, _questions_of


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
