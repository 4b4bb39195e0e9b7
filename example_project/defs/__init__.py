"""Component definitions (``defs.yaml``) loaded into the example code location."""
