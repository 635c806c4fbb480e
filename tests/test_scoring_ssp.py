"""SSP scorer unit cases (PinpointQA Appendix B.2)."""

from __future__ import annotations

import json

import pytest

from pipeline.scoring.ssp import (
    distance_credit,
    extract_json_object,
    normalize_label,
    normalize_relation,
    ssp_breakdown,
    ssp_score,
)

TRUTH = {
    "target": "mobile phone",
    "support_surface": "table",
    "references": [
        {"object": "laptop", "relation": "next_to", "distance_cm": 8.0},
        {"object": "cup", "relation": "under", "distance_cm": 45.0},
    ],
}
GT = json.dumps(TRUTH)


def pred(surface="table", refs=None, key="support_surface", **extra) -> str:
    refs = TRUTH["references"] if refs is None else refs
    return json.dumps({"target": "phone", key: surface, "references": refs, **extra})


def test_exact_match_scores_one():
    assert ssp_score(GT, GT) == 1.0
    assert ssp_score(pred(), GT) == 1.0


def test_synonyms_plurals_and_formatting_normalise():
    assert normalize_label("Mobile_Phone") == "phone"
    assert normalize_label("smartphone") == normalize_label("cell phone") == "phone"
    assert normalize_label("Night-Stand") == "nightstand"
    assert normalize_label("table top") == "table"
    assert normalize_label("Tables (wooden)") == "table"
    assert normalize_label("cups") == "cup" and normalize_label("boxes") == "box"
    assert normalize_label("glasses") == "glasses"
    refs = [
        {"object": "Laptops", "relation": "beside", "distance_cm": "8 cm"},
        {"object": "CUP", "relation": "under", "distance_cm": 45},
    ]
    assert ssp_score(pred(surface="Table_Top", refs=refs), GT) == 1.0
    assert normalize_relation("adjacent to") == "next_to" and normalize_relation("close to") == "near"


def test_primary_surface_is_accepted():
    assert ssp_score(pred(key="primary_surface"), GT) == 1.0


def test_wrong_surface_loses_its_weight():
    assert ssp_score(pred(surface="desk"), GT) == pytest.approx(0.6)


def test_soft_relation_pairs_get_half_credit_and_scale_distance():
    refs = [
        {"object": "laptop", "relation": "near", "distance_cm": 8.0},  # next_to ~ near: half
        {"object": "cup", "relation": "below", "distance_cm": 45.0},  # under ~ below: half
    ]
    b = ssp_breakdown(pred(refs=refs), GT)
    assert (b.object, b.relation, b.distance) == (1.0, 0.5, 0.5)
    assert b.score == pytest.approx(0.4 + 0.2 + 0.1 + 0.1)
    on_attached = json.dumps({"support_surface": "wall", "references": [{"object": "hook", "relation": "on", "distance_cm": 1}]})
    guess = json.dumps(
        {"support_surface": "wall", "references": [{"object": "hook", "relation": "attached_to", "distance_cm": 1}]}
    )
    assert ssp_breakdown(guess, on_attached).relation == 0.5


def test_wrong_relation_gets_no_relation_or_distance_credit():
    refs = [{"object": "laptop", "relation": "above", "distance_cm": 8.0}, TRUTH["references"][1]]
    b = ssp_breakdown(pred(refs=refs), GT)
    assert (b.object, b.relation, b.distance) == (1.0, 0.5, 0.5)


@pytest.mark.parametrize(
    "truth,error,credit",
    [
        (10.0, 5.0, 1.0),
        (10.0, 5.1, 0.5),
        (10.0, 10.0, 0.5),
        (10.0, 10.1, 0.0),
        (30.0, 10.0, 1.0),
        (30.0, 10.1, 0.5),
        (30.0, 15.0, 0.5),
        (30.0, 15.1, 0.0),
        (12.3, 10.0, 1.0),  # 22.3 - 12.3 is 10.000000000000002 in floating point
        (30.1, 15.0, 1.0),
        (30.1, 15.1, 0.5),
        (30.1, 20.0, 0.5),
        (30.1, 20.1, 0.0),
    ],
)
def test_distance_bands_at_their_edges(truth, error, credit):
    assert distance_credit(truth + error, truth) == credit
    if truth - error >= 0:
        assert distance_credit(truth - error, truth) == credit


def test_missing_references_and_unmatched_slots():
    assert ssp_breakdown(json.dumps({"support_surface": "table"}), GT).score == pytest.approx(0.4)
    one = [TRUTH["references"][0]]
    b = ssp_breakdown(pred(refs=one), GT)
    assert (b.object, b.relation, b.distance) == (0.5, 0.5, 0.5)
    swapped = list(reversed(TRUTH["references"]))
    assert ssp_score(pred(refs=swapped), GT) == 1.0  # one-to-one alignment, order does not matter
    duplicate = [TRUTH["references"][0], TRUTH["references"][0]]
    assert ssp_breakdown(pred(refs=duplicate), GT).object == 0.5  # one prediction fills one slot only


def test_json_in_code_fences_and_prose():
    fenced = "Here you go:\n```json\n" + pred() + "\n```\nHope it helps."
    prose = "The structured answer is " + pred() + " as requested."
    assert ssp_score(fenced, GT) == 1.0
    assert ssp_score(prose, GT) == 1.0
    assert extract_json_object("{'support_surface': 'table', 'references': []}") == {
        "support_surface": "table",
        "references": [],
    }


@pytest.mark.parametrize("reply", ["", "the phone is on the table", "{not json", "[1, 2]", None, "```json\n```"])
def test_unparseable_output_scores_zero(reply):
    b = ssp_breakdown(reply, GT)
    assert b.score == 0.0 and not b.parsed


def test_ground_truth_without_references_or_surface():
    truth = json.dumps({"target": "pen", "support_surface": None, "references": []})
    assert ssp_score(json.dumps({"support_surface": "none", "references": []}), truth) == 1.0
    assert ssp_score(json.dumps({"references": []}), truth) == 1.0
    assert ssp_score(json.dumps({"support_surface": "desk", "references": []}), truth) == pytest.approx(0.6)
