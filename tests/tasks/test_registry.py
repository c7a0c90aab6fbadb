"""The dataset registry: every module's SPECS collected, lazily, with suites and modalities."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tasks.data.datasets import DATASETS, available_suites, get_dataset_spec
from tasks.plan import offline_suites, suite_modality
from tasks.stages.versions import PROJECT_ROOT


def test_every_dataset_is_registered_with_its_suite_and_modality() -> None:
    assert list(DATASETS)[:3] == ["fmnist", "fmnist-coarse", "fmnist-binary"]
    found = {n: (s.suite, s.modality, s.online) for n, s in DATASETS.items()}
    assert found.items() >= {
        "fmnist": ("fmnist", "image", False),
        "arxiv-sim": ("graph", "graph", False),
        "ogbn-arxiv": ("ogbn-arxiv", "graph", True),
        "rt-reviews": ("text", "text", False),
        "sotu-party": ("text", "text", False),
        "arrests": ("tabular", "tabular", False),
        "flights-carrier": ("zoo-tabular", "tabular", False),
    }.items()
    assert available_suites()[:2] == ("fmnist", "graph")
    assert offline_suites() == ("fmnist", "graph", "text", "tabular")
    assert suite_modality("graph") == "graph"
    assert get_dataset_spec("fmnist-binary").class_names == ("not-top", "top")
    assert get_dataset_spec("arxiv-sim").module == "tasks.data.datasets.arxiv_sim"


def test_listing_the_registry_touches_no_data(tmp_path: Path) -> None:
    """Import the registries and list every split of every dataset in a fresh interpreter whose
    state folder is empty and whose Fashion-MNIST folder does not exist: nothing is read or
    written, nothing fails."""
    home = tmp_path / "state"
    code = (
        "import json; from tasks.data.datasets import DATASETS; from tasks.data.targets import target_splits;"
        "from tasks.models.backbones import BACKBONES;"
        "print(json.dumps({n: len(target_splits(n)) for n in DATASETS}))"
    )
    env = {"ALSA_BENCH_HOME": str(home), "FASHION_MNIST_DIR": str(tmp_path / "nowhere"),
           "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120, cwd=PROJECT_ROOT, env=env)
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["fmnist"] == 1 + 90 + 6 + 3 and counts["arxiv-sim"] == 1 + 6 + 15
    assert not home.exists()
