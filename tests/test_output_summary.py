"""The build's closing lines list what the output root holds; the skipped-folders note only when it names a folder."""

from __future__ import annotations

from runs.build import output_summary
from pipeline.config import Config
from pipeline.scene.scan_notes import write_skipped


def test_an_empty_skipped_folders_note_is_not_listed(tmp_path):
    config = Config(output_root=str(tmp_path / "out"))
    write_skipped(config.output_root, None, [])
    assert not [line for line in output_summary(config) if "skipped_folders.json" in line]


def test_skipped_folders_are_counted_when_there_are_some(tmp_path):
    config = Config(output_root=str(tmp_path / "out"))
    write_skipped(config.output_root, None, ["notes: no scan files", "tmp: no scan files"])
    [line] = [line for line in output_summary(config) if "skipped_folders.json" in line]
    assert line.endswith("(2 skipped folders)")
