"""Small hand-made dialogues for the metric, validity and report tests."""

from __future__ import annotations

from usersimcrs.core.dialogue import Dialogue, DialogueAct, ItemRef, Utterance

TITLES = {
    "1": "Heat (1995)",
    "2": "American President, The (1995)",
    "3": "Toy Story (1995)",
    "4": "Jumanji (1995)",
    "5": "Casino (1995)",
    "6": "Sabrina (1995)",
    "7": "Balto (1995)",
    "8": "Nixon (1995)",
    "9": "GoldenEye (1995)",
}


def ref(item_id: str, *, with_id: bool = True) -> ItemRef:
    """A reference to a test item, optionally title-only (as text-parsing connectors give)."""
    return ItemRef(id=item_id if with_id else None, title=TITLES[item_id])


def dialogue(
    cid: str,
    targets: list[str],
    lists: list[list[ItemRef]],
    *,
    user_texts: list[str] | None = None,
    agent_texts: list[str] | None = None,
    user_acts: list[list[str]] | None = None,
    feedback: list[int | None] | None = None,
    end_reason: str | None = "max_turns",
    status: str = "ok",
    simulator: str | None = None,
) -> Dialogue:
    """USER, AGENT, USER, AGENT, ...: one user turn before each system turn with the given lists."""
    d = Dialogue(
        conversation_id=cid,
        profile={"user_id": f"u-{cid}", "need": {"targets": [ref(t).model_dump() for t in targets]}},
        end_reason=end_reason,
        status=status,  # type: ignore[arg-type]
    )
    if simulator:
        d.metadata["simulator"] = simulator
    for turn, items in enumerate(lists):
        acts = (user_acts or [])[turn] if user_acts and turn < len(user_acts) else []
        text = user_texts[turn] if user_texts else f"user turn {turn + 1}"
        d.add(Utterance(participant="USER", text=text, dialogue_acts=[DialogueAct(intent=a) for a in acts]))
        agent_text = agent_texts[turn] if agent_texts else f"system turn {turn + 1}"
        fb = feedback[turn] if feedback else None
        d.add(Utterance(participant="AGENT", text=agent_text, items=items, feedback=fb))
    return d


def two_users() -> list[Dialogue]:
    """The 2-user, 3-turn example worked out by hand in tests/test_metrics_rules.py."""
    user_a = dialogue(
        "A",
        ["1", "2"],
        [[ref("1"), ref("9"), ref("2")], [ref("8"), ref("7")], [ref("2"), ref("1")]],
        user_acts=[["DISCLOSE"], ["DISCLOSE"], ["NOTE.ACCEPT"]],
    )
    user_b = dialogue(
        "B",
        ["3", "4", "5", "6"],
        # turn 3 repeats item 3 by title only: matching falls back to normalised titles
        [[ref("7"), ref("8")], [ref("3"), ref("4")], [ref("3", with_id=False), ref("9")]],
    )
    return [user_a, user_b]


def write_run(
    run_dir,
    *,
    crs: str = "popularity",
    simulator: str = "target_biased",
    n: int = 8,
    seed: int = 0,
    judged: bool = True,
    name: str | None = None,
) -> None:
    """A run folder with `n` dialogues of varying quality, a manifest and judgments (quality, core12, debate)."""
    import json
    import random
    from pathlib import Path

    from usersimcrs.core.jsonl import JsonlWriter

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{seed}:{crs}:{simulator}")
    ids = list(TITLES)
    name = name or f"{simulator}__{crs}"
    dialogues = []
    for i in range(n):
        targets = [ids[i % 9], ids[(i + 3) % 9]]
        lists = [[ref(x) for x in rng.sample(ids, 3)] for _ in range(rng.randint(2, 4))]
        d = dialogue(
            f"{name}-{i:05d}",
            targets,
            lists,
            user_acts=[[], ["ACCEPT"] if rng.random() < 0.5 else ["REJECT"]] + [[]] * 3,
        )
        d.index = i
        d.profile.user_id = f"user{i}"
        d.agent_id = crs
        if i == n - 1:
            d.status, d.error, d.end_reason = "failed", "ConnectorError: timeout", None
        dialogues.append(d)
    with JsonlWriter(run_dir / "dialogues.jsonl") as writer:
        for d in dialogues:
            writer.write(d)
    manifest = {
        "name": name,
        "config": {
            "simulator": {"type": simulator},
            "crs": {"type": crs},
            "max_turns": 4,
            "llm": {"backend": "llamacpp", "model": "gemma3"},
        },
        "seeds": {"run": seed},
        "llm": {"prompt_tokens": 100, "completion_tokens": 20},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    if not judged:
        return
    factors = ["coherence", "naturalness", "effectiveness", "novelty"]
    with JsonlWriter(run_dir / "judgments.jsonl") as writer:
        for d in dialogues[:-1]:
            for aspect in ("fluency", "recommendation_relevance"):
                value = None if (aspect == "fluency" and d.index == 0) else float(rng.randint(1, 5))
                writer.write(
                    {
                        "conversation_id": d.conversation_id,
                        "judge": "quality",
                        "name": aspect,
                        "value": value,
                        "scale": [1, 5],
                        "status": "ok" if value is not None else "parse_error",
                        "model": "m",
                        "rationale": "r",
                    }
                )
            for factor in factors:
                writer.write(
                    {
                        "conversation_id": d.conversation_id,
                        "judge": "core12",
                        "name": factor,
                        "value": float(rng.randint(0, 4)),
                        "scale": [0, 4],
                        "status": "ok",
                        "model": "m",
                        "rationale": "",
                    }
                )
            rounds = [{"common_user": float(rng.randint(40, 80)), "linguist": float(rng.randint(40, 80))}]
            rounds.append({k: v + 5 for k, v in rounds[0].items()})
            writer.write(
                {
                    "conversation_id": d.conversation_id,
                    "judge": "debate",
                    "name": "overall",
                    "value": sum(rounds[-1].values()) / 2,
                    "scale": [0, 100],
                    "status": "ok",
                    "model": "m",
                    "rationale": "",
                    "raw": {"rounds": rounds, "max_rounds": 3},
                }
            )
