"""A model backend on transformers, shared by the policy, the judge and the trainer.

Loads a Qwen-VL family checkpoint (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) by hub id or local
path, or a text-only causal LM (any checkpoint without a vision config, e.g. SmolLM2
from ``owrl model fetch smollm2``): its ``kind`` is ``vl`` or ``text``. A text model
reads prompts in text mode (the accessibility tree, no screenshots). On CUDA it loads in 4-bit by default (bitsandbytes nf4, bf16 compute): that is the
INT4 policy. On CPU it loads unquantized, with a warning. An optional LoRA adapter is
applied with peft. Generation is batched. bitsandbytes is imported with the model hub offline
(:func:`import_bitsandbytes`), so that it fetches no code from the network.

For VL checkpoints it does not use the Processor class: in transformers 5 those refuse to
build without torchvision. It renders the chat template with the tokenizer, runs the
image processor (the PIL one) and expands each image placeholder to its patch count,
which is what the Processor would do.
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

from owrl_sdk.api import ModelUnavailable

from .fetch import weights_revision
from .prompt import Prompt

IMAGE_PAD = "<|image_pad|>"
#: Template markers a sampled answer must not carry into the next prompt.
CONTROL_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|im_start|>", "<|im_end|>")


def import_bitsandbytes() -> None:
    """Import bitsandbytes, when it is installed and not yet imported, with the model hub offline.

    On a CPU with AVX512-BF16, importing bitsandbytes (``import peft`` and a 4-bit load do)
    asks the model hub, through the ``kernels`` package, for a compiled kernel, and downloads
    and loads it where the hub answers: code from the network, at every model load, on a
    machine that may have no route out (the attempt then fails or waits). owrl loads no code
    from the network: the import runs with ``huggingface_hub`` in offline mode, bitsandbytes
    keeps its own CPU kernels, and the two warnings it and ``kernels`` print about it are
    held back. ``OWRL_HUB_KERNELS=1`` lets bitsandbytes fetch.
    """
    import importlib.util

    if "bitsandbytes" in sys.modules or importlib.util.find_spec("bitsandbytes") is None:
        return
    hub = importlib.util.find_spec("huggingface_hub") is not None  # without a hub client nothing fetches
    if os.environ.get("OWRL_HUB_KERNELS") == "1" or not hub:
        import bitsandbytes  # noqa: F401
        return
    from huggingface_hub import constants

    quiet = [logging.getLogger(name) for name in ("bitsandbytes", "kernels")]
    levels = [logger.level for logger in quiet]
    offline = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    for logger in quiet:
        logger.setLevel(logging.ERROR)
    try:
        import bitsandbytes  # noqa: F401
    finally:
        constants.HF_HUB_OFFLINE = offline
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)


class WeightsUnavailable(ModelUnavailable):
    """The model's weights cannot be had here; the message says what to do instead."""


@dataclass
class Sampling:
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 20
    max_new_tokens: int = 512
    seed: Optional[int] = None
    #: The arguments that were chosen (by options or a profile) rather than left at these
    #: defaults; None: all of them. A server client sends only these (a local model uses all).
    given: Optional[frozenset[str]] = None

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "Sampling":
        known = {k: options[k] for k in ("temperature", "top_p", "top_k", "max_new_tokens", "seed") if k in options}
        return cls(**known, given=frozenset(known))


@dataclass
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    image_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: ``stop`` (the model ended its answer) or ``length`` (cut at ``max_new_tokens``)
    finish_reason: str = "stop"


def _remedy(model_id: str) -> str:
    return (f"cannot load model '{model_id}': its weights are not on this machine and cannot be downloaded. "
            "Pass --model PATH to a local checkpoint, or use an endpoint: --policy openai with "
            "OWRL_OPENAI_BASE_URL set")


def resolve_checkpoint(model_id: str) -> str:
    """A local directory, or a hub id already in the local cache; otherwise a clear error."""
    if Path(model_id).expanduser().is_dir():
        return str(Path(model_id).expanduser())
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(model_id, local_files_only=True)
    except Exception:  # noqa: BLE001 - any miss means: not here
        pass
    if os.environ.get("HF_HUB_OFFLINE") or os.environ.get("OWRL_OFFLINE"):
        raise WeightsUnavailable(_remedy(model_id))
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(model_id)
    except Exception:  # noqa: BLE001 - no network, no such repo, no access
        raise WeightsUnavailable(_remedy(model_id)) from None


