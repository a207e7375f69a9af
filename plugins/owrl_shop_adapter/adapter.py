"""The site adapter itself: every lifecycle hook a site adapter can take part in.

One :class:`DemoShopAdapter` is registered per catalogue and serves every episode on the
shop, concurrent ones included: what belongs to one episode (the shop's address, whether
the log-in worked, the cart count last seen) is kept per environment in ``_episodes``.
"""

from __future__ import annotations

import logging
import re
import weakref
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlencode, urlsplit

from owrl_sdk.api import Failure, secrets, SiteAdapter, ToolResult

from .cart import AddToCart
from .options import NAME, ShopOptions, load_options, origin

log = logging.getLogger("owrl_shop_adapter")

SCHEME = "demo:shop"
NEWSLETTER = "Get 10% off your first order"
VETO_PREFIX = f"{NAME}: "
API_VETO = (VETO_PREFIX + "the shop's /api/ addresses serve its own scripts, not visitors; use its pages "
            "(the cart page shows the cart, the account page your orders)")


class ShopLoginFailed(Exception):
    """The shop did not accept the log-in at episode start (the message names no secret value)."""


async def _fill_held(field: Any, value: str, tries: int = 3) -> None:
    """``field`` filled with ``value``, checked afterwards: a fill types into whatever holds
    the focus when its text arrives, and the newsletter pop-up takes the focus when it opens
    (after a delay, so on a slow machine in the middle of a fill)."""
    for _ in range(tries):
        await field.fill(value)
        if await field.input_value() == value:
            return
    raise ShopLoginFailed("the log-in form did not keep what was typed into it")


@dataclass
class ShopEpisode:
    """What the adapter knows about one episode."""

    base_url: str
    options: ShopOptions
    signed_in: bool = False
    consent: Optional[str] = None  # "rejected" / "accepted" once the adapter answered the banner
    cart_items: Optional[int] = None


def _is_browser(env: Any) -> bool:
    return getattr(env, "context", None) is not None and hasattr(env, "page")


async def answer_banner(page: Any, choice: str) -> Optional[str]:
    """Answer the cookie banner if it is there; ``"rejected"``/``"accepted"``, or None."""
    banner = page.get_by_role("region", name="Cookie consent")
    if not await banner.count():
        return None
    label = "Reject cookies" if choice == "reject" else "Accept cookies"
    # the keyboard, not the pointer: the newsletter pop-up may open over the banner at any moment
    await banner.get_by_role("button", name=label, exact=True).press("Enter")
    await banner.wait_for(state="detached", timeout=5000)
    return "rejected" if choice == "reject" else "accepted"


async def cart_count(env: Any, state: ShopEpisode) -> Optional[int]:
    """The item count the shop's header shows, read without waiting; None off the shop."""
    try:
        page = env.page
        if getattr(env, "dialog", None) is not None or origin(page.url) != state.base_url:
            return None
        text = " ".join(await page.locator("#cart-link").all_text_contents())
    except Exception:  # noqa: BLE001 - a page mid-navigation: no count this time
        return None
    found = re.search(r"\((\d+)\)", text)
    return int(found.group(1)) if found else None


def hints_for(path: str, state: ShopEpisode) -> str:
    lines = []
    if state.signed_in:
        lines.append("You are logged in to the Demo Shop already; Account shows your orders and saved address.")
    if state.consent:
        lines.append("The cookie banner is answered.")
    lines.append('add_to_cart(product, variant, qty) puts a product in the cart in one call, e.g. '
                 'add_to_cart(product="Felt Fedora", variant="brown, M", qty=1).')
    if path.startswith("/product/"):
        lines.append("Choose a colour and a size before Add to cart; the quantity field takes 1 to 10.")
    elif path == "/cart":
        lines.append("Discount codes go in the Discount code field; Proceed to checkout starts the order.")
    elif path == "/checkout":
        lines.append("The card needs its number, expiry MM/YY and 3-digit security code."
                     + (" Your saved address is filled in." if state.signed_in else ""))
    elif path == "/search":
        lines.append("Search results arrive after a moment: wait until the page says how many were found.")
    elif path == "/products":
        lines.append("Sort by and the colour filter apply as soon as they change; a page lists 8 products.")
    return " ".join(lines)


