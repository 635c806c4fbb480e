"""Tiny real scans for the Dagster-layer tests, and the real ways their files break.

The Dagster layer (discovery, sensor, IO manager, ``scan2qa build``) is tested on
genuine ScanNet-layout folders read by the real readers, never on stand-ins for
our own code. A ``synthNNNN_00`` folder is a synthetic scan in ScanNet's layout,
so its partition key is ``synthetic/synthNNNN_00``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.scannet_factory import make_box_room

# A wall slab along y=0, so a scan can hold a fourth object (the box room has floor, table, book).
WALL = ((0.0, 0.0, 0.0), (4.0, 0.1, 2.5))


def write_scan(root: Path, scene_id: str, objects: int = 3, frames: int = 0) -> Path:
    """A box room with 3 or 4 objects and optionally a short camera stream; returns the scan folder."""
    extra = {"wall": WALL} if objects == 4 else None
    if objects not in (3, 4):
        raise ValueError("the box room holds 3 objects, or 4 with a wall")
    return make_box_room(root, scene_id, extra_labels=extra, frames="stream" if frames else None, n_frames=frames or 9)


def break_missing_aggregation(folder: Path) -> None:
    for f in folder.glob("*aggregation.json"):
        f.unlink()


def break_truncated_ply(folder: Path) -> None:
    ply = next(folder.glob("*_vh_clean_2.ply"))
    data = ply.read_bytes()
    ply.write_bytes(data[: len(data) // 2])


def break_unknown_segments(folder: Path) -> None:
    for f in folder.glob("*aggregation.json"):
        agg = json.loads(f.read_text())
        agg["segGroups"][0]["segments"].append(987654321)
        f.write_text(json.dumps(agg))


def break_nan_alignment(folder: Path) -> None:
    meta = folder / f"{folder.name}.txt"
    meta.write_text(meta.read_text() + "axisAlignment = " + " ".join(["nan"] + ["0"] * 15) + "\n")


# breaker -> a piece of the file name the one-line error must carry
BREAKERS = {
    break_missing_aggregation: "aggregation.json",
    break_truncated_ply: "_vh_clean_2.ply",
    break_unknown_segments: "aggregation.json",
    break_nan_alignment: ".txt",
}


def scene_graph_only(monkeypatch) -> None:
    """Build only the (real) scene assets, for tests about partitions rather than the dataset-wide steps.

    The dataset-wide assets (qa, release with its Great Expectations gate) cost
    seconds per build; tests that need them run the whole graph instead.
    """
    import dagster as dg

    import assets.definitions
    import assets.scene

    monkeypatch.setattr(assets.definitions, "all_assets", dg.load_assets_from_modules([assets.scene]))
    monkeypatch.setattr(assets.definitions, "all_asset_checks", [])
