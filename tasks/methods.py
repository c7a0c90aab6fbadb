"""One method registry: every method a run or ``alsa-bench estimate`` can use, resolved once.

Two kinds of method share the ``estimates`` table:

* the **estimators** of :mod:`estimators` (logits in, accuracy out): their registry
  (:func:`estimators.available_estimators`) owns their names, their flags (score methods that need
  a score map, opt-in methods) and their hyper-parameter declarations;
* the **model-aware** methods, which need the trained model and the dataset as well as the logits
  (GNNEvaluator on graphs, :mod:`tasks.models.gnnevaluator`; ProjNorm on images,
  :mod:`tasks.models.projnorm`), run by the estimate stage (:mod:`tasks.stages.model_aware`).
  :data:`MODEL_AWARE_METHODS` says which modalities each applies to; ProjNorm is among a run's
  default methods only where it is affordable (:func:`projnorm_by_default`).

Among the estimators, the **peer methods** (``needs_peer``: GDE) need a second run of the same
dataset and backbone with another seed; the estimate stage leaves them to the peers stage
(:mod:`tasks.stages.peers`), which runs them for every dataset × backbone with two seeds or
more (:func:`peer_method_names`).

This module is the only place that turns method names into a list to run
(:func:`resolve_methods`), checks a method name (:func:`check_method_names`), narrows a list to
the methods that apply to a modality (:func:`methods_for_modality`) and validates
``--param METHOD.NAME=VALUE`` values (:func:`check_method_params`). The CLI, the plan and the
estimate stage all call it, so a name is refused with the same message wherever it comes from.

Examples
--------
>>> "gnnevaluator" in all_method_names() and "alsa-g" in all_method_names()
True
>>> "shift-gate" in default_method_names()
False
>>> methods_for_modality(["alsa-g", "gnnevaluator"], "image")
['alsa-g']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, Final

__all__ = [
    "MODEL_AWARE_METHODS",
    "MODEL_AWARE_MODULES",
    "MODEL_AWARE_SCORES",
    "PROJNORM_ENV",
    "all_method_names",
    "build_estimator",
    "check_method_names",
    "check_method_params",
    "default_method_names",
    "estimator_names",
    "feature_method_names",
    "methods_for_modality",
    "peer_method_names",
    "peer_reading_method_names",
    "projnorm_by_default",
    "model_aware_config",
    "resolve_methods",
    "skip_feature_methods",
    "skip_peer_methods",
]

#: Model-aware method name -> the modalities it applies to.
MODEL_AWARE_METHODS: Final[dict[str, tuple[str, ...]]] = {
    "gnnevaluator": ("graph",), "projnorm": ("image",),
}
#: The model-aware methods that give a score, not an accuracy (mapped by the report as the
#: score estimators are: :mod:`tasks.report.scores`).
MODEL_AWARE_SCORES: Final[tuple[str, ...]] = ("projnorm",)
#: Model-aware method name -> the module that implements it (part of the estimate stage's
#: code version for the datasets it applies to).
MODEL_AWARE_MODULES: Final[dict[str, str]] = {
    "gnnevaluator": "tasks.models.gnnevaluator", "projnorm": "tasks.models.projnorm",
}
#: The environment variable that switches ProjNorm into (``on``) or out of (``off``) a run's
#: default methods; ``auto`` (the default): in where the run's device is a GPU.
PROJNORM_ENV: Final[str] = "ALSA_BENCH_PROJNORM"


def estimator_names(
    *, scores: bool = True, opt_in: bool = True, features: bool = False, peers: bool = False
) -> tuple[str, ...]:
    """The estimators of :mod:`estimators` (logits in, accuracy out), in registry order.

    The one reader of :func:`estimators.available_estimators`: ``scores`` keeps the score
    estimators (``mano``, ``nuclear-norm``, ``entropy``), ``opt_in`` the opt-in ones
    (``shift-gate``), ``features`` the ones that need feature arrays (``distcs``, ``aline-s``,
    ``aline-d``, ``dispersion``: :func:`feature_method_names`), ``peers`` the ones that need a
    peer model (``gde``: :func:`peer_method_names`). ``alsa-bench estimate`` offers these
    (model-aware methods need a trained model).
    """
    from estimators import available_estimators

    return tuple(available_estimators(include_scores=scores, include_opt_in=opt_in,
                                      include_features=features, include_peers=peers))


def peer_method_names() -> tuple[str, ...]:
    """The estimators that need a peer model (``needs_peer``), in registry order.

    Among the pipeline's default methods: the peers stage (:mod:`tasks.stages.peers`) runs
    them on every run whose dataset × backbone has another seed; the estimate stage never
    does. ``alsa-bench estimate`` runs them with ``--peer-val`` / ``--peer-target``.

    >>> peer_method_names()
    ('gde',)
    """
    from estimators import peer_estimators

    return tuple(peer_estimators())


def peer_reading_method_names() -> tuple[str, ...]:
    """The estimators that add peer models to their computation when given (``reads_peers``:
    ALine-S, ALine-D). Where a run has peers, the peers step runs them with every other seed
    of the run's dataset × backbone in their family of models, instead of the estimate stage.

    >>> peer_reading_method_names()
    ('aline-s', 'aline-d')
    """
    from estimators import ESTIMATORS

    return tuple(k for k, cls in ESTIMATORS.items() if getattr(cls, "reads_peers", False))


def skip_peer_methods(
    methods: Sequence[str], have_peers: bool, why: str
) -> tuple[list[str], str | None]:
    """Drop the peer methods of ``methods`` when no peer model is at hand.

    Returns
    -------
    kept : list of str
        ``methods`` without the peer methods (all of them when ``have_peers``).
    note : str or None
        One line naming the skipped methods and why, or None when none was skipped.

    >>> skip_peer_methods(["ac", "gde"], False, "no --peer-val/--peer-target was given")
    (['ac'], "skipped gde: it needs a peer model (the same architecture trained with another seed), and no --peer-val/--peer-target was given.")
    """
    needs = set(peer_method_names())
    skipped = [m for m in methods if m in needs]
    if have_peers or not skipped:
        return list(methods), None
    verb = "it needs" if len(skipped) == 1 else "they need"
    return ([m for m in methods if m not in needs],
            f"skipped {', '.join(skipped)}: {verb} a peer model (the same architecture trained "
            f"with another seed), and {why}.")


def feature_method_names() -> tuple[str, ...]:
    """The estimators that need feature arrays (``needs_features``), in registry order.

    They are among the pipeline's default methods (last); where no features are at hand (a run
    whose backbone has no linear output layer; a CLI file without a ``features`` array) they are
    skipped with a note (:func:`skip_feature_methods`).

    >>> "distcs" in feature_method_names() and "alsa-g" not in feature_method_names()
    True
    """
    from estimators import feature_estimators

    return tuple(feature_estimators())


def skip_feature_methods(
    methods: Sequence[str], have_features: bool, why: str
) -> tuple[list[str], str | None]:
    """Drop the feature methods of ``methods`` when no features are at hand.

    ``why`` says where features are missing (``"run 'r1' has none stored"``).

    Returns
    -------
    kept : list of str
        ``methods`` without the feature methods (all of them when ``have_features``).
    note : str or None
        One line naming the skipped methods and why, or None when none was skipped.

    >>> skip_feature_methods(["ac", "distcs"], False, "run 'r1' has none stored")
    (['ac'], "skipped distcs: it needs the classifier's features, and run 'r1' has none stored.")
    """
    needs = set(feature_method_names())
    skipped = [m for m in methods if m in needs]
    if have_features or not skipped:
        return list(methods), None
    verb = "it needs" if len(skipped) == 1 else "they need"
    return ([m for m in methods if m not in needs],
            f"skipped {', '.join(skipped)}: {verb} the classifier's features, and {why}.")


def all_method_names() -> tuple[str, ...]:
    """Every method the estimate stage can run: the estimator registry, then model-aware ones.

    The feature methods (:func:`feature_method_names`) are among them (the stage skips them
    with a note for a run that stores no features), and so are the score estimators
    (``needs_score_map``: ``mano``, ``nuclear-norm``): the
    stage stores their score (``diagnostics["score"]``) with no accuracy (NULL), and the report
    maps scores to accuracies on each run's labelled corruption family
    (:mod:`tasks.report.scores`), apart from the methods that estimate accuracy themselves.
    """
    return (*estimator_names(features=True, peers=True), *MODEL_AWARE_METHODS)


def default_method_names() -> tuple[str, ...]:
    """The methods a run uses when none is named: :func:`all_method_names` without the opt-in
    estimators (``shift-gate``, ``auto``), which run only with ``--method``. The feature
    methods (:func:`feature_method_names`) come next; a run whose extract stage stored no
    features (:mod:`storage.features`) skips them with a note. The peer methods
    (:func:`peer_method_names`: GDE) come last, run by the peers stage where a run has a
    peer."""
    logit_only = estimator_names(opt_in=False, features=False)
    with_features = [m for m in estimator_names(opt_in=False, features=True)
                     if m not in logit_only]
    return (*logit_only, *MODEL_AWARE_METHODS, *with_features, *peer_method_names())


def check_method_names(methods: Sequence[str], *, argument: str = "methods") -> list[str]:
    """Refuse a method list that is a bare string, empty, repeats a name or names an unknown one.

    Parameters
    ----------
    methods : sequence of str
        Registry keys.
    argument : str, default "methods"
        How the caller's argument is named in messages (``"--method"`` on the command line;
        a flag-style name gets the command line's wording for an unknown name,
        ``method must be one of ...; got 'x'.``).

    Returns
    -------
    list of str
        ``methods`` as a list, in the order given.

    Raises
    ------
    ValueError
        Naming ``argument``, what was expected and what came.
    """
    if isinstance(methods, str):
        raise ValueError(
            f"{argument} must be a sequence of registry keys, not a single string; got "
            f"{methods!r} (did you mean [{methods!r}]?)."
        )
    names = list(methods)
    known = all_method_names()
    if not names:
        raise ValueError(
            f"{argument} must name at least one estimator; got an empty list. "
            f"Available: {', '.join(known)}."
        )
    unknown = [m for m in names if m not in known]
    if unknown and argument.startswith("--"):
        raise ValueError(
            f"{argument.lstrip('-')} must be one of {', '.join(known)}; got "
            f"{', '.join(map(repr, unknown))}."
        )
    if unknown:
        raise ValueError(
            f"Unknown estimator(s) {unknown} in {argument}; available: {', '.join(known)}."
        )
    repeated = sorted({m for m in names if names.count(m) > 1})
    if repeated:
        raise ValueError(f"{argument} must not repeat a method; got {repeated} more than once.")
    return names


def resolve_methods(
    methods: Sequence[str] | None, method_params: Mapping[str, Mapping[str, Any]] | None
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Check the method list and per-method parameters; default to :func:`default_method_names`.

    Returns
    -------
    names : list of str
        The methods to run, in order.
    params : dict
        Method -> its keyword hyper-parameters (only for methods among ``names``).

    Raises
    ------
    ValueError
        If a name is unknown or repeated, the list is empty, or ``method_params`` names a method
        that will not run or is not a mapping.
    """
    names = list(default_method_names()) if methods is None else check_method_names(methods)
    params: dict[str, dict[str, Any]] = {}
    for method, values in (method_params or {}).items():
        if method not in names:
            raise ValueError(
                f"method_params has parameters for {method!r}, which is not among the methods "
                f"to run {names}."
            )
        if not isinstance(values, Mapping):
            raise ValueError(
                f"method_params[{method!r}] must be a mapping of parameter names to values; "
                f"got {type(values).__name__}."
            )
        params[method] = dict(values)
    return names, params


