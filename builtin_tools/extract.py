"""The ``extract`` tool: read a value off the page, to hand it back as an output.

``what`` says what is read from the target (a ref or a selector, as the other tools take):

- ``text``: its visible text (``innerText``), trimmed;
- ``value``: the value of a form field (input, textarea, select);
- ``attribute``: the attribute named by ``attribute`` (``href``, ``data-id``);
- ``table``: a table's rows, each a list of its cells' texts, header rows included, from a
  ``<table>`` or an element of role ``table``, ``grid`` or ``treegrid`` (the target, or the
  first such inside it);
- ``records``: the same table as one object per body row, keyed by the header row's cells
  (``{"Order": "DS-1001", "Total": "$38.00"}``): what a JSON schema of the rows checks.

The result's ``data`` holds ``value`` (what was read) and ``name`` (when given). A named value,
or one a flow call saves with ``save_as``, becomes one of the episode's outputs
(:mod:`owrl_sdk.formats.outputs`).
"""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

from pydantic import Field, model_validator

from owrl_sdk.api import ActionError, BrowserEnv, short, ToolResult

from .base import REF_HELP, SELECTOR_HELP, BrowserTool, _Args

_TABLE = """(el) => {
  const roles = ['table', 'grid', 'treegrid'];
  const isTable = e => e.tagName === 'TABLE' || roles.includes((e.getAttribute('role') || '').toLowerCase());
  let table = isTable(el) ? el : el.querySelector('table, [role=table], [role=grid], [role=treegrid]');
  if (!table) return null;
  const text = c => (c.innerText || c.textContent || '').trim().replace(/\\s+/g, ' ');
  if (table.tagName === 'TABLE' && !table.getAttribute('role')) {
    return Array.from(table.rows).map(r => Array.from(r.cells).map(text));
  }
  const cells = '[role=cell], [role=gridcell], [role=columnheader], [role=rowheader]';
  return Array.from(table.querySelectorAll('[role=row], tr'))
    .filter(r => r.closest('table, [role=table], [role=grid], [role=treegrid]') === table)
    .map(r => Array.from(r.querySelectorAll(cells + ', td, th')).filter(c => c.closest('[role=row], tr') === r).map(text));
}"""

_VALUE = """(el) => {
  if (el.tagName === 'SELECT') return el.multiple ? Array.from(el.selectedOptions).map(o => o.value) : el.value;
  if ('value' in el && typeof el.value === 'string' && ['INPUT', 'TEXTAREA'].includes(el.tagName)) {
    if (el.type === 'checkbox' || el.type === 'radio') return el.checked;
    return el.value;
  }
  if (el.isContentEditable) return el.innerText;
  return null;
}"""


class ExtractArgs(_Args):
    ref: Optional[str] = Field(None, description=REF_HELP)
    selector: Optional[str] = Field(None, description=SELECTOR_HELP)
    what: Literal["text", "value", "attribute", "table", "records"] = Field(
        "text", description="what to read: text, value (of a form field), attribute, table (rows of cells) "
        "or records (table rows as objects keyed by the header)")
    attribute: Optional[str] = Field(None, description="the attribute to read, with what=attribute (e.g. href)")
    name: Optional[str] = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                description="the name to hand the value back under, as an output of the task")

    @model_validator(mode="after")
    def _check(self) -> "ExtractArgs":
        if (self.ref is None) == (self.selector is None):
            raise ValueError("give exactly one of ref or selector")
        if (self.what == "attribute") != (self.attribute is not None):
            raise ValueError("give attribute with what=attribute, and only then")
        return self


class Extract(BrowserTool):
    name = "extract"
    description = ("Read a value off the page: the text, a form field's value, an attribute or a table of "
                   "the element given by ref or selector; name hands it back as an output of the task.")
    Args = ExtractArgs

    async def act(self, env: BrowserEnv, args: ExtractArgs) -> ToolResult:
        where = f"ref {args.ref}" if args.ref is not None else f"selector {args.selector}"
        locator = env.element(ref=args.ref, selector=args.selector)
        value: Any
        if args.what == "text":
            value = (await locator.inner_text()).strip()
        elif args.what == "value":
            value = await locator.evaluate(_VALUE)
            if value is None:
                raise ActionError(f"{where} is not a form field: read its text with what=text",
                                  kind="action.not_editable")
        elif args.what == "attribute":
            assert args.attribute is not None  # the arguments' check
            value = await locator.get_attribute(args.attribute)
            if value is None:
                raise ActionError(f"{where} has no attribute {args.attribute!r}", kind="action.failed")
        else:
            rows = await locator.evaluate(_TABLE)
            if rows is None:
                raise ActionError(f"{where} is not a table and holds none (a <table>, or role table or grid)",
                                  kind="action.no_element")
            value = rows if args.what == "table" else _records(rows)
        data: dict[str, Any] = {"value": value}
        if args.name is not None:
            data["name"] = args.name
        shown = short(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), 200)
        label = f" as {args.name}" if args.name else ""
        return ToolResult(feedback=f"extracted {args.what}{label}: {shown}", data=data)


def _records(rows: list[list[str]]) -> list[dict[str, str]]:
    """Body rows as objects keyed by the first row's cells (an empty header cell: ``column N``)."""
    if not rows:
        return []
    header = [cell or f"column {n}" for n, cell in enumerate(rows[0], 1)]
    records = []
    for row in rows[1:]:
        if not any(row):
            continue
        records.append({header[n] if n < len(header) else f"column {n + 1}": cell for n, cell in enumerate(row)})
    return records
