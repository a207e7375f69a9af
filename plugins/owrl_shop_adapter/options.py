"""The adapter's settings: ``[plugins.demo-shop-adapter]`` of the run's settings.

Read from the settings the adapter is handed every time they are needed (when an episode's
hooks are chosen, at episode start, when the browser launches, when a URL or a secret is
resolved): owrl loads them from ``owrl.toml`` and ``OWRL_DEMO_SHOP_ADAPTER_<KEY>`` variables
(``..._ENABLED=1``) as it loads every plugin's table, and an ``Agent(settings=...)`` or the
server hands its own. The adapter reads no file and no variable itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from owrl_sdk.api import ConfigError, secrets, validate_table

NAME = "demo-shop-adapter"
TABLE = f"[plugins.{NAME}]"
ENV_PREFIX = "OWRL_DEMO_SHOP_ADAPTER_"
CONSENT_CHOICES = ("reject", "accept")

_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False, "": False}


class ShopOptions(BaseModel):
    """``[plugins.demo-shop-adapter]``: the adapter's options (also ``OWRL_DEMO_SHOP_ADAPTER_<KEY>``).

    Booleans take true/false, 1/0, yes/no, on/off (empty: false); every other value is read
    as text, stripped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(False, description="off by default: the adapter changes what an episode on the shop "
                          "starts from")
    base_url: str = Field("", description="a shop served outside this process (owrl demo-site --port 8000): "
                          "http://127.0.0.1:8000")
    login: bool = Field(True, description="log in at episode start with user and password")
    user: str = Field("{{secret:SHOP_USER}}", description="the shop user")
    password: str = Field("{{secret:SHOP_PASSWORD}}", description="must be a {{secret:NAME}} placeholder: the "
                          "value never sits in a config file")
    consent: str = Field("reject", description="the answer the adapter gives the cookie banner: reject or accept")
    banner_at_start: bool = Field(True, description="answer the banner at episode start (else only when it "
                                  "covers a call's target)")
    accept_language: str = Field("en-US,en", description="the Accept-Language the browser sends "
                                 "(--accept-lang); empty: the browser's own")
    secrets_file: str = Field("", description="a file of NAME=value lines the resolve_secret hook answers from")

    @field_validator("enabled", "login", "banner_at_start", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        found = _BOOLS.get(str(value).strip().lower())
        if found is None:
            raise ValueError(f"'{value}' is not true or false")
        return found

    @field_validator("base_url", "user", "password", "consent", "accept_language", "secrets_file", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        return str(value).strip()

    @field_validator("consent")
    @classmethod
    def _consent(cls, value: str) -> str:
        if value not in CONSENT_CHOICES:
            raise ValueError(f"'{value}' is not reject or accept")
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if value and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError(f"'{value}' is not an http:// address")
        return value

    @field_validator("password")
    @classmethod
    def _password_placeholder(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("login", True) and not secrets.has_placeholder(value):
            raise ValueError("must be a {{secret:NAME}} placeholder; put the value in "
                             "OWRL_SECRET_NAME or a secret store, never in a config file")
        return value


def parse_options(table: Mapping[str, Any], where: str = "settings") -> ShopOptions:
    """Check and convert one table of options (strings from the environment included): a bad or
    unknown key is a :class:`ConfigError` naming it, the table and ``where``."""
    opts: ShopOptions = validate_table(ShopOptions, table, TABLE, where)
    return opts


def load_options(settings: Any) -> ShopOptions:
    """The options in ``settings`` (the run's: its ``[plugins.demo-shop-adapter]`` table)."""
    return parse_options(settings.plugin(NAME), "settings")


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
