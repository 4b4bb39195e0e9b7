"""Exception hierarchy for lance_format.

Every error the format core raises on bad input is a :class:`LanceError`
subclass whose message names *what* went wrong and *where* (a file path, a
version, a field name), so callers never have to parse a bare ``IndexError``
or ``struct.error``.

Each class is also an instance of every builtin exception pylance 14.0.2 raises in the
situations where we raise it (measured over the bad inputs of ``tests/safety``; the table is
``tests/parity/test_exceptions.py``), so code written against pylance, ``except ValueError`` or
``except OSError``, catches ours too. pylance is not consistent (a bad ``limit`` is a
``TypeError``, an ``OverflowError`` or a ``ValueError`` depending on the value; a bad filter a
``ValueError`` in ``to_table`` and an ``OSError`` in ``count_rows``), so some classes carry
several builtins. None of these builtins conflict in instance layout (only ``OSError`` has its
own, and the others share ``BaseException``'s). Not followed: pylance's ``AttributeError`` for
a filter that is not a string, its ``PanicException`` for a few values, and its ``KeyError``
for an unknown index column (ours: :class:`InvalidInputError`, which stays out of ``KeyError``
so that ``except KeyError`` around a mapping lookup never swallows bad input).
"""

from __future__ import annotations


class LanceError(Exception):
    """Base class of every error raised by lance_format."""


# --- storage -------------------------------------------------------------


class StorageError(LanceError, OSError):
    """An object store operation failed (pylance: ``OSError``)."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object (file) does not exist."""


class ObjectAlreadyExistsError(StorageError, FileExistsError):
    """A create-only write found the object already present."""


class PathEscapeError(LanceError, ValueError):
    """A relative path would leave the root it is resolved against."""


class UnsupportedSchemeError(StorageError, ValueError):
    """No storage backend is registered for a URI scheme."""


# --- schema and file format ------------------------------------------------


class SchemaError(LanceError, ValueError, OSError):
    """A schema cannot be represented in Lance, or two schemas do not match.

    pylance raises ``ValueError`` for a schema it cannot convert and ``OSError`` for one that
    does not match the dataset's (an append with an unknown column, ``add_columns`` of an
    existing name, ``alter_columns`` of an unknown path).
    """


class UnsupportedTypeError(SchemaError, TypeError):
    """An Arrow type has no Lance representation."""


class CorruptFileError(LanceError):
    """A data, manifest or deletion file is malformed or truncated."""


class UnsupportedEncodingError(CorruptFileError):
    """A page uses an encoding this implementation does not know."""


class UnsupportedVersionError(LanceError, ValueError):
    """A file or data storage version this implementation does not support (pylance: ``ValueError``)."""


# --- table -------------------------------------------------------------------


class DatasetNotFoundError(LanceError, FileNotFoundError, ValueError):
    """No Lance dataset exists at the given URI (pylance: ``ValueError``)."""


class DatasetAlreadyExistsError(LanceError, FileExistsError):
    """``mode="create"`` was asked for a URI that already holds a dataset."""


class VersionNotFoundError(LanceError, KeyError, ValueError, OverflowError, OSError):
    """The requested dataset version does not exist.

    pylance: ``ValueError`` for a version (or tag target) that does not exist, ``OverflowError``
    for a negative or 64-bit-overflowing number, ``OSError`` for a missing tag in
    ``checkout_version`` or a branch from a missing version. ``KeyError`` is ours (a version
    is looked up like a key) and makes ``str()`` need the override below.
    """

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class TagNotFoundError(VersionNotFoundError):
    """The requested tag does not exist."""


class TagError(LanceError, ValueError, TypeError, OSError):
    """A tag cannot be created, moved or deleted as asked.

    pylance: ``OSError`` for a malformed tag or branch name, ``TypeError`` for a name that is
    not a string, ``ValueError`` otherwise.
    """


class IncompatibleFeatureError(LanceError):
    """A manifest sets feature flags this implementation cannot honour."""


class CommitConflictError(LanceError, OSError):
    """Another writer committed an operation that conflicts with ours.

    pylance's ``lance.commit.CommitConflictError`` is an ``OSError``, retryable or not.
    """


class InvalidInputError(LanceError, ValueError, TypeError, OverflowError, OSError):
    """An argument is malformed (bad filter, bad mode, bad index).

    pylance raises ``ValueError`` for most, ``TypeError`` for an argument of the wrong type,
    ``OverflowError`` for a number out of its integer range and ``OSError`` for what its Rust
    core refuses (a filter in ``count_rows``/``delete``, ``merge_insert`` and ``add_columns``
    arguments, URIs, an empty fragment).
    """


class RetryableCommitConflictError(CommitConflictError):
    """A concurrent commit touched the same data; re-run the operation on the new version."""


class MissingVersionError(RetryableCommitConflictError):
    """A version committed after a transaction's read version was removed before it could be checked.

    The transaction is refused: landing on top of versions it cannot see could undo their
    deletes or duplicate their rows. Re-run the operation on the latest version.
    """


class NotSupportedError(LanceError, NotImplementedError):
    """A pylance option or feature this implementation does not provide (never silently ignored)."""


# --- indices ---------------------------------------------------------------------


class IndexNotFoundError(LanceError, KeyError, RuntimeError):
    """No index with the given name exists in the dataset version (pylance's ``drop_index``: ``RuntimeError``)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class IndexExistsError(InvalidInputError):
    """An index with the given name exists and ``replace=False`` was asked."""


class UnsupportedIndexTypeError(InvalidInputError, NotImplementedError):
    """The index type is unknown (pylance: ``NotImplementedError``), or cannot index the column's data type."""


class IndexBuildRefusedError(InvalidInputError, RuntimeError):
    """pylance's index builder refuses the column and parameters (pylance: ``RuntimeError``), e.g. a
    multivector index with another metric than cosine."""


class UnsupportedFrameTypeError(InvalidInputError, TypeError):
    """A Dagster output or input uses a frame type that no lance_dagster handler stores or loads."""


class CleanupError(LanceError):
    """A version cleanup was refused (e.g. it would remove tagged versions)."""
