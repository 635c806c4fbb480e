"""Which scans a release holds: one state per registered scan partition, and what follows from it.

A release must hold exactly the scans whose every per-scan table was last
built successfully and passed its checks, whoever launched the runs (``scan2qa
build``, the UI, a backfill, a sensor, automation). The Dagster layer reads
those states from the instance (``assets.membership``); this module only says
what a state means for the release, so the rule is the same on every path and
can be tested without Dagster. A scan whose latest run failed is left out even
though an earlier build left its tables behind: its tables may be half from
the old run and half from the new one, so "keep the last good tables" is not
offered. For the same reason a scan whose tables all built but do not belong
together is left out as ``stale``: a table older than one of its inputs (a
partition's upstream asset rerun alone from the UI that automation has not followed yet), or one built by other code
or config than the code location now defines (a threshold changed since), would
ship questions that no build of the current code makes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import polars as pl

from pipeline import schemas

BUILT = "built"
FAILED = "failed"
CHECKS_FAILED = "checks_failed"
IN_PROGRESS = "in_progress"
NOT_BUILT = "not_built"
STALE = "stale"
STATES = (BUILT, FAILED, CHECKS_FAILED, IN_PROGRESS, NOT_BUILT, STALE)

# When a scan's tables disagree, the state that explains the most wins: a run still going says the scan is not
# settled; a failed check names the rule; a failed step names the file; a table never built says nothing more; a
# stale table is one that did build, so any of those explains more.
_PRECEDENCE = (IN_PROGRESS, CHECKS_FAILED, FAILED, NOT_BUILT, STALE, BUILT)


@dataclass(frozen=True)
class ScanState:
    key: str
    state: str
    error: str = ""

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError(f"{self.key}: unknown scan state {self.state!r}")


def worst(states: Iterable[str]) -> str:
    """The state of a scan from the states of its tables (``BUILT`` only when every table is)."""
    present = set(states)
    return next((s for s in _PRECEDENCE if s in present), NOT_BUILT)


def membership_table(states: Sequence[ScanState]) -> pl.DataFrame:
    rows = [{"key": s.key, "state": s.state, "error": s.error} for s in sorted(states, key=lambda s: s.key)]
    return schemas.from_rows("scan_membership", rows)


def built_keys(membership: pl.DataFrame) -> list[str]:
    return sorted(membership.filter(pl.col("state") == BUILT)["key"].to_list())


def excluded_scans(membership: pl.DataFrame, skipped_folders: Sequence[str] = ()) -> dict:
    """The manifest's ``checks.excluded_scans``: every registered scan left out, with its state and error."""
    left_out = membership.filter(pl.col("state") != BUILT).sort("key")
    return {
        "failed_scans": [
            {"key": r["key"], "state": r["state"], "error": r["error"]} for r in left_out.iter_rows(named=True)
        ],
        "skipped_folders": list(skipped_folders),
    }


def state_counts(membership: pl.DataFrame) -> dict[str, int]:
    counts = dict(membership.group_by("state").len().iter_rows())
    return {state: int(counts.get(state, 0)) for state in STATES if counts.get(state)}
