"""VSI-Bench layout (SPEC §7): one Parquet of ``id, dataset, scene_name, question_type, question, options,
ground_truth`` and videos at ``<dataset>/<scene_name>.mp4``, so lmms-eval's ``vsibench`` task scores it with this
folder as its cache directory.

VSI-Bench has one video per scene, so one frame budget is exported per call
(``all`` by default, as VSI-Bench evaluates on the full video). ``id`` is the qa
table's string id (the harness never reads it) so that ``scan2qa eval`` can
score the harness output directly.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa

from pipeline.errors import ScanError
from pipeline.exports.common import PARQUET_NAME, place_video, require_video, select_rows, write_parquet, write_text
from pipeline.exports.dataset_card import dataset_card
from pipeline.scoring.release import Release

VSIBENCH_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("dataset", pa.string()),
        ("scene_name", pa.string()),
        ("question_type", pa.string()),
        ("question", pa.string()),
        ("options", pa.list_(pa.string())),
        ("ground_truth", pa.string()),
    ]
)


def export_vsibench(
    release: Release, out: Path, budget: str = "all", profile: str = "vsibench", link: bool = True
) -> dict[str, int]:
    out = Path(out)
    rows = select_rows(release, profile).filter(pl.col("budget") == budget)
    if rows.height == 0:
        raise ScanError("release", str(release.root), f"no {profile!r} questions at budget {budget!r}")
    records = []
    for row in rows.sort(["dataset", "scene_id", "question_type", "id"]).iter_rows(named=True):
        place_video(require_video(release, row), out / row["dataset"] / f"{row['scene_id']}.mp4", link)
        records.append(
            {
                "id": row["id"],
                "dataset": row["dataset"],
                "scene_name": row["scene_id"],
                "question_type": row["question_type"],
                "question": row["question"],
                "options": list(row["options"] or []),
                "ground_truth": str(row["ground_truth"]),
            }
        )
    write_parquet(pa.Table.from_pylist(records, schema=VSIBENCH_SCHEMA), out / PARQUET_NAME)
    write_text(
        out / "README.md",
        dataset_card(
            f"scan2qa {profile} benchmark ({budget} frames)",
            [("default", PARQUET_NAME, len(records))],
            VSIBENCH_SCHEMA,
            "Questions in the VSI-Bench layout; videos at `<dataset>/<scene_name>.mp4`.",
        ),
    )
    return {"default": len(records)}
