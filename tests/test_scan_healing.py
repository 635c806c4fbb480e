"""Per-scan tables follow an input partition rebuilt alone, and the release waits for them, tick by tick.

A toy graph carries the real conditions: a scan's root table (``scene``'s place), a table read from it
(``scan_healing``) and a dataset-wide table (``dataset_automation``). Rematerializing the root of one partition
alone (as from its asset page) must rebuild that partition's downstream table, and the dataset-wide table must
wait for it rather than release the scan as stale in between; runs that build the whole partition (sensor,
backfill, build) must trigger no healing.
"""

from __future__ import annotations

import dagster as dg
import pytest

from assets.automation import dataset_automation, with_scan_healing

SCANS = dg.DynamicPartitionsDefinition(name="toy_scans")


@dg.asset(partitions_def=SCANS)
def scan_root() -> None:
    return None


@dg.asset(partitions_def=SCANS, deps=[scan_root])
def scan_child() -> None:
    return None


@dg.asset(deps=[scan_child], automation_condition=dataset_automation())
def dataset_table() -> None:
    return None


ASSETS = with_scan_healing([scan_root, scan_child, dataset_table], SCANS)
DEFS = dg.Definitions(assets=ASSETS)
ROOT, CHILD, DATASET = dg.AssetKey("scan_root"), dg.AssetKey("scan_child"), dg.AssetKey("dataset_table")


class Ticks:
    def __init__(self):
        self.instance = dg.DagsterInstance.ephemeral()
        self.instance.add_dynamic_partitions("toy_scans", ["a", "b"])
        self.cursor = None
        self.job = DEFS.resolve_implicit_global_asset_job_def()

    def tick(self) -> tuple[set[str], int]:
        """(partitions of the child requested, runs of the dataset table requested) by one evaluation."""
        result = dg.evaluate_automation_conditions(defs=DEFS, instance=self.instance, cursor=self.cursor)
        self.cursor = result.cursor
        children = {p for p in result.get_requested_partitions(CHILD)} if result.get_num_requested(CHILD) else set()
        return children, result.get_num_requested(DATASET)

    def build(self, key: str, *assets: dg.AssetKey) -> None:
        assert self.job.execute_in_process(instance=self.instance, partition_key=key, asset_selection=list(assets)).success

    def build_dataset(self) -> None:
        assert self.job.execute_in_process(instance=self.instance, asset_selection=[DATASET]).success


@pytest.fixture
def ticks() -> Ticks:
    ticks = Ticks()
    for key in ("a", "b"):
        ticks.build(key, ROOT, CHILD)
    ticks.tick()
    ticks.build_dataset()
    assert ticks.tick() == (set(), 0)
    return ticks


def test_only_the_child_and_only_per_scan_tables_carry_the_healing_condition():
    by_key = {spec.key: spec for a in ASSETS for spec in a.specs}
    assert by_key[ROOT].automation_condition is None
    assert by_key[CHILD].automation_condition.get_label() == "scan tables follow an input rebuilt alone"
    assert by_key[DATASET].automation_condition.get_label() == "release follows any upstream change"


def test_a_root_rebuilt_alone_heals_its_child_and_the_release_waits(ticks):
    ticks.build("a", ROOT)
    assert ticks.tick() == ({"a"}, 0)  # the child of that partition only; no release of a stale scan
    ticks.build("a", CHILD)
    assert ticks.tick() == (set(), 1)  # then the release, once
    ticks.build_dataset()
    assert ticks.tick() == (set(), 0)


def test_a_whole_partition_rebuilt_heals_nothing(ticks):
    ticks.build("b", ROOT, CHILD)  # what the sensor, a backfill and scan2qa build run
    assert ticks.tick() == (set(), 1)
    ticks.build_dataset()
    assert ticks.tick() == (set(), 0)


def test_a_new_partition_is_not_built_by_automation(ticks):
    ticks.instance.add_dynamic_partitions("toy_scans", ["c"])  # the discovery sensor requests its run
    assert ticks.tick() == (set(), 0)
