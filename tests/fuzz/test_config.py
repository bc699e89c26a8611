"""Hostile configuration files: every key of the schema, every kind of wrong value, all at once.

The promise (README): a bad configuration is one message naming the file and *every* bad key,
exit code 2, never a traceback, and nothing runs: ``run --dry-run`` here, whose port is replaced
by one that fails the test if it is ever reached (a value that passes validation and breaks a
cycle later is exactly what these tests hunt). Run: ``pytest tests/fuzz``.
"""

from __future__ import annotations

import math
import tempfile
from slurm_fair.config import tomllib
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from slurm_fair import config
from slurm_fair.errors import ConfigError
from .harness import assert_refused, assert_untouched, run, snapshot_dir

# --- writing TOML (the standard library only reads it) ----------------------------------------


def toml_str(s: str) -> str:
    """A TOML basic string of ``s``: every control character, quote and backslash escaped."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_str(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def toml_doc(tables: dict[str, dict[str, Any]]) -> str:
    """``{"controller": {...}, "tenants.\\"x\\"": {...}}`` as a TOML document."""
    return "".join(f"[{name}]\n" + "".join(f"{toml_str(k)} = {toml_value(v)}\n" for k, v in body.items()) + "\n"
                   for name, body in tables.items())


def test_the_writer_round_trips() -> None:
    doc = {"a": {"s": "x\n\"\\\x7f\x00é", "f": 1.5, "n": -3, "b": True, "l": [1, "y"], "t": {"k\n": "v"}}}
    assert tomllib.loads(toml_doc(doc)) == doc
    assert math.isnan(tomllib.loads(toml_doc({"a": {"x": math.nan}}))["a"]["x"])


# --- hostile values, per key ------------------------------------------------------------------

NUMBERS_BAD = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, -1, -1e-9, 10**30, -(10**30), 1e300]),
    st.floats(max_value=-1e-6, allow_nan=False, allow_infinity=False),
)
#: a value of another kind than the key's, whatever the key
OTHER_KINDS = {
    "number": st.one_of(st.text(max_size=8), st.booleans(), st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.sampled_from("ab"), st.integers(), max_size=1)),
    "string": st.one_of(st.integers(), st.floats(), st.booleans(), st.lists(st.text(max_size=3), max_size=2),
                        st.dictionaries(st.sampled_from("ab"), st.text(max_size=3), max_size=1)),
    "list": st.one_of(st.text(max_size=8), st.integers(), st.booleans(),
                      st.dictionaries(st.sampled_from("ab"), st.text(max_size=3), max_size=1)),
    "table": st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.lists(st.text(max_size=3), max_size=2)),
    "bool": st.one_of(st.text(max_size=8), st.integers(), st.floats()),
}
#: text no name, path or choice accepts: a control character inside (a trailing newline too)
CONTROL = st.builds(lambda a, c, b: a + c + b, st.text(max_size=6), st.sampled_from("\n\r\t\x00\x1b\x7f"),
                    st.text(max_size=6))
BAD_NAME = st.one_of(CONTROL, st.sampled_from(["bad name!", "a;rm -rf", "１２", "é", "a" * 65, "x/y"]))
BAD_PATH = st.one_of(CONTROL, st.sampled_from(["relative/dir", "./x", "/proc/slurm-fair", "/sys/x", "/dev/null/x",
                                               "/dev", "~/x"]))
BAD_CHOICE = st.one_of(CONTROL, st.sampled_from(["OEF", "nope", "oef ", " cli", "random", "Auto"]))

TYPE_OF = {"policy": "string", "solver": "string", "order": "string", "backend": "string", "pin_gres_type": "bool",
           "total_limit": "bool", "accounts": "list", "policy_options": "list", "classes": "list",
           "manage_accounts": "list", "manage_partitions": "list", "mode": "string",
           "account_classes": "table", "name_classes": "table", "retries": "number", "parallel_calls": "number"}


def bad_values(key: str, spec: config.Key) -> st.SearchStrategy[Any]:
    """Values ``key`` must refuse: another kind, and the hostile values of its own kind."""
    kind = TYPE_OF.get(key) or ("bool" if spec.types == (bool,) else "number" if float in spec.types else "string")
    if key == "pin_gres_type":  # true, false or "auto"
        return st.one_of(BAD_CHOICE, st.integers(), st.floats(), st.lists(st.booleans(), max_size=2))
    own: list[st.SearchStrategy[Any]] = [OTHER_KINDS[kind]]
    if kind == "number":
        own.append(NUMBERS_BAD)
    elif key in ("policy", "solver", "order", "backend", "pin_gres_type", "mode"):
        own.append(BAD_CHOICE)
    elif key in ("state_dir", "audit_log", "plan_file", "class_table", "bin_dir", "site_job_submit"):
        own.append(BAD_PATH)
    elif key in ("name", "default_class"):
        own.append(BAD_NAME)
    elif kind == "list":
        own.append(st.lists(st.one_of(BAD_NAME, st.integers(), st.booleans()), min_size=1, max_size=3))
    elif kind == "table":
        own.append(st.one_of(st.dictionaries(BAD_NAME, st.just("resnet18"), min_size=1, max_size=2),
                             st.dictionaries(st.just("physics"), st.one_of(BAD_NAME, st.integers()), min_size=1,
                                             max_size=1)))
    if key == "name_classes":  # any printable glob is a key, so only the values and kinds are bad
        own = [OTHER_KINDS["table"], st.dictionaries(st.just("bert*"), st.one_of(BAD_NAME, st.integers()),
                                                     min_size=1, max_size=1)]
    return st.one_of(own)


KEYS = [(section, key, spec) for section, keys in config.SCHEMA.items() for key, spec in keys.items()]
TENANT_KEYS = list(config._TENANT_KEYS.items())


@st.composite
def hostile_configs(draw: st.DrawFn) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """A configuration with 1-4 bad keys (and maybe an unknown key and a bad tenant): the TOML
    tables and the ``section.key`` each problem must be reported under."""
    tables: dict[str, dict[str, Any]] = {}
    wheres: set[str] = set()
    for section, key, spec in draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4,
                                            unique_by=lambda k: (k[0], k[1]))):
        tables.setdefault(section, {})[key] = draw(bad_values(key, spec))
        wheres.add(f"{section}.{key}")
    if draw(st.booleans()):
        key, spec = draw(st.sampled_from(TENANT_KEYS))
        tables['tenants."physics"'] = {key: draw(bad_values(key, spec))}
        wheres.add(f"tenants.physics.{key}")
    if draw(st.booleans()):
        section = draw(st.sampled_from(sorted(config.SCHEMA)))
        tables.setdefault(section, {})["polcy_x"] = 1
        wheres.add(f"{section}.polcy_x")
    return tables, wheres


@pytest.fixture(scope="module")
def no_port() -> Iterator[None]:
    """A port that fails the test when reached: the configuration must be refused before."""
    def reached(*a: Any, **k: Any) -> Any:
        raise AssertionError("the configuration was accepted and the command went on to Slurm")

    with mock.patch("slurm_fair.commands.run.make_port", reached):
        yield


def refuse_file(text: str | bytes, *needles: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "slurm-fair.toml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
        before = snapshot_dir(Path(tmp))
        rc, out, err = run(["run", "--once", "--dry-run", "--config", path])
        assert_refused(rc, err, str(path), *needles)
        assert out == ""
        assert_untouched(Path(tmp), before)


@settings(max_examples=scaled(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_configs())
def test_every_bad_key_is_named_in_one_message(no_port: None, case: tuple[dict, set[str]]) -> None:
    tables, wheres = case
    refuse_file(toml_doc(tables), *wheres)


@settings(max_examples=scaled(60), deadline=None)
@given(st.sampled_from(sorted(config.SCHEMA) + ["tenants", 'tenants."physics"']), OTHER_KINDS["table"])
def test_a_section_of_the_wrong_kind_is_named(no_port: None, section: str, value: Any) -> None:
    """``controller = 3``, ``tenants = [..]``, ``[tenants] physics = "x"``: a table was expected."""
    if section.startswith("tenants."):
        text, needle = f"[tenants]\nphysics = {toml_value(value)}\n", "tenants.physics"
    else:
        text, needle = f"{section} = {toml_value(value)}\n", section
    refuse_file(text, needle)


@settings(max_examples=scaled(60), deadline=None)
@given(BAD_NAME)
def test_a_tenant_that_is_no_slurm_account_is_named(no_port: None, name: str) -> None:
    refuse_file(f"[tenants.{toml_str(name)}]\nweight = 1\n", "tenants.")


@settings(max_examples=scaled(60), deadline=None)
@given(st.binary(min_size=1, max_size=64).filter(lambda b: b"\0" in b or not _utf8(b)))
def test_a_binary_or_latin1_file_is_named_with_its_byte(no_port: None, data: bytes) -> None:
    refuse_file(b"[cluster]\nname = \"" + data + b"\"\n", "byte")


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(max_examples=scaled(80), deadline=None)
@given(st.text(max_size=40))
def test_any_text_is_a_configuration_or_one_message(no_port: None, text: str) -> None:
    """Random text: malformed TOML names its line; a valid document with odd keys names them."""
    try:
        config.validate(tomllib.loads(text.removeprefix("\ufeff")))  # read_text drops a BOM
    except (tomllib.TOMLDecodeError, ConfigError, ValueError, RecursionError):
        refuse_file(text)


@pytest.mark.parametrize("text", ["a = " + "[" * 5000 + "]" * 5000, "a = {" * 3000, "a = " + "9" * 5000])
def test_nesting_and_huge_integers_are_one_message(no_port: None, text: str) -> None:
    refuse_file(text, "not valid TOML")


# --- the probes of issue 18, one by one --------------------------------------------------------

PROBES = [
    ("[slurm]\ncommand_timeout_s = inf\n", "slurm.command_timeout_s"),
    ("[controller]\ninterval_s = inf\n", "controller.interval_s"),
    ("[controller]\ninterval_s = nan\n", "controller.interval_s"),
    ("[controller]\ninterval_s = 0.01\n", "controller.interval_s"),
    ("[tenants.physics]\nweight = inf\n", "tenants.physics.weight"),
    ("[slurm]\nretries = 99999999999999999999999999999\n", "slurm.retries"),
    ("[report]\nwindow_days = 1e300\n", "report.window_days"),
    ('[controller]\npolicy = "nope"\n', "controller.policy"),
    ('[controller]\npolicy = "oef\\n"\n', "controller.policy"),
    ("[throughput]\ndefault_class = 3\n", "throughput.default_class"),
    ('[throughput]\ndefault_class = "resnet18\\nx"\n', "throughput.default_class"),
    ('[throughput]\naccount_classes = ["physics"]\n', "throughput.account_classes"),
    ('[throughput]\naccount_classes = {physics = ["resnet18"]}\n', "throughput.account_classes"),
    ('[tenants.physics]\nclasses = "resnet18"\n', "tenants.physics.classes"),
    ('[tenants.physics]\nclasses = [3]\n', "tenants.physics.classes"),
    ('[controller]\naccounts = "physics"\n', "controller.accounts"),
    ('[controller]\naccounts = ["physics\\n"]\n', "controller.accounts"),
    ('[tenants."physics\\n"]\nweight = 1\n', 'tenants."physics\\n"'),
    ('[cluster]\nname = "fair\\n"\n', "cluster.name"),
    ('[controller]\nstate_dir = ""\n', "controller.state_dir"),
    ('[controller]\nstate_dir = "state"\n', "controller.state_dir"),
    ('[controller]\nstate_dir = "/proc/slurm-fair"\n', "controller.state_dir"),
    ('[controller]\naudit_log = "/dev/full"\n', "controller.audit_log"),
]


@pytest.mark.parametrize("text, where", PROBES)
def test_named_probes_are_refused_at_validation(no_port: None, text: str, where: str,
                                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # state_dir = "" used to write here
    refuse_file(text, where)
    assert list(tmp_path.iterdir()) == []


def test_a_state_dir_that_is_a_file_is_refused(no_port: None, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    refuse_file(f'[controller]\nstate_dir = "{tmp_path}/f"\n', "controller.state_dir", "not one")
    refuse_file(f'[controller]\nstate_dir = "{tmp_path}/f/sub"\n', "controller.state_dir", "under a directory")
    assert (tmp_path / "f").read_text() == "x"


@pytest.mark.parametrize("path, needle", [("/dev/null", "not a regular file"), ("/tmp", "directory")])
def test_a_config_path_that_is_no_file_is_refused(no_port: None, path: str, needle: str) -> None:
    rc, _, err = run(["run", "--dry-run", "--config", path])
    assert_refused(rc, err, needle)
    with mock.patch.dict("os.environ", {config.CONFIG_ENV: path}):
        rc, _, err = run(["run", "--dry-run"])
    assert_refused(rc, err, path)


def test_a_latin1_config_names_the_file_line_and_byte(no_port: None) -> None:
    refuse_file("[cluster]\nname = \"caf\xe9\"\n".encode("latin-1"), "line 2", "0xe9")


def test_a_toml_error_names_the_line(no_port: None) -> None:
    refuse_file("[controller]\npolicy = oef\n", "line 2", "not valid TOML")


# --- issue 18 review: class table, state_dir, outputs onto the configuration ----------------

def _validate_at(tmp: Path, text: str) -> None:
    cfg = tmp / "sf.toml"
    cfg.write_text(text)
    config.load(cfg)


@pytest.mark.parametrize("table, needle", [
    (None, "no such file"),
    (b"class,v100\nres\xe9,1\n", "utf-8"),
    (b"class,v100\nresnet," + b"1" * 200_000 + b"\n", "longer than"),
    (b'class,v100\n"resnet,1\n', "csv"),
    (b"class,v100\nresnet,fast\n", "not a number"),
])
def test_the_class_table_is_read_with_the_configuration(table: bytes | None, needle: str) -> None:
    """A missing or unreadable class table is a problem of the configuration (its key named,
    the table's file and line in the message), found before any command reads Slurm."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "classes.csv"
        if table is not None:
            path.write_bytes(table)
        with pytest.raises(ConfigError) as exc:
            _validate_at(Path(tmp), f'[throughput]\nclass_table = "{path}"\n')
        msg = exc.value.message()
        assert "throughput.class_table" in msg and "classes.csv" in msg and needle in msg.lower(), msg
        assert "\n" not in msg


def test_a_good_class_table_still_loads() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "classes.csv"
        path.write_text("class,v100,k80\nresnet,2,1\n")
        _validate_at(Path(tmp), f'[throughput]\nclass_table = "{path}"\n')


@pytest.mark.parametrize("state_dir", ["/", "/etc", "/usr/", "/var/lib", "//"])
def test_a_system_directory_is_not_a_state_dir(state_dir: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with pytest.raises(ConfigError, match="controller.state_dir: must be a directory of its own"):
            _validate_at(Path(tmp), f'[controller]\nstate_dir = "{state_dir}"\n')


@pytest.mark.parametrize("key", ["audit_log", "plan_file"])
def test_an_output_onto_the_configuration_file_is_refused(key: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "sf.toml"
        text = f'[controller]\nstate_dir = "{tmp}/state"\n{key} = "{cfg}"\n'
        with pytest.raises(ConfigError, match=f"controller.{key}: would write .*the configuration file"):
            _validate_at(Path(tmp), text)


def test_the_store_as_the_configuration_file_and_clashing_outputs_are_refused() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "state.sqlite"
        with pytest.raises(ConfigError, match="controller.state_dir: would write"):
            config.load(cfg.write_text(f'[controller]\nstate_dir = "{tmp}"\n') and cfg)
        other = Path(tmp) / "sf.toml"
        other.write_text(f'[controller]\nstate_dir = "{tmp}/s"\naudit_log = "{tmp}/x"\nplan_file = "{tmp}/x"\n')
        with pytest.raises(ConfigError, match="controller.plan_file: would write .*controller.audit_log"):
            config.load(other)
