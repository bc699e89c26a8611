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
)

#: compute slices of a whole GPU that MIG profiles are counted in (``3g.40gb`` = 3 of 7)
MIG_SLICES = 7
