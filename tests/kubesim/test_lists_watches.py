"""List and watch rules: selectors, paging, resuming from a resourceVersion, 410, bookmarks."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

import orjson
import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from kubesim import KubeSim
from kubesim.resources import POD
from kubesim.selectors import parse_label_selector
from kubesim.store import Store
from kubesim.watch import WatchFilter, WatchStream
from tests.kubesim.conftest import pod_manifest


def _labelled(core: client.CoreV1Api, namespace: str, name: str, labels: dict[str, str]) -> None:
    body = pod_manifest(name)
    body["metadata"]["labels"] = labels
    core.create_namespaced_pod(namespace, body)


@pytest.fixture
def zoo(core: client.CoreV1Api, namespace: str) -> str:
    _labelled(core, namespace, "a", {"app": "web", "tier": "1"})
    _labelled(core, namespace, "b", {"app": "db", "tier": "2"})
    _labelled(core, namespace, "c", {"app": "web"})
    return namespace


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", {"a", "c"}),
        ("app==web", {"a", "c"}),
        ("app!=web", {"b"}),
        ("app in (db, cache)", {"b"}),
        ("app notin (db)", {"a", "c"}),
        ("tier", {"a", "b"}),
        ("!tier", {"c"}),
        ("app=web,tier", {"a"}),
    ],
)
def test_label_selectors_filter_lists(
    core: client.CoreV1Api, zoo: str, selector: str, expected: set[str]
) -> None:
    items = core.list_namespaced_pod(zoo, label_selector=selector).items
    assert {p.metadata.name for p in items} == expected


def test_field_selectors_filter_on_name_and_phase(core: client.CoreV1Api, zoo: str) -> None:
    by_name = core.list_namespaced_pod(zoo, field_selector="metadata.name=b").items
    assert [p.metadata.name for p in by_name] == ["b"]
    not_b = core.list_namespaced_pod(
        zoo, field_selector="metadata.name!=b,status.phase!=Failed"
    ).items
    assert {p.metadata.name for p in not_b} == {"a", "c"}


def test_unsupported_field_selector_is_bad_request(core: client.CoreV1Api, zoo: str) -> None:
    with pytest.raises(ApiException) as caught:
        core.list_namespaced_pod(zoo, field_selector="spec.image=x")
    assert caught.value.status == 400


def test_limit_and_continue_page_through_a_list(core: client.CoreV1Api, zoo: str) -> None:
    first = core.list_namespaced_pod(zoo, limit=2)
    assert [p.metadata.name for p in first.items] == ["a", "b"]
    assert first.metadata.remaining_item_count == 1 and first.metadata._continue
    rest = core.list_namespaced_pod(zoo, limit=2, _continue=first.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["c"] and not rest.metadata._continue


def test_watch_resumes_after_a_resource_version(core: client.CoreV1Api, namespace: str) -> None:
    listed = core.list_namespaced_pod(namespace)
    _labelled(core, namespace, "w1", {"x": "1"})
    core.delete_namespaced_pod("w1", namespace, grace_period_seconds=0)
    events = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_pod,
            namespace,
            timeout_seconds=1,
            resource_version=listed.metadata.resource_version,
        )
    ]
    assert events[0] == ("ADDED", "w1") and events[-1] == ("DELETED", "w1")


def test_watch_without_version_starts_with_current_objects(
    core: client.CoreV1Api, zoo: str
) -> None:
    events = list(
        watch.Watch().stream(
            core.list_namespaced_pod, zoo, timeout_seconds=1, label_selector="app=web"
        )
    )
    assert {(e["type"], e["object"].metadata.name) for e in events[:2]} == {
        ("ADDED", "a"),
        ("ADDED", "c"),
    }


def test_objects_leaving_or_entering_a_selector_are_deleted_or_added(
    core: client.CoreV1Api, zoo: str
) -> None:
    rv = core.list_namespaced_pod(zoo).metadata.resource_version
    core.patch_namespaced_pod("a", zoo, {"metadata": {"labels": {"app": "db"}}})
    core.patch_namespaced_pod("b", zoo, {"metadata": {"labels": {"app": "web"}}})
    events = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_pod,
            zoo,
            timeout_seconds=1,
            resource_version=rv,
            label_selector="app=web",
        )
    ]
    assert ("DELETED", "a") in events and ("ADDED", "b") in events


def test_watch_from_a_compacted_version_is_expired() -> None:
    with KubeSim(history_size=5) as small:
        config = client.Configuration()
        config.host = small.url
        core = client.CoreV1Api(client.ApiClient(config))
        for i in range(10):
            core.create_namespace({"metadata": {"name": f"n{i}"}})
        with pytest.raises(ApiException) as caught:
            list(watch.Watch().stream(core.list_namespace, resource_version="2", timeout_seconds=1))
        assert caught.value.status == 410


def test_bookmarks_carry_the_current_resource_version(
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("kubesim.watch.BOOKMARK_INTERVAL_S", 0.2)
    monkeypatch.setattr("kubesim.handlers.BOOKMARK_INTERVAL_S", 0.2)
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    response = core.list_namespaced_pod(
        namespace,
        watch=True,
        allow_watch_bookmarks=True,
        resource_version=rv,
        timeout_seconds=1,
        _preload_content=False,
    )
    lines = [line for line in response.read().decode().splitlines() if line]
    assert lines and all('"type":"BOOKMARK"' in line for line in lines)
    assert int(lines[-1].split('"resourceVersion":"')[1].split('"')[0]) >= int(rv)


def test_watch_ends_after_timeout_seconds(core: client.CoreV1Api, namespace: str) -> None:
    started = time.monotonic()
    list(watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=1))
    assert 0.9 <= time.monotonic() - started < 5


def _stream_events(stream: WatchStream) -> list[tuple[str, dict[str, Any]]]:
    events = [orjson.loads(line) for line in stream.lines]
    return [(e["type"], e["object"]["metadata"]) for e in events]


def test_streaming_list_sends_the_objects_then_the_initial_events_end_bookmark() -> None:
    store = Store()
    for name, app in (("a", "web"), ("b", "db"), ("c", "web")):
        store.put(
            POD.key,
            {"metadata": {"name": name, "namespace": "ns", "labels": {"app": app}}},
            "ADDED",
        )
    stream = WatchStream(store, POD, WatchFilter("ns", parse_label_selector("app=web"), []))
    stream.start(None, initial=True, end_bookmark=True)
    listed_at = store.rv
    store.put(
        POD.key, {"metadata": {"name": "d", "namespace": "ns", "labels": {"app": "web"}}}, "ADDED"
    )
    events = _stream_events(stream)
    assert [(type_, meta.get("name")) for type_, meta in events] == [
        ("ADDED", "a"),
        ("ADDED", "c"),
        ("BOOKMARK", None),
        ("ADDED", "d"),
    ]
    end = events[2][1]
    assert end == {
        "resourceVersion": str(listed_at),
        "annotations": {"k8s.io/initial-events-end": "true"},
    }


@pytest.mark.parametrize("end_bookmark", [False, True])
def test_only_a_streaming_list_with_bookmarks_is_ended_by_a_bookmark(end_bookmark: bool) -> None:
    store = Store()
    store.put(POD.key, {"metadata": {"name": "a", "namespace": "ns"}}, "ADDED")
    stream = WatchStream(store, POD, WatchFilter("ns", [], []))
    stream.start("0", initial=True, end_bookmark=end_bookmark)
    types = [type_ for type_, _ in _stream_events(stream)]
    assert types == (["ADDED", "BOOKMARK"] if end_bookmark else ["ADDED"])


def test_streaming_list_over_http_ends_its_initial_events_with_a_bookmark(
    core: client.CoreV1Api, zoo: str
) -> None:
    rv = core.list_namespaced_pod(zoo).metadata.resource_version
    response = core.list_namespaced_pod(
        zoo,
        watch=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=60,
        _preload_content=False,
    )
    lines = iter(response)  # the stream stays open: read only the initial events
    events = [orjson.loads(next(lines)) for _ in range(4)]
    response.close()
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("ADDED", "c"),
        ("BOOKMARK", None),
    ]
    end = events[3]["object"]["metadata"]
    assert end["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(end["resourceVersion"]) >= int(rv)


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        (
            "watch=true&sendInitialEvents=true",
            "resourceVersionMatch",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        (
            "watch=true&resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=5",
            "resourceVersionMatch",
            'Unsupported value: "Exact": supported values: "NotOlderThan"',
        ),
        (
            "sendInitialEvents=true",
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ),
        (
            "resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersionMatch=Exact&resourceVersion=0",
            "resourceVersionMatch",
            'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
        ),
    ],
)
def test_list_options_the_api_server_refuses_are_invalid(
    sim: KubeSim, namespace: str, query: str, field: str, message: str
) -> None:
    url = f"{sim.url}/api/v1/namespaces/{namespace}/pods?{query}"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url, timeout=5)
    status = orjson.loads(caught.value.read())
    assert caught.value.code == 422 and status["reason"] == "Invalid"
    assert status["details"]["kind"] == "ListOptions"
    assert any(
        c["field"] == field and message in c["message"] for c in status["details"]["causes"]
    ), status
