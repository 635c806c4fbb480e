"""Synthetic floor plans span real rooms' sizes, so no one room-size answer scores well on most scenes (issue 14)."""

from __future__ import annotations

from pipeline.qa.distribution import best_constant_score
from pipeline.seeding import rng as seeded_rng
from pipeline.synth.camera import camera_walk
from pipeline.synth.layout import FURNITURE_PER_M2, MIN_FURNITURE_CAP, _walkable, furnish
from pipeline.synth.rooms import MAX_SCENE_AREA, MIN_SCENE_AREA, MIN_SIDE, build_shell, scene_area
from pipeline.synth.scene import scene_id_for

SCENES = 40


def _area(seed: int, index: int) -> float:
    return scene_area(float(seeded_rng(seed, "synth", "area").random()), index)


def _shells(seed: int = 0):
    # The same per-scene stream and target area `scan2qa synth` draws its layout from.
    return [build_shell(seeded_rng(seed, "synth", scene_id_for(i), "layout"), _area(seed, i)) for i in range(SCENES)]


def test_floor_areas_spread_from_small_rooms_to_large_halls():
    shells = _shells()
    areas = [s.scene_polygon.area for s in shells]
    assert all(MIN_SCENE_AREA - 0.5 <= a <= MAX_SCENE_AREA + 0.5 for a in areas), sorted(areas)
    assert min(areas) < 10.0 and max(areas) > 60.0, sorted(areas)
    # The best constant answer, scored with MRA; 0.59 over 200 scenes with the old 18.8-43.1 m² plans, about 0.3
    # with independent log-uniform draws over 6-90 m²; the even log spread keeps it under ReVSI's 20.9%.
    assert best_constant_score([round(a, 1) for a in areas]) <= 0.209
    for shell in shells:
        for room in shell.rooms:
            for x0, y0, x1, y1 in room.rects:
                assert min(x1 - x0, y1 - y0) >= MIN_SIDE - 1e-9


def test_same_seed_gives_the_same_plans():
    assert [s.scene_polygon.wkt for s in _shells(5)] == [s.scene_polygon.wkt for s in _shells(5)]


def test_smallest_rooms_are_furnished_sparsely_and_stay_walkable():
    shells = sorted(enumerate(_shells()), key=lambda item: item[1].scene_polygon.area)[:3]
    for index, shell in shells:
        rng = seeded_rng(0, "synth", scene_id_for(index), "layout")  # as generate_scene: the shell, then furnishing
        shell = build_shell(rng, _area(0, index))
        layout = furnish(shell, rng)
        furniture = [
            o for o in layout.objects
            if not o.small and not o.structural and o.label not in ("door", "window") and o.support_relation != "on"
        ]  # floor-standing pieces: what the cap limits
        cap = max(MIN_FURNITURE_CAP, round(FURNITURE_PER_M2 * shell.scene_polygon.area))
        assert 1 <= len(furniture) <= cap, (index, shell.scene_polygon.area, len(furniture))
        assert _walkable(shell, layout.free_space)
        walk = camera_walk(layout.free_space, shell.rooms, 20, seeded_rng(0, "synth", scene_id_for(index), "camera"))
        assert len(walk) == 20
