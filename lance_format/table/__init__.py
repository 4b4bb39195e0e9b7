"""Table format core.

* ``naming``: manifest (V1/V2), transaction and data-file names.
* ``fragment``: ``DataFile`` / ``DeletionFile`` / ``FragmentMetadata`` models and codec.
* ``manifest``: the ``Manifest`` model, manifest file layout, feature flags.
* ``transaction``: operations (``LanceOperation``), ``Transaction`` and codec.
* ``versions``: finding and loading versions, the latest-version hint.
* ``conflicts`` / ``rebase``: conflict matrix and deletion-vector rebase.
* ``commit``: ``build_manifest`` (base + operation) and the single retry loop.
* ``deletion``, ``tags``, ``rowids``: deletion files, tags, row-id sequences.
"""
