from __future__ import annotations

import os
import tempfile

import pytest

# Persistent state (the host blocklist) goes to a throwaway folder, for subprocesses too.
os.environ["OWRL_STATE_DIR"] = tempfile.mkdtemp(prefix="owrl-state-")

from owrl_sdk.config import Settings
from owrl_sdk.plugins import Plugins


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def plugins(owrl_plugins) -> Plugins:
    """A fresh plugin manager per test: owrl's own fixture (owrl_sdk.testing), by a shorter name."""
    return owrl_plugins


@pytest.fixture
def register_plugin(owrl_register_plugin):
    """Register a throwaway plugin for one test; it is unregistered afterwards."""
    return owrl_register_plugin
