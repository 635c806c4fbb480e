"""Dagster resources: storage locations (``storage``), the Parquet IO manager (``parquet_io``), defaults."""
