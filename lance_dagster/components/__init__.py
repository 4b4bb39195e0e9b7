"""Dagster components (``defs.yaml``) for Lance datasets."""

from .lance_datasets import LanceDatasetsComponent

__all__ = ["LanceDatasetsComponent"]
