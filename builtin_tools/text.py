"""The tools that type and choose: write (text into a field), press_keys, select_option, set_checked."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Literal, Optional, Union
from urllib.parse import urlsplit

from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from owrl_sdk.api import (
    ActionError,
    BrowserEnv,
    DomainPolicy,
    Located,
    secrets,
    short,
    Target,
    TargetArgs,
    ToolResult,
)

from .base import BrowserTool, _Args, _OptionalTarget, describe_element
from .keys import known_keys, normalize_keys

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import ElementHandle, Locator, Page

_FOCUSED = """(clear) => {
  let el = document.activeElement;
  for (;;) {
    if (el && el.shadowRoot && el.shadowRoot.activeElement) { el = el.shadowRoot.activeElement; continue; }
    if (el && el.tagName === 'IFRAME') {
      let d = null; try { d = el.contentDocument; } catch (e) {}
      if (d && d.activeElement && d.activeElement !== d.body) { el = d.activeElement; continue; }
    }
    break;
  }
  if (!el) return {editable: false, tag: '', value: null};
  const tag = el.tagName.toLowerCase(), type = (el.type || '').toLowerCase();
  const nonText = ['checkbox', 'radio', 'button', 'submit', 'reset', 'file', 'image', 'range', 'color', 'hidden'];
  const field = tag === 'textarea' || (tag === 'input' && !nonText.includes(type));
  return {editable: field || el.isContentEditable, tag, field,
          value: field ? el.value : (el.isContentEditable ? el.innerText : null)};
}"""


#: The focused element's value or text (the body's when nothing has the focus).
_ACTIVE_TEXT = "() => document.activeElement ? (document.activeElement.value || document.activeElement.textContent || '') : ''"
#: The most of it a result keeps (a page's whole text can be megabytes).
_MAX_HELD = 20_000

#: Roles of elements that take text without being native fields (a custom editor).
_TEXT_ROLES = ("textbox", "searchbox", "combobox")

_VALUE = "el => ('value' in el && typeof el.value === 'string') ? el.value : (el.innerText ?? '')"

#: Sets a text field's or an editable element's text from inside its own document, with the
#: setter of the element's own realm (what a framework watching ``value`` expects), then the
#: events a person's typing ends with. False for an element that takes no text.
_SET_INSIDE = """(el, text) => {
  const win = el.ownerDocument.defaultView;
  const tag = el.tagName.toLowerCase();
  const nonText = ['checkbox', 'radio', 'button', 'submit', 'reset', 'file', 'image', 'range', 'color', 'hidden'];
  if (tag === 'textarea' || (tag === 'input' && !nonText.includes((el.type || '').toLowerCase()))) {
    const proto = tag === 'textarea' ? win.HTMLTextAreaElement.prototype : win.HTMLInputElement.prototype;
    Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, text);
  } else if (el.isContentEditable) {
    el.textContent = text;
  } else {
    return false;
  }
  el.dispatchEvent(new win.InputEvent('input', {bubbles: true, composed: true, inputType: 'insertText', data: text}));
  el.dispatchEvent(new win.Event('change', {bubbles: true}));
  return true;
}"""


class WriteArgs(_OptionalTarget):
    message: str = Field(description="the text to type")
    clear: bool = Field(True, description="empty the field before typing (default true)")

    # message first, as OpenWebRL declares write(message)
    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra=lambda s: s.update(
        properties={k: s["properties"][k] for k in ("message", "clear", "point_2d", "ref", "selector")}))


class Write(BrowserTool):
    name = "write"
    description = (
        "Type text into the focused field, or into the field given by point_2d, ref or selector. "
        "The field is emptied first unless clear is false."
    )
    Args = WriteArgs

    async def act(self, env: BrowserEnv, args: WriteArgs) -> ToolResult:
        page = env.page
        target = args.target
        if target is not None and target.point_2d is None:
            locator = env.element(ref=target.ref, selector=target.selector)
            if secrets.has_placeholder(args.message):
                return await _write_secret(env, args, await locator.element_handle())
            if args.clear:
                try:
                    await locator.fill(args.message)
                except Exception as err:  # a role=textbox element that is not editable itself: type as a person would
                    if "not an <input>" not in str(err) or (await locator.get_attribute("role") or "") not in _TEXT_ROLES:
                        raise
                    await locator.click()
                    await page.keyboard.press("ControlOrMeta+a")
                    await page.keyboard.press("Delete")
                    await page.keyboard.type(args.message)
            else:
                await locator.focus()
                await page.keyboard.press("End")
                await page.keyboard.type(args.message)
            held = await locator.evaluate(_VALUE)
            return ToolResult(feedback=_held_feedback(args, held))
        at: Optional[tuple[float, float]] = None
        if target is not None and target.point_2d is not None:
            at = env.to_pixels(target.point_2d)
            await page.mouse.click(*at)
        if secrets.has_placeholder(args.message):
            # the element at the point, not the focus (a frame may take the focus at any moment)
            handle = await (_element_at(page, *at) if at is not None else _focused_element(page))
            if handle is None:
                _, refused = _with_secrets(env, args, [page.url])  # a secret not set says so first
                return refused or ToolResult.failure("no text field has the focus, so the secret was not typed: "
                                                     "give the field's point_2d, ref or selector", kind="action.failed")
            return await _write_secret(env, args, handle)
        element = await describe_element(env, None)
        focused = await page.evaluate(_FOCUSED, args.clear)
        if args.clear and focused["editable"]:
            await page.keyboard.press("ControlOrMeta+a")
            if not args.message:
                await page.keyboard.press("Delete")
        await page.keyboard.type(args.message)
        if not focused["editable"]:
            # what the focused element (the page's body, when nothing has the focus) holds now, as the
            # OpenWebRL environment reads it for its note, whitespace collapsed, within a bound
            held = " ".join(str(await page.evaluate(_ACTIVE_TEXT) or "").split())[:_MAX_HELD]
            return ToolResult(
                feedback="no text field had focus, so the keys went to the page; "
                "to fill a field, give its point_2d, ref or selector",
                data={"element": element, "value": held, "focused": False})
        after = await page.evaluate(_FOCUSED, False)
        return ToolResult(feedback=_held_feedback(args, after["value"]),
                          data={"element": element, "value": after["value"]})


async def _write_secret(env: BrowserEnv, args: WriteArgs, handle: ElementHandle) -> ToolResult:
    """Write a message holding secrets into ``handle``, the element that was checked: the
    hosts are checked on its own frames, and the value is set inside that element's own
    document (:data:`_SET_INSIDE`: the native value setter, then the ``input`` and ``change``
    events a page listens for), never sent as keys or inserted text to whatever has the
    keyboard focus: a frame of another host that takes the focus at any moment (its own
    loop, the field's focus handler, a lie about ``document.activeElement``) receives no input
    at all. The element's frames are checked again after; if it moved meanwhile, what was set
    is taken back and the write fails (``policy.secret_refused``). An element that is neither
    a text field nor editable is refused, as it could take text only through the focus. The
    element is first waited for as a person's typing would be: visible, enabled, editable."""
    page = env.page
    for state in ("visible", "enabled", "editable"):  # what a person (and fill) would wait for
        await handle.wait_for_element_state(state)
    before = [page.url, *await _frames_of_handle(handle)]
    resolved, refused = _with_secrets(env, args, before)
    if refused is not None:
        return refused
    kept = "" if args.clear else str(await handle.evaluate(_VALUE) or "")
    if not await handle.evaluate(_SET_INSIDE, kept + resolved.message):
        return ToolResult.failure("a secret is set only into a text field or an editable element, and this element "
                                  "is neither, so nothing was typed", kind="policy.secret_refused")
    after = [page.url, *await _frames_of_handle(handle)]
    if after != before:
        _, moved = _with_secrets(env, args, after)
        if moved is not None:
            try:
                await handle.evaluate(_SET_INSIDE, kept)
            except Exception:  # noqa: BLE001 - gone with its page: nothing of it is left to clear
                pass
            return ToolResult.failure(f"{moved.error} (it moved while the secret was typed: taken back)",
                                      kind="policy.secret_refused")
    held = await handle.evaluate(_VALUE)
    return ToolResult(feedback=_held_feedback(resolved.model_copy(update={"message": kept + resolved.message}), held))


async def _frames_of_handle(handle: ElementHandle) -> list[str]:
    """The addresses of the frame that holds ``handle`` and of each frame around it, as the
    browser reports them (a frame's scripts cannot rewrite them); a frame that hides where it
    is counts as nowhere."""
    frame, found = await handle.owner_frame(), []
    if frame is None:
        return [_HIDDEN]
    while frame is not None:
        found.append(frame.url)
        frame = frame.parent_frame
    return found


async def _element_at(page: Page, x: float, y: float) -> Optional[ElementHandle]:
    """The element drawn at ``(x, y)`` of the viewport, down through frames and open shadow
    roots, or None. A page's script may answer for its own document; the element it gives is
    held to the hosts of its own frames like any other."""
    return await _down_frames(page, _AT_POINT, (x, y))


async def _focused_element(page: Page) -> Optional[ElementHandle]:
    """The element that has the focus, down through frames and shadow roots (as the browser
    holds it, a handle), or None when nothing editable-looking has it."""
    return await _down_frames(page, _ACTIVE, None)


async def _down_frames(page: Page, script: str, point: Optional[tuple[float, float]]) -> Optional[ElementHandle]:
    """The element ``script`` finds in the main frame and, while it is a frame, in that frame
    (``point`` moved into the frame's own coordinates); None for nothing or the page itself."""
    frame = page.main_frame
    for _ in range(16):
        element = (await frame.evaluate_handle(script, list(point) if point is not None else None)).as_element()
        if element is None:
            return None
        inner = await element.content_frame()
        if inner is None:
            tag = str(await element.evaluate("e => e.tagName")).lower()
            return None if tag in ("body", "html") else element
        if point is not None:
            offset = await element.evaluate(_CONTENT_ORIGIN)
            point = (point[0] - offset[0], point[1] - offset[1])
        frame = inner
    return None


_AT_POINT = """([x, y]) => { let e = document.elementFromPoint(x, y);
  while (e && e.shadowRoot) { const inner = e.shadowRoot.elementFromPoint(x, y); if (!inner || inner === e) break; e = inner; }
  return e; }"""

#: Where a frame element's document starts in its parent's viewport (border and padding in).
_CONTENT_ORIGIN = """(e) => { const r = e.getBoundingClientRect(), s = getComputedStyle(e);
  return [r.left + e.clientLeft + parseFloat(s.paddingLeft || '0'), r.top + e.clientTop + parseFloat(s.paddingTop || '0')]; }"""


def _with_secrets(env: BrowserEnv, args: WriteArgs, documents: list[str]) -> tuple[WriteArgs, Optional[ToolResult]]:
    """``args`` with its placeholders resolved, just before the keys are sent: the value exists
    only here, for the keystrokes; everything else sees the placeholder. A secret bound to hosts
    (the ``secrets_allowed_on`` setting) is refused when the page or the document the keys go to
    (a frame) is elsewhere; a secret that is not set is refused too."""
    bound = getattr(getattr(env, "settings", None), "secrets_allowed_on", None) or {}
    for name in dict.fromkeys(m.group(1) for m in secrets.PLACEHOLDER.finditer(args.message)):
        hosts = bound.get(name)
        if hosts is None:
            continue
        if not hosts:
            return args, ToolResult.failure(f"secret {name} may be typed on no page (secrets_allowed_on lists no "
                                            "host for it), so nothing was typed", kind="policy.secret_refused")
        policy = DomainPolicy(allowed=list(hosts))
        for url in documents:
            if not url.startswith(("http:", "https:")) or policy.refusal(url):
                where = ("in a frame that hides where it is" if url == _HIDDEN
                         else f"on {urlsplit(url).hostname or url[:40]}")
                return args, ToolResult.failure(
                    f"secret {name} may be typed only on {', '.join(hosts)}; the field is {where}, "
                    "so nothing was typed", kind="policy.secret_refused")
    try:
        return args.model_copy(update={"message": secrets.resolve(args.message, env.secret_lookup)}), None
    except secrets.SecretMissing as err:
        return args, ToolResult.failure(str(err), kind="action.failed")


_HIDDEN = "about:hidden-frame"


_ACTIVE = """() => { let e = document.activeElement;
  while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement; return e; }"""


def _held_feedback(args: WriteArgs, held: Optional[str]) -> str:
    if held is None or not args.clear:
        return ""
    if held.strip() == args.message.strip() or held.replace("\r\n", "\n") == args.message:
        return ""
    if " ".join(held.split()) == " ".join(args.message.split()):  # an editor's lines are its own markup
        return ""
    return f'the field holds "{short(held, 80)}", not what was typed (a length limit, a format or the page changed it)'


class PressKeysArgs(_Args):
    keys: Union[list[str], str] = Field(description='a key or keys, e.g. "Enter", ["ctrl", "a"], "PageDown"')
    is_hotkey: bool = Field(False, description="press the keys together as one combination (e.g. ctrl+c)")
    presses: int = Field(1, ge=1, le=50, description="how many times to press")
    unknown: Literal["fail", "skip", "as_given"] = Field(
        "fail", description="a key name it does not know: fail the call, or skip it (the call fails only when no key "
        "is left); as_given: the keys are Playwright's names, pressed as written (no aliases, no splitting)")
    gap_ms: int = Field(0, ge=0, le=5000, description="pause between keys pressed one after another")
    _skipped: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _normalize(self) -> "PressKeysArgs":
        given = [self.keys] if isinstance(self.keys, str) else list(self.keys)
        if self.unknown == "as_given":
            if not given:
                raise ValueError("give at least one key")
            self.keys = given
            return self
        self.keys, self.is_hotkey = normalize_keys(self.keys, self.is_hotkey, skip_unknown=self.unknown == "skip")
        self._skipped = known_keys(given)[1] if self.unknown == "skip" else []
        return self


class PressKeys(BrowserTool):
    name = "press_keys"
    description = (
        "Press keys: one after another, or together as a hotkey (is_hotkey). "
        "While a dialog is open, Enter accepts it and Escape dismisses it."
    )
    Args = PressKeysArgs
    answers_dialogs = True

    async def act(self, env: BrowserEnv, args: PressKeysArgs) -> ToolResult:
        if env.dialog is not None:
            if args.keys == ["Enter"]:
                return ToolResult(feedback=await env.answer_dialog(True))
            if args.keys == ["Escape"]:
                return ToolResult(feedback=await env.answer_dialog(False))
            raise ActionError("a dialog is open: press Enter to accept it or Escape to dismiss it, or call handle_dialog",
                              kind="action.dialog_blocked")
        keyboard = env.page.keyboard
        pauses = args.gap_ms and not args.is_hotkey and len(args.keys) > 1
        for _ in range(args.presses):
            if args.is_hotkey:
                await keyboard.press("+".join(args.keys))
            else:
                for key in args.keys:
                    await keyboard.press(key)
                    if pauses:
                        await asyncio.sleep(args.gap_ms / 1000)
        skipped = args._skipped
        # data.keys: the names pressed, after the key-name corrections (what a status line lists)
        return ToolResult(feedback=f"skipped keys it does not know: {', '.join(skipped)}" if skipped else "",
                          data={"keys": list(args.keys)})


class SelectOptionArgs(TargetArgs):
    value: Optional[str] = Field(None, description="the option's value or its visible text")
    label: Optional[str] = Field(None, description="the option's visible text (exact)")

    @model_validator(mode="after")
    def _one_choice(self) -> "SelectOptionArgs":
        if (self.value is None) == (self.label is None):
            raise ValueError("give exactly one of value or label")
        return self


_OPTIONS = "el => el.options ? Array.from(el.options).map(o => [o.value, o.label || o.text]) : null"


_ELEMENT_AT = """([x, y]) => {
  let el = document.elementFromPoint(x, y);
  while (el && el.shadowRoot) { const inner = el.shadowRoot.elementFromPoint(x, y); if (!inner || inner === el) break; el = inner; }
  return el;
}"""


async def _element(env: BrowserEnv, target: Target) -> tuple[Located, Union[Locator, ElementHandle]]:
    """(where, the element): the element under a point (through shadow roots), or the locator
    of a ref or selector."""
    where = env.locate(target)
    if where.point is None:
        assert where.locator is not None  # locate() gives a point or a locator
        return where, where.locator
    handle = await env.page.evaluate_handle(_ELEMENT_AT, list(where.point))
    element = handle.as_element()
    if element is None:
        raise ActionError(f"there is no element at {where.description}", kind="action.no_element")
    return where, element


class SelectOption(BrowserTool):
    name = "select_option"
    description = "Choose an option in a <select> dropdown, by its value or its label."
    Args = SelectOptionArgs

    async def act(self, env: BrowserEnv, args: SelectOptionArgs) -> ToolResult:
        where, element = await _element(env, args.target)
        options = await element.evaluate(_OPTIONS)
        if options is None:
            raise ActionError(
                f"{where.description} is not a <select>. It may be a custom dropdown: click it, then click the option.",
                kind="action.no_option",
            )
        wanted = args.label if args.label is not None else args.value
        # the way Playwright matches: a label exactly, a value against the option's value or label
        present = any(wanted == label or (args.label is None and wanted == value) for value, label in options)
        # an option that is there is chosen within the action's timeout (a loaded machine may
        # take more than a second to find the select actionable); one that is not gets a second
        # to appear (a list filled in by the page) before the options are listed
        timeout = None if present else 1000
        try:
            if args.label is not None:
                chosen = await element.select_option(label=args.label, timeout=timeout)
            else:
                chosen = await element.select_option(args.value, timeout=timeout)
        except Exception as err:
            if present or ("Timeout" not in str(err) and "did not find" not in str(err)):
                raise
            try:
                options = await element.evaluate(_OPTIONS) or options  # as they are now
            except Exception:  # noqa: BLE001 - the element went away: list what was there
                pass
            listed = ", ".join(f'"{short(label, 30)}"' for _, label in options[:12])
            raise ActionError(f'no option "{wanted}" in {where.description}; its options are: {listed}',
                              kind="action.no_option") from None
        return ToolResult(data={"selected": chosen})


class SetCheckedArgs(TargetArgs):
    checked: bool = Field(True, description="true to tick the box or choose the radio, false to clear the box")


_CHECKABLE = """el => {
  const type = (el.getAttribute && (el.getAttribute('type') || '').toLowerCase()) || '';
  const role = (el.getAttribute && el.getAttribute('role')) || '';
  if (el.tagName === 'INPUT' && (type === 'checkbox' || type === 'radio')) return type;
  if (['checkbox', 'radio', 'switch', 'menuitemcheckbox', 'menuitemradio'].includes(role)) return role;
  if (el.tagName === 'LABEL' && el.control && ['checkbox', 'radio'].includes((el.control.type || '').toLowerCase()))
    return el.control.type.toLowerCase();
  return '';
}"""


class SetChecked(BrowserTool):
    name = "set_checked"
    description = ("Tick or clear a checkbox, or choose a radio button (checked: true or false). "
                   "Does nothing when the box is already as asked.")
    Args = SetCheckedArgs

    async def act(self, env: BrowserEnv, args: SetCheckedArgs) -> ToolResult:
        where, element = await _element(env, args.target)
        kind = await element.evaluate(_CHECKABLE)
        if not kind:
            raise ActionError(f"{where.description} is not a checkbox or a radio button; click it instead",
                              kind="action.not_checkable")
        if kind.endswith("radio") and not args.checked:
            raise ActionError(f"{where.description} is a radio button: it cannot be cleared, only another one "
                              "of its group chosen (set_checked with checked true on that one)",
                              kind="action.not_checkable")
        await element.set_checked(args.checked)
        return ToolResult(data={"checked": args.checked, "kind": kind})
