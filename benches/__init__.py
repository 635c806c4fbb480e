"""Benches that drive the layers above ``pipeline``: whole Dagster builds, the dataset-wide assets, the gate, a
deployment. They live here, not in ``pipeline/bench/``, so the domain core imports nothing above it; ``command``
adds their targets to ``pipeline.bench.command.BENCHES`` for ``scan2qa bench``.
"""