def methods_for_modality(
    methods: Sequence[str], modality: str, *, where: str | None = None
) -> list[str]:
    """The methods of ``methods`` that apply to a run of ``modality`` (model-aware ones only
    apply to their modalities; every estimator applies everywhere).

    Parameters
    ----------
    methods : sequence of str
        Registry keys.
    modality : str
        The runs' modality (``image``, ``text``, ``graph``).
    where : str, optional
        What the runs are (``"suite 'fmnist'"``). When given, the names are checked
        (:func:`check_method_names`) and a list of which none applies is refused.

    Raises
    ------
    ValueError
        With ``where``: a name is unknown or repeated, or none of the methods applies.
    """
    if where is not None:
        check_method_names(methods)
    kept = [m for m in methods
            if m not in MODEL_AWARE_METHODS or modality in MODEL_AWARE_METHODS[m]]
    if where is not None and not kept:
        needs = sorted({x for m in methods for x in MODEL_AWARE_METHODS.get(m, ())})
        raise ValueError(
            f"none of the methods {', '.join(methods)} applies to {where} ({modality}): "
            f"{', '.join(methods)} needs a {'/'.join(needs)} run; add a logit method or drop "
            f"the suite."
        )
    return kept


def projnorm_by_default(device: str = "auto") -> bool:
    """Whether ProjNorm is among a run's default methods: where it is affordable.

    ProjNorm fine-tunes the network once per target split (:mod:`tasks.models.projnorm`): on a
    GPU, with the authors' 500 steps, seconds per split; on two CPU cores even at a tenth of the
    steps about a second per split for the offline suites' small networks and far more for
    ResNets (docs/PERFORMANCE.md, "ProjNorm"). So it is in the default methods where the run's
    device is a GPU, and runs on the CPU only when named (``--method projnorm``) or switched
    on with ``ALSA_BENCH_PROJNORM=on`` (``off`` keeps it out everywhere; ``auto``, the default,
    decides by the device).

    Raises
    ------
    ValueError
        If ``ALSA_BENCH_PROJNORM`` is set to anything but ``on``, ``off`` or ``auto``.
    """
    import os

    value = os.environ.get(PROJNORM_ENV, "auto").strip().lower()
    if value not in ("on", "off", "auto"):
        raise ValueError(f"{PROJNORM_ENV} must be on, off or auto; got {value!r}.")
    if value != "auto":
        return value == "on"
    from tasks.runtime.devices import resolve_device

    return resolve_device(device).type == "cuda"


