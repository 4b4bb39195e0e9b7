"""Frame handlers: the only place a frame library meets Arrow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .arrow import ArrowHandler
from .base import FrameHandler
from .pandas import PandasHandler

__all__ = ["ArrowHandler", "FrameHandler", "PandasHandler", "default_handlers", "handler_for_type",
           "handler_for_value"]


def default_handlers() -> list[FrameHandler]:
    """Handlers of the stock IO manager: pyarrow, then pandas."""
    return [ArrowHandler(), PandasHandler()]


def handler_for_value(handlers: Sequence[FrameHandler], obj: Any, *, where: str) -> FrameHandler:
    """The first handler that can store ``obj``.

    Raises:
        TypeError: naming the value's type and the supported libraries.
    """
    for handler in handlers:
        if handler.handles_value(obj):
            return handler
    names = ", ".join(h.name for h in handlers)
    raise TypeError(f"{where}: cannot store a {type(obj).__module__}.{type(obj).__qualname__}; "
                    f"supported frame libraries: {names}")


def handler_for_type(handlers: Sequence[FrameHandler], tp: Any, *, where: str) -> FrameHandler:
    """The first handler that can load an input annotated with ``tp``.

    Raises:
        TypeError: naming the annotation and the supported libraries.
    """
    for handler in handlers:
        if handler.handles_type(tp):
            return handler
    names = ", ".join(h.name for h in handlers)
    raise TypeError(f"{where}: cannot load an input annotated as {tp!r}; supported frame libraries: {names}")
