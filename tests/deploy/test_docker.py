"""docker-compose.yml and docker/, checked statically (tests/docker/ builds and runs them for real).

* the compose file parses and has the expected services, one per node of conf/testbed.toml;
* every service runs the one image of docker/Dockerfile (only debian:bookworm is pulled), on an
  internal network with no published port; every role it names is one of the entry point's;
* every file it or the Dockerfile references exists; no absolute host paths;
* docker/rendered/ is up to date (``make docker-configs``) and equals what the *testbed's*
  renderer produces for the same cluster, except the documented container differences.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

from slurm_fair.config import load as load_config  # noqa: E402
from slurm_fair.testbed.docker import DOCKER_FILES, render_docker  # noqa: E402
from slurm_fair.testbed import config as tbconfig  # noqa: E402
from slurm_fair.testbed.layout import Layout  # noqa: E402
from slurm_fair.testbed.render import render_all  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "docker" / "Dockerfile"
RENDERED = REPO / "docker" / "rendered"
TESTBED = tbconfig.load(REPO / "conf" / "testbed.toml")

#: keys whose values may differ between the docker cluster and the native testbed (documented
#: in docs/deployment.md, "The docker-compose cluster"): hosts, ports, users, paths, munge socket
SLURM_CONF_DIFFS = {
    "SlurmctldHost", "SlurmctldPort", "SlurmUser", "AuthInfo", "AccountingStoragePass",
    "StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile",
    "SlurmdLogFile", "AccountingStorageHost", "AccountingStoragePort", "JobSubmitPlugins",
}
SLURMDBD_CONF_DIFFS = {"AuthInfo", "DbdHost", "DbdAddr", "DbdPort", "SlurmUser", "PidFile", "LogFile",
                       "StorageHost", "StoragePort", "StoragePass"}
NODE_TOKENS = ("NodeHostname=", "NodeAddr=", "Port=")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def testbed_files(tmp_path_factory) -> dict[str, str]:
    """What the native testbed's renderer writes for conf/testbed.toml."""
    return render_all(TESTBED, Layout(tmp_path_factory.mktemp("tb")))


def test_services(compose):
    services = compose["services"]
    nodes = {n.name for n in TESTBED.nodes}
    assert {"munge-key", "mariadb", "slurmdbd", "slurmctld", "controller"} | nodes == set(services)
    for name in nodes:
        assert services[name]["hostname"] == name
        assert services[name]["command"] == ["slurmd"]
    assert services["controller"]["command"] == ["controller"]
    assert services["slurmctld"]["hostname"] == "slurmctld"  # SlurmctldHost of the rendered slurm.conf
    assert services["slurmdbd"]["depends_on"]["mariadb"]["condition"] == "service_healthy"


def test_one_image_internal_network_no_ports(compose):
    """Only debian:bookworm comes from a registry (the offline test imports it); nothing published."""
    for name, svc in compose["services"].items():
        assert svc["image"] == "slurm-fair-cluster:latest", name
        assert svc["build"] == {"context": ".", "dockerfile": "docker/Dockerfile"}, name
        assert "ports" not in svc and "network_mode" not in svc, name
    assert compose["networks"]["default"]["internal"] is True
    assert re.findall(r"^FROM (\S+)", DOCKERFILE.read_text(), re.M) == ["debian:bookworm"]
    maria = compose["services"]["mariadb"]
    assert maria["command"] == ["mariadb"] and "mariadb-admin" in maria["healthcheck"]["test"]


def test_every_role_is_in_the_entrypoint(compose):
    entry = (REPO / "docker" / "entrypoint.sh").read_text()
    roles = set(re.findall(r"^  ([a-z-]+)\)$", entry, re.M))
    for name, svc in compose["services"].items():
        assert svc["command"][0] in roles, f"{name}: role {svc['command'][0]} not in docker/entrypoint.sh"


