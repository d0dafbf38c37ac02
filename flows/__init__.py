"""larev's Prefect flows (one per file), the command line and the service set-up."""
