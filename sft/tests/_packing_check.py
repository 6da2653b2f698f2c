"""Per-document losses of a packed sequence vs the same documents alone, on a Megatron model (prints JSON)."""
import json
import sys

import torch

from model import hf_mapping, parallel
from model.build import build_model
from model.config import ModelConfig, ParallelConfig
from sft.packing import attention_mask, pack

cfg = ModelConfig(vocab_size=256, hidden_size=64, num_layers=2, num_attention_heads=4, num_query_groups=2, head_dim=16,
                  num_experts=4 if sys.argv[1] == "moe" else 0, moe_ffn_hidden_size=32, ffn_hidden_size=96,
                  init_std=0.2, max_position_embeddings=128)
par = ParallelConfig(micro_batch_size=1, global_batch_size=1)
parallel.init(par, cfg, seed=0)
model = build_model(cfg, par).eval()
hf_mapping.load_hf_into(model, hf_mapping.init_hf_state(cfg, 5), cfg)
g = torch.Generator().manual_seed(0)
docs = []
for n in (17, 30, 9):
    ids = torch.randint(0, 256, (n + 1,), generator=g).tolist()
    mask = torch.randint(0, 2, (n + 1,), generator=g).tolist()
    docs.append({"input_ids": ids[:-1], "labels": ids[1:], "loss_mask": mask[1:]})
packs, _ = pack(docs, 64, pad_id=0)
assert len(packs) == 1
p = packs[0]
with torch.no_grad():
    toks = torch.tensor([p["input_ids"]])
    loss = model(toks, torch.arange(64).unsqueeze(0), attention_mask(torch.tensor(p["doc_ids"])),
                 labels=torch.tensor([p["labels"]]))[0]
    packed, start = [], 0
    for d in docs:
        n = len(d["input_ids"])
        m = torch.tensor(d["loss_mask"], dtype=torch.float32)
        packed.append(float((loss[start:start + n] * m).sum()))
        start += n
    alone = []
    for d in docs:
        n = len(d["input_ids"])
        ld = model(torch.tensor([d["input_ids"]]), torch.arange(n).unsqueeze(0), None,
                   labels=torch.tensor([d["labels"]]))[0]
        alone.append(float((ld * torch.tensor(d["loss_mask"], dtype=torch.float32)).sum()))
print(json.dumps({"packed": packed, "alone": alone}))
parallel.destroy()
