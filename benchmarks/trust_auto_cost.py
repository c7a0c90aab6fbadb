"""What ``auto`` costs beyond its members, for each model class of the protocol (issue 31 item 4).

    python benchmarks/trust_auto_cost.py --db DB --run-key KEY --split SPLIT [--repeats 3]

On one stored run (validation logits and labels, one target split), times each member's fit and
estimate, the label-free signals (:class:`~estimators.trust.shift_signals.ShiftSignals` fit and
transform, plus the selector's meta-features), and each model class's own step given the
members' estimates and the signals. ``auto``'s cost is the members it must run plus its
overhead: the shrinkage model needs the eight members and a median (no signal), the ridge
stacking the eight members and the signals, the gated selector the signals and then only the
one member it selects. Prints the median of ``--repeats`` runs of each step, in seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from estimators import get_estimator  # noqa: E402
from estimators.trust.selector import fit_selector, fit_shrink, meta_features  # noqa: E402
from estimators.trust.shift_signals import ShiftSignals  # noqa: E402
from estimators.trust.stacking import fit_stack  # noqa: E402
from storage.logits import read_target_logits, read_val  # noqa: E402
from tasks.report.trust_protocol import BASE, MEMBERS  # noqa: E402


def _time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--run-key", required=True)
    parser.add_argument("--split", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    con = duckdb.connect(args.db, read_only=True)
    try:
        val_x, val_y = read_val(con, args.run_key)
        target = read_target_logits(con, args.run_key, args.split)
    finally:
        con.close()
    print(f"{args.run_key} / {args.split}: validation {val_x.shape}, target {target.shape}")
    member_cost, estimates = {}, {}
    for name in MEMBERS:
        def run(name: str = name) -> float:
            return get_estimator(name).fit(val_x, val_y).estimate(target).accuracy
        member_cost[name], estimates[name] = _time(run, args.repeats)
        print(f"  member {name:8s} fit + estimate {member_cost[name]:8.3f} s")

    def signals() -> dict[str, float]:
        rec = ShiftSignals().fit(val_x, val_y).transform(
            target, estimates={m: estimates[m] for m in MEMBERS}).to_record()
        p = np.exp(val_x - val_x.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        rec["val_overconfidence"] = float(p.max(1).mean() - np.mean(val_x.argmax(1) == val_y))
        meta_features(rec)
        return rec
    signal_cost, record = _time(signals, args.repeats)
    print(f"  signals (fit + transform + meta-features) {signal_cost:8.3f} s")

    # models fit on toy rows of the right shape: only their prediction step is timed here
    rng = np.random.default_rng(0)
    n = 60
    rows = {k: np.full(n, v) + rng.normal(scale=1e-3, size=n) for k, v in record.items()}
    est_rows = {m: np.clip(rng.uniform(0.5, 0.9, n), 0, 1) for m in MEMBERS}
    truth, groups = rng.uniform(0.5, 0.9, n), np.repeat(["a", "b", "c"], n // 3)
    one_sig = {k: np.array([v]) for k, v in record.items()}
    one_est = {m: np.array([estimates[m]]) for m in MEMBERS}
    shrink = fit_shrink(est_rows, truth, groups, MEMBERS, BASE)
    stack = fit_stack(rows, est_rows, truth, groups, MEMBERS)
    selector = fit_selector(rows, est_rows, truth, groups, (BASE,) + tuple(
        m for m in MEMBERS if m != BASE))
    steps = {"shrinkage": (lambda: shrink.predict({}, one_est), 0.0, sum(member_cost.values())),
             "stacking": (lambda: stack.predict(one_sig, one_est), signal_cost,
                          sum(member_cost.values())),
             "selector": (lambda: selector.choose(one_sig), signal_cost,
                          max(member_cost.values()))}
    print(f"  all eight members: {sum(member_cost.values()):.3f} s")
    for name, (fn, sig, members) in steps.items():
        own, _ = _time(fn, max(args.repeats, 5))
        print(f"  {name:9s}: members {members:8.3f} s (selector: the slowest one it may pick)"
              if name == "selector" else f"  {name:9s}: members {members:8.3f} s", end="")
        print(f" + signals {sig:.3f} s + own step {own * 1e3:.3f} ms -> overhead "
              f"{sig + own:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
