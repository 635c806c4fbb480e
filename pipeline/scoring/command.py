"""``scan2qa eval``: score a predictions file (JSONL ``{id, prediction}``) against a release.

The judge for free-form localisation (FSD) is configured by flags or the
``SCAN2QA_JUDGE_URL`` / ``SCAN2QA_JUDGE_MODEL`` / ``SCAN2QA_JUDGE_KEY``
environment; without one, FSD is reported as not scored instead of zero.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline.scoring.release import add_release_argument
from pipeline.scoring.evaluate import evaluate_release
from pipeline.scoring.judge import FsdJudge, JudgeSettings
from pipeline.scoring.report import summary_lines, to_json, to_markdown, write_reports


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_release_argument(parser, "release folder holding tables/qa.parquet and videos/")
    parser.add_argument("--predictions", required=True, help='JSONL file of {"id": ..., "prediction": ...}')
    parser.add_argument(
        "--mode",
        choices=("harness", "robust"),
        default="harness",
        help="harness: lmms-eval's first-token rule (default); robust: also reads answer phrases, units, words",
    )
    parser.add_argument(
        "--out", help="write scores.json, scores.md and scores.html into this folder and print only a summary"
    )
    parser.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    parser.add_argument("--judge-url", help="OpenAI-compatible base URL for the FSD judge (env SCAN2QA_JUDGE_URL)")
    parser.add_argument("--judge-model", help="judge model name (env SCAN2QA_JUDGE_MODEL)")
    parser.add_argument("--judge-key", help="judge API key (env SCAN2QA_JUDGE_KEY)")
    parser.add_argument(
        "--judge-cache",
        help="JSON-lines cache of judgments (default: <out>/judge_cache.jsonl, else next to the predictions)",
    )
    parser.add_argument("--no-judge", action="store_true", help="do not call a judge even if one is configured")
    from pipeline.sampling.command import add_sampler_arguments

    add_sampler_arguments(parser)


def _judge(args: argparse.Namespace) -> FsdJudge | None:
    if args.no_judge:
        return None
    cache = args.judge_cache or str(
        Path(args.out) / "judge_cache.jsonl" if args.out else Path(args.predictions).with_suffix(".judge_cache.jsonl")
    )
    settings = JudgeSettings.from_env(url=args.judge_url, model=args.judge_model, key=args.judge_key, cache_path=cache)
    return FsdJudge(settings) if settings.configured else None


def run(args: argparse.Namespace) -> int:
    from pipeline.output_paths import refuse_object_store_uris

    refuse_object_store_uris("eval", release=args.release, predictions=args.predictions, out=args.out,
                             sampled=args.sampled)
    if args.samplers:  # score against the sampler's ground truth (its own question ids)
        import tempfile

        from pipeline.sampling.command import sampled_folders

        if len(args.samplers) > 1:
            raise ValueError("scan2qa eval scores one --sampler at a time")
        with tempfile.TemporaryDirectory(prefix="scan2qa-sampled-") as work:
            folder = sampled_folders(args.release, args.samplers, args.sampled, Path(work), videos=False)[0]
            report = evaluate_release(str(folder), args.predictions, args.mode, _judge(args))
            return _print(args, report)
    report = evaluate_release(args.release, args.predictions, args.mode, _judge(args))
    return _print(args, report)


def _print(args: argparse.Namespace, report) -> int:
    if args.json:
        if args.out:
            write_reports(report, args.out)
        sys.stdout.write(json.dumps(json.loads(to_json(report)), sort_keys=True) + "\n")
    elif args.out:
        # The full report goes to the files; the terminal gets a summary, not hundreds of Markdown lines.
        paths = write_reports(report, args.out)
        sys.stdout.write("\n".join(summary_lines(report)) + "\n")
        print(f"full report: {', '.join(str(p) for p in paths.values())}", file=sys.stderr)
    else:
        sys.stdout.write(to_markdown(report))
    return 0
