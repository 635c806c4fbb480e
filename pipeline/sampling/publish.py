"""Sampled benchmarks beside the latest release: one folder per configured sampler, replaced only when checked.

``config.samplers`` names the samplers; each is answered from ``releases/latest``
into a staging folder, checked with the released tables' own rules, and only
then moved to ``<output_root>/sampled/<label>`` (a failing check leaves the
previous folder in place and raises, naming the failed rules). Local output
roots only.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from pipeline.config import Config
from pipeline.errors import ConfigError
from pipeline.frames.budgets import frame_budgets
from pipeline.sampling.checker import RuleChecker
from pipeline.sampling.command import build_sampled
from pipeline.sampling.spec import parse_sampler


class SampledBlocked(Exception):
    """A sampled benchmark failed its checks; the previous one stays."""


def publish_sampled(config: Config, rules: RuleChecker | None = None) -> list[dict]:
    if not config.samplers:
        return []  # nothing configured: nothing to publish, whatever the output root
    root = Path(config.output_root)
    if "://" in str(config.output_root):
        raise ConfigError(f"{config.output_root}: sampled benchmarks are published on local output roots only")
    release = root / "releases" / "latest"
    published = []
    for spec in config.samplers:
        label = parse_sampler(spec, frame_budgets(config)).label
        final = root / "sampled" / label
        staging = root / "sampled" / f".staging-{label}-{uuid.uuid4().hex[:8]}"
        try:
            bench, meta = build_sampled(release, spec, staging, rules=rules)
            if not meta["checks"]["success"]:
                raise SampledBlocked(f"sampler {spec}: checks failed: {'; '.join(meta['checks']['failed'])}")
            old = final.with_name(f".old-{label}-{uuid.uuid4().hex[:8]}")
            if final.exists():
                final.rename(old)
            staging.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        published.append({**meta, "path": str(final), "release": str(release.resolve()),
                          "questions": bench.qa.height, "all_frame_questions": bench.outcomes.height})
    return published
