"""What larev needs to run as a service without Prefect: the inbox ledger of scored rationale files."""
