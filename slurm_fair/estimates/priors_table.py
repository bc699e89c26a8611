"""The type priors: relative speed of each GPU model per workload family, every number sourced.

Speeds are relative to an **A100 80GB SXM = 1.0** (the reference of the Lambda training
benchmark [LB], the largest public per-GPU training table). A number is either measured by the
cited source, or *computed* from it (arithmetic shown in the note), or *derived* (a ratio of
datasheet peaks, said so). A model/family pair with no public number is simply absent: the
caller then uses the model's ``generic`` value (the geometric mean of its training families) or,
for a model with none at all, the conservative rule of :mod:`.priors`.

Families: ``transformer`` (transformer/LM training, mixed precision), ``cnn`` (CNN training),
``inference`` (MLPerf closed offline), ``fp64`` (double-precision simulation, ranked by FP64
vector peak; MD codes such as Amber are FP32-bound [AMB] and belong to ``cnn``/``generic``).

Sources (the keys of the table; full references in docs/speeds.md):

* [LB] lambdal/deeplearning-benchmark ``pytorch/pytorch-train-throughput*.csv`` (NGC PyTorch,
  1 GPU, A100 80GB SXM4 = 1; H100 SXM = 1 for the NGC 24.10 run)
* [SIA] Sia, SOSP'23 artifacts ``adaptdl/.../seed/*.csv`` (best samples/s, A100-40GB = 1)
* [GV] Gavel OSDI'20 measured throughputs (``slurm_fair/data/gavel_throughputs.json``, MIT):
  per-family geometric means *computed* over its 1-GPU job types (ResNet/CycleGAN = cnn,
  Transformer/LM = transformer)
* [MP30] [MP31] [MP41] mlcommons inference_results v3.0 / v3.1 / v4.1, closed, offline
* [KL-A] [KL-H] glennklockwood.com garden pages A100 / H100; [ME] stas00/ml-engineering
  ``compute/accelerator/README.md``; [L40] NVIDIA L40/L40S datasheet; [LT] Lightning
  ``_CUDA_FLOPS`` (NVIDIA datasheets); [R2] [R3] ROCm MI250 / MI300 microarchitecture pages
* [ARIS] GRNET ARIS billing policy (MIG slices billed in proportion to their compute slices)
* [LB2] lambdal/deeplearning-benchmark ``pytorch/csv_v1_v2/pytorch-train-throughput-fp16.csv``
  (commit aa5addb, 1 GPU, fp16; A100 80GB SXM4 = 1): GH200 96GB and B200 192GB rows
* [A30] [H800] [H20] [MI210] NVIDIA A30 / H800 / H20 and AMD Instinct MI210 product specifications
  (peaks only: every number from them is *derived*, with a wide spread)
* [MLT30] mlcommons/training_results_v3.0 (commit 63e326c): median time to train of one-node
  systems, against the same round's 8x A100 SXM 80GB (Dell XE9680); benchmarks/check_priors.py

Transformer numbers of [LB]/[LB2] rows added for issue 41 are the geometric mean of BERT base,
BERT large, Transformer-XL base and large and GNMT; CNN numbers of ResNet-50 and SSD (computed
from the CSV, A100 80GB SXM4 = 1). Devices: ``mi250x`` is **one GCD** (an MI250X card is two Slurm
devices), ``mi210`` and ``mi300x`` are **the whole card** (one device each, MI300X in its default
SPX mode), ``k80`` one GK210 die.

:data:`SPREADS` says how far a family's jobs scatter around a number (log standard deviation): a
job of the family may run ``exp(+-spread)`` off it. The learner trusts a prior with a wide spread
less (:mod:`.learn`). Measured within-family scatter where the source shows it; otherwise
:data:`DEFAULT_SPREAD` for measured numbers and :data:`DERIVED_SPREAD` for numbers derived from
datasheet peaks; checked against measurements not in the sources in docs/speeds.md.
"""

from __future__ import annotations

