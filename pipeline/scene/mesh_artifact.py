"""The scan's mesh as the scene step leaves it for later steps: one ``.npz`` per scan under the output root.

Parsing a scan (PLY, segmentation, annotations, rooms) is done once, by the
scene step. Visibility (ray casting) and PinpointQA (object surfaces) need the
mesh again, possibly on another machine, so the scene step stores what they
use — vertices, triangles, each triangle's object and each object's vertex
indices — at ``artifacts/mesh/<dataset>/<scene_id>.npz`` through the storage
layer (local disk or ``s3://``). Colours are left out: no later step reads
them. Arrays keep their dtypes, so what a step reads equals what the reader
parsed; the zip is written with fixed timestamps so the same mesh gives the
same bytes.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

import numpy as np

from pipeline.errors import ScanError
from pipeline.scene.parsed import Mesh, ParsedScan, SceneObject
from pipeline.storage import upath, write_bytes_atomic

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)


class MeshArtifactMissing(ScanError):
    """No stored mesh: the scan's scene step has not run, or ran before it stored meshes."""


def mesh_artifact_path(key: str) -> str:
    """Output-root-relative path of a scan's mesh (keyed by dataset, as the tables are)."""
    return f"artifacts/mesh/{key}.npz"


def mesh_artifact_uri(output_root: str, key: str) -> str:
    return f"{str(output_root).rstrip('/')}/{mesh_artifact_path(key)}"


@dataclass
class ScanGeometry:
    """What later steps need of a parsed scan's geometry."""

    mesh: Mesh
    object_vertices: dict[int, np.ndarray]  # object id -> indices into mesh.vertices


def mesh_artifact_bytes(parsed: ParsedScan) -> bytes:
    mesh = parsed.mesh
    if mesh is None:
        raise ValueError(f"{parsed.key}: scan has no mesh to store")
    with_vertices = sorted(
        (o for o in parsed.objects if o.vertex_indices is not None), key=lambda o: o.object_id
    )
    arrays = {
        "vertices": np.ascontiguousarray(mesh.vertices),
        "triangles": np.ascontiguousarray(mesh.triangles),
        "object_ids": np.array([o.object_id for o in with_vertices], dtype=np.int64),
        "object_vertex_counts": np.array([len(o.vertex_indices) for o in with_vertices], dtype=np.int64),
        "object_vertex_indices": (
            np.concatenate([np.asarray(o.vertex_indices, dtype=np.int64) for o in with_vertices])
            if with_vertices
            else np.zeros(0, dtype=np.int64)
        ),
    }
    if mesh.triangle_object_ids is not None:
        arrays["triangle_object_ids"] = np.ascontiguousarray(mesh.triangle_object_ids)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, arrays[name], allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=_FIXED_TIME), member.getvalue())
    return buffer.getvalue()


def write_mesh_artifact(parsed: ParsedScan, output_root: str, storage_options: dict | None = None) -> str:
    """Store the parsed scan's mesh (atomically); returns its output-root-relative path."""
    relative = mesh_artifact_path(parsed.key)
    write_bytes_atomic(upath(mesh_artifact_uri(output_root, parsed.key), storage_options), mesh_artifact_bytes(parsed))
    return relative


def read_mesh_artifact(key: str, output_root: str, storage_options: dict | None = None) -> ScanGeometry:
    """The mesh the scene step stored; a missing or damaged file is a ``ScanError`` naming it."""
    path = upath(mesh_artifact_uri(output_root, key), storage_options)
    relative = mesh_artifact_path(key)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MeshArtifactMissing(key, relative, "mesh artifact missing: materialize this scan's scene assets first") from None
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
        counts = arrays["object_vertex_counts"]
        splits = np.split(arrays["object_vertex_indices"], np.cumsum(counts)[:-1]) if len(counts) else []
        mesh = Mesh(
            vertices=arrays["vertices"],
            triangles=arrays["triangles"],
            triangle_object_ids=arrays.get("triangle_object_ids"),
        )
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ScanError(key, relative, f"mesh artifact unreadable ({str(exc).splitlines()[0]})") from None
    return ScanGeometry(mesh, {int(i): s for i, s in zip(arrays["object_ids"].tolist(), splits)})


def geometry_scan(key: str, source_uri: str, geometry: ScanGeometry, raw_labels: dict[int, str]) -> ParsedScan:
    """A ``ParsedScan`` holding only the stored geometry (mesh, objects' vertices) for steps written against one."""
    dataset, _, scene_id = key.partition("/")
    objects = [
        SceneObject(object_id=oid, raw_label=raw_labels.get(oid, ""), vertex_indices=indices)
        for oid, indices in sorted(geometry.object_vertices.items())
    ]
    return ParsedScan(dataset=dataset, scene_id=scene_id, source_uri=source_uri, mesh=geometry.mesh, objects=objects)
