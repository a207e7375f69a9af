"""Memory strategies shipped with owrl, registered through the ``owrl`` entry point.

``default`` keeps the full text history of the episode (thoughts, calls, feedback and
verdicts) and the latest K screenshots (K = 1, as OpenWebRL was trained).

Settings (``[plugins.default]`` in owrl.toml, formerly ``[plugins.memory]``): ``screenshots``
(K), ``reasoning`` (``full`` keeps every thought, ``action-only`` drops past thoughts and keeps
the calls). ``crop``'s are in ``[plugins.crop]`` (formerly ``[plugins.memory-crop]``).

``weighted`` and ``summary`` (:mod:`.strategies`) keep the last few steps whole and either the
heaviest older steps within a budget or one line per older step (docs/memory.md).
"""

from __future__ import annotations

from owrl_sdk import hookimpl
from owrl_sdk.api import Register

from .history import CropMemory, CropOptions, FullHistoryMemory, MemoryOptions, crop_around
from .strategies import SummaryMemory, WeightedMemory

__all__ = ["CropMemory", "CropOptions", "FullHistoryMemory", "MemoryOptions", "SummaryMemory", "WeightedMemory",
           "crop_around"]


@hookimpl
def register_memories(register: Register) -> None:
    register(FullHistoryMemory)
    register(CropMemory)
    register(WeightedMemory)
    register(SummaryMemory)
