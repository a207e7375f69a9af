"""The demo shop server over plain HTTP: sessions, search, cart, checkout, log-in, pop-ups."""

from __future__ import annotations

import json
import socket
import time
import urllib.request

import pytest

from owrl_demo import DemoShop

GOOD_CHECKOUT = {
    "name": "Alex Morgan", "email": "alex@example.com", "address": "12 High Street", "city": "Springfield",
    "postcode": "12345", "card": "4242 4242 4242 4242", "expiry": "12/34", "cvc": "123", "shipping": "standard",
}


def add(client, product="chelsea-boots", size="44", colour="black", qty=1):
    return client.post("/cart/add", product=product, size=size, colour=colour, qty=qty)


def test_start_gives_a_local_base_url_and_stop_frees_the_port():
    shop = DemoShop()
    url = shop.start()
    assert url.startswith("http://127.0.0.1:")
    port = int(url.rsplit(":", 1)[1])
    with urllib.request.urlopen(url + "/") as resp:
        assert resp.status == 200
    shop.stop()
    shop.stop()  # a second stop is harmless
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "the port still accepts connections after stop()"
    with pytest.raises(RuntimeError, match="not running"):
        _ = shop.base_url


def test_every_page_renders(client):
    for path in ("/", "/products", "/products?category=shoes&sort=price_desc&page=2", "/product/felt-fedora",
                 "/search?q=hat", "/cart", "/checkout", "/login"):
        body = client.get(path)
        assert "<h1" in body and "Demo Shop" in body, path
    status, _, body = client.request("/product/no-such-thing")
    assert status == 404 and "Page not found" in body


def test_state_is_per_session(new_client):
    alice, bob = new_client(), new_client()
    status, url, _ = add(alice, qty=2)
    assert status == 200 and url.endswith("/product/chelsea-boots")
    alice_cart = alice.state()["cart"]
    assert [(ln["product"], ln["variant"], ln["qty"]) for ln in alice_cart] == [
        ("chelsea-boots", {"size": "44", "colour": "black"}, 2)]
    assert alice_cart[0]["name"] == "Leather Chelsea Boots"
    assert bob.state()["cart"] == []
    add(bob, product="wool-beanie", size="One size", colour="red")
    assert [ln["product"] for ln in bob.state()["cart"]] == ["wool-beanie"]
    assert [ln["product"] for ln in alice.state()["cart"]] == ["chelsea-boots"]


def test_state_of_a_new_session_is_empty(client):
    state = client.state()
    assert state == {
        "cart": [], "cart_coupon": None, "cart_totals": {"subtotal": 0.0, "discount": 0.0, "total": 0.0},
        "orders": [], "logged_in": None, "newsletter": None, "newsletter_popup": "pending", "consent": None,
    }


def test_search_results_arrive_after_a_delay(client):
    started = time.monotonic()
    page = client.get("/search?q=boots")
    page_time = time.monotonic() - started
    assert 'data-query="boots"' in page and "Searching for" in page
    started = time.monotonic()
    results = json.loads(client.get("/api/search?q=boots"))
    assert time.monotonic() - started >= 0.55, "the search API answers after about 0.6 s"
    assert page_time < 0.55, "the search page itself does not wait"
    assert [r["name"] for r in results["results"]] == ["Leather Chelsea Boots", "Hiking Boots", "Rubber Rain Boots"]
    assert json.loads(client.get("/api/search?q=red%20shirt"))["results"][0]["name"] == "Flannel Check Shirt"


def test_search_delay_is_configurable():
    with DemoShop(search_delay=0) as fast:
        started = time.monotonic()
        with urllib.request.urlopen(fast.base_url + "/api/search?q=hat") as resp:
            assert len(json.load(resp)["results"]) == 7
        assert time.monotonic() - started < 0.5


def test_listing_filters_sorts_and_paginates(client):
    page = client.get("/products")
    assert "Showing 1–8 of 30 products" in page and "Page 1 of 4" in page
    page = client.get("/products?category=hats&sort=price_desc")
    assert "of 7 products" in page
    assert page.index("Felt Fedora") < page.index("Panama Straw Hat") < page.index("Sun Visor")
    page = client.get("/products?sort=price_asc&page=4")
    assert "Page 4 of 4" in page and "Leather Backpack" in page
    assert "of 2 products" in client.get("/products?colour=yellow")


def test_adding_needs_a_size_and_a_sane_quantity(client):
    status, _, body = add(client, size="")
    assert status == 400 and "Please choose a size." in body
    status, _, body = add(client, qty=0)
    assert status == 400 and "Enter a quantity from 1 to 10." in body
    status, _, body = add(client, colour="pink")
    assert status == 400 and "Please choose a colour." in body
    assert client.state()["cart"] == []


