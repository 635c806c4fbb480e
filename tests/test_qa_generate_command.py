"""``scan2qa generate``: questions from annotation files alone, written as a qa table."""

from __future__ import annotations

from scan2qa import main
from pipeline.storage import read_table, upath


def test_generate_from_revsi_boxes_writes_a_qa_table(fixtures_dir, tmp_path, capsys):
    out = tmp_path / "qa.parquet"
    assert main(["generate", "--annotations", str(fixtures_dir / "revsi"), "--profile", "revsi", "--out", str(out)]) == 0
    qa = read_table(upath(out), "qa")
    assert qa.height > 0 and set(qa["budget"]) == {"all"} and set(qa["profile"]) == {"revsi"}
    printed = capsys.readouterr().out
    assert f"{qa.height} questions over {qa['key'].n_unique()} scenes (revsi) -> {out}" in printed


def test_generate_names_a_missing_file(tmp_path, capsys):
    assert main(["generate", "--annotations", str(tmp_path / "nope.json"), "--out", str(tmp_path / "qa.parquet")]) == 1
    assert "nope.json: no such annotation file or folder" in capsys.readouterr().err
