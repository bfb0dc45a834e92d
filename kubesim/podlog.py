"""GET pods/{name}/log: options, the API server's 400s, and `follow` as a stream that grows."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kubesim import logs
from kubesim.errors import bad_request
from kubesim.kubelet import PodState
from kubesim.resources import POD
from kubesim.sim import Simulation

Obj = dict[str, Any]


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


@dataclass(frozen=True)
class LogSource:
    """One container run's log, as lines are written by a given time."""

    uid: str
    seed: str
    container: str
    state: PodState
    run: logs.Run

    def lines(self, now: float, after: float | None = None) -> list[tuple[float, str]]:
        state = self.state
        return list(
            logs.lines(self.seed, self.container, state.node, state.gpus, self.run, now, after)
        )


def _source(sim: Simulation, pod: Obj, query: Any) -> LogSource:
    container = _container(pod, query.get("container", ""))
    run = _run(sim, pod, container, query.get("previous") == "true")
    uid = pod["metadata"]["uid"]
    state = sim.kubelet.pods[uid]
    return LogSource(uid, f"{uid}/{state.runs.index(run)}", container, state, run)


async def pod_log(
    sim: Simulation, request: web.Request, namespace: str, name: str
) -> web.StreamResponse:
    q = request.query
    source = _source(sim, sim.api.get(POD, namespace, name).obj, q)
    tail, since_s = _int(q, "tailLines"), _int(q, "sinceSeconds")
    stamps = q.get("timestamps") == "true"
    now = sim.clock.now()
    since = now - since_s if since_s is not None else None
    text = "".join(logs.render(source.lines(now), tail, since, stamps))
    if q.get("follow") != "true":
        return web.Response(text=text, content_type="text/plain")
    response = web.StreamResponse(
        headers={"Content-Type": "text/plain", "Transfer-Encoding": "chunked"}
    )
    await response.prepare(request)
    await _follow(sim, response, source, text, now, stamps)
    return response


async def _follow(
    sim: Simulation,
    response: web.StreamResponse,
    source: LogSource,
    text: str,
    sent: float,
    stamps: bool,
) -> None:
    """Write `text`, then each line as the run writes it; the last ones go with the end."""
    run, now = source.run, sent
    while run.finished is None or run.finished > now:
        await response.write(text.encode())
        await _next_change(sim, source.uid, logs.next_line_at(run, sent))
        now = sim.clock.now()
        fresh = source.lines(now, after=sent)
        text = "".join(logs.render(fresh, None, None, stamps))
        sent = fresh[-1][0] if fresh else sent
    await response.write_eof(text.encode())


async def _next_change(sim: Simulation, uid: str, due: float) -> None:
    """Until the clock reaches `due` or the pod changes (its container may have stopped).

    Both wake-ups come from the simulation's tick, so a follower costs nothing in between.
    """
    woken = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    sim.timers.at(due, wake)
    sim.kubelet.wake_on_change(uid, wake)
    try:
        await woken
    finally:
        sim.kubelet.forget_wake(uid, wake)
