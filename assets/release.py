"""The release: reviewer verdicts (observed) and the gated ``release`` asset.

The release step is the one gate per release: it applies reviewer verdicts,
validates exactly the tables it releases with every expectation suite once
(Great Expectations, imported only here), builds the Data Docs site once and
writes the release atomically (``pipeline.release.build``); a failing
expectation raises ``ReleaseBlocked`` and the previous release stays. Each
table's suite is also an asset check on that table's own asset
(``assets.table_checks``, decided in polars, no Great Expectations), so a
broken table shows on its own catalog page and stops before the release.
A release that leaves registered scans out still publishes, but its
``all_registered_scans_released`` check warns and its metadata counts them, so
the catalog does not show it as complete; its report and Data Docs open from
the catalog (``page_link``, and the embedded Markdown ``summary``).
"""

import os

import dagster as dg
import polars as pl

from assets.automation import dataset_automation
from assets.catalog import file_asset, link_value, observed_spec, path_value
from assets.step_config import step_config
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


@dg.multi_observable_source_asset(
    specs=[
        observed_spec(
            "reviewer_verdicts", __name__, {"csv"},
            "reviewer verdicts CSV (qa_id, verdict, note, reviewer); observed when it changes "
            "(verdicts_watch) and by scan2qa build before each release",
        )
    ],
)
def reviewer_verdicts(storage: StorageResource, run_config: RunConfigResource) -> dg.ObserveResult:
    """Versioned by the file's content, so a new verdict marks the release stale (``verdicts_watch`` observes it
    whenever the file changes; ``scan2qa build`` before each release)."""
    from pipeline.release.verdicts import verdicts_fingerprint

    config = run_config.config(storage)
    found = verdicts_fingerprint(config.verdicts_path, config.storage_options)
    return dg.ObserveResult(
        asset_key="reviewer_verdicts",
        data_version=dg.DataVersion(found["version"]),
        metadata={"path": path_value(config.verdicts_path), "exists": found["exists"], "dagster/row_count": found["rows"]},
    )


ALL_SCANS_CHECK = "all_registered_scans_released"
ADVERSARY_CHECK = "blind_adversary_within_bounds"
RELEASE_URL = "SCAN2QA_RELEASE_URL"  # the HTTP address the releases folder is served at (make ui: 127.0.0.1:3001)


def page_link(path, version: str, page: str) -> dg.MetadataValue:
    """A release page as the UI can open it: under ``SCAN2QA_RELEASE_URL`` when the deployment serves the releases
    folder over HTTP; else an object store's URL, or the local path to copy (a browser refuses ``file://`` links
    from a web page, so a local file is never offered as one)."""
    base = os.environ.get(RELEASE_URL, "").strip().rstrip("/")
    if base:
        return dg.MetadataValue.url(f"{base}/{version}/{page}")
    return link_value(path) if "://" in str(path) else path_value(path)


