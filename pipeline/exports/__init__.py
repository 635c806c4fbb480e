"""Exports of a release in harness layouts: ``revsi`` (lmms-eval, with ``lmms_eval_task`` and ``dataset_card``),
``vsibench``, ``vlmevalkit``, ``pinpointqa``; ``command`` is ``scan2qa export``."""
