"""What the Dagster catalog shows per asset: kinds, owner, tags, column schema, code version, previews.

Every table asset is declared through ``table_asset`` / ``table_out`` so its
catalog page carries, before anything is built, the column schema of
``pipeline.schemas`` (with the column notes written next to each column
there), the kinds ``polars`` and ``parquet``, the team that owns it and its
stage; the Parquet IO manager adds, per materialization, ``dagster/row_count``,
a clickable path and a small Markdown preview (``materialization_metadata``).

Code versions are a hash of the source the asset's step can run: its asset
module and every module of this project it imports, followed transitively
through ``import`` statements (lazy imports inside functions included). An
asset whose code did not change keeps its code version, so the UI does not
mark it stale and "Materialize stale" leaves it alone; an edit anywhere it
imports changes it. Over-approximating (a module imported but not used) only
costs an extra rebuild, never a missed one.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import dagster as dg

# Recorded by the IO manager too (``resources/parquet_io.py``), which sits below assets: defined in resources.
from resources.table_metadata import materialization_metadata, path_value, preview  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("pipeline", "expectations", "assets", "resources")
OWNERS = ["team:scan2qa"]
TABLE_KINDS = {"polars", "parquet"}


# --- column schema ------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _column_notes() -> dict[str, dict[str, str]]:
    """Per table, the comment written after each column in ``pipeline/schemas.py`` (``("x", _f64),  # note``)."""
    notes: dict[str, dict[str, str]] = {}
    table = None
    for line in (ROOT / "pipeline" / "schemas.py").read_text().splitlines():
        opened = re.match(r'\s*"(\w+)": pa\.schema\(', line)
        if opened:
            table = opened.group(1)
            notes[table] = {}
            continue
        column = re.match(r'\s*\("(\w+)",.*\),\s*#\s*(.+)$', line)
        if table and column:
            notes[table][column.group(1)] = column.group(2).strip()
    return notes


def column_schema(table: str) -> dg.TableSchema:
    """The table's Arrow schema from ``pipeline.schemas`` as a Dagster ``TableSchema``."""
    from pipeline.schemas import SCHEMAS

    source = "qa" if table in ("qa_candidates", "pinpoint_qa_candidates", "pinpoint_qa") else table
    source = "qa_distribution_drops" if table == "pinpoint_qa_drops" else source
    notes = _column_notes().get(source, {})
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name=f.name, type=str(f.type), description=notes.get(f.name),
                           constraints=dg.TableColumnConstraints(nullable=f.nullable))
            for f in SCHEMAS[table]
        ]
    )


# --- code versions ------------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _module_file(name: str) -> Path | None:
    """The project file of module ``name`` (None outside the project); cached: the import walks of every asset
    module ask for the same few hundred names thousands of times, each a file-system check or two."""
    parts = name.split(".")
    if parts[0] not in PROJECT_PACKAGES:
        return None
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(?:\(([^)]*)\)|([\w \t,]*))|import[ \t]+([\w.]+))", re.M
)


@lru_cache(maxsize=None)
def _imports(path: Path) -> frozenset[str]:
    """Modules a file imports, at any indentation (lazy imports too); a line scan, cheaper than parsing."""
    names: set[str] = set()
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    for source, grouped, listed, plain in _IMPORT.findall(path.read_text()):
        listed = grouped or listed
        if plain:
            names.add(plain)
            continue
        module = source.lstrip(".")
        level = len(source) - len(module)
        if level:
            base = list(package[: len(package) - level + 1])
            module = ".".join([*base, module] if module else base)
        names.add(module)
        for name in re.split(r"[,\s]+", re.sub(r"#[^\n]*", "", listed)):
            if name and name != "as":
                names.add(f"{module}.{name}")  # ``from package import module`` (a function's name just misses)
    return frozenset(names)


