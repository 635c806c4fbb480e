"""The run configuration as Dagster config: the ``run_config`` resource every asset step reads once.

Profiles, thresholds, budgets and seeds (every field of ``pipeline.config.Config``
except the three storage locations, which are the ``storage`` resource's) are the
fields of ``RunConfigResource``, nested as in the YAML file. The code location
fills them from the deployment's config file (``SCAN2QA_CONFIG`` or
``./scan2qa.yaml``, ``from_env``), so the launchpad shows the deployment's values
under ``resources.run_config.config`` and lets a user edit them for one run;
``scan2qa build`` fills them from its ``--config`` (``from_config``), so a build
and the UI read the same values.

Staleness follows the deployment's file, not a launchpad edit: each asset's code
version covers the fields its module reads (``assets.catalog.CONFIG_READ``,
digested from ``from_env``), so editing a threshold in the file and reloading the
code location marks exactly the assets that read it, and their downstream, stale.
Each materialization records the digest and the values its step used
(``recorded_metadata``), so a launchpad override is visible on the asset too.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Optional

import dagster as dg

from pipeline.config import Config, load_config
from pipeline.config_files import build_dataclass

# The storage resource's fields: where scans and outputs live, not how they are built.
LOCATION_FIELDS = ("scans_root", "output_root", "storage_options")


class FramesSettings(dg.Config):
    """``frames``: all-frame rate, output size, the frame budgets (``pipeline.frames.budgets.frame_budgets``) and
    the cap on a long scan's all-frame sequence (``max_all_frames``)."""

    fps: float = 10.0
    fps_3rscan: float = 4.0
    width: int = 640
    height: int = 480
    budgets: list[int] = [64, 32, 16]
    max_all_frames: Optional[int] = 6000


class VisibilitySettings(dg.Config):
    """``visibility``: the SPEC §3 visible rule and how the ray cast counts pixels."""

    fraction_threshold: float = 0.05
    small_object_pixels: int = 150
    resolution_scale: float = 1.0
    cast: str = "full"
    coarse_step: int = 8
    footprint_cell: float = 0.5


class GateSettings(dg.Config):
    """``gate``: the release's answer-distribution bounds."""

    frequency_ceiling: float = 0.7
    letter_tolerance: float = 0.05
    min_questions_for_distribution: int = 40


class DiscoverySettings(dg.Config):
    """``discovery``: the work one ``scan_discovery`` tick may do."""

    max_scans_per_tick: int = 500
    max_seconds_per_tick: float = 20.0


class RunConfigResource(dg.ConfigurableResource):
    """The run configuration of ``pipeline.config.Config`` without its locations; ``config(storage)`` joins them."""

    label_map: Optional[str] = None
    seed: int = 0
    frames: FramesSettings = FramesSettings()
    visibility: VisibilitySettings = VisibilitySettings()
    profiles: list[str] = ["revsi", "vsibench", "pinpointqa"]
    samplers: list[str] = []
    gate: GateSettings = GateSettings()
    reviews_path: Optional[str] = None
    pinpointqa: dict[str, Any] = {}
    discovery: DiscoverySettings = DiscoverySettings()
    allow_links_outside_root: bool = False

    @classmethod
    def from_config(cls, config: Config) -> RunConfigResource:
        values = {k: v for k, v in config.to_dict().items() if k not in LOCATION_FIELDS}
        values["profiles"] = list(config.profiles)
        values["samplers"] = list(config.samplers)
        values["frames"] = FramesSettings(**{**values["frames"], "budgets": list(config.frames.budgets)})
        values["visibility"] = VisibilitySettings(**values["visibility"])
        values["gate"] = GateSettings(**values["gate"])
        values["discovery"] = DiscoverySettings(**values["discovery"])
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | None = None) -> RunConfigResource:
        """The values of a config file (``./scan2qa.yaml`` when ``path`` is empty and it exists; else defaults)."""
        return cls.from_config(load_config(path or None))

    @classmethod
    def from_env(cls) -> RunConfigResource:
        """The deployment's values: the file ``SCAN2QA_CONFIG`` names (``scan2qa build --config`` sets it)."""
        return cls.from_file(os.environ.get("SCAN2QA_CONFIG", ""))

    def values(self) -> dict[str, Any]:
        """The fields as the YAML file spells them (nested mappings, lists)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            out[name] = value.model_dump() if isinstance(value, dg.Config) else value
        return out

    def config(self, storage=None) -> Config:
        """The step's ``pipeline.config.Config``: these values at ``storage``'s locations (the defaults' when
        None), validated as a file is, so a launchpad typo fails the step with the same one line."""
        values = {**self.values(), **(storage.locations() if storage is not None else {})}
        return build_dataclass(Config, values, "resources.run_config")


def config_digest(config: Config, fields: tuple[str, ...] | None = None) -> str:
    """sha256 of the run-config ``fields`` (all but the locations when None) as the step read them."""
    values = config.to_dict()
    names = fields if fields is not None else tuple(k for k in values if k not in LOCATION_FIELDS)
    return hashlib.sha256(json.dumps({f: values.get(f) for f in names}, sort_keys=True, default=str).encode()).hexdigest()


def recorded_metadata(config: Config, fields: tuple[str, ...]) -> dict[str, Any]:
    """What a materialization records of the config its step read: the digest and the values of ``fields``."""
    values = config.to_dict()
    return {
        "run_config_digest": dg.MetadataValue.text(config_digest(config, fields)[:12]),
        "run_config": dg.MetadataValue.json({f: values.get(f) for f in fields}),
    }
