"""The layers docs/DESIGN.md "Layers" declares, checked on the source of every product module.

Imports are read with ``ast`` rather than by importing, so that an import inside a function, and a module
named by string to ``import_module``, count as much as one at the top of a file: a lazy import hides a
dependency from the reader, never from the layering.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT_PACKAGES = ("pipeline", "expectations", "resources", "assets", "runs", "deploy", "benches")
PRODUCT_MODULES = ("scan2qa",)
ABOVE_PIPELINE = ("assets", "runs", "resources", "expectations", "deploy", "benches", "scan2qa", "dagster")
# What drives an instance from outside the code location: above assets, so the code location never loads it.
ABOVE_ASSETS = ("runs", "deploy", "benches", "scan2qa")
COMPUTED = "<a module name computed at run time>"

# pipeline's packages and top-level modules, bottom first. A module may import its own rank or any rank below;
# within one rank, packages must not import one another in a loop.
PIPELINE_ORDER: tuple[tuple[str, ...], ...] = (
    ("errors", "schemas", "config_files", "storage", "seeding", "threads", "vocab", "groups", "interrupts",
     "output_paths", "table_scan", "question_types", "datasets"),
    ("config",),
    ("formats",),
    ("geometry",),
    ("frames",),
    ("scene",),
    ("visibility",),
    ("scoring",),
    ("qa",),
    ("pinpoint",),
    ("sampling",),
    ("exports",),
    ("release",),
    ("synth",),
    ("commands",),  # each stage's command-line module (see COMMAND_MODULES): wiring, above every stage
    ("bench",),
    ("cli",),
)
# A stage's ``command`` module parses arguments and calls stages: it ranks with the CLI, above every stage, and
# only its own stage's modules may still import it.
COMMAND_MODULES = ("command", "generate_command")
# Known upward imports left in place, each with why. Keep this list short and shrinking.
ALLOWED_UPWARD = {
    # ``scan2qa stats --samplers`` is dispatched from inside qa/stats.py's ``run``; qa/stats.py is being rewritten
    # on another branch, so the dispatch moves to the stats command when that lands (issue 39).
    ("pipeline/qa/stats.py", "pipeline.sampling.command"),
}


@dataclass(frozen=True)
class ImportLine:
    path: str  # relative to the repository
    line: int
    importer: str  # dotted module name of the file
    target: str  # dotted name imported (module, or module.attribute)

    def at(self) -> str:
        return f"{self.path}:{self.line}"


def product_files() -> list[Path]:
    files = [path for package in PRODUCT_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    return files + [ROOT / f"{name}.py" for name in PRODUCT_MODULES if (ROOT / f"{name}.py").is_file()]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> list[ImportLine]:
    """Every import in ``path``: statements at any depth, relative ones resolved, and ``import_module("x")``."""
    importer = module_name(path, root)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    rel = str(path.relative_to(root))
    tree = ast.parse(path.read_text(), filename=rel)
    constants = {  # module-level NAME = "text": an import_module(NAME) names its module as plainly as a literal
        node.targets[0].id: node.value.value for node in tree.body
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and _is_import_call(node):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                targets = [first.value]
            elif isinstance(first, ast.Name) and first.id in constants:
                targets = [constants[first.id]]
            else:
                targets = [COMPUTED]
        else:
            continue
        found.extend(ImportLine(rel, node.lineno, importer, target) for target in targets)
    return found


def _is_import_call(node: ast.Call) -> bool:
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    return name in ("import_module", "__import__")


def all_imports() -> list[ImportLine]:
    return [line for path in product_files() for line in imports_of(path)]


def top(name: str) -> str:
    """The top-level package; every ``dagster*`` distribution (dagster_celery, dagster_graphql, ...) as ``dagster``."""
    first = name.split(".")[0]
    return "dagster" if first.startswith("dagster") else first


def same_stage(a: str, b: str) -> bool:
    return a.split(".")[:2] == b.split(".")[:2]


def pipeline_unit(name: str) -> str:
    """The package (or top-level module) of ``pipeline`` a dotted name belongs to; command modules to "commands"."""
    parts = name.split(".")
    if len(parts) < 2:
        return "pipeline"
    if len(parts) >= 3 and parts[2] in COMMAND_MODULES:
        return "commands"
    return parts[1]


RANK = {unit: rank for rank, units in enumerate(PIPELINE_ORDER) for unit in units}


def broken_rule(imp: ImportLine) -> str | None:
    src, dst = top(imp.importer), top(imp.target)
    if src == "pipeline" and imp.target == COMPUTED:
        return "pipeline imports no module by a computed name (its layer cannot be checked)"
    if src == "pipeline" and dst in ABOVE_PIPELINE:
        return f"pipeline imports nothing above it (here {dst})"
    if src == "expectations" and dst in ABOVE_PIPELINE and dst != "expectations":
        return f"expectations imports only pipeline (here {dst})"
    if src == "resources" and dst in ("assets", *ABOVE_ASSETS):
        return f"resources imports no {dst}"
    if src == "assets" and dst in ABOVE_ASSETS:
        return f"assets holds Dagster definitions and imports no run management (here {dst})"
    if src == dst == "pipeline" and (imp.path, _module_of(imp.target)) not in ALLOWED_UPWARD:
        a, b = pipeline_unit(imp.importer), pipeline_unit(imp.target)
        if a != b and not same_stage(imp.importer, imp.target) and b in RANK and RANK.get(a, -1) < RANK[b]:
            return f"pipeline.{a} sits below pipeline.{b} in the declared order"
    return None


def violations(imports: list[ImportLine]) -> list[str]:
    return [f"{imp.at()}: imports {imp.target}: {rule}" for imp in imports if (rule := broken_rule(imp))]


def _module_of(target: str) -> str:
    return ".".join(target.split(".")[:3])


def test_every_pipeline_unit_has_a_declared_rank():
    units = {pipeline_unit(module_name(p)) for p in (ROOT / "pipeline").rglob("*.py")} - {"pipeline"}
    missing = sorted(units - set(RANK))
    assert not missing, f"pipeline packages or modules with no place in PIPELINE_ORDER (tests/test_layers.py): {missing}"


def test_imports_follow_the_layers():
    found = violations(all_imports())
    assert not found, "upward imports:\n" + "\n".join(found)


def test_no_package_loop_inside_pipeline():
    edges: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    for imp in all_imports():
        if top(imp.importer) == top(imp.target) == "pipeline":
            if (imp.path, _module_of(imp.target)) in ALLOWED_UPWARD:
                continue
            a, b = pipeline_unit(imp.importer), pipeline_unit(imp.target)
            if a != b and not same_stage(imp.importer, imp.target) and "pipeline" not in (a, b):
                edges.setdefault(a, set()).add(b)
                where.setdefault((a, b), imp.at())
    loops = []
    state: dict[str, int] = {}

    def visit(unit: str, path: list[str]) -> None:
        state[unit] = 1
        path.append(unit)
        for nxt in sorted(edges.get(unit, ())):
            if state.get(nxt) == 1:
                loop = path[path.index(nxt):] + [nxt]
                loops.append(" -> ".join(f"{x} ({where[(x, y)]})" for x, y in zip(loop, loop[1:])))
            elif nxt not in state:
                visit(nxt, path)
        path.pop()
        state[unit] = 2

    for unit in sorted(edges):
        if unit not in state:
            visit(unit, [])
    assert not loops, "package loops inside pipeline:\n" + "\n".join(loops)


def test_a_planted_upward_import_is_named_with_file_line_and_rule(tmp_path):
    (tmp_path / "pipeline" / "geometry").mkdir(parents=True)
    planted = tmp_path / "pipeline" / "geometry" / "planted.py"
    planted.write_text("import numpy\n\n\ndef f():\n    import importlib\n    from pipeline.scene.parsed import ParsedScan\n"
                       "    return importlib.import_module('assets.catalog'), ParsedScan\n")
    assert violations(imports_of(planted, tmp_path)) == [
        "pipeline/geometry/planted.py:6: imports pipeline.scene.parsed.ParsedScan: "
        "pipeline.geometry sits below pipeline.scene in the declared order",
        "pipeline/geometry/planted.py:7: imports assets.catalog: pipeline imports nothing above it (here assets)",
    ]


def test_a_planted_import_of_run_management_into_assets_is_named(tmp_path):
    (tmp_path / "assets").mkdir()
    planted = tmp_path / "assets" / "planted.py"
    planted.write_text("import dagster as dg\n\n\ndef f():\n    from runs.build import build\n    return build\n")
    assert violations(imports_of(planted, tmp_path)) == [
        "assets/planted.py:5: imports runs.build.build: "
        "assets holds Dagster definitions and imports no run management (here runs)",
    ]


def test_every_private_dagster_module_of_product_code_is_named_in_design():
    """docs/DESIGN.md lists each private Dagster module the product still imports, with why (issue 39)."""
    named = re.findall(r"`(dagster\._[\w.]*?)(?:\.\*)?`", (ROOT / "docs" / "DESIGN.md").read_text())
    unnamed = [f"{imp.at()}: imports {imp.target}" for imp in all_imports() if imp.target.startswith("dagster._")
               and not any(imp.target == name or imp.target.startswith(name + ".") for name in named)]
    assert not unnamed, "private Dagster API docs/DESIGN.md does not name, with why:\n" + "\n".join(unnamed)
