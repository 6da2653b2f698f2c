"""bench_train's MFU denominator: how the matmul peak is measured (size, threads, dtype, warm-up, best of reps) and
that the written MFU is achieved / that peak. No speed is asserted: a fake clock and a recording matmul stand in."""
from __future__ import annotations

import json
import sys

import pytest
import torch


class FakeClock:
    """perf_counter that only moves when the recording matmul runs: each call takes the next scripted duration."""

    def __init__(self, durations):
        self.now, self.durations, self.calls = 0.0, list(durations), []

    def perf_counter(self):
        return self.now

    def matmul(self, a, b, *, out=None):
        self.calls.append({"shape": (tuple(a.shape), tuple(b.shape)), "dtype": a.dtype, "out": out is not None,
                           "threads": torch.get_num_threads()})
        self.now += self.durations.pop(0) if self.durations else 1.0
        return out


def test_peak_is_the_best_timed_rep_after_warm_up_at_2048_on_the_run_threads(bt, monkeypatch):
    n, flop = 2048, 2 * 2048**3
    # warm-up calls are fast here (a peak that timed them would be too high); the timed reps vary, best is 0.05 s
    warm = [0.001] * 3 + [0.2] * 3  # the warm-up lasts >= PEAK_WARMUP_S: 3 fast calls are not enough
    reps = [0.30, 0.08, 0.05, 0.40, 0.09, 0.07, 0.06, 0.11, 0.12, 0.10]
    clock = FakeClock(warm + reps)
    monkeypatch.setattr(bt.time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(bt.torch, "matmul", clock.matmul)
    before = torch.get_num_threads()
    threads = 1 if before != 1 else 2
    p = bt.matmul_peak(torch.float32, threads)
    assert bt.PEAK_N == n and bt.PEAK_REPS >= 10 and bt.PEAK_WARMUP_S >= 0.5
    assert all(c["shape"] == ((n, n), (n, n)) and c["dtype"] == torch.float32 and c["out"] for c in clock.calls)
    assert all(c["threads"] == threads for c in clock.calls) and p["threads"] == threads
    assert torch.get_num_threads() == before  # the caller's threads are restored
    assert p["warmup_calls"] == len(warm) and len(clock.calls) == len(warm) + len(reps) and p["reps"] == len(reps)
    assert p["gflops"] == pytest.approx(flop / min(reps) / 1e9)  # best of the timed reps, not median/first/warm-up
    assert p["rep_gflops"] == [round(flop / t / 1e9, 2) for t in reps]


@pytest.mark.parametrize("dtype,torch_dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_peak_meter_measures_the_compute_dtype_at_full_size_and_keeps_the_best_sample(bt, monkeypatch, dtype,
                                                                                     torch_dtype):
    seen = []

    def fake_peak(dt, threads, n=bt.PEAK_N, reps=bt.PEAK_REPS, warmup_s=bt.PEAK_WARMUP_S):
        seen.append((dt, threads, n))
        return {"gflops": [50.0, 170.0, 120.0][len(seen) - 1], "n": n}

    monkeypatch.setattr(bt, "matmul_peak", fake_peak)
    m = bt.PeakMeter(dtype, 2)
    for _ in range(3):
        m.sample()
    assert seen == [(torch_dtype, 2, 2048)] * 3
    assert m.gflops == 170.0 and m.to_json()["samples_gflops"] == [50.0, 170.0, 120.0]


class _FakeSide:
    param_tensors = 1

    def __init__(self, args, *_):
        self.opt_s, self.args = [], args

    def step(self, s):
        self.opt_s.append(0.0)
        return 5.0


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_written_mfu_is_achieved_over_the_peak_measured_in_the_run_for_its_dtype(bt, monkeypatch, tmp_path, dtype):
    calls = []

    def fake_peak(dt, threads, n=bt.PEAK_N, reps=bt.PEAK_REPS, warmup_s=bt.PEAK_WARMUP_S):
        g = {torch.float32: 160.0, torch.bfloat16: 400.0}[dt] + [0, 9, 3, 5, 1, 2, 4][len(calls)]  # best: 2nd call
        calls.append((dt, threads, n, g))
        return {"gflops": g, "n": n, "dtype": str(dt), "threads": threads}

    import model.parallel

    monkeypatch.setattr(bt, "matmul_peak", fake_peak)
    monkeypatch.setattr(bt, "MegatronSide", _FakeSide)
    monkeypatch.setattr(bt, "HFSide", _FakeSide)
    monkeypatch.setattr(model.parallel, "destroy", lambda: None)
    out = tmp_path / "train.json"
    monkeypatch.setattr(sys, "argv", ["bench_train.py", "--out", str(out), "--dtype", dtype, "--threads", "2",
                                      "--steps", "3", "--warmup", "1", "--mode-cost", "0", "--fused-cost", "0"])
    bt.main()
    res = json.loads(out.read_text())
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float32
    run_calls = [c for c in calls if c[0] == tdt and c[1] == 2]
    assert len(run_calls) == 1 + 3 + 1 and all(c[1:3] == (2, 2048) for c in run_calls)  # start, after each step, end
    peak = max(c[3] for c in run_calls)
    assert peak > run_calls[0][3] and peak > run_calls[-1][3]  # the best sample, not the first or last
    pk = res["matmul_peak_gflops"]
    assert pk["used"] == dtype and pk["used_gflops"] == pytest.approx(peak)
    for side in ("megatron", "hf"):
        r = res[side]
        assert r["mfu_peak_gflops"] == pytest.approx(peak)
        assert r["mfu"] == pytest.approx(r["model_gflop_per_s"] / peak)


def test_the_load_average_at_start_is_read_before_the_run(bt, monkeypatch, tmp_path):
    """machine() is called after the steps: the start's load must not be the end's (notebooks/03 prints it)."""
    import model.parallel

    loads = iter([(0.1 * i, 0.0, 0.0) for i in range(1, 50)])
    monkeypatch.setattr(bt.os, "getloadavg", lambda: next(loads))
    monkeypatch.setattr(bt, "matmul_peak", lambda dt, threads, n=2048, reps=10, warmup_s=0.5: {"gflops": 1.0, "n": n})
    monkeypatch.setattr(bt, "MegatronSide", _FakeSide)
    monkeypatch.setattr(bt, "HFSide", _FakeSide)
    monkeypatch.setattr(model.parallel, "destroy", lambda: None)
    out = tmp_path / "train.json"
    monkeypatch.setattr(sys, "argv", ["bench_train.py", "--out", str(out), "--steps", "1", "--warmup", "0",
                                      "--mode-cost", "0", "--fused-cost", "0"])
    bt.main()
    m = json.loads(out.read_text())["machine"]
    assert m["load_average_at_start"] == m["load_average_start"] == [0.1, 0.0, 0.0]
    assert m["load_average_end"][0] > 0.1


def test_a_peak_below_one_threads_is_refused_and_no_mfu_is_written(bt, monkeypatch, tmp_path):
    """the 2-thread samples (busy cores) stay below the 1-thread floor: mfu is None and the reason is written."""
    def fake_peak(dt, threads, n=bt.PEAK_N, reps=bt.PEAK_REPS, warmup_s=bt.PEAK_WARMUP_S):
        return {"gflops": 90.0 if threads == 1 else 60.0, "n": n, "dtype": str(dt), "threads": threads}

    import model.parallel

    monkeypatch.setattr(bt, "matmul_peak", fake_peak)
    monkeypatch.setattr(bt, "MegatronSide", _FakeSide)
    monkeypatch.setattr(bt, "HFSide", _FakeSide)
    monkeypatch.setattr(model.parallel, "destroy", lambda: None)
    out = tmp_path / "train.json"
    monkeypatch.setattr(sys, "argv", ["bench_train.py", "--out", str(out), "--threads", "2", "--steps", "2",
                                      "--warmup", "1", "--mode-cost", "0", "--fused-cost", "0"])
    bt.main()
    res = json.loads(out.read_text())
    assert res["megatron"]["mfu"] is None and res["hf"]["mfu"] is None
    assert "below one thread's 90" in res["matmul_peak_gflops"]["mfu_refused"]
    assert any(n.startswith("MFU not reported") for n in res["notes"])
    assert bt.implausible_peak(100.0, 90.0, 2) is None and bt.implausible_peak(60.0, 90.0, 1) is None
