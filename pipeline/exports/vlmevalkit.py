"""VLMEvalKit layout (SPEC §7): a TSV per frame budget with ``index, video, question, question_type, candidates,
answer``.

VLMEvalKit reads its TSVs with pandas and turns list-valued cells back into
lists with a Python literal parser, so ``candidates`` is written as a Python
list literal (``"['A. chair', 'B. table']"``, ``"[]"`` for numeric questions)
that round-trips with ``ast.literal_eval``. ``video`` is the video path relative
to the TSV. ``index`` must be an integer for VLMEvalKit, so a sidecar
``<name>.ids.json`` maps each index back to the qa table's question id (what
``scan2qa eval`` reads).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from pipeline.exports.common import budget_order, config_name, place_video, require_video, select_rows, write_text
from pipeline.scoring.release import Release

TSV_COLUMNS: tuple[str, ...] = ("index", "video", "question", "question_type", "candidates", "answer")


def tsv_name(profile: str, budget: str) -> str:
    return f"{profile}_{config_name(budget)}"


def export_vlmevalkit(release: Release, out: Path, profile: str = "revsi", link: bool = True) -> dict[str, int]:
    out = Path(out)
    rows = select_rows(release, profile)
    counts = {}
    for budget in sorted(rows["budget"].unique().to_list(), key=budget_order):
        part = rows.filter(rows["budget"] == budget)
        name = tsv_name(profile, budget)
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter="\t", quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        writer.writerow(TSV_COLUMNS)
        ids = {}
        for index, row in enumerate(part.iter_rows(named=True)):
            relative = f"videos/{config_name(budget)}/{row['scene_id']}.mp4"
            place_video(require_video(release, row), out / relative, link)
            candidates = repr([str(o) for o in (row["options"] or [])])
            writer.writerow([index, relative, row["question"], row["question_type"], candidates, row["ground_truth"]])
            ids[str(index)] = row["id"]
        write_text(out / f"{name}.tsv", buf.getvalue())
        write_text(out / f"{name}.ids.json", json.dumps(ids, indent=0, sort_keys=False) + "\n")
        counts[name] = part.height
    return counts
