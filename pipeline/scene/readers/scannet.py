"""ScanNet scene folder -> ``ParsedScan``.

A ScanNet scene is a mesh (``<scene>_vh_clean_2.ply``), an over-segmentation
(``<scene>_vh_clean_2.0.010000.segs.json``: one segment id per vertex), an
aggregation grouping segments into labelled objects (v1 or v2 header, as
``<scene>.aggregation.json`` or ``<scene>_vh_clean.aggregation.json``), a
metadata file (``<scene>.txt``, with the ``axisAlignment`` that puts the room
square to the axes) and camera frames (``.sens`` or its exported stream).
Raw labels go through the label map found at the scans root. The synthetic
generator writes the same layout, so synthetic scenes read here too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.formats.ply import PlyFormatError, read_ply
from pipeline.frames.frame_checks import rigid_problem
from pipeline.scene.readers.assembly import assembled_scan
from pipeline.scene.readers.file_checks import read_root_file, root_file_region, scans_root_of
from pipeline.scene.readers.labels import (
    LABEL_MAP_FILENAMES,
    MAX_LABEL_MAP_BYTES,
    LabelMap,
    LabelMapError,
    parse_label_map,
    skipped_rows_warning,
)
from pipeline.scene.readers.layouts import scans_root_folders
from pipeline.scene.readers.scannet_frames import SCANNET_FPS, read_scannet_frames
from pipeline.scene.parsed import Mesh, ParsedScan, SceneObject

MESH_SUFFIX = "_vh_clean_2.ply"
SEGS_SUFFIX = "_vh_clean_2.0.010000.segs.json"
AGGREGATION_SUFFIXES = (".aggregation.json", "_vh_clean.aggregation.json")
SYNTHETIC_SCENE = re.compile(r"^synth\d{4}_\d{2}$")


def is_scannet_scene(folder) -> bool:
    return (folder / f"{folder.name}{MESH_SUFFIX}").exists()


def dataset_of(folder) -> str:
    """Synthetic scenes share ScanNet's layout but not its dataset name."""
    return "synthetic" if SYNTHETIC_SCENE.match(folder.name) else "scannet"


def _load_json(path: Path, key: str):
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScanError(key, path.name, f"unreadable JSON ({type(exc).__name__}: {exc})".splitlines()[0]) from None
    except RecursionError:
        raise ScanError(key, path.name, "unreadable JSON (nested too deeply)") from None


def read_metadata(path: Path, key: str) -> dict[str, str]:
    """``key = value`` lines of ``<scene>.txt``."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ScanError(key, path.name, f"unreadable metadata ({type(exc).__name__})") from None
    meta = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise ScanError(key, path.name, f"line {number} is not 'key = value'")
        name, value = name.strip(), value.strip()
        if name == "axisAlignment" and name in meta and meta[name] != value:  # which one puts the room square?
            raise ScanError(key, path.name, f"line {number} gives {name} a second, different value")
        meta[name] = value
    return meta


def axis_alignment(meta: dict[str, str], key: str, filename: str) -> np.ndarray | None:
    text = meta.get("axisAlignment")
    if text is None:
        return None
    try:
        values = np.array(text.split(), dtype=float)
    except ValueError:
        raise ScanError(key, filename, "axisAlignment is not 16 numbers") from None
    if values.size != 16 or not np.all(np.isfinite(values)):
        raise ScanError(key, filename, f"axisAlignment has {values.size} values, expected 16 finite numbers")
    problem = rigid_problem(values.reshape(4, 4))
    if problem:  # singular, scaled or projective: boxes would collapse or stretch, so the scan is refused
        raise ScanError(key, filename, f"axisAlignment is not a rigid transform: {problem}")
    return values.reshape(4, 4)


def _color_size(meta: dict[str, str]) -> tuple[int, int] | None:
    try:
        return int(meta["colorWidth"]), int(meta["colorHeight"])
    except (KeyError, ValueError):
        return None


def stream_fps(meta: dict[str, str], key: str, filename: str) -> float:
    """Frame rate of an exported stream (no timestamps): ``fps`` from the metadata, else ScanNet's 30."""
    text = meta.get("fps")
    if text is None:
        return SCANNET_FPS
    try:
        fps = float(text)
    except ValueError:
        fps = float("nan")
    if not np.isfinite(fps) or fps <= 0:
        raise ScanError(key, filename, f"fps must be a positive number, got {text!r}")
    return fps


