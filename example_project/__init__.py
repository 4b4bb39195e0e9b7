"""A small Dagster code location that stores its assets as Lance datasets (see ``definitions``)."""
