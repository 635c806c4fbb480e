"""Questions from annotation files alone (ReVSI boxes JSON, VSI-Bench meta-info), without scans.

With no frames, every annotated object is visible at budget ``"all"`` and the
geometry-only tasks are asked (counting, sizes, room size, distances,
directions, route planning); appearance order needs a video and is not.
Counting questions about a category whose annotated count disagrees with its
boxes are dropped, so every counting answer equals the annotation's count.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline import schemas
from pipeline.errors import ScanError
from pipeline.qa.candidates import generate_candidates
from pipeline.qa.finalize import finalize_qa
from pipeline.qa.letter_key import LetterKey
from pipeline.qa.profiles import Profile, load_profile
from pipeline.scene.readers.annotations import ANNOTATED_BUDGET, AnnotatedScene, read_annotations

COUNTING_FAMILIES = ("counting_single", "counting_multiple")


def annotation_files(path: str | Path) -> list[Path]:
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise ScanError(path.name, str(path), "no *.json annotation files in this folder")
        return files
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such annotation file or folder")
    return [path]


def read_all(path: str | Path, skipped: list[str] | None = None) -> list[AnnotatedScene]:
    """Every scene of a file or folder. In a folder a bad file (a scene list, broken JSON) is skipped and
    said in ``skipped`` (one ScanError line each) so the other files are still read; it fails only alone."""
    files = annotation_files(path)
    scenes = []
    for file in files:
        try:
            try:
                scenes += read_annotations(file)
            except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:  # content of an odd shape
                problem = f"unreadable annotation ({type(exc).__name__}: {exc})".splitlines()[0][:300]
                raise ScanError(file.stem, str(file), problem) from None
        except ScanError as exc:
            if len(files) == 1:
                raise
            if skipped is not None:
                skipped.append(str(exc))
    if not scenes and skipped:
        raise ScanError(Path(path).name, str(path), f"no annotation file could be read; first: {skipped[0]}")
    keys = [s.key for s in scenes]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ScanError(duplicates[0], str(path), "scene appears in more than one annotation file")
    return sorted(scenes, key=lambda s: s.key)


def scene_candidates(scene: AnnotatedScene, profile: Profile, seed: int) -> pl.DataFrame:
    candidates = generate_candidates(
        scene.objects,
        scene.rooms,
        scene.object_visibility,
        None,
        None,
        key=scene.key,
        budget=ANNOTATED_BUDGET,
        profile=profile,
        config=seed,
    )
    skip = {c.lower() for c in scene.count_conflicts}
    if not skip or candidates.is_empty():
        return candidates
    counting_types = [qt for qt, rule in profile.tasks.items() if rule.family in COUNTING_FAMILIES]
    keep = [
        qt not in counting_types or not any(n.lower() in skip for n in json.loads(g)["names"])
        for qt, g in zip(candidates["question_type"].to_list(), candidates["geometry"].to_list())
    ]
    return candidates.filter(pl.Series(keep, dtype=pl.Boolean))


def candidates_from_annotations(
    path: str | Path, profile: str | Profile, seed: int, skipped: list[str] | None = None
) -> pl.DataFrame:
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    frames = [scene_candidates(scene, prof, seed) for scene in read_all(path, skipped)]
    frames = [f for f in frames if not f.is_empty()]
    return pl.concat(frames) if frames else schemas.empty("qa_candidates")


def generate_from_annotations(
    path: str | Path,
    profile: str | Profile,
    seed: int = 0,
    skipped: list[str] | None = None,
    drops: list[pl.DataFrame] | None = None,
    letter_key: LetterKey | None = None,
) -> pl.DataFrame:
    """The finalized ``qa`` table of every scene in an annotation file or folder.

    Bad files of a folder are listed in ``skipped``; ``drops`` collects what the answer-distribution control
    dropped (see ``finalize_qa``); ``letter_key`` places the correct options (None: ``SCAN2QA_LETTER_KEY``).
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    candidates = candidates_from_annotations(path, prof, seed, skipped)
    return finalize_qa(candidates, profile=prof, seed=seed, drops=drops, letter_key=letter_key)
