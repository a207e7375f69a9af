"""The screenshot shown while a JavaScript dialog blocks the page.

Chromium cannot capture a page that a dialog blocks, so the observation shows the last
screenshot with the dialog drawn over it, as a person would see it.
"""

from __future__ import annotations

import io
import textwrap
from typing import Optional

from PIL import Image, ImageDraw, ImageFont

_BUTTONS = {"alert": ["OK"], "confirm": ["Cancel", "OK"], "prompt": ["Cancel", "OK"], "beforeunload": ["Stay", "Leave"]}


def draw_dialog(
    screenshot: Optional[bytes], kind: str, message: str, viewport: tuple[int, int], quality: int = 85,
    fmt: str = "jpeg",
) -> bytes:
    width, height = viewport
    if screenshot:
        image = Image.open(io.BytesIO(screenshot)).convert("RGB")
    else:
        image = Image.new("RGB", (width, height), "white")
    shade = Image.new("RGB", image.size, (0, 0, 0))
    image = Image.blend(image, shade, 0.35)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=18) if hasattr(ImageFont, "load_default") else None
    lines = textwrap.wrap(message, 60)[:8] or [""]
    if kind == "prompt":
        lines.append("")
    box_w, box_h = min(520, image.width - 40), 112 + 26 * len(lines) + (36 if kind == "prompt" else 0)
    x0, y0 = (image.width - box_w) // 2, 24
    draw.rounded_rectangle((x0, y0, x0 + box_w, y0 + box_h), radius=10, fill="white", outline=(120, 120, 120))
    draw.text((x0 + 20, y0 + 16), "This page says", fill=(30, 30, 30), font=font)
    for i, line in enumerate(lines):
        draw.text((x0 + 20, y0 + 48 + 26 * i), line, fill=(20, 20, 20), font=font)
    if kind == "prompt":
        fy = y0 + 48 + 26 * len(lines)
        draw.rectangle((x0 + 20, fy, x0 + box_w - 20, fy + 30), outline=(90, 90, 90))
    bx = x0 + box_w - 20
    for label in reversed(_BUTTONS.get(kind, ["OK"])):
        bw = 90
        draw.rounded_rectangle((bx - bw, y0 + box_h - 46, bx, y0 + box_h - 14), radius=6, fill=(26, 115, 232))
        draw.text((bx - bw + 20, y0 + box_h - 40), label, fill="white", font=font)
        bx -= bw + 12
    out = io.BytesIO()
    if fmt == "png":  # the environment's screenshots are PNG: the drawn one is too
        image.save(out, format="PNG")
    else:
        image.save(out, format="JPEG", quality=quality)
    return out.getvalue()
