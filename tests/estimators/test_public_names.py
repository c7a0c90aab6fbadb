"""``from estimators import ...`` keeps every public name it had before estimators/ was split
into its layer folders (issue 34), and the sub-packages are where the layers say."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

#: The public names of ``estimators`` before the move (its ``__all__`` then), written out here
#: rather than read from the package, so that a name dropped by a later edit fails this test.
PUBLIC_BEFORE_THE_MOVE = (
    "AccuracyEstimate", "ConvergenceWarning", "DegenerateValidationWarning", "ESTIMATORS",
    "Estimator", "FeatureFallbackWarning", "InertParameterWarning", "NotFittedError", "Param",
    "ScoreEstimator", "ScoreMap", "SmallSampleWarning", "available_estimators",
    "check_estimator_params", "estimator_params", "feature_estimators", "get_estimator",
    "leave_one_group_out", "logits_from_probabilities", "register", "score_estimators",
)


@pytest.mark.parametrize("name", PUBLIC_BEFORE_THE_MOVE)
def test_every_public_name_still_imports_from_the_top(name: str) -> None:
    module = importlib.import_module("estimators")
    assert name in module.__all__
    namespace: dict[str, object] = {}
    exec(f"from estimators import {name}", namespace)  # noqa: S102  (what users write)
    assert namespace[name] is getattr(module, name)


@pytest.mark.parametrize("module, layer", [
    ("estimators.core.base", "core"), ("estimators.maths.confidence", "maths"),
    ("estimators.maths.score_map", "maths"), ("estimators.methods.alsa.estimator", "methods"),
    ("estimators.scores.mano", "scores"), ("estimators.features.distcs", "features"),
    ("estimators.trust.calibration_artifact", "trust"), ("estimators.trust.attach_band", "trust"),
])
def test_modules_live_in_their_layer_folder(module: str, layer: str) -> None:
    assert importlib.import_module(module).__name__.split(".")[1] == layer


@pytest.mark.parametrize("old", [
    "base.py", "calibration.py", "shift_band.py", "_shift_hook.py", "alsa", "data",
])
def test_the_flat_files_are_gone(old: str) -> None:
    # (checked as files: an editable install of another checkout in the same environment could
    # still resolve the old dotted names to that checkout's modules)
    import estimators

    assert not (Path(estimators.__file__).parent / old).exists()
