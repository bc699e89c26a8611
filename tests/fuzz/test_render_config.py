"""Fuzz ``render-config``: no user text reaches a rendered file except where its value belongs.

Every string a user controls (configuration TOML, inventory TOML/JSON, options) is replaced by a
hostile one: newlines, comment and quote characters, shell metacharacters, unicode, control
bytes. The command must either refuse it (exit 2, one message, the old output directory
untouched, no temporary file) or render files that are *exactly* the files rendered with a
harmless sentinel in the same place, the sentinel replaced by the hostile text: nothing spilled
into a new line, nothing moved, and the accepted text holds no character that a Slurm, systemd,
cron, shell or Lua file would read as syntax. Run: ``pytest tests/fuzz``.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypo_profiles import scaled

from .harness import assert_refused, assert_untouched, run, snapshot_dir

#: stands in for the user's text in the reference render (valid in every field)
SENTINEL = "zqsentinelq"
#: characters no accepted value may carry into a rendered file (syntax somewhere: a comment,
#: a quote, a shell or cron metacharacter, a systemd specifier, a key=value split, whitespace)
DANGEROUS = set("\n\r\t\v\f #;=\"'`$\\%&|<>{}~*?!^") | {chr(c) for c in range(32)} | {"\x7f", "\u2028", "\u2029", "\x85"}

_HOSTILE_CHARS = list("\n\r\t #;=\"'`$\\%&|<>{}[],./-_@:+()!*?~^ \x00\x1b\x7f\u2028\u00e9\u0663\u200bAaZz09")
#: a hostile middle part: short strings over the characters that matter, plus anything
HOSTILE = st.one_of(
    st.text(alphabet=st.sampled_from(_HOSTILE_CHARS), min_size=0, max_size=10),
    st.text(max_size=8),
    st.sampled_from(["x\n", "\nx", "a b", "..", "", "x\nGresTypes=evil", "a#b", "a=b", "$(reboot)", "a;b",
                     "a\x00b", "A", "a" * 80, "\u0663", "%n", "a/../b", "x\r", "é"]),
)


@dataclass(frozen=True)
class Field:
    """One place user text enters: where it goes (``config``/``inventory``/``option``), its
    key path or option name, and the value around the fuzzed part (``{}``)."""

    name: str
    source: str
    key: tuple[str, ...]
    template: str = "{}"
    target: str = "cluster"


FIELDS = [
    Field("cluster name (config)", "config", ("cluster", "name")),
    Field("state_dir", "config", ("controller", "state_dir"), "/opt/{}/state"),
    Field("audit_log", "config", ("controller", "audit_log"), "/opt/{}/audit.jsonl"),
    Field("tenant (config)", "config", ("tenants", "*")),
    Field("cluster name (inventory)", "inventory", ("cluster", "name")),
    Field("GPU type", "inventory", ("gpu_types", "*")),
    Field("node name", "inventory", ("gpu_types", "t4", "nodes")),
    Field("device files", "inventory", ("gpu_types", "t4", "files"), "/dev/{}"),
    Field("tenant (inventory)", "inventory", ("tenants", "*")),
    Field("--executable", "option", ("--executable",), "/usr/local/bin/{}"),
    Field("--installed-config", "option", ("--installed-config",), "/etc/{}/sf.toml"),
    Field("--run-as", "option", ("--run-as",)),
    # --target docker: the inventory is a testbed description (conf/testbed.toml's shape)
    Field("docker: cluster name", "inventory", ("cluster", "name"), target="docker"),
    Field("docker: GPU type", "inventory", ("gpu_types", "*"), target="docker"),
    Field("docker: node name", "inventory", ("gpu_types", "v100", "nodes"), target="docker"),
    Field("docker: tenant", "inventory", ("tenants", "*"), target="docker"),
]


def _toml_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string (\\uXXXX escapes included)
    return json.dumps(value)


def _toml(doc: dict) -> str:
    """A small TOML writer for the documents below (tables of scalars, one level of subtables)."""
    lines: list[str] = []
    for section, body in doc.items():
        scalars = {k: v for k, v in body.items() if not isinstance(v, dict)}
        subs = {k: v for k, v in body.items() if isinstance(v, dict)}
        if scalars or not subs:
            lines.append(f"[{json.dumps(section)}]")
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in scalars.items()]
        for name, table in subs.items():
            lines.append(f"[{json.dumps(section)}.{json.dumps(name)}]")
            lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def documents(field: Field, text: str) -> tuple[dict, dict, dict[str, str]]:
    """(config, inventory, options) with ``field`` holding ``field.template`` of ``text``."""
    value = field.template.format(text)
    config: dict = {"controller": {"state_dir": "/opt/sf/state", "audit_log": "/opt/sf/audit.jsonl"}}
    inventory: dict = {"gpu_types": {"v100": {"nodes": "gpu-v1", "gpus_per_node": 2},
                                     "t4": {"nodes": "gpu-t1", "gpus_per_node": 1, "billing_weight": 0.25}}}
    if field.target == "docker":
        inventory = {"cluster": {"name": "c"}, "gpu_types": {"v100": {"nodes": "gpu-v1", "gpus_per_node": 2}},
                     "tenants": {"physics": {"fairshare": 1}}}
    options = {"--executable": "/usr/local/bin/slurm-fair", "--installed-config": "/etc/sf/sf.toml",
               "--run-as": "slurm-fair"}
    if field.source == "option":
        options[field.key[0]] = value
        return config, inventory, options
    doc = config if field.source == "config" else inventory
    section, rest = field.key[0], field.key[1:]
    if rest == ("*",):  # the fuzzed text is a table's name
        body = {"fairshare": 1} if section == "tenants" else {"nodes": "gpu-x1", "billing_weight": 0.5}
        if field.target == "docker" and section == "gpu_types":
            body = {"nodes": "gpu-x1"}
        if section == "tenants" and field.source == "config":
            body = {"weight": 1}
        doc[section] = {value: body}  # alone: no other name to sort before or after it
    elif len(rest) == 1:
        doc.setdefault(section, {})[rest[0]] = value
    else:
        doc[section][rest[0]][rest[1]] = value
    return config, inventory, options


def render(tmp: Path, field: Field, text: str, as_json: bool = False) -> tuple[int, str, Path]:
    config, inventory, options = documents(field, text)
    cfg = tmp / "sf.toml"
    cfg.write_text(_toml(config))
    inv = tmp / ("inventory.json" if as_json else "inventory.toml")
    inv.write_text(json.dumps(inventory) if as_json else _toml(inventory))
    out = tmp / "out"
    argv = ["render-config", "--config", cfg, "--inventory", inv, "--output-dir", out, "--target", field.target]
    for opt, value in options.items():
        argv += [f"{opt}={value}"]
    rc, _out, err = run(argv)
    return rc, err, out


def _reference(tmp: Path, field: Field) -> dict[str, str]:
    ref = tmp / "ref"
    ref.mkdir()
    rc, err, out = render(ref, field, SENTINEL)
    assert rc == 0, err
    files = {p.name: p.read_text() for p in out.iterdir()}
    assert any(SENTINEL in t for t in files.values()), f"{field.name}: the sentinel reaches no file"
    return files


def check(tmp: Path, field: Field, reference: dict[str, str], text: str, as_json: bool = False) -> None:
    """The property: refused cleanly, or rendered exactly as the sentinel with ``text`` in its place."""
    work = Path(tempfile.mkdtemp(dir=tmp))
    (work / "out").mkdir()
    (work / "out" / "slurm-fair.conf").write_text("# the old file\n")
    before = snapshot_dir(work / "out")
    rc, err, out = render(work, field, text, as_json)
    if rc != 0:
        assert_refused(rc, err)
        assert_untouched(out, before)
        return
    assert not (set(text) & DANGEROUS), f"{field.name}: accepted {text!r}"
    if text == "":
        return  # "" is the documented "unset" of a cluster name: the default is rendered
    got = {p.name: p.read_text() for p in out.iterdir()}
    assert sorted(got) == sorted(set(reference) | {"slurm-fair.conf"})  # docker leaves the old file alone
    for name, ref_text in reference.items():
        assert got[name] == ref_text.replace(SENTINEL, text), f"{field.name}: {name} differs for {text!r}"


FUZZ = settings(max_examples=scaled(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("field", FIELDS, ids=[f.name for f in FIELDS])
def test_user_text_lands_only_where_its_value_belongs(field, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("render")
    reference = _reference(tmp, field)

    @FUZZ
    @given(middle=HOSTILE, prefix=st.sampled_from(["", "a", "x1"]), as_json=st.booleans())
    def prop(middle: str, prefix: str, as_json: bool) -> None:
        if field.name.endswith("node name") and set(middle) & set("[],!&^@"):
            # hostlist syntax: brackets are ranges and a comma separates two nodes (the docker
            # target renders one service per node), tested in test_hostlists_expand_or_name_the_key
            middle = middle.replace("[", "").replace("]", "").replace(",", "")
        check(tmp, field, reference, prefix + middle, as_json and field.source == "inventory" and field.target != "docker")

    prop()


#: any value of any kind where the inventory expects a string, a count or a weight
ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True), HOSTILE,
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
INVENTORY_KEYS = [("cluster", "name"), ("cluster", "cpus_per_node"), ("gpu_types", "v100", "nodes"),
                  ("gpu_types", "v100", "gpus_per_node"), ("gpu_types", "v100", "files"),
                  ("gpu_types", "v100", "billing_weight"), ("tenants", "physics", "fairshare"),
                  ("gpu_types", "v100"), ("tenants", "physics"), ("gpu_types",), ("tenants",), ("cluster",)]


@settings(max_examples=scaled(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(INVENTORY_KEYS), value=ANY_VALUE)
def test_any_value_in_the_inventory_is_rendered_or_refused(key, value, tmp_path_factory):
    """JSON inventory, any kind of value at any key: rc 0, or exit 2 with one message and
    nothing written (the written JSON may hold NaN/Infinity: strict JSON refuses them)."""
    tmp = tmp_path_factory.mktemp("inv")
    inventory: dict = {"gpu_types": {"v100": {"nodes": "gpu-[1-2]", "gpus_per_node": 2}},
                       "tenants": {"physics": {"fairshare": 2}}, "cluster": {"name": "c"}}
    node = inventory
    for part in key[:-1]:
        node = node[part]
    node[key[-1]] = value
    inv = tmp / "inventory.json"
    inv.write_text(json.dumps(inventory))
    cfg = tmp / "sf.toml"
    cfg.write_text('[controller]\nstate_dir = "/opt/sf"\naudit_log = "/opt/sf/audit.jsonl"\n')
    rc, _out, err = run(["render-config", "--config", cfg, "--inventory", inv, "--output-dir", tmp / "out"])
    if rc != 0:
        assert_refused(rc, err)
        assert not (tmp / "out").exists()


# --- the probes, one by one -----------------------------------------------------------

TESTBED = Path(__file__).resolve().parents[2] / "conf" / "testbed.toml"


@pytest.mark.parametrize("config,inventory,option", [
    ('[cluster]\nname = "fair\\n"\n', None, None),
    ('[tenants."physics\\n"]\nweight = 1\n', None, None),
    (None, 'files = "/dev/nvidia0\\n"', None),
    (None, '[tenants."physics\\n"]', None),
    (None, None, ("--run-as", "slurm\n")),
    (None, None, ("--executable", "/usr/bin/sf\n")),
    (None, None, ("--installed-config", "/etc/sf.toml\n")),
], ids=["cluster name", "config tenant", "files", "inventory tenant", "--run-as", "--executable",
        "--installed-config"])
def test_a_trailing_newline_is_refused(config, inventory, option, tmp_path):
    """Each rendered with rc 0 before: the text after the newline became a live line."""
    cfg = tmp_path / "sf.toml"
    cfg.write_text('[controller]\nstate_dir = "/opt/sf"\naudit_log = "/opt/sf/audit.jsonl"\n' + (config or ""))
    inv = tmp_path / "inv.toml"
    text = TESTBED.read_text()
    if inventory and inventory.startswith("files"):
        text = text.replace("gpus_per_node = 8\n", f"gpus_per_node = 8\n{inventory}\n")
    elif inventory:
        text = text.replace("[tenants.physics]", inventory)
    inv.write_text(text)
    argv = ["render-config", "--config", cfg, "--inventory", inv, "--output-dir", tmp_path / "out"]
    rc, _out, err = run(argv + list(option or ()))
    assert_refused(rc, err, "\\n")  # the newline shown escaped, the message on one line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ["", "# nothing\n", "[cluster]\nname = \"c\"\n", "[tenants.a]\n"])
def test_docker_with_an_inventory_naming_no_gpu_type_is_refused(text, tmp_path):
    """It rendered the testbed's built-in defaults, silently."""
    inv = tmp_path / "empty.toml"
    inv.write_text(text)
    rc, _out, err = run(["render-config", "--target", "docker", "--inventory", inv, "--output-dir", tmp_path / "o"])
    assert_refused(rc, err, "gpu_types", str(inv))
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name,data,needle", [
    ("latin1.toml", "[cluster]\nname = \"caf\xe9\"\n".encode("latin-1"), "not UTF-8"),
    ("binary.toml", b"\x00\x01\x02", "NUL byte"),
    ("nan.json", b'{"gpu_types": {"v100": {"nodes": "n1", "billing_weight": NaN}}}', "NaN"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nested"),
    ("big.json", b'{"gpu_types": {"v100": {"nodes": "n1", "gpus_per_node": ' + b"9" * 400 + b"}}}", "digits"),
    ("inf.toml", b'[gpu_types.v100]\nnodes = "n1"\nbilling_weight = inf\n', "finite"),
    ("huge.toml", b'[gpu_types.v100]\nnodes = "n[1-100000000]"\n', "more than"),
    ("group.toml", b'[gpu_types.v100]\nnodes = "@all"\n', "not a hostlist"),
    ("list.json", b"[1, 2]", "top level"),
    ("bad.toml", b"[gpu_types\n", "TOML"),
], ids=lambda v: v if isinstance(v, str) and v.endswith(("toml", "json")) else "")
def test_an_unreadable_inventory_is_one_message(name, data, needle, tmp_path):
    inv = tmp_path / name
    inv.write_bytes(data)
    rc, _out, err = run(["render-config", "--inventory", inv, "--output-dir", tmp_path / "o"])
    assert_refused(rc, err, needle)
    assert not (tmp_path / "o").exists()


