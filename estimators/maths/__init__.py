"""Shared maths of the methods, below every method and above :mod:`estimators.core`.

``confidence.py`` (confidence scores MC and NE, softmax helpers), ``temperature.py``
(temperature scaling), ``label_shift.py`` (EM label marginal, the label-shift test),
``_knn.py`` (k-nearest-neighbour distances), ``exact.py`` (square roots with one result on
every CPU), and the two method bases shared by more than one
method folder: ``_softmax.py`` (the temperature-scaled softmax methods) and ``score_map.py``
(the score estimators of ``scores/`` and ``features/``, and the score → accuracy map).
"""
