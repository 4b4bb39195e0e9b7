"""Table evolution on top of the format core: merge_insert, update, column changes, branches.

Each module builds one transaction from the checked-out version and commits it through
:func:`lance_format.table.commit.commit_transaction`; the public entry points are thin
methods on :class:`lance_format.dataset.LanceDataset`.
"""
