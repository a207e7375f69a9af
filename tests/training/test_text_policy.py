"""The text-only path: a causal LM reading the accessibility tree, trained with SFT and GRPO,
and ``owrl model fetch`` (cache, arguments, GGUF conversion).

The models are tiny random ones built here (a Llama with owrl's tiny tokenizer, and a
GGUF written with the ``gguf`` package); their output is random, which is enough to prove
the pipeline. Nothing here downloads: the real SmolLM2 is used only when the cache
already holds it.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("peft")

from owrl_openwebrl.backend import Sampling, VLBackend  # noqa: E402
from owrl_openwebrl.fetch import MARKER, cache_root, convert_gguf, fetched, model_dir  # noqa: E402
from owrl_openwebrl.policy import TextPolicy  # noqa: E402
from owrl_openwebrl.tiny import build_tiny_text  # noqa: E402
from owrl_sdk.contract.plugins import Plugins  # noqa: E402
from owrl_sdk.config import ConfigError  # noqa: E402
from owrl_sdk.contract.memory import Context  # noqa: E402
from owrl_sdk.types import Observation, Task  # noqa: E402
from owrl_train.data import Sample  # noqa: E402
from owrl_train.model import TrainableVL  # noqa: E402
from owrl_train.rl import MMGRPO, RLConfig  # noqa: E402
from owrl_train.sft import sft_loss  # noqa: E402

from owrl_cli import owrl  # noqa: E402

ARIA = '- generic [ref=e2]:\n  - generic [ref=e3]: Click on the "Ok" button.\n  - button "Ok" [ref=e5]\n  - button "No" [ref=e6]'
TARGET_OK = '<tool_call>\n{"name": "click", "arguments": {"ref": "e5"}}\n</tool_call>'
TARGET_NO = '<tool_call>\n{"name": "click", "arguments": {"ref": "e6"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tiny_text(tmp_path_factory):
    return build_tiny_text(tmp_path_factory.mktemp("tiny") / "llama")


@pytest.fixture
def text_trainable(tiny_text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TrainableVL(str(tiny_text), catalogue=Plugins().catalogue, lora_r=8, seed=0)


def page_context(tools):
    task = Task(id="t", intent='Click on the "Ok" button.', start_url="file:///x.html")
    return Context(task=task, observation=Observation(url="file:///x.html", title="Click Button Task", aria=ARIA),
                   tools=tools)


# ---------------------------------------------------------------------------- the policy


def test_text_policy_acts_on_a_real_miniwob_page(tiny_text, tmp_path, plugins):
    """One episode of MiniWoB's click-button page in Chromium, driven by the tiny text model."""
    from owrl_sdk.config import Settings
    from owrl_train.rl import BrowserRollouts

    settings = Settings(runs_dir=str(tmp_path / "runs"), plugins={"miniwob": {"time_limit": 120}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = plugins.catalogue.get("policies", "owrl-text")(settings, model=str(tiny_text), max_new_tokens=16,
                                                                 temperature=1.0, top_k=0, top_p=1.0, seed=0)
    assert policy.backend.kind == "text" and policy.backend.image_processor is None
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    task = next(t for t in suite.tasks() if t.id == "click-button")
    rollouts = BrowserRollouts(suite, settings, plugins, workers=1)

    async def go():
        try:
            return await rollouts.collect(policy, [("g", task, 7)], 1, tmp_path / "out")
        finally:
            await rollouts.close()

    (traj,) = asyncio.run(go())
    assert traj.outcome.status != "infra_error", traj.outcome
    assert len(traj.steps) == 1  # the rollout horizon wins over the suite's own (MiniWoB tasks say 8)
    step = traj.steps[0]
    assert "[ref=e" in step.observation.aria and traj.task.intent.startswith("Click on the")
    assert step.turn.raw is not None and step.turn.usage["completion_tokens"] > 0
    assert step.turn.usage["image_tokens"] == 0
    # the prompt it saw: the compact text one, with the page's tree and only the text tools
    tools = list(plugins.catalogue.items["tools"].values())
    prompt = policy.prompt(Context(task=traj.task, observation=step.observation, tools=tools))
    system, *_, page = [p["text"] for m in prompt.messages for p in m["content"]]
    assert "- click(" in system and "- scroll(" not in system and "<tools>" not in system
    assert step.observation.aria in page and not prompt.images()
    assert traj.judgements and traj.judgements[-1].judge == "composite"
    assert "suite_check" in traj.metadata  # MiniWoB's own reward was read off the page


def test_text_backend_refuses_screenshots_and_renders_strings(text_trainable, plugins, settings):
    backend = text_trainable.backend
    tools = list(plugins.catalogue.items["tools"].values())
    policy = TextPolicy(settings, backend=backend)
    prompt = policy.prompt(page_context(tools))
    text = backend.render(prompt)
    assert ARIA in text and "Task: Click on the" in text
    with pytest.raises(ValueError, match="text-only model cannot read screenshots"):
        backend.encode([text], [[b"\xff\xd8not-a-jpeg"]])
    out = backend.generate([prompt, prompt], Sampling(max_new_tokens=4, seed=0, temperature=1.0, top_k=0))
    assert len(out) == 2 and all(g.completion_tokens <= 4 and g.image_tokens == 0 for g in out)
    async def two_workers():
        sampling = Sampling(max_new_tokens=2, seed=0)
        return await asyncio.gather(*(policy.batcher.generate(prompt, sampling) for _ in range(2)))

    for _ in range(2):  # one policy serving two event loops (an evaluation, then another)
        assert all(g.completion_tokens <= 2 for g in asyncio.run(two_workers()))


# ---------------------------------------------------------------------------- training


def test_lora_on_a_text_model_scores_only_the_target_positions(text_trainable, plugins, settings):
    import torch

    names = [n for n, _ in text_trainable.model.named_modules() if n.endswith("self_attn.q_proj.lora_A")]
    assert len(names) == 2  # both layers of the tiny Llama carry the adapter
    tools = list(plugins.catalogue.items["tools"].values())
    prompt = TextPolicy(settings, backend=text_trainable.backend).prompt(page_context(tools))
    batch = text_trainable.encode([Sample(prompt, TARGET_OK), Sample(prompt, TARGET_NO + " extra")])
    with torch.no_grad():
        logp, mask, _ = text_trainable.token_logprobs(batch)
        full = torch.log_softmax(text_trainable.model(**{k: v for k, v in batch.items() if k != "target_mask"})
                                 .logits[:, :-1].float(), -1)
    want = full.gather(-1, batch["input_ids"][:, 1:].unsqueeze(-1)).squeeze(-1)
    want_mask = batch["target_mask"][:, 1:].float()
    assert logp.shape[1] < want.shape[1] / 4  # the head ran on the target positions only
    assert float(mask.sum()) == float(want_mask.sum())
    assert float((logp * mask).sum()) == pytest.approx(float((want * want_mask).sum()), rel=1e-5)


def test_lora_on_the_last_layers_only(tiny_text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        top = TrainableVL(str(tiny_text), catalogue=Plugins().catalogue, lora_r=4, lora_layers=1)
    adapted = {n.split(".layers.")[1].split(".")[0] for n, _ in top.model.named_modules() if n.endswith("lora_A")}
    assert adapted == {"1"}  # the tiny Llama has layers 0 and 1


def test_sft_then_grpo_steps_move_the_text_model(text_trainable, plugins, settings, tmp_path):
    import torch

    tools = list(plugins.catalogue.items["tools"].values())
    prompt = TextPolicy(settings, backend=text_trainable.backend).prompt(page_context(tools))
    ok, no = Sample(prompt, TARGET_OK), Sample(prompt, TARGET_NO)
    opt = torch.optim.AdamW(text_trainable.trainable_parameters(), lr=1e-2)
    first = None
    for _ in range(5):
        loss, tokens = sft_loss(text_trainable, [ok])
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert tokens > 10 and float(loss) < first * 0.8

    def margin() -> float:
        with torch.no_grad():
            logp, mask, _ = text_trainable.token_logprobs(text_trainable.encode([ok, no]))
        per = (logp * mask).sum(1)
        return float(per[1] - per[0])

    before = margin()
    cfg = RLConfig(model="tiny", out=tmp_path, lr=5e-3, minibatch=2, kl_coef=0.0, target_kl=0.0)
    grpo = MMGRPO(settings, model=text_trainable, config=cfg)
    for _ in range(3):  # the rewarded answer is "No" now: its advantage is positive
        metrics = grpo.update([Sample(prompt, TARGET_OK, advantage=-1.0), Sample(prompt, TARGET_NO, advantage=1.0)])
    assert "kl" in metrics and metrics["samples"] == 2.0  # the KL to the start is logged even without its term
    assert margin() > before + 0.5


def test_bf16_autocast_generates_and_trains_in_bfloat16_with_float32_weights(tiny_text, plugins, settings, tmp_path):
    """autocast="bf16": the forward passes run their matrix products in bfloat16 (so the
    scores differ from float32's a little, not a lot), the weights and the LoRA's gradients
    stay float32, generation answers, and SFT steps still lower the loss."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = TrainableVL(str(tiny_text), catalogue=Plugins().catalogue, lora_r=8, seed=0)
        fast = TrainableVL(str(tiny_text), catalogue=Plugins().catalogue, lora_r=8, seed=0, autocast="bf16")
    tools = list(plugins.catalogue.items["tools"].values())
    prompt = TextPolicy(settings, backend=fast.backend).prompt(page_context(tools))
    ok = Sample(prompt, TARGET_OK)
    with torch.no_grad():
        exact, mask, _ = plain.token_logprobs(plain.encode([ok]))
        rounded, _, _ = fast.token_logprobs(fast.encode([ok]))
    assert rounded.dtype == torch.float32
    assert not torch.equal(exact, rounded)  # bfloat16 products: not float32's numbers...
    assert float(((exact - rounded).abs() * mask).max()) < 0.5  # ...but close to them
    captured = []
    hook = fast.model.get_output_embeddings().register_forward_hook(lambda _m, _i, out: captured.append(out.dtype))
    answer = fast.backend.generate([prompt], Sampling(temperature=0.0, max_new_tokens=4))[0]
    hook.remove()
    assert captured and captured[0] == torch.bfloat16 and answer.completion_tokens >= 1
    opt = torch.optim.AdamW(fast.trainable_parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        loss, _ = sft_loss(fast, [ok])
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in fast.trainable_parameters())
    assert losses[-1] < losses[0] * 0.8
    with pytest.raises(ValueError, match="autocast"):
        VLBackend(str(tiny_text), quantize="none", autocast="fp16")
    config = tmp_path / "rl.toml"
    config.write_text('model = "tiny"\nautocast = "fp16"\n')
    with pytest.raises(ConfigError, match="autocast must be one of none, bf16"):
        RLConfig.from_toml(config)


def test_autocast_reaches_the_model_from_every_entry_point(monkeypatch, tmp_path):
    """RLConfig's and SFTConfig's autocast, and `owrl train sft --autocast`, reach the model
    they build (the model's own behaviour is the test above)."""
    from click.testing import CliRunner

    import owrl_train.model
    import owrl_train.sft
    from owrl_train.commands import sft_command
    from owrl_train.rl import RLRun
    from owrl_train.sft import SFTConfig, train_sft

    asked = []

    class Built(Exception):
        pass

    def building(model_id, **kwargs):
        asked.append(kwargs.get("autocast"))
        raise Built

    monkeypatch.setattr(owrl_train.model, "TrainableVL", building)
    monkeypatch.setattr(owrl_train.sft, "TrainableVL", building)
    with pytest.raises(Built):
        RLRun(RLConfig(model="m", out=tmp_path / "rl", autocast="bf16"), rollouts=None, plugins=Plugins())
    with pytest.raises(Built):
        train_sft([Sample(None, "x")], SFTConfig(model="m", out=tmp_path / "sft", autocast="bf16"))
    data = tmp_path / "rows.jsonl"
    data.write_text("")
    result = CliRunner().invoke(sft_command, ["--data", str(data), "--model", "m", "--out", str(tmp_path / "cli"),
                                              "--autocast", "bf16"])
    assert isinstance(result.exception, Built), result.output
    assert asked == ["bf16", "bf16", "bf16"]


# ---------------------------------------------------------------------------- owrl model fetch


def test_fetch_arguments_and_cache_location(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("OWRL_CACHE_DIR", raising=False)
    assert model_dir("smollm2") == tmp_path / "xdg" / "owrl" / "models" / "smollm2-135m-instruct"
    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert model_dir("smollm2", tmp_path / "opt") == tmp_path / "opt" / "models" / "smollm2-135m-instruct"

    out = owrl("model", "fetch", "gpt-5", "--cache", str(tmp_path / "c"), cwd=tmp_path)
    assert out.returncode == 2 and "unknown model 'gpt-5': known models are smollm2" in out.stderr
    out = owrl("model", "fetch", cwd=tmp_path)
    assert out.returncode == 2 and "Missing argument 'NAME'" in out.stderr

    # a finished conversion is found by its marker and never fetched again
    done = model_dir("smollm2", tmp_path / "c")
    done.mkdir(parents=True)
    (done / MARKER).write_text("{}")
    out = owrl("model", "fetch", "smollm2", "--cache", str(tmp_path / "c"), cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == str(done) and "already in the cache" in out.stderr
    assert fetched("smollm2", tmp_path / "c") == done and fetched("smollm2", tmp_path / "elsewhere") is None


def test_text_policy_without_a_model_says_how_to_get_one(tmp_path, monkeypatch, settings):
    from owrl_sdk.errors import UsageError

    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path))
    with pytest.raises(UsageError, match="owrl model fetch smollm2"):
        TextPolicy(settings)


def write_tiny_gguf(path: Path):
    """A 2-layer llama GGUF with owrl's tiny BPE tokenizer; matrices stored as Q8_0 like a
    real quantized file, norms as F32. Returns the ffn_up matrix of layer 0 as written."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    from owrl_openwebrl.tiny import build_tokenizer

    tok = build_tokenizer(512)
    tokens = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    merges = [" ".join(m) if isinstance(m, list) else m
              for m in json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]]
    hidden, ff, layers, heads, kv = 64, 128, 2, 4, 2
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(layers)
    w.add_context_length(512)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hidden // heads)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in tok.all_special_tokens else 1 for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(tok.convert_tokens_to_ids("<|im_start|>"))
    w.add_eos_token_id(tok.convert_tokens_to_ids("<|im_end|>"))
    w.add_pad_token_id(tok.convert_tokens_to_ids("<|endoftext|>"))
    w.add_chat_template(tok.chat_template)
    rng = np.random.default_rng(0)
    written = {}

    def add(name, shape, quantized=True):
        a = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        written[name] = a
        if quantized:
            q = gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, a)

    add("token_embd.weight", (len(tokens), hidden))
    add("output_norm.weight", (hidden,), quantized=False)
    for i in range(layers):
        add(f"blk.{i}.attn_norm.weight", (hidden,), quantized=False)
        add(f"blk.{i}.ffn_norm.weight", (hidden,), quantized=False)
        add(f"blk.{i}.attn_q.weight", (hidden, hidden))
        add(f"blk.{i}.attn_k.weight", (kv * hidden // heads, hidden))
        add(f"blk.{i}.attn_v.weight", (kv * hidden // heads, hidden))
        add(f"blk.{i}.attn_output.weight", (hidden, hidden))
        add(f"blk.{i}.ffn_gate.weight", (ff, hidden))
        add(f"blk.{i}.ffn_up.weight", (ff, hidden))
        add(f"blk.{i}.ffn_down.weight", (hidden, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return written["blk.0.ffn_up.weight"]


def test_convert_a_quantized_gguf_to_a_checkpoint_the_text_policy_loads(tmp_path, settings):
    import numpy as np

    up = write_tiny_gguf(tmp_path / "tiny.Q8_0.gguf")
    out = convert_gguf(tmp_path / "tiny.Q8_0.gguf", tmp_path / "cache" / "models" / "tiny")
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert json.loads((out / MARKER).read_text())["converted_from"] == "tiny.Q8_0.gguf"
    assert not json.loads((out / "config.json").read_text()).get("quantization_config")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backend = VLBackend(str(out))
    assert backend.kind == "text"
    loaded = backend.model.model.layers[0].mlp.up_proj.weight.detach().numpy()
    assert np.abs(loaded - up).max() < 0.01  # dequantized: Q8_0 keeps 1/127 of each block's range
    assert "<|im_start|>assistant" in backend.render(TextPolicy(settings, backend=backend).prompt(page_context([])))
    assert backend.generate([TextPolicy(settings, backend=backend).prompt(page_context([]))],
                            Sampling(max_new_tokens=3, seed=0))[0].completion_tokens >= 1


def test_fetched_smollm2_answers_sensibly_if_cached():
    path = fetched("smollm2")
    if path is None:
        pytest.skip(f"SmolLM2 is not in the cache ({model_dir('smollm2')}): run `owrl model fetch smollm2` first")
    from owrl_openwebrl.prompt import Prompt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backend = VLBackend(str(path))
    assert backend.kind == "text"
    assert 130e6 < sum(p.numel() for p in backend.model.parameters()) < 140e6
    question = Prompt(messages=[{"role": "user", "content": [{"type": "text", "text": "What is the capital of France?"}]}])
    answer = backend.generate([question], Sampling(temperature=0.0, max_new_tokens=12))[0].text
    assert "Paris" in answer


# ---------------------------------------------------------------------------- reproducible batches


@pytest.mark.slow
def test_lockstep_batches_make_sampled_rollouts_repeat_exactly(tiny_text, tmp_path, plugins):
    """Three workers share one sampling policy on real MiniWoB pages. In lockstep a batch waits
    for every worker that will still ask, in prompt order, with a seed per batch: two runs
    give the same answers, and every batch but the tail's holds all three workers."""
    from owrl_sdk.config import Settings
    from owrl_train.rl import BrowserRollouts, said

    settings = Settings(runs_dir=str(tmp_path / "runs"), plugins={"miniwob": {"time_limit": 120}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        policy = plugins.catalogue.get("policies", "owrl-text")(settings, model=str(tiny_text), max_new_tokens=12,
                                                                 temperature=1.0, top_k=0, top_p=1.0, seed=5)
    suite = plugins.catalogue.get("task_suites", "miniwob")(settings)
    tasks = {t.id: t for t in suite.tasks() if t.id in ("click-button", "enter-text", "click-test")}
    items = [(f"{name}#{n}", task, n) for n in (1, 2) for name, task in sorted(tasks.items())] + [
        ("click-test#1b", tasks["click-test"], 1)]
    sizes: list[int] = []
    real = policy.backend.generate

    def counted(prompts, sampling):
        sizes.append(len(prompts))
        return real(prompts, sampling)

    policy.backend.generate = counted

    def play(run: int) -> dict[str, str]:
        rollouts = BrowserRollouts(suite, settings, plugins, workers=3, lockstep=True)

        async def go():
            try:
                return await rollouts.collect(policy, items, 2, tmp_path / f"out{run}")
            finally:
                await rollouts.close()

        done = asyncio.run(go())
        assert all(t.outcome.status != "infra_error" for t in done), [t.outcome for t in done]
        return {f"{t.metadata['group']}/{said(t)}": said(t) for t in done}

    first = play(1)
    first_sizes, sizes[:] = list(sizes), []
    assert play(2) == first
    assert sizes == first_sizes
    assert max(sizes) == 3 and sizes.count(3) >= len(sizes) - 2
    assert policy.batcher.expected is None  # back to batching by time once the rollouts are done


def test_the_feedback_ablation_keeps_only_whether_each_call_ran(plugins, settings, text_trainable):
    """``feedback = "status"`` (an ablation): the history says a past call ran, not what it changed."""
    from owrl_sdk.types import CallRecord, Step, ToolCall, ToolResult, Turn

    tools = list(plugins.catalogue.items["tools"].values())
    ctx = page_context(tools)
    call = ToolCall(name="click", arguments={"ref": "e5"})
    step = Step(index=0, observation=ctx.observation, turn=Turn(calls=[call]),
                calls=[CallRecord(call=call, result=ToolResult(feedback='1 element appeared (dialog "Saved")', changed=True))])
    ctx.history = [step]
    full = TextPolicy(settings, backend=text_trainable.backend)
    bare = TextPolicy(settings, backend=text_trainable.backend, feedback="status")
    text_full = text_trainable.backend.render(full.prompt(ctx))
    text_bare = text_trainable.backend.render(bare.prompt(ctx))
    assert 'dialog "Saved"' in text_full and 'dialog "Saved"' not in text_bare
    assert "click: ok" in text_bare and ARIA in text_bare
