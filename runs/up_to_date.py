"""Which scans, and whether the dataset-wide assets, a build can leave as they are: built from the same inputs.

A second ``make demo`` used to rebuild every scan. Dagster already knows when an
asset's materialization is current: each records its code version (the step's
source and the run-config fields it reads, ``assets.catalog``) and the data
versions of its inputs, and Dagster's stale-status resolver (what the UI shows
as "stale") compares them with the code now loaded. What Dagster cannot see is
the scan folder itself, which is no asset; its discovery fingerprint is recorded
on each ``scans`` materialization (``assets.scene``), as the discovery sensor
uses it. So a scan partition is up to date when

* its latest run succeeded (a failed or stopped run is built again),
* its latest ``scans`` materialization recorded the fingerprint the folder has now,
* Dagster calls every per-scan asset of that partition fresh, and
* its ``scans`` table is still where this build's output root keeps it (a new ``--out`` starts afresh).

The dataset-wide assets are up to date when no scan was built now, the latest
dataset-wide run succeeded, Dagster calls each of them fresh, the release
``latest`` names exists, and discovery skipped the same folders as before.
Anything that cannot be told (an instance without records, an error asking
Dagster) counts as not up to date: the build then does what it always did.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable

import dagster as dg

from pipeline.config import Config
from pipeline.storage import reaching, upath


def _stale_resolver(instance: dg.DagsterInstance, definitions: list, resources: dict):
    from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    graph = dg.Definitions(assets=definitions, resources=resources).resolve_asset_graph()
    now = datetime.datetime.now(datetime.timezone.utc)
    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=now, last_event_id=None),
                          instance=instance, asset_graph=graph)
    return CachingStaleStatusResolver(instance, graph, loading_context=view)


def _fresh(resolver, keys: Iterable[dg.AssetKey], partition: str | None) -> bool:
    from dagster._core.definitions.data_version import StaleStatus

    return all(resolver.get_status(key, partition) == StaleStatus.FRESH for key in keys)


def _latest_run_succeeded(instance: dg.DagsterInstance, tags: dict[str, str]) -> bool:
    runs = instance.get_runs(filters=dg.RunsFilter(tags=tags), limit=1)
    return bool(runs) and runs[0].status == dg.DagsterRunStatus.SUCCESS


def up_to_date_scans(instance: dg.DagsterInstance, scans: list[tuple[str, str]], definitions: list,
                     resources: dict, config: Config) -> set[str]:
    """The partition keys of ``scans`` whose every per-scan asset was built from these files, code and config."""
    from assets.definitions import all_assets
    from assets.jobs import per_scan_keys
    from assets.sensors import built_fingerprint
    from pipeline.scene.discovery import scan_fingerprint
    from resources.parquet_io import ParquetIOManager

    tables = ParquetIOManager(root=config.tables_root, storage_options=dict(config.storage_options))
    keys = per_scan_keys(all_assets)
    try:
        resolver = _stale_resolver(instance, definitions, resources)
        fresh = set()
        for key, uri in scans:
            recorded = built_fingerprint(instance, key)
            if recorded is None or not _latest_run_succeeded(instance, {"dagster/partition": key}):
                continue
            if recorded != scan_fingerprint(uri, config.storage_options or None):
                continue
            if tables.table_path("scans", key).exists() and _fresh(resolver, keys, key):
                fresh.add(key)
        return fresh
    except Exception:  # noqa: BLE001 - asking is an optimisation: when it fails, build as before
        return set()


def dataset_wide_up_to_date(instance: dg.DagsterInstance, definitions: list, resources: dict, config: Config,
                            skipped: list[str]) -> str | None:
    """The latest release's version if the dataset-wide assets need no rebuild (no scan was built now), else None."""
    from assets.definitions import all_assets
    from assets.jobs import dataset_wide_keys
    from pipeline.scene.scan_notes import read_skipped

    try:
        version = latest_release(config)
        if version is None or not (upath(config.releases_root, config.storage_options) / version).exists():
            return None
        if read_skipped(config.output_root, config.storage_options) != list(skipped):
            return None
        if not _latest_run_succeeded(instance, {"scan2qa/phase": "dataset"}):
            return None
        resolver = _stale_resolver(instance, definitions, resources)
        return version if _fresh(resolver, dataset_wide_keys(all_assets), None) else None
    except Exception:  # noqa: BLE001 - as above
        return None


def latest_release(config: Config) -> str | None:
    """The version ``LATEST`` names, or None (no release yet, or the root cannot be read).

    An object store that does not answer is ``StorageUnreachable`` naming the output root: asked before any
    work, so a build into an unreachable bucket stops with that one line.
    """
    try:
        with reaching(config.output_root):
            pointer = upath(config.releases_root, config.storage_options) / "LATEST"
            return pointer.read_text().strip() if pointer.exists() else None
    except OSError:
        return None
