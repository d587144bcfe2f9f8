"""Text embedders for the index: one interface, an offline model shipped with the package, an OpenAI-compatible client.

``Embedder`` is what the index needs: a ``name`` (recorded beside vectors, so
vectors of different models are never compared), a ``dim`` and a batched
``embed`` returning L2-normalised vectors, so cosine distance (pgvector's
``<=>``) is meaningful. ``embedder_for(settings)`` picks one: the endpoint at
``BRAIN_EMBED_BASE_URL`` when set, otherwise ``OfflineEmbedder``:
sentence-transformers' all-MiniLM-L6-v2 exported to ONNX with int8 weights,
run in-process by onnxruntime, which lives in ``brain_kernel/offline_model/``
(see its README and ``services/brain-kernel/build_offline_embedder.py``).
ADR 0047 chose it over the model2vec static model shipped before by a
retrieval evaluation (``bench/eval_retrieval.py``): it finds paraphrases the
static model misses, at about 2 ms a query on two cores. It needs no torch and
no network: it is read from a local folder only, once per process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import httpx

from brain_kernel import http_client
from brain_kernel.errors import BrainError
from brain_kernel.settings import Settings

OFFLINE_MODEL_DIR = Path(__file__).resolve().parent.parent / "offline_model"  # brain_kernel/offline_model
# A new model gets a new name (and here a new width): vectors of two models are never compared (ADR 0047).
OFFLINE_MODEL_NAME = "onnx/all-MiniLM-L6-v2-int8"
OFFLINE_DIM = 384
DEFAULT_TIMEOUT_S = 30.0
# Well under the 2,048 inputs OpenAI accepts per request, and small enough for local servers.
DEFAULT_BATCH_SIZE = 128


class EmbedderError(BrainError):
    """An embedder could not produce vectors: missing model, failed or malformed endpoint answer."""


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of ``dim`` floats, in input order."""

    @property
    def name(self) -> str:
        """Which model made the vectors (vectors of different names are not comparable)."""
        ...

    @property
    def dim(self) -> int:
        """The length of every vector ``embed`` returns."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in order (a zero vector for a text with nothing to embed)."""
        ...


