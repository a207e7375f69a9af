"""The demo shop's HTML pages, rendered from the session state.

Semantic HTML with accessible names on every control, so that aria snapshots and role
selectors (``role=button[name="Add to cart"]``) find them. The look lives in shop.css,
the behaviour (delayed search, newsletter pop-up, cookie banner, form checks) in shop.js.
"""

from __future__ import annotations

from html import escape
from typing import Any, Iterable, Optional
from urllib.parse import urlencode

from .catalogue import (
    ACCOUNTS,
    BY_ID,
    CATEGORIES,
    FREE_SHIPPING_FROM,
    PRODUCTS,
    SHIPPING,
    SHIPPING_TIMES,
    Product,
    product,
)
from .state import Session

PER_PAGE = 8

SORTS = (
    ("featured", "Featured"),
    ("price_asc", "Price: low to high"),
    ("price_desc", "Price: high to low"),
    ("rating", "Customer rating"),
)

SWATCH = {
    "white": "#f4f4f2", "blue": "#3b6fb6", "beige": "#d8c8a8", "green": "#4f7d4f", "red": "#b8403a",
    "black": "#222", "grey": "#8a8d91", "navy": "#24345c", "brown": "#7a4e2d", "yellow": "#e8c23a",
    "gold": "#c9a54a",
}


def money(value: float) -> str:
    return f"${value:,.2f}"


def stars(rating: float) -> str:
    full = int(rating + 0.25)
    return "★" * full + "☆" * (5 - full)


def a(value: Any) -> str:
    return escape(str(value), quote=True)


# ---------------------------------------------------------------------------- layout


def layout(session: Session, title: str, body: str, path: str = "/", query: str = "",
           newsletter_delay_ms: Optional[int] = None) -> str:
    nav = "".join(f'<li><a href="/products?category={cid}">{label}</a></li>' for cid, label in CATEGORIES)
    account = ('<li><a href="/account">Account</a></li>' if session.user
               else '<li><a href="/login">Log in</a></li>')
    banner = cookie_banner(path) if session.consent is None else ""
    popup = newsletter_modal() if session.newsletter_popup == "pending" else ""
    delay_attr = f' data-newsletter-delay="{newsletter_delay_ms}"' if popup and newsletter_delay_ms is not None else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} · Demo Shop</title>
<link rel="stylesheet" href="/static/shop.css">
</head>
<body{delay_attr}>
<header class="site-header">
  <a class="brand" href="/">Demo Shop</a>
  <form class="search" role="search" action="/search" method="get">
    <label for="q" class="visually-hidden">Search products</label>
    <input type="search" id="q" name="q" value="{a(query)}" placeholder="Search shirts, shoes, bags…">
    <button type="submit">Search</button>
  </form>
  <nav aria-label="Main">
    <ul>
      <li><a href="/products">All products</a></li>
      {nav}
      <li><a href="/cart" id="cart-link">Cart ({session.items})</a></li>
      {account}
    </ul>
  </nav>
</header>
<main id="main">
{flash_html(session.pop_flash())}
{body}
</main>
<footer class="site-footer">
  <section aria-labelledby="footer-newsletter">
    <h2 id="footer-newsletter">Newsletter</h2>
    <form method="post" action="/newsletter" class="inline-form">
      <input type="hidden" name="next" value="{a(path)}">
      <label for="footer-email">Email for newsletter</label>
      <input type="email" id="footer-email" name="email" autocomplete="email">
      <button type="submit">Sign up</button>
    </form>
  </section>
  <p>Demo Shop is a practice site for web agents. Nothing here is really for sale.</p>
</footer>
{banner}
{popup}
<script src="/static/shop.js"></script>
</body>
</html>
"""


def cookie_banner(path: str) -> str:
    return f"""<div id="cookie-banner" class="cookie-banner" role="region" aria-label="Cookie consent">
  <p>We use cookies to keep your cart and to understand how the shop is used.
  You can accept all cookies or keep only the essential ones.</p>
  <form method="post" action="/consent">
    <input type="hidden" name="next" value="{a(path)}">
    <button type="submit" name="choice" value="accepted">Accept cookies</button>
    <button type="submit" name="choice" value="rejected" class="secondary">Reject cookies</button>
  </form>
