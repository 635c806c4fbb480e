"""The run configuration as Dagster config: the ``run_config`` resource every asset step reads once.

Profiles, thresholds, budgets and seeds (every field of ``pipeline.config.Config``
except the three storage locations, which are the ``storage`` resource's) are the
fields of ``RunConfigResource``, nested as in the YAML file. The code location
fills them from the deployment's config file (``SCAN2QA_CONFIG`` or
``./scan2qa.yaml``, ``from_env``), so the launchpad shows the deployment's values
under ``resources.run_config.config`` and lets a user edit them for one run;
``scan2qa build`` fills them from its ``--config`` (``from_config``), so a build
and the UI read the same values.

Staleness follows the deployment's file, not a launchpad edit: each asset's code
version covers the fields its module reads (``assets.catalog.CONFIG_READ``,
digested from ``from_env``), so editing a threshold in the file and reloading the
code location marks exactly the assets that read it, and their downstream, stale.
Each materialization records the digest and the values its step used
(``recorded_metadata``), so a launchpad override is visible on the asset too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import types
import typing
from typing import Any, Optional

import dagster as dg
import pydantic

from pipeline.config import Config, load_config
from pipeline.config_files import build_dataclass

# The storage resource's fields: where scans and outputs live, not how they are built.
LOCATION_FIELDS = ("scans_root", "output_root", "storage_options")


def _settings_type(hint: Any) -> Any:
    """The Dagster config type of a ``Config`` field's type: tuples become lists, a section its derived model."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        return list[typing.get_args(hint)[0]]
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        [inner] = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return Optional[_settings_type(inner)]
    if dataclasses.is_dataclass(hint):
        return settings_model(hint)
    return hint


def settings_model(
    section: type, base: type = dg.Config, name: str | None = None, skip: tuple[str, ...] = (), doc: str | None = None
) -> type:
    """The Dagster config class of a config dataclass, field for field with its defaults.

    Derived rather than written out so that a field or a default is declared once, in ``pipeline.config``: the
    launchpad, ``scan2qa build`` and the CLI cannot disagree about a threshold or a budget (issue 39).
    """
    hints = typing.get_type_hints(section)
    defaults = section()
    fields: dict[str, Any] = {}
    for spec in dataclasses.fields(section):
        if spec.name in skip:
            continue
        kind = _settings_type(hints[spec.name])
        default = getattr(defaults, spec.name)
        if dataclasses.is_dataclass(default):
            default = kind()
        elif isinstance(default, tuple):
            default = list(default)
        fields[spec.name] = (kind, default)
    model_name = name or section.__name__.replace("Config", "Settings")
    return pydantic.create_model(model_name, __base__=base, __module__=__name__, __doc__=doc or section.__doc__, **fields)


class _RunConfigMethods(dg.ConfigurableResource):
    """How the ``run_config`` resource turns its values into the step's ``Config``; its fields are derived below."""

    @classmethod
    def from_config(cls, config: Config) -> RunConfigResource:
        values = {k: v for k, v in config.to_dict().items() if k not in LOCATION_FIELDS}
        return cls(**values)

    @classmethod
    def from_file(cls, path: str | None = None) -> RunConfigResource:
        """The values of a config file (``./scan2qa.yaml`` when ``path`` is empty and it exists; else defaults)."""
        return cls.from_config(load_config(path or None))

    @classmethod
    def from_env(cls) -> RunConfigResource:
        """The deployment's values: the file ``SCAN2QA_CONFIG`` names (``scan2qa build --config`` sets it)."""
        return cls.from_file(os.environ.get("SCAN2QA_CONFIG", ""))

    def values(self) -> dict[str, Any]:
        """The fields as the YAML file spells them (nested mappings, lists)."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            out[name] = value.model_dump() if isinstance(value, dg.Config) else value
        return out

    def config(self, storage=None) -> Config:
        """The step's ``pipeline.config.Config``: these values at ``storage``'s locations (the defaults' when
        None), validated as a file is, so a launchpad typo fails the step with the same one line."""
        values = {**self.values(), **(storage.locations() if storage is not None else {})}
        return build_dataclass(Config, values, "resources.run_config")


RunConfigResource = settings_model(
    Config, base=_RunConfigMethods, name="RunConfigResource", skip=LOCATION_FIELDS,
    doc="The run configuration of ``pipeline.config.Config`` without its locations; ``config(storage)`` joins them.",
)


def config_digest(config: Config, fields: tuple[str, ...] | None = None) -> str:
    """sha256 of the run-config ``fields`` (all but the locations when None) as the step read them."""
    values = config.to_dict()
    names = fields if fields is not None else tuple(k for k in values if k not in LOCATION_FIELDS)
    return hashlib.sha256(json.dumps({f: values.get(f) for f in names}, sort_keys=True, default=str).encode()).hexdigest()


def recorded_metadata(config: Config, fields: tuple[str, ...]) -> dict[str, Any]:
    """What a materialization records of the config its step read: the digest and the values of ``fields``."""
    values = config.to_dict()
    return {
        "run_config_digest": dg.MetadataValue.text(config_digest(config, fields)[:12]),
        "run_config": dg.MetadataValue.json({f: values.get(f) for f in fields}),
    }
