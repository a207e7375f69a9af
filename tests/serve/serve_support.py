"""A real ``owrl serve`` in a subprocess on a free loopback port, and a small HTTP client for it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from owrl_cli import KEEP

TOKEN = "serve-test-token-5f1c"
ENDED = ("finished", "failed", "cancelled")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


_DEFAULT = object()


@dataclass
class Served:
    """``python -m owrl_sdk serve`` as a user starts it; its output goes to ``log``."""

    data_dir: Path
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    token: Optional[str] = TOKEN
    port: int = 0
    proc: Optional[subprocess.Popen] = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def start(self, timeout: float = 30) -> "Served":
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("OWRL_") or k in KEEP}
        if self.token:
            env["OWRL_SERVE_TOKEN"] = self.token
        env.update(self.env)
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "owrl_sdk", "serve", "--port", str(self.port), "--data-dir", str(self.data_dir),
             *self.args], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=str(self.data_dir.parent))
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"owrl serve exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if self.request("GET", "/health", token=None).status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"owrl serve did not answer /health in {timeout} s:\n{self.log.read_text()}")

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; the exit code (uvicorn ends by re-raising the
        signal once it shut down cleanly: -15)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the server dies without a word, as in a crash or an OOM kill."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    # ------------------------------------------------------------------ HTTP

    def request(self, method: str, path: str, body: Any = None, *, token: Any = _DEFAULT,
                raw: Optional[bytes] = None, timeout: float = 30) -> Reply:
        headers = {}
        token = self.token if token is _DEFAULT else token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return Reply(resp.status, dict(resp.headers), resp.read())
        except urllib.error.HTTPError as err:
            return Reply(err.code, dict(err.headers), err.read())

    def stream(self, path: str, timeout: float = 30) -> Iterator[dict[str, Any]]:
        """The NDJSON lines of a streaming endpoint, as they arrive."""
        req = urllib.request.Request(self.base + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            assert resp.headers["Content-Type"].startswith("application/x-ndjson")
            for line in resp:
                yield json.loads(line)

    def submit_flow(self, flow: dict[str, Any], **query: Any) -> dict[str, Any]:
        qs = ("?" + urllib.parse.urlencode(query, doseq=True)) if query else ""
        reply = self.request("POST", "/v1/jobs/flow" + qs, flow)
        assert reply.status == 201, reply.body
        return reply.json()

    def job(self, job_id: str) -> dict[str, Any]:
        reply = self.request("GET", f"/v1/jobs/{job_id}")
        assert reply.status == 200, reply.body
        return reply.json()

    def wait(self, job_id: str, until: tuple[str, ...] = ENDED, timeout: float = 45) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["status"] in until:
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still {job['status']} after {timeout} s:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)


def flow(url: str, *turns: list[dict[str, Any]], task: str = "test flow") -> dict[str, Any]:
    return {"schema": "owrl.flow/1", "task": task, "start_url": url, "turns": [{"calls": calls} for calls in turns]}


def done(answer: str) -> list[dict[str, Any]]:
    return [{"name": "done", "arguments": {"response": answer}}]


def wait_calls(seconds: float = 30) -> list[dict[str, Any]]:
    return [{"name": "wait", "arguments": {"seconds": seconds}}]


def servers(tmp_path: Path) -> Iterator[Any]:
    """The body of a ``serve`` fixture: it yields ``start(*args, data_dir=None, env=None,
    token=TOKEN)``, which starts a server; any left running is killed afterwards."""
    started: list[Served] = []

    def start(*args: str, data_dir: Optional[Path] = None, env: Optional[dict] = None, token: Any = TOKEN) -> Served:
        server = Served(data_dir or tmp_path / "data", tuple(args), dict(env or {}), token)
        started.append(server.start())
        return server

    yield start
    for server in started:
        if server.proc is not None and server.proc.poll() is None:
            server.kill()
