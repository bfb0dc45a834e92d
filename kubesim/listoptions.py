"""List and watch options, checked as the API server's `ValidateListOptions` does.

A streaming list (a watch with `sendInitialEvents`) must say `resourceVersionMatch=NotOlderThan`;
a wrong combination is a 422 Invalid on `ListOptions.meta.k8s.io`, which clients such as
client-go's reflector read to fall back to a plain list and watch.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubesim.errors import invalid

Cause = tuple[str, str, str]

NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"
MATCH = "resourceVersionMatch"


def send_initial_events(query: Mapping[str, str]) -> bool | None:
    """The `sendInitialEvents` flag; None when absent (the server's *bool: anything but "false"
    or "0" is true)."""
    value = query.get("sendInitialEvents")
    if value is None:
        return None
    return value.lower() not in ("false", "0")


def validate(query: Mapping[str, str], watch: bool) -> None:
    """Refuse what the API server refuses, naming every offending field."""
    causes = _watch_causes(query) if watch else _list_causes(query)
    if causes:
        raise invalid("ListOptions", "meta.k8s.io", "", causes)


def _watch_causes(query: Mapping[str, str]) -> list[Cause]:
    match, send = query.get(MATCH, ""), send_initial_events(query)
    causes = []
    if send is not None and match != NOT_OLDER_THAN:
        causes.append(
            _forbidden(MATCH, f"sendInitialEvents requires setting {MATCH} to {NOT_OLDER_THAN}")
        )
    if match:
        if send is None:
            causes.append(
                _forbidden(
                    MATCH, f"{MATCH} is forbidden for watch unless sendInitialEvents is provided"
                )
            )
        if match != NOT_OLDER_THAN:
            causes.append(_not_supported(MATCH, match, [NOT_OLDER_THAN]))
        if query.get("continue"):
            causes.append(_forbidden(MATCH, f"{MATCH} is forbidden when continue is provided"))
    return causes


def _list_causes(query: Mapping[str, str]) -> list[Cause]:
    match, rv = query.get(MATCH, ""), query.get("resourceVersion", "")
    causes = []
    if match:
        if not rv:
            causes.append(
                _forbidden(MATCH, f"{MATCH} is forbidden unless resourceVersion is provided")
            )
        if query.get("continue"):
            causes.append(_forbidden(MATCH, f"{MATCH} is forbidden when continue is provided"))
        if match not in (EXACT, NOT_OLDER_THAN):
            causes.append(_not_supported(MATCH, match, [EXACT, NOT_OLDER_THAN, ""]))
        if match == EXACT and rv == "0":
            causes.append(
                _forbidden(MATCH, f'{MATCH} "exact" is forbidden for resourceVersion "0"')
            )
    if send_initial_events(query) is not None:
        causes.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return causes


def _forbidden(field: str, detail: str) -> Cause:
    return ("FieldValueForbidden", field, f"Forbidden: {detail}")


def _not_supported(field: str, value: str, supported: list[str]) -> Cause:
    listed = ", ".join(f'"{s}"' for s in supported)
    return (
        "FieldValueNotSupported",
        field,
        f'Unsupported value: "{value}": supported values: {listed}',
    )
