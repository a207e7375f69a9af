"""The browser tools: OpenWebRL's set plus our additions (refs, selectors, select_option, handle_dialog).

:data:`BROWSER_TOOLS` lists them in the order they are registered (and declared to a
model); each lives in the module of what it acts with (see :mod:`.base`). Every name that
was importable from here still is.
"""

from __future__ import annotations

from .base import POINT_HELP, REF_HELP, SELECTOR_HELP, BrowserTool, Point, describe_element
from .dialogs import HandleDialog, HandleDialogArgs
from .navigation import GoBack, GotoUrl, GotoUrlArgs
from .pointer import Click, ClickArgs, Drag, DragArgs, Hover, HoverArgs, Scroll, ScrollArgs
from .tabs import CloseTab, CloseTabArgs, NewTab, NewTabArgs, SwitchTab, SwitchTabArgs
from .text import PressKeys, PressKeysArgs, SelectOption, SelectOptionArgs, SetChecked, SetCheckedArgs, Write, WriteArgs

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
    SetChecked,
    HandleDialog,
)


__all__ = [
    "BROWSER_TOOLS", "POINT_HELP", "REF_HELP", "SELECTOR_HELP", "BrowserTool", "Point", "describe_element",
    "Click", "ClickArgs", "Hover", "HoverArgs", "Drag", "DragArgs", "Scroll", "ScrollArgs",
    "Write", "WriteArgs", "PressKeys", "PressKeysArgs", "SelectOption", "SelectOptionArgs", "SetChecked", "SetCheckedArgs",
    "HandleDialog", "HandleDialogArgs", "GotoUrl", "GotoUrlArgs", "GoBack",
    "NewTab", "NewTabArgs", "SwitchTab", "SwitchTabArgs", "CloseTab", "CloseTabArgs",
]