#: (model, family, speed vs A100 80GB SXM, source, how the number was obtained)
PRIORS: tuple[tuple[str, str, float, str, str], ...] = (
    # --- A100 family (reference) ---
    ("a100_80g", "transformer", 1.00, "LB", "reference"),
    ("a100_80g", "cnn", 1.00, "LB", "reference"),
    ("a100_80g", "inference", 1.00, "MP30", "reference"),
    ("a100_80g", "fp64", 1.00, "KL-A", "reference: 9.7 TFLOPS FP64 vector"),
    ("a100", "transformer", 0.95, "KL-A", "derived: A100 40GB SXM = A100 80GB compute, 1555/2039 GB/s; "
                                           "taken equal to A100 80GB PCIe's measured 0.95 [LB]"),
    ("a100", "cnn", 0.95, "KL-A", "derived, as above"),
    ("a100", "fp64", 1.00, "KL-A", "9.7 TFLOPS FP64, same as 80GB"),
    ("a100_pcie", "transformer", 0.84, "LB", "A100 40GB PCIe, mixed precision geomean of 10 models"),
    ("a100_pcie", "cnn", 0.84, "LB", "as above"),
    ("a100_pcie", "fp64", 1.00, "KL-A", "9.7 TFLOPS FP64"),
    ("a100_pcie_80g", "transformer", 0.95, "LB", "A100 80GB PCIe, mixed precision geomean"),
    ("a100_pcie_80g", "cnn", 0.95, "LB", "as above"),
    ("a100_pcie_80g", "fp64", 1.00, "KL-A", "9.7 TFLOPS FP64"),
    # --- Hopper ---
    ("h100", "transformer", 1.98, "LB", "H100 SXM5, BERT-large"),
    ("h100", "cnn", 1.65, "LB", "H100 SXM5, ResNet-50"),
    ("h100", "inference", 2.37, "MP30", "computed: A100/H100 SXM 0.46 (ResNet-50), 0.38 (BERT-99); geomean"),
    ("h100", "fp64", 3.45, "KL-H", "computed: 33.5 / 9.7 TFLOPS FP64 vector"),
    ("h100_pcie", "transformer", 1.20, "LB", "H100 PCIe, mixed precision geomean of 10 models"),
    ("h100_pcie", "cnn", 1.17, "LB", "H100 PCIe, FP32/TF32 geomean"),
    ("h100_pcie", "inference", 1.47, "MP31", "computed: H100 PCIe/SXM 0.62 x 2.37"),
    ("h100_pcie", "fp64", 2.68, "HT", "computed: 26 / 9.7 TFLOPS FP64 vector"),
    ("h200", "transformer", 2.32, "LB", "computed: H200/H100 SXM 1.17 (NGC 24.10) x 1.98"),
    ("h200", "cnn", 1.93, "LB", "computed: 1.17 x 1.65"),
    ("h200", "inference", 3.03, "MP41", "computed: Llama-2-70B H200/H100 31303/24525 x 2.37"),
    ("h200", "fp64", 3.45, "ME", "FP64 = H100 SXM"),
    # --- Ada / Ampere workstation and inference cards ---
    ("l40s", "transformer", 0.80, "L40", "derived: BF16 peak 362 vs 312 TFLOPS, bandwidth 864 vs 2039 GB/s; "
                                         "no public training table (FIELD 1b), kept below A100"),
    ("l40s", "cnn", 0.80, "L40", "derived, as above"),
    ("l40s", "fp64", 0.14, "L40", "computed: ~1.4 / 9.7 TFLOPS FP64 (third-party figure)"),
    ("l40", "transformer", 0.50, "L40", "derived: FP16 peak 181 vs 312 TFLOPS, 864 GB/s"),
    ("l40", "cnn", 0.50, "L40", "derived, as above"),
    ("a40", "transformer", 0.42, "LT", "derived: FP16 peak 149.7 vs 312 TFLOPS, 696 GB/s"),
    ("a40", "cnn", 0.42, "LT", "derived, as above"),
    ("a10", "transformer", 0.34, "LB", "A10, mixed precision geomean of 10 models"),
    ("a10", "cnn", 0.29, "LB", "A10, FP32/TF32 geomean"),
    ("l4", "transformer", 0.29, "MP31", "computed: BERT-99 L4/H100 SXM 0.11 x 2.6 (H100/A100 BERT)"),
    ("l4", "cnn", 0.32, "MP31", "computed: ResNet-50 L4/H100 SXM 0.15 x 2.17 (H100/A100 ResNet)"),
    ("l4", "inference", 0.31, "MP31", "computed: geomean of the two above"),
    ("t4", "transformer", 0.09, "SIA", "T4 / A100-40GB, BERT"),
    ("t4", "cnn", 0.21, "SIA", "T4 / A100-40GB, ResNet-50 ImageNet"),
    # --- Volta, Pascal, Kepler ---
    ("v100", "transformer", 0.38, "LB", "V100 16GB, BERT-large and mixed precision geomean"),
    ("v100", "cnn", 0.53, "LB", "V100 16GB, ResNet-50"),
    ("v100", "fp64", 0.80, "LT", "computed: 7.8 / 9.7 TFLOPS FP64 vector (SXM2)"),
    ("p100", "transformer", 0.30, "GV", "computed: P100/V100 0.79 (Gavel Transformer/LM geomean) x 0.38"),
    ("p100", "cnn", 0.40, "GV", "computed: P100/V100 0.76 (Gavel ResNet/CycleGAN geomean) x 0.53"),
    ("p100", "fp64", 0.55, "HH", "computed: 5.3 / 9.7 TFLOPS FP64"),
    ("k80", "transformer", 0.10, "GV", "computed: K80/V100 0.265 (Gavel Transformer/LM geomean) x 0.38"),
    ("k80", "cnn", 0.08, "GV", "computed: K80/V100 0.152 (Gavel ResNet/CycleGAN geomean) x 0.53"),
    ("k80", "fp64", 0.15, "AT", "computed: one GK210 die 1.46 / 9.7 TFLOPS FP64"),
    # --- AMD ---
    ("mi300x", "transformer", 2.46, "ME", "computed: measured BF16 matmul 668 / 271 TFLOPS (A100 SXM)"),
    ("mi300x", "cnn", 2.46, "ME", "computed, as above"),
    ("mi300x", "fp64", 8.42, "R3", "computed: 81.7 / 9.7 TFLOPS FP64 vector"),
    ("mi250x", "transformer", 0.61, "ME", "derived: one GCD, BF16 peak ~191 vs 312 TFLOPS"),
    ("mi250x", "cnn", 0.61, "ME", "derived, as above"),
    ("mi250x", "fp64", 2.47, "R2", "computed: one GCD ~24 / 9.7 TFLOPS FP64 vector"),
    ("mi210", "transformer", 0.58, "MI210", "derived: whole card (one GCD), FP16 matrix peak 181 vs one "
                                             "MI250X GCD ~191 TFLOPS, x 0.61"),
    ("mi210", "cnn", 0.58, "MI210", "derived, as above"),
    ("mi210", "fp64", 2.33, "MI210", "computed: 22.6 / 9.7 TFLOPS FP64 vector"),
    # --- added for issue 41: types real sites run ---
    ("gh200", "transformer", 2.01, "LB2", "GH200 96GB, transformer geomean (BERT base/large, GNMT)"),
    ("gh200", "cnn", 1.89, "LB2", "GH200 96GB, ResNet-50 and SSD geomean"),
    ("gh200", "fp64", 3.45, "KL-H", "FP64 = H100 SXM (the same GH100 die)"),
    ("b200", "transformer", 3.37, "LB2", "B200 192GB SXM, transformer geomean (BERT base/large, GNMT)"),
    ("b200", "cnn", 2.09, "LB2", "B200 192GB SXM, ResNet-50 and SSD geomean"),
    ("h800", "transformer", 1.98, "H800", "derived: the H100 SXM die and clocks (NVLink cut to 400 GB/s): = h100"),
    ("h800", "cnn", 1.65, "H800", "derived, as above"),
    ("h800", "inference", 2.37, "H800", "derived, as above"),
    ("h800", "fp64", 0.10, "H800", "computed: FP64 cut to 1 / 9.7 TFLOPS"),
    ("h20", "transformer", 0.47, "H20", "derived: BF16 dense peak 148 vs 312 TFLOPS (bandwidth 4.0 TB/s does "
                                        "not help compute-bound training)"),
    ("h20", "cnn", 0.47, "H20", "derived, as above"),
    ("h20", "fp64", 0.10, "H20", "computed: FP64 1 / 9.7 TFLOPS"),
    ("a30", "transformer", 0.40, "MLT30", "computed: BERT time to train, 8x A100 SXM 80GB 15.66 min / 8x A30 "
                                          "PCIe 57.73 min = 0.27, x 0.95 / 0.635 (what PCIe costs an A100 on "
                                          "4-GPU BERT, against 0.95 on one GPU [LB]); the peaks said 0.50"),
    ("a30", "cnn", 0.50, "A30", "derived: FP16 tensor peak 165 vs 312 TFLOPS, 933 vs 2039 GB/s (MLPerf "
                                "ResNet-50, PCIe to PCIe, agrees: docs/speeds.md)"),
    ("a30", "fp64", 0.54, "A30", "computed: 5.2 / 9.7 TFLOPS FP64 vector"),
    ("rtx_a6000", "transformer", 0.51, "LB", "RTX A6000, transformer geomean"),
    ("rtx_a6000", "cnn", 0.57, "LB", "RTX A6000, ResNet-50 and SSD geomean"),
    ("rtx_a5000", "transformer", 0.37, "LB", "derived: RTX A6000's 0.51 x FP32 peak 27.8 / 38.7 TFLOPS (same "
                                              "768 GB/s); no measured row"),
    ("rtx_a5000", "cnn", 0.41, "LB", "derived: 0.57 x 27.8 / 38.7"),
    ("rtx_6000_ada", "transformer", 0.68, "LB", "RTX 6000 Ada, transformer geomean"),
    ("rtx_6000_ada", "cnn", 0.73, "LB", "RTX 6000 Ada, ResNet-50 and SSD geomean"),
    ("quadro_rtx_8000", "transformer", 0.37, "LB", "Quadro RTX 8000, transformer geomean"),
    ("quadro_rtx_8000", "cnn", 0.40, "LB", "Quadro RTX 8000, ResNet-50 and SSD geomean"),
    ("rtx_3090", "transformer", 0.40, "LB", "RTX 3090, transformer geomean"),
    ("rtx_3090", "cnn", 0.54, "LB", "RTX 3090, ResNet-50 and SSD geomean"),
    ("rtx_4090", "transformer", 0.73, "LB", "RTX 4090, transformer geomean"),
    ("rtx_4090", "cnn", 0.82, "LB", "RTX 4090, ResNet-50 and SSD geomean"),
)

