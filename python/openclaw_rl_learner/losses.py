"""The loss spec of src/engine/local/train/losses.ts, as differentiable torch expressions.

Reduction: loss = (1/B) sum_i (sum_t m_it x_it) / max(1, sum_t m_it), with B the samples of the
whole optimizer batch, so that micro-batch (and rank) gradients add up to the batch's."""

import math

import torch

TAIL_LSE_CAP = -1e-7


def token_weights(mask, batch_size):
    """mask [C] (0/1) of one sample -> per-token weight mask / max(1, trained) / B."""
    return mask / max(1.0, float(mask.sum())) / batch_size


def policy_terms(lp, ent, old, adv, mask, rollout, ref, cfg, batch_size):
    """One sample's PPO-clip + TIS + KL + entropy loss and metric sums over its trained tokens."""
    w = token_weights(mask, batch_size)
    ratio = torch.exp(lp - old)
    unclipped = -ratio * adv
    clipped = -torch.clamp(ratio, 1 - cfg["eps"], 1 + cfg["epsHigh"]) * adv
    # The clipped branch only when strictly larger; its slope is then 0 (the clamp holds).
    is_clipped = clipped > unclipped
    pg = torch.where(is_clipped, clipped, unclipped)
    tis = torch.ones_like(lp)
    if rollout is not None:
        raw = torch.exp(old - rollout)
        if cfg["tisCap"] is not None:
            tis = torch.clamp(raw, max=cfg["tisCap"])
    term = tis.detach() * pg - cfg["entropyCoef"] * ent
    if ref is not None and cfg["klCoef"] != 0:
        d = ref - lp
        term = term + cfg["klCoef"] * (torch.exp(d) - d - 1)
    trained = mask != 0

    def msum(x):
        return float(torch.where(trained, x, torch.zeros_like(x)).sum())

    with torch.no_grad():
        sums = {
            "tokens": float(trained.sum()), "clip": float((is_clipped & trained).sum()), "kl": msum(old - lp),
            "entropy": msum(ent), "tis": msum(tis),
            "rollout": msum((old - rollout).abs()) if rollout is not None else 0.0,
        }
    # Masked tokens are skipped outright (their inputs may be NaN), not multiplied by 0.
    return torch.where(trained, w * term, torch.zeros_like(term)).sum(), sums


def topk_terms(logp, ids, teacher, mask, entropy_coef, batch_size):
    """Reverse KL over the teacher's top-K ids plus a tail bin; NaN teacher entries leave the set."""
    valid = torch.isfinite(teacher)
    trains = (mask != 0) & valid.any(-1)
    w = token_weights(trains.to(logp.dtype), batch_size)
    s = logp.gather(1, ids).masked_fill(~valid, float("-inf"))
    t = teacher.masked_fill(~valid, float("-inf"))

    def tail(x):
        return torch.log(-torch.expm1(torch.clamp(torch.logsumexp(x, dim=-1), max=TAIL_LSE_CAP)))

    s_tail, t_tail = tail(s), tail(t)
    p, p_tail = torch.exp(s), torch.exp(s_tail)
    s0, t0 = torch.where(valid, s, torch.zeros_like(s)), torch.where(valid, t, torch.zeros_like(t))
    kl = p_tail * (s_tail - t_tail) + torch.where(valid, p * (s0 - t0), torch.zeros_like(s)).sum(-1)
    neg_ent = p_tail * s_tail + torch.where(valid, p * s0, torch.zeros_like(s)).sum(-1)
    per_token = kl + entropy_coef * neg_ent
    loss = torch.where(trains, w * per_token, torch.zeros_like(per_token)).sum()
    with torch.no_grad():
        f = trains.to(logp.dtype)
        sums = {"tokens": float(f.sum()), "kl": float((kl * f).sum()), "entropy": float((-neg_ent * f).sum())}
    return loss, sums


def check_mask(mask, index):
    bad = ((mask != 0) & (mask != 1)).nonzero()
    if bad.numel() > 0:
        t = int(bad[0])
        raise ValueError(f"sample {index}: mask[{t}] is {float(mask[t])}; masks hold 0 or 1")


def finite_or_nan(values):
    """JSON carries NaN as null."""
    return [math.nan if v is None else float(v) for v in values]
