"""A scans root that is missing or is a file: one line saying which, exit non-zero, nothing built."""

from __future__ import annotations

from scan2qa import main


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


def test_an_output_inside_the_scans_root_is_left_out_of_discovery_and_said_once(tmp_path, monkeypatch, capsys):
    """``--out scans/out``: one plain line; the output never listed as a skipped folder (skipped_folders.json is
    what the release copies into its manifest); the scans build as they would with the output elsewhere."""
    import json

    from tests.real_scans import scene_graph_only, write_scan

    scene_graph_only(monkeypatch)
    scans = tmp_path / "scans"
    write_scan(scans, "synth0000_00")
    (scans / "notes").mkdir()  # a folder that is not a scan is still reported
    out = scans / "out"
    said = (
        f"the output root {out} is inside the scans root {scans}: discovery leaves it out "
        "(it holds this build's output, not scans)"
    )
    for _ in range(2):  # the second build finds the first one's output (tables/, artifacts/, ...) under the root
        assert main(["build", "--scans", str(scans), "--out", str(out), "--workers", "1"]) == 0
        printed = capsys.readouterr().out.splitlines()
        assert printed.count(said) == 1
        assert not [line for line in printed if "out:" in line and "skipped" in line]
        skipped = json.loads((out / "skipped_folders.json").read_text())["skipped_folders"]
        assert [line.split(":")[0] for line in skipped] == ["notes"]
    assert "summary: 1 ok, 0 failed" in printed


def test_an_output_beside_the_scans_root_says_nothing_about_it(tmp_path, monkeypatch, capsys):
    from tests.real_scans import scene_graph_only, write_scan

    scene_graph_only(monkeypatch)
    write_scan(tmp_path / "scans", "synth0000_00")
    assert main(["build", "--scans", str(tmp_path / "scans"), "--out", str(tmp_path / "scans-out"), "--workers", "1"]) == 0
    assert "inside the scans root" not in capsys.readouterr().out
