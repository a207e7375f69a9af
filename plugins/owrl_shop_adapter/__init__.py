"""A site adapter for owrl's embedded demo shop, written as a third party would write one.

It is installed through the ``owrl`` entry-point group (``demo-shop-adapter =
"owrl_shop_adapter"``) and shows every hook a site adapter can use:

========================== ========================================================================
hook                       what the adapter does
========================== ========================================================================
register_site_adapters     registers :class:`DemoShopAdapter` (module hook, once per catalogue)
browser_launch_options     pins the language the browser asks sites for (``--accept-lang``)
resolve_url                ``demo:shop/PATH`` on the shop at ``base_url``, when one is configured
resolve_secret             answers ``{{secret:NAME}}`` from ``secrets_file``, when one is configured
episode_start              answers the cookie banner, logs in with ``{{secret:SHOP_USER}}`` and
                           ``{{secret:SHOP_PASSWORD}}``, notes the cart
observation                ``hints`` for the policy (the openwebrl prompt prints them) and ``shop``
before_tool_call           refuses ``goto_url``/``new_tab`` to the shop's ``/api/`` addresses
dismiss_overlays           closes the newsletter pop-up and answers the cookie banner when either
                           covers a call's target (the call is then retried once)
after_tool_call            adds "the cart now holds N items (was M)" to the feedback
step_end                   one log line per step on the ``owrl_shop_adapter`` logger
classify_failure           ``infra.shop_login_failed`` and ``infra.missing_secret``
episode_end                a summary in ``trajectory.metadata["demo_shop_adapter"]``
tools()                    ``add_to_cart(product, variant, qty)``, offered in the shop's episodes only
========================== ========================================================================

The first four are module-level hook implementations: owrl calls them whatever the
episode, so they act only when the adapter is enabled (and, for ``resolve_url`` and
``resolve_secret``, configured). The others are methods of the adapter, which owrl calls
only in episodes the adapter matches.

Scope. The shop runs on 127.0.0.1 on a random port, so a host name cannot tell it from any
other local page. :meth:`DemoShopAdapter.matches` takes part only when the start URL is
``demo:shop``, is on a demo shop this process serves (the adapter names the scheme, and
owrl asks the ``site_origins`` hook, which ``owrl_demo`` answers with the one ``demo:shop``
resolves to and each ``demo-shop`` suite's own), or is on ``base_url``.

Opt-in. Enabled, the adapter changes where the shop's episodes start (logged in, banner
answered), which the demo-shop suite's oracle flows do not expect; so it is off until
``enabled = true``::

    [plugins.demo-shop-adapter]
    enabled = true                         # or OWRL_DEMO_SHOP_ADAPTER_ENABLED=1
    login = true                           # log in at episode start
    user = "{{secret:SHOP_USER}}"          # the value from OWRL_SECRET_SHOP_USER (or a store)
    password = "{{secret:SHOP_PASSWORD}}"  # must be a placeholder
    consent = "reject"                     # or "accept": the banner's answer
    banner_at_start = true                 # false: only when the banner covers a target
    accept_language = "en-US,en"           # empty: leave the browser's own
    base_url = ""                          # a shop served elsewhere, e.g. http://127.0.0.1:8000
    secrets_file = ""                      # NAME=value lines for resolve_secret

Every key can also come from ``OWRL_DEMO_SHOP_ADAPTER_<KEY>``. owrl loads them with every
other setting (owrl.toml in the user config folder, then the working directory, then the
environment) and hands them to the adapter and its hooks; an ``Agent(settings=...)`` or
``owrl serve`` hands its own. The adapter reads no file and no variable itself.

Secrets. The log-in resolves its placeholders with :func:`owrl_sdk.safety.secrets.resolve` and the
episode's ``secret_lookup`` (the ``resolve_secret`` hooks, then ``OWRL_SECRET_<NAME>``), as the
``write`` tool does; from then on owrl redacts both values from observations, feedback and
every trajectory file, and the adapter redacts its own log lines and errors. A Playwright
trace (``--trace``) records what the browser sent, the log-in included.
"""

from __future__ import annotations

from typing import Any, Optional

from owrl_sdk import hookimpl
from owrl_sdk.api import Register

from .adapter import API_VETO, DemoShopAdapter, ShopEpisode, ShopLoginFailed, hints_for
from .cart import AddToCart, pick_variant
from .options import NAME, ShopOptions, load_options, read_secrets_file

__all__ = ["API_VETO", "AddToCart", "DemoShopAdapter", "NAME", "ShopEpisode", "ShopLoginFailed", "ShopOptions",
           "hints_for", "load_options", "pick_variant"]


@hookimpl
def register_site_adapters(register: Register) -> None:
    register(DemoShopAdapter())


@hookimpl
def browser_launch_options(options: dict[str, Any], settings: Any) -> Optional[dict[str, Any]]:
    """The adapter's selectors and hints are the English shop's: ask sites for English.

    (Headless Chromium ignores ``--lang``; ``--accept-lang`` sets ``navigator.languages``
    and the Accept-Language header.) It applies to the whole browser, every episode."""
    opts = load_options(settings)
    if not opts.enabled or not opts.accept_language:
        return None
    return {"args": [f"--accept-lang={opts.accept_language}"]}


@hookimpl(tryfirst=True)  # ahead of owrl_demo, which would start a shop of its own
def resolve_url(url: str, settings: Any) -> Optional[str]:
    """``demo:shop[/PATH]`` on the configured ``base_url`` (a shop served elsewhere)."""
    if url != "demo:shop" and not url.startswith("demo:shop/"):
        return None
    opts = load_options(settings)
    if not opts.enabled or not opts.base_url:
        return None
    return opts.base_url.rstrip("/") + "/" + url[len("demo:shop/"):]


@hookimpl
def resolve_secret(name: str, settings: Any) -> Optional[str]:
    """A secret store: ``NAME=value`` lines of ``secrets_file``; None lets the next source answer."""
    opts = load_options(settings)
    if not opts.enabled or not opts.secrets_file:
        return None
    return read_secrets_file(opts.secrets_file).get(name)
