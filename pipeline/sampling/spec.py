"""Frame samplers as the harnesses implement them, named by a one-line spec.

A model does not see "the 32-frame video": its harness samples frames itself
from whatever video it is handed. Each spec here reproduces one harness's own
index formula over the all-frame video (``n`` frames at the scan's all-frame
rate, ``scans.fps``: 10 fps, 3RScan 4 fps), so that answers can be computed
for exactly the frames that harness feeds its model:

- ``uniform:N`` — lmms-eval ``lmms_eval/models/llava_onevision.py`` and
  ``lmms_eval/models/llava_vid.py``, ``load_video``:
  ``np.linspace(0, total_frame_num - 1, max_frames_num, dtype=int)`` (below
  ``N`` frames positions repeat, as decord's ``get_batch`` then returns them).
  API models given N frames sample the same way.
- ``fps:F[,min=A,max=B]`` — qwen-vl-utils
  ``qwen-vl-utils/src/qwen_vl_utils/vision_process.py``, ``smart_nframes``
  (defaults ``FPS = 2``, ``FRAME_FACTOR = 2``, ``FPS_MIN_FRAMES = 4``,
  ``FPS_MAX_FRAMES = 768``) and the readers' ``torch.linspace(0,
  total_frames - 1, nframes).round().long()``. ``nframes:N`` is the same
  reader with ``nframes`` given. torch computes that linspace in float32 with
  ATen's CPU kernel (``aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp``,
  ``linspace_kernel``: ``start + step * i`` below the halfway index, ``end -
  step * (steps - i - 1)`` from it) and rounds half to even; ``_torch_linspace_round``
  reproduces it bit for bit with numpy float32. The all-frame video declares its
  native rate in its header (``cv2.VideoWriter`` fps = ``scans.fps``), which is
  what decord's ``get_avg_fps`` reads, so the fps rule sees the real timeline.
  qwen-vl-utils refuses a video giving fewer than 2 frames; so do we.
- ``segments:N`` — InternVL's ``get_index(bound=None, fps, max_frame=len(vr) -
  1, first_idx=0, num_segments=N)`` (InternVL model cards' ``load_video``,
  lmms-eval ``lmms_eval/models/internvl2.py``): segment midpoints
  ``int(start + seg / 2 + np.round(seg * i))`` with ``seg = max_frame / N``.
- ``indices:FILE`` — a JSON object mapping a scan (``dataset/scene_id`` or its
  scene id) to the positions a harness logged (0-based indices into the
  all-frame video).
- ``16``, ``32``, ``64``, ``all`` (any budget of the run's ``pipeline.frames.budgets.frame_budgets(config)``,
  also written ``budget:16``) — the release's own nested budgets
  (``pipeline.frames.budgets.budget_positions``), nested from the run's largest budget exactly as the build
  nests them: with budgets 128, 64, 32, 16, ``budget:32`` is 32 of the 64 of the 128, not 32 of a default 64.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.errors import ConfigError

QWEN_FPS = 2.0
QWEN_FRAME_FACTOR = 2
QWEN_FPS_MIN_FRAMES = 4
QWEN_FPS_MAX_FRAMES = 768


class SamplerRefuses(ValueError):
    """The harness itself would refuse this video (qwen-vl-utils below 2 frames)."""


@dataclass(frozen=True)
class Sampler:
    """One parsed spec; ``label`` names its budget column value, video folder and export config."""

    kind: str  # uniform | fps | nframes | segments | indices | budget
    spec: str
    count: int | None = None
    fps: float | None = None
    min_frames: int | None = None
    max_frames: int | None = None
    indices_file: str | None = None
    nested: tuple[int, ...] = ()  # budget: the run's numeric budgets, the chain ``count`` nests in
    _indices: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def label(self) -> str:
        if self.kind == "budget":
            return str(self.count) if self.count is not None else "all"
        if self.kind in ("uniform", "segments", "nframes"):
            return f"{self.kind}_{self.count}"
        if self.kind == "fps":
            text = f"fps_{_number_label(self.fps)}"
            if self.min_frames is not None:
                text += f"_min_{self.min_frames}"
            if self.max_frames is not None:
                text += f"_max_{self.max_frames}"
            return text
        return "indices_" + re.sub(r"[^A-Za-z0-9]+", "_", Path(self.indices_file or "").stem).strip("_")

    @property
    def is_budget(self) -> bool:
        return self.kind == "budget"

    def positions(self, n: int, video_fps: float, key: str = "", scene_id: str = "") -> np.ndarray:
        """Positions (0-based, into the all-frame video of ``n`` frames) the harness takes, in playback order."""
        n = int(n)
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        if self.kind == "uniform":
            return np.linspace(0, n - 1, self.count, dtype=int).astype(np.int64)
        if self.kind == "segments":
            return internvl_segments(n, self.count, video_fps)
        if self.kind in ("fps", "nframes"):
            nframes = qwen_nframes(self._ele(), n, video_fps)
            return _torch_linspace_round(0, n - 1, nframes)
        if self.kind == "budget":
            if self.count is None:
                return np.arange(n, dtype=np.int64)
            from pipeline.frames.budgets import budget_positions

            return budget_positions(n, self.nested)[self.count]
        return self._logged(n, key, scene_id)

    def _ele(self) -> dict:
        if self.kind == "nframes":
            return {"nframes": self.count}
        ele: dict = {"fps": self.fps}
        if self.min_frames is not None:
            ele["min_frames"] = self.min_frames
        if self.max_frames is not None:
            ele["max_frames"] = self.max_frames
        return ele

    def _logged(self, n: int, key: str, scene_id: str) -> np.ndarray:
        table = self._indices
        found = table.get(key, table.get(scene_id))
        if found is None:
            raise SamplerRefuses(f"{self.indices_file}: no indices for {key}")
        positions = np.asarray(found, dtype=np.int64).reshape(-1)
        bad = positions[(positions < 0) | (positions >= n)]
        if bad.size:
            raise ConfigError(
                f"{self.indices_file}: {key}: index {int(bad[0])} is outside its all-frame video of {n} frames"
            )
        return positions


def _number_label(value: float) -> str:
    text = f"{value:g}"
    return text.replace(".", "p").replace("-", "m")


def qwen_nframes(ele: dict, total_frames: int, video_fps: float) -> int:
    """qwen-vl-utils ``smart_nframes`` (vision_process.py), rule for rule."""
    if "nframes" in ele:
        nframes = _round_by(ele["nframes"], QWEN_FRAME_FACTOR)
    else:
        fps = ele.get("fps", QWEN_FPS)
        min_frames = _ceil_by(ele.get("min_frames", QWEN_FPS_MIN_FRAMES), QWEN_FRAME_FACTOR)
        max_frames = _floor_by(ele.get("max_frames", min(QWEN_FPS_MAX_FRAMES, total_frames)), QWEN_FRAME_FACTOR)
        nframes = total_frames / video_fps * fps
        nframes = min(min(max(nframes, min_frames), max_frames), total_frames)
        nframes = _floor_by(nframes, QWEN_FRAME_FACTOR)
    if not (QWEN_FRAME_FACTOR <= nframes <= total_frames):
        raise SamplerRefuses(
            f"qwen-vl-utils refuses this video: nframes {nframes} is outside [{QWEN_FRAME_FACTOR}, {total_frames}]"
        )
    return int(nframes)


def _round_by(number, factor: int) -> int:
    return round(number / factor) * factor


def _ceil_by(number, factor: int) -> int:
    return math.ceil(number / factor) * factor


def _floor_by(number, factor: int) -> int:
    return math.floor(number / factor) * factor


def _torch_linspace_round(start: int, end: int, steps: int) -> np.ndarray:
    """``torch.linspace(start, end, steps).round().long()`` on CPU (float32, ATen ``linspace_kernel``)."""
    if steps == 1:
        return np.array([start], dtype=np.int64)  # torch fills with start
    f32 = np.float32
    s, e = f32(start), f32(end)
    step = f32(e - s) / f32(steps - 1)
    i = np.arange(steps, dtype=np.int64)
    halfway = steps // 2
    low = s + step * i[:halfway].astype(f32)
    high = e - step * (steps - i[halfway:] - 1).astype(f32)
    values = np.concatenate([low, high]).astype(f32)
    return np.round(values).astype(np.int64)  # round half to even, as torch.round


def internvl_segments(n: int, num_segments: int, fps: float) -> np.ndarray:
    """InternVL ``get_index(None, fps, max_frame=n - 1, first_idx=0, num_segments)``."""
    max_frame = n - 1
    start, end = -100000, 100000
    start_idx = max(0, round(start * fps))
    end_idx = min(round(end * fps), max_frame)
    seg_size = float(end_idx - start_idx) / num_segments
    # int(start_idx + seg_size / 2 + np.round(seg_size * idx)) per idx, elementwise in float64 as upstream.
    values = start_idx + (seg_size / 2) + np.round(seg_size * np.arange(num_segments, dtype=np.float64))
    return np.trunc(values).astype(np.int64)


_SPEC = re.compile(r"^(?P<kind>[a-z]+):(?P<rest>.+)$")


def parse_sampler(spec: str, budgets: tuple[str, ...]) -> Sampler:
    """A ``Sampler`` from its spec; a bad spec is one ``ConfigError`` line saying what is accepted.

    ``budgets`` are the run's (``frame_budgets(config)``): which budget names are accepted and the chain a
    budget sampler nests in, so ``budget:32`` takes the very frames the release's 32-frame budget holds.
    """
    text = str(spec).strip()
    budgets = tuple(str(b) for b in budgets)
    bare = text.removeprefix("budget:")
    if bare in budgets:
        nested = tuple(sorted((int(b) for b in budgets if b.isdigit()), reverse=True))
        return Sampler("budget", text, count=None if bare == "all" else int(bare), nested=nested)
    match = _SPEC.match(text)
    if not match:
        raise ConfigError(_bad(text, "unknown sampler", budgets))
    kind, rest = match["kind"], match["rest"]
    if kind in ("uniform", "segments", "nframes"):
        return Sampler(kind, text, count=_positive_int(text, rest, budgets))
    if kind == "fps":
        head, *options = rest.split(",")
        fps = _positive_float(text, head, budgets)
        extra: dict[str, int] = {}
        for option in options:
            name, _, value = option.partition("=")
            if name not in ("min", "max") or name in extra:
                raise ConfigError(_bad(text, f"unknown fps option {option!r} (min=, max=)", budgets))
            extra[name] = _positive_int(text, value, budgets)
        return Sampler("fps", text, fps=fps, min_frames=extra.get("min"), max_frames=extra.get("max"))
    if kind == "indices":
        path = Path(rest)
        try:
            table = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"{path}: indices file not found") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: not a JSON file of frame indices ({str(exc).splitlines()[0]})") from None
        if not isinstance(table, dict) or not all(
            isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)
            for v in table.values()
        ):
            raise ConfigError(f"{path}: expected a JSON object mapping each scan to a list of integer frame indices")
        return Sampler("indices", text, indices_file=str(path), _indices=table)
    raise ConfigError(_bad(text, f"unknown sampler kind {kind!r}", budgets))


def _positive_int(spec: str, text: str, budgets: tuple[str, ...]) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(_bad(spec, f"{text!r} is not a whole number", budgets)) from None
    if value <= 0:
        raise ConfigError(_bad(spec, f"{value} must be positive", budgets))
    return value


def _positive_float(spec: str, text: str, budgets: tuple[str, ...]) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(_bad(spec, f"{text!r} is not a number", budgets)) from None
    if not value > 0 or not math.isfinite(value):
        raise ConfigError(_bad(spec, f"{value} must be a positive number", budgets))
    return value


def _bad(spec: str, problem: str, budgets: tuple[str, ...]) -> str:
    budgets = ", ".join(budgets)
    return (
        f"sampler {spec!r}: {problem}; use uniform:N, fps:F[,min=A,max=B], nframes:N, segments:N, indices:FILE "
        f"or a budget ({budgets})"
    )
