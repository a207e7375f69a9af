"""The ``openwebrl`` policy (a local Qwen-VL checkpoint), the ``owrl-text`` policy (a local
text-only model reading the accessibility tree) and the ``openai`` policy (an endpoint)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

from owrl_sdk.api import Context, Policy, PolicyInfo, Turn, UsageError

from . import options as _options
from .backend import Sampling, VLBackend
from .fetch import fetched, fetched_weights, prompt_files
from .openai_backend import OpenAIBackend
from .parser import render_turn
from .profiles import EVAL_SAMPLING, SETTLE, WAITS, OpenWebRLProfile, OwrlProfile, check_profile, default_profile
from .prompt import Prompt, build_prompt, openai_messages

if TYPE_CHECKING:  # pragma: no cover
    from owrl_sdk.api import Settings

DEFAULT_POLICY_MODEL = "OpenWebRL/OpenWebRL-4B"

_CACHE: dict[tuple[Any, ...], VLBackend] = {}
_CACHE_LOCK = threading.Lock()

#: A request waiting in a :class:`Batcher`: the prompt, its sampling and the future its answer goes to.
_Pending = tuple[Any, Sampling, asyncio.Future[Any]]


def shared_backend(model_id: str, quantize: str = "auto", adapter: Optional[str] = None) -> VLBackend:
    """One loaded model per (id, quantization, adapter) in this process, shared by workers."""
    key = (model_id, quantize, adapter)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = VLBackend(model_id, quantize=quantize, adapter=adapter)
        return _CACHE[key]


def _generate(backend: Any, prompts: list[Any], sampling: Sampling) -> Any:
    try:
        return backend.generate(prompts, sampling)
    except StopIteration as err:  # cannot cross into an asyncio future: it would hang the waiter
        raise RuntimeError(f"generation failed: {err!r}") from None


class Batcher:
    """Gathers concurrent requests (one per worker) into one batched generate call.

    By default a batch is whatever arrived within ``wait`` seconds, so its make-up (and, on
    a CPU, the exact numbers a batched forward pass gives) depends on timing. In lockstep
    (:meth:`lockstep`) a batch is cut only once every running worker has asked, its
    requests are ordered by their prompt text, and each batch samples with its own seed
    counted from the lockstep's: the same episodes then get the same answers, run after
    run."""

    def __init__(self, backend: Any, max_batch: int = 8, wait: float = 0.02):
        self.backend = backend
        self.max_batch = max_batch
        self.wait = wait
        self.pending: list[_Pending] = []
        self.lock: Optional[asyncio.Lock] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.expected: Optional[Callable[[], int]] = None
        self.seed = 0
        self.rounds = 0

    def lockstep(self, expected: Optional[Callable[[], int]], seed: int = 0) -> None:
        """Cut batches only when ``expected()`` requests wait (the workers that will still ask);
        None: back to batching by time."""
        self.expected, self.seed, self.rounds = expected, seed, 0

    async def generate(self, prompt: Any, sampling: Sampling) -> Any:
        loop = asyncio.get_running_loop()
        if self.lock is None or self.loop is not loop:  # a policy may outlive one asyncio.run
            self.lock, self.loop = asyncio.Lock(), loop
            self.pending = [p for p in self.pending if p[2].get_loop() is loop]
        fut: asyncio.Future[Any] = loop.create_future()
        self.pending.append((prompt, sampling, fut))
        if self.expected is None:
            await asyncio.sleep(self.wait)
        async with self.lock:
            while not fut.done():
                if self.expected is not None:
                    await self._lockstep_round()
                    continue
                batch = [p for p in self.pending if p[1] == sampling][: self.max_batch]
                for item in batch:
                    self.pending.remove(item)
                await self._run(batch, sampling)
        return await fut

    async def _lockstep_round(self) -> None:
        """Wait for every running worker's request, then answer them all in prompt order."""
        assert self.expected is not None
        while len(self.pending) < self.expected():
            await asyncio.sleep(0.002)
        render = getattr(self.backend, "render", None)
        keyed = [(render(p[0]) if render else repr(p[0]), i, p) for i, p in enumerate(self.pending)]
        keyed.sort(key=lambda k: (k[0], k[1]))
        self.pending = []
        ordered = [k[2] for k in keyed]
        for start in range(0, len(ordered), self.max_batch):
            batch = ordered[start:start + self.max_batch]
            self.rounds += 1
            sampling = dataclasses.replace(batch[0][1], seed=self.seed * 1_000_003 + self.rounds)
            await self._run(batch, sampling)

    async def _run(self, batch: list[_Pending], sampling: Sampling) -> None:
        try:
            results = await asyncio.to_thread(_generate, self.backend, [b[0] for b in batch], sampling)
        except Exception as err:
            for _, _, f in batch:
                if not f.done():
                    f.set_exception(err)
        else:
            for (_, _, f), r in zip(batch, results):
                f.set_result(r)


