"""``scan2qa bench build``: whole builds of the same scans with the full-resolution and the adaptive visibility cast.

Synthetic scans are generated in groups of different lengths (``--frames 100,300``:
one group per frame count, ``--scans`` each; generation is not timed), then each
group is built twice in this process, once per ``visibility.cast`` (``full`` and
``adaptive``): every scan partition materialized on its own, then the
dataset-wide assets (qa, gate, release), exactly as ``scan2qa build --workers 1``.

Reported, all in CPU seconds of this process (Open3D's threads included):

- per scan: its whole partition run, and inside it the ``visibility`` step alone;
- a least-squares fit ``a + b * frames`` over every scan of a mode (needs two frame counts),
  for the whole scan and for visibility alone;
- per group: the dataset-wide assets.

Then the two builds are compared: every ``object_visibility`` row (visible, rule,
best frame, first frame, coverage of the best frame ...) per scan and budget, every
``visibility`` row marked exact against the full cast's, and every question,
option and answer of the released ``qa`` table. The bench fails loudly (the
``identical`` flags) if anything differs. A shared machine makes CPU figures
move by a few percent between runs; repeat them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
import yaml

MODES = ("full", "adaptive")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scans", type=int, default=2, help="synthetic scans per frame count (default 2)")
    parser.add_argument("--frames", default="100,300", help="comma-separated frame counts, one group each (default 100,300)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic seed (default 0)")
    parser.add_argument("--work", help="working folder (default: a temporary one, removed afterwards)")


def cpu_seconds() -> float:
    return time.process_time()


class VisibilityTimer:
    """Adds up the CPU seconds of ``compute_visibility`` calls (the visibility step) while a build runs."""

    def __init__(self):
        self.seconds = 0.0
        self.rays = self.full_rays = 0  # adaptive casts: rays cast, and the rays of a full cast of the same frames

    def __enter__(self):
        from pipeline.visibility import cast

        self._module, self._original = cast, cast.compute_visibility
        original = self._original

        def timed(*args, **kwargs):
            started = cpu_seconds()
            cast.LAST_ADAPTIVE_RUN = None
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds += cpu_seconds() - started
                run = cast.LAST_ADAPTIVE_RUN
                if run is not None:
                    self.rays += sum(run["rays"].values())
                    self.full_rays += run["full_rays"]

        cast.compute_visibility = timed
        return self

    def __exit__(self, *exc):
        self._module.compute_visibility = self._original


def build_group(scans_root: Path, out: Path, mode: str) -> dict:
    """One in-process build of every scan under ``scans_root`` with ``visibility.cast = mode``."""
    from assets.build import materialize_quietly
    from assets.definitions import all_assets
    from assets.jobs import dataset_wide_keys
    from assets.scan_pool import ScanRunner
    from pipeline.config import load_config
    from pipeline.scene.discovery import discover_scans

    out.mkdir(parents=True, exist_ok=True)
    config_file = out.parent / f"{out.name}.yaml"
    config_file.write_text(
        yaml.safe_dump({"scans_root": str(scans_root), "output_root": str(out), "visibility": {"cast": mode}})
    )
    config = load_config(str(config_file))
    scans = discover_scans(config.scans_root, config.storage_options)
    runner = ScanRunner.open(config, str(config_file), [key for key, _ in scans])
    per_scan = []
    print(f"  {mode}: building {len(scans)} scans ...", file=sys.stderr, flush=True)
    with contextlib.redirect_stdout(io.StringIO()):
        for key, uri in scans:
            with VisibilityTimer() as vis:
                started = cpu_seconds()
                outcome = runner.run(key, uri)
                total = cpu_seconds() - started
            if not outcome.ok:
                raise RuntimeError(f"{mode}: {key} failed: {outcome.error}")
            row = {"key": key, "cpu_s": round(total, 3), "visibility_cpu_s": round(vis.seconds, 3)}
            if vis.full_rays:
                row["rays_fraction"] = round(vis.rays / vis.full_rays, 4)
            per_scan.append(row)
        started = cpu_seconds()
        ok, error = materialize_quietly(
            runner.definitions, dataset_wide_keys(all_assets), runner.resources, runner.instance
        )
        dataset_wide = cpu_seconds() - started
    if not ok:
        raise RuntimeError(f"{mode}: dataset-wide assets failed: {error}")
    return {"per_scan": per_scan, "dataset_wide_cpu_s": round(dataset_wide, 3)}


def fit(frames: list[int], seconds: list[float]) -> dict | None:
    """Least squares ``seconds = a + b * frames``; None with fewer than two distinct frame counts."""
    if len(set(frames)) < 2:
        return None
    b, a = np.polyfit(np.asarray(frames, float), np.asarray(seconds, float), 1)
    return {"a_cpu_s": round(float(a), 3), "b_cpu_ms_per_frame": round(float(b) * 1000.0, 3)}


def compare_builds(full: Path, adaptive: Path) -> dict:
    """Decisions, exact rows and questions of two builds of the same scans."""
    from pipeline.storage import read_table

    def tables(root: Path, name: str) -> dict[str, pl.DataFrame]:
        return {
            str(p.relative_to(root / "tables" / name)): read_table(p, name)
            for p in sorted((root / "tables" / name).rglob("*.parquet"))
        }

    out = {"object_visibility_rows": 0, "object_visibility_identical": True, "best_frames": 0,
           "visible_decisions": 0, "exact_visibility_rows": 0, "estimated_visibility_rows": 0,
           "exact_rows_identical": True, "visibility_rows_full": 0, "visibility_rows_adaptive": 0}
    a_ov, b_ov = tables(full, "object_visibility"), tables(adaptive, "object_visibility")
    out["object_visibility_identical"] = sorted(a_ov) == sorted(b_ov) and all(a_ov[k].equals(b_ov[k]) for k in a_ov)
    for df in a_ov.values():
        out["object_visibility_rows"] += df.height
        out["visible_decisions"] += df.height
        out["best_frames"] += int(df["best_frame"].is_not_null().sum())
    a_v, b_v = tables(full, "visibility"), tables(adaptive, "visibility")
    for k, fv in a_v.items():
        av = b_v.get(k)
        out["visibility_rows_full"] += fv.height
        if av is None:
            out["exact_rows_identical"] = False
            continue
        out["visibility_rows_adaptive"] += av.height
        exact = av.filter(pl.col("pixels_exact"))
        out["exact_visibility_rows"] += exact.height
        out["estimated_visibility_rows"] += av.height - exact.height
        cols = ["frame_index", "object_id", "visible_pixels", "frame_fraction", "bbox"]
        joined = exact.select(cols).join(fv.select(cols), on=["frame_index", "object_id"], how="left", suffix="_full")
        same = all(joined[c].equals(joined[f"{c}_full"], check_names=False) for c in cols[2:])
        seen_same = set(zip(av["frame_index"], av["object_id"])) == set(zip(fv["frame_index"], fv["object_id"]))
        out["exact_rows_identical"] &= bool(same and seen_same)
        estimated = av.filter(~pl.col("pixels_exact")).join(
            fv.select("frame_index", "object_id", pl.col("visible_pixels").alias("full_pixels")),
            on=["frame_index", "object_id"], how="left",
        )
        if estimated.height:
            est = estimated["visible_pixels"].to_numpy().astype(float)
            error = np.abs(est - estimated["full_pixels"].fill_null(0).to_numpy())
            out["largest_estimate_error_px"] = max(out.get("largest_estimate_error_px", 0), int(error.max()))
    qa_cols = ["id", "budget", "question_type", "question", "options", "ground_truth", "answer_value", "used_obj_ids", "video"]
    qa_a, qa_b = full / "tables" / "qa.parquet", adaptive / "tables" / "qa.parquet"
    qa_full = pl.read_parquet(qa_a) if qa_a.exists() else pl.DataFrame()
    qa_adaptive = pl.read_parquet(qa_b) if qa_b.exists() else pl.DataFrame()
    cols = [c for c in qa_cols if c in qa_full.columns]
    out["qa_rows"] = qa_full.height
    out["qa_identical"] = bool(qa_full.height and qa_full.select(cols).equals(qa_adaptive.select(cols)))
    out["qa_columns_compared"] = cols
    out["qa_all_columns_identical"] = bool(qa_full.height and qa_full.equals(qa_adaptive))
    return out


def run_build_bench(args: argparse.Namespace) -> dict:
    frame_counts = [int(f) for f in str(args.frames).split(",") if f.strip()]
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="scan2qa-bench-build-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        groups = []
        for frames in frame_counts:
            scans = work / f"scans_{frames}"
            if not any(scans.glob("synth*")):
                print(f"generating {args.scans} synthetic scans x {frames} frames", file=sys.stderr, flush=True)
                subprocess.run(
                    [sys.executable, "-m", "pipeline.cli", "synth", "--out", str(scans), "--scenes", str(args.scans),
                     "--frames", str(frames), "--seed", str(args.seed)],
                    check=True, capture_output=True,
                )
            builds = {}
            for mode in MODES:
                target = work / f"out_{frames}_{mode}"
                shutil.rmtree(target, ignore_errors=True)
                builds[mode] = build_group(scans, target, mode)
            groups.append({"frames": frames, "scans": args.scans, **builds,
                           "compare": compare_builds(work / f"out_{frames}_full", work / f"out_{frames}_adaptive")})
        summary = {}
        for mode in MODES:
            frames = [g["frames"] for g in groups for _ in g[mode]["per_scan"]]
            totals = [s["cpu_s"] for g in groups for s in g[mode]["per_scan"]]
            vis = [s["visibility_cpu_s"] for g in groups for s in g[mode]["per_scan"]]
            summary[mode] = {
                "scan_fit": fit(frames, totals),
                "visibility_fit": fit(frames, vis),
                "mean_scan_cpu_s": round(float(np.mean(totals)), 3),
                "mean_visibility_cpu_s": round(float(np.mean(vis)), 3),
                "visibility_cpu_ms_per_frame": round(1000.0 * sum(vis) / sum(frames), 3),
                "dataset_wide_cpu_s": [g[mode]["dataset_wide_cpu_s"] for g in groups],
            }
        identical = all(
            g["compare"]["object_visibility_identical"] and g["compare"]["exact_rows_identical"] and g["compare"]["qa_identical"]
            for g in groups
        )
        return {"groups": groups, "summary": summary, "identical": identical}
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def format_result(r: dict) -> str:
    lines = ["build bench: the same synthetic scans built with visibility.cast = full and = adaptive (CPU seconds)"]
    for g in r["groups"]:
        lines.append(f"{g['scans']} scans x {g['frames']} frames:")
        for mode in MODES:
            b = g[mode]
            scans = ", ".join(
                f"{s['cpu_s']:.2f} (visibility {s['visibility_cpu_s']:.2f}"
                + (f", {s['rays_fraction']:.1%} of the rays" if "rays_fraction" in s else "") + ")"
                for s in b["per_scan"]
            )
            lines.append(f"  {mode:9} per scan {scans}; dataset-wide {b['dataset_wide_cpu_s']:.2f}")
        c = g["compare"]
        lines.append(
            f"  compared: {c['object_visibility_rows']} object_visibility rows ({c['visible_decisions']} visible decisions, "
            f"{c['best_frames']} best frames) identical={c['object_visibility_identical']}; "
            f"{c['exact_visibility_rows']} exact + {c['estimated_visibility_rows']} estimated visibility rows "
            f"(full: {c['visibility_rows_full']}), exact rows identical={c['exact_rows_identical']}; "
            f"{c['qa_rows']} qa rows ({', '.join(c['qa_columns_compared'])}) identical={c['qa_identical']} "
            f"(every column: {c['qa_all_columns_identical']}); largest error of an estimated row (no decision "
            f"reads one) {c.get('largest_estimate_error_px', 0)} px"
        )
    for mode in MODES:
        s = r["summary"][mode]
        fit_text = (f"{s['scan_fit']['a_cpu_s']:.2f} CPU-s + {s['scan_fit']['b_cpu_ms_per_frame']:.1f} CPU-ms/frame"
                    if s["scan_fit"] else "n/a (one frame count)")
        vis_text = (f"{s['visibility_fit']['a_cpu_s']:.2f} CPU-s + {s['visibility_fit']['b_cpu_ms_per_frame']:.1f} CPU-ms/frame"
                    if s["visibility_fit"] else f"{s['visibility_cpu_ms_per_frame']:.1f} CPU-ms/frame")
        lines.append(f"{mode:9} per scan: {fit_text}; visibility alone: {vis_text}; "
                     f"dataset-wide {', '.join(f'{d:.2f}' for d in s['dataset_wide_cpu_s'])}")
    lines.append(f"identical decisions, exact rows and questions: {r['identical']}")
    return "\n".join(lines)
