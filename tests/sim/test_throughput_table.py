"""The throughput table: loading, the documented fallback, and its counter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_fair.estimates import gavel as tt
from slurm_fair.errors import InputError


def _write(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


def test_embedded_table_has_gavel_types_and_measured_values() -> None:
    table = tt.load()
    assert {"v100", "p100", "k80"} <= set(table.gpu_types)
    assert len(table.job_types) == 26
    raw = json.loads(
        (Path(tt.__file__).parents[1] / "data" / "gavel_throughputs.json").read_text()
    )
    key = "('ResNet-50 (batch size 32)', 4)"
    assert table.lookup("ResNet-50 (batch size 32)", 4, "p100") == raw["p100"][key]["null"]
    assert table.fallback_count == 0


def test_fallback_scales_nearest_measured_count_and_counts(tmp_path: Path) -> None:
    table = tt.load(_write(tmp_path, {"v100": {"('A', 1)": {"null": 10.0}, "('A', 4)": {"null": 30.0}}}))
    # 2 is nearer to 1 than to 4: 10 * 2 / 1
    assert table.lookup("A", 2, "v100") == pytest.approx(20.0)
    # 3 is nearer to 4: 30 * 3 / 4
    assert table.lookup("A", 3, "v100") == pytest.approx(22.5)
    # 16 from 4: 30 * 16 / 4
    assert table.lookup("A", 16, "v100") == pytest.approx(120.0)
    assert table.lookup("A", 4, "v100") == 30.0
    assert table.fallback_count == 3
    assert table.fallbacks[("A", 16, "v100")] == 1


def test_fallback_unknown_job_type_on_a_gpu_type_uses_mean_per_gpu(tmp_path: Path) -> None:
    doc = {
        "v100": {"('A', 1)": {"null": 10.0}, "('B', 2)": {"null": 40.0}},
        "k80": {"('A', 1)": {"null": 2.0}},
    }
    table = tt.load(_write(tmp_path, doc))
    # B is not measured on k80 at all: mean per-GPU throughput there (2.0) times 2 GPUs
    assert table.lookup("B", 2, "k80") == pytest.approx(4.0)
    assert table.fallback_count == 1
    assert table.knows("B") and not table.knows("C")


def test_measured_zero_is_kept() -> None:
    table = tt.load()
    assert table.lookup("ResNet-50 (batch size 128)", 2, "k80") == 0.0
    assert table.fallback_count == 0


@pytest.mark.parametrize(
    "doc, fragment",
    [
        ({"v100": {"('A', 0)": {"null": 1.0}}}, "bad key"),
        ({"v100": {"A": {"null": 1.0}}}, "bad key"),
        ({"v100": {"('A', 1)": {"null": -1.0}}}, "must be 0"),
        ({"v100": {"('A', 1)": {"null": "fast"}}}, "number"),
        ({"v100": [1, 2]}, "object"),
        ([], "expected an object"),
    ],
)
def test_bad_tables_are_input_errors_naming_the_key(tmp_path: Path, doc: object, fragment: str) -> None:
    with pytest.raises(InputError) as info:
        tt.load(_write(tmp_path, doc))
    assert fragment in info.value.message()
    assert str(tmp_path / "t.json") in info.value.message()


def test_malformed_json_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  oops")
    with pytest.raises(InputError, match="line 2"):
        tt.load(bad)
    with pytest.raises(InputError, match="cannot read"):
        tt.load(tmp_path / "missing.json")


def test_key_round_trip() -> None:
    assert tt.parse_key(tt.format_key("LM (batch size 20)", 8)) == ("LM (batch size 20)", 8)
