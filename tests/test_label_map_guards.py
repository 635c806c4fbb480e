"""The scans-root label map is read like a scan's own files (issue 27, item 3).

A link out of the root, a FIFO, a device or an oversized file is refused before
it is read, with one line naming the file; a malformed row (a field over csv's
limit, a quote that does not close, bytes that are not UTF-8) is skipped and
counted by its line number, and the rows after it are still read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pipeline.config import Config
from pipeline.errors import ScanError
from pipeline.scene.readers import read_scan
from pipeline.scene.readers.file_checks import read_root_file
from pipeline.scene.readers.labels import MAX_LABEL_MAP_BYTES, LabelMapError, parse_label_map, skipped_rows_warning
from tests.real_scans import write_scan
from tests.scannet_factory import MINI_MAP, V2_MAP

SECRET = "first line of a file outside the scans root"
HEADER = "id\traw_category\tcategory\tcount\tnyu40id"


def scan_with_map(tmp_path: Path) -> tuple[Path, Path]:
    """A box-room scan (floor, table, book) under ``tmp_path/scans``; returns (scan folder, label map path)."""
    root = tmp_path / "scans"
    return write_scan(root, "scene0001_00"), root / V2_MAP


def read(folder: Path, **config) -> object:
    """``read_scan`` on a worker thread, so a regression that blocks on a FIFO fails instead of hanging."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["scan"] = read_scan(str(folder), Config(scans_root=str(folder.parent), **config))
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "read_scan blocked on the label map"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["scan"]


def refusal(folder: Path, **config) -> str:
    with pytest.raises(ScanError) as info:
        read(folder, **config)
    line = str(info.value)
    assert "\n" not in line
    return line


# --- refused before reading ----------------------------------------------------------------------------------------


def test_a_label_map_linked_out_of_the_root_is_refused_unread(tmp_path):
    folder, label_map = scan_with_map(tmp_path)
    outside = tmp_path / "outside.tsv"
    outside.write_text(f"{SECRET}\tx\n1\tchair\tchair\t1\t5\n")
    label_map.unlink()
    label_map.symlink_to(outside)
    line = refusal(folder)
    assert line.startswith(f"scannet/scene0001_00: {V2_MAP}: symbolic link to {outside}, outside the scans root")
    assert "allow_links_outside_root" in line and SECRET not in line


def test_allow_links_outside_root_reads_a_linked_label_map(tmp_path):
    folder, label_map = scan_with_map(tmp_path)
    outside = tmp_path / "outside.tsv"
    outside.write_text(MINI_MAP, newline="")
    label_map.unlink()
    label_map.symlink_to(outside)
    scan = read(folder, allow_links_outside_root=True)
    assert {o.category for o in scan.objects if o.label_mapped} == {"floor", "table", "book"}


def test_a_link_within_the_root_is_followed(tmp_path):
    folder, label_map = scan_with_map(tmp_path)
    kept = folder.parent / "maps" / V2_MAP
    kept.parent.mkdir()
    label_map.rename(kept)
    label_map.symlink_to(kept)
    assert all(o.label_mapped for o in read(folder).objects)


def test_a_fifo_label_map_is_refused_without_blocking(tmp_path):
    folder, label_map = scan_with_map(tmp_path)
    label_map.unlink()
    os.mkfifo(label_map)
    line = refusal(folder)
    assert line == f"scannet/scene0001_00: {V2_MAP}: a FIFO (named pipe), not a regular file: refused before reading"


def test_a_device_named_as_the_label_map_is_refused_unread(tmp_path):
    folder, _ = scan_with_map(tmp_path)
    line = refusal(folder, label_map="/dev/zero")
    assert line == "scannet/scene0001_00: zero: a device file, not a regular file: refused before reading"


def test_a_device_linked_in_with_links_allowed_is_still_refused(tmp_path):
    folder, label_map = scan_with_map(tmp_path)
    label_map.unlink()
    label_map.symlink_to("/dev/zero")
    line = refusal(folder, allow_links_outside_root=True)
    assert line.endswith(f"{V2_MAP}: a device file, not a regular file: refused before reading")


