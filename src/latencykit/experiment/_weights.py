"""The bytes a decode step reads: a model's weights (from its GGUF or safetensors file) and its KV cache.

Read from the files' own headers, with no dependency: a GGUF file's tensor table (name, shape,
GGML type: bytes = elements / block size × block bytes, the sizes of ggml's ``ggml_type_traits``)
and its metadata (layers, KV heads, head size); a Hugging Face folder's ``*.safetensors``
headers (``data_offsets``) and ``config.json``.

Bytes read per generated token (`ModelBytes.per_token`): every weight tensor once — except the
token-embedding table when the model has a separate output matrix (a decode step reads one
row of it, counted as such); with tied embeddings (no ``output.weight`` / ``lm_head.weight``) the
table *is* the output matrix and is read whole. KV bytes per token of context
(`ModelBytes.kv_per_token`): K and V of every layer, ``2 × layers × kv_heads × head_size``
elements of the cache type (f16 by default; ``q8_0`` 34 bytes per 32, ``q4_0`` 18 per 32).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Optional, Union

__all__ = ["GGML_TYPES", "KV_TYPE_BYTES", "ModelBytes", "model_bytes", "read_gguf", "read_safetensors"]

GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98), 19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}  # fmt: skip
"""GGML type id → (name, elements per block, bytes per block), as ggml's type traits (gguf-py's ``GGML_QUANT_SIZES``)."""

KV_TYPE_BYTES: dict[str, float] = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32,
                                   "q5_0": 22 / 32, "q5_1": 24 / 32, "iq4_nl": 18 / 32, "fp8": 1.0, "fp8_e4m3": 1.0,
                                   "fp8_e5m2": 1.0, "auto": 2.0}  # fmt: skip
"""Bytes per element of a KV-cache type (llama.cpp's ``--cache-type-k/v``, vLLM's ``--kv-cache-dtype``)."""

_SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
                      "F8_E4M3": 1, "F8_E5M2": 1}  # fmt: skip
_EMBED = ("token_embd.weight", "model.embed_tokens.weight")
_OUTPUT = ("output.weight", "lm_head.weight")


@dataclass(frozen=True)
class ModelBytes:
    """A model file's weight bytes and the shape its KV cache has."""

    path: str
    format: str
    """``gguf`` or ``safetensors``."""
    weights: int
    """All tensor bytes in the file(s)."""
    per_token: int
    """Bytes read per generated token (module docstring)."""
    types: dict[str, int]
    """Bytes per tensor type (``Q4_0``, ``F16``, ...)."""
    layers: Optional[int] = None
    kv_heads: Optional[int] = None
    head_size: Optional[int] = None
    architecture: Optional[str] = None

    def kv_per_token(self, k_type: str = "f16", v_type: Optional[str] = None) -> Optional[float]:
        """KV-cache bytes read per token of context (K of type ``k_type``, V of ``v_type``, default the same)."""
        if None in (self.layers, self.kv_heads, self.head_size):
            return None
        k = KV_TYPE_BYTES.get(k_type.lower())
        v = KV_TYPE_BYTES.get((v_type or k_type).lower())
        if k is None or v is None:
            return None
        return float(self.layers * self.kv_heads * self.head_size * (k + v))  # type: ignore[operator]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (the run file's ``roofline.model``)."""
        return dict(self.__dict__)


def _read(f: BinaryIO, n: int) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise ValueError("the file ends inside its header")
    return b


def _u32(f: BinaryIO) -> int:
    return int(struct.unpack("<I", _read(f, 4))[0])


def _u64(f: BinaryIO) -> int:
    return int(struct.unpack("<Q", _read(f, 8))[0])


def _string(f: BinaryIO) -> str:
    return _read(f, _u64(f)).decode("utf-8", errors="replace")


_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _value(f: BinaryIO, kind: int, keep: bool) -> Any:
    if kind in _SCALAR:
        fmt = _SCALAR[kind]
        return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]
    if kind == 8:
        return _string(f)
    if kind == 9:
        item, count = _u32(f), _u64(f)
        if item in _SCALAR and not keep:
            f.seek(struct.calcsize(_SCALAR[item]) * count, 1)
            return None
        values = [_value(f, item, keep) for _ in range(count)]
        return values if keep else None
    raise ValueError(f"unknown GGUF value type {kind}")


def read_gguf(path: Union[str, Path]) -> tuple[dict[str, Any], list[tuple[str, list[int], int]]]:
    """A GGUF file's scalar metadata and its tensors ``(name, shape, type id)``; ``ValueError`` if it is not GGUF v2/v3."""
    try:
        return _read_gguf(path)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        text = str(exc)
        raise ValueError(text if text.startswith(str(path)) else f"{path}: {text}") from None


