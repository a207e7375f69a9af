"""The adapter's settings: ``[plugins.demo-shop-adapter]`` in owrl.toml, then the environment.

Read every time they are needed (when an episode's hooks are chosen, at episode start, when
the browser launches, when a URL or a secret is resolved), from the same places as owrl's
own settings: ``owrl.toml`` in the user's config folder, then ``owrl.toml`` in the working
directory, then environment variables ``OWRL_DEMO_SHOP_ADAPTER_<KEY>`` (``..._ENABLED=1``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping, Optional
from urllib.parse import urlsplit

from owrl_sdk import secrets
from owrl_sdk.errors import ConfigError

NAME = "demo-shop-adapter"
TABLE = f"[plugins.{NAME}]"
ENV_PREFIX = "OWRL_DEMO_SHOP_ADAPTER_"
CONSENT_CHOICES = ("reject", "accept")


@dataclass(frozen=True)
class ShopOptions:
    #: Off by default: the adapter changes what an episode on the shop starts from.
    enabled: bool = False
    #: A shop served outside this process (``owrl demo-site --port 8000``): http://127.0.0.1:8000
    base_url: str = ""
    #: Log in at episode start with ``user`` and ``password``.
    login: bool = True
    user: str = "{{secret:SHOP_USER}}"
    #: Must be a ``{{secret:NAME}}`` placeholder: the value never sits in a config file.
    password: str = "{{secret:SHOP_PASSWORD}}"
    #: The answer the adapter gives the cookie banner.
    consent: str = "reject"
    #: Answer the banner at episode start (else only when it covers a call's target).
    banner_at_start: bool = True
    #: The Accept-Language the browser sends (``--accept-lang``); empty: the browser's own.
    accept_language: str = "en-US,en"
    #: A file of ``NAME=value`` lines the ``resolve_secret`` hook answers from.
    secrets_file: str = ""


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False, "": False}


def _bool(key: str, value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    found = _BOOLS.get(str(value).strip().lower())
    if found is None:
        raise ConfigError(f"setting '{key}' of {TABLE} (from {where}): '{value}' is not true or false")
    return found


def parse_options(table: Mapping[str, Any], where: str = "settings") -> ShopOptions:
    """Check and convert one table of options (strings from the environment included)."""
    known = {f.name: f for f in fields(ShopOptions)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"unknown setting '{key}' in {TABLE} (from {where}); known: {', '.join(known)}")
        values[key] = _bool(key, value, where) if known[key].type in ("bool", bool) else str(value).strip()
    opts = ShopOptions(**values)
    if opts.consent not in CONSENT_CHOICES:
        raise ConfigError(f"setting 'consent' of {TABLE} (from {where}): '{opts.consent}' is not reject or accept")
    if opts.login and not secrets.has_placeholder(opts.password):
        raise ConfigError(f"setting 'password' of {TABLE} (from {where}) must be a {{{{secret:NAME}}}} placeholder; "
                          "put the value in OWRL_SECRET_NAME or a secret store, never in a config file")
    if opts.base_url and urlsplit(opts.base_url).scheme not in ("http", "https"):
        raise ConfigError(f"setting 'base_url' of {TABLE} (from {where}): '{opts.base_url}' is not an http:// address")
    return opts


def load_options(environ: Optional[Mapping[str, str]] = None, cwd: Optional[Path] = None) -> ShopOptions:
    """The options in force now: config files, then ``OWRL_DEMO_SHOP_ADAPTER_*``."""
    from owrl_sdk.config import load_settings

    # owrl's own OWRL_* variables are checked by owrl itself; only the files are read here
    table: dict[str, Any] = load_settings(environ={}, cwd=cwd).plugin(NAME)
    environ = os.environ if environ is None else environ
    from_env = {f.name: environ[ENV_PREFIX + f.name.upper()] for f in fields(ShopOptions)
                if ENV_PREFIX + f.name.upper() in environ}
    parse_options(table, "owrl.toml")  # a bad file value is named with its source
    return parse_options({**table, **from_env}, "owrl.toml and the environment")


def origin(url: str) -> str:
    """``scheme://host:port`` of an http(s) URL, the port always written; '' for anything else."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.hostname.lower()}:{port}"


def read_secrets_file(path: str) -> dict[str, str]:
    """``NAME=value`` lines (``#`` comments and blank lines skipped) of a secrets file."""
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"setting 'secrets_file' of {TABLE}: cannot read {file} ({err.strerror})") from None
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        found[name.strip()] = value.strip()
    return found
