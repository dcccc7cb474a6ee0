"""R7's child: a fresh interpreter that times what `usersimcrs run` does before its first LLM call,
piece by piece, and prints it as JSON::

    python -m benchmarks.startup_child CONFIG.json SPAWNED_AT

`SPAWNED_AT` is the parent's `time.time()` just before it started this process, so interpreter
start-up is counted too. Imports: the modules a run of the real workload loads (CLI, engine, the
openai backend with its lean client, the crs_arena connector). Data: the item collection and
the ratings, loaded as the engine loads them (the cyclic collector paused). Wall times, and CPU times for imports and items.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    entered = time.time()
    config_path, spawned_at = sys.argv[1], float(sys.argv[2])
    started, cpu_started = time.perf_counter(), time.process_time()
    # lazy: these imports are what this child times, as a fresh `usersimcrs run` makes them
    import usersimcrs.cli  # noqa: F401 - what `usersimcrs run` imports first
    from usersimcrs.cli import build_parser, modules_for

    build_parser(modules_for(["run", config_path]))  # as `usersimcrs run CONFIG` builds it
    # lazy: timed as well: the modules a run imports next
    import crs_connectors.crs_arena  # noqa: F401
    import usersimcrs.llm.backends.openai_chat  # noqa: F401
    import usersimcrs.pipeline.simulate  # noqa: F401
    from usersimcrs.config import load_run_config
    from usersimcrs.engine.loop import collector_paused
    from usersimcrs.engine.runner import load_items, load_ratings

    imported, cpu_imported = time.perf_counter(), time.process_time()
    config = load_run_config(config_path)
    configured = time.perf_counter()
    with collector_paused():  # as the engine's build_context loads them
        load_items(config)
        items_loaded, cpu_items = time.perf_counter(), time.process_time()
        load_ratings(config)
        ratings_loaded = time.perf_counter()
    print(
        json.dumps(
            {
                "interpreter_s": round(entered - spawned_at, 3),
                "imports_s": round(imported - started, 3),
                "config_s": round(configured - imported, 3),
                "items_s": round(items_loaded - configured, 3),
                "ratings_s": round(ratings_loaded - items_loaded, 3),
                "imports_cpu_s": round(cpu_imported - cpu_started, 3),  # CPU time: less moved by other load
                "items_cpu_s": round(cpu_items - cpu_imported, 3),  # config and items
            }
        )
    )


if __name__ == "__main__":
    main()
