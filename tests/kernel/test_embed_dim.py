"""The embedding dimension an OpenAI-compatible endpoint is expected to answer: EMBED_DIM, else the known model's."""

from __future__ import annotations

import pytest

from brain_kernel.search.embedders import embedder_for
from brain_kernel.settings import Settings, known_embed_dim

ENDPOINT = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("model", "dim"),
    [
        ("text-embedding-3-small", 1536),
        ("text-embedding-3-large", 3072),
        ("text-embedding-ada-002", 1536),
        ("openai/Text-Embedding-3-Large", 3072),  # after the last "/", any case
        ("prod-text-embedding-3-small-eu", 1536),  # a deployment named after its model
        ("nomic-embed-text", None),
        ("", None),
        (None, None),
    ],
)
def test_known_models_have_their_dimension(model: str | None, dim: int | None) -> None:
    assert known_embed_dim(model) == dim


def test_upstreams_variables_without_embed_dim_take_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BRAIN_EMBED_DIM", "EMBED_DIM", "BRAIN_EMBED_BASE_URL", "BRAIN_EMBED_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LLM_API_BASE", ENDPOINT)
    monkeypatch.setenv("LLM_API_KEY", "sk-x")
    monkeypatch.setenv("LLM_EMBED_MODEL", "text-embedding-3-small")
    settings = Settings()
    assert settings.embed_dim == 1536 and embedder_for(settings).dim == 1536
    monkeypatch.setenv("EMBED_DIM", "512")  # a shortened text-embedding-3 answer: the setting wins
    assert Settings().embed_dim == 512


def test_a_derived_dimension_follows_the_model_and_is_not_pinned() -> None:
    small = Settings.explicit(embed_base_url=ENDPOINT, embed_model="text-embedding-3-small")
    assert small.embed_dim == 1536
    assert small.with_overrides(embed_model="text-embedding-3-large").embed_dim == 3072
    assert "BRAIN_EMBED_DIM" not in small.to_environ()  # a child derives it again from the model it is given
    pinned = Settings.explicit(embed_base_url=ENDPOINT, embed_model="text-embedding-3-small", embed_dim=256)
    assert pinned.with_overrides(embed_model="text-embedding-3-large").embed_dim == 256
    assert pinned.to_environ()["BRAIN_EMBED_DIM"] == "256"


def test_an_unknown_model_or_no_endpoint_leaves_the_dimension_to_the_embedder() -> None:
    assert Settings.explicit(embed_base_url=ENDPOINT, embed_model="nomic-embed-text").embed_dim is None  # learned from its first answer
    assert Settings.explicit(embed_model="text-embedding-3-small").embed_dim is None  # no endpoint: the offline model's own
