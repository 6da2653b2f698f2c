"""model.vllm_engine.SharedTensors: named tensors as views of one shared buffer per dtype (the in-memory sync)."""
import multiprocessing as mp

import torch

from model.vllm_engine import SharedTensors


def _tensors(scale: float = 1.0) -> dict:
    g = torch.Generator().manual_seed(0)
    return {"a.weight": torch.randn(3, 4, generator=g) * scale,
            "q.int8": torch.randint(-128, 127, (5,), dtype=torch.int8, generator=g),
            "b.bias": torch.randn(7, generator=g) * scale, "s.scale": torch.rand(2, 1, generator=g) * scale}


def test_items_give_back_every_tensor_with_its_name_shape_and_dtype():
    t = _tensors()
    got = dict(SharedTensors(t).fill(t).items())
    assert list(got) == list(t)
    for k in t:
        assert got[k].dtype == t[k].dtype and torch.equal(got[k], t[k])


def test_one_buffer_per_dtype_holds_all_bytes():
    t = _tensors()
    s = SharedTensors(t)
    assert sorted(s.buffers) == ["float32", "int8"]
    assert s.nbytes == sum(x.numel() * x.element_size() for x in t.values())
    assert all(b.is_shared() for b in s.buffers.values())


def test_fits_rejects_a_changed_shape_or_dtype():
    t = _tensors()
    s = SharedTensors(t)
    assert s.fits(_tensors(2.0))
    assert not s.fits({**t, "b.bias": torch.zeros(8)})
    assert not s.fits({**t, "b.bias": torch.zeros(7, dtype=torch.bfloat16)})


def _read(conn):
    conn.send({k: v.tolist() for k, v in conn.recv().items()})  # plain lists: nothing shared outlives the child


def test_a_spawned_process_reads_the_values_of_the_latest_fill():
    s = SharedTensors(_tensors()).fill(_tensors())
    s.fill(_tensors(3.0))  # refilled in place before sending: the receiver must see these values
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_read, args=(b,))
    p.start()
    a.send(s)
    got = a.recv()
    p.join(60)
    assert got == {k: v.tolist() for k, v in _tensors(3.0).items()}