</div>"""


def newsletter_modal() -> str:
    return """<div id="newsletter" class="modal-backdrop" hidden>
  <div class="modal" role="dialog" aria-modal="true" aria-labelledby="nl-title" aria-describedby="nl-text">
    <button type="button" class="modal-close" aria-label="Close" data-dismiss>×</button>
    <h2 id="nl-title">Get 10% off your first order</h2>
    <p id="nl-text">Join our newsletter for new arrivals, and get a welcome discount code.</p>
    <form id="nl-form" novalidate>
      <label for="nl-email">Email address</label>
      <input type="email" id="nl-email" name="email" autocomplete="email" aria-describedby="nl-error">
      <p id="nl-error" class="error" hidden></p>
      <div class="actions">
        <button type="submit">Subscribe</button>
        <button type="button" class="secondary" data-dismiss>No thanks</button>
      </div>
    </form>
    <div id="nl-done" hidden>
      <p role="status">Thanks for subscribing! Use code WELCOME10 at checkout.</p>
      <button type="button" data-close>Continue shopping</button>
    </div>
  </div>
</div>"""


def flash_html(flash: Optional[tuple[str, str]]) -> str:
    if not flash:
        return ""
    kind, text = flash
    role = "alert" if kind == "error" else "status"
    extra = ' <a href="/cart">View cart</a>' if kind == "added" else ""
    return f'<div class="flash {a(kind)}" role="{role}"><p>{escape(text)}{extra}</p></div>'


# ---------------------------------------------------------------------------- products


def thumb(p: Product, big: bool = False) -> str:
    colour = SWATCH.get(p.colours[0], "#999")
    initials = "".join(w[0] for w in p.name.split()[:2])
    cls = "thumb big" if big else "thumb"
    return f'<div class="{cls}" style="--swatch:{colour}" aria-hidden="true">{escape(initials)}</div>'


def rating_html(p: Product) -> str:
    return (f'<p class="rating"><span class="stars" aria-hidden="true">{stars(p.rating)}</span> '
            f'Rated {p.rating:.1f} out of 5 ({p.reviews} reviews)</p>')


def colours_text(p: Product) -> str:
    return ", ".join(c.capitalize() for c in p.colours)


def card(p: Product) -> str:
    return f"""<article class="card">
  {thumb(p)}
  <h2 class="card-title"><a href="/product/{p.id}">{escape(p.name)}</a></h2>
  <p class="price">{money(p.price)}</p>
  {rating_html(p)}
  <p class="colours">Colours: {escape(colours_text(p))}</p>
</article>"""


def product_json(p: Product) -> dict[str, Any]:
    """A product as the search API returns it (shop.js renders it like :func:`card`)."""
    return {
        "id": p.id, "name": p.name, "category": p.category, "price": p.price, "price_text": money(p.price),
        "rating": p.rating, "reviews": p.reviews, "stars": stars(p.rating), "colours": colours_text(p),
        "initials": "".join(w[0] for w in p.name.split()[:2]), "swatch": SWATCH.get(p.colours[0], "#999"),
        "url": f"/product/{p.id}",
    }


def home() -> str:
    top = sorted(PRODUCTS, key=lambda p: (-p.rating, -p.reviews))[:4]
    tiles = "".join(
        f'<li><a class="tile" href="/products?category={cid}">Browse {label.lower()}</a></li>'
        for cid, label in CATEGORIES
    )
    return f"""<section class="hero">
  <h1>Welcome to Demo Shop</h1>
  <p>Shirts, shoes, bags and hats for every day. Free standard delivery on orders of {money(FREE_SHIPPING_FROM)} or more.</p>
</section>
<section aria-labelledby="categories-title">
  <h2 id="categories-title">Shop by category</h2>
  <ul class="tiles">{tiles}</ul>
</section>
<section aria-labelledby="top-title">
  <h2 id="top-title">Top rated</h2>
  <div class="grid">{"".join(card(p) for p in top)}</div>
