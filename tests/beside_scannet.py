"""One synthetic scene written in ScanNet's layout and in another, both read back: the reader tests' shared fixture."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pipeline.config import Config
from pipeline.scene.readers import read_scan
from pipeline.scene.tables import scene_tables
from pipeline.synth.label_map import label_map_rows
from pipeline.synth.scannet_writer import TRUTH_SUFFIX, write_scannet
from pipeline.synth.scene import generate_scene


def read_beside_scannet(root: Path, seed: int, frames: int, layout: str, write: Callable[..., Path]) -> dict:
    """Scene, the other layout's folder, both parsed scans and their scene tables, and the truth sidecar."""
    scene = generate_scene(seed, 0, frames)
    scannet_folder = write_scannet(scene, root / "scannet")
    folder = write(scene, root / layout)
    config = Config(scans_root=str(root / "scannet"))
    reference = read_scan(str(scannet_folder), config)
    parsed = read_scan(str(folder), config)
    return {
        "scene": scene,
        "folder": folder,
        "config": config,
        "reference": reference,
        "parsed": parsed,
        # The sidecar is named by the layout's own scan id (an ARKitScenes video id is a number).
        "truth": json.loads(next(folder.glob(f"*{TRUTH_SUFFIX}")).read_text()),
        "reference_tables": scene_tables(reference, config),
        "tables": scene_tables(parsed, config),
    }


def mapped_category(raw_label: str) -> str:
    """The category the generator's label map (written beside every layout) gives a raw label."""
    categories = {row.split("\t")[1]: row.split("\t")[2] for row in label_map_rows()}
    return categories.get(raw_label, raw_label)
