"""The type priors against measurements that are not their sources: the error table of
docs/speeds.md ("Priors against independent measurements").

Each measurement is a speed ratio of two GPU types for one workload, typed in below from its
public source (repository, commit, file); the script compares it with the same ratio of the
priors (``slurm_fair/estimates/priors_table.py``) and prints ``table / measured - 1`` per row and
the median absolute error per family. A measurement that became the source of a row is marked
and left out of the error figures, and so is one whose systems differ in more than the GPU (its
error in parentheses: multi-GPU BERT on PCIe against SXM).

    .venv/bin/python benchmarks/check_priors.py
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from slurm_fair.estimates import priors as pr  # noqa: E402

#: where the measurements come from
SOURCES = {
    "SIA": "siasosp23/artifacts aaf7a0de adaptdl/adaptdl/adaptdl/torch/seed/{bert,cifar10,deepspeech2,imagenet,ncf,"
           "yolov3}.csv: best samples/s over batch sizes, 1 GPU (placement 1), A100 40GB (dgx) = 1. The T4 rows of "
           "the table come from its BERT and ImageNet files only; the V100 rows from Lambda",
    "MLT30": "mlcommons/training_results_v3.0 63e326c <submitter>/results/<system>/{bert,resnet}/result_*.txt: "
             "median time to train (run_start to run_stop, successful runs), one node; ratio = time on the A100 "
             "system / time on the other (8 GPUs: Dell XE9680 8x A100 SXM 80GB, BERT 15.66 min, ResNet 27.05 min; "
             "Lenovo SR670 V2 8x A100 PCIe 80GB, ResNet 32.74 min; 4 GPUs: Dell XE8545 4x A100 SXM 80GB, "
             "32.99 / 54.23 min, Dell R750xa 4x A100 PCIe 80GB, BERT 51.93 min)",
    "LBv2": "lambdal/deeplearning-benchmark aa5addb pytorch/pytorch-train-throughput-v2-fp16.csv (NGC 24.10, 1 GPU; "
            "H100 SXM = 1, geomean over its 39 single-GPU H100 SXM runs): a later run than the rows' sources "
            "(csv_v1_v2 and the v1 table)",
    "MP41": "mlcommons/inference_results_v4.1 closed, Llama-2-70B offline tokens/s, 8 GPUs (FIELD.md 1b)",
    "I41": "issue 41: tokens/s measured on a Slurm cluster, T4 against A100 (as reported there)",
}


@dataclass(frozen=True)
class Measured:
    gpu_type: str
    family: str
    reference: str
    ratio: float
    source: str
    what: str
    #: this measurement is now the source of the row (left out of the error figures)
    source_of_row: bool = False
    #: the systems differ in more than the GPU (PCIe against SXM on multi-GPU BERT): shown, left
    #: out of the medians
    confounded: bool = False


MEASURED = (
    # Sia, 1 GPU, against the A100 40GB: the V100 rows come from Lambda, so all of Sia's V100 is independent
    Measured("v100", "transformer", "a100", 0.301, "SIA", "BERT"),
    Measured("v100", "cnn", "a100", 0.651, "SIA", "ResNet-50 ImageNet"),
    Measured("v100", "cnn", "a100", 0.471, "SIA", "ResNet-18 CIFAR-10"),
    Measured("v100", "cnn", "a100", 0.879, "SIA", "YOLOv3"),
    Measured("v100", "generic", "a100", 1.041, "SIA", "DeepSpeech2"),
    Measured("v100", "generic", "a100", 0.056, "SIA", "NCF (Sia's V100 profile of it: 0.056)"),
    Measured("t4", "cnn", "a100", 0.145, "SIA", "ResNet-18 CIFAR-10"),
    Measured("t4", "cnn", "a100", 0.343, "SIA", "YOLOv3"),
    Measured("t4", "generic", "a100", 0.460, "SIA", "DeepSpeech2"),
    Measured("t4", "generic", "a100", 0.503, "SIA", "NCF"),
    Measured("t4", "transformer", "a100", 0.17, "I41", "LLM tokens/s, overall"),
    Measured("t4", "transformer", "a100", 0.63, "I41", "LLM tokens/s, a small model"),
    # MLPerf Training v3.0, one node. SXM systems against the same submitter's A100 SXM 80GB system;
    # PCIe systems against a PCIe A100 80GB system of the same size where one exists (ResNet-50:
    # Lenovo 8x, 32.74 min), since PCIe loses on multi-GPU scaling what one GPU would not
    Measured("h100", "transformer", "a100_80g", 15.66 / 5.27, "MLT30", "BERT, 8 GPUs (Dell XE9680)"),
    Measured("h100", "cnn", "a100_80g", 27.05 / 13.41, "MLT30", "ResNet-50, 8 GPUs (Dell XE9680)"),
    Measured("h100", "transformer", "a100_80g", 32.99 / 11.14, "MLT30", "BERT, 4 GPUs (Dell XE8640 / XE8545)"),
    Measured("h100", "cnn", "a100_80g", 54.23 / 26.52, "MLT30", "ResNet-50, 4 GPUs (Dell XE8640 / XE8545)"),
    Measured("a100_pcie_80g", "transformer", "a100_80g", 32.99 / 51.93, "MLT30",
             "BERT, 4 GPUs, PCIe vs SXM (Dell R750xa / XE8545): the interconnect, not the GPU", confounded=True),
    Measured("a100_pcie_80g", "cnn", "a100_80g", 27.05 / 32.74, "MLT30", "ResNet-50, 8 GPUs (Lenovo SR670 V2)"),
    Measured("h100_pcie", "cnn", "a100_pcie_80g", 32.74 / 21.04, "MLT30", "ResNet-50, 8 GPUs (Supermicro AS-4125GS)"),
    Measured("h100_pcie", "transformer", "a100_80g", 15.66 / 10.79, "MLT30",
             "BERT, 8 GPUs, PCIe vs SXM (Supermicro AS-4125GS)", confounded=True),
    Measured("a30", "cnn", "a100_pcie_80g", 32.74 / 61.25, "MLT30", "ResNet-50, 8 GPUs (xFusion G5500 V7)"),
    Measured("a30", "transformer", "a100_80g", 15.66 / 57.73, "MLT30",
             "BERT, 8 GPUs, PCIe vs SXM (xFusion G5500 V7); x 0.95 / 0.635 for PCIe scaling = 0.40; was "
             "derived 0.50 from peaks", source_of_row=True),
    Measured("l40", "cnn", "a100_pcie_80g", 32.74 / 48.35, "MLT30", "ResNet-50, 8 GPUs (xFusion G5500 V7)"),
    Measured("l40", "transformer", "a100_80g", 15.66 / (36.27 * 10 / 8), "MLT30",
             "BERT, 10 GPUs scaled to 8 linearly, PCIe vs SXM (xFusion G5500 V7)", confounded=True),
    Measured("a40", "cnn", "a100_pcie_80g", 32.74 / 66.37, "MLT30", "ResNet-50, 8 GPUs, MXNet (IEI NF5468M6)"),
    # Lambda's later run (NGC 24.10) against the H100 SXM
    Measured("h100_pcie", "transformer", "h100", 0.672, "LBv2", "BERT base/large, GNMT"),
    Measured("h100_pcie", "cnn", "h100", 0.707, "LBv2", "ResNet-50, SSD"),
    Measured("gh200", "transformer", "h100", 1.004, "LBv2", "GH200 96GB, BERT base/large, GNMT"),
    Measured("gh200", "cnn", "h100", 1.055, "LBv2", "GH200 96GB, ResNet-50, SSD"),
    Measured("b200", "transformer", "h100", 1.703, "LBv2", "BERT base/large, GNMT"),
    Measured("b200", "cnn", "h100", 1.147, "LBv2", "ResNet-50, SSD"),
    # MLPerf inference v4.1: the MI300X row comes from a matmul benchmark, not from MLPerf
    Measured("mi300x", "inference", "h100", 23515 / 24525, "MP41", "Llama-2-70B, 8 GPUs (99 % vs 99.9 % target)"),
)


def table_ratio(m: Measured) -> float:
    a, b = pr.prior(m.gpu_type, m.family), pr.prior(m.reference, m.family)
    assert a and b, m
    return a / b


def main() -> None:
    print("| type | family | vs | table | measured | error | spread | source | workload |")
    print("|---|---|---|---|---|---|---|---|---|")
    errors: dict[str, list[float]] = {}
    for m in MEASURED:
        t = table_ratio(m)
        err = t / m.ratio - 1
        shown = "(source)" if m.source_of_row else f"({err:+.0%})" if m.confounded else f"{err:+.0%}"
        if not (m.source_of_row or m.confounded):
            errors.setdefault(m.family, []).append(abs(math.log(t / m.ratio)))
        print(f"| {m.gpu_type} | {m.family} | {m.reference} | {t:.2f} | {m.ratio:.2f} | {shown} | "
              f"{pr.spread(m.gpu_type, m.family):.2f} | [{m.source}] | {m.what} |")
    print()
    print("| family | checks | median abs log error | as a factor |")
    print("|---|---|---|---|")
    every = [e for es in errors.values() for e in es]
    for family, es in sorted(errors.items()) + [("all", every)]:
        med = statistics.median(es)
        print(f"| {family} | {len(es)} | {med:.2f} | x{math.exp(med):.2f} |")
    print()
    for key, text in SOURCES.items():
        print(f"[{key}] {text}")


if __name__ == "__main__":
    main()
