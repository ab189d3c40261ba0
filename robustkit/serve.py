"""``python -m robustkit serve --method <name>``: a kit method as an HTTP endpoint.

Two routes, so that a kit method can be audited like any outside system and plugged into other tools:

    POST /v1/chat/completions   the OpenAI protocol: the method's name as the model, the question as
                                the last user message; the answer is the reply, and the passages the
                                method read and its trace come in an extra field, ``robustkit``
    POST /v1/rag                plain JSON, batched: {"questions": [{"id": "q1", "question": "..."}]}
                                -> {"method": ..., "answers": [{"id", "question", "answer", "abstained",
                                "confidence", "passages": [{"id", "title", "text"}], "trace", ...}]}
    GET  /v1/models             the one model: the method

Any OpenAI client calls it (``OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="-")``, then
``client.chat.completions.create(model="dense", messages=[...])``; the extra field is
``response.model_extra["robustkit"]``). ``--corpus FILE`` serves the method over a researcher's own
passages (``robustkit.data.own``), so an audit of their RAG and of the kit's methods reads the same.
A method holds one copy of its models, so requests are answered in batches, as serving engines do:
the questions of every request that arrives within a short window (``BATCH_WINDOW_S``) of the
first, up to ``MAX_BATCH``, go to the method in one ``Method.answer`` call, and each request gets
its own answers back; a batch on /v1/rag is one such request.

Limits, as serving engines set them: a body of at most 1 MiB (413), questions of at most 4,000
characters and 256 to a request (400), and a prompt the method's model cannot read answered 400
with the reason. With ``--api-key`` (or ``$ROBUSTKIT_API_KEY``) every /v1 route wants
``Authorization: Bearer <key>`` (401 without it), as vLLM's ``--api-key`` does; /health stays open.
"""

import hashlib
import hmac
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import replace

from robustkit.llm import PromptTooLong
from robustkit.methods import Answer, Query

MAX_BATCH = 256  # questions in one /v1/rag request, and in one call of the method
BATCH_WINDOW_S = 0.02  # how long the first waiting request waits for others to share its batch
MAX_BODY_BYTES = 1 << 20  # a request body: 256 questions of 4,000 characters fit
MAX_QUESTION_CHARS = 4_000  # far above any benchmark question, far below a model's context


