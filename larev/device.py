"""Device choice, mixed precision and seeding: CUDA with bf16 autocast when present, CPU otherwise."""

from __future__ import annotations

import contextlib
import random

import numpy as np
import torch


def resolve_device(name: str = "auto") -> torch.device:
    """'auto' picks CUDA when available; asking for 'cuda' on a machine without it is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        from larev.errors import ConfigError

        raise ConfigError("device='cuda' was asked for but no CUDA device is visible; use device='auto' or 'cpu'")
    return torch.device(name)


def autocast(device: torch.device, bf16: bool = True):
    """bf16 autocast on CUDA devices that support it; a no-op context elsewhere (CPU runs in float32)."""
    if device.type == "cuda" and bf16 and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch; return a torch generator for data order."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)
