"""Each mechanism of the RL trainer pinned on a tiny model: the anchor, the sampling
temperature, unreadable turns, episode weights, the trust region, the alarms, the names.

The toy environment (owrl_train.toy: four buttons in memory) runs the real episode loop,
policy and judge in seconds; MiniWoB pages are for the browser tests in
test_bench_learning.py.
"""

from __future__ import annotations

import asyncio
import json
import math
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from owrl_sdk.contract.plugins import Plugins  # noqa: E402
from owrl_sdk.formats.documents import json_lines  # noqa: E402
from owrl_sdk.errors import ConfigError  # noqa: E402
from owrl_sdk.types import Judgement, Observation, Outcome, PolicyInfo, Step, ToolCall, Trajectory, Turn  # noqa: E402
from owrl_train.data import Sample, trajectory_samples  # noqa: E402
from owrl_train.model import TrainableVL, answer_lengths, target_ids  # noqa: E402
from owrl_train.objectives import ppo_clip_loss, turn_weights  # noqa: E402
from owrl_train.rl import RLConfig, RLRun  # noqa: E402
from owrl_train.toy import TASK, TOOLS, InMemoryRollouts  # noqa: E402

SAMPLING = {"temperature": 0.7, "top_p": 1.0, "top_k": 0, "max_new_tokens": 12}


