"""One dynamic partition per scan, keyed ``"<dataset>/<scene_id>"``.

Dagster accepts "/" in partition keys, so the key is the scan key of
``pipeline.scene.ParsedScan.key`` verbatim and maps directly onto the table
layout ``tables/<table>/<dataset>/<scene_id>.parquet``. Partitions are added by
the discovery sensor and by ``scan2qa build``.
"""

from __future__ import annotations

import dagster as dg

scan_partitions = dg.DynamicPartitionsDefinition(name="scans")
