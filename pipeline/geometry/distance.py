"""Closest-point distances between objects: exact oriented-box distance and mesh distance.

The distance questions ask for the gap "from the closest point of each object",
so a centre distance or a sampled surface distance would put systematic error
into ground truth. Two solid boxes either intersect (distance 0, decided
exactly by the 15-axis separating-axis test) or are disjoint, and then a
closest pair can always be chosen among three kinds of feature pairs:

* a corner of one box and the other solid box (clamp the corner into the box);
* the relative interiors of two non-parallel edges (closest points of the two
  lines, which are unique).

Why that suffices: the closest pairs are ``{(x, x + v) : x in A ∩ (B - v)}``
for the unique minimum difference vector ``v``; pick ``x`` at a vertex of that
polytope. If neither ``x`` nor ``x + v`` is a box corner, the constraints active
there must span R³, and optimality (``v`` orthogonal to every edge direction
through the closest points and parallel to every face normal at an interior
face point) leaves only edge-interior against edge-interior with non-parallel
edges. Every candidate is a genuine pair of points of the two boxes, so the
minimum over candidates is exact up to floating point, with no tolerance
loop. Everything is vectorised over box pairs so that a scene's full distance
matrix costs one numpy pass; edge pairs that cannot hold an interior closest
pair (the other box does not reach both faces adjacent to the edge) are
pruned before the segment algebra, which leaves about 11 of the 144.
``obb_closest_points`` keeps the unpruned candidate set and returns the two
points, so tests can verify every answer with a separating-slab certificate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.spatial import cKDTree

from pipeline.geometry.shapes import OrientedBox

# (8, 3) corner signs; corner k has sign ``_SIGNS[k]`` on each local axis.
_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
# Edges along local axis k start at the corners whose sign on axis k is -1 (four per axis).
_EDGE_AXIS = np.repeat(np.arange(3), 4)  # (12,)
_EDGE_START = np.concatenate([np.flatnonzero(_SIGNS[:, k] < 0) for k in range(3)])  # (12,) corner indices
_I1 = np.array([1, 2, 0])
_I2 = np.array([2, 0, 1])

# Added to |R| in the separating-axis test so that near-parallel edge pairs
# (cross product ~ 0) cannot produce a spurious separating axis.
_SAT_EPS = 1e-12
# Edge pairs with sin² of their angle below this are parallel: their closest
# pair is also attained at an edge endpoint, which the corner candidates cover.
_PARALLEL_SIN2 = 1e-18
# Pairs per vectorised chunk (bounds memory at ~ 150 kB per pair of scratch).
_CHUNK = 2048


def _stack(boxes: Sequence[OrientedBox]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    centers = np.array([np.asarray(b.center, dtype=float).reshape(3) for b in boxes], dtype=float).reshape(-1, 3)
    halves = np.array([np.asarray(b.extent, dtype=float).reshape(3) for b in boxes], dtype=float).reshape(-1, 3) / 2.0
    rotations = np.array([np.asarray(b.rotation, dtype=float).reshape(3, 3) for b in boxes], dtype=float)
    return centers, halves, rotations.reshape(-1, 3, 3)


def _pair_frames(ca, ha, ra, cb, hb, rb):
    """B's rotation and centre expressed in A's box frame (A becomes axis-aligned at the origin)."""
    rel_rot = np.einsum("pji,pjk->pik", ra, rb)  # columns: B's axes in A's frame
    rel_t = np.einsum("pji,pj->pi", ra, cb - ca)
    return rel_rot, rel_t


def _separated(ha, hb, rel_rot, rel_t) -> np.ndarray:
    """Separating-axis test for P pairs (A axis-aligned at origin): True where a separating axis exists."""
    abs_r = np.abs(rel_rot) + _SAT_EPS
    # A's face normals.
    sep = np.any(np.abs(rel_t) > ha + np.einsum("pij,pj->pi", abs_r, hb), axis=1)
    # B's face normals.
    proj_t = np.einsum("pi,pij->pj", rel_t, rel_rot)
    sep |= np.any(np.abs(proj_t) > np.einsum("pi,pij->pj", ha, abs_r) + hb, axis=1)
    # A_i x B_j for all i, j: arrays indexed [p, i, j].
    ra_ = ha[:, _I1, None] * abs_r[:, _I2, :] + ha[:, _I2, None] * abs_r[:, _I1, :]
    rb_ = hb[:, None, _I1] * abs_r[:, :, _I2] + hb[:, None, _I2] * abs_r[:, :, _I1]
    dist = np.abs(rel_t[:, _I2, None] * rel_rot[:, _I1, :] - rel_t[:, _I1, None] * rel_rot[:, _I2, :])
    sep |= np.any(dist > ra_ + rb_, axis=(1, 2))
    return sep


def _feature_candidates(ha, hb, rel_rot, rel_t):
    """Candidate closest pairs in A's frame: (P, K) distances and (P, K, 3) points on A and on B."""
    corners_a = _SIGNS[None] * ha[:, None, :]  # (P, 8, 3) in A's frame
    corners_b = np.einsum("pkj,pij->pki", _SIGNS[None] * hb[:, None, :], rel_rot) + rel_t[:, None, :]

    # Corners of B clamped into A.
    on_a_from_b = np.clip(corners_b, -ha[:, None, :], ha[:, None, :])
    # Corners of A clamped into B (in B's frame, then back to A's frame).
    a_in_b = np.einsum("pij,pki->pkj", rel_rot, corners_a - rel_t[:, None, :])
    clamped = np.clip(a_in_b, -hb[:, None, :], hb[:, None, :])
    on_b_from_a = np.einsum("pij,pkj->pki", rel_rot, clamped) + rel_t[:, None, :]

    # Edge interiors: A's 12 edges against B's 12 edges.
    p0 = corners_a[:, _EDGE_START, :]  # (P, 12, 3)
    d1 = np.zeros_like(p0)
    d1[:, np.arange(12), _EDGE_AXIS] = 2.0 * ha[:, _EDGE_AXIS]
    q0 = corners_b[:, _EDGE_START, :]
    d2 = np.transpose(rel_rot[:, :, _EDGE_AXIS], (0, 2, 1)) * (2.0 * hb[:, _EDGE_AXIS])[:, :, None]
    p0e, d1e = p0[:, :, None, :], d1[:, :, None, :]
    q0e, d2e = q0[:, None, :, :], d2[:, None, :, :]
    r = p0e - q0e
    a = np.sum(d1e * d1e, axis=-1)
    e = np.sum(d2e * d2e, axis=-1)
    b = np.sum(d1e * d2e, axis=-1)
    c = np.sum(d1e * r, axis=-1)
    f = np.sum(d2e * r, axis=-1)
    denom = a * e - b * b
    crossing = denom > _PARALLEL_SIN2 * a * e
    safe = np.where(crossing, denom, 1.0)
    s = np.where(crossing, np.clip((b * f - c * e) / safe, 0.0, 1.0), 0.0)
    t = np.where(crossing, np.clip((a * f - b * c) / safe, 0.0, 1.0), 0.0)
    edge_on_a = (p0e + s[..., None] * d1e).reshape(len(ha), -1, 3)
    edge_on_b = (q0e + t[..., None] * d2e).reshape(len(ha), -1, 3)

    on_a = np.concatenate([on_a_from_b, corners_a, edge_on_a], axis=1)
    on_b = np.concatenate([corners_b, on_b_from_a, edge_on_b], axis=1)
    dists = np.linalg.norm(on_a - on_b, axis=-1)
    return dists, on_a, on_b


