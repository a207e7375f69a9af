from __future__ import annotations

import io
import warnings

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory):
    """Tiny random Qwen3-VL and Qwen2-VL checkpoints, built and saved by the test session."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from owrl_openwebrl.tiny import build_tiny_vl

    root = tmp_path_factory.mktemp("tiny")
    return {family: build_tiny_vl(root / family, family) for family in ("qwen3-vl", "qwen2-vl")}


@pytest.fixture(scope="session")
def tiny_backend(tiny_checkpoints):
    from owrl_openwebrl.backend import VLBackend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return VLBackend(str(tiny_checkpoints["qwen3-vl"]))


@pytest.fixture(scope="session")
def jpeg():
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (1280, 1000), (200, 60, 60)).save(buf, "JPEG")
    return buf.getvalue()
