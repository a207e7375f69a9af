"""Training plugins: SFT with LoRA and online MM-GRPO; samplers and rewards.

torch, transformers and peft load only when a command or class is used.

The models, prompts and policies trained here belong to the ``openwebrl`` plugin. Plugins
do not import each other: this one finds that plugin's policy classes in the catalogue
(:func:`peer_policy`), and the model loader and prompt helpers as attributes of the
``openwebrl`` policy class (``backend_class``, ``prompt_class``, ``build_prompt``,
``render_turn``, ``openai_messages``, ``text_policy``).
"""

from __future__ import annotations

from typing import Any

from owrl_sdk import hookimpl
from owrl_sdk.api import ConfigError, Optimizer, Register

from .rewards import ExpectationReward, JudgedReward, OpenWebRLReward
from .samplers import SAMPLERS

#: The catalogue name of the policy whose model, prompts and turn format training uses.
MODEL_POLICY = "openwebrl"


def peer_policy(name: str = MODEL_POLICY, *, catalogue: Any) -> Any:
    """The policy class another plugin registered as ``name`` (default: ``openwebrl``), from
    the ``catalogue`` the caller was handed (a script takes its ``Plugins``' catalogue). A missing
    plugin raises :class:`~owrl_sdk.errors.PluginError` naming the policies there are."""
    if catalogue is None:
        raise ConfigError("owrl_train finds the openwebrl plugin's model and prompt in the plugin catalogue: pass "
                          "catalogue= (in a script, the catalogue of owrl_sdk.plugins.Plugins)")
    return catalogue.get("policies", name)


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
