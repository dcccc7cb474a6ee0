"""The agenda policy's four cases (003 §4.2), multi-act order, request fulfilment and stop rules."""

from __future__ import annotations

from tests.agenda_support import act, catalogue, comedy_fan, policy_for, ref
from usersimcrs.core.dialogue import ItemRef
from usersimcrs.core.profile import InformationNeed, Preferences, UserProfile

ITEMS = catalogue()


def strs(acts):
    return [str(a) for a in acts]


def test_agenda_starts_with_disclosures_then_inquiries_then_stop():
    profile = comedy_fan(requests=["director", "year"])
    profile.need.constraints["director"] = "Greg Mottola"
    policy = policy_for(profile)
    assert strs(policy.agenda.acts()) == [
        'DISCLOSE(GENRE="Comedy")',
        'DISCLOSE(DIRECTOR="Greg Mottola")',
        "INQUIRE.ITEMINFO(DIRECTOR)",
        "INQUIRE.ITEMINFO(YEAR)",
        "COMPLETE()",
    ]


# ---- case 1: elicitation ----------------------------------------------------------------


def test_elicitation_discloses_the_need_value_and_removes_it_from_the_agenda():
    policy = policy_for(comedy_fan())
    decision = policy.decide([act("INQUIRE.ELICIT", GENRE=None)], [])
    assert strs(decision.acts) == ['DISCLOSE(GENRE="Comedy")']
    assert decision.cases == ["elicitation"]
    assert not policy.agenda.pending("DISCLOSE")


def test_elicitation_falls_back_to_preferences_then_dont_know():
    profile = comedy_fan()
    profile.need.constraints.clear()
    profile.preferences.slots["director"] = {"Adam McKay": 0.8, "James Wan": -0.9}
    policy = policy_for(profile)
    assert strs(policy.decide([act("INQUIRE.ELICIT", DIRECTOR=None)], []).acts) == ['DISCLOSE(DIRECTOR="Adam McKay")']
    assert strs(policy.decide([act("INQUIRE.ELICIT", YEAR=None)], []).acts) == ["DONT-KNOW(YEAR)"]


def test_elicitation_of_a_title_names_the_best_rated_seen_item():
    policy = policy_for(comedy_fan())
    decision = policy.decide([act("INQUIRE.ELICIT", TITLE=None)], [])
    assert strs(decision.acts) == ['DISCLOSE(TITLE="Airplane! (1980)")']


def test_open_elicitation_pops_the_next_disclosure():
    policy = policy_for(comedy_fan())
    assert strs(policy.decide([act("INQUIRE.ELICIT")], []).acts) == ['DISCLOSE(GENRE="Comedy")']


# ---- case 2: recommendation -------------------------------------------------------------


def test_target_is_accepted_and_ends_the_conversation_when_no_request_is_pending():
    policy = policy_for(comedy_fan(requests=[]))
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "4")])
    assert strs(decision.acts) == ['NOTE.ACCEPT(TITLE="Superbad (2007)")', "COMPLETE()"]
    assert decision.stop == "target_accepted"


def test_target_anywhere_in_the_shown_list_is_accepted():
    policy = policy_for(comedy_fan(requests=[]))
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "2"), ref(ITEMS, "5"), ref(ITEMS, "4")])
    assert decision.acts[0].slots() == {"TITLE": "Superbad (2007)"}
    assert decision.stop == "target_accepted"


def test_seen_item_is_reported_as_consumed():
    policy = policy_for(comedy_fan())
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "3")])
    assert decision.acts[0].intent == "NOTE.YES"
    assert decision.stop is None


def test_disliked_item_is_rejected_for_every_seed():
    for seed in range(25):
        profile = comedy_fan()
        profile.preferences.items["6"] = -0.8  # a comedy this user is known to dislike
        policy = policy_for(profile, seed=seed)
        decision = policy.decide([act("REVEAL")], [ref(ITEMS, "6")])
        assert decision.acts[0].intent == "NOTE.DISLIKE"
        assert policy.state.accepted is None


def test_item_violating_a_constraint_is_rejected_even_if_otherwise_liked():
    profile = comedy_fan(targets=[])
    profile.preferences.items["1"] = 0.9  # loves Heat, but wants a comedy now
    policy = policy_for(profile)
    assert policy.decide([act("REVEAL")], [ref(ITEMS, "1")]).acts[0].intent == "NOTE.DISLIKE"


def test_strong_match_of_liked_slots_is_accepted_without_a_target():
    policy = policy_for(comedy_fan(targets=[], requests=[]))
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "6")])
    assert decision.acts[0].intent == "NOTE.ACCEPT"
    assert decision.stop == "agenda_done"


