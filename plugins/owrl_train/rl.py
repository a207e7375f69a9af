"""Online multi-turn MM-GRPO: sample tasks, roll out groups, judge, reward, update, repeat.

One iteration:
1. the sampler picks ``tasks_per_iteration`` tasks from the pool (``practice_share`` of
   them from tasks the policy already solves); with ``dynamic_sampling_groups`` it draws
   more until that many groups have reward variance (at most ``dynamic_sampling_draws``
   more draws);
2. ``group_size`` episodes per task run on the rollout machinery with the current policy
   (the horizon from the curriculum); every episode is judged and rewarded;
3. group-relative advantages; infrastructure errors and zero-variance groups dropped;
   an unreadable turn gets ``unreadable_advantage`` of its own and does not make its
   episode a failure (``unreadable = "turn"``); a rescue demonstration stays out of the
   groups and trains through a small SFT term (``demo_coef``);
4. the optimizer (``mm-grpo`` by default) updates the LoRA adapter: turns shuffled across
   groups, ``optimizer_steps`` accumulated steps per epoch, each turn weighed by
   ``loss_type`` (default: every episode weighs the same), PPO-clip (dual-clip) on
   log-probabilities at the sampling temperature, a k3 KL to the policy RL started from
   (a frozen copy of the starting adapter), and a trust region: a step that moves the
   policy more than ``target_kl`` from the one that sampled is shrunk, or undone and the
   iteration's updates stop;
5. diagnostics (``metrics.jsonl``, TensorBoard): KL to the reference and old to new,
   entropy, clipping, gradient norm, steps taken, unreadable and cut answers, advantage
   mass, all-fail and all-success groups, the adapter's drift, per-task success and a
   greedy probe every ``probe_every`` iterations; ``alarms`` thresholds warn, roll back to
   the last good checkpoint or stop (``on_alarm``);
6. a checkpoint (adapter, optimizer, RNG, sampler history, iteration) is written, and the
   iteration's rollouts are summarised in ``rollouts/iter-N/summary.jsonl``.

The rollouts of an iteration are cached on disk before the update, so a crash loses at
most the iteration in flight; re-running the same command resumes from the last
checkpoint.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

from owrl_sdk.api import (
    Blocklist,
    ConfigError,
    DocumentError,
    host_of,
    load_trajectory,
    Optimizer,
    read_toml,
    Reward,
    Settings,
    Task,
    TaskSampler,
    Trajectory,
    Turn,
    UsageError,
    validate_table,
    write_atomic,
)

from . import model as _model  # TrainableVL looked up when called (tests replace owrl_train.model.TrainableVL)
from .peers import peer_policy  # the openwebrl plugin's policies, found in the catalogue
from .checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from .data import Sample, load_samples, trajectory_samples
from .logging import Scalars
from .objectives import (LOSS_TYPES, GroupStats, demonstration_loss, group_advantages, ppo_clip_loss, sampled_kl,
                         turn_weights)
from .rewards import ungated
from .rollouts import BrowserRollouts, said  # noqa: F401 - BrowserRollouts: its old import path
from .serving import AdapterPublisher, PolicySpec, drop_stale


#: The ways :class:`RLConfig` ``rescue`` can find a signal in a group where every episode failed.
RESCUES = ("none", "hot", "demo")
#: What an unreadable turn does (:class:`RLConfig` ``unreadable``).
UNREADABLE = ("turn", "episode")
#: What a turn cut at the token limit does (:class:`RLConfig` ``truncated``).
TRUNCATED = ("penalize", "mask", "train")
ON_ALARM = ("warn", "rollback", "stop")
#: The alarms :class:`RLConfig` ``alarms`` may set, with what each watches.
ALARMS = {
    "kl": "KL to the reference above this",
    "parse_error_rise": "the share of unreadable turns risen this much above the first iteration's",
    "probe_drop": "the greedy probe's success fallen this much below its first measurement",
    "drift": "the adapter's L2 distance from the reference above this",
}
#: TRL's GRPOConfig names, accepted for ours (``max_completion_length`` sets sampling.max_new_tokens).
TRL_ALIASES = {"beta": "kl_coef", "epsilon": "clip_low", "epsilon_high": "clip_high", "num_generations": "group_size",
               "num_iterations": "ppo_epochs", "learning_rate": "lr", "loss_type": "loss_type",
               "max_completion_length": "sampling.max_new_tokens"}


def _default_sampling() -> dict[str, Any]:
    """:class:`RLConfig` ``sampling`` when a config sets none: the full distribution at
    temperature 1, 256 new tokens an answer."""
    return {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 256}


def resolve_aliases(data: dict[str, Any], where: str = "the training config") -> dict[str, Any]:
    """``data`` with TRL's names (:data:`TRL_ALIASES`) turned into ours; a key given under
    both names is refused."""
    out = dict(data)
    for alias, ours in TRL_ALIASES.items():
        if alias not in out or alias == ours:
            continue
        value = out.pop(alias)
        if value is None:
            continue
        if ours.startswith("sampling."):
            key = ours.split(".", 1)[1]
            sampling = dict(out.get("sampling") or _default_sampling())
            if key in (data.get("sampling") or {}):
                raise ConfigError(f"{where}: {alias} and sampling.{key} are the same setting: give one")
            sampling[key] = value
            out["sampling"] = sampling
            continue
        if data.get(ours) is not None:
            raise ConfigError(f"{where}: {alias} is TRL's name for {ours}: give one of them")
        out[ours] = value
    return out


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
    #: Turns per forward pass (memory); ``optimizer_steps`` sets how many steps an epoch takes.
    minibatch: int = 8
    #: Optimizer steps per epoch over an iteration's turns (gradients accumulate between them);
    #: 0: one step per minibatch.
    optimizer_steps: int = 2
    #: Shuffle the iteration's turns across groups before they are cut into steps.
    shuffle: bool = True
    #: How turns weigh in the loss: episode-mean, seq-mean-token-mean or token-mean.
    loss_type: str = "episode-mean"
    clip_low: float = 0.2
    clip_high: float = 0.28
    #: Dual-clip bound c for negative advantages (0: off).
    dual_clip: float = 3.0
    #: Weight of the k3 KL to the reference (the adapter RL started from); the KL is logged even at 0.
    kl_coef: float = 0.05
    kl_clamp: float = 10.0
    #: The trust region: after each optimizer step, KL(sampling policy || new) on the iteration's
    #: sampled tokens; a step past this is halved along its direction up to ``kl_backtracks``
    #: times, then undone, and the iteration's updates stop (0: no trust region).
    target_kl: float = 0.01
    kl_backtracks: int = 4
    #: The step size follows the trust region: the KL of an iteration's first optimizer step (from
    #: the sampling policy, before any shrinking) sets the next iteration's learning rate so that a
    #: first step reaches ``target_kl / optimizer_steps``, leaving room for the others (with a fixed
    #: rate too large, the first step fills the region and the iteration moves along one
    #: minibatch's gradient). KL grows with the square of Adam's step, so the rate is scaled by
    #: sqrt(that / KL), within 0.25x to 1.5x per iteration and never past ``lr``. Logged as
    #: ``rl/lr`` and ``rl/kl_first_step`` (False: ``lr`` throughout).
    adaptive_lr: bool = True
    entropy_coef: float = 0.0
    max_grad_norm: float = 1.0
    optimizer: str = "mm-grpo"
    sampler: str = "failure-weighted"
    sampler_options: dict[str, Any] = field(default_factory=dict)
    #: Share of each iteration's tasks drawn from tasks already solved (>= 80% success), so they do not erode.
    practice_share: float = 0.25
    #: Keep drawing groups until this many have reward variance (0: one draw).
    dynamic_sampling_groups: int = 0
    #: At most this many extra draws per iteration.
    dynamic_sampling_draws: int = 2
    reward: str = "judged"
    judge: str = "composite"
    #: "turn": an unreadable answer trains with ``unreadable_advantage`` and leaves its episode's
    #: reward to the task's verdict; "episode": it is not trained and fails its episode (as before).
    unreadable: str = "turn"
    unreadable_advantage: float = -1.0
    #: An answer cut at the token limit: "mask" (not trained), "penalize" (trained with
    #: ``unreadable_advantage``) or "train" (trained like the others); never with an end-of-text
    #: token appended. Masked by default: a cut answer may be a right one that needed more tokens.
    truncated: str = "mask"
    #: Weight of the SFT term a rescue demonstration trains through (outside the group statistics).
    demo_coef: float = 0.1
    #: The anchor set: the SFT data the starting adapter learned (a runs folder, a trajectory or
    #: a JSONL, as ``owrl train sft --data`` reads it). RL trains on a few families an iteration
    #: and the others drift; with it, every optimizer step also trains ``anchor_batch`` of its
    #: turns with an SFT term of weight ``anchor_coef`` (PPO-ptx), and the trust region measures
    #: its KL on ``anchor_probe`` fixed anchor turns (every task in turn) as well as on the
    #: iteration's own: the larger of the two must stay within ``target_kl`` (None: no anchor set).
    anchor_data: Optional[str] = None
    anchor_coef: float = 1.0
    anchor_batch: int = 4
    anchor_probe: int = 12
    #: The policy's own successes joining the anchor set: each iteration's episodes that
    #: succeeded with every turn readable (rescues aside) are kept in ``OUT/anchor-own``, the
    #: newest ``anchor_own`` per task, and their turns are drawn by the anchor's SFT term with
    #: the SFT data's. Families the SFT data never showed are then held once the policy solves
    #: them. 0: none. The probe stays the SFT data's.
    anchor_own: int = 0
    text_mode: bool = False
    #: Options of the rollout policy (``openwebrl``, or ``owrl-text`` for a text-only model).
    policy_options: dict[str, Any] = field(default_factory=dict)
    curriculum: list[dict[str, int]] = field(default_factory=lambda: [{"until_iteration": 100, "max_steps": 15},
                                                                       {"max_steps": 30}])
    sampling: dict[str, Any] = field(default_factory=_default_sampling)
    seed: int = 0
    #: Every this many iterations, play ``probe_tasks`` greedily before the rollouts (0: never).
    probe_every: int = 0
    #: The probe's task ids (default: the first four of the pool) and episodes per task.
    probe_tasks: Optional[list[str]] = None
    probe_episodes: int = 2
    #: The probe's episodes count in the task sampler's history, so that the first iteration
    #: already draws less from tasks the policy solves (whose groups, all successes, teach
    #: nothing). They are greedy, so a task solved greedily counts as solved.
    probe_feeds_sampler: bool = False
    #: Thresholds (names in ALARMS) and what crossing one does: warn, rollback or stop.
    alarms: dict[str, float] = field(default_factory=lambda: {"kl": 1.0, "parse_error_rise": 0.3})
    on_alarm: str = "warn"
    #: Keep every rollout's run folder (screenshots, trajectories), not only the iteration's summary.
    keep_rollouts: bool = False
    #: The executor rollouts run on, by name: "local" (W contexts of one browser here), "ray" (Ray
    #: actors, each owning a browser; needs serve_base_url, since actors cannot share the
    #: in-process model), or one a plugin registers (checked when the rollouts start).
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
    #: group's task and, if it succeeded, train on its episode through the SFT term
    #: (``demo_coef``), outside the group's statistics (the group itself stays dropped).
    rescue: str = "none"
    rescue_temperature: float = 1.3

    def __post_init__(self) -> None:
        self.check("RLConfig")

    def check(self, where: str) -> None:
        """Refuse values no run can use, naming ``where`` they came from."""
        choices = {"rescue": RESCUES, "autocast": ("none", "bf16"),
                   "loss_type": LOSS_TYPES, "unreadable": UNREADABLE, "truncated": TRUNCATED, "on_alarm": ON_ALARM}
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ConfigError(f"{where}: {key} must be one of {', '.join(allowed)}, not {getattr(self, key)!r}")
        unknown = sorted(set(self.alarms) - set(ALARMS))
        if unknown:
            raise ConfigError(f"{where}: unknown alarm(s) {', '.join(unknown)}; known: {', '.join(ALARMS)}")
        if int(self.optimizer_steps) < 0:
            raise ConfigError(f"{where}: optimizer_steps must be 0 (a step per minibatch) or more, not {self.optimizer_steps!r}")
        if int(self.kl_backtracks) < 0:
            raise ConfigError(f"{where}: kl_backtracks must be 0 or more, not {self.kl_backtracks!r}")
        if self.anchor_coef < 0 or min(int(self.anchor_batch), int(self.anchor_probe), int(self.anchor_own)) < 0:
            raise ConfigError(f"{where}: anchor_coef, anchor_batch, anchor_probe and anchor_own must be 0 or more")
        for key in ("minibatch", "ppo_epochs", "group_size"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"{where}: {key} must be at least 1, not {getattr(self, key)!r}")
        if not 0.0 <= self.practice_share <= 1.0:
            raise ConfigError(f"{where}: practice_share must be between 0 and 1, not {self.practice_share!r}")
        if self.dual_clip and self.dual_clip <= 1.0:
            raise ConfigError(f"{where}: dual_clip must be above 1 (or 0 for off), not {self.dual_clip!r}")

    @classmethod
    def from_options(cls, **options: Any) -> "RLConfig":
        """A config from keyword options, TRL's names (:data:`TRL_ALIASES`) accepted."""
        return cls(**resolve_aliases(options, "RLConfig"))

    @property
    def temperature(self) -> float:
        """The rollouts' sampling temperature: the one the update scores log-probabilities at."""
        return float(self.sampling.get("temperature", 1.0) or 1.0)

    @classmethod
    def from_toml(cls, path: Path, **overrides: Any) -> "RLConfig":
        """The config in ``path``; ``overrides`` that are not None win over its keys."""
        data = read_toml(path)  # read as owrl.toml is: missing, non-UTF-8 and invalid files named
        data = resolve_aliases(data, str(path))
        for key, value in resolve_aliases({k: v for k, v in overrides.items() if v is not None}, "the command line").items():
            if key == "sampling":
                data["sampling"] = {**dict(data.get("sampling") or {}), **value}
            else:
                data[key] = value
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
        try:
            cfg: RLConfig = validate_table(cls, {"out": out, **data}, "the training config", str(path))
        except ConfigError as e:
            raise ConfigError(str(e).replace("RLConfig:", f"{path}:")) from None
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

