"""Question generation (ReVSI / VSI-Bench profiles): per-scan candidates, the dataset-wide ``qa`` step, stats.

Entry points: ``generate_candidates`` (one scan and budget), ``finalize_qa``
(exclusions, subsampling, caps and letter balancing over all candidates) and
``generate_from_annotations`` (both, from annotation files without scans).
"""

from pipeline.qa.candidates import generate_candidates
from pipeline.qa.finalize import finalize_qa
from pipeline.qa.from_annotations import generate_from_annotations

__all__ = ["generate_candidates", "finalize_qa", "generate_from_annotations"]
