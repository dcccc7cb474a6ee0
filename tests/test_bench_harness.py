"""The benchmark harness's pieces on a tiny scale (the timed figures themselves live in benchmarks/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from benchmarks.first_conversation import first_line_seen
from benchmarks.harness import ceiling_line, table
from benchmarks.high_concurrency import high_concurrency_runs
from benchmarks.judge_cost import prefix_reuse
from benchmarks.real_workload import cpu_ceiling
from benchmarks.scenarios import DEFAULT_CLIENT, Scenario, b1_efficiency, b1_high_rows, timed_run
from benchmarks.server import crs_server, llm_server, parse_cpus
from benchmarks.setups import agenda_config, llm_user_config
from benchmarks.timing import median_figures

ROOT = Path(__file__).resolve().parents[1]


def test_prefix_reuse_counts_only_prefixes_seen_before():
    assert prefix_reuse(["abcd", "abxy", "zzzz"]) == 2 / 12
    assert prefix_reuse(["same", "same"]) == 0.5
    assert prefix_reuse([]) == 0.0


def test_table_lists_every_scenario_with_its_verdict():
    rows = [Scenario("B1", "t", "h", 0.5, ">= 0.85", False), Scenario("B3", "c", "h", 0, "== 0", True)]
    text = table(rows)
    assert "B1" in text and "NO" in text and "yes" in text and len(text.splitlines()) == 4


def test_timed_runs_count_llm_calls_and_split_wall_time(tmp_path):
    with llm_server(5) as url:
        llm = timed_run(llm_user_config(url, conversations=6, concurrency=3), tmp_path / "llm")
        lean = timed_run(llm_user_config(url, conversations=6, concurrency=3, client="lean"), tmp_path / "lean")
        cached = timed_run(
            llm_user_config(url, conversations=4, concurrency=2, cache_dir=str(tmp_path / "c")), tmp_path / "a"
        )
        again = timed_run(
            llm_user_config(url, conversations=4, concurrency=2, cache_dir=str(tmp_path / "c")), tmp_path / "b"
        )
    assert llm.conversations == 6 and llm.failed == 0 and llm.llm_calls >= 12
    assert 0 < llm.llm_wait_s < llm.wall_s * 3  # up to three calls overlap
    assert cached.llm_calls > 0 and again.llm_calls == 0 and again.cache_hits == cached.llm_calls
    agenda = timed_run(agenda_config(conversations=5, concurrency=1), tmp_path / "agenda")
    assert agenda.llm_calls == 0 and agenda.simulator_s > 0 and agenda.crs_s > 0
    assert lean.conversations == 6 and lean.failed == 0 and lean.llm_calls == llm.llm_calls
    by_c = {"official": {1: llm, 8: llm, 32: llm, 64: llm}, "lean": {1: lean, 8: lean, 32: lean, 64: lean}}
    row = b1_efficiency(by_c, {"official": {"c32": llm}})
    headline = row.figures["headline_client"]
    assert (
        row.key == "B1"
        and 0 < row.figures["official"]["C=1"]["efficiency"]
        and "bm25_crs_C=32" in row.figures["official"]
    )
    assert headline == DEFAULT_CLIENT == "lean" and row.value == row.figures[headline]["C=32"]["efficiency"]
    assert headline in row.headline


def test_high_concurrency_figures_are_per_call_costs_and_ratios_of_one_run(tmp_path):
    with llm_server(5) as llm_url, crs_server() as crs_url:
        figures = high_concurrency_runs(
            llm_url, crs_url, tmp_path, clients=("lean",), concurrency=(4,), per_slot=2, minimum=6, latency_s=0.005
        )
    at = figures["lean"]["C=4"]
    assert at["conversations"] == 8 and at["failed"] == 0 and at["llm_calls"] >= 8
    assert at["cpu_ms_per_conversation"] > at["cpu_ms_per_llm_call"] > 0 and 0 < at["efficiency"] <= 1.5
    rows = b1_high_rows({"lean": {"C=128": at}})
    assert [r.key for r in rows] == ["B1-128", "B1-cpu", "B1-conv"] and all("lean" in r.headline for r in rows)


def test_repeated_runs_report_the_median_of_each_figure_and_every_run():
    runs = [
        {"efficiency": e, "cpu_ms_per_llm_call": c, "cpu_ms_per_conversation": c * 4, "wall_s": w}
        for e, c, w in [(0.80, 1.2, 9.0), (0.90, 0.9, 8.0), (0.85, 1.0, 8.5)]
    ]
    merged = median_figures(runs)
    assert merged["efficiency"] == 0.85 and merged["cpu_ms_per_llm_call"] == 1.0 and merged["wall_s"] == 8.5
    assert merged["repeats"] == 3 and merged["cpu_ms_per_llm_call_runs"] == [1.2, 0.9, 1.0]
    assert median_figures(runs[:1]) == runs[0]


def test_the_cpu_ceiling_is_what_two_cores_allow_at_the_ideal_rate():
    # C = 256 at 200 ms, 6 calls per conversation: 1,280 calls/s ideal, 213.3 conversations/s
    wide = cpu_ceiling(5.0, 7.0, 6.0, 1280.0)
    assert wide["cores_needed_at_ideal_rate"] == pytest.approx(0.012 * 1280 / 6, abs=0.01)  # 2.56 cores
    assert wide["efficiency_ceiling_on_two_cores"] == pytest.approx(2 / 2.56, abs=0.001)
    assert wide["servers_efficiency_ceiling_on_two_cores"] == 1.0  # 1.49 cores: the servers alone fit
    heavy = cpu_ceiling(0.0, 11.0, 6.0, 1280.0)  # servers alone over 2 cores: no toolkit reaches 0.85
    assert heavy["efficiency_ceiling_on_two_cores"] == heavy["servers_efficiency_ceiling_on_two_cores"]
    assert heavy["servers_efficiency_ceiling_on_two_cores"] == pytest.approx(2 / (0.011 * 1280 / 6), abs=0.001)
    assert cpu_ceiling(5.0, 7.0, 6.0, 640.0)["efficiency_ceiling_on_two_cores"] == 1.0  # 1.28 cores needed
    assert set(cpu_ceiling(5.0, None, 6.0, 640.0).values()) == {None}  # servers' CPU not measured: not 0


def test_the_bench_prints_the_cpu_ceiling_beside_r1_and_nothing_without_it():
    at = {"efficiency_ceiling_on_two_cores": 0.918, "servers_efficiency_ceiling_on_two_cores": 1.0}
    wide = {"efficiency_ceiling_on_two_cores": 0.446, "servers_efficiency_ceiling_on_two_cores": 0.773}
    r1 = Scenario("R1", "real workload", "efficiency", 0.7, ">= 0.9", False, {"C=128": at, "C=256": wide})
    line = ceiling_line([r1])
    assert line is not None and "C=128: 0.918 (servers' CPU alone 1)" in line and "C=256: 0.446" in line
    unmeasured = {"C=128": {**at, "efficiency_ceiling_on_two_cores": None}}  # servers' CPU unknown
    assert ceiling_line([Scenario("R1", "t", "h", 0.7, "t", False, unmeasured)]) is None
    assert ceiling_line([Scenario("B1", "t", "h", 0.9, "t", True, {})]) is None


needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")


@needs_affinity
def test_cpu_lists_parse_as_taskset_writes_them_and_name_only_cpus_there_are():
    mine = sorted(os.sched_getaffinity(0))
    assert parse_cpus(str(mine[0])) == {mine[0]}
    if mine == list(range(mine[0], mine[-1] + 1)):
        assert parse_cpus(f"{mine[0]}-{mine[-1]}") == set(mine) == parse_cpus(f" {mine[0]}-{mine[-1]} ")
    assert parse_cpus(",".join(map(str, mine))) == set(mine)
    for bad in ("", "a", "1-", "-1", "0,,1", "1-0", str(max(mine) + 1)):
        with pytest.raises(ValueError, match="CPU list"):
            parse_cpus(bad)


@needs_affinity
def test_a_pinned_benchmark_server_and_every_thread_of_it_keep_to_its_cpus():
    cpu = max(os.sched_getaffinity(0))
    with crs_server("ievalm", cpus=frozenset({cpu})) as url:
        with urllib.request.urlopen(url, timeout=10) as answer:  # a request: the server has started its threads
            answer.read()
        threads = Path(f"/proc/{url.pid}/task")
        assert all(os.sched_getaffinity(int(t.name)) == {cpu} for t in threads.iterdir())
    with llm_server(1, cpus=frozenset({cpu})) as url:
        assert os.sched_getaffinity(url.pid) == {cpu}


@needs_affinity
@pytest.mark.slow
def test_the_real_workload_runs_with_the_toolkit_and_the_servers_on_cpus_of_their_own():
    cpus = sorted(os.sched_getaffinity(0))
    toolkit, servers = str(cpus[0]), str(cpus[-1])
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.real_workload", "--concurrency", "4", "--conversations", "8",
         "--per-slot", "2", "--toolkit-cpus", toolkit, "--server-cpus", servers],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["cpus"] == {"toolkit": [int(toolkit)], "servers": [int(servers)]}
    assert out["runs"]["C=4"]["conversations"] == 8 and out["runs"]["C=4"]["failed"] == 0
    refused = subprocess.run(
        [sys.executable, "-m", "benchmarks.real_workload", "--server-cpus", str(cpus[-1] + 1)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2 and "--server-cpus: CPU list" in refused.stderr.strip().splitlines()[-1]


def test_a_conversation_that_failed_in_any_repeat_is_counted_and_no_r1_figure_passes():
    from benchmarks.scenarios import r1_rows

    def run(failed: int, efficiency: float) -> dict:
        return {
            "failed": failed,
            "efficiency": efficiency,
            "cpu_ms_per_llm_call": 0.5,
            "cpu_ms_per_conversation": 3.0,
            "toolkit_share_of_cpu": 0.4,
            "load_average_before": [1.0, 1.0, 1.0],
        }

    merged = median_figures([run(0, 0.95), run(3, 0.95), run(0, 0.95)])
    assert merged["failed"] == 3  # the sum, not the median (0)
    assert merged["load_average_before"] == [1.0, 1.0, 1.0] and merged["efficiency_runs"] == [0.95] * 3
    workload = {"workload": {"fallback_catalogue": False}}
    clean = r1_rows({**workload, "C=128": run(0, 0.95), "C=256": run(0, 0.9)})
    assert all(row.passed for row in clean if row.key != "R1-share")
    failing = r1_rows({**workload, "C=128": merged, "C=256": run(0, 0.9)})
    assert not any(row.passed for row in failing)


def test_time_to_first_conversation_waits_for_a_complete_line(tmp_path):
    path = tmp_path / "dialogues.jsonl"
    assert not first_line_seen(path)
    path.write_bytes(b'{"conversation_id": "a"')
    assert not first_line_seen(path)
    path.write_bytes(b'{"conversation_id": "a"}\n')
    assert first_line_seen(path)


def test_bench_command_is_registered():
    out = subprocess.run(
        [sys.executable, "-m", "usersimcrs", "bench", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0 and "--quick" in out.stdout and "--output" in out.stdout


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout


@pytest.mark.slow
def test_bench_writes_both_workloads_to_the_named_folder_and_leaves_the_checkout_clean(tmp_path):
    """Issue #19/#22: `usersimcrs bench --quick --output DIR` parses, runs every scenario (here at --tiny sizes,
    about half a minute), reports the real and the fixed-length workload, and writes only DIR/results.json."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    before = _git_status()
    committed = (ROOT / "benchmarks" / "results.json").read_bytes()
    out = tmp_path / "bench"
    done = subprocess.run(
        [sys.executable, "-m", "usersimcrs", "bench", "--quick", "--tiny", "--output", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a target missed (tiny sizes and a busy machine)
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["mode"] == "tiny" and len(results["load_average_at_start"]) == 3
    assert results["cpus"] == {"toolkit": "any (shared)", "servers": "any (shared)"}
    speed = results["machine_speed"]  # the machine-speed reference, measured in the same run
    assert speed["cpu_s_at_start"] > 0 and speed["cpu_s_at_end"] > 0 and "additions" in speed["reference"]
    assert f"machine speed at the start {speed['cpu_s_at_start']} s" in done.stdout
    rows = results["scenarios"]
    for key in (
        "R1",
        "R1-cpu",
        "R1-conv",
        "R1-floor",
        "R1-floor-conv",
        "R5",
        "R7",
        "R7-start",
        "B1",
        "B1-128",
        "B1-cpu",
        "B7",
    ):
        assert rows[key]["value"] is not None, (key, rows[key])  # measured, not an error row
    real = rows["R1"]["figures"]
    assert real["C=128"]["llm_calls_per_conversation"] == 6 and real["C=128"]["failed"] == 0
    assert real["C=128"]["server_cpu_s"]["crs_server"] is not None and 0 < real["C=128"]["toolkit_share_of_cpu"] < 1
    assert 0 < real["C=128"]["recommended_items"]["unresolved"] < 1  # the CRS names titles the catalogue lacks
    assert set(rows["R7"]["figures"]["startup_parts"]) >= {"imports_s", "items_s"}
    floor = rows["R1-floor"]  # the HTTP exchanges alone: informational, beside R1
    assert floor["passed"] is None and floor["figures"]["conversations"] == 128
    assert 0 < rows["R1-floor-conv"]["value"] == floor["figures"]["cpu_ms_per_conversation"]
    ceiling = real["C=128"]["efficiency_ceiling_on_two_cores"]
    assert 0 < ceiling <= 1 and f"C=128: {ceiling:g}" in done.stdout  # what the 2 cores allow, beside R1
    assert "R1 " in done.stdout and "B1 " in done.stdout and f"wrote {out / 'results.json'}" in done.stdout
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert (ROOT / "benchmarks" / "results.json").read_bytes() == committed
    assert _git_status() == before


def test_bench_refuses_a_cpu_list_the_machine_lacks_in_one_line_before_running(tmp_path):
    lacking = str(max(os.sched_getaffinity(0)) + 1) if hasattr(os, "sched_getaffinity") else "0"
    done = subprocess.run(
        [sys.executable, "-m", "usersimcrs", "bench", "--tiny", "--server-cpus", lacking, "--output", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "--server-cpus" in done.stderr
    assert "benchmarks" not in done.stdout and not (tmp_path / "results.json").exists()  # nothing ran


def test_bench_refuses_to_write_over_the_committed_results():
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    done = subprocess.run(
        [sys.executable, "-m", "usersimcrs", "bench", "--tiny", "--output", str(ROOT / "benchmarks")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "committed file" in done.stderr and "--output" in done.stderr


def test_memory_child_reports_its_own_peak_not_the_parents():
    """ru_maxrss survives fork + exec on Linux; the B5 child must not report the harness's size."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc (Linux)")
    ballast = bytearray(400 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page: the parent is now > 400 MB
    code = "from benchmarks.memory_child import peak_rss_kb; print(peak_rss_kb())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert float(done.stdout.strip()) / 1024 < 300
    del ballast


def test_the_figures_of_docs_benchmarks_are_those_of_the_committed_results():
    from benchmarks.docs_figures import main as docs_figures

    assert docs_figures(["--check"]) == 0  # regenerate: python -m benchmarks.docs_figures


def test_the_machine_speed_reference_is_the_cpu_time_of_a_fixed_workload_and_reaches_the_page():
    """Issue #22: CPU ms per call from different machines are compared through a reference measured in the
    same run (benchmarks/reference.py); docs_figures prints it when the results hold one."""
    from benchmarks.docs_figures import RESULTS, render
    from benchmarks.reference import describe, reference_cpu_s

    small = reference_cpu_s(additions=200_000, slices=2)
    assert 0 < small < 5 and "additions" in describe()
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    results["machine_speed"] = {"reference": describe(), "cpu_s_at_start": 1.25, "cpu_s_at_end": 1.5}
    assert "1.25 s at the start, 1.5 s at the end" in render(results)
    results.pop("machine_speed")
    assert "Machine speed" not in render(results)  # results older than the reference render as before


def test_the_transport_floor_replays_the_toolkits_own_requests_and_only_them(tmp_path):
    from benchmarks.experiments import floor_row, record_exchanges, replay
    from benchmarks.server import llm_counters
    from benchmarks.setups import REAL_TURNS, real_crs_options

    with llm_server(5, fixed_booleans=False) as llm, crs_server("ievalm", *real_crs_options()) as crs:
        llm_sent, crs_sent = record_exchanges(llm, crs, tmp_path / "recorded", conversations=2)
        # a conversation of the real workload: six LLM requests, each answered by the CRS over HTTP/1.0
        assert len(llm_sent) == len(crs_sent) == 2 * REAL_TURNS
        assert {x.target.path for x in llm_sent} == {b"/v1/chat/completions"}
        assert all(x.body and b'"messages"' in x.body for x in llm_sent)
        before = llm_counters(llm)["chat"]
        figures = replay(llm, crs, (llm_sent, crs_sent), conversations=3, concurrency=2)
        assert llm_counters(llm)["chat"] - before == 3 * REAL_TURNS
    row = floor_row(figures, concurrency=2, latency_s=0.005)
    assert row["conversations"] == 3 and row["cpu_ms_per_conversation"] > 0
    assert row["server_cpu_ms_per_conversation"] is not None and 0 < row["efficiency"] <= 1.05


def test_every_benchmark_command_and_file_the_docs_name_exists():
    """A module folded away (issue #35: the one-off experiments into benchmarks/experiments.py) leaves no
    doc command behind: each `python -m benchmarks.X [experiment]` in docs/ or README.md names a module
    that is there and an experiment `benchmarks.experiments` runs (an old module's name, with the commit
    its figures were taken at, may still be cited as history)."""
    import re

    from benchmarks.experiments import main as experiments

    texts = [p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]]
    text = "\n".join(texts)
    modules = set(re.findall(r"python -m\s+benchmarks\.(\w+)", text))
    assert "experiments" in modules
    assert not [m for m in modules if not (ROOT / "benchmarks" / f"{m}.py").is_file()]
    named = set(re.findall(r"python -m\s+benchmarks\.experiments\s+([\w-]+)", text))
    assert named == {"floor", "minimal-client", "profile-shares"}
    for name in named:
        with pytest.raises(SystemExit) as shown:
            experiments([name, "--help"])
        assert shown.value.code == 0


def test_profile_shares_give_each_sample_to_its_first_component_and_leave_out_start_up(tmp_path, capsys):
    from benchmarks.experiments import STARTUP, main, shares

    lines = [
        "main (x.py:1);_find_and_load (imp:2) 7\n",  # start-up: counted, not in the shares
        "run (engine/loop.py:3);post (lean_http.py:9) 6\n",  # the LLM client comes before the event loop
        "resolve (core/items.py:4) 2\n",
        "not a sample\n",
    ]
    counts, run_total = shares(lines)
    assert counts[STARTUP] == 7 and counts["LLM client (lean_http, http_client)"] == 6 and run_total == 8
    path = tmp_path / "prof.txt"
    path.write_text("".join(lines), encoding="utf-8")
    assert main(["profile-shares", str(path)]) == 0
    assert "75.0%" in capsys.readouterr().out
