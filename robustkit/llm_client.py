"""A generator served by an OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, `transformers serve`).

Chosen per role like any model: ``rk.start(models={"teacher": "openai:Qwen/Qwen3-14B@http://gpu:8000/v1"})``
or ``ROBUSTKIT_MODEL_TEACHER=openai:Qwen/Qwen3-14B`` with the URL in ``$OPENAI_BASE_URL`` and the key,
if the server wants one, in ``$OPENAI_API_KEY`` (the ``openai`` package's own conventions).
``make_generator(role)`` then returns a ``ServedGenerator`` (and for an in-process model an
``llm.Generator``): the same three operations, the same call cache and manifests, with requests
sent concurrently (``$ROBUSTKIT_SERVER_CONCURRENCY``, 8). Reading the ``openai:`` choice and
reaching its server before any work are ``models``' (``served_spec``, ``check_server``).

How each operation maps onto the API:

    generate                 POST /v1/chat/completions   temperature 0, max_tokens, stop; a prompt
                                                          ending with an assistant message is
                                                          continued (vLLM's continue_final_message)
    option_probabilities     POST /v1/chat/completions   max_tokens 1, logprobs, top_logprobs 20
    continuation_logprobs    POST /v1/completions        the chat rendered here with the model's own
                                                          template, echo + logprobs (the prompt's)

A server that lacks a feature an operation needs stops the call with ``ServerFeatureError`` naming
the server, the feature and the operation — never an approximation. A server may also accept a
request and not do what it asks: llama-cpp-python's server (0.3) ignores ``continue_final_message``
and echoes prompt log-probabilities shifted by one position (abetlen/llama-cpp-python#1983), both
without a word. So the first prefilled reply and the first echoed prompt on each server are
probed (two one-token requests each) before the kit relies on them; ``rk.clear()`` forgets the
verdicts.
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from tqdm.auto import tqdm

from robustkit import memo
from robustkit.callcache import CallCache, call_key
from robustkit.config import Scale, announce_long_work, check_knob, get_scale, show_progress
from robustkit.llm import (DEFAULT_SYSTEM, Generator, Prompt, chat_messages, check_prompts, check_strings,
                           cut_at_stop)
from robustkit.llm_replies import (body_text, continuation_flags, field, is_logprob, option_probabilities_from,
                                   reply_logprob)
from robustkit.models import (SERVED_PREFIX, ModelError, ModelSpec, ServerError, ServerFeatureError,
                              auto_tokenizer, check_server, chosen_models, resolve_model, served_model)

TOP_LOGPROBS = 20  # the most OpenAI's API returns; vLLM's default cap too
MALFORMED_RETRIES = 2  # a reply that is not JSON, sent again this many times
CONTINUE = "continue_final_message (continuing a prefilled assistant reply)"
ECHO = "echo with logprobs on /v1/completions"
# (server URL, served model, feature) → probed and found to work, once per process
_VERIFIED = memo.holding("llm_client._VERIFIED", {})
_VERIFYING = threading.Lock()


def make_generator(role: str = "generator", scale: Scale | str | None = None, *,
                   spec: ModelSpec | None = None, **options) -> Generator | ServedGenerator:
    """The generator for ``role`` at ``scale``, wherever its model runs: a ``ServedGenerator`` for a
    served model (``spec``'s source ``openai``, or the user's ``openai:<model>@<url>`` choice for
    the role), else an in-process ``llm.Generator``. ``options`` go to that class.

    Example:
        >>> scale = rk.with_overrides("tiny", models={"teacher": "openai:Qwen/Qwen3-14B@http://gpu:8000/v1"})
        >>> type(make_generator("teacher", scale)).__name__, type(make_generator("generator", scale)).__name__
        ('ServedGenerator', 'Generator')
    """
    served = spec.source == "openai" if spec else \
        chosen_models(get_scale(scale)).get(role, "").strip().startswith(SERVED_PREFIX)
    return (ServedGenerator if served else Generator)(role, scale, spec=spec, **options)


class ServedGenerator:
    """``Generator``'s interface over an OpenAI-compatible server (see the module's docstring).

    Example:
        >>> gen = make_generator("generator")   # with ROBUSTKIT_MODEL_GENERATOR=openai:Qwen/Qwen3-8B@http://localhost:8000/v1
        >>> gen.generate(["Who wrote Hamlet?"], max_new_tokens=8)
        ['William Shakespeare']
    """

    dtype = device = "server"  # the server chose them; manifests record the server instead

    def __init__(self, role: str = "generator", scale: Scale | str | None = None, *,
                 spec: ModelSpec | None = None, cache: CallCache | bool = True,
                 batch_size: int | None = None, system_prompt: str | None = DEFAULT_SYSTEM,
                 concurrency: int | None = None, timeout: float | None = None, **local_only):
        if local_only:
            raise TypeError(f"{sorted(local_only)} set how an in-process model runs; a served model runs "
                            "as its server was started")
        self.scale = get_scale(scale)
        self.spec = spec or resolve_model(role, self.scale)
        self.model_name = served_model(self.spec)
        self.batch_size = batch_size or max(self.scale.gen_batch_size, 64)
        self.concurrency = concurrency or int(os.environ.get("ROBUSTKIT_SERVER_CONCURRENCY", 8))
        self.timeout = timeout or float(os.environ.get("ROBUSTKIT_SERVER_TIMEOUT", 300))
        check_knob("concurrency", self.concurrency, integer=True, low=1)
        check_knob("batch_size", self.batch_size, integer=True, low=1)
        self.system_prompt = system_prompt
        self.cache = (cache if isinstance(cache, CallCache) else CallCache()) if cache is not False else None
        self.hits = self.misses = self.options_missing = 0
        self._client = self._server = None

    @property
    def model_id(self) -> str:
        return self.spec.name

    def identity(self) -> dict:
        """What decides this generator's outputs, for artifact manifests: the server and its model."""
        self._server = self._server or check_server(self.spec)
        return {"model": self.model_id, "server": self.spec.path, "served_model": self.model_name,
                "server_version": self._server["server_version"], "system_prompt": self.system_prompt}

    def with_cache(self, cache: CallCache | bool) -> "ServedGenerator":
        twin = ServedGenerator(self.spec.role, self.scale, spec=self.spec, cache=cache,
                               batch_size=self.batch_size, system_prompt=self.system_prompt,
                               concurrency=self.concurrency, timeout=self.timeout)
        twin._client, twin._server = self._client, self._server
        return twin

    @property
    def client(self):
        if self._client is None:
            from openai import OpenAI

            self._server = check_server(self.spec)
            # the client retries connection errors, 429 and 5xx with exponential backoff
            self._client = OpenAI(base_url=self.spec.path, api_key=os.environ.get("OPENAI_API_KEY") or "EMPTY",
                                  timeout=self.timeout, max_retries=3)
        return self._client

    def messages(self, prompt: Prompt) -> list[dict]:
        return chat_messages(prompt, self.system_prompt)

    def generate(self, prompts: Sequence[Prompt], *, max_new_tokens: int = 32,
                 stop: Sequence[str] = ("\n",), batch_size: int | None = None,
                 progress: bool | None = None, desc: str = "generating") -> list[str]:
        """Greedy completions (chat completions at temperature 0), in order, from the cache where possible."""
        check_knob("max_new_tokens", max_new_tokens, integer=True, low=1)
        check_strings("stop", stop, 'e.g. stop=("\\n",) ends at a line break; stop=() decodes up '
                                    "to max_new_tokens")
        params = {"max_new_tokens": max_new_tokens, "stop": list(stop), "decoding": "greedy"}

        def ask(messages):
            continued = messages[-1]["role"] == "assistant"
            if continued:
                self._verified(CONTINUE, lambda: self._probe_continuation(messages))
            reply = self._request("generate", "chat.completions", messages=messages, max_tokens=max_new_tokens,
                                  temperature=0.0, stop=list(stop) or None,
                                  extra_body=continuation_flags(True) if continued else None,
                                  feature=CONTINUE if continued else None)
            text = field(reply, "choices[0].message.content", lambda r: r.choices[0].message.content)
            if not isinstance(text, str):
                raise self._invalid("generate", "choices[0].message.content", text, "a string")
            return cut_at_stop(text, stop).strip()

        return self._cached_calls(prompts, params, ask, batch_size, progress, desc, store=str, load=str)

    def option_probabilities(self, prompts: Sequence[Prompt], options: Sequence[str] = ("yes", "no"),
                             *, batch_size: int | None = None, progress: bool | None = None,
                             desc: str = "scoring") -> list[list[float]]:
        """P(option | prompt) renormalised over ``options``, from the first reply token's top
        log-probabilities; each option is read as the longest returned token it starts with."""
        check_strings("options", options, 'e.g. options=("yes", "no")')

        def ask(messages):
            reply = self._request("option_probabilities", "chat.completions", messages=messages, max_tokens=1,
                                  temperature=0.0, logprobs=True, top_logprobs=TOP_LOGPROBS)
            top = field(reply, "choices[0].logprobs.content[0].top_logprobs",
                         lambda r: [(t.token, t.logprob) for t in r.choices[0].logprobs.content[0].top_logprobs],
                         feature="logprobs with top_logprobs on chat completions", operation="option_probabilities")
            for token, logprob in top:
                if not isinstance(token, str) or not is_logprob(logprob):
                    raise self._invalid("option_probabilities", "choices[0].logprobs.content[0].top_logprobs",
                                        {"token": token, "logprob": logprob}, "a token string and a finite log-probability ≤ 0")
            probs, missing = option_probabilities_from(top, options)
            self.options_missing += missing
            return probs

        params = {"options": list(options), "kind": "option-probabilities"}
        out = self._cached_calls(prompts, params, ask, batch_size, progress, desc, store=json.dumps, load=json.loads)
        if self.options_missing:
            print(f"[robustkit] {self.model_id}: {self.options_missing} option(s) were not among the "
                  f"top {TOP_LOGPROBS} tokens and were given probability 0 (counted in options_missing)")
        return out

    def continuation_logprobs(self, prompts: Sequence[Prompt], continuations: Sequence[str], *,
                              batch_size: int | None = None, progress: bool | None = None,
                              desc: str = "scoring") -> list[float]:
        """log P(continuation | prompt), the continuation read as the assistant's reply: the
        conversation is rendered here with the served model's chat template and sent to
        /v1/completions with ``echo`` so that the server returns the prompt's token log-probabilities."""
        check_prompts(prompts, batch_size)
        if isinstance(continuations, str) or len(continuations) != len(prompts):
            raise ValueError("continuations must be a list of strings, one per prompt")
        tokenizer = self._tokenizer()
        heads, fulls = {}, []
        for i, (prompt, text) in enumerate(zip(prompts, continuations)):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"continuation {i} must be a non-empty str, got {text!r:.60}")
            messages = self.messages(prompt)
            if messages[-1]["role"] == "assistant":
                raise ValueError(f"prompt {i} already ends with an assistant message; the continuation is the whole reply")
            head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": text}],
                                                 tokenize=False, continue_final_message=True)
            if full != head + text:
                raise ValueError(f"continuation {i} ({text!r:.60}) is not kept verbatim by the chat template")
            heads[full] = len(head)
            fulls.append(full)

        def ask(full):
            self._verified(ECHO, lambda: self._probe_echo(full[:heads[full]]))
            return self._echoed_logprob(full, heads[full])

        params = {"kind": "continuation-logprob"}
        return self._cached_calls(fulls, params, ask, batch_size, progress, desc,
                                  store=json.dumps, load=json.loads, rendered=True)

    def _echoed_logprob(self, full: str, reply_start: int) -> float:
        """log P(full[reply_start:] | full[:reply_start]) from the server's echoed prompt."""
        reply = self._request("continuation_logprobs", "completions", prompt=full, max_tokens=1,
                              temperature=0.0, echo=True, logprobs=1, feature=ECHO)
        logprobs = field(reply, "choices[0].logprobs", lambda r: r.choices[0].logprobs,
                          feature=ECHO, operation="continuation_logprobs")
        offsets, values = logprobs.text_offset, logprobs.token_logprobs
        if not isinstance(offsets, list) or not isinstance(values, list) or len(offsets) != len(values):
            raise self._invalid("continuation_logprobs", "choices[0].logprobs", logprobs,
                                "text_offset and token_logprobs, two lists of one entry per token")
        for offset, value in zip(offsets, values):  # the first prompt token has no log-probability: None
            if isinstance(offset, bool) or not isinstance(offset, int) or value is not None and not is_logprob(value):
                raise self._invalid("continuation_logprobs", "choices[0].logprobs.token_logprobs",
                                    {"text_offset": offset, "logprob": value}, "an integer offset and a finite log-probability ≤ 0")
        return reply_logprob(offsets, values, reply_start, len(full))

    def _verified(self, feature: str, probe) -> None:
        """Run ``probe`` (it raises when the server does not do what ``feature`` asks) once per
        server, model and feature; concurrent requests wait for the first verdict."""
        key = (self.spec.path, self.model_name, feature)
        with _VERIFYING:
            if key not in _VERIFIED:
                probe()
                _VERIFIED[key] = True

    def _probe_continuation(self, messages: list[dict]) -> None:
        """A server honouring continue_final_message renders the prefilled reply unfinished, so its
        prompt is shorter than the same messages rendered as a finished turn plus a new one."""
        def prompt_tokens(continued: bool) -> int:
            reply = self._request("generate", "chat.completions", messages=messages, max_tokens=1, temperature=0.0,
                                  extra_body=continuation_flags(continued), feature=CONTINUE)
            return field(reply, "usage.prompt_tokens", lambda r: r.usage.prompt_tokens, feature=CONTINUE,
                          operation="generate")

        continued, closed = prompt_tokens(True), prompt_tokens(False)
        if continued >= closed:
            raise ServerFeatureError(
                f"the server at {self.spec.path} accepted but ignored {CONTINUE}: with it the prompt had "
                f"{continued} tokens, as a finished turn {closed}, so the reply would start a new turn "
                "instead of continuing; generate needs it for prefilled replies — serve the model with vLLM "
                "or SGLang, or run this role in-process")

    def _probe_echo(self, head: str) -> None:
        """The server's echoed log-probability of a token must be the one it gave the same token
        when generating it; a shifted echo, or offsets that skip special tokens, fail here."""
        reply = self._request("continuation_logprobs", "completions", prompt=head, max_tokens=1,
                              temperature=0.0, logprobs=1, feature=ECHO)

        def first_token(r):
            logprobs = r.choices[0].logprobs
            return (logprobs.tokens[0], logprobs.token_logprobs[0]) if logprobs.token_logprobs[0] is not None else None

        token, generated = field(reply, "choices[0].logprobs.token_logprobs[0]", first_token, feature=ECHO,
                                  operation="continuation_logprobs")
        try:
            echoed = self._echoed_logprob(head + token, len(head)) if token.strip() else None
        except ServerFeatureError:
            raise
        except (ValueError, ServerError):  # no echoed token starts where the generated one does
            echoed = None
        if echoed is None or not math.isclose(echoed, generated, rel_tol=0.1, abs_tol=0.1):  # bf16 noise, not a shift
            raise ServerFeatureError(
                f"the server at {self.spec.path} echoes prompt log-probabilities that disagree with its own: "
                f"it generated {token!r} at log p {generated:.3f}, and echoed the same prompt and token as "
                f"{'unreadable (no echoed token starts where it does)' if echoed is None else f'{echoed:.3f}'}; "
                "continuation_logprobs needs a correct echo (vLLM's) — serve the model with vLLM, or run this "
                "role in-process")

    def _tokenizer(self):
        try:
            return auto_tokenizer(self.model_name)
        except (OSError, ValueError) as err:
            raise ModelError(f"continuation_logprobs renders the chat with {self.model_name!r}'s own template, "
                             f"and its tokenizer does not load here ({type(err).__name__}); serve the model "
                             "under its hub id or a folder this machine can read") from None

    def _invalid(self, operation: str, name: str, value, wanted: str) -> ServerError:
        """The error for a reply whose field ``name`` holds ``value`` instead of ``wanted``; raised
        before anything of the reply is cached."""
        return ServerError(f"the {self.spec.role} server at {self.spec.path} sent an invalid {name} during "
                           f"{operation}: {value!r:.120} (expected {wanted}); nothing of this reply was cached — "
                           "fix the server, then run again")

    def _request(self, operation: str, endpoint: str, *, feature: str | None = None, **body):
        reply = self._send(operation, endpoint, feature=feature, **body)
        if not getattr(reply, "choices", None):
            raise self._invalid(operation, "choices", getattr(reply, "choices", reply), "a non-empty list")
        return reply

    def _send(self, operation: str, endpoint: str, *, feature: str | None = None, **body):
        """One request. The client already retries refused and dropped connections, 429 and 5xx; a
        body that is not JSON is retried here (as transient as a dropped connection); each failure
        that remains is named with the server."""
        import openai

        create = self.client.chat.completions.create if endpoint == "chat.completions" else self.client.completions.create
        for attempt in range(MALFORMED_RETRIES + 1):
            try:
                return create(model=self.model_name, **body)
            except (json.JSONDecodeError, openai.APIResponseValidationError) as err:
                if attempt == MALFORMED_RETRIES:
                    raise ServerError(f"the {self.spec.role} server at {self.spec.path} answered {operation} with a "
                                      f"body that is not the API's JSON ({type(err).__name__}: {str(err)[:160]}), "
                                      f"{attempt + 1} times; check the server's log") from None
                time.sleep(2 ** attempt)
            except openai.APIConnectionError as err:
                raise ServerError(f"the {self.spec.role} server at {self.spec.path} stopped answering during "
                                  f"{operation} ({err}); restart it and run again: finished calls are cached") from None
            except openai.NotFoundError:
                raise ServerError(f"the server at {self.spec.path} does not serve {self.model_name!r} (it lists "
                                  f"{self._server['served_models']}); fix the model name") from None
            except (openai.BadRequestError, openai.UnprocessableEntityError) as err:
                if feature:
                    raise ServerFeatureError(f"the server at {self.spec.path} refused {feature}, which {operation} "
                                             f"needs ({err}); serve the model with vLLM, or run this role "
                                             "in-process") from None
                raise ServerError(f"the server at {self.spec.path} refused a {operation} request: {err}") from None
            except openai.APIStatusError as err:  # 5xx after the client's retries, 401, 403 …
                raise ServerError(f"the {self.spec.role} server at {self.spec.path} answered {operation} with HTTP "
                                  f"{err.status_code} ({body_text(err)}); check the server's log (and OPENAI_API_KEY "
                                  "for 401/403), then run again: finished calls are cached") from None

    def _cached_calls(self, prompts, params: dict, ask, batch_size, progress, desc, *,
                      store, load, rendered: bool = False) -> list:
        """``ask`` each uncached prompt, ``concurrency`` requests at a time, committing each chunk
        of ``batch_size`` to the cache as it finishes (an interrupted run keeps every finished chunk)."""
        if not rendered:
            check_prompts(prompts, batch_size)
        if not prompts:
            return []
        params = json.dumps({**params, "backend": "openai"}, sort_keys=True)
        payloads = prompts if rendered else [self.messages(p) for p in prompts]
        texts = [p if rendered else json.dumps(p, sort_keys=True) for p in payloads]
        keys = [call_key(self.model_id, text, params) for text in texts]
        done = {k: load(v) for k, v in (self.cache.get_many(keys) if self.cache is not None else {}).items()}
        todo = list({k: (t, p) for k, t, p in zip(keys, texts, payloads) if k not in done}.items())
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        chunk = batch_size or self.batch_size
        show = (progress if progress is not None else len(todo) > chunk) and show_progress()
        started = time.perf_counter()
        with tqdm(total=len(todo), desc=desc, disable=not show) as bar, \
                ThreadPoolExecutor(self.concurrency, thread_name_prefix="robustkit-server") as pool:
            for start in range(0, len(todo), chunk):
                part = todo[start:start + chunk]
                outputs = list(pool.map(lambda item: ask(item[1][1]), part))
                done.update((key, out) for (key, _), out in zip(part, outputs))
                if self.cache is not None:
                    self.cache.put_many([(key, self.model_id, text, params, store(out))
                                         for (key, (text, _)), out in zip(part, outputs)])
                bar.update(len(part))
                if start == 0:
                    announce_long_work(f"{desc} ({self.model_id})", len(part), len(todo),
                                       time.perf_counter() - started, "prompts")
        return [done[k] for k in keys]
