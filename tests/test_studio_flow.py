"""The studio in-process (Starlette's test client over the real app, store and connectors): participants
complete every task, allocation is balanced, answers are stored once, and the export is read by
`meta-eval` and `fidelity` as it is."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("starlette", reason="the 'studio' extra is not installed")

from tests.studio_support import Studio, answer_all, full_tasks, hidden_fields, write_study  # noqa: E402
from usersimcrs.studio.export import export_study  # noqa: E402
from usersimcrs.studio.store import LOG, read_state  # noqa: E402


@pytest.fixture
def studio(tmp_path):
    made: list[Studio] = []

    def make(**kwargs: Any) -> Studio:
        if "tasks" not in kwargs:
            kwargs["tasks"] = full_tasks(tmp_path)
        made.append(Studio(write_study(tmp_path, **kwargs)))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.mark.slow
def test_participants_complete_every_task_and_the_export_is_read_by_meta_eval_and_fidelity(studio, tmp_path):
    from usersimcrs.analysis.agreement import krippendorff_alpha
    from usersimcrs.pipeline.fidelity import fidelity
    from usersimcrs.pipeline.meta_eval import meta_eval

    tasks = full_tasks(tmp_path, n_sim=2)  # 4 conversations, 2 per batch, k=2: each is rated twice
    tasks["annotate"]["exclude_failed_gold"] = False  # random answers fail the gold check; keep them all here
    s = studio(tasks=tasks, completion={"code": "DONE-123"})
    rng = random.Random(0)
    kinds = Counter()
    for _ in range(4):
        participant = s.join()
        kinds.update(participant.complete(rng, messages=2))
        home = participant.page(participant.home)
        assert "DONE-123" in home.text  # the completion code at the end
    # chat (2 messages) + battle (2 conversations) pages, a label after each, a vote, 2 annotations + gold, 4 guesses
    assert kinds["label"] == 4 * 3 and kinds["vote"] == 4 and kinds["annotate"] == 4 * 3 and kinds["turing"] == 4 * 4
    summary = export_study(s.study, tmp_path / "export")
    assert summary.conversations == 12 and summary.labelled == 12 and summary.votes == 4
    assert summary.gold_checks == 4

    # meta-eval reads the export as it is: labels as references, votes ranked with Bradley-Terry
    result = meta_eval(tmp_path / "export", ["turns"], resamples=20)
    assert result.n_labelled == 12 and result.human_ranking is not None
    assert {s.system for s in result.human_ranking.systems} == {"pop", "bm25"}
    # ... and the annotation references, per dialogue aspect
    annotated = meta_eval(tmp_path / "export" / "annotations", ["turns"], reference_key="understanding", resamples=20)
    assert annotated.n_labelled == summary.annotated_conversations > 0
    # fidelity: the simulated source against the people's conversations of the export
    fid = fidelity(s.study.input_path(s.study.config.tasks.turing.simulated), tmp_path / "export", resamples=20)
    assert fid.n_human == 12

    # the agreement of the export is Krippendorff's alpha over the annotators' ratings
    table = json.loads((tmp_path / "export" / "study_summary.json").read_text())["agreement"]
    state = read_state(s.study.folder)
    by = {}
    for record in state.annotations.values():
        if record.gold is None:
            by.setdefault(record.participant_id, {})[record.conversation_id] = record.ratings["understanding"]
    units = sorted({c for ratings in by.values() for c in ratings})
    matrix = [[ratings.get(u) for u in units] for ratings in by.values()]
    row = next(r for r in table if r["name"] == "understanding")
    assert row["raters"] == len(by)
    assert row["units_2plus"] == sum(1 for u in units if sum(u in ratings for ratings in by.values()) >= 2) > 0
    assert row["krippendorff_alpha"] == pytest.approx(krippendorff_alpha(matrix, "ordinal"), abs=1e-3)
    # turn-level references sit on the system utterances they rate
    from usersimcrs.core.run_folder import load_run

    annotated_dialogue = load_run(tmp_path / "export" / "annotations").dialogues[0]
    turn_refs = [u.metadata.get("reference") for u in annotated_dialogue.utterances if u.participant == "AGENT"]
    assert all(set(ref) == {"relevance", "interestingness"} for ref in turn_refs)
    assert (tmp_path / "export" / "turing.csv").read_text().count("discriminator") >= 1


def test_allocation_takes_the_least_used_crs_pair_and_conversation(studio, tmp_path):
    tasks = full_tasks(tmp_path)
    tasks["annotate"]["gold"] = []
    s = studio(tasks=tasks, crs=[{"name": n, "type": "popularity"} for n in ("a", "b", "c")])
    rng = random.Random(1)
    for _ in range(6):
        s.join().complete(rng)
    state = s.service.state
    chats = Counter(a.crs[0] for a in state.assignments.values() if a.task == "chat")
    pairs = Counter(tuple(sorted(a.crs)) for a in state.assignments.values() if a.task == "battle")
    assert chats == {"a": 2, "b": 2, "c": 2}
    assert pairs == {("a", "b"): 2, ("a", "c"): 2, ("b", "c"): 2}
    # annotate: 12 conversations, k=2, batch 2: 6 annotators rate 12 different ones once each (least-annotated first)
    rated = Counter(r.conversation_id for r in state.annotations.values())
    assert len(rated) == 12 and set(rated.values()) == {1}
    # turing: half human, half simulated in every batch
    for assignment in state.assignments.values():
        if assignment.task == "turing":
            assert Counter(s.truth for s in assignment.shown) == {"human": 2, "simulated": 2}


def test_annotation_stops_at_k_and_the_gold_conversation_is_checked(studio, tmp_path):
    tasks = full_tasks(tmp_path)
    tasks = {"annotate": {**tasks["annotate"], "k": 1, "batch": 8}}
    s = studio(tasks=tasks)
    rng = random.Random(2)
    first, second, third = s.join(), s.join(), s.join()
    first.complete(rng, score="0")  # the gold answer is task_completion 0: passes
    second.complete(rng, score="2")  # rates everything 2: fails the gold check
    state = s.service.state
    gold = {r.participant_id: r.gold_passed for r in state.annotations.values() if r.gold is not None}
    assert gold == {first.id: True, second.id: False}
    assert third.next() is None  # all 12 conversations have their k=1 annotation: nothing left to give
    summary = export_study(s.study, tmp_path / "export")
    assert summary.excluded_annotators == [second.id] and summary.annotations_excluded == 4
    assert summary.annotations == 8


def test_a_double_click_or_a_retry_stores_one_record(studio, tmp_path):
    s = studio(tasks={"chat": {"max_turns": 4}})
    p = s.join()
    url = p.next()
    page = p.page(url)
    form = {**hidden_fields(page.text), "text": "a comedy please"}
    first = p.client.post(f"{url}/message", data=form)
    again = p.client.post(f"{url}/message", data=form)  # the same submission ID, as a retry sends it
    assert first.status_code == again.status_code == 303
    conversation = next(iter(s.service.state.conversations.values()))
    assert len(conversation.exchanges) == 1
    # a stale form (an old page sent with a new submission ID) is refused, not stored
    stale = p.client.post(f"{url}/message", data={**form, "submission_id": "another-submission-1"})
    assert stale.status_code == 400 and "not sent" in stale.text
    p.act(url, "end", {})
    html = p.page(url).text
    label = {**hidden_fields(html), **answer_all(html, random.Random(0)), "satisfaction": "satisfied"}
    assert p.client.post(f"{url}/label", data=label).status_code == 303
    assert p.client.post(f"{url}/label", data={**label, "satisfaction": "frustrated"}).status_code in (303, 400)
    lines = (s.study.folder / LOG).read_text().splitlines()
    ids = Counter(json.loads(line)["record_id"] for line in lines)
    assert max(ids.values()) == 1
    assert sum(1 for line in lines if '"kind":"label"' in line) == 1
    assert read_state(s.study.folder).conversations[conversation.conversation_id].label.satisfaction == "satisfied"


def test_a_platform_id_joins_once_and_personal_links_resume(studio, tmp_path):
    s = studio(tasks={"chat": {}}, participants={"links": 2})
    a = s.join(external="PROLIFIC123")
    b = s.join(external="PROLIFIC123")
    assert a.id == b.id and len(s.service.state.participants) == 3  # 2 issued links + 1 from the open link
    url = a.next()
    assert a.next() == url  # the same unfinished assignment, not a new one


def test_chat_shows_items_and_the_crs_opens_when_configured(studio, tmp_path):
    s = studio(tasks={"chat": {"opening": "crs", "min_turns": 1}})
    p = s.join()
    url = p.next()
    page = p.page(url).text
    assert "Start the conversation" in page
    assert p.act(url, "message", {}).status_code == 303
    greeted = p.page(url).text
    assert "Hi! I can help you find a movie." in greeted
    ended = p.act(url, "end", {})
    assert ended.status_code == 400 and "at least 1 turn" in ended.text  # min_turns counts the user's turns
    p.act(url, "message", {"text": "I want a comedy"})
    p.act(url, "message", {"text": "something else please"})
    html = p.page(url).text
    assert '<ol class="items"' in html and html.count('<li class="turn system">') == 3


def test_a_battle_is_held_one_conversation_after_the_other(studio, tmp_path):
    s = studio(tasks={"battle": {"max_turns": 2}})
    p = s.join()
    url = p.next()
    form = hidden_fields(p.page(url).text)
    first, second = s.service.state.assignments[url.rsplit("/", 1)[-1]].conversation_ids
    assert form["conversation_id"] == first
    early = p.client.post(f"{url}/message", data={**form, "conversation_id": second, "text": "hi B"})
    assert early.status_code == 400 and "out of date" in early.text
    assert not s.service.state.conversations[second].exchanges
    assert p.act(url, "message", {"text": "hi A"}).status_code == 303
    assert s.service.state.conversations[first].user_turns == 1
