"""Served rollouts: the trainer publishes each adapter to an inference server and rollouts name it.

The inference server is a stand-in written here (vLLM cannot run on this machine): an HTTP
server on 127.0.0.1 that records the dynamic-LoRA calls (``/v1/load_lora_adapter``,
``/v1/unload_lora_adapter``) and answers ``/v1/chat/completions`` with a ``done`` call whose
answer is right for every other request, so that groups have rewards to compare. The
browser, the demo shop, the trainer (a tiny Qwen3-VL built by the tests) and Ray are real.
"""

from __future__ import annotations

import json

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("peft")

from json_server import JsonServer  # noqa: E402
from owrl_sdk.config import Settings  # noqa: E402
from owrl_sdk.errors import ConfigError  # noqa: E402
from owrl_sdk.contract.plugins import Plugins  # noqa: E402
from owrl_sdk.types import Trajectory  # noqa: E402
from owrl_train.rl import BrowserRollouts, RLConfig, RLRun  # noqa: E402
from owrl_train.serving import drop_stale  # noqa: E402

RIGHT = "The Leather Chelsea Boots cost $129.00."


class StandIn(JsonServer):
    def __init__(self):
        self.adapters_seen: list[bool] = []
        self.chats = 0
        super().__init__(self.answer)
        self.base_url = self.url

    def answer(self, path: str, headers, body: dict):
        if path == "/v1/load_lora_adapter":
            self.adapters_seen.append((Path(body["lora_path"]) / "adapter_config.json").exists())
            return 200, {"ok": True}
        if path == "/v1/unload_lora_adapter":
            return 200, {"ok": True}
        self.chats += 1
        answer = RIGHT if self.chats % 2 else "I could not find it."
        text = '<tool_call>{"name": "done", "arguments": {"response": "%s"}}</tool_call>' % answer
        return 200, {"choices": [{"message": {"role": "assistant", "content": text}}],
                     "usage": {"prompt_tokens": 10, "completion_tokens": 12}}

    def paths(self, path: str) -> list[dict]:
        return [body for p, _, body in self.requests if p == path]


@pytest.fixture
def stand_in():
    server = StandIn()
    yield server
    server.close()


def config(tiny, tmp_path, stand_in, **extra) -> RLConfig:
    return RLConfig(model=str(tiny), out=tmp_path / "rl", suite="demo-shop", tasks=["shop-002"], iterations=2,
                    tasks_per_iteration=1, group_size=4, workers=2, lora_r=8, lr=1e-3, max_staleness=0,
                    serve_base_url=stand_in.base_url, sampling={"temperature": 1.0, "max_new_tokens": 32},
                    curriculum=[{"max_steps": 3}], **extra)


def train(cfg, rollouts, settings, plugins):
    run = RLRun(cfg, rollouts, settings=settings, plugins=plugins)

    async def go():
        try:
            return await run.run()
        finally:
            await rollouts.close()

    return asyncio.run(go())


def check_served_run(stand_in, cfg, results):
    loads = stand_in.paths("/v1/load_lora_adapter")
    assert [b["lora_name"] for b in loads] == ["owrl-v0", "owrl-v1"]
    assert all(stand_in.adapters_seen), "the adapter folder must exist when the server is asked to load it"
    # with max_staleness 0 the rollouts of iteration 1 can no longer use v0: unloaded and deleted
    assert [b["lora_name"] for b in stand_in.paths("/v1/unload_lora_adapter")] == ["owrl-v0"]
    assert not (cfg.out / "published" / "v00000").exists() and (cfg.out / "published" / "v00001").exists()
    chats = stand_in.paths("/v1/chat/completions")
    assert [b["model"] for b in chats] == ["owrl-v0"] * 4 + ["owrl-v1"] * 4
    # the served policy writes <tool_call> text, as it is trained to: the tools are in its prompt, not the API's
    assert all("tools" not in b and "<tools>" in json.dumps(b["messages"]) for b in chats)
    assert [r.metrics["dropped_stale"] for r in results] == [0.0, 0.0]
    # the groups had rewards to compare, so the update trained on them
    assert all(r.metrics["valid_group_fraction"] == 1.0 for r in results)
    assert all(r.metrics["success_rate"] == 0.5 for r in results)


