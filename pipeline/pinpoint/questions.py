"""PinpointQA questions of one scan and budget, from its intermediate representation.

All four tasks read the same two tables (``pinpoint_targets``,
``pinpoint_neighbors``); the budget enters through ``object_visibility``: a
target is asked about only when it is visible in the budget's frames under the
small-object pixel rule, and (``require_visible_references``) references and
NRI options must be visible there too, so that every object a question names
can be seen in its video (SPEC §3).

Rules (paper §3.2 and appendix A.3, details ours):

* ``presence`` (TPV): positives only, here; the negatives are a dataset-wide
  draw (``presence.draw_presence``). A positive is a small-vocabulary label of
  the scene that no other question of the scene names (``presence`` explains
  why): labels the scan's other profiles name are out, labels whose
  localisation questions would cost nothing are reserved, and more, cheapest
  first, up to ``tpv_target_share`` of the candidates; a reserved label gets no
  NRI/FSD/SSP question of its own and is never an NRI option.
* Valid references: neighbours other than the chosen support, not in the
  excluded labels (floor, wall, ...), not sharing the support's or the
  target's label; one instance per label, the one with the shortest distance.
* ``reference_mcq`` (NRI): valid references also excluding objects in contact;
  the answer is the label with the shortest distance; dropped when the
  second-nearest label is within ``nri_tie_margin``. Three distractors are
  distinct labels of other (visible) objects that are provably farther: a
  neighbour's measured distance, or for objects outside the neighbourhood
  the box-to-box distance (a lower bound of the mesh distance), must exceed
  the answer's distance by the tie margin.
* ``free_form_localization`` (FSD): the support as anchor (else the closest
  valid reference), then up to ``max_references`` further references with
  relation and distance rounded to whole centimetres.
* ``structured_localization`` (SSP): JSON with the target, the support (null
  when none) and up to ``max_references`` closest valid references with
  relation and distance in centimetres to one decimal; needs a support or a
  reference.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.pinpoint import templates as T
from pipeline.pinpoint.config import PinpointConfig
from pipeline.geometry.distance import obb_pair_distances
from pipeline.pinpoint.geometry import box_of_row
from pipeline.pinpoint.presence import absent_labels, label_pattern, named_labels, presence_row, shown_texts  # noqa: F401 (absent_labels: its old home)
from pipeline.pinpoint.rows import question_row
from pipeline.seeding import rng, stable_int
from pipeline.vocab import SMALL_OBJECT_LABELS, normalize_label

LETTERS = "ABCDEFGH"


@dataclass(frozen=True)
class Reference:
    object_id: int
    label: str
    distance: float  # shortest distance, metres
    relation: str
    contact: bool


def _pick(templates: dict[str, str], *parts: object) -> str:
    """Wording choice: a hash of what is asked, not the seed, so question texts and ids survive a reseed."""
    names = sorted(templates)
    return names[stable_int("pinpoint-template", *parts) % len(names)]


class ScanLookups:
    """What every budget of one scan looks up the same way: built once per scan, shared by its budgets.

    - each target's neighbour rows, nearest first (``shortest_distance``, then ``neighbor_id``): the rows a
      per-call filter and sort of ``pinpoint_neighbors`` gave, without one polars query per question;
    - per target, the closest instance of every other label by box-to-box distance (NRI distractors outside
      the neighbourhood), in one batched ``obb_pair_distances`` call per target (the same per-pair arithmetic
      as ``box_distance``, so the same floats: ``tests/test_pinpoint_questions.py``).
    """

    def __init__(self, objects: pl.DataFrame, neighbors: pl.DataFrame):
        self.rows = {int(r["object_id"]): r for r in objects.iter_rows(named=True)}
        self.boxes = {oid: box_of_row(r) for oid, r in self.rows.items()}
        self._neighbor_rows: dict[int, list[dict]] = {}
        for r in neighbors.sort(["target_id", "shortest_distance", "neighbor_id"]).iter_rows(named=True):
            self._neighbor_rows.setdefault(int(r["target_id"]), []).append(r)
        self._closest: dict[int, dict[str, tuple[float, int]]] = {}

    def neighbor_rows(self, target_id: int) -> list[dict]:
        """The target's ``pinpoint_neighbors`` rows sorted by (shortest_distance, neighbor_id)."""
        return self._neighbor_rows.get(int(target_id), [])

    def closest_by_label(
        self, target: dict, labels: dict[int, str], structural: set[int], cfg: PinpointConfig
    ) -> dict[str, tuple[float, int]]:
        """label -> (distance, object id) of its closest instance, over objects neither near nor excluded."""
        tid = int(target["object_id"])
        if tid in self._closest:
            return self._closest[tid]
        near_ids = {r["neighbor_id"] for r in self.neighbor_rows(tid)}
        near_labels = {labels[i] for i in near_ids if i in labels}
        excluded = set(cfg.questions.excluded_reference_labels) | {target["label"]} | near_labels
        if target["support_label"] is not None:
            excluded.add(target["support_label"])
        candidates = [
            oid for oid in self.rows
            if not (oid == target["object_id"] or oid in structural or labels[oid] in excluded)
        ]
        tbox = self.boxes[tid]
        distances = obb_pair_distances([tbox] * len(candidates), [self.boxes[oid] for oid in candidates]).tolist()
        closest: dict[str, tuple[float, int]] = {}
        for oid, d in zip(candidates, distances):
            label = labels[oid]
            if label not in closest or d < closest[label][0]:
                closest[label] = (d, oid)
        self._closest[tid] = closest
        return closest