def model_of(ckpt, seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TrainableVL(str(ckpt), catalogue=Plugins().catalogue, lora_r=8, seed=seed)


def perturb(model, scale=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)


def config(ckpt, out, **kw):
    base = dict(model=str(ckpt), out=out, iterations=1, tasks_per_iteration=1, group_size=4, lr=1e-2, minibatch=4,
                text_mode=True, curriculum=[{"max_steps": 1}], sampling=dict(SAMPLING), sampler="uniform", seed=0,
                practice_share=0.0, truncated="penalize")  # 12 tokens cut every answer: masked, none would train
    base.update(kw)
    return RLConfig(**base)


def run_of(cfg, model, plugins, settings):
    return RLRun(cfg, InMemoryRollouts(plugins, settings), settings=settings, plugins=plugins, tasks=[TASK],
                 model=model)


def press(colour):
    return f'<tool_call>{{"name": "press_{colour}", "arguments": {{}}}}</tool_call>'


def toy_trajectory(turns, success, tid="t"):
    steps = [Step(index=i, observation=Observation(url="mem://buttons", title="Buttons", aria='- button "green"'),
                  turn=turn) for i, turn in enumerate(turns)]
    return Trajectory(id=tid, task=TASK, policy=PolicyInfo(name="openwebrl"), steps=steps,
                      outcome=Outcome(status="success" if success else "fail"),
                      judgements=[Judgement(judge="benchmark", score=float(success), success=success)])


def readable(colour):
    return Turn(raw=press(colour), calls=[ToolCall(name=f"press_{colour}", arguments={})])


def unreadable(text="<tool_call>{oops"):
    return Turn(raw=text, parse_error="not JSON")


def sample_batch(model, text):
    from owrl_openwebrl.prompt import Prompt

    s = Sample(prompt=Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": "Press green"}]}]),
               target=text)
    return s, model.encode([s])


# ------------------------------------------------------------------ the anchor


def test_the_reference_is_the_adapter_rl_starts_from_not_the_base(tiny_qwen3, tmp_path, plugins, settings):
    """RLRun freezes the starting adapter (an SFT adapter, here a perturbed one) as its KL
    reference: reference() scores as the starting adapter did, not as the base model, and
    keeps doing so after the adapter moves; the copy is saved and read back on resume."""
    model = model_of(tiny_qwen3)
    perturb(model)
    _, batch = sample_batch(model, press("green"))
    with torch.no_grad():
        start, mask, _ = model.token_logprobs(batch)
        with model.model.disable_adapter():
            base, _, _ = model.token_logprobs(batch)
    cfg = config(tiny_qwen3, tmp_path / "rl")
    run_of(cfg, model, plugins, settings)
    assert (tmp_path / "rl" / "reference" / "adapter_model.safetensors").is_file()
    perturb(model, seed=1)  # training moves the adapter
    with torch.no_grad():
        moved, _, _ = model.token_logprobs(batch)
        with model.reference():
            ref, _, _ = model.token_logprobs(batch)
        after, _, _ = model.token_logprobs(batch)
    assert torch.allclose(ref, start, atol=1e-5)
    assert not torch.allclose(ref, base, atol=1e-3)  # the base model is not the anchor
    assert torch.allclose(after, moved)  # the swap put the trained weights back
    assert model.adapter_drift() > 0
    # a resumed run reads the frozen copy, whatever the adapter it loads
    other = model_of(tiny_qwen3, seed=3)
    other.load_reference(tmp_path / "rl" / "reference" / "adapter_model.safetensors")
    with torch.no_grad(), other.reference():
        again, _, _ = other.token_logprobs(other.encode([sample_batch(other, press("green"))[0]]))
    assert torch.allclose(again, start, atol=1e-5)


def test_the_kl_to_the_reference_is_logged_at_zero_and_pulls_when_set(tiny_qwen3, tmp_path, plugins, settings):
    model = model_of(tiny_qwen3)
    perturb(model)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", kl_coef=0.0, target_kl=0.0), model, plugins, settings)
    first = asyncio.run(run.run())[0].metrics
    assert "kl" in first and first["kl"] >= 0.0 and "adapter_drift" in first


# ------------------------------------------------------------------ what was sampled


def test_log_probabilities_are_taken_at_the_sampling_temperature(trainable):
    _, batch = sample_batch(trainable, press("green"))
    with torch.no_grad():
        at1, mask, _ = trainable.token_logprobs(batch)
        at05, _, ent05 = trainable.token_logprobs(batch, temperature=0.5, with_entropy=True)
        per_row, _, _ = trainable.token_logprobs(batch, temperature=[0.5])
        inputs = {k: v for k, v in batch.items() if k != "target_mask"}
        logits = trainable.model(**inputs).logits.float()[:, :-1]
        targets = inputs["input_ids"][:, 1:]
        keep = batch["target_mask"][:, 1:].sum(0) > 0
        by_hand = torch.log_softmax(logits / 0.5, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)[:, keep]
    assert torch.allclose(at05, by_hand, atol=1e-4) and torch.allclose(per_row, at05)
    assert not torch.allclose(at05, at1, atol=1e-3)
    assert ent05 is not None


def test_the_update_scores_at_the_rollouts_temperature_and_its_first_ratio_is_one(tiny_qwen3, tmp_path, plugins,
                                                                                  settings):
    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", optimizer_steps=1), model, plugins, settings)
    seen = []
    real = model.token_logprobs

    def watched(batch, with_entropy=False, temperature=1.0):
        seen.append(temperature)
        return real(batch, with_entropy=with_entropy, temperature=temperature)

    model.token_logprobs = watched
    samples = run._samples(toy_trajectory([readable("green")], True, "a"), 1.0) + \
        run._samples(toy_trajectory([readable("red")], False, "b"), -1.0)
    metrics = run.optimizer.optimize(samples)
    assert seen and all(t == [0.7, 0.7] for t in seen)
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # one step, scored as it was sampled


def test_the_sampled_ids_are_the_targets_and_a_cut_answer_gets_no_end_token(trainable):
    tok = trainable.tokenizer
    text = press("green")
    plain = target_ids(tok, Sample(prompt=None, target=text))
    assert plain[-1] == tok.eos_token_id
    cut = target_ids(tok, Sample(prompt=None, target=text, meta={"truncated": True}))
    assert cut == plain[:-1]
    sampled = [5, 6, 7]
    assert target_ids(tok, Sample(prompt=None, target="ignored", meta={"token_ids": sampled})) == sampled
    # the trajectory keeps them (usage.completion_ids) and the sample carries them
    turn = readable("green")
    turn.usage = {"completion_ids": sampled, "finish_reason": "length"}
    [s] = trajectory_samples(toy_trajectory([turn], False), tools=TOOLS, text_mode=True,
                             catalogue=Plugins().catalogue)
    assert s.meta["token_ids"] == sampled and s.meta["truncated"] is True


def test_a_policy_keeps_what_it_sampled_in_the_trajectory(tiny_qwen3, tmp_path, plugins, settings):
    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", keep_rollouts=True), model, plugins, settings)
    trajectories = asyncio.run(run._rollouts(0))
    usage = trajectories[0].steps[0].turn.usage
    assert usage["completion_ids"] and usage["finish_reason"] in ("stop", "length")
    ids = usage["completion_ids"]
    assert usage["completion_tokens"] == len(ids)
    assert (usage["finish_reason"] == "stop") == (ids[-1] == model.tokenizer.eos_token_id)


# ------------------------------------------------------------------ every turn, every episode


def test_unreadable_turns_get_their_own_negative_advantage_and_a_gradient(tiny_qwen3, tmp_path, plugins, settings):
    """An unreadable turn trains with unreadable_advantage even where its group has no
    variance, and the update lowers its likelihood; the readable turns of its episode keep
    the episode's advantage."""
    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", optimizer_steps=1, target_kl=0.0, kl_coef=0.0), model, plugins,
                 settings)
    traj = toy_trajectory([unreadable(), readable("green")], True)
    samples = run._samples(traj, 0.8)
    assert [s.advantage for s in samples] == [-1.0, 0.8] and samples[0].meta["unreadable"]
    zero_variance = run._samples(toy_trajectory([unreadable()], False), None)
    assert [s.advantage for s in zero_variance] == [-1.0]
    s, batch = sample_batch(model, unreadable().raw)
    s.advantage = -1.0
    s.meta.update(episode="x", unreadable=True)
    with torch.no_grad():
        before = float(model.token_logprobs(batch)[0].sum())
    metrics = run.optimizer.optimize([s])
    with torch.no_grad():
        after = float(model.token_logprobs(batch)[0].sum())
    assert metrics["grad_norm"] > 0 and after < before
    # the old rule: not trained, and the episode takes the penalty
    old = run_of(config(tiny_qwen3, tmp_path / "old", unreadable="episode"), model, plugins, settings)
    assert [x.advantage for x in old._samples(traj, 0.8)] == [0.8]


