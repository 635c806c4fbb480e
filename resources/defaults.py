"""The resource set every scan2qa asset expects: storage locations, run config, Parquet IO manager, judge."""

from __future__ import annotations

from resources.judge import JudgeResource
from resources.parquet_io import ParquetIOManager
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


def default_resources(
    storage: StorageResource | None = None, run_config: RunConfigResource | None = None
) -> dict[str, object]:
    """``storage`` (locations resolved), ``run_config`` (from ``storage``'s config file unless given), the
    Parquet IO manager rooted at the tables root, and the FSD judge (env-configured)."""
    storage = (storage or StorageResource.from_env()).resolved()
    run_config = run_config or RunConfigResource.from_file(storage.config_file)
    config = run_config.config(storage)
    return {
        "storage": storage,
        "run_config": run_config,
        "io_manager": ParquetIOManager(root=config.tables_root, storage_options=dict(config.storage_options)),
        "judge": JudgeResource(),
    }
