"""``scan2qa bench build``: whole builds of the same scans with the full-resolution and the adaptive visibility cast.

Synthetic scans are generated in groups of different lengths (``--frames 100,300``:
one group per frame count, ``--scans`` each; generation is not timed), then each
group is built once per ``visibility.cast`` (``--casts``, default ``full`` and
``adaptive``), each build in a fresh process of its own: every scan partition
materialized on its own, then the dataset-wide assets (qa, gate, release),
exactly as ``scan2qa build --workers 1``. ``--baseline DIR`` also builds every
group with the code of another checkout (say, main) in the same run, with the
first cast, and compares every file the two builds wrote: before/after figures
under the same machine load, and proof that the outputs are byte-identical.

Reported, all in CPU seconds of the build process (Open3D's and OpenCV's threads included):

- per scan: its whole partition run, the ``visibility`` step alone, and every step
  of the run (STEP_START to STEP_SUCCESS, input loading and output storing
  included; asset checks with their own step are listed as such) plus the run's
  own overhead (planning, event storage, the IO manager outside steps);
- the process start (imports, definitions, instance) before the first scan;
- a least-squares fit ``a + b * frames`` over every scan of a mode (needs two frame counts),
  for the whole scan, for visibility alone and for each step;
- per group: the dataset-wide assets, also split per step.

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
import hashlib
import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import yaml

from pipeline.qa import letter_key

MODES = ("full", "adaptive")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scans", type=int, default=2, help="synthetic scans per frame count (default 2)")
    parser.add_argument("--frames", default="100,300", help="comma-separated frame counts, one group each (default 100,300)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic seed (default 0)")
    parser.add_argument("--work", help="working folder (default: a temporary one, removed afterwards)")
    parser.add_argument("--casts", default=",".join(MODES), help="visibility casts to build with (default full,adaptive)")
    parser.add_argument(
        "--baseline",
        help="another checkout (e.g. of main): build every group with its code too, with the first cast, "
        "and compare every table and video file with this code's build",
    )


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


class StepTimer:
    """CPU seconds of every step of the runs it hears (an instance event listener): STEP_START to its end.

    Dagster stores a run's events synchronously in the process that runs the step
    (``in_process_executor``), so ``process_time`` at each event brackets the step.
    """

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._started: dict[str, float] = {}

    def __call__(self, entry) -> None:
        event = entry.dagster_event
        if event is None or not event.step_key:
            return
        kind = event.event_type_value
        if kind == "STEP_START":
            self._started[event.step_key] = cpu_seconds()
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key in self._started:
            spent = cpu_seconds() - self._started.pop(event.step_key)
            self.seconds[event.step_key] = self.seconds.get(event.step_key, 0.0) + spent

    def split(self, total: float) -> dict[str, float]:
        steps = {name: round(seconds, 3) for name, seconds in sorted(self.seconds.items())}
        steps["(run overhead)"] = round(total - sum(self.seconds.values()), 3)
        return steps


@contextlib.contextmanager
def timing_listeners(instance, timer: StepTimer):
    """Every run's event listener on ``instance`` also feeds ``timer`` (works with any version of the assets)."""
    original = instance.add_event_listener

    def add(run_id, callback):
        original(run_id, callback)
        original(run_id, timer)

    instance.add_event_listener = add
    try:
        yield
    finally:
        instance.add_event_listener = original


def build_group(scans_root: Path, out: Path, mode: str) -> dict:
    """One build of every scan under ``scans_root`` with ``visibility.cast = mode``, in this process."""
    started = cpu_seconds()
    import dagster as dg

    for category in (dg.BetaWarning, dg.PreviewWarning):
        warnings.filterwarnings("ignore", category=category)
    from runs.in_process import materialize_quietly
    from assets.definitions import all_assets
    from assets.jobs import dataset_wide_keys
    from runs.scan_pool import ScanRunner
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
    startup = cpu_seconds() - started
    per_scan = []
    with contextlib.redirect_stdout(io.StringIO()):
        for key, uri in scans:
            timer = StepTimer()
            with VisibilityTimer() as vis, timing_listeners(runner.instance, timer):
                started = cpu_seconds()
                outcome = runner.run(key, uri)
                total = cpu_seconds() - started
            if not outcome.ok:
                raise RuntimeError(f"{mode}: {key} failed: {outcome.error}")
            row = {"key": key, "cpu_s": round(total, 3), "visibility_cpu_s": round(vis.seconds, 3),
                   "steps": timer.split(total)}
            if vis.full_rays:
                row["rays_fraction"] = round(vis.rays / vis.full_rays, 4)
            per_scan.append(row)
        timer = StepTimer()
        started = cpu_seconds()
        ok, error = materialize_quietly(
            runner.definitions, dataset_wide_keys(all_assets), runner.resources, runner.instance, on_event=timer
        )
        dataset_wide = cpu_seconds() - started
    if not ok:
        raise RuntimeError(f"{mode}: dataset-wide assets failed: {error}")
    return {"per_scan": per_scan, "dataset_wide_cpu_s": round(dataset_wide, 3), "startup_cpu_s": round(startup, 3),
            "dataset_wide_steps": timer.split(dataset_wide)}


