"""HTTP handlers: authentication, routing to the verbs, responses as the real server sends them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from kubesim import discovery, errors, listoptions, openapi, tables
from kubesim.api import ListResult
from kubesim.faults import FaultInjector
from kubesim.podlog import pod_log
from kubesim.resources import POD, Resource
from kubesim.routing import Route, parse
from kubesim.selectors import parse_field_selector, parse_label_selector
from kubesim.sim import Simulation
from kubesim.store import Stored, dumps
from kubesim.watch import BOOKMARK_INTERVAL_S, WatchFilter, WatchStream, bookmark, event_line

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
JSON = "application/json"


def _json(body: Obj | bytes, status: int = 200) -> web.Response:
    raw = body if isinstance(body, bytes) else dumps(body)
    return web.Response(body=raw, status=status, content_type=JSON)


def _list_body(r: Resource, result: ListResult) -> bytes:
    meta: Obj = {"resourceVersion": str(result.rv)}
    if result.continue_token:
        meta["continue"] = result.continue_token
        meta["remainingItemCount"] = result.remaining
    head = dumps({"kind": f"{r.kind}List", "apiVersion": r.group_version, "metadata": meta})
    return head[:-1] + b',"items":[' + b",".join(s.raw for s in result.items) + b"]}"


class Server:
    """The aiohttp application around one simulation."""

    def __init__(
        self, sim: Simulation, faults: FaultInjector, token: str | None, kick: Callable[[], None]
    ) -> None:
        self.sim = sim
        self.faults = faults
        self.token = token
        self.kick = kick
        self.stats: dict[str, list[float]] = {}
        self.address = ""

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
                raise errors.unauthorized()
            return await handler(request)
        except errors.ApiError as exc:
            return _json(exc.status(), exc.code)
        finally:
            entry = self.stats.setdefault(request.method, [0, 0.0])
            entry[0] += 1
            entry[1] += time.perf_counter() - started

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        static = self._static(path)
        if static is not None:
            return _json(static)
        if path.startswith("/openapi/"):
            return _json(openapi.document(path))
        if path.startswith("/kubesim/v1/"):
            return await self._kubesim(request, path)
        route = parse(path)
        try:
            return await self._verb(request, route)
        finally:
            if request.method != "GET":
                self.kick()

    def _static(self, path: str) -> Obj | None:
        if path == "/version":
            return discovery.VERSION
        if path == "/api":
            return discovery.core_versions(self.address)
        if path == "/apis":
            return discovery.group_list()
        if path in ("/healthz", "/readyz", "/livez"):
            return {"status": "ok"}
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            return discovery.resource_list("", parts[1]) or self._missing(path)
        if parts[0] == "apis" and len(parts) == 2:
            return discovery.group(parts[1]) or self._missing(path)
        if parts[0] == "apis" and len(parts) == 3:
            return discovery.resource_list(parts[1], parts[2]) or self._missing(path)
        return None

    @staticmethod
    def _missing(path: str) -> Obj:
        raise errors.ApiError(
            404, "NotFound", f"the server could not find the requested resource ({path})"
        )

    async def _body(self, request: web.Request) -> Any:
        try:
            return orjson.loads(await request.read() or b"{}")
        except ValueError as exc:
            raise errors.bad_request(
                f"the body of the request could not be decoded: {exc}"
            ) from exc

    async def _verb(self, request: web.Request, route: Route) -> web.StreamResponse:
        api, r, method = self.sim.api, route.resource, request.method
        if route.sub == "log" and method == "GET":
            return await pod_log(self.sim, request, route.ns, route.name)
        if route.sub == "eviction" and method == "POST":
            return self._evict(route, await self._body(request))
        if not route.name:
            return await self._collection(request, route)
        if method == "GET":
            stored = api.get(r, route.ns, route.name)
            if tables.wants_table(request.headers.get("Accept", "")):
                return _json(self._table(request, r, [stored], ""))
            return _json(stored.raw)
        if method == "PUT":
            return _json(
                api.update(r, route.ns, route.name, await self._body(request), route.sub).raw
            )
        if method == "PATCH":
            ctype = request.headers.get("Content-Type", "")
            return _json(
                api.patch(r, route.ns, route.name, await self._body(request), ctype, route.sub).raw
            )
        if method == "DELETE":
            return self._delete(r, route.ns, route.name, await self._delete_options(request))
        raise errors.method_not_allowed(method)

    async def _delete_options(self, request: web.Request) -> Obj:
        options: Obj = await self._body(request) if request.can_read_body else {}
        if "propagationPolicy" in request.query:
            options["propagationPolicy"] = request.query["propagationPolicy"]
        if "gracePeriodSeconds" in request.query:
            options["gracePeriodSeconds"] = int(request.query["gracePeriodSeconds"])
        return options

    def _delete(self, r: Resource, ns: str, name: str, options: Obj) -> web.Response:
        stored, present = self.sim.api.delete(r, ns, name, options)
        if present or r is POD:
            return _json(stored.raw)
        meta = stored.obj["metadata"]
        return _json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": name, "group": r.group, "kind": r.plural, "uid": meta["uid"]},
            }
        )

    def _evict(self, route: Route, body: Obj) -> web.Response:
        self.sim.api.get(POD, route.ns, route.name)
        self.sim.api.delete(POD, route.ns, route.name, body.get("deleteOptions") or {})
        return _json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
            201,
        )

    def _filter(self, request: web.Request, route: Route) -> WatchFilter:
        q = request.query
        return WatchFilter(
            route.namespace if route.resource.namespaced else None,
            parse_label_selector(q.get("labelSelector")),
            parse_field_selector(q.get("fieldSelector")),
        )

    async def _collection(self, request: web.Request, route: Route) -> web.StreamResponse:
        api, r, q = self.sim.api, route.resource, request.query
        if request.method == "POST":
            created = api.create(r, route.ns, await self._body(request))
            return _json(created.raw, 201)
        flt = self._filter(request, route)
        watching = request.method == "GET" and q.get("watch") in ("true", "1")
        listoptions.validate(q, watching)
        if request.method == "DELETE":
            options = await self._delete_options(request)
            result = api.list_objects(r, flt.namespace, flt.labels, flt.fields)
            for stored in result.items:
                api.delete(r, stored.namespace, stored.name, options)
            return _json(_list_body(r, result))
        if request.method != "GET":
            raise errors.method_not_allowed(request.method)
        if watching:
            return await self._watch(request, r, flt)
        limit = int(q.get("limit") or 0)
        result = api.list_objects(
            r, flt.namespace, flt.labels, flt.fields, limit, q.get("continue", "")
        )
        if tables.wants_table(request.headers.get("Accept", "")):
            return _json(self._table(request, r, result.items, result.continue_token))
        return _json(_list_body(r, result))

    def _table(self, request: web.Request, r: Resource, items: list[Stored], cont: str) -> bytes:
        include = request.query.get("includeObject", "Metadata")
        return tables.table(r, items, self.sim.store.rv, self.sim.clock.now(), include, cont)

    async def _watch(
        self, request: web.Request, r: Resource, flt: WatchFilter
    ) -> web.StreamResponse:
        q = request.query
        rv = q.get("resourceVersion")
        if rv and not rv.isdigit():
            raise errors.bad_request(f"invalid resource version: {rv}")
        encode = event_line
        if tables.wants_table(request.headers.get("Accept", "")):
            include = q.get("includeObject", "Metadata")

            def encode(type_: str, stored: Stored) -> bytes:
                row = tables.table(r, [stored], self.sim.store.rv, self.sim.clock.now(), include)
                return b'{"type":"' + type_.encode() + b'","object":' + row + b"}\n"

        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        send = listoptions.send_initial_events(q)
        # Without sendInitialEvents, "" and "0" start from the current objects (the legacy
        # default); a streaming list ends them with a bookmark if the client takes bookmarks.
        initial = send if send is not None else rv in (None, "", "0")
        stream = WatchStream(self.sim.store, r, flt, encode)
        response = web.StreamResponse(
            headers={"Content-Type": JSON, "Transfer-Encoding": "chunked"}
        )
        try:
            stream.start(rv, initial, end_bookmark=bool(send) and bookmarks)
        except errors.ApiError as exc:  # e.g. 410 Expired: an ERROR event, as the watch cache sends
            await response.prepare(request)
            await response.write(b'{"type":"ERROR","object":' + dumps(exc.status()) + b"}\n")
            await response.write_eof()
            return response
        timeout = float(q.get("timeoutSeconds") or 1800)
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline, next_bookmark = loop.time() + timeout, loop.time() + BOOKMARK_INTERVAL_S
        try:
            while (left := deadline - loop.time()) > 0:
                chunk = await stream.next_chunk(min(left, next_bookmark - loop.time()))
                if chunk:
                    await response.write(chunk)
                    continue
                if bookmarks and loop.time() >= next_bookmark:
                    await response.write(bookmark(r, self.sim.store.rv))
                next_bookmark = loop.time() + BOOKMARK_INTERVAL_S
        finally:
            stream.stop()
        await response.write_eof()
        return response

    async def _kubesim(self, request: web.Request, path: str) -> web.StreamResponse:
        parts = path.split("/")[3:]
        if parts == ["stats"]:
            return _json(
                {
                    "requests": {m: {"count": c, "seconds": s} for m, (c, s) in self.stats.items()},
                    "objects": {k: self.sim.store.count(k) for k in self.sim.store.data},
                    "resourceVersion": self.sim.store.rv,
                }
            )
        if parts[:1] != ["faults"]:
            self._missing(path)
        try:
            return self._faults(request.method, parts[1:], await self._body(request), request.query)
        except ValueError as exc:
            raise errors.bad_request(str(exc)) from exc
        finally:
            self.kick()

    def _faults(self, method: str, rest: list[str], body: Obj, query: Any) -> web.Response:
        if method == "GET":
            return _json({"items": [f.as_dict() for f in self.faults.active.values()]})
        if method == "POST" and not rest:
            fault = self.faults.inject(
                str(body.get("kind", "")),
                str(body.get("node", "")),
                int(body.get("gpu", 0)),
                int(body.get("xid", 0)),
                int(body.get("link", 0)),
            )
            return _json(fault.as_dict(), 201)
        if method == "DELETE":
            cleared = self.faults.clear(int(rest[0]) if rest else None, query.get("node"))
            return _json({"items": [f.as_dict() for f in cleared]})
        raise errors.method_not_allowed(method)
