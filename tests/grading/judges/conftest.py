from __future__ import annotations

import pytest

from tests.fakes.judge_provider import FakeJudgeProvider


@pytest.fixture
def fake():
    with FakeJudgeProvider() as provider:
        yield provider
