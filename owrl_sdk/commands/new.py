"""``owrl new KIND NAME``: a plugin package from a template (rendered with cookiecutter).

The templates live in ``templates/`` and are plain cookiecutter templates, so
``cookiecutter templates/site-adapter`` renders them the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from owrl_sdk.plugins import hookimpl

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def kinds() -> list[str]:
    return sorted(p.name for p in TEMPLATES.iterdir() if (p / "cookiecutter.json").exists()) if TEMPLATES.is_dir() else []


def render(kind: str, name: str, out: Path, extra: Optional[dict] = None) -> Path:
    from owrl_sdk.errors import UsageError

    if kind not in kinds():
        raise UsageError(f"no template '{kind}' (available: {', '.join(kinds()) or 'none'})")
    try:
        from cookiecutter.main import cookiecutter
    except ImportError:
        raise UsageError("owrl new needs cookiecutter: pip install cookiecutter") from None
    out.mkdir(parents=True, exist_ok=True)
    try:
        made = cookiecutter(str(TEMPLATES / kind), no_input=True, output_dir=str(out),
                            extra_context={"name": name, **(extra or {})})
    except Exception as err:  # cookiecutter's own errors: an existing folder, a bad name
        raise UsageError(f"cannot render the {kind} template: {err}") from None
    return Path(made)


@click.command("new")
@click.argument("kind")
@click.argument("name")
@click.option("--out", type=click.Path(file_okay=False), default=".", show_default=True)
@click.option("--domain", help="For a site adapter: the domain it serves.")
def new_command(kind: str, name: str, out: str, domain: Optional[str]) -> None:
    """Create a plugin package from a template: owrl new site-adapter NAME."""
    extra = {"domain": domain} if domain else {}
    path = render(kind, name, Path(out), extra)
    click.echo(f"created {path}\nnext: pip install -e {path} && owrl plugins")


@hookimpl
def register_commands(register):
    register(new_command)
