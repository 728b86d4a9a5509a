
# ---- the runtime: the same for every model (cli/torch_runtime.py in ckplan) ----
#
# Each op of ckplan's op table as PyTorch runs it. Where ckplan models PyTorch's own eager
# op (linear, layernorm, gelu, dropout as native_dropout, cross_entropy), this calls it, and
# what autograd keeps is PyTorch's choice. Where ckplan models a fused kernel (flash-style
# attention, fused RMSNorm, swiglu, ...), a torch.autograd.Function saves exactly what
# that kernel keeps, as liger-kernel or llm.c would. docs/pytorch.md lists which is which.

import math

import torch
import torch.nn.functional as F


def _heads(qkv, heads, kv_heads):
    """q [B, H, T, D], k and v [B, KV, T, D]: views of the packed [B, T, (H + 2 KV) D]."""
    b, t, w = qkv.shape
    d = w // (heads + 2 * kv_heads)
    x = qkv.view(b, t, heads + 2 * kv_heads, d).permute(0, 2, 1, 3)
    return x[:, :heads], x[:, heads:heads + kv_heads], x[:, heads + kv_heads:]


def _blocks(heads, t, width, flash):
    """The (head, first row, end row) blocks attention works through: whole heads, or for
    flash C / 8 rows of a head at a time (C = H * D), so that its temporaries stay below an
    eighth of a [B, T, C] tensor, as a flash kernel's tiles do."""
    rows = max(1, width // 8) if flash else t
    return [(h, r, min(r + rows, t)) for h in range(heads) for r in range(0, t, rows)]


def _expand_kv(qkv, heads, kv_heads):
    """Hugging Face's repeat_kv on packed q, k, v: q, then k and v repeated to every query
    head, packed as qkv with kv_heads = heads."""
    b, t, w = qkv.shape
    d = w // (heads + 2 * kv_heads)
    x = qkv.view(b, t, heads + 2 * kv_heads, d)
    kv = x[:, :, heads:].view(b, t, 2, kv_heads, 1, d).expand(b, t, 2, kv_heads,
                                                               heads // kv_heads, d)
    return torch.cat([x[:, :, :heads], kv.reshape(b, t, 2 * heads, d)], dim=2).view(b, t, 3 * heads * d)


def _fold_kv(dexp, heads, shape, kv_heads):
    """The copies' gradient summed into the packed qkv's: each kv head gets its group's."""
    b, t, w = shape
    d = w // (heads + 2 * kv_heads)
    x = dexp.view(b, t, 3 * heads, d)
    kv = x[:, :, heads:].reshape(b, t, 2, kv_heads, heads // kv_heads, d).sum(4)
    return torch.cat([x[:, :, :heads], kv.reshape(b, t, 2 * kv_heads, d)], dim=2).view(shape)


class _Attention(torch.autograd.Function):
    """Causal attention on packed q, k, v with grouped-query heads (head h reads kv head
    h // (H / KV)), optional soft-capping and dropout, block by block (_blocks).

    flash: keeps qkv, the output and the f32 row log-sum-exp; dropout is redrawn from a
    generator seeded once per call from the global generator (so recomputation, which
    restores the global generator's state, redraws it). Otherwise keeps qkv, the capped
    scores' tanh (softcap), the probabilities, and with dropout the u8 mask and the
    dropped probabilities, as eager attention does, and the output unless told not to
    (keeps_out false: transformers' eager attention keeps none; rowsum(dO O) is then
    rowsum(P dP), per block). With expand_kv (not flash), it runs
    on q and k, v repeated to every query head, as Hugging Face's repeat_kv makes them, and
    keeps those copies instead of qkv, as eager attention's products do. With sdpa_mask
    (flash), it keeps a [B, 1, T, T] additive causal mask in qkv's dtype, as sdpa keeps the
    mask it is handed (a sliding window's), and applies the causal mask as before. With
    v_view (flash), it keeps copies of the rotated q and k besides qkv, as sdpa keeps
    transformers' Phi-3 tensors (v a view of the projection, q and k tensors of their own),
    and with out_heads a copy of its output, which the CPU's kernel lays out by head and
    o_proj's input copies."""

    @staticmethod
    def scores(q, k, h, g, r0, r1, scale, cap, causal):
        """Block (h, r0:r1)'s scores, capped and masked, and the capped tanh (or None)."""
        s = torch.matmul(q[:, h, r0:r1], k[:, g].transpose(1, 2)).mul_(scale)
        c = None
        if cap > 0:
            c = s.div_(cap).tanh_()
            s = c.clone().mul_(cap)
        return s.masked_fill_(causal[r0:r1], float("-inf")), c

    @staticmethod
    def forward(ctx, qkv, heads, kv_heads, p, flash, cap, expand, sdpa_mask, v_view, out_heads,
                keeps_out):
        ctx.packed = None
        if expand and kv_heads < heads and not flash:  # run on the copies, keep them
            ctx.packed = (qkv.shape, kv_heads)
            qkv, kv_heads = _expand_kv(qkv, heads, kv_heads), heads
        q, k, v = _heads(qkv, heads, kv_heads)
        b, _, t, d = q.shape
        scale, group = 1.0 / math.sqrt(d), heads // kv_heads
        causal = torch.ones(t, t, dtype=torch.bool).triu_(1)
        seed = int(torch.randint(1 << 62, (1,)).item()) if p > 0 else 0
        gen = torch.Generator().manual_seed(seed) if p > 0 else None
        out = torch.empty(b, t, heads * d, dtype=qkv.dtype)
        if flash:
            kept = {"lse": torch.empty(b, heads, t, dtype=torch.float32)}
            if sdpa_mask:
                kept["sdpa_mask"] = torch.zeros(b, 1, t, t, dtype=qkv.dtype).masked_fill_(
                    causal, float("-inf"))
        else:
            kept = {"capped": cap > 0, "probs": True, "mask": p > 0, "dropped": p > 0}
            kept = {name: torch.empty(b, heads, t, t, dtype=torch.uint8 if name == "mask"
                                      else qkv.dtype) for name, want in kept.items() if want}
        for h, r0, r1 in _blocks(heads, t, heads * d, flash):
            g = h // group
            s, c = _Attention.scores(q, k, h, g, r0, r1, scale, cap, causal)
            if flash:
                kept["lse"][:, h, r0:r1] = torch.logsumexp(s, dim=-1)
            elif c is not None:
                kept["capped"][:, h].copy_(c)
            del c
            z = torch.softmax(s, dim=-1)
            del s
            if not flash:
                kept["probs"][:, h].copy_(z)
            if p > 0:
                keep = torch.rand(b, r1 - r0, t, generator=gen) >= p
                z.mul_(keep).div_(1 - p)
                if not flash:
                    kept["mask"][:, h].copy_(keep)
                    kept["dropped"][:, h].copy_(z)
                del keep
            out[:, r0:r1, h * d:(h + 1) * d] = torch.matmul(z, v[:, g])
            del z
        if v_view:
            kept["qk_apart"] = qkv[:, :, :(heads + kv_heads) * d].clone()
        if out_heads:
            kept["out_heads"] = out.clone()
        ctx.names = list(kept)
        ctx.keeps_out = keeps_out or flash
        ctx.save_for_backward(qkv, out if ctx.keeps_out else None, *kept.values())
        ctx.conf = (heads, kv_heads, p, flash, cap, seed)
        return out

    @staticmethod
    def backward(ctx, dout):
        heads, kv_heads, p, flash, cap, seed = ctx.conf
        qkv, out = ctx.saved_tensors[:2]
        kept = dict(zip(ctx.names, ctx.saved_tensors[2:]))
        q, k, v = _heads(qkv, heads, kv_heads)
        b, _, t, d = q.shape
        scale, group = 1.0 / math.sqrt(d), heads // kv_heads
        causal = torch.ones(t, t, dtype=torch.bool).triu_(1)
        gen = torch.Generator().manual_seed(seed) if p > 0 else None
        dqkv = torch.zeros_like(qkv)
        dq, dk, dv = _heads(dqkv, heads, kv_heads)
        dout = dout.contiguous().view(b, t, heads, d).permute(0, 2, 1, 3)
        delta = None  # rowsum(dO O) = rowsum(P dP): from the output where it is kept
        if ctx.keeps_out:
            delta = (dout * out.view(b, t, heads, d).permute(0, 2, 1, 3)).sum(-1)  # [B, H, T]
        for h, r0, r1 in _blocks(heads, t, heads * d, flash):
            g = h // group
            if flash:
                s, c = _Attention.scores(q, k, h, g, r0, r1, scale, cap, causal)
                prob = s.sub_(kept["lse"][:, h, r0:r1].unsqueeze(-1)).exp_()
                del s
                keep = (torch.rand(b, r1 - r0, t, generator=gen) >= p) if p > 0 else None
                z = prob * keep / (1 - p) if p > 0 else prob
            else:
                c = kept["capped"][:, h] if cap > 0 else None
                prob = kept["probs"][:, h]
                keep = kept["mask"][:, h] if p > 0 else None
                z = kept["dropped"][:, h] if p > 0 else prob
            dv[:, g] += torch.matmul(z.transpose(1, 2), dout[:, h, r0:r1])
            del z
            ds = torch.matmul(dout[:, h, r0:r1], v[:, g].transpose(1, 2))  # dZ, then dS
            if p > 0:
                ds.mul_(keep).div_(1 - p)
            rows = (ds * prob).sum(-1, keepdim=True) if delta is None else delta[:, h, r0:r1].unsqueeze(-1)
            ds.sub_(rows).mul_(prob)
            del prob, keep
            if cap > 0:
                ds.mul_(1 - c * c)
            ds.mul_(scale)
            dq[:, h, r0:r1] += torch.matmul(ds, k[:, g])
            dk[:, g] += torch.matmul(ds.transpose(1, 2), q[:, h, r0:r1])
            del ds, c
        if ctx.packed:
            dqkv = _fold_kv(dqkv, heads, *ctx.packed)
        return dqkv, None, None, None, None, None, None, None, None, None, None


class _RMSNorm(torch.autograd.Function):
    """Fused RMSNorm: out = x rstd w, rstd = 1 / sqrt(mean(x^2) + eps); keeps x and the f32
    rstd of each row."""

    @staticmethod
    def forward(ctx, x, w, eps):
        rstd = torch.rsqrt(x.float().pow(2).mean(-1) + eps)
        ctx.save_for_backward(x, rstd, w)
        return x * rstd.unsqueeze(-1).to(x.dtype) * w

    @staticmethod
    def backward(ctx, dout):
        x, rstd, w = ctx.saved_tensors
        r = rstd.unsqueeze(-1)
        xhat = x * r
        g = dout * w
        dx = r * (g - xhat * (g * xhat).mean(-1, keepdim=True))
        dw = (dout * xhat).reshape(-1, x.shape[-1]).sum(0)
        return dx, dw, None


def _rmsnorm_written_out(x, w, eps):
    """RMSNorm as Hugging Face's LlamaRMSNorm writes it, which autograd records op by op."""
    xf = x.to(torch.float32)
    variance = xf.pow(2).mean(-1, keepdim=True)
    xf = xf * torch.rsqrt(variance + eps)
    return w * xf.to(x.dtype)


class _QKNorm(torch.autograd.Function):
    """RMSNorm of each q and k head of packed qkv (q_gamma, k_gamma), v passed through;
    keeps qkv and the f32 rstd of each normalised head."""

    @staticmethod
    def forward(ctx, qkv, qg, kg, heads, kv_heads, eps):
        b, t, w = qkv.shape
        d = w // (heads + 2 * kv_heads)
        x = qkv.view(b, t, heads + 2 * kv_heads, d)
        normed = heads + kv_heads
        rstd = torch.rsqrt(x[:, :, :normed].float().pow(2).mean(-1) + eps)
        gamma = torch.cat([qg.expand(heads, d), kg.expand(kv_heads, d)])
        out = torch.empty_like(x)
        out[:, :, :normed] = x[:, :, :normed] * rstd.unsqueeze(-1) * gamma
        out[:, :, normed:] = x[:, :, normed:]
        ctx.save_for_backward(qkv, rstd, qg, kg)
        ctx.conf = (heads, kv_heads)
        return out.view(b, t, w)

    @staticmethod
    def backward(ctx, dout):
        qkv, rstd, qg, kg = ctx.saved_tensors
        heads, kv_heads = ctx.conf
        b, t, w = qkv.shape
        d = w // (heads + 2 * kv_heads)
        normed = heads + kv_heads
        x = qkv.view(b, t, heads + 2 * kv_heads, d)[:, :, :normed]
        dy = dout.contiguous().view(b, t, heads + 2 * kv_heads, d)
        gamma = torch.cat([qg.expand(heads, d), kg.expand(kv_heads, d)])
        r = rstd.unsqueeze(-1)
        xhat = x * r
        g = dy[:, :, :normed] * gamma
        dx = torch.empty_like(dy)
        dx[:, :, :normed] = r * (g - xhat * (g * xhat).mean(-1, keepdim=True))
        dx[:, :, normed:] = dy[:, :, normed:]
        dg = (dy[:, :, :normed] * xhat).sum((0, 1))
        return dx.view(b, t, w), dg[:heads].sum(0), dg[heads:].sum(0), None, None, None


class _Rope(torch.autograd.Function):
    """Rotary embedding of the q and k heads of packed qkv, pairs (2j, 2j + 1) of each head
    turned by t theta^(-2j / D); v passed through. Keeps nothing: the backward is the
    inverse rotation."""

    @staticmethod
    def rotate(x, heads, kv_heads, theta, sign):
        b, t, w = x.shape
        d = w // (heads + 2 * kv_heads)
        j = torch.arange(d // 2, dtype=torch.float64)
        angle = torch.arange(t, dtype=torch.float64)[:, None] * theta ** (-2.0 * j / d)
        cos = angle.cos().to(x.dtype)[:, None, :]
        sin = (sign * angle.sin()).to(x.dtype)[:, None, :]
        heads_of = x.view(b, t, heads + 2 * kv_heads, d)
        out = heads_of.clone()
        rot = heads_of[:, :, :heads + kv_heads]
        x0, x1 = rot[..., 0::2], rot[..., 1::2]
        out[:, :, :heads + kv_heads, 0::2] = x0 * cos - x1 * sin
        out[:, :, :heads + kv_heads, 1::2] = x0 * sin + x1 * cos
        return out.view(b, t, w)

    @staticmethod
    def forward(ctx, qkv, heads, kv_heads, theta):
        ctx.conf = (heads, kv_heads, theta)
        return _Rope.rotate(qkv, heads, kv_heads, theta, 1.0)

    @staticmethod
    def backward(ctx, dout):
        heads, kv_heads, theta = ctx.conf
        return _Rope.rotate(dout.contiguous(), heads, kv_heads, theta, -1.0), None, None, None


def _gelu(x):
    return F.gelu(x, approximate="tanh")


def _gelu_written_out(x):
    """GELU's tanh form in separate PyTorch ops, as GPT-2's NewGELUActivation runs it: pow
    keeps x, tanh its output, the last product x / 2 and 1 + the tanh."""
    inner = (x + x.pow(3.0) * 0.044715) * math.sqrt(2.0 / math.pi)
    return (x * 0.5) * (torch.tanh(inner) + 1.0)


# silu and gelu (tanh) with their fused backward kernels: grad -> grad * act'(x).
_ACTIVATIONS = {
    "silu": (F.silu, torch.ops.aten.silu_backward),
    "gelu": (_gelu, lambda grad, x: torch.ops.aten.gelu_backward(grad, x, approximate="tanh")),
}


class _GatedUnit(torch.autograd.Function):
    """act(gate) up in one kernel (swiglu: silu, geglu: tanh-approximated gelu); keeps gate
    and up. Its backward holds no more than the two gradients it makes: dgate = act'(gate)
    dout up (through dout up, freed once dgate is made), then dup = act(gate) dout."""

    @staticmethod
    def forward(ctx, gate, up, act):
        ctx.save_for_backward(gate, up)
        ctx.act = act
        return _ACTIVATIONS[act][0](gate) * up

    @staticmethod
    def backward(ctx, dout):
        gate, up = ctx.saved_tensors
        act, act_backward = _ACTIVATIONS[ctx.act]
        dgate = act_backward(dout * up, gate)
        dup = act(gate).mul_(dout)
        return dgate, dup, None


class _SoftCap(torch.autograd.Function):
    """cap tanh(x / cap); keeps its output, from which the backward's 1 - tanh^2 comes."""

    @staticmethod
    def forward(ctx, x, cap):
        out = torch.tanh(x / cap) * cap
        ctx.save_for_backward(out)
        ctx.cap = cap
        return out

    @staticmethod
    def backward(ctx, dout):
        (out,) = ctx.saved_tensors
        return dout * (1 - (out / ctx.cap) ** 2), None


class _FusedCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy that keeps the logits and the f32 row log-sum-exp only, and makes
    the logits' gradient in one tensor (as liger-kernel or llm.c do)."""

    @staticmethod
    def forward(ctx, logits, targets):
        flat = logits.reshape(-1, logits.shape[-1])
        lse = torch.logsumexp(flat.float(), dim=-1)
        picked = flat.gather(1, targets.reshape(-1, 1)).squeeze(1).float()
        ctx.save_for_backward(logits, targets, lse)
        return (lse - picked).mean()

    @staticmethod
    def backward(ctx, dloss):
        logits, targets, lse = ctx.saved_tensors
        flat = logits.reshape(-1, logits.shape[-1])
        grad = flat.float().sub_(lse.unsqueeze(1)).exp_()
        grad.scatter_add_(1, targets.reshape(-1, 1),
                          torch.full((flat.shape[0], 1), -1.0, dtype=grad.dtype))
        grad.mul_(dloss / flat.shape[0])
        return grad.to(logits.dtype).view_as(logits), None


def _moe_grouped(x, p, attrs):
    """Mixtral's sparse MoE block as transformers 5's grouped_mm experts run it: the routed
    rows sorted by expert, three grouped products, the weighted rows gathered back to token
    order and summed over the top k."""
    shape = x.shape
    x = x.reshape(-1, shape[-1])
    experts, top_k = attrs["experts"], attrs["top_k"]
    # The logits, the sorted ids, their float copy and the counts stay referenced to the
    # end, as transformers' locals: planner/op counts them in the forward's workspace.
    logits = F.linear(x, p["router"])
    weights, chosen = torch.topk(F.softmax(logits.float(), dim=-1), top_k, dim=-1)
    weights /= weights.sum(dim=-1, keepdim=True)
    ids, order = torch.sort(chosen.reshape(-1))
    rows = x[order // top_k]
    row_weights = weights.reshape(-1)[order]
    ids_float = ids.float()
    counts = torch.histc(ids_float, bins=experts, min=0, max=experts - 1)
    offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)
    gate, up = F.grouped_mm(rows, p["gate_up"].transpose(-2, -1), offs=offsets).chunk(2, dim=-1)
    out = F.grouped_mm(F.silu(gate) * up, p["w2"].transpose(-2, -1), offs=offsets)
    weighted = out * row_weights.unsqueeze(-1)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel())
    weighted = weighted[inverse]
    return weighted.view(-1, top_k, shape[-1]).sum(dim=1).to(x.dtype).view(shape)


def _moe(x, p, attrs):
    """Mixtral's sparse MoE block as transformers' eager MixtralSparseMoeBlock loop runs it."""
    if attrs["grouped"]:
        return _moe_grouped(x, p, attrs)
    shape = x.shape
    x = x.reshape(-1, shape[-1])
    experts, top_k = attrs["experts"], attrs["top_k"]
    logits = F.linear(x, p["router"])
    weights = F.softmax(logits, dim=1, dtype=torch.float)
    weights, chosen = torch.topk(weights, top_k, dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    weights = weights.to(x.dtype)
    out = torch.zeros_like(x)
    expert_mask = F.one_hot(chosen, num_classes=experts).permute(2, 1, 0)
    for e in range(experts):
        slot, rows = torch.where(expert_mask[e])
        if rows.numel() == 0:
            continue
        state = x[None, rows].reshape(-1, x.shape[-1])
        hidden = F.silu(F.linear(state, p["w1.%d" % e])) * F.linear(state, p["w3.%d" % e])
        y = F.linear(hidden, p["w2.%d" % e]) * weights[rows, slot, None]
        out.index_add_(0, rows, y.to(x.dtype))
    return out.view(shape)


def _lora(x, y, p, attrs):
    """y + alpha / rank B (A x), with q, k and v parts of their own when `heads` is given."""
    mid = F.linear(x, p["lora_a"])
    rank, s = attrs["rank"], attrs["alpha"] / attrs["rank"]
    widths = attrs["widths"]
    parts, at = [], 0
    for i, width in enumerate(widths):
        parts.append(F.linear(mid[..., i * rank:(i + 1) * rank], p["lora_b"][at:at + width]))
        at += width
    return y + torch.cat(parts, dim=-1) * s


def _dropout(x, prob):
    return torch.native_dropout(x, prob, True)[0] if prob > 0 else x


def _cross_entropy(logits, targets, attrs):
    if attrs.get("fused"):
        return _FusedCrossEntropy.apply(logits, targets)
    if attrs.get("upcast"):  # Hugging Face's ForCausalLMLoss
        logits = logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _gated(gate, up, act, attrs):
    """act(gate) up: one kernel, or two autograd ops as Hugging Face's MLPs write it (which
    keep act(gate) as well)."""
    if attrs.get("fused", True):
        return _GatedUnit.apply(gate, up, act)
    return _ACTIVATIONS[act][0](gate) * up


def _rmsnorm(x, p, attrs):
    if attrs.get("fused", True):
        return _RMSNorm.apply(x, p["gamma"], attrs["eps"])
    return _rmsnorm_written_out(x, p["gamma"], attrs["eps"])


def _qknorm(qkv, p, attrs):
    """Qwen3's q_norm and k_norm on packed qkv; written out (not fused), each is the
    RMSNorm Hugging Face writes, which keeps x rstd for its weight, on copies of the q and k
    heads: in transformers they are q_proj's and k_proj's own outputs, so that the norms
    keep no part of v."""
    heads, kv_heads = attrs["heads"], attrs["kv_heads"]
    if attrs.get("fused", True):
        return _QKNorm.apply(qkv, p["q_gamma"], p["k_gamma"], heads, kv_heads, attrs["eps"])
    b, t, w = qkv.shape
    x = qkv.view(b, t, heads + 2 * kv_heads, w // (heads + 2 * kv_heads))
    q = _rmsnorm_written_out(x[:, :, :heads].clone(), p["q_gamma"], attrs["eps"])
    k = _rmsnorm_written_out(x[:, :, heads:heads + kv_heads].clone(), p["k_gamma"], attrs["eps"])
    return torch.cat([q, k, x[:, :, heads + kv_heads:]], dim=2).view(b, t, w)


def _embedding(ids, p, leaf):
    out = F.embedding(ids, p["wte"])
    if leaf and torch.is_grad_enabled():  # enable_input_require_grads()'s hook, a frozen table
        out.requires_grad_(True)
    return out + p["wpe"][:ids.shape[1]] if "wpe" in p else out


# op name -> f(inputs, parameters, attributes) -> output
OPS = {
    "embedding": lambda i, p, a: _embedding(i[0], p, a["leaf"]),
    "linear": lambda i, p, a: F.linear(i[0], p["weight"], p.get("bias")),
    "layernorm": lambda i, p, a: F.layer_norm(i[0], i[0].shape[-1:], p["gamma"], p["beta"],
                                              a["eps"]),
    "rmsnorm": lambda i, p, a: _rmsnorm(i[0], p, a),
    "gelu": lambda i, p, a: _gelu(i[0]) if a.get("fused", True) else _gelu_written_out(i[0]),
    "relu": lambda i, p, a: F.relu(i[0]),
    "silu": lambda i, p, a: F.silu(i[0]),
    "add": lambda i, p, a: i[0] + i[1],
    "mul": lambda i, p, a: i[0] * i[1],
    "dropout": lambda i, p, a: _dropout(i[0], a["p"]),
    "attention": lambda i, p, a: _Attention.apply(i[0], a["heads"], a["kv_heads"], a["p"],
                                                  a["flash"], a["cap"], a["expand_kv"],
                                                  a["sdpa_mask"], a["v_view"], a["out_heads"],
                                                  a["keeps_out"]),
    "rope": lambda i, p, a: _Rope.apply(i[0], a["heads"], a["kv_heads"], a["theta"]),
    "swiglu": lambda i, p, a: _gated(i[0], i[1], "silu", a),
    "geglu": lambda i, p, a: _gated(i[0], i[1], "gelu", a),
    "cast": lambda i, p, a: i[0].to(getattr(torch, a["to"])),
    "lora": lambda i, p, a: _lora(i[0], i[1], p, a),
    "qknorm": lambda i, p, a: _qknorm(i[0], p, a),
    "softcap": lambda i, p, a: _SoftCap.apply(i[0], a["cap"]),
    # mul.Scalar keeps the factor as a number; x * factor would keep it as a 0-dim tensor
    "scale": lambda i, p, a: torch.ops.aten.mul.Scalar(i[0], a["factor"]),
    "moe": lambda i, p, a: _moe(i[0], p, a),
    "cross_entropy": lambda i, p, a: _cross_entropy(i[0], i[1], a),
    "mse": lambda i, p, a: F.mse_loss(i[0], i[1]),
}


class Model(torch.nn.Module):
    """NODES as a module: each parameter under the key ckplan gave it (node.parameter with
    "." made "_" as nn.Module requires: "h_0_qkv_weight"), stage by stage, with SCHEDULE run
    exactly when given."""

    def __init__(self, schedule):
        super().__init__()
        self.schedule = schedule
        self.params = torch.nn.ParameterDict()
        for node in NODES:
            for _, key, shape, init in node["params"]:
                if init == "normal":
                    value = torch.randn(*shape) * 0.02
                else:
                    value = (torch.ones if init == "ones" else torch.zeros)(*shape)
                self.params[key] = torch.nn.Parameter(value, requires_grad=not node["frozen"])

    def node_params(self, node):
        out = {name: self.params[key] for name, key, _, _ in node["params"]}
        if node["tied"]:
            out["weight"] = self.params[node["tied"]]
        return out

    def run_nodes(self, nodes, values):
        for k in nodes:
            node = NODES[k]
            args = [values[t] for t in node["inputs"]]
            values[node["name"]] = OPS[node["op"]](args, self.node_params(node), node["attrs"])
            del args
            for name in node["drop"]:  # its last reader: gone, as a local would be
                del values[name]
        return values[NODES[nodes[-1]]["name"]]

    def stage(self, i, x, held):
        """Stage i on its input x_i: its output x_{i+1} (or, for the loss, the loss)."""
        values = dict(held)
        values[STAGE_INPUTS[i]] = x
        return self.run_nodes(STAGE_NODES[i], values)

    def forward(self, *inputs):
        held = dict(zip(INPUT_NAMES, inputs))
        if self.schedule is None:
            x = inputs[0]
            for i in range(len(STAGES) + 1):
                x = self.stage(i, x, held)
            return x
        return _ScheduleRunner(self, held).run(inputs[0])


class _Step(torch.autograd.Function):
    """The loss of a step whose backward is the rest of the schedule."""

    @staticmethod
    def forward(ctx, anchor, runner):
        ctx.runner = runner
        return runner.loss.detach()

    @staticmethod
    def backward(ctx, dloss):
        ctx.runner.backward_phase(dloss)
        return None, None


# A saving forward of stage i runs as FORWARD_HOOK(i, leaf, run) when set: run() is the
# stage on leaf (x_i), and its result the stage's output. (The referee counts what autograd
# keeps this way: tests/torch/referee.py.)
FORWARD_HOOK = None


def hollow(t):
    """t's storage freed, its shape and autograd history kept: it reads as zeros of one
    element broadcast, enough to back-propagate from (what the loss frees)."""
    t.data = torch.zeros((), dtype=t.dtype).expand(t.shape)
    t.ckplan_hollow = True


class _ScheduleRunner:
    """Runs SCHEDULE's five operations (../shared/spec/chain-model.md section 2) as they
    are defined: F_all keeps stage i's autograd graph (x̄_{i+1}), F_ck and F_none run it
    without autograd (x_{i+1} only; F_none drops its input), B i back-propagates y_{i+1}
    through x̄_{i+1} into y_i and the parameters' gradients and drops them both. A stage
    that draws dropout runs from the generator state of its first forward every time."""

    def __init__(self, model, held):
        self.model, self.held = model, held
        self.x, self.xbar, self.y = {}, {}, {}
        self.rng = {}
        self.loss = None
        self.ops = [tuple(op) for op in model.schedule]
        self.at = 0
        self.held_bytes = {}  # HELD_BEFORE's tensors, by key

    def around(self, k, run):
        """Action k, with what transformers holds beside its ops made before it and freed
        after it (HELD_BEFORE, HELD_AFTER)."""
        for key, n in HELD_BEFORE.get(k, ()):
            self.held_bytes[key] = torch.empty(n, dtype=torch.uint8)
        run()
        for key in HELD_AFTER.get(k, ()):
            del self.held_bytes[key]

    def input_of(self, i):
        if i in self.x:
            return self.x[i]
        return self.xbar[i][1]

    def run_stage(self, i, x):
        if i not in STAGES_DRAWING:
            return self.model.stage(i, x, self.held)
        if i not in self.rng:  # kept as bytes, outside the tensors' memory
            self.rng[i] = bytearray(torch.get_rng_state().numpy().tobytes())
            return self.model.stage(i, x, self.held)
        outer = torch.get_rng_state()
        torch.set_rng_state(torch.frombuffer(self.rng[i], dtype=torch.uint8))
        try:
            return self.model.stage(i, x, self.held)
        finally:
            torch.set_rng_state(outer)

    def forward_op(self, kind, i):
        x = self.input_of(i)
        if kind == "F_all":
            leaf = x.detach().requires_grad_(STAGE_INPUT_GRAD[i])
            with torch.enable_grad():
                if FORWARD_HOOK:
                    out = FORWARD_HOOK(i, leaf, lambda: self.run_stage(i, leaf))
                else:
                    out = self.run_stage(i, leaf)
            self.xbar[i + 1] = (leaf, out)
            return
        with torch.no_grad():
            self.x[i + 1] = self.run_stage(i, x)
        if kind == "F_none":
            self.x.pop(i, None) if i in self.x else self.xbar.pop(i)

    def backward_op(self, i):
        leaf, out = self.xbar.pop(i + 1)
        y = self.y.pop(i + 1)
        if out.requires_grad and getattr(out, "ckplan_hollow", False):  # the loss freed it
            torch.autograd.backward(out, y)
        elif out.requires_grad:  # else nothing before it is trained
            # Back-propagating dot(out, y) hands y to autograd, which frees it and out's
            # storage as soon as their last reader's backward is done, as ckplan's program
            # does; a Python reference to either would hold it for the whole backward.
            # Its gradient 1 * y is y exactly.
            with torch.enable_grad():
                root = torch.dot(out.reshape(-1), y.reshape(-1))
            del out, y
            root.backward()
        else:
            del out, y
        self.x.pop(i, None)
        if leaf.requires_grad:
            self.y[i], leaf.grad = leaf.grad, None
        del leaf

    def run(self, x0):
        self.x[0] = x0
        while self.ops[self.at][0] != "loss":
            kind, i = self.ops[self.at]
            self.around(self.at, lambda: self.forward_op(kind, i))
            self.at += 1
        n = len(STAGES)
        x = self.input_of(n)
        self.loss_leaf = x.detach().requires_grad_()
        with torch.enable_grad():
            self.loss = self.run_stage(n, self.loss_leaf)
        if LOSS_FREES_INPUT:  # as ckplan's loss, and PyTorch once nothing refers to x_L
            hollow(self.loss_leaf)
            hollow(self.input_of(n))
        anchor = torch.zeros((), requires_grad=True)
        return _Step.apply(anchor, self)

    def backward_phase(self, dloss):
        torch.autograd.backward(self.loss, dloss)
        self.loss = None
        self.y[len(STAGES)], self.loss_leaf.grad = self.loss_leaf.grad, None
        del self.loss_leaf
        for k in range(self.at + 1, len(self.ops)):
            kind, i = self.ops[k]
            self.around(k, lambda: self.backward_op(i) if kind == "B" else self.forward_op(kind, i))
        self.x.clear()
        self.y.clear()
        self.held_bytes.clear()


def make_optimizer(model):
    """The model file's optimizer, with ckplan's hyperparameters (docs/model-format.md)."""
    params = [p for p in model.parameters() if p.requires_grad]
    name = OPTIMIZER["name"]
    if name == "adamw":
        return torch.optim.AdamW(params, lr=OPTIMIZER["lr"], weight_decay=OPTIMIZER["weight_decay"])
    if name in ("sgd", "momentum"):
        return torch.optim.SGD(params, lr=OPTIMIZER["lr"],
                               momentum=OPTIMIZER["momentum"] if name == "momentum" else 0)
    return torch.optim.Adam(params, lr=OPTIMIZER["lr"])


def build(seed=0):
    """(model, inputs): the model in f32 on CPU, its parameters and inputs drawn from seed
    (the same with or without a plan); model(*inputs) is the step's scalar loss."""
    torch.manual_seed(seed)
    model = Model(SCHEDULE)
    inputs = []
    for name, shape, limit in INPUTS:
        if limit:
            inputs.append(torch.randint(limit, shape, dtype=torch.int64))
        else:
            inputs.append(torch.randn(*shape))
    return model, tuple(inputs)