class ScanQuestions:
    """Question rows of one scan for one budget."""

    def __init__(
        self,
        key: str,
        budget: str,
        targets: pl.DataFrame,
        neighbors: pl.DataFrame,
        objects: pl.DataFrame,
        visibility: pl.DataFrame,
        config: PinpointConfig,
        seed: int,
        lookups: ScanLookups | None = None,
    ):
        self.key, self.budget, self.cfg, self.seed = key, budget, config, seed
        self.dataset, self.scene_id = key.split("/", 1)
        self.targets = targets.filter(pl.col("key") == key).sort("object_id")
        self.neighbors = neighbors.filter(pl.col("key") == key)
        self.objects = objects.filter(pl.col("key") == key).sort("object_id")
        vis = visibility.filter((pl.col("key") == key) & (pl.col("budget") == budget) & pl.col("visible"))
        self.visible: set[int] = set(vis["object_id"].to_list())
        self.labels = {int(r["object_id"]): normalize_label(r["raw_label"]) for r in self.objects.iter_rows(named=True)}
        self.structural = {int(r["object_id"]) for r in self.objects.iter_rows(named=True) if r["structural"]}
        self.lookups = lookups if lookups is not None else ScanLookups(self.objects, self.neighbors)
        self.hidden: list = []  # patterns of the labels reserved for presence: never named by these questions

    def hides(self, label: str) -> bool:
        return any(p.search(label) for p in self.hidden)

    # --- shared pieces -------------------------------------------------------------------------------

    def _row(self, qtype: str, template: str, question: str, ground_truth: str, used: list[int], **extra) -> dict:
        return question_row(self.key, self.budget, qtype, template, question, ground_truth, used, **extra)

    def _visible_ok(self, object_id: int) -> bool:
        return not self.cfg.questions.require_visible_references or object_id in self.visible

    def _support_ok(self, support_id: int | None) -> bool:
        """A localisation that names its surface needs that surface seen under the budget (SPEC §3)."""
        return support_id is None or self._visible_ok(support_id)

    def references(self, target: dict, exclude_contact: bool) -> list[Reference]:
        """Valid references of a target, one per label (the closest instance), nearest first."""
        q = self.cfg.questions
        excluded = set(q.excluded_reference_labels) | {target["label"]}
        if target["support_label"] is not None:
            excluded.add(target["support_label"])
        best: dict[str, Reference] = {}
        for r in self.lookups.neighbor_rows(target["object_id"]):
            label = r["neighbor_label"]
            if r["is_support"] or label in excluded or (exclude_contact and r["contact"]):
                continue
            if not self._visible_ok(r["neighbor_id"]) or label in best:
                continue
            best[label] = Reference(r["neighbor_id"], label, r["shortest_distance"], r["relation"], r["contact"])
        return sorted(best.values(), key=lambda ref: (ref.distance, ref.label))

    def _distance_source(self, target: dict) -> str:
        return "mesh" if target["distance_source"] == "mesh" else "obb"

    # --- tasks ---------------------------------------------------------------------------------------

    def reference_mcq(self, target: dict) -> dict | None:
        q = self.cfg.questions
        refs = self.references(target, exclude_contact=True)
        if not refs:
            return None
        answer = refs[0]
        if len(refs) > 1 and refs[1].distance - answer.distance < q.nri_tie_margin:
            return None
        if self.hides(answer.label):
            return None
        floor_d = answer.distance + q.nri_tie_margin
        touching = {r["neighbor_label"] for r in self.lookups.neighbor_rows(target["object_id"]) if r["contact"]}
        pool: dict[str, int] = {r.label: r.object_id for r in refs[1:] if r.distance >= floor_d and r.label not in touching}
        pool.update({k: v for k, v in self._far_distractors(target, floor_d).items() if k not in pool})
        labels = sorted(label for label in pool if not self.hides(label))
        need = q.nri_options - 1
        if len(labels) < need:
            return None
        gen = rng(self.seed, self.key, "nri", target["object_id"])  # same pool, same options in every budget
        distractors = [labels[int(i)] for i in gen.choice(len(labels), size=need, replace=False)]
        options = [answer.label, *distractors]
        order = gen.permutation(len(options))
        options = [options[int(i)] for i in order]
        letter = LETTERS[options.index(answer.label)]
        name = _pick(T.REFERENCE_QUESTIONS, self.key, "nri", target["label"])
        question = T.REFERENCE_QUESTIONS[name].format(target=target["label"])
        used = [target["object_id"], answer.object_id, *[pool[d] for d in distractors]]
        geometry = {
            "target_id": target["object_id"],
            "correct": answer.label,  # the option text; letters are balanced benchmark-wide later
            "answer": {"object_id": answer.object_id, "label": answer.label, "distance": answer.distance},
            "second_distance": refs[1].distance if len(refs) > 1 else None,
            "support_object_id": target["support_object_id"],
        }
        return self._row(
            "reference_mcq", name, question, letter, used,
            options=[f"{LETTERS[i]}. {o}" for i, o in enumerate(options)],
            distance_source=self._distance_source(target), geometry=geometry,
        )

    def _far_distractors(self, target: dict, floor_d: float) -> dict[str, int]:
        """Labels of visible objects outside the neighbourhood whose every instance is provably farther than floor_d."""
        closest = self.lookups.closest_by_label(target, self.labels, self.structural, self.cfg)
        return {label: oid for label, (d, oid) in closest.items() if d >= floor_d and self._visible_ok(oid)}

    def free_form(self, target: dict) -> dict | None:
        q = self.cfg.questions
        refs = self.references(target, exclude_contact=False)
        support_id, support = target["support_object_id"], target["support_label"]
        if not self._support_ok(support_id):
            return None
        sentences, used = [], [target["object_id"]]
        tag = []
        if support is not None:
            name = _pick(T.SURFACE_SENTENCES, self.key, "fsd-surface", target["label"])
            sentences.append(T.SURFACE_SENTENCES[name].format(target=target["label"], surface=support))
            used.append(support_id)
            tag.append(name)
            extra = refs[: q.max_references]
        elif refs:
            anchor = refs[0]
            name = _pick(T.ANCHOR_SENTENCES, self.key, "fsd-anchor", target["label"])
            sentences.append(
                T.ANCHOR_SENTENCES[name].format(
                    target=target["label"], relation=T.RELATION_PHRASES[anchor.relation],
                    reference=anchor.label, distance=_cm(anchor.distance),
                )
            )
            used.append(anchor.object_id)
            tag.append(name)
            extra = refs[1 : 1 + q.max_references]
        else:
            return None
        if extra:
            clauses = [
                T.REFERENCE_CLAUSE.format(relation=T.RELATION_PHRASES[r.relation], reference=r.label, distance=_cm(r.distance))
                for r in extra
            ]
            name = _pick(T.REFERENCE_SENTENCES, self.key, "fsd-refs", target["label"])
            sentences.append(T.REFERENCE_SENTENCES[name].format(refs=" and ".join(clauses)))
            used += [r.object_id for r in extra]
            tag.append(name)
        qname = _pick(T.FREE_FORM_QUESTIONS, self.key, "fsd", target["label"])
        question = T.FREE_FORM_QUESTIONS[qname].format(target=target["label"])
        mentioned = (refs[:1] if support is None else []) + extra
        geometry = {
            "target_id": target["object_id"],
            "support_object_id": support_id,
            "references": [
                {"object_id": r.object_id, "label": r.label, "relation": r.relation, "distance": r.distance}
                for r in mentioned
            ],
        }
        return self._row(
            "free_form_localization", "+".join([qname, *tag]), question, " ".join(sentences), used,
            distance_source=self._distance_source(target), geometry=geometry,
        )

    def structured(self, target: dict) -> dict | None:
        q = self.cfg.questions
        refs = self.references(target, exclude_contact=False)[: q.max_references]
        support_id, support = target["support_object_id"], target["support_label"]
        if (support is None and not refs) or not self._support_ok(support_id):
            return None
        answer = {
            "target": target["label"],
            "support_surface": support,
            "references": [
                {"object": r.label, "relation": r.relation, "distance_cm": round(r.distance * 100.0, 1)} for r in refs
            ],
        }
        name = _pick(T.STRUCTURED_QUESTIONS, self.key, "ssp", target["label"])
        question = T.STRUCTURED_QUESTIONS[name].format(target=target["label"])
        used = [target["object_id"], *([support_id] if support_id is not None else []), *[r.object_id for r in refs]]
        geometry = {
            "target_id": target["object_id"],
            "support_object_id": support_id,
            "references": [{"object_id": r.object_id, "distance": r.distance} for r in refs],
        }
        return self._row(
            "structured_localization", name, question, json.dumps(answer), used,
            distance_source=self._distance_source(target), geometry=geometry,
        )

    def localisation(self) -> list[dict]:
        """NRI, FSD and SSP rows of the visible targets not reserved for presence."""
        rows = []
        for t in self.targets.iter_rows(named=True):
            if t["object_id"] not in self.visible or self.hides(t["label"]):
                continue
            for make in (self.reference_mcq, self.free_form, self.structured):
                row = make(t)
                if row is not None:
                    rows.append(row)
        return rows

    def presence_candidates(self) -> dict[str, list[int]]:
        """Small-vocabulary label -> its objects in the scene (non-structural), every instance."""
        out: dict[str, list[int]] = {}
        for oid, label in sorted(self.labels.items()):
            if label in SMALL_OBJECT_LABELS and oid not in self.structural:
                out.setdefault(label, []).append(oid)
        return out




