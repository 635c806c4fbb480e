"""Release membership read from a real Dagster instance: toy per-scan assets, runs that succeed, fail or are
still going, a failed blocking check, and a rerun that repairs a scan."""

import dagster as dg
import pytest

from assets.membership import scan_states
from pipeline.errors import ScanError
from pipeline.release.membership import (
    BUILT,
    CHECKS_FAILED,
    FAILED,
    IN_PROGRESS,
    NOT_BUILT,
    STALE,
    ScanState,
    built_keys,
    membership_table,
    worst,
)

parts = dg.DynamicPartitionsDefinition(name="scans")
BROKEN: set[str] = set()  # keys whose "tables" step raises
BAD_CHECK: set[str] = set()  # keys whose check fails


@dg.asset(partitions_def=parts, check_specs=[dg.AssetCheckSpec("tables_ok", asset="tables", blocking=True)])
def tables(context: dg.AssetExecutionContext):
    key = context.partition_key
    if key in BROKEN:
        raise ScanError(key, "mesh.ply", "truncated: 12 of 40 bytes")
    yield dg.Output(1)
    yield dg.AssetCheckResult(check_name="tables_ok", passed=key not in BAD_CHECK, description="a rule")


@dg.asset(partitions_def=parts)
def questions(tables):
    return 2


ASSETS = [dg.AssetKey("tables"), dg.AssetKey("questions")]
CHECKS = [dg.AssetCheckKey(dg.AssetKey("tables"), "tables_ok")]


def run(instance, key: str) -> bool:
    from dagster import materialize

    result = materialize([tables, questions], instance=instance, partition_key=key, raise_on_error=False,
                         resources={"io_manager": dg.mem_io_manager})
    return result.success


@pytest.fixture
def instance():
    BROKEN.clear()
    BAD_CHECK.clear()
    with dg.instance_for_test() as inst:
        inst.add_dynamic_partitions("scans", ["d/ok", "d/broken", "d/check", "d/never", "d/repaired"])
        yield inst


def states(instance) -> dict[str, ScanState]:
    keys = sorted(instance.get_dynamic_partitions("scans"))
    return {s.key: s for s in scan_states(instance, keys, ASSETS, CHECKS)}


def test_each_partition_state_comes_from_its_latest_attempt(instance):
    assert run(instance, "d/ok")
    assert run(instance, "d/broken")  # built once ...
    BROKEN.add("d/broken")
    assert not run(instance, "d/broken")  # ... then its rerun fails: its old tables must not ship
    BAD_CHECK.add("d/check")
    assert not run(instance, "d/check")
    BROKEN.add("d/repaired")
    assert not run(instance, "d/repaired")
    BROKEN.discard("d/repaired")
    assert run(instance, "d/repaired")

    found = states(instance)
    assert found["d/ok"].state == BUILT and found["d/repaired"].state == BUILT
    assert found["d/broken"].state == FAILED
    assert found["d/broken"].error == "d/broken: mesh.ply: truncated: 12 of 40 bytes"
    assert found["d/check"].state == CHECKS_FAILED and found["d/check"].error == "expectations failed: tables (a rule)"
    assert found["d/never"].state == NOT_BUILT
    assert built_keys(membership_table(list(found.values()))) == ["d/ok", "d/repaired"]


def test_a_failed_run_the_daemon_will_retry_leaves_its_scan_in_progress_not_failed(instance):
    """A run that lost a service and will be retried (``dagster/will_retry``) has not failed its scan yet."""
    BROKEN.add("d/broken")
    assert not run(instance, "d/broken")
    failed = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": "d/broken"}))[0]
    instance.add_run_tags(failed.run_id, {"dagster/will_retry": "true"})
    assert states(instance)["d/broken"].state == IN_PROGRESS
    instance.add_run_tags(failed.run_id, {"dagster/will_retry": "false"})
    assert states(instance)["d/broken"].state == FAILED


