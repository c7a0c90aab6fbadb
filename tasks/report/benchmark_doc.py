"""``docs/BENCHMARK.md``: a report folder turned into the benchmark page, with its provenance.

``alsa-bench report --to-docs`` calls :func:`write_benchmark_doc`: the protocol section
(:data:`BENCHMARK_PROTOCOL`), the commit, seeds and machine the numbers came from, the report's
own markdown with its figures copied under ``docs/benchmark/``, the hand-measured appendices
(:data:`BENCHMARK_APPENDICES`) and the "Reproducing the paper" section
(:func:`tasks.report.paper_table.reproduce_section`). The header names how the runs were
computed (compute mode, settings, CPU model and flags: ``runs.csv`` of the report), and the page
ends with a machine-readable block (:func:`tasks.report.compare.reference_block`, an HTML
comment) that ``alsa-bench report --compare docs/BENCHMARK.md`` reads.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from tasks.report.compare import reference_block
from tasks.report.provenance import PROVENANCE_COLUMNS, compute_notes

__all__ = ["BENCHMARK_APPENDICES", "BENCHMARK_PROTOCOL", "COMPARE_NOTE", "write_benchmark_doc"]

#: Under the provenance table: how a reader compares their own run with this page.
COMPARE_NOTE = (
    "`make bench` ends by comparing your numbers with this page "
    "(`alsa-bench report --compare docs/BENCHMARK.md`): it names every cell that differs, by "
    "how much and whether within the seeds' spread, every run that trained another model and "
    "why, and says in one line whether the numbers are the same, host noise or a real "
    "difference. The numbers are computed in the reproducible mode (pinned kernels), meant to "
    "give the same digits on any x86-64 CPU with AVX2; what was measured, and on which CPUs, is "
    "in [PERFORMANCE.md](PERFORMANCE.md), \"Same numbers on any machine\"."
)


#: The protocol section of docs/BENCHMARK.md: how the numbers were produced.
BENCHMARK_PROTOCOL = """## Protocol

**Images (`fmnist` suite).** Each run trains one classifier on a class-imbalanced subset of the
Fashion-MNIST training images (class 0 : class 9 = 1 : 3, linear; paper App. H.2) and holds out
validation images of the same source distribution; `fmnist-binary` uses the same images with
binary labels (upper-body garment or not), `fmnist-coarse` 3 coarse classes with novel
sub-classes in the targets. The shift generators (corruptions at five severities, Dirichlet label
shift, the 3-class sub-population remap, the MNIST-M style photo blend) are described in
[SHIFTS.md](SHIFTS.md).

**Graphs (`graph` suite).** Each run trains a GNN (GCN, GraphSAGE, GAT, GIN; full batch, Adam
1e-2, weight decay 5e-4, early stopping after 20 epochs) on the papers of `arxiv-sim` published
up to 2010 and validates on 2012-2014 (paper App. F, H); targets are one split per test year
2015-2020 on that year's snapshot (`temporal`, the paper's Table 2 and 3 rows), the held-out year
2011 (`clean`), and edge drop, feature noise and class-prior shifts of 2011 (`structural`).
GNNEvaluator (Zheng et al., 2023) is fitted on augmented copies of the validation graph with the
trained GNN; it is the only method that sees more than logits.

**Text (`text` suite).** `rt-reviews` trains on 5,000 Rotten Tomatoes snippets (binary
sentiment; validation 1,500 held-out snippets) and is scored on 2,000 further snippets (`clean`),
7 text corruptions at five severities (`synthetic`), Dirichlet label shift, and 25/50/100 %
mixtures of Pang & Lee full-length reviews (`domain`). `sotu-party` predicts the president's
party from a State of the Union paragraph: trained and validated on different speeches of
1853-1912, scored on held-out speeches of that era (`clean`; every president of the era contributes to train, val and clean) and on four later eras
(`temporal`). Backbones: a hashed bag-of-words linear model, an MLP on frozen all-MiniLM-L6-v2
embeddings, and MiniLM with its top layer fine-tuned (`rt-reviews` only); texts longer than 128
tokens keep their first 32 and last 94 (see [SHIFTS.md](SHIFTS.md)).

Every method is fitted on the validation logits and labels only, then scores every target split
from its logits alone; true accuracies are computed afterwards by the evaluation step, which is
the only code that reads target labels.

No hyper-parameter was chosen with target labels:

- temperature scaling (AC, DoC, IM, ATC, COT) is fitted by validation NLL;
- the ATC thresholds are fitted on validation scores (exact finite-sample rule, METHODS §5);
- IM uses the 10 equal-width bins that the ATC paper (App. E) found best on its own data;
- COT's label marginal is the validation label frequencies;
- ALSA's open choices (anchor count, variance initialisation, learning rates, alpha, the
  canonical logit space, the stopping rule) were set on independent problems (scikit-learn's
  digits with an MLP, Gaussian blobs with logistic regression, binary digits and breast-cancer
  problems; `benchmarks/tune_alsa.py`, `benchmarks/tune_alsa_invariance.py`, results in
  [ALSA.md](ALSA.md)) that share no data with this benchmark;
- GNNEvaluator's settings (meta-graph count, reference nodes, optimiser) were set on synthetic
  graphs in its tests and bounded for cost (`tasks/models/gnnevaluator.py`).

