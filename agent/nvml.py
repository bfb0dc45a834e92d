"""The one place that reaches into pynvml's loader, to run it over another library object.

pynvml loads libnvidia-ml.so into the module global `nvmlLib` and caches function pointers in
`_nvmlGetFunctionPointer_cache`; pointing both at kubesim's fake NVML lets the agent's ordinary
pynvml code read simulated GPUs. tests/kubesim/test_nvml_hook.py fails if pynvml renames these.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pynvml


def use_library(lib: object) -> None:
    """Make pynvml call `lib` (a CDLL, or an object with the same functions) from now on."""
    with pynvml.libLoadLock:
        pynvml.nvmlLib = lib
        pynvml._nvmlGetFunctionPointer_cache.clear()


class _PerThreadLibrary:
    """Routes each NVML call to the library of the calling thread (several nodes, one process).

    pynvml holds one library for the whole process, so the embedded demo, which runs one agent
    thread per simulated node, installs this router once and gives every thread its own library.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def bind(self, lib: object) -> None:
        self._local.lib = lib

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            # Answer as the C library would: a thread without a library is uninitialised, a
            # function its library lacks is not found (pynvml raises the matching NVMLError).
            lib = getattr(self._local, "lib", None)
            if lib is None:
                return pynvml.NVML_ERROR_UNINITIALIZED
            function = getattr(lib, name, None)
            if function is None:
                return pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
            return function(*args)

        return call


_router = _PerThreadLibrary()


def use_library_in_this_thread(lib: object) -> None:
    """Make pynvml calls from the current thread reach `lib`; other threads keep their own."""
    with pynvml.libLoadLock:
        if pynvml.nvmlLib is not _router:
            pynvml.nvmlLib = _router
            pynvml._nvmlGetFunctionPointer_cache.clear()
    _router.bind(lib)
