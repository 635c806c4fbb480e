"""Import Great Expectations without the parts of it the gate never runs.

``import great_expectations`` loads the whole library: every expectation, every
data source, and with them optional packages the gate does not use — Altair
(charts of the KL-divergence expectation), ``scipy.stats`` (that expectation and
the KS-test metrics), SQLAlchemy (SQL data sources) and boto3/botocore (S3 data
sources). The gate hands GX pandas frames and runs column and uniqueness
expectations, none of which touch them, yet they were 40-50% of the import
(measured: 5.5-6.5 CPU-s -> 3.1-3.4 CPU-s on the 2-core build machine).

So, for the duration of the import only and only for modules this process has
not already imported:

- ``altair`` and ``scipy.stats`` are *deferred*: GX binds a stand-in module that
  imports the real one the first time GX reads an attribute from it, so if a
  GX code path ever needs them, it gets them (at the old price, then);
- ``sqlalchemy``, ``boto3`` and ``botocore`` are *hidden*: GX imports them in
  ``try/except ImportError`` blocks (``great_expectations.compatibility``) and
  then behaves as on an installation without its ``sql``/``s3`` extras.

Afterwards ``sys.modules`` is as it was for everyone else: a later ``import
scipy.stats`` or ``import sqlalchemy`` elsewhere in the process loads the real
module as usual.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types

from expectations.gc_freeze import collector_paused

DEFERRED = ("altair", "scipy.stats")
HIDDEN = ("sqlalchemy", "boto3", "botocore")


class DeferredModule(types.ModuleType):
    """Stands in for a module until an attribute is read from it; then imports it and answers from it."""

    def __getattr__(self, attribute: str):
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        return getattr(importlib.import_module(name), attribute)


def _defer(name: str) -> DeferredModule | None:
    if name in sys.modules:
        return None
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    stand_in = DeferredModule(name)
    stand_in.__spec__ = spec
    sys.modules[name] = stand_in
    return stand_in


def import_great_expectations():
    """``great_expectations``, imported without the optional packages the gate does not use (see module doc)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    if "great_expectations" in sys.modules:
        return sys.modules["great_expectations"]
    stand_ins = [m for m in (_defer(name) for name in DEFERRED) if m is not None]
    hidden = [name for name in HIDDEN if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # ``import name`` raises ImportError while this is set
    try:
        with collector_paused():  # ~250k long-lived objects: a collection during the import frees nothing
            import great_expectations as gx
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
        for stand_in in stand_ins:
            if sys.modules.get(stand_in.__name__) is stand_in:
                del sys.modules[stand_in.__name__]
    return gx
