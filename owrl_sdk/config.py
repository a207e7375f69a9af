"""One settings object and where its values come from.

Precedence, highest first: options given on the command line (or to the API), ``OWRL_*``
environment variables, ``owrl.toml`` in the working directory (or the file ``OWRL_CONFIG`` /
``owrl --config FILE`` names instead), then ``owrl.toml`` in the user's config folder
(:func:`owrl_sdk.support.dirs.config_dir`: ``$XDG_CONFIG_HOME/owrl`` or ``~/.config/owrl`` on Linux). A bad value raises
:class:`ConfigError` naming the key and where it came from.

Plugins keep their settings in a table of their own, ``[plugins.NAME]``, named by the
component's registered name. A component that declares ``Options`` (a pydantic model) has its
table validated where settings load (:func:`load_settings` with ``option_models``) and reads it
converted with :meth:`Settings.options`. A model's ``renamed_from`` lists the table's former
names: such a table is still read, with a one-line :class:`FutureWarning` naming the new one.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Literal, Mapping, Optional
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, ValidationInfo, field_validator

from owrl_sdk.support.dirs import config_dir
from owrl_sdk.safety.domains import normalize_domain
from owrl_sdk.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_PREFIX = "OWRL_"
CONFIG_NAME = "owrl.toml"

#: ``OWRL_*`` variables owrl reads that are not settings, and the families it reads by prefix
#: (secrets, the OpenAI-compatible server). A plugin may read variables of its own besides.
OTHER_VARIABLES = frozenset({
    "OWRL_LOAD_PLUGINS", "OWRL_DISABLE_PLUGINS", "OWRL_TRACE_PLUGINS", "OWRL_CACHE_DIR",
    "OWRL_STATE_DIR", "OWRL_SERVE_TOKEN", "OWRL_SERVE_ALLOW_LOCAL_FILES", "OWRL_OFFLINE",
    "OWRL_OPENWEBRL_SOURCE", "OWRL_CONFIG", "OWRL_SERVE_WEBHOOK_KEY",
})
OTHER_PREFIXES = ("OWRL_SECRET_", "OWRL_OPENAI_")


class OpenAIEndpoint(BaseModel):
    """An OpenAI-compatible server as the environment names it (``OWRL_OPENAI_BASE_URL``,
    ``OWRL_OPENAI_API_KEY`` or else ``OPENAI_API_KEY``, ``OWRL_OPENAI_MODEL``); None where unset."""

    base_url: Optional[str] = None
    api_key: Optional[str] = None
    model: Optional[str] = None


def openai_endpoint(environ: Optional[Mapping[str, str]] = None) -> OpenAIEndpoint:
    """The one place the ``OWRL_OPENAI_*`` variables (and the ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``
    the openai package reads) are read; owrl's own come first, empty values count as unset."""
    environ = os.environ if environ is None else environ
    return OpenAIEndpoint(
        base_url=environ.get("OWRL_OPENAI_BASE_URL") or environ.get("OPENAI_BASE_URL") or None,
        api_key=environ.get("OWRL_OPENAI_API_KEY") or environ.get("OPENAI_API_KEY") or None,
        model=environ.get("OWRL_OPENAI_MODEL") or None,
    )


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    policy: str = Field("openwebrl", description="policy plugin that drives the episode")
    model: Optional[str] = Field(None, description="model id or local path for model policies")
    profile: Optional[str] = Field(
        None, description="interface profile of model policies and judges: openwebrl (the released OpenWebRL "
        "models' contract) or owrl; default: by checkpoint")
    memory: str = Field("default", description="memory strategy")
    max_steps: int = Field(30, ge=1, description="steps before an episode ends as failed")
    step_timeout: float = Field(300.0, gt=0, description="seconds one step (policy and calls) may take")
    episode_timeout: float = Field(1800.0, gt=0, description="seconds one episode may take")
    max_parse_errors: int = Field(3, ge=1, description="consecutive unreadable turns before abort")
    max_unchanged_repeats: int = Field(3, ge=0, description="same call with no visible change before fail (0: off)")
    expect_timeout: float = Field(2.0, ge=0, description="seconds an expectation is polled for")
    feedback_chars: int = Field(512, ge=32, description="longest feedback per call")
    change_feedback: Literal["auto", "always"] = Field(
        "auto", description="auto: each call's after-snapshot and change description only when the policy, the "
        "memory or a plugin reads them (the live view does); always: in every episode, for the trajectory")
    settle_quiet_ms: int = Field(
        100, ge=0, description="after each browser action, how long the page must stay quiet (no DOM change, no "
        "request, no timer it set) before the change is read")
    settle_max_ms: int = Field(1500, ge=0, description="longest wait for the page to go quiet after an action (0: no wait)")
    observation_chars: int = Field(
        12000, ge=0, description="longest page snapshot an observation holds, in characters; over it the viewport, what "
        "is near it and interactive elements are kept and the rest named (0: unbounded; under 1000 counts as 1000)")
    headless: bool = True
    chromium: Optional[str] = Field(None, description="path of the Chromium executable; unset: Playwright's managed "
                                    "browser, else the system's (headless: its headless shell, chromium-headless-shell, "
                                    "where installed)")
    browser_endpoint: Optional[str] = Field(
        None, description="ws:// address of a Playwright browser server (playwright run-server) to connect to "
        "instead of launching Chromium")
    cdp_endpoint: Optional[str] = Field(
        None, description="http:// (or ws://) DevTools address of a running Chromium to connect to over CDP")
    remote_chromium: Optional[str] = Field(
        None, description="Chromium path on the browser server, sent with browser_endpoint (the server needs "
        "--unsafe); empty: the server's own browser")
    viewport_width: int = Field(1280, ge=100)
    viewport_height: int = Field(1000, ge=100)
    screenshot_quality: int = Field(85, ge=1, le=100)
    max_rows: int = Field(10_000, ge=1, description="rows a batch (owrl run --inputs, owrl serve) may have; a file "
                          "with more is refused at the first row past it")
    storage_state: Optional[str] = Field(
        None, description="a Playwright storage-state file (cookies, local storage) every episode's context starts "
        "from: a saved log-in (owrl run --load-storage); readable by its owner only, its values treated as secrets")
    save_storage: Optional[str] = Field(
        None, description="write each episode's storage state (cookies, local storage) to this file when the episode "
        "ends, mode 0600 (owrl run --save-storage); never inside runs_dir")
    max_downloads: int = Field(20, ge=0, description="downloads an episode may save into its run folder; one more is "
                               "cancelled and ends the episode with page.download_limit (0: none saved)")
    max_download_mb: float = Field(100.0, ge=0, description="megabytes of downloads an episode may keep in its run "
                                   "folder; a download that passes it is deleted and ends the episode with "
                                   "page.download_limit")
    navigation_timeout: float = Field(30.0, gt=0)
    action_timeout: float = Field(5.0, gt=0)
    allowed_domains: list[str] = Field(default_factory=list, description=(
        "hosts an episode may visit (empty: any): names (subdomains included), addresses in any spelling, "
        "networks such as 10.0.0.0/8"))
    blocked_domains: list[str] = Field(default_factory=list, description=(
        "hosts an episode may never visit; an entry for this machine (127.0.0.1, localhost, ::1, 0.0.0.0) "
        "blocks every address and local name of it"))

    @field_validator("allowed_domains", "blocked_domains")
    @classmethod
    def _domains(cls, value: list[str]) -> list[str]:
        for entry in value:
            normalize_domain(entry)  # a port, path or scheme is refused here, by name
        return value
    secrets_allowed_on: dict[str, list[str]] = Field(
        default_factory=dict, description="per secret NAME, the hosts whose pages it may be typed into (a host "
        "also covers its subdomains); variable: NAME=a.test,b.test;OTHER=c.test. A secret not named here may be "
        "typed on any page")
    runs_dir: str = "runs"
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("secrets_allowed_on")
    @classmethod
    def _secret_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"'{name}' is not a secret's NAME (as in {{{{secret:NAME}}}}); write "
                                 "NAME=host,host;OTHER=host")

        for hosts in value.values():
            for host in hosts:
                normalize_domain(host)  # a port or scheme would bind the secret to nothing, silently
        return value

    @field_validator("browser_endpoint", "cdp_endpoint", "remote_chromium")
    @classmethod
    def _remote_address(cls, value: Optional[str], info: ValidationInfo) -> Optional[str]:
        value = (value or "").strip() or None  # an empty OWRL_BROWSER_ENDPOINT means 'not set'
        schemes = {"browser_endpoint": ("ws", "wss"), "cdp_endpoint": ("http", "https", "ws", "wss")}.get(info.field_name or "")
        if value is not None and schemes and urlsplit(value).scheme not in schemes:
            raise ValueError(f"'{value}' is not a {' or '.join(s + '://' for s in schemes)} address")
        return value

    def plugin(self, name: str) -> dict[str, Any]:
        """The ``[plugins.NAME]`` table (empty when absent)."""
        return dict(self.plugins.get(name, {}))

    def options(self, name: str, schema: type, **given: Any) -> Any:
        """The ``[plugins.NAME]`` table, with ``given`` options (not None) on top, validated
        as ``schema`` (a pydantic model or a dataclass): values converted, a bad or unknown
        key a :class:`ConfigError` naming it. Where there is no such table but one under a
        name in ``schema.renamed_from``, that one is read (and a deprecation warning given);
        where both are, the new table wins key by key."""
        table: dict[str, Any] = {}
        where = f"[plugins.{name}]"
        for old in reversed(renamed_from(schema)):
            if old in self.plugins:
                warn_renamed(old, name)
                table.update(self.plugin(old))
                if name not in self.plugins:
                    where = f"[plugins.{old}]"
        table.update(self.plugin(name))
        table.update({k: v for k, v in given.items() if v is not None})
        return validate_table(schema, table, where, "settings")

    def with_overrides(self, **values: Any) -> "Settings":
        """A copy with the given values (None means 'not given' and is skipped)."""
        given = {k: v for k, v in values.items() if v is not None}
        return _build([(self.model_dump(), "settings"), (given, "options")])


