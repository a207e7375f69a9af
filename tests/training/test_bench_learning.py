"""The pieces of bench/bench_learning.py that decide its figures: the demonstrating oracle
on real MiniWoB++ pages in Chromium, the paired test between stages, and the reward."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from owrl_sdk.contract.plugins import Plugins

pytest.importorskip("miniwob")

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_learning  # noqa: E402
from miniwob_ref_oracle import MULTI_TURN, RefOracle, nodes, target  # noqa: E402

FAMILIES = bench_learning.SFT_FAMILIES + bench_learning.HELDOUT_FAMILIES


@pytest.mark.slow
def test_the_oracle_solves_every_family_and_grounds_each_call(tmp_path, plugins):
    from owrl_sdk.config import Settings
    from owrl_train.rl import BrowserRollouts

    settings = Settings(runs_dir=str(tmp_path / "runs"), plugins={"miniwob": {"time_limit": 120}})
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    tasks = {t.id: t for t in suite.tasks() if t.id in FAMILIES}
    assert sorted(tasks) == sorted(FAMILIES)
    rollouts = BrowserRollouts(suite, settings, plugins, workers=2)
    items = [(f"{f}#{s}", tasks[f], s) for f in FAMILIES for s in (3, 11)]

    async def go():
        try:
            return await rollouts.collect(RefOracle(settings), items, 3, tmp_path / "out")
        finally:
            await rollouts.close()

    done = asyncio.run(go())
    assert len(done) == len(items)
    for traj in done:
        assert traj.judgements and traj.judgements[-1].success, (traj.task.id, traj.outcome)
        assert traj.metadata["suite_check"]["details"]["done"]
        # the page said it was done after the last call: the episode ended there
        assert traj.outcome.status == "success"
        assert len(traj.steps) == 1 or traj.task.id in MULTI_TURN
        for step in traj.steps:
            turn = step.turn
            lines = turn.thought.splitlines()
            assert len(lines) == len(turn.calls) >= 1
            items_ = nodes(step.observation.aria)
            for line, call in zip(lines, turn.calls):
                node = target(items_, call.arguments["ref"])
                # the thought names the target as the tree does (a field by its row header), with the ref the call uses
                assert line.startswith(node.role) and f"[ref={node.ref}]" in line
                assert f'"{node.name}"' in line if node.name else '"' not in line
    # the label in the utterance is what the thought names
    for traj in (t for t in done if t.task.id in ("click-button", "unicode-test")):
        label = traj.task.intent.split('"')[1]
        assert f'button "{label}"' in traj.steps[0].turn.thought
    # multi-step families take three calls or more, or two turns (click-checkboxes: on most seeds)
    for family in bench_learning.MULTI_STEP:
        played = [t for t in done if t.task.id == family]
        assert any(len(t.steps) >= 2 or sum(len(s.turn.calls) for s in t.steps) >= 3 for t in played), family
    autocomplete = [t for t in done if t.task.id == "use-autocomplete"]
    assert all(len(t.steps) == 2 for t in autocomplete)


def test_the_oracle_states_what_each_write_leaves_and_the_page_bears_it_out(tmp_path, plugins):
    """--expectations on: every write of the oracle carries value_equals on its own field;
    on real MiniWoB pages each one is checked after the call and holds, the SFT target
    shows it, and --expect-reward adds its weight times the expectations' score."""
    from owrl_openwebrl.parser import render_turn
    from owrl_sdk.config import Settings
    from owrl_train.rewards import expectations_met
    from owrl_train.rl import BrowserRollouts

    settings = Settings(runs_dir=str(tmp_path / "runs"), plugins={"miniwob": {"time_limit": 120},
                                                                "miniwob-timeout": {"expect_weight": 0.5}})
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    writing = ("enter-text", "login-user", "multi-orderings", "use-autocomplete")
    tasks = {t.id: t for t in suite.tasks() if t.id in writing}
    rollouts = BrowserRollouts(suite, settings, plugins, workers=2)

    async def go():
        try:
            return await rollouts.collect(RefOracle(settings, expect=True), [(f, tasks[f], 5) for f in writing], 3,
                                          tmp_path / "out")
        finally:
            await rollouts.close()

    reward = bench_learning.MiniWoBReward(settings)
    for traj in asyncio.run(go()):
        assert traj.judgements[-1].success, traj.task.id
        records = [c for s in traj.steps for c in s.calls]
        writes = [c for c in records if c.call.name == "write"]
        assert writes and all(c.verdict is not None and c.verdict.ok for c in writes), traj.task.id
        assert all(c.call.expect is None for c in records if c.call.name != "write")
        first = writes[0].call
        assert first.expect.value_equals.value == first.arguments["message"]
        assert '"expect": {"value_equals"' in render_turn(traj.steps[0].turn.thought, traj.steps[0].turn.calls)
        assert expectations_met(traj) == 1.0  # every call that stated one was right
        assert reward.reward(traj) == pytest.approx(1.0 + 0.5)


