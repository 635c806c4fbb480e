"""PinpointQA: small-object spatial representation and the four localisation tasks.

Public interface (rules in ``docs/pinpointqa_method.md``):

* ``representation.build_representation(key, objects, scan=None, config=None)``
  -> (``pinpoint_targets``, ``pinpoint_neighbors``) of one scan;
* ``questions.generate_questions(key, targets, neighbors, objects, object_visibility, config=None, seed=0,
  *, budgets)`` -> ``qa_candidates``-schema rows with ``profile="pinpointqa"`` (``budgets``: the run's;
  presence: positives only);
* ``presence.draw_presence_per_split(candidates, scene_labels, seed, config=None)`` -> the candidates with the
  dataset-wide presence negatives drawn, and the scene splits they were drawn within;
* ``presence_blind.blind_figures(qa)`` -> how well blind priors answer presence;
* ``splits.with_splits(qa, config=None, previous=None)`` -> the table with ``split`` filled by scene;
* ``config.PinpointConfig`` / ``config.load_pinpoint_config(path)`` -> every threshold.
"""