def label_map_candidates(folder):
    """The label maps a scene may use, best first: at its scans root (above ``scans/`` in ScanNet's download)."""
    return [parent / name for parent in scans_root_folders(folder) for name in LABEL_MAP_FILENAMES]


def find_label_map(folder: Path, config: Config, key: str) -> Path:
    if config.label_map:
        path = Path(config.label_map)
        if not path.exists():
            raise ScanError(key, str(path), "label map (config.label_map) not found")
        return path
    candidates = label_map_candidates(folder)
    for path in candidates:
        if path.exists():
            return path
    looked = ", ".join(str(p) for p in candidates)
    raise ScanError(key, LABEL_MAP_FILENAMES[0], f"label map not found; looked at {looked} (or set config.label_map)")


def load_label_map(path: Path, folder: Path, config: Config, key: str, warnings: list[str]) -> LabelMap:
    """Read the label map ``find_label_map`` chose, guarded like the scan's own files; bad rows become a warning.

    The map found at the scans root may not be a link out of it (unless ``allow_links_outside_root``); a map
    named by ``config.label_map`` is the user's choice and is read wherever it is. Either is refused when it is
    a FIFO, a device or over ``MAX_LABEL_MAP_BYTES``, before it is read.
    """
    name = path.name  # a remote map is read from its local copy: its name is what both share
    region = None if config.label_map else root_file_region(path, scans_root_of(folder, config))
    data = read_root_file(path, key, name, MAX_LABEL_MAP_BYTES, region=region, allow_outside=config.allow_links_outside_root)
    try:
        label_map = parse_label_map(data)
    except LabelMapError as exc:
        raise ScanError(key, name, f"unreadable label map: {exc}") from None
    warnings += skipped_rows_warning(label_map, name)
    return label_map


def find_aggregation(folder: Path, key: str) -> Path:
    candidates = [folder / f"{folder.name}{suffix}" for suffix in AGGREGATION_SUFFIXES]
    for path in candidates:
        if path.exists():
            return path
    raise ScanError(key, candidates[0].name, f"missing aggregation (also looked for {candidates[1].name})")


def find_segments(folder: Path, key: str) -> Path:
    path = folder / f"{folder.name}{SEGS_SUFFIX}"
    if path.exists():
        return path
    others = sorted(folder.glob(f"{folder.name}_vh_clean_2*.segs.json"))
    if others:
        return others[0]
    raise ScanError(key, path.name, "missing over-segmentation for the _vh_clean_2 mesh")


def aggregation_version(agg: dict) -> str:
    """"v2" for ScanNet v2 headers (``appId: Aggregator.v2``, ``sceneId: scannet.<scene>``), else "v1"."""
    if str(agg.get("appId", "")).endswith(".v2") or str(agg.get("sceneId", "")).startswith("scannet."):
        return "v2"
    return "v1"


def read_seg_groups(path: Path, key: str, scene_id: str) -> tuple[list[dict], list[str]]:
    agg = _load_json(path, key)
    groups = agg.get("segGroups") if isinstance(agg, dict) else None
    if not isinstance(groups, list):
        raise ScanError(key, path.name, "no segGroups list")
    warnings = []
    named = str(agg.get("sceneId", "")).removeprefix("scannet.")
    if named and named != scene_id:
        warnings.append(f"{path.name} names scene {named!r}, read as {scene_id!r}")
    if ".." in named or "/" in named:
        warnings.append(f"{path.name}: sceneId {named!r} looks like a path; ignored, the folder name is the scene id")
    kept = []
    for n, group in enumerate(groups):
        if not isinstance(group, dict) or not isinstance(group.get("segments"), list) or "label" not in group:
            raise ScanError(key, path.name, f"segGroup {n} lacks segments or label")
        label = group["label"]
        if not isinstance(label, str) or not label.strip():
            warnings.append(f"{path.name}: segGroup {n} has label {label!r} (not a non-empty string): skipped")
            continue
        kept.append(group if "objectId" in group or "id" in group else {**group, "id": n})
    return kept, warnings


MAX_ID = 2**63 - 1


