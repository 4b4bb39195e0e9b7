"""IVF_RQ's decoded per-partition arrays live on private anonymous maps: a forked child's writes
stay in the child (a shared map would let a worker process write into its parent's cache)."""

from __future__ import annotations

import os

import numpy as np

from lance_format.index.vector import rq_layout


def test_a_forked_child_does_not_write_into_the_parents_pages() -> None:
    pages = rq_layout._pages((1024,), np.float32)
    pid = os.fork()
    if pid == 0:  # child: write, then leave without running the parent's cleanup
        pages[:] = 7.0
        os._exit(0)
    os.waitpid(pid, 0)
    assert not pages.any()
