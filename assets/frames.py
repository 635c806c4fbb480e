"""Frame budgets and videos per scan: ``frame_samples`` and the budget/all-frame mp4 files.

``frame_samples`` is a table (the nested budgets of ``frame_budgets``, 16/32/64 by
default, over the all-frame sequence the scene step marked in ``frames.in_all_frame``);
``scan_videos`` writes ``videos/<budget>_frame/<dataset>/<scene_id>.mp4`` under the output root
and records paths and frame counts as metadata (videos are files, not a table).
Images are read by the paths the ``frames`` table records (``partition_images``):
the scan is not parsed again. The frames decoded for the videos stay in this
process for the scan's ``dummy_videos`` (``pipeline.frames.frame_cache``).
"""

import dagster as dg
import polars as pl

from assets.catalog import file_asset, path_value, table_asset
from assets.partitions import scan_partitions
from assets.progress import FrameCounter, counting_loader
from assets.scene import partition_images, recorded_scan, scan_location
from assets.scan_batches import PerScanTable, ScanTables, per_scan, scan_backfill_policy
from assets.step_config import step_config
from pipeline.config import Config
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


def partition_image_identity(context: dg.AssetExecutionContext, config: Config, scan_frames: pl.DataFrame, key: str):
    """What each of scan ``key``'s images is on disk (``pipeline.frames.frame_cache``); None off a local disk."""
    from pipeline.frames.frame_cache import local_image_identity
    from pipeline.storage import is_local, reaching, upath

    if not is_local(upath(config.scans_root, config.storage_options)):
        return None
    with reaching(config.scans_root):
        uri = scan_location(context, config, key)
    return local_image_identity(key, uri, scan_frames)


@dg.asset(
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="frames",
    ins={"frames": dg.AssetIn("frames")},
    description="source frames of the nested frame budgets (frames.budgets, SPEC §2) and of the all-frame sequence",
    **table_asset("frame_samples", __name__),
)
def frame_samples(
    context: dg.AssetExecutionContext, storage: StorageResource, run_config: RunConfigResource, frames: pl.DataFrame
) -> PerScanTable:
    from pipeline.frames.budgets import sample_frames

    config = step_config(context, storage, run_config, __name__)
    return per_scan(context, "frame_samples", lambda key, frames: sample_frames(frames.filter(pl.col("key") == key), config),
                    frames=frames)


@dg.asset(
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="frames",
    ins={name: dg.AssetIn(name) for name in ("scans", "frames", "frame_samples")},
    description="one mp4 per budget (1 frame per sample) and the all-frame mp4, under <output_root>/videos/",
    **file_asset(__name__, {"opencv", "mp4"}),
)
def scan_videos(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    run_config: RunConfigResource,
    scans: pl.DataFrame,
    frames: pl.DataFrame,
    frame_samples: pl.DataFrame,
) -> dg.MaterializeResult:
    config = step_config(context, storage, run_config, __name__)
    videos = per_scan(
        context, "scan_videos", lambda key, **tables: videos_of(context, config, key, **tables),
        scans=scans, frames=frames, frame_samples=frame_samples,
    )
    if isinstance(videos, ScanTables):  # a range of scans: the files of each are listed in the step's log
        return dg.MaterializeResult(metadata={"scans": len(videos), "videos": sum(v["videos"] for v in videos.values())})
    return dg.MaterializeResult(metadata=videos)


def videos_of(
    context: dg.AssetExecutionContext, config: Config, key: str,
    scans: pl.DataFrame, frames: pl.DataFrame, frame_samples: pl.DataFrame,
) -> dict:
    """Write scan ``key``'s videos; what its materialization records."""
    from pipeline.frames.budgets import all_frame_fps
    from pipeline.frames.frame_cache import SHARED
    from pipeline.frames.video import write_scan_videos

    scan_frames = frames.filter(pl.col("key") == key)
    if not scan_frames["in_all_frame"].fill_null(False).any():
        return {"videos": 0, "reason": "scan has no frames"}
    scan_row = recorded_scan(context, config, scans, key)
    rotation = scan_row["image_rotation"]
    # The rate the scene step resampled at: frames.fps, lower for a scan thinned to frames.max_all_frames.
    fps = float(scan_row.get("fps") or all_frame_fps(key.split("/", 1)[0], config.frames))
    all_frames = int(scan_frames["in_all_frame"].fill_null(False).sum())
    frames_done = FrameCounter(context, "scan_videos", all_frames, scene=key)
    with partition_images(context, config, scans, scan_frames, key) as load_image:
        result = write_scan_videos(
            key,
            frame_samples,
            scan_frames,
            counting_loader(frames_done, load_image),
            config.output_root,
            fps=fps,
            frames_config=config.frames,
            image_rotation=rotation,
            storage_options=config.storage_options,
            image_identity=partition_image_identity(context, config, scan_frames, key),
            frame_cache=SHARED,  # the scan's dummy videos, a few steps on, take the frames from here
        )
    root = config.output_root.rstrip("/")
    return {
        "videos": len(result["videos"]),
        **{f"video {budget}": path_value(f"{root}/{rel}") for budget, rel in sorted(result["videos"].items())},
        "frames": dg.MetadataValue.json(result["frames"]),
        "skipped_invalid_pose": result["skipped_invalid_pose"],
    }
