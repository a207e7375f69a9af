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
