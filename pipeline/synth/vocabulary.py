"""What synthetic homes and offices are furnished with: categories, size ranges, colours, small objects.

Sizes are (width along the object's x, depth along its y, height) ranges in
metres, drawn per instance (log-uniformly: a range from a small to a large model
of the category), so repeated categories differ as real furniture does and size
answers do not crowd around a few values a constant guess could score on (issue 25). Small-object labels are copied from the PinpointQA
small-object vocabulary (appendix A.2) so that generated scenes exercise that
benchmark; each names the support kinds it may rest on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Range = tuple[float, float]
SMALL_SCALE = (0.75, 1.4)  # a small object's whole size varies by this factor on top of its ranges (a bigger model)

STRUCTURAL_LABELS = ("wall", "floor", "ceiling")


@dataclass(frozen=True)
class FurnitureKind:
    width: Range
    depth: Range
    height: Range
    color: tuple[int, int, int]
    support_kind: str | None = None  # what small objects see this as ("desk", "table", "shelf", ...)


FURNITURE: dict[str, FurnitureKind] = {
    "bed": FurnitureKind((0.9, 1.95), (1.9, 2.2), (0.8, 1.3), (150, 120, 95), "bed"),
    "nightstand": FurnitureKind((0.35, 0.7), (0.32, 0.5), (0.4, 0.75), (120, 85, 60), "nightstand"),
    "sofa": FurnitureKind((1.4, 3.0), (0.8, 1.05), (0.72, 0.98), (85, 95, 120), "sofa"),
    "armchair": FurnitureKind((0.65, 1.05), (0.7, 0.95), (0.7, 1.1), (130, 70, 60), "sofa"),
    "chair": FurnitureKind((0.4, 0.56), (0.42, 0.56), (0.75, 1.1), (140, 100, 65), "chair"),
    "office chair": FurnitureKind((0.55, 0.72), (0.55, 0.72), (0.88, 1.3), (45, 45, 50), "chair"),
    "stool": FurnitureKind((0.3, 0.45), (0.3, 0.45), (0.42, 0.82), (160, 130, 90), "chair"),
    "table": FurnitureKind((0.8, 2.0), (0.6, 1.0), (0.7, 0.78), (170, 130, 90), "table"),
    "dining table": FurnitureKind((1.2, 2.4), (0.8, 1.1), (0.72, 0.78), (150, 105, 70), "table"),
    "coffee table": FurnitureKind((0.6, 1.5), (0.45, 0.8), (0.35, 0.5), (110, 80, 55), "table"),
    "end table": FurnitureKind((0.35, 0.65), (0.35, 0.65), (0.4, 0.66), (125, 90, 60), "table"),
    "desk": FurnitureKind((0.9, 2.0), (0.55, 0.85), (0.72, 0.77), (200, 190, 170), "desk"),
    "tv": FurnitureKind((0.6, 1.9), (0.18, 0.25), (0.45, 1.15), (25, 25, 30)),
    "tv stand": FurnitureKind((0.9, 2.2), (0.35, 0.5), (0.4, 0.6), (70, 60, 55), "cabinet"),
    "monitor": FurnitureKind((0.4, 0.85), (0.18, 0.24), (0.32, 0.6), (30, 30, 35)),
    "bookshelf": FurnitureKind((0.6, 1.4), (0.28, 0.4), (1.1, 2.3), (160, 125, 85), "shelf"),
    "shelf": FurnitureKind((0.45, 1.5), (0.25, 0.4), (0.55, 1.3), (185, 165, 135), "shelf"),
    "cabinet": FurnitureKind((0.4, 1.6), (0.4, 0.62), (0.5, 1.2), (175, 160, 140), "cabinet"),
    "kitchen cabinet": FurnitureKind((0.4, 1.2), (0.58, 0.62), (0.86, 0.92), (210, 205, 195), "counter"),
    "counter": FurnitureKind((1.0, 3.2), (0.6, 0.7), (0.88, 0.94), (190, 185, 175), "counter"),
    "wardrobe": FurnitureKind((0.8, 2.4), (0.5, 0.65), (1.6, 2.4), (140, 110, 80)),
    "dresser": FurnitureKind((0.7, 1.8), (0.4, 0.58), (0.7, 1.2), (130, 95, 65), "cabinet"),
    "refrigerator": FurnitureKind((0.5, 0.95), (0.55, 0.75), (0.85, 2.05), (225, 225, 228)),
    "toilet": FurnitureKind((0.38, 0.44), (0.62, 0.72), (0.75, 0.82), (240, 240, 240), "toilet"),
    "sink": FurnitureKind((0.45, 1.2), (0.42, 0.6), (0.8, 0.92), (230, 230, 235), "sink"),
    "bathtub": FurnitureKind((0.7, 0.85), (1.4, 1.9), (0.45, 0.62), (245, 245, 245)),
    "trash can": FurnitureKind((0.2, 0.45), (0.2, 0.45), (0.25, 0.85), (90, 110, 90)),
    "lamp": FurnitureKind((0.25, 0.45), (0.25, 0.45), (1.1, 1.9), (230, 220, 190)),
    "table lamp": FurnitureKind((0.15, 0.35), (0.15, 0.35), (0.25, 0.65), (235, 225, 195)),
    "plant": FurnitureKind((0.25, 0.75), (0.25, 0.75), (0.3, 1.9), (60, 130, 60)),
}

STRUCTURE_COLORS = {
    "wall": (215, 210, 200),
    "floor": (150, 125, 100),
    "ceiling": (235, 235, 232),
    "door": (160, 120, 80),
    "window": (170, 200, 225),
}


@dataclass(frozen=True)
class SmallKind:
    width: Range
    depth: Range
    height: Range
    color: tuple[int, int, int]
    supports: tuple[str, ...]  # support kinds; "floor" = on open floor, "under" = on the floor beneath a table/desk


# Labels exactly as in the PinpointQA small-object vocabulary.
SMALL_OBJECTS: dict[str, SmallKind] = {
    "phone": SmallKind((0.14, 0.16), (0.07, 0.078), (0.008, 0.01), (20, 20, 25), ("desk", "table", "nightstand", "sofa", "bed")),
    "remote": SmallKind((0.16, 0.2), (0.04, 0.05), (0.02, 0.025), (35, 35, 40), ("sofa", "table", "cabinet")),
    "mug": SmallKind((0.08, 0.1), (0.08, 0.1), (0.09, 0.11), (200, 60, 50), ("shelf", "desk", "table", "counter")),
    "charger": SmallKind((0.1, 0.13), (0.05, 0.065), (0.03, 0.035), (240, 240, 240), ("under",)),  # a laptop brick
    "key": SmallKind((0.06, 0.08), (0.025, 0.035), (0.006, 0.01), (190, 180, 120), ("table", "nightstand", "cabinet", "counter")),
    "book": SmallKind((0.15, 0.24), (0.12, 0.17), (0.02, 0.05), (60, 90, 160), ("shelf", "nightstand", "desk", "table")),
    "laptop": SmallKind((0.3, 0.36), (0.21, 0.25), (0.016, 0.024), (150, 150, 155), ("desk", "table", "bed")),
    "keyboard": SmallKind((0.42, 0.46), (0.12, 0.15), (0.025, 0.035), (50, 50, 55), ("desk",)),
    "mouse": SmallKind((0.1, 0.12), (0.055, 0.065), (0.03, 0.04), (60, 60, 65), ("desk",)),
    "cup": SmallKind((0.07, 0.09), (0.07, 0.09), (0.08, 0.11), (230, 230, 220), ("table", "counter", "shelf", "desk")),
    "bottle": SmallKind((0.06, 0.08), (0.06, 0.08), (0.2, 0.28), (90, 160, 90), ("table", "counter", "shelf", "desk")),
    "bowl": SmallKind((0.14, 0.18), (0.14, 0.18), (0.05, 0.08), (220, 215, 200), ("table", "counter")),
    "plate": SmallKind((0.22, 0.27), (0.22, 0.27), (0.015, 0.025), (240, 240, 235), ("table", "counter")),
    "tissue box": SmallKind((0.22, 0.25), (0.11, 0.13), (0.08, 0.1), (120, 180, 210), ("nightstand", "table", "cabinet")),
    "alarm clock": SmallKind((0.1, 0.14), (0.05, 0.07), (0.08, 0.11), (210, 80, 60), ("nightstand", "cabinet", "shelf")),
    "glasses": SmallKind((0.13, 0.15), (0.04, 0.05), (0.035, 0.045), (30, 30, 30), ("nightstand", "desk", "table")),
    "wallet": SmallKind((0.1, 0.12), (0.08, 0.1), (0.015, 0.025), (90, 55, 35), ("cabinet", "nightstand", "table")),
    "pen": SmallKind((0.13, 0.15), (0.01, 0.012), (0.01, 0.012), (30, 60, 170), ("desk",)),
    "notebook": SmallKind((0.2, 0.3), (0.15, 0.21), (0.01, 0.02), (210, 170, 60), ("desk", "table")),
    "stapler": SmallKind((0.14, 0.18), (0.04, 0.05), (0.05, 0.07), (150, 30, 30), ("desk", "shelf")),
    "calculator": SmallKind((0.14, 0.18), (0.08, 0.1), (0.015, 0.025), (70, 70, 75), ("desk",)),
    "scissors": SmallKind((0.16, 0.2), (0.06, 0.08), (0.01, 0.015), (220, 120, 40), ("desk", "counter")),
    "headphones": SmallKind((0.17, 0.2), (0.08, 0.1), (0.17, 0.2), (40, 40, 45), ("desk", "sofa", "bed")),
    "game controller": SmallKind((0.15, 0.17), (0.1, 0.11), (0.05, 0.06), (30, 30, 35), ("sofa", "table", "cabinet")),
    "power bank": SmallKind((0.13, 0.15), (0.06, 0.07), (0.015, 0.025), (80, 80, 90), ("desk", "nightstand")),
    "water bottle": SmallKind((0.07, 0.08), (0.07, 0.08), (0.22, 0.28), (60, 130, 200), ("desk", "table", "nightstand")),
    "candle": SmallKind((0.07, 0.1), (0.07, 0.1), (0.08, 0.15), (240, 230, 200), ("shelf", "table", "cabinet")),
    "shoe": SmallKind((0.26, 0.3), (0.09, 0.11), (0.1, 0.13), (70, 50, 40), ("floor",)),
    "backpack": SmallKind((0.3, 0.34), (0.18, 0.22), (0.42, 0.48), (40, 70, 110), ("floor",)),
    "ball": SmallKind((0.2, 0.23), (0.2, 0.23), (0.2, 0.23), (220, 120, 30), ("under", "floor")),
    "power strip": SmallKind((0.3, 0.36), (0.05, 0.06), (0.035, 0.045), (235, 235, 235), ("under",)),
    "toilet paper": SmallKind((0.1, 0.12), (0.1, 0.12), (0.1, 0.11), (250, 250, 250), ("toilet",)),
    "soap": SmallKind((0.08, 0.1), (0.05, 0.06), (0.025, 0.035), (240, 200, 210), ("sink",)),
    "toothbrush": SmallKind((0.18, 0.2), (0.015, 0.02), (0.015, 0.02), (80, 170, 220), ("sink",)),
}

# Placed first, on the support kinds the task names, so every scene that has such a support shows them.
SIGNATURE_PLACEMENTS: tuple[tuple[str, str], ...] = (
    ("phone", "desk"),
    ("remote", "sofa"),
    ("mug", "shelf"),
    ("charger", "under"),
)

# ScanNet's sceneType strings.
SCENE_TYPES = {
    "bedroom": "Bedroom / Hotel",
    "living": "Living room / Lounge",
    "office": "Office",
    "kitchen": "Kitchen",
    "bathroom": "Bathroom",
    "apartment": "Apartment",
}


def draw_size(rng: np.random.Generator, ranges: tuple[Range, Range, Range], scale: Range = (1.0, 1.0)) -> tuple[float, float, float]:
    """(width, depth, height) of one instance: each side log-uniform in its range, all three times one log-uniform
    ``scale`` (log-uniform, so a small model is as likely as a large one in relative terms, as the MRA metric reads
    sizes)."""
    def log_uniform(lo: float, hi: float) -> float:
        return math.exp(float(rng.uniform(math.log(lo), math.log(hi))))

    sides = [log_uniform(*r) for r in ranges]
    k = log_uniform(*scale) if scale[0] != scale[1] else 1.0
    return (sides[0] * k, sides[1] * k, sides[2] * k)


def all_labels() -> list[str]:
    """Every label the generator can emit, sorted (the label map must contain each)."""
    return sorted(set(STRUCTURAL_LABELS) | {"door", "window"} | set(FURNITURE) | set(SMALL_OBJECTS))
