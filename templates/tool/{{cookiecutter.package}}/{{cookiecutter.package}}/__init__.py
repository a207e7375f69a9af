"""{{ cookiecutter.description }}.

A tool is one class: ``name`` and ``description`` are what the model reads, ``Args`` (a
pydantic model) is its argument schema, and ``run`` does the work in the episode's
environment and returns a :class:`~owrl_sdk.types.ToolResult`. The ``register_tools``
hook at the bottom adds an instance to every episode's tool set.

What a tool should know:

- Arguments arrive validated against ``Args``; a model that gets them wrong reads the
  validation errors as feedback and can try again, so write the field descriptions for it.
- ``ToolResult.feedback`` is the observation the model reads after the call (the loop cuts
  it to the ``feedback_chars`` setting, 512 by default); ``data`` is recorded in the
  trajectory for programs (tests, judges, analysis) and not shown to the model.
- Raise :class:`~owrl_sdk.browser.ActionError` with a message for the model when the tool
  cannot do what it was asked; the episode goes on and the model reads the message.
  Playwright's own errors are explained the same way by the environment.
- ``available(env)`` hides the tool where it cannot run (here: episodes without a browser).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from owrl_sdk import hookimpl
from owrl_sdk.api import ActionError, Tool, ToolResult

#: Each element's text is cut to this many characters in the feedback.
ITEM_CHARS = 120


class ReadTextArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    selector: str = Field(
        min_length=1,
        description='Playwright selector of the elements to read, e.g. "css=table tr", "role=listitem" or "text=Price"',
    )
    limit: int = Field(20, ge=1, le=200, description="read at most this many matching elements, in page order")


class ReadText(Tool):
    """Reads the visible text of the elements a selector matches, one line per element."""

    name = "{{ cookiecutter.tool_name }}"
    description = (
        "Read the visible text of every element matching a selector (table rows, list items, prices) "
        "without scrolling to each; the text comes back one numbered line per element."
    )
    Args = ReadTextArgs
    needs_page = True  # the environment refuses it while a JavaScript dialog blocks the page

    def available(self, env) -> bool:
        return getattr(env, "page", None) is not None

    async def run(self, env, args: ReadTextArgs) -> ToolResult:
        elements = env.page.locator(args.selector)
        count = await elements.count()
        if count == 0:
            raise ActionError(f"nothing on the page matches {args.selector!r}; "
                              "check the selector against the page snapshot")
        texts = [" ".join(t.split()) for t in (await elements.all_inner_texts())[: args.limit]]
        lines = [f"{i}. {t[:ITEM_CHARS]}" for i, t in enumerate(texts, 1)]
        more = f" (showing the first {len(texts)})" if count > len(texts) else ""
        feedback = f"{count} element(s) match {args.selector!r}{more}:\n" + "\n".join(lines)
        return ToolResult(feedback=feedback, data={"texts": texts, "count": count})


@hookimpl
def register_tools(register):
    """Called once when owrl loads its plugins: register one instance per tool."""
    register(ReadText())
