"""The sealed-group rule (estimators/trust/sealed.py) and its committed list."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from estimators.trust import sealed
from tasks.data.datasets import DATASETS

DATA = Path(sealed.__file__).with_name("data") / "sealed_groups.json"
REFRESH = ("python -c \"import json; from estimators.trust.sealed import sealed_record; "
           "from tasks.data.datasets import DATASETS; open('estimators/trust/data/"
           "sealed_groups.json','w').write(json.dumps(sealed_record(s.source_group for s in "
           "DATASETS.values()), indent=1) + '\\n')\"")


def _independent_verdict(name: str) -> tuple[str, bool]:
    digest = hashlib.sha256(("alsa-bench/issue-31/sealed-groups/v1:" + name).encode()).hexdigest()
    return digest, int(digest, 16) < (1 << 256) // 3


def test_the_rule_is_the_fixed_salted_hash_and_threshold() -> None:
    for name in ("fashion-mnist", "parlspeech-v2", "titanic", "zoo-geo"):
        digest, verdict = _independent_verdict(name)
        assert sealed.group_hash(name) == digest
        assert sealed.is_sealed(name) is verdict
    assert sealed.sealed_groups(["fashion-mnist", "parlspeech-v2"]) == frozenset(
        n for n in ("fashion-mnist", "parlspeech-v2") if _independent_verdict(n)[1])


def test_committed_list_matches_the_rule_and_todays_groups() -> None:
    record = json.loads(DATA.read_text())
    assert record["salt"] == sealed.SALT
    groups = {g["group"]: g for g in record["groups"]}
    today = {spec.source_group for spec in DATASETS.values()}
    assert set(groups) == today, f"sealed_groups.json is stale; refresh it with: {REFRESH}"
    for name, entry in groups.items():
        digest, verdict = _independent_verdict(name)
        assert entry["sha256"] == digest and entry["sealed"] is verdict, name
    share = sum(g["sealed"] for g in groups.values()) / len(groups)
    assert share >= 0.25, f"only {share:.0%} of today's groups are sealed"


def test_a_source_is_one_group() -> None:
    assert {DATASETS[k].source_group for k in ("fmnist", "fmnist-binary", "fmnist-coarse")} == {
        "fashion-mnist"}
    assert {DATASETS[k].source_group for k in ("zoo-parl-uk", "zoo-parl-de", "zoo-parl-nl")} == {
        "parlspeech-v2"}
    assert DATASETS["titanic"].source_group == "titanic"


@pytest.mark.parametrize("bad", ["", None, 3])
def test_a_group_name_must_be_a_non_empty_string(bad) -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        sealed.group_hash(bad)
