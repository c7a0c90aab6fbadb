"""The feature methods, which read the classifier's penultimate features besides its logits:
DistCS (``distcs.py``), ALine-S / ALine-D (``aline.py``) and the dispersion score
(``dispersion.py``).

Siblings of :mod:`estimators.methods` and :mod:`estimators.scores`: none imports another.
"""
