"""The experts a vLLM engine routed each token to, recorded per request, and forced router flips for experiments.

vLLM 0.32 returns routed experts only from its V2 model runner, which needs Triton (not on the CPU). Its routers
have a capture hook anyway (BaseRouter.capture_fn: the logical top-k ids of every forward), so this module sets
that hook on every MoE layer and wraps the model runner's forward: each forward's rows are split by request in
the runner's batch order, and each request's rows land at their positions. A finished generation then gets
`routing[i, layer] = the k experts of sequence position i`, for every position the engine computed (the prompt
and each generated token but the last, which is never fed back). Prefix caching is off while recording: a cached
prefix is never computed, so its routing would be missing.

`flip_frac` > 0 forces router disagreements (the RL mismatch lab): on that share of tokens per layer the
lowest-scoring chosen expert is swapped for the best one not chosen, and the weights are recomputed the router's
way. Which tokens flip is a function of the router logits' bits (a hash), never of the clock or a random draw, so a
flipped engine stays deterministic; a token's bits can still differ between batch rows, so two samples with the same
tokens may flip differently (why completions take their own request's routing). The recorded routing is the
flipped one: what the engine really computed.
"""
from __future__ import annotations

import re

import numpy as np
import torch

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_HASH_MOD = 1_000_003


def flip_mask(router_logits: torch.Tensor, frac: float) -> torch.Tensor:
    """[tokens] bool: the tokens whose routing a flipped engine changes, from a hash of their logits' bits."""
    bits = router_logits.detach().float().contiguous().view(torch.int32).to(torch.int64)
    weights = torch.arange(1, bits.shape[-1] + 1, dtype=torch.int64) * 2_654_435_761
    h = (bits * weights).sum(-1).remainder(_HASH_MOD)
    return h < int(frac * _HASH_MOD)


