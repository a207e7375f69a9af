"""The dialog tool: handle_dialog answers a JavaScript dialog (press_keys' Enter and Escape do too)."""

from __future__ import annotations

from typing import Optional

from pydantic import AliasChoices, Field

from owrl_sdk.api import BrowserEnv, ToolResult

from .base import BrowserTool, _Args

class HandleDialogArgs(_Args):
    accept: bool = Field(True, description="true to press OK (accept), false to press Cancel (dismiss)")
    prompt_text: Optional[str] = Field(
        None,
        validation_alias=AliasChoices("prompt_text", "text"),
        description="the text to enter in a prompt dialog",
    )


class HandleDialog(BrowserTool):
    name = "handle_dialog"
    description = (
        "Answer the open JavaScript dialog (alert, confirm, prompt, leave-page): accept or dismiss it. "
        "Called when none is open, it decides how the next dialog is answered."
    )
    Args = HandleDialogArgs
    answers_dialogs = True

    async def act(self, env: BrowserEnv, args: HandleDialogArgs) -> ToolResult:
        return ToolResult(feedback=await env.answer_dialog(args.accept, args.prompt_text))
