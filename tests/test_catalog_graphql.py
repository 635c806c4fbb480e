"""What the UI shows, read through Dagster's GraphQL (in-process workspace): kinds and owners on every asset, per-scan
checks partitioned like their assets, a check failed in one partition shown for that partition only, and the
release's report and Data Docs as links."""

from pathlib import Path

import dagster as dg
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster_graphql.test.utils import execute_dagster_graphql

from assets.catalog import link_value, path_value

ROOT = Path(__file__).resolve().parents[1]

NODES = """
{ assetNodes {
    assetKey { path } kinds isPartitioned
    owners { __typename ... on TeamAssetOwner { team } ... on UserAssetOwner { email } }
    assetChecksOrError { ... on AssetChecks { checks { name partitionDefinition { name } partitionStatuses {
        __typename ... on AssetCheckDefaultPartitionStatuses { succeededPartitions failedPartitions } } } } }
} }
"""


def query(instance: dg.DagsterInstance, module: str, text: str) -> dict:
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name=module, attribute="defs", working_directory=str(ROOT)),
        location_name="scan2qa",
    )
    # Entered, as the webserver enters each request's context: check partition statuses read the dynamic
    # partitions from the loading context it sets.
    with WorkspaceProcessContext(instance, InProcessWorkspaceLoadTarget(origin)) as workspace, \
            workspace.create_request_context() as request:
        result = execute_dagster_graphql(request, text)
    assert not result.errors, result.errors
    return result.data


def test_every_asset_shows_kinds_and_owner_and_per_scan_checks_are_partitioned():
    with dg.instance_for_test() as instance:
        nodes = query(instance, "assets.definitions", NODES)["assetNodes"]
    by_name = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    assert "reviewer_verdicts" in by_name
    for name, node in by_name.items():
        assert node["kinds"], name
        assert node["owners"] == [{"__typename": "TeamAssetOwner", "team": "scan2qa"}], name
        for check in node["assetChecksOrError"]["checks"]:
            assert (check["partitionDefinition"] is not None) == node["isPartitioned"], (name, check["name"])


def test_a_check_failed_in_one_partition_shows_for_that_partition_only():
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("scans", ["synthetic/synth0000_00", "synthetic/synth0001_00"])
        from tests import partitioned_check_location as location

        for key in ("synthetic/synth0000_00", "synthetic/synth0001_00"):
            dg.materialize([location.scans], instance=instance, partition_key=key, raise_on_error=False)
        [node] = query(instance, "tests.partitioned_check_location", NODES)["assetNodes"]
    [check] = node["assetChecksOrError"]["checks"]
    assert check["partitionStatuses"]["succeededPartitions"] == ["synthetic/synth0000_00"]
    assert check["partitionStatuses"]["failedPartitions"] == ["synthetic/synth0001_00"]


def test_report_and_data_docs_are_links_in_the_catalog(tmp_path):
    report = tmp_path / "release" / "report" / "index.html"
    assert link_value(report) == dg.MetadataValue.url(report.resolve().as_uri())
    assert link_value("s3://bucket/r-1/report/index.html") == dg.MetadataValue.url("s3://bucket/r-1/report/index.html")
    assert path_value(tmp_path) == dg.MetadataValue.path(str(tmp_path))
