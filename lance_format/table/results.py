"""What ``delete`` and ``update`` return: pylance's ``DeleteResult`` / ``UpdateResult``.

pylance declares them as ``TypedDict``s, so at run time they are plain dicts
(``{"num_deleted_rows": n}``, ``{"num_rows_updated": n}``). Ours are ``dict`` subclasses with the
same single key, so code written for pylance (``r["num_deleted_rows"]``, ``r == {...}``,
``json.dumps(r)``, printing) works unchanged, and the count is also an attribute.
"""

from __future__ import annotations


class DeleteResult(dict[str, int]):
    """``{"num_deleted_rows": n}``: rows a ``delete`` removed (also ``.num_deleted_rows``)."""

    def __init__(self, num_deleted_rows: int) -> None:
        super().__init__(num_deleted_rows=int(num_deleted_rows))

    @property
    def num_deleted_rows(self) -> int:
        """Rows deleted."""
        return self["num_deleted_rows"]


class UpdateResult(dict[str, int]):
    """``{"num_rows_updated": n}``: rows an ``update`` rewrote (also ``.num_rows_updated``)."""

    def __init__(self, num_rows_updated: int) -> None:
        super().__init__(num_rows_updated=int(num_rows_updated))

    @property
    def num_rows_updated(self) -> int:
        """Rows updated."""
        return self["num_rows_updated"]


__all__ = ["DeleteResult", "UpdateResult"]
