"""Text embedders for the index: one interface, an offline model shipped with the package, an OpenAI-compatible client.

``Embedder`` is what the index needs: a ``name`` (recorded beside vectors, so
vectors of different models are never compared), a ``dim`` and a batched
``embed`` returning L2-normalised vectors, so cosine distance (pgvector's
``<=>``) is meaningful. ``embedder_for(settings)`` picks one: the endpoint at
``BRAIN_EMBED_BASE_URL`` when set, otherwise ``OfflineEmbedder``, a model2vec
static model distilled from all-MiniLM-L6-v2 that lives in
``brain_kernel/offline_model/`` (see its README and
``services/brain-kernel/build_offline_embedder.py``). The offline model needs
no torch and no network: it is read from a local folder only, once per process.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from brain_kernel import http_client
from brain_kernel.errors import BrainError
from brain_kernel.settings import Settings

if TYPE_CHECKING:
    from model2vec import StaticModel

OFFLINE_MODEL_DIR = Path(__file__).resolve().parent.parent / "offline_model"  # brain_kernel/offline_model
OFFLINE_MODEL_NAME = "model2vec/all-MiniLM-L6-v2-256"
OFFLINE_DIM = 256
# The files model2vec reads; checked before loading because model2vec treats a missing folder as a hub id.
_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
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
# Offline: the committed model2vec model.

_models: dict[Path, StaticModel] = {}
_models_lock = threading.Lock()


def load_static_model(path: Path) -> StaticModel:
    """Load a model2vec model from a local folder, never the hub; EmbedderError if the folder is incomplete."""
    missing = [name for name in _MODEL_FILES if not (path / name).is_file()]
    if missing:
        raise EmbedderError(f"offline embedding model incomplete at {path}: missing {', '.join(missing)}")
    from model2vec import StaticModel  # imported here: numpy and tokenizers are only needed once a text is embedded

    try:
        # A local folder that exists is read as it is; force_download=False so nothing is fetched even if it did not.
        return StaticModel.from_pretrained(path, force_download=False)
    except Exception as exc:  # safetensors, tokenizers and json each raise their own kinds
        raise EmbedderError(f"offline embedding model at {path} cannot be loaded: {exc}") from None


def _cached_model(path: Path) -> StaticModel:
    """The process's one copy of the model at ``path`` (read-only, so shared by every thread)."""
    model = _models.get(path)
    if model is None:
        with _models_lock:  # one load even when the first requests arrive together
            model = _models.get(path)
            if model is None:
                model = _models[path] = load_static_model(path)
    return model


class OfflineEmbedder:
    """The model shipped in ``brain_kernel/offline_model/``: 256 dimensions, no network, no torch."""

    name = OFFLINE_MODEL_NAME
    dim = OFFLINE_DIM

    def __init__(self, path: Path | None = None) -> None:
        self.path = (path or OFFLINE_MODEL_DIR).resolve()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors for ``texts``, computed in this process; the model is loaded on first use."""
        if not texts:
            return []
        import numpy as np

        model = _cached_model(self.path)
        # In-process on purpose: model2vec would start worker processes past 10,000 texts, which a server must not.
        raw = model.encode(list(texts), normalize=False, use_multiprocessing=False)
        # The model stores float16; normalising in float32 keeps unit norms exact to ~1e-7.
        vectors = np.asarray(raw, dtype=np.float32).reshape(len(texts), -1)
        if vectors.shape[1] != self.dim:
            raise EmbedderError(f"offline embedding model at {self.path} makes {vectors.shape[1]} dimensions, expected {self.dim}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
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
    # The offline model is always 256-dimensional whatever embed_dim says; the index column follows the embedder's dim.
    return OfflineEmbedder()
