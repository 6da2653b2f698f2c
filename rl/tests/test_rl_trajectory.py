"""Multi-turn rollouts: the trained sequence holds exactly the sampled ids, and the engine saw the same ids."""
from __future__ import annotations

import domains
from domains import chat
from model.vllm_engine import Completion
from rl.trajectory import Renderer, rollout


class ScriptedEngine:
    """Plays the oracle's assistant messages, tokenized one character per token where possible
    (a non-canonical split that re-tokenizing the text would not reproduce)."""

    def __init__(self, tok, script):
        self.tok, self.script, self.prompts = tok, script, []

    def generate(self, prompts, n, temperature, top_p, max_tokens, seeds):
        out = []
        for p in prompts:
            self.prompts.append(p)
            k = sum(1 for ps in self.prompts if ps[:40] == p[:40]) - 1
            body = chat.render_message(self.script[k])[len(chat.ASSISTANT_PREFIX):-1]  # body + <|im_end|>
            text, end = body[:-len(chat.IM_END)], self.tok.convert_tokens_to_ids(chat.IM_END)
            ids = []
            for j, piece in enumerate(text.split(chat.TOOL_CALL_START)):
                if j:
                    ids.append(self.tok.convert_tokens_to_ids(chat.TOOL_CALL_START))
                for ch in piece.replace(chat.TOOL_CALL_END, "\0"):
                    ids += [self.tok.convert_tokens_to_ids(chat.TOOL_CALL_END)] if ch == "\0" else \
                        self.tok(ch, add_special_tokens=False)["input_ids"]
            ids.append(end)
            out.append([Completion("", ids, [-0.5] * len(ids), "stop")])
        return out


def test_multi_turn_tokens_are_the_sampled_ones(tok_dir):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tok_dir / "tok"))
    d = domains.get("agent.kv_sum")
    task = d.generate(3, 0)
    script = [m for m in d.solve(task) if m["role"] == "assistant"]
    assert len(script) >= 2 and script[0].get("tool_calls")
    eng = ScriptedEngine(tok, script)
    [r] = rollout(eng, Renderer(tok), [(d, task)], n=1, temperature=1.0, top_p=1.0, max_tokens=64, seed=0)
    assert d.verify(task, r.messages).passed  # the tool loop ran: observations came from the environment
    sampled = [t for s in r.turns for t in s.token_ids]
    assert [t for t, m in zip(r.tokens, r.action_mask) if m] == sampled
    assert len(sampled) > len(tok(chat.render_message(script[0]))["input_ids"])  # really non-canonical ids
    assert r.rollout_logprobs.count(-0.5) == len(sampled)
    for p in eng.prompts:  # each turn's prompt is a prefix of the trained sequence
        assert r.tokens[:len(p)] == p
    obs = [m for m in r.messages if m["role"] == "tool"]
    assert obs and all(tok.decode(tok(o["content"], add_special_tokens=False)["input_ids"]) in tok.decode(r.tokens)
                       for o in obs)


def test_group_copies_are_independent(tok_dir):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tok_dir / "tok"))
    d = domains.get("math.gcd")
    task = d.generate(1, 0)

    class Echo:
        calls = 0

        def generate(self, prompts, n, temperature, top_p, max_tokens, seeds):
            Echo.calls += 1
            return [[Completion("", tok("Answer: " + str(i), add_special_tokens=False)["input_ids"]
                                + [tok.convert_tokens_to_ids(chat.IM_END)], [0.0] * 4, "stop")] for i in range(len(prompts))]

    rs = rollout(Echo(), Renderer(tok), [(d, task)], n=3, temperature=1.0, top_p=1.0, max_tokens=8, seed=0)
    assert [r.messages[-1]["content"] for r in rs] == ["Answer: 0", "Answer: 1", "Answer: 2"]
    assert Echo.calls == 1  # one batched engine call per turn


def test_trajectory_routing_takes_the_latest_turn_that_computed_each_position():
    import numpy as np

    from rl.trajectory import merge_routing

    tokens = [1, 2, 3, 4, 5, 6, 7, 8]  # turn 1: 1 2 3 | 4 5 sampled; turn 2 re-reads them, samples 7 8 after 6
    t1 = ([1, 2, 3, 4, 5], np.full((4, 2, 1), 1, np.int16))
    t2 = ([1, 2, 3, 4, 5, 6, 7, 8], np.full((7, 2, 1), 2, np.int16))
    assert merge_routing(tokens, [t1, t2])[:, 0, 0].tolist() == [2] * 7
    out = merge_routing(tokens + [9, 9], [t1])  # text after the last turn: not computed by the engine
    assert out[:, 0, 0].tolist() == [1] * 4 + [-1] * 5
    assert merge_routing([1, 2, 9, 4, 5], [t1])[:, 0, 0].tolist() == [1, 1, -1, -1]  # a diverging turn stops there
