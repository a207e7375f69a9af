"""The recording session: a Chromium context whose every frame reports what the person does.

:class:`Recorder` launches Chromium through :class:`~owrl_sdk.browser.BrowserHost` (so
``OWRL_CHROMIUM``, plugins' launch options and the viewport are those of ``owrl run``), opens
one context, runs ``capture.js`` in an isolated world of every frame of every tab (see
:mod:`owrl_sdk.recorder.world`: the page's scripts cannot reach it), and turns each report
into a call of a :class:`~owrl_sdk.recorder.flowbuild.FlowBuilder`:

- a selector for the target, tried on the live page in this order: ``role=ROLE[name="NAME"]``,
  the same with an exact name, a test id, an id, a field's ``name``, a short CSS path; the
  first that finds exactly the target wins (when the page navigated away before the check,
  the page's own count, taken when the action happened, decides);
- an expectation from what the action changed: the URL after a navigation, a new text, the
  field's value;
- tab switches (an action in another tab than the active one), new tabs, dialogs' answers
  (from the DevTools protocol's ``Page.javascriptDialogClosed``);
- a warning, in the call's note and the log, when what the person clicked was invisible or lay
  under something that lets clicks through (what a replay clicks is not what they saw).

Only what the person's input caused is recorded: trusted events, and a field's value only after
a trusted ``beforeinput`` or key press in it (a page's ``execCommand`` edits send neither).

After each action the flow so far is written to a temporary file next to ``out`` (atomically),
so a recording that is cut short is not lost; :meth:`Recorder.stop` writes ``out`` itself.
A password field's value is never sent out of the page: it is recorded as ``{{secret:NAME}}``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import secrets
import time
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Union

from owrl_sdk.browser.selectors import iframe_selector, role_selector
from owrl_sdk.formats.documents import Flow, check_flow_tools
from owrl_sdk.safety.domains import DomainPolicy
from owrl_sdk.errors import UsageError
from owrl_sdk.support.files import write_atomic

from owrl_sdk.recorder.flowbuild import Call, FlowBuilder, choose_text, short_name, upper_snake, without_secret_params
from owrl_sdk.recorder.world import CaptureSession

#: Where a report came from: the DevTools session (its tab) and the world's execution context
#: (its frame's document).
Where = tuple[CaptureSession, int]

#: Seconds after an action within which a navigation or a new tab is counted as its effect.
CAUSE_WINDOW = 3.0

#: Events the recorder could not use (one odd event does not end a recording): DEBUG records.
_log = logging.getLogger("owrl.recorder")


def capture_script(token: str = "") -> str:
    """The JavaScript injected into every frame (``capture.js``, package data), with the
    session's ``token``, which every report it sends carries."""
    text = resources.files("owrl_sdk.recorder").joinpath("capture.js").read_text(encoding="utf-8")
    return text.replace("__OWRL_TOKEN__", token)


def partial_path(out: Path) -> Path:
    """Where the flow recorded so far is kept until the recording ends: ``.NAME.recording`` next to ``out``."""
    return out.with_name(f".{out.name}.recording")


def _write_atomically(path: Path, text: str) -> None:
    write_atomic(path, text)


