"""Training plugins: SFT with LoRA and online MM-GRPO; samplers and rewards.

torch, transformers and peft load only when a command or class is used.

The models, prompts and policies trained here belong to the ``openwebrl`` plugin. Plugins
do not import each other: this one finds that plugin's policy class in the catalogue
(:func:`peer_policy`) and uses only what the core's contract for a trainable policy names
(:class:`owrl_sdk.api.TrainablePolicy`: ``backend_class``, ``prompt_class``, ``build_prompt``,
``render_turn``, ``openai_messages``, ``text_policy``).
"""

from __future__ import annotations

from typing import Any

from owrl_sdk import hookimpl
from owrl_sdk.api import ConfigError, Optimizer, Register

from .rewards import ExpectationReward, JudgedReward, OpenWebRLReward
from .samplers import SAMPLERS

from .peers import MODEL_POLICY, peer_policy

__all__ = ["MODEL_POLICY", "peer_policy"]


class SFT(Optimizer):
    """Supervised fine-tuning (``owrl train sft``); see :mod:`owrl_train.sft`.

    Its ``config`` option (an :class:`owrl_train.sft.SFTConfig`) is what :meth:`optimize`
    trains with; :meth:`train` takes one explicitly."""

    name = "sft"

    def optimize(self, samples: list[Any]) -> dict[str, Any]:
        config = self.options.get("config")
        if config is None:
            raise ConfigError("the sft optimizer needs its config option (an SFTConfig) to optimize")
        return self.train(samples, config)

    def train(self, samples: list[Any], config: Any) -> dict[str, Any]:
        from .sft import train_sft

        return train_sft(samples, config)


def _mmgrpo() -> type[Optimizer]:
    from .rl import MMGRPO

    return MMGRPO


@hookimpl
def register_optimizers(register: Register) -> None:
    register(SFT)
    register(_mmgrpo())


@hookimpl
def register_samplers(register: Register) -> None:
    for sampler in SAMPLERS:
        register(sampler)


@hookimpl
def register_rewards(register: Register) -> None:
    register(JudgedReward)
    register(ExpectationReward)
    register(OpenWebRLReward)


@hookimpl
def register_commands(register: Register) -> None:
    from .commands import train_command

    register(train_command)
