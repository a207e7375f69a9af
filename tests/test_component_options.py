"""Component options: each in-repo component's ``Options`` model, keyed by its registered name,
validated where the commands load settings; tables under former names still read, with a warning."""

from __future__ import annotations

import warnings

import pytest
from pydantic import BaseModel, ValidationError

from owrl_sdk.config import Settings, load_settings
from owrl_sdk.errors import ConfigError


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A working directory with its own owrl.toml and no user config file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return tmp_path


def _models():
    from owrl_sdk.contract.plugins import Plugins

    return Plugins().catalogue.option_models()


def test_every_in_repo_component_that_reads_options_declares_them():
    from owrl_sdk.failures.startpage import FailuresOptions
    from owrl_sdk.contract.plugins import Plugins

    models = _models()
    for name in ("default", "crop", "demo-shop", "miniwob", "random", "composite", "demo-shop-adapter"):
        assert name in models, name
        assert issubclass(models[name], BaseModel)
    assert Plugins().catalogue.get("memories", "default").Options is models["default"]
    assert FailuresOptions().check_start_page is True


@pytest.mark.parametrize("name, key, bad", [
    ("default", "screenshots", "many"),
    ("default", "reasoning", "some"),
    ("crop", "crop", "wide"),
    ("crop", "full_every", 0),
    ("demo-shop", "port", "any"),
    ("miniwob", "time_limit", "long"),
    ("miniwob", "max_steps", "few"),
    ("random", "seed", "lucky"),
    ("composite", "penalty", "harsh"),
    ("composite", "inner", 3),
    ("demo-shop-adapter", "enabled", "perhaps"),
    ("demo-shop-adapter", "consent", "maybe"),
    ("failure-weighted", "threshold", "high"),
    ("failure-weighted", "boost", "lots"),
])
def test_each_options_model_rejects_a_wrong_value(name, key, bad):
    model = _models()[name]
    with pytest.raises(ConfigError, match=rf"setting '{key}' of \[plugins\.{name}\]"):
        Settings(plugins={name: {key: bad}}).options(name, model)
    with pytest.raises(ConfigError, match=rf"unknown setting 'colour' in \[plugins\.{name}\]"):
        Settings(plugins={name: {"colour": "red"}}).options(name, model)


@pytest.mark.parametrize("name, key, bad", [
    ("openwebrl", "temperature", "hot"),
    ("openwebrl", "settle", "soon"),
    ("owrl-text", "tools", "click"),
    ("openai", "timeout", "long"),
    ("openwebrl-judge", "max_new_tokens", "many"),
])
def test_the_model_policies_and_judge_type_their_known_keys(name, key, bad):
    model = _models()[name]
    with pytest.raises(ConfigError, match=rf"setting '{key}[.0-9]*' of \[plugins\.{name}\]"):
        Settings(plugins={name: {key: bad}}).options(name, model)
    given = Settings(plugins={name: {"temperature": "0.5", "custom": "kept"}}).options(name, model)
    assert given.temperature == 0.5 and given.model_dump(exclude_unset=True)["custom"] == "kept"


def test_failures_options_reject_a_wrong_value():
    from owrl_sdk.failures.startpage import FailuresOptions

    with pytest.raises(ConfigError, match=r"setting 'check_start_page' of \[plugins\.failures\]"):
        Settings(plugins={"failures": {"check_start_page": "sometimes"}}).options("failures", FailuresOptions)


def test_components_read_their_options_typed():
    from owrl_baselines import RandomPolicy
    from owrl_memory import CropMemory, FullHistoryMemory
    from owrl_miniwob import MiniWoBSuite

    from builtin_judges.rules import CompositeJudge

    settings = Settings(plugins={"default": {"screenshots": "2"}, "crop": {"crop": "200"},
                                 "miniwob": {"time_limit": "4"}, "composite": {"penalty": "-1"}})
    assert FullHistoryMemory(settings).k == 2
    crop = CropMemory(settings)
    assert (crop.k, crop.crop, crop.full_every) == (2, 200, 5)  # screenshots: [plugins.default]'s
    assert CropMemory(settings, screenshots=3).k == 3
    suite = MiniWoBSuite(settings)
    assert suite.time_limit == 4.0 and suite.max_steps == 8
    assert CompositeJudge(settings).penalty == -1.0
    assert RandomPolicy(settings, seed=7).rng.random() == RandomPolicy(Settings(plugins={"random": {"seed": 7}})).rng.random()


