"""Coordinates: OpenWebRL's 0-1000 grid and the viewport's CSS pixels."""

from __future__ import annotations

from typing import Sequence

GRID = 1000.0


def grid_to_pixels(point_2d: Sequence[float], width: int, height: int) -> tuple[float, float]:
    """``[x, y]`` on the 0-1000 grid to viewport pixels, kept inside the viewport."""
    x = float(point_2d[0]) / GRID * width
    y = float(point_2d[1]) / GRID * height
    return min(max(x, 0.0), width - 1.0), min(max(y, 0.0), height - 1.0)


def pixels_to_grid(x: float, y: float, width: int, height: int) -> list[float]:
    """Viewport pixels to ``[x, y]`` on the 0-1000 grid (rounded to one decimal)."""
    return [round(x / width * GRID, 1), round(y / height * GRID, 1)]


def box_center(box: dict[str, float]) -> tuple[float, float]:
    """The middle of a Playwright bounding box (``x, y, width, height``)."""
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
