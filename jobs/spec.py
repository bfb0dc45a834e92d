"""The one job spec schema, accepted as JSON by the API and as YAML by the form.

`parse_spec` checks shape and form (no database); `jobs.actions.submit_job` then resolves the
team, queue and GPU type and checks quota, caps and limits. Errors name the field and the limit,
and never repeat a submitted value that might be a secret.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from portal.errors import FieldErrors

FIELDS = (
    "name",
    "team",
    "queue",
    "image",
    "command",
    "args",
    "env",
    "gpu_type",
    "gpus_per_node",
    "nodes",
    "cpu",
    "memory",
    "max_runtime",
)
MAX_NAME = 40
MAX_NODES = 64
MAX_GPUS_PER_NODE = 64
MAX_CPU = 512
MAX_ENV = 100
MAX_ARG_CHARS = 4096
DEFAULT_CPU = Decimal(4)
DEFAULT_MEMORY = "16Gi"

DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]*[a-z0-9])?$")
# Docker reference grammar, simplified: [registry[:port]/]path[:tag][@sha256:digest]
IMAGE_REF = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@sha256:[a-f0-9]{64})?$"
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$")
SECRET_NAME = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|CREDENTIAL|PRIVATE)", re.I)
SECRET_VALUE = re.compile(
    r"(-----BEGIN [A-Z ]*PRIVATE KEY-----|^AKIA[0-9A-Z]{16}$|^gh[pousr]_[A-Za-z0-9]{30,}$|"
    r"^xox[baprs]-[A-Za-z0-9-]{10,}$|^sk-[A-Za-z0-9]{20,}$)"
)
MASK = "********"


class SpecError(FieldErrors):
    """Per-field problems with a submitted spec."""


@dataclass(frozen=True)
class JobSpec:
    name: str
    image: str
    command: list[str]
    gpu_type: str
    gpus_per_node: int
    team: str | None = None
    queue: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    nodes: int = 1
    cpu: Decimal = DEFAULT_CPU
    memory: str = DEFAULT_MEMORY
    max_runtime: int | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cpu"] = str(self.cpu)
        return data


def looks_secret(name: str, value: str) -> bool:
    return bool(SECRET_NAME.search(name) or SECRET_VALUE.search(value))


def masked_env(env: dict[str, str]) -> dict[str, str]:
    """What pages, the API and the audit trail show of a job's environment."""
    return {name: MASK if looks_secret(name, value) else value for name, value in env.items()}


def load_yaml(text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError({"spec": f"is not valid YAML{where}"}) from None
    if not isinstance(data, dict):
        raise SpecError({"spec": "must be a mapping of job fields"})
    return data


def _int(errors: dict[str, str], data: dict[str, Any], key: str, low: int, high: int) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        errors[key] = "must be an integer"
        return 0
    if not low <= value <= high:
        errors[key] = f"must be between {low} and {high}, got {value}"
    return value


def _strings(errors: dict[str, str], data: dict[str, Any], key: str, required: bool) -> list[str]:
    value = data.get(key, [])
    if isinstance(value, str):
        errors[key] = 'must be a list of strings, e.g. ["python", "train.py"]'
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors[key] = "must be a list of strings"
        return []
    if required and (not value or not value[0].strip()):
        errors[key] = "must be a non-empty list of strings"
    if sum(len(v) for v in value) > MAX_ARG_CHARS:
        errors[key] = f"must be at most {MAX_ARG_CHARS} characters in all"
    return value


def _env(errors: dict[str, str], data: dict[str, Any]) -> dict[str, str]:
    value = data.get("env", {})
    if not isinstance(value, dict):
        errors["env"] = "must be a map of NAME: value"
        return {}
    if len(value) > MAX_ENV:
        errors["env"] = f"at most {MAX_ENV} variables, got {len(value)}"
    env: dict[str, str] = {}
    for name, raw in value.items():
        if not isinstance(name, str) or not ENV_NAME.match(name):
            errors["env"] = f"{str(name)[:64]!r} is not a valid variable name"
        elif isinstance(raw, bool) or not isinstance(raw, str | int | float):
            errors["env"] = f"{name}: value must be a string"
        else:
            env[name] = str(raw)
    return env


def _cpu(errors: dict[str, str], data: dict[str, Any]) -> Decimal:
    raw = data.get("cpu", DEFAULT_CPU)
    try:
        cpu = Decimal(str(raw)) if not isinstance(raw, bool) else Decimal("nan")
    except InvalidOperation:
        cpu = Decimal("nan")
    if cpu.is_nan() or not Decimal("0.1") <= cpu <= MAX_CPU:
        errors["cpu"] = f"must be a number of cores between 0.1 and {MAX_CPU}"
        return DEFAULT_CPU
    return cpu.quantize(Decimal("0.001"))


def _check_text(errors: dict[str, str], data: dict[str, Any]) -> None:
    name = data.get("name")
    if not isinstance(name, str) or not name:
        errors["name"] = "is required"
    elif len(name) > MAX_NAME or not DNS_LABEL.match(name):
        errors["name"] = (
            f"must be a DNS label: lowercase letters, digits and '-', starting with a letter, "
            f"at most {MAX_NAME} characters"
        )
    image = data.get("image")
    if not isinstance(image, str) or not image:
        errors["image"] = "is required"
    elif len(image) > 255 or not IMAGE_REF.match(image):
        errors["image"] = "is not a valid image reference (e.g. registry.example/team/train:1.0)"
    for key in ("team", "queue", "gpu_type"):
        if key in data and not isinstance(data[key], str):
            errors[key] = "must be a string"
    if not isinstance(data.get("gpu_type"), str):
        errors.setdefault("gpu_type", "is required")
    memory = data.get("memory", DEFAULT_MEMORY)
    if not isinstance(memory, str) or not QUANTITY.match(memory):
        errors["memory"] = "must be a Kubernetes quantity such as 64Gi"


def parse_spec(data: object) -> JobSpec:
    """Check a spec's shape; raise SpecError with every problem found."""
    if not isinstance(data, dict):
        raise SpecError({"spec": "must be a mapping of job fields"})
    errors: dict[str, str] = {}
    for unknown in sorted(set(data) - set(FIELDS), key=str):
        errors[str(unknown)[:64]] = f"unknown field (known: {', '.join(FIELDS)})"
    _check_text(errors, data)
    command = _strings(errors, data, "command", required=True)
    args = _strings(errors, data, "args", required=False)
    env = _env(errors, data)
    gpus = _int(errors, data, "gpus_per_node", 1, MAX_GPUS_PER_NODE)
    nodes = _int(errors, {"nodes": data.get("nodes", 1)}, "nodes", 1, MAX_NODES)
    cpu = _cpu(errors, data)
    max_runtime = None
    if data.get("max_runtime") is not None:
        max_runtime = _int(errors, data, "max_runtime", 60, 30 * 24 * 3600)
    if errors:
        raise SpecError(errors)
    return JobSpec(
        name=data["name"],
        team=data.get("team"),
        queue=data.get("queue"),
        image=data["image"],
        command=command,
        args=args,
        env=env,
        gpu_type=data["gpu_type"],
        gpus_per_node=gpus,
        nodes=nodes,
        cpu=cpu,
        memory=data.get("memory", DEFAULT_MEMORY),
        max_runtime=max_runtime,
    )
