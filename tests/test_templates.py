"""`owrl new`: a plugin rendered from each template installs, is listed by owrl, and its own tests pass.

The templates also ship in owrl's wheel and render from an install of it.
"""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from owrl_cli import KEEP, owrl

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"

#: kind, NAME, extra options, package made, hooks it implements, its own tests' tally
KINDS = [
    ("site-adapter", "acme-shop", ["--domain", "acme.test"], "owrl_acme_shop", ["register_site_adapters"], "3 passed"),
    ("tool", "read-prices", [], "owrl_read_prices", ["register_tools"], "4 passed"),
    ("judge", "order-check", [], "owrl_order_check", ["register_judges"], "3 passed"),
]


def run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, **kw)


def template_files(kind: str) -> set[str]:
    """The files of a template in the source tree, relative to templates/."""
    return {p.relative_to(TEMPLATES).as_posix() for p in (TEMPLATES / kind).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.slow
@pytest.mark.parametrize("kind,name,options,package,hooks,tally", KINDS, ids=[k[0] for k in KINDS])
def test_rendered_plugin_installs_lists_and_passes_its_tests(tmp_path, kind, name, options, package, hooks, tally):
    out = owrl("new", kind, name, *options, "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    pkg = tmp_path / package
    assert (pkg / package / "__init__.py").exists() and (pkg / "README.md").exists()
    target = tmp_path / "site"
    pip = run("-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target), str(pkg))
    assert pip.returncode == 0, pip.stderr[-1500:]
    listed = json.loads(owrl("plugins", "--json", env={"PYTHONPATH": str(target)}).stdout)
    mine = [p for p in listed["plugins"] if p["name"] == name]
    assert mine and mine[0]["hooks"] == hooks and not listed["errors"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    tests = run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(pkg / "tests"), cwd=tmp_path,
                env={**env, "PYTHONPATH": str(target)})
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert tally in tests.stdout


@pytest.mark.parametrize("kind", ["tool", "judge"])
def test_cookiecutters_own_command_renders_the_same_package(tmp_path, kind):
    by_owrl = owrl("new", kind, "same-name", "--out", str(tmp_path / "a"))
    assert by_owrl.returncode == 0, by_owrl.stderr
    by_cookiecutter = run("-m", "cookiecutter", str(TEMPLATES / kind), "--no-input", "name=same-name",
                          "-o", str(tmp_path / "b"))
    assert by_cookiecutter.returncode == 0, by_cookiecutter.stderr
    a, b = tmp_path / "a" / "owrl_same_name", tmp_path / "b" / "owrl_same_name"
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert ".gitignore" in files and "owrl_same_name/__init__.py" in files
    assert sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()) == files
    match, mismatch, errors = filecmp.cmpfiles(a, b, files, shallow=False)
    assert (mismatch, errors) == ([], [])


def test_domain_is_for_site_adapters_only(tmp_path):
    out = owrl("new", "judge", "x", "--domain", "a.test", "--out", str(tmp_path))
    assert out.returncode == 2 and "--domain is for site adapters only, not for a judge" in out.stderr
    assert not any(tmp_path.iterdir())


def test_unknown_template_is_a_usage_error(tmp_path):
    out = owrl("new", "widget", "x", "--out", str(tmp_path))
    assert out.returncode == 2 and "no template 'widget' (available: judge, site-adapter, tool)" in out.stderr


def test_the_wheel_ships_every_template_and_owrl_new_renders_from_it(tmp_path):
    # build out of tree: build/ and the egg-info go under tmp_path, not into the checkout
    extra = tmp_path / "build.cfg"
    extra.write_text(f"[build]\nbuild_base = {tmp_path / 'build'}\n[egg_info]\negg_base = {tmp_path}\n")
    built = run("-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(tmp_path / "whl"),
                env={**os.environ, "DIST_EXTRA_CONFIG": str(extra)})
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "whl").glob("openwebrl_sdk-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind in ("site-adapter", "tool", "judge"):
        expected = {f"owrl_templates/{f}" for f in template_files(kind)}
        assert expected - names == set(), f"{kind}: files missing from the wheel"
    assert "owrl_templates/tool/{{cookiecutter.package}}/.gitignore" in names
    assert not [n for n in names if n.startswith("owrl_templates/") and ("__pycache__" in n or n.endswith(".pyc"))]

    # installed from the wheel, away from the checkout, owrl new finds its templates there
    site = tmp_path / "site"
    pip = run("-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel))
    assert pip.returncode == 0, pip.stderr[-1500:]
    env = {"PYTHONPATH": str(site)}
    where = run("-c", "import owrl_sdk, owrl_templates; print(owrl_sdk.__file__); print(owrl_templates.__file__)",
                cwd=tmp_path, env={**os.environ, **env})
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout + where.stderr
    out = owrl("new", "tool", "from-wheel", "--out", str(tmp_path / "made"), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "made" / "owrl_from_wheel" / "owrl_from_wheel" / "__init__.py").is_file()
    listing = owrl("new", "widget", "x", cwd=tmp_path, env=env)
    assert "(available: judge, site-adapter, tool)" in listing.stderr
