"""A stand-in scan format for testing the Dagster layer apart from the dataset readers.

A fake scan is a folder holding ``scan.json`` (``{"objects": n}`` or
``{"problem": "..."}``); the fake reader turns it into a ``ParsedScan`` and the
fake ``scene_tables`` into the four conformed scene tables. Installing the fakes
replaces ``pipeline.readers.read_scan``/``detect_dataset`` and the
``pipeline.scene_tables`` module for one test, so graph, IO-manager, sensor and
build behaviour is tested even where a real reader would be slow or absent.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np

from pipeline import schemas
from pipeline.errors import ScanError
from pipeline.scene import ParsedScan, SceneObject
from pipeline.storage import upath

FAKE_DATASET = "synthetic"


def write_fake_scan(root: Path, scene_id: str, objects: int = 2, problem: str | None = None) -> Path:
    folder = root / scene_id
    folder.mkdir(parents=True, exist_ok=True)
    content = {"problem": problem} if problem else {"objects": objects}
    (folder / "scan.json").write_text(json.dumps(content))
    return folder


def fake_detect_dataset(path) -> str | None:
    return FAKE_DATASET if (upath(path) / "scan.json").exists() else None


def fake_read_scan(path_or_uri, config) -> ParsedScan:
    folder = upath(path_or_uri, config.storage_options)
    key = f"{FAKE_DATASET}/{folder.name}"
    content = json.loads((folder / "scan.json").read_text())
    if "problem" in content:
        raise ScanError(key, "scan.json", content["problem"])
    objects = [SceneObject(object_id=i, raw_label="chair") for i in range(content["objects"])]
    return ParsedScan(dataset=FAKE_DATASET, scene_id=folder.name, source_uri=str(path_or_uri), mesh=None, objects=objects)


def fake_scene_tables(parsed: ParsedScan, config) -> dict:
    scans = schemas.from_rows(
        "scans",
        [{"key": parsed.key, "dataset": parsed.dataset, "scene_id": parsed.scene_id, "source_uri": parsed.source_uri,
          "has_frames": False, "has_mesh": False, "warnings": []}],
    )
    objects = schemas.from_rows(
        "objects",
        [{"key": parsed.key, "object_id": o.object_id, "raw_label": o.raw_label, "category": o.raw_label,
          "center": list(np.zeros(3)), "extent": [1.0, 1.0, 1.0], "rotation": list(np.eye(3).ravel())}
         for o in parsed.objects],
    )
    return {"scans": scans, "objects": objects, "rooms": schemas.empty("rooms"), "frames": schemas.empty("frames")}


def install_fake_reader(monkeypatch) -> None:
    import pipeline.readers as readers

    monkeypatch.setattr(readers, "read_scan", fake_read_scan, raising=False)
    monkeypatch.setattr(readers, "detect_dataset", fake_detect_dataset, raising=False)
    module = types.ModuleType("pipeline.scene_tables")
    module.scene_tables = fake_scene_tables
    monkeypatch.setitem(sys.modules, "pipeline.scene_tables", module)


def use_scene_assets_only(monkeypatch) -> None:
    """Build only the scene assets: fake scans have no mesh or frames for the later modules to work on."""
    import dagster as dg

    import assets.definitions
    import assets.scene

    monkeypatch.setattr(assets.definitions, "all_assets", dg.load_assets_from_modules([assets.scene]))
    monkeypatch.setattr(assets.definitions, "all_asset_checks", [])
