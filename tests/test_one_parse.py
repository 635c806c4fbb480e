"""One parse per scan per run: later steps read the stored mesh and load images by the paths ``frames`` records.

The scene step is the only caller of ``read_scan``; what visibility, videos,
dummy videos and PinpointQA need comes from its tables and its mesh artifact.
These tests count the parses of a build and check that what later steps read
equals what the reader parsed: every frame image of every layout, and the mesh.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from pipeline.config import Config, load_config
from pipeline.scene.images import FrameImages, records_images
from pipeline.scene.mesh_artifact import (
    MeshArtifactMissing,
    mesh_artifact_bytes,
    mesh_artifact_path,
    read_mesh_artifact,
    write_mesh_artifact,
)
from pipeline.scene.readers import read_scan
from pipeline.scene.tables import scene_tables
from pipeline.synth.arkitscenes_writer import write_arkitscenes
from pipeline.synth.multiscan_writer import write_multiscan
from pipeline.synth.rscan_writer import write_3rscan
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scannetpp_writer import write_scannetpp
from pipeline.synth.scene import generate_scene
from tests.scannet_factory import make_box_room

WRITERS = {
    "scannet-stream": write_scannet,
    "scannet-sens": partial(write_scannet, sens=True),
    "scannetpp": write_scannetpp,
    "arkitscenes": partial(write_arkitscenes, sky_direction="Left"),
    "3rscan": write_3rscan,
    "multiscan": write_multiscan,
}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    scene = generate_scene(5, 0, 3)
    root = tmp_path_factory.mktemp("layouts")
    folders = {name: write(scene, root / name) for name, write in WRITERS.items()}
    # The .sens variant: keep only the sensor stream, so the reader must use it.
    sens_folder = folders["scannet-sens"]
    for sub in ("color", "depth", "pose"):
        for f in (sens_folder / sub).iterdir():
            f.unlink()
        (sens_folder / sub).rmdir()
    return folders


@pytest.mark.parametrize("layout", list(WRITERS))
def test_images_from_the_frames_table_equal_the_readers(layouts, layout):
    config = Config()
    parsed = read_scan(str(layouts[layout]), config)
    frames = scene_tables(parsed, config)["frames"]
    assert records_images(frames)
    if layout == "scannet-sens":
        assert set(frames["image_file"].to_list()) == {f"{parsed.scene_id}.sens"}
    with FrameImages(parsed.key, str(layouts[layout]), frames) as images:
        for index in frames["frame_index"].to_list():
            assert np.array_equal(images(index), parsed.load_image(index)), (layout, index)


def test_mesh_artifact_round_trips_what_the_reader_parsed(layouts, tmp_path):
    parsed = read_scan(str(layouts["scannet-stream"]), Config())
    assert mesh_artifact_bytes(parsed) == mesh_artifact_bytes(parsed)  # same mesh, same bytes
    assert write_mesh_artifact(parsed, str(tmp_path)) == mesh_artifact_path(parsed.key)
    stored = read_mesh_artifact(parsed.key, str(tmp_path))
    for name in ("vertices", "triangles", "triangle_object_ids"):
        original, back = getattr(parsed.mesh, name), getattr(stored.mesh, name)
        assert back.dtype == original.dtype and np.array_equal(back, original), name
    by_id = {o.object_id: o.vertex_indices for o in parsed.objects if o.vertex_indices is not None}
    assert sorted(stored.object_vertices) == sorted(by_id)
    for object_id, indices in by_id.items():
        assert np.array_equal(stored.object_vertices[object_id], indices)
    with pytest.raises(MeshArtifactMissing, match="mesh artifact missing"):
        read_mesh_artifact("scannet/scene9999_00", str(tmp_path))


def test_a_build_parses_each_scan_once(tmp_path, monkeypatch):
    import pipeline.scene.readers as readers
    from runs.build import build

    root = tmp_path / "scans"
    for scene in ("scene0980_00", "scene0981_00"):
        make_box_room(root, scene, frames="stream", n_frames=12)
    calls: list[str] = []

    def counting_read_scan(path_or_uri, config):
        calls.append(str(path_or_uri))
        return real_read_scan(path_or_uri, config)

    real_read_scan = readers.read_scan
    monkeypatch.setattr(readers, "read_scan", counting_read_scan)
    config = load_config(None, scans_root=str(root), output_root=str(tmp_path / "out"))
    report = build(config, workers=1, dataset_wide=False)
    assert sorted(report.ok) == ["scannet/scene0980_00", "scannet/scene0981_00"], report.failed
    assert sorted(calls) == sorted(str(root / s) for s in ("scene0980_00", "scene0981_00"))
    for key in report.ok:
        assert (tmp_path / "out" / mesh_artifact_path(key)).is_file()
