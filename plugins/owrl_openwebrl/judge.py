"""The ``openwebrl-judge`` judge: a vision-language model reads a whole trajectory.

It speaks one of two interface profiles (see :mod:`.profiles`):

- ``owrl``: owrl's own contract. The judge sees the task, the action history with each
  call's feedback (bounded per step), the final answer and the last 3 screenshots; it is
  asked to list the task's hard constraints, check each, and end with one structured
  verdict block::

      <verdict>{"success": true, "score": 0.9, "reason": "..."}</verdict>

  Only the last verdict block, parsed on its own, decides: a label quoted inside the
  reasoning ("success") never does. No readable verdict: score 0, success unknown.

- ``openwebrl``: the contract the released OpenWebRL-Judge-8B was trained on. The judge
  reasons freely and gives a verdict of ``SUCCESS`` or ``NOT SUCCESS``, read the way the
  official reward code reads it (:func:`parse_official_verdict`). It is not called for a
  trajectory without a final answer (that is a failure outright). Greedy decoding, up to
  2048 new tokens. Two input layouts: ``action_history`` (the task, one line per step with
  the calls as the model wrote them and the environment's status lines, the answer, the
  last screenshots each labelled with its step) and ``result_only`` (the task, the answer,
  the last screenshots). The official prompt texts are never part of owrl: they are read
  from a JSON file (``owrl model fetch openwebrl-judge`` puts one in the cache, or name one
  with the ``judge_prompt_file`` option); any text missing there is owrl's own wording and
  the judgement's ``details["warnings"]`` says the interface is approximate.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from owrl_sdk.api import Judge, Judgement, Step, ToolCall, Trajectory, UsageError

from . import fetch, policy
from . import options as _options
from .backend import Sampling
from .openai_backend import OpenAIBackend
from .parser import FALLBACK_BLOCK, _loads_lenient, CallError
from . import official
from .profiles import OpenWebRLProfile, check_profile, default_profile, load_templates, raw_calls, status_line
from .prompt import Prompt

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.api import Settings

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
    """The owrl profile's judge prompt."""
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
    return [image for _, image in last_screenshots_with_steps(traj, run_dir, n)]


def last_screenshots_with_steps(traj: Trajectory, run_dir: Optional[Path], n: int) -> list[tuple[int, bytes]]:
    """The last ``n`` screenshots of the steps' observations, oldest first, each with the
    number of its step (``step.index + 1``). A screenshot is the observation's bytes, or its
    file under ``run_dir``; a step without one is passed over."""
    images: list[tuple[int, bytes]] = []
    for step in traj.steps:
        obs = step.observation
        if obs.screenshot:
            images.append((step.index + 1, obs.screenshot))
        elif obs.screenshot_file and run_dir is not None and (run_dir / obs.screenshot_file).exists():
            images.append((step.index + 1, (run_dir / obs.screenshot_file).read_bytes()))
    return images[-n:] if n > 0 else []


def parse_verdict(text: str) -> tuple[Optional[dict[str, Any]], str]:
    """The last <verdict> block as a dict, or None and why (owrl profile)."""
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


# ------------------------------------------------------------------------ openwebrl profile


SUCCESS_LABEL = "SUCCESS"
FAILURE_LABEL = "NOT SUCCESS"


def parse_official_verdict(text: str) -> Optional[bool]:
    """The openwebrl judge's verdict, read as the official reward code reads it: plain,
    case-sensitive substring tests, the failure label first (it contains the success label).
    True: successful; False: not successful; None: the text holds neither label."""
    if FAILURE_LABEL in text:
        return False
    if SUCCESS_LABEL in text:
        return True
    return None


LAYOUTS = ("action_history", "result_only")

#: The keys of a judge prompt file, and the format fields each text takes.
PROMPT_KEYS = {
    "system_result_only": (),
    "system_action_history": (),
    "user_result_only": ("task", "answer", "num"),
    "user_action_history": ("task", "action_history", "answer", "num"),
    "verdict_cue": (),
    "screenshot_label": ("index", "step"),
}

#: The keys each layout reads.
LAYOUT_KEYS = {
    "action_history": ("system_action_history", "user_action_history", "verdict_cue", "screenshot_label"),
    "result_only": ("system_result_only", "user_result_only", "verdict_cue"),
}

