"""Exception hierarchy for lance_format.

Every error the format core raises on bad input is a :class:`LanceError`
subclass whose message names *what* went wrong and *where* (a file path, a
version, a field name), so callers never have to parse a bare ``IndexError``
or ``struct.error``.
"""

from __future__ import annotations


class LanceError(Exception):
    """Base class of every error raised by lance_format."""


# --- storage -------------------------------------------------------------


class StorageError(LanceError):
    """An object store operation failed."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object (file) does not exist."""


class ObjectAlreadyExistsError(StorageError, FileExistsError):
    """A create-only write found the object already present."""


class PathEscapeError(LanceError, ValueError):
    """A relative path would leave the root it is resolved against."""


class UnsupportedSchemeError(StorageError, ValueError):
    """No storage backend is registered for a URI scheme."""


# --- schema and file format ------------------------------------------------


class SchemaError(LanceError, ValueError):
    """A schema cannot be represented in Lance, or two schemas do not match."""


class UnsupportedTypeError(SchemaError, TypeError):
    """An Arrow type has no Lance representation."""


class CorruptFileError(LanceError):
    """A data, manifest or deletion file is malformed or truncated."""


class UnsupportedEncodingError(CorruptFileError):
    """A page uses an encoding this implementation does not know."""


class UnsupportedVersionError(LanceError):
    """A file or data storage version this implementation does not support."""


# --- table -------------------------------------------------------------------


class DatasetNotFoundError(LanceError, FileNotFoundError):
    """No Lance dataset exists at the given URI."""


class DatasetAlreadyExistsError(LanceError, FileExistsError):
    """``mode="create"`` was asked for a URI that already holds a dataset."""


class VersionNotFoundError(LanceError, KeyError):
    """The requested dataset version does not exist."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class TagNotFoundError(VersionNotFoundError):
    """The requested tag does not exist."""


class TagError(LanceError, ValueError):
    """A tag cannot be created, moved or deleted as asked."""


class IncompatibleFeatureError(LanceError):
    """A manifest sets feature flags this implementation cannot honour."""


class CommitConflictError(LanceError):
    """Another writer committed an operation that conflicts with ours."""


class InvalidInputError(LanceError, ValueError):
    """An argument is malformed (bad filter, bad mode, bad index)."""


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


class IndexNotFoundError(LanceError, KeyError):
    """No index with the given name exists in the dataset version."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class IndexExistsError(InvalidInputError):
    """An index with the given name exists and ``replace=False`` was asked."""


class UnsupportedIndexTypeError(InvalidInputError):
    """The index type is unknown, or cannot index the column's data type."""


class UnsupportedFrameTypeError(InvalidInputError, TypeError):
    """A Dagster output or input uses a frame type that no lance_dagster handler stores or loads."""


class CleanupError(LanceError):
    """A version cleanup was refused (e.g. it would remove tagged versions)."""
