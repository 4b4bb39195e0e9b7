"""``LanceDataset.commit_batch``: several transactions committed as one version, as pylance 14.0.2 does.

pylance merges a batch of transactions into one (``rust/lance/src/dataset/transaction.rs``); the
case distributed writers produce is a list of ``Append`` transactions, each from one worker's
``write_fragments``. Their fragments become one ``Append`` built on the oldest read version (so the
commit loop checks conflicts against everything committed since any worker read), carrying every
transaction's properties.
"""

from __future__ import annotations

from collections.abc import Sequence

from lance_format.errors import InvalidInputError, NotSupportedError
from lance_format.table.transaction import LanceOperation, Transaction


def merge_transactions(transactions: Sequence[Transaction], where: str) -> Transaction:
    """One transaction equivalent to committing ``transactions`` together.

    Raises:
        InvalidInputError: an empty batch or an item that is not a ``Transaction``.
        NotSupportedError: a batch holding operations other than ``Append``.
    """
    items = list(transactions)
    if not items:
        raise InvalidInputError(f"{where}: commit_batch(): transactions must not be empty")
    for t in items:
        if not isinstance(t, Transaction):
            raise InvalidInputError(f"{where}: commit_batch(): transactions must hold Transaction values, got "
                                    f"{type(t).__name__}")
        if not isinstance(t.operation, LanceOperation.Append):
            raise NotSupportedError(f"{where}: commit_batch(): only Append transactions can be merged, got "
                                    f"{type(t.operation).__name__}")
    fragments = [f for t in items for f in t.operation.fragments]  # type: ignore[attr-defined]
    props: dict[str, str] = {}
    for t in items:
        props.update(t.transaction_properties or {})
    return Transaction(min(t.read_version for t in items), LanceOperation.Append(fragments),
                       transaction_properties=props)


__all__ = ["merge_transactions"]