def _read_gguf(path: Union[str, Path]) -> tuple[dict[str, Any], list[tuple[str, list[int], int]]]:
    with open(path, "rb") as f:
        if _read(f, 4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version = _u32(f)
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version} (2 and 3 are read)")
        n_tensors, n_kv = _u64(f), _u64(f)
        meta: dict[str, Any] = {}
        for _ in range(n_kv):
            key = _string(f)
            kind = _u32(f)
            value = _value(f, kind, keep=False)
            if kind != 9:
                meta[key] = value
        tensors = []
        for _ in range(n_tensors):
            name = _string(f)
            dims = [_u64(f) for _ in range(_u32(f))]
            kind = _u32(f)
            _u64(f)  # offset
            tensors.append((name, dims, kind))
    return meta, tensors


def _gguf_bytes(path: Path) -> ModelBytes:
    meta, tensors = read_gguf(path)
    sizes: dict[str, int] = {}
    types: dict[str, int] = {}
    for name, dims, kind in tensors:
        if kind not in GGML_TYPES:
            raise ValueError(f"{path}: tensor {name} has GGML type {kind}, not known here")
        tname, block, nbytes = GGML_TYPES[kind]
        n = 1
        for d in dims:
            n *= d
        sizes[name] = n // block * nbytes
        types[tname] = types.get(tname, 0) + sizes[name]
    arch = meta.get("general.architecture")
    heads = meta.get(f"{arch}.attention.head_count")
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", heads)
    width = meta.get(f"{arch}.embedding_length")
    head_size = meta.get(f"{arch}.attention.key_length") or (width // heads if width and heads else None)
    per_token = _per_token(sizes, next((t for t in tensors if t[0] in _EMBED), None))
    return ModelBytes(str(path), "gguf", sum(sizes.values()), per_token, types, meta.get(f"{arch}.block_count"), kv_heads,
                      head_size, arch)  # fmt: skip


def _per_token(sizes: dict[str, int], embed: Any) -> int:
    """All tensors, the embedding table counted as one row when a separate output matrix is read instead."""
    total = sum(sizes.values())
    if embed is None or not any(o in sizes for o in _OUTPUT):
        return total
    name, shape = embed[0], embed[1]
    rows = shape[-1] if len(shape) > 1 else 1  # GGUF: [width, vocab]; safetensors: [vocab, width] (passed reversed)
    return total - sizes[name] + sizes[name] // max(rows, 1)


def read_safetensors(folder: Union[str, Path]) -> tuple[dict[str, Any], dict[str, tuple[list[int], str, int]]]:
    """A Hugging Face folder's ``config.json`` and its tensors ``name → (shape, dtype, bytes)`` from the safetensors headers."""
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{folder} holds no *.safetensors file")
    tensors: dict[str, tuple[list[int], str, int]] = {}
    for file in files:
        with file.open("rb") as f:
            header = json.loads(_read(f, int(struct.unpack("<Q", _read(f, 8))[0])))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            tensors[name] = (list(info["shape"]), str(info["dtype"]), int(end - start))
    config_path = folder / "config.json"
    config: dict[str, Any] = json.loads(config_path.read_text()) if config_path.is_file() else {}
    return config, tensors


def _safetensors_bytes(folder: Path) -> ModelBytes:
    config, tensors = read_safetensors(folder)
    sizes = {n: b for n, (_, _, b) in tensors.items()}
    types: dict[str, int] = {}
    for _, dtype, b in tensors.values():
        types[dtype] = types.get(dtype, 0) + b
    text = config.get("text_config", config)
    heads = text.get("num_attention_heads")
    kv_heads = text.get("num_key_value_heads", heads)
    head_size = text.get("head_dim") or (text["hidden_size"] // heads if heads and text.get("hidden_size") else None)
    embed = next(((n, list(reversed(tensors[n][0])), 0) for n in _EMBED if n in tensors), None)
    arch = (config.get("architectures") or [config.get("model_type")])[0]
    return ModelBytes(str(folder), "safetensors", sum(sizes.values()), _per_token(sizes, embed), types,
                      text.get("num_hidden_layers"), kv_heads, head_size, arch)  # fmt: skip


def model_bytes(path: Union[str, Path]) -> ModelBytes:
    """`ModelBytes` of a ``.gguf`` file or a folder of ``*.safetensors``; ``ValueError`` says why not."""
    p = Path(path)
    if p.is_dir():
        return _safetensors_bytes(p)
    if not p.is_file():
        raise ValueError(f"no model file at {str(p)!r}")
    try:
        return _gguf_bytes(p)
    except (OSError, struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"{p}: cannot read its GGUF header: {exc}") from None
