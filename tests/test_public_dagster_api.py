"""What the product does with public Dagster API instead of a private one still matches the private original.

Tag names are spelled out (Dagster exports no constant for them) and the per-scan assets are ordered with
``graphlib`` over ``AssetsDefinition.asset_deps``; this test imports the private originals, so an upgrade that
renames a tag or changes the order fails here rather than as runs silently no longer found.
"""

from __future__ import annotations


def test_tag_names_match_dagsters_constants():
    from dagster._core.definitions.data_version import DATA_VERSION_TAG
    from dagster._core.storage import tags

    from assets import infrastructure_errors, partitions
    from runs import backfill_progress

    assert partitions.DATA_VERSION_TAG == DATA_VERSION_TAG
    assert partitions.ASSET_PARTITION_RANGE_START_TAG == tags.ASSET_PARTITION_RANGE_START_TAG
    assert partitions.ASSET_PARTITION_RANGE_END_TAG == tags.ASSET_PARTITION_RANGE_END_TAG
    assert backfill_progress.PARTITION_NAME_TAG == tags.PARTITION_NAME_TAG
    assert backfill_progress.RETRY_NUMBER_TAG == tags.RETRY_NUMBER_TAG
    assert backfill_progress.WILL_RETRY_TAG == tags.WILL_RETRY_TAG
    assert backfill_progress.AUTO_RETRY_RUN_ID_TAG == tags.AUTO_RETRY_RUN_ID_TAG
    assert infrastructure_errors.RETRY_ON_ASSET_OR_OP_FAILURE_TAG == tags.RETRY_ON_ASSET_OR_OP_FAILURE_TAG


def test_inputs_first_orders_per_scan_assets_as_dagsters_asset_graph_does():
    from dagster._core.definitions.assets.graph.asset_graph import AssetGraph

    from assets.membership import inputs_first, per_scan_definitions

    definitions = per_scan_definitions()
    assert inputs_first(definitions) == list(AssetGraph.from_assets(definitions).toposorted_asset_keys)
