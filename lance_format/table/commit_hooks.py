"""What a reader of the commit protocol needs without loading it: commit locks, after-commit hooks.

``dataset()`` checks its ``commit_lock`` argument and the facade registers its after-commit hook
at import; both happen in processes that never commit. They live here, apart from the retry loop
in :mod:`lance_format.table.commit` (which loads conflicts, rebase, transaction models: ~60 ms of
import), which re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, cast

from lance_format.errors import InvalidInputError

if TYPE_CHECKING:
    from lance_format.storage import ObjectStore
    from lance_format.table.manifest import Manifest

DEFAULT_MAX_RETRIES = 20

#: Run with ``(store, new manifest)`` after every successful commit, whatever made it (lance's
#: post-commit ``auto_cleanup_hook`` sits at the same place). Layers above the table register
#: here since this layer cannot import them; a hook must not raise (the commit has happened).
AfterCommit = Callable[["ObjectStore", "Manifest"], None]
_AFTER_COMMIT: list[AfterCommit] = []

#: pylance's ``CommitLock``: called with the version about to be committed, it returns a context
#: manager held while that version's manifest is written (for stores without an atomic create).
CommitLock = Callable[[int], AbstractContextManager[Any]]


def register_after_commit(hook: AfterCommit) -> AfterCommit:
    """Run ``hook`` after every successful commit (once, however often registered)."""
    if hook not in _AFTER_COMMIT:
        _AFTER_COMMIT.append(hook)
    return hook


def run_after_commit(store: ObjectStore, manifest: Manifest) -> None:
    """Run the after-commit hooks for a manifest that just landed (every manifest write calls this)."""
    for hook in _AFTER_COMMIT:
        hook(store, manifest)


def check_commit_lock(lock: Any) -> CommitLock | None:
    """``lock`` as a commit lock (``None`` allowed), refused as pylance refuses it.

    Raises:
        InvalidInputError: it is not callable (a ``TypeError``, as pylance's).
    """
    if lock is not None and not callable(lock):
        raise InvalidInputError(f"commit_lock must be a function, got {type(lock)}")
    return cast("CommitLock | None", lock)
