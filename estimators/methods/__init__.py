"""The accuracy estimators on logits: AC, DoC, IM, ATC, COT (``baselines.py`` imports them in
the registry's order), ALSA (``alsa/``) and the opt-in shift gate.

Siblings of :mod:`estimators.scores` and :mod:`estimators.features`: none imports another.
"""