@lru_cache(maxsize=None)
def code_version(module: str) -> str:
    """Hash of ``module``'s file and every project module it imports, transitively (12 hex digits)."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if path is None or str(path) in seen:
            continue
        seen[str(path)] = path
        todo.extend(_imports(path))
        parent = name.rsplit(".", 1)[0] if "." in name else None
        if parent:
            todo.append(parent)  # a package's __init__ runs before its modules
    digest = hashlib.sha256()
    for key in sorted(seen):
        digest.update(str(seen[key].relative_to(ROOT)).encode())
        digest.update(seen[key].read_bytes())
    return digest.hexdigest()[:12]


# The run-config fields each asset module's steps read. An asset's code version covers them too, so a changed
# threshold (say ``visibility.fraction_threshold``) changes the version of the asset that reads it and Dagster marks
# it stale, and everything downstream of it with it; assets that read none of the changed fields stay fresh.
# ``frames`` carries the budgets (``pipeline.frames.budgets.frame_budgets``), asked at by qa and pinpoint; the
# release records the whole run config in its manifest, so it reads every field.
RUN_CONFIG_FIELDS = ("label_map", "seed", "frames", "visibility", "profiles", "samplers", "gate", "reviews_path", "pinpointqa",
                     "discovery", "allow_links_outside_root")
CONFIG_READ = {
    "assets.sampled": ("samplers",),
    "assets.scene": ("label_map", "frames", "allow_links_outside_root"),
    "assets.frames": ("frames", "seed"),
    "assets.visibility": ("visibility",),
    "assets.qa": ("profiles", "seed", "frames", "reviews_path"),
    "assets.pinpoint": ("pinpointqa", "profiles", "seed", "frames"),
    "assets.membership": (),
    "assets.release": RUN_CONFIG_FIELDS,
}


@lru_cache(maxsize=None)
def run_config_digest(module: str) -> str:
    """Digest of the run-config fields ``module`` reads (``CONFIG_READ``), from the deployment's config
    (``SCAN2QA_CONFIG`` or ./scan2qa.yaml: the defaults of the ``run_config`` resource, ``RunConfigResource.from_env``)."""
    from resources.run_config import RunConfigResource, config_digest

    fields = CONFIG_READ.get(module, ())
    if not fields:
        return ""
    return config_digest(RunConfigResource.from_env().config(), fields)


def asset_version(module: str, fields: tuple[str, ...] | None = None) -> str:
    """The code version Dagster records: the module's source (``code_version``) and the run-config ``fields``
    (default: those the module reads, ``CONFIG_READ``)."""
    from resources.run_config import RunConfigResource, config_digest

    fields = CONFIG_READ.get(module, ()) if fields is None else tuple(sorted(set(fields)))
    if not fields:
        return code_version(module)
    digest = run_config_digest(module) if fields == CONFIG_READ.get(module) else config_digest(
        RunConfigResource.from_env().config(), fields)
    return hashlib.sha256(f"{code_version(module)}:{digest}".encode()).hexdigest()[:12]


def _asset_module(spec: dg.AssetSpec) -> str:
    return f"assets.{spec.tags['stage']}"


def config_fields_upstream(assets) -> dict[dg.AssetKey, tuple[str, ...]]:
    """Per asset key, the run-config fields its own module and every asset upstream of it read.

    Dagster marks an asset stale when its own code version changed or an input has a newer data version, not
    when an input is merely stale; so for a changed threshold to mark everything it affects stale at once (and
    "Materialize stale" to rebuild them in one run), each asset's version covers what its ancestors read too.
    """
    specs = {spec.key: spec for a in assets if isinstance(a, dg.AssetsDefinition) for spec in a.specs}
    parents = {key: {dep.asset_key for dep in spec.deps} for key, spec in specs.items()}
    fields: dict[dg.AssetKey, tuple[str, ...]] = {}

    def read(key: dg.AssetKey) -> tuple[str, ...]:
        if key not in fields:
            fields[key] = ()  # cycles cannot occur in an asset graph; this only guards the recursion
            own = set(CONFIG_READ.get(_asset_module(specs[key]), ())) if "stage" in specs[key].tags else set()
            for parent in parents[key]:
                if parent in specs:
                    own |= set(read(parent))
            fields[key] = tuple(sorted(own))
        return fields[key]

    for key in specs:
        read(key)
    return fields


def with_config_versions(assets: list) -> list:
    """The asset definitions with each code version covering the config fields read upstream of it too."""
    fields = config_fields_upstream(assets)

    def versioned(spec: dg.AssetSpec) -> dg.AssetSpec:
        if "stage" not in spec.tags or spec.code_version is None:
            return spec
        return spec.replace_attributes(code_version=asset_version(_asset_module(spec), fields[spec.key]))

    return [a.map_asset_specs(versioned) if isinstance(a, dg.AssetsDefinition) else a for a in assets]


# --- declarations -------------------------------------------------------------------------------------------------


def _stage(module: str) -> str:
    return module.rsplit(".", 1)[-1]


def table_asset(table: str, module: str) -> dict[str, Any]:
    """Keyword arguments of ``@dg.asset`` for an asset stored as the table ``table`` by the Parquet IO manager."""
    return {
        "kinds": set(TABLE_KINDS),
        "owners": list(OWNERS),
        "tags": {"stage": _stage(module)},
        "code_version": asset_version(module),
        "metadata": {"dagster/column_schema": column_schema(table), "table": table},
    }


def table_out(table: str, module: str, description: str, **extra: Any) -> dg.AssetOut:
    """A ``dg.AssetOut`` of a multi-asset, declared like ``table_asset`` (``extra``: more ``AssetOut`` fields)."""
    return dg.AssetOut(description=description, **table_asset(table, module), **extra)


def observed_spec(key: str, module: str, kinds: set[str], description: str) -> dg.AssetSpec:
    """The spec of an observable source asset (``multi_observable_source_asset``: ``observable_source_asset``
    silently drops kinds and owners), in the release group."""
    return dg.AssetSpec(key, group_name="release", description=description, kinds=set(kinds), owners=list(OWNERS),
                        tags={"stage": _stage(module)})


def file_asset(module: str, kinds: set[str]) -> dict[str, Any]:
    """Keyword arguments for an asset whose output is files rather than a table (videos, the release)."""
    return {"kinds": set(kinds), "owners": list(OWNERS), "tags": {"stage": _stage(module)},
            "code_version": asset_version(module)}


# --- per-materialization metadata ---------------------------------------------------------------------------------


def link_value(path) -> dg.MetadataValue:
    """A page a reviewer opens (the report, the Data Docs): always a URL, so the catalog shows a link to click,
    ``file://`` for a local file (the UI runs on the machine that holds it, as ``make ui`` does)."""
    text = str(path)
    if "://" in text:
        return dg.MetadataValue.url(text)
    from pathlib import Path

    return dg.MetadataValue.url(Path(text).resolve().as_uri())
