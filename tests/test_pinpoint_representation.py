"""Intermediate spatial representation on hand-built scenes of subdivided boxes.

Each object is a union of axis-aligned boxes whose faces are gridded finely
(1 cm), so vertex distances are the analytic box distances to well within 1 cm.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from pipeline import schemas
from pipeline.pinpoint.config import PinpointConfig
from pipeline.pinpoint.relations import RELATIONS
from pipeline.pinpoint.representation import build_representation
from pipeline.scene.parsed import Mesh, OrientedBox, ParsedScan, SceneObject
from pipeline.vocab import is_small_object, is_structural

KEY = "synthetic/hand0000_00"


def _grid_box(lo, hi, spacing):
    """Vertices and triangles of an axis-aligned box with gridded faces (no shared edges)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    verts, tris, off = [], [], 0
    for axis in range(3):
        u, v = [i for i in range(3) if i != axis]
        nu = max(1, math.ceil((hi[u] - lo[u]) / spacing))
        nv = max(1, math.ceil((hi[v] - lo[v]) / spacing))
        gu, gv = np.linspace(lo[u], hi[u], nu + 1), np.linspace(lo[v], hi[v], nv + 1)
        uu, vv = np.meshgrid(gu, gv, indexing="ij")
        for side in (lo[axis], hi[axis]):
            pts = np.empty((uu.size, 3))
            pts[:, axis], pts[:, u], pts[:, v] = side, uu.ravel(), vv.ravel()
            idx = np.arange(uu.size).reshape(nu + 1, nv + 1)
            a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
            verts.append(pts)
            tris.append(np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)]) + off)
            off += len(pts)
    return np.concatenate(verts), np.concatenate(tris)


def _box_dist(a, b):
    """Exact distance between two axis-aligned boxes given as (lo, hi)."""
    gap = np.maximum(0.0, np.maximum(np.asarray(a[0]) - b[1], np.asarray(b[0]) - a[1]))
    return float(np.linalg.norm(gap))


# name -> list of (lo, hi) parts; "label#n" names repeated instances of a label
SCENE: dict[str, list] = {
    "floor": [((-3, -3, -0.02), (3, 3, 0.0))],
    "wall": [((2.9, -3, 0.0), (3.0, 3, 2.5))],
    "desk": [((-0.6, -0.35, 0.72), (0.6, 0.35, 0.75))]
    + [((x, y, 0.0), (x + 0.05, y + 0.05, 0.72)) for x in (-0.6, 0.55) for y in (-0.35, 0.30)],
    "phone": [((0.1, 0.0, 0.75), (0.25, 0.07, 0.76))],
    "monitor": [((-0.45, 0.1, 0.75), (0.05, 0.3, 1.2))],
    "keyboard": [((-0.3, -0.2, 0.75), (0.1, -0.05, 0.78))],
    "chair": [((-0.2, -0.95, 0.0), (0.25, -0.5, 0.45))],
    "charger": [((0.2, -0.1, 0.0), (0.26, -0.05, 0.03))],
    "sofa": [((1.0, 1.5, 0.0), (2.8, 2.4, 0.45)), ((1.0, 2.2, 0.45), (2.8, 2.4, 0.85))],
    "remote": [((1.8, 1.8, 0.45), (1.98, 1.85, 0.47))],
    "bookshelf": [((-2.5, 2.0, 0.0), (-2.48, 2.35, 1.8)), ((-1.52, 2.0, 0.0), (-1.5, 2.35, 1.8))]
    + [((-2.48, 2.0, z), (-1.52, 2.35, z + 0.02)) for z in (0.0, 0.6, 1.2, 1.78)],
    "mug": [((-2.0, 2.1, 0.62), (-1.91, 2.19, 0.72))],
    "book#1": [((-2.3, 2.05, 1.22), (-2.1, 2.2, 1.25))],
    "book#2": [((-1.0, -2.0, 0.0), (-0.8, -1.8, 0.03))],
}
EXPECTED_SUPPORT = {"phone": "desk", "remote": "sofa", "mug": "bookshelf", "charger": "floor", "keyboard": "desk"}


def _objects_frame(parts_by_label, with_mesh: bool):
    rows, objects, verts, tris, tri_ids, off = [], [], [], [], [], 0
    for oid, (name, parts) in enumerate(sorted(parts_by_label.items())):
        label = name.split("#")[0]
        lo = np.min([p[0] for p in parts], axis=0)
        hi = np.max([p[1] for p in parts], axis=0)
        idx = []
        for p_lo, p_hi in parts:
            v, t = _grid_box(p_lo, p_hi, 0.01 if label not in ("floor", "wall") else 0.1)
            verts.append(v)
            tris.append(t + off)
            tri_ids.append(np.full(len(t), oid))
            idx.append(np.arange(off, off + len(v)))
            off += len(v)
        box = OrientedBox((lo + hi) / 2, hi - lo, np.eye(3))
        objects.append(SceneObject(oid, label, np.concatenate(idx) if with_mesh else None, None if with_mesh else box))
        rows.append(
            {
                "key": KEY, "object_id": oid, "raw_label": label, "category": label, "label_mapped": True,
                "center": list((lo + hi) / 2), "extent": list(hi - lo), "rotation": list(np.eye(3).ravel()),
                "vertical_axis": 2, "vertex_count": 0, "triangle_count": 0,
                "structural": is_structural(label), "small_object": is_small_object(label),
                "box_source": "mesh" if with_mesh else "annotation",
            }
        )
    mesh = Mesh(np.concatenate(verts), np.concatenate(tris).astype(np.int32), None, np.concatenate(tri_ids).astype(np.int32))
    scan = ParsedScan("synthetic", KEY.split("/")[1], "memory://", mesh if with_mesh else None, objects)
    return schemas.from_rows("objects", rows), scan


