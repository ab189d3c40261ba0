"""One generator wrapper over transformers: chat templates, batched greedy decoding, a call cache.

Every call goes through the call cache (``robustkit.callcache``), keyed by model, dtype, rendered
prompt and decoding parameters. The model is loaded lazily,
so replaying a fully cached run never touches the weights, and once per process: generators for
several roles (reader, teacher, adversary) that name the same model share one copy.

The weights are loaded by ``robustkit.weights`` (GGUF conversion, the dtype, the GPU's memory plan).
A role whose model is served (``openai:<model>@<url>``) runs in ``robustkit.llm_client`` instead:
``llm_client.make_generator`` gives either kind, and the prompt checks below are both kinds'.
"""
from __future__ import annotations

import copy
import json
import time
from typing import Sequence

from tqdm.auto import tqdm

from robustkit import prefix
from robustkit.callcache import CallCache, call_key
from robustkit.config import Scale, announce_long_work, check_knob, get_scale, show_progress
from robustkit.device import DTYPES, model_dtype, pick_device
from robustkit.models import ModelSpec, auto_config, resolve_model
from robustkit.weights import fp16_dtype, load_causal_lm, load_tokenizer, weights_dir

Prompt = str | list[dict]


class PromptTooLong(ValueError):
    """A prompt longer than the model's trained positions (the input's fault: fewer or shorter passages)."""


DEFAULT_SYSTEM = "You are a concise assistant. Answer with a short phrase."


