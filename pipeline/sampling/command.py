"""``scan2qa answers``: a benchmark whose ground truth is computed from exactly the frames a sampler takes.

``--out DIR`` becomes a release-shaped folder (``tables/qa.parquet``,
``videos/<label>_frame/...``), so ``scan2qa eval --release DIR`` and ``scan2qa
stats --qa DIR/tables/qa.parquet`` read it as they read any release; beside
it ``tables/sampled_answers.parquet`` records every all-frame question's fate
(stays, changes, unanswerable with the reason) and ``sampler.json`` the spec,
each scan's frame count and declared video fps, and the check verdicts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import polars as pl

from pipeline import schemas, storage
from pipeline.frames.budgets import frame_budgets
from pipeline.sampling.answers import SampledBenchmark, compute_answers
from pipeline.sampling.checker import RuleChecker, rule_checker
from pipeline.sampling.release_tables import load_release_tables, release_config
from pipeline.sampling.spec import parse_sampler
from pipeline.sampling.videos import write_sampled_videos

CHECKED_SUITES = ("frame_samples", "object_visibility", "qa")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--release", required=True, help="release folder or output root (per-frame visibility is read from it)")
    parser.add_argument("--sampler", required=True, help="uniform:N | fps:F[,min=A,max=B] | nframes:N | segments:N | indices:FILE | 16 | 32 | 64 | all")
    parser.add_argument("--out", required=True, help="folder to write the sampled benchmark into")
    parser.add_argument("--no-videos", action="store_true", help="tables only (no sampled videos)")


def check_benchmark(bench: SampledBenchmark, tables: dict[str, pl.DataFrame], config,
                    rules: RuleChecker | None = None) -> dict:
    """The released tables' own rules on the sampled tables (the sampler's label counted as a known budget)."""
    decide_suites = rule_checker(rules)
    view = {
        "scans": tables["scans"],
        "objects": tables["objects"],
        "frame_samples": bench.frame_samples,
        "object_visibility": bench.object_visibility,
        "qa": bench.qa,
    }
    report = decide_suites(
        view, CHECKED_SUITES,
        frequency_ceiling=config.gate.frequency_ceiling,
        letter_tolerance=config.gate.letter_tolerance,
        min_questions_for_distribution=config.gate.min_questions_for_distribution,
        budgets=(*frame_budgets(config), bench.sampler.label),
    )
    failed = [f"{r.table}: {r.name} ({r.unexpected_count} rows, e.g. {', '.join(r.failing_rows[:3])})" for r in report.failures]
    return {"success": bool(report.success), "rules": len(report.results), "failed": failed}


def write_benchmark(bench: SampledBenchmark, release: Path, out: Path, tables: dict, check: dict, videos: bool) -> dict:
    out = Path(out)
    written = write_sampled_videos(release, out, bench.frame_samples, tables["frame_samples"], bench.declared_fps) if videos else {}
    for name, table in (
        ("qa", bench.qa), ("sampled_answers", bench.outcomes), ("frame_samples", bench.frame_samples),
        ("object_visibility", bench.object_visibility),
    ):
        storage.write_table(storage.upath(out / "tables" / f"{name}.parquet"), name, table)
    frames = bench.frame_samples.group_by("key").len().sort("key")
    meta = {
        "sampler": bench.sampler.spec,
        "label": bench.sampler.label,
        "frames": {k: int(n) for k, n in frames.iter_rows()},
        "declared_fps": {k: round(v, 6) for k, v in sorted(bench.declared_fps.items())},
        "refused": bench.refused,
        "videos": written,
        "checks": check,
    }
    storage.write_bytes_atomic(storage.upath(out / "sampler.json"), (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())
    return meta


def build_sampled(release: str | Path, spec: str, out: str | Path, videos: bool = True,
                  rules: RuleChecker | None = None) -> tuple[SampledBenchmark, dict]:
    release = Path(release)
    tables = load_release_tables(release)
    config = release_config(release)
    sampler = parse_sampler(spec, frame_budgets(config))  # the release's budgets: budget:32 is its own 32
    bench = compute_answers(sampler, tables, config)
    check = check_benchmark(bench, tables, config, rules)
    return bench, write_benchmark(bench, release, Path(out), tables, check, videos)


def outcome_counts(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Per profile, type and sampler: all-frame answers that stay, change, become unanswerable, and the share valid."""
    if outcomes.height == 0:
        return pl.DataFrame()
    counts = (
        outcomes.group_by(["profile", "question_type", "sampler"])
        .agg(
            questions=pl.len(),
            stays=(pl.col("outcome") == "stays").sum(),
            changes=(pl.col("outcome") == "changes").sum(),
            unanswerable=(pl.col("outcome") == "unanswerable").sum(),
            frames=pl.col("frames").mean(),
        )
        .with_columns(valid=pl.col("stays") / pl.col("questions"))
    )
    return counts.sort("profile", "sampler", "question_type")


