"""Dagster layer of the question step: per-scan qa_candidates and the dataset-wide qa on the Parquet IO manager."""

from __future__ import annotations

import dagster as dg
import polars as pl

from assets.membership import record_built_elsewhere, scan_membership
from assets.partitions import scan_partitions
from assets.qa import qa, qa_candidates
from pipeline import schemas
from pipeline.storage import read_table, upath, write_table
from resources.defaults import default_resources
from resources.storage import StorageResource
from tests.test_qa_generation import build_scene

UPSTREAM = ("objects", "rooms", "object_visibility", "frame_samples", "dummy_videos")


def test_qa_assets_materialize_per_scan_then_dataset_wide(tmp_path):
    out = tmp_path / "out"
    resources = default_resources(StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(out)))
    tables_root = out / "tables"
    keys = []
    for seed in (0, 1):
        key, objects, rooms, vis, samples, dummy = build_scene(seed)
        keys.append(key)
        for name, df in zip(UPSTREAM, (objects, rooms, vis, samples, dummy)):
            write_table(upath(tables_root / name / f"{key}.parquet"), name, df)
    sources = [dg.SourceAsset(key=name, partitions_def=scan_partitions) for name in UPSTREAM]
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("scans", keys)
    for key in keys:
        result = dg.materialize([*sources, qa_candidates], resources=resources, instance=instance, partition_key=key,
                                selection=[qa_candidates])
        assert result.success
    # The PinpointQA step is upstream of qa too; an empty table stands for a run that produced none.
    write_table(upath(tables_root / "pinpoint_qa.parquet"), "pinpoint_qa", schemas.empty("qa"))
    write_table(upath(tables_root / "pinpoint_qa_drops.parquet"), "pinpoint_qa_drops", schemas.empty("qa_distribution_drops"))
    pinpoint = [dg.SourceAsset(key="pinpoint_qa"), dg.SourceAsset(key="pinpoint_qa_drops")]
    record_built_elsewhere(instance, keys)  # upstream tables were written directly, not by runs
    result = dg.materialize([*sources, *pinpoint, qa_candidates, scan_membership, qa], resources=resources,
                            instance=instance, selection=[scan_membership, qa])
    assert result.success
    final = read_table(upath(tables_root / "qa.parquet"), "qa")
    assert set(final["key"]) == set(keys)
    assert set(final["profile"]) == {"revsi", "vsibench"}
    per_scan = read_table(upath(tables_root / "qa_candidates" / f"{keys[0]}.parquet"), "qa_candidates")
    assert set(per_scan["budget"]) == {"16", "32", "64", "all"}
    assert final.filter(pl.col("key") == keys[0]).height < per_scan.height
