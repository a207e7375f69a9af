"""Key names as models write them (pyautogui style: ctrl, esc, pagedown) to Playwright's names."""

from __future__ import annotations

from typing import Union

ALIASES = {
    "ctrl": "Control", "control": "Control", "cmd": "Meta", "command": "Meta", "meta": "Meta",
    "win": "Meta", "super": "Meta", "alt": "Alt", "option": "Alt", "shift": "Shift",
    "enter": "Enter", "return": "Enter", "esc": "Escape", "escape": "Escape", "tab": "Tab",
    "space": "Space", "spacebar": "Space", "backspace": "Backspace", "delete": "Delete", "del": "Delete",
    "insert": "Insert", "ins": "Insert", "home": "Home", "end": "End",
    "pageup": "PageUp", "pgup": "PageUp", "pagedown": "PageDown", "pgdn": "PageDown",
    "up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight",
    "arrowup": "ArrowUp", "arrowdown": "ArrowDown", "arrowleft": "ArrowLeft", "arrowright": "ArrowRight",
    "capslock": "CapsLock", "numlock": "NumLock", "printscreen": "PrintScreen", "contextmenu": "ContextMenu",
    "plus": "+", "minus": "-",
}
ALIASES.update({f"f{i}": f"F{i}" for i in range(1, 13)})
MODIFIERS = {"Control", "Meta", "Alt", "Shift"}
EXAMPLES = "Enter, Tab, Escape, Backspace, Delete, ArrowDown, PageDown, Home, ctrl, shift, alt, F5 or one character"


def key_name(key: str) -> str:
    """One key as Playwright names it; raises ValueError for a name it would not know."""
    if len(key) == 1:
        return key
    compact = key.strip().lower().replace("_", "").replace("-", "").replace(" ", "")
    if compact in ALIASES:
        return ALIASES[compact]
    if len(key.strip()) == 1:
        return key.strip()
    if key.startswith(("Key", "Digit", "Numpad")) or key in ALIASES.values():
        return key
    raise ValueError(f"unknown key '{key}'; use names like {EXAMPLES} (to type text, use write)")


def known_keys(keys: list[str]) -> tuple[list[str], list[str]]:
    """The keys Playwright would know (as :func:`key_name` names them) and those it would not."""
    names, unknown = [], []
    for key in keys:
        try:
            names.append(key_name(key))
        except ValueError:
            unknown.append(key)
    return names, unknown


def normalize_keys(keys: Union[str, list[str]], is_hotkey: bool, skip_unknown: bool = False) -> tuple[list[str], bool]:
    """The keys as a list of Playwright names, and whether they are pressed together.

    A string such as ``"ctrl+c"`` is read as a hotkey. An unknown key name is an error, or
    with ``skip_unknown`` left out (an error only when none is left)."""
    if isinstance(keys, str):
        if len(keys) > 1 and "+" in keys.strip("+"):
            parts, is_hotkey = [p for p in keys.split("+") if p], True
        else:
            parts = [keys]
    else:
        parts = []
        for key in keys:
            if len(key) > 1 and "+" in key.strip("+"):
                parts.extend(p for p in key.split("+") if p)
                is_hotkey = True
            else:
                parts.append(key)
    if not parts:
        raise ValueError("give at least one key")
    if skip_unknown:
        names, unknown = known_keys(parts)
        if not names:
            raise ValueError(f"no key it knows among {parts}; use names like {EXAMPLES}")
    else:
        names = [key_name(k) for k in parts]
    if is_hotkey and any(n in MODIFIERS for n in names) and "Shift" not in names:
        # ctrl+C means ctrl+c: an upper-case letter would add a Shift the model did not ask for
        names = [n.lower() if len(n) == 1 and n.isalpha() else n for n in names]
    return names, is_hotkey
