"""Open3D is imported without its Plotly/Dash viewer, and the viewer still works when asked for."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys, types
import numpy as np
from pipeline.geometry.raycast import MeshRaycaster, o3d
for name in ("dash", "plotly", "flask", "IPython"):
    assert name not in sys.modules, name
assert "open3d.visualization" in sys.modules and o3d.t.geometry.RaycastingScene is not None
viewer = sys.modules["open3d.visualization.draw_plotly"]
assert type(viewer).__name__ == "ViewerStandIn"
caster = MeshRaycaster(np.array([[0, 0, 1], [1, 0, 1], [0, 1, 1]], float), np.array([[0, 1, 2]]))
assert caster is not None
# The viewer, once used, is the real module and open3d.visualization holds its real functions.
cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.random.default_rng(0).random((5, 3))))
figure = o3d.visualization.get_plotly_fig([cloud])
assert type(figure).__name__ == "Figure" and "plotly" in sys.modules and "dash" in sys.modules
real = sys.modules["open3d.visualization.draw_plotly"]
assert type(real) is types.ModuleType and real is not viewer
for name in ("get_plotly_fig", "draw_plotly", "draw_plotly_server"):
    assert getattr(o3d.visualization, name) is getattr(real, name), name
assert viewer.get_plotly_fig([cloud]) is not None  # a reference kept to the stand-in keeps working
print("ok")
"""

PLAIN_IMPORT_AFTER = """
import sys
import open3d
from pipeline.geometry.open3d_import import import_open3d
assert import_open3d() is open3d  # already imported: left as it is
assert type(sys.modules["open3d.visualization.draw_plotly"]).__name__ == "module"
print("ok")
"""


def _run(code: str) -> None:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_open3d_is_imported_without_dash_and_plotly_and_the_viewer_loads_on_first_use():
    _run(PROBE)


def test_an_open3d_imported_plainly_before_is_left_alone():
    _run(PLAIN_IMPORT_AFTER)


def test_a_stand_in_answers_any_other_attribute_from_the_real_module_and_ignores_dunder_probes(monkeypatch):
    import importlib.util
    import types

    import pytest

    from pipeline.geometry import open3d_import

    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    stand_in = open3d_import.ViewerStandIn("colorsys")
    stand_in.__spec__ = importlib.util.find_spec("colorsys")
    monkeypatch.setattr(open3d_import, "VIEWER", "colorsys")
    monkeypatch.setitem(sys.modules, "colorsys", stand_in)
    with pytest.raises(AttributeError):
        stand_in.__wrapped__  # copy/inspect probes do not import the real module
    assert sys.modules["colorsys"] is stand_in
    assert stand_in.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)  # answered by the real module
    assert isinstance(sys.modules["colorsys"], types.ModuleType) and sys.modules["colorsys"] is not stand_in