</section>"""


def sort_products(items: list[Product], sort: str) -> list[Product]:
    if sort == "price_asc":
        return sorted(items, key=lambda p: (p.price, p.name))
    if sort == "price_desc":
        return sorted(items, key=lambda p: (-p.price, p.name))
    if sort == "rating":
        return sorted(items, key=lambda p: (-p.rating, -p.reviews, p.name))
    return list(items)


def filter_products(category: str = "", colour: str = "") -> list[Product]:
    return [p for p in PRODUCTS
            if (not category or p.category == category) and (not colour or colour in p.colours)]


def listing(category: str, colour: str, sort: str, page: int) -> str:
    found = sort_products(filter_products(category, colour), sort)
    pages = max(1, -(-len(found) // PER_PAGE))
    page = min(max(1, page), pages)
    shown = found[(page - 1) * PER_PAGE: page * PER_PAGE]
    title = dict(CATEGORIES).get(category, "All products")

    def options(choices: Iterable[tuple[str, str]], chosen: str) -> str:
        return "".join(f'<option value="{a(v)}"{" selected" if v == chosen else ""}>{escape(t)}</option>'
                       for v, t in choices)

    colours = sorted({c for p in PRODUCTS for c in p.colours})
    filters = f"""<form class="filters" method="get" action="/products" aria-label="Filter and sort">
  <div><label for="f-category">Category</label>
  <select id="f-category" name="category" data-autosubmit>{options([("", "All categories")] + list(CATEGORIES), category)}</select></div>
  <div><label for="f-colour">Colour</label>
  <select id="f-colour" name="colour" data-autosubmit>{options([("", "Any colour")] + [(c, c.capitalize()) for c in colours], colour)}</select></div>
  <div><label for="f-sort">Sort by</label>
  <select id="f-sort" name="sort" data-autosubmit>{options(SORTS, sort)}</select></div>
  <button type="submit">Apply</button>
</form>"""
    if found:
        first = (page - 1) * PER_PAGE + 1
        count = f"Showing {first}–{first + len(shown) - 1} of {len(found)} products"
        grid = f'<div class="grid">{"".join(card(p) for p in shown)}</div>'
    else:
        count = "No products match these filters."
        grid = ""

    def link(n: int) -> str:
        params = {k: v for k, v in (("category", category), ("colour", colour), ("sort", sort if sort != "featured" else "")) if v}
        params["page"] = str(n)
        return "/products?" + urlencode(params)

    parts = []
    if page > 1:
        parts.append(f'<a href="{a(link(page - 1))}" rel="prev">Previous page</a>')
    for n in range(1, pages + 1):
        current = ' aria-current="page"' if n == page else ""
        parts.append(f'<a href="{a(link(n))}" aria-label="Page {n}"{current}>{n}</a>')
    if page < pages:
        parts.append(f'<a href="{a(link(page + 1))}" rel="next">Next page</a>')
    pager = (f'<nav class="pager" aria-label="Pagination">{" ".join(parts)}'
             f' <span class="page-of">Page {page} of {pages}</span></nav>')
    return f"""<h1>{escape(title)}</h1>
{filters}
<p id="result-count">{count}</p>
{grid}
{pager}"""


def product_page(p: Product, error: Optional[str] = None, chosen: Optional[dict[str, str]] = None,
                 add_label: str = "Add to cart") -> str:
    chosen = chosen or {}
    colour_pick = chosen.get("colour") or p.colours[0]
    radios = "".join(
        f'<label class="choice"><input type="radio" name="colour" value="{c}"'
        f'{" checked" if c == colour_pick else ""}> {c.capitalize()}</label>'
        for c in p.colours
    )
    if len(p.sizes) == 1:
        size_opts = f'<option value="{a(p.sizes[0])}" selected>{escape(p.sizes[0])}</option>'
    else:
        size_opts = '<option value="">Choose a size</option>' + "".join(
            f'<option value="{a(s)}"{" selected" if s == chosen.get("size") else ""}>{escape(s)}</option>'
            for s in p.sizes
        )
    error_html = f'<p class="error" role="alert" id="add-error">{escape(error)}</p>' if error else ""
    qty = a(chosen.get("qty") or "1")
    return f"""<article class="product" aria-labelledby="p-title">
  {thumb(p, big=True)}
  <div class="product-info">
    <h1 id="p-title">{escape(p.name)}</h1>
    <p class="price">{money(p.price)}</p>
    {rating_html(p)}
    <p>{escape(p.description)}</p>
    <p class="category">Category: {escape(p.category_label)}</p>
    <form class="add-form" method="post" action="/cart/add" novalidate>
      <input type="hidden" name="product" value="{p.id}">
      <fieldset>
        <legend>Colour</legend>
        {radios}
      </fieldset>
      <div class="field">
        <label for="size">Size</label>
        <select id="size" name="size">{size_opts}</select>
      </div>
      <div class="field">
        <label for="qty">Quantity</label>
        <input type="number" id="qty" name="qty" value="{qty}" min="1" max="10">
      </div>
      {error_html}
      <button type="submit" class="primary">{escape(add_label)}</button>
    </form>
  </div>
