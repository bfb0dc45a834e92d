"""ClusterBackend on the official `kubernetes` client: the only module that imports it.

Configuration comes from KUBECONFIG (or ~/.kube/config) or, inside a pod, the in-cluster service
account. Raw JSON is used both ways (dicts in, `raw_object` and `_preload_content=False` out), so
nothing is converted twice on the hot path of thousands of jobs; orjson decodes what comes back
(watch streams are most of the controller's reading, at about twice the standard library's
speed).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException, RESTResponse

from cluster.backend import Expired, Listing, Obj, Unavailable, WatchEvent

CORDON_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def load_api_client(kubeconfig: str | None = None, connections: int = 64) -> client.ApiClient:
    """An API client from a kubeconfig file, the default one, or the in-cluster account.

    `connections`: how many connections its pool keeps. The client's default (five per CPU)
    is below what the controller holds open at once (watches, log streams, creates), and a
    pool that is full closes each connection handed back, so every request paid for a new one.
    """
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    except config.ConfigException:
        config.load_incluster_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = connections
    return client.ApiClient(configuration)


def _unavailable(exc: Exception) -> Unavailable:
    return Unavailable(f"cluster API: {exc}")


class KubernetesBackend:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self._ssl: ssl.SSLContext | None = None
        self._log_sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            if exc.status is None or exc.status >= 500:
                raise _unavailable(exc) from exc
            raise
        except (OSError, ConnectionError) as exc:  # urllib3 errors derive from these
            raise _unavailable(exc) from exc
        except Exception as exc:
            if type(exc).__module__.startswith("urllib3"):
                raise _unavailable(exc) from exc
            raise

    # -- objects -------------------------------------------------------------------------------

    def _path(self, obj: Obj) -> tuple[str, str]:
        """The collection URL of an object, and its name."""
        version, kind = obj["apiVersion"], obj["kind"]
        base = f"/api/{version}" if "/" not in version else f"/apis/{version}"
        plural = kind.lower() + ("es" if kind.endswith("s") else "s")
        plural = plural.replace("policys", "policies")
        namespace = obj["metadata"].get("namespace")
        scope = f"/namespaces/{namespace}" if namespace else ""
        return f"{base}{scope}/{plural}", obj["metadata"]["name"]

    def _request(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        query: dict[str, str] | None = None,
        timeout_s: float | None = None,
        accept: str = "application/json",
    ) -> RESTResponse:
        """Send one request through the client's configuration, auth and connection pool.

        The body is left unread (for streams); an error status raises with the body read.
        """
        content = "application/merge-patch+json" if method == "PATCH" else "application/json"
        headers = {"Accept": accept, "Content-Type": content}
        _, url, headers, _, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        # The body goes out as orjson writes it, through the client's own connection pool: the
        # client would walk every manifest to "sanitize" it and then encode it with the standard
        # library (about a quarter of a create's CPU in the replay's profile).
        response = self._call(
            self._send,
            method,
            url,
            headers,
            None if body is None else orjson.dumps(body),
            timeout_s,
        )
        if response.status >= 400:
            response.read()
            exc = ApiException(http_resp=response)
            if response.status >= 500:
                raise _unavailable(exc)
            raise exc
        return response

    def _send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout_s: float | None,
    ) -> RESTResponse:
        timeout = urllib3.Timeout(total=timeout_s) if timeout_s is not None else None
        pool = self.api.rest_client.pool_manager
        return RESTResponse(
            pool.request(
                method, url, body=body, headers=headers, timeout=timeout, preload_content=False
            )
        )

    def _raw(
        self, method: str, path: str, body: Obj | None = None, query: dict[str, str] | None = None
    ) -> Any:
        response = self._request(method, path, body, query)
        response.read()
        return orjson.loads(response.data or b"null")

    def apply(self, obj: Obj) -> None:
        collection, name = self._path(obj)
        try:
            self._raw("POST", collection, obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self._raw("PATCH", f"{collection}/{name}", obj)

    def create_job(self, obj: Obj) -> bool:
        collection, _ = self._path(obj)
        try:
            self._raw("POST", collection, obj)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def reachable(self) -> bool:
        try:
            self._raw("GET", "/version")
        except Exception:  # refused, timed out, an error status: not reachable, whichever
            return False
        return True

    def delete_job(self, namespace: str, name: str) -> bool:
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
        try:
            self._raw("DELETE", path, {"propagationPolicy": "Background"})
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def expire_job(self, namespace: str, name: str, ttl_s: int) -> bool:
        path = f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
        try:
            self._raw("PATCH", path, {"spec": {"ttlSecondsAfterFinished": ttl_s}})
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # -- lists and watches ---------------------------------------------------------------------

    _LISTS = {
        "jobs": "/apis/batch/v1/jobs",
        "pods": "/api/v1/pods",
        "nodes": "/api/v1/nodes",
        "events": "/api/v1/events",
    }

    @staticmethod
    def _selectors(labels: str, fields: str) -> dict[str, str]:
        query = {"labelSelector": labels} if labels else {}
        return query | ({"fieldSelector": fields} if fields else {})

    def list(self, kind: str, label_selector: str = "", field_selector: str = "") -> Listing:
        query = self._selectors(label_selector, field_selector)
        body = self._raw("GET", self._LISTS[kind], query=query)
        return Listing(body.get("items") or [], body["metadata"]["resourceVersion"])

    def watch(
        self,
        kind: str,
        resource_version: str,
        label_selector: str = "",
        timeout_s: int = 60,
        field_selector: str = "",
    ) -> Iterator[WatchEvent]:
        # The stream is read line by line as raw JSON: the client's own Watch turns every event
        # into its typed model first, which cost more than everything the controller then did.
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_s),
            "allowWatchBookmarks": "true",
            **self._selectors(label_selector, field_selector),
        }
        try:
            response = self._request(
                "GET", self._LISTS[kind], query=query, timeout_s=timeout_s + 10
            )
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(str(exc.reason)) from exc
            raise _unavailable(exc) from exc
        try:
            for line in _lines(response):
                event = orjson.loads(line)
                raw = event["object"]
                if event["type"] == "ERROR":
                    if raw.get("code") == 410:
                        raise Expired(raw.get("message", "resourceVersion too old"))
                    raise Unavailable(f"watch error: {raw.get('message')}")
                yield WatchEvent(event["type"], raw)
        except Exception as exc:
            if type(exc).__module__.startswith("urllib3") or isinstance(exc, OSError):
                raise _unavailable(exc) from exc
            raise
        finally:  # closed first: a half-read connection must not go back into the pool
            response.response.close()
            response.response.release_conn()

    async def follow_log(self, namespace: str, pod: str) -> AsyncIterator[str]:
        """The pod's log lines from the start, as they are written, until the pod ends.

        Read on an event loop, so that one thread follows every running pod: a thread per
        stream, each held for as long as its pod runs, bounded how many pods were followed.
        The request is the client's own (URL, credentials), sent through aiohttp.
        """
        _, url, headers, _, _ = self.api.param_serialize(
            method="GET",
            resource_path=f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
            query_params=[("follow", "true")],
            header_params={"Accept": "*/*"},
            auth_settings=["BearerToken"],
        )
        try:
            async with self._log_session().get(
                url, headers=headers, ssl=self._ssl_context()
            ) as response:
                if response.status in (400, 404):  # still waiting to start, or already gone
                    return
                if response.status >= 400:
                    raise Unavailable(f"cluster API: {response.status} {await response.text()}")
                pending = b""
                async for data in response.content.iter_any():
                    pending += data
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        yield line.decode(errors="replace")
                if pending:
                    yield pending.decode(errors="replace")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _unavailable(exc) from exc  # the follower resumes when the pod reports

    def _log_session(self) -> aiohttp.ClientSession:
        """The running loop's session: its pool keeps connections between pods' streams."""
        loop = asyncio.get_running_loop()
        session = self._log_sessions.get(loop)
        if session is None:
            session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                connector=aiohttp.TCPConnector(limit=0),  # a stream per running pod
            )
            self._log_sessions[loop] = session
        return session

    async def close_log_streams(self) -> None:
        session = self._log_sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    def _ssl_context(self) -> ssl.SSLContext | bool:
        """TLS as the client's configuration has it (CA, client certificate, verification)."""
        settings = self.api.configuration
        if not settings.host.startswith("https:"):
            return False
        if self._ssl is None:
            context = ssl.create_default_context(
                cafile=settings.ssl_ca_cert, cadata=getattr(settings, "ca_cert_data", None)
            )
            if settings.cert_file:
                context.load_cert_chain(settings.cert_file, settings.key_file)
            if not settings.verify_ssl:
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            self._ssl = context
        return self._ssl

    def patch_pod(self, namespace: str, name: str, patch: Obj) -> bool:
        try:
            self._raw("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", patch)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def set_unschedulable(self, node: str, unschedulable: bool) -> None:
        current = self._raw("GET", f"/api/v1/nodes/{node}")
        taints = [
            t
            for t in (current.get("spec") or {}).get("taints") or []
            if t.get("key") != CORDON_TAINT["key"]
        ]
        if unschedulable:
            taints.append(dict(CORDON_TAINT))
        self._raw(
            "PATCH",
            f"/api/v1/nodes/{node}",
            {"spec": {"unschedulable": unschedulable or None, "taints": taints or None}},
        )


def _lines(response: RESTResponse) -> Iterator[bytes]:
    """The non-empty lines of a streamed response body, as they arrive."""
    pending = b""
    for data in response.response.stream(65536):
        pending += data
        *lines, pending = pending.split(b"\n")
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending
