"""``owrl serve``: an HTTP API that runs tasks and flows as jobs (owrl as an RPA executor)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl

TOKEN_ENV = "OWRL_SERVE_TOKEN"
INSTALL_HINT = "pip install 'openwebrl-sdk[serve]'"


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="Port to bind.")
@click.option("--data-dir", default="owrl-serve", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the job store (jobs.sqlite3) and the jobs' run folders (runs/).")
@click.option("--max-concurrent", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Jobs that run at the same time; the others wait in the queue.")
@click.option("--no-auth", is_flag=True, help="Serve without a token (only with --host 127.0.0.1).")
@click.option("--max-connections-per-client", "per_client", default=64, show_default=True,
              type=click.IntRange(1, 100_000),
              help="Connections one client address may hold open at once; one more is closed unread. "
                   "Raise it behind a reverse proxy, whose connections all come from one address.")
@click.option("--head-seconds", default=10.0, show_default=True, type=click.FloatRange(0.5, 3600),
              help="Seconds a request's head (request line and headers) may take to arrive whole; "
                   "a slower one's connection is closed. Bodies are not timed by this.")
def serve_command(host: str, port: int, data_dir: str, max_concurrent: int, no_auth: bool, per_client: int = 64,
                  head_seconds: float = 10.0) -> None:
    """Serve an HTTP API that runs tasks and flows as jobs.

    Clients send 'Authorization: Bearer TOKEN' with the token from the OWRL_SERVE_TOKEN
    environment variable; /health and /openapi.json need none. Jobs and their run folders
    live in --data-dir and survive a restart. The API is described in docs/serve.md.
    """
    from owrl_sdk.errors import UsageError

    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if no_auth:
        if host != "127.0.0.1":
            raise UsageError(f"--no-auth serves anyone who can reach {host}: use it only with --host 127.0.0.1, "
                             f"or set {TOKEN_ENV} instead")
        token = None
    elif token is None:
        raise UsageError(f"set {TOKEN_ENV} to the bearer token clients must send "
                         "(or, on 127.0.0.1 only, pass --no-auth)")
    try:
        import fastapi  # noqa: F401
        import python_multipart  # noqa: F401 - FastAPI reads the CSV upload's form with it
        import uvicorn
    except ImportError as err:
        raise UsageError(f"owrl serve needs FastAPI, uvicorn and python-multipart ({err.name} is missing): "
                         f"{INSTALL_HINT}") from None

    from owrl_sdk.contract.plugins import load_checked_settings
    from owrl_sdk.server.app import create_app
    from owrl_sdk.server.jobs import lock_data_dir

    settings = load_checked_settings()  # a bad [plugins.NAME] option stops the server now, not each job
    folder = Path(data_dir)
    lock = lock_data_dir(folder)
    app = create_app(folder, token, max_concurrent=max_concurrent, settings=settings)
    auth = "bearer token" if token else "none (--no-auth)"
    click.echo(f"owrl serve: http://{host}:{port}  data: {folder.resolve()}  auth: {auth}  "
               f"jobs at a time: {max_concurrent}", err=True)
    loose = sorted(k[len("OWRL_SECRET_"):] for k in os.environ if k.startswith("OWRL_SECRET_")
                   and k[len("OWRL_SECRET_"):] not in settings.secrets_allowed_on)
    if loose and not settings.allowed_domains:
        click.echo(f"owrl serve: warning: secrets {', '.join(loose)} may be typed on any page a job opens "
                   "(no allowed_domains): bind each to its hosts with secrets_allowed_on (docs/serve.md)", err=True)
    from owrl_sdk.server.connections import limited_protocol

    config: Any = uvicorn.Config(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=3,
                                 http=limited_protocol(per_client, head_seconds))
    import signal

    # the server shuts down gracefully on SIGTERM itself (uvicorn's handler, then the signal's own
    # default), not through the CLI's SIGTERM-as-Ctrl-C of batch commands (owrl_sdk.support.interrupts)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        uvicorn.Server(config).run()
    finally:
        lock.release()


@hookimpl
def register_commands(register: Register) -> None:
    register(serve_command)