class Recorder:
    """Record what a person does in a browser into a flow.

    ``url`` is the resolved address to open and ``start_url`` the one written in the flow
    (``demo:shop/`` as given, not its local port). ``input_fields``: fields (by label or name)
    whose typed values become ``{{input:NAME}}``. Use ``await start()``, act on :attr:`page`
    (or let a person do it), then ``await stop()``, which returns the flow."""

    def __init__(self, url: str, out: Union[str, Path], settings: Any, plugins: Any = None, *,
                 start_url: Optional[str] = None, task: str = "", input_fields: tuple[str, ...] = ()):
        self.url = url
        self.out = Path(out)
        self._token = secrets.token_hex(16)  # what the capture script's reports carry (see _on_report)
        self._script = capture_script(self._token)  # read once: every tab and out-of-process frame gets it
        self.settings = settings
        self.plugins = plugins
        self.builder = FlowBuilder(start_url=start_url or url, task=task)
        self.input_fields = tuple(input_fields)
        #: adjusts Chromium's launch options (default: the plugins' browser_launch_options)
        self.launch_hook: Any = plugins.browser_launch_options if plugins is not None else None
        self.host: Any = None
        self.context: Any = None
        self.pages: list[Any] = []
        self.active: Any = None
        self.finished = asyncio.Event()
        self._queue: "asyncio.Queue[tuple[str, Any, Any]]" = asyncio.Queue()
        self._worker: Optional[asyncio.Task[None]] = None
        self._by_id: dict[str, Call] = {}
        self._last: Optional[tuple[float, Any, Call]] = None  # (when, page, call) of the latest action
        self._ready = False
        self._dialog_types: dict[int, str] = {}
        #: the capture sessions: one per tab (key: the page) and per out-of-process frame (key: the frame)
        self._captures: dict[Any, CaptureSession] = {}
        self._attaching: "dict[Any, asyncio.Future[Any]]" = {}
        #: warnings for the person: clicks on what they could not see
        self.warnings: list[str] = []
        self._tasks: "set[asyncio.Future[Any]]" = set()
        self._opened_by_action: set[Any] = set()
        self._closed_tab: Optional[Call] = None  # a tab closed while others stay open

        #: the settings' allowed_domains (owrl record --allow-domain) and blocked_domains: a request
        #: outside them is answered with an empty 204 and never recorded; see :meth:`_guard`
        self.domains = DomainPolicy.for_task([], settings.allowed_domains, settings.blocked_domains, url)
        #: the navigations refused so far, as (url, reason)
        self.refused: list[tuple[str, str]] = []

    @property
    def page(self) -> Any:
        """The tab the person acts in now (the last opened or acted in)."""
        return self.active

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> Any:
        """Launch Chromium, open ``url`` in a recording context and return its page."""
        from owrl_sdk.browser import BrowserHost

        self.host = BrowserHost(self.settings, launch_hook=self.launch_hook)
        await self.host.start()
        s = self.settings
        saved: dict[str, Any] = {}
        if s.storage_state:  # record from a saved log-in (--load-storage)
            from owrl_sdk.browser.storage import load_state

            saved["storage_state"] = load_state(s.storage_state)
        # a service worker's requests bypass routing: none when hosts are checked
        workers = {"service_workers": "block"} if self.domains.routes else {}
        self.context = await self.host.browser.new_context(
            viewport={"width": s.viewport_width, "height": s.viewport_height}, accept_downloads=True, **saved,
            **workers)
        if self.domains.routes:
            await self.context.route("**/*", self._guard)
            from owrl_sdk.browser.guard import close_refused_socket

            await self.context.route_web_socket(lambda url: self.domains.refusal(url) is not None,
                                                close_refused_socket)
        self.context.on("page", self._on_page)
        self.context.on("close", lambda _ctx: self.finished.set())
        self.host.browser.on("disconnected", lambda _b: self.finished.set())
        if not s.headless:
            # the person answers dialogs in the browser's own window: a listener keeps
            # Playwright from dismissing them first
            self.context.on("dialog", lambda _dialog: None)
        self._worker = asyncio.ensure_future(self._work())
        page = await self.context.new_page()
        await self._attach(page, page)  # before its first address opens
        if self.domains.routes:  # redirect hops too (the route sees only a redirect's first request)
            from owrl_sdk.browser.tabs import context_id_of

            if not await self.host.guard_hops(self, await context_id_of(self.context, page)):
                _log.warning("owrl record: redirect hops are not checked against the allowed and blocked domains "
                             "(this browser gives no browser-level CDP session)")
        try:
            await page.goto(self.url, wait_until="load")
        except Exception as err:  # noqa: BLE001 - an address that does not open is the user's to fix

            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            await self.host.close()
            raise UsageError(f"cannot open {self.url}: {first}") from None
        self._ready = True
        self._save()
        return page

    async def wait(self) -> None:
        """Until the browser or its last tab is closed (or :meth:`stop` is called)."""
        await self.finished.wait()

    async def stop(self) -> Flow:
        """Take in the last reports, write ``out`` (replacing the partial file) and close the browser."""
        for capture in list(self._captures.values()):
            await capture.ask_all("globalThis.__owrlRecorder && (__owrlRecorder.flushAll(), __owrlRecorder.settle(), 0)")
        await asyncio.sleep(0.2)
        await self._queue.join()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10)
        if self._worker is not None:
            self._worker.cancel()
        if self.settings.save_storage:
            await self._save_storage()
        flow = self.builder.flow()
        self._check(flow)
        partial = partial_path(self.out)
        _write_atomically(partial, self._text())
        os.replace(partial, self.out)
        if self.host is not None:
            await self.host.close()
        self.finished.set()
        return flow

    def _check(self, flow: Flow) -> None:
        if self.plugins is None:
            return

        check_flow_tools(flow, self.plugins.catalogue.items["tools"], str(self.out))

    def _text(self) -> str:
        return json.dumps(self.builder.flow_data(), indent=2, ensure_ascii=False) + "\n"

    def _save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(partial_path(self.out), self._text())

    # ------------------------------------------------------------------ the domain policy

    async def _guard(self, route: Any) -> None:
        """Hold every request of the recording to the domain policy: a refused one gets an
        empty 204 (a navigation stays on its page, so nothing is recorded), and a refused
        navigation is logged as a warning for the person to see."""
        from owrl_sdk.browser.guard import route_by_policy

        await route_by_policy(route, self.domains, lambda request, reason: self._refused(request.url, reason))

    def refuse_hop(self, url: str, frame_id: str, resource_type: str, tab: bool = False) -> Optional[str]:
        """A redirect hop of the recording (asked by the host's hop guard): ``"empty"`` (a 204)
        when the policy refuses it, else None."""
        reason = self.domains.refusal(url)
        if reason is None:
            return None
        if resource_type == "Document":
            self._refused(url, reason)
        return "empty"

    def _refused(self, url: str, reason: str) -> bool:
        """Log a refused navigation; False: answered with a 204, the page stays as it was."""
        self.refused.append((url, reason))
        from owrl_sdk.browser.feedback import short

        _log.warning("owrl record: navigation to %s blocked: %s", short(url, 120), reason)
        return False

    # ------------------------------------------------------------------ events

    def _on_page(self, page: Any) -> None:
        self.pages.append(page)
        self.active = page
        page.on("framenavigated", lambda frame: self._on_frame_navigated(page, frame))
        page.on("close", lambda p: self._queue.put_nowait(("closed", p, None)))
        self._keep(asyncio.ensure_future(self._attach(page, page)))
        if self._ready:
            self._queue.put_nowait(("opened", page, None))

    def _on_frame_navigated(self, page: Any, frame: Any) -> None:
        if frame != page.main_frame:
            # a frame that now shows another site may have become a process of its own: it needs
            # its own session (an in-process frame is covered by its tab's, and refuses one)
            if frame not in self._captures:
                self._keep(asyncio.ensure_future(self._attach(frame, page, quiet=True)))
        elif self._ready:  # the start page's own load is no action
            self._queue.put_nowait(("navigated", page, frame.url))

    async def _attach(self, target: Any, page: Any, quiet: bool = False) -> None:
        """Run the capture script in ``target``'s isolated world (a tab, or an out-of-process
        frame); a tab's session also watches its dialogs."""
        if target in self._attaching:
            await asyncio.shield(self._attaching[target])
            return
        frame = None if target is page else target
        job = asyncio.ensure_future(CaptureSession.attach(self.context, target, page, frame, self._script, self._on_report))
        self._attaching[target] = job
        try:
            capture = await job
        except Exception as err:  # noqa: BLE001 - an in-process frame, or a tab closed at once
            self._attaching.pop(target, None)
            if not quiet:
                _log.debug("owrl record: no capture session for %s: %s", target, err)
            return
        self._captures[target] = capture
        if frame is None:
            session = capture.session
            session.on("Page.javascriptDialogOpening", lambda e: self._dialog_types.__setitem__(id(page), e.get("type", "")))
            session.on("Page.javascriptDialogClosed", lambda e: self._queue.put_nowait(("dialog", page, e)))
            page.on("close", lambda _p: self._captures.pop(page, None))
        else:
            frame.page.on("framedetached", lambda f: self._captures.pop(f, None) if f is frame else None)

    def _on_report(self, capture: CaptureSession, context_id: int, action: Any) -> None:
        # the binding exists in the capture script's world only; the token is a second lock
        if not isinstance(action, dict) or not hmac.compare_digest(str(action.pop("token", "")), self._token):
            return
        self._queue.put_nowait(("action", (capture, context_id), action))

    async def _work(self) -> None:
        while True:
            kind, where, data = await self._queue.get()
            try:
                await self._handle(kind, where, data)
                self._save()
            except Exception as err:  # noqa: BLE001 - one odd event must not end the recording
                _log.debug("owrl record: %s: %s: %s", kind, type(err).__name__, err)
            finally:
                self._queue.task_done()

    async def _handle(self, kind: str, where: Any, data: Any) -> None:
        if kind == "action":
            await self._on_action(where, data)
        elif kind == "navigated":
            self._on_navigated(where, data)
        elif kind == "opened":
            recent = self._last is not None and time.monotonic() - self._last[0] < CAUSE_WINDOW
            if recent and self._last is not None:
                self._last[2].opened_tab = True
                self._opened_by_action.add(where)  # its first load is the action's doing, not a goto_url
            else:
                self._add(Call("new_tab", {}, "Open a new tab."), where)
            self.active = where
        elif kind == "closed":
            if where in self.pages:
                index = self.pages.index(where)
                self.pages.remove(where)
                if self.active is where:
                    if self.pages and not self.finished.is_set():  # kept once the person acts again (not a closing window)
                        self._closed_tab = Call("close_tab", {"tab_index": index}, "Close the tab.")
                    self.active = self.pages[min(index, len(self.pages) - 1)] if self.pages else None
            if not self.pages:
                self._closed_tab = None
                self.finished.set()
        elif kind == "dialog":
            accept = bool(data.get("result"))
            args: dict[str, Any] = {"accept": accept}
            if accept and self._dialog_types.get(id(where)) == "prompt":
                args["prompt_text"] = data.get("userInput", "")
            opener = self._last[2] if self._last is not None else None
            call = self._add(Call("handle_dialog", args, "Answer the dialog."), where)
            if opener is not None and "text_visible" in opener.expect:  # it showed after the answer
                call.expect["text_visible"] = opener.expect.pop("text_visible")
            for key, value in list(self._by_id.items()):  # what the action brought about shows after the answer
                if value is opener:
                    self._by_id[key] = call

    def _add(self, call: Call, page: Any) -> Call:
        if self._closed_tab is not None:
            self.builder.add(self._closed_tab)
            self._closed_tab = None
        self.builder.add(call)
        self._last = (time.monotonic(), page, call)
        return call

    def _on_navigated(self, page: Any, url: str) -> None:
        if not self._ready or not url or url.startswith("about:"):
            return
        if page in self._opened_by_action:
            self._opened_by_action.discard(page)
            return
        last = self._last
        if last is not None and time.monotonic() - last[0] < CAUSE_WINDOW and last[1] is page:
            last[2].navigated = url
            last[2].expect.pop("text_visible", None)
            self._keep(asyncio.ensure_future(self._landing(page, last[2])))
        elif last is not None and last[2].name == "goto_url" and last[1] is page:
            last[2].arguments["url"] = without_secret_params(url)
        else:
            url = without_secret_params(url)  # a slow GET log-in form's password stays out of the flow
            self._add(Call("goto_url", {"url": url}, f"Open {url}."), page)

    def _keep(self, task: "asyncio.Future[Any]") -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _landing(self, page: Any, call: Call) -> None:
        """What the page a call navigated to shows that the page before did not."""
        await asyncio.sleep(0.3)
        try:
            await page.wait_for_load_state("load", timeout=5000)
            await asyncio.sleep(0.8)
            capture = self._captures[page]
            texts = await capture.ask(capture.main_context(), "globalThis.__owrlRecorder ? __owrlRecorder.texts() : []")
        except Exception:  # noqa: BLE001 - closed or navigating again: no text to expect
            return
        call.landing_text = choose_text([t for t in texts if t.get("text") not in call.before], call.before)

    # ------------------------------------------------------------------ actions

    async def _on_action(self, where: Where, action: dict[str, Any]) -> None:
        page = where[0].page
        kind = action.get("kind")
        if kind == "effects":
            earlier = self._by_id.get(str(action.get("id")))
            if earlier is not None and not earlier.navigated and "value_equals" not in earlier.expect \
                    and earlier.name != "extract":  # reading changes nothing: its text varies by row
                text = choose_text(list(action.get("texts") or []), earlier.before)
                if text:
                    earlier.expect["text_visible"] = text
            return
        if page is not None and page is not self.active and page in self.pages:
            self._add(Call("switch_tab", {"tab_index": self.pages.index(page)}, "Switch to another tab."), page)
            self.active = page
        target: dict[str, Any] = {**action["target"], "doc": action.get("doc")} if action.get("target") else {}
        selector = await self._selector(where, target) if target else None
        call: Optional[Call] = None
        last = self._last[2] if self._last is not None else None
        if kind == "click" and selector and int(action.get("clicks") or 1) > 1 and last is not None \
                and last.name == "click" and last.arguments.get("selector") == selector:
            last.arguments["clicks"] = int(action["clicks"])  # the first clicks of a double click are this one
            self._by_id[str(action.get("id"))] = last  # what the double click changed
            return
        if kind == "click" and selector and isinstance(action.get("checked"), bool):
            call = self._set_checked(selector, target, bool(action["checked"]))
        elif kind == "click" and selector:
            args: dict[str, Any] = {"selector": selector}
            if int(action.get("clicks") or 1) > 1:
                args["clicks"] = int(action["clicks"])
            call = Call("click", args, f"Click {self._label(target)}.")
        elif kind == "write" and selector:
            call = self._write(selector, target, action)
            if (last is not None and last.name == "write" and last.arguments.get("selector") == selector
                    and self._last is not None and self._last[1] is page and not last.navigated):
                # the same field again with nothing in between (a date typed part by part, a field
                # edited twice): one write of the final value, as the help promises
                last.arguments, last.expect, last.note = call.arguments, call.expect, call.note
                self._by_id[str(action.get("id"))] = last
                return
        elif kind == "select" and selector:
            value = str(action.get("value") or "")
            field_name = self._input_field(target)
            if field_name is not None:  # --input-fields: the option from the input, the one chosen its default
                self.builder.inputs[field_name] = value
                value = f"{{{{input:{field_name}}}}}"
                call = Call("select_option", {"selector": selector, "value": value},
                            f"Choose the input {field_name} in {self._label(target)}.")
            else:
                call = Call("select_option", {"selector": selector, "value": value},
                            f"Choose {action.get('label') or value} in {self._label(target)}.")
            call.expect["value_equals"] = {"selector": selector, "value": value}
        elif kind == "extract" and selector:
            call = self._extract(selector, target)
        elif kind == "key":
            keys = [str(k) for k in action.get("keys") or []]
            arguments: dict[str, Any] = {"keys": keys[0] if len(keys) == 1 else keys}
            if len(keys) > 1:
                arguments["is_hotkey"] = True
            call = Call("press_keys", arguments, f"Press {'+'.join(keys)}.")
        if call is None:
            return
        if kind == "click" and action.get("unseen"):
            warning = f"{call.note[:-1]}: it was {action['unseen']} when it was clicked; check that it is what you meant"
            call.note = warning + "."
            self.warnings.append(warning)
            _log.warning("owrl record: %s", warning)
        call.url_before = str(action.get("url") or "")
        call.before = frozenset(str(t) for t in action.get("before") or [])
        self._add(call, page)
        self._by_id[str(action.get("id"))] = call
        if self.settings.save_storage:  # after each action: the person may close the window at any time
            self._keep(asyncio.ensure_future(self._save_storage()))

    async def _save_storage(self) -> None:
        """The session as it is now to ``save_storage`` (--save-storage), mode 0600."""
        from owrl_sdk.browser.storage import check_target, save_state

        if self.context is None:
            return
        try:
            await save_state(self.context, check_target(str(self.settings.save_storage), self.settings.runs_dir))
        except Exception:  # noqa: BLE001 - a context closing under us: the last save stands
            pass

    def _input_field(self, target: dict[str, Any]) -> Optional[str]:
        """The ``--input-fields`` name this field answers to (by its name, label or accessible name)."""
        wanted = {upper_snake(str(target.get(k) or ""), "") for k in ("field_name", "label", "name")} - {""}
        return next((f for f in self.input_fields if upper_snake(f, "") in wanted), None)

    def _set_checked(self, selector: str, target: dict[str, Any], checked: bool) -> Call:
        """A click that ticked, cleared or chose a box: the state it left, as ``set_checked``
        (replayed, it does not toggle a box that is already as wanted); a box or radio group
        named in ``--input-fields`` takes its state from that input."""
        label = self._label(target)
        field_name = self._input_field(target) if target.get("role") == "checkbox" else None
        if field_name is not None:
            self.builder.inputs[field_name] = checked
            return Call("set_checked", {"selector": selector, "checked": f"{{{{input:{field_name}}}}}"},
                        f"Set {label} from the input {field_name}.")
        verb = "Choose" if target.get("role") == "radio" else ("Tick" if checked else "Clear")
        return Call("set_checked", {"selector": selector, "checked": checked}, f"{verb} {label}.")

    def _write(self, selector: str, target: dict[str, Any], action: dict[str, Any]) -> Call:
        label = self._label(target)
        if action.get("secret"):
            name = upper_snake(str(target.get("field_name") or target.get("label") or ""), "PASSWORD")
            return Call("write", {"selector": selector, "message": f"{{{{secret:{name}}}}}"}, f"Enter the secret into {label}.")
        value = str(action.get("value") or "")
        field_name = self._input_field(target)
        if field_name is not None:
            self.builder.inputs[field_name] = value
            message = f"{{{{input:{field_name}}}}}"
            return Call("write", {"selector": selector, "message": message}, f"Write the input {field_name} into {label}.",
                        expect={"value_equals": {"selector": selector, "value": message}})
        return Call("write", {"selector": selector, "message": value}, f"Write {value!r} into {label}.",
                    expect={"value_equals": {"selector": selector, "value": value}})

    def _extract(self, selector: str, target: dict[str, Any]) -> Call:
        """Alt+Shift+E over an element: its text extracted when the flow plays, saved under a
        name made from its label or name (``extracted`` when it has none), made unique."""
        base = upper_snake(str(target.get("label") or target.get("name") or target.get("field_name") or ""),
                           "EXTRACTED").lower()[:40]
        taken = {c.save_as for c in self.builder.calls if c.save_as}
        name = base if base not in taken else next(f"{base}_{n}" for n in range(2, 10_000) if f"{base}_{n}" not in taken)
        return Call("extract", {"selector": selector}, f"Read {self._label(target)} as {name}.", save_as=name)

    @staticmethod
    def _label(target: Optional[dict[str, Any]]) -> str:
        if not target:
            return "the page"
        name = target.get("name") or target.get("label") or target.get("field_name")
        return f'the {target.get("role") or target.get("tag")} "{short_name(str(name))}"' if name else f'a {target.get("tag")}'

    async def _selector(self, where: Where, target: dict[str, Any]) -> Optional[str]:
        """The first candidate that finds exactly one element both in the page's own count, taken
        when the action happened (hidden elements included), and in the same document now
        (counted by the capture script's world, which the page cannot redefine)."""
        candidates: list[tuple[str, bool, list[str]]] = []  # (selector, judged unique by the page, how to count it)
        role, name = str(target.get("role") or ""), str(target.get("name") or "")
        loose, exact = (list(target.get("role_counts") or [0, 0]) + [0, 0])[:2]
        if role and name:
            shortened = short_name(name)
            candidates.append((role_selector(role, shortened), loose == 1 and shortened == name, ["role", role, shortened]))
            if shortened == name:
                candidates.append((role_selector(role, name, exact=True), exact == 1, ["role-exact", role, name]))
        css = [str(c) for c in target.get("css") or []]
        for i, selector in enumerate(css):
            candidates.append((selector, i < len(css) - 1, ["css", selector, ""]))
        prefix = await self._frame_prefix(where)
        live = await self._same_document(where, target.get("doc"))
        for selector, judged, how in candidates:
            count = await self._count(where, how) if live else None
            if count is not None and not await self._same_document(where, target.get("doc")):
                count, live = None, False  # it navigated meanwhile: the count was of another page
            # the page's own count (hidden elements too, which may show later) must find it alone; the live
            # count must agree unless it finds none (the action itself hid or removed it: a banner's button)
            if judged and count in (1, 0, None):
                return prefix + selector
        return prefix + candidates[-1][0] if candidates else None

    @staticmethod
    async def _same_document(where: Where, doc: Any) -> bool:
        """Whether the frame still shows the document the action happened in."""
        if not doc:
            return False
        try:
            now = await where[0].ask(where[1], "globalThis.__owrlRecorder && __owrlRecorder.doc")
        except Exception:  # noqa: BLE001 - navigated: its world's context is gone
            return False
        return bool(now == doc)

    @staticmethod
    async def _count(where: Where, how: list[str]) -> Optional[int]:
        try:
            found = await where[0].ask(where[1], f"__owrlRecorder.count({json.dumps(how[0])}, {json.dumps(how[1])}, {json.dumps(how[2])})")
        except Exception:  # noqa: BLE001 - navigated away
            return None
        return int(found) if isinstance(found, int) and found >= 0 else None

    async def _frame_prefix(self, where: Where) -> str:
        """The iframe steps down to the action's frame: the capture script's own as far as
        same-origin parents let it see, then Playwright's from the frame where it stopped."""
        capture, context_id = where
        try:
            path = await capture.ask(context_id, "__owrlRecorder.framePath()")
        except Exception:  # noqa: BLE001 - a frame that went away: the page-level selector is all there is
            return ""
        own = "".join(f"{s} >>> " for s in path.get("steps") or [])
        if path.get("complete"):
            return own
        at = str(path.get("at") or "")
        if capture.frame is not None and capture.frame.url == at:
            stop = capture.frame
        else:
            found = [f for f in capture.page.frames if f.url == at and f.parent_frame is not None]
            if len(found) != 1:
                return ""
            stop = found[0]
        above = await self._playwright_prefix(stop)
        return above + own if above else ""

    @staticmethod
    async def _playwright_prefix(frame: Any) -> str:
        steps: list[str] = []
        here = frame
        try:
            while here.parent_frame is not None:
                step = await iframe_selector(here.parent_frame, await here.frame_element())
                if step is None:
                    return ""
                steps.append(step)
                here = here.parent_frame
        except Exception:  # noqa: BLE001 - a frame that went away: the page-level selector is all there is
            return ""
        return "".join(f"{s} >>> " for s in reversed(steps))