def _edge_reach_masks(ha, hb, rel_rot, rel_t) -> tuple[np.ndarray, np.ndarray]:
    """(P, 12) masks of the edges of A and of B that can hold an interior closest point.

    If the closest pair sits inside A's edge e, the gap vector lies in the
    normal cone of e (spanned by its two adjacent face normals), so B must
    reach at least to both of those face planes; symmetrically for B's edges.
    Typical separated pairs keep 1-4 edges per box, so about 1/16 of the 144
    edge pairs survive.
    """
    abs_r = np.abs(rel_rot)
    spread_b = abs_r @ hb[:, :, None]  # (P, 3, 1): B's half extent along A's axes
    spread_a = np.transpose(abs_r, (0, 2, 1)) @ ha[:, :, None]  # A's half extent along B's axes
    t_b = -np.einsum("pij,pi->pj", rel_rot, rel_t)  # A's centre in B's frame
    signs = np.array([-1.0, 1.0])
    tol_a = 1e-9 * (1.0 + ha)[:, :, None]
    tol_b = 1e-9 * (1.0 + hb)[:, :, None]
    # reach[p, axis, s] = the other box extends to (or past) the face (axis, signs[s]).
    reach_a = signs * rel_t[:, :, None] + spread_b >= ha[:, :, None] - tol_a
    reach_b = signs * t_b[:, :, None] + spread_a >= hb[:, :, None] - tol_b
    return _edges_from_faces(reach_a), _edges_from_faces(reach_b)


