"""Scalars to TensorBoard (when installed) and always to ``metrics.jsonl``."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any


class Scalars:
    def __init__(self, out: Path):
        self.out = out
        out.mkdir(parents=True, exist_ok=True)
        self.file = (out / "metrics.jsonl").open("a", encoding="utf-8")
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.tb: Any = SummaryWriter(log_dir=str(out / "tensorboard"))
        except Exception:  # noqa: BLE001 - tensorboard is optional
            warnings.warn("tensorboard is not installed: scalars go to metrics.jsonl only", stacklevel=2)
            self.tb = None

    def log(self, step: int, values: dict[str, float], prefix: str = "") -> None:
        row = {"step": step, "time": time.time(), **{f"{prefix}{k}": v for k, v in values.items()}}
        self.file.write(json.dumps(row) + "\n")
        self.file.flush()
        if self.tb is not None:
            for k, v in values.items():
                self.tb.add_scalar(f"{prefix}{k}", v, step)
            self.tb.flush()

    def last_step(self) -> int:
        """The step of the last line in ``metrics.jsonl`` (-1 when there is none)."""
        last = -1
        with (self.out / "metrics.jsonl").open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    last = int(json.loads(line).get("step", last))
                except (ValueError, AttributeError):  # a line cut by a kill mid-write
                    continue
        return last

    def close(self) -> None:
        self.file.close()
        if self.tb is not None:
            self.tb.close()
