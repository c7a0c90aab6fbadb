"""Tests of ALSA (``alsa-g``, ``alsa-e``) against references written here (METHODS.md section 13).

Everything runs on small problems with few anchors so the file stays well under 40 s on 1 core.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from estimators import get_estimator
from estimators.methods.alsa import (
    ALSA,
    KERNEL_DEFAULTS,
    ALSAAnchors,
    ALSAE,
    ALSAG,
    alsa_accuracy,
    alsa_influence,
    alsa_predict,
    augmented_tau,
    cosine_distance,
    fit_alsa_anchors,
    kernel_alpha_value,
    rectification_threshold,
)
from estimators.methods.alsa import kernels as kern
from estimators.core.exceptions import ConvergenceWarning, DegenerateValidationWarning

SMALL = dict(n_anchors=24, max_epochs=40, min_epochs=0, device="cpu")
#: The paper's ALSA as printed: raw-logit cosine space, eq. (10) alone as the stop rule, eq. (23)
#: cut-off.
PAPER = dict(space="raw", stop_rule="paper", min_epochs=0, threshold_rule="paper")


def make_logits(rng: np.random.Generator, n: int = 400, c: int = 5, margin: float = 2.0):
    """Logits whose correctness depends on the margin, about 75-85% accurate."""
    y = rng.integers(0, c, n)
    z = rng.normal(size=(n, c))
    z[np.arange(n), y] += margin
    return z, y


def fit_quiet(est, z, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(z, y)


# --------------------------------------------------------------------------- references
def ref_erfinv(x: float) -> float:
    """Inverse error function by bisection on math.erf (independent of scipy)."""
    lo, hi = 0.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if math.erf(mid) < x:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def ref_influence(z, a, p, v, kernel):
    """Per-anchor influence by explicit loops (eq. 1, 3, 5)."""
    out = np.zeros((len(z), len(a)))
    for i, zi in enumerate(z):
        for j, aj in enumerate(a):
            d = 1.0 - float(zi @ aj) / (np.linalg.norm(zi) * np.linalg.norm(aj))
            g = d * d if kernel == "gaussian" else d
            out[i, j] = p[j] * math.exp(-v[j] ** 2 * g)
    return out


# --------------------------------------------------------------------------- influence, distance
@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_influence_matches_loop_reference_and_peaks_at_anchor(rng, kernel):
    a = rng.normal(size=(6, 4))
    p = rng.normal(size=6) * 6
    v = rng.normal(5, 1, size=6)
    z = rng.normal(size=(9, 4))
    np.testing.assert_allclose(
        alsa_influence(z, a, p, v, kernel=kernel), ref_influence(z, a, p, v, kernel), rtol=1e-10
    )
    at_anchor = np.diag(alsa_influence(a, a, p, v, kernel=kernel))
    # Infl(z = a_j) = p_j: the distance of a vector to itself is 0 up to one rounding of 1 - cos
    np.testing.assert_allclose(at_anchor, p, rtol=1e-13, atol=0)
    if kernel == "gaussian":
        np.testing.assert_array_equal(at_anchor, p)  # d^2 <= 1e-31 leaves exp() at exactly 1
    total = alsa_influence(z, a, p, v, kernel=kernel, per_anchor=False)
    np.testing.assert_allclose(total, ref_influence(z, a, p, v, kernel).sum(1), rtol=1e-10)


def test_torch_kernel_block_equals_numpy_influence(rng):
    import torch

    a = rng.normal(size=(7, 5)).astype(np.float32)
    z = rng.normal(size=(11, 5)).astype(np.float32)
    v = rng.normal(3, 0.5, 7).astype(np.float32)
    for kernel in ("gaussian", "exponential"):
        U = kern.unit_rows(torch.from_numpy(z), center=False)
        W = kern.unit_rows(torch.from_numpy(a), center=False)
        _, _, K = kern.kernel_block(U, W, torch.from_numpy(v) ** 2, kernel)
        ref = alsa_influence(z, a, np.ones(7), v, kernel=kernel)
        np.testing.assert_allclose(K.numpy(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_kernels_decrease_monotonically_in_distance(kernel):
    # rotate z away from the anchor e_0 through every angle in [0, pi]: d = 1 - cos goes 0 -> 2
    theta = np.linspace(0.0, np.pi, 400)
    z = np.stack([np.cos(theta), np.sin(theta), np.zeros_like(theta)], axis=1)
    a = np.array([[1.0, 0.0, 0.0]])
    d = cosine_distance(z, a)[:, 0]
    assert np.all(np.diff(d) > 0)
    for p in (6.0, -6.0):
        infl = np.abs(alsa_influence(z, a, [p], [2.0], kernel=kernel)[:, 0])
        assert np.all(np.diff(infl) < 0)
        assert infl[0] == pytest.approx(6.0)


def test_cosine_distance_in_zero_two(rng):
    scales = 10 ** rng.uniform(-3, 3, (50, 1))
    z = np.concatenate([rng.normal(size=(50, 6)) * scales, np.zeros((1, 6))])
    a = np.concatenate([z[:5], -z[:5], np.zeros((1, 6))])
    d = cosine_distance(z, a)
    assert d.min() >= 0.0 and d.max() <= 2.0
    np.testing.assert_allclose(np.diag(d[:5, 5:10]), 2.0, atol=1e-12)  # antipodal
    assert np.all(d[-1] == 1.0) and np.all(d[:, -1] == 1.0)  # zero vector: cos = 0


# --------------------------------------------------------------------------- invariances
@pytest.mark.parametrize("name", ["alsa-g", "alsa-e"])
def test_invariant_to_positive_scaling_of_val_and_target(rng, name):
    z, y = make_logits(rng)
    zt, _ = make_logits(rng, margin=1.0)
    base = fit_quiet(get_estimator(name, **SMALL), z, y)
    ref = base.estimate(zt).accuracy
    for s in (0.5, 4.0):  # powers of two: every step is bit-identical
        est = fit_quiet(get_estimator(name, **SMALL), z * s, y)
        np.testing.assert_array_equal(est.peaks_, base.peaks_)
        assert est.estimate(zt * s).accuracy == ref
    est = fit_quiet(get_estimator(name, **SMALL), z * 3.7, y)
    assert est.estimate(zt * 3.7).accuracy == pytest.approx(ref, abs=1e-4)
    # In the paper's raw space, temperature scaling of the target alone is a no-op too; the
    # default augmented space compares norms with the fitted tau, so it sees confidence.
    raw = fit_quiet(get_estimator(name, space="raw", **SMALL), z, y)
    raw_ref = raw.estimate(zt).accuracy
    assert raw.estimate(zt / 1.7).accuracy == pytest.approx(raw_ref, abs=1e-6)
    assert abs(base.estimate(zt / 1.7).accuracy - ref) > 1e-3


def test_not_invariant_to_adding_a_constant_vector(rng):
    z, y = make_logits(rng)
    zt, _ = make_logits(rng, margin=1.0)
    est = fit_quiet(get_estimator("alsa-g", **{**SMALL, **PAPER}), z, y)
    shifted = est.estimate(zt + 3.0).accuracy  # softmax would not notice this shift
    assert abs(shifted - est.estimate(zt).accuracy) > 1e-3  # the paper's raw space does
    for space in ("augmented", "centered", "logprob"):  # the canonical spaces do not
        est = fit_quiet(get_estimator("alsa-g", space=space, **SMALL), z, y)
        assert est.estimate(zt + 3.0).accuracy == pytest.approx(est.estimate(zt).accuracy,
                                                                abs=1e-6)


# --------------------------------------------------------------------------- stopping rule
def test_stopping_rule_holds_when_converged(rng):
    z, y = make_logits(rng, n=300)
    est = get_estimator("alsa-e", n_anchors=20, max_epochs=3000, lr_peaks=0.05, device="cpu",
                        **PAPER)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.fit(z, y)
    assert est.stop_reason_ == "converged"
    # independent recomputation of eq. (10) from the fitted anchors, without rectification
    q = alsa_predict(z, est.anchors_, rectify="none", device="cpu").q
    acc = np.mean(z.argmax(1) == y)
    assert abs(q.mean() - acc) < 1e-5 + 1e-6
    assert est.train_gap_ < 1e-5
    assert est.history_["gap"][-1] == est.train_gap_
    assert len(est.history_["loss"]) == est.n_epochs_ + 1
    loss = est.history_["loss"]
    w = max(1, len(loss) // 10)
    assert np.mean(loss[-w:]) < np.mean(loss[:w])  # BCE falls over a smoothed window


def test_max_epochs_warns_and_reports(rng):
    z, y = make_logits(rng, n=200)
    est = get_estimator("alsa-g", n_anchors=10, max_epochs=3, device="cpu")
    with pytest.warns(ConvergenceWarning, match="max_epochs=3"):
        est.fit(z, y)
    assert est.stop_reason_ == "max_epochs" and est.n_epochs_ == 3
    assert est.train_gap_ >= 1e-5
    diag = est.estimate(z).diagnostics
    assert diag["stop_reason"] == "max_epochs" and diag["n_epochs"] == 3
    assert diag["train_gap"] == est.train_gap_


def test_fixed_stop_rule_trains_min_epochs_and_calibration_meets_eq10(rng):
    z, y = make_logits(rng, n=300)
    est = fit_quiet(get_estimator("alsa-g", n_anchors=20, min_epochs=30, device="cpu",
                                  threshold_rule="paper"), z, y)
    assert est.stop_rule == "fixed"  # the default
    assert est.stop_reason_ == "fixed" and est.n_epochs_ == 30
    assert len(est.history_["loss"]) == 31
    # eq. (10) holds through the calibration offset, whatever the gap left by training
    q = alsa_predict(z, est.anchors_, rectify="none", device="cpu").q
    assert q.mean() == pytest.approx(np.mean(z.argmax(1) == y), abs=1e-6)


def test_augmented_tau_is_the_median_centred_norm_per_free_dimension(rng):
    for c in (2, 3, 10):
        z = rng.normal(size=(101, c)) * 3.0 + rng.normal(size=(101, 1))
        zc = z - z.mean(axis=1, keepdims=True)
        expected = np.median(np.linalg.norm(zc, axis=1)) / math.sqrt(c - 1)
        assert augmented_tau(z) == pytest.approx(expected, rel=1e-12)
    assert augmented_tau(np.zeros((5, 3))) == 1.0


def test_min_epochs_delays_the_stop(rng):
    z, y = make_logits(rng, n=200)
    # tol=0.5: eq. (10) holds at once
    kw = dict(n_anchors=10, max_epochs=60, device="cpu", tol=0.5, stop_rule="paper")
    assert fit_quiet(get_estimator("alsa-g", min_epochs=0, **kw), z, y).n_epochs_ == 0
    est = fit_quiet(get_estimator("alsa-g", min_epochs=25, **kw), z, y)
    assert est.n_epochs_ == 25 and est.stop_reason_ == "converged"


# --------------------------------------------------------------------------- rectification
def test_rectification_thresholds():
    assert rectification_threshold("gaussian", 0.95) == pytest.approx(0.8790, abs=5e-5)
    assert rectification_threshold("exponential", 0.95) == pytest.approx(0.3, abs=1e-12)
    for alpha in (0.5, 0.9, 0.95, 0.99):
        ref_g = 6.0 * math.exp(-ref_erfinv(alpha) ** 2)
        assert rectification_threshold("gaussian", alpha) == pytest.approx(ref_g, rel=1e-9)
        assert rectification_threshold("exponential", alpha) == pytest.approx(6 * (1 - alpha))
        assert kernel_alpha_value("gaussian", alpha) * 6 == pytest.approx(ref_g, rel=1e-9)
    z, y = make_logits(np.random.default_rng(1))
    est = fit_quiet(get_estimator("alsa-e", alpha=0.9, threshold_rule="paper", **SMALL), z, y)
    assert est.threshold_ == pytest.approx(0.6)


@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_far_point_gets_chance_and_fraction_is_reported(kernel):
    c = 4
    anchors = ALSAAnchors(
        positions=np.eye(c, dtype=np.float32)[:1] * 3,
        peaks=np.array([6.0], dtype=np.float32),
        variances=np.array([20.0], dtype=np.float32),
        kernel=kernel,
    )
    near = np.array([[3.0, 0.0, 0.0, 0.0]] * 7)
    far = np.array([[0.0, 5.0, 0.0, 0.0]] * 3)  # orthogonal to the anchor: d = 1
    pred = alsa_predict(np.concatenate([near, far]), anchors, device="cpu")
    np.testing.assert_allclose(pred.q[7:], 1.0 / c)
    np.testing.assert_allclose(pred.q[:7], 1.0 / (1.0 + math.exp(-6.0)), rtol=1e-6)
    assert pred.rectified_fraction == pytest.approx(0.3)
    assert alsa_predict(far, anchors, rectify="none", device="cpu").q == pytest.approx(0.5)


def test_rectify_modes_and_estimator_diagnostics(rng):
    z, y = make_logits(rng)
    est = fit_quiet(get_estimator("alsa-g", **{**SMALL, **PAPER}), z, y)
    far = rng.normal(size=(50, 5))
    far[:, 0] = -20.0  # no validation logit points this way
    res = est.estimate(np.concatenate([z[:50], far]))
    assert res.diagnostics["rectified_fraction"] == pytest.approx(np.mean(res.per_sample == 1 / 5))
    assert res.diagnostics["n_rectified"] >= 1
    assert 0.0 <= res.accuracy <= 1.0
    # per-anchor reading, written out: rectified iff every |p_j K_j(z)| < t
    zz = np.concatenate([z[:50], far])
    infl = alsa_influence(zz, est.positions_, est.peaks_, est.variances_, kernel="gaussian")
    expect = np.all(np.abs(infl) < est.threshold_, axis=1)
    got = alsa_predict(zz, est.anchors_, device="cpu").rectified
    assert np.mean(got == expect) > 0.99  # float32 vs float64 at the boundary
    total = alsa_predict(zz, est.anchors_, rectify="total", device="cpu")
    np.testing.assert_array_equal(total.rectified, np.abs(total.influence) < total.threshold)


# --------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
def test_analytic_gradients_match_finite_differences_and_autograd(kernel):
    g = torch.Generator().manual_seed(0)
    n, c, k = 60, 4, 5
    U = kern.unit_rows(torch.randn(n, c, generator=g, dtype=torch.float64), center=False)
    y = (torch.rand(n, generator=g, dtype=torch.float64) < 0.7).double()
    A = torch.randn(k, c, generator=g, dtype=torch.float64) * 2
    p = torch.randn(k, generator=g, dtype=torch.float64) * 3
    v = torch.rand(k, generator=g, dtype=torch.float64) * 2 + 0.5
    _, _, gA, gp, gv = kern._epoch_analytic(U, y, A, p, v, kernel, 17, (True, True, True))

    def loss(A_, p_, v_):
        return float(kern.loss_autograd(U, y, A_, p_, v_, kernel)[0]) / n

    h = 1e-6
    for tensor, grad in ((A, gA), (p, gp), (v, gv)):
        flat, gflat = tensor.view(-1), grad.reshape(-1)
        for idx in range(flat.numel()):
            old = float(flat[idx])
            flat[idx] = old + h
            up = loss(A, p, v)
            flat[idx] = old - h
            down = loss(A, p, v)
            flat[idx] = old
            fd = (up - down) / (2 * h)
            assert abs(fd - float(gflat[idx])) <= 1e-5 * max(abs(fd), 1e-3)
    _, _, aA, ap, av = kern._epoch_autograd(U, y, A, p, v, kernel, 17, (True, True, True))
    for a_, b_ in ((gA, aA), (gp, ap), (gv, av)):
        torch.testing.assert_close(a_, b_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["adam", "rmsprop", "sgd"])
def test_optimizer_updates_match_torch_optim(kind):
    g = torch.Generator().manual_seed(1)
    ours = [torch.randn(4, 3, generator=g), torch.randn(4, generator=g)]
    ref = [t.clone().requires_grad_(True) for t in ours]
    lrs = (0.01, 0.1)
    opt = kern._FullBatchOptimizer(kind, list(zip(ours, lrs)))
    groups = [{"params": [t], "lr": lr} for t, lr in zip(ref, lrs)]
    if kind == "adam":
        torch_opt = torch.optim.Adam(groups, betas=(0.9, 0.999), eps=1e-8)
    elif kind == "rmsprop":
        torch_opt = torch.optim.RMSprop(groups, alpha=0.99, eps=1e-8)
    else:
        torch_opt = torch.optim.SGD(groups, momentum=0.9)
    for _ in range(6):
        grads = [torch.randn(t.shape, generator=g) for t in ours]
        opt.step(grads)
        for t, grad in zip(ref, grads):
            t.grad = grad.clone()
        torch_opt.step()
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b.detach(), rtol=1e-6, atol=1e-7)


def test_autograd_and_analytic_fits_agree(rng):
    z, y = make_logits(rng, n=200)
    kw = dict(n_anchors=10, max_epochs=15, device="cpu")
    a = fit_quiet(get_estimator("alsa-g", gradient="analytic", **kw), z, y)
    b = fit_quiet(get_estimator("alsa-g", gradient="autograd", **kw), z, y)
    np.testing.assert_allclose(a.positions_, b.positions_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(a.peaks_, b.peaks_, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- determinism, freeze
def test_deterministic_for_a_seed(rng):
    z, y = make_logits(rng)
    a = fit_quiet(get_estimator("alsa-g", seed=3, **SMALL), z, y)
    b = fit_quiet(get_estimator("alsa-g", seed=3, **SMALL), z, y)
    c = fit_quiet(get_estimator("alsa-g", seed=4, **SMALL), z, y)
    for attr in ("positions_", "peaks_", "variances_"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    assert a.estimate(z).accuracy == b.estimate(z).accuracy
    assert not np.array_equal(a.positions_, c.positions_)


@pytest.mark.parametrize(
    "freeze",
    [
        "positions",
        "peaks",
        "variances",
        ("peaks", "variances"),
        ["positions", "peaks", "variances"],
    ],
)
def test_freeze_keeps_groups_at_their_initial_values(rng, freeze):
    z, y = make_logits(rng, n=200)
    kw = dict(n_anchors=12, device="cpu", seed=5)
    init = fit_quiet(get_estimator("alsa-g", max_epochs=0, **kw), z, y)
    est = fit_quiet(get_estimator("alsa-g", max_epochs=30, freeze=freeze, **kw), z, y)
    frozen = {freeze} if isinstance(freeze, str) else set(freeze)
    for group in ("positions", "peaks", "variances"):
        same = np.array_equal(getattr(est, group + "_"), getattr(init, group + "_"))
        assert same == (group in frozen), group
    if len(frozen) == 3:
        assert est.stop_reason_ == "all_frozen" and est.n_epochs_ == 0


def test_initialisation_follows_the_paper(rng):
    z, y = make_logits(rng, n=300)
    est = fit_quiet(get_estimator("alsa-g", max_epochs=0, n_anchors=40, seed=2, device="cpu",
                                  space="raw"), z, y)
    # every initial position is a validation logit row, peak +6 iff that row is correct
    correct = z.argmax(1) == y
    members = est.anchors_.members  # the cross-fitted ensemble: one anchor set per fold
    assert len(members) == 3
    positions = np.concatenate([m.positions for m in members])
    peaks = np.concatenate([m.peaks for m in members])
    for a, p in zip(positions, peaks):
        row = np.flatnonzero(np.all(np.isclose(z, a, rtol=1e-5, atol=1e-5), axis=1))
        assert row.size == 1
        assert p == (6.0 if correct[row[0]] else -6.0)
    # variances ~ N(mu_v, sigma_v^2) with alsa-g's defaults (10, 1)
    assert (est.variance_mean, est.variance_std) == (10.0, 1.0)
    assert 0.6 < est.variances_.std() < 1.4 and 9.5 < est.variances_.mean() < 10.5


# --------------------------------------------------------------------------- chunking, API
def test_chunked_estimate_equals_unchunked(rng):
    z, y = make_logits(rng)
    zt, _ = make_logits(rng, n=1000, margin=1.0)
    est = fit_quiet(get_estimator("alsa-e", **SMALL), z, y)
    full = alsa_predict(zt, est.anchors_, chunk_size=10**6, device="cpu")
    small = alsa_predict(zt, est.anchors_, chunk_size=7, device="cpu")
    # float32 sums over anchors are reordered by the block size: agreement to float32 rounding
    # (a chunking bug, such as a dropped or repeated block, moves q by orders of magnitude more)
    np.testing.assert_allclose(small.q, full.q, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(small.rectified, full.rectified)
    chunked_fit = fit_quiet(get_estimator("alsa-e", chunk_size=33, **SMALL), z, y)
    np.testing.assert_allclose(chunked_fit.peaks_, est.peaks_, rtol=1e-4, atol=1e-4)


def test_estimator_contract_and_functional_api_agree(rng):
    z, y = make_logits(rng)
    zt, _ = make_logits(rng, margin=1.0)
    est = fit_quiet(get_estimator("alsa-g", **SMALL), z, y)
    assert isinstance(est, ALSAG) and isinstance(est, ALSA) and est.name == "alsa-g"
    # n <= max_fit_rows: a cross-fitted ensemble of 3 members of 24 anchors, concatenated
    assert est.positions_.shape == (72, 6) and est.positions_.dtype == np.float32  # c + 1
    assert est.peaks_.shape == (72,) and est.variances_.shape == (72,)
    assert [m.n_anchors for m in est.anchors_.members] == [24, 24, 24]
    res = est.estimate(zt)
    q = est.predict_proba_correct(zt)
    np.testing.assert_array_equal(res.per_sample, q)
    assert res.accuracy == pytest.approx(q.mean())
    assert res.accuracy == pytest.approx(alsa_accuracy(zt, est.anchors_, device="cpu"))
    for key in ("n_epochs", "stop_reason", "train_gap", "rectified_fraction"):
        assert key in res.diagnostics
    assert res.params["kernel"] == "gaussian" and res.params["n_anchors"] == 24
    res.to_record()  # JSON-safe
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = fit_alsa_anchors(
            z, y, kernel="gaussian", seed=0, n_anchors=24, max_epochs=40, min_epochs=0,
            device="cpu"
        )
    np.testing.assert_array_equal(fit.anchors.peaks, est.peaks_)


def test_registry_defaults_and_clone():
    g, e = get_estimator("alsa-g"), get_estimator("alsa-e")
    assert isinstance(e, ALSAE) and e.kernel == "exponential" and g.kernel == "gaussian"
    assert e.variance_mean == KERNEL_DEFAULTS["exponential"]["variance_mean"]
    assert g.variance_mean == KERNEL_DEFAULTS["gaussian"]["variance_mean"]
    assert ALSA().variance_mean is None  # the shared class defers to the kernel's defaults
    assert g.get_params()["freeze"] == () and g.device == "auto"
    clone = type(e)(**e.get_params())
    assert clone.get_params() == e.get_params()
    with pytest.raises(ValueError, match="n_anchor"):
        get_estimator("alsa-g", n_anchor=5)


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("n_anchors", 0),
        ("n_anchors", 2.5),
        ("alpha", 1.0),
        ("alpha", 0.0),
        ("max_epochs", -1),
        ("seed", -1),
        ("device", "tpu"),
        ("device", 3),
        ("freeze", "bias"),
        ("freeze", ("peaks", "p")),
        ("kernel", "cauchy"),
        ("rectify", "always"),
        ("variance_mean", -1.0),
        ("variance_std", -0.1),
        ("lr_peaks", 0.0),
        ("tol", 0.0),
        ("peak", 0.0),
        ("chunk_size", 0),
        ("optimizer", "lbfgs"),
        ("space", "yes"),
        ("stop_rule", "never"),
        ("n_anchors", "many"),
        ("gradient", "numeric"),
        ("anchor_sampling", "random"),
        ("n_threads", 0),
    ],
)
def test_bad_parameters_raise_value_error_naming_them(rng, param, value):
    z, y = make_logits(rng, n=50)
    est = get_estimator("alsa-g", **{param: value})
    with pytest.raises(ValueError, match=param):
        est.fit(z, y)


def test_min_epochs_above_max_epochs_runs_to_the_cap(rng):
    est = fit_quiet(get_estimator("alsa-g", min_epochs=5, max_epochs=2, n_anchors=10,
                                  device="cpu"), *make_logits(rng, n=50))
    assert est.n_epochs_ == 2


def test_more_anchors_than_rows_is_capped_with_a_warning(rng):
    z, y = make_logits(rng, n=30)
    with pytest.warns(UserWarning, match="n_anchors=100"):
        est = fit_quiet(get_estimator("alsa-g", n_anchors=100, max_epochs=5, device="cpu"), z, y)
    # each of the 3 cross-fitted members trains on 20 of the 30 rows
    assert [m.n_anchors for m in est.anchors_.members] == [20, 20, 20]


def test_degenerate_validation_set_stays_finite(rng):
    z, _ = make_logits(rng, n=100)
    y = z.argmax(1)  # all correct
    with pytest.warns(DegenerateValidationWarning):
        est = fit_quiet(get_estimator("alsa-g", n_anchors=10, max_epochs=10, device="cpu"), z, y)
    assert np.all(np.isfinite(est.peaks_)) and 0.0 <= est.estimate(z).accuracy <= 1.0


def test_threads_restored_and_center_option(rng):
    z, y = make_logits(rng, n=200)
    before = torch.get_num_threads()
    est = fit_quiet(get_estimator("alsa-g", n_threads=1, space="centered", **SMALL), z, y)
    est.estimate(z)
    assert torch.get_num_threads() == before
    # centred ALSA ignores constant shifts of the logits
    assert est.estimate(z + 4.0).accuracy == pytest.approx(est.estimate(z).accuracy, abs=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu(rng):
    z, y = make_logits(rng, n=400)
    zt, _ = make_logits(rng, n=2000, margin=1.0)
    cpu = fit_quiet(get_estimator("alsa-g", n_anchors=24, max_epochs=40, device="cpu"), z, y)
    gpu = fit_quiet(get_estimator("alsa-g", n_anchors=24, max_epochs=40, device="cuda"), z, y)
    np.testing.assert_allclose(gpu.peaks_, cpu.peaks_, rtol=1e-3, atol=1e-3)
    assert gpu.estimate(zt).accuracy == pytest.approx(cpu.estimate(zt).accuracy, abs=1e-3)
    assert gpu.estimate(zt).diagnostics["device"].startswith("cuda")


# --------------------------------------------------------------------------- issue 15
def test_auto_anchors_fit_small_validation_sets_without_warning(rng):
    z, y = make_logits(rng, n=174)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        est = fit_quiet(get_estimator("alsa-e", device="cpu"), z, y)
    # 3 cross-fitted members, each trained on 116 of the 174 rows
    assert est.n_anchors == "auto" and est.positions_.shape[0] == 3 * (116 // 4)
    big, yb = make_logits(rng, n=2000)
    assert fit_quiet(get_estimator("alsa-g", max_epochs=1, device="cpu"), big, yb
                     ).positions_.shape[0] == 3 * 300


@pytest.mark.parametrize("name", ["alsa-g", "alsa-e"])
def test_calibration_makes_eq10_hold_exactly_and_binary_fits_converge(rng, name):
    s = rng.normal(size=1500) * 2.0
    y = (s + rng.normal(size=1500) * 1.5 > 0).astype(int)  # a noisy binary model
    est = get_estimator(name, device="cpu", threshold_rule="paper")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.fit(s[:1000], y[:1000])
    res = est.estimate(s[1000:])
    assert res.diagnostics["converged"] and res.diagnostics["n_epochs"] < est.max_epochs
    q = alsa_predict(s[:1000], est.anchors_, rectify="none", device="cpu").q
    assert q.mean() == pytest.approx(est.val_accuracy_, abs=1e-5)  # float32 influences
    # held-out in-distribution rows: within binomial 2 sigma of the validation accuracy
    sd = math.sqrt(est.val_accuracy_ * (1 - est.val_accuracy_) / 500)
    assert abs(res.accuracy - est.val_accuracy_) < 2 * sd