class BadRequest(ValueError):
    """A request the server refuses, with the field at fault (HTTP 400, or ``status``)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class Batcher:
    """Gathers the questions of concurrent requests into batches for one method: ``submit`` blocks
    until its own answers are back. The first waiting request waits ``window`` seconds for others
    to join; a batch holds at most ``MAX_BATCH`` questions (``share=False``: one request, as a
    server that answers one request at a time). A batch the method refuses (a prompt too long)
    is split until the bad request fails alone."""

    def __init__(self, method, window: float = BATCH_WINDOW_S, *, share: bool = True):
        self.method, self.window, self.share = method, window, share
        self.waiting: list[tuple[list[Query], dict]] = []
        self.ready = threading.Condition()
        self.batches = self.requests = 0  # how many method calls answered how many requests
        threading.Thread(target=self._loop, name="robustkit-batcher", daemon=True).start()

    def submit(self, queries: list[Query]) -> list[Answer]:
        slot = {"done": threading.Event()}
        with self.ready:
            self.waiting.append((queries, slot))
            self.ready.notify()
        slot["done"].wait()
        if "error" in slot:
            raise slot["error"]
        return slot["answers"]

    def _loop(self) -> None:
        while True:
            with self.ready:
                self.ready.wait_for(lambda: self.waiting)
            time.sleep(self.window)  # let concurrent requests join the first
            with self.ready:
                batch, size = [], 0
                while self.waiting and (not batch or self.share and size + len(self.waiting[0][0]) <= MAX_BATCH):
                    batch.append(self.waiting.pop(0))
                    size += len(batch[-1][0])
            self._answer(batch)

    def _answer(self, batch) -> None:
        """Answer the batch's requests with one method call. When it fails, each half is tried
        again, so a bad request ends up alone and fails by itself while the others are answered;
        an error never kills this thread."""
        try:
            # each request's ids are its own: tagged, so that two requests' "q1" stay apart
            queries = [Query(f"{n}\0{q.id}", f"{n}\0{q.question_id}", q.text)
                       for n, (qs, _) in enumerate(batch) for q in qs]
            answers = iter(self.method.answer(queries))
            replies = [[replace(next(answers), query_id=q.id, question_id=q.question_id) for q in qs]
                       for qs, _ in batch]
        except Exception as err:  # noqa: BLE001 — handed to the waiting request, which raises it
            if len(batch) > 1:
                self._answer(batch[:len(batch) // 2])
                self._answer(batch[len(batch) // 2:])
                return
            batch[0][1]["error"] = err
            batch[0][1]["done"].set()
            return
        self.batches, self.requests = self.batches + 1, self.requests + len(batch)
        for (_, slot), own in zip(batch, replies):
            slot["answers"] = own
            slot["done"].set()


def app_for(method, corpus, *, api_key: str | None = None, window: float = BATCH_WINDOW_S, share: bool = True):
    """A FastAPI app that answers with ``method`` (a kit ``Method``) and looks passages up in
    ``corpus``; concurrent requests share batches (``Batcher``); with ``api_key``, only requests
    that carry it are answered."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI(title=f"robustkit: {method.name}", docs_url=None, redoc_url=None)
    app.state.batcher = batcher = Batcher(method, window, share=share)

    def answer(questions: list[tuple[str, str]]) -> list[dict]:
        queries = [Query(qid, qid, text) for qid, text in questions]
        try:
            answers = batcher.submit(queries)
        except PromptTooLong as err:  # the input's fault, said to the client, not a 500 in the log
            raise BadRequest(f"the method's model cannot read this request: {err}") from None
        return [_answer_json(a, q.text, corpus) for a, q in zip(answers, queries)]

    def error(status: int, message: str, kind: str = "invalid_request_error", code: str | None = None):
        return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}}, status)

    @app.middleware("http")
    async def require_key(request: Request, call_next):
        given = request.headers.get("authorization", "")
        if api_key and request.url.path.startswith("/v1") and not hmac.compare_digest(given, f"Bearer {api_key}"):
            return error(401, "this server wants its API key: send the header 'Authorization: Bearer <key>' "
                              "(the OpenAI client's api_key)", kind="authentication_error", code="invalid_api_key")
        return await call_next(request)

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": method.name, "object": "model", "created": 0,
                                            "owned_by": "robustkit"}]}

    @app.get("/health")
    def health():
        return {"status": "ok", "method": method.name}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        try:
            body = await _json_object(request)
            if body.get("model") != method.name:
                return error(404, f"this server serves the method {method.name!r}, not {body.get('model')!r}; "
                                  f"pass model={method.name!r}", code="model_not_found")
            question = _question_of(body)
            reply = (await _in_thread(answer, [(_id_of(question), question)]))[0]
        except BadRequest as err:
            return error(err.status, str(err))
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": method.name,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply.pop("answer")}}],
                "robustkit": reply}

    @app.post("/v1/rag")
    async def rag(request: Request):
        try:
            questions = _questions_of(await _json_object(request))
            return {"method": method.name, "answers": await _in_thread(answer, questions)}
        except BadRequest as err:
            return error(err.status, str(err))

    return app


async def _in_thread(function, *args):
    """Run the (blocking, model-bound) answer off the event loop, so /health keeps answering."""
    from fastapi.concurrency import run_in_threadpool

    return await run_in_threadpool(function, *args)


