"""Where the example keeps its datasets: ``$LANCE_EXAMPLE_ROOT``, default ``example_project/.data/lance``."""

import os
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent
DATA_DIR = PROJECT_DIR / ".data"
# The YAML components read the root from the environment too, so it is set once here.
LANCE_ROOT = os.environ.setdefault("LANCE_EXAMPLE_ROOT", str(DATA_DIR / "lance"))
