"""The ladder's reference CRSs: what each recommends, from which profile and seed, and that the engine hands them over."""

from __future__ import annotations

import asyncio

import pytest

from crs_connectors.base import ProfileOracle, build_connector, connectors
from crs_connectors.baselines.ladder import preferred_order
from tests.agenda_support import catalogue, comedy_fan
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance
from usersimcrs.core.profile import InformationNeed, UserProfile
from usersimcrs.runtime.context import RunContext

RUNGS = ("oracle", "oracle_mix30", "oracle_mix70", "random", "broken")


def talk(rung: str, profile: UserProfile | None, seed: int, messages: list[str], **options):
    """The rung's replies to `messages`, as the engine drives it (profile and seed handed over first)."""
    connector = build_connector({"type": rung, **options}, RunContext(items=catalogue()), source="test")
    if profile is not None:
        assert isinstance(connector, ProfileOracle)
        connector.meet_user(profile, seed)
    dialogue, replies = Dialogue(conversation_id="c"), []
    for text in messages:
        user = Utterance(participant=USER, text=text)
        reply = asyncio.run(connector.reply(dialogue, user))
        dialogue.add(user)
        dialogue.add(Utterance(participant=AGENT, text=reply.text, items=reply.items))
        replies.append(reply)
    return replies


def test_every_rung_is_a_registered_connector_that_takes_the_profile():
    for rung in RUNGS:
        assert rung in connectors.names()
        assert isinstance(build_connector({"type": rung}, RunContext(items=catalogue())), ProfileOracle)


def test_the_oracle_recommends_the_held_out_liked_items_first_and_names_the_first():
    profile = comedy_fan(targets=["6", "4"])
    reply = talk("oracle", profile, 1, ["Hi! I'm looking for a comedy."], k=3)[0]
    ids = [ref.id for ref in reply.items]
    assert ids[:2] == ["6", "4"]  # the targets, in the profile's order
    assert ids[2] not in {"3"}  # then preferred unseen items: never the seen Airplane!
    assert "Step Brothers (2008)" in reply.text


def test_without_targets_the_oracle_ranks_unseen_items_by_the_profiles_preferences():
    profile = comedy_fan(targets=[])
    order = preferred_order(profile, catalogue())
    assert "3" not in order  # seen
    assert set(order[:3]) == {"4", "6", "2"}  # the comedies (the need's constraint) first
    assert order.index("4") < order.index("2")  # Superbad (comedy 0.9) before Toy Story (comedy + animation -0.5)


def test_the_mixed_rungs_replace_the_share_of_positions_they_name_with_the_conversation_seed():
    profile = UserProfile(
        user_id="u",
        need=InformationNeed(targets=[catalogue().get(i).ref() for i in ("1", "2", "3", "4", "5", "6", "7")]),
    )
    targets = {"1", "2", "3", "4", "5", "6", "7"}
    for share, rung in ((0.3, "oracle_mix30"), (0.7, "oracle_mix70")):
        picks = [talk(rung, profile, seed, ["hi"], k=1)[0].items[0].id for seed in range(400)]
        assert picks == [talk(rung, profile, seed, ["hi"], k=1)[0].items[0].id for seed in range(400)]
        # the first target ("1") unless the position went to a random draw (which hits "1" 1/7 of the time)
        not_first = sum(p != "1" for p in picks) / len(picks)
        assert not_first == pytest.approx(share * 6 / 7, abs=0.07)
        assert all(p in targets for p in picks)  # the tiny catalogue holds only targets


def test_the_thirty_and_seventy_percent_rungs_draw_the_same_numbers():
    """Common random numbers: a position random at 30% is random at 70% too, with the same item."""
    from usersimcrs.core.items import Item, ItemCollection

    many = ItemCollection(
        Item(id=str(i), title=f"Film {i} (2000)", attributes={"genres": ["Drama"]}) for i in range(500)
    )
    profile = UserProfile(user_id="u", need=InformationNeed(targets=[many.get(i).ref() for i in ("1", "2", "3")]))
    context = RunContext(items=many)
    coupled = 0
    for seed in range(60):
        lists = {}
        for rung in ("oracle_mix30", "oracle_mix70"):
            connector = build_connector({"type": rung, "k": 3}, context, source="test")
            connector.meet_user(profile, seed)
            reply = asyncio.run(connector.reply(Dialogue(conversation_id="c"), Utterance(participant=USER, text="hi")))
            lists[rung] = [r.id for r in reply.items]
        for position, item in enumerate(lists["oracle_mix30"]):
            if item not in {"1", "2", "3"}:  # random at 30%
                assert lists["oracle_mix70"][position] == item
                coupled += 1
    assert coupled > 20


def test_random_needs_no_profile_and_the_oracle_refuses_to_guess_without_one():
    assert len(talk("random", None, 0, ["hi"])[0].items) == 5
    with pytest.raises(RuntimeError, match="needs the conversation's profile"):
        talk("oracle", None, 0, ["hi"])


def test_broken_repeats_its_first_reply_whatever_the_user_says():
    replies = talk("broken", comedy_fan(), 3, ["hi", "no, something else", "bye"])
    assert replies[0].text.startswith("How about") and len(replies[0].items) == 1
    assert [r.text for r in replies] == [replies[0].text] * 3
    assert [r.items for r in replies] == [replies[0].items] * 3


def test_the_engine_hands_the_profile_and_seed_to_a_rung_in_an_ordinary_run(tmp_path):
    """`crs: {type: oracle}` in any config: the first list holds the conversation's primary target."""
    from usersimcrs.pipeline.api import simulate

    run = simulate(
        crs="oracle",
        simulator="agenda",
        items="configs/data/tiny_movies.csv",
        ratings="configs/data/tiny_ratings.csv",
        conversations=6,
        output=tmp_path / "run",
    )
    for dialogue in run.dialogues:
        first = next(u for u in dialogue.utterances if u.participant == AGENT)
        assert first.items[0].id == dialogue.profile.metadata["primary_target"]
        assert dialogue.status == "ok"
