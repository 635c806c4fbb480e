"""PinpointQA assets: per-scan spatial representation and questions, dataset-wide splits.

``pinpoint_targets`` / ``pinpoint_neighbors`` need the mesh, read from what
the scene step stored (``partition_geometry``), not by parsing the scan again; ``pinpoint_qa_candidates`` is a pure
table step per scan over every budget; ``pinpoint_qa`` assigns scene-level
train/val/test splits over all partitions that succeeded, after Iterative Bias Pruning (its drops:
``pinpoint_qa_drops``). Nothing is produced
when the run configuration's ``profiles`` does not list ``pinpointqa``.
"""

import dagster as dg
import polars as pl

from assets.automation import dataset_automation
from assets.catalog import table_asset, table_out
from assets.partitions import scan_partitions
from assets.table_checks import PINPOINT_SUITES, check_spec, pinpoint_checks
from assets.scene import partition_geometry
from pipeline.table_scan import TableFrames, TableParts
from assets.scan_batches import (
    PerScanTable, ScanTables, in_range, only_scan, per_scan, record_check_results, scan_backfill_policy,
)
from assets.step_config import step_config
from pipeline.config import Config
from pipeline.pinpoint.config import PinpointConfig
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


def pinpoint_config(config: Config) -> PinpointConfig:
    """PinpointQA thresholds: the defaults with this run's ``pinpointqa`` overrides (validated); read here, above
    ``pipeline.config``, because the run config sits below the stages whose settings it carries."""
    return PinpointConfig.from_mapping(config.pinpointqa)


PROFILE = "pinpointqa"


@dg.multi_asset(
    outs={
        "pinpoint_targets": table_out(
            "pinpoint_targets", __name__, "small-vocabulary objects unique in their scene, with their support"
        ),
        "pinpoint_neighbors": table_out(
            "pinpoint_neighbors",
            __name__,
            "per target: neighbours within 1 m with shortest distance, offsets, contact, relation, support",
        ),
    },
    ins={"scans": dg.AssetIn("scans"), "objects": dg.AssetIn("objects")},
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="pinpointqa",
    can_subset=False,
    check_specs=[check_spec(name, per_scan=True) for name in PINPOINT_SUITES],
)
def pinpoint_representation(
    context: dg.AssetExecutionContext, storage: StorageResource, run_config: RunConfigResource,
    scans: pl.DataFrame, objects: pl.DataFrame,
):
    config = step_config(context, storage, run_config, __name__)
    if in_range(context):
        built = per_scan(context, "pinpoint_representation",
                         lambda key, **tables: representation_of(context, config, key, **tables),
                         scans=scans, objects=objects)
        yield dg.Output(ScanTables({key: pair[0] for key, pair in built.items()}), output_name="pinpoint_targets")
        yield dg.Output(ScanTables({key: pair[1] for key, pair in built.items()}), output_name="pinpoint_neighbors")
        yield from record_check_results(context, "pinpoint_representation", {
            key: pinpoint_checks(targets, neighbors, only_scan(objects, key), config)
            for key, (targets, neighbors) in built.items()
        })
        return
    key = context.partition_key
    targets, neighbors = representation_of(context, config, key, scans, objects)
    yield dg.Output(targets, output_name="pinpoint_targets")
    yield dg.Output(neighbors, output_name="pinpoint_neighbors")
    yield from pinpoint_checks(targets, neighbors, objects.filter(pl.col("key") == key), config)


