"""Where a scan's budget videos live under the output root.

``videos/<N>_frame/<dataset>/<scene_id>.mp4`` (``all_frame`` for all frames):
keyed by dataset as well as scene, because one scene id can exist in two
datasets (the synthetic generator writes the same scene in all five layouts)
and a shared name would let one scan's video silently overwrite another's.
Exports flatten this to their formats' ``<N>_frame/<scene_id>.mp4`` and refuse
a release in which two scans share a scene id.
"""

from __future__ import annotations

from pipeline.frames.budgets import ALL


def budget_folder(budget: str) -> str:
    return "all_frame" if budget == ALL else f"{budget}_frame"


def budget_video_path(budget: str, key: str) -> str:
    """Path of a scan's (``dataset/scene_id``) budget video relative to the output root."""
    dataset, _, scene_id = key.partition("/")
    if not dataset or not scene_id:
        raise ValueError(f"scan key must be 'dataset/scene_id', got {key!r}")
    return f"videos/{budget_folder(budget)}/{dataset}/{scene_id}.mp4"
