"""The browser tools: OpenWebRL's set plus our additions (refs, selectors, select_option, handle_dialog).

Each tool acts through :class:`owrl_sdk.browser.BrowserEnv`; the environment adds what
changed to the feedback, so a tool only reports what the page cannot show (the value a
field really holds, a scroll that hit the end). Tools raise
:class:`~owrl_sdk.browser.errors.ActionError` with a message for the model; Playwright's
own errors are explained by the environment.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from owrl_sdk import secrets
from owrl_sdk.browser.env import BrowserEnv
from owrl_sdk.browser.errors import ActionError
from owrl_sdk.browser.feedback import short
from owrl_sdk.tools import Tool, TargetArgs
from owrl_sdk.types import Target, ToolResult

from .keys import normalize_keys

Point = Optional[list[float]]
POINT_HELP = "[x, y] on the 0-1000 grid of the viewport"
REF_HELP = "element ref from the latest page snapshot, e.g. e12"
SELECTOR_HELP = 'Playwright selector, e.g. role=button[name="Go"], text=Go or CSS'


class BrowserTool(Tool):
    """A tool that acts on the page; it runs only in a :class:`BrowserEnv`."""

    needs_page = True

    def available(self, env: Any) -> bool:
        return isinstance(env, BrowserEnv)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _grid_point(v: Point) -> Point:
    """The same check as :class:`Target`'s: two numbers within 0..1000."""
    if v is None:
        return v
    if len(v) != 2:
        raise ValueError("a point must be [x, y], two numbers")
    for c in v:
        if not 0 <= c <= 1000:
            raise ValueError(f"point coordinates must lie within 0..1000, got {c:g}")
    return v