class Generator:
    """Batched greedy generation with a chat template and an on-disk call cache.

    Example:
        >>> gen = Generator("generator")            # the scale's generator (SmolLM2 at tiny)
        >>> gen.generate(["Who wrote Hamlet?"], max_new_tokens=8)
        ['William Shakespeare']
    """

    def __init__(self, role: str = "generator", scale: Scale | str | None = None, *,
                 spec: ModelSpec | None = None, cache: CallCache | bool = True,
                 dtype: str | None = None, device: str | None = None,
                 batch_size: int | None = None, system_prompt: str | None = DEFAULT_SYSTEM,
                 share_prefixes: bool = True, reserve_cache: bool = True):
        if dtype is not None and dtype not in DTYPES:
            raise ValueError(f"dtype={dtype!r} is not one of {DTYPES}; pass one of them, or leave it "
                             "out for the device's default")
        if batch_size is not None:
            check_knob("batch_size", batch_size, integer=True, low=1)
        self.scale = get_scale(scale)
        self.spec = spec or resolve_model(role, self.scale)
        if self.spec.source == "openai":
            raise ValueError(f"the {self.spec.role} model {self.spec.name!r} is served, and Generator runs a "
                             "model in this process; use robustkit.llm_client.make_generator"
                             f"({self.spec.role!r}, ...), which gives a served or an in-process generator")
        self.device = pick_device(device)
        self.dtype, self.dtype_reason = (dtype, "chosen by the caller") if dtype else model_dtype(self.device)
        if self.dtype == "float16" and self.device.startswith("cuda") and not dtype:
            self.dtype, self.dtype_reason = fp16_dtype(self.spec, self.device, self.dtype_reason)
        self.batch_size = batch_size or self.scale.gen_batch_size
        self.system_prompt = system_prompt
        self.share_prefixes = share_prefixes  # off only to measure what sharing saves (bench)
        self.reserve_cache = reserve_cache  # likewise: off is transformers' cache that copies itself each step
        self.cache = (cache if isinstance(cache, CallCache) else CallCache()) if cache is not False else None
        self.hits = self.misses = 0
        self._tokenizer = None

    @property
    def model_id(self) -> str:
        return self.spec.name

    def identity(self) -> dict:
        """What decides this generator's outputs, for artifact manifests."""
        return {"model": self.model_id, "dtype": self.dtype, "system_prompt": self.system_prompt}

    def with_cache(self, cache: CallCache | bool) -> "Generator":
        """The same generator (sharing its loaded weights) with another call cache; ``False``
        for none, e.g. to time real model calls rather than cache replays."""
        twin = copy.copy(self)
        twin.cache = (cache if isinstance(cache, CallCache) else CallCache()) if cache is not False else None
        twin.hits = twin.misses = 0
        return twin

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(weights_dir(self.spec, self.dtype))
        return self._tokenizer

    @property
    def model(self):
        """The weights, loaded on first use; not held here, so that the GPU's memory plan can
        release them (they are loaded again when next needed)."""
        return load_causal_lm(self.spec, self.dtype, self.device, self.dtype_reason)

    def render(self, prompt: Prompt) -> str:
        """The exact text the model sees: the chat template applied to the prompt.

        A message list ending with an assistant message is *continued* from that text, which lets
        a caller constrain the shape of the answer (e.g. start a rewrite with the question).
        """
        messages = chat_messages(prompt, self.system_prompt)
        if messages[-1]["role"] == "assistant":  # a prefilled answer the model continues
            return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                      continue_final_message=True)
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)

    def generate(self, prompts: Sequence[Prompt], *, max_new_tokens: int = 32,
                 stop: Sequence[str] = ("\n",), batch_size: int | None = None,
                 progress: bool | None = None, desc: str = "generating") -> list[str]:
        """Greedy completions for ``prompts``, in order, from the cache where possible.

        Args:
            prompts: user messages (str) or full chat message lists.
            max_new_tokens: decoding budget per prompt.
            stop: strings that end a completion (the text is cut before them).
            batch_size: prompts per forward pass (default: the scale's).
            progress: show a progress bar (default: when more than one batch is needed).
        """
        check_knob("max_new_tokens", max_new_tokens, integer=True, low=1)
        check_strings("stop", stop, 'e.g. stop=("\\n",) ends at a line break; stop=() decodes up '
                                    "to max_new_tokens")
        params = {"max_new_tokens": max_new_tokens, "stop": list(stop), "decoding": "greedy"}
        return self._cached_map(prompts, params,
                                lambda ids, groups: self._decode(ids, groups, max_new_tokens, stop),
                                batch_size, progress, desc, store=str, load=str, new_tokens=max_new_tokens)

    def option_probabilities(self, prompts: Sequence[Prompt], options: Sequence[str] = ("yes", "no"),
                             *, batch_size: int | None = None, progress: bool | None = None,
                             desc: str = "scoring") -> list[list[float]]:
        """P(option | prompt) renormalised over ``options``, from one forward pass per prompt.

        Each option is scored by its first token, so options must differ in their first token.
        """
        check_prompts(prompts, batch_size)
        check_strings("options", options, 'e.g. options=("yes", "no")')
        first = [self.tokenizer(o, add_special_tokens=False)["input_ids"][0] for o in options]
        if len(set(first)) != len(first):
            raise ValueError(f"options {list(options)} share a first token; they cannot be told apart")
        params = {"options": list(options), "kind": "option-probabilities"}
        return self._cached_map(prompts, params, lambda ids, groups: self._option_probs(ids, groups, first),
                                batch_size, progress, desc, store=json.dumps, load=json.loads)

    def continuation_logprobs(self, prompts: Sequence[Prompt], continuations: Sequence[str], *,
                              batch_size: int | None = None, progress: bool | None = None,
                              desc: str = "scoring") -> list[float]:
        """log P(continuation | prompt) = Σ_t log p(c_t | prompt, c_<t), the continuation read as
        the assistant's reply: the prompt rendered with the generation prompt, then the
        continuation's tokens (TruthfulQA's MC scores, summed over the answer tokens only).

        Logits and their log-softmax are formed at the continuation positions only, never over
        the whole sequence. Each (prompt, continuation) pair is cached as the rendered
        conversation. Pairs sharing a long token prefix (the options of a question about a
        passage) have it computed once (``robustkit.prefix``), but only up to the reply, whose
        every token needs its own logits.

        Args:
            prompts: user messages (str) or chat message lists not ending with an assistant turn.
            continuations: one non-empty reply text per prompt.
        Returns:
            one summed log-probability (nats) per pair, in order.
        """
        import torch

        check_prompts(prompts, batch_size)
        if isinstance(continuations, str):
            raise TypeError("continuations must be a list of strings, not a single str; wrap it in a list")
        if len(continuations) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations: "
                             "they must align one to one")
        conversations, heads, fulls = [], [], []
        for i, (prompt, text) in enumerate(zip(prompts, continuations)):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"continuation {i} must be a non-empty str, got {text!r:.60}")
            if special := next((s for s in self.tokenizer.all_special_tokens if s in text), None):
                # a control token would end the reply early and make the cache key ambiguous
                raise ValueError(f"continuation {i} ({text!r:.60}) contains the control token {special!r}")
            messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
            if messages[-1]["role"] == "assistant":
                raise ValueError(f"prompt {i} already ends with an assistant message; the "
                                 "continuation is the whole reply")
            conversations.append([*messages, {"role": "assistant", "content": text}])
            heads.append(self.render(prompt))
            fulls.append(self.render(conversations[-1]))
            if fulls[-1] != heads[-1] + text:
                raise ValueError(f"continuation {i} ({text!r:.60}) is not kept verbatim by the chat "
                                 "template (trailing whitespace?)")
        tokenize = lambda texts: self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        reply_length = {}  # full token ids -> how many of them are the reply's
        for i, (head, full) in enumerate(zip(tokenize(heads), tokenize(fulls))):
            if full[:len(head)] != head:
                raise ValueError(f"continuation {i} ({continuations[i]!r:.60}) merges with the end of "
                                 "the prompt when tokenized (leading whitespace?)")
            reply_length[tuple(full)] = len(full) - len(head)

        def score(token_ids, groups):
            replies = {i: reply_length[tuple(token_ids[i])] for g, _ in groups for i in g}
            # the shared prefix ends before the prompt's last token, whose logits predict c_1
            groups = [(g, min(shared, *(len(token_ids[i]) - replies[i] - 1 for i in g)))
                      for g, shared in groups]
            with torch.inference_mode():
                members, input_ids, mask, cache = prefix.prefill(self.model, token_ids, groups,
                                                                 self.tokenizer.pad_token_id)
                width = input_ids.shape[1] - cache.get_seq_length()
                n = torch.tensor([replies[i] for i in members], device=input_ids.device)
                longest = int(n.max())
                # rows are left-padded, so every reply ends in the last column
                logits = self.model(input_ids=input_ids[:, -width:], attention_mask=mask,
                                    logits_to_keep=longest + 1,
                                    position_ids=(mask.cumsum(-1) - 1).clamp(min=0)[:, -width:],
                                    **prefix.cache_argument(self.model, cache)).logits[:, :-1].float()
                targets = input_ids[:, -longest:]
                token_lp = logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]
                in_reply = torch.arange(longest, device=n.device) >= (longest - n)[:, None]
                return torch.where(in_reply, token_lp, 0.0).sum(-1).tolist()

        params = {"kind": "continuation-logprob"}
        return self._cached_map(conversations, params, score, batch_size, progress, desc,
                                store=json.dumps, load=json.loads)

    def _cached_map(self, prompts, params: dict, compute, batch_size, progress, desc, *,
                    store, load, new_tokens: int = 0) -> list:
        """Apply ``compute`` (token ids, groups of prompts sharing a prefix -> one output per
        prompt, in group order) batch by batch, through the cache. ``compute`` adds up to
        ``new_tokens`` tokens to each prompt, which with them must fit the model's positions.

        Prompts that share a long token prefix (a passage asked several questions) are batched
        together and their prefix is computed once (``robustkit.prefix``). Each finished batch is
        committed at once, so an interruption keeps every finished batch.
        """
        check_prompts(prompts, batch_size)
        if not prompts:
            return []
        params = json.dumps({**params, "dtype": self.dtype}, sort_keys=True)
        rendered = [self.render(p) for p in prompts]
        keys = [call_key(self.model_id, text, params) for text in rendered]
        stored = self.cache.get_many(keys) if self.cache is not None else {}
        done = {k: load(v) for k, v in stored.items()}
        todo = list({k: t for k, t in zip(keys, rendered) if k not in done}.items())
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        batch_size = batch_size or self.batch_size
        token_ids = self.tokenizer([t for _, t in todo], add_special_tokens=False)["input_ids"] if todo else []
        self._check_context(token_ids, lambda i: keys.index(todo[i][0]), new_tokens)
        show = (progress if progress is not None else len(todo) > batch_size) and show_progress()
        started = time.perf_counter()
        with tqdm(total=len(todo), desc=desc, disable=not show) as bar:
            min_shared = prefix.MIN_SHARED if self.share_prefixes else float("inf")
            for n, groups in enumerate(prefix.plan(token_ids, batch_size, min_shared)):
                members = [i for group, _ in groups for i in group]
                outputs = compute(token_ids, groups)
                done.update((todo[i][0], out) for i, out in zip(members, outputs))
                if self.cache is not None:
                    self.cache.put_many([(todo[i][0], self.model_id, todo[i][1], params, store(out))
                                         for i, out in zip(members, outputs)])
                bar.update(len(members))
                if n == 0:
                    announce_long_work(f"{desc} ({self.model_id})", len(members), len(todo),
                                       time.perf_counter() - started, "prompts")
        return [done[k] for k in keys]

    def _check_context(self, token_ids, position, new_tokens: int) -> None:
        """Refuse the call, before any of it is decoded, if a prompt does not fit the model's trained
        positions: beyond them its output is noise, and truncating would cut passages or the question
        unseen. ``position(i)``: the caller's index of the i-th prompt."""
        limit = getattr(auto_config(weights_dir(self.spec, self.dtype)), "max_position_embeddings", None)
        over = [i for i, ids in enumerate(token_ids) if limit and len(ids) + new_tokens > limit]
        if over:
            raise PromptTooLong(
                f"prompt {position(over[0])} is {len(token_ids[over[0]]):,} tokens"
                + (f", plus up to {new_tokens} new ones," if new_tokens else "")
                + f" more than the {limit:,} positions {self.model_id} reads (max_position_embeddings)"
                + (f" ({len(over)} prompts of this call are too long)" if len(over) > 1 else "")
                + "; give it fewer passages or shorter ones (max_words, or the scale's max_passage_words: "
                f"{self.scale.max_passage_words} at {self.scale.name!r})")

    def _option_probs(self, token_ids, groups, option_ids: list[int]) -> list[list[float]]:
        import torch

        with torch.inference_mode():
            _, input_ids, mask, cache = prefix.prefill(self.model, token_ids, groups, self.tokenizer.pad_token_id)
            width = input_ids.shape[1] - cache.get_seq_length()
            logits = self.model(input_ids=input_ids[:, -width:], attention_mask=mask, logits_to_keep=1,
                                position_ids=(mask.cumsum(-1) - 1).clamp(min=0)[:, -width:],
                                **prefix.cache_argument(self.model, cache)).logits[:, -1, option_ids].float()
        return torch.softmax(logits, dim=-1).tolist()

    def _decode(self, token_ids, groups, max_new_tokens: int, stop: Sequence[str]) -> list[str]:
        import torch

        with torch.inference_mode():
            _, input_ids, mask, cache = prefix.prefill(self.model, token_ids, groups, self.tokenizer.pad_token_id)
            if self.reserve_cache:
                prefix.reserve(cache, input_ids.shape[1] - cache.get_seq_length() + max_new_tokens)
            out = self.model.generate(input_ids=input_ids, attention_mask=mask,
                                      **prefix.cache_argument(self.model, cache),
                                      max_new_tokens=max_new_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.pad_token_id,
                                      stop_strings=list(stop) or None, tokenizer=self.tokenizer)
        completions = self.tokenizer.batch_decode(out[:, input_ids.shape[1]:], skip_special_tokens=True)
        return [cut_at_stop(c, stop).strip() for c in completions]


