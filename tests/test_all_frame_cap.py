"""``frames.max_all_frames`` (issue 27.5): a very long scan's all-frame sequence is thinned to a stated cap, so
50,000 source frames are not 50,000 ray casts unless the user asks (``max_all_frames: null``); ReVSI-length scans
(minutes at 10 fps) are kept whole, and what the cap did is in the scan's warnings and the manifest."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.config import Config, FramesConfig, load_config
from pipeline.errors import ConfigError
from pipeline.frames.budgets import all_frame_indices, capped_all_frame_indices, sample_frames
from pipeline.release.build import all_frame_cap
from pipeline.scene.parsed import Frame, ParsedScan
from pipeline.scene.tables import scene_tables


def test_a_sequence_within_the_cap_is_the_uncapped_one():
    ts = np.arange(3000) / 30.0  # 100 s at 30 fps: 1,000 frames at 10 fps
    valid = np.ones(ts.size, bool)
    kept, stride = capped_all_frame_indices(ts, valid, 10.0, 1000)
    assert stride == 1 and kept.tolist() == all_frame_indices(ts, valid, 10.0).tolist()
    kept, stride = capped_all_frame_indices(ts, valid, 10.0, None)
    assert stride == 1 and kept.size == 1000


def test_a_long_sequence_keeps_one_frame_in_the_smallest_stride_that_fits():
    ts = np.arange(50_000) / 10.0  # 50,000 frames at 10 fps: 83 minutes
    valid = np.ones(ts.size, bool)
    kept, stride = capped_all_frame_indices(ts, valid, 10.0, 6000)
    assert stride == 9 and kept.size <= 6000  # 50,000 / 8 = 6,250 would not fit
    assert kept.tolist() == list(range(0, 50_000, 9))  # a steady stream: every 9th frame, over the whole scan
    assert kept[-1] >= 50_000 - 9
    # A stream faster than fps with invalid stretches: the cap holds and only valid frames are kept.
    ts = np.arange(120_000) / 30.0
    valid = np.ones(ts.size, bool)
    valid[10_000:40_000] = False
    kept, stride = capped_all_frame_indices(ts, valid, 10.0, 5000)
    uncapped = all_frame_indices(ts, valid, 10.0).size
    assert uncapped > 5000 and stride == -(-uncapped // 5000) and kept.size <= 5000 and valid[kept].all()


def test_the_cap_is_null_or_at_least_the_largest_budget():
    assert FramesConfig().max_all_frames == 6000
    assert FramesConfig(max_all_frames=None).max_all_frames is None
    assert FramesConfig(max_all_frames=64).max_all_frames == 64
    for bad in (63, 0, -5, 12.5, True, "6000"):
        with pytest.raises(ConfigError, match="frames.max_all_frames must be null or a whole number"):
            FramesConfig(max_all_frames=bad)
    with pytest.raises(ConfigError, match=r">= the largest budget \(128\)"):
        FramesConfig(budgets=(128, 64), max_all_frames=100)


def test_the_cap_is_read_from_the_config_file(tmp_path):
    file = tmp_path / "scan2qa.yaml"
    file.write_text("frames:\n  max_all_frames: null\n")
    assert load_config(file).frames.max_all_frames is None
    file.write_text("frames:\n  max_all_frames: 2000\n")
    assert load_config(file).frames.max_all_frames == 2000
    file.write_text("frames:\n  max_all_frames: 10\n")
    with pytest.raises(ConfigError, match="max_all_frames"):
        load_config(file)


def _long_scan(n_frames: int) -> ParsedScan:
    frames = [Frame(i, i / 10.0, np.eye(4), np.array([[500.0, 0, 320], [0, 500, 240], [0, 0, 1]]), 640, 480)
              for i in range(n_frames)]
    return ParsedScan(dataset="synthetic", scene_id="synth0000_00", source_uri="/nowhere", mesh=None, objects=[],
                      frames=frames)


def test_scene_tables_thin_a_long_scan_record_its_rate_and_say_so():
    config = Config(frames=FramesConfig(max_all_frames=1000))
    tables = scene_tables(_long_scan(4500), config)
    scan = tables["scans"].row(0, named=True)
    assert (scan["source_frame_count"], scan["frame_count"], scan["fps"]) == (4500, 900, 2.0)
    kept = tables["frames"].filter(pl.col("in_all_frame"))["frame_index"].to_list()
    assert kept == list(range(0, 4500, 5))
    [warning] = [w for w in scan["warnings"] if "max_all_frames" in w]
    assert warning == ("all-frame sequence capped: 4500 frames at 10 fps exceed frames.max_all_frames 1000: kept 1 "
                       "frame in 5 (2 fps, 900 frames); frames.max_all_frames: null keeps every frame")
    # The budgets are taken from the thinned sequence: 64 of its 900 frames, nested as ever.
    samples = sample_frames(tables["frames"], config)
    assert samples.filter(pl.col("budget") == "all").height == 900
    assert set(samples.filter(pl.col("budget") == "64")["frame_index"].to_list()) <= set(kept)
    # The manifest names the cap and the scan it thinned.
    assert all_frame_cap(tables["scans"], config) == {
        "max_all_frames": 1000, "capped_scans": [{"key": "synthetic/synth0000_00", "frames": 900, "fps": 2.0, "stride": 5}]}


def test_a_scan_within_the_cap_or_with_no_cap_is_untouched():
    for config in (Config(), Config(frames=FramesConfig(max_all_frames=None))):
        tables = scene_tables(_long_scan(4500), config)
        scan = tables["scans"].row(0, named=True)
        assert (scan["frame_count"], scan["fps"]) == (4500, 10.0)
        assert not [w for w in scan["warnings"] if "max_all_frames" in w]
        assert all_frame_cap(tables["scans"], config)["capped_scans"] == []
