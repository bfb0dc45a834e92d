"""GET pods/{name}/log: options, the API server's 400s, and `follow` as a stream that grows."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kubesim import logs
from kubesim.errors import bad_request
from kubesim.resources import POD
from kubesim.sim import Simulation

Obj = dict[str, Any]
FOLLOW_POLL_S = 0.05


def _container(pod: Obj, requested: str) -> str:
    names = [c["name"] for c in pod["spec"]["containers"]]
    name = pod["metadata"]["name"]
    if not requested:
        if len(names) > 1:
            raise bad_request(
                f"a container name must be specified for pod {name}, "
                f"choose one of: [{' '.join(names)}]"
            )
        return names[0]
    if requested not in names:
        raise bad_request(f"container {requested} is not valid for pod {name}")
    return requested


def _int(query: Any, key: str) -> int | None:
    value = query.get(key)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise bad_request(f"{key}: invalid integer {value!r}") from exc


def _run(sim: Simulation, pod: Obj, container: str, previous: bool) -> logs.Run:
    state = sim.kubelet.pods.get(pod["metadata"]["uid"])
    runs = state.runs if state else []
    name = pod["metadata"]["name"]
    if previous:
        if len(runs) < 2:
            raise bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        return runs[-2]
    if not runs:
        reason = "ContainerCreating" if pod["spec"].get("nodeName") else "PodInitializing"
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    return runs[-1]


async def pod_log(
    sim: Simulation, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    stored = sim.api.get(POD, namespace, name)
    pod, q = stored.obj, request.query
    container = _container(pod, q.get("container", ""))
    run = _run(sim, pod, container, q.get("previous") == "true")
    state = sim.kubelet.pods[pod["metadata"]["uid"]]
    seed = f"{pod['metadata']['uid']}/{state.runs.index(run)}"
    tail, since_s = _int(q, "tailLines"), _int(q, "sinceSeconds")
    stamps = q.get("timestamps") == "true"
    now = sim.clock.now()
    since = now - since_s if since_s is not None else None
    text = logs.render(
        list(logs.lines(seed, container, state.node, state.gpus, run, now)), tail, since, stamps
    )
    if q.get("follow") != "true":
        return web.Response(text="".join(text), content_type="text/plain")
    response = web.StreamResponse(
        headers={"Content-Type": "text/plain", "Transfer-Encoding": "chunked"}
    )
    await response.prepare(request)
    await response.write("".join(text).encode())
    sent = now
    while True:
        await asyncio.sleep(FOLLOW_POLL_S)
        now = sim.clock.now()
        fresh = [
            e for e in logs.lines(seed, container, state.node, state.gpus, run, now) if e[0] > sent
        ]
        if fresh:
            await response.write("".join(logs.render(fresh, None, None, stamps)).encode())
            sent = fresh[-1][0]
        if run.finished is not None and run.finished <= now:
            break
    await response.write_eof()
    return response
