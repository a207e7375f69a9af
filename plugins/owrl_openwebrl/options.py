"""The options of the model policies and the judge, as pydantic models: the known keys of
``[plugins.openwebrl]``, ``[plugins.owrl-text]``, ``[plugins.openai]`` and
``[plugins.openwebrl-judge]`` are typed and converted where settings load; other keys are
kept as they are (``extra="allow"``), as they always were, for the profile and the backend.

A field marked ``json_schema_extra={"server_side": ...}`` names something on the side of the
process that runs the policy: ``file`` a file or folder, ``model`` a model id or folder,
``endpoint`` a server it calls; ``owrl serve`` lets a job set one only within what the
operator allows (local files, the allowed domains).

A key left unset keeps its default where it is used (the profile's, the checkpoint's), so
:func:`read` returns only the keys that were given."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator


class SamplingOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    temperature: Optional[float] = Field(default=None, ge=0, description="0: greedy (the profile's default)")
    top_p: Optional[float] = Field(default=None, gt=0, le=1, description="nucleus sampling mass")
    top_k: Optional[int] = Field(default=None, ge=0, description="sample among the k likeliest tokens")
    max_new_tokens: Optional[int] = Field(default=None, ge=1, description="generation limit per turn")
    seed: Optional[int] = Field(default=None, description="seed of the sampling")
    profile: Optional[str] = Field(default=None, description="interface profile: openwebrl or owrl "
                                   "(else the profile setting, else by checkpoint)")
    model: Optional[str] = Field(default=None, description="model id or path (the model setting wins)",
                                 json_schema_extra={"server_side": "model"})


class ModelPolicyOptions(SamplingOptions):
    """``[plugins.openwebrl]``: the Qwen-VL policy's options."""

    quantize: Optional[str] = Field(default=None, description="auto, 4bit or none (auto: 4bit on CUDA)")
    adapter: Optional[str] = Field(default=None, description="a LoRA adapter folder to load on the model",
                                   json_schema_extra={"server_side": "file"})
    text_mode: Optional[bool] = Field(default=None, description="read the accessibility tree, no screenshot "
                                      "(owrl profile only)")
    max_batch: Optional[int] = Field(default=None, ge=1, description="requests merged into one generation (16)")
    dialogs: Optional[Literal["accept", "hold"]] = Field(default=None, description="how the openwebrl "
                                                         "profile asks for dialogs to be handled (accept)")
    settle: Optional[Union[dict[str, Union[int, float]], str]] = Field(
        default=None, description="network_idle_ms and after_ms waited after each action (openwebrl profile; "
        "the official pauses after hover, drag, tabs and goto_url), or \"quiescence\": owrl's wait for a quiet page")

    @field_validator("settle", mode="before")
    @classmethod
    def _settle(cls, value: Any) -> Any:
        if value is None or value == "quiescence":
            return value
        if not isinstance(value, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                  for v in value.values()):
            raise ValueError('give a table of network_idle_ms and after_ms (numbers), or "quiescence"')
        return value
    system_prompt_file: Optional[str] = Field(default=None, description="the official system prompt",
                                              json_schema_extra={"server_side": "file"})
    status_templates_file: Optional[str] = Field(default=None, description="the official status-line templates "
                                                 "(status_templates.json from owrl model fetch openwebrl)",
                                                 json_schema_extra={"server_side": "file"})
    tool_list_file: Optional[str] = Field(default=None, description="the official tool list",
                                          json_schema_extra={"server_side": "file"})
    screenshots: Optional[int] = Field(default=None, ge=0, description="screenshots per turn (openwebrl profile)")


class TextPolicyOptions(ModelPolicyOptions):
    """``[plugins.owrl-text]``: the text-only policy's options."""

    tools: Optional[list[str]] = Field(default=None, description="tools declared in the prompt "
                                       "(click, write, press_keys, select_option, done)")
    feedback: Optional[Literal["changes", "status"]] = Field(
        default=None, description="what the history says of each past call: changes (what it changed and "
        "whether its expectation held) or status (only whether it ran)")


class OpenAIPolicyOptions(ModelPolicyOptions):
    """``[plugins.openai]``: the OpenAI-compatible policy's options."""

    base_url: Optional[str] = Field(default=None, description="the server (else OWRL_OPENAI_BASE_URL or OPENAI_BASE_URL)",
                                    json_schema_extra={"server_side": "endpoint"})
    api_key: Optional[str] = Field(default=None, description="its key (else OWRL_OPENAI_API_KEY or OPENAI_API_KEY)")
    timeout: Optional[float] = Field(default=None, gt=0, description="seconds per request (120)")
    retries: Optional[int] = Field(default=None, ge=0, description="retries of a failed request (4)")
    backoff: Optional[float] = Field(default=None, ge=0, description="seconds before the first retry (1.0), "
                                     "doubled each time, jittered; a server's Retry-After comes first")
    headers: Optional[dict[str, str]] = Field(default=None, description="extra HTTP headers sent with each request")
    api_version: Optional[str] = Field(default=None, description="an Azure-style deployment's api-version "
                                       "(sent as a query, with the key as the api-key header)")
    concurrency: Optional[int] = Field(default=None, ge=1, le=256, description="requests in flight at once for a "
                                       "batch of prompts (8)")
    tool_calls: Optional[Literal["native", "text"]] = Field(
        default=None, description="native: the tools as the API's tools and the answer's tool_calls (default in the "
        "owrl profile, for hosted models); text: <tool_call> blocks in the answer (default in the openwebrl profile)")
    token_param: Optional[Literal["max_tokens", "max_completion_tokens"]] = Field(
        default=None, description="the name of the token cap (default max_tokens, switched once if the server "
        "refuses it)")
    proxy: Optional[str] = Field(default=None, description="an HTTP proxy its requests go through (owrl serve "
                                 "sets its egress gate here for an endpoint a job names; a job cannot set it)")


class JudgeOptions(SamplingOptions):
    """``[plugins.openwebrl-judge]``: the model judge's options."""

    backend: Optional[str] = Field(default=None, description="transformers or openai")
    quantize: Optional[str] = Field(default=None, description="auto, 4bit or none")
    base_url: Optional[str] = Field(default=None, description="the server, with backend = openai",
                                    json_schema_extra={"server_side": "endpoint"})
    layout: Optional[str] = Field(default=None, description="action_history or result_only (openwebrl profile)")
    screenshots: Optional[int] = Field(default=None, ge=0, description="screenshots shown (3)")
    feedback_chars: Optional[int] = Field(default=None, ge=0, description="longest feedback shown (300)")
    judge_prompt_file: Optional[str] = Field(default=None, description="the official judge prompts",
                                             json_schema_extra={"server_side": "file"})
    status_templates_file: Optional[str] = Field(default=None, description="the official status lines the action "
                                                 "history quotes (default: the policy's, fetched by owrl model fetch "
                                                 "openwebrl)", json_schema_extra={"server_side": "file"})


def read(settings: Any, name: str, model: type[BaseModel], options: dict[str, Any]) -> dict[str, Any]:
    """``[plugins.NAME]`` with ``options`` on top, validated as ``model``: the keys given, converted."""
    validated: BaseModel = settings.options(name, model, **options)
    return validated.model_dump(exclude_unset=True)
