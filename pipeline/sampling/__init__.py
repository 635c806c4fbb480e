"""Ground truth for any frame sampler: which all-frame positions a harness takes, and the answers they support."""
