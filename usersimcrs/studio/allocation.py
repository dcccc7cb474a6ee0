"""Who gets what: balanced, seeded choices of CRSs, battle pairs and conversations to show.

Each choice takes the least-used option (counting finished work and recent unfinished
assignments) and breaks ties with a random draw seeded by the study seed, the participant's index
and the step, so the same joins in the same order give the same assignments.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from typing import Sequence, TypeVar

from usersimcrs.studio.pool import PoolEntry
from usersimcrs.studio.records import ShownConversation

T = TypeVar("T")


def step_rng(seed: int, participant_index: int, step: int) -> random.Random:
    """The random source of one assignment: sha256 of the study seed, participant index and step."""
    digest = hashlib.sha256(f"usersimcrs-studio:{seed}:{participant_index}:{step}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def least_used(options: Sequence[T], counts: dict[T, int], rng: random.Random) -> T:
    """The option with the smallest count; ties drawn at random."""
    fewest = min(counts.get(o, 0) for o in options)
    return rng.choice([o for o in options if counts.get(o, 0) == fewest])


def choose_chat_crs(crs: Sequence[str], counts: dict[str, int], rng: random.Random) -> str:
    """The CRS with the fewest conversations so far."""
    return least_used(sorted(crs), counts, rng)


def choose_battle(crs: Sequence[str], counts: dict[tuple[str, str], int], rng: random.Random) -> tuple[str, str]:
    """The CRS pair with the fewest battles so far, in random order (which one is 'A')."""
    pairs: list[tuple[str, str]] = list(itertools.combinations(sorted(set(crs)), 2))
    chosen: tuple[str, str] = least_used(pairs, counts, rng)
    pair = list(chosen)
    rng.shuffle(pair)
    return pair[0], pair[1]


def choose_conversations(
    candidates: Sequence[PoolEntry], counts: dict[str, int], n: int, rng: random.Random, *, cap: int | None = None
) -> list[PoolEntry]:
    """Up to `n` conversations, least-shown first (ties at random), leaving out those at `cap`."""
    keyed = [(counts.get(e.dialogue.conversation_id, 0), rng.random(), i) for i, e in enumerate(candidates)]
    ordered = [candidates[i] for count, _, i in sorted(keyed) if cap is None or count < cap]
    return ordered[:n]


def annotation_batch(
    candidates: Sequence[PoolEntry],
    gold: Sequence[PoolEntry],
    counts: dict[str, int],
    gold_counts: dict[int, int],
    *,
    batch: int,
    k: int,
    rng: random.Random,
) -> list[ShownConversation]:
    """A batch of conversations still short of `k` annotations, with one gold conversation hidden in it."""
    chosen = choose_conversations(candidates, counts, batch, rng, cap=k)
    shown = [ShownConversation(conversation_id=e.dialogue.conversation_id, source=e.source) for e in chosen]
    if shown and gold:
        number = least_used(list(range(len(gold))), gold_counts, rng)
        entry = gold[number]
        position = rng.randint(0, len(shown))
        shown.insert(
            position,
            ShownConversation(conversation_id=entry.dialogue.conversation_id, source=entry.source, gold=number),
        )
    return shown


def turing_batch(
    human: Sequence[PoolEntry],
    simulated: Sequence[PoolEntry],
    counts: dict[str, int],
    *,
    batch: int,
    exclude: set[str],
    rng: random.Random,
) -> list[ShownConversation]:
    """Half human, half simulated conversations (least-shown first), shuffled."""
    n_human = batch // 2
    picks = [
        (entry, "human")
        for entry in choose_conversations(
            [e for e in human if e.dialogue.conversation_id not in exclude], counts, n_human, rng
        )
    ]
    picks += [
        (entry, "simulated")
        for entry in choose_conversations(
            [e for e in simulated if e.dialogue.conversation_id not in exclude], counts, batch - n_human, rng
        )
    ]
    rng.shuffle(picks)
    return [ShownConversation(conversation_id=e.dialogue.conversation_id, source=e.source, truth=t) for e, t in picks]
