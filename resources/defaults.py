"""The resource set every scan2qa asset expects: storage locations, run config, Parquet IO manager.

The FSD judge is no resource: no asset scores, so ``scan2qa score`` builds it where it is used
(``pipeline.scoring.judge.JudgeSettings.from_env``).
"""

from __future__ import annotations

from resources.parquet_io import ParquetIOManager
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


def default_resources(
    storage: StorageResource | None = None, run_config: RunConfigResource | None = None
) -> dict[str, object]:
    """``storage`` (locations resolved), ``run_config`` (from ``storage``'s config file unless given), the
    Parquet IO manager rooted at the tables root."""
    storage = (storage or StorageResource.from_env()).resolved()
    run_config = run_config or RunConfigResource.from_file(storage.config_file)
    config = run_config.config(storage)
    return {
        "storage": storage,
        "run_config": run_config,
        "io_manager": ParquetIOManager(root=config.tables_root, storage_options=dict(config.storage_options)),
    }
