"""Visibility stage: per-frame object visibility by ray casting and the SPEC section 3 decision per budget."""
