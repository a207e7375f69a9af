"""Online multi-turn MM-GRPO: sample tasks, roll out groups, judge, reward, update, repeat.

One iteration:
1. the sampler picks ``tasks_per_iteration`` tasks from the pool;
2. ``group_size`` episodes per task run on the rollout machinery with the current policy
   (the horizon from the curriculum); every episode is judged and rewarded;
3. group-relative advantages; infrastructure errors and zero-variance groups dropped;
4. the optimizer (``mm-grpo`` by default) updates the LoRA adapter on every turn of the
   kept trajectories, the trajectory's advantage broadcast to each of its tokens;
5. a checkpoint (adapter, optimizer, RNG, sampler history, iteration) is written.

The rollouts of an iteration are cached on disk before the update, so a crash loses at
most the iteration in flight; re-running the same command resumes from the last
checkpoint.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

from owrl_sdk.components import Optimizer
from owrl_sdk.documents import load_trajectory
from owrl_sdk.errors import ConfigError
from owrl_sdk.types import Task, Trajectory

from .checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from .data import trajectory_samples
from .logging import Scalars
from .objectives import group_advantages, ppo_clip_loss


#: The ways :class:`RLConfig` ``rescue`` can find a signal in a group where every episode failed.
RESCUES = ("none", "hot", "demo")


@dataclass
class RLConfig:
    model: str
    out: Path
    suite: str = "demo-shop"
    tasks: Optional[list[str]] = None
    iterations: int = 3
    tasks_per_iteration: int = 2
    group_size: int = 5
    workers: int = 2
    lr: float = 1e-5
    lora_r: int = 16
    four_bit: bool = False
    autocast: str = "none"
    ppo_epochs: int = 1
    minibatch: int = 8
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    max_grad_norm: float = 1.0
    optimizer: str = "mm-grpo"
    sampler: str = "failure-weighted"
    sampler_options: dict[str, Any] = field(default_factory=dict)
    reward: str = "judged"
    judge: str = "composite"
    text_mode: bool = False
    #: Options of the rollout policy (``openwebrl``, or ``owrl-text`` for a text-only model).
    policy_options: dict[str, Any] = field(default_factory=dict)
    curriculum: list[dict[str, int]] = field(default_factory=lambda: [{"until_iteration": 100, "max_steps": 15},
                                                                       {"max_steps": 30}])
    sampling: dict[str, Any] = field(default_factory=lambda: {"temperature": 1.0, "top_p": 1.0, "top_k": 0,
                                                              "max_new_tokens": 256})
    seed: int = 0
    #: Where rollouts run: "local" (W contexts of one browser here) or "ray" (Ray actors, each
    #: owning a browser; needs serve_base_url, since actors cannot share the in-process model).
    rollout_backend: str = "local"
    ray_address: Optional[str] = None
    #: An OpenAI-compatible inference server (vLLM, SGLang) with dynamic LoRA loading: the
    #: trainer publishes each adapter there and the rollouts use it (see owrl_train.serving).
    serve_base_url: Optional[str] = None
    adapter_name: str = "owrl"
    #: Rollouts from an adapter more than this many versions old are discarded before an update.
    max_staleness: int = 1
    #: What to do for a group whose episodes all failed (no reward variance: nothing to learn):
    #: "none"; "hot": play the group again at ``rescue_temperature`` and keep it if any episode
    #: succeeded; "demo": play the run's demonstrator (RLRun(demonstrator=...)) once on the
    #: group's task and, if it succeeded, put its episode in place of the group's last one
    #: (an off-policy sample: the update scores it with the current model).
    rescue: str = "none"
    rescue_temperature: float = 1.3

    @classmethod
    def from_toml(cls, path: Path, **overrides: Any) -> "RLConfig":
        """The config in ``path``; ``overrides`` that are not None win over its keys."""
        from owrl_sdk.config import read_toml, validate_table

        data = read_toml(path)  # read as owrl.toml is: missing, non-UTF-8 and invalid files named
        data.update({k: v for k, v in overrides.items() if v is not None})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}")
        if "model" not in data:
            raise ConfigError(f"{path}: 'model' is required (a checkpoint folder or hub id)")
        # relative paths (out, a local model folder) are relative to the working directory,
        # like every other owrl path
        out = Path(data.pop("out", path.with_suffix("").name + "-out"))
        # types checked and converted as settings are: a bad value names its key and the file
        cfg = validate_table(cls, {"out": out, **data}, "the training config", str(path))
        if cfg.rollout_backend not in ("local", "ray"):
            raise ConfigError(f"{path}: rollout_backend must be 'local' or 'ray', not {cfg.rollout_backend!r}")
        if cfg.rescue not in RESCUES:
            raise ConfigError(f"{path}: rescue must be one of {', '.join(RESCUES)}, not {cfg.rescue!r}")
        if cfg.autocast not in ("none", "bf16"):
            raise ConfigError(f"{path}: autocast must be 'none' or 'bf16', not {cfg.autocast!r}")
        if cfg.rollout_backend == "ray" and not cfg.serve_base_url:
            raise ConfigError(f"{path}: rollout_backend = 'ray' needs serve_base_url (an inference server the "
                              "Ray workers share; they cannot use the trainer's in-process model)")
        return cfg

    def max_steps(self, iteration: int) -> int:
        for stage in self.curriculum:
            if "until_iteration" not in stage or iteration < int(stage["until_iteration"]):
                return int(stage["max_steps"])
        return int(self.curriculum[-1]["max_steps"])


class Rollouts(Protocol):
    async def collect(self, policy: Any, items: list[tuple[str, Task, int]], max_steps: int,
                      out: Path) -> list[Trajectory]:
        """Run one episode per (group, task, n); return the judged trajectories, each with
        ``metadata['group']`` and ``metadata['run_dir']`` set."""


# ============================================================================ the optimizer


class MMGRPO(Optimizer):
    """Token-level PPO-clip on group-relative advantages (asymmetric clip, k3 KL, entropy).

    Subclass and override :meth:`loss` to change the objective."""

    name = "mm-grpo"

    def __init__(self, settings: Any, model: Any = None, config: Optional[RLConfig] = None,
                 optimizer: Any = None, **options: Any):
        super().__init__(settings, **options)
        import torch

        self.model = model
        self.cfg = config
        self.torch_optimizer = optimizer or torch.optim.AdamW(model.trainable_parameters(), lr=config.lr)

    def loss(self, logp: Any, old_logp: Any, adv: Any, mask: Any, ref_logp: Any, entropy: Any) -> tuple[Any, dict]:
        c = self.cfg
        return ppo_clip_loss(logp, old_logp, adv, mask, clip_low=c.clip_low, clip_high=c.clip_high,
                             ref_logp=ref_logp, kl_coef=c.kl_coef, entropy=entropy, entropy_coef=c.entropy_coef)

    def optimize(self, samples: list[Any]) -> dict[str, Any]:
        """One MM-GRPO update (:meth:`update`) on samples with their advantages."""
        return self.update(samples)

    def update(self, samples: list[Any]) -> dict[str, float]:
        import torch

        if not samples:
            return {}
        c = self.cfg
        model = self.model
        batches = [samples[i:i + c.minibatch] for i in range(0, len(samples), c.minibatch)]
        encoded = [model.encode(b) for b in batches]
        olds, refs = [], []
        with torch.no_grad():
            for enc in encoded:
                old, _, _ = model.token_logprobs(enc)
                olds.append(old)
                ref = None
                if c.kl_coef:  # the reference pass costs a forward per sample; without a KL term it is skipped
                    with model.reference():
                        ref, _, _ = model.token_logprobs(enc)
                refs.append(ref)
        totals: dict[str, float] = {}
        count = 0
        tokens = seen = 0
        started = time.perf_counter()
        for _ in range(c.ppo_epochs):
            for b, enc, old, ref in zip(batches, encoded, olds, refs):
                logp, mask, entropy = model.token_logprobs(enc, with_entropy=True)
                adv = torch.tensor([s.advantage for s in b], dtype=logp.dtype, device=logp.device)
                adv = adv.unsqueeze(1).expand_as(logp)
                loss, metrics = self.loss(logp, old, adv, mask, ref, entropy)
                self.torch_optimizer.zero_grad(set_to_none=True)
                loss.backward()
                metrics["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.trainable_parameters(), c.max_grad_norm))
                self.torch_optimizer.step()
                tokens += int(mask.sum())
                seen += int(enc["attention_mask"].sum())
                for k, v in metrics.items():
                    totals[k] = totals.get(k, 0.0) + v
                count += 1
        seconds = time.perf_counter() - started
        out = {k: v / count for k, v in totals.items()}
        # target tokens (the ones trained) and all tokens through the model, per second of update
        out["update_tokens_per_s"] = tokens / seconds if seconds > 0 else 0.0
        out["update_all_tokens_per_s"] = seen / seconds if seconds > 0 else 0.0
        out["samples"] = float(len(samples))
        return out


# ============================================================================ the loop


@dataclass
class IterationResult:
    iteration: int
    metrics: dict[str, float]


class RLRun:
    def __init__(self, cfg: RLConfig, rollouts: Rollouts, settings: Any = None, plugins: Any = None,
                 tasks: Optional[list[Task]] = None, model: Any = None, demonstrator: Any = None):
        from owrl_sdk.config import Settings
        from owrl_sdk.plugins import Plugins

        from .model import TrainableVL

        if cfg.rescue not in RESCUES:
            raise ConfigError(f"rescue must be one of {', '.join(RESCUES)}, not {cfg.rescue!r}")
        if cfg.rescue == "demo" and demonstrator is None:
            raise ConfigError("rescue = 'demo' needs a demonstrator policy (RLRun(demonstrator=...))")
        if cfg.rescue == "hot" and cfg.serve_base_url:
            raise ConfigError("rescue = 'hot' samples with the trainer's own policy: it cannot rescue served rollouts")
        self.demonstrator = demonstrator
        self.cfg = cfg
        self.rollouts = rollouts
        self.settings = settings or Settings()
        self.plugins = plugins or Plugins()
        cat = self.plugins.catalogue
        self.model = model or TrainableVL(cfg.model, lora_r=cfg.lora_r, four_bit=cfg.four_bit, seed=cfg.seed,
                                          autocast=cfg.autocast)
        self.optimizer = cat.get("optimizers", cfg.optimizer)(self.settings, model=self.model, config=cfg)
        self.sampler = cat.get("samplers", cfg.sampler)(self.settings, **cfg.sampler_options)
        self.reward = cat.get("rewards", cfg.reward)(self.settings)
        self.pool = tasks if tasks is not None else self._pool()
        self.state: dict[str, Any] = {"iteration": 0}
        last = latest_checkpoint(cfg.out / "checkpoints")
        if last is not None:
            self.state = load_checkpoint(last, self.model, self.optimizer.torch_optimizer)
            self.sampler.load_state_dict(self.state.get("sampler", {}))
        from . import peer_policy  # the openwebrl plugin's policies, found in the catalogue

        OpenWebRLPolicy = peer_policy(catalogue=cat)
        TextPolicy = peer_policy(OpenWebRLPolicy.text_policy, catalogue=cat)

        if self.model.backend.kind == "text":
            self.policy = TextPolicy(self.settings, backend=self.model.backend, **cfg.sampling, **cfg.policy_options)
        else:
            self.policy = OpenWebRLPolicy(self.settings, backend=self.model.backend, text_mode=cfg.text_mode,
                                          **cfg.sampling, **cfg.policy_options)

        self.publisher: Any = None
        if cfg.serve_base_url:
            from .serving import AdapterPublisher

            self.publisher = AdapterPublisher(cfg.serve_base_url, cfg.out / "published", name=cfg.adapter_name,
                                              keep=cfg.max_staleness)

    def _rollout_policy(self, it: int) -> Any:
        """The trainer's own policy, or (served) the ``openai`` policy naming adapter version ``it``."""
        if self.publisher is None:
            return self.policy
        from .serving import PolicySpec

        model = self.publisher.publish(self.model, it)
        options = {"base_url": self.cfg.serve_base_url, "model": model, "text_mode": self.cfg.text_mode,
                   **self.cfg.sampling, **self.cfg.policy_options}
        return PolicySpec("openai", options)

    def _pool(self) -> list[Task]:
        suite = self.plugins.catalogue.get("task_suites", self.cfg.suite)(self.settings)
        tasks = suite.tasks()
        if self.cfg.tasks:
            wanted = set(self.cfg.tasks)
            tasks = [t for t in tasks if t.id in wanted]
        if not tasks:
            raise ConfigError(f"no tasks to train on in suite '{self.cfg.suite}'")
        return tasks

    @property
    def start_iteration(self) -> int:
        return int(self.state["iteration"])

    async def run(self, on_iteration: Any = None) -> list[IterationResult]:
        scalars = Scalars(self.cfg.out)
        results = []
        try:
            for it in range(self.start_iteration, self.cfg.iterations):
                result = await self.iteration(it)
                scalars.log(it, result.metrics, prefix="rl/")
                results.append(result)
                if on_iteration:
                    on_iteration(result)
        finally:
            scalars.close()
        return results

    async def iteration(self, it: int) -> IterationResult:
        cfg = self.cfg
        t0 = time.perf_counter()
        trajectories = await self._rollouts(it)
        dropped_stale = 0
        if self.publisher is not None:
            from .serving import drop_stale

            trajectories, dropped_stale = drop_stale(trajectories, cfg.adapter_name, it, cfg.max_staleness)
        t1 = time.perf_counter()
        rewards = []
        for traj in trajectories:
            r = self.reward.reward(traj)
            traj.reward = r
            rewards.append(r)
        groups = [traj.metadata["group"] for traj in trajectories]
        advantages, stats = group_advantages(groups, rewards)
        by_task: dict[str, list[bool]] = {}
        for traj, r in zip(trajectories, rewards):
            if r is not None and not traj.metadata.get("rescued"):  # the policy's own episodes only
                by_task.setdefault(traj.task.id, []).append(_succeeded(traj))
        for task_id, successes in by_task.items():
            self.sampler.update(task_id, successes)
        samples = []
        for traj, adv in zip(trajectories, advantages):
            if adv is None:
                continue
            run_dir = Path(traj.metadata["run_dir"]) if traj.metadata.get("run_dir") else None
            samples.extend(trajectory_samples(traj, run_dir, tools=self._tools(), advantage=adv,
                                              render=self.policy.prompt))
        t2 = time.perf_counter()
        update = self.optimizer.optimize(samples)
        t3 = time.perf_counter()
        judged = [r for r in rewards if r is not None]
        successes = [s for v in by_task.values() for s in v]
        metrics = {
            "reward_mean": sum(judged) / len(judged) if judged else 0.0,
            "success_rate": sum(successes) / len(successes) if successes else 0.0,
            "valid_group_fraction": stats.valid_fraction,
            "dropped_infra": float(stats.dropped_infra),
            "dropped_stale": float(dropped_stale),
            "mean_steps": sum(len(t.steps) for t in trajectories) / len(trajectories) if trajectories else 0.0,
            "max_steps": float(cfg.max_steps(it)),
            "rescued_groups": float(len({t.metadata["group"] for t in trajectories if t.metadata.get("rescued")})),
            "time_rollout_s": t1 - t0, "time_judge_s": t2 - t1, "time_update_s": t3 - t2,
            **update,
        }
        self.state = {"iteration": it + 1, "sampler": self.sampler.state_dict(), "metrics": metrics}
        save_checkpoint(cfg.out / "checkpoints", f"iter-{it:05d}", self.model, self.optimizer.torch_optimizer, self.state)
        shutil.rmtree(self._cache_dir(it), ignore_errors=True)  # the checkpoint now holds what it taught
        return IterationResult(it, metrics)

    async def _rescue(self, it: int, items: list[tuple[str, Task, int]], trajectories: list[Trajectory],
                      cache: Path) -> list[Trajectory]:
        """Groups where every episode failed, given a second chance (``RLConfig.rescue``)."""
        import dataclasses

        failed = set(_failed_groups(trajectories))
        if not failed:
            return trajectories
        again = [item for item in items if item[0] in failed]
        max_steps = self.cfg.max_steps(it)
        if self.cfg.rescue == "hot":
            policy = self._rollout_policy(it)
            sampling = policy.sampling
            policy.sampling = dataclasses.replace(sampling, temperature=self.cfg.rescue_temperature)
            try:
                hot = await self.rollouts.collect(policy, again, max_steps, cache / "rescue")
            finally:
                policy.sampling = sampling
            keep = {t.metadata["group"] for t in hot if _succeeded(t)}
            for t in hot:
                t.metadata["rescued"] = "hot"
            return [t for t in trajectories if t.metadata["group"] not in keep] + [
                t for t in hot if t.metadata["group"] in keep]
        first = {}
        for item in again:
            first.setdefault(item[0], item)
        shown = await self.rollouts.collect(self.demonstrator, list(first.values()), max_steps, cache / "rescue")
        demos = {t.metadata["group"]: t for t in shown if _succeeded(t)}
        out, replaced = [], set()
        for t in reversed(trajectories):  # each rescued group's last episode gives way to the demonstration
            g = t.metadata["group"]
            if g in demos and g not in replaced:
                replaced.add(g)
                demos[g].metadata["rescued"] = "demo"
                out.append(demos[g])
            else:
                out.append(t)
        return list(reversed(out))

    def _tools(self) -> list[Any]:
        """The tools the rollouts' episodes offered the policy: a training prompt must be the
        prompt the policy saw, tool list included. Rollouts that run their own tool set say so
        with a ``tools`` attribute; the others run the catalogue's."""
        own = getattr(self.rollouts, "tools", None)
        if own is not None:
            return list(own)
        return list(self.plugins.catalogue.items["tools"].values())

    def _cache_dir(self, it: int) -> Path:
        return self.cfg.out / "rollouts" / f"iter-{it:05d}"

    async def _rollouts(self, it: int) -> list[Trajectory]:
        cache = self._cache_dir(it)
        index = cache / "index.json"
        if index.exists():  # a crash after rollouts, before the checkpoint: reuse them
            entries = json.loads(index.read_text())
            out = []
            for e in entries:
                traj = load_trajectory(e["trajectory"])
                traj.metadata.update(group=e["group"], run_dir=str(Path(e["trajectory"]).parent),
                                     rescued=e.get("rescued"))
                out.append(traj)
            return out
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        rng = random.Random(self.cfg.seed * 100003 + it)
        from owrl_sdk.blocklist import Blocklist, host_of

        blocklist = Blocklist()
        pool = [t for t in self.pool if not blocklist.blocked(host_of(t.start_url))]
        if not pool:
            raise ConfigError("every task's host is blocked after network failures: see `owrl blocklist list`")
        tasks = self.sampler.sample(pool, self.cfg.tasks_per_iteration, rng)
        items = [(f"{t.id}@{it}.{k}", t, n) for k, t in enumerate(tasks) for n in range(self.cfg.group_size)]
        trajectories = await self.rollouts.collect(self._rollout_policy(it), items, self.cfg.max_steps(it), cache)
        if self.cfg.rescue != "none":
            trajectories = await self._rescue(it, items, trajectories, cache)
        entries = [{"group": t.metadata["group"], "trajectory": str(Path(t.metadata["run_dir"]) / "trajectory.json"),
                    "rescued": t.metadata.get("rescued")}
                   for t in trajectories if t.metadata.get("run_dir")]
        if len(entries) == len(trajectories):
            tmp = index.with_suffix(".tmp")
            tmp.write_text(json.dumps(entries))
            tmp.replace(index)
        return trajectories


