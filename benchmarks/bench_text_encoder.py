"""Throughput of the text suite's MiniLM forward pass (tokens per second), fp32 and bf16.

Encodes real texts of the ``rt-reviews`` dataset (snippets, and full reviews cut by the
head + tail rule) through :func:`tasks.models.text_encoder._forward`, the exact code the pipeline runs
(length-sorted batches of at most 8,192 tokens), with no feature cache involved, and prints
tokens per second per precision. Run on a quiet machine::

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_text_encoder.py

The data must be staged first (``alsa-bench run --suite text --until download``, or any text
run); ``ALSA_BENCH_HOME`` picks the state folder.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from storage.paths import data_dir
from tasks.models import text_encoder
from tasks.data.datasets import get_dataset_spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snippets", type=int, default=2000, help="snippets to encode")
    parser.add_argument("--reviews", type=int, default=300, help="full reviews to encode")
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per setting")
    args = parser.parse_args()

    spec = get_dataset_spec("rt-reviews")
    root = data_dir()
    spec.stage(root)
    pool = spec.load_target_pool(root)
    source = spec.load_source(root)
    sets = {
        "snippets": list(source.train_x[: args.snippets]),
        "reviews": list(pool.samples[pool.subgroups == 1][: args.reviews]),
    }
    encoder = text_encoder.load_minilm()
    cpu = torch.device("cpu")
    forced = "ALSA_BENCH_TEXT_PRECISION" in os.environ
    native = "forced" if forced else text_encoder.use_bf16(cpu)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, native bf16: {native}")
    print(f"{'texts':<10}{'precision':<11}{'texts':>7}{'tokens':>9}{'seconds':>9}{'tokens/s':>10}")
    for label, texts in sets.items():
        ids = text_encoder._tokenize(encoder, texts)
        n_tokens = sum(len(x) for x in ids)
        for precision in ("fp32", "bf16"):
            os.environ["ALSA_BENCH_TEXT_PRECISION"] = precision
            text_encoder._forward(encoder, ids[:64], False, cpu)  # warm-up
            best = float("inf")
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                text_encoder._forward(encoder, ids, False, cpu)
                best = min(best, time.perf_counter() - t0)
            print(f"{label:<10}{precision:<11}{len(texts):>7}{n_tokens:>9}{best:>9.2f}"
                  f"{n_tokens / best:>10.0f}")
    os.environ.pop("ALSA_BENCH_TEXT_PRECISION", None)


if __name__ == "__main__":
    main()