class _OptionalTarget(_Args):
    """At most one of point_2d, ref or selector."""

    point_2d: Point = Field(None, description=POINT_HELP)
    ref: Optional[str] = Field(None, description=REF_HELP)
    selector: Optional[str] = Field(None, description=SELECTOR_HELP)

    _point = field_validator("point_2d")(classmethod(lambda cls, v: _grid_point(v)))

    @model_validator(mode="after")
    def _at_most_one(self):
        given = [k for k in ("point_2d", "ref", "selector") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of point_2d, ref or selector (got {', '.join(given)})")
        return self

    @property
    def target(self) -> Optional[Target]:
        if self.point_2d is None and self.ref is None and self.selector is None:
            return None
        return Target(point_2d=self.point_2d, ref=self.ref, selector=self.selector)


# ---------------------------------------------------------------------------- pointer

#: What is at a viewport point (or, given null, has the focus), in a few words: tag, type,
#: role, checked (for a point), and its aria-label (or, when focused, its placeholder) or
#: the first 30 characters of its text.
_DESCRIBE = """(point) => {
  const el = point ? document.elementFromPoint(point[0], point[1]) : document.activeElement;
  if (!el || (!point && el === document.body)) return null;
  const text = (el.textContent || '').trim().replace(/\\s+/g, ' ');
  return {tag: el.tagName.toLowerCase(), type: el.getAttribute('type') || '', role: el.getAttribute('role') || '',
          checked: point && typeof el.checked === 'boolean' ? el.checked : null,
          label: el.getAttribute('aria-label') || (point ? '' : el.getAttribute('placeholder') || ''),
          text: text.length > 30 ? text.slice(0, 30) + '...' : text};
}"""


async def describe_element(env: BrowserEnv, point: Optional[tuple[float, float]]) -> Optional[dict[str, Any]]:
    """The element at ``point`` (None: the focused one) as data, or None when there is none."""
    try:
        return await env.page.evaluate(_DESCRIBE, list(point) if point is not None else None)
    except Exception:  # noqa: BLE001 - a page mid-navigation: the description is only a courtesy
        return None


class ClickArgs(TargetArgs):
    clicks: int = Field(1, ge=1, le=3, description="1 for a click, 2 for a double click, 3 for a triple click")
    button: Literal["left", "right", "middle"] = "left"


class Click(BrowserTool):
    name = "click"
    description = "Click an element, given by point_2d (0-1000 grid), a ref from the page snapshot, or a selector."
    Args = ClickArgs

    async def run(self, env: BrowserEnv, args: ClickArgs) -> ToolResult:
        where = env.locate(args.target)
        if where.point is not None:
            element = await describe_element(env, where.point)
            await env.page.mouse.click(*where.point, button=args.button, click_count=args.clicks)
            return ToolResult(data={"point": list(where.point), "element": element})
        await where.locator.click(button=args.button, click_count=args.clicks)
        return ToolResult()


class HoverArgs(TargetArgs):
    pass


class Hover(BrowserTool):
    name = "hover"
    description = "Move the mouse over an element (opens hover menus, shows tooltips)."
    Args = HoverArgs

    async def run(self, env: BrowserEnv, args: HoverArgs) -> ToolResult:
        where = env.locate(args.target)
        if where.point is not None:
            element = await describe_element(env, where.point)
            await env.page.mouse.move(*where.point)
            return ToolResult(data={"point": list(where.point), "element": element})
        await where.locator.hover()
        return ToolResult()


class DragArgs(_Args):
    start_point_2d: Point = Field(None, description="where the drag starts, " + POINT_HELP)
    end_point_2d: Point = Field(None, description="where the drag ends, " + POINT_HELP)
    start_ref: Optional[str] = Field(None, description="element to drag, a ref from the snapshot")
    end_ref: Optional[str] = Field(None, description="element to drop on, a ref from the snapshot")
    start_selector: Optional[str] = Field(None, description="element to drag, a selector")
    end_selector: Optional[str] = Field(None, description="element to drop on, a selector")
    steps: Optional[int] = Field(None, ge=1, le=200, description="mouse moves from start to end (default: a short "
                                 "first step, then a glide of 12)")

    _points = field_validator("start_point_2d", "end_point_2d")(classmethod(lambda cls, v: _grid_point(v)))

    @model_validator(mode="after")
    def _one_each(self):
        for end in ("start", "end"):
            given = [k for k in (f"{end}_point_2d", f"{end}_ref", f"{end}_selector") if getattr(self, k) is not None]
            if len(given) != 1:
                named = ", ".join(given) if given else "none"
                raise ValueError(f"give exactly one of {end}_point_2d, {end}_ref or {end}_selector (got {named})")
        return self

    def end(self, which: str) -> Target:
        return Target(
            point_2d=getattr(self, f"{which}_point_2d"),
            ref=getattr(self, f"{which}_ref"),
            selector=getattr(self, f"{which}_selector"),
        )


class Drag(BrowserTool):
    name = "drag"
    description = "Press the mouse at a start point, move to an end point and release (sliders, drag and drop)."
    Args = DragArgs

    async def run(self, env: BrowserEnv, args: DragArgs) -> ToolResult:
        start = await env.point_of(env.locate(args.end("start")))
        end = await env.point_of(env.locate(args.end("end")))
        mouse = env.page.mouse
        await mouse.move(*start)
        await mouse.down()
        if args.steps is not None:
            await mouse.move(*end, steps=args.steps)
        else:
            # a first small step starts the drag as a hand would, then glide to the end
            await mouse.move(start[0] + (5 if end[0] >= start[0] else -5), start[1], steps=2)
            await mouse.move(*end, steps=12)
        await mouse.up()
        return ToolResult()


class ScrollArgs(_Args):
    direction: Literal["up", "down", "left", "right"]
    amount: float = Field(5, gt=0, le=100, description="how far, in mouse-wheel notches of 100 px (5 is half a page)")
    point_2d: Point = Field(None, description="where to scroll (default: the middle of the viewport), " + POINT_HELP)

    _point = field_validator("point_2d")(classmethod(lambda cls, v: _grid_point(v)))


_SCROLL_STATE = """([x, y]) => {
  let doc = document, el = doc.elementFromPoint(x, y);
  while (el && el.tagName === 'IFRAME') {
    let inner; try { inner = el.contentDocument; } catch (e) { inner = null; }
    if (!inner) break;
    const r = el.getBoundingClientRect(); x -= r.left; y -= r.top; doc = inner; el = doc.elementFromPoint(x, y);
  }
  const root = doc.scrollingElement || doc.documentElement;
  const scrolls = (e) => {
    const s = getComputedStyle(e);
    return (/(auto|scroll|overlay)/.test(s.overflowY) && e.scrollHeight > e.clientHeight) ||
           (/(auto|scroll|overlay)/.test(s.overflowX) && e.scrollWidth > e.clientWidth);
  };
  while (el && el !== doc.body && el !== doc.documentElement && !scrolls(el)) el = el.parentElement || (el.getRootNode() && el.getRootNode().host);
  if (!el || el === doc.body || el === doc.documentElement) el = root;
  return {page: el === root, top: el.scrollTop, left: el.scrollLeft,
          maxTop: el.scrollHeight - el.clientHeight, maxLeft: el.scrollWidth - el.clientWidth};
}"""

# the state two frames later: wheel scrolling lands a frame (or a smooth animation) after the event
_SCROLL_STATE_LATER = (
    "async (point) => { await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));"
    f" return ({_SCROLL_STATE})(point); }}"
)


class Scroll(BrowserTool):
    name = "scroll"
    description = "Scroll the page (or the scrollable area under point_2d) up, down, left or right."
    Args = ScrollArgs

    async def run(self, env: BrowserEnv, args: ScrollArgs) -> ToolResult:
        page = env.page
        width, height = env.viewport
        x, y = env.to_pixels(args.point_2d) if args.point_2d is not None else (width / 2, height / 2)
        vertical = args.direction in ("up", "down")
        sign = -1 if args.direction in ("up", "left") else 1
        pixels = args.amount * 100
        before = await page.evaluate(_SCROLL_STATE, [x, y])
        await page.mouse.move(x, y)
        await page.mouse.wheel(0 if vertical else sign * pixels, sign * pixels if vertical else 0)
        after, steady = before, 0
        for _ in range(15):
            state = await page.evaluate(_SCROLL_STATE_LATER, [x, y])
            steady = steady + 1 if state == after else 0
            after = state
            if (after != before and steady >= 1) or steady >= 3:
                break
        key = "top" if vertical else "left"
        return ToolResult(feedback=_scroll_feedback(args.direction, before, after),
                          data={"scroll": {"moved": round(after[key] - before[key]), "page": after["page"]}})


def _scroll_feedback(direction: str, before: dict, after: dict) -> str:
    vertical = direction in ("up", "down")
    key, limit = ("top", "maxTop") if vertical else ("left", "maxLeft")
    area = "the page" if after["page"] else "the scrollable area"
    moved = abs(round(after[key] - before[key]))
    edge = {"down": "bottom", "up": "top", "left": "left edge", "right": "right edge"}[direction]
    at_edge = after[key] <= 0.5 if direction in ("up", "left") else after[key] >= after[limit] - 1
    if moved == 0:
        if after[limit] <= 0:
            return f"{area} did not move: there is nothing to scroll {direction} here"
        if at_edge:
            return f"{area} did not move: it is already at the {edge}"
        return f"{area} did not move (the content under that point may not scroll)"
    where = f"now at {round(after[key])} of {round(after[limit])} px"
    text = f"scrolled {direction} {moved} px ({where})" if after["page"] else f"scrolled the scrollable area {direction} {moved} px ({where})"
    if at_edge:
        text += f"; reached the {edge}: {area} cannot scroll further {direction}"
    return text


# ---------------------------------------------------------------------------- keyboard


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

_VALUE = "el => ('value' in el && typeof el.value === 'string') ? el.value : (el.innerText ?? '')"


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

    async def run(self, env: BrowserEnv, args: WriteArgs) -> ToolResult:
        if secrets.has_placeholder(args.message):
            # the value exists only here, for the keystrokes; everything else sees the placeholder
            try:
                args = args.model_copy(update={"message": secrets.resolve(args.message, env.secret_lookup)})
            except secrets.SecretMissing as err:
                return ToolResult.failure(str(err), kind="action.failed")
        page = env.page
        target = args.target
        if target is not None and target.point_2d is None:
            locator = env.locate(target).locator
            if args.clear:
                await locator.fill(args.message)
            else:
                await locator.focus()
                await page.keyboard.press("End")
                await page.keyboard.type(args.message)
            held = await locator.evaluate(_VALUE)
            return ToolResult(feedback=_held_feedback(args, held))
        if target is not None:
            await page.mouse.click(*env.to_pixels(target.point_2d))
        element = await describe_element(env, None)
        focused = await page.evaluate(_FOCUSED, args.clear)
        if args.clear and focused["editable"]:
            await page.keyboard.press("ControlOrMeta+a")
            if not args.message:
                await page.keyboard.press("Delete")
        await page.keyboard.type(args.message)
        if not focused["editable"]:
            return ToolResult(
                feedback="no text field had focus, so the keys went to the page; "
                "to fill a field, give its point_2d, ref or selector"
            )
        after = await page.evaluate(_FOCUSED, False)
        return ToolResult(feedback=_held_feedback(args, after["value"]),
                          data={"element": element, "value": after["value"]})


def _held_feedback(args: WriteArgs, held: Optional[str]) -> str:
    if held is None or not args.clear:
        return ""
    if held.strip() == args.message.strip() or held.replace("\r\n", "\n") == args.message:
        return ""
    return f'the field holds "{short(held, 80)}", not what was typed (a length limit, a format or the page changed it)'


class PressKeysArgs(_Args):
    keys: Union[list[str], str] = Field(description='a key or keys, e.g. "Enter", ["ctrl", "a"], "PageDown"')
    is_hotkey: bool = Field(False, description="press the keys together as one combination (e.g. ctrl+c)")
    presses: int = Field(1, ge=1, le=50, description="how many times to press")

    @model_validator(mode="after")
    def _normalize(self):
        self.keys, self.is_hotkey = normalize_keys(self.keys, self.is_hotkey)
        return self


class PressKeys(BrowserTool):
    name = "press_keys"
    description = (
        "Press keys: one after another, or together as a hotkey (is_hotkey). "
        "While a dialog is open, Enter accepts it and Escape dismisses it."
    )
    Args = PressKeysArgs
    answers_dialogs = True

    async def run(self, env: BrowserEnv, args: PressKeysArgs) -> ToolResult:
        if env.dialog is not None:
            if args.keys == ["Enter"]:
                return ToolResult(feedback=await env.answer_dialog(True))
            if args.keys == ["Escape"]:
                return ToolResult(feedback=await env.answer_dialog(False))
            raise ActionError("a dialog is open: press Enter to accept it or Escape to dismiss it, or call handle_dialog",
                              kind="action.dialog_blocked")
        keyboard = env.page.keyboard
        for _ in range(args.presses):
            if args.is_hotkey:
                await keyboard.press("+".join(args.keys))
            else:
                for key in args.keys:
                    await keyboard.press(key)
        return ToolResult()


# ---------------------------------------------------------------------------- forms and dialogs


class SelectOptionArgs(TargetArgs):
    value: Optional[str] = Field(None, description="the option's value or its visible text")
    label: Optional[str] = Field(None, description="the option's visible text (exact)")

    @model_validator(mode="after")
    def _one_choice(self):
        if (self.value is None) == (self.label is None):
            raise ValueError("give exactly one of value or label")
        return self


_OPTIONS = "el => el.options ? Array.from(el.options).map(o => o.label || o.text) : null"
_ELEMENT_AT = """([x, y]) => {
  let el = document.elementFromPoint(x, y);
  while (el && el.shadowRoot) { const inner = el.shadowRoot.elementFromPoint(x, y); if (!inner || inner === el) break; el = inner; }
  return el;
}"""


class SelectOption(BrowserTool):
    name = "select_option"
    description = "Choose an option in a <select> dropdown, by its value or its label."
    Args = SelectOptionArgs

    async def run(self, env: BrowserEnv, args: SelectOptionArgs) -> ToolResult:
        where = env.locate(args.target)
        if where.point is not None:
            handle = await env.page.evaluate_handle(_ELEMENT_AT, list(where.point))
            element = handle.as_element()
            if element is None:
                raise ActionError(f"there is no element at {where.description}", kind="action.no_element")
        else:
            element = where.locator
        options = await element.evaluate(_OPTIONS)
        if options is None:
            raise ActionError(
                f"{where.description} is not a <select>. It may be a custom dropdown: click it, then click the option.",
                kind="action.no_option",
            )
        wanted = args.label if args.label is not None else args.value
        try:
            if args.label is not None:
                chosen = await element.select_option(label=args.label, timeout=1000)
            else:
                chosen = await element.select_option(args.value, timeout=1000)
        except Exception as err:
            if "Timeout" not in str(err) and "did not find" not in str(err):
                raise
            listed = ", ".join(f'"{short(o, 30)}"' for o in options[:12])
            raise ActionError(f'no option "{wanted}" in {where.description}; its options are: {listed}',
                              kind="action.no_option") from None
        return ToolResult(data={"selected": chosen})


class HandleDialogArgs(_Args):
    accept: bool = Field(True, description="true to press OK (accept), false to press Cancel (dismiss)")
    prompt_text: Optional[str] = Field(
        None,
        validation_alias=AliasChoices("prompt_text", "text"),
        description="the text to enter in a prompt dialog",
    )


class HandleDialog(BrowserTool):
    name = "handle_dialog"
    description = (
        "Answer the open JavaScript dialog (alert, confirm, prompt, leave-page): accept or dismiss it. "
        "Called when none is open, it decides how the next dialog is answered."
    )
    Args = HandleDialogArgs
    answers_dialogs = True

    async def run(self, env: BrowserEnv, args: HandleDialogArgs) -> ToolResult:
        return ToolResult(feedback=await env.answer_dialog(args.accept, args.prompt_text))


# ---------------------------------------------------------------------------- navigation and tabs


class GotoUrlArgs(_Args):
    url: str = Field(description="the address to open, e.g. https://example.com/")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("give an address, e.g. https://example.com/")
        if v.lower().startswith("javascript:"):
            raise ValueError("javascript: addresses are not allowed")
        if "://" not in v and not v.startswith(("about:", "data:", "file:")):
            v = "https://" + v
        return v


class GotoUrl(BrowserTool):
    name = "goto_url"
    description = "Open an address in the current tab."
    Args = GotoUrlArgs

    async def run(self, env: BrowserEnv, args: GotoUrlArgs) -> ToolResult:
        refused = env.domains.refusal(args.url)
        if refused:
            return ToolResult.failure(f"cannot open {args.url}: {refused}", kind="policy.blocked_domain")
        page = env.page
        previous = page.url
        try:
            await page.goto(args.url, wait_until="load")
        except Exception as err:
            if "Timeout" in str(err) and page.url != previous:
                return ToolResult(feedback="the page is still loading")
            raise
        return ToolResult()


class GoBack(BrowserTool):
    name = "go_back"
    description = "Go back to the previous page in this tab."

    async def run(self, env: BrowserEnv, args: Any) -> ToolResult:
        page = env.page
        previous = page.url
        response = await page.go_back(wait_until="load")
        if response is None and page.url == previous:
            raise ActionError("there is no earlier page in this tab's history", kind="action.no_history")
        if page.url == "about:blank" and previous != "about:blank":
            # the blank page every tab starts on is not a page to go back to
            await page.go_forward(wait_until="load")
            raise ActionError("there is no earlier page in this tab's history", kind="action.no_history")
        return ToolResult()


class NewTabArgs(_Args):
    url: Optional[str] = Field(None, description="address to open in the new tab (default: a blank page)")

    @field_validator("url")
    @classmethod
    def _url(cls, v: Optional[str]) -> Optional[str]:
        return GotoUrlArgs._url(v) if v is not None and v.strip() else None


class NewTab(BrowserTool):
    name = "new_tab"
    description = "Open a new tab (optionally at url); it becomes the active tab."
    Args = NewTabArgs

    async def run(self, env: BrowserEnv, args: NewTabArgs) -> ToolResult:
        await env.open_tab(args.url)
        return ToolResult()


class SwitchTabArgs(_Args):
    tab_index: int = Field(ge=0, description="the tab's index, 0 for the first (see the list of tabs)")


class SwitchTab(BrowserTool):
    name = "switch_tab"
    description = "Make another tab the active one."
    Args = SwitchTabArgs

    async def run(self, env: BrowserEnv, args: SwitchTabArgs) -> ToolResult:
        await env.switch_tab(args.tab_index)
        return ToolResult()  # the environment reports the tab that became active


class CloseTabArgs(_Args):
    tab_index: Optional[int] = Field(None, ge=0, description="the tab to close (default: the active one)")


class CloseTab(BrowserTool):
    name = "close_tab"
    description = "Close the active tab (or the tab given by tab_index)."
    Args = CloseTabArgs

    async def run(self, env: BrowserEnv, args: CloseTabArgs) -> ToolResult:
        await env.close_tab(args.tab_index)
        return ToolResult()


BROWSER_TOOLS = (
    Click,
    Write,
    PressKeys,
    Scroll,
    Hover,
    Drag,
    GotoUrl,
    GoBack,
    NewTab,
    SwitchTab,
    CloseTab,
    SelectOption,
    HandleDialog,
)
