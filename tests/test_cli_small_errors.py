"""Small things a user meets in the CLI's messages: one "Error:" per error, a remedy that the
command it is printed by understands, a hint for a misspelt setting, the variable behind a bad
value, and quiet template tests and tiny-model writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from owrl_cli import KEEP, owrl
from owrl_sdk.config import load_settings
from owrl_sdk.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


# ------------------------------------------------------------------ owrl new


def test_new_into_an_existing_folder_says_error_once(tmp_path):
    first = owrl("new", "tool", "read-prices", "--out", str(tmp_path))
    assert first.returncode == 0, first.stderr
    again = owrl("new", "tool", "read-prices", "--out", str(tmp_path))
    assert again.returncode == 2
    lines = error_lines(again.stderr)
    assert len(lines) == 1 and lines[0].count("Error:") == 1, again.stderr
    assert lines[0].startswith("Error: cannot render the tool template: ")
    assert "owrl_read_prices" in lines[0] and "already exists" in lines[0]


# ------------------------------------------------------------------ owrl judge


def test_judge_without_weights_suggests_what_the_judge_takes(tmp_path):
    flow = tmp_path / "flow.json"
    flow.write_text(json.dumps({"schema": "owrl.flow/1", "task": "Say hi.", "start_url": "demo:shop/",
                                "turns": [{"calls": [{"name": "done", "arguments": {"response": "hi"}}]}]}))
    ran = owrl("run", "--flow", str(flow), "--out", "runs", "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    run_dir = json.loads(ran.stdout)["run_dir"]
    # no weights anywhere: an empty home (owrl's cache, the hub's cache) and no network for the hub
    env = {"HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1",
           "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = owrl("judge", run_dir, "--no-save", cwd=tmp_path, env=env)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    line = error_lines(out.stderr)[-1]
    assert line.startswith("Error: cannot load the judge model 'OpenWebRL/OpenWebRL-Judge-8B'"), line
    assert "--model PATH" in line and 'backend = "openai"' in line and "[plugins.openwebrl-judge]" in line
    assert "--policy" not in line  # owrl judge has no such option


# ------------------------------------------------------------------ settings


def test_a_misspelt_setting_gets_a_did_you_mean(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    (tmp_path / "owrl.toml").write_text("max_stepz = 3\n")
    with pytest.raises(ConfigError, match=r"unknown setting 'max_stepz' \(from .*owrl.toml\); did you mean 'max_steps'\?$"):
        load_settings(environ={}, cwd=tmp_path)
    (tmp_path / "owrl.toml").write_text("")
    with pytest.raises(ConfigError, match=r"unknown setting 'headles' \(from command line\); did you mean 'headless'\?$"):
        load_settings(overrides={"headles": False}, environ={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"unknown setting 'zzzz' \(from command line\)$"):  # nothing close: no guess
        load_settings(overrides={"zzzz": 1}, environ={}, cwd=tmp_path)


def test_a_misspelt_setting_in_owrl_toml_through_the_cli(tmp_path):
    (tmp_path / "owrl.toml").write_text("polcy = 'scripted'\n")
    out = owrl("run", "--task", "x", "--url", "http://127.0.0.1:9/", cwd=tmp_path,
               env={"XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert out.returncode == 2
    line = error_lines(out.stderr)[-1]
    assert line.startswith("Error: unknown setting 'polcy' (from ") and line.endswith("; did you mean 'policy'?")


def test_a_bad_environment_value_names_its_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    with pytest.raises(ConfigError, match=r"setting 'max_steps' \(from OWRL_MAX_STEPS\): Input should be a valid integer"):
        load_settings(environ={"OWRL_MAX_STEPS": "many"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"setting 'browser_endpoint' \(from OWRL_BROWSER_ENDPOINT\): .*ws://"):
        load_settings(environ={"OWRL_BROWSER_ENDPOINT": "http://x"}, cwd=tmp_path)
    # the command line wins over the variable, and then it is the command line's value that is wrong
    with pytest.raises(ConfigError, match=r"setting 'max_steps' \(from command line\)"):
        load_settings(overrides={"max_steps": 0}, environ={"OWRL_MAX_STEPS": "5"}, cwd=tmp_path)
    out = owrl("run", "--task", "x", "--url", "http://127.0.0.1:9/", env={"OWRL_MAX_STEPS": "-1"}, cwd=tmp_path)
    assert out.returncode == 2
    assert "setting 'max_steps' (from OWRL_MAX_STEPS)" in out.stderr and "Traceback" not in out.stderr


# ------------------------------------------------------------------ templates


@pytest.mark.parametrize("kind", ["site-adapter", "tool", "judge"])
def test_template_tests_run_without_pytest_config_warnings(tmp_path, kind):
    made = owrl("new", kind, "acme-shop", "--out", str(tmp_path))
    assert made.returncode == 0, made.stderr
    pkg = tmp_path / "owrl_acme_shop"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
    # config-time warnings are given while collecting: collecting is enough, and needs no install
    for plugins in ([], ["-p", "no:asyncio"]):  # with pytest-asyncio, and without it
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                              *plugins, str(pkg / "tests")], capture_output=True, text=True, cwd=tmp_path,
                             env={**env, "PYTHONPATH": str(pkg)}, timeout=300)
        text = out.stdout + out.stderr
        assert out.returncode == 0, text[-3000:]
        assert "asyncio_default_fixture_loop_scope" not in text and "Warning" not in text, text[-3000:]


# ------------------------------------------------------------------ owrl model tiny


def test_model_tiny_is_quiet_and_says_what_a_run_will_do(tmp_path):
    pytest.importorskip("transformers")
    out = owrl("model", "tiny", "tiny-llama", "--family", "llama", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Writing model shards" not in out.stderr and "it/s" not in out.stderr, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "wrote a tiny llama checkpoint to tiny-llama"
    assert "aborted · policy.unparseable" in lines[1] and "fail · policy.length_limit" in lines[1]
    assert (tmp_path / "tiny-llama" / "model.safetensors").is_file()


def test_a_missing_extra_is_named_with_the_command_to_install_it():
    from owrl_sdk.errors import UsageError, require_extra

    require_extra("owrl train sft", "train", "json")  # present: nothing raised
    with pytest.raises(UsageError) as e:
        require_extra("owrl train sft", "train", "json", "no_such_module_owrl")
    assert str(e.value) == "owrl train sft needs no_such_module_owrl: pip install 'openwebrl-sdk[train]'"
    assert e.value.exit_code == 2