def chat_messages(prompt: Prompt, system_prompt: str | None) -> list[dict]:
    """A prompt as chat messages, the system prompt first unless the prompt brings its own."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if system_prompt and messages[0]["role"] != "system":
        messages = [{"role": "system", "content": system_prompt}, *messages]
    return messages


def check_prompts(prompts, batch_size: int | None) -> None:
    """What every call shares; each prompt must ask something (an empty one is answered all the same)."""
    if batch_size is not None:
        check_knob("batch_size", batch_size, integer=True, low=1)
    if isinstance(prompts, (str, dict)):
        raise TypeError("prompts must be a list of prompts, not a single "
                        f"{type(prompts).__name__}; wrap it in a list")
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            if not prompt.strip():
                raise ValueError(f"prompt {i} is empty ({prompt!r}); drop it or give it a question")
        elif isinstance(prompt, list) and all(isinstance(m, dict) and "role" in m and
                                              isinstance(m.get("content"), str) for m in prompt):
            if not any(m["content"].strip() for m in prompt if m["role"] != "system"):
                raise ValueError(f"prompt {i} has no user or assistant message with any content "
                                 f"({prompt!r:.80}); drop it or give it a question")
        else:
            raise TypeError(f"prompt {i} is a {type(prompt).__name__} ({prompt!r:.60}); expected a str "
                            "or a list of chat messages ({'role': ..., 'content': str})")


def check_strings(name: str, strings, fix: str) -> None:
    """``strings`` must be a list of non-empty strs (a bare str would be split into characters)."""
    if isinstance(strings, str) or not isinstance(strings, Sequence):
        raise TypeError(f"{name} must be a list of strings, got a {type(strings).__name__} ({strings!r:.60})"
                        + ("; wrap it in a list" if isinstance(strings, str) else ""))
    for i, text in enumerate(strings):
        if not isinstance(text, str) or not text:
            error = ValueError if text == "" else TypeError
            raise error(f"{name}[{i}] must be a non-empty str, got {text!r}; {fix}")


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first of the ``stop`` strings in it (all of it when none is)."""
    cut = min((i for s in stop if (i := text.find(s)) >= 0), default=len(text))
    return text[:cut]
