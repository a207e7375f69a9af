"""``owrl model``: model utilities (a tiny checkpoint for trying owrl offline)."""

from __future__ import annotations

import click


@click.group("model")
def model_command() -> None:
    """Model utilities."""


@model_command.command("tiny")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--family", type=click.Choice(["qwen3-vl", "qwen2-vl", "qwen2.5-vl"]), default="qwen3-vl", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def tiny_command(out: str, family: str, seed: int) -> None:
    """Write a tiny random Qwen-VL checkpoint to OUT (it proves plumbing, not skill)."""
    from .tiny import build_tiny_vl

    path = build_tiny_vl(out, family, seed)
    click.echo(f"wrote a tiny {family} checkpoint to {path}")

