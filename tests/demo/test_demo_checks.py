"""The demo-shop success checks, evaluated against hand-written shop states."""

from __future__ import annotations

import pytest

from owrl_demo.checks import evaluate_check, evaluate_task, items_match


def line(product, size, colour, qty=1, name=None):
    return {"product": product, "name": name or product, "variant": {"size": size, "colour": colour}, "qty": qty}


def state(**kw):
    base = {"cart": [], "cart_coupon": None, "orders": [], "logged_in": None, "newsletter": None,
            "newsletter_popup": "pending", "consent": None}
    return {**base, **kw}


ORDER = {"number": "DS-123456", "items": [line("tote-bag", "One size", "beige"), line("crew-tee", "L", "grey", 3)],
         "shipping_name": "Alex  Morgan", "email": "alex@example.com", "city": "Springfield", "postcode": "12345",
         "shipping_method": "express", "coupon": "WELCOME10", "user": None, "address": "12 High Street"}


def test_items_match_exactly_or_at_least():
    lines = [line("crew-tee", "L", "grey", 3), line("crew-tee", "M", "grey", 1)]
    assert items_match([{"product": "crew-tee", "size": "M"}, {"product": "crew-tee", "qty": 3}], lines)
    # the looser spec must not take the only line the stricter one fits
    assert items_match([{"product": "crew-tee"}, {"product": "crew-tee", "size": "L", "qty": 3}], lines)
    assert not items_match([{"product": "crew-tee", "size": "L", "qty": 3}], lines)
    assert items_match([{"product": "crew-tee", "size": "L", "qty": 3}], lines, exact=False)
    assert not items_match([{"product": "crew-tee", "colour": "black"}], lines, exact=False)
    assert items_match([{"product": "Cotton Crew T-Shirt", "colour": "GREY", "size": "l", "qty": 3}],
                       [line("crew-tee", "L", "grey", 3, name="Cotton Crew T-Shirt")])


def test_cart_check_with_coupon():
    s = state(cart=[line("rain-boots", "40", "yellow", 2)], cart_coupon="WELCOME10")
    spec = {"type": "cart", "items": [{"product": "rain-boots", "size": "40", "colour": "yellow", "qty": 2}]}
    assert evaluate_check(spec, s, None).ok
    assert evaluate_check({**spec, "coupon": "WELCOME10"}, s, None).ok
    assert not evaluate_check({**spec, "coupon": "WELCOME10"}, state(cart=s["cart"]), None).ok
    result = evaluate_check({"type": "cart", "items": []}, s, None)
    assert not result.ok and "2 × rain-boots (40, yellow)" in result.detail


def test_order_check_fields_and_count():
    s = state(orders=[ORDER])
    base = {"type": "order", "items": [{"product": "crew-tee", "size": "L", "colour": "grey", "qty": 3},
                                       {"product": "tote-bag", "colour": "beige"}]}
    assert evaluate_check(base, s, None).ok
    assert evaluate_check({**base, "shipping_name": "alex morgan", "shipping_method": "express",
                           "coupon": "WELCOME10", "count": 1, "user": None}, s, None).ok
    assert not evaluate_check({**base, "shipping_method": "standard"}, s, None).ok
    assert not evaluate_check({**base, "count": 2}, s, None).ok
    assert not evaluate_check({**base, "user": "demo@shop.test"}, s, None).ok
    assert not evaluate_check(base, state(), None).ok
    assert evaluate_check({"type": "no_order"}, state(), None).ok
    assert not evaluate_check({"type": "no_order"}, s, None).ok


@pytest.mark.parametrize("check, good, bad", [
    ({"type": "logged_in"}, {"logged_in": "demo@shop.test"}, {}),
    ({"type": "logged_in", "email": "demo@shop.test"}, {"logged_in": "demo@shop.test"}, {"logged_in": "x@y.z"}),
    ({"type": "logged_out"}, {}, {"logged_in": "demo@shop.test"}),
    ({"type": "newsletter", "email": "jo@example.com"}, {"newsletter": "Jo@Example.com"}, {"newsletter": "x@y.z"}),
    ({"type": "newsletter", "subscribed": False}, {}, {"newsletter": "jo@example.com"}),
    ({"type": "consent", "value": "rejected"}, {"consent": "rejected"}, {"consent": "accepted"}),
])
def test_simple_state_checks(check, good, bad):
    assert evaluate_check(check, state(**good), None).ok
    assert not evaluate_check(check, state(**bad), None).ok


def test_answer_order_number_names_the_latest_order():
    first = {**ORDER, "number": "DS-100001"}
    s = state(orders=[first, ORDER])
    check = {"type": "answer_order_number"}
    assert evaluate_check(check, s, "Your order number is DS-123456.").ok
    assert not evaluate_check(check, s, "It was DS-100001").ok
    assert not evaluate_check(check, s, None).ok
    assert not evaluate_check(check, state(), "DS-123456").ok


def test_unknown_check_and_unreadable_state_fail_with_a_reason():
    result = evaluate_check({"type": "wishlist"}, state(), None)
    assert not result.ok and "unknown check type 'wishlist'" in result.detail
    result = evaluate_check({"type": "logged_in"}, None, None)
    assert not result.ok and "could not be read" in result.detail


def test_expected_answer_is_one_more_check():
    results = evaluate_task([], None, "The total is $71.82.", "71.82", "number")
    assert [r.ok for r in results] == [True]
    results = evaluate_task([{"type": "logged_out"}], state(), "Felt fedora", "Felt Fedora", "exact")
    assert [r.ok for r in results] == [True, True]
    assert not evaluate_task([], None, None, "Felt Fedora")[0].ok
