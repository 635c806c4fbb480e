"""A partition's per-scan assets follow a partial rerun of it, and nothing else, evaluated tick by tick.

Rebuilding one asset of one partition (the UI's Materialize on an asset's page) left the tables downstream of it
older than their input, and the next release dropped the scan as stale. The per-scan assets now carry
``assets.automation.scan_automation()``; these tests replay, with ``dg.evaluate_automation_conditions`` on a toy
chain carrying the real conditions, that a partial rerun requests exactly the partition's assets downstream of
it, in one tick, while the release waits; and that whole-scan runs (also one that spans a tick, a job run
without an asset selection, as ``scan_job`` runs are, and one whose last step ends while a tick is being
evaluated, as on the Celery deployment) and failed runs request nothing per scan.
"""

import threading

import dagster as dg
import pytest
from dagster._core.storage.partition_status_cache import AssetStatusCacheValue

from assets.automation import dataset_automation, with_scan_automation
from assets.jobs import SCAN_TAGS

SCANS = dg.DynamicPartitionsDefinition(name="toy_scan_parts")
FAILING: set[str] = set()  # partitions whose ``cast`` raises
DURING_CAST: list = []  # called inside ``cast``: a tick while its run is still going
DURING_VIDEOS: list = []  # called inside ``videos``


@dg.asset(partitions_def=SCANS)
def parsed() -> None:
    return None


@dg.asset(partitions_def=SCANS, deps=[parsed])
def cast(context: dg.AssetExecutionContext) -> None:
    for hook in DURING_CAST:
        hook()
    if context.partition_key in FAILING:
        raise RuntimeError("cast failed")


@dg.asset(partitions_def=SCANS, deps=[cast, parsed])
def videos() -> None:
    for hook in DURING_VIDEOS:
        hook()


@dg.asset(deps=[dg.AssetDep(k, partition_mapping=dg.AllPartitionMapping()) for k in ("parsed", "cast", "videos")],
          automation_condition=dataset_automation())
def membership() -> None:
    return None


@dg.asset(deps=[dg.AssetDep("cast", partition_mapping=dg.AllPartitionMapping()), membership],
          automation_condition=dataset_automation())
def questions() -> None:
    """A dataset-wide asset reading one per-scan table and the membership, as ``pinpoint_qa`` does."""
    return None


ASSETS = with_scan_automation([parsed, cast, videos, membership, questions], SCANS)
SCAN_JOB = dg.define_asset_job("toy_scan_job", selection=["parsed", "cast", "videos"], partitions_def=SCANS,
                               tags=SCAN_TAGS)  # as assets.jobs tags scan_job
DEFS = dg.Definitions(assets=ASSETS, jobs=[SCAN_JOB])
PER_SCAN = [dg.AssetKey(name) for name in ("parsed", "cast", "videos")]
MEMBERSHIP = dg.AssetKey("membership")
DATASET = [MEMBERSHIP, dg.AssetKey("questions")]


class Ticks:
    def __init__(self):
        self.instance = dg.DagsterInstance.ephemeral()
        self.instance.add_dynamic_partitions(SCANS.name, ["a", "b"])
        self.cursor = None

    def tick(self) -> dict[str, set]:
        """What this tick requests: asset name -> partitions."""
        result = dg.evaluate_automation_conditions(defs=DEFS, instance=self.instance, cursor=self.cursor)
        self.cursor = result.cursor
        requested = {key.path[-1]: set(result.get_requested_partitions(key)) for key in [*PER_SCAN, *DATASET]}
        return {name: keys for name, keys in requested.items() if keys}

    def run(self, key: str | None, *names: str, job: bool = False) -> bool:
        """A run of ``names`` of partition ``key`` (all per-scan assets when none), or of ``toy_scan_job``."""
        if job:
            definition = DEFS.resolve_job_def(SCAN_JOB.name)
            return definition.execute_in_process(instance=self.instance, partition_key=key,
                                                 raise_on_error=False).success
        selection = [dg.AssetKey(n) for n in names] if names else (PER_SCAN if key else DATASET)
        definition = DEFS.resolve_implicit_global_asset_job_def()
        return definition.execute_in_process(instance=self.instance, partition_key=key, asset_selection=selection,
                                             raise_on_error=False).success


@pytest.fixture
def ticks() -> Ticks:
    FAILING.clear()
    DURING_CAST.clear()
    DURING_VIDEOS.clear()
    t = Ticks()
    t.tick()  # the first evaluation only starts the record
    assert t.run("a", job=True) and t.run("b", job=True)
    assert t.tick() == {}  # the release waits one tick after scan tables change ...
    assert t.tick() == {"membership": {None}, "questions": {None}}  # ... then follows
    assert t.run(None)
    assert t.tick() == {}
    return t


def test_one_asset_rerun_requests_its_partitions_downstream_assets_while_the_release_waits(ticks):
    assert ticks.run("a", "cast")  # as from the asset's page
    assert ticks.tick() == {"videos": {"a"}}  # that partition, that asset; the release waits for it
    assert ticks.run("a", "videos")  # the requested run
    assert ticks.tick() == {}
    assert ticks.tick() == {"membership": {None}, "questions": {None}}  # one release, after the heal
    assert ticks.run(None)
    for _ in range(3):
        assert ticks.tick() == {}


