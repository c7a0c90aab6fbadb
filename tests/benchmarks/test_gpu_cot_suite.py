"""``benchmarks/gpu_cot_suite.py``: its arguments, its nvidia-smi parsing and its table.

The whole script runs on the CPU with ``--tiny`` (about 5 minutes on 2 cores: three
224-pixel-capable networks through every stage), recorded in docs/PERFORMANCE.md; these tests
cover what can break without running it.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import gpu_cot_suite as suite


def test_bad_arguments_stop_before_any_work(tmp_path: Path, capsys) -> None:
    assert suite.main(["--out", str(tmp_path), "--methods", "atc"]) == 2
    assert "Unknown estimator(s) ['atc']" in capsys.readouterr().err
    assert suite.main(["--out", str(tmp_path), "--runs", "cifar10"]) == 2
    assert "dataset.backbone" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing generated, nothing written


def test_nvidia_smi_samples_are_parsed_and_windowed(tmp_path: Path) -> None:
    log = tmp_path / "smi.csv"
    log.write_text("2026/11/27 07:26:50.000, 10, 1000\n"
                   "2026/11/27 07:26:50.200, 90, 3000\n"
                   "garbage line\n"
                   "2026/11/27 07:26:51.000, 50, 2000\n"
                   "2026/11/27 07:26:51")  # a line still being written
    sampler = suite.SmiSampler(log)
    sampler.available = True
    samples = sampler.samples()
    assert [(u, m) for _, u, m in samples] == [(10.0, 1000.0), (90.0, 3000.0), (50.0, 2000.0)]
    start = samples[0][0]
    window = suite._window(samples, start + 0.1, start + 1.0)
    assert window == {"gpu_util_mean": 70.0, "gpu_util_max": 90.0, "smi_memory_max_mib": 3000.0,
                      "samples": 2}
    assert suite._window(samples, start + 5, start + 6)["gpu_util_mean"] is None


def test_the_table_has_one_row_per_run_and_dashes_for_what_was_not_measured() -> None:
    run = {"dataset": "cifar10", "backbone": "resnet50", "train_img_per_s": 1234.5,
           "train_steady_img_per_s": None,
           "extract_img_per_s": 5000.0, "extract_rows": 97000, "download_s": 0.1, "train_s": 4.0,
           "extract_s": 19.4, "estimate_s": 2.0, "train_torch_peak_gib": 9.5,
           "extract_torch_peak_gib": None, "train_gpu_util_mean": 88.0,
           "extract_gpu_util_mean": None, "train_smi_memory_max_mib": 11000.0}
    text = suite._markdown({"tiny": False, "device_name": "NVIDIA H100", "torch": "2.11",
                            "epochs": 2, "scales": {"cifar10": 0.1}, "generate_s": {},
                            "upsampling_parity": {}, "runs": [run]})
    row = text.splitlines()[-1]
    assert row.startswith(
        "| cifar10.resnet50 | 1,234.5 / — | 5,000.0 (97,000) | 0.1 / 4.0 / 19.4 / 2.0")
    assert "9.5 / —" in row and "88.0 / —" in row and row.endswith("| 11,000.0 |")
    assert "TINY" not in text


def test_the_epoch_clock_reads_the_adapters_log_lines() -> None:
    import logging

    clock = suite.EpochClock()
    for created, message in ((10.0, "cifar10.resnet50.s0 epoch 1/3: train loss 2.3000"),
                             (11.0, "cifar10.resnet50.s0 epoch 1: val acc 0.1000 (best ...)"),
                             (14.0, "cifar10.resnet50.s0 epoch 2/3: train loss 2.1000"),
                             (18.0, "cifar10.resnet50.s0 epoch 3/3: train loss 2.0000")):
        record = logging.LogRecord("tasks.stages.train", logging.INFO, __file__, 1, message, None,
                                   None)
        record.created = created
        clock.emit(record)
    assert clock.ends == [10.0, 14.0, 18.0]
    assert clock.steady_rate(1000) == 250.0  # 2 epochs of 1,000 images in 8 s
    assert suite.EpochClock().steady_rate(1000) is None
