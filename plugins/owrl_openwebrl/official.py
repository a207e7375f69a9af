"""The official status lines, parse-failure message and truncation, read from the official
source at fetch time and applied at run time.

The released models read, after each call, a line their environment wrote. Those lines are
inline f-strings of the official environment's ``_execute_<tool>`` handlers, the
parse-failure message is a literal of the rollout loop, and the truncation rule lives in
its feedback helpers. owrl never carries that text: ``owrl model fetch openwebrl`` downloads
the three source files, reads them with :mod:`ast` (the code is parsed, never run) and keeps
only what this module extracts, as ``status_templates.json``:

- ``tools``: per tool, the template of its success line (``ok``), of the target phrase its
  line embeds (``target``: the element under a point, the field typed into, the scroll's
  point), of each note it may append (``notes``, named by the fact it reports:
  ``navigated``, ``tab_opened``, ``no_change``, ``value_differs``, ``no_move``), of its
  failure line (``error``, the exception's text in ``e``) and its refusals (``refusals``: the
  handler's own checks of its arguments, in its order, each the source of its ``if`` test and
  the line it returns; :func:`refused` evaluates the tests on the call's arguments);
- ``unsupported``: the line for a tool the environment does not have;
- ``parse_failure``: the message sent when no call could be read;
- ``keys``: the key names the environment knows (``aliases``, ``mapping``: a lower-case
  name to the name it presses, ``legal``: the names it takes in any case), read as literals
  from its keyboard module; :func:`official_key` applies them as its key check does;
- ``truncation``: the longest status line, the head's share and the marker between head and tail.

A template is a list of parts, each ``{"text": ...}`` or ``{"expr": ..., "spec": ...,
"conv": ...}`` (an f-string's replacement field: its expression's source, format spec and
conversion). :func:`render` fills one from a namespace of facts with a small evaluator that
knows names, attributes, constant subscripts, ``+``/``-`` and ``len``; what it cannot
evaluate is an error, never code run.
"""

from __future__ import annotations

import ast
from types import SimpleNamespace
from typing import Any, Callable, Optional, Union

#: Where the files live in the official source tree: the environment, the rollout loop, the
#: feedback helpers, and the key names (:data:`OPTIONAL`: a source without it still fetches).
SOURCES = ("openwebrl/env/web_env.py", "openwebrl/generate_browser.py", "openwebrl/feedback_utils.py",
           "openwebrl/env/utils/keyboard.py")
OPTIONAL = ("openwebrl/env/utils/keyboard.py",)
#: The tools whose handlers are read (``_execute_<tool>``).
TOOLS = ("click", "write", "press_keys", "scroll", "wait", "done", "goto_url", "go_back", "drag", "hover",
         "new_tab", "switch_tab", "close_tab")
#: Every key a complete extraction holds.
KEYS = ("tools", "unsupported", "parse_failure", "truncation", "keys")


class TemplateError(ValueError):
    pass


# ------------------------------------------------------------------ extraction


