"""The pointer tools: click, hover, drag and scroll, at a point, a ref or a selector."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from owrl_sdk.api import BrowserEnv, Target, TargetArgs, ToolResult

from .base import POINT_HELP, BrowserTool, Point, _Args, _grid_point, describe_element

class ClickArgs(TargetArgs):
    clicks: int = Field(1, ge=1, le=3, description="1 for a click, 2 for a double click, 3 for a triple click")
    button: Literal["left", "right", "middle"] = "left"


class Click(BrowserTool):
    name = "click"
    description = "Click an element, given by point_2d (0-1000 grid), a ref from the page snapshot, or a selector."
    Args = ClickArgs

    async def act(self, env: BrowserEnv, args: ClickArgs) -> ToolResult:
        where = env.locate(args.target)
        if where.point is not None:
            element = await describe_element(env, where.point)
            await env.page.mouse.click(*where.point, button=args.button, click_count=args.clicks)
            return ToolResult(data={"point": list(where.point), "element": element})
        assert where.locator is not None  # locate() gives a point or a locator
        await where.locator.click(button=args.button, click_count=args.clicks)
        return ToolResult()


class HoverArgs(TargetArgs):
    pass


class Hover(BrowserTool):
    name = "hover"
    description = "Move the mouse over an element (opens hover menus, shows tooltips)."
    Args = HoverArgs

    async def act(self, env: BrowserEnv, args: HoverArgs) -> ToolResult:
        where = env.locate(args.target)
        if where.point is not None:
            element = await describe_element(env, where.point)
            await env.page.mouse.move(*where.point)
            return ToolResult(data={"point": list(where.point), "element": element})
        assert where.locator is not None  # locate() gives a point or a locator
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
    def _one_each(self) -> "DragArgs":
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

    async def act(self, env: BrowserEnv, args: DragArgs) -> ToolResult:
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
    by: Literal["wheel", "script"] = Field("wheel", description="wheel: turn the mouse wheel at the point (the "
                                           "page sees a wheel event); script: scroll the nearest scrollable "
                                           "area under point_2d, else the window, as a script would (no event)")

    _point = field_validator("point_2d")(classmethod(lambda cls, v: _grid_point(v)))


# by = "script": the nearest ancestor of the element at the point that scrolls on the axis
# (none without a point), else the window; scrolled with scrollBy, then read until steady
# (a smooth scroll lands over a few frames). Returns the state before and after.
_SCRIPT_SCROLL = """async ([x, y, dx, dy, atPoint]) => {
  const root = document.scrollingElement || document.documentElement;
  let el = atPoint ? document.elementFromPoint(x, y) : null, target = null;
  while (el && el !== document.body && el !== document.documentElement) {
    const s = getComputedStyle(el);
    const scrolls = dy ? /(auto|scroll)/.test(s.overflowY) && el.scrollHeight > el.clientHeight
                       : /(auto|scroll)/.test(s.overflowX) && el.scrollWidth > el.clientWidth;
    if (scrolls) { target = el; break; }
    el = el.parentElement;
  }
  const box = target || root;
  const state = () => ({page: !target, top: box.scrollTop, left: box.scrollLeft,
                        maxTop: box.scrollHeight - box.clientHeight, maxLeft: box.scrollWidth - box.clientWidth});
  const before = state();
  (target || window).scrollBy(dx, dy);
  let after = state(), steady = 0;
  for (let i = 0; i < 30 && steady < 2; i++) {
    await new Promise(r => setTimeout(r, 20));
    const now = state();
    steady = now.top === after.top && now.left === after.left ? steady + 1 : 0;
    after = now;
  }
  return [before, after];
}"""


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

    async def act(self, env: BrowserEnv, args: ScrollArgs) -> ToolResult:
        page = env.page
        width, height = env.viewport
        x, y = env.to_pixels(args.point_2d) if args.point_2d is not None else (width / 2, height / 2)
        vertical = args.direction in ("up", "down")
        sign = -1 if args.direction in ("up", "left") else 1
        pixels = args.amount * 100
        if args.by == "script":
            if args.point_2d is not None:
                await page.mouse.move(x, y)
            dx, dy = (0, sign * pixels) if vertical else (sign * pixels, 0)
            before, after = await page.evaluate(_SCRIPT_SCROLL, [x, y, dx, dy, args.point_2d is not None])
            return _scrolled(args.direction, before, after)
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
        return _scrolled(args.direction, before, after)


def _scrolled(direction: str, before: dict[str, Any], after: dict[str, Any]) -> ToolResult:
    key = "top" if direction in ("up", "down") else "left"
    return ToolResult(feedback=_scroll_feedback(direction, before, after),
                      data={"scroll": {"moved": round(after[key] - before[key]), "page": after["page"]}})


def _scroll_feedback(direction: str, before: dict[str, Any], after: dict[str, Any]) -> str:
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
