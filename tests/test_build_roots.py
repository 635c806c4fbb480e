"""A scans root that is missing or is a file: one line saying which, exit non-zero, nothing built."""

from __future__ import annotations

from pipeline.cli import main


def test_a_missing_scans_root_says_it_does_not_exist(tmp_path, capsys):
    missing = tmp_path / "no-such-scans"
    assert main(["build", "--scans", str(missing), "--out", str(tmp_path / "out"), "--workers", "1"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"the scans root {missing} does not exist"
    assert not (tmp_path / "out" / "releases").exists()


def test_a_scans_root_that_is_a_file_says_so(tmp_path, capsys):
    file = tmp_path / "scans.txt"
    file.write_text("not a folder\n")
    assert main(["build", "--scans", str(file), "--out", str(tmp_path / "out"), "--workers", "1"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"the scans root {file} is a file, not a folder of scans"


def test_build_takes_its_roots_from_the_code_locations_variables(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "scans-from-env"
    monkeypatch.setenv("SCAN2QA_SCANS", str(missing))
    monkeypatch.setenv("SCAN2QA_OUT", str(tmp_path / "out-from-env"))
    assert main(["build", "--workers", "1"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"the scans root {missing} does not exist"
