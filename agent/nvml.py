"""The one place that reaches into pynvml's loader, to run it over another library object.

pynvml loads libnvidia-ml.so into the module global `nvmlLib` and caches function pointers in
`_nvmlGetFunctionPointer_cache`; pointing both at kubesim's fake NVML lets the agent's ordinary
pynvml code read simulated GPUs. tests/kubesim/test_nvml_hook.py fails if pynvml renames these.
"""

from __future__ import annotations

import pynvml


def use_library(lib: object) -> None:
    """Make pynvml call `lib` (a CDLL, or an object with the same functions) from now on."""
    with pynvml.libLoadLock:
        pynvml.nvmlLib = lib
        pynvml._nvmlGetFunctionPointer_cache.clear()
