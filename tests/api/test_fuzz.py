"""A bounded schemathesis run against the app's OpenAPI schema: no 5xx, no answer the schema does not allow.

Every operation gets a few generated requests (derandomized, so a failure
replays), through the real app over ASGI on the run's shared database; the
whole run is bounded in examples and time (about 10 s on two cores).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from brain_api.app import create_app
from brain_kernel.settings import Settings
from brain_kernel.vault_store import Vault
from tests.support.harness import make_settings

EXAMPLES = 6


@pytest.fixture
def api_schema(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Iterator[object]:
    s: Settings = make_settings(tmp_path_factory.mktemp("fuzz"), database_url)
    Vault(s.vault).scaffold()
    app = create_app(s)
    yield schemathesis.openapi.from_asgi("/openapi.json", app)


def test_no_request_breaks_the_api(api_schema: schemathesis.BaseSchema) -> None:
    failures: list[str] = []
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])

        try:
            run()
        except Exception as exc:  # every operation runs; the report names each that failed
            parts = [str(e)[:800] for e in getattr(exc, "exceptions", [exc])]
            failures.append(f"{operation.label}: " + "\n".join(parts))
    assert not failures, "\n\n".join(failures)
