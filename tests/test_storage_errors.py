"""Unreadable tables are one-line errors naming the file."""

from __future__ import annotations

import polars as pl
import pytest

from scan2qa import main
from pipeline.errors import TableError
from pipeline.storage import read_table, upath


def test_corrupt_parquet_names_the_file(tmp_path):
    path = tmp_path / "qa.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(TableError, match=r"qa\.parquet: not a readable Parquet table"):
        read_table(upath(path), "qa")


def test_foreign_table_names_the_schema(tmp_path, capsys):
    path = tmp_path / "qa.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(path)
    assert main(["stats", "--qa", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert "qa.parquet: does not match the 'qa' schema" in err and "\n" not in err