</article>"""


def search_page(query: str) -> str:
    if not query.strip():
        return '<h1>Search</h1>\n<p>Type what you are looking for in the search box above.</p>'
    return f"""<h1>Search results</h1>
<div id="search" data-query="{a(query)}">
  <p id="search-status" role="status" aria-live="polite">Searching for “{escape(query)}”…</p>
  <div id="search-results" class="grid"></div>
</div>"""


# ---------------------------------------------------------------------------- cart and checkout


def totals_html(totals: dict[str, float], coupon: Optional[str]) -> str:
    rows = [f"<dt>Subtotal</dt><dd>{money(totals['subtotal'])}</dd>"]
    if coupon:
        rows.append(f"<dt>Discount ({escape(coupon)})</dt><dd>−{money(totals['discount'])}</dd>")
    if "shipping" in totals:
        shipping = "Free" if totals["shipping"] == 0 else money(totals["shipping"])
        rows.append(f"<dt>Shipping</dt><dd>{shipping}</dd>")
    rows.append(f'<dt>Total</dt><dd class="total">{money(totals["total"])}</dd>')
    return f'<dl class="summary">{"".join(rows)}</dl>'


def cart_page(session: Session, coupon_error: Optional[str] = None) -> str:
    if not session.cart:
        return """<h1>Your cart</h1>
<p>Your cart is empty.</p>
<p><a href="/products">Continue shopping</a></p>"""
    rows = []
    for ln in session.cart:
        rows.append(f"""<tr>
  <td><a href="/product/{ln.product.id}">{escape(ln.product.name)}</a>
    <div class="variant">Size: {escape(ln.size)} · Colour: {escape(ln.colour.capitalize())}</div></td>
  <td>{money(ln.product.price)}</td>
  <td><form method="post" action="/cart/update" class="qty-form">
    <input type="hidden" name="line" value="{ln.id}">
    <label class="visually-hidden" for="qty-{ln.id}">Quantity of {escape(ln.label)}</label>
    <input type="number" id="qty-{ln.id}" name="qty" value="{ln.qty}" min="0" max="10">
    <button type="submit" class="secondary" aria-label="Update quantity of {a(ln.label)}">Update</button>
  </form></td>
  <td>{money(ln.total)}</td>
  <td><form method="post" action="/cart/remove">
    <input type="hidden" name="line" value="{ln.id}">
    <button type="submit" class="link" aria-label="Remove {a(ln.label)}">Remove</button>
  </form></td>
</tr>""")
    coupon_html = (f'<p class="applied">Discount code {escape(session.coupon)} applied: 10% off.</p>' if session.coupon
                   else "")
    error = f'<p class="error" role="alert" id="coupon-error">{escape(coupon_error)}</p>' if coupon_error else ""
    return f"""<h1>Your cart</h1>
<table class="cart">
  <caption class="visually-hidden">Items in your cart</caption>
  <thead><tr><th scope="col">Product</th><th scope="col">Price</th><th scope="col">Quantity</th>
  <th scope="col">Line total</th><th scope="col"><span class="visually-hidden">Remove</span></th></tr></thead>
  <tbody>{"".join(rows)}</tbody>
