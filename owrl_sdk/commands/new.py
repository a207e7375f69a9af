"""``owrl new KIND NAME``: a plugin package from a template (rendered with cookiecutter).

The templates are the folders of ``templates/`` that hold a ``cookiecutter.json``; the
wheel ships that folder as the package ``owrl_templates``. They are plain cookiecutter
templates, so ``cookiecutter templates/tool`` renders them the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import click

from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl

#: The templates folder of a source checkout, used when ``owrl_templates`` is not importable
#: (an editable install made before the templates became a package).
CHECKOUT_TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def templates_dir() -> Optional[Path]:
    """Where the templates are: the installed ``owrl_templates`` package, else a checkout's ``templates/``."""
    try:
        from importlib.resources import files

        root = Path(str(files("owrl_templates")))
    except (ModuleNotFoundError, TypeError):
        root = None
    if root is not None and root.is_dir():
        return root
    if (CHECKOUT_TEMPLATES.parent / "pyproject.toml").is_file() and CHECKOUT_TEMPLATES.is_dir():
        return CHECKOUT_TEMPLATES
    return None


def kinds() -> list[str]:
    root = templates_dir()
    return sorted(p.name for p in root.iterdir() if (p / "cookiecutter.json").is_file()) if root else []


def render(kind: str, name: str, out: Path, extra: Optional[dict[str, Any]] = None) -> Path:
    from owrl_sdk.errors import UsageError

    available = kinds()
    root = templates_dir()
    if root is None or kind not in available:  # no templates folder: no kinds either
        raise UsageError(f"no template '{kind}' (available: {', '.join(available) or 'none'})")
    try:
        from cookiecutter.main import cookiecutter
    except ImportError:
        raise UsageError("owrl new needs cookiecutter: pip install 'openwebrl-sdk[scaffold]' "
                         "(or pip install cookiecutter)") from None
    out.mkdir(parents=True, exist_ok=True)
    try:
        made = cookiecutter(str(root / kind), no_input=True, output_dir=str(out),
                            extra_context={"name": name, **(extra or {})})
    except Exception as err:  # cookiecutter's own errors: an existing folder, a bad name
        raise UsageError(f"cannot render the {kind} template: {_reason(err)}") from None
    return Path(made)


def _reason(err: Exception) -> str:
    """Cookiecutter's message without its own "Error: " (the CLI adds one), on one line."""
    text = " ".join(str(err).split()) or type(err).__name__
    if text[:6].lower() == "error:":
        text = text[6:].lstrip()
    if type(err).__name__ == "OutputDirExistsException":
        text += ": remove it, or choose another NAME or --out"
    return text


@click.command("new")
@click.argument("kind")
@click.argument("name")
@click.option("--out", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Folder to create the package in.")
@click.option("--domain", help="Site adapters only: the domain the adapter serves.")
def new_command(kind: str, name: str, out: str, domain: Optional[str]) -> None:
    """Create a plugin package from a template.

    KIND is site-adapter, tool or judge (the folders of owrl's templates); NAME is the
    plugin's entry-point name, e.g. owrl new tool read-prices.
    """
    from owrl_sdk.errors import UsageError

    if domain is not None and kind != "site-adapter" and kind in kinds():  # an unknown kind: render says so
        raise UsageError(f"--domain is for site adapters only, not for a {kind}")
    extra = {"domain": domain} if domain else {}
    path = render(kind, name, Path(out), extra)
    click.echo(f"created {path}\nnext: pip install -e {path} && owrl plugins")


@hookimpl
def register_commands(register: Register) -> None:
    register(new_command)
