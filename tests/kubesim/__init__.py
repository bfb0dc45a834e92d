"""Contract tests for kubesim, through the official client, kubectl and real pynvml."""