@pytest.mark.slow
def test_trainer_publishes_each_adapter_and_rollouts_use_it(tiny_qwen3, tmp_path, stand_in):
    cfg = config(tiny_qwen3, tmp_path, stand_in)
    settings, plugins = Settings(), Plugins()
    suite = plugins.catalogue.get("task_suites", "demo-shop")(settings)
    rollouts = BrowserRollouts(suite, settings, plugins, workers=2, judge="composite")
    check_served_run(stand_in, cfg, train(cfg, rollouts, settings, plugins))


@pytest.mark.slow
def test_ray_rollouts_with_a_served_adapter(tiny_qwen3, tmp_path, stand_in):
    ray = pytest.importorskip("ray")
    from owrl_train.rollouts import RayRollouts

    cfg = config(tiny_qwen3, tmp_path, stand_in, rollout_backend="ray")
    settings, plugins = Settings(), Plugins()
    suite = plugins.catalogue.get("task_suites", "demo-shop")(settings)
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    rollouts = RayRollouts(suite, settings, workers=2, judge="composite", plugins=plugins)
    try:
        results = train(cfg, rollouts, settings, plugins)
    finally:
        ray.shutdown()
    check_served_run(stand_in, cfg, results)
    assert rollouts.retried == 0


def test_stale_rollouts_are_dropped():
    def traj(model):
        return Trajectory.model_validate({"task": {"id": "t", "intent": "x", "start_url": "http://127.0.0.1/"},
                                          "policy": {"name": "openai", "model": model}})

    kept, dropped = drop_stale([traj("owrl-v0"), traj("owrl-v1"), traj("owrl-v2"), traj("other")], "owrl", 2, 1)
    assert dropped == 1
    assert [t.policy.model for t in kept] == ["owrl-v1", "owrl-v2", "other"]
    assert [t.metadata.get("adapter_version") for t in kept] == [1, 2, None]


def test_ray_rollouts_need_a_served_policy(tmp_path):
    (tmp_path / "rl.toml").write_text('model = "m"\nrollout_backend = "ray"\n')
    with pytest.raises(ConfigError, match="needs serve_base_url"):
        RLConfig.from_toml(tmp_path / "rl.toml")


def test_the_publisher_posts_through_the_openai_client_and_retries_what_it_should(tmp_path):
    """Load and unload go through the ``openai`` client: the key as a bearer token, a 503 tried
    again after the server's Retry-After, the answer the server gives when the adapter is
    already there accepted, any other refusal and an unreachable server an InfraError."""
    from owrl_sdk.errors import InfraError
    from owrl_train.serving import AdapterPublisher

    answers = [(503, {"error": "busy"}, {"Retry-After": "0"}), (200, "Success: LoRA adapter added"),
               (400, {"message": "The lora adapter 'owrl-v0' has already been loaded."}),
               (404, {"message": "no such route"})]
    server = JsonServer(lambda path, headers, body: answers.pop(0))
    try:
        publisher = AdapterPublisher(server.url, tmp_path, api_key="sk-test-publisher")
        publisher._post("load_lora_adapter", {"lora_name": "owrl-v0", "lora_path": "/x"})
        assert [p for p, _, _ in server.requests] == ["/v1/load_lora_adapter"] * 2
        assert server.requests[1][1]["Authorization"] == "Bearer sk-test-publisher"
        publisher._post("load_lora_adapter", {"lora_name": "owrl-v0"}, ok_if="already been loaded")
        with pytest.raises(InfraError) as refused:
            publisher._post("unload_lora_adapter", {"lora_name": "owrl-v0"}, ok_if="not found")
        assert refused.value.code == "endpoint_error" and "HTTP 404" in str(refused.value)
        assert len(server.requests) == 4  # a 404 is not tried again
    finally:
        server.close()
    gone = AdapterPublisher(server.url, tmp_path, api_key="sk-test-publisher", timeout=2, retries=0)
    with pytest.raises(InfraError) as unreachable:
        gone._post("load_lora_adapter", {"lora_name": "owrl-v1"})
    assert unreachable.value.code == "endpoint_unreachable"
