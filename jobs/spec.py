"""The one job spec schema, accepted as JSON by the API and as YAML by the form.

`parse_spec` checks shape and form (no database); `jobs.actions.submit_job` then resolves the
team, queue and GPU type and checks quota, caps and limits. Errors name the field and the limit,
and never repeat a submitted value that might be a secret.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

import yaml
from django.utils.translation import gettext as _

from base.errors import FieldErrors
from base.untrusted import MAX_DEPTH, field_problems, too_deep

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
MAX_ENV_VALUE = 32 * 1024
"""Bytes of one variable's value: Linux refuses to start a program with one over 128 KiB."""
MAX_SPEC_BYTES = 1024 * 1024
"""Bytes of a whole spec as JSON: a Kubernetes Job must fit in etcd's 1.5 MiB with its metadata."""
MAX_MEMORY_CHARS = 32
MAX_INT_DIGITS = 20
DEFAULT_CPU = Decimal(4)
DEFAULT_MEMORY = "16Gi"

# Patterns are matched with `fullmatch`: `$` would also match before a trailing newline.
DNS_LABEL = re.compile(r"[a-z]([a-z0-9-]*[a-z0-9])?")
# The distribution reference grammar (as containerd parses images): [registry/]path[:tag][@digest]
# where the first component is a registry only if it has a '.' or a port or is localhost, so a
# path (every repository name) is lowercase.
_DOMAIN_PART = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_REGISTRY = (
    rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})+(?::[0-9]+)?"
    rf"|localhost(?::[0-9]+)?|{_DOMAIN_PART}:[0-9]+)"
)
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REF = re.compile(
    rf"(?:{_REGISTRY}/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
QUANTITY = re.compile(r"(?P<number>[0-9]+(\.[0-9]+)?)(?P<suffix>Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5}
_DECIMAL = {"k": 1, "M": 2, "G": 3, "T": 4, "P": 5}
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


def memory_bytes(quantity: str) -> int:
    """The bytes a memory quantity (one `QUANTITY` matches) stands for, rounded up as Kubernetes
    rounds."""
    parts = QUANTITY.fullmatch(quantity)
    assert parts is not None, quantity
    suffix = parts["suffix"] or ""
    scale = 1024 ** _BINARY[suffix] if suffix in _BINARY else 1000 ** _DECIMAL.get(suffix, 0)
    return int((Decimal(parts["number"]) * scale).to_integral_value(ROUND_CEILING))


def _memory_text(size: int) -> str:
    """`size` bytes in the largest binary unit that holds it whole."""
    for suffix, power in sorted(_BINARY.items(), key=lambda item: -item[1]):
        if size % 1024**power == 0:
            return f"{size // 1024**power}{suffix}"
    return str(size)


def _cores(cpu: Decimal) -> str:
    return format(cpu.normalize(), "f")


def node_misfits(
    spec: JobSpec, gpu_type: str, cpu_millis: int | None, memory: int | None
) -> dict[str, str]:
    """What of `spec` no node of its GPU type could ever hold, given the most CPU (millicores)
    and memory (bytes) one offers; a figure not known yet refuses nothing."""
    misfits: dict[str, str] = {}
    message = _("%(asked)s requested, nodes of type %(type)s have at most %(most)s")
    if cpu_millis is not None and spec.cpu * 1000 > cpu_millis:
        most = _cores(Decimal(cpu_millis) / 1000)
        misfits["cpu"] = message % {"asked": _cores(spec.cpu), "type": gpu_type, "most": most}
    if memory is not None and memory_bytes(spec.memory) > memory:
        most = _memory_text(memory)
        misfits["memory"] = message % {"asked": spec.memory, "type": gpu_type, "most": most}
    return misfits


class _SpecLoader(yaml.SafeLoader):
    """`yaml.safe_load`, bounded: PyYAML recurses once per level of nesting, and converts
    integers of any length (a 5,000-digit one raises ValueError)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.depth > MAX_DEPTH:
            raise SpecError({"spec": too_deep()})
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _bounded_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    if len(node.value) > MAX_INT_DIGITS:
        message = _("line %(line)d: integers have at most %(digits)d digits")
        raise SpecError(
            {"spec": message % {"line": node.start_mark.line + 1, "digits": MAX_INT_DIGITS}}
        )
    return loader.construct_yaml_int(node)


_SpecLoader.add_constructor("tag:yaml.org,2002:int", _bounded_int)


def load_yaml(text: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_SpecLoader)  # a SafeLoader: plain data only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        if mark is None:
            raise SpecError({"spec": _("is not valid YAML")}) from None
        message = _("is not valid YAML at line %(line)d")
        raise SpecError({"spec": message % {"line": mark.line + 1}}) from None
    if not isinstance(data, dict):
        raise SpecError({"spec": _("must be a mapping of job fields")})
    return data


def _int(errors: dict[str, str], data: dict[str, Any], key: str, low: int, high: int) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        errors[key] = _("must be an integer")
        return 0
    if not low <= value <= high:
        message = _("must be between %(low)d and %(high)d, got %(value)d")
        errors[key] = message % {"low": low, "high": high, "value": value}
    return value


def _strings(errors: dict[str, str], data: dict[str, Any], key: str, required: bool) -> list[str]:
    value = data.get(key, [])
    if isinstance(value, str):
        errors[key] = _('must be a list of strings, e.g. ["python", "train.py"]')
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors[key] = _("must be a list of strings")
        return []
    if required and (not value or not value[0].strip()):
        errors[key] = _("must be a non-empty list of strings")
    if sum(len(v) for v in value) > MAX_ARG_CHARS:
        errors[key] = _("must be at most %(most)d characters in all") % {"most": MAX_ARG_CHARS}
    return value


def _env(errors: dict[str, str], data: dict[str, Any]) -> dict[str, str]:
    value = data.get("env", {})
    if not isinstance(value, dict):
        errors["env"] = _("must be a map of NAME: value")
        return {}
    if len(value) > MAX_ENV:
        message = _("at most %(most)d variables, got %(count)d")
        errors["env"] = message % {"most": MAX_ENV, "count": len(value)}
    env: dict[str, str] = {}
    for name, raw in value.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            message = _("%(name)r is not a valid variable name")
            errors["env"] = message % {"name": str(name)[:64]}
        elif isinstance(raw, bool) or not isinstance(raw, str | int | float):
            errors["env"] = _("%(name)s: value must be a string") % {"name": name}
        elif (size := len(str(raw).encode())) > MAX_ENV_VALUE:
            message = _("%(name)s: value must be at most %(most)d bytes, got %(size)d")
            errors["env"] = message % {"name": name, "most": MAX_ENV_VALUE, "size": size}
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
        message = _("must be a number of cores between %(least)s and %(most)d")
        errors["cpu"] = message % {"least": "0.1", "most": MAX_CPU}
        return DEFAULT_CPU
    return cpu.quantize(Decimal("0.001"))


def _check_text(errors: dict[str, str], data: dict[str, Any]) -> None:
    name = data.get("name")
    if not isinstance(name, str) or not name:
        errors["name"] = _("is required")
    elif len(name) > MAX_NAME or not DNS_LABEL.fullmatch(name):
        message = _(
            "must be a DNS label: lowercase letters, digits and '-', starting with a letter, "
            "at most %(most)d characters"
        )
        errors["name"] = message % {"most": MAX_NAME}
    image = data.get("image")
    if not isinstance(image, str) or not image:
        errors["image"] = _("is required")
    elif len(image) > 255 or not IMAGE_REF.fullmatch(image):
        errors["image"] = _("is not a valid image reference (e.g. registry.example/team/train:1.0)")
    for key in ("team", "queue", "gpu_type"):
        if key in data and not isinstance(data[key], str):
            errors[key] = _("must be a string")
    if not isinstance(data.get("gpu_type"), str):
        errors.setdefault("gpu_type", _("is required"))
    memory = data.get("memory", DEFAULT_MEMORY)
    if (
        not isinstance(memory, str)
        or len(memory) > MAX_MEMORY_CHARS
        or not QUANTITY.fullmatch(memory)
    ):
        errors["memory"] = _("must be a Kubernetes quantity such as 64Gi")


def check_spec(data: object) -> tuple[JobSpec | None, dict[str, str]]:
    """A spec's shape checked, with every problem found: the spec (a faulty field at a neutral
    value, for the checks of the fields that are fine) and the problems; no spec where the data
    is not a mapping of storable values."""
    if not isinstance(data, dict):
        return None, {"spec": _("must be a mapping of job fields")}
    if unstorable := field_problems(data, whole="spec"):
        return None, unstorable  # alone: the other messages may repeat what cannot be shown
    errors: dict[str, str] = {}
    known = {"fields": ", ".join(FIELDS)}
    for unknown in sorted(set(data) - set(FIELDS), key=str):
        errors[str(unknown)[:64]] = _("unknown field (known: %(fields)s)") % known
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

    def valid(key: str, default: Any) -> Any:
        return default if key in errors else data.get(key, default)

    spec = JobSpec(
        name=valid("name", ""),
        team=valid("team", None),
        queue=valid("queue", None),
        image=valid("image", ""),
        command=command,
        args=args,
        env=env,
        gpu_type=valid("gpu_type", ""),
        gpus_per_node=1 if "gpus_per_node" in errors else gpus,
        nodes=1 if "nodes" in errors else nodes,
        cpu=cpu,
        memory=valid("memory", DEFAULT_MEMORY),
        max_runtime=None if "max_runtime" in errors else max_runtime,
    )
    if not errors:
        errors.update(_size_problem(spec))
    return spec, errors


def parse_spec(data: object) -> JobSpec:
    """Check a spec's shape; raise SpecError with every problem found."""
    spec, errors = check_spec(data)
    if errors:
        raise SpecError(errors)
    assert spec is not None
    return spec


def _size_problem(spec: JobSpec) -> dict[str, str]:
    shallow = {f.name: getattr(spec, f.name) for f in fields(spec)}  # as_dict's deep copy: 40 µs
    size = len(json.dumps(shallow, default=str, ensure_ascii=False).encode())
    if size > MAX_SPEC_BYTES:
        message = _(
            "is %(size)d bytes, at most %(most)d (a Kubernetes Job must fit in etcd's 1.5 MiB)"
        )
        return {"spec": message % {"size": size, "most": MAX_SPEC_BYTES}}
    return {}
