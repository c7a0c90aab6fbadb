"""CI runs both test tiers, and no test of the reliability tier sits where neither runs it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_unit_and_the_reliability_tiers() -> None:
    commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    assert commands[-2:] == ["make test", "make test-reliability"]


def test_every_reliability_test_is_in_the_reliability_target() -> None:
    """``make test`` deselects the ``reliability`` marker; ``make test-reliability`` runs the
    files its recipe names: a marked test in any other file would never run."""
    recipe = re.search(r"^test-reliability:.*\n\t(.*)$", (ROOT / "Makefile").read_text(),
                       re.MULTILINE)
    assert recipe is not None
    named = set(re.findall(r"tests/\S+\.py", recipe.group(1)))
    marked = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
              if p != Path(__file__) and "mark.reliability" in p.read_text(encoding="utf-8")}
    assert marked and marked <= named, marked - named