def said(trajectory: Trajectory) -> str:
    """What the policy answered in every step of ``trajectory``, as one string."""
    return "\n".join(s.turn.raw if s.turn.raw is not None else repr(s.turn.calls) for s in trajectory.steps)


def _succeeded(traj: Trajectory) -> bool:
    return bool(traj.judgements and traj.judgements[-1].success)


def _failed_groups(trajectories: list[Trajectory]) -> list[str]:
    """Groups of two or more judged episodes where none succeeded (infrastructure errors aside)."""
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        if t.outcome is None or t.outcome.status != "infra_error":
            groups.setdefault(t.metadata["group"], []).append(t)
    return [g for g, ts in groups.items() if len(ts) > 1 and not any(_succeeded(t) for t in ts)]


class BrowserRollouts:
    """Rollouts on the ``local`` executor (:mod:`owrl_sdk.executors`): one browser, W contexts,
    the suite's checks and the judge, in the trainer's process.

    Every worker generates with the same policy: the trainer's in-process, model-backed
    policy, shared through :class:`owrl_sdk.executors.SharedPolicy` (its batcher merges the
    workers' requests; with ``lockstep``, a policy that offers ``lockstep(expected)`` cuts
    each batch only when every worker with an episode left has asked, so that a run can be
    repeated exactly) and left open; a served adapter (:class:`PolicySpec`) gets a new
    ``openai`` policy per worker, closed after the iteration. The suite is set up once, the
    browser lives across iterations, and each ``collect`` writes under its own ``out``.
    """

    def __init__(self, suite: Any, settings: Any, plugins: Any, workers: int = 2, judge: str = "composite",
                 lockstep: bool = False):
        self.suite = suite
        self.lockstep = lockstep
        self.settings = settings
        self.plugins = plugins
        self.workers = workers
        self.judge = judge
        self._ready = False
        self._executor: Any = None

    async def collect(self, policy: Any, items: list[tuple[str, Task, int]], max_steps: int,
                      out: Path) -> list[Trajectory]:
        from owrl_sdk.executors import LocalExecutor, NamedPolicy, SharedPolicy, WorkItem, Workload, failed_trajectory

        from .serving import PolicySpec

        factory = NamedPolicy(policy.name, dict(policy.options)) if isinstance(policy, PolicySpec) else SharedPolicy(policy)
        if self._executor is None:
            self._executor = LocalExecutor(self.settings, self.plugins, self.workers)
            await self._executor.start(Workload(suite=self.suite, policy=factory, judge=self.judge, out=out,
                                                with_trajectory=True, max_steps=max_steps))
            self._ready = True
        else:
            await self._executor.configure(policy=factory, max_steps=max_steps, out=out)
        # the curriculum sets the horizon (Workload.max_steps), whatever the suite's own tasks say (MiniWoB's say 8)
        work = [WorkItem(task, n, group) for group, task, n in items]
        finished = 0

        def count(_: Any) -> None:
            nonlocal finished
            finished += 1

        # lockstep: every batch waits for each worker that will still ask (those with an item left)
        lockstep = getattr(policy, "lockstep", None) if self.lockstep and isinstance(factory, SharedPolicy) else None
        if lockstep is not None:
            lockstep(lambda: min(self.workers, len(work) - finished))
        try:
            results = await self._executor.run(work, count)
        finally:
            if lockstep is not None:
                lockstep(None)
        info = policy.info() if isinstance(factory, SharedPolicy) else {"name": policy.name,
                                                                         "model": policy.options.get("model")}
        trajectories = []
        for result in results:  # an episode the machinery failed is an infra error, never trained on
            traj = result.trajectory or failed_trajectory(result, info)
            traj.metadata["group"] = result.item.group
            trajectories.append(traj)
        order = {g: i for i, (g, _, _) in enumerate(items)}
        # the episodes of one group may play one page: their answers order them, not who finished first
        trajectories.sort(key=lambda t: (order[t.metadata["group"]], t.task.metadata.get("episode", 0), said(t)))
        return trajectories

    async def close(self) -> None:
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await executor.close()  # tears the suite down too
            self._ready = False