def representation_of(
    context: dg.AssetExecutionContext, config: Config, key: str, scans: pl.DataFrame, objects: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    from pipeline import schemas
    from pipeline.pinpoint.representation import build_representation

    if PROFILE not in config.profiles:
        return schemas.empty("pinpoint_targets"), schemas.empty("pinpoint_neighbors")
    parsed = partition_geometry(context, config, scans, objects, key)
    return build_representation(key, objects.filter(pl.col("key") == key), parsed, config=pinpoint_config(config))


@dg.asset(
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="pinpointqa",
    ins={name: dg.AssetIn(name) for name in ("pinpoint_targets", "pinpoint_neighbors", "objects", "object_visibility")},
    description="PinpointQA questions (NRI, FSD, SSP; TPV positives) of one scan for every budget, visible targets only",
    **table_asset("pinpoint_qa_candidates", __name__),
)
def pinpoint_qa_candidates(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    run_config: RunConfigResource,
    pinpoint_targets: pl.DataFrame,
    pinpoint_neighbors: pl.DataFrame,
    objects: pl.DataFrame,
    object_visibility: pl.DataFrame,
) -> PerScanTable:
    from pipeline import schemas
    from pipeline.frames.budgets import frame_budgets
    from pipeline.pinpoint.questions import generate_questions

    config = step_config(context, storage, run_config, __name__)
    if PROFILE not in config.profiles:
        return per_scan(context, "pinpoint_qa_candidates", lambda key: schemas.empty("pinpoint_qa_candidates"))

    # Presence positives are kept apart from the scan's other PinpointQA questions only: the revsi/vsibench
    # candidates name every visible small object, so no label would be left (pipeline/pinpoint/presence.py).
    def questions_of(key: str, targets, neighbors, objects, visibility) -> pl.DataFrame:
        return generate_questions(key, targets, neighbors, objects, visibility, config=pinpoint_config(config),
                                  seed=config.seed, budgets=frame_budgets(config))

    table = per_scan(context, "pinpoint_qa_candidates", questions_of, targets=pinpoint_targets,
                     neighbors=pinpoint_neighbors, objects=objects, visibility=object_visibility)
    if not isinstance(table, ScanTables):
        per_type = dict(table["question_type"].value_counts().sort("question_type").iter_rows())
        context.add_output_metadata({"per_type": dg.MetadataValue.json(per_type)})
    return table


@dg.multi_asset(
    outs={
        "pinpoint_qa": table_out(
            "pinpoint_qa", __name__,
            "all PinpointQA questions with the dataset-wide presence negatives, pruned against the learned blind "
            "adversary, and scene-level train/val/test splits (≈ 6:2:2, stratified by dataset)",
            automation_condition=dataset_automation(),
        ),
        "pinpoint_qa_drops": table_out(
            "pinpoint_qa_drops", __name__,
            "PinpointQA questions Iterative Bias Pruning dropped, with their reason (appended to qa_distribution_drops)",
            automation_condition=dataset_automation(),
        ),
    },
    group_name="pinpointqa",
    ins={
        "pinpoint_qa_candidates": dg.AssetIn("pinpoint_qa_candidates", partition_mapping=dg.AllPartitionMapping()),
        "objects": dg.AssetIn("objects", partition_mapping=dg.AllPartitionMapping()),
        "scan_membership": dg.AssetIn("scan_membership"),
    },
    deps=["reviewer_verdicts"],  # accepted questions are pinned: a new verdict makes the pruning stale
    can_subset=False,
)
def pinpoint_qa(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    run_config: RunConfigResource,
    pinpoint_qa_candidates: TableParts,
    objects: TableParts,
    scan_membership: pl.DataFrame,
):
    from pipeline.pinpoint.presence import draw_presence_per_split
    from pipeline.pinpoint.splits import with_splits
    from pipeline.qa.balance import balance_letters
    from pipeline.qa.bias_pruning import prune_table
    from pipeline.qa.letter_key import build_key
    from pipeline.release.membership import built_keys
    from pipeline.release.verdicts import accepted_ids, read_verdicts

    # Per-scan option orders are fixed per target; the correct letter is balanced over the whole benchmark.
    config = step_config(context, storage, run_config, __name__)
    keys = built_keys(scan_membership)
    candidates = pinpoint_qa_candidates.only(keys).read()
    # Presence is drawn over the benchmark, within each split: each positive is matched with a scene that lacks its
    # label and one of the two is asked, the side drawn with the letter key (pipeline/pinpoint/presence.py);
    # "absent" is judged against every object label of a scene. The draw fixes the scenes' splits first.
    labels = objects.only(keys).read(["key", "raw_label"]).group_by("key").agg(pl.col("raw_label"))
    key = build_key(config.output_root, config.storage_options)  # secret: ids and seed ship with the release
    candidates, scene_splits = draw_presence_per_split(
        candidates, dict(zip(labels["key"].to_list(), labels["raw_label"].to_list())), config.seed,
        pinpoint_config(config), key,
    )
    # The last selection, as in the qa step: what the learned blind adversary answers goes, reviewer-accepted
    # questions never do; letters are balanced on what is left.
    pinned = frozenset(accepted_ids(read_verdicts(config.verdicts_path, config.storage_options)))
    candidates, drops = prune_table(candidates, seed=config.seed, pinned=pinned)
    balanced = balance_letters(candidates, seed=config.seed, letters="ABCD", letter_key=key)
    table = with_splits(balanced, pinpoint_config(config), previous=scene_splits)
    table = table.sort(["key", "budget", "question_type", "id"])
    counts = table.group_by("split", "question_type").len().sort("split", "question_type")
    per_split = {f"{r['split']}/{r['question_type']}": r["len"] for r in counts.iter_rows(named=True)}
    dropped = dict(drops.group_by("question_type").len().sort("question_type").iter_rows())
    # Handed over as a one-shot stream of one frame: a run in one process (``scan2qa build``) keeps every output's
    # value until the run ends, and this table (a million rows at 10,000 scans) would stay through the qa step
    # and the release; the exhausted iterator lets it go once written.
    yield dg.Output(TableFrames("pinpoint_qa", iter([table])), output_name="pinpoint_qa",
                    metadata={"per_split": dg.MetadataValue.json(per_split)})
    yield dg.Output(drops, output_name="pinpoint_qa_drops", metadata={"per_type": dg.MetadataValue.json(dropped)})