#: One minibatch as the update scores it: its samples, their encoding, their token log-probabilities
#: under the policy that sampled them and under the reference, their sampling temperatures, and
#: each one's count of target tokens.
_Row = tuple[list[Any], Any, Any, Any, list[float], list[int]]


@dataclass
class _Tally:
    """What one :meth:`MMGRPO.update` counts as it goes, for its metrics."""

    #: The loss's metrics, summed over the minibatches trained (``minibatches`` of them).
    totals: dict[str, float] = field(default_factory=dict)
    minibatches: int = 0
    #: Target tokens trained, and all tokens through the model.
    tokens: int = 0
    seen: int = 0
    steps_taken: int = 0
    grad_norms: list[float] = field(default_factory=list)
    #: KL(sampling policy || current) as last measured (see :meth:`MMGRPO._update_metrics`).
    last_kl: float = 0.0
    #: With ``target_kl``: the KL of the iteration's first step, before any shrinking.
    first_kl: Optional[float] = None
    backtracks: int = 0
    undone: int = 0
    #: 1.0 once a step was undone and the iteration's updates stopped.
    stopped: float = 0.0
    #: The anchor set's SFT term, one value per optimizer step.
    anchor_nll: list[float] = field(default_factory=list)

    def add(self, metrics: dict[str, float], tokens: int, seen: int) -> None:
        """Count one minibatch's backward pass."""
        self.tokens += tokens
        self.seen += seen
        for k, v in metrics.items():
            self.totals[k] = self.totals.get(k, 0.0) + v
        self.minibatches += 1


