"""Shared-prefix batching: a prompt prefix's key/value cache computed once for every prompt that
starts with it.

The kit's prompts put the passage first (``reader.reader_prompt``, LLM-rerank), so the K
perturbed questions a teacher asks about one passage, or the clean and biased versions of one
question that retrieve the same passage, share everything up to the question. ``plan`` groups
such prompts by their longest common token prefix and packs the groups into batches;
``prefill`` runs each group's prefix once, copies its cache to every member and returns the
members' full inputs, so ``model.generate`` (or one more forward pass) only computes the
suffixes. Prompts are token-identical to the unshared ones; positions skip the padding, so the
result is the same computation up to floating-point summation order.

``reserve`` then gives the cache room for the tokens still to come. transformers' growing cache
concatenates every layer's keys and values at each decoding step, which copies the whole cache
per token, most of a teacher batch's decoding time on a CPU. A reserved layer writes each
step in place and hands attention the same values in the same shapes.
"""
from __future__ import annotations

from typing import Sequence

from robustkit import memo

Group = tuple[list[int], int]  # (indices of the prompts, length of the prefix they share)
MIN_SHARED = 48  # shorter common prefixes are not worth a separate prefill pass


def plan(token_ids: Sequence[Sequence[int]], batch_size: int,
         min_shared: float = MIN_SHARED) -> list[list[Group]]:
    """Batches of groups: prompts sharing at least ``min_shared`` leading tokens form one group
    (at most ``batch_size`` prompts); groups are ordered by length, longest first, and packed
    into batches of at most ``batch_size`` prompts without being split."""
    order = sorted(range(len(token_ids)), key=lambda i: token_ids[i])  # sharers become neighbours
    groups: list[Group] = []
    for i in order:
        if groups and len(groups[-1][0]) < batch_size:
            members, shared = groups[-1]
            common = min(shared, _common_prefix(token_ids[members[0]], token_ids[i]), len(token_ids[i]) - 1)
            if common >= min_shared:
                groups[-1] = (members + [i], common)
                continue
        groups.append(([i], len(token_ids[i]) - 1))  # alone: all but the last token is "prefix"
    groups.sort(key=lambda g: (-len(token_ids[g[0][0]]), g[0][0]))
    batches: list[list[Group]] = []
    for group in groups:
        if not batches or sum(len(m) for m, _ in batches[-1]) + len(group[0]) > batch_size:
            batches.append([])
        batches[-1].append(group)
    return batches


def prefill(model, token_ids: Sequence[Sequence[int]], groups: list[Group], pad_id: int):
    """Run the groups' prefixes once and lay out their members' full prompts over the result.

    Returns ``(members, input_ids, attention_mask, cache)``: the prompt indices in row order,
    the rows ``[padding, prefix, padding, suffix]`` with their mask, and the prefix cache with
    one copy per row. ``model.generate(input_ids, attention_mask=..., **cache_argument(model,
    cache))`` then feeds only the suffixes.
    """
    import torch
    from transformers import DynamicCache

    device = model.device
    longest = max(length for _, length in groups)
    prefix = torch.full((len(groups), longest), pad_id, dtype=torch.long)
    prefix_mask = torch.zeros_like(prefix)
    for row, (members, length) in enumerate(groups):
        prefix[row, longest - length:] = torch.tensor(token_ids[members[0]][:length])
        prefix_mask[row, longest - length:] = 1
    prefix, prefix_mask = prefix.to(device), prefix_mask.to(device)
    cache = DynamicCache()
    model(input_ids=prefix, attention_mask=prefix_mask, use_cache=True, logits_to_keep=1,
          position_ids=(prefix_mask.cumsum(-1) - 1).clamp(min=0), **cache_argument(model, cache))
    members = [i for group, _ in groups for i in group]
    owner = torch.tensor([row for row, (group, _) in enumerate(groups) for _ in group], device=device)
    cache.reorder_cache(owner)
    suffixes = [token_ids[i][length:] for group, length in groups for i in group]
    width = max(len(s) for s in suffixes)
    suffix = torch.full((len(members), width), pad_id, dtype=torch.long)
    suffix_mask = torch.zeros_like(suffix)
    for row, tokens in enumerate(suffixes):
        suffix[row, width - len(tokens):] = torch.tensor(tokens)
        suffix_mask[row, width - len(tokens):] = 1
    input_ids = torch.cat([prefix[owner], suffix.to(device)], dim=1)
    attention_mask = torch.cat([prefix_mask[owner], suffix_mask.to(device)], dim=1)
    return members, input_ids, attention_mask, cache


def reserve(cache, extra_tokens: int) -> None:
    """Give every layer of a filled ``DynamicCache`` room for ``extra_tokens`` more positions
    (the suffix and the new tokens of ``generate``), so that decoding stops copying the cache."""
    cache.layers = [_reserved_layer_class()(layer, extra_tokens) for layer in cache.layers]


@memo.cached(1)  # one class, defined when first needed (transformers loads late)
def _reserved_layer_class():
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys and values are views of a buffer with spare positions:
        ``update`` writes into the buffer instead of concatenating, and returns tensors equal in
        shape and value to what concatenation would have returned."""

        def __init__(self, filled: DynamicLayer, extra_tokens: int):
            super().__init__()
            batch, heads, length, dim = filled.keys.shape
            self.key_buffer = filled.keys.new_empty(batch, heads, length + extra_tokens, dim)
            self.value_buffer = filled.values.new_empty(batch, heads, length + extra_tokens, filled.values.shape[-1])
            self.key_buffer[:, :, :length] = filled.keys
            self.value_buffer[:, :, :length] = filled.values
            self.keys, self.values = self.key_buffer[:, :, :length], self.value_buffer[:, :, :length]
            self.device, self.is_initialized = filled.keys.device, True

        def update(self, key_states, value_states, *args, **kwargs):
            start, end = self.keys.shape[-2], self.keys.shape[-2] + key_states.shape[-2]
            if end > self.key_buffer.shape[-2]:
                raise RuntimeError(f"reserved KV cache holds {self.key_buffer.shape[-2]} positions; "
                                   f"{end} were asked for (reserve more extra_tokens)")
            self.key_buffer[:, :, start:end] = key_states
            self.value_buffer[:, :, start:end] = value_states
            self.keys, self.values = self.key_buffer[:, :, :end], self.value_buffer[:, :, :end]
            return self.keys, self.values

    return ReservedLayer


def cache_argument(model, cache) -> dict:
    """The keyword a model's ``forward``/``generate`` takes a KV cache by: ``cache`` in
    transformers ≥ 5.24, ``past_key_values`` before."""
    import inspect

    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    return {name: cache}


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
