"""The prompt-echo check of the LLM simulators gives difflib's answer without difflib's cost."""

from __future__ import annotations

import difflib
import random

from usersimcrs.simulators.prompting import _mostly_copied


def difflib_answer(text: str, source: str, share: float = 0.6) -> bool:
    """The former implementation: difflib's longest common block."""
    if text in source:
        return True
    match = difflib.SequenceMatcher(None, text, source, autojunk=False).find_longest_match(0, len(text), 0, len(source))
    return match.size >= 20 and match.size >= share * len(text)


def test_window_search_agrees_with_difflib_on_random_echoes():
    rng = random.Random(7)
    words = "the a movie film like love horror comedy drama please recommend something you me i want to watch".split()
    for _ in range(600):
        source = " ".join(rng.choice(words) for _ in range(rng.randint(5, 120)))
        if rng.random() < 0.5:  # part of the source, padded with other words
            start = rng.randint(0, len(source))
            piece = source[start : start + rng.randint(0, 90)]
            text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 6))) + piece
            text += " ".join(rng.choice(words) for _ in range(rng.randint(0, 6)))
        else:
            text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 25)))
        for share in (0.6, 0.5, 0.9):
            assert _mostly_copied(text, source, share) == difflib_answer(text, source, share), (text, source, share)


def test_edges_of_the_thresholds():
    source = "x" * 5 + "abcdefghijklmnopqrstuvwxyz" + "y" * 5
    assert _mostly_copied("abcdefghijklmnopqrst", source)  # exactly 20 and contained
    assert not _mostly_copied("abcdefghijklmnopqrs!" + "z" * 14, source)  # 19 shared
    text = "abcdefghijklmnopqrstuvwxyz" + "0" * 17  # 26 of 43 shared: 0.6 * 43 = 25.8
    assert _mostly_copied(text, source) == difflib_answer(text, source) is True
    text = "abcdefghijklmnopqrstuvwxyz" + "0" * 18  # 26 of 44: 0.6 * 44 = 26.4
    assert _mostly_copied(text, source) == difflib_answer(text, source) is False
