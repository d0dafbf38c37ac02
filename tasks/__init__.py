"""larev's Prefect tasks: thin wrappers that read artifacts, call the core, write artifacts and return refs."""

import logging

# larev's own log lines (resumed checkpoints, fallbacks, per-epoch losses) are INFO: let them through wherever a
# task runs, also in a worker's flow-run process, which configures no logging of its own. Prefect sends them to
# the run's Logs tab when PREFECT_LOGGING_EXTRA_LOGGERS names "larev" (the CLI and the deployments set it).
if logging.getLogger("larev").level == logging.NOTSET:
    logging.getLogger("larev").setLevel(logging.INFO)