def renamed_from(schema: Any) -> tuple[str, ...]:
    """The former names of an options model's table (its ``renamed_from``; none when unset)."""
    names = getattr(schema, "renamed_from", ())
    return (names,) if isinstance(names, str) else tuple(names or ())


def warn_renamed(old: str, new: str) -> None:
    """The one-line deprecation warning for a table read under its former name."""
    warnings.warn(f"[plugins.{old}] in owrl.toml is deprecated: rename it [plugins.{new}] "
                  f"(the old name is still read for now)", FutureWarning, stacklevel=3)


def validate_table(schema: type, table: Mapping[str, Any], name: str, where: str) -> Any:
    """``table`` (a ``[plugins.NAME]`` table, a training config) as ``schema``, a pydantic
    model or a dataclass. An unknown key or a bad value raises :class:`ConfigError` naming the
    key, the table and where it came from; strings (from the environment) are converted."""
    known = _schema_fields(schema)
    for key in table:
        if known is not None and key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"unknown setting '{key}' in {name} (from {where}){hint}")
    try:
        return TypeAdapter(schema).validate_python(dict(table))
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "?"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"setting '{key}' of {name} (from {where}): {message}") from None


def _schema_fields(schema: type) -> Optional[set[str]]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return set(schema.model_fields) if schema.model_config.get("extra") != "allow" else None
    fields = getattr(schema, "__dataclass_fields__", None)
    return set(fields) if fields is not None else None


