"""The core's contract for a trainable policy (``owrl_sdk.api.TrainablePolicy``): the trainer
plugin finds the model policy in the catalogue and uses only what the contract names."""

from __future__ import annotations

import pytest

from owrl_sdk.api import ConfigError, Policy, trainable
from owrl_sdk.contract.policy import TRAINABLE_ATTRIBUTES


def test_the_openwebrl_policy_meets_the_contract_the_trainer_holds_it_to():
    from owrl_sdk.contract.plugins import Plugins
    from owrl_train.peers import peer_policy

    catalogue = Plugins().catalogue
    model = peer_policy(catalogue=catalogue)
    assert all(hasattr(model, a) for a in TRAINABLE_ATTRIBUTES)
    text = peer_policy(model.text_policy, catalogue=catalogue)
    assert text.name == model.text_policy


def test_a_policy_without_the_contract_is_refused_with_what_it_lacks():
    class Scripted(Policy):
        name = "scripted"
        backend_class = object

    with pytest.raises(ConfigError, match="'scripted' cannot be trained: its class lacks prompt_class, text_policy, "
                                          "build_prompt, render_turn, openai_messages"):
        trainable(Scripted)