# For edge 4k+m: its two other axes and the sign index (0: -, 1: +) of its start corner on them.
_EDGE_OTHER_AXES = np.array([[a for a in range(3) if a != k] for k in _EDGE_AXIS])  # (12, 2)
_EDGE_OTHER_SIGNS = (_SIGNS[_EDGE_START[:, None], _EDGE_OTHER_AXES] > 0).astype(int)  # (12, 2)


def _edges_from_faces(reach: np.ndarray) -> np.ndarray:
    first = reach[:, _EDGE_OTHER_AXES[:, 0], _EDGE_OTHER_SIGNS[:, 0]]
    second = reach[:, _EDGE_OTHER_AXES[:, 1], _EDGE_OTHER_SIGNS[:, 1]]
    return first & second


def _min_feature_distance(ha, hb, rel_rot, rel_t) -> np.ndarray:
    """(P,) minimum over the corner candidates and the edge pairs that can hold the closest pair.

    Same candidates as ``_feature_candidates`` except edge pairs that
    ``_edge_reach_masks`` proves cannot be interior-interior closest pairs;
    the survivors are gathered into flat arrays, so cost scales with them.
    """
    n = len(ha)
    rot_t = np.transpose(rel_rot, (0, 2, 1))
    corners_a = _SIGNS[None] * ha[:, None, :]  # (P, 8, 3)
    corners_b = np.matmul(_SIGNS[None] * hb[:, None, :], rot_t) + rel_t[:, None, :]
    excess_b = np.maximum(np.abs(corners_b) - ha[:, None, :], 0.0)
    a_in_b = np.matmul(corners_a - rel_t[:, None, :], rel_rot)
    excess_a = np.maximum(np.abs(a_in_b) - hb[:, None, :], 0.0)
    best_sq = np.minimum((excess_b * excess_b).sum(axis=2).min(axis=1), (excess_a * excess_a).sum(axis=2).min(axis=1))

    edges_a, edges_b = _edge_reach_masks(ha, hb, rel_rot, rel_t)
    pair, ea, eb = np.nonzero(edges_a[:, :, None] & edges_b[:, None, :])
    if pair.size:
        ka, kb = _EDGE_AXIS[ea], _EDGE_AXIS[eb]
        p0 = corners_a[pair, _EDGE_START[ea]]  # (K, 3)
        q0 = corners_b[pair, _EDGE_START[eb]]
        len_a = 2.0 * ha[pair, ka]
        d1 = np.zeros_like(p0)
        d1[np.arange(pair.size), ka] = len_a
        d2 = rel_rot[pair, :, kb] * (2.0 * hb[pair, kb])[:, None]
        r = p0 - q0
        a = len_a * len_a
        e = (d2 * d2).sum(axis=1)
        b = len_a * d2[np.arange(pair.size), ka]
        c = len_a * r[np.arange(pair.size), ka]
        f = (d2 * r).sum(axis=1)
        denom = a * e - b * b
        crossing = denom > _PARALLEL_SIN2 * a * e
        inv = np.zeros_like(denom)
        np.divide(1.0, denom, out=inv, where=crossing)
        s = np.minimum(np.maximum((b * f - c * e) * inv, 0.0), 1.0)
        t = np.minimum(np.maximum((a * f - b * c) * inv, 0.0), 1.0)
        gap = r + s[:, None] * d1 - t[:, None] * d2
        edge_sq = (gap * gap).sum(axis=1)
        np.minimum.at(best_sq, pair, edge_sq)
    return np.sqrt(best_sq)


