"""Rollouts from a served model: the trainer publishes each adapter, the rollouts name it.

With ``serve_base_url`` set in the RL config, rollouts do not generate with the trainer's
in-process model. Before each iteration the trainer writes the current LoRA adapter to
``publish_dir/vNNNNN`` and asks the inference server to load it under the name
``<adapter_name>-vN`` (vLLM's dynamic LoRA endpoints, ``POST {base}/load_lora_adapter`` and
``POST {base}/unload_lora_adapter``, enabled on the server with
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``; SGLang serves the same pair). Rollouts then run
the ``openai`` policy against ``serve_base_url`` with that model name, so every trajectory
records which adapter version produced it (``trajectory.policy.model``).

Trajectories more than ``max_staleness`` versions older than the adapter being trained are
discarded before the update (counted as ``dropped_stale``): with the synchronous loop this
only happens to rollouts reused across a restart or gathered by an asynchronous collector,
but the check holds the update to on-policy-enough data whatever produced it. Adapters the
rollouts can no longer use are unloaded from the server and deleted.

The adapter folder must be readable by the server at the same path (a shared volume). The
load and unload calls go through the ``openai`` package's client (the ``openai`` extra, which
the served rollouts' policy needs too): one pooled connection, the key as a bearer token, and
its retries (jittered, ``Retry-After`` honoured) on connection errors, 408, 409, 429 and 5xx.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from owrl_sdk.api import InfraError, openai_endpoint, secrets, Trajectory, UsageError


@dataclass
class PolicySpec:
    """A policy by plugin name and options: what rollouts on other processes can rebuild."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)


class AdapterPublisher:
    def __init__(self, base_url: str, root: Path, name: str = "owrl", api_key: Optional[str] = None,
                 keep: int = 1, timeout: float = 120.0, retries: int = 3):
        self.base_url = base_url.rstrip("/")
        self.root = Path(root)
        self.name = name
        api_key = api_key or openai_endpoint().api_key
        self.api_key = api_key or "none"
        secrets.register_endpoint(api_key, base_url)
        self.keep = keep
        self.timeout = timeout
        self.retries = retries
        self.loaded: list[int] = []
        self._client: Any = None

    def model_name(self, version: int) -> str:
        return f"{self.name}-v{version}"

    def publish(self, model: Any, version: int) -> str:
        """Save ``model``'s adapter as ``version``, load it on the server, retire old ones."""
        path = self.root / f"v{version:05d}"
        if not (path / "adapter_config.json").exists():
            tmp = self.root / f".v{version:05d}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            model.save_adapter(tmp)
            shutil.rmtree(path, ignore_errors=True)
            tmp.rename(path)
        self._post("load_lora_adapter", {"lora_name": self.model_name(version), "lora_path": str(path.resolve())},
                   ok_if="already been loaded")
        if version not in self.loaded:
            self.loaded.append(version)
        for old in [v for v in self.loaded if v < version - self.keep]:
            self._post("unload_lora_adapter", {"lora_name": self.model_name(old)}, ok_if="not found")
            self.loaded.remove(old)
            shutil.rmtree(self.root / f"v{old:05d}", ignore_errors=True)
        return self.model_name(version)

    def client(self) -> Any:
        """The ``openai`` client this publisher posts with (made on first use, then kept)."""
        if self._client is None:
            try:
                import openai
            except ImportError:
                raise UsageError("rollouts from a served model (serve_base_url) need the openai package: "
                                 "pip install 'openwebrl-sdk[openai]'") from None
            self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout,
                                         max_retries=self.retries)
        return self._client

    def _post(self, endpoint: str, payload: dict[str, Any], ok_if: str = "") -> None:
        client = self.client()
        import openai

        try:
            client.post(f"/{endpoint}", body=payload, cast_to=str)  # vLLM answers in plain text
        except openai.APIStatusError as err:
            body = err.response.text[:300]
            if ok_if and ok_if in body:
                return
            raise InfraError(f"the inference server refused {endpoint} for {payload.get('lora_name')}: "
                             f"HTTP {err.status_code} {body}", code="endpoint_error") from None
        except openai.APIConnectionError as err:  # time-outs included
            raise InfraError(f"cannot reach the inference server at {self.base_url} to {endpoint}: "
                             f"{type(err).__name__}: {err}", code="endpoint_unreachable") from None


def adapter_version(traj: Trajectory, name: str) -> Optional[int]:
    """The adapter version a served rollout used, from the model name it recorded."""
    match = re.fullmatch(re.escape(name) + r"-v(\d+)", traj.policy.model or "") if traj.policy else None
    return int(match.group(1)) if match else None


def drop_stale(trajectories: list[Trajectory], name: str, current: int,
               max_staleness: int) -> tuple[list[Trajectory], int]:
    """Keep the trajectories produced by an adapter at most ``max_staleness`` versions old."""
    kept = []
    for traj in trajectories:
        version = adapter_version(traj, name)
        if version is not None:
            traj.metadata["adapter_version"] = version
        if version is None or current - version <= max_staleness:
            kept.append(traj)
    return kept, len(trajectories) - len(kept)
