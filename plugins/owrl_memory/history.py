"""The ``default`` memory (the full text history and the latest screenshots) and ``crop``:
the classes :mod:`owrl_memory.strategies` builds on (a module of its own, so that the package
imports its strategies at the top and none imports the package back)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk.api import Context, Memory, Observation, Step, Task

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.api import Settings, Tool


class MemoryOptions(BaseModel):
    """``[plugins.default]``: the ``default`` memory's options."""

    model_config = ConfigDict(extra="forbid")
    renamed_from: ClassVar[tuple[str, ...]] = ("memory",)

    screenshots: int = Field(1, ge=0, description="latest screenshots sent to the policy (K)")
    reasoning: Literal["full", "action-only"] = Field(
        "full", description="full keeps every past thought; action-only drops them and keeps the calls")


class CropOptions(BaseModel):
    """``[plugins.crop]``: the ``crop`` memory's options; ``screenshots`` and ``reasoning``
    left unset are ``[plugins.default]``'s."""

    model_config = ConfigDict(extra="forbid")
    renamed_from: ClassVar[tuple[str, ...]] = ("memory-crop",)

    screenshots: Optional[int] = Field(None, ge=0, description="as default's (unset: [plugins.default]'s)")
    reasoning: Optional[Literal["full", "action-only"]] = Field(
        None, description="as default's (unset: [plugins.default]'s)")
    crop: int = Field(300, ge=1, description="side in pixels of the window sent after an action at a point")
    full_every: int = Field(5, ge=1, description="send the full screenshot every N steps")


class FullHistoryMemory(Memory):
    name = "default"
    Options: ClassVar[type[BaseModel]] = MemoryOptions
    reads_changes = False  # it hands the steps to the policy, whose profile reads what it shows

    def __init__(self, settings: "Settings", **options: Any):
        super().__init__(settings, **options)
        conf = self.read_options(settings, options)
        self.k: int = conf.screenshots
        self.reasoning: str = conf.reasoning
        self.steps: list[Step] = []
        self.shots: list[bytes] = []

    def reset(self, task: Task) -> None:
        self.steps = []
        self.shots = []

    def context(self, task: Task, observation: Observation, tools: list["Tool"]) -> Context:
        shots = [s for s in self.shots if s] + ([observation.screenshot] if observation.screenshot else [])
        keep = shots[-self.k:] if self.k else []
        history = self.steps
        if self.reasoning == "action-only":
            history = [s.model_copy(update={"turn": s.turn.model_copy(update={"thought": ""})}) for s in self.steps]
        return Context(task=task, observation=observation, tools=list(tools), history=list(history), screenshots=keep)

    def read_options(self, settings: Any, options: dict[str, Any]) -> MemoryOptions:
        """``[plugins.default]`` with the given options on top, validated."""
        conf: MemoryOptions = settings.options(self.name, MemoryOptions, **options)
        return conf

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
    context outside the window. Settings: ``[plugins.crop]`` (formerly ``[plugins.memory-crop]``)
    crop, full_every, and screenshots and reasoning where they differ from ``[plugins.default]``.
    """

    name = "crop"
    Options = CropOptions

    def read_options(self, settings: Any, options: dict[str, Any]) -> MemoryOptions:
        own: CropOptions = settings.options(self.name, CropOptions, **options)
        self.crop: int = own.crop
        self.full_every: int = own.full_every
        shared = {k: v for k, v in own.model_dump(include={"screenshots", "reasoning"}).items() if v is not None}
        conf: MemoryOptions = settings.options(FullHistoryMemory.name, MemoryOptions, **shared)
        return conf

    def context(self, task: Task, observation: Observation, tools: list["Tool"]) -> Context:
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

    def _last_point(self) -> Optional[list[float]]:
        if not self.steps:
            return None
        for record in reversed(self.steps[-1].calls):
            point = record.call.arguments.get("point_2d") if not record.skipped else None
            if isinstance(point, (list, tuple)) and len(point) == 2:
                return [float(point[0]), float(point[1])]
        return None


def crop_around(jpeg: bytes, point_2d: Sequence[float], size: int) -> bytes:
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
