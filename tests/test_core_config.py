"""Settings precedence (options > environment > owrl.toml) and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from owrl_cli import owrl

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
    from owrl_sdk.browser.chromium import configured_chromium, find_chromium

    monkeypatch.delenv("OWRL_CHROMIUM", raising=False)
    assert configured_chromium() is None
    monkeypatch.setenv("OWRL_CHROMIUM", "/nonexistent/chromium")
    assert configured_chromium() == "/nonexistent/chromium"
    assert configured_chromium("/from/settings") == "/from/settings"
    exe = tmp_path / "chrome"
    exe.write_text("")
    monkeypatch.setenv("OWRL_CHROMIUM", str(exe))
    assert find_chromium().source == "OWRL_CHROMIUM" and find_chromium().path == str(exe)


def test_component_options_are_validated_where_settings_load(tmp_path, monkeypatch):
    from pydantic import BaseModel

    from owrl_sdk.config import load_settings

    class CropOptions(BaseModel):
        keep: int = 2
        mode: str = "crop"

    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "owrl.toml").write_text('[plugins.crop]\nkeep = "3"\n')
    s = load_settings(environ={}, cwd=tmp_path, option_models={"crop": CropOptions})
    assert s.options("crop", CropOptions).keep == 3  # converted where read, too
    assert s.options("crop", CropOptions, keep=5, mode=None).keep == 5
    (tmp_path / "owrl.toml").write_text('[plugins.crop]\nkeep = "many"\n')
    with pytest.raises(ConfigError, match=r"setting 'keep' of \[plugins.crop\] \(from .*owrl.toml\)"):
        load_settings(environ={}, cwd=tmp_path, option_models={"crop": CropOptions})
    (tmp_path / "owrl.toml").write_text('[plugins.crop]\nmod = "x"\n')
    with pytest.raises(ConfigError, match="unknown setting 'mod' in .*did you mean 'mode'"):
        load_settings(environ={}, cwd=tmp_path, option_models={"crop": CropOptions})
    assert load_settings(environ={}, cwd=tmp_path).plugin("crop") == {"mod": "x"}  # no model: as before


def test_catalogue_names_the_option_models(plugins, register_plugin, tmp_path, monkeypatch):
    from dataclasses import dataclass

    from owrl_sdk import hookimpl
    from owrl_sdk.contract.components import Judge

    @dataclass
    class StrictOptions:
        threshold: float = 0.5

    class Strict(Judge):
        name = "strict"
        Options = StrictOptions

    class Reg:
        @hookimpl
        def register_judges(self, register):
            register(Strict)

    register_plugin(Reg(), name="strict-judge")
    assert plugins.catalogue.option_models()["strict"] is StrictOptions
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (tmp_path / "owrl.toml").write_text("[plugins.strict]\nthreshold = \"high\"\n")
    with pytest.raises(ConfigError, match="threshold"):
        plugins.load_settings()


def test_training_config_is_read_through_the_settings_machinery(tmp_path):
    pytest.importorskip("torch")
    from owrl_train.rl import RLConfig

    path = tmp_path / "rl.toml"
    path.write_text('model = "m"\nlr = "2e-3"\niterations = 4\n')
    cfg = RLConfig.from_toml(path)
    assert (cfg.lr, cfg.iterations, cfg.out) == (2e-3, 4, Path("rl-out"))
    path.write_text('model = "m"\niterations = "four"\n')
    with pytest.raises(ConfigError, match="setting 'iterations' of the training config"):
        RLConfig.from_toml(path)
    path.write_bytes(b'model = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        RLConfig.from_toml(path)
    with pytest.raises(ConfigError, match="no such file"):
        RLConfig.from_toml(tmp_path / "missing.toml")


def test_a_renamed_table_is_read_under_its_new_name_and_the_new_one_wins(tmp_path, monkeypatch):
    from typing import ClassVar

    from pydantic import BaseModel

    class Opts(BaseModel):
        renamed_from: ClassVar[tuple[str, ...]] = ("old-name",)
        a: int = 0
        b: int = 0

    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "owrl.toml").write_text("[plugins.old-name]\na = 1\nb = 1\n[plugins.new-name]\nb = 2\n")
    with pytest.warns(FutureWarning, match=r"^\[plugins\.old-name\] in owrl.toml is deprecated: rename it "
                                           r"\[plugins\.new-name\]"):
        s = load_settings(environ={}, cwd=tmp_path, option_models={"new-name": Opts})
    opts = s.options("new-name", Opts)
    assert (opts.a, opts.b) == (1, 2)
    (tmp_path / "owrl.toml").write_text("[plugins.old-name]\na = \"x\"\n")
    with pytest.warns(FutureWarning), pytest.raises(ConfigError, match=r"\[plugins\.old-name\] \(now \[plugins\.new-name\]\)"):
        load_settings(environ={}, cwd=tmp_path, option_models={"new-name": Opts})


def test_a_variable_one_typo_from_a_setting_is_refused(tmp_path, monkeypatch):
    """OWRL_ALLOWED_DOMAIN (no S) read as nothing would leave the allowlist empty, so any host."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    for wrong, meant in [("OWRL_ALLOWED_DOMAIN", "OWRL_ALLOWED_DOMAINS"), ("OWRL_BLOCKED_DOMAIN", "OWRL_BLOCKED_DOMAINS"),
                         ("OWRL_ALLOWEDDOMAINS", "OWRL_ALLOWED_DOMAINS"), ("OWRL_MAX_STEP", "OWRL_MAX_STEPS")]:
        with pytest.raises(ConfigError, match=f"environment variable {wrong} is not a setting; did you mean {meant}\\?"):
            load_settings(environ={wrong: "shop.test"}, cwd=tmp_path)
    # what owrl reads besides the settings, secrets, and variables far from every setting (a plugin's) pass
    fine = {"OWRL_SERVE_TOKEN": "t", "OWRL_CACHE_DIR": "/c", "OWRL_STATE_DIR": "/s", "OWRL_SECRET_ALLOWED_DOMAIN": "x",
            "OWRL_OPENAI_MODEL": "m", "OWRL_DEMO_SHOP_ADAPTER_ENABLED": "1", "OWRL_ALLOWED_DOMAINS": "shop.test"}
    assert load_settings(environ=fine, cwd=tmp_path).allowed_domains == ["shop.test"]


