"""A checkpoint with a LoRA adapter, ready to train and to sample from.

The checkpoint is a Qwen-VL model or a text-only causal LM (the backend's ``kind``); for
a text model the adapter goes on every attention and MLP projection.

The reference model for the KL term is the policy training started from: a frozen copy of
the adapter's weights taken by :meth:`TrainableVL.freeze_reference` (RL takes it at its
first iteration: the SFT adapter), swapped in for the duration of ``reference()``. Only
the adapter is copied (a few MB); the base weights are shared. Before a copy is taken the
reference is the base model, the adapter disabled. The model stays in train mode
with LoRA dropout 0, so sampling and scoring see the same function (and 4-bit layers
avoid the eval-then-train in-place error of bitsandbytes).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Iterator, Optional

from .peers import peer_policy
from .data import Sample

LORA_TARGETS = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
TEXT_LORA_TARGETS = r".*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
PROJECTIONS = "(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


def lora_targets(kind: str, config: Any, last_layers: Optional[int] = None) -> str:
    """The modules that get the adapter: every attention and MLP projection of the language
    model, or only those of its last ``last_layers`` decoder layers (the backward pass then
    stops there, which more than halves a training step on a CPU)."""
    scope = ".*language_model.*" if kind == "vl" else ".*"
    if not last_layers:
        return LORA_TARGETS if kind == "vl" else TEXT_LORA_TARGETS
    total = int(getattr(config, "text_config", config).num_hidden_layers)
    layers = "|".join(str(i) for i in range(max(0, total - last_layers), total))
    return rf"{scope}\.layers\.({layers})\..*\.{PROJECTIONS}"


def adapter_base(path: str) -> Optional[str]:
    """The base model of a LoRA adapter folder, or None when ``path`` is not one."""
    cfg = Path(path) / "adapter_config.json"
    if cfg.is_file():
        config: dict[str, Any] = json.loads(cfg.read_text())
        return config.get("base_model_name_or_path")
    return None


def target_ids(tokenizer: Any, sample: Sample) -> list[int]:
    """The token ids a sample trains on: the ids its rollout sampled when it kept them
    (``meta["token_ids"]``: an ended answer's EOS included, a cut one's not), else the
    target text tokenised, with EOS appended unless the answer was cut at the token limit
    (``meta["truncated"]``): the model never ended it, so it is not taught to have."""
    ids = sample.meta.get("token_ids")
    if ids:
        return [int(i) for i in ids]
    eos = "" if sample.meta.get("truncated") else (tokenizer.eos_token or "")
    return list(tokenizer(sample.target + eos, add_special_tokens=False)["input_ids"])


def answer_lengths(tokenizer: Any, samples: list[Any], limit: Optional[int] = None) -> tuple[int, int]:
    """The longest of ``samples``' answers in tokens, as a policy would generate it (its EOS
    included), and how many are longer than ``limit`` new tokens: answers a policy with that
    ``max_new_tokens`` is cut in before it ends them, however well it learned them."""
    lengths = [len(target_ids(tokenizer, s)) for s in samples]
    return max(lengths, default=0), sum(1 for n in lengths if limit is not None and n > limit)


class TrainableVL:
    def __init__(self, model_id: str, *, lora_r: int = 16, lora_alpha: Optional[int] = None, four_bit: bool = False,
                 adapter: Optional[str] = None, device: Optional[str] = None, seed: int = 0,
                 lora_layers: Optional[int] = None, autocast: Optional[str] = None, catalogue: Any = None):
        import torch

        torch.manual_seed(seed)
        base = adapter_base(model_id)
        if base is not None:  # an adapter folder: train on from it
            adapter, model_id = model_id, base
        backend_class = peer_policy(catalogue=catalogue).backend_class  # the openwebrl plugin's model loader
        # autocast="bf16": generation and training forward passes in bfloat16 (the backend's compute())
        self.backend = backend_class(model_id, quantize="4bit" if four_bit else "none", device=device, trainable=True,
                                     **({"autocast": autocast} if autocast not in (None, "none") else {}))
        # peft after the backend, which imports bitsandbytes (that peft imports) without a fetch from the hub
        from peft import LoraConfig, PeftModel, get_peft_model

        model = self.backend.model
        if adapter:
            model = PeftModel.from_pretrained(model, adapter, is_trainable=True)
        else:
            targets = lora_targets(self.backend.kind, model.config, lora_layers)
            config = LoraConfig(r=lora_r, lora_alpha=lora_alpha or 2 * lora_r, lora_dropout=0.0,
                                target_modules=targets, bias="none")
            model = get_peft_model(model, config)
        model.train()
        self.model = model
        self.backend.model = model
        self.model_id = model_id
        self.tokenizer = self.backend.tokenizer

    # ------------------------------------------------------------------ batches

    def encode(self, samples: list[Sample]) -> dict[str, Any]:
        """Prompt + target token ids, right-padded, with a mask on the target tokens."""
        import torch

        tok = self.tokenizer
        texts = [self.backend.render(s.prompt) for s in samples]
        prompts = self.backend.encode(texts, [s.prompt.images() for s in samples])
        rows, masks = [], []
        for i, s in enumerate(samples):
            p_ids = prompts["input_ids"][i][prompts["attention_mask"][i].bool()].tolist()
            t_ids = target_ids(tok, s)
            rows.append(p_ids + t_ids)
            masks.append([0] * len(p_ids) + [1] * len(t_ids))
        width = max(len(r) for r in rows)
        pad = tok.pad_token_id
        input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
        attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        target_mask = torch.tensor([m + [0] * (width - len(m)) for m in masks])
        batch = {"input_ids": input_ids, "attention_mask": attention, "target_mask": target_mask}
        for key in ("pixel_values", "image_grid_thw"):
            if key in prompts:
                batch[key] = prompts[key]
        if "pixel_values" in prompts:
            batch["mm_token_type_ids"] = self.backend.mm_token_types(input_ids)
        return batch

    def token_logprobs(self, batch: dict[str, Any], with_entropy: bool = False,
                       temperature: Any = 1.0) -> tuple[Any, Any, Any]:
        """Log-probabilities of each token given the ones before, aligned so that column t
        scores token t + 1; the mask marks target tokens. Returns (logp, mask, entropy).

        ``temperature`` (a number, or one per row) divides the logits first: the
        distribution a rollout sampled from at that temperature, so that the ratios of
        PPO start at 1 and the entropy is the sampler's.

        Only the positions that predict a target token in some row are projected onto the
        vocabulary (the head over every prompt token would cost a fifth of the forward pass
        and most of the memory); the columns are those positions, the same for every call
        on the same batch."""
        import torch

        device = self.model.device
        inputs = {k: v.to(device) for k, v in batch.items() if k != "target_mask"}
        next_is_target = batch["target_mask"][:, 1:].to(device)
        keep = (next_is_target.sum(0) > 0).nonzero().squeeze(-1)
        with getattr(self.backend, "compute", contextlib.nullcontext)():
            logits = self.model(**inputs, logits_to_keep=keep).logits.float()
        if isinstance(temperature, (list, tuple)):
            temps = torch.tensor([t if t and t > 0 else 1.0 for t in temperature], dtype=logits.dtype,
                                 device=logits.device).view(-1, 1, 1)
            logits = logits / temps
        elif temperature and temperature != 1.0:  # greedy (0) is scored as temperature 1
            logits = logits / float(temperature)
        targets = inputs["input_ids"][:, 1:][:, keep]
        logsm = torch.log_softmax(logits, dim=-1)
        logp = logsm.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        mask = next_is_target[:, keep].float()
        entropy = -(logsm.exp() * logsm).sum(-1) if with_entropy else None
        return logp, mask, entropy

    # ------------------------------------------------------------------ the reference

    def freeze_reference(self, weights: Optional[dict[str, Any]] = None) -> None:
        """Keep the adapter's weights as they are now (or ``weights``, a saved copy) as the
        reference that :meth:`reference` scores with."""
        names = dict(self._trainable())
        source = weights if weights is not None else {n: p for n, p in names.items()}
        missing = sorted(set(names) - set(source))
        if missing:
            raise ValueError(f"the reference has no weights for {missing[0]} (and {len(missing) - 1} more)")
        self._reference = {n: source[n].detach().clone().to(p.device, p.dtype) for n, p in names.items()}

    @property
    def reference_weights(self) -> Optional[dict[str, Any]]:
        return getattr(self, "_reference", None)

    def save_reference(self, path: Path) -> None:
        from safetensors.torch import save_file

        if self.reference_weights is None:
            raise ValueError("no reference frozen")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        save_file({n: t.contiguous().cpu() for n, t in self.reference_weights.items()}, str(tmp))
        tmp.replace(path)

    def load_reference(self, path: Path) -> None:
        from safetensors.torch import load_file

        self.freeze_reference(load_file(str(path)))

    def adapter_drift(self) -> float:
        """The L2 norm of (adapter now - reference): how far training has moved the adapter."""
        import torch

        if self.reference_weights is None:
            return 0.0
        total = torch.zeros(())
        with torch.no_grad():
            for n, p in self._trainable():
                total = total + ((p.detach().float() - self.reference_weights[n].float()) ** 2).sum().cpu()
        return float(total.sqrt())

    def _trainable(self) -> list[tuple[str, Any]]:
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        """The reference policy for the duration: the frozen adapter when one was taken
        (:meth:`freeze_reference`), else the base model (the adapter disabled)."""
        import torch

        ref = self.reference_weights
        if ref is None:
            with self.model.disable_adapter():
                yield
            return
        params = self._trainable()
        saved = [p.detach().clone() for _, p in params]
        with torch.no_grad():
            for n, p in params:
                p.copy_(ref[n])
        try:
            yield
        finally:
            with torch.no_grad():
                for (_, p), keep in zip(params, saved):
                    p.copy_(keep)

    def trainable_parameters(self) -> list[Any]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def save_adapter(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        (out / "owrl_adapter.json").write_text(json.dumps({"base_model": self.model_id}))

    def load_adapter_weights(self, path: Path) -> None:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(self.model, load_file(str(path / "adapter_model.safetensors")))
