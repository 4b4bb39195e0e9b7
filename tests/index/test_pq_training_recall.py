"""IVF_PQ training in the regime where the codebooks bound recall, against pylance 14.0.2.

Data: 4,000 × 64 float32 around 200 Gaussian centres (noise 0.35 per dimension), 4 fragments,
8 partitions and 8 sub-vectors: many centres share a partition, so what PQ encodes is the
centres' offsets plus the noise, and recall@10 (~0.3) depends on how well the codebooks are
trained, as in ``benchmarks/bench_vector.py`` at 100k and 1M rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_format
from lance_format.index.kind import TrainingData
from lance_format.index.vector import build as vb

from .pq_blobs import DIM, N, blobs

PARTS, SUBS = 8, 8
DATA = blobs(11)
VECTORS, QUERIES = DATA.vectors, DATA.queries
fresh, recall = DATA.fresh, DATA.recall
PARAMS: dict[str, Any] = {"num_partitions": PARTS, "num_sub_vectors": SUBS}


def test_our_index_recalls_as_well_as_pylances_builds_and_pylance_plans_ann(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # Both engines' recall moves by a few hundredths from one training draw to the next on this
    # data (pylance's draws are random, ours seeded): medians of several builds are compared,
    # ours drawing its IVF training rows with other seeds.
    mine = []
    for seed in (7, 8, 9):
        monkeypatch.setattr(vb, "SPLIT_SEED", seed)
        ours = fresh(tmp_path / f"ours{seed}")
        lance_format.dataset(ours).create_index("vec", "IVF_PQ", **PARAMS)
        ds = lance.dataset(ours)
        plan = str(ds.scanner(nearest={"column": "vec", "q": QUERIES[0], "k": 10}, columns=["id"]).explain_plan())
        assert "ANNSubIndex" in plan and "KNNVectorDistance" not in plan
        mine.append(recall(ds))
    theirs = DATA.pylance_recalls(tmp_path, 5, PARAMS)
    assert float(np.median(mine)) >= float(np.median(theirs)) - 0.02, (mine, theirs)


def test_ivf_and_pq_train_on_disjoint_rows_of_one_sample() -> None:
    ivf, quant = vb.split_sample(10_000, 2048, 4096)
    assert ivf.size == 2048 and quant.size == 4096 and not np.intersect1d(ivf, quant).size
    assert (np.diff(ivf) > 0).all() and (np.diff(quant) > 0).all()
    again = vb.split_sample(10_000, 2048, 4096)
    assert np.array_equal(ivf, again[0]) and np.array_equal(quant, again[1])
    # a sample smaller than both asks: each gets every row it can, sharing the fewest
    ivf, quant = vb.split_sample(5000, 2048, 4096)
    assert ivf.size == 2048 and quant.size == 4096 and np.intersect1d(ivf, quant).size == 2048 + 4096 - 5000
    ivf, quant = vb.split_sample(1000, 2048, 4096)
    assert ivf.size == quant.size == 1000


def test_pq_sample_is_asked_beside_the_ivf_sample() -> None:
    # IVF_PQ asks one sample holding both trainings' rows (8 x 16 for the IVF, 256 x 16 for
    # the codebooks); given centroids, only the codebooks' rows
    asked: list[int] = []
    values = pa.FixedSizeListArray.from_arrays(pa.array(VECTORS.ravel()), DIM)

    def sample(n: int) -> TrainingData:
        asked.append(n)
        return TrainingData(values, np.arange(N, dtype=np.uint64))

    params = {"metric": "l2", "sample_rate": 16, "max_iterations": 5, "num_partitions": PARTS,
              "num_sub_vectors": SUBS, "num_bits": 8}
    model = vb.train_model("IVF_PQ", sample, params, "float", N)
    assert asked == [PARTS * 16 + 256 * 16] and model.pq is not None
    vb.train_model("IVF_PQ", sample, {**params, "ivf_centroids": VECTORS[:PARTS]}, "float", N)
    assert asked[-1] == 256 * 16
