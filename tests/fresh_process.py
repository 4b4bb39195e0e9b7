"""Run a snippet in a new interpreter and read its answer back (import state is per process).

The snippet leaves its answer in the variable ``out``: a JSON-able value, or a function given
``loaded(prefixes)`` (the loaded modules that are one of ``prefixes`` or under them) returning one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_FOOTER = ("def loaded(prefixes):\n"
           "    return sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in prefixes))\n"
           "print(json.dumps(out(loaded) if callable(out) else out))\n")


def run_fresh(code: str, timeout: int = 180) -> dict[str, object]:
    """The ``out`` that ``code`` computes in a new interpreter started in the repository root."""
    script = f"import json, sys\n{code}\n{_FOOTER}"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
