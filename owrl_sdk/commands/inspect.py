"""``owrl inspect URL``: what a policy sees of a page, and a working selector for each control.

The page opens in a real Chromium through owrl's own :class:`~owrl_sdk.browser.BrowserHost`
and :class:`~owrl_sdk.browser.env.BrowserEnv`, so addresses resolve as in ``owrl run``
(``demo:shop/...`` included). The command prints the page's accessibility snapshot (the
one policies get) and a table of its interactive elements, each with a selector that a
flow call's ``selector`` argument takes.

A selector is only printed after it was tried on the live page: ``role=ROLE[name="NAME"]``
when that finds exactly this element; with ``>> nth=N`` appended when the name is empty or
shared; behind ``FRAME >>> `` for an element inside an iframe. When no selector finds it,
the ref is what is left (valid for the snapshot it came from).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import click

from owrl_sdk.browser.selectors import iframe_selector, position, role_selector
from owrl_sdk.cli import check_storage, storage_options
from owrl_sdk.contract.hookspecs import Register
from owrl_sdk.contract.plugins import hookimpl
from owrl_sdk.rules.urls import plugin_scheme

#: Roles a user acts on; the table lists the snapshot's elements with these roles.
INTERACTIVE_ROLES = frozenset({
    "link", "button", "textbox", "searchbox", "checkbox", "radio", "switch", "combobox", "listbox",
    "option", "tab", "menuitem", "menuitemcheckbox", "menuitemradio", "slider", "spinbutton", "treeitem",
})

#: Roles whose ref-less ``option`` children are the choices of a native <select>.
_CHOOSERS = ("combobox", "listbox")

_LINE = re.compile(r'^(?P<indent>\s*)- (?P<role>[a-z]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<rest>.*)$')
_REF = re.compile(r"\[ref=([A-Za-z0-9]+)\]")

#: JavaScript: where ``target`` is among the elements a locator matched, and how many there are.


@dataclass
class Element:
    """One interactive element of a snapshot and how to target it."""

    role: str
    name: str
    ref: Optional[str]
    selector: Optional[str] = None
    note: str = ""
    options: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "name": self.name, "selector": self.selector, "ref": self.ref,
                                "note": self.note or None}
        if self.options:
            data["options"] = list(self.options)
        return data


def _unquote(raw: str) -> str:
    try:
        text: str = json.loads(f'"{raw}"')  # a JSON string literal: always a str
        return text
    except ValueError:
        return raw.replace('\\"', '"').replace("\\\\", "\\")


def parse_snapshot(text: str) -> list[Element]:
    """The interactive elements of an aria snapshot (``mode="ai"``), in page order.

    Options without a ref (a native <select>'s) are not elements of their own: they become
    the ``options`` of the combobox or listbox above them."""
    found: list[Element] = []
    choosers: list[tuple[int, Element]] = []  # (indent, element) of open comboboxes/listboxes
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        indent, role = len(m.group("indent")), m.group("role")
        name = _unquote(m.group("name") or "")
        ref = _REF.search(m.group("rest"))
        while choosers and choosers[-1][0] >= indent:
            choosers.pop()
        if role == "option" and ref is None:
            if choosers:
                choosers[-1][1].options.append(name)
            continue
        if role not in INTERACTIVE_ROLES or ref is None:
            continue
        element = Element(role=role, name=name, ref=ref.group(1))
        found.append(element)
        if role in _CHOOSERS:
            choosers.append((indent, element))
    return found


async def _frame_path(page: Any, handle: Any) -> tuple[Any, Optional[str]]:
    """The frame holding ``handle`` and the ``>>>`` prefix that reaches it ('' on the page itself);
    None as prefix when an iframe on the way cannot be told apart from its siblings."""
    frame = await handle.owner_frame()
    if frame is None:
        return page, None
    steps: list[str] = []
    here = frame
    while here.parent_frame is not None:
        iframe = await here.frame_element()
        step = await iframe_selector(here.parent_frame, iframe)
        if step is None:
            return frame, None
        steps.append(step)
        here = here.parent_frame
    return frame, "".join(f"{s} >>> " for s in reversed(steps))


async def choose_selector(page: Any, element: Element) -> None:
    """Fill in ``element.selector`` (and ``note``) with a selector tried on ``page``."""
    try:
        handle = await page.locator(f"aria-ref={element.ref}").element_handle(timeout=2000)
    except Exception:  # noqa: BLE001 - the element went away since the snapshot
        handle = None
    if handle is None:
        element.note = "gone from the page since the snapshot; use the ref"
        return
    try:
        scope, prefix = await _frame_path(page, handle)
        if prefix is None:
            element.note = "inside an iframe that no selector tells apart; use the ref"
            return
        named = [role_selector(element.role, element.name), role_selector(element.role, element.name, exact=True)]
        shared: Optional[tuple[str, int, int]] = None
        for candidate in (named if element.name else []):
            index, count = await position(scope, candidate, handle)
            if index == 0 and count == 1:
                element.selector = prefix + candidate
                return
            if index >= 0 and shared is None:
                shared = (candidate, index, count)
        if shared is None:
            index, count = await position(scope, role_selector(element.role), handle)
            if index >= 0:
                shared = (role_selector(element.role), index, count)
        if shared is None:
            element.note = "no role selector finds it; use the ref"
            return
        candidate, index, count = shared
        element.selector = f"{prefix}{candidate} >> nth={index}" if count > 1 else prefix + candidate
        if not element.name:
            element.note = "no accessible name" + (f": nth={index} by page order" if count > 1 else "")
        elif candidate == role_selector(element.role):
            element.note = "its name on the page differs from the snapshot's; picked by page order"
        else:
            element.note = f"name shared by {count} {element.role}s: nth={index} by page order"
    finally:
        await handle.dispose()


def _check_url(given: str, url: str, settings: Any, plugin_url: bool = False) -> None:
    """A one-line UsageError for an address that cannot be opened, before a browser starts.
    ``plugin_url``: ``given`` is in a plugin's own scheme (``url`` is what its hook made of it)."""
    from urllib.parse import urlsplit

    from owrl_sdk.safety.domains import DomainPolicy
    from owrl_sdk.errors import UsageError

    if "://" not in given and not plugin_url and not given.startswith(("about:", "data:")):
        if given.startswith(("/", "./", "../", "~")) or given.lower().endswith((".html", ".htm")):
            if not Path(given).expanduser().exists():
                raise UsageError(f"{given}: no such file")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("about", "data", "file") and (
        scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url)
    ):
        raise UsageError(f"{given!r} is not an address to open: give one such as https://example.com/, "
                         "a local file or demo:shop")
    refusal = DomainPolicy.for_task([], settings.allowed_domains, settings.blocked_domains, url).refusal(url)
    if refusal:
        raise UsageError(f"cannot open {url}: {refusal}")


