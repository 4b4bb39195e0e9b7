"""The codec layer of the table format: models to and from ``lance.table`` protobuf messages.

Only this package (with ``lance_format.schema_codec``, ``lance_format.table.rowids`` and the
file format under ``lance_format.file``) imports ``lance_format._pb`` or ``google.protobuf``;
``tests/test_architecture.py`` enforces it.

* ``wire``: unknown-field bytes and protobuf parsing with named errors.
* ``fragments``: ``DataFile`` / ``DeletionFile`` / ``FragmentMetadata`` / ``BasePath``.
* ``indices``: ``IndexMetadata``.
* ``frag_reuse``: the fragment-reuse index details (``lance.table.FragmentReuseIndexDetails``).
* ``manifest``: manifest files (layout, index section, inline transaction, version summaries).
* ``transaction``: ``Transaction`` and one encoder/decoder per operation.
"""
