#!/usr/bin/env python3
# The recipe the team measured for a tiny offline vLLM-CPU model (see docs/self-hosted.md); used by tests/real_servers/.
"""Write a tiny random-weight Llama in Hugging Face format (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json with a ChatML chat template), built fully offline.
Needs: torch, transformers, tokenizers (all come with vllm-cpu).
Usage: python make_tiny_hf.py OUT_DIR [--hidden 256] [--layers 2] [--heads 4] [--ff 512] [--vocab 4096]
"""
import argparse, glob, json, os, sysconfig

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] "
          "+ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def corpus(max_files=60):
    # train BPE on local text: a deterministic set of Python stdlib sources (no downloads)
    std = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(std, "*.py")))[:max_files]
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            yield fh.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=a.vocab, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.chat_template = CHATML
    fast.model_max_length = a.ctx
    fast.save_pretrained(a.out)   # transformers 5 writes the template to chat_template.jinja ...
    p = os.path.join(a.out, "tokenizer_config.json")   # ... put it in tokenizer_config.json as well
    with open(p) as fh:
        tc = json.load(fh)
    tc["chat_template"] = CHATML
    with open(p, "w") as fh:
        json.dump(tc, fh, indent=2)
    n_vocab = tok.get_vocab_size()

    torch.manual_seed(a.seed)
    cfg = LlamaConfig(hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, intermediate_size=a.ff, vocab_size=n_vocab,
                      max_position_embeddings=a.ctx, rms_norm_eps=1e-5, rope_theta=10000.0,
                      bos_token_id=tok.token_to_id("<|endoftext|>"), eos_token_id=tok.token_to_id("<|im_end|>"),
                      pad_token_id=tok.token_to_id("<|endoftext|>"), tie_word_embeddings=False,
                      torch_dtype=a.dtype)
    model = LlamaForCausalLM(cfg).to(getattr(torch, a.dtype))
    model.save_pretrained(a.out)
    n = sum(p.numel() for p in model.parameters())
    print(f"wrote {a.out}: vocab={n_vocab} hidden={a.hidden} layers={a.layers} heads={a.heads}/{a.kv_heads} "
          f"head_dim={a.hidden // a.heads} ff={a.ff} ctx={a.ctx} dtype={a.dtype} params={n/1e6:.2f}M")
    print(sorted(os.listdir(a.out)))


if __name__ == "__main__":
    main()
