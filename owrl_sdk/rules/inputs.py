"""Inputs: ``{{input:NAME}}`` placeholders in flows and tasks, filled in before an episode starts.

A flow (or a task) may declare its inputs, each with a type, a default and a description::

    "inputs": {"name": {"type": "string", "description": "the customer's name"},
               "quantity": {"type": "integer", "default": 1}}

and use them anywhere in its strings: the task text, the start URL, a call's arguments, an
expectation. ``owrl run --flow F --input name=Maria`` gives the values; :func:`resolve_inputs`
checks them all at once (one :class:`~owrl_sdk.errors.UsageError` listing every problem) and
converts them to their declared types, then :func:`apply_inputs` fills them in.

Inputs are not secrets: a value is written into the flow as it is, recorded in the trajectory
(``Trajectory.inputs``) and shown. ``{{secret:NAME}}`` stays the way to type a secret; an input
value that holds a ``{{secret:...}}`` placeholder is refused, so a value from a spreadsheet can
never make a tool resolve (and type) a secret.

How a value is written where it lands:

- as text: ``true``/``false`` for a boolean, the number as Python writes it, a string as it is.
  A call argument that is exactly one placeholder gets the text too (``"3"``, not ``3``): the
  tool's own argument model converts it, as it would a number typed in a flow;
- in a URL (a flow's or task's ``start_url``, a call's ``url`` argument, the ``url_contains``
  of an expectation): a placeholder in the path, the query or the fragment is percent-encoded
  whole (``quote(value, safe="")``: a space is ``%20``, ``&`` is ``%26``, ``/`` is ``%2F``), so the
  value cannot add a path segment, a query parameter or a fragment. Only a placeholder that
  starts the string (the whole address, or its beginning) or stands in the host
  (``https://{{input:host}}/``) is written as it is, since it is meant to make the address;
- in ``url_matches`` (a regular expression): encoded as in a URL, then escaped (``re.escape``)
  so that it matches itself;
- in a ``selector``: as a value of the context the placeholder sits in. Inside a quoted string
  (``role=option[name="{{input:customer}}"]``) its backslashes and that quote are escaped;
  inside an attribute's regular expression (``role=row[name=/{{input:order}}/]``) it is escaped
  to match itself; outside quotes (``#row-{{input:id}}``) only a value of letters, digits, ``-``
  and ``_`` is written, and any other is refused, since it could add a combinator, a selector
  list or another engine (``nope .x, #danger``). A line break or control character is refused
  anywhere in a selector.

Substitution is one pass: a value that holds ``{{input:OTHER}}`` is written as that text and not
filled in again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, TypeVar
from urllib.parse import quote, unquote, urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from owrl_sdk.errors import UsageError
from owrl_sdk.rules import conditions
from owrl_sdk.rules.conditions import text_of, truthy
from owrl_sdk.rules.outputschema import check_schema
from owrl_sdk.safety.secrets import PLACEHOLDER as SECRET
from owrl_sdk.safety.secrets import has_placeholder


#: ``{{input:NAME}}``, spelt like ``{{secret:NAME}}`` (:data:`owrl_sdk.safety.secrets.PLACEHOLDER`).
PLACEHOLDER = re.compile(r"\{\{\s*input:([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
#: What an input's name may be: a letter or ``_``, then letters, digits and ``_``.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

InputType = Literal["string", "integer", "number", "boolean"]

_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


class InputSpec(BaseModel):
    """One declared input: its type, its default and what it is for.

    ``required`` is true when there is no default (a ``null`` default is no default); given
    ``"required": false`` without a default, a missing input is left out of the values and a
    placeholder that uses it is then an error. A default is converted to the type like a
    given value, so ``{"type": "integer", "default": "2"}`` holds 2."""

    model_config = ConfigDict(extra="forbid")
    type: InputType = "string"
    default: Any = None
    description: str = ""
    required: bool = False
    #: The values the input may take (each of its type): a value not among them is refused.
    enum: Optional[list[Any]] = None
    #: The least and the greatest value (integer and number inputs).
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    #: A regular expression the whole value must match (string inputs).
    pattern: Optional[str] = None

    @model_validator(mode="before")
    @classmethod
    def _required_without_default(cls, data: Any) -> Any:
        if isinstance(data, dict) and "required" not in data:
            data = {**data, "required": data.get("default") is None}
        return data

    @model_validator(mode="after")
    def _default_of_its_type(self) -> "InputSpec":
        if self.enum is not None:
            if not self.enum:
                raise ValueError("enum lists no value")
            converted = []
            for item in self.enum:
                value, problem = convert(self.type, item)
                if problem:
                    raise ValueError(f"enum value {item!r} is not {_A[self.type]}: {problem}")
                converted.append(value)
            self.enum = converted
        if (self.minimum is not None or self.maximum is not None) and self.type not in ("integer", "number"):
            raise ValueError(f"minimum and maximum apply to integer and number inputs, not {self.type}")
        if self.pattern is not None:
            if self.type != "string":
                raise ValueError(f"pattern applies to string inputs, not {self.type}")
            try:
                re.compile(self.pattern)
            except re.error as err:
                raise ValueError(f"pattern {self.pattern!r} is not a regular expression: {err}") from None
        if self.default is not None:
            value, problem = convert(self.type, self.default)
            if problem:
                raise ValueError(f"default {self.default!r} is not {_A[self.type]}: {problem}")
            broken = self.broken(value)
            if broken:
                raise ValueError(f"default {self.default!r}: {broken}")
            self.default = value
        return self

    def broken(self, value: Any) -> Optional[str]:
        """Why ``value`` (of the input's type) breaks the input's rules (enum, minimum, maximum,
        pattern), or None."""
        if self.enum is not None and value not in self.enum:
            return "must be one of " + ", ".join(text_of(v) for v in self.enum)
        if self.minimum is not None and value < self.minimum:
            return f"must be at least {self.minimum:g}"
        if self.maximum is not None and value > self.maximum:
            return f"must be at most {self.maximum:g}"
        if self.pattern is not None and re.fullmatch(self.pattern, str(value)) is None:
            return f"must match the pattern {self.pattern}"
        return None


_A = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean"}


def check_names(inputs: Mapping[str, Any]) -> None:
    """Raise ValueError for a declared input whose name a placeholder could not spell."""
    bad = [name for name in inputs if not NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"input names are letters, digits and _ (not starting with a digit): {', '.join(map(repr, bad))}")


def _named(inputs: dict[str, InputSpec]) -> dict[str, InputSpec]:
    check_names(inputs)
    return inputs


def _json_schema(schema: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    return check_schema(schema) if schema is not None else None


#: The ``inputs`` a flow or a task declares (``Flow.inputs``, ``Task.inputs``): names a
#: placeholder can spell.
DeclaredInputs = Annotated[dict[str, InputSpec], AfterValidator(_named)]

#: A flow's or a task's ``output_schema``: a valid JSON schema, checked when the document loads.
OutputSchema = Annotated[Optional[dict[str, Any]], AfterValidator(_json_schema)]


def convert(kind: InputType, value: Any) -> tuple[Any, Optional[str]]:
    """``value`` as ``kind``, and None; or ``value`` and why it cannot be one.

    Strings (from the command line, a CSV cell) are read: integers as digits with an optional
    sign, numbers as decimals (not nan or infinity), booleans as true/false/yes/no/1/0 in any
    case. Values of JSON types are taken when they are of the type already (an integer is a
    number too; a bool is not an integer); a number is written as text for a string input."""
    if kind == "string":
        if isinstance(value, str):
            return value, None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value), None
        return value, f"expected text, got {type(value).__name__}"
    if kind == "boolean":
        if isinstance(value, bool):
            return value, None
        text = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if text in _TRUE:
            return True, None
        if text in _FALSE:
            return False, None
        return value, "expected true/false, yes/no or 1/0"
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value, None
        if isinstance(value, float) and value.is_integer():
            return int(value), None
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return int(value), None
        return value, "expected a whole number"
    # number
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value) if isinstance(value, float) else value
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*", value):
        number = float(value) if re.search(r"[.eE]", value) else int(value)
    else:
        return value, "expected a number"
    if isinstance(number, float) and not math.isfinite(number):
        return value, "expected a finite number"
    return number, None


def placeholders(obj: Any) -> set[str]:
    """The names of the ``{{input:NAME}}`` placeholders in every string of ``obj`` (a flow, a
    task or any pydantic model, dicts, lists and strings)."""
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    found: set[str] = set()
    pending = [obj]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            found.update(PLACEHOLDER.findall(item))
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
    return found


@dataclass(frozen=True)
class InputProblem:
    """One thing wrong with the inputs given to a flow, as data: the input's ``name``, a
    ``code`` (``unknown``, ``secret``, ``type``, ``rule`` for a value its input's enum, minimum,
    maximum or pattern refuses, ``too_long``, ``missing``, ``unset`` for a placeholder with
    no value, ``optional_unset`` for an optional input a placeholder uses, given no value and no
    default) and the ``message``. Each front door says how to give a value in its own words
    (:meth:`text`): the CLI ``pass --input NAME=...``, the server ``give inputs.NAME a value``."""

    name: str
    code: str
    message: str

    def text(self, give: str = "pass --input {name}=...") -> str:
        """The problem in one phrase; ``give`` is how this door asks for a value (``{name}`` filled)."""
        how = give.format(name=self.name)
        if self.code == "missing":
            return f"{self.message}: {how}"
        if self.code == "unset":
            return f"{self.message}: declare it or {how}"
        return self.message


class InputsInvalid(UsageError):
    """Inputs that do not make the flow's: every :class:`InputProblem` at once, in ``problems``;
    the message is the CLI's one line."""

    def __init__(self, problems: list[InputProblem]):
        self.problems = problems
        n = len(problems)
        super().__init__(f"{n} input problem{'s' if n > 1 else ''}: " + "; ".join(p.text() for p in problems))


#: The longest value an input may hold (characters). A value is filled into each row's task text,
#: start address and selectors: a megabyte given to a batch of many rows would be held many times.
MAX_INPUT_CHARS = 32_768


def resolve_inputs(declared: Mapping[str, InputSpec], given: Mapping[str, Any], used: set[str]) -> dict[str, Any]:
    """The values to fill in: each given value converted to its declared type, and the default of
    each declared input not given. An input used by a placeholder but not declared may be given
    (on the command line): it is taken as a string.

    Raises :class:`InputsInvalid` (a :class:`~owrl_sdk.errors.UsageError`) naming every problem
    at once: a required input missing, a given name that is neither declared nor used, a value not
    of its type, a value over :data:`MAX_INPUT_CHARS`, a value that holds a ``{{secret:...}}`` placeholder, a placeholder with no value.
    A given value of None counts as not given (an empty spreadsheet cell is ``""``, which is a value)."""
    problems: list[InputProblem] = []
    values: dict[str, Any] = {}
    for name, raw in given.items():
        if raw is None:
            continue
        spec = declared.get(name)
        if spec is None and name not in used:
            known = sorted(set(declared) | used)
            problems.append(InputProblem(name, "unknown", f"unknown input {name!r} (" + (
                f"inputs: {', '.join(known)}" if known else "this flow takes no inputs") + ")"))
            continue
        if isinstance(raw, str) and len(raw) > MAX_INPUT_CHARS:
            problems.append(InputProblem(name, "too_long", f"input {name!r} is {len(raw):,} characters long, more than "
                                         f"the {MAX_INPUT_CHARS:,} an input may hold"))
            continue
        if isinstance(raw, str) and has_placeholder(raw):
            problems.append(InputProblem(name, "secret", f"input {name!r} holds a {{{{secret:...}}}} placeholder: "
                                         "inputs are not secrets (write the placeholder in the flow itself)"))
            continue
        value, problem = convert(spec.type if spec is not None else "string", raw)
        if problem:
            kind = spec.type if spec is not None else "string"
            problems.append(InputProblem(name, "type", f"input {name!r} must be {_A[kind]}: {raw!r} ({problem})"))
            continue
        broken = spec.broken(value) if spec is not None else None
        if broken:
            problems.append(InputProblem(name, "rule", f"input {name!r} {broken}: {raw!r}"))
            continue
        values[name] = value
    named = {p.name for p in problems}
    for name, spec in declared.items():
        if name in values or name in named:
            continue
        if spec.default is not None:
            values[name] = spec.default
        elif spec.required:
            about = f" ({spec.description})" if spec.description else ""
            problems.append(InputProblem(name, "missing", f"missing input {name!r}{about}"))
    named = {p.name for p in problems}
    for name in sorted(used - set(declared) - set(values)):
        if name not in named:
            problems.append(InputProblem(name, "unset", f"{{{{input:{name}}}}} is used but has no value"))
    for name in sorted(used & set(declared) - set(values)):
        if not declared[name].required and declared[name].default is None:
            problems.append(InputProblem(name, "optional_unset", f"{{{{input:{name}}}}} is used but optional input "
                                         f"{name!r} was not given and has no default"))
    if problems:
        raise InputsInvalid(problems)
    return values


def _no_dot_segments(text: str, filled: str) -> None:
    """An address whose inputs make a whole path segment ``.`` or ``..`` (percent-encoded too:
    a browser reads ``%2e%2e`` as ``..``) climbs out of the path its flow named: refused."""
    before, after = urlsplit(text).path.split("/"), urlsplit(filled).path.split("/")
    if len(before) != len(after):
        return
    for mine, theirs in zip(before, after):
        if PLACEHOLDER.search(mine) and unquote(theirs) in (".", ".."):
            raise UsageError(f"the inputs filled into {text!r} make the path segment {theirs!r}: a segment of "
                             "only . or .. is refused (it would climb out of the path the flow names)")


def _fill(text: str, values: Mapping[str, Any], how: str) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            return m.group(0)
        value = text_of(values[name])
        if how == "selector":
            return _in_selector(text, m.start(), name, value)
        if how in ("url", "regex"):
            before = text[: m.start()]
            host = "://" in before and not any(c in before.split("://", 1)[1] for c in "/?#")
            if before and not host:  # past the authority: a path, a query, a fragment
                value = quote(value, safe="")
            if how == "regex":
                value = re.escape(value)
        return value

    filled = PLACEHOLDER.sub(one, text)
    if how == "url" and filled != text:
        _no_dot_segments(text, filled)
    if filled != text:
        # each value is refused on its own when it holds a secret placeholder (resolve_inputs);
        # here two values, or a value and the text around it, must not make one between them

        if sorted(SECRET.findall(filled)) != sorted(SECRET.findall(text)):
            raise UsageError(f"the inputs filled into {text!r} make a {{{{secret:...}}}} placeholder: inputs are "
                             "not secrets (write the placeholder in the flow itself)")
    return filled


#: What a value may be where a selector holds its placeholder outside quotes (``#row-{{input:id}}``):
#: a name's letters only, so it cannot add a combinator, a list or another engine.
_BARE_SAFE = re.compile(r"[A-Za-z0-9_-]+")


def _selector_context(before: str) -> str:
    """Where a selector's text ``before`` leaves the next character: inside a double-quoted
    or a single-quoted string (``"``, ``'``), inside a regular expression of an attribute
    (``/``, as in ``role=row[name=/...]``), or outside all of them (``""``)."""
    state, depth, i = "", 0, 0
    while i < len(before):
        c = before[i]
        if state:
            if c == "\\":
                i += 2
                continue
            if c == state:
                state = ""
        elif c in "\"'":
            state = c
        elif c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        elif c == "/" and depth and before[:i].rstrip().endswith("="):
            state = "/"
        i += 1
    return state


#: A line break or another control character (C0, DEL): what no selector can hold.
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _in_selector(text: str, at: int, name: str, value: str) -> str:
    """An input's value written into a selector as a value of the context it sits in: escaped
    inside a quoted string or a regular expression, and outside them only when it is a plain
    name (letters, digits, ``-``, ``_``), so that no value changes what the selector means
    (``#row-{{input:id}} .view`` with ``nope .x, #danger`` would click another element)."""
    if _CONTROL.search(value):
        raise UsageError(f"input {name!r} is placed in the selector {text!r}, and its value holds a line break or "
                         "a control character, which a selector cannot hold")
    where = _selector_context(text[:at])
    if where in ("\"", "'"):
        return value.replace("\\", "\\\\").replace(where, "\\" + where)
    if where == "/":
        return re.escape(value).replace("/", "\\/")
    if not _BARE_SAFE.fullmatch(value):
        raise UsageError(f"input {name!r} is placed in the selector {text!r} outside quotes, where its value "
                         f"{value!r} would change what the selector means: put the placeholder inside quotes "
                         f"(role=row[name=\"{{{{input:{name}}}}}\"], [data-id=\"{{{{input:{name}}}}}\"]) or give a "
                         "value of letters, digits, - and _ only")
    return value


def fill(text: str, values: Mapping[str, Any], url: bool = False) -> str:
    """``text`` with the ``{{input:NAME}}`` of ``values`` filled in; ``url``: it is an address
    (``--url``), whose path, query and fragment get the values percent-encoded."""
    return _fill(text, values, "url" if url else "text")


#: Keys whose strings are URLs (or pieces of one), and url_matches, a regular expression.
_URL_KEYS = {"start_url": "url", "url": "url", "url_contains": "url", "url_matches": "regex", "selector": "selector"}


#: A condition (``when`` of a flow's turn or call): ``{{input:NAME}}`` or ``{{output:NAME}}`` (a
#: value an earlier call saved with ``save_as``), with ``not`` before it, or ``== TEXT`` /
#: ``!= TEXT`` after it. Nothing else: a flow is not a script.
def check_condition(when: Any) -> Any:
    """``when`` as a flow may write it (a condition, or already true or false), else ValueError
    (:mod:`owrl_sdk.rules.conditions` holds the grammar)."""
    return conditions.check(when)


def evaluate_condition(when: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> bool:
    """Whether ``when`` holds; a condition on an input with no value raises UsageError (an
    output not saved yet reads as null)."""
    return conditions.evaluate(when, inputs, outputs)


def _walk(value: Any, values: Mapping[str, Any], how: str) -> Any:
    if isinstance(value, str):
        return _fill(value, values, how)
    if isinstance(value, dict):
        return {k: _when(v, values) if k == "when" else
                _walk(v, values, _URL_KEYS.get(k, "text") if isinstance(k, str) else "text")
                for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, values, how) for v in value]
    return value


def _when(when: Any, values: Mapping[str, Any]) -> Any:
    """A condition on inputs alone decided with their typed values (true or false); one that
    reads an output, or an input not given, is left for the player."""
    if not isinstance(when, str):
        return when
    try:
        read = conditions.parse(when)
    except ValueError:
        return when  # not a condition: the flow's own check says so
    names = conditions.places(read)
    if not names or any(source != "input" or name not in values for source, name in names):
        return when
    return evaluate_condition(when, values, {})


M = TypeVar("M", bound=BaseModel)


def apply_inputs(obj: M, values: Mapping[str, Any]) -> M:
    """A deep copy of ``obj`` (a :class:`~owrl_sdk.formats.documents.Flow`, a :class:`~owrl_sdk.types.Task`
    or another model) with every ``{{input:NAME}}`` of ``values`` filled in (see the module's
    notes for URLs). Placeholders of names not in ``values`` stay as they are; the declarations
    (``inputs``) are kept."""
    data = obj.model_dump(mode="python", by_alias=True)
    declared = data.pop("inputs", None)
    filled = _walk(data, values, "text")
    if declared is not None:
        filled["inputs"] = declared
    return type(obj).model_validate(filled)


__all__ = ["InputSpec", "PLACEHOLDER", "apply_inputs", "check_condition", "convert", "evaluate_condition",
           "fill", "placeholders", "resolve_inputs", "text_of", "truthy", "InputProblem", "InputsInvalid"]
