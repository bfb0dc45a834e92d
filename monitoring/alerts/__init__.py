"""Alerts: rules evaluated by the leading controller over the GPUs' latest samples and the
portal's own figures; silences; the firing → acknowledged → resolved lifecycle."""