def build_group_in_process_of_its_own(scans_root: Path, out: Path, mode: str, code: Path | None = None) -> dict:
    """``build_group`` in a fresh Python process, with the code of checkout ``code`` (default: this one)."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH", "")])])
    label = f"{mode}" + (f" (code of {code})" if code else "")
    print(f"  {label}: building {scans_root.name} ...", file=sys.stderr, flush=True)
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--group", str(scans_root), str(out), mode],
        env=env, capture_output=True, text=True,
    )
    if done.returncode:
        raise RuntimeError(f"{label}: build of {scans_root} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def file_digests(root: Path) -> dict[str, str]:
    """sha256 of every table, video and released file under an output root (the release folder by its role)."""
    digests = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.startswith(".") or path.suffix in (".yaml",):
            continue
        rel = path.relative_to(root).parts
        if rel[0] == "releases":
            if len(rel) < 3 or rel[1] == "latest" or rel[1] == "LATEST":
                continue
            rel = ("releases", "<version>", *rel[2:])  # the version id names the release, not its content
        elif rel[0] not in ("tables", "videos"):
            continue
        data = path.read_bytes()
        if rel[-2:] == ("report", "index.html"):  # its stamp names the code revision and build date
            from pipeline.release.report import without_stamp

            data = without_stamp(data.decode("utf-8")).encode("utf-8")
        digests["/".join(rel)] = hashlib.sha256(data).hexdigest()
    return digests


def compare_files(before: Path, after: Path) -> dict:
    """Every table, video and released file of two builds: same names, same bytes.

    A release's ``manifest.json`` names the release, the time it was made and the code versions, so it is
    compared apart and only reported; every other file (tables, videos, report, Data Docs) must be equal
    byte for byte, the report without its release stamp (code revision, build date).
    """
    a, b = file_digests(before), file_digests(after)
    stamped = {name for name in set(a) | set(b) if name.startswith("releases/") and name.endswith("/manifest.json")}
    exact = (set(a) | set(b)) - stamped
    differing = sorted(name for name in exact if a.get(name) != b.get(name))
    return {
        "files_compared": len(exact),
        "parquet_compared": sum(1 for n in exact if n.endswith(".parquet")),
        "mp4_compared": sum(1 for n in exact if n.endswith(".mp4")),
        "identical": not differing,
        "differing": differing[:20],
        "release_pages_differing": sorted(n for n in stamped if a.get(n) != b.get(n))[:20],
    }


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
    casts = [c.strip() for c in str(args.casts).split(",") if c.strip()]
    unknown = sorted(set(casts) - set(MODES))
    if not casts or unknown:
        raise SystemExit(f"--casts: expected some of {', '.join(MODES)}, got {args.casts!r}")
    baseline = Path(args.baseline).resolve() if args.baseline else None
    # One letter key for every build of the run, inherited by each build's process: each output folder would
    # otherwise make a key of its own, and the builds' letters would differ.
    os.environ.setdefault(letter_key.ENV_VAR, secrets.token_hex(letter_key.KEY_BYTES))
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="scan2qa-bench-build-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        groups = []
        for frames in frame_counts:
            scans = work / f"scans_{frames}"
            if not any(scans.glob("synth*")):
                print(f"generating {args.scans} synthetic scans x {frames} frames", file=sys.stderr, flush=True)
                subprocess.run(
                    [sys.executable, "-m", "scan2qa", "synth", "--out", str(scans), "--scenes", str(args.scans),
                     "--frames", str(frames), "--seed", str(args.seed)],
                    check=True, capture_output=True,
                )
            builds = {}
            if baseline is not None:  # first, so a warm file cache favours this code's build, not the baseline
                target = work / f"out_{frames}_baseline"
                shutil.rmtree(target, ignore_errors=True)
                builds["baseline"] = build_group_in_process_of_its_own(scans, target, casts[0], code=baseline)
            for mode in casts:
                target = work / f"out_{frames}_{mode}"
                shutil.rmtree(target, ignore_errors=True)
                builds[mode] = build_group_in_process_of_its_own(scans, target, mode)
            group = {"frames": frames, "scans": args.scans, "builds": builds}
            if "full" in casts and "adaptive" in casts:
                group["compare"] = compare_builds(work / f"out_{frames}_full", work / f"out_{frames}_adaptive")
            if baseline is not None:
                group["compare_baseline"] = compare_files(work / f"out_{frames}_baseline", work / f"out_{frames}_{casts[0]}")
            groups.append(group)
        summary = {label: summarize([g["frames"] for g in groups], [g["builds"][label] for g in groups])
                   for label in groups[0]["builds"]}
        identical = all(
            g["compare"]["object_visibility_identical"] and g["compare"]["exact_rows_identical"] and g["compare"]["qa_identical"]
            for g in groups if "compare" in g
        ) and all(g["compare_baseline"]["identical"] for g in groups if "compare_baseline" in g)
        return {"groups": groups, "summary": summary, "identical": identical,
                "baseline": str(baseline) if baseline is not None else None, "casts": casts}
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def summarize(group_frames: list[int], builds: list[dict]) -> dict:
    """Fits and means over every scan of one kind of build, for the whole scan, visibility and each step."""
    frames = [f for f, b in zip(group_frames, builds) for _ in b["per_scan"]]
    scans = [s for b in builds for s in b["per_scan"]]
    totals = [s["cpu_s"] for s in scans]
    vis = [s["visibility_cpu_s"] for s in scans]
    step_names = sorted({name for s in scans for name in s.get("steps", {})})
    steps = {}
    for name in step_names:
        seconds = [s.get("steps", {}).get(name, 0.0) for s in scans]
        steps[name] = {"mean_cpu_s": round(float(np.mean(seconds)), 3), "fit": fit(frames, seconds)}
    return {
        "scan_fit": fit(frames, totals),
        "visibility_fit": fit(frames, vis),
        "mean_scan_cpu_s": round(float(np.mean(totals)), 3),
        "mean_visibility_cpu_s": round(float(np.mean(vis)), 3),
        "visibility_cpu_ms_per_frame": round(1000.0 * sum(vis) / sum(frames), 3),
        "dataset_wide_cpu_s": [b["dataset_wide_cpu_s"] for b in builds],
        "startup_cpu_s": [b.get("startup_cpu_s") for b in builds],
        "steps": steps,
        "dataset_wide_steps": {
            name: [b.get("dataset_wide_steps", {}).get(name, 0.0) for b in builds]
            for name in sorted({n for b in builds for n in b.get("dataset_wide_steps", {})})
        },
    }


def _fit_text(f: dict | None, mean: float) -> str:
    return f"{f['a_cpu_s']:6.2f} + {f['b_cpu_ms_per_frame']:5.1f} ms/frame" if f else f"{mean:6.2f} (one frame count)"


def format_result(r: dict) -> str:
    labels = list(r["summary"])
    names = {label: (f"{r['casts'][0]} with the code of {r['baseline']}" if label == "baseline" else f"cast {label}")
             for label in labels}
    lines = [f"build bench (CPU seconds of the build process): {'; '.join(f'{k} = {v}' for k, v in names.items())}"]
    for g in r["groups"]:
        lines.append(f"{g['scans']} scans x {g['frames']} frames:")
        for label in labels:
            b = g["builds"][label]
            scans = ", ".join(
                f"{s['cpu_s']:.2f} (visibility {s['visibility_cpu_s']:.2f}"
                + (f", {s['rays_fraction']:.1%} of the rays" if "rays_fraction" in s else "") + ")"
                for s in b["per_scan"]
            )
            lines.append(f"  {label:9} per scan {scans}; dataset-wide {b['dataset_wide_cpu_s']:.2f}; "
                         f"process start {b.get('startup_cpu_s', 0.0):.2f}")
        if "compare" in g:
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
        if "compare_baseline" in g:
            c = g["compare_baseline"]
            lines.append(
                f"  baseline vs this code: {c['files_compared']} files ({c['parquet_compared']} Parquet, "
                f"{c['mp4_compared']} mp4) byte-identical={c['identical']}"
                + (f"; differing: {', '.join(c['differing'])}" if c["differing"] else "")
                + (f"; differing as expected (dated, code versions): {', '.join(c['release_pages_differing'])}"
                   if c["release_pages_differing"] else "")
            )
    for label in labels:
        s = r["summary"][label]
        lines.append(f"{label}: per scan {_fit_text(s['scan_fit'], s['mean_scan_cpu_s'])}; "
                     f"visibility alone {_fit_text(s['visibility_fit'], s['mean_visibility_cpu_s'])}; "
                     f"dataset-wide {', '.join(f'{d:.2f}' for d in s['dataset_wide_cpu_s'])}")
        lines.append("  per step, per scan (a + b * frames):")
        for name, step in sorted(s["steps"].items(), key=lambda kv: -kv[1]["mean_cpu_s"]):
            lines.append(f"    {name:34} {_fit_text(step['fit'], step['mean_cpu_s'])}   mean {step['mean_cpu_s']:.2f}")
        lines.append("  dataset-wide, per step (one value per group):")
        for name, values in sorted(s["dataset_wide_steps"].items(), key=lambda kv: -max(kv[1])):
            lines.append(f"    {name:34} {', '.join(f'{v:.2f}' for v in values)}")
    lines.append(f"identical (decisions, exact rows and questions across casts; files vs the baseline): {r['identical']}")
    return "\n".join(lines)


def _group_main(argv: list[str]) -> None:
    """``python build.py --group SCANS OUT CAST``: one build, its figures as one JSON line on stdout."""
    scans_root, out, mode = argv
    result = build_group(Path(scans_root), Path(out), mode)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    # Run by path (so a baseline checkout's modules are the ones imported): this folder is not a package root.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    if sys.argv[1:2] == ["--group"]:
        _group_main(sys.argv[2:])
