"""Colours for a question's objects: the same colour for an object in every frame, its plan footprint and the legend.

A question names up to a dozen objects (a counting question may name every
chair of the room), so the palette starts with twelve colours that stay apart
on photographs and on the light plan, and goes on with colours spread by the
golden angle in hue; ``object_colours`` never gives two objects of one question
the same colour, however many it names.
"""

from __future__ import annotations

import colorsys

# Hand-picked: saturated enough to read on a dim room photo, far apart in hue and lightness.
BASE = (
    "#e6194b",  # red
    "#1f77b4",  # blue
    "#2ca02c",  # green
    "#ff7f0e",  # orange
    "#911eb4",  # purple
    "#00a3a3",  # teal
    "#f032e6",  # magenta
    "#8c564b",  # brown
    "#bcbd22",  # olive
    "#4363d8",  # indigo
    "#9a6324",  # ochre
    "#000075",  # navy
)
_GOLDEN_ANGLE = 137.508


def _extra(i: int) -> str:
    hue = ((i * _GOLDEN_ANGLE) % 360.0) / 360.0
    lightness = (0.38, 0.5, 0.3)[i % 3]
    r, g, b = colorsys.hls_to_rgb(hue, lightness, 0.85)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def colour(i: int) -> str:
    """The ``i``-th colour (hex ``#rrggbb``)."""
    return BASE[i] if i < len(BASE) else _extra(i - len(BASE))


def object_colours(object_ids: list[int]) -> dict[int, str]:
    """One distinct colour per object, in the order the question names them (repeated ids keep their first)."""
    out: dict[int, str] = {}
    taken: set[str] = set()
    i = 0
    for obj in object_ids:
        if obj in out:
            continue
        c = colour(i)
        while c in taken:  # generated colours could meet after rounding; skip to the next
            i += 1
            c = colour(i)
        out[obj] = c
        taken.add(c)
        i += 1
    return out
