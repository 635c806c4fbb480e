"""Evidence-absent 16-frame videos (ReVSI §5.2, Appendix B.5).

A question about some objects is unanswerable from a video that never shows
them, so a grounded model should answer 0 to "how many ...". Per set of
queried objects we build:

- ``query_drop``: 16 frames sampled uniformly (``linspace``, as the budgets)
  from the all-frame frames in which none of the objects has a single visible
  pixel - the scene stays, the evidence goes;
- ``first_frame``: the first ``query_drop`` frame repeated 16 times;
- ``black``: 16 black frames.

"Not visible" here is the strict per-pixel reading (zero pixels), not the 5%
rule: a sliver of a chair is still evidence. When every all-frame frame shows
one of the objects there is no ``query_drop`` (nor ``first_frame``) video for
that set; ``black`` always exists. The QA step asks for the sets it needs.

The ``dummy_videos`` table is the manifest: one row per kind and object set,
naming the video that serves it. Videos are named by what they show (scan,
kind, frame list), so object sets whose videos would be frame-for-frame the
same share one file, encoded once: a scan has one black video, one
first-frame video per distinct first frame, and one query-drop video per
distinct frame list. ``video_id`` is the file's id, so rows sharing a file
share it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import FramesConfig
from pipeline.errors import ScanError
from pipeline.frames.budgets import all_frame_table
from pipeline.frames.frame_cache import FrameCache, Identity, entry_key
from pipeline.seeding import stable_id
from pipeline.frames.video import BUDGET_VIDEO_FPS, load_frame, scan_video_size, video_frame, write_video

KINDS: tuple[str, ...] = ("query_drop", "first_frame", "black")
DUMMY_FRAMES = 16
BLACK_FRAME = -1
_CACHED_FRAMES = 128  # ~120 MB of 640x480 frames shared between object sets


def dummy_video_id(key: str, kind: str, frame_indices: Iterable[int]) -> str:
    """The id of the video showing these source frames of the scan, in this order (``BLACK_FRAME``: black)."""
    return stable_id(key, kind, *(int(f) for f in frame_indices))


def dummy_video_path(kind: str, video_id: str) -> str:
    return f"videos/dummy/{kind}/{video_id}.mp4"


def query_drop_frames(
    key: str, object_ids: Iterable[int], visibility: pl.DataFrame, frames: pl.DataFrame, count: int = DUMMY_FRAMES
) -> np.ndarray:
    """Source indices of ``count`` all-frame frames (uniform over the candidates) showing none of the objects."""
    ids = sorted({int(o) for o in object_ids})
    sequence = all_frame_table(frames.filter(pl.col("key") == key))["frame_index"].to_numpy()
    showing = (
        visibility.filter(
            (pl.col("key") == key) & pl.col("object_id").is_in(ids) & (pl.col("visible_pixels") > 0)
        )["frame_index"]
        .unique()
        .to_numpy()
    )
    candidates = sequence[~np.isin(sequence, showing)]
    if candidates.size == 0:
        return np.zeros(0, dtype=np.int64)
    return candidates[np.linspace(0, candidates.size - 1, count, dtype=int)].astype(np.int64)


def plan_dummy_videos(
    key: str,
    object_id_sets: Iterable[Iterable[int]],
    visibility: pl.DataFrame,
    frames: pl.DataFrame,
    kinds: Iterable[str] = KINDS,
    count: int = DUMMY_FRAMES,
) -> pl.DataFrame:
    """The ``dummy_videos`` rows for each distinct object set, without writing any video."""
    kinds = tuple(kinds)
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown dummy video kinds {unknown}; known: {list(KINDS)}")
    sets = sorted({tuple(sorted({int(o) for o in s})) for s in object_id_sets})
    rows = []
    for ids in sets:
        dropped = query_drop_frames(key, ids, visibility, frames, count)
        lists = {"black": [BLACK_FRAME] * count}
        if dropped.size:
            lists["query_drop"] = [int(f) for f in dropped]
            lists["first_frame"] = [int(dropped[0])] * count
        for kind in kinds:
            if kind not in lists:
                continue
            video_id = dummy_video_id(key, kind, lists[kind])
            rows.append(
                {
                    "key": key,
                    "video_id": video_id,
                    "kind": kind,
                    "object_ids": list(ids),
                    "frame_indices": lists[kind],
                    "path": dummy_video_path(kind, video_id),
                }
            )
    order = {k: i for i, k in enumerate(KINDS)}
    rows.sort(key=lambda r: (order[r["kind"]], r["object_ids"], r["video_id"]))
    return schemas.from_rows("dummy_videos", rows)


def make_dummy_videos(
    key: str,
    object_id_sets: Iterable[Iterable[int]],
    visibility: pl.DataFrame,
    frames: pl.DataFrame,
    load_image: Callable[[int], np.ndarray] | None,
    output_root: str,
    *,
    frames_config: FramesConfig | None = None,
    image_rotation: int = 0,
    storage_options: dict | None = None,
    kinds: Iterable[str] = KINDS,
    image_identity: Identity | None = None,
    frame_cache: FrameCache | None = None,
) -> pl.DataFrame:
    """Plan and write the dummy videos of one scan; returns the ``dummy_videos`` table.

    Videos play at one frame per sample like the budget videos, at the scan's
    video size; each distinct video (rows sharing a ``path``) is encoded once.
    A frame the scan videos left in ``frame_cache`` (``pipeline.frames.frame_cache``)
    is not decoded again. A source image missing or unreadable is a ``ScanError``.
    """
    frames_config = frames_config or FramesConfig()
    table = plan_dummy_videos(key, object_id_sets, visibility, frames, kinds)
    size = scan_video_size(frames.filter(pl.col("key") == key), frames_config, image_rotation)
    cache: OrderedDict[int, np.ndarray] = OrderedDict()
    black = np.zeros((size[1], size[0], 3), dtype=np.uint8)

    def frame(index: int) -> np.ndarray:
        if index == BLACK_FRAME:
            return black
        if index in cache:
            cache.move_to_end(index)
            return cache[index]
        if frame_cache is not None:
            shared = frame_cache.get(entry_key(image_identity, index, size, image_rotation))
            if shared is not None:
                return shared
        try:
            image = video_frame(load_frame(key, load_image, index), size, image_rotation)
        except ValueError as exc:
            raise ScanError(key, f"frame {index}", str(exc)) from None
        cache[index] = image
        if len(cache) > _CACHED_FRAMES:
            cache.popitem(last=False)
        return image

    written: set[str] = set()
    for row in table.iter_rows(named=True):
        if row["path"] in written:
            continue
        written.add(row["path"])
        write_video(
            output_root,
            row["path"],
            (frame(i) for i in row["frame_indices"]),
            BUDGET_VIDEO_FPS,
            size,
            storage_options,
        )
    return table