def test_a_label_map_over_the_size_bound_is_refused_before_reading(tmp_path, monkeypatch):
    folder, label_map = scan_with_map(tmp_path)
    with open(label_map, "r+b") as fh:
        fh.truncate(MAX_LABEL_MAP_BYTES + 1)  # sparse: nothing of it is written or read
    opened = []
    monkeypatch.setattr(os, "read", lambda *a: opened.append(a) or b"")
    line = refusal(folder)
    assert line == (
        f"scannet/scene0001_00: {V2_MAP}: {MAX_LABEL_MAP_BYTES + 1} bytes, more than the {MAX_LABEL_MAP_BYTES} "
        "bytes such a file may have: refused before reading"
    )
    assert not opened


def test_read_root_file_stops_at_the_bound_when_the_file_grows(tmp_path, monkeypatch):
    path = tmp_path / "map.tsv"
    path.write_bytes(b"x" * 10)
    real_read = os.read
    monkeypatch.setattr(os, "read", lambda fd, n: real_read(fd, n) + b"y" * n)  # a file appended to as it is read
    with pytest.raises(ScanError, match="grew past the 16 bytes"):
        read_root_file(path, "k/s", "map.tsv", 16, region=None)


def test_the_label_map_bound_is_far_above_scannets_own_map(shared_dir):
    real = shared_dir / "fixtures" / "scannet" / V2_MAP
    if not real.exists():
        pytest.skip(f"{real} is absent")
    assert real.stat().st_size * 100 < MAX_LABEL_MAP_BYTES
    assert len(parse_label_map(real.read_bytes()).entries) > 500


# --- malformed rows: named by line, counted, the rest read ---------------------------------------------------------


ROWS = [HEADER, "1\twall\twall\t1\t1", "3\tfloor\tfloor\t1\t2", "4\ttable\ttable\t1\t7", "22\tbook\tbook\t1\t23"]


def tsv(rows: list[str]) -> bytes:
    return ("\r\n".join(rows) + "\r\n").encode()


@pytest.mark.parametrize(
    "bad_row, why",
    [
        ("5\t" + "x" * 200_000 + "\tlamp\t1\t1", "line 3: field larger than field limit (131072)"),
        ('9\t"unbalanced\tchair\t5\t5', "line 3: a quote that does not close on its line"),
        (b"7\t\xff\xfechair\tchair\t5\t5", "line 3: not valid UTF-8 (byte 0xff at column 3)"),
    ],
    ids=["field_over_csv_limit", "unbalanced_quote", "non_utf8_row"],
)
def test_a_malformed_row_is_named_counted_and_the_rest_read(bad_row, why):
    rows = [r.encode() for r in ROWS]
    rows.insert(2, bad_row if isinstance(bad_row, bytes) else bad_row.encode())
    label_map = parse_label_map(b"\r\n".join(rows) + b"\r\n")
    assert label_map.skipped_rows == (why,)
    assert set(label_map.entries) == {"wall", "floor", "table", "book"}  # nothing after the bad row swallowed
    assert skipped_rows_warning(label_map, V2_MAP) == [f"{V2_MAP}: 1 row cannot be parsed and is skipped ({why})"]


def test_many_bad_rows_are_all_counted_and_the_first_three_named():
    rows = ROWS[:1] + [f'{i}\t"open\tx\t1\t1' for i in range(5)] + ROWS[1:]
    label_map = parse_label_map(tsv(rows))
    [warning] = skipped_rows_warning(label_map, V2_MAP)
    assert warning.startswith(f"{V2_MAP}: 5 rows cannot be parsed and are skipped (line 2: ")
    assert "line 4: " in warning and "line 5: " not in warning and warning.endswith("; ...)")


def test_quoted_tabs_within_one_line_still_parse():
    label_map = parse_label_map(tsv([HEADER, '5\t"lamp\tshade"\tlamp\t1\t35']))
    assert label_map.entries["lamp\tshade"].category == "lamp" and not label_map.skipped_rows


