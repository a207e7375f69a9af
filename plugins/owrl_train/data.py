"""Training data: per-turn samples from trajectories, OpenWebRL SFT rows, OpenAI-style export.

A sample is one turn: the context the policy saw (system, task, text history, the latest
screenshot) and the target, that turn's output. Loss is taken on the target tokens only.

Prompts, their class and the turn format are the ``openwebrl`` policy's (see
:func:`owrl_train.peer_policy`).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Union

from owrl_sdk.api import ConfigError, Context, DocumentError, load_trajectory, Step, Trajectory, UsageError

from .peers import peer_policy

#: A prompt of the ``openwebrl`` policy (its ``prompt_class``: ``messages`` and ``tools``).
Prompt = Any


@dataclass
class Sample:
    prompt: Prompt
    target: str
    advantage: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)


def _tools(catalogue: Any) -> list[Any]:
    if catalogue is None:
        raise ConfigError("the training prompts name the registered tools: pass tools= or catalogue=")
    return list(catalogue.items["tools"].values())


def _screenshot(step: Step, run_dir: Optional[Path]) -> Optional[bytes]:
    obs = step.observation
    if obs.screenshot:
        return obs.screenshot
    if obs.screenshot_file and run_dir is not None:
        path = run_dir / obs.screenshot_file
        if path.exists():
            return path.read_bytes()
    return None


def trajectory_samples(traj: Trajectory, run_dir: Optional[Path] = None, *, tools: Optional[list[Any]] = None,
                       tools_in_system: bool = True, text_mode: bool = False, advantage: float = 0.0,
                       only_success: bool = False, unreadable: bool = False,
                       render: Optional[Callable[[Context], Prompt]] = None, catalogue: Any = None) -> list[Sample]:
    """One sample per turn that produced calls; with ``unreadable`` also one per unreadable
    turn that kept its text (``meta["unreadable"]``: RL trains it with an advantage of its
    own, SFT never sees one).

    ``render`` builds the prompt from the turn's context; pass the policy's own
    (``policy.prompt``) so that training sees exactly what the policy saw. Without it the
    OpenWebRL prompt is built with ``text_mode`` and ``tools_in_system``, by the openwebrl
    plugin found in ``catalogue`` (needed unless both ``render`` and ``tools`` are given and
    every turn kept its text).

    Each sample's ``meta`` names its ``episode`` (the trajectory's id) and ``step``, and
    carries what the rollout sampled: ``token_ids`` (the turn's ``usage.completion_ids``,
    when the policy kept them) and ``truncated`` (the answer was cut at the token limit)."""
    if only_success and not (traj.outcome and traj.outcome.status == "success"):
        return []
    tools = tools if tools is not None else _tools(catalogue)
    samples = []
    for i, step in enumerate(traj.steps):
        turn = step.turn
        bad = bool(turn.parse_error or not turn.calls)
        if bad and not (unreadable and turn.raw):
            continue
        shot = _screenshot(step, run_dir)
        ctx = Context(task=traj.task, observation=step.observation, tools=tools, history=traj.steps[:i],
                      screenshots=[shot] if shot else [])
        prompt = render(ctx) if render else peer_policy(catalogue=catalogue).build_prompt(
            ctx, text_mode=text_mode, tools_in_system=tools_in_system)
        target = turn.raw if turn.raw is not None else peer_policy(catalogue=catalogue).render_turn(turn.thought,
                                                                                                    turn.calls)
        meta: dict[str, Any] = {"trajectory": traj.id, "episode": traj.id, "task": traj.task.id, "step": i,
                                "truncated": bool(turn.truncated or turn.usage.get("finish_reason") == "length")}
        if turn.raw is not None and turn.usage.get("completion_ids"):
            meta["token_ids"] = list(turn.usage["completion_ids"])
        if bad:
            meta["unreadable"] = True
        samples.append(Sample(prompt=prompt, target=target, advantage=advantage, meta=meta))
    return samples


def find_trajectories(root: Union[str, Path]) -> list[Path]:
    root = Path(root)
    if root.is_file():
        return [root]
    return sorted(root.rglob("trajectory.json"))


def load_samples(source: Union[str, Path], *, catalogue: Any = None, **kwargs: Any) -> list[Sample]:
    """Samples from a runs folder (every trajectory.json under it, successful episodes only),
    a trajectory file, or a JSONL of OpenWebRL SFT rows / OpenAI-style message rows."""
    path = Path(source)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    if path.is_file() and path.suffix == ".jsonl":
        return list(import_message_rows(path, catalogue=catalogue))
    samples: list[Sample] = []
    for traj_file in find_trajectories(path):
        try:
            traj = load_trajectory(traj_file)
        except DocumentError:
            continue
        samples.extend(trajectory_samples(traj, traj_file.parent, only_success=path.is_dir(), catalogue=catalogue,
                                           **kwargs))
    if not samples:
        raise UsageError(f"{path}: no training samples (no successful trajectories with calls)")
    return samples


# ---------------------------------------------------------------------------- rows


def _image_bytes(ref: Any, base: Path) -> bytes:
    if isinstance(ref, dict):
        ref = ref.get("url") or ref.get("path") or ref.get("image")
    if not isinstance(ref, str):
        raise ValueError("image reference is not a string")
    if ref.startswith("data:"):
        return base64.b64decode(ref.split(",", 1)[1])
    if ref.startswith("file://"):
        ref = ref[len("file://"):]
    p = Path(ref)
    return (p if p.is_absolute() else base / p).read_bytes()


def import_message_rows(path: Path, *, catalogue: Any) -> Iterable[Sample]:
    """Rows of ``{"messages": [...], "images": [...]}`` (OpenWebRL's SFT rows, or owrl's export).

    The last assistant message is the target; everything before it is the prompt. Images
    are given in ``images`` (paths relative to the file, ``file://`` or data URLs) and
    marked in the messages by ``<image>`` text or ``{"type": "image"}`` / ``image_url``
    parts, in order. A bad row raises :class:`DocumentError` naming its line."""
    base = path.parent
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            messages = row.get("messages") or (row.get("metadata") or {}).get("messages")
            if not messages:
                raise ValueError("no messages")
            images = [_image_bytes(i, base) for i in (row.get("images") or (row.get("metadata") or {}).get("images") or [])]
            *context, last = messages
            if last.get("role") != "assistant":
                raise ValueError("the last message is not the assistant's")
            target = last["content"] if isinstance(last["content"], str) else "".join(
                p.get("text", "") for p in last["content"])
            yield Sample(prompt=_to_prompt(context, images, catalogue), target=target, meta={"source": f"{path}:{n}"})
        except (ValueError, KeyError, TypeError, OSError, json.JSONDecodeError) as err:
            raise DocumentError(f"{path} line {n}: {err}") from None


def _to_prompt(messages: list[dict[str, Any]], images: list[bytes], catalogue: Any) -> Prompt:
    it = iter(images)
    out = []
    for m in messages:
        content = m.get("content", "")
        parts: list[dict[str, Any]] = []
        items: list[dict[str, Any]] = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for p in items:
            kind = p.get("type")
            if kind in ("image", "image_url"):
                if kind == "image_url" and str(p["image_url"].get("url", "")).startswith(("data:", "file://", "/")):
                    parts.append({"type": "image", "image": _image_bytes(p["image_url"], Path("."))})
                else:
                    parts.append({"type": "image", "image": next(it)})
            elif kind == "text":
                chunks = p["text"].split("<image>")
                for j, chunk in enumerate(chunks):
                    if chunk:
                        parts.append({"type": "text", "text": chunk})
                    if j < len(chunks) - 1:
                        parts.append({"type": "image", "image": next(it)})
        role = m["role"]
        out.append({"role": role, "content": parts})
    return peer_policy(catalogue=catalogue).prompt_class(messages=out, tools=[])


def export_messages(trajectories: Iterable[tuple[Trajectory, Optional[Path]]], out: Path, *, catalogue: Any) -> int:
    """Write one OpenAI-style row per turn: ``{"messages": [...], "images": [paths]}``."""
    count = 0
    with out.open("w", encoding="utf-8") as fh:
        for traj, run_dir in trajectories:
            for sample in trajectory_samples(traj, run_dir, catalogue=catalogue):
                step = traj.steps[sample.meta["step"]]
                images = []
                if step.observation.screenshot_file and run_dir is not None:
                    images.append(str((run_dir / step.observation.screenshot_file).resolve()))
                messages = []
                for m in peer_policy(catalogue=catalogue).openai_messages(_strip_images(sample.prompt, catalogue)):
                    messages.append(m)
                messages.append({"role": "assistant", "content": sample.target})
                fh.write(json.dumps({"messages": messages, "images": images, "task": traj.task.id}) + "\n")
                count += 1
    return count


def _strip_images(prompt: Prompt, catalogue: Any) -> Prompt:
    msgs = []
    for m in prompt.messages:
        parts = [p if p["type"] == "text" else {"type": "text", "text": "<image>"} for p in m["content"]]
        msgs.append({**m, "content": parts})
    return peer_policy(catalogue=catalogue).prompt_class(messages=msgs, tools=prompt.tools)
