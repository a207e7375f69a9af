"""The conditions a flow's turns and calls are played under (``when``): a small grammar, read
here and evaluated by walking what was read; nothing in a condition is ever run as code.

::

    condition  :=  and ("or" and)*
    and        :=  not ("and" not)*
    not        :=  "not" not  |  compare
    compare    :=  operand [OP operand]          OP: ==  !=  <  <=  >  >=
    operand    :=  {{input:NAME}}  |  {{output:NAME}}  |  NUMBER  |  "text"  |  'text'
                |  true  |  false  |  null  |  "(" condition ")"

After a comparison operator, unquoted words up to ``and``, ``or``, ``)`` or the end are one
text (``{{input:decision}} == approve``), as a flow written for the first grammar had it.

What a comparison means:

- a value alone is tested by its type (:func:`truthy`);
- ``==`` and ``!=`` compare numbers as numbers when both sides read as one (``10,000`` and
  ``10000.0`` are equal), and otherwise the values written as text (``true``/``false`` for a
  boolean); ``null`` equals only a value not given or not saved yet;
- ``<``, ``<=``, ``>``, ``>=`` compare numbers as numbers, and two texts as texts (ISO dates
  order correctly); a number against a text that is no number, or a value that is null, is a
  :class:`~owrl_sdk.errors.UsageError` naming the condition.

A text reads as a number when, spaces, one leading currency sign (``$ € £ ¥``) and thousands
separators (``12,500.00``) aside, it is a decimal number.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Mapping, Optional, Union

from owrl_sdk.errors import UsageError

#: The comparison operators.
OPERATORS = ("==", "!=", "<=", ">=", "<", ">")

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<place>\{\{\s*(?P<source>input|output):(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\}\})
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op>==|!=|<=|>=|<|>)
  | (?P<paren>[()])
  | (?P<word>[^\s()=!<>"']+)
""", re.VERBOSE)

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")
_KEYWORDS = {"and", "or", "not"}
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}

#: What a condition is read into: ("or", [..]), ("and", [..]), ("not", node),
#: ("cmp", op, left, right), ("place", source, name), ("lit", value).
Node = tuple[Any, ...]


class ConditionError(ValueError):
    """A ``when`` that is not a condition (raised when a flow is read)."""


