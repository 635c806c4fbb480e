"""Floor-plane footprints of oriented boxes, for route legs and room containment.

A footprint is the xy shadow of the solid box: the convex hull of its 8
corners projected on the floor. For the usual gravity-aligned box this is the
rectangle spanned by the two horizontal axes; a tilted box gets its true,
larger shadow. Degenerate boxes (zero horizontal size) get a hair-thin
polygon instead of a point or line so that shapely predicates stay polygonal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import shapely
from shapely.geometry import Polygon

from pipeline.geometry.shapes import OrientedBox

# Footprints thinner than this are padded to it (metres), e.g. a box annotated as a flat panel.
MIN_FOOTPRINT_WIDTH = 1e-3


def box_footprint(box: OrientedBox) -> Polygon:
    """The xy footprint polygon of one box."""
    return box_footprints([box])[0]


def box_footprints(boxes: Sequence[OrientedBox]) -> np.ndarray:
    """Object array of xy footprint polygons, one per box, built in one vectorised shapely call."""
    if len(boxes) == 0:
        return np.empty(0, dtype=object)
    corners = np.stack([b.corners()[:, :2] for b in boxes])  # (N, 8, 2)
    hulls = shapely.convex_hull(shapely.multipoints(corners))
    thin = shapely.get_type_id(hulls) != shapely.GeometryType.POLYGON
    if np.any(thin):
        hulls[thin] = shapely.convex_hull(shapely.buffer(hulls[thin], MIN_FOOTPRINT_WIDTH / 2.0, quad_segs=1))
    return hulls


def box_bottom_z(box: OrientedBox) -> float:
    """Lowest z of the solid box (where it meets the floor, for a floor-standing object)."""
    return float(box.corners()[:, 2].min())


def box_top_z(box: OrientedBox) -> float:
    return float(box.corners()[:, 2].max())
