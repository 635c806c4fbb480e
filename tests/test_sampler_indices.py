"""Each sampler's frame indices equal the harness's own formula, re-implemented here as written upstream.

lmms-eval ``llava_onevision.py`` / ``llava_vid.py`` ``load_video`` (np.linspace,
dtype=int), qwen-vl-utils ``smart_nframes`` plus ``torch.linspace(...).round()``
(ATen's CPU ``linspace_kernel`` in float32, scalar for scalar; compared with
torch itself when it is installed), InternVL ``get_index``. Video lengths 1-2,000
and several frame rates.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pipeline.errors import ConfigError
from pipeline.config import Config
from pipeline.frames.budgets import frame_budgets
from pipeline.sampling.spec import SamplerRefuses, parse_sampler

BUDGETS = frame_budgets(Config())

FULL = range(1, 2001)
QUICK = sorted({*range(1, 257), *range(257, 2001, 29), 2000})  # the default run; the full sweep is marked slow
LENGTHS = [pytest.param(QUICK, id="quick"), pytest.param(FULL, id="1-2000", marks=pytest.mark.slow)]
FPS_VALUES = (10.0, 4.0, 29.97)


# --- lmms-eval: llava_onevision.py / llava_vid.py load_video -----------------------------------------------
def lmms_eval_load_video_indices(total_frame_num, max_frames_num):
    uniform_sampled_frames = np.linspace(0, total_frame_num - 1, max_frames_num, dtype=int)
    frame_idx = uniform_sampled_frames.tolist()
    return frame_idx


# --- qwen-vl-utils: vision_process.py smart_nframes + the readers' torch.linspace(...).round().long() -------
FRAME_FACTOR, FPS, FPS_MIN_FRAMES, FPS_MAX_FRAMES = 2, 2.0, 4, 768


def round_by_factor(number, factor):
    return round(number / factor) * factor


def ceil_by_factor(number, factor):
    return math.ceil(number / factor) * factor


def floor_by_factor(number, factor):
    return math.floor(number / factor) * factor


def smart_nframes(ele, total_frames, video_fps):
    assert not ("fps" in ele and "nframes" in ele), "Only accept either `fps` or `nframes`"
    if "nframes" in ele:
        nframes = round_by_factor(ele["nframes"], FRAME_FACTOR)
    else:
        fps = ele.get("fps", FPS)
        min_frames = ceil_by_factor(ele.get("min_frames", FPS_MIN_FRAMES), FRAME_FACTOR)
        max_frames = floor_by_factor(ele.get("max_frames", min(FPS_MAX_FRAMES, total_frames)), FRAME_FACTOR)
        nframes = total_frames / video_fps * fps
        nframes = min(min(max(nframes, min_frames), max_frames), total_frames)
        nframes = floor_by_factor(nframes, FRAME_FACTOR)
    if not (FRAME_FACTOR <= nframes and nframes <= total_frames):
        raise ValueError(f"nframes should in interval [{FRAME_FACTOR}, {total_frames}], but got {nframes}.")
    return nframes


def aten_linspace_float32(start, end, steps):
    """aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp linspace_kernel with scalar_t = float (IEEE float32 ops)."""
    f = np.float32
    if steps == 1:
        return np.array([start], dtype=f)
    start, end = f(start), f(end)
    step = f(f(end) - f(start)) / f(steps - 1)
    halfway = steps // 2
    idx = np.arange(steps)
    below = start + step * idx[:halfway].astype(f)  # start + step * (idx++)
    above = end - step * (steps - idx[halfway:] - 1).astype(f)  # end - step * (steps - (idx++) - 1)
    return np.concatenate([below, above])


def qwen_indices(ele, total_frames, video_fps):
    nframes = smart_nframes(ele, total_frames=total_frames, video_fps=video_fps)
    try:
        import torch
    except ImportError:
        return np.round(aten_linspace_float32(0, total_frames - 1, nframes)).astype(np.int64).tolist()  # half to even
    return torch.linspace(0, total_frames - 1, nframes).round().long().tolist()


# --- InternVL: get_index / load_video ----------------------------------------------------------------------
def get_index(bound, fps, max_frame, first_idx=0, num_segments=32):
    if bound:
        start, end = bound[0], bound[1]
    else:
        start, end = -100000, 100000
    start_idx = max(first_idx, round(start * fps))
    end_idx = min(round(end * fps), max_frame)
    seg_size = float(end_idx - start_idx) / num_segments
    frame_indices = np.array([int(start_idx + (seg_size / 2) + np.round(seg_size * idx)) for idx in range(num_segments)])
    return frame_indices


@pytest.mark.parametrize("count", [1, 8, 16, 24, 32, 64, 128])
@pytest.mark.parametrize("lengths", LENGTHS)
def test_uniform_equals_lmms_eval_load_video(count, lengths):
    sampler = parse_sampler(f"uniform:{count}", BUDGETS)
    for n in lengths:
        assert sampler.positions(n, 10.0).tolist() == lmms_eval_load_video_indices(n, count), n


@pytest.mark.parametrize("spec,ele", [
    ("fps:2", {"fps": 2.0}),
    ("fps:1", {"fps": 1.0}),
    ("fps:0.5", {"fps": 0.5}),
    ("fps:2,max=32", {"fps": 2.0, "max_frames": 32}),
    ("fps:1,min=16,max=64", {"fps": 1.0, "min_frames": 16, "max_frames": 64}),
    ("nframes:16", {"nframes": 16}),
    ("nframes:33", {"nframes": 33}),
])
@pytest.mark.parametrize("lengths", LENGTHS)
def test_fps_equals_qwen_vl_utils(spec, ele, lengths):
    sampler = parse_sampler(spec, BUDGETS)
    for fps in FPS_VALUES:
        for n in lengths:
            try:
                expected = qwen_indices(ele, n, fps)
            except ValueError:
                with pytest.raises(SamplerRefuses):
                    sampler.positions(n, fps)
                continue
            assert sampler.positions(n, fps).tolist() == expected, (fps, n)


@pytest.mark.parametrize("count", [1, 8, 16, 32, 64])
@pytest.mark.parametrize("lengths", LENGTHS)
def test_segments_equal_internvl_get_index(count, lengths):
    sampler = parse_sampler(f"segments:{count}", BUDGETS)
    for fps in FPS_VALUES:
        for n in lengths:
            expected = get_index(None, fps, n - 1, first_idx=0, num_segments=count).tolist()
            assert sampler.positions(n, fps).tolist() == expected, (fps, n)


def test_budget_presets_equal_the_nested_budgets():
    from pipeline.frames.budgets import budget_positions

    for n in (1, 5, 63, 64, 65, 300, 1999):
        nested = budget_positions(n, (64, 32, 16))
        for b in (16, 32, 64):
            assert parse_sampler(str(b), BUDGETS).positions(n, 10.0).tolist() == nested[b].tolist()
            assert parse_sampler(f"budget:{b}", BUDGETS).label == str(b)
        assert parse_sampler("all", BUDGETS).positions(n, 10.0).tolist() == list(range(n))


def test_indices_file(tmp_path):
    path = tmp_path / "logged.json"
    path.write_text(json.dumps({"synthetic/s0": [0, 3, 3, 9], "s1": [1]}))
    sampler = parse_sampler(f"indices:{path}", BUDGETS)
    assert sampler.label == "indices_logged"
    assert sampler.positions(10, 10.0, "synthetic/s0", "s0").tolist() == [0, 3, 3, 9]
    assert sampler.positions(10, 10.0, "synthetic/s1", "s1").tolist() == [1]
    with pytest.raises(ConfigError, match="index 9 is outside its all-frame video of 5 frames"):
        sampler.positions(5, 10.0, "synthetic/s0", "s0")
    with pytest.raises(SamplerRefuses, match="no indices"):
        sampler.positions(5, 10.0, "synthetic/s2", "s2")


@pytest.mark.parametrize("spec,label", [
    ("uniform:8", "uniform_8"), ("fps:1", "fps_1"), ("fps:2,max=32", "fps_2_max_32"), ("fps:0.5", "fps_0p5"),
    ("segments:16", "segments_16"), ("nframes:16", "nframes_16"), ("64", "64"), ("all", "all"),
])
def test_labels(spec, label):
    assert parse_sampler(spec, BUDGETS).label == label


@pytest.mark.parametrize("spec", ["uniform", "uniform:0", "uniform:x", "fps:0", "fps:2,top=3", "warp:3", "17"])
def test_bad_specs_are_one_line(spec):
    with pytest.raises(ConfigError, match="sampler"):
        parse_sampler(spec, BUDGETS)
