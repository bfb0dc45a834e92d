"""Node agent: reads GPUs through pynvml and posts samples (standalone: no Django)."""