def test_a_rerun_of_the_first_asset_requests_everything_downstream_in_one_tick(ticks):
    assert ticks.run("b", "parsed")
    assert ticks.tick() == {"cast": {"b"}, "videos": {"b"}}  # one tick, so one run: videos follows cast in it
    assert ticks.run("b", "cast", "videos")
    assert ticks.tick() == {}
    assert ticks.tick() == {"membership": {None}, "questions": {None}}


@pytest.mark.parametrize("job", [False, True])
def test_whole_scan_runs_request_nothing_per_scan(ticks, job):
    DURING_CAST.append(lambda: ticks.tick())  # a tick while the run is between its steps
    assert ticks.run("a", job=job)
    assert ticks.tick() == {}
    assert ticks.tick() == {"membership": {None}, "questions": {None}}
    assert ticks.run(None)
    for _ in range(3):
        assert ticks.tick() == {}


def test_a_failed_run_is_not_retried_by_automation(ticks):
    FAILING.add("a")
    DURING_CAST.append(lambda: ticks.tick())
    assert not ticks.run("a", job=True)
    # The release follows the failure (and leaves the scan out); nothing per scan is requested.
    assert ticks.tick() == {"membership": {None}, "questions": {None}}
    assert ticks.run(None)
    for _ in range(3):
        assert ticks.tick() == {}
    FAILING.clear()
    assert ticks.run("a", "cast")  # its repair, one asset at a time, is followed as any partial rerun
    assert ticks.tick() == {"videos": {"a"}}


def test_the_dataset_waits_for_the_whole_heal_not_only_the_tables_it_reads(ticks):
    """The heal builds ``cast`` then ``videos``: ``questions`` reads ``cast`` only, yet waits for ``videos`` too."""
    assert ticks.run("b", "parsed")
    assert ticks.tick() == {"cast": {"b"}, "videos": {"b"}}
    seen: list[dict] = []
    DURING_VIDEOS.append(lambda: seen.extend([ticks.tick(), ticks.tick()]))  # cast built, videos still going
    assert ticks.run("b", "cast", "videos")
    assert seen == [{}, {}]
    assert ticks.tick() == {}
    assert ticks.tick() == {"membership": {None}, "questions": {None}}  # one dataset-wide run


def test_a_failed_first_build_retried_one_asset_at_a_time_builds_what_it_never_reached(ticks):
    """A new scan's first run fails at ``cast``, so ``videos`` was never built; ``cast`` retried alone is followed."""
    ticks.instance.add_dynamic_partitions(SCANS.name, ["c"])
    FAILING.add("c")
    assert not ticks.run("c", job=True)
    assert ticks.tick() == {}  # the tick that sees ``parsed`` of that run: nothing per scan, and a wait
    assert ticks.tick() == {"membership": {None}, "questions": {None}}
    assert ticks.run(None)
    assert ticks.tick() == {}
    FAILING.clear()
    assert ticks.run("c", "cast")
    assert ticks.tick() == {"videos": {"c"}}


def test_a_scan_run_whose_step_ends_during_a_slow_tick_requests_nothing_per_scan(ticks, monkeypatch):
    """The Celery deployment's spurious runs, replayed: a scan job's run of a has built ``parsed`` and ``cast`` and
    is in ``videos``, while a run of b builds all three; then ``videos`` of a is built while a tick is evaluated,
    after the tick has read which tables were updated and before it reads the partition statuses (in progress,
    failed). That tick saw ``videos`` neither updated nor in progress, and ``scan_automation`` requested it while
    its run went on, until a scan job's updates stopped counting as a partial rerun's, partition by partition
    (``executed_with_root_target`` and ``executed_with_tags`` read the run of a table's newest materialization of
    any partition: b's)."""
    reached, go = threading.Event(), threading.Event()
    DURING_VIDEOS.append(lambda: (reached.set(), go.wait(60)))
    outcome: list[bool] = []
    run = threading.Thread(target=lambda: outcome.append(ticks.run("a", job=True)))
    run.start()
    assert reached.wait(60)
    DURING_VIDEOS.clear()
    assert ticks.run("b", job=True)  # another scan built meanwhile: the newest run of each table is not a's
    assert ticks.tick() == {}  # ``videos`` of a in progress: nothing, and the release waits

    load_statuses = AssetStatusCacheValue._blocking_batch_load.__func__

    def step_ends_first(cls, keys, context):
        keys = list(keys)
        if any(key == dg.AssetKey("videos") for key, _ in keys) and not go.is_set():
            go.set()
            run.join(60)
        return load_statuses(cls, keys, context)

    monkeypatch.setattr(AssetStatusCacheValue, "_blocking_batch_load", classmethod(step_ends_first))
    slow_tick = ticks.tick()
    monkeypatch.undo()
    assert go.is_set() and outcome == [True]
    assert not set(slow_tick) & {"parsed", "cast", "videos"}, slow_tick  # nothing per scan
    # The release may follow in the slow tick itself (it saw the run finished, not yet ``videos`` updated) and
    # again once that update is seen: the same tables twice, no scan left out. Nothing else, then quiet.
    releases = 0
    for requested in [slow_tick, ticks.tick(), ticks.tick()]:
        assert requested in ({}, {"membership": {None}, "questions": {None}}), requested
        if requested:
            releases += 1
            assert ticks.run(None)
    assert 1 <= releases <= 2
    for _ in range(3):
        assert ticks.tick() == {}
