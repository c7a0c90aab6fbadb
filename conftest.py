"""Test-wide isolation: every test process gets its own state and Prefect folders.

Loaded by pytest before anything it collects (the tests and the doctests of ``estimators/``,
``storage/``, ``tasks/`` and ``flows/``, ``pyproject.toml``'s ``testpaths``). The environment
is set before anything imports Prefect (settings are read at import time), so no test or
doctest reads or writes the developer's ``.alsa-bench/`` or ``~/.prefect``; the reproducible
mode's variables are set before numpy and torch load.
"""

from __future__ import annotations

import os
import tempfile

# The reproducible mode's variables before numpy or torch load (the libraries read them once per
# process), as `import flows` does in every pipeline process: the stage tasks the tests run
# in-process check that their process computes with them (tasks/runtime/reproducible.py).
from tasks.runtime.reproducible import apply_environment

apply_environment(True)

_root = tempfile.mkdtemp(prefix="alsa-bench-tests-")
os.environ["ALSA_BENCH_HOME"] = os.path.join(_root, "state")
os.environ["ALSA_BENCH_REPORTS"] = os.path.join(_root, "reports")
os.environ["PREFECT_HOME"] = os.path.join(_root, "prefect-home")
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = os.path.join(_root, "state", "prefect-results")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.pop("PREFECT_API_URL", None)
