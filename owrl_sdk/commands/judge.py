"""``owrl judge``: score a run folder or a trajectory file with a judge plugin."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Optional

import click

from owrl_sdk.cli import PathArg
from owrl_sdk.errors import UsageError
from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl


@click.command("judge")
@click.argument("path", type=PathArg("any", "a run folder or trajectory file", exists=True))
@click.option("--judge", "judge_name", default="openwebrl-judge", show_default=True, help="Judge plugin.")
@click.option("--model", help="Model id or local path for model judges.")
@click.option("--profile", type=click.Choice(["openwebrl", "owrl"]),
              help="Interface profile of model judges: openwebrl (OpenWebRL-Judge-8B's SUCCESS / NOT SUCCESS "
              "contract) or owrl (default: by checkpoint).")
@click.option("--save/--no-save", default=True, show_default=True, help="Add the judgement to the trajectory file.")
@click.option("--json", "as_json", is_flag=True, help="Print the judgement as JSON.")
def judge_command(path: str, judge_name: str, model: Optional[str], profile: Optional[str], save: bool,
                  as_json: bool) -> None:
    """Score a run folder or trajectory file."""
    from owrl_sdk.formats.documents import load_trajectory, save_trajectory
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.contract.plugins import load_checked_settings as load_settings
    from owrl_sdk.safety.secrets import dumps, redact

    settings = load_settings({"profile": profile})
    catalogue = Plugins().catalogue
    judge = catalogue.build("judges", judge_name, settings, **({"model": model} if model else {}))
    p = Path(path)
    traj_file = p / "trajectory.json" if p.is_dir() else p
    traj = load_trajectory(traj_file)
    traj.metadata.setdefault("run_dir", str(traj_file.parent))
    judgement = asyncio.run(_judge(judge, judge_name, traj))
    if save:
        traj.judgements.append(judgement)
        save_trajectory(traj, traj_file)
    if as_json:
        click.echo(dumps({"path": str(traj_file), **judgement.model_dump(exclude={"details"}),
                          "details": {k: v for k, v in judgement.details.items() if k != "raw"}}))
    else:
        label = {True: "success", False: "failure", None: "no label"}[judgement.success]
        click.echo(redact(f"{judge_name}: {label}, score {judgement.score:.2f} — {judgement.reason}"))
        for warning in judgement.details.get("warnings") or []:
            click.echo(f"warning: {warning}", err=True)


async def _judge(judge: Any, judge_name: str, traj: Any) -> Any:
    """The judgement; a model judge whose weights cannot be had says what works for ``owrl judge``."""
    from owrl_sdk.errors import ModelUnavailable

    try:
        return await judge.judge(traj)
    except ModelUnavailable:
        # The backend's own remedy names `owrl run`'s options (--policy openai), which this command lacks.
        raise UsageError(_no_weights(judge, judge_name)) from None


def _no_weights(judge: Any, judge_name: str) -> str:
    model_id = getattr(judge, "model_id", None)
    what = f"the judge model '{model_id}'" if model_id else f"the model of judge '{judge_name}'"
    fetch = ""
    if judge_name == "openwebrl-judge" and model_id == "OpenWebRL/OpenWebRL-Judge-8B":
        fetch = " fetch it once with `owrl model fetch openwebrl-judge`,"
    return (f"cannot load {what}: its weights are not on this machine and cannot be downloaded. "
            f"Pass --model PATH to a local checkpoint,{fetch} or use an endpoint: "
            f'backend = "openai" and base_url = "http://HOST:PORT/v1" in [plugins.{judge_name}] of owrl.toml')


@hookimpl
def register_commands(register: Register) -> None:
    register(judge_command)