def test_lukewarm_item_gets_neutral_feedback_and_a_follow_up():
    policy = policy_for(comedy_fan())
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "2")])  # comedy 0.9 + animation -0.5 -> 0.2
    assert [a.intent for a in decision.acts] == ["NOTE.NEUTRAL", "DISCLOSE"]


def test_unknown_title_is_met_with_a_question_never_a_rejection():
    """A title neither the collection nor the profile knows: the user asks about it (it used to voice "no
    opinion" as a rejection); it is not accepted, not counted as a rejected round, but as a turn without progress."""
    policy = policy_for(comedy_fan())
    decision = policy.decide([act("REVEAL")], [ItemRef(title="Some Unknown Film (1999)")])
    assert strs(decision.acts) == ['INQUIRE.ITEMINFO(TITLE="Some Unknown Film (1999)")']
    assert decision.judgements[0].verdict == "unknown"
    assert policy.state.accepted is None
    assert policy.state.rejected_rounds == 0
    assert policy.state.idle_turns == 1


def test_unknown_titles_wear_out_the_users_patience():
    policy = policy_for(comedy_fan(), patience=3)
    stops = [policy.decide([act("REVEAL")], [ItemRef(title=f"Unknown Film {n} (1999)")]).stop for n in range(3)]
    assert stops == [None, None, "user_gave_up"]


def test_the_user_judges_the_item_the_reply_names_not_the_rest_of_the_list():
    """The reply names Toy Story; the target Superbad sits unnamed further down the list: a person reading the
    reply judges Toy Story (it used to accept the unnamed target)."""
    policy = policy_for(comedy_fan(requests=[]))
    shown = [ref(ITEMS, "2"), ref(ITEMS, "5"), ref(ITEMS, "4")]
    decision = policy.decide([act("REVEAL")], shown, "How about Toy Story (1995)? It is an animation movie.")
    assert [j.title for j in decision.judgements] == ["Toy Story (1995)"]
    assert policy.state.accepted is None
    named = policy_for(comedy_fan(requests=[])).decide([act("REVEAL")], shown, "I would recommend Superbad.")
    assert named.stop == "target_accepted"


def test_a_text_that_names_no_listed_item_leaves_the_first_items_to_look_at():
    from usersimcrs.simulators.agenda.policy.policy import looked_at

    shown = [ref(ITEMS, "2"), ref(ITEMS, "5"), ref(ITEMS, "4")]
    assert looked_at(shown, "Here are some movies you might enjoy.", 2) == shown[:2]
    assert looked_at(shown, "", 5) == shown
    assert looked_at(shown, "Have you seen Saw? I saw toy story (1995) too.", 5) == [shown[0], shown[1]]
    assert looked_at(shown, "I saw it, then I saw superbad.", 5) == shown


# ---- case 3: inquiry --------------------------------------------------------------------


def test_inquire_next_is_answered_yes_while_searching_and_no_after_acceptance():
    policy = policy_for(comedy_fan(requests=["director"]))
    policy.decide([act("INQUIRE.ELICIT", GENRE=None)], [])
    assert strs(policy.decide([act("INQUIRE.NEXT")], []).acts) == ["YES()"]
    policy.decide([act("REVEAL")], [ref(ITEMS, "4")])
    decision = policy.decide([act("INQUIRE.NEXT")], [])
    assert decision.acts[0].intent == "NO"


def test_inquire_more_after_acceptance_asks_the_pending_request():
    policy = policy_for(comedy_fan(requests=["director", "year"]))
    policy.decide([act("REVEAL")], [ref(ITEMS, "4")])  # asks DIRECTOR in the same turn
    decision = policy.decide([act("INQUIRE.MORE")], [])
    assert strs(decision.acts) == ["YES()", "INQUIRE.ITEMINFO(YEAR)"]


# ---- case 4: other ----------------------------------------------------------------------


def test_other_takes_the_agenda_top_when_nothing_was_understood():
    policy = policy_for(comedy_fan())
    decision = policy.decide([], [])
    assert decision.cases == ["other"]
    assert strs(decision.acts) == ['DISCLOSE(GENRE="Comedy")']


def test_other_samples_from_transitions_with_the_seeded_rng():
    def run(seed):
        policy = policy_for(comedy_fan(), seed=seed)
        return [str(a) for s in range(4) for a in policy.decide([act("DISCLOSE.NON-DISCLOSE")], []).acts]

    assert run(3) == run(3)
    # a greeting is answered by an intent the transition model allows after a greeting
    assert run(3)[0] in ("DISCLOSE.NON-DISCLOSE()", 'DISCLOSE(GENRE="Comedy")', "INQUIRE()")