def obb_pair_distances(boxes_a: Sequence[OrientedBox], boxes_b: Sequence[OrientedBox]) -> np.ndarray:
    """Exact distance between ``boxes_a[i]`` and ``boxes_b[i]`` for every i (0 where they intersect)."""
    if len(boxes_a) != len(boxes_b):
        raise ValueError(f"obb_pair_distances: {len(boxes_a)} boxes against {len(boxes_b)}")
    ca, ha, ra = _stack(boxes_a)
    cb, hb, rb = _stack(boxes_b)
    return _pair_distances_arrays(ca, ha, ra, cb, hb, rb)


def _pair_distances_arrays(ca, ha, ra, cb, hb, rb) -> np.ndarray:
    out = np.zeros(len(ca), dtype=float)
    for lo in range(0, len(ca), _CHUNK):
        sl = slice(lo, lo + _CHUNK)
        rel_rot, rel_t = _pair_frames(ca[sl], ha[sl], ra[sl], cb[sl], hb[sl], rb[sl])
        sep = _separated(ha[sl], hb[sl], rel_rot, rel_t)
        if not np.any(sep):
            continue
        idx = np.flatnonzero(sep)
        out[lo + idx] = _min_feature_distance(ha[sl][idx], hb[sl][idx], rel_rot[idx], rel_t[idx])
    return out


def obb_distance_matrix(boxes_a: Sequence[OrientedBox], boxes_b: Sequence[OrientedBox]) -> np.ndarray:
    """(len(boxes_a), len(boxes_b)) exact closest-point distances between solid oriented boxes.

    Passing the same sequence twice (``obb_distance_matrix(boxes, boxes)``)
    computes each unordered pair once and mirrors it (zero diagonal).
    """
    if boxes_b is boxes_a:
        centers, halves, rotations = _stack(boxes_a)
        n = len(centers)
        iu, ju = np.triu_indices(n, k=1)
        out = np.zeros((n, n), dtype=float)
        out[iu, ju] = _pair_distances_arrays(
            centers[iu], halves[iu], rotations[iu], centers[ju], halves[ju], rotations[ju]
        )
        out[ju, iu] = out[iu, ju]
        return out
    ca, ha, ra = _stack(boxes_a)
    cb, hb, rb = _stack(boxes_b)
    ia, ib = np.meshgrid(np.arange(len(ca)), np.arange(len(cb)), indexing="ij")
    ia, ib = ia.ravel(), ib.ravel()
    flat = _pair_distances_arrays(ca[ia], ha[ia], ra[ia], cb[ib], hb[ib], rb[ib])
    return flat.reshape(len(ca), len(cb))


def obb_distance(a: OrientedBox, b: OrientedBox) -> float:
    """Exact closest-point distance between two solid oriented boxes (0 when they intersect)."""
    return float(obb_pair_distances([a], [b])[0])


def _clip_segments(p0: np.ndarray, d: np.ndarray, half: np.ndarray) -> np.ndarray | None:
    """A point where one of the segments ``p0 + s d`` (s in [0, 1]) meets the box ``|x| <= half``.

    The box is grown by a rounding-size tolerance so that coincident faces
    (duplicate annotations) still meet; the longest clipped piece is used.
    """
    half = half + 1e-12 * (1.0 + float(np.max(half)))
    with np.errstate(divide="ignore", invalid="ignore"):
        lo_t = (-half - p0) / d
        hi_t = (half - p0) / d
    flat = np.abs(d) < 1e-15
    inside_slab = np.abs(p0) <= half
    enter = np.where(flat, np.where(inside_slab, -np.inf, np.inf), np.minimum(lo_t, hi_t))
    leave = np.where(flat, np.where(inside_slab, np.inf, -np.inf), np.maximum(lo_t, hi_t))
    s_lo = np.maximum(enter.max(axis=1), 0.0)
    s_hi = np.minimum(leave.min(axis=1), 1.0)
    if not np.any(s_lo <= s_hi):
        return None
    k = int(np.argmax(s_hi - s_lo))
    return p0[k] + 0.5 * (s_lo[k] + s_hi[k]) * d[k]


