"""The studio as a server on the internet: nobody reads or writes what is not theirs, forms need their
token, CRS and participant text is escaped, inputs and request rates are limited, and a failing or
slow CRS gives a message on the page (and a record), never a 500."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("starlette", reason="the 'studio' extra is not installed")

from tests.studio_support import SCRIPT_REPLY, Studio, answer_all, hidden_fields, write_study  # noqa: E402
from usersimcrs.studio.store import read_state  # noqa: E402


@pytest.fixture
def studio(tmp_path):
    made: list[Studio] = []

    def make(**kwargs) -> Studio:
        kwargs.setdefault("tasks", {"chat": {"max_turns": 5}})
        made.append(Studio(write_study(tmp_path, **kwargs)))
        return made[-1]

    yield make
    for one in made:
        one.close()


def test_a_participant_cannot_read_or_write_another_s_assignment_nor_the_admin_pages(studio):
    s = studio()
    alice, bob = s.join(), s.join()
    alice_url = alice.next()
    bob_url = bob.next()
    bob_assignment = bob_url.rsplit("/", 1)[-1]
    # Alice's token with Bob's assignment: read and write refused
    assert alice.client.get(f"/p/{alice.token}/a/{bob_assignment}").status_code == 403
    stolen = hidden_fields(alice.page(alice_url).text)  # Alice's own valid form token
    write = alice.client.post(f"/p/{alice.token}/a/{bob_assignment}/message", data={**stolen, "text": "hi"})
    assert write.status_code == 403
    # Bob's form with Alice's token: Bob's CSRF token is not Alice's
    bob_form = hidden_fields(bob.page(bob_url).text)
    cross = alice.client.post(f"{alice_url}/message", data={**bob_form, "text": "hi"})
    assert cross.status_code == 403
    # a participant token is no admin token; a made-up token is nobody
    assert alice.client.get(f"/admin/{alice.token}/").status_code == 403
    assert alice.client.post(f"/admin/{alice.token}/export", data={"csrf": alice.csrf}).status_code == 403
    assert alice.client.get(f"/p/{'x' * 32}/").status_code == 403
    assert alice.client.get(f"/admin/{s.keys.admin}/").status_code == 200
    # nothing of it was stored
    assert all(not c.exchanges for c in read_state(s.study.folder).conversations.values())


def test_every_form_needs_its_token(studio):
    s = studio()
    p = s.join()
    url = p.next()
    form = hidden_fields(p.page(url).text)
    without = {k: v for k, v in form.items() if k != "csrf"}
    assert p.client.post(f"{url}/message", data={**without, "text": "hi"}).status_code == 403
    assert p.client.post(f"{url}/message", data={**form, "csrf": "forged", "text": "hi"}).status_code == 403
    assert p.client.post(f"{url}/end", data=without).status_code == 403
    assert p.client.post(p.home + "next", data={}).status_code == 403
    assert p.client.post(f"/admin/{s.keys.admin}/links", data={"count": "3"}).status_code == 403
    assert p.client.post(f"/join/{s.keys.open_key}", data={"submission_id": "abcdefgh12"}).status_code == 403
    assert len(s.service.state.participants) == 1
    assert p.client.post(f"{url}/message", data={**form, "text": "hi"}).status_code == 303  # with it: stored


def test_a_crs_reply_with_markup_is_shown_as_text(studio):
    s = studio(crs=[{"name": "evil", "type": "python", "target": "tests.studio_support:script_crs"}])
    p = s.join()
    url = p.next()
    p.act(url, "message", {"text": "<script>alert('me')</script> & more"})
    html = p.page(url).text
    assert "<script>document.title" not in html and "<img src=x" not in html
    assert "&lt;script&gt;document.title=&#39;pwned&#39;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # an item title is text too
    assert "&lt;script&gt;alert(&#39;me&#39;)&lt;/script&gt; &amp; more" in html
    assert "script-src 'self'" in p.page(url).headers["content-security-policy"]
    stored = next(iter(read_state(s.study.folder).conversations.values())).exchanges[0]
    assert stored.reply_text == SCRIPT_REPLY  # stored as the CRS said it


def test_inputs_and_request_rates_are_limited(studio):
    s = studio(limits={"message_chars": 20, "requests_per_minute": 8, "body_bytes": 2048})
    p = s.join()
    url = p.next()
    long = p.act(url, "message", {"text": "x" * 21})
    assert long.status_code == 400 and "limited to 20 characters" in long.text
    assert 'maxlength="20"' in long.text
    form = hidden_fields(p.page(url).text)
    huge = p.client.post(f"{url}/message", data={**form, "text": "y" * 5000})
    assert huge.status_code == 413
    statuses = [p.client.get(url).status_code for _ in range(8)]
    assert statuses[-1] == 429 and "Too many requests" in p.client.get(url).text
    assert not next(iter(s.service.state.conversations.values())).exchanges


def test_unknown_tokens_from_one_address_are_slowed_down(studio):
    s = studio(limits={"bad_tokens_per_minute": 3})
    statuses = [s.client.get(f"/p/guess{i:027d}/").status_code for i in range(5)]
    assert statuses[:3] == [403, 403, 403] and statuses[3:] == [429, 429]


def test_a_failing_crs_shows_a_message_and_is_recorded(studio):
    s = studio(crs=[{"name": "broken", "type": "python", "target": "tests.studio_support:failing_crs"}])
    p = s.join()
    url = p.next()
    response = p.act(url, "message", {"text": "hello"})
    assert response.status_code == 303
    page = p.page(url)
    assert page.status_code == 200 and "did not answer" in page.text and "model server said 500" in page.text
    assert "hello" in page.text  # the message is offered again
    exchange = next(iter(read_state(s.study.folder).conversations.values())).exchanges[0]
    assert exchange.error is not None and "model server said 500" in exchange.error and exchange.reply_text is None
    # the participant can end it; the export marks the conversation failed, with its reason
    assert p.act(url, "end", {}).status_code == 400  # no answered turn yet (min_turns 1)


def test_a_slow_crs_times_out_with_a_message(studio):
    s = studio(
        crs=[{"name": "slow", "type": "python", "target": "tests.studio_support:slow_crs"}],
        limits={"crs_timeout_s": 0.5},
        tasks={"chat": {"min_turns": 0}},
    )
    p = s.join()
    url = p.next()
    assert p.act(url, "message", {"text": "hello"}).status_code == 303
    page = p.page(url).text
    assert "did not answer (timeout: no answer within 0.5 s)" in page
    assert p.act(url, "end", {}).status_code == 303
    html = p.page(url).text
    label = {**hidden_fields(html), **answer_all(html, random.Random(0)), "satisfaction": "frustrated"}
    assert p.client.post(f"{url}/label", data=label).status_code == 303

    from usersimcrs.studio.export import export_study

    summary = export_study(s.study, s.study.folder / "export")
    assert summary.conversations == 1 and summary.conversations_failed == 1


def test_the_server_binds_loopback_unless_told(tmp_path):
    from usersimcrs.studio.config import load_study

    study = load_study(write_study(tmp_path, tasks={"chat": {}}))
    assert study.config.host == "127.0.0.1"