@dg.asset(
    deps=["qa", "qa_distribution_drops", reviewer_verdicts],
    ins={"scan_membership": dg.AssetIn("scan_membership")},
    group_name="release",
    description="gated, atomic release with manifest, reviewer report and Data Docs (the one Great Expectations gate)",
    automation_condition=dataset_automation(),
    check_specs=[
        dg.AssetCheckSpec(
            ALL_SCANS_CHECK, asset="release",
            description="every registered scan is in the release (warns, naming each scan left out and why)",
        ),
        dg.AssetCheckSpec(
            ADVERSARY_CHECK, asset="release",
            description="the learned blind adversary (SPEC §6) scores within its bound on every pruned question type "
            "(warns, naming each type over it)",
        ),
    ],
    **file_asset(__name__, {"great_expectations", "html"}),
)
def release(
    context: dg.AssetExecutionContext, storage: StorageResource, run_config: RunConfigResource,
    scan_membership: pl.DataFrame,
) -> dg.MaterializeResult:
    from pipeline.release.build import DATA_DOCS_INDEX, REPORT_INDEX, build_release
    from expectations.release_gate import release_gate
    from pipeline.release.membership import state_counts
    from pipeline.release.summary import release_summary_md

    config = step_config(context, storage, run_config, __name__)
    outcome = build_release(config, membership=scan_membership, gate=release_gate)
    manifest = outcome.release.manifest
    context.log.info(f"release {outcome.release.version} written to {outcome.release.path}")
    counts = manifest["row_counts"]
    excluded = manifest["checks"]["excluded_scans"]["failed_scans"]
    registered = scan_membership.height
    return dg.MaterializeResult(
        metadata={
            "scans released": dg.MetadataValue.text(f"{registered - len(excluded)} of {registered}"),
            "excluded scans": dg.MetadataValue.int(len(excluded)),
            "version": outcome.release.version,
            "path": path_value(outcome.release.path),
            "report": page_link(outcome.report, outcome.release.version, REPORT_INDEX),
            "data_docs": page_link(outcome.data_docs, outcome.release.version, DATA_DOCS_INDEX),
            "summary": dg.MetadataValue.md(release_summary_md(manifest, registered)),
            "dagster/uri": dg.MetadataValue.text(str(outcome.release.path)),
            "scans": dg.MetadataValue.json(state_counts(scan_membership)),
            "excluded_scans": dg.MetadataValue.md(
                "| scan | state | error |\n|---|---|---|\n"
                + "\n".join(f"| {e['key']} | {e['state']} | {e['error'].replace('|', '/')} |" for e in excluded)
            ) if excluded else dg.MetadataValue.text("none"),
            "dagster/row_count": dg.MetadataValue.int(int(counts.get("qa", 0))),
            "tables": dg.MetadataValue.md(
                "| table | rows |\n|---|---|\n" + "\n".join(f"| {name} | {n:,} |" for name, n in sorted(counts.items()))
            ),
            "rejected_by_reviewers": len(outcome.rejected),
            "orphan_verdicts": len(outcome.orphan_verdicts),
        },
        check_results=[all_scans_released(excluded, registered), adversary_within_bounds(manifest["checks"]["baselines"])],
    )


def all_scans_released(excluded: list[dict], registered: int) -> dg.AssetCheckResult:
    """Fails (WARN: the release is still published and usable) when any registered scan was left out, so a partial
    release is not the green asset a complete one is; its metadata names each scan with its state and error."""
    return dg.AssetCheckResult(
        check_name=ALL_SCANS_CHECK,
        passed=not excluded,
        severity=dg.AssetCheckSeverity.WARN,
        description=(f"{len(excluded)} of {registered} registered scans left out of the release" if excluded
                     else f"all {registered} registered scans released"),
        metadata={
            "excluded scans": dg.MetadataValue.int(len(excluded)),
            "scans": dg.MetadataValue.json({e["key"]: f"{e['state']}: {e['error']}" for e in excluded}),
        },
    )


def _pruned_settings(profile: str, question_type: str) -> dict | None:
    """Balance settings of a type Iterative Bias Pruning holds (revsi's ``adversary: true`` types, PinpointQA's
    presence and reference questions), None for the rest (vsibench reproduces VSI-Bench's biases on purpose)."""
    from pipeline.qa.bias_pruning import PINPOINT_TYPES
    from pipeline.qa.profiles import PROFILE_DIR, load_profile

    if profile == "pinpointqa":
        return PINPOINT_TYPES.get(question_type)
    if not (PROFILE_DIR / f"{profile}.yaml").is_file():
        return None
    task = load_profile(profile).tasks.get(question_type)
    balance = dict(task.balance or {}) if task is not None else {}
    return balance if balance.get("adversary") else None


def adversary_within_bounds(baselines: list[dict]) -> dg.AssetCheckResult:
    """Fails (WARN) when a pruned type's learned blind adversary still scores over its bound (a type pruning left at
    its floor, or too small to prune): the benchmark is published, and the types a text-only model passes are named."""
    from pipeline.qa.bias_pruning import adversary_overruns

    lines = adversary_overruns(baselines, _pruned_settings)
    return dg.AssetCheckResult(
        check_name=ADVERSARY_CHECK,
        passed=not lines,
        severity=dg.AssetCheckSeverity.WARN,
        description=(f"{len(lines)} question types a text-only learned model answers over their bound" if lines
                     else "every pruned question type within its bound"),
        metadata={"over bound": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines) or "none")},
    )
