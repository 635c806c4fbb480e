"""``scan2qa bench answers``: CPU seconds to answer one sampler on a built release (target: under 10 CPU-s on the demo).

Phases are timed in this process (``time.process_time``): reading the
release's tables and per-frame visibility, the SPEC §3 decision and question
generation for the sampler's frames, the checks, and writing the tables and
the sampled videos. The baseline, in the same run, is the release's own
64-frame budget answered through the same path (its frames taken from the
release's ``frame_samples``), so the ratio isolates what a sampler adds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pipeline.scoring.release import DEFAULT_RELEASE

TARGET_CPU_S = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--release", default=DEFAULT_RELEASE, help=f"a built release (default {DEFAULT_RELEASE})")
    parser.add_argument("--sampler", default="fps:2,max=32", help="sampler spec (default fps:2,max=32)")
    parser.add_argument("--baseline", default="64", help="spec answered the same way for the ratio (default 64)")


def _answer_once(release: Path, spec: str, out: Path) -> dict:
    from expectations.runner import decide_suites
    from pipeline.frames.budgets import frame_budgets
    from pipeline.sampling.answers import compute_answers
    from pipeline.sampling.command import check_benchmark, write_benchmark
    from pipeline.sampling.release_tables import load_release_tables, release_config
    from pipeline.sampling.spec import parse_sampler

    phases = {}
    t = time.process_time()
    tables = load_release_tables(release)
    config = release_config(release)
    phases["read"] = time.process_time() - t
    t = time.process_time()
    bench = compute_answers(parse_sampler(spec, frame_budgets(config)), tables, config)
    phases["answers"] = time.process_time() - t
    t = time.process_time()
    check = check_benchmark(bench, tables, config, rules=decide_suites)
    phases["checks"] = time.process_time() - t
    t = time.process_time()
    write_benchmark(bench, release, out, tables, check, videos=True)
    phases["write"] = time.process_time() - t
    return {
        "phases_cpu_s": {k: round(v, 3) for k, v in phases.items()},
        "cpu_s": round(sum(phases.values()), 3),
        "questions": bench.outcomes.height,
        "answerable": bench.qa.height,
        "scans": bench.frame_samples["key"].n_unique() if bench.frame_samples.height else 0,
        "checks_passed": check["success"],
    }


def run_answers_bench(args: argparse.Namespace) -> dict:
    t0 = time.process_time()
    import pipeline.sampling.command  # noqa: F401  (imports counted apart from the work)
    import expectations.runner  # noqa: F401

    imports = time.process_time() - t0
    release = Path(args.release)
    with tempfile.TemporaryDirectory(prefix="scan2qa-bench-answers-") as work:
        sampler = _answer_once(release, args.sampler, Path(work) / "sampler")
        baseline = _answer_once(release, args.baseline, Path(work) / "baseline")
    return {
        "release": str(release),
        "sampler": args.sampler,
        "baseline": args.baseline,
        "imports_cpu_s": round(imports, 3),
        "sampler_result": sampler,
        "baseline_result": baseline,
        "ratio": round(sampler["cpu_s"] / baseline["cpu_s"], 3) if baseline["cpu_s"] else None,
        "target_cpu_s": TARGET_CPU_S,
        "within_target": sampler["cpu_s"] + imports < TARGET_CPU_S,
    }


def format_result(r: dict) -> str:
    s, b = r["sampler_result"], r["baseline_result"]

    def line(name, x):
        phases = ", ".join(f"{k} {v:.2f}" for k, v in x["phases_cpu_s"].items())
        return (f"  {name}: {x['cpu_s']:.2f} CPU-s ({phases}); {x['scans']} scans, {x['questions']} all-frame questions, "
                f"{x['answerable']} answerable, checks {'passed' if x['checks_passed'] else 'FAILED'}")

    return "\n".join([
        f"answers on {r['release']} (imports {r['imports_cpu_s']:.2f} CPU-s, counted once)",
        line(f"sampler {r['sampler']}", s),
        line(f"baseline {r['baseline']}", b),
        f"  ratio sampler/baseline x{r['ratio']}; with imports {s['cpu_s'] + r['imports_cpu_s']:.2f} CPU-s against "
        f"a target of {r['target_cpu_s']:.0f}: {'within' if r['within_target'] else 'OVER'}",
    ])
