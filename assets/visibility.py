"""Per-scan visibility: ray-cast ``visibility``, the budgeted ``object_visibility`` and the ``dummy_videos``.

``visibility`` needs the mesh, read from what the scene step stored
(``partition_geometry``), and ``dummy_videos`` the images, read by the paths
the ``frames`` table records (``partition_images``): neither parses the scan
again. ``object_visibility`` is a pure table step. Reviewer overrides are read from the dataset-wide
``tables/visibility_overrides.parquet`` when it exists.
"""

import dagster as dg
import polars as pl

from assets.catalog import table_asset
from assets.partitions import scan_partitions
from assets.progress import CountingRaycaster, FrameCounter
from assets.scene import partition_geometry, partition_images, recorded_scan
from assets.scan_batches import PerScanTable, ScanTables, per_scan, scan_backfill_policy
from assets.step_config import step_config
from pipeline.config import Config
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


@dg.asset(
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="visibility",
    ins={name: dg.AssetIn(name) for name in ("scans", "objects", "frames")},
    description="visible pixels, frame fraction and box of every object in every all-frame frame (ray cast)",
    **table_asset("visibility", __name__),
)
def visibility(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    run_config: RunConfigResource,
    scans: pl.DataFrame,
    objects: pl.DataFrame,
    frames: pl.DataFrame,
) -> PerScanTable:
    config = step_config(context, storage, run_config, __name__)
    table = per_scan(context, "visibility", lambda key, **tables: visibility_of(context, config, key, **tables),
                     scans=scans, objects=objects, frames=frames)
    if not isinstance(table, ScanTables):
        context.add_output_metadata({"frames_cast": int(frames["in_all_frame"].fill_null(False).sum())})
    return table


def visibility_of(
    context: dg.AssetExecutionContext, config: Config, key: str,
    scans: pl.DataFrame, objects: pl.DataFrame, frames: pl.DataFrame,
) -> pl.DataFrame:
    from pipeline import schemas
    from pipeline.visibility.cast import compute_visibility, scan_raycaster

    scan_frames = frames.filter(pl.col("key") == key)
    if not scan_frames["in_all_frame"].fill_null(False).any():
        return schemas.empty("visibility")
    geometry = partition_geometry(context, config, scans, objects, key)
    rotation = recorded_scan(context, config, scans, key)["image_rotation"]
    mesh = geometry.mesh if geometry is not None else None
    frames_cast = int(scan_frames["in_all_frame"].sum())
    raycaster = CountingRaycaster(FrameCounter(context, "visibility", frames_cast, scene=key), scan_raycaster(key, mesh))
    overrides = None
    if config.visibility.cast == "adaptive":  # it settles an overridden object's rule in every frame
        from pipeline.visibility.cast import read_visibility_overrides

        overrides = read_visibility_overrides(config.tables_root, config.storage_options)
    table = compute_visibility(
        key, scan_frames, mesh, config, image_rotation=rotation, raycaster=raycaster, objects=objects,
        overrides=overrides,
    )
    return table


@dg.asset(
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="visibility",
    ins={name: dg.AssetIn(name) for name in ("visibility", "frame_samples", "objects")},
    description="per budget and object: best frame, coverage and the SPEC §3 visible decision (with overrides)",
    **table_asset("object_visibility", __name__),
)
def object_visibility(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    run_config: RunConfigResource,
    visibility: pl.DataFrame,
    frame_samples: pl.DataFrame,
    objects: pl.DataFrame,
) -> PerScanTable:
    from pipeline.visibility.cast import object_visibility as decide
    from pipeline.visibility.cast import read_visibility_overrides

    config = step_config(context, storage, run_config, __name__)
    overrides = read_visibility_overrides(config.tables_root, config.storage_options)
    table = per_scan(
        context, "object_visibility", lambda key, **tables: decide(key, **tables, overrides=overrides, config=config),
        visibility=visibility, frame_samples=frame_samples, objects=objects,
    )
    if not isinstance(table, ScanTables):
        context.add_output_metadata({"visible": int(table["visible"].sum()), "overrides": overrides.height})
    return table


@dg.asset(
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="visibility",
    ins={name: dg.AssetIn(name) for name in ("scans", "objects", "object_visibility", "visibility", "frames")},
    description="16-frame query_drop / first_frame / black videos for the object sets the dummy questions query",
    **table_asset("dummy_videos", __name__),
)
def dummy_videos(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    run_config: RunConfigResource,
    scans: pl.DataFrame,
    objects: pl.DataFrame,
    object_visibility: pl.DataFrame,
    visibility: pl.DataFrame,
    frames: pl.DataFrame,
) -> PerScanTable:
    config = step_config(context, storage, run_config, __name__)
    table = per_scan(
        context, "dummy_videos", lambda key, **tables: dummy_videos_of(context, config, key, **tables),
        scans=scans, objects=objects, object_visibility=object_visibility, visibility=visibility, frames=frames,
    )
    if not isinstance(table, ScanTables):
        from pipeline.qa.dummy import dummy_object_sets

        context.add_output_metadata({"object_sets": len(dummy_object_sets(objects, object_visibility, context.partition_key))})
    return table


def dummy_videos_of(
    context: dg.AssetExecutionContext, config: Config, key: str, scans: pl.DataFrame, objects: pl.DataFrame,
    object_visibility: pl.DataFrame, visibility: pl.DataFrame, frames: pl.DataFrame,
) -> pl.DataFrame:
    from assets.frames import partition_image_identity
    from pipeline import schemas
    from pipeline.frames.dummy_videos import make_dummy_videos
    from pipeline.frames.frame_cache import SHARED
    from pipeline.qa.dummy import dummy_object_sets

    sets = dummy_object_sets(objects, object_visibility, key)
    if not sets:
        SHARED.clear()
        return schemas.empty("dummy_videos")
    rotation = recorded_scan(context, config, scans, key)["image_rotation"]
    scan_frames = frames.filter(pl.col("key") == key)
    with partition_images(context, config, scans, frames, key) as load_image:
        table = make_dummy_videos(
            key,
            sets,
            visibility,
            scan_frames,
            load_image,
            config.output_root,
            frames_config=config.frames,
            image_rotation=rotation,
            storage_options=config.storage_options,
            image_identity=partition_image_identity(context, config, scan_frames, key),
            frame_cache=SHARED,  # frames the scan videos decoded in this process are not decoded again
        )
    SHARED.clear()  # the scan's last reader: the memory is free for the next scan
    return table
