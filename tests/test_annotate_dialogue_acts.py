"""`usersimcrs annotate dialogue-acts`: structured labels with provenance, failures, cache, resume.

The LLM is a real local HTTP server speaking the OpenAI protocol (usersimcrs.testing.llm_server),
and one short test uses the embedded model.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from data_converters.augment.base import annotators
from data_converters.augment.folder import ConvertedFolder
from data_converters.augment.prompt_spec import load_prompt
from data_converters.augment.runner import annotate, progress_path
from tests.test_convert_helpers import reload, run_convert
from usersimcrs.cli import main
from usersimcrs.llm.base import LLM
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.testing.llm_server import LLMServer

GOOD = {"acts": [{"intent": "INQUIRE", "slots": [{"slot": "TITLE", "value": "super troopers"}]}]}


def _reply(request: dict) -> str:
    """Valid acts for every turn, except garbage for the turn 'Hello!' (a failure to report)."""
    prompt = request["messages"][-1]["content"]
    if "TARGET (USER): Hello!" in prompt or "TARGET (AGENT): Hello!" in prompt:
        return "I think this is a greeting."
    participant = "USER" if "TARGET (USER)" in prompt else "AGENT"
    intent = "INQUIRE" if participant == "USER" else "REVEAL"
    return json.dumps({"acts": [{"intent": intent, "slots": GOOD["acts"][0]["slots"]}]})


@pytest.fixture
def small_redial(shared_data, tmp_path):
    """Five ReDial dialogues cut to their first three messages, converted."""
    lines = (shared_data / "raw" / "redial" / "test_data_first25.jsonl").read_text(encoding="utf-8").splitlines()[:5]
    records = []
    for line in lines:
        record = json.loads(line)
        record["messages"] = record["messages"][:3]
        records.append(json.dumps(record))
    raw = tmp_path / "small.jsonl"
    raw.write_text("\n".join(records) + "\n", encoding="utf-8")
    out = tmp_path / "converted"
    run_convert("redial", [raw], out)
    return out


def _cli(folder, server, *extra):
    return main(
        [
            "annotate",
            "dialogue-acts",
            str(folder),
            "--llm-backend",
            "openai",
            "--base-url",
            server.openai_url,
            "--model",
            "test-model",
            "--retries",
            "1",
            *extra,
        ]
    )


def test_labels_provenance_and_failure_report(small_redial):
    with LLMServer(replies=_reply, latency_ms=30) as server:
        assert _cli(small_redial, server, "--concurrency", "4") == 0
        max_in_flight = server.counters["max_in_flight"]
    out = reload(small_redial)
    report = json.loads((small_redial / "annotation_report.dialogue-acts.json").read_text(encoding="utf-8"))
    hello = [u for d in out["dialogues"] for u in d.utterances if u.text == "Hello!"]
    assert hello and report["failed"] == len(hello)
    assert {f["utterance_id"] for f in report["failures"]} == {u.utterance_id for u in hello}
    assert all("unparseable" in f["error"] for f in report["failures"])
    labelled = [u for d in out["dialogues"] for u in d.utterances if u.text != "Hello!"]
    assert report["annotated"] == len(labelled) == report["units"] - len(hello)
    first = out["dialogues"][0].utterances[0]  # "Hi I am looking for a movie like Super Troopers (2001)"
    act = first.dialogue_acts[0]
    assert act.intent == "INQUIRE" and act.slot_values[0].value == "super troopers"
    assert first.text[act.slot_values[0].start : act.slot_values[0].end].lower() == "super troopers"
    second = out["dialogues"][0].utterances[1]  # "You should watch Police Academy (1984)": value not in the text
    assert second.dialogue_acts[0].intent == "REVEAL" and second.dialogue_acts[0].slot_values[0].value is None
    for utt in labelled:
        assert utt.metadata["annotation_provenance"] == {
            "task": "dialogue-acts",
            "model": "test-model",
            "backend": "openai",
            "prompt": "dialogue_acts",
            "prompt_version": 1,
        }
    assert all(not u.dialogue_acts and "annotation_provenance" not in u.metadata for u in hello)
    # the DialogueKit file is rewritten with the same labels
    assert [u.dialogue_acts for d in out["dialoguekit"] for u in d.utterances] == [
        u.dialogue_acts for d in out["dialogues"] for u in d.utterances
    ]
    assert max_in_flight >= 2  # requests were batched concurrently
    assert report["usage"]["calls"] == report["units"]


def test_second_run_skips_labelled_turns_and_overwrite_hits_the_cache(small_redial, tmp_path):
    cache = tmp_path / "cache"
    with LLMServer(replies=_reply) as server:
        assert _cli(small_redial, server, "--cache-dir", str(cache)) == 0
        first = len(server.chat_requests)
        # resumable: labelled turns are skipped
        assert _cli(small_redial, server, "--cache-dir", str(cache)) == 1
        report = json.loads((small_redial / "annotation_report.dialogue-acts.json").read_text(encoding="utf-8"))
        assert report["annotated"] == 0 and report["skipped_existing"] == report["units"] - report["failed"]
        assert report["usage"]["calls"] == report["failed"] > 0  # only the failed turns were asked again
        assert len(server.chat_requests) > first
        # --overwrite re-labels everything, served from the cache except the failed turns (never cached)
        assert _cli(small_redial, server, "--cache-dir", str(cache), "--overwrite") == 0
        report = json.loads((small_redial / "annotation_report.dialogue-acts.json").read_text(encoding="utf-8"))
    assert report["usage"]["cache_hits"] == report["annotated"] == report["units"] - report["failed"]
    assert report["usage"]["calls"] == report["failed"]


class _Crashing(LLM):
    """Delegates to a real LLM, then dies like a killed process before its fourth request."""

    def __init__(self, inner: LLM, after: int) -> None:
        self.inner, self.after, self.calls = inner, after, 0
        self.model, self.backend = inner.model, inner.backend

    async def complete(self, messages, **kwargs):
        self.calls += 1
        if self.calls > self.after:
            raise RuntimeError("killed")
        return await self.inner.complete(messages, **kwargs)


def test_interrupted_run_resumes_from_its_progress_file(small_redial, tmp_path):
    folder = ConvertedFolder(small_redial)
    task = annotators.get("dialogue-acts")(load_prompt("dialogue_acts"))
    with LLMServer(replies=_reply) as server:

        async def crash():
            provider = LLMProvider(server.config(cache_dir=str(tmp_path / "c1")))
            try:
                await annotate(folder, task, _Crashing(provider.get("annotate"), 3), concurrency=1)
            finally:
                await provider.aclose()

        with pytest.raises(RuntimeError, match="killed"):
            asyncio.run(crash())
        assert len(progress_path(folder, task).read_text(encoding="utf-8").splitlines()) == 3
        assert len(server.chat_requests) == 3

        async def resume():
            provider = LLMProvider(server.config(cache_dir=str(tmp_path / "c2")))  # an empty cache
            try:
                return await annotate(folder, task, provider.get("annotate"), concurrency=2)
            finally:
                await provider.aclose()

        report = asyncio.run(resume())
        assert report.resumed == 3
        prompts = [r.body["messages"][-1]["content"] for r in server.chat_requests]
        first, later = set(prompts[:3]), set(prompts[3:])
        assert not first & later and len(later) == report.units - 3  # nothing asked twice across the crash
    assert not progress_path(folder, task).exists()
    labelled = [u for d in folder.dialogues() for u in d.utterances if u.dialogue_acts]
    assert len(labelled) == report.units - report.failed


def test_gold_acts_are_kept(shared_data, tmp_path):
    out = tmp_path / "iard"
    run_convert("iard", [shared_data / "raw" / "iard" / "umap2020_IARD_Cai_first15.json"], out)
    before = (out / "dialogues.jsonl").read_text(encoding="utf-8")
    with LLMServer(replies=_reply) as server:
        assert _cli(out, server, "--limit", "2") == 0
        assert server.chat_requests == []
    report = json.loads((out / "annotation_report.dialogue-acts.json").read_text(encoding="utf-8"))
    assert report["dialogues"] == 2 and report["skipped_existing"] == report["units"] > 0
    assert (out / "dialogues.jsonl").read_text(encoding="utf-8") == before


def test_missing_folder_is_one_line(tmp_path, capsys):
    assert main(["annotate", "dialogue-acts", str(tmp_path)]) == 2
    assert "no dialogues.jsonl" in capsys.readouterr().err


@pytest.mark.embedded
@pytest.mark.slow
def test_embedded_model_five_dialogues_then_cache(embedded_model_path, small_redial, tmp_path):
    """Five converted one-turn dialogues with the embedded model; a fresh copy is then served from cache."""
    for path in (small_redial / "dialogues.jsonl",):
        lines = path.read_text(encoding="utf-8").splitlines()
        cut = []
        for line in lines:
            record = json.loads(line)
            record["utterances"] = record["utterances"][:1]
            cut.append(json.dumps(record))
        path.write_text("\n".join(cut) + "\n", encoding="utf-8")
    fresh = tmp_path / "copy"
    shutil.copytree(small_redial, fresh)
    prompt = tmp_path / "prompt.yaml"
    spec = load_prompt("dialogue_acts").model_dump()
    spec.update(max_acts=1, max_slots=1, max_value_chars=24, context_turns=0)
    spec["intents"] = {
        "USER": {"DISCLOSE": "states a preference", "INQUIRE": "asks for a recommendation", "OTHER": "anything else"},
        "AGENT": {"INQUIRE.ELICIT": "asks about preferences", "REVEAL": "recommends a movie", "OTHER": "anything else"},
    }
    prompt.write_text(json.dumps(spec), encoding="utf-8")
    cache = tmp_path / "cache"
    args = [
        "--llm-backend",
        "llamacpp",
        "--model-path",
        embedded_model_path,
        "--max-tokens",
        "64",
        "--concurrency",
        "2",
        "--prompt",
        str(prompt),
        "--cache-dir",
        str(cache),
    ]
    assert main(["annotate", "dialogue-acts", str(small_redial), *args]) == 0
    first = json.loads((small_redial / "annotation_report.dialogue-acts.json").read_text(encoding="utf-8"))
    assert first["dialogues"] == 5 and first["units"] == 5
    assert first["usage"]["calls"] == first["units"]
    dialogues = reload(small_redial)["dialogues"]
    labelled = [d.utterances[0] for d in dialogues if d.utterances[0].dialogue_acts]
    assert len(labelled) == first["annotated"] == 5 - first["failed"]
    for utt in labelled:
        assert utt.metadata["annotation_provenance"]["backend"] == "llamacpp"
        assert utt.metadata["annotation_provenance"]["prompt_version"] == 1
        assert utt.dialogue_acts[0].intent in spec["intents"][utt.participant]
    main(["annotate", "dialogue-acts", str(fresh), *args])
    second = json.loads((fresh / "annotation_report.dialogue-acts.json").read_text(encoding="utf-8"))
    assert first["failed"] == 0, first["failures"]  # the small schema fits in 64 tokens
    assert second["usage"]["calls"] == 0  # every reply came from the cache
    assert second["usage"]["cache_hits"] == first["annotated"] == second["annotated"] == 5
    assert [u.dialogue_acts for d in reload(fresh)["dialogues"] for u in d.utterances if u.dialogue_acts] == [
        u.dialogue_acts for u in labelled
    ]


def test_intents_and_slots_from_interaction_model_files(shared_data, small_redial):
    configs = shared_data / "reference_configs"
    with LLMServer() as server:  # default replies: deterministic JSON that follows the requested schema
        assert (
            _cli(
                small_redial,
                server,
                "--intents",
                str(configs / "interaction_models_redial_v1.yaml"),
                "--slots",
                str(configs / "domains_redial.yaml"),
                "--limit",
                "2",
            )
            == 0
        )
        schemas = [r.body["response_format"]["json_schema"]["schema"] for r in server.chat_requests]
    act = schemas[0]["properties"]["acts"]["items"]["properties"]
    assert act["slots"]["items"]["properties"]["slot"]["enum"] == ["TITLE", "YEAR"]
    user_enum = {
        "IQU",
        "CON",
        "REF",
        "STO",
        "PRO",
        "ANS",
        "SEE",
        "ACC",
        "REJ",
        "INQ",
        "CRI-F",
        "CRI-A",
        "NRE",
        "CRI-C",
        "OTH",
        "BYE",
    }
    enums = [set(s["properties"]["acts"]["items"]["properties"]["intent"]["enum"]) for s in schemas]
    assert user_enum in enums and {"REQ", "CLA", "REC-S", "REC-E", "OTH", "END"} <= set().union(*enums)
    dialogues = reload(small_redial)["dialogues"][:2]
    for utt in (u for d in dialogues for u in d.utterances):
        allowed = user_enum if utt.participant == "USER" else set().union(*enums) - user_enum | {"OTH"}
        assert utt.dialogue_acts and {a.intent for a in utt.dialogue_acts} <= allowed
