"""The shape docs/DESIGN.md promises for ``pipeline/``: stages as packages, no import circle, no Dagster, benches apart.

Read from the source with ``ast`` rather than by importing, so that a lazy import
inside a function (the way the old config circle hid) counts as much as one at
the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / "pipeline"
STAGES = ("scene", "frames", "visibility", "qa", "pinpoint", "release", "scoring", "exports", "synth", "bench")


def module_names() -> dict[str, Path]:
    names = {}
    for path in PIPELINE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names[name] = path
    return names


def imported_modules(path: Path, known: dict[str, Path]) -> set[str]:
    """Every pipeline module ``path`` imports anywhere in its body, resolved to modules that exist."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            # ``from pkg import submodule`` imports the submodule; ``from mod import name`` imports mod.
            targets = [name for name in submodules if name in known] or [node.module]
        else:
            continue
        found.update(target for target in targets if target in known)
    return found


def import_graph() -> dict[str, set[str]]:
    known = module_names()
    graph = {}
    for name, path in known.items():
        # A module importing its own parent package is how siblings are reached, not a circle.
        graph[name] = {t for t in imported_modules(path, known) if t != name and not name.startswith(t + ".")}
    return graph


def test_every_stage_is_a_package():
    missing = [stage for stage in STAGES if not (PIPELINE / stage / "__init__.py").is_file()]
    assert not missing, f"stages without a package under pipeline/: {missing}"


def test_no_import_circle_in_pipeline():
    graph = import_graph()
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


@pytest.mark.parametrize("forbidden", ["dagster", "pipeline.bench"])
def test_product_modules_do_not_import(forbidden):
    known = module_names()
    offenders = []
    for name, path in known.items():
        if name.startswith("pipeline.bench"):
            continue  # benches measure whole builds, Dagster included (imported lazily, inside the measurement)
        if name == "pipeline.cli":
            continue  # the command line loads ``scan2qa bench``'s module when that command runs
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == forbidden or n.startswith(forbidden + ".") for n in names):
                offenders.append(name)
    assert not offenders, f"pipeline modules importing {forbidden}: {sorted(set(offenders))}"
