"""What the CLI prints, safe for the terminal it prints to.

Page text reaches the terminal through owrl's live view, ``inspect``, ``tasks``, ``doctor``
and error lines: a title, an alert's message, an extracted value. A page can put terminal
escape sequences in it: set the window title, disguise a hyperlink (OSC 8), clear the
screen, write the clipboard (OSC 52). Rich drops BEL and CR from what it prints, but not
ESC. :class:`SafeConsole` removes every C0 control but newline and tab, DEL and every C1
control from the text it prints, before Rich adds its own styling (which is what may emit
escape sequences); :func:`terminal_safe` does the same for a plain line.
"""

from __future__ import annotations

import re
from typing import Iterable

from rich.console import Console
from rich.segment import Segment

#: C0 controls but tab and newline, DEL, and C1 controls (0x80-0x9f: CSI, OSC and ST among them).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` without the characters a terminal would act on (see the module's notes)."""
    return _CONTROLS.sub("", text)


class SafeConsole(Console):
    """A Rich console whose printed text cannot drive the terminal (see the module's notes).
    Rich's own control segments (cursor moves of a live display) pass unchanged."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(terminal_safe(segment.text), segment.style, segment.control)
            for segment in buffer)


__all__ = ["SafeConsole", "terminal_safe"]
