"""An OpenAI-compatible chat-completions client (vLLM, SGLang, ollama, hosted APIs).

Standard library only. Base URL and key come from options, ``[plugins.openai]``, or the
environment (``OWRL_OPENAI_BASE_URL``, ``OWRL_OPENAI_API_KEY`` or ``OPENAI_API_KEY``).
Images travel as data URLs. Transient failures (connection errors, 429, 5xx) are retried
with exponential backoff; each request has a timeout.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Optional

from owrl_sdk import secrets
from owrl_sdk.config import openai_endpoint
from owrl_sdk.errors import ConfigError, InfraError

from .backend import Generation, Sampling
from .prompt import Prompt, openai_messages

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIBackend:
    def __init__(self, model: Optional[str] = None, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: float = 120.0, retries: int = 4, backoff: float = 1.0):
        env = openai_endpoint()
        self.base_url = (base_url or env.base_url or "").rstrip("/")
        if not self.base_url:
            raise ConfigError("the openai backend needs a base URL: set OWRL_OPENAI_BASE_URL or "
                              "[plugins.openai] base_url (e.g. http://127.0.0.1:8000/v1)")
        if not self.base_url.lower().startswith(("http://", "https://")):  # urllib would read file: URLs
            raise ConfigError(f"the openai backend's base URL must be http:// or https://, not {self.base_url!r}")
        self.api_key = api_key or env.api_key or "none"
        secrets.register_endpoint(api_key or env.api_key, self.base_url)
        self.model = model or env.model or "default"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.revision = self.model

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(payload).encode()
        last: Optional[str] = None
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(
                f"{self.base_url}/chat/completions", data=data, method="POST",
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as err:
                body = err.read()[:300].decode(errors="replace")
                if err.code not in RETRY_STATUS:
                    raise InfraError(f"endpoint answered HTTP {err.code}: {body}", code="endpoint_error") from None
                last = f"HTTP {err.code}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError) as err:
                last = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
            if attempt < self.retries:
                time.sleep(self.backoff * (2 ** attempt))
        raise InfraError(f"endpoint {self.base_url} failed after {self.retries + 1} tries ({last})",
                         code="endpoint_unreachable")

    def generate(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        out = []
        for prompt in prompts:
            payload: dict[str, Any] = {
                "model": self.model, "messages": openai_messages(prompt),
                "temperature": sampling.temperature, "top_p": sampling.top_p,
                "max_tokens": sampling.max_new_tokens,
            }
            if sampling.top_k:
                payload["top_k"] = sampling.top_k  # vLLM and SGLang read it; others ignore it
            if sampling.seed is not None:
                payload["seed"] = sampling.seed
            started = time.perf_counter()
            resp = self._post(payload)
            try:
                text = resp["choices"][0]["message"].get("content") or ""
                finish = resp["choices"][0].get("finish_reason") or "stop"
            except (KeyError, IndexError, TypeError):
                raise InfraError(f"endpoint answered without choices: {str(resp)[:200]}", code="endpoint_error") from None
            usage = resp.get("usage") or {}
            out.append(Generation(text=text, prompt_tokens=int(usage.get("prompt_tokens", 0)),
                                  completion_tokens=int(usage.get("completion_tokens", 0)),
                                  seconds=time.perf_counter() - started, extra={"usage": usage},
                                  finish_reason="length" if finish == "length" else "stop"))
        return out
