"""Task samplers for online RL: which tasks the next iteration practises.

Each keeps per-task success history (``update``) and can be saved and restored with the
trainer's checkpoint (``state_dict`` / ``load_state_dict``). Their options (the RL config's
``sampler_options``, on top of ``[plugins.NAME]``) are typed by each one's ``Options`` model.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.api import Task, TaskSampler, validate_table


def _read(sampler: TaskSampler, settings: Any, options: dict[str, Any]) -> Any:
    """``[plugins.NAME]`` with the given options on top, validated as the sampler's ``Options``."""
    if sampler.Options is None:
        raise TypeError(f"{type(sampler).__name__} reads options but declares no Options model")
    if settings is not None and hasattr(settings, "options"):
        return settings.options(sampler.name, sampler.Options, **options)
    return validate_table(sampler.Options, options, f"[plugins.{sampler.name}]", "sampler_options")


#: The difficulty buckets of :class:`BucketSampler`.
Bucket = Literal["unseen", "hard", "learnable", "solved"]


class FailureWeightedOptions(BaseModel):
    """``[plugins.failure-weighted]`` (or ``sampler_options``): when a task weighs more."""

    model_config = ConfigDict(extra="forbid")

    threshold: float = Field(0.6, ge=0, le=1, description="failure rate above which a task is boosted")
    boost: float = Field(3.0, ge=0, description="weight of a boosted task (others weigh 1)")


class BucketOptions(BaseModel):
    """``[plugins.buckets]`` (or ``sampler_options``): the weight of each difficulty bucket."""

    model_config = ConfigDict(extra="forbid")

    weights: dict[Bucket, float] = Field(
        default_factory=dict, description="bucket -> weight, on top of unseen 1, hard 2, learnable 3, solved 0.5")


class UniformSampler(TaskSampler):
    name = "uniform"


class FailureWeightedSampler(TaskSampler):
    """OpenWebRL's rule: a task failed in more than 60% of its episodes weighs 3x."""

    name = "failure-weighted"
    Options = FailureWeightedOptions

    def __init__(self, settings: Any = None, **options: Any):
        super().__init__(settings, **options)
        self.conf: FailureWeightedOptions = _read(self, settings, options)

    def weight(self, task: Task) -> float:
        rate = self.failure_rate(task.id)
        return self.conf.boost if rate is not None and rate > self.conf.threshold else 1.0


class BucketSampler(TaskSampler):
    """Difficulty buckets by success history: unseen, hard (< 20% success), learnable
    (20-80%) and solved (> 80%), each with a weight (defaults 1, 2, 3, 0.5): practice goes
    where the group has reward variance to learn from."""

    name = "buckets"
    Options = BucketOptions
    DEFAULT: ClassVar[dict[Bucket, float]] = {"unseen": 1.0, "hard": 2.0, "learnable": 3.0, "solved": 0.5}

    def __init__(self, settings: Any = None, **options: Any):
        super().__init__(settings, **options)
        self.conf: BucketOptions = _read(self, settings, options)

    def bucket(self, task_id: str) -> Bucket:
        rate = self.failure_rate(task_id)
        if rate is None:
            return "unseen"
        success = 1.0 - rate
        return "hard" if success < 0.2 else "solved" if success > 0.8 else "learnable"

    def weight(self, task: Task) -> float:
        weights = {**self.DEFAULT, **self.conf.weights}
        return weights[self.bucket(task.id)]


SAMPLERS = (UniformSampler, FailureWeightedSampler, BucketSampler)
