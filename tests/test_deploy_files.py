"""Deployment files: deploy/Dockerfile (and its deploy/requirements.lock), deploy/helm/values.yaml and
deploy/k8s/celery-workers.yaml.

The Dockerfile is parsed by Docker's own Go parser (the ``dockerfile`` package), the YAML files by
``yaml.safe_load``; every fact the files state about the project is checked against the project:
the Makefile's Debian packages, pyproject's code location and dependencies (the lock pins a version
each specifier allows), the env vars the code reads (storage in resources/storage.py, the Celery and
executor settings in assets/), deploy/dagster.yaml's run queue, run monitoring, run retries and
retention, and the official Helm chart's values schema (an allow-list below, with its source).
No Docker engine runs here: the image itself is never built by these tests.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import json
import re
import shlex
import struct
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

try:
    import dockerfile
except ImportError as exc:  # a missing parser must fail the suite, never skip it
    raise ImportError(
        "tests/test_deploy_files.py parses deploy/Dockerfile with the `dockerfile` package "
        "(Docker's official parser); it belongs to the `test` extra: pip install -e '.[test]'"
    ) from exc

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
LOCK = ROOT / "deploy" / "requirements.lock"
DOCKERIGNORE = ROOT / ".dockerignore"
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
WORKERS = ROOT / "deploy" / "k8s" / "celery-workers.yaml"
MAKEFILE = ROOT / "Makefile"
PYPROJECT = ROOT / "pyproject.toml"
STORAGE = ROOT / "resources" / "storage.py"
CELERY = ROOT / "assets" / "celery.py"
DAGSTER_YAML = ROOT / "deploy" / "dagster.yaml"
CODE_DIRS = [ROOT / "assets", ROOT / "runs", ROOT / "resources", ROOT / "pipeline"]

BASE_IMAGE = "python:3.11-slim-bookworm"

# Shared libraries Open3D's wheel links without shipping them, and the Debian bookworm package of
# each. deploy/Dockerfile installs these on top of the Makefile's `system-deps`: developer and CI
# machines happen to have them, python:3.11-slim does not. Every Debian image has BASE_PACKAGES.
SONAME_PACKAGES = {
    "libusb-1.0.so.0": "libusb-1.0-0",
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libX11.so.6": "libx11-6",
    "libudev.so.1": "libudev1",
    "libidn2.so.0": "libidn2-0",
    "libgomp.so.1": "libgomp1",
    "libstdc++.so.6": "libstdc++6",
    "libgcc_s.so.1": "libgcc-s1",
    "libm.so.6": "libc6",
    "libc.so.6": "libc6",
    "libpthread.so.0": "libc6",
    "libdl.so.2": "libc6",
    "librt.so.1": "libc6",
    "ld-linux-x86-64.so.2": "libc6",
    "ld-linux-aarch64.so.1": "libc6",
}
BASE_PACKAGES = {"libc6", "libstdc++6", "libgcc-s1"}

# Keys deploy/helm/values.yaml may set: Dagster's official chart dagster/dagster, version 1.13
# (chart versions follow Dagster's; this project pins dagster>=1.13,<1.14). Taken from
# dagster-io/dagster helm/dagster/values.schema.json (commit bdb8547f) and the pydantic models it
# is generated from, helm/dagster/schema/schema/charts/dagster/values.py (0f2d9d8e),
# subschema/run_launcher.py (0f2d9d8e), subschema/redis.py (0f2d9d8e), subschema/postgresql.py
# (00701070), subschema/daemon.py (00701070) and
# charts/dagster_user_deployments/subschema/user_deployments.py (00701070). "[]" marks a list item.
# Added for run healing and logs (issue 24): subschema/compute_log_manager.py (36f72b17),
# subschema/retention.py (bbc1853b), the RunRetries model of subschema/daemon.py (maxRetries,
# retryOnAssetOrOpFailure) and, since runMonitoring is a free-form map in that model, the keys
# templates/configmap-instance.yaml (835892b4) renders from it.
_DEPLOYMENT = "dagster-user-deployments.deployments[]"
_K8S_LAUNCHER = "runLauncher.config.k8sRunLauncher"
_QUEUED = "dagsterDaemon.runCoordinator.config.queuedRunCoordinator"
_S3_LOGS = "computeLogManager.config.s3ComputeLogManager"
CHART_KEYS = {
    # DagsterHelmValues / Global
    "global.dagsterHome",
    "global.postgresqlSecretName",
    "global.serviceAccountName",
    "global.celeryConfigSecretName",
    "generatePostgresqlPasswordSecret",
    "generateCeleryConfigSecret",
    "telemetry.enabled",
    # PostgreSQL
    "postgresql.enabled",
    "postgresql.postgresqlHost",
    "postgresql.postgresqlUsername",
    "postgresql.postgresqlPassword",
    "postgresql.postgresqlDatabase",
    "postgresql.postgresqlScheme",
    "postgresql.service.port",
    # RunLauncher (type and the K8sRunLauncherConfig fields)
    "runLauncher.type",
    f"{_K8S_LAUNCHER}.jobNamespace",
    f"{_K8S_LAUNCHER}.imagePullPolicy",
    f"{_K8S_LAUNCHER}.envSecrets[].name",
    f"{_K8S_LAUNCHER}.envConfigMaps[].name",
    f"{_K8S_LAUNCHER}.envVars[]",
    f"{_K8S_LAUNCHER}.failPodOnRunFailure",
    # ComputeLogManager (type and the S3ComputeLogManager fields)
    "computeLogManager.type",
    f"{_S3_LOGS}.bucket",
    f"{_S3_LOGS}.localDir",
    f"{_S3_LOGS}.prefix",
    f"{_S3_LOGS}.useSsl",
    f"{_S3_LOGS}.verify",
    f"{_S3_LOGS}.verifyCertPath",
    f"{_S3_LOGS}.endpointUrl",
    f"{_S3_LOGS}.skipEmptyFiles",
    f"{_S3_LOGS}.uploadInterval",
    f"{_S3_LOGS}.showUrlOnly",
    f"{_S3_LOGS}.region",
    # Daemon.runMonitoring (as the instance template renders it) and Daemon.runRetries (RunRetries)
    "dagsterDaemon.runMonitoring.enabled",
    "dagsterDaemon.runMonitoring.startTimeoutSeconds",
    "dagsterDaemon.runMonitoring.cancelTimeoutSeconds",
    "dagsterDaemon.runMonitoring.maxResumeRunAttempts",
    "dagsterDaemon.runMonitoring.pollIntervalSeconds",
    "dagsterDaemon.runMonitoring.freeSlotsAfterRunEndSeconds",
    "dagsterDaemon.runRetries.enabled",
    "dagsterDaemon.runRetries.maxRetries",
    "dagsterDaemon.runRetries.retryOnAssetOrOpFailure",
    # Retention (TickRetention: a number of days, or one per tick status)
    "retention.enabled",
    "retention.schedule.purgeAfterDays",
    "retention.sensor.purgeAfterDays",
    *(f"retention.{kind}.purgeAfterDays.{status}" for kind in ("schedule", "sensor")
      for status in ("skipped", "success", "failure", "started")),
    # RabbitMQ / Redis (the chart's Celery broker, unused with K8sRunLauncher)
    "rabbitmq.enabled",
    "redis.enabled",
    "redis.internal",
    # Daemon.runCoordinator (RunCoordinator, QueuedRunCoordinatorConfig)
    "dagsterDaemon.runCoordinator.enabled",
    "dagsterDaemon.runCoordinator.type",
    f"{_QUEUED}.maxConcurrentRuns",
    f"{_QUEUED}.dequeueIntervalSeconds",
    f"{_QUEUED}.tagConcurrencyLimits[].key",
    f"{_QUEUED}.tagConcurrencyLimits[].value",
    f"{_QUEUED}.tagConcurrencyLimits[].limit",
    # UserDeployments / UserDeployment
    "dagster-user-deployments.enabled",
    "dagster-user-deployments.enableSubchart",
    f"{_DEPLOYMENT}.name",
    f"{_DEPLOYMENT}.image.repository",
    f"{_DEPLOYMENT}.image.tag",
    f"{_DEPLOYMENT}.image.pullPolicy",
    f"{_DEPLOYMENT}.dagsterApiGrpcArgs[]",
    f"{_DEPLOYMENT}.port",
    f"{_DEPLOYMENT}.includeConfigInLaunchedRuns.enabled",
    f"{_DEPLOYMENT}.envSecrets[].name",
    f"{_DEPLOYMENT}.envConfigMaps[].name",
}
# Keys whose contents are free-form in the schema: a map of names or a Kubernetes object.
CHART_OPAQUE = {
    "postgresql.postgresqlParams",
    f"{_K8S_LAUNCHER}.resources",
    f"{_DEPLOYMENT}.env",
    f"{_DEPLOYMENT}.resources",
    f"{_DEPLOYMENT}.nodeSelector",
    f"{_DEPLOYMENT}.labels",
    f"{_DEPLOYMENT}.annotations",
    f"{_DEPLOYMENT}.podSecurityContext",
    f"{_DEPLOYMENT}.securityContext",
    f"{_DEPLOYMENT}.volumes",
    f"{_DEPLOYMENT}.volumeMounts",
}
RUN_LAUNCHER_TYPES = {"CeleryK8sRunLauncher", "K8sRunLauncher", "CustomRunLauncher"}
COMPUTE_LOG_MANAGER_TYPES = {"NoOpComputeLogManager", "AzureBlobComputeLogManager", "GCSComputeLogManager",
                             "S3ComputeLogManager", "CustomComputeLogManager"}
TICK_STATUSES = {"skipped", "success", "failure", "started"}
RUN_COORDINATOR_TYPES = {"QueuedRunCoordinator", "CustomRunCoordinator"}
PULL_POLICIES = {"Always", "IfNotPresent", "Never"}
POSTGRES_PASSWORD_KEY = "postgresql-password"  # the key the chart's templates read from the Secret


# ---------------------------------------------------------------------------------------------
# Readers


def commands() -> list[Any]:
    return list(dockerfile.parse_file(str(DOCKERFILE)))


def final_stage() -> list[Any]:
    cmds = commands()
    last_from = max(i for i, c in enumerate(cmds) if c.cmd == "FROM")
    return cmds[last_from:]


def only(cmds: list[Any], name: str) -> list[Any]:
    return [c for c in cmds if c.cmd == name]


def apt_installed(shell: str) -> set[str]:
    """Package names given to every `apt-get install` in a shell command line."""
    packages: set[str] = set()
    for match in re.finditer(r"apt-get\s+install\b([^;&|]*)", shell):
        packages |= {t for t in shlex.split(match.group(1)) if not t.startswith("-")}
    return packages


def makefile_recipe(target: str) -> str:
    lines = MAKEFILE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{re.escape(target)}\s*:", line))
    body = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        body.append(line.strip().removesuffix("\\"))
    return " ".join(body)


def pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text())


def lock_pins() -> dict[str, str]:
    """{normalised name: version} of deploy/requirements.lock."""
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        assert match, f"deploy/requirements.lock: {line!r} is not a name==version pin"
        pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def stage_index(name: str) -> list[Any]:
    """The commands of the build stage ``FROM ... AS name``."""
    cmds = commands()
    starts = [i for i, c in enumerate(cmds) if c.cmd == "FROM"] + [len(cmds)]
    for begin, end in zip(starts, starts[1:]):
        value = [v.lower() for v in cmds[begin].value]
        if "as" in value and value[value.index("as") + 1] == name:
            return cmds[begin:end]
    raise AssertionError(f"deploy/Dockerfile has no stage named {name}")


def instance_yaml() -> dict[str, Any]:
    return yaml.safe_load(DAGSTER_YAML.read_text())


def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def the_deployment() -> dict[str, Any]:
    deployments = values()["dagster-user-deployments"]["deployments"]
    assert len(deployments) == 1, "one code location: scan2qa"
    return deployments[0]


def worker_container() -> dict[str, Any]:
    manifest = yaml.safe_load(WORKERS.read_text())
    assert manifest["kind"] == "Deployment"
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    return container


def leaf_paths(node: Any, path: str = "") -> list[str]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in leaf_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(node, list):
        return [p for item in node for p in leaf_paths(item, f"{path}[]")] or [f"{path}[]"]
    return [path]


def storage_env_names() -> set[str]:
    """String names resources/storage.py passes to os.environ.get / os.getenv."""
    names = set()
    for node in ast.walk(ast.parse(STORAGE.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = ast.unparse(node.func)
            if func in {"os.environ.get", "os.getenv"}:
                names.add(node.args[0].value)
    return names


def code_env_names() -> set[str]:
    """Every SCAN2QA_* string literal in the code location's sources (env var names it reads)."""
    names = set()
    for directory in CODE_DIRS:
        for path in directory.rglob("*.py"):
            text = path.read_text()
            if "SCAN2QA_" not in text:
                continue
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if re.fullmatch(r"SCAN2QA_[A-Z0-9_]+", node.value):
                        names.add(node.value)
    return names