def test_the_worst_table_state_is_the_scans_state():
    assert worst([BUILT, BUILT]) == BUILT
    assert worst([BUILT, NOT_BUILT]) == NOT_BUILT
    assert worst([FAILED, NOT_BUILT, BUILT]) == FAILED
    assert worst([FAILED, CHECKS_FAILED]) == CHECKS_FAILED
    assert worst([IN_PROGRESS, FAILED]) == IN_PROGRESS
    with pytest.raises(ValueError):
        ScanState("a/b", "maybe")


def test_a_check_that_failed_without_a_failed_downstream_still_excludes_the_scan(instance):
    """Only ``tables`` rematerialized (as from its asset page) and its check failed: nothing downstream failed."""
    assert run(instance, "d/ok")
    BAD_CHECK.add("d/ok")
    from dagster import materialize

    materialize([tables, questions], selection=[tables], instance=instance, partition_key="d/ok",
                raise_on_error=False, resources={"io_manager": dg.mem_io_manager})
    found = states(instance)["d/ok"]
    assert found.state == CHECKS_FAILED and found.error == "expectations failed: tables (a rule)", found


def lineage_states(instance, code_versions=None) -> dict[str, ScanState]:
    keys = sorted(instance.get_dynamic_partitions("scans"))
    parents = {dg.AssetKey("tables"): frozenset(), dg.AssetKey("questions"): frozenset({dg.AssetKey("tables")})}
    return {s.key: s for s in scan_states(instance, keys, ASSETS, CHECKS, parents, code_versions or {})}


def test_a_table_older_than_its_rebuilt_input_is_stale(instance):
    """``tables`` rerun alone (from its asset page): ``questions`` still holds answers of the old ``tables``."""
    from dagster import materialize

    assert run(instance, "d/ok") and run(instance, "d/check")
    assert materialize([tables, questions], selection=[tables], instance=instance, partition_key="d/ok",
                       resources={"io_manager": dg.mem_io_manager}).success
    found = lineage_states(instance)
    assert found["d/ok"].state == STALE, found["d/ok"]
    assert found["d/ok"].error.startswith("questions was built before its input tables was built again"), found["d/ok"]
    assert found["d/check"].state == BUILT
    assert built_keys(membership_table(list(found.values()))) == ["d/check"]
    assert run(instance, "d/ok")  # the whole partition built again: its tables belong together
    assert lineage_states(instance)["d/ok"].state == BUILT


def test_a_table_built_by_other_code_or_config_is_stale(instance):
    """Materializations record their asset's code version: a code location that now gives "v2" (a threshold
    changed) finds the scans built by "v1" stale; one reported from outside a run records none and is not judged."""

    @dg.asset(partitions_def=parts, code_version="v1", name="tables")
    def tables_v1(context):
        return 1

    for key in ("d/ok", "d/check"):
        assert dg.materialize([tables_v1, questions], instance=instance, partition_key=key,
                              resources={"io_manager": dg.mem_io_manager}).success
    for asset_key in ASSETS:  # tables written without a run of them (assets.membership.record_built_elsewhere)
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=asset_key, partition="d/never"))
    same = lineage_states(instance, {dg.AssetKey("tables"): "v1"})
    assert {k for k, s in same.items() if s.state == BUILT} == {"d/ok", "d/check", "d/never"}, same
    changed = lineage_states(instance, {dg.AssetKey("tables"): "v2"})
    assert changed["d/never"].state == BUILT, changed  # nothing recorded, nothing to judge
    assert changed["d/check"].state == STALE
    assert "tables was built by code version v1, the code location now gives v2" in changed["d/check"].error


def test_stale_loses_to_every_state_that_explains_more():
    assert worst([BUILT, STALE]) == STALE
    assert worst([STALE, NOT_BUILT]) == NOT_BUILT
    assert worst([STALE, FAILED]) == FAILED
