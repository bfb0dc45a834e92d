"""`python -m kubesim`: serve a simulated cluster, or inject/clear faults on a running one.

python -m kubesim [--cluster FILE] [--port N] [--kubeconfig OUT] [--speed X] [--token T]
                  [--profile OUT]
python -m kubesim fault inject --server URL --kind gpu-lost --node h100-a-0 [--gpu 3]
python -m kubesim fault list|clear --server URL [--id N | --node NAME]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import signal
import sys
import threading
import urllib.request
from typing import Any

from kubesim.faults import KINDS
from kubesim.server import KubeSim

GC_THRESHOLDS = (5000, 20, 50)
"""The server holds a large, growing heap of acyclic JSON objects, which the default thresholds
have the cyclic collector sweep over and over: a fifth of its CPU under the e2e load."""


def _profile_next_thread(profiler: cProfile.Profile) -> None:
    """Profile the next thread started (the server's loop): cProfile sees only its own thread."""

    def enable(*_: Any) -> None:
        sys.setprofile(None)
        profiler.enable()

    threading.setprofile(enable)


def _serve(args: argparse.Namespace) -> int:
    gc.set_threshold(*GC_THRESHOLDS)
    sim = KubeSim(args.cluster, speed=args.speed, port=args.port, host=args.host, token=args.token)
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        _profile_next_thread(profiler)
    sim.start()
    threading.setprofile(None)
    gc.freeze()  # modules and the cluster as set up live as long as the process
    if args.kubeconfig:
        sim.write_kubeconfig(args.kubeconfig)
    print(
        f"kubesim serving {sim.url} ({len(sim.sim.gpus)} GPU nodes, speed x{args.speed})",
        flush=True,
    )
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    sim.stop()
    if profiler is not None:
        profiler.dump_stats(args.profile)
    return 0


def _request(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{args.server.rstrip('/')}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    if args.token:
        request.add_header("Authorization", f"Bearer {args.token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _fault(args: argparse.Namespace) -> int:
    if args.action == "inject":
        body = {
            "kind": args.kind,
            "node": args.node,
            "gpu": args.gpu,
            "xid": args.xid,
            "link": args.link,
        }
        result = _request(args, "POST", "/kubesim/v1/faults", body)
    elif args.action == "list":
        result = _request(args, "GET", "/kubesim/v1/faults", None)
    else:
        path = f"/kubesim/v1/faults/{args.id}" if args.id else "/kubesim/v1/faults"
        result = _request(
            args, "DELETE", path + (f"?node={args.node}" if args.node and not args.id else ""), None
        )
    print(json.dumps(result, indent=2))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kubesim",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cluster", help="cluster YAML file (default: a small GPU cluster)")
    parser.add_argument("--port", type=int, default=6443)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for this server here")
    parser.add_argument("--speed", type=float, default=1.0, help="simulated seconds per second")
    parser.add_argument("--token", help="require this bearer token")
    parser.add_argument("--profile", help="on exit, write a cProfile of the server loop here")
    sub = parser.add_subparsers(dest="command")
    fault = sub.add_parser("fault", help="inject, list or clear faults on a running server")
    fault.add_argument("action", choices=("inject", "list", "clear"))
    fault.add_argument("--server", default="http://127.0.0.1:6443")
    fault.add_argument("--token")
    fault.add_argument("--kind", choices=KINDS)
    fault.add_argument("--node", default="")
    fault.add_argument("--gpu", type=int, default=0)
    fault.add_argument("--xid", type=int, default=0)
    fault.add_argument("--link", type=int, default=0)
    fault.add_argument("--id", type=int)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return _fault(args) if args.command == "fault" else _serve(args)


if __name__ == "__main__":
    sys.exit(main())
