"""Training plugins: SFT with LoRA and online MM-GRPO; samplers and rewards.

torch, transformers and peft load only when a command or class is used.
"""

from __future__ import annotations

from typing import Any

from owrl_sdk import hookimpl
from owrl_sdk.components import Optimizer


class SFT(Optimizer):
    """Supervised fine-tuning (``owrl train sft``); see :mod:`owrl_train.sft`."""

    name = "sft"

    def train(self, samples: list[Any], config: Any) -> dict[str, Any]:
        from .sft import train_sft

        return train_sft(samples, config)


def _mmgrpo():
    from .rl import MMGRPO

    return MMGRPO


@hookimpl
def register_optimizers(register):
    register(SFT)
    register(_mmgrpo())


@hookimpl
def register_samplers(register):
    from .samplers import SAMPLERS

    for sampler in SAMPLERS:
        register(sampler)


@hookimpl
def register_rewards(register):
    from .rewards import JudgedReward

    register(JudgedReward)


@hookimpl
def register_commands(register):
    from .commands import train_command

    register(train_command)
