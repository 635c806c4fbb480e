"""Generator families: the name a profile's ``family`` key gives -> the function that writes that family's questions.

The one list of families: ``pipeline.qa.profiles`` checks a profile's names against it and
``pipeline.qa.candidates`` calls through it, so a new generator is one module and one line here.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.qa import appearance, counting, direction, distances, route, sizes
from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question
from pipeline.qa.rules import TaskRule

FAMILIES: dict[str, Callable[[BudgetContext, TaskRule], list[Question]]] = {
    "counting_single": counting.counting_single,
    "counting_multiple": counting.counting_multiple,
    "object_size": sizes.object_size,
    "room_size": sizes.room_size,
    "abs_distance": distances.abs_distance,
    "rel_distance": distances.rel_distance,
    "rel_direction": direction.rel_direction,
    "route_planning": route.route_planning,
    "appearance_order": appearance.appearance_order,
}
