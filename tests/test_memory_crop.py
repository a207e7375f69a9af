"""The crop memory: a window around the last action's point instead of the full screenshot."""

from __future__ import annotations

import io

from PIL import Image

from owrl_memory import CropMemory, crop_around
from owrl_sdk.types import CallRecord, Observation, Step, Task, ToolCall, ToolResult, Turn


def shot(colour=(10, 20, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (1280, 1000), colour).save(buf, "JPEG")
    return buf.getvalue()


def test_crop_window_is_clamped_to_the_image():
    img = Image.open(io.BytesIO(crop_around(shot(), [990, 990], 300)))
    assert img.size == (300, 300)


def test_crop_follows_the_last_point_and_refreshes_after_navigation(settings):
    mem = CropMemory(settings, full_every=100)
    task = Task(intent="x", start_url="http://a/")
    mem.reset(task)
    first = mem.context(task, Observation(url="http://a/", screenshot=shot()), [])
    assert Image.open(io.BytesIO(first.screenshots[0])).size == (1280, 1000)
    click = ToolCall(name="click", arguments={"point_2d": [500, 500]})
    mem.record(Step(index=0, observation=Observation(url="http://a/", screenshot=shot()), turn=Turn(calls=[click]),
                    calls=[CallRecord(call=click, result=ToolResult())]))
    same_page = mem.context(task, Observation(url="http://a/", screenshot=shot()), [])
    assert Image.open(io.BytesIO(same_page.screenshots[0])).size == (300, 300)
    assert same_page.extras["crop"] == {"point_2d": [500.0, 500.0], "size": 300}
    moved = mem.context(task, Observation(url="http://a/next", screenshot=shot()), [])
    assert Image.open(io.BytesIO(moved.screenshots[0])).size == (1280, 1000)