def _parts(node: ast.AST) -> Optional[list[dict[str, str]]]:
    """A string literal or an f-string as template parts; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [{"text": node.value}]
    if not isinstance(node, ast.JoinedStr):
        return None
    out: list[dict[str, str]] = []
    for value in node.values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.append({"text": value.value})
        elif isinstance(value, ast.FormattedValue):
            part = {"expr": ast.unparse(value.value)}
            if value.format_spec is not None:
                spec = getattr(value.format_spec, "values", [])
                if not all(isinstance(v, ast.Constant) for v in spec):
                    return None
                part["spec"] = "".join(str(v.value) for v in spec)
            if value.conversion and value.conversion > 0:
                part["conv"] = chr(value.conversion)
            out.append(part)
        else:
            return None
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


_NOTES = {"post_url": "navigated", "post_tab_count": "tab_opened", "displayed_value": "value_differs"}
#: A note with no fact in it, by tool: what the constant reports.
_PLAIN_NOTES = {"click": "no_change", "scroll": "no_move"}


def _handler(tree: ast.AST, name: str) -> Optional[Union[ast.FunctionDef, ast.AsyncFunctionDef]]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def _returned(node: ast.Return) -> Optional[tuple[bool, ast.AST]]:
    """``return FLAG, MESSAGE``: the flag and the message node."""
    value = node.value
    if isinstance(value, ast.Tuple) and len(value.elts) == 2 and isinstance(value.elts[0], ast.Constant) \
            and isinstance(value.elts[0].value, bool):
        return value.elts[0].value, value.elts[1]
    return None


def _tests(handler: ast.AST) -> dict[ast.AST, str]:
    """Each ``return`` of ``handler`` inside an ``if``: the source of the nearest ``if`` test."""
    found: dict[ast.AST, str] = {}

    def visit(node: ast.AST, test: Optional[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ExceptHandler):
                visit(child, None)  # a failure of the machinery, not a check of the arguments
            elif isinstance(child, ast.If):
                for inner in child.body:
                    visit_one(inner, ast.unparse(child.test))
                for inner in child.orelse:
                    visit_one(inner, test)
            else:
                visit_one(child, test)

    def visit_one(node: ast.AST, test: Optional[str]) -> None:
        if isinstance(node, ast.Return) and test is not None:
            found[node] = test
        visit(node, test)

    visit(handler, None)
    return found


def _tool_templates(handler: ast.AST, tool: str) -> dict[str, Any]:
    found: dict[str, Any] = {"notes": {}}
    tests = _tests(handler)
    refusals: list[tuple[int, dict[str, Any]]] = []
    for node in ast.walk(handler):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if name == "target" and isinstance(value, ast.IfExp):
                parts = _parts(value.body)
                if parts is not None:
                    found["target"] = parts
            elif name == "feedback":
                parts = _parts(value)
                if parts is not None:
                    found.setdefault("ok", parts)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "feedback":
            parts = _parts(node.value)
            if parts is None:
                continue
            facts = [_NOTES[n] for n in sorted(_names(node.value)) if n in _NOTES]
            key = facts[0] if facts else _PLAIN_NOTES.get(tool)
            if key:
                found["notes"][key] = parts
        elif isinstance(node, ast.Return):
            returned = _returned(node)
            if returned is None:
                continue
            ok, message = returned
            parts = _parts(message)
            if parts is None:
                continue
            if ok:
                found.setdefault("ok", parts)
            elif "e" in _names(message):
                found["error"] = parts
            elif node in tests:
                refusals.append((node.lineno, {"test": tests[node], "line": parts}))
    if refusals:  # in the handler's order (ast.walk visits breadth first)
        found["refusals"] = [r for _, r in sorted(refusals, key=lambda r: r[0])]
    return found


def _tool_response_literals(tree: ast.AST) -> list[str]:
    """The string literals given as ``{"tool_response": "..."}`` in the rollout loop."""
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "tool_response" \
                        and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    texts.append(value.value)
    return texts


def _truncation(tree: ast.AST) -> Optional[dict[str, Any]]:
    """The tool-response limit, the head's share and the marker of the feedback helpers."""
    limit = None
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.endswith("TOOL_RESPONSE_MAX_CHARS") and isinstance(node.value, ast.Constant):
            limit = node.value.value
    function = _handler(tree, "truncate_feedback_text")
    if not isinstance(limit, int) or function is None:
        return None
    head = None
    args = function.args
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if arg.arg == "head_ratio" and isinstance(default, ast.Constant):
            head = default.value
    marker = None
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == "marker":
            marker = _parts(node.value)
    if not isinstance(head, (int, float)) or marker is None:
        return None
    return {"max_chars": limit, "head_ratio": float(head), "marker": marker}


def _key_names(tree: ast.AST) -> Optional[dict[str, Any]]:
    """The keyboard module's tables, read as literals (never run): aliases, mapping, legal names."""
    tables: dict[str, Any] = {}
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = {"KEY_ALIASES": "aliases", "key_mapping": "mapping", "LEGAL_KEYS": "legal"}.get(node.targets[0].id)
            if name:
                try:
                    tables[name] = ast.literal_eval(node.value)
                except ValueError:
                    return None
    ok = isinstance(tables.get("aliases"), dict) and isinstance(tables.get("mapping"), dict) \
        and isinstance(tables.get("legal"), list)
    return {k: tables[k] for k in ("aliases", "mapping", "legal")} if ok else None


def official_key(key: Any, keys: dict[str, Any]) -> Optional[str]:
    """The name the official environment presses for ``key``, or None for one it drops: one
    character as it is; else, case aside, an alias, then a mapped name, then a legal name."""
    if not isinstance(key, str) or not key:
        return None
    if len(key) == 1:
        return key
    low = key.lower()
    for table in (keys.get("aliases") or {}, keys.get("mapping") or {}):
        if low in table:
            return str(table[low])
    legal = {str(k).lower(): str(k) for k in keys.get("legal") or []}
    return legal.get(low)


def extract_templates(environment: str, loop: str, feedback: str, keyboard: str = "") -> tuple[dict[str, Any], list[str]]:
    """``(found, missing)`` from the sources of the official environment (``web_env.py``), its
    rollout loop (``generate_browser.py``), feedback helpers (``feedback_utils.py``) and key
    names (``keyboard.py``; empty: not fetched). ``missing`` names what was not found
    (``tools.click.ok``, ``parse_failure``, ``keys``, ...)."""
    missing: list[str] = []
    found: dict[str, Any] = {}
    trees: dict[str, Optional[ast.Module]] = {}
    for key, source in (("environment", environment), ("loop", loop), ("feedback", feedback)):
        try:
            trees[key] = ast.parse(source)
        except (SyntaxError, ValueError):
            trees[key] = None
    env = trees["environment"]
    tools: dict[str, Any] = {}
    for tool in TOOLS:
        handler = _handler(env, f"_execute_{tool}") if env is not None else None
        templates = _tool_templates(handler, tool) if handler is not None else {"notes": {}}
        for part in ("ok", "error"):
            if part not in templates and not (tool == "done" and part == "error"):  # done cannot fail
                missing.append(f"tools.{tool}.{part}")
        tools[tool] = templates
    found["tools"] = tools
    dispatch = _handler(env, "execute_single_action") if env is not None else None
    for node in ast.walk(dispatch) if dispatch is not None else ():
        if isinstance(node, ast.Return) and (r := _returned(node)) and not r[0] and "action_type" in _names(r[1]):
            found["unsupported"] = _parts(r[1])
    if "unsupported" not in found:
        missing.append("unsupported")
    texts = set(_tool_response_literals(trees["loop"])) if trees["loop"] is not None else set()
    if len(texts) == 1:
        found["parse_failure"] = texts.pop()
    else:
        missing.append("parse_failure")
    truncation = _truncation(trees["feedback"]) if trees["feedback"] is not None else None
    if truncation is None:
        missing.append("truncation")
    else:
        found["truncation"] = truncation
    try:
        keys = _key_names(ast.parse(keyboard)) if keyboard else None
    except (SyntaxError, ValueError):
        keys = None
    if keys is None:
        missing.append("keys")
    else:
        found["keys"] = keys
    return found, missing


