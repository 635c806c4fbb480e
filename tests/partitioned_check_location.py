"""A one-asset code location for ``tests/test_catalog_graphql.py``: a per-scan asset whose check, declared with
``assets.table_checks.check_spec(per_scan=True)`` as the scene and PinpointQA steps declare theirs, is evaluated
inside the step and fails for one partition only."""

import dagster as dg

from assets.partitions import scan_partitions
from assets.table_checks import check_name, check_spec

FAILING = "synthetic/synth0001_00"


@dg.asset(partitions_def=scan_partitions, check_specs=[check_spec("scans", per_scan=True)])
def scans(context: dg.AssetExecutionContext):
    yield dg.Output(context.partition_key)
    yield dg.AssetCheckResult(check_name=check_name("scans"), passed=context.partition_key != FAILING)


defs = dg.Definitions(assets=[scans])
