from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import schemas
from pipeline.config import Config, FramesConfig
from pipeline.frames.budgets import (
    all_frame_fps,
    all_frame_indices,
    budget_positions,
    mark_all_frame,
    output_size,
    sample_frames,
    scale_intrinsics,
)


def _frames_table(key: str, timestamps: np.ndarray, valid: np.ndarray) -> pl.DataFrame:
    rows = []
    for i, (t, ok) in enumerate(zip(timestamps, valid)):
        pose = np.eye(4) if ok else np.full((4, 4), np.nan)
        rows.append(
            {
                "key": key,
                "frame_index": i,
                "timestamp": float(t),
                "pose": pose.ravel().tolist(),
                "intrinsics": [500.0, 0, 320, 0, 500, 240, 0, 0, 1],
                "width": 640,
                "height": 480,
                "valid": bool(ok),
                "in_all_frame": False,
            }
        )
    return schemas.from_rows("frames", rows)


def test_30fps_stream_keeps_every_third_frame():
    ts = np.arange(300) / 30.0
    idx = all_frame_indices(ts, np.ones(300, bool), 10.0)
    assert idx.tolist() == list(range(0, 300, 3))


def test_slower_stream_keeps_every_valid_frame():
    ts = np.arange(50) / 4.0
    valid = np.ones(50, bool)
    valid[[3, 7]] = False
    idx = all_frame_indices(ts, valid, 10.0)
    assert idx.tolist() == [i for i in range(50) if i not in (3, 7)]


def test_invalid_frames_leave_gaps_and_are_never_kept():
    ts = np.arange(90) / 30.0
    valid = np.ones(90, bool)
    valid[30:45] = False
    idx = all_frame_indices(ts, valid, 10.0)
    assert not set(idx.tolist()) & set(range(30, 45))
    assert valid[idx].all()
    # tick 1.0 s (frame 30 invalid) takes frame 29, 1/30 s away; ticks inside the gap take nothing
    assert set(idx.tolist()) == set(range(0, 30, 3)) | {29} | set(range(45, 90, 3))


def test_no_valid_frame_gives_empty_sequence():
    assert all_frame_indices(np.arange(5.0), np.zeros(5, bool), 10.0).size == 0
    assert all(v.size == 0 for v in budget_positions(0, FramesConfig().budgets).values())


def test_3rscan_uses_its_own_rate():
    fc = FramesConfig()
    assert all_frame_fps("3rscan", fc) == 4.0
    assert all_frame_fps("scannet", fc) == 10.0


def test_budgets_match_spec_formula_for_a_long_sequence():
    pos = budget_positions(1000, FramesConfig().budgets)
    idx64 = np.linspace(0, 999, 64, dtype=int)
    idx32 = idx64[np.linspace(0, 63, 32, dtype=int)]
    idx16 = idx32[np.linspace(0, 31, 16, dtype=int)]
    assert np.array_equal(pos[64], idx64)
    assert np.array_equal(pos[32], idx32)
    assert np.array_equal(pos[16], idx16)


@settings(max_examples=40, deadline=None)
@given(
    n_source=st.integers(min_value=1, max_value=400),
    source_fps=st.sampled_from([1.0, 4.0, 6.0, 10.0, 15.0, 30.0, 60.0]),
    invalid_rate=st.floats(min_value=0.0, max_value=0.5),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_nested_budgets_property(n_source, source_fps, invalid_rate, seed):
    rng = np.random.default_rng(seed)
    ts = np.arange(n_source) / source_fps
    valid = rng.random(n_source) >= invalid_rate
    frames = mark_all_frame(_frames_table("synthetic/synth0000_00", ts, valid), 10.0)
    samples = sample_frames(frames, Config())
    all_rows = samples.filter(pl.col("budget") == "all").sort("rank")
    all_idx = all_rows["frame_index"].to_numpy()
    n_all = len(all_idx)
    assert n_all == int(frames["in_all_frame"].sum())
    assert valid[all_idx].all()
    ts_of = dict(zip(all_idx.tolist(), all_rows["timestamp"].to_list()))
    expected = {}
    if n_all:
        expected[64] = np.linspace(0, n_all - 1, 64, dtype=int)
        expected[32] = expected[64][np.linspace(0, 63, 32, dtype=int)]
        expected[16] = expected[32][np.linspace(0, 31, 16, dtype=int)]
    sets = {"all": set(all_idx.tolist())}
    for b in (64, 32, 16):
        rows = samples.filter(pl.col("budget") == str(b)).sort("rank")
        if n_all == 0:
            assert rows.height == 0
            sets[str(b)] = set()
            continue
        assert rows["rank"].to_list() == list(range(b))
        assert np.array_equal(rows["frame_index"].to_numpy(), all_idx[expected[b]])
        for fi, t in zip(rows["frame_index"].to_list(), rows["timestamp"].to_list()):
            assert ts_of[fi] == t
        sets[str(b)] = set(rows["frame_index"].to_list())
    assert sets["16"] <= sets["32"] <= sets["64"] <= sets["all"]


def test_short_sequence_repeats_frames_like_numpy():
    ts = np.arange(10) / 10.0
    frames = mark_all_frame(_frames_table("scannet/scene0000_00", ts, np.ones(10, bool)), 10.0)
    samples = sample_frames(frames, FramesConfig())
    b64 = samples.filter(pl.col("budget") == "64")
    assert b64.height == 64
    assert b64["frame_index"].to_list() == np.linspace(0, 9, 64, dtype=int).tolist()


def test_output_size_follows_orientation_and_intrinsics_scale():
    fc = FramesConfig()
    assert output_size(1296, 968, fc) == (640, 480)
    assert output_size(968, 1296, fc) == (480, 640)
    # Pixel centres at integer coordinates: the image centre of a 1296x968 frame is (647.5, 483.5) and stays
    # the image centre, (319.5, 239.5), of its 640x480 resize, as cv2.resize moves pixels.
    K = np.array([[1170.0, 0, 647.5], [0, 1170, 483.5], [0, 0, 1]])
    K2 = scale_intrinsics(K, (1296, 968), (640, 480))
    assert np.isclose(K2[0, 2], 319.5) and np.isclose(K2[1, 2], 239.5)
    assert np.isclose(K2[0, 0], 1170.0 * 640 / 1296) and np.isclose(K2[1, 1], 1170.0 * 480 / 968)
