"""An OpenAI-compatible chat-completions client (hosted APIs, vLLM, SGLang, ollama), on the
``openai`` package (the ``openai`` extra).

- **Endpoint**: base URL, key and model from options, ``[plugins.openai]``, or the environment
  (``OWRL_OPENAI_BASE_URL`` / ``OPENAI_BASE_URL``, ``OWRL_OPENAI_API_KEY`` / ``OPENAI_API_KEY``,
  ``OWRL_OPENAI_MODEL``); extra ``headers``; ``api_version`` for an Azure-style deployment URL
  (sent as the ``api-version`` query and the ``api-key`` header).
- **Sampling**: only what was set is sent (:attr:`Sampling.given`), so a hosted API that refuses
  unknown arguments is not sent vLLM's; ``top_k``, which only open servers read, travels in the
  request's extra body. The token cap is ``max_tokens``, or ``max_completion_tokens`` where the
  model refuses the first (the client switches once, on the server's 400, and remembers).
- **Tool calls**: ``text`` (the ``<tool_call>`` blocks of the answer, as OpenWebRL models write
  them) or ``native`` (the prompt's tools sent as the API's ``tools``, each with an optional
  ``expect`` argument, and the answer's ``tool_calls`` written back as ``<tool_call>`` blocks, so
  the profile reads both the same way; an answer with text calls and no native ones is read too).
- **Failures**: connection errors, time-outs, 408/409/425/429 and 5xx are retried with jittered
  exponential backoff, or after the server's ``Retry-After`` when it gives one (up to
  :data:`MAX_RETRY_AFTER` seconds); anything else is an :class:`InfraError` at once.
- **Throughput**: one pooled client per backend; a batch of prompts is sent ``concurrency`` at a time.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from owrl_sdk.api import ConfigError, InfraError, openai_endpoint, secrets, UsageError

from .backend import Generation, Sampling
from .prompt import Prompt, openai_messages

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
#: The longest ``Retry-After`` waited out; a server asking for more is reported at once.
MAX_RETRY_AFTER = 120.0
#: The two names of the token cap, each tried when the server refuses the other.
TOKEN_PARAMS = ("max_tokens", "max_completion_tokens")
TOOL_MODES = ("text", "native")

#: The ``expect`` argument a native tool call may carry (owrl's expectation of the call).
EXPECT_PARAMETER = {
    "type": "object",
    "description": 'what the page should show after this call, e.g. {"url_contains": "/cart"} or '
                   '{"text_visible": "Added"}; if it does not hold, the remaining calls are skipped',
}


def retry_after(headers: Any) -> Optional[float]:
    """Seconds a server asks to wait before the next try (``retry-after-ms``, ``Retry-After`` as
    seconds or as an HTTP date), or None."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    try:
        if ms is not None:
            return max(0.0, float(ms) / 1000)
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when is not None else None


def native_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prompt's tool schemas as the API's ``tools``, each taking an optional ``expect``."""
    out = []
    for tool in tools:
        function = dict(tool.get("function", tool))
        params = dict(function.get("parameters") or {"type": "object", "properties": {}})
        params["properties"] = {**params.get("properties", {}), "expect": EXPECT_PARAMETER}
        function["parameters"] = params
        out.append({"type": "function", "function": function})
    return out


def calls_as_text(content: str, tool_calls: list[Any]) -> str:
    """A native answer written as the text form the profiles parse: the message's text (as the
    reasoning), then one ``<tool_call>`` block per call. Arguments that are not JSON are kept as
    written, so the parser reports them as it would a text call's."""
    blocks = []
    for call in tool_calls:
        function = getattr(call, "function", None)
        name = getattr(function, "name", None) or ""
        raw = getattr(function, "arguments", None) or "{}"
        try:
            arguments = json.loads(raw)
            blocks.append("<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
                          + "\n</tool_call>")
        except json.JSONDecodeError:
            blocks.append(f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {raw}}}\n</tool_call>')
    thought = f"<think>{content.strip()}</think>\n" if content.strip() else ""
    return thought + "\n".join(blocks)