async def inspect_page(url: str, settings: Any, plugins: Any, wait: float = 0.0,
                       found: Optional[dict[str, Any]] = None) -> tuple[Any, list[Element]]:
    """Open ``url`` (already resolved) in a fresh context; return its observation and elements.
    ``found`` receives them as soon as they are read (``observation``, ``elements``, and
    ``chosen``: how many elements have their selector yet), for a caller that stops early."""
    found = found if found is not None else {}
    from owrl_sdk.browser import browser_host
    from owrl_sdk.errors import InfraError, UsageError
    from owrl_sdk.types import Task

    host = browser_host(settings, plugins)
    try:
        await host.start()
        env = await host.new_env()
        env.configure(dialogs="accept")  # a dialog on arrival must not freeze the page reads below
        try:
            await env.reset(Task(intent="owrl inspect", start_url=url))
        except InfraError as err:
            if err.code == "start_page_unreachable":
                raise UsageError(str(err)) from None
            raise
        try:  # scripts that draw the page after 'load': give them a moment, bounded
            await env.page.wait_for_load_state("networkidle", timeout=3000)
        except Exception:  # noqa: BLE001 - a page that keeps polling is inspected as it is
            pass
        if wait > 0:
            await asyncio.sleep(wait)
        observation = await env.observe()
        elements = parse_snapshot(observation.aria)
        found.update(observation=observation, elements=elements, chosen=0)
        for element in elements:
            await choose_selector(env.page, element)
            found["chosen"] += 1
        await env.close()
        return observation, elements
    finally:
        await host.close()


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def format_table(elements: list[Element]) -> str:
    """The elements as plain aligned columns (selectors never cut, so they can be copied)."""
    rows = [("ROLE", "NAME", "SELECTOR", "REF", "NOTE")]
    for e in elements:
        note = e.note
        if e.options:
            shown = ", ".join(e.options[:6]) + (", …" if len(e.options) > 6 else "")
            note = "; ".join(filter(None, [note, f"options: {shown} (pick with select_option)"]))
        rows.append((e.role, _cut(e.name, 40) or "-", e.selector or "-", e.ref or "-", note))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join(
        ("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(r[:4])) + "  " + r[4]).rstrip() for r in rows
    )


@click.command("inspect")
@click.argument("url")
@click.option("--snapshot/--no-snapshot", default=True, show_default=True,
              help="Print the accessibility snapshot before the table of elements.")
@click.option("--allow-domain", "allow_domains", multiple=True, metavar="HOST",
              help="Only these hosts (and their subdomains) may be visited; repeat for more.")
@click.option("--wait", type=click.FloatRange(min=0), default=0, show_default=True, metavar="SECONDS",
              help="Seconds to wait after the page loaded (for content that appears later).")
@click.option("--headed", is_flag=True, help="Show the browser window.")
@click.option("--timeout", type=click.FloatRange(min=1), default=60, show_default=True, metavar="SECONDS",
              help="Stop after this long and print what was read by then (a page that never settles).")
@click.option("--json", "as_json", is_flag=True,
              help="Print only the elements, as JSON: a list of {role, name, selector, ref, note}.")
@storage_options
def inspect_command(url: str, snapshot: bool, allow_domains: tuple[str, ...], wait: float, headed: bool,
                    timeout: float, as_json: bool, load_storage: Optional[str] = None,
                    save_storage: Optional[str] = None) -> None:
    """Open URL in Chromium; print its accessibility snapshot and a selector for each interactive element.

    URL is written as for `owrl run --url`: https://..., a bare host, a local file or demo:shop/PATH.
    Each selector was checked to find exactly its element on the page, ready for a flow call's
    "selector" argument."""
    from owrl_sdk.contract.plugins import Plugins
    from owrl_sdk.contract.plugins import load_checked_settings as load_settings

    plugins = Plugins()
    settings = load_settings({"headless": False if headed else None, "allowed_domains": list(allow_domains) or None,
                              "storage_state": load_storage, "save_storage": save_storage})
    check_storage(settings)  # a saved log-in lets inspect see past the log-in page
    plugins = plugins.bind(settings)
    if url.startswith("~"):
        url = str(Path(url).expanduser())
    plugin_url = plugin_scheme(url, plugins)  # a plugin's own scheme, resolved by its hook
    from owrl_sdk.flows.runrequest import RunRequest

    # the address rules every door applies (a bare host gets https://, a path file://); _check_url
    # says what is wrong with an address in this command's words
    resolved = plugins.resolve_url(RunRequest(url=url).start_url(plugins, check=False) or url)
    _check_url(url, resolved, settings, plugin_url=plugin_url)
    found: dict[str, Any] = {}
    stopped = ""
    try:
        observation, elements = asyncio.run(asyncio.wait_for(inspect_page(resolved, settings, plugins, wait, found),
                                                             timeout))
    except asyncio.TimeoutError:
        from owrl_sdk.errors import UsageError

        if "observation" not in found:
            raise UsageError(f"{url} could not be read in {timeout:g} s (a page that never finishes loading, or "
                             "one that keeps the browser busy): try --timeout with more seconds") from None
        observation, elements = found["observation"], found["elements"][: found["chosen"]]
        stopped = (f"stopped after {timeout:g} s: {found['chosen']} of {len(found['elements'])} elements got a "
                   "selector (--timeout for more)")
    if as_json:
        click.echo(json.dumps([e.to_json() for e in elements], indent=2, ensure_ascii=False))
        if stopped:
            click.echo(stopped, err=True)
        return
    from owrl_sdk.support.console import terminal_safe  # the page's text cannot drive the terminal

    click.echo(terminal_safe(f"page: {observation.title or '(no title)'} · {observation.url}"))
    if snapshot:
        click.echo("\naccessibility snapshot (what a policy sees):")
        click.echo(terminal_safe(observation.aria or ""))
    click.echo(f"\ninteractive elements: {len(elements)}")
    if elements:
        click.echo(terminal_safe(format_table(elements)))
        click.echo('\nIn a flow: {"name": "click", "arguments": {"selector": "<SELECTOR>"}}')
    if stopped:
        click.echo(f"\n{stopped}", err=True)


@hookimpl
def register_commands(register: Register) -> None:
    register(inspect_command)