def _cm(distance_m: float) -> int:
    return int(np.floor(distance_m * 100.0 + 0.5))


def generate_questions(
    key: str,
    targets: pl.DataFrame,
    neighbors: pl.DataFrame,
    objects: pl.DataFrame,
    visibility: pl.DataFrame,
    config: PinpointConfig | None = None,
    seed: int = 0,
    *,
    budgets: tuple[str, ...],
    sibling_texts: list[str] | tuple[str, ...] = (),
) -> pl.DataFrame:
    """``qa_candidates`` rows (profile ``pinpointqa``) of one scan for every budget of the run
    (``frame_budgets(config)``); ``split`` is left null.

    ``sibling_texts``: what the scan's questions of other profiles show a model (``presence.shown_texts``);
    a label they name is never a presence positive. Presence rows are positives only (``draw_presence``)."""
    cfg = config or PinpointConfig()
    lookups = ScanLookups(objects.filter(pl.col("key") == key).sort("object_id"), neighbors.filter(pl.col("key") == key))
    scans = [ScanQuestions(key, b, targets, neighbors, objects, visibility, cfg, seed, lookups=lookups) for b in budgets]
    first = [sq.localisation() for sq in scans]
    reserved = reserve_presence_labels(key, scans, first, sibling_texts, cfg, seed)
    rows: list[dict] = []
    if reserved:
        patterns = [label_pattern(label) for label in sorted(reserved)]
        for sq in scans:
            sq.hidden = patterns
        first = [sq.localisation() for sq in scans]
    for loc in first:
        rows += loc
    # A reserved label a localisation question still names (a "bag" beside a "paper bag" target) is not asked.
    reserved -= named_labels(shown_texts(schemas.from_rows("qa_candidates", rows)), reserved)
    for sq in scans:
        for label, ids in sorted(sq.presence_candidates().items()):
            seen = [i for i in ids if i in sq.visible]
            if label in reserved and seen:
                rows.append(presence_row(key, sq.budget, label, True, seen))
    frame = schemas.from_rows("qa_candidates", rows)
    return frame.sort(["budget", "question_type", "id"])


