"""The tables a sampled benchmark is computed from, read from a release folder (or an output root)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline import schemas, storage
from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.sampling.answers import find_visibility

NEEDED = ("scans", "objects", "rooms", "frame_samples", "qa")


def release_config(release: Path) -> Config:
    """The configuration the release was built with (its manifest), so thresholds and seed are the build's."""
    manifest = Path(release) / "manifest.json"
    if not manifest.exists():
        return Config()
    from pipeline.config import build_dataclass

    values = json.loads(manifest.read_text()).get("config") or {}
    values = {k: v for k, v in values.items() if k in Config.__dataclass_fields__}
    try:
        return build_dataclass(Config, values, str(manifest))
    except Exception:  # an older manifest's shape: the defaults hold the same thresholds
        return Config(seed=int(values.get("seed", 0) or 0))


def _dataset_table(release: Path, name: str) -> pl.DataFrame | None:
    flat = release / "tables" / f"{name}.parquet"
    if flat.exists():
        return storage.read_table(storage.upath(flat), name)
    folder = release / "tables" / name
    paths = sorted(p for p in folder.glob("*/*.parquet") if not p.name.startswith(".")) if folder.is_dir() else []
    if paths:
        return pl.concat([storage.read_table(storage.upath(p), name) for p in paths])
    return None


def load_release_tables(release: str | Path) -> dict[str, pl.DataFrame]:
    release = Path(release)
    tables: dict[str, pl.DataFrame] = {}
    for name in NEEDED:
        table = _dataset_table(release, name)
        if table is None:
            raise ScanError("release", str(release / "tables" / f"{name}.parquet"), f"no {name} table in the release")
        tables[name] = table
    keys = sorted(set(tables["qa"]["key"].to_list()))
    visibility = find_visibility(release, keys)
    if visibility is None:
        raise ScanError(
            "release", str(release / "tables" / "visibility"),
            "no per-frame visibility: a release made before releases shipped tables/visibility/ needs the output "
            "root it was built in (or a release inside it)",
        )
    tables["visibility"] = visibility
    for root in (release.resolve(), release.resolve().parent.parent):
        overrides = root / "tables" / "visibility_overrides.parquet"
        if overrides.exists():
            tables["visibility_overrides"] = storage.read_table(storage.upath(overrides), "visibility_overrides")
            break
    else:
        tables["visibility_overrides"] = schemas.empty("visibility_overrides")
    return tables
