"""The ``owrl`` command line: thin, it parses options and calls the library.

Subcommands are registered by plugins through ``register_commands``, owrl's own ones
included. Errors a user can cause end in one line and exit code 2; ``--debug`` shows
the traceback. Exit codes: 0 success, 1 task failed, 2 usage or configuration error,
3 infrastructure error.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

import click

from owrl_sdk.version import __version__
from owrl_sdk.errors import OwrlError, UsageError

if TYPE_CHECKING:  # click's ParamType takes type parameters in its stubs only since 8.2
    _StrParamType = click.ParamType[str, Any]
else:
    _StrParamType = click.ParamType


class PathArg(_StrParamType):
    """A file or folder argument of owrl's own whose problems are one ``Error:`` line.

    click's ``Path`` reports a missing file or a folder given for a file as a usage error,
    with the command's usage block above it; these are not mistakes in how the command was
    typed, so they get the one line every other bad input gets (exit 2). ``kind`` is "file",
    "folder" or "any"; ``what`` names what the path should be ("a flow file")."""

    name = "path"

    def __init__(self, kind: str = "any", what: str = "", exists: bool = False):
        self.kind = kind
        self.name = {"file": "file", "folder": "directory"}.get(kind, "path")  # the metavar, as click.Path's
        self.what = what or {"file": "a file", "folder": "a folder"}.get(kind, "a file or folder")
        self.exists = exists

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> str:
        import os

        text = os.fspath(value) if not isinstance(value, str) else value
        if os.path.isdir(text):
            if self.kind == "file":
                raise UsageError(f"{text}: is a folder, not {self.what}")
        elif os.path.exists(text):
            if self.kind == "folder":
                raise UsageError(f"{text}: is a file, not {self.what}")
        elif self.exists:
            noun = {"file": "file", "folder": "folder"}.get(self.kind, "file or folder")
            raise UsageError(f"{text}: no such {noun}")
        return text


#: Where a command finds the plugins that registered it (``ctx.meta``, shared by nested contexts).
PLUGINS_KEY = "owrl.plugins"


def command_plugins() -> Any:
    """The plugins of the running ``owrl`` command, handed to a plugin's command by the group
    that found it (a command invoked on its own gets the process's plugins)."""
    from owrl_sdk.contract.plugins import Plugins

    ctx = click.get_current_context(silent=True)
    found = ctx.meta.get(PLUGINS_KEY) if ctx is not None else None
    return found if found is not None else Plugins()


class OwrlGroup(click.Group):
    """Finds its subcommands in the plugins, loaded on first use."""

    _commands: Optional[dict[str, click.Command]] = None
    _plugins: Any = None

    def _plugin_commands(self) -> dict[str, click.Command]:
        if self._commands is None:
            from owrl_sdk.contract.plugins import Plugins

            plugins = self._plugins = Plugins()
            self._commands = plugins.commands()
            for failure in plugins.failures:
                click.echo(
                    f"warning: plugin '{failure.name}' ({failure.source}) failed to load: {failure.error}",
                    err=True,
                )
        return self._commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._plugin_commands()))

    def get_command(self, ctx: click.Context, name: str) -> Optional[click.Command]:
        found = super().get_command(ctx, name)
        if found is not None:
            return found
        found = self._plugin_commands().get(name)
        if found is not None:
            ctx.meta[PLUGINS_KEY] = self._plugins  # handed to the plugin's command (command_plugins)
        return found


@click.group(cls=OwrlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="owrl")
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.option("-v", "--verbose", count=True, help="Show the library's log on stderr: -v its progress, -vv everything.")
@click.option("-q", "--quiet", is_flag=True, help="Show only errors from the library's log (no warnings).")
@click.option("--config", "config_file", metavar="FILE", envvar="OWRL_CONFIG",
              help="Read settings from FILE instead of ./owrl.toml (also OWRL_CONFIG); the user's "
              "owrl.toml in the user's config folder (~/.config/owrl on Linux) is still read beneath it.")
def cli(debug: bool, verbose: int, quiet: bool, config_file: Optional[str]) -> None:
    """owrl: run, evaluate and train visual web agents on a real Chromium."""
    setup_logging(verbose, quiet)
    if config_file:  # through the environment: workers and child processes read the same file
        import os

        os.environ["OWRL_CONFIG"] = os.path.abspath(os.path.expanduser(config_file))


def setup_logging(verbose: int, quiet: bool) -> None:
    """The ``owrl.*`` loggers on stderr: warnings by default, INFO with -v, DEBUG with -vv,
    errors only with -q. The library itself only logs (see ``owrl_sdk/__init__``)."""
    import logging

    from owrl_sdk.support.logs import StderrHandler

    level = logging.ERROR if quiet else {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    log = logging.getLogger("owrl")
    log.setLevel(level)
    if not any(isinstance(h, StderrHandler) for h in log.handlers):
        log.addHandler(StderrHandler("%(levelname)s %(name)s: %(message)s"))


def _one_line_warning(message: Any, category: type, filename: str, lineno: int, file: Any = None,
                      line: Optional[str] = None) -> None:
    """Python warnings as one ``warning: ...`` line (the source line means nothing to a user)."""
    from owrl_sdk.support.console import terminal_safe

    click.echo(f"warning: {terminal_safe(str(message))}", err=True)


def storage_options(command: Any) -> Any:
    """``--load-storage FILE`` / ``--save-storage FILE`` (a saved log-in), for the commands that
    open a browser: they become the ``storage_state`` and ``save_storage`` settings."""
    command = click.option("--save-storage", "save_storage", type=PathArg("file", "a storage-state file"),
                           help="Save the browser's session (cookies, local storage) to FILE when done, mode 0600 "
                           "(a log-in to start from later with --load-storage; never inside the runs folder).")(command)
    return click.option("--load-storage", "load_storage", type=PathArg("file", "a storage-state file", exists=True),
                        help="Start from a saved session (cookies, local storage): FILE as written by "
                        "--save-storage (or Playwright's storage_state()); its values are treated as secrets.")(command)


def check_storage(settings: Any) -> None:
    """The settings' storage files checked before any browser starts (UsageError): the one to
    load is readable by its owner only and a storage state; the one to save is not in runs_dir."""
    from owrl_sdk.browser.storage import check_target, load_state

    if settings.storage_state:
        load_state(settings.storage_state)
    if settings.save_storage:
        check_target(settings.save_storage, settings.runs_dir)


def remote_browser(browser_endpoint: Optional[str], cdp_endpoint: Optional[str]) -> dict[str, Optional[str]]:
    """Settings overrides for --browser-endpoint / --cdp-endpoint: one given on the command line replaces
    both settings, so that an endpoint from the environment or owrl.toml does not join it."""
    if not (browser_endpoint or cdp_endpoint):
        return {}
    return {"browser_endpoint": browser_endpoint or "", "cdp_endpoint": cdp_endpoint or ""}


def main(argv: Optional[list[str]] = None) -> Any:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    from owrl_sdk.support.interrupts import exit_code, install

    install()
    if not debug:
        import warnings

        warnings.showwarning = _one_line_warning
    try:
        return cli.main(args=args, prog_name="owrl", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(exit_code())
    except click.ClickException as err:
        err.show()
        sys.exit(2 if err.exit_code == 2 else err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except OwrlError as err:
        if debug:
            raise
        from owrl_sdk.support.console import terminal_safe

        click.echo(f"Error: {terminal_safe(str(err))}", err=True)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        click.echo("Terminated." if exit_code() == 143 else "Interrupted.", err=True)
        sys.exit(exit_code())
