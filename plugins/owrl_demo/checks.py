"""Success checks of demo-shop tasks, evaluated against a session's ``/api/state``.

A task's ``checks`` is a list of dicts, each with a ``type``:

- ``cart``: ``items`` (list of item specs), ``exact`` (default true: the cart holds these
  lines and nothing else; false: at least these), ``coupon`` (code applied to the cart).
- ``order``: some order of the session matches every field given: ``items`` and ``exact``
  as for ``cart``, and any of ``shipping_name``, ``email``, ``address``, ``city``,
  ``postcode``, ``shipping_method`` (standard/express), ``coupon``, ``user``; ``count``
  (optional) is the number of orders the session must hold.
- ``no_order``: the session placed no order.
- ``logged_in``: someone is logged in (``email``: that account); ``logged_out``: nobody is.
- ``newsletter``: subscribed, with ``email`` when given (``subscribed: false``: not subscribed).
- ``consent``: the cookie choice, ``value`` accepted or rejected.
- ``answer_order_number``: the final answer names the number of the session's latest order.

An item spec is ``{"product": ID, "size": ..., "colour": ..., "qty": N}``; only
``product`` is required (an id from the catalogue, or the product's name), the rest
must match when given. Text compares case- and space-insensitively.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from owrl_sdk.api import match_answer, normalize

ORDER_FIELDS = ("shipping_name", "email", "address", "city", "postcode", "shipping_method", "coupon", "user")
CHECK_TYPES = ("cart", "order", "no_order", "logged_in", "logged_out", "newsletter", "consent",
               "answer_order_number")


@dataclass
class CheckResult:
    check: dict[str, Any]
    ok: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "detail": self.detail}


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return normalize(str(a)) == normalize(str(b))


def _item_matches(spec: dict[str, Any], line: dict[str, Any]) -> bool:
    wanted = spec.get("product")
    if not (_same(wanted, line.get("product")) or _same(wanted, line.get("name"))):
        return False
    variant = line.get("variant") or {}
    for key in ("size", "colour"):
        if key in spec and not _same(spec[key], variant.get(key)):
            return False
    return "qty" not in spec or int(spec["qty"]) == int(line.get("qty", 0))


def _assign(specs: list[dict[str, Any]], lines: list[dict[str, Any]]) -> bool:
    """Whether each spec can take a line of its own (small lists: plain backtracking)."""
    if not specs:
        return True
    first, rest = specs[0], specs[1:]
    for i, line in enumerate(lines):
        if _item_matches(first, line) and _assign(rest, lines[:i] + lines[i + 1:]):
            return True
    return False


def items_match(specs: list[dict[str, Any]], lines: list[dict[str, Any]], exact: bool = True) -> bool:
    if exact and len(specs) != len(lines):
        return False
    return _assign(list(specs), list(lines))


def describe_lines(lines: list[dict[str, Any]]) -> str:
    if not lines:
        return "nothing"
    return ", ".join(
        f"{ln.get('qty')} × {ln.get('product')} ({(ln.get('variant') or {}).get('size')}, "
        f"{(ln.get('variant') or {}).get('colour')})" for ln in lines
    )


def _order_ok(check: dict[str, Any], order: dict[str, Any]) -> bool:
    if "items" in check and not items_match(check["items"], order.get("items", []), check.get("exact", True)):
        return False
    return all(_same(check[f], order.get(f)) for f in ORDER_FIELDS if f in check)


def evaluate_check(check: dict[str, Any], state: Optional[dict[str, Any]], answer: Optional[str]) -> CheckResult:
    kind = check.get("type")
    if kind not in CHECK_TYPES:
        return CheckResult(check, False, f"unknown check type {kind!r} (known: {', '.join(CHECK_TYPES)})")
    if state is None:
        return CheckResult(check, False, "the shop state could not be read")
    if kind == "cart":
        lines = state.get("cart", [])
        ok = items_match(check.get("items", []), lines, check.get("exact", True))
        if ok and "coupon" in check:
            ok = _same(check["coupon"], state.get("cart_coupon"))
        return CheckResult(check, ok, f"cart holds {describe_lines(lines)}; coupon {state.get('cart_coupon')}")
    if kind == "order":
        orders = state.get("orders", [])
        if "count" in check and len(orders) != int(check["count"]):
            return CheckResult(check, False, f"{len(orders)} orders placed, expected {check['count']}")
        ok = any(_order_ok(check, o) for o in orders)
        if not orders:
            return CheckResult(check, False, "no order was placed")
        seen = "; ".join(f"{o['number']}: {describe_lines(o.get('items', []))} to {o.get('shipping_name')}, "
                         f"{o.get('shipping_method')}, coupon {o.get('coupon')}" for o in orders)
        return CheckResult(check, ok, f"orders: {seen}")
    if kind == "no_order":
        orders = state.get("orders", [])
        return CheckResult(check, not orders, f"{len(orders)} orders placed")
    if kind == "logged_in":
        user = state.get("logged_in")
        ok = user is not None and ("email" not in check or _same(check["email"], user))
        return CheckResult(check, ok, f"logged in as {user}" if user else "nobody is logged in")
    if kind == "logged_out":
        user = state.get("logged_in")
        return CheckResult(check, user is None, f"logged in as {user}" if user else "nobody is logged in")
    if kind == "newsletter":
        email = state.get("newsletter")
        if check.get("subscribed", True) is False:
            return CheckResult(check, email is None, f"newsletter subscription: {email}")
        ok = email is not None and ("email" not in check or _same(check["email"], email))
        return CheckResult(check, ok, f"newsletter subscription: {email}")
    if kind == "consent":
        value = state.get("consent")
        return CheckResult(check, _same(check.get("value"), value), f"cookie choice: {value}")
    # answer_order_number
    orders = state.get("orders", [])
    if not orders:
        return CheckResult(check, False, "no order was placed")
    number = orders[-1]["number"]
    ok = answer is not None and normalize(number) in normalize(answer)
    return CheckResult(check, ok, f"latest order is {number}; answer was {answer!r}")


def evaluate_task(checks: list[dict[str, Any]], state: Optional[dict[str, Any]], answer: Optional[str],
                  expected_answer: Optional[str] = None, answer_match: str = "contains") -> list[CheckResult]:
    """Every check of a task, the expected answer included as one more check."""
    results = [evaluate_check(c, state, answer) for c in checks]
    if expected_answer is not None:
        ok = match_answer(expected_answer, answer, answer_match)
        results.append(CheckResult({"type": "answer", "expected": expected_answer, "match": answer_match}, ok,
                                   f"answer was {answer!r}"))
    return results
