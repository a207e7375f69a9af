"""Settings precedence (options > environment > owrl.toml) and errors that name the key."""

from __future__ import annotations

import pytest

from owrl_sdk.config import load_settings
from owrl_sdk.errors import ConfigError


def test_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    (tmp_path / "cfg" / "owrl").mkdir(parents=True)
    (tmp_path / "cfg" / "owrl" / "owrl.toml").write_text('max_steps = 10\npolicy = "user"\nmemory = "user"\n')
    (tmp_path / "owrl.toml").write_text('max_steps = 20\npolicy = "project"\n[plugins.memory]\nscreenshots = 2\n')
    s = load_settings(environ={}, cwd=tmp_path)
    assert (s.max_steps, s.policy, s.memory) == (20, "project", "user")
    s = load_settings(environ={"OWRL_MAX_STEPS": "40", "OWRL_LOAD_PLUGINS": ""}, cwd=tmp_path)
    assert s.max_steps == 40
    s = load_settings(overrides={"max_steps": 5, "policy": None}, environ={"OWRL_MAX_STEPS": "40"}, cwd=tmp_path)
    assert (s.max_steps, s.policy) == (5, "project")
    assert s.plugin("memory") == {"screenshots": 2}
    assert s.plugin("absent") == {}


def test_errors_name_key_and_source(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    with pytest.raises(ConfigError, match=r"setting 'max_steps' \(from OWRL_MAX_STEPS\): Input should be a valid integer"):
        load_settings(environ={"OWRL_MAX_STEPS": "many"}, cwd=tmp_path)
    (tmp_path / "owrl.toml").write_text("max_stepz = 3\n")
    with pytest.raises(ConfigError, match=r"unknown setting 'max_stepz' \(from .*owrl.toml\)"):
        load_settings(environ={}, cwd=tmp_path)
    (tmp_path / "owrl.toml").write_text("max_steps = [\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(environ={}, cwd=tmp_path)
    (tmp_path / "owrl.toml").write_text("")
    with pytest.raises(ConfigError, match=r"setting 'screenshot_quality' \(from command line\): Input should be less than or equal to 100"):
        load_settings(overrides={"screenshot_quality": 101}, environ={}, cwd=tmp_path)


def test_openai_variables_are_read_in_one_place(monkeypatch):
    from owrl_sdk.config import openai_endpoint

    assert openai_endpoint({}).model_dump() == {"base_url": None, "api_key": None, "model": None}
    env = {"OWRL_OPENAI_BASE_URL": "http://127.0.0.1:8000/v1", "OPENAI_API_KEY": "k", "OWRL_OPENAI_MODEL": ""}
    assert openai_endpoint(env).model_dump() == {"base_url": "http://127.0.0.1:8000/v1", "api_key": "k", "model": None}
    assert openai_endpoint({**env, "OWRL_OPENAI_API_KEY": "owrl"}).api_key == "owrl"
    monkeypatch.setenv("OWRL_OPENAI_BASE_URL", "http://h/v1/")
    monkeypatch.setenv("OWRL_OPENAI_MODEL", "m")
    from owrl_openwebrl.openai_backend import OpenAIBackend

    backend = OpenAIBackend()
    assert (backend.base_url, backend.model) == ("http://h/v1", "m")


def test_chromium_variable_is_read_in_one_place(monkeypatch, tmp_path):
    from owrl_sdk.chromium import configured_chromium, find_chromium

    monkeypatch.delenv("OWRL_CHROMIUM", raising=False)
    assert configured_chromium() is None
    monkeypatch.setenv("OWRL_CHROMIUM", "/nonexistent/chromium")
    assert configured_chromium() == "/nonexistent/chromium"
    assert configured_chromium("/from/settings") == "/from/settings"
    exe = tmp_path / "chrome"
    exe.write_text("")
    monkeypatch.setenv("OWRL_CHROMIUM", str(exe))
    assert find_chromium().source == "OWRL_CHROMIUM" and find_chromium().path == str(exe)