#: log spread of a measured number with no scatter of its own shown (Lambda's per-model ratios
#: within a family scatter 0.1-0.25 in log for most cards)
DEFAULT_SPREAD = 0.3
#: log spread of a number derived from datasheet peaks (peaks say little of real training)
DERIVED_SPREAD = 0.5
#: log spread of a model's ``generic`` number (a job whose family is not known, or a family the
#: model has no number for): speech and recommender models land a factor 2-3 off the training
#: families' mean (Sia's DeepSpeech2 and NCF on V100 and T4, benchmarks/check_priors.py)
GENERIC_SPREAD = 0.8
#: (model, family) -> log spread, where the sources or independent measurements show it
SPREADS: dict[tuple[str, str], float] = {
    # T4 vs A100, transformers: Sia's BERT 0.09; tokens/s measured on a Slurm cluster 0.17 overall
    # and 0.63 for a small model (issue 41): a factor 7 between jobs of the family
    ("t4", "transformer"): 1.0,
    ("t4", "cnn"): 0.6,
    # V100 / A100: Sia 0.30 (BERT) to 0.65 (ResNet-50), Lambda 0.19-0.76 across its 10 models
    ("v100", "transformer"): 0.4,
    ("v100", "cnn"): 0.4,
    # consumer and workstation cards: Lambda's per-model ratios scatter 0.16-0.24 in log
    ("rtx_3090", "transformer"): 0.35, ("rtx_4090", "transformer"): 0.35,
    ("rtx_6000_ada", "transformer"): 0.35, ("rtx_a6000", "transformer"): 0.35,
    # Gavel's K80 and P100 ratios vary 2-7x between job types (FIELD 1b)
    ("k80", "transformer"): 0.6, ("k80", "cnn"): 0.6, ("p100", "transformer"): 0.5, ("p100", "cnn"): 0.5,
    # A100 / H100 pairs measured many times agree: narrow
    ("a100_80g", "transformer"): 0.1, ("a100_80g", "cnn"): 0.1,
    ("a100", "transformer"): 0.15, ("a100", "cnn"): 0.15,
    ("a100_pcie_80g", "cnn"): 0.15,
    # H100 SXM / A100: Lambda 1.98 (BERT-large), MLPerf Training v3.0 BERT 2.97 (docs/speeds.md)
    ("h100", "transformer"): 0.4, ("h100", "cnn"): 0.25,
    # MI300X from a matmul benchmark; MLPerf inference Llama-2-70B puts it at 0.96 of an H100, not 1.36
    ("mi300x", "transformer"): 0.5, ("mi300x", "cnn"): 0.5,
    # multi-GPU PCIe A100s lose more on BERT (no NVLink) than on CNNs
    ("a100_pcie_80g", "transformer"): 0.25, ("a100_pcie", "transformer"): 0.25,
}

#: compute slices of a whole GPU that MIG profiles are counted in (``3g.40gb`` = 3 of 7)
MIG_SLICES = 7
