"""One dynamic partition per scan, keyed ``"<dataset>/<scene_id>"``.

Dagster accepts "/" in partition keys, so the key is the scan key of
``pipeline.scene.parsed.ParsedScan.key`` verbatim and maps directly onto the table
layout ``tables/<table>/<dataset>/<scene_id>.parquet``. Partitions are added by
the discovery sensor and by ``scan2qa build``, whose runs carry the scan folder
discovery found in the ``SOURCE_TAG`` run tag, so no step has to search the
scans root for it (``assets.scene.load_partition_scan``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

import dagster as dg

scan_partitions = dg.DynamicPartitionsDefinition(name="scans")

# Tags Dagster writes, by the names its UI shows: it exports no constant for them (tests/test_public_dagster_api.py
# checks these against its own).
DATA_VERSION_TAG = "dagster/data_version"  # on a materialization: the data version it recorded
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"  # on a run of a range of partitions
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"

SOURCE_TAG = "scan2qa/source"  # run tag: URI of the partition's scan folder, as discovery found it
# Run tag: the discovery fingerprint of that folder (``pipeline.scene.discovery.scan_fingerprint``) when the run
# was requested; the ``scene`` step records it on the ``scans`` materialization, which is how ``scan_discovery``
# recognises a scan that ``scan2qa build`` (``make demo``) already built from the same files.
FINGERPRINT_TAG = "scan2qa/fingerprint"

# The set of registered scans is an input of the release as much as any table: a scan whose folder left the scans
# root has its partition removed (``scan_discovery``, ``scan2qa build``), which changes no table, so automation
# would not follow. An observable source asset whose data version is the registered keys' hash makes the removal
# an update of ``scan_membership``'s input, as a verdicts edit is of the release's.
REGISTERED_SCANS = "registered_scans"


def registered_scans_version(keys: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:16]


def registered_scans_observation(keys: Iterable[str], removed: Iterable[str] = ()) -> dg.AssetObservation:
    keys, removed = sorted(keys), sorted(removed)
    return dg.AssetObservation(
        asset_key=REGISTERED_SCANS,
        metadata={"dagster/row_count": len(keys), "removed": dg.MetadataValue.json(removed)},
        tags={DATA_VERSION_TAG: registered_scans_version(keys)},
    )


def gone_from_root(registered: Iterable[str], found: Iterable[str], complete: bool) -> list[str]:
    """Registered scans a complete listing of the scans root no longer finds. A listing cut short finds nothing
    gone, and neither does one that finds no scan at all (an unmounted share or an emptied bucket prefix looks like
    that: removing every partition on it is never what anyone meant)."""
    found = set(found)
    if not complete or not found:
        return []
    return sorted(set(registered) - found)


def partition_range(tags: Mapping[str, str]) -> tuple[str, str] | None:
    """(first, last) scan of a run over a range of scans (a multi-run backfill's run, ``assets.scan_batches``)."""
    start, end = tags.get(ASSET_PARTITION_RANGE_START_TAG), tags.get(ASSET_PARTITION_RANGE_END_TAG)
    return (start, end) if start and end else None


def keys_between(ordered: Sequence[str], start: str, end: str) -> list[str]:
    """The keys of a partition range: ``ordered`` is the partitions' order (registration order, for dynamic
    partitions); a bound no longer registered gives nothing."""
    try:
        first, last = ordered.index(start), ordered.index(end)
    except ValueError:
        return []
    return list(ordered[first:last + 1])