def test_one_unreadable_turn_no_longer_makes_a_later_success_a_failure(tiny_qwen3, tmp_path, plugins, settings):
    from builtin_judges.rules import CompositeJudge
    from owrl_sdk.config import Settings

    traj = toy_trajectory([unreadable(), readable("green")], True)
    traj.judgements = []
    traj.metadata["suite_check"] = {"score": 1.0, "success": True}
    gated = asyncio.run(CompositeJudge(Settings(plugins={"composite": {"penalty": -1.0}})).judge(traj))
    assert gated.score == -1.0 and gated.details["inner"]["success"] is True
    traj.judgements = [gated]
    model = model_of(tiny_qwen3)
    turn_rule = run_of(config(tiny_qwen3, tmp_path / "a"), model, plugins, settings)
    episode_rule = run_of(config(tiny_qwen3, tmp_path / "b", unreadable="episode"), model, plugins, settings)
    assert turn_rule.reward.reward(turn_rule._scored(traj)) == 1.0
    assert episode_rule.reward.reward(episode_rule._scored(traj)) == -1.0


def test_every_episode_weighs_the_same_whatever_its_length():
    # a 3-turn failure and a 1-turn success: each episode's turns share its weight
    assert turn_weights("episode-mean", ["f", "f", "f", "s"], [5, 5, 5, 5]) == pytest.approx([1 / 6] * 3 + [1 / 2])
    assert turn_weights("seq-mean-token-mean", ["f", "f", "f", "s"], [5, 5, 5, 5]) == pytest.approx([0.25] * 4)
    assert turn_weights("token-mean", ["f", "s"], [3, 1]) == pytest.approx([0.75, 0.25])
    with pytest.raises(ValueError):
        turn_weights("sum", ["a"], [1])
    # by hand: equal and opposite advantages over the two episodes net to zero
    logp = torch.zeros(4, 2)
    adv = torch.tensor([[-1.0] * 2] * 3 + [[1.0] * 2])
    mask = torch.ones(4, 2)
    w = torch.tensor(turn_weights("episode-mean", ["f", "f", "f", "s"], [2, 2, 2, 2]))
    loss, _ = ppo_clip_loss(logp, logp, adv, mask, weights=w)
    assert float(loss) == pytest.approx(0.0, abs=1e-6)
    token_mean, _ = ppo_clip_loss(logp, logp, adv, mask)  # the old weighting: the long failure wins
    assert float(token_mean) == pytest.approx(0.5)


def test_dual_clip_bounds_a_negative_advantages_loss():
    logp = torch.log(torch.tensor([[5.0]]))  # ratio 5 against an old probability of 1
    old = torch.zeros(1, 1)
    loss, m = ppo_clip_loss(logp, old, torch.tensor([[-1.0]]), torch.ones(1, 1), dual_clip=3.0)
    assert float(loss) == pytest.approx(3.0) and m["dual_clip_fraction"] == 1.0
    unbounded, _ = ppo_clip_loss(logp, old, torch.tensor([[-1.0]]), torch.ones(1, 1))
    assert float(unbounded) == pytest.approx(5.0)


def test_turns_are_shuffled_across_groups_into_accumulated_steps(tiny_qwen3, tmp_path, plugins, settings):
    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", optimizer_steps=2, minibatch=3), model, plugins, settings)
    samples = [Sample(prompt=None, target=str(i), meta={"episode": f"g{i // 4}"}) for i in range(8)]
    plan = run.optimizer.plan(samples, iteration=0)
    assert len(plan) == 2 and [len(mb) for step in plan for mb in step] == [3, 1, 3, 1]
    flat = [s.target for step in plan for mb in step for s in mb]
    assert sorted(flat) == [str(i) for i in range(8)] and flat != [str(i) for i in range(8)]
    first_step = {s.meta["episode"] for mb in plan[0] for s in mb}
    assert first_step == {"g0", "g1"}  # a step no longer holds one group's turns only
    assert [s.target for step in run.optimizer.plan(samples, 0) for mb in step for s in mb] == flat  # seeded
    run.cfg.optimizer_steps, run.cfg.shuffle = 0, False  # the old plan: a step per minibatch, in order
    assert [[s.target for s in mb] for step in run.optimizer.plan(samples) for mb in step] == [
        ["0", "1", "2"], ["3", "4", "5"], ["6", "7"]]