def integer_ids(values, key: str, file: str, what: str) -> np.ndarray:
    """A JSON list of non-negative integer ids as int64; strings, floats, booleans, negatives and overflow refused."""
    if not isinstance(values, list):
        raise ScanError(key, file, f"{what} is {type(values).__name__}, expected a list of integers")
    # Fast path (a ScanNet mesh lists one segment id per vertex, hundreds of thousands): every element an
    # exact int (not bool, not float) that fits int64 and is not negative; else the loop names the first bad one.
    if all(t is int for t in set(map(type, values))):
        try:
            ids = np.asarray(values, dtype=np.int64)
        except OverflowError:
            ids = None
        if ids is not None and (not len(ids) or int(ids.min()) >= 0):
            return ids
    for n, v in enumerate(values):
        if type(v) is not int or not 0 <= v <= MAX_ID:
            kind = type(v).__name__ if type(v) is not int else ("negative" if v < 0 else "larger than 2^63-1")
            raise ScanError(key, file, f"{what}[{n}] is {v!r}"[:160] + f" ({kind}); expected a non-negative integer")
    return np.asarray(values, dtype=np.int64)


def _object_ids(groups: list[dict], key: str, filename: str) -> tuple[list[int], list[str]]:
    """ScanNet's ``objectId`` per segGroup (ScanRefer and ReVSI use it), renumbered only if ids repeat."""
    ids = [g.get("objectId", g.get("id", n)) for n, g in enumerate(groups)]
    for n, i in enumerate(ids):
        if type(i) is not int or not 0 <= i <= MAX_ID:
            raise ScanError(key, filename, f"segGroup {n} has objectId {i!r}, expected a non-negative integer"[:200])
    if len(set(ids)) == len(ids):
        return ids, []
    return list(range(len(groups))), [f"{filename}: duplicate objectIds; objects numbered by segGroup position"]


def group_vertices(
    seg_indices: np.ndarray, groups: list[dict], key: str, agg_name: str
) -> tuple[list[np.ndarray], np.ndarray, int]:
    """Vertex indices of every segGroup, the per-vertex group position (-1 = none), and the overlap count.

    Vertices are sorted by segment once; a group then gathers contiguous
    slices, so the cost is one argsort of the vertex array.
    """
    segment_ids, inverse = np.unique(seg_indices, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=len(segment_ids))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    vertex_group = np.full(len(seg_indices), -1, dtype=np.int64)
    overlap = 0
    members = []
    for position, group in enumerate(groups):
        segs = np.unique(integer_ids(group["segments"], key, agg_name, f"segGroup {position} segments"))
        slot = np.searchsorted(segment_ids, segs)
        known = (slot < len(segment_ids)) & (segment_ids[np.minimum(slot, len(segment_ids) - 1)] == segs)
        if not np.all(known):
            bad = segs[~known][:3].tolist()
            raise ScanError(
                key, agg_name, f"segGroup {position} ({group['label']!r}) names segments {bad} absent from segs.json"
            )
        # Gather the groups' slices in one vectorised step: ScanNet++ groups list one segment per vertex.
        lengths = counts[slot]
        firsts = np.repeat(starts[slot] - np.cumsum(lengths) + lengths, lengths)
        idx = np.sort(order[firsts + np.arange(int(lengths.sum()))])
        overlap += int(np.count_nonzero(vertex_group[idx] >= 0))
        vertex_group[idx] = position
        members.append(idx)
    return members, vertex_group, overlap


def triangle_owner(triangles: np.ndarray, vertex_owner: np.ndarray) -> np.ndarray:
    """Owner of each triangle when all three of its vertices share it, else -1."""
    if len(triangles) == 0:
        return np.zeros(0, dtype=np.int32)
    o = vertex_owner[triangles]
    same = (o[:, 0] == o[:, 1]) & (o[:, 1] == o[:, 2])
    return np.where(same, o[:, 0], -1).astype(np.int32)


