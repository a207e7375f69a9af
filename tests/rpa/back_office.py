"""A purchase-order back office served on 127.0.0.1 for the RPA tests: a log-in with a CSRF
token, a list, a detail page with a decision form (radio, checkbox, reason), server-side
validation, a refusal of a second decision, and sessions that expire after a number of orders
opened (or on the confirmation page). Its own log says what was decided and how many log-ins
there were."""

from __future__ import annotations

import html
import http.server
import secrets
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Optional

USER, PASSWORD = "ops", "s3cret"
#: The orders and their amounts.
ORDERS = {f"PO-{1000 + n}": amount for n, amount in enumerate(
    [1200, 25000, 480, 13250, 900, 77000, 3100, 15000, 640, 2500], start=1)}


@dataclass
class Office:
    """The server's state; ``expire_after``: orders a session may open (0: any number);
    ``expire_on_done``: a session ends when the confirmation page is asked for."""

    expire_after: int = 0
    expire_on_done: bool = False
    sessions: dict[str, int] = field(default_factory=dict)  # id -> page views
    tokens: set[str] = field(default_factory=set)
    decisions: dict[str, str] = field(default_factory=dict)
    log: list[tuple[str, str]] = field(default_factory=list)  # (po, decision) each time one was recorded
    refused: list[str] = field(default_factory=list)  # second decisions refused
    logins: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _page(title: str, body: str) -> bytes:
    return f"<!doctype html><title>{html.escape(title)}</title><body>{body}</body>".encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    office: Office

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _send(self, status: int, body: bytes = b"", headers: Optional[dict[str, str]] = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _session(self) -> Optional[str]:
        cookies = dict(p.strip().split("=", 1) for p in (self.headers.get("Cookie") or "").split(";") if "=" in p)
        sid = cookies.get("session")
        return sid if sid in self.office.sessions else None

    def _form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        return {k: v[0] for k, v in urllib.parse.parse_qs(self.rfile.read(length).decode()).items()}

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path = urllib.parse.urlsplit(self.path).path
        if path == "/favicon.ico":
            return self._send(404)
        if path == "/login":
            token = secrets.token_hex(8)
            with self.office.lock:
                self.office.tokens.add(token)
            return self._send(200, _page("Sign in", (
                "<h1>Sign in</h1><form method=post action=/login>"
                f"<input type=hidden name=csrf value={token}>"
                "<label>User <input id=user name=user></label>"
                "<label>Password <input id=password type=password name=password></label>"
                "<button>Log in</button></form>")))
        sid = self._session()
        parts = path.strip("/").split("/")
        with self.office.lock:
            if sid is not None and len(parts) == 2 and parts[0] == "po":  # an order opened
                self.office.sessions[sid] += 1
                if self.office.expire_after and self.office.sessions[sid] > self.office.expire_after:
                    del self.office.sessions[sid]
                    sid = None
            if sid is not None and len(parts) == 3 and parts[2] == "done" and self.office.expire_on_done:
                del self.office.sessions[sid]
                sid = None
        if sid is None:
            return self._send(303, headers={"Location": "/login?next=" + urllib.parse.quote(path)})
        if path == "/pos":
            rows = "".join(f'<li><a href="/po/{po}">{po}</a> {amount}</li>' for po, amount in ORDERS.items())
            return self._send(200, _page("Purchase orders", f"<h1>Purchase orders</h1><ul>{rows}</ul>"))
        if len(parts) == 2 and parts[0] == "po" and parts[1] in ORDERS:
            po = parts[1]
            return self._send(200, _page(po, (
                f"<h1>Purchase order {po}</h1><p>Amount: <span id=amount>${ORDERS[po]:,}.00</span></p>"
                f"<form method=post action=/po/{po}/decide>"
                "<label><input type=radio id=decision-approve name=decision value=approve> Approve</label>"
                "<label><input type=radio id=decision-reject name=decision value=reject> Reject</label>"
                "<label><input type=checkbox id=budget name=budget> Budget confirmed</label>"
                "<label>Reason <textarea id=reason name=reason></textarea></label>"
                "<button>Submit decision</button></form>")))
        if len(parts) == 3 and parts[0] == "po" and parts[2] == "done" and parts[1] in self.office.decisions:
            po = parts[1]
            return self._send(200, _page(po, f"<h1>{po} decided: {self.office.decisions[po]}</h1><a href=/pos>Back</a>"))
        return self._send(404, _page("Not found", "<h1>Not found</h1>"))

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        path = urllib.parse.urlsplit(self.path).path
        form = self._form()
        if path == "/login":
            with self.office.lock:
                known = form.get("csrf") in self.office.tokens
                self.office.tokens.discard(form.get("csrf", ""))
            if not known:
                return self._send(400, _page("Bad request", "<h1>The form expired: reload the page</h1>"))
            if (form.get("user"), form.get("password")) != (USER, PASSWORD):
                return self._send(200, _page("Sign in", "<h1>Sign in</h1><p>Incorrect user or password</p>"))
            sid = secrets.token_hex(16)
            with self.office.lock:
                self.office.sessions[sid] = 0
                self.office.logins += 1
            return self._send(303, headers={"Location": "/pos", "Set-Cookie": f"session={sid}; Path=/; HttpOnly"})
        if self._session() is None:
            return self._send(303, headers={"Location": "/login"})
        parts = path.strip("/").split("/")
        if len(parts) != 3 or parts[0] != "po" or parts[1] not in ORDERS or parts[2] != "decide":
            return self._send(404, _page("Not found", "<h1>Not found</h1>"))
        po, decision = parts[1], form.get("decision")
        with self.office.lock:
            if po in self.office.decisions:
                self.office.refused.append(po)
                return self._send(409, _page("Conflict", f"<h1>{po} was already decided</h1>"))
            if decision not in ("approve", "reject"):
                return self._send(400, _page(po, "<h1>Choose approve or reject</h1>"))
            if decision == "reject" and not form.get("reason", "").strip():
                return self._send(400, _page(po, "<h1>A reason is required to reject</h1>"))
            if decision == "approve" and ORDERS[po] > 10000 and form.get("budget") != "on":
                return self._send(400, _page(po, "<h1>Confirm the budget for orders over 10,000</h1>"))
            self.office.decisions[po] = decision
            self.office.log.append((po, decision))
        return self._send(303, headers={"Location": f"/po/{po}/done"})


def serve(office: Office) -> tuple[http.server.ThreadingHTTPServer, str]:
    """The back office on a free port of 127.0.0.1, served from a thread; its base URL."""
    handler = type("Handler", (_Handler,), {"office": office})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


#: The log-in, as a flow (the password a secret: OWRL_SECRET_BO_PASSWORD).
LOGIN: dict[str, Any] = {"task": "Sign in to the back office", "turns": [
    {"calls": [{"name": "write", "arguments": {"selector": "#user", "message": "ops"}},
               {"name": "write", "arguments": {"selector": "#password", "message": "{{secret:BO_PASSWORD}}"}},
               {"name": "click", "arguments": {"selector": "role=button[name=\"Log in\"]"},
                "expect": {"text_visible": "Purchase orders"}}]},
    {"calls": [{"name": "done", "arguments": {"response": "signed in"}}]}]}


def decide_flow(base: str) -> dict[str, Any]:
    return {
        "task": "Decide {{input:po}}", "start_url": base + "/po/{{input:po}}",
        "inputs": {"po": {"type": "string", "pattern": "PO-[0-9]{4}"},
                   "decision": {"type": "string", "enum": ["approve", "reject"]},
                   "reason": {"type": "string", "default": ""}},
        "session": {"login": "login.json", "gone": {"url_contains": "/login"}},
        "turns": [
            {"calls": [{"name": "extract", "arguments": {"selector": "#amount"}, "save_as": "amount"},
                       {"name": "click", "arguments": {"selector": "#decision-{{input:decision}}"}}]},
            {"when": "{{output:amount}} > 10000 and {{input:decision}} == approve",
             "calls": [{"name": "set_checked", "arguments": {"selector": "#budget", "checked": True}}]},
            {"when": "{{input:decision}} == reject",
             "calls": [{"name": "write", "arguments": {"selector": "#reason", "message": "{{input:reason}}"}}]},
            {"calls": [{"name": "click", "arguments": {"selector": "role=button[name=\"Submit decision\"]"}, "commit": True,
                        "expect": {"text_visible": "{{input:po}} decided: {{input:decision}}"}}]},
            {"calls": [{"name": "done", "arguments": {"response": "{{input:po}} {{input:decision}}"}}]}]}
