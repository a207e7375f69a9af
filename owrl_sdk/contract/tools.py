"""The tool unit: one class per tool, its arguments one pydantic model.

That model is the single source of the tool's contract: it validates the arguments,
gives the JSON schema declared to the model, and its error messages become the
feedback a model reads to correct itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

from owrl_sdk.types import Target, ToolResult

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.contract.env import Environment


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetArgs(Target):
    """Arguments of an element-targeting tool: exactly one of point_2d, ref or selector."""

    @property
    def target(self) -> Target:
        return Target(point_2d=self.point_2d, ref=self.ref, selector=self.selector)


class ToolArgumentError(ValueError):
    """Arguments that do not fit a tool's schema; the message is written for the model."""


class Tool:
    """Base of every tool. Subclasses set ``name``, ``description`` and ``Args``, and the
    flags below where they differ from the defaults."""

    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[BaseModel]] = NoArgs
    #: Its ``[plugins.NAME]`` table's model (a pydantic model), validated where settings load;
    #: read with ``settings.options(self.name, self.Options, **options)``. None: no options.
    Options: ClassVar[Optional[type]] = None
    #: The tool acts on the page: the browser environment refuses it while a JavaScript
    #: dialog blocks the page (unless it ``answers_dialogs``).
    needs_page: ClassVar[bool] = False
    #: The tool answers a JavaScript dialog (``handle_dialog``, Enter/Escape in ``press_keys``),
    #: so it runs while one blocks the page.
    answers_dialogs: ClassVar[bool] = False

    def parse_args(self, arguments: dict[str, Any]) -> BaseModel:
        try:
            return self.Args.model_validate(arguments or {})
        except ValidationError as err:
            problems = []
            for e in err.errors()[:3]:
                field = ".".join(str(p) for p in e["loc"])
                msg = e["msg"].removeprefix("Value error, ")
                if e["type"] == "extra_forbidden":
                    msg = "is not an argument of this tool"
                problems.append(f"'{field}' {msg}" if field else msg)
            expected = ", ".join(self.Args.model_fields) or "no arguments"
            raise ToolArgumentError(
                f"bad arguments for {self.name}: {'; '.join(problems)}. Arguments it takes: {expected}."
            ) from None

    async def run(self, env: "Environment", args: Any) -> ToolResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def available(self, env: "Environment") -> bool:
        """Whether this tool can run in ``env`` (browser tools need a browser)."""
        return True

    def schema(self) -> dict[str, Any]:
        """The function schema declared to the model (OpenAI / Qwen ``<tools>`` form)."""
        params = _strip_titles(self.Args.model_json_schema())
        params.setdefault("properties", {})
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if k != "title"}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node