def _config_class(method: str) -> Any:
    if method == "gnnevaluator":
        from tasks.models.gnnevaluator import GNNEvaluatorConfig

        return GNNEvaluatorConfig
    from tasks.models.projnorm import ProjNormConfig

    return ProjNormConfig


def model_aware_config(method: str, params: Mapping[str, Any], seed: int = 0) -> Any:
    """The configuration object of a model-aware method, validated.

    Parameters
    ----------
    method : {"gnnevaluator", "projnorm"}
        Which method.
    params : mapping
        Its hyper-parameters (fields of :class:`tasks.models.gnnevaluator.GNNEvaluatorConfig`
        or :class:`tasks.models.projnorm.ProjNormConfig`).
    seed : int, default 0
        The seed, unless ``params`` sets one.

    Raises
    ------
    ValueError
        If the method is unknown, a name is not a parameter, or a value is out of range.
    """
    if method not in MODEL_AWARE_METHODS:
        raise ValueError(
            f"method must be one of {', '.join(MODEL_AWARE_METHODS)}; got {method!r}."
        )
    config = _config_class(method)
    known = {f.name for f in fields(config)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(
            f"method_params[{method!r}] has unknown parameter(s) {unknown}; known: "
            f"{', '.join(sorted(known))}."
        )
    values = {"seed": int(seed), **params}
    for key, value in list(values.items()):
        if isinstance(value, list):
            values[key] = tuple(value)
    return config(**values)


def check_method_params(
    params: Mapping[str, Mapping[str, Any]], methods: Sequence[str] | None = None
) -> None:
    """Validate ``--param`` values as the methods will: names, types and ranges.

    Parameters
    ----------
    params : mapping
        Method -> parameter -> value (``flows.params.parse_param_options``).
    methods : sequence of str, optional
        The methods that will run (``--method``); parameters for another method are refused.
        None means every method.

    Raises
    ------
    ValueError
        If a method is unknown or not among ``methods``, a parameter name is unknown, or a value
        fails the method's validation; the message names the ``--param`` at fault.
    """
    from estimators import check_estimator_params

    known = all_method_names()
    for method, values in params.items():
        where = ", ".join(f"{method}.{k}" for k in values)
        if method not in known:
            raise ValueError(
                f"--param {where}: method must be one of {', '.join(known)}; got {method!r}."
            )
        if methods is not None and method not in methods:
            raise ValueError(
                f"--param {where}: {method!r} is not among the methods to run "
                f"({', '.join(methods)}); add --method {method} or drop the parameter."
            )
        try:
            if method in MODEL_AWARE_METHODS:
                model_aware_config(method, values)
            else:
                check_estimator_params(method, values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"--param {where}: {exc}") from None


def build_estimator(method: str, params: Mapping[str, Any], run_seed: int) -> Any:
    """Instantiate ``method`` with ``params``, seeding it with the run's seed unless given.

    Every estimator whose ``seed`` hyper-parameter acts in the configuration (ALSA's anchors;
    COT only in its sampled mode) gets ``run_seed`` when ``params`` does not set ``seed`` itself,
    so anchors follow the classifier's seed; an estimator whose seed would do nothing keeps its
    default, and no inert-parameter warning is raised for a seed the user never set.

    Parameters
    ----------
    method : str
        Registry key.
    params : Mapping[str, Any]
        Keyword hyper-parameters.
    run_seed : int
        Seed of the run (``runs.seed``).

    Returns
    -------
    estimators.core.base.Estimator
        Unfitted.

    Raises
    ------
    ValueError
        If the method or a parameter is unknown.
    """
    from estimators import get_estimator
    from estimators.core.params import inert_parameters

    estimator = get_estimator(method, **params)
    if "seed" in estimator.get_params() and "seed" not in params:
        # seed what draws at random in this configuration (ALSA's anchors, COT's sampled mode);
        # elsewhere (COT's exact transport) the run's seed would do nothing but earn the
        # inert-parameter warning meant for a user's own setting
        seeded = {**estimator.get_params(), "seed": int(run_seed)}
        declared = getattr(type(estimator), "PARAMS", ())
        if all(p.name != "seed" for p in inert_parameters(declared, seeded, _ANY_SIZE)):
            estimator.set_params(seed=int(run_seed))
    return estimator


#: A validation size for :func:`build_estimator`'s check of the seed (no seed's effect depends on it).
_ANY_SIZE = 10_000