def test_an_inventory_with_a_bom_is_read(tmp_path):
    inv = tmp_path / "bom.toml"
    inv.write_bytes(b"\xef\xbb\xbf" + TESTBED.read_bytes())
    rc, _out, err = run(["render-config", "--inventory", inv, "--output-dir", tmp_path / "o"])
    assert rc == 0, err


# --- issue 18 review: device lists, JSON for docker, rendering over the inputs ------------------

@pytest.mark.parametrize("files,gpus,ok", [
    ("/dev/nvidia[0-3]", 4, True), ("/dev/nvidia[0,1,2-3]", 4, True), ("/dev/nvidia5", 1, True),
    ("/dev/nvidia[0-1]", 4, False), ("/dev/nvidia0", 4, False), ("/dev/nvidia[3-0]", 4, False),
    ("/dev/nvidia[0,0,0,0]", 4, False), ("/dev/nvidia[0-1,1-2]", 4, False), ("/dev/nvidia[0-99999999]", 4, False),
])
def test_device_files_expand_to_gpus_per_node(files, gpus, ok):
    from slurm_fair.deploy.inventory import device_problem

    assert (device_problem(files, gpus) is None) == ok


def test_docker_reads_a_json_inventory_like_cluster(tmp_path):
    from slurm_fair.config import tomllib

    data = tomllib.loads((Path(__file__).resolve().parents[2] / "conf" / "testbed.toml").read_text())
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps(data))
    rc, _, err = run(["render-config", "--target", "docker", "--inventory", inv, "--output-dir", tmp_path / "out"])
    assert rc == 0, err
    assert (tmp_path / "out" / "gres.conf").is_file()


def test_render_config_refuses_to_write_over_its_inventory_through_a_symlink(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    inv = tmp_path / "inv.toml"
    inv.write_text((Path(__file__).resolve().parents[2] / "conf" / "testbed.toml").read_text())
    (out / "gres.conf").symlink_to(inv)
    before = snapshot_dir(tmp_path)
    rc, _, err = run(["render-config", "--inventory", inv, "--output-dir", out])
    assert_refused(rc, err, "--inventory")
    assert_untouched(tmp_path, before)
