"""Deterministic test weights, bit for bit the same as Go's transformer/detweights.

For a parameter with full Hugging Face name `name` and shape `shape` (n elements, row-major):

    key  = splitmix64(seed XOR fnv1a64(name))
    u_j  = splitmix64(key + j)                (uint64 wrapping arithmetic), j = 0 .. n-1
    f_j  = float64(u_j >> 40) * 2**-23 - 1    exactly representable, uniform on [-1, 1)

and the value by role (float64 arithmetic, one rounding to float32 at the end):

    *LayerNorm.weight             1 + f*0.1
    *bias (any other 1-D)         f*0.1
    *embeddings.* (2-D tables)    f
    other 2-D (Linear (Out, In))  f*sqrt(3/In)

Run it directly to print known answers that transformer/detweights' tests also check.
"""

import numpy as np

_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def splitmix64_scalar(x: int) -> int:
    """One SplitMix64 step on a Python int state; returns the output."""
    x = (x + _GAMMA) & _M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 over a uint64 array (numpy wraps uint64 arithmetic on arrays)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(_GAMMA)
        z = x
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def fnv1a64(s: str) -> int:
    """64-bit FNV-1a of the UTF-8 bytes of s."""
    h = 0xCBF29CE484222325
    for byte in s.encode("utf-8"):
        h ^= byte
        h = (h * 0x100000001B3) & _M64
    return h


def uniform(seed: int, name: str, n: int) -> np.ndarray:
    """The n draws f_j in [-1, 1) of the named parameter, as float64."""
    key = splitmix64_scalar((seed ^ fnv1a64(name)) & _M64)
    with np.errstate(over="ignore"):
        j = np.arange(n, dtype=np.uint64) + np.uint64(key)
    u = splitmix64(j)
    return (u >> np.uint64(40)).astype(np.float64) * (1.0 / (1 << 23)) - 1.0


def values(seed: int, name: str, shape) -> np.ndarray:
    """The named parameter's float32 values with the given shape, by the role rules above."""
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape)) if shape else 1
    f = uniform(seed, name, n)
    if name.endswith("LayerNorm.weight"):
        v = 1.0 + f * 0.1
    elif name.endswith("bias") or len(shape) != 2:
        v = f * 0.1
    elif "embeddings." in name:
        v = f
    else:
        v = f * np.sqrt(3.0 / float(shape[1]))
    return v.astype(np.float32).reshape(shape)


def load_into(model, seed: int) -> None:
    """Overwrite every parameter of a torch model (named_parameters order) with values(seed, name, shape)."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(values(seed, name, p.shape)))


if __name__ == "__main__":
    outs, state = [], 0
    for _ in range(3):
        outs.append(splitmix64_scalar(state))
        state = (state + _GAMMA) & _M64
    assert outs == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F], [hex(o) for o in outs]
    assert fnv1a64("foobar") == 0x85944171F73967E8
    v = values(7, "bert.encoder.layer.0.intermediate.dense.weight", (128, 64))
    print("known answers ok; first values:", [float(x) for x in v.ravel()[:4]])
