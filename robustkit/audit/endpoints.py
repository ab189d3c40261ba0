"""Systems under audit, as kit ``Method``s: a RAG endpoint (the format of ``robustkit serve``'s
/v1/rag) or an OpenAI-compatible chat model, closed-book or reading the kit's retrieval.

Because an outside system is a ``Method``, it is asked and scored exactly as the kit's own
methods are (``methods.evaluate``: the same queries, judge, staging and tables).

The RAG format (POST ``<url>/rag``)::

    {"questions": [{"id": "q1", "question": "Who wrote Hamlet?"}, ...]}
    -> {"answers": [{"id": "q1", "answer": "William Shakespeare", "abstained": false,
                     "passages": [{"id": "...", "title": "...", "text": "..."}, ...]}, ...]}

``abstained`` and ``passages`` are optional (passages best first); every other field of an
answer is kept in its trace. Every call is cached under the system's name, URL and the models
its GET ``<url>/models`` lists, if it has that route (a rerun resends nothing, and says how many
answers it replayed). Requests carry ``$ROBUSTKIT_API_KEY`` (or ``api_key``) as a bearer token when
set, and go ``concurrency`` at a time, each with a timeout and up to ``retries`` retries with
exponential backoff on a refused or dropped connection, a timeout, 429, 5xx or a reply that is not JSON (asking
the same questions again is harmless). Answers are matched to questions by ``id``: an endpoint must
return the ids it was asked (only a request of one question may leave it out).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from robustkit.callcache import CallCache
from robustkit.config import check_knob
from robustkit.methods import Answer, Query, check_queries, spread_latency
from robustkit.models import ServerError

RAG_VERSION = "rag-v1"  # the request format; part of every cache key


class RAGEndpoint:
    """A RAG system behind an HTTP endpoint, as a ``Method``."""

    def __init__(self, url: str, *, name: str = "system", batch_size: int = 16, concurrency: int = 4,
                 timeout: float = 300.0, retries: int = 3, cache: CallCache | bool = True,
                 api_key: str | None = None):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"endpoint {url!r} is not an http(s) URL; e.g. http://127.0.0.1:8000/v1")
        check_knob("batch_size", batch_size, integer=True, low=1)
        check_knob("concurrency", concurrency, integer=True, low=1)
        check_knob("retries", retries, integer=True, low=0)
        self.url, self.name = url.rstrip("/"), name
        key = api_key or os.environ.get("ROBUSTKIT_API_KEY")  # what `robustkit serve --api-key` wants
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.batch_size, self.concurrency, self.timeout, self.retries = batch_size, concurrency, timeout, retries
        self.cache = (cache if isinstance(cache, CallCache) else CallCache()) if cache is not False else None
        self.requests = self.hits = 0
        self._served = None

    def identity(self) -> dict:
        """The system as far as the client can tell: its name, URL, format and listed models."""
        if self._served is None:
            self._served = _listed_models(self.url, self.timeout, self.headers)
        return {"system": "rag-endpoint", "name": self.name, "url": self.url, "format": RAG_VERSION,
                "models": self._served}

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        queries = check_queries(queries)
        start = time.perf_counter()
        system = json.dumps(self.identity(), sort_keys=True)
        keys = [hashlib.sha256(f"{system}\0{q.text}".encode()).hexdigest() for q in queries]
        stored = {k: json.loads(v) for k, v in (self.cache.get_many(keys) if self.cache else {}).items()}
        if replayed := sum(k in stored for k in keys):
            self.hits += replayed
            print(f"[robustkit] {self.name}: {replayed} of {len(keys)} answers replayed from the call cache "
                  f"(asked before of {self.url}); pass cache=False to ask again")
        todo = list({k: q for k, q in zip(keys, queries) if k not in stored}.items())
        batches = [todo[i:i + self.batch_size] for i in range(0, len(todo), self.batch_size)]
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="robustkit-audit") as pool:
            for batch, replies in zip(batches, pool.map(self._ask, batches)):
                stored.update(zip([k for k, _ in batch], replies))
                if self.cache is not None:  # each batch kept as it comes: an interrupted audit resumes
                    self.cache.put_many([(k, self.url, q.text, system, json.dumps(r))
                                         for (k, q), r in zip(batch, replies)])
        answers = [_answer(q, self.name, stored[k]) for q, k in zip(queries, keys)]
        spread_latency(answers, start)
        return answers

    def _ask(self, batch: list[tuple[str, Query]]) -> list[dict]:
        """One POST /rag for ``batch``; the answers, checked, in its order."""
        rows = [{"id": f"{i}", "question": q.text} for i, (_, q) in enumerate(batch)]
        where = f"{self.url}/rag"
        body = _post(where, {"questions": rows}, self.timeout, self.retries, self.headers)
        self.requests += 1
        answers = body.get("answers") if isinstance(body, dict) else None
        if not isinstance(answers, list) or len(answers) != len(rows):
            raise ServerError(f"malformed response from {where}: 'answers' must be a list of "
                              f"{len(rows)} objects, one per question sent; got {str(body)[:200]}")
        for i, reply in enumerate(answers):
            _check_reply(reply, i, where)
        if len(rows) == 1 and "id" not in answers[0]:  # one question, one answer: nothing to mix up
            return answers
        by_id = {reply.get("id"): reply for reply in answers}
        if sorted(by_id, key=str) != sorted(row["id"] for row in rows):
            raise ServerError(f"malformed response from {where}: each answer must carry the id of its question "
                              f"(sent {[row['id'] for row in rows]}, got {[r.get('id') for r in answers]}); "
                              "answers are matched by id, never by position")
        return [by_id[row["id"]] for row in rows]


def _listed_models(url: str, timeout: float, headers: dict) -> list[str] | str:
    """The ids GET ``<url>/models`` lists (``robustkit serve`` lists its method), or why there are none."""
    import httpx

    try:
        response = httpx.get(f"{url}/models", timeout=min(timeout, 10), headers=headers)
        return sorted(m["id"] for m in response.json()["data"]) if response.status_code == 200 else "no /models route"
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as err:
        return f"no /models route ({type(err).__name__})"


def _post(url: str, payload: dict, timeout: float, retries: int, headers: dict) -> dict:
    """POST JSON, retrying a refused or dropped connection, a timeout, 429, 5xx and a body that is
    not JSON (1, 2, 4 … s apart); a 4xx is the request's fault and is not retried."""
    import httpx

    for attempt in range(retries + 1):
        try:
            response = httpx.post(url, json=payload, timeout=timeout, headers=headers)
        except httpx.TransportError as err:  # refused, dropped mid-reply, timed out
            failure = f"{type(err).__name__}: {err}"
        else:
            if response.status_code < 400:
                try:
                    return response.json()
                except ValueError:
                    failure = f"a reply that is not JSON ({response.text[:200]!r})"
            else:
                failure = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code != 429 and response.status_code < 500:
                    raise ServerError(f"{url} refused the request ({failure}); check the endpoint's format "
                                      "(robustkit.audit.endpoints documents it)")
        if attempt < retries:
            time.sleep(2 ** attempt)
    raise ServerError(f"{url} did not answer after {retries + 1} tries (last: {failure}); check that the system "
                      "is running at that URL. Finished calls are cached: rerun to resume")