class DemoShopAdapter(SiteAdapter):
    """The embedded demo shop: log-in, cookie banner, pop-ups, hints, ``add_to_cart``."""

    name = NAME
    Options = ShopOptions
    domains = ()  # the shop is matched by its scheme and base_url, not by a host name: see matches()
    scheme = SCHEME  # a shop served in this process is asked about as demo:shop/PATH (site_origins)

    def __init__(self, load: Any = load_options):
        self.load_options = load  # settings -> ShopOptions
        self._episodes: "weakref.WeakKeyDictionary[Any, ShopEpisode]" = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ scope

    def shop_origins(self, opts: ShopOptions) -> set[str]:
        return {origin(opts.base_url)} if opts.base_url else set()

    def matches(self, url: str, settings: Any = None) -> bool:
        """Only when enabled, and only the shop: ``demo:shop`` (a shop this process serves is
        asked about in that form: ``scheme`` and the ``site_origins`` hook) or ``base_url``.
        Matching 127.0.0.1 would capture every local page. ``settings``: the run's (owrl hands
        them; without them the adapter takes part in nothing)."""
        if settings is None:
            return False
        opts = self.load_options(settings)
        if not opts.enabled:
            return False
        if url == SCHEME or url.startswith(SCHEME + "/"):
            return True
        return bool(origin(url)) and origin(url) in self.shop_origins(opts)

    def base_url(self, env: Any) -> str:
        state = self._episodes.get(env)
        return state.base_url if state is not None else origin(env.page.url)

    def tools(self) -> list[Any]:
        return [AddToCart(self)]

    # ------------------------------------------------------------------ lifecycle

    async def episode_start(self, env: Any, task: Any) -> None:
        """Answer the cookie banner, log in with the secrets, note the cart."""
        if not _is_browser(env):
            return
        opts = self.load_options(env.settings)
        page = env.page
        origins = self.shop_origins(opts)
        candidates = [origin(page.url), origin(task.start_url)]
        base = next((o for o in candidates if o in origins), candidates[0] or candidates[1])
        state = ShopEpisode(base_url=base, options=opts)
        self._episodes[env] = state
        if opts.banner_at_start:
            state.consent = await answer_banner(page, opts.consent)
        if opts.login:
            await self._log_in(env, state)
        state.cart_items = await cart_count(env, state)
        log.info("%s", secrets.redact(f"demo shop episode at {base}: logged in {state.signed_in}, "
                                      f"cookies {state.consent or 'not answered'}"))

    async def _log_in(self, env: Any, state: ShopEpisode) -> None:
        """The shop's own log-in form; the values exist only here, on their way to the fields."""
        opts, page = state.options, env.page
        lookup = getattr(env, "secret_lookup", None)
        user = secrets.resolve(opts.user, lookup)  # both are now redacted from all owrl records
        password = secrets.resolve(opts.password, lookup)
        here = urlsplit(page.url)
        back = (here.path or "/") + (f"?{here.query}" if here.query else "") if origin(page.url) == state.base_url else "/"
        await page.goto(f"{state.base_url}/login?{urlencode({'next': back})}", wait_until="load")
        form = page.locator("form[action='/login']")
        if not await form.count():
            raise ShopLoginFailed(f"{state.base_url}/login shows no log-in form")
        await _fill_held(form.get_by_label("Email", exact=True), user)
        await _fill_held(form.get_by_label("Password", exact=True), password)
        del password
        # the form submitted itself, not an Enter key: the newsletter pop-up, which takes the
        # focus when it opens, could take the key press too
        async with page.expect_navigation(wait_until="load"):
            await form.evaluate("f => f.requestSubmit()")
        if urlsplit(page.url).path == "/login" or not await page.get_by_role("link", name="Account", exact=True).count():
            said = " ".join(t.strip() for t in await page.get_by_role("alert").all_text_contents()).strip()
            raise ShopLoginFailed(secrets.redact(f"the shop refused the log-in of {opts.user}: {said or 'no reason shown'}"))
        state.signed_in = True

    def observation(self, observation: Any, env: Any, task: Any) -> Optional[dict[str, Any]]:
        """Hints the policy reads next to the page (the openwebrl prompt shows ``hints``)."""
        state = self._episodes.get(env)
        if state is None or origin(observation.url) != state.base_url:
            return None
        return {"hints": hints_for(urlsplit(observation.url).path, state),
                "shop": {"signed_in": state.signed_in, "consent": state.consent}}

    def before_tool_call(self, call: Any, env: Any, task: Any) -> Optional[ToolResult]:
        """Refuse opening the shop's JSON API: the agent works through the pages."""
        url = call.arguments.get("url") if call.name in ("goto_url", "new_tab") else None
        state = self._episodes.get(env)
        if (isinstance(url, str) and state is not None and origin(url) == state.base_url
                and urlsplit(url).path.startswith("/api/")):
            return ToolResult.failure(API_VETO)
        return None

    async def dismiss_overlays(self, env: Any, task: Any) -> Optional[str]:
        """A call's target was covered: close the newsletter pop-up, answer the cookie banner."""
        if not _is_browser(env):
            return None
        state = self._episodes.get(env)
        page, said = env.page, []
        try:
            dialog = page.get_by_role("dialog", name=NEWSLETTER)
            if await dialog.count():
                for label in ("No thanks", "Continue shopping", "Close"):
                    button = dialog.get_by_role("button", name=label, exact=True)
                    if await button.count() and await button.is_visible():
                        await button.click()
                        break
                else:
                    await page.keyboard.press("Escape")
                await dialog.wait_for(state="hidden", timeout=2000)
                said.append("newsletter pop-up")
            answered = await answer_banner(page, state.options.consent if state else "reject")
            if answered:
                said.append(f"cookie banner, cookies {answered}")
                if state is not None:
                    state.consent = answered
        except Exception as err:  # noqa: BLE001 - an overlay that would not go stays; the call's error stands
            log.info("could not dismiss an overlay: %s", secrets.redact(str(err).splitlines()[0] if str(err) else ""))
        return ", ".join(said) or None

    async def after_tool_call(self, call: Any, result: ToolResult, env: Any, task: Any) -> None:
        """Tell the policy when the cart count changed (whichever call changed it)."""
        state = self._episodes.get(env)
        if state is None or result.ends_episode:
            return
        count = await cart_count(env, state)
        if count is None:
            return
        if state.cart_items is not None and count != state.cart_items:
            note = f"the cart now holds {count} item{'s' if count != 1 else ''} (was {state.cart_items})"
            result.feedback = f"{result.feedback}; {note}" if result.feedback else note
        state.cart_items = count

    def step_end(self, step: Any, task: Any) -> None:
        """One log line per step on the ``owrl_shop_adapter`` logger (secrets redacted)."""
        calls = "; ".join(
            f"{r.call.name} " + ("skipped" if r.skipped else "ok" if r.result is not None and r.result.ok else "failed")
            for r in step.calls) or "no call"
        log.info("%s", secrets.redact(f"demo shop step {step.index} at {step.observation.url}: {calls}"))

    def classify_failure(self, error: BaseException, stage: str, task: Any) -> Optional[Failure]:
        """The adapter's own failures: a refused log-in, a log-in secret that is not set."""
        if isinstance(error, ShopLoginFailed):
            return Failure(category="infra", code="shop_login_failed", detail=str(error)[:1000])
        if isinstance(error, secrets.SecretMissing) and stage == "hook":
            return Failure(category="infra", code="missing_secret", detail=f"demo shop log-in: {error}"[:1000])
        return None

    def episode_end(self, trajectory: Any) -> None:
        """A summary of what the adapter did, in the trajectory's metadata."""
        shop: dict[str, Any] = next((s.observation.extras["shop"] for s in reversed(trajectory.steps)
                                     if "shop" in s.observation.extras), {})
        records = [r for s in trajectory.steps for r in s.calls if r.result is not None]
        carts = [r for r in records if r.call.name == "add_to_cart"]
        trajectory.metadata["demo_shop_adapter"] = {
            "signed_in": bool(shop.get("signed_in")),
            "consent": shop.get("consent"),
            "add_to_cart": {"ok": sum(r.result.ok for r in carts), "failed": sum(not r.result.ok for r in carts)},
            "vetoed": sum((r.result.error or "").startswith(VETO_PREFIX) for r in records),
            "overlays_dismissed": sum("was dismissed" in f"{r.result.feedback} {r.result.error or ''}" for r in records),
        }
