"""Per-scan scene tables: ``scans``, ``objects``, ``rooms``, ``frames`` from one parse.

Parsing a scan (mesh, annotations, camera stream, rooms) is the expensive
part, so a single multi-asset parses once per run and emits all four tables;
asset names are the table names of ``pipeline.schemas``. It also stores the
mesh (``pipeline.scene.mesh_artifact``) through the storage layer, so later
steps on any machine read what they need from there and from the tables —
the mesh (``partition_geometry``), images by the paths ``frames`` records
(``partition_images``), rooms from ``rooms`` — and never parse the scan again.

Steps never search the scans root for their scan: it may hold thousands of
scans on S3 and the step may run on a worker far from it. The scan's folder
comes from what discovery recorded (``scan_location``).
"""

from contextlib import contextmanager

import dagster as dg
import polars as pl

from assets.catalog import path_value, table_out
from assets.partitions import FINGERPRINT_TAG, SOURCE_TAG, scan_partitions
from assets.progress import Heartbeat
from assets.run_errors import scan_failure
from assets.scan_batches import ScanTables, each_scan, in_range, record_check_results, scan_backfill_policy
from assets.table_checks import SCENE_SUITES, check_spec, scene_checks
from pipeline.config import Config
from pipeline.scene.discovery import locate_scan
from pipeline.errors import ScanError, TableError
from pipeline.scene.parsed import ParsedScan
from pipeline.storage import reaching, within_root
from assets.step_config import step_config
from resources.run_config import RunConfigResource
from resources.storage import StorageResource

SCENE_TABLES: dict[str, str] = {
    "scans": "one row per scan: source, frame counts, mesh size, checksum, warnings",
    "objects": "annotated object instances with their oriented boxes and label-map categories",
    "rooms": "room polygons in the floor plane (whole scene and main room)",
    "frames": "every source frame with its camera pose and intrinsics",
}


def recorded_source(key: str, config: Config) -> str | None:
    """``source_uri`` of the partition's ``scans`` table, if a ``scene`` step wrote one.

    A missing or damaged table only means nothing is recorded: the step can still find its scan directly.
    """
    from pipeline.storage import read_table, upath

    path = upath(f"{config.tables_root.rstrip('/')}/scans/{key}.parquet", config.storage_options)
    try:
        table = read_table(path, "scans")
    except (FileNotFoundError, TableError):
        return None
    sources = [row["source_uri"] for row in table.iter_rows(named=True) if row["key"] == key and row["source_uri"]]
    return sources[0] if sources else None


def scan_location(context: dg.AssetExecutionContext, config: Config, key: str) -> str:
    """Where scan ``key`` is: the run's source tag, else the recorded source, else a few direct folders.

    The tag is what discovery found for this very run (sensor or ``scan2qa build``) and costs no I/O; only a
    run of one scan has it. The ``scans`` table covers runs launched without it (a partition rerun or backfill
    from the UI, a run over a range of scans); ``locate_scan`` covers a scan never built, in the layouts
    discovery knows, without listing the root.
    """
    tagged = context.run.tags.get(SOURCE_TAG) if context.has_partition_key else None
    if tagged:
        if not within_root(config.scans_root, tagged, config.storage_options):
            raise ScanError(key, tagged, f"run tag {SOURCE_TAG} is outside the scans root {config.scans_root}")
        return tagged
    return locate_scan(config.scans_root, key, config.storage_options, recorded=recorded_source(key, config))


def load_partition_scan(context: dg.AssetExecutionContext, config: Config, key: str) -> ParsedScan:
    """Parse scan ``key``; per-scan assets that need the mesh or images call this."""
    # Readers pull in mesh and image libraries; importing them at run time keeps the code location quick to load.
    from pipeline.scene.readers import read_scan

    try:
        with reaching(config.scans_root):
            uri = scan_location(context, config, key)
        with reaching(uri):
            parsed = read_scan(uri, config)
    except ScanError as exc:
        if exc.key.startswith("?/"):  # the reader could not tell whose folder this is; the partition can
            raise ScanError(key, exc.file, exc.problem) from None
        raise
    if parsed.key != key:
        raise ScanError(key, uri, f"reader returned scan key {parsed.key!r} for this folder")
    return parsed