def module_constant(path: Path, name: str) -> Any:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path.relative_to(ROOT)} has no module-level {name}")


def requirement_names(requirements: list[str]) -> dict[str, set[str]]:
    """{normalised name: extras} for PEP 508 requirement strings."""
    out = {}
    for req in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", req)
        assert match, req
        name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
        out[name] = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
    return out


def elf_needed(path: Path) -> list[str]:
    """DT_NEEDED entries of a little-endian ELF64 shared object (read from its section headers)."""
    with open(path, "rb") as fh:
        ident = fh.read(64)
        assert ident[:4] == b"\x7fELF" and ident[4] == 2 and ident[5] == 1, f"{path}: not ELF64 LE"
        shoff, = struct.unpack_from("<Q", ident, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", ident, 0x3A)
        fh.seek(shoff)
        table = fh.read(shentsize * shnum)
        sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
        dynamic = next(s for s in sections if s[1] == 6)  # SHT_DYNAMIC
        strtab = sections[dynamic[6]]  # sh_link -> .dynstr
        fh.seek(dynamic[4])
        entries = fh.read(dynamic[5])
        fh.seek(strtab[4])
        strings = fh.read(strtab[5])
    needed = []
    for offset in range(0, len(entries), 16):
        tag, val = struct.unpack_from("<qQ", entries, offset)
        if tag == 0:
            break
        if tag == 1:  # DT_NEEDED
            needed.append(strings[val : strings.index(b"\0", val)].decode())
    return needed


def dockerignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(relative: str, patterns: list[str]) -> bool:
    parts = Path(relative).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        if any(fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(Path(p).name, bare) for p in prefixes):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# deploy/Dockerfile


def test_dockerfile_parses_and_builds_on_the_bookworm_python_base_in_two_stages():
    froms = only(commands(), "FROM")
    assert [f.value[0] for f in froms] == [BASE_IMAGE, BASE_IMAGE], "a dependencies stage and the final image"
    assert len(stage_index("dependencies")) > 1


def test_dependencies_stage_installs_the_lock_and_nothing_else_from_the_context():
    stage = stage_index("dependencies")
    sources = [source for copy in only(stage, "COPY") for source in copy.value[:-1]]
    assert sources == ["deploy/requirements.lock"], f"only the lock may invalidate the dependency layer: {sources}"
    installs = [segment for run in only(stage, "RUN") for segment in re.split(r"&&|;", run.value[0])
                if "pip install" in segment]
    lock_installs = [shlex.split(s) for s in installs if "-r" in shlex.split(s)]
    assert len(lock_installs) == 1, installs
    argv = lock_installs[0]
    assert argv[argv.index("-r") + 1] == only(stage, "COPY")[0].value[-1]
    assert "--no-cache-dir" in argv and "--only-binary" in argv, "no pip cache, no compiler in the image"
    assert not apt_installed(" ".join(r.value[0] for r in only(stage, "RUN"))), "no build tools are installed"


def test_final_stage_takes_the_venv_then_copies_the_code_then_installs_only_the_project():
    stage = final_stage()
    copies = only(stage, "COPY")
    venv = [c for c in copies if any(f.startswith("--from=dependencies") for f in c.flags)]
    assert venv and venv[0].value[-1] == "/opt/venv", "the final stage copies the locked venv"
    first_code_copy = next(i for i, c in enumerate(stage) if c.cmd == "COPY" and not c.flags)
    assert stage.index(venv[0]) < first_code_copy, "dependencies before the code: a code change keeps their layer"
    env = {}
    for command in only(stage, "ENV"):
        env.update(zip(command.value[::2], command.value[1::2]))
    assert env["PATH"].startswith("/opt/venv/bin:"), "the venv's python and dagster come first"
    pip_steps = [shlex.split(segment) for run in only(stage, "RUN")
                 for segment in re.split(r"&&|;", run.value[0]) if "pip install" in segment]
    assert len(pip_steps) == 1, pip_steps
    argv = pip_steps[0]
    assert {"--no-deps", "--no-build-isolation", "--no-cache-dir"} <= set(argv) and argv[-1] == ".", argv
    install = next(i for i, c in enumerate(stage) if c.cmd == "RUN" and "pip install" in c.value[0])
    assert install > first_code_copy


def test_lock_pins_every_requirement_of_the_project_and_its_deploy_extra_as_pyproject_allows():
    from packaging.requirements import Requirement

    pins = lock_pins()
    project = pyproject()
    wanted = [*project["project"]["dependencies"], *project["project"]["optional-dependencies"]["deploy"],
              *project["build-system"]["requires"]]
    for text in wanted:
        requirement = Requirement(text)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pins, f"deploy/requirements.lock lacks {name}: run python -m deploy.lock_requirements"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"deploy/requirements.lock pins {name}=={pins[name]}, pyproject wants {requirement.specifier}")
    for extra in ("test", "browser"):
        only_there = {re.sub(r"[-_.]+", "-", Requirement(r).name).lower()
                      for r in project["project"]["optional-dependencies"][extra]}
        assert not only_there & set(pins) - {"pyyaml"}, f"the image does not need the {extra} extra"


