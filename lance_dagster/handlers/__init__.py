"""Frame handlers: the only place a frame library meets Arrow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lance_format.errors import UnsupportedFrameTypeError

from .arrow import ArrowHandler
from .base import FrameHandler
from .dataset import LanceDatasetHandler
from .pandas import PandasHandler
from .polars import PolarsHandler
from .spark import SparkHandler

__all__ = ["ArrowHandler", "FrameHandler", "LanceDatasetHandler", "PandasHandler", "PolarsHandler",
           "SparkHandler", "default_handlers", "handler_for_type", "handler_for_value"]


def default_handlers() -> list[FrameHandler]:
    """Handlers of the stock IO manager: pyarrow, pandas, polars, Spark, then ``LanceDataset`` inputs."""
    return [ArrowHandler(), PandasHandler(), PolarsHandler(), SparkHandler(), LanceDatasetHandler()]


def handler_for_value(handlers: Sequence[FrameHandler], obj: Any, *, where: str) -> FrameHandler:
    """The first handler that can store ``obj``.

    Raises:
        UnsupportedFrameTypeError: naming the value's type and the supported libraries.
    """
    for handler in handlers:
        if handler.handles_value(obj):
            return handler
    names = ", ".join(h.name for h in handlers if h.stores_outputs)
    raise UnsupportedFrameTypeError(f"{where}: cannot store a {type(obj).__module__}.{type(obj).__qualname__}; "
                                    f"supported frame libraries: {names}")


def handler_for_type(handlers: Sequence[FrameHandler], tp: Any, *, where: str) -> FrameHandler:
    """The first handler that can load an input annotated with ``tp``.

    Raises:
        UnsupportedFrameTypeError: naming the annotation and the supported libraries.
    """
    for handler in handlers:
        if handler.handles_type(tp):
            return handler
    names = ", ".join(h.name for h in handlers)
    raise UnsupportedFrameTypeError(f"{where}: cannot load an input annotated as {tp!r}; supported frame "
                                    f"libraries: {names}")
