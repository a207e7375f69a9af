from __future__ import annotations

import warnings

import pytest

from owrl_sdk.contract.plugins import Plugins


@pytest.fixture(scope="session")
def tiny_qwen3(tmp_path_factory):
    pytest.importorskip("peft")
    from owrl_openwebrl.tiny import build_tiny_vl

    return build_tiny_vl(tmp_path_factory.mktemp("tiny") / "qwen3-vl", "qwen3-vl")


@pytest.fixture
def trainable(tiny_qwen3):
    from owrl_train.model import TrainableVL

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TrainableVL(str(tiny_qwen3), catalogue=Plugins().catalogue, lora_r=8, seed=0)
