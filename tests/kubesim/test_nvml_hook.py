"""Canary: agent.nvml relies on private pynvml names; fail loudly if the pinned pynvml changes."""

from __future__ import annotations

import inspect
import threading
from importlib.metadata import version

import pynvml

from agent.nvml import use_library


def test_pinned_pynvml_version_is_the_one_the_hook_was_written_for() -> None:
    assert version("nvidia-ml-py") == "13.615.71", "re-check agent/nvml.py against the new pynvml"


def test_pynvml_still_loads_through_the_private_names_the_hook_sets() -> None:
    assert hasattr(pynvml, "nvmlLib")
    assert isinstance(pynvml._nvmlGetFunctionPointer_cache, dict)
    assert isinstance(pynvml.libLoadLock, type(threading.Lock()))
    loader = inspect.getsource(pynvml._LoadNvmlLibrary)
    assert "if (nvmlLib == None)" in loader, "pynvml would reload the real library over ours"
    lookup = inspect.getsource(pynvml._nvmlGetFunctionPointer)
    assert "_nvmlGetFunctionPointer_cache[name] = getattr(nvmlLib, name)" in lookup


def test_use_library_routes_pynvml_calls_to_the_given_object() -> None:
    calls: list[str] = []

    class Recorder:
        def nvmlInitWithFlags(self, flags: int) -> int:
            calls.append("init")
            return 0

        def nvmlShutdown(self) -> int:
            calls.append("shutdown")
            return 0

    previous = pynvml.nvmlLib
    pynvml._nvmlGetFunctionPointer_cache["nvmlInitWithFlags"] = lambda flags: 999  # a stale pointer
    try:
        use_library(Recorder())
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    finally:
        use_library(previous)
    assert calls == ["init", "shutdown"]
