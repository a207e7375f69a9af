"""The arithmetic of MM-GRPO: group-relative advantages, token-level PPO-clip, k3 KL.

Pure functions over tensors and lists, so each can be checked against a hand computation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence


@dataclass
class GroupStats:
    groups: int
    kept_groups: int
    dropped_zero_variance: int
    dropped_infra: int

    @property
    def valid_fraction(self) -> float:
        return self.kept_groups / self.groups if self.groups else 0.0


def group_advantages(groups: Sequence[str], rewards: Sequence[Optional[float]],
                     eps: float = 1e-6) -> tuple[list[Optional[float]], GroupStats]:
    """Per episode: (reward - group mean) / group std, or None when it must not train.

    ``rewards[i]`` is None for an episode that ended in an infrastructure error: it is
    dropped before the group's statistics (never a zero-reward signal). A group whose
    remaining rewards are all equal carries no signal and is dropped whole. The std is the
    population standard deviation of the remaining rewards.
    """
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    out: list[Optional[float]] = [None] * len(rewards)
    kept = zero = 0
    infra = sum(1 for r in rewards if r is None)
    for members in by_group.values():
        valid = [i for i in members if rewards[i] is not None]
        values = [float(rewards[i]) for i in valid]  # type: ignore[arg-type]
        if len(values) < 2:
            zero += 1
            continue
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        if std <= max(eps, 1e-12):
            zero += 1
            continue
        kept += 1
        for i, v in zip(valid, values):
            out[i] = (v - mean) / (std + eps)
    return out, GroupStats(groups=len(by_group), kept_groups=kept, dropped_zero_variance=zero, dropped_infra=infra)


def ppo_clip_loss(logp: Any, old_logp: Any, advantages: Any, mask: Any, *, clip_low: float = 0.2,
                  clip_high: float = 0.28, ref_logp: Any = None, kl_coef: float = 0.0,
                  entropy: Any = None, entropy_coef: float = 0.0) -> tuple[Any, dict[str, float]]:
    """Token-level PPO-clip with asymmetric clipping, optional k3 KL and entropy bonus.

    All tensors are [batch, tokens]; ``advantages`` is broadcast per token already; ``mask``
    is 1 on the target tokens. The loss is the sum over target tokens divided by their
    count (every token weighs the same, whatever its sequence's length).
    """
    import torch

    mask = mask.to(logp.dtype)
    n = mask.sum().clamp(min=1.0)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    surrogate = torch.minimum(unclipped, clipped)
    loss = -(surrogate * mask).sum() / n
    metrics: dict[str, float] = {}
    with torch.no_grad():
        was_clipped = ((ratio < 1.0 - clip_low) & (advantages < 0)) | ((ratio > 1.0 + clip_high) & (advantages > 0))
        metrics["clip_fraction"] = float((was_clipped.to(mask.dtype) * mask).sum() / n)
        metrics["ratio_mean"] = float((ratio * mask).sum() / n)
    if ref_logp is not None:
        kl = k3_kl(logp, ref_logp)
        kl_mean = (kl * mask).sum() / n
        metrics["kl"] = float(kl_mean.detach())
        if kl_coef:
            loss = loss + kl_coef * kl_mean
    if entropy is not None:
        ent = (entropy * mask).sum() / n
        metrics["entropy"] = float(ent.detach())
        if entropy_coef:
            loss = loss - entropy_coef * ent
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def k3_kl(logp: Any, ref_logp: Any) -> Any:
    """The k3 estimator of KL(policy || reference) per token: exp(d) - d - 1, d = ref - policy."""
    import torch

    d = ref_logp - logp
    return torch.exp(d) - d - 1.0
