"""Memory strategies shipped with owrl, registered through the ``owrl`` entry point.

``default`` keeps the full text history of the episode (thoughts, calls, feedback and
verdicts) and the latest K screenshots (K = 1, as OpenWebRL was trained).

Settings (``[plugins.memory]`` in owrl.toml): ``screenshots`` (K), ``reasoning``
(``full`` keeps every thought, ``action-only`` drops past thoughts and keeps the calls).
"""

from __future__ import annotations

from owrl_sdk import hookimpl
from owrl_sdk.errors import ConfigError
from owrl_sdk.memory import Context, Memory
from owrl_sdk.types import Observation, Step, Task


class FullHistoryMemory(Memory):
    name = "default"

    def __init__(self, settings, **options):
        super().__init__(settings, **options)
        conf = {**settings.plugin("memory"), **options}
        self.k = int(conf.get("screenshots", 1))
        self.reasoning = conf.get("reasoning", "full")
        if self.k < 0:
            raise ConfigError("setting 'plugins.memory.screenshots' must be 0 or more")
        if self.reasoning not in ("full", "action-only"):
            raise ConfigError("setting 'plugins.memory.reasoning' must be 'full' or 'action-only'")
        self.steps: list[Step] = []
        self.shots: list[bytes] = []

    def reset(self, task: Task) -> None:
        self.steps = []
        self.shots = []

    def context(self, task: Task, observation: Observation, tools) -> Context:
        shots = [s for s in self.shots if s] + ([observation.screenshot] if observation.screenshot else [])
        keep = shots[-self.k:] if self.k else []
        history = self.steps
        if self.reasoning == "action-only":
            history = [s.model_copy(update={"turn": s.turn.model_copy(update={"thought": ""})}) for s in self.steps]
        return Context(task=task, observation=observation, tools=list(tools), history=list(history), screenshots=keep)

    def record(self, step: Step) -> None:
        self.steps.append(step)
        if step.observation.screenshot:
            self.shots.append(step.observation.screenshot)
            del self.shots[: -max(self.k, 1)]




class CropMemory(FullHistoryMemory):
    """Like ``default``, but after an action at a point the screenshot sent is a crop around it.

    A full screenshot is sent on the first step, after the URL changed, and every
    ``full_every`` steps (default 5); otherwise a ``crop`` x ``crop`` pixel window (default
    300) centred on the last action's point_2d. Fewer image tokens per step, at the cost of
    context outside the window. Settings: ``[plugins.memory-crop]`` crop, full_every.
    """

    name = "crop"

    def __init__(self, settings, **options):
        super().__init__(settings, **options)
        conf = {**settings.plugin("memory-crop"), **options}
        self.crop = int(conf.get("crop", 300))
        self.full_every = int(conf.get("full_every", 5))

    def context(self, task: Task, observation: Observation, tools) -> Context:
        ctx = super().context(task, observation, tools)
        point = self._last_point()
        last = self.steps[-1] if self.steps else None
        if point is None or last is None or observation.screenshot is None:
            return ctx
        if last.observation.url != observation.url or len(self.steps) % self.full_every == 0:
            return ctx
        cropped = crop_around(observation.screenshot, point, self.crop)
        ctx.screenshots = [cropped]
        ctx.extras["crop"] = {"point_2d": point, "size": self.crop}
        return ctx

    def _last_point(self):
        if not self.steps:
            return None
        for record in reversed(self.steps[-1].calls):
            point = record.call.arguments.get("point_2d") if not record.skipped else None
            if isinstance(point, (list, tuple)) and len(point) == 2:
                return [float(point[0]), float(point[1])]
        return None


def crop_around(jpeg: bytes, point_2d, size: int) -> bytes:
    """A ``size`` x ``size`` JPEG window of the image centred on a 0-1000 grid point."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(jpeg))
    w, h = image.size
    cx, cy = point_2d[0] / 1000 * w, point_2d[1] / 1000 * h
    half = size / 2
    left = int(min(max(cx - half, 0), max(w - size, 0)))
    top = int(min(max(cy - half, 0), max(h - size, 0)))
    box = (left, top, min(left + size, w), min(top + size, h))
    out = io.BytesIO()
    image.crop(box).convert("RGB").save(out, "JPEG", quality=85)
    return out.getvalue()


@hookimpl
def register_memories(register):
    register(FullHistoryMemory)
    register(CropMemory)