# ------------------------------------------------------------------ rendering


_CALLS: dict[str, Callable[..., Any]] = {"len": len, "str": str, "int": int, "float": float, "abs": abs}

_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: bool(a == b), ast.NotEq: lambda a, b: bool(a != b), ast.Lt: lambda a, b: bool(a < b),
    ast.LtE: lambda a, b: bool(a <= b), ast.Gt: lambda a, b: bool(a > b), ast.GtE: lambda a, b: bool(a >= b),
    ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b}


def _value(node: ast.AST, ns: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BoolOp):  # a refusal's test: short-circuit as Python does
        result: Any = None
        for operand in node.values:
            result = _value(operand, ns)
            if (not result) if isinstance(node.op, ast.And) else result:
                return result
        return result
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _value(node.operand, ns)
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _value(node.left, ns)
        for op, comparator in zip(node.ops, node.comparators):
            right = _value(comparator, ns)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Name):
        if node.id not in ns:
            raise TemplateError(f"no value for {node.id}")
        return ns[node.id]
    if isinstance(node, ast.Attribute):  # only the namespaces this module builds (``self.page.url``)
        owner = _value(node.value, ns)
        if node.attr.startswith("_") or not isinstance(owner, (dict, SimpleNamespace)):
            raise TemplateError(f"cannot evaluate {ast.unparse(node)}")
        return owner[node.attr] if isinstance(owner, dict) else getattr(owner, node.attr)
    if isinstance(node, ast.Subscript):
        return _value(node.value, ns)[_value(node.slice, ns)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left, right = _value(node.left, ns), _value(node.right, ns)
        return left + right if isinstance(node.op, ast.Add) else left - right
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand, ns)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS and not node.keywords:
        return _CALLS[node.func.id](*[_value(a, ns) for a in node.args])
    raise TemplateError(f"cannot evaluate {ast.unparse(node)}")


def render(parts: list[dict[str, str]], ns: dict[str, Any]) -> str:
    """One template filled from ``ns`` (names of the official handler's locals)."""
    out = []
    for part in parts:
        if "text" in part:
            out.append(part["text"])
            continue
        try:
            value = _value(ast.parse(part["expr"], mode="eval").body, ns)
        except (KeyError, AttributeError, IndexError, TypeError, SyntaxError) as err:
            raise TemplateError(f"cannot fill {{{part['expr']}}}: {err}") from None
        conv = part.get("conv")
        if conv == "r":
            value = repr(value)
        elif conv == "s":
            value = str(value)
        elif conv == "a":
            value = ascii(value)
        out.append(format(value, part.get("spec", "")))
    return "".join(out)


def refused(refusals: list[dict[str, Any]], ns: dict[str, Any]) -> Optional[str]:
    """The line of the first refusal whose test holds for ``ns`` (the handler's locals as the
    call's arguments make them); None when none holds or a test cannot be evaluated."""
    for refusal in refusals:
        try:
            holds = _value(ast.parse(refusal["test"], mode="eval").body, ns)
        except (TemplateError, KeyError, AttributeError, IndexError, TypeError, SyntaxError):
            return None
        if holds:
            return render(refusal["line"], ns)
    return None


def page(url: str) -> SimpleNamespace:
    """``self`` as a handler reads it: ``self.page.url``."""
    return SimpleNamespace(page=SimpleNamespace(url=url))


def truncate(text: str, rule: dict[str, Any]) -> str:
    """A status line as the official adapter cuts it: whitespace collapsed; past the limit,
    the head's share of what fits, the marker, and the tail."""
    text = " ".join(str(text).split())
    limit = int(rule["max_chars"])
    if limit <= 0 or len(text) <= limit:
        return text
    marker = render(rule["marker"], {"normalized": text, "max_chars": limit, "text": text})
    if limit <= len(marker):
        return text[:limit]
    head = max(int((limit - len(marker)) * float(rule["head_ratio"])), 1)
    tail = max(limit - len(marker) - head, 1)
    return text[:head] + marker + text[-tail:]