def test_lock_matches_the_venv_the_tests_run_in_for_what_both_have():
    import importlib.metadata

    pins = lock_pins()
    for name in ("dagster", "dagster-postgres", "dagster-celery", "polars", "open3d-cpu", "great-expectations"):
        assert pins[name] == importlib.metadata.version(name), (
            f"{name}: the image would run {pins[name]}, the tests ran {importlib.metadata.version(name)}; "
            "run python -m deploy.lock_requirements")


def test_debian_packages_are_the_makefiles_plus_open3ds_unbundled_libraries():
    make_packages = apt_installed(makefile_recipe("system-deps"))
    assert "libusb-1.0-0" in make_packages, "the Makefile's system-deps recipe was not found or changed shape"
    image_packages = set().union(*(apt_installed(run.value[0]) for run in only(final_stage(), "RUN")))
    assert make_packages <= image_packages, f"image lacks the Makefile's {sorted(make_packages - image_packages)}"
    extra = image_packages - make_packages
    assert extra <= set(SONAME_PACKAGES.values()), f"packages with no reason in SONAME_PACKAGES: {sorted(extra)}"


def test_every_library_open3d_links_is_shipped_or_installed_in_the_image():
    spec = importlib.util.find_spec("open3d")  # located, not imported
    assert spec and spec.submodule_search_locations, "open3d (open3d-cpu) is a project dependency"
    package = Path(next(iter(spec.submodule_search_locations)))
    libraries = sorted(package.glob("libOpen3D.so*")) + sorted(package.glob("pybind*.so"))
    assert libraries, f"no Open3D shared objects under {package}"
    bundled = {p.name for p in package.iterdir()}
    image_packages = set().union(*(apt_installed(run.value[0]) for run in only(final_stage(), "RUN")))
    for library in libraries:
        for soname in elf_needed(library):
            if soname in bundled:
                continue
            assert soname in SONAME_PACKAGES, f"{library.name} needs {soname}: add its Debian package"
            package_name = SONAME_PACKAGES[soname]
            assert package_name in image_packages | BASE_PACKAGES, (
                f"{library.name} needs {soname} from {package_name}, which deploy/Dockerfile does not install"
            )