def _config_files(cwd: Path, environ: Optional[Mapping[str, str]] = None) -> list[Path]:
    """The config files read, lowest first: the user's, then ``OWRL_CONFIG`` (``owrl --config
    FILE``) in place of the working directory's ``owrl.toml``. A named file that is not there is
    a ConfigError: a typo must not run with other settings."""
    named = (os.environ if environ is None else environ).get("OWRL_CONFIG") or ""
    if named:
        chosen = Path(named).expanduser()
        if not chosen.is_absolute():
            chosen = cwd / chosen
        if not chosen.is_file():
            raise ConfigError(f"OWRL_CONFIG (or --config) names {named}, which is not a file")
    files = [config_dir() / CONFIG_NAME, chosen if named else cwd / CONFIG_NAME]
    return [f for f in files if f.is_file()]


def env_name(table: str, key: str) -> str:
    """The variable that gives ``[plugins.TABLE] KEY``: ``OWRL_<TABLE>_<KEY>``, upper case, every
    character other than a letter or a digit an underscore (``demo-shop-adapter`` ``enabled``:
    ``OWRL_DEMO_SHOP_ADAPTER_ENABLED``)."""
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", f"{table}_{key}").upper()


def plugin_env(environ: Mapping[str, str], option_models: Mapping[str, type]) -> dict[str, dict[str, str]]:
    """The ``[plugins.NAME]`` options given as variables (:func:`env_name`), for every table
    with an options model: a plugin reads its options from the settings it is handed, never
    from the environment itself."""
    found: dict[str, dict[str, str]] = {}
    for table, schema in option_models.items():
        for key in getattr(schema, "model_fields", {}) or {}:
            variable = env_name(table, key)
            if variable in environ:
                found.setdefault(table, {})[key] = environ[variable]
    return found