@pytest.mark.parametrize("old, new", [("memory", "default"), ("memory-crop", "crop"), ("demo", "demo-shop")])
def test_a_table_under_its_old_name_still_works_with_a_warning(project, old, new):
    value = {"memory": ("screenshots", 2), "memory-crop": ("crop", 120), "demo": ("port", 8123)}[old]
    (project / "owrl.toml").write_text(f"[plugins.{old}]\n{value[0]} = {value[1]}\n")
    with pytest.warns(FutureWarning, match=rf"\[plugins\.{old}\] in owrl.toml is deprecated: rename it \[plugins\.{new}\]"):
        settings = load_settings(environ={}, option_models=_models())
    assert getattr(settings.options(new, _models()[new]), value[0]) == value[1]
    with pytest.warns(FutureWarning, match=rf"rename it \[plugins\.{new}\]"):  # read directly, too
        assert getattr(Settings(plugins={old: {value[0]: value[1]}}).options(new, _models()[new]), value[0]) == value[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name: no warning
        Settings(plugins={new: {value[0]: value[1]}}).options(new, _models()[new])



def test_where_the_old_and_the_new_table_both_are_the_new_one_wins_key_by_key():
    """configuration.md: also when read straight from Settings (the Python API), not only
    through load_settings with the option models."""
    both = Settings(plugins={"memory": {"screenshots": 3, "reasoning": "full"}, "default": {"reasoning": "action-only"}})
    with pytest.warns(FutureWarning, match=r"rename it \[plugins\.default\]"):
        options = both.options("default", _models()["default"])
    assert (options.screenshots, options.reasoning) == (3, "action-only")


def test_the_old_memory_table_still_sets_both_memories():
    from owrl_memory import CropMemory, FullHistoryMemory

    settings = Settings(plugins={"memory": {"screenshots": 3, "reasoning": "action-only"},
                                 "memory-crop": {"crop": 100}})
    with pytest.warns(FutureWarning):
        memory, crop = FullHistoryMemory(settings), CropMemory(settings)
    assert (memory.k, memory.reasoning) == (3, "action-only")
    assert (crop.k, crop.reasoning, crop.crop) == (3, "action-only", 100)


def test_a_bad_old_table_is_named_as_written(project):
    (project / "owrl.toml").write_text('[plugins.memory]\nscreenshots = -1\n')
    with pytest.warns(FutureWarning), pytest.raises(
            ConfigError, match=r"setting 'screenshots' of \[plugins\.memory\] \(now \[plugins\.default\]\) \(from .*owrl.toml\)"):
        load_settings(environ={}, option_models=_models())


def test_owrl_run_with_a_bad_option_exits_2_naming_key_table_and_file(project, capsys):
    from owrl_sdk.cli import main

    (project / "owrl.toml").write_text('[plugins.default]\nscreenshots = "many"\n')
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--task", "look", "--url", "about:blank", "--policy", "random"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "setting 'screenshots' of [plugins.default]" in err and str(project / "owrl.toml") in err
    assert len(err.strip().splitlines()) == 1


def test_owrl_run_with_a_bad_failures_option_exits_2(project, capsys):
    from owrl_sdk.cli import main

    (project / "owrl.toml").write_text('[plugins.failures]\ncheck_start_page = "sometimes"\n')
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--task", "look", "--url", "about:blank", "--policy", "random"])
    assert exit_.value.code == 2
    assert "setting 'check_start_page' of [plugins.failures]" in capsys.readouterr().err


def test_the_shop_adapter_options_behave_as_before(project):
    from owrl_shop_adapter.options import ShopOptions, parse_options

    opts = parse_options({"enabled": "yes", "login": "", "user": 42, "base_url": " http://127.0.0.1:8000 "})
    assert opts.enabled is True and opts.login is False and opts.user == "42"
    assert opts.base_url == "http://127.0.0.1:8000"
    assert parse_options({}) == ShopOptions()
    assert not ShopOptions().enabled and ShopOptions().consent == "reject"
    with pytest.raises(ConfigError, match="'base_url' .*is not an http:// address"):
        parse_options({"base_url": "ftp://x"})
    parse_options({"login": False, "password": "plain"})  # no log-in: no placeholder needed
    with pytest.raises(ValidationError, match="frozen"):
        opts.enabled = False  # frozen, as the dataclass was
    (project / "owrl.toml").write_text('[plugins.demo-shop-adapter]\nenabled = "maybe"\n')
    with pytest.raises(ConfigError, match=r"setting 'enabled' of \[plugins\.demo-shop-adapter\] \(from .*owrl.toml\)"):
        load_settings(environ={}, option_models=_models())


def test_the_configuration_doc_lists_every_option_as_the_code_has_it():
    from pathlib import Path

    from owrl_sdk.config import options_reference, settings_reference
    from owrl_sdk.contract.plugins import Plugins

    text = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    for marker, table in (("settings", settings_reference()), ("options", options_reference(Plugins().option_models()))):
        block = text.split(f"<!-- {marker}:begin -->\n", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
        assert block == table, (f"docs/configuration.md's {marker} table drifted: paste the output of "
                                f"python -c 'from owrl_sdk.config import {marker}_reference as r; print(r(), end=\"\")'")


def test_the_samplers_read_their_options_typed():
    from owrl_sdk.types import Task
    from owrl_train.samplers import BucketSampler, FailureWeightedSampler

    task = Task(id="t", intent="x", start_url="about:blank")
    sampler = FailureWeightedSampler(Settings(), threshold="0.5", boost="4")
    sampler.update("t", [False, False, True])
    assert sampler.weight(task) == 4.0
    assert FailureWeightedSampler(None).conf.boost == 3.0  # no settings: the defaults
    buckets = BucketSampler(Settings(plugins={"buckets": {"weights": {"unseen": "5"}}}))
    assert buckets.weight(task) == 5.0
    with pytest.raises(ConfigError, match=r"setting 'weights\.easy.*' of \[plugins\.buckets\]"):
        BucketSampler(Settings(), weights={"easy": 1})
