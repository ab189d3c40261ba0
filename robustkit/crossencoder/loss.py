"""The cross-encoder's training objectives: CoRM-RAG's hybrid listwise + pointwise loss (§3.3)
and its two halves, as a small documented module."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from robustkit.config import check_knob


class HybridListwiseLoss(nn.Module):
    """Listwise cross-entropy to the teacher's utility distribution plus pointwise BCE.

    For a group of candidates with logits z and utilities (CoRM: the teacher's) s ∈ [0, 1]:

        L_list = − Σᵢ pᵢ · log softmax(z / τ)ᵢ,   pᵢ = sᵢ / Σⱼ sⱼ
        L_point = mean_i BCE(σ(zᵢ), sᵢ)
        L = w_list · mean over groups with Σs > 0 of L_list + w_point · mean over candidates of L_point

    The listwise term teaches the *order* (which evidence is more robust); the pointwise term
    keeps σ(z) calibrated as an absolute score, which Algorithm 1 thresholds with γ. A group whose
    utilities sum to zero has no target distribution, so it is masked out of L_list (it still
    counts in L_point). Padded slots (groups with fewer candidates) are masked out of both.

    Args:
        tau: softmax temperature τ (paper: 1.0; Fig. 6 shows 0.1 and 3.0 are worse).
        listwise_weight, pointwise_weight: w_list and w_point (paper: 1:1). ``pointwise_weight=0``
            is the rank-only ablation; ``listwise_weight=0`` is PA-CE.

    Inputs:
        logits: (G, n) logits; targets: (G, n) utilities; mask: (G, n) bool, True = real;
        denominators: the whole batch's ``denominators`` when these rows are part of it: a
            micro-batch, or one process's share of a step (the counts summed over the processes).

    Returns: the scalar loss (0 for an empty batch).

    Example:
        >>> loss = HybridListwiseLoss(tau=1.0)
        >>> z = torch.tensor([[2.0, 0.0, -1.0]]); s = torch.tensor([[1.0, 0.0, 0.0]])
        >>> float(loss(z, s, torch.ones_like(s, dtype=torch.bool)))  # doctest: +ELLIPSIS
        0.54...
    """

    def __init__(self, tau: float = 1.0, listwise_weight: float = 1.0, pointwise_weight: float = 1.0):
        super().__init__()
        check_knob("tau", tau, low=0, low_open=True)
        if listwise_weight < 0 or pointwise_weight < 0 or listwise_weight + pointwise_weight == 0:
            raise ValueError("loss weights must be >= 0 and not both zero, got "
                             f"listwise={listwise_weight}, pointwise={pointwise_weight}")
        self.tau, self.listwise_weight, self.pointwise_weight = tau, listwise_weight, pointwise_weight

    def denominators(self, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """(groups with Σs > 0, real candidates) of a batch: the two means' denominators, counted
        (``forward`` divides by at least 1). A micro-batch's loss taken over its whole batch's
        denominators is its share of the batch's loss, so micro-batch losses (and gradients) add
        up to the batch's; so do the losses of processes that each train on a share of one step,
        over the step's counts summed over the processes."""
        totals = (targets.float() * mask).sum(dim=1)
        return torch.stack([(totals > 0).float().sum(), mask.float().sum()])

    def forward(self, logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor,
                denominators: torch.Tensor | None = None) -> torch.Tensor:
        if logits.shape != targets.shape or logits.shape != mask.shape:
            raise ValueError(f"logits {tuple(logits.shape)}, targets {tuple(targets.shape)} and "
                             f"mask {tuple(mask.shape)} must have the same shape (groups, candidates)")
        if logits.numel() == 0:
            return logits.sum() * 0.0
        # written without data-dependent branches or boolean indexing: no host-device sync
        if denominators is None:
            denominators = self.denominators(targets, mask)
        denominators = denominators.clamp_min(1)  # an empty mean is 0, not 0 / 0
        logits, targets, weight = logits.float(), targets.float() * mask, mask.float()
        loss = logits.new_zeros(())
        if self.listwise_weight:
            totals = targets.sum(dim=1)
            valid = (totals > 0).float()
            log_probs = F.log_softmax((logits / self.tau).masked_fill(~mask, -1e4), dim=1)
            per_group = -(targets / totals.clamp_min(1e-12).unsqueeze(1) * log_probs).sum(dim=1)
            loss = loss + self.listwise_weight * (per_group * valid).sum() / denominators[0]
        if self.pointwise_weight:
            bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
            loss = loss + self.pointwise_weight * (bce * weight).sum() / denominators[1]
        return loss


def make_loss(kind: str, tau: float = 1.0) -> HybridListwiseLoss:
    """``hybrid`` (CoRM critic), ``pointwise`` (PA-CE and the relevance CE), ``listwise`` (rank-only,
    and the relevance warm start)."""
    weights = {"hybrid": (1.0, 1.0), "pointwise": (0.0, 1.0), "listwise": (1.0, 0.0)}
    if kind not in weights:
        raise ValueError(f"unknown loss {kind!r}; expected one of {sorted(weights)}")
    return HybridListwiseLoss(tau, *weights[kind])
