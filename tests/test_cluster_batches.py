"""Several scans per run on the loopback deployment: ``SCAN2QA_SCANS_PER_RUN=2`` and one bad scan.

``scan2qa backfill --wait`` adds one asset backfill; the daemon makes one run per range of 2 scans (the per-scan
assets' ``BackfillPolicy``), whose steps go to a Celery worker. The range holding the bad scan fails, naming it;
``rerun_batch_survivors`` reruns its other scan; the command follows the reruns, releases the three good scans
(tables byte-identical to a local ``scan2qa build`` of the same bucket), exits 1 and names the bad scan with its
own error. Run with ``make test-cluster``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.test_cluster import assert_matches_local_build, cluster, deployment_environment, scan2qa  # noqa: F401

pytestmark = pytest.mark.cluster

BROKEN = "synthetic/synth0001_00"


def test_a_backfill_of_scan_ranges_releases_the_good_scans_and_names_the_bad_one(tmp_path, cluster, monkeypatch,
                                                                                  capsys):
    import dagster as dg
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from runs.backfill import BATCH_TAG
    from assets.batch_rerun import RERUN_OF_TAG

    scans = tmp_path / "scans"
    subprocess.run([sys.executable, "-m", "scan2qa", "synth", "--out", str(scans), "--scenes", "4",
                    "--frames", "20", "--seed", "0"], check=True, capture_output=True)
    scene_id = BROKEN.split("/")[1]
    (scans / scene_id / f"{scene_id}_vh_clean_2.ply").write_bytes(b"ply\nformat binary_little_endian 1.0\n")
    cluster.upload(scans, "scans")
    cluster.extra_env["SCAN2QA_SCANS_PER_RUN"] = "2"
    cluster.start_worker("w1")
    cluster.start_daemon()
    env = deployment_environment(cluster, monkeypatch)

    backfill = scan2qa("backfill", "--wait", "--timeout", "1200", env=env)
    printed, _ = backfill.communicate(timeout=1500)
    with capsys.disabled():
        print("\n" + "\n".join(line for line in printed.splitlines() if not line.startswith("  ")))
    assert backfill.returncode == 1, printed
    assert "runs of up to 2 scans each" in printed, printed
    missing = [line for line in printed.splitlines() if line.strip().startswith("missing ")]
    assert len(missing) == 1 and BROKEN in missing[0] and "_vh_clean_2.ply" in missing[0], printed
    assert "release r-" in printed and "has 3 of the 4 scans" in printed, printed

    with dg.DagsterInstance.get() as instance:
        runs = [r for r in instance.get_runs() if r.tags.get(BATCH_TAG) and not r.tags[BATCH_TAG].endswith("-dataset")]
        ranges = sorted((r.tags.get(ASSET_PARTITION_RANGE_START_TAG), r.tags.get(ASSET_PARTITION_RANGE_END_TAG),
                         r.status.value, bool(r.tags.get(RERUN_OF_TAG))) for r in runs)
    # Two runs of two scans; the first failed on the bad scan and its other scan was rerun alone.
    assert ranges == [
        ("synthetic/synth0000_00", "synthetic/synth0000_00", "SUCCESS", True),
        ("synthetic/synth0000_00", "synthetic/synth0001_00", "FAILURE", False),
        ("synthetic/synth0002_00", "synthetic/synth0003_00", "SUCCESS", False),
    ], ranges
    assert_matches_local_build(cluster, tmp_path)
