"""The ``openwebrl-judge`` judge: a vision-language model reads a whole trajectory.

It sees the task, the action history with each call's feedback (bounded per step), the
final answer and the last 3 screenshots; it is asked to list the task's hard constraints,
check each, and end with one structured verdict block:

    <verdict>{"success": true, "score": 0.9, "reason": "..."}</verdict>

Only the last verdict block, parsed on its own, decides: a label quoted inside the
reasoning ("success") never does. No readable verdict: score 0, success unknown.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Optional

from owrl_sdk.components import Judge
from owrl_sdk.types import Judgement, Trajectory

from .backend import Sampling
from .parser import _loads_lenient, CallError
from .prompt import Prompt

DEFAULT_JUDGE_MODEL = "OpenWebRL/OpenWebRL-Judge-8B"

JUDGE_SYSTEM = """You judge whether a web agent completed a task.
You get the task, the agent's actions with the feedback each one produced, its final \
answer, and the last screenshots of the browser.
First list the task's hard constraints (every explicit requirement: items, quantities, \
attributes, dates, filters, the information asked for). Check each against the evidence, \
one by one. Be strict: a constraint without evidence is not met.
End with exactly one line:
<verdict>{"success": true or false, "score": a number from 0 to 1, "reason": "one sentence"}</verdict>"""

_VERDICT_RE = re.compile(r"<verdict>(.*?)</verdict>", re.S)


def build_judge_prompt(traj: Trajectory, run_dir: Optional[Path] = None, feedback_chars: int = 300,
                       screenshots: int = 3) -> Prompt:
    lines = [f"Task: {traj.task.intent}", f"Start: {traj.task.start_url}", "", "Actions:"]
    for step in traj.steps:
        if step.turn.parse_error:
            lines.append(f"{step.index + 1}. (unreadable answer)")
            continue
        for record in step.calls:
            if record.skipped:
                fb = f"not run ({record.skip_reason})"
            elif record.result is not None and not record.result.ok:
                fb = f"error: {record.result.error}"
            else:
                fb = record.result.feedback if record.result else ""
            lines.append(f"{step.index + 1}. {record.call.describe()} -> {fb[:feedback_chars]}")
    outcome = traj.outcome
    lines += ["", f"Final answer: {outcome.answer if outcome and outcome.answer else '(none)'}",
              f"Episode ended: {outcome.status if outcome else 'unknown'}"]
    parts: list[dict[str, Any]] = [{"type": "text", "text": "\n".join(lines)}]
    for image in last_screenshots(traj, run_dir, screenshots):
        parts.append({"type": "image", "image": image})
    messages = [{"role": "system", "content": [{"type": "text", "text": JUDGE_SYSTEM}]},
                {"role": "user", "content": parts}]
    return Prompt(messages=messages, tools=[])


def last_screenshots(traj: Trajectory, run_dir: Optional[Path], n: int) -> list[bytes]:
    images = []
    for step in traj.steps:
        obs = step.observation
        if obs.screenshot:
            images.append(obs.screenshot)
        elif obs.screenshot_file and run_dir is not None and (run_dir / obs.screenshot_file).exists():
            images.append((run_dir / obs.screenshot_file).read_bytes())
    return images[-n:] if n else []


def parse_verdict(text: str) -> tuple[Optional[dict[str, Any]], str]:
    """The last <verdict> block as a dict, or None and why."""
    blocks = _VERDICT_RE.findall(text)
    if not blocks:
        return None, "no <verdict> block"
    try:
        data = _loads_lenient(blocks[-1])
    except CallError:
        return None, "verdict is not valid JSON"
    if not isinstance(data, dict) or not isinstance(data.get("success"), bool):
        return None, "verdict has no boolean success"
    score = data.get("score", 1.0 if data["success"] else 0.0)
    try:
        score = min(1.0, max(0.0, float(score)))
    except (TypeError, ValueError):
        return None, "verdict score is not a number"
    return {"success": data["success"], "score": score, "reason": str(data.get("reason", ""))}, ""


class OpenWebRLJudge(Judge):
    """Options (``[plugins.openwebrl-judge]``): ``model``, ``backend`` (transformers or openai),
    ``quantize``, ``base_url``, ``max_new_tokens`` (1024), ``temperature`` (0 = greedy)."""

    name = "openwebrl-judge"

    def __init__(self, settings, backend: Any = None, model: Optional[str] = None, **options: Any):
        super().__init__(settings, **options)
        self.conf = {**settings.plugin(self.name), **options}
        self.sampling = Sampling(temperature=float(self.conf.get("temperature", 0.0)),
                                 max_new_tokens=int(self.conf.get("max_new_tokens", 1024)),
                                 seed=self.conf.get("seed"))
        self.model_id = model or self.conf.get("model") or DEFAULT_JUDGE_MODEL
        self._backend = backend

    @property
    def backend(self) -> Any:
        if self._backend is None:
            if self.conf.get("backend") == "openai":
                from .openai_backend import OpenAIBackend

                self._backend = OpenAIBackend(model=self.model_id, base_url=self.conf.get("base_url"))
            else:
                from .policy import shared_backend

                self._backend = shared_backend(self.model_id, self.conf.get("quantize", "auto"))
        return self._backend

    async def judge(self, trajectory: Trajectory, run_dir: Optional[Path] = None) -> Judgement:
        run_dir = run_dir or (Path(trajectory.metadata["run_dir"]) if trajectory.metadata.get("run_dir") else None)
        prompt = build_judge_prompt(trajectory, run_dir)
        gen = (await asyncio.to_thread(self.backend.generate, [prompt], self.sampling))[0]
        verdict, why = parse_verdict(gen.text)
        details = {"raw": gen.text[-4000:], "prompt_tokens": gen.prompt_tokens,
                   "completion_tokens": gen.completion_tokens, "model": self.model_id}
        if verdict is None:
            return Judgement(judge=self.name, score=0.0, success=None, reason=f"judge output unreadable: {why}",
                             details=details)
        return Judgement(judge=self.name, score=verdict["score"], success=verdict["success"],
                         reason=verdict["reason"], details=details)
