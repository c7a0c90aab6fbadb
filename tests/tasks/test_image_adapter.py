"""The image adapter: per-batch conversion keeps training bit-identical; SGD step schedule; Adam;
early stopping keeps the best epoch; unknown optimizers are refused."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess

import numpy as np
import pytest
import torch
from torch import nn

import tasks.models.modalities.image as image
from tasks.models.backbones import get_backbone, get_backbone_spec
from tasks.models.backbones.base import BackboneSpec
from tasks.stages.versions import PROJECT_ROOT

CPU = torch.device("cpu")


class _Spec:
    """A dataset entry reduced to what the adapter reads: ``to_inputs``, recording each batch."""

    def __init__(self) -> None:
        self.batches: list[np.ndarray] = []

    def to_inputs(self, samples: np.ndarray) -> np.ndarray:
        self.batches.append(samples.copy())
        return (samples.astype(np.float32)[:, None] / 255.0 - 0.3) / 0.35


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.integers(0, 120, (n, 28, 28)).astype(np.uint8)
    for c in range(3):  # a learnable signal: a bright band per class
        x[y == c, 8 * c : 8 * c + 6] = 250
    return x, y.astype(np.int64)


#: The last commit of the adapter that converted the whole split before training.
OLD_ADAPTER_COMMIT = "ea4eb8b0624ad874cab52416fe69609067855510"


@pytest.fixture(scope="module")
def old_adapter(tmp_path_factory):
    """That commit's ``tasks/modalities/image.py``, imported from a temporary file."""
    try:
        text = subprocess.run(
            ["git", "show", f"{OLD_ADAPTER_COMMIT}:tasks/modalities/image.py"], cwd=PROJECT_ROOT,
            capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the old adapter is not in this checkout's git history: {exc}")
    # the modules it imports have moved since (tasks/ became packages); their contents have not
    text = text.replace("from tasks.backbones.", "from tasks.models.backbones.")
    text = text.replace("from tasks.modalities.", "from tasks.models.modalities.")
    # the optimizer has changed since, on purpose: the fused step (tasks/models/optim.py), whose
    # square root is the same on every CPU; the batches and their conversion are under test
    old_optimizer = ("optimizer = torch.optim.AdamW(\n"
                     "        model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay\n")
    assert text.count(old_optimizer) == 1
    text = text.replace(old_optimizer, old_optimizer.replace("weight_decay\n",
                                                             "weight_decay, fused=True\n"))
    path = tmp_path_factory.mktemp("old") / "old_image_adapter.py"
    path.write_text(text)
    module_spec = importlib.util.spec_from_file_location("old_image_adapter", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.ADAPTER


def _replay(model: nn.Module, opt: torch.optim.Optimizer, batches: list[np.ndarray],
            x: np.ndarray, y: np.ndarray) -> None:
    """One reference step per batch the adapter saw, labels looked up by image."""
    label = {row.tobytes(): int(v) for row, v in zip(x, y, strict=True)}
    for b in batches:
        yb = torch.tensor([label[row.tobytes()] for row in b])
        opt.zero_grad()
        nn.functional.cross_entropy(model(torch.from_numpy(_Spec().to_inputs(b))), yb).backward()
        opt.step()


def _fit(model, recipe, spec, train, val=None, epochs=1, seed=0):
    return image.ADAPTER.fit(model, recipe, spec, train, val if val is not None else train,
                             epochs=epochs, seed=seed, device=CPU, progress=False, key="t")


@pytest.mark.parametrize("name", ["mlp", "lenet"])
def test_per_batch_conversion_is_bit_identical_to_the_old_adapter(name: str, old_adapter) -> None:
    x, y = _data(300, 0)
    recipe = dataclasses.replace(get_backbone_spec(name), batch_size=64)
    torch.manual_seed(3)
    old = get_backbone(name, 3, (1, 28, 28))
    old_adapter.fit(old, recipe, _Spec(), (x, y), (x, y), epochs=2, seed=5, device=CPU,
                    progress=False, key="old")
    torch.manual_seed(3)
    new = get_backbone(name, 3, (1, 28, 28))
    spec = _Spec()
    report = _fit(new, recipe, spec, (x, y), epochs=2, seed=5)
    assert report.epochs_run == 2 and report.best_epoch is None
    # one batch of inputs at a time (plus a one-row probe of the input rank)
    assert max(len(b) for b in spec.batches) == 64
    assert sum(len(b) for b in spec.batches) == 1 + 2 * 300
    for (k, a), b in zip(old.state_dict().items(), new.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    xt, _ = _data(50, 1)
    old_logits = old_adapter.predict(old, _Spec(), xt, CPU, 2048)
    np.testing.assert_array_equal(old_logits, image.ADAPTER.predict(new, _Spec(), xt, CPU, 2048))
    # smaller prediction batches change only the floating-point summation order
    np.testing.assert_allclose(old_logits, image.ADAPTER.predict(new, _Spec(), xt, CPU, 16),
                               rtol=1e-5, atol=1e-5)


def _linear_recipe(optimizer: str, **kw) -> BackboneSpec:
    return BackboneSpec(
        name="lin", build=lambda c, s: nn.Sequential(nn.Flatten(), nn.Linear(784, c)),
        description="", modalities=("image",), epochs=3, batch_size=100, lr=0.1,
        weight_decay=5e-4, optimizer=optimizer, **kw)


def test_sgd_step_matches_a_hand_scheduled_sgd(monkeypatch) -> None:
    monkeypatch.setattr(image, "SGD_STEP_EPOCHS", 2)
    x, y = _data(200, 2)
    recipe = _linear_recipe("sgd-step")
    torch.manual_seed(0)
    model = recipe.build(3, (1, 28, 28))
    torch.manual_seed(0)
    ref = recipe.build(3, (1, 28, 28))
    spec = _Spec()
    _fit(model, recipe, spec, (x, y), epochs=5, seed=1)
    assert len(spec.batches) == 1 + 5 * 2
    # reference: SGD momentum 0.9, lr set by hand to 0.1 * 0.1 ** ((epoch - 1) // 2)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    lrs = []
    for epoch in range(1, 6):
        for group in opt.param_groups:
            group["lr"] = 0.1 * 0.1 ** ((epoch - 1) // 2)
        lrs.append(opt.param_groups[0]["lr"])
        _replay(ref, opt, spec.batches[1 + 2 * (epoch - 1) : 1 + 2 * epoch], x, y)
    assert lrs == pytest.approx([0.1, 0.1, 0.01, 0.01, 0.001])
    for a, b in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_adam_is_a_fixed_learning_rate() -> None:
    x, y = _data(200, 3)
    recipe = dataclasses.replace(_linear_recipe("adam"), lr=1e-3, weight_decay=0.0)
    torch.manual_seed(0)
    model = recipe.build(3, (1, 28, 28))
    torch.manual_seed(0)
    ref = recipe.build(3, (1, 28, 28))
    spec = _Spec()
    _fit(model, recipe, spec, (x, y), epochs=2, seed=4)
    _replay(ref, torch.optim.Adam(ref.parameters(), lr=1e-3, fused=True), spec.batches[1:], x, y)
    for a, b in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_early_stopping_keeps_the_best_epoch(monkeypatch) -> None:
    """Scripted validation accuracies 0.5, 0.7, 0.6, 0.7, 0.6, 0.9 with patience 3: epoch 2 is
    best, epochs 3-5 do not beat it (a tie is no improvement), training stops after epoch 5 and
    the weights of epoch 2 come back."""
    script = iter([0.5, 0.7, 0.6, 0.7, 0.6, 0.9])
    snapshots = []

    def fake_predict(model, spec, samples, device, batch_size=2048):
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
        n_right = int(round(next(script) * len(val_y)))
        logits = np.zeros((len(val_y), 3), dtype=np.float32)
        logits[np.arange(len(val_y)), (val_y + (np.arange(len(val_y)) >= n_right)) % 3] = 1.0
        return logits

    x, y = _data(200, 5)
    val_x, val_y = _data(10, 6)
    monkeypatch.setattr(image, "predict_samples", fake_predict)
    recipe = _linear_recipe("adam", patience=3)
    torch.manual_seed(0)
    model = recipe.build(3, (1, 28, 28))
    report = _fit(model, recipe, _Spec(), (x, y), (val_x, val_y), epochs=20)
    assert (report.epochs_run, report.best_epoch) == (5, 2)
    assert report.best_val_accuracy == pytest.approx(0.7)
    assert len(snapshots) == 5
    for k, v in model.state_dict().items():
        assert torch.equal(v, snapshots[1][k]), k
    assert not torch.equal(model.state_dict()["1.weight"], snapshots[4]["1.weight"])


def test_early_stopping_end_to_end_reports_the_kept_accuracy() -> None:
    x, y = _data(300, 7)
    vx, vy = _data(100, 8)
    recipe = _linear_recipe("adam", patience=2)
    recipe = dataclasses.replace(recipe, lr=1e-3)
    torch.manual_seed(0)
    model = recipe.build(3, (1, 28, 28))
    report = _fit(model, recipe, _Spec(), (x, y), (vx, vy), epochs=6)
    acc = float(np.mean(image.ADAPTER.predict(model, _Spec(), vx, CPU, 32).argmax(1) == vy))
    assert report.best_epoch is not None and acc == report.best_val_accuracy


def test_unknown_optimizer_and_bad_patience_are_refused() -> None:
    x, y = _data(20, 0)
    with pytest.raises(ValueError, match=r"optimizer of backbone 'lin' must be one of "
                                         r"adamw-onecycle, sgd-step, adam; got 'rmsprop'"):
        _fit(nn.Linear(1, 1), _linear_recipe("rmsprop"), _Spec(), (x, y))
    with pytest.raises(ValueError, match=r"patience of backbone 'lin' must be an integer >= 1"):
        _fit(nn.Linear(1, 1), _linear_recipe("adam", patience=0), _Spec(), (x, y))
    with pytest.raises(ValueError, match="as many labels as samples"):
        _fit(nn.Linear(1, 1), _linear_recipe("adam"), _Spec(), (x, y[:3]))


class _PhotoSpec:
    """Samples are row ids; each becomes a 3x224x224 input (an ImageNet-size photo)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def to_inputs(self, samples: np.ndarray) -> np.ndarray:
        self.sizes.append(int(samples.shape[0]))
        return np.stack([np.random.default_rng(int(i)).standard_normal((3, 224, 224),
                                                                        dtype=np.float32)
                         for i in samples]) if samples.size else np.zeros((0, 3, 224, 224),
                                                                          np.float32)


def test_eval_rows_cuts_photo_batches_and_leaves_small_images_alone() -> None:
    photos = np.arange(5000)
    assert image.eval_rows(_PhotoSpec(), photos, 1024) == 256
    assert image.eval_rows(_PhotoSpec(), photos, 2048) == 256
    assert image.eval_rows(_PhotoSpec(), photos, 16) == 16
    assert image.eval_rows(_PhotoSpec(), photos[:0], 1024) == 1024
    cifar = np.zeros((10, 3, 32, 32), dtype=np.float32)  # no spec: float inputs as they are
    assert image.eval_rows(None, cifar, 2048) == 2048
    mnist = np.zeros((10, 28, 28), dtype=np.uint8)
    assert image.eval_rows(_Spec(), mnist, 2048) == 2048


def test_predict_samples_cuts_photo_batches_at_the_cap(monkeypatch) -> None:
    """Inference on 224-pixel photos never builds a batch above the cap (256 rows by default;
    64 here to keep the test small; issue 23: a batch of 1,199 Waterbirds photos took the train
    stage past 19 GB)."""
    monkeypatch.setattr(image, "EVAL_MAX_VALUES", 64 * 3 * 224 * 224)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 7, stride=16), nn.Flatten(), nn.Linear(4 * 14 * 14, 5))
    spec = _PhotoSpec()
    logits = image.predict_samples(model, spec, np.arange(150), CPU, 1024)
    assert logits.shape == (150, 5)
    assert spec.sizes == [1, 64, 64, 22]  # one probe of the input size, then the batches
    again = image.predict_samples(model, _PhotoSpec(), np.arange(150), CPU, 64)
    assert np.array_equal(logits, again)


def test_small_image_inference_is_unchanged_by_the_cap() -> None:
    """CIFAR/MNIST-size batches stay as requested, so their logits are today's bit for bit."""
    x, _ = _data(300, 3)
    torch.manual_seed(0)
    model = get_backbone("cnn3", 3, (1, 28, 28))
    spec = _Spec()
    got = image.predict_samples(model, spec, x, CPU, 256)
    assert [b.shape[0] for b in spec.batches] == [1, 256, 44]
    with torch.inference_mode():
        ref = torch.cat([model(torch.from_numpy(_Spec().to_inputs(x[i:i + 256])).to(
            memory_format=torch.channels_last)) for i in (0, 256)]).numpy()
    assert np.array_equal(got, ref)


def _layouts_seen(backbone: str, mkldnn: bool) -> set[bool]:
    """Whether each batch the network saw in training and prediction was channels-last."""
    model = get_backbone(backbone, 3, (1, 28, 28))
    seen: set[bool] = set()
    model.register_forward_pre_hook(
        lambda _m, args: seen.add(args[0].stride(1) == 1))  # channels-last (1 channel too)
    spec = dataclasses.replace(get_backbone_spec(backbone), epochs=1, batch_size=32)
    x, y = _data(96, 0)
    before = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(mkldnn)
    try:
        image.ADAPTER.fit(model, spec, _Spec(), (x, y), (x[:32], y[:32]), epochs=1, seed=0,
                          device=CPU, progress=False, key="t")
        image.ADAPTER.predict(model, _Spec(), x, CPU, 64)
    finally:
        torch._C._set_mkldnn_enabled(before)
    return seen


def test_lenet_is_fed_contiguous_batches_where_atens_convolutions_compute() -> None:
    # the reproducible mode turns oneDNN off: LeNet then runs faster on contiguous batches
    assert _layouts_seen("lenet", mkldnn=False) == {False}
    assert _layouts_seen("lenet", mkldnn=True) == {True}
    assert _layouts_seen("resnet", mkldnn=False) == {True}  # faster channels-last on ATen too


def test_the_layout_changes_no_logit_beyond_rounding() -> None:
    torch.manual_seed(0)
    model = get_backbone("lenet", 3, (1, 28, 28)).eval()
    x = torch.from_numpy(_Spec().to_inputs(_data(64, 1)[0]))
    with torch.inference_mode():
        plain = model(x.contiguous())
        last = model.to(memory_format=torch.channels_last)(
            x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(plain, last, rtol=1e-5, atol=1e-5)
