"""Evaluate your own CRS from Python: 50 agenda-based conversations, metrics, then an LLM judge.

Run it from the repository root::

    python examples/custom_crs.py --items configs/data/tiny_movies.csv --output runs/example
    python examples/custom_crs.py ... --judge-url http://127.0.0.1:8000/v1 --judge-model my-model

Only the public API (`import usersimcrs as us`) is used. The CRS below is a toy: it recommends
the most popular items of the genre the user mentions, else the most popular ones overall.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter

import usersimcrs as us


class GenreCRS:
    """A tiny CRS: any object with `async reply(history, user_utterance)` returning a dict works."""

    def __init__(self, items_csv: str) -> None:
        with open(items_csv, newline="", encoding="utf-8") as handle:
            self.movies = [(row["title"], row.get("genres", "").split("|")) for row in csv.DictReader(handle)]
        self.genres = Counter(g.lower() for _, genres in self.movies for g in genres if g)

    async def reply(self, history: us.Dialogue, user_utterance: us.Utterance | None) -> dict:
        text = (user_utterance.text if user_utterance else "").lower()
        wanted = [g for g in self.genres if g in text]
        picks = [title for title, genres in self.movies if not wanted or wanted[0] in {g.lower() for g in genres}][:3]
        if not wanted and history.utterances:
            return {"text": "Which genre do you like?", "items": []}
        return {"text": "You might like " + ", ".join(picks) + ".", "items": [{"title": t} for t in picks]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", default="configs/data/tiny_movies.csv")
    parser.add_argument("--ratings", default="configs/data/tiny_ratings.csv")
    parser.add_argument("--output", default="runs/example")
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--judge-url", help="an OpenAI-compatible server for the judge (skip the judge without it)")
    parser.add_argument("--judge-model", default="gpt-4o-mini")
    args = parser.parse_args()

    run = us.simulate(
        crs=GenreCRS(args.items),
        simulator={"type": "agenda", "nlu": "rules", "nlg": "template"},
        items=args.items,
        ratings=args.ratings,
        conversations=args.conversations,
        output=args.output,
        overwrite=True,
    )
    scores = us.score(run)
    print(f"{len(run.dialogues)} conversations in {run.path}")
    print(scores.summary[scores.summary["subset"] == "all"][["metric", "n", "mean"]].head(8).to_string(index=False))
    if args.judge_url:
        result = us.judge(run, "quality", llm=us.LLM("openai", model=args.judge_model, base_url=args.judge_url))
        print(f"judge: {result.judgments_written} judgments written, statuses {result.statuses}")
    print(f"report: {us.write_report(run)}")


if __name__ == "__main__":
    main()
