"""Sampled benchmarks (``pipeline.sampling``): the latest release answered for each configured frame sampler."""

import json
from pathlib import Path

import dagster as dg

from assets.automation import dataset_automation
from assets.catalog import file_asset, path_value
from assets.step_config import step_config
from resources.run_config import RunConfigResource
from resources.storage import StorageResource


@dg.asset(
    deps=["release"],
    group_name="release",
    description="the latest release answered for each frame sampler in config.samplers (sampled/<label>/), "
    "published only when its checks pass",
    automation_condition=dataset_automation(),
    **file_asset(__name__, {"parquet", "mp4"}),
)
def sampled_benchmarks(
    context: dg.AssetExecutionContext, storage: StorageResource, run_config: RunConfigResource
) -> dg.MaterializeResult:
    from expectations.runner import decide_suites
    from pipeline.sampling.publish import publish_sampled

    published = publish_sampled(step_config(context, storage, run_config, __name__), rules=decide_suites)
    for p in published:
        context.log.info(f"sampler {p['sampler']}: {p['questions']} questions written to {p['path']}")
    return dg.MaterializeResult(
        metadata={
            "samplers": dg.MetadataValue.json([p["sampler"] for p in published]),
            "paths": dg.MetadataValue.json({p["label"]: p["path"] for p in published}),
            "dagster/row_count": dg.MetadataValue.int(sum(p["questions"] for p in published)),
        }
    )


@dg.asset_check(asset=sampled_benchmarks, blocking=True, description="each sampled qa table passed the qa suites")
def sampled_benchmarks_expectations(storage: StorageResource, run_config: RunConfigResource) -> dg.AssetCheckResult:
    from pipeline.frames.budgets import frame_budgets
    from pipeline.sampling.spec import parse_sampler

    config = run_config.config(storage)
    verdicts = {}
    for spec in config.samplers:
        meta_path = Path(config.output_root) / "sampled" / parse_sampler(spec, frame_budgets(config)).label / "sampler.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"checks": {"success": False}}
        verdicts[spec] = bool(meta["checks"]["success"])
    return dg.AssetCheckResult(passed=all(verdicts.values()), metadata={"samplers": dg.MetadataValue.json(verdicts),
                                                                        "root": path_value(f"{config.output_root}/sampled")})
