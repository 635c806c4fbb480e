"""Scoring: metrics and baselines (``metrics``), reply parsing (``parsing``), the SSP scorer (``ssp``), the FSD
judge client (``judge``), the evaluator (``evaluate``), reports (``report``) and the ``eval``/``baseline``
commands (``command``, ``baselines``)."""
