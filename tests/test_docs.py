"""The hook reference and the CLI help in docs/ are generated from the code and must match it."""

from __future__ import annotations

import subprocess
import sys

from owrl_sdk import docgen


def test_every_hook_has_a_section_headed_by_its_exact_signature():
    text = (docgen.DOCS / "hooks.md").read_text()
    for name in docgen.hook_names():
        assert f"## `{docgen.hook_signature(name)}`" in text, f"{name} is missing or its signature drifted"


def test_generated_docs_are_current():
    """Checked in a fresh interpreter, as a person runs docgen: commands invoked earlier in this
    process cache their help option (click does) with the names of the context they ran in."""
    out = subprocess.run([sys.executable, "-m", "owrl_sdk.docgen", "--check"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, f"run: python -m owrl_sdk.docgen\n{out.stderr}"


def test_the_cli_reference_names_the_help_options_the_cli_accepts():
    """cli.md once listed only --help while every command also takes -h (the group's context
    settings, which a bare click.Context left out)."""
    text = (docgen.DOCS / "cli.md").read_text()
    for path in (["owrl"], ["owrl", "run"], ["owrl", "train", "sft"]):
        section = text.split(f"## `{' '.join(path)}`\n", 1)[1].split("\n## ", 1)[0]
        out = subprocess.run([sys.executable, "-m", "owrl_sdk", *path[1:], "-h"], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "-h, --help" in out.stdout and "-h, --help" in section, path