def test_cart_update_remove_and_coupon(client):
    add(client, product="crew-tee", size="L", colour="grey")
    add(client, product="crew-tee", size="L", colour="grey")  # the same variant again joins the line
    add(client, product="bucket-hat", size="One size", colour="green")
    lines = client.state()["cart"]
    assert [ln["qty"] for ln in lines] == [2, 1]
    client.post("/cart/update", line=lines[0]["line"], qty=3)
    status, _, page = client.post("/cart/remove", line=lines[1]["line"])
    assert "Removed Bucket Hat (One size, Green) from your cart." in page
    state = client.state()
    assert [(ln["product"], ln["qty"]) for ln in state["cart"]] == [("crew-tee", 3)]
    status, _, page = client.post("/cart/coupon", code="NOPE")
    assert status == 400 and "That discount code is not valid." in page
    client.post("/cart/coupon", code="welcome10")
    state = client.state()
    assert state["cart_coupon"] == "WELCOME10"
    assert state["cart_totals"] == {"subtotal": 45.0, "discount": 4.5, "total": 40.5}


@pytest.mark.parametrize("field, value, message", [
    ("name", "", "Enter your full name."),
    ("email", "alex@nowhere", "Enter a valid email address"),
    ("address", " ", "Enter your street address."),
    ("postcode", "!", "Enter a valid postal code."),
    ("card", "1234 5678 9012 3456", "Enter a valid 16-digit card number."),
    ("card", "4242 4242 4242", "Enter a valid 16-digit card number."),
    ("expiry", "13/30", "Enter the expiry date as MM/YY."),
    ("expiry", "01/20", "This card has expired."),
    ("cvc", "12", "Enter the 3-digit security code."),
])
def test_checkout_rejects_bad_input_on_the_server(client, field, value, message):
    add(client)
    status, url, page = client.post("/checkout", **{**GOOD_CHECKOUT, field: value})
    assert status == 400 and url.endswith("/checkout")
    assert message in page
    assert f'id="f-{field}"' in page and f'aria-describedby="err-{field}"' in page  # shown inline, at the field
    assert "Please correct the 1 highlighted field." in page
    state = client.state()
    assert state["orders"] == [] and len(state["cart"]) == 1


def test_checkout_keeps_what_was_typed_after_an_error(client):
    add(client)
    _, _, page = client.post("/checkout", **{**GOOD_CHECKOUT, "card": "4242"})
    assert 'value="Alex Morgan"' in page and 'value="12 High Street"' in page


def test_checkout_places_an_order_and_empties_the_cart(client):
    add(client, qty=2)
    status, url, page = client.post("/checkout", **{**GOOD_CHECKOUT, "shipping": "express"})
    assert status == 200 and "/order/DS-" in url
    assert "Thank you for your order!" in page
    state = client.state()
    assert state["cart"] == []
    (order,) = state["orders"]
    assert url.endswith(order["number"]) and order["number"] in page
    assert order["items"][0]["variant"] == {"size": "44", "colour": "black"} and order["items"][0]["qty"] == 2
    assert order["shipping_name"] == "Alex Morgan" and order["shipping_method"] == "express"
    assert (order["subtotal"], order["shipping"], order["total"]) == (258.0, 12.0, 270.0)
    assert order["card_last4"] == "4242" and order["user"] is None


def test_standard_delivery_is_free_from_fifty(client):
    add(client, product="sun-visor", size="One size", colour="white")
    client.post("/checkout", **GOOD_CHECKOUT)
    add(client, product="crossbody-bag", size="One size", colour="red")
    client.post("/checkout", **GOOD_CHECKOUT)
    cheap, dear = client.state()["orders"]
    assert (cheap["shipping"], cheap["total"]) == (4.95, 18.95)
    assert (dear["shipping"], dear["total"]) == (0.0, 59.0)


def test_an_order_is_seen_only_by_its_session(new_client):
    alice, bob = new_client(), new_client()
    add(alice)
    _, url, _ = alice.post("/checkout", **GOOD_CHECKOUT)
    path = url.split("127.0.0.1", 1)[1].split("/", 1)[1]
    status, _, _ = bob.request("/" + path)
    assert status == 404