def reserve_presence_labels(
    key: str, scans: list[ScanQuestions], localisation: list[list[dict]], sibling_texts, cfg: PinpointConfig, seed: int
) -> set[str]:
    """The scene's small-vocabulary labels asked only in presence (see the module doc).

    A candidate is visible in some budget and not named by the scan's other profiles. Its price is the
    localisation questions reserving it removes: its own, and the NRI questions it answers. Free ones are all
    taken; then the cheapest (seeded ties) up to ``tpv_target_share`` of the candidates.
    """
    candidates = {
        label for sq in scans for label, ids in sq.presence_candidates().items() if any(i in sq.visible for i in ids)
    }
    candidates -= named_labels(sibling_texts or (), candidates)
    if not candidates:
        return set()
    price = {label: 0 for label in candidates}
    for sq, rows in zip(scans, localisation):
        for r in rows:
            geo = json.loads(r["geometry"])
            target = sq.labels.get(int(geo["target_id"]))
            if target in price:
                price[target] += 1
            answer = (geo.get("answer") or {}).get("label")
            if answer in price:
                price[answer] += 1
    ranked = sorted(candidates, key=lambda label: (price[label], stable_int("tpv-reserve", seed, key, label), label))
    free = sum(1 for label in candidates if price[label] == 0)
    share = int(np.ceil(cfg.questions.tpv_target_share * len(candidates)))
    return set(ranked[: max(free, share)])
