"""A malformed-input corpus: hostile and odd scans, each beside good ones, by the kinds of issue 16.

Every case writes one tiny real scan (the box room of ``tests.scannet_factory``
with an 8-frame camera stream, or a folder arrangement around one) and breaks
it in one way. ``expect`` says what a build must do with it:

* ``fail``  — the scan's partition fails with one line naming scan, ``file`` and ``problem``;
* ``warn``  — the scan builds and its warnings name ``file`` and ``problem``;
* ``skip``  — discovery leaves the folder out with a line naming ``file`` (the folder) and ``problem``;
* ``ok``    — an odd but valid scan builds like any other.

``outside`` is a folder beside the scans root that holds what links point at; a
build must never open anything in it (nor ``/etc/hostname``).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.real_scans import write_scan
from tests.scannet_factory import INTRINSIC_COLOR

FRAMES = 8
HOSTNAME = "/etc/hostname"


@dataclass(frozen=True)
class Case:
    name: str
    kind: int  # issue 16 item 1..8
    expect: str  # fail | warn | skip | ok
    file: str  # what the line must name: a file relative to the scan, or the folder (skip)
    problem: str  # a piece of the problem text
    make: Callable[[Path, str, Path], str]  # (root, scene id, outside) -> partition key (or folder for skip)


# --- file helpers ------------------------------------------------------------------------------------------------


def scan(root: Path, scene_id: str, frames: int = FRAMES) -> Path:
    return write_scan(root, scene_id, frames=frames)


def key_of(folder: Path) -> str:
    from pipeline.scene.readers.scannet import dataset_of

    return f"{dataset_of(folder)}/{folder.name}"


def meta(folder: Path) -> Path:
    return folder / f"{folder.name}.txt"


def agg(folder: Path) -> Path:
    return folder / f"{folder.name}.aggregation.json"


def segs(folder: Path) -> Path:
    return folder / f"{folder.name}_vh_clean_2.0.010000.segs.json"


def mesh(folder: Path) -> Path:
    return folder / f"{folder.name}_vh_clean_2.ply"


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def add_alignment(folder: Path, matrix) -> None:
    line = "axisAlignment = " + " ".join(f"{v:g}" for v in np.asarray(matrix, float).ravel())
    meta(folder).write_text(meta(folder).read_text() + line + "\n")


def set_intrinsics(folder: Path, change) -> None:
    k = INTRINSIC_COLOR.copy()
    change(k)
    np.savetxt(folder / "intrinsic" / "intrinsic_color.txt", k, fmt="%f")


def set_pose(folder: Path, index: int, pose) -> None:
    np.savetxt(folder / "pose" / f"{index}.txt", np.asarray(pose, float), fmt="%f")


def jpeg_claiming(width: int, height: int) -> bytes:
    """A well-formed JPEG prefix whose frame header claims ``width`` x ``height`` (the pixels never follow)."""
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + sof + b"\xff\xd9"


def replace(path: Path, data: bytes | str) -> None:
    path.unlink()
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


# --- case makers: each returns the partition key (fail/warn/ok) or the folder relative to the root (skip) ------------


def broken(change: Callable[[Path], None]) -> Callable[[Path, str, Path], str]:
    def make(root: Path, scene_id: str, outside: Path) -> str:
        folder = scan(root, scene_id)
        change(folder)
        return key_of(folder)

    return make


def fifo_mesh(folder: Path) -> None:
    mesh(folder).unlink()
    os.mkfifo(mesh(folder))


def fifo_image(folder: Path) -> None:
    (folder / "color" / "3.jpg").unlink()
    os.mkfifo(folder / "color" / "3.jpg")


def nested(path: Path) -> Callable[[Path], None]:
    return lambda folder: replace(path(folder), "[" * 200_000 + "]" * 200_000)


def seg_index(value) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        edit_json(segs(folder), lambda d: d["segIndices"].__setitem__(0, value))

    return change


def label(value) -> Callable[[Path], None]:
    def change(folder: Path) -> None:
        edit_json(agg(folder), lambda d: d["segGroups"][2].__setitem__("label", value))

    return change


def duplicate_ids(folder: Path) -> None:
    edit_json(agg(folder), lambda d: d["segGroups"][2].__setitem__("objectId", 1))


def overlap(folder: Path) -> None:
    edit_json(agg(folder), lambda d: d["segGroups"][2]["segments"].append(101))


def scene_id_field(value: str) -> Callable[[Path], None]:
    return lambda folder: edit_json(agg(folder), lambda d: d.__setitem__("sceneId", value))


def doubly_given(folder: Path) -> None:
    add_alignment(folder, np.eye(4))
    shifted = np.eye(4)
    shifted[0, 3] = 1.0
    add_alignment(folder, shifted)


def nan_pose(folder: Path) -> None:
    set_pose(folder, 2, np.full((4, 4), np.nan))


def singular_pose(folder: Path) -> None:
    pose = np.eye(4)
    pose[:3, :3] = 0.0
    set_pose(folder, 2, pose)


def far_pose(folder: Path) -> None:
    """A rigid pose 1e308 m away: finite, so only the camera bound drops it (issue 27)."""
    pose = np.eye(4)
    pose[0, 3] = 1e308
    np.savetxt(folder / "pose" / "2.txt", pose)  # "%.18e": 1e308 as written, not 309 digits


def image(data: bytes) -> Callable[[Path], None]:
    return lambda folder: replace(folder / "color" / "2.jpg", data)


def truncated_image(folder: Path) -> None:
    path = folder / "color" / "2.jpg"
    replace(path, path.read_bytes()[: len(path.read_bytes()) // 2])


def link_to(target: Callable[[Path, Path], Path], inside: Callable[[Path], Path]) -> Callable[[Path, str, Path], str]:
    """A scan with one of its files replaced by a symbolic link to ``target(folder, outside)``."""

    def make(root: Path, scene_id: str, outside: Path) -> str:
        folder = scan(root, scene_id)
        path = inside(folder)
        goal = target(folder, outside)
        if not goal.exists() and goal.parent == outside:
            outside.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, goal)
        path.unlink()
        os.symlink(goal.resolve(), path)
        return key_of(folder)

    return make


def folder_link_outside(root: Path, scene_id: str, outside: Path) -> str:
    target = scan(outside / "linked", scene_id)
    os.symlink(target.resolve(), root / scene_id)
    return scene_id


def loop_in_root(root: Path, scene_id: str, outside: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    os.symlink(f"loop{scene_id}", root / f"loop{scene_id}")
    return f"loop{scene_id}"


def loop_in_scan(folder: Path) -> None:
    os.symlink("self_loop", folder / "self_loop")


def dangling_scan(root: Path, scene_id: str, outside: Path) -> str:
    root.mkdir(parents=True, exist_ok=True)
    os.symlink((root / "nowhere").resolve(), root / scene_id)
    return scene_id


def missing_mesh(root: Path, scene_id: str, outside: Path) -> str:
    mesh(scan(root, scene_id, frames=0)).unlink()
    return scene_id


def duplicate_scene(root: Path, scene_id: str, outside: Path) -> str:
    """The same scene id twice: a second copy of the good scan in a dataset folder (sorted after it)."""
    scan(root / "zz_copies", "synth0000_00", frames=0)
    return "zz_copies/synth0000_00"


def named(name: str) -> Callable[[Path, str, Path], str]:
    def make(root: Path, scene_id: str, outside: Path) -> str:
        return key_of(scan(root, name, frames=0))

    return make


def non_utf8(root: Path, scene_id: str, outside: Path) -> str:
    name = os.fsdecode(b"scan\xff" + scene_id.encode())
    scan(root, name, frames=0)
    return name.encode("utf-8", "backslashreplace").decode()


def long_name(root: Path, scene_id: str, outside: Path) -> str:
    name = "L" * 250  # no <name>_vh_clean_2.ply fits the 255-byte file name limit
    (root / name).mkdir(parents=True)
    (root / name / "notes.txt").write_text("a scan folder that cannot hold its mesh name")
    return name


def deep(root: Path, scene_id: str, outside: Path) -> str:
    folder = root / "deep"
    for level in range(120):
        folder = folder / f"d{level % 10}"
    scan(folder, scene_id, frames=0)
    return "deep"


def x(n: float) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] *= n
    return m


PROJECTIVE = np.eye(4)
PROJECTIVE[3] = [0, 0, 0.5, 1]
RANK_DEFICIENT = np.diag([1.0, 1.0, 0.0, 1.0])


CASES: tuple[Case, ...] = (
    # 2. Hangs: special files refused before opening, cameras validated.
    Case("fifo_mesh", 2, "fail", "_vh_clean_2.ply", "FIFO", broken(fifo_mesh)),
    Case("fifo_image", 2, "fail", "color/3.jpg", "FIFO", broken(fifo_image)),
    Case("zero_focal", 2, "fail", "intrinsic/intrinsic_color.txt", "focal length", broken(lambda f: set_intrinsics(f, lambda k: k.__setitem__((0, 0), 0.0)))),
    Case("negative_focal", 2, "fail", "intrinsic/intrinsic_color.txt", "focal length", broken(lambda f: set_intrinsics(f, lambda k: k.__setitem__((1, 1), -100.0)))),
    Case("nan_intrinsics", 2, "fail", "intrinsic/intrinsic_color.txt", "not finite", broken(lambda f: set_intrinsics(f, lambda k: k.__setitem__((0, 2), np.nan)))),
    Case("principal_point_outside", 2, "fail", "intrinsic/intrinsic_color.txt", "principal point", broken(lambda f: set_intrinsics(f, lambda k: k.__setitem__((0, 2), 5000.0)))),
    # 3. Whole-build crashes: loops and deep JSON are one scan's (or one folder's) problem.
    Case("symlink_loop_in_root", 3, "skip", "loop", "loop", loop_in_root),
    Case("symlink_loop_in_scan", 3, "fail", "self_loop", "loop", broken(loop_in_scan)),
    Case("nested_aggregation_json", 3, "fail", ".aggregation.json", "nested too deeply", broken(nested(agg))),
    Case("nested_segments_json", 3, "fail", ".segs.json", "nested too deeply", broken(nested(segs))),
    # 4. One bad axisAlignment stops its own scan only.
    Case("alignment_zeros", 4, "fail", ".txt", "not a rigid transform", broken(lambda f: add_alignment(f, np.zeros((4, 4))))),
    Case("alignment_rank_deficient", 4, "fail", ".txt", "not a rigid transform", broken(lambda f: add_alignment(f, RANK_DEFICIENT))),
    Case("alignment_projective", 4, "fail", ".txt", "projective", broken(lambda f: add_alignment(f, PROJECTIVE))),
    Case("alignment_scaled", 4, "fail", ".txt", "scaled", broken(lambda f: add_alignment(f, x(2.0)))),
    Case("alignment_doubly_given", 4, "fail", ".txt", "second, different value", broken(doubly_given)),
    # 5. Accepted silently before: now errors or warnings.
    Case("segment_string", 5, "fail", ".segs.json", "(str)", broken(seg_index("100"))),
    Case("segment_float", 5, "fail", ".segs.json", "(float)", broken(seg_index(100.5))),
    Case("segment_bool", 5, "fail", ".segs.json", "(bool)", broken(seg_index(True))),
    Case("segment_negative", 5, "fail", ".segs.json", "negative", broken(seg_index(-1))),
    Case("group_segment_string", 5, "fail", ".aggregation.json", "(str)", broken(lambda f: edit_json(agg(f), lambda d: d["segGroups"][0]["segments"].__setitem__(0, "100")))),
    Case("label_null", 5, "warn", ".aggregation.json", "label None", broken(label(None))),
    Case("label_numeric", 5, "warn", ".aggregation.json", "label 7", broken(label(7))),
    Case("label_empty", 5, "warn", ".aggregation.json", "label ''", broken(label(""))),
    Case("label_whitespace", 5, "warn", ".aggregation.json", "label '  '", broken(label("  "))),
    Case("duplicate_object_ids", 5, "warn", ".aggregation.json", "duplicate objectIds", broken(duplicate_ids)),
    Case("overlapping_segments", 5, "warn", ".aggregation.json", "more than one segGroup", broken(overlap)),
    Case("scene_id_collides", 5, "warn", ".aggregation.json", "names scene 'synth0000_00'", broken(scene_id_field("scannet.synth0000_00"))),
    Case("scene_id_dotdot", 5, "warn", ".aggregation.json", "looks like a path", broken(scene_id_field("scannet.../../etc"))),
    Case("same_scene_twice", 5, "skip", "zz_copies/synth0000_00", "already found", duplicate_scene),
    Case("nan_pose", 5, "warn", "pose/2.txt", "NaN/inf pose", broken(nan_pose)),
    Case("singular_pose", 5, "warn", "pose/2.txt", "not a rotation", broken(singular_pose)),
    Case("pose_1e308_metres_away", 5, "warn", "pose/2.txt", "outside the scene's bounding box", broken(far_pose)),
    Case("image_truncated", 5, "warn", "color/2.jpg", "truncated JPEG", broken(truncated_image)),
    Case("image_empty", 5, "warn", "color/2.jpg", "empty file", broken(image(b""))),
    Case("image_garbage", 5, "warn", "color/2.jpg", "not a JPEG or PNG", broken(image(bytes(range(256)) * 8))),
    Case("image_html", 5, "warn", "color/2.jpg", "<!DOCTYPE", broken(image(b"<!DOCTYPE html><html><body>404</body></html>"))),
    Case("image_65000_squared", 5, "warn", "color/2.jpg", "65000x65000", broken(image(jpeg_claiming(65000, 65000)))),
    # 6. Skipped silently before: now said, or built.
    Case("missing_mesh", 6, "skip", "", "no reader recognises", missing_mesh),
    Case("dangling_scan_link", 6, "skip", "", "dangling", dangling_scan),
    Case("name_with_spaces", 6, "ok", "", "", named("my scan 01")),
    Case("name_unicode", 6, "ok", "", "", named("scène_été")),
    Case("name_emoji", 6, "ok", "", "", named("scan_\U0001f642")),
    Case("name_leading_dash", 6, "ok", "", "", named("-scan01")),
    Case("name_non_utf8", 6, "skip", "", "not valid UTF-8", non_utf8),
    Case("name_250_chars", 6, "skip", "", "250 bytes", long_name),
    Case("scan_120_levels_deep", 6, "skip", "deep", "at most 2 folders below the root", deep),
    # 7. Error lines name the file relative to the scan.
    Case("segment_2_pow_70", 7, "fail", ".segs.json", "larger than 2^63-1", broken(seg_index(2**70))),
    Case("pose_12_numbers", 7, "fail", "pose/1.txt", "expected 16 numbers, found 12", broken(lambda f: (f / "pose" / "1.txt").write_text(" ".join(["1"] * 12)))),
    Case("intrinsics_9_numbers", 7, "fail", "intrinsic/intrinsic_color.txt", "expected 16 numbers", broken(lambda f: (f / "intrinsic" / "intrinsic_color.txt").write_text(" ".join(["1"] * 9)))),
    # 8. Nothing is read from outside the scans root.
    Case("scan_folder_linked_outside", 8, "skip", "", "outside the scans root", folder_link_outside),
    Case("metadata_linked_to_etc_hostname", 8, "fail", ".txt", "outside the scans root", link_to(lambda f, o: Path(HOSTNAME), meta)),
    Case("aggregation_linked_outside", 8, "fail", ".aggregation.json", "outside the scans root", link_to(lambda f, o: o / agg(f).name, agg)),
    Case("image_linked_outside", 8, "fail", "color/4.jpg", "outside the scans root", link_to(lambda f, o: o / f"{f.name}_4.jpg", lambda f: f / "color" / "4.jpg")),
)

# One case per kind and expectation: the default-run build; the slow variant builds them all.
QUICK = (
    "fifo_mesh", "zero_focal", "symlink_loop_in_root", "nested_aggregation_json", "alignment_zeros", "segment_string",
    "label_null", "image_html", "same_scene_twice", "missing_mesh", "name_with_spaces", "name_non_utf8",
    "segment_2_pow_70", "pose_12_numbers", "scan_folder_linked_outside", "metadata_linked_to_etc_hostname",
)


@dataclass(frozen=True)
class Placed:
    case: Case
    target: str  # partition key, or the folder (relative to the root) a skip line names


def place(cases, root: Path, outside: Path) -> list[Placed]:
    """Write the good scan ``synth0000_00`` and every case under ``root`` (scene ids synth0001_00, ...)."""
    scan(root, "synth0000_00")
    placed = []
    for index, case in enumerate(cases, start=1):
        placed.append(Placed(case, case.make(root, f"synth{index:04d}_00", outside)))
    return placed


def kinds(cases) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {}
    for case in cases:
        counts.setdefault(case.kind, {}).setdefault(case.expect, 0)
        counts[case.kind][case.expect] += 1
    return dict(sorted(counts.items()))
