"""The ``demo-shop`` task suite: tasks on the embedded shop and their success checks."""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from owrl_sdk.api import DocumentError, Flow, format_validation_error, SuiteCheck, Task, TaskSuite, Trajectory

from .checks import evaluate_task
from .shop import DemoShop

SCHEME = "demo:shop"
TASKS_FILE = "tasks.jsonl"


def resolve_demo_url(url: str, base_url: str) -> str:
    """``demo:shop`` and ``demo:shop/PATH`` as URLs of the shop served at ``base_url``; others unchanged."""
    base = base_url.rstrip("/")
    if url == SCHEME:
        return base + "/"
    if url.startswith(SCHEME + "/"):
        return base + "/" + url[len(SCHEME) + 1:]
    return url


def load_tasks() -> list[Task]:
    """The suite's tasks as written in tasks.jsonl (start URLs still ``demo:shop/...``)."""
    text = resources.files(__package__).joinpath(TASKS_FILE).read_text(encoding="utf-8")
    tasks = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        source = f"{TASKS_FILE} line {number}"
        try:
            tasks.append(Task.model_validate(json.loads(line)))
        except json.JSONDecodeError as err:
            raise DocumentError(f"{source}: not valid JSON ({err.msg})") from None
        except ValidationError as err:
            raise DocumentError(f"{source}: {format_validation_error(err)}") from None
    return tasks


def resolve_task(task: Task, base_url: str) -> Task:
    """A copy of ``task`` pointed at the live shop: start URL, allowed domain, oracle URLs."""
    metadata = copy.deepcopy(task.metadata)
    for turn in metadata.get("oracle_turns", []):
        for call in turn.get("calls", []):
            args = call.get("arguments", {})
            if call.get("name") == "goto_url" and isinstance(args.get("url"), str):
                args["url"] = resolve_demo_url(args["url"], base_url)
    return task.model_copy(update={
        "start_url": resolve_demo_url(task.start_url, base_url),
        "allowed_domains": ["127.0.0.1"],
        "metadata": metadata,
    })


def oracle_flow(task: Task) -> Flow:
    """The task's ``metadata.oracle_turns`` as an ``owrl.flow/1`` flow for the scripted policy."""
    return Flow.model_validate({"task": task.intent, "start_url": task.start_url,
                                "turns": task.metadata.get("oracle_turns", [])})


async def read_state(env: Any, base_url: str) -> Optional[dict[str, Any]]:
    """The episode's shop state, fetched with the episode's own browser cookies."""
    response = await env.context.request.get(base_url.rstrip("/") + "/api/state")
    if not response.ok:
        return None
    state: dict[str, Any] = await response.json()
    return state


class DemoShopOptions(BaseModel):
    """``[plugins.demo-shop]`` (formerly ``[plugins.demo]``): the demo shop suite's options."""

    model_config = ConfigDict(extra="forbid")
    renamed_from: ClassVar[tuple[str, ...]] = ("demo",)

    port: int = Field(0, ge=0, le=65535, description="port the shop is served on (0: any free one)")
    add_label: str = Field("", description="the text of the product page's add button (blank: Add to cart); "
                           "OWRL_DEMO_SHOP_ADD_LABEL tries a redesign on flows")


class DemoShopSuite(TaskSuite):
    """Tasks on the embedded demo shop: search, filters, variants, cart, checkout, account.

    The shop is served on 127.0.0.1 for the life of the suite; each browser context is its
    own shop session. Options (``[plugins.demo-shop]``, formerly ``[plugins.demo]``, or keyword
    arguments): ``port`` (0: any), ``add_label``.
    """

    name = "demo-shop"
    description = "An embedded web shop on 127.0.0.1: search, filters, variants, cart, checkout, log-in."
    Options = DemoShopOptions
    scheme = SCHEME

    def __init__(self, settings: Any, **options: Any):
        super().__init__(settings, **options)
        opts = settings.options(self.name, DemoShopOptions, **options)
        self.port: int = opts.port
        self.shop = DemoShop(add_label=opts.add_label)

    @property
    def base_url(self) -> str:
        return self.shop.base_url

    def _ensure_started(self) -> str:
        # tasks() may be asked for before setup() (to list or select tasks); both start the shop.
        return self.shop.start(self.port)

    async def setup(self) -> None:
        self._ensure_started()

    def tasks(self) -> list[Task]:
        base = self._ensure_started()
        return [resolve_task(t, base) for t in load_tasks()]

    async def check(self, env: Any, task: Task, trajectory: Trajectory) -> Optional[SuiteCheck]:
        state = None
        if task.checks:
            if getattr(env, "context", None) is None:
                return SuiteCheck(score=0.0, success=False,
                                  reason="the environment has no browser context to read the shop state with")
            state = await read_state(env, self.base_url)
        answer = trajectory.outcome.answer if trajectory.outcome is not None else None
        results = evaluate_task(task.checks, state, answer, task.answer, task.answer_match)
        passed = sum(r.ok for r in results)
        failed = [r for r in results if not r.ok]
        reason = ("all checks passed" if not failed
                  else "; ".join(f"{r.check.get('type')}: {r.detail}" for r in failed))
        return SuiteCheck(
            score=passed / len(results) if results else 0.0,
            success=bool(results) and not failed,
            reason=reason,
            details={"checks": [r.to_json() for r in results], "state": state},
        )

    async def teardown(self) -> None:
        self.shop.stop()
