"""Targets: a ``point_2d``, a snapshot ref or a selector, resolved on the active tab.

``point_2d`` is on the 0-1000 grid of the viewport; a ref (``e12``, ``f1e6`` inside a frame)
comes from the latest aria snapshot, and a stale one is found again once by the role and
name it had in the snapshot the policy saw; a selector may step into iframes with ``>>>``.
The mixin reads the environment's ``page``, ``settings``, ``_snapshot`` and ``_observed``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from owrl_sdk.types import Target
from owrl_sdk.browser.errors import ActionError
from owrl_sdk.browser.geometry import box_center, grid_to_pixels
from owrl_sdk.browser.state import EnvState

if TYPE_CHECKING:  # pragma: no cover
    from playwright.async_api import Locator


@dataclass
class Located:
    """A resolved target: a viewport point or a locator, and how to name it in messages."""

    description: str
    point: Optional[tuple[float, float]] = None
    locator: Optional["Locator"] = None


_ROLE_NAME = re.compile(r'\s*-\s+([a-z]+)\s+"((?:[^"\\]|\\.)*)"')


class TargetsMixin(EnvState):
    """Resolving targets to viewport points or locators (for tools)."""

    @property
    def viewport(self) -> tuple[int, int]:
        return self.settings.viewport_width, self.settings.viewport_height

    def to_pixels(self, point_2d: Sequence[float]) -> tuple[float, float]:
        """A ``point_2d`` on the 0-1000 grid as viewport pixels."""
        return grid_to_pixels(point_2d, *self.viewport)

    def locate(self, target: Target) -> Located:
        """Resolve a target to a viewport point or to a locator on the active tab."""
        if target.point_2d is not None:
            return Located(target.describe(), point=self.to_pixels(target.point_2d))
        return Located(target.describe(), locator=self.element(ref=target.ref, selector=target.selector))

    def element(self, ref: Optional[str] = None, selector: Optional[str] = None) -> "Locator":
        """A locator for a snapshot ref (``e12``, ``f1e6``) or a selector.

        A selector may step into iframes with ``>>>``: ``iframe#pay >>> role=button[name="Pay"]``.
        """
        page = self.page
        if ref is not None:
            ref = ref.strip().removeprefix("ref=").strip("[]")
            snap = self._snapshot
            if snap is not None and snap.page is page and f"[ref={ref}]" not in snap.text:
                again = self._by_role_and_name(ref)
                if again is not None:
                    return again
                raise ActionError(
                    f"ref {ref} is not in the latest page snapshot; use a ref from the current snapshot "
                    "(refs change when the page changes), or a point_2d or selector",
                    kind="action.stale_ref",
                )
            return page.locator(f"aria-ref={ref}")
        if not selector or not selector.strip():
            raise ActionError("give a ref, a selector or a point_2d")
        *frames, inner = [part.strip() for part in selector.split(">>>")]
        scope: Any = page
        for frame in frames:
            scope = scope.frame_locator(frame)
        located: "Locator" = scope.locator(inner)
        return located

    def _by_role_and_name(self, ref: str) -> Optional["Locator"]:
        """A stale ref found again, once: by the role and name it had in the snapshot the
        policy saw, on the current page. None when it cannot be named that way."""
        observed = getattr(self, "_observed", None)
        if observed is None or observed.page is not self.page:
            return None
        for line in observed.text.splitlines():
            if f"[ref={ref}]" in line:
                m = _ROLE_NAME.match(line)
                if m is None or not m.group(2):
                    return None
                name = m.group(2).replace('\\"', '"')
                found: "Locator" = self.page.get_by_role(m.group(1), name=name, exact=True)
                return found
        return None

    async def point_of(self, located: Located) -> tuple[float, float]:
        """The viewport point of a target (the middle of an element, scrolled into view)."""
        if located.point is not None:
            return located.point
        assert located.locator is not None
        await located.locator.scroll_into_view_if_needed()
        box = await located.locator.bounding_box()
        if box is None:
            raise ActionError(f"{located.description} is not visible on the page", kind="action.not_visible")
        return box_center({"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"]})
