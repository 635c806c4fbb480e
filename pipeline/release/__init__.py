"""Release stage: gated, atomic releases, reviewer verdicts and the reviewer report."""
