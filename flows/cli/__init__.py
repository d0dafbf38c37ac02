"""`larev`: the command line over the flows.

    larev run                                   the pipeline on the embedded demo data
    larev run --task nli --train F --test F     on your own files (.parquet, .jsonl, .csv)
    larev run --params run.yaml --set larev.objective.lambda_irm=2.5 --print-params
    larev score --run runs/demo-nli --rationales F   score a rationale file with a finished run's evaluators
    larev compare --run runs/demo-nli gold leaky F.parquet   which source is better, paired by instance
    larev show runs/demo-nli                    print a run's results
    larev data get esnli --out data             e-SNLI from its authors' release (docs/data.md)

parser.py: which option sets which parameter; options.py: options, --params, --set and --print-params made from
the pydantic parameter models; commands.py: what each command does; output.py: what they print.
"""

from __future__ import annotations

import json
import logging
import os
import sys

EXIT_BAD_INPUT = 2

#: commands that talk to a Prefect API (a temporary one is started when none is configured)
_NEEDS_API = ("run", "score", "compare", "rescore", "bench", "ftc", "addtext", "service", "generate")


def _quiet_logging() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight loading/saving bars; larev's own bars stay
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("httpx", "httpcore", "transformers", "urllib3", "botocore", "s3fs", "fsspec"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _apply_prefect_environment() -> None:
    """Make Prefect read the PREFECT_* variables set above. Prefect builds its settings (API URL, logging) when it
    is first imported, which resolving the parameters already did; without this the runs went to a temporary
    server whatever --server said, and larev's log lines never reached the UI."""
    import prefect.context
    from prefect.settings import get_current_settings

    prefect.context.refresh_global_settings_context()
    # what Prefect's setup_logging does for extra loggers (send their records to the run's logs), without
    # re-applying its whole logging config: that would also change the levels the console shows today
    api_handlers = logging.getLogger("prefect.extra").handlers
    for name in get_current_settings().logging.extra_loggers:
        extra = logging.getLogger(name)
        extra.handlers.extend(h for h in api_handlers if h not in extra.handlers)


def main(argv: list[str] | None = None) -> int:
    from pydantic import ValidationError

    from flows.cli.options import resolve
    from flows.cli.parser import build_parser, commands
    from larev.errors import LarevError

    args = build_parser().parse_args(argv)
    try:
        key = getattr(args, "params_command", None)
        args.params = resolve(commands()[key], args) if key else None
        if getattr(args, "print_params", False):
            print(json.dumps(args.params.model_dump(mode="json"), indent=2))
            return 0
        if not args.verbose:
            os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # no telemetry calls from an offline box
        from flows.cli.preflight import check_inputs

        check_inputs(args)  # bad input fails here, in about a second, before any server or flow starts
        if args.command in _NEEDS_API and getattr(args, "bench", None) != "gpu":  # the GPU check: no server
            from flows.server import choose_api
            from flows.service import heartbeat_environment

            heartbeat_environment()  # a run whose process dies is then marked Crashed (flows/service.py)
            os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "larev")  # larev's log lines in the run's Logs tab
            # larev lines logged outside any run (a benchmark's measurements) stay on the console, without a warning
            os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
            args.api, args.api_boot = choose_api(args.server)
        _apply_prefect_environment()
        _quiet_logging()
        return args.func(args)
    except (LarevError, ValidationError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