def test_owrl_run_stops_on_a_misspelt_allowlist_before_any_browser(tmp_path):
    done = owrl("run", "--task", "open it", "--url", "http://127.0.0.1:9/", cwd=tmp_path,
                env={"OWRL_ALLOWED_DOMAIN": "shop.test", "XDG_CONFIG_HOME": str(tmp_path)}, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "did you mean OWRL_ALLOWED_DOMAINS?" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_secret_bindings_merge_across_files_and_a_misspelt_one_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    (tmp_path / "cfg" / "owrl").mkdir(parents=True)
    (tmp_path / "cfg" / "owrl" / "owrl.toml").write_text('[secrets_allowed_on]\nBANK_PW = ["bank.test"]\n')
    (tmp_path / "owrl.toml").write_text('[secrets_allowed_on]\nSHOP_PW = ["shop.test"]\n')
    s = load_settings(environ={"OWRL_SECRETS_ALLOWED_ON": "API=api.test,api2.test;SHOP_PW"}, cwd=tmp_path)
    assert s.secrets_allowed_on == {"BANK_PW": ["bank.test"], "SHOP_PW": [], "API": ["api.test", "api2.test"]}
    with pytest.raises(ConfigError, match="did you mean OWRL_SECRETS_ALLOWED_ON"):
        load_settings(environ={"OWRL_SECRET_ALLOWED_ON": "SHOP_PW=shop.test"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="'SHOP_PW:shop.test' is not a secret's NAME"):
        load_settings(environ={"OWRL_SECRETS_ALLOWED_ON": "SHOP_PW:shop.test"}, cwd=tmp_path)


def test_owrl_config_names_the_file_read_instead_of_the_working_directorys(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "none"))
    (tmp_path / "owrl.toml").write_text("max_steps = 7\n")
    other = tmp_path / "ops" / "prod.toml"
    other.parent.mkdir()
    other.write_text("max_steps = 12\n")
    home: dict[str, str] = {}
    assert load_settings(environ=home, cwd=tmp_path).max_steps == 7
    assert load_settings(environ={**home, "OWRL_CONFIG": str(other)}, cwd=tmp_path).max_steps == 12
    assert load_settings(environ={**home, "OWRL_CONFIG": "ops/prod.toml"}, cwd=tmp_path).max_steps == 12  # relative: to cwd
    with pytest.raises(ConfigError, match="names ops/typo.toml, which is not a file"):
        load_settings(environ={**home, "OWRL_CONFIG": "ops/typo.toml"}, cwd=tmp_path)


def test_the_config_option_reaches_the_command(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("max_steps = 0\n")
    (tmp_path / "owrl.toml").write_text("max_steps = 3\n")
    out = owrl("--config", str(bad), "run", "--task", "t", "--url", "http://127.0.0.1:9/", cwd=tmp_path, timeout=120)
    assert out.returncode == 2 and "bad.toml" in out.stderr and "max_steps" in out.stderr, out.stderr
    out = owrl("--config", "missing.toml", "run", "--task", "t", "--url", "http://127.0.0.1:9/", cwd=tmp_path, timeout=120)
    assert out.returncode == 2 and "missing.toml" in out.stderr, out.stderr