def text_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages whose content is one string, as plain chat templates expect; images refused."""
    out = []
    for m in messages:
        content = m["content"]
        if not isinstance(content, str):
            if any(p["type"] != "text" for p in content):
                raise ValueError("a text-only model cannot read screenshots: prompt it in text mode")
            content = "\n".join(p["text"] for p in content)
        out.append({**m, "content": content})
    return out


_ASSISTANT_BLOCK = re.compile(r"(<\|im_start\|>assistant\n)(.*?)(<\|im_end\|>)", re.S)


def restore_assistant_text(rendered: str, messages: list[dict[str, Any]]) -> str:
    """``rendered`` with each assistant block's content replaced by the message's own text,
    in order (a template that strips earlier ``<think>`` blocks loses nothing)."""
    said = ["".join(p["text"] for p in m["content"] if p["type"] == "text") if not isinstance(m["content"], str)
            else m["content"] for m in messages if m["role"] == "assistant"]
    it = iter(said)

    def put_back(match: re.Match[str]) -> str:
        text = next(it, None)
        return match.group(0) if text is None else match.group(1) + text + match.group(3)

    return _ASSISTANT_BLOCK.sub(put_back, rendered, count=len(said))


class VLBackend:
    def __init__(self, model_id: str, *, quantize: str = "auto", adapter: Optional[str] = None,
                 device: Optional[str] = None, dtype: Optional[str] = None, trainable: bool = False,
                 autocast: Optional[str] = None):
        import torch
        import transformers
        from transformers import AutoConfig, AutoTokenizer, Qwen2VLImageProcessorPil

        if autocast not in (None, "none", "bf16"):
            raise ValueError(f"autocast is 'bf16' or 'none', not {autocast!r}")
        import_bitsandbytes()  # before a 4-bit load or peft imports it
        #: bf16: matrix products in bfloat16, weights kept as loaded (see :meth:`compute`)
        self.autocast = autocast if autocast == "bf16" else None
        self.model_id = model_id
        adapter_cfg = Path(model_id).expanduser() / "adapter_config.json"
        if adapter is None and adapter_cfg.is_file():  # a LoRA folder (owrl train output): load its base
            import json

            adapter = str(Path(model_id).expanduser())
            model_id = json.loads(adapter_cfg.read_text()).get("base_model_name_or_path") or model_id
        path = resolve_checkpoint(model_id)
        self.path = path
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if quantize == "auto":
            quantize = "4bit" if self.device.startswith("cuda") else "none"
        if quantize == "4bit" and not self.device.startswith("cuda"):
            warnings.warn("4-bit loading on CPU is slow and meant for tests; use a GPU for real runs", stacklevel=2)
        if quantize == "none" and not self.device.startswith("cuda"):
            warnings.warn(f"loading {model_id} unquantized on CPU: expect slow generation", stacklevel=2)
        self.quantize = quantize
        config = AutoConfig.from_pretrained(path)
        #: ``vl`` (screenshots and text) or ``text`` (a causal LM without a vision tower)
        self.kind = "vl" if getattr(config, "vision_config", None) is not None else "text"
        arch = (config.architectures or [None])[0]
        model_cls = getattr(transformers, arch, None) if arch else None
        if model_cls is None:
            from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

            model_cls = AutoModelForImageTextToText if self.kind == "vl" else AutoModelForCausalLM
        kwargs: dict[str, Any] = {}
        if quantize == "4bit":
            from transformers import BitsAndBytesConfig

            compute = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
            kwargs["quantization_config"] = BitsAndBytesConfig(  # type: ignore[no-untyped-call]  # unannotated __init__
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=compute,
                bnb_4bit_use_double_quant=True,
                # the vision tower and the head stay in full precision (and small dims fail on CPU)
                llm_int8_skip_modules=["visual", "lm_head"],
            )
            kwargs["device_map"] = {"": self.device if self.device != "cuda" else 0}
            # the modules left whole (embeddings, norms, the vision tower, the head) in the compute
            # dtype too: without it they load in float32, which doubles their memory and, on a GPU,
            # made every generation of the tiny test model peak at 3.6 GB a prompt (bench/cuda_tiny_check.py)
            kwargs["dtype"] = getattr(torch, dtype) if dtype else compute
        else:
            if dtype:
                kwargs["dtype"] = getattr(torch, dtype)
            elif self.device.startswith("cuda"):
                kwargs["dtype"] = torch.bfloat16
        #: The transformers model, or the peft model wrapping it (typed loosely by both libraries).
        self.model: Any = model_cls.from_pretrained(path, **kwargs)
        if quantize != "4bit":
            # transformers wraps to() with functools.wraps(nn.Module.to): typed as the unbound method
            self.model.to(self.device)  # type: ignore[arg-type]
        if adapter:
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, adapter, is_trainable=trainable)
        if not trainable:
            self.model.eval()
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.image_processor = Qwen2VLImageProcessorPil.from_pretrained(path) if self.kind == "vl" else None
        self.merge = int(getattr(self.image_processor, "merge_size", 2))
        self.revision = weights_revision(path)  # the commit the fetch recorded, where it was fetched

    def compute(self) -> Any:
        """The context every forward pass runs in: with ``autocast="bf16"`` the matrix
        products run in bfloat16 while the weights (and a LoRA's gradients) stay as they were
        loaded. On a CPU with bfloat16 instructions that is faster (``bench/bench_autocast.py``
        measures it); the answers differ a little."""
        import contextlib

        import torch

        if self.autocast is None:  # leave a caller's own autocast as it is
            return contextlib.nullcontext()
        return torch.autocast(self.device.split(":")[0], dtype=torch.bfloat16)

    # ------------------------------------------------------------------ encoding

    def render(self, prompt: Prompt, tools_in_template: bool = True) -> str:
        template = self.tokenizer.chat_template or ""
        use_tools = tools_in_template and "tools" in template
        messages = prompt.messages if self.kind == "vl" else text_messages(prompt.messages)
        tools: Optional[list[Union[dict[Any, Any], Callable[..., Any]]]] = list(prompt.tools) if use_tools else None
        text = self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        assert isinstance(text, str)  # tokenize=False: the rendered text, not token ids
        if prompt.keep_assistant_text:
            text = restore_assistant_text(text, prompt.messages)
        return text

    def encode(self, texts: list[str], images: list[list[bytes]]) -> dict[str, Any]:
        """Token ids, attention mask and pixel values for a batch, images expanded to patches."""
        from PIL import Image

        if self.image_processor is None and any(images):
            raise ValueError("a text-only model cannot read screenshots: prompt it in text mode")
        flat = [Image.open(io.BytesIO(b)).convert("RGB") for group in images for b in group]
        batch: dict[str, Any] = {}
        expanded = list(texts)
        if flat:
            assert self.image_processor is not None  # a text model was refused images above
            vision = self.image_processor(images=flat, return_tensors="pt")
            batch["pixel_values"] = vision["pixel_values"]
            batch["image_grid_thw"] = vision["image_grid_thw"]
            counts = [int(g.prod()) // (self.merge ** 2) for g in vision["image_grid_thw"]]
            placeholders = sum(t.count(IMAGE_PAD) for t in texts)
            if placeholders != len(counts):
                # never let a StopIteration escape into asyncio (it would hang the awaiting task)
                raise ValueError(f"the prompt marks {placeholders} images but {len(counts)} were given")
            it = iter(counts)
            expanded = []
            for text in texts:
                parts = text.split(IMAGE_PAD)
                out = parts[0]
                for part in parts[1:]:
                    out += "<|placeholder|>" * next(it) + part
                expanded.append(out.replace("<|placeholder|>", IMAGE_PAD))
        elif any(IMAGE_PAD in t for t in texts):
            raise ValueError("the prompt marks images but none were given")
        enc = self.tokenizer(expanded, return_tensors="pt", padding=True, add_special_tokens=False)
        batch.update(enc)
        if flat:
            batch["mm_token_type_ids"] = self.mm_token_types(batch["input_ids"])
        return batch

    def mm_token_types(self, input_ids: Any) -> Any:
        """Per-token modality (0 text, 1 image), which multimodal RoPE needs with images."""
        image_id = self.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        return (input_ids == image_id).long()

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[Prompt], sampling: Sampling) -> list[Generation]:
        import torch

        texts = [self.render(p) for p in prompts]
        batch = self.encode(texts, [p.images() for p in prompts])
        image_id = self.tokenizer.convert_tokens_to_ids(IMAGE_PAD)
        image_tokens = ((batch["input_ids"] == image_id).sum(dim=1).tolist() if self.kind == "vl"
                        else [0] * len(prompts))
        batch = {k: v.to(self.model.device) if hasattr(v, "to") else v for k, v in batch.items()}
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        do_sample = sampling.temperature > 0
        gen_kwargs: dict[str, Any] = dict(max_new_tokens=sampling.max_new_tokens, do_sample=do_sample,
                                          pad_token_id=self.tokenizer.pad_token_id)
        if do_sample:
            gen_kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k)
        started = time.perf_counter()
        with torch.no_grad(), self.compute():
            out = self.model.generate(**batch, **gen_kwargs)
        seconds = time.perf_counter() - started
        prompt_len = batch["input_ids"].shape[1]
        results = []
        for i in range(len(prompts)):
            new = out[i, prompt_len:]
            eos = self.tokenizer.eos_token_id
            n = int((new != self.tokenizer.pad_token_id).sum())
            ended = eos is not None and bool((new == eos).any())
            if ended:
                n = int((new == eos).nonzero()[0]) + 1
            finish = "length" if not ended and n >= sampling.max_new_tokens else "stop"
            text = self.tokenizer.decode(new[:n], skip_special_tokens=False)
            assert isinstance(text, str)  # one sequence decodes to one string
            text = text.replace(self.tokenizer.eos_token or "", "").replace(self.tokenizer.pad_token or "", "")
            for token in CONTROL_TOKENS:  # they would be read as real markers in the next prompt
                text = text.replace(token, "")
            # the sampled ids (an ended answer's EOS included): a trainer scores these, not a re-tokenised text
            results.append(Generation(text=text, prompt_tokens=int(batch["attention_mask"][i].sum()),
                                      completion_tokens=n, seconds=seconds, image_tokens=int(image_tokens[i]),
                                      finish_reason=finish, extra={"token_ids": new[:n].tolist()}))
        return results