class MMGRPO(Optimizer):
    """Token-level PPO-clip on group-relative advantages (asymmetric and dual clip, k3 KL to
    the starting adapter, entropy), turns weighed by ``loss_type``, an early stop at
    ``target_kl``, and a demonstration SFT term.

    Subclass and override :meth:`loss` to change the objective."""

    name = "mm-grpo"

    def __init__(self, settings: Any, model: Any = None, config: Optional[RLConfig] = None,
                 optimizer: Any = None, **options: Any):
        super().__init__(settings, **options)
        import torch

        if config is None:
            raise ConfigError("the mm-grpo optimizer needs its config (an RLConfig)")
        self.model = model
        self.cfg = config
        self.torch_optimizer = optimizer or torch.optim.AdamW(model.trainable_parameters(), lr=config.lr)
        #: The anchor set (:meth:`set_anchor`) and its fixed probe turns.
        self.anchor: list[Any] = []
        self.anchor_probe: list[Any] = []
        #: The policy's own successful turns (:meth:`set_own_anchor`), drawn with the anchor's.
        self.anchor_own: list[Any] = []
        self._probe_rows: list[_Row] = []
        self._anchor_kl: Optional[float] = None
        self._iteration = self._steps_drawn = 0

    def set_anchor(self, samples: list[Any]) -> None:
        """The anchor set (``RLConfig.anchor_data``): every optimizer step trains
        ``anchor_batch`` of ``samples`` through an SFT term (``anchor_coef``), and
        ``anchor_probe`` of them, each task in turn, are fixed turns on which the trust region
        measures the step's KL besides the iteration's own turns."""
        self.anchor = []
        for s in samples:
            s.meta.pop("token_ids", None)  # ids another model sampled are not this model's: the text is re-encoded
            self.anchor.append(s)
        queues: dict[str, list[Any]] = {}
        for s in self.anchor:
            queues.setdefault(str(s.meta.get("task", "")), []).append(s)
        probe: list[Any] = []
        want = min(int(self.cfg.anchor_probe), len(self.anchor))
        while len(probe) < want:
            for q in queues.values():
                if q and len(probe) < want:
                    probe.append(q.pop(0))
        self.anchor_probe = probe

    def set_own_anchor(self, samples: list[Any]) -> None:
        """The policy's own successful turns (``RLConfig.anchor_own``): the anchor's SFT term
        draws from them and the anchor set alike; the probe is left as it is."""
        self.anchor_own = list(samples)

    def loss(self, logp: Any, old_logp: Any, adv: Any, mask: Any, ref_logp: Any, entropy: Any,
             weights: Any = None) -> tuple[Any, dict[str, float]]:
        c = self.cfg
        return ppo_clip_loss(logp, old_logp, adv, mask, clip_low=c.clip_low, clip_high=c.clip_high,
                             ref_logp=ref_logp, kl_coef=c.kl_coef, entropy=entropy, entropy_coef=c.entropy_coef,
                             weights=weights, dual_clip=c.dual_clip, kl_clamp=c.kl_clamp)

    def optimize(self, samples: list[Any], iteration: int = 0) -> dict[str, Any]:
        """One MM-GRPO update (:meth:`update`) on samples with their advantages."""
        return self.update(samples, iteration=iteration)

    def plan(self, samples: list[Any], iteration: int = 0) -> list[list[list[Any]]]:
        """The iteration's turns as optimizer steps, each a list of minibatches: shuffled
        across groups (seeded by the run's seed and the iteration), then cut into
        ``optimizer_steps`` steps of near-equal size, each into minibatches of ``minibatch``."""
        c = self.cfg
        order = list(samples)
        if c.shuffle:
            random.Random(c.seed * 1_000_003 + iteration).shuffle(order)
        if not c.optimizer_steps:  # one step per minibatch (the trainer's behaviour before accumulation)
            return [[order[j:j + c.minibatch]] for j in range(0, len(order), c.minibatch)]
        n = max(1, min(int(c.optimizer_steps), len(order)))
        bounds = [round(i * len(order) / n) for i in range(n + 1)]
        steps = [order[bounds[i]:bounds[i + 1]] for i in range(n)]
        return [[step[j:j + c.minibatch] for j in range(0, len(step), c.minibatch)] for step in steps if step]

    def update(self, samples: list[Any], iteration: int = 0) -> dict[str, float]:
        """One MM-GRPO update on ``samples`` (turns with their advantages): ``ppo_epochs``
        passes over the iteration's optimizer steps (:meth:`plan`), each step held to the trust
        region, until a step has to be undone; the update's metrics (none without samples)."""
        if not samples:
            return {}
        self._iteration, self._steps_drawn = iteration, 0
        prepared = self._prepare(self.plan(samples, iteration))
        # the anchor probe as the policy scores it before the update: what the trust region holds it to
        self._probe_rows = self._prepare([[self.anchor_probe[j:j + self.cfg.minibatch] for j in
                                            range(0, len(self.anchor_probe), self.cfg.minibatch)]],
                                         reference=False)[0] if self.anchor_probe and self.cfg.target_kl else []
        self._anchor_kl = None
        tally = _Tally()
        started = time.perf_counter()
        for _ in range(self.cfg.ppo_epochs):
            for rows in prepared:
                if not self._optimizer_step(rows, prepared, tally):
                    break
            if tally.stopped:
                break
        return self._update_metrics(samples, tally, time.perf_counter() - started)

    def _prepare(self, plan: list[list[list[Any]]], reference: bool = True) -> list[list[_Row]]:
        """Each minibatch of each step, scored once before the update and without gradients:
        its log-probabilities under the policy that sampled it and (``reference``) under the
        reference."""
        import torch

        model, default_t = self.model, self.cfg.temperature
        prepared = []
        with torch.no_grad():
            for step in plan:
                rows: list[_Row] = []
                for b in step:
                    enc = model.encode(b)
                    temps = [float(s.meta.get("temperature", default_t)) for s in b]
                    old, mask, _ = model.token_logprobs(enc, temperature=temps)
                    ref = None
                    if reference:
                        with model.reference():  # KL to the start: logged even when kl_coef is 0
                            ref, _, _ = model.token_logprobs(enc, temperature=temps)
                    rows.append((b, enc, old, ref, temps, mask.sum(-1).tolist()))
                prepared.append(rows)
        return prepared

    def _optimizer_step(self, rows: list[_Row], prepared: list[list[_Row]], tally: _Tally) -> bool:
        """One optimizer step on the gradients of ``rows`` (a step's minibatches), skipped on a
        non-finite gradient and then held to the trust region (:meth:`_trust_region`). False:
        the step was undone, and the iteration's updates stop."""
        import math

        import torch

        c, model = self.cfg, self.model
        step_kl, step_tokens = self._accumulate(rows, tally)
        if not c.target_kl:
            tally.last_kl = step_kl / step_tokens if step_tokens else 0.0
        norm = float(torch.nn.utils.clip_grad_norm_(model.trainable_parameters(), c.max_grad_norm))
        tally.grad_norms.append(norm)
        if not math.isfinite(norm):  # a step on a non-finite gradient would ruin the adapter
            self.torch_optimizer.zero_grad(set_to_none=True)
            return True
        params = model.trainable_parameters()
        before = [p.detach().clone() for p in params] if c.target_kl else []
        self.torch_optimizer.step()
        tally.steps_taken += 1
        if not c.target_kl:
            return True
        return self._trust_region(prepared, params, before, tally)

    def _accumulate(self, rows: list[_Row], tally: _Tally) -> tuple[float, int]:
        """The gradients of one optimizer step, accumulated over its minibatches; the step's
        KL(old || new) summed over its sampled tokens (as its forward passes measured it), and
        how many tokens those are."""
        weight, n_demo = self._step_weights(rows)
        self.torch_optimizer.zero_grad(set_to_none=True)
        step_kl, step_tokens = 0.0, 0
        for i, row in enumerate(rows):
            kl, tokens = self._backward(i, row, weight, n_demo, tally)
            step_kl += kl
            step_tokens += tokens
        self._anchor_backward(tally)
        return step_kl, step_tokens

    def _anchor_backward(self, tally: _Tally) -> None:
        """The anchor set's SFT term (PPO-ptx): ``anchor_batch`` turns drawn for this step
        (seeded by the run's seed, the iteration and the step), their mean negative
        log-likelihood at temperature 1 (as SFT trained it) times ``anchor_coef``."""
        c = self.cfg
        pool = self.anchor + self.anchor_own
        if not (pool and c.anchor_coef and c.anchor_batch):
            return
        rng = random.Random((c.seed * 1_000_003 + self._iteration) * 1_009 + self._steps_drawn)
        self._steps_drawn += 1
        batch = rng.sample(pool, min(int(c.anchor_batch), len(pool)))
        enc = self.model.encode(batch)
        logp, mask, _ = self.model.token_logprobs(enc, temperature=[1.0] * len(batch))
        nll = demonstration_loss(logp, mask)
        (c.anchor_coef * nll).backward()
        tally.anchor_nll.append(float(nll.detach()))
        tally.tokens += int(mask.sum())
        tally.seen += int(enc["attention_mask"].sum())

    def _step_weights(self, rows: list[_Row]) -> tuple[dict[tuple[int, int], float], int]:
        """Each sampled turn's weight in one step's loss (``loss_type``), keyed by (minibatch,
        row), and how many rescue demonstrations the step holds."""
        pg = [(i, j) for i, (b, *_r) in enumerate(rows) for j, s in enumerate(b) if not s.meta.get("demo")]
        demo = [(i, j) for i, (b, *_r) in enumerate(rows) for j, s in enumerate(b) if s.meta.get("demo")]
        w = turn_weights(self.cfg.loss_type, [rows[i][0][j].meta.get("episode", f"{i}.{j}") for i, j in pg],
                         [int(rows[i][5][j]) for i, j in pg])
        return dict(zip(pg, w)), len(demo)

    def _backward(self, i: int, row: _Row, weight: dict[tuple[int, int], float], n_demo: int,
                  tally: _Tally) -> tuple[float, int]:
        """The forward and backward pass of minibatch ``i``: PPO-clip on its sampled turns, the
        SFT term (``demo_coef``) on its demonstrations; its metrics and tokens go to ``tally``.
        Returns its KL(old || new) summed over its sampled tokens, and how many those are."""
        import torch

        b, enc, old, ref, temps, _n = row
        logp, mask, entropy = self.model.token_logprobs(enc, with_entropy=True, temperature=temps)
        is_demo = torch.tensor([bool(s.meta.get("demo")) for s in b], device=logp.device)
        pg_mask = mask * (~is_demo).to(mask.dtype).unsqueeze(1)
        adv = torch.tensor([0.0 if s.meta.get("demo") else s.advantage for s in b], dtype=logp.dtype,
                           device=logp.device).unsqueeze(1).expand_as(logp)
        wt = torch.tensor([weight.get((i, j), 0.0) for j in range(len(b))], dtype=logp.dtype, device=logp.device)
        loss = logp.sum() * 0.0
        metrics: dict[str, float] = {}
        kl, n_pg = 0.0, 0
        if float(pg_mask.sum()) > 0:
            loss, metrics = self.loss(logp, old, adv, pg_mask, ref, entropy, weights=wt)
            n_pg = int(pg_mask.sum())
            kl = metrics.get("kl_old_new", 0.0) * n_pg
        if n_demo and bool(is_demo.any()):
            d_mask = mask * is_demo.to(mask.dtype).unsqueeze(1)
            d_loss = demonstration_loss(logp, d_mask, weights=is_demo.to(logp.dtype) / n_demo)
            loss = loss + self.cfg.demo_coef * d_loss
            metrics["demo_nll"] = float(d_loss.detach()) * n_demo / max(1, int(is_demo.sum()))
        loss.backward()
        tally.add(metrics, tokens=int(mask.sum()), seen=int(enc["attention_mask"].sum()))
        return kl, n_pg

    def _trust_region(self, prepared: list[list[_Row]], params: list[Any], before: list[Any], tally: _Tally) -> bool:
        """Hold the step just taken (``before`` -> ``params``) within ``target_kl`` of the policy
        that sampled: shrunk along its direction (:meth:`_shrink_step`), or undone if even the
        smallest shrink is not within it (False: the iteration's updates stop)."""
        import torch

        c = self.cfg
        kl = self._kl_from_sampler(prepared)
        if tally.first_kl is None:
            tally.first_kl = kl
        halvings = 0
        if kl > c.target_kl:
            kl, halvings = self._shrink_step(prepared, params, before, kl)
        tally.backtracks += halvings
        if kl > c.target_kl:
            with torch.no_grad():
                for p, p0 in zip(params, before):
                    p.copy_(p0)
            tally.steps_taken -= 1
            tally.undone += 1
            tally.stopped = 1.0
            return False
        tally.last_kl = kl
        return True

    def _shrink_step(self, prepared: list[list[_Row]], params: list[Any], before: list[Any],
                     kl: float) -> tuple[float, int]:
        """The trust region's line search: the step scaled back along its direction until its
        ``kl`` from the sampling policy is within ``target_kl``, at most ``kl_backtracks`` times.
        The first shrink is sized by the KL's quadratic growth with the step (KL ~ scale^2), so
        one forward pass over the turns usually settles it; then halvings. Returns the KL
        reached and the shrinks made."""
        import math

        import torch

        c = self.cfg
        direction = [p.detach() - p0 for p, p0 in zip(params, before)]
        scale, halvings = 1.0, 0
        while kl > c.target_kl and halvings < c.kl_backtracks:
            halvings += 1
            scale = min(scale * 0.5, 0.9 * scale * math.sqrt(c.target_kl / kl)) if halvings == 1 else scale * 0.5
            with torch.no_grad():
                for p, p0, d in zip(params, before, direction):
                    p.copy_(p0 + d * scale)
            kl = self._kl_from_sampler(prepared)
        return kl, halvings

    def _update_metrics(self, samples: list[Any], tally: _Tally, seconds: float) -> dict[str, float]:
        """The update's metrics: the loss's, averaged over minibatches, then the trust region's,
        the gradient norms, throughput and the learning rate (:meth:`_adapt_lr` sets the next)."""
        count = tally.minibatches
        out = {k: v / count for k, v in tally.totals.items()} if count else {}
        # with target_kl: measured after the last step kept, on all the iteration's sampled turns;
        # without: measured during the last step's forward (the move of the steps before it)
        out["kl_old_new"] = tally.last_kl
        out["kl_backtracks"] = float(tally.backtracks)
        out["steps_undone"] = float(tally.undone)
        grad_norms = tally.grad_norms
        out["grad_norm"] = sum(grad_norms) / len(grad_norms) if grad_norms else 0.0
        out["grad_norm_max"] = max(grad_norms) if grad_norms else 0.0
        out["optimizer_steps"] = float(tally.steps_taken)
        out["stopped_at_target_kl"] = tally.stopped
        # target tokens (the ones trained) and all tokens through the model, per second of update
        out["update_tokens_per_s"] = tally.tokens / seconds if seconds > 0 else 0.0
        out["update_all_tokens_per_s"] = tally.seen / seconds if seconds > 0 else 0.0
        out["lr"] = self._adapt_lr(tally.first_kl)
        if tally.first_kl is not None:
            out["kl_first_step"] = tally.first_kl
        out["samples"] = float(len(samples))
        out["demo_samples"] = float(sum(1 for s in samples if s.meta.get("demo")))
        if tally.anchor_nll:
            out["anchor_nll"] = sum(tally.anchor_nll) / len(tally.anchor_nll)
        if self._anchor_kl is not None:  # the anchor probe's KL after the last step kept
            out["kl_anchor"] = self._anchor_kl
        return out

    def _adapt_lr(self, first_kl: Optional[float]) -> float:
        """Set the learning rate the next iteration runs at (``adaptive_lr``) from the KL its
        first step reached; returns the rate this iteration ran at."""
        import math

        c = self.cfg
        groups = self.torch_optimizer.param_groups
        ran = float(groups[0]["lr"])
        if not (c.adaptive_lr and c.target_kl and first_kl is not None and math.isfinite(first_kl)):
            return ran
        aim = c.target_kl / max(1, int(c.optimizer_steps) or 1)
        factor = 1.5 if first_kl <= 0 else min(1.5, max(0.25, math.sqrt(aim / first_kl)))
        new = min(float(c.lr), max(float(c.lr) * 1e-3, ran * factor))
        for group in groups:
            group["lr"] = new
        return ran

    def _kl_from_sampler(self, prepared: list[list[_Row]]) -> float:
        """KL(policy before the update || current) per token over every turn the iteration
        trains, without gradients: on the sampled turns, KL from the policy that sampled; on a
        rescue demonstration's turns, the same estimate of how far the update moved the policy
        there. The demonstrations count too: with Adam, a term's small weight does not make a
        small step when it is the only term, so an iteration that trains only a demonstration
        would otherwise move the adapter unbounded. With an anchor set, the larger of that and
        the same KL on the anchor's fixed probe turns."""
        kl = self._mean_kl(prepared)
        if self._probe_rows:  # the anchor's fixed turns: the families this iteration did not play
            self._anchor_kl = self._mean_kl([self._probe_rows])
            kl = max(kl, self._anchor_kl)
        return kl

    def _mean_kl(self, prepared: list[list[_Row]]) -> float:
        """KL(scored before the update || current) per target token of ``prepared``."""
        import torch

        total, count = 0.0, 0
        with torch.no_grad():
            for rows in prepared:
                for _b, enc, old, _ref, temps, _n in rows:
                    logp, mask, _ = self.model.token_logprobs(enc, temperature=temps)
                    total += float((sampled_kl(old, logp) * mask).sum())
                    count += int(mask.sum())
        return total / count if count else 0.0