def test_offline_build_inputs():
    """The Dockerfile's packages include MariaDB's; docker/wheels/ exists, is in the context, not in git."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    packages = re.search(r'^ARG PACKAGES="([^"]*)"', text, re.M).group(1).split()
    assert {"mariadb-server", "slurm-wlm", "slurmdbd", "munge", "python3-venv"} <= set(packages)
    assert "COPY docker/wheels " in text and "--no-index" in text
    assert (REPO / "docker" / "wheels").is_dir()
    assert "docker/wheels/*.whl" in (REPO / ".gitignore").read_text().splitlines()


def test_munge_key_and_plan_volumes_shared(compose):
    services = compose["services"]
    for name, svc in services.items():
        if name != "mariadb":
            assert "munge-key:/etc/munge-shared" in svc["volumes"], name
    state_dir = load_config(REPO / "docker" / "slurm-fair.toml")["controller"]["state_dir"]
    assert f"fair-state:{state_dir}" in services["controller"]["volumes"]
    assert f"fair-state:{state_dir}:ro" in services["slurmctld"]["volumes"]
    lua = (RENDERED / "job_submit.lua").read_text()
    assert f'local PLAN_FILE = "{state_dir}/plan.json"' in lua


def _host_paths(compose) -> list[str]:
    paths = []
    for svc in compose["services"].values():
        for v in svc.get("volumes", []):
            src = v.split(":")[0] if isinstance(v, str) else v.get("source", "")
            if src.startswith((".", "/", "~")):
                paths.append(src)
        for env_file in ([svc["env_file"]] if isinstance(svc.get("env_file"), str) else svc.get("env_file", [])):
            paths.append(env_file)
    return paths


def test_every_referenced_file_exists(compose):
    named = set(compose.get("volumes", {}))
    for name, svc in compose["services"].items():
        for v in svc.get("volumes", []):
            src = v.split(":")[0]
            assert src in named or (REPO / src).exists(), f"{name}: volume source {src}"
        if "build" in svc:
            ctx = REPO / svc["build"]["context"]
            assert ctx.is_dir()
            assert (ctx / svc["build"]["dockerfile"]).is_file()
        else:
            assert "image" in svc
    for path in _host_paths(compose):
        assert (REPO / path).exists(), path


def _copy_sources() -> list[str]:
    sources = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY "):
            words = [w for w in shlex.split(line)[1:] if not w.startswith("--")]
            sources += words[:-1]
    return sources


def test_dockerfile_copy_sources_exist_and_are_not_ignored():
    sources = _copy_sources()
    assert "docker/rendered/slurm.conf" in sources and "docker/entrypoint.sh" in sources
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    allowed = {ln[1:] for ln in ignore if ln.startswith("!")}
    for src in sources:
        assert (REPO / src).exists(), src
        assert src.split("/")[0] in allowed, f"{src} is excluded by .dockerignore"
    assert DOCKERFILE.read_text().startswith(("#", "FROM")) and "FROM debian:bookworm" in DOCKERFILE.read_text()


def test_no_absolute_machine_paths(compose):
    assert not [p for p in _host_paths(compose) if p.startswith(("/", "~"))]
    for f in [COMPOSE, DOCKERFILE, REPO / "docker" / "entrypoint.sh", *RENDERED.iterdir()]:
        text = f.read_text()
        assert not re.search(r"/(home|work|root|tmp)/", text), f


def test_entrypoint_is_valid_bash():
    proc = subprocess.run(["bash", "-n", str(REPO / "docker" / "entrypoint.sh")], capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


def test_rendered_configs_up_to_date():
    """docker/rendered/ is exactly what `make docker-configs` renders now."""
    fresh = render_docker(TESTBED, load_config(REPO / "docker" / "slurm-fair.toml"))
    assert set(fresh) == set(DOCKER_FILES)
    for name, text in fresh.items():
        assert (RENDERED / name).read_text() == text, f"docker/rendered/{name} is stale: run make docker-configs"


def _key(line: str) -> str:
    return line.split("=", 1)[0]


def _node_line(line: str) -> str:
    return " ".join(t for t in line.split() if not t.startswith(NODE_TOKENS))


def _diff(docker: str, native: str, allowed: set[str]) -> list[str]:
    """Lines that differ beyond the allowed keys (node lines compared without host/addr/port)."""
    def norm(text: str) -> dict[str, str]:
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#") or "=" not in line or _key(line) in allowed:
                continue
            if line.startswith("NodeName="):
                line = _node_line(line)
                out[line.split()[0]] = line
            else:
                out[line] = line
        return out

    d, n = norm(docker), norm(native)
    return sorted(set(d.items()) ^ set(n.items()))


def test_docker_slurm_conf_equals_testbed_but_documented_differences(testbed_files):
    docker = (RENDERED / "slurm.conf").read_text()
    assert _diff(docker, testbed_files["slurm.conf"], SLURM_CONF_DIFFS) == []
    assert "JobSubmitPlugins=lua" in docker  # the docker cluster always runs the plugin


def test_diff_is_not_vacuous(testbed_files):
    """The comparison catches a real drift (e.g. a partition or a node's GPU count)."""
    docker = (RENDERED / "slurm.conf").read_text().replace("Gres=gpu:k80:8", "Gres=gpu:k80:4")
    assert _diff(docker, testbed_files["slurm.conf"], SLURM_CONF_DIFFS)
    docker = (RENDERED / "slurm.conf").read_text().replace("PartitionName=k80", "PartitionName=k81")
    assert _diff(docker, testbed_files["slurm.conf"], SLURM_CONF_DIFFS)


def test_docker_gres_and_slurmdbd_conf_equal_testbed(testbed_files):
    def gres(text: str) -> list[str]:
        return [re.sub(r" File=\S+", "", ln) for ln in text.splitlines() if ln.startswith("NodeName=")]

    docker_gres = (RENDERED / "gres.conf").read_text()
    assert gres(docker_gres) == gres(testbed_files["gres.conf"])
    for node in TESTBED.nodes:
        last = node.gpus - 1
        assert f"NodeName={node.name} Name=gpu Type={node.gpu_type} File=/dev/nvidia[0-{last}]" in docker_gres
    assert _diff((RENDERED / "slurmdbd.conf").read_text(), testbed_files["slurmdbd.conf"], SLURMDBD_CONF_DIFFS) == []


def test_docker_db_password_matches_compose(compose):
    dbd = (RENDERED / "slurmdbd.conf").read_text()
    env = compose["services"]["mariadb"]["environment"]
    assert f"StoragePass={env['MARIADB_PASSWORD']}" in dbd
    assert f"StorageUser={env['MARIADB_USER']}" in dbd and f"StorageLoc={env['MARIADB_DATABASE']}" in dbd
    assert "StorageHost=mariadb" in dbd
