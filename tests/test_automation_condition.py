"""The dataset-wide automation condition never loses an upstream change, evaluated tick by tick.

A release must follow every change upstream. Dagster's ``since_last_handled``
counts the asset's own materialization as handling, and when a trigger made of
several conditions fires in the same tick as that reset, the reset wins (an
``|`` carries no timing). So a scan built, or a verdict observed, while the
dataset run was running (or in the tick its materialization is first seen) was
dropped, and no release ever held it (seen under ``dagster-daemon``: a verdicts
edit observed 3 s after the release run ended never led to a release). These
tests replay such sequences with ``dg.evaluate_automation_conditions`` on a toy
graph carrying the real condition: an upstream partitioned asset, an observable
source standing for the verdicts, and a dataset-wide asset.
"""

from __future__ import annotations

import dagster as dg
import pytest

from assets.automation import dataset_automation

SCANS = dg.DynamicPartitionsDefinition(name="toy_scans")


@dg.asset(partitions_def=SCANS)
def scan_table() -> None:
    return None


@dg.observable_source_asset
def verdicts():
    return dg.DataVersion("v0")


@dg.asset(deps=[scan_table, verdicts], automation_condition=dataset_automation())
def dataset_table() -> None:
    return None


@dg.asset(deps=[dataset_table], automation_condition=dataset_automation())
def release_table() -> None:
    return None


DEFS = dg.Definitions(assets=[scan_table, verdicts, dataset_table, release_table])
DATASET = dg.AssetKey("dataset_table")
RELEASE = dg.AssetKey("release_table")


class Ticks:
    """One automation tick at a time on an ephemeral instance, the cursor carried from tick to tick."""

    def __init__(self):
        self.instance = dg.DagsterInstance.ephemeral()
        self.instance.add_dynamic_partitions("toy_scans", ["a", "b"])
        self.cursor = None

    def tick(self) -> int:
        """How many runs of the dataset asset this tick requests; its downstream asset always goes with it."""
        result = dg.evaluate_automation_conditions(defs=DEFS, instance=self.instance, cursor=self.cursor)
        self.cursor = result.cursor
        assert result.get_num_requested(RELEASE) == result.get_num_requested(DATASET)
        return result.get_num_requested(DATASET)

    def build_scan(self, key: str) -> None:
        assert dg.materialize([scan_table], instance=self.instance, partition_key=key).success

    def build_dataset(self) -> None:
        """One run of both dataset-wide assets selected, as automation submits it: no trigger for either afterwards
        (a run that also executed an asset is no upstream change of it)."""
        job = DEFS.resolve_implicit_global_asset_job_def()
        assert job.execute_in_process(instance=self.instance, asset_selection=[DATASET, RELEASE]).success

    def observe_verdicts(self, version: str) -> None:
        self.instance.report_runless_asset_event(
            dg.AssetObservation(asset_key="verdicts", tags={"dagster/data_version": version}))


@pytest.fixture
def ticks() -> Ticks:
    t = Ticks()
    t.tick()  # the first evaluation only starts the record
    t.build_scan("a")
    t.build_scan("b")
    assert t.tick() == 0  # scans built: the tick that sees it is per-scan automation's (assets.automation) ...
    assert t.tick() == 1  # ... then the dataset asset is requested
    t.build_dataset()  # ... and that run materializes it
    assert t.tick() == 0  # nothing new since
    return t


def test_a_scan_rebuilt_while_the_dataset_run_runs_leads_to_another_run(ticks):
    assert ticks.tick() == 0
    ticks.build_scan("a")  # rebuilt after the request, before the dataset run ends
    ticks.build_dataset()
    assert ticks.tick() == 0  # the scan's tick
    assert ticks.tick() == 1


def test_a_verdict_observed_in_the_tick_that_first_sees_the_dataset_run_end_leads_to_a_run(ticks):
    ticks.build_scan("b")
    assert ticks.tick() == 0
    assert ticks.tick() == 1
    ticks.build_dataset()  # the requested run ends ...
    ticks.observe_verdicts("v1")  # ... and a reviewer's edit is observed before the next tick
    assert ticks.tick() == 1


def test_a_change_in_the_tick_after_a_request_is_not_taken_as_handled(ticks):
    ticks.build_scan("b")
    assert ticks.tick() == 0
    assert ticks.tick() == 1  # requested at this tick; its run has not read its inputs yet
    ticks.observe_verdicts("v2")  # seen in the same tick as that request's reset
    assert ticks.tick() == 1


def test_nothing_new_requests_nothing_and_a_run_does_not_trigger_itself(ticks):
    for _ in range(3):
        assert ticks.tick() == 0
    ticks.observe_verdicts("v3")
    assert ticks.tick() == 1
    ticks.build_dataset()
    for _ in range(3):
        assert ticks.tick() == 0
