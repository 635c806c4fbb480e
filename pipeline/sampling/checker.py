"""Who decides the released tables' rules over a sampled benchmark: handed in from the layer above.

The rules and their decider live in ``expectations`` (``expectations.runner.decide_suites``), above ``pipeline``.
The callers that can pass it do (``rules=``); the command-line paths that reach ``build_sampled`` through other
commands (``eval --sampler``, ``export --sampler``) get the one the ``scan2qa`` entry point installs at start-up.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.errors import ConfigError

RuleChecker = Callable[..., object]  # expectations.runner.decide_suites's signature
_installed: list[RuleChecker] = []


def use_rule_checker(checker: RuleChecker) -> None:
    _installed[:] = [checker]


def rule_checker(given: RuleChecker | None = None) -> RuleChecker:
    if given is not None:
        return given
    if not _installed:
        raise ConfigError("sampled benchmarks are checked with the released tables' rules and no rule checker was "
                          "handed in: run `scan2qa` (python -m scan2qa), or pass expectations.runner.decide_suites")
    return _installed[0]
