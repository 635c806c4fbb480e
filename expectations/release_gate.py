"""The gate ``pipeline.release.build.build_release`` is handed: the Great Expectations run over the released tables.

The release step lives in ``pipeline``, below ``expectations``; so the layer that builds a release (the
``release`` asset, tests) passes this function in rather than ``pipeline`` reaching up for it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.config import Config
from pipeline.frames.budgets import frame_budgets
from pipeline.release.build import GateOutcome


def release_gate(released: dict[str, pl.DataFrame], config: Config) -> GateOutcome:
    from expectations.data_docs import write_site
    from expectations.runner import run_gate

    report = run_gate(
        released,
        frequency_ceiling=config.gate.frequency_ceiling,
        letter_tolerance=config.gate.letter_tolerance,
        min_questions_for_distribution=config.gate.min_questions_for_distribution,
        budgets=frame_budgets(config),
    )

    def write_docs(folder: Path) -> None:
        write_site(folder, report.validations)

    return GateOutcome(
        success=bool(report.success),
        summary=report.summary(),
        checks=_with_meanings(report.to_dict(), config),
        write_docs=write_docs,
    )


def _with_meanings(gate_dict: dict, config: Config) -> dict:
    """Each result with its rule's plain-language meaning (for the report and the manifest's checks)."""
    from expectations.suites import build_suites  # plain data: no Great Expectations import

    suites = build_suites(config.gate.frequency_ceiling, config.gate.letter_tolerance, budgets=frame_budgets(config))
    meanings = {rule.name: rule.meaning for suite in suites for rule in suite.rules}
    results = [r | {"meaning": meanings.get(r["name"], "")} for r in gate_dict.get("results", [])]
    return gate_dict | {"results": results}
