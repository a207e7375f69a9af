"""The ``openwebrl`` plugin's policy classes, found in the catalogue (plugins do not import each
other). A module of its own, so that the training modules import it and not their package."""

from __future__ import annotations

from typing import Any

from owrl_sdk.api import ConfigError, TrainablePolicy, trainable

#: The catalogue name of the policy whose model, prompts and turn format training uses.
MODEL_POLICY = "openwebrl"


def peer_policy(name: str = MODEL_POLICY, *, catalogue: Any) -> "type[TrainablePolicy]":
    """The policy class another plugin registered as ``name`` (default: ``openwebrl``), from
    the ``catalogue`` the caller was handed (a script takes its ``Plugins``' catalogue), held to
    the core's :class:`~owrl_sdk.api.TrainablePolicy` contract: training uses only what that
    names. A missing plugin raises :class:`~owrl_sdk.errors.PluginError` naming the policies
    there are; a policy that lacks part of the contract, a ``ConfigError`` naming it."""
    if catalogue is None:
        raise ConfigError("owrl_train finds the openwebrl plugin's model and prompt in the plugin catalogue: pass "
                          "catalogue= (in a script, the catalogue of owrl_sdk.contract.plugins.Plugins)")
    return trainable(catalogue.get("policies", name))
