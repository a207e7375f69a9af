"""Per-session state of the demo shop and the rules that change it.

No HTTP here: the server (``shop.py``) parses requests, calls these functions and renders
pages. Everything a success check reads comes out of :meth:`Session.to_json`.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from .catalogue import ACCOUNTS, COUPONS, FREE_SHIPPING_FROM, SHIPPING, Product

MAX_QTY = 10


@dataclass
class CartLine:
    id: int
    product: Product
    size: str
    colour: str
    qty: int

    @property
    def label(self) -> str:
        return f"{self.product.name} ({self.size}, {self.colour.capitalize()})"

    @property
    def total(self) -> float:
        return round(self.product.price * self.qty, 2)

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.id,
            "product": self.product.id,
            "name": self.product.name,
            "variant": {"size": self.size, "colour": self.colour},
            "qty": self.qty,
            "unit_price": self.product.price,
        }


@dataclass
class Session:
    id: str
    created: float = field(default_factory=time.monotonic)
    cart: list[CartLine] = field(default_factory=list)
    coupon: Optional[str] = None
    orders: list[dict[str, Any]] = field(default_factory=list)
    user: Optional[str] = None
    newsletter: Optional[str] = None
    newsletter_popup: str = "pending"  # pending | dismissed | subscribed
    consent: Optional[str] = None  # accepted | rejected
    next_line: int = 1
    # A one-off message for the next page ("Added to your cart ..."): (kind, text).
    flash: Optional[tuple[str, str]] = None

    def pop_flash(self) -> Optional[tuple[str, str]]:
        message, self.flash = self.flash, None
        return message

    # -- cart
    def add(self, p: Product, size: str, colour: str, qty: int) -> CartLine:
        for line in self.cart:
            if line.product.id == p.id and line.size == size and line.colour == colour:
                line.qty = min(MAX_QTY, line.qty + qty)
                return line
        line = CartLine(self.next_line, p, size, colour, qty)
        self.next_line += 1
        self.cart.append(line)
        return line

    def line(self, line_id: int) -> Optional[CartLine]:
        return next((ln for ln in self.cart if ln.id == line_id), None)

    def set_qty(self, line_id: int, qty: int) -> None:
        line = self.line(line_id)
        if line is None:
            return
        if qty <= 0:
            self.remove(line_id)
        else:
            line.qty = min(MAX_QTY, qty)

    def remove(self, line_id: int) -> None:
        self.cart = [ln for ln in self.cart if ln.id != line_id]

    def totals(self, shipping_method: Optional[str] = None) -> dict[str, float]:
        subtotal = round(sum(ln.total for ln in self.cart), 2)
        discount = round(subtotal * COUPONS[self.coupon], 2) if self.coupon else 0.0
        out = {"subtotal": subtotal, "discount": discount, "total": round(subtotal - discount, 2)}
        if shipping_method is not None:
            shipping = shipping_cost(shipping_method, out["total"])
            out["shipping"] = shipping
            out["total"] = round(out["total"] + shipping, 2)
        return out

    @property
    def items(self) -> int:
        return sum(ln.qty for ln in self.cart)

    # -- orders
    def place_order(self, form: dict[str, str]) -> dict[str, Any]:
        method = form.get("shipping", "standard")
        totals = self.totals(method)
        order = {
            "number": "DS-" + str(secrets.randbelow(900000) + 100000),
            "date": _dt.date.today().isoformat(),
            "status": "Processing",
            "items": [ln.to_json() for ln in self.cart],
            "shipping_name": form["name"].strip(),
            "email": form["email"].strip(),
            "address": form["address"].strip(),
            "city": form["city"].strip(),
            "postcode": form["postcode"].strip(),
            "shipping_method": method,
            "coupon": self.coupon,
            "card_last4": re.sub(r"\D", "", form["card"])[-4:],
            "user": self.user,
            **totals,
        }
        self.orders.append(order)
        self.cart = []
        self.coupon = None
        return order

    def order(self, number: str) -> Optional[dict[str, Any]]:
        return next((o for o in self.orders if o["number"] == number), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "cart": [ln.to_json() for ln in self.cart],
            "cart_coupon": self.coupon,
            "cart_totals": self.totals(),
            "orders": self.orders,
            "logged_in": self.user,
            "newsletter": self.newsletter,
            "newsletter_popup": self.newsletter_popup,
            "consent": self.consent,
        }


class Sessions:
    """All sessions of one shop, by id; one lock serialises every change.

    A long-running shop forgets its oldest sessions beyond ``limit`` (every cookie-less
    request starts one).
    """

    def __init__(self, limit: int = 10000) -> None:
        self.lock = threading.RLock()
        self.limit = limit
        self._by_id: dict[str, Session] = {}

    def get(self, session_id: Optional[str]) -> Optional[Session]:
        return self._by_id.get(session_id or "")

    def create(self) -> Session:
        session = Session(id=secrets.token_urlsafe(18))
        self._by_id[session.id] = session
        while len(self._by_id) > self.limit:
            del self._by_id[next(iter(self._by_id))]
        return session

    def __len__(self) -> int:
        return len(self._by_id)


def shipping_cost(method: str, goods_total: float) -> float:
    if method == "standard" and goods_total >= FREE_SHIPPING_FROM:
        return 0.0
    return SHIPPING[method]


# ---------------------------------------------------------------------------- validation

EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
EXPIRY = re.compile(r"^(\d{2})\s*/\s*(\d{2})$")
POSTCODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 -]{1,8}[A-Za-z0-9]$")

CHECKOUT_FIELDS = ("name", "email", "address", "city", "postcode", "card", "expiry", "cvc")


def valid_email(text: str) -> bool:
    return EMAIL.match(text.strip()) is not None


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def validate_checkout(form: dict[str, str], today: Optional[_dt.date] = None) -> dict[str, str]:
    """Field name -> error message, empty when the form is good. Mirrored in shop.js."""
    today = today or _dt.date.today()
    errors: dict[str, str] = {}

    def get(key: str) -> str:
        return (form.get(key) or "").strip()

    if len(get("name")) < 2:
        errors["name"] = "Enter your full name."
    if not valid_email(get("email")):
        errors["email"] = "Enter a valid email address, like name@example.com."
    if len(get("address")) < 3:
        errors["address"] = "Enter your street address."
    if len(get("city")) < 2:
        errors["city"] = "Enter your city."
    if not POSTCODE.match(get("postcode")):
        errors["postcode"] = "Enter a valid postal code."
    card = re.sub(r"[\s-]", "", get("card"))
    if not (card.isdigit() and len(card) == 16 and luhn_ok(card)):
        errors["card"] = "Enter a valid 16-digit card number."
    m = EXPIRY.match(get("expiry"))
    if not m or not 1 <= int(m.group(1)) <= 12:
        errors["expiry"] = "Enter the expiry date as MM/YY."
    else:
        month, year = int(m.group(1)), 2000 + int(m.group(2))
        if (year, month) < (today.year, today.month):
            errors["expiry"] = "This card has expired."
    if not re.fullmatch(r"\d{3}", get("cvc")):
        errors["cvc"] = "Enter the 3-digit security code."
    if form.get("shipping", "standard") not in SHIPPING:
        errors["shipping"] = "Choose a delivery option."
    return errors


def check_login(email: str, password: str) -> Optional[str]:
    account = ACCOUNTS.get(email.strip().lower())
    if account is None or not secrets.compare_digest(account.password, password):
        return None
    return account.email


def variant_error(p: Product, size: str, colour: str, qty_text: str) -> Optional[str]:
    if size not in p.sizes:
        return "Please choose a size."
    if colour not in p.colours:
        return "Please choose a colour."
    try:
        qty = int(qty_text)
    except ValueError:
        return "Enter a quantity from 1 to 10."
    if not 1 <= qty <= MAX_QTY:
        return "Enter a quantity from 1 to 10."
    return None
