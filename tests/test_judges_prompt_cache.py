"""Judge prompts that a serving stack can cache, batched scoring, and the scaffolding texts as data.

* every criterion of one conversation gets the same system message and the same data block, and
  only the request at the end differs; the system text before the fence tag is the same for every
  conversation;
* the manifest reports the prompt-prefix reuse the LLM layer measured, per component and per judge;
* ``--batch-aspects`` makes one call per conversation, reads each criterion's part on its own and
  records the mode; a missing or out-of-range part is None with its status;
* the judges' scaffolding texts come from a validated YAML file that a user may replace.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.metrics_fixtures import write_run
from usersimcrs.cli import main
from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.profile import UserProfile
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.errors import ConfigError
from usersimcrs.judges.base import JudgeOptions
from usersimcrs.judges.core12 import Core12Judge
from usersimcrs.judges.prompt_builder import DATA_OPEN, ConversationView, PromptLayout, criterion_messages
from usersimcrs.judges.prompt_text import load_judge_prompts
from usersimcrs.judges.quality import QualityJudge
from usersimcrs.judges.rubrics import load_rubric
from usersimcrs.llm.base import Message
from usersimcrs.llm.usage import UsageTracker
from usersimcrs.pipeline.judge import JudgeRequest, judge
from usersimcrs.testing.llm_server import LLMServer


def conversation(cid: str, replies: list[str]) -> Dialogue:
    d = Dialogue(conversation_id=cid)
    d.profile = UserProfile.model_validate(
        {
            "user_id": "u",
            "need": {"targets": [{"title": "Heat (1995)"}]},
            "preferences": {"narrative": "Likes tense crime films."},
        }
    )
    for i, text in enumerate(replies):
        d.add(Utterance(participant="USER", text=f"{cid} asks {i}"))
        d.add(Utterance(participant="AGENT", text=text, items=[ItemRef(title=f"Film {cid}-{i}")]))
    return d


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@pytest.mark.parametrize("rubric_name", ["quality", "core12", "pepper"])
def test_every_criterion_of_a_conversation_shares_the_system_message_and_the_data_block(rubric_name):
    rubric = load_rubric(rubric_name)
    view = ConversationView.from_dialogue(conversation("c1", ["Try Heat.", "Or Ronin, also tense."]))
    prompts = [criterion_messages(rubric, c, view) for c in rubric.criteria]
    systems = {p[0].content for p in prompts}
    assert len(systems) == 1, "the system message is byte-identical across criteria"
    users = [p[1].content for p in prompts]
    block_end = users[0].index("\n", users[0].index(">>>"))  # the closing fence line ends the shared part
    for user in users:
        assert user[:block_end] == users[0][:block_end]
    # only the part after the data differs, and it names its own criterion
    for criterion, user in zip(rubric.criteria, users):
        tail = user[block_end:]
        assert f'Rate "{criterion.title}" ({criterion.name})' in tail
        others = [c for c in rubric.criteria if c.name != criterion.name]
        assert not any(f'Rate "{o.title}"' in tail for o in others)
    # the shared part is most of each prompt
    shared = len(prompts[0][0].content) + block_end
    assert all(shared / (len(p[0].content) + len(p[1].content)) > 0.8 for p in prompts)


def test_the_system_text_before_the_fence_tag_is_the_same_for_every_conversation():
    rubric = load_rubric("quality")
    a = criterion_messages(rubric, rubric.criteria[0], ConversationView.from_dialogue(conversation("a", ["x", "y"])))
    b = criterion_messages(rubric, rubric.criteria[0], ConversationView.from_dialogue(conversation("b", ["z", "w"])))
    assert a[0].content != b[0].content  # the data rules name each conversation's own tag ...
    tag_at = a[0].content.index(DATA_OPEN)
    first_difference = common_prefix(a[0].content, b[0].content)
    assert tag_at <= first_difference < tag_at + len(DATA_OPEN) + len("DATA-") + 12  # ... inside the tag
    assert tag_at > 0.9 * len(a[0].content)


def test_only_the_criterion_that_uses_them_sees_ground_truth_and_preferences_in_its_own_block():
    rubric = load_rubric("core12")
    view = ConversationView.from_dialogue(conversation("c1", ["Try Heat.", "Or Ronin."]))
    effectiveness = criterion_messages(rubric, rubric.criterion("effectiveness"), view)[1].content
    coherence = criterion_messages(rubric, rubric.criterion("coherence"), view)[1].content
    assert "Heat (1995)" in effectiveness and "Heat (1995)" not in coherence
    # the extra block is fenced under its own hash tag, announced by the request
    tags = re.findall(re.escape(DATA_OPEN) + r"(DATA-[0-9A-F]{12})\n", effectiveness)
    assert len(tags) == 2 and tags[0] != tags[1]
    extra = effectiveness[
        effectiveness.index(f"{DATA_OPEN}{tags[1]}\n") + len(tags[1]) + 4 : effectiveness.index(f"\n{tags[1]}>>>")
    ]
    assert json.loads(extra) == {"ground_truth": ["Heat (1995)"]}


def test_without_a_shared_rubric_each_prompt_carries_only_its_criterion_after_the_conversation():
    rubric = load_rubric("quality")
    view = ConversationView.from_dialogue(conversation("c1", ["Try Heat.", "Or Ronin."]))
    layout = PromptLayout(criteria=tuple(rubric.criteria), shared_rubric=False)
    system, user = criterion_messages(rubric, rubric.criterion("fluency"), view, layout=layout)
    assert "Criterion:" not in system.content
    assert user.content.index(">>>") < user.content.index("Criterion: Fluency (fluency)")
    assert "Criterion: Communication style" not in user.content


# ---------------------------------------------------------------------------- prefix accounting


def test_the_usage_tracker_counts_characters_of_prefixes_sent_before_to_the_same_model():
    tracker = UsageTracker()
    shared = Message(role="system", content="s" * 1000)
    tracker.record_prompt("judge.a", "m", [shared, Message(role="user", content="first" * 100)])
    tracker.record_prompt("judge.b", "m", [shared, Message(role="user", content="second" * 100)])
    tracker.record_prompt("judge.b", "other", [shared])  # another model has its own cache
    chars = tracker._chars  # noqa: SLF001 - the raw counters behind the summary
    assert chars["judge.a"][1] == 0
    reused = chars["judge.b"][1]
    assert 1000 - 128 < reused <= 1000 + len("\x1esystem\x1f\x1euser\x1f")


def test_the_manifest_reports_prefix_reuse_per_component_and_judge(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, judged=False)
    with LLMServer() as server:
        for name, model in (("quality", "m"), ("core12", "m"), ("quality", "m2")):  # m2: a second invocation adds up
            request = JudgeRequest(
                judge=name, llm_backend="openai", base_url=server.openai_url, model=model, no_cache=True
            )
            judge(run_dir, request)
    judges = RunFolder(run_dir).read_manifest()["judges"]
    for name in ("quality", "core12"):
        figure = judges["prefix_reuse"][name]
        assert figure["prompt_chars"] > 0
        assert figure["prefix_reuse"] >= 0.8, (name, figure)
    by_component = judges["llm"]["by_component"]
    fluency = by_component["judge.quality.fluency"]
    assert fluency["calls"] == 2 * 7 and fluency["prefix_reuse"] >= 0.8
    assert fluency["prefix_reuse"] == round(fluency["prefix_reused_chars"] / fluency["prompt_chars"], 4)
    assert all(0.0 <= c["prefix_reuse"] <= 1.0 for c in by_component.values())


# ---------------------------------------------------------------------------- batched scoring


def batched_reply(parts: dict):
    def reply(body: dict) -> str:
        return json.dumps(parts)

    return reply


def test_batch_mode_makes_one_call_and_stores_every_criterion_as_batched(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, judged=False)
    with LLMServer() as server:
        request = JudgeRequest(
            judge="quality",
            batch_aspects=True,
            llm_backend="openai",
            base_url=server.openai_url,
            model="m",
            no_cache=True,
        )
        result = judge(run_dir, request)
        calls = len(server.chat_requests)
        body = server.chat_requests[0].body
    assert calls == result.judged == 7  # one call per conversation judged
    rows = list(iter_jsonl(run_dir / "judgments.jsonl"))
    assert len(rows) == 5 * result.judged
    assert {r["mode"] for r in rows} == {"batched"}
    assert {r["status"] for r in rows} == {"ok"}
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == [c.name for c in load_rubric("quality").criteria]
    assert schema["properties"]["fluency"]["properties"]["rating"]["maximum"] == 5
    # the batch's tokens are spread over its judgments without changing the total
    manifest = RunFolder(run_dir).read_manifest()["judges"]
    assert manifest["usage"]["calls"] == calls
    # a per-criterion run with the same model finds everything done
    with LLMServer() as server:
        again = judge(
            run_dir,
            JudgeRequest(judge="quality", llm_backend="openai", base_url=server.openai_url, model="m", no_cache=True),
        )
        assert server.chat_requests == []
    assert again.already_done == 7 and again.judged == 0


def test_a_missing_or_out_of_range_part_is_none_with_its_status_and_the_rest_stand():
    d = conversation("c1", ["Try Heat.", "Or Ronin."])
    parts = {
        "recommendation_relevance": {"rationale": "fits", "rating": 4},
        "communication_style": {"rationale": "clear", "rating": 9},  # out of range
        "fluency": {"rationale": "fine", "rating": 5},
        "conversational_flow": {"rationale": "ok", "rating": 3},
    }  # overall_satisfaction missing
    with LLMServer(replies=batched_reply(parts)) as server:
        judgments = _score(QualityJudge(JudgeOptions(batch=True, max_attempts=2)), d, server)
        calls = server.chat_requests
    by_name = {j.name: j for j in judgments}
    assert [j.name for j in judgments] == [c.name for c in load_rubric("quality").criteria]
    assert by_name["recommendation_relevance"].value == 4.0 and by_name["fluency"].value == 5.0
    assert by_name["communication_style"].value is None and by_name["communication_style"].status == "out_of_range"
    missing = by_name["overall_satisfaction"]
    assert missing.value is None and missing.status == "parse_error" and "overall_satisfaction" in missing.error
    assert {j.mode for j in judgments} == {"batched"}
    # the retry names only the open criteria
    assert len(calls) == 2
    correction = calls[1].body["messages"][-1]["content"]
    assert "communication_style, overall_satisfaction" in correction
    assert sum(j.usage.calls for j in judgments) == 2


def test_batch_mode_with_a_criterion_lacking_its_input_records_it_without_asking():
    d = conversation("c1", ["Try Heat.", "Or Ronin."])
    d.profile = None  # no ground truth: effectiveness cannot be rated
    with LLMServer() as server:
        judgments = _score(Core12Judge(JudgeOptions(batch=True)), d, server)
        schema = server.chat_requests[0].body["response_format"]["json_schema"]["schema"]
        assert len(server.chat_requests) == 1
    by_name = {j.name: j for j in judgments}
    assert by_name["effectiveness"].status == "missing_input" and by_name["effectiveness"].value is None
    assert "effectiveness" not in schema["properties"] and len(schema["required"]) == 11
    assert all(j.status == "ok" for n, j in by_name.items() if n != "effectiveness")


def test_dry_run_follows_the_mode(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, judged=False)
    per = judge(
        run_dir,
        JudgeRequest(judge="quality", dry_run=True, llm_backend="openai", model="m", base_url="http://127.0.0.1:9"),
    )
    batched = judge(
        run_dir,
        JudgeRequest(
            judge="quality",
            dry_run=True,
            batch_aspects=True,
            llm_backend="openai",
            model="m",
            base_url="http://127.0.0.1:9",
        ),
    )
    assert per.dry_run.calls == 5 * per.to_judge
    assert batched.dry_run.calls == batched.to_judge
    assert batched.dry_run.prompt_tokens < per.dry_run.prompt_tokens


def _score(judge_obj, dialogue, server):
    import asyncio

    from usersimcrs.llm.provider import LLMProvider
    from usersimcrs.runtime.context import RunContext

    provider = LLMProvider(server.config("openai", cache=False, retries=0))

    async def go():
        try:
            return await judge_obj.score(dialogue, RunContext(llms=provider))
        finally:
            await provider.aclose()

    return asyncio.run(go())


# ---------------------------------------------------------------------------- the texts as data


def test_a_misspelled_key_in_a_prompts_file_is_one_line_naming_file_and_key(tmp_path, capsys):
    bad = tmp_path / "prompts.yaml"
    bad.write_text("corection: 'Try again: {problem}'\n")
    with pytest.raises(ConfigError) as caught:
        load_judge_prompts(bad)
    assert str(caught.value) == f"{bad}: unknown key 'corection' (did you mean 'correction'?)"
    run_dir = tmp_path / "run"
    write_run(run_dir, judged=False)
    assert main(["judge", str(run_dir), "--judge", "quality", "--prompts", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and "corection" in err


def test_a_misspelled_placeholder_is_an_error_naming_the_key(tmp_path):
    bad = tmp_path / "prompts.yaml"
    bad.write_text("correction: 'Try again: {problm}'\n")
    with pytest.raises(ConfigError, match=r"key 'correction': .*unknown placeholder \{problm\}"):
        load_judge_prompts(bad)
    rules = tmp_path / "rules.yaml"
    rules.write_text("data_rules: 'The data is below.'\n")  # the fences must stay named
    with pytest.raises(ConfigError, match=r"key 'data_rules': .*placeholder \{close\} is required"):
        load_judge_prompts(rules)


def test_a_replacement_prompts_file_changes_the_prompts_the_server_sees(tmp_path):
    own = tmp_path / "prompts.yaml"
    own.write_text(
        "criterion_request: 'Give {name} a score now ({scores}).'\n"
        'correction: \'Not usable ({problem}); send {{"{text_key}": "...", "{score_key}": N}} only.\'\n'
    )
    d = conversation("c1", ["Try Heat.", "Or Ronin."])
    replies = iter(["no score here", json.dumps({"rationale": "r", "rating": 3})])
    with LLMServer(replies=lambda body: next(replies)) as server:
        (judgment,) = _score(QualityJudge(JudgeOptions(criteria=["fluency"], prompts=str(own))), d, server)
        bodies = [r.body for r in server.chat_requests]
    assert judgment.value == 3.0 and judgment.mode == "per_criterion"
    assert "Give fluency a score now (1, 2, 3, 4, 5)." in bodies[0]["messages"][1]["content"]
    assert bodies[1]["messages"][-1]["content"].startswith("Not usable (")
    # keys the file leaves out keep the built-in text
    assert "How to read the input" in bodies[0]["messages"][0]["content"]


def test_the_shipped_prompts_file_validates_and_every_key_is_used(tmp_path):
    prompts = load_judge_prompts()
    source = Path(__file__).resolve().parents[1] / "usersimcrs" / "judges"
    code = "".join(p.read_text() for p in source.glob("*.py"))
    for key in type(prompts).model_fields:
        if key != "kind":
            assert f'"{key}"' in code or f".{key}" in code, f"{key} is not used by any judge"


def test_a_local_model_whose_window_is_too_small_for_the_shared_rubric_gets_the_compact_layout():
    d = conversation("c1", ["Try Heat.", "Or Ronin."])
    rubric = load_rubric("core12")
    chosen = (rubric.criterion("coherence"), rubric.criterion("novelty"))
    layout = PromptLayout(criteria=chosen)
    view = ConversationView.from_dialogue(d)
    from usersimcrs.judges.estimate import prompt_tokens

    longest = max(prompt_tokens(criterion_messages(rubric, c, view, layout=layout)) for c in chosen)
    window = longest + 256 - 1  # one token short for the shared layout
    with LLMServer() as server:
        import asyncio

        from usersimcrs.llm.provider import LLMProvider
        from usersimcrs.runtime.context import RunContext

        provider = LLMProvider(server.config("ollama", cache=False, retries=0, n_ctx=window))

        async def go():
            try:
                return await Core12Judge(JudgeOptions(criteria=["coherence", "novelty"])).score(
                    d, RunContext(llms=provider)
                )
            finally:
                await provider.aclose()

        judgments = asyncio.run(go())
        bodies = [r.body for r in server.chat_requests]
    assert {j.status for j in judgments} == {"ok"}
    for body in bodies:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        assert "Criterion:" not in system and user.count("Criterion: ") == 1


def test_the_debate_argues_from_batched_factors(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, judged=False)

    def reply(body):
        if "\nYour role: " in body["messages"][0]["content"]:
            return json.dumps({"statement": "agreed", "score": 60})
        return None  # the server's schema-valid default for the batched factors

    with LLMServer(replies=lambda body: reply(body) or _default(body)) as server:
        result = judge(
            run_dir,
            JudgeRequest(
                judge="core12",
                debate=True,
                batch_aspects=True,
                limit=1,
                llm_backend="openai",
                base_url=server.openai_url,
                model="m",
                no_cache=True,
            ),
        )
        calls = len(server.chat_requests)
    rows = list(iter_jsonl(run_dir / "judgments.jsonl"))
    factors = [r for r in rows if r["judge"] == "core12"]
    overall = [r for r in rows if r["judge"] == "debate"]
    assert result.judged == 1 and len(factors) == 12 and {r["mode"] for r in factors} == {"batched"}
    assert overall[0]["value"] == 60.0 and overall[0]["mode"] is None
    assert calls == 1 + 4  # one batched factor call, then one unanimous debate round


def _default(body):
    from usersimcrs.testing.llm_server import default_reply

    return default_reply("openai", body)


def test_b6_reports_run_level_prefix_reuse_from_the_real_prompt_builder(tmp_path):
    """B6's plan-based figure, character-exact: quality and core12 share >= 80% of their prompt text
    with prompts sent before them; one conversation alone cannot reach that with five criteria."""
    from benchmarks.judge_cost import prefix_reuse, run_prefix_reuse

    run_dir = tmp_path / "run"
    write_run(run_dir, judged=False)
    dialogues = [Dialogue.model_validate(r) for r in iter_jsonl(run_dir / "dialogues.jsonl")][:4]
    for cls in (QualityJudge, Core12Judge):
        judge_obj = cls()
        plans = [judge_obj.plan(d) for d in dialogues]
        assert run_prefix_reuse(plans) >= 0.8
        within = prefix_reuse(["\n".join(m.content for m in c.messages) for c in plans[0]])
        assert within <= (len(plans[0]) - 1) / len(plans[0])


def test_another_producers_mode_field_is_kept_in_provenance():
    from usersimcrs.judges.base import Judgment

    record = Judgment.model_validate(
        {"conversation_id": "a", "judge": "quality", "name": "fluency", "value": 3, "scale": [1, 5], "mode": "pairwise"}
    )
    assert record.mode is None and record.provenance == {"mode": "pairwise"}


def test_block_hashes_identify_byte_prefixes_of_whole_blocks():
    """The prefix counter's hash chain (issue #22): entry i names the first i+1 blocks of UTF-8 bytes, so
    prompts agree on exactly the entries of their common whole-block prefix (multi-byte text included)."""
    from usersimcrs.llm.usage import PREFIX_BLOCK_CHARS, block_hashes

    head = "é" * PREFIX_BLOCK_CHARS  # two blocks of bytes
    one, two = block_hashes(head + "a" * 300), block_hashes(head + "b" * 300)
    assert len(one) == len(two) == (2 * PREFIX_BLOCK_CHARS + 300) // PREFIX_BLOCK_CHARS
    assert one[:2] == two[:2] and one[2] != two[2]
    assert block_hashes("x" * (PREFIX_BLOCK_CHARS - 1)) == [] and block_hashes(head) == one[:2]
