"""Egocentric direction: hand-worked angles, bins, forward/backward flips and ReVSI rejections.

Frame of the hand-worked cases: A at the origin, B at (0, 5) so the observer faces +y; a point at
angle θ counter-clockwise from the facing direction is at d·(-sin θ, cos θ) (left = -x).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pipeline.geometry.direction import (
    MODES,
    boundary_distance,
    classify_direction,
    direction_answer,
    facing_angle,
    facing_angles,
)
from pipeline.scene.parsed import OrientedBox

A = np.array([0.0, 0.0, 0.5])
B = np.array([0.0, 5.0, 0.5])


def at_angle(theta_deg: float, d: float = 3.0, z: float = 0.5) -> np.ndarray:
    t = math.radians(theta_deg)
    return np.array([-math.sin(t) * d, math.cos(t) * d, z])


def small_box(center, size: float = 0.3) -> OrientedBox:
    return OrientedBox(np.asarray(center, float), np.array([size, size, size]), np.eye(3))


@pytest.mark.parametrize(
    ("c", "expected"),
    [((-1, 0, 0), 90.0), ((1, 0, 0), 270.0), ((0, -1, 0), 180.0), ((0, 1, 0), 0.0), ((-1, 1, 0), 45.0),
     ((1, 1, 0), 315.0), ((-1, -1, 0), 135.0), ((1, -1, 0), 225.0)],
)
def test_facing_angle_counter_clockwise_is_left(c, expected):
    assert facing_angle(A, B, np.array(c, float), backward=False) == pytest.approx(expected, abs=1e-9)


def test_backward_turns_the_observer_around():
    assert facing_angle(A, B, np.array([-1.0, 0, 0]), backward=True) == pytest.approx(270.0)  # left becomes right
    assert facing_angle(A, B, np.array([0.0, 1.0, 0]), backward=True) == pytest.approx(180.0)  # B is behind
    assert facing_angle(A, B, np.array([0.0, -1.0, 0]), backward=True) == pytest.approx(0.0)
    for theta in (10.0, 80.0, 170.0, 260.0, 350.0):
        fwd = facing_angle(A, B, at_angle(theta), backward=False)
        bwd = facing_angle(A, B, at_angle(theta), backward=True)
        assert (bwd - fwd) % 360.0 == pytest.approx(180.0)


def test_angle_ignores_height_and_is_invariant_under_floor_motion():
    c = np.array([-2.0, 1.0, 2.5])
    ref = facing_angle(A, B, c, backward=False)
    assert facing_angle(A, B, c * [1, 1, 0], backward=False) == pytest.approx(ref)
    yaw = math.radians(57.0)
    rot = np.array([[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]])
    shift = np.array([3.0, -7.0, 0.2])
    moved = [rot @ p + shift for p in (A, B, c)]
    assert facing_angle(*moved, backward=False) == pytest.approx(ref)
    assert facing_angles(A, B, np.stack([c, c]), backward=False) == pytest.approx([ref, ref])


def test_easy_bins_follow_the_spec_half_open_intervals():
    assert classify_direction(0.0, "easy") == "left"
    assert classify_direction(134.999, "easy") == "left"
    assert classify_direction(135.0, "easy") == "back"
    assert classify_direction(224.999, "easy") == "back"
    assert classify_direction(225.0, "easy") == "right"
    assert classify_direction(359.999, "easy") == "right"
    assert classify_direction(360.0, "easy") == "left"
    assert classify_direction(-1e-18, "easy") == "left"


def test_hard_bins_are_quadrants_and_left_right_halves():
    assert [classify_direction(a, "hard") for a in (0, 45, 90, 135, 180, 225, 270, 315)] == [
        "front-left", "front-left", "back-left", "back-left", "back-right", "back-right", "front-right", "front-right",
    ]
    assert [classify_direction(a, "left_right") for a in (1, 179, 180, 359)] == ["left", "left", "right", "right"]
    with pytest.raises(ValueError):
        classify_direction(10.0, "medium")


def test_boundary_distance_wraps_around_zero():
    assert boundary_distance(350.0, "easy") == pytest.approx(10.0)
    assert boundary_distance(100.0, "easy") == pytest.approx(35.0)
    assert boundary_distance(180.0, "easy") == pytest.approx(45.0)
    assert boundary_distance(180.0, "hard") == pytest.approx(0.0)
    assert set(MODES) == {"easy", "hard", "left_right"}


@pytest.mark.parametrize(
    ("theta", "backward", "mode", "expected"),
    [
        (90.0, False, "easy", "left"),
        (270.0, False, "easy", "right"),
        (180.0, False, "easy", "back"),
        (45.0, False, "hard", "front-left"),
        (135.0, False, "hard", "back-left"),
        (225.0, False, "hard", "back-right"),
        (315.0, False, "hard", "front-right"),
        (90.0, True, "easy", "right"),  # C on the left of "facing B" is on the right facing away
        (0.0, True, "easy", "back"),  # B's side is behind when facing away from it
        (45.0, True, "hard", "back-right"),
        (90.0, False, "left_right", "left"),
    ],
)
def test_direction_answer_hand_worked(theta, backward, mode, expected):
    result = direction_answer(small_box(A), small_box(B), small_box(at_angle(theta)), backward, mode)
    assert result is not None
    label, info = result
    assert label == expected
    assert info["corner_outliers"] == 0
    assert info["boundary_margin_deg"] >= 35.0


def test_margin_rejects_near_boundaries_and_is_a_parameter():
    a, b = small_box(A), small_box(B)
    assert direction_answer(a, b, small_box(at_angle(30.0)), False, "easy") is None  # 30° from straight ahead
    assert direction_answer(a, b, small_box(at_angle(135.0)), False, "easy") is None
    assert direction_answer(a, b, small_box(at_angle(90.0)), False, "hard") is None
    assert direction_answer(a, b, small_box(at_angle(30.0)), False, "easy", margin_deg=20.0)[0] == "left"
    assert direction_answer(a, b, small_box(at_angle(100.0)), False, "easy", margin_deg=35.0)[0] == "left"
    assert direction_answer(a, b, small_box(at_angle(101.0)), False, "easy", margin_deg=35.0) is None


def test_large_box_straddling_bins_is_rejected_by_corner_count():
    a, b = small_box(A), small_box(B)
    center = at_angle(60.0, d=2.0)  # (-1.73, 1.0): left, 60° from the nearest boundary
    # 3 m box: one xy corner (two box corners) reaches the back bin -> exactly the allowed 2 outliers.
    ok = direction_answer(a, b, OrientedBox(center, np.array([3.0, 3.0, 1.0]), np.eye(3)), False, "easy")
    assert ok is not None and ok[0] == "left" and ok[1]["corner_outliers"] == 2
    # 4 m box: two xy corners (four box corners) fall in the back and right bins.
    big = OrientedBox(center, np.array([4.0, 4.0, 1.0]), np.eye(3))
    assert direction_answer(a, b, big, False, "easy") is None
    assert direction_answer(a, b, big, False, "easy", max_corner_outliers=4) is not None


def test_undefined_geometry_is_rejected():
    a = small_box(A)
    assert direction_answer(a, small_box(A + [0, 0, 1.0]), small_box(at_angle(90.0)), False, "easy") is None
    assert direction_answer(a, small_box(B), small_box(A), False, "easy") is None
    with pytest.raises(ValueError):
        facing_angle(A, A, B, backward=False)


def test_direction_table_matches_direction_answer_on_every_triple():
    from pipeline.geometry.direction import direction_table

    gen = np.random.default_rng(3)
    boxes = []
    for _ in range(9):
        yaw = gen.uniform(0, 2 * np.pi)
        r = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
        center = np.array([*gen.uniform(-4, 4, 2), 0.5])
        boxes.append(OrientedBox(center, gen.uniform(0.2, 1.5, 3), r[:, gen.permutation(3)]))
    boxes.append(OrientedBox(boxes[0].center.copy(), np.array([0.3, 0.3, 0.3]), np.eye(3)))  # shares A's position
    answered = 0
    for mode, backward, upper in itertools.product(("easy", "hard", "left_right"), (False, True), (False, True)):
        table = direction_table(boxes, backward, mode, margin_deg=20.0, max_corner_outliers=2, upper_margin_only=upper)
        for i, j, k in itertools.product(range(len(boxes)), repeat=3):
            got = table.answer(i, j, k)
            if len({i, j, k}) < 3:
                assert got is None
                continue
            want = direction_answer(boxes[i], boxes[j], boxes[k], backward, mode, 20.0, 2, upper)
            assert (got is None) == (want is None), (mode, backward, upper, i, j, k)
            if want is not None:
                answered += 1
                assert got[0] == want[0]
                assert got[1]["angle_deg"] == pytest.approx(want[1]["angle_deg"], abs=1e-9)
                assert got[1]["boundary_margin_deg"] == pytest.approx(want[1]["boundary_margin_deg"], abs=1e-9)
                assert got[1]["corner_outliers"] == want[1]["corner_outliers"]
    assert answered > 500


def test_vsibench_one_sided_margin_only_guards_the_counter_clockwise_edge():
    a, b = small_box(A), small_box(B)
    # 5° past the front-left/back-left edge (95°): 85° from the upper edge 180° -> kept one-sided.
    assert direction_answer(a, b, small_box(at_angle(95.0)), False, "hard", 10.0) is None
    kept = direction_answer(a, b, small_box(at_angle(95.0)), False, "hard", 10.0, upper_margin_only=True)
    assert kept is not None and kept[0] == "back-left" and kept[1]["boundary_margin_deg"] == pytest.approx(85.0)
    # 5° before the edge (85°): rejected either way.
    assert direction_answer(a, b, small_box(at_angle(85.0)), False, "hard", 10.0, upper_margin_only=True) is None


def test_relative_direction_triples_and_shared_tables():
    """Triples come in ``itertools.permutations`` order; a table is shared only for the same boxes and thresholds."""
    import itertools

    from pipeline.geometry.direction import direction_table
    from pipeline.qa import direction as QD
    from pipeline.scene.parsed import OrientedBox

    for n in range(7):
        expected = np.array(list(itertools.permutations(range(n), 3)), dtype=np.int64).reshape(-1, 3)
        assert np.array_equal(QD.ordered_triples(n), expected)
    gen = np.random.default_rng(2)
    boxes = [OrientedBox(gen.uniform(-3, 3, 3), gen.uniform(0.2, 1, 3), np.eye(3)) for _ in range(6)]
    QD._TABLES.clear()
    shared = QD._shared_direction_table(boxes, False, "hard", 10.0, 2)
    assert QD._shared_direction_table(list(boxes), False, "hard", 10.0, 2) is shared
    fresh = direction_table(boxes, False, "hard", margin_deg=10.0, max_corner_outliers=2)
    assert np.array_equal(shared.label_index, fresh.label_index)
    assert QD._shared_direction_table(boxes, True, "hard", 10.0, 2) is not shared
    assert QD._shared_direction_table(boxes, False, "hard", 12.0, 2) is not shared
    moved = [OrientedBox(boxes[0].center + 1e-9, boxes[0].extent, boxes[0].rotation), *boxes[1:]]
    assert QD._shared_direction_table(moved, False, "hard", 10.0, 2) is not shared
