"""The demo shop served in process: a threaded stdlib HTTP server on 127.0.0.1.

State lives on the server, per browser session (a cookie the server sets), so that a
suite's success check can read what an episode did through ``GET /api/state`` with the
episode's cookies. The server writes nothing to stderr.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

from . import pages
from .catalogue import CATEGORIES, COUPONS, PRODUCTS, Product, product
from .state import Session, Sessions, check_login, valid_email, validate_checkout, variant_error

COOKIE = "demo_shop_session"
STATIC = {"/static/shop.css": ("shop.css", "text/css"), "/static/shop.js": ("shop.js", "text/javascript")}

#: The variable that renames the product page's add button (see :class:`DemoShop`).

_serving: set[str] = set()


def serving() -> frozenset[str]:
    """Base URLs of the demo shops running in this process (a site adapter knows the shop by them)."""
    return frozenset(_serving)


def search_products(query: str) -> list[Product]:
    """Products whose name, category or colours contain every word of the query."""
    words = [w for w in query.lower().split() if w]
    if not words:
        return []
    found = []
    for p in PRODUCTS:
        haystack = " ".join([p.name, p.category, p.category_label, *p.colours]).lower()
        if all(w in haystack for w in words):
            found.append(p)
    return found


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], shop: "DemoShop"):
        self.shop = shop
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A browser that goes away mid-response is normal here; stay quiet.
        return None


class DemoShop:
    """The demo shop server.

    ``start(port=0)`` serves it on 127.0.0.1 in a daemon thread and returns the base URL;
    ``stop()`` shuts it down. Usable as a context manager. ``search_delay`` (seconds before
    ``/api/search`` answers) and ``newsletter_delay`` (seconds after a session's first page
    load before the newsletter pop-up opens) make the shop behave like a real one.
    ``add_label`` is the text of the product page's add button: "Add to cart" when blank; the
    ``demo-shop`` table's ``add_label`` (``OWRL_DEMO_SHOP_ADD_LABEL``) gives it, so that a
    redesign which renames the button can be tried on flows
    (``OWRL_DEMO_SHOP_ADD_LABEL="Add to bag" owrl run --flow F``).
    """

    def __init__(self, host: str = "127.0.0.1", search_delay: float = 0.6, newsletter_delay: float = 1.5,
                 add_label: Optional[str] = None):
        self.host = host
        self.add_label = (add_label or "").strip() or "Add to cart"
        self.search_delay = search_delay
        self.newsletter_delay = newsletter_delay
        self.sessions = Sessions()
        self._server: Optional[_Server] = None
        self._thread: Optional[threading.Thread] = None
        self._static: dict[str, bytes] = {}

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the demo shop is not running: call start() first")
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # the address an IPv4 socket reports names its host in text
        return f"http://{host}:{port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self, port: int = 0) -> str:
        if self._server is not None:
            return self.base_url
        self._server = _Server((self.host, port), self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="owrl-demo-shop", daemon=True)
        self._thread.start()
        _serving.add(self.base_url)
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            _serving.discard(self.base_url)
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "DemoShop":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def static(self, name: str) -> bytes:
        if name not in self._static:
            self._static[name] = resources.files(__package__).joinpath(name).read_bytes()
        return self._static[name]


@dataclass
class _Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    """Parses a request, computes the response under the sessions lock, then sends it."""

    server: _Server
    server_version = "DemoShop/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return None

    @property
    def shop(self) -> DemoShop:
        return self.server.shop

    # -- plumbing
    def _session(self) -> tuple[Session, bool]:
        cookie = SimpleCookie()
        try:
            cookie.load(self.headers.get("Cookie") or "")
        except Exception:  # a malformed cookie header starts a new session
            pass
        sid = cookie[COOKIE].value if COOKIE in cookie else None
        session = self.shop.sessions.get(sid)
        if session is not None:
            return session, False
        return self.shop.sessions.create(), True

    def _send(self, response: _Response, session: Optional[Session] = None, new: bool = False) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        if session is not None and new:
            self.send_header("Set-Cookie", f"{COOKIE}={session.id}; Path=/; HttpOnly; SameSite=Lax")
        for k, v in response.headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _html(self, session: Session, title: str, body: str, status: int = 200, query: str = "") -> _Response:
        delay = max(0, int((self.shop.newsletter_delay - (time.monotonic() - session.created)) * 1000))
        page = pages.layout(session, title, body, path=self._here(), query=query, newsletter_delay_ms=delay)
        return _Response(status, page.encode("utf-8"), "text/html; charset=utf-8")

    def _here(self) -> str:
        """The page's own address, where no-script forms (consent, newsletter) send the browser back."""
        if self.command != "POST":
            return self.path
        referer = urlsplit(self.headers.get("Referer") or "")
        if referer.netloc == self.headers.get("Host") and referer.path:
            return referer.path + (f"?{referer.query}" if referer.query else "")
        return "/"

    @staticmethod
    def _json(data: Any, status: int = 200) -> _Response:
        return _Response(status, json.dumps(data).encode("utf-8"), "application/json")

    @staticmethod
    def _redirect(location: str) -> _Response:
        return _Response(HTTPStatus.SEE_OTHER, headers={"Location": location})

    def _form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        if (self.headers.get("Content-Type") or "").startswith("application/json"):
            try:
                data = json.loads(raw or "{}")
            except json.JSONDecodeError:
                return {}
            return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        return {k: v[-1] for k, v in parse_qs(raw, keep_blank_values=True).items()}

    @staticmethod
    def _safe_next(path: str, default: str = "/") -> str:
        # Only paths on this site: never redirect elsewhere.
        return path if path.startswith("/") and not path.startswith("//") else default

    def _back(self, form: dict[str, str]) -> _Response:
        """A redirect to the form's ``next`` page: where a no-script form (consent, newsletter) was sent from."""
        return self._redirect(self._safe_next(form.get("next", "/")))

    # -- GET
    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if url.path in STATIC:
            name, kind = STATIC[url.path]
            return self._send(_Response(200, self.shop.static(name), f"{kind}; charset=utf-8"))
        if url.path == "/favicon.ico":
            return self._send(_Response(204))
        with self.shop.sessions.lock:
            session, new = self._session()
        if url.path == "/api/search":
            time.sleep(self.shop.search_delay)  # results arrive late on purpose
            found = [pages.product_json(p) for p in search_products(query.get("q", ""))]
            return self._send(self._json({"query": query.get("q", ""), "results": found}), session, new)
        with self.shop.sessions.lock:
            response = self._get(session, url.path, query)
        self._send(response, session, new)

    def _get(self, session: Session, path: str, query: dict[str, str]) -> _Response:
        if path == "/":
            return self._html(session, "Home", pages.home())
        if path == "/products":
            try:
                page = int(query.get("page", "1"))
            except ValueError:
                page = 1
            category = query.get("category", "")
            category = category if category in dict(CATEGORIES) else ""
            sort = query.get("sort", "featured")
            sort = sort if sort in dict(pages.SORTS) else "featured"
            body = pages.listing(category, query.get("colour", ""), sort, page)
            return self._html(session, dict(CATEGORIES).get(category, "All products"), body)
        if path.startswith("/product/"):
            p = product(path[len("/product/"):])
            if p is None:
                return self._html(session, "Not found", pages.not_found_page(), 404)
            return self._html(session, p.name, pages.product_page(p, add_label=self.shop.add_label))
        if path == "/search":
            q = query.get("q", "")
            return self._html(session, f"Search: {q}" if q else "Search", pages.search_page(q), 200, q)
        if path == "/cart":
            return self._html(session, "Your cart", pages.cart_page(session))
        if path == "/checkout":
            return self._html(session, "Checkout", pages.checkout_page(session))
        if path.startswith("/order/"):
            order = session.order(path[len("/order/"):])
            if order is None:
                return self._html(session, "Not found", pages.not_found_page(), 404)
            return self._html(session, "Order confirmed", pages.confirmation_page(order))
        if path == "/login":
            if session.user:
                return self._redirect("/account")
            next_path = self._safe_next(query.get("next", "/account"), "/account")
            return self._html(session, "Log in", pages.login_page(next_path=next_path))
        if path == "/account":
            if not session.user:
                return self._redirect("/login?next=/account")
            return self._html(session, "Your account", pages.account_page(session))
        if path == "/api/state":
            return self._json(session.to_json())
        return self._html(session, "Not found", pages.not_found_page(), 404)

    # -- POST
    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        form = self._form()
        with self.shop.sessions.lock:
            session, new = self._session()
            response = self._post(session, path, form)
        self._send(response, session, new)

    def _post(self, session: Session, path: str, form: dict[str, str]) -> _Response:
        """Apply the form posted to ``path`` to ``session``. The answer is a redirect once it is done,
        the page again with its errors when it is refused, or JSON for the calls of shop.js."""
        if path == "/cart/add":
            p = product(form.get("product", ""))
            if p is None:
                return self._html(session, "Not found", pages.not_found_page(), 404)
            size, colour, qty = form.get("size", ""), form.get("colour", ""), form.get("qty", "1").strip() or "1"
            error = variant_error(p, size, colour, qty)
            if error:
                return self._html(session, p.name, pages.product_page(p, error, form, add_label=self.shop.add_label), 400)
            line = session.add(p, size, colour, int(qty))
            session.flash = ("added", f"Added to your cart: {qty} × {line.label}.")
            return self._redirect(f"/product/{p.id}")
        if path in ("/cart/update", "/cart/remove"):
            return self._update_cart(session, path, form)
        if path == "/cart/coupon":
            code = form.get("code", "").strip().upper()
            if code not in COUPONS:
                return self._html(session, "Your cart", pages.cart_page(session, "That discount code is not valid."), 400)
            session.coupon = code
            session.flash = ("status", f"Discount code {code} applied.")
            return self._redirect("/cart")
        if path == "/checkout":
            if not session.cart:
                return self._redirect("/cart")
            errors = validate_checkout(form)
            if errors:
                values = {k: v for k, v in form.items() if k != "cvc"}
                return self._html(session, "Checkout", pages.checkout_page(session, values, errors), 400)
            order = session.place_order(form)
            return self._redirect(f"/order/{order['number']}")
        if path == "/login":
            next_path = self._safe_next(form.get("next", "/account"), "/account")
            user = check_login(form.get("email", ""), form.get("password", ""))
            if user is None:
                body = pages.login_page("Incorrect email or password.", form.get("email", ""), next_path)
                return self._html(session, "Log in", body, 401)
            session.user = user
            session.flash = ("status", "You are now logged in.")
            return self._redirect(next_path)
        if path == "/logout":
            session.user = None
            session.flash = ("status", "You have been logged out.")
            return self._redirect("/")
        if path in ("/consent", "/api/consent"):
            choice = form.get("choice", "")
            if choice not in ("accepted", "rejected"):
                return self._json({"ok": False, "error": "choice must be accepted or rejected"}, 400)
            session.consent = choice
            return self._json({"ok": True, "consent": choice}) if path == "/api/consent" else self._back(form)
        if path in ("/newsletter", "/api/newsletter"):
            email = form.get("email", "").strip()
            if not valid_email(email):
                if path == "/api/newsletter":
                    return self._json({"ok": False, "error": "Please enter a valid email address."}, 400)
                session.flash = ("error", "Please enter a valid email address to sign up.")
                return self._back(form)
            session.newsletter = email
            session.newsletter_popup = "subscribed"
            if path == "/api/newsletter":
                return self._json({"ok": True, "email": email, "code": "WELCOME10"})
            session.flash = ("status", f"Thanks! {email} is now subscribed to our newsletter.")
            return self._back(form)
        if path == "/api/newsletter/dismiss":
            if session.newsletter_popup == "pending":
                session.newsletter_popup = "dismissed"
            return self._json({"ok": True})
        return self._html(session, "Not found", pages.not_found_page(), 404)

    def _update_cart(self, session: Session, path: str, form: dict[str, str]) -> _Response:
        """Set a cart line's quantity (``/cart/update``) or remove the line (``/cart/remove``, or a
        quantity of 0), then show the cart; a line or quantity that is not a number only flashes an error."""
        try:
            line_id = int(form.get("line", ""))
            qty = 0 if path == "/cart/remove" else int(form.get("qty", "").strip())
        except ValueError:
            session.flash = ("error", "Enter a quantity from 0 to 10.")
            return self._redirect("/cart")
        line = session.line(line_id)
        if line is not None:
            session.set_qty(line_id, qty)
            session.flash = ("status", f"Removed {line.label} from your cart." if qty <= 0
                             else f"Updated the quantity of {line.label} to {line.qty}.")
        return self._redirect("/cart")
