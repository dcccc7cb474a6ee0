"""One test per anchor defect listed in METHODS §2; each fails on the anchor's behaviour."""

from __future__ import annotations

import asyncio

from tests.agenda_support import act, catalogue, comedy_fan, policy_for, ref, run_conversation, simulator
from usersimcrs.core.dialogue import AGENT, Dialogue, Utterance
from usersimcrs.core.profile import Ratings, SeenItem
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.agenda.policy.agenda import Agenda
from usersimcrs.simulators.base import Stop

ITEMS = catalogue()


def test_user_acts_are_accumulated_not_overwritten():
    policy = policy_for(comedy_fan())
    opening = policy.opening()
    first = policy.decide([act("INQUIRE.ELICIT", GENRE=None)], [])
    second = policy.decide([act("REVEAL")], [ref(ITEMS, "2")])
    assert policy.state.user_acts == [opening, first.acts, second.acts]
    assert [a.intent for a in policy.state.all_user_acts()][:2] == ["DISCLOSE.NON-DISCLOSE", "DISCLOSE"]


def test_multi_act_push_keeps_order():
    agenda = Agenda([act("COMPLETE")])
    agenda.push([act("NOTE.DISLIKE"), act("DISCLOSE", GENRE="Comedy"), act("INQUIRE")])
    assert [agenda.pop().intent for _ in range(4)] == ["NOTE.DISLIKE", "DISCLOSE", "INQUIRE", "COMPLETE"]


def test_agenda_cleaning_never_deletes_initial_requests():
    policy = policy_for(comedy_fan(requests=["director", "year"]))
    policy.agenda.clean({"GENRE", "DIRECTOR", "YEAR"}, "DISCLOSE")
    assert [str(a) for a in policy.agenda.acts()] == [
        "INQUIRE.ITEMINFO(DIRECTOR)",
        "INQUIRE.ITEMINFO(YEAR)",
        "COMPLETE()",
    ]
    # and the user still asks them once an item is accepted
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "4")])
    assert str(decision.acts[1]) == "INQUIRE.ITEMINFO(DIRECTOR)"


def test_fulfilled_requests_are_marked():
    policy = policy_for(comedy_fan(requests=["director"]))
    policy.decide([act("REVEAL")], [ref(ITEMS, "4")])
    assert policy.state.pending_requests() == ["DIRECTOR"]
    policy.decide([], [], "Greg Mottola directed it.")
    assert policy.state.pending_requests() == []
    assert policy.state.requests["DIRECTOR"].fulfilled


def test_ratings_come_from_the_simulated_users_own_profile_not_a_fixed_user_id():
    # the run's ratings hold a user "1" who loves Step Brothers; neither simulated user is "1"
    ratings = Ratings()
    ratings.add("1", "6", 5.0)
    context = RunContext(items=ITEMS, ratings=ratings)
    lover = comedy_fan("u-lover", targets=[])
    lover.seen_items.append(SeenItem(item=ref(ITEMS, "6"), rating=5.0))
    hater = comedy_fan("u-hater", targets=[])
    hater.preferences.items["6"] = -0.9
    verdicts = {}
    for profile in (lover, hater):
        sim = simulator(profile, context=context)
        verdicts[profile.user_id] = sim.policy.judge.judge(ref(ITEMS, "6")).verdict
    assert verdicts == {"u-lover": "seen", "u-hater": "dislike"}


def test_no_state_is_shared_between_conversations():
    context = RunContext(items=ITEMS)
    first = simulator(comedy_fan("a"), seed=1, context=context)
    second = simulator(comedy_fan("b"), seed=1, context=context)
    run_conversation(first)
    assert first.policy.state.turn > 0 and first.policy.state.accepted is not None
    assert second.policy.state.turn == 0
    assert second.policy.state.user_acts == [] and second.policy.state.accepted is None
    assert [str(a) for a in second.policy.agenda.acts()][0] == 'DISCLOSE(GENRE="Comedy")'
    assert first.policy.state is not second.policy.state and first.policy.agenda is not second.policy.agenda
    # and a fresh conversation with the second simulator behaves exactly like the first one did
    assert [u.text for u in run_conversation(second).utterances] == [
        u.text for u in run_conversation(simulator(comedy_fan("a"), seed=1, context=context)).utterances
    ]


def test_end_of_agenda_is_a_stop_reason_not_an_exception():
    agenda = Agenda([])
    assert agenda.pop() is None and agenda.peek() is None
    sim = simulator(comedy_fan(requests=[]))
    asyncio.run(sim.start())
    dialogue = Dialogue(conversation_id="c")
    for _ in range(30):  # far more turns than the agenda holds: the CRS keeps chatting
        dialogue.add(Utterance(participant=AGENT, text="Tell me more."))
        out = asyncio.run(sim.respond(dialogue))
        if isinstance(out, Stop):
            assert out.reason in {"agenda_done", "target_accepted", "user_gave_up", "crs_ended"}
            break
        dialogue.add(out)
    else:
        raise AssertionError("the simulator never stopped")


def test_acceptance_follows_the_target_not_a_coin_flip():
    accepted = set()
    for seed in range(20):
        policy = policy_for(comedy_fan(requests=[]), seed=seed)
        decision = policy.decide([act("REVEAL")], [ref(ITEMS, "2"), ref(ITEMS, "4")])
        accepted.add(str(decision.acts[0]))
        assert decision.stop == "target_accepted"
    assert accepted == {'NOTE.ACCEPT(TITLE="Superbad (2007)")'}
    for seed in range(20):
        profile = comedy_fan(requests=[])
        profile.preferences.items["2"] = -0.7
        policy = policy_for(profile, seed=seed)
        assert policy.decide([act("REVEAL")], [ref(ITEMS, "2")]).acts[0].intent == "NOTE.DISLIKE"
