"""The FSD judge as a Dagster resource.

A thin wrapper over ``pipeline.scoring.judge`` so that scoring assets get the
endpoint from run configuration or the deployment's environment
(``SCAN2QA_JUDGE_URL``, ``SCAN2QA_JUDGE_MODEL``, ``SCAN2QA_JUDGE_KEY``).
Without an endpoint ``get_judge()`` returns None and FSD is reported as not
scored, never as zero.
"""

from __future__ import annotations

import dagster as dg

from pipeline.scoring.judge import FsdJudge, JudgeSettings


class JudgeResource(dg.ConfigurableResource):
    """OpenAI-compatible chat endpoint for the FSD judge; empty fields fall back to the environment."""

    url: str = ""
    model: str = ""
    key: str = ""
    timeout: float = 60.0
    max_retries: int = 5
    cache_path: str = ""  # JSON-lines judgment cache; empty = no persistent cache

    def settings(self) -> JudgeSettings:
        return JudgeSettings.from_env(
            url=self.url or None,
            model=self.model or None,
            key=self.key or None,
            timeout=self.timeout,
            max_retries=self.max_retries,
            cache_path=self.cache_path or None,
        )

    def get_judge(self) -> FsdJudge | None:
        settings = self.settings()
        return FsdJudge(settings) if settings.configured else None
