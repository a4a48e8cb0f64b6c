#!/usr/bin/env python3
# The recipe the team measured for a tiny offline llama-server model (see docs/self-hosted.md); used by tests/real_servers/.
"""Build a tiny random-weight llama-architecture GGUF with a working GPT-2 style
byte-level BPE tokenizer and a ChatML chat template. Needs: pip install gguf numpy

Usage: python make_tiny_gguf.py OUT.gguf [--n-embd 256] [--n-layer 4] [--n-head 4]
                                 [--n-kv-head 4] [--n-ff 768] [--ctx 8192]
                                 [--merges 200] [--dtype f16|f32|q8_0|q4_0] [--seed 0]

The weights are drawn in one fixed order (token_embd, output, then block by block) from the
seed, so the same seed gives the same model in every --dtype (q8_0 and q4_0 quantize it with
the gguf package's own quantizer, as llama-quantize would), and a model with fewer --n-layer
is the bigger one truncated: the same embeddings, output and first blocks (a draft model that
shares the vocabulary, for speculative decoding).
"""
import argparse
import collections
import re

import numpy as np
import gguf

# Small built-in corpus used only to learn a few BPE merges (deterministic).
CORPUS = """
The quick brown fox jumps over the lazy dog. The server streams tokens to the client.
A language model predicts the next token given the previous tokens in the context.
Prompt caching reuses the key value cache for a shared prefix of the prompt, so the
second request that starts with the same system prompt and the same conversation
history is processed faster, and the time to first token is lower.
def main():\n    print("hello world")\n    return 0\n
import os\nimport sys\nfor i in range(10):\n    if i % 2 == 0:\n        continue\n
This is a test of the tokenizer. There are many words in this sentence and in that one.
The user asks a question and the assistant answers the question with an answer.
""" * 4


def bytes_to_unicode():
    """GPT-2 byte -> printable unicode char mapping (same as HF/OpenAI)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
          + list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def learn_bpe(corpus, n_merges, b2u):
    # approximation of the GPT-2 pre-tokenizer split
    pat = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")
    words = collections.Counter()
    for w in pat.findall(corpus):
        words[tuple(b2u[b] for b in w.encode("utf-8"))] += 1
    merges, vocab_new = [], []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), cnt = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if cnt < 2:
            break
        merges.append(f"{a} {b}")
        vocab_new.append(a + b)
        new_words = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_words[tuple(out)] += c
        words = new_words
    return merges, vocab_new


CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-kv-head", type=int, default=4)
    ap.add_argument("--n-ff", type=int, default=768)
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--merges", type=int, default=200)
    ap.add_argument("--dtype", choices=["f16", "f32", "q8_0", "q4_0"], default="f16")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    # ---------------- tokenizer ----------------
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]            # ids 0..255: all single bytes
    merges, merged = learn_bpe(CORPUS, a.merges, b2u)
    for t in merged:
        if t not in tokens:
            tokens.append(t)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    n_normal = len(tokens)
    tokens += specials
    types = [gguf.TokenType.NORMAL] * n_normal + [gguf.TokenType.CONTROL] * len(specials)
    eot_id = tokens.index("<|endoftext|>")
    im_end_id = tokens.index("<|im_end|>")
    n_vocab = len(tokens)

    # ---------------- weights ----------------
    E, L, H, HKV, FF = a.n_embd, a.n_layer, a.n_head, a.n_kv_head, a.n_ff
    hd = E // H
    rng = np.random.default_rng(a.seed)
    wdt = np.float32 if a.dtype == "f32" else np.float16
    quant = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}.get(a.dtype)

    def W(rows, cols, std=0.02):   # numpy shape (out, in) == ggml ne [in, out]
        w32 = rng.standard_normal((rows, cols), dtype=np.float32) * std
        if quant is None:
            return w32.astype(wdt), None
        # the F16 model's values, quantized (as llama-quantize does from an F16 file)
        return gguf.quants.quantize(w32.astype(np.float16).astype(np.float32), quant), quant

    def ones(n):                   # norm weights must stay f32
        return np.ones((n,), dtype=np.float32)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(f"tiny-random-llama-{E}x{L}")
    w.add_context_length(a.ctx)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type({"f16": gguf.LlamaFileType.MOSTLY_F16, "f32": gguf.LlamaFileType.ALL_F32,
                     "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[a.dtype])

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(eot_id)
    w.add_eos_token_id(im_end_id)
    w.add_eot_token_id(im_end_id)
    w.add_pad_token_id(eot_id)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_chat_template(CHATML_TEMPLATE)

    def add(name, pair):
        data, qtype = pair
        w.add_tensor(name, data, raw_dtype=qtype) if qtype is not None else w.add_tensor(name, data)

    add("token_embd.weight", W(n_vocab, E, 1.0))
    w.add_tensor("output_norm.weight", ones(E))
    add("output.weight", W(n_vocab, E))
    for i in range(L):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(E))
        add(p + "attn_q.weight", W(H * hd, E))
        add(p + "attn_k.weight", W(HKV * hd, E))
        add(p + "attn_v.weight", W(HKV * hd, E))
        add(p + "attn_output.weight", W(E, H * hd))
        w.add_tensor(p + "ffn_norm.weight", ones(E))
        add(p + "ffn_gate.weight", W(FF, E))
        add(p + "ffn_up.weight", W(FF, E))
        add(p + "ffn_down.weight", W(E, FF))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    n_params = n_vocab * E * 2 + E + L * (2 * E + 2 * H * hd * E + 2 * HKV * hd * E + 3 * FF * E)
    print(f"wrote {a.out}: vocab={n_vocab} (merges={len(merges)}), n_embd={E}, layers={L}, "
          f"heads={H}/{HKV}, n_ff={FF}, ctx={a.ctx}, dtype={a.dtype}, params~{n_params/1e6:.2f}M")


if __name__ == "__main__":
    main()
