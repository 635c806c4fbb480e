"""Per-scan scene tables: ``scans``, ``objects``, ``rooms``, ``frames`` from one parse.

Parsing a scan (mesh, annotations, camera stream) is the expensive part, so a
single multi-asset parses once and emits all four tables; asset names are the
table names of ``pipeline.schemas``.
"""

import dagster as dg

from assets.partitions import scan_partitions
from pipeline.discovery import locate_scan
from pipeline.errors import ScanError
from pipeline.scene import ParsedScan
from resources.storage import StorageResource

SCENE_TABLES: dict[str, str] = {
    "scans": "one row per scan: source, frame counts, mesh size, checksum, warnings",
    "objects": "annotated object instances with their oriented boxes and label-map categories",
    "rooms": "room polygons in the floor plane (whole scene and main room)",
    "frames": "every source frame with its camera pose and intrinsics",
}


def load_partition_scan(partition_key: str, storage: StorageResource) -> ParsedScan:
    """Parse the scan behind a partition key; per-scan assets that need the mesh or images call this."""
    # Readers pull in mesh and image libraries; importing them at run time keeps the code location quick to load.
    from pipeline.readers import read_scan

    config = storage.config()
    uri = locate_scan(config.scans_root, partition_key, config.storage_options)
    parsed = read_scan(uri, config)
    if parsed.key != partition_key:
        raise ScanError(partition_key, uri, f"reader returned scan key {parsed.key!r} for this folder")
    return parsed


@dg.multi_asset(
    outs={name: dg.AssetOut(description=text) for name, text in SCENE_TABLES.items()},
    partitions_def=scan_partitions,
    group_name="scene",
    can_subset=False,
)
def scene(context: dg.AssetExecutionContext, storage: StorageResource):
    from pipeline.scene_tables import scene_tables

    parsed = load_partition_scan(context.partition_key, storage)
    tables = scene_tables(parsed, storage.config())
    for name in SCENE_TABLES:
        yield dg.Output(tables[name], output_name=name, metadata={"rows": tables[name].height, "source": parsed.source_uri})
