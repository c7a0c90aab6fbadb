"""What every backbone entry declares: how to build it, which modalities it accepts, its recipe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

__all__ = ["BackboneSpec"]


@dataclass(frozen=True)
class BackboneSpec:
    """One classifier architecture and its default training recipe.

    Attributes
    ----------
    name : str
        Registry key; second part of run keys.
    build : callable
        ``build(n_classes, input_shape) -> torch.nn.Module`` returning raw logits. It raises
        ``ValueError`` when ``input_shape`` does not suit the architecture.
    description : str
        One line for listings.
    modalities : tuple of str
        Modalities (``"image"``, ``"graph"``, ``"text"``, ``"tabular"``) whose inputs the
        architecture accepts;
        a run of a dataset of another modality is refused before anything is trained.
    epochs : int
        Default number of training epochs (the maximum, for recipes with early stopping).
    batch_size : int
        Training batch size (image and text; graphs train full batch).
    lr : float
        Peak learning rate.
    weight_decay : float
        Weight decay.
    optimizer : {"adamw-onecycle", "sgd-step", "adam"}
        ``"adamw-onecycle"``: AdamW with a one-cycle schedule (15 % warm-up, cosine decay to 0);
        ``"sgd-step"``: SGD with momentum 0.9, learning rate x 0.1 every 100 epochs (the paper's
        CIFAR recipe, App. H); ``"adam"``: Adam at a fixed learning rate (the paper's graph,
        MNIST, Waterbirds and Office-31 recipes).
    patience : int or None
        Stop when validation accuracy has not improved for this many epochs and keep the best
        epoch's weights (the paper's graph recipe: 20); None trains every epoch.
    datasets : tuple of str, default ()
        Datasets the backbone applies to besides those whose
        :attr:`~tasks.data.spec.DatasetSpec.backbones` name it (a backbone added in a module
        of its own, or by a plugin, attaches itself to existing datasets without editing their
        modules, so no other run's cache key moves): :func:`tasks.models.backbones.backbones_for`.
    pretrained : bool, default False
        True when ``build`` returns a classifier with its published weights already loaded
        (torchvision's ImageNet models, :mod:`tasks.models.backbones.pretrained`): the train stage
        runs no optimizer and no epoch (paper App. H: "three pretrained models provided by
        PyTorch were directly utilized"), only measures validation accuracy and writes the
        checkpoint; the recipe fields above are then not used.
    """

    name: str
    build: Callable[[int, tuple[int, ...]], nn.Module]
    description: str
    modalities: tuple[str, ...]
    epochs: int
    batch_size: int = 128
    lr: float = 2e-3
    weight_decay: float = 5e-4
    optimizer: str = "adamw-onecycle"
    patience: int | None = None
    pretrained: bool = False
    datasets: tuple[str, ...] = ()

    def accepts(self, modality: str) -> bool:
        """Whether the architecture takes inputs of ``modality``."""
        return modality in self.modalities