@pytest.mark.slow
def test_the_trust_region_stops_an_iterations_updates(tiny_qwen3, tmp_path, plugins, settings):
    model = model_of(tiny_qwen3)
    samples = []
    run = run_of(config(tiny_qwen3, tmp_path / "rl", optimizer_steps=4, minibatch=1, lr=5e-2, target_kl=1e-9),
                 model, plugins, settings)
    for i, colour in enumerate(["green", "red", "blue", "yellow"]):
        samples += run._samples(toy_trajectory([readable(colour)], colour == "green", str(i)),
                                1.0 if colour == "green" else -1 / 3)
    start = [p.detach().clone() for p in model.trainable_parameters()]
    run.cfg.kl_backtracks = 0  # no shrinking: a step past the region is undone and the updates stop
    m = run.optimizer.optimize(samples)
    assert m["optimizer_steps"] == 0.0 and m["steps_undone"] == 1.0 and m["stopped_at_target_kl"] == 1.0
    assert all(torch.equal(p, p0) for p, p0 in zip(model.trainable_parameters(), start))
    run.cfg.kl_backtracks = 4  # shrunk instead: each step kept lies within the region
    m = run.optimizer.optimize(samples)
    assert m["kl_backtracks"] >= m["optimizer_steps"] >= 1.0 and m["kl_old_new"] <= 1e-9
    run.cfg.target_kl = 0.0
    assert run.optimizer.optimize(samples)["optimizer_steps"] == 4.0


def test_a_step_past_the_trust_region_is_shrunk_until_it_fits(tiny_qwen3, tmp_path, plugins, settings):
    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", optimizer_steps=1, minibatch=4, lr=5e-2, target_kl=0.0),
                 model, plugins, settings)
    samples = []
    for i, colour in enumerate(["green", "red", "blue", "yellow"]):
        samples += run._samples(toy_trajectory([readable(colour)], colour == "green", str(i)),
                                1.0 if colour == "green" else -1 / 3)
    start = [p.detach().clone() for p in model.trainable_parameters()]
    run.optimizer.optimize(samples)  # one full step, no region: how far it goes
    rows = [[(samples, model.encode(samples), *_sampler(model, samples, start))]]
    full = run.optimizer._kl_from_sampler(rows)
    assert full > 1e-4
    with torch.no_grad():
        for p, p0 in zip(model.trainable_parameters(), start):
            p.copy_(p0)
    run.optimizer.torch_optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=5e-2)
    run.cfg.target_kl = full / 3  # the full step does not fit; a half or a quarter of it does
    m = run.optimizer.optimize(samples)
    assert m["optimizer_steps"] == 1.0 and m["steps_undone"] == 0.0 and m["kl_backtracks"] >= 1.0
    assert 0.0 < m["kl_old_new"] <= full / 3
    assert not all(torch.equal(p, p0) for p, p0 in zip(model.trainable_parameters(), start))


def test_the_learning_rate_follows_the_kl_of_an_iterations_first_step(tiny_qwen3, tmp_path, plugins, settings):
    import math

    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", optimizer_steps=2, minibatch=4, lr=5e-2, target_kl=1e-6),
                 model, plugins, settings)
    samples = []
    for i, colour in enumerate(["green", "red", "blue", "yellow"]):
        samples += run._samples(toy_trajectory([readable(colour)], colour == "green", str(i)),
                                1.0 if colour == "green" else -1 / 3)
    rate = lambda: run.optimizer.torch_optimizer.param_groups[0]["lr"]  # noqa: E731
    m = run.optimizer.optimize(samples)
    assert m["lr"] == 5e-2 and m["kl_first_step"] > 1e-6  # the rate it ran at; its first step passed the region
    assert rate() == 5e-2 * 0.25  # far past: the largest cut an iteration makes
    run.cfg.target_kl = 1.0
    first = run.optimizer.optimize(samples)["kl_first_step"]
    aim = 1.0 / 2  # target_kl over the optimizer steps
    assert rate() == min(5e-2, 5e-2 * 0.25 * min(1.5, max(0.25, math.sqrt(aim / first))))
    run.optimizer.torch_optimizer.param_groups[0]["lr"] = 4e-2
    run.cfg.target_kl = 1e3  # far inside the region: the rate grows, never past lr
    assert run.optimizer.optimize(samples)["lr"] == 4e-2 and rate() == 5e-2
    run.cfg.adaptive_lr, run.cfg.target_kl = False, 1e-6  # off: the rate stays what it is
    run.optimizer.optimize(samples)
    assert rate() == 5e-2


