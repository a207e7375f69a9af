"""MiniWoB++ as an owrl task suite, from the ``miniwob`` package's own pages.

Pages load over ``file://``; an episode is started and its reward read through the
page's own JavaScript (``core.startEpisodeReal``, ``WOB_*`` globals), so the reward is
MiniWoB's own. Episode ``n`` of a task uses seed ``n``; the instruction (the utterance)
becomes the task's intent once the episode started. The episode ends with the call after
which the page says it is done (right or wrong: the check scores it): the page then covers
itself with a start screen, where a further click would start a new problem.

Settings (``[plugins.miniwob]``, :class:`MiniWoBOptions`): ``time_limit`` (seconds per MiniWoB
episode, default 10, MiniWoB's own), ``max_steps`` (default 8), ``stats`` (show the page's
panel of rewards and time left; default off).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk import hookimpl
from owrl_sdk.api import Register, SuiteCheck, Task, TaskSuite, Trajectory, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.api import Settings


def pages_dir() -> Path:
    try:
        import miniwob  # type: ignore[import-untyped]  # the miniwob package ships no type hints
    except ImportError:
        raise UsageError("the miniwob suite needs the miniwob package: pip install 'openwebrl-sdk[miniwob]'") from None
    return Path(miniwob.__file__).parent / "html" / "miniwob"


def task_names() -> list[str]:
    return sorted(p.stem for p in pages_dir().glob("*.html"))


START_JS = """([seed, ms, stats]) => {
  core.EPISODE_MAX_TIME = ms;
  Math.seedrandom(seed);
  core.startEpisodeReal();
  const panel = document.getElementById('reward-display');
  if (panel && !stats) panel.style.setProperty('display', 'none', 'important');
}"""

RESULT_JS = """() => ({
  done: !!window.WOB_DONE_GLOBAL,
  reward: window.WOB_REWARD_GLOBAL,
  raw: window.WOB_RAW_REWARD_GLOBAL,
  reason: window.WOB_REWARD_REASON === undefined ? null : String(window.WOB_REWARD_REASON),
})"""


class MiniWoBOptions(BaseModel):
    """``[plugins.miniwob]``: the MiniWoB++ suite's options."""

    model_config = ConfigDict(extra="forbid")

    time_limit: float = Field(10.0, gt=0, description="seconds per MiniWoB episode (MiniWoB's own limit)")
    max_steps: int = Field(8, ge=1, description="steps per task")
    stats: bool = Field(False, description="show the page's panel of last reward, time left and episodes done "
                        "(hidden: MiniWoB's own observation leaves it out, and its clock would make what a "
                        "policy sees depend on timing)")


class MiniWoBSuite(TaskSuite):
    name = "miniwob"
    description = "MiniWoB++ tasks from the miniwob package (reward: MiniWoB's own)"
    Options = MiniWoBOptions

    def __init__(self, settings: "Settings", **options: Any):
        super().__init__(settings, **options)
        conf: MiniWoBOptions = settings.options(self.name, MiniWoBOptions, **options)
        self.time_limit = conf.time_limit
        self.max_steps = conf.max_steps
        self.stats = conf.stats

    def tasks(self) -> list[Task]:
        root = pages_dir()
        return [
            Task(id=name, intent=f"MiniWoB++ {name} (the instruction appears when the episode starts)",
                 start_url=(root / f"{name}.html").as_uri(), suite=self.name, max_steps=self.max_steps,
                 metadata={"miniwob": name})
            for name in task_names()
        ]

    async def start(self, env: Any, task: Task) -> None:
        page = env.page
        seed = int(task.metadata.get("seed", 0))
        await page.wait_for_function("() => typeof core !== 'undefined' && !!core.startEpisodeReal")
        await page.evaluate(START_JS, [seed, int(self.time_limit * 1000), self.stats])
        await page.wait_for_function("() => window.WOB_TASK_READY === true", timeout=5000)
        task.intent = await page.evaluate("() => core.getUtterance()")
        task.metadata["utterance"] = task.intent

    async def check(self, env: Any, task: Task, trajectory: Trajectory) -> Optional[SuiteCheck]:
        result = await read_result(env.page)
        if not result["done"]:
            return SuiteCheck(score=0.0, success=False, reason="episode not finished on the page", details=result)
        raw = result["raw"] or 0
        return SuiteCheck(score=float(result["reward"] or 0.0), success=raw > 0,
                          reason=result["reason"] or ("solved" if raw > 0 else "wrong"), details=result)

    async def after_tool_call(self, call: Any, result: Any, env: Any, task: Task) -> None:
        """End the episode once the page says it is done (the episode's hook, see the module)."""
        if result.ok and not result.ends_episode and env.page is not None:
            result.ends_episode = bool(await env.page.evaluate("() => !!window.WOB_DONE_GLOBAL"))

    @staticmethod
    def oracle_calls(name: str, utterance: str) -> Optional[list[dict[str, Any]]]:
        """The calls that solve task ``name`` given its utterance, or None (see :func:`oracle_calls`).

        Here for the ``oracle`` policy of another plugin, which finds this suite in the
        catalogue (``catalogue.get("task_suites", "miniwob")``) instead of importing it."""
        return oracle_calls(name, utterance)


async def read_result(page: Any) -> dict[str, Any]:
    result: dict[str, Any] = await page.evaluate(RESULT_JS)
    return result


# ---------------------------------------------------------------------------- oracle

import re  # noqa: E402

_QUOTED = re.compile(r'"([^"]*)"')


def _quoted(utterance: str) -> str:
    m = _QUOTED.search(utterance)
    if not m:
        raise ValueError(f"no quoted text in {utterance!r}")
    return m.group(1)


def _css_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def oracle_calls(name: str, utterance: str) -> Optional[list[dict[str, Any]]]:
    """The calls that solve MiniWoB task ``name`` given its utterance, or None if unknown."""
    if name == "click-button":
        text = _css_text(_quoted(utterance))
        # the same label may appear twice; MiniWoB rewards a click on either
        return [{"name": "click", "arguments": {"selector": f'#area button:text-is("{text}") >> nth=0'}}]
    if name == "click-link":
        text = _css_text(_quoted(utterance))
        return [{"name": "click", "arguments": {"selector": f'#area span.alink:text-is("{text}") >> nth=0'}}]
    if name == "enter-text":
        return [{"name": "write", "arguments": {"selector": "#tt", "message": _quoted(utterance)}},
                {"name": "click", "arguments": {"selector": "#subbtn"}}]
    if name == "focus-text":
        return [{"name": "click", "arguments": {"selector": "#tt"}}]
    if name == "click-dialog":
        return [{"name": "click", "arguments": {"selector": "button.ui-dialog-titlebar-close"}}]
    if name == "enter-password":
        pw = _quoted(utterance)
        return [{"name": "write", "arguments": {"selector": "#password", "message": pw}},
                {"name": "write", "arguments": {"selector": "#verify", "message": pw}},
                {"name": "click", "arguments": {"selector": "#subbtn"}}]
    return None


ORACLE_TASKS = ("click-button", "click-link", "enter-text", "focus-text", "click-dialog", "enter-password")


@hookimpl
def register_task_suites(register: Register) -> None:
    register(MiniWoBSuite)