def test_transition_statistics_from_annotated_dialogues_drive_the_other_case():
    from usersimcrs.core.dialogue import Dialogue, Utterance
    from usersimcrs.simulators.agenda.policy.transitions import TransitionModel

    d = Dialogue(conversation_id="x")
    d.add(Utterance(participant="AGENT", text="hi", dialogue_acts=[act("DISCLOSE.NON-DISCLOSE")]))
    d.add(Utterance(participant="USER", text="show me something", dialogue_acts=[act("INQUIRE")]))
    model = TransitionModel.from_dialogues([d])
    assert model.distribution("DISCLOSE.NON-DISCLOSE") == {"INQUIRE": 1.0}
    policy = policy_for(comedy_fan())
    policy.transitions = model
    policy.agenda.take("DISCLOSE")
    assert strs(policy.decide([act("DISCLOSE.NON-DISCLOSE")], []).acts) == ["INQUIRE()"]


# ---- multi-act order, requests, stopping ------------------------------------------------


def test_acceptance_and_request_are_kept_in_order():
    policy = policy_for(comedy_fan(requests=["director"]))
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "4")])
    assert strs(decision.acts) == ['NOTE.ACCEPT(TITLE="Superbad (2007)")', "INQUIRE.ITEMINFO(DIRECTOR)"]
    assert decision.stop is None


def test_request_is_marked_fulfilled_from_the_crs_text_and_the_dialogue_ends():
    policy = policy_for(comedy_fan(requests=["director"]))
    policy.decide([act("REVEAL")], [ref(ITEMS, "4")])
    decision = policy.decide([act("DISCLOSE.MORE")], [], "It was directed by Greg Mottola.")
    assert policy.state.requests["DIRECTOR"].fulfilled
    assert policy.state.requests["DIRECTOR"].value == "Greg Mottola"
    assert decision.stop == "target_accepted"
    assert decision.acts[-1].intent == "COMPLETE"


def test_request_is_fulfilled_by_a_slot_value_in_the_crs_acts():
    policy = policy_for(comedy_fan(requests=["director"]))
    policy.decide([act("REVEAL")], [ref(ITEMS, "4")])
    policy.decide([act("DISCLOSE.MORE", DIRECTOR="G. Mottola")], [], "")
    assert policy.state.requests["DIRECTOR"].fulfilled


def test_unanswered_request_is_asked_again_up_to_the_limit():
    policy = policy_for(comedy_fan(requests=["director"]), max_request_attempts=2)
    policy.decide([act("REVEAL")], [ref(ITEMS, "4")])
    second = policy.decide([], [], "Great choice!")
    assert strs(second.acts) == ["INQUIRE.ITEMINFO(DIRECTOR)"]
    third = policy.decide([], [], "Great choice!")
    assert third.stop == "target_accepted"
    assert not policy.state.requests["DIRECTOR"].fulfilled


def test_user_gives_up_after_the_recommendation_round_limit():
    policy = policy_for(comedy_fan(), max_recommendation_rounds=2)
    assert policy.decide([act("REVEAL")], [ref(ITEMS, "5")]).stop is None
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "2")])
    assert decision.stop == "user_gave_up"
    assert decision.acts[-1].intent == "COMPLETE"


def test_user_gives_up_when_the_crs_makes_no_progress():
    policy = policy_for(comedy_fan(), patience=2)
    policy.decide([act("REVEAL")], [ref(ITEMS, "5")])
    assert policy.decide([act("REVEAL")], [ref(ITEMS, "5")]).stop is None  # same item again
    assert policy.decide([act("REVEAL")], [ref(ITEMS, "5")]).stop == "user_gave_up"


def test_crs_goodbye_ends_with_a_stop_reason():
    policy = policy_for(comedy_fan())
    policy.decide([act("INQUIRE.ELICIT", GENRE=None)], [])
    decision = policy.decide([act("END")], [])
    assert decision.stop == "crs_ended"
    assert strs(decision.acts) == ["COMPLETE()"]


def test_need_without_targets_or_preferences_never_accepts():
    profile = UserProfile(
        user_id="x", need=InformationNeed(constraints={"genres": "Comedy"}), preferences=Preferences()
    )
    policy = policy_for(profile)
    decision = policy.decide([act("REVEAL")], [ref(ITEMS, "6")])
    assert decision.acts[0].intent == "NOTE.NEUTRAL"
