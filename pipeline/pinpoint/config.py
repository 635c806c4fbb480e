"""Every threshold of the PinpointQA rules, in one place.

The paper publishes only a few numbers (1.0 m neighbourhood, 2 cm contact,
5 cm same level); everything else here is our choice, documented in
``docs/pinpointqa_method.md``. A profile can override any value with a mapping
(``PinpointConfig.from_mapping``) or a YAML file (``load_pinpoint_config``);
unknown keys are rejected so that a typo never silently keeps a default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from pipeline.config_files import build_dataclass, read_yaml_mapping

# Labels that can carry a small object (semantic suitability of a support).
DEFAULT_SURFACE_LABELS: tuple[str, ...] = (
    "table", "desk", "shelf", "shelves", "bookshelf", "bookcase", "counter", "kitchen counter", "countertop",
    "bed", "nightstand", "night stand", "bedside table", "cabinet", "kitchen cabinet", "kitchen cabinets",
    "file cabinet", "dresser", "drawer", "sofa", "couch", "armchair", "chair", "office chair", "stool", "bench",
    "ottoman", "floor", "closet floor", "coffee table", "end table", "side table", "dining table", "tv stand",
    "stand", "cart", "windowsill", "window sill", "sink", "bathroom counter", "bathroom vanity", "vanity",
    "washing machine", "dryer", "refrigerator", "microwave", "piano", "radiator", "wardrobe", "closet",
    "storage shelf", "wall cabinet", "box", "crate", "suitcase", "mattress", "rack", "shoe rack", "footrest",
    "mat", "rug", "carpet", "tray", "workbench", "printer", "monitor stand", "laptop stand", "book",
)

# Structural labels that may still act as a support.
DEFAULT_FLOOR_LABELS: tuple[str, ...] = ("floor", "closet floor")

# References a target touching sideways hangs on or is stuck to (vertical or wall-mounted things).
DEFAULT_VERTICAL_LABELS: tuple[str, ...] = (
    "wall", "door", "window", "whiteboard", "blackboard", "board", "bulletin board", "mirror", "picture",
    "poster", "painting", "tv", "monitor", "computer monitor", "screen", "curtain", "radiator", "coat rack",
    "hook", "towel rack", "rail", "pipe", "cabinet door", "power outlet", "socket", "light switch", "frame",
    "headboard", "ladder",
)

# Small objects that are usually mounted, stuck or plugged rather than placed.
DEFAULT_ATTACHABLE_LABELS: tuple[str, ...] = (
    "fire extinguisher", "clock", "post it note", "sticky note", "power plug", "power strip", "power extension",
    "extension cord", "power cord", "cable", "charger", "phone charger", "laptop charger", "power adapter",
    "adapter", "dongle", "lanyard", "soap dispenser", "paper towel roll", "toilet paper",
)


@dataclass
class RepresentationConfig:
    neighborhood_radius: float = 1.0  # paper: centroids within 1.0 m
    mesh_distance: str = "vertices"  # paper: closest vertex pair; "surface" adds vertex-to-triangle refinement
    contact_distance: float = 0.02  # paper: shortest mesh distance <= 2 cm is contact
    same_level_dz: float = 0.05  # paper: |centroid dz| <= 5 cm is the same level
    footprint_samples: int = 3  # grid side of xy sample points over the target's footprint (n x n + centre)
    footprint_shrink: float = 0.8  # sample within this fraction of the target's footprint (stay off its rim)
    support_search_margin: float = 0.10  # scanned surfaces have holes under objects: also look this far around


@dataclass
class SupportConfig:
    rest_gap: float = 0.03  # |target bottom - surface top| within this is "resting on" the surface
    max_support_gap: float = 0.10  # |target bottom - surface top| beyond this cannot be a support
    surface_labels: tuple[str, ...] = DEFAULT_SURFACE_LABELS
    floor_labels: tuple[str, ...] = DEFAULT_FLOOR_LABELS


@dataclass
class RelationConfig:
    side_ratio: float = 1.0  # horizontal > side_ratio * |dz| (without overlap) makes above/below side_*
    level_ratio: float = 4.0  # horizontal > level_ratio * |dz| counts as level (next_to/near)
    next_to_distance: float = 0.30  # level, not in contact, shortest <= this: next_to; else near
    vertical_labels: tuple[str, ...] = DEFAULT_VERTICAL_LABELS
    attachable_labels: tuple[str, ...] = DEFAULT_ATTACHABLE_LABELS


@dataclass
class QuestionConfig:
    nri_tie_margin: float = 0.05  # drop NRI when the second-nearest label is within this of the nearest
    nri_options: int = 4
    max_references: int = 2  # FSD / SSP: up to two references besides the surface
    excluded_reference_labels: tuple[str, ...] = ("floor", "wall", "ceiling", "closet floor", "closet wall")
    require_visible_references: bool = True  # references and options must be visible in the budget's frames
    # share of a scene's presence candidates reserved for presence (no localisation question of their own):
    # a positive must not be named elsewhere in its scene (pipeline/pinpoint/presence.py); 1/3 keeps TPV near the
    # paper's share (2,672 of 10,094) at the cost of a third of the targets' NRI/FSD/SSP questions
    tpv_target_share: float = 1.0 / 3.0
    # The budgets asked at are the run's frame budgets (``pipeline.frames.budgets.frame_budgets``), not set here.


@dataclass
class SplitConfig:
    fractions: tuple[float, float, float] = (0.6, 0.2, 0.2)  # train, val, test
    salt: str = "pinpointqa-split-v1"
    balance_slack: float = 10.0  # questions a split's per-task count may drift from its share before rebalancing
    balance_slack_fraction: float = 0.01  # ... or this fraction of the task's running total, if larger


@dataclass
class PinpointConfig:
    representation: RepresentationConfig = field(default_factory=RepresentationConfig)
    support: SupportConfig = field(default_factory=SupportConfig)
    relations: RelationConfig = field(default_factory=RelationConfig)
    questions: QuestionConfig = field(default_factory=QuestionConfig)
    splits: SplitConfig = field(default_factory=SplitConfig)

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> PinpointConfig:
        return build_dataclass(cls, dict(values or {}), "pinpointqa")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_pinpoint_config(path: str | Path | None = None) -> PinpointConfig:
    """Defaults, overridden by a YAML file holding a ``pinpointqa:`` mapping (or the mapping itself)."""
    if path is None:
        return PinpointConfig()
    values = read_yaml_mapping(path)
    return PinpointConfig.from_mapping(values.get("pinpointqa", values))
