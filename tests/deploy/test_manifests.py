"""The production overlay renders, every object is valid Kubernetes 1.33, and the objects say
what the deployment guide promises: probes, secrets by reference, disruption budgets, agents
only on GPU nodes with the host's sockets read-only, and nothing in the teams' namespaces."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from django.conf import settings

from tests.deploy.conftest import ROOT, Obj, find, of_kind

SCHEMA_VERSION = "1.33.0"
ENTRYPOINT = ROOT / "deploy" / "image" / "entrypoint.sh"


def _pods(rendered: list[Obj]) -> list[Obj]:
    return of_kind(rendered, "Deployment", "DaemonSet")


def _containers(workload: Obj) -> list[Obj]:
    return list(workload["spec"]["template"]["spec"]["containers"])


def test_every_rendered_object_is_valid_kubernetes_133(rendered: list[Obj]) -> None:
    errors = []
    for obj in rendered:
        try:
            kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
    assert errors == []


def test_every_role_runs_from_the_image_s_entry_point(rendered: list[Obj]) -> None:
    roles = set(re.findall(r"^(\w[\w |]*)\)$", ENTRYPOINT.read_text(), re.M))
    known = {role.strip() for line in roles for role in line.split("|")}
    used = {c["args"][0] for w in _pods(rendered) for c in _containers(w)}
    assert used == {"web", "ws", "controller", "worker", "agent"}
    assert used <= known


def test_secrets_are_referenced_never_written_down(rendered: list[Obj]) -> None:
    assert of_kind(rendered, "Secret") == []
    for workload in of_kind(rendered, "Deployment"):
        (container,) = _containers(workload)
        env = {e["name"]: e for e in container["env"]}
        for name in ("SECRET_KEY", "AUDIT_KEY", "DATABASE_URL", "REDIS_URL"):
            assert "value" not in env[name], (workload["metadata"]["name"], name)
            assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "portal-secrets"


@pytest.mark.parametrize("name", ["portal-web", "portal-ws"])
def test_http_roles_are_probed_on_healthz_and_readyz(rendered: list[Obj], name: str) -> None:
    (container,) = _containers(find(rendered, "Deployment", name))
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # Probes arrive as plain HTTP: marked as the proxy marks HTTPS, or production redirects.
    header = {"name": "X-Forwarded-Proto", "value": "https"}
    assert header in container["readinessProbe"]["httpGet"]["httpHeaders"]
    config = find(rendered, "ConfigMap", _config_name(container))
    assert config["data"]["SECURE_PROXY_SSL_HEADER"] == "X-Forwarded-Proto"


def _config_name(container: Obj) -> str:
    (source,) = container["envFrom"]
    return str(source["configMapRef"]["name"])


def test_every_deployment_has_a_disruption_budget(rendered: list[Obj]) -> None:
    budgets = [
        b["spec"]["selector"]["matchLabels"] for b in of_kind(rendered, "PodDisruptionBudget")
    ]
    for workload in of_kind(rendered, "Deployment"):
        assert workload["spec"]["selector"]["matchLabels"] in budgets, workload["metadata"]["name"]


def test_web_scales_by_cpu_and_the_controller_keeps_a_standby(rendered: list[Obj]) -> None:
    hpa = find(rendered, "HorizontalPodAutoscaler", "portal-web")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "portal-web"
    assert "replicas" not in find(rendered, "Deployment", "portal-web")["spec"]
    assert find(rendered, "Deployment", "portal-controller")["spec"]["replicas"] == 2


def test_ingress_sends_websockets_and_agents_to_ws_and_the_rest_to_web(
    rendered: list[Obj],
) -> None:
    ingress = find(rendered, "Ingress", "portal")
    (rule,) = ingress["spec"]["rules"]
    routes = {p["path"]: p["backend"]["service"]["name"] for p in rule["http"]["paths"]}
    assert routes == {"/ws/": "portal-ws", "/api/v1/agent/": "portal-ws", "/": "portal-web"}
    config = find(rendered, "ConfigMap", _config_name(_containers(_web(rendered))[0]))
    assert rule["host"] == config["data"]["PORTAL_HOST"] == ingress["spec"]["tls"][0]["hosts"][0]


def _web(rendered: list[Obj]) -> Obj:
    return find(rendered, "Deployment", "portal-web")


def test_agents_run_only_on_gpu_nodes_with_host_paths_read_only(rendered: list[Obj]) -> None:
    agent = find(rendered, "DaemonSet", "portal-agent")
    pod = agent["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    (container,) = pod["containers"]
    host_volumes = {v["name"] for v in pod["volumes"] if "hostPath" in v}
    assert host_volumes == {"pod-resources"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["pod-resources"]["mountPath"] == "/var/lib/kubelet/pod-resources"
    assert all(mounts[name].get("readOnly") for name in host_volumes | {"node-tokens"})
    assert "resources" not in container or "nvidia.com/gpu" not in str(container["resources"])
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"  # the runtime's NVML, without taking a GPU
    assert pod["automountServiceAccountToken"] is False


def test_containers_drop_privileges_and_keep_the_root_file_system_read_only(
    rendered: list[Obj],
) -> None:
    for workload in _pods(rendered):
        pod = workload["spec"]["template"]["spec"]
        for container in _containers(workload):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"] == {"drop": ["ALL"]}
        if workload["kind"] == "Deployment":
            assert pod["securityContext"]["runAsNonRoot"] is True


def test_the_portal_lives_outside_the_teams_namespaces(rendered: list[Obj]) -> None:
    # The controller fills every "<prefix>-*" namespace with quotas and deny-all policies.
    prefix = f"{settings.NAMESPACE_PREFIX}-"
    namespaces = {o["metadata"]["name"] for o in of_kind(rendered, "Namespace")}
    used = {o["metadata"]["namespace"] for o in rendered if "namespace" in o["metadata"]}
    assert used <= namespaces
    assert not [n for n in namespaces if n.startswith(prefix)]
    config = find(rendered, "ConfigMap", _config_name(_containers(_web(rendered))[0]))
    assert config["data"]["NAMESPACE_PREFIX"] == settings.NAMESPACE_PREFIX


def test_compose_runs_the_same_roles_with_secrets_from_files() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    roles = {name: s["command"][0] for name, s in services.items() if "command" in s}
    assert roles == {
        "migrate": "manage",
        "web": "web",
        "ws": "ws",
        "controller": "controller",
        "worker": "worker",
    }
    for name in roles:
        env = services[name]["environment"]
        assert env["PORTAL_MODE"] == "production"
        assert {"SECRET_KEY", "AUDIT_KEY"}.isdisjoint(env)
        assert env["SECRET_KEY_FILE"].startswith("/run/secrets/")


def test_the_image_runs_as_a_user_and_leaves_compilers_behind() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", dockerfile, flags=re.M)[1:]
    assert len(stages) == 2
    run = stages[-1]
    assert "build-essential" not in run and "apt-get install" not in run
    assert re.search(r"^USER 10001", run, re.M)
    assert "collectstatic" in run
    # the scheduler is compiled in the build stage, and only its modules reach the image
    assert "mypyc scheduler/" in stages[0] and "mypy" not in run
    assert "COPY --from=build /src/scheduler/*.so /app/scheduler/" in run
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)", dockerfile, re.M)
    assert base and base.group(1).startswith("python:3.11-slim")
    assert all(stage.startswith("${PYTHON_IMAGE} ") for stage in stages)


def test_the_entry_point_is_valid_shell() -> None:
    assert subprocess.run(["sh", "-n", str(ENTRYPOINT)], check=False).returncode == 0
    assert Path(ENTRYPOINT).stat().st_mode & 0o111
