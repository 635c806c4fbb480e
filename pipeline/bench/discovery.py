"""``scan2qa bench discovery``: one scan_discovery tick against the first version's full-listing tick.

The first version of the sensor detected every folder and listed every file of
every scan on each tick (``discover_scans`` + ``full_listing_fingerprint``).
This bench builds a ScanNet-layout scans root (``--scans`` folders with
``--frames`` exported frames each: colour, depth and pose per frame, so three
files per frame) or uses an existing one (``--root``, local or ``s3://``), then
times, in the same run and alternating:

- the old tick: discovery with detection of every folder and the full-listing
  fingerprint of every scan;
- the new tick with an unbounded budget, so it checks every scan (the steady
  state: all folders known from the previous tick's cursor);
- one bounded tick with the configured limits (the sensor's real tick), and the
  first tick on an empty cursor (every folder new).

On a generated root it also touches one pose file and checks that the next tick
asks for exactly that scan.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pipeline.config import DiscoveryConfig
from pipeline.scene.discovery import (
    DiscoveryState,
    discover_scans,
    discovery_tick,
    full_listing_fingerprint,
)

POSE = "\n".join(" ".join(f"{v:.6f}" for v in row) for row in ((1, 0, 0, 0.5), (0, 1, 0, 0.5), (0, 0, 1, 1.5), (0, 0, 0, 1)))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scans", type=int, default=500, help="scan folders to generate (default 500)")
    parser.add_argument("--frames", type=int, default=200, help="exported frames per scan (default 200)")
    parser.add_argument("--rounds", type=int, default=1, help="old/new tick pairs; the best of each is kept (default 1)")
    parser.add_argument("--root", default=None, help="time an existing scans root (path or s3:// URI) instead")
    parser.add_argument("--storage-options", default="", help="JSON fsspec options for an s3:// --root")
    defaults = DiscoveryConfig()
    parser.add_argument("--max-scans", type=int, default=defaults.max_scans_per_tick,
                        help=f"scans per bounded tick (default {defaults.max_scans_per_tick})")
    parser.add_argument("--max-seconds", type=float, default=defaults.max_seconds_per_tick,
                        help=f"seconds per bounded tick (default {defaults.max_seconds_per_tick:g})")


def write_scans_root(root: Path, scans: int, frames: int) -> int:
    """ScanNet-layout folders with exported frames (placeholder bytes: nothing here parses them); returns files written."""
    written = 0
    for i in range(scans):
        scene = f"scene{i:04d}_00"
        folder = root / scene
        for sub in ("color", "depth", "pose", "intrinsic"):
            (folder / sub).mkdir(parents=True)
        top = {
            f"{scene}_vh_clean_2.ply": b"ply\n",
            f"{scene}_vh_clean_2.0.010000.segs.json": b"{}",
            f"{scene}.aggregation.json": b"{}",
            f"{scene}.txt": b"sceneType = Office\n",
            "intrinsic/intrinsic_color.txt": POSE.encode(),
            "intrinsic/intrinsic_depth.txt": POSE.encode(),
        }
        for name, data in top.items():
            (folder / name).write_bytes(data)
        for k in range(frames):
            (folder / "color" / f"{k}.jpg").write_bytes(b"\xff\xd8\xff\xd9")
            (folder / "depth" / f"{k}.png").write_bytes(b"\x89PNG")
            (folder / "pose" / f"{k}.txt").write_text(POSE)
        written += len(top) + 3 * frames
    return written


def _timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - t0, time.process_time() - c0


def _old_tick(root: str, options: dict) -> int:
    scans = discover_scans(root, options)
    return len({key: full_listing_fingerprint(uri, options) for key, uri in scans})


def run_discovery_bench(args: argparse.Namespace) -> dict:
    options = json.loads(args.storage_options) if args.storage_options else {}
    workdir = None
    files = None
    setup_s = 0.0
    if args.root:
        root = args.root
    else:
        workdir = Path(tempfile.mkdtemp(prefix="scan2qa_bench_discovery_"))
        print(f"writing {args.scans} scans x {args.frames} frames under {workdir} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        files = write_scans_root(workdir / "scans", args.scans, args.frames)
        setup_s = time.perf_counter() - t0
        root = str(workdir / "scans")
    unbounded = {"max_scans": 1 << 30, "max_seconds": math.inf}
    try:
        first, first_s, _ = _timed(lambda: discovery_tick(root, options, DiscoveryState(), **unbounded))
        steady_state = first.state
        old_best = new_best = (math.inf, math.inf)
        for _ in range(max(args.rounds, 1)):
            count, old_s, old_cpu = _timed(lambda: _old_tick(root, options))
            old_best = min(old_best, (old_s, old_cpu))
            steady, new_s, new_cpu = _timed(lambda: discovery_tick(root, options, steady_state, **unbounded))
            new_best = min(new_best, (new_s, new_cpu))
            if count != len(steady.scans) or steady.changed:
                raise RuntimeError(f"old and new ticks disagree: {count} vs {len(steady.scans)} scans, "
                                   f"{len(steady.changed)} reported changed on an unchanged root")
        bounded = discovery_tick(root, options, steady_state, max_scans=args.max_scans, max_seconds=args.max_seconds)
        change = None
        if workdir is not None and first.scans:
            key, uri = first.scans[len(first.scans) // 2]
            pose = Path(uri) / "pose" / "0.txt"
            if pose.exists():
                stat = pose.stat()
                os.utime(pose, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
                after = discovery_tick(root, options, steady_state, **unbounded)
                change = {"touched": f"{key}: pose/0.txt", "rerun": [k for k, _, _ in after.changed]}
    finally:
        if workdir is not None:
            print(f"removing {workdir} ...", file=sys.stderr, flush=True)
            shutil.rmtree(workdir, ignore_errors=True)
    n = len(first.scans)
    (old_s, old_cpu), (new_s, new_cpu) = old_best, new_best
    old_rate = n / old_s if old_s > 0 else None
    new_rate = n / new_s if new_s > 0 else None
    return {
        "root": args.root or "generated (local)",
        "scans": n,
        "frames": None if args.root else args.frames,
        "files": files,
        "setup_seconds": round(setup_s, 2),
        "old_seconds": round(old_s, 3),
        "old_scans_per_s": round(old_rate, 1) if old_rate else None,
        "new_seconds": round(new_s, 3),
        "new_scans_per_s": round(new_rate, 1) if new_rate else None,
        "ratio": round(new_rate / old_rate, 2) if old_rate and new_rate else None,
        "old_cpu_seconds": round(old_cpu, 3),
        "new_cpu_seconds": round(new_cpu, 3),
        "first_tick_seconds": round(first_s, 3),
        "bounded_max_scans": args.max_scans,
        "bounded_max_seconds": args.max_seconds,
        "bounded_seconds": round(bounded.seconds, 3),
        "bounded_checked": len(bounded.checked),
        "ticks_per_pass": bounded.ticks_per_pass,
        "change_touched": change["touched"] if change else None,
        "change_rerun": change["rerun"] if change else None,
    }


def format_result(r: dict) -> str:
    size = f"{r['scans']} scans"
    if r["frames"] is not None:
        size += f" x {r['frames']} frames ({r['files']:,} files, written in {r['setup_seconds']:.1f} s)"
    rows = [
        ("old tick (detect every folder, list every file)",
         f"{r['old_seconds']:.2f} s, {r['old_scans_per_s']} scans/s (CPU {r['old_cpu_seconds']:.2f} s)"),
        ("new tick, every scan checked",
         f"{r['new_seconds']:.2f} s, {r['new_scans_per_s']} scans/s (CPU {r['new_cpu_seconds']:.2f} s)"),
        ("ratio (new / old throughput)", f"x{r['ratio']}"),
        ("first tick on an empty cursor (all new)", f"{r['first_tick_seconds']:.2f} s"),
        (f"bounded tick (<= {r['bounded_max_scans']} scans, {r['bounded_max_seconds']:g} s)",
         f"{r['bounded_seconds']:.2f} s, {r['bounded_checked']} scans checked; every scan checked once every "
         f"{r['ticks_per_pass']} ticks"),
    ]
    width = max(len(label) for label, _ in rows)
    lines = [f"discovery bench: {size}, root {r['root']}"] + [f"  {label.ljust(width)} : {value}" for label, value in rows]
    if r["change_touched"]:
        lines.append(f"  touched {r['change_touched']} -> runs requested for: {', '.join(r['change_rerun']) or 'none'}")
    return "\n".join(lines)
