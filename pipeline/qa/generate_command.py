"""``scan2qa generate``: questions from existing annotations, without scans.

Benchmark builders who already have ReVSI-style box annotations or VSI-Bench's
meta-info files can regenerate the geometry-only questions (all frames) under
either profile and compare them side by side, without any scan on disk.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import polars as pl

from pipeline import schemas, storage
from pipeline.qa.distribution import drops_path
from pipeline.qa.from_annotations import generate_from_annotations
from pipeline.qa.letter_key import default_key_file, load_or_create


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--annotations", required=True, help="annotation JSON file, or a folder of them")
    parser.add_argument("--profile", default="revsi", choices=["revsi", "vsibench"], help="question profile")
    parser.add_argument("--out", required=True, help="qa Parquet file to write (read it with scan2qa stats --qa)")
    parser.add_argument("--seed", type=int, default=0, help="same seed and letter key, byte-identical table")
    parser.add_argument(
        "--letter-key", metavar="FILE",
        help="secret that places the correct options (created if absent; default <out stem>.letter_key beside --out; "
        "SCAN2QA_LETTER_KEY, hex, wins over both). Keep it out of what you publish, keep it to rebuild the same table",
    )


def run(args: argparse.Namespace) -> int:
    from pipeline.output_paths import refuse_object_store_uris

    refuse_object_store_uris("generate", annotations=args.annotations, out=args.out, letter_key=args.letter_key)
    started = time.perf_counter()
    skipped: list[str] = []
    drops: list = []
    key = load_or_create(args.letter_key or default_key_file(args.out))
    qa = generate_from_annotations(
        args.annotations, args.profile, seed=args.seed, skipped=skipped, drops=drops, letter_key=key
    )
    for line in skipped:
        print(f"skipped: {line}")
    out = Path(args.out)
    storage.write_table(storage.upath(out), "qa", qa)
    record = pl.concat(drops) if drops else schemas.empty("qa_distribution_drops")
    storage.write_table(storage.upath(drops_path(out)), "qa_distribution_drops", record)
    scenes = qa["key"].n_unique() if qa.height else 0
    print(f"{qa.height} questions over {scenes} scenes ({args.profile}) -> {out} ({time.perf_counter() - started:.1f} s)")
    dropped = dict(record.group_by("question_type").len().iter_rows()) if record.height else {}
    for row in qa.filter(pl.col("video_kind") == "real").group_by("question_type").len().sort("question_type").iter_rows(named=True):
        lost = dropped.get(row["question_type"], 0)
        note = f" (answer-distribution control dropped {lost})" if lost else ""
        print(f"  {row['question_type']}: {row['len']}{note}")
    print(f"distribution record -> {drops_path(out)}")
    print(f"letter key {key.fingerprint} from {key.source} (secret: do not publish it; keep it to rebuild this table)")
    return 0
