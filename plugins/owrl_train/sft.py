"""Supervised fine-tuning with LoRA (QLoRA with 4-bit), loss on target tokens only."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from .checkpoints import latest_checkpoint, load_checkpoint, save_checkpoint
from .data import Sample
from .logging import Scalars
from .model import TrainableVL, answer_lengths


@dataclass
class SFTConfig:
    model: str
    out: Path
    lora_r: int = 16
    epochs: int = 3
    lr: float = 1e-5
    four_bit: bool = False
    #: "bf16": forward passes in bfloat16 (TrainableVL's autocast)
    autocast: str = "none"
    batch_size: int = 1
    grad_accum: int = 4
    max_grad_norm: float = 1.0
    save_every: int = 50
    seed: int = 0
    resume: bool = False
    #: the learning rate after the warm-up: "constant", or decayed to 0 at the last step
    #: ("linear", "cosine"); ``warmup_ratio`` of the steps rise linearly from 0 first
    lr_scheduler: str = "constant"
    warmup_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.lr_scheduler not in ("constant", "linear", "cosine"):
            raise ValueError(f"lr_scheduler must be constant, linear or cosine, not {self.lr_scheduler!r}")
        if not 0.0 <= self.warmup_ratio <= 1.0:
            raise ValueError(f"warmup_ratio must be between 0 and 1, not {self.warmup_ratio}")


def lr_factor(step: int, total: int, scheduler: str = "constant", warmup_ratio: float = 0.0) -> float:
    """The learning rate's share at optimizer step ``step`` (0-based) of ``total``: a linear
    rise over the warm-up's steps, then held (``constant``) or decayed to 0 at the last step."""
    warmup = int(math.ceil(warmup_ratio * total))
    if step < warmup:
        return (step + 1) / (warmup + 1)
    if scheduler == "constant" or total <= warmup + 1:
        return 1.0
    progress = (step - warmup) / (total - warmup - 1)
    if scheduler == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def sft_loss(model: TrainableVL, samples: list[Sample]) -> Any:
    batch = model.encode(samples)
    logp, mask, _ = model.token_logprobs(batch)
    return -(logp * mask).sum() / mask.sum().clamp(min=1.0), int(mask.sum())


def train_sft(samples: list[Sample], cfg: SFTConfig, model: Optional[TrainableVL] = None,
              on_step: Optional[Callable[[dict[str, Any]], None]] = None, *, catalogue: Any = None) -> dict[str, Any]:
    """SFT of ``model`` (or a new one from ``cfg.model``, loaded by the openwebrl plugin found in
    ``catalogue``) on ``samples``."""
    import torch

    if not samples:
        raise ValueError("no samples to train on")
    model = model or TrainableVL(cfg.model, lora_r=cfg.lora_r, four_bit=cfg.four_bit, seed=cfg.seed,
                                 autocast=cfg.autocast, catalogue=catalogue)
    params = model.trainable_parameters()
    opt = torch.optim.AdamW(params, lr=cfg.lr)
    ckpt_root = cfg.out / "checkpoints"
    state = {"epoch": 0, "batch": 0, "step": 0}
    if cfg.resume and (last := latest_checkpoint(ckpt_root)) is not None:
        state = load_checkpoint(last, model, opt)
    scalars = Scalars(cfg.out)
    batches_per_epoch = (len(samples) + cfg.batch_size - 1) // cfg.batch_size
    total_steps = cfg.epochs * ((batches_per_epoch + cfg.grad_accum - 1) // cfg.grad_accum)
    last_loss = float("nan")
    try:
        for epoch in range(state["epoch"], cfg.epochs):
            order = list(range(len(samples)))
            random.Random(cfg.seed + epoch).shuffle(order)
            batches = [order[i:i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
            start = state["batch"] if epoch == state["epoch"] else 0
            accum_loss, accum_tokens = 0.0, 0
            for b in range(start, len(batches)):
                loss, tokens = sft_loss(model, [samples[i] for i in batches[b]])
                (loss / cfg.grad_accum).backward()
                accum_loss += float(loss.detach())
                accum_tokens += tokens
                boundary = (b + 1) % cfg.grad_accum == 0 or b == len(batches) - 1
                if not boundary:
                    continue
                norm = torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                # the step's rate from the step count alone: a resumed run goes on where it was
                lr = cfg.lr * lr_factor(state["step"], total_steps, cfg.lr_scheduler, cfg.warmup_ratio)
                for group in opt.param_groups:
                    group["lr"] = lr
                opt.step()
                opt.zero_grad(set_to_none=True)
                state.update(epoch=epoch, batch=b + 1, step=state["step"] + 1)
                n_micro = (b % cfg.grad_accum) + 1
                last_loss = accum_loss / n_micro
                metrics = {"loss": last_loss, "grad_norm": float(norm), "tokens": accum_tokens, "epoch": epoch,
                           "lr": lr}
                scalars.log(state["step"], metrics, prefix="sft/")
                if on_step:
                    on_step({**metrics, "step": state["step"], "total_steps": total_steps})
                accum_loss, accum_tokens = 0.0, 0
                if state["step"] % cfg.save_every == 0:
                    save_checkpoint(ckpt_root, f"step-{state['step']:07d}", model, opt, state)
            state.update(epoch=epoch + 1, batch=0)
        save_checkpoint(ckpt_root, f"step-{state['step']:07d}", model, opt, state)
        model.save_adapter(cfg.out / "adapter")
    finally:
        scalars.close()
    # a policy that runs the adapter needs max_new_tokens of at least this, or it is cut
    # before it ends the longest answers it learned
    longest, _ = answer_lengths(model.tokenizer, samples)
    return {"steps": state["step"], "final_loss": last_loss, "adapter": str(cfg.out / "adapter"),
            "longest_answer": longest}
