"""Errors a user or a plugin can meet, each with the exit code the CLI gives it.

Messages are one line that says what is wrong and what to do about it.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Optional


class OwrlError(Exception):
    """Base of every error owrl raises on purpose."""

    exit_code = 2


class UsageError(OwrlError):
    """Bad input from the user: a wrong option, a missing file, a bad document."""

    exit_code = 2


class ConfigError(UsageError):
    """A setting that does not validate; the message names the key and where it came from."""


class PluginError(UsageError):
    """A plugin that could not be loaded or registered something invalid."""

    def __init__(self, message: str, plugin: Optional[str] = None):
        super().__init__(message)
        self.plugin = plugin


class ModelUnavailable(UsageError):
    """A model's weights cannot be had here (not on this machine, no way to download them).

    Model plugins raise a subclass; commands catch this one to say what works for them."""


class DocumentError(UsageError):
    """A trajectory, flow or task file that does not parse; the message names the field."""


class InfraError(OwrlError):
    """The machinery failed (browser, network of the host, out of memory), not the task."""

    exit_code = 3

    def __init__(self, message: str, code: str = "infra_error", kind: str | None = None):
        super().__init__(message)
        #: What broke, as a code (``browser_crash``, ``renderer_crash``, ``start_page_unreachable``, ...).
        self.code = code
        #: The failure kind (``category.code`` of :data:`owrl_sdk.failures.KINDS`) when the raiser
        #: knows it, e.g. why a start page could not be opened; classification reads it as given.
        self.kind = kind


class TaskFailed(OwrlError):
    exit_code = 1


def require_extra(what: str, extra: str, *modules: str) -> None:
    """Raise a :class:`UsageError` naming the extra to install when one of ``modules`` cannot
    be found (found without importing it, so the check costs no import time)."""
    missing = [m for m in modules if find_spec(m) is None]
    if missing:
        raise UsageError(f"{what} needs {', '.join(missing)}: pip install 'openwebrl-sdk[{extra}]'")
