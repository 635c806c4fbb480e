"""Dagster layer of PinpointQA: per-scan representation and questions, then dataset-wide splits."""

from __future__ import annotations

import dagster as dg
import polars as pl

import assets.pinpoint as pinpoint_assets
from assets.membership import record_built_elsewhere, scan_membership
from assets.partitions import scan_partitions
from pipeline import schemas
from pipeline.scene.mesh_artifact import write_mesh_artifact
from pipeline.scene.tables import object_rows
from pipeline.storage import read_table, upath, write_table
from pipeline.synth.scene import generate_scene
from resources.defaults import default_resources
from resources.storage import StorageResource

UPSTREAM = ("scans", "objects", "object_visibility")


def test_pinpoint_assets_materialize(tmp_path):
    out = tmp_path / "out"
    resources = default_resources(StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(out)))
    tables_root = out / "tables"
    parsed_by_key = {}
    for index in (0, 1):
        parsed = generate_scene(0, index, frames=2).to_parsed_scan()
        parsed_by_key[parsed.key] = parsed
        objects = schemas.from_rows("objects", object_rows(parsed)[0])
        scans = schemas.from_rows("scans", [{"key": parsed.key, "source_uri": "in memory", "has_mesh": True}])
        vis = schemas.from_rows(
            "object_visibility",
            [{"key": parsed.key, "budget": b, "object_id": i, "visible": True, "rule": "pixel_floor"}
             for b in ("16", "32", "64", "all") for i in objects["object_id"]],
        )
        for name, df in zip(UPSTREAM, (scans, objects, vis)):
            write_table(upath(tables_root / name / f"{parsed.key}.parquet"), name, df)
        write_mesh_artifact(parsed, str(out))  # what the scene step stores for the steps after it
    sources = [dg.SourceAsset(key=name, partitions_def=scan_partitions) for name in UPSTREAM]
    defs = [*sources, pinpoint_assets.pinpoint_representation, pinpoint_assets.pinpoint_qa_candidates, pinpoint_assets.pinpoint_qa,
            scan_membership]
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("scans", sorted(parsed_by_key))
    for key in sorted(parsed_by_key):
        result = dg.materialize(
            defs, resources=resources, instance=instance, partition_key=key,
            selection=[pinpoint_assets.pinpoint_representation, pinpoint_assets.pinpoint_qa_candidates],
        )
        assert result.success
    record_built_elsewhere(instance, sorted(parsed_by_key))  # upstream tables were written directly, not by runs
    result = dg.materialize(defs, resources=resources, instance=instance,
                            selection=[scan_membership, pinpoint_assets.pinpoint_qa])
    assert result.success
    final = read_table(upath(tables_root / "pinpoint_qa.parquet"), "pinpoint_qa")
    assert set(final["key"]) == set(parsed_by_key)
    assert set(final["profile"]) == {"pinpointqa"}
    assert final["split"].null_count() == 0
    assert final.group_by("key").agg(pl.col("split").n_unique())["split"].max() == 1
    tpv = final.filter(pl.col("question_type") == "presence")  # negatives drawn dataset-wide, half of every scene-budget
    per_scene = tpv.group_by("key", "budget").agg((pl.col("ground_truth") == "Yes").sum().alias("yes"), pl.len())
    assert (per_scene["len"] == 2 * per_scene["yes"]).all()
    targets = read_table(upath(tables_root / "pinpoint_targets" / f"{sorted(parsed_by_key)[0]}.parquet"), "pinpoint_targets")
    assert targets.height > 0


def test_definitions_include_pinpoint_assets():
    from assets.definitions import defs

    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {"pinpoint_targets", "pinpoint_neighbors", "pinpoint_qa_candidates", "pinpoint_qa"} <= keys