def partition_geometry(
    context: dg.AssetExecutionContext, config: Config, scans: pl.DataFrame, objects: pl.DataFrame, key: str
) -> ParsedScan | None:
    """Scan ``key``'s mesh and objects' vertices as the scene step stored them; None for a scan without a mesh.

    An output root written before the scene step stored meshes has none: then (only then) the scan is parsed.
    """
    from pipeline.scene.mesh_artifact import MeshArtifactMissing, geometry_scan, read_mesh_artifact

    row = scans.filter(pl.col("key") == key)
    if row.height and not row["has_mesh"][0]:
        return None
    try:
        with reaching(config.output_root):
            geometry = read_mesh_artifact(key, config.output_root, config.storage_options)
    except MeshArtifactMissing as exc:
        context.log.warning(f"{key}: {exc.file} is missing (scene built by an older version): parsing the scan")
        return load_partition_scan(context, config, key)
    source = row["source_uri"][0] if row.height else ""
    scan_objects = objects.filter(pl.col("key") == key)
    labels = dict(zip(scan_objects["object_id"].to_list(), scan_objects["raw_label"].to_list()))
    return geometry_scan(key, source, geometry, labels)


def recorded_scan(context: dg.AssetExecutionContext, config: Config, scans: pl.DataFrame, key: str) -> dict:
    """Scan ``key``'s ``scans`` row; a row from before ``image_rotation`` was recorded gets it by parsing the scan."""
    rows = scans.filter(pl.col("key") == key).to_dicts()
    row = rows[0] if rows else {"key": key, "has_frames": True, "has_mesh": True, "image_rotation": None}
    if row.get("image_rotation") is None:
        context.log.warning(f"{key}: the scans table does not record image_rotation (older version): parsing the scan")
        row = dict(row, image_rotation=int(load_partition_scan(context, config, key).image_rotation))
    return row


@contextmanager
def partition_images(
    context: dg.AssetExecutionContext, config: Config, scans: pl.DataFrame, frames: pl.DataFrame, key: str
):
    """Yield scan ``key``'s ``load_image`` from the files its ``frames`` rows name (``pipeline.scene.images``).

    None for a scan without images; frames tables written before they recorded image files fall back to
    parsing the scan.
    """
    from pipeline.scene.images import FrameImages, records_images

    scan_frames = frames.filter(pl.col("key") == key)
    row = scans.filter(pl.col("key") == key)
    if row.height and not row["has_frames"].fill_null(True)[0]:
        yield None
        return
    if not records_images(scan_frames):
        context.log.warning(f"{key}: the frames table names no image files (older version): parsing the scan")
        yield load_partition_scan(context, config, key).load_image
        return
    with reaching(config.scans_root):
        uri = scan_location(context, config, key)
    with reaching(uri), FrameImages(key, uri, scan_frames, config.storage_options) as images:
        yield images


@dg.multi_asset(
    outs={name: table_out(name, __name__, text) for name, text in SCENE_TABLES.items()},
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="scene",
    can_subset=False,
    check_specs=[check_spec(name, per_scan=True) for name in SCENE_SUITES],
)
def scene(context: dg.AssetExecutionContext, storage: StorageResource, run_config: RunConfigResource):
    config = step_config(context, storage, run_config, __name__)
    if in_range(context):  # a multi-run backfill: every scan of the range, one table file per scan
        # Only the tables stay from scan to scan: each parsed scan (its mesh) is let go once its tables are made.
        built = each_scan(context, "scene", lambda key: scene_of(context, config, key)[0])
        for name in SCENE_TABLES:
            yield dg.Output(ScanTables({key: tables[name] for key, tables in built.items()}), output_name=name)
        yield from record_check_results(
            context, "scene", {key: scene_checks(tables, config) for key, tables in built.items()}
        )
        return
    with scan_failure():  # the step's failure reads the scan's one line (the run's other steps use per_scan)
        tables, parsed = scene_of(context, config, context.partition_key)
    # The fingerprint discovery took of the scan folder: the sensor skips a scan already built from these files.
    recorded = {"source": path_value(parsed.source_uri)}
    if context.run.tags.get(FINGERPRINT_TAG):
        recorded["fingerprint"] = context.run.tags[FINGERPRINT_TAG]
    for name in SCENE_TABLES:
        yield dg.Output(tables[name], output_name=name, metadata=recorded)
    yield from scene_checks(tables, config)


def scene_of(context: dg.AssetExecutionContext, config: Config, key: str) -> tuple[dict[str, pl.DataFrame], ParsedScan]:
    """Scan ``key``'s four tables, its mesh stored for the later steps."""
    from pipeline.scene.mesh_artifact import write_mesh_artifact
    from pipeline.scene.tables import scene_tables

    # A scan of tens of thousands of frames takes tens of seconds to read: a line every few seconds meanwhile.
    with Heartbeat(context, "scene", scene=key, doing="reading the scan") as heartbeat:
        parsed = load_partition_scan(context, config, key)
        heartbeat.doing = f"building the tables of {len(parsed.frames)} frames"
        tables = scene_tables(parsed, config)
        if parsed.mesh is not None:  # later steps read the mesh from here instead of parsing the scan again
            heartbeat.doing = "storing the mesh"
            with reaching(config.output_root):
                write_mesh_artifact(parsed, config.output_root, config.storage_options)
    return tables, parsed