@pytest.mark.parametrize(
    "data, why",
    [
        (b"\x8d" + bytes(range(256)) * 8, "line 1: not valid UTF-8 (byte 0x8d at column 1)"),
        (b"", "empty file"),
        (b"name\tvalue\n" + b"a\tb\n", "not a ScanNet label map: line 1 has ['name', 'value']"),
        (tsv([HEADER, '1\t"wall\twall\t1\t1']), "label map has no rows (line 2: a quote that does not close"),
    ],
    ids=["random_bytes", "empty", "other_tsv", "only_bad_rows"],
)
def test_a_file_that_is_no_label_map_is_an_error_naming_the_line(data, why):
    with pytest.raises(LabelMapError) as info:
        parse_label_map(data)
    assert why in str(info.value)


def test_a_long_foreign_header_is_shown_shortened():
    with pytest.raises(LabelMapError) as info:
        parse_label_map(("\t".join(["c" * 500] * 50) + "\n").encode())
    assert len(str(info.value)) < 400


def test_a_scan_warns_once_naming_the_file_and_line_and_keeps_its_labels(tmp_path):
    folder, label_map = scan_with_map(tmp_path)
    rows = MINI_MAP.split("\r\n")
    rows.insert(1, '9\t"unbalanced\tchair\t5\t5')
    label_map.write_text("\r\n".join(rows), newline="")
    scan = read(folder)
    assert [w for w in scan.warnings if V2_MAP in w] == [
        f"{V2_MAP}: 1 row cannot be parsed and is skipped (line 2: a quote that does not close on its line)"
    ]
    assert all(o.label_mapped for o in scan.objects)


def test_random_bytes_fail_the_scan_with_one_line_naming_the_file(tmp_path):
    folder, label_map = scan_with_map(tmp_path)
    label_map.write_bytes(b"\x8d\xfe" + bytes(range(256)) * 4)
    line = refusal(folder)
    assert line.startswith(f"scannet/scene0001_00: {V2_MAP}: unreadable label map: line 1: not valid UTF-8")


# --- other datasets read the optional map through the same guard ----------------------------------------------------


def test_a_remote_label_map_over_the_bound_is_refused_before_download(monkeypatch):
    from pipeline.scene.readers import _copy_to_local
    from pipeline.storage import upath

    remote = upath("memory://bucket27/scans/scene0001_00")
    fs = remote.fs
    fs.pipe("/bucket27/scans/scene0001_00/scene0001_00.txt", b"sceneType = Office\n")
    fs.pipe(f"/bucket27/scans/{V2_MAP}", b"x" * (MAX_LABEL_MAP_BYTES + 1))
    fetched: list[str] = []
    real_get = fs.get
    monkeypatch.setattr(fs, "get", lambda src, *a, **k: fetched.append(str(src)) or real_get(src, *a, **k))
    try:
        with pytest.raises(ScanError) as info:
            _copy_to_local(remote, Config(scans_root="memory://bucket27/scans"), "scannet/scene0001_00")
    finally:
        fs.rm("/bucket27", recursive=True)
    assert str(info.value) == (
        f"scannet/scene0001_00: {V2_MAP}: {MAX_LABEL_MAP_BYTES + 1} bytes, more than the {MAX_LABEL_MAP_BYTES} "
        "bytes such a file may have: refused before reading"
    )
    assert fetched and not any(src.endswith(V2_MAP) for src in fetched)


def test_the_map_above_scans_in_a_download_is_read_and_its_links_checked_there(tmp_path):
    top = tmp_path / "scannet"
    folder = write_scan(top / "scans", "scene0001_00")
    (top / "scans" / V2_MAP).rename(top / V2_MAP)  # ScanNet's download: the map above scans/
    config = Config(scans_root=str(top / "scans"))
    assert all(o.label_mapped for o in read_scan(str(folder), config).objects)
    outside = tmp_path / "elsewhere.tsv"
    (top / V2_MAP).rename(outside)
    (top / V2_MAP).symlink_to(outside)
    with pytest.raises(ScanError, match=f"{V2_MAP}: symbolic link to {outside}, outside the scans root"):
        read_scan(str(folder), config)
