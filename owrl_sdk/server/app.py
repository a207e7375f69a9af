"""The FastAPI application of ``owrl serve``.

Every route under ``/v1`` needs ``Authorization: Bearer TOKEN`` (checked in constant time
by :class:`BearerAuth`, before the request is read); ``/health`` and ``/openapi.json`` are
public: they hold no job data. Bad input is a 4xx with a ``detail`` that says what is
wrong: 422 for a body, query or path value that does not validate (FastAPI's shape,
``[{"loc": [...], "msg": "..."}]``), 404 for an unknown job or file, 409 for cancelling a
job that already ended.
"""

from __future__ import annotations

import hmac
import json
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from owrl_sdk.version import __version__
from owrl_sdk.config import Settings, load_settings
from owrl_sdk.contract.plugins import Plugins
from owrl_sdk.server.jobs import JobStore
from owrl_sdk.server.models import ERRORS, MAX_BODY_BYTES, MAX_CSV_BYTES, MAX_ROWS, RequestValidationErrorOf
from owrl_sdk.server.routes import jobs, public
from owrl_sdk.server.runner import InputsError, JobRunner, SpecError

__all__ = ["ALLOW_LOCAL_FILES_ENV", "MAX_BODY_BYTES", "MAX_CSV_BYTES", "MAX_ROWS", "create_app"]

PUBLIC_PATHS = frozenset({"/health", "/openapi.json"})

#: Set to 1 (true, yes) to let jobs open local files and the browser's own pages (off by default).
ALLOW_LOCAL_FILES_ENV = "OWRL_SERVE_ALLOW_LOCAL_FILES"

# ---------------------------------------------------------------------------- auth