def test_login_with_good_and_bad_credentials(client):
    status, url, page = client.request("/account")
    assert url.endswith("/login?next=/account")
    status, _, page = client.post("/login", email="demo@shop.test", password="wrong", next="/account")
    assert status == 401 and "Incorrect email or password." in page
    assert client.state()["logged_in"] is None
    status, _, page = client.post("/login", email="nobody@shop.test", password="demo1234", next="/account")
    assert status == 401
    status, url, page = client.post("/login", email="Demo@Shop.test", password="demo1234", next="/account")
    assert status == 200 and url.endswith("/account")
    assert "Signed in as" in page and "DS-204817" in page and "DS-198342" in page
    assert client.state()["logged_in"] == "demo@shop.test"
    client.post("/logout")
    assert client.state()["logged_in"] is None


def test_login_never_redirects_off_site(client):
    _, url, _ = client.post("/login", email="demo@shop.test", password="demo1234", next="//evil.example/")
    assert url.endswith("/account")


def test_credentials_appear_on_no_page(client):
    for path in ("/", "/login", "/products", "/checkout", "/cart"):
        assert "demo1234" not in client.get(path)


def test_signed_in_checkout_is_prefilled_and_listed_in_the_account(client):
    client.post("/login", email="demo@shop.test", password="demo1234")
    add(client)
    page = client.get("/checkout")
    assert 'value="Dana Demo"' in page and 'value="1 Demo Way"' in page
    client.post("/checkout", **{**GOOD_CHECKOUT, "name": "Dana Demo"})
    order = client.state()["orders"][0]
    assert order["user"] == "demo@shop.test"
    account = client.get("/account")
    assert account.index(order["number"]) < account.index("DS-204817")


def test_cookie_consent_is_asked_until_answered(client):
    assert 'aria-label="Cookie consent"' in client.get("/")
    status, _, page = client.post("/consent", choice="rejected", next="/products")
    assert status == 200 and 'aria-label="Cookie consent"' not in page
    assert client.state()["consent"] == "rejected"
    status, _, body = client.request("/api/consent", json_body={"choice": "accepted"})
    assert status == 200 and json.loads(body) == {"ok": True, "consent": "accepted"}
    assert client.state()["consent"] == "accepted"
    status, _, _ = client.request("/api/consent", json_body={"choice": "maybe"})
    assert status == 400


def test_newsletter_popup_timing_and_subscription(shop, client):
    page = client.get("/")
    delay = int(page.split('data-newsletter-delay="', 1)[1].split('"', 1)[0])
    assert 1000 < delay <= 1500, "the pop-up opens about 1.5 s after the session's first page"
    status, _, body = client.request("/api/newsletter", json_body={"email": "not-an-email"})
    assert status == 400 and client.state()["newsletter"] is None
    status, _, body = client.request("/api/newsletter", json_body={"email": "jo@example.com"})
    assert status == 200 and json.loads(body)["code"] == "WELCOME10"
    state = client.state()
    assert state["newsletter"] == "jo@example.com" and state["newsletter_popup"] == "subscribed"
    assert 'id="newsletter"' not in client.get("/")


def test_dismissed_newsletter_popup_stays_away_and_the_footer_form_still_works(client):
    assert 'id="newsletter"' in client.get("/")
    client.request("/api/newsletter/dismiss", json_body={})
    assert client.state()["newsletter_popup"] == "dismissed"
    assert 'id="newsletter"' not in client.get("/")
    _, _, page = client.post("/newsletter", email="bad", next="/cart")
    assert "Please enter a valid email address" in page
    _, url, page = client.post("/newsletter", email="sam@example.org", next="/cart")
    assert url.endswith("/cart") and "sam@example.org is now subscribed" in page
    assert client.state()["newsletter"] == "sam@example.org"


def test_server_is_quiet(capfd, new_client):
    client = new_client()
    client.get("/")
    client.request("/no/such/page")
    client.post("/login", email="x", password="y")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_static_files_are_served(client):
    css = client.get("/static/shop.css")
    js = client.get("/static/shop.js")
    assert ".cookie-banner" in css and "/api/search" in js


def test_no_script_forms_send_the_browser_back_where_it_was(client):
    page = client.get("/products?category=hats")
    assert page.count('name="next" value="/products?category=hats"') == 2  # cookie banner and newsletter form
    _, url, _ = client.post("/consent", choice="accepted", next="/products?category=hats")
    assert url.endswith("/products?category=hats")


def test_a_long_running_shop_forgets_its_oldest_sessions():
    from owrl_demo.state import Sessions

    sessions = Sessions(limit=3)
    made = [sessions.create() for _ in range(5)]
    assert len(sessions) == 3
    assert sessions.get(made[0].id) is None and sessions.get(made[-1].id) is made[-1]
