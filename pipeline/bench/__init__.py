"""Benches: throughput of pipeline steps against a baseline measured in the same run (``scan2qa bench``).

Kept out of the product modules: nothing in the pipeline imports a bench.
"""
