"""What the browser tools share: their base class, argument helpers and the element at a point.

The tools live by what they act with: :mod:`.pointer` (click, hover, drag, scroll),
:mod:`.text` (write, press_keys, select_option), :mod:`.navigation` (goto_url, go_back),
:mod:`.tabs` (new_tab, switch_tab, close_tab) and :mod:`.dialogs` (handle_dialog).
Each acts through :class:`owrl_sdk.browser.BrowserEnv`; the environment adds what changed
to the feedback, so a tool only reports what the page cannot show. Tools raise
:class:`~owrl_sdk.browser.errors.ActionError` with a message for the model and its failure
kind; Playwright's own errors are explained (and coded) by the environment.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from owrl_sdk.api import BrowserEnv, Environment, Target, Tool, ToolResult

Point = Optional[list[float]]
POINT_HELP = "[x, y] on the 0-1000 grid of the viewport"
REF_HELP = "element ref from the latest page snapshot, e.g. e12"
SELECTOR_HELP = 'Playwright selector, e.g. role=button[name="Go"], text=Go or CSS'


class BrowserTool(Tool):
    """A tool that acts on the page; it runs only in a :class:`BrowserEnv`.

    Subclasses implement :meth:`act`, which is handed the environment as a :class:`BrowserEnv`.
    """

    needs_page = True

    def available(self, env: Any) -> bool:
        return isinstance(env, BrowserEnv)

    async def run(self, env: Environment, args: Any) -> ToolResult:
        """Run :meth:`act`; ``env`` is a browser environment, the only kind :meth:`available` accepts."""
        if not isinstance(env, BrowserEnv):
            raise TypeError(f"{self.name} runs only in a browser environment, not in {type(env).__name__}")
        return await self.act(env, args)

    async def act(self, env: BrowserEnv, args: Any) -> ToolResult:  # pragma: no cover - abstract
        raise NotImplementedError


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
    def _at_most_one(self) -> "_OptionalTarget":
        given = [k for k in ("point_2d", "ref", "selector") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give at most one of point_2d, ref or selector (got {', '.join(given)})")
        return self

    @property
    def target(self) -> Optional[Target]:
        if self.point_2d is None and self.ref is None and self.selector is None:
            return None
        return Target(point_2d=self.point_2d, ref=self.ref, selector=self.selector)


#: What is at a viewport point (or, given null, has the focus), in a few words: tag, type,
#: role, checked (for a point), and its aria-label (or, when focused, its placeholder) or
#: the first 30 characters of its text (``text``: whitespace collapsed first; ``raw_text``: the
#: text as the page holds it, cut first, which the OpenWebRL environment's lines quote).
_DESCRIBE = """(point) => {
  const el = point ? document.elementFromPoint(point[0], point[1]) : document.activeElement;
  if (!el || (!point && el === document.body)) return null;
  const raw = (el.textContent || '').trim();
  const text = raw.replace(/\\s+/g, ' ');
  return {tag: el.tagName.toLowerCase(), type: el.getAttribute('type') || '', role: el.getAttribute('role') || '',
          checked: point && typeof el.checked === 'boolean' ? el.checked : null,
          label: el.getAttribute('aria-label') || (point ? '' : el.getAttribute('placeholder') || ''),
          text: text.length > 30 ? text.slice(0, 30) + '...' : text,
          raw_text: raw.length > 30 ? raw.slice(0, 30) + '...' : raw};
}"""


async def describe_element(env: BrowserEnv, point: Optional[tuple[float, float]]) -> Optional[dict[str, Any]]:
    """The element at ``point`` (None: the focused one) as data, or None when there is none."""
    try:
        described: Optional[dict[str, Any]] = await env.page.evaluate(_DESCRIBE, list(point) if point is not None else None)
        return described
    except Exception:  # noqa: BLE001 - a page mid-navigation: the description is only a courtesy
        return None
