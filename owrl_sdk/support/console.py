"""What the CLI prints, safe for the terminal it prints to.

Page text reaches the terminal through owrl's live view, ``inspect``, ``tasks``, ``doctor``
and error lines: a title, an alert's message, an extracted value. A page can put terminal
escape sequences in it: set the window title, disguise a hyperlink (OSC 8), clear the
screen, write the clipboard (OSC 52). Rich drops BEL and CR from what it prints, but not
ESC. :class:`SafeConsole` removes every C0 control but newline and tab, DEL and every C1
control from the text it prints, before Rich adds its own styling (which is what may emit
escape sequences); :func:`terminal_safe` does the same for a plain line.

Both also show the invisible characters that reorder text (bidirectional overrides,
embeddings and isolates, U+202A-U+202E, U+2066-U+2069, and the direction marks) as visible
``<U+202E>``: a page could otherwise make a line read as something else than it holds (an
address, a name, an amount shown backwards).
"""

from __future__ import annotations

import re
from typing import Iterable

from rich.console import Console
from rich.segment import Segment

#: C0 controls but tab and newline, DEL, and C1 controls (0x80-0x9f: CSI, OSC and ST among them).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


#: Characters that reorder the text around them without being seen.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` without the characters a terminal would act on, and with those that reorder
    text shown (see the module's notes)."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", _CONTROLS.sub("", text))


class SafeConsole(Console):
    """A Rich console whose printed text cannot drive the terminal (see the module's notes).
    Rich's own control segments (cursor moves of a live display) pass unchanged."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(terminal_safe(segment.text), segment.style, segment.control)
            for segment in buffer)


__all__ = ["SafeConsole", "terminal_safe"]
