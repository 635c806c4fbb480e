"""In-memory model of one parsed scan, the common output of every dataset reader.

Readers differ in layout, axes and units; once a scan is a ``ParsedScan`` it is
in the world frame of SPEC §1 (metres, z up, OpenCV camera-to-world poses) and
every later step treats all datasets alike. ``pipeline.scene.tables`` turns a
``ParsedScan`` into the Arrow tables of ``pipeline.schemas``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pipeline.geometry.shapes import OrientedBox, Room  # the scan's plain geometry types live below scenes


@dataclass
class Mesh:
    vertices: np.ndarray  # (V, 3) float64, world frame
    triangles: np.ndarray  # (T, 3) int32
    colors: np.ndarray | None = None  # (V, 3) uint8
    triangle_object_ids: np.ndarray | None = None  # (T,) int32, -1 where no object


@dataclass
class SceneObject:
    object_id: int
    raw_label: str
    vertex_indices: np.ndarray | None = None  # indices into Mesh.vertices; None for box-only annotations
    box: OrientedBox | None = None  # annotated box; None means "compute from vertices"
    # Label-map entry where the dataset has one (ScanNet-style maps); open-vocabulary datasets leave these empty
    # and the category is the raw label.
    category: str = ""
    nyu40_id: int | None = None
    scannet200_id: int | None = None
    label_mapped: bool = False


@dataclass
class Frame:
    frame_index: int  # index in the source stream
    timestamp: float  # seconds from the first frame
    pose: np.ndarray  # (4, 4) camera-to-world, OpenCV camera axes
    intrinsics: np.ndarray  # (3, 3) for (width, height)
    width: int
    height: int
    # Where the colour image is, so later steps load it from the frames table without parsing the scan again:
    # a file relative to the scan folder, and the frame's index inside it when it is a container (.sens, a video).
    image_file: str = ""
    image_member: int = -1

    @property
    def valid(self) -> bool:
        return bool(np.all(np.isfinite(self.pose)))


def dropped_pose_warnings(frames: list[Frame]) -> list[str]:
    """The scan warning every reader gives for frames whose pose has a NaN or inf (SPEC §1: dropped, counted)."""
    dropped = sum(1 for f in frames if not f.valid)
    return [f"{dropped} of {len(frames)} frames have a NaN/inf pose and are dropped"] if dropped else []


# Loads the colour image of a source frame as an (H, W, 3) uint8 BGR array.
ImageLoader = Callable[[int], np.ndarray]


@dataclass
class ParsedScan:
    dataset: str
    scene_id: str
    source_uri: str
    mesh: Mesh | None
    objects: list[SceneObject]
    rooms: list[Room] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    source_fps: float = 0.0
    scene_type: str = ""
    checksum: str = ""
    warnings: list[str] = field(default_factory=list)
    load_image: ImageLoader | None = None
    # Frames whose images are stored rotated (ARKit/MultiScan sky direction): degrees clockwise to sky-up.
    image_rotation: int = 0

    @property
    def key(self) -> str:
        return f"{self.dataset}/{self.scene_id}"

    @property
    def has_frames(self) -> bool:
        return bool(self.frames) and self.load_image is not None