def run(args: argparse.Namespace) -> int:
    bench, meta = build_sampled(args.release, args.sampler, args.out, videos=not args.no_videos)
    counts = outcome_counts(bench.outcomes)
    print(f"sampler {meta['sampler']} ({meta['label']}): {bench.qa.height} questions answerable, "
          f"{bench.outcomes.filter(pl.col('outcome') == 'unanswerable').height} dropped (reasons in "
          f"{Path(args.out) / 'tables' / 'sampled_answers.parquet'})")
    for row in counts.iter_rows(named=True):
        print(f"  {row['profile']:9s} {row['question_type']:36s} {row['stays']:5d} stay {row['changes']:5d} change "
              f"{row['unanswerable']:5d} unanswerable  ({100 * row['valid']:.1f}% valid)")
    for key, why in sorted(bench.refused.items()):
        print(f"  {key}: no frames ({why})")
    check = meta["checks"]
    print(f"checks: {'passed' if check['success'] else 'FAILED'} ({check['rules']} rules)"
          + "".join(f"\n  failed: {f}" for f in check["failed"]))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0 if check["success"] else 1


def sampler_validity(release: str | None, specs: list[str], plot: str | None, as_json: bool) -> int:
    """``scan2qa stats --samplers``: validity per type and sampler, computed (no videos, nothing written but the plot)."""
    from pipeline.errors import ConfigError
    from pipeline.sampling.validity import markdown, validity_svg, validity_table

    if not release:
        raise ConfigError("stats --samplers needs --release (a release folder or output root)")
    tables = load_release_tables(Path(release))
    config = release_config(Path(release))
    outcomes = pl.concat([compute_answers(parse_sampler(s, frame_budgets(config)), tables, config).outcomes for s in specs])
    table = validity_table(outcomes)
    if plot:
        storage.write_bytes_atomic(storage.upath(plot), validity_svg(table).encode())
    if as_json:
        print(json.dumps(table.to_dicts(), indent=1, sort_keys=True))
    else:
        sys.stdout.write(markdown(table))
    return 0


def add_sampler_arguments(parser: argparse.ArgumentParser) -> None:
    """``--sampler SPEC`` (repeatable) and ``--sampled DIR`` for the commands that read a sampled benchmark."""
    parser.add_argument("--sampler", action="append", dest="samplers", metavar="SPEC",
                        help="also the benchmark answered for this frame sampler (repeatable; see scan2qa answers)")
    parser.add_argument("--sampled", action="append", metavar="DIR",
                        help="a `scan2qa answers --out` folder to use for the matching --sampler, in order "
                        "(default: computed now into <out>/samplers/<label>, or a temporary folder)")


def sampled_folders(release: str | Path, specs: list[str] | None, given: list[str] | None, work: Path,
                    videos: bool = True) -> list[Path]:
    """The answers folders for ``specs``: the ones given, else built under ``work/<label>``."""
    folders = []
    for i, spec in enumerate(specs or []):
        if given and i < len(given):
            folders.append(Path(given[i]))
            continue
        folder = Path(work) / parse_sampler(spec, frame_budgets(release_config(Path(release)))).label
        build_sampled(release, spec, folder, videos=videos)
        folders.append(folder)
    return folders


def with_sampled(release, folders: list[Path]):
    """A release whose qa also holds the sampled benchmarks' questions (their videos named by absolute path)."""
    from dataclasses import replace

    from pipeline.scoring.release import load_release

    parts = [release.qa]
    for folder in folders:
        sampled = load_release(folder).qa
        parts.append(sampled.with_columns(video=pl.lit(str(folder.resolve()) + "/") + pl.col("video")))
    return replace(release, qa=pl.concat(parts).sort("id"))
