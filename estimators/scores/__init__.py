"""The score estimators on logits: ManoScore (``mano.py``) and the nuclear norm
(``nuclear_norm.py``); a score becomes an accuracy through a
:class:`~estimators.maths.score_map.ScoreMap`.

Siblings of :mod:`estimators.methods` and :mod:`estimators.features`: none imports another.
"""
