"""Correct letters cannot be computed from what a release ships (issue 37, item 1).

Ids ship in every export and the seed in ``manifest.json``. Before the letter key, the correct option sat at
the rank of ``sha256("<seed>\\x1fletter\\x1f<id>")`` within its group (mod the option count) and the
distractors in the order of ``rng(seed, "distractors", id)``: both gave back every letter. Here an attacker
re-runs both formulas on a real build and must land at chance; the key holder re-running them with the key
gets every letter, which also shows the attack itself is sound.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence

import numpy as np
import polars as pl
import pytest

from pipeline.qa.finalize import finalize_qa
from pipeline.qa.from_annotations import candidates_from_annotations
from pipeline.qa.ids import question_id, stable_ints
from pipeline.qa.letter_key import ENV_VAR, LetterKey, default_key_file, load_or_create
from pipeline.qa.permutations import seeded_permutations
from pipeline.qa.profiles import load_profile
from pipeline.storage import parquet_bytes

from .conftest import ROOT

SEED = 0
KEY = LetterKey(bytes(range(32)), "test")
OTHER_KEY = LetterKey(bytes(range(1, 33)), "test")
GROUP = ["profile", "question_type", "budget", "video_kind", "_n"]
Draws = Callable[[str, Sequence[str]], list[int]]  # (purpose, ids) -> 64-bit draws


def published_draws(seed: int) -> Draws:
    """What anyone holding a release computes: the old formula from the seed and ids alone."""
    return lambda purpose, ids: stable_ints(seed, purpose, ids)


def keyed_draws(key: LetterKey, seed: int) -> Draws:
    return lambda purpose, ids: key.ints(seed, purpose, ids)


def _texts(options: list[str]) -> list[str]:
    return [o.split(". ", 1)[1] for o in options]


def recover_by_rank(qa: pl.DataFrame, draws: Draws, letters: str = "ABCDEF") -> pl.Series:
    """Per MCQ row, the letter at its draw's rank within its group modulo the option count."""
    mcq = qa.with_columns(pl.col("options").list.len().alias("_n")).filter(pl.col("_n") > 0)
    unit = [v / 2.0**64 for v in draws("letter", mcq["id"].to_list())]
    ranked = (
        mcq.with_columns(pl.Series("_draw", unit, dtype=pl.Float64))
        .sort([*GROUP, "_draw", "id"], maintain_order=True)
        .with_columns((pl.int_range(pl.len()).over(GROUP) % pl.col("_n")).alias("_target"))
    )
    guessed = [letters[t] for t in ranked["_target"].to_list()]
    return ranked.select("id", "ground_truth", pl.Series("guess", guessed)).sort("id")


def recover_by_distractor_order(qa: pl.DataFrame, candidates: pl.DataFrame, draws: Draws) -> pl.DataFrame:
    """Per MCQ row, the options whose removal leaves the others in the drawn order of the generator's distractors.

    The attacker is given the generator's option order (the candidates, rebuilt from public scans and seed),
    the strongest position: it needs no rank at all. ``consistent`` lists every such letter, ``guess`` is the
    first (none: the first letter). With three options a wrong one is consistent half the time, with four a
    sixth, so the draws' true holder finds the answer always among ``consistent`` and mostly as ``guess``.
    """
    mcq = qa.filter(pl.col("options").list.len() > 0).sort("id")
    generated = dict(zip(candidates["id"].to_list(), candidates["options"].to_list()))
    ids, published = mcq["id"].to_list(), mcq["options"].to_list()
    orders = seeded_permutations(draws("distractors", ids), [len(o) - 1 for o in published])
    consistent = []
    for qid, options, order in zip(ids, published, orders):
        texts, shown = _texts(generated[qid]), _texts(options)
        found = []
        for slot, hypothesis in enumerate(shown):
            distractors = [t for t in texts if t != hypothesis]
            if [distractors[int(i)] for i in order] == shown[:slot] + shown[slot + 1 :]:
                found.append(options[slot].split(". ", 1)[0])
        consistent.append(found)
    guesses = [found[0] if found else options[0].split(". ", 1)[0] for found, options in zip(consistent, published)]
    return mcq.select(
        "id", "ground_truth", pl.Series("guess", guesses), pl.Series("consistent", consistent, dtype=pl.List(pl.String))
    )


def hit_rate(recovered: pl.DataFrame) -> float:
    return float((recovered["guess"] == recovered["ground_truth"]).mean())


def chance(qa: pl.DataFrame) -> float:
    n = qa.filter(pl.col("options").list.len() > 0)["options"].list.len().to_numpy()
    return float(np.mean(1.0 / n))


@pytest.fixture(scope="module")
def build(fixtures_dir):
    """VSI-Bench's ScanNet++ scenes under the vsibench profile: over a thousand multiple-choice questions."""
    path = fixtures_dir / "vsibench" / "scannetpp_meta_info_val.json"
    prof = load_profile("vsibench")
    candidates = candidates_from_annotations(path, prof, SEED)
    qa = finalize_qa(candidates, profile=prof, seed=SEED, letter_key=KEY)
    return candidates, qa


