"""``tasks.runtime.progress``: a bar on a terminal, the plain loop everywhere else."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
import torch
from torch import nn

from tasks.runtime import progress as progress_mod
from tasks.runtime.progress import ENV_VAR, progress, progress_bar, progress_enabled


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _terminal(monkeypatch: pytest.MonkeyPatch) -> _Terminal:
    """stderr replaced by a fake terminal, the env var cleared.

    Called in the test body: pytest's output capture sets ``sys.stderr`` again between a
    fixture's setup and the test call.
    """
    stream = _Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.delenv(ENV_VAR, raising=False)
    return stream


def test_without_a_terminal_the_iterable_itself_comes_back(monkeypatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # isatty() is False
    items = [3, 1, 2]
    assert progress(items, desc="x") is items
    assert not progress_enabled()
    with progress_bar(total=10, unit="B") as bar:
        bar.update(10)
    assert sys.stderr.getvalue() == ""


def test_a_terminal_gets_a_bar_that_counts_every_item(monkeypatch) -> None:
    tty = _terminal(monkeypatch)
    from tqdm import tqdm

    items = list(range(7))
    wrapped = progress(items, desc="train demo", unit="epoch")
    assert isinstance(wrapped, tqdm)
    assert list(wrapped) == items  # same items, same order
    out = tty.getvalue()
    assert "train demo" in out and "7/7" in out and "epoch" in out


def test_caller_switch_and_env_var_turn_bars_off(monkeypatch) -> None:
    tty = _terminal(monkeypatch)
    items = (1, 2)
    assert progress(items, enabled=False) is items
    for value in ("0", "off", "FALSE", "no"):
        monkeypatch.setenv(ENV_VAR, value)
        assert progress(items) is items
    assert tty.getvalue() == ""
    monkeypatch.setenv(ENV_VAR, "auto")
    assert list(progress(items)) == [1, 2]
    assert "2/2" in tty.getvalue()


def test_a_malformed_env_var_is_named(monkeypatch) -> None:
    _terminal(monkeypatch)
    monkeypatch.setenv(ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match=rf"{ENV_VAR} must be one of .*got 'sometimes'"):
        progress([1])


@pytest.mark.parametrize("total", [-1, 2.5, True, "3"])
def test_bad_total_is_named(total) -> None:
    with pytest.raises(ValueError, match=r"total must be None or an integer >= 0; got"):
        progress([1], total=total)


def test_bad_initial_is_named() -> None:
    with pytest.raises(ValueError, match=r"initial must be an integer >= 0; got -3"), \
            progress_bar(initial=-3):
        pass


def test_quiet_inside_a_prefect_task_run(monkeypatch) -> None:
    _terminal(monkeypatch)
    # a task run is recognised by its context (no Prefect server needed for the check)
    from prefect.context import TaskRunContext

    assert progress_enabled()
    with _fake_task_context(TaskRunContext):
        assert not progress_enabled()
        assert progress([1, 2]) == [1, 2]
    assert progress_enabled()


class _fake_task_context:
    """Make ``TaskRunContext.get()`` return an object, as inside a task run."""

    def __init__(self, ctx_cls) -> None:
        self.ctx_cls = ctx_cls

    def __enter__(self) -> None:
        self.saved = self.ctx_cls.get
        self.ctx_cls.get = classmethod(lambda cls: object())  # type: ignore[method-assign]

    def __exit__(self, *exc) -> None:
        self.ctx_cls.get = self.saved  # type: ignore[method-assign]


def test_quiet_on_a_dask_worker(monkeypatch) -> None:
    _terminal(monkeypatch)
    import distributed

    assert progress_enabled()
    monkeypatch.setattr(distributed, "get_worker", lambda: object())
    assert not progress_enabled()


def test_prefect_not_imported_is_not_imported_for_the_check(monkeypatch) -> None:
    _terminal(monkeypatch)
    monkeypatch.delitem(sys.modules, "prefect.context", raising=False)
    monkeypatch.setattr(progress_mod, "_on_dask_worker", lambda: False)
    assert progress_enabled()
    assert "prefect.context" not in sys.modules


def test_byte_bar_reports_bytes_from_the_initial_offset(monkeypatch) -> None:
    tty = _terminal(monkeypatch)
    with progress_bar(total=4096, initial=1024, desc="fetch x: f.zip", unit="B",
                      unit_scale=True) as bar:
        bar.update(3072)
        assert bar.n == 4096
    assert "fetch x: f.zip" in tty.getvalue() and "4.00k" in tty.getvalue()


def test_bars_change_no_number_of_training(monkeypatch) -> None:
    """The same seeded image training gives identical weights with and without bars.

    The batch bar wraps a shuffling DataLoader: ``tqdm.auto``'s class would call ``iter()`` on it
    once more, drawing one more seed from the loader's generator and reordering every epoch.
    """
    tty = _terminal(monkeypatch)
    from tasks.models.backbones.base import BackboneSpec
    from tasks.models.modalities.image import ADAPTER

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 1, 4, 4)).astype(np.float32)
    y = rng.integers(0, 2, size=40)
    recipe = BackboneSpec(name="tiny", build=lambda c, shape: nn.Linear(16, c),
                          description="test", modalities=("image",), epochs=3, batch_size=8,
                          lr=0.01, weight_decay=0.0, optimizer="adam", patience=2)

    def run(show: bool) -> tuple[list[np.ndarray], np.ndarray]:
        monkeypatch.setenv(ENV_VAR, "1" if show else "0")
        torch.manual_seed(0)
        model = nn.Sequential(nn.Flatten(), nn.Linear(16, 2))
        ADAPTER.fit(model, recipe, None, (x, y), (x[:10], y[:10]), epochs=3, seed=0,
                    device=torch.device("cpu"), progress=True, key="toy")
        logits = ADAPTER.predict(model, None, x, torch.device("cpu"), 16)
        return [p.detach().numpy().copy() for p in model.parameters()], logits

    quiet_w, quiet_logits = run(False)
    assert tty.getvalue() == ""
    shown_w, shown_logits = run(True)
    assert "train toy" in tty.getvalue() and "epoch" in tty.getvalue()
    for a, b in zip(quiet_w, shown_w):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(quiet_logits, shown_logits)
