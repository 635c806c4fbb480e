"""Run configuration: where scans and outputs live, seeds and thresholds.

Every number the papers leave open is a default here, so profiles and users
can override it without touching code. Loaded from YAML (``scan2qa.yaml`` or
``--config``); unknown keys are rejected so that a typo never silently keeps
a default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipeline.config_files import build_dataclass, read_yaml_mapping
from pipeline.errors import ConfigError


VISIBILITY_CASTS = ("adaptive", "full")


@dataclass
class VisibilityConfig:
    """``visibility``: the SPEC §3 visible rule and how the ray cast counts pixels."""

    fraction_threshold: float = 0.05  # ReVSI: > 5% of the frame in the best sampled frame
    small_object_pixels: int = 150  # pixel floor for small-vocabulary objects at 640x480
    resolution_scale: float = 1.0  # < 1 renders a reduced-resolution mask and rescales counts (estimates only)
    # "full": one ray per pixel of every frame. "adaptive": coarse grid, silhouettes at full resolution, and every
    # count a decision reads proven exact by sound bounds (pipeline/visibility/coarse_to_fine.py); it decides exactly
    # as "full" but is not cheaper on today's scans (docs/method.md, Visibility), so it is not the default.
    cast: str = "full"
    coarse_step: int = 8  # adaptive: pixels between coarse rays (a power of two)
    footprint_cell: float = 0.5  # adaptive: metres; objects are bounded by one box per grid cell of their triangles

    def __post_init__(self):
        if self.cast not in VISIBILITY_CASTS:
            raise ConfigError(f"visibility.cast must be one of {list(VISIBILITY_CASTS)}, got {self.cast!r}")
        step = int(self.coarse_step)
        if step < 2 or step & (step - 1):
            raise ConfigError(f"visibility.coarse_step must be a power of two >= 2, got {self.coarse_step}")
        if not self.footprint_cell > 0:
            raise ConfigError(f"visibility.footprint_cell must be > 0, got {self.footprint_cell}")


@dataclass
class FramesConfig:
    """``frames``: all-frame rate, output size, the frame budgets and the cap on a long scan's all-frame sequence."""

    fps: float = 10.0
    fps_3rscan: float = 4.0
    width: int = 640
    height: int = 480
    budgets: tuple[int, ...] = (64, 32, 16)
    # The most frames a scan's all-frame sequence (the "all" budget: every one ray cast and in the all-frame video)
    # may hold. A longer scan is resampled at fps / k, k the smallest whole stride that fits (every k-th frame of a
    # steady stream), its rate recorded in scans.fps and declared by its video; null keeps every frame however
    # long. ReVSI and VSI-Bench keep every frame at 10 fps (their scans last 1-5 minutes); 6,000 frames is 10
    # minutes at 10 fps (25 at 4 fps), so no scan of theirs is thinned, but 50,000 frames are not 50,000 casts.
    max_all_frames: int | None = 6000

    def __post_init__(self):
        cap = self.max_all_frames
        if cap is None:
            return
        largest = max((int(b) for b in self.budgets), default=1)
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < largest:
            raise ConfigError(
                f"frames.max_all_frames must be null or a whole number of frames >= the largest budget ({largest}), "
                f"got {cap!r}"
            )


@dataclass
class GateConfig:
    """``gate``: the release's answer-distribution bounds."""

    frequency_ceiling: float = 0.7  # a type whose constant-answer baseline scores above this blocks the release
    letter_tolerance: float = 0.05  # largest allowed gap between a correct letter's share and uniform
    min_questions_for_distribution: int = 40  # both bounds are judged only on types with this many questions


@dataclass
class DiscoveryConfig:
    """``discovery``: the work one ``scan_discovery`` tick may do."""

    # Work one scan_discovery tick may do (pipeline.scene.discovery): scans fingerprinted, and a soft time limit
    # after which no new fingerprint starts; both keep a tick well inside Dagster's 60 s evaluation limit.
    max_scans_per_tick: int = 500
    max_seconds_per_tick: float = 20.0


@dataclass
class Config:
    scans_root: str = "data/scans"
    output_root: str = "data/out"
    label_map: str | None = None  # scannetv2-labels.combined.tsv; default: found at the scans root
    seed: int = 0
    storage_options: dict[str, Any] = field(default_factory=dict)
    frames: FramesConfig = field(default_factory=FramesConfig)
    visibility: VisibilityConfig = field(default_factory=VisibilityConfig)
    profiles: tuple[str, ...] = ("revsi", "vsibench", "pinpointqa")
    # Frame samplers whose benchmarks the sampled_benchmarks asset publishes beside each release (pipeline.sampling).
    samplers: tuple[str, ...] = ()
    gate: GateConfig = field(default_factory=GateConfig)
    reviews_path: str | None = None  # verdicts CSV; default <output_root>/reviews/verdicts.csv
    pinpointqa: dict[str, Any] = field(default_factory=dict)  # overrides of pipeline.pinpoint.config defaults
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    # Symbolic links that leave the scans root (a scan folder or a file linked elsewhere) are refused unless this
    # is set: a build reads only what the configured root holds (pipeline.scene.readers.file_checks).
    allow_links_outside_root: bool = False

    @property
    def tables_root(self) -> str:
        return f"{self.output_root.rstrip('/')}/tables"

    @property
    def releases_root(self) -> str:
        return f"{self.output_root.rstrip('/')}/releases"

    @property
    def verdicts_path(self) -> str:
        return self.reviews_path or f"{self.output_root.rstrip('/')}/reviews/verdicts.csv"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_config(path: str | Path | None = None, **overrides: Any) -> Config:
    """Read a YAML config (if given or ``./scan2qa.yaml`` exists) and apply overrides."""
    candidate = Path(path) if path else Path("scan2qa.yaml")
    values: dict[str, Any] = read_yaml_mapping(candidate) if path or candidate.exists() else {}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return build_dataclass(Config, values, str(candidate) if candidate.exists() else "config")
