"""``scan2qa bench dataset``: replicas get keys and ids of their own, and the dataset-wide assets build a release."""

from __future__ import annotations

import argparse
import json

import polars as pl
import pytest

from pipeline import schemas
from benches import dataset as dataset_bench
from pipeline.frames.dummy_videos import dummy_video_id, dummy_video_path
from pipeline.qa import generate_candidates
from pipeline.storage import read_table, upath, write_table
from pipeline.frames.video_paths import budget_video_path
from tests.test_qa_generation import BUDGETS, build_scene

SOURCE_SEEDS = (3, 4)
REPLICAS = 6


def _write_source(out, seed: int) -> str:
    """One scan's per-scan tables (and stand-in video files) as the per-scan assets lay them out."""
    key, objects, rooms, visibility, samples, dummy = build_scene(seed)
    # Named by what they show, as pipeline.frames.dummy_videos names them: rows of one kind showing the same frames
    # share one video file (here every query_drop row, every first_frame row, the black row).
    ids = [dummy_video_id(key, k, f) for k, f in zip(dummy["kind"].to_list(), dummy["frame_indices"].to_list())]
    dummy = dummy.with_columns(
        pl.Series("video_id", ids), pl.Series("path", [dummy_video_path(k, i) for k, i in zip(dummy["kind"], ids)])
    )
    candidates = pl.concat([
        generate_candidates(objects, rooms, visibility, samples, dummy, key=key, budget=b, profile=p, config=0)
        for p in ("revsi", "vsibench") for b in BUDGETS
    ])
    dataset, scene = key.split("/")
    scans = schemas.from_rows("scans", [{"key": key, "dataset": dataset, "scene_id": scene, "source_uri": f"/scans/{scene}",
                                         "checksum": "c", "frame_count": 3, "warnings": []}])
    tables = {"scans": scans, "objects": objects, "rooms": rooms, "object_visibility": visibility,
              "frame_samples": samples, "dummy_videos": dummy, "qa_candidates": candidates,
              "pinpoint_qa_candidates": schemas.empty("pinpoint_qa_candidates"), "visibility": schemas.empty("visibility")}
    for name, df in tables.items():
        write_table(upath(out / "tables" / name / f"{key}.parquet"), name, df)
    for path in [budget_video_path(b, key) for b in BUDGETS] + dummy["path"].unique().to_list():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(b"not a video")
    return key


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    args = argparse.Namespace(scans=REPLICAS, source_scans=len(SOURCE_SEEDS), frames=3, seed=0,
                              frequency_ceiling=1.0, work=str(work))
    # Stands for what build_sources leaves behind, so no scan is rendered or ray cast here.
    keys = [_write_source(work / "sources" / "out", seed) for seed in SOURCE_SEEDS]
    request = {"scans": args.source_scans, "frames": args.frames, "seed": args.seed}
    (work / "sources" / dataset_bench.SOURCE_MARK).write_text(json.dumps({"request": request, "keys": keys}))
    return work, keys, dataset_bench.run_dataset_bench(args, isolate=False)


def _replica_table(work, name: str) -> pl.DataFrame:
    paths = sorted((work / "replicas" / "tables" / name).glob("*/*.parquet"))
    return pl.concat([read_table(upath(p), name) for p in paths])


def test_replicas_have_keys_and_ids_of_their_own(bench):
    work, sources, result = bench
    scans = _replica_table(work, "scans")
    assert scans["key"].n_unique() == REPLICAS and not set(scans["key"]) & set(sources)
    assert (scans["key"] == scans["dataset"] + "/" + scans["scene_id"]).all()
    candidates = _replica_table(work, "qa_candidates")
    assert candidates["id"].n_unique() == candidates.height == result["qa_candidates_rows"]
    assert (candidates["key"].str.split("/").list.last() == candidates["scene_id"]).all()
    # Rows sharing a video file in a source share it in each replica, and no two replicas share one.
    dummy = _replica_table(work, "dummy_videos")
    assert dummy.height > dummy["video_id"].n_unique(), "the sources should have dummy rows sharing a video"
    assert dummy.group_by("video_id").agg(pl.col("key").n_unique())["key"].max() == 1
    assert dummy.group_by("key").agg(pl.col("path").n_unique().alias("files"))["files"].min() > 0
    for path in dummy["path"].unique().to_list():
        assert (work / "replicas" / path).exists(), path
    # Dummy questions still point at a real question and a dummy video of their own scan.
    dummies = candidates.filter(pl.col("video_kind") != "real")
    assert dummies.height > 0
    ids_of = {k: set(g["id"]) for (k,), g in candidates.group_by("key")}
    for row in dummies.iter_rows(named=True):
        geometry = json.loads(row["geometry"])
        assert geometry["real_id"] in ids_of[row["key"]]
        assert row["video"] == dummy_video_path(row["video_kind"], geometry["dummy_video_id"])
        assert (work / "replicas" / row["video"]).exists()


def test_dataset_wide_assets_build_a_release_and_report_each_phase(bench):
    work, _, result = bench
    assert result["success"], result["error"]
    assert set(result["phases"]) == {"membership", "qa", "gate", "release"}
    for figures in (*result["phases"].values(), result["run"]):
        assert figures["wall_s"] >= 0 and figures["cpu_s"] >= 0 and figures["peak_rss_mb"] > 0
    assert result["gate_success"] and result["data_docs"]
    assert 0 < result["qa_rows"] == result["release_rows"]["qa"] < result["qa_candidates_rows"]
    released = read_table(upath(work / "replicas" / "releases" / "latest" / "tables" / "qa.parquet"), "qa")
    assert set(released["key"]) <= {f"synthetic/bench{i:05d}_00" for i in range(REPLICAS)}
    assert result["release_videos"] > 0
    # the learned adversary and pruning, a part of the qa phase: its own CPU time, inside the phase's
    adversary = result["qa_adversary"]
    assert adversary["calls"] > 0 and 0 <= adversary["cpu_s"] <= result["phases"]["qa"]["cpu_s"] + 0.1
    assert adversary["peak_rss_mb"] > 0
    assert "dataset bench: 6 scans" in dataset_bench.format_result(result)
    assert "of which adversary + pruning" in dataset_bench.format_result(result)


def test_sources_whose_id_prefixes_collide_are_refused(tmp_path):
    out = tmp_path / "out"
    key = _write_source(out, SOURCE_SEEDS[0])
    path = upath(out / "tables" / "qa_candidates" / f"{key}.parquet")
    table = read_table(path, "qa_candidates")
    write_table(path, "qa_candidates", table.with_columns((pl.lit("0123456789ab") + pl.col("id").str.slice(12)).alias("id")))
    with pytest.raises(RuntimeError, match="first 12 digits"):
        dataset_bench.replicate(out, [key], tmp_path / "replicas", 2)


@pytest.mark.slow
def test_bench_command_builds_real_sources(tmp_path, capsys):
    """The command as README runs it, on real synthetic sources: more scans than one batch of the qa step."""
    from scan2qa import main
    from pipeline.qa.finalize import FILES_PER_BATCH

    scans = FILES_PER_BATCH + 20
    assert main(["bench", "dataset", "--json", "--scans", str(scans), "--source-scans", "2", "--frames", "8",
                 "--work", str(tmp_path)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["success"] and result["scans"] == scans and result["release"] and result["qa_rows"] > 0
    assert result["release_rows"]["scans"] == scans and result["gate_success"]
    assert set(result["phases"]) == {"membership", "qa", "gate", "release"}
    assert all(figures["peak_rss_mb"] > 0 for figures in result["phases"].values())
