"""Every dataset a scan can come from, in one table: its all-frame rate and where its download puts scenes.

The reader of a dataset (``pipeline.scene.readers.READERS``) says whether a folder is one of
its scenes and parses it; what the rest of the pipeline needs to know about the dataset is
here, read by the schemas (``DATASETS``), the frames step (the all-frame rate), scan
discovery and the readers (download folders). Adding a dataset is its reader module, its
``READERS`` line and one row here (docs/DESIGN.md, "How to add a reader").

A leaf module: it imports nothing of the pipeline, so every stage may read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dataset:
    name: str  # the ``dataset`` column and the first part of a scan key
    # The ``frames`` config field holding the rate its scans are resampled to: every dataset is brought to
    # ``frames.fps`` (10) except 3RScan, which keeps its native sparsity (``frames.fps_3rscan``, 4).
    fps_setting: str = "fps"
    # Folders the dataset's own download script puts scenes in under the root (``<root>/scans/<scene_id>/``):
    # scan discovery finds a scan there with existence checks, and readers find the files kept above them.
    download_folders: tuple[str, ...] = ()


DATASET_TABLE: tuple[Dataset, ...] = (
    Dataset("scannet", download_folders=("scans", "scans_test")),
    Dataset("scannetpp", download_folders=("data",)),
    Dataset("arkitscenes"),
    Dataset("3rscan", fps_setting="fps_3rscan"),
    Dataset("multiscan"),
    Dataset("synthetic"),  # the synthetic generator's scenes, written in the layouts above (pipeline/synth)
)
BY_NAME: dict[str, Dataset] = {d.name: d for d in DATASET_TABLE}

DATASET_NAMES: tuple[str, ...] = tuple(d.name for d in DATASET_TABLE)
DOWNLOAD_FOLDERS: tuple[str, ...] = tuple(dict.fromkeys(f for d in DATASET_TABLE for f in d.download_folders))


def all_frame_rate(dataset: str, frames_config) -> float:
    """The rate (fps) ``dataset``'s scans are resampled to, from the run's ``frames`` config (an unknown name: ``fps``)."""
    entry = BY_NAME.get(dataset)
    return float(getattr(frames_config, entry.fps_setting if entry is not None else "fps"))
