"""``metrics``' live gauges: a real cycle on the fake Slurm, then the exposition parsed with
prometheus_client's own parser and checked against the fake cluster and the state store."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurm_fair import __version__
from slurm_fair.cli import main
from slurm_fair.commands import report as report_cmd
from slurm_fair.config import validate
from slurm_fair.controller.cycle import run_cycle
from slurm_fair.controller.state import StateStore
from slurm_fair.report.live import live_families, store_families
from slurm_fair.report.prometheus import exposition



def samples(text: str) -> dict[str, dict[tuple, float]]:
    """name -> {sorted labels: value}, through prometheus_client's parser (strict enough: it
    raises on malformed lines)."""
    out: dict[str, dict[tuple, float]] = defaultdict(dict)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = tuple(sorted(s.labels.items()))
            assert key not in out[s.name], f"duplicate series {s.name}{key}"
            out[s.name][key] = s.value
    return out


def by(series: dict[tuple, float], *names: str) -> dict[tuple, float]:
    return {tuple(dict(k)[n] for n in names): v for k, v in series.items()}


@pytest.fixture
def cycled(fake, tmp_path, monkeypatch):
    """Two tenants: alice with one job running on v100 and two pending, bob with two pending;
    one real cycle recorded in the store. Returns (config file, fake, state store path)."""
    cfg = tmp_path / "slurm-fair.toml"
    cfg.write_text(f'[controller]\nstate_dir = "{tmp_path / "state"}"\naudit_log = "{tmp_path / "audit.jsonl"}"\n')
    config = validate({"controller": {"state_dir": str(tmp_path / "state"), "audit_log": str(tmp_path / "audit.jsonl")}},
                      str(cfg))
    run1 = fake.submit("alice", "--gres=gpu:2", hold=False, comment="fair:class=resnet-50-bs32")
    fake.start(run1, "v100-1", "v100")
    fake.submit("alice", "--gres=gpu:1", hold=False, comment="fair:class=a3c")
    fake.submit("alice", "--gres=gpu:3", hold=False)
    fake.submit("bob", "--gpus=2", hold=False, comment="fair:class=lm-bs20")
    fake.submit("bob", "--gres=gpu:1", hold=False)
    res = run_cycle(fake, config, clock=iter([1000.0 + i for i in range(100)]).__next__)
    assert res.status == "ok", res.message
    monkeypatch.setattr(report_cmd, "make_port", lambda config: fake)  # the window from its sacct
    return cfg, fake, tmp_path / "state" / "state.sqlite"


def test_live_gauges_agree_with_the_cluster_and_the_store(cycled, capsys):
    cfg, fake, store = cycled
    assert main(["metrics", "--config", str(cfg), "--since", "2024-05-01"]) == 0
    m = samples(capsys.readouterr().out)

    # allocated: the fake cluster's running jobs, computed here from Slurm's side
    running: dict[tuple, float] = defaultdict(float)
    pend_total: dict[str, float] = defaultdict(float)
    for j in fake.jobs():
        if j.state == "RUNNING":
            running[(j.account, j.gpu_type_running)] += sum(j.gpus_on_nodes().values())
        else:
            assert j.gpu_request.nodes == 1  # one node each: count is the job's GPUs
            pend_total[j.account] += j.gpu_request.count
    alloc = by(m["slurm_fair_tenant_allocated_gpus"], "account", "gpu_type")
    assert {k: v for k, v in alloc.items() if v} == dict(running) == {("alice", "v100"): 2.0}
    # pending: every pending GPU counted once, on some type
    pend = by(m["slurm_fair_tenant_pending_gpus"], "account", "gpu_type")
    per_tenant: dict[str, float] = defaultdict(float)
    for (u, _), v in pend.items():
        per_tenant[u] += v
    assert dict(per_tenant) == dict(pend_total) == {"alice": 4.0, "bob": 3.0}

    # entitled and limits: exactly the store's last decision
    with StateStore.read_only(store) as st:
        rows = {r["tenant"]: r for r in (st.tenant_cycle(st.cycles(1)[0]["cycle_id"], t) for t in ("alice", "bob"))}
        last = st.cycles(1)[0]
    ent = by(m["slurm_fair_tenant_entitled_gpus"], "account", "gpu_type")
    assert ent == {(u, k): pytest.approx(v) for u, r in rows.items() for k, v in r["fair_share"].items()}
    assert ent and math.isclose(sum(ent.values()), sum(sum(r["fair_share"].values()) for r in rows.values()))
    planned = by(m["slurm_fair_tenant_planned_gpus"], "account", "gpu_type")
    assert planned == {(u, k): pytest.approx(v) for u, r in rows.items() for k, v in r["bundle"].items()}
    # and no QOS was made for it: slurm-fair writes no limits
    assert [q.name for q in fake.qos()] == ["normal"]

    # controller health
    one = lambda name: next(iter(m[name].values()))  # noqa: E731
    assert one("slurm_fair_controller_last_success_timestamp_seconds") == last["finished_at"]
    assert one("slurm_fair_controller_cycle_duration_seconds") == pytest.approx(last["finished_at"] - last["started_at"])
    assert one("slurm_fair_controller_actions_applied") == last["applied"] > 0
    assert one("slurm_fair_controller_actions_failed") == last["failed"] == 0
    assert m["slurm_fair_build_info"] == {(("version", __version__),): 1.0}
    # the window metrics are still there, with their names
    assert "slurm_fair_report_window_seconds" in m and "slurm_fair_gpu_type_capacity_gpus" in m


def test_no_store_means_no_live_gauges_only_build_info(tmp_path):
    fams = live_families(tmp_path / "nope.sqlite")
    assert [f.name for f in fams if f.samples] == ["slurm_fair_build_info"]
    assert not (tmp_path / "nope.sqlite").exists()


def test_store_is_not_written(cycled, capsys):
    cfg, _, store = cycled
    before = (store.stat().st_mtime_ns, store.stat().st_size)
    assert main(["metrics", "--config", str(cfg), "--since", "2024-05-01"]) == 0
    assert (store.stat().st_mtime_ns, store.stat().st_size) == before


def test_failed_last_cycle_and_totals_kept_apart():
    last = {"started_at": 10.0, "finished_at": 13.5, "status": "partial", "applied": 3, "failed": 2}
    tenants = [{"tenant": "a", "fair_share": {"v100": 1.5}, "bundle": {"v100": 2.0}, "limits": {}}]
    jobs = [{"tenant": "a", "state": "RUNNING", "gpus": 2, "placed_type": None, "planned_type": None,
             "estimate": {"fixed_type": "k80"}},
            {"tenant": "a", "state": "PENDING", "gpus": 4, "placed_type": None, "planned_type": None, "estimate": {}}]
    m = samples(exposition(store_families(last, None, ("c", tenants, jobs))))
    assert "slurm_fair_controller_last_success_timestamp_seconds" not in m  # never ok: absent
    assert by(m["slurm_fair_controller_cycle_duration_seconds"]) == {(): 3.5}
    assert by(m["slurm_fair_controller_actions_failed"]) == {(): 2}
    assert by(m["slurm_fair_controller_last_cycle_ok"], "status") == {("partial",): 0}
    assert by(m["slurm_fair_tenant_planned_gpus"], "gpu_type") == {("v100",): 2.0}
    assert by(m["slurm_fair_tenant_allocated_gpus"], "gpu_type") == {("k80",): 2, ("v100",): 0}
    assert by(m["slurm_fair_tenant_pending_gpus"], "gpu_type") == {("any",): 4}


def test_run_loop_serves_the_live_gauges_over_http(cycled):
    """``run --loop --metrics-port``'s server (port 0: a free one, never a shared port), read
    at each scrape: a cycle recorded after it started shows up without restarting it."""
    import urllib.request

    from slurm_fair.commands.run import serve_metrics

    _, fake, store = cycled
    server = serve_metrics("127.0.0.1", 0, store)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        first = samples(urllib.request.urlopen(url, timeout=10).read().decode())
        assert server.server_address[0] == "127.0.0.1"
        with StateStore.read_only(store) as st:
            assert len(st.cycles()) == 1
        ok1 = first["slurm_fair_controller_last_success_timestamp_seconds"][()]
        config = validate({"controller": {"state_dir": str(store.parent), "audit_log": str(store.parent / "a.jsonl")}},
                          str(store.parent / "x.toml"))
        assert run_cycle(fake, config, clock=iter([5000.0 + i for i in range(100)]).__next__).status == "ok"
        second = samples(urllib.request.urlopen(url, timeout=10).read().decode())
        assert second["slurm_fair_controller_last_success_timestamp_seconds"][()] > ok1
        assert "slurm_fair_tenant_entitled_gpus" in second
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_port_without_loop_is_a_user_error(tmp_path, capsys):
    code = main(["run", "--once", "--metrics-port", "9999", "--config", str(tmp_path / "none.toml")])
    err = capsys.readouterr().err
    assert code == 2 and "--metrics-port needs --loop" in err and "Traceback" not in err