class _ModelPolicy(Policy):
    """Shared by the model policies: render through an interface profile, generate, parse.

    The profile (``profile`` option, else the ``profile`` setting, else by checkpoint:
    ``openwebrl`` for OpenWebRL checkpoints, ``owrl`` otherwise) decides the prompt, the
    declared tools, how calls map onto owrl's tools, the generation defaults and what the
    environment is asked for (see :mod:`.profiles`)."""

    def __init__(self, settings: Settings, backend: Any = None, **options: Any):
        super().__init__(settings, **options)
        self.conf = _options.read(settings, self.name, self.Options or _options.ModelPolicyOptions, options)
        self.text_mode = bool(self.conf.get("text_mode", False))
        self.backend = backend if backend is not None else self._make_backend()
        self.profile = self._make_profile()
        if self.profile.name == "openwebrl":  # the official loop's rules (docs/openwebrl-compat.md)
            self.done_ends_turn = False
            self.repeat_limit = 0
            self.reads_changes = False  # its status lines come from the call's facts, not a page diff
        self.warnings = list(self.profile.warnings)
        defaults = EVAL_SAMPLING if self.profile.name == "openwebrl" else {}
        self.sampling = Sampling.from_options({**defaults, **self.conf})
        self.batcher = Batcher(self.backend, max_batch=int(self.conf.get("max_batch", 16)))

    def _make_backend(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def lockstep(self, expected: Optional[Callable[[], int]]) -> None:
        """Reproducible batches while workers share this policy (see :class:`Batcher`);
        the sampling seed (``seed`` option, else 0) seeds each batch. None: off."""
        self.batcher.lockstep(expected, self.sampling.seed or 0)

    def _model_id(self) -> Optional[str]:
        return getattr(self, "model_id", None) or getattr(self.backend, "model_id", None)

    def _profile_name(self) -> str:
        chosen = self.conf.get("profile") or getattr(self.settings, "profile", None)
        return check_profile(chosen) if chosen else default_profile(self._model_id())

    def _make_profile(self) -> OpenWebRLProfile | OwrlProfile:
        name = self._profile_name()
        if name == "owrl":
            return OwrlProfile(text_mode=self.text_mode)
        if self.text_mode:
            raise UsageError("the openwebrl profile reads screenshots: it has no text mode (use profile owrl)")
        screen = (self.settings.viewport_width, self.settings.viewport_height)
        return OpenWebRLProfile.from_options(self.conf, screen, found=prompt_files("openwebrl"))

    def _tools_in_system(self) -> bool:
        return True

    def prompt(self, context: Context) -> Prompt:
        """The messages this policy sends for ``context`` (training rebuilds them with it)."""
        return self.profile.render(context, tools_in_system=self._tools_in_system())

    def environment(self) -> dict[str, Any]:
        """The openwebrl profile asks for the official environment's ways: dialogs accepted,
        PNG screenshots, and its waits after each action (``settle = "quiescence"``: owrl's
        wait for a quiet page instead, faster and less faithful)."""
        if self.profile.name != "openwebrl":
            return {}
        env: dict[str, Any] = {"dialogs": self.conf.get("dialogs", "accept"), "screenshot": "png"}
        settle = self.conf.get("settle")
        if settle != "quiescence":
            env.update(settle={**SETTLE, **(settle or {})}, waits=WAITS)
        return env

    async def act(self, context: Context) -> Turn:
        gen = await self.batcher.generate(self.prompt(context), self.sampling)
        usage = {"prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
                 "image_tokens": gen.image_tokens, "seconds": round(gen.seconds, 4),
                 "finish_reason": getattr(gen, "finish_reason", "stop")}
        ids = (getattr(gen, "extra", None) or {}).get("token_ids")
        if ids is not None:  # what was sampled, for a trainer's gradient (owrl_train.data)
            usage["completion_ids"] = list(ids)
        if getattr(gen, "finish_reason", "stop") == "length" and self.profile.name == "openwebrl":
            # the released models' runs end on a cut answer; the owrl profile reads what it holds
            return Turn(raw=gen.text, truncated=True, usage=usage)
        turn = self.profile.parse(gen.text)
        if not turn.parse_error:
            turn.calls = self.profile.to_builtin(turn.calls)
        turn.usage = usage
        return turn


class OpenWebRLPolicy(_ModelPolicy):
    """OpenWebRL-4B (or any Qwen-VL checkpoint): 4-bit on CUDA, unquantized on CPU.

    Options (``[plugins.openwebrl]``): ``profile`` (openwebrl, owrl; default by checkpoint),
    ``quantize`` (auto, 4bit, none), ``adapter`` (LoRA folder), ``text_mode`` (owrl profile),
    ``temperature``, ``top_p`` 0.95, ``top_k`` 20, ``max_new_tokens``, ``seed``, ``max_batch`` 16.
    Generation defaults: greedy with 2048 new tokens in the openwebrl profile (as OpenWebRL
    evaluates), temperature 0.6 with 512 in the owrl profile. The openwebrl profile also
    reads ``system_prompt_file``, ``tool_list_file``, ``screenshots`` (1), ``dialogs``
    (accept) and ``settle`` ({network_idle_ms: 5000, after_ms: 1000} after most actions, the
    official pauses after the others; ``"quiescence"``: owrl's wait for a quiet page)."""

    name = "openwebrl"
    Options = _options.ModelPolicyOptions

    # What other plugins (training) use of this one, reached through the catalogue
    # (``catalogue.get("policies", "openwebrl")``) rather than by importing it.
    #: The model loader: ``backend_class(model_id, quantize=..., device=..., trainable=..., [autocast=...])``.
    backend_class = VLBackend
    #: One turn's messages and declared tools: ``prompt_class(messages=..., tools=...)``.
    prompt_class = Prompt
    #: ``build_prompt(context, text_mode=..., tools_in_system=...)``: the owrl profile's prompt.
    build_prompt = staticmethod(build_prompt)
    #: ``render_turn(thought, calls)``: a turn written as the model writes it (``<think>``, ``<tool_call>``).
    render_turn = staticmethod(render_turn)
    #: ``openai_messages(prompt)``: a prompt as OpenAI chat-completion messages.
    openai_messages = staticmethod(openai_messages)
    #: The catalogue name of the text-only policy that runs on the same backend.
    text_policy = "owrl-text"

    def _make_backend(self) -> Any:
        self.model_id = self.settings.model or self.conf.get("model") or DEFAULT_POLICY_MODEL
        path = self.model_id
        if self.model_id == DEFAULT_POLICY_MODEL:  # weights from `owrl model fetch openwebrl`, when there
            path = str(fetched_weights("openwebrl") or path)
        return shared_backend(path, self.conf.get("quantize", "auto"), self.conf.get("adapter"))

    def _tools_in_system(self) -> bool:
        # The checkpoint's chat template declares the tools itself when it knows how.
        template = getattr(getattr(self.backend, "tokenizer", None), "chat_template", "") or ""
        return "tools" not in template

    def info(self) -> PolicyInfo:
        return PolicyInfo(name=self.name, model=getattr(self.backend, "model_id", None),
                          revision=getattr(self.backend, "revision", None), profile=self.profile.name)


#: Tools a text policy declares by default: what a page's accessibility tree lets it use.
TEXT_TOOLS = ("click", "write", "press_keys", "select_option", "done")


class TextPolicy(OpenWebRLPolicy):
    """A text-only causal LM (e.g. SmolLM2 from ``owrl model fetch smollm2``) that reads the
    page's accessibility tree with refs instead of a screenshot and answers in the same
    ``<tool_call>`` format.

    The prompt is the compact one (a short system text, one line per tool) so that a
    small model's context is mostly the page. Options (``[plugins.owrl-text]``): ``model``
    (default: the fetched SmolLM2), ``adapter`` (LoRA folder), ``tools`` (names declared
    in the prompt; default click, write, press_keys, select_option, done), ``feedback``
    (``changes``, the default: the history shows what each call changed and whether its
    expectation held; ``status``: only whether each call ran, for ablations),
    ``max_new_tokens`` (default 96) and the other sampling options of ``openwebrl``."""

    name = "owrl-text"
    Options = _options.TextPolicyOptions

    def __init__(self, settings: Settings, backend: Any = None, **options: Any):
        options.setdefault("max_new_tokens", settings.options(self.name, self.Options).max_new_tokens or 96)
        super().__init__(settings, backend=backend, **options)
        self.text_mode = True
        self.tool_names = tuple(self.conf.get("tools") or TEXT_TOOLS)

    def _make_backend(self) -> Any:
        self.model_id = self.settings.model or self.conf.get("model") or fetched("smollm2")
        if self.model_id is None:
            raise UsageError("the owrl-text policy needs a text model: pass --model PATH, "
                             "or fetch SmolLM2 once with `owrl model fetch smollm2`")
        return shared_backend(str(self.model_id), self.conf.get("quantize", "auto"), self.conf.get("adapter"))

    def _profile_name(self) -> str:
        chosen = self.conf.get("profile")
        if chosen and chosen != "owrl":
            raise UsageError(f"the owrl-text policy speaks the owrl profile only, not '{chosen}'")
        return "owrl"

    def prompt(self, context: Context) -> Prompt:
        tools = [t for t in context.tools if t.name in self.tool_names]
        return build_prompt(dataclasses.replace(context, tools=tools), text_mode=True, compact=True,
                            aria_chars=self.settings.observation_chars or None,
                            feedback=self.conf.get("feedback", "changes") != "status")


class OpenAIPolicy(_ModelPolicy):
    """Any OpenAI-compatible endpoint: a hosted model through its native tool calls, or a
    served OpenWebRL model through the ``<tool_call>`` text it was trained to write.

    Options (``[plugins.openai]``): ``base_url``, ``api_key``, ``model``, ``timeout``,
    ``retries``, ``backoff``, ``headers``, ``api_version``, ``concurrency``, ``tool_calls``
    (native or text; default by profile: native for owrl, text for openwebrl), ``token_param``
    and the sampling options of ``openwebrl`` (sent only when set; see :mod:`.openai_backend`)."""

    name = "openai"
    Options = _options.OpenAIPolicyOptions

    def _make_backend(self) -> Any:
        c = self.conf
        self.model_id = self.settings.model or c.get("model")
        chosen = c.get("profile") or getattr(self.settings, "profile", None)
        profile = check_profile(chosen) if chosen else default_profile(self.model_id)
        return OpenAIBackend(model=self.model_id, base_url=c.get("base_url"),
                             api_key=c.get("api_key"), timeout=float(c.get("timeout", 120)),
                             retries=int(c.get("retries", 4)), backoff=float(c.get("backoff", 1.0)),
                             headers=c.get("headers"), api_version=c.get("api_version"),
                             concurrency=int(c.get("concurrency", 8)),
                             tool_calls=c.get("tool_calls") or ("text" if profile == "openwebrl" else "native"),
                             token_param=c.get("token_param"), proxy=c.get("proxy"))

    def _tools_in_system(self) -> bool:
        tool_calls: str = self.backend.tool_calls
        return tool_calls == "text"  # native: the tools travel as the API's own

    def info(self) -> PolicyInfo:
        return PolicyInfo(name=self.name, model=self.backend.model, revision=self.backend.base_url,
                          profile=self.profile.name)
