"""Per-scan scene tables: ``scans``, ``objects``, ``rooms``, ``frames`` from one parse.

Parsing a scan (mesh, annotations, camera stream) is the expensive part, so a
single multi-asset parses once and emits all four tables; asset names are the
table names of ``pipeline.schemas``.

Steps never search the scans root for their scan: it may hold thousands of
scans on S3 and the step may run on a worker far from it. The scan's folder
comes from what discovery recorded (``scan_location``).
"""

import dagster as dg

from assets.catalog import path_value, table_out
from assets.partitions import FINGERPRINT_TAG, SOURCE_TAG, scan_partitions
from assets.table_checks import SCENE_SUITES, check_spec, scene_checks
from pipeline.config import Config
from pipeline.scene.discovery import locate_scan, within_root
from pipeline.errors import ScanError, TableError
from pipeline.scene.parsed import ParsedScan
from pipeline.storage import reaching
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


def scan_location(context: dg.AssetExecutionContext, config: Config) -> str:
    """Where the partition's scan is: the run's source tag, else the recorded source, else a few direct folders.

    The tag is what discovery found for this very run (sensor or ``scan2qa build``) and costs no I/O;
    the ``scans`` table covers runs launched without it (a partition rerun or backfill from the UI);
    ``locate_scan`` covers a scan never built, in the layouts discovery knows, without listing the root.
    """
    key = context.partition_key
    tagged = context.run.tags.get(SOURCE_TAG)
    if tagged:
        if not within_root(config.scans_root, tagged, config.storage_options):
            raise ScanError(key, tagged, f"run tag {SOURCE_TAG} is outside the scans root {config.scans_root}")
        return tagged
    return locate_scan(config.scans_root, key, config.storage_options, recorded=recorded_source(key, config))


def load_partition_scan(context: dg.AssetExecutionContext, storage: StorageResource) -> ParsedScan:
    """Parse the scan behind the run's partition; per-scan assets that need the mesh or images call this."""
    # Readers pull in mesh and image libraries; importing them at run time keeps the code location quick to load.
    from pipeline.scene.readers import read_scan

    key = context.partition_key
    config = storage.config()
    try:
        with reaching(config.scans_root):
            uri = scan_location(context, config)
        with reaching(uri):
            parsed = read_scan(uri, config)
    except ScanError as exc:
        if exc.key.startswith("?/"):  # the reader could not tell whose folder this is; the partition can
            raise ScanError(key, exc.file, exc.problem) from None
        raise
    if parsed.key != key:
        raise ScanError(key, uri, f"reader returned scan key {parsed.key!r} for this folder")
    return parsed


@dg.multi_asset(
    outs={name: table_out(name, __name__, text) for name, text in SCENE_TABLES.items()},
    partitions_def=scan_partitions,
    group_name="scene",
    can_subset=False,
    check_specs=[check_spec(name) for name in SCENE_SUITES],
)
def scene(context: dg.AssetExecutionContext, storage: StorageResource):
    from pipeline.scene.tables import scene_tables

    parsed = load_partition_scan(context, storage)
    tables = scene_tables(parsed, storage.config())
    # The fingerprint discovery took of the scan folder: the sensor skips a scan already built from these files.
    recorded = {"source": path_value(parsed.source_uri)}
    if context.run.tags.get(FINGERPRINT_TAG):
        recorded["fingerprint"] = context.run.tags[FINGERPRINT_TAG]
    for name in SCENE_TABLES:
        yield dg.Output(tables[name], output_name=name, metadata=recorded)
    yield from scene_checks(tables, storage)