class _Reader:
    def __init__(self, text: str):
        self.text = text
        self.tokens: list[tuple[str, str, int, int, Optional[re.Match[str]]]] = []
        at = 0
        while at < len(text):
            m = _TOKEN.match(text, at)
            if m is None:
                raise self.error(f"cannot read {text[at:at + 12]!r}", at)
            kind = m.lastgroup or ""
            if kind == "source" or kind == "name":
                kind = "place"
            if kind != "space":
                self.tokens.append((kind, m.group(0), m.start(), m.end(), m))
            at = m.end()
        self.i = 0

    def error(self, why: str, at: Optional[int] = None) -> ConditionError:
        where = f" at character {at + 1}" if at is not None else ""
        return ConditionError(f"{self.text!r} is not a condition: {why}{where}")

    def peek(self) -> Optional[tuple[str, str, int, int, Optional[re.Match[str]]]]:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "word" and token[1].lower() == word:
            self.i += 1
            return True
        return False

    def read(self) -> Node:
        if not self.tokens:
            raise self.error("it is empty")
        node = self.disjunction()
        token = self.peek()
        if token is not None:
            raise self.error(f"unexpected {token[1]!r}", token[2])
        return node

    def disjunction(self) -> Node:
        parts = [self.conjunction()]
        while self.keyword("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else ("or", parts)

    def conjunction(self) -> Node:
        parts = [self.negation()]
        while self.keyword("and"):
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else ("and", parts)

    def negation(self) -> Node:
        if self.keyword("not"):
            return ("not", self.negation())
        return self.comparison()

    def comparison(self) -> Node:
        left = self.operand()
        token = self.peek()
        if token is None or token[0] != "op":
            return left
        self.i += 1
        return ("cmp", token[1], left, self.operand(after_op=True))

    def operand(self, after_op: bool = False) -> Node:
        token = self.peek()
        if token is None:
            raise self.error("a value is missing at its end")
        kind, text, start, _, m = token
        if kind == "paren" and text == "(":
            self.i += 1
            inner = self.disjunction()
            close = self.peek()
            if close is None or close[1] != ")":
                raise self.error("a '(' is not closed", start)
            self.i += 1
            return inner
        if kind == "place" and m is not None:
            self.i += 1
            return ("place", m.group("source"), m.group("name"))
        if kind == "string":
            self.i += 1
            return ("lit", re.sub(r"\\(.)", r"\1", text[1:-1]))
        if kind == "word" and text.lower() not in _KEYWORDS:
            return self.words(after_op)
        raise self.error(f"expected a value, found {text!r}", start)

    def words(self, after_op: bool) -> Node:
        """A number, true/false/null, or (after a comparison operator) unquoted words as one text."""
        first = self.tokens[self.i]
        last = first
        while True:
            token = self.peek()
            if token is None or token[0] != "word" or token[1].lower() in _KEYWORDS:
                break
            last = token
            self.i += 1
            if not after_op:
                break
        text = self.text[first[2]:last[3]]
        if "{{" in text:
            raise self.error("only {{input:NAME}} and {{output:NAME}} can be read in a condition", first[2])
        if _NUMBER.fullmatch(text):
            return ("lit", float(text) if re.search(r"[.eE]", text) else int(text))
        if text.lower() in _LITERALS:
            return ("lit", _LITERALS[text.lower()])
        if not after_op:
            raise self.error(f"{text!r} is not a value: write {{{{input:NAME}}}}, {{{{output:NAME}}}}, a number, "
                             "a quoted text, true, false or null", first[2])
        return ("lit", text)


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Node:
    """The condition ``text`` read (cached); :class:`ConditionError` when it is not one."""
    return _Reader(text).read()


def check(when: Any) -> Any:
    """``when`` as a flow may write it (a condition, or already true or false), else ValueError."""
    if when is None or isinstance(when, bool):
        return when
    if not isinstance(when, str):
        raise ConditionError(f"{when!r} is not a condition: write it as text, or true or false")
    parse(when)
    return when


def places(node: Node) -> set[tuple[str, str]]:
    """The (source, name) of every ``{{input:NAME}}`` and ``{{output:NAME}}`` in a read condition."""
    kind = node[0]
    if kind == "place":
        return {(node[1], node[2])}
    if kind in ("or", "and"):
        return set().union(*(places(p) for p in node[1]))
    if kind == "not":
        return places(node[1])
    if kind == "cmp":
        return places(node[2]) | places(node[3])
    return set()


def truthy(value: Any) -> bool:
    """A value as a condition reads it, by its type: a boolean is itself, a number is true
    unless 0, a text is true unless empty (or only spaces), a list or object unless empty,
    and null is false."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, str):
        return value.strip() != ""
    return bool(value)


def text_of(value: Any) -> str:
    """A value as it is written into a string: ``true``/``false`` for a boolean."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def number_of(value: Any) -> Optional[Union[int, float]]:
    """``value`` as a number when it is one or reads as one (see the module's notes), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return value
    if not isinstance(value, str):
        return None
    text = re.sub(r"\s+", "", value)
    text = re.sub(r"^([+-]?)[$€£¥]", r"\1", text)
    if _GROUPED.fullmatch(text):
        text = text.replace(",", "")
    if not _NUMBER.fullmatch(text):
        return None
    return float(text) if re.search(r"[.eE]", text) else int(text)


def evaluate(when: Any, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> bool:
    """Whether ``when`` holds. An input with no value, or an order between values that have
    none, is a UsageError naming the condition (an output not saved yet is null)."""
    if when is None:
        return True
    if isinstance(when, bool):
        return when
    return truthy(_value(parse(check(when)), when, inputs, outputs))


def _value(node: Node, when: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "place":
        source, name = node[1], node[2]
        if source == "input" and name not in inputs:
            raise UsageError(f"the condition {when!r} names the input {name!r}, which has no value")
        return (inputs if source == "input" else outputs).get(name)
    if kind == "not":
        return not truthy(_value(node[1], when, inputs, outputs))
    if kind == "and":
        return all(truthy(_value(p, when, inputs, outputs)) for p in node[1])
    if kind == "or":
        return any(truthy(_value(p, when, inputs, outputs)) for p in node[1])
    op, left, right = node[1], _value(node[2], when, inputs, outputs), _value(node[3], when, inputs, outputs)
    return _compare(op, left, right, when)


def _compare(op: str, left: Any, right: Any, when: str) -> bool:
    if op in ("==", "!="):
        if left is None or right is None:
            same = left is None and right is None
        else:
            a, b = number_of(left), number_of(right)
            same = a == b if a is not None and b is not None else text_of(left) == text_of(right)
        return same == (op == "==")
    if left is None or right is None:
        raise UsageError(f"the condition {when!r} orders a value that has none (null)")
    a, b = number_of(left), number_of(right)
    if a is not None and b is not None:
        pair: tuple[Any, Any] = (a, b)
    elif a is None and b is None:
        pair = (text_of(left), text_of(right))
    else:
        text = left if a is None else right
        raise UsageError(f"the condition {when!r} compares a number with {text_of(text)!r}, which is not a number")
    x, y = pair
    return bool({"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op])
