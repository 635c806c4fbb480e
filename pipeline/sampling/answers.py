"""Answers for exactly the frames a sampler takes, computed the way the budgets' answers are.

The release's per-frame visibility (every frame of the all-frame video) is
all it takes: the sampler's frames become one more ``frame_samples`` budget
(named by the sampler's label), ``pipeline.visibility.cast.object_visibility``
applies the SPEC §3 rule to them (thresholds, small-object floor, reviewer
overrides) and ``pipeline.qa.candidates.generate_candidates`` asks every
question the budgets ask, from visible instances only. Each real all-frame
question of the release is then re-answered by the candidate with the same
type and text: its answer *stays*, *changes* (a count of what is visible, an
appearance order, a nearest instance) or the question becomes *unanswerable*
(no candidate: its objects are not all seen, or its type's rule rejects it
under these frames) and is dropped with that reason. No ray is cast.

``max_candidates`` is lifted for this step: it is a per-scan draw that would
drop questions for reasons unrelated to the frames. Candidates are generated
under the all-frame budget's name (the generators' seeded draws hash it), so a
question is asked under the sampler whenever the frames allow the all-frame
draw to ask it; the answers are geometry of the sampled frames' visible
instances either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import Config
from pipeline.frames.budgets import ALL
from pipeline.frames.video_paths import budget_video_path
from pipeline.qa.candidates import generate_candidates
from pipeline.qa.ids import question_id
from pipeline.qa.profiles import Profile, load_profile
from pipeline.sampling.spec import Sampler, SamplerRefuses
from pipeline.visibility.cast import object_visibility

STAYS, CHANGES, UNANSWERABLE = "stays", "changes", "unanswerable"


@dataclass
class SampledBenchmark:
    sampler: Sampler
    qa: pl.DataFrame  # questions answerable under the sampler's frames, budget = sampler.label
    outcomes: pl.DataFrame  # sampled_answers: every all-frame question's fate, with the reason when dropped
    frame_samples: pl.DataFrame  # the sampler's frames (budget = sampler.label)
    object_visibility: pl.DataFrame
    declared_fps: dict[str, float] = field(default_factory=dict)  # per scan: fps written in the sampled video
    refused: dict[str, str] = field(default_factory=dict)  # scan -> why the harness takes no frames from it


def sampler_profile(name: str) -> Profile:
    base = load_profile(name)
    return replace(base, tasks={t: replace(rule, max_candidates=None) for t, rule in base.tasks.items()})


def sampled_frame_samples(sampler: Sampler, frame_samples: pl.DataFrame, scans: pl.DataFrame) -> tuple[pl.DataFrame, dict, dict]:
    """The sampler's ``frame_samples`` rows per scan, its videos' declared fps, and the scans it refuses."""
    rows, declared, refused = [], {}, {}
    fps_of = dict(zip(scans["key"].to_list(), scans["fps"].to_list())) if scans.height else {}
    for key in sorted(set(frame_samples["key"].to_list())):
        seq = frame_samples.filter((pl.col("key") == key) & (pl.col("budget") == ALL)).sort("rank")
        idx = seq["frame_index"].to_numpy().astype(np.int64)
        ts = seq["timestamp"].to_numpy().astype(np.float64)
        video_fps = float(fps_of.get(key) or 10.0)
        own = frame_samples.filter((pl.col("key") == key) & (pl.col("budget") == sampler.label))
        try:
            if sampler.is_budget and own.height:  # the release's own budget rows: exactly its video's frames
                position = {int(f): i for i, f in enumerate(idx)}
                pos = np.array([position[int(f)] for f in own.sort("rank")["frame_index"]], dtype=np.int64)
            else:
                pos = sampler.positions(len(idx), video_fps, key, key.partition("/")[2])
        except SamplerRefuses as exc:
            refused[key] = str(exc)
            continue
        if len(idx) == 0:
            continue
        if sampler.is_budget:
            declared[key] = video_fps if sampler.count is None else 1.0  # as the release's budget videos
        else:
            # qwen-vl-utils' sample_fps: the sampled frames span the all-frame video's duration.
            declared[key] = len(pos) * video_fps / max(len(idx), 1)
        rows.append(
            pl.DataFrame(
                {
                    "key": [key] * len(pos),
                    "budget": [sampler.label] * len(pos),
                    "rank": np.arange(len(pos), dtype=np.int32),
                    "frame_index": idx[pos].astype(np.int32),
                    "timestamp": ts[pos],
                }
            )
        )
    table = pl.concat([schemas.conform("frame_samples", r) for r in rows]) if rows else schemas.empty("frame_samples")
    return table, declared, refused


def _correct_text(row: dict) -> str | None:
    try:
        return json.loads(row["geometry"] or "{}").get("correct")
    except ValueError:
        return None


def _letter_of(options: list[str], text: str) -> str | None:
    for option in options or []:
        letter, _, body = option.partition(". ")
        if body == text:
            return letter
    return None


def compute_answers(
    sampler: Sampler,
    tables: dict[str, pl.DataFrame],
    config: Config | None = None,
) -> SampledBenchmark:
    """Re-answer every real all-frame question of ``tables['qa']`` under ``sampler``'s frames."""
    config = config or Config()
    qa = tables["qa"].filter((pl.col("budget") == ALL) & (pl.col("video_kind").fill_null("real") == "real"))
    qa = qa.filter(pl.col("profile") != "pinpointqa").sort("key", "profile", "question_type", "id")
    samples, declared, refused = sampled_frame_samples(sampler, tables["frame_samples"], tables["scans"])
    visibility, objects, rooms = tables["visibility"], tables["objects"], tables["rooms"]
    overrides = tables.get("visibility_overrides")
    label = sampler.label
    qa_rows, outcomes, decided_parts = [], [], []
    profiles: dict[str, Profile] = {}
    for key in sorted(set(qa["key"].to_list())):
        scan_qa = qa.filter(pl.col("key") == key)
        scan_samples = samples.filter(pl.col("key") == key)
        decided = None
        if scan_samples.height:
            decided = object_visibility(key, visibility, scan_samples, objects, overrides, config)
            decided_parts.append(decided)
            seen = set(decided.filter(pl.col("visible"))["object_id"].to_list())
        for profile_name in sorted(set(scan_qa["profile"].to_list())):
            rows = scan_qa.filter(pl.col("profile") == profile_name)
            by_text: dict[tuple[str, str], list[dict]] = {}
            if decided is not None:
                profile = profiles.setdefault(profile_name, sampler_profile(profile_name))
                # Generated under the all-frame budget's name: the generators' seeded draws (which triples, which
                # distractors) hash the budget, so only this name draws what the all-frame questions drew.
                candidates = generate_candidates(
                    objects, rooms, decided.with_columns(budget=pl.lit(ALL)),
                    scan_samples.with_columns(budget=pl.lit(ALL)), None, key=key, budget=ALL, profile=profile,
                    config=config,
                )
                for cand in candidates.filter(pl.col("video_kind") == "real").sort("id").iter_rows(named=True):
                    by_text.setdefault((cand["question_type"], cand["question"]), []).append(cand)
            for row in rows.iter_rows(named=True):
                outcome = {
                    "id": row["id"], "key": key, "profile": profile_name, "question_type": row["question_type"],
                    "sampler": label, "frames": scan_samples.height, "all_frame_answer": row["ground_truth"],
                    "answer": None, "outcome": UNANSWERABLE, "reason": None,
                }
                options = list(row["options"] or [])
                matches = by_text.get((row["question_type"], row["question"]), [])
                same_objects = [c for c in matches if sorted(c["used_obj_ids"]) == sorted(row["used_obj_ids"])]
                cand = (same_objects or matches or [None])[0]
                if decided is None:
                    outcome["reason"] = refused.get(key, "the sampler takes no frame of this scan")
                elif cand is None:
                    unseen = [int(i) for i in row["used_obj_ids"] if int(i) not in seen]
                    outcome["reason"] = (
                        "objects not seen in the sampled frames: " + ", ".join(str(i) for i in unseen)
                        if unseen
                        else "all its objects are seen, but its type's generator does not ask it from the sampled frames"
                    )
                else:
                    if options:
                        text = _correct_text(cand)
                        letter = _letter_of(options, text) if text is not None else None
                        if letter is None:
                            outcome["reason"] = f"its answer under the sampled frames ({text}) is not among its options"
                            outcomes.append(outcome)
                            continue
                        ground_truth, value = letter, None
                    else:
                        ground_truth, value = cand["ground_truth"], cand["answer_value"]
                    outcome["answer"] = ground_truth
                    outcome["outcome"] = STAYS if ground_truth == row["ground_truth"] else CHANGES
                    geometry = json.loads(cand["geometry"] or "{}")
                    geometry["all_frame_id"] = row["id"]
                    qa_rows.append(
                        {
                            **row,
                            "id": question_id(key, label, profile_name, row["question_type"], "real", row["question"],
                                              row["used_obj_ids"]),
                            "budget": label,
                            "ground_truth": ground_truth,
                            "answer_value": value,
                            "used_obj_ids": [int(i) for i in cand["used_obj_ids"]],
                            "video": budget_video_path(label, key),
                            "geometry": json.dumps(geometry, sort_keys=True, separators=(",", ":")),
                        }
                    )
                outcomes.append(outcome)
    decided_all = pl.concat(decided_parts) if decided_parts else schemas.empty("object_visibility")
    return SampledBenchmark(
        sampler=sampler,
        qa=schemas.from_rows("qa", sorted(qa_rows, key=lambda r: r["id"])),
        outcomes=schemas.from_rows("sampled_answers", sorted(outcomes, key=lambda r: r["id"])),
        frame_samples=samples,
        object_visibility=schemas.conform("object_visibility", decided_all),
        declared_fps=declared,
        refused=refused,
    )


def find_visibility(release: Path, keys: list[str]) -> pl.DataFrame | None:
    """Per-frame visibility for a release: its own per-scan files (``tables/visibility/<key>.parquet``, shipped
    since releases carry them), else those of the output root two levels up (a release made before), or one
    ``tables/visibility.parquet``; ``--release <output_root>`` reads the output root's directly.
    """
    from pipeline.storage import read_table, upath

    release = Path(release).resolve()
    own = release / "tables" / "visibility.parquet"
    if own.exists():
        return read_table(upath(own), "visibility")
    for root in (release, release.parent.parent):
        folder = root / "tables" / "visibility"
        paths = [folder / f"{key}.parquet" for key in keys]
        if folder.is_dir() and all(p.exists() for p in paths):
            return pl.concat([read_table(upath(p), "visibility") for p in paths]) if paths else schemas.empty("visibility")
    return None
