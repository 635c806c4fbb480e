"""Small ScanNet-layout scenes for reader tests: a copy of the real fixture, or a hand-made box room.

The real fixture is hard-linked file by file into a temporary scans root so a test
can replace one file (a v2 aggregation, an axisAlignment line, a truncated
mesh) without copying 7 MB.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import cv2
import numpy as np

from pipeline.formats.ply import write_ply
from pipeline.formats.sens import write_sens

SCENE = "scene0000_00"
V2_MAP = "scannetv2-labels.combined.tsv"
V1_MAP = "scannet-labels.combined.tsv"


def linked_fixture(tmp_path: Path, fixtures_dir: Path, label_maps=(V2_MAP,)) -> Path:
    """A scans root under tmp_path holding the fixture scene (symlinked files) and the chosen label maps."""
    src = fixtures_dir / "scannet" / SCENE
    root = tmp_path / "scans"
    dst = root / SCENE
    dst.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        # Hard links (or copies across file systems): a symlink out of the scans root is refused by the readers.
        try:
            os.link(f, dst / f.name)
        except OSError:
            shutil.copyfile(f, dst / f.name)
    for name in label_maps:
        shutil.copyfile(fixtures_dir / "scannet" / name, root / name)
    return dst


def replace_file(folder: Path, name: str, data: bytes | str) -> Path:
    """Swap a linked file for a private copy with new content."""
    path = folder / name
    if path.is_symlink() or path.exists():
        path.unlink()
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


MINI_MAP = "\r\n".join(
    [
        "id\traw_category\tcategory\tcount\tnyu40id",
        "1\twall\twall\t1\t1",
        "3\tfloor\tfloor\t1\t2",
        "4\ttable\ttable\t1\t7",
        "22\tbook\tbook\t1\t23",
        "",
    ]
)


def box_mesh(lo, hi, start: int) -> tuple[np.ndarray, np.ndarray]:
    """Closed axis-aligned box: 8 vertices, 12 triangles (indices offset by start)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    v = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = [(a, b, c) for a, b, c, d in quads] + [(a, c, d) for a, b, c, d in quads]
    return v, np.asarray(tris, dtype=np.int32) + start


def make_box_room(
    root: Path,
    scene: str = "scene0999_00",
    *,
    alignment: np.ndarray | None = None,
    frames: str | None = None,  # None | "sens" | "stream"
    n_frames: int = 9,
    nan_frames: tuple[int, ...] = (),
    timestamps_us: list[int] | None = None,
    extra_labels: dict[str, tuple] | None = None,
    label_map: str = MINI_MAP,
) -> Path:
    """A 4x3 m floor slab with a table and a book on it, in ScanNet layout under ``root``."""
    folder = root / scene
    folder.mkdir(parents=True)
    (root / V2_MAP).write_text(label_map, newline="")
    parts = {
        "floor": ((0, 0, -0.05), (4, 3, 0.0)),
        "table": ((1, 1, 0), (2, 1.6, 0.75)),
        "book": ((1.2, 1.2, 0.75), (1.4, 1.5, 0.8)),
    }
    parts.update(extra_labels or {})
    vertices, triangles, seg_indices, groups = [], [], [], []
    for n, (label, (lo, hi)) in enumerate(parts.items()):
        v, t = box_mesh(lo, hi, 8 * n)
        vertices.append(v)
        triangles.append(t)
        seg_indices += [100 + n] * 8
        groups.append({"id": n, "objectId": n, "segments": [100 + n], "label": label})
    vertices = np.concatenate(vertices)
    # Dense floor samples so the derived room polygon has points to work with.
    gx, gy = np.meshgrid(np.linspace(0, 4, 41), np.linspace(0, 3, 31))
    floor = np.column_stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)])
    vertices = np.concatenate([vertices, floor])
    seg_indices += [100] * len(floor)
    colors = np.full((len(vertices), 3), 128, np.uint8)
    write_ply(folder / f"{scene}_vh_clean_2.ply", vertices, np.concatenate(triangles), colors=colors)
    segs_name = f"{scene}_vh_clean_2.0.010000.segs.json"
    (folder / segs_name).write_text(json.dumps({"sceneId": scene, "segIndices": seg_indices}))
    agg = {"sceneId": f"scannet.{scene}", "appId": "Aggregator.v2", "segGroups": groups, "segmentsFile": f"scannet.{segs_name}"}
    (folder / f"{scene}.aggregation.json").write_text(json.dumps(agg))
    meta = ["colorHeight = 96", "colorWidth = 128", "sceneType = Office"]
    if alignment is not None:
        meta.append("axisAlignment = " + " ".join(f"{x:.6f}" for x in np.asarray(alignment).ravel()))
    (folder / f"{scene}.txt").write_text("\n".join(meta) + "\n")
    if frames:
        write_frames(folder, frames, n_frames, nan_frames, timestamps_us)
    return folder


def frame_poses(n: int, nan_frames=()) -> list[np.ndarray]:
    poses = []
    for i in range(n):
        pose = np.eye(4)
        pose[:3, 3] = [0.5 + 0.1 * i, 0.5, 1.5]
        if i in nan_frames:
            pose[:] = -np.inf
        poses.append(pose)
    return poses


def frame_images(n: int) -> list[np.ndarray]:
    return [np.full((96, 128, 3), (10 * i, 100, 200 - 10 * i), np.uint8) for i in range(n)]


INTRINSIC_COLOR = np.array([[100.0, 0, 64, 0], [0, 100.0, 48, 0], [0, 0, 1, 0], [0, 0, 0, 1]])


def write_frames(folder: Path, layout: str, n: int, nan_frames=(), timestamps_us=None) -> None:
    poses = frame_poses(n, nan_frames)
    images = frame_images(n)
    depths = [np.full((48, 64), 1000 + i, np.uint16) for i in range(n)]
    if layout == "sens":
        write_sens(
            folder / f"{folder.name}.sens",
            colors_jpeg=[cv2.imencode(".jpg", im)[1].tobytes() for im in images],
            depths_mm=depths,
            poses=poses,
            intrinsic_color=INTRINSIC_COLOR,
            intrinsic_depth=INTRINSIC_COLOR * 0.5,
            color_size=(128, 96),
            depth_size=(64, 48),
            timestamps_us=timestamps_us,
        )
        return
    for sub in ("color", "depth", "pose", "intrinsic"):
        (folder / sub).mkdir()
    np.savetxt(folder / "intrinsic" / "intrinsic_color.txt", INTRINSIC_COLOR, fmt="%f")
    for i in range(n):
        cv2.imwrite(str(folder / "color" / f"{i}.jpg"), images[i])
        cv2.imwrite(str(folder / "depth" / f"{i}.png"), depths[i])
        np.savetxt(folder / "pose" / f"{i}.txt", poses[i], fmt="%f")
