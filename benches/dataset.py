"""``scan2qa bench dataset``: the dataset-wide steps (qa, gate, release, report) over thousands of scans.

Per-scan work grows with each scan on its own; the dataset-wide steps see every
scan at once, so they are the ones that stop scaling first. Building thousands
of real scans would take hours, and what those steps do only depends on the
per-scan tables, so the bench builds a few real synthetic scans through the
per-scan assets and replicates their tables under new keys: every column that
carries the scan key or scene id is rewritten, and so is every id derived from
the key (question ids, dummy-video ids, and the references to them inside the
audit geometry), so uniqueness checks and seeded draws see distinct scans.
Videos are hard links to the source scan's files, one per distinct file (dummy-video
rows that show the same frames share one).

The dataset-wide assets are then materialized through the ``dataset_job``
selection, as ``scan2qa build`` does, in a fresh child process (so the figures
are those of the steps, not of building the sources). A sampler thread in the
child records CPU time and resident memory; Dagster's step events cut the run
into phases: ``qa`` (``pinpoint_qa`` and ``qa``; within it, the spans of the learned adversary and Iterative
Bias Pruning, ``pipeline.qa.pruning_cost``), ``gate`` (the blocking
expectation checks on ``qa``) and ``release`` (verdicts, the gate on the
released tables, report, Data Docs and the atomic write). Replicas repeat a
few scans' answers, so the run's ``gate.frequency_ceiling`` defaults to 1.0
(the rule still runs; ``--frequency-ceiling`` sets it).

Dagster is imported lazily, only by the functions that drive it.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipeline import storage

SOURCE_MARK = "bench_sources.json"
RESULT_FILE = "measure.json"
QID_PREFIX = 12  # question ids keep this many characters of the source id; 8 hex digits of the scan index follow
VID_PREFIX = 8  # dummy-video ids: 8 characters of the source id, 8 hex digits of the scan index
QA_TABLES = ("qa_candidates", "pinpoint_qa_candidates")
STEP_EVENTS = ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scans", type=int, default=2000, help="scans after replication (default 2000)")
    parser.add_argument("--source-scans", type=int, default=3, help="real synthetic scans built first (default 3)")
    parser.add_argument("--frames", type=int, default=60, help="frames per source scan (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic generator seed (default 0)")
    parser.add_argument("--frequency-ceiling", type=float, default=1.0,
                        help="gate.frequency_ceiling of the run (default 1.0: replicas repeat a few scans' answers, "
                             "so answer priors are an artefact of replication)")
    parser.add_argument("--work", default=None,
                        help="work folder; built source scans are kept there and reused (default: a temporary one)")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- sources: a few real scans through the per-scan assets ---------------------------------------------------------


def build_sources(root: Path, scans: int, frames: int, seed: int) -> list[str]:
    """Synthetic scans under ``root/scans``, per-scan assets under ``root/out``; returns the keys that built.

    Reused when ``root`` already holds the same request (the slow part of the bench is not what it measures).
    """
    request = {"scans": scans, "frames": frames, "seed": seed}
    mark = root / SOURCE_MARK
    if mark.exists():
        done = json.loads(mark.read_text())
        if done.get("request") == request:
            _log(f"reusing {len(done['keys'])} source scans under {root}")
            return done["keys"]
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    from pipeline.synth import command as synth_command

    parser = argparse.ArgumentParser()
    synth_command.add_arguments(parser)
    argv = ["--out", str(root / "scans"), "--scenes", str(scans), "--frames", str(frames), "--seed", str(seed)]
    with contextlib.redirect_stdout(sys.stderr):
        synth_command.run(parser.parse_args(argv))
        keys = _materialize_per_scan(root)
    if not keys:
        raise RuntimeError(f"no source scan built under {root}")
    mark.write_text(json.dumps({"request": request, "keys": keys}))
    return keys


def _materialize_per_scan(root: Path) -> list[str]:
    """``scan2qa build`` over the sources (its small dataset-wide run included), keeping what built."""
    from runs.build import build
    from pipeline.config import load_config

    report = build(load_config(None, scans_root=str(root / "scans"), output_root=str(root / "out")))
    for key, error in report.failed.items():
        _log(f"source {key} FAILED: {error}")
    return sorted(report.ok)


# --- replication: the same tables under new keys -------------------------------------------------------------------


def replica_key(source_key: str, index: int) -> str:
    dataset = source_key.partition("/")[0]
    return f"{dataset}/bench{index:05d}_00"


def _suffix(index: int) -> str:
    return f"{index:08x}"


def _rewrite(table: str, df: pl.DataFrame, source_key: str, key: str, index: int) -> pl.DataFrame:
    """One source table as scan ``index`` under ``key``: key, scene id and key-derived ids replaced."""
    suffix = _suffix(index)
    scene = key.partition("/")[2]
    columns = [pl.lit(key, dtype=pl.String).alias("key")]
    if "scene_id" in df.columns:
        columns.append(pl.lit(scene, dtype=pl.String).alias("scene_id"))
    if table == "scans":
        columns.append(pl.col("source_uri").str.replace(source_key.partition("/")[2], scene, literal=True))
    if table in QA_TABLES:
        columns += [
            (pl.col("id").str.slice(0, QID_PREFIX) + suffix).alias("id"),
            pl.col("video")
            .str.replace(f"/{source_key}.mp4", f"/{key}.mp4", literal=True)
            .str.replace(rf"^(videos/dummy/[^/]+/[^/]{{{VID_PREFIX}}})[^/]*\.mp4$", f"${{1}}{suffix}.mp4"),
            pl.col("geometry")
            .str.replace(rf'("real_id": ?"[^"]{{{QID_PREFIX}}})[^"]*"', f'${{1}}{suffix}"')
            .str.replace(rf'("dummy_video_id": ?"[^"]{{{VID_PREFIX}}})[^"]*"', f'${{1}}{suffix}"'),
        ]
    if table == "dummy_videos":
        columns += [
            (pl.col("video_id").str.slice(0, VID_PREFIX) + suffix).alias("video_id"),
            pl.col("path").str.replace(r"[^/]*\.mp4$", "") + pl.col("video_id").str.slice(0, VID_PREFIX) + suffix + ".mp4",
        ]
    return df.with_columns(columns)


def _check_prefixes_unique(sources: dict[str, dict[str, pl.DataFrame]]) -> None:
    """Replicated ids keep a prefix of the source ids: those prefixes must not collide across the sources."""
    for table, column, width in (*((t, "id", QID_PREFIX) for t in QA_TABLES), ("dummy_videos", "video_id", VID_PREFIX)):
        ids = pl.concat([tables[table][column] for tables in sources.values() if table in tables]).unique()
        if ids.str.slice(0, width).n_unique() != ids.len():
            raise RuntimeError(f"{table}.{column}: two source ids share their first {width} digits; use other sources")


def per_scan_tables(tables_root: Path) -> list[str]:
    return sorted(p.name for p in tables_root.iterdir() if p.is_dir() and any(p.glob("*/*.parquet")))


def _read_sources(source_out: Path, source_keys: list[str]) -> dict[str, dict[str, pl.DataFrame]]:
    tables_root = source_out / "tables"
    return {
        key: {name: storage.read_table(storage.upath(tables_root / name / f"{key}.parquet"), name)
              for name in per_scan_tables(tables_root) if (tables_root / name / f"{key}.parquet").exists()}
        for key in source_keys
    }


def _replicate_range(source_out: Path, source_keys: list[str], out: Path, indices: range, total: int) -> tuple[dict, int]:
    """Scans ``indices`` of the replication (one worker's share): per-table row counts and video links made."""
    sources = _read_sources(source_out, source_keys)
    folders: set[Path] = set()
    rows: dict[str, int] = {}
    links, started = 0, time.perf_counter()
    for done, index in enumerate(indices, start=1):
        source_key = source_keys[index % len(source_keys)]
        key = replica_key(source_key, index)
        for name, df in sources[source_key].items():
            target = out / "tables" / name / f"{key}.parquet"
            if target.parent not in folders:
                target.parent.mkdir(parents=True, exist_ok=True)
                folders.add(target.parent)
            replica = _rewrite(name, df, source_key, key, index)
            target.write_bytes(storage.parquet_bytes(name, replica))
            rows[name] = rows.get(name, 0) + replica.height
        links += _link_videos(source_out, out, source_key, key, _suffix(index), sources[source_key], folders)
        if indices.start == 0 and (done % 250 == 0 or done == len(indices)):
            _log(f"replicated ~{done * total // max(len(indices), 1)}/{total} scans ({time.perf_counter() - started:.1f} s)")
    return rows, links


def replicate(source_out: Path, source_keys: list[str], out: Path, scans: int, workers: int | None = None) -> dict:
    """Write ``scans`` replicas of the source scans' per-scan tables and videos under ``out``.

    Writing tens of thousands of small Parquet files is the cost, so the scans
    are split between ``workers`` processes (default: every core).
    """
    _check_prefixes_unique(_read_sources(source_out, source_keys))
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    workers = max(1, min(workers or os.cpu_count() or 1, scans))
    shares = [range(scans * w // workers, scans * (w + 1) // workers) for w in range(workers)]
    if workers == 1:
        outcomes = [_replicate_range(source_out, source_keys, out, shares[0], scans)]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            outcomes = list(pool.map(_replicate_range, *zip(*[(source_out, source_keys, out, r, scans) for r in shares])))
    rows: dict[str, int] = {}
    for part, _ in outcomes:
        for name, count in part.items():
            rows[name] = rows.get(name, 0) + count
    keys = [replica_key(source_keys[i % len(source_keys)], i) for i in range(scans)]
    return {"keys": keys, "rows": rows, "video_links": sum(n for _, n in outcomes), "seconds": time.perf_counter() - started}


def _link_videos(source_out: Path, out: Path, source_key: str, key: str, suffix: str, tables, folders) -> int:
    from pipeline.frames.budgets import budget_sort_key
    from pipeline.frames.video_paths import budget_video_path

    samples = tables.get("frame_samples")
    # The source scan's own budgets (its run's): a scan with no frame samples has no budget videos to link.
    budgets = sorted(set(samples["budget"].to_list()), key=budget_sort_key) if samples is not None else []
    pairs = [(budget_video_path(b, source_key), budget_video_path(b, key)) for b in budgets]
    dummy = tables.get("dummy_videos")
    if dummy is not None:
        # Rows whose videos would be frame-for-frame the same share one file: link each file once.
        for path in dummy["path"].unique(maintain_order=True).to_list():
            folder, _, name = path.rpartition("/")
            pairs.append((path, f"{folder}/{name[:VID_PREFIX]}{suffix}.mp4"))
    made = 0
    for src, dst in pairs:
        source, target = source_out / src, out / dst
        if not source.exists():
            continue
        if target.parent not in folders:
            target.parent.mkdir(parents=True, exist_ok=True)
            folders.add(target.parent)
        os.link(source, target)
        made += 1
    return made


# --- measurement: the dataset_job selection in a fresh process -----------------------------------------------------


def _vm_rss_kb() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _sample() -> tuple:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        time.time(),
        own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
        own.ru_maxrss,
        children.ru_maxrss,
        _vm_rss_kb(),
    )


class Sampler(threading.Thread):
    """CPU seconds (self and children) and resident memory, sampled so that any window of the run can be read."""

    def __init__(self, interval: float = 0.05):
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple] = [_sample()]
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.samples.append(_sample())

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.samples.append(_sample())

    def window(self, start: float, end: float) -> dict:
        before = [s for s in self.samples if s[0] <= start] or self.samples[:1]
        after = [s for s in self.samples if s[0] >= end] or self.samples[-1:]
        inside = [s for s in self.samples if start <= s[0] <= end] + [before[-1], after[0]]
        return {
            "wall_s": round(end - start, 2),
            "cpu_s": round(after[0][1] - before[-1][1], 2),
            "peak_rss_mb": round(max(s[4] for s in inside) / 1024, 1),
            "maxrss_self_mb": round(after[0][2] / 1024, 1),
            "maxrss_children_mb": round(after[0][3] / 1024, 1),
        }

    def spans(self, spans: list[tuple[float, float, float]]) -> dict | None:
        """Figures over many short spans (wall start, wall end, CPU s measured in them): summed wall and CPU time,
        the peak resident memory sampled inside any of them (None without spans)."""
        if not spans:
            return None
        times = [s[0] for s in self.samples]
        inside = []
        for start, end, _ in spans:  # the samples in each span, and the last one before it (memory on entry)
            first = max(bisect.bisect_left(times, start) - 1, 0)
            inside += self.samples[first:bisect.bisect_right(times, end)]
        last = self.samples[min(bisect.bisect_left(times, spans[-1][1]), len(self.samples) - 1)]
        return {
            "wall_s": round(sum(b - a for a, b, _ in spans), 2),
            "cpu_s": round(sum(c for _, _, c in spans), 2),
            "peak_rss_mb": round(max(s[4] for s in inside) / 1024, 1),
            "maxrss_self_mb": round(last[2] / 1024, 1),
            "maxrss_children_mb": round(last[3] / 1024, 1),
            "calls": len(spans),
        }


def phase_of(step_key: str) -> str:
    if step_key == "scan_membership":
        return "membership"
    if step_key in ("qa", "pinpoint_qa"):
        return "qa"
    if step_key == "release" or step_key.startswith("sampled_benchmarks"):
        return "release"  # the sampled benchmarks follow the release (none unless config.samplers is set)
    return "gate" if "expectation" in step_key else step_key


def write_run_config(workdir: Path, frequency_ceiling: float) -> Path:
    path = workdir / "scan2qa.yaml"
    path.write_text(json.dumps({"gate": {"frequency_ceiling": frequency_ceiling}}))
    return path


def measure(out: Path, keys: list[str], config_file: Path) -> dict:
    """Materialize the dataset-wide assets over ``keys`` as ``scan2qa build`` does; figures per phase."""
    started = time.time()
    import dagster as dg

    from runs.in_process import QUIET_RUN_CONFIG, run_failure
    from assets.definitions import all_asset_checks, all_assets
    from assets.jobs import dataset_wide_keys
    from assets.partitions import scan_partitions
    from pipeline.config import load_config
    from resources.defaults import default_resources
    from resources.run_config import RunConfigResource
    from resources.storage import StorageResource

    config = load_config(config_file, scans_root=str(out / "scans"), output_root=str(out))
    resources = default_resources(StorageResource.from_config(config, str(config_file)), RunConfigResource.from_config(config))
    from assets.membership import record_built_elsewhere

    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(scan_partitions.name, keys)
    # Replicas were written as files: the instance records them as built, as after a build of every scan.
    record_built_elsewhere(instance, keys)
    from pipeline.qa import pruning_cost

    imported = _sample()
    pruning_cost.reset()
    sampler = Sampler()
    sampler.start()
    run_started = time.time()
    result = dg.materialize(
        [*all_assets, *all_asset_checks],
        selection=dataset_wide_keys(all_assets),
        resources=resources,
        instance=instance,
        raise_on_error=False,
        run_config=QUIET_RUN_CONFIG,
    )
    run_ended = time.time()
    sampler.stop()
    steps: dict[str, list[float]] = {}
    for entry in instance.all_logs(result.run_id):
        event = entry.dagster_event
        if event is None or not event.step_key or event.event_type_value not in STEP_EVENTS:
            continue
        span = steps.setdefault(event.step_key, [entry.timestamp, entry.timestamp])
        span[0], span[1] = min(span[0], entry.timestamp), max(span[1], entry.timestamp)
    phases: dict[str, list[float]] = {}
    for step, (a, b) in steps.items():
        span = phases.setdefault(phase_of(step), [a, b])
        span[0], span[1] = min(span[0], a), max(span[1], b)
    return {
        "success": bool(result.success),
        "error": None if result.success else run_failure(result),
        "startup_s": round(imported[0] - started, 2),
        "startup_maxrss_mb": round(imported[2] / 1024, 1),
        "run": sampler.window(run_started, run_ended),
        "phases": {name: sampler.window(*span) for name, span in sorted(phases.items())},
        # Inside the qa phase: the learned adversary's fits and Iterative Bias Pruning (every profile's).
        "qa_adversary": sampler.spans(pruning_cost.spans()),
        "steps": {name: sampler.window(*span) for name, span in sorted(steps.items())},
    }


def _measure_main(out: str, keys_file: str, config_file: str, result_file: str) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    keys = json.loads(Path(keys_file).read_text())
    Path(result_file).write_text(json.dumps(measure(Path(out), keys, Path(config_file))))


def measure_in_child(out: Path, keys: list[str], config_file: Path, workdir: Path) -> dict:
    keys_file, result_file = workdir / "keys.json", workdir / RESULT_FILE
    keys_file.write_text(json.dumps(keys))
    result_file.unlink(missing_ok=True)
    arguments = ", ".join(repr(str(p)) for p in (out, keys_file, config_file, result_file))
    code = f"from benches.dataset import _measure_main; _measure_main({arguments})"
    # The child's output goes to our stderr: only the bench result belongs on stdout.
    try:
        sys.stderr.fileno()
        subprocess.run([sys.executable, "-c", code], cwd=workdir, check=True, stdout=sys.stderr)
    except (AttributeError, OSError, ValueError):  # a stderr with no file behind it (captured, as under pytest)
        done = subprocess.run([sys.executable, "-c", code], cwd=workdir, check=True, capture_output=True, text=True)
        sys.stderr.write(done.stdout + done.stderr)
    return json.loads(result_file.read_text())


# --- the bench -----------------------------------------------------------------------------------------------------


def _release_facts(out: Path) -> dict:
    releases = out / "releases"
    pointer = releases / "LATEST"
    if not pointer.exists():
        return {"release": None}
    release = releases / pointer.read_text().strip()
    manifest = json.loads((release / "manifest.json").read_text())
    return {
        "release": str(release),
        "release_rows": manifest["row_counts"],
        "release_videos": manifest["videos"],
        "report_bytes": (release / "report" / "index.html").stat().st_size,
        "data_docs": (release / "data_docs" / "index.html").exists(),
        "gate_success": manifest["checks"]["success"],
    }


def run_dataset_bench(args: argparse.Namespace, *, isolate: bool = True) -> dict:
    own_work = args.work is None
    workdir = Path(args.work or tempfile.mkdtemp(prefix="scan2qa_bench_dataset_")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        _log(f"building {args.source_scans} source scans x {args.frames} frames under {workdir / 'sources'} ...")
        source_keys = build_sources(workdir / "sources", args.source_scans, args.frames, args.seed)
        sources_s = time.perf_counter() - t0
        _log(f"replicating {len(source_keys)} scans to {args.scans} under {workdir / 'replicas'} ...")
        replicas = replicate(workdir / "sources" / "out", source_keys, workdir / "replicas", args.scans)
        _log(f"materializing the dataset-wide assets over {args.scans} scans ...")
        out = workdir / "replicas"
        config_file = write_run_config(workdir, args.frequency_ceiling)
        if isolate:
            measured = measure_in_child(out, replicas["keys"], config_file, workdir)
        else:
            measured = measure(out, replicas["keys"], config_file)
        qa_path = out / "tables" / "qa.parquet"
        result = {
            "scans": args.scans,
            "source_scans": len(source_keys),
            "frames": args.frames,
            "frequency_ceiling": args.frequency_ceiling,
            "work": None if own_work else str(workdir),
            "sources_seconds": round(sources_s, 1),
            "replicate_seconds": round(replicas["seconds"], 1),
            "video_links": replicas["video_links"],
            "qa_candidates_rows": replicas["rows"].get("qa_candidates", 0),
            "pinpoint_qa_candidates_rows": replicas["rows"].get("pinpoint_qa_candidates", 0),
            "qa_rows": pq.read_metadata(qa_path).num_rows if qa_path.exists() else None,
            "cpu_count": os.cpu_count(),
            **measured,
            **_release_facts(out),
        }
    finally:
        if own_work:
            _log(f"removing {workdir} ...")
            shutil.rmtree(workdir, ignore_errors=True)
    return result


def format_result(r: dict) -> str:
    lines = [
        f"dataset bench: {r['scans']} scans replicated from {r['source_scans']} built scans x {r['frames']} frames "
        f"(sources {r['sources_seconds']:.0f} s, replication {r['replicate_seconds']:.0f} s, {r['video_links']} video links)",
        f"  qa_candidates rows {r['qa_candidates_rows']:,}, pinpoint_qa_candidates rows {r['pinpoint_qa_candidates_rows']:,}, "
        f"qa rows {r['qa_rows'] if r['qa_rows'] is None else format(r['qa_rows'], ',')}",
        f"  run {'ok' if r['success'] else 'FAILED: ' + str(r['error'])}; child start-up {r['startup_s']:.1f} s",
    ]
    rows = [("phase", "wall s", "CPU s", "peak RSS MB", "maxrss self MB", "maxrss children MB")]
    adversary = [("  of which adversary + pruning", r["qa_adversary"])] if r.get("qa_adversary") else []
    phases = [item for name, w in r["phases"].items() for item in [(name, w), *(adversary if name == "qa" else [])]]
    for name, w in [*phases, ("whole run", r["run"])]:
        rows.append((name, f"{w['wall_s']:.1f}", f"{w['cpu_s']:.1f}", f"{w['peak_rss_mb']:.0f}",
                     f"{w['maxrss_self_mb']:.0f}", f"{w['maxrss_children_mb']:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines += ["  " + "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
              for row in rows]
    if r.get("release"):
        lines.append(f"  release {r['release']}: {r['release_rows'].get('qa', 0):,} questions, {r['release_videos']} videos, "
                     f"report {r['report_bytes'] / 1e6:.1f} MB, data docs {'yes' if r['data_docs'] else 'no'}")
    else:
        lines.append("  no release written")
    return "\n".join(lines)
