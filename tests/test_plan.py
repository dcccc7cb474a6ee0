"""`usersimcrs plan PILOT_DIR`: conversations per cell for 80% power and the tokens and cost of the full matrix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from usersimcrs.cli import main
from usersimcrs.pipeline.plan import plan_study

ROOT = Path(__file__).resolve().parents[1]


def pilot_config(folder: Path, llm: dict, judges: list[dict]) -> Path:
    """An LLM user against two built-in CRSs on the 40-movie sample, judged: a pilot of 6 conversations per cell."""
    config = {
        "name": "pilot",
        "concurrency": 4,
        "base": {
            "seed": 3,
            "conversations": 6,
            "max_turns": 2,
            "progress": False,
            "items": {
                "path": str(ROOT / "configs/data/tiny_movies.csv"),
                "delimiters": {"genres": "|", "keywords": "|"},
            },
            "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
            "llm": {**llm, "cache": False},
        },
        "simulators": [{"name": "llm_user", "type": "llm_single", "min_turns": 1}],
        "crs": [{"name": "oracle", "type": "oracle"}, {"name": "random", "type": "random"}],
        "metrics": {"options": {"satisfaction": False}},
        "judges": judges,
        "report": False,
    }
    path = folder / "pilot.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    from usersimcrs.testing.llm_server import LLMServer

    folder = tmp_path_factory.mktemp("plan")
    with LLMServer() as server:
        llm = server.config("openai").model_dump(mode="json", exclude_defaults=True)
        judges = [
            {
                "judge": "quality",
                "criteria": ["fluency"],
                "llm_backend": "openai",
                "base_url": llm["base_url"],
                "model": llm["model"],
            }
        ]
        assert (
            main(["matrix", str(pilot_config(folder, llm, judges)), "-o", str(folder / "pilot"), "--no-progress"]) == 0
        )
        yield folder / "pilot", server


def test_the_plan_sizes_the_study_from_the_adjacent_pairs(pilot):
    folder, _ = pilot
    plan = plan_study(folder, metric="recall@10", price=(1.0, 2.0))
    assert plan.metric == "recall@10" and [(p.crs, p.next_crs) for p in plan.pairs] == [("oracle", "random")]
    pair = plan.pairs[0]
    assert pair.n_pairs == 6 and pair.mean_difference > 0
    assert plan.conversations_per_cell == pair.n_for_80_power
    assert plan.total_conversations == 2 * plan.conversations_per_cell


def test_the_plan_prices_simulation_and_judging_per_conversation(pilot):
    folder, _ = pilot
    plan = plan_study(folder, metric="recall@10", price=(1.0, 2.0))
    for cell in plan.cells:
        spends = {s.purpose: s for s in cell.per_conversation}
        assert set(spends) == {"simulation", "judge quality"}
        assert spends["simulation"].prompt_tokens > 0  # the LLM user's calls, measured in the pilot
        assert spends["judge quality"].prompt_tokens > 0  # the dry run counts judged conversations too
        assert spends["judge quality"].cost_usd is not None
    per_conversation = sum(s.prompt_tokens for c in plan.cells for s in c.per_conversation)
    assert plan.prompt_tokens == round(plan.conversations_per_cell * per_conversation)
    assert plan.cost_usd is not None and plan.cost_usd > 0


def test_without_a_price_the_cost_is_unknown_not_zero(pilot):
    plan = plan_study(pilot[0], metric="recall@10")
    assert plan.conversations_per_cell is not None and plan.cost_usd is None


def test_the_command_prints_the_plan(pilot, capsys):
    assert main(["plan", str(pilot[0]), "--metric", "recall@10", "--price", "1,2"]) == 0
    out = capsys.readouterr().out
    assert "oracle vs random" in out and "conversations per cell for 80% power" in out and "cost $" in out
    assert main(["plan", str(pilot[0]), "--metric", "recall@10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metric"] == "recall@10"
    assert main(["plan", str(pilot[0]), "--price", "cheap"]) == 2
