"""Table format core (everything below the public facade of ``lance_format``).

Models (plain frozen dataclasses, no protobuf):

* ``models``: ``DataFile`` / ``DeletionFile`` / ``FragmentMetadata`` / ``BasePath``.
* ``index_metadata``: ``IndexMetadata`` (the one index model).
* ``manifest``: the ``Manifest`` model and feature flags.
* ``transaction``: operations (``LanceOperation``) and ``Transaction``.

Codecs: ``codec`` (models to and from protobuf, manifest files) and ``rowids`` (row-id
sequences). ``naming`` builds every object key.

Behaviour:

* ``apply``: one registered function per operation builds the next manifest.
* ``commit`` (the single retry loop), ``conflicts`` / ``rebase``, ``versions``.
* ``read`` (``ReadContext``: the state a dataset handle reads through), ``scan`` (the
  streaming scan engine), ``delete`` and ``writing`` (the delete and write pipelines).
* ``deletion`` (deletion files), ``tags``.
"""