def _from_env(environ: Mapping[str, str], names: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The settings given as ``OWRL_*`` variables; ``names``, when given, gets each setting's variable
    (max_steps -> OWRL_MAX_STEPS), so that an error can name the variable to fix."""
    known = set(Settings.model_fields) - {"plugins"}
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX):].lower()
        if name in known:
            field = Settings.model_fields[name]
            origin = getattr(field.annotation, "__origin__", None)
            if origin is list:
                out[name] = [v.strip() for v in value.split(",") if v.strip()]
            elif origin is dict:  # NAME=a,b;OTHER=c
                out[name] = {k.strip(): [v.strip() for v in vs.split(",") if v.strip()]
                             for k, _, vs in (part.partition("=") for part in value.split(";") if part.strip())}
            else:
                out[name] = value
            if names is not None:
                names[name] = key
        elif key.startswith("OWRL_SECRET_") and difflib.get_close_matches(
                key[len("OWRL_SECRET_"):].lower(), ["allowed_on"], cutoff=0.85):
            # OWRL_SECRET_ALLOWED_ON would be a secret named ALLOWED_ON, and no secret bound
            raise ConfigError(f"environment variable {key} is not a setting; did you mean OWRL_SECRETS_ALLOWED_ON? "
                              "(rename it, or unset it)")
        elif key not in OTHER_VARIABLES and not key.startswith(OTHER_PREFIXES):
            _refuse_near_miss(key, known)
    return out


def _refuse_near_miss(key: str, known: set[str]) -> None:
    """A variable one typo away from a setting's (``OWRL_ALLOWED_DOMAIN``) is a :class:`ConfigError`:
    read as nothing, it would leave the setting at its default (no allowlist at all) without a word.
    Variables far from every setting are left to the plugins that may read them."""
    name = key[len(ENV_PREFIX):].lower()
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
    if close:
        meant = ENV_PREFIX + close[0].upper()
        raise ConfigError(f"environment variable {key} is not a setting; did you mean {meant}? "
                          f"(rename it, or unset it)")


def _suggestion(key: str) -> str:
    """A hint naming the closest known setting to a misspelt ``key`` (empty when none is close)."""
    close = difflib.get_close_matches(key, list(Settings.model_fields), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _build(layers: list[tuple[dict[str, Any], str]], env_names: Optional[Mapping[str, str]] = None) -> Settings:
    """Settings from layers of values, later ones winning; each layer's source names it in errors.
    ``env_names`` maps the keys of the "environment" layer to their variables (OWRL_MAX_STEPS)."""
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for values, source in layers:
        for key, value in values.items():
            if key == "plugins" and isinstance(value, dict):
                plugins = merged.setdefault("plugins", {})
                for name, table in value.items():
                    plugins.setdefault(name, {}).update(table if isinstance(table, dict) else {"": table})
            elif key == "secrets_allowed_on" and isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}  # a project's file binds its secrets, the user's stay
            else:
                merged[key] = value
            origin[key] = (env_names or {}).get(key, source) if source == "environment" else source
    try:
        return Settings.model_validate(merged)
    except ValidationError as err:
        first = err.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else "?"
        where = origin.get(key, "settings")
        if first["type"] == "extra_forbidden":
            raise ConfigError(f"unknown setting '{key}' (from {where}){_suggestion(key)}") from None
        raise ConfigError(f"setting '{key}' (from {where}): {first['msg']}") from None


def read_toml(path: Path) -> dict[str, Any]:
    """One TOML file's table, read as owrl reads ``owrl.toml``: a missing, unreadable,
    non-UTF-8 or invalid file raises :class:`ConfigError` naming it (and the line)."""
    if not Path(path).is_file():
        raise ConfigError(f"{path}: no such file")
    return _read_toml(Path(path))


def _read_toml(path: Path) -> dict[str, Any]:
    """One config file's table; a file that cannot be read or parsed raises :class:`ConfigError`."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({err.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}); "
                          "save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML ({err})") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read (arrays or tables inside each other "
                          "thousands of levels down)") from None


