"""What every operation carries: its deadline and its telemetry. Imports nothing of the package."""
