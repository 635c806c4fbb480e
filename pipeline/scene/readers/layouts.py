"""Folders that the datasets' own downloads put their scenes in.

ScanNet's download script writes ``<root>/scans/<scene_id>/`` (and
``<root>/scans_test/<scene_id>/``) with the label map at ``<root>``; ScanNet++
writes ``<root>/data/<scene_id>/``. Knowing these names lets a step find a scan
in a downloaded root with a few existence checks instead of listing the root
(``pipeline.scene.discovery.locate_scan``), and lets readers find the files kept at
the top of the download (the label map) rather than only next to the scene.
"""

from __future__ import annotations

from pipeline import datasets

DOWNLOAD_FOLDERS: tuple[str, ...] = datasets.DOWNLOAD_FOLDERS  # each dataset's, from pipeline/datasets.py


def scans_root_folders(folder) -> list:
    """Where a scene's scans-root files may sit: its parent, and above that when the parent is a download folder."""
    parent = folder.parent
    return [parent, parent.parent] if parent.name in DOWNLOAD_FOLDERS else [parent]
