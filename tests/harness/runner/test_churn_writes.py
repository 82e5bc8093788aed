"""A churn write's outcome as the ground truth needs it: accepted only if the API server
applied it. A DELETE answered 404 was never admitted (no webhook call, no event), so it is
a failed write — counting it as accepted once made the truth demand an event for a delete
of an object whose create had been refused (a flaky ``process-restarts``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from harness.churn.model import KINDS, Mutation, WriteFailed, WriteFailure
from harness.churn.runner import run_churn
from harness.kube import NotFound
from harness.runner.session import LiveSession


class _Api:
    """Answers every call with ``status``; records (method, path)."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.calls: list[tuple[str, str]] = []

    async def call_api(self, path: str, method: str, **_: Any) -> Any:
        self.calls.append((method, path))
        if self.status >= 400:
            raise ApiException(status=self.status, reason="NotFound")
        return {"kind": "Status", "status": "Success"}


def _session(api: _Api) -> LiveSession:
    env = SimpleNamespace(kcp_api=None, skr_apis={"skr-a": api})
    return LiveSession(cast(Any, env))


def _delete() -> Mutation:
    return Mutation(
        id=24,
        at=0.0,
        cluster="skr-a",
        kind=KINDS["kymas"],
        namespace="kyma-system",
        name="churn4-begin-0",
        operation="delete",
        body=None,
        labels_before={"operator.kyma-project.io/watched-by": "kyma"},
        labels_after={},
        has_spec=True,
    )


async def test_a_delete_answered_404_is_a_failed_write() -> None:
    api = _Api(404)
    with pytest.raises(WriteFailed) as failed:
        await _session(api).write(_delete())
    assert isinstance(failed.value.__cause__, NotFound)
    assert failed.value.failure is WriteFailure.REFUSED
    assert api.calls == [
        (
            "DELETE",
            "/apis/operator.kyma-project.io/v1beta2/namespaces/kyma-system/kymas/churn4-begin-0",
        )
    ]
    run = await run_churn([_delete()], _session(api).write)
    assert [e.ok for e in run.executed] == [False]
    assert run.executed[0].error.startswith("NotFound: DELETE")


async def test_an_applied_delete_is_accepted() -> None:
    run = await run_churn([_delete()], _session(_Api(200)).write)
    assert [e.ok for e in run.executed] == [True]