_ASK = ("Reason about it step by step first. Then end your reply with your verdict on a line of its own: "
        "SUCCESS if the agent did everything the task asks, NOT SUCCESS otherwise.")

#: owrl's own wording for each text, used where the official one is missing.
OWRL_JUDGE_TEXTS = {
    "system_action_history": (
        "You decide whether a web agent accomplished what a user asked of it. You are shown the "
        "user's task, every action the agent took with the environment's feedback, the agent's final "
        "answer and the last screenshots of the browser, each marked with the step it was taken at. "
        "Check each requirement of the task against this evidence; a requirement nothing shows to be "
        "met counts as not met. " + _ASK),
    "system_result_only": (
        "You decide whether a web agent accomplished what a user asked of it. You are shown the "
        "user's task, the agent's final answer and the last screenshots of the browser. Check each "
        "requirement of the task against this evidence; a requirement nothing shows to be met counts "
        "as not met. " + _ASK),
    "user_action_history": ("Task: {task}\n\nActions of the agent:\n{action_history}\n\n"
                            "Final answer of the agent: {answer}\n\nThe last {num} screenshots follow."),
    "user_result_only": "Task: {task}\n\nFinal answer of the agent: {answer}\n\nThe last {num} screenshots follow.",
    "verdict_cue": "Did the agent accomplish the task? Give your reasoning, then SUCCESS or NOT SUCCESS.",
    "screenshot_label": "Screenshot {index}, taken at step {step}:",
}

APPROXIMATE_JUDGE = ("the openwebrl judge interface is approximate: {what}, owrl's own wording stands in "
                     "(fetch the official texts with `owrl model fetch openwebrl-judge`, or set "
                     "judge_prompt_file in [plugins.openwebrl-judge])")

NO_ACTIONS = "(No action of the agent could be read.)"
NO_ANSWER = "no final answer: the judge was not called"


def load_judge_prompts(path: Union[str, Path]) -> dict[str, str]:
    """The texts of a judge prompt file (a JSON object of the :data:`PROMPT_KEYS`; unknown keys
    are ignored). A file that cannot be read or is not such an object raises UsageError."""
    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"cannot read the judge prompt file {p}: {err}") from None
    if not isinstance(data, dict):
        raise UsageError(f"the judge prompt file {p} is not a JSON object of texts")
    bad = [k for k in PROMPT_KEYS if k in data and not isinstance(data[k], str)]
    if bad:
        raise UsageError(f"the judge prompt file {p}: {', '.join(bad)} must be text")
    return {k: data[k] for k in PROMPT_KEYS if k in data}


def judge_texts(path: Optional[Union[str, Path]], layout: str) -> tuple[dict[str, str], list[str]]:
    """The texts ``layout`` needs, from the file at ``path`` where it has them and owrl's own
    wording elsewhere, and the warnings that says (empty when the file had them all)."""
    found = load_judge_prompts(path) if path else {}
    missing = [k for k in LAYOUT_KEYS[layout] if k not in found]
    warnings = []
    if not path:
        warnings.append(APPROXIMATE_JUDGE.format(what="the official judge prompts were not found"))
    elif missing:
        warnings.append(APPROXIMATE_JUDGE.format(what=f"{Path(path).expanduser()} lacks {', '.join(missing)}"))
    return {**OWRL_JUDGE_TEXTS, **found}, warnings


def format_call(call: ToolCall) -> str:
    """``name({"arg": ...})`` (arguments as sorted JSON), or ``name()`` without arguments."""
    if not call.arguments:
        return f"{call.name}()"
    return f"{call.name}({json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)})"


_THINK_RE = re.compile(r"<think>.*?</think>", re.S)
#: A call written out anywhere in the text, ``{"name": "...", "arguments": {...}}`` (its
#: arguments up to the first ``}`` the object's own closing brace follows).
_WRITTEN_CALL = re.compile(r'\{\s*"name"\s*:\s*"([^"]+)"\s*,\s*"arguments"\s*:\s*(\{.*?\})\s*\}', re.S)
#: The same, with any name, for taking such calls out of the text.
_ANY_CALL = re.compile(r'\{\s*"name"\s*:\s*".*?"\s*,\s*"arguments"\s*:\s*\{.*?\}\s*\}', re.S)
_MARKS = re.compile(r"</?tool_call>|<\|im_end\|>|</?think>|</?thinking>")


