"""One synthetic scan in memory: objects with exact boxes, the fine mesh they are scanned as, the camera walk.

Everything here is in the z-up world frame. The files written for it (see
``pipeline.synth.scannet_writer``) store mesh and poses in an unaligned frame
(a seeded quarter turn and shift) plus the ``axisAlignment`` matrix that maps
them back, as real ScanNet does. Vertices and camera centres sit on the
binary grid of ``pipeline.synth.lossless`` so that every layout stores them
exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import shapely

from pipeline.geometry.rooms import main_room
from pipeline.scene.parsed import Frame, Mesh, ParsedScan, Room, SceneObject
from pipeline.seeding import rng as seeded_rng
from pipeline.synth.boxes import Box, mesh_box, parts_distance, union_box
from pipeline.synth.camera import camera_walk
from pipeline.synth.layout import Layout, furnish
from pipeline.synth.lossless import quarter_turn, rigid_inverse, snap
from pipeline.synth.rooms import build_shell, scene_area
from pipeline.synth.vocabulary import FURNITURE, SCENE_TYPES, SMALL_OBJECTS, STRUCTURAL_LABELS, STRUCTURE_COLORS

WIDTH, HEIGHT = 640, 480
FPS = 10.0
INTRINSICS = np.array([[525.0, 0.0, 319.5], [0.0, 525.0, 239.5], [0.0, 0.0, 1.0]])
SPACING_STRUCTURE = 0.25  # walls, floors, ceilings
SPACING_FURNITURE = 0.015  # PinpointQA distances are vertex-to-vertex: keep them within 1 cm of the boxes'
SPACING_SMALL = 0.01
NEIGHBOUR_RADIUS = 1.0  # metres between centres, as PinpointQA's neighbourhood


@dataclass
class SynthObject:
    object_id: int
    label: str
    box: Box  # exact gravity-aligned box, world frame
    parts: list[Box]
    part_names: list[str]
    room: str
    small: bool = False
    structural: bool = False
    support_id: int | None = None
    support_relation: str | None = None  # "on" or "under" (on the floor beneath ``under_id``)
    under_id: int | None = None


@dataclass
class SynthScene:
    scene_id: str
    seed: int
    scene_type: str
    objects: list[SynthObject]
    mesh: Mesh  # world frame; triangle_object_ids set
    object_vertex_ranges: list[tuple[int, int]]  # per object id: [start, stop) into mesh.vertices
    rooms: list[Room]
    poses: np.ndarray  # (F, 4, 4) camera-to-world, world frame, OpenCV axes
    axis_alignment: np.ndarray  # (4, 4): stored (unaligned) frame -> world
    intrinsics: np.ndarray = field(default_factory=lambda: INTRINSICS.copy())
    width: int = WIDTH
    height: int = HEIGHT
    fps: float = FPS
    segments: np.ndarray | None = None  # (V,) per-vertex segment id (a vertex index, as ScanNet's are)
    poses_stored: np.ndarray | None = None  # (F, 4, 4) as written to pose/<i>.txt (unaligned frame)
    room_plans: dict[str, tuple[str, object]] = field(default_factory=dict)  # room name -> (kind, interior polygon)

    def stored_poses(self) -> np.ndarray:
        return self.poses_stored

    @property
    def unalignment(self) -> np.ndarray:
        """world -> stored frame."""
        return rigid_inverse(self.axis_alignment)

    def vertex_indices(self, object_id: int) -> np.ndarray:
        start, stop = self.object_vertex_ranges[object_id]
        return np.arange(start, stop)

    def small_object_distances(self) -> dict[int, dict[int, float]]:
        """small id -> {neighbour id: analytic shortest distance}, neighbours = non-structural objects within 1 m (centres)."""
        out: dict[int, dict[int, float]] = {}
        centers = np.array([o.box.center for o in self.objects])
        for obj in self.objects:
            if not obj.small:
                continue
            near = np.linalg.norm(centers - np.asarray(obj.box.center), axis=1) <= NEIGHBOUR_RADIUS
            out[obj.object_id] = {
                other.object_id: parts_distance(obj.parts, other.parts)
                for other in self.objects
                if near[other.object_id] and other.object_id != obj.object_id and not other.structural
            }
        return out

    def to_parsed_scan(self) -> ParsedScan:
        """The scan as a reader would return it, with frames rendered on demand by the shared ray caster."""
        from pipeline.synth.render import FrameRenderer

        objects = [
            SceneObject(o.object_id, o.label, self.vertex_indices(o.object_id), o.box.to_oriented()) for o in self.objects
        ]
        frames = [
            Frame(i, i / self.fps, self.poses[i].copy(), self.intrinsics.copy(), self.width, self.height) for i in range(len(self.poses))
        ]
        renderer = FrameRenderer(self)
        return ParsedScan(
            dataset="synthetic",
            scene_id=self.scene_id,
            source_uri=f"synthetic://{self.seed}/{self.scene_id}",
            mesh=self.mesh,
            objects=objects,
            rooms=list(self.rooms),
            frames=frames,
            source_fps=self.fps,
            scene_type=self.scene_type,
            load_image=lambda i: renderer.render(i).color_bgr,
        )


def scene_id_for(index: int) -> str:
    return f"synth{index:04d}_00"


def _color(rng: np.random.Generator, base, shade: float, n: int) -> np.ndarray:
    """Per-vertex colours: the category colour, shaded per part, with mild noise like a scanned texture."""
    c = np.clip(np.asarray(base, dtype=float) * shade, 0, 255)
    noise = rng.normal(0.0, 5.0, size=(n, 1))
    return np.clip(c + noise, 0, 255).astype(np.uint8)


def _assemble(layout: Layout, rng: np.random.Generator):
    objects: list[SynthObject] = []
    verts, tris, cols, tri_ids, segs = [], [], [], [], []
    ranges = []
    offset = 0
    for oid, laid in enumerate(layout.objects):
        structural = laid.label in STRUCTURAL_LABELS
        shapes = [p.box for p in laid.parts]
        if laid.label in ("floor", "ceiling"):
            # An L-shaped floor has no heading of its own: its box is the minimum-area rectangle (SPEC section 1).
            rect = shapely.union_all([b.footprint() for b in shapes]).minimum_rotated_rectangle
            e0 = np.diff(np.asarray(rect.exterior.coords)[:2], axis=0)[0]
            box = union_box(shapes, math.atan2(e0[1], e0[0]))
        else:
            box = union_box(shapes, laid.yaw)
        if laid.small:
            spacing, base = SPACING_SMALL, SMALL_OBJECTS[laid.label].color
        elif laid.label in FURNITURE:
            spacing, base = SPACING_FURNITURE, FURNITURE[laid.label].color
        elif not structural:  # doors and windows are neighbours like any furniture
            spacing, base = SPACING_FURNITURE, STRUCTURE_COLORS[laid.label]
        else:
            spacing, base = SPACING_STRUCTURE, STRUCTURE_COLORS[laid.label]
        start = offset
        object_color = np.asarray(base, dtype=float) * float(rng.uniform(0.85, 1.15))
        for part in laid.parts:
            v, t = mesh_box(part.box, spacing, skip_bottom=part.rests_on_floor)
            verts.append(v)
            tris.append(t + offset)
            cols.append(_color(rng, object_color, part.shade, len(v)))
            tri_ids.append(np.full(len(t), oid, dtype=np.int32))
            segs.append(np.full(len(v), offset, dtype=np.int64))  # one segment per part, named by its first vertex
            offset += len(v)
        ranges.append((start, offset))
        objects.append(
            SynthObject(
                object_id=oid,
                label=laid.label,
                box=box,
                parts=[p.box for p in laid.parts],
                part_names=[p.name for p in laid.parts],
                room=laid.room,
                small=laid.small,
                structural=structural,
                support_id=laid.support,
                support_relation=laid.support_relation,
                under_id=laid.under,
            )
        )
    mesh = Mesh(snap(np.concatenate(verts)), np.concatenate(tris).astype(np.int32), np.concatenate(cols), np.concatenate(tri_ids))
    return objects, mesh, ranges, np.concatenate(segs)


def _axis_alignment(rng: np.random.Generator) -> np.ndarray:
    """stored -> world, the inverse of a seeded quarter turn and shift (what ScanNet's axisAlignment undoes).

    Its entries are 0, +-1 and multiples of 1/64, so the 6 decimals of ``<scene>.txt`` hold it exactly.
    """
    return rigid_inverse(quarter_turn(rng, 4.0, (-0.1, 0.1)))


def scene_layout(seed: int, scene_index: int) -> Layout:
    """The furnished floor plan of a scene without its mesh or camera walk (cheap: what the spread tests read).

    The target floor area comes from the scene's index, spread over all scenes of one seed (``rooms.scene_area``).
    """
    layout_rng = seeded_rng(seed, "synth", scene_id_for(scene_index), "layout")
    area = scene_area(float(seeded_rng(seed, "synth", "area").random()), scene_index)
    return furnish(build_shell(layout_rng, area), layout_rng)


def generate_scene(seed: int, scene_index: int, frames: int = 300) -> SynthScene:
    """A furnished scene with a camera walk; same (seed, index, frames) gives the same scene."""
    scene_id = scene_id_for(scene_index)
    layout = scene_layout(seed, scene_index)
    shell = layout.shell
    objects, mesh, ranges, segments = _assemble(layout, seeded_rng(seed, "synth", scene_id, "colour"))
    walk = camera_walk(layout.free_space, shell.rooms, frames, seeded_rng(seed, "synth", scene_id, "camera"))
    walk[:, :3, 3] = snap(walk[:, :3, 3])
    alignment = _axis_alignment(seeded_rng(seed, "synth", scene_id, "alignment"))
    # A quarter turn and a grid shift: the unaligned poses are exact, and turning them back gives the walk itself.
    stored = rigid_inverse(alignment) @ walk
    poses = alignment @ stored
    rooms = [Room(shell.scene_polygon, "scene", "annotated")]
    # The main room is where the video is mostly recorded (SPEC §4), as the readers derive it from the files.
    main = main_room([r.polygon for r in shell.rooms], walk[:, :2, 3])
    rooms.append(Room(main, "main", "annotated"))
    kind = shell.scene_kind
    return SynthScene(
        scene_id=scene_id,
        seed=seed,
        scene_type=SCENE_TYPES[kind],
        objects=objects,
        mesh=mesh,
        object_vertex_ranges=ranges,
        rooms=rooms,
        poses=poses,
        axis_alignment=alignment,
        segments=segments,
        poses_stored=stored,
        room_plans={r.name: (r.kind, r.polygon) for r in shell.rooms},
    )