class OpenAIBackend:
    def __init__(self, model: Optional[str] = None, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: float = 120.0, retries: int = 4, backoff: float = 1.0,
                 headers: Optional[dict[str, str]] = None, api_version: Optional[str] = None,
                 concurrency: int = 8, tool_calls: str = "text", token_param: Optional[str] = None,
                 proxy: Optional[str] = None):
        try:
            import openai
        except ImportError:
            raise UsageError("the openai backend needs the openai package: pip install 'openwebrl-sdk[openai]'") from None
        env = openai_endpoint()
        self.base_url = (base_url or env.base_url or "").rstrip("/")
        if not self.base_url:
            raise ConfigError("the openai backend needs a base URL: set OWRL_OPENAI_BASE_URL (or OPENAI_BASE_URL) or "
                              "[plugins.openai] base_url (e.g. http://127.0.0.1:8000/v1)")
        if not self.base_url.lower().startswith(("http://", "https://")):
            raise ConfigError(f"the openai backend's base URL must be http:// or https://, not {self.base_url!r}")
        if tool_calls not in TOOL_MODES:
            raise ConfigError(f"tool_calls must be one of {', '.join(TOOL_MODES)}, not {tool_calls!r}")
        if token_param is not None and token_param not in TOKEN_PARAMS:
            raise ConfigError(f"token_param must be one of {', '.join(TOKEN_PARAMS)}, not {token_param!r}")
        key = api_key or env.api_key
        self.api_key = key or "none"
        secrets.register_endpoint(key, self.base_url)
        self.model = model or env.model or "default"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.concurrency = max(1, int(concurrency))
        self.tool_calls = tool_calls
        self.token_param = token_param or TOKEN_PARAMS[0]
        self._token_param_fixed = token_param is not None
        self.revision = self.model
        extra_headers = dict(headers or {})
        query = None
        if api_version:  # an Azure-style deployment: the version as a query, the key as api-key
            query = {"api-version": api_version}
            extra_headers.setdefault("api-key", self.api_key)
        # the client's own retries are off: this one waits as the docstring says and reports as owrl does
        # proxy: the server's egress gate for an endpoint a job named (owrl serve sets it; a job cannot)
        http_client = openai.DefaultHttpxClient(proxy=proxy) if proxy else None
        self.client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=timeout, max_retries=0,
                                    default_headers=extra_headers or None, default_query=query, http_client=http_client)

    # ------------------------------------------------------------------ one request

    def payload(self, prompt: Prompt, sampling: Sampling) -> dict[str, Any]:
        """The request for one prompt: only the sampling arguments that were set (see the module doc)."""
        given = sampling.given
        body: dict[str, Any] = {"model": self.model, "messages": openai_messages(prompt),
                                self.token_param: sampling.max_new_tokens}
        if given is None or "temperature" in given:
            body["temperature"] = sampling.temperature
        if given is None or "top_p" in given:
            body["top_p"] = sampling.top_p
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if (given is None or "top_k" in given) and sampling.top_k:
            body["extra_body"] = {"top_k": sampling.top_k}  # vLLM and SGLang read it; hosted APIs refuse it
        if self.tool_calls == "native" and prompt.tools:
            body["tools"] = native_tools(prompt.tools)
        return body

    def _create(self, body: dict[str, Any]) -> Any:
        import openai

        last = ""
        attempt = -1
        while attempt < self.retries:
            attempt += 1
            wait: Optional[float] = None
            try:
                return self.client.chat.completions.create(**body)
            except openai.APIStatusError as err:
                text = _error_text(err)
                used = next((p for p in TOKEN_PARAMS if p in body), "")
                other = next((p for p in TOKEN_PARAMS if p != used), "")
                if (err.status_code == 400 and used in text and other in text
                        and (not self._token_param_fixed or self.token_param != used)):
                    # the model takes the other name: switch once, for every request from now on
                    body = {**{k: v for k, v in body.items() if k != used}, other: body[used]}
                    self.token_param, self._token_param_fixed = other, True
                    attempt -= 1  # not a failure of the server: the same try, in the words it takes
                    continue
                if err.status_code not in RETRY_STATUS:
                    raise InfraError(f"endpoint answered HTTP {err.status_code}: {text[:300]}", code="endpoint_error") from None
                last = f"HTTP {err.status_code}"
                wait = retry_after(err.response.headers)
                if wait is not None and wait > MAX_RETRY_AFTER:
                    raise InfraError(f"endpoint {self.base_url} asked to wait {wait:.0f} s before another try "
                                     f"(more than {MAX_RETRY_AFTER:.0f} s)", code="endpoint_unreachable") from None
            except (openai.APIConnectionError, openai.APITimeoutError) as err:
                last = f"{type(err).__name__}: {err}"
            if attempt < self.retries:
                time.sleep(wait if wait is not None else self.backoff * (2 ** attempt) * random.uniform(0.5, 1.5))
        raise InfraError(f"endpoint {self.base_url} failed after {self.retries + 1} tries ({last})",
                         code="endpoint_unreachable")

    def _one(self, prompt: Prompt, sampling: Sampling) -> Generation:
        started = time.perf_counter()
        resp = self._create(self.payload(prompt, sampling))
        try:
            choice = resp.choices[0]
            message = choice.message
        except (AttributeError, IndexError, TypeError):
            raise InfraError(f"endpoint answered without choices: {str(resp)[:200]}", code="endpoint_error") from None
        content = message.content or ""
        calls = getattr(message, "tool_calls", None) or []
        text = calls_as_text(content, calls) if calls else content
        usage = resp.usage.model_dump() if getattr(resp, "usage", None) is not None else {}
        return Generation(text=text, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0),
                          seconds=time.perf_counter() - started, extra={"usage": usage},
                          finish_reason="length" if choice.finish_reason == "length" else "stop")

    def generate(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        """One generation per prompt, ``concurrency`` requests at a time, in the prompts' order."""
        if len(prompts) <= 1 or self.concurrency == 1:
            return [self._one(p, sampling) for p in prompts]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts))) as pool:
            return list(pool.map(lambda p: self._one(p, sampling), prompts))


def _error_text(err: Any) -> str:
    body = getattr(err, "body", None)
    if body is not None:
        try:
            return json.dumps(body)
        except (TypeError, ValueError):
            pass
    return str(getattr(err, "message", "") or err)
