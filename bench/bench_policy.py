"""Policy latency, tokens per second and image tokens per step.

    .venv/bin/python bench/bench_policy.py [--steps 10] [--new-tokens 32]

1. The openwebrl policy on a tiny random Qwen3-VL checkpoint (built on the spot) on the
   CPU: median latency per step and generated tokens per second (plumbing cost: the tiny
   model's numbers say nothing about the 4B model's speed).
2. Image tokens per step for a 1280x1000 screenshot under Qwen3-VL's and Qwen2.5-VL's real
   image-processor settings, with the full screenshot and with the ``crop`` memory's
   300x300 window around the last action.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))


def screenshot() -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (1280, 1000), (245, 245, 245))
    d = ImageDraw.Draw(img)
    for i in range(0, 1000, 40):
        d.rectangle([40, i, 1240, i + 28], outline=(60, 60, 60))
    out = io.BytesIO()
    img.save(out, "JPEG", quality=85)
    return out.getvalue()


def image_tokens(jpeg: bytes, patch: int) -> int:
    from PIL import Image
    from transformers import Qwen2VLImageProcessorPil

    # the released processors' pixel bounds: Qwen2.5-VL 3136..12845056, Qwen3-VL 65536..16777216
    bounds = {14: (3136, 12845056), 16: (65536, 16777216)}[patch]
    proc = Qwen2VLImageProcessorPil(patch_size=patch, temporal_patch_size=2, merge_size=2,
                                    size={"shortest_edge": bounds[0], "longest_edge": bounds[1]})
    grid = proc(images=[Image.open(io.BytesIO(jpeg)).convert("RGB")], return_tensors="pt")["image_grid_thw"][0]
    return int(grid.prod()) // 4


async def latency(steps: int, new_tokens: int) -> tuple[list[float], float]:
    from builtin_tools import TOOLS
    from owrl_openwebrl.backend import VLBackend
    from owrl_openwebrl.policy import OpenWebRLPolicy
    from owrl_openwebrl.tiny import build_tiny_vl
    from owrl_sdk.config import Settings
    from owrl_sdk.contract.memory import Context
    from owrl_sdk.types import Observation, Task

    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backend = VLBackend(str(build_tiny_vl(Path(d) / "tiny")))
        policy = OpenWebRLPolicy(Settings(), backend=backend, max_new_tokens=new_tokens, temperature=1.0, seed=0)
        shot = screenshot()
        ctx = Context(task=Task(intent="Buy a red hat", start_url="http://127.0.0.1/"),
                      observation=Observation(url="http://127.0.0.1/", title="Shop"),
                      tools=[t() for t in TOOLS], screenshots=[shot])
        await policy.act(ctx)  # warm-up
        times, tokens = [], 0
        for _ in range(steps):
            t = time.perf_counter()
            turn = await policy.act(ctx)
            times.append(time.perf_counter() - t)
            tokens += turn.usage["completion_tokens"]
        return times, tokens / sum(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()
    from owrl_memory import crop_around

    times, tps = asyncio.run(latency(args.steps, args.new_tokens))
    print(f"tiny Qwen3-VL policy on CPU: median {statistics.median(times) * 1000:.0f} ms/step, "
          f"{tps:.0f} generated tokens/s ({args.steps} steps, {args.new_tokens} new tokens max)")
    shot = screenshot()
    crop = crop_around(shot, [500, 500], 300)
    for name, patch in (("Qwen3-VL", 16), ("Qwen2.5-VL", 14)):
        full, cropped = image_tokens(shot, patch), image_tokens(crop, patch)
        print(f"{name}: image tokens per step at 1280x1000 {full}, with a 300x300 crop {cropped} "
              f"({1 - cropped / full:.0%} fewer)")
    print("reproduce: .venv/bin/python bench/bench_policy.py")


if __name__ == "__main__":
    main()
