"""The trust layer: how far to trust an estimate, and ``auto``; the top floor of the house.

``shift_signals.py`` (label-free signals of how far a target is from validation),
``shift_band.py`` (the conformal shift band), ``stacking.py`` (``auto``'s combination),
``calibration_artifact.py`` (the fitted bands and combinations: the shipped file
``data/calibration.json``, ``alsa-bench calibrate``'s own, ``ALSA_BENCH_CALIBRATION``),
``attach_band.py`` (the band of one estimate, computed when asked for) and ``auto.py``.

It may import every layer below; nothing below imports it (``estimators/__init__.py`` installs
:func:`~estimators.trust.attach_band.shift_band` in the core's band slot).
"""
