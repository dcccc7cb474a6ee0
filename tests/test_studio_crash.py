"""A studio server killed with SIGKILL mid-study loses nothing it acknowledged, stores nothing twice,
and every participant resumes where they were (a few seconds of the load test's kill/restart)."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the 'studio' extra is not installed")
pytest.importorskip("httpx")

from tests.studio_support import full_tasks, write_study  # noqa: E402
from usersimcrs.studio.loadtest import run_load_test  # noqa: E402
from usersimcrs.studio.store import read_state  # noqa: E402


@pytest.mark.slow
def test_sigkill_mid_study_loses_no_acknowledged_record(tmp_path):
    tasks = full_tasks(tmp_path)
    path = write_study(tmp_path, tasks=tasks)
    result = run_load_test(
        str(path), participants=6, duration_s=5.0, kill_at_s=2.0, think_s=0.1, output=str(tmp_path / "study")
    )
    assert result.acknowledged_before_kill > 0 and result.acknowledged > result.acknowledged_before_kill
    assert result.lost == 0 and result.lost_before_kill == 0, result.lost_examples
    assert result.duplicated == 0 and result.double_submissions > 0
    assert result.restart_s is not None
    # every participant resumes: their assignments and answers after the restart continue the same plan
    state = read_state(tmp_path / "study")
    for participant_id, plan in state.plans.items():
        assert sorted(plan) == list(range(len(plan))), participant_id  # steps in order, none twice
    for conversation in state.conversations.values():
        turns = [e.turn for e in conversation.exchanges]
        assert turns == list(range(len(turns)))  # no exchange lost in the middle, none twice
