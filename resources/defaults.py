"""The resource set every scan2qa asset expects, built from one storage resource."""

from __future__ import annotations

from resources.judge import JudgeResource
from resources.parquet_io import ParquetIOManager
from resources.storage import StorageResource


def default_resources(storage: StorageResource | None = None) -> dict[str, object]:
    """``storage``, the Parquet IO manager rooted at its tables root, and the FSD judge (env-configured)."""
    storage = storage or StorageResource.from_env()
    config = storage.config()
    return {
        "storage": storage,
        "io_manager": ParquetIOManager(root=config.tables_root, storage_options=dict(config.storage_options)),
        "judge": JudgeResource(),
    }
