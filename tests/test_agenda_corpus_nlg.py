"""The corpus NLG (`nlg: corpus`): real seeker messages labelled with acts, re-filled with the user's own values."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter

import pytest

from tests.agenda_support import act
from tests.conftest import PROJECT_ROOT
from usersimcrs.cli import main
from usersimcrs.core.dialogue import Annotation, Dialogue, Utterance
from usersimcrs.core.holdout import held_out
from usersimcrs.core.jsonl import JsonlWriter, read_models
from usersimcrs.simulators.agenda.nlg.base import NLGSettings
from usersimcrs.simulators.agenda.nlg.corpus import COMPOSED, CORPUS, MIXED, CorpusNLG, build_pool
from usersimcrs.simulators.agenda.nlg.seeker_acts import SeekerLabeller
from usersimcrs.simulators.agenda.nlg.templates import load_default_templates


def seeker(text: str, **annotations) -> Utterance:  # type: ignore[no-untyped-def]
    return Utterance(
        participant="USER", text=text, annotations=[Annotation(key=k, value=v) for k, v in annotations.items()]
    )


def signature(message) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(a) for a in message.acts]


LABELLER = SeekerLabeller(genres=["Comedy", "Drama", "Sci-Fi"])


def test_labeller_reads_greetings_genres_feedback_and_questions():
    opening = LABELLER.label(seeker("Hi! I'm in the mood for a good comedy"))
    assert signature(opening) == ["DISCLOSE.NON-DISCLOSE()", 'DISCLOSE(GENRE="genre")']
    assert opening.template == "Hi! I'm in the mood for a good {GENRE}"
    seen = LABELLER.label(seeker("I've seen that one. Anything else?"))
    assert signature(seen) == ["NOTE.YES()", "INQUIRE()"]
    accept = LABELLER.label(seeker("Sounds great, I'll check it out. Thanks!"))
    assert [a.intent for a in accept.acts] == ["NOTE.ACCEPT", "COMPLETE"]
    assert signature(LABELLER.label(seeker("What is it about?"))) == ["INQUIRE.ITEMINFO(KEYWORD)"]
    assert signature(LABELLER.label(seeker("haven't seen it"))) == ["NOTE.NO()"]


def test_labeller_marks_annotated_titles_and_people():
    text = "I really liked Super Troopers (2001)"
    items = [{"id": "1", "title": "Super Troopers (2001)", "start": 15, "end": len(text)}]
    message = LABELLER.label(seeker(text, items=items))
    assert signature(message) == ['DISCLOSE(TITLE="title")'] and message.template == "I really liked {TITLE}"
    director = Dialogue(conversation_id="d", metadata={"director_dict": {"Stanley Kubrick": 0}})
    director.add(seeker("I love anything by Stanley Kubrick", people=["Stanley Kubrick"]))
    [labelled] = LABELLER.label_dialogue(director)
    assert signature(labelled) == ['DISCLOSE(DIRECTOR="person")'] and "{DIRECTOR}" in labelled.template


def test_a_corpus_with_its_own_acts_keeps_them():
    d = Dialogue(conversation_id="annotated")
    d.add(Utterance(participant="USER", text="gimme some Comedy", dialogue_acts=[act("DISCLOSE", genres="Comedy")]))
    d.add(Utterance(participant="USER", text="lol no", dialogue_acts=[act("NOTE.DISLIKE")]))
    d.add(Utterance(participant="USER", text="a western", dialogue_acts=[act("DISCLOSE", GENRE="Drama")]))
    messages = LABELLER.label_dialogue(d)
    assert [(signature(m), m.template) for m in messages] == [
        (['DISCLOSE(GENRE="Comedy")'], "gimme some {GENRE}"),
        (["NOTE.DISLIKE()"], "lol no"),  # no cue would have read this one; its label does
    ]  # the third names a value its text does not hold: left out


@pytest.mark.parametrize(
    "text",
    [
        "I will watch The Avengers again, thanks",  # a title nobody marked: not the simulated user's to say
        "I like comedy and drama",  # two genres, one value to fill
        "While that one is great, we saw it recently so I'd like to see something a little different.",
        "I don't think the comedy is good",  # a negation outside a negative cue turns the act around
        "My kids are asleep and the dog is barking at the mailman",  # no act at all
        "I like movies where they fight a lot",  # a preference with nothing to re-fill
    ],
)
def test_labeller_leaves_out_what_the_user_could_not_say(text):
    assert LABELLER.label(seeker(text)) is None


def corpus(n: int = 30) -> list[Dialogue]:
    """Human conversations whose seekers greet with a genre, say they saw the title, ask for more, accept, leave."""
    messages = [
        "Hello, I am looking for comedy movies",
        "I've seen that one. Any others?",
        "I will check it out, thank you!",
        "hey",
        "i really like drama",
        "Seen it.",
        "anything else?",
        "thanks, bye!",
    ]
    out = []
    for i in range(n):
        d = Dialogue(conversation_id=f"conv-{i}")
        for k, text in enumerate(messages):
            d.add(Utterance(participant="USER", text=text, utterance_id=f"{i}-{k}"))
            d.add(Utterance(participant="AGENT", text="How about Heat (1995)?"))
        out.append(d)
    return out


def nlg(dialogues: list[Dialogue], holdout: float = 0.0) -> CorpusNLG:
    pool = build_pool(dialogues, LABELLER, holdout=holdout)
    return CorpusNLG(NLGSettings(defaults=load_default_templates(), corpus=lambda: pool))


def test_whole_turns_come_from_one_message_with_the_users_own_values():
    generator = nlg(corpus())
    opening = generator.realise([act("DISCLOSE.NON-DISCLOSE"), act("DISCLOSE", GENRE="Sci-Fi")], random.Random(1))
    assert opening.source == CORPUS and opening.text == "Hello, I am looking for sci-fi movies"
    assert opening.origin and opening.origin[0].startswith("conv-")
    # feedback on the item just shown may leave its title unsaid, as people do
    seen = generator.realise([act("NOTE.YES", TITLE="Heat (1995)"), act("INQUIRE")], random.Random(2))
    assert (seen.source, seen.text) == (CORPUS, "I've seen that one. Any others?")


def test_turns_without_a_whole_match_are_composed_and_templates_fill_the_gaps():
    generator = nlg(corpus())
    composed = generator.realise([act("NOTE.YES", TITLE="Heat (1995)"), act("COMPLETE")], random.Random(0))
    assert composed.source == COMPOSED and len(composed.origin) == 2
    assert composed.text.startswith("Seen it.")  # the shorter half of the NOTE.YES messages
    mixed = generator.realise([act("INQUIRE.ITEMINFO", DIRECTOR=None), act("INQUIRE")], random.Random(0))
    assert mixed.source == MIXED and mixed.origin[0] == "template"
    assert mixed.text.startswith("Who directed it?")


def test_picks_follow_the_seed():
    generator = nlg(corpus())
    acts = [act("DISCLOSE", GENRE="Comedy")]
    picks = {generator.realise(acts, random.Random(s)).origin[0] for s in range(12)}
    assert len(picks) > 1
    assert generator.realise(acts, random.Random(5)).origin == generator.realise(acts, random.Random(5)).origin


def test_held_out_conversations_never_reach_the_pool():
    dialogues = corpus(200)
    kept = build_pool(dialogues, LABELLER, holdout=0.3)
    out = [d.conversation_id for d in dialogues if held_out(d.conversation_id, 0.3)]
    assert kept.held_out == len(out) and 40 < len(out) < 80 and kept.conversations == 200 - len(out)
    used = {m.origin.split(":")[0] for messages in kept.by_signature.values() for m in messages}
    assert used.isdisjoint(out)
    assert [held_out(i, 0.3) for i in out] == [True] * len(out)  # a pure function of the ID


def write_corpus(path, dialogues):  # type: ignore[no-untyped-def]
    with JsonlWriter(path) as writer:
        for d in dialogues:
            writer.write(d)
    return path


def test_a_run_speaks_with_the_corpus_and_records_where_each_turn_came_from(tmp_path):
    path = write_corpus(tmp_path / "seekers.jsonl", corpus())
    out = tmp_path / "run"
    args = ["run", str(PROJECT_ROOT / "configs" / "quickstart.yaml"), "-o", str(out), "--set", "conversations=6"]
    args += ["--set", "simulator.nlg=corpus", "--set", f"simulator.nlg_corpus_path={path}", "--set", "progress=false"]
    assert main(args) == 0
    turns = [u for d in read_models(out / "dialogues.jsonl", Dialogue) for u in d.user_turns]
    sources = Counter(u.metadata["nlg_source"] for u in turns)
    assert sources[CORPUS] + sources[COMPOSED] > len(turns) / 2
    opening = turns[0]
    genre = opening.dialogue_acts[1].slot_values[0].value
    assert opening.metadata["nlg_origin"] and genre.lower() in opening.text


def test_corpus_nlg_without_a_corpus_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "usersimcrs", "run", str(PROJECT_ROOT / "configs" / "quickstart.yaml")]
        + ["-o", str(tmp_path / "r"), "--set", "simulator.nlg=corpus"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0 and "nlg_corpus_path" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.shared_data
def test_quickstart_on_redial_seekers_is_mostly_real_messages(shared_data, tmp_path):
    """200 conversations: most user turns are whole ReDial seeker messages (30% of ReDial held out)."""
    redial = shared_data / "raw" / "redial"
    converted = tmp_path / "redial"
    inputs = [str(redial / "test_data.jsonl"), str(redial / "movies_with_mentions.csv")]
    assert main(["convert", "redial", "-i", *inputs, "-o", str(converted)]) == 0
    out = tmp_path / "run"
    args = ["run", str(PROJECT_ROOT / "configs" / "quickstart.yaml"), "-o", str(out), "--set", "conversations=200"]
    args += ["--set", "simulator.nlg=corpus", "--set", f"simulator.nlg_corpus_path={converted}"]
    args += ["--set", "simulator.nlg_corpus_holdout=0.3", "--set", "progress=false"]
    assert main(args) == 0
    turns = [u for d in read_models(out / "dialogues.jsonl", Dialogue) for u in d.user_turns]
    sources = Counter(u.metadata["nlg_source"] for u in turns)
    assert sources[CORPUS] > len(turns) / 2
    origins = {o.split(":")[0] for u in turns for o in u.metadata.get("nlg_origin", []) if o != "template"}
    assert origins and not any(held_out(o, 0.3) for o in origins)
    words = [len(u.text.split()) for u in turns]
    assert 5 <= sum(words) / len(words) <= 9
    json.loads((out / "manifest.json").read_text())  # a whole manifest


def test_a_corpus_path_given_with_set_is_relative_to_where_the_command_runs(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    write_corpus(tmp_path / "data" / "seekers.jsonl", corpus())
    monkeypatch.chdir(tmp_path)  # the config lives in configs/; the path typed is relative to here
    args = ["run", str(PROJECT_ROOT / "configs" / "quickstart.yaml"), "-o", "run", "--set", "conversations=3"]
    args += ["--set", "simulator.nlg=corpus", "--set", "simulator.nlg_corpus_path=data/seekers.jsonl"]
    assert main([*args, "--set", "progress=false"]) == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["simulator"]["nlg_corpus_path"] == str(tmp_path / "data" / "seekers.jsonl")


def test_a_give_up_turn_takes_its_goodbye_from_the_templates_and_the_rest_from_the_corpus():
    generator = nlg(corpus())
    turn = [act("NOTE.YES", TITLE="Heat (1995)"), act("COMPLETE")]
    result = generator.realise(turn, random.Random(0), "user_gave_up")
    assert result.source == MIXED and result.origin[0].startswith("conv-") and result.origin[1] == "template"
    assert result.text.endswith(tuple(load_default_templates()["COMPLETE:user_gave_up"]))
