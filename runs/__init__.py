"""Run management: what drives a Dagster instance from outside the code location (``scan2qa build``'s local runs
and worker pool, ``scan2qa backfill`` and its follower, the demo instance, the Celery worker app).

It sits above ``assets`` (it may import the definitions; ``assets`` never imports it), so the code location
``workspace.yaml`` loads holds definitions only.
"""
