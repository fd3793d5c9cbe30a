#!/usr/bin/env python3
"""A Llama in gtc and in PyTorch, from one safetensors file, step by step.

examples/llama.gt at a small size against a Llama written out below (Hugging
Face LlamaForCausalLM's architecture and parameter names: RMSNorm, rotary
position embedding with rotate-half pairs, grouped-query attention, SwiGLU,
an untied head), or with --hf against transformers' LlamaForCausalLM itself
(eager attention) where transformers is installed. Both start from the same
weights, train 50 AdamW steps on the same batches and must agree on every
loss; gtc's saved weights then load into the PyTorch model (parity_common.py).

  --size small   V=256 T=32 D=64 H=4 KV=2 FF=128 L=2 (the CPU test in CI)
  --size full    llama124m as examples/llama.gt has it (the GPU test)
  --precision    fp32 (tolerance 1e-4 relative) or bf16 (--tol; PyTorch under
                 torch.autocast(bfloat16), gtc with gt-autocast)

Prints one line per checked quantity and "parity: PASS" or exits non-zero.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from parity_common import arguments, example_source, parity

SIZES = {
    "small": dict(V=256, T=32, D=64, H=4, KV=2, FF=128, L=2, B=4, lr=1e-3),
    "full": dict(V=32000, T=1024, D=768, H=12, KV=4, FF=2048, L=12, B=8,
                 lr=1e-4),
}
EPS, THETA = 1e-5, 10000.0


# ---------------------------------------------------------------- the model
class RMSNorm(nn.Module):
    """LlamaRMSNorm: the statistics in f32, the weight after the cast back."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
        return self.weight * xf.to(x.dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rope_tables(t, d, device):
    """Hugging Face's angles: f32 inverse frequencies, positions, cos, sin."""
    inv = 1.0 / (THETA ** (torch.arange(0, d, 2, dtype=torch.int64)
                           .float().to(device) / d))
    freqs = torch.outer(torch.arange(t, device=device).float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        D, self.h, self.kv = c["D"], c["H"], c["KV"]
        self.hd = D // self.h
        self.q_proj = nn.Linear(D, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(D, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(D, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(D, D, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        cos, sin = rope_tables(T, self.hd, x.device)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # repeat_kv: K/V head j serves query heads j*G ... j*G+G-1.
        k = k.repeat_interleave(self.h // self.kv, dim=1)
        v = v.repeat_interleave(self.h // self.kv, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).float().softmax(dim=-1)
        y = att.to(q.dtype) @ v
        return self.o_proj(y.transpose(1, 2).reshape(B, T, D))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["D"], c["FF"], bias=False)
        self.up_proj = nn.Linear(c["D"], c["FF"], bias=False)
        self.down_proj = nn.Linear(c["FF"], c["D"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["D"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["D"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["V"], c["D"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["L"]))
        self.norm = RMSNorm(c["D"])


class Llama(nn.Module):
    """LlamaForCausalLM's modules and names (model.layers.N.self_attn...)."""

    def __init__(self, c):
        super().__init__()
        self.model = Body(c)
        self.lm_head = nn.Linear(c["D"], c["V"], bias=False)

    def forward(self, idx, targets):
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x)
        logits = self.lm_head(self.model.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                               targets.reshape(-1))


class HfLlama(nn.Module):
    """transformers' LlamaForCausalLM of the same sizes, with the loss on
    given targets (its own loss shifts the labels)."""

    def __init__(self, c):
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(
            vocab_size=c["V"], hidden_size=c["D"], intermediate_size=c["FF"],
            num_hidden_layers=c["L"], num_attention_heads=c["H"],
            num_key_value_heads=c["KV"], max_position_embeddings=c["T"],
            rms_norm_eps=EPS, rope_theta=THETA, tie_word_embeddings=False,
            attention_bias=False, mlp_bias=False)
        config._attn_implementation = "eager"
        self.hf = LlamaForCausalLM(config)

    def state_dict(self, *a, **k):
        return self.hf.state_dict(*a, **k)

    def load_state_dict(self, state, strict=True):
        return self.hf.load_state_dict(state, strict=strict)

    def forward(self, idx, targets):
        logits = self.hf(input_ids=idx).logits
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                               targets.reshape(-1))


def initialize(model):
    """0.02-normal weights, and RMSNorm weights near 1 that are not 1, so
    that every parameter's gradient path is exercised."""
    g = torch.Generator().manual_seed(1234)
    for name, p in sorted(model.named_parameters()):
        with torch.no_grad():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))


def main():
    args, c, lr, tol = arguments(__doc__, SIZES, lambda ap: ap.add_argument(
        "--hf", action="store_true",
        help="against transformers.LlamaForCausalLM"))

    def make_model():
        torch.manual_seed(0)
        model = HfLlama(c) if args.hf else Llama(c)
        initialize(model.hf if args.hf else model)
        return model

    parity(args, c, lr, tol, make_model,
           lambda data, precision: example_source(
               "llama.gt", ["V", "T", "D", "H", "KV", "FF", "L"], c,
               precision, data, lr))


if __name__ == "__main__":
    main()