def test_the_bench_script_finds_everything_it_needs():
    """`--check` imports what a run needs (torch, matplotlib, the trainer) and reads the families."""
    import subprocess

    out = subprocess.run([sys.executable, str(BENCH / "bench_learning.py"), "--check"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "ready: 12 families (7 demonstrated)" in out.stdout
    quick = subprocess.run([sys.executable, str(BENCH / "bench_learning.py"), "--check", "--quick"],
                           capture_output=True, text=True, timeout=300)
    assert quick.returncode == 0 and "ready: 3 families (2 demonstrated)" in quick.stdout, quick.stderr


TINY_RUN = ["--sft-families", "click-test", "--heldout-families", "click-button", "--eval-seeds", "1", "--demos", "1",
            "--sft-epochs", "1", "--iterations", "1", "--tasks-per-iteration", "1", "--group-size", "2",
            "--workers", "2", "--max-new-tokens", "8", "--threads", "1", "--rescue", "demo"]  # demo: RL has a group to learn from


@pytest.mark.slow
def test_a_whole_run_on_a_tiny_model_and_a_run_stopped_midway_keeps_what_it_measured(tmp_path, monkeypatch):
    """Every phase of the benchmark, end to end on real MiniWoB pages with a tiny random
    model (seconds); a run stopped in its RL stage leaves results.json with what it had
    measured, marked unfinished, which bench_learning_seeds reads with a note."""
    import json
    import subprocess

    from owrl_openwebrl.tiny import build_tiny_text
    from owrl_train.rl import RLRun

    tiny = str(build_tiny_text(tmp_path / "tiny"))
    done = tmp_path / "done"
    subprocess.run([sys.executable, str(BENCH / "bench_learning.py"), "--model", tiny, "--out", str(done), *TINY_RUN],
                   check=True, capture_output=True, text=True, timeout=600)
    whole = json.loads((done / "results.json").read_text())
    assert whole["finished"] and list(whole["stages"]) == ["baseline", "sft", "rl"] and len(whole["rl"]) == 1
    assert (done / "adapter-rl").is_dir() and (done / "learning_curve.png").is_file()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=BENCH, capture_output=True, text=True).stdout.strip()
    assert whole["commit"].removesuffix("-dirty") == head[:12]  # the figures name the code that made them
    seeds = [sys.executable, str(BENCH / "bench_learning_seeds.py")]
    # the whole run again, RL included, with the same seed: the same figures (every episode of
    # every stage, the SFT loss, each RL iteration's reward and success)
    repeat = tmp_path / "repeat"
    subprocess.run([sys.executable, str(BENCH / "bench_learning.py"), "--model", tiny, "--out", str(repeat), *TINY_RUN],
                   check=True, capture_output=True, text=True, timeout=600)
    again = subprocess.run([*seeds, str(done), str(repeat), "--same"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "the same figures" in again.stdout, again.stdout + again.stderr
    # the rescued group failed whole: it stays out of the policy gradient (no variance), and the
    # oracle's episode trains through the demonstration term instead: RL did update
    first = whole["rl"][0]
    assert first["valid_group_fraction"] == 0.0 and first["demo_samples"] >= 1 and first["grad_norm"] > 0
    weights = "adapter-rl/adapter_model.safetensors"
    assert (done / weights).read_bytes() == (repeat / weights).read_bytes()  # to the last bit
    # the run's RL adapter evaluated alone, recorded as its RL stage: the same episodes, the
    # same answers, paired with the run by seed (how a feedback ablation at evaluation is read)
    alone = tmp_path / "alone"
    subprocess.run([sys.executable, str(BENCH / "bench_learning.py"), "--model", tiny, "--out", str(alone), *TINY_RUN,
                    "--eval-adapter", str(done / "adapter-rl"), "--eval-stage", "rl", "--eval-families", "all"],
                   check=True, capture_output=True, text=True, timeout=600)
    evaluated = json.loads((alone / "results.json").read_text())
    assert list(evaluated["stages"]) == ["rl"] and evaluated["args"]["seed"] == whole["args"]["seed"]
    assert evaluated["stages"]["rl"]["episodes"] == whole["stages"]["rl"]["episodes"]
    paired = subprocess.run([*seeds, str(alone), "--against", str(done)], capture_output=True, text=True, timeout=120)
    assert paired.returncode == 0, paired.stderr
    assert "rl    answers: 2 episodes alike at every turn, 0 apart" in paired.stdout, paired.stdout

    async def stopped(self, on_iteration=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(RLRun, "run", stopped)
    cut = tmp_path / "cut"
    monkeypatch.setattr(sys, "argv", ["bench_learning.py", "--model", tiny, "--out", str(cut), *TINY_RUN])
    import torch

    from owrl_sdk.browser.host import _LIVE_BROWSERS

    threads = torch.get_num_threads()
    browsers = set(_LIVE_BROWSERS)
    try:
        with pytest.raises(KeyboardInterrupt):
            bench_learning.main()
    finally:
        torch.set_num_threads(threads)  # --threads 1 must not slow the tests that come after
    assert set(_LIVE_BROWSERS) == browsers  # the stopped run closed the browsers it launched
    part = json.loads((cut / "results.json").read_text())
    assert part["finished"] is False and list(part["stages"]) == ["baseline", "sft"] and part["rl"] == []
    assert part["stages"]["sft"]["episodes"] == whole["stages"]["sft"]["episodes"]
    read = subprocess.run([*seeds, str(cut)], capture_output=True, text=True, timeout=120)
    assert read.returncode == 0 and "did not finish; it reached baseline, sft" in read.stderr, read.stderr
    # taken on from its SFT adapter: the RL the whole run played, to the last bit of the adapter
    resumed = tmp_path / "resumed"
    subprocess.run([sys.executable, str(BENCH / "bench_learning.py"), "--model", tiny, "--out", str(resumed), *TINY_RUN,
                    "--from-sft", str(cut)], check=True, capture_output=True, text=True, timeout=600)
    taken = json.loads((resumed / "results.json").read_text())
    assert taken["finished"] and taken["from_sft"]["folder"] == str(cut) and list(taken["stages"]) == ["baseline", "sft", "rl"]
    again = subprocess.run([*seeds, str(done), str(resumed), "--same"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "the same figures" in again.stdout, again.stdout + again.stderr
    assert (resumed / weights).read_bytes() == (done / weights).read_bytes()
    # an SFT made with other settings is refused, saying which, before any model is loaded
    other = subprocess.run([sys.executable, str(BENCH / "bench_learning.py"), "--model", tiny, "--out",
                            str(tmp_path / "other"), *TINY_RUN, "--from-sft", str(cut), "--feedback", "status",
                            "--demos", "2", "--check"], capture_output=True, text=True, timeout=300)
    assert other.returncode != 0 and not (tmp_path / "other").exists()
    assert "--feedback 'changes' there, 'status' here" in other.stderr, other.stderr
    assert "--demos 1 there, 2 here" in other.stderr, other.stderr


def test_mcnemar_counts_only_changed_pairs():
    before = {"a#0": False, "a#1": True, "b#0": False, "b#1": True, "c#0": True}
    after = {"a#0": True, "a#1": True, "b#0": True, "b#1": False, "x#9": True}
    m = bench_learning.mcnemar(before, after)
    assert (m["pairs"], m["gained"], m["lost"]) == (4, 2, 1)
    assert m["p_value"] == pytest.approx(1.0)  # 2 against 1 is no evidence
    strong = bench_learning.mcnemar({str(i): False for i in range(12)}, {str(i): True for i in range(12)})
    assert strong["gained"] == 12 and strong["p_value"] == pytest.approx(2 / 2 ** 12)
    assert bench_learning.mcnemar({}, {})["p_value"] == 1.0


def test_an_episode_unfinished_at_the_horizon_scores_as_a_time_out(settings):
    from owrl_sdk.types import Judgement, Outcome, PolicyInfo, Task, Trajectory

    reward = bench_learning.MiniWoBReward(settings)

    def traj(done: bool, success: bool, raw: float, status: str = "success") -> Trajectory:
        return Trajectory(task=Task(id="click-test", intent="Click the button.", start_url="about:blank"),
                          policy=PolicyInfo(name="owrl-text"),
                          outcome=Outcome(status=status),
                          judgements=[Judgement(judge="composite", success=success, score=raw)],
                          metadata={"suite_check": {"details": {"done": done, "raw_reward": raw}}})

    assert reward.reward(traj(True, True, 0.8)) == 1.0  # no clock in the reward: a run can be repeated
    assert reward.reward(traj(True, False, -1.0)) == pytest.approx(-1.0)
    assert reward.reward(traj(False, False, 0.0)) == -1.0  # clicked something inert: a time-out in MiniWoB
    assert reward.reward(traj(True, True, 0.8, status="infra_error")) is None  # never trained on


def tiny_click_test(tmp_path, plugins):
    """A tiny random text model (it never solves anything) and MiniWoB's click-test task."""
    import warnings

    from owrl_openwebrl.tiny import build_tiny_text
    from owrl_sdk.config import Settings
    from owrl_train.model import TrainableVL

    tiny = build_tiny_text(tmp_path / "llama")
    settings = Settings(runs_dir=str(tmp_path / "runs"), plugins={"miniwob": {"time_limit": 120}})
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    task = next(t for t in suite.tasks() if t.id == "click-test")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = TrainableVL(str(tiny), catalogue=Plugins().catalogue, lora_r=4, seed=0)
    return tiny, settings, suite, task, model


def test_a_group_where_every_episode_failed_gets_the_oracles_episode(tmp_path, plugins):
    """rescue = "demo": the tiny random model fails both episodes of its group on a real
    MiniWoB page; the oracle plays the group's task once and its solved episode is kept
    beside the group, not in it: the group (no variance) stays out of the policy gradient,
    and the demonstration trains through the SFT term alone."""
    from owrl_train.rl import BrowserRollouts, RLConfig, RLRun

    tiny, settings, suite, task, model = tiny_click_test(tmp_path, plugins)
    cfg = RLConfig(model=str(tiny), out=tmp_path / "rl", suite="miniwob", iterations=1, tasks_per_iteration=1,
                   group_size=2, workers=2, minibatch=4, sampler="uniform", rescue="demo",
                   curriculum=[{"max_steps": 1}], policy_options={"tools": ["click", "write"]},
                   sampling={"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 8, "seed": 0})
    rollouts = BrowserRollouts(suite, settings, plugins, workers=2, lockstep=True)
    with pytest.raises(Exception, match="needs a demonstrator"):
        RLRun(cfg, rollouts, settings=settings, plugins=plugins, tasks=[task], model=model)
    rl = RLRun(cfg, rollouts, settings=settings, plugins=plugins, tasks=[task], model=model,
               demonstrator=RefOracle(settings))

    async def go():
        try:
            return await rl._rollouts(0), await rl.iteration(1)
        finally:
            await rollouts.close()

    trajectories, result = asyncio.run(go())
    assert len(trajectories) == 3
    *own, shown = trajectories
    assert [t.metadata["group"] for t in trajectories] == ["click-test@0.0"] * 3
    assert not any(t.judgements and t.judgements[-1].success for t in own)  # the random model's own episodes
    assert not any(t.metadata.get("rescued") for t in own)
    assert shown.metadata["rescued"] == "demo" and shown.judgements[-1].success
    assert shown.policy.name == "miniwob-ref-oracle"
    m = result.metrics
    assert m["rescued_groups"] == 1.0
    # out of the group's statistics: the group has no variance and is dropped from the policy gradient
    assert m["valid_group_fraction"] == 0.0 and m["groups"] == 1.0 and m["all_fail_groups"] == 1.0
    # the demonstration is trained on, through the SFT term, with its own loss logged
    assert m["demo_samples"] >= 1.0 and m["demo_nll"] > 0 and m["optimizer_steps"] >= 1
    assert m["success_rate"] == 0.0  # rescued episodes are not counted as the policy's


def test_a_hot_rescue_plays_the_failed_group_again_hotter_and_keeps_it_only_if_it_learned_something(tmp_path, plugins):
    """rescue = "hot" on a real page: the random model's group fails, is played again at the
    rescue temperature, and (failing again) stays as it was; the policy's own temperature is back."""
    from owrl_train.rl import BrowserRollouts, RLConfig, RLRun

    tiny, settings, suite, task, model = tiny_click_test(tmp_path, plugins)
    cfg = RLConfig(model=str(tiny), out=tmp_path / "rl", suite="miniwob", iterations=1, tasks_per_iteration=1,
                   group_size=2, workers=2, sampler="uniform", rescue="hot", rescue_temperature=1.7,
                   curriculum=[{"max_steps": 1}], policy_options={"tools": ["click", "write"]},
                   sampling={"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 8, "seed": 0})
    rollouts = BrowserRollouts(suite, settings, plugins, workers=2, lockstep=True)
    rl = RLRun(cfg, rollouts, settings=settings, plugins=plugins, tasks=[task], model=model)
    seen: list[float] = []
    real = rl.policy.backend.generate

    def watched(prompts, sampling):
        seen.append(sampling.temperature)
        return real(prompts, sampling)

    rl.policy.backend.generate = watched

    async def go():
        try:
            return await rl._rollouts(0)
        finally:
            await rollouts.close()

    trajectories = asyncio.run(go())
    assert sorted(set(seen)) == [1.0, 1.7]  # the group, then the same group hotter
    assert rl.policy.sampling.temperature == 1.0
    assert len(trajectories) == 2 and not any(t.metadata.get("rescued") for t in trajectories)
    assert not any(t.judgements and t.judgements[-1].success for t in trajectories)
    with pytest.raises(Exception, match="cannot rescue served rollouts"):
        RLRun(RLConfig(model=str(tiny), out=tmp_path / "rl2", rescue="hot", serve_base_url="http://127.0.0.1:9"),
              rollouts, settings=settings, plugins=plugins, tasks=[task], model=model)


def test_several_runs_read_together_and_a_repeat_compared(tmp_path, capsys):
    import json

    import bench_learning_seeds as seeds

    def stage(episodes: dict[str, bool]) -> dict:
        wins = sum(episodes.values())
        fam = {"a": {"successes": sum(v for k, v in episodes.items() if k.startswith("a#")), "n": 2}}
        return {"n": len(episodes), "successes": wins, "rate": wins / len(episodes), "episodes": episodes,
                "families": fam}

    def write(name: str, seed: int, sft: dict, rl: dict, loss: float = 0.1) -> str:
        folder = tmp_path / name
        folder.mkdir()
        data = {"stages": {"sft": stage(sft), "rl": stage(rl)}, "args": {"seed": seed}, "sft": {"final_loss": loss},
                "rl": [{"iteration": 1, "reward_mean": 0.5, "time_rollout_s": seed + 1.0}], "seconds": {"RL": 60},
                "heldout_families": [], "multi_step": ["a"]}
        (folder / "results.json").write_text(json.dumps(data))
        return str(folder)

    a = write("s0", 0, {"a#0": False, "a#1": True}, {"a#0": True, "a#1": True})
    b = write("s1", 1, {"a#0": False, "a#1": False}, {"a#0": True, "a#1": False})
    again = write("s0-again", 7, {"a#0": False, "a#1": True}, {"a#0": True, "a#1": True})
    seeds.summary([seeds.load(a), seeds.load(b)])
    out = capsys.readouterr().out
    assert "75.0% ± 35.4% [50%–100%]" in out  # RL: 100% and 50%
    assert "RL ahead of SFT in 2 of 2 runs" in out
    assert "pooled: 2 gained, 0 lost, exact McNemar p = 0.5" in out  # a#0 in both runs
    assert "a                       3/4  |  1/4  | +2 -0" in out  # per family, RL | SFT
    # runs from one saved SFT adapter share the seed: they are told, and paired, by their RL seed
    k0, k1 = (seeds.load(a) | {"args": {"seed": 0, "rl_seed": k, "from_sft": "sft"}} for k in (0, 1))
    seeds.summary([k0, k1])
    assert "2 runs: seed 0 rl 0, seed 0 rl 1;" in capsys.readouterr().out
    seeds.ablation([k0, k1], [k1])
    assert "1 paired runs: seed 0 rl 1" in capsys.readouterr().out
    assert seeds.same(seeds.load(a), seeds.load(again))  # timings aside, the same figures
    assert not seeds.same(seeds.load(a), seeds.load(b))
    seeds.ablation([seeds.load(a)], [seeds.load(again) | {"args": {"seed": 0}}])
    assert "rl    pooled: runs 100%, against 100%; 0 gained, 0 lost" in capsys.readouterr().out
    seeds.ablation([seeds.load(a)], [seeds.load(b) | {"args": {"seed": 0}}])
    out = capsys.readouterr().out
    assert "sft   pooled, 95% intervals: runs 1/2 [9%, 91%], against 0/2 [0%, 66%]" in out
    assert "a                       2/2  |  1/2  | +1 -0" in out  # RL: a#1 solved by one arm only


def test_an_ablation_tells_answers_apart_from_the_first_turn_or_later(tmp_path, capsys):
    """Episodes whose arms answered differently on the first turn (training alone changed them)
    are told from those alike on it and apart later (what the history showed changed them)."""
    import json

    import bench_learning_seeds as seeds

    def write(name: str, episodes: dict[str, tuple[bool, list[str]]]) -> dict:
        folder = tmp_path / name
        for i, (key, (_, raws)) in enumerate(episodes.items()):
            family, seed = key.split("#")
            run = folder / "eval-sft" / "runs" / f"run-{i}"
            run.mkdir(parents=True)
            (run / "trajectory.json").write_text(json.dumps({
                "task": {"id": family, "metadata": {"seed": int(seed)}},
                "steps": [{"turn": {"raw": raw}} for raw in raws]}))
        flags = {k: won for k, (won, _) in episodes.items()}
        data = {"stages": {"sft": {"n": len(flags), "successes": sum(flags.values()), "episodes": flags,
                                   "rate": sum(flags.values()) / len(flags)}},
                "args": {"seed": 0}, "seconds": {}}
        (folder / "results.json").write_text(json.dumps(data))
        return seeds.load(str(folder))

    a = write("a", {"f#0": (True, ["x", "y"]), "f#1": (True, ["p"]), "f#2": (False, ["q", "r"]), "f#3": (True, ["s"])})
    b = write("b", {"f#0": (False, ["x", "z"]), "f#1": (False, ["o"]), "f#2": (False, ["q", "r"]), "f#3": (True, ["t"])})
    seeds.ablation([a], [b])
    out = capsys.readouterr().out
    assert ("sft   answers: 1 episodes alike at every turn, 2 apart from the first turn, 1 alike on the first and "
            "apart later; of the episodes with different outcomes, 1 were apart from the first turn, 1 later") in out