def obb_closest_points(a: OrientedBox, b: OrientedBox) -> tuple[float, np.ndarray, np.ndarray]:
    """(distance, point on a, point on b) in world coordinates.

    For intersecting boxes both points are one common point of the two boxes
    (to rounding), so callers and tests can check the answer without trusting
    it. The distance is always the one ``obb_distance`` returns.
    """
    ca, ha, ra = _stack([a])
    cb, hb, rb = _stack([b])
    rel_rot, rel_t = _pair_frames(ca, ha, ra, cb, hb, rb)
    intersecting = not _separated(ha, hb, rel_rot, rel_t)[0]
    if intersecting:
        witness = _intersection_witness(ha[0], hb[0], rel_rot[0], rel_t[0])
        if witness is not None:
            world = ra[0] @ witness + ca[0]
            return 0.0, world, world.copy()
    dists, on_a, on_b = _feature_candidates(ha, hb, rel_rot, rel_t)
    k = int(np.argmin(dists[0]))
    p, q = ra[0] @ on_a[0, k] + ca[0], ra[0] @ on_b[0, k] + ca[0]
    if intersecting:  # touching to rounding: no clipped edge, the nearest features meet
        return 0.0, p, q
    return float(dists[0, k]), p, q


def _intersection_witness(ha, hb, rel_rot, rel_t) -> np.ndarray | None:
    """A point (in A's frame) in both boxes: every vertex of A ∩ B lies on an edge of A or of B."""
    corners_a = _SIGNS * ha
    corners_b = (_SIGNS * hb) @ rel_rot.T + rel_t
    edge_dirs_a = np.zeros((12, 3))
    edge_dirs_a[np.arange(12), _EDGE_AXIS] = 2.0 * ha[_EDGE_AXIS]
    edge_dirs_b = (rel_rot[:, _EDGE_AXIS] * (2.0 * hb[_EDGE_AXIS])).T
    # B's edges clipped against A (A's frame).
    point = _clip_segments(corners_b[_EDGE_START], edge_dirs_b, ha)
    if point is not None:
        return point
    # A's edges clipped against B (B's frame), mapped back.
    in_b = _clip_segments((corners_a[_EDGE_START] - rel_t) @ rel_rot, edge_dirs_a @ rel_rot, hb)
    return None if in_b is None else rel_rot @ in_b + rel_t


def mesh_distance(vertices_a: np.ndarray, vertices_b: np.ndarray) -> float:
    """Shortest vertex-to-vertex distance between two objects' mesh vertices.

    A k-d tree query from a vertex far from the other object visits much of
    the tree (scan surfaces are dense sheets with many near-equidistant
    points), so a tight upper bound comes first -- nearest-neighbour hops
    back and forth from the vertex nearest the other object's centroid --
    and every query is cut off at it. Exact: the bound is itself a vertex pair.
    """
    va = np.asarray(vertices_a, dtype=float).reshape(-1, 3)
    vb = np.asarray(vertices_b, dtype=float).reshape(-1, 3)
    if len(va) == 0 or len(vb) == 0:
        raise ValueError(f"mesh_distance: empty vertex set ({len(va)} and {len(vb)} vertices)")
    big, small = (va, vb) if len(va) >= len(vb) else (vb, va)
    tree_big, tree_small = cKDTree(big), cKDTree(small)
    j = int(np.argmin(np.sum((small - big.mean(axis=0)) ** 2, axis=1)))
    bound = np.inf
    for _ in range(50):
        _, i = tree_big.query(small[j], k=1)
        hop, j_next = tree_small.query(big[i], k=1)
        if hop >= bound:
            break
        bound, j = float(hop), int(j_next)
    dist, _ = tree_big.query(small, k=1, distance_upper_bound=bound * (1.0 + 1e-12) + 1e-12)
    return float(min(bound, dist.min()))
