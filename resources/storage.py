"""Where scans are read from and outputs written to, as a Dagster resource.

Locations come from the run configuration (``pipeline.config``) and can be
overridden per deployment with environment variables, so the same code
location serves the local demo (``data/scans`` -> ``data/out``) and a bucket
(``SCAN2QA_SCANS=s3://bucket/scans``) without code changes:

- ``SCAN2QA_SCANS``: scans root (local path or ``s3://bucket/prefix``)
- ``SCAN2QA_OUT``: output root
- ``SCAN2QA_CONFIG``: YAML config file (``pipeline.config``)
- ``SCAN2QA_STORAGE_OPTIONS``: JSON fsspec storage options, e.g.
  ``{"client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}}`` for MinIO
"""

from __future__ import annotations

import json
import os
from typing import Any

import dagster as dg

from pipeline.config import Config, load_config


class StorageResource(dg.ConfigurableResource):
    """Scans root, output root and storage options; empty fields fall back to the config file.

    The rest of the config file (thresholds, budgets, profiles) is the ``run_config`` resource's."""

    scans_root: str = ""
    output_root: str = ""
    storage_options: dict[str, Any] = {}
    config_file: str = ""

    @classmethod
    def from_env(cls) -> StorageResource:
        options = os.environ.get("SCAN2QA_STORAGE_OPTIONS", "").strip()
        return cls(
            scans_root=os.environ.get("SCAN2QA_SCANS", ""),
            output_root=os.environ.get("SCAN2QA_OUT", ""),
            storage_options=json.loads(options) if options else {},
            config_file=os.environ.get("SCAN2QA_CONFIG", ""),
        )

    @classmethod
    def from_config(cls, config: Config, config_file: str = "") -> StorageResource:
        return cls(
            scans_root=config.scans_root,
            output_root=config.output_root,
            storage_options=dict(config.storage_options),
            config_file=config_file,
        )

    def locations(self) -> dict[str, Any]:
        """Scans root, output root and storage options; read from the config file only if a root is empty
        (a ``resolved`` resource, the one ``default_resources`` hands to steps, never is)."""
        if self.scans_root and self.output_root:
            return {"scans_root": self.scans_root, "output_root": self.output_root,
                    "storage_options": dict(self.storage_options)}
        return self._file_locations()

    def _file_locations(self) -> dict[str, Any]:
        config = self.config()
        return {"scans_root": config.scans_root, "output_root": config.output_root,
                "storage_options": dict(config.storage_options)}

    def resolved(self) -> StorageResource:
        """This resource with every location filled in (empty ones from the config file, read once here)."""
        return StorageResource(**self._file_locations(), config_file=self.config_file)

    def config(self) -> Config:
        """The whole config file with this resource's locations applied (the CLI's and tests' view; asset steps
        read the ``run_config`` resource instead, ``resources.run_config``)."""
        return load_config(
            self.config_file or None,
            scans_root=self.scans_root or None,
            output_root=self.output_root or None,
            storage_options=self.storage_options or None,
        )
