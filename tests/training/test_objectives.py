"""MM-GRPO's arithmetic against hand computations, and the reference model."""

from __future__ import annotations

import math

import pytest

from owrl_sdk.contract.plugins import Plugins

torch = pytest.importorskip("torch")

from owrl_train.objectives import group_advantages, k3_kl, ppo_clip_loss  # noqa: E402


def test_group_advantages_and_filters():
    groups = ["a", "a", "a", "b", "b", "c", "c", "c"]
    rewards = [1.0, 0.0, None, 1.0, 1.0, 0.0, 1.0, 0.5]
    adv, stats = group_advantages(groups, rewards, eps=0.0)
    # group a: the infra episode is dropped first, then mean 0.5, std 0.5
    assert adv[:3] == [1.0, -1.0, None]
    # group b: zero variance, dropped whole
    assert adv[3:5] == [None, None]
    # group c: mean 0.5, population std sqrt(1/6)
    s = math.sqrt(((0 - 0.5) ** 2 + (1 - 0.5) ** 2 + 0) / 3)
    assert adv[5:] == pytest.approx([-0.5 / s, 0.5 / s, 0.0])
    assert (stats.groups, stats.kept_groups, stats.dropped_zero_variance, stats.dropped_infra) == (3, 2, 1, 1)
    assert stats.valid_fraction == pytest.approx(2 / 3)


def test_a_lone_survivor_is_no_group():
    adv, stats = group_advantages(["a", "a"], [1.0, None])
    assert adv == [None, None] and stats.kept_groups == 0


def test_ppo_clip_loss_by_hand():
    logp = torch.log(torch.tensor([[0.5, 0.9, 0.2], [0.3, 0.3, 0.3]]))
    old = torch.log(torch.tensor([[0.4, 0.5, 0.2], [0.6, 0.3, 0.3]]))
    adv = torch.tensor([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    loss, m = ppo_clip_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    # ratios: 1.25 (inside), 1.8 (clipped to 1.28, A>0), masked, 0.5 (A<0: min picks the clipped 0.8*-2),
    # 1.0, 1.0
    terms = [1.25 * 1, 1.28 * 1, 0.8 * -2, 1.0 * -2, 1.0 * -2]
    assert float(loss) == pytest.approx(-sum(terms) / 5, rel=1e-5)
    assert m["clip_fraction"] == pytest.approx(2 / 5)


def test_kl_and_entropy_terms():
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    ref = torch.log(torch.tensor([[0.25, 0.25]]))
    mask = torch.ones(1, 2)
    d = math.log(0.25) - math.log(0.5)
    k3 = math.exp(d) - d - 1
    assert float(k3_kl(logp, ref)[0, 0]) == pytest.approx(k3)
    assert float(k3_kl(ref, ref).abs().max()) == 0.0
    ent = torch.tensor([[2.0, 4.0]])
    loss, m = ppo_clip_loss(logp, logp, torch.zeros(1, 2), mask, ref_logp=ref, kl_coef=0.5, entropy=ent, entropy_coef=0.1)
    assert float(loss) == pytest.approx(0.5 * k3 / 2 - 0.1 * 3.0, rel=1e-5)
    assert m["kl"] == pytest.approx(k3 / 2, rel=1e-5)


def test_reference_is_the_base_model(trainable, tiny_qwen3):
    """The KL reference is the adapter disabled: it matches a freshly loaded base model, and
    the KL of the reference against itself is exactly zero, while a trained adapter's is not."""
    from owrl_openwebrl.prompt import Prompt
    from owrl_train.data import Sample
    from owrl_train.model import TrainableVL

    sample = Sample(prompt=Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": "Task: press green"}]}]),
                    target='<tool_call>{"name": "done", "arguments": {}}</tool_call>')
    batch = trainable.encode([sample])
    with torch.no_grad():
        for p in trainable.trainable_parameters():
            p.add_(torch.randn_like(p) * 0.5)  # an adapter that changes the output
        logp, mask, _ = trainable.token_logprobs(batch)
        with trainable.reference():
            ref, _, _ = trainable.token_logprobs(batch)
        fresh = TrainableVL(str(tiny_qwen3), catalogue=Plugins().catalogue, lora_r=8, seed=1)  # LoRA B starts at zero: the base model
        base, _, _ = fresh.token_logprobs(fresh.encode([sample]))
    assert torch.allclose(ref, base, atol=1e-5)
    assert float((k3_kl(ref, ref) * mask).sum()) == 0.0
    assert float((k3_kl(logp, ref) * mask).sum()) > 1e-3
