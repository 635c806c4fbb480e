"""One vocabulary for every dataset: raw labels through the ScanNet label map when one is at hand.

ScanNet objects always go through ``scannetv2-labels.combined.tsv``. The other
datasets have their own vocabularies (ScanNet++'s and MultiScan's free text,
3RScan's, ARKitScenes' 17 classes); passing their raw labels through the same
map when it is present (``config.label_map`` or at the scans root) gives every
dataset the same categories, so a question says "lamp" for a table lamp
whichever dataset the scan came from. A label the map does not know keeps its
raw name and ``label_mapped`` is false.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.scene.readers.labels import LabelMap
from pipeline.scene.readers.scannet import label_map_candidates, load_label_map
from pipeline.scene.parsed import OrientedBox, SceneObject


def optional_label_map(
    folder: Path, config: Config, key: str, warnings: list[str]
) -> tuple[LabelMap | None, Path | None]:
    """The label map of ``config.label_map`` (which must exist) or the one at the scans root, if any.

    Read by ``scannet.load_label_map`` (guarded like the scan's files); its unparsable rows go into ``warnings``.
    """
    candidates = [Path(config.label_map)] if config.label_map else label_map_candidates(folder)
    for path in candidates:
        if path.exists():
            return load_label_map(path, folder, config, key, warnings), path
    if config.label_map:
        raise ScanError(key, str(config.label_map), "label map (config.label_map) not found")
    return None, None


def apply_label_map(objects: Iterable[SceneObject], label_map: LabelMap | None) -> None:
    """Set each object's category and class ids from its raw label (raw label kept when unmapped)."""
    for obj in objects:
        info = label_map.lookup(obj.raw_label) if label_map is not None else None
        obj.category = info.category if info else obj.raw_label
        obj.nyu40_id = info.nyu40_id if info else None
        obj.scannet200_id = info.scannet200_id if info else None
        obj.label_mapped = info is not None


def labelled_object(
    object_id: int, raw: str, vertex_indices: np.ndarray | None, box: OrientedBox | None, label_map: LabelMap | None
) -> SceneObject:
    obj = SceneObject(object_id=int(object_id), raw_label=raw, vertex_indices=vertex_indices, box=box)
    apply_label_map([obj], label_map)
    return obj
