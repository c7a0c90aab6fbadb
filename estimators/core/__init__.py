"""The floor of the house: what every estimator shares and nothing above it changes.

``base.py`` (the :class:`~estimators.core.base.Estimator` contract, the
:class:`~estimators.core.base.AccuracyEstimate` result, the sampling interval),
``band_slot.py`` (how a result reaches the shift band without importing the trust layer),
``params.py`` (hyper-parameter declarations), ``registry.py`` (registry keys),
``exceptions.py``, ``_validation.py`` and ``_features.py`` (input checks and their messages),
``threads.py`` (torch threads), ``param_docs.py`` (``docs/ESTIMATORS.md``'s tables).

Imports nothing from the other layers of :mod:`estimators`.
"""
