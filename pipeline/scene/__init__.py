"""Scene stage: find scans, read them in any dataset layout into a ``ParsedScan``, and write the per-scan tables."""
