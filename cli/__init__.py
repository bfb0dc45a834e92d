"""`gpuctl`: the portal's command-line client. Standalone: it talks to the REST API and the job
websockets over the network and imports nothing of the portal."""
