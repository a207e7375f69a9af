"""The arithmetic of MM-GRPO: group-relative advantages, token-level PPO-clip, k3 KL, and how
turns are weighed.

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


#: How a batch's per-token losses become one number (``RLConfig.loss_type``): the weight
#: each turn's token-mean loss gets (the weights of one optimizer step summed to 1).
#: ``episode-mean``: each episode weighs the same, its turns share its weight;
#: ``seq-mean-token-mean``: each turn weighs the same; ``token-mean``: each token does.
LOSS_TYPES = ("episode-mean", "seq-mean-token-mean", "token-mean")


def turn_weights(loss_type: str, episodes: Sequence[str], tokens: Sequence[int]) -> list[float]:
    """The weight of each turn's token-mean loss under ``loss_type``, summing to 1.

    ``episodes[i]`` names the episode turn i belongs to, ``tokens[i]`` its target tokens."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {', '.join(LOSS_TYPES)}, not {loss_type!r}")
    if not episodes:
        return []
    if loss_type == "token-mean":
        raw = [float(max(n, 1)) for n in tokens]
    elif loss_type == "seq-mean-token-mean":
        raw = [1.0] * len(episodes)
    else:
        turns: dict[str, int] = {}
        for e in episodes:
            turns[e] = turns.get(e, 0) + 1
        raw = [1.0 / turns[e] for e in episodes]
    total = sum(raw)
    return [w / total for w in raw]


def _row_mean(values: Any, mask: Any) -> Any:
    """Per row: the mean of ``values`` over its target tokens (0 for a row without one)."""
    return (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)


def ppo_clip_loss(logp: Any, old_logp: Any, advantages: Any, mask: Any, *, clip_low: float = 0.2,
                  clip_high: float = 0.28, ref_logp: Any = None, kl_coef: float = 0.0,
                  entropy: Any = None, entropy_coef: float = 0.0, weights: Any = None,
                  dual_clip: float = 0.0, kl_clamp: float = 10.0) -> tuple[Any, dict[str, float]]:
    """Token-level PPO-clip with asymmetric clipping, optional dual clip, k3 KL and entropy.

    All tensors are [batch, tokens]; ``advantages`` is broadcast per token already; ``mask``
    is 1 on the target tokens. Without ``weights`` the loss is the sum over target tokens
    divided by their count (every token weighs the same). With ``weights`` (one per row,
    see :func:`turn_weights`) it is the weighted sum of each row's token-mean: rows of a
    long episode then share their episode's weight instead of outweighing a short one.

    ``dual_clip`` (c > 1, 0 off) bounds a negative advantage's loss at ``c * |A|``: a token
    whose ratio has grown far while its advantage is negative cannot dominate the step.
    The k3 KL is clamped to ``kl_clamp`` per token, so one outlier cannot blow it up.
    """
    import torch

    mask = mask.to(logp.dtype)
    n = mask.sum().clamp(min=1.0)

    def reduce(values: Any) -> Any:
        if weights is None:
            return (values * mask).sum() / n
        return (_row_mean(values, mask) * weights.to(values.dtype)).sum()

    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    surrogate = torch.minimum(unclipped, clipped)
    dual = None
    if dual_clip:
        dual = (advantages < 0) & (surrogate < dual_clip * advantages)
        surrogate = torch.where(advantages < 0, torch.maximum(surrogate, dual_clip * advantages), surrogate)
    loss = -reduce(surrogate)
    metrics: dict[str, float] = {}
    with torch.no_grad():
        was_clipped = ((ratio < 1.0 - clip_low) & (advantages < 0)) | ((ratio > 1.0 + clip_high) & (advantages > 0))
        metrics["clip_fraction"] = float((was_clipped.to(mask.dtype) * mask).sum() / n)
        if dual is not None:
            metrics["dual_clip_fraction"] = float((dual.to(mask.dtype) * mask).sum() / n)
        metrics["ratio_mean"] = float((ratio * mask).sum() / n)
        # KL(old || new) on tokens the old policy sampled: how far the update has moved
        metrics["kl_old_new"] = float((sampled_kl(old_logp, logp) * mask).sum() / n)
    if ref_logp is not None:
        kl = k3_kl(logp, ref_logp).clamp(max=kl_clamp)
        kl_term = reduce(kl)
        metrics["kl"] = float(((kl * mask).sum() / n).detach())
        if kl_coef:
            loss = loss + kl_coef * kl_term
    if entropy is not None:
        ent = reduce(entropy)
        metrics["entropy"] = float(((entropy * mask).sum() / n).detach())
        if entropy_coef:
            loss = loss - entropy_coef * ent
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def demonstration_loss(logp: Any, mask: Any, weights: Any = None) -> Any:
    """The SFT term for demonstrations: the mean negative log-likelihood of each row's
    target tokens, averaged over rows (or weighted by ``weights``, summing to 1)."""
    mask = mask.to(logp.dtype)
    nll = -_row_mean(logp, mask)
    if weights is None:
        return nll.mean()
    return (nll * weights.to(nll.dtype)).sum()


def k3_kl(logp: Any, ref_logp: Any) -> Any:
    """The k3 estimator of KL(policy || reference) per token: exp(d) - d - 1, d = ref - policy."""
    import torch

    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def sampled_kl(sampler_logp: Any, logp: Any) -> Any:
    """KL(sampler || policy) per token, estimated on tokens the sampler drew: r - 1 - log r,
    r = policy / sampler (k3 with the ratio the right way up for these samples).

    :func:`k3_kl` has the ratio the other way up (it estimates KL(policy || reference) on the
    policy's own samples). Used on the sampler's tokens it grows as exp(drop) where an update
    pushes a sampled token down, so one pushed-down token made an iteration read KL 10 where
    this reads about its log-ratio."""
    import torch

    d = logp - sampler_logp
    return torch.exp(d) - d - 1.0