class BearerAuth:
    """ASGI middleware: every path but the public ones needs the bearer token."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token.encode("utf-8")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS or self._authorised(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": "missing or wrong bearer token: send 'Authorization: Bearer TOKEN'"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})

    def _authorised(self, scope: dict[str, Any]) -> bool:
        given = b""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                given = value
        scheme, _, credentials = given.partition(b" ")
        # compare_digest takes as long whatever the token's content: nothing to learn by timing
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self.token)


#: The header a client without a token sends on requests that change something (``--no-auth``).
CLIENT_HEADER = "x-owrl-client"
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


class LocalOnly:
    """ASGI middleware for ``--no-auth`` (a server on 127.0.0.1 without a token). Without it,
    any web page the user opens could use the server: a page's form or ``no-cors`` fetch sends
    a multipart POST with no preflight, and a DNS-rebound name reads the answers.

    - the ``Host`` header must name the loopback address (``127.0.0.1``, ``localhost`` or
      ``[::1]``, any port): a rebound name is refused with 421;
    - a request that is not a GET, HEAD or OPTIONS must be JSON (``Content-Type:
      application/json``) or carry ``X-Owrl-Client`` (any value): a browser sends neither
      across origins without a preflight, which this server never allows. Else 403."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        host = headers.get(b"host", b"").decode("latin-1").strip().lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in _LOOPBACK_HOSTS:
            await self._refuse(send, 421, f"this server answers to 127.0.0.1 only, not to Host {host!r}")
            return
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if scope.get("method", "GET") not in ("GET", "HEAD", "OPTIONS") and content_type != b"application/json" \
                and CLIENT_HEADER.encode() not in headers:
            await self._refuse(send, 403, "without a token, a request that changes something must be JSON or send "
                                          "the header X-Owrl-Client (what a web page cannot send)")
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(send: Any, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: a request whose body is over ``max_bytes`` gets a 413. A declared
    ``Content-Length`` over it is answered before the body is read; a body sent in chunks is
    counted as it arrives and the request stops where it passes the limit."""

    def __init__(self, app: Any, max_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.max_bytes:
            body = json.dumps({"detail": self.message}).encode()
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                    (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        received = 0

        async def counted() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:  # an HTTPException: FastAPI passes it on as it is, not as a 400
                raise HTTPException(413, self.message)
            return message

        await self.app(scope, counted, send)

    @property
    def message(self) -> str:
        return f"the request body is over {self.max_bytes} bytes, the most this server reads"


# ---------------------------------------------------------------------------- app


def create_app(data_dir: Path, token: Optional[str], max_concurrent: int = 1,
               settings: Optional[Settings] = None, plugins: Optional[Plugins] = None,
               allow_local_files: Optional[bool] = None) -> FastAPI:
    """The application; ``token`` None serves without authentication (loopback only, checked by
    the command). Jobs may not open local files (``file:``, ``view-source:``, ``chrome:``, ...)
    unless ``allow_local_files`` is true; None reads ``OWRL_SERVE_ALLOW_LOCAL_FILES``."""
    data_dir = Path(data_dir)
    store = JobStore(data_dir / "jobs.sqlite3")
    if allow_local_files is None:
        allow_local_files = os.environ.get(ALLOW_LOCAL_FILES_ENV, "").strip().lower() in ("1", "true", "yes")
    runner = JobRunner(store, data_dir, settings or load_settings(), plugins or Plugins(),
                       max_concurrent=max_concurrent, allow_local_files=allow_local_files)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await runner.start()
        try:
            yield
        finally:
            await runner.stop()
            store.close()

    app = FastAPI(title="owrl serve", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Runs owrl tasks and flows as jobs. See docs/serve.md.")
    app.state.runner = runner  # what the routes reach through routes.runner_of
    for error, handler in ERROR_HANDLERS.items():
        app.add_exception_handler(error, handler)
    # the bearer scheme, declared so the OpenAPI document shows it; BearerAuth enforces it
    security = [Depends(HTTPBearer(auto_error=False, scheme_name="HTTPBearer", description="the server's OWRL_SERVE_TOKEN"))] if token else []
    app.include_router(public)
    app.include_router(jobs, prefix="/v1", dependencies=security, responses=ERRORS)
    app.add_middleware(BodyLimit)
    if token:  # added last, so outermost: a request without the token is refused before its body is read
        app.add_middleware(BearerAuth, token=token)
    else:  # --no-auth, loopback only: what stands in for the token against the user's own browser
        app.add_middleware(LocalOnly)
    return app


# ---------------------------------------------------------------------------- errors


async def spec_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, SpecError)
    return JSONResponse({"detail": [{"loc": list(err.loc), "msg": err.message, "type": "value_error"}]}, status_code=422)


async def inputs_error(request: Request, err: Exception) -> Response:
    assert isinstance(err, (InputsError, RequestValidationErrorOf))
    return JSONResponse({"detail": err.errors}, status_code=422)


async def http_error(request: Request, err: Exception) -> Response:
    """A 400 is a body that could not be read at all: answered as a 422 that says so."""
    assert isinstance(err, StarletteHTTPException)
    multipart = request.headers.get("content-type", "").lower().startswith("multipart/")
    if err.status_code == 400 and multipart:  # the form itself could not be read (a field over 1 MiB, ...)
        return JSONResponse({"detail": [{"loc": ["body"], "msg": f"the form could not be read: {err.detail} "
                                         "(send a flow over 1 MiB as a file: -F flow=@flow.json)",
                                         "type": "value_error"}]}, status_code=422)
    if err.status_code == 400:  # a body FastAPI could not even decode: as bad as invalid JSON
        return JSONResponse({"detail": [{"loc": ["body"], "msg": "the body is not JSON in UTF-8",
                                         "type": "json_invalid"}]}, status_code=422)
    return await http_exception_handler(request, err)


ERROR_HANDLERS: dict[type[Exception], Callable[[Request, Exception], Awaitable[Response]]] = {
    SpecError: spec_error, InputsError: inputs_error, RequestValidationErrorOf: inputs_error,
    StarletteHTTPException: http_error,
}
