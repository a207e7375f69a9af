"""Task samplers for online RL: which tasks the next iteration practises.

Each keeps per-task success history (``update``) and can be saved and restored with the
trainer's checkpoint (``state_dict`` / ``load_state_dict``).
"""

from __future__ import annotations

from owrl_sdk.components import TaskSampler
from owrl_sdk.types import Task


class UniformSampler(TaskSampler):
    name = "uniform"


class FailureWeightedSampler(TaskSampler):
    """OpenWebRL's rule: a task failed in more than 60% of its episodes weighs 3x."""

    name = "failure-weighted"

    def weight(self, task: Task) -> float:
        rate = self.failure_rate(task.id)
        threshold = float(self.options.get("threshold", 0.6))
        return float(self.options.get("boost", 3.0)) if rate is not None and rate > threshold else 1.0


class BucketSampler(TaskSampler):
    """Difficulty buckets by success history: unseen, hard (< 20% success), learnable
    (20-80%) and solved (> 80%), each with a weight (defaults 1, 2, 3, 0.5): practice goes
    where the group has reward variance to learn from."""

    name = "buckets"
    DEFAULT = {"unseen": 1.0, "hard": 2.0, "learnable": 3.0, "solved": 0.5}

    def bucket(self, task_id: str) -> str:
        rate = self.failure_rate(task_id)
        if rate is None:
            return "unseen"
        success = 1.0 - rate
        return "hard" if success < 0.2 else "solved" if success > 0.8 else "learnable"

    def weight(self, task: Task) -> float:
        weights = {**self.DEFAULT, **self.options.get("weights", {})}
        return float(weights[self.bucket(task.id)])


SAMPLERS = (UniformSampler, FailureWeightedSampler, BucketSampler)