The score methods (MaNo, nuclear norm, Entropy, ProjNorm) are the exception the protocol of
their papers makes: a score-to-accuracy line fitted on a *labelled* meta-set, here each run's own
corruption family (leave one corruption type out for the corruption splits themselves). They are
reported in a section of their own and never ranked with the label-free methods. GDE compares
each run with the next seed's run of the same dataset and backbone (the last seed with the
first); it needs two seeds or more.

ALSA runs in its canonical space by default (centred logits plus one constant coordinate, so
that adding a constant to a row of logits changes nothing, and binary classifiers are not blind;
[ALSA.md](ALSA.md)); the paper's raw-logit form is `space="raw"`, compared below.
"""


#: Files of the docs folder appended to docs/BENCHMARK.md when present: measurements that the
#: pipeline does not make itself (each states the command that produced it).
BENCHMARK_APPENDICES: tuple[str, ...] = (
    "benchmark-alsa-spaces.md",
    "benchmark-cot-baselines.md",
    "benchmark-trust-protocol.md",  # benchmarks/trust_protocol.py
)


def write_benchmark_doc(report_folder: Path, docs_dir: Path) -> Path:
    """Write ``docs/BENCHMARK.md`` from a report folder, with provenance; copy its figures.

    Parameters
    ----------
    report_folder : Path
        A folder written by :func:`tasks.report.write_report`.
    docs_dir : Path
        The documentation folder; figures go to ``<docs_dir>/benchmark/``.

    Returns
    -------
    Path
        The markdown file written.

    Raises
    ------
    FileNotFoundError
        If ``report_folder`` holds no ``report.md``.
    """
    import pandas as pd

    source = report_folder / "report.md"
    if not source.is_file():
        raise FileNotFoundError(
            f"report_folder must hold a report.md written by `alsa-bench report`; got "
            f"{str(report_folder)!r} without one."
        )
    figures = docs_dir / "benchmark"
    if figures.exists():
        shutil.rmtree(figures)
    figures.mkdir(parents=True)
    for png in sorted(report_folder.glob("*.png")):
        shutil.copy2(png, figures / png.name)
    body = source.read_text(encoding="utf-8")
    body = re.sub(r"\]\(([^)/]+\.png)\)", r"](benchmark/\1)", body)
    body = body.split("\n", 1)[1] if body.startswith("# ") else body
    rows = pd.read_csv(report_folder / "estimates.csv")
    runs_file = report_folder / "runs.csv"
    runs = (pd.read_csv(runs_file, dtype=object).astype(object)
            if runs_file.is_file() else pd.DataFrame(columns=list(PROVENANCE_COLUMNS)))
    runs = runs.where(runs.notna(), None)
    seeds = ", ".join(str(s) for s in sorted(rows["seed"].unique()))
    compute = [line.removeprefix("- computed in ") for line in compute_notes(runs)]
    lines = [
        "# Benchmark results",
        "",
        "<!-- Generated by `alsa-bench report --to-docs`; do not edit by hand. -->",
        "",
        "| | |",
        "| --- | --- |",
        f"| commit | `{_git_commit(PAGE_OUTPUTS)}` |",
        f"| seeds | {seeds} |",
        f"| machine | {_machine()} |",
        *(f"| compute | {line} |" for line in compute or ["not recorded"]),
        f"| report | `{report_folder.name}` (`.alsa-bench/reports/{report_folder.name}/`) |",
        "",
        COMPARE_NOTE,
        "",
        BENCHMARK_PROTOCOL,
        body.lstrip("\n"),
    ]
    for appendix in BENCHMARK_APPENDICES:
        extra = docs_dir / appendix
        if extra.is_file():  # hand-measured sections, each saying the command behind it
            lines += ["", extra.read_text(encoding="utf-8").rstrip("\n"), ""]
    from tasks.report.paper_table import reproduce_section

    lines += ["", reproduce_section(rows).rstrip("\n"), ""]
    # every MAE cell per seed at full precision and each run's provenance, for
    # `alsa-bench report --compare docs/BENCHMARK.md` (an HTML comment: not shown on the page)
    lines += [reference_block(rows, runs), ""]
    docs_dir.mkdir(parents=True, exist_ok=True)
    target = docs_dir / "BENCHMARK.md"
    target.write_text("\n".join(lines), encoding="utf-8")
    return target


#: What the page's own generation writes: not a change to the code that computed it.
PAGE_OUTPUTS: tuple[str, ...] = ("docs/BENCHMARK.md", "docs/benchmark")


def _git_commit(ignore: tuple[str, ...] = ()) -> str:
    """``HEAD``'s short hash, with ``+ uncommitted changes`` where a tracked file outside
    ``ignore`` (paths from the repository's root) differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
            check=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ":/",
             *(f":(top,exclude){path}" for path in ignore)], capture_output=True,
            text=True, check=True, timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{head}{' + uncommitted changes' if dirty else ''}"


def _machine() -> str:
    parts = [
        platform.platform(terse=True),
        f"{os.cpu_count()} CPUs",
        f"Python {platform.python_version()}",
    ]
    try:
        import torch

        if torch.cuda.is_available():
            parts.append(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
        else:
            parts.append(f"torch {torch.__version__} on CPU")
    except ImportError:
        parts.append("torch not installed")
    return ", ".join(parts)
