"""The frame-handler interface: each frame library only converts its objects to and from Arrow."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from ..reader import ArrowSource


class FrameHandler(ABC):
    """Converts one frame library's objects to and from Arrow.

    All Lance work (commits, metadata, version pinning) is done once, in Arrow, by the IO manager
    and the resource; a handler is only the edge between Arrow and a library. Subclass it (and
    list the subclass in ``LanceIOManager.frame_handlers()``) to add a library such as polars.
    """

    #: Short name used in error messages.
    name: str = "frame"
    #: The types it stores as outputs, as error messages name them.
    output_types: tuple[str, ...] = ()
    #: The annotations it loads inputs as, as error messages name them.
    input_types: tuple[str, ...] = ()
    #: Whether the handler stores outputs (a load-only handler is left out of "cannot store" errors).
    stores_outputs: bool = True
    #: Whether an engine's workers write the data files (see ``lance_dagster.distributed``) instead
    #: of :meth:`to_arrow` handing the rows to the IO manager.
    distributed: bool = False

    @abstractmethod
    def handles_type(self, tp: Any) -> bool:
        """Whether an input annotated with ``tp`` should be loaded by this handler."""

    @abstractmethod
    def handles_value(self, obj: Any) -> bool:
        """Whether an output value ``obj`` can be stored by this handler."""

    @abstractmethod
    def to_arrow(self, obj: Any) -> pa.Table | pa.RecordBatchReader:
        """Convert an output value to an Arrow table or batch stream."""

    @abstractmethod
    def from_arrow(self, source: ArrowSource, tp: Any) -> Any:
        """Build the object an input annotated with ``tp`` expects from a dataset scan."""


def import_extra(module: str, extra: str) -> Any:
    """Import ``module`` for a handler that is registered even when its library is absent.

    Raises:
        ImportError: naming the ``lance-dagster`` extra that installs the library.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module.split('.')[0]} is not installed; install the extra: "
                          f"pip install 'lance-dagster[{extra}]'") from exc


def is_class_named(tp: Any, module_prefix: str, name: str) -> bool:
    """Match a class by module and name, without importing the library that defines it."""
    if not isinstance(tp, type):
        return False
    return any(
        c.__name__ == name and c.__module__.split(".")[0] == module_prefix for c in tp.__mro__
    )
