"""Dagster resources: storage locations and the Parquet IO manager."""

from __future__ import annotations

from resources.parquet_io import ParquetIOManager
from resources.storage import StorageResource


def default_resources(storage: StorageResource | None = None) -> dict[str, object]:
    """The resources every scan2qa asset expects, with the IO manager rooted at the storage's tables root."""
    storage = storage or StorageResource.from_env()
    config = storage.config()
    return {
        "storage": storage,
        "io_manager": ParquetIOManager(root=config.tables_root, storage_options=dict(config.storage_options)),
    }


__all__ = ["ParquetIOManager", "StorageResource", "default_resources"]
