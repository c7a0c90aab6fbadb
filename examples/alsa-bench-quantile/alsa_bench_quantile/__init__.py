"""An example alsa-bench plugin (``examples/alsa-bench-quantile``).

* ``cq-bin`` (:mod:`.estimator`): quantile-binned confidence, an estimator;
* ``digits`` (:mod:`.digits`): scikit-learn's 8 x 8 handwritten digits, a dataset (suite
  ``digits``) with a clean and a label-shifted target;
* ``pixel-linear`` (:mod:`.linear`): softmax regression on the pixels, a backbone that attaches
  itself to ``digits``.

alsa-bench finds them through the entry points of ``pyproject.toml``; nothing in alsa-bench
names them.
"""