def _written(name: Any, arguments: Any) -> str:
    """A call as the history writes it: ``name(sorted JSON)``, ``name()``, or the arguments as
    text where they are no object."""
    name = name if isinstance(name, str) and name.strip() else "unknown_tool"
    if arguments is None or arguments == {}:
        return f"{name}()"
    if not isinstance(arguments, dict):
        return f"{name}({arguments})"
    return f"{name}({json.dumps(arguments, ensure_ascii=False, sort_keys=True)})"


def _calls_in(text: str) -> list[str]:
    """The calls an answer holds, as the official history reads them: its blocks when every one
    is JSON (an object with a ``name`` is a call); else any call written out in the text."""
    try:
        found = [json.loads(b) for b in FALLBACK_BLOCK.findall(text)]
    except json.JSONDecodeError:
        found = None
    if found:
        calls = [_written(d["name"], d.get("arguments", d.get("parameters", {})))
                 for d in found if isinstance(d, dict) and "name" in d]
        if calls:
            return calls
    out = []
    for m in _WRITTEN_CALL.finditer(text):
        try:
            arguments: Any = json.loads(m.group(2))
        except json.JSONDecodeError:
            arguments = m.group(2)
        out.append(_written(m.group(1), arguments))
    return out


def _unreadable_answer(raw: Optional[str]) -> str:
    """An answer owrl could not use, as the official history quotes it: the calls it can still
    read there (``[name(...); ...]``), else its text without reasoning blocks, tags and
    written-out calls, whitespace collapsed."""
    text = (raw or "").strip()
    calls = _calls_in(text)
    if calls:
        return f"[{'; '.join(calls)}]"
    text = _ANY_CALL.sub("", _MARKS.sub("", _THINK_RE.sub("", text)))
    return " ".join(text.split())


def _told(step: Step, viewport: tuple[int, int], feedback_chars: int, templates: Optional[dict[str, Any]],
          raws: list[Any]) -> list[str]:
    """What the environment told the policy after each call of ``step``, cut for the judge: with
    the official templates, the lines the policy read (:meth:`OpenWebRLProfile.feedback`), each
    cut again by the official rule at ``feedback_chars``; else owrl's lines, cut at their end."""
    rule = (templates or {}).get("truncation")
    if templates and rule:
        lines = OpenWebRLProfile(screen=viewport, templates=templates).feedback(step)
        if len(lines) == len(raws):
            return [official.truncate(line, {**rule, "max_chars": feedback_chars}) for line in lines]
    return [status_line(record, viewport, raw)[:feedback_chars] for record, raw in zip(step.calls, raws)]


def action_history_line(step: Step, viewport: tuple[int, int], feedback_chars: int = 300,
                        templates: Optional[dict[str, Any]] = None) -> Optional[str]:
    """One step of the action history, or None for a step with nothing to show. ``templates``:
    the official status lines (``owrl model fetch openwebrl``), which the history then quotes."""
    n = step.index + 1
    if step.turn.parse_error:
        return f"Step {n}: action={_unreadable_answer(step.turn.raw)}"
    if not step.calls:
        return None
    raws = raw_calls(step)
    actions = "; ".join(format_call(c) for c in raws)
    told = _told(step, viewport, feedback_chars, templates, raws)
    feedback = " | ".join(f"{raw.name}: {line}" for raw, line in zip(raws, told))
    return f"Step {n}: action=[{actions}] environment feedback={feedback}"


def action_history(traj: Trajectory, viewport: tuple[int, int], feedback_chars: int = 300,
                   templates: Optional[dict[str, Any]] = None) -> str:
    """The action history the openwebrl judge reads: one line per step, in order."""
    lines = [line for step in traj.steps if (line := action_history_line(step, viewport, feedback_chars, templates))]
    return "\n".join(lines) if lines else NO_ACTIONS


def final_answer(traj: Trajectory) -> Optional[str]:
    """The answer of a trajectory that ended in success with a non-empty answer, else None."""
    outcome = traj.outcome
    if outcome is None or outcome.status != "success" or not (outcome.answer or "").strip():
        return None
    return outcome.answer


def _fill(texts: dict[str, str], key: str, **fields: Any) -> str:
    try:
        return texts[key].format(**fields)
    except (KeyError, IndexError, ValueError) as err:
        raise UsageError(f"the judge text {key} has a bad format field ({err!r}); it takes "
                         f"{', '.join('{' + f + '}' for f in PROMPT_KEYS[key]) or 'none'}") from None