</table>
<div class="cart-bottom">
  <form method="post" action="/cart/coupon" class="inline-form coupon" novalidate>
    <label for="coupon">Discount code</label>
    <input type="text" id="coupon" name="code" autocomplete="off" aria-describedby="coupon-error">
    <button type="submit" class="secondary">Apply code</button>
    {error}
  </form>
  {coupon_html}
  {totals_html(session.totals(), session.coupon)}
  <p class="note">Shipping is calculated at checkout. Standard delivery is free on orders of {money(FREE_SHIPPING_FROM)} or more.</p>
  <p><a class="button primary" href="/checkout">Proceed to checkout</a></p>
</div>"""


CHECKOUT_LABELS = {
    "name": ("Full name", "text", "name"),
    "email": ("Email", "email", "email"),
    "address": ("Street address", "text", "street-address"),
    "city": ("City", "text", "address-level2"),
    "postcode": ("Postal code", "text", "postal-code"),
    "card": ("Card number", "text", "cc-number"),
    "expiry": ("Expiry date (MM/YY)", "text", "cc-exp"),
    "cvc": ("Security code (CVC)", "text", "cc-csc"),
}


def _field(key: str, values: dict[str, str], errors: dict[str, str]) -> str:
    label, kind, auto = CHECKOUT_LABELS[key]
    err = errors.get(key)
    described = f' aria-invalid="true" aria-describedby="err-{key}"' if err else ""
    numeric = ' inputmode="numeric"' if key in ("card", "cvc") else ""
    return f"""<div class="field">
  <label for="f-{key}">{escape(label)}</label>
  <input type="{kind}" id="f-{key}" name="{key}" value="{a(values.get(key, ''))}" autocomplete="{auto}"{numeric}{described}>
  <p class="error" id="err-{key}"{"" if err else " hidden"}>{escape(err or "")}</p>
</div>"""


def checkout_page(session: Session, values: Optional[dict[str, str]] = None,
                  errors: Optional[dict[str, str]] = None) -> str:
    if not session.cart:
        return '<h1>Checkout</h1>\n<p>Your cart is empty.</p>\n<p><a href="/products">Continue shopping</a></p>'
    errors = errors or {}
    if values is None:
        values = {}
        account = ACCOUNTS.get(session.user or "")
        if account is not None:  # a signed-in customer finds the address book filled in
            values = {"name": account.name, "email": account.email, "address": account.address,
                      "city": account.city, "postcode": account.postcode}
    method = values.get("shipping", "standard")
    summary = (f'<div class="alert" role="alert" id="checkout-errors"><p>Please correct the {len(errors)} '
               f'highlighted field{"s" if len(errors) != 1 else ""}.</p></div>' if errors else "")
    goods = session.totals()["total"]
    costs = {"standard": f"{money(SHIPPING['standard'])}, free on orders of {money(FREE_SHIPPING_FROM)} or more"
                         + (" (free for this order)" if goods >= FREE_SHIPPING_FROM else ""),
             "express": money(SHIPPING["express"])}
    radios = "".join(
        f'<div class="choice-row"><label class="choice"><input type="radio" name="shipping" value="{m}"'
        f'{" checked" if m == method else ""} aria-describedby="ship-{m}"> {m.capitalize()} delivery</label>'
        f' <span class="hint" id="ship-{m}">{SHIPPING_TIMES[m]}: {costs[m]}</span></div>'
        for m in ("standard", "express")
    )
    lines = "".join(f"<li>{escape(ln.label)} × {ln.qty}: {money(ln.total)}</li>" for ln in session.cart)
    return f"""<h1>Checkout</h1>
{summary}
<div class="checkout">
<form method="post" action="/checkout" id="checkout-form" novalidate>
  <fieldset>
    <legend>Contact and address</legend>
    {"".join(_field(k, values, errors) for k in ("name", "email", "address", "city", "postcode"))}
  </fieldset>
  <fieldset>
    <legend>Delivery</legend>
    {radios}
  </fieldset>
  <fieldset>
    <legend>Payment</legend>
    {"".join(_field(k, values, errors) for k in ("card", "expiry", "cvc"))}
  </fieldset>
  <button type="submit" class="primary">Place order</button>