def test_a_demonstration_only_update_is_held_by_the_trust_region_too(tiny_qwen3, tmp_path, plugins, settings):
    # with Adam, demo_coef does not make the step small when the demonstration is the only term
    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", optimizer_steps=1, minibatch=4, lr=5e-2, target_kl=1e-9),
                 model, plugins, settings)
    rescue = toy_trajectory([readable("green")], True, "demo")
    rescue.metadata["rescued"] = "demo"  # a rescue demonstration: trained through the SFT term only
    samples = run._samples(rescue, None)
    assert samples and all(s.meta.get("demo") for s in samples)
    start = [p.detach().clone() for p in model.trainable_parameters()]
    run.cfg.kl_backtracks = 0
    m = run.optimizer.optimize(samples)
    assert m["demo_samples"] == float(len(samples)) and m["steps_undone"] == 1.0
    assert all(torch.equal(p, p0) for p, p0 in zip(model.trainable_parameters(), start))
    run.cfg.target_kl = 0.0  # without the region the same update moves the adapter
    assert run.optimizer.optimize(samples)["optimizer_steps"] == 1.0
    assert not all(torch.equal(p, p0) for p, p0 in zip(model.trainable_parameters(), start))


# ------------------------------------------------------------------ the anchor set


def write_runs(folder, trajectories):
    """Trajectories as a runs folder (``<run>/trajectory.json``), as ``anchor_data`` reads one."""
    for t in trajectories:
        (folder / t.id).mkdir(parents=True)
        (folder / t.id / "trajectory.json").write_text(t.model_dump_json())
    return folder


def green_logp(model, run):
    anchor = run.optimizer.anchor[0]
    with torch.no_grad():
        logp, mask, _ = model.token_logprobs(model.encode([anchor]))
    return float((logp * mask).sum())


def test_the_anchor_set_trains_every_step_and_holds_its_turns(tiny_qwen3, tmp_path, plugins, settings):
    """An iteration that pushes "green" down (a failed green episode), from one start, with and
    without the anchor set of successful green episodes: the SFT term (anchor_nll, logged)
    keeps green's likelihood higher than the same update without it."""
    anchor = write_runs(tmp_path / "sft-data", [toy_trajectory([readable("green")], True, f"a{i}") for i in range(3)]
                        + [toy_trajectory([readable("red")], False, "failed")])
    start = model_of(tiny_qwen3)
    perturb(start, scale=0.05)
    state = [p.detach().clone() for p in start.trainable_parameters()]
    after = {}
    for coef in (0.0, 5.0):
        with torch.no_grad():
            for p, p0 in zip(start.trainable_parameters(), state):
                p.copy_(p0)
        run = run_of(config(tiny_qwen3, tmp_path / f"rl-{coef}", optimizer_steps=2, lr=1e-2, target_kl=0.0,
                            anchor_data=str(anchor), anchor_coef=coef, anchor_batch=2), start, plugins, settings)
        assert len(run.optimizer.anchor) == 3  # the failed episode is not part of it
        before = green_logp(start, run)
        samples = run._samples(toy_trajectory([readable("green")], False, "pushed"), -1.0)
        m = run.optimizer.optimize(samples)
        after[coef] = green_logp(start, run) - before
        assert ("anchor_nll" in m) == (coef > 0)
    assert after[0.0] < 0  # the group's push alone lowers green
    assert after[5.0] > after[0.0]


def test_the_anchor_probe_takes_every_task_in_turn_and_joins_the_trust_region(tiny_qwen3, tmp_path, plugins,
                                                                                settings):
    from owrl_openwebrl.prompt import Prompt

    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", optimizer_steps=1, lr=5e-2, target_kl=1e-3, anchor_probe=3,
                        anchor_coef=0.0), model, plugins, settings)
    prompt = Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": "Press green"}]}])
    made = [Sample(prompt=prompt, target=press(c), meta={"task": t, "token_ids": [1, 2]})
            for t, c in (("a", "green"), ("a", "red"), ("a", "blue"), ("b", "yellow"), ("c", "green"))]
    run.optimizer.set_anchor(made)
    assert [s.meta["task"] for s in run.optimizer.anchor_probe] == ["a", "b", "c"]  # each task before a second
    assert all("token_ids" not in s.meta for s in run.optimizer.anchor)  # another model's ids are not this one's
    samples = run._samples(toy_trajectory([readable("red")], True, "r"), 1.0)
    m = run.optimizer.optimize(samples)
    assert "kl_anchor" in m and m["kl_anchor"] <= 1e-3 and m["kl_old_new"] >= m["kl_anchor"]
    run.optimizer.set_anchor([])
    assert "kl_anchor" not in run.optimizer.optimize(samples)


