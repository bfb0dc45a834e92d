"""Validation that answers 422 Invalid with field causes, for the mistakes clients really make."""

from __future__ import annotations

import re
from typing import Any

from kubesim.errors import invalid
from kubesim.quantity import parse_quantity
from kubesim.resources import JOB, NAMESPACE, POD, SERVICE, Resource

Obj = dict[str, Any]
Cause = tuple[str, str, str]

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _name_causes(resource: Resource, name: str) -> list[Cause]:
    if not name:
        return [
            (
                "FieldValueRequired",
                "metadata.name",
                "Required value: name or generateName is required",
            )
        ]
    if resource is SERVICE:  # its name is a DNS label under the namespace's
        pattern, limit, kind = _RFC1035, 63, "RFC 1035 label"
    elif resource is NAMESPACE:
        pattern, limit, kind = _LABEL, 63, "RFC 1123 label"
    else:
        pattern, limit, kind = _SUBDOMAIN, 253, "RFC 1123 subdomain"
    if len(name) > limit or not pattern.match(name):
        return [
            (
                "FieldValueInvalid",
                "metadata.name",
                f'Invalid value: "{name}": a lowercase {kind} must consist of lower case '
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )
        ]
    return []


def _container_causes(path: str, containers: list[Obj]) -> list[Cause]:
    if not containers:
        return [("FieldValueRequired", path, "Required value")]
    causes: list[Cause] = []
    for i, container in enumerate(containers):
        here = f"{path}[{i}]"
        if not container.get("name"):
            causes.append(("FieldValueRequired", f"{here}.name", "Required value"))
        if not container.get("image"):
            causes.append(("FieldValueRequired", f"{here}.image", "Required value"))
        for kind in ("limits", "requests"):
            for res, value in ((container.get("resources") or {}).get(kind) or {}).items():
                try:
                    parse_quantity(value)
                except ValueError:
                    causes.append(
                        (
                            "FieldValueInvalid",
                            f"{here}.resources.{kind}[{res}]",
                            f'Invalid value: "{value}": quantities must match the regular '
                            "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                        )
                    )
    return causes


def _pod_spec_causes(path: str, spec: Obj) -> list[Cause]:
    causes = _container_causes(f"{path}.containers", spec.get("containers") or [])
    for field in ("hostname", "subdomain"):  # the pod's DNS name: <hostname>.<subdomain>...
        value = spec.get(field)
        if value is not None and (len(value) > 63 or not _LABEL.match(value)):
            causes.append(
                (
                    "FieldValueInvalid",
                    f"{path}.{field}",
                    f'Invalid value: "{value}": a lowercase RFC 1123 label must consist of lower '
                    "case alphanumeric characters or '-', and must start and end with an "
                    "alphanumeric character",
                )
            )
    return causes


def _job_causes(job: Obj) -> list[Cause]:
    spec = job.get("spec") or {}
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    causes = _pod_spec_causes("spec.template.spec", pod_spec)
    policy = pod_spec.get("restartPolicy", "Never")
    if policy not in ("Never", "OnFailure"):
        causes.append(
            (
                "FieldValueNotSupported",
                "spec.template.spec.restartPolicy",
                f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"',
            )
        )
    for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        value = spec.get(field)
        if value is not None and (not isinstance(value, int) or value < 0):
            causes.append(
                (
                    "FieldValueInvalid",
                    f"spec.{field}",
                    f"Invalid value: {value}: must be greater than or equal to 0",
                )
            )
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        causes.append(
            (
                "FieldValueRequired",
                "spec.completions",
                "Required value: when completion mode is Indexed",
            )
        )
    return causes


def validate(resource: Resource, obj: Obj) -> None:
    """Raise 422 Invalid listing every problem found."""
    name = obj["metadata"].get("name", "")
    causes = _name_causes(resource, name)
    if resource is POD:
        causes += _pod_spec_causes("spec", obj.get("spec") or {})
    elif resource is JOB:
        causes += _job_causes(obj)
    if causes:
        raise invalid(resource.kind, resource.group, name, causes)
