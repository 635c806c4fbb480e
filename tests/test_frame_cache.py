"""Frames the scan videos decoded serve the dummy videos: same bytes, no second decode, never a stale frame."""

from __future__ import annotations

import hashlib
import os

import cv2
import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.frames.budgets import mark_all_frame, sample_frames
from pipeline.frames.dummy_videos import make_dummy_videos
from pipeline.frames.frame_cache import FrameCache, entry_key, local_image_identity
from pipeline.frames.video import write_scan_videos
from pipeline.scene.images import FrameImages

KEY = "synthetic/synth0000_00"


def scan(tmp_path, n=40):
    """A scan folder with ``n`` JPEG frames and its frames table (all frames in the all-frame sequence)."""
    folder = tmp_path / "scan"
    (folder / "color").mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        picture = cv2.GaussianBlur(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8), (9, 9), 0)
        cv2.imwrite(str(folder / "color" / f"{i}.jpg"), picture)
        rows.append({"key": KEY, "frame_index": i, "timestamp": i / 10.0, "pose": np.eye(4).ravel().tolist(),
                     "intrinsics": [100.0, 0, 80, 0, 100, 60, 0, 0, 1], "width": 160, "height": 120,
                     "valid": True, "in_all_frame": False, "image_file": f"color/{i}.jpg", "image_member": -1})
    return folder, mark_all_frame(schemas.from_rows("frames", rows), 10.0)


def visibility(frames):
    rows = [{"key": KEY, "frame_index": f, "object_id": o, "visible_pixels": 10, "frame_fraction": 0.01,
             "bbox": [0, 0, 1, 1]} for f in frames["frame_index"].to_list() for o in (1, 2) if (f + o) % 3 == 0]
    return schemas.from_rows("visibility", rows)


def digests(root):
    return {str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.mp4"))}


def build(folder, frames, out, cache):
    from pipeline.config import FramesConfig

    small = FramesConfig(width=160, height=120)
    identity = local_image_identity(KEY, str(folder), frames) if cache is not None else None
    decoded = []
    with FrameImages(KEY, str(folder), frames) as images:
        def load(index):
            decoded.append(index)
            return images(index)

        write_scan_videos(KEY, sample_frames(frames, small), frames, load, str(out), fps=10.0, frames_config=small,
                          image_identity=identity, frame_cache=cache)
        after_scan_videos = len(decoded)
        make_dummy_videos(KEY, [[1], [2], [1, 2]], visibility(frames), frames, load, str(out), frames_config=small,
                          image_identity=identity, frame_cache=cache)
    return after_scan_videos, len(decoded) - after_scan_videos


def test_dummy_videos_take_the_scan_videos_frames_and_write_the_same_bytes(tmp_path):
    folder, frames = scan(tmp_path)
    cache = FrameCache()
    scan_decodes, dummy_decodes = build(folder, frames, tmp_path / "cached", cache)
    assert scan_decodes == 40 and dummy_decodes == 0 and cache.hits > 0
    _, plain_dummy_decodes = build(folder, frames, tmp_path / "plain", None)
    assert plain_dummy_decodes > 0
    cached, plain = digests(tmp_path / "cached"), digests(tmp_path / "plain")
    assert len(cached) > 6 and cached == plain


def test_a_changed_file_or_another_scan_is_never_served_from_the_cache(tmp_path):
    folder, frames = scan(tmp_path, n=4)
    identity = local_image_identity(KEY, str(folder), frames)
    cache = FrameCache()
    cache.start_scan(KEY)
    entry = entry_key(identity, 2, (160, 120), 0)
    kept = cache.put(KEY, entry, np.zeros((120, 160, 3), np.uint8))
    assert cache.get(entry) is kept and not kept.flags.writeable  # nobody can change what another step is served
    assert cache.get(entry_key(identity, 2, (160, 120), 90)) is None  # another rotation is another frame
    path = folder / "color" / "2.jpg"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert cache.get(entry_key(identity, 2, (160, 120), 0)) is None  # rewritten since: decoded again
    cache.start_scan("synthetic/other")
    assert cache.get(entry) is None
    assert local_image_identity(KEY, "s3://bucket/scan", frames)(2) is None  # only local files have an identity
    assert identity(99) is None  # no row, no identity


def test_a_long_sequence_keeps_a_uniform_subset_within_the_memory_cap():
    cache = FrameCache(max_bytes=10 * 1000)
    assert cache.keep_every(10, 1000) == 1 and cache.keep_every(25, 1000) == 3 and cache.keep_every(0, 1000) == 1
    cache.start_scan(KEY)
    for i in range(12):
        cache.put(KEY, ("f", i), np.zeros(1000, np.uint8))
    assert sum(cache.get(("f", i)) is not None for i in range(12)) == 10
