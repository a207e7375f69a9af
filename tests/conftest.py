from __future__ import annotations

import os
import tempfile

import pytest

# Persistent state (the host blocklist) goes to a throwaway folder, for subprocesses too.
os.environ["OWRL_STATE_DIR"] = tempfile.mkdtemp(prefix="owrl-state-")

from owrl_sdk.config import Settings
from owrl_sdk.plugins import Plugins, build_plugin_manager


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def plugins() -> Plugins:
    """A fresh plugin manager per test (defaults and installed entry points)."""
    return Plugins(build_plugin_manager(environ={}))


@pytest.fixture
def register_plugin(plugins: Plugins):
    """Register a throwaway plugin for one test; it is unregistered afterwards."""
    added = []

    def add(plugin, name: str | None = None):
        plugins.pm.register(plugin, name=name)
        plugins.refresh()
        added.append(plugin)
        return plugin

    yield add
    for plugin in added:
        plugins.pm.unregister(plugin)
    plugins.refresh()