def read_scannet(folder: Path, config: Config, *, source_uri: str | None = None) -> tuple[ParsedScan, list[Path]]:
    """Parse a local scene folder; also returns the input files read (for the checksum)."""
    folder = Path(folder)
    scene_id = folder.name
    dataset = dataset_of(folder)
    key = f"{dataset}/{scene_id}"
    if not folder.is_dir():
        raise ScanError(key, str(folder), "scene folder not found")
    warnings: list[str] = []
    files: list[Path] = []

    meta_path = folder / f"{scene_id}.txt"
    meta: dict[str, str] = {}
    alignment = None
    if meta_path.exists():
        meta = read_metadata(meta_path, key)
        files.append(meta_path)
        alignment = axis_alignment(meta, key, meta_path.name)
    if alignment is None:
        warnings.append(f"no axisAlignment in {meta_path.name}: mesh and poses used as stored (identity)")
        alignment = np.eye(4)

    # Cheap checks first, so a scan with a missing file fails before its mesh is parsed.
    label_map_path = find_label_map(folder, config, key)
    files.append(label_map_path)
    label_map = load_label_map(label_map_path, folder, config, key, warnings)
    agg_path = find_aggregation(folder, key)
    segs_path = find_segments(folder, key)
    files += [agg_path, segs_path]
    groups, agg_warnings = read_seg_groups(agg_path, key, scene_id)
    warnings += agg_warnings
    segs = _load_json(segs_path, key)
    if not isinstance(segs, dict) or "segIndices" not in segs:
        raise ScanError(key, segs_path.name, "no segIndices list")
    seg_indices = integer_ids(segs["segIndices"], key, segs_path.name, "segIndices")
    members, vertex_group, overlap = group_vertices(seg_indices, groups, key, agg_path.name)

    mesh_path = folder / f"{scene_id}{MESH_SUFFIX}"
    try:
        ply = read_ply(mesh_path)
    except PlyFormatError as exc:
        raise ScanError(key, mesh_path.name, str(exc)) from None
    files.append(mesh_path)
    vertices = ply.vertices @ alignment[:3, :3].T + alignment[:3, 3]
    if seg_indices.shape != (len(vertices),):
        raise ScanError(key, segs_path.name, f"{seg_indices.size} segIndices for {len(vertices)} mesh vertices")

    if overlap:
        warnings.append(f"{agg_path.name}: {overlap} vertices belong to more than one segGroup; the later group keeps them")
    object_ids, id_warnings = _object_ids(groups, key, agg_path.name)
    warnings += id_warnings
    id_of_position = np.asarray(object_ids + [-1], dtype=np.int64)  # index -1 maps "no group" to -1
    vertex_owner = id_of_position[vertex_group]

    objects: list[SceneObject] = []
    unmapped: dict[str, int] = {}
    for object_id, group, idx in zip(object_ids, groups, members):
        raw = group["label"]  # a non-empty string (read_seg_groups skips the others)
        info = label_map.lookup(raw)
        if info is None:
            unmapped[raw] = unmapped.get(raw, 0) + 1
        objects.append(
            SceneObject(
                object_id=object_id,
                raw_label=raw,
                vertex_indices=idx.astype(np.int64),
                category=info.category if info else raw,
                nyu40_id=info.nyu40_id if info else None,
                scannet200_id=info.scannet200_id if info else None,
                label_mapped=info is not None,
            )
        )
    objects.sort(key=lambda o: o.object_id)
    for raw in sorted(unmapped):
        warnings.append(f"label {raw!r} ({unmapped[raw]} objects) is not in {label_map_path.name}: kept unmapped")

    mesh = Mesh(
        vertices=vertices,
        triangles=ply.triangles,
        colors=ply.colors,
        triangle_object_ids=triangle_owner(ply.triangles, vertex_owner),
    )
    out_size = (int(config.frames.width), int(config.frames.height))
    fps = stream_fps(meta, key, meta_path.name)
    frame_source = read_scannet_frames(folder, key, alignment, out_size, _color_size(meta), fps)
    if frame_source is None:
        warnings.append("no camera frames (no pose/ + color/ export, no .sens): frame-dependent steps skip this scan")
    else:
        warnings += frame_source.warnings
        files += frame_source.files

    parsed = assembled_scan(
        dataset, scene_id, source_uri or str(folder), mesh=mesh, objects=objects,
        frames=frame_source.frames if frame_source else [],
        source_fps=frame_source.source_fps if frame_source else 0.0,
        load_image=frame_source.load_image if frame_source else None,
        warnings=warnings, seed=config.seed, scene_type=meta.get("sceneType", ""),
    )
    return parsed, files
