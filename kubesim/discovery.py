"""Discovery documents (/version, /api, /apis, ...) built from the resource table.

kubectl reads these to map `kubectl get jobs` to batch/v1 and to check that pods/eviction exists
before `drain`; it falls back from aggregated to these legacy documents when served plain JSON.
"""

from __future__ import annotations

from typing import Any

from kubesim.resources import RESOURCES, groups, verbs

Obj = dict[str, Any]

VERSION: Obj = {
    "major": "1",
    "minor": "37",
    "emulationMajor": "1",
    "emulationMinor": "37",
    "gitVersion": "v1.37.0-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUB_VERBS = {"status": ["get", "patch", "update"], "log": ["get"], "eviction": ["create"]}


def _subresource(plural: str, kind: str, namespaced: bool, sub: str) -> Obj:
    entry: Obj = {
        "name": f"{plural}/{sub}",
        "singularName": "",
        "namespaced": namespaced,
        "kind": kind,
        "verbs": _SUB_VERBS[sub],
    }
    if sub == "eviction":
        entry.update(group="policy", version="v1", kind="Eviction")
    return entry


def resource_list(group: str, version: str) -> Obj | None:
    entries: list[Obj] = []
    for r in RESOURCES:
        if (r.group, r.version) != (group, version):
            continue
        entry: Obj = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs(),
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        entries.append(entry)
        entries += [_subresource(r.plural, r.kind, r.namespaced, s) for s in r.subresources]
    group_version = f"{group}/{version}" if group else version
    if not entries and groups().get(group) != [version]:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }


def core_versions(address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    }


def _group(name: str, versions: list[str]) -> Obj:
    listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": listed, "preferredVersion": listed[0]}


def group_list() -> Obj:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(n, v) for n, v in sorted(groups().items())],
    }


def group(name: str) -> Obj | None:
    versions = groups().get(name)
    if versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}