def test_copied_paths_exist_are_in_the_build_context_and_cover_pip_install():
    patterns = dockerignore_patterns()
    copied = set()
    for copy in only(commands(), "COPY") + only(commands(), "ADD"):
        assert copy.cmd == "COPY", "ADD fetches and unpacks; COPY only copies"
        if any(f.startswith("--from") for f in copy.flags):
            continue
        for source in copy.value[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: no such path in the repository"
            assert not ignored(source, patterns), f"COPY {source}: excluded by .dockerignore"
            copied.add(source.rstrip("/"))
    project = pyproject()
    needed = {"pyproject.toml", project["project"]["readme"]}
    needed |= {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert needed <= copied, f"`pip install .` needs {sorted(needed - copied)} in the image"


def test_image_runs_as_a_numeric_non_root_user():
    users = only(final_stage(), "USER")
    assert users, "no USER: the image would run as root"
    user = users[-1].value[0].split(":")[0]
    # numeric, so that Kubernetes' runAsNonRoot (deploy/k8s/celery-workers.yaml) can verify it
    assert user.isdigit() and int(user) != 0, f"USER {user}"
    last_user = max(i for i, c in enumerate(final_stage()) if c.cmd == "USER")
    assert all(c.cmd != "RUN" for c in final_stage()[last_user:]), "RUN after USER would need root"


def test_cmd_serves_the_code_location_over_grpc_without_an_entrypoint():
    stage = final_stage()
    assert not only(stage, "ENTRYPOINT"), "the chart passes the whole command as args; an ENTRYPOINT would prefix it"
    (cmd,) = only(stage, "CMD")
    assert cmd.json, "exec form, so signals reach the server"
    argv = list(cmd.value)
    assert argv[:3] == ["dagster", "api", "grpc"]
    assert argv[argv.index("-m") + 1] == pyproject()["tool"]["dagster"]["module_name"]
    assert argv[argv.index("-h") + 1] == "0.0.0.0"
    port = argv[argv.index("-p") + 1]
    exposed = [p for e in only(stage, "EXPOSE") for p in e.value]
    assert port in exposed
    assert int(port) == the_deployment()["port"]


def test_dagster_home_is_where_the_chart_mounts_dagster_yaml():
    env = {}
    for command in only(final_stage(), "ENV"):
        env.update(zip(command.value[::2], command.value[1::2]))
    assert env["DAGSTER_HOME"] == values()["global"]["dagsterHome"]


# ---------------------------------------------------------------------------------------------
# deploy/helm/values.yaml


def test_values_set_only_keys_of_the_official_chart():
    unknown = [
        path
        for path in leaf_paths(values())
        if path not in CHART_KEYS and not any(path == o or path.startswith((o + ".", o + "[]")) for o in CHART_OPAQUE)
    ]
    assert not unknown, f"not in the chart's values schema: {unknown}"


def test_values_choose_k8s_run_launcher_queued_runs_and_external_postgres():
    v = values()
    assert v["runLauncher"]["type"] in RUN_LAUNCHER_TYPES
    assert v["runLauncher"]["type"] == "K8sRunLauncher", "one pod per run, as Dagster documents Kubernetes"
    assert "celeryK8sRunLauncher" not in v["runLauncher"].get("config", {})
    assert v["rabbitmq"]["enabled"] is False and v["redis"]["enabled"] is False
    coordinator = v["dagsterDaemon"]["runCoordinator"]
    assert coordinator["enabled"] is True and coordinator["type"] in RUN_COORDINATOR_TYPES
    limit = coordinator["config"]["queuedRunCoordinator"]["maxConcurrentRuns"]
    assert isinstance(limit, int) and limit > 0
    postgres = v["postgresql"]
    assert postgres["enabled"] is False and postgres["postgresqlHost"], "an external database needs its host"
    assert v["generatePostgresqlPasswordSecret"] is False and v["global"]["postgresqlSecretName"]
    assert isinstance(postgres["service"]["port"], int)


def test_user_deployment_is_the_code_location_of_pyproject():
    deployment = the_deployment()
    dagster_tool = pyproject()["tool"]["dagster"]
    assert deployment["name"] == dagster_tool["code_location_name"]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", dagster_tool["module_name"]], "pyproject [tool.dagster]"
    assert deployment["image"]["repository"] and str(deployment["image"]["tag"])
    assert deployment["image"]["pullPolicy"] in PULL_POLICIES
    assert deployment["includeConfigInLaunchedRuns"]["enabled"] is True, "run pods need the same env"
    assert [s["name"] for s in deployment["envSecrets"]]


def test_env_vars_are_the_ones_the_code_location_reads():
    storage = storage_env_names()
    assert {"SCAN2QA_SCANS", "SCAN2QA_OUT", "SCAN2QA_STORAGE_OPTIONS"} <= storage
    env = the_deployment()["env"]
    assert {"SCAN2QA_SCANS", "SCAN2QA_OUT"} <= set(env)
    unread = set(env) - storage - code_env_names()
    assert not unread, f"no code reads {sorted(unread)}"
    assert all(isinstance(value, str) for value in env.values()), "the chart's env map takes strings"
    assert isinstance(json.loads(env["SCAN2QA_STORAGE_OPTIONS"]), dict)
    assert env["SCAN2QA_EXECUTOR"] == "in_process", "on Kubernetes a run's steps run in its own pod"
    # The broker URL may carry a password: it comes from the Secret, never from plain env.
    assert module_constant(CELERY, "BROKER_VARIABLE") not in env


def test_run_queue_is_deploy_dagster_yamls():
    queued = values()["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    instance = yaml.safe_load(DAGSTER_YAML.read_text())
    assert instance["run_coordinator"]["class"] == values()["dagsterDaemon"]["runCoordinator"]["type"]
    limits = instance["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert queued["tagConcurrencyLimits"] == limits, f"deploy/dagster.yaml limits runs by {limits}"
    postgres = instance["storage"]["postgres"]["postgres_db"]
    assert values()["postgresql"]["postgresqlScheme"] == postgres["scheme"]


def test_values_heal_runs_as_deploy_dagster_yaml_does():
    daemon = values()["dagsterDaemon"]
    instance = instance_yaml()
    monitoring, retries = daemon["runMonitoring"], daemon["runRetries"]
    assert monitoring["enabled"] is True and instance["run_monitoring"]["enabled"] is True
    assert monitoring["maxResumeRunAttempts"] == instance["run_monitoring"]["max_resume_run_attempts"] == 0, (
        "a lost run is retried as a new run, not resumed")
    assert monitoring["pollIntervalSeconds"] == instance["run_monitoring"]["poll_interval_seconds"]
    assert monitoring["cancelTimeoutSeconds"] == instance["run_monitoring"]["cancel_timeout_seconds"]
    assert monitoring["startTimeoutSeconds"] >= instance["run_monitoring"]["start_timeout_seconds"], (
        "a pod may wait for a node and an image pull")
    assert retries == {"enabled": True, "maxRetries": instance["run_retries"]["max_retries"],
                       "retryOnAssetOrOpFailure": instance["run_retries"]["retry_on_asset_or_op_failure"]}
    assert retries["retryOnAssetOrOpFailure"] is False, "a step that raised (bad input) is not retried"


def test_values_retention_is_deploy_dagster_yamls():
    retention = values()["retention"]
    assert retention["enabled"] is True
    instance = instance_yaml()["retention"]
    for kind in ("schedule", "sensor"):
        days = retention[kind]["purgeAfterDays"]
        assert days == instance[kind]["purge_after_days"], kind
        if isinstance(days, dict):
            assert set(days) == TICK_STATUSES, f"the chart's {kind} retention needs all four tick statuses"


def test_values_send_step_logs_to_s3_through_dagster_aws():
    logs = values()["computeLogManager"]
    assert logs["type"] in COMPUTE_LOG_MANAGER_TYPES and logs["type"] == "S3ComputeLogManager"
    assert logs["config"]["s3ComputeLogManager"]["bucket"]
    deploy = requirement_names(pyproject()["project"]["optional-dependencies"]["deploy"])
    assert "dagster-aws" in deploy and "dagster-aws" in lock_pins(), "the chart's S3ComputeLogManager is dagster-aws's"


def test_run_pods_get_resources_and_the_secret_and_threads_match_the_cpu_request():
    launcher = values()["runLauncher"]["config"]["k8sRunLauncher"]
    assert [s["name"] for s in launcher["envSecrets"]] == [s["name"] for s in the_deployment()["envSecrets"]]
    cpu = launcher["resources"]["requests"]["cpu"]
    assert the_deployment()["env"]["SCAN2QA_THREADS"] == str(cpu), "a run uses its pod's cores"


def test_proposed_per_job_k8s_config_is_what_k8s_run_launcher_reads():
    from assets.k8s_run_config import K8S_CONFIG_TAG, dataset_k8s_tags, scan_k8s_tags

    # The fields of dagster-k8s 0.29.27's UserDefinedDagsterK8sConfig (dagster_k8s/job.py), read from its wheel.
    allowed = {"container_config", "pod_spec_config", "pod_template_spec_metadata", "job_spec_config",
               "job_metadata", "merge_behavior"}
    for tags in (scan_k8s_tags(), dataset_k8s_tags()):
        config = tags[K8S_CONFIG_TAG]
        assert set(config) <= allowed
        json.dumps(config)
        container = config["container_config"]
        threads = {e["name"]: e["value"] for e in container["env"]}["SCAN2QA_THREADS"]
        assert threads == container["resources"]["requests"]["cpu"]


# ---------------------------------------------------------------------------------------------
# deploy/k8s/celery-workers.yaml


def test_workers_run_the_code_location_image_with_its_settings_and_secrets():
    v = values()
    deployment = the_deployment()
    container = worker_container()
    image = f"{deployment['image']['repository']}:{deployment['image']['tag']}"
    assert container["image"] == image, f"workers run {container['image']}, the code location {image}"
    env = {e["name"]: e for e in container["env"]}
    password = env.pop("DAGSTER_PG_PASSWORD")["valueFrom"]["secretKeyRef"]
    assert password == {"name": v["global"]["postgresqlSecretName"], "key": POSTGRES_PASSWORD_KEY}
    threads = env["SCAN2QA_THREADS"]["value"]
    assert {name: e["value"] for name, e in env.items()} == deployment["env"]
    assert [e["secretRef"]["name"] for e in container["envFrom"]] == [s["name"] for s in deployment["envSecrets"]]
    argv = container["command"]
    assert argv[argv.index("--concurrency") + 1] == "1"
    assert threads == str(container["resources"]["requests"]["cpu"]), "one step per pod uses the pod's cores"


def test_workers_start_the_code_locations_celery_app():
    argv = worker_container()["command"]
    assert argv[:2] == ["celery", "-A"] and argv[3] == "worker"
    module = ROOT / (argv[2].replace(".", "/") + ".py")
    assert module.is_file(), f"{argv[2]}: no such module in the repository"
    tree = ast.parse(module.read_text())
    assigned = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if hasattr(t, "id")}
    assert {"app", "execute_plan"} <= assigned, "the worker app registers dagster-celery's execute_plan task"


# ---------------------------------------------------------------------------------------------
# pyproject: what the image and this test install


def test_deploy_extra_has_what_the_chart_configuration_needs():
    extras = pyproject()["project"].get("optional-dependencies", {})
    assert "deploy" in extras, "pyproject.toml needs the `deploy` extra deploy/Dockerfile installs"
    # The image installs ".[deploy]": the main dependencies (dagster-postgres, dagster-celery, which the code
    # location imports) and the extra (dagster-k8s, which only run pods on Kubernetes need).
    deploy = {**requirement_names(pyproject()["project"]["dependencies"]), **requirement_names(extras["deploy"])}
    assert {"dagster-postgres", "dagster-k8s", "dagster-celery", "dagster-aws"} <= set(deploy)
    assert "redis" in deploy["dagster-celery"], "the broker is Redis: dagster-celery[redis]"


def test_test_extra_installs_the_dockerfile_parser():
    test_extra = requirement_names(pyproject()["project"]["optional-dependencies"]["test"])
    assert "dockerfile" in test_extra, "CI must install the parser this file imports"


@pytest.mark.parametrize("path", [DOCKERFILE, VALUES, WORKERS, DOCKERIGNORE])
def test_deploy_files_exist(path):
    assert path.is_file()
