"""One dynamic partition per scan, keyed ``"<dataset>/<scene_id>"``.

Dagster accepts "/" in partition keys, so the key is the scan key of
``pipeline.scene.parsed.ParsedScan.key`` verbatim and maps directly onto the table
layout ``tables/<table>/<dataset>/<scene_id>.parquet``. Partitions are added by
the discovery sensor and by ``scan2qa build``, whose runs carry the scan folder
discovery found in the ``SOURCE_TAG`` run tag, so no step has to search the
scans root for it (``assets.scene.load_partition_scan``).
"""

from __future__ import annotations

import dagster as dg

scan_partitions = dg.DynamicPartitionsDefinition(name="scans")

SOURCE_TAG = "scan2qa/source"  # run tag: URI of the partition's scan folder, as discovery found it
# Run tag: the discovery fingerprint of that folder (``pipeline.scene.discovery.scan_fingerprint``) when the run
# was requested; the ``scene`` step records it on the ``scans`` materialization, which is how ``scan_discovery``
# recognises a scan that ``scan2qa build`` (``make demo``) already built from the same files.
FINGERPRINT_TAG = "scan2qa/fingerprint"
