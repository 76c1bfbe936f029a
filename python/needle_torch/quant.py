"""Fake quantization for QAT, with straight-through gradients (the forward sees quantized values,
the backward treats quantization as the identity).

- CQ (the .cact weight codec, FORMAT.md): each row is cut into groups of `group` values (the last
  group zero-padded), each group rotated by the normalized Hadamard H_group, split into its L2
  norm (stored as FP16) and a unit vector whose entries snap to the nearest codebook level, then
  rotated back. `cq_fake_quant` of an already-dequantized tensor returns it unchanged (the test
  checks this against the dequant folders: it is how we know this codec equals needle's).
- 8-bit activations: symmetric per row (last axis), scale = absmax / 127, as upstream's QAT does
  before the attention projections, the attention output projection, the engram projections and
  the tied output head.
"""
import functools

import torch


@functools.lru_cache(maxsize=None)
def hadamard(size):
    """Sylvester Walsh-Hadamard of `size` (a power of two) divided by sqrt(size): [size, size]."""
    if size < 1 or size & (size - 1):
        raise ValueError(f"Hadamard size {size} is not a power of two")
    matrix = torch.ones(1, 1, dtype=torch.float64)
    while matrix.shape[0] < size:
        matrix = torch.cat([torch.cat([matrix, matrix], 1), torch.cat([matrix, -matrix], 1)], 0)
    return (matrix / size ** 0.5).to(torch.float32)


def split_codebooks(values):
    """config.json's flat `codebooks` list (cb2, cb3, cb4 for group 128) -> {bits: tensor}."""
    books, start = {}, 0
    for bits in (2, 3, 4):
        count = 1 << bits
        books[bits] = torch.tensor(values[start:start + count], dtype=torch.float32)
        start += count
    if start != len(values):
        raise ValueError(f"codebooks: {len(values)} values, expected 4 + 8 + 16 = 28")
    return books


def cq_quantize(weight, codebook, group):
    """CQ encode + decode of `weight` [..., cols] (no gradient): the values a .cact would hold."""
    with torch.no_grad():
        cols = weight.shape[-1]
        pad = (-cols) % group
        padded = torch.nn.functional.pad(weight.float(), (0, pad)) if pad else weight.float()
        groups = padded.reshape(*padded.shape[:-1], -1, group)
        rotation = hadamard(group).to(groups.device)
        rotated = groups @ rotation
        norm = rotated.norm(dim=-1, keepdim=True)
        unit = rotated / norm.clamp_min(1e-12)
        norm = norm.to(torch.float16).to(torch.float32)
        book = codebook.to(groups.device)  # ascending levels
        right = torch.searchsorted(book, unit.contiguous()).clamp(1, book.numel() - 1)
        left = right - 1
        take_left = (unit - book[left]).abs() <= (unit - book[right]).abs()  # ties go left
        # H is symmetric and orthogonal, so it also rotates back.
        decoded = (book[torch.where(take_left, left, right)] * norm) @ rotation
        decoded = decoded.reshape(padded.shape)
        return (decoded[..., :cols] if pad else decoded).to(weight.dtype)


def cq_fake_quant(weight, codebook, group):
    """Straight-through CQ: forward = cq_quantize(weight), gradient = identity."""
    return weight + (cq_quantize(weight, codebook, group) - weight).detach()


def act_fake_quant(x, bits=8):
    """Straight-through symmetric per-row (last axis) fake quantization of activations."""
    qmax = 2 ** (bits - 1) - 1
    with torch.no_grad():
        absmax = x.abs().amax(dim=-1, keepdim=True)
        scale = torch.where(absmax > 0, absmax / qmax, torch.ones_like(absmax))
        quantized = torch.clamp(torch.round(x / scale), -qmax - 1, qmax) * scale
    return x + (quantized - x).detach()