def _normalised(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length; a zero vector stays zero (it has no direction to keep)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:
        return [0.0] * len(vector)
    return [x / norm for x in vector]


# ---------------------------------------------------------------------------
# Offline: the committed ONNX model, run by onnxruntime (no torch).

# The files the folder must hold; checked first, so a missing model is one clear error.
ONNX_FILES = ("model.onnx", "tokenizer.json")
# Texts are cut at this many tokens: all-MiniLM-L6-v2 was trained on inputs of up to 256 (its max_seq_length).
ONNX_MAX_TOKENS = 256


class OnnxModel:
    """An ONNX encoder and its tokenizer, loaded from a local folder; ``encode`` mean-pools over the real tokens."""

    def __init__(self, path: Path) -> None:
        missing = [name for name in ONNX_FILES if not (path / name).is_file()]
        if missing:
            raise EmbedderError(f"offline embedding model incomplete at {path}: missing {', '.join(missing)}")
        try:
            # imported here: onnxruntime takes ~0.1 s to import, and most commands never embed
            import onnxruntime
            from tokenizers import Tokenizer

            onnxruntime.set_default_logger_severity(3)  # errors only: its notes on graph rewrites are not the operator's concern
            options = onnxruntime.SessionOptions()
            # Threads that finish an operator sleep instead of spinning for the next: on two cores shared with
            # Postgres and the other workers, spinning doubled a query's time (p50 36-58 ms against 81-101 at load 10).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self.session = onnxruntime.InferenceSession(str(path / "model.onnx"), options, providers=["CPUExecutionProvider"])
            self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        except Exception as exc:  # onnxruntime and tokenizers each raise their own kinds
            raise EmbedderError(f"offline embedding model at {path} cannot be loaded: {exc}") from None
        self.tokenizer.enable_truncation(ONNX_MAX_TOKENS)
        self.tokenizer.no_padding()
        self.inputs = {i.name for i in self.session.get_inputs()}

    def encode(self, texts: Sequence[str]) -> Any:
        """Mean-pooled float32 vectors (unnormalised), one row per text in input order.

        One text per inference call, never a padded batch: the int8 graph
        quantises its activations per call, so a text batched with longer ones
        came out different (cosine 0.98 to itself alone), and on two cores
        batches of 8 or 32 were no faster (85 texts/s each way).
        """
        import numpy as np

        rows = []
        for encoding in self.tokenizer.encode_batch(list(texts)):
            ids = np.asarray([encoding.ids], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in self.inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            rows.append(self.session.run(None, feeds)[0][0].mean(axis=0))
        return np.asarray(rows, dtype=np.float32)


_models: dict[Path, OnnxModel] = {}
_models_lock = threading.Lock()


def load_model(path: Path) -> OnnxModel:
    """The process's one copy of the model at ``path`` (an onnxruntime session is safe to share between threads)."""
    model = _models.get(path)
    if model is None:
        with _models_lock:  # one load even when the first requests arrive together
            model = _models.get(path)
            if model is None:
                model = _models[path] = OnnxModel(path)
    return model


class OfflineEmbedder:
    """The model shipped in ``brain_kernel/offline_model/`` (or another ONNX encoder's folder): no network, no torch."""

    def __init__(self, path: Path | None = None, *, name: str = OFFLINE_MODEL_NAME, dim: int = OFFLINE_DIM) -> None:
        self.path = (path or OFFLINE_MODEL_DIR).resolve()
        self.name = name
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors for ``texts``, computed in this process; the model is loaded on first use."""
        if not texts:
            return []
        import numpy as np

        model = load_model(self.path)
        vectors = model.encode(texts)
        if vectors.shape[1] != self.dim:
            raise EmbedderError(f"offline embedding model at {self.path} makes {vectors.shape[1]} dimensions, expected {self.dim}")
        # A text with nothing in it would still get the [CLS] [SEP] vector: it has nothing to find, so it is zero.
        blank = np.array([not t.strip() for t in texts])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=(norms > 0) & ~blank[:, None])
        return vectors.tolist()


# ---------------------------------------------------------------------------
# OpenAI-compatible endpoint.


def embeddings_url(base_url: str) -> str:
    """The embeddings URL of an OpenAI-compatible base URL (``.../v1``)."""
    base = base_url.rstrip("/")
    return base if base.endswith("/embeddings") else f"{base}/embeddings"


def _vector(item: Any) -> list[float]:
    """The embedding of one ``data`` item, checked to be a list of finite numbers."""
    values = item["embedding"]
    if not isinstance(values, list) or not values:
        raise TypeError("embedding is not a non-empty list")
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise TypeError("embedding holds a value that is not a finite number")
        out.append(float(value))
    return out


class OpenAIEmbedder:
    """Embeddings from ``POST {base_url}/embeddings`` of an OpenAI-compatible server, normalised here."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        dim: int | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        self.url = embeddings_url(base_url)
        self.api_key = api_key
        self.model = model
        self.name = f"openai/{model}"
        self.timeout_s = timeout_s
        self.transport = transport
        self.batch_size = max(1, batch_size)
        self._dim = dim

    @property
    def dim(self) -> int:
        """The configured dimension; when none was given, learned from the first answer (one probe call if needed)."""
        if self._dim is None:
            self.embed(["dimension probe"])  # a successful answer sets _dim, a failed one raises
        return int(self._dim or 0)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors for ``texts`` in order, in requests of at most ``batch_size`` inputs; EmbedderError on any failure."""
        if not texts:
            return []
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        out: list[list[float]] = []
        with http_client.using("embeddings", self.transport) as client:
            for start in range(0, len(texts), self.batch_size):
                chunk = list(texts[start : start + self.batch_size])
                out.extend(self._request(client, chunk, headers))
        return out

    def _request(self, client: httpx.Client, chunk: list[str], headers: dict[str, str]) -> list[list[float]]:
        """One request for ``chunk``; the answer's vectors checked, ordered and normalised."""
        try:
            response = client.post(self.url, json={"model": self.model, "input": chunk}, headers=headers, timeout=self.timeout_s)
            response.raise_for_status()
            data = response.json()["data"]
            if not isinstance(data, list):
                raise TypeError("data is not a list")
            vectors = [_vector(item) for item in data]
            # OpenAI answers in input order and numbers each item; follow the numbers when every item has one.
            indexes = [item.get("index") for item in data]
            if all(isinstance(i, int) and not isinstance(i, bool) for i in indexes) and sorted(indexes) == list(range(len(data))):
                vectors = [v for _, v in sorted(zip(indexes, vectors, strict=True), key=lambda pair: pair[0])]
        except httpx.HTTPStatusError as exc:
            detail = " ".join(exc.response.text.split())[:200]
            raise EmbedderError(f"embeddings endpoint {self.url} answered {exc.response.status_code}" + (f": {detail}" if detail else "")) from None
        except httpx.HTTPError as exc:
            raise EmbedderError(f"embeddings endpoint {self.url} unreachable: {type(exc).__name__}: {exc}") from None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise EmbedderError(f"embeddings endpoint {self.url} answered something that is not an embeddings list: {exc}") from None
        if len(vectors) != len(chunk):
            raise EmbedderError(f"embeddings endpoint {self.url} answered {len(vectors)} vectors for {len(chunk)} inputs")
        widths = {len(v) for v in vectors}
        expected = self._dim if self._dim is not None else next(iter(widths))
        if widths != {expected}:
            raise EmbedderError(
                f"embeddings endpoint {self.url} answered vectors of {sorted(widths)} dimensions, expected {expected} (BRAIN_EMBED_DIM must match the model)"
            )
        self._dim = expected
        return [_normalised(v) for v in vectors]


def embedder_for(settings: Settings) -> Embedder:
    """The configured embedder: the OpenAI-compatible endpoint when ``embed_base_url`` is set, else the offline model."""
    if settings.embed_base_url:
        # embed_dim is the endpoint's dimension: an answer of another width fails at once, naming the setting.
        return OpenAIEmbedder(settings.embed_base_url, settings.embed_api_key, settings.embed_model or "default", dim=settings.embed_dim)
    # The offline model is always 384-dimensional whatever embed_dim says; the index column follows the embedder's dim.
    return OfflineEmbedder()
