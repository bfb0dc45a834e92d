"""Reading and writing the ctypes arguments pynvml passes (byref outputs, handles, buffers)."""

from __future__ import annotations

import ctypes
from typing import Any


def out(arg: Any) -> Any:
    """The object behind `byref(x)` (or `x` itself when passed directly)."""
    return getattr(arg, "_obj", arg)


def address(pointer: Any) -> int:
    """The address an opaque handle (a ctypes POINTER) points at; 0 for NULL."""
    return ctypes.cast(out(pointer), ctypes.c_void_p).value or 0


def set_pointer(target: Any, value: int) -> None:
    """Make the POINTER instance `target` (an output handle) point at `value`."""
    ctypes.memmove(
        ctypes.addressof(target),
        ctypes.byref(ctypes.c_void_p(value)),
        ctypes.sizeof(ctypes.c_void_p),
    )


def write_string(buffer: Any, size: Any, text: str) -> bool:
    """Fill a create_string_buffer output; False when it is too small."""
    raw = text.encode()
    if len(raw) + 1 > int(getattr(size, "value", size)):
        return False
    out(buffer).value = raw
    return True


def field_type(struct: Any, name: str) -> Any:
    return dict(type(struct)._fields_)[name]
