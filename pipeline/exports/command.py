"""``scan2qa export``: write a released benchmark in a harness's own layout (SPEC §7)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from dataclasses import replace

import polars as pl

from pipeline.errors import ConfigError
from pipeline.output_paths import output_root_problem, refuse_object_store_uris
from pipeline.exports.pinpointqa import export_pinpointqa
from pipeline.exports.revsi import export_revsi
from pipeline.exports.vlmevalkit import export_vlmevalkit
from pipeline.exports.vsibench import export_vsibench
from pipeline.scoring.release import add_release_argument, load_release

FORMATS: dict[str, str] = {
    "revsi": "revsi",
    "vsibench": "vsibench",
    "vlmevalkit": "revsi",
    "pinpointqa": "pinpointqa",
}  # format -> default profile


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=sorted(FORMATS), required=True)
    add_release_argument(parser, "release folder holding tables/qa.parquet and videos/")
    parser.add_argument("--out", required=True, help="folder to write the export into")
    parser.add_argument("--profile", help="question profile to export (default: the format's own)")
    parser.add_argument("--budget", default="all", help="frame budget for the vsibench format, which holds one (default: all, the all-frames budget)")
    parser.add_argument("--copy", action="store_true", help="copy videos instead of hard-linking them")
    parser.add_argument(
        "--dataset",
        action="append",
        dest="datasets",
        metavar="NAME",
        help="export only this dataset's scans (repeatable; e.g. scannet, scannetpp, arkitscenes, 3rscan, multiscan)",
    )
    from pipeline.sampling.command import add_sampler_arguments

    add_sampler_arguments(parser)


def run(args: argparse.Namespace) -> int:
    refuse_object_store_uris("export", release=args.release, out=args.out, sampled=args.sampled)
    problem = output_root_problem(str(args.out))
    if problem:
        raise ConfigError(problem)
    release = load_release(args.release)
    if args.samplers:  # one more config per sampler: <label>_frame (lmms-eval task scan2qa_revsi_<label>_frame)
        from pipeline.sampling.command import sampled_folders, with_sampled

        folders = sampled_folders(args.release, args.samplers, args.sampled, Path(args.out) / "samplers")
        release = with_sampled(release, folders)
    if args.datasets:
        release = replace(release, qa=release.qa.filter(pl.col("dataset").is_in(args.datasets)))
    profile = args.profile or FORMATS[args.format]
    link = not args.copy
    if args.format == "revsi":
        counts = export_revsi(release, args.out, profile, link)
    elif args.format == "vsibench":
        counts = export_vsibench(release, args.out, args.budget, profile, link)
    elif args.format == "vlmevalkit":
        counts = export_vlmevalkit(release, args.out, profile, link)
    else:
        counts = export_pinpointqa(release, args.out, profile, link)
    total = sum(counts.values())
    print(f"exported {total} {profile} questions in {args.format} layout ({len(counts)} files) to {args.out}",
          file=sys.stderr)
    for line in left_out_lines(release, profile, args):
        print(line, file=sys.stderr)
    return 0


# The revsi layout writes dummy-video questions as configs of their own (16_frame_<kind>); the others cannot.
FORMATS_WITH_DUMMIES = frozenset({"revsi"})


def left_out_lines(release, profile: str, args: argparse.Namespace) -> list[str]:
    """What the export did not write, said rather than silently dropped: dummy-video questions, other budgets."""
    qa = release.qa.filter(pl.col("profile") == profile)
    lines = []
    dummy = qa.filter(pl.col("video_kind").fill_null("real") != "real").height
    if dummy and args.format not in FORMATS_WITH_DUMMIES:
        lines.append(f"left out {dummy} {profile} questions on dummy videos: the {args.format} layout holds real "
                     f"videos only (they stay in the release's qa.parquet)")
    if args.format == "vsibench":
        others = sorted(set(qa["budget"].unique().to_list()) - {args.budget})
        if others:
            lines.append(f"exported budget {args.budget} only (the vsibench layout holds one); "
                         f"also in the release: {', '.join(others)} (--budget B)")
    return lines
