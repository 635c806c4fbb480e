"""Question assets: per-scan ``qa_candidates`` (ReVSI and VSI-Bench profiles) and the dataset-wide ``qa``.

Candidates are generated per scan partition for every budget and every
question profile of the run configuration that has a YAML profile in
``pipeline/qa/profiles`` (the PinpointQA questions have their own step). The
``qa`` asset applies the dataset-wide step (exclusions, subsampling, caps,
letter balancing) per profile over all partitions that succeeded.
"""

import itertools

import dagster as dg
import polars as pl

from assets.automation import dataset_automation
from assets.catalog import table_asset, table_out
from assets.partitions import scan_partitions
from assets.scan_batches import PerScanTable, per_scan, scan_backfill_policy
from assets.step_config import step_config
from pipeline import schemas
from pipeline.table_scan import TableFrames, TableParts
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


def question_profiles(configured: tuple[str, ...]) -> list[str]:
    from pipeline.qa.profiles import PROFILE_DIR

    return [name for name in configured if (PROFILE_DIR / f"{name}.yaml").is_file()]


@dg.asset(
    partitions_def=scan_partitions,
    backfill_policy=scan_backfill_policy(),
    group_name="qa",
    ins={name: dg.AssetIn(name) for name in ("objects", "rooms", "object_visibility", "frame_samples", "dummy_videos")},
    description="every eligible ReVSI / VSI-Bench question of one scan, per budget, with answers and audit geometry",
    **table_asset("qa_candidates", __name__),
)
def qa_candidates(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    run_config: RunConfigResource,
    objects: pl.DataFrame,
    rooms: pl.DataFrame,
    object_visibility: pl.DataFrame,
    frame_samples: pl.DataFrame,
    dummy_videos: pl.DataFrame,
) -> PerScanTable:
    from pipeline.frames.budgets import frame_budgets
    from pipeline.qa import generate_candidates

    config = step_config(context, storage, run_config, __name__)

    def candidates_of(key, objects, rooms, object_visibility, frame_samples, dummy_videos) -> pl.DataFrame:
        frames = [
            generate_candidates(objects, rooms, object_visibility, frame_samples, dummy_videos,
                                key=key, budget=budget, profile=profile, config=config)
            for profile in question_profiles(config.profiles)
            for budget in frame_budgets(config)
        ]
        return pl.concat(frames) if frames else schemas.empty("qa_candidates")

    return per_scan(context, "qa_candidates", candidates_of, objects=objects, rooms=rooms,
                    object_visibility=object_visibility, frame_samples=frame_samples, dummy_videos=dummy_videos)


@dg.multi_asset(
    outs={
        "qa": table_out(
            "qa", __name__, "the filtered, subsampled, letter-balanced question table of the whole benchmark (all profiles)",
            automation_condition=dataset_automation(),
        ),
        "qa_distribution_drops": table_out(
            "qa_distribution_drops",
            __name__,
            "questions the answer-distribution control dropped, per profile, with answer class and reason",
            automation_condition=dataset_automation(),
        ),
    },
    ins={
        "qa_candidates": dg.AssetIn("qa_candidates", partition_mapping=dg.AllPartitionMapping()),
        "pinpoint_qa": dg.AssetIn("pinpoint_qa"),
        "pinpoint_qa_drops": dg.AssetIn("pinpoint_qa_drops"),
        "scan_membership": dg.AssetIn("scan_membership"),
    },
    deps=["reviewer_verdicts"],  # accepted questions are pinned: a new verdict makes qa stale
    group_name="qa",
    can_subset=False,
)
def qa(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    run_config: RunConfigResource,
    qa_candidates: TableParts,
    pinpoint_qa: TableParts,
    pinpoint_qa_drops: pl.DataFrame,
    scan_membership: pl.DataFrame,
):
    from pipeline.qa.finalize import streamed_qa_parts
    from pipeline.qa.letter_key import build_key
    from pipeline.release.churn import previous_release
    from pipeline.release.membership import built_keys
    from pipeline.release.verdicts import accepted_ids, read_verdicts

    config = step_config(context, storage, run_config, __name__)
    drops: list[pl.DataFrame] = []
    pinned = accepted_ids(read_verdicts(config.verdicts_path, config.storage_options))  # accepted: never dropped
    # The latest release's questions are soft pins (``pipeline.qa.stability``): kept unless a bound forces them out;
    # a scan that release left out brings back the questions of the last release that held it.
    built = built_keys(scan_membership)
    previous = previous_release(config.releases_root, config.storage_options, keys=built)
    # Candidates arrive unread: thousands of scans' worth is read in batches of whole scans, and only the scans
    # the instance says were built (a failed rerun's partition may still hold its old file). The questions are
    # decided on a few columns and written a batch of scans at a time (``TableFrames``): at 10,000 scans the
    # table is gigabytes.
    with streamed_qa_parts(
        qa_candidates.only(built), profiles=question_profiles(config.profiles),
        seed=config.seed, drops=drops, pinned=pinned, letter_key=build_key(config.output_root, config.storage_options),
        previous=previous,
    ) as decided:
        counts = decided.counts
        pinpoint = "pinpointqa" in config.profiles
        if pinpoint:
            kinds = pinpoint_qa.read(["profile", "question_type"])
            counts = pl.concat([counts, kinds.group_by("profile", "question_type").len().cast({"len": pl.UInt32})])
        counts = counts.group_by("profile", "question_type").agg(pl.col("len").sum()).sort("profile", "question_type")
        per_type = {f"{r['profile']}/{r['question_type']}": r["len"] for r in counts.iter_rows(named=True)}
        # The PinpointQA rows come last, read when the writer reaches them: a million rows at 10,000 scans that
        # need not wait in memory through the decisions.
        tail = (schemas.conform("qa", pinpoint_qa.read()) for _ in range(1 if pinpoint else 0))
        frames = itertools.chain(decided.frames(), tail)
        soft_pins = len(previous.released) if previous else 0
        yield dg.Output(TableFrames("qa", frames), output_name="qa", metadata={
            "per_type": dg.MetadataValue.json(per_type), "soft pins": dg.MetadataValue.int(soft_pins),
        })
    if pinpoint and not pinpoint_qa_drops.is_empty():  # PinpointQA's pruning, recorded beside the other profiles'
        drops.append(schemas.conform("qa_distribution_drops", pinpoint_qa_drops))
    record = schemas.conform("qa_distribution_drops", pl.concat(drops)) if drops else schemas.empty("qa_distribution_drops")
    yield dg.Output(record, output_name="qa_distribution_drops")
