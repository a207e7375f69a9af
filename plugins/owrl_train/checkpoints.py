"""Checkpoints: the adapter, the optimizer, the RNG and the trainer's own state, saved atomically."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any, Optional


def save_checkpoint(root: Path, name: str, model: Any, optimizer: Any, state: dict[str, Any], keep: int = 2) -> Path:
    import torch

    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_adapter(tmp)
    torch.save({"optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
                "python_rng": random.getstate()}, tmp / "trainer.pt")
    (tmp / "state.json").write_text(json.dumps(state, indent=2))
    final = root / name
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)  # a crash mid-save leaves the previous checkpoint intact
    for old in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))[:-keep]:
        shutil.rmtree(old)
    return final


def latest_checkpoint(root: Path) -> Optional[Path]:
    if not root.is_dir():
        return None
    done = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / "state.json").exists())
    return done[-1] if done else None


def load_checkpoint(path: Path, model: Any, optimizer: Any) -> dict[str, Any]:
    """Restore a checkpoint :func:`save_checkpoint` wrote. ``trainer.pt`` is read first, as
    tensors and plain values only: a file that holds anything else (a pickle that would run
    code on load) is refused with a ValueError, and the model is left untouched."""
    import pickle

    import torch

    try:
        blob = torch.load(path / "trainer.pt", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{path / 'trainer.pt'}: not loaded: it holds more than tensors and plain values "
                         f"(loading it could run code): {first}") from None
    model.load_adapter_weights(path)
    optimizer.load_state_dict(blob["optimizer"])
    torch.set_rng_state(blob["torch_rng"])
    random.setstate(blob["python_rng"])
    state: dict[str, Any] = json.loads((path / "state.json").read_text())
    return state
