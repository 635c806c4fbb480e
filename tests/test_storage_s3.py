"""Scans read from and tables written to ``s3://``, against moto's S3 server on loopback."""

import json
from pathlib import Path

import pytest
import yaml

from scan2qa import main
from pipeline.scene.discovery import discover_scans, scan_fingerprint
from pipeline.storage import read_table, upath
from tests.real_scans import scene_graph_only, write_scan


@pytest.fixture
def s3(s3_bucket):
    return s3_bucket


def write_config(tmp_path: Path, s3) -> str:
    path = tmp_path / "s3.yaml"
    path.write_text(yaml.safe_dump({
        "scans_root": f"s3://{s3.name}/scans",
        "output_root": f"s3://{s3.name}/out",
        "storage_options": s3.options,
    }))
    return str(path)


def test_small_scans_round_trip_through_s3(tmp_path, s3, monkeypatch, capsys):
    scene_graph_only(monkeypatch)
    local = tmp_path / "local"
    write_scan(local, "synth0000_00", objects=3)
    write_scan(local / "group", "synth0001_00", objects=4)
    s3.upload(local, "scans")

    found = discover_scans(f"s3://{s3.name}/scans", s3.options)
    assert found == [
        ("synthetic/synth0000_00", f"s3://{s3.name}/scans/synth0000_00"),
        ("synthetic/synth0001_00", f"s3://{s3.name}/scans/group/synth0001_00"),
    ]
    fingerprint = scan_fingerprint(found[0][1], s3.options)
    assert fingerprint == scan_fingerprint(found[0][1], s3.options)

    assert main(["build", "--config", write_config(tmp_path, s3)]) == 0
    printed = capsys.readouterr().out
    assert f"tables: s3://{s3.name}/out/tables" in printed and "summary: 2 ok, 0 failed" in printed
    objects = read_table(upath(f"s3://{s3.name}/out/tables/objects/synthetic/synth0001_00.parquet", s3.options), "objects")
    assert objects["object_id"].to_list() == [0, 1, 2, 3]
    leftovers = [p for p in upath(f"s3://{s3.name}/out", s3.options).rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []

    s3.upload(local / "synth0000_00", "scans/synth0000_00/extra")
    assert scan_fingerprint(found[0][1], s3.options) != fingerprint


def test_real_scannet_scene_from_s3(tmp_path, s3, fixtures_dir, capsys):
    scene = fixtures_dir / "scannet" / "scene0000_00"
    s3.upload(scene, "scans/scene0000_00")
    label_map = fixtures_dir / "scannet" / "scannetv2-labels.combined.tsv"
    upath(f"s3://{s3.name}/scans/{label_map.name}", s3.options).write_bytes(label_map.read_bytes())

    assert discover_scans(f"s3://{s3.name}/scans", s3.options) == [("scannet/scene0000_00", f"s3://{s3.name}/scans/scene0000_00")]
    assert main(["build", "--config", write_config(tmp_path, s3)]) == 0
    printed = capsys.readouterr().out
    assert "[1/1] scannet/scene0000_00 ... ok" in printed
    # The gated release is published to the bucket too, LATEST written after its manifest.
    releases = upath(f"s3://{s3.name}/out/releases", s3.options)
    version = (releases / "LATEST").read_text().strip()
    manifest = json.loads((releases / version / "manifest.json").read_text())
    assert manifest["version"] == version and "tables/qa.parquet" in manifest["files"]
    assert f"release: s3://{s3.name}/out/releases/{version} (latest)" in printed
    assert not (Path.cwd() / "s3:").exists(), "an s3:// URI was written as a local path"
    scans = read_table(upath(f"s3://{s3.name}/out/tables/scans/scannet/scene0000_00.parquet", s3.options), "scans")
    assert scans["source_uri"].to_list() == [f"s3://{s3.name}/scans/scene0000_00"]
    objects = read_table(upath(f"s3://{s3.name}/out/tables/objects/scannet/scene0000_00.parquet", s3.options), "objects")
    assert objects.height > 10
    assert json.dumps(sorted(objects["key"].unique().to_list())) == '["scannet/scene0000_00"]'


def test_a_version_already_published_is_not_rewritten(tmp_path, s3):
    """Two builds of the same tables: the second moves ``LATEST`` only, so a reader of the first never sees it change."""
    from pipeline import schemas
    from pipeline.release.atomic import publish, write_release

    qa = schemas.from_rows("qa", [{"id": "q0", "key": "synthetic/s", "question_type": "object_counting_single",
                                   "question": "?", "ground_truth": "1", "budget": "all", "profile": "revsi",
                                   "video_kind": "real"}])
    releases = upath(f"s3://{s3.name}/out/releases", s3.options)

    def build(report: str, staging: str):
        def reports(folder, version):
            (folder / "report.html").write_text(report)  # reports differ from build to build (their time stamps)
        return write_release(tmp_path / staging, {"qa": qa}, config={}, checks={}, extra_files=reports)

    first = publish(build("first", "a"), releases)
    manifest = releases / first.version / "manifest.json"
    etag = manifest.fs.info(manifest.path)["ETag"]
    (releases / "LATEST").write_text("r-other\n")
    second = publish(build("second", "b"), releases)

    assert second.version == first.version
    assert manifest.fs.info(manifest.path, refresh=True)["ETag"] == etag
    assert (releases / first.version / "report.html").read_text() == "first"
    assert second.manifest == json.loads(manifest.read_text()) == first.manifest
    assert (releases / "LATEST").read_text().strip() == first.version