def _check_reply(reply, i: int, where: str) -> None:
    """One answer of the RAG format; the field at fault is named."""
    def bad(field, wanted, got):
        raise ServerError(f"malformed response from {where}: answers[{i}].{field} must be {wanted}, got {got!r:.80}")

    if not isinstance(reply, dict):
        bad("", "an object", reply)
    if not isinstance(reply.get("answer"), str):
        bad("answer", "a string", reply.get("answer"))
    if not isinstance(reply.get("abstained", False), bool):
        bad("abstained", "true or false", reply.get("abstained"))
    passages = reply.get("passages", [])
    if not isinstance(passages, list):
        bad("passages", "a list", passages)
    for j, passage in enumerate(passages):
        if not isinstance(passage, dict) or not isinstance(passage.get("text"), str):
            bad(f"passages[{j}].text", "a string", passage)


def _answer(query: Query, name: str, reply: dict) -> Answer:
    passages = [{"id": str(p.get("id", "")), "title": str(p.get("title", "")), "text": p["text"]}
                for p in reply.get("passages", [])]
    extra = {k: v for k, v in reply.items() if k not in ("id", "answer", "abstained", "passages", "question")}
    return Answer(query.id, query.question_id, name, reply["answer"], bool(reply.get("abstained", False)),
                  reply.get("confidence"), [p["id"] for p in passages],
                  retrieval_calls=int(reply.get("retrieval_calls", bool(passages))),
                  model_calls=int(reply.get("model_calls", 1)), trace={"passages": passages, "system": extra})


class ClosedBook:
    """A chat model asked the question alone (no retrieval), as a ``Method``: the OpenAI-format
    audit of a served model through ``robustkit.llm_client`` (its cache, concurrency and retries)."""

    def __init__(self, generator, *, name: str = "system", max_new_tokens: int = 32):
        self.generator, self.name, self.max_new_tokens = generator, name, max_new_tokens

    def identity(self) -> dict:
        return {"system": "closed-book", "reader": self.generator.identity(), "max_new_tokens": self.max_new_tokens}

    def answer(self, queries: Sequence[Query]) -> list[Answer]:
        queries = check_queries(queries)
        start = time.perf_counter()
        texts = self.generator.generate([q.text for q in queries], max_new_tokens=self.max_new_tokens,
                                        desc="asking the system")
        answers = [Answer(q.id, q.question_id, self.name, t, model_calls=1) for q, t in zip(queries, texts)]
        spread_latency(answers, start)
        return answers
