"""Read-only dataset checks and history as pylance 14.0.2 offers them: ``validate()``, ``get_transactions()``.

``validate`` checks what pylance's ``Dataset::validate`` (``rust/lance/src/dataset.rs``) checks
from the manifest: fragment ids are unique, every data file names fields of the schema (or the
tombstone -2) at most once, a deletion file never deletes more rows than the fragment holds, and
the data and deletion files exist. It reads no data pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lance_format.errors import CorruptFileError

if TYPE_CHECKING:
    from lance_format.dataset import LanceDataset
    from lance_format.table.transaction import Transaction

_TOMBSTONE = -2


def validate(ds: LanceDataset) -> None:
    """Raise if the checked-out version's manifest is inconsistent or names missing files.

    Raises:
        CorruptFileError: naming the fragment and the file or field at fault.
    """
    manifest, ctx = ds.manifest, ds._ctx
    field_ids = set(_all_ids(ds))
    seen: set[int] = set()
    for frag in manifest.fragments:
        where = f"{ds.uri}: version {ds.version}: fragment {frag.id}"
        if frag.id in seen:
            raise CorruptFileError(f"{where}: the fragment id appears twice in the manifest")
        seen.add(frag.id)
        for df in frag.files:
            named = [f for f in df.fields if f != _TOMBSTONE]
            unknown = sorted(set(named) - field_ids)
            if unknown:
                raise CorruptFileError(f"{where}: data file {df.path} names field ids {unknown} not in the schema")
            if len(set(named)) != len(named):
                raise CorruptFileError(f"{where}: data file {df.path} names a field id twice")
            if not ctx.data_store(df).exists(df.path):
                raise CorruptFileError(f"{where}: data file {df.path} is missing")
        d = frag.deletion_file
        if d is not None:
            deleted = ctx.deleted_offsets(frag)
            if deleted.size > frag.physical_rows or (deleted.size and int(deleted.max()) >= frag.physical_rows):
                raise CorruptFileError(f"{where}: deletion file {d.path(frag.id)} deletes rows past the "
                                       f"fragment's {frag.physical_rows}")


def _all_ids(ds: LanceDataset) -> list[int]:
    out: list[int] = []
    stack = list(ds.manifest.schema.fields)
    while stack:
        f = stack.pop()
        out.append(f.id)
        stack.extend(f.children)
    return out


def recent_transactions(ds: LanceDataset, count: int) -> list[Transaction | None]:
    """Transactions of the checked-out version and the ``count - 1`` before it, newest first.

    A version whose transaction file is absent (old writers) gives ``None``, as in pylance.
    """
    first = max(ds.version - count, 0)
    return [ds.read_transaction(v) for v in range(ds.version, first, -1)]


__all__ = ["recent_transactions", "validate"]
