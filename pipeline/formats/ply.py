"""Binary PLY meshes as ScanNet ships them (VCGLIB layout: xyz float, rgba uchar, uchar/int face lists)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from plyfile import PlyData


@dataclass
class PlyMesh:
    vertices: np.ndarray  # (V, 3) float64
    triangles: np.ndarray  # (T, 3) int32
    colors: np.ndarray | None  # (V, 3) uint8
    vertex_properties: dict[str, np.ndarray]  # every other per-vertex property (label, objectId, ...)
    face_properties: dict[str, np.ndarray]  # every other per-face property


class PlyFormatError(ValueError):
    pass


def _read_plydata(path) -> PlyData:
    # Declaring triangle faces lets plyfile read them as one array (hundreds of times faster than
    # parsing per-face lists); meshes with other polygons fall back to the general reader.
    errors = []
    for known in ({"face": {"vertex_indices": 3}}, None):
        try:
            with open(path, "rb") as fh:
                return PlyData.read(fh, known_list_len=known) if known else PlyData.read(fh)
        except Exception as exc:  # plyfile raises many types for truncated or unexpected data
            errors.append(exc)
    exc = errors[-1]
    raise PlyFormatError(f"unreadable PLY ({type(exc).__name__}: {exc})".splitlines()[0])


def read_ply(path) -> PlyMesh:
    """Read a triangle mesh; raises PlyFormatError on truncated or malformed files."""
    ply = _read_plydata(path)
    if "vertex" not in ply:
        raise PlyFormatError("no vertex element")
    v = ply["vertex"].data
    names = v.dtype.names
    if not all(n in names for n in ("x", "y", "z")):
        raise PlyFormatError("vertex element lacks x/y/z")
    vertices = np.stack([v["x"], v["y"], v["z"]], axis=1).astype(np.float64)
    if not np.all(np.isfinite(vertices)):
        bad = int(np.count_nonzero(~np.all(np.isfinite(vertices), axis=1)))
        raise PlyFormatError(f"{bad} vertices have NaN or inf coordinates")
    colors = None
    if all(n in names for n in ("red", "green", "blue")):
        colors = np.stack([v["red"], v["green"], v["blue"]], axis=1).astype(np.uint8)
    vprops = {n: np.asarray(v[n]) for n in names if n not in ("x", "y", "z", "red", "green", "blue", "alpha")}
    triangles = np.zeros((0, 3), dtype=np.int32)
    fprops: dict[str, np.ndarray] = {}
    if "face" in ply:
        f = ply["face"].data
        list_name = "vertex_indices" if "vertex_indices" in f.dtype.names else "vertex_index"
        if list_name not in f.dtype.names:
            raise PlyFormatError("face element lacks vertex_indices")
        faces = f[list_name]
        if len(faces):
            try:
                triangles = (faces if faces.ndim == 2 else np.stack(faces)).astype(np.int32)
            except ValueError:
                raise PlyFormatError("faces are not all triangles") from None
            if triangles.ndim != 2 or triangles.shape[1] != 3:
                raise PlyFormatError("faces are not all triangles")
            if triangles.min() < 0 or triangles.max() >= len(vertices):
                raise PlyFormatError("face refers to a vertex that does not exist")
        fprops = {n: np.asarray(f[n]) for n in f.dtype.names if n != list_name}
    return PlyMesh(vertices, triangles, colors, vprops, fprops)


def write_ply(
    path,
    vertices: np.ndarray,
    triangles: np.ndarray,
    colors: np.ndarray | None = None,
    vertex_properties: dict[str, np.ndarray] | None = None,
    face_properties: dict[str, np.ndarray] | None = None,
    comment: str | None = "VCGLIB generated",
    alpha: bool = True,
    coordinate_type: str = "float",
    index_type: str = "int",
    normals: np.ndarray | None = None,
) -> None:
    """Write binary little-endian PLY: xyz, uchar rgb(a), extra vertex properties, uchar-count triangles, face properties.

    ScanNet's meshes carry an alpha channel and a VCGLIB comment; ScanNet++ and
    ARKitScenes meshes have neither (``alpha=False, comment=None``). Extra
    properties are written in the order given, with their arrays' own types
    (``uint16`` -> ``ushort``, ``uint8`` -> ``uchar``...), so a writer states a
    dataset's header exactly: MultiScan stores ``double`` xyz and ``nx ny nz``
    normals (``normals``, written right after xyz in the coordinates' type),
    3RScan ``list uchar uint`` faces (``coordinate_type``, ``index_type``).
    Each element is written as one numpy buffer: going through plyfile face by
    face takes seconds for a synthetic scene's ~0.7M triangles.
    """
    if coordinate_type not in _COORDINATE_DTYPES:
        raise ValueError(f"coordinate_type must be one of {sorted(_COORDINATE_DTYPES)}, got {coordinate_type!r}")
    if index_type not in _INDEX_DTYPES:
        raise ValueError(f"index_type must be one of {sorted(_INDEX_DTYPES)}, got {index_type!r}")
    xyz = _COORDINATE_DTYPES[coordinate_type]
    vfields = [("x", xyz), ("y", xyz), ("z", xyz)]
    if normals is not None:
        vfields += [("nx", xyz), ("ny", xyz), ("nz", xyz)]
    if colors is not None:
        vfields += [("red", "u1"), ("green", "u1"), ("blue", "u1")] + ([("alpha", "u1")] if alpha else [])
    vextra = {k: np.asarray(v) for k, v in (vertex_properties or {}).items()}
    vfields += [(name, arr.dtype.newbyteorder("<").str) for name, arr in vextra.items()]
    vdata = np.empty(len(vertices), dtype=vfields)
    for i, axis in enumerate("xyz"):
        vdata[axis] = vertices[:, i]
        if normals is not None:
            vdata["n" + axis] = normals[:, i]
    if colors is not None:
        for i, channel in enumerate(("red", "green", "blue")):
            vdata[channel] = colors[:, i]
        if alpha:
            vdata["alpha"] = 255
    for name, arr in vextra.items():
        vdata[name] = arr
    fextra = {k: np.asarray(v) for k, v in (face_properties or {}).items()}
    fdata = np.empty(
        len(triangles),
        dtype=[("n", "u1"), ("idx", _INDEX_DTYPES[index_type], (3,))]
        + [(n, a.dtype.newbyteorder("<").str) for n, a in fextra.items()],
    )
    fdata["n"] = 3
    fdata["idx"] = triangles
    for name, arr in fextra.items():
        fdata[name] = arr
    header = ["ply", "format binary_little_endian 1.0"] + ([f"comment {comment}"] if comment else [])
    header.append(f"element vertex {len(vertices)}")
    header += [f"property {_PLY_TYPES[np.dtype(dt).str.lstrip('<|')]} {name}" for name, dt in vfields]
    header.append(f"element face {len(triangles)}")
    header.append(f"property list uchar {index_type} vertex_indices")
    header += [f"property {_PLY_TYPES[a.dtype.str.lstrip('<>|=')]} {n}" for n, a in fextra.items()]
    header.append("end_header")
    with open(path, "wb") as fh:
        fh.write(("\n".join(header) + "\n").encode("ascii"))
        fh.write(vdata.tobytes())
        fh.write(fdata.tobytes())


_COORDINATE_DTYPES = {"float": "<f4", "double": "<f8"}
_INDEX_DTYPES = {"int": "<i4", "uint": "<u4"}
_PLY_TYPES = {"f4": "float", "f8": "double", "u1": "uchar", "i1": "char", "u2": "ushort", "i2": "short", "u4": "uint", "i4": "int"}
