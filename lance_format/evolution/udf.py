"""pylance's ``batch_udf``: add-columns functions with a declared output schema and a resumable checkpoint.

``add_columns`` calls a :class:`BatchUDF` once per batch of every fragment. With a
``checkpoint_file``, each batch's result is saved in a SQLite file as it is computed, and when a
fragment's new data file is written the fragment is saved there instead of its batches; an
``add_columns`` that fails (or whose process dies) and is called again with the same file resumes:
saved fragments keep their data files, saved batches are not computed again. After the commit the
file is removed. The file's tables are pylance's (``batches(fragment_id, batch_index, result)``
with pickled record batches and ``fragments(fragment_id, data)`` with the fragment's JSON), as in
pylance 14.0.2's ``lance/udf.py``.
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

from lance_format.errors import InvalidInputError
from lance_format.table.models import DataFile, FragmentMetadata

__all__ = ["BatchUDF", "BatchUDFCheckpoint", "batch_udf", "checkpoint_of", "checkpointed_batches",
           "saved_files", "save_files"]


class BatchUDFCheckpoint:
    """Results of a :class:`BatchUDF` saved in a SQLite file until the columns are committed."""

    class BatchInfo(NamedTuple):
        """Which batch of which fragment a result belongs to."""

        fragment_id: int
        batch_index: int

    def __init__(self, path: str | Path) -> None:
        self.path = path
        # a connection per call: sqlite3 connections are not shareable across threads
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS batches (fragment_id INT, batch_index INT, result BLOB)")
            conn.execute("CREATE TABLE IF NOT EXISTS fragments (fragment_id INT, data BLOB)")
            conn.commit()

    def cleanup(self) -> None:
        """Remove the checkpoint file."""
        os.remove(self.path)

    def get_batch(self, info: BatchInfo) -> pa.RecordBatch | None:
        """The saved result of one batch, if any."""
        with closing(sqlite3.connect(self.path)) as conn:
            row = conn.execute("SELECT result FROM batches WHERE fragment_id = ? AND batch_index = ?",
                               (info.fragment_id, info.batch_index)).fetchone()
        # the file is the user's own checkpoint, written by this class (or pylance's)
        return None if row is None else pickle.loads(row[0])  # noqa: S301

    def insert_batch(self, info: BatchInfo, batch: pa.RecordBatch) -> None:
        """Save the result of one batch."""
        with closing(sqlite3.connect(self.path)) as conn:
            conn.execute("INSERT INTO batches (fragment_id, batch_index, result) VALUES (?, ?, ?)",
                         (info.fragment_id, info.batch_index, pickle.dumps(batch)))
            conn.commit()

    def get_fragment(self, fragment_id: int) -> str | None:
        """The saved fragment (JSON text) of a fragment whose new data file is written."""
        with closing(sqlite3.connect(self.path)) as conn:
            row = conn.execute("SELECT data FROM fragments WHERE fragment_id = ?", (fragment_id,)).fetchone()
        return None if row is None else str(row[0])

    def insert_fragment(self, fragment_id: int, fragment: str) -> None:
        """Save a written fragment (JSON text) and drop its saved batches."""
        with closing(sqlite3.connect(self.path)) as conn:
            conn.execute("INSERT INTO fragments (fragment_id, data) VALUES (?, ?)", (fragment_id, fragment))
            conn.execute("DELETE FROM batches WHERE fragment_id = ?", (fragment_id,))
            conn.commit()


class BatchUDF:
    """A function from a record batch to a record batch of new columns, for ``add_columns``.

    Args:
        func: The function (it may also return a pandas DataFrame).
        output_schema: Schema of what it returns; learnt from the first result when ``None``.
        checkpoint_file: Where to save results until the commit (see the module docstring).
    """

    def __init__(self, func: Callable[[pa.RecordBatch], Any], output_schema: pa.Schema | None = None,
                 checkpoint_file: str | Path | None = None) -> None:
        self.func = func
        self.output_schema = output_schema
        self.cache = BatchUDFCheckpoint(checkpoint_file) if checkpoint_file is not None else None

    def __call__(self, batch: pa.RecordBatch) -> Any:
        """Call the function itself (so it can be tested as written)."""
        return self.func(batch)

    def _call(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        result = self.func(batch)
        if type(result).__name__ == "DataFrame" and hasattr(result, "to_numpy"):  # pandas, as pylance takes it
            result = pa.RecordBatch.from_pandas(result, preserve_index=False)
        if isinstance(result, pa.Table):
            result = result.combine_chunks().to_batches()[0] if result.num_rows else \
                pa.RecordBatch.from_pylist([], schema=result.schema)
        if self.output_schema is None and isinstance(result, pa.RecordBatch):
            self.output_schema = result.schema
        if not isinstance(result, pa.RecordBatch) or not result.schema.equals(self.output_schema):
            got = result.schema if isinstance(result, pa.RecordBatch) else type(result).__name__
            raise InvalidInputError(f"batch_udf: the function's output does not match its output schema; "
                                    f"expected {self.output_schema}, got {got}")
        return result


def batch_udf(output_schema: pa.Schema | None = None, checkpoint_file: str | Path | None = None
              ) -> Callable[[Callable[[pa.RecordBatch], Any]], BatchUDF]:
    """Decorator making a function a :class:`BatchUDF` for ``LanceDataset.add_columns``.

    Args:
        output_schema: Schema of the batches it returns (learnt from the first one when ``None``).
        checkpoint_file: A file saving results until the commit, so a failed ``add_columns`` resumes.
    """

    def inner(func: Callable[[pa.RecordBatch], Any]) -> BatchUDF:
        return BatchUDF(func, output_schema, checkpoint_file)

    return inner


def checkpoint_of(fn: Any) -> BatchUDFCheckpoint | None:
    """The checkpoint of an add-columns function, if it is a :class:`BatchUDF` with one."""
    return fn.cache if isinstance(fn, BatchUDF) else None


def checkpointed_batches(fn: Any, fragment_id: int, batches: Iterator[pa.RecordBatch]
                         ) -> Iterator[tuple[pa.RecordBatch, Any]]:
    """``(batch, fn(batch))`` per batch: saved results reused, new ones saved (when ``fn`` has a checkpoint)."""
    cache = checkpoint_of(fn)
    call = fn._call if isinstance(fn, BatchUDF) else fn
    for index, batch in enumerate(batches):
        info = BatchUDFCheckpoint.BatchInfo(fragment_id, index)
        saved = cache.get_batch(info) if cache is not None else None
        if saved is not None:
            yield batch, saved
            continue
        result = call(batch)
        if cache is not None and isinstance(result, pa.RecordBatch):
            cache.insert_batch(info, result)
        yield batch, result


def saved_files(fn: Any, fragment_id: int) -> tuple[DataFile, ...] | None:
    """The new data files of a fragment finished in an earlier attempt, if saved."""
    cache = checkpoint_of(fn)
    data = cache.get_fragment(fragment_id) if cache is not None else None
    return None if data is None else FragmentMetadata.from_json(data).files


def save_files(fn: Any, frag: FragmentMetadata, files: tuple[DataFile, ...]) -> None:
    """Save a fragment's new data files (their batches are dropped) when ``fn`` has a checkpoint."""
    cache = checkpoint_of(fn)
    if cache is not None:
        cache.insert_fragment(frag.id, json.dumps(FragmentMetadata(frag.id, files, frag.physical_rows).to_json()))