def test_answer_lengths_count_what_a_policy_generates_and_what_a_limit_cuts(trainable):
    tok = trainable.tokenizer
    short, long = Sample(prompt=None, target="ok"), Sample(prompt=None, target=press("green") * 3)
    n_short, n_long = (len(tok(s.target + tok.eos_token, add_special_tokens=False)["input_ids"]) for s in (short, long))
    assert answer_lengths(tok, [short, long]) == (n_long, 0)  # no limit: nothing counted over
    assert answer_lengths(tok, [short, long], n_long) == (n_long, 0)  # a limit it fits, EOS included
    assert answer_lengths(tok, [short, long], n_long - 1) == (n_long, 1)
    assert answer_lengths(tok, [short, long], n_short - 1) == (n_long, 2)
    assert answer_lengths(tok, []) == (0, 0)


def test_an_anchor_longer_than_the_rollouts_answers_is_a_warning(tiny_qwen3, tmp_path, plugins, settings):
    """An anchor answer the policy is cut in before it ends (more tokens than
    ``max_new_tokens``, its EOS included) is named at start: RL cannot reach it. Under the
    limit, nothing is said."""
    anchor = write_runs(tmp_path / "sft-data", [toy_trajectory([readable("green")], True, f"a{i}") for i in range(2)])
    model = model_of(tiny_qwen3)
    want = len(target_ids(model.tokenizer, Sample(prompt=None, target=press("green"))))
    assert want > SAMPLING["max_new_tokens"]  # the press answer with its EOS
    with pytest.warns(UserWarning, match=rf"2 of 2 turns are longer than the rollouts' max_new_tokens \(12; the "
                                         rf"longest is {want} tokens\)"):
        run_of(config(tiny_qwen3, tmp_path / "rl-cut", anchor_data=str(anchor)), model, plugins, settings)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_of(config(tiny_qwen3, tmp_path / "rl-fits", anchor_data=str(anchor),
                      sampling={**SAMPLING, "max_new_tokens": want}), model, plugins, settings)


def test_an_optimizer_without_an_anchor_set_refuses_anchor_data(tiny_qwen3, tmp_path, plugins, settings):
    with pytest.raises(ConfigError, match="anchor"):
        RLConfig(model="m", out=tmp_path, anchor_coef=-1.0)
    with pytest.raises(Exception, match="no such file"):
        run_of(config(tiny_qwen3, tmp_path / "rl", anchor_data=str(tmp_path / "missing")), model_of(tiny_qwen3),
               plugins, settings)


def test_the_policys_own_clean_successes_join_the_anchor_newest_first_and_survive_a_resume(
        tiny_qwen3, tmp_path, plugins, settings):
    """anchor_own = 2: each iteration's successes with every turn readable (rescues aside) are
    kept per task in OUT/anchor-own, the newest two; their turns feed the anchor's SFT term
    (with no anchor_data at all), and a run resumed on the same folder has them again."""
    from types import SimpleNamespace

    def played(it, name, turns, success, task_id="t", rescued=None):
        traj = toy_trajectory(turns, success, name)
        traj.task = traj.task.model_copy(update={"id": task_id})
        folder = tmp_path / "rollouts" / str(it) / name
        folder.mkdir(parents=True)
        (folder / "trajectory.json").write_text(traj.model_dump_json())
        traj.metadata.update(run_dir=str(folder), rescued=rescued, group=f"{task_id}@{it}")
        return traj

    model = model_of(tiny_qwen3)
    cfg = config(tiny_qwen3, tmp_path / "rl", anchor_own=2, anchor_batch=2, optimizer_steps=1, target_kl=0.0)
    run = run_of(cfg, model, plugins, settings)
    assert run.optimizer.anchor_own == []
    first = [played(0, "ok-a", [readable("green")], True), played(0, "ok-b", [readable("green")] * 2, True),
             played(0, "failed", [readable("red")], False),
             played(0, "unreadable", [unreadable(), readable("green")], True),
             played(0, "rescued", [readable("green")], True, rescued="hot"),
             played(0, "other", [readable("blue")], True, task_id="other task")]
    run._keep_own_successes(0, SimpleNamespace(own=first))
    kept = {task.name: sorted(run.name for run in task.iterdir()) for task in (tmp_path / "rl" / "anchor-own").iterdir()}
    assert kept == {"t": ["00000-ok-a", "00000-ok-b"], "other_task": ["00000-other"]}
    assert len(run.optimizer.anchor_own) == 1 + 2 + 1  # every turn of each kept episode
    run._keep_own_successes(1, SimpleNamespace(own=[played(1, "ok-c", [readable("green")], True)]))
    assert sorted(p.name for p in (tmp_path / "rl" / "anchor-own" / "t").iterdir()) == ["00000-ok-b", "00001-ok-c"]
    assert len(run.optimizer.anchor_own) == 2 + 1 + 1
    m = run.optimizer.optimize(run._samples(toy_trajectory([readable("red")], False, "pushed"), -1.0))
    assert m["anchor_nll"] > 0  # the SFT term ran on the policy's own successes alone
    again = run_of(cfg, model_of(tiny_qwen3), plugins, settings)  # a resumed run: the same folder
    assert [s.target for s in again.optimizer.anchor_own] == [s.target for s in run.optimizer.anchor_own]
    with pytest.raises(ConfigError, match="anchor_own"):
        RLConfig(model="m", out=tmp_path, anchor_own=-1)
    # a whole iteration on the toy pages takes the same path, and logs how many turns it holds
    whole = run_of(config(tiny_qwen3, tmp_path / "whole", anchor_own=2), model_of(tiny_qwen3), plugins, settings)
    (result,) = asyncio.run(whole.run())
    assert result.metrics["anchor_own_turns"] == len(whole.optimizer.anchor_own)


