"""What one scan looks like under one frame budget: the inputs every question generator reads.

SPEC §3 makes ground truth a function of the budget: a question may only name
objects visible in the budget's frames and its answer is computed over visible
instances only. ``BudgetContext`` therefore holds the *visible* instances, the
scene-wide instance counts (a category is "unique" only if the scene holds one
instance) and the exact closest-point distance matrix between visible boxes,
computed once per scan and budget.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl
import shapely

from pipeline.geometry.distance import obb_distance_matrix
from pipeline.scene.parsed import OrientedBox
from pipeline.frames.video_paths import budget_video_path


@dataclass(frozen=True)
class Instance:
    object_id: int
    category: str
    box: OrientedBox
    first_timestamp: float | None  # first sampled frame meeting the visibility rule (appearance order)


@dataclass(frozen=True)
class RoomArea:
    kind: str
    area_m2: float
    polygon: object | None  # shapely geometry, None when only the area is known
    source: str


def _box(row: dict) -> OrientedBox:
    return OrientedBox(
        center=np.asarray(row["center"], dtype=float).reshape(3),
        extent=np.asarray(row["extent"], dtype=float).reshape(3),
        rotation=np.asarray(row["rotation"], dtype=float).reshape(3, 3),
    )


class BudgetContext:
    """Visible instances, scene counts, rooms and distances of one scan under one budget."""

    def __init__(
        self,
        key: str,
        budget: str,
        objects: pl.DataFrame,
        rooms: pl.DataFrame,
        object_visibility: pl.DataFrame,
        *,
        seed: int,
    ):
        self.key = key
        self.budget = str(budget)
        self.seed = int(seed)
        self.dataset, _, self.scene_id = key.partition("/")
        scan_objects = objects.filter(pl.col("key") == key).sort("object_id")
        vis = object_visibility.filter(
            (pl.col("key") == key) & (pl.col("budget") == self.budget) & pl.col("visible").fill_null(False)
        )
        first_ts = dict(zip(vis["object_id"].to_list(), vis["first_timestamp"].to_list()))
        self.scene_counts: dict[str, int] = defaultdict(int)
        self.all_instances: list[Instance] = []
        self.instances: list[Instance] = []
        for row in scan_objects.iter_rows(named=True):
            if row["structural"]:
                continue
            inst = Instance(int(row["object_id"]), str(row["category"]), _box(row), None)
            self.scene_counts[inst.category] += 1
            self.all_instances.append(inst)
            if inst.object_id in first_ts:
                ts = first_ts[inst.object_id]
                first = None if ts is None else float(ts)
                self.instances.append(Instance(inst.object_id, inst.category, inst.box, first))
        self.by_category: dict[str, list[Instance]] = defaultdict(list)
        for inst in self.instances:
            self.by_category[inst.category].append(inst)
        self._index = {inst.object_id: i for i, inst in enumerate(self.instances)}
        self.rooms: dict[str, RoomArea] = {}
        for row in rooms.filter(pl.col("key") == key).sort("room_id").iter_rows(named=True):
            if row["kind"] in self.rooms or row["area_m2"] is None:
                continue
            polygon = shapely.from_wkb(row["polygon_wkb"]) if row["polygon_wkb"] is not None else None
            self.rooms[row["kind"]] = RoomArea(row["kind"], float(row["area_m2"]), polygon, str(row["source"]))

    @property
    def categories(self) -> list[str]:
        """Categories with at least one visible instance, sorted."""
        return sorted(self.by_category)

    def unique_visible(self) -> list[Instance]:
        """Instances that are the only one of their category in the scene and are visible."""
        return [self.by_category[c][0] for c in self.categories if self.scene_counts[c] == 1]

    def all_of(self, category: str) -> list[int]:
        return [i.object_id for i in self.all_instances if i.category == category]

    @cached_property
    def distances(self) -> np.ndarray:
        """Exact closest-point distances between every pair of visible boxes."""
        boxes = [inst.box for inst in self.instances]
        if not boxes:
            return np.zeros((0, 0))
        return obb_distance_matrix(boxes, boxes)

    def index_of(self, inst: Instance) -> int:
        """Row and column of a visible instance in ``distances``."""
        return self._index[inst.object_id]

    def distance(self, a: Instance, b: Instance) -> float:
        return float(self.distances[self._index[a.object_id], self._index[b.object_id]])

    def nearest_of(self, anchor: Instance, category: str) -> tuple[float, Instance]:
        """Distance from ``anchor`` to the nearest *visible* instance of ``category`` (SPEC §3)."""
        row = self.distances[self._index[anchor.object_id]]
        best = min(self.by_category[category], key=lambda inst: (row[self._index[inst.object_id]], inst.object_id))
        return float(row[self._index[best.object_id]]), best

    def video_path(self) -> str:
        return self._video_path

    @cached_property
    def _video_path(self) -> str:
        return budget_video_path(self.budget, self.key)