# ============================================================================ the loop


@dataclass
class _Judged:
    """An iteration's episodes, judged."""

    #: Every episode played, rescue demonstrations included.
    trajectories: list[Trajectory]
    #: The groups' members (a rescue demonstration is none), with their rewards (None: an
    #: infrastructure error) and group-relative advantages (None: not trained).
    own: list[Trajectory]
    rewards: list[Optional[float]]
    advantages: list[Optional[float]]
    stats: GroupStats
    #: Successes per task of the policy's own episodes (rescued ones aside), and per group.
    by_task: dict[str, list[bool]]
    members: dict[str, list[bool]]


@dataclass
class IterationResult:
    iteration: int
    metrics: dict[str, float]
    #: Alarms raised this iteration (``RLConfig.alarms``), each a line saying what crossed what.
    alarms: list[str] = field(default_factory=list)
    #: What was done about them: "", "warned", "rolled back" or "stopped".
    action: str = ""


class RLRun:
    def __init__(self, cfg: RLConfig, rollouts: Rollouts, settings: Any = None, plugins: Any = None,
                 tasks: Optional[list[Task]] = None, model: Any = None, demonstrator: Any = None):
        cfg.check("RLConfig")
        if cfg.rescue == "demo" and demonstrator is None:
            raise ConfigError("rescue = 'demo' needs a demonstrator policy (RLRun(demonstrator=...))")
        if cfg.rescue == "hot" and cfg.serve_base_url:
            raise ConfigError("rescue = 'hot' samples with the trainer's own policy: it cannot rescue served rollouts")
        self.demonstrator = demonstrator
        self.cfg = cfg
        self.rollouts = rollouts
        # (validated rather than called: mypy reads the Field defaults of Settings as required arguments)
        self.settings = settings or Settings.model_validate({})
        if plugins is None:  # handed over: the caller's plugins are the ones its suite and judge came from
            raise ConfigError("RLRun needs the plugins its rollouts use: RLRun(..., plugins=...), an "
                              "owrl_sdk.contract.plugins.Plugins")
        self.plugins = plugins
        cat = self.plugins.catalogue
        self.model = model or _model.TrainableVL(cfg.model, lora_r=cfg.lora_r, four_bit=cfg.four_bit, seed=cfg.seed,
                                                 autocast=cfg.autocast, catalogue=cat)
        self.optimizer = cat.get("optimizers", cfg.optimizer)(self.settings, model=self.model, config=cfg)
        self.sampler: TaskSampler = cat.get("samplers", cfg.sampler)(self.settings, **cfg.sampler_options)
        self.reward: Reward = cat.get("rewards", cfg.reward)(self.settings)
        self.pool = tasks if tasks is not None else self._pool()
        self.state: dict[str, Any] = {"iteration": 0}
        reference = cfg.out / "reference" / "adapter_model.safetensors"
        last = latest_checkpoint(cfg.out / "checkpoints")
        if last is None or not reference.is_file():
            # the anchor: the policy RL starts from (the SFT adapter), frozen, kept for a resumed run
            if last is not None:
                import warnings

                warnings.warn(f"{cfg.out}: no frozen reference in this run's folder (made before it kept one); "
                              "the reference is the adapter as resumed", stacklevel=2)
        if last is not None:
            self.state = load_checkpoint(last, self.model, self.optimizer.torch_optimizer)
            self.sampler.load_state_dict(self.state.get("sampler", {}))
        self._write_config()
        if reference.is_file():
            self.model.load_reference(reference)
        else:
            self.model.freeze_reference()
            self.model.save_reference(reference)

        OpenWebRLPolicy = peer_policy(catalogue=cat)
        TextPolicy = peer_policy(OpenWebRLPolicy.text_policy, catalogue=cat)

        if self.model.backend.kind == "text":
            self.policy = TextPolicy(self.settings, backend=self.model.backend, **cfg.sampling, **cfg.policy_options)
        else:
            self.policy = OpenWebRLPolicy(self.settings, backend=self.model.backend, text_mode=cfg.text_mode,
                                          **cfg.sampling, **cfg.policy_options)

        if cfg.anchor_data:
            self._load_anchor(cfg.anchor_data)
        if cfg.anchor_own:
            if not hasattr(self.optimizer, "set_own_anchor"):
                raise ConfigError(f"anchor_own: the {cfg.optimizer!r} optimizer takes no anchor set")
            self._load_own_anchor()  # a resumed run's, as its last checkpoint left them

        self.publisher: Any = None
        if cfg.serve_base_url:
            self.publisher = AdapterPublisher(cfg.serve_base_url, cfg.out / "published", name=cfg.adapter_name,
                                              keep=cfg.max_staleness)

    def _load_anchor(self, source: str) -> None:
        """Hand the optimizer its anchor set: the turns of ``source``'s successful episodes,
        rendered as the rollout policy renders its prompts."""
        if not hasattr(self.optimizer, "set_anchor"):
            raise ConfigError(f"anchor_data: the {self.cfg.optimizer!r} optimizer takes no anchor set")
        samples = load_samples(source, catalogue=self.plugins.catalogue, render=self.policy.prompt,
                               tools=self._tools())
        limit = int(getattr(getattr(self.policy, "sampling", None), "max_new_tokens", 0) or 0)
        longest, over = _model.answer_lengths(self.model.tokenizer, samples, limit or None)
        if over:
            import warnings

            warnings.warn(f"anchor_data: {over} of {len(samples)} turns are longer than the rollouts' "
                          f"max_new_tokens ({limit}; the longest is {longest} tokens): the policy is cut before it "
                          f"ends them, so RL cannot reach what the anchor teaches (raise max_new_tokens)", stacklevel=2)
        self.optimizer.set_anchor(samples)

    @property
    def _own_anchor_dir(self) -> Path:
        return self.cfg.out / "anchor-own"

    def _keep_own_successes(self, it: int, judged: "_Judged") -> None:
        """Copy iteration ``it``'s clean successes (every turn readable, the policy's own) into
        ``OUT/anchor-own/TASK/``, keep the newest ``anchor_own`` per task, and hand their turns
        to the optimizer."""
        root = self._own_anchor_dir
        for traj in judged.own:
            run_dir = traj.metadata.get("run_dir")
            if traj.metadata.get("rescued") or not run_dir or not _succeeded(traj) or _unreadable_turns(traj):
                continue
            dest = root / _slug(traj.task.id) / f"{it:05d}-{Path(run_dir).name}"
            if not dest.exists():
                shutil.copytree(run_dir, dest)
        if root.is_dir():
            for task_dir in root.iterdir():
                for old in sorted(p for p in task_dir.iterdir() if p.is_dir())[:-int(self.cfg.anchor_own)]:
                    shutil.rmtree(old, ignore_errors=True)
        self._load_own_anchor()

    def _load_own_anchor(self) -> None:
        root = self._own_anchor_dir
        samples: list[Sample] = []
        for run in sorted(root.glob("*/*/trajectory.json")):
            try:
                samples += load_samples(str(run), catalogue=self.plugins.catalogue, render=self.policy.prompt,
                                        tools=self._tools())
            except (UsageError, DocumentError):  # a copy cut short by a kill: the next success replaces it
                continue
        self.optimizer.set_own_anchor(samples)

    def _write_config(self) -> None:
        """``OUT/config.json``: every setting this run trains with, defaults included, so that
        a run's figures can be read with the choices that made them."""
        import dataclasses

        out = self.cfg.out
        out.mkdir(parents=True, exist_ok=True)
        values = {f.name: getattr(self.cfg, f.name) for f in dataclasses.fields(self.cfg)}
        write_atomic(out / "config.json", json.dumps(values, indent=2, default=str))

    def _rollout_policy(self, it: int) -> Any:
        """The trainer's own policy, or (served) the ``openai`` policy naming adapter version ``it``."""
        if self.publisher is None:
            return self.policy
        model = self.publisher.publish(self.model, it)
        # text tool calls: the policy being trained writes <tool_call> blocks, and its prompt
        # declares the tools as the trainer's own prompt does (native calls would change both)
        options = {"base_url": self.cfg.serve_base_url, "model": model, "text_mode": self.cfg.text_mode,
                   "tool_calls": "text", **self.cfg.sampling, **self.cfg.policy_options}
        return PolicySpec("openai", options)

    def _pool(self) -> list[Task]:
        suite = self.plugins.catalogue.get("task_suites", self.cfg.suite)(self.settings)
        tasks: list[Task] = suite.tasks()
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
            done, saved = self.start_iteration - 1, self.state.get("metrics")
            if done >= 0 and saved and scalars.last_step() < done:
                # killed after its checkpoint and before its line: the iteration's metrics, from the checkpoint
                scalars.log(done, saved, prefix="rl/")
            for it in range(self.start_iteration, self.cfg.iterations):
                result = await self.iteration(it)
                scalars.log(it, result.metrics, prefix="rl/")
                results.append(result)
                if on_iteration:
                    on_iteration(result)
                if result.action == "stopped":
                    break
        finally:
            scalars.close()
        return results

    # ------------------------------------------------------------------ one iteration

    def _scored(self, traj: Trajectory) -> Trajectory:
        """The trajectory as the reward reads it: with ``unreadable = "turn"`` a format
        failure does not gate the task's verdict (:func:`owrl_train.rewards.ungated`)."""
        return ungated(traj) if self.cfg.unreadable == "turn" else traj

    def _samples(self, traj: Trajectory, advantage: Optional[float]) -> list[Sample]:
        """The turns of one episode to train on, each with its advantage (see RLConfig)."""
        cfg = self.cfg
        rescued = traj.metadata.get("rescued")
        run_dir = Path(traj.metadata["run_dir"]) if traj.metadata.get("run_dir") else None
        demo = rescued == "demo"
        samples = trajectory_samples(traj, run_dir, tools=self._tools(), advantage=advantage or 0.0,
                                     unreadable=cfg.unreadable == "turn" and not demo, render=self.policy.prompt,
                                     catalogue=self.plugins.catalogue)
        temperature = cfg.rescue_temperature if rescued == "hot" else cfg.temperature
        out = []
        for s in samples:
            s.meta["temperature"] = temperature
            if demo:
                s.meta["demo"] = True
                s.meta.pop("token_ids", None)  # the demonstrator's ids are not this model's
                out.append(s)
                continue
            cut = s.meta.get("truncated")
            if cut and cfg.truncated == "mask":
                continue
            if s.meta.get("unreadable") or (cut and cfg.truncated == "penalize"):
                s.advantage = cfg.unreadable_advantage
            elif advantage is None:
                continue
            out.append(s)
        return out

    def _alarms(self, metrics: dict[str, float], when: str) -> list[str]:
        """The alarms that ``metrics`` cross: ``when`` is "rollouts" (what the current policy
        played) or "update" (what the update did)."""
        a = self.cfg.alarms
        raised = []
        if when == "rollouts":
            base = self.state.get("first_parse_error_rate")
            rate = metrics.get("parse_error_rate")
            if "parse_error_rise" in a and base is not None and rate is not None and rate - base > a["parse_error_rise"]:
                raised.append(f"unreadable turns at {rate:.0%}, up {rate - base:.0%} from {base:.0%} "
                              f"(alarm at +{a['parse_error_rise']:.0%})")
            probe, first = metrics.get("probe_success"), self.state.get("first_probe_success")
            if "probe_drop" in a and probe is not None and first is not None and first - probe > a["probe_drop"]:
                raised.append(f"greedy probe at {probe:.0%}, down {first - probe:.0%} from {first:.0%} "
                              f"(alarm at -{a['probe_drop']:.0%})")
        else:
            if "kl" in a and metrics.get("kl", 0.0) > a["kl"]:
                raised.append(f"KL to the reference {metrics['kl']:.3f} (alarm at {a['kl']:g})")
            if "drift" in a and metrics.get("adapter_drift", 0.0) > a["drift"]:
                raised.append(f"adapter drift {metrics['adapter_drift']:.3f} (alarm at {a['drift']:g})")
            import math

            if not math.isfinite(metrics.get("grad_norm_max", 0.0)):
                raised.append("a non-finite gradient norm")
        return raised

    def _good(self) -> Path:
        return self.cfg.out / "good"

    def _keep_good(self) -> None:
        """The current policy's rollouts passed their alarms: it is the one to roll back to."""
        save_checkpoint(self._good(), "good", self.model, self.optimizer.torch_optimizer, dict(self.state), keep=1)

    def _roll_back(self) -> bool:
        good = self._good() / "good"
        if not (good / "state.json").is_file():
            return False
        load_checkpoint(good, self.model, self.optimizer.torch_optimizer)
        return True

    async def iteration(self, it: int) -> IterationResult:
        """One iteration (see the module doc): the probe when due, the rollouts, their rewards
        and advantages, the update unless an alarm answers otherwise, then a checkpoint and
        the rollouts' summary."""
        cfg = self.cfg
        t0 = time.perf_counter()
        probe = await self._probe(it) if cfg.probe_every and it % cfg.probe_every == 0 else None
        trajectories = await self._rollouts(it)
        dropped_stale = 0
        if self.publisher is not None:
            trajectories, dropped_stale = drop_stale(trajectories, cfg.adapter_name, it, cfg.max_staleness)
        t1 = time.perf_counter()
        judged = self._judge(trajectories)
        for task_id, successes in judged.by_task.items():
            self.sampler.update(task_id, successes)
        samples = self._training_samples(judged)
        if self.cfg.anchor_own:  # before the update, so that this iteration's successes are held already
            self._keep_own_successes(it, judged)
        metrics = self._rollout_metrics(it, judged, samples, dropped_stale, probe)
        if self.cfg.anchor_own:
            metrics["anchor_own_turns"] = float(len(self.optimizer.anchor_own))
        self._keep_baselines(metrics, probe, judged.own)
        alarms = self._alarms(metrics, "rollouts")
        t2 = time.perf_counter()
        action, update = self._update_unless_alarmed(samples, it, alarms)
        t3 = time.perf_counter()
        metrics.update(update)
        metrics["adapter_drift"] = float(self.model.adapter_drift())
        if not action:
            after = self._alarms(metrics, "update")
            if after:
                alarms += after
                action = self._answer_alarms()
        if alarms and not action:
            action = "warned"
        metrics["alarms"] = float(len(alarms))
        metrics["rolled_back"] = float(action == "rolled back")
        metrics.update(time_rollout_s=t1 - t0, time_judge_s=t2 - t1, time_update_s=t3 - t2)
        self.state = {**{k: v for k, v in self.state.items() if k.startswith("first_")},
                      "iteration": it + 1, "sampler": self.sampler.state_dict(), "metrics": metrics,
                      "alarms": alarms, "action": action}
        save_checkpoint(cfg.out / "checkpoints", f"iter-{it:05d}", self.model, self.optimizer.torch_optimizer, self.state)
        self._summarise(it, trajectories, judged.rewards, judged.advantages, judged.own)
        return IterationResult(it, metrics, alarms, action)

    def _judge(self, trajectories: list[Trajectory]) -> _Judged:
        """The rewards (set on each group member), group-relative advantages and successes of
        an iteration's episodes."""
        own = [t for t in trajectories if t.metadata.get("rescued") != "demo"]  # the demonstration is not a group member
        scored = [self._scored(t) for t in own]
        rewards: list[Optional[float]] = []
        for traj, view in zip(own, scored):
            r = self.reward.reward(view)
            traj.reward = r
            rewards.append(r)
        advantages, stats = group_advantages([traj.metadata["group"] for traj in own], rewards)
        by_task: dict[str, list[bool]] = {}
        members: dict[str, list[bool]] = {}
        for traj, view, r in zip(own, scored, rewards):
            if r is not None and not traj.metadata.get("rescued"):  # the policy's own episodes only
                by_task.setdefault(traj.task.id, []).append(_succeeded(view))
            if r is not None:
                members.setdefault(traj.metadata["group"], []).append(_succeeded(view))
        return _Judged(trajectories, own, rewards, advantages, stats, by_task, members)

    def _training_samples(self, judged: _Judged) -> list[Sample]:
        """The turns the update trains on: the judged group members' (an infrastructure error
        is never trained on), then the rescue demonstrations'."""
        samples: list[Sample] = []
        for traj, r, adv in zip(judged.own, judged.rewards, judged.advantages):
            if r is not None:
                samples.extend(self._samples(traj, adv))
        for traj in judged.trajectories:
            if traj.metadata.get("rescued") == "demo":
                samples.extend(self._samples(traj, None))
        return samples

    def _rollout_metrics(self, it: int, judged: _Judged, samples: list[Sample], dropped_stale: int,
                         probe: Optional[float]) -> dict[str, float]:
        """What the rollouts showed, before the update: rewards and successes (per task and in
        the greedy probe too), groups, answers unreadable or cut, and what the update will train."""
        own, stats = judged.own, judged.stats
        turns = _policy_turns(own)
        rewards = [r for r in judged.rewards if r is not None]
        successes = [s for v in judged.by_task.values() for s in v]
        members = judged.members.values()
        metrics: dict[str, float] = {
            "reward_mean": sum(rewards) / len(rewards) if rewards else 0.0,
            "success_rate": sum(successes) / len(successes) if successes else 0.0,
            "valid_group_fraction": stats.valid_fraction,
            "groups": float(stats.groups),
            "all_fail_groups": float(sum(1 for v in members if len(v) > 1 and not any(v))),
            "all_success_groups": float(sum(1 for v in members if len(v) > 1 and all(v))),
            "dropped_infra": float(stats.dropped_infra),
            "dropped_stale": float(dropped_stale),
            "mean_steps": sum(len(t.steps) for t in own) / len(own) if own else 0.0,
            "max_steps": float(self.cfg.max_steps(it)),
            "parse_error_rate": sum(1 for t in turns if t.parse_error or (t.raw is not None and not t.calls))
            / len(turns) if turns else 0.0,
            "truncation_rate": sum(1 for t in turns if t.truncated or t.usage.get("finish_reason") == "length")
            / len(turns) if turns else 0.0,
            "rescued_groups": float(len({t.metadata["group"] for t in judged.trajectories if t.metadata.get("rescued")})),
            "trained_turns": float(len(samples)),
            "unreadable_turns_trained": float(sum(1 for x in samples if x.meta.get("unreadable"))),
        }
        for task_id, v in sorted(judged.by_task.items()):
            metrics[f"success/{task_id}"] = sum(v) / len(v)
        if probe is not None:
            metrics["probe_success"] = probe
        metrics["advantage_mass"] = self._advantage_mass(samples)
        return metrics

    def _advantage_mass(self, samples: list[Sample]) -> float:
        """The net push of the update: the advantages as the loss weighs them (< 0: mostly
        "do less of this")."""
        pg = [x for x in samples if not x.meta.get("demo")]
        w = turn_weights(self.cfg.loss_type, [x.meta.get("episode", str(i)) for i, x in enumerate(pg)],
                         [len(x.meta.get("token_ids") or x.target) for x in pg])
        return sum(wi * x.advantage for wi, x in zip(w, pg))

    def _keep_baselines(self, metrics: dict[str, float], probe: Optional[float], own: list[Trajectory]) -> None:
        """The first probe success and share of unreadable turns, which the alarms measure
        falls and rises from (``probe_drop``, ``parse_error_rise``)."""
        if probe is not None:
            self.state.setdefault("first_probe_success", probe)
        if "first_parse_error_rate" not in self.state and _policy_turns(own):
            self.state["first_parse_error_rate"] = metrics["parse_error_rate"]

    def _update_unless_alarmed(self, samples: list[Sample], it: int, alarms: list[str]) -> tuple[str, dict[str, float]]:
        """The update, unless ``on_alarm`` answers the rollouts' alarms by rolling back or
        stopping (the policy that played them is not trained on): what was done, and the
        update's metrics. Rollouts without alarms make their policy the one to roll back to."""
        action = self._answer_alarms() if alarms else ""
        if action:
            return action, {}
        if not alarms:
            self._keep_good()
        update: dict[str, float] = self.optimizer.optimize(samples, iteration=it) if _takes_iteration(self.optimizer) \
            else self.optimizer.optimize(samples)
        return "", update

    def _answer_alarms(self) -> str:
        """What ``on_alarm`` does about alarms raised: "rolled back" (to the last good
        checkpoint, when there is one), "stopped", or "" (a warning only)."""
        if self.cfg.on_alarm == "rollback" and self._roll_back():
            return "rolled back"
        if self.cfg.on_alarm == "stop":
            return "stopped"
        return ""

    def _summarise(self, it: int, trajectories: list[Trajectory], rewards: list[Optional[float]],
                   advantages: list[Optional[float]], own: list[Trajectory]) -> None:
        """``rollouts/iter-N/summary.jsonl``: one line per episode (what it said, its reward
        and advantage), kept after the checkpoint so that a collapse can be read afterwards;
        the episodes' run folders go unless ``keep_rollouts``."""
        cache = self._cache_dir(it)
        cache.mkdir(parents=True, exist_ok=True)
        scores = {id(t): (r, a) for t, r, a in zip(own, rewards, advantages)}
        lines = []
        for t in trajectories:
            r, a = scores.get(id(t), (None, None))
            lines.append(json.dumps({
                "group": t.metadata.get("group"), "task": t.task.id, "seed": t.task.metadata.get("seed"),
                "rescued": t.metadata.get("rescued"), "status": t.outcome.status if t.outcome else None,
                "success": _succeeded(self._scored(t)), "reward": r, "advantage": a, "steps": len(t.steps),
                "unreadable_turns": sum(1 for s in t.steps if s.turn.parse_error),
                "said": said(t)[:4000]}, ensure_ascii=False))
        write_atomic(cache / "summary.jsonl", "\n".join(lines) + ("\n" if lines else ""))
        if not self.cfg.keep_rollouts:  # the checkpoint now holds what they taught
            for child in cache.iterdir():
                if child.name != "summary.jsonl":
                    shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)

    async def _probe(self, it: int) -> Optional[float]:
        """The greedy probe: ``probe_tasks`` played at temperature 0 by the current policy,
        the same episodes every time (fixed group names); its success rate."""
        import dataclasses

        if self.publisher is not None:
            return None  # the served policy's sampling is the server's: no greedy probe
        cfg = self.cfg
        wanted = cfg.probe_tasks or [t.id for t in self.pool[:4]]
        by_id = {t.id: t for t in self.pool}
        tasks = [by_id[w] for w in wanted if w in by_id]
        if not tasks:
            return None
        items = [(f"probe:{t.id}:{n}", t, n) for t in tasks for n in range(cfg.probe_episodes)]
        policy = self.policy
        sampling = policy.sampling
        policy.sampling = dataclasses.replace(sampling, temperature=0.0)
        out = self._cache_dir(it) / "probe"
        try:
            played = await self.rollouts.collect(policy, items, cfg.max_steps(it), out)
        finally:
            policy.sampling = sampling
        by_task: dict[str, list[bool]] = {}
        for t in played:
            if t.outcome is None or t.outcome.status != "infra_error":
                by_task.setdefault(t.task.id, []).append(_succeeded(self._scored(t)))
        outcomes = [s for successes in by_task.values() for s in successes]
        rate = sum(outcomes) / len(outcomes) if outcomes else 0.0
        if cfg.probe_feeds_sampler:
            for task_id, successes in by_task.items():
                self.sampler.update(task_id, successes)
        shutil.rmtree(out, ignore_errors=True)
        return rate

    async def _rescue(self, it: int, items: list[tuple[str, Task, int]], trajectories: list[Trajectory],
                      cache: Path) -> list[Trajectory]:
        """Groups where every episode failed, given a second chance (``RLConfig.rescue``)."""
        import dataclasses

        failed = set(_failed_groups([self._scored(t) for t in trajectories]))
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
            keep = {t.metadata["group"] for t in hot if _succeeded(self._scored(t))}
            for t in hot:
                t.metadata["rescued"] = "hot"
            return [t for t in trajectories if t.metadata["group"] not in keep] + [
                t for t in hot if t.metadata["group"] in keep]
        first: dict[str, tuple[str, Task, int]] = {}
        for item in again:
            first.setdefault(item[0], item)
        shown = await self.rollouts.collect(self.demonstrator, list(first.values()), max_steps, cache / "rescue")
        demos = [t for t in shown if _succeeded(t)]
        for t in demos:  # beside the group, not in it: the SFT term trains on it (demo_coef)
            t.metadata["rescued"] = "demo"
        return trajectories + demos

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

    def _tasks(self, pool: list[Task], n: int, rng: random.Random) -> list[Task]:
        """``n`` tasks from the sampler, ``practice_share`` of them (rounded down) from tasks
        already solved in 80% of their episodes or more, when there are such tasks."""
        practice = int(self.cfg.practice_share * n)
        solved = [t for t in pool if (rate := self.sampler.failure_rate(t.id)) is not None and rate <= 0.2]
        if not practice or not solved:
            return self.sampler.sample(pool, n, rng)
        return self.sampler.sample(pool, n - practice, rng) + [rng.choice(solved) for _ in range(practice)]

    def _valid_groups(self, trajectories: list[Trajectory]) -> int:
        rewards: dict[str, set[float]] = {}
        for t in trajectories:
            if t.metadata.get("rescued") == "demo":
                continue
            r = self.reward.reward(self._scored(t))
            if r is not None:
                rewards.setdefault(t.metadata["group"], set()).add(round(float(r), 9))
        return sum(1 for v in rewards.values() if len(v) > 1)

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
        blocklist = Blocklist()
        pool = [t for t in self.pool if not blocklist.blocked(host_of(t.start_url))]
        if not pool:
            raise ConfigError("every task's host is blocked after network failures: see `owrl blocklist list`")
        trajectories: list[Trajectory] = []
        draw = 0
        while True:
            tasks = self._tasks(pool, self.cfg.tasks_per_iteration, rng)
            tag = f"{it}" if draw == 0 else f"{it}d{draw}"
            items = [(f"{t.id}@{tag}.{k}", t, n) for k, t in enumerate(tasks) for n in range(self.cfg.group_size)]
            where = cache if draw == 0 else cache / f"draw-{draw}"
            played = await self.rollouts.collect(self._rollout_policy(it), items, self.cfg.max_steps(it), where)
            if self.cfg.rescue != "none":
                played = await self._rescue(it, items, played, where)
            trajectories += played
            want = self.cfg.dynamic_sampling_groups
            if not want or draw >= self.cfg.dynamic_sampling_draws or self._valid_groups(trajectories) >= want:
                break
            draw += 1
        entries = [{"group": t.metadata["group"], "trajectory": str(Path(t.metadata["run_dir"]) / "trajectory.json"),
                    "rescued": t.metadata.get("rescued")}
                   for t in trajectories if t.metadata.get("run_dir")]
        if len(entries) == len(trajectories):
            write_atomic(index, json.dumps(entries))
        return trajectories


def _takes_iteration(optimizer: Any) -> bool:
    import inspect

    try:
        return "iteration" in inspect.signature(optimizer.optimize).parameters
    except (TypeError, ValueError):
        return False


def _policy_turns(trajectories: list[Trajectory]) -> list[Turn]:
    """The turns the policy itself played in ``trajectories`` (rescued episodes aside)."""
    return [s.turn for t in trajectories if t.metadata.get("rescued") is None for s in t.steps]


def _unreadable_turns(traj: Trajectory) -> int:
    """Turns of ``traj`` whose answer could not be read as calls."""
    return sum(1 for s in traj.steps if s.turn is not None and (s.turn.parse_error or not s.turn.calls))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:80] or "task"


def _succeeded(traj: Trajectory) -> bool:
    return bool(traj.judgements and traj.judgements[-1].success)


def _failed_groups(trajectories: list[Trajectory]) -> list[str]:
    """Groups of two or more judged episodes where none succeeded (infrastructure errors aside)."""
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        if t.outcome is None or t.outcome.status != "infra_error":
            groups.setdefault(t.metadata["group"], []).append(t)
    return [g for g, ts in groups.items() if len(ts) > 1 and not any(_succeeded(t) for t in ts)]


