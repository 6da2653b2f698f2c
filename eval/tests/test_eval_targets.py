"""OpenAI-compatible endpoint target against a local fake server: retries, timeouts, garbage, per-task errors."""
from __future__ import annotations

import json
import sys

import pytest

from domains import chat
from eval import ruler
from eval.targets import EndpointTarget
from eval.tests.conftest import run

CONV = [{"role": "user", "content": "hi"}]


def test_answers_come_back_in_order_with_n_samples(fake_openai):
    s = fake_openai(answers={chat.render([{"role": "user", "content": f"q{i}"}], add_generation_prompt=True): f"a{i}"
                             for i in range(5)})
    t = EndpointTarget(s.url, concurrency=3)
    gens = t.generate([[{"role": "user", "content": f"q{i}"}] for i in range(5)], n=2)
    assert [g.texts for g in gens] == [[f"a{i}"] * 2 for i in range(5)] and all(g.error is None for g in gens)
    assert t.model == "fake-model" and s.calls[0]["model"] == "fake-model" and s.calls[0]["stop"] == [chat.IM_END, chat.EOS]


def test_timeout_is_a_recorded_error_after_retries(fake_openai):
    s = fake_openai(mode="slow", sleep_s=4.0)
    gens = EndpointTarget(s.url, timeout_s=1.0, retries=1, backoff_s=0.01).generate([CONV, CONV])
    assert all(g.texts == [] and g.error.startswith("timeout") and "2 attempts" in g.error for g in gens), gens
    assert len(s.calls) <= 4  # two prompts x two attempts (fewer arrive if a connect itself times out)


@pytest.mark.parametrize("mode,why", [("garbage", "not JSON"), ("no_choices", "expected 1 choices")])
def test_garbage_is_a_recorded_error(fake_openai, mode, why):
    s = fake_openai(mode=mode)
    (g,) = EndpointTarget(s.url, retries=1, backoff_s=0.01).generate([CONV])
    assert g.texts == [] and g.error.startswith("bad response") and why in g.error


def test_server_error_is_retried(fake_openai):
    prompt = chat.render(CONV, add_generation_prompt=True)
    s = fake_openai(mode="flaky", answers={prompt: "ok"})
    (g,) = EndpointTarget(s.url, retries=2, backoff_s=0.01).generate([CONV])
    assert g.texts == ["ok"] and len(s.calls) == 2


def test_unreachable_endpoint_is_a_recorded_error():
    (g,) = EndpointTarget("http://127.0.0.1:9/v1", retries=0, timeout_s=2).generate([CONV])
    assert g.error.startswith("connection")


def test_chat_api_sends_messages_with_tool_calls_as_text(fake_openai):
    s = fake_openai()
    conv = [{"role": "user", "content": "add"},
            {"role": "assistant", "content": "", "tool_calls": [{"name": "calc", "arguments": {"e": "1+1"}}]},
            {"role": "tool", "name": "calc", "content": "2"}]
    EndpointTarget(s.url, api="chat").generate([conv])
    msgs = s.calls[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"] == '<tool_call>{"name": "calc", "arguments": {"e": "1+1"}}</tool_call>'
    assert msgs[2]["content"] == "<tool_response>2</tool_response>"


def _longctx(tmp_path, url, tok_dir):
    out = tmp_path / "lc.json"
    r = run([sys.executable, "-m", "eval.01_eval", "--suites", "longctx", "--endpoint", url, "--tokenizer",
             str(tok_dir), "--out", str(out), "--recipe", "micro_cpu", "--timeout-s", "0.5", "--retries", "0",
             "--set", "longctx.lengths=[512,1024]"])
    return r, out


def test_longctx_through_an_oracle_endpoint_scores_100(tmp_path, fake_openai, tok, tok_dir):
    from eval import longctx
    from model.recipe import load_recipe

    cfg = load_recipe("eval", "micro_cpu", ["longctx.lengths=[512,1024]"])["longctx"]
    answers = {}
    for task, n, d, seed in longctx.plan(cfg):
        t = ruler.build(task, n, d, seed, tok)
        answers[t.prompt()] = "Sure.\n" + t.oracle()
    s = fake_openai(answers=answers)
    r, out = _longctx(tmp_path, s.url, tok_dir)
    assert r.returncode == 0, r.stderr[-2000:]
    lc = json.loads(out.read_text())["suites"]["longctx"]
    assert lc["summary"]["errors"] == 0 and lc["summary"]["effective_length"] == 1024
    assert all(v["score"] == 100.0 for v in lc["summary"]["per_length"].values())


@pytest.mark.parametrize("mode", ["slow", "garbage"])
def test_longctx_through_a_broken_endpoint_records_one_error_per_task(tmp_path, fake_openai, tok_dir, mode):
    s = fake_openai(mode=mode, sleep_s=1.5)
    r, out = _longctx(tmp_path, s.url, tok_dir)
    assert r.returncode == 0, r.stderr[-2000:]
    lc = json.loads(out.read_text())["suites"]["longctx"]
    rows = lc["rows"]
    assert rows and all(x["error"] and x["score"] is None for x in rows)
    assert lc["summary"]["errors"] == len(rows)
    assert all(v["score"] is None for v in lc["summary"]["per_length"].values())  # no silent zero


def test_endpoint_without_tokenizer_is_refused(tmp_path):
    r = run([sys.executable, "-m", "eval.01_eval", "--suites", "longctx", "--endpoint", "http://127.0.0.1:9/v1",
             "--out", str(tmp_path / "x.json"), "--recipe", "micro_cpu"])
    assert r.returncode == 2 and "--tokenizer" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("serving", [None, {"model": "hf", "dtype": "bfloat16"}])
def test_a_checkpoint_is_evaluated_in_the_dtype_it_is_served_in(tmp_path, monkeypatch, serving):
    # a fast variant's int8 GEMMs take only bf16 activations on AMX CPUs: evaluated in float32, every request failed
    import model.vllm_engine
    from eval.targets import VLLMTarget

    seen = {}
    monkeypatch.setattr(model.vllm_engine, "Engine", lambda hf, dtype, **kw: seen.update(hf=hf, dtype=dtype))
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    if serving:
        (tmp_path / "serving.json").write_text(json.dumps(serving))
    t = VLLMTarget(tmp_path, dtype="float32")
    assert seen == {"hf": tmp_path / "hf", "dtype": "bfloat16" if serving else "float32"} and t.dtype == seen["dtype"]