def flipped(router_logits: torch.Tensor, topk_ids: torch.Tensor, flip: torch.Tensor, renormalize: bool
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights, ids) with the lowest-scoring chosen expert of each `flip` token replaced by the best unchosen one."""
    logits = router_logits.float()
    ids = topk_ids.long().clone()
    chosen = logits.gather(1, ids)
    worst = chosen.argmin(-1)
    masked = logits.scatter(1, ids, float("-inf"))
    best_other = masked.argmax(-1)
    rows = flip.nonzero().flatten()
    ids[rows, worst[rows]] = best_other[rows]
    sel = logits.gather(1, ids)
    w = torch.softmax(sel, -1) if renormalize else (sel - torch.logsumexp(logits, -1, keepdim=True)).exp()
    return w.to(torch.float32), ids.to(topk_ids.dtype)


class Recorder:
    """Installed in the engine's worker (install); collects routing per request until taken."""

    def __init__(self, runner, max_model_len: int, flip_frac: float = 0.0, record: bool = True):
        from vllm.model_executor.layers.fused_moe.router.base_router import BaseRouter

        self.runner, self.max_len, self.flip_frac = runner, max_model_len, flip_frac
        routers = {}
        for name, mod in runner.model.named_modules():
            for v in vars(mod).values():
                if isinstance(v, BaseRouter):
                    m = _LAYER.search(name)
                    if m is None:
                        raise RuntimeError(f"routing capture: no layer number in the MoE module name {name!r}")
                    routers[int(m.group(1))] = v
        if not routers:
            raise ValueError("routing capture needs a mixture-of-experts model: this engine's model has no router")
        self.layers = sorted(routers)
        if self.layers != list(range(len(self.layers))):  # the trainer indexes routing by layer number
            raise ValueError(f"routing capture needs every layer to be MoE: the MoE layers are {self.layers}")
        self.k = next(iter(routers.values())).top_k
        self._rows: dict[int, torch.Tensor] = {}
        self._sched = None
        self.seqs: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # request id -> (tokens, routing [pos, L, k])
        for j, layer in enumerate(self.layers):
            r = routers[layer]
            if record:
                r.set_capture_fn(lambda ids, j=j: self._rows.__setitem__(j, ids.detach().to(torch.int16).cpu()))
            if flip_frac:
                self._flip(r)
        if not record:  # flips only: nothing to collect per forward
            return
        run_exec, run_fwd = runner.execute_model, runner._model_forward

        def execute_model(scheduler_output, *a, **kw):
            self._sched = scheduler_output
            return run_exec(scheduler_output, *a, **kw)

        def model_forward(input_ids=None, positions=None, **kw):
            self._rows.clear()
            out = run_fwd(input_ids=input_ids, positions=positions, **kw)
            self._store(input_ids, positions)
            return out

        runner.execute_model, runner._model_forward = execute_model, model_forward

    def _flip(self, router) -> None:
        compute, frac = router._compute_routing, self.flip_frac

        def compute_routing(hidden_states, router_logits, indices_type, **kw):
            w, ids = compute(hidden_states, router_logits, indices_type, **kw)
            return flipped(router_logits, ids, flip_mask(router_logits, frac), router.renormalize)

        router._compute_routing = compute_routing

    def _store(self, input_ids, positions) -> None:
        if input_ids is None or positions is None or positions.dim() != 1:
            raise RuntimeError("routing capture needs token ids and 1-D positions (no embeddings input, no M-RoPE)")
        if len(self._rows) != len(self.layers):
            raise RuntimeError(f"routing capture: {len(self._rows)} of {len(self.layers)} MoE layers reported")
        batch = self.runner.input_batch
        rids = batch.req_ids[:batch.num_reqs]
        counts = [self._sched.num_scheduled_tokens[r] for r in rids]
        rows = torch.stack([self._rows[j] for j in range(len(self.layers))], 1).numpy()  # [tokens, L, k]
        ids, pos = input_ids.cpu().numpy(), positions.cpu().numpy()
        if rows.shape[0] < sum(counts):
            raise RuntimeError(f"routing capture: {rows.shape[0]} routed rows for {sum(counts)} scheduled tokens")
        a = 0
        for rid, c in zip(rids, counts):
            if rid not in self.seqs:  # -1: not computed (yet)
                self.seqs[rid] = (np.full(self.max_len, -1, np.int64),
                                  np.full((self.max_len, len(self.layers), self.k), -1, np.int16))
            toks, rout = self.seqs[rid]
            p = pos[a:a + c]
            toks[p], rout[p] = ids[a:a + c], rows[a:a + c]
            a += c

    def take(self) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
        """Every request's (tokens, routing) recorded since the last take, cut at its first uncomputed position, by
        (the LLM request id, completion index): vLLM 0.32 names an engine request `<id>-<suffix>`, or with n > 1
        `<index>_<id>-<suffix>`."""
        out = {}
        for rid, (toks, rout) in self.seqs.items():
            n = int(np.argmax(toks < 0)) if (toks < 0).any() else len(toks)
            base = rid.rsplit("-", 1)[0]
            idx, _, parent = base.partition("_")
            key = (parent, int(idx)) if parent and idx.isdigit() else (base, 0)
            out[key] = (toks[:n], rout[:n])
        self.seqs.clear()
        return out


def install(llm, max_model_len: int, flip_frac: float = 0.0, record: bool = True) -> Recorder:
    """A Recorder in the worker of an in-process vLLM engine (VLLM_ENABLE_V1_MULTIPROCESSING=0, one worker); with
    `record` off it only flips."""
    got = llm.collective_rpc(lambda worker: Recorder(worker.model_runner, max_model_len, flip_frac, record))
    if len(got) != 1 or not isinstance(got[0], Recorder):
        raise RuntimeError("routing capture needs the engine's single worker in this process "
                           "(VLLM_ENABLE_V1_MULTIPROCESSING=0, tensor_parallel_size 1)")
    return got[0]


def routing_of(recorded: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]], key: tuple[str, int],
               sequence: list[int]) -> np.ndarray | None:
    """The routing [len(sequence) - 1, L, k] of a finished generation (prompt + output ids): its own request's
    (`key`: request id, completion index), which computed every position but the last. When the ids do not match
    (another vLLM's naming), the request whose tokens are the sequence's. Not by tokens first: two samples with the
    same tokens can be routed differently (a batch row's numerics can flip a near-tie), measured with forced flips.
    None when no request computed the sequence."""
    want = np.asarray(sequence[:-1], np.int64)

    def covers(tr) -> bool:
        return len(tr[0]) >= len(want) and np.array_equal(tr[0][:len(want)], want)
    own = recorded.get(key)
    if own is not None and covers(own):
        return own[1][:len(want)].copy()
    for tr in sorted(recorded.values(), key=lambda tr: len(tr[0]) != len(want)):  # exact length first
        if covers(tr):
            return tr[1][:len(want)].copy()
    return None
