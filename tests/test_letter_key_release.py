"""A build keeps its letter key beside the releases, never in them, and the key alone reproduces the release.

Two builds of the same two tiny scans in different output folders: the first without ``SCAN2QA_LETTER_KEY``
makes ``<output_root>/secrets/letter_key``; the second, given that key's hex in the variable, must release
byte-identical tables. Nothing a release ships holds the key; its manifest names the key's fingerprint.
"""

from __future__ import annotations

import json
import stat

import pytest

from scan2qa import main
from pipeline.qa.letter_key import ENV_VAR, LetterKey
from pipeline.synth.scannet_writer import write_scannet
from pipeline.synth.scene import generate_scene
from tests.real_scans import write_scan


def _build(scans, out) -> None:
    assert main(["build", "--scans", str(scans), "--out", str(out), "--workers", "1"]) == 0


def _release(out):
    releases = out / "releases"
    return releases / (releases / "LATEST").read_text().strip()


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("letter-key")
    scans = root / "scans"
    write_scannet(generate_scene(0, 0, frames=3), scans)
    write_scan(scans, "synth0001_00", objects=4, frames=3)
    with pytest.MonkeyPatch.context() as env:
        env.delenv(ENV_VAR, raising=False)
        _build(scans, root / "first")
        key_file = root / "first" / "secrets" / "letter_key"
        env.setenv(ENV_VAR, key_file.read_bytes().hex())
        _build(scans, root / "second")
    return root / "first", root / "second", key_file


def test_the_key_file_is_private_and_outside_the_release(builds):
    first, _, key_file = builds
    assert key_file.stat().st_size == 32 and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    secret = key_file.read_bytes()
    release = _release(first)
    for path in release.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret not in data and secret.hex().encode() not in data, path
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["letter_key_id"] == LetterKey(secret).fingerprint
    assert not any("secrets" in name for name in manifest["files"])


def test_the_key_reproduces_the_release_tables(builds):
    first, second, key_file = builds
    assert not (second / "secrets").exists()  # the variable's key was used, no file made
    a, b = _release(first), _release(second)
    assert a.name == b.name  # the version is the tables' content
    tables = sorted(p.relative_to(a) for p in (a / "tables").rglob("*.parquet"))
    assert tables and all((a / t).read_bytes() == (b / t).read_bytes() for t in tables)
    manifests = [json.loads((r / "manifest.json").read_text()) for r in (a, b)]
    assert manifests[0]["letter_key_id"] == manifests[1]["letter_key_id"]
