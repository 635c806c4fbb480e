"""The run config as Dagster config: the ``run_config`` resource mirrors ``pipeline.config.Config``, shows in the
launchpad with the deployment's values, and a changed field moves the code versions of the modules that read it."""

import dataclasses

import dagster as dg
import pytest

from assets import catalog
from pipeline.config import Config, load_config
from pipeline.errors import ConfigError
from resources.run_config import LOCATION_FIELDS, RunConfigResource
from resources.storage import StorageResource


def test_resource_fields_mirror_the_config_and_its_defaults():
    config_fields = [f.name for f in dataclasses.fields(Config) if f.name not in LOCATION_FIELDS]
    assert list(RunConfigResource.model_fields) == config_fields
    assert tuple(config_fields) == catalog.RUN_CONFIG_FIELDS
    assert RunConfigResource().config() == Config()
    for name in ("frames", "visibility", "gate", "discovery"):
        nested = type(getattr(Config(), name))
        assert list(RunConfigResource().values()[name]) == [f.name for f in dataclasses.fields(nested)], name


def test_resource_reads_the_deployment_file_and_keeps_the_storage_locations(tmp_path, monkeypatch):
    file = tmp_path / "deploy.yaml"
    file.write_text("visibility:\n  fraction_threshold: 0.1\nframes:\n  budgets: [128, 64, 32, 16]\nseed: 3\n")
    monkeypatch.setenv("SCAN2QA_CONFIG", str(file))
    resource = RunConfigResource.from_env()
    storage = StorageResource(scans_root=str(tmp_path / "scans"), output_root=str(tmp_path / "out"))
    config = resource.config(storage)
    expected = load_config(file, scans_root=str(tmp_path / "scans"), output_root=str(tmp_path / "out"))
    assert config == expected
    assert config.frames.budgets == (128, 64, 32, 16) and config.visibility.fraction_threshold == 0.1


def test_a_launchpad_typo_fails_with_the_config_files_one_line():
    resource = RunConfigResource(visibility={"cast": "fastest"})
    with pytest.raises(ConfigError, match=r"visibility.cast must be one of"):
        resource.config()


def test_launchpad_shows_every_field_with_the_deployments_value():
    from assets.definitions import defs

    schema = defs.resolve_job_def("scan_job").run_config_schema.config_type
    resource = schema.fields["resources"].config_type.fields["run_config"].config_type.fields["config"].config_type
    visibility = resource.fields["visibility"].config_type.fields
    assert visibility["fraction_threshold"].default_value == Config().visibility.fraction_threshold
    assert resource.fields["frames"].config_type.fields["budgets"].default_value == [64, 32, 16]
    assert set(resource.fields) == set(catalog.RUN_CONFIG_FIELDS)


def test_a_changed_field_moves_exactly_the_code_versions_of_the_modules_that_read_it(tmp_path, monkeypatch):
    before = {module: catalog.asset_version(module) for module in catalog.CONFIG_READ}
    file = tmp_path / "deploy.yaml"
    try:
        for section, text in [("visibility", "visibility:\n  fraction_threshold: 0.2\n"),
                              ("gate", "gate:\n  frequency_ceiling: 0.8\n"),
                              ("frames", "frames:\n  budgets: [128, 64, 32, 16]\n")]:
            file.write_text(text)
            monkeypatch.setenv("SCAN2QA_CONFIG", str(file))
            catalog.run_config_digest.cache_clear()
            moved = {m for m in catalog.CONFIG_READ if catalog.asset_version(m) != before[m]}
            assert moved == {m for m, fields in catalog.CONFIG_READ.items() if section in fields}, section
    finally:
        monkeypatch.delenv("SCAN2QA_CONFIG")
        catalog.run_config_digest.cache_clear()
    assert {m: catalog.asset_version(m) for m in catalog.CONFIG_READ} == before


def test_every_step_config_is_recorded_on_its_materialization(tmp_path):
    """A one-asset check of the recording: the digest and the values the step used, launchpad edits included."""
    from assets.step_config import step_config

    @dg.asset
    def reads_visibility(context: dg.AssetExecutionContext, storage: StorageResource, run_config: RunConfigResource):
        step_config(context, storage, run_config, "assets.visibility")

    storage = StorageResource(scans_root=str(tmp_path), output_root=str(tmp_path / "out"))
    result = dg.materialize(
        [reads_visibility], resources={"storage": storage, "run_config": RunConfigResource()},
        run_config={"resources": {"run_config": {"config": {"visibility": {"fraction_threshold": 0.3}}}}},
    )
    [event] = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert metadata["run_config"].value["visibility"]["fraction_threshold"] == 0.3
    assert len(metadata["run_config_digest"].value) == 12