def build_official_judge_prompt(traj: Trajectory, texts: Optional[dict[str, str]] = None, *,
                                layout: str = "action_history", run_dir: Optional[Path] = None,
                                screenshots: int = 3, feedback_chars: int = 300,
                                viewport: tuple[int, int] = (1280, 1000),
                                templates: Optional[dict[str, Any]] = None) -> Prompt:
    """The openwebrl profile's judge prompt: a system text and one user message of the task,
    (the action history,) the answer, the last ``screenshots`` images and the verdict cue."""
    if layout not in LAYOUTS:
        raise UsageError(f"unknown judge layout '{layout}': layouts are {', '.join(LAYOUTS)}")
    texts = {**OWRL_JUDGE_TEXTS, **(texts or {})}
    answer = traj.outcome.answer if traj.outcome and traj.outcome.answer is not None else ""
    shots = last_screenshots_with_steps(traj, run_dir, screenshots)
    parts: list[dict[str, Any]] = []
    if layout == "result_only":
        system = _fill(texts, "system_result_only")
        parts.append({"type": "text", "text": _fill(texts, "user_result_only", task=traj.task.intent,
                                                    answer=answer, num=len(shots))})
        parts += [{"type": "image", "image": image} for _, image in shots]
    else:
        system = _fill(texts, "system_action_history")
        history = action_history(traj, viewport, feedback_chars, templates)
        parts.append({"type": "text", "text": _fill(texts, "user_action_history", task=traj.task.intent,
                                                    action_history=history, answer=answer, num=len(shots))})
        for i, (step_no, image) in enumerate(shots, 1):
            parts.append({"type": "text", "text": _fill(texts, "screenshot_label", index=i, step=step_no)})
            parts.append({"type": "image", "image": image})
    parts.append({"type": "text", "text": _fill(texts, "verdict_cue")})
    messages = [{"role": "system", "content": [{"type": "text", "text": system}]},
                {"role": "user", "content": parts}]
    return Prompt(messages=messages, tools=[])


# ------------------------------------------------------------------------ the judge