@pytest.fixture(scope="module")
def mesh_rep():
    objects, scan = _objects_frame(SCENE, with_mesh=True)
    return objects, build_representation(KEY, objects, scan)


def test_targets_are_unique_small_objects(mesh_rep):
    _, (targets, _) = mesh_rep
    # "book" occurs twice in the scene and is ambiguous; "desk", "sofa" are not small objects.
    assert sorted(targets["label"].to_list()) == sorted(EXPECTED_SUPPORT)


def test_support_surfaces_on_meshes(mesh_rep):
    _, (targets, _) = mesh_rep
    chosen = dict(zip(targets["label"], targets["support_label"]))
    assert chosen == EXPECTED_SUPPORT


def test_shortest_distances_match_analytic_boxes(mesh_rep):
    objects, (targets, neighbors) = mesh_rep
    name_of = dict(enumerate(sorted(SCENE)))
    assert neighbors.height > 0
    for row in neighbors.iter_rows(named=True):
        a, b = SCENE[name_of[row["target_id"]]], SCENE[name_of[row["neighbor_id"]]]
        truth = min(_box_dist(p, q) for p in a for q in b)
        assert row["shortest_distance"] == pytest.approx(truth, abs=0.01), row
        assert row["distance_source"] == "mesh"
        assert row["relation"] in RELATIONS
        assert row["centroid_distance"] <= 1.0
        assert not is_structural(row["neighbor_label"])


def test_relations_on_meshes(mesh_rep):
    objects, (targets, neighbors) = mesh_rep
    label_of = dict(zip(objects["object_id"], objects["raw_label"]))
    rel = {(label_of[t], n): r for t, n, r in zip(neighbors["target_id"], neighbors["neighbor_label"], neighbors["relation"])}
    assert rel[("phone", "desk")] == "on"
    assert rel[("charger", "desk")] == "under"
    assert rel[("phone", "monitor")] in ("next_to", "near")
    assert rel[("phone", "keyboard")] in ("next_to", "near")
    assert rel[("remote", "sofa")] == "on"
    assert rel[("mug", "bookshelf")] == "on"
    assert rel[("phone", "chair")] in ("side_above", "above")
    support_rows = neighbors.filter(pl.col("is_support"))
    # one support row per target whose support is not the (structural) floor
    assert support_rows.height == targets.filter(pl.col("support_label") != "floor").height


def test_box_only_fallback():
    objects, scan = _objects_frame(SCENE, with_mesh=False)
    targets, neighbors = build_representation(KEY, objects, scan)
    assert set(neighbors["distance_source"]) == {"box"}
    assert set(targets["distance_source"]) == {"box"}
    chosen = dict(zip(targets["label"], targets["support_label"]))
    # with boxes only the desk, sofa and the bookshelf container are still found
    assert chosen["phone"] == "desk" and chosen["remote"] == "sofa" and chosen["mug"] == "bookshelf"
    assert chosen["charger"] == "floor"
    name_of = dict(enumerate(sorted(SCENE)))
    for row in neighbors.iter_rows(named=True):
        lo_hi = lambda parts: (np.min([p[0] for p in parts], 0), np.max([p[1] for p in parts], 0))  # noqa: E731
        truth = _box_dist(lo_hi(SCENE[name_of[row["target_id"]]]), lo_hi(SCENE[name_of[row["neighbor_id"]]]))
        assert row["shortest_distance"] == pytest.approx(truth, abs=1e-9)


def test_deterministic(mesh_rep):
    objects, (targets, neighbors) = mesh_rep
    objects2, scan2 = _objects_frame(SCENE, with_mesh=True)
    t2, n2 = build_representation(KEY, objects2, scan2)
    assert targets.equals(t2) and neighbors.equals(n2)


def test_config_rejects_unknown_keys():
    from pipeline.errors import ConfigError

    cfg = PinpointConfig.from_mapping({"representation": {"contact_distance": 0.03}})
    assert cfg.representation.contact_distance == 0.03
    with pytest.raises(ConfigError):
        PinpointConfig.from_mapping({"representation": {"contact": 0.03}})


def test_bad_vertex_indices_name_the_scan():
    from pipeline.errors import ScanError

    objects, scan = _objects_frame(SCENE, with_mesh=True)
    scan.objects[0].vertex_indices = np.array([0, len(scan.mesh.vertices) + 5])
    with pytest.raises(ScanError, match=f"{KEY}: memory://: object 0"):
        build_representation(KEY, objects, scan)


def test_closest_vertex_distance_with_a_bound_is_the_full_query_to_the_bit():
    """The pruned nearest-vertex query returns the same minimum as querying every point exhaustively."""
    from scipy.spatial import cKDTree

    from pipeline.pinpoint.geometry import ObjectGeometry, _closest_vertex_distance
    from pipeline.scene.parsed import OrientedBox

    gen = np.random.default_rng(3)
    box = OrientedBox(np.zeros(3), np.ones(3), np.eye(3))
    for i in range(300):
        a = gen.normal(size=(int(gen.integers(1, 400)), 3)) * gen.uniform(0.01, 1.0)
        b = gen.normal(size=(int(gen.integers(1, 400)), 3)) * gen.uniform(0.01, 1.0) + gen.uniform(-2, 2, 3)
        if i % 5 == 0:
            b = np.vstack([b, a[: int(gen.integers(1, len(a) + 1))]])  # shared vertices: distance 0
        if i % 7 == 0:
            a, b = np.round(a, 2), np.round(b, 2)  # quantised: ties
        other = ObjectGeometry(object_id=1, label="x", category="x", structural=False, small=False, box=box, vertices=b)
        full, _ = cKDTree(b).query(a, k=1)
        assert _closest_vertex_distance(a, other) == float(full.min()), i