async def _json_object(request) -> dict:
    """The request's JSON object, read only up to ``MAX_BODY_BYTES``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise BadRequest(f"the request body is {int(declared):,} bytes, more than {MAX_BODY_BYTES:,}; send "
                         "fewer or shorter questions", status=413)
    raw = b""
    async for chunk in request.stream():  # a body sent without its length is cut off at the limit too
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise BadRequest(f"the request body is more than {MAX_BODY_BYTES:,} bytes; send fewer or shorter "
                             "questions", status=413)
    try:
        body = json.loads(raw)
    except ValueError as err:
        raise BadRequest(f"the request body is not JSON ({err})") from None
    except RecursionError:
        raise BadRequest("the request body nests its JSON too deep; a request is an object of questions") from None
    if not isinstance(body, dict):
        raise BadRequest(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _question_of(body: dict) -> str:
    """The question of a chat request: its last message, from the user, as text."""
    if body.get("stream"):
        raise BadRequest("stream: a kit method answers whole; send stream=false")
    if body.get("n", 1) != 1:
        raise BadRequest(f"n: a kit method gives one answer per question, not {body.get('n')}")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        raise BadRequest("messages: a non-empty list of {role, content} objects is required")
    last = messages[-1]
    if last.get("role") != "user":
        raise BadRequest(f"messages[-1].role must be 'user' (the question), got {last.get('role')!r}")
    content = last.get("content")
    if isinstance(content, list):  # the content-parts form: its text parts, joined
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    if not isinstance(content, str) or not content.strip():
        raise BadRequest("messages[-1].content must be the question, a non-empty string")
    return _checked_length("messages[-1].content", content.strip())


def _questions_of(body: dict) -> list[tuple[str, str]]:
    """(id, question) pairs of a /v1/rag request; a row without an id gets its text's hash."""
    rows = body.get("questions")
    if not isinstance(rows, list) or not rows:
        raise BadRequest('questions: a non-empty list of {"id": ..., "question": ...} is required')
    if len(rows) > MAX_BATCH:
        raise BadRequest(f"questions: {len(rows)} in one request, more than {MAX_BATCH}; split the batch")
    pairs = []
    for i, row in enumerate(rows):
        text = row.get("question") if isinstance(row, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise BadRequest(f"questions[{i}].question must be a non-empty string, got {text!r:.60}")
        qid = row.get("id", _id_of(text))
        if not isinstance(qid, str) or not qid:
            raise BadRequest(f"questions[{i}].id must be a non-empty string, got {qid!r:.60}")
        pairs.append((qid, _checked_length(f"questions[{i}].question", text.strip())))
    if len({qid for qid, _ in pairs}) != len(pairs):
        raise BadRequest("questions: two rows share an id; ids must be unique within a request")
    return pairs


def _checked_length(field: str, question: str) -> str:
    if len(question) > MAX_QUESTION_CHARS:
        raise BadRequest(f"{field} is {len(question):,} characters, more than {MAX_QUESTION_CHARS:,}; a question "
                         "is a question, not a document")
    return question


def _id_of(text: str) -> str:
    return "q-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def _answer_json(answer: Answer, question: str, corpus) -> dict:
    passages = [{"id": pid, "title": corpus[pid].title, "text": corpus[pid].text}
                for pid in answer.passage_ids if pid in corpus]
    return {"id": answer.query_id, "question": question, "answer": answer.text, "abstained": answer.abstained,
            "confidence": answer.confidence, "passages": passages,
            "trace": json.loads(json.dumps(answer.trace, default=str)), "model_calls": answer.model_calls,
            "retrieval_calls": answer.retrieval_calls, "latency_s": answer.latency_s}


def main(method_name: str, scale=None, host: str = "127.0.0.1", port: int = 8000, *,
         corpus: str | None = None, api_key: str | None = None) -> None:
    """Build the method by its registry id at its paper's defaults (trained parts reused when
    staged) over the scale's corpus, or over ``corpus`` ("mini" or a passages file, searched by the
    scale's dense retriever), and serve it; the port is checked first, so a taken one is said
    before the minutes a method can take to build. ``api_key`` (default ``$ROBUSTKIT_API_KEY``)."""
    import uvicorn

    from robustkit import registry, resources
    from robustkit.config import get_scale

    check_port(host, port)
    api_key = api_key or os.environ.get("ROBUSTKIT_API_KEY") or None
    scale = get_scale(scale)
    own, retriever = resources.own_corpus(corpus, scale) if corpus else (None, None)
    method = registry.build(method_name, scale, corpus=own, retriever=retriever)
    passages = own if own is not None else resources.corpus_for(scale)  # where replies' passage ids are looked up
    print(f"[robustkit] serving {method.name} over {passages.name} ({len(passages):,} passages) at "
          f"http://{host}:{port}/v1 (OpenAI chat completions, model {method.name!r}; plain JSON at /v1/rag)"
          + ("; requests must carry its API key" if api_key else ""), flush=True)
    uvicorn.run(app_for(method, passages, api_key=api_key), host=host, port=port, log_level="warning")


def check_port(host: str, port: int) -> None:
    """Refuse a port this machine cannot listen on (taken, or privileged) before any work."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as err:
            raise ValueError(f"cannot serve on {host}:{port} ({err.strerror}); stop what holds the port or pass "
                             "another --port") from None
