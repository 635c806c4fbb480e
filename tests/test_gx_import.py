"""Great Expectations is imported without its unused optional packages, and the process is left as it was."""

from __future__ import annotations

import subprocess
import sys
import types

PROBE = """
import sys
from expectations.gx_import import import_great_expectations
gx = import_great_expectations()
assert gx.__name__ == "great_expectations"
for name in ("altair", "scipy.stats", "sqlalchemy", "boto3", "botocore"):
    assert name not in sys.modules, name  # neither loaded nor left as a stand-in or a hidden entry
import scipy.stats, sqlalchemy  # the rest of the process imports them as usual
assert type(scipy.stats) is type(sys) and hasattr(sqlalchemy, "create_engine")
import gc
assert gc.isenabled() and gc.get_freeze_count() == 0  # the collector as it was
print("ok")
"""


def test_gx_is_imported_without_altair_scipy_stats_sqlalchemy_boto3_and_leaves_sys_modules_clean():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")


def test_a_deferred_module_imports_the_real_one_when_first_used(monkeypatch):
    from expectations.gx_import import DeferredModule

    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    stand_in = DeferredModule("colorsys")
    monkeypatch.setitem(sys.modules, "colorsys", stand_in)
    assert stand_in.rgb_to_hsv(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)  # answered by the real module
    assert isinstance(sys.modules["colorsys"], types.ModuleType) and sys.modules["colorsys"] is not stand_in