class OpenWebRLJudge(Judge):
    """Options (``[plugins.openwebrl-judge]``): ``profile`` (openwebrl or owrl; else the
    ``profile`` setting, else by model: openwebrl for OpenWebRL checkpoints), ``model``,
    ``backend`` (transformers or openai), ``quantize``, ``base_url``, ``temperature``
    (0 = greedy), ``max_new_tokens`` (2048 in the openwebrl profile, 1024 in owrl's), ``seed``.
    The openwebrl profile also reads ``layout`` (action_history or result_only),
    ``screenshots`` (3), ``feedback_chars`` (300) and ``judge_prompt_file``."""

    name = "openwebrl-judge"
    Options = _options.JudgeOptions

    def __init__(self, settings: Settings, backend: Any = None, model: Optional[str] = None, **options: Any):
        super().__init__(settings, **options)
        self.conf = _options.read(settings, self.name, _options.JudgeOptions, options)
        self.model_id = model or self.conf.get("model") or DEFAULT_JUDGE_MODEL
        chosen = self.conf.get("profile") or getattr(settings, "profile", None)
        self.profile = check_profile(chosen) if chosen else default_profile(self.model_id)
        default_tokens = 2048 if self.profile == "openwebrl" else 1024
        # greedy unless told otherwise: the temperature is sent to a server too; top_p and top_k only when set
        self.sampling = Sampling(temperature=float(self.conf.get("temperature", 0.0)),
                                 top_p=float(self.conf.get("top_p", Sampling.top_p)),
                                 top_k=int(self.conf.get("top_k", Sampling.top_k)),
                                 max_new_tokens=int(self.conf.get("max_new_tokens", default_tokens)),
                                 seed=self.conf.get("seed"),
                                 given=frozenset({"temperature", "max_new_tokens"} | {
                                     k for k in ("top_p", "top_k") if k in self.conf}))
        self.warnings: list[str] = []
        if self.profile == "openwebrl":
            self.reads_changes = False  # its action history holds the status lines, not a page diff
            self.layout = str(self.conf.get("layout", "action_history"))
            if self.layout not in LAYOUTS:
                raise UsageError(f"unknown judge layout '{self.layout}': layouts are {', '.join(LAYOUTS)}")
            self.screenshots = int(self.conf.get("screenshots", 3))
            self.feedback_chars = int(self.conf.get("feedback_chars", 300))
            path = self.conf.get("judge_prompt_file")
            if not path:
                path = fetch.prompt_files("openwebrl-judge").get("judge_prompts")
            self.prompt_file = str(Path(path).expanduser()) if path else None
            self.texts, self.warnings = judge_texts(path, self.layout)
            # the status lines the policy was told, which the action history quotes (the policy's
            # fetched templates; without them, owrl's words)
            lines = self.conf.get("status_templates_file") or fetch.prompt_files("openwebrl").get("status_templates")
            self.templates: Optional[dict[str, Any]] = load_templates(Path(lines).expanduser()) if lines else None
        self._backend = backend

    def _weights(self) -> str:
        """The local copy of the default judge when ``owrl model fetch`` put one in the cache."""
        if self.model_id == DEFAULT_JUDGE_MODEL:
            find = getattr(fetch, "fetched_weights", None)
            if callable(find):
                try:
                    path = find("openwebrl-judge")
                except UsageError:
                    path = None
                if path:
                    return str(path)
        return self.model_id

    @property
    def backend(self) -> Any:
        if self._backend is None:
            if self.conf.get("backend") == "openai":
                self._backend = OpenAIBackend(model=self.model_id, base_url=self.conf.get("base_url"))
            else:
                self._backend = policy.shared_backend(self._weights(), self.conf.get("quantize", "auto"))
        return self._backend

    def prompt(self, trajectory: Trajectory, run_dir: Optional[Path] = None) -> Prompt:
        """What this judge sends for ``trajectory``."""
        if self.profile == "owrl":
            return build_judge_prompt(trajectory, run_dir)
        return build_official_judge_prompt(
            trajectory, self.texts, layout=self.layout, run_dir=run_dir, screenshots=self.screenshots,
            feedback_chars=self.feedback_chars,
            viewport=(self.settings.viewport_width, self.settings.viewport_height),
            templates=getattr(self, "templates", None))

    async def judge(self, trajectory: Trajectory, run_dir: Optional[Path] = None) -> Judgement:
        run_dir = run_dir or (Path(trajectory.metadata["run_dir"]) if trajectory.metadata.get("run_dir") else None)
        if self.profile == "openwebrl":
            return await self._judge_openwebrl(trajectory, run_dir)
        prompt = self.prompt(trajectory, run_dir)
        gen = (await asyncio.to_thread(self.backend.generate, [prompt], self.sampling))[0]
        verdict, why = parse_verdict(gen.text)
        details = {"raw": gen.text[-4000:], "prompt_tokens": gen.prompt_tokens,
                   "completion_tokens": gen.completion_tokens, "model": self.model_id, "profile": self.profile}
        if verdict is None:
            return Judgement(judge=self.name, score=0.0, success=None, reason=f"judge output unreadable: {why}",
                             details=details)
        return Judgement(judge=self.name, score=verdict["score"], success=verdict["success"],
                         reason=verdict["reason"], details=details)

    async def _judge_openwebrl(self, trajectory: Trajectory, run_dir: Optional[Path]) -> Judgement:
        details: dict[str, Any] = {"model": self.model_id, "profile": self.profile, "layout": self.layout,
                                   "prompt_file": self.prompt_file, "warnings": list(self.warnings)}
        if final_answer(trajectory) is None:
            return Judgement(judge=self.name, score=0.0, success=False, reason=NO_ANSWER,
                             details={**details, "called": False})
        prompt = self.prompt(trajectory, run_dir)
        gen = (await asyncio.to_thread(self.backend.generate, [prompt], self.sampling))[0]
        details.update(raw=gen.text[-4000:], prompt_tokens=gen.prompt_tokens,
                       completion_tokens=gen.completion_tokens, called=True)
        success = parse_official_verdict(gen.text)
        if success is None:
            return Judgement(judge=self.name, score=0.0, success=None, details=details,
                             reason=f"judge output unreadable: it holds neither {SUCCESS_LABEL} nor {FAILURE_LABEL}")
        label = SUCCESS_LABEL if success else FAILURE_LABEL
        return Judgement(judge=self.name, score=1.0 if success else 0.0, success=success,
                         reason=f"the judge's verdict: {label}", details=details)