def test_letters_from_ids_and_seed_are_at_chance(build):
    candidates, qa = build
    by_rank = recover_by_rank(qa, published_draws(SEED))
    by_order = recover_by_distractor_order(qa, candidates, published_draws(SEED))
    assert by_rank.height >= 500
    bound = chance(qa) + 0.08  # 0.08 is over 5 binomial standard errors at this size
    assert hit_rate(by_rank) <= bound, (hit_rate(by_rank), chance(qa))
    assert hit_rate(by_order) <= bound, (hit_rate(by_order), chance(qa))


def test_the_key_holder_recovers_every_letter(build):
    candidates, qa = build
    assert hit_rate(recover_by_rank(qa, keyed_draws(KEY, SEED))) == 1.0
    by_order = recover_by_distractor_order(qa, candidates, keyed_draws(KEY, SEED))
    assert by_order.select(pl.col("consistent").list.contains(pl.col("ground_truth")).all()).item()
    assert hit_rate(by_order) > chance(qa) + 0.2


def test_same_key_same_bytes_and_another_key_moves_only_letters(build):
    candidates, qa = build
    again = finalize_qa(candidates.reverse(), profile="vsibench", seed=SEED, letter_key=KEY)
    assert parquet_bytes("qa", again) == parquet_bytes("qa", qa)
    other = finalize_qa(candidates, profile="vsibench", seed=SEED, letter_key=OTHER_KEY)
    assert other["id"].to_list() == qa["id"].to_list()
    fixed = [c for c in qa.columns if c not in ("options", "ground_truth")]
    assert other.select(fixed).equals(qa.select(fixed))
    mcq = pl.col("options").list.len() > 0
    assert other.filter(~mcq).equals(qa.filter(~mcq))
    moved = (other["ground_truth"] != qa["ground_truth"]).sum()
    assert moved > 0.5 * qa.filter(mcq).height
    assert [sorted(_texts(o)) for o in other["options"]] == [sorted(_texts(o)) for o in qa["options"]]


def test_question_id_carries_no_answer(build):
    """The id is recomputed from scan, budget, profile, type, video kind, text and objects: never the options."""
    candidates, qa = build
    for row in qa.head(300).iter_rows(named=True):
        used = row["used_obj_ids"]
        args = (row["key"], row["budget"], row["profile"], row["question_type"], row["video_kind"], row["question"])
        assert question_id(*args, used) == row["id"] == question_id(*args, list(reversed(used)))
    # Candidates carry provisional letters, the release its keyed ones: the same ids either way.
    assert set(qa["id"].to_list()) <= set(candidates["id"].to_list())


def test_pinpoint_question_id_ignores_option_order(monkeypatch):
    """PinpointQA's ids hash (scan, budget, type, text, the sorted set of objects used), so reshuffled options keep it."""
    from pipeline.pinpoint import questions, rows

    seen = []
    monkeypatch.setattr(rows, "question_id", lambda *a: seen.append(a) or "x")
    maker = questions.ScanQuestions.__new__(questions.ScanQuestions)
    maker.key, maker.budget, maker.dataset, maker.scene_id = "scannet/scene0000_00", "all", "scannet", "scene0000_00"
    first = maker._row("reference_mcq", "t", "q?", "A", [3, 1, 2], options=["A. x", "B. y"])
    second = maker._row("reference_mcq", "t", "q?", "B", [2, 3, 1], options=["A. y", "B. x"])
    assert seen[0] == seen[1] and first["id"] == second["id"]


def test_key_file_is_made_once_private_and_env_wins(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    path = tmp_path / "secrets" / "letter_key"
    made = load_or_create(path)
    assert path.stat().st_size == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create(path).secret == made.secret
    assert made.secret.hex() not in repr(made)
    monkeypatch.setenv(ENV_VAR, "ab" * 32)
    assert load_or_create(path).secret == bytes.fromhex("ab" * 32)
    monkeypatch.setenv(ENV_VAR, "not hex")
    with pytest.raises(Exception, match=ENV_VAR):
        load_or_create(path)


def test_generate_writes_its_key_beside_out_and_reproduces_with_it(fixtures_dir, tmp_path):
    """``scan2qa generate`` without the environment key: a key file beside ``--out``, and with it the same bytes."""
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR} | {"PYTHONPATH": str(ROOT)}
    annotations = fixtures_dir / "revsi"

    def generate(out, *extra):
        cmd = [sys.executable, "-m", "scan2qa", "generate", "--annotations", str(annotations), "--out", str(out)]
        done = subprocess.run([*cmd, *extra], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = tmp_path / "a" / "qa.parquet"
    printed = generate(first)
    key_file = default_key_file(first)
    assert key_file == tmp_path / "a" / "qa.letter_key" and key_file.stat().st_size == 32
    assert LetterKey(key_file.read_bytes()).fingerprint in printed and key_file.read_bytes().hex() not in printed
    again = tmp_path / "b" / "qa.parquet"
    generate(again, "--letter-key", str(key_file))
    assert again.read_bytes() == first.read_bytes()


def test_key_file_on_an_object_store_is_made_once(s3_bucket, monkeypatch):
    """An ``s3://`` output root keeps its key there too, through the storage layer."""
    from pipeline.qa.letter_key import build_key, build_key_uri
    from pipeline.storage import upath

    monkeypatch.delenv(ENV_VAR, raising=False)
    root = s3_bucket.uri("out")
    made = build_key(root, s3_bucket.options)
    stored = upath(build_key_uri(root), s3_bucket.options)
    assert stored.read_bytes() == made.secret and len(made.secret) == 32
    assert build_key(root, s3_bucket.options).secret == made.secret
