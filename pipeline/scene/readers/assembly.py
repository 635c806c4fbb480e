"""The last step of every reader: a ``ParsedScan`` from the parts it read.

Kept in one place so that rooms are derived the same way for every dataset
(from the mesh in the world frame, seeded by the config) and a scan without
frames carries the same kind of warning whichever layout it came from.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.geometry.rooms import derive_rooms
from pipeline.scene.parsed import Frame, ImageLoader, Mesh, ParsedScan, SceneObject, dropped_pose_warnings


def assembled_scan(
    dataset: str,
    scene_id: str,
    source_uri: str,
    *,
    mesh: Mesh | None,
    objects: list[SceneObject],
    frames: list[Frame],
    source_fps: float,
    load_image: ImageLoader | None,
    warnings: list[str],
    seed: int,
    image_rotation: int = 0,
    scene_type: str = "",
) -> ParsedScan:
    return ParsedScan(
        dataset=dataset,
        scene_id=scene_id,
        source_uri=source_uri,
        mesh=mesh,
        objects=objects,
        rooms=derive_rooms(mesh.vertices, seed=seed, camera_xy=camera_positions(frames)) if mesh is not None else [],
        frames=frames,
        source_fps=source_fps,
        scene_type=scene_type,
        warnings=warnings,
        load_image=load_image,
        image_rotation=image_rotation,
    )


def camera_positions(frames: list[Frame]) -> np.ndarray:
    """Camera centres in the floor plane (world x, y), one per frame with a finite pose: where the video was
    recorded, which decides the main room."""
    centres = [f.pose[:2, 3] for f in frames if np.all(np.isfinite(f.pose))]
    return np.array(centres, dtype=float).reshape(-1, 2)


def posed_frames(
    found: tuple[list[Frame], ImageLoader, float, list[Path]] | None,
    warnings: list[str],
    files: list[Path],
    missing: str,
) -> tuple[list[Frame], ImageLoader | None, float]:
    """A reader's frame search as (frames, loader, fps); adds the frame files it read and the scan's warnings.

    ``missing`` says which files were looked for, so a scan without frames tells
    the user what to add rather than only that frame steps skip it.
    """
    if found is None:
        warnings.append(f"no camera frames ({missing}): frame-dependent steps skip this scan")
        return [], None, 0.0
    frames, load_image, fps, frame_files = found
    files += frame_files
    warnings += dropped_pose_warnings(frames)
    return frames, load_image, fps
