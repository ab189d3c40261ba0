"""Reading an OpenAI-compatible server's replies: a field or a message naming what is missing, and
log-probabilities checked and turned into what the kit's operations return (``llm_client``)."""
from __future__ import annotations

import math
from typing import Sequence

from robustkit.models import ServerError, ServerFeatureError

LOGPROB_ROUNDING = 1e-4  # how far above 0 a rounded log 1 may land


def is_logprob(value) -> bool:
    """A log-probability as a server must send it: a real number, finite, at most 0 (and a hair
    above it, where a float rounded log 1)."""
    return (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            and value <= LOGPROB_ROUNDING)


def body_text(err) -> str:
    """An error reply's body, shortened: a JSON message as sent, an HTML page as its text."""
    text = getattr(getattr(err, "response", None), "text", "") or str(err)
    return " ".join(text.split())[:200]


def continuation_flags(continued: bool) -> dict:
    """vLLM's chat-template flags: continue the final (assistant) message, or close it and open a new turn."""
    return {"continue_final_message": continued, "add_generation_prompt": not continued}


def field(reply, name: str, read, *, feature: str | None = None, operation: str | None = None):
    """``read(reply)``, or a message naming the missing field (and the feature, where one was asked for)."""
    try:
        value = read(reply)
    except (AttributeError, IndexError, TypeError):
        value = None
    if value is None:
        if feature:
            raise ServerFeatureError(f"the server's response has no {name}: it does not support {feature}, "
                                     f"which {operation} needs; serve the model with vLLM, or run this role in-process")
        raise ServerError(f"malformed response from the server: no {name} in {str(reply)[:300]}")
    return value


def option_probabilities_from(top: list[tuple[str, float]], options: Sequence[str]) -> tuple[list[float], int]:
    """Options' probabilities renormalised over the options, from one position's top log-probabilities.

    Each option is read as the longest returned token it starts with (the token its reply would
    begin with). Options no returned token begins get 0, and are counted (the second value).
    """
    chosen = {}
    for option in options:
        matches = [(token, lp) for token, lp in top if token and option.startswith(token)]
        if matches:
            chosen[option] = max(matches, key=lambda m: len(m[0]))
    tokens = [token for token, _ in chosen.values()]
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"options {list(options)} share a first token; they cannot be told apart")
    if not chosen:
        raise ServerError(f"none of the options {list(options)} is among the top {len(top)} tokens "
                          f"({[t for t, _ in top][:8]}…); the prompt does not ask for one of them")
    best = max(lp for _, lp in chosen.values())
    weights = [math.exp(chosen[o][1] - best) if o in chosen else 0.0 for o in options]
    return [w / sum(weights) for w in weights], len(options) - len(chosen)


def reply_logprob(offsets: Sequence[int], logprobs: Sequence[float | None], reply_start: int, reply_end: int) -> float:
    """Σ log p over the echoed tokens that spell the reply: those starting in [reply_start, reply_end)."""
    starts = list(offsets)
    if reply_start not in starts:
        raise ValueError(f"no token starts where the reply does (character {reply_start}): the reply merges "
                         "with the end of the prompt when tokenized (leading whitespace?)")
    inside = [lp for start, lp in zip(starts, logprobs) if reply_start <= start < reply_end]
    if not inside or any(lp is None for lp in inside):
        raise ServerError("the server's echoed log-probabilities do not cover the reply's tokens")
    return float(sum(inside))