def load_settings(
    overrides: Optional[Mapping[str, Any]] = None,
    environ: Optional[Mapping[str, str]] = None,
    cwd: Optional[Path] = None,
    option_models: Optional[Mapping[str, type]] = None,
) -> Settings:
    """Settings from config files, the environment and explicit overrides, in that order.

    ``option_models`` maps a registered component name to the model of its options
    (``Catalogue.option_models()``): each ``[plugins.NAME]`` table with one is validated here,
    so a bad option is a :class:`ConfigError` naming its file before anything runs."""
    environ = os.environ if environ is None else environ
    layers: list[tuple[dict[str, Any], str]] = []
    for path in _config_files(cwd or Path.cwd(), environ):
        data = _read_toml(path)
        layers.append((data, str(path)))
    env_names: dict[str, str] = {}
    from_env = _from_env(environ, env_names)
    tables = plugin_env(environ, option_models or {})
    if tables:
        from_env["plugins"] = tables
    layers.append((from_env, "environment"))
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    layers.append((given, "command line"))
    settings = _build(layers, env_names)
    for name, schema in (option_models or {}).items():
        names, label = [name], f"[plugins.{name}]"
        for old in renamed_from(schema):
            if old in settings.plugins and old not in (option_models or {}):
                warn_renamed(old, name)  # read under the new name from here on; the new table wins a clash
                if name not in settings.plugins:
                    label = f"[plugins.{old}] (now [plugins.{name}])"
                settings.plugins[name] = {**settings.plugins[old], **settings.plugins.get(name, {})}
                names.append(old)
        if name in settings.plugins:
            sources = [src for values, src in layers if set(names) & set(values.get("plugins") or {})]
            validate_table(schema, settings.plugins[name], label, ", ".join(sources) or "settings")
    return settings


def _type_name(annotation: Any) -> str:
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    origin = getattr(annotation, "__origin__", None)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in annotation.__args__)
    if args and origin is not None and len(args) < len(annotation.__args__):  # Optional[X]
        return " \\| ".join(_type_name(a) for a in args) + " (optional)"
    if origin is not None:
        return str(annotation).replace("typing.", "")
    return str(getattr(annotation, "__name__", annotation))


def _default_text(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if value is None:
        return "unset"
    return f"`{json.dumps(value)}`" if not isinstance(value, str) or value else '`""`'


class FailuresOptions(BaseModel):
    """``[plugins.failures]``: the failure checks' options (validated where the commands load settings)."""

    model_config = ConfigDict(extra="forbid")

    check_start_page: bool = Field(default=True, description="check the start page at episode start (error status, "
                                   "blank, captcha, log-in wall) and end the episode with a page.* failure")


def options_reference(models: Mapping[str, type]) -> str:
    """The Markdown table of the options of ``models`` (table name -> options model; every
    component's: :meth:`owrl_sdk.contract.plugins.Plugins.option_models`): table, key, type, default,
    what it does. The reference in ``docs/configuration.md``, which a test keeps current."""
    rows = ["| table | key | type | default | what it does |", "|---|---|---|---|---|"]
    for name in sorted(models):
        schema = models[name]
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            rows.append(f"| `[plugins.{name}]` | | | | {(schema.__doc__ or '').strip().splitlines()[0]} |")
            continue
        former = ", ".join(f"`[plugins.{old}]`" for old in renamed_from(schema))
        table = f"`[plugins.{name}]`" + (f" (formerly {former})" if former else "")
        for key, field in schema.model_fields.items():
            what = (field.description or "").replace("|", "\\|")
            rows.append(f"| {table} | `{key}` | {_type_name(field.annotation)} | {_default_text(field)} | {what} |")
            table = ""
    return "\n".join(rows) + "\n"


def settings_reference() -> str:
    """The Markdown table of owrl's own top-level settings (key, variable, type, default)."""
    rows = ["| key | variable | type | default | what it does |", "|---|---|---|---|---|"]
    for key, field in Settings.model_fields.items():
        if key == "plugins":
            continue
        what = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{key}` | `{ENV_PREFIX}{key.upper()}` | {_type_name(field.annotation)} | "
                    f"{_default_text(field)} | {what} |")
    return "\n".join(rows) + "\n"
