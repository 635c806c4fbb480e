"""PinpointQA's structured spatial prediction (SSP) scorer (PinpointQA Appendix B.2, SPEC §6).

Strict JSON equality would punish field order and harmless spelling variants,
so the scorer recovers a JSON object from the reply, normalises labels and
relation tokens conservatively, aligns predicted references one-to-one with the
ground-truth slots to maximise credit, and weights the parts
``0.4 surface + 0.2 object + 0.2 relation + 0.2 distance``.

Choices the paper leaves open (documented here so they are stable):
- a ground truth with no reference slots gives full object/relation/distance
  credit to any prediction that carries a well-formed ``references`` list;
- a ground truth without a supporting surface matches a prediction whose
  surface is absent, null, empty or "none".
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import re
from dataclasses import dataclass

WEIGHTS = {"surface": 0.4, "object": 0.2, "relation": 0.2, "distance": 0.2}
RELATIONS: tuple[str, ...] = (
    "on",
    "under",
    "above",
    "below",
    "side_above",
    "side_below",
    "next_to",
    "near",
    "attached_to",
)
_HALF_CREDIT_RELATIONS = {frozenset({"next_to", "near"}), frozenset({"under", "below"}), frozenset({"on", "attached_to"})}
_RELATION_SYNONYMS = {
    "beside": "next_to",
    "adjacent_to": "next_to",
    "adjacent": "next_to",
    "next": "next_to",
    "by": "next_to",
    "close_to": "near",
    "nearby": "near",
    "near_to": "near",
    "on_top_of": "on",
    "on_top": "on",
    "atop": "on",
    "upon": "on",
    "underneath": "under",
    "beneath": "under",
    "attached": "attached_to",
    "sideabove": "side_above",
    "sidebelow": "side_below",
}
_LABEL_SYNONYMS = {
    "mobile phone": "phone",
    "smartphone": "phone",
    "smart phone": "phone",
    "cell phone": "phone",
    "cellphone": "phone",
    "night stand": "nightstand",
    "table top": "table",
    "tabletop": "table",
    "mouse pad": "mousepad",
}
# Words whose final "s" is not a plural marker (or whose singular means something else).
_KEEP_S = {
    "glasses",
    "eyeglasses",
    "scissors",
    "headphones",
    "earphones",
    "earbuds",
    "pants",
    "jeans",
    "shorts",
    "clothes",
    "blinds",
    "stairs",
    "dishes",
    "bus",
    "gas",
    "lens",
    "canvas",
    "status",
    "cactus",
    "chess",
    "glass",
    "grass",
    "dress",
    "press",
}


def _singular(word: str) -> str:
    if word in _KEEP_S or len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def normalize_label(label: object) -> str:
    """Lowercase, '_'/'-' to spaces, quotes and parentheses dropped, spaces collapsed, last word singular, synonyms."""
    if label is None:
        return ""
    text = str(label).lower()
    text = re.sub(r"\([^)]*\)", " ", text)
    text = re.sub(r"[\"'`]", "", text)
    text = re.sub(r"[_\-]", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    if text in ("none", "null", "n/a", "na", "unknown"):
        return ""
    text = _LABEL_SYNONYMS.get(text, text)
    words = text.split(" ")
    if words and words[-1]:
        words[-1] = _singular(words[-1])
    text = " ".join(words)
    return _LABEL_SYNONYMS.get(text, text)


def normalize_relation(relation: object) -> str:
    if relation is None:
        return ""
    text = re.sub(r"[\s\-]+", "_", str(relation).strip().lower()).strip("_")
    return _RELATION_SYNONYMS.get(text, text)


def relation_credit(predicted: str, truth: str) -> float:
    if not predicted or not truth:
        return 0.0
    if predicted == truth:
        return 1.0
    return 0.5 if frozenset({predicted, truth}) in _HALF_CREDIT_RELATIONS else 0.0


def distance_credit(predicted_cm: float | None, truth_cm: float | None) -> float:
    """Tolerance bands that widen with the true distance (full / half credit)."""
    if predicted_cm is None or truth_cm is None:
        return 0.0
    error = round(abs(predicted_cm - truth_cm), 6)  # distances carry one decimal; avoid 10.000000000000002
    if truth_cm <= 10:
        full, half = 5, 10
    elif truth_cm <= 30:
        full, half = 10, 15
    else:
        full, half = 15, 20
    if error <= full:
        return 1.0
    if error <= half:
        return 0.5
    return 0.0


def _distance_cm(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        match = re.search(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)", value)
        if match:
            number = float(match.group(0))
            if re.search(r"\d\s*m(?:eters?|etres?)?\b", value.lower()) and "cm" not in value.lower():
                number *= 100.0
            return number
    return None


def extract_json_object(text: object) -> dict | None:
    """Recover a JSON object: the whole reply, then inside code fences, then the first balanced {...} in prose."""
    if isinstance(text, dict):
        return text
    if text is None:
        return None
    raw = str(text).strip()
    candidates = [raw]
    candidates += [m.group(1) for m in re.finditer(r"```(?:json|JSON)?\s*(.*?)```", raw, re.S)]
    candidates += _balanced_objects(raw)
    for candidate in candidates:
        parsed = _loads(candidate.strip())
        if isinstance(parsed, dict):
            return parsed
    return None


def _loads(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:  # single-quoted Python dicts are common in model output
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def _balanced_objects(text: str) -> list[str]:
    found = []
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        depth, in_string, escape = 0, None, False
        for end in range(start, len(text)):
            ch = text[end]
            if in_string:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == in_string:
                    in_string = None
            elif ch in "\"'":
                in_string = ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    found.append(text[start : end + 1])
                    break
        if len(found) >= 8:
            break
    return found


@dataclass(frozen=True)
class Reference:
    label: str
    relation: str
    distance_cm: float | None


def _references(obj: dict) -> list[Reference] | None:
    refs = obj.get("references")
    if not isinstance(refs, list):
        return None
    out = []
    for ref in refs:
        if not isinstance(ref, dict):
            continue
        label = ref.get("object", ref.get("label", ref.get("name")))
        distance = ref.get("distance_cm", ref.get("distance"))
        out.append(Reference(normalize_label(label), normalize_relation(ref.get("relation")), _distance_cm(distance)))
    return out


def _surface(obj: dict) -> tuple[str, bool]:
    """(normalised surface, whether the field is present at all)."""
    for key in ("support_surface", "primary_surface", "supporting_surface"):
        if key in obj:
            value = obj[key]
            if isinstance(value, dict):
                value = value.get("object", value.get("label"))
            return normalize_label(value), True
    return "", False


@dataclass(frozen=True)
class SspBreakdown:
    score: float
    surface: float
    object: float
    relation: float
    distance: float
    parsed: bool


def _slot_credits(pred: Reference, truth: Reference) -> tuple[float, float, float]:
    if not pred.label or pred.label != truth.label:
        return 0.0, 0.0, 0.0
    rel = relation_credit(pred.relation, truth.relation)
    dist = distance_credit(pred.distance_cm, truth.distance_cm) * rel if rel > 0 else 0.0
    return 1.0, rel, dist


def _best_alignment(preds: list[Reference], truths: list[Reference]) -> tuple[float, float, float]:
    """One-to-one assignment of predictions to truth slots maximising total credit (slots are few)."""
    preds = preds[:8]
    best = (0.0, 0.0, 0.0)
    slots = len(truths)
    padded = preds + [None] * slots
    for chosen in itertools.permutations(range(len(padded)), slots):
        totals = [0.0, 0.0, 0.0]
        for slot, index in enumerate(chosen):
            pred = padded[index]
            if pred is None:
                continue
            for k, credit in enumerate(_slot_credits(pred, truths[slot])):
                totals[k] += credit
        if sum(totals) > sum(best) + 1e-12:
            best = tuple(totals)
    return best


def ssp_breakdown(prediction: object, ground_truth: object) -> SspBreakdown:
    truth = extract_json_object(ground_truth)
    if truth is None:
        raise ValueError(f"SSP ground truth is not a JSON object: {str(ground_truth)[:80]!r}")
    pred = extract_json_object(prediction)
    if pred is None:
        return SspBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, False)
    truth_surface, _ = _surface(truth)
    pred_surface, pred_has_surface = _surface(pred)
    surface = 1.0 if (pred_has_surface or not truth_surface) and pred_surface == truth_surface else 0.0
    truth_refs = _references(truth) or []
    pred_refs = _references(pred)
    if pred_refs is None:
        obj = rel = dist = 0.0
    elif not truth_refs:
        obj = rel = dist = 1.0
    else:
        totals = _best_alignment(pred_refs, truth_refs)
        obj, rel, dist = (t / len(truth_refs) for t in totals)
    score = (
        WEIGHTS["surface"] * surface + WEIGHTS["object"] * obj + WEIGHTS["relation"] * rel + WEIGHTS["distance"] * dist
    )
    return SspBreakdown(round(score, 10), surface, obj, rel, dist, True)


def ssp_score(prediction: object, ground_truth: object) -> float:
    return ssp_breakdown(prediction, ground_truth).score
