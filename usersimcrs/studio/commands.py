"""The studio's commands as the CLI runs them: each loads the study, does one thing, prints, returns a code."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from usersimcrs.errors import UserError
from usersimcrs.report.tables import markdown_table
from usersimcrs.studio.config import load_study
from usersimcrs.studio.export import export_study
from usersimcrs.studio.loadtest import print_load_test, run_load_test
from usersimcrs.studio.server import require_web_stack, serve, study_keys, write_links
from usersimcrs.studio.service import Pools, StudyService
from usersimcrs.studio.store import StudyStore


def serve_command(study_path: str, *, output: str | None, host: str | None, port: int | None) -> int:
    require_web_stack()
    serve(load_study(study_path, output=output), host=host, port=port)
    return 0


def export_command(study_path: str, directory: str, *, output: str | None) -> int:
    """Export and print what was written, the annotations' agreement and the Turing figures."""
    summary = export_study(load_study(study_path, output=output), directory)
    print(
        f"{summary.participants} participants ({summary.completed} completed); {summary.conversations} conversations "
        f"exported ({summary.labelled} labelled, {summary.conversations_failed} failed by their CRS); "
        f"{summary.votes} votes"
    )
    if summary.conversations_open or summary.conversations_empty or summary.battles_without_vote:
        print(
            f"not exported: {summary.conversations_open} conversations still open, {summary.conversations_empty} "
            f"ended without a message, {summary.battles_without_vote} battles without a vote yet"
        )
    if summary.agreement:
        print(
            f"annotations: {summary.annotations} of {summary.annotated_conversations} conversations; gold checks "
            f"{summary.gold_passed}/{summary.gold_checks} passed"
        )
        table = pd.DataFrame(summary.agreement)
        print("inter-annotator agreement (Krippendorff's alpha, ordinal):")
        print(markdown_table(table.fillna("not measured")), end="")
    if summary.turing:
        print("turing task (people) beside the discriminator of `usersimcrs fidelity`:")
        print(markdown_table(pd.DataFrame(summary.turing).fillna("")), end="")
    for note in summary.notes:
        print(f"note: {note}")
    print(f"written: {', '.join(str(Path(directory) / f) for f in summary.files)}")
    return 0


def links_command(study_path: str, count: int, *, output: str | None, host: str | None, port: int | None) -> int:
    """Issue `count` personal links now (the server may be stopped) and print them."""
    if count < 1:
        raise UserError("--links: give a number of links of 1 or more")
    study = load_study(study_path, output=output)
    store = StudyStore(study.folder)
    try:
        service = StudyService(study, store, study_keys(study, create=True), Pools(), None)
        issued = service.issue_links(count)
        base = f"http://{host or study.config.host}:{study.config.port if port is None else port}"
        for participant_id in issued:
            print(f"{participant_id}\t{base}/p/{service.keys.participant_token(participant_id)}/")
        print(f"all links: {write_links(service, base, study.folder)}")
    finally:
        store.close()
    return 0


def load_test_command(
    study_path: str, *, participants: int, duration_s: float, kill_at_s: float | None, output: str | None
) -> int:
    result = run_load_test(
        study_path, participants=participants, duration_s=duration_s, kill_at_s=kill_at_s, output=output
    )
    print_load_test(result)
    return 0 if result.ok else 1
