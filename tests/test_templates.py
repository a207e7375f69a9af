"""A plugin rendered from a template installs, is listed by owrl, and its own tests pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_site_adapter_template(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_")}
    owrl = lambda *a, **kw: subprocess.run([sys.executable, "-m", "owrl_sdk", *a], capture_output=True, text=True,
                                           timeout=300, **kw)
    out = owrl("new", "site-adapter", "acme-shop", "--domain", "acme.test", "--out", str(tmp_path), env=env)
    assert out.returncode == 0, out.stderr
    pkg = tmp_path / "owrl_acme_shop"
    assert (pkg / "owrl_acme_shop" / "__init__.py").exists()
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--target", str(target), str(pkg)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-1500:]
    env["PYTHONPATH"] = str(target)
    listed = json.loads(owrl("plugins", "--json", env=env).stdout)
    mine = [p for p in listed["plugins"] if p["name"] == "acme-shop"]
    assert mine and mine[0]["hooks"] == ["register_site_adapters"] and not listed["errors"]
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(pkg / "tests")],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert tests.returncode == 0, tests.stdout[-2000:]
    assert "3 passed" in tests.stdout


def test_unknown_template_is_a_usage_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "owrl_sdk", "new", "widget", "x", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no template 'widget' (available: site-adapter)" in out.stderr
