"""Build a Megatron-Core GPTModel (this rank's shard) from a ModelConfig.

The TransformerEngine spec is used when TE imports (GPU clusters); otherwise the local spec with
torch RMSNorm and SDPA attention (model/layers.py). Call model.parallel.init() first.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from model import cpu_compat
from model.config import ModelConfig, ParallelConfig


def have_te() -> bool:
    try:
        import transformer_engine  # noqa: F401
        return torch.cuda.is_available()
    except Exception:
        return False


def transformer_config(cfg: ModelConfig, par: ParallelConfig, dtype: torch.dtype = torch.float32,
                       fuse_elementwise: bool = False, cpu_attention: str = "flash"):
    from megatron.core.transformer.transformer_config import TransformerConfig

    on_cpu = cpu_compat.active() or not torch.cuda.is_available()
    moe = dict(
        num_moe_experts=cfg.num_experts, moe_router_topk=cfg.moe_router_topk,
        moe_ffn_hidden_size=cfg.moe_ffn_hidden_size, moe_aux_loss_coeff=cfg.moe_aux_loss_coeff,
        moe_router_load_balancing_type="aux_loss", moe_token_dispatcher_type="alltoall",
        moe_grouped_gemm=False, moe_router_dtype="fp32", moe_permute_fusion=False,
    ) if cfg.is_moe else {}
    tc = TransformerConfig(
        num_layers=cfg.num_layers, hidden_size=cfg.hidden_size, num_attention_heads=cfg.num_attention_heads,
        num_query_groups=cfg.num_query_groups, kv_channels=cfg.head_dim, ffn_hidden_size=cfg.ffn_hidden_size,
        normalization="RMSNorm", layernorm_epsilon=cfg.norm_eps, qk_layernorm=cfg.qk_layernorm,
        gated_linear_unit=True, activation_func=F.silu, add_bias_linear=False, add_qkv_bias=False,
        hidden_dropout=0.0, attention_dropout=0.0, init_method_std=cfg.init_std,
        tensor_model_parallel_size=par.tp, pipeline_model_parallel_size=par.pp,
        expert_model_parallel_size=par.ep, expert_tensor_parallel_size=par.expert_tp,
        context_parallel_size=par.cp, sequence_parallel=par.sp,
        params_dtype=dtype, bf16=dtype == torch.bfloat16, pipeline_dtype=dtype,
        use_cpu_initialization=on_cpu, perform_initialization=True,
        bias_activation_fusion=fuse_elementwise,  # Megatron's own compiled SwiGLU for dense MLPs
        masked_softmax_fusion=False, apply_rope_fusion=False,
        gradient_accumulation_fusion=False, persist_layer_norm=False, cross_entropy_loss_fusion=False,
        deterministic_mode=False, **moe, **recompute(par),
    )
    rs = cfg.rope_scaling
    if rs.type == "yarn":  # read by GPTModel through getattr on the config
        tc.yarn_rotary_scaling_factor = rs.factor
        tc.yarn_original_max_position_embeddings = rs.original_max_position_embeddings
        tc.yarn_beta_fast, tc.yarn_beta_slow, tc.yarn_mscale, tc.yarn_mscale_all_dim = 32.0, 1.0, 1.0, 0.0
        tc.yarn_correction_range_round_to_int = True
    asked = [pair for want, pair in ((fuse_elementwise, ("train.fuse_elementwise=true", "train.fuse_elementwise=false")),
                                     (cpu_attention == "gemm", ("train.cpu_attention=gemm", "train.cpu_attention=flash")))
             if want]
    if asked:  # both compile (Inductor needs a C++ compiler on the CPU): one check, naming what asked for it
        from model import fused

        fused.check(" and ".join(on for on, _ in asked), " and ".join(off for _, off in asked))
    if fuse_elementwise:  # read by model/layers.py's norms and experts through getattr on the config
        tc.fuse_elementwise = True
    if cpu_attention == "gemm":  # read by model/layers.SDPAttention through getattr on the config
        tc.cpu_attention = "gemm"
    return tc


def recompute(par: ParallelConfig) -> dict:
    """Activation recomputation: selective recomputes attention's core; full keeps only each layer's input."""
    if par.recompute == "full":
        return dict(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    if par.recompute == "selective":
        return dict(recompute_granularity="selective", recompute_modules=["core_attn"])
    return {}


def layer_spec(cfg: ModelConfig):
    if have_te():
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec

        return get_gpt_layer_with_transformer_engine_spec(
            num_experts=cfg.num_experts or None, moe_grouped_gemm=True, qk_layernorm=cfg.qk_layernorm)
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    from model.layers import GroupedSequentialMLP, QKRMSNorm, RMSNorm, SDPAttention

    spec = copy.deepcopy(get_gpt_layer_local_spec(num_experts=cfg.num_experts or None, moe_grouped_gemm=False,
                                                  qk_layernorm=cfg.qk_layernorm, normalization="RMSNorm"))
    sub = spec.submodules
    sub.input_layernorm = RMSNorm
    sub.pre_mlp_layernorm = RMSNorm
    attn = sub.self_attention.submodules
    attn.core_attention = SDPAttention
    if cfg.qk_layernorm:
        attn.q_layernorm = QKRMSNorm
        attn.k_layernorm = QKRMSNorm
    if cfg.is_moe:
        sub.mlp.submodules.experts.module = GroupedSequentialMLP
    return spec


def block_spec(cfg: ModelConfig, tc):
    """The block spec: this stage's layers + a final norm that works under sequence parallel."""
    if have_te():
        return layer_spec(cfg)
    from megatron.core.transformer.transformer_block import TransformerBlockSubmodules, get_num_layers_to_build

    from model.layers import RMSNorm

    return TransformerBlockSubmodules(layer_specs=[layer_spec(cfg)] * get_num_layers_to_build(tc), layer_norm=RMSNorm)


def build_model(cfg: ModelConfig, par: ParallelConfig, dtype: torch.dtype = torch.float32,
                fuse_elementwise: bool = False, cpu_attention: str = "flash"):
    """This rank's GPTModel (pre/post process set from its pipeline stage); `fuse_elementwise`: model/fused.py;
    `cpu_attention`: flash | gemm (model/attention.py)."""
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel

    tc = transformer_config(cfg, par, dtype, fuse_elementwise, cpu_attention)
    rs = cfg.rope_scaling
    kwargs = dict(position_embedding_type="yarn" if rs.type == "yarn" else "rope", rotary_base=int(cfg.rope_theta))
    if rs.type == "linear":
        kwargs["seq_len_interpolation_factor"] = rs.factor
    elif rs.type == "llama3":
        kwargs.update(rope_scaling=True, rope_scaling_factor=rs.factor)
    model = GPTModel(
        config=tc, transformer_layer_spec=block_spec(cfg, tc), vocab_size=cfg.vocab_size,
        max_sequence_length=cfg.max_position_embeddings,
        pre_process=parallel_state.is_pipeline_first_stage(), post_process=parallel_state.is_pipeline_last_stage(),
        share_embeddings_and_output_weights=cfg.tie_word_embeddings, parallel_output=True, **kwargs)
    if fuse_elementwise and par.tp == 1 and not have_te():  # TP shards the vocabulary: Megatron's loss reduces it
        from model import fused

        model.compute_language_model_loss = fused.language_model_loss
    if torch.cuda.is_available() and not cpu_compat.active():
        model.cuda()
    return model

