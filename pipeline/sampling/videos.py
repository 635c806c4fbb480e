"""Videos holding exactly a sampler's frames, cut from the release's all-frame video (no source images needed).

Each sampled video has one frame per sampled position, in playback order (a
repeated position repeats its frame, as the harness's ``get_batch`` returns
it), so a harness that takes every frame of it shows the model precisely what
the answers assume. Its header declares ``frames * all_frame_fps /
all_frame_frames`` (qwen-vl-utils' ``sample_fps``): the sampled video spans the
all-frame video's duration, so a model told the frame rate places the frames
on the real timeline, and Qwen's fps rule applied at the sampler's own rate
takes every frame again (LLaVA's ``uniform:N`` on N frames does too). Budget
presets keep the release's 1 fps. Frames are decoded once, forward only, and
re-encoded with the release's codec (one more lossy generation of the same
pixels).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.errors import ScanError
from pipeline.frames.budgets import ALL
from pipeline.frames.video import VideoFrameSource, video_output
from pipeline.frames.video_paths import budget_video_path


def write_sampled_videos(release_root: Path, out_root: Path, frame_samples: pl.DataFrame, all_samples: pl.DataFrame,
                         declared_fps: dict[str, float]) -> dict[str, str]:
    """Write ``videos/<label>_frame/<dataset>/<scene>.mp4`` under ``out_root`` per scan; returns key -> path."""
    written = {}
    for (key, label), part in sorted(frame_samples.group_by(["key", "budget"]), key=lambda kv: kv[0]):
        source_path = Path(release_root) / budget_video_path(ALL, key)
        if not source_path.exists():
            raise ScanError(key, str(source_path), "all-frame video missing: sampled videos are cut from it")
        order = all_samples.filter((pl.col("key") == key) & (pl.col("budget") == ALL)).sort("rank")
        position = {int(f): i for i, f in enumerate(order["frame_index"].to_list())}
        wanted = [position[int(f)] for f in part.sort("rank")["frame_index"].to_list()]
        counts: dict[int, int] = {}
        for p in wanted:
            counts[p] = counts.get(p, 0) + 1
        relative = budget_video_path(label, key)
        with VideoFrameSource(source_path) as source:
            size = (source.width, source.height)
            with video_output(str(out_root), relative, declared_fps.get(key, 1.0), size) as writer:
                # Samplers give playback order (decoded forward only); a logged index list may jump back.
                runs = [(p, counts[p]) for p in sorted(counts)] if wanted == sorted(wanted) else [(p, 1) for p in wanted]
                for p, times in runs:
                    try:
                        frame = source.read(p)
                    except IndexError as exc:
                        raise ScanError(key, str(source_path), str(exc)) from None
                    writer.write(frame, times)
        written[key] = relative
    return written
