"""Per-scan scene tables: ``scans``, ``objects``, ``rooms``, ``frames`` from one parse.

Parsing a scan (mesh, annotations, camera stream) is the expensive part, so a
single multi-asset parses once and emits all four tables; asset names are the
table names of ``pipeline.schemas``.
"""

import dagster as dg

from assets.partitions import scan_partitions
from pipeline.discovery import locate_scan
from pipeline.errors import ScanError
from resources.storage import StorageResource

SCENE_TABLES: dict[str, str] = {
    "scans": "one row per scan: source, frame counts, mesh size, checksum, warnings",
    "objects": "annotated object instances with their oriented boxes and label-map categories",
    "rooms": "room polygons in the floor plane (whole scene and main room)",
    "frames": "every source frame with its camera pose and intrinsics",
}


@dg.multi_asset(
    outs={name: dg.AssetOut(description=text) for name, text in SCENE_TABLES.items()},
    partitions_def=scan_partitions,
    group_name="scene",
    can_subset=False,
)
def scene(context: dg.AssetExecutionContext, storage: StorageResource):
    # Readers pull in mesh and image libraries; importing them at run time keeps the code location quick to load.
    from pipeline.readers import read_scan
    from pipeline.scene_tables import scene_tables

    key = context.partition_key
    config = storage.config()
    uri = locate_scan(config.scans_root, key, config.storage_options)
    parsed = read_scan(uri, config)
    if parsed.key != key:
        raise ScanError(key, uri, f"reader returned scan key {parsed.key!r} for this folder")
    tables = scene_tables(parsed, config)
    for name in SCENE_TABLES:
        yield dg.Output(tables[name], output_name=name, metadata={"rows": tables[name].height, "source": uri})
