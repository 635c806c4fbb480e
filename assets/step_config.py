"""The run config one asset step reads: taken once from the ``run_config`` resource and recorded on its outputs.

Every materialization then shows, next to the code version that covers the same
fields (``assets.catalog.CONFIG_READ``), the digest and the values its step used,
including an edit made in the launchpad for that run.
"""

from __future__ import annotations

import dagster as dg

from assets.catalog import CONFIG_READ
from pipeline.config import Config
from resources.run_config import RunConfigResource, recorded_metadata
from resources.storage import StorageResource


def step_config(context: dg.AssetExecutionContext, storage: StorageResource, run_config: RunConfigResource,
                module: str) -> Config:
    """The step's ``Config`` (``run_config`` at ``storage``'s locations); its ``module``'s fields go on each output."""
    config = run_config.config(storage)
    fields = CONFIG_READ.get(module, ())
    if fields:
        metadata = recorded_metadata(config, fields)
        for name in sorted(context.selected_output_names):
            context.add_output_metadata(metadata, output_name=name)
    return config