</form>
<aside class="order-summary" aria-labelledby="summary-title">
  <h2 id="summary-title">Order summary</h2>
  <ul>{lines}</ul>
  {totals_html(session.totals(), session.coupon)}
</aside>
</div>"""


def order_items_html(items: list[dict[str, Any]]) -> str:
    rows = []
    for it in items:
        p = product(it["product"])
        name = p.name if p else it["product"]
        price = p.price * it["qty"] if p else 0.0
        v = it["variant"]
        rows.append(f"<li>{escape(name)} ({escape(v['size'])}, {escape(v['colour'].capitalize())}) "
                    f"× {it['qty']}: {money(price)}</li>")
    return f'<ul class="order-items">{"".join(rows)}</ul>'


def confirmation_page(order: dict[str, Any]) -> str:
    method = "express" if order["shipping_method"] == "express" else "standard"
    return f"""<h1>Thank you for your order!</h1>
<p class="order-number">Your order number is <strong id="order-number">{escape(order['number'])}</strong>.</p>
<p>We sent a confirmation to {escape(order['email'])}. It will be sent by {method} delivery to
{escape(order['shipping_name'])}, {escape(order['address'])}, {escape(order['city'])} {escape(order['postcode'])}.</p>
<h2>Items</h2>
{order_items_html(order['items'])}
{totals_html(order, order.get('coupon'))}
<p>Paid with the card ending in {escape(order['card_last4'])}.</p>
<p><a href="/products">Continue shopping</a></p>"""


# ---------------------------------------------------------------------------- account


def login_page(error: Optional[str] = None, email: str = "", next_path: str = "/account") -> str:
    error_html = f'<div class="alert" role="alert"><p>{escape(error)}</p></div>' if error else ""
    return f"""<h1>Log in</h1>
{error_html}
<form method="post" action="/login" class="narrow" novalidate>
  <input type="hidden" name="next" value="{a(next_path)}">
  <div class="field">
    <label for="login-email">Email</label>
    <input type="email" id="login-email" name="email" value="{a(email)}" autocomplete="username">
  </div>
  <div class="field">
    <label for="login-password">Password</label>
    <input type="password" id="login-password" name="password" autocomplete="current-password">
  </div>
  <button type="submit" class="primary">Log in</button>
</form>
<p class="note">New customers can check out as guests; accounts are opened in store.</p>"""


def account_page(session: Session) -> str:
    account = ACCOUNTS[session.user or ""]
    rows = []
    mine = [o for o in session.orders if o.get("user") == account.email]
    for o in list(reversed(mine)) + list(account.past_orders):
        items = []
        total = 0.0
        for it in o["items"]:
            p = BY_ID[it["product"]]  # an order holds only the catalogue's products
            v = it["variant"]
            items.append(f"{p.name} ({v['size']}, {v['colour'].capitalize()}) × {it['qty']}")
            total += p.price * it["qty"]
        total = o.get("total", total)
        rows.append(f"<tr><th scope=\"row\">{escape(o['number'])}</th><td>{escape(o['date'])}</td>"
                    f"<td>{escape('; '.join(items))}</td><td>{money(total)}</td><td>{escape(o['status'])}</td></tr>")
    return f"""<h1>Your account</h1>
<p>Signed in as <strong>{escape(account.email)}</strong> ({escape(account.name)}).</p>
<form method="post" action="/logout"><button type="submit" class="secondary">Log out</button></form>
<h2>Order history</h2>
<table class="orders">
  <thead><tr><th scope="col">Order</th><th scope="col">Date</th><th scope="col">Items</th>
  <th scope="col">Total</th><th scope="col">Status</th></tr></thead>
  <tbody>{"".join(rows)}</tbody>
</table>
<h2>Saved address</h2>
<p>{escape(account.name)}, {escape(account.address)}, {escape(account.city)} {escape(account.postcode)}</p>"""


def not_found_page() -> str:
    return '<h1>Page not found</h1>\n<p>We could not find that page.</p>\n<p><a href="/">Go to the home page</a></p>'
