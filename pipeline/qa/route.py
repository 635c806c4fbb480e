"""Route planning: fill in the turns of a walk between objects (ReVSI writes these by hand; we plan them).

Routes come from ``pipeline.geometry.route.find_routes`` over every object of
the scan, so that objects the budget never shows still block a leg and a
category with two instances is never "unique"; routes that name an object the
budget does not show are dropped (SPEC §3). Scans without a room polygon (e.g.
VSI-Bench meta-info, which only has the area) skip the room test. Options are
the true turn sequence and distinct other sequences of the same length; with
``require_option_count`` a route with fewer sequences than ``option_count``
(one turn: three) is dropped, so every question has all its options (ReVSI
asks with four: profile revsi plans routes with two or three turns).
"""

from __future__ import annotations

import itertools

from pipeline.geometry.route import find_routes
from pipeline.qa.context import BudgetContext
from pipeline.qa.ground_truth import Question
from pipeline.qa.rules import TaskRule
from pipeline.qa.templates import render
from pipeline.seeding import rng

TURNS = ("left", "right", "back")


def _r(x: float) -> float:
    return round(float(x), 4)


def _actions(names: list[str], turn_count: int, p: dict) -> str:
    steps, n = [], 1
    for i, name in enumerate(names):
        steps.append(p["step_forward"].format(n=n, obj=name))
        n += 1
        if i < turn_count:
            steps.append(p["step_turn"].format(n=n))
            n += 1
    return " ".join(steps) + p["ending"]


def route_planning(ctx: BudgetContext, rule: TaskRule) -> list[Question]:
    p = rule.params
    wanted = int(p.get("routes_per_scene", 10))
    visible_ids = {inst.object_id for inst in ctx.instances}
    if len(visible_ids) < 3:
        return []
    boxes = {inst.object_id: inst.box for inst in ctx.all_instances}
    labels = {inst.object_id: inst.category for inst in ctx.all_instances}
    room = ctx.rooms.get("scene")
    polygon = room.polygon if room is not None else None
    turn_counts = tuple(range(int(p.get("min_turns", 1)), int(p.get("max_turns", 3)) + 1))
    gen = rng(ctx.seed, "route_planning", ctx.key, ctx.budget, rule.question_type)
    routes = find_routes(
        boxes,
        labels,
        polygon,
        gen,
        max_routes=4 * wanted,
        n_waypoints=turn_counts,
        turn_margin_deg=float(p.get("turn_margin_deg", 20.0)),
        walk_half_width_m=float(p.get("walk_half_width_m", 0.2)),
        min_leg_m=float(p.get("min_leg_m", 1.0)),
    )
    words = p["turn_words"]
    n_options = int(p.get("option_count", 4))
    full_options = bool(p.get("require_option_count", False))
    questions = []
    for route in routes:
        if not set(route.used_obj_ids) <= visible_ids or _excluded(rule, labels, route.used_obj_ids):
            continue
        visit = [labels[i] for i in (*route.waypoint_ids, route.goal_id)]
        truth = list(route.turns)
        others = [list(s) for s in itertools.product(TURNS, repeat=len(truth)) if list(s) != truth]
        if full_options and len(others) < n_options - 1:
            continue  # a one-turn route has only three answers; the benchmark asks with four options
        opt_rng = rng(ctx.seed, "route_options", ctx.key, ctx.budget, *route.used_obj_ids)
        picks = sorted(int(i) for i in opt_rng.choice(len(others), size=min(n_options - 1, len(others)), replace=False))
        option_texts = [", ".join(words[t] for t in seq) for seq in [truth] + [others[i] for i in picks]]
        geometry = route.to_dict()
        geometry = {
            **geometry,
            "initial_angle_deg": _r(geometry["initial_angle_deg"]),
            "turn_angles_deg": [_r(a) for a in geometry["turn_angles_deg"]],
            "legs": [
                {k: ([_r(v) for v in x] if isinstance(x, list) else _r(x)) for k, x in leg.items()}
                for leg in geometry["legs"]
            ],
            "names": [labels[route.start_id], labels[route.facing_id], *visit],
            "room_test": polygon is not None,
        }
        questions.append(
            Question(
                question_type=rule.question_type,
                template_id=rule.template_id,
                question=render(
                    rule.template,
                    A=labels[route.start_id],
                    B=labels[route.facing_id],
                    C=labels[route.goal_id],
                    actions=_actions(visit, len(truth), p),
                ),
                used_obj_ids=list(dict.fromkeys(route.used_obj_ids)),  # the facing object may be the first stop
                geometry=geometry,
                answer_text=option_texts[0],
                options=option_texts,
            )
        )
        if len(questions) >= wanted:
            break
    return questions


def _excluded(rule: TaskRule, labels: dict[int, str], ids) -> bool:
    return any(rule.excludes(labels[i]) for i in ids)