def _sampler(model, samples, start):
    """(old log-probabilities, ref, temperatures, lengths) of ``samples`` under the ``start`` weights."""
    now = [p.detach().clone() for p in model.trainable_parameters()]
    enc = model.encode(samples)
    with torch.no_grad():
        for p, p0 in zip(model.trainable_parameters(), start):
            p.copy_(p0)
        temps = [1.0] * len(samples)
        old, mask, _ = model.token_logprobs(enc, temperature=temps)
        for p, p1 in zip(model.trainable_parameters(), now):
            p.copy_(p1)
    return old, old, temps, mask.sum(-1).tolist()


def test_the_old_to_new_kl_is_estimated_on_the_samplers_tokens():
    from owrl_train.objectives import k3_kl, sampled_kl

    # a sampled token the update pushed from probability 0.9 down to 1e-4: KL(old || new)
    # on it is about log(0.9 / 1e-4) = 9.1; the reversed ratio would read about 9000
    old, new = torch.tensor([[math.log(0.9)]]), torch.tensor([[math.log(1e-4)]])
    assert 8.0 < float(sampled_kl(old, new)) < 9.2
    assert float(k3_kl(new, old)) > 1000


# ------------------------------------------------------------------ seeing collapse


def test_every_iteration_logs_its_diagnostics_and_keeps_a_rollout_summary(tiny_qwen3, tmp_path, plugins, settings):
    model = model_of(tiny_qwen3)
    run = run_of(config(tiny_qwen3, tmp_path / "rl", iterations=2, probe_every=1, probe_episodes=1), model, plugins,
                 settings)
    asyncio.run(run.run())
    rows = [json.loads(line) for line in (tmp_path / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for key in ("kl", "kl_old_new", "entropy", "clip_fraction", "grad_norm", "optimizer_steps", "parse_error_rate",
                "truncation_rate", "advantage_mass", "all_fail_groups", "all_success_groups", "rescued_groups",
                "adapter_drift", "probe_success", f"success/{TASK.id}", "alarms"):
        assert f"rl/{key}" in rows[0], key
    written = json.loads((tmp_path / "rl" / "config.json").read_text())
    assert written["loss_type"] == "episode-mean" and written["target_kl"] == 0.01  # the choices, with the figures
    summary = tmp_path / "rl" / "rollouts" / "iter-00000" / "summary.jsonl"
    lines = [json.loads(line) for line in json_lines(summary.read_text()) if line]  # the model may say U+2028
    assert len(lines) == 4 and {"group", "task", "reward", "advantage", "said", "success"} <= set(lines[0])
    assert [p.name for p in summary.parent.iterdir()] == ["summary.jsonl"]  # the run folders went


def test_the_probe_feeds_the_sampler_only_when_asked(tiny_qwen3, tmp_path, plugins, settings):
    """With probe_feeds_sampler the greedy probe's episodes join the sampler's history before
    the first rollouts; without it only the rollouts' own episodes do."""
    model = model_of(tiny_qwen3)
    seen: dict[bool, dict[str, int]] = {}
    for feeds in (True, False):
        run = run_of(config(tiny_qwen3, tmp_path / f"rl-{feeds}", iterations=1, probe_every=1, probe_episodes=3,
                            probe_feeds_sampler=feeds), model, plugins, settings)
        asyncio.run(run.run())
        seen[feeds] = {task: len(h) for task, h in run.sampler.history.items()}
    rollouts = seen[False][TASK.id]  # one group of the rollouts' own episodes
    assert seen[True][TASK.id] == rollouts + 3


def test_an_alarm_rolls_back_to_the_last_good_checkpoint(tiny_qwen3, tmp_path, plugins, settings):
    """Every update moves the adapter past the drift alarm: each is undone, so after two
    iterations the adapter is still the one RL started from; with "stop" the run ends."""
    model = model_of(tiny_qwen3)
    perturb(model)
    start = [p.detach().clone() for p in model.trainable_parameters()]
    cfg = config(tiny_qwen3, tmp_path / "rl", iterations=2, alarms={"drift": 1e-12}, on_alarm="rollback",
                 target_kl=0.0, unreadable="turn")
    results = asyncio.run(run_of(cfg, model, plugins, settings).run())
    assert [r.action for r in results] == ["rolled back", "rolled back"]
    assert results[0].alarms and "adapter drift" in results[0].alarms[0]
    assert results[0].metrics["rolled_back"] == 1.0 and results[0].metrics["optimizer_steps"] >= 1
    assert all(torch.allclose(p, s) for p, s in zip(model.trainable_parameters(), start))
    stop = config(tiny_qwen3, tmp_path / "stop", iterations=3, alarms={"drift": 1e-12}, on_alarm="stop",
                  target_kl=0.0)
    stopped = asyncio.run(run_of(stop, model_of(tiny_qwen3), plugins, settings).run())
    assert [r.action for r in stopped] == ["stopped"]


def test_a_rise_in_unreadable_turns_is_an_alarm(tiny_qwen3, tmp_path, plugins, settings):
    run = run_of(config(tiny_qwen3, tmp_path / "rl", alarms={"parse_error_rise": 0.2}), model_of(tiny_qwen3),
                 plugins, settings)
    run.state["first_parse_error_rate"] = 0.1
    assert run._alarms({"parse_error_rate": 0.2}, "rollouts") == []
    [line] = run._alarms({"parse_error_rate": 0.5}, "rollouts")
    assert "unreadable turns at 50%" in line
    assert "non-finite" in run._alarms({"grad_norm_max": math.inf}, "update")[0]


# ------------------------------------------------------------------ names


def test_trl_names_are_accepted(tmp_path):
    path = tmp_path / "rl.toml"
    path.write_text('model = "m"\nbeta = 0.02\nepsilon = 0.1\nepsilon_high = 0.3\nnum_generations = 6\n'
                    'num_iterations = 2\nlearning_rate = 3e-6\nmax_completion_length = 77\nloss_type = "token-mean"\n')
    cfg = RLConfig.from_toml(path)
    assert (cfg.kl_coef, cfg.clip_low, cfg.clip_high, cfg.group_size, cfg.ppo_epochs, cfg.lr, cfg.loss_type) == (
        0.02, 0.1, 0.3, 6, 2, 3e-6, "token-mean")
    assert cfg.sampling["max_new_tokens"] == 77 and cfg.sampling["temperature"] == 1.0
    assert RLConfig.from_options(model="m", out=tmp_path, beta=0.5, num_generations=3).kl_coef == 0.5
    path.write_text('model = "m"\nbeta = 0.02\nkl_coef = 0.1\n')
    with pytest.raises(ConfigError, match="beta is TRL's name for kl_coef"):
        RLConfig.from_toml(path)
    path.write_text('model = "m"\nloss_type = "sum"\n')
    with pytest.raises(ConfigError, match="loss_type must be one of"):
        RLConfig.from_toml(path)
    path.write_text('model = "m"\n')
    assert RLConfig.from_toml(path, learning_rate=1e-4, beta=0.3).lr == 1e-4


def test_the_command_takes_an_anchor_set_and_prints_its_figures(tmp_path):
    from click.testing import CliRunner
    from owrl_train.commands import diagnostics_line, train_command
    from owrl_train.rl import IterationResult

    path = tmp_path / "rl.toml"
    path.write_text('model = "m"\n')
    assert RLConfig.from_toml(path, anchor_data=str(tmp_path)).anchor_data == str(tmp_path)
    assert RLConfig.from_toml(path, anchor_own=3).anchor_own == 3
    helped = CliRunner().invoke(train_command, ["rl", "--help"]).output
    assert "--anchor " in helped and "--anchor-own" in helped
    refused = CliRunner().invoke(train_command, ["rl", "--config", str(path), "--anchor-own", "-1"])
    assert refused.exit_code == 2 and "--anchor-own" in refused.output
    metrics = {"reward_mean": 0.5, "success_rate": 0.5, "valid_group_fraction": 1.0, "mean_steps": 1.0,
               "time_rollout_s": 1.0, "time_update_s": 1.0, "kl_anchor": 0.0042, "anchor_nll": 0.25,
               "anchor_own_turns": 7.0}
    line = diagnostics_line(IterationResult(0, metrics), 3)
    assert "kl anchor 0.0042" in line and "anchor nll 0.250" in line and "own anchor 7 turns" in line
    assert "anchor" not in diagnostics_line(IterationResult(0, {k: v for k, v in metrics.items()
                                                                if "anchor" not in k}), 3)
