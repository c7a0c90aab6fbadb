r"""ProjNorm (Yu et al., ICML 2022): distance in parameter space after a pseudo-label fine-tune.

Yu, Yang, Wei, Ma and Steinhardt, *Predicting Out-of-Distribution Error with the Projection
Norm*, ICML 2022 (code: ``yaodongyu/ProjNorm``: ``projnorm.py``, ``init_ref_model.py``,
``main.py``). It needs the trained network and its initialisation, not only logits, so it lives
beside the stages as GNNEvaluator does (:mod:`tasks.stages.model_aware`).

Method
------
Let :math:`f` be the trained classifier (the *base* model) and :math:`\theta_0` the
initialisation it was trained from (here: the run's seeded initialisation, rebuilt exactly as
the train stage built it; the authors': ImageNet weights with a seeded new head, which is what
the COT backbones' builders give).

1. **Reference copy.** From :math:`\theta_0`, fine-tune on the *training* data with its true
   labels: :math:`\theta_{ref}`. Once per run.
2. **Pseudo copy.** From :math:`\theta_0` again, fine-tune on the *target* split with the labels
   :math:`\hat y = \arg\max f(x)` that the base model (in eval mode) gives each batch:
   :math:`\theta_{T}`. Once per target split.
3. **Score.** :math:`\mathrm{ProjNorm}(T) = \lVert \theta_{ref} - \theta_{T} \rVert_2`, the L2
   norm of the difference of every trainable parameter (not the batch-norm running statistics,
   which are buffers: the authors' ``_weight_diff_norm_init`` iterates ``parameters()``). It
   grows with the target error; the paper reports its correlation, and the benchmark maps it to
   an accuracy as it maps MaNo's score (:mod:`tasks.report.scores`).

Both fine-tunes follow the authors' ``update_ref_model`` / ``update_pseudo_model``: SGD with
learning rate :math:`10^{-3}`, momentum 0.9, no weight decay, a cosine schedule
(``CosineAnnealingLR(T_max=steps)``, stepped after every step), mini-batches of 128, cross
entropy, the copy in train mode (batch-norm statistics update, dropout active), and ``steps``
steps over a shuffled loader that reshuffles when it runs out (``iter(data_loader)`` again).
The shuffles here are ``torch.randperm(n, generator=g)`` with one ``torch.Generator`` seeded by
``seed`` per fine-tune (what ``DataLoader(shuffle=True, generator=g)`` draws), batches of the
permutation in order, the last one short (``drop_last=False``); torch's global generator is
seeded with ``seed`` too at the start of each fine-tune, so dropout (the offline MLP has some)
draws the same masks every time and a split's score is a pure function of its inputs.

Steps
-----
The authors run 500 steps (``--pseudo_iters 500``). That is the default on a GPU
(:data:`GPU_STEPS`); on the CPU the default is :data:`CPU_STEPS` = 50, a tenth, declared in
every row's parameters (``steps``, ``steps_scale``) and in the report: one ProjNorm per split
on the offline suites' 100 target splits per run would otherwise cost tens of minutes per run
on two cores (``docs/PERFORMANCE.md``, "ProjNorm").

Inputs
------
Samples are turned into model inputs one batch at a time with the dataset's ``to_inputs``
(:func:`tasks.models.modalities.image._batch`, the image adapter's own), so the fine-tunes see
exactly what training saw. Image modality only.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np
import torch
from torch import nn

__all__ = [
    "CPU_STEPS",
    "GPU_STEPS",
    "FittedProjNorm",
    "ProjNormConfig",
    "batch_order",
    "finetune",
    "fit_projnorm",
    "parameter_distance",
]

#: The authors' number of fine-tuning steps (``--pseudo_iters 500``), the default on a GPU.
GPU_STEPS: Final[int] = 500
#: The default on the CPU: a tenth of the authors' steps (declared as ``steps_scale`` = 0.1).
CPU_STEPS: Final[int] = 50


@dataclass(frozen=True)
class ProjNormConfig:
    """Hyper-parameters of :func:`fit_projnorm` (the authors' values by default).

    Attributes
    ----------
    steps : int or None
        SGD steps of each fine-tune; None: :data:`GPU_STEPS` on CUDA, :data:`CPU_STEPS` on
        the CPU.
    lr : float
        Initial learning rate of the cosine schedule (1e-3).
    momentum : float
        SGD momentum (0.9).
    batch_size : int
        Rows per step (128).
    seed : int
        Seed of the batch orders (the run's seed unless given).
    """

    steps: int | None = None
    lr: float = 1e-3
    momentum: float = 0.9
    batch_size: int = 128
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps is not None and (isinstance(self.steps, bool)
                                       or not isinstance(self.steps, int) or self.steps < 1):
            raise ValueError(f"steps must be an integer >= 1 or None; got {self.steps!r}.")
        for name in ("lr", "momentum"):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or not math.isfinite(float(value)) or float(value) < 0 or (
                    name == "lr" and float(value) == 0):
                bound = "> 0" if name == "lr" else ">= 0"
                raise ValueError(f"{name} must be a finite number {bound}; got {value!r}.")
        if (isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int)
                or self.batch_size < 1):
            raise ValueError(f"batch_size must be an integer >= 1; got {self.batch_size!r}.")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0; got {self.seed!r}.")

    def resolved_steps(self, device: torch.device) -> int:
        """``steps``, or the device's default when None."""
        if self.steps is not None:
            return int(self.steps)
        return GPU_STEPS if device.type == "cuda" else CPU_STEPS


def batch_order(n: int, batch_size: int, steps: int, seed: int) -> Iterator[np.ndarray]:
    """The row indices of each of ``steps`` batches: shuffled passes over ``n`` rows.

    Each pass is ``torch.randperm(n, generator=g)`` (one generator seeded with ``seed`` for the
    whole fine-tune), cut into batches of ``batch_size`` in order, the last one short; a new pass
    starts when one runs out, as the authors' loop re-creates its loader's iterator.

    >>> [b.tolist() for b in batch_order(5, 2, 4, seed=0)]
    [[4, 0], [1, 3], [2], [3, 4]]
    """
    if n < 1:
        raise ValueError(f"a fine-tune needs at least one row; got n={n}.")
    generator = torch.Generator().manual_seed(int(seed))
    done = 0
    while done < steps:
        perm = torch.randperm(n, generator=generator).numpy()
        for start in range(0, n, batch_size):
            if done == steps:
                return
            yield perm[start:start + batch_size]
            done += 1


def finetune(
    model: nn.Module,
    batches: Callable[[np.ndarray], torch.Tensor],
    labels: Callable[[np.ndarray, torch.Tensor], torch.Tensor],
    n: int,
    config: ProjNormConfig,
    device: torch.device,
) -> dict[str, Any]:
    """Fine-tune ``model`` in place for ``config.resolved_steps(device)`` steps (module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        The copy to train, on ``device``.
    batches : callable
        ``batches(rows) -> inputs``: the model inputs of the rows at these positions.
    labels : callable
        ``labels(rows, inputs) -> targets``: the rows' labels (true ones, or the base model's
        argmax on ``inputs``), a ``long`` tensor on ``device``.
    n : int
        Rows to draw batches from.
    config : ProjNormConfig
    device : torch.device

    Returns
    -------
    dict
        ``steps`` run, ``final_loss`` (the last batch's), ``seconds``.
    """
    steps = config.resolved_steps(device)
    torch.manual_seed(int(config.seed))  # dropout masks: the same on every call
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum,
                                weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    loss_fn = nn.CrossEntropyLoss()
    start = time.perf_counter()
    loss = torch.tensor(math.nan)
    for rows in batch_order(n, config.batch_size, steps, config.seed):
        model.train()
        xb = batches(rows)
        yb = labels(rows, xb)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        scheduler.step()
    return {"steps": steps, "final_loss": float(loss.detach()),
            "seconds": time.perf_counter() - start}


def parameter_distance(a: nn.Module, b: nn.Module) -> float:
    r""":math:`\sqrt{\sum_p \lVert a_p - b_p \rVert_2^2}` over the trainable parameters of two
    models of one architecture (buffers such as batch-norm statistics are left out), in float64.

    Raises
    ------
    ValueError
        If the two models' parameters differ in names or shapes.
    """
    pa, pb = dict(a.named_parameters()), dict(b.named_parameters())
    if pa.keys() != pb.keys() or any(pa[k].shape != pb[k].shape for k in pa):
        raise ValueError("the two models must have the same parameters (names and shapes).")
    total = 0.0
    for name, value in pa.items():
        diff = value.detach().double().cpu() - pb[name].detach().double().cpu()
        total += float(torch.sum(diff * diff))
    return math.sqrt(total)


class FittedProjNorm:
    """The base model, its initialisation and the reference copy: scores target splits.

    Built by :func:`fit_projnorm`; :meth:`score` runs the pseudo-label fine-tune of one split.
    """

    def __init__(self, base: nn.Module, initial: dict[str, torch.Tensor], reference: nn.Module,
                 to_batch: Callable[[np.ndarray], torch.Tensor], config: ProjNormConfig,
                 device: torch.device, reference_report: dict[str, Any]) -> None:
        self.base, self.initial, self.reference = base, initial, reference
        self.to_batch, self.config, self.device = to_batch, config, device
        self.reference_report = reference_report

    def _fresh(self) -> nn.Module:
        model = copy.deepcopy(self.base)
        model.load_state_dict(self.initial, strict=True)
        return model.to(self.device)

    def score(self, samples: np.ndarray) -> tuple[float, dict[str, Any]]:
        """ProjNorm of one target split: fine-tune a fresh copy from the initialisation on the
        split labelled by the base model's argmax, and return its parameter distance to the
        reference copy, with the fine-tune's report (``steps``, ``final_loss``, ``seconds``)."""
        rows_of = np.asarray(samples)
        model = self._fresh()
        self.base.eval()

        def pseudo(rows: np.ndarray, xb: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return self.base(xb).argmax(dim=1)

        report = finetune(model, lambda rows: self.to_batch(rows_of[rows]), pseudo,
                          int(rows_of.shape[0]), self.config, self.device)
        return parameter_distance(self.reference, model), report

    def params(self) -> dict[str, Any]:
        """The configuration with the resolved steps and their scale to the authors' 500."""
        steps = self.config.resolved_steps(self.device)
        return {**asdict(self.config), "steps": steps, "steps_scale": steps / GPU_STEPS}


def fit_projnorm(
    base: nn.Module,
    initial: dict[str, torch.Tensor],
    to_batch: Callable[[np.ndarray], torch.Tensor],
    train_x: np.ndarray,
    train_y: np.ndarray,
    config: ProjNormConfig,
    device: torch.device,
) -> FittedProjNorm:
    """Fine-tune the reference copy from ``initial`` on the training data with true labels.

    Parameters
    ----------
    base : torch.nn.Module
        The trained classifier, on ``device`` (left unchanged).
    initial : dict of str to Tensor
        The state dict it was trained from (:math:`\\theta_0`).
    to_batch : callable
        ``to_batch(samples) -> inputs`` on ``device`` (the image adapter's conversion).
    train_x, train_y : ndarray
        The rows the base model was trained on and their labels.
    config : ProjNormConfig
    device : torch.device

    Returns
    -------
    FittedProjNorm
    """
    x = np.asarray(train_x)
    y = torch.from_numpy(np.asarray(train_y).astype(np.int64))
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"train_x and train_y must have one label per row; got {x.shape[0]} "
                         f"rows and {y.shape[0]} labels.")
    reference = copy.deepcopy(base)
    reference.load_state_dict(initial, strict=True)
    reference.to(device)
    report = finetune(reference, lambda rows: to_batch(x[rows]),
                      lambda rows, xb: y[rows].to(device), int(x.shape[0]), config, device)
    reference.eval()
    return FittedProjNorm(base, initial, reference, to_batch, config, device, report)
