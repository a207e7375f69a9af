"""``owrl record``'s engine: record what a person does in Chromium as an ``owrl.flow/1`` flow.

:class:`Recorder` (in :mod:`owrl_sdk.recorder.session`) runs the browser and takes the page's
reports; :mod:`owrl_sdk.recorder.flowbuild` turns them into calls, expectations and turns;
``capture.js`` is the script every frame runs.
"""

from __future__ import annotations

from owrl_sdk.recorder.flowbuild import FlowBuilder, choose_text, stable_url_part, upper_snake
from owrl_sdk.recorder.session import Recorder, capture_script, partial_path

__all__ = ["FlowBuilder", "Recorder", "capture_script", "choose_text", "partial_path", "stable_url_part", "upper_snake"]
