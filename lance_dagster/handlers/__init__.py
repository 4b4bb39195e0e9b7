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
        UnsupportedFrameTypeError: naming the value's type and the types that can be stored.
    """
    for handler in handlers:
        if handler.handles_value(obj):
            return handler
    raise UnsupportedFrameTypeError(f"{where}: LanceIOManager cannot store a {_type_name(type(obj))}; return one "
                                    f"of {_supported(handlers, outputs=True)}")


def handler_for_type(handlers: Sequence[FrameHandler], tp: Any, *, where: str) -> FrameHandler:
    """The first handler that can load an input annotated with ``tp``.

    Raises:
        UnsupportedFrameTypeError: naming the annotation and the types inputs can be loaded as.
    """
    for handler in handlers:
        if handler.handles_type(tp):
            return handler
    shown = _type_name(tp) if isinstance(tp, type) else repr(tp)
    raise UnsupportedFrameTypeError(f"{where}: LanceIOManager cannot load an input annotated as {shown}; "
                                    f"annotate it as one of {_supported(handlers, outputs=False)}")


def _type_name(tp: type) -> str:
    return tp.__qualname__ if tp.__module__ == "builtins" else f"{tp.__module__}.{tp.__qualname__}"


def _supported(handlers: Sequence[FrameHandler], *, outputs: bool) -> str:
    names: list[str] = []
    for h in handlers:
        if outputs and not h.stores_outputs:
            continue
        declared = h.output_types if outputs else h.input_types
        names.extend(declared or (h.name,))  # a custom handler that declares none is named by its library
    return ", ".join(names)
