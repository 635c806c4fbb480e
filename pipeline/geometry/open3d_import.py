"""Import Open3D without its Plotly/Dash viewer, which the pipeline never opens.

``import open3d`` runs ``open3d/visualization/__init__.py``, which imports
``open3d.visualization.draw_plotly`` unconditionally; that module imports
``plotly.graph_objects`` and ``dash`` (and with Dash: Flask, Werkzeug, IPython,
requests, asyncio...). The pipeline uses Open3D for ``RaycastingScene`` and its
tensors only (``pipeline.geometry.raycast``), yet every process that casts rays
paid for the viewer: about 1.2 CPU-s per process on the 2-core build machine.

So, for the duration of ``import open3d`` only, and only if this process has not
imported Open3D yet, ``open3d.visualization.draw_plotly`` is a stand-in module
(``ViewerStandIn``): the three functions ``open3d.visualization`` takes from it
(``get_plotly_fig``, ``draw_plotly``, ``draw_plotly_server``) are forwarders that
import the real module on their first call, and reading any other attribute of
the stand-in imports it too. Once imported, the real module replaces the stand-in
in ``sys.modules`` and its functions replace the forwarders in
``open3d.visualization``: from then on Open3D is exactly as after a plain import.
Nothing else in ``sys.modules`` is touched, and if Open3D's layout ever changes
(no ``draw_plotly.py`` next to ``visualization/__init__.py``) this is a plain
``import open3d``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import types

VIEWER = "open3d.visualization.draw_plotly"
VISUALIZATION = "open3d.visualization"
VIEWER_FUNCTIONS = ("get_plotly_fig", "draw_plotly", "draw_plotly_server")


class ViewerStandIn(types.ModuleType):
    """Stands in for ``open3d.visualization.draw_plotly`` until something of it is used; then imports it."""

    def __getattr__(self, attribute: str):
        if attribute.startswith("__"):  # dunder probes (copy, pickle, inspect) must not pull in Dash
            raise AttributeError(attribute)
        return getattr(real_viewer(), attribute)


def _viewer_spec() -> importlib.machinery.ModuleSpec | None:
    """Where the real viewer module is, found without importing Open3D."""
    package = importlib.util.find_spec("open3d")
    if package is None or not package.submodule_search_locations:
        return None
    folders = [os.path.join(folder, "visualization") for folder in package.submodule_search_locations]
    return importlib.machinery.PathFinder.find_spec(VIEWER, folders)


def _forwarder(name: str):
    def forward(*args, **kwargs):
        return getattr(real_viewer(), name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    forward.__module__ = VIEWER
    forward.__doc__ = f"``{VISUALIZATION}.{name}``: imports Plotly and Dash on the first call, then calls it."
    return forward


def real_viewer() -> types.ModuleType:
    """The real ``open3d.visualization.draw_plotly``, imported now if only the stand-in is there."""
    current = sys.modules.get(VIEWER)
    if current is not None and not isinstance(current, ViewerStandIn):
        return current
    if current is None:
        return importlib.import_module(VIEWER)
    module = importlib.util.module_from_spec(current.__spec__)
    sys.modules[VIEWER] = module
    try:
        current.__spec__.loader.exec_module(module)
    except BaseException:
        sys.modules[VIEWER] = current
        raise
    package = sys.modules.get(VISUALIZATION)
    for name in VIEWER_FUNCTIONS:  # the package's names, where they are still the stand-in's forwarders
        forwarder = current.__dict__.get(name)
        if package is not None and forwarder is not None and package.__dict__.get(name) is forwarder:
            setattr(package, name, getattr(module, name))
    return module


def import_open3d() -> types.ModuleType:
    """``open3d``, imported without the Plotly/Dash viewer (see module doc); a no-op if already imported."""
    if "open3d" in sys.modules:
        return sys.modules["open3d"]
    spec = None if VIEWER in sys.modules else _viewer_spec()
    if spec is None:
        import open3d

        return open3d
    stand_in = ViewerStandIn(VIEWER)
    stand_in.__spec__ = spec
    stand_in.__file__ = spec.origin
    stand_in.__package__ = VISUALIZATION
    for name in VIEWER_FUNCTIONS:
        setattr(stand_in, name, _forwarder(name))
    sys.modules[VIEWER] = stand_in
    try:
        import open3d
    except BaseException:
        if sys.modules.get(VIEWER) is stand_in:
            del sys.modules[VIEWER]
        raise
    return open3d
